/* kern_norm.h — fused residual add + LayerNorm / RMSNorm + affine +
 * activation, forward and backward; the activation ops alone (every
 * kern_act, with an optional bias), their backward, and the add alone.
 * Part of kern, an embeddable header-only C kernel library.
 *
 * WHAT IT COMPUTES
 *   kern_norm:           out = act(norm(x + residual) * weight + bias)
 *                        over the last dim H, in one pass over memory, with
 *                        optional residual_out = x + residual (the pre-norm
 *                        sum the next block needs) and optional f32 mean /
 *                        rstd per row (for the backward).
 *     norm = LayerNorm:  (h - mean(h)) * rstd,  rstd = 1/sqrt(var(h) + eps),
 *                        var biased (divides by H), as torch.nn.functional.
 *                        layer_norm / torch.native_layer_norm.
 *     norm = RMSNorm:    h * rstd,  rstd = 1/sqrt(mean(h^2) + eps), as
 *                        torch.nn.functional.rms_norm (which has no bias; a
 *                        bias is supported here and simply added).
 *     act  = any kern_act: none, GELU (erf; torch gelu approximate='none'),
 *            GELU tanh (approximate='tanh'), ReLU, SiLU (torch silu).
 *   kern_norm_backward:  dx (and optionally dweight, dbias) of kern_norm,
 *                        activation included, given dout and the forward's
 *                        normalized input h (= residual_out when a residual
 *                        was used; the gradient of x and of residual are both
 *                        dx). An optional dresidual (gradient arriving at
 *                        residual_out from elsewhere) is added to dx.
 *                        dweight/dbias are reduced over rows in a fixed order:
 *                        the same bits for any thread count.
 *   kern_activation:     out = act(x + bias), every kern_act, bias optional:
 *                        the unfused form of every fused activation (kern_norm,
 *                        the GEMM epilogue), bit-identical to it;
 *                        kern_activation_backward: dx = dout * act'(x).
 *   kern_gelu, kern_bias_gelu, kern_gelu_backward: the same restricted to
 *   the two GELUs; kern_add (out = a + b; the residual add alone, a building
 *   block and the unfused baseline of the benchmarks).
 *
 * NUMERICS
 *   All arithmetic is f32, on every ISA path. Row statistics are shifted
 *   sums (Chan, Golub, LeVeque): one pass sums d = h - s and d^2 with the
 *   shift s = the previous row's mean (a task's first row: its first
 *   element), c = mean(d), var = mean(d^2) - c^2; when the shift was poor
 *   (c^2 > var/4, where the subtraction would cancel) an exact second pass
 *   over the row held in cache runs instead. The per-lane f32 partial sums
 *   are added into a double every 64 terms, so the error does not grow with
 *   H. A row of 1e4 + N(0,1) keeps mean and rstd within 1e-5 relative, and
 *   the output is normalized as ((h - s) - c) * rstd so the f32 rounding of
 *   a large mean does not leak into the output. The residual sum
 *   h = x + residual is formed in f32 and normalized unrounded
 *   (residual_out stores it rounded to its dtype).
 *   The activations and their gradients are kern_base.h's shared math
 *   (docs/internals.md: GELU <= 4 ulp over all f32 with relative accuracy
 *   for negative x, GELU tanh as x * sigmoid(2u), SiLU <= 3.5 ulp; the
 *   same bits on every ISA). A fused activation gives the bits of the
 *   unfused ops: kern_norm with act == kern_norm (f32 out) then
 *   kern_activation(act), on every ISA (tested). Infinities follow the
 *   formulas, as in PyTorch: GELU(+Inf) = +Inf, GELU(-Inf) = NaN,
 *   gelu'(+-Inf) = NaN; NaN propagates. ReLU's gradient is 1 for x > 0,
 *   else 0, applied as dout * act'(x) (so a NaN / Inf dout at x <= 0 gives
 *   NaN, where torch's threshold_backward gives 0).
 *
 * LAYOUTS
 *   x, residual, out, residual_out (and dout, dx, dresidual): f32, bf16 or
 *   f16, each independently; ndim >= 1, all with x's shape. H = the last
 *   dim, rows = the product of the others. The last dim must have unit
 *   stride (KERN_ERR_LAYOUT otherwise); the leading dims may have any
 *   non-negative strides, each tensor its own (strided rows, [B,L,H] views
 *   of bigger buffers...). weight, bias, dweight, dbias: 1-D [H], f32/bf16/
 *   f16, unit stride. mean, rstd: f32, contiguous, rows elements (any shape
 *   with that element count, e.g. [rows] or x.shape[:-1]).
 *   Optional tensors are pointers in the params struct: NULL = absent.
 *   In place: an output may be the very same view as an input (same data,
 *   dtype, shape and strides), e.g. out = x or residual_out = residual;
 *   any other overlap between an output and an input or another output is
 *   KERN_ERR_ARG.
 *   Rows are split across the context's threads; a call below
 *   KERN_NORM_SERIAL_STEPS of work (waking a worker would cost more than
 *   it saves) runs on the calling thread. Outputs larger than
 *   KERN_NORM_NT_BYTES (default 16 MiB) are written with non-temporal
 *   stores (they would not stay in cache anyway; saves the read for
 *   ownership).
 *   H = 0: out is empty; mean rows are 0 and rstd rows NaN (as PyTorch).
 *
 * PARAMS (zero-initialise; zero = default)
 *   norm: KERN_NORM_LAYER (0, default) or KERN_NORM_RMS.
 *   act:  any kern_act (kern_base.h): KERN_ACT_NONE (0), _GELU, _GELU_TANH,
 *         _RELU, _SILU.
 *   eps, eps_set: eps 0 means 1e-5 unless eps_set, which makes eps be used
 *         as given, 0 included. Negative, NaN or infinite eps is
 *         KERN_ERR_ARG. kern_norm_params_defaults(&p) shows the resolved
 *         value.
 *   workspace, workspace_size: NULL = the context's reusable scratch; else
 *         caller memory of at least kern_norm_workspace_size() bytes
 *         (kern_norm_backward_workspace_size() for the backward), from
 *         which the call takes all its scratch (shared and per-thread).
 *   mean output with RMSNorm: KERN_ERR_ARG (RMSNorm has no mean).
 *   kern_activation / kern_activation_backward take any kern_act;
 *         kern_gelu / kern_bias_gelu / kern_gelu_backward KERN_ACT_GELU or
 *         KERN_ACT_GELU_TANH; other values are KERN_ERR_ARG.
 *
 * ERRORS (nothing is written on error; kern_last_error() names the function,
 * the argument and the values)
 *   KERN_ERR_ARG     NULL x/out, bad enum, bad eps, overlapping outputs,
 *                    mean with RMSNorm, dweight without weight, a caller
 *                    workspace smaller than the _workspace_size
 *   KERN_ERR_SHAPE   out/residual/residual_out/dout/dx shapes differ from
 *                    x's (e.g. rows mismatch), weight/bias not [H], mean/
 *                    rstd without `rows` elements
 *   KERN_ERR_DTYPE   a non-float tensor, mean/rstd not f32
 *   KERN_ERR_LAYOUT  last dim not unit stride, weight/bias/mean/rstd not
 *                    contiguous, negative strides, an output whose elements
 *                    overlap (e.g. a zero row stride)
 *   KERN_ERR_NOMEM   scratch could not be allocated
 *
 * ISA PATHS: one const table of row kernels per ISA level, picked from
 * kern_ctx_isa(ctx): AVX-512 (F/BW/VL/DQ; also the VNNI / BF16 levels),
 * AVX2+FMA+F16C (also AVX2_VNNI), AArch64 NEON (also NEON_DOT / NEON_BF16),
 * scalar. The row kernels are written once in
 * gen/templates/kern_norm_rows.c.in and expanded for each ISA by
 * gen/kern_tmpl.py into the generated region below (make gen; make
 * gen-check fails on a hand edit): the scalar path is the one-lane
 * expansion of the same template.
 *
 * EXAMPLE
 *     // h = x + r (kept for the next block), y = GELU(LayerNorm(h)*w + b)
 *     kern_tensor x = kern_tensor_2d(xp, KERN_BF16, rows, H);
 *     kern_tensor r = kern_tensor_2d(rp, KERN_BF16, rows, H);
 *     kern_tensor y = kern_tensor_2d(yp, KERN_BF16, rows, H);
 *     kern_tensor w = kern_tensor_1d(wp, KERN_F32, H);
 *     kern_tensor b = kern_tensor_1d(bp, KERN_F32, H);
 *     kern_norm_params p = {0};             // LayerNorm, eps 1e-5
 *     p.act = KERN_ACT_GELU;
 *     p.residual = &r; p.residual_out = &r; // residual stream updated in place
 *     p.weight = &w; p.bias = &b;
 *     if (kern_norm(ctx, &x, &y, &p) != KERN_OK) puts(kern_last_error());
 */
#ifndef KERN_NORM_H
#define KERN_NORM_H

#include "kern_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kern_norm_kind {
    KERN_NORM_LAYER = 0, /* default */
    KERN_NORM_RMS = 1
} kern_norm_kind;

/* kern_act (every value supported here) is kern_base.h's. */

typedef struct kern_norm_params {
    kern_norm_kind norm;
    kern_act act;
    const kern_tensor *residual;     /* input, x's shape, or NULL */
    const kern_tensor *weight;       /* [H] or NULL (ones) */
    const kern_tensor *bias;         /* [H] or NULL (zeros) */
    const kern_tensor *residual_out; /* output x + residual, x's shape, or NULL */
    const kern_tensor *mean;         /* output f32 [rows] or NULL (LayerNorm only) */
    const kern_tensor *rstd;         /* output f32 [rows] or NULL */
    float eps;                       /* 0 = 1e-5 unless eps_set */
    int eps_set;                     /* nonzero: eps is used as given, 0 included */
    void *workspace;                 /* optional caller scratch of at least */
    size_t workspace_size;           /* kern_norm_workspace_size() bytes */
} kern_norm_params;

typedef struct kern_norm_backward_params {
    kern_norm_kind norm;
    kern_act act;
    const kern_tensor *weight;    /* as in the forward, or NULL */
    const kern_tensor *bias;      /* as in the forward (used only with act) */
    const kern_tensor *mean;      /* saved f32 [rows] (LayerNorm), or NULL */
    const kern_tensor *rstd;      /* saved f32 [rows], or NULL: both are then
                                     recomputed from x */
    const kern_tensor *dresidual; /* optional input added to dx, x's shape */
    const kern_tensor *dweight;   /* optional output [H] (needs weight) */
    const kern_tensor *dbias;     /* optional output [H] (needs bias) */
    float eps;                    /* as in the forward (when recomputing) */
    int eps_set;                  /* as in the forward */
    void *workspace;              /* optional caller scratch of at least */
    size_t workspace_size;        /* kern_norm_backward_workspace_size() */
} kern_norm_backward_params;

/* Resolves the defaults in place (eps 0 without eps_set becomes 1e-5, then
 * eps_set = 1); the other fields' zeros are their defaults already
 * (LayerNorm, no activation, no optional tensors, the context's scratch).
 * NULL is ignored. */
KERN_API void kern_norm_params_defaults(kern_norm_params *p);
KERN_API void kern_norm_backward_params_defaults(kern_norm_backward_params *p);

/* out = act(norm(x + residual) * weight + bias); see the top of the file.
 * params may be NULL (plain LayerNorm, eps 1e-5). */
KERN_API kern_status kern_norm(kern_ctx *ctx, const kern_tensor *x,
                               const kern_tensor *out,
                               const kern_norm_params *params);
/* Scratch bytes kern_norm takes for these operands on this context (its
 * thread count): the size params.workspace must have. Validates like
 * kern_norm; params->workspace is ignored. */
KERN_API kern_status kern_norm_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                              const kern_tensor *out,
                                              const kern_norm_params *params,
                                              size_t *bytes);

/* dx = d kern_norm / d h, where h is the forward's normalized input (x, or
 * x + residual = residual_out). dout has x's shape; dx too. */
KERN_API kern_status kern_norm_backward(kern_ctx *ctx, const kern_tensor *dout,
                                        const kern_tensor *x,
                                        const kern_tensor *dx,
                                        const kern_norm_backward_params *params);
/* Scratch bytes kern_norm_backward takes (see kern_norm_workspace_size). */
KERN_API kern_status kern_norm_backward_workspace_size(
    kern_ctx *ctx, const kern_tensor *dout, const kern_tensor *x,
    const kern_tensor *dx, const kern_norm_backward_params *params, size_t *bytes);

/* out = act(x + bias) for every kern_act (KERN_ACT_NONE: x + bias, i.e. a
 * copy / dtype conversion without bias): the unfused form of every fused
 * activation, the same bits (kern_norm, kern_gemm's epilogue, ...). x and
 * out: any float dtypes, the same shape, last dim unit stride; bias [H]
 * broadcast over rows, any float dtype, or NULL (a bias that is not f32 is
 * converted once into H floats of the context's scratch); out may be x
 * itself. A value outside kern_act is KERN_ERR_ARG. */
KERN_API kern_status kern_activation(kern_ctx *ctx, const kern_tensor *x,
                                     const kern_tensor *bias, const kern_tensor *out,
                                     kern_act act);

/* dx = dout * act'(x) for every kern_act (NONE: dx = dout; RELU: act' is 1
 * for x > 0, else 0), the gradient kern_norm_backward applies in its fused
 * form. */
KERN_API kern_status kern_activation_backward(kern_ctx *ctx, const kern_tensor *dout,
                                              const kern_tensor *x, const kern_tensor *dx,
                                              kern_act act);

/* out = gelu(x), any float dtypes, same shape. act: KERN_ACT_GELU (erf,
 * torch approximate='none') or KERN_ACT_GELU_TANH (approximate='tanh');
 * any other value is KERN_ERR_ARG. */
KERN_API kern_status kern_gelu(kern_ctx *ctx, const kern_tensor *x,
                               const kern_tensor *out, kern_act act);

/* out = gelu(x + bias), bias [H] broadcast over rows (NULL = no bias); act
 * as in kern_gelu. A bias that is not f32 is converted once into H floats
 * of the context's scratch. */
KERN_API kern_status kern_bias_gelu(kern_ctx *ctx, const kern_tensor *x,
                                    const kern_tensor *bias,
                                    const kern_tensor *out, kern_act act);

/* dx = dout * gelu'(x) (torch gelu_backward); act as in kern_gelu. */
KERN_API kern_status kern_gelu_backward(kern_ctx *ctx, const kern_tensor *dout,
                                        const kern_tensor *x,
                                        const kern_tensor *dx, kern_act act);

/* out = a + b (same shapes, any float dtypes, computed in f32). */
KERN_API kern_status kern_add(kern_ctx *ctx, const kern_tensor *a,
                              const kern_tensor *b, const kern_tensor *out);

#ifndef KERN_NORM_NT_BYTES
#define KERN_NORM_NT_BYTES ((int64_t)16 << 20)
#endif
/* A call whose work is below this many element-steps runs on the calling
 * thread alone (one element of a plain normalization, add or ReLU is one
 * step; of an activation such as GELU, or of a backward, 4). Waking a
 * sleeping pool worker took a median of 10-15 us on the 2-core Zen 3
 * development machine (docs/norm.md, "Small problems"), and a second thread
 * can save at most half the work: below ~2 wake-ups of work (65536 steps,
 * ~20-25 us on one core) the second thread only costs. */
#ifndef KERN_NORM_SERIAL_STEPS
#define KERN_NORM_SERIAL_STEPS ((int64_t)1 << 16)
#endif

/* For kern's tests (kern__ prefix: not a stable API): the name of the
 * vector-body table ISA level `isa` runs ("scalar", "avx2", "avx512",
 * "neon"). */
KERN_API const char *kern__norm_table_name(kern_isa isa);

#ifdef __cplusplus
}
#endif
#endif /* KERN_NORM_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_NORM_IMPLEMENTED)
KERN__IMPL_DIAG_BEGIN
#define KERN_NORM_IMPLEMENTED

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

/* ------------------------------------------------------- row machinery */

/* A [rows, H] view of a tensor: leading dims collapsed where possible,
 * strides in bytes. */
typedef struct kern__norm_view {
    char *base;
    kern_dtype dt;
    int nlead;
    int64_t shape[KERN_MAX_DIMS];
    int64_t stride[KERN_MAX_DIMS]; /* bytes */
} kern__norm_view;

static void kern__norm_view_init(kern__norm_view *v, const kern_tensor *t) {
    int d, n = 0;
    int64_t es;
    memset(v, 0, sizeof *v);
    if (!t) return;
    es = (int64_t)kern_dtype_size(t->dtype);
    v->base = (char *)t->data;
    v->dt = t->dtype;
    for (d = 0; d < t->ndim - 1; d++) {
        if (t->shape[d] == 1) continue;
        if (n > 0 && v->stride[n - 1] == t->stride[d] * t->shape[d] * es) {
            v->shape[n - 1] *= t->shape[d];
            v->stride[n - 1] = t->stride[d] * es;
            continue;
        }
        v->shape[n] = t->shape[d];
        v->stride[n] = t->stride[d] * es;
        n++;
    }
    v->nlead = n;
}
static inline void *kern__norm_row(const kern__norm_view *v, int64_t row) {
    int64_t off = 0;
    int d;
    if (!v->base) return NULL;
    if (v->nlead <= 1) return v->base + row * v->stride[0];
    for (d = v->nlead - 1; d >= 0; d--) {
        off += (row % v->shape[d]) * v->stride[d];
        row /= v->shape[d];
    }
    return v->base + off;
}

/* The next row's input streams, prefetched while the current row is being
 * normalized and written: without it the DRAM read stream idles during
 * that phase (and the hardware prefetchers restart at every 4 KiB row).
 * The row loops call it at elements i with i % 16 == 0: one call per
 * 64 bytes of an f32 stream, every cache line of every stream (calling it
 * every AVX2 vector was a quarter of the backward's instructions). */
typedef struct kern__norm_pf {
    const char *p[3];
    int64_t es[3]; /* bytes per element */
    int n;
} kern__norm_pf;
static inline void kern__norm_prefetch(const kern__norm_pf *pf, int64_t i) {
#if defined(__GNUC__) || defined(__clang__)
    int k;
    for (k = 0; k < pf->n; k++) __builtin_prefetch(pf->p[k] + i * pf->es[k], 0, 2);
#else
    (void)pf;
    (void)i;
#endif
}
static inline void kern__norm_pf_add(kern__norm_pf *pf, const void *p, kern_dtype dt) {
    if (!p) return;
    pf->p[pf->n] = (const char *)p;
    pf->es[pf->n] = (int64_t)kern_dtype_size(dt);
    pf->n++;
}

typedef struct kern__norm_fwd kern__norm_fwd;
struct kern__norm_fwd {
    kern__norm_view x, r, o, ro;
    const float *w, *b; /* f32 [H]; ones / zeros when absent */
    float *mean, *rstd; /* NULL if not wanted */
    int64_t H, Hp, rows, rpt;
    float eps;
    int rms, nt;
    kern_act act;
    kern_ctx *ctx;
    void (*row)(const kern__norm_fwd *a, const void *x, const void *r, void *o,
                void *ro, float *sc, int64_t row, float *shift, const kern__norm_pf *pf);
};

typedef struct kern__norm_bwd kern__norm_bwd;
struct kern__norm_bwd {
    kern__norm_view dy, x, dx, dr;
    const float *w, *b;
    const float *mean, *rstd; /* saved statistics or NULL */
    float *pw, *pb;           /* per-block partials [nblk][Hp] or NULL */
    int64_t H, Hp, rows, rpt, nblk;
    float eps;
    int rms;
    kern_act act;
    kern_ctx *ctx;
    void (*row)(const kern__norm_bwd *a, const void *dy, const void *x, void *dx,
                const void *dr, float *sc, int64_t row, float *pw, float *pb,
                const kern__norm_pf *pf);
    /* phase 2 */
    const kern_tensor *dweight, *dbias;
};

enum { KERN__NORM_EW_ADD = 1, KERN__NORM_EW_ACT, KERN__NORM_EW_ACT_BWD };
typedef struct kern__norm_ew kern__norm_ew;
struct kern__norm_ew {
    kern__norm_view a, b, o;
    const float *bias;
    int64_t H, rows, rpt, seg, nseg;
    int op, nt;
    kern_act act;
    void (*seg_fn)(const kern__norm_ew *e, const void *p, const void *q, void *o,
                   const float *bias, int64_t n);
};
/* A rarely taken function, kept out of the loops that call it. */
#if defined(__GNUC__) || defined(__clang__)
#define KERN__NORM_COLD __attribute__((noinline, cold))
#else
#define KERN__NORM_COLD
#endif
/* Bytes per element of a float dtype (the row kernels' strides). */
static inline int64_t kern__norm_es(kern_dtype dt) { return dt == KERN_F32 ? 4 : 2; }
/* Row sums: each lane of a vector accumulator takes at most this many
 * terms in f32 before the block is added into a double, so the rounding of
 * the statistics does not grow with H (and the scalar twin, one lane, is as
 * accurate as the vector paths). */
#define KERN__NORM_BLK 64
/* 1.0f in the first n lanes of a partial load: the tail mask of a row. */
static const float kern__norm_ones[16] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f,
                                          1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};

/* ------------------------------------------------------- row kernels
 * Written once in gen/templates/kern_norm_rows.c.in against the vector
 * vocabulary of docs/gen.md and expanded for every ISA by gen/kern_tmpl.py
 * (make gen): the scalar twin kern__s_norm_*, kern__v_norm_*__avx2,
 * __avx512, __neon. The AVX-512 expansion is the same template as the
 * AVX2 one tested on every machine. */
/* BEGIN GENERATED kern_tmpl.py: kern_norm_rows isa=scalar,avx2,avx512,neon — do not edit */
/* ---- scalar ---- */
/* n elements of dtype dt from element i of p as f32 lanes (n >= 1: a full
 * vector; else the first n, the rest 0, nothing past the row read). */
KERN__AINLINE float kern__s_norm_ld(const void *p, kern_dtype dt, int64_t i, int64_t n) {
    return kern__s_load_f32((const char *)p + i * kern__norm_es(dt), dt, n >= 1 ? 1 : (int)n);
}
/* The same for values that go through arithmetic before anything is
 * stored (the statistics, the normalized row, the backward's rows, the
 * add): a full bf16 vector is widened without kern__v_load_f32's quieting
 * of signalling NaNs, which the arithmetic does anyway (4 instructions
 * fewer per vector on AVX2: residual + LayerNorm bf16 was 11% slower with
 * them). Tails and the other dtypes take the shared load. */
KERN__AINLINE float kern__s_norm_ldw(const void *p, kern_dtype dt, int64_t i, int64_t n) {
    return kern__s_norm_ld(p, dt, i, n);
}
/* min(n, 1) lanes to element i of p in dtype dt (round to nearest even);
 * nt streams a full vector whose address is aligned to the store width. */
KERN__AINLINE void kern__s_norm_st(void *p, kern_dtype dt, int64_t i, int64_t n, float v, int nt) {
    const int64_t es = kern__norm_es(dt);
    char *q = (char *)p + i * es;
    const int full = n >= 1;
    kern__s_store_f32(q, dt, v, full ? 1 : (int)n,
                           nt && full && !((uintptr_t)q & (uintptr_t)(es * 1 - 1)));
}
/* v with the lanes from n on set to 0 */
KERN__AINLINE float kern__s_norm_keep(float v, int64_t n) {
    float m = (*(const float *)(kern__norm_ones));
    (void)n;
    return ((((m) > (0.0f))) ? (v) : (0.0f));
}
/* (p[i..] as f32) - m, lanes past n zeroed */
KERN__AINLINE float kern__s_norm_ldd(const void *p, kern_dtype dt, int64_t i, int64_t n, float m) {
    float d = ((kern__s_norm_ldw(p, dt, i, n)) - (m));
    return n >= 1 ? d : kern__s_norm_keep(d, n);
}
/* the lanes summed in double, in lane order */
KERN__AINLINE double kern__s_norm_hsum(float v) {
    float t[1];
    double s = 0;
    int k;
    (*(float *)(t) = (v));
    for (k = 0; k < 1; k++) s += t[k];
    return s;
}

