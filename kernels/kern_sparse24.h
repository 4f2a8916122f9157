/* kern_sparse24.h — 2:4 semi-structured sparse weights and the sparse
 * linear layer on the CPU. Part of kern (header-only, stb pattern: define
 * KERN_IMPLEMENTATION in one translation unit).
 *
 * WHAT IT COMPUTES
 *   A weight matrix W [N,K] (N output channels, K input features) is "2:4
 *   sparse" when every group of 4 consecutive elements along K,
 *   W[n, 4g..4g+3], has at most 2 nonzeros. Such a W is stored compressed:
 *   the 2 kept values of each group plus two 2-bit indices, about half the
 *   bytes of the dense weight, and
 *
 *       y = act(x · Wᵀ · scale + bias) + residual
 *
 *   runs on the kept values only: half the multiply-adds of the dense GEMM.
 *   This is the CPU counterpart of PyTorch's `to_sparse_semi_structured` +
 *   `torch.nn.functional.linear` (which only speeds up on NVIDIA GPUs).
 *
 * OPERATIONS
 *   kern_sparse24_prune(ctx, w, out, &p)       magnitude pruning: keeps the 2
 *       largest |w| of every group of 4 along K, zeroes the others (+0.0).
 *       Ties: the lower index wins. NaN counts as larger than any number
 *       (so a NaN is kept; among NaNs the lower index wins). -0.0 and +0.0
 *       are equal magnitudes. w and out: [N,K], same dtype (f32, bf16, f16,
 *       i8), any strides; out may be exactly w (in place).
 *   kern_sparse24_compress(ctx, w, &sw, &p)    w [N,K] already 2:4 -> an
 *       opaque compressed handle (kern_sparse24 *, one allocation from the
 *       context's allocator; left untouched on error). A group with more than 2 nonzeros is KERN_ERR_ARG naming
 *       the first such row and group; a group with fewer than 2 keeps
 *       explicit zeros (at the positions PyTorch picks, see METADATA).
 *       "Nonzero" is bitwise: +0.0 and -0.0 are zero, NaN is nonzero.
 *       p.quantize = KERN_I8 turns a float w into int8 values with one
 *       symmetric scale per output channel by kern_base.h's one int8 rule
 *       (scale = max|w[n,:]| / 127, 1 for an all-zero row, at least
 *       FLT_MIN; q = clamp(round-half-even(w * (1 / scale)), -127, 127), as
 *       kern_qgemm quantizes); an i8 w takes its
 *       per-channel f32 scales from p.scales ([N], NULL = all 1).
 *   kern_sparse24_decompress(ctx, sw, out)     back to the dense [N,K]
 *       (same dtype as sw; i8 values are not rescaled). Exact round trip:
 *       every kept value comes back bit for bit, every other element is
 *       +0.0 (a -0.0 at a dropped position comes back as +0.0).
 *   kern_sparse24_free(ctx, sw)                frees (same allocator as the
 *       ctx that created it; NULL ctx = the default context).
 *   kern_sparse24_get_info(sw, &info)          shape, dtype, bytes.
 *   kern_sparse24_export(ctx, sw, values, meta, &p) /
 *   kern_sparse24_import(ctx, values, meta, &sw, &p)
 *       the (values, metadata) pair PyTorch's `to_sparse_semi_structured`
 *       uses with its CUTLASS backend (layout below).
 *   kern_sparse24_linear(ctx, x, sw, y, &p)
 *       x [M,K] f32 or bf16, y [M,N] f32 or bf16; p.epilogue (kern_base.h's
 *       kern_epilogue): bias NULL or [N] ([M] with bias_per_row; f32 or
 *       bf16, any stride), residual NULL or [M,N] (f32 or bf16; may be
 *       exactly y), any kern_act, out_scale (0 = 1). The epilogue is
 *       kern_base.h's one GEMM epilogue (kern__epi, the same code and
 *       roundings as kern_gemm's):
 *       y = out_scale * (act(acc * scale[n] + bias) + residual[m,n]) (scale
 *       only for i8 weights), so a fused act gives the bits of the call
 *       without it followed by kern_act on the f32 result.
 *       p.workspace / workspace_size: optional caller scratch of at least
 *       kern_sparse24_linear_workspace_size() bytes (NULL = the context's). Dtypes: f32 weights need f32 x; bf16
 *       weights need bf16 x (products through vdpbf16ps where the CPU has
 *       AVX512-BF16, otherwise exact bf16->f32 and f32 FMAs); i8 weights take
 *       f32 or bf16 x (weight-only quantization: int8 storage, f32 compute,
 *       per-channel scale in the epilogue). f16 weights are storage only
 *       (compress/decompress/export/import); linear rejects them.
 *       Rows of x, y and residual need unit inner stride (any row stride).
 *       Accumulation is f32 and its order depends only on the shape and the
 *       ISA path, never on the thread count (bitwise identical results for
 *       any number of threads).
 *
 * STORAGE (kern_sparse24)
 *   Logical content: values [N, Kp/2] (Kp = K rounded up to 4) in the
 *   weight dtype, value 2g and 2g+1 of row n from group g, and one 4-bit
 *   code per group: bits 1:0 = index (0..3) of the first kept element,
 *   bits 3:2 = index of the second, first < second. In memory the rows are
 *   tiled by 16 so that both the row-broadcast and the 16-lane kernels read
 *   it directly: tile t = rows 16t..16t+15 (rows past N are zero, code
 *   0x4), and for tile t, group g:
 *     values: 32 elements at ((t*G + g) * 32), G = Kp/4;
 *             f32 and i8:   [2][16]  (first kept of lanes 0..15, then second)
 *             bf16 and f16: [16][2]  (pairs: one 32-bit word per lane)
 *     meta:   8 bytes at ((t*G + g) * 8), lane l's code in byte l/2, bits
 *             4*(l%2)..4*(l%2)+3.
 *   Use decompress / export to get the plain layouts.
 *
 * METADATA INTEROP (PyTorch to_sparse_semi_structured, CUTLASS backend)
 *   values: [N, K/2], row-major, the two kept elements of each group in
 *   increasing index order (exactly the logical values above).
 *   meta words: f16/bf16 (and f32 here) use int16 words holding 4 group
 *   codes (16 elements of K), i8 uses int32 words holding 8 codes (32
 *   elements): word c of row r holds the codes of groups q*c+i at bits
 *   4i..4i+3, i = 0..q-1 (q = 4 or 8). Codes for groups with fewer than 2
 *   nonzeros: none -> 0xE (2,3); only 0 -> 0x8 (0,2); only 1 -> 0x9 (1,2);
 *   only 2 or only 3 -> 0xE (2,3) (PyTorch's choice, so exports match).
 *   The word matrix Wd [N, C] (C = K/(4q)) is then stored in CUTLASS's
 *   reordered layout (META_CUTLASS, the default) as a flat array of N*C
 *   words: word (r, c) goes to position
 *       rr = (r / R) * R + (r % 8) * I + (r % R) / 8     R, I = 32, 4 (int16)
 *                                                        R, I = 16, 2 (int32)
 *       if rr even and c odd:  rr += 1, c -= 1           (swap the off-
 *       if rr odd and c even:  rr -= 1, c += 1            diagonal of 2x2)
 *       pos = (c / 2) * (2 * N) + rr * 2 + (c % 2)       (ColumnMajor-
 *                                                         Interleaved<2>)
 *   which needs N % R == 0 and an even C, i.e. K % 32 == 0 (16-bit words)
 *   or K % 64 == 0 (32-bit) (else KERN_ERR_SHAPE); PyTorch's kernels
 *   further want N % 32 == 0 and K % 64 (f16/bf16) or K % 128 (i8).
 *   META_ROWMAJOR exports/imports the words unreordered ([N, ceil(Kp/4q)],
 *   no N or K restriction; unused high codes are 0). kern has no i16
 *   dtype, so 16-bit words travel as a u8 tensor [N, 2C] holding their
 *   little-endian bytes (PyTorch: meta.view(torch.uint8)); 32-bit words
 *   (i8 values) as an i32 tensor [N, C]. f32 values use the 16-bit words
 *   too (the 2:4 format with f32 values; PyTorch's own float32 layout is a
 *   different 1:2 format, so convert values to f16/bf16 for PyTorch).
 *   Not checked against PyTorch's GPU output (no GPU here); tested with
 *   hand-computed vectors from the description above.
 *
 * ERRORS (nothing is written on error; kern_last_error() names the problem)
 *   KERN_ERR_ARG    NULL pointers, a non-2:4 group in compress ("row r group
 *                   g"), an invalid metadata code in import, non-finite
 *                   weights to quantize, y overlapping x/bias/residual
 *                   (residual == y exactly is allowed).
 *   KERN_ERR_SHAPE  K % 4 != 0 without p.pad_k, ranks, mismatched shapes,
 *                   x's K != the weight's k, meta/values buffers of the wrong size
 *                   ("too small"), CUTLASS layout with N or K not aligned.
 *   KERN_ERR_DTYPE  unsupported dtypes or combinations.
 *   KERN_ERR_LAYOUT non-unit inner stride of x/y/residual in linear; an
 *                   output (prune/decompress out, export values/meta, y)
 *                   whose elements overlap (e.g. a zero stride).
 *   KERN_ERR_NOMEM  allocation failure.
 *   A caller workspace smaller than the _workspace_size is KERN_ERR_ARG.
 *
 * ISA PATHS (one const function table per level, kern__sp24_fns_for(
 * kern_ctx_isa(ctx), weight dtype): scalar; AVX2 (and AVX2_VNNI); AVX512
 * (and AVX512_VNNI); AVX512_BF16, which adds the vdpbf16ps kernels for bf16
 * weights; NEON (all three NEON levels) for f32 weights, scalar for others.
 * The AVX-512 and AVX2 kernels are hand-written, not expanded from one
 * template: their tiles differ (4 vs 2 channel rows per large-M call, 16 vs
 * 8 lanes, AVX-512's vpermps picks from one 128-bit load and its
 * register transposes vs AVX2's in-lane vpermilps on a broadcast, other
 * prefetch schedules). The epilogue and the math are kern_base.h's.)
 *   M > 16 ("weight stationary", lanes over m): x is transposed once per
 *   call into panels of 64 (AVX-512) / 32 (AVX2) rows, xt[k][m] (workspace
 *   of about the size of x; 3x for the bf16 pair panel); a task walks 64 k
 *   (an L1-resident 16 KiB block) for up to 1024 output channels, and for
 *   each kept weight the weight is broadcast and multiplied with the panel
 *   row its index selects: exactly K/2 FMAs per output, no gathers. bf16
 *   with AVX512-BF16: the panel holds, per group, the bf16 pairs of the 6
 *   possible index pairs and one vdpbf16ps does both kept products.
 *   M <= 16 (weight streaming, lanes over n): 16 output channels per vector;
 *   the 4 activations of a group are broadcast and vpermilps (f32) or
 *   vpshufb (bf16 pairs) picks each lane's kept ones; the compressed weight
 *   is read once per call. An x whose row stride is a multiple of 1 KiB is
 *   first copied with one extra cache line per row (all M rows are read at
 *   the same column: they would share one L1 set).
 *   AVX-512 (+BF16), AVX2+FMA, NEON (f32 weights, table-lookup selection;
 *   run under qemu-user by make test-neon) and a portable scalar path.
 *
 * EXAMPLE
 *     kern_tensor w = kern_tensor_2d(wdata, KERN_F32, N, K);
 *     kern_sparse24 *sw = NULL;
 *     kern_sparse24_params sp = {0};
 *     kern_sparse24_linear_params lp = {0};
 *     kern_tensor x = kern_tensor_2d(xdata, KERN_F32, M, K);
 *     kern_tensor y = kern_tensor_2d(ydata, KERN_F32, M, N);
 *     kern_tensor b = kern_tensor_1d(bias, KERN_F32, N);
 *     kern_sparse24_prune(ctx, &w, &w, &sp);          // in place
 *     if (kern_sparse24_compress(ctx, &w, &sw, &sp) != KERN_OK) {
 *         puts(kern_last_error());                   // sw is still NULL
 *     } else {
 *         lp.epilogue.bias = &b;
 *         lp.epilogue.act = KERN_ACT_GELU;
 *         kern_sparse24_linear(ctx, &x, sw, &y, &lp);
 *         kern_sparse24_free(ctx, sw);
 *     }
 */
#ifndef KERN_SPARSE24_H
#define KERN_SPARSE24_H

#include "kern_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kern_sparse24_meta_layout {
    KERN_SPARSE24_META_CUTLASS = 0, /* PyTorch/CUTLASS reordered words */
    KERN_SPARSE24_META_ROWMAJOR     /* the same words, not reordered */
} kern_sparse24_meta_layout;

/* Options of prune / compress / export / import; zero = defaults (every
 * field's zero is its own default, except k: 0 = 2 * values.shape[1]). */
typedef struct kern_sparse24_params {
    int pad_k;                 /* nonzero: accept K % 4 != 0, the last group
                                  is zero-padded (prune, compress, import) */
    kern_dtype quantize;       /* compress: KERN_DTYPE_NONE keeps w's dtype,
                                  KERN_I8 quantizes a float w per channel */
    const kern_tensor *scales; /* compress/import of i8 values: f32 [N]
                                  per-channel scales (NULL = all 1) */
    kern_sparse24_meta_layout meta_layout; /* export/import */
    int64_t k;                 /* import: dense K (0 = 2 * values.shape[1]);
                                  smaller only with pad_k */
} kern_sparse24_params;

/* An opaque compressed weight: made by kern_sparse24_compress or
 * kern_sparse24_import (one allocation from the context's allocator),
 * described by kern_sparse24_get_info, released by kern_sparse24_free. */
typedef struct kern_sparse24 kern_sparse24;

/* What kern_sparse24_get_info reports. */
typedef struct kern_sparse24_info {
    int64_t n, k;        /* dense shape [N, K] */
    int64_t k_padded;    /* K rounded up to 4 */
    kern_dtype dtype;    /* F32, BF16, F16 or I8 values */
    int has_scales;      /* I8: per-channel f32 scales */
    size_t bytes;        /* the whole allocation */
    /* The storage layout does not depend on the ISA: any context (any ISA
     * level, any thread count) can use the handle. */
} kern_sparse24_info;

typedef struct kern_sparse24_linear_params {
    /* kern_base.h's epilogue: bias [N] ([M] with bias_per_row) f32/bf16
     * (any stride), any act, residual [M,N] f32/bf16 (may be y itself),
     * out_scale (0 = 1). */
    kern_epilogue epilogue;
    void *workspace;       /* optional caller scratch of at least */
    size_t workspace_size; /* kern_sparse24_linear_workspace_size() bytes */
} kern_sparse24_linear_params;

/* Resolves the defaults in place (epilogue.out_scale 0 -> 1). */
KERN_API void kern_sparse24_linear_params_defaults(kern_sparse24_linear_params *p);

KERN_API kern_status kern_sparse24_prune(kern_ctx *ctx, const kern_tensor *w,
                                         const kern_tensor *out,
                                         const kern_sparse24_params *p);
/* w [N,K], 2:4 already -> *sw (allocated with ctx's allocator; left
 * untouched on error). p may be NULL. */
KERN_API kern_status kern_sparse24_compress(kern_ctx *ctx, const kern_tensor *w,
                                            kern_sparse24 **sw,
                                            const kern_sparse24_params *p);
