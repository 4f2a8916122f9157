/* kern_gemm.h — dense GEMM with fused epilogues. Part of kern.
 *
 * Computes, for every batch index,
 *
 *     C = out_scale * ( act( alpha * op(A) op(B) + beta * C + bias ) + residual )
 *
 * with op(X) = X or X^T, f32 accumulation, and the epilogue (alpha, beta,
 * bias, activation, residual, scale) applied while the output tile is stored,
 * never as a second pass over C. With the defaults (params all zero) this is
 * torch.matmul(A, B) (and with trans_b = 1 and a bias, torch.nn.functional.
 * linear(A, W, bias)); GELU matches torch.nn.functional.gelu with
 * approximate='none' / 'tanh', SiLU torch.nn.functional.silu.
 *
 * Layouts (all shapes/strides in elements, any non-negative strides):
 *   a: [..., M, K]   ([..., K, M] with trans_a)
 *   b: [..., K, N]   ([..., N, K] with trans_b: a torch Linear weight)
 *   c: [..., M, N]   its batch dims must equal the broadcast of a's and b's
 *                    batch dims (numpy rules; stride 0 or size 1 broadcasts,
 *                    e.g. one 2-D weight for every batch)
 *   bias: 1-D [N] (one value per column, torch Linear), or [M] with
 *         bias_per_row; any stride. residual: broadcastable to c.
 * dtypes: a and b f32, bf16 or f16 (the same for both); c f32, bf16 or f16
 * (independent of the inputs); bias/residual any of the three. Products are
 * accumulated in f32; bf16/f16 outputs are rounded to nearest even once.
 * beta = 0 (default) never reads C, so NaN garbage in C does not leak.
 *
 * Params (zero-initialise; zero = default):
 *   trans_a, trans_b     0 = as stored
 *   alpha_set, alpha     alpha_set = 0 means alpha = 1 (alpha = 0 is a real
 *                        value, hence the flag: with alpha_set, alpha is
 *                        used as given)
 *   beta                 0 = C is write-only
 *   epilogue             kern_base.h's kern_epilogue, every option supported:
 *     .bias, .bias_per_row   NULL = none
 *     .act                 kern_act: KERN_ACT_NONE (0), _GELU, _GELU_TANH,
 *                          _RELU, _SILU
 *     .residual            NULL = none. It may be c itself (the same
 *                          view): c = act(...) + c, every element read
 *                          before it is written (with several k passes the
 *                          partial sums wait in scratch, not in c)
 *     .out_scale           0 = 1.0 (a zero scale is not expressible; it would
 *                          only produce zeros)
 *     .glu                 nonzero: the gated epilogue (kern_base.h): op(b)'s
 *                          N columns are glu groups (kern_glu_pack), c is
 *                          [..., M, N/2], bias [N] in the packed order;
 *                          beta must be 0
 *   packed_b             a B prepacked by kern_gemm_pack_b; then b must be
 *                        NULL and the packed B is used for every batch
 *   workspace, workspace_size   caller scratch of at least
 *                        kern_gemm_workspace_size() bytes; NULL = the
 *                        context's reusable scratch
 *   kern_gemm_params_defaults(&p) shows the resolved values.
 *
 * Prepacking: kern_gemm_pack_b(ctx, b, &pb, &pack_params) packs a 2-D
 * weight once (b is [K,N], or [N,K] with pack_params.trans_b) into the panel
 * layout the kernels stream (f32 and f16 weights become f32 panels, bf16
 * stays bf16 in k-pairs), for any M and any ISA level.
 * kern_gemm_packed_b_get_info tells its shape, dtypes and bytes. Free it
 * with kern_gemm_packed_b_free(ctx, pb) using a context with the same
 * allocator.
 *
 * Errors (nothing is written on error; the message names the operands):
 *   KERN_ERR_ARG    NULL a/c/params pointers, b given together with
 *                   packed_b (or neither), C overlapping A, B, bias or
 *                   residual (other than the residual c itself), a too
 *                   small workspace, a bad act value
 *   KERN_ERR_SHAPE  ndim < 2, inner dimensions that disagree, batch dims
 *                   that do not broadcast, c with the wrong shape, bias of
 *                   the wrong length, residual that does not broadcast to c,
 *                   a packed B with another K
 *   KERN_ERR_DTYPE  a/b not f32/bf16/f16 or different, c/bias/residual not
 *                   float, a packed B of another dtype than a
 *   KERN_ERR_LAYOUT negative strides, c with stride 0 on a dim of size > 1
 *
 * Paths (chosen at run time from kern_ctx_features(ctx)): AVX-512F f32
 * microkernel 12x32 (small-M kernels 8x32, 4x32, 2x32, 1x32),
 * AVX-512-BF16 (vdpbf16ps) 12x32 for bf16 inputs, AVX2+FMA 6x16, NEON 4x16,
 * portable scalar 4x16. f16 inputs are converted to f32 while packing (F16C
 * on x86). M <= 16 (decode) streams B (prepacked, or a row-major f32 B)
 * without repacking it. Results are identical for any thread count.
 *
 * Example (y = gelu(x W^T + b), x [T,K], W [N,K] as in torch Linear):
 *
 *     kern_tensor x = kern_tensor_2d(xp, KERN_F32, T, K);
 *     kern_tensor w = kern_tensor_2d(wp, KERN_F32, N, K);
 *     kern_tensor b = kern_tensor_1d(bp, KERN_F32, N);
 *     kern_tensor y = kern_tensor_2d(yp, KERN_F32, T, N);
 *     kern_gemm_params p = {0};
 *     p.trans_b = 1; p.epilogue.bias = &b; p.epilogue.act = KERN_ACT_GELU;
 *     if (kern_gemm(NULL, &x, &w, &y, &p) != KERN_OK) puts(kern_last_error());
 *
 *     // the same weight prepacked once, reused for every call:
 *     kern_gemm_packed_b *pw = NULL;
 *     kern_gemm_pack_params pp = {0};
 *     pp.trans_b = 1;
 *     if (kern_gemm_pack_b(NULL, &w, &pw, &pp) != KERN_OK) puts(kern_last_error());
 *     p.packed_b = pw;
 *     p.trans_b = 0; // ignored with packed_b: the packed B is op(B) already
 *     kern_gemm(NULL, &x, NULL, &y, &p);
 *     kern_gemm_packed_b_free(NULL, pw);
 */
#ifndef KERN_GEMM_H
#define KERN_GEMM_H

#include "kern_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque prepacked B (see kern_gemm_pack_b). */
typedef struct kern_gemm_packed_b kern_gemm_packed_b;

typedef struct kern_gemm_params {
    int trans_a;   /* nonzero: a is [..., K, M] */
    int trans_b;   /* nonzero: b is [..., N, K] */
    int alpha_set; /* 0: alpha = 1; nonzero: alpha as given, 0 included */
    float alpha;
    float beta; /* 0: C is not read */
    kern_epilogue epilogue; /* bias, act, residual, out_scale (kern_base.h) */
    const kern_gemm_packed_b *packed_b; /* with b = NULL */
    void *workspace;                    /* optional caller scratch */
    size_t workspace_size;
} kern_gemm_params;

/* Options of kern_gemm_pack_b; zero = defaults. */
typedef struct kern_gemm_pack_params {
    int trans_b; /* nonzero: b is [N, K] (a torch Linear weight) */
} kern_gemm_pack_params;

/* What kern_gemm_packed_b_get_info reports. */
typedef struct kern_gemm_packed_b_info {
    int64_t k, n;          /* the logical B is [K, N] */
    kern_dtype dtype;      /* the dtype it was packed from (a must match) */
    kern_dtype panel_dtype; /* KERN_F32 (f32/f16 sources) or KERN_BF16 */
    size_t bytes;          /* memory held, handle included */
    /* The panel layout does not depend on the ISA: any context (any ISA
     * level, any thread count) can use the handle. */
} kern_gemm_packed_b_info;

/* Resolves the defaults in place: alpha 1 with alpha_set = 1 when
 * alpha_set is 0, epilogue.out_scale 0 -> 1. beta 0 is a real value (C is
 * not read) and stays. NULL is ignored. */
KERN_API void kern_gemm_params_defaults(kern_gemm_params *p);

/* C = out_scale * (act(alpha op(A) op(B) + beta C + bias) + residual). */
KERN_API kern_status kern_gemm(kern_ctx *ctx, const kern_tensor *a,
                               const kern_tensor *b, const kern_tensor *c,
                               const kern_gemm_params *params);
/* Scratch bytes kern_gemm needs for these operands on this context (its
 * thread count and ISA level). Validates like kern_gemm. */
KERN_API kern_status kern_gemm_workspace_size(kern_ctx *ctx, const kern_tensor *a,
                                              const kern_tensor *b,
                                              const kern_tensor *c,
                                              const kern_gemm_params *params,
                                              size_t *bytes);
/* Packs a 2-D B ([K,N], or [N,K] with params->trans_b; f32/bf16/f16, any
 * strides). *out is allocated with the context's allocator; params may be
 * NULL. */
KERN_API kern_status kern_gemm_pack_b(kern_ctx *ctx, const kern_tensor *b,
                                      kern_gemm_packed_b **out,
                                      const kern_gemm_pack_params *params);
/* Frees a packed B (NULL is ignored) with the allocator of ctx (NULL = the
 * default context): pass a context with the allocator that packed it. */
KERN_API void kern_gemm_packed_b_free(kern_ctx *ctx, kern_gemm_packed_b *p);
/* Shape, dtypes and bytes of a packed B. */
KERN_API kern_status kern_gemm_packed_b_get_info(const kern_gemm_packed_b *p,
                                                 kern_gemm_packed_b_info *out);

#ifdef __cplusplus
}
#endif
#endif /* KERN_GEMM_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_GEMM_IMPLEMENTED)
KERN__IMPL_DIAG_BEGIN
#define KERN_GEMM_IMPLEMENTED

#include <math.h>
#include <stdlib.h>
#ifdef KERN_X86
#include <immintrin.h>
#endif
#ifdef KERN_NEON
#include <arm_neon.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================
 * Internal contract, shared with other kernel families (attention tiles,
 * int8, 2:4 sparse may call these directly; names keep the kern__gemm_
 * prefix and are not a stable public API).
 *
 * Panels. A "panel" of width W packs W rows of op(A) (or W columns of
 * op(B)) for a range of k, k-major:
 *   f32 format  (KERN__GEMM_FMT_F32):  p[k*W + w]           float
 *   pair format (KERN__GEMM_FMT_PAIR): p[q*W + w]           uint32 holding
 *       the bf16 bits of (k = 2q) in the low half and (k = 2q+1) in the high
 *       half (0 past the end of k): what vdpbf16ps multiplies.
 *   Rows/columns past the valid count are zero, so a microkernel always
 *   computes a full MR x NR tile.
 * A "k step" is one k (f32) or one k pair (pair format).
 *
 * Microkernel (kern__gemm_ukr):
 *     ukr(ks, a, b, ldb, t, ldt, acc)
 *   a   : A panel of width MR, ks k steps, contiguous (a[s*MR + i]).
 *   b   : B panel, row s at b + s*ldb (ldb in 4-byte elements, >= NR;
 *         ldb = 32 reads NR = 16 halves of the 32-wide prepacked panels).
 *         Reads exactly NR elements per row.
 *   t   : MR x NR float tile, row stride ldt. acc = 0 overwrites it with
 *         A*B; acc != 0 adds A*B to it. ks = 0 is allowed.
 *   Sums over k in increasing order, one FMA (or vdpbf16ps) chain per
 *   output element, so the same inputs give the same bits whatever tile or
 *   thread computes them. No edge handling is needed inside the k loop
 *   (panels are zero padded); the m x n edge is handled by the store.
 *
 * Store / epilogue (kern__gemm_store_fn): kern_base.h's shared GEMM
 * epilogue tile, kern__v_epi_tile__ISA / kern__s_epi_tile:
 *     store(e, i0, j0, t, ldt, m, n)
 *   writes the m x n top-left corner of tile t to rows i0.., columns j0..
 *   of e->dst, computing v = alpha * t (+ beta * src), then
 *   v = out_scale * (act(v + bias) + residual) (a pass that is not the
 *   last one has no bias, act, residual or scale), rounded to e->dst_dt.
 *   src/dst columns are offset by src_j0/dst_j0 (for column-blocked
 *   scratch); bias and residual use the global (i, j).
 * ====================================================================== */

#define KERN__GEMM_FMT_F32 0
#define KERN__GEMM_FMT_PAIR 1
/* A panels of the AMX kernels (A side only; B stays in pair format): k in
 * chunks of 32 (16 pairs), each chunk W rows of 32 bf16 (64 bytes, a tile
 * row), chunk after chunk: p[c*W*32 + w*32 + kk] bf16 for k = 32c + kk,
 * zero past the valid rows and past k (a whole chunk is always there). */
#define KERN__GEMM_FMT_AMXA 2
#define KERN__GEMM_PW 32 /* width of prepacked B panels */
#define KERN__GEMM_MAGIC 0x6b47454du
#define KERN__GEMM_SMALL_M 16 /* up to here the dedicated small-M kernels */
#define KERN__GEMM_STREAM_M 512 /* up to here B is streamed, not packed */
#define KERN__GEMM_STREAM_TILE ((KERN__GEMM_STREAM_M + 16) * KERN__GEMM_PW) /* floats */

typedef void (*kern__gemm_ukr)(int64_t ks, const void *a, const void *b,
                               int64_t ldb, float *t, int64_t ldt, int acc);
/* The same, with A read in place: row i of the micro-panel at a + i*lda,
 * k contiguous (f32 only; M edges still go through a packed panel). */
typedef void (*kern__gemm_ukr_ua)(int64_t ks, const float *a, int64_t lda, const void *b,
                                  int64_t ldb, float *t, int64_t ldt, int acc);
typedef void (*kern__gemm_store_fn)(const kern__epi *e, int64_t i0,
                                    int64_t j0, const float *t, int64_t ldt,
                                    int m, int n);
/* Packs nw (<= W) rows/columns w of a source with element (w, k) at
 * src + (w*sw + k*sk)*size(dt), k in [0, kc), into one panel of width W. */
typedef void (*kern__gemm_pack_fn)(void *dst, int W, const char *src,
                                   kern_dtype dt, int64_t sw, int64_t sk,
                                   int nw, int64_t kc, int fmt);

struct kern_gemm_packed_b {
    uint32_t magic;
    int fmt;
    kern_dtype dtype; /* source dtype */
    int64_t k, n;
    int64_t ks;       /* k steps per panel (k, or ceil(k/2) in pair format) */
    int64_t npanels;  /* ceil(n / 32) */
    void *data;       /* npanels * ks * 32 four-byte elements */
};

/* ------------------------------------------------------------------ blocking
 * The one table of blocking sizes. mr x nr: microkernel tile. kc: k
 * elements per pass over C. nb: columns per task; every A micro-panel of a
 * task streams the task's kc x nb block of packed B. nc: columns of B packed
 * per pass (kept in L3). mb: rows per task (a multiple of mr). mc: rows of A
 * packed per pass (bounds the A buffer).
 * Chosen by measurement on Zen 4 (1 MiB L2, 32 MiB L3), not by the classic
 * "B block in L2" rule: the cost that dominates is each pass's round trip
 * of C, so kc is large (1024: 4 KiB-strided C tiles are read and written
 * once per 1024 k); the A micro-panel (48 KiB) then lives in L2 and B
 * streams from L3 at ~5 bytes/cycle, which Zen 4 sustains. kc = 320 with B
 * in L2 measured 84% of peak at 2048^3, kc = 1024 90%.
 * AVX2 (Zen 3: 32 KiB L1d, 512 KiB L2) uses the classic order instead:
 * kc = 256 so the 16 KiB B micro-panel (256 x 16 floats) stays in L1 while
 * the task's mb = 144 rows of A (144 KiB, in L2) pass under it, columns
 * outer; the 6x16 kernel needs 64 bytes of B per 6 cycles, twice the
 * AVX-512 kernel's share, too much to stream from L3 (the rows-outer order
 * with kc = 512 dropped to ~60% of peak when other processes shared L3).
 * Its streaming path stops at M = 128: above that the general path's
 * one-time B packing costs less than re-reading A for every 32 columns. */
typedef struct kern__gemm_cfg {
    const char *name;
    int mr, nr, kc, nb, nc, mb, mc;
    int stream_m;  /* up to this M the streaming path (<= KERN__GEMM_STREAM_M) */
    int col_outer; /* tile order in a task: 1 = columns outer (the B
                    * micro-panel stays in L1 while the task's A rows pass
                    * under it), 0 = rows outer (A micro-panel in L1) */
} kern__gemm_cfg;

enum {
    KERN__GEMM_CFG_SCALAR = 0,
    KERN__GEMM_CFG_AVX2,
    KERN__GEMM_CFG_AVX512,
    KERN__GEMM_CFG_AVX512BF16,
    KERN__GEMM_CFG_NEON,
    KERN__GEMM_CFG_AVX512_XEON,
    KERN__GEMM_CFG_AMX,
    KERN__GEMM_CFG_COUNT
};

/* The AVX2 row of the table; overridable to retune on another core. */
#ifndef KERN__GEMM_AVX2_KC
#define KERN__GEMM_AVX2_KC 256
#endif
#ifndef KERN__GEMM_AVX2_NB
#define KERN__GEMM_AVX2_NB 768
#endif
#ifndef KERN__GEMM_AVX2_MB
#define KERN__GEMM_AVX2_MB 144
#endif
#ifndef KERN__GEMM_AVX2_SM
#define KERN__GEMM_AVX2_SM 128
#endif
#ifndef KERN__GEMM_AVX2_CO
#define KERN__GEMM_AVX2_CO 1
#endif
/* The AMX row; overridable to retune. */
#ifndef KERN__GEMM_AMX_KC
#define KERN__GEMM_AMX_KC 2048
#endif
#ifndef KERN__GEMM_AMX_NB
#define KERN__GEMM_AMX_NB 384
#endif
#ifndef KERN__GEMM_AMX_MB
#define KERN__GEMM_AMX_MB 128
#endif
#ifndef KERN__GEMM_AMX_CO
#define KERN__GEMM_AMX_CO 0
#endif
#ifndef KERN__GEMM_XEON_KC
#define KERN__GEMM_XEON_KC 512
#endif
#ifndef KERN__GEMM_XEON_NB
#define KERN__GEMM_XEON_NB 384
#endif
#ifndef KERN__GEMM_XEON_MB
#define KERN__GEMM_XEON_MB 192
#endif
#ifndef KERN__GEMM_XEON_CO
#define KERN__GEMM_XEON_CO 0
#endif
static const kern__gemm_cfg kern__gemm_cfgs[KERN__GEMM_CFG_COUNT] = {
    /* name          mr  nr    kc    nb    nc   mb    mc stream_m col_outer */
    {"scalar",        4, 16,  256,  256, 2048,  64, 1024,  512, 0},
    {"avx2",          6, 16, KERN__GEMM_AVX2_KC, KERN__GEMM_AVX2_NB, 2048, KERN__GEMM_AVX2_MB, 2048,
                                                                    KERN__GEMM_AVX2_SM, KERN__GEMM_AVX2_CO},
    {"avx512",       12, 32, 1024,  768, 2048,  96, 2048,  512, 0},
    {"avx512bf16",   12, 32, 2048,  768, 2048,  96, 2048,  512, 0},
    {"neon",          4, 16,  256,  256, 2048,  64, 1024,  512, 0},
    /* Intel AVX-512 with two FMA ports (KERN_UARCH_XEON_AVX512; measured
     * on a Xeon family 6 model 0xa7 under KVM: 48 KiB L1d, 2 MiB L2, f32
     * peak 243 GFLOP/s a core). The kernel needs 128 bytes of B per 12
     * cycles, twice the Zen 4 rate and more than the mesh L3 feeds a core,
     * so the task's B block (kc x nb = 768 KiB) lives in L2 and the 24 KiB
     * A micro-panel in L1. 4096^3, 1 thread: the Zen 4 row 0.65 of the FMA
     * peak; kc 256-384 with nb 384-1024: 0.85; kc 512 / nb 384 / mb 192:
     * 0.86; columns outer, kc 256 (B micro-panel in L1, A from L2): 0.80;
     * nc 4096: level. The streaming path stops at M = 128: 512^3 takes
     * 1.47 ms on it, 1.35 ms on this blocking. Overridable with
     * KERN__GEMM_XEON_*. BERT-base B8 L128 f32 (M 1024, K 768 and 3072),
     * 1 thread, min of 2 alternated runs: kc 512 1.050 s, 384 1.064, 768
     * 1.085; mb 96 1.051. */
    {"avx512_xeon",  12, 32, KERN__GEMM_XEON_KC, KERN__GEMM_XEON_NB, 2048, KERN__GEMM_XEON_MB, 2048,  128,
                                                                    KERN__GEMM_XEON_CO},
    /* AMX tiles (KERN_ISA_AMX, bf16 inputs): a 32 x 32 C block in four
     * tiles, 16 FLOP per byte of A and B tile loads, so at 1024 FLOP a
     * cycle the kernel needs 64 bytes a cycle: more than L2 gives (46
     * measured), and an A and a B micro-panel fit L1 together only at kc
     * 256, where the C round trip of each pass costs more. Measured on the
     * Xeon (4096^3, 1 thread, prepacked B; kc/nb/mb): 512/384/192 182 ms,
     * 1024/384/256 144, 1024/768/256 157, 2048/384/64 134 with the B
     * transpose-pack 10 % slower at 1024^3; columns outer slower in every
     * row. With A read in place and the tile store (2026-11-30, B as
     * given, min of 2 alternated runs, 1 / 2 threads, ms): 1024/384/256
     * -> 2048/384/128: 2048^3 21.8 / 10.2 -> 17.7 / 8.8, 2048 x 4096^2
     * 83.0 / 41.2 -> 77.0 / 40.1, 4096 x 64 x 4096 2.78 / 1.46 -> 2.39 /
     * 1.26, 4096^3 164 / 85 -> 167 / 81. Software prefetch of the next A
     * and B chunks (distance 1-2, either or both) was 5-40 % slower. No
     * streaming path: M <= 2 against a prepacked B takes the
     * class's AVX-512 table (kern__gemm_amx_alt, KERN__GEMM_AMX_MIN_M). */
    {"amx",          32, 32, KERN__GEMM_AMX_KC, KERN__GEMM_AMX_NB, 2048, KERN__GEMM_AMX_MB, 2048,
                                                                     0, KERN__GEMM_AMX_CO},
};

/* ---------------------------------------------------------- scalar packing */

static uint32_t kern__gemm_ld16(const char *p, int64_t i) {
    return ((const uint16_t *)(const void *)p)[i];
}