/* sum(d) and sum(d^2) of d = h - mh over a row, two accumulators each. */
static void kern__s_norm_passB(const void *h, kern_dtype dt, int64_t H, float mh, double *s1,
                                             double *s2) {
    const float vm = (mh);
    const int64_t end2 = H - H % (2 * 1);
    float a0 = 0.0f, a1 = 0.0f, b0 = 0.0f, b1 = 0.0f;
    int64_t i = 0;
    *s1 = *s2 = 0.0;
    while (i < end2) { /* blocks of KERN__NORM_BLK steps, flushed into double */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 1 ? i + KERN__NORM_BLK * 2 * 1 : end2;
        for (; i < e; i += 2 * 1) {
            float d0 = ((kern__s_norm_ldw(h, dt, i, 1)) - (vm));
            float d1 = ((kern__s_norm_ldw(h, dt, i + 1, 1)) - (vm));
            a0 = ((a0) + (d0));
            a1 = ((a1) + (d1));
            b0 = kern__s_fma(d0, d0, b0);
            b1 = kern__s_fma(d1, d1, b1);
        }
        *s1 += kern__s_norm_hsum(((a0) + (a1)));
        *s2 += kern__s_norm_hsum(((b0) + (b1)));
        a0 = a1 = b0 = b1 = 0.0f;
    }
    for (; i < H; i += 1) {
        float d = kern__s_norm_ldd(h, dt, i, H - i, vm);
        a0 = ((a0) + (d));
        b0 = kern__s_fma(d, d, b0);
    }
    *s1 += kern__s_norm_hsum(a0);
    *s2 += kern__s_norm_hsum(b0);
}

/* Statistics of an f32 row read from x (backward without saved
 * statistics): the same corrected two-pass scheme as the forward. */
static void kern__s_norm_xstats(const float *x, int64_t H, int rms, float eps, float *mh, float *c,
                                              float *rstd) {
    const int64_t end2 = H - H % (2 * 1);
    float a0 = 0.0f, a1 = 0.0f;
    double sum = 0.0;
    int64_t i = 0;
    while (i < end2) { /* blocks flushed into double, as passB */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 1 ? i + KERN__NORM_BLK * 2 * 1 : end2;
        for (; i < e; i += 2 * 1) {
            float v0 = (*(const float *)(x + i)), v1 = (*(const float *)(x + i + 1));
            if (rms) {
                a0 = kern__s_fma(v0, v0, a0);
                a1 = kern__s_fma(v1, v1, a1);
            } else {
                a0 = ((a0) + (v0));
                a1 = ((a1) + (v1));
            }
        }
        sum += kern__s_norm_hsum(((a0) + (a1)));
        a0 = a1 = 0.0f;
    }
    for (; i < H; i += 1) {
        float v = kern__s_norm_ld(x, KERN_F32, i, H - i);
        a0 = rms ? kern__s_fma(v, v, a0) : ((a0) + (v));
    }
    sum += kern__s_norm_hsum(a0);
    if (rms) {
        *mh = 0.0f;
        *c = 0.0f;
        *rstd = (float)(1.0 / sqrt(sum / (double)H + (double)eps));
    } else {
        double s1, s2, cd, var;
        *mh = (float)(sum / (double)H);
        kern__s_norm_passB(x, KERN_F32, H, *mh, &s1, &s2);
        cd = s1 / (double)H;
        var = s2 / (double)H - cd * cd;
        if (var < 0) var = 0;
        *c = (float)cd;
        *rstd = (float)(1.0 / sqrt(var + (double)eps));
    }
}

/* The activation of the row kernels: kern__s_act's bits. GELU (erf)
 * keeps the shared function's fast check inline (x Phi(x) when no lane is
 * below -3) and calls the whole shared kern__v_gelu out of line for a
 * vector that has such a lane: inlined, that rare form's registers pushed
 * the loops' constants out of registers (LayerNorm + GELU 9-15% slower on
 * AVX2 than the former private form). */
KERN__NORM_COLD static float kern__s_norm_gelu_tail(float x) { return kern__s_gelu(x); }
KERN__AINLINE float kern__s_norm_act(float x, const kern_act act) {
    if (act == KERN_ACT_GELU) {
        if ((((x) < ((KERN__M_GELU_LO))))) return kern__s_norm_gelu_tail(x);
        return kern__s_mul(x, kern__s_gelu_phi(x));
    }
    return kern__s_act(x, act);
}
/* ---- forward ---- */

/* Pass A, specialized on (x dtype, residual dtype or none, rms): h = x (+ r)
 * in f32, kept in scratch when it is not x itself; sums of d = h - s and
 * d^2 (s: the shift), or of h^2 for RMSNorm. Two vectors per step: the
 * sums are latency chains. */
KERN__AINLINE void kern__s_norm_fa(const void *x, const kern_dtype xdt, const void *r,
                                                 const kern_dtype rdt, float *sc, const int64_t H, const float s,
                                                 const int rms, double *o1, double *o2) {
    const int store_sc = rdt != KERN_DTYPE_NONE || xdt != KERN_F32;
    const int64_t end2 = H - H % (2 * 1);
    const float vs = (s);
    float a1 = 0.0f, a2 = 0.0f, b1 = 0.0f, b2 = 0.0f;
    int64_t i = 0;
    *o1 = *o2 = 0.0;
    while (i < end2) { /* blocks of KERN__NORM_BLK steps, flushed into double */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 1 ? i + KERN__NORM_BLK * 2 * 1 : end2;
        for (; i < e; i += 2 * 1) {
            float v0 = kern__s_norm_ldw(x, xdt, i, 1), v1 = kern__s_norm_ldw(x, xdt, i + 1, 1);
            if (rdt != KERN_DTYPE_NONE) {
                v0 = ((v0) + (kern__s_norm_ldw(r, rdt, i, 1)));
                v1 = ((v1) + (kern__s_norm_ldw(r, rdt, i + 1, 1)));
            }
            if (store_sc) {
                (*(float *)(sc + i) = (v0));
                (*(float *)(sc + i + 1) = (v1));
            }
            if (rms) {
                a2 = kern__s_fma(v0, v0, a2);
                b2 = kern__s_fma(v1, v1, b2);
            } else {
                float d0 = ((v0) - (vs)), d1 = ((v1) - (vs));
                a1 = ((a1) + (d0));
                b1 = ((b1) + (d1));
                a2 = kern__s_fma(d0, d0, a2);
                b2 = kern__s_fma(d1, d1, b2);
            }
        }
        if (!rms) *o1 += kern__s_norm_hsum(((a1) + (b1)));
        *o2 += kern__s_norm_hsum(((a2) + (b2)));
        a1 = a2 = b1 = b2 = 0.0f;
    }
    for (; i < H; i += 1) {
        const int full = i + 1 <= H;
        float v = full ? kern__s_norm_ldw(x, xdt, i, 1) : kern__s_norm_ldw(x, xdt, i, H - i);
        if (rdt != KERN_DTYPE_NONE)
            v = ((v) + (full ? kern__s_norm_ldw(r, rdt, i, 1) : kern__s_norm_ldw(r, rdt, i, H - i)));
        if (store_sc) (*(float *)(sc + i) = (v));
        if (rms) {
            a2 = kern__s_fma(v, v, a2);
        } else {
            float d = ((v) - (vs));
            if (!full) d = kern__s_norm_keep(d, H - i);
            a1 = ((a1) + (d));
            a2 = kern__s_fma(d, d, a2);
        }
    }
    if (!rms) *o1 += kern__s_norm_hsum(a1);
    *o2 += kern__s_norm_hsum(a2);
}
/* Pass A for the row's dtypes (the specializations above). */
static void kern__s_norm_fa_dt(const void *x, kern_dtype xdt, const void *r, kern_dtype rdt,
                                             float *sc, int64_t H, float s, int rms, double *o1, double *o2) {
#define KERN__NORM_FA(XD, RD)                                                                      \
    do {                                                                                           \
        if (rms) kern__s_norm_fa(x, XD, r, RD, sc, H, s, 1, o1, o2);                          \
        else kern__s_norm_fa(x, XD, r, RD, sc, H, s, 0, o1, o2);                              \
    } while (0)
#define KERN__NORM_FA_R(XD)                                                                        \
    do {                                                                                           \
        if (rdt == KERN_F32) KERN__NORM_FA(XD, KERN_F32);                                          \
        else if (rdt == KERN_BF16) KERN__NORM_FA(XD, KERN_BF16);                                   \
        else if (rdt == KERN_F16) KERN__NORM_FA(XD, KERN_F16);                                     \
        else KERN__NORM_FA(XD, KERN_DTYPE_NONE);                                                   \
    } while (0)
    if (xdt == KERN_F32) KERN__NORM_FA_R(KERN_F32);
    else if (xdt == KERN_BF16) KERN__NORM_FA_R(KERN_BF16);
    else KERN__NORM_FA_R(KERN_F16);
#undef KERN__NORM_FA_R
#undef KERN__NORM_FA
}

/* Pass C, specialized on (out dtype, act): y = act(((h - s) rstd - c rstd)
 * w + b), the activation kern__v_act's bits (so kern_norm followed by
 * kern_activation gives the same bits); w and b are always arrays (ones /
 * zeros when absent). With an activation and a bf16 / f16 output, y goes
 * to the f32 row ys first (it may be h itself) and is converted in a
 * second loop: the activation's and the rounding's constants together do
 * not fit the 16 vector registers of AVX2, and the compiler rebuilt the
 * rounding constants every vector (LayerNorm + GELU bf16 15% slower). */
KERN__AINLINE void kern__s_norm_fc(const float *h, float *ys, void *o, const kern_dtype odt,
                                                 const kern_act act, const int64_t H, const float s,
                                                 const float rstd, const float nb, const float *w, const float *b,
                                                 const int nt, const kern__norm_pf *pf) {
    const float vs = (s), vr = (rstd), vnb = (nb);
    const int split = act != KERN_ACT_NONE && odt != KERN_F32;
    int64_t i = 0;
    /* two vectors a step, except for GELU (erf), whose long chains the
     * core overlaps better one vector a step (AVX2: 1.56 vs 1.93 us for a
     * 1x4096 f32 row without activation, 4.96 vs 4.80 us with GELU) */
    for (; act != KERN_ACT_GELU && i + 2 * 1 <= H; i += 2 * 1) {
        float y0 = kern__s_fma((((*(const float *)(h + i))) - (vs)), vr, vnb);
        float y1 = kern__s_fma((((*(const float *)(h + i + 1))) - (vs)), vr, vnb);
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        if (!((i + 1) & 15)) kern__norm_prefetch(pf, i + 1);
        y0 = kern__s_fma(y0, (*(const float *)(w + i)), (*(const float *)(b + i)));
        y1 = kern__s_fma(y1, (*(const float *)(w + i + 1)), (*(const float *)(b + i + 1)));
        y0 = kern__s_act(y0, act);
        y1 = kern__s_act(y1, act);
        if (split) {
            (*(float *)(ys + i) = (y0));
            (*(float *)(ys + i + 1) = (y1));
        } else {
            kern__s_norm_st(o, odt, i, 1, y0, nt);
            kern__s_norm_st(o, odt, i + 1, 1, y1, nt);
        }
    }
    for (; i + 1 <= H; i += 1) {
        float y = kern__s_fma((((*(const float *)(h + i))) - (vs)), vr, vnb);
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        y = kern__s_norm_act(kern__s_fma(y, (*(const float *)(w + i)), (*(const float *)(b + i))), act);
        if (split) (*(float *)(ys + i) = (y));
        else kern__s_norm_st(o, odt, i, 1, y, nt);
    }
    if (i < H) {
        const int n = (int)(H - i);
        float y = kern__s_fma((((*(const float *)(h + i))) - (vs)), vr, vnb);
        y = kern__s_norm_act(kern__s_fma(y, (*(const float *)(w + i)), (*(const float *)(b + i))), act);
        if (split) (*(float *)(ys + i) = (y));
        else kern__s_norm_st(o, odt, i, n, y, nt);
    }
    if (split) {
        for (i = 0; i + 1 <= H; i += 1) kern__s_norm_st(o, odt, i, 1, (*(const float *)(ys + i)), nt);
        if (i < H) kern__s_norm_st(o, odt, i, H - i, (*(const float *)(ys + i)), nt);
    }
}
/* Pass C for the output dtype and activation of the op. */
static void kern__s_norm_fc_dt(const kern__norm_fwd *a, const float *h, float *ys, void *o, float s,
                                             float rstd, float nb, const kern__norm_pf *pf) {
#define KERN__NORM_FC(OD, A) kern__s_norm_fc(h, ys, o, OD, A, a->H, s, rstd, nb, a->w, a->b, a->nt, pf);
#define KERN__NORM_FC_F32(A) KERN__NORM_FC(KERN_F32, A)
#define KERN__NORM_FC_BF16(A) KERN__NORM_FC(KERN_BF16, A)
#define KERN__NORM_FC_F16(A) KERN__NORM_FC(KERN_F16, A)
    if (a->o.dt == KERN_F32) {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_F32)
    } else if (a->o.dt == KERN_BF16) {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_BF16)
    } else {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_F16)
    }
#undef KERN__NORM_FC_F16
#undef KERN__NORM_FC_BF16
#undef KERN__NORM_FC_F32
#undef KERN__NORM_FC
}

/* residual_out from the f32 row, specialized on its dtype */
KERN__AINLINE void kern__s_norm_fro(const float *h, void *o, const kern_dtype odt, const int64_t H,
                                                  const int nt) {
    int64_t i = 0;
    for (; i + 1 <= H; i += 1) kern__s_norm_st(o, odt, i, 1, (*(const float *)(h + i)), nt);
    if (i < H) kern__s_norm_st(o, odt, i, H - i, (*(const float *)(h + i)), nt);
}

/* Forward of one row. Pass A reads x (+ residual) once from memory and
 * keeps the f32 row in thread scratch (x itself is re-read from cache when
 * it is f32 and there is no residual), with one-pass statistics shifted by
 * the previous row's mean (or the row's first element): d = h - s,
 * c = mean(d), var = mean(d^2) - c^2. When the shift was poor (c^2 > var/4:
 * the subtraction would cancel) the exact second pass over the cached row
 * runs instead, so accuracy never depends on the shift. Pass C normalizes
 * ((h - s) - c) rstd, which keeps a large mean's f32 rounding out of the
 * output. */
static void kern__s_norm_fwd_row(const kern__norm_fwd *a, const void *x, const void *r, void *o,
                                               void *ro, float *sc, int64_t row, float *shift,
                                               const kern__norm_pf *pf) {
    const int64_t H = a->H;
    const kern_dtype xdt = a->x.dt, rdt = r ? a->r.dt : KERN_DTYPE_NONE;
    const float *h = (r || xdt != KERN_F32) ? sc : (const float *)x;
    float s, c = 0.0f, rstd;
    double s1 = 0, s2 = 0;
    if (a->rms) s = 0.0f;
    else if (*shift == *shift) s = *shift;
    else s = kern__s_load_f32(x, xdt, 1) + (r ? kern__s_load_f32(r, rdt, 1) : 0.0f);
    if (s != s || s - s != 0) s = 0.0f; /* NaN/Inf first element */
    kern__s_norm_fa_dt(x, xdt, r, rdt, sc, H, s, a->rms, &s1, &s2);
    if (ro) {
        if (a->ro.dt == KERN_F32) kern__s_norm_fro(h, ro, KERN_F32, H, a->nt);
        else if (a->ro.dt == KERN_BF16) kern__s_norm_fro(h, ro, KERN_BF16, H, a->nt);
        else kern__s_norm_fro(h, ro, KERN_F16, H, a->nt);
    }
    if (a->rms) {
        rstd = (float)(1.0 / sqrt(s2 / (double)H + (double)a->eps));
    } else {
        double cd = s1 / (double)H, m2 = s2 / (double)H, var = m2 - cd * cd;
        if (!(cd * cd <= 0.25 * var)) { /* poor shift (or NaN): exact second pass */
            s = (float)((double)s + cd);
            if (s != s || s - s != 0) s = 0.0f;
            kern__s_norm_passB(h, KERN_F32, H, s, &s1, &s2);
            cd = s1 / (double)H;
            var = s2 / (double)H - cd * cd;
        }
        if (var < 0) var = 0;
        c = (float)cd;
        rstd = (float)(1.0 / sqrt(var + (double)a->eps));
        if (a->mean) a->mean[row] = (float)((double)s + cd);
        *shift = (float)((double)s + cd);
    }
    if (a->rstd) a->rstd[row] = rstd;
    kern__s_norm_fc_dt(a, h, sc, o, s, rstd, -c * rstd, pf);
}

/* ---- backward ---- */

/* H elements of dtype dt to f32 (lanes past H zeroed in the padding) */
KERN__AINLINE void kern__s_norm_cvt(const void *p, const kern_dtype dt, float *o, const int64_t H) {
    int64_t i = 0;
    for (; i + 1 <= H; i += 1) (*(float *)(o + i) = (kern__s_norm_ldw(p, dt, i, 1)));
    if (i < H) (*(float *)(o + i) = (kern__s_norm_ldw(p, dt, i, H - i)));
}

/* Pass 1 on f32 rows, specialized on (act, dw, db): g = dz w with
 * dz = dout act'(z), z = xhat w + b (act' the shared kern__v_act_grad, as
 * kern_activation_backward); sums of g and g xhat; the row's share of
 * dweight (dw) and of dbias (db). g may overwrite dy. */
KERN__AINLINE void kern__s_norm_b1(const float *x, const float *dy, float *g, const int64_t H,
                                                 const float s, const float rstd, const float nb, const float *w,
                                                 const float *b, const kern_act act, const int dw, const int db,
                                                 float *pw, float *pb, double *sg, double *sgx) {
    const float vs = (s), vr = (rstd), vnb = (nb);
    float ag = 0.0f, agx = 0.0f, bg = 0.0f, bgx = 0.0f;
    int64_t i = 0;
    *sg = *sgx = 0.0;
    /* padding lanes of the last vector: dy is 0 there (zeroed by the
     * conversion, or by the partial load), so dz, g and every sum get 0 */
    while (i < H) { /* blocks of 2 KERN__NORM_BLK vectors, flushed into double */
        const int64_t e = H - i > KERN__NORM_BLK * 2 * 1 ? i + KERN__NORM_BLK * 2 * 1 : H;
        for (; i < e; i += 1) {
            const int full = i + 1 <= H;
            float xv = full ? (*(const float *)(x + i)) : (*(const float *)(x + i));
            float dz = full ? (*(const float *)(dy + i)) : (*(const float *)(dy + i));
            float wv = (*(const float *)(w + i)); /* w, b, pw, pb are padded to Hp */
            float xh = kern__s_fma(((xv) - (vs)), vr, vnb), gv;
            if (act != KERN_ACT_NONE) dz = kern__s_mul(dz, kern__s_act_grad(kern__s_fma(xh, wv, (*(const float *)(b + i))), act));
            if (dw) (*(float *)(pw + i) = (kern__s_fma(dz, xh, (*(const float *)(pw + i)))));
            if (db) (*(float *)(pb + i) = (((dz) + ((*(const float *)(pb + i))))));
            gv = kern__s_mul(dz, wv);
            (*(float *)(g + i) = (gv));
            if ((i / 1) & 1) {
                bg = ((bg) + (gv));
                bgx = kern__s_fma(gv, xh, bgx);
            } else {
                ag = ((ag) + (gv));
                agx = kern__s_fma(gv, xh, agx);
            }
        }
        *sg += kern__s_norm_hsum(((ag) + (bg)));
        *sgx += kern__s_norm_hsum(((agx) + (bgx)));
        ag = agx = bg = bgx = 0.0f;
    }
}
/* Pass 1 for the activation and the wanted partials of the op. */
static void kern__s_norm_b1_dt(const kern__norm_bwd *a, const float *x, const float *dy, float *g,
                                             float s, float rstd, float nb, float *pw, float *pb, double *sg,
                                             double *sgx) {
#define KERN__NORM_B1(A, DW, DB) kern__s_norm_b1(x, dy, g, a->H, s, rstd, nb, a->w, a->b, A, DW, DB, pw, pb, sg, sgx)
#define KERN__NORM_B1P(A)                                                                          \
    if (pw && pb) KERN__NORM_B1(A, 1, 1);                                                          \
    else if (pw) KERN__NORM_B1(A, 1, 0);                                                           \
    else if (pb) KERN__NORM_B1(A, 0, 1);                                                           \
    else KERN__NORM_B1(A, 0, 0);
    KERN__ACT_DISPATCH(a->act, KERN__NORM_B1P)
#undef KERN__NORM_B1P
#undef KERN__NORM_B1
}

/* Pass 2, specialized on (dx dtype, dresidual dtype or none):
 * dx = rstd (g - mean(g) - xhat mean(g xhat)) + dresidual. */
KERN__AINLINE void kern__s_norm_b2(const float *x, const float *g, void *dx, const kern_dtype dxdt,
                                                 const void *dr, const kern_dtype drdt, const int64_t H,
                                                 const float s, const float rstd, const float nb, const float mg,
                                                 const float mgx, const kern__norm_pf *pf) {
    const float vs = (s), vr = (rstd), vnb = (nb), vmg = (mg), vmgx = (mgx);
    int64_t i = 0;
    for (; i < H; i += 1) {
        const int64_t n = H - i < 1 ? H - i : 1;
        float xv, xh, t;
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        xv = n == 1 ? (*(const float *)(x + i)) : (*(const float *)(x + i));
        xh = kern__s_fma(((xv) - (vs)), vr, vnb);
        t = kern__s_mul(kern__s_fma(-(xh), vmgx, (((*(const float *)(g + i))) - (vmg))), vr);
        if (drdt != KERN_DTYPE_NONE)
            t = ((t) + (n == 1 ? kern__s_norm_ldw(dr, drdt, i, 1) : kern__s_norm_ldw(dr, drdt, i, n)));
        if (n == 1) kern__s_norm_st(dx, dxdt, i, 1, t, 0);
        else kern__s_norm_st(dx, dxdt, i, n, t, 0);
    }
}
/* Pass 2 for the row's dtypes. */
static void kern__s_norm_b2_dt(const kern__norm_bwd *a, const float *x, const float *g, void *dx,
                                             const void *dr, float s, float rstd, float nb, float mg, float mgx,
                                             const kern__norm_pf *pf) {
    const kern_dtype drdt = dr ? a->dr.dt : KERN_DTYPE_NONE;
#define KERN__NORM_B2(OD, RD) kern__s_norm_b2(x, g, dx, OD, dr, RD, a->H, s, rstd, nb, mg, mgx, pf)
#define KERN__NORM_B2R(OD)                                                                         \
    do {                                                                                           \
        if (drdt == KERN_F32) KERN__NORM_B2(OD, KERN_F32);                                         \
        else if (drdt == KERN_BF16) KERN__NORM_B2(OD, KERN_BF16);                                  \
        else if (drdt == KERN_F16) KERN__NORM_B2(OD, KERN_F16);                                    \
        else KERN__NORM_B2(OD, KERN_DTYPE_NONE);                                                   \
    } while (0)
    if (a->dx.dt == KERN_F32) KERN__NORM_B2R(KERN_F32);
    else if (a->dx.dt == KERN_BF16) KERN__NORM_B2R(KERN_BF16);
    else KERN__NORM_B2R(KERN_F16);
#undef KERN__NORM_B2R
#undef KERN__NORM_B2
}

/* Backward of one row: x and dout are brought to f32 rows in scratch
 * (unless already f32), pass 1 forms g (kept in scratch) and the sums,
 * pass 2 writes dx. */