KERN_API kern_status kern_sparse24_decompress(kern_ctx *ctx,
                                              const kern_sparse24 *sw,
                                              const kern_tensor *out);
/* Frees with the allocator of ctx (NULL = the default context): pass a
 * context with the allocator that made sw. NULL sw is ignored. */
KERN_API void kern_sparse24_free(kern_ctx *ctx, kern_sparse24 *sw);
/* Shape, dtype and bytes of a compressed weight. */
KERN_API kern_status kern_sparse24_get_info(const kern_sparse24 *sw,
                                            kern_sparse24_info *out);
/* values: [N, Kp/2] in sw->dtype; meta: u8 [N, 2C] (bytes of 16-bit words)
 * or, for i8 values, i32 [N, C]; C = Kp/16 (Kp/32 for i8) words per row for
 * META_CUTLASS, the ceiling of that for META_ROWMAJOR. */
KERN_API kern_status kern_sparse24_export(kern_ctx *ctx, const kern_sparse24 *sw,
                                          const kern_tensor *values,
                                          const kern_tensor *meta,
                                          const kern_sparse24_params *p);
KERN_API kern_status kern_sparse24_import(kern_ctx *ctx, const kern_tensor *values,
                                          const kern_tensor *meta,
                                          kern_sparse24 **sw,
                                          const kern_sparse24_params *p);
/* y = out_scale (act(x W^T scale + bias) + residual) (p->epilogue); p may
 * be NULL. */
KERN_API kern_status kern_sparse24_linear(kern_ctx *ctx, const kern_tensor *x,
                                          const kern_sparse24 *sw,
                                          const kern_tensor *y,
                                          const kern_sparse24_linear_params *p);
/* Scratch bytes kern_sparse24_linear takes on this context (validates like
 * it; p->workspace is ignored). */
KERN_API kern_status kern_sparse24_linear_workspace_size(
    kern_ctx *ctx, const kern_tensor *x, const kern_sparse24 *sw, const kern_tensor *y,
    const kern_sparse24_linear_params *p, size_t *bytes);

#ifdef __cplusplus
}
#endif
#endif /* KERN_SPARSE24_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_SPARSE24_IMPLEMENTED)
KERN__IMPL_DIAG_BEGIN
#define KERN_SPARSE24_IMPLEMENTED

/* The compressed weight (opaque in the public half); one allocation: this
 * header, then values, meta and scales. */
struct kern_sparse24 {
    kern_dtype dtype;   /* F32, BF16, F16 or I8 */
    int64_t n, k;       /* dense shape [n, k] */
    int64_t k_padded;   /* k rounded up to 4 */
    int64_t n_tiles;    /* ceil(n / 16) */
    void *values;       /* tiled, see STORAGE */
    uint8_t *meta;      /* tiled 4-bit codes, see STORAGE */
    float *scales;      /* I8: n_tiles*16 per-channel scales; else NULL */
    size_t bytes;       /* bytes allocated, header included */
};

#include <math.h>
#ifdef KERN_X86
#include <immintrin.h>
#endif
#ifdef KERN_NEON
#include <arm_neon.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define KERN__SP24_INLINE static inline __attribute__((always_inline))
#define KERN__SP24_UNROLL _Pragma("GCC unroll 16")
#else
#define KERN__SP24_INLINE static inline
#define KERN__SP24_UNROLL
#endif

/* Blocking (one table for the family). Large-M path: panels of LM_MR rows
 * of x (64 on AVX-512 = 4 zmm, 32 on AVX2 = 4 ymm) by LM_KG groups (64 k:
 * the f32 panel is 16 KiB, the bf16 pair panel 24 KiB, both L1-resident),
 * tasks of up to LM_NT tiles (1024 output channels: the accumulator block is
 * 64 x 1024 f32 = 256 KiB in L2; fewer when that would leave threads idle,
 * which never changes the results).
 * Small-M path: tasks of SM_NT tiles (64 channels). */
#ifndef KERN__SP24_LM_KG
#define KERN__SP24_LM_KG 16
#endif
#ifndef KERN__SP24_LM_KG_BF16
#define KERN__SP24_LM_KG_BF16 16
#endif
#define KERN__SP24_LM_NT 64
#define KERN__SP24_SM_NT 4
#define KERN__SP24_SMALL_M 16
#ifndef KERN__SP24_PANEL_PF
#define KERN__SP24_PANEL_PF 1
#endif

/* ------------------------------------------------------------ helpers */

static int kern__sp24_esize(kern_dtype dt) { return (int)kern_dtype_size(dt); }
static int kern__sp24_paired(kern_dtype dt) { return dt == KERN_BF16 || dt == KERN_F16; }

/* Element offset of kept value j (0/1) of lane l in tile-group tg. */
static inline int64_t kern__sp24_voff(kern_dtype dt, int64_t tg, int l, int j) {
    return tg * 32 + (kern__sp24_paired(dt) ? l * 2 + j : j * 16 + l);
}
static inline unsigned kern__sp24_code(const uint8_t *meta, int64_t tg, int l) {
    return (meta[tg * 8 + (l >> 1)] >> ((l & 1) * 4)) & 15u;
}
static inline void kern__sp24_set_code(uint8_t *meta, int64_t tg, int l, unsigned c) {
    uint8_t *b = &meta[tg * 8 + (l >> 1)];
    int sh = (l & 1) * 4;
    *b = (uint8_t)((*b & ~(15u << sh)) | (c << sh));
}
/* Valid codes: first index < second index. */
static int kern__sp24_code_valid(unsigned c) { return (c & 3u) < (c >> 2); }
/* Code of a group from its nonzero mask (bit i = element i nonzero); -1 for
 * more than 2 nonzeros. Fewer than 2: PyTorch's choice of positions. */
static int kern__sp24_code_from_mask(unsigned mask) {
    static const signed char t[16] = {0xE, 0x8, 0x9, 0x4, 0xE, 0x8, 0x9, -1,
                                      0xE, 0xC, 0xD, -1,  0xE, -1,  -1,  -1};
    return t[mask & 15u];
}

/* Raw element access (strided tensors, generic dtype). */
static inline const char *kern__sp24_at(const kern_tensor *t, int64_t i, int64_t j) {
    return (const char *)t->data +
           (t->stride[0] * i + t->stride[1] * j) * (int64_t)kern_dtype_size(t->dtype);
}
static inline float kern__sp24_tof(kern_dtype dt, const void *p) {
    return dt == KERN_I8 ? (float)*(const int8_t *)p : kern__s_load_f32(p, dt, 1);
}
/* Is the element nonzero (bitwise: +-0 is zero, NaN is nonzero)? */
static inline int kern__sp24_nz(kern_dtype dt, const void *p) {
    switch (dt) {
    case KERN_F32: { uint32_t u; memcpy(&u, p, 4); return (u & 0x7fffffffu) != 0; }
    case KERN_BF16: case KERN_F16: { uint16_t u; memcpy(&u, p, 2); return (u & 0x7fffu) != 0; }
    default: return *(const int8_t *)p != 0;
    }
}
/* Magnitude key for pruning: larger key = larger |w|; every NaN is above
 * Inf and all NaNs are equal. */
static inline uint32_t kern__sp24_key(kern_dtype dt, const void *p) {
    uint32_t u;
    if (dt == KERN_I8) {
        int v = *(const int8_t *)p;
        return (uint32_t)(v < 0 ? -v : v);
    }
    u = kern__f32_bits(kern__sp24_tof(dt, p)) & 0x7fffffffu;
    return u > 0x7f800000u ? 0x7fc00000u : u;
}

static kern_status kern__sp24_check_sw(const kern_sparse24 *sw, const char *op) {
    if (!sw) return kern__err(KERN_ERR_ARG, "%s: sw is NULL", op);
    if (!sw->values || !sw->meta || sw->n <= 0 || sw->k <= 0 ||
        (sw->dtype != KERN_F32 && sw->dtype != KERN_BF16 && sw->dtype != KERN_F16 &&
         sw->dtype != KERN_I8) ||
        sw->k_padded != ((sw->k + 3) & ~(int64_t)3) || sw->n_tiles != (sw->n + 15) / 16 ||
        (sw->dtype == KERN_I8) != (sw->scales != NULL))
        return kern__err(KERN_ERR_ARG,
                         "%s: sw is not a valid compressed weight (zero-initialised "
                         "or freed?)", op);
    return KERN_OK;
}

static kern_status kern__sp24_check_2d(const kern_tensor *t, const char *op,
                                       const char *name) {
    kern_status s = kern_tensor_check(t, op, name);
    if (s) return s;
    if (t->ndim != 2)
        return kern__err(KERN_ERR_SHAPE, "%s: %s.ndim=%d, expected 2", op, name, t->ndim);
    return KERN_OK;
}

/* Allocates an [n, k] weight (handle and storage in one block); fills the
 * padding rows. */
static kern_status kern__sp24_alloc(kern_ctx *ctx, kern_dtype dt, int64_t n, int64_t k,
                                    kern_sparse24 **out, const char *op) {
    int64_t kp = (k + 3) & ~(int64_t)3, G = kp / 4, nt = (n + 15) / 16;
    size_t hb = (sizeof(kern_sparse24) + 63) & ~(size_t)63, vb, mb, sb, total;
    char *base;
    kern_sparse24 *o;
    int64_t tg, l;
    if (G > INT64_MAX / 32 / nt / 4)
        return kern__err(KERN_ERR_SHAPE, "%s: [%lld,%lld] is too large", op,
                         (long long)n, (long long)k);
    vb = (size_t)(nt * G * 32) * (size_t)kern__sp24_esize(dt);
    vb = (vb + 63) & ~(size_t)63;
    mb = ((size_t)(nt * G * 8) + 63) & ~(size_t)63;
    sb = dt == KERN_I8 ? (size_t)nt * 16 * sizeof(float) : 0;
    total = hb + vb + mb + sb;
    base = (char *)kern__alloc(ctx, total);
    if (!base)
        return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes", op, total);
    memset(base, 0, total);
    o = (kern_sparse24 *)(void *)base;
    o->dtype = dt;
    o->n = n;
    o->k = k;
    o->k_padded = kp;
    o->n_tiles = nt;
    o->values = base + hb;
    o->meta = (uint8_t *)(base + hb + vb);
    o->scales = dt == KERN_I8 ? (float *)(void *)(base + hb + vb + mb) : NULL;
    o->bytes = total;
    *out = o;
    /* padding rows: code 0x4, zero values, scale 1 */
    for (tg = 0; tg < nt * G; tg++)
        for (l = 0; l < 16; l++)
            if ((tg / G) * 16 + l >= n) kern__sp24_set_code(o->meta, tg, (int)l, 0x4);
    if (o->scales)
        for (l = 0; l < nt * 16; l++) o->scales[l] = 1.0f;
    return KERN_OK;
}

/* ------------------------------------------------------------- prune */

KERN_API kern_status kern_sparse24_prune(kern_ctx *ctx, const kern_tensor *w,
                                         const kern_tensor *out,
                                         const kern_sparse24_params *p) {
    static const char *op = "kern_sparse24_prune";
    kern_status s;
    int64_t n, g, N, K, G;
    int pad = p ? p->pad_k : 0;
    size_t es;
    if ((s = kern__sp24_check_2d(w, op, "w"))) return s;
    if ((s = kern__sp24_check_2d(out, op, "out"))) return s;
    if (w->dtype != KERN_F32 && w->dtype != KERN_BF16 && w->dtype != KERN_F16 &&
        w->dtype != KERN_I8)
        return kern__err(KERN_ERR_DTYPE, "%s: w.dtype=%s (f32, bf16, f16 or i8)", op,
                         kern_dtype_name(w->dtype));
    if (out->dtype != w->dtype)
        return kern__err(KERN_ERR_DTYPE, "%s: out.dtype=%s but w.dtype=%s", op,
                         kern_dtype_name(out->dtype), kern_dtype_name(w->dtype));
    N = w->shape[0];
    K = w->shape[1];
    if (out->shape[0] != N || out->shape[1] != K)
        return kern__err(KERN_ERR_SHAPE, "%s: out.shape=[%lld,%lld] but w.shape=[%lld,%lld]",
                         op, (long long)out->shape[0], (long long)out->shape[1],
                         (long long)N, (long long)K);
    if (K % 4 != 0 && !pad)
        return kern__err(KERN_ERR_SHAPE,
                         "%s: w.shape[1]=%lld is not a multiple of 4 (set pad_k to "
                         "zero-pad the last group)", op, (long long)K);
    if (kern_tensors_overlap(w, out) &&
        !(w->data == out->data && w->stride[0] == out->stride[0] &&
          w->stride[1] == out->stride[1]))
        return kern__err(KERN_ERR_ARG, "%s: out partially overlaps w (only exact "
                         "in-place is allowed)", op);
    if (kern__tensor_self_overlap(out))
        return kern__err(KERN_ERR_LAYOUT, "%s: out has overlapping elements (a zero or too small "
                         "stride); an output needs distinct elements", op);
    if (N == 0 || K == 0) return KERN_OK; /* nothing to prune (the other dim may be huge) */
    if ((s = kern__op_begin(&ctx, op))) return s;
    es = kern_dtype_size(w->dtype);
    G = (K + 3) / 4;
    for (n = 0; n < N; n++)
        for (g = 0; g < G; g++) {
            int r = (int)(K - 4 * g < 4 ? K - 4 * g : 4), i, j;
            uint32_t key[4];
            unsigned char keep[4];
            for (i = 0; i < r; i++) key[i] = kern__sp24_key(w->dtype, kern__sp24_at(w, n, 4 * g + i));
            for (i = 0; i < r; i++) {
                int beaten = 0;
                for (j = 0; j < r; j++)
                    if (key[j] > key[i] || (key[j] == key[i] && j < i)) beaten++;
                keep[i] = beaten < 2;
            }
            for (i = 0; i < r; i++) {
                char *dst = (char *)kern__sp24_at(out, n, 4 * g + i);
                if (keep[i]) {
                    if (dst != kern__sp24_at(w, n, 4 * g + i))
                        memcpy(dst, kern__sp24_at(w, n, 4 * g + i), es);
                } else {
                    memset(dst, 0, es);
                }
            }
        }
    kern__op_end(ctx);
    return KERN_OK;
}

/* ---------------------------------------------------------- compress */