static void kern__gemm_pack__ref(void *dst, int W, const char *src, kern_dtype dt,
                                 int64_t sw, int64_t sk, int nw, int64_t kc, int fmt) {
    int64_t k;
    int w;
    if (fmt == KERN__GEMM_FMT_F32) {
        float *d = (float *)dst;
        const int64_t es = (int64_t)kern_dtype_size(dt);
        for (k = 0; k < kc; k++)
            for (w = 0; w < W; w++)
                d[k * W + w] = w < nw ? kern__s_load_f32(src + (w * sw + k * sk) * es, dt, 1) : 0.0f;
    } else if (fmt == KERN__GEMM_FMT_AMXA) {
        uint16_t *d = (uint16_t *)dst;
        int64_t kp = (kc + 31) / 32 * 32;
        for (k = 0; k < kp; k++)
            for (w = 0; w < W; w++)
                d[(k / 32) * W * 32 + w * 32 + k % 32] =
                    w < nw && k < kc ? (uint16_t)kern__gemm_ld16(src, w * sw + k * sk) : 0;
    } else {
        uint32_t *d = (uint32_t *)dst;
        int64_t q, kq = (kc + 1) / 2;
        for (q = 0; q < kq; q++)
            for (w = 0; w < W; w++) {
                uint32_t lo = 0, hi = 0;
                if (w < nw) {
                    lo = kern__gemm_ld16(src, w * sw + 2 * q * sk);
                    if (2 * q + 1 < kc) hi = kern__gemm_ld16(src, w * sw + (2 * q + 1) * sk);
                }
                d[q * W + w] = lo | (hi << 16);
            }
    }
}

/* Converts part of a prepacked pair-format panel (width PW) into an f32
 * panel of width W: columns [c0, c0+W) of the panel, k in [k0, k0+kc)
 * (k0 even). Used when a bf16 weight packed for vdpbf16ps runs on a
 * context without AVX-512-BF16. */
static void kern__gemm_unpair(float *dst, int W, const uint32_t *panel, int c0,
                              int64_t k0, int64_t kc) {
    int64_t k;
    int w;
    for (k = 0; k < kc; k++) {
        const uint32_t *row = panel + ((k0 + k) / 2) * KERN__GEMM_PW + c0;
        int sh = ((k0 + k) & 1) ? 16 : 0;
        for (w = 0; w < W; w++)
            dst[k * W + w] = kern_bf16_to_f32((uint16_t)(row[w] >> sh));
    }
}

/* --------------------------------------------------- scalar microkernel */

static void kern__gemm_f32_4x16__ref(int64_t ks, const void *ap, const void *bp,
                                     int64_t ldb, float *t, int64_t ldt, int acc) {
    const float *a = (const float *)ap, *b = (const float *)bp;
    float c[4][16];
    int64_t s;
    int i, j;
    for (i = 0; i < 4; i++)
        for (j = 0; j < 16; j++) c[i][j] = acc ? t[i * ldt + j] : 0.0f;
    for (s = 0; s < ks; s++) {
        const float *br = b + s * ldb;
        for (i = 0; i < 4; i++) {
            float ai = a[s * 4 + i];
            for (j = 0; j < 16; j++) c[i][j] += ai * br[j];
        }
    }
    for (i = 0; i < 4; i++)
        for (j = 0; j < 16; j++) t[i * ldt + j] = c[i][j];
}

#if defined(__GNUC__) || defined(__clang__)
#define KERN__GEMM_PREFETCH(p, rw) __builtin_prefetch((const void *)(p), rw, 3)
#else
#define KERN__GEMM_PREFETCH(p, rw) ((void)(p))
#endif

/* Row lists for the register-blocked kernels (explicit, so every compiler
 * keeps the accumulators in registers at -O2). */
#define KERN__GEMM_R1(X) X(0)
#define KERN__GEMM_R2(X) X(0) X(1)
#define KERN__GEMM_R4(X) X(0) X(1) X(2) X(3)
#define KERN__GEMM_R6(X) KERN__GEMM_R4(X) X(4) X(5)
#define KERN__GEMM_R8(X) KERN__GEMM_R4(X) X(4) X(5) X(6) X(7)
#define KERN__GEMM_R12(X) KERN__GEMM_R8(X) X(8) X(9) X(10) X(11)
#define KERN__GEMM_R16(X) KERN__GEMM_R12(X) X(12) X(13) X(14) X(15)

/* ===================================================================== x86 */
#ifdef KERN_X86

/* ------------------------------------------------------------ AVX2 packing */

/* Packs for the AVX2 kernels: unit-stride rows of the panel (w along the
 * source's unit stride) are copied 8 values at a time; a source with k
 * contiguous goes through 8x8 register transposes. */
KERN_TARGET_AVX2 static void kern__gemm_pack__avx2(void *dst, int W, const char *src,
                                                   kern_dtype dt, int64_t sw, int64_t sk,
                                                   int nw, int64_t kc, int fmt) {
    if (fmt == KERN__GEMM_FMT_F32 && sw == 1 && (W % 8) == 0) {
        float *d = (float *)dst;
        size_t es = kern_dtype_size(dt);
        int64_t k;
        int w;
        for (k = 0; k < kc; k++) {
            const char *s = src + k * sk * (int64_t)es;
            for (w = 0; w < W; w += 8) {
                int nn = nw - w < 0 ? 0 : (nw - w > 8 ? 8 : nw - w);
                __m256 v = nn ? kern__v_load_f32__avx2(s + w * (int64_t)es, dt, nn) : _mm256_setzero_ps();
                _mm256_storeu_ps(d + k * W + w, v);
            }
        }
        return;
    }
    if (fmt == KERN__GEMM_FMT_F32 && sk == 1) {
        /* k contiguous in the source (a row-major A, a [N,K] weight):
         * 8 rows x 8 k loaded and transposed in registers. */
        float *d = (float *)dst;
        int64_t es = (int64_t)kern_dtype_size(dt), k0;
        int w0;
        for (w0 = 0; w0 < W; w0 += 8) {
            int rows = nw - w0 < 0 ? 0 : (nw - w0 > 8 ? 8 : nw - w0);
            int ws = W - w0 > 8 ? 8 : W - w0;
            for (k0 = 0; k0 < kc; k0 += 8) {
                int kk = kc - k0 > 8 ? 8 : (int)(kc - k0), q;
                __m256 r[8];
                for (q = 0; q < 8; q++)
                    r[q] = q < rows ? kern__v_load_f32__avx2(src + ((w0 + q) * sw + k0) * es, dt, kk)
                                    : _mm256_setzero_ps();
                kern__v_tr8__avx2(r);
                for (q = 0; q < kk; q++) {
                    float *o = d + (k0 + q) * W + w0;
                    /* a narrow panel (W < 8) stores 8 lanes and lets the
                     * next rows' stores overwrite the spill, except where
                     * the spill would pass the panel's end (the last
                     * 8 / W rows: panels of other tasks may follow) */
                    if (ws == 8 || (W < 8 && (kc - k0 - q) * W >= 8)) _mm256_storeu_ps(o, r[q]);
                    else kern__storen__avx2(o, r[q], ws);
                }
            }
        }
        return;
    }
    kern__gemm_pack__ref(dst, W, src, dt, sw, sk, nw, kc, fmt);
}

/* -------------------------------------------------- AVX2 microkernel 6x16 */

#define KERN__GEMM_A2_DECL(i) __m256 c##i##_0, c##i##_1;
#define KERN__GEMM_A2_INIT(i)                                                 \
    c##i##_0 = acc ? _mm256_loadu_ps(t + i * ldt) : _mm256_setzero_ps();     \
    c##i##_1 = acc ? _mm256_loadu_ps(t + i * ldt + 8) : _mm256_setzero_ps();
/* row i's accumulators += A * X0, X1 (and X2, X3) */
#define KERN__GEMM_A2_FMA(i, A, X)                                            \
    c##i##_0 = _mm256_fmadd_ps(A, X##0, c##i##_0);                            \
    c##i##_1 = _mm256_fmadd_ps(A, X##1, c##i##_1);
#define KERN__GEMM_A4_FMA(i, A, X)                                            \
    KERN__GEMM_A2_FMA(i, A, X)                                                \
    c##i##_2 = _mm256_fmadd_ps(A, X##2, c##i##_2);                            \
    c##i##_3 = _mm256_fmadd_ps(A, X##3, c##i##_3);
#define KERN__GEMM_A2_STEP(i)                                                 \
    {                                                                         \
        __m256 ai = _mm256_broadcast_ss(a + i);                               \
        KERN__GEMM_A2_FMA(i, ai, b)                                           \
    }
#define KERN__GEMM_A2_SAVE(i)                                                 \
    _mm256_storeu_ps(t + i * ldt, c##i##_0);                                  \
    _mm256_storeu_ps(t + i * ldt + 8, c##i##_1);

KERN_TARGET_AVX2 static void kern__gemm_f32_6x16__avx2(int64_t ks, const void *ap,
                                                       const void *bp, int64_t ldb,
                                                       float *t, int64_t ldt, int acc) {
    const float *a = (const float *)ap, *b = (const float *)bp;
    int64_t s;
    KERN__GEMM_R6(KERN__GEMM_A2_DECL)
    KERN__GEMM_R6(KERN__GEMM_A2_INIT)
    for (s = 0; s < ks; s++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        KERN__GEMM_R6(KERN__GEMM_A2_STEP)
        a += 6;
        b += ldb;
    }
    KERN__GEMM_R6(KERN__GEMM_A2_SAVE)
}

/* Small-M kernels of the streaming path (M <= 16): the 6x16 kernel at M = 1
 * issues 12 FMAs per k for 2 useful ones, so a decode GEMV against packed
 * panels ran FMA-bound at half the DRAM rate. 1x32 and 2x32 keep one chain
 * per output vector (4 and 8 chains), 4x16 eight; each output element is
 * the same k-ordered FMA chain as in the 6x16 kernel, so the same bits. */
/* 4x16 reads each 32-column row in two halves, one call each, which the
 * hardware prefetchers follow poorly. It prefetches pfo_ elements ahead:
 * in a 32-wide panel (ldb = 32) 16 rows ahead; in a row-major B read in
 * place (the task walks its column groups along each row, a run of rows
 * at a time) the next 128 bytes of the same row. Zen 3, 4096 x 4096, 1
 * thread, ms: prepacked f32 M = 4 4.5 -> 3.9, M = 8 6.5 -> 5.6; f32 rows
 * M = 4 5.2 -> 4.0 (16 rows ahead: 4.3), M = 8 8.3 -> 7.2; bf16 rows
 * M = 4 3.55 -> 3.03. The 32-wide kernels read whole rows in order and
 * lose 5-15 % at M = 1 with either hint. */
#define KERN__GEMM_A2_PFB(b, ldb)                                             \
    _mm_prefetch((const char *)(b + pfo_), _MM_HINT_T0);                      \
    _mm_prefetch((const char *)(b + pfo_) + 64, _MM_HINT_T0);
#define KERN__GEMM_A4_DECL(i) __m256 c##i##_0, c##i##_1, c##i##_2, c##i##_3;
#define KERN__GEMM_A4_INIT(i)                                                 \
    KERN__GEMM_A2_INIT(i)                                                     \
    c##i##_2 = acc ? _mm256_loadu_ps(t + i * ldt + 16) : _mm256_setzero_ps(); \
    c##i##_3 = acc ? _mm256_loadu_ps(t + i * ldt + 24) : _mm256_setzero_ps();
#define KERN__GEMM_A4_STEP(i)                                                 \
    {                                                                         \
        __m256 ai = _mm256_broadcast_ss(a + i);                               \
        KERN__GEMM_A4_FMA(i, ai, b)                                           \
    }
#define KERN__GEMM_A4_SAVE(i)                                                 \
    KERN__GEMM_A2_SAVE(i)                                                     \
    _mm256_storeu_ps(t + i * ldt + 16, c##i##_2);                             \
    _mm256_storeu_ps(t + i * ldt + 24, c##i##_3);
/* A 32-wide small-M kernel over B elements of type BT: LOAD4 sets b0..b3
 * (32 columns as f32) from row b, INIT / SAVE move row i's accumulators
 * from / to the tile (the bf16 "h" kernels below keep a permuted order). */
#define KERN__GEMM_A2_KERNEL32(NAME, MR, RN, BT, LOAD4, INIT, SAVE)          \
    KERN_TARGET_AVX2 static void NAME(int64_t ks, const void *ap, const void *bp, \
                                      int64_t ldb, float *t, int64_t ldt, int acc) { \
        const float *a = (const float *)ap;                                   \
        const BT *b = (const BT *)bp;                                         \
        int64_t s;                                                            \
        RN(KERN__GEMM_A4_DECL)                                                \
        RN(INIT)                                                              \
        for (s = 0; s < ks; s++) {                                            \
            __m256 b0, b1, b2, b3;                                            \
            LOAD4(b)                                                          \
            RN(KERN__GEMM_A4_STEP)                                            \
            a += MR;                                                          \
            b += ldb;                                                         \
        }                                                                     \
        RN(SAVE)                                                              \
    }
#define KERN__GEMM_F_LOAD4(p)                                                 \
    b0 = _mm256_loadu_ps(p); b1 = _mm256_loadu_ps(p + 8);                     \
    b2 = _mm256_loadu_ps(p + 16); b3 = _mm256_loadu_ps(p + 24);
KERN__GEMM_A2_KERNEL32(kern__gemm_f32_1x32__avx2, 1, KERN__GEMM_R1, float, KERN__GEMM_F_LOAD4,
                       KERN__GEMM_A4_INIT, KERN__GEMM_A4_SAVE)
KERN__GEMM_A2_KERNEL32(kern__gemm_f32_2x32__avx2, 2, KERN__GEMM_R2, float, KERN__GEMM_F_LOAD4,
                       KERN__GEMM_A4_INIT, KERN__GEMM_A4_SAVE)

KERN_TARGET_AVX2 static void kern__gemm_f32_4x16__avx2(int64_t ks, const void *ap,
                                                       const void *bp, int64_t ldb,
                                                       float *t, int64_t ldt, int acc) {
    const float *a = (const float *)ap, *b = (const float *)bp;
    int64_t s;
    const int64_t pfo_ = ldb == KERN__GEMM_PW ? 16 * ldb : 32;
    KERN__GEMM_R4(KERN__GEMM_A2_DECL)
    KERN__GEMM_R4(KERN__GEMM_A2_INIT)
    for (s = 0; s < ks; s++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        KERN__GEMM_A2_PFB(b, ldb)
        KERN__GEMM_R4(KERN__GEMM_A2_STEP)
        a += 4;
        b += ldb;
    }
    KERN__GEMM_R4(KERN__GEMM_A2_SAVE)
}

/* The same small-M kernels against a bf16 B, widened in registers, for the
 * streaming path on AVX2 (no vdpbf16ps): A f32-packed as above, and B
 * either
 *   rows ("h"): bf16 rows read in place (ldb in bf16 elements), 16
 *       columns widened by two unpacks against zero, which yield columns
 *       {0-3, 8-11} and {4-7, 12-15}: the accumulators keep that order and
 *       the tile is permuted once on load and store (vperm2f128);
 *   pairs ("p"): the prepacked pair format (ldb in 32-bit words, one word
 *       per column per k pair), k even = word << 16, k odd = word & hi.
 * ks counts k (A's steps); with pairs an odd ks ends on the low half.
 * Every output element is still one k-ordered FMA chain of the exact f32
 * values of its A and B elements, as the f32 kernels compute after a bf16
 * B is converted, so the same bits as the general path's. */
#define KERN__GEMM_H_INIT(i, L, H, o)                                         \
    {                                                                         \
        __m256 t0_ = acc ? _mm256_loadu_ps(t + i * ldt + (o)) : _mm256_setzero_ps(); \
        __m256 t1_ = acc ? _mm256_loadu_ps(t + i * ldt + (o) + 8) : _mm256_setzero_ps(); \
        L = _mm256_permute2f128_ps(t0_, t1_, 0x20);                           \
        H = _mm256_permute2f128_ps(t0_, t1_, 0x31);                           \
    }
#define KERN__GEMM_H_SAVE(i, L, H, o)                                         \
    _mm256_storeu_ps(t + i * ldt + (o), _mm256_permute2f128_ps(L, H, 0x20));  \
    _mm256_storeu_ps(t + i * ldt + (o) + 8, _mm256_permute2f128_ps(L, H, 0x31));
#define KERN__GEMM_H4_INIT(i)                                                 \
    KERN__GEMM_H_INIT(i, c##i##_0, c##i##_1, 0) KERN__GEMM_H_INIT(i, c##i##_2, c##i##_3, 16)
#define KERN__GEMM_H4_SAVE(i)                                                 \
    KERN__GEMM_H_SAVE(i, c##i##_0, c##i##_1, 0) KERN__GEMM_H_SAVE(i, c##i##_2, c##i##_3, 16)
#define KERN__GEMM_H2_INIT(i) KERN__GEMM_H_INIT(i, c##i##_0, c##i##_1, 0)
#define KERN__GEMM_H2_SAVE(i) KERN__GEMM_H_SAVE(i, c##i##_0, c##i##_1, 0)
/* 16 bf16 at p as two f32 vectors in the {0-3, 8-11}, {4-7, 12-15} order */
#define KERN__GEMM_H_WIDEN(p, L, H)                                           \
    {                                                                         \
        __m256i x_ = _mm256_loadu_si256((const __m256i *)(const void *)(p));  \
        L = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), x_)); \
        H = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), x_)); \
    }
#define KERN__GEMM_H_LOAD4(p) KERN__GEMM_H_WIDEN(p, b0, b1) KERN__GEMM_H_WIDEN(p + 16, b2, b3)
KERN__GEMM_A2_KERNEL32(kern__gemm_h_1x32__avx2, 1, KERN__GEMM_R1, uint16_t, KERN__GEMM_H_LOAD4,
                       KERN__GEMM_H4_INIT, KERN__GEMM_H4_SAVE)
KERN__GEMM_A2_KERNEL32(kern__gemm_h_2x32__avx2, 2, KERN__GEMM_R2, uint16_t, KERN__GEMM_H_LOAD4,
                       KERN__GEMM_H4_INIT, KERN__GEMM_H4_SAVE)

KERN_TARGET_AVX2 static void kern__gemm_h_4x16__avx2(int64_t ks, const void *ap, const void *bp,
                                                     int64_t ldb, float *t, int64_t ldt, int acc) {
    const float *a = (const float *)ap;
    const uint16_t *b = (const uint16_t *)bp;
    int64_t s;
    const int64_t pfo_ = ldb == KERN__GEMM_PW ? 16 * ldb : 64; /* see KERN__GEMM_A2_PFB */
    KERN__GEMM_R4(KERN__GEMM_A2_DECL)
    KERN__GEMM_R4(KERN__GEMM_H2_INIT)
    for (s = 0; s < ks; s++) {
        __m256 b0, b1;
        KERN__GEMM_H_WIDEN(b, b0, b1)
        _mm_prefetch((const char *)(b + pfo_), _MM_HINT_T0);
        KERN__GEMM_R4(KERN__GEMM_A2_STEP)
        a += 4;
        b += ldb;
    }
    KERN__GEMM_R4(KERN__GEMM_H2_SAVE)
}

/* pairs: the even-k and odd-k halves of 8 words */
#define KERN__GEMM_P_SPLIT(p, E, O)                                           \
    {                                                                         \
        __m256i x_ = _mm256_loadu_si256((const __m256i *)(const void *)(p));  \
        E = _mm256_castsi256_ps(_mm256_slli_epi32(x_, 16));                   \
        O = _mm256_castsi256_ps(_mm256_and_si256(x_, hi_));                   \
    }
#define KERN__GEMM_P4_STEP(i)                                                 \
    {                                                                         \
        __m256 ae = _mm256_broadcast_ss(a + i), ao = _mm256_broadcast_ss(a + MR_ + i); \
        KERN__GEMM_A4_FMA(i, ae, e) KERN__GEMM_A4_FMA(i, ao, o)               \
    }
#define KERN__GEMM_P4_LAST(i)                                                 \
    {                                                                         \
        __m256 ae = _mm256_broadcast_ss(a + i);                               \
        KERN__GEMM_A4_FMA(i, ae, e)                                           \
    }
#define KERN__GEMM_P_KERNEL32(NAME, MR, RN)                                   \
    KERN_TARGET_AVX2 static void NAME(int64_t ks, const void *ap, const void *bp, \
                                      int64_t ldb, float *t, int64_t ldt, int acc) { \
        enum { MR_ = MR };                                                    \
        const float *a = (const float *)ap;                                   \
        const uint32_t *b = (const uint32_t *)bp;                             \
        const __m256i hi_ = _mm256_set1_epi32((int)0xffff0000u);              \
        int64_t s;                                                            \
        __m256 e0, e1, e2, e3, o0, o1, o2, o3;                                \
        RN(KERN__GEMM_A4_DECL)                                                \
        RN(KERN__GEMM_A4_INIT)                                                \
        for (s = 0; s + 1 < ks; s += 2) {                                     \
            KERN__GEMM_P_SPLIT(b, e0, o0) KERN__GEMM_P_SPLIT(b + 8, e1, o1)   \
            KERN__GEMM_P_SPLIT(b + 16, e2, o2) KERN__GEMM_P_SPLIT(b + 24, e3, o3) \
            RN(KERN__GEMM_P4_STEP)                                            \
            a += 2 * MR;                                                      \
            b += ldb;                                                         \
        }                                                                     \
        if (s < ks) {                                                         \
            KERN__GEMM_P_SPLIT(b, e0, o0) KERN__GEMM_P_SPLIT(b + 8, e1, o1)   \
            KERN__GEMM_P_SPLIT(b + 16, e2, o2) KERN__GEMM_P_SPLIT(b + 24, e3, o3) \
            (void)o0; (void)o1; (void)o2; (void)o3;                           \
            RN(KERN__GEMM_P4_LAST)                                            \
        }                                                                     \
        RN(KERN__GEMM_A4_SAVE)                                                \
    }
KERN__GEMM_P_KERNEL32(kern__gemm_p_1x32__avx2, 1, KERN__GEMM_R1)
KERN__GEMM_P_KERNEL32(kern__gemm_p_2x32__avx2, 2, KERN__GEMM_R2)

#define KERN__GEMM_P2_STEP(i)                                                 \
    {                                                                         \
        __m256 ae = _mm256_broadcast_ss(a + i), ao = _mm256_broadcast_ss(a + 4 + i); \
        KERN__GEMM_A2_FMA(i, ae, e) KERN__GEMM_A2_FMA(i, ao, o)               \
    }
#define KERN__GEMM_P2_LAST(i)                                                 \
    {                                                                         \
        __m256 ae = _mm256_broadcast_ss(a + i);                               \
        KERN__GEMM_A2_FMA(i, ae, e)                                           \
    }