static void kern__s_norm_bwd_row(const kern__norm_bwd *a, const void *dy, const void *x, void *dx,
                                               const void *dr, float *sc, int64_t row, float *pw, float *pb,
                                               const kern__norm_pf *pf) {
    const int64_t H = a->H;
    float *xs = sc, *gs = sc + a->Hp;
    const float *xf = (const float *)x, *dyf = (const float *)dy;
    float s, c, rstd, nb;
    double sg, sgx;
    if (a->x.dt == KERN_BF16) { kern__s_norm_cvt(x, KERN_BF16, xs, H); xf = xs; }
    else if (a->x.dt == KERN_F16) { kern__s_norm_cvt(x, KERN_F16, xs, H); xf = xs; }
    if (a->dy.dt == KERN_BF16) { kern__s_norm_cvt(dy, KERN_BF16, gs, H); dyf = gs; }
    else if (a->dy.dt == KERN_F16) { kern__s_norm_cvt(dy, KERN_F16, gs, H); dyf = gs; }
    if (a->rstd) {
        rstd = a->rstd[row];
        s = a->rms ? 0.0f : a->mean[row];
        c = 0.0f;
    } else {
        kern__s_norm_xstats(xf, H, a->rms, a->eps, &s, &c, &rstd);
    }
    nb = -c * rstd;
    kern__s_norm_b1_dt(a, xf, dyf, gs, s, rstd, nb, pw, pb, &sg, &sgx);
    kern__s_norm_b2_dt(a, xf, gs, dx, dr, s, rstd, nb, a->rms ? 0.0f : (float)(sg / (double)H),
                            (float)(sgx / (double)H), pf);
}

/* ---- elementwise ---- */

/* out = act(p + bias) over n elements, act constant after inlining. */
KERN__AINLINE void kern__s_norm_ew_act(const kern__norm_ew *e, const void *p, void *o,
                                                     const float *bias, int64_t n, const kern_act act) {
    int64_t i;
    for (i = 0; i < n; i += 1) {
        const int64_t m = n - i < 1 ? n - i : 1;
        float v = kern__s_norm_ld(p, e->a.dt, i, m);
        if (bias) v = ((v) + (m == 1 ? (*(const float *)(bias + i)) : (*(const float *)(bias + i))));
        kern__s_norm_st(o, e->o.dt, i, m, kern__s_norm_act(v, act), e->nt);
    }
}
/* out = p act'(q) (the backward: p = dout, q = x). */
KERN__AINLINE void kern__s_norm_ew_grad(const kern__norm_ew *e, const void *p, const void *q, void *o,
                                                      int64_t n, const kern_act act) {
    int64_t i;
    for (i = 0; i < n; i += 1) {
        const int64_t m = n - i < 1 ? n - i : 1;
        float v;
        if (act != KERN_ACT_NONE)
            v = kern__s_mul(kern__s_norm_ldw(p, e->a.dt, i, m), kern__s_act_grad(kern__s_norm_ldw(q, e->b.dt, i, m), act));
        else
            v = kern__s_norm_ld(p, e->a.dt, i, m);
        kern__s_norm_st(o, e->o.dt, i, m, v, e->nt);
    }
}
/* Elementwise segment of n elements: add, (bias +) activation, or the
 * activation's backward. */
static void kern__s_norm_ew_seg(const kern__norm_ew *e, const void *p, const void *q, void *o,
                                              const float *bias, int64_t n) {
    int64_t i;
    if (e->op == KERN__NORM_EW_ADD) {
        for (i = 0; i < n; i += 1) {
            const int64_t m = n - i < 1 ? n - i : 1;
            float v = ((kern__s_norm_ldw(p, e->a.dt, i, m)) + (kern__s_norm_ldw(q, e->b.dt, i, m)));
            kern__s_norm_st(o, e->o.dt, i, m, v, e->nt);
        }
    } else if (e->op == KERN__NORM_EW_ACT) {
#define KERN__NORM_EW(A) kern__s_norm_ew_act(e, p, o, bias, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__NORM_EW)
#undef KERN__NORM_EW
    } else {
#define KERN__NORM_EW(A) kern__s_norm_ew_grad(e, p, q, o, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__NORM_EW)
#undef KERN__NORM_EW
    }
}
#ifdef KERN_X86
/* ---- avx2 ---- */
/* n elements of dtype dt from element i of p as f32 lanes (n >= 8: a full
 * vector; else the first n, the rest 0, nothing past the row read). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_norm_ld__avx2(const void *p, kern_dtype dt, int64_t i, int64_t n) {
    return kern__v_load_f32__avx2((const char *)p + i * kern__norm_es(dt), dt, n >= 8 ? 8 : (int)n);
}
/* The same for values that go through arithmetic before anything is
 * stored (the statistics, the normalized row, the backward's rows, the
 * add): a full bf16 vector is widened without kern__v_load_f32's quieting
 * of signalling NaNs, which the arithmetic does anyway (4 instructions
 * fewer per vector on AVX2: residual + LayerNorm bf16 was 11% slower with
 * them). Tails and the other dtypes take the shared load. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_norm_ldw__avx2(const void *p, kern_dtype dt, int64_t i, int64_t n) {
    if (dt == KERN_BF16 && n >= 8)
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i))), 16));
    return kern__v_norm_ld__avx2(p, dt, i, n);
}
/* min(n, 8) lanes to element i of p in dtype dt (round to nearest even);
 * nt streams a full vector whose address is aligned to the store width. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_norm_st__avx2(void *p, kern_dtype dt, int64_t i, int64_t n, __m256 v, int nt) {
    const int64_t es = kern__norm_es(dt);
    char *q = (char *)p + i * es;
    const int full = n >= 8;
    kern__v_store_f32__avx2(q, dt, v, full ? 8 : (int)n,
                           nt && full && !((uintptr_t)q & (uintptr_t)(es * 8 - 1)));
}
/* v with the lanes from n on set to 0 */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_norm_keep__avx2(__m256 v, int64_t n) {
    __m256 m = kern__loadn__avx2(kern__norm_ones, n <= 0 ? 0 : n >= 8 ? 8 : (int)n);
    (void)n;
    return _mm256_blendv_ps(_mm256_setzero_ps(), v, _mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_GT_OQ));
}
/* (p[i..] as f32) - m, lanes past n zeroed */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_norm_ldd__avx2(const void *p, kern_dtype dt, int64_t i, int64_t n, __m256 m) {
    __m256 d = _mm256_sub_ps(kern__v_norm_ldw__avx2(p, dt, i, n), m);
    return n >= 8 ? d : kern__v_norm_keep__avx2(d, n);
}
/* the lanes summed in double, in lane order */
KERN_TARGET_AVX2 KERN__AINLINE double kern__v_norm_hsum__avx2(__m256 v) {
    float t[8];
    double s = 0;
    int k;
    _mm256_storeu_ps(t, v);
    for (k = 0; k < 8; k++) s += t[k];
    return s;
}

/* sum(d) and sum(d^2) of d = h - mh over a row, two accumulators each. */
KERN_TARGET_AVX2 static void kern__v_norm_passB__avx2(const void *h, kern_dtype dt, int64_t H, float mh, double *s1,
                                             double *s2) {
    const __m256 vm = _mm256_set1_ps(mh);
    const int64_t end2 = H - H % (2 * 8);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    int64_t i = 0;
    *s1 = *s2 = 0.0;
    while (i < end2) { /* blocks of KERN__NORM_BLK steps, flushed into double */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 8 ? i + KERN__NORM_BLK * 2 * 8 : end2;
        for (; i < e; i += 2 * 8) {
            __m256 d0 = _mm256_sub_ps(kern__v_norm_ldw__avx2(h, dt, i, 8), vm);
            __m256 d1 = _mm256_sub_ps(kern__v_norm_ldw__avx2(h, dt, i + 8, 8), vm);
            a0 = _mm256_add_ps(a0, d0);
            a1 = _mm256_add_ps(a1, d1);
            b0 = _mm256_fmadd_ps(d0, d0, b0);
            b1 = _mm256_fmadd_ps(d1, d1, b1);
        }
        *s1 += kern__v_norm_hsum__avx2(_mm256_add_ps(a0, a1));
        *s2 += kern__v_norm_hsum__avx2(_mm256_add_ps(b0, b1));
        a0 = a1 = b0 = b1 = _mm256_setzero_ps();
    }
    for (; i < H; i += 8) {
        __m256 d = kern__v_norm_ldd__avx2(h, dt, i, H - i, vm);
        a0 = _mm256_add_ps(a0, d);
        b0 = _mm256_fmadd_ps(d, d, b0);
    }
    *s1 += kern__v_norm_hsum__avx2(a0);
    *s2 += kern__v_norm_hsum__avx2(b0);
}

/* Statistics of an f32 row read from x (backward without saved
 * statistics): the same corrected two-pass scheme as the forward. */
KERN_TARGET_AVX2 static void kern__v_norm_xstats__avx2(const float *x, int64_t H, int rms, float eps, float *mh, float *c,
                                              float *rstd) {
    const int64_t end2 = H - H % (2 * 8);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    double sum = 0.0;
    int64_t i = 0;
    while (i < end2) { /* blocks flushed into double, as passB */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 8 ? i + KERN__NORM_BLK * 2 * 8 : end2;
        for (; i < e; i += 2 * 8) {
            __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
            if (rms) {
                a0 = _mm256_fmadd_ps(v0, v0, a0);
                a1 = _mm256_fmadd_ps(v1, v1, a1);
            } else {
                a0 = _mm256_add_ps(a0, v0);
                a1 = _mm256_add_ps(a1, v1);
            }
        }
        sum += kern__v_norm_hsum__avx2(_mm256_add_ps(a0, a1));
        a0 = a1 = _mm256_setzero_ps();
    }
    for (; i < H; i += 8) {
        __m256 v = kern__v_norm_ld__avx2(x, KERN_F32, i, H - i);
        a0 = rms ? _mm256_fmadd_ps(v, v, a0) : _mm256_add_ps(a0, v);
    }
    sum += kern__v_norm_hsum__avx2(a0);
    if (rms) {
        *mh = 0.0f;
        *c = 0.0f;
        *rstd = (float)(1.0 / sqrt(sum / (double)H + (double)eps));
    } else {
        double s1, s2, cd, var;
        *mh = (float)(sum / (double)H);
        kern__v_norm_passB__avx2(x, KERN_F32, H, *mh, &s1, &s2);
        cd = s1 / (double)H;
        var = s2 / (double)H - cd * cd;
        if (var < 0) var = 0;
        *c = (float)cd;
        *rstd = (float)(1.0 / sqrt(var + (double)eps));
    }
}

/* The activation of the row kernels: kern__v_act__avx2's bits. GELU (erf)
 * keeps the shared function's fast check inline (x Phi(x) when no lane is
 * below -3) and calls the whole shared kern__v_gelu out of line for a
 * vector that has such a lane: inlined, that rare form's registers pushed
 * the loops' constants out of registers (LayerNorm + GELU 9-15% slower on
 * AVX2 than the former private form). */
KERN_TARGET_AVX2 KERN__NORM_COLD static __m256 kern__v_norm_gelu_tail__avx2(__m256 x) { return kern__v_gelu__avx2(x); }
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_norm_act__avx2(__m256 x, const kern_act act) {
    if (act == KERN_ACT_GELU) {
        if ((_mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_set1_ps(KERN__M_GELU_LO), _CMP_LT_OQ)) != 0)) return kern__v_norm_gelu_tail__avx2(x);
        return kern__mul__avx2(x, kern__v_gelu_phi__avx2(x));
    }
    return kern__v_act__avx2(x, act);
}
/* ---- forward ---- */

/* Pass A, specialized on (x dtype, residual dtype or none, rms): h = x (+ r)
 * in f32, kept in scratch when it is not x itself; sums of d = h - s and
 * d^2 (s: the shift), or of h^2 for RMSNorm. Two vectors per step: the
 * sums are latency chains. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_norm_fa__avx2(const void *x, const kern_dtype xdt, const void *r,
                                                 const kern_dtype rdt, float *sc, const int64_t H, const float s,
                                                 const int rms, double *o1, double *o2) {
    const int store_sc = rdt != KERN_DTYPE_NONE || xdt != KERN_F32;
    const int64_t end2 = H - H % (2 * 8);
    const __m256 vs = _mm256_set1_ps(s);
    __m256 a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps(), b2 = _mm256_setzero_ps();
    int64_t i = 0;
    *o1 = *o2 = 0.0;
    while (i < end2) { /* blocks of KERN__NORM_BLK steps, flushed into double */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 8 ? i + KERN__NORM_BLK * 2 * 8 : end2;
        for (; i < e; i += 2 * 8) {
            __m256 v0 = kern__v_norm_ldw__avx2(x, xdt, i, 8), v1 = kern__v_norm_ldw__avx2(x, xdt, i + 8, 8);
            if (rdt != KERN_DTYPE_NONE) {
                v0 = _mm256_add_ps(v0, kern__v_norm_ldw__avx2(r, rdt, i, 8));
                v1 = _mm256_add_ps(v1, kern__v_norm_ldw__avx2(r, rdt, i + 8, 8));
            }
            if (store_sc) {
                _mm256_storeu_ps(sc + i, v0);
                _mm256_storeu_ps(sc + i + 8, v1);
            }
            if (rms) {
                a2 = _mm256_fmadd_ps(v0, v0, a2);
                b2 = _mm256_fmadd_ps(v1, v1, b2);
            } else {
                __m256 d0 = _mm256_sub_ps(v0, vs), d1 = _mm256_sub_ps(v1, vs);
                a1 = _mm256_add_ps(a1, d0);
                b1 = _mm256_add_ps(b1, d1);
                a2 = _mm256_fmadd_ps(d0, d0, a2);
                b2 = _mm256_fmadd_ps(d1, d1, b2);
            }
        }
        if (!rms) *o1 += kern__v_norm_hsum__avx2(_mm256_add_ps(a1, b1));
        *o2 += kern__v_norm_hsum__avx2(_mm256_add_ps(a2, b2));
        a1 = a2 = b1 = b2 = _mm256_setzero_ps();
    }
    for (; i < H; i += 8) {
        const int full = i + 8 <= H;
        __m256 v = full ? kern__v_norm_ldw__avx2(x, xdt, i, 8) : kern__v_norm_ldw__avx2(x, xdt, i, H - i);
        if (rdt != KERN_DTYPE_NONE)
            v = _mm256_add_ps(v, full ? kern__v_norm_ldw__avx2(r, rdt, i, 8) : kern__v_norm_ldw__avx2(r, rdt, i, H - i));
        if (store_sc) _mm256_storeu_ps(sc + i, v);
        if (rms) {
            a2 = _mm256_fmadd_ps(v, v, a2);
        } else {
            __m256 d = _mm256_sub_ps(v, vs);
            if (!full) d = kern__v_norm_keep__avx2(d, H - i);
            a1 = _mm256_add_ps(a1, d);
            a2 = _mm256_fmadd_ps(d, d, a2);
        }
    }
    if (!rms) *o1 += kern__v_norm_hsum__avx2(a1);
    *o2 += kern__v_norm_hsum__avx2(a2);
}
/* Pass A for the row's dtypes (the specializations above). */
KERN_TARGET_AVX2 static void kern__v_norm_fa_dt__avx2(const void *x, kern_dtype xdt, const void *r, kern_dtype rdt,
                                             float *sc, int64_t H, float s, int rms, double *o1, double *o2) {
#define KERN__NORM_FA(XD, RD)                                                                      \
    do {                                                                                           \
        if (rms) kern__v_norm_fa__avx2(x, XD, r, RD, sc, H, s, 1, o1, o2);                          \
        else kern__v_norm_fa__avx2(x, XD, r, RD, sc, H, s, 0, o1, o2);                              \
    } while (0)
#define KERN__NORM_FA_R(XD)                                                                        \
    do {                                                                                           \
        if (rdt == KERN_F32) KERN__NORM_FA(XD, KERN_F32);                                          \
        else if (rdt == KERN_BF16) KERN__NORM_FA(XD, KERN_BF16);                                   \
        else if (rdt == KERN_F16) KERN__NORM_FA(XD, KERN_F16);                                     \
        else KERN__NORM_FA(XD, KERN_DTYPE_NONE);                                                   \
    } while (0)
    if (xdt == KERN_F32) KERN__NORM_FA_R(KERN_F32);
    else if (xdt == KERN_BF16) KERN__NORM_FA_R(KERN_BF16);
    else KERN__NORM_FA_R(KERN_F16);
#undef KERN__NORM_FA_R
#undef KERN__NORM_FA
}

/* Pass C, specialized on (out dtype, act): y = act(((h - s) rstd - c rstd)
 * w + b), the activation kern__v_act's bits (so kern_norm followed by
 * kern_activation gives the same bits); w and b are always arrays (ones /
 * zeros when absent). With an activation and a bf16 / f16 output, y goes
 * to the f32 row ys first (it may be h itself) and is converted in a
 * second loop: the activation's and the rounding's constants together do
 * not fit the 16 vector registers of AVX2, and the compiler rebuilt the
 * rounding constants every vector (LayerNorm + GELU bf16 15% slower). */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_norm_fc__avx2(const float *h, float *ys, void *o, const kern_dtype odt,
                                                 const kern_act act, const int64_t H, const float s,
                                                 const float rstd, const float nb, const float *w, const float *b,
                                                 const int nt, const kern__norm_pf *pf) {
    const __m256 vs = _mm256_set1_ps(s), vr = _mm256_set1_ps(rstd), vnb = _mm256_set1_ps(nb);
    const int split = act != KERN_ACT_NONE && odt != KERN_F32;
    int64_t i = 0;
    /* two vectors a step, except for GELU (erf), whose long chains the
     * core overlaps better one vector a step (AVX2: 1.56 vs 1.93 us for a
     * 1x4096 f32 row without activation, 4.96 vs 4.80 us with GELU) */
    for (; act != KERN_ACT_GELU && i + 2 * 8 <= H; i += 2 * 8) {
        __m256 y0 = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(h + i), vs), vr, vnb);
        __m256 y1 = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(h + i + 8), vs), vr, vnb);
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        if (!((i + 8) & 15)) kern__norm_prefetch(pf, i + 8);
        y0 = _mm256_fmadd_ps(y0, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i));
        y1 = _mm256_fmadd_ps(y1, _mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(b + i + 8));
        y0 = kern__v_act__avx2(y0, act);
        y1 = kern__v_act__avx2(y1, act);
        if (split) {
            _mm256_storeu_ps(ys + i, y0);
            _mm256_storeu_ps(ys + i + 8, y1);
        } else {
            kern__v_norm_st__avx2(o, odt, i, 8, y0, nt);
            kern__v_norm_st__avx2(o, odt, i + 8, 8, y1, nt);
        }
    }
    for (; i + 8 <= H; i += 8) {
        __m256 y = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(h + i), vs), vr, vnb);
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        y = kern__v_norm_act__avx2(_mm256_fmadd_ps(y, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i)), act);
        if (split) _mm256_storeu_ps(ys + i, y);
        else kern__v_norm_st__avx2(o, odt, i, 8, y, nt);
    }
    if (i < H) {
        const int n = (int)(H - i);
        __m256 y = _mm256_fmadd_ps(_mm256_sub_ps(kern__loadn__avx2(h + i, n), vs), vr, vnb);
        y = kern__v_norm_act__avx2(_mm256_fmadd_ps(y, kern__loadn__avx2(w + i, n), kern__loadn__avx2(b + i, n)), act);
        if (split) kern__storen__avx2(ys + i, y, n);
        else kern__v_norm_st__avx2(o, odt, i, n, y, nt);
    }
    if (split) {
        for (i = 0; i + 8 <= H; i += 8) kern__v_norm_st__avx2(o, odt, i, 8, _mm256_loadu_ps(ys + i), nt);
        if (i < H) kern__v_norm_st__avx2(o, odt, i, H - i, kern__loadn__avx2(ys + i, (int)(H - i)), nt);
    }
}
/* Pass C for the output dtype and activation of the op. */
KERN_TARGET_AVX2 static void kern__v_norm_fc_dt__avx2(const kern__norm_fwd *a, const float *h, float *ys, void *o, float s,
                                             float rstd, float nb, const kern__norm_pf *pf) {
#define KERN__NORM_FC(OD, A) kern__v_norm_fc__avx2(h, ys, o, OD, A, a->H, s, rstd, nb, a->w, a->b, a->nt, pf);
#define KERN__NORM_FC_F32(A) KERN__NORM_FC(KERN_F32, A)
#define KERN__NORM_FC_BF16(A) KERN__NORM_FC(KERN_BF16, A)
#define KERN__NORM_FC_F16(A) KERN__NORM_FC(KERN_F16, A)
    if (a->o.dt == KERN_F32) {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_F32)
    } else if (a->o.dt == KERN_BF16) {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_BF16)
    } else {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_F16)
    }
#undef KERN__NORM_FC_F16
#undef KERN__NORM_FC_BF16
#undef KERN__NORM_FC_F32
#undef KERN__NORM_FC
}

/* residual_out from the f32 row, specialized on its dtype */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_norm_fro__avx2(const float *h, void *o, const kern_dtype odt, const int64_t H,
                                                  const int nt) {
    int64_t i = 0;
    for (; i + 8 <= H; i += 8) kern__v_norm_st__avx2(o, odt, i, 8, _mm256_loadu_ps(h + i), nt);
    if (i < H) kern__v_norm_st__avx2(o, odt, i, H - i, kern__loadn__avx2(h + i, (int)(H - i)), nt);
}

/* Forward of one row. Pass A reads x (+ residual) once from memory and
 * keeps the f32 row in thread scratch (x itself is re-read from cache when
 * it is f32 and there is no residual), with one-pass statistics shifted by
 * the previous row's mean (or the row's first element): d = h - s,
 * c = mean(d), var = mean(d^2) - c^2. When the shift was poor (c^2 > var/4:
 * the subtraction would cancel) the exact second pass over the cached row
 * runs instead, so accuracy never depends on the shift. Pass C normalizes
 * ((h - s) - c) rstd, which keeps a large mean's f32 rounding out of the
 * output. */
KERN_TARGET_AVX2 static void kern__v_norm_fwd_row__avx2(const kern__norm_fwd *a, const void *x, const void *r, void *o,
                                               void *ro, float *sc, int64_t row, float *shift,
                                               const kern__norm_pf *pf) {
    const int64_t H = a->H;
    const kern_dtype xdt = a->x.dt, rdt = r ? a->r.dt : KERN_DTYPE_NONE;
    const float *h = (r || xdt != KERN_F32) ? sc : (const float *)x;
    float s, c = 0.0f, rstd;
    double s1 = 0, s2 = 0;
    if (a->rms) s = 0.0f;
    else if (*shift == *shift) s = *shift;
    else s = kern__s_load_f32(x, xdt, 1) + (r ? kern__s_load_f32(r, rdt, 1) : 0.0f);
    if (s != s || s - s != 0) s = 0.0f; /* NaN/Inf first element */
    kern__v_norm_fa_dt__avx2(x, xdt, r, rdt, sc, H, s, a->rms, &s1, &s2);
    if (ro) {
        if (a->ro.dt == KERN_F32) kern__v_norm_fro__avx2(h, ro, KERN_F32, H, a->nt);
        else if (a->ro.dt == KERN_BF16) kern__v_norm_fro__avx2(h, ro, KERN_BF16, H, a->nt);
        else kern__v_norm_fro__avx2(h, ro, KERN_F16, H, a->nt);
    }
    if (a->rms) {
        rstd = (float)(1.0 / sqrt(s2 / (double)H + (double)a->eps));
    } else {
        double cd = s1 / (double)H, m2 = s2 / (double)H, var = m2 - cd * cd;
        if (!(cd * cd <= 0.25 * var)) { /* poor shift (or NaN): exact second pass */
            s = (float)((double)s + cd);
            if (s != s || s - s != 0) s = 0.0f;
            kern__v_norm_passB__avx2(h, KERN_F32, H, s, &s1, &s2);
            cd = s1 / (double)H;
            var = s2 / (double)H - cd * cd;
        }
        if (var < 0) var = 0;
        c = (float)cd;
        rstd = (float)(1.0 / sqrt(var + (double)a->eps));
        if (a->mean) a->mean[row] = (float)((double)s + cd);
        *shift = (float)((double)s + cd);
    }
    if (a->rstd) a->rstd[row] = rstd;
    kern__v_norm_fc_dt__avx2(a, h, sc, o, s, rstd, -c * rstd, pf);
}

/* ---- backward ---- */

/* H elements of dtype dt to f32 (lanes past H zeroed in the padding) */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_norm_cvt__avx2(const void *p, const kern_dtype dt, float *o, const int64_t H) {
    int64_t i = 0;
    for (; i + 8 <= H; i += 8) _mm256_storeu_ps(o + i, kern__v_norm_ldw__avx2(p, dt, i, 8));
    if (i < H) _mm256_storeu_ps(o + i, kern__v_norm_ldw__avx2(p, dt, i, H - i));
}