KERN_API kern_status kern_sparse24_compress(kern_ctx *ctx, const kern_tensor *w,
                                            kern_sparse24 **sw,
                                            const kern_sparse24_params *p) {
    static const char *op = "kern_sparse24_compress";
    kern_sparse24 *o = NULL;
    kern_status s;
    int64_t N, K, G, n, g;
    int pad = p ? p->pad_k : 0;
    kern_dtype qt = p ? p->quantize : KERN_DTYPE_NONE, st;
    const kern_tensor *sc = p ? p->scales : NULL;
    if (!sw) return kern__err(KERN_ERR_ARG, "%s: sw is NULL", op);
    if ((s = kern__sp24_check_2d(w, op, "w"))) return s;
    if (w->dtype != KERN_F32 && w->dtype != KERN_BF16 && w->dtype != KERN_F16 &&
        w->dtype != KERN_I8)
        return kern__err(KERN_ERR_DTYPE, "%s: w.dtype=%s (f32, bf16, f16 or i8)", op,
                         kern_dtype_name(w->dtype));
    if (qt != KERN_DTYPE_NONE && qt != KERN_I8)
        return kern__err(KERN_ERR_DTYPE, "%s: quantize=%s (none or i8)", op,
                         kern_dtype_name(qt));
    if (qt == KERN_I8 && w->dtype == KERN_I8)
        return kern__err(KERN_ERR_DTYPE, "%s: quantize=i8 needs a float w, w.dtype=i8", op);
    N = w->shape[0];
    K = w->shape[1];
    if (N == 0 || K == 0)
        return kern__err(KERN_ERR_SHAPE, "%s: w.shape=[%lld,%lld] is empty", op,
                         (long long)N, (long long)K);
    if (K % 4 != 0 && !pad)
        return kern__err(KERN_ERR_SHAPE,
                         "%s: w.shape[1]=%lld is not a multiple of 4 (set pad_k to "
                         "zero-pad the last group)", op, (long long)K);
    if (sc) {
        if (w->dtype != KERN_I8)
            return kern__err(KERN_ERR_ARG, "%s: scales given but w.dtype=%s (scales are "
                             "for an i8 w)", op, kern_dtype_name(w->dtype));
        if ((s = kern_tensor_check(sc, op, "scales"))) return s;
        if (sc->dtype != KERN_F32)
            return kern__err(KERN_ERR_DTYPE, "%s: scales.dtype=%s, expected f32", op,
                             kern_dtype_name(sc->dtype));
        if (sc->ndim != 1 || sc->shape[0] != N)
            return kern__err(KERN_ERR_SHAPE, "%s: scales must be [%lld]", op, (long long)N);
    }
    G = (K + 3) / 4;
    /* validate everything before allocating */
    for (n = 0; n < N; n++)
        for (g = 0; g < G; g++) {
            int r = (int)(K - 4 * g < 4 ? K - 4 * g : 4), i, cnt = 0;
            for (i = 0; i < r; i++) cnt += kern__sp24_nz(w->dtype, kern__sp24_at(w, n, 4 * g + i));
            if (cnt > 2)
                return kern__err(KERN_ERR_ARG,
                                 "%s: w is not 2:4 sparse: row %lld group %lld (columns "
                                 "%lld..%lld) has %d nonzeros", op, (long long)n,
                                 (long long)g, (long long)(4 * g),
                                 (long long)(4 * g + r - 1), cnt);
            if (qt == KERN_I8)
                for (i = 0; i < r; i++) {
                    float v = kern__sp24_tof(w->dtype, kern__sp24_at(w, n, 4 * g + i));
                    if (!isfinite(v))
                        return kern__err(KERN_ERR_ARG, "%s: cannot quantize: w[%lld,%lld] "
                                         "is not finite", op, (long long)n,
                                         (long long)(4 * g + i));
                }
        }
    if ((s = kern__op_begin(&ctx, op))) return s;
    st = qt == KERN_I8 ? KERN_I8 : w->dtype;
    s = kern__sp24_alloc(ctx, st, N, K, &o, op);
    if (s) {
        kern__op_end(ctx);
        return s;
    }
    for (n = 0; n < N; n++) {
        int64_t t = n / 16;
        int l = (int)(n % 16);
        float scale = 1.0f;
        if (qt == KERN_I8) {
            float amax = 0;
            int64_t k;
            for (k = 0; k < K; k++) {
                float v = fabsf(kern__sp24_tof(w->dtype, kern__sp24_at(w, n, k)));
                if (v > amax) amax = v;
            }
            scale = kern__quant_scale(amax);
            o->scales[n] = scale;
        } else if (st == KERN_I8) {
            o->scales[n] = sc ? *(const float *)((const char *)sc->data + n * sc->stride[0] * 4)
                             : 1.0f;
        }
        for (g = 0; g < G; g++) {
            int r = (int)(K - 4 * g < 4 ? K - 4 * g : 4), i, j;
            unsigned mask = 0, code;
            int64_t tg = t * G + g;
            for (i = 0; i < r; i++)
                if (kern__sp24_nz(w->dtype, kern__sp24_at(w, n, 4 * g + i))) mask |= 1u << i;
            code = (unsigned)kern__sp24_code_from_mask(mask);
            kern__sp24_set_code(o->meta, tg, l, code);
            for (j = 0; j < 2; j++) {
                int idx = (int)(j ? code >> 2 : code & 3u);
                char *dst = (char *)o->values + kern__sp24_voff(st, tg, l, j) * kern__sp24_esize(st);
                if (idx >= r) continue; /* zero padding */
                if (qt == KERN_I8) {
                    kern__s_quant_row(kern__sp24_at(w, n, 4 * g + idx), w->dtype, 1, 1.0f / scale,
                                      0, -127, 127, (uint8_t *)dst);
                } else {
                    memcpy(dst, kern__sp24_at(w, n, 4 * g + idx), (size_t)kern__sp24_esize(st));
                }
            }
        }
    }
    *sw = o;
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API void kern_sparse24_free(kern_ctx *ctx, kern_sparse24 *sw) {
    if (!sw) return;
    if (!ctx) ctx = kern_default_ctx();
    kern__free(ctx, sw);
}

KERN_API kern_status kern_sparse24_get_info(const kern_sparse24 *sw, kern_sparse24_info *out) {
    static const char *op = "kern_sparse24_get_info";
    kern_status s;
    if (!out) return kern__err(KERN_ERR_ARG, "%s: out is NULL", op);
    if ((s = kern__sp24_check_sw(sw, op))) return s;
    memset(out, 0, sizeof *out);
    out->n = sw->n;
    out->k = sw->k;
    out->k_padded = sw->k_padded;
    out->dtype = sw->dtype;
    out->has_scales = sw->scales != NULL;
    out->bytes = sw->bytes;
    return KERN_OK;
}

KERN_API void kern_sparse24_linear_params_defaults(kern_sparse24_linear_params *p) {
    if (p) kern_epilogue_defaults(&p->epilogue);
}

KERN_API kern_status kern_sparse24_decompress(kern_ctx *ctx, const kern_sparse24 *sw,
                                              const kern_tensor *out) {
    static const char *op = "kern_sparse24_decompress";
    kern_status s;
    int64_t n, g, G;
    size_t es;
    if ((s = kern__sp24_check_sw(sw, op))) return s;
    if ((s = kern__sp24_check_2d(out, op, "out"))) return s;
    if (out->dtype != sw->dtype)
        return kern__err(KERN_ERR_DTYPE, "%s: out.dtype=%s but sw->dtype=%s", op,
                         kern_dtype_name(out->dtype), kern_dtype_name(sw->dtype));
    if (out->shape[0] != sw->n || out->shape[1] != sw->k)
        return kern__err(KERN_ERR_SHAPE, "%s: out.shape=[%lld,%lld] but sw is [%lld,%lld]",
                         op, (long long)out->shape[0], (long long)out->shape[1],
                         (long long)sw->n, (long long)sw->k);
    if (kern__tensor_self_overlap(out))
        return kern__err(KERN_ERR_LAYOUT, "%s: out has overlapping elements (a zero or too small "
                         "stride); an output needs distinct elements", op);
    if ((s = kern__op_begin(&ctx, op))) return s;
    es = kern_dtype_size(sw->dtype);
    G = sw->k_padded / 4;
    for (n = 0; n < sw->n; n++) {
        int l = (int)(n % 16);
        int64_t k;
        for (k = 0; k < sw->k; k++) memset((char *)kern__sp24_at(out, n, k), 0, es);
        for (g = 0; g < G; g++) {
            int64_t tg = (n / 16) * G + g;
            unsigned c = kern__sp24_code(sw->meta, tg, l);
            int j;
            for (j = 0; j < 2; j++) {
                int64_t kk = 4 * g + (j ? c >> 2 : c & 3u);
                if (kk < sw->k)
                    memcpy((char *)kern__sp24_at(out, n, kk),
                           (const char *)sw->values + kern__sp24_voff(sw->dtype, tg, l, j) * (int64_t)es,
                           es);
            }
        }
    }
    kern__op_end(ctx);
    return KERN_OK;
}

/* ------------------------------------------------- metadata interop */

/* Position of word (r, c) of an [N, C] word matrix in CUTLASS's reordered
 * layout (see METADATA INTEROP). */
static int64_t kern__sp24_cutlass_pos(int64_t r, int64_t c, int64_t N, int wide) {
    int64_t R = wide ? 16 : 32, I = wide ? 2 : 4;
    int64_t rr = (r / R) * R + (r % 8) * I + (r % R) / 8;
    if ((rr & 1) == 0 && (c & 1) == 1) { rr += 1; c -= 1; }
    else if ((rr & 1) == 1 && (c & 1) == 0) { rr -= 1; c += 1; }
    return (c / 2) * (2 * N) + rr * 2 + (c % 2);
}

/* Validates values/meta for export (writing=1) or import; fills q, C. */
static kern_status kern__sp24_check_meta(const char *op, kern_dtype vdt, int64_t N,
                                         int64_t Kp, const kern_tensor *values,
                                         const kern_tensor *meta, int layout, int *q_out,
                                         int64_t *C_out) {
    kern_status s;
    int wide = vdt == KERN_I8, q = wide ? 8 : 4;
    int64_t C;
    if ((s = kern__sp24_check_2d(values, op, "values"))) return s;
    if ((s = kern__sp24_check_2d(meta, op, "meta"))) return s;
    if (layout != KERN_SPARSE24_META_CUTLASS && layout != KERN_SPARSE24_META_ROWMAJOR)
        return kern__err(KERN_ERR_ARG, "%s: meta_layout=%d is not a kern_sparse24_meta_layout",
                         op, layout);
    if (values->dtype != vdt)
        return kern__err(KERN_ERR_DTYPE, "%s: values.dtype=%s, expected %s", op,
                         kern_dtype_name(values->dtype), kern_dtype_name(vdt));
    if (meta->dtype != (wide ? KERN_I32 : KERN_U8))
        return kern__err(KERN_ERR_DTYPE, "%s: meta.dtype=%s, expected %s for %s values", op,
                         kern_dtype_name(meta->dtype), wide ? "i32 words" : "u8 (bytes of i16 words)",
                         kern_dtype_name(vdt));
    if (values->shape[0] != N || values->shape[1] != Kp / 2)
        return kern__err(KERN_ERR_SHAPE, "%s: values.shape=[%lld,%lld], expected [%lld,%lld]",
                         op, (long long)values->shape[0], (long long)values->shape[1],
                         (long long)N, (long long)(Kp / 2));
    if (layout == KERN_SPARSE24_META_CUTLASS) {
        if (N % (wide ? 16 : 32) != 0 || Kp % (8 * q) != 0)
            return kern__err(KERN_ERR_SHAPE,
                             "%s: the CUTLASS metadata layout needs N %% %d == 0 and K %% %d "
                             "== 0, got N=%lld K=%lld", op, wide ? 16 : 32, 8 * q,
                             (long long)N, (long long)Kp);
        C = Kp / (4 * q);
    } else {
        C = (Kp + 4 * q - 1) / (4 * q);
    }
    {
        int64_t cols = wide ? C : 2 * C;
        if (meta->shape[0] != N || meta->shape[1] != cols)
            return kern__err(KERN_ERR_SHAPE, "%s: meta.shape=[%lld,%lld] %s, expected "
                             "[%lld,%lld]", op, (long long)meta->shape[0],
                             (long long)meta->shape[1],
                             meta->shape[0] * meta->shape[1] < N * cols ? "is too small"
                                                                        : "is wrong",
                             (long long)N, (long long)cols);
    }
    if (layout == KERN_SPARSE24_META_CUTLASS && !kern_tensor_is_contiguous(meta))
        return kern__err(KERN_ERR_LAYOUT, "%s: the CUTLASS meta layout needs a contiguous meta",
                         op);
    *q_out = q;
    *C_out = C;
    return KERN_OK;
}

static inline uint32_t kern__sp24_meta_get(const kern_tensor *meta, int64_t r, int64_t c,
                                           int64_t N, int layout, int wide) {
    const unsigned char *p;
    if (layout == KERN_SPARSE24_META_CUTLASS) {
        p = (const unsigned char *)meta->data + kern__sp24_cutlass_pos(r, c, N, wide) * (wide ? 4 : 2);
        if (!wide) return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
    } else if (!wide) {
        return (uint32_t)*(const unsigned char *)kern__sp24_at(meta, r, 2 * c) |
               ((uint32_t)*(const unsigned char *)kern__sp24_at(meta, r, 2 * c + 1) << 8);
    } else {
        p = (const unsigned char *)kern__sp24_at(meta, r, c);
    }
    { uint32_t u; memcpy(&u, p, 4); return u; }
}
static inline void kern__sp24_meta_put(const kern_tensor *meta, int64_t r, int64_t c,
                                       int64_t N, int layout, int wide, uint32_t v) {
    unsigned char *p;
    if (layout == KERN_SPARSE24_META_CUTLASS) {
        p = (unsigned char *)meta->data + kern__sp24_cutlass_pos(r, c, N, wide) * (wide ? 4 : 2);
        if (!wide) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); return; }
    } else if (!wide) {
        *(unsigned char *)kern__sp24_at(meta, r, 2 * c) = (unsigned char)v;
        *(unsigned char *)kern__sp24_at(meta, r, 2 * c + 1) = (unsigned char)(v >> 8);
        return;
    } else {
        p = (unsigned char *)kern__sp24_at(meta, r, c);
    }
    memcpy(p, &v, 4);
}