KERN_TARGET_AVX2 static void kern__gemm_p_4x16__avx2(int64_t ks, const void *ap, const void *bp,
                                                     int64_t ldb, float *t, int64_t ldt, int acc) {
    const float *a = (const float *)ap;
    const uint32_t *b = (const uint32_t *)bp;
    const __m256i hi_ = _mm256_set1_epi32((int)0xffff0000u);
    int64_t s;
    const int64_t pfo_ = 16 * ldb;
    __m256 e0, e1, o0, o1;
    KERN__GEMM_R4(KERN__GEMM_A2_DECL)
    KERN__GEMM_R4(KERN__GEMM_A2_INIT)
    for (s = 0; s + 1 < ks; s += 2) {
        KERN__GEMM_P_SPLIT(b, e0, o0) KERN__GEMM_P_SPLIT(b + 8, e1, o1)
        KERN__GEMM_A2_PFB(b, ldb)
        KERN__GEMM_R4(KERN__GEMM_P2_STEP)
        a += 8;
        b += ldb;
    }
    if (s < ks) {
        KERN__GEMM_P_SPLIT(b, e0, o0) KERN__GEMM_P_SPLIT(b + 8, e1, o1)
        (void)o0; (void)o1;
        KERN__GEMM_R4(KERN__GEMM_P2_LAST)
    }
    KERN__GEMM_R4(KERN__GEMM_A2_SAVE)
}

/* kern__gemm_unpair for W a multiple of 8 (the AVX2 table's nr = 16):
 * the general path's bf16 prepacked B at M > 16 on AVX2. The portable
 * loop's speed hung on the compiler's inlining (Zen 3, 64 x 4096 x 4096
 * bf16 prepacked, 1 thread: 37.5 ms, or 45.0 ms after unrelated changes
 * to this file moved it); this one does not. */
KERN_TARGET_AVX2 static void kern__gemm_unpair__avx2(float *dst, int W, const uint32_t *panel,
                                                     int c0, int64_t k0, int64_t kc) {
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    int64_t k;
    int w;
    for (k = 0; k < kc; k++) {
        const uint32_t *row = panel + ((k0 + k) / 2) * KERN__GEMM_PW + c0;
        int odd = (int)((k0 + k) & 1);
        for (w = 0; w < W; w += 8) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(row + w));
            x = odd ? _mm256_and_si256(x, hi) : _mm256_slli_epi32(x, 16);
            _mm256_storeu_ps(dst + k * W + w, _mm256_castsi256_ps(x));
        }
    }
}

/* ------------------------------------------------------- AVX-512 packing */

/* In-register transpose of a 16x16 block of 32-bit values. */
KERN_TARGET_AVX512 static inline void kern__gemm_tr16__avx512(__m512 r[16]) {
    __m512 t[16];
    int q, c;
    for (q = 0; q < 8; q++) {
        t[2 * q] = _mm512_unpacklo_ps(r[2 * q], r[2 * q + 1]);
        t[2 * q + 1] = _mm512_unpackhi_ps(r[2 * q], r[2 * q + 1]);
    }
    for (q = 0; q < 4; q++) {
        __m512d t0 = _mm512_castps_pd(t[4 * q]), t1 = _mm512_castps_pd(t[4 * q + 1]);
        __m512d t2 = _mm512_castps_pd(t[4 * q + 2]), t3 = _mm512_castps_pd(t[4 * q + 3]);
        r[4 * q + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        r[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        r[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        r[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    /* r[4q + c], 128-bit lane L, now holds column 4L + c of rows 4q..4q+3 */
    for (c = 0; c < 4; c++) {
        __m512 s0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
        __m512 s1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        __m512 s2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        __m512 s3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        t[c] = _mm512_shuffle_f32x4(s0, s2, 0x88);
        t[8 + c] = _mm512_shuffle_f32x4(s0, s2, 0xdd);
        t[4 + c] = _mm512_shuffle_f32x4(s1, s3, 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(s1, s3, 0xdd);
    }
    for (q = 0; q < 16; q++) r[q] = t[q];
}

KERN_TARGET_AVX512 static void kern__gemm_pack__avx512(void *dst, int W, const char *src,
                                                       kern_dtype dt, int64_t sw, int64_t sk,
                                                       int nw, int64_t kc, int fmt) {
    int64_t es = (int64_t)kern_dtype_size(dt);
    int w0;
    if (fmt == KERN__GEMM_FMT_F32 && sw == 1) { /* rows of the panel are contiguous */
        float *d = (float *)dst;
        int64_t k;
        for (k = 0; k < kc; k++) {
            const char *s = src + k * sk * es;
            for (w0 = 0; w0 < W; w0 += 16) {
                int nn = nw - w0 < 0 ? 0 : (nw - w0 > 16 ? 16 : nw - w0);
                int ws = W - w0 > 16 ? 16 : W - w0;
                __m512 v = nn ? kern__v_load_f32__avx512(s + w0 * es, dt, nn) : _mm512_setzero_ps();
                _mm512_mask_storeu_ps(d + k * W + w0, kern__tailmask__avx512(ws), v);
            }
        }
        return;
    }
    if (fmt == KERN__GEMM_FMT_F32 && sk == 1) { /* transpose 16x16 blocks */
        float *d = (float *)dst;
        __m512 r[16];
        for (w0 = 0; w0 < W; w0 += 16) {
            int rows = nw - w0 < 0 ? 0 : (nw - w0 > 16 ? 16 : nw - w0);
            int ws = W - w0 > 16 ? 16 : W - w0;
            __mmask16 sm = kern__tailmask__avx512(ws);
            int64_t k0;
            for (k0 = 0; k0 < kc; k0 += 16) {
                int kk = kc - k0 > 16 ? 16 : (int)(kc - k0), q;
                for (q = 0; q < 16; q++)
                    r[q] = q < rows ? kern__v_load_f32__avx512(src + ((w0 + q) * sw + k0) * es, dt, kk)
                                    : _mm512_setzero_ps();
                kern__gemm_tr16__avx512(r);
                for (q = 0; q < kk; q++) _mm512_mask_storeu_ps(d + (k0 + q) * W + w0, sm, r[q]);
            }
        }
        return;
    }
    if (fmt == KERN__GEMM_FMT_PAIR && sw == 1) { /* interleave rows 2q, 2q+1 */
        uint32_t *d = (uint32_t *)dst;
        const __m512i ilo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9,
                                             40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33,
                                             1, 32, 0);
        const __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
        int64_t q, kq = (kc + 1) / 2;
        for (q = 0; q < kq; q++) {
            const char *s0 = src + 2 * q * sk * 2, *s1 = s0 + sk * 2;
            for (w0 = 0; w0 < W; w0 += 32) {
                int nn = nw - w0 < 0 ? 0 : (nw - w0 > 32 ? 32 : nw - w0);
                __mmask32 lm = (__mmask32)(((uint64_t)1 << nn) - 1);
                __m512i r0 = _mm512_maskz_loadu_epi16(lm, s0 + w0 * 2);
                __m512i r1 = 2 * q + 1 < kc ? _mm512_maskz_loadu_epi16(lm, s1 + w0 * 2)
                                            : _mm512_setzero_si512();
                int ws0 = W - w0 > 16 ? 16 : W - w0, ws1 = W - w0 - 16;
                _mm512_mask_storeu_epi32(d + q * W + w0, kern__tailmask__avx512(ws0),
                                         _mm512_permutex2var_epi16(r0, ilo, r1));
                if (ws1 > 0)
                    _mm512_mask_storeu_epi32(d + q * W + w0 + 16, kern__tailmask__avx512(ws1 > 16 ? 16 : ws1),
                                             _mm512_permutex2var_epi16(r0, ihi, r1));
            }
        }
        return;
    }
    if (fmt == KERN__GEMM_FMT_PAIR && sk == 1) { /* k pairs are 32-bit words */
        uint32_t *d = (uint32_t *)dst;
        int64_t kq = kc / 2; /* full pairs; an odd last k is done below */
        __m512 r[16];
        for (w0 = 0; w0 < W; w0 += 16) {
            int rows = nw - w0 < 0 ? 0 : (nw - w0 > 16 ? 16 : nw - w0);
            int ws = W - w0 > 16 ? 16 : W - w0;
            __mmask16 sm = kern__tailmask__avx512(ws);
            int64_t q0;
            for (q0 = 0; q0 < kq; q0 += 16) {
                int qq = kq - q0 > 16 ? 16 : (int)(kq - q0), q;
                for (q = 0; q < 16; q++)
                    r[q] = q < rows ? _mm512_maskz_loadu_ps(kern__tailmask__avx512(qq),
                                                            src + ((w0 + q) * sw + 2 * q0) * 2)
                                    : _mm512_setzero_ps();
                kern__gemm_tr16__avx512(r);
                for (q = 0; q < qq; q++)
                    _mm512_mask_storeu_ps(d + (q0 + q) * W + w0, sm, r[q]);
            }
        }
        if (kc & 1) {
            int w;
            for (w = 0; w < W; w++)
                d[kq * W + w] = w < nw ? kern__gemm_ld16(src, w * sw + (kc - 1)) : 0u;
        }
        return;
    }
    kern__gemm_pack__ref(dst, W, src, dt, sw, sk, nw, kc, fmt);
}

/* -------------------------------------------------- AVX-512 microkernels
 * f32: broadcast one A value per row (vbroadcastss or an embedded {1to16}
 * operand), NV zmm loads of B per k step, MR*NV independent FMA chains:
 * 12x32 has 24 chains, enough to cover the 4-cycle FMA latency at one zmm
 * FMA per cycle (Zen 4 double-pumps zmm over its two 256-bit pipes), and
 * reaches the FMA peak with the A micro-panel in L1. */

#define KERN__GEMM_Z_DECL2(i) __m512 c##i##_0, c##i##_1;
#define KERN__GEMM_Z_INIT2(i)                                                 \
    c##i##_0 = acc ? _mm512_loadu_ps(t + i * ldt) : _mm512_setzero_ps();     \
    c##i##_1 = acc ? _mm512_loadu_ps(t + i * ldt + 16) : _mm512_setzero_ps();
#define KERN__GEMM_Z_SAVE2(i)                                                 \
    _mm512_storeu_ps(t + i * ldt, c##i##_0);                                  \
    _mm512_storeu_ps(t + i * ldt + 16, c##i##_1);

#define KERN__GEMM_Z_F32_STEP2(i)                                             \
    {                                                                         \
        __m512 ai = _mm512_set1_ps(a[i]);                                     \
        c##i##_0 = _mm512_fmadd_ps(ai, b0, c##i##_0);                         \
        c##i##_1 = _mm512_fmadd_ps(ai, b1, c##i##_1);                         \
    }
#define KERN__GEMM_Z_BF_STEP2(i)                                              \
    {                                                                         \
        __m512i ai = _mm512_set1_epi32((int)a[i]);                            \
        c##i##_0 = _mm512_dpbf16_ps(c##i##_0, (__m512bh)ai, (__m512bh)b0);    \
        c##i##_1 = _mm512_dpbf16_ps(c##i##_1, (__m512bh)ai, (__m512bh)b1);    \
    }

/* Software prefetch of B rows PF k steps ahead (0: none; negative: -PF
 * elements ahead in the same row; a compile-time constant of each
 * kernel). The Xeon class's f32 kernels prefetch 16 rows
 * ahead: a row-major B read in place at small M (4 KiB runs of rows 16
 * KiB apart) is otherwise fetched by demand misses alone there, M = 16 x
 * 4096 x 4096 at 1 thread 13.3 ms, with 16 rows ahead 6.9 ms (32: 7.7);
 * 512^3 to 1024^3 level. Zen 4 keeps none (KERN__GEMM_PFD). */
#ifndef KERN__GEMM_PFD
#define KERN__GEMM_PFD 0
#endif
#define KERN__GEMM_PFB(b, ldb, PF)                                            \
    if (PF < 0) { /* -PF elements ahead in the same row */                   \
        _mm_prefetch((const char *)(b - (PF)), _MM_HINT_T0);                  \
        _mm_prefetch((const char *)(b - (PF)) + 64, _MM_HINT_T0);             \
    } else if (PF > 0 && PF < KERN__GEMM_PF_FAR) {                            \
        _mm_prefetch((const char *)(b + (PF) * ldb), _MM_HINT_T0);            \
        _mm_prefetch((const char *)(b + (PF) * ldb) + 64, _MM_HINT_T0);       \
    } else if (PF > 0) {                                                      \
        _mm_prefetch((const char *)(b + (PF) * ldb), _MM_HINT_T1);            \
        _mm_prefetch((const char *)(b + (PF) * ldb) + 64, _MM_HINT_T1);       \
    }
/* Prepacked 32-wide panels at small M (the streaming path, Xeon class):
 * each 128-byte row of a panel follows the last, so the B stream is one
 * sequential run per task, and a hint KERN__GEMM_PF_PANEL rows (32 KiB)
 * ahead into L2 (from KERN__GEMM_PF_FAR rows on, hints go to L2, not L1)
 * keeps it ahead of the demand reads of the first row panel. Xeon (family
 * 6 model 0xa7), 1 thread, 4096 x 4096 prepacked, min of 3 alternated
 * runs, ms, 16 rows into L1 -> 256 into L2: M 1 2.38 -> 2.33, M 4 2.45 ->
 * 2.37, M 8 2.58 -> 2.39, M 16 4.11 -> 3.72 (2 threads 1.87 -> 1.83);
 * BERT-base's 16 x 3072 x 768 from DRAM (48 weights cycled) 50.9-51.3 ->
 * 44.6-46.4 ms for the 48. A row-major B read in place keeps 16 rows into
 * L1 (its rows are 16 KiB apart: 256 ahead took M 8 from 4.3 to 6.7 ms). */
#define KERN__GEMM_PF_FAR 64
#define KERN__GEMM_PF_PANEL 256

#define KERN__GEMM_Z_F32_KERNEL2(NAME, MR, ROWS, PF)                              \
    KERN_TARGET_AVX512 static void NAME(int64_t ks, const void *ap,           \
                                        const void *bp, int64_t ldb,          \
                                        float *t, int64_t ldt, int acc) {     \
        const float *a = (const float *)ap, *b = (const float *)bp;           \
        int64_t s;                                                            \
        ROWS(KERN__GEMM_Z_DECL2)                                              \
        ROWS(KERN__GEMM_Z_INIT2)                                              \
        for (s = 0; s < ks; s++) {                                            \
            __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);     \
            KERN__GEMM_PFB(b, ldb, PF)                                        \
            ROWS(KERN__GEMM_Z_F32_STEP2)                                      \
            a += MR;                                                          \
            b += ldb;                                                         \
        }                                                                     \
        ROWS(KERN__GEMM_Z_SAVE2)                                              \
    }
#define KERN__GEMM_Z_BF_KERNEL2(NAME, MR, ROWS, PF)                               \
    KERN_TARGET_AVX512BF16 static void NAME(int64_t ks, const void *ap,       \
                                            const void *bp, int64_t ldb,      \
                                            float *t, int64_t ldt, int acc) { \
        const uint32_t *a = (const uint32_t *)ap, *b = (const uint32_t *)bp;  \
        int64_t s;                                                            \
        ROWS(KERN__GEMM_Z_DECL2)                                              \
        ROWS(KERN__GEMM_Z_INIT2)                                              \
        for (s = 0; s < ks; s++) {                                            \
            __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 16); \
            KERN__GEMM_PFB(b, ldb, PF)                                        \
            ROWS(KERN__GEMM_Z_BF_STEP2)                                       \
            a += MR;                                                          \
            b += ldb;                                                         \
        }                                                                     \
        ROWS(KERN__GEMM_Z_SAVE2)                                              \
    }

KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_12x32__avx512, 12, KERN__GEMM_R12, KERN__GEMM_PFD)

/* The same 12x32 tile with A read in place from a row-major source (row i
 * of the micro-panel at a + i*lda, k contiguous): no packing of A, for
 * shapes where packing A costs as much as it saves (small N). Four base
 * pointers cover the 12 rows with [base + lda*{0,1,2}] addressing. */
#define KERN__GEMM_Z_UA_STEP(i)                                               \
    {                                                                         \
        __m512 ai = _mm512_set1_ps(a##i);                                     \
        c##i##_0 = _mm512_fmadd_ps(ai, b0, c##i##_0);                         \
        c##i##_1 = _mm512_fmadd_ps(ai, b1, c##i##_1);                         \
    }
KERN_TARGET_AVX512 static void kern__gemm_f32_12x32_ua__avx512(int64_t ks, const float *a,
                                                               int64_t lda, const void *bp,
                                                               int64_t ldb, float *t, int64_t ldt,
                                                               int acc) {
    const float *b = (const float *)bp;
    const float *p0 = a, *p3 = a + 3 * lda, *p6 = a + 6 * lda, *p9 = a + 9 * lda;
    int64_t s;
    KERN__GEMM_R12(KERN__GEMM_Z_DECL2)
    KERN__GEMM_R12(KERN__GEMM_Z_INIT2)
    for (s = 0; s < ks; s++) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        float a0 = p0[0], a1 = p0[lda], a2 = p0[2 * lda], a3 = p3[0], a4 = p3[lda], a5 = p3[2 * lda];
        float a6 = p6[0], a7 = p6[lda], a8 = p6[2 * lda], a9 = p9[0], a10 = p9[lda], a11 = p9[2 * lda];
        KERN__GEMM_R12(KERN__GEMM_Z_UA_STEP)
        p0++; p3++; p6++; p9++;
        b += ldb;
    }
    KERN__GEMM_R12(KERN__GEMM_Z_SAVE2)
}
/* The bf16 twin: A row-major bf16 with an even row stride and an even K,
 * so the pair (k = 2q, 2q + 1) of row i is the 4-byte word q of the row,
 * which is exactly the packed pair format's element; lda and the A
 * pointer count those words. The same vdpbf16ps chains in the same k
 * order as the packed kernel, so the same bits. Words are read with
 * memcpy: a bf16 row need only be 2-byte aligned. */
#define KERN__GEMM_Z_UABF_LD(i, p, o) uint32_t a##i; memcpy(&a##i, p + (o), 4);
#define KERN__GEMM_Z_UABF_STEP(i)                                             \
    {                                                                         \
        __m512i ai = _mm512_set1_epi32((int)a##i);                            \
        c##i##_0 = _mm512_dpbf16_ps(c##i##_0, (__m512bh)ai, (__m512bh)b0);    \
        c##i##_1 = _mm512_dpbf16_ps(c##i##_1, (__m512bh)ai, (__m512bh)b1);    \
    }
KERN_TARGET_AVX512BF16 static void kern__gemm_bf16_12x32_ua__avx512bf16(int64_t ks, const float *a,
                                                                       int64_t lda, const void *bp,
                                                                       int64_t ldb, float *t,
                                                                       int64_t ldt, int acc) {
    const uint32_t *b = (const uint32_t *)bp;
    const char *p0 = (const char *)a, *p3 = p0 + 12 * lda, *p6 = p0 + 24 * lda, *p9 = p0 + 36 * lda;
    const int64_t l1 = 4 * lda, l2 = 8 * lda;
    int64_t s;
    KERN__GEMM_R12(KERN__GEMM_Z_DECL2)
    KERN__GEMM_R12(KERN__GEMM_Z_INIT2)
    for (s = 0; s < ks; s++) {
        __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 16);
        KERN__GEMM_Z_UABF_LD(0, p0, 0) KERN__GEMM_Z_UABF_LD(1, p0, l1) KERN__GEMM_Z_UABF_LD(2, p0, l2)
        KERN__GEMM_Z_UABF_LD(3, p3, 0) KERN__GEMM_Z_UABF_LD(4, p3, l1) KERN__GEMM_Z_UABF_LD(5, p3, l2)
        KERN__GEMM_Z_UABF_LD(6, p6, 0) KERN__GEMM_Z_UABF_LD(7, p6, l1) KERN__GEMM_Z_UABF_LD(8, p6, l2)
        KERN__GEMM_Z_UABF_LD(9, p9, 0) KERN__GEMM_Z_UABF_LD(10, p9, l1) KERN__GEMM_Z_UABF_LD(11, p9, l2)
        KERN__GEMM_R12(KERN__GEMM_Z_UABF_STEP)
        p0 += 4; p3 += 4; p6 += 4; p9 += 4;
        b += ldb;
    }
    KERN__GEMM_R12(KERN__GEMM_Z_SAVE2)
}
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_8x32__avx512, 8, KERN__GEMM_R8, KERN__GEMM_PFD)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_4x32__avx512, 4, KERN__GEMM_R4, KERN__GEMM_PFD)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_2x32__avx512, 2, KERN__GEMM_R2, KERN__GEMM_PFD)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_1x32__avx512, 1, KERN__GEMM_R1, KERN__GEMM_PFD)
/* the Xeon class's set (KERN__GEMM_PFB) */
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_12x32_pf__avx512, 12, KERN__GEMM_R12, 16)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_8x32_pf__avx512, 8, KERN__GEMM_R8, 16)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_4x32_pf__avx512, 4, KERN__GEMM_R4, 16)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_2x32_pf__avx512, 2, KERN__GEMM_R2, 16)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_1x32_pf__avx512, 1, KERN__GEMM_R1, 16)
/* the Zen 5 class's set for a row-major B in place: the hint along the
 * row, as the bf16 row kernels' (kern__gemm_br_*): a task takes a short
 * k piece of each of its column groups in turn, so the next lines a row
 * needs are a few groups to the right, 128, 256 and 512 bytes ahead for
 * 8, 4 and <= 2 rows. Zen 5, 1 thread, f32 M x 4096 x 4096 B as given,
 * min of 3 alternated runs, ms, 16 rows ahead in the own group (the _pf
 * set) -> this: M 4 4.51 -> 3.18, M 8 4.73 -> 3.27, M 16 6.06 -> 4.23 (2
 * threads 2.03 -> 1.62, 2.38 -> 1.64, 3.09 -> 2.16); one group ahead at
 * every row count was level, half a group 1.0-1.5x slower at M 8 and 16.
 * (M = 1 on this class takes the row kernel.) */
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_8x32_pr__avx512, 8, KERN__GEMM_R8, -32)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_4x32_pr__avx512, 4, KERN__GEMM_R4, -64)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_2x32_pr__avx512, 2, KERN__GEMM_R2, -128)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_1x32_pr__avx512, 1, KERN__GEMM_R1, -128)
/* M = 1 against a row-major f32 B read in place (kern__gemm_fns.row1):
 * t[c] = sum over k of a[k] b[k][c] for c < n, each output one fma chain
 * in k order from 0 (the small kernels' sums: the same bits), the rows of
 * B read one after another, so the whole task is one forward stream (a
 * 1x32 kernel reads 8 rows' 128-byte pieces in turn: 8 interleaved
 * streams). t (n <= KERN__GEMM_SMALL_GRP * 32 floats) stays in L1; the
 * hint 32 KiB ahead into L1. */