/* Pass 1 on f32 rows, specialized on (act, dw, db): g = dz w with
 * dz = dout act'(z), z = xhat w + b (act' the shared kern__v_act_grad, as
 * kern_activation_backward); sums of g and g xhat; the row's share of
 * dweight (dw) and of dbias (db). g may overwrite dy. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_norm_b1__avx2(const float *x, const float *dy, float *g, const int64_t H,
                                                 const float s, const float rstd, const float nb, const float *w,
                                                 const float *b, const kern_act act, const int dw, const int db,
                                                 float *pw, float *pb, double *sg, double *sgx) {
    const __m256 vs = _mm256_set1_ps(s), vr = _mm256_set1_ps(rstd), vnb = _mm256_set1_ps(nb);
    __m256 ag = _mm256_setzero_ps(), agx = _mm256_setzero_ps(), bg = _mm256_setzero_ps(), bgx = _mm256_setzero_ps();
    int64_t i = 0;
    *sg = *sgx = 0.0;
    /* padding lanes of the last vector: dy is 0 there (zeroed by the
     * conversion, or by the partial load), so dz, g and every sum get 0 */
    while (i < H) { /* blocks of 2 KERN__NORM_BLK vectors, flushed into double */
        const int64_t e = H - i > KERN__NORM_BLK * 2 * 8 ? i + KERN__NORM_BLK * 2 * 8 : H;
        for (; i < e; i += 8) {
            const int full = i + 8 <= H;
            __m256 xv = full ? _mm256_loadu_ps(x + i) : kern__loadn__avx2(x + i, (int)(H - i));
            __m256 dz = full ? _mm256_loadu_ps(dy + i) : kern__loadn__avx2(dy + i, (int)(H - i));
            __m256 wv = _mm256_loadu_ps(w + i); /* w, b, pw, pb are padded to Hp */
            __m256 xh = _mm256_fmadd_ps(_mm256_sub_ps(xv, vs), vr, vnb), gv;
            if (act != KERN_ACT_NONE) dz = kern__mul__avx2(dz, kern__v_act_grad__avx2(_mm256_fmadd_ps(xh, wv, _mm256_loadu_ps(b + i)), act));
            if (dw) _mm256_storeu_ps(pw + i, _mm256_fmadd_ps(dz, xh, _mm256_loadu_ps(pw + i)));
            if (db) _mm256_storeu_ps(pb + i, _mm256_add_ps(dz, _mm256_loadu_ps(pb + i)));
            gv = kern__mul__avx2(dz, wv);
            _mm256_storeu_ps(g + i, gv);
            if ((i / 8) & 1) {
                bg = _mm256_add_ps(bg, gv);
                bgx = _mm256_fmadd_ps(gv, xh, bgx);
            } else {
                ag = _mm256_add_ps(ag, gv);
                agx = _mm256_fmadd_ps(gv, xh, agx);
            }
        }
        *sg += kern__v_norm_hsum__avx2(_mm256_add_ps(ag, bg));
        *sgx += kern__v_norm_hsum__avx2(_mm256_add_ps(agx, bgx));
        ag = agx = bg = bgx = _mm256_setzero_ps();
    }
}
/* Pass 1 for the activation and the wanted partials of the op. */
KERN_TARGET_AVX2 static void kern__v_norm_b1_dt__avx2(const kern__norm_bwd *a, const float *x, const float *dy, float *g,
                                             float s, float rstd, float nb, float *pw, float *pb, double *sg,
                                             double *sgx) {
#define KERN__NORM_B1(A, DW, DB) kern__v_norm_b1__avx2(x, dy, g, a->H, s, rstd, nb, a->w, a->b, A, DW, DB, pw, pb, sg, sgx)
#define KERN__NORM_B1P(A)                                                                          \
    if (pw && pb) KERN__NORM_B1(A, 1, 1);                                                          \
    else if (pw) KERN__NORM_B1(A, 1, 0);                                                           \
    else if (pb) KERN__NORM_B1(A, 0, 1);                                                           \
    else KERN__NORM_B1(A, 0, 0);
    KERN__ACT_DISPATCH(a->act, KERN__NORM_B1P)
#undef KERN__NORM_B1P
#undef KERN__NORM_B1
}

/* Pass 2, specialized on (dx dtype, dresidual dtype or none):
 * dx = rstd (g - mean(g) - xhat mean(g xhat)) + dresidual. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_norm_b2__avx2(const float *x, const float *g, void *dx, const kern_dtype dxdt,
                                                 const void *dr, const kern_dtype drdt, const int64_t H,
                                                 const float s, const float rstd, const float nb, const float mg,
                                                 const float mgx, const kern__norm_pf *pf) {
    const __m256 vs = _mm256_set1_ps(s), vr = _mm256_set1_ps(rstd), vnb = _mm256_set1_ps(nb), vmg = _mm256_set1_ps(mg), vmgx = _mm256_set1_ps(mgx);
    int64_t i = 0;
    for (; i < H; i += 8) {
        const int64_t n = H - i < 8 ? H - i : 8;
        __m256 xv, xh, t;
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        xv = n == 8 ? _mm256_loadu_ps(x + i) : kern__loadn__avx2(x + i, (int)n);
        xh = _mm256_fmadd_ps(_mm256_sub_ps(xv, vs), vr, vnb);
        t = kern__mul__avx2(_mm256_fnmadd_ps(xh, vmgx, _mm256_sub_ps(_mm256_loadu_ps(g + i), vmg)), vr);
        if (drdt != KERN_DTYPE_NONE)
            t = _mm256_add_ps(t, n == 8 ? kern__v_norm_ldw__avx2(dr, drdt, i, 8) : kern__v_norm_ldw__avx2(dr, drdt, i, n));
        if (n == 8) kern__v_norm_st__avx2(dx, dxdt, i, 8, t, 0);
        else kern__v_norm_st__avx2(dx, dxdt, i, n, t, 0);
    }
}
/* Pass 2 for the row's dtypes. */
KERN_TARGET_AVX2 static void kern__v_norm_b2_dt__avx2(const kern__norm_bwd *a, const float *x, const float *g, void *dx,
                                             const void *dr, float s, float rstd, float nb, float mg, float mgx,
                                             const kern__norm_pf *pf) {
    const kern_dtype drdt = dr ? a->dr.dt : KERN_DTYPE_NONE;
#define KERN__NORM_B2(OD, RD) kern__v_norm_b2__avx2(x, g, dx, OD, dr, RD, a->H, s, rstd, nb, mg, mgx, pf)
#define KERN__NORM_B2R(OD)                                                                         \
    do {                                                                                           \
        if (drdt == KERN_F32) KERN__NORM_B2(OD, KERN_F32);                                         \
        else if (drdt == KERN_BF16) KERN__NORM_B2(OD, KERN_BF16);                                  \
        else if (drdt == KERN_F16) KERN__NORM_B2(OD, KERN_F16);                                    \
        else KERN__NORM_B2(OD, KERN_DTYPE_NONE);                                                   \
    } while (0)
    if (a->dx.dt == KERN_F32) KERN__NORM_B2R(KERN_F32);
    else if (a->dx.dt == KERN_BF16) KERN__NORM_B2R(KERN_BF16);
    else KERN__NORM_B2R(KERN_F16);
#undef KERN__NORM_B2R
#undef KERN__NORM_B2
}

/* Backward of one row: x and dout are brought to f32 rows in scratch
 * (unless already f32), pass 1 forms g (kept in scratch) and the sums,
 * pass 2 writes dx. */
KERN_TARGET_AVX2 static void kern__v_norm_bwd_row__avx2(const kern__norm_bwd *a, const void *dy, const void *x, void *dx,
                                               const void *dr, float *sc, int64_t row, float *pw, float *pb,
                                               const kern__norm_pf *pf) {
    const int64_t H = a->H;
    float *xs = sc, *gs = sc + a->Hp;
    const float *xf = (const float *)x, *dyf = (const float *)dy;
    float s, c, rstd, nb;
    double sg, sgx;
    if (a->x.dt == KERN_BF16) { kern__v_norm_cvt__avx2(x, KERN_BF16, xs, H); xf = xs; }
    else if (a->x.dt == KERN_F16) { kern__v_norm_cvt__avx2(x, KERN_F16, xs, H); xf = xs; }
    if (a->dy.dt == KERN_BF16) { kern__v_norm_cvt__avx2(dy, KERN_BF16, gs, H); dyf = gs; }
    else if (a->dy.dt == KERN_F16) { kern__v_norm_cvt__avx2(dy, KERN_F16, gs, H); dyf = gs; }
    if (a->rstd) {
        rstd = a->rstd[row];
        s = a->rms ? 0.0f : a->mean[row];
        c = 0.0f;
    } else {
        kern__v_norm_xstats__avx2(xf, H, a->rms, a->eps, &s, &c, &rstd);
    }
    nb = -c * rstd;
    kern__v_norm_b1_dt__avx2(a, xf, dyf, gs, s, rstd, nb, pw, pb, &sg, &sgx);
    kern__v_norm_b2_dt__avx2(a, xf, gs, dx, dr, s, rstd, nb, a->rms ? 0.0f : (float)(sg / (double)H),
                            (float)(sgx / (double)H), pf);
}

/* ---- elementwise ---- */

/* out = act(p + bias) over n elements, act constant after inlining. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_norm_ew_act__avx2(const kern__norm_ew *e, const void *p, void *o,
                                                     const float *bias, int64_t n, const kern_act act) {
    int64_t i;
    for (i = 0; i < n; i += 8) {
        const int64_t m = n - i < 8 ? n - i : 8;
        __m256 v = kern__v_norm_ld__avx2(p, e->a.dt, i, m);
        if (bias) v = _mm256_add_ps(v, m == 8 ? _mm256_loadu_ps(bias + i) : kern__loadn__avx2(bias + i, (int)m));
        kern__v_norm_st__avx2(o, e->o.dt, i, m, kern__v_norm_act__avx2(v, act), e->nt);
    }
}
/* out = p act'(q) (the backward: p = dout, q = x). */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_norm_ew_grad__avx2(const kern__norm_ew *e, const void *p, const void *q, void *o,
                                                      int64_t n, const kern_act act) {
    int64_t i;
    for (i = 0; i < n; i += 8) {
        const int64_t m = n - i < 8 ? n - i : 8;
        __m256 v;
        if (act != KERN_ACT_NONE)
            v = kern__mul__avx2(kern__v_norm_ldw__avx2(p, e->a.dt, i, m), kern__v_act_grad__avx2(kern__v_norm_ldw__avx2(q, e->b.dt, i, m), act));
        else
            v = kern__v_norm_ld__avx2(p, e->a.dt, i, m);
        kern__v_norm_st__avx2(o, e->o.dt, i, m, v, e->nt);
    }
}
/* Elementwise segment of n elements: add, (bias +) activation, or the
 * activation's backward. */
KERN_TARGET_AVX2 static void kern__v_norm_ew_seg__avx2(const kern__norm_ew *e, const void *p, const void *q, void *o,
                                              const float *bias, int64_t n) {
    int64_t i;
    if (e->op == KERN__NORM_EW_ADD) {
        for (i = 0; i < n; i += 8) {
            const int64_t m = n - i < 8 ? n - i : 8;
            __m256 v = _mm256_add_ps(kern__v_norm_ldw__avx2(p, e->a.dt, i, m), kern__v_norm_ldw__avx2(q, e->b.dt, i, m));
            kern__v_norm_st__avx2(o, e->o.dt, i, m, v, e->nt);
        }
    } else if (e->op == KERN__NORM_EW_ACT) {
#define KERN__NORM_EW(A) kern__v_norm_ew_act__avx2(e, p, o, bias, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__NORM_EW)
#undef KERN__NORM_EW
    } else {
#define KERN__NORM_EW(A) kern__v_norm_ew_grad__avx2(e, p, q, o, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__NORM_EW)
#undef KERN__NORM_EW
    }
}
/* ---- avx512 ---- */
/* n elements of dtype dt from element i of p as f32 lanes (n >= 16: a full
 * vector; else the first n, the rest 0, nothing past the row read). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_norm_ld__avx512(const void *p, kern_dtype dt, int64_t i, int64_t n) {
    return kern__v_load_f32__avx512((const char *)p + i * kern__norm_es(dt), dt, n >= 16 ? 16 : (int)n);
}
/* The same for values that go through arithmetic before anything is
 * stored (the statistics, the normalized row, the backward's rows, the
 * add): a full bf16 vector is widened without kern__v_load_f32's quieting
 * of signalling NaNs, which the arithmetic does anyway (4 instructions
 * fewer per vector on AVX2: residual + LayerNorm bf16 was 11% slower with
 * them). Tails and the other dtypes take the shared load. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_norm_ldw__avx512(const void *p, kern_dtype dt, int64_t i, int64_t n) {
    if (dt == KERN_BF16 && n >= 16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i))), 16));
    return kern__v_norm_ld__avx512(p, dt, i, n);
}
/* min(n, 16) lanes to element i of p in dtype dt (round to nearest even);
 * nt streams a full vector whose address is aligned to the store width. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_norm_st__avx512(void *p, kern_dtype dt, int64_t i, int64_t n, __m512 v, int nt) {
    const int64_t es = kern__norm_es(dt);
    char *q = (char *)p + i * es;
    const int full = n >= 16;
    kern__v_store_f32__avx512(q, dt, v, full ? 16 : (int)n,
                           nt && full && !((uintptr_t)q & (uintptr_t)(es * 16 - 1)));
}
/* v with the lanes from n on set to 0 */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_norm_keep__avx512(__m512 v, int64_t n) {
    __m512 m = kern__loadn__avx512(kern__norm_ones, n <= 0 ? 0 : n >= 16 ? 16 : (int)n);
    (void)n;
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m, _mm512_setzero_ps(), _CMP_GT_OQ), _mm512_setzero_ps(), v);
}
/* (p[i..] as f32) - m, lanes past n zeroed */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_norm_ldd__avx512(const void *p, kern_dtype dt, int64_t i, int64_t n, __m512 m) {
    __m512 d = _mm512_sub_ps(kern__v_norm_ldw__avx512(p, dt, i, n), m);
    return n >= 16 ? d : kern__v_norm_keep__avx512(d, n);
}
/* the lanes summed in double, in lane order */
KERN_TARGET_AVX512 KERN__AINLINE double kern__v_norm_hsum__avx512(__m512 v) {
    float t[16];
    double s = 0;
    int k;
    _mm512_storeu_ps(t, v);
    for (k = 0; k < 16; k++) s += t[k];
    return s;
}

/* sum(d) and sum(d^2) of d = h - mh over a row, two accumulators each. */
KERN_TARGET_AVX512 static void kern__v_norm_passB__avx512(const void *h, kern_dtype dt, int64_t H, float mh, double *s1,
                                             double *s2) {
    const __m512 vm = _mm512_set1_ps(mh);
    const int64_t end2 = H - H % (2 * 16);
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
    int64_t i = 0;
    *s1 = *s2 = 0.0;
    while (i < end2) { /* blocks of KERN__NORM_BLK steps, flushed into double */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 16 ? i + KERN__NORM_BLK * 2 * 16 : end2;
        for (; i < e; i += 2 * 16) {
            __m512 d0 = _mm512_sub_ps(kern__v_norm_ldw__avx512(h, dt, i, 16), vm);
            __m512 d1 = _mm512_sub_ps(kern__v_norm_ldw__avx512(h, dt, i + 16, 16), vm);
            a0 = _mm512_add_ps(a0, d0);
            a1 = _mm512_add_ps(a1, d1);
            b0 = _mm512_fmadd_ps(d0, d0, b0);
            b1 = _mm512_fmadd_ps(d1, d1, b1);
        }
        *s1 += kern__v_norm_hsum__avx512(_mm512_add_ps(a0, a1));
        *s2 += kern__v_norm_hsum__avx512(_mm512_add_ps(b0, b1));
        a0 = a1 = b0 = b1 = _mm512_setzero_ps();
    }
    for (; i < H; i += 16) {
        __m512 d = kern__v_norm_ldd__avx512(h, dt, i, H - i, vm);
        a0 = _mm512_add_ps(a0, d);
        b0 = _mm512_fmadd_ps(d, d, b0);
    }
    *s1 += kern__v_norm_hsum__avx512(a0);
    *s2 += kern__v_norm_hsum__avx512(b0);
}

/* Statistics of an f32 row read from x (backward without saved
 * statistics): the same corrected two-pass scheme as the forward. */
KERN_TARGET_AVX512 static void kern__v_norm_xstats__avx512(const float *x, int64_t H, int rms, float eps, float *mh, float *c,
                                              float *rstd) {
    const int64_t end2 = H - H % (2 * 16);
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    double sum = 0.0;
    int64_t i = 0;
    while (i < end2) { /* blocks flushed into double, as passB */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 16 ? i + KERN__NORM_BLK * 2 * 16 : end2;
        for (; i < e; i += 2 * 16) {
            __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
            if (rms) {
                a0 = _mm512_fmadd_ps(v0, v0, a0);
                a1 = _mm512_fmadd_ps(v1, v1, a1);
            } else {
                a0 = _mm512_add_ps(a0, v0);
                a1 = _mm512_add_ps(a1, v1);
            }
        }
        sum += kern__v_norm_hsum__avx512(_mm512_add_ps(a0, a1));
        a0 = a1 = _mm512_setzero_ps();
    }
    for (; i < H; i += 16) {
        __m512 v = kern__v_norm_ld__avx512(x, KERN_F32, i, H - i);
        a0 = rms ? _mm512_fmadd_ps(v, v, a0) : _mm512_add_ps(a0, v);
    }
    sum += kern__v_norm_hsum__avx512(a0);
    if (rms) {
        *mh = 0.0f;
        *c = 0.0f;
        *rstd = (float)(1.0 / sqrt(sum / (double)H + (double)eps));
    } else {
        double s1, s2, cd, var;
        *mh = (float)(sum / (double)H);
        kern__v_norm_passB__avx512(x, KERN_F32, H, *mh, &s1, &s2);
        cd = s1 / (double)H;
        var = s2 / (double)H - cd * cd;
        if (var < 0) var = 0;
        *c = (float)cd;
        *rstd = (float)(1.0 / sqrt(var + (double)eps));
    }
}

/* The activation of the row kernels: kern__v_act__avx512's bits. GELU (erf)
 * keeps the shared function's fast check inline (x Phi(x) when no lane is
 * below -3) and calls the whole shared kern__v_gelu out of line for a
 * vector that has such a lane: inlined, that rare form's registers pushed
 * the loops' constants out of registers (LayerNorm + GELU 9-15% slower on
 * AVX2 than the former private form). */
KERN_TARGET_AVX512 KERN__NORM_COLD static __m512 kern__v_norm_gelu_tail__avx512(__m512 x) { return kern__v_gelu__avx512(x); }
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_norm_act__avx512(__m512 x, const kern_act act) {
    if (act == KERN_ACT_GELU) {
        if (((_mm512_cmp_ps_mask(x, _mm512_set1_ps(KERN__M_GELU_LO), _CMP_LT_OQ)) != 0)) return kern__v_norm_gelu_tail__avx512(x);
        return kern__mul__avx512(x, kern__v_gelu_phi__avx512(x));
    }
    return kern__v_act__avx512(x, act);
}
/* ---- forward ---- */

/* Pass A, specialized on (x dtype, residual dtype or none, rms): h = x (+ r)
 * in f32, kept in scratch when it is not x itself; sums of d = h - s and
 * d^2 (s: the shift), or of h^2 for RMSNorm. Two vectors per step: the
 * sums are latency chains. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_norm_fa__avx512(const void *x, const kern_dtype xdt, const void *r,
                                                 const kern_dtype rdt, float *sc, const int64_t H, const float s,
                                                 const int rms, double *o1, double *o2) {
    const int store_sc = rdt != KERN_DTYPE_NONE || xdt != KERN_F32;
    const int64_t end2 = H - H % (2 * 16);
    const __m512 vs = _mm512_set1_ps(s);
    __m512 a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps(), b2 = _mm512_setzero_ps();
    int64_t i = 0;
    *o1 = *o2 = 0.0;
    while (i < end2) { /* blocks of KERN__NORM_BLK steps, flushed into double */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 16 ? i + KERN__NORM_BLK * 2 * 16 : end2;
        for (; i < e; i += 2 * 16) {
            __m512 v0 = kern__v_norm_ldw__avx512(x, xdt, i, 16), v1 = kern__v_norm_ldw__avx512(x, xdt, i + 16, 16);
            if (rdt != KERN_DTYPE_NONE) {
                v0 = _mm512_add_ps(v0, kern__v_norm_ldw__avx512(r, rdt, i, 16));
                v1 = _mm512_add_ps(v1, kern__v_norm_ldw__avx512(r, rdt, i + 16, 16));
            }
            if (store_sc) {
                _mm512_storeu_ps(sc + i, v0);
                _mm512_storeu_ps(sc + i + 16, v1);
            }
            if (rms) {
                a2 = _mm512_fmadd_ps(v0, v0, a2);
                b2 = _mm512_fmadd_ps(v1, v1, b2);
            } else {
                __m512 d0 = _mm512_sub_ps(v0, vs), d1 = _mm512_sub_ps(v1, vs);
                a1 = _mm512_add_ps(a1, d0);
                b1 = _mm512_add_ps(b1, d1);
                a2 = _mm512_fmadd_ps(d0, d0, a2);
                b2 = _mm512_fmadd_ps(d1, d1, b2);
            }
        }
        if (!rms) *o1 += kern__v_norm_hsum__avx512(_mm512_add_ps(a1, b1));
        *o2 += kern__v_norm_hsum__avx512(_mm512_add_ps(a2, b2));
        a1 = a2 = b1 = b2 = _mm512_setzero_ps();
    }
    for (; i < H; i += 16) {
        const int full = i + 16 <= H;
        __m512 v = full ? kern__v_norm_ldw__avx512(x, xdt, i, 16) : kern__v_norm_ldw__avx512(x, xdt, i, H - i);
        if (rdt != KERN_DTYPE_NONE)
            v = _mm512_add_ps(v, full ? kern__v_norm_ldw__avx512(r, rdt, i, 16) : kern__v_norm_ldw__avx512(r, rdt, i, H - i));
        if (store_sc) _mm512_storeu_ps(sc + i, v);
        if (rms) {
            a2 = _mm512_fmadd_ps(v, v, a2);
        } else {
            __m512 d = _mm512_sub_ps(v, vs);
            if (!full) d = kern__v_norm_keep__avx512(d, H - i);
            a1 = _mm512_add_ps(a1, d);
            a2 = _mm512_fmadd_ps(d, d, a2);
        }
    }
    if (!rms) *o1 += kern__v_norm_hsum__avx512(a1);
    *o2 += kern__v_norm_hsum__avx512(a2);
}
/* Pass A for the row's dtypes (the specializations above). */
KERN_TARGET_AVX512 static void kern__v_norm_fa_dt__avx512(const void *x, kern_dtype xdt, const void *r, kern_dtype rdt,
                                             float *sc, int64_t H, float s, int rms, double *o1, double *o2) {
#define KERN__NORM_FA(XD, RD)                                                                      \
    do {                                                                                           \
        if (rms) kern__v_norm_fa__avx512(x, XD, r, RD, sc, H, s, 1, o1, o2);                          \
        else kern__v_norm_fa__avx512(x, XD, r, RD, sc, H, s, 0, o1, o2);                              \
    } while (0)
#define KERN__NORM_FA_R(XD)                                                                        \
    do {                                                                                           \
        if (rdt == KERN_F32) KERN__NORM_FA(XD, KERN_F32);                                          \
        else if (rdt == KERN_BF16) KERN__NORM_FA(XD, KERN_BF16);                                   \
        else if (rdt == KERN_F16) KERN__NORM_FA(XD, KERN_F16);                                     \
        else KERN__NORM_FA(XD, KERN_DTYPE_NONE);                                                   \
    } while (0)
    if (xdt == KERN_F32) KERN__NORM_FA_R(KERN_F32);
    else if (xdt == KERN_BF16) KERN__NORM_FA_R(KERN_BF16);
    else KERN__NORM_FA_R(KERN_F16);
#undef KERN__NORM_FA_R
#undef KERN__NORM_FA
}