KERN_API kern_status kern_sparse24_export(kern_ctx *ctx, const kern_sparse24 *sw,
                                          const kern_tensor *values,
                                          const kern_tensor *meta,
                                          const kern_sparse24_params *p) {
    static const char *op = "kern_sparse24_export";
    kern_status s;
    int q, wide, layout = p ? (int)p->meta_layout : 0;
    int64_t C, n, c, G;
    size_t es;
    if ((s = kern__sp24_check_sw(sw, op))) return s;
    if ((s = kern__sp24_check_meta(op, sw->dtype, sw->n, sw->k_padded, values, meta, layout,
                                   &q, &C)))
        return s;
    if (kern_tensors_overlap(values, meta))
        return kern__err(KERN_ERR_ARG, "%s: values and meta overlap", op);
    if (kern__tensor_self_overlap(values) || kern__tensor_self_overlap(meta))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s has overlapping elements (a zero or too small "
                         "stride); an output needs distinct elements", op,
                         kern__tensor_self_overlap(values) ? "values" : "meta");
    if ((s = kern__op_begin(&ctx, op))) return s;
    wide = q == 8;
    es = kern_dtype_size(sw->dtype);
    G = sw->k_padded / 4;
    for (n = 0; n < sw->n; n++) {
        int l = (int)(n % 16);
        int64_t g;
        for (g = 0; g < G; g++) {
            int64_t tg = (n / 16) * G + g;
            int j;
            for (j = 0; j < 2; j++)
                memcpy((char *)kern__sp24_at(values, n, 2 * g + j),
                       (const char *)sw->values + kern__sp24_voff(sw->dtype, tg, l, j) * (int64_t)es,
                       es);
        }
        for (c = 0; c < C; c++) {
            uint32_t word = 0;
            int i;
            for (i = 0; i < q; i++) {
                int64_t gg = c * q + i;
                if (gg < G) word |= kern__sp24_code(sw->meta, (n / 16) * G + gg, l) << (4 * i);
            }
            kern__sp24_meta_put(meta, n, c, sw->n, layout, wide, word);
        }
    }
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_sparse24_import(kern_ctx *ctx, const kern_tensor *values,
                                          const kern_tensor *meta,
                                          kern_sparse24 **sw,
                                          const kern_sparse24_params *p) {
    static const char *op = "kern_sparse24_import";
    kern_sparse24 *o = NULL;
    kern_status s;
    int q, wide, layout = p ? (int)p->meta_layout : 0;
    int64_t N, K, Kp, C, n, g, G;
    const kern_tensor *sc = p ? p->scales : NULL;
    size_t es;
    if (!sw) return kern__err(KERN_ERR_ARG, "%s: sw is NULL", op);
    if ((s = kern__sp24_check_2d(values, op, "values"))) return s;
    if (values->dtype != KERN_F32 && values->dtype != KERN_BF16 &&
        values->dtype != KERN_F16 && values->dtype != KERN_I8)
        return kern__err(KERN_ERR_DTYPE, "%s: values.dtype=%s (f32, bf16, f16 or i8)", op,
                         kern_dtype_name(values->dtype));
    N = values->shape[0];
    if (N == 0 || values->shape[1] == 0)
        return kern__err(KERN_ERR_SHAPE, "%s: values.shape=[%lld,%lld] is empty", op,
                         (long long)N, (long long)values->shape[1]);
    if (values->shape[1] > INT64_MAX / 4)
        return kern__err(KERN_ERR_SHAPE, "%s: values.shape[1]=%lld is too large", op,
                         (long long)values->shape[1]);
    Kp = 2 * values->shape[1];
    K = p && p->k ? p->k : Kp;
    if (Kp % 4 != 0)
        return kern__err(KERN_ERR_SHAPE, "%s: values.shape[1]=%lld must be even (2 values "
                         "per group of 4)", op, (long long)values->shape[1]);
    if (K > Kp || K <= Kp - 4 || (K != Kp && !(p && p->pad_k)))
        return kern__err(KERN_ERR_SHAPE, "%s: k=%lld does not match values.shape[1]=%lld "
                         "(k < 2*shape[1] needs pad_k)", op, (long long)K,
                         (long long)values->shape[1]);
    if ((s = kern__sp24_check_meta(op, values->dtype, N, Kp, values, meta, layout, &q, &C)))
        return s;
    if (sc) {
        if (values->dtype != KERN_I8)
            return kern__err(KERN_ERR_ARG, "%s: scales given for %s values", op,
                             kern_dtype_name(values->dtype));
        if ((s = kern_tensor_check(sc, op, "scales"))) return s;
        if (sc->dtype != KERN_F32 || sc->ndim != 1 || sc->shape[0] != N)
            return kern__err(KERN_ERR_SHAPE, "%s: scales must be f32 [%lld]", op, (long long)N);
    }
    wide = q == 8;
    G = Kp / 4;
    for (n = 0; n < N; n++)
        for (g = 0; g < G; g++) {
            unsigned code = (kern__sp24_meta_get(meta, n, g / q, N, layout, wide) >> (4 * (g % q))) & 15u;
            if (!kern__sp24_code_valid(code))
                return kern__err(KERN_ERR_ARG, "%s: meta: row %lld group %lld has code 0x%x "
                                 "(indices %u,%u; the first must be below the second)", op,
                                 (long long)n, (long long)g, code, code & 3u, code >> 2);
            if (4 * g + (int64_t)(code >> 2) >= K) {
                /* a padded position must hold zero */
                const char *v = kern__sp24_at(values, n, 2 * g + 1);
                if (kern__sp24_nz(values->dtype, v))
                    return kern__err(KERN_ERR_ARG, "%s: row %lld group %lld keeps a nonzero "
                                     "past k=%lld", op, (long long)n, (long long)g, (long long)K);
            }
            if (4 * g + (int64_t)(code & 3u) >= K &&
                kern__sp24_nz(values->dtype, kern__sp24_at(values, n, 2 * g)))
                return kern__err(KERN_ERR_ARG, "%s: row %lld group %lld keeps a nonzero "
                                 "past k=%lld", op, (long long)n, (long long)g, (long long)K);
        }
    if ((s = kern__op_begin(&ctx, op))) return s;
    s = kern__sp24_alloc(ctx, values->dtype, N, K, &o, op);
    if (s) {
        kern__op_end(ctx);
        return s;
    }
    es = kern_dtype_size(values->dtype);
    for (n = 0; n < N; n++) {
        int l = (int)(n % 16);
        if (o->scales)
            o->scales[n] = sc ? *(const float *)((const char *)sc->data + n * sc->stride[0] * 4)
                             : 1.0f;
        for (g = 0; g < G; g++) {
            int64_t tg = (n / 16) * G + g;
            unsigned code = (kern__sp24_meta_get(meta, n, g / q, N, layout, wide) >> (4 * (g % q))) & 15u;
            int j;
            kern__sp24_set_code(o->meta, tg, l, code);
            for (j = 0; j < 2; j++)
                memcpy((char *)o->values + kern__sp24_voff(o->dtype, tg, l, j) * (int64_t)es,
                       kern__sp24_at(values, n, 2 * g + j), es);
        }
    }
    *sw = o;
    kern__op_end(ctx);
    return KERN_OK;
}

/* ------------------------------------------------------------ linear */

typedef struct kern__sp24_job {
    const kern_sparse24 *sw;
    kern_ctx *ctx;
    int64_t M, N, K, Kp, G;
    const char *x; int64_t ldx; kern_dtype xdt;
    const void *xs; int64_t ldxs; /* small-M: f32 (or bf16 for bf16dot), Kp cols */
    kern__epi epi; /* kern_base.h's epilogue: y, bias, act, residual, out_scale */
    const struct kern__sp24_fns *fns; /* the kernels of the context's level */
    int bf16dot;  /* bf16 weights and x through vdpbf16ps */
    int64_t n_ms; /* large-M: m slivers */
    int mr;       /* large-M: rows per sliver */
    int64_t nt;   /* large-M: tiles per task */
    void *xp;     /* large-M: x packed once per call, panel per sliver */
    int64_t xp_stride; /* elements (floats or pair words) per sliver */
    size_t scratch_yt; /* large-M per-thread scratch layout */
} kern__sp24_job;

/* ---------------------------------------------- one table per ISA level
 * The kernels of each level (kern__sp24_fns_for): small-M kernels (rows per
 * call), the large-M microkernels over one 16-channel tile, the x panel
 * packers and the large-M epilogue. Levels without a vector path take the
 * scalar table (sm_chunk 0). AVX512_BF16 adds the vdpbf16ps kernels for bf16
 * weights (its table for other weights is the AVX512 one); the VNNI levels
 * add nothing here; NEON runs f32 weights (other weights: scalar). */
typedef void (*kern__sp24_sm_fn)(const float *x, int64_t ldx, const void *wv,
                                 const uint8_t *meta, int64_t G, float *out, int mr, int wk);
typedef void (*kern__sp24_smb_fn)(const uint16_t *x, int64_t ldx, const uint16_t *wv,
                                  const uint8_t *meta, int64_t G, float *out, int mr);
/* One tile (16 channels) of the large-M path: yb[l * ld + i] for channel
 * l, row i of the sliver; nxt / quarter: the next weight block to
 * prefetch. */
typedef void (*kern__sp24_lm_fn)(const void *xt, const void *wt, const uint8_t *mt, int ng,
                                 float *yb, int64_t ld, int first, const char *nxt,
                                 int64_t quarter, int nv);
typedef void (*kern__sp24_pack_fn)(const kern__sp24_job *J, int64_t ms);
typedef void (*kern__sp24_epi_lm_fn)(const kern__sp24_job *J, int64_t m0, int mc, int64_t n0,
                                     int nc, const float *acc, int64_t ld);
typedef void (*kern__sp24_epi_tile_fn)(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                       int64_t ldt, int m, int n);

typedef struct kern__sp24_fns {
    const char *name;
    int sm_chunk;               /* small-M rows per kernel call; 0: the scalar path */
    kern__sp24_sm_fn sm_f32;    /* f32 x; f32, bf16 or i8 weights (wk 0, 1, 2) */
    kern__sp24_smb_fn sm_bf16;  /* bf16 x and weights through vdpbf16ps, or NULL */
    int lm_mr, lm_vec;          /* large-M rows per sliver, lanes per vector; 0: none */
    int lm_pf512;               /* large-M prefetch pattern of the 4-row kernels */
    kern__sp24_lm_fn lm_f32, lm_bf16;
    kern__sp24_pack_fn pack_xt, pack_xt6;
    kern__sp24_epi_lm_fn epi_lm;
    kern__sp24_epi_tile_fn epi_tile; /* kern_base.h's epilogue of the level */
} kern__sp24_fns;

/* The store of every path: the m x n tile t (row stride ldt) of output
 * rows m0.., channels n0.. through kern_base.h's epilogue (the level's
 * kern__v_epi_tile / kern__s_epi_tile), after the per-channel scale of i8
 * weights, applied to t in place (alpha is 1: the product is its only
 * rounding). */
static void kern__sp24_store(const kern__sp24_job *J, int64_t m0, int mc, int64_t n0, int nc,
                             float *t, int64_t ldt) {
    const float *sc = J->sw->scales;
    int i, j;
    if (sc)
        for (i = 0; i < mc; i++)
            for (j = 0; j < nc; j++) t[i * ldt + j] *= sc[n0 + j];
    J->fns->epi_tile(&J->epi, m0, n0, t, ldt, mc, nc);
}

/* Scalar path: one task = SM_NT tiles, all rows of x. Per-thread scratch:
 * one x row in f32 (Kp floats) + 16 accumulators. */
static void kern__sp24_task_scalar(void *arg, int64_t task, int thread) {
    const kern__sp24_job *J = (const kern__sp24_job *)arg;
    const kern_sparse24 *sw = J->sw;
    float *xr = (float *)kern__thread_scratch(J->ctx, thread);
    float acc[16];
    int64_t t0 = task * KERN__SP24_SM_NT, t1 = t0 + KERN__SP24_SM_NT, t, m, g, k;
    const int64_t G = J->G;
    size_t es = kern_dtype_size(sw->dtype);
    if (t1 > sw->n_tiles) t1 = sw->n_tiles;
    for (m = 0; m < J->M; m++) {
        const char *xp = J->x + m * J->ldx * (int64_t)kern_dtype_size(J->xdt);
        for (k = 0; k < J->Kp; k++)
            xr[k] = k < J->K ? kern__sp24_tof(J->xdt, xp + k * (int64_t)kern_dtype_size(J->xdt)) : 0.0f;
        for (t = t0; t < t1; t++) {
            int l;
            int64_t nc = J->N - t * 16 < 16 ? J->N - t * 16 : 16;
            for (l = 0; l < nc; l++) {
                float a = 0.0f;
                for (g = 0; g < G; g++) {
                    int64_t tg = t * G + g;
                    unsigned c = kern__sp24_code(sw->meta, tg, l);
                    const char *v = (const char *)sw->values;
                    float w0 = kern__sp24_tof(sw->dtype, v + kern__sp24_voff(sw->dtype, tg, l, 0) * (int64_t)es);
                    float w1 = kern__sp24_tof(sw->dtype, v + kern__sp24_voff(sw->dtype, tg, l, 1) * (int64_t)es);
                    a += w0 * xr[4 * g + (c & 3u)];
                    a += w1 * xr[4 * g + (c >> 2)];
                }
                acc[l] = a;
            }
            kern__sp24_store(J, m, 1, t * 16, (int)nc, acc, 16);
        }
    }
}

/* ==================================================== AVX-512 kernels */
#ifdef KERN_X86

/* Large-M f32 microkernel: rows l..l+3 of one tile, NV zmm of m.
 * xt: [16 groups * 4][64] f32; w: tile values at the block's first group
 * ([2][16] per group, 32 floats apart); meta likewise (8 bytes apart).
 * Per group and row, the two kept weights are broadcast (in registers, from
 * one 16-byte load per j: the load ports are the bottleneck, as every FMA
 * already reads its 64-byte panel row from L1) and multiplied with the two
 * panel rows their indices select. */
KERN_TARGET_AVX512 KERN__SP24_INLINE void kern__sp24_lm_f32_body__avx512(
    const float *xt, const float *w, const uint8_t *meta, int ng, int l, float *y,
    int first, const char *pf, const int NV) {
    __m512 a[4][4];
    const __m512i i0 = _mm512_set1_epi32(0), i1 = _mm512_set1_epi32(1);
    const __m512i i2 = _mm512_set1_epi32(2), i3 = _mm512_set1_epi32(3);
    int g, v, r;
    KERN__SP24_UNROLL
    for (r = 0; r < 4; r++)
        KERN__SP24_UNROLL
        for (v = 0; v < NV; v++)
            a[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(y + r * 64 + 16 * v);
    for (g = 0; g < ng; g++) {
        uint16_t mb;
        const float *xg = xt + g * 256;
        __m512 w0 = _mm512_castps128_ps512(_mm_loadu_ps(w + g * 32 + l));
        /* 8 lines of the next weight block per call, one every 2 groups
         * (a burst of 32 prefetches stalled dispatch: 7% of the time) */
        if (!(g & 1)) _mm_prefetch(pf + (g >> 1) * 64, _MM_HINT_T0);
        __m512 w1 = _mm512_castps128_ps512(_mm_loadu_ps(w + g * 32 + 16 + l));
        memcpy(&mb, meta + g * 8 + (l >> 1), 2);
        KERN__SP24_UNROLL
        for (r = 0; r < 4; r++) {
            unsigned c = ((unsigned)mb >> (4 * r)) & 15u;
            const float *p0 = xg + (c & 3u) * 64, *p1 = xg + (c >> 2) * 64;
            const __m512i ir = r == 0 ? i0 : r == 1 ? i1 : r == 2 ? i2 : i3;
            __m512 s0 = _mm512_permutexvar_ps(ir, w0), s1 = _mm512_permutexvar_ps(ir, w1);
            KERN__SP24_UNROLL
            for (v = 0; v < NV; v++) a[r][v] = _mm512_fmadd_ps(s0, _mm512_load_ps(p0 + 16 * v), a[r][v]);
            KERN__SP24_UNROLL
            for (v = 0; v < NV; v++) a[r][v] = _mm512_fmadd_ps(s1, _mm512_load_ps(p1 + 16 * v), a[r][v]);
        }
    }
    KERN__SP24_UNROLL
    for (r = 0; r < 4; r++)
        KERN__SP24_UNROLL
        for (v = 0; v < NV; v++) _mm512_storeu_ps(y + r * 64 + 16 * v, a[r][v]);
}
KERN_TARGET_AVX512 static void kern__sp24_lm_f32__avx512(const float *xt, const float *w,
                                                         const uint8_t *meta, int ng, int l,
                                                         float *y, int first, const char *pf,
                                                         int nv) {
    switch (nv) {
    case 1: kern__sp24_lm_f32_body__avx512(xt, w, meta, ng, l, y, first, pf, 1); break;
    case 2: kern__sp24_lm_f32_body__avx512(xt, w, meta, ng, l, y, first, pf, 2); break;
    case 3: kern__sp24_lm_f32_body__avx512(xt, w, meta, ng, l, y, first, pf, 3); break;
    default: kern__sp24_lm_f32_body__avx512(xt, w, meta, ng, l, y, first, pf, 4); break;
    }
}

/* bf16 pair panel: per group, KERN__SP24_NSLOT rows of 64 m, row (code - 4)
 * holding the bf16 pairs (x[m][4g+i0], x[m][4g+i1]) of code = i0 | i1 << 2
 * (the six valid codes 0x4 0x8 0x9 0xC 0xD 0xE use rows 0 4 5 8 9 10; the
 * other rows are never written or read). Indexing by the code itself keeps
 * the address arithmetic of the kernel at two ALU ops per row. */
#define KERN__SP24_NSLOT 11

/* Large-M bf16 microkernel (vdpbf16ps): rows l..l+3 of one tile. xt6:
 * [16 groups][NSLOT][64 m] 32-bit bf16 pairs; w: tile bf16 pairs, 32 bf16
 * per group. One vdpbf16ps does both kept products of a group. */
KERN_TARGET_AVX512BF16 KERN__SP24_INLINE void kern__sp24_lm_bf16_body__avx512(
    const uint32_t *xt6, const uint16_t *w, const uint8_t *meta, int ng, int l, float *y,
    int first, const char *pf, const int NV) {
    __m512 a[4][4];
    const __m512i i0 = _mm512_set1_epi32(0), i1 = _mm512_set1_epi32(1);
    const __m512i i2 = _mm512_set1_epi32(2), i3 = _mm512_set1_epi32(3);
    int g, v, r;
    KERN__SP24_UNROLL
    for (r = 0; r < 4; r++)
        KERN__SP24_UNROLL
        for (v = 0; v < NV; v++)
            a[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(y + r * 64 + 16 * v);
    for (g = 0; g < ng; g++) {
        uint16_t mb;
        /* row (code - 4) of the group, in bytes: ((code << 8) - 1024) */
        const char *xg = (const char *)(xt6 + g * KERN__SP24_NSLOT * 64) - 1024;
        __m512i wp = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(w + g * 32 + l * 2)));
        memcpy(&mb, meta + g * 8 + (l >> 1), 2);
        if (!(g & 1)) _mm_prefetch(pf + (g >> 1) * 64, _MM_HINT_T0);
        KERN__SP24_UNROLL
        for (r = 0; r < 4; r++) {
            unsigned off = (r == 0   ? (unsigned)mb << 8
                            : r == 1 ? (unsigned)mb << 4
                            : r == 2 ? (unsigned)mb
                                     : (unsigned)mb >> 4) & 0xF00u;
            const uint32_t *px = (const uint32_t *)(xg + off);
            const __m512i ir = r == 0 ? i0 : r == 1 ? i1 : r == 2 ? i2 : i3;
            __m512bh s = (__m512bh)_mm512_permutexvar_epi32(ir, wp);
            KERN__SP24_UNROLL
            for (v = 0; v < NV; v++)
                a[r][v] = _mm512_dpbf16_ps(a[r][v], s,
                                           (__m512bh)_mm512_load_si512((const void *)(px + 16 * v)));
        }
    }
    KERN__SP24_UNROLL
    for (r = 0; r < 4; r++)
        KERN__SP24_UNROLL
        for (v = 0; v < NV; v++) _mm512_storeu_ps(y + r * 64 + 16 * v, a[r][v]);
}
KERN_TARGET_AVX512BF16 static void kern__sp24_lm_bf16__avx512(const uint32_t *xt6,
                                                              const uint16_t *w,
                                                              const uint8_t *meta, int ng,
                                                              int l, float *y, int first,
                                                              const char *pf, int nv) {
    switch (nv) {
    case 1: kern__sp24_lm_bf16_body__avx512(xt6, w, meta, ng, l, y, first, pf, 1); break;
    case 2: kern__sp24_lm_bf16_body__avx512(xt6, w, meta, ng, l, y, first, pf, 2); break;
    case 3: kern__sp24_lm_bf16_body__avx512(xt6, w, meta, ng, l, y, first, pf, 3); break;
    default: kern__sp24_lm_bf16_body__avx512(xt6, w, meta, ng, l, y, first, pf, 4); break;
    }
}

/* Small-M f32 kernel: one tile (16 channels) x MR rows of x (f32, Kp
 * columns readable). WK: 0 f32 weights ([2][16]), 1 bf16 pairs ([16][2]),
 * 2 i8 ([2][16]). acc out: [MR][16]. */
KERN_TARGET_AVX512 KERN__SP24_INLINE void kern__sp24_sm_f32_body__avx512(
    const float *x, int64_t ldx, const void *wv, const uint8_t *meta, int64_t G, float *out,
    const int MR, const int WK) {
    __m512 a[16], b[16];
    const __m512i sel = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i sh = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    int64_t g;
    int m;
    KERN__SP24_UNROLL
    for (m = 0; m < MR; m++) { a[m] = _mm512_setzero_ps(); b[m] = a[m]; }
    for (g = 0; g < G; g++) {
        __m512 w0, w1;
        __m512i c0, c1;
        /* the weight stream comes from DRAM: prefetch ~1.5 KiB ahead (the
         * hardware prefetcher alone left this at ~7 GB/s) */
        _mm_prefetch((const char *)wv + (g + 12) * 32 * (WK == 0 ? 4 : WK == 1 ? 2 : 1),
                     _MM_HINT_T0);
        if (WK == 0) _mm_prefetch((const char *)wv + (g + 12) * 128 + 64, _MM_HINT_T0);
        if ((g & 7) == 0) _mm_prefetch((const char *)(meta + (g + 24) * 8), _MM_HINT_T0);
        if (WK == 0) {
            const float *wp = (const float *)wv + g * 32;
            w0 = _mm512_loadu_ps(wp);
            w1 = _mm512_loadu_ps(wp + 16);
        } else if (WK == 1) {
            __m512i d = _mm512_loadu_si512((const void *)((const uint16_t *)wv + g * 32));
            w0 = _mm512_castsi512_ps(_mm512_slli_epi32(d, 16));
            w1 = _mm512_castsi512_ps(_mm512_and_si512(d, _mm512_set1_epi32((int)0xffff0000u)));
        } else {
            const int8_t *wp = (const int8_t *)wv + g * 32;
            w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)wp)));
            w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(wp + 16))));
        }
        c0 = _mm512_srlv_epi32(
            _mm512_permutexvar_epi32(sel, _mm512_castsi128_si512(
                                              _mm_loadl_epi64((const __m128i *)(meta + g * 8)))),
            sh);
        c1 = _mm512_srli_epi32(c0, 2);
        /* x[m][4g..4g+3] loaded into the low 128 bits and spread by vpermps
         * (indices 0..3): a broadcast load here costs an extra FP-pipe uop
         * on Zen 4 (0.47 -> 0.54 of the FMA peak without it) */
        c0 = _mm512_and_si512(c0, _mm512_set1_epi32(3));
        c1 = _mm512_and_si512(c1, _mm512_set1_epi32(3));
        KERN__SP24_UNROLL
        for (m = 0; m < MR; m++) {
            __m512 xb = _mm512_castps128_ps512(_mm_loadu_ps(x + m * ldx + 4 * g));
            a[m] = _mm512_fmadd_ps(w0, _mm512_permutexvar_ps(c0, xb), a[m]);
            /* two chains per row while registers allow (MR <= 8) */
            if (MR <= 8) b[m] = _mm512_fmadd_ps(w1, _mm512_permutexvar_ps(c1, xb), b[m]);
            else a[m] = _mm512_fmadd_ps(w1, _mm512_permutexvar_ps(c1, xb), a[m]);
        }
    }
    KERN__SP24_UNROLL
    for (m = 0; m < MR; m++)
        _mm512_storeu_ps(out + 16 * m, MR <= 8 ? _mm512_add_ps(a[m], b[m]) : a[m]);
}