#define KERN__GEMM_ROW1_PF 32768 /* bytes ahead */
KERN_TARGET_AVX512 static void kern__gemm_f32_row1__avx512(int64_t K, const float *a, const char *bp,
                                                          int64_t ldb, float *t, int64_t n) {
    const float *b = (const float *)bp;
    const int64_t n16 = n & ~(int64_t)15;
    const __mmask16 mt = kern__tailmask__avx512((int)(n - n16));
    int64_t k, c;
    memset(t, 0, sizeof(float) * (size_t)n);
    for (k = 0; k < K; k++) {
        const __m512 av = _mm512_set1_ps(a[k]);
        const float *r = b + k * ldb;
        for (c = 0; c < n16; c += 16) { /* one line a vector: its hint */
            _mm_prefetch((const char *)(r + c) + KERN__GEMM_ROW1_PF, _MM_HINT_T0);
            _mm512_storeu_ps(t + c, _mm512_fmadd_ps(av, _mm512_loadu_ps(r + c), _mm512_loadu_ps(t + c)));
        }
        if (c < n)
            _mm512_mask_storeu_ps(t + c, mt, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(mt, r + c),
                                                             _mm512_maskz_loadu_ps(mt, t + c)));
    }
}
/* the same for prepacked panels (kern__gemm_small.ukr_pb) */
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_12x32_pp__avx512, 12, KERN__GEMM_R12, KERN__GEMM_PF_PANEL)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_8x32_pp__avx512, 8, KERN__GEMM_R8, KERN__GEMM_PF_PANEL)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_4x32_pp__avx512, 4, KERN__GEMM_R4, KERN__GEMM_PF_PANEL)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_2x32_pp__avx512, 2, KERN__GEMM_R2, KERN__GEMM_PF_PANEL)
KERN__GEMM_Z_F32_KERNEL2(kern__gemm_f32_1x32_pp__avx512, 1, KERN__GEMM_R1, KERN__GEMM_PF_PANEL)
KERN__GEMM_Z_BF_KERNEL2(kern__gemm_bf16_12x32__avx512bf16, 12, KERN__GEMM_R12, KERN__GEMM_PFD)
KERN__GEMM_Z_BF_KERNEL2(kern__gemm_bf16_8x32__avx512bf16, 8, KERN__GEMM_R8, KERN__GEMM_PFD)
KERN__GEMM_Z_BF_KERNEL2(kern__gemm_bf16_4x32__avx512bf16, 4, KERN__GEMM_R4, KERN__GEMM_PFD)
KERN__GEMM_Z_BF_KERNEL2(kern__gemm_bf16_2x32__avx512bf16, 2, KERN__GEMM_R2, KERN__GEMM_PFD)
KERN__GEMM_Z_BF_KERNEL2(kern__gemm_bf16_1x32__avx512bf16, 1, KERN__GEMM_R1, KERN__GEMM_PFD)
/* the Zen 5 class's bf16 small kernels for prepacked panels (as the f32
 * _pp set: hints KERN__GEMM_PF_PANEL rows ahead into L2) */
KERN__GEMM_Z_BF_KERNEL2(kern__gemm_bf16_12x32_pp__avx512bf16, 12, KERN__GEMM_R12, KERN__GEMM_PF_PANEL)
KERN__GEMM_Z_BF_KERNEL2(kern__gemm_bf16_8x32_pp__avx512bf16, 8, KERN__GEMM_R8, KERN__GEMM_PF_PANEL)
KERN__GEMM_Z_BF_KERNEL2(kern__gemm_bf16_4x32_pp__avx512bf16, 4, KERN__GEMM_R4, KERN__GEMM_PF_PANEL)
KERN__GEMM_Z_BF_KERNEL2(kern__gemm_bf16_2x32_pp__avx512bf16, 2, KERN__GEMM_R2, KERN__GEMM_PF_PANEL)
KERN__GEMM_Z_BF_KERNEL2(kern__gemm_bf16_1x32_pp__avx512bf16, 1, KERN__GEMM_R1, KERN__GEMM_PF_PANEL)
/* The small-M kernels against a bf16 B read in place by rows (the
 * streaming path's B form 1 on the pair tables, K even): each k pair step
 * loads rows 2q and 2q + 1 (32 bf16 each; ldb in bf16 elements) and
 * interleaves them into the pair format's two vectors (columns 0-15 and
 * 16-31) with vpermt2w, the words the packer writes; then the packed
 * kernels' vdpbf16ps chains in their k order, so the same bits as against
 * the packed B. A task takes a short k piece of each of its column groups
 * in turn (kern__gemm_small_task), so the next bytes each row needs are a
 * few groups to the right in the same rows: the hint goes there, into L1.
 * Zen 5, 1 thread, bf16 M x 4096 x 4096 with B as given, min of 3
 * alternated runs, ms, hint 2 / 4 / 8 / 16 groups ahead: M 1 1.37 / 1.19
 * / 1.07 / 1.10, M 4 1.53 / 1.48 / 1.62 / 1.47, M 8 1.67 / 1.73 / 1.73 /
 * 1.68, M 16 2.59 / 2.76 / 2.89 / 2.94; 8 and 16 rows ahead in the own
 * group: M 1 1.71-1.75, M 16 3.60-3.70; no hint: M 1 1.59, M 16 4.42. */
/* elements ahead in the same two rows: 8, 4 and 2 column groups for
 * MR <= 2, 4 and 8 (fewer rows, shorter steps, further ahead) */
#define KERN__GEMM_BR_PF(MR) ((MR) >= 8 ? 64 : (MR) >= 4 ? 128 : 256)
/* A kernel over bf16 rows in place: LOAD sets b0 and b1 from the rows at
 * b (RPS rows a k step, ldb apart), STEP the row's FMA chains (AT: the
 * packed A's element type). */
#define KERN__GEMM_Z_RB_KERNEL2(NAME, MR, ROWS, TARGET, AT, LOAD, STEP, RPS)       \
    TARGET static void NAME(int64_t ks, const void *ap, const void *bp, int64_t ldb, \
                            float *t, int64_t ldt, int acc) {                 \
        const AT *a = (const AT *)ap;                                         \
        const uint16_t *b = (const uint16_t *)bp;                             \
        int64_t s;                                                            \
        ROWS(KERN__GEMM_Z_DECL2)                                              \
        ROWS(KERN__GEMM_Z_INIT2)                                              \
        for (s = 0; s < ks; s++) {                                            \
            LOAD                                                              \
            _mm_prefetch((const char *)(b + KERN__GEMM_BR_PF(MR)), _MM_HINT_T0); \
            if (RPS == 2)                                                     \
                _mm_prefetch((const char *)(b + ldb + KERN__GEMM_BR_PF(MR)), _MM_HINT_T0); \
            ROWS(STEP)                                                        \
            a += MR;                                                          \
            b += RPS * ldb;                                                   \
        }                                                                     \
        ROWS(KERN__GEMM_Z_SAVE2)                                              \
    }
/* rows 2q and 2q + 1 as the pair format's words (the packer's vpermt2w) */
#define KERN__GEMM_Z_BR_LOAD                                                  \
    __m512i b0, b1;                                                           \
    {                                                                         \
        const __m512i ilo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, \
                                             40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, \
                                             1, 32, 0);                       \
        __m512i r0 = _mm512_loadu_si512(b), r1 = _mm512_loadu_si512(b + ldb); \
        b0 = _mm512_permutex2var_epi16(r0, ilo, r1);                          \
        b1 = _mm512_permutex2var_epi16(r0, _mm512_add_epi16(ilo, _mm512_set1_epi16(16)), r1); \
    }
#define KERN__GEMM_Z_BR_KERNEL2(NAME, MR, ROWS)                                   \
    KERN__GEMM_Z_RB_KERNEL2(NAME, MR, ROWS, KERN_TARGET_AVX512BF16, uint32_t, KERN__GEMM_Z_BR_LOAD, \
                            KERN__GEMM_Z_BF_STEP2, 2)
/* the 1, 2, 4, 8 and 12-row kernels of one such family */
#define KERN__GEMM_Z_RB_SET(KERNEL, PFX, SFX)                                 \
    KERNEL(PFX##_1x32##SFX, 1, KERN__GEMM_R1)                                 \
    KERNEL(PFX##_2x32##SFX, 2, KERN__GEMM_R2)                                 \
    KERNEL(PFX##_4x32##SFX, 4, KERN__GEMM_R4)                                 \
    KERNEL(PFX##_8x32##SFX, 8, KERN__GEMM_R8)                                 \
    KERNEL(PFX##_12x32##SFX, 12, KERN__GEMM_R12)
KERN__GEMM_Z_RB_SET(KERN__GEMM_Z_BR_KERNEL2, kern__gemm_br, __avx512bf16)
/* The f32 tables' twins (bf16 inputs on the Xeon class, and AVX-512
 * without BF16): a bf16 B's rows read in place, 32 columns widened to two
 * f32 vectors by a zero-extend and a shift (exact), then the f32 kernels'
 * FMA chains on f32-packed A: the same bits as the f32 kernels against
 * the converted B. One row a k step; the hint as above. */
#define KERN__GEMM_Z_H_LOAD                                                   \
    __m512 b0 = _mm512_castsi512_ps(_mm512_slli_epi32(                        \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)b)), 16)); \
    __m512 b1 = _mm512_castsi512_ps(_mm512_slli_epi32(                        \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(b + 16))), 16));
#define KERN__GEMM_Z_H_KERNEL2(NAME, MR, ROWS)                                    \
    KERN__GEMM_Z_RB_KERNEL2(NAME, MR, ROWS, KERN_TARGET_AVX512, float, KERN__GEMM_Z_H_LOAD,  \
                            KERN__GEMM_Z_F32_STEP2, 1)
KERN__GEMM_Z_RB_SET(KERN__GEMM_Z_H_KERNEL2, kern__gemm_h, __avx512)

/* The store of the 32-wide tables (AVX-512 f32 and bf16, AMX): every
 * epilogue on unit-stride operands (a 32-wide tile row is two vectors,
 * so the per-vector dtype and stride branches and the 8-wide glu groups
 * of the general AVX-512 store cost more than the tile takes to compute
 * at small K; Xeon, bf16 4096 x 4096 x 64, 1 thread: AMX 8.7 -> 4.9 ms,
 * vdpbf16ps 17.1 -> 14.0 ms; f32 level): the same operations
 * in the same order as kern__v_epi_rows_core__avx512 and
 * kern__v_epi_glu_rows__avx512 (alpha, fma(beta, src), bias, act, [gate
 * * up], res, out_scale), so the same bits. A bf16 row is rounded as
 * kern_base.h's conversion does and written as one 64-byte store. glu
 * needs the whole tile (n = 32: both glu groups); strided operands,
 * streaming stores and partial glu tiles take the general store. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__gemm_store_rows__avx512(const kern__epi *e, int64_t i0, int64_t j0,
                                                           const float *t, int64_t ldt, int m,
                                                           int n, kern_act act) {
    const __mmask16 k0 = kern__tailmask__avx512(n < 16 ? n : 16);
    const __mmask16 k1 = kern__tailmask__avx512(n > 16 ? n - 16 : 0);
    const __mmask32 k32 = n >= 32 ? (__mmask32)0xffffffffu : (__mmask32)(((uint32_t)1 << n) - 1);
    const __m512 va = _mm512_set1_ps(e->alpha), vb = _mm512_set1_ps(e->beta);
    const __m512 vo = _mm512_set1_ps(e->out_scale);
    /* the high words of 32 lanes (bf16 rows), and the glu gathers: gates
     * are tile columns 0-7 and 16-23, ups 8-15 and 24-31 */
    const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35,
                                         33, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5,
                                         3, 1);
    const __m512i ig = _mm512_set_epi32(23, 22, 21, 20, 19, 18, 17, 16, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i iu = _mm512_set_epi32(31, 30, 29, 28, 27, 26, 25, 24, 15, 14, 13, 12, 11, 10, 9, 8);
    const int glu = e->glu;
    const int64_t ssz = (int64_t)kern_dtype_size(e->src_dt), bsz = (int64_t)kern_dtype_size(e->bias_dt);
    const int64_t rsz = (int64_t)kern_dtype_size(e->res_dt), dsz = (int64_t)kern_dtype_size(e->dst_dt);
    const int64_t jo = glu ? j0 / 2 : j0; /* output column of the tile's first */
    const char *sp = e->src ? e->src + (i0 * e->src_rs + (j0 - e->src_j0)) * ssz : NULL;
    const char *rp = e->res ? e->res + (i0 * e->res_rs + jo) * rsz : NULL;
    char *dp = e->dst + (i0 * e->dst_rs + (jo - e->dst_j0)) * dsz;
    __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
    int r;
    if (e->bias && !e->bias_per_row) {
        b0 = kern__v_load_f32__avx512(e->bias + j0 * bsz, e->bias_dt, n < 16 ? n : 16);
        b1 = kern__v_load_f32__avx512(e->bias + (j0 + 16) * bsz, e->bias_dt, n - 16);
    }
    for (r = 0; r < m; r++, t += ldt) {
        __m512 v0 = kern__mul__avx512(va, _mm512_maskz_loadu_ps(k0, t));
        __m512 v1 = kern__mul__avx512(va, _mm512_maskz_loadu_ps(k1, t + 16));
        if (sp) {
            v0 = _mm512_fmadd_ps(vb, kern__v_load_f32__avx512(sp, e->src_dt, n < 16 ? n : 16), v0);
            v1 = _mm512_fmadd_ps(vb, kern__v_load_f32__avx512(sp + 16 * ssz, e->src_dt, n - 16), v1);
            sp += e->src_rs * ssz;
        }
        if (e->bias) {
            if (e->bias_per_row) {
                __m512 br = _mm512_set1_ps(kern__s_load_f32(e->bias + (i0 + r) * e->bias_st * bsz, e->bias_dt, 1));
                v0 = _mm512_add_ps(v0, br);
                v1 = _mm512_add_ps(v1, br);
            } else {
                v0 = _mm512_add_ps(v0, b0);
                v1 = _mm512_add_ps(v1, b1);
            }
        }
        if (glu) {
            __m512 g = _mm512_permutex2var_ps(v0, ig, v1), u = _mm512_permutex2var_ps(v0, iu, v1);
            __m512 v = kern__mul__avx512(kern__v_act__avx512(g, act), u);
            if (rp) v = _mm512_add_ps(v, kern__v_load_f32__avx512(rp, e->res_dt, 16));
            kern__v_store_f32__avx512(dp, e->dst_dt, kern__mul__avx512(v, vo), 16, 0);
        } else {
            v0 = kern__v_act__avx512(v0, act);
            v1 = kern__v_act__avx512(v1, act);
            if (rp) {
                v0 = _mm512_add_ps(v0, kern__v_load_f32__avx512(rp, e->res_dt, n < 16 ? n : 16));
                v1 = _mm512_add_ps(v1, kern__v_load_f32__avx512(rp + 16 * rsz, e->res_dt, n - 16));
            }
            v0 = kern__mul__avx512(v0, vo);
            v1 = kern__mul__avx512(v1, vo);
            if (e->dst_dt == KERN_BF16) {
                __m512i w = _mm512_permutex2var_epi16(kern__f32x16_bf16hi__avx512(_mm512_castps_si512(v0)), odd,
                                                      kern__f32x16_bf16hi__avx512(_mm512_castps_si512(v1)));
                if (n == 32) _mm512_storeu_si512((void *)dp, w);
                else _mm512_mask_storeu_epi16(dp, k32, w);
            } else {
                kern__v_store_f32__avx512(dp, e->dst_dt, v0, n < 16 ? n : 16, 0);
                kern__v_store_f32__avx512(dp + 16 * dsz, e->dst_dt, v1, n - 16, 0);
            }
        }
        if (rp) rp += e->res_rs * rsz;
        dp += e->dst_rs * dsz;
    }
}

KERN_TARGET_AVX512 static void kern__gemm_store__avx512(const kern__epi *e, int64_t i0, int64_t j0,
                                                 const float *t, int64_t ldt, int m, int n) {
    if (e->nt || e->dst_cs != 1 || n > 32 || (e->glu && n != 32) || (e->src && e->src_cs != 1) ||
        (e->res && e->res_cs != 1) || (e->bias && !e->bias_per_row && e->bias_st != 1)) {
        kern__v_epi_tile__avx512(e, i0, j0, t, ldt, m, n);
        return;
    }
#define KERN__GEMM_STORE_ROWS(A) kern__gemm_store_rows__avx512(e, i0, j0, t, ldt, m, n, A);
    KERN__ACT_DISPATCH(e->act, KERN__GEMM_STORE_ROWS)
#undef KERN__GEMM_STORE_ROWS
}
/* ------------------------------------------------ AMX tiles (bf16 inputs) */
#ifdef KERN__HAVE_AMX
/* The tiles (kern__amx_config, all 16 rows): 0-3 hold the 32 x 32 f32 C
 * block (rows 0-15 / 16-31 x columns 0-15 / 16-31), 4-5 the A rows 0-15
 * and 16-31 (32 bf16 of k each), 6-7 the B columns 0-15 and 16-31 (16 k
 * pairs each). The configuration is per thread: the compute task loads it
 * before its first tile and releases the tile state after its last, so no
 * thread keeps the 8 KiB state live between calls. */
KERN_TARGET_AMX static void kern__gemm_tiles_on__amx(void) {
    static const uint8_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    kern__amx_config(rows);
}

KERN_TARGET_AMX static void kern__gemm_tiles_off__amx(void) { _tile_release(); }

/* One k chunk: four tdpbf16ps (16 x 16 x 32), A rows AS bytes apart, B
 * rows BS bytes apart. */
#define KERN__GEMM_AMX_DP(A, AS, B, BS)                                       \
    _tile_loadd(4, (A), (AS));                                                \
    _tile_loadd(6, (B), (BS));                                                \
    _tile_loadd(5, (A) + 16 * (AS), (AS));                                    \
    _tile_loadd(7, (B) + 16, (BS));                                           \
    _tile_dpbf16ps(0, 4, 6);                                                  \
    _tile_dpbf16ps(1, 4, 7);                                                  \
    _tile_dpbf16ps(2, 5, 6);                                                  \
    _tile_dpbf16ps(3, 5, 7);

/* The body of both: A rows a_rs bytes apart, chunk c at a + c*a_cs
 * bytes. A last chunk of fewer than 16 pairs is copied, zero padded (A's
 * 32 rows and B's rows), so nothing past K or past the panel is read. */