/* Pass C, specialized on (out dtype, act): y = act(((h - s) rstd - c rstd)
 * w + b), the activation kern__v_act's bits (so kern_norm followed by
 * kern_activation gives the same bits); w and b are always arrays (ones /
 * zeros when absent). With an activation and a bf16 / f16 output, y goes
 * to the f32 row ys first (it may be h itself) and is converted in a
 * second loop: the activation's and the rounding's constants together do
 * not fit the 16 vector registers of AVX2, and the compiler rebuilt the
 * rounding constants every vector (LayerNorm + GELU bf16 15% slower). */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_norm_fc__avx512(const float *h, float *ys, void *o, const kern_dtype odt,
                                                 const kern_act act, const int64_t H, const float s,
                                                 const float rstd, const float nb, const float *w, const float *b,
                                                 const int nt, const kern__norm_pf *pf) {
    const __m512 vs = _mm512_set1_ps(s), vr = _mm512_set1_ps(rstd), vnb = _mm512_set1_ps(nb);
    const int split = act != KERN_ACT_NONE && odt != KERN_F32;
    int64_t i = 0;
    /* two vectors a step, except for GELU (erf), whose long chains the
     * core overlaps better one vector a step (AVX2: 1.56 vs 1.93 us for a
     * 1x4096 f32 row without activation, 4.96 vs 4.80 us with GELU) */
    for (; act != KERN_ACT_GELU && i + 2 * 16 <= H; i += 2 * 16) {
        __m512 y0 = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(h + i), vs), vr, vnb);
        __m512 y1 = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(h + i + 16), vs), vr, vnb);
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        if (!((i + 16) & 15)) kern__norm_prefetch(pf, i + 16);
        y0 = _mm512_fmadd_ps(y0, _mm512_loadu_ps(w + i), _mm512_loadu_ps(b + i));
        y1 = _mm512_fmadd_ps(y1, _mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(b + i + 16));
        y0 = kern__v_act__avx512(y0, act);
        y1 = kern__v_act__avx512(y1, act);
        if (split) {
            _mm512_storeu_ps(ys + i, y0);
            _mm512_storeu_ps(ys + i + 16, y1);
        } else {
            kern__v_norm_st__avx512(o, odt, i, 16, y0, nt);
            kern__v_norm_st__avx512(o, odt, i + 16, 16, y1, nt);
        }
    }
    for (; i + 16 <= H; i += 16) {
        __m512 y = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(h + i), vs), vr, vnb);
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        y = kern__v_norm_act__avx512(_mm512_fmadd_ps(y, _mm512_loadu_ps(w + i), _mm512_loadu_ps(b + i)), act);
        if (split) _mm512_storeu_ps(ys + i, y);
        else kern__v_norm_st__avx512(o, odt, i, 16, y, nt);
    }
    if (i < H) {
        const int n = (int)(H - i);
        __m512 y = _mm512_fmadd_ps(_mm512_sub_ps(kern__loadn__avx512(h + i, n), vs), vr, vnb);
        y = kern__v_norm_act__avx512(_mm512_fmadd_ps(y, kern__loadn__avx512(w + i, n), kern__loadn__avx512(b + i, n)), act);
        if (split) kern__storen__avx512(ys + i, y, n);
        else kern__v_norm_st__avx512(o, odt, i, n, y, nt);
    }
    if (split) {
        for (i = 0; i + 16 <= H; i += 16) kern__v_norm_st__avx512(o, odt, i, 16, _mm512_loadu_ps(ys + i), nt);
        if (i < H) kern__v_norm_st__avx512(o, odt, i, H - i, kern__loadn__avx512(ys + i, (int)(H - i)), nt);
    }
}
/* Pass C for the output dtype and activation of the op. */
KERN_TARGET_AVX512 static void kern__v_norm_fc_dt__avx512(const kern__norm_fwd *a, const float *h, float *ys, void *o, float s,
                                             float rstd, float nb, const kern__norm_pf *pf) {
#define KERN__NORM_FC(OD, A) kern__v_norm_fc__avx512(h, ys, o, OD, A, a->H, s, rstd, nb, a->w, a->b, a->nt, pf);
#define KERN__NORM_FC_F32(A) KERN__NORM_FC(KERN_F32, A)
#define KERN__NORM_FC_BF16(A) KERN__NORM_FC(KERN_BF16, A)
#define KERN__NORM_FC_F16(A) KERN__NORM_FC(KERN_F16, A)
    if (a->o.dt == KERN_F32) {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_F32)
    } else if (a->o.dt == KERN_BF16) {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_BF16)
    } else {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_F16)
    }
#undef KERN__NORM_FC_F16
#undef KERN__NORM_FC_BF16
#undef KERN__NORM_FC_F32
#undef KERN__NORM_FC
}

/* residual_out from the f32 row, specialized on its dtype */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_norm_fro__avx512(const float *h, void *o, const kern_dtype odt, const int64_t H,
                                                  const int nt) {
    int64_t i = 0;
    for (; i + 16 <= H; i += 16) kern__v_norm_st__avx512(o, odt, i, 16, _mm512_loadu_ps(h + i), nt);
    if (i < H) kern__v_norm_st__avx512(o, odt, i, H - i, kern__loadn__avx512(h + i, (int)(H - i)), nt);
}

/* Forward of one row. Pass A reads x (+ residual) once from memory and
 * keeps the f32 row in thread scratch (x itself is re-read from cache when
 * it is f32 and there is no residual), with one-pass statistics shifted by
 * the previous row's mean (or the row's first element): d = h - s,
 * c = mean(d), var = mean(d^2) - c^2. When the shift was poor (c^2 > var/4:
 * the subtraction would cancel) the exact second pass over the cached row
 * runs instead, so accuracy never depends on the shift. Pass C normalizes
 * ((h - s) - c) rstd, which keeps a large mean's f32 rounding out of the
 * output. */
KERN_TARGET_AVX512 static void kern__v_norm_fwd_row__avx512(const kern__norm_fwd *a, const void *x, const void *r, void *o,
                                               void *ro, float *sc, int64_t row, float *shift,
                                               const kern__norm_pf *pf) {
    const int64_t H = a->H;
    const kern_dtype xdt = a->x.dt, rdt = r ? a->r.dt : KERN_DTYPE_NONE;
    const float *h = (r || xdt != KERN_F32) ? sc : (const float *)x;
    float s, c = 0.0f, rstd;
    double s1 = 0, s2 = 0;
    if (a->rms) s = 0.0f;
    else if (*shift == *shift) s = *shift;
    else s = kern__s_load_f32(x, xdt, 1) + (r ? kern__s_load_f32(r, rdt, 1) : 0.0f);
    if (s != s || s - s != 0) s = 0.0f; /* NaN/Inf first element */
    kern__v_norm_fa_dt__avx512(x, xdt, r, rdt, sc, H, s, a->rms, &s1, &s2);
    if (ro) {
        if (a->ro.dt == KERN_F32) kern__v_norm_fro__avx512(h, ro, KERN_F32, H, a->nt);
        else if (a->ro.dt == KERN_BF16) kern__v_norm_fro__avx512(h, ro, KERN_BF16, H, a->nt);
        else kern__v_norm_fro__avx512(h, ro, KERN_F16, H, a->nt);
    }
    if (a->rms) {
        rstd = (float)(1.0 / sqrt(s2 / (double)H + (double)a->eps));
    } else {
        double cd = s1 / (double)H, m2 = s2 / (double)H, var = m2 - cd * cd;
        if (!(cd * cd <= 0.25 * var)) { /* poor shift (or NaN): exact second pass */
            s = (float)((double)s + cd);
            if (s != s || s - s != 0) s = 0.0f;
            kern__v_norm_passB__avx512(h, KERN_F32, H, s, &s1, &s2);
            cd = s1 / (double)H;
            var = s2 / (double)H - cd * cd;
        }
        if (var < 0) var = 0;
        c = (float)cd;
        rstd = (float)(1.0 / sqrt(var + (double)a->eps));
        if (a->mean) a->mean[row] = (float)((double)s + cd);
        *shift = (float)((double)s + cd);
    }
    if (a->rstd) a->rstd[row] = rstd;
    kern__v_norm_fc_dt__avx512(a, h, sc, o, s, rstd, -c * rstd, pf);
}

/* ---- backward ---- */

/* H elements of dtype dt to f32 (lanes past H zeroed in the padding) */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_norm_cvt__avx512(const void *p, const kern_dtype dt, float *o, const int64_t H) {
    int64_t i = 0;
    for (; i + 16 <= H; i += 16) _mm512_storeu_ps(o + i, kern__v_norm_ldw__avx512(p, dt, i, 16));
    if (i < H) _mm512_storeu_ps(o + i, kern__v_norm_ldw__avx512(p, dt, i, H - i));
}

/* Pass 1 on f32 rows, specialized on (act, dw, db): g = dz w with
 * dz = dout act'(z), z = xhat w + b (act' the shared kern__v_act_grad, as
 * kern_activation_backward); sums of g and g xhat; the row's share of
 * dweight (dw) and of dbias (db). g may overwrite dy. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_norm_b1__avx512(const float *x, const float *dy, float *g, const int64_t H,
                                                 const float s, const float rstd, const float nb, const float *w,
                                                 const float *b, const kern_act act, const int dw, const int db,
                                                 float *pw, float *pb, double *sg, double *sgx) {
    const __m512 vs = _mm512_set1_ps(s), vr = _mm512_set1_ps(rstd), vnb = _mm512_set1_ps(nb);
    __m512 ag = _mm512_setzero_ps(), agx = _mm512_setzero_ps(), bg = _mm512_setzero_ps(), bgx = _mm512_setzero_ps();
    int64_t i = 0;
    *sg = *sgx = 0.0;
    /* padding lanes of the last vector: dy is 0 there (zeroed by the
     * conversion, or by the partial load), so dz, g and every sum get 0 */
    while (i < H) { /* blocks of 2 KERN__NORM_BLK vectors, flushed into double */
        const int64_t e = H - i > KERN__NORM_BLK * 2 * 16 ? i + KERN__NORM_BLK * 2 * 16 : H;
        for (; i < e; i += 16) {
            const int full = i + 16 <= H;
            __m512 xv = full ? _mm512_loadu_ps(x + i) : kern__loadn__avx512(x + i, (int)(H - i));
            __m512 dz = full ? _mm512_loadu_ps(dy + i) : kern__loadn__avx512(dy + i, (int)(H - i));
            __m512 wv = _mm512_loadu_ps(w + i); /* w, b, pw, pb are padded to Hp */
            __m512 xh = _mm512_fmadd_ps(_mm512_sub_ps(xv, vs), vr, vnb), gv;
            if (act != KERN_ACT_NONE) dz = kern__mul__avx512(dz, kern__v_act_grad__avx512(_mm512_fmadd_ps(xh, wv, _mm512_loadu_ps(b + i)), act));
            if (dw) _mm512_storeu_ps(pw + i, _mm512_fmadd_ps(dz, xh, _mm512_loadu_ps(pw + i)));
            if (db) _mm512_storeu_ps(pb + i, _mm512_add_ps(dz, _mm512_loadu_ps(pb + i)));
            gv = kern__mul__avx512(dz, wv);
            _mm512_storeu_ps(g + i, gv);
            if ((i / 16) & 1) {
                bg = _mm512_add_ps(bg, gv);
                bgx = _mm512_fmadd_ps(gv, xh, bgx);
            } else {
                ag = _mm512_add_ps(ag, gv);
                agx = _mm512_fmadd_ps(gv, xh, agx);
            }
        }
        *sg += kern__v_norm_hsum__avx512(_mm512_add_ps(ag, bg));
        *sgx += kern__v_norm_hsum__avx512(_mm512_add_ps(agx, bgx));
        ag = agx = bg = bgx = _mm512_setzero_ps();
    }
}
/* Pass 1 for the activation and the wanted partials of the op. */
KERN_TARGET_AVX512 static void kern__v_norm_b1_dt__avx512(const kern__norm_bwd *a, const float *x, const float *dy, float *g,
                                             float s, float rstd, float nb, float *pw, float *pb, double *sg,
                                             double *sgx) {
#define KERN__NORM_B1(A, DW, DB) kern__v_norm_b1__avx512(x, dy, g, a->H, s, rstd, nb, a->w, a->b, A, DW, DB, pw, pb, sg, sgx)
#define KERN__NORM_B1P(A)                                                                          \
    if (pw && pb) KERN__NORM_B1(A, 1, 1);                                                          \
    else if (pw) KERN__NORM_B1(A, 1, 0);                                                           \
    else if (pb) KERN__NORM_B1(A, 0, 1);                                                           \
    else KERN__NORM_B1(A, 0, 0);
    KERN__ACT_DISPATCH(a->act, KERN__NORM_B1P)
#undef KERN__NORM_B1P
#undef KERN__NORM_B1
}

/* Pass 2, specialized on (dx dtype, dresidual dtype or none):
 * dx = rstd (g - mean(g) - xhat mean(g xhat)) + dresidual. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_norm_b2__avx512(const float *x, const float *g, void *dx, const kern_dtype dxdt,
                                                 const void *dr, const kern_dtype drdt, const int64_t H,
                                                 const float s, const float rstd, const float nb, const float mg,
                                                 const float mgx, const kern__norm_pf *pf) {
    const __m512 vs = _mm512_set1_ps(s), vr = _mm512_set1_ps(rstd), vnb = _mm512_set1_ps(nb), vmg = _mm512_set1_ps(mg), vmgx = _mm512_set1_ps(mgx);
    int64_t i = 0;
    for (; i < H; i += 16) {
        const int64_t n = H - i < 16 ? H - i : 16;
        __m512 xv, xh, t;
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        xv = n == 16 ? _mm512_loadu_ps(x + i) : kern__loadn__avx512(x + i, (int)n);
        xh = _mm512_fmadd_ps(_mm512_sub_ps(xv, vs), vr, vnb);
        t = kern__mul__avx512(_mm512_fnmadd_ps(xh, vmgx, _mm512_sub_ps(_mm512_loadu_ps(g + i), vmg)), vr);
        if (drdt != KERN_DTYPE_NONE)
            t = _mm512_add_ps(t, n == 16 ? kern__v_norm_ldw__avx512(dr, drdt, i, 16) : kern__v_norm_ldw__avx512(dr, drdt, i, n));
        if (n == 16) kern__v_norm_st__avx512(dx, dxdt, i, 16, t, 0);
        else kern__v_norm_st__avx512(dx, dxdt, i, n, t, 0);
    }
}
/* Pass 2 for the row's dtypes. */
KERN_TARGET_AVX512 static void kern__v_norm_b2_dt__avx512(const kern__norm_bwd *a, const float *x, const float *g, void *dx,
                                             const void *dr, float s, float rstd, float nb, float mg, float mgx,
                                             const kern__norm_pf *pf) {
    const kern_dtype drdt = dr ? a->dr.dt : KERN_DTYPE_NONE;
#define KERN__NORM_B2(OD, RD) kern__v_norm_b2__avx512(x, g, dx, OD, dr, RD, a->H, s, rstd, nb, mg, mgx, pf)
#define KERN__NORM_B2R(OD)                                                                         \
    do {                                                                                           \
        if (drdt == KERN_F32) KERN__NORM_B2(OD, KERN_F32);                                         \
        else if (drdt == KERN_BF16) KERN__NORM_B2(OD, KERN_BF16);                                  \
        else if (drdt == KERN_F16) KERN__NORM_B2(OD, KERN_F16);                                    \
        else KERN__NORM_B2(OD, KERN_DTYPE_NONE);                                                   \
    } while (0)
    if (a->dx.dt == KERN_F32) KERN__NORM_B2R(KERN_F32);
    else if (a->dx.dt == KERN_BF16) KERN__NORM_B2R(KERN_BF16);
    else KERN__NORM_B2R(KERN_F16);
#undef KERN__NORM_B2R
#undef KERN__NORM_B2
}

/* Backward of one row: x and dout are brought to f32 rows in scratch
 * (unless already f32), pass 1 forms g (kept in scratch) and the sums,
 * pass 2 writes dx. */
KERN_TARGET_AVX512 static void kern__v_norm_bwd_row__avx512(const kern__norm_bwd *a, const void *dy, const void *x, void *dx,
                                               const void *dr, float *sc, int64_t row, float *pw, float *pb,
                                               const kern__norm_pf *pf) {
    const int64_t H = a->H;
    float *xs = sc, *gs = sc + a->Hp;
    const float *xf = (const float *)x, *dyf = (const float *)dy;
    float s, c, rstd, nb;
    double sg, sgx;
    if (a->x.dt == KERN_BF16) { kern__v_norm_cvt__avx512(x, KERN_BF16, xs, H); xf = xs; }
    else if (a->x.dt == KERN_F16) { kern__v_norm_cvt__avx512(x, KERN_F16, xs, H); xf = xs; }
    if (a->dy.dt == KERN_BF16) { kern__v_norm_cvt__avx512(dy, KERN_BF16, gs, H); dyf = gs; }
    else if (a->dy.dt == KERN_F16) { kern__v_norm_cvt__avx512(dy, KERN_F16, gs, H); dyf = gs; }
    if (a->rstd) {
        rstd = a->rstd[row];
        s = a->rms ? 0.0f : a->mean[row];
        c = 0.0f;
    } else {
        kern__v_norm_xstats__avx512(xf, H, a->rms, a->eps, &s, &c, &rstd);
    }
    nb = -c * rstd;
    kern__v_norm_b1_dt__avx512(a, xf, dyf, gs, s, rstd, nb, pw, pb, &sg, &sgx);
    kern__v_norm_b2_dt__avx512(a, xf, gs, dx, dr, s, rstd, nb, a->rms ? 0.0f : (float)(sg / (double)H),
                            (float)(sgx / (double)H), pf);
}

/* ---- elementwise ---- */

/* out = act(p + bias) over n elements, act constant after inlining. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_norm_ew_act__avx512(const kern__norm_ew *e, const void *p, void *o,
                                                     const float *bias, int64_t n, const kern_act act) {
    int64_t i;
    for (i = 0; i < n; i += 16) {
        const int64_t m = n - i < 16 ? n - i : 16;
        __m512 v = kern__v_norm_ld__avx512(p, e->a.dt, i, m);
        if (bias) v = _mm512_add_ps(v, m == 16 ? _mm512_loadu_ps(bias + i) : kern__loadn__avx512(bias + i, (int)m));
        kern__v_norm_st__avx512(o, e->o.dt, i, m, kern__v_norm_act__avx512(v, act), e->nt);
    }
}
/* out = p act'(q) (the backward: p = dout, q = x). */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_norm_ew_grad__avx512(const kern__norm_ew *e, const void *p, const void *q, void *o,
                                                      int64_t n, const kern_act act) {
    int64_t i;
    for (i = 0; i < n; i += 16) {
        const int64_t m = n - i < 16 ? n - i : 16;
        __m512 v;
        if (act != KERN_ACT_NONE)
            v = kern__mul__avx512(kern__v_norm_ldw__avx512(p, e->a.dt, i, m), kern__v_act_grad__avx512(kern__v_norm_ldw__avx512(q, e->b.dt, i, m), act));
        else
            v = kern__v_norm_ld__avx512(p, e->a.dt, i, m);
        kern__v_norm_st__avx512(o, e->o.dt, i, m, v, e->nt);
    }
}
/* Elementwise segment of n elements: add, (bias +) activation, or the
 * activation's backward. */
KERN_TARGET_AVX512 static void kern__v_norm_ew_seg__avx512(const kern__norm_ew *e, const void *p, const void *q, void *o,
                                              const float *bias, int64_t n) {
    int64_t i;
    if (e->op == KERN__NORM_EW_ADD) {
        for (i = 0; i < n; i += 16) {
            const int64_t m = n - i < 16 ? n - i : 16;
            __m512 v = _mm512_add_ps(kern__v_norm_ldw__avx512(p, e->a.dt, i, m), kern__v_norm_ldw__avx512(q, e->b.dt, i, m));
            kern__v_norm_st__avx512(o, e->o.dt, i, m, v, e->nt);
        }
    } else if (e->op == KERN__NORM_EW_ACT) {
#define KERN__NORM_EW(A) kern__v_norm_ew_act__avx512(e, p, o, bias, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__NORM_EW)
#undef KERN__NORM_EW
    } else {
#define KERN__NORM_EW(A) kern__v_norm_ew_grad__avx512(e, p, q, o, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__NORM_EW)
#undef KERN__NORM_EW
    }
}
#endif /* KERN_X86 */
#ifdef KERN_NEON
/* ---- neon ---- */
/* n elements of dtype dt from element i of p as f32 lanes (n >= 4: a full
 * vector; else the first n, the rest 0, nothing past the row read). */
KERN__AINLINE float32x4_t kern__v_norm_ld__neon(const void *p, kern_dtype dt, int64_t i, int64_t n) {
    return kern__v_load_f32__neon((const char *)p + i * kern__norm_es(dt), dt, n >= 4 ? 4 : (int)n);
}
/* The same for values that go through arithmetic before anything is
 * stored (the statistics, the normalized row, the backward's rows, the
 * add): a full bf16 vector is widened without kern__v_load_f32's quieting
 * of signalling NaNs, which the arithmetic does anyway (4 instructions
 * fewer per vector on AVX2: residual + LayerNorm bf16 was 11% slower with
 * them). Tails and the other dtypes take the shared load. */
KERN__AINLINE float32x4_t kern__v_norm_ldw__neon(const void *p, kern_dtype dt, int64_t i, int64_t n) {
    if (dt == KERN_BF16 && n >= 4) return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)p + i), 16));
    return kern__v_norm_ld__neon(p, dt, i, n);
}
/* min(n, 4) lanes to element i of p in dtype dt (round to nearest even);
 * nt streams a full vector whose address is aligned to the store width. */
KERN__AINLINE void kern__v_norm_st__neon(void *p, kern_dtype dt, int64_t i, int64_t n, float32x4_t v, int nt) {
    const int64_t es = kern__norm_es(dt);
    char *q = (char *)p + i * es;
    const int full = n >= 4;
    kern__v_store_f32__neon(q, dt, v, full ? 4 : (int)n,
                           nt && full && !((uintptr_t)q & (uintptr_t)(es * 4 - 1)));
}
/* v with the lanes from n on set to 0 */
KERN__AINLINE float32x4_t kern__v_norm_keep__neon(float32x4_t v, int64_t n) {
    float32x4_t m = kern__loadn__neon(kern__norm_ones, n <= 0 ? 0 : n >= 4 ? 4 : (int)n);
    (void)n;
    return vbslq_f32(vcgtq_f32(m, vdupq_n_f32(0.0f)), v, vdupq_n_f32(0.0f));
}
/* (p[i..] as f32) - m, lanes past n zeroed */
KERN__AINLINE float32x4_t kern__v_norm_ldd__neon(const void *p, kern_dtype dt, int64_t i, int64_t n, float32x4_t m) {
    float32x4_t d = vsubq_f32(kern__v_norm_ldw__neon(p, dt, i, n), m);
    return n >= 4 ? d : kern__v_norm_keep__neon(d, n);
}
/* the lanes summed in double, in lane order */
KERN__AINLINE double kern__v_norm_hsum__neon(float32x4_t v) {
    float t[4];
    double s = 0;
    int k;
    vst1q_f32(t, v);
    for (k = 0; k < 4; k++) s += t[k];
    return s;
}