#define KERN__SP24_SM_CASES(BODY, ...)                                        \
    switch (mr) {                                                             \
    case 1: BODY(__VA_ARGS__, 1); break;  case 2: BODY(__VA_ARGS__, 2); break;   \
    case 3: BODY(__VA_ARGS__, 3); break;  case 4: BODY(__VA_ARGS__, 4); break;   \
    case 5: BODY(__VA_ARGS__, 5); break;  case 6: BODY(__VA_ARGS__, 6); break;   \
    case 7: BODY(__VA_ARGS__, 7); break;  case 8: BODY(__VA_ARGS__, 8); break;   \
    case 9: BODY(__VA_ARGS__, 9); break;  case 10: BODY(__VA_ARGS__, 10); break; \
    case 11: BODY(__VA_ARGS__, 11); break; case 12: BODY(__VA_ARGS__, 12); break; \
    case 13: BODY(__VA_ARGS__, 13); break; case 14: BODY(__VA_ARGS__, 14); break; \
    case 15: BODY(__VA_ARGS__, 15); break; default: BODY(__VA_ARGS__, 16); break; \
    }
#define KERN__SP24_SMF_AVX512(x, ldx, wv, meta, G, out, wk, MR)               \
    kern__sp24_sm_f32_body__avx512(x, ldx, wv, meta, G, out, MR, wk)

KERN_TARGET_AVX512 static void kern__sp24_sm_f32__avx512(const float *x, int64_t ldx,
                                                         const void *wv, const uint8_t *meta,
                                                         int64_t G, float *out, int mr, int wk) {
    if (wk == 0) { KERN__SP24_SM_CASES(KERN__SP24_SMF_AVX512, x, ldx, wv, meta, G, out, 0) }
    else if (wk == 1) { KERN__SP24_SM_CASES(KERN__SP24_SMF_AVX512, x, ldx, wv, meta, G, out, 1) }
    else { KERN__SP24_SM_CASES(KERN__SP24_SMF_AVX512, x, ldx, wv, meta, G, out, 2) }
}

/* vpshufb control of a group code c = (i0, i1): bytes 2i0, 2i0+1, 2i1, 2i1+1
 * of the broadcast 8-byte group, giving the bf16 pair (x[i0], x[i1]). */
#define KERN__SP24_SHUF(c)                                                    \
    (int)((2u * ((c) & 3u)) | ((2u * ((c) & 3u) + 1u) << 8) |                \
          ((2u * ((c) >> 2)) << 16) | ((2u * ((c) >> 2) + 1u) << 24))

/* Small-M bf16 kernel (vdpbf16ps): x bf16 with Kp columns readable. */
KERN_TARGET_AVX512BF16 KERN__SP24_INLINE void kern__sp24_sm_bf16_body__avx512(
    const uint16_t *x, int64_t ldx, const uint16_t *wv, const uint8_t *meta, int64_t G,
    float *out, const int MR) {
    __m512 a[16];
    const __m512i sel = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i sh = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i lut = _mm512_setr_epi32(
        KERN__SP24_SHUF(0u), KERN__SP24_SHUF(1u), KERN__SP24_SHUF(2u), KERN__SP24_SHUF(3u),
        KERN__SP24_SHUF(4u), KERN__SP24_SHUF(5u), KERN__SP24_SHUF(6u), KERN__SP24_SHUF(7u),
        KERN__SP24_SHUF(8u), KERN__SP24_SHUF(9u), KERN__SP24_SHUF(10u), KERN__SP24_SHUF(11u),
        KERN__SP24_SHUF(12u), KERN__SP24_SHUF(13u), KERN__SP24_SHUF(14u), KERN__SP24_SHUF(15u));
    int64_t g;
    int m;
    KERN__SP24_UNROLL
    for (m = 0; m < MR; m++) a[m] = _mm512_setzero_ps();
    for (g = 0; g < G; g++) {
        __m512i wp = _mm512_loadu_si512((const void *)(wv + g * 32));
        _mm_prefetch((const char *)(wv + (g + 24) * 32), _MM_HINT_T0);
        if ((g & 7) == 0) _mm_prefetch((const char *)(meta + (g + 24) * 8), _MM_HINT_T0);
        __m512i c = _mm512_srlv_epi32(
            _mm512_permutexvar_epi32(sel, _mm512_castsi128_si512(
                                              _mm_loadl_epi64((const __m128i *)(meta + g * 8)))),
            sh);
        __m512i ctl = _mm512_permutexvar_epi32(c, lut);
        KERN__SP24_UNROLL
        for (m = 0; m < MR; m++) {
            long long q;
            memcpy(&q, x + m * ldx + 4 * g, 8);
            a[m] = _mm512_dpbf16_ps(a[m], (__m512bh)wp,
                                    (__m512bh)_mm512_shuffle_epi8(_mm512_set1_epi64(q), ctl));
        }
    }
    KERN__SP24_UNROLL
    for (m = 0; m < MR; m++) _mm512_storeu_ps(out + 16 * m, a[m]);
}
#define KERN__SP24_SMB_AVX512(x, ldx, wv, meta, G, out, MR)                   \
    kern__sp24_sm_bf16_body__avx512(x, ldx, wv, meta, G, out, MR)
KERN_TARGET_AVX512BF16 static void kern__sp24_sm_bf16__avx512(const uint16_t *x, int64_t ldx,
                                                              const uint16_t *wv,
                                                              const uint8_t *meta, int64_t G,
                                                              float *out, int mr) {
    KERN__SP24_SM_CASES(KERN__SP24_SMB_AVX512, x, ldx, wv, meta, G, out)
}