KERN_TARGET_AMX static inline void kern__gemm_amx_body(int64_t ks, const char *a, long a_rs,
                                                       long a_cs, const uint32_t *b,
                                                       int64_t ldb, float *t, int64_t ldt,
                                                       int acc) {
    const long bs = (long)ldb * 4, ts = (long)ldt * 4;
    int64_t nch = ks / 16, rem = ks % 16, c;
    if (acc) {
        _tile_loadd(0, t, ts);
        _tile_loadd(1, t + 16, ts);
        _tile_loadd(2, t + 16 * ldt, ts);
        _tile_loadd(3, t + 16 * ldt + 16, ts);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (c = 0; c < nch; c++) {
        KERN__GEMM_AMX_DP(a, a_rs, b, bs)
        a += a_cs;
        b += 16 * ldb;
    }
    if (rem) {
        uint32_t bt[16 * 32] KERN_ALIGNED(64), at[32 * 16] KERN_ALIGNED(64);
        const char *at8 = (const char *)at;
        int64_t r;
        for (r = 0; r < 16; r++) {
            if (r < rem) memcpy(bt + r * 32, b + r * ldb, 128);
            else memset(bt + r * 32, 0, 128);
        }
        for (r = 0; r < 32; r++) {
            memcpy(at + r * 16, a + r * a_rs, (size_t)(rem * 4));
            memset(at + r * 16 + rem, 0, (size_t)((16 - rem) * 4));
        }
        KERN__GEMM_AMX_DP(at8, 64, bt, 128)
    }
    _tile_stored(0, t, ts);
    _tile_stored(1, t + 16, ts);
    _tile_stored(2, t + 16 * ldt, ts);
    _tile_stored(3, t + 16 * ldt + 16, ts);
}

/* 32 x 32 microkernel: a is an AMXA panel (ks rounded up to 16 pairs), b a
 * pair-format panel of row stride ldb (32). */
KERN_TARGET_AMX static void kern__gemm_bf16_32x32__amx(int64_t ks, const void *ap,
                                                      const void *bp, int64_t ldb, float *t,
                                                      int64_t ldt, int acc) {
    kern__gemm_amx_body(ks, (const char *)ap, 64, 2048, (const uint32_t *)bp, ldb, t, ldt, acc);
}

/* The same with A read in place (the driver's ua path: few columns of B,
 * so packing A would cost more than it saves): tile rows straight from
 * A's rows (lda in 4-byte words, one bf16 pair each). */
KERN_TARGET_AMX static void kern__gemm_bf16_32x32_ua__amx(int64_t ks, const float *a, int64_t lda,
                                                         const void *bp, int64_t ldb, float *t,
                                                         int64_t ldt, int acc) {
    kern__gemm_amx_body(ks, (const char *)(const void *)a, (long)lda * 4, 64,
                        (const uint32_t *)bp, ldb, t, ldt, acc);
}

/* Packing for the AMX table: A panels (AMXA) from a row-major bf16 A are
 * masked 64-byte row copies; everything else (pair-format B, a transposed
 * A) as at the AVX-512 level / the portable routine. */
KERN_TARGET_AMX static void kern__gemm_pack__amx(void *dst, int W, const char *src,
                                                kern_dtype dt, int64_t sw, int64_t sk, int nw,
                                                int64_t kc, int fmt) {
    if (fmt == KERN__GEMM_FMT_AMXA && sk == 1 && dt == KERN_BF16) {
        uint16_t *d = (uint16_t *)dst;
        int64_t nchk = (kc + 31) / 32, c;
        int w;
        for (w = 0; w < W; w++) {
            const char *row = src + w * sw * 2;
            for (c = 0; c < nchk; c++) {
                int64_t kk = kc - c * 32;
                __mmask32 m = kk >= 32 ? (__mmask32)0xffffffffu : (__mmask32)(((uint64_t)1 << kk) - 1);
                __m512i v = w < nw ? _mm512_maskz_loadu_epi16(m, row + c * 64) : _mm512_setzero_si512();
                _mm512_storeu_si512((void *)(d + (c * W + w) * 32), v);
            }
        }
        return;
    }
    if (fmt == KERN__GEMM_FMT_AMXA) {
        kern__gemm_pack__ref(dst, W, src, dt, sw, sk, nw, kc, fmt);
        return;
    }
    kern__gemm_pack__avx512(dst, W, src, dt, sw, sk, nw, kc, fmt);
}
#endif /* KERN__HAVE_AMX */

#endif /* KERN_X86 */

/* ==================================================================== NEON */
#ifdef KERN_NEON
/* 4x16: 16 accumulators (4 rows x 4 q-registers), one A value per row
 * multiplied by lane-free vfmaq_n_f32. Simple and correct by construction;
 * the store and packing use the scalar routines. */
static void kern__gemm_f32_4x16__neon(int64_t ks, const void *ap, const void *bp,
                                      int64_t ldb, float *t, int64_t ldt, int acc) {
    const float *a = (const float *)ap, *b = (const float *)bp;
    float32x4_t c[4][4];
    int64_t s;
    int i, v;
    for (i = 0; i < 4; i++)
        for (v = 0; v < 4; v++) c[i][v] = acc ? vld1q_f32(t + i * ldt + 4 * v) : vdupq_n_f32(0.0f);
    for (s = 0; s < ks; s++) {
        float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
        float32x4_t b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
        for (i = 0; i < 4; i++) {
            float ai = a[i];
            c[i][0] = vfmaq_n_f32(c[i][0], b0, ai);
            c[i][1] = vfmaq_n_f32(c[i][1], b1, ai);
            c[i][2] = vfmaq_n_f32(c[i][2], b2, ai);
            c[i][3] = vfmaq_n_f32(c[i][3], b3, ai);
        }
        a += 4;
        b += ldb;
    }
    for (i = 0; i < 4; i++)
        for (v = 0; v < 4; v++) vst1q_f32(t + i * ldt + 4 * v, c[i][v]);
}
#endif /* KERN_NEON */

/* ============================================ one function table per level
 * Every kern_isa level maps to one const table (kern__gemm_fns_for): the
 * blocking, the panel format, the microkernels, the store (the shared
 * epilogue tile) and the packing routine. AVX512_BF16 has a second table
 * for bf16 inputs (vdpbf16ps on pair panels); every other input dtype there,
 * and every dtype at AVX512 / AVX512_VNNI, takes the AVX-512 f32 table, so
 * capping a BF16 machine at AVX512 runs the bf16 -> f32 path. The VNNI
 * levels add nothing to f32 GEMM. */

typedef struct kern__gemm_small {
    int mr, nr;
    kern__gemm_ukr ukr;
    kern__gemm_ukr ukr_pb; /* the same sums for a prepacked B, with its own
                              hints (KERN__GEMM_PF_PANEL); NULL: ukr */
} kern__gemm_small;

typedef struct kern__gemm_fns {
    const char *name;
    const kern__gemm_cfg *cfg;
    int fmt; /* panel format of this kernel set */
    kern__gemm_ukr ukr;
    kern__gemm_ukr_ua ukr_ua; /* NULL: A is always packed */
    kern__gemm_store_fn store;
    kern__gemm_pack_fn pack;
    int n_small; /* small-M kernels, by increasing mr (0: none) */
    kern__gemm_small small[4];
    /* AMX tables only (zero elsewhere): the thread's tile state on / off
     * around a compute task, and the table for M < KERN__GEMM_AMX_MIN_M
     * against a prepacked B (kern__gemm_amx_alt) */
    void (*tiles_on)(void);
    void (*tiles_off)(void);
    const struct kern__gemm_fns *alt;
    /* the main kernel's twin for prepacked panels on the streaming path
     * (M above the small-M kernels' rows; hints KERN__GEMM_PF_PANEL rows
     * ahead, the same sums); NULL: ukr */
    kern__gemm_ukr ukr_pb;
    /* M = 1 against a row-major f32 B in place, the rows streamed one
     * after another (t = the n outputs of the task); NULL: the small-M
     * kernels */
    void (*row1)(int64_t K, const float *a, const char *b, int64_t ldb, float *t, int64_t n);
    /* the small-M kernels (the rows of small) against a bf16 B read in
     * place by rows (kern__gemm_bform 1); NULL: none, such a B is packed */
    const kern__gemm_small *brows;
    /* the main kernel's twin for such a B (M above the small kernels, up
     * to cfg->stream_m); NULL: those rows stream up to KERN__GEMM_SMALL_M */
    kern__gemm_ukr brows_main;
} kern__gemm_fns;

/* A panels' format: the AMX tables' own, else the table's. */
#define KERN__GEMM_AFMT(ks) ((ks)->tiles_on ? KERN__GEMM_FMT_AMXA : (ks)->fmt)

/* Below this M, against a prepacked B, the AMX tables hand over to their
 * alt table (the 32-row tile block is then mostly padding). With B not
 * prepacked the tiles win at every M: the alt tables convert or repack B
 * on every call. Xeon, 1 thread, M x 4096 x 4096 (alt -> tiles, ms):
 * prepacked M 1 1.36 -> 1.54, M 2 1.46 -> 1.63, M 3 1.77 -> 1.61, M 4 1.89 -> 1.61, M 8 2.82 -> 1.52, M 16
 * 5.22 -> 1.63, M 24 7.41 -> 1.63; B as given M 1 9.14 -> 5.37, M 16
 * 11.6 -> 5.31. */
#ifndef KERN__GEMM_AMX_MIN_M
#define KERN__GEMM_AMX_MIN_M 3
#endif

static const kern__gemm_fns kern__gemm_fns_scalar = {
    "scalar", &kern__gemm_cfgs[KERN__GEMM_CFG_SCALAR], KERN__GEMM_FMT_F32, kern__gemm_f32_4x16__ref,
    NULL, kern__s_epi_tile, kern__gemm_pack__ref, 0, {{0, 0, NULL, NULL}}, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL};
#ifdef KERN_X86
/* the bf16 row kernels: the f32 tables widen to f32 ("h"), the pair
 * tables interleave pairs for vdpbf16ps */
static const kern__gemm_small kern__gemm_brows_avx2[3] = {{1, 32, kern__gemm_h_1x32__avx2, NULL},
                                                          {2, 32, kern__gemm_h_2x32__avx2, NULL},
                                                          {4, 16, kern__gemm_h_4x16__avx2, NULL}};
static const kern__gemm_small kern__gemm_brows_avx512bf16[4] = {
    {1, 32, kern__gemm_br_1x32__avx512bf16, NULL},
    {2, 32, kern__gemm_br_2x32__avx512bf16, NULL},
    {4, 32, kern__gemm_br_4x32__avx512bf16, NULL},
    {8, 32, kern__gemm_br_8x32__avx512bf16, NULL}};
static const kern__gemm_small kern__gemm_brows_avx512[4] = {{1, 32, kern__gemm_h_1x32__avx512, NULL},
                                                            {2, 32, kern__gemm_h_2x32__avx512, NULL},
                                                            {4, 32, kern__gemm_h_4x32__avx512, NULL},
                                                            {8, 32, kern__gemm_h_8x32__avx512, NULL}};
static const kern__gemm_fns kern__gemm_fns_avx2 = {
    "avx2", &kern__gemm_cfgs[KERN__GEMM_CFG_AVX2], KERN__GEMM_FMT_F32, kern__gemm_f32_6x16__avx2,
    NULL, kern__v_epi_tile__avx2, kern__gemm_pack__avx2, 3,
    {{1, 32, kern__gemm_f32_1x32__avx2, NULL},
     {2, 32, kern__gemm_f32_2x32__avx2, NULL},
     {4, 16, kern__gemm_f32_4x16__avx2, NULL}}, NULL, NULL, NULL, NULL, NULL, kern__gemm_brows_avx2, NULL};
/* the AVX-512 f32 kernel set; per class: the blocking row, and the
 * kernels (MSFX the main kernel's, SFX the small ones': _pf prefetching B
 * rows; PSFX _pp: small kernels for prepacked panels; UKR_PB and ROW1 the
 * members of those names, or NULL) */
#define KERN__GEMM_FNS_AVX512(NAME, CFG, MSFX, SFX, PSFX, UKR_PB, ROW1, BROWS_MAIN) \
    {NAME, &kern__gemm_cfgs[CFG], KERN__GEMM_FMT_F32,                         \
     kern__gemm_f32_12x32##MSFX##__avx512, kern__gemm_f32_12x32_ua__avx512,   \
     kern__gemm_store__avx512, kern__gemm_pack__avx512, 4,                    \
     {{1, 32, kern__gemm_f32_1x32##SFX##__avx512, kern__gemm_f32_1x32##PSFX##__avx512}, \
      {2, 32, kern__gemm_f32_2x32##SFX##__avx512, kern__gemm_f32_2x32##PSFX##__avx512}, \
      {4, 32, kern__gemm_f32_4x32##SFX##__avx512, kern__gemm_f32_4x32##PSFX##__avx512}, \
      {8, 32, kern__gemm_f32_8x32##SFX##__avx512, kern__gemm_f32_8x32##PSFX##__avx512}}, \
     NULL, NULL, NULL, UKR_PB, ROW1, kern__gemm_brows_avx512, BROWS_MAIN}
static const kern__gemm_fns kern__gemm_fns_avx512 =
    KERN__GEMM_FNS_AVX512("avx512", KERN__GEMM_CFG_AVX512, , , , NULL, NULL, NULL);
static const kern__gemm_fns kern__gemm_fns_avx512_xeon =
    KERN__GEMM_FNS_AVX512("avx512_xeon", KERN__GEMM_CFG_AVX512_XEON, _pf, _pf, _pp, NULL, NULL, NULL);
/* Zen 5: the generic blocking rows and main kernel, the small-M kernels
 * with B hints (_pr for a row-major B in place, _pp for prepacked panels),
 * the main kernel's _pp twin and the M = 1 row kernel (docs/uarch.md,
 * "GEMM on the Zen 5 class") */
static const kern__gemm_fns kern__gemm_fns_avx512_zen5 =
    KERN__GEMM_FNS_AVX512("avx512_zen5", KERN__GEMM_CFG_AVX512, , _pr, _pp,
                          kern__gemm_f32_12x32_pp__avx512, kern__gemm_f32_row1__avx512,
                          kern__gemm_h_12x32__avx512);
/* the bf16 (vdpbf16ps) set; PSFX _pp: the prepacked-panel twins of the
 * small kernels and of the main one (the generic table: none, PSFX empty
 * names the kernels themselves) */
#define KERN__GEMM_FNS_AVX512BF16(NAME, PSFX, BROWS_MAIN)                     \
    {NAME, &kern__gemm_cfgs[KERN__GEMM_CFG_AVX512BF16], KERN__GEMM_FMT_PAIR,  \
     kern__gemm_bf16_12x32__avx512bf16, kern__gemm_bf16_12x32_ua__avx512bf16,  \
     kern__gemm_store__avx512, kern__gemm_pack__avx512, 4,                    \
     {{1, 32, kern__gemm_bf16_1x32__avx512bf16, kern__gemm_bf16_1x32##PSFX##__avx512bf16}, \
      {2, 32, kern__gemm_bf16_2x32__avx512bf16, kern__gemm_bf16_2x32##PSFX##__avx512bf16}, \
      {4, 32, kern__gemm_bf16_4x32__avx512bf16, kern__gemm_bf16_4x32##PSFX##__avx512bf16}, \
      {8, 32, kern__gemm_bf16_8x32__avx512bf16, kern__gemm_bf16_8x32##PSFX##__avx512bf16}}, \
     NULL, NULL, NULL, kern__gemm_bf16_12x32##PSFX##__avx512bf16, NULL, kern__gemm_brows_avx512bf16, \
     BROWS_MAIN}
static const kern__gemm_fns kern__gemm_fns_avx512bf16 = KERN__GEMM_FNS_AVX512BF16("avx512bf16", , NULL);
static const kern__gemm_fns kern__gemm_fns_avx512bf16_zen5 =
    KERN__GEMM_FNS_AVX512BF16("avx512bf16_zen5", _pp, kern__gemm_br_12x32__avx512bf16);
#endif
#ifdef KERN__HAVE_AMX
#define KERN__GEMM_FNS_AMX(NAME, ALT)                                         \
    {NAME, &kern__gemm_cfgs[KERN__GEMM_CFG_AMX], KERN__GEMM_FMT_PAIR,          \
     kern__gemm_bf16_32x32__amx, kern__gemm_bf16_32x32_ua__amx,               \
     kern__gemm_store__avx512,                                                \
     kern__gemm_pack__amx, 0, {{0, 0, NULL, NULL}}, kern__gemm_tiles_on__amx,        \
     kern__gemm_tiles_off__amx, ALT, NULL, NULL, NULL, NULL}
static const kern__gemm_fns kern__gemm_fns_amx = KERN__GEMM_FNS_AMX("amx", &kern__gemm_fns_avx512bf16);
static const kern__gemm_fns kern__gemm_fns_amx_xeon =
    KERN__GEMM_FNS_AMX("amx_xeon", &kern__gemm_fns_avx512_xeon);
#endif
#ifdef KERN_NEON
static const kern__gemm_fns kern__gemm_fns_neon = {
    "neon", &kern__gemm_cfgs[KERN__GEMM_CFG_NEON], KERN__GEMM_FMT_F32, kern__gemm_f32_4x16__neon,
    NULL, kern__v_epi_tile__neon, kern__gemm_pack__ref, 0, {{0, 0, NULL, NULL}}, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL};
#endif

/* The table of level isa and class uarch (kern_ctx_uarch) for inputs of
 * dtype in_dt. On the Xeon class bf16 inputs take the f32 kernels
 * (converted while packing): there vdpbf16ps runs at half the f32 FMA
 * rate (peaks: 123.7 against 242.6 GFLOP/s a core), so the f32 kernels do
 * the same products faster. */
static const kern__gemm_fns *kern__gemm_fns_for(kern_isa isa, kern_uarch uarch,
                                                kern_dtype in_dt) {
    (void)in_dt;
    (void)uarch;
    switch (isa) {
#ifdef KERN_X86
    case KERN_ISA_AMX:
#ifdef KERN__HAVE_AMX
        if (in_dt == KERN_BF16)
            return uarch == KERN_UARCH_XEON_AVX512 ? &kern__gemm_fns_amx_xeon : &kern__gemm_fns_amx;
#endif
        /* fall through */
    case KERN_ISA_AVX512_BF16:
        if (in_dt == KERN_BF16 && uarch != KERN_UARCH_XEON_AVX512)
            return uarch == KERN_UARCH_ZEN5 ? &kern__gemm_fns_avx512bf16_zen5
                                            : &kern__gemm_fns_avx512bf16;
        /* fall through */
    case KERN_ISA_AVX512_VNNI:
    case KERN_ISA_AVX512:
        if (uarch == KERN_UARCH_ZEN5) return &kern__gemm_fns_avx512_zen5;
        return uarch == KERN_UARCH_XEON_AVX512 ? &kern__gemm_fns_avx512_xeon
                                               : &kern__gemm_fns_avx512;
    case KERN_ISA_AVX2_VNNI:
    case KERN_ISA_AVX2: return &kern__gemm_fns_avx2;
#endif
#ifdef KERN_NEON
    case KERN_ISA_NEON_BF16:
    case KERN_ISA_NEON_DOT:
    case KERN_ISA_NEON: return &kern__gemm_fns_neon;
#endif
    default: return &kern__gemm_fns_scalar;
    }
}

/* ============================================================== drivers */

static int64_t kern__gemm_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t kern__gemm_min(int64_t a, int64_t b) { return a < b ? a : b; }
static size_t kern__gemm_al64(size_t x) { return (x + 63) & ~(size_t)63; }

/* One GEMM item (one batch index) and the state of its current pass. */
typedef struct kern__gemm_job {
    const kern__gemm_fns *ks;
    int64_t M, N, K;
    kern_dtype in_dt;
    int64_t es; /* input element size */
    const char *a;
    int64_t a_rs, a_cs; /* op(A)(i, k) at a + (i*a_rs + k*a_cs)*es */
    const char *b;
    int64_t b_rs, b_cs; /* op(B)(k, j) */
    const kern_gemm_packed_b *pb;
    char *c;
    kern_dtype c_dt;
    int64_t c_rs, c_cs;
    float beta;
    kern__epi fin; /* the final epilogue (dst = C) */
    /* blocking */
    int64_t kc, nc, mb, nb;
    int use_ctmp;
    /* buffers */
    char *apack, *bpack;
    float *ctmp;
    /* current pass */
    int64_t jc, ncur, pc, kcur, ic, mcur;
    int pass_first, pass_last;
    int64_t n_rb, n_cb, n_bpack, n_apack;
    int brows;  /* B packed by chunks of k rows (row-major B) */
    int ua;     /* A read in place (ukr_ua), only a partial last panel packed */
    int64_t ua_ld; /* its row stride in 4-byte words (a bf16 pair is one) */
    int direct; /* full tiles accumulate straight into f32 C */
    int bmode; /* 0: packed into bpack, 1: prepacked panels, 2: unpair into bpack */
    kern__epi epi; /* the epilogue of the current pass */
    int64_t n0, n1; /* the columns this item computes (all: 0, N; a
                     * column split gives each thread a window) */
} kern__gemm_job;

static int64_t kern__gemm_ksteps(int fmt, int64_t k) {
    if (fmt == KERN__GEMM_FMT_AMXA) return (k + 31) / 32 * 16;
    return fmt == KERN__GEMM_FMT_PAIR ? (k + 1) / 2 : k;
}

/* The B micro-panel for global column j of the current pass. */
static const void *kern__gemm_bpanel(const kern__gemm_job *j, int64_t col, int64_t *ldb) {
    const kern__gemm_fns *ks = j->ks;
    if (j->bmode == 1) {
        const kern_gemm_packed_b *pb = j->pb;
        *ldb = KERN__GEMM_PW;
        return (const uint32_t *)pb->data + (col / KERN__GEMM_PW) * pb->ks * KERN__GEMM_PW +
               kern__gemm_ksteps(ks->fmt, j->pc) * KERN__GEMM_PW + col % KERN__GEMM_PW;
    }
    *ldb = ks->cfg->nr;
    return (const uint32_t *)(const void *)j->bpack +
           ((col - j->jc) / ks->cfg->nr) * kern__gemm_ksteps(ks->fmt, j->kcur) * ks->cfg->nr;
}

#ifndef KERN__GEMM_UA_MAXN
#define KERN__GEMM_UA_MAXN 256
#endif

/* Rows of B per pack task when B is packed by rows (a multiple of 2 for
 * the pair format). */
#define KERN__GEMM_BROWS 32

/* Pack task: B first (when B needs packing), then A panels of the current
 * row chunk. A row-major B is packed by chunks of k rows across all panels,
 * so the source is read row after row (a panel at a time would read 128
 * bytes per row at the row stride, which DRAM and the prefetchers hate). */
static void kern__gemm_pack_task(void *arg, int64_t task, int thread) {
    kern__gemm_job *j = (kern__gemm_job *)arg;
    const kern__gemm_fns *ks = j->ks;
    int mr = ks->cfg->mr, nr = ks->cfg->nr;
    int64_t kst = kern__gemm_ksteps(ks->fmt, j->kcur);
    (void)thread;
    if (task < j->n_bpack) {
        if (j->brows) {
            int64_t k0 = task * KERN__GEMM_BROWS, kk = kern__gemm_min(KERN__GEMM_BROWS, j->kcur - k0);
            int64_t s0 = kern__gemm_ksteps(ks->fmt, k0), q, np = kern__gemm_cdiv(j->ncur, nr);
            for (q = 0; q < np; q++) {
                int64_t col = j->jc + q * nr;
                ks->pack(j->bpack + (q * kst + s0) * nr * 4, nr,
                         j->b + ((j->pc + k0) * j->b_rs + col * j->b_cs) * j->es, j->in_dt, j->b_cs,
                         j->b_rs, (int)kern__gemm_min(nr, j->jc + j->ncur - col), kk, ks->fmt);
            }
        } else {
            int64_t col = j->jc + task * nr;
            int nw = (int)kern__gemm_min(nr, j->jc + j->ncur - col);
            void *dst = j->bpack + task * kst * nr * 4;
            if (j->bmode == 2) {
                const kern_gemm_packed_b *pb = j->pb;
                int64_t c0 = col % KERN__GEMM_PW;
                const uint32_t *panel = (const uint32_t *)pb->data + (col / KERN__GEMM_PW) * pb->ks * KERN__GEMM_PW;
#ifdef KERN_X86
                if (ks == &kern__gemm_fns_avx2 && nr % 8 == 0)
                    kern__gemm_unpair__avx2((float *)dst, nr, panel, (int)c0, j->pc, j->kcur);
                else
#endif
                    kern__gemm_unpair((float *)dst, nr, panel, (int)c0, j->pc, j->kcur);
            } else {
                ks->pack(dst, nr, j->b + (j->pc * j->b_rs + col * j->b_cs) * j->es, j->in_dt, j->b_cs,
                         j->b_rs, nw, j->kcur, ks->fmt);
            }
        }
    } else {
        int64_t r = task - j->n_bpack, row = j->ic + (j->ua ? (j->mcur / mr) * mr : r * mr);
        int nw = (int)kern__gemm_min(mr, j->ic + j->mcur - row);
        int afmt = KERN__GEMM_AFMT(ks);
        if (j->ua) r = 0; /* only the partial last panel */
        ks->pack(j->apack + r * kern__gemm_ksteps(afmt, j->kcur) * mr * 4, mr,
                 j->a + (row * j->a_rs + j->pc * j->a_cs) * j->es, j->in_dt, j->a_rs, j->a_cs, nw,
                 j->kcur, afmt);
    }
}

/* Compute task: rows [ic + rb*mb, ...) x columns [jc + cb*nb, ...). */
static void kern__gemm_compute_task(void *arg, int64_t task, int thread) {
    kern__gemm_job *j = (kern__gemm_job *)arg;
    const kern__gemm_fns *ks = j->ks;
    int mr = ks->cfg->mr, nr = ks->cfg->nr;
    int64_t kst = kern__gemm_ksteps(ks->fmt, j->kcur);
    int64_t kst_a = kern__gemm_ksteps(KERN__GEMM_AFMT(ks), j->kcur);
    int64_t cb = task / j->n_rb, rb = task % j->n_rb;
    int64_t r0 = j->ic + rb * j->mb, r1 = kern__gemm_min(j->ic + j->mcur, r0 + j->mb);
    int64_t c0 = j->jc + cb * j->nb, c1 = kern__gemm_min(j->jc + j->ncur, c0 + j->nb);
    int64_t ir, jr, i;
    float tile[32 * 32] KERN_ALIGNED(64);
    const kern__epi *e = &j->epi;
    int64_t dsz = (int64_t)kern_dtype_size(e->dst_dt), ssz = (int64_t)kern_dtype_size(e->src_dt);
    int64_t rsz = (int64_t)kern_dtype_size(e->res_dt);
    /* (not on AMX tiles: the 64 prefetches of a 32-row tile compete with
     * the tile loads for fill buffers; 4096 x 4096 x 1024, 1 thread: 51.2
     * ms with them, 48.8 without) */
    int pf = e->dst_cs == 1 && !e->glu && !ks->tiles_on, pf_src = e->src && e->src != e->dst && e->src_cs == 1;
    int pf_res = e->res && e->res_cs == 1;
    /* Tiles in row-major order (rows outer) or column-major order
     * (columns outer, ks->cfg->col_outer); the order changes which operand
     * stays in L1, never the bits of a result. */
    int co = ks->cfg->col_outer;
    int64_t o0 = co ? c0 : r0, o1 = co ? c1 : r1, i0 = co ? r0 : c0, i1 = co ? r1 : c1;
    int64_t os = co ? nr : mr, is = co ? mr : nr, oo, ii;
    (void)thread;
    if (ks->tiles_on) ks->tiles_on();
    for (oo = o0; oo < o1; oo += os)
        for (ii = i0; ii < i1; ii += is) {
            int64_t ldb, pi, pj;
            const char *ap;
            const float *ua;
            const void *bp;
            int m, n, pm;
            ir = co ? ii : oo;
            jr = co ? oo : ii;
            ap = j->apack + (j->ua ? 0 : ((ir - j->ic) / mr) * kst_a * mr * 4);
            m = (int)kern__gemm_min(mr, r1 - ir);
            n = (int)kern__gemm_min(nr, c1 - jr);
            ua = j->ua && m == mr ? (const float *)(const void *)(j->a + (ir * j->a_rs + j->pc) * j->es) : NULL;
            bp = kern__gemm_bpanel(j, jr, &ldb);
            /* Start fetching the C (or scratch) lines of the next tile, so
             * they arrive while this microkernel runs: the rows of a C tile
             * are far apart and the hardware prefetchers miss them. (Inline
             * here: GCC deletes a helper that only prefetches as a pure
             * function.) */
            if (co) {
                if (ir + mr < r1) { pi = ir + mr; pj = jr; }
                else { pi = r0; pj = jr + nr; }
                pm = pj < c1 ? (int)kern__gemm_min(mr, r1 - pi) : 0;
            } else if (jr + nr < c1) { pi = ir; pj = jr + nr; pm = m; }
            else { pi = ir + mr; pj = c0; pm = (int)kern__gemm_min(mr, r1 - pi); }
            if (pf && pm > 0)
                for (i = 0; i < pm; i++) {
                    const char *d = e->dst + ((pi + i) * e->dst_rs + (pj - e->dst_j0)) * dsz;
                    KERN__GEMM_PREFETCH(d, 0);
                    KERN__GEMM_PREFETCH(d + (nr - 1) * dsz, 0);
                    if (pf_src) {
                        const char *sp = e->src + ((pi + i) * e->src_rs + (pj - e->src_j0)) * ssz;
                        KERN__GEMM_PREFETCH(sp, 0);
                        KERN__GEMM_PREFETCH(sp + (nr - 1) * ssz, 0);
                    }
                    if (pf_res) {
                        const char *rp = e->res + ((pi + i) * e->res_rs + pj * e->res_cs) * rsz;
                        KERN__GEMM_PREFETCH(rp, 0);
                        KERN__GEMM_PREFETCH(rp + (nr - 1) * rsz, 0);
                    }
                }
            if (j->direct && m == mr && n == nr) {
                /* f32 C, no epilogue in this pass: the microkernel adds its
                 * tile to C (or overwrites it) in place */
                float *cd = (float *)(void *)(e->dst + (ir * e->dst_rs + (jr - e->dst_j0)) * 4);
                if (ua) ks->ukr_ua(kst, ua, j->ua_ld, bp, ldb, cd, e->dst_rs, e->src != NULL);
                else ks->ukr(kst, ap, bp, ldb, cd, e->dst_rs, e->src != NULL);
            } else {
                if (ua) ks->ukr_ua(kst, ua, j->ua_ld, bp, ldb, tile, nr, 0);
                else ks->ukr(kst, ap, bp, ldb, tile, nr, 0);
                ks->store(e, ir, jr, tile, nr, m, n);
            }
        }
    if (ks->tiles_off) ks->tiles_off();
}

typedef void (*kern__gemm_task_fn)(void *arg, int64_t task, int thread);

static void kern__gemm_run(kern_ctx *ctx, int64_t n, kern__gemm_task_fn fn, void *arg,
                           int thread) {
    int64_t i;
    if (ctx) {
        kern_parallel_for(ctx, n, fn, arg);
        return;
    }
    for (i = 0; i < n; i++) fn(arg, i, thread);
}

/* Streaming path (M <= KERN__GEMM_STREAM_M: decode and small batches): B is
 * read in place, never repacked: from its 32-wide prepacked panels, or
 * from a row-major f32 B (ldb = its row stride; only a partial last column
 * group is copied into a zero-padded panel). A is packed once. Each task
 * owns 32 columns and all M rows: the M x 32 accumulator tile stays in L1
 * while k advances in chunks of KERN__GEMM_SMALL_KC steps, and every row
 * panel (and both 16-column halves with the 16-wide kernels) consumes a
 * chunk of B while it is still in cache, so B is read from memory once.
 * M <= 16 uses the small-M kernels (1x32, 2x32, 4x32, 8x32; AVX2 1x32, 2x32, 4x16), larger
 * M the main kernel over cdiv(M, mr) row panels. */

#define KERN__GEMM_SMALL_KC 256
/* k steps per piece, per tile row, when a task spans several column
 * groups: short pieces keep few rows of B in flight (M = 1: 8 rows read
 * in 4 KiB runs, which the prefetchers follow), more rows of A amortise
 * the tile's loads and stores over longer ones */
#ifndef KERN__GEMM_SMALL_SUB
#define KERN__GEMM_SMALL_SUB 8
#endif
/* column groups per task at most (a row-major B read in place) */
#ifndef KERN__GEMM_SMALL_GRP
#define KERN__GEMM_SMALL_GRP 128
#endif

typedef struct kern__gemm_sjob {
    kern__gemm_job *j;
    kern__gemm_small sk; /* the kernel used for every row panel */
    int64_t npan;        /* row panels */
    const char *apack;   /* npan panels of sk.mr x kst */
    const float *edge;   /* kst x 32 padded last column group (row-major B) */
    float *tiles;        /* M x (32 grp) accumulator tile per thread */
    int per_thread;      /* tiles indexed by thread (phase-parallel mode) */
    int bform;           /* how the kernels read B (kern__gemm_bform) */
    int row1;            /* M = 1, f32 B row-major in place: ks->row1 */
    int64_t grp;         /* 32-column groups per task */
    int64_t kst;
} kern__gemm_sjob;

/* The B micro-panels of 32-column group g: prepacked, the padded edge
 * copy, or a row-major B in place. */
static const char *kern__gemm_sgroup(const kern__gemm_sjob *s, int64_t g, int64_t *ldb) {
    const kern__gemm_job *j = s->j;
    int64_t col = g * KERN__GEMM_PW;
    if (j->pb) {
        *ldb = KERN__GEMM_PW;
        return (const char *)j->pb->data + g * j->pb->ks * KERN__GEMM_PW * 4;
    }
    if (j->N - col < KERN__GEMM_PW) {
        *ldb = KERN__GEMM_PW;
        return (const char *)s->edge;
    }
    *ldb = j->b_rs;
    return j->b + col * j->es;
}

static void kern__gemm_small_task(void *arg, int64_t task, int thread) {
    kern__gemm_sjob *s = (kern__gemm_sjob *)arg;
    kern__gemm_job *j = s->j;
    const kern__gemm_small *sk = &s->sk;
    const kern__gemm_ukr ukr = j->pb && sk->ukr_pb ? sk->ukr_pb : sk->ukr;
    int64_t g0 = task * s->grp, ngr = kern__gemm_cdiv(j->N, KERN__GEMM_PW);
    int64_t ng = kern__gemm_min(s->grp, ngr - g0), col0 = g0 * KERN__GEMM_PW;
    int64_t ncol = kern__gemm_min(ng * KERN__GEMM_PW, j->N - col0), ldt = ng * KERN__GEMM_PW;
    int64_t k0, k1, p, g, skc = KERN__GEMM_SMALL_KC, bes = s->bform == 1 ? 2 : 4;
    int h;
    float *tile = s->tiles + (s->per_thread ? (int64_t)thread * KERN__GEMM_STREAM_TILE : 0);
    const char *bg[KERN__GEMM_SMALL_GRP]; /* each group's B and row stride */
    int64_t lg[KERN__GEMM_SMALL_GRP];
    if (s->row1) { /* M = 1, row-major f32 B in place: one forward stream */
        j->ks->row1(s->kst, (const float *)(const void *)s->apack, j->b + col0 * j->es, j->b_rs, tile,
                    ncol);
        j->ks->store(&j->fin, 0, col0, tile, ldt, 1, (int)ncol);
        return;
    }
    for (g = 0; g < ng; g++) bg[g] = kern__gemm_sgroup(s, g0 + g, &lg[g]);
    if (s->kst == 0) memset(tile, 0, sizeof(float) * (size_t)(s->npan * sk->mr * ldt));
    for (k0 = 0; k0 < s->kst; k0 += skc) {
        int64_t kk = kern__gemm_min(skc, s->kst - k0);
        /* several groups: short k pieces across all of them, so B is read
         * in runs of ldt columns, not 128 bytes per row */
        int64_t sub = ng > 1 ? kern__gemm_min(kk, KERN__GEMM_SMALL_SUB * s->npan * sk->mr) : kk;
        for (k1 = 0; k1 < kk; k1 += sub) {
            int64_t k2 = kern__gemm_min(sub, kk - k1);
            int last = k0 + k1 + k2 >= s->kst;
            if (last) { /* the lines the store reads */
                const kern__epi *e = &j->fin;
                int64_t i, c;
                int64_t rsz = (int64_t)kern_dtype_size(e->res_dt), ssz = (int64_t)kern_dtype_size(e->src_dt);
                for (i = 0; i < j->M; i++)
                    for (c = col0; c < col0 + ncol; c += 16) {
                        if (e->res && e->res_cs == 1)
                            KERN__GEMM_PREFETCH(e->res + (i * e->res_rs + c) * rsz, 0);
                        if (e->src && e->src_cs == 1)
                            KERN__GEMM_PREFETCH(e->src + (i * e->src_rs + c) * ssz, 0);
                    }
            }
            /* an f32 B with several row panels: the panels innermost, each
             * reading the same piece of B (k2 rows x sk->nr columns) while
             * it is in L1; else panel by panel (the bf16 forms measured 3-8 %
             * slower panels-innermost: docs/gemm.md, "Row panels innermost") */
            {
                const char *ap = s->apack + (k0 * s->npan + k1) * sk->mr * 4;
                /* kb: the row of B (form 1), the k pair (form 2) or the
                 * k step of this piece; a pair table's step is two rows */
                int64_t kb = (k0 + k1) >> (s->bform == 2), pst = kk * sk->mr * 4, q, q1;
                if (s->bform == 1 && j->ks->fmt == KERN__GEMM_FMT_PAIR) kb *= 2;
                int inner = s->npan > 1 && !s->bform, acc = k0 + k1 > 0;
                for (p = 0; p < (inner ? 1 : s->npan); p++)
                    for (g = 0; g < ng; g++)
                        for (h = 0; h < KERN__GEMM_PW; h += sk->nr)
                            for (q = inner ? 0 : p, q1 = inner ? s->npan : p + 1; q < q1; q++)
                                ukr(k2, ap + q * pst, bg[g] + (kb * lg[g] + h) * bes, lg[g],
                                    tile + q * sk->mr * ldt + g * KERN__GEMM_PW + h, ldt, acc);
            }
        }
    }
    j->ks->store(&j->fin, 0, col0, tile, ldt, (int)j->M, (int)ncol);
}

/* Phase 1 of the streaming path: one task per A row panel, plus the padded
 * last column group of a row-major B. */
static void kern__gemm_small_pack_task(void *arg, int64_t task, int thread) {
    kern__gemm_sjob *s = (kern__gemm_sjob *)arg;
    kern__gemm_job *j = s->j;
    const kern__gemm_fns *ks = j->ks;
    (void)thread;
    if (task < s->npan) {
        /* chunk-major: the panels of one k chunk are adjacent, so the
         * compute tasks read A as one forward stream per chunk */
        int64_t row = task * s->sk.mr, skc = KERN__GEMM_SMALL_KC, k0;
        int pair = ks->fmt == KERN__GEMM_FMT_PAIR;
        for (k0 = 0; k0 < s->kst; k0 += skc) {
            int64_t kk = kern__gemm_min(skc, s->kst - k0), kx = pair ? 2 * k0 : k0;
            ks->pack((char *)(uintptr_t)s->apack + (k0 * s->npan + task * kk) * s->sk.mr * 4,
                     s->sk.mr, j->a + (row * j->a_rs + kx * j->a_cs) * j->es, j->in_dt, j->a_rs,
                     j->a_cs, (int)kern__gemm_min(s->sk.mr, j->M - row),
                     kern__gemm_min(j->K - kx, pair ? 2 * kk : kk), ks->fmt);
        }
    } else if (s->bform == 1) { /* bf16 rows: a zero-padded bf16 panel */
        int64_t col = (j->N / KERN__GEMM_PW) * KERN__GEMM_PW, k, w, nc = j->N - col;
        uint16_t *d = (uint16_t *)(uintptr_t)s->edge;
        const uint16_t *src = (const uint16_t *)(const void *)j->b + col;
        for (k = 0; k < j->K; k++)
            for (w = 0; w < KERN__GEMM_PW; w++) d[k * KERN__GEMM_PW + w] = w < nc ? src[k * j->b_rs + w] : 0;
    } else {
        int64_t col = (j->N / KERN__GEMM_PW) * KERN__GEMM_PW;
        ks->pack((float *)(uintptr_t)s->edge, KERN__GEMM_PW, j->b + col * j->es, j->in_dt, j->b_cs,
                 j->b_rs, (int)(j->N - col), j->K, ks->fmt);
    }
}

/* How the streaming path's kernels read B: 0 in the table's own format
 * (f32 rows in place, or prepacked panels of the table's format), 1 bf16
 * rows in place, 2 bf16 pair panels on a table whose format is f32 (the
 * "h" and "p" kernels). */
static int kern__gemm_bform(const kern__gemm_job *j) {
    if (j->pb) return j->pb->fmt == j->ks->fmt ? 0 : 2;
    if (j->in_dt != KERN_BF16) return 0;
    /* a pair table's row kernels read both rows of every pair: K even
     * (a table without row kernels packs such a B: kern__gemm_stream_lim) */
    return j->ks->fmt == KERN__GEMM_FMT_F32 || j->K % 2 == 0;
}

/* The small-M kernels of table ks for B form bform (n_small of them), or
 * NULL: form 1 the table's row kernels (ks->brows), form 2 has kernels on
 * AVX2 only. (Those, the AVX2 unpair in kern__gemm_pack_task and the
 * prepacked groups per task are keyed on the AVX2 table / row by pointer;
 * members of kern__gemm_fns would carry them better once a second level
 * has such kernels.) */
static const kern__gemm_small *kern__gemm_bsmall(const kern__gemm_fns *ks, int bform) {
#ifdef KERN_X86
    static const kern__gemm_small pr[3] = {{1, 32, kern__gemm_p_1x32__avx2, NULL},
                                           {2, 32, kern__gemm_p_2x32__avx2, NULL},
                                           {4, 16, kern__gemm_p_4x16__avx2, NULL}};
    if (ks == &kern__gemm_fns_avx2 && bform == 2) return pr;
#endif
    if (bform == 1) return ks->brows;
    return bform ? NULL : ks->small;
}

/* A bf16 B's rows in place with the main kernel's twin (brows_main): up
 * to this M, and while the packed A is at most this many bytes. Zen 5,
 * bf16 M x N x K with B as given, 1 / 2 threads, ms, packed B (general
 * path) -> rows in place: 24 x 4096^2 5.40 / 3.87 -> 2.98 / 1.36, 64 x
 * 4096^2 (A 512 KiB) 7.71 / 5.82 -> 7.88 / 4.13, 128 x 768 x 3072 (768
 * KiB) 1.52 / 1.07 -> 1.23 / 0.86, 256 x 3072 x 768 2.71 / 1.79 -> 2.75 /
 * 1.49; past the bounds: 128 x 4096^2 (1 MiB) 11.6 / 7.83 -> 13.7 / 7.08,
 * 512 x 4096^2 36.4 / 21.4 -> 55.9 / 30.3, 500 x 1000 x 512 1.07 / 0.65
 * -> 1.18 / 0.69. */
#define KERN__GEMM_BROWS_M 256
#define KERN__GEMM_BROWS_ABYTES (768 * 1024)

/* The largest M the streaming path takes for this job (0: none): up to
 * cfg->stream_m for B in the table's format, up to KERN__GEMM_SMALL_M
 * for the bf16 forms (above it only the main kernel, which reads f32
 * panels, would be left). */
static int64_t kern__gemm_stream_lim(const kern__gemm_job *j) {
    int bf = kern__gemm_bform(j);
    if (!j->pb && j->b_cs != 1) return 0;
    if (bf == 1 && j->ks->brows_main) {
        /* rows in place above the small kernels while the packed A (read
         * again by every task) stays in L2 */
        int64_t lim = KERN__GEMM_BROWS_ABYTES / (kern__gemm_ksteps(j->ks->fmt, j->K > 0 ? j->K : 1) * 4);
        lim = lim < KERN__GEMM_BROWS_M ? lim : KERN__GEMM_BROWS_M;
        return lim > KERN__GEMM_SMALL_M ? lim : KERN__GEMM_SMALL_M;
    }
    if (bf) return kern__gemm_bsmall(j->ks, bf) && j->ks->n_small ? KERN__GEMM_SMALL_M : 0;
    return j->pb || (j->in_dt == KERN_F32 && j->ks->fmt == KERN__GEMM_FMT_F32) ? j->ks->cfg->stream_m : 0;
}

static int kern__gemm_small_ok(const kern__gemm_job *j) {
    return j->M > 0 && j->M <= kern__gemm_stream_lim(j);
}

static kern__gemm_small kern__gemm_small_pick(const kern__gemm_job *j) {
    const kern__gemm_fns *ks = j->ks;
    int bf = kern__gemm_bform(j);
    const kern__gemm_small *tab = kern__gemm_bsmall(ks, bf);
    kern__gemm_small r;
    int64_t M = j->M;
    int i;
    if (M <= KERN__GEMM_SMALL_M && ks->n_small > 0 && tab) {
        /* the narrowest that covers M in one panel, else the widest in
         * several (M = 9..16: two 8-row panels, four 4-row ones on AVX2);
         * the bf16 forms' tables match the f32 one's rows */
        for (i = 0; i < ks->n_small - 1; i++)
            if (tab[i].mr >= M) break;
        return tab[i];
    }
    r.mr = ks->cfg->mr;
    r.nr = ks->cfg->nr;
    r.ukr = ks->ukr;
    r.ukr_pb = ks->ukr_pb;
    if (bf == 1 && ks->brows_main) { /* bf16 rows in place */
        r.ukr = ks->brows_main;
        r.ukr_pb = NULL;
    }
    return r;
}

/* ks, or, where ks would convert a prepacked B of another panel format on
 * every call, the generic class's table of level isa when that one reads
 * the panels as they are: a weight prepacked in bf16 pairs keeps the pair
 * kernels (Xeon class, M = 1 x 4096 x 4096: unpairing on every call 18.4
 * ms, the pair kernels 1.2 ms). */
static const kern__gemm_fns *kern__gemm_keep_panels(const kern__gemm_fns *ks, kern_isa isa,
                                                   const kern_gemm_packed_b *pb) {
    const kern__gemm_fns *native;
    if (!pb || pb->fmt == ks->fmt) return ks;
    native = kern__gemm_fns_for(isa, KERN_UARCH_GENERIC, pb->dtype);
    return native->fmt == pb->fmt ? native : ks;
}

/* The table an AMX table hands M < KERN__GEMM_AMX_MIN_M against a
 * prepacked B to: its alt (the class's AVX512_BF16 table), keeping the
 * pair kernels for the prepacked panels. */
static const kern__gemm_fns *kern__gemm_amx_alt(const kern__gemm_fns *ks,
                                               const kern_gemm_packed_b *pb) {
    return kern__gemm_keep_panels(ks->alt, KERN_ISA_AVX512_BF16, pb);
}

/* Short k passes on the AMX tables: where the f32 partial sums of a
 * column pass (M x nc) stay in L2, kc = KERN__GEMM_AMX_KC_SHORT keeps
 * each 32-row A micro-panel (256 k, 16 KiB) in L1 while the B panels
 * stream from L2, and the C round trip of each pass hits L2 (with C
 * larger than that it goes to memory and costs more than it saves).
 * Chosen from M, N and K alone, never the thread count, so the bits do
 * not depend on it; more threads split the columns (kern__gemm_colsplit)
 * rather than the rows, so no pass waits on a barrier. Against a
 * prepacked B only from M = KERN__GEMM_AMX_SHORT_PM: below it the step
 * streams B from memory, and 256-k runs of each panel stream worse than
 * 2048-k ones. Xeon, bf16, 1 / 2 threads, ms: 128 x 768 x 3072 0.99 /
 * 0.65 -> 0.66 / 0.34 (prepacked 0.68 / 0.36 -> 0.53 / 0.26), 16 x 4096 x
 * 4096 B as given 4.29 / 2.31 -> 2.93 / 1.46 (the 256-k slab of B packed
 * per pass stays in L2 for the compute that reads it; 2048-k slabs went
 * out to memory and back); prepacked M 4-16 1.35-1.40 -> 1.51-1.63 with
 * short passes, so not there. */
#ifndef KERN__GEMM_AMX_KC_SHORT
#define KERN__GEMM_AMX_KC_SHORT 256
#endif
#ifndef KERN__GEMM_AMX_CL2
#define KERN__GEMM_AMX_CL2 (512 << 10)
#endif
static int64_t kern__gemm_amx_short_m(const kern__gemm_job *j) {
    return KERN__GEMM_AMX_CL2 / (4 * kern__gemm_min(j->nc, j->N > 0 ? j->N : 1));
}
#ifndef KERN__GEMM_AMX_SHORT_PM
#define KERN__GEMM_AMX_SHORT_PM 64
#endif
static int kern__gemm_amx_short(const kern__gemm_job *j) {
    return j->ks->tiles_on && j->K > KERN__GEMM_AMX_KC_SHORT && j->M <= kern__gemm_amx_short_m(j) &&
           (!j->pb || j->M >= KERN__GEMM_AMX_SHORT_PM);
}

/* The job at the largest smaller M that takes short passes, where this
 * M does not (its scratch may be larger: partial sums in scratch where
 * this M needs none). Returns 0 when there is none. */
static int kern__gemm_amx_short_below(const kern__gemm_job *j, kern__gemm_job *js) {
    int64_t m = kern__gemm_amx_short_m(j);
    if (!j->ks->tiles_on || j->K <= KERN__GEMM_AMX_KC_SHORT || m <= 0 || j->M <= m) return 0;
    *js = *j;
    js->M = m;
    js->kc = KERN__GEMM_AMX_KC_SHORT;
    js->use_ctmp = 1;
    return 1;
}

/* Threads split an item's columns (each window a whole single-thread
 * GEMM: its own B panels, no barrier per pass) where the AMX tables take
 * short passes and every thread gets at least two 32-column groups. */
static int kern__gemm_colsplit_ok(const kern__gemm_job *j, int T) {
    return T > 1 && kern__gemm_amx_short(j) && !kern__gemm_small_ok(j) &&
           kern__gemm_cdiv(j->N, 32) >= 2 * (int64_t)T;
}

/* Scratch for one item at exactly this M. */
static size_t kern__gemm_item_bytes_at(const kern__gemm_job *j, int threads) {
    const kern__gemm_cfg *cfg = j->ks->cfg;
    size_t sz = 0;
    if (kern__gemm_small_ok(j)) {
        kern__gemm_small sk = kern__gemm_small_pick(j);
        int64_t kst = kern__gemm_ksteps(j->ks->fmt, j->K);
        sz += kern__gemm_al64((size_t)(kern__gemm_cdiv(j->M, sk.mr) * sk.mr * kst * 4));
        if (!j->pb && j->N % KERN__GEMM_PW) sz += kern__gemm_al64((size_t)(kst * KERN__GEMM_PW * 4));
        sz += (size_t)threads * KERN__GEMM_STREAM_TILE * 4;
        return sz;
    } else {
        int64_t kc = kern__gemm_min(j->kc, j->K), nc = kern__gemm_min(j->nc, j->N);
        int64_t kst = kern__gemm_ksteps(j->ks->fmt, kc);
        int64_t mc = kern__gemm_min((cfg->mc / cfg->mr) * cfg->mr, kern__gemm_cdiv(j->M, cfg->mr) * cfg->mr);
        sz += kern__gemm_al64((size_t)(mc * kern__gemm_ksteps(KERN__GEMM_AFMT(j->ks), kc) * 4));
        if (!j->pb || j->pb->fmt != j->ks->fmt)
            sz += kern__gemm_al64((size_t)(kern__gemm_cdiv(nc, cfg->nr) * cfg->nr * kst * 4));
        if (j->use_ctmp) sz += kern__gemm_al64((size_t)(j->M * nc * 4));
    }
    return sz;
}

/* Scratch for one item (see kern__gemm_item), never less than a smaller
 * M needs: the streaming path (M <= cfg->stream_m) packs all of A, which
 * can exceed the general path's mc x kc block, so above stream_m the
 * figure is at least the streaming one at M = stream_m. A workspace sized
 * at a bound thus serves every M below it (the graph executor sizes its
 * arena that way). */
static size_t kern__gemm_item_bytes(const kern__gemm_job *j, int threads) {
    size_t sz = kern__gemm_item_bytes_at(j, threads);
    if (j->ks->alt && j->pb && j->M >= KERN__GEMM_AMX_MIN_M) {
        /* a smaller M takes the alt table (kern__gemm_amx_alt) */
        kern__gemm_job js = *j;
        size_t s2;
        js.ks = kern__gemm_amx_alt(j->ks, j->pb);
        js.M = KERN__GEMM_AMX_MIN_M - 1;
        s2 = kern__gemm_item_bytes(&js, threads);
        if (s2 > sz) sz = s2;
    }
    {   /* a smaller M takes short k passes (kern__gemm_amx_short) */
        kern__gemm_job js;
        if (kern__gemm_amx_short_below(j, &js)) {
            size_t s2 = kern__gemm_item_bytes_at(&js, threads);
            if (s2 > sz) sz = s2;
        }
    }
    if (j->M > kern__gemm_stream_lim(j)) {
        kern__gemm_job js = *j;
        js.M = kern__gemm_stream_lim(j);
        if (kern__gemm_small_ok(&js)) {
            size_t s2 = kern__gemm_item_bytes_at(&js, threads);
            if (s2 > sz) sz = s2;
        }
    }
    return sz;
}

/* The streaming path of one item (M <= KERN__GEMM_STREAM_M, see
 * kern__gemm_sjob): A packed once, then one task per 32 columns. */
static void kern__gemm_item_stream(kern__gemm_job *j, char *scratch, kern_ctx *ctx, int thread) {
    kern__gemm_sjob s;
    size_t abytes;
    s.j = j;
    s.sk = kern__gemm_small_pick(j);
    s.bform = kern__gemm_bform(j);
    s.kst = kern__gemm_ksteps(j->ks->fmt, j->K);
    s.npan = kern__gemm_cdiv(j->M, s.sk.mr);
    s.apack = scratch;
    s.edge = NULL;
    /* the row kernel reads the whole row-major B in place, the last
     * columns too (an unpacked B on this path is f32 with unit column
     * stride: kern__gemm_stream_lim) */
    s.row1 = j->ks->row1 && j->M == 1 && !j->pb && !s.bform;
    abytes = kern__gemm_al64((size_t)(s.npan * s.sk.mr * s.kst * 4));
    if (!j->pb && !s.row1 && j->N % KERN__GEMM_PW) {
        s.edge = (const float *)(const void *)(scratch + abytes);
        abytes += kern__gemm_al64((size_t)(s.kst * KERN__GEMM_PW * 4));
    }
    s.tiles = (float *)(void *)(scratch + abytes);
    s.per_thread = ctx != NULL;
    /* Each task takes several 32-column groups (as many as the tile
     * holds, up to KERN__GEMM_SMALL_GRP; one task at one thread, at least
     * 2 a thread otherwise), so a row-major B streams in long runs per
     * row: Zen 3, 1 x 4096 x 4096, 4 KiB runs (32 groups, 4
     * tasks a thread) against 16 KiB at one thread, ms: f32 3.20 -> 2.62,
     * bf16 2.05 -> 1.42; 2 threads (8 KiB runs) 2.42 -> 2.00, 1.45 ->
     * 1.05; M >= 8 level. The groups change the order of the calls, never
     * the k order of any output's sum. */
    {
        int64_t ngr = kern__gemm_cdiv(j->N, KERN__GEMM_PW), T = ctx ? kern_ctx_threads(ctx) : 1;
        /* the row kernel: one task a thread (the longest runs a row) */
        int64_t lim = T == 1 ? ngr : s.row1 ? kern__gemm_cdiv(ngr, T) : ngr / (2 * T);
        s.grp = KERN__GEMM_STREAM_TILE / (s.npan * s.sk.mr * KERN__GEMM_PW);
        if (s.grp > KERN__GEMM_SMALL_GRP) s.grp = KERN__GEMM_SMALL_GRP;
        /* prepacked panels: each group is one contiguous stream already;
         * a few at once (short runs across them, as above) keep more lines
         * in flight than one stream's prefetcher does: Zen 3, 4096 x 4096,
         * 1 thread, ms: f32 M1 2.82 -> 2.32 with 4, M4 4.58 -> 3.61 with
         * 2 (4: 4.11); bf16 M1 1.55 -> 1.13; 1 (before), 2 or 4 level
         * within 3 % elsewhere. Measured on AVX2's small-M kernels only:
         * other levels, and the main kernel, keep one group a task. */
        if (j->pb) {
            int pg = j->ks->cfg == &kern__gemm_cfgs[KERN__GEMM_CFG_AVX2] && j->M <= KERN__GEMM_SMALL_M
                         ? (s.sk.nr == 32 ? 4 : 2)
                         : 1;
            if (s.grp > pg) s.grp = pg;
        }
        if (s.grp > lim) s.grp = lim;
        if (s.grp < 1) s.grp = 1;
    }
    kern__gemm_run(ctx, s.npan + (s.edge != NULL), kern__gemm_small_pack_task, &s, thread);
    kern__gemm_run(ctx, kern__gemm_cdiv(kern__gemm_cdiv(j->N, KERN__GEMM_PW), s.grp),
                   kern__gemm_small_task, &s, thread);
}

/* The general path's buffers in the item scratch (kern__gemm_item_bytes),
 * how B is read and whether A is read in place. */
static void kern__gemm_item_setup(kern__gemm_job *j, char *scratch) {
    const kern__gemm_fns *ks = j->ks;
    const kern__gemm_cfg *cfg = ks->cfg;
    int64_t kc = kern__gemm_min(j->kc, j->K), nc = kern__gemm_min(j->nc, j->N);
    int64_t mc = kern__gemm_min((cfg->mc / cfg->mr) * cfg->mr, kern__gemm_cdiv(j->M, cfg->mr) * cfg->mr);
    int64_t kst = kern__gemm_ksteps(ks->fmt, kc);
    size_t off = kern__gemm_al64((size_t)(mc * kern__gemm_ksteps(KERN__GEMM_AFMT(ks), kc) * 4));
    j->apack = scratch;
    j->bpack = NULL;
    j->ctmp = NULL;
    if (!j->pb || j->pb->fmt != ks->fmt) {
        j->bpack = scratch + off;
        off += kern__gemm_al64((size_t)(kern__gemm_cdiv(nc, cfg->nr) * cfg->nr * kst * 4));
    }
    if (j->use_ctmp) j->ctmp = (float *)(void *)(scratch + off);
    j->bmode = !j->pb ? 0 : (j->pb->fmt == ks->fmt ? 1 : 2);
    j->brows = j->bmode == 0 && j->b_cs == 1;
    /* A in place: row-major A, when packing A would cost more than the
     * L1-friendly panel saves (few columns of B reuse each packed A; on
     * the AMX tables always: the pack was a pass over A that missed
     * cache, and tile loads take the rows as they are; Xeon, 1 thread,
     * 512^3 0.28 -> 0.24 ms, 1024^3 2.14 -> 2.04): f32, or bf16 pairs (an
     * even K and row stride, so every pair is in a row) */
    j->ua = ks->ukr_ua && j->a_cs == 1 && (j->N <= KERN__GEMM_UA_MAXN || ks->tiles_on) &&
            ((ks->fmt == KERN__GEMM_FMT_F32 && j->in_dt == KERN_F32) ||
             (ks->fmt == KERN__GEMM_FMT_PAIR && j->in_dt == KERN_BF16 && j->K % 2 == 0 &&
              j->a_rs % 2 == 0));
    j->ua_ld = ks->fmt == KERN__GEMM_FMT_PAIR ? j->a_rs / 2 : j->a_rs;
}

/* The epilogue of the current pass (columns jc.., k pass pass_first /
 * pass_last): the final one on the last pass; before it, partial sums
 * (alpha A B, plus beta C on the first pass) into C or, with use_ctmp,
 * into the f32 scratch; and whether full tiles can skip the store. */
static void kern__gemm_pass_epi(kern__gemm_job *j) {
    kern__epi *e = &j->epi;
    *e = j->fin;
    if (!j->pass_last) { /* a partial sum: the epilogue waits for the last pass */
        e->bias = NULL;
        e->act = KERN_ACT_NONE;
        e->res = NULL;
        e->out_scale = 1.0f;
        e->glu = 0;
        if (j->use_ctmp) {
            e->dst = (char *)j->ctmp;
            e->dst_dt = KERN_F32;
            e->dst_rs = j->ncur;
            e->dst_cs = 1;
            e->dst_j0 = j->jc;
        }
    }
    if (j->pass_first) {
        e->src = j->beta != 0.0f ? j->c : NULL;
        e->src_dt = j->c_dt;
        e->src_rs = j->c_rs;
        e->src_cs = j->c_cs;
        e->src_j0 = 0;
        e->beta = j->beta;
    } else if (j->use_ctmp) {
        e->src = (const char *)j->ctmp;
        e->src_dt = KERN_F32;
        e->src_rs = j->ncur;
        e->src_cs = 1;
        e->src_j0 = j->jc;
        e->beta = 1.0f;
    } else {
        e->src = j->c;
        e->src_dt = KERN_F32;
        e->src_rs = j->c_rs;
        e->src_cs = j->c_cs;
        e->src_j0 = 0;
        e->beta = 1.0f;
    }
    /* full tiles can skip the store when this pass is a plain
     * (dst [+]= A*B) on an f32, unit-stride destination */
    j->direct = e->dst_dt == KERN_F32 && e->dst_cs == 1 && e->alpha == 1.0f &&
                (!e->src || (e->src == e->dst && e->beta == 1.0f && e->src_rs == e->dst_rs &&
                             e->src_j0 == e->dst_j0)) &&
                !e->bias && e->act == KERN_ACT_NONE && !e->res && e->out_scale == 1.0f && !e->glu;
}

/* Task shape of the current row chunk: rows balanced across T threads,
 * at least 4 tasks each. */
static void kern__gemm_task_shape(kern__gemm_job *j, int T) {
    const kern__gemm_cfg *cfg = j->ks->cfg;
    int64_t mb = cfg->mb, nb = cfg->nb, nrb, ncb;
    for (;;) {
        nrb = kern__gemm_cdiv(j->mcur, mb);
        ncb = kern__gemm_cdiv(j->ncur, nb);
        if (T == 1 || nrb * ncb >= 4 * T || (mb <= cfg->mr && nb <= cfg->nr)) break;
        if (mb > cfg->mr) mb = kern__gemm_cdiv(mb / 2, cfg->mr) * cfg->mr;
        else nb = kern__gemm_cdiv(nb / 2, cfg->nr) * cfg->nr;
    }
    mb = kern__gemm_cdiv(kern__gemm_cdiv(j->mcur, nrb), cfg->mr) * cfg->mr;
    nb = kern__gemm_cdiv(kern__gemm_cdiv(j->ncur, ncb), cfg->nr) * cfg->nr;
    j->n_rb = kern__gemm_cdiv(j->mcur, mb);
    j->n_cb = kern__gemm_cdiv(j->ncur, nb);
    j->mb = mb;
    j->nb = nb;
}

/* Runs one item. ctx != NULL: phases in parallel on the context; ctx ==
 * NULL: everything inline on `thread` (batch-parallel mode). */
static void kern__gemm_item(kern__gemm_job *j, char *scratch, kern_ctx *ctx, int thread) {
    const kern__gemm_cfg *cfg = j->ks->cfg;
    int T = ctx ? kern_ctx_threads(ctx) : 1;
    /* row chunks are whole micro-panels, so which tiles are full (and take
     * the direct path) never depends on the thread count */
    int64_t mcs = (cfg->mc / cfg->mr) * cfg->mr;
    int64_t npc = j->K > 0 ? kern__gemm_cdiv(j->K, j->kc) : 1, pcb, jc, ic;
    if (kern__gemm_small_ok(j)) {
        kern__gemm_item_stream(j, scratch, ctx, thread);
        return;
    }
    kern__gemm_item_setup(j, scratch);
    for (jc = j->n0; jc < j->n1; jc += j->nc) {
        j->jc = jc;
        j->ncur = kern__gemm_min(j->nc, j->n1 - jc);
        for (pcb = 0; pcb < npc; pcb++) {
            j->pc = pcb * j->kc;
            j->kcur = kern__gemm_min(j->kc, j->K - j->pc);
            j->pass_first = pcb == 0;
            j->pass_last = pcb == npc - 1;
            kern__gemm_pass_epi(j);
            for (ic = 0; ic < j->M; ic += mcs) {
                j->ic = ic;
                j->mcur = kern__gemm_min(mcs, j->M - ic);
                kern__gemm_task_shape(j, T);
                /* B is packed with the first row chunk of each pass */
                j->n_bpack = j->bmode == 1 || ic > 0 ? 0
                             : j->brows           ? kern__gemm_cdiv(j->kcur, KERN__GEMM_BROWS)
                                                  : kern__gemm_cdiv(j->ncur, cfg->nr);
                j->n_apack = j->ua ? (j->mcur % cfg->mr != 0) : kern__gemm_cdiv(j->mcur, cfg->mr);
                kern__gemm_run(ctx, j->n_bpack + j->n_apack, kern__gemm_pack_task, j, thread);
                kern__gemm_run(ctx, j->n_rb * j->n_cb, kern__gemm_compute_task, j, thread);
            }
        }
    }
}

/* ========================================================= public API */

typedef struct kern__gemm_plan {
    const kern__gemm_fns *ks;
    kern__gemm_job proto; /* item 0, with pointers at batch offset 0 */
    int nbd;              /* batch dims */
    int64_t bshape[KERN_MAX_DIMS];
    int64_t sa[KERN_MAX_DIMS], sb[KERN_MAX_DIMS], sc[KERN_MAX_DIMS], sr[KERN_MAX_DIMS];
    int64_t nbatch;
    int batch_parallel;
    int colsplit; /* > 1: each item's columns in this many windows, one a
                     thread, each run inline (kern__gemm_colsplit) */
    size_t item_bytes, total_bytes;
    int64_t res_es;
    int res_is_c; /* epilogue.residual is c itself */
} kern__gemm_plan;

static kern_status kern__gemm_float_dt(const kern_tensor *t, const char *op, const char *name) {
    if (t->dtype != KERN_F32 && t->dtype != KERN_BF16 && t->dtype != KERN_F16)
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s is not f32, bf16 or f16", op, name,
                         kern_dtype_name(t->dtype));
    return KERN_OK;
}

/* The shapes of a validated call. */
typedef struct kern__gemm_dims {
    int64_t M, N, K;
    int nd;                                        /* batch dims (of c) */
    int64_t bsa[KERN_MAX_DIMS], bsb[KERN_MAX_DIMS]; /* batch strides of a, b */
} kern__gemm_dims;

/* Step 1: the operands themselves (pointers, views, ranks, dtypes, act). */
static kern_status kern__gemm_check_operands(const kern_tensor *a, const kern_tensor *b,
                                             const kern_tensor *c, const kern_gemm_params *p,
                                             const char *op) {
    const kern_gemm_packed_b *pb = p->packed_b;
    kern_status st;
    if (!a) return kern__err(KERN_ERR_ARG, "%s: a is NULL", op);
    if (!c) return kern__err(KERN_ERR_ARG, "%s: c is NULL", op);
    if (pb && b)
        return kern__err(KERN_ERR_ARG, "%s: b must be NULL when params.packed_b is given", op);
    if (!pb && !b) return kern__err(KERN_ERR_ARG, "%s: b is NULL (and no params.packed_b)", op);
    if (pb && pb->magic != KERN__GEMM_MAGIC)
        return kern__err(KERN_ERR_ARG, "%s: params.packed_b is not a packed B (freed?)", op);
    if ((st = kern_tensor_check(a, op, "a")) != KERN_OK) return st;
    if (b && (st = kern_tensor_check(b, op, "b")) != KERN_OK) return st;
    if ((st = kern_tensor_check(c, op, "c")) != KERN_OK) return st;
    if (a->ndim < 2)
        return kern__err(KERN_ERR_SHAPE, "%s: a has %d dims, needs at least 2", op, a->ndim);
    if (b && b->ndim < 2)
        return kern__err(KERN_ERR_SHAPE, "%s: b has %d dims, needs at least 2", op, b->ndim);
    if (c->ndim < 2)
        return kern__err(KERN_ERR_SHAPE, "%s: c has %d dims, needs at least 2", op, c->ndim);
    if ((st = kern__gemm_float_dt(a, op, "a")) != KERN_OK) return st;
    if ((st = kern__gemm_float_dt(c, op, "c")) != KERN_OK) return st;
    if (b && b->dtype != a->dtype)
        return kern__err(KERN_ERR_DTYPE, "%s: a.dtype=%s but b.dtype=%s (must be the same)", op,
                         kern_dtype_name(a->dtype), kern_dtype_name(b->dtype));
    if (pb && pb->dtype != a->dtype)
        return kern__err(KERN_ERR_DTYPE, "%s: a.dtype=%s but packed_b was packed from %s", op,
                         kern_dtype_name(a->dtype), kern_dtype_name(pb->dtype));
    if ((st = kern__epilogue_check(&p->epilogue, op, ~0u, 1, 1)) != KERN_OK) return st;
    if (p->epilogue.glu && p->beta != 0.0f)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: beta=%g with params.epilogue.glu (c has "
                         "half the linear columns; only beta = 0)", op, (double)p->beta);
    return KERN_OK;
}

/* Step 2: M, N, K from op(a), op(b) (or the packed B), and c's last two
 * dims. */
static kern_status kern__gemm_derive_mnk(const kern_tensor *a, const kern_tensor *b,
                                         const kern_tensor *c, const kern_gemm_params *p,
                                         const char *op, kern__gemm_dims *dm) {
    const kern_gemm_packed_b *pb = p->packed_b;
    char s1[96], s2[96];
    int64_t M = a->shape[a->ndim - (p->trans_a ? 1 : 2)], K = a->shape[a->ndim - (p->trans_a ? 2 : 1)];
    int64_t N, Kb;
    if (pb) {
        Kb = pb->k;
        N = pb->n;
        if (Kb != K)
            return kern__err(KERN_ERR_SHAPE,
                             "%s: op(a) is [%lld,%lld] (a.shape=%s, trans_a=%d) but packed_b "
                             "has K=%lld (N=%lld)",
                             op, (long long)M, (long long)K, kern_shape_str(a, s1, sizeof s1),
                             p->trans_a != 0, (long long)Kb, (long long)N);
    } else {
        Kb = b->shape[b->ndim - (p->trans_b ? 1 : 2)];
        N = b->shape[b->ndim - (p->trans_b ? 2 : 1)];
        if (Kb != K)
            return kern__err(KERN_ERR_SHAPE,
                             "%s: inner dimensions differ: op(a) is [%lld,%lld] (a.shape=%s, "
                             "trans_a=%d) but op(b) is [%lld,%lld] (b.shape=%s, trans_b=%d)",
                             op, (long long)M, (long long)K, kern_shape_str(a, s1, sizeof s1),
                             p->trans_a != 0, (long long)Kb, (long long)N,
                             kern_shape_str(b, s2, sizeof s2), p->trans_b != 0);
    }
    if (p->epilogue.glu && N % 2)
        return kern__err(KERN_ERR_SHAPE, "%s: params.epilogue.glu needs an even N (gate and "
                         "up columns), op(b) has N=%lld", op, (long long)N);
    if (c->shape[c->ndim - 2] != M || c->shape[c->ndim - 1] != (p->epilogue.glu ? N / 2 : N))
        return kern__err(KERN_ERR_SHAPE, "%s: c.shape=%s but op(a) op(b) is [%lld,%lld]%s", op,
                         kern_shape_str(c, s1, sizeof s1), (long long)M, (long long)N,
                         p->epilogue.glu ? " (glu: c needs N/2 columns)" : "");
    dm->M = M;
    dm->N = N;
    dm->K = K;
    return KERN_OK;
}

/* Step 3: the batch dims: broadcast(a, b) must equal c's, and c may not
 * alias itself across them. Fills the batch strides of a and b. */
static kern_status kern__gemm_derive_batch(const kern_tensor *a, const kern_tensor *b,
                                           const kern_tensor *c, const char *op,
                                           kern__gemm_dims *dm) {
    char s1[96], s2[96], s3[96];
    int nd = c->ndim - 2, na = a->ndim - 2, nb = b ? b->ndim - 2 : 0, d;
    dm->nd = nd;
    if (na > nd || nb > nd)
        return kern__err(KERN_ERR_SHAPE,
                         "%s: a.shape=%s and b.shape=%s have %d batch dims but c.shape=%s "
                         "has %d",
                         op, kern_shape_str(a, s1, sizeof s1),
                         b ? kern_shape_str(b, s2, sizeof s2) : "(packed)", na > nb ? na : nb,
                         kern_shape_str(c, s3, sizeof s3), nd);
    for (d = 0; d < nd; d++) {
        int ia = d - (nd - na), ib = d - (nd - nb);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        int64_t want = c->shape[d];
        if (da != 1 && db != 1 && da != db)
            return kern__err(KERN_ERR_SHAPE,
                             "%s: batch dims do not broadcast: a.shape=%s, b.shape=%s "
                             "(batch dim %d: %lld vs %lld)",
                             op, kern_shape_str(a, s1, sizeof s1), kern_shape_str(b, s2, sizeof s2),
                             d, (long long)da, (long long)db);
        if ((da != 1 ? da : db) != want)
            return kern__err(KERN_ERR_SHAPE,
                             "%s: c.shape[%d]=%lld but the batch of a.shape=%s and b gives "
                             "%lld",
                             op, d, (long long)want, kern_shape_str(a, s1, sizeof s1),
                             (long long)(da != 1 ? da : db));
        dm->bsa[d] = ia >= 0 && da != 1 ? a->stride[ia] : 0;
        dm->bsb[d] = ib >= 0 && db != 1 ? b->stride[ib] : 0;
    }
    for (d = 0; d < c->ndim; d++)
        if (c->stride[d] == 0 && c->shape[d] > 1 && kern_tensor_numel(c) > 0)
            return kern__err(KERN_ERR_LAYOUT,
                             "%s: c.stride[%d]=0 with c.shape[%d]=%lld (outputs would alias)", op,
                             d, d, (long long)c->shape[d]);
    return KERN_OK;
}

/* Step 4: bias and residual against c (shapes, dtypes, overlaps), and c
 * against a and b. The residual's broadcast view goes into the plan
 * (batch strides) and the final epilogue (row and column strides). */
static kern_status kern__gemm_check_epilogue(const kern_tensor *a, const kern_tensor *b,
                                             const kern_tensor *c, const kern_epilogue *e,
                                             const char *op, const kern__gemm_dims *dm,
                                             kern__gemm_plan *pl) {
    char s1[96];
    kern_status st;
    int d;
    if (e->bias) {
        const kern_tensor *bt = e->bias;
        int64_t want = e->bias_per_row ? dm->M : dm->N;
        if ((st = kern_tensor_check(bt, op, "bias")) != KERN_OK) return st;
        if ((st = kern__gemm_float_dt(bt, op, "bias")) != KERN_OK) return st;
        if (bt->ndim != 1 || bt->shape[0] != want)
            return kern__err(KERN_ERR_SHAPE, "%s: bias.shape=%s but %s needs [%lld]", op,
                             kern_shape_str(bt, s1, sizeof s1),
                             e->bias_per_row ? "bias_per_row" : "a per-column bias", (long long)want);
        if (kern_tensors_overlap(bt, c))
            return kern__err(KERN_ERR_ARG, "%s: c overlaps bias", op);
    }
    if (e->residual) {
        kern_tensor rv;
        const kern_tensor *rt = e->residual;
        kern__epi *f = &pl->proto.fin;
        if ((st = kern_tensor_check(rt, op, "residual")) != KERN_OK) return st;
        if ((st = kern__gemm_float_dt(rt, op, "residual")) != KERN_OK) return st;
        if ((st = kern_tensor_broadcast_to(rt, c->ndim, c->shape, &rv, op, "residual")) !=
            KERN_OK)
            return st;
        /* c itself (same elements, same dtype): each output is read as
         * the residual before it is written (the shared epilogue reads a
         * vector before it stores it), and the k passes before the last
         * keep their partial sums in scratch (use_ctmp) */
        pl->res_is_c = rt->data == c->data && rt->dtype == c->dtype && rt->ndim == c->ndim &&
                       !memcmp(rt->shape, c->shape, sizeof(int64_t) * (size_t)c->ndim) &&
                       !memcmp(rt->stride, c->stride, sizeof(int64_t) * (size_t)c->ndim);
        if (!pl->res_is_c && kern_tensors_overlap(rt, c))
            return kern__err(KERN_ERR_ARG, "%s: c overlaps residual (only the residual c itself "
                             "may)", op);
        for (d = 0; d < dm->nd; d++) pl->sr[d] = rv.stride[d];
        f->res = (const char *)rt->data;
        f->res_dt = rt->dtype;
        f->res_rs = rv.stride[dm->nd];
        f->res_cs = rv.stride[dm->nd + 1];
        pl->res_es = (int64_t)kern_dtype_size(rt->dtype);
    }
    if (kern_tensors_overlap(a, c)) return kern__err(KERN_ERR_ARG, "%s: c overlaps a", op);
    if (b && kern_tensors_overlap(b, c)) return kern__err(KERN_ERR_ARG, "%s: c overlaps b", op);
    return KERN_OK;
}

/* Step 5: the job of batch item 0 (operand pointers and strides, the
 * kernels of this level, the final epilogue). */
static void kern__gemm_fill_job(kern_ctx *ctx, const kern_tensor *a, const kern_tensor *b,
                                const kern_tensor *c, const kern_gemm_params *p,
                                const kern__gemm_dims *dm, kern__gemm_plan *pl) {
    kern__gemm_job *j = &pl->proto;
    const kern_epilogue *e = &p->epilogue;
    int nd = dm->nd;
    pl->ks = kern__gemm_keep_panels(
        kern__gemm_fns_for(kern_ctx_isa(ctx), kern_ctx_uarch(ctx), a->dtype), kern_ctx_isa(ctx),
        p->packed_b);
    j->ks = pl->ks;
    j->M = dm->M;
    j->N = dm->N;
    j->K = dm->K;
    j->in_dt = a->dtype;
    j->es = (int64_t)kern_dtype_size(a->dtype);
    j->a = (const char *)a->data;
    j->a_rs = a->stride[a->ndim - (p->trans_a ? 1 : 2)];
    j->a_cs = a->stride[a->ndim - (p->trans_a ? 2 : 1)];
    j->pb = p->packed_b;
    if (b) {
        j->b = (const char *)b->data;
        j->b_rs = b->stride[b->ndim - (p->trans_b ? 1 : 2)];
        j->b_cs = b->stride[b->ndim - (p->trans_b ? 2 : 1)];
    }
    j->c = (char *)c->data;
    j->c_dt = c->dtype;
    j->c_rs = c->stride[nd];
    j->c_cs = c->stride[nd + 1];
    j->beta = p->beta;
    j->fin.alpha = p->alpha_set ? p->alpha : 1.0f;
    kern__epi_set_bias(&j->fin, e->bias, e->bias_per_row != 0);
    j->fin.act = e->act;
    j->fin.glu = e->glu != 0;
    j->fin.out_scale = e->out_scale != 0.0f ? e->out_scale : 1.0f;
    j->fin.dst = j->c;
    j->fin.dst_dt = c->dtype;
    j->fin.dst_rs = j->c_rs;
    j->fin.dst_cs = j->c_cs;
    j->fin.src = j->beta != 0.0f ? j->c : NULL;
    j->fin.src_dt = c->dtype;
    j->fin.src_rs = j->c_rs;
    j->fin.src_cs = j->c_cs;
    j->fin.beta = j->beta;
}

/* Step 6: a transposed C (unit row stride) is computed as
 * C^T = op(B)^T op(A)^T, so the store keeps a unit column stride (not
 * with a prepacked B, whose panels are op(B)'s). */
static void kern__gemm_transpose_c(kern__gemm_dims *dm, kern__gemm_job *j) {
    int64_t t0;
    const char *tp;
    int d;
    if (j->pb || j->fin.glu || j->c_cs == 1 || j->c_rs != 1 || j->M <= 1) return;
    tp = j->a; j->a = j->b; j->b = tp;
    t0 = j->a_rs; j->a_rs = j->b_cs; j->b_cs = t0;
    t0 = j->a_cs; j->a_cs = j->b_rs; j->b_rs = t0;
    t0 = j->M; j->M = j->N; j->N = t0;
    t0 = j->c_rs; j->c_rs = j->c_cs; j->c_cs = t0;
    j->fin.dst_rs = j->c_rs; j->fin.dst_cs = j->c_cs;
    j->fin.src_rs = j->c_rs; j->fin.src_cs = j->c_cs;
    j->fin.bias_per_row = !j->fin.bias_per_row;
    t0 = j->fin.res_rs; j->fin.res_rs = j->fin.res_cs; j->fin.res_cs = t0;
    for (d = 0; d < dm->nd; d++) { t0 = dm->bsa[d]; dm->bsa[d] = dm->bsb[d]; dm->bsb[d] = t0; }
}

/* Step 7: blocking, the batch walk, batch- or phase-parallel, and the
 * scratch it all takes (checked against a caller workspace). */
static kern_status kern__gemm_partition(kern_ctx *ctx, const kern_tensor *c,
                                        const kern_gemm_params *p, const kern__gemm_dims *dm,
                                        const char *op, kern__gemm_plan *pl) {
    kern__gemm_job *j = &pl->proto;
    int T = kern_ctx_threads(ctx), d;
    double flops = 2.0 * (double)dm->M * (double)dm->N * (double)dm->K;
    j->kc = pl->ks->cfg->kc;
    j->nc = pl->ks->cfg->nc;
    j->mb = pl->ks->cfg->mb;
    j->nb = pl->ks->cfg->nb;
    j->n0 = 0;
    j->n1 = j->N;
    if (kern__gemm_amx_short(j)) j->kc = KERN__GEMM_AMX_KC_SHORT;
    /* partial sums in f32 scratch when C cannot hold them, or when C is
     * the residual (its values are needed by the last pass) */
    j->use_ctmp = (j->c_dt != KERN_F32 || j->c_cs != 1 || pl->res_is_c || j->fin.glu) &&
                  j->K > j->kc;
    /* A B prepacked in this table's format is read in place, so the
     * column pass (nc) no longer bounds a B buffer: it only sets how often
     * A is packed again, once a pass. One pass over every column packs A
     * once: BERT-base B8 L128 f32 on a Zen 5 (K 768 against N 2304 and
     * 3072, two passes at nc 2048), min of 3 alternated runs, 1 / 2
     * threads: 0.810 / 0.426 -> 0.769 / 0.406 s a forward. Not when the
     * partial sums go to the M x nc scratch (its size follows nc), nor on
     * the AMX tables (their short-k rule reads nc). */
    if (j->pb && j->pb->fmt == pl->ks->fmt && !j->use_ctmp && !pl->ks->tiles_on && j->N > j->nc)
        j->nc = j->N;
    pl->nbd = dm->nd;
    pl->nbatch = 1;
    for (d = 0; d < dm->nd; d++) {
        pl->bshape[d] = c->shape[d];
        pl->sa[d] = dm->bsa[d];
        pl->sb[d] = dm->bsb[d];
        pl->sc[d] = c->stride[d];
        pl->nbatch *= c->shape[d];
    }
    pl->item_bytes = kern__gemm_item_bytes(j, T) + 64;
    pl->batch_parallel = T > 1 && pl->nbatch >= T && (pl->nbatch >= 4 * T || flops < 3.2e7);
    pl->colsplit = !pl->batch_parallel && kern__gemm_colsplit_ok(j, T) ? T : 1;
    pl->total_bytes = pl->batch_parallel || pl->colsplit > 1 ? pl->item_bytes * (size_t)T : pl->item_bytes;
    if (T > 1 && !pl->batch_parallel && pl->colsplit == 1) {
        /* a smaller M splits the columns: T items' scratch at that M */
        kern__gemm_job js;
        if (kern__gemm_amx_short_below(j, &js)) {
            size_t s2 = (kern__gemm_item_bytes(&js, T) + 64) * (size_t)T;
            if (s2 > pl->total_bytes) pl->total_bytes = s2;
        }
    }
    if (dm->M == 0 || dm->N == 0 || pl->nbatch == 0) pl->total_bytes = 0;
    if (p->workspace && p->workspace_size < pl->total_bytes)
        return kern__err(KERN_ERR_ARG, "%s: workspace_size=%zu but this call needs %zu bytes", op,
                         p->workspace_size, pl->total_bytes);
    return KERN_OK;
}

/* Validates everything and fills the plan. Writes nothing. */
static kern_status kern__gemm_plan_make(kern_ctx *ctx, const kern_tensor *a,
                                        const kern_tensor *b, const kern_tensor *c,
                                        const kern_gemm_params *pp, const char *op,
                                        kern__gemm_plan *pl) {
    kern_gemm_params p;
    kern__gemm_dims dm;
    kern_status st;
    memset(pl, 0, sizeof *pl);
    memset(&dm, 0, sizeof dm);
    kern__epi_init(&pl->proto.fin);
    if (pp) p = *pp;
    else memset(&p, 0, sizeof p);
    if ((st = kern__gemm_check_operands(a, b, c, &p, op)) != KERN_OK) return st;
    if ((st = kern__gemm_derive_mnk(a, b, c, &p, op, &dm)) != KERN_OK) return st;
    if ((st = kern__gemm_derive_batch(a, b, c, op, &dm)) != KERN_OK) return st;
    if ((st = kern__gemm_check_epilogue(a, b, c, &p.epilogue, op, &dm, pl)) != KERN_OK) return st;
    kern__gemm_fill_job(ctx, a, b, c, &p, &dm, pl);
    kern__gemm_transpose_c(&dm, &pl->proto);
    if (pl->ks->alt && pl->proto.pb && pl->proto.M < KERN__GEMM_AMX_MIN_M)
        pl->ks = pl->proto.ks = kern__gemm_amx_alt(pl->ks, pl->proto.pb);
    return kern__gemm_partition(ctx, c, &p, &dm, op, pl);
}

/* Points job j at batch item `item`. */
static void kern__gemm_at(const kern__gemm_plan *pl, int64_t item, kern__gemm_job *j) {
    int64_t oa = 0, ob = 0, oc = 0, orr = 0, rem = item;
    int d;
    *j = pl->proto;
    for (d = pl->nbd - 1; d >= 0; d--) {
        int64_t idx = rem % pl->bshape[d];
        rem /= pl->bshape[d];
        oa += idx * pl->sa[d];
        ob += idx * pl->sb[d];
        oc += idx * pl->sc[d];
        orr += idx * pl->sr[d];
    }
    j->a += oa * j->es;
    if (j->b) j->b += ob * j->es;
    j->c += oc * (int64_t)kern_dtype_size(j->c_dt);
    j->fin.dst = j->c;
    if (j->fin.src) j->fin.src = j->c;
    if (j->fin.res) j->fin.res += orr * pl->res_es;
}

typedef struct kern__gemm_bjob {
    const kern__gemm_plan *pl;
    char *ws;
} kern__gemm_bjob;

static void kern__gemm_batch_task(void *arg, int64_t item, int thread) {
    kern__gemm_bjob *bj = (kern__gemm_bjob *)arg;
    kern__gemm_job j;
    char *scratch = (char *)kern__gemm_al64((size_t)(bj->ws + (size_t)thread * bj->pl->item_bytes));
    kern__gemm_at(bj->pl, item, &j);
    kern__gemm_item(&j, scratch, NULL, thread);
}

/* Column window w of colsplit (whole 32-column groups, so prepacked
 * panels, tiles and glu groups stay whole) of every item, inline on this
 * thread with its own scratch. A column's sums do not depend on the
 * window, so the bits are those of one thread. */
static void kern__gemm_colsplit_task(void *arg, int64_t w, int thread) {
    kern__gemm_bjob *bj = (kern__gemm_bjob *)arg;
    char *scratch = (char *)kern__gemm_al64((size_t)(bj->ws + (size_t)thread * bj->pl->item_bytes));
    int64_t item;
    for (item = 0; item < bj->pl->nbatch; item++) {
        kern__gemm_job j;
        int64_t ng;
        kern__gemm_at(bj->pl, item, &j);
        ng = kern__gemm_cdiv(j.N, 32);
        j.n0 = kern__gemm_min(j.N, (ng * w / bj->pl->colsplit) * 32);
        j.n1 = kern__gemm_min(j.N, (ng * (w + 1) / bj->pl->colsplit) * 32);
        if (j.n1 > j.n0) kern__gemm_item(&j, scratch, NULL, thread);
    }
}

KERN_API kern_status kern_gemm_workspace_size(kern_ctx *ctx, const kern_tensor *a,
                                              const kern_tensor *b, const kern_tensor *c,
                                              const kern_gemm_params *params, size_t *bytes) {
    kern__gemm_plan pl;
    kern_status st;
    kern_gemm_params p;
    if (!bytes) return kern__err(KERN_ERR_ARG, "kern_gemm_workspace_size: bytes is NULL");
    if ((st = kern__op_begin(&ctx, "kern_gemm_workspace_size")) != KERN_OK) return st;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    p.workspace = NULL;
    st = kern__gemm_plan_make(ctx, a, b, c, &p, "kern_gemm_workspace_size", &pl);
    if (st == KERN_OK) *bytes = pl.total_bytes;
    kern__op_end(ctx);
    return st;
}

KERN_API kern_status kern_gemm(kern_ctx *ctx, const kern_tensor *a, const kern_tensor *b,
                               const kern_tensor *c, const kern_gemm_params *params) {
    kern__gemm_plan pl;
    kern_status st;
    char *ws;
    if ((st = kern__op_begin(&ctx, "kern_gemm")) != KERN_OK) return st;
    st = kern__gemm_plan_make(ctx, a, b, c, params, "kern_gemm", &pl);
    if (st != KERN_OK || pl.total_bytes == 0) {
        kern__op_end(ctx);
        return st;
    }
    if (params && params->workspace) ws = (char *)params->workspace;
    else ws = (char *)kern__workspace(ctx, pl.total_bytes + 64);
    if (!ws) {
        kern__op_end(ctx);
        return kern__err(KERN_ERR_NOMEM, "kern_gemm: cannot allocate %zu bytes of workspace",
                         pl.total_bytes);
    }
    if (pl.batch_parallel) {
        kern__gemm_bjob bj;
        bj.pl = &pl;
        bj.ws = ws;
        kern_parallel_for(ctx, pl.nbatch, kern__gemm_batch_task, &bj);
    } else if (pl.colsplit > 1) {
        kern__gemm_bjob bj;
        bj.pl = &pl;
        bj.ws = ws;
        kern_parallel_for(ctx, pl.colsplit, kern__gemm_colsplit_task, &bj);
    } else {
        int64_t item;
        char *scratch = (char *)kern__gemm_al64((size_t)ws);
        for (item = 0; item < pl.nbatch; item++) {
            kern__gemm_job j;
            kern__gemm_at(&pl, item, &j);
            kern__gemm_item(&j, scratch, ctx, 0);
        }
    }
    kern__op_end(ctx);
    return KERN_OK;
}

/* ------------------------------------------------------------- packing */

typedef struct kern__gemm_pjob {
    kern_gemm_packed_b *pb;
    const char *src;
    int64_t k_st, n_st; /* strides of B(k, n) */
    kern__gemm_pack_fn pack;
} kern__gemm_pjob;

static void kern__gemm_packb_task(void *arg, int64_t task, int thread) {
    kern__gemm_pjob *pj = (kern__gemm_pjob *)arg;
    kern_gemm_packed_b *pb = pj->pb;
    int64_t col = task * KERN__GEMM_PW;
    int nw = (int)kern__gemm_min(KERN__GEMM_PW, pb->n - col);
    (void)thread;
    pj->pack((uint32_t *)pb->data + task * pb->ks * KERN__GEMM_PW, KERN__GEMM_PW,
             pj->src + col * pj->n_st * (int64_t)kern_dtype_size(pb->dtype), pb->dtype, pj->n_st,
             pj->k_st, nw, pb->k, pb->fmt);
}

KERN_API kern_status kern_gemm_pack_b(kern_ctx *ctx, const kern_tensor *b,
                                      kern_gemm_packed_b **out,
                                      const kern_gemm_pack_params *params) {
    kern_status st;
    int trans_b = params ? params->trans_b != 0 : 0;
    kern_gemm_packed_b *pb;
    kern__gemm_pjob pj;
    size_t bytes;
    int64_t K, N;
    const char *op = "kern_gemm_pack_b";
    if (!out) return kern__err(KERN_ERR_ARG, "%s: out is NULL", op);
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    if ((st = kern_tensor_check(b, op, "b")) != KERN_OK) goto done;
    if (b->ndim != 2) {
        st = kern__err(KERN_ERR_SHAPE, "%s: b has %d dims, needs 2", op, b->ndim);
        goto done;
    }
    if ((st = kern__gemm_float_dt(b, op, "b")) != KERN_OK) goto done;
    K = b->shape[trans_b ? 1 : 0];
    N = b->shape[trans_b ? 0 : 1];
    pb = (kern_gemm_packed_b *)kern__alloc(ctx, sizeof *pb);
    if (!pb) {
        st = kern__err(KERN_ERR_NOMEM, "%s: out of memory", op);
        goto done;
    }
    memset(pb, 0, sizeof *pb);
    pb->magic = KERN__GEMM_MAGIC;
    pb->fmt = b->dtype == KERN_BF16 ? KERN__GEMM_FMT_PAIR : KERN__GEMM_FMT_F32;
    pb->dtype = b->dtype;
    pb->k = K;
    pb->n = N;
    pb->ks = kern__gemm_ksteps(pb->fmt, K);
    pb->npanels = kern__gemm_cdiv(N, KERN__GEMM_PW);
    bytes = (size_t)(pb->npanels * pb->ks * KERN__GEMM_PW * 4);
    pb->data = kern__alloc(ctx, bytes ? bytes : 64);
    if (!pb->data) {
        kern__free(ctx, pb);
        st = kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes", op, bytes);
        goto done;
    }
    /* the layout is ISA independent: any context can use it */
    pj.pb = pb;
    pj.src = (const char *)b->data;
    pj.k_st = b->stride[trans_b ? 1 : 0];
    pj.n_st = b->stride[trans_b ? 0 : 1];
    pj.pack = kern__gemm_fns_for(kern_ctx_isa(ctx), KERN_UARCH_GENERIC, KERN_F32)->pack;
    if (K > 0) kern_parallel_for(ctx, pb->npanels, kern__gemm_packb_task, &pj);
    *out = pb;
    st = KERN_OK;
done:
    kern__op_end(ctx);
    return st;
}

KERN_API void kern_gemm_packed_b_free(kern_ctx *ctx, kern_gemm_packed_b *p) {
    if (!p) return;
    if (!ctx) ctx = kern_default_ctx();
    p->magic = 0;
    kern__free(ctx, p->data);
    kern__free(ctx, p);
}

KERN_API kern_status kern_gemm_packed_b_get_info(const kern_gemm_packed_b *p,
                                                 kern_gemm_packed_b_info *out) {
    size_t bytes;
    if (!out) return kern__err(KERN_ERR_ARG, "kern_gemm_packed_b_get_info: out is NULL");
    if (!p || p->magic != KERN__GEMM_MAGIC)
        return kern__err(KERN_ERR_ARG, "kern_gemm_packed_b_get_info: p is not a packed B");
    bytes = (size_t)(p->npanels * p->ks * KERN__GEMM_PW * 4);
    memset(out, 0, sizeof *out);
    out->k = p->k;
    out->n = p->n;
    out->dtype = p->dtype;
    out->panel_dtype = p->fmt == KERN__GEMM_FMT_PAIR ? KERN_BF16 : KERN_F32;
    out->bytes = sizeof *p + (bytes ? bytes : 64);
    return KERN_OK;
}

KERN_API void kern_gemm_params_defaults(kern_gemm_params *p) {
    if (!p) return;
    if (!p->alpha_set) {
        p->alpha = 1.0f;
        p->alpha_set = 1;
    }
    kern_epilogue_defaults(&p->epilogue);
}

#ifdef __cplusplus
}
#endif
KERN__IMPL_DIAG_END
#endif /* KERN_IMPLEMENTATION */