/* sum(d) and sum(d^2) of d = h - mh over a row, two accumulators each. */
static void kern__v_norm_passB__neon(const void *h, kern_dtype dt, int64_t H, float mh, double *s1,
                                             double *s2) {
    const float32x4_t vm = vdupq_n_f32(mh);
    const int64_t end2 = H - H % (2 * 4);
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f), b0 = vdupq_n_f32(0.0f), b1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    *s1 = *s2 = 0.0;
    while (i < end2) { /* blocks of KERN__NORM_BLK steps, flushed into double */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 4 ? i + KERN__NORM_BLK * 2 * 4 : end2;
        for (; i < e; i += 2 * 4) {
            float32x4_t d0 = vsubq_f32(kern__v_norm_ldw__neon(h, dt, i, 4), vm);
            float32x4_t d1 = vsubq_f32(kern__v_norm_ldw__neon(h, dt, i + 4, 4), vm);
            a0 = vaddq_f32(a0, d0);
            a1 = vaddq_f32(a1, d1);
            b0 = vfmaq_f32(b0, d0, d0);
            b1 = vfmaq_f32(b1, d1, d1);
        }
        *s1 += kern__v_norm_hsum__neon(vaddq_f32(a0, a1));
        *s2 += kern__v_norm_hsum__neon(vaddq_f32(b0, b1));
        a0 = a1 = b0 = b1 = vdupq_n_f32(0.0f);
    }
    for (; i < H; i += 4) {
        float32x4_t d = kern__v_norm_ldd__neon(h, dt, i, H - i, vm);
        a0 = vaddq_f32(a0, d);
        b0 = vfmaq_f32(b0, d, d);
    }
    *s1 += kern__v_norm_hsum__neon(a0);
    *s2 += kern__v_norm_hsum__neon(b0);
}

/* Statistics of an f32 row read from x (backward without saved
 * statistics): the same corrected two-pass scheme as the forward. */
static void kern__v_norm_xstats__neon(const float *x, int64_t H, int rms, float eps, float *mh, float *c,
                                              float *rstd) {
    const int64_t end2 = H - H % (2 * 4);
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
    double sum = 0.0;
    int64_t i = 0;
    while (i < end2) { /* blocks flushed into double, as passB */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 4 ? i + KERN__NORM_BLK * 2 * 4 : end2;
        for (; i < e; i += 2 * 4) {
            float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4);
            if (rms) {
                a0 = vfmaq_f32(a0, v0, v0);
                a1 = vfmaq_f32(a1, v1, v1);
            } else {
                a0 = vaddq_f32(a0, v0);
                a1 = vaddq_f32(a1, v1);
            }
        }
        sum += kern__v_norm_hsum__neon(vaddq_f32(a0, a1));
        a0 = a1 = vdupq_n_f32(0.0f);
    }
    for (; i < H; i += 4) {
        float32x4_t v = kern__v_norm_ld__neon(x, KERN_F32, i, H - i);
        a0 = rms ? vfmaq_f32(a0, v, v) : vaddq_f32(a0, v);
    }
    sum += kern__v_norm_hsum__neon(a0);
    if (rms) {
        *mh = 0.0f;
        *c = 0.0f;
        *rstd = (float)(1.0 / sqrt(sum / (double)H + (double)eps));
    } else {
        double s1, s2, cd, var;
        *mh = (float)(sum / (double)H);
        kern__v_norm_passB__neon(x, KERN_F32, H, *mh, &s1, &s2);
        cd = s1 / (double)H;
        var = s2 / (double)H - cd * cd;
        if (var < 0) var = 0;
        *c = (float)cd;
        *rstd = (float)(1.0 / sqrt(var + (double)eps));
    }
}

/* The activation of the row kernels: kern__v_act__neon's bits. GELU (erf)
 * keeps the shared function's fast check inline (x Phi(x) when no lane is
 * below -3) and calls the whole shared kern__v_gelu out of line for a
 * vector that has such a lane: inlined, that rare form's registers pushed
 * the loops' constants out of registers (LayerNorm + GELU 9-15% slower on
 * AVX2 than the former private form). */
KERN__NORM_COLD static float32x4_t kern__v_norm_gelu_tail__neon(float32x4_t x) { return kern__v_gelu__neon(x); }
KERN__AINLINE float32x4_t kern__v_norm_act__neon(float32x4_t x, const kern_act act) {
    if (act == KERN_ACT_GELU) {
        if ((vmaxvq_u32(vcltq_f32(x, vdupq_n_f32(KERN__M_GELU_LO))) != 0)) return kern__v_norm_gelu_tail__neon(x);
        return kern__mul__neon(x, kern__v_gelu_phi__neon(x));
    }
    return kern__v_act__neon(x, act);
}
/* ---- forward ---- */

/* Pass A, specialized on (x dtype, residual dtype or none, rms): h = x (+ r)
 * in f32, kept in scratch when it is not x itself; sums of d = h - s and
 * d^2 (s: the shift), or of h^2 for RMSNorm. Two vectors per step: the
 * sums are latency chains. */
KERN__AINLINE void kern__v_norm_fa__neon(const void *x, const kern_dtype xdt, const void *r,
                                                 const kern_dtype rdt, float *sc, const int64_t H, const float s,
                                                 const int rms, double *o1, double *o2) {
    const int store_sc = rdt != KERN_DTYPE_NONE || xdt != KERN_F32;
    const int64_t end2 = H - H % (2 * 4);
    const float32x4_t vs = vdupq_n_f32(s);
    float32x4_t a1 = vdupq_n_f32(0.0f), a2 = vdupq_n_f32(0.0f), b1 = vdupq_n_f32(0.0f), b2 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    *o1 = *o2 = 0.0;
    while (i < end2) { /* blocks of KERN__NORM_BLK steps, flushed into double */
        const int64_t e = end2 - i > KERN__NORM_BLK * 2 * 4 ? i + KERN__NORM_BLK * 2 * 4 : end2;
        for (; i < e; i += 2 * 4) {
            float32x4_t v0 = kern__v_norm_ldw__neon(x, xdt, i, 4), v1 = kern__v_norm_ldw__neon(x, xdt, i + 4, 4);
            if (rdt != KERN_DTYPE_NONE) {
                v0 = vaddq_f32(v0, kern__v_norm_ldw__neon(r, rdt, i, 4));
                v1 = vaddq_f32(v1, kern__v_norm_ldw__neon(r, rdt, i + 4, 4));
            }
            if (store_sc) {
                vst1q_f32(sc + i, v0);
                vst1q_f32(sc + i + 4, v1);
            }
            if (rms) {
                a2 = vfmaq_f32(a2, v0, v0);
                b2 = vfmaq_f32(b2, v1, v1);
            } else {
                float32x4_t d0 = vsubq_f32(v0, vs), d1 = vsubq_f32(v1, vs);
                a1 = vaddq_f32(a1, d0);
                b1 = vaddq_f32(b1, d1);
                a2 = vfmaq_f32(a2, d0, d0);
                b2 = vfmaq_f32(b2, d1, d1);
            }
        }
        if (!rms) *o1 += kern__v_norm_hsum__neon(vaddq_f32(a1, b1));
        *o2 += kern__v_norm_hsum__neon(vaddq_f32(a2, b2));
        a1 = a2 = b1 = b2 = vdupq_n_f32(0.0f);
    }
    for (; i < H; i += 4) {
        const int full = i + 4 <= H;
        float32x4_t v = full ? kern__v_norm_ldw__neon(x, xdt, i, 4) : kern__v_norm_ldw__neon(x, xdt, i, H - i);
        if (rdt != KERN_DTYPE_NONE)
            v = vaddq_f32(v, full ? kern__v_norm_ldw__neon(r, rdt, i, 4) : kern__v_norm_ldw__neon(r, rdt, i, H - i));
        if (store_sc) vst1q_f32(sc + i, v);
        if (rms) {
            a2 = vfmaq_f32(a2, v, v);
        } else {
            float32x4_t d = vsubq_f32(v, vs);
            if (!full) d = kern__v_norm_keep__neon(d, H - i);
            a1 = vaddq_f32(a1, d);
            a2 = vfmaq_f32(a2, d, d);
        }
    }
    if (!rms) *o1 += kern__v_norm_hsum__neon(a1);
    *o2 += kern__v_norm_hsum__neon(a2);
}
/* Pass A for the row's dtypes (the specializations above). */
static void kern__v_norm_fa_dt__neon(const void *x, kern_dtype xdt, const void *r, kern_dtype rdt,
                                             float *sc, int64_t H, float s, int rms, double *o1, double *o2) {
#define KERN__NORM_FA(XD, RD)                                                                      \
    do {                                                                                           \
        if (rms) kern__v_norm_fa__neon(x, XD, r, RD, sc, H, s, 1, o1, o2);                          \
        else kern__v_norm_fa__neon(x, XD, r, RD, sc, H, s, 0, o1, o2);                              \
    } while (0)
#define KERN__NORM_FA_R(XD)                                                                        \
    do {                                                                                           \
        if (rdt == KERN_F32) KERN__NORM_FA(XD, KERN_F32);                                          \
        else if (rdt == KERN_BF16) KERN__NORM_FA(XD, KERN_BF16);                                   \
        else if (rdt == KERN_F16) KERN__NORM_FA(XD, KERN_F16);                                     \
        else KERN__NORM_FA(XD, KERN_DTYPE_NONE);                                                   \
    } while (0)
    if (xdt == KERN_F32) KERN__NORM_FA_R(KERN_F32);
    else if (xdt == KERN_BF16) KERN__NORM_FA_R(KERN_BF16);
    else KERN__NORM_FA_R(KERN_F16);
#undef KERN__NORM_FA_R
#undef KERN__NORM_FA
}

/* Pass C, specialized on (out dtype, act): y = act(((h - s) rstd - c rstd)
 * w + b), the activation kern__v_act's bits (so kern_norm followed by
 * kern_activation gives the same bits); w and b are always arrays (ones /
 * zeros when absent). With an activation and a bf16 / f16 output, y goes
 * to the f32 row ys first (it may be h itself) and is converted in a
 * second loop: the activation's and the rounding's constants together do
 * not fit the 16 vector registers of AVX2, and the compiler rebuilt the
 * rounding constants every vector (LayerNorm + GELU bf16 15% slower). */
KERN__AINLINE void kern__v_norm_fc__neon(const float *h, float *ys, void *o, const kern_dtype odt,
                                                 const kern_act act, const int64_t H, const float s,
                                                 const float rstd, const float nb, const float *w, const float *b,
                                                 const int nt, const kern__norm_pf *pf) {
    const float32x4_t vs = vdupq_n_f32(s), vr = vdupq_n_f32(rstd), vnb = vdupq_n_f32(nb);
    const int split = act != KERN_ACT_NONE && odt != KERN_F32;
    int64_t i = 0;
    /* two vectors a step, except for GELU (erf), whose long chains the
     * core overlaps better one vector a step (AVX2: 1.56 vs 1.93 us for a
     * 1x4096 f32 row without activation, 4.96 vs 4.80 us with GELU) */
    for (; act != KERN_ACT_GELU && i + 2 * 4 <= H; i += 2 * 4) {
        float32x4_t y0 = vfmaq_f32(vnb, vsubq_f32(vld1q_f32(h + i), vs), vr);
        float32x4_t y1 = vfmaq_f32(vnb, vsubq_f32(vld1q_f32(h + i + 4), vs), vr);
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        if (!((i + 4) & 15)) kern__norm_prefetch(pf, i + 4);
        y0 = vfmaq_f32(vld1q_f32(b + i), y0, vld1q_f32(w + i));
        y1 = vfmaq_f32(vld1q_f32(b + i + 4), y1, vld1q_f32(w + i + 4));
        y0 = kern__v_act__neon(y0, act);
        y1 = kern__v_act__neon(y1, act);
        if (split) {
            vst1q_f32(ys + i, y0);
            vst1q_f32(ys + i + 4, y1);
        } else {
            kern__v_norm_st__neon(o, odt, i, 4, y0, nt);
            kern__v_norm_st__neon(o, odt, i + 4, 4, y1, nt);
        }
    }
    for (; i + 4 <= H; i += 4) {
        float32x4_t y = vfmaq_f32(vnb, vsubq_f32(vld1q_f32(h + i), vs), vr);
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        y = kern__v_norm_act__neon(vfmaq_f32(vld1q_f32(b + i), y, vld1q_f32(w + i)), act);
        if (split) vst1q_f32(ys + i, y);
        else kern__v_norm_st__neon(o, odt, i, 4, y, nt);
    }
    if (i < H) {
        const int n = (int)(H - i);
        float32x4_t y = vfmaq_f32(vnb, vsubq_f32(kern__loadn__neon(h + i, n), vs), vr);
        y = kern__v_norm_act__neon(vfmaq_f32(kern__loadn__neon(b + i, n), y, kern__loadn__neon(w + i, n)), act);
        if (split) kern__storen__neon(ys + i, y, n);
        else kern__v_norm_st__neon(o, odt, i, n, y, nt);
    }
    if (split) {
        for (i = 0; i + 4 <= H; i += 4) kern__v_norm_st__neon(o, odt, i, 4, vld1q_f32(ys + i), nt);
        if (i < H) kern__v_norm_st__neon(o, odt, i, H - i, kern__loadn__neon(ys + i, (int)(H - i)), nt);
    }
}
/* Pass C for the output dtype and activation of the op. */
static void kern__v_norm_fc_dt__neon(const kern__norm_fwd *a, const float *h, float *ys, void *o, float s,
                                             float rstd, float nb, const kern__norm_pf *pf) {
#define KERN__NORM_FC(OD, A) kern__v_norm_fc__neon(h, ys, o, OD, A, a->H, s, rstd, nb, a->w, a->b, a->nt, pf);
#define KERN__NORM_FC_F32(A) KERN__NORM_FC(KERN_F32, A)
#define KERN__NORM_FC_BF16(A) KERN__NORM_FC(KERN_BF16, A)
#define KERN__NORM_FC_F16(A) KERN__NORM_FC(KERN_F16, A)
    if (a->o.dt == KERN_F32) {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_F32)
    } else if (a->o.dt == KERN_BF16) {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_BF16)
    } else {
        KERN__ACT_DISPATCH(a->act, KERN__NORM_FC_F16)
    }
#undef KERN__NORM_FC_F16
#undef KERN__NORM_FC_BF16
#undef KERN__NORM_FC_F32
#undef KERN__NORM_FC
}

/* residual_out from the f32 row, specialized on its dtype */
KERN__AINLINE void kern__v_norm_fro__neon(const float *h, void *o, const kern_dtype odt, const int64_t H,
                                                  const int nt) {
    int64_t i = 0;
    for (; i + 4 <= H; i += 4) kern__v_norm_st__neon(o, odt, i, 4, vld1q_f32(h + i), nt);
    if (i < H) kern__v_norm_st__neon(o, odt, i, H - i, kern__loadn__neon(h + i, (int)(H - i)), nt);
}

/* Forward of one row. Pass A reads x (+ residual) once from memory and
 * keeps the f32 row in thread scratch (x itself is re-read from cache when
 * it is f32 and there is no residual), with one-pass statistics shifted by
 * the previous row's mean (or the row's first element): d = h - s,
 * c = mean(d), var = mean(d^2) - c^2. When the shift was poor (c^2 > var/4:
 * the subtraction would cancel) the exact second pass over the cached row
 * runs instead, so accuracy never depends on the shift. Pass C normalizes
 * ((h - s) - c) rstd, which keeps a large mean's f32 rounding out of the
 * output. */
static void kern__v_norm_fwd_row__neon(const kern__norm_fwd *a, const void *x, const void *r, void *o,
                                               void *ro, float *sc, int64_t row, float *shift,
                                               const kern__norm_pf *pf) {
    const int64_t H = a->H;
    const kern_dtype xdt = a->x.dt, rdt = r ? a->r.dt : KERN_DTYPE_NONE;
    const float *h = (r || xdt != KERN_F32) ? sc : (const float *)x;
    float s, c = 0.0f, rstd;
    double s1 = 0, s2 = 0;
    if (a->rms) s = 0.0f;
    else if (*shift == *shift) s = *shift;
    else s = kern__s_load_f32(x, xdt, 1) + (r ? kern__s_load_f32(r, rdt, 1) : 0.0f);
    if (s != s || s - s != 0) s = 0.0f; /* NaN/Inf first element */
    kern__v_norm_fa_dt__neon(x, xdt, r, rdt, sc, H, s, a->rms, &s1, &s2);
    if (ro) {
        if (a->ro.dt == KERN_F32) kern__v_norm_fro__neon(h, ro, KERN_F32, H, a->nt);
        else if (a->ro.dt == KERN_BF16) kern__v_norm_fro__neon(h, ro, KERN_BF16, H, a->nt);
        else kern__v_norm_fro__neon(h, ro, KERN_F16, H, a->nt);
    }
    if (a->rms) {
        rstd = (float)(1.0 / sqrt(s2 / (double)H + (double)a->eps));
    } else {
        double cd = s1 / (double)H, m2 = s2 / (double)H, var = m2 - cd * cd;
        if (!(cd * cd <= 0.25 * var)) { /* poor shift (or NaN): exact second pass */
            s = (float)((double)s + cd);
            if (s != s || s - s != 0) s = 0.0f;
            kern__v_norm_passB__neon(h, KERN_F32, H, s, &s1, &s2);
            cd = s1 / (double)H;
            var = s2 / (double)H - cd * cd;
        }
        if (var < 0) var = 0;
        c = (float)cd;
        rstd = (float)(1.0 / sqrt(var + (double)a->eps));
        if (a->mean) a->mean[row] = (float)((double)s + cd);
        *shift = (float)((double)s + cd);
    }
    if (a->rstd) a->rstd[row] = rstd;
    kern__v_norm_fc_dt__neon(a, h, sc, o, s, rstd, -c * rstd, pf);
}

/* ---- backward ---- */

/* H elements of dtype dt to f32 (lanes past H zeroed in the padding) */
KERN__AINLINE void kern__v_norm_cvt__neon(const void *p, const kern_dtype dt, float *o, const int64_t H) {
    int64_t i = 0;
    for (; i + 4 <= H; i += 4) vst1q_f32(o + i, kern__v_norm_ldw__neon(p, dt, i, 4));
    if (i < H) vst1q_f32(o + i, kern__v_norm_ldw__neon(p, dt, i, H - i));
}

/* Pass 1 on f32 rows, specialized on (act, dw, db): g = dz w with
 * dz = dout act'(z), z = xhat w + b (act' the shared kern__v_act_grad, as
 * kern_activation_backward); sums of g and g xhat; the row's share of
 * dweight (dw) and of dbias (db). g may overwrite dy. */
KERN__AINLINE void kern__v_norm_b1__neon(const float *x, const float *dy, float *g, const int64_t H,
                                                 const float s, const float rstd, const float nb, const float *w,
                                                 const float *b, const kern_act act, const int dw, const int db,
                                                 float *pw, float *pb, double *sg, double *sgx) {
    const float32x4_t vs = vdupq_n_f32(s), vr = vdupq_n_f32(rstd), vnb = vdupq_n_f32(nb);
    float32x4_t ag = vdupq_n_f32(0.0f), agx = vdupq_n_f32(0.0f), bg = vdupq_n_f32(0.0f), bgx = vdupq_n_f32(0.0f);
    int64_t i = 0;
    *sg = *sgx = 0.0;
    /* padding lanes of the last vector: dy is 0 there (zeroed by the
     * conversion, or by the partial load), so dz, g and every sum get 0 */
    while (i < H) { /* blocks of 2 KERN__NORM_BLK vectors, flushed into double */
        const int64_t e = H - i > KERN__NORM_BLK * 2 * 4 ? i + KERN__NORM_BLK * 2 * 4 : H;
        for (; i < e; i += 4) {
            const int full = i + 4 <= H;
            float32x4_t xv = full ? vld1q_f32(x + i) : kern__loadn__neon(x + i, (int)(H - i));
            float32x4_t dz = full ? vld1q_f32(dy + i) : kern__loadn__neon(dy + i, (int)(H - i));
            float32x4_t wv = vld1q_f32(w + i); /* w, b, pw, pb are padded to Hp */
            float32x4_t xh = vfmaq_f32(vnb, vsubq_f32(xv, vs), vr), gv;
            if (act != KERN_ACT_NONE) dz = kern__mul__neon(dz, kern__v_act_grad__neon(vfmaq_f32(vld1q_f32(b + i), xh, wv), act));
            if (dw) vst1q_f32(pw + i, vfmaq_f32(vld1q_f32(pw + i), dz, xh));
            if (db) vst1q_f32(pb + i, vaddq_f32(dz, vld1q_f32(pb + i)));
            gv = kern__mul__neon(dz, wv);
            vst1q_f32(g + i, gv);
            if ((i / 4) & 1) {
                bg = vaddq_f32(bg, gv);
                bgx = vfmaq_f32(bgx, gv, xh);
            } else {
                ag = vaddq_f32(ag, gv);
                agx = vfmaq_f32(agx, gv, xh);
            }
        }
        *sg += kern__v_norm_hsum__neon(vaddq_f32(ag, bg));
        *sgx += kern__v_norm_hsum__neon(vaddq_f32(agx, bgx));
        ag = agx = bg = bgx = vdupq_n_f32(0.0f);
    }
}
/* Pass 1 for the activation and the wanted partials of the op. */
static void kern__v_norm_b1_dt__neon(const kern__norm_bwd *a, const float *x, const float *dy, float *g,
                                             float s, float rstd, float nb, float *pw, float *pb, double *sg,
                                             double *sgx) {
#define KERN__NORM_B1(A, DW, DB) kern__v_norm_b1__neon(x, dy, g, a->H, s, rstd, nb, a->w, a->b, A, DW, DB, pw, pb, sg, sgx)
#define KERN__NORM_B1P(A)                                                                          \
    if (pw && pb) KERN__NORM_B1(A, 1, 1);                                                          \
    else if (pw) KERN__NORM_B1(A, 1, 0);                                                           \
    else if (pb) KERN__NORM_B1(A, 0, 1);                                                           \
    else KERN__NORM_B1(A, 0, 0);
    KERN__ACT_DISPATCH(a->act, KERN__NORM_B1P)
#undef KERN__NORM_B1P
#undef KERN__NORM_B1
}

/* Pass 2, specialized on (dx dtype, dresidual dtype or none):
 * dx = rstd (g - mean(g) - xhat mean(g xhat)) + dresidual. */
KERN__AINLINE void kern__v_norm_b2__neon(const float *x, const float *g, void *dx, const kern_dtype dxdt,
                                                 const void *dr, const kern_dtype drdt, const int64_t H,
                                                 const float s, const float rstd, const float nb, const float mg,
                                                 const float mgx, const kern__norm_pf *pf) {
    const float32x4_t vs = vdupq_n_f32(s), vr = vdupq_n_f32(rstd), vnb = vdupq_n_f32(nb), vmg = vdupq_n_f32(mg), vmgx = vdupq_n_f32(mgx);
    int64_t i = 0;
    for (; i < H; i += 4) {
        const int64_t n = H - i < 4 ? H - i : 4;
        float32x4_t xv, xh, t;
        if (!(i & 15)) kern__norm_prefetch(pf, i);
        xv = n == 4 ? vld1q_f32(x + i) : kern__loadn__neon(x + i, (int)n);
        xh = vfmaq_f32(vnb, vsubq_f32(xv, vs), vr);
        t = kern__mul__neon(vfmsq_f32(vsubq_f32(vld1q_f32(g + i), vmg), xh, vmgx), vr);
        if (drdt != KERN_DTYPE_NONE)
            t = vaddq_f32(t, n == 4 ? kern__v_norm_ldw__neon(dr, drdt, i, 4) : kern__v_norm_ldw__neon(dr, drdt, i, n));
        if (n == 4) kern__v_norm_st__neon(dx, dxdt, i, 4, t, 0);
        else kern__v_norm_st__neon(dx, dxdt, i, n, t, 0);
    }
}
/* Pass 2 for the row's dtypes. */
static void kern__v_norm_b2_dt__neon(const kern__norm_bwd *a, const float *x, const float *g, void *dx,
                                             const void *dr, float s, float rstd, float nb, float mg, float mgx,
                                             const kern__norm_pf *pf) {
    const kern_dtype drdt = dr ? a->dr.dt : KERN_DTYPE_NONE;
#define KERN__NORM_B2(OD, RD) kern__v_norm_b2__neon(x, g, dx, OD, dr, RD, a->H, s, rstd, nb, mg, mgx, pf)
#define KERN__NORM_B2R(OD)                                                                         \
    do {                                                                                           \
        if (drdt == KERN_F32) KERN__NORM_B2(OD, KERN_F32);                                         \
        else if (drdt == KERN_BF16) KERN__NORM_B2(OD, KERN_BF16);                                  \
        else if (drdt == KERN_F16) KERN__NORM_B2(OD, KERN_F16);                                    \
        else KERN__NORM_B2(OD, KERN_DTYPE_NONE);                                                   \
    } while (0)
    if (a->dx.dt == KERN_F32) KERN__NORM_B2R(KERN_F32);
    else if (a->dx.dt == KERN_BF16) KERN__NORM_B2R(KERN_BF16);
    else KERN__NORM_B2R(KERN_F16);
#undef KERN__NORM_B2R
#undef KERN__NORM_B2
}