/* 16 x 16 f32 transpose in registers: lane j of r[i] -> lane i of r[j]. */
KERN_TARGET_AVX512 KERN__SP24_INLINE void kern__sp24_tr16__avx512(__m512 *r) {
    __m512 t[16], u[16];
    int i, c;
    KERN__SP24_UNROLL
    for (i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4q + c]: column c (+4 per 128-bit lane) of rows 4q..4q+3 */
    KERN__SP24_UNROLL
    for (i = 0; i < 4; i++) {
        u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    /* 4 x 4 transpose of 128-bit lanes */
    KERN__SP24_UNROLL
    for (c = 0; c < 4; c++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);
        __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
        __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
        __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
        r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        r[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}

/* Large-M epilogue on AVX-512: acc[j * ld + i] (channel j, row i; ld a
 * multiple of 16 with all 16 channel rows readable) transposed in 16 x 16
 * blocks in registers, scaled as kern__sp24_store scales, then stored by
 * kern_base.h's epilogue (bitwise the store of the other paths). */
KERN_TARGET_AVX512 static void kern__sp24_epi_lm__avx512(const kern__sp24_job *J, int64_t m0,
                                                        int mc, int64_t n0, int nc,
                                                        const float *acc, int64_t ld) {
    const float *scales = J->sw->scales;
    const __m512 sc = scales ? _mm512_loadu_ps(scales + n0) : _mm512_set1_ps(1.0f);
    float tb[16 * 16];
    int i0, i, j;
    for (i0 = 0; i0 < mc; i0 += 16) {
        __m512 r[16];
        int ie = mc - i0 < 16 ? mc - i0 : 16;
        KERN__SP24_UNROLL
        for (j = 0; j < 16; j++) r[j] = _mm512_loadu_ps(acc + j * ld + i0);
        kern__sp24_tr16__avx512(r);
        for (i = 0; i < ie; i++) _mm512_storeu_ps(tb + i * 16, scales ? _mm512_mul_ps(r[i], sc) : r[i]);
        kern__v_epi_tile__avx512(&J->epi, m0 + i0, n0, tb, 16, ie, nc);
    }
}

/* Phase 1 of the large-M path on AVX-512 (see kern__sp24_task_pack_xt):
 * 16 x 16 blocks of x (rows past M and columns past K read as zero)
 * transposed in registers. bf16 x is widened exactly (bf16 << 16). */
KERN_TARGET_AVX512 static void kern__sp24_pack_xt__avx512(const kern__sp24_job *J, int64_t ms) {
    float *xt = (float *)J->xp + ms * J->xp_stride;
    const int64_t m0 = ms * J->mr;
    const int mr = J->mr;
    int64_t kb;
    int ib, i;
    for (ib = 0; ib < mr; ib += 16)
        for (kb = 0; kb < J->Kp; kb += 16) {
            __m512 r[16];
            int64_t kv = J->K - kb < 16 ? J->K - kb : 16;
            const __mmask16 km = (__mmask16)((1u << (unsigned)kv) - 1u);
            KERN__SP24_UNROLL
            for (i = 0; i < 16; i++) {
                int64_t m = m0 + ib + i;
                if (m < J->M) {
                    if (J->xdt == KERN_F32)
                        r[i] = _mm512_maskz_loadu_ps(km, (const float *)J->x + m * J->ldx + kb);
                    else
                        r[i] = _mm512_castsi512_ps(_mm512_slli_epi32(
                            _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(
                                km, (const uint16_t *)J->x + m * J->ldx + kb)),
                            16));
                } else {
                    r[i] = _mm512_setzero_ps();
                }
            }
            kern__sp24_tr16__avx512(r);
            KERN__SP24_UNROLL
            for (i = 0; i < 16; i++)
                if (kb + i < J->Kp) _mm512_store_ps(xt + (kb + i) * mr + ib, r[i]);
        }
}

/* bf16 pair panel on AVX-512 (see kern__sp24_task_pack_xt6): 16 rows x 16
 * k transposed as 32-bit words (bf16 in the low half), then each slot is
 * lo | hi << 16. */
KERN_TARGET_AVX512 static void kern__sp24_pack_xt6__avx512(const kern__sp24_job *J, int64_t ms) {
    uint32_t *xt6 = (uint32_t *)J->xp + ms * J->xp_stride;
    const int64_t m0 = ms * 64;
    int64_t kb;
    int ib, i, q;
    for (ib = 0; ib < 64; ib += 16)
        for (kb = 0; kb < J->Kp; kb += 16) {
            __m512 r[16];
            int64_t kv = J->K - kb < 16 ? J->K - kb : 16;
            const __mmask16 km = (__mmask16)((1u << (unsigned)kv) - 1u);
            KERN__SP24_UNROLL
            for (i = 0; i < 16; i++) {
                int64_t m = m0 + ib + i;
                r[i] = m < J->M ? _mm512_castsi512_ps(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(
                                      km, (const uint16_t *)J->x + m * J->ldx + kb)))
                                : _mm512_setzero_ps();
            }
            kern__sp24_tr16__avx512(r);
            for (q = 0; q < 4 && kb + 4 * q < J->Kp; q++) {
                uint32_t *d = xt6 + ((kb / 4 + q) * KERN__SP24_NSLOT) * 64 + ib;
                __m512i e0 = _mm512_castps_si512(r[4 * q]), e1 = _mm512_castps_si512(r[4 * q + 1]);
                __m512i e2 = _mm512_castps_si512(r[4 * q + 2]), e3 = _mm512_castps_si512(r[4 * q + 3]);
                /* slot = code - 4, code = i0 | i1 << 2 */
                _mm512_store_si512((void *)(d + 0 * 64), _mm512_or_si512(e0, _mm512_slli_epi32(e1, 16)));
                _mm512_store_si512((void *)(d + 4 * 64), _mm512_or_si512(e0, _mm512_slli_epi32(e2, 16)));
                _mm512_store_si512((void *)(d + 5 * 64), _mm512_or_si512(e1, _mm512_slli_epi32(e2, 16)));
                _mm512_store_si512((void *)(d + 8 * 64), _mm512_or_si512(e0, _mm512_slli_epi32(e3, 16)));
                _mm512_store_si512((void *)(d + 9 * 64), _mm512_or_si512(e1, _mm512_slli_epi32(e3, 16)));
                _mm512_store_si512((void *)(d + 10 * 64), _mm512_or_si512(e2, _mm512_slli_epi32(e3, 16)));
            }
        }
}

/* ------------------------------------------------------ AVX2 kernels */

/* Large-M f32 microkernel on AVX2: rows l, l+1; NV ymm (xt rows of 32). */
KERN_TARGET_AVX2 KERN__SP24_INLINE void kern__sp24_lm_f32_body__avx2(
    const float *xt, const float *w, const uint8_t *meta, int ng, int l, float *y0,
    float *y1, int first, const int NV) {
    __m256 a[4], b[4];
    int g, v;
    KERN__SP24_UNROLL
    for (v = 0; v < NV; v++) {
        a[v] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y0 + 8 * v);
        b[v] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y1 + 8 * v);
    }
    for (g = 0; g < ng; g++) {
        unsigned c = meta[g * 8 + (l >> 1)];
        const float *xg = xt + g * 128;
        const float *p00 = xg + (c & 3u) * 32, *p01 = xg + ((c >> 2) & 3u) * 32;
        const float *p10 = xg + ((c >> 4) & 3u) * 32, *p11 = xg + (c >> 6) * 32;
        __m256 s0 = _mm256_broadcast_ss(w + g * 32 + l), s1 = _mm256_broadcast_ss(w + g * 32 + 16 + l);
        __m256 t0 = _mm256_broadcast_ss(w + g * 32 + l + 1), t1 = _mm256_broadcast_ss(w + g * 32 + 17 + l);
        KERN__SP24_UNROLL
        for (v = 0; v < NV; v++) {
            a[v] = _mm256_fmadd_ps(s0, _mm256_load_ps(p00 + 8 * v), a[v]);
            b[v] = _mm256_fmadd_ps(t0, _mm256_load_ps(p10 + 8 * v), b[v]);
        }
        KERN__SP24_UNROLL
        for (v = 0; v < NV; v++) {
            a[v] = _mm256_fmadd_ps(s1, _mm256_load_ps(p01 + 8 * v), a[v]);
            b[v] = _mm256_fmadd_ps(t1, _mm256_load_ps(p11 + 8 * v), b[v]);
        }
    }
    KERN__SP24_UNROLL
    for (v = 0; v < NV; v++) {
        _mm256_storeu_ps(y0 + 8 * v, a[v]);
        _mm256_storeu_ps(y1 + 8 * v, b[v]);
    }
}
KERN_TARGET_AVX2 static void kern__sp24_lm_f32__avx2(const float *xt, const float *w,
                                                     const uint8_t *meta, int ng, int l,
                                                     float *y0, float *y1, int first, int nv) {
    switch (nv) {
    case 1: kern__sp24_lm_f32_body__avx2(xt, w, meta, ng, l, y0, y1, first, 1); break;
    case 2: kern__sp24_lm_f32_body__avx2(xt, w, meta, ng, l, y0, y1, first, 2); break;
    case 3: kern__sp24_lm_f32_body__avx2(xt, w, meta, ng, l, y0, y1, first, 3); break;
    default: kern__sp24_lm_f32_body__avx2(xt, w, meta, ng, l, y0, y1, first, 4); break;
    }
}

/* Small-M f32 kernel on AVX2: one half tile (8 channels, h = 0/1), MR <= 8
 * rows. WK as the AVX-512 kernel. out: [MR][16] at lanes 8h..8h+7. */
KERN_TARGET_AVX2 KERN__SP24_INLINE void kern__sp24_sm_f32_body__avx2(
    const float *x, int64_t ldx, const void *wv, const uint8_t *meta, int64_t G, float *out,
    int h, const int MR, const int WK) {
    __m256 a[8];
    const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    int64_t g;
    int m;
    KERN__SP24_UNROLL
    for (m = 0; m < MR; m++) a[m] = _mm256_setzero_ps();
    for (g = 0; g < G; g++) {
        __m256 w0, w1;
        __m256i c0, c1;
        uint32_t mw;
        if (WK == 0) {
            const float *wp = (const float *)wv + g * 32 + 8 * h;
            w0 = _mm256_loadu_ps(wp);
            w1 = _mm256_loadu_ps(wp + 16);
        } else if (WK == 1) {
            __m256i d = _mm256_loadu_si256((const __m256i *)((const uint16_t *)wv + g * 32 + 16 * h));
            w0 = _mm256_castsi256_ps(_mm256_slli_epi32(d, 16));
            w1 = _mm256_castsi256_ps(_mm256_and_si256(d, _mm256_set1_epi32((int)0xffff0000u)));
        } else {
            const int8_t *wp = (const int8_t *)wv + g * 32 + 8 * h;
            w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)wp)));
            w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(wp + 16))));
        }
        memcpy(&mw, meta + g * 8 + 4 * h, 4);
        c0 = _mm256_srlv_epi32(_mm256_set1_epi32((int)mw), sh);
        c1 = _mm256_srli_epi32(c0, 2);
        KERN__SP24_UNROLL
        for (m = 0; m < MR; m++) {
            __m256 xb = _mm256_broadcast_ps((const __m128 *)(x + m * ldx + 4 * g));
            a[m] = _mm256_fmadd_ps(w0, _mm256_permutevar_ps(xb, c0), a[m]);
            a[m] = _mm256_fmadd_ps(w1, _mm256_permutevar_ps(xb, c1), a[m]);
        }
    }
    KERN__SP24_UNROLL
    for (m = 0; m < MR; m++) _mm256_storeu_ps(out + 16 * m + 8 * h, a[m]);
}
#define KERN__SP24_SMF_AVX2(x, ldx, wv, meta, G, out, h, wk, MR)              \
    kern__sp24_sm_f32_body__avx2(x, ldx, wv, meta, G, out, h, MR, wk)
#define KERN__SP24_SM_CASES8(BODY, ...)                                       \
    switch (mr) {                                                             \
    case 1: BODY(__VA_ARGS__, 1); break; case 2: BODY(__VA_ARGS__, 2); break; \
    case 3: BODY(__VA_ARGS__, 3); break; case 4: BODY(__VA_ARGS__, 4); break; \
    case 5: BODY(__VA_ARGS__, 5); break; case 6: BODY(__VA_ARGS__, 6); break; \
    case 7: BODY(__VA_ARGS__, 7); break; default: BODY(__VA_ARGS__, 8); break; \
    }
KERN_TARGET_AVX2 static void kern__sp24_sm_f32__avx2(const float *x, int64_t ldx,
                                                     const void *wv, const uint8_t *meta,
                                                     int64_t G, float *out, int mr, int wk) {
    int h;
    for (h = 0; h < 2; h++) {
        if (wk == 0) { KERN__SP24_SM_CASES8(KERN__SP24_SMF_AVX2, x, ldx, wv, meta, G, out, h, 0) }
        else if (wk == 1) { KERN__SP24_SM_CASES8(KERN__SP24_SMF_AVX2, x, ldx, wv, meta, G, out, h, 1) }
        else { KERN__SP24_SM_CASES8(KERN__SP24_SMF_AVX2, x, ldx, wv, meta, G, out, h, 2) }
    }
}
#endif /* KERN_X86 */

/* ------------------------------------------------------ NEON kernel */
#ifdef KERN_NEON
/* Small-M style kernel for f32 weights, any M (chunks of <= 8 rows): per
 * group, the 16 bytes of x[m, 4g..4g+3] are a table and vqtbl1q_u8 picks
 * each lane's kept activation. out: [mr][16]. */
static void kern__sp24_sm_f32__neon(const float *x, int64_t ldx, const void *wvp,
                                    const uint8_t *meta, int64_t G, float *out, int mr, int wk) {
    const float *wv = (const float *)wvp; /* f32 weights only (wk 0) */
    float32x4_t a[8][4];
    int64_t g;
    int m, q, l;
    (void)wk;
    for (m = 0; m < mr; m++)
        for (q = 0; q < 4; q++) a[m][q] = vdupq_n_f32(0.0f);
    for (g = 0; g < G; g++) {
        uint8_t c0b[16][4], c1b[16][4];
        for (l = 0; l < 16; l++) {
            unsigned c = (meta[g * 8 + (l >> 1)] >> ((l & 1) * 4)) & 15u;
            unsigned i0 = c & 3u, i1 = c >> 2;
            for (q = 0; q < 4; q++) {
                c0b[l][q] = (uint8_t)(4 * i0 + q);
                c1b[l][q] = (uint8_t)(4 * i1 + q);
            }
        }
        for (q = 0; q < 4; q++) {
            float32x4_t w0 = vld1q_f32(wv + g * 32 + 4 * q), w1 = vld1q_f32(wv + g * 32 + 16 + 4 * q);
            uint8x16_t t0 = vld1q_u8(&c0b[4 * q][0]), t1 = vld1q_u8(&c1b[4 * q][0]);
            for (m = 0; m < mr; m++) {
                uint8x16_t xb = vreinterpretq_u8_f32(vld1q_f32(x + m * ldx + 4 * g));
                a[m][q] = vfmaq_f32(a[m][q], w0, vreinterpretq_f32_u8(vqtbl1q_u8(xb, t0)));
                a[m][q] = vfmaq_f32(a[m][q], w1, vreinterpretq_f32_u8(vqtbl1q_u8(xb, t1)));
            }
        }
    }
    for (m = 0; m < mr; m++)
        for (q = 0; q < 4; q++) vst1q_f32(out + 16 * m + 4 * q, a[m][q]);
}
#endif

/* ---------------------------------------------------- task drivers */

/* Small-M (and NEON) task: SM_NT tiles, all rows of x in chunks. */
static void kern__sp24_task_small(void *arg, int64_t task, int thread) {
    const kern__sp24_job *J = (const kern__sp24_job *)arg;
    const kern_sparse24 *sw = J->sw;
    const kern__sp24_fns *F = J->fns;
    float acc[16 * 16];
    int64_t t0 = task * KERN__SP24_SM_NT, t1 = t0 + KERN__SP24_SM_NT, t, m0;
    const int64_t G = J->G;
    int chunk = F->sm_chunk;
    int wk = sw->dtype == KERN_F32 ? 0 : sw->dtype == KERN_BF16 ? 1 : 2;
    size_t es = kern_dtype_size(sw->dtype);
    (void)thread;
    if (t1 > sw->n_tiles) t1 = sw->n_tiles;
    for (t = t0; t < t1; t++) {
        int64_t nc = J->N - t * 16 < 16 ? J->N - t * 16 : 16;
        const uint8_t *mt = sw->meta + t * G * 8;
        for (m0 = 0; m0 < J->M; m0 += chunk) {
            int mr = (int)(J->M - m0 < chunk ? J->M - m0 : chunk);
            if (J->bf16dot)
                F->sm_bf16((const uint16_t *)J->xs + m0 * J->ldxs, J->ldxs,
                           (const uint16_t *)sw->values + t * G * 32, mt, G, acc, mr);
            else
                F->sm_f32((const float *)J->xs + m0 * J->ldxs, J->ldxs,
                          (const char *)sw->values + t * G * 32 * (int64_t)es, mt, G, acc, mr, wk);
            kern__sp24_store(J, m0, mr, t * 16, (int)nc, acc, 16);
        }
    }
}

#ifdef KERN_X86
/* Converts tile values of groups [g0, g0+ng) of tiles [t0, t1) to f32
 * [tile][ng][2][16] (for weights the f32 kernels cannot read directly). */