/* Backward of one row: x and dout are brought to f32 rows in scratch
 * (unless already f32), pass 1 forms g (kept in scratch) and the sums,
 * pass 2 writes dx. */
static void kern__v_norm_bwd_row__neon(const kern__norm_bwd *a, const void *dy, const void *x, void *dx,
                                               const void *dr, float *sc, int64_t row, float *pw, float *pb,
                                               const kern__norm_pf *pf) {
    const int64_t H = a->H;
    float *xs = sc, *gs = sc + a->Hp;
    const float *xf = (const float *)x, *dyf = (const float *)dy;
    float s, c, rstd, nb;
    double sg, sgx;
    if (a->x.dt == KERN_BF16) { kern__v_norm_cvt__neon(x, KERN_BF16, xs, H); xf = xs; }
    else if (a->x.dt == KERN_F16) { kern__v_norm_cvt__neon(x, KERN_F16, xs, H); xf = xs; }
    if (a->dy.dt == KERN_BF16) { kern__v_norm_cvt__neon(dy, KERN_BF16, gs, H); dyf = gs; }
    else if (a->dy.dt == KERN_F16) { kern__v_norm_cvt__neon(dy, KERN_F16, gs, H); dyf = gs; }
    if (a->rstd) {
        rstd = a->rstd[row];
        s = a->rms ? 0.0f : a->mean[row];
        c = 0.0f;
    } else {
        kern__v_norm_xstats__neon(xf, H, a->rms, a->eps, &s, &c, &rstd);
    }
    nb = -c * rstd;
    kern__v_norm_b1_dt__neon(a, xf, dyf, gs, s, rstd, nb, pw, pb, &sg, &sgx);
    kern__v_norm_b2_dt__neon(a, xf, gs, dx, dr, s, rstd, nb, a->rms ? 0.0f : (float)(sg / (double)H),
                            (float)(sgx / (double)H), pf);
}

/* ---- elementwise ---- */

/* out = act(p + bias) over n elements, act constant after inlining. */
KERN__AINLINE void kern__v_norm_ew_act__neon(const kern__norm_ew *e, const void *p, void *o,
                                                     const float *bias, int64_t n, const kern_act act) {
    int64_t i;
    for (i = 0; i < n; i += 4) {
        const int64_t m = n - i < 4 ? n - i : 4;
        float32x4_t v = kern__v_norm_ld__neon(p, e->a.dt, i, m);
        if (bias) v = vaddq_f32(v, m == 4 ? vld1q_f32(bias + i) : kern__loadn__neon(bias + i, (int)m));
        kern__v_norm_st__neon(o, e->o.dt, i, m, kern__v_norm_act__neon(v, act), e->nt);
    }
}
/* out = p act'(q) (the backward: p = dout, q = x). */
KERN__AINLINE void kern__v_norm_ew_grad__neon(const kern__norm_ew *e, const void *p, const void *q, void *o,
                                                      int64_t n, const kern_act act) {
    int64_t i;
    for (i = 0; i < n; i += 4) {
        const int64_t m = n - i < 4 ? n - i : 4;
        float32x4_t v;
        if (act != KERN_ACT_NONE)
            v = kern__mul__neon(kern__v_norm_ldw__neon(p, e->a.dt, i, m), kern__v_act_grad__neon(kern__v_norm_ldw__neon(q, e->b.dt, i, m), act));
        else
            v = kern__v_norm_ld__neon(p, e->a.dt, i, m);
        kern__v_norm_st__neon(o, e->o.dt, i, m, v, e->nt);
    }
}
/* Elementwise segment of n elements: add, (bias +) activation, or the
 * activation's backward. */
static void kern__v_norm_ew_seg__neon(const kern__norm_ew *e, const void *p, const void *q, void *o,
                                              const float *bias, int64_t n) {
    int64_t i;
    if (e->op == KERN__NORM_EW_ADD) {
        for (i = 0; i < n; i += 4) {
            const int64_t m = n - i < 4 ? n - i : 4;
            float32x4_t v = vaddq_f32(kern__v_norm_ldw__neon(p, e->a.dt, i, m), kern__v_norm_ldw__neon(q, e->b.dt, i, m));
            kern__v_norm_st__neon(o, e->o.dt, i, m, v, e->nt);
        }
    } else if (e->op == KERN__NORM_EW_ACT) {
#define KERN__NORM_EW(A) kern__v_norm_ew_act__neon(e, p, o, bias, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__NORM_EW)
#undef KERN__NORM_EW
    } else {
#define KERN__NORM_EW(A) kern__v_norm_ew_grad__neon(e, p, q, o, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__NORM_EW)
#undef KERN__NORM_EW
    }
}
#endif /* KERN_NEON */
/* END GENERATED */

/* ------------------------------------------------------------ dispatch
 * One const table per ISA level (docs/internals.md): the row kernels
 * expanded from the template above. Levels with no body of their own
 * (VNNI, BF16, NEON dot/bf16) use their base level's table. */
typedef struct kern__norm_fns {
    const char *name;
    void (*fwd_row)(const kern__norm_fwd *a, const void *x, const void *r, void *o, void *ro, float *sc,
                    int64_t row, float *shift, const kern__norm_pf *pf);
    void (*bwd_row)(const kern__norm_bwd *a, const void *dy, const void *x, void *dx, const void *dr,
                    float *sc, int64_t row, float *pw, float *pb, const kern__norm_pf *pf);
    void (*ew_seg)(const kern__norm_ew *e, const void *p, const void *q, void *o, const float *bias,
                   int64_t n);
} kern__norm_fns;
static const kern__norm_fns kern__norm_fns_scalar = {"scalar", kern__s_norm_fwd_row, kern__s_norm_bwd_row,
                                                     kern__s_norm_ew_seg};
#ifdef KERN_X86
static const kern__norm_fns kern__norm_fns_avx2 = {"avx2", kern__v_norm_fwd_row__avx2,
                                                   kern__v_norm_bwd_row__avx2, kern__v_norm_ew_seg__avx2};
static const kern__norm_fns kern__norm_fns_avx512 = {"avx512", kern__v_norm_fwd_row__avx512,
                                                     kern__v_norm_bwd_row__avx512, kern__v_norm_ew_seg__avx512};
#endif
#ifdef KERN_NEON
static const kern__norm_fns kern__norm_fns_neon = {"neon", kern__v_norm_fwd_row__neon,
                                                   kern__v_norm_bwd_row__neon, kern__v_norm_ew_seg__neon};
#endif
static const kern__norm_fns *kern__norm_fns_for(kern_isa isa) {
    switch (isa) {
#ifdef KERN_X86
    case KERN_ISA_AMX:
    case KERN_ISA_AVX512_BF16:
    case KERN_ISA_AVX512_VNNI:
    case KERN_ISA_AVX512: return &kern__norm_fns_avx512;
    case KERN_ISA_AVX2_VNNI:
    case KERN_ISA_AVX2: return &kern__norm_fns_avx2;
#endif
#ifdef KERN_NEON
    case KERN_ISA_NEON_BF16:
    case KERN_ISA_NEON_DOT:
    case KERN_ISA_NEON: return &kern__norm_fns_neon;
#endif
    default: return &kern__norm_fns_scalar;
    }
}

KERN_API const char *kern__norm_table_name(kern_isa isa) { return kern__norm_fns_for(isa)->name; }

/* ----------------------------------------------------------- validation */

static kern_status kern__norm_check_rowt(const kern_tensor *t, const char *op, const char *name,
                                         const kern_tensor *ref, const char *refname) {
    kern_status st = kern_tensor_check(t, op, name);
    int d;
    if (st != KERN_OK) return st;
    if (!kern_dtype_is_float(t->dtype))
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s; f32, bf16 or f16 expected", op, name,
                         kern_dtype_name(t->dtype));
    if (t->ndim < 1)
        return kern__err(KERN_ERR_SHAPE, "%s: %s has 0 dims; at least 1 (the normalized dim) is needed",
                         op, name);
    if (ref) {
        if (t->ndim != ref->ndim)
            return kern__err(KERN_ERR_SHAPE, "%s: %s has %d dims but %s has %d", op, name, t->ndim,
                             refname, ref->ndim);
        for (d = 0; d < t->ndim; d++)
            if (t->shape[d] != ref->shape[d])
                return kern__err(KERN_ERR_SHAPE, "%s: %s.shape[%d]=%lld but %s.shape[%d]=%lld", op,
                                 name, d, (long long)t->shape[d], refname, d,
                                 (long long)ref->shape[d]);
    }
    d = t->ndim - 1;
    if (t->shape[d] > 1 && t->stride[d] != 1)
        return kern__err(KERN_ERR_LAYOUT, "%s: %s.stride[%d]=%lld; the last dim must have unit stride",
                         op, name, d, (long long)t->stride[d]);
    return KERN_OK;
}

static kern_status kern__norm_check_vec(const kern_tensor *t, const char *op, const char *name,
                                        int64_t H) {
    kern_status st = kern_tensor_check(t, op, name);
    char buf[96];
    if (st != KERN_OK) return st;
    if (!kern_dtype_is_float(t->dtype))
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s; f32, bf16 or f16 expected", op, name,
                         kern_dtype_name(t->dtype));
    if (t->ndim != 1 || t->shape[0] != H)
        return kern__err(KERN_ERR_SHAPE, "%s: %s has shape %s but must be [%lld] (the last dim of x)",
                         op, name, kern_shape_str(t, buf, sizeof buf), (long long)H);
    if (H > 1 && t->stride[0] != 1)
        return kern__err(KERN_ERR_LAYOUT, "%s: %s.stride[0]=%lld; unit stride expected", op, name,
                         (long long)t->stride[0]);
    return KERN_OK;
}

static kern_status kern__norm_check_stats(const kern_tensor *t, const char *op, const char *name,
                                          int64_t rows) {
    kern_status st = kern_tensor_check(t, op, name);
    if (st != KERN_OK) return st;
    if (t->dtype != KERN_F32)
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s; statistics are f32", op, name,
                         kern_dtype_name(t->dtype));
    if (kern_tensor_numel(t) != rows)
        return kern__err(KERN_ERR_SHAPE, "%s: %s has %lld elements but x has %lld rows", op, name,
                         (long long)kern_tensor_numel(t), (long long)rows);
    if (!kern_tensor_is_contiguous(t))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s must be contiguous", op, name);
    return KERN_OK;
}

static kern_status kern__norm_check_eps(const char *op, float eps, int eps_set, float *out) {
    *out = eps_set || eps != 0.0f ? eps : 1e-5f;
    if (eps != eps || eps < 0.0f || eps > 3.4028234e38f)
        return kern__err(KERN_ERR_ARG, "%s: eps=%g must be finite and >= 0", op, (double)eps);
    return KERN_OK;
}

static kern_status kern__norm_check_kind_act(const char *op, kern_norm_kind norm, kern_act act) {
    if ((int)norm != KERN_NORM_LAYER && (int)norm != KERN_NORM_RMS)
        return kern__err(KERN_ERR_ARG, "%s: params.norm=%d is not a kern_norm_kind", op, (int)norm);
    if ((int)act < KERN_ACT_NONE || (int)act >= KERN_ACT_COUNT)
        return kern__err(KERN_ERR_ARG, "%s: params.act=%d is not a kern_act", op, (int)act);
    return KERN_OK;
}

KERN_API void kern_norm_params_defaults(kern_norm_params *p) {
    if (!p) return;
    if (!p->eps_set && p->eps == 0.0f) p->eps = 1e-5f;
    p->eps_set = 1;
}

KERN_API void kern_norm_backward_params_defaults(kern_norm_backward_params *p) {
    if (!p) return;
    if (!p->eps_set && p->eps == 0.0f) p->eps = 1e-5f;
    p->eps_set = 1;
}

static int kern__norm_same_view(const kern_tensor *a, const kern_tensor *b) {
    int d;
    if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->stride[d] != b->stride[d]))
            return 0;
    return 1;
}

/* Outputs may be an input's identical view (in place); no other overlap. */
static kern_status kern__norm_check_alias(const char *op, const kern_tensor *const *outs,
                                          const char *const *onames, int nout,
                                          const kern_tensor *const *ins,
                                          const char *const *inames, int nin) {
    int i, j;
    for (i = 0; i < nout; i++) {
        if (!outs[i]) continue;
        if (kern__tensor_self_overlap(outs[i]))
            return kern__err(KERN_ERR_LAYOUT,
                             "%s: %s has overlapping elements (a zero or too small stride); an "
                             "output needs distinct elements",
                             op, onames[i]);
        for (j = 0; j < nin; j++)
            if (ins[j] && kern_tensors_overlap(outs[i], ins[j]) &&
                !kern__norm_same_view(outs[i], ins[j]))
                return kern__err(KERN_ERR_ARG,
                                 "%s: %s overlaps %s (only the identical view may be used in place)",
                                 op, onames[i], inames[j]);
        for (j = 0; j < i; j++)
            if (outs[j] && kern_tensors_overlap(outs[i], outs[j]))
                return kern__err(KERN_ERR_ARG, "%s: outputs %s and %s overlap", op, onames[j],
                                 onames[i]);
    }
    return KERN_OK;
}

/* rows = product of the leading dims (checked for overflow even when the
 * tensor is empty). */
static kern_status kern__norm_rows(const kern_tensor *x, const char *op, int64_t *rows) {
    int64_t r = 1;
    int d;
    for (d = 0; d < x->ndim - 1; d++)
        if (kern_mul_overflow_i64(r, x->shape[d], &r))
            return kern__err(KERN_ERR_SHAPE, "%s: x has too many rows (overflow)", op);
    *rows = r;
    return KERN_OK;
}

/* Weight/bias as f32: the tensor itself when it is f32, else converted into
 * `dst` (H floats). */
static const float *kern__norm_vec_f32(kern_ctx *ctx, const kern_tensor *t, float *dst, int64_t H) {
    if (!t) return NULL;
    if (t->dtype == KERN_F32) return (const float *)t->data;
    kern_convert(ctx, t->dtype, t->data, KERN_F32, dst, H);
    return dst;
}

static int64_t kern__norm_bytes(const kern_tensor *t) {
    return t ? kern_tensor_numel(t) * (int64_t)kern_dtype_size(t->dtype) : 0;
}

static inline void kern__norm_fence(int nt) {
#ifdef KERN_X86
    if (nt) _mm_sfence();
#endif
    (void)nt;
}

/* Runs tasks [0, n_tasks) of fn: on the context's threads, or, when the
 * call's work (`steps`, see KERN_NORM_SERIAL_STEPS) is too small to pay for
 * waking a worker, all of them in order on the calling thread (as one task
 * of the pool, so nesting and user pools behave as before). Every task
 * computes the same values either way. */
typedef struct kern__norm_serial {
    kern_task_fn fn;
    void *arg;
    int64_t n;
} kern__norm_serial;

static void kern__norm_serial_task(void *arg, int64_t task, int thread) {
    const kern__norm_serial *s = (const kern__norm_serial *)arg;
    int64_t t;
    (void)task;
    for (t = 0; t < s->n; t++) s->fn(s->arg, t, thread);
}

static void kern__norm_run(kern_ctx *ctx, int64_t n_tasks, int64_t steps, kern_task_fn fn, void *arg) {
    if (n_tasks > 1 && steps < KERN_NORM_SERIAL_STEPS) {
        kern__norm_serial s;
        s.fn = fn;
        s.arg = arg;
        s.n = n_tasks;
        kern_parallel_for(ctx, 1, kern__norm_serial_task, &s);
    } else {
        kern_parallel_for(ctx, n_tasks, fn, arg);
    }
}

/* The element-steps of rows x H elements (KERN_NORM_SERIAL_STEPS): 4 an
 * element with `heavy` work (an activation other than ReLU, a backward),
 * else 1; saturates at the threshold (no overflow for any shape). */
static int64_t kern__norm_steps(int64_t rows, int64_t H, int heavy) {
    const int64_t lim = KERN_NORM_SERIAL_STEPS;
    if (H != 0 && rows > lim / H) return lim;
    return rows * H * (heavy ? 4 : 1);
}
static int kern__norm_heavy_act(kern_act act) { return act != KERN_ACT_NONE && act != KERN_ACT_RELU; }

/* -------------------------------------------------------------- forward */

static void kern__norm_fwd_task(void *arg, int64_t task, int thread) {
    const kern__norm_fwd *a = (const kern__norm_fwd *)arg;
    float *sc = (float *)kern__thread_scratch(a->ctx, thread);
    int64_t r = task * a->rpt, r1 = r + a->rpt < a->rows ? r + a->rpt : a->rows;
    float shift = (float)NAN; /* the previous row's mean within this task */
    const void *x = kern__norm_row(&a->x, r), *rr = kern__norm_row(&a->r, r);
    for (; r < r1; r++) {
        kern__norm_pf pf;
        const void *nx = r + 1 < a->rows ? kern__norm_row(&a->x, r + 1) : NULL;
        const void *nr = r + 1 < a->rows ? kern__norm_row(&a->r, r + 1) : NULL;
        pf.n = 0;
        kern__norm_pf_add(&pf, nx, a->x.dt);
        kern__norm_pf_add(&pf, nr, a->r.dt);
        a->row(a, x, rr, kern__norm_row(&a->o, r), kern__norm_row(&a->ro, r), sc, r, &shift, &pf);
        x = nx;
        rr = nr;
    }
    kern__norm_fence(a->nt);
}

/* The shape and the resolved eps of a validated call. */
typedef struct kern__norm_dims {
    int64_t rows, H;
    float eps;
} kern__norm_dims;

/* Validates kern_norm's operands (writes nothing but *d). */
static kern_status kern__norm_fwd_check(const char *op, const kern_tensor *x, const kern_tensor *out,
                                        const kern_norm_params *p, kern__norm_dims *d) {
    kern_status st;
    int64_t H;
    memset(d, 0, sizeof *d);
    if (!x || !out) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !x ? "x" : "out");
    if ((st = kern__norm_check_rowt(x, op, "x", NULL, NULL)) != KERN_OK) return st;
    if ((st = kern__norm_check_rowt(out, op, "out", x, "x")) != KERN_OK) return st;
    if (p->residual && (st = kern__norm_check_rowt(p->residual, op, "residual", x, "x")) != KERN_OK)
        return st;
    if (p->residual_out &&
        (st = kern__norm_check_rowt(p->residual_out, op, "residual_out", x, "x")) != KERN_OK)
        return st;
    H = x->shape[x->ndim - 1];
    if ((st = kern__norm_rows(x, op, &d->rows)) != KERN_OK) return st;
    if (p->weight && (st = kern__norm_check_vec(p->weight, op, "weight", H)) != KERN_OK) return st;
    if (p->bias && (st = kern__norm_check_vec(p->bias, op, "bias", H)) != KERN_OK) return st;
    if ((st = kern__norm_check_kind_act(op, p->norm, p->act)) != KERN_OK) return st;
    if (p->mean && p->norm == KERN_NORM_RMS)
        return kern__err(KERN_ERR_ARG, "%s: mean was given but RMSNorm has no mean (pass rstd only)", op);
    if (p->mean && (st = kern__norm_check_stats(p->mean, op, "mean", d->rows)) != KERN_OK) return st;
    if (p->rstd && (st = kern__norm_check_stats(p->rstd, op, "rstd", d->rows)) != KERN_OK) return st;
    if ((st = kern__norm_check_eps(op, p->eps, p->eps_set, &d->eps)) != KERN_OK) return st;
    {
        const kern_tensor *outs[4], *ins[4];
        const char *on[4] = {"out", "residual_out", "mean", "rstd"};
        const char *in[4] = {"x", "residual", "weight", "bias"};
        outs[0] = out; outs[1] = p->residual_out; outs[2] = p->mean; outs[3] = p->rstd;
        ins[0] = x; ins[1] = p->residual; ins[2] = p->weight; ins[3] = p->bias;
        if ((st = kern__norm_check_alias(op, outs, on, 4, ins, in, 4)) != KERN_OK) return st;
    }
    d->H = H;
    return KERN_OK;
}

/* kern_norm's scratch: 2 Hp floats shared (weight and bias as f32), Hp per
 * thread (the row held in f32). */
static void kern__norm_fwd_scratch(int64_t rows, int64_t H, size_t *shared, size_t *thread) {
    int64_t Hp;
    *shared = *thread = 0;
    if (rows <= 0 || H <= 0) return;
    Hp = (H + 15) & ~(int64_t)15; /* H < 2^62 here: x holds rows * H > 0 elements */
    *shared = (size_t)(2 * Hp) * sizeof(float);
    *thread = (size_t)Hp * sizeof(float);
}

KERN_API kern_status kern_norm_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                              const kern_tensor *out,
                                              const kern_norm_params *params, size_t *bytes) {
    static const char *op = "kern_norm_workspace_size";
    kern_norm_params p;
    kern__norm_dims d;
    kern_status st;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    if ((st = kern__norm_fwd_check(op, x, out, &p, &d)) != KERN_OK) return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__norm_fwd_scratch(d.rows, d.H, &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

/* Fills the forward's task arguments: weight / bias as f32 from the
 * workspace (ones / zeros when absent: the vector loops always apply the
 * affine, x * 1 + 0 is exact), the views, the row kernel of the context's
 * ISA level. */
static kern_status kern__norm_fwd_setup(kern_ctx *ctx, const char *op, const kern_tensor *x,
                                        const kern_tensor *out, const kern_norm_params *p,
                                        const kern__norm_dims *d, kern__norm_fwd *a) {
    const int64_t H = d->H, Hp = (H + 15) & ~(int64_t)15;
    float *ws = (float *)kern__workspace(ctx, (size_t)(2 * Hp) * sizeof(float));
    int64_t j;
    memset(a, 0, sizeof *a);
    if (!ws || kern__reserve_thread_scratch(ctx, (size_t)Hp * sizeof(float)) != KERN_OK)
        return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %lld bytes of scratch", op,
                         (long long)(3 * Hp * 4));
    if (!p->weight)
        for (j = 0; j < H; j++) ws[j] = 1.0f;
    if (!p->bias)
        for (j = 0; j < H; j++) ws[Hp + j] = 0.0f;
    a->w = p->weight ? kern__norm_vec_f32(ctx, p->weight, ws, H) : ws;
    a->b = p->bias ? kern__norm_vec_f32(ctx, p->bias, ws + Hp, H) : ws + Hp;
    kern__norm_view_init(&a->x, x);
    kern__norm_view_init(&a->r, p->residual);
    kern__norm_view_init(&a->o, out);
    kern__norm_view_init(&a->ro, p->residual_out);
    a->mean = p->mean ? (float *)p->mean->data : NULL;
    a->rstd = p->rstd ? (float *)p->rstd->data : NULL;
    a->H = H;
    a->Hp = Hp;
    a->rows = d->rows;
    a->rpt = H >= 16384 ? 1 : 16384 / H;
    a->eps = d->eps;
    a->rms = p->norm == KERN_NORM_RMS;
    a->act = p->act;
    a->nt = kern__norm_bytes(out) + kern__norm_bytes(p->residual_out) >= KERN_NORM_NT_BYTES;
    a->ctx = ctx;
    a->row = kern__norm_fns_for(kern_ctx_isa(ctx))->fwd_row;
    return KERN_OK;
}

KERN_API kern_status kern_norm(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *out,
                               const kern_norm_params *params) {
    static const char *op = "kern_norm";
    kern_norm_params p;
    kern__norm_dims d;
    kern_status st;
    kern__norm_fwd a;
    size_t sh, th;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    if ((st = kern__norm_fwd_check(op, x, out, &p, &d)) != KERN_OK) return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__norm_fwd_scratch(d.rows, d.H, &sh, &th);
    if ((st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size, sh, th)) != KERN_OK) {
        kern__op_end(ctx);
        return st;
    }
    if (d.rows > 0 && d.H == 0 && (p.mean || p.rstd)) { /* PyTorch: mean 0, rstd NaN (no loop over
                                                           rows without them: x may be [2^40, 0]) */
        int64_t r;
        for (r = 0; r < d.rows; r++) {
            if (p.mean) ((float *)p.mean->data)[r] = 0.0f;
            if (p.rstd) ((float *)p.rstd->data)[r] = (float)NAN;
        }
    }
    if (d.rows > 0 && d.H > 0) {
        st = kern__norm_fwd_setup(ctx, op, x, out, &p, &d, &a);
        if (st == KERN_OK)
            kern__norm_run(ctx, (d.rows + a.rpt - 1) / a.rpt,
                           kern__norm_steps(d.rows, d.H, kern__norm_heavy_act(p.act)),
                           kern__norm_fwd_task, &a);
    }
    kern__op_end(ctx);
    return st;
}

/* ------------------------------------------------------------- backward */

static void kern__norm_bwd_task(void *arg, int64_t task, int thread) {
    const kern__norm_bwd *a = (const kern__norm_bwd *)arg;
    float *sc = (float *)kern__thread_scratch(a->ctx, thread);
    int64_t r = task * a->rpt, r1 = r + a->rpt < a->rows ? r + a->rpt : a->rows;
    float *pw = a->pw ? a->pw + task * a->Hp : NULL;
    float *pb = a->pb ? a->pb + task * a->Hp : NULL;
    if (pw) memset(pw, 0, (size_t)a->Hp * sizeof(float));
    if (pb) memset(pb, 0, (size_t)a->Hp * sizeof(float));
    for (; r < r1; r++) {
        kern__norm_pf pf;
        pf.n = 0;
        if (r + 1 < a->rows) {
            kern__norm_pf_add(&pf, kern__norm_row(&a->dy, r + 1), a->dy.dt);
            kern__norm_pf_add(&pf, kern__norm_row(&a->x, r + 1), a->x.dt);
            kern__norm_pf_add(&pf, kern__norm_row(&a->dr, r + 1), a->dr.dt);
        }
        a->row(a, kern__norm_row(&a->dy, r), kern__norm_row(&a->x, r), kern__norm_row(&a->dx, r),
               kern__norm_row(&a->dr, r), sc, r, pw, pb, &pf);
    }
}

static const float *kern__norm_bwd_vec(kern_ctx *ctx, const kern_tensor *t, float *ws, int64_t H,
                                       int64_t Hp, float fill) {
    int64_t j;
    if (t && t->dtype == KERN_F32 && H == Hp) return (const float *)t->data;
    if (!t) for (j = 0; j < H; j++) ws[j] = fill;
    else if (t->dtype == KERN_F32) memcpy(ws, t->data, (size_t)H * sizeof(float));
    else kern_convert(ctx, t->dtype, t->data, KERN_F32, ws, H);
    for (j = H; j < Hp; j++) ws[j] = 0.0f;
    return ws;
}

/* Phase 2: dweight/dbias = sum of the block partials in block order (the
 * same bits for any thread count). */
#define KERN__NORM_RED_COLS 1024
static void kern__norm_bwd_reduce_task(void *arg, int64_t task, int thread) {
    const kern__norm_bwd *a = (const kern__norm_bwd *)arg;
    int64_t j0 = task * KERN__NORM_RED_COLS;
    int64_t n = a->H - j0 < KERN__NORM_RED_COLS ? a->H - j0 : KERN__NORM_RED_COLS;
    float acc[KERN__NORM_RED_COLS + 16];
    int which;
    (void)thread;
    for (which = 0; which < 2; which++) {
        const float *p = which ? a->pb : a->pw;
        const kern_tensor *t = which ? a->dbias : a->dweight;
        int64_t blk, j;
        if (!p || !t) continue;
        memcpy(acc, p + j0, (size_t)((n + 15) & ~(int64_t)15) * sizeof(float));
        for (blk = 1; blk < a->nblk; blk++) {
            const float *s = p + blk * a->Hp + j0;
            int k;
            /* fixed 16-wide inner blocks: plain -O2 vectorizes them (the
             * partials are padded to Hp, a multiple of 16) */
            for (j = 0; j < n; j += 16)
                for (k = 0; k < 16; k++) acc[j + k] += s[j + k];
        }
        if (t->dtype == KERN_F32) memcpy((float *)t->data + j0, acc, (size_t)n * sizeof(float));
        else kern_convert(a->ctx, KERN_F32, acc, t->dtype, (char *)t->data + j0 * 2, n);
    }
}

/* Validates kern_norm_backward's operands (writes nothing but *d). */
static kern_status kern__norm_bwd_check(const char *op, const kern_tensor *dout, const kern_tensor *x,
                                        const kern_tensor *dx, const kern_norm_backward_params *p,
                                        kern__norm_dims *d) {
    kern_status st;
    int64_t H;
    memset(d, 0, sizeof *d);
    if (!dout || !x || !dx)
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !dout ? "dout" : !x ? "x" : "dx");
    if ((st = kern__norm_check_rowt(x, op, "x", NULL, NULL)) != KERN_OK) return st;
    if ((st = kern__norm_check_rowt(dout, op, "dout", x, "x")) != KERN_OK) return st;
    if ((st = kern__norm_check_rowt(dx, op, "dx", x, "x")) != KERN_OK) return st;
    if (p->dresidual && (st = kern__norm_check_rowt(p->dresidual, op, "dresidual", x, "x")) != KERN_OK)
        return st;
    H = x->shape[x->ndim - 1];
    if ((st = kern__norm_rows(x, op, &d->rows)) != KERN_OK) return st;
    if (p->weight && (st = kern__norm_check_vec(p->weight, op, "weight", H)) != KERN_OK) return st;
    if (p->bias && (st = kern__norm_check_vec(p->bias, op, "bias", H)) != KERN_OK) return st;
    if (p->dweight && (st = kern__norm_check_vec(p->dweight, op, "dweight", H)) != KERN_OK) return st;
    if (p->dbias && (st = kern__norm_check_vec(p->dbias, op, "dbias", H)) != KERN_OK) return st;
    if ((st = kern__norm_check_kind_act(op, p->norm, p->act)) != KERN_OK) return st;
    if (p->dweight && !p->weight)
        return kern__err(KERN_ERR_ARG, "%s: dweight was given but weight is NULL", op);
    if (p->dbias && !p->bias)
        return kern__err(KERN_ERR_ARG, "%s: dbias was given but bias is NULL", op);
    if (p->norm == KERN_NORM_RMS && p->mean)
        return kern__err(KERN_ERR_ARG, "%s: mean was given but RMSNorm has no mean", op);
    if (p->norm == KERN_NORM_LAYER && !p->mean != !p->rstd)
        return kern__err(KERN_ERR_ARG, "%s: LayerNorm needs both mean and rstd, or neither (%s is NULL)",
                         op, p->mean ? "rstd" : "mean");
    if (p->mean && (st = kern__norm_check_stats(p->mean, op, "mean", d->rows)) != KERN_OK) return st;
    if (p->rstd && (st = kern__norm_check_stats(p->rstd, op, "rstd", d->rows)) != KERN_OK) return st;
    if ((st = kern__norm_check_eps(op, p->eps, p->eps_set, &d->eps)) != KERN_OK) return st;
    {
        const kern_tensor *outs[3], *ins[7];
        const char *on[3] = {"dx", "dweight", "dbias"};
        const char *in[7] = {"dout", "x", "dresidual", "weight", "bias", "mean", "rstd"};
        outs[0] = dx; outs[1] = p->dweight; outs[2] = p->dbias;
        ins[0] = dout; ins[1] = x; ins[2] = p->dresidual; ins[3] = p->weight; ins[4] = p->bias;
        ins[5] = p->mean; ins[6] = p->rstd;
        if ((st = kern__norm_check_alias(op, outs, on, 3, ins, in, 7)) != KERN_OK) return st;
    }
    d->H = H;
    return KERN_OK;
}

/* Rows per task and, with dweight/dbias, the number of fixed row blocks
 * whose partial sums are reduced in order. */
static void kern__norm_bwd_blocks(int64_t rows, int64_t H, int partials, int64_t *rpt,
                                  int64_t *nblk) {
    if (partials) {
        /* fixed row blocks, independent of the thread count */
        *nblk = rows < 64 ? rows : 64;
        *rpt = (rows + *nblk - 1) / *nblk;
        *nblk = (rows + *rpt - 1) / *rpt;
    } else {
        *rpt = H >= 16384 ? 1 : 16384 / H;
        *nblk = 0;
    }
}

/* kern_norm_backward's scratch: weight and bias as f32 (2 Hp floats) and
 * the block partials of dweight / dbias (nblk Hp floats each) shared; 2 Hp
 * floats per thread. */
static void kern__norm_bwd_scratch(int64_t rows, int64_t H, const kern_norm_backward_params *p,
                                   size_t *shared, size_t *thread) {
    int64_t Hp, rpt, nblk, nfl;
    int dw = p && p->dweight, db = p && p->dbias;
    *shared = *thread = 0;
    if (rows == 0 || H == 0) return;
    Hp = (H + 15) & ~(int64_t)15; /* H < 2^62 here: x holds rows * H > 0 elements */
    kern__norm_bwd_blocks(rows, H, dw || db, &rpt, &nblk);
    /* the row kernels take dweight and dbias partials each on its own
     * (specialized on both): dbias alone needs no dweight space */
    nfl = 2 * Hp + (dw ? nblk * Hp : 0) + (db ? nblk * Hp : 0);
    *shared = (size_t)nfl * sizeof(float);
    *thread = (size_t)(2 * Hp) * sizeof(float);
}

KERN_API kern_status kern_norm_backward_workspace_size(kern_ctx *ctx, const kern_tensor *dout,
                                                       const kern_tensor *x, const kern_tensor *dx,
                                                       const kern_norm_backward_params *params,
                                                       size_t *bytes) {
    static const char *op = "kern_norm_backward_workspace_size";
    kern_norm_backward_params p;
    kern__norm_dims d;
    kern_status st;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    if ((st = kern__norm_bwd_check(op, dout, x, dx, &p, &d)) != KERN_OK) return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__norm_bwd_scratch(d.rows, d.H, &p, &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

/* Fills the backward's task arguments: weight / bias as f32 arrays padded
 * with zeros to Hp (the vector loops read w, b, pw, pb in whole vectors):
 * the caller's f32 array when H needs no padding, else converted/copied;
 * ones/zeros when absent; the block partials of dweight and dbias, each
 * only when wanted; the views and the row kernel of the ISA level. */
static kern_status kern__norm_bwd_setup(kern_ctx *ctx, const char *op, const kern_tensor *dout,
                                        const kern_tensor *x, const kern_tensor *dx,
                                        const kern_norm_backward_params *p, const kern__norm_dims *d,
                                        kern__norm_bwd *a) {
    const int64_t H = d->H, Hp = (H + 15) & ~(int64_t)15;
    int64_t nfl;
    float *ws;
    memset(a, 0, sizeof *a);
    kern__norm_bwd_blocks(d->rows, H, p->dweight || p->dbias, &a->rpt, &a->nblk);
    nfl = 2 * Hp + (p->dweight ? a->nblk * Hp : 0) + (p->dbias ? a->nblk * Hp : 0);
    ws = (float *)kern__workspace(ctx, (size_t)nfl * sizeof(float));
    if (!ws || kern__reserve_thread_scratch(ctx, (size_t)(2 * Hp) * sizeof(float)) != KERN_OK)
        return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %lld bytes of scratch", op,
                         (long long)(nfl * 4));
    a->w = kern__norm_bwd_vec(ctx, p->weight, ws, H, Hp, 1.0f);
    a->b = kern__norm_bwd_vec(ctx, p->bias, ws + Hp, H, Hp, 0.0f);
    a->pw = p->dweight ? ws + 2 * Hp : NULL;
    a->pb = p->dbias ? ws + 2 * Hp + (p->dweight ? a->nblk * Hp : 0) : NULL;
    kern__norm_view_init(&a->dy, dout);
    kern__norm_view_init(&a->x, x);
    kern__norm_view_init(&a->dx, dx);
    kern__norm_view_init(&a->dr, p->dresidual);
    a->mean = p->mean ? (const float *)p->mean->data : NULL;
    a->rstd = p->rstd ? (const float *)p->rstd->data : NULL;
    a->H = H;
    a->Hp = Hp;
    a->rows = d->rows;
    a->eps = d->eps;
    a->rms = p->norm == KERN_NORM_RMS;
    a->act = p->act;
    a->ctx = ctx;
    a->dweight = p->dweight;
    a->dbias = p->dbias;
    a->row = kern__norm_fns_for(kern_ctx_isa(ctx))->bwd_row;
    return KERN_OK;
}

KERN_API kern_status kern_norm_backward(kern_ctx *ctx, const kern_tensor *dout,
                                        const kern_tensor *x, const kern_tensor *dx,
                                        const kern_norm_backward_params *params) {
    static const char *op = "kern_norm_backward";
    kern_norm_backward_params p;
    kern__norm_dims d;
    kern_status st;
    kern__norm_bwd a;
    size_t sh, th;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    if ((st = kern__norm_bwd_check(op, dout, x, dx, &p, &d)) != KERN_OK) return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__norm_bwd_scratch(d.rows, d.H, &p, &sh, &th);
    if ((st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size, sh, th)) != KERN_OK) {
        kern__op_end(ctx);
        return st;
    }
    if (d.rows == 0 || d.H == 0) { /* empty: dweight/dbias are sums over nothing */
        int64_t j;
        for (j = 0; (p.dweight || p.dbias) && j < d.H; j++) { /* (x may be [0, 2^40]) */
            if (p.dweight) kern__s_store_f32((char *)p.dweight->data + j * kern__norm_es(p.dweight->dtype),
                                             p.dweight->dtype, 0.0f, 1, 0);
            if (p.dbias) kern__s_store_f32((char *)p.dbias->data + j * kern__norm_es(p.dbias->dtype),
                                           p.dbias->dtype, 0.0f, 1, 0);
        }
    } else if ((st = kern__norm_bwd_setup(ctx, op, dout, x, dx, &p, &d, &a)) == KERN_OK) {
        const int64_t steps = kern__norm_steps(d.rows, d.H, 1);
        kern__norm_run(ctx, (d.rows + a.rpt - 1) / a.rpt, steps, kern__norm_bwd_task, &a);
        if (p.dweight || p.dbias)
            kern__norm_run(ctx, (d.H + KERN__NORM_RED_COLS - 1) / KERN__NORM_RED_COLS, steps,
                           kern__norm_bwd_reduce_task, &a);
    }
    kern__op_end(ctx);
    return st;
}

/* ---------------------------------------------------------- elementwise */

#define KERN__NORM_EW_SEG 8192
static void kern__norm_ew_task(void *arg, int64_t task, int thread) {
    const kern__norm_ew *e = (const kern__norm_ew *)arg;
    (void)thread;
    if (e->nseg > 1) {
        int64_t r = task / e->nseg, j0 = (task % e->nseg) * e->seg;
        int64_t n = e->H - j0 < e->seg ? e->H - j0 : e->seg;
        const char *p = (const char *)kern__norm_row(&e->a, r) + j0 * kern__norm_es(e->a.dt);
        const char *q = e->b.base ? (const char *)kern__norm_row(&e->b, r) + j0 * kern__norm_es(e->b.dt)
                                  : NULL;
        char *o = (char *)kern__norm_row(&e->o, r) + j0 * kern__norm_es(e->o.dt);
        e->seg_fn(e, p, q, o, e->bias ? e->bias + j0 : NULL, n);
    } else {
        int64_t r = task * e->rpt, r1 = r + e->rpt < e->rows ? r + e->rpt : e->rows;
        for (; r < r1; r++)
            e->seg_fn(e, kern__norm_row(&e->a, r), kern__norm_row(&e->b, r), kern__norm_row(&e->o, r),
                      e->bias, e->H);
    }
    kern__norm_fence(e->nt);
}

/* The operands of an elementwise op: a (x or dout), b (x of the backward,
 * b of the add, or NULL), bias, o, with their names for the messages. */
typedef struct kern__norm_ew_args {
    const char *op;
    int ewop;
    const kern_tensor *a, *b, *bias, *o;
    const char *aname, *bname, *oname;
    kern_act act;
    int gelu_only; /* kern_gelu & co: act must be one of the two GELUs */
} kern__norm_ew_args;

/* Validates an elementwise op's operands (writes nothing but *rows, *H). */
static kern_status kern__norm_ew_check(const kern__norm_ew_args *g, int64_t *rows, int64_t *H) {
    const char *op = g->op;
    kern_status st;
    *rows = *H = 0;
    if (!g->a || !g->o || (g->ewop != KERN__NORM_EW_ACT && !g->b))
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !g->a ? g->aname : !g->o ? g->oname : g->bname);
    if ((st = kern__norm_check_rowt(g->a, op, g->aname, NULL, NULL)) != KERN_OK) return st;
    if (g->b && (st = kern__norm_check_rowt(g->b, op, g->bname, g->a, g->aname)) != KERN_OK) return st;
    if ((st = kern__norm_check_rowt(g->o, op, g->oname, g->a, g->aname)) != KERN_OK) return st;
    if ((st = kern__norm_rows(g->a, op, rows)) != KERN_OK) return st;
    if (g->bias && (st = kern__norm_check_vec(g->bias, op, "bias", g->a->shape[g->a->ndim - 1])) != KERN_OK)
        return st;
    if (g->gelu_only && g->act != KERN_ACT_GELU && g->act != KERN_ACT_GELU_TANH)
        return kern__err(KERN_ERR_ARG, "%s: act=%d (%s) must be KERN_ACT_GELU or KERN_ACT_GELU_TANH", op,
                         (int)g->act, kern_act_name(g->act));
    if ((int)g->act < KERN_ACT_NONE || (int)g->act >= KERN_ACT_COUNT)
        return kern__err(KERN_ERR_ARG, "%s: act=%d is not a kern_act", op, (int)g->act);
    {
        const kern_tensor *outs[1], *ins[3];
        const char *on[1], *in[3];
        outs[0] = g->o; on[0] = g->oname;
        ins[0] = g->a; ins[1] = g->b; ins[2] = g->bias;
        in[0] = g->aname; in[1] = g->bname; in[2] = "bias";
        if ((st = kern__norm_check_alias(op, outs, on, 1, ins, in, 3)) != KERN_OK) return st;
    }
    *H = g->a->shape[g->a->ndim - 1];
    return KERN_OK;
}

/* Fills the task arguments: the bias as f32 (converted once into the
 * context's scratch unless it is f32), the views, rows or segments per
 * task, the segment kernel of the ISA level. */
static kern_status kern__norm_ew_setup(kern_ctx *ctx, const kern__norm_ew_args *g, int64_t rows, int64_t H,
                                       kern__norm_ew *e) {
    memset(e, 0, sizeof *e);
    if (g->bias && g->bias->dtype != KERN_F32) {
        float *ws = (float *)kern__workspace(ctx, (size_t)H * sizeof(float));
        if (!ws)
            return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %lld bytes of workspace", g->op,
                             (long long)(H * 4));
        e->bias = kern__norm_vec_f32(ctx, g->bias, ws, H);
    } else if (g->bias) {
        e->bias = (const float *)g->bias->data;
    }
    kern__norm_view_init(&e->a, g->a);
    kern__norm_view_init(&e->b, g->b);
    kern__norm_view_init(&e->o, g->o);
    e->H = H;
    e->rows = rows;
    e->op = g->ewop;
    e->act = g->act;
    e->nt = kern__norm_bytes(g->o) >= KERN_NORM_NT_BYTES;
    if (H > 2 * KERN__NORM_EW_SEG) {
        e->seg = KERN__NORM_EW_SEG;
        e->nseg = (H + e->seg - 1) / e->seg;
    } else {
        e->seg = H;
        e->nseg = 1;
        e->rpt = H >= 16384 ? 1 : 16384 / H;
    }
    e->seg_fn = kern__norm_fns_for(kern_ctx_isa(ctx))->ew_seg;
    return KERN_OK;
}

static kern_status kern__norm_ew_run(kern_ctx *ctx, const kern__norm_ew_args *g) {
    kern_status st;
    kern__norm_ew e;
    int64_t rows, H;
    if ((st = kern__norm_ew_check(g, &rows, &H)) != KERN_OK) return st;
    if ((st = kern__op_begin(&ctx, g->op)) != KERN_OK) return st;
    if (rows > 0 && H > 0 && (st = kern__norm_ew_setup(ctx, g, rows, H, &e)) == KERN_OK)
        kern__norm_run(ctx, e.nseg > 1 ? rows * e.nseg : (rows + e.rpt - 1) / e.rpt,
                       kern__norm_steps(rows, H, g->ewop != KERN__NORM_EW_ADD && kern__norm_heavy_act(g->act)),
                       kern__norm_ew_task, &e);
    kern__op_end(ctx);
    return st;
}

static kern__norm_ew_args kern__norm_ew_args_make(const char *op, int ewop, const kern_tensor *a,
                                                  const char *aname, const kern_tensor *b, const char *bname,
                                                  const kern_tensor *bias, const kern_tensor *o,
                                                  const char *oname, kern_act act) {
    kern__norm_ew_args g;
    g.op = op;
    g.ewop = ewop;
    g.a = a;
    g.b = b;
    g.bias = bias;
    g.o = o;
    g.aname = aname;
    g.bname = bname;
    g.oname = oname;
    g.act = act;
    g.gelu_only = 0;
    return g;
}

KERN_API kern_status kern_activation(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *bias,
                                     const kern_tensor *out, kern_act act) {
    kern__norm_ew_args g =
        kern__norm_ew_args_make("kern_activation", KERN__NORM_EW_ACT, x, "x", NULL, "", bias, out, "out", act);
    return kern__norm_ew_run(ctx, &g);
}
KERN_API kern_status kern_activation_backward(kern_ctx *ctx, const kern_tensor *dout, const kern_tensor *x,
                                              const kern_tensor *dx, kern_act act) {
    kern__norm_ew_args g = kern__norm_ew_args_make("kern_activation_backward", KERN__NORM_EW_ACT_BWD, dout,
                                                   "dout", x, "x", NULL, dx, "dx", act);
    return kern__norm_ew_run(ctx, &g);
}

/* The GELU ops: kern_activation(_backward) restricted to the two GELUs. */
static kern_status kern__norm_gelu_run(kern_ctx *ctx, kern__norm_ew_args *g) {
    g->gelu_only = 1;
    return kern__norm_ew_run(ctx, g);
}
KERN_API kern_status kern_gelu(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *out,
                               kern_act act) {
    kern__norm_ew_args g =
        kern__norm_ew_args_make("kern_gelu", KERN__NORM_EW_ACT, x, "x", NULL, "", NULL, out, "out", act);
    return kern__norm_gelu_run(ctx, &g);
}
KERN_API kern_status kern_bias_gelu(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *bias,
                                    const kern_tensor *out, kern_act act) {
    kern__norm_ew_args g =
        kern__norm_ew_args_make("kern_bias_gelu", KERN__NORM_EW_ACT, x, "x", NULL, "", bias, out, "out", act);
    return kern__norm_gelu_run(ctx, &g);
}
KERN_API kern_status kern_gelu_backward(kern_ctx *ctx, const kern_tensor *dout,
                                        const kern_tensor *x, const kern_tensor *dx,
                                        kern_act act) {
    kern__norm_ew_args g = kern__norm_ew_args_make("kern_gelu_backward", KERN__NORM_EW_ACT_BWD, dout, "dout",
                                                   x, "x", NULL, dx, "dx", act);
    return kern__norm_gelu_run(ctx, &g);
}
KERN_API kern_status kern_add(kern_ctx *ctx, const kern_tensor *a, const kern_tensor *b,
                              const kern_tensor *out) {
    kern__norm_ew_args g =
        kern__norm_ew_args_make("kern_add", KERN__NORM_EW_ADD, a, "a", b, "b", NULL, out, "out", KERN_ACT_NONE);
    return kern__norm_ew_run(ctx, &g);
}

#ifdef __cplusplus
}
#endif
KERN__IMPL_DIAG_END
#endif /* KERN_IMPLEMENTATION */