static void kern__sp24_slab_f32(const kern_sparse24 *sw, int64_t G, int64_t t0, int64_t t1,
                                int64_t g0, int ng, float *dst) {
    int64_t t;
    int g, l;
    for (t = t0; t < t1; t++)
        for (g = 0; g < ng; g++) {
            int64_t tg = t * G + g0 + g;
            float *d = dst + ((t - t0) * ng + g) * 32;
            if (sw->dtype == KERN_BF16) {
                const uint16_t *s = (const uint16_t *)sw->values + tg * 32;
                for (l = 0; l < 16; l++) {
                    d[l] = kern__bits_f32((uint32_t)s[2 * l] << 16);
                    d[16 + l] = kern__bits_f32((uint32_t)s[2 * l + 1] << 16);
                }
            } else {
                const int8_t *s = (const int8_t *)sw->values + tg * 32;
                for (l = 0; l < 32; l++) d[l] = (float)s[l];
            }
        }
}

/* Phase 1 of the large-M path, one task per sliver of mr rows: x rows
 * [m0, m0+mr) transposed into the panel xp[k][mr] (f32, k < Kp), zero past
 * M and K. Done once per call, so the compute tasks read L1/L2-resident
 * panels without repacking (the cost is M*K element moves, 2/N of the
 * multiply-adds). The vector tables transpose in registers
 * (kern__sp24_pack_xt__avx512, __avx2); this portable one is the reference
 * the tests hold them to. */
static inline void kern__sp24_pack_xt__ref(const kern__sp24_job *J, int64_t ms) {
    float *xt = (float *)J->xp + ms * J->xp_stride;
    int64_t m0 = ms * J->mr, k, kb;
    int mr = J->mr, i, ib;
    size_t xes = kern_dtype_size(J->xdt);
    /* 16 x 16 blocks: each block touches 16 source and 16 panel lines */
    for (ib = 0; ib < mr; ib += 16)
        for (kb = 0; kb < J->Kp; kb += 16) {
            int64_t ke = kb + 16 < J->Kp ? kb + 16 : J->Kp;
            for (i = ib; i < ib + 16; i++) {
                if (m0 + i < J->M) {
                    const char *xr = J->x + (m0 + i) * J->ldx * (int64_t)xes;
                    int64_t kv = ke < J->K ? ke : J->K;
                    if (J->xdt == KERN_F32) {
                        const float *xf = (const float *)xr;
                        for (k = kb; k < kv; k++) xt[k * mr + i] = xf[k];
                    } else {
                        const uint16_t *xb = (const uint16_t *)xr;
                        for (k = kb; k < kv; k++) xt[k * mr + i] = kern__bits_f32((uint32_t)xb[k] << 16);
                    }
                    for (k = kv > kb ? kv : kb; k < ke; k++) xt[k * mr + i] = 0.0f;
                } else {
                    for (k = kb; k < ke; k++) xt[k * mr + i] = 0.0f;
                }
            }
        }
}
static void kern__sp24_task_pack_xt(void *arg, int64_t ms, int thread) {
    const kern__sp24_job *J = (const kern__sp24_job *)arg;
    (void)thread;
    J->fns->pack_xt(J, ms);
}
/* The bf16 pair panel of the vdpbf16ps kernels (kern__sp24_pack_xt6__avx512). */
static void kern__sp24_task_pack_xt6(void *arg, int64_t ms, int thread) {
    const kern__sp24_job *J = (const kern__sp24_job *)arg;
    (void)thread;
    J->fns->pack_xt6(J, ms);
}

/* Phase 2 of the large-M path: one sliver of mr rows x nt tiles. */
static void kern__sp24_task_large(void *arg, int64_t task, int thread) {
    const kern__sp24_job *J = (const kern__sp24_job *)arg;
    const kern_sparse24 *sw = J->sw;
    char *scr = (char *)kern__thread_scratch(J->ctx, thread);
    float *yt = (float *)scr;
    float *wslab = (float *)(scr + J->scratch_yt);
    int64_t nchunk = task / J->n_ms, ms = task % J->n_ms;
    int64_t m0 = ms * J->mr;
    int mc = (int)(J->M - m0 < J->mr ? J->M - m0 : J->mr);
    const kern__sp24_fns *F = J->fns;
    int vec = F->lm_vec;
    int nv = (mc + vec - 1) / vec;
    int64_t t0 = nchunk * J->nt, t1 = t0 + J->nt, t, g0;
    const int64_t G = J->G;
    int conv = !J->bf16dot && sw->dtype != KERN_F32;
    size_t es = kern_dtype_size(sw->dtype);
    const int KG = J->bf16dot ? KERN__SP24_LM_KG_BF16 : KERN__SP24_LM_KG;
    if (t1 > sw->n_tiles) t1 = sw->n_tiles;
    for (g0 = 0; g0 < G; g0 += KG) {
        int ng = (int)(G - g0 < KG ? G - g0 : KG);
        int first = g0 == 0;
        const void *xt = J->bf16dot
                             ? (const void *)((const uint32_t *)J->xp + ms * J->xp_stride + g0 * KERN__SP24_NSLOT * 64)
                             : (const void *)((const float *)J->xp + ms * J->xp_stride + g0 * 4 * J->mr);
        if (conv) kern__sp24_slab_f32(sw, G, t0, t1, g0, ng, wslab);
        for (t = t0; t < t1; t++) {
            const uint8_t *mt = sw->meta + (t * G + g0) * 8;
            float *yb = yt + (t - t0) * 16 * J->mr;
            /* next tile's block (the current one for the last tile) */
            const char *nxt = (const char *)sw->values +
                              ((t + 1 < t1 ? t + 1 : t) * G + g0) * 32 * (int64_t)es;
            const int64_t quarter = (int64_t)ng * 8 * (int64_t)es;
            if (F->lm_pf512 && KERN__SP24_PANEL_PF && g0 + KG < G) {
                /* the next block's x panel (the sliver's panel is larger than
                 * L2 at K = 4096) into L2, a slice per tile */
                const int64_t gn = G - g0 - KG < KG ? G - g0 - KG : KG;
                const char *np = J->bf16dot
                    ? (const char *)((const uint32_t *)J->xp + ms * J->xp_stride + (g0 + KG) * KERN__SP24_NSLOT * 64)
                    : (const char *)((const float *)J->xp + ms * J->xp_stride + (g0 + KG) * 4 * J->mr);
                const int64_t nb = gn * (J->bf16dot ? KERN__SP24_NSLOT * 64 * 4 : 4 * (int64_t)J->mr * 4);
                const int64_t per = (nb / 64 + (t1 - t0) - 1) / (t1 - t0);
                int64_t b;
                for (b = (t - t0) * per * 64; b < (t - t0 + 1) * per * 64 && b < nb; b += 64)
                    _mm_prefetch(np + b, _MM_HINT_T1);
            }
            if (F->lm_pf512) {
                /* values: spread over the kernel calls; meta: 2 lines here */
                const char *nm_ = (const char *)(sw->meta + ((t + 1 < t1 ? t + 1 : t) * G + g0) * 8);
                _mm_prefetch(nm_, _MM_HINT_T0);
                _mm_prefetch(nm_ + 64, _MM_HINT_T0);
            } else if (t + 1 < t1) {
                /* the next tile's block sits G*32 elements away: too far for
                 * the hardware prefetcher, so fetch it while this one runs */
                const char *nv_ = (const char *)sw->values + ((t + 1) * G + g0) * 32 * (int64_t)es;
                const char *nm_ = (const char *)(sw->meta + ((t + 1) * G + g0) * 8);
                int64_t b;
                for (b = 0; b < (int64_t)ng * 32 * (int64_t)es; b += 64) _mm_prefetch(nv_ + b, _MM_HINT_T0);
                for (b = 0; b < (int64_t)ng * 8; b += 64) _mm_prefetch(nm_ + b, _MM_HINT_T0);
            }
            if (J->bf16dot)
                F->lm_bf16(xt, (const uint16_t *)sw->values + (t * G + g0) * 32, mt, ng, yb, J->mr,
                           first, nxt, quarter, nv);
            else
                F->lm_f32(xt, conv ? wslab + (t - t0) * ng * 32 : (const float *)sw->values + (t * G + g0) * 32,
                          mt, ng, yb, J->mr, first, nxt, quarter, nv);
        }
    }
    for (t = t0; t < t1; t++) {
        int64_t nc = J->N - t * 16 < 16 ? J->N - t * 16 : 16;
        F->epi_lm(J, m0, mc, t * 16, (int)nc, yt + (t - t0) * 16 * J->mr, J->mr);
    }
}

/* The large-M microkernels over a whole tile: 4 rows per call on AVX-512
 * (weights broadcast from one 16-byte load), 2 on AVX2. */
KERN_TARGET_AVX512 static void kern__sp24_lm_tile_f32__avx512(const void *xt, const void *wt,
                                                              const uint8_t *mt, int ng, float *yb,
                                                              int64_t ld, int first, const char *nxt,
                                                              int64_t quarter, int nv) {
    int l;
    for (l = 0; l < 16; l += 4)
        kern__sp24_lm_f32__avx512((const float *)xt, (const float *)wt, mt, ng, l, yb + l * ld, first,
                                  nxt + (l / 4) * quarter, nv);
}
KERN_TARGET_AVX512BF16 static void kern__sp24_lm_tile_bf16__avx512(const void *xt, const void *wt,
                                                                   const uint8_t *mt, int ng,
                                                                   float *yb, int64_t ld, int first,
                                                                   const char *nxt, int64_t quarter,
                                                                   int nv) {
    int l;
    for (l = 0; l < 16; l += 4)
        kern__sp24_lm_bf16__avx512((const uint32_t *)xt, (const uint16_t *)wt, mt, ng, l, yb + l * ld,
                                   first, nxt + (l / 4) * quarter, nv);
}
KERN_TARGET_AVX2 static void kern__sp24_lm_tile_f32__avx2(const void *xt, const void *wt,
                                                          const uint8_t *mt, int ng, float *yb,
                                                          int64_t ld, int first, const char *nxt,
                                                          int64_t quarter, int nv) {
    int l;
    (void)nxt;
    (void)quarter;
    for (l = 0; l < 16; l += 2)
        kern__sp24_lm_f32__avx2((const float *)xt, (const float *)wt, mt, ng, l, yb + l * ld,
                                yb + (l + 1) * ld, first, nv);
}
/* The large-M epilogue in plain C: acc[j * ld + i] (channel j, row i)
 * transposed 16 rows at a time (the reference of the vector ones). */
static inline void kern__sp24_epi_lm__ref(const kern__sp24_job *J, int64_t m0, int mc, int64_t n0, int nc,
                                   const float *acc, int64_t ld) {
    float tb[16 * 16];
    int i0, i, j;
    for (i0 = 0; i0 < mc; i0 += 16) {
        int ie = mc - i0 < 16 ? mc - i0 : 16;
        for (i = 0; i < ie; i++)
            for (j = 0; j < nc; j++) tb[i * 16 + j] = acc[j * ld + i0 + i];
        kern__sp24_store(J, m0 + i0, ie, n0, nc, tb, 16);
    }
}

/* Phase 1 of the large-M path on AVX2 (see kern__sp24_task_pack_xt): 8 x 8
 * blocks of x (rows past M and columns past K read as zero; bf16 widened
 * exactly, bf16 << 16) transposed in registers. The same panel as
 * kern__sp24_pack_xt__ref, which moved one float at a time (Zen 3, 4096 x
 * 3072 x 768: 3 % of the op). */
KERN_TARGET_AVX2 static void kern__sp24_pack_xt__avx2(const kern__sp24_job *J, int64_t ms) {
    float *xt = (float *)J->xp + ms * J->xp_stride;
    const int64_t m0 = ms * J->mr;
    const int mr = J->mr;
    int64_t kb;
    int ib, i, q;
    for (ib = 0; ib < mr; ib += 8)
        for (kb = 0; kb < J->Kp; kb += 8) {
            __m256 r[8];
            const int kv = J->K - kb < 8 ? (int)(J->K - kb > 0 ? J->K - kb : 0) : 8;
            const int kq = J->Kp - kb < 8 ? (int)(J->Kp - kb) : 8;
            for (i = 0; i < 8; i++) {
                const int64_t m = m0 + ib + i;
                if (m >= J->M || kv == 0) {
                    r[i] = _mm256_setzero_ps();
                } else if (J->xdt == KERN_F32) {
                    const float *xr = (const float *)(const void *)J->x + m * J->ldx + kb;
                    r[i] = kv == 8 ? _mm256_loadu_ps(xr) : kern__loadn__avx2(xr, kv);
                } else {
                    const uint16_t *xr = (const uint16_t *)(const void *)J->x + m * J->ldx + kb;
                    __m128i h;
                    if (kv == 8) {
                        h = _mm_loadu_si128((const __m128i *)(const void *)xr);
                    } else {
                        uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                        memcpy(tmp, xr, (size_t)kv * 2);
                        h = _mm_loadu_si128((const __m128i *)(const void *)tmp);
                    }
                    r[i] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
                }
            }
            kern__v_tr8__avx2(r);
            for (q = 0; q < kq; q++) _mm256_storeu_ps(xt + (kb + q) * mr + ib, r[q]);
        }
}
/* The large-M epilogue on AVX2: acc[j * ld + i] (channel j, row i; 16
 * channel rows and rows up to a multiple of 8 readable) transposed in 8 x
 * 8 blocks in registers, scaled as kern__sp24_store scales (the scales are
 * padded to whole tiles), then stored by kern_base.h's epilogue: the bits
 * of kern__sp24_epi_lm__ref. */
KERN_TARGET_AVX2 static void kern__sp24_epi_lm__avx2(const kern__sp24_job *J, int64_t m0, int mc,
                                                    int64_t n0, int nc, const float *acc,
                                                    int64_t ld) {
    const float *scales = J->sw->scales;
    float tb[8 * 16];
    int i0, i, j, h;
    for (i0 = 0; i0 < mc; i0 += 8) {
        const int ie = mc - i0 < 8 ? mc - i0 : 8;
        for (h = 0; h < 16 && h < nc; h += 8) {
            __m256 r[8];
            for (j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(acc + (h + j) * ld + i0);
            kern__v_tr8__avx2(r);
            if (scales) {
                const __m256 sc = _mm256_loadu_ps(scales + n0 + h);
                for (i = 0; i < ie; i++) r[i] = kern__mul__avx2(r[i], sc);
            }
            for (i = 0; i < ie; i++) _mm256_storeu_ps(tb + i * 16 + h, r[i]);
        }
        kern__v_epi_tile__avx2(&J->epi, m0 + i0, n0, tb, 16, ie, nc);
    }
}

static const kern__sp24_fns kern__sp24_fns_avx2 = {
    "avx2", 8, kern__sp24_sm_f32__avx2, NULL, 32, 8, 0, kern__sp24_lm_tile_f32__avx2, NULL,
    kern__sp24_pack_xt__avx2, NULL, kern__sp24_epi_lm__avx2, kern__v_epi_tile__avx2};
static const kern__sp24_fns kern__sp24_fns_avx512 = {
    "avx512", 16, kern__sp24_sm_f32__avx512, NULL, 64, 16, 1, kern__sp24_lm_tile_f32__avx512, NULL,
    kern__sp24_pack_xt__avx512, NULL, kern__sp24_epi_lm__avx512, kern__v_epi_tile__avx512};
static const kern__sp24_fns kern__sp24_fns_avx512bf16 = {
    "avx512bf16", 16, kern__sp24_sm_f32__avx512, kern__sp24_sm_bf16__avx512, 64, 16, 1,
    kern__sp24_lm_tile_f32__avx512, kern__sp24_lm_tile_bf16__avx512, kern__sp24_pack_xt__avx512,
    kern__sp24_pack_xt6__avx512, kern__sp24_epi_lm__avx512, kern__v_epi_tile__avx512};
#endif /* KERN_X86 */

static const kern__sp24_fns kern__sp24_fns_scalar = {
    "scalar", 0, NULL, NULL, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, kern__s_epi_tile};
#ifdef KERN_NEON
static const kern__sp24_fns kern__sp24_fns_neon = {
    "neon", 8, kern__sp24_sm_f32__neon, NULL, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,
    kern__v_epi_tile__neon};
#endif

/* The table of level isa for weights of dtype wdt. */
static const kern__sp24_fns *kern__sp24_fns_for(kern_isa isa, kern_dtype wdt) {
    (void)wdt;
    switch (isa) {
#ifdef KERN_X86
    case KERN_ISA_AMX:
    case KERN_ISA_AVX512_BF16:
        return wdt == KERN_BF16 ? &kern__sp24_fns_avx512bf16 : &kern__sp24_fns_avx512;
    case KERN_ISA_AVX512_VNNI:
    case KERN_ISA_AVX512: return &kern__sp24_fns_avx512;
    case KERN_ISA_AVX2_VNNI:
    case KERN_ISA_AVX2: return &kern__sp24_fns_avx2;
#endif
#ifdef KERN_NEON
    case KERN_ISA_NEON_BF16:
    case KERN_ISA_NEON_DOT:
    case KERN_ISA_NEON: return wdt == KERN_F32 ? &kern__sp24_fns_neon : &kern__sp24_fns_scalar;
#endif
    default: return &kern__sp24_fns_scalar;
    }
}

static kern_status kern__sp24_check_rows(const kern_tensor *t, const char *op,
                                         const char *name, int64_t r, int64_t c) {
    kern_status s;
    if ((s = kern__sp24_check_2d(t, op, name))) return s;
    if (t->dtype != KERN_F32 && t->dtype != KERN_BF16)
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s (f32 or bf16)", op, name,
                         kern_dtype_name(t->dtype));
    if (t->shape[0] != r || t->shape[1] != c)
        return kern__err(KERN_ERR_SHAPE, "%s: %s.shape=[%lld,%lld], expected [%lld,%lld]", op,
                         name, (long long)t->shape[0], (long long)t->shape[1], (long long)r,
                         (long long)c);
    if (c > 1 && t->stride[1] != 1)
        return kern__err(KERN_ERR_LAYOUT, "%s: %s.stride[1]=%lld, rows must be contiguous", op,
                         name, (long long)t->stride[1]);
    return KERN_OK;
}

/* Validates kern_sparse24_linear's operands (writes nothing). */
static kern_status kern__sp24_linear_check(const char *op, const kern_tensor *x,
                                           const kern_sparse24 *sw, const kern_tensor *y,
                                           const kern_sparse24_linear_params *p) {
    const kern_tensor *bias = p ? p->epilogue.bias : NULL;
    const kern_tensor *res = p ? p->epilogue.residual : NULL;
    kern_status s;
    int64_t M, N, K;
    if ((s = kern__sp24_check_sw(sw, op))) return s;
    if (!x) return kern__err(KERN_ERR_ARG, "%s: x is NULL", op);
    if (!y) return kern__err(KERN_ERR_ARG, "%s: y is NULL", op);
    if ((s = kern__sp24_check_2d(x, op, "x"))) return s;
    M = x->shape[0];
    N = sw->n;
    K = sw->k;
    if (x->dtype != KERN_F32 && x->dtype != KERN_BF16)
        return kern__err(KERN_ERR_DTYPE, "%s: x.dtype=%s (f32 or bf16)", op,
                         kern_dtype_name(x->dtype));
    if (sw->dtype == KERN_F16 || (sw->dtype == KERN_F32 && x->dtype != KERN_F32) ||
        (sw->dtype == KERN_BF16 && x->dtype != KERN_BF16))
        return kern__err(KERN_ERR_DTYPE, "%s: x.dtype=%s with %s weights (f32 weights take "
                         "f32 x, bf16 weights bf16 x, i8 weights f32 or bf16 x; f16 "
                         "weights are storage only)", op, kern_dtype_name(x->dtype),
                         kern_dtype_name(sw->dtype));
    if (x->shape[1] != K)
        return kern__err(KERN_ERR_SHAPE, "%s: x.shape[1]=%lld but the weight has k=%lld", op,
                         (long long)x->shape[1], (long long)K);
    if ((s = kern__sp24_check_rows(x, op, "x", M, K))) return s;
    if ((s = kern__sp24_check_rows(y, op, "y", M, N))) return s;
    if ((s = kern__epilogue_check(p ? &p->epilogue : NULL, op, (1u << KERN_ACT_COUNT) - 1u, 1,
                                  1)))
        return s;
    if (bias) {
        if ((s = kern_tensor_check(bias, op, "bias"))) return s;
        if (bias->dtype != KERN_F32 && bias->dtype != KERN_BF16)
            return kern__err(KERN_ERR_DTYPE, "%s: bias.dtype=%s (f32 or bf16)", op,
                             kern_dtype_name(bias->dtype));
        if (bias->ndim != 1 || bias->shape[0] != (p->epilogue.bias_per_row ? M : N))
            return kern__err(KERN_ERR_SHAPE, "%s: bias must be [%lld]%s", op,
                             (long long)(p->epilogue.bias_per_row ? M : N),
                             p->epilogue.bias_per_row ? " (bias_per_row)" : "");
        if (kern_tensors_overlap(bias, y))
            return kern__err(KERN_ERR_ARG, "%s: y overlaps bias", op);
    }
    if (res) {
        if ((s = kern__sp24_check_rows(res, op, "residual", M, N))) return s;
        if (kern_tensors_overlap(res, y) &&
            !(res->data == y->data && res->dtype == y->dtype && res->stride[0] == y->stride[0]))
            return kern__err(KERN_ERR_ARG, "%s: residual partially overlaps y (only residual "
                             "== y is allowed)", op);
    }
    if (kern_tensors_overlap(x, y)) return kern__err(KERN_ERR_ARG, "%s: y overlaps x", op);
    if (kern__tensor_self_overlap(y))
        return kern__err(KERN_ERR_LAYOUT, "%s: y has overlapping elements (a zero or too small "
                         "stride); an output needs distinct elements", op);
    return KERN_OK;
}

/* How a call runs (chosen from the context, before any scratch is taken). */
typedef struct kern__sp24_lplan {
    int kind;          /* 0 scalar, 1 small-M (weight streaming), 2 large-M */
    int copy_x;        /* small-M: x is copied (converted, padded, de-aliased) */
    int64_t ldw;       /* small-M copy: row stride of the copy */
    kern_dtype want;   /* small-M: the dtype the small kernels read */
    int64_t n_tasks;
    size_t shared;     /* kern__workspace bytes */
    size_t thread;     /* kern__reserve_thread_scratch bytes */
} kern__sp24_lplan;

/* Fills J's path and blocking for ctx, and the plan with its scratch. */
static void kern__sp24_linear_plan(kern__sp24_job *J, kern_ctx *ctx, kern__sp24_lplan *L) {
    const kern_sparse24 *sw = J->sw;
    int64_t M = J->M, K = J->K;
    memset(L, 0, sizeof *L);
    J->fns = kern__sp24_fns_for(kern_ctx_isa(ctx), sw->dtype);
    J->bf16dot = J->fns->sm_bf16 != NULL && sw->dtype == KERN_BF16;
    if (!J->fns->sm_chunk) {
        L->kind = 0;
        L->n_tasks = (sw->n_tiles + KERN__SP24_SM_NT - 1) / KERN__SP24_SM_NT;
        L->thread = (size_t)J->Kp * sizeof(float);
    } else if (M <= KERN__SP24_SMALL_M || !J->fns->lm_mr) {
        /* x for the small kernels: f32 (bf16 for bf16dot) with Kp columns.
         * The kernels read all M rows at the same column: a row stride that
         * is a multiple of 1 KiB puts them in a few L1 sets (K = 4096: all in
         * one), so such an x is copied with one extra cache line per row */
        kern_dtype want = J->bf16dot ? KERN_BF16 : KERN_F32;
        int alias = M > 2 && (J->ldx * (int64_t)kern_dtype_size(want)) % 1024 == 0;
        L->kind = 1;
        L->want = want;
        L->n_tasks = (sw->n_tiles + KERN__SP24_SM_NT - 1) / KERN__SP24_SM_NT;
        L->ldw = J->Kp + (alias ? 64 / (int64_t)kern_dtype_size(want) : 0);
        L->copy_x = !(J->xdt == want && K % 4 == 0 && !alias);
        if (L->copy_x) L->shared = (size_t)(M * L->ldw) * kern_dtype_size(want);
    } else {
#ifdef KERN_X86
        int64_t n_nc, want_tasks = 4 * (int64_t)kern_ctx_threads(ctx);
        size_t slab;
        L->kind = 2;
        J->mr = J->fns->lm_mr;
        J->n_ms = (M + J->mr - 1) / J->mr;
        /* tiles per task: up to LM_NT, fewer when that leaves threads idle
         * (the split over n never changes the results) */
        J->nt = KERN__SP24_LM_NT;
        while (J->nt > 4 && J->n_ms * ((sw->n_tiles + J->nt - 1) / J->nt) < want_tasks)
            J->nt /= 2;
        n_nc = (sw->n_tiles + J->nt - 1) / J->nt;
        J->xp_stride = J->bf16dot ? J->G * KERN__SP24_NSLOT * 64 : J->Kp * J->mr;
        J->scratch_yt = (size_t)J->nt * 16 * (size_t)J->mr * sizeof(float);
        slab = (!J->bf16dot && sw->dtype != KERN_F32)
                   ? (size_t)J->nt * KERN__SP24_LM_KG * 32 * sizeof(float) : 0;
        L->n_tasks = n_nc * J->n_ms;
        L->shared = (size_t)(J->n_ms * J->xp_stride) * 4;
        L->thread = J->scratch_yt + slab;
#endif
    }
}

/* The job of a validated call (everything but the path). */
static void kern__sp24_linear_job(kern__sp24_job *J, const kern_tensor *x,
                                  const kern_sparse24 *sw, const kern_tensor *y,
                                  const kern_sparse24_linear_params *p, kern_ctx *ctx) {
    const kern_tensor *bias = p ? p->epilogue.bias : NULL;
    const kern_tensor *res = p ? p->epilogue.residual : NULL;
    memset(J, 0, sizeof *J);
    J->sw = sw;
    J->ctx = ctx;
    J->M = x->shape[0]; J->N = sw->n; J->K = sw->k; J->Kp = sw->k_padded; J->G = sw->k_padded / 4;
    J->x = (const char *)x->data; J->ldx = x->stride[0]; J->xdt = x->dtype;
    kern__epi_init(&J->epi);
    J->epi.dst = (char *)y->data;
    J->epi.dst_dt = y->dtype;
    J->epi.dst_rs = kern__epi_stride(y, 0);
    J->epi.dst_cs = 1;
    kern__epi_set_bias(&J->epi, bias, p ? p->epilogue.bias_per_row : 0);
    kern__epi_set_residual(&J->epi, res);
    if (p) {
        J->epi.act = p->epilogue.act;
        J->epi.out_scale = p->epilogue.out_scale != 0.0f ? p->epilogue.out_scale : 1.0f;
    }
}

KERN_API kern_status kern_sparse24_linear_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                                         const kern_sparse24 *sw,
                                                         const kern_tensor *y,
                                                         const kern_sparse24_linear_params *p,
                                                         size_t *bytes) {
    static const char *op = "kern_sparse24_linear_workspace_size";
    kern__sp24_job J;
    kern__sp24_lplan L;
    kern_status s;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if ((s = kern__sp24_linear_check(op, x, sw, y, p))) return s;
    if ((s = kern__op_begin(&ctx, op))) return s;
    *bytes = 0;
    if (x->shape[0] > 0) {
        kern__sp24_linear_job(&J, x, sw, y, p, ctx);
        kern__sp24_linear_plan(&J, ctx, &L);
        *bytes = kern__op_workspace_bytes(ctx, L.shared, L.thread);
    }
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_sparse24_linear(kern_ctx *ctx, const kern_tensor *x,
                                          const kern_sparse24 *sw, const kern_tensor *y,
                                          const kern_sparse24_linear_params *p) {
    static const char *op = "kern_sparse24_linear";
    kern__sp24_job J;
    kern__sp24_lplan L;
    kern_status s;
    if ((s = kern__sp24_linear_check(op, x, sw, y, p))) return s;
    if (x->shape[0] == 0) return KERN_OK;
    if ((s = kern__op_begin(&ctx, op))) return s;
    kern__sp24_linear_job(&J, x, sw, y, p, ctx);
    kern__sp24_linear_plan(&J, ctx, &L);
    s = kern__op_workspace(ctx, op, p ? p->workspace : NULL, p ? p->workspace_size : 0,
                           L.shared, L.thread);
    if (s) {
        kern__op_end(ctx);
        return s;
    }
    if (L.kind == 0) {
        s = kern__reserve_thread_scratch(ctx, L.thread);
        if (!s) s = kern_parallel_for(ctx, L.n_tasks, kern__sp24_task_scalar, &J);
    } else if (L.kind == 1) {
        if (!L.copy_x) {
            J.xs = x->data;
            J.ldxs = x->stride[0];
        } else {
            char *ws = (char *)kern__workspace(ctx, L.shared);
            int64_t m, k, ldw = L.ldw;
            if (!ws) {
                s = kern__err(KERN_ERR_NOMEM, "%s: cannot allocate the x workspace", op);
            } else {
                for (m = 0; m < J.M; m++) {
                    const char *xr = J.x + m * J.ldx * (int64_t)kern_dtype_size(J.xdt);
                    for (k = 0; k < J.Kp; k++) {
                        if (L.want == KERN_F32)
                            ((float *)ws)[m * ldw + k] =
                                k < J.K ? kern__sp24_tof(J.xdt, xr + k * (int64_t)kern_dtype_size(J.xdt)) : 0.0f;
                        else
                            ((uint16_t *)ws)[m * ldw + k] = k < J.K ? ((const uint16_t *)xr)[k] : (uint16_t)0;
                    }
                }
                J.xs = ws;
                J.ldxs = ldw;
            }
        }
        if (!s) s = kern_parallel_for(ctx, L.n_tasks, kern__sp24_task_small, &J);
    } else {
#ifdef KERN_X86
        J.xp = kern__workspace(ctx, L.shared);
        if (!J.xp)
            s = kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes for x panels", op,
                          L.shared);
        if (!s) s = kern__reserve_thread_scratch(ctx, L.thread);
        if (!s) s = kern_parallel_for(ctx, J.n_ms, J.bf16dot ? kern__sp24_task_pack_xt6
                                                              : kern__sp24_task_pack_xt, &J);
        if (!s) s = kern_parallel_for(ctx, L.n_tasks, kern__sp24_task_large, &J);
#endif
    }
    kern__op_end(ctx);
    return s;
}

#ifdef __cplusplus
}
#endif
KERN__IMPL_DIAG_END
#endif /* KERN_SPARSE24_IMPLEMENTATION */
