/* kern_norm.h — fused residual add + LayerNorm / RMSNorm + affine + GELU,
 * forward and backward; GELU alone, bias + GELU, and its backward.
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
 *     act  = none, GELU (erf; torch gelu approximate='none') or GELU tanh
 *            (torch approximate='tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x +
 *            0.044715 x^3)))).
 *   kern_norm_backward:  dx (and optionally dweight, dbias) of kern_norm,
 *                        activation included, given dout and the forward's
 *                        normalized input h (= residual_out when a residual
 *                        was used; the gradient of x and of residual are both
 *                        dx). An optional dresidual (gradient arriving at
 *                        residual_out from elsewhere) is added to dx.
 *                        dweight/dbias are reduced over rows in a fixed order:
 *                        the same bits for any thread count.
 *   kern_gelu, kern_bias_gelu (out = gelu(x + bias), the GEMM-epilogue op
 *   when it cannot be fused), kern_gelu_backward (dx = dout * gelu'(x)),
 *   kern_add (out = a + b; the residual add alone, a building block and the
 *   unfused baseline of the benchmarks).
 *
 * NUMERICS
 *   All arithmetic is f32 (the scalar path uses double). Row statistics use
 *   a corrected two-pass scheme on the row held in cache: pass 1 gives an
 *   approximate mean m~, pass 2 sums d = h - m~ and d^2, so
 *   mean = m~ + sum(d)/H and var = sum(d^2)/H - (sum(d)/H)^2 (Chan, Golub,
 *   LeVeque); a row of 1e4 + N(0,1) keeps mean and rstd within 1e-6
 *   relative, and the output is normalized as (h - m~ - sum(d)/H) * rstd so
 *   the f32 rounding of a large mean does not leak into the output.
 *   The residual sum h = x + residual is formed in f32 and normalized
 *   unrounded (residual_out stores it rounded to its dtype).
 *   Vector GELU uses kern's own erf (<= 2 ulp over all f32; measured max
 *   1.06 ulp by an exhaustive sweep, see the kern__math_* helpers in the
 *   implementation) and exp (<= 2 ulp, measured 0.99); GELU tanh is evaluated as x * sigmoid(2u), which equals
 *   0.5 x (1 + tanh u) exactly in real arithmetic and keeps relative accuracy
 *   for negative x (PyTorch's f32 formula rounds tanh u to -1 there).
 *   Infinities follow the formulas, as in PyTorch: GELU(+Inf) = +Inf,
 *   GELU(-Inf) = NaN, gelu'(+-Inf) = NaN; NaN propagates.
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
 *   Rows are split across the context's threads. Outputs larger than
 *   KERN_NORM_NT_BYTES (default 16 MiB) are written with non-temporal
 *   stores (they would not stay in cache anyway; saves the read for
 *   ownership).
 *   H = 0: out is empty; mean rows are 0 and rstd rows NaN (as PyTorch).
 *
 * PARAMS (zero-initialise; zero = default)
 *   norm: KERN_NORM_LAYER (0, default) or KERN_NORM_RMS.
 *   act:  KERN_ACT_NONE (0), KERN_ACT_GELU (erf), KERN_ACT_GELU_TANH
 *         (kern_base.h's kern_act; RELU and SILU are KERN_ERR_UNSUPPORTED
 *         here for now).
 *   eps, eps_set: eps 0 means 1e-5 unless eps_set, which makes eps be used
 *         as given, 0 included. Negative, NaN or infinite eps is
 *         KERN_ERR_ARG. kern_norm_params_defaults(&p) shows the resolved
 *         value.
 *   workspace, workspace_size: NULL = the context's reusable scratch; else
 *         caller memory of at least kern_norm_workspace_size() bytes
 *         (kern_norm_backward_workspace_size() for the backward), from
 *         which the call takes all its scratch (shared and per-thread).
 *   mean output with RMSNorm: KERN_ERR_ARG (RMSNorm has no mean).
 *   kern_gelu / kern_bias_gelu / kern_gelu_backward take a kern_act:
 *         KERN_ACT_GELU or KERN_ACT_GELU_TANH, anything else KERN_ERR_ARG.
 *
 * ERRORS (nothing is written on error; kern_last_error() names the function,
 * the argument and the values)
 *   KERN_ERR_ARG     NULL x/out, bad enum, bad eps, overlapping outputs,
 *                    mean with RMSNorm, dweight without weight, a caller
 *                    workspace smaller than the _workspace_size
 *   KERN_ERR_UNSUPPORTED  params.act RELU or SILU (no kernel yet)
 *   KERN_ERR_SHAPE   out/residual/residual_out/dout/dx shapes differ from
 *                    x's (e.g. rows mismatch), weight/bias not [H], mean/
 *                    rstd without `rows` elements
 *   KERN_ERR_DTYPE   a non-float tensor, mean/rstd not f32
 *   KERN_ERR_LAYOUT  last dim not unit stride, weight/bias/mean/rstd not
 *                    contiguous, negative strides, an output whose elements
 *                    overlap (e.g. a zero row stride)
 *   KERN_ERR_NOMEM   scratch could not be allocated
 *
 * ISA PATHS (run-time dispatch from kern_ctx_features): AVX-512 (F/BW/VL/
 * DQ), AVX2+FMA+F16C, AArch64 NEON, portable scalar (double arithmetic).
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

/* kern_act (KERN_ACT_NONE, _GELU, _GELU_TANH here) is kern_base.h's. */

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

/* ------------------------------------------------------------ vector math
 * Internal helpers, reusable by other kern headers (not a stable API).
 * Accuracy is measured against double-precision libm by tests/test_norm.c
 * (erf: >= 10^6 points over all of f32 plus +-0, +-Inf, NaN; the figures
 * below are the measured maxima; for erf an exhaustive sweep was also run
 * once on AVX-512 and AVX2 during development, see below):
 *   kern__math_erf_*   max 1.06 ulp (bound 2 ulp) over every f32 input;
 *                      erf(+-0) = +-0, erf(+-Inf) = +-1, NaN -> NaN.
 *   kern__math_exp_*   max 1 ulp for normal results (x in [-87.3, 88.7]);
 *                      overflow -> +Inf, underflow -> subnormal/0 with
 *                      one extra rounding (AVX2/NEON scale in two steps);
 *                      exp(-Inf) = 0, NaN -> NaN.
 *   kern__math_tanh_*  max 2 ulp; tanh(+-0) = +-0, +-Inf -> +-1, NaN -> NaN.
 * The scalar versions evaluate libm in double and round once (<= 0.5 ulp
 * plus double rounding). GELU helpers build on them (see kern_norm.h top).
 *
 * erf on [0, 4): 8 intervals of width 1/2, k = floor(2|x|), one form for
 * all lanes so each coefficient is picked per lane with one permute
 * (vpermps / tbl) from a row of this table:
 *   t = |x| - CEN_k                (CEN_0 = 0, CEN_k = k/2 + 1/4; exact)
 *   erf(|x|) = fma(t, Q_k(t), fma(t, E_k, C0_k))
 * with E_0 = 1, C0_0 = 0 (interval 0 is t + t Q_0(t): relative accuracy
 * down to subnormals) and E_k = 0, C0_k = erf(CEN_k) rounded to f32 for
 * k > 0. Q_k of degree 6: least-squares fits at 600 Chebyshev nodes of the
 * exact function (mpmath, 40 digits), C0_k rounded first so the fit absorbs
 * it. |x| is clamped to the float below 4 first, where the interval-7
 * polynomial gives exactly 1 (erf rounds to 1 from 3.92): no blend for the
 * tail, and NaN passes through the clamp. The sign is or-ed back last.
 * Exhaustive sweep of every f32 in [0, 8) (and so of every f32, by the sign
 * symmetry and the clamp): max 1.055 ulp (at 0.9997) on AVX-512 and AVX2.
 * Rerun such a sweep after any change to this table. */
static const float kern__math_erf_tab[10][16] = {
    /* CEN */ {0.0f, 0.75f, 1.25f, 1.75f, 2.25f, 2.75f, 3.25f, 3.75f},
    /* C0 */ {0.0f, 0.711155653f, 0.92290014f, 0.986671686f, 0.998537302f,
              0.999899387f, 0.999995708f, 0.999999881f},
    /* E  */ {1.0f},
    /* Q0 */ {1.283791810e-01f, 6.429310441e-01f, 2.365211248e-01f, 5.277499557e-02f,
              7.142318878e-03f, 5.862772814e-04f, 2.918902283e-05f, 8.814314469e-07f},
    /* Q1 */ {-1.526091751e-06f, -4.822038114e-01f, -2.956550121e-01f, -9.236053377e-02f,
              -1.607554965e-02f, -1.614937792e-03f, -9.810509073e-05f, -1.726850769e-06f},
    /* Q2 */ {-3.760786355e-01f, 2.678855695e-02f, 1.675358415e-01f, 9.015733749e-02f,
              2.172453143e-02f, 2.760384232e-03f, 1.958112698e-04f, 7.969994840e-06f},
    /* Q3 */ {-5.544511368e-04f, 1.509167701e-01f, -5.992406048e-03f, -4.792079702e-02f,
              -1.885819063e-02f, -3.143775510e-03f, -1.481104264e-04f, -8.116546815e-05f},
    /* Q4 */ {1.158386245e-01f, -5.322370678e-02f, -4.718513787e-02f, 6.619999185e-03f,
              1.065944601e-02f, 2.756165108e-03f, 3.136723535e-04f, 1.834070645e-05f},
    /* Q5 */ {-7.936138660e-03f, -2.915494889e-02f, 1.910836063e-02f, 7.079086732e-03f,
              -5.233601667e-03f, -2.883156529e-03f, -1.746387803e-03f, 6.980282487e-04f},
    /* Q6 */ {-1.802313328e-02f, 1.794599555e-02f, 3.732174402e-03f, -5.947053432e-03f,
              -7.159141242e-04f, 6.369662588e-04f, 1.731987140e-04f, 1.704738133e-05f}};
#define KERN__ERF_XMAX 3.99999976f /* the float below 4 */

/* exp: n = rint(x log2 e), r = x - n ln2 (Cody-Waite, ln2 in two parts),
 * exp(r) = 1 + r + r^2 P(r) with Cephes' expf minimax P, then scaled by 2^n. */
#define KERN__EXP_LOG2E 1.44269504088896341f
#define KERN__EXP_LN2HI 0.693359375f
#define KERN__EXP_LN2LO -2.12194440e-4f
#define KERN__EXP_P0 1.9875691500e-4f
#define KERN__EXP_P1 1.3981999507e-3f
#define KERN__EXP_P2 8.3334519073e-3f
#define KERN__EXP_P3 4.1665795894e-2f
#define KERN__EXP_P4 1.6666665459e-1f
#define KERN__EXP_P5 5.0000001201e-1f
/* tanh: |x| < 0.625: x + x s P(s), s = x^2, P least-squares degree 5;
 * otherwise sign(x) (1 - 2 / (exp(2|x|) + 1)) with |x| clamped to 10. */
#define KERN__TANH_T0 -3.333333433e-01f
#define KERN__TANH_T1 1.333330423e-01f
#define KERN__TANH_T2 -5.395940691e-02f
#define KERN__TANH_T3 2.176996134e-02f
#define KERN__TANH_T4 -8.346980438e-03f
#define KERN__TANH_T5 2.295841230e-03f
/* GELU constants */
#define KERN__GELU_SQRT1_2 0.707106781186547524f
#define KERN__GELU_INV_SQRT_2PI 0.398942280401432678f
#define KERN__GELU_K 0.797884560802865355f /* sqrt(2/pi) */
#define KERN__GELU_KAPPA 0.044715f

/* Scalar: libm in double, one rounding. */
static inline float kern__math_erf(float x) { return (float)erf((double)x); }
static inline float kern__math_exp(float x) { return (float)exp((double)x); }
static inline float kern__math_tanh(float x) { return (float)tanh((double)x); }
static inline double kern__norm_gelu_d(double x, int tanh_form) {
    if (tanh_form) {
        double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
        return 0.5 * x * (1.0 + tanh(u));
    }
    return 0.5 * x * (1.0 + erf(x * 0.70710678118654752));
}
/* d gelu / dx */
static inline double kern__norm_gelu_grad_d(double x, int tanh_form) {
    if (tanh_form) {
        double k = 0.7978845608028654, kk = 0.044715;
        double t = tanh(k * (x + kk * x * x * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * kk * x * x);
    }
    return 0.5 * (1.0 + erf(x * 0.70710678118654752)) +
           x * exp(-0.5 * x * x) * 0.3989422804014327;
}

#ifdef KERN_X86
/* ---- AVX-512 ---- */
KERN_TARGET_AVX512 static inline __m512 kern__math_erf__avx512(__m512 x) {
#define KERN__ERF_T(j) _mm512_permutexvar_ps(k, _mm512_loadu_ps(kern__math_erf_tab[j]))
    /* min(XMAX, |x|): the second operand is returned for NaN */
    const __m512 ax = _mm512_min_ps(_mm512_set1_ps(KERN__ERF_XMAX), _mm512_abs_ps(x));
    const __m512i k = _mm512_cvttps_epi32(_mm512_add_ps(ax, ax)); /* NaN -> index 0 */
    const __m512 t = _mm512_sub_ps(ax, KERN__ERF_T(0));
    __m512 q = KERN__ERF_T(9);
    q = _mm512_fmadd_ps(q, t, KERN__ERF_T(8));
    q = _mm512_fmadd_ps(q, t, KERN__ERF_T(7));
    q = _mm512_fmadd_ps(q, t, KERN__ERF_T(6));
    q = _mm512_fmadd_ps(q, t, KERN__ERF_T(5));
    q = _mm512_fmadd_ps(q, t, KERN__ERF_T(4));
    q = _mm512_fmadd_ps(q, t, KERN__ERF_T(3));
    q = _mm512_fmadd_ps(t, q, _mm512_fmadd_ps(t, KERN__ERF_T(2), KERN__ERF_T(1)));
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
        _mm512_castps_si512(q), _mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u),
        0xF8)); /* q | (x & sign) */
#undef KERN__ERF_T
}
KERN_TARGET_AVX512 static inline __m512 kern__math_exp__avx512(__m512 x) {
    __m512 n, r, p;
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x); /* second operand: NaN kept */
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(KERN__EXP_LOG2E)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KERN__EXP_LN2HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KERN__EXP_LN2LO), r);
    p = _mm512_set1_ps(KERN__EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KERN__EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KERN__EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KERN__EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KERN__EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KERN__EXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n); /* one rounding, overflow and subnormals */
}
KERN_TARGET_AVX512 static inline __m512 kern__math_tanh__avx512(__m512 x) {
    const __m512 ax = _mm512_abs_ps(x);
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 s = _mm512_mul_ps(x, x), p, e, l;
    __mmask16 small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ);
    p = _mm512_set1_ps(KERN__TANH_T5);
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(KERN__TANH_T4));
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(KERN__TANH_T3));
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(KERN__TANH_T2));
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(KERN__TANH_T1));
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(KERN__TANH_T0));
    p = _mm512_fmadd_ps(x, _mm512_mul_ps(p, s), x);
    e = kern__math_exp__avx512(_mm512_add_ps(_mm512_min_ps(_mm512_set1_ps(10.0f), ax),
                                             _mm512_min_ps(_mm512_set1_ps(10.0f), ax)));
    l = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
    l = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(l),
        _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
    return _mm512_mask_mov_ps(l, small, p);
}
/* act(y): 0 none, 1 GELU erf, 2 GELU tanh (x * sigmoid(2u)). */
KERN_TARGET_AVX512 static inline __m512 kern__norm_gelu__avx512(__m512 x, int tanh_form) {
    if (tanh_form) {
        __m512 x2 = _mm512_mul_ps(x, x);
        __m512 u2 = _mm512_mul_ps(x, _mm512_fmadd_ps(x2, _mm512_set1_ps(-2.0f * KERN__GELU_K * KERN__GELU_KAPPA),
                                                     _mm512_set1_ps(-2.0f * KERN__GELU_K)));
        __m512 e = kern__math_exp__avx512(u2); /* exp(-2u) */
        return _mm512_div_ps(x, _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
    } else {
        __m512 hx = _mm512_mul_ps(x, _mm512_set1_ps(0.5f));
        __m512 e = kern__math_erf__avx512(_mm512_mul_ps(x, _mm512_set1_ps(KERN__GELU_SQRT1_2)));
        return _mm512_fmadd_ps(hx, e, hx);
    }
}
KERN_TARGET_AVX512 static inline __m512 kern__norm_gelu_grad__avx512(__m512 x, int tanh_form) {
    if (tanh_form) {
        /* sig = sigmoid(2u); d = sig + 2 x sig (1 - sig) u' */
        __m512 x2 = _mm512_mul_ps(x, x);
        __m512 u2 = _mm512_mul_ps(x, _mm512_fmadd_ps(x2, _mm512_set1_ps(-2.0f * KERN__GELU_K * KERN__GELU_KAPPA),
                                                     _mm512_set1_ps(-2.0f * KERN__GELU_K)));
        __m512 sig = _mm512_div_ps(_mm512_set1_ps(1.0f),
                                   _mm512_add_ps(kern__math_exp__avx512(u2), _mm512_set1_ps(1.0f)));
        __m512 du2 = _mm512_fmadd_ps(x2, _mm512_set1_ps(6.0f * KERN__GELU_K * KERN__GELU_KAPPA),
                                     _mm512_set1_ps(2.0f * KERN__GELU_K)); /* 2u' */
        __m512 om = _mm512_sub_ps(_mm512_set1_ps(1.0f), sig);
        return _mm512_fmadd_ps(_mm512_mul_ps(_mm512_mul_ps(x, du2), sig), om, sig);
    } else {
        __m512 e = kern__math_erf__avx512(_mm512_mul_ps(x, _mm512_set1_ps(KERN__GELU_SQRT1_2)));
        __m512 cdf = _mm512_fmadd_ps(e, _mm512_set1_ps(0.5f), _mm512_set1_ps(0.5f));
        __m512 pdf = _mm512_mul_ps(kern__math_exp__avx512(_mm512_mul_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(-0.5f))),
                                   _mm512_set1_ps(KERN__GELU_INV_SQRT_2PI));
        return _mm512_fmadd_ps(x, pdf, cdf);
    }
}

/* ---- AVX2 (same algorithms; 8 lanes, vpermps on the first 8 table
 * entries, exp scaled by two powers of two) ---- */
KERN_TARGET_AVX2 static inline __m256 kern__norm_or_sign__avx2(__m256 v, __m256 x) {
    return _mm256_or_ps(v, _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u))));
}
KERN_TARGET_AVX2 static inline __m256 kern__math_erf__avx2(__m256 x) {
#define KERN__ERF_T(j) _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__math_erf_tab[j]), k)
    const __m256 ax = _mm256_min_ps(
        _mm256_set1_ps(KERN__ERF_XMAX),
        _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u)), x));
    const __m256i k = _mm256_cvttps_epi32(_mm256_add_ps(ax, ax)); /* NaN -> 0x80000000: index 0 */
    const __m256 t = _mm256_sub_ps(ax, KERN__ERF_T(0));
    __m256 q = KERN__ERF_T(9);
    q = _mm256_fmadd_ps(q, t, KERN__ERF_T(8));
    q = _mm256_fmadd_ps(q, t, KERN__ERF_T(7));
    q = _mm256_fmadd_ps(q, t, KERN__ERF_T(6));
    q = _mm256_fmadd_ps(q, t, KERN__ERF_T(5));
    q = _mm256_fmadd_ps(q, t, KERN__ERF_T(4));
    q = _mm256_fmadd_ps(q, t, KERN__ERF_T(3));
    q = _mm256_fmadd_ps(t, q, _mm256_fmadd_ps(t, KERN__ERF_T(2), KERN__ERF_T(1)));
    return kern__norm_or_sign__avx2(q, x);
#undef KERN__ERF_T
}
KERN_TARGET_AVX2 static inline __m256 kern__math_exp__avx2(__m256 x) {
    __m256 n, r, p;
    __m256i ni, n1, n2;
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
    n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(KERN__EXP_LOG2E)),
                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(KERN__EXP_LN2HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(KERN__EXP_LN2LO), r);
    p = _mm256_set1_ps(KERN__EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KERN__EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KERN__EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KERN__EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KERN__EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KERN__EXP_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    ni = _mm256_cvtps_epi32(n);
    n1 = _mm256_srai_epi32(ni, 1);
    n2 = _mm256_sub_epi32(ni, n1);
    p = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23)));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23)));
}
KERN_TARGET_AVX2 static inline __m256 kern__math_tanh__avx2(__m256 x) {
    const __m256 ax = _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u)), x);
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 s = _mm256_mul_ps(x, x), p, e, l, c;
    __m256 small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ);
    p = _mm256_set1_ps(KERN__TANH_T5);
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(KERN__TANH_T4));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(KERN__TANH_T3));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(KERN__TANH_T2));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(KERN__TANH_T1));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(KERN__TANH_T0));
    p = _mm256_fmadd_ps(x, _mm256_mul_ps(p, s), x);
    c = _mm256_min_ps(_mm256_set1_ps(10.0f), ax);
    e = kern__math_exp__avx2(_mm256_add_ps(c, c));
    l = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    return _mm256_blendv_ps(kern__norm_or_sign__avx2(l, x), p, small);
}
KERN_TARGET_AVX2 static inline __m256 kern__norm_gelu__avx2(__m256 x, int tanh_form) {
    if (tanh_form) {
        __m256 x2 = _mm256_mul_ps(x, x);
        __m256 u2 = _mm256_mul_ps(x, _mm256_fmadd_ps(x2, _mm256_set1_ps(-2.0f * KERN__GELU_K * KERN__GELU_KAPPA),
                                                     _mm256_set1_ps(-2.0f * KERN__GELU_K)));
        __m256 e = kern__math_exp__avx2(u2);
        return _mm256_div_ps(x, _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
    } else {
        __m256 hx = _mm256_mul_ps(x, _mm256_set1_ps(0.5f));
        __m256 e = kern__math_erf__avx2(_mm256_mul_ps(x, _mm256_set1_ps(KERN__GELU_SQRT1_2)));
        return _mm256_fmadd_ps(hx, e, hx);
    }
}
KERN_TARGET_AVX2 static inline __m256 kern__norm_gelu_grad__avx2(__m256 x, int tanh_form) {
    if (tanh_form) {
        __m256 x2 = _mm256_mul_ps(x, x);
        __m256 u2 = _mm256_mul_ps(x, _mm256_fmadd_ps(x2, _mm256_set1_ps(-2.0f * KERN__GELU_K * KERN__GELU_KAPPA),
                                                     _mm256_set1_ps(-2.0f * KERN__GELU_K)));
        __m256 sig = _mm256_div_ps(_mm256_set1_ps(1.0f),
                                   _mm256_add_ps(kern__math_exp__avx2(u2), _mm256_set1_ps(1.0f)));
        __m256 du2 = _mm256_fmadd_ps(x2, _mm256_set1_ps(6.0f * KERN__GELU_K * KERN__GELU_KAPPA),
                                     _mm256_set1_ps(2.0f * KERN__GELU_K));
        __m256 om = _mm256_sub_ps(_mm256_set1_ps(1.0f), sig);
        return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(x, du2), sig), om, sig);
    } else {
        __m256 e = kern__math_erf__avx2(_mm256_mul_ps(x, _mm256_set1_ps(KERN__GELU_SQRT1_2)));
        __m256 cdf = _mm256_fmadd_ps(e, _mm256_set1_ps(0.5f), _mm256_set1_ps(0.5f));
        __m256 pdf = _mm256_mul_ps(kern__math_exp__avx2(_mm256_mul_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(-0.5f))),
                                   _mm256_set1_ps(KERN__GELU_INV_SQRT_2PI));
        return _mm256_fmadd_ps(x, pdf, cdf);
    }
}
#endif /* KERN_X86 */

#ifdef KERN_NEON
/* ---- NEON (same algorithms; 4 lanes; coefficients picked with tbl over
 * the first 8 table entries = 32 bytes) ---- */
static inline float32x4_t kern__norm_tbl8__neon(const float *tab, uint32x4_t k) {
    uint8x16x2_t t;
    uint8x16_t idx;
    t.val[0] = vreinterpretq_u8_f32(vld1q_f32(tab));
    t.val[1] = vreinterpretq_u8_f32(vld1q_f32(tab + 4));
    idx = vreinterpretq_u8_u32(vaddq_u32(vmulq_n_u32(k, 0x04040404u), vdupq_n_u32(0x03020100u)));
    return vreinterpretq_f32_u8(vqtbl2q_u8(t, idx));
}
static inline float32x4_t kern__norm_or_sign__neon(float32x4_t v, float32x4_t x) {
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(v),
                                           vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u))));
}
static inline float32x4_t kern__math_erf__neon(float32x4_t x) {
#define KERN__ERF_T(j) kern__norm_tbl8__neon(kern__math_erf_tab[j], k)
    /* NEON min propagates NaN; the index of a NaN lane is masked to 0 */
    const float32x4_t ax = vminq_f32(vdupq_n_f32(KERN__ERF_XMAX), vabsq_f32(x));
    const uint32x4_t k = vandq_u32(vreinterpretq_u32_s32(vcvtq_s32_f32(vaddq_f32(ax, ax))),
                                   vdupq_n_u32(7u));
    const float32x4_t t = vsubq_f32(ax, KERN__ERF_T(0));
    float32x4_t q = KERN__ERF_T(9);
    q = vfmaq_f32(KERN__ERF_T(8), q, t);
    q = vfmaq_f32(KERN__ERF_T(7), q, t);
    q = vfmaq_f32(KERN__ERF_T(6), q, t);
    q = vfmaq_f32(KERN__ERF_T(5), q, t);
    q = vfmaq_f32(KERN__ERF_T(4), q, t);
    q = vfmaq_f32(KERN__ERF_T(3), q, t);
    q = vfmaq_f32(vfmaq_f32(KERN__ERF_T(1), t, KERN__ERF_T(2)), t, q);
    return kern__norm_or_sign__neon(q, x);
#undef KERN__ERF_T
}
static inline float32x4_t kern__math_exp__neon(float32x4_t x) {
    float32x4_t n, r, p;
    int32x4_t ni, n1, n2;
    x = vmaxq_f32(vdupq_n_f32(-104.0f), x); /* NEON max/min propagate NaN */
    x = vminq_f32(vdupq_n_f32(89.0f), x);
    n = vrndnq_f32(vmulq_n_f32(x, KERN__EXP_LOG2E));
    r = vfmsq_f32(x, n, vdupq_n_f32(KERN__EXP_LN2HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(KERN__EXP_LN2LO));
    p = vdupq_n_f32(KERN__EXP_P0);
    p = vfmaq_f32(vdupq_n_f32(KERN__EXP_P1), p, r);
    p = vfmaq_f32(vdupq_n_f32(KERN__EXP_P2), p, r);
    p = vfmaq_f32(vdupq_n_f32(KERN__EXP_P3), p, r);
    p = vfmaq_f32(vdupq_n_f32(KERN__EXP_P4), p, r);
    p = vfmaq_f32(vdupq_n_f32(KERN__EXP_P5), p, r);
    p = vfmaq_f32(r, p, vmulq_f32(r, r));
    p = vaddq_f32(p, vdupq_n_f32(1.0f));
    ni = vcvtq_s32_f32(n);
    n1 = vshrq_n_s32(ni, 1);
    n2 = vsubq_s32(ni, n1);
    p = vmulq_f32(p, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23)));
    return vmulq_f32(p, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23)));
}
static inline float32x4_t kern__math_tanh__neon(float32x4_t x) {
    const float32x4_t ax = vabsq_f32(x), one = vdupq_n_f32(1.0f);
    float32x4_t s = vmulq_f32(x, x), p, e, l, c;
    uint32x4_t small = vcltq_f32(ax, vdupq_n_f32(0.625f));
    p = vdupq_n_f32(KERN__TANH_T5);
    p = vfmaq_f32(vdupq_n_f32(KERN__TANH_T4), p, s);
    p = vfmaq_f32(vdupq_n_f32(KERN__TANH_T3), p, s);
    p = vfmaq_f32(vdupq_n_f32(KERN__TANH_T2), p, s);
    p = vfmaq_f32(vdupq_n_f32(KERN__TANH_T1), p, s);
    p = vfmaq_f32(vdupq_n_f32(KERN__TANH_T0), p, s);
    p = vfmaq_f32(x, x, vmulq_f32(p, s));
    c = vminq_f32(vdupq_n_f32(10.0f), ax);
    e = kern__math_exp__neon(vaddq_f32(c, c));
    l = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
    return vbslq_f32(small, p, kern__norm_or_sign__neon(l, x));
}
static inline float32x4_t kern__norm_gelu__neon(float32x4_t x, int tanh_form) {
    if (tanh_form) {
        float32x4_t x2 = vmulq_f32(x, x);
        float32x4_t u2 = vmulq_f32(x, vfmaq_f32(vdupq_n_f32(-2.0f * KERN__GELU_K), x2,
                                                vdupq_n_f32(-2.0f * KERN__GELU_K * KERN__GELU_KAPPA)));
        return vdivq_f32(x, vaddq_f32(kern__math_exp__neon(u2), vdupq_n_f32(1.0f)));
    } else {
        float32x4_t hx = vmulq_n_f32(x, 0.5f);
        float32x4_t e = kern__math_erf__neon(vmulq_n_f32(x, KERN__GELU_SQRT1_2));
        return vfmaq_f32(hx, hx, e);
    }
}
static inline float32x4_t kern__norm_gelu_grad__neon(float32x4_t x, int tanh_form) {
    if (tanh_form) {
        float32x4_t x2 = vmulq_f32(x, x);
        float32x4_t u2 = vmulq_f32(x, vfmaq_f32(vdupq_n_f32(-2.0f * KERN__GELU_K), x2,
                                                vdupq_n_f32(-2.0f * KERN__GELU_K * KERN__GELU_KAPPA)));
        float32x4_t sig = vdivq_f32(vdupq_n_f32(1.0f), vaddq_f32(kern__math_exp__neon(u2), vdupq_n_f32(1.0f)));
        float32x4_t du2 = vfmaq_f32(vdupq_n_f32(2.0f * KERN__GELU_K), x2,
                                    vdupq_n_f32(6.0f * KERN__GELU_K * KERN__GELU_KAPPA));
        float32x4_t om = vsubq_f32(vdupq_n_f32(1.0f), sig);
        return vfmaq_f32(sig, vmulq_f32(vmulq_f32(x, du2), sig), om);
    } else {
        float32x4_t e = kern__math_erf__neon(vmulq_n_f32(x, KERN__GELU_SQRT1_2));
        float32x4_t cdf = vfmaq_f32(vdupq_n_f32(0.5f), e, vdupq_n_f32(0.5f));
        float32x4_t pdf = vmulq_n_f32(kern__math_exp__neon(vmulq_n_f32(vmulq_f32(x, x), -0.5f)),
                                      KERN__GELU_INV_SQRT_2PI);
        return vfmaq_f32(cdf, x, pdf);
    }
}
#endif /* KERN_NEON */

/* ------------------------------------------------------- row machinery */

/* Row loops are written once with constant flags and instantiated per
 * dtype / activation by the callers; forcing the inlining is what removes
 * the per-vector branches. */
#if defined(__GNUC__) || defined(__clang__)
#define KERN__NORM_INLINE __attribute__((always_inline))
#else
#define KERN__NORM_INLINE
#endif

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

static inline float kern__norm_get(const void *p, kern_dtype dt, int64_t i) {
    if (dt == KERN_F32) return ((const float *)p)[i];
    if (dt == KERN_BF16) return kern_bf16_to_f32(((const uint16_t *)p)[i]);
    return kern_f16_to_f32(((const uint16_t *)p)[i]);
}
static inline void kern__norm_put(void *p, kern_dtype dt, int64_t i, float v) {
    if (dt == KERN_F32) ((float *)p)[i] = v;
    else if (dt == KERN_BF16) ((uint16_t *)p)[i] = kern_f32_to_bf16(v);
    else ((uint16_t *)p)[i] = kern_f32_to_f16(v);
}

/* The next row's input streams, prefetched while the current row is being
 * normalized and written: without it the DRAM read stream idles during
 * that phase (and the hardware prefetchers restart at every 4 KiB row). */
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
    int rms, act, nt;
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
    int rms, act;
    kern_ctx *ctx;
    void (*row)(const kern__norm_bwd *a, const void *dy, const void *x, void *dx,
                const void *dr, float *sc, int64_t row, float *pw, float *pb,
                const kern__norm_pf *pf);
    /* phase 2 */
    const kern_tensor *dweight, *dbias;
};

enum { KERN__NORM_EW_ADD = 1, KERN__NORM_EW_GELU, KERN__NORM_EW_GELU_BWD };
typedef struct kern__norm_ew kern__norm_ew;
struct kern__norm_ew {
    kern__norm_view a, b, o;
    const float *bias;
    int64_t H, rows, rpt, seg, nseg;
    int op, tanh_form, nt;
    void (*seg_fn)(const kern__norm_ew *e, const void *p, const void *q, void *o,
                   const float *bias, int64_t n);
};

/* ---- scalar rows (double arithmetic; the portable reference path) ---- */
static double kern__norm_act_d(double y, int act) {
    return act ? kern__norm_gelu_d(y, act == KERN_ACT_GELU_TANH) : y;
}
static void kern__norm_fwd_row__scalar(const kern__norm_fwd *a, const void *x, const void *r,
                                       void *o, void *ro, float *sc, int64_t row, float *shift,
                                       const kern__norm_pf *pf) {
    const int64_t H = a->H;
    (void)shift;
    (void)pf;
    double s = 0, m = 0, rstd;
    int64_t i;
    for (i = 0; i < H; i++) {
        float v = kern__norm_get(x, a->x.dt, i);
        if (r) v += kern__norm_get(r, a->r.dt, i);
        sc[i] = v;
        if (ro) kern__norm_put(ro, a->ro.dt, i, v);
        s += a->rms ? (double)v * v : (double)v;
    }
    if (a->rms) {
        rstd = 1.0 / sqrt(s / (double)H + (double)a->eps);
    } else {
        double s2 = 0;
        m = s / (double)H;
        for (i = 0; i < H; i++) s2 += (sc[i] - m) * (sc[i] - m);
        rstd = 1.0 / sqrt(s2 / (double)H + (double)a->eps);
        if (a->mean) a->mean[row] = (float)m;
    }
    if (a->rstd) a->rstd[row] = (float)rstd;
    for (i = 0; i < H; i++) {
        double y = (sc[i] - m) * rstd;
        if (a->w) y *= a->w[i];
        if (a->b) y += a->b[i];
        kern__norm_put(o, a->o.dt, i, (float)kern__norm_act_d(y, a->act));
    }
}
static void kern__norm_bwd_row__scalar(const kern__norm_bwd *a, const void *dy, const void *x,
                                       void *dx, const void *dr, float *sc, int64_t row,
                                       float *pw, float *pb, const kern__norm_pf *pf) {
    const int64_t H = a->H;
    (void)pf;
    double m = 0, rstd, sg = 0, sgx = 0, mg, mgx;
    int64_t i;
    if (a->rstd) {
        rstd = a->rstd[row];
        m = a->rms ? 0.0 : a->mean[row];
    } else {
        double s = 0, s2 = 0;
        for (i = 0; i < H; i++) {
            double v = kern__norm_get(x, a->x.dt, i);
            s += a->rms ? v * v : v;
        }
        if (a->rms) {
            rstd = 1.0 / sqrt(s / (double)H + (double)a->eps);
        } else {
            m = s / (double)H;
            for (i = 0; i < H; i++) {
                double d = kern__norm_get(x, a->x.dt, i) - m;
                s2 += d * d;
            }
            rstd = 1.0 / sqrt(s2 / (double)H + (double)a->eps);
        }
    }
    for (i = 0; i < H; i++) {
        double xh = (kern__norm_get(x, a->x.dt, i) - m) * rstd;
        double dz = kern__norm_get(dy, a->dy.dt, i), g;
        if (a->act) {
            double z = xh;
            if (a->w) z *= a->w[i];
            if (a->b) z += a->b[i];
            dz *= kern__norm_gelu_grad_d(z, a->act == KERN_ACT_GELU_TANH);
        }
        if (pw) pw[i] += (float)(dz * xh);
        if (pb) pb[i] += (float)dz;
        g = a->w ? dz * a->w[i] : dz;
        sc[i] = (float)g; /* sums from the stored value: H = 1 gives dx = 0 exactly */
        sg += sc[i];
        sgx += sc[i] * xh;
    }
    mg = a->rms ? 0.0 : sg / (double)H;
    mgx = sgx / (double)H;
    for (i = 0; i < H; i++) {
        double xh = (kern__norm_get(x, a->x.dt, i) - m) * rstd;
        double v = (sc[i] - mg - xh * mgx) * rstd;
        if (dr) v += kern__norm_get(dr, a->dr.dt, i);
        kern__norm_put(dx, a->dx.dt, i, (float)v);
    }
}
static void kern__norm_ew_seg__scalar(const kern__norm_ew *e, const void *p, const void *q,
                                      void *o, const float *bias, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) {
        float v = kern__norm_get(p, e->a.dt, i);
        double y;
        if (e->op == KERN__NORM_EW_ADD) {
            y = v + kern__norm_get(q, e->b.dt, i); /* f32 add, as the vector paths */
            y = (float)y;
        } else if (e->op == KERN__NORM_EW_GELU) {
            if (bias) v += bias[i];
            y = kern__norm_gelu_d(v, e->tanh_form);
        } else {
            y = (double)v * kern__norm_gelu_grad_d(kern__norm_get(q, e->b.dt, i), e->tanh_form);
        }
        kern__norm_put(o, e->o.dt, i, (float)y);
    }
}

#ifdef KERN_X86
/* ---- AVX-512 primitives: masked loads/stores handle the row tails ---- */
KERN_TARGET_AVX512 static inline __mmask16 kern__norm_m16(int64_t n) {
    return (__mmask16)(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : ((1u << n) - 1u));
}
/* n elements from element i of p, converted to f32; lanes >= n are 0 */
KERN_TARGET_AVX512 static inline __m512 kern__norm_ld__avx512(const void *p, kern_dtype dt,
                                                              int64_t i, int64_t n) {
    __mmask16 m = kern__norm_m16(n);
    __m256i h;
    if (dt == KERN_F32) return _mm512_maskz_loadu_ps(m, (const float *)p + i);
    h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i);
    if (dt == KERN_BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}
KERN_TARGET_AVX512 static inline __m512 kern__norm_ldf__avx512(const float *p, int64_t n) {
    return _mm512_maskz_loadu_ps(kern__norm_m16(n), p);
}
KERN_TARGET_AVX512 static inline __m512 kern__norm_ldd__avx512(const void *p, kern_dtype dt,
                                                               int64_t i, int64_t n, __m512 m) {
    return _mm512_maskz_sub_ps(kern__norm_m16(n), kern__norm_ld__avx512(p, dt, i, n), m);
}
/* Stores n lanes converted to dt (bf16/f16 round to nearest even, NaN
 * kept quiet: bit-identical to kern_f32_to_bf16/f16). nt: stream full
 * aligned vectors past the caches. */
KERN_TARGET_AVX512 static inline void kern__norm_st__avx512(void *p, kern_dtype dt, int64_t i,
                                                            int64_t n, __m512 v, int nt) {
    __mmask16 m = kern__norm_m16(n);
    if (dt == KERN_F32) {
        float *q = (float *)p + i;
        if (nt && n >= 16 && !((uintptr_t)q & 63)) _mm512_stream_ps(q, v);
        else _mm512_mask_storeu_ps(q, m, v);
    } else {
        uint16_t *q = (uint16_t *)p + i;
        __m256i h;
        if (dt == KERN_BF16) {
            __m512i u = _mm512_castps_si512(v);
            __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                    _mm512_set1_epi32(0x7f800000));
            __m512i rnd = _mm512_add_epi32(
                u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                    _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
            rnd = _mm512_mask_or_epi32(rnd, nan, u, _mm512_set1_epi32(0x00400000));
            h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(rnd, 16));
        } else {
            h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        }
        if (nt && n >= 16 && !((uintptr_t)q & 31)) _mm256_stream_si256((__m256i *)q, h);
        else _mm256_mask_storeu_epi16(q, m, h);
    }
}
KERN_TARGET_AVX512 static inline __m512 kern__norm_keep__avx512(__m512 v, int64_t n) {
    return _mm512_maskz_mov_ps(kern__norm_m16(n), v);
}
KERN_TARGET_AVX512 static inline double kern__norm_hsum__avx512(__m512 v) {
    float t[16];
    double s = 0;
    int k;
    _mm512_storeu_ps(t, v);
    for (k = 0; k < 16; k++) s += t[k];
    return s;
}

/* ---- AVX2 primitives: full vectors directly, row tails through a small
 * buffer with the scalar conversions ---- */
KERN_TARGET_AVX2 static inline __m256 kern__norm_ld__avx2(const void *p, kern_dtype dt,
                                                          int64_t i, int64_t n) {
    if (n >= 8) {
        __m128i h;
        if (dt == KERN_F32) return _mm256_loadu_ps((const float *)p + i);
        h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
        if (dt == KERN_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        return _mm256_cvtph_ps(h);
    } else {
        float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t k;
        for (k = 0; k < n; k++) t[k] = kern__norm_get(p, dt, i + k);
        return _mm256_loadu_ps(t);
    }
}
KERN_TARGET_AVX2 static inline __m256 kern__norm_ldf__avx2(const float *p, int64_t n) {
    return kern__norm_ld__avx2(p, KERN_F32, 0, n);
}
KERN_TARGET_AVX2 static inline __m256 kern__norm_ldd__avx2(const void *p, kern_dtype dt,
                                                           int64_t i, int64_t n, __m256 m) {
    __m256 d = _mm256_sub_ps(kern__norm_ld__avx2(p, dt, i, n), m);
    if (n < 8) {
        __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        d = _mm256_and_ps(d, _mm256_castsi256_ps(keep));
    }
    return d;
}
KERN_TARGET_AVX2 static inline void kern__norm_st__avx2(void *p, kern_dtype dt, int64_t i,
                                                        int64_t n, __m256 v, int nt) {
    if (n >= 8) {
        __m128i h;
        if (dt == KERN_F32) {
            float *q = (float *)p + i;
            if (nt && !((uintptr_t)q & 31)) _mm256_stream_ps(q, v);
            else _mm256_storeu_ps(q, v);
            return;
        }
        if (dt == KERN_BF16) {
            __m256i u = _mm256_castps_si256(v);
            __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                             _mm256_set1_epi32(0x7f800000));
            __m256i rnd = _mm256_add_epi32(
                u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                    _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))));
            __m256i res = _mm256_blendv_epi8(rnd, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);
            res = _mm256_srli_epi32(res, 16);
            res = _mm256_permute4x64_epi64(_mm256_packus_epi32(res, res), 0x08);
            h = _mm256_castsi256_si128(res);
        } else {
            h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        }
        {
            uint16_t *q = (uint16_t *)p + i;
            if (nt && !((uintptr_t)q & 15)) _mm_stream_si128((__m128i *)q, h);
            else _mm_storeu_si128((__m128i *)q, h);
        }
    } else {
        float t[8];
        int64_t k;
        _mm256_storeu_ps(t, v);
        for (k = 0; k < n; k++) kern__norm_put(p, dt, i + k, t[k]);
    }
}
KERN_TARGET_AVX2 static inline __m256 kern__norm_keep__avx2(__m256 v, int64_t n) {
    __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_and_ps(v, _mm256_castsi256_ps(keep));
}
KERN_TARGET_AVX2 static inline double kern__norm_hsum__avx2(__m256 v) {
    float t[8];
    double s = 0;
    int k;
    _mm256_storeu_ps(t, v);
    for (k = 0; k < 8; k++) s += t[k];
    return s;
}
#endif /* KERN_X86 */

#ifdef KERN_NEON
/* ---- NEON primitives (as AVX2, 4 lanes) ---- */
static inline float32x4_t kern__norm_fmadd__neon(float32x4_t a, float32x4_t b, float32x4_t c) {
    return vfmaq_f32(c, a, b);
}
static inline float32x4_t kern__norm_fnmadd__neon(float32x4_t a, float32x4_t b, float32x4_t c) {
    return vfmsq_f32(c, a, b);
}
static inline float32x4_t kern__norm_ld__neon(const void *p, kern_dtype dt, int64_t i, int64_t n) {
    if (n >= 4) {
        if (dt == KERN_F32) return vld1q_f32((const float *)p + i);
        if (dt == KERN_BF16)
            return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)p + i), 16));
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p + i)));
    } else {
        float t[4] = {0, 0, 0, 0};
        int64_t k;
        for (k = 0; k < n; k++) t[k] = kern__norm_get(p, dt, i + k);
        return vld1q_f32(t);
    }
}
static inline float32x4_t kern__norm_ldf__neon(const float *p, int64_t n) {
    return kern__norm_ld__neon(p, KERN_F32, 0, n);
}
static inline float32x4_t kern__norm_ldd__neon(const void *p, kern_dtype dt, int64_t i, int64_t n,
                                               float32x4_t m) {
    float32x4_t d = vsubq_f32(kern__norm_ld__neon(p, dt, i, n), m);
    if (n < 4) {
        static const int32_t iota[4] = {0, 1, 2, 3};
        uint32x4_t keep = vcgtq_s32(vdupq_n_s32((int32_t)(n < 0 ? 0 : n)), vld1q_s32(iota));
        d = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(d), keep));
    }
    return d;
}
static inline void kern__norm_st__neon(void *p, kern_dtype dt, int64_t i, int64_t n,
                                       float32x4_t v, int nt) {
    (void)nt;
    if (n >= 4) {
        if (dt == KERN_F32) {
            vst1q_f32((float *)p + i, v);
        } else if (dt == KERN_BF16) {
            uint32x4_t u = vreinterpretq_u32_f32(v);
            uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
            uint32x4_t rnd = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fffu),
                                                    vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1))));
            uint32x4_t res = vbslq_u32(nan, vorrq_u32(u, vdupq_n_u32(0x00400000u)), rnd);
            vst1_u16((uint16_t *)p + i, vshrn_n_u32(res, 16));
        } else {
            vst1_u16((uint16_t *)p + i, vreinterpret_u16_f16(vcvt_f16_f32(v)));
        }
    } else {
        float t[4];
        int64_t k;
        vst1q_f32(t, v);
        for (k = 0; k < n; k++) kern__norm_put(p, dt, i + k, t[k]);
    }
}
static inline float32x4_t kern__norm_keep__neon(float32x4_t v, int64_t n) {
    static const int32_t iota[4] = {0, 1, 2, 3};
    uint32x4_t keep = vcgtq_s32(vdupq_n_s32((int32_t)(n < 0 ? 0 : n > 4 ? 4 : n)), vld1q_s32(iota));
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), keep));
}
static inline double kern__norm_hsum__neon(float32x4_t v) {
    float t[4];
    vst1q_f32(t, v);
    return (double)t[0] + t[1] + t[2] + t[3];
}
#endif /* KERN_NEON */

#ifdef KERN_X86
/* ---- avx512 row kernels (instance of the shared row template) ---- */
/* sum(d) and sum(d^2) of d = h - mh over a row, two accumulators each. */
KERN_TARGET_AVX512 static void kern__norm_passB__avx512(const void *h, kern_dtype dt, int64_t H, float mh,
                                    double *s1, double *s2) {
    const __m512 vm = _mm512_set1_ps(mh);
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 * 16 <= H; i += 2 * 16) {
        __m512 d0 = _mm512_sub_ps(kern__norm_ld__avx512(h, dt, i, 16), vm);
        __m512 d1 = _mm512_sub_ps(kern__norm_ld__avx512(h, dt, i + 16, 16), vm);
        a0 = _mm512_add_ps(a0, d0);
        a1 = _mm512_add_ps(a1, d1);
        b0 = _mm512_fmadd_ps(d0, d0, b0);
        b1 = _mm512_fmadd_ps(d1, d1, b1);
    }
    for (; i < H; i += 16) {
        __m512 d = kern__norm_ldd__avx512(h, dt, i, H - i, vm);
        a0 = _mm512_add_ps(a0, d);
        b0 = _mm512_fmadd_ps(d, d, b0);
    }
    *s1 = kern__norm_hsum__avx512(_mm512_add_ps(a0, a1));
    *s2 = kern__norm_hsum__avx512(_mm512_add_ps(b0, b1));
}

/* Statistics of a row read from x (backward without saved statistics):
 * the same corrected two-pass scheme as the forward. */
KERN_TARGET_AVX512 static void kern__norm_xstats__avx512(const void *x, kern_dtype dt, int64_t H, int rms,
                                     float eps, float *mh, float *c, float *rstd) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 * 16 <= H; i += 2 * 16) {
        __m512 v0 = kern__norm_ld__avx512(x, dt, i, 16), v1 = kern__norm_ld__avx512(x, dt, i + 16, 16);
        if (rms) { a0 = _mm512_fmadd_ps(v0, v0, a0); a1 = _mm512_fmadd_ps(v1, v1, a1); }
        else { a0 = _mm512_add_ps(a0, v0); a1 = _mm512_add_ps(a1, v1); }
    }
    for (; i < H; i += 16) {
        __m512 v = kern__norm_ld__avx512(x, dt, i, H - i);
        a0 = rms ? _mm512_fmadd_ps(v, v, a0) : _mm512_add_ps(a0, v);
    }
    if (rms) {
        *mh = 0.0f;
        *c = 0.0f;
        *rstd = (float)(1.0 / sqrt(kern__norm_hsum__avx512(_mm512_add_ps(a0, a1)) / (double)H + (double)eps));
    } else {
        double s1, s2, cd, var;
        *mh = (float)(kern__norm_hsum__avx512(_mm512_add_ps(a0, a1)) / (double)H);
        kern__norm_passB__avx512(x, dt, H, *mh, &s1, &s2);
        cd = s1 / (double)H;
        var = s2 / (double)H - cd * cd;
        if (var < 0) var = 0;
        *c = (float)cd;
        *rstd = (float)(1.0 / sqrt(var + (double)eps));
    }
}

/* Forward pass A, specialized by the caller on (x dtype, residual dtype
 * or 0, rms) so the loop carries no dtype or flag branches: h = x (+ r) in
 * f32, kept in scratch when it is not x itself; sums of d = h - s and d^2
 * (s: the shift), or of h^2 for RMSNorm. */
KERN_TARGET_AVX512 static inline KERN__NORM_INLINE void kern__norm_fa__avx512(const void *x, const kern_dtype xdt, const void *r,
                            const kern_dtype rdt, float *sc, const int64_t H, const float s,
                            const int rms, double *o1, double *o2) {
    const int store_sc = rdt != KERN_DTYPE_NONE || xdt != KERN_F32;
    const __m512 vs = _mm512_set1_ps(s);
    __m512 a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps(), b2 = _mm512_setzero_ps();
    int64_t i = 0;
    /* two vectors per step: the sums are latency chains */
    for (; i + 2 * 16 <= H; i += 2 * 16) {
        __m512 v0 = kern__norm_ld__avx512(x, xdt, i, 16), v1 = kern__norm_ld__avx512(x, xdt, i + 16, 16);
        if (rdt != KERN_DTYPE_NONE) {
            v0 = _mm512_add_ps(v0, kern__norm_ld__avx512(r, rdt, i, 16));
            v1 = _mm512_add_ps(v1, kern__norm_ld__avx512(r, rdt, i + 16, 16));
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
    for (; i < H; i += 16) {
        const int full = i + 16 <= H;
        __m512 v = full ? kern__norm_ld__avx512(x, xdt, i, 16) : kern__norm_ld__avx512(x, xdt, i, H - i);
        if (rdt != KERN_DTYPE_NONE)
            v = _mm512_add_ps(v, full ? kern__norm_ld__avx512(r, rdt, i, 16) : kern__norm_ld__avx512(r, rdt, i, H - i));
        if (store_sc) _mm512_storeu_ps(sc + i, v);
        if (rms) {
            a2 = _mm512_fmadd_ps(v, v, a2);
        } else {
            __m512 d = _mm512_sub_ps(v, vs);
            if (!full) d = kern__norm_keep__avx512(d, H - i);
            a1 = _mm512_add_ps(a1, d);
            a2 = _mm512_fmadd_ps(d, d, a2);
        }
    }
    *o1 = kern__norm_hsum__avx512(_mm512_add_ps(a1, b1));
    *o2 = kern__norm_hsum__avx512(_mm512_add_ps(a2, b2));
}

/* Pass C, specialized on (out dtype, act): y = act(((h - s) rstd - c rstd)
 * w + b); w and b are always arrays (ones / zeros when absent). */
KERN_TARGET_AVX512 static inline KERN__NORM_INLINE void kern__norm_fc__avx512(const float *h, void *o, const kern_dtype odt, const int act,
                            const int64_t H, const float s, const float rstd, const float nb,
                            const float *w, const float *b, const int nt,
                            const kern__norm_pf *pf) {
    const __m512 vs = _mm512_set1_ps(s), vr = _mm512_set1_ps(rstd), vnb = _mm512_set1_ps(nb);
    int64_t i = 0;
    for (; i + 16 <= H; i += 16) {
        __m512 y = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(h + i), vs), vr, vnb);
        kern__norm_prefetch(pf, i);
        y = _mm512_fmadd_ps(y, _mm512_loadu_ps(w + i), _mm512_loadu_ps(b + i));
        if (act) y = kern__norm_gelu__avx512(y, act == KERN_ACT_GELU_TANH);
        kern__norm_st__avx512(o, odt, i, 16, y, nt);
    }
    if (i < H) {
        __m512 y = _mm512_fmadd_ps(_mm512_sub_ps(kern__norm_ldf__avx512(h + i, H - i), vs), vr, vnb);
        y = _mm512_fmadd_ps(y, kern__norm_ldf__avx512(w + i, H - i), kern__norm_ldf__avx512(b + i, H - i));
        if (act) y = kern__norm_gelu__avx512(y, act == KERN_ACT_GELU_TANH);
        kern__norm_st__avx512(o, odt, i, H - i, y, nt);
    }
}

/* residual_out from the f32 row, specialized on its dtype */
KERN_TARGET_AVX512 static inline KERN__NORM_INLINE void kern__norm_fro__avx512(const float *h, void *o, const kern_dtype odt, const int64_t H,
                             const int nt) {
    int64_t i = 0;
    for (; i + 16 <= H; i += 16) kern__norm_st__avx512(o, odt, i, 16, _mm512_loadu_ps(h + i), nt);
    if (i < H) kern__norm_st__avx512(o, odt, i, H - i, kern__norm_ldf__avx512(h + i, H - i), nt);
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
KERN_TARGET_AVX512 static void kern__norm_fwd_row__avx512(const kern__norm_fwd *a, const void *x, const void *r,
                                      void *o, void *ro, float *sc, int64_t row, float *shift,
                                      const kern__norm_pf *pf) {
    const int64_t H = a->H;
    const kern_dtype xdt = a->x.dt, rdt = r ? a->r.dt : KERN_DTYPE_NONE;
    const int rms = a->rms, nt = a->nt;
    const float *h = (r || xdt != KERN_F32) ? sc : (const float *)x;
    float s, c = 0.0f, rstd;
    double s1 = 0, s2 = 0;
    if (rms) s = 0.0f;
    else if (*shift == *shift) s = *shift;
    else s = kern__norm_get(x, xdt, 0) + (r ? kern__norm_get(r, rdt, 0) : 0.0f);
    if (s != s || s - s != 0) s = 0.0f; /* NaN/Inf first element */
#define KERN__FA(XD, RD)                                                                   \
    do {                                                                                   \
        if (rms) kern__norm_fa__avx512(x, XD, r, RD, sc, H, s, 1, &s1, &s2);                   \
        else kern__norm_fa__avx512(x, XD, r, RD, sc, H, s, 0, &s1, &s2);                       \
    } while (0)
#define KERN__FA_R(XD)                                                                     \
    do {                                                                                   \
        if (rdt == KERN_F32) KERN__FA(XD, KERN_F32);                                       \
        else if (rdt == KERN_BF16) KERN__FA(XD, KERN_BF16);                                \
        else if (rdt == KERN_F16) KERN__FA(XD, KERN_F16);                                  \
        else KERN__FA(XD, KERN_DTYPE_NONE);                                                \
    } while (0)
    if (xdt == KERN_F32) KERN__FA_R(KERN_F32);
    else if (xdt == KERN_BF16) KERN__FA_R(KERN_BF16);
    else KERN__FA_R(KERN_F16);
#undef KERN__FA_R
#undef KERN__FA
    if (ro) {
        if (a->ro.dt == KERN_F32) kern__norm_fro__avx512(h, ro, KERN_F32, H, nt);
        else if (a->ro.dt == KERN_BF16) kern__norm_fro__avx512(h, ro, KERN_BF16, H, nt);
        else kern__norm_fro__avx512(h, ro, KERN_F16, H, nt);
    }
    if (rms) {
        rstd = (float)(1.0 / sqrt(s2 / (double)H + (double)a->eps));
    } else {
        double cd = s1 / (double)H, m2 = s2 / (double)H, var = m2 - cd * cd;
        if (!(cd * cd <= 0.25 * var)) { /* poor shift (or NaN): exact second pass */
            s = (float)((double)s + cd);
            if (s != s || s - s != 0) s = 0.0f;
            kern__norm_passB__avx512(h, KERN_F32, H, s, &s1, &s2);
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
#define KERN__FC(OD)                                                                       \
    do {                                                                                   \
        if (a->act == KERN_ACT_GELU) kern__norm_fc__avx512(h, o, OD, KERN_ACT_GELU, H, s, rstd, -c * rstd, a->w, a->b, nt, pf); \
        else if (a->act == KERN_ACT_GELU_TANH) kern__norm_fc__avx512(h, o, OD, KERN_ACT_GELU_TANH, H, s, rstd, -c * rstd, a->w, a->b, nt, pf); \
        else kern__norm_fc__avx512(h, o, OD, KERN_ACT_NONE, H, s, rstd, -c * rstd, a->w, a->b, nt, pf); \
    } while (0)
    if (a->o.dt == KERN_F32) KERN__FC(KERN_F32);
    else if (a->o.dt == KERN_BF16) KERN__FC(KERN_BF16);
    else KERN__FC(KERN_F16);
#undef KERN__FC
}

/* n elements of dtype dt to f32 (lanes past H zeroed in the padding) */
KERN_TARGET_AVX512 static inline KERN__NORM_INLINE void kern__norm_cvt__avx512(const void *p, const kern_dtype dt, float *o, const int64_t H) {
    int64_t i = 0;
    for (; i + 16 <= H; i += 16) _mm512_storeu_ps(o + i, kern__norm_ld__avx512(p, dt, i, 16));
    if (i < H) _mm512_storeu_ps(o + i, kern__norm_ld__avx512(p, dt, i, H - i));
}

/* Backward pass 1 on f32 rows, specialized on (act, part): g = dz w with
 * dz = dout act'(z), z = xhat w + b; sums of g and g xhat; the row's share
 * of dweight (part >= 1) and dbias (part == 2). g may overwrite dy. */
KERN_TARGET_AVX512 static inline KERN__NORM_INLINE void kern__norm_b1__avx512(const float *x, const float *dy, float *g, const int64_t H,
                            const float s, const float rstd, const float nb, const float *w,
                            const float *b, const int act, const int part, float *pw, float *pb,
                            double *sg, double *sgx) {
    const __m512 vs = _mm512_set1_ps(s), vr = _mm512_set1_ps(rstd), vnb = _mm512_set1_ps(nb);
    __m512 ag = _mm512_setzero_ps(), agx = _mm512_setzero_ps(), bg = _mm512_setzero_ps(), bgx = _mm512_setzero_ps();
    int64_t i = 0;
    /* padding lanes of the last vector: dy is 0 there (zeroed by the
     * conversion, or masked below), so dz, g and every sum get 0 */
    for (; i < H; i += 16) {
        const int full = i + 16 <= H;
        __m512 xv = full ? _mm512_loadu_ps(x + i) : kern__norm_ldf__avx512(x + i, H - i);
        __m512 dz = full ? _mm512_loadu_ps(dy + i) : kern__norm_ldf__avx512(dy + i, H - i);
        __m512 wv = _mm512_loadu_ps(w + i); /* w, b, pw, pb are padded to Hp */
        __m512 xh = _mm512_fmadd_ps(_mm512_sub_ps(xv, vs), vr, vnb), gv;
        if (act) dz = _mm512_mul_ps(dz, kern__norm_gelu_grad__avx512(_mm512_fmadd_ps(xh, wv, _mm512_loadu_ps(b + i)), act == KERN_ACT_GELU_TANH));
        if (part >= 1) _mm512_storeu_ps(pw + i, _mm512_fmadd_ps(dz, xh, _mm512_loadu_ps(pw + i)));
        if (part == 2) _mm512_storeu_ps(pb + i, _mm512_add_ps(dz, _mm512_loadu_ps(pb + i)));
        gv = _mm512_mul_ps(dz, wv);
        _mm512_storeu_ps(g + i, gv);
        if ((i / 16) & 1) {
            bg = _mm512_add_ps(bg, gv);
            bgx = _mm512_fmadd_ps(gv, xh, bgx);
        } else {
            ag = _mm512_add_ps(ag, gv);
            agx = _mm512_fmadd_ps(gv, xh, agx);
        }
    }
    *sg = kern__norm_hsum__avx512(_mm512_add_ps(ag, bg));
    *sgx = kern__norm_hsum__avx512(_mm512_add_ps(agx, bgx));
}

/* Backward pass 2, specialized on (dx dtype, dresidual dtype or 0):
 * dx = rstd (g - mean(g) - xhat mean(g xhat)) + dresidual. */
KERN_TARGET_AVX512 static inline KERN__NORM_INLINE void kern__norm_b2__avx512(const float *x, const float *g, void *dx, const kern_dtype dxdt,
                            const void *dr, const kern_dtype drdt, const int64_t H, const float s,
                            const float rstd, const float nb, const float mg, const float mgx,
                            const kern__norm_pf *pf) {
    const __m512 vs = _mm512_set1_ps(s), vr = _mm512_set1_ps(rstd), vnb = _mm512_set1_ps(nb), vmg = _mm512_set1_ps(mg), vmgx = _mm512_set1_ps(mgx);
    int64_t i = 0;
    for (; i < H; i += 16) {
        const int64_t n = H - i < 16 ? H - i : 16;
        kern__norm_prefetch(pf, i);
        __m512 xv = n == 16 ? _mm512_loadu_ps(x + i) : kern__norm_ldf__avx512(x + i, n);
        __m512 xh = _mm512_fmadd_ps(_mm512_sub_ps(xv, vs), vr, vnb);
        __m512 t = _mm512_mul_ps(_mm512_fnmadd_ps(xh, vmgx, _mm512_sub_ps(_mm512_loadu_ps(g + i), vmg)), vr);
        if (drdt != KERN_DTYPE_NONE)
            t = _mm512_add_ps(t, n == 16 ? kern__norm_ld__avx512(dr, drdt, i, 16) : kern__norm_ld__avx512(dr, drdt, i, n));
        if (n == 16) kern__norm_st__avx512(dx, dxdt, i, 16, t, 0);
        else kern__norm_st__avx512(dx, dxdt, i, n, t, 0);
    }
}

/* Backward of one row: x and dout are brought to f32 rows in scratch
 * (unless already f32), pass 1 forms g (kept in scratch) and the sums,
 * pass 2 writes dx. */
KERN_TARGET_AVX512 static void kern__norm_bwd_row__avx512(const kern__norm_bwd *a, const void *dy, const void *x,
                                      void *dx, const void *dr, float *sc, int64_t row,
                                      float *pw, float *pb, const kern__norm_pf *pf) {
    const int64_t H = a->H;
    float *xs = sc, *gs = sc + a->Hp;
    const float *xf = (const float *)x, *dyf = (const float *)dy;
    const kern_dtype drdt = dr ? a->dr.dt : KERN_DTYPE_NONE;
    const int part = pb ? 2 : pw ? 1 : 0;
    float s, c, rstd, nb, mg, mgx;
    double sg, sgx;
    if (a->x.dt == KERN_BF16) { kern__norm_cvt__avx512(x, KERN_BF16, xs, H); xf = xs; }
    else if (a->x.dt == KERN_F16) { kern__norm_cvt__avx512(x, KERN_F16, xs, H); xf = xs; }
    if (a->dy.dt == KERN_BF16) { kern__norm_cvt__avx512(dy, KERN_BF16, gs, H); dyf = gs; }
    else if (a->dy.dt == KERN_F16) { kern__norm_cvt__avx512(dy, KERN_F16, gs, H); dyf = gs; }
    if (a->rstd) {
        rstd = a->rstd[row];
        s = a->rms ? 0.0f : a->mean[row];
        c = 0.0f;
    } else {
        kern__norm_xstats__avx512(xf, KERN_F32, H, a->rms, a->eps, &s, &c, &rstd);
    }
    nb = -c * rstd;
#define KERN__B1(ACT, PART)                                                                \
    kern__norm_b1__avx512(xf, dyf, gs, H, s, rstd, nb, a->w, a->b, ACT, PART, pw, pb, &sg, &sgx)
#define KERN__B1P(ACT)                                                                     \
    do {                                                                                   \
        if (part == 2) KERN__B1(ACT, 2);                                                   \
        else if (part == 1) KERN__B1(ACT, 1);                                              \
        else KERN__B1(ACT, 0);                                                             \
    } while (0)
    if (a->act == KERN_ACT_GELU) KERN__B1P(KERN_ACT_GELU);
    else if (a->act == KERN_ACT_GELU_TANH) KERN__B1P(KERN_ACT_GELU_TANH);
    else KERN__B1P(KERN_ACT_NONE);
#undef KERN__B1P
#undef KERN__B1
    mg = a->rms ? 0.0f : (float)(sg / (double)H);
    mgx = (float)(sgx / (double)H);
#define KERN__B2(OD, RD) kern__norm_b2__avx512(xf, gs, dx, OD, dr, RD, H, s, rstd, nb, mg, mgx, pf)
#define KERN__B2R(OD)                                                                      \
    do {                                                                                   \
        if (drdt == KERN_F32) KERN__B2(OD, KERN_F32);                                      \
        else if (drdt == KERN_BF16) KERN__B2(OD, KERN_BF16);                               \
        else if (drdt == KERN_F16) KERN__B2(OD, KERN_F16);                                 \
        else KERN__B2(OD, KERN_DTYPE_NONE);                                                \
    } while (0)
    if (a->dx.dt == KERN_F32) KERN__B2R(KERN_F32);
    else if (a->dx.dt == KERN_BF16) KERN__B2R(KERN_BF16);
    else KERN__B2R(KERN_F16);
#undef KERN__B2R
#undef KERN__B2
}

/* Elementwise segment: add, (bias +) GELU, GELU backward. */
KERN_TARGET_AVX512 static void kern__norm_ew_seg__avx512(const kern__norm_ew *e, const void *p, const void *q,
                                     void *o, const float *bias, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i += 16) {
        int64_t m = n - i < 16 ? n - i : 16;
        __m512 v = kern__norm_ld__avx512(p, e->a.dt, i, m);
        if (e->op == KERN__NORM_EW_ADD) {
            v = _mm512_add_ps(v, kern__norm_ld__avx512(q, e->b.dt, i, m));
        } else if (e->op == KERN__NORM_EW_GELU) {
            if (bias) v = _mm512_add_ps(v, kern__norm_ldf__avx512(bias + i, m));
            v = kern__norm_gelu__avx512(v, e->tanh_form);
        } else {
            v = _mm512_mul_ps(v, kern__norm_gelu_grad__avx512(kern__norm_ld__avx512(q, e->b.dt, i, m), e->tanh_form));
        }
        kern__norm_st__avx512(o, e->o.dt, i, m, v, e->nt);
    }
}
#endif

#ifdef KERN_X86
/* ---- avx2 row kernels (instance of the shared row template) ---- */
/* sum(d) and sum(d^2) of d = h - mh over a row, two accumulators each. */
KERN_TARGET_AVX2 static void kern__norm_passB__avx2(const void *h, kern_dtype dt, int64_t H, float mh,
                                    double *s1, double *s2) {
    const __m256 vm = _mm256_set1_ps(mh);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 * 8 <= H; i += 2 * 8) {
        __m256 d0 = _mm256_sub_ps(kern__norm_ld__avx2(h, dt, i, 8), vm);
        __m256 d1 = _mm256_sub_ps(kern__norm_ld__avx2(h, dt, i + 8, 8), vm);
        a0 = _mm256_add_ps(a0, d0);
        a1 = _mm256_add_ps(a1, d1);
        b0 = _mm256_fmadd_ps(d0, d0, b0);
        b1 = _mm256_fmadd_ps(d1, d1, b1);
    }
    for (; i < H; i += 8) {
        __m256 d = kern__norm_ldd__avx2(h, dt, i, H - i, vm);
        a0 = _mm256_add_ps(a0, d);
        b0 = _mm256_fmadd_ps(d, d, b0);
    }
    *s1 = kern__norm_hsum__avx2(_mm256_add_ps(a0, a1));
    *s2 = kern__norm_hsum__avx2(_mm256_add_ps(b0, b1));
}

/* Statistics of a row read from x (backward without saved statistics):
 * the same corrected two-pass scheme as the forward. */
KERN_TARGET_AVX2 static void kern__norm_xstats__avx2(const void *x, kern_dtype dt, int64_t H, int rms,
                                     float eps, float *mh, float *c, float *rstd) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 * 8 <= H; i += 2 * 8) {
        __m256 v0 = kern__norm_ld__avx2(x, dt, i, 8), v1 = kern__norm_ld__avx2(x, dt, i + 8, 8);
        if (rms) { a0 = _mm256_fmadd_ps(v0, v0, a0); a1 = _mm256_fmadd_ps(v1, v1, a1); }
        else { a0 = _mm256_add_ps(a0, v0); a1 = _mm256_add_ps(a1, v1); }
    }
    for (; i < H; i += 8) {
        __m256 v = kern__norm_ld__avx2(x, dt, i, H - i);
        a0 = rms ? _mm256_fmadd_ps(v, v, a0) : _mm256_add_ps(a0, v);
    }
    if (rms) {
        *mh = 0.0f;
        *c = 0.0f;
        *rstd = (float)(1.0 / sqrt(kern__norm_hsum__avx2(_mm256_add_ps(a0, a1)) / (double)H + (double)eps));
    } else {
        double s1, s2, cd, var;
        *mh = (float)(kern__norm_hsum__avx2(_mm256_add_ps(a0, a1)) / (double)H);
        kern__norm_passB__avx2(x, dt, H, *mh, &s1, &s2);
        cd = s1 / (double)H;
        var = s2 / (double)H - cd * cd;
        if (var < 0) var = 0;
        *c = (float)cd;
        *rstd = (float)(1.0 / sqrt(var + (double)eps));
    }
}

/* Forward pass A, specialized by the caller on (x dtype, residual dtype
 * or 0, rms) so the loop carries no dtype or flag branches: h = x (+ r) in
 * f32, kept in scratch when it is not x itself; sums of d = h - s and d^2
 * (s: the shift), or of h^2 for RMSNorm. */
KERN_TARGET_AVX2 static inline KERN__NORM_INLINE void kern__norm_fa__avx2(const void *x, const kern_dtype xdt, const void *r,
                            const kern_dtype rdt, float *sc, const int64_t H, const float s,
                            const int rms, double *o1, double *o2) {
    const int store_sc = rdt != KERN_DTYPE_NONE || xdt != KERN_F32;
    const __m256 vs = _mm256_set1_ps(s);
    __m256 a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps(), b2 = _mm256_setzero_ps();
    int64_t i = 0;
    /* two vectors per step: the sums are latency chains */
    for (; i + 2 * 8 <= H; i += 2 * 8) {
        __m256 v0 = kern__norm_ld__avx2(x, xdt, i, 8), v1 = kern__norm_ld__avx2(x, xdt, i + 8, 8);
        if (rdt != KERN_DTYPE_NONE) {
            v0 = _mm256_add_ps(v0, kern__norm_ld__avx2(r, rdt, i, 8));
            v1 = _mm256_add_ps(v1, kern__norm_ld__avx2(r, rdt, i + 8, 8));
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
    for (; i < H; i += 8) {
        const int full = i + 8 <= H;
        __m256 v = full ? kern__norm_ld__avx2(x, xdt, i, 8) : kern__norm_ld__avx2(x, xdt, i, H - i);
        if (rdt != KERN_DTYPE_NONE)
            v = _mm256_add_ps(v, full ? kern__norm_ld__avx2(r, rdt, i, 8) : kern__norm_ld__avx2(r, rdt, i, H - i));
        if (store_sc) _mm256_storeu_ps(sc + i, v);
        if (rms) {
            a2 = _mm256_fmadd_ps(v, v, a2);
        } else {
            __m256 d = _mm256_sub_ps(v, vs);
            if (!full) d = kern__norm_keep__avx2(d, H - i);
            a1 = _mm256_add_ps(a1, d);
            a2 = _mm256_fmadd_ps(d, d, a2);
        }
    }
    *o1 = kern__norm_hsum__avx2(_mm256_add_ps(a1, b1));
    *o2 = kern__norm_hsum__avx2(_mm256_add_ps(a2, b2));
}

/* Pass C, specialized on (out dtype, act): y = act(((h - s) rstd - c rstd)
 * w + b); w and b are always arrays (ones / zeros when absent). */
KERN_TARGET_AVX2 static inline KERN__NORM_INLINE void kern__norm_fc__avx2(const float *h, void *o, const kern_dtype odt, const int act,
                            const int64_t H, const float s, const float rstd, const float nb,
                            const float *w, const float *b, const int nt,
                            const kern__norm_pf *pf) {
    const __m256 vs = _mm256_set1_ps(s), vr = _mm256_set1_ps(rstd), vnb = _mm256_set1_ps(nb);
    int64_t i = 0;
    for (; i + 8 <= H; i += 8) {
        __m256 y = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(h + i), vs), vr, vnb);
        kern__norm_prefetch(pf, i);
        y = _mm256_fmadd_ps(y, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i));
        if (act) y = kern__norm_gelu__avx2(y, act == KERN_ACT_GELU_TANH);
        kern__norm_st__avx2(o, odt, i, 8, y, nt);
    }
    if (i < H) {
        __m256 y = _mm256_fmadd_ps(_mm256_sub_ps(kern__norm_ldf__avx2(h + i, H - i), vs), vr, vnb);
        y = _mm256_fmadd_ps(y, kern__norm_ldf__avx2(w + i, H - i), kern__norm_ldf__avx2(b + i, H - i));
        if (act) y = kern__norm_gelu__avx2(y, act == KERN_ACT_GELU_TANH);
        kern__norm_st__avx2(o, odt, i, H - i, y, nt);
    }
}

/* residual_out from the f32 row, specialized on its dtype */
KERN_TARGET_AVX2 static inline KERN__NORM_INLINE void kern__norm_fro__avx2(const float *h, void *o, const kern_dtype odt, const int64_t H,
                             const int nt) {
    int64_t i = 0;
    for (; i + 8 <= H; i += 8) kern__norm_st__avx2(o, odt, i, 8, _mm256_loadu_ps(h + i), nt);
    if (i < H) kern__norm_st__avx2(o, odt, i, H - i, kern__norm_ldf__avx2(h + i, H - i), nt);
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
KERN_TARGET_AVX2 static void kern__norm_fwd_row__avx2(const kern__norm_fwd *a, const void *x, const void *r,
                                      void *o, void *ro, float *sc, int64_t row, float *shift,
                                      const kern__norm_pf *pf) {
    const int64_t H = a->H;
    const kern_dtype xdt = a->x.dt, rdt = r ? a->r.dt : KERN_DTYPE_NONE;
    const int rms = a->rms, nt = a->nt;
    const float *h = (r || xdt != KERN_F32) ? sc : (const float *)x;
    float s, c = 0.0f, rstd;
    double s1 = 0, s2 = 0;
    if (rms) s = 0.0f;
    else if (*shift == *shift) s = *shift;
    else s = kern__norm_get(x, xdt, 0) + (r ? kern__norm_get(r, rdt, 0) : 0.0f);
    if (s != s || s - s != 0) s = 0.0f; /* NaN/Inf first element */
#define KERN__FA(XD, RD)                                                                   \
    do {                                                                                   \
        if (rms) kern__norm_fa__avx2(x, XD, r, RD, sc, H, s, 1, &s1, &s2);                   \
        else kern__norm_fa__avx2(x, XD, r, RD, sc, H, s, 0, &s1, &s2);                       \
    } while (0)
#define KERN__FA_R(XD)                                                                     \
    do {                                                                                   \
        if (rdt == KERN_F32) KERN__FA(XD, KERN_F32);                                       \
        else if (rdt == KERN_BF16) KERN__FA(XD, KERN_BF16);                                \
        else if (rdt == KERN_F16) KERN__FA(XD, KERN_F16);                                  \
        else KERN__FA(XD, KERN_DTYPE_NONE);                                                \
    } while (0)
    if (xdt == KERN_F32) KERN__FA_R(KERN_F32);
    else if (xdt == KERN_BF16) KERN__FA_R(KERN_BF16);
    else KERN__FA_R(KERN_F16);
#undef KERN__FA_R
#undef KERN__FA
    if (ro) {
        if (a->ro.dt == KERN_F32) kern__norm_fro__avx2(h, ro, KERN_F32, H, nt);
        else if (a->ro.dt == KERN_BF16) kern__norm_fro__avx2(h, ro, KERN_BF16, H, nt);
        else kern__norm_fro__avx2(h, ro, KERN_F16, H, nt);
    }
    if (rms) {
        rstd = (float)(1.0 / sqrt(s2 / (double)H + (double)a->eps));
    } else {
        double cd = s1 / (double)H, m2 = s2 / (double)H, var = m2 - cd * cd;
        if (!(cd * cd <= 0.25 * var)) { /* poor shift (or NaN): exact second pass */
            s = (float)((double)s + cd);
            if (s != s || s - s != 0) s = 0.0f;
            kern__norm_passB__avx2(h, KERN_F32, H, s, &s1, &s2);
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
#define KERN__FC(OD)                                                                       \
    do {                                                                                   \
        if (a->act == KERN_ACT_GELU) kern__norm_fc__avx2(h, o, OD, KERN_ACT_GELU, H, s, rstd, -c * rstd, a->w, a->b, nt, pf); \
        else if (a->act == KERN_ACT_GELU_TANH) kern__norm_fc__avx2(h, o, OD, KERN_ACT_GELU_TANH, H, s, rstd, -c * rstd, a->w, a->b, nt, pf); \
        else kern__norm_fc__avx2(h, o, OD, KERN_ACT_NONE, H, s, rstd, -c * rstd, a->w, a->b, nt, pf); \
    } while (0)
    if (a->o.dt == KERN_F32) KERN__FC(KERN_F32);
    else if (a->o.dt == KERN_BF16) KERN__FC(KERN_BF16);
    else KERN__FC(KERN_F16);
#undef KERN__FC
}

/* n elements of dtype dt to f32 (lanes past H zeroed in the padding) */
KERN_TARGET_AVX2 static inline KERN__NORM_INLINE void kern__norm_cvt__avx2(const void *p, const kern_dtype dt, float *o, const int64_t H) {
    int64_t i = 0;
    for (; i + 8 <= H; i += 8) _mm256_storeu_ps(o + i, kern__norm_ld__avx2(p, dt, i, 8));
    if (i < H) _mm256_storeu_ps(o + i, kern__norm_ld__avx2(p, dt, i, H - i));
}

/* Backward pass 1 on f32 rows, specialized on (act, part): g = dz w with
 * dz = dout act'(z), z = xhat w + b; sums of g and g xhat; the row's share
 * of dweight (part >= 1) and dbias (part == 2). g may overwrite dy. */
KERN_TARGET_AVX2 static inline KERN__NORM_INLINE void kern__norm_b1__avx2(const float *x, const float *dy, float *g, const int64_t H,
                            const float s, const float rstd, const float nb, const float *w,
                            const float *b, const int act, const int part, float *pw, float *pb,
                            double *sg, double *sgx) {
    const __m256 vs = _mm256_set1_ps(s), vr = _mm256_set1_ps(rstd), vnb = _mm256_set1_ps(nb);
    __m256 ag = _mm256_setzero_ps(), agx = _mm256_setzero_ps(), bg = _mm256_setzero_ps(), bgx = _mm256_setzero_ps();
    int64_t i = 0;
    /* padding lanes of the last vector: dy is 0 there (zeroed by the
     * conversion, or masked below), so dz, g and every sum get 0 */
    for (; i < H; i += 8) {
        const int full = i + 8 <= H;
        __m256 xv = full ? _mm256_loadu_ps(x + i) : kern__norm_ldf__avx2(x + i, H - i);
        __m256 dz = full ? _mm256_loadu_ps(dy + i) : kern__norm_ldf__avx2(dy + i, H - i);
        __m256 wv = _mm256_loadu_ps(w + i); /* w, b, pw, pb are padded to Hp */
        __m256 xh = _mm256_fmadd_ps(_mm256_sub_ps(xv, vs), vr, vnb), gv;
        if (act) dz = _mm256_mul_ps(dz, kern__norm_gelu_grad__avx2(_mm256_fmadd_ps(xh, wv, _mm256_loadu_ps(b + i)), act == KERN_ACT_GELU_TANH));
        if (part >= 1) _mm256_storeu_ps(pw + i, _mm256_fmadd_ps(dz, xh, _mm256_loadu_ps(pw + i)));
        if (part == 2) _mm256_storeu_ps(pb + i, _mm256_add_ps(dz, _mm256_loadu_ps(pb + i)));
        gv = _mm256_mul_ps(dz, wv);
        _mm256_storeu_ps(g + i, gv);
        if ((i / 8) & 1) {
            bg = _mm256_add_ps(bg, gv);
            bgx = _mm256_fmadd_ps(gv, xh, bgx);
        } else {
            ag = _mm256_add_ps(ag, gv);
            agx = _mm256_fmadd_ps(gv, xh, agx);
        }
    }
    *sg = kern__norm_hsum__avx2(_mm256_add_ps(ag, bg));
    *sgx = kern__norm_hsum__avx2(_mm256_add_ps(agx, bgx));
}

/* Backward pass 2, specialized on (dx dtype, dresidual dtype or 0):
 * dx = rstd (g - mean(g) - xhat mean(g xhat)) + dresidual. */
KERN_TARGET_AVX2 static inline KERN__NORM_INLINE void kern__norm_b2__avx2(const float *x, const float *g, void *dx, const kern_dtype dxdt,
                            const void *dr, const kern_dtype drdt, const int64_t H, const float s,
                            const float rstd, const float nb, const float mg, const float mgx,
                            const kern__norm_pf *pf) {
    const __m256 vs = _mm256_set1_ps(s), vr = _mm256_set1_ps(rstd), vnb = _mm256_set1_ps(nb), vmg = _mm256_set1_ps(mg), vmgx = _mm256_set1_ps(mgx);
    int64_t i = 0;
    for (; i < H; i += 8) {
        const int64_t n = H - i < 8 ? H - i : 8;
        kern__norm_prefetch(pf, i);
        __m256 xv = n == 8 ? _mm256_loadu_ps(x + i) : kern__norm_ldf__avx2(x + i, n);
        __m256 xh = _mm256_fmadd_ps(_mm256_sub_ps(xv, vs), vr, vnb);
        __m256 t = _mm256_mul_ps(_mm256_fnmadd_ps(xh, vmgx, _mm256_sub_ps(_mm256_loadu_ps(g + i), vmg)), vr);
        if (drdt != KERN_DTYPE_NONE)
            t = _mm256_add_ps(t, n == 8 ? kern__norm_ld__avx2(dr, drdt, i, 8) : kern__norm_ld__avx2(dr, drdt, i, n));
        if (n == 8) kern__norm_st__avx2(dx, dxdt, i, 8, t, 0);
        else kern__norm_st__avx2(dx, dxdt, i, n, t, 0);
    }
}

/* Backward of one row: x and dout are brought to f32 rows in scratch
 * (unless already f32), pass 1 forms g (kept in scratch) and the sums,
 * pass 2 writes dx. */
KERN_TARGET_AVX2 static void kern__norm_bwd_row__avx2(const kern__norm_bwd *a, const void *dy, const void *x,
                                      void *dx, const void *dr, float *sc, int64_t row,
                                      float *pw, float *pb, const kern__norm_pf *pf) {
    const int64_t H = a->H;
    float *xs = sc, *gs = sc + a->Hp;
    const float *xf = (const float *)x, *dyf = (const float *)dy;
    const kern_dtype drdt = dr ? a->dr.dt : KERN_DTYPE_NONE;
    const int part = pb ? 2 : pw ? 1 : 0;
    float s, c, rstd, nb, mg, mgx;
    double sg, sgx;
    if (a->x.dt == KERN_BF16) { kern__norm_cvt__avx2(x, KERN_BF16, xs, H); xf = xs; }
    else if (a->x.dt == KERN_F16) { kern__norm_cvt__avx2(x, KERN_F16, xs, H); xf = xs; }
    if (a->dy.dt == KERN_BF16) { kern__norm_cvt__avx2(dy, KERN_BF16, gs, H); dyf = gs; }
    else if (a->dy.dt == KERN_F16) { kern__norm_cvt__avx2(dy, KERN_F16, gs, H); dyf = gs; }
    if (a->rstd) {
        rstd = a->rstd[row];
        s = a->rms ? 0.0f : a->mean[row];
        c = 0.0f;
    } else {
        kern__norm_xstats__avx2(xf, KERN_F32, H, a->rms, a->eps, &s, &c, &rstd);
    }
    nb = -c * rstd;
#define KERN__B1(ACT, PART)                                                                \
    kern__norm_b1__avx2(xf, dyf, gs, H, s, rstd, nb, a->w, a->b, ACT, PART, pw, pb, &sg, &sgx)
#define KERN__B1P(ACT)                                                                     \
    do {                                                                                   \
        if (part == 2) KERN__B1(ACT, 2);                                                   \
        else if (part == 1) KERN__B1(ACT, 1);                                              \
        else KERN__B1(ACT, 0);                                                             \
    } while (0)
    if (a->act == KERN_ACT_GELU) KERN__B1P(KERN_ACT_GELU);
    else if (a->act == KERN_ACT_GELU_TANH) KERN__B1P(KERN_ACT_GELU_TANH);
    else KERN__B1P(KERN_ACT_NONE);
#undef KERN__B1P
#undef KERN__B1
    mg = a->rms ? 0.0f : (float)(sg / (double)H);
    mgx = (float)(sgx / (double)H);
#define KERN__B2(OD, RD) kern__norm_b2__avx2(xf, gs, dx, OD, dr, RD, H, s, rstd, nb, mg, mgx, pf)
#define KERN__B2R(OD)                                                                      \
    do {                                                                                   \
        if (drdt == KERN_F32) KERN__B2(OD, KERN_F32);                                      \
        else if (drdt == KERN_BF16) KERN__B2(OD, KERN_BF16);                               \
        else if (drdt == KERN_F16) KERN__B2(OD, KERN_F16);                                 \
        else KERN__B2(OD, KERN_DTYPE_NONE);                                                \
    } while (0)
    if (a->dx.dt == KERN_F32) KERN__B2R(KERN_F32);
    else if (a->dx.dt == KERN_BF16) KERN__B2R(KERN_BF16);
    else KERN__B2R(KERN_F16);
#undef KERN__B2R
#undef KERN__B2
}

/* Elementwise segment: add, (bias +) GELU, GELU backward. */
KERN_TARGET_AVX2 static void kern__norm_ew_seg__avx2(const kern__norm_ew *e, const void *p, const void *q,
                                     void *o, const float *bias, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i += 8) {
        int64_t m = n - i < 8 ? n - i : 8;
        __m256 v = kern__norm_ld__avx2(p, e->a.dt, i, m);
        if (e->op == KERN__NORM_EW_ADD) {
            v = _mm256_add_ps(v, kern__norm_ld__avx2(q, e->b.dt, i, m));
        } else if (e->op == KERN__NORM_EW_GELU) {
            if (bias) v = _mm256_add_ps(v, kern__norm_ldf__avx2(bias + i, m));
            v = kern__norm_gelu__avx2(v, e->tanh_form);
        } else {
            v = _mm256_mul_ps(v, kern__norm_gelu_grad__avx2(kern__norm_ld__avx2(q, e->b.dt, i, m), e->tanh_form));
        }
        kern__norm_st__avx2(o, e->o.dt, i, m, v, e->nt);
    }
}
#endif

#ifdef KERN_NEON
/* ---- neon row kernels (instance of the shared row template) ---- */
/* sum(d) and sum(d^2) of d = h - mh over a row, two accumulators each. */
static void kern__norm_passB__neon(const void *h, kern_dtype dt, int64_t H, float mh,
                                    double *s1, double *s2) {
    const float32x4_t vm = vdupq_n_f32(mh);
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f), b0 = vdupq_n_f32(0.0f), b1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 2 * 4 <= H; i += 2 * 4) {
        float32x4_t d0 = vsubq_f32(kern__norm_ld__neon(h, dt, i, 4), vm);
        float32x4_t d1 = vsubq_f32(kern__norm_ld__neon(h, dt, i + 4, 4), vm);
        a0 = vaddq_f32(a0, d0);
        a1 = vaddq_f32(a1, d1);
        b0 = kern__norm_fmadd__neon(d0, d0, b0);
        b1 = kern__norm_fmadd__neon(d1, d1, b1);
    }
    for (; i < H; i += 4) {
        float32x4_t d = kern__norm_ldd__neon(h, dt, i, H - i, vm);
        a0 = vaddq_f32(a0, d);
        b0 = kern__norm_fmadd__neon(d, d, b0);
    }
    *s1 = kern__norm_hsum__neon(vaddq_f32(a0, a1));
    *s2 = kern__norm_hsum__neon(vaddq_f32(b0, b1));
}

/* Statistics of a row read from x (backward without saved statistics):
 * the same corrected two-pass scheme as the forward. */
static void kern__norm_xstats__neon(const void *x, kern_dtype dt, int64_t H, int rms,
                                     float eps, float *mh, float *c, float *rstd) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 2 * 4 <= H; i += 2 * 4) {
        float32x4_t v0 = kern__norm_ld__neon(x, dt, i, 4), v1 = kern__norm_ld__neon(x, dt, i + 4, 4);
        if (rms) { a0 = kern__norm_fmadd__neon(v0, v0, a0); a1 = kern__norm_fmadd__neon(v1, v1, a1); }
        else { a0 = vaddq_f32(a0, v0); a1 = vaddq_f32(a1, v1); }
    }
    for (; i < H; i += 4) {
        float32x4_t v = kern__norm_ld__neon(x, dt, i, H - i);
        a0 = rms ? kern__norm_fmadd__neon(v, v, a0) : vaddq_f32(a0, v);
    }
    if (rms) {
        *mh = 0.0f;
        *c = 0.0f;
        *rstd = (float)(1.0 / sqrt(kern__norm_hsum__neon(vaddq_f32(a0, a1)) / (double)H + (double)eps));
    } else {
        double s1, s2, cd, var;
        *mh = (float)(kern__norm_hsum__neon(vaddq_f32(a0, a1)) / (double)H);
        kern__norm_passB__neon(x, dt, H, *mh, &s1, &s2);
        cd = s1 / (double)H;
        var = s2 / (double)H - cd * cd;
        if (var < 0) var = 0;
        *c = (float)cd;
        *rstd = (float)(1.0 / sqrt(var + (double)eps));
    }
}

/* Forward pass A, specialized by the caller on (x dtype, residual dtype
 * or 0, rms) so the loop carries no dtype or flag branches: h = x (+ r) in
 * f32, kept in scratch when it is not x itself; sums of d = h - s and d^2
 * (s: the shift), or of h^2 for RMSNorm. */
static inline KERN__NORM_INLINE void kern__norm_fa__neon(const void *x, const kern_dtype xdt, const void *r,
                            const kern_dtype rdt, float *sc, const int64_t H, const float s,
                            const int rms, double *o1, double *o2) {
    const int store_sc = rdt != KERN_DTYPE_NONE || xdt != KERN_F32;
    const float32x4_t vs = vdupq_n_f32(s);
    float32x4_t a1 = vdupq_n_f32(0.0f), a2 = vdupq_n_f32(0.0f), b1 = vdupq_n_f32(0.0f), b2 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    /* two vectors per step: the sums are latency chains */
    for (; i + 2 * 4 <= H; i += 2 * 4) {
        float32x4_t v0 = kern__norm_ld__neon(x, xdt, i, 4), v1 = kern__norm_ld__neon(x, xdt, i + 4, 4);
        if (rdt != KERN_DTYPE_NONE) {
            v0 = vaddq_f32(v0, kern__norm_ld__neon(r, rdt, i, 4));
            v1 = vaddq_f32(v1, kern__norm_ld__neon(r, rdt, i + 4, 4));
        }
        if (store_sc) {
            vst1q_f32(sc + i, v0);
            vst1q_f32(sc + i + 4, v1);
        }
        if (rms) {
            a2 = kern__norm_fmadd__neon(v0, v0, a2);
            b2 = kern__norm_fmadd__neon(v1, v1, b2);
        } else {
            float32x4_t d0 = vsubq_f32(v0, vs), d1 = vsubq_f32(v1, vs);
            a1 = vaddq_f32(a1, d0);
            b1 = vaddq_f32(b1, d1);
            a2 = kern__norm_fmadd__neon(d0, d0, a2);
            b2 = kern__norm_fmadd__neon(d1, d1, b2);
        }
    }
    for (; i < H; i += 4) {
        const int full = i + 4 <= H;
        float32x4_t v = full ? kern__norm_ld__neon(x, xdt, i, 4) : kern__norm_ld__neon(x, xdt, i, H - i);
        if (rdt != KERN_DTYPE_NONE)
            v = vaddq_f32(v, full ? kern__norm_ld__neon(r, rdt, i, 4) : kern__norm_ld__neon(r, rdt, i, H - i));
        if (store_sc) vst1q_f32(sc + i, v);
        if (rms) {
            a2 = kern__norm_fmadd__neon(v, v, a2);
        } else {
            float32x4_t d = vsubq_f32(v, vs);
            if (!full) d = kern__norm_keep__neon(d, H - i);
            a1 = vaddq_f32(a1, d);
            a2 = kern__norm_fmadd__neon(d, d, a2);
        }
    }
    *o1 = kern__norm_hsum__neon(vaddq_f32(a1, b1));
    *o2 = kern__norm_hsum__neon(vaddq_f32(a2, b2));
}

/* Pass C, specialized on (out dtype, act): y = act(((h - s) rstd - c rstd)
 * w + b); w and b are always arrays (ones / zeros when absent). */
static inline KERN__NORM_INLINE void kern__norm_fc__neon(const float *h, void *o, const kern_dtype odt, const int act,
                            const int64_t H, const float s, const float rstd, const float nb,
                            const float *w, const float *b, const int nt,
                            const kern__norm_pf *pf) {
    const float32x4_t vs = vdupq_n_f32(s), vr = vdupq_n_f32(rstd), vnb = vdupq_n_f32(nb);
    int64_t i = 0;
    for (; i + 4 <= H; i += 4) {
        float32x4_t y = kern__norm_fmadd__neon(vsubq_f32(vld1q_f32(h + i), vs), vr, vnb);
        kern__norm_prefetch(pf, i);
        y = kern__norm_fmadd__neon(y, vld1q_f32(w + i), vld1q_f32(b + i));
        if (act) y = kern__norm_gelu__neon(y, act == KERN_ACT_GELU_TANH);
        kern__norm_st__neon(o, odt, i, 4, y, nt);
    }
    if (i < H) {
        float32x4_t y = kern__norm_fmadd__neon(vsubq_f32(kern__norm_ldf__neon(h + i, H - i), vs), vr, vnb);
        y = kern__norm_fmadd__neon(y, kern__norm_ldf__neon(w + i, H - i), kern__norm_ldf__neon(b + i, H - i));
        if (act) y = kern__norm_gelu__neon(y, act == KERN_ACT_GELU_TANH);
        kern__norm_st__neon(o, odt, i, H - i, y, nt);
    }
}

/* residual_out from the f32 row, specialized on its dtype */
static inline KERN__NORM_INLINE void kern__norm_fro__neon(const float *h, void *o, const kern_dtype odt, const int64_t H,
                             const int nt) {
    int64_t i = 0;
    for (; i + 4 <= H; i += 4) kern__norm_st__neon(o, odt, i, 4, vld1q_f32(h + i), nt);
    if (i < H) kern__norm_st__neon(o, odt, i, H - i, kern__norm_ldf__neon(h + i, H - i), nt);
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
static void kern__norm_fwd_row__neon(const kern__norm_fwd *a, const void *x, const void *r,
                                      void *o, void *ro, float *sc, int64_t row, float *shift,
                                      const kern__norm_pf *pf) {
    const int64_t H = a->H;
    const kern_dtype xdt = a->x.dt, rdt = r ? a->r.dt : KERN_DTYPE_NONE;
    const int rms = a->rms, nt = a->nt;
    const float *h = (r || xdt != KERN_F32) ? sc : (const float *)x;
    float s, c = 0.0f, rstd;
    double s1 = 0, s2 = 0;
    if (rms) s = 0.0f;
    else if (*shift == *shift) s = *shift;
    else s = kern__norm_get(x, xdt, 0) + (r ? kern__norm_get(r, rdt, 0) : 0.0f);
    if (s != s || s - s != 0) s = 0.0f; /* NaN/Inf first element */
#define KERN__FA(XD, RD)                                                                   \
    do {                                                                                   \
        if (rms) kern__norm_fa__neon(x, XD, r, RD, sc, H, s, 1, &s1, &s2);                   \
        else kern__norm_fa__neon(x, XD, r, RD, sc, H, s, 0, &s1, &s2);                       \
    } while (0)
#define KERN__FA_R(XD)                                                                     \
    do {                                                                                   \
        if (rdt == KERN_F32) KERN__FA(XD, KERN_F32);                                       \
        else if (rdt == KERN_BF16) KERN__FA(XD, KERN_BF16);                                \
        else if (rdt == KERN_F16) KERN__FA(XD, KERN_F16);                                  \
        else KERN__FA(XD, KERN_DTYPE_NONE);                                                \
    } while (0)
    if (xdt == KERN_F32) KERN__FA_R(KERN_F32);
    else if (xdt == KERN_BF16) KERN__FA_R(KERN_BF16);
    else KERN__FA_R(KERN_F16);
#undef KERN__FA_R
#undef KERN__FA
    if (ro) {
        if (a->ro.dt == KERN_F32) kern__norm_fro__neon(h, ro, KERN_F32, H, nt);
        else if (a->ro.dt == KERN_BF16) kern__norm_fro__neon(h, ro, KERN_BF16, H, nt);
        else kern__norm_fro__neon(h, ro, KERN_F16, H, nt);
    }
    if (rms) {
        rstd = (float)(1.0 / sqrt(s2 / (double)H + (double)a->eps));
    } else {
        double cd = s1 / (double)H, m2 = s2 / (double)H, var = m2 - cd * cd;
        if (!(cd * cd <= 0.25 * var)) { /* poor shift (or NaN): exact second pass */
            s = (float)((double)s + cd);
            if (s != s || s - s != 0) s = 0.0f;
            kern__norm_passB__neon(h, KERN_F32, H, s, &s1, &s2);
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
#define KERN__FC(OD)                                                                       \
    do {                                                                                   \
        if (a->act == KERN_ACT_GELU) kern__norm_fc__neon(h, o, OD, KERN_ACT_GELU, H, s, rstd, -c * rstd, a->w, a->b, nt, pf); \
        else if (a->act == KERN_ACT_GELU_TANH) kern__norm_fc__neon(h, o, OD, KERN_ACT_GELU_TANH, H, s, rstd, -c * rstd, a->w, a->b, nt, pf); \
        else kern__norm_fc__neon(h, o, OD, KERN_ACT_NONE, H, s, rstd, -c * rstd, a->w, a->b, nt, pf); \
    } while (0)
    if (a->o.dt == KERN_F32) KERN__FC(KERN_F32);
    else if (a->o.dt == KERN_BF16) KERN__FC(KERN_BF16);
    else KERN__FC(KERN_F16);
#undef KERN__FC
}

/* n elements of dtype dt to f32 (lanes past H zeroed in the padding) */
static inline KERN__NORM_INLINE void kern__norm_cvt__neon(const void *p, const kern_dtype dt, float *o, const int64_t H) {
    int64_t i = 0;
    for (; i + 4 <= H; i += 4) vst1q_f32(o + i, kern__norm_ld__neon(p, dt, i, 4));
    if (i < H) vst1q_f32(o + i, kern__norm_ld__neon(p, dt, i, H - i));
}

/* Backward pass 1 on f32 rows, specialized on (act, part): g = dz w with
 * dz = dout act'(z), z = xhat w + b; sums of g and g xhat; the row's share
 * of dweight (part >= 1) and dbias (part == 2). g may overwrite dy. */
static inline KERN__NORM_INLINE void kern__norm_b1__neon(const float *x, const float *dy, float *g, const int64_t H,
                            const float s, const float rstd, const float nb, const float *w,
                            const float *b, const int act, const int part, float *pw, float *pb,
                            double *sg, double *sgx) {
    const float32x4_t vs = vdupq_n_f32(s), vr = vdupq_n_f32(rstd), vnb = vdupq_n_f32(nb);
    float32x4_t ag = vdupq_n_f32(0.0f), agx = vdupq_n_f32(0.0f), bg = vdupq_n_f32(0.0f), bgx = vdupq_n_f32(0.0f);
    int64_t i = 0;
    /* padding lanes of the last vector: dy is 0 there (zeroed by the
     * conversion, or masked below), so dz, g and every sum get 0 */
    for (; i < H; i += 4) {
        const int full = i + 4 <= H;
        float32x4_t xv = full ? vld1q_f32(x + i) : kern__norm_ldf__neon(x + i, H - i);
        float32x4_t dz = full ? vld1q_f32(dy + i) : kern__norm_ldf__neon(dy + i, H - i);
        float32x4_t wv = vld1q_f32(w + i); /* w, b, pw, pb are padded to Hp */
        float32x4_t xh = kern__norm_fmadd__neon(vsubq_f32(xv, vs), vr, vnb), gv;
        if (act) dz = vmulq_f32(dz, kern__norm_gelu_grad__neon(kern__norm_fmadd__neon(xh, wv, vld1q_f32(b + i)), act == KERN_ACT_GELU_TANH));
        if (part >= 1) vst1q_f32(pw + i, kern__norm_fmadd__neon(dz, xh, vld1q_f32(pw + i)));
        if (part == 2) vst1q_f32(pb + i, vaddq_f32(dz, vld1q_f32(pb + i)));
        gv = vmulq_f32(dz, wv);
        vst1q_f32(g + i, gv);
        if ((i / 4) & 1) {
            bg = vaddq_f32(bg, gv);
            bgx = kern__norm_fmadd__neon(gv, xh, bgx);
        } else {
            ag = vaddq_f32(ag, gv);
            agx = kern__norm_fmadd__neon(gv, xh, agx);
        }
    }
    *sg = kern__norm_hsum__neon(vaddq_f32(ag, bg));
    *sgx = kern__norm_hsum__neon(vaddq_f32(agx, bgx));
}

/* Backward pass 2, specialized on (dx dtype, dresidual dtype or 0):
 * dx = rstd (g - mean(g) - xhat mean(g xhat)) + dresidual. */
static inline KERN__NORM_INLINE void kern__norm_b2__neon(const float *x, const float *g, void *dx, const kern_dtype dxdt,
                            const void *dr, const kern_dtype drdt, const int64_t H, const float s,
                            const float rstd, const float nb, const float mg, const float mgx,
                            const kern__norm_pf *pf) {
    const float32x4_t vs = vdupq_n_f32(s), vr = vdupq_n_f32(rstd), vnb = vdupq_n_f32(nb), vmg = vdupq_n_f32(mg), vmgx = vdupq_n_f32(mgx);
    int64_t i = 0;
    for (; i < H; i += 4) {
        const int64_t n = H - i < 4 ? H - i : 4;
        kern__norm_prefetch(pf, i);
        float32x4_t xv = n == 4 ? vld1q_f32(x + i) : kern__norm_ldf__neon(x + i, n);
        float32x4_t xh = kern__norm_fmadd__neon(vsubq_f32(xv, vs), vr, vnb);
        float32x4_t t = vmulq_f32(kern__norm_fnmadd__neon(xh, vmgx, vsubq_f32(vld1q_f32(g + i), vmg)), vr);
        if (drdt != KERN_DTYPE_NONE)
            t = vaddq_f32(t, n == 4 ? kern__norm_ld__neon(dr, drdt, i, 4) : kern__norm_ld__neon(dr, drdt, i, n));
        if (n == 4) kern__norm_st__neon(dx, dxdt, i, 4, t, 0);
        else kern__norm_st__neon(dx, dxdt, i, n, t, 0);
    }
}

/* Backward of one row: x and dout are brought to f32 rows in scratch
 * (unless already f32), pass 1 forms g (kept in scratch) and the sums,
 * pass 2 writes dx. */
static void kern__norm_bwd_row__neon(const kern__norm_bwd *a, const void *dy, const void *x,
                                      void *dx, const void *dr, float *sc, int64_t row,
                                      float *pw, float *pb, const kern__norm_pf *pf) {
    const int64_t H = a->H;
    float *xs = sc, *gs = sc + a->Hp;
    const float *xf = (const float *)x, *dyf = (const float *)dy;
    const kern_dtype drdt = dr ? a->dr.dt : KERN_DTYPE_NONE;
    const int part = pb ? 2 : pw ? 1 : 0;
    float s, c, rstd, nb, mg, mgx;
    double sg, sgx;
    if (a->x.dt == KERN_BF16) { kern__norm_cvt__neon(x, KERN_BF16, xs, H); xf = xs; }
    else if (a->x.dt == KERN_F16) { kern__norm_cvt__neon(x, KERN_F16, xs, H); xf = xs; }
    if (a->dy.dt == KERN_BF16) { kern__norm_cvt__neon(dy, KERN_BF16, gs, H); dyf = gs; }
    else if (a->dy.dt == KERN_F16) { kern__norm_cvt__neon(dy, KERN_F16, gs, H); dyf = gs; }
    if (a->rstd) {
        rstd = a->rstd[row];
        s = a->rms ? 0.0f : a->mean[row];
        c = 0.0f;
    } else {
        kern__norm_xstats__neon(xf, KERN_F32, H, a->rms, a->eps, &s, &c, &rstd);
    }
    nb = -c * rstd;
#define KERN__B1(ACT, PART)                                                                \
    kern__norm_b1__neon(xf, dyf, gs, H, s, rstd, nb, a->w, a->b, ACT, PART, pw, pb, &sg, &sgx)
#define KERN__B1P(ACT)                                                                     \
    do {                                                                                   \
        if (part == 2) KERN__B1(ACT, 2);                                                   \
        else if (part == 1) KERN__B1(ACT, 1);                                              \
        else KERN__B1(ACT, 0);                                                             \
    } while (0)
    if (a->act == KERN_ACT_GELU) KERN__B1P(KERN_ACT_GELU);
    else if (a->act == KERN_ACT_GELU_TANH) KERN__B1P(KERN_ACT_GELU_TANH);
    else KERN__B1P(KERN_ACT_NONE);
#undef KERN__B1P
#undef KERN__B1
    mg = a->rms ? 0.0f : (float)(sg / (double)H);
    mgx = (float)(sgx / (double)H);
#define KERN__B2(OD, RD) kern__norm_b2__neon(xf, gs, dx, OD, dr, RD, H, s, rstd, nb, mg, mgx, pf)
#define KERN__B2R(OD)                                                                      \
    do {                                                                                   \
        if (drdt == KERN_F32) KERN__B2(OD, KERN_F32);                                      \
        else if (drdt == KERN_BF16) KERN__B2(OD, KERN_BF16);                               \
        else if (drdt == KERN_F16) KERN__B2(OD, KERN_F16);                                 \
        else KERN__B2(OD, KERN_DTYPE_NONE);                                                \
    } while (0)
    if (a->dx.dt == KERN_F32) KERN__B2R(KERN_F32);
    else if (a->dx.dt == KERN_BF16) KERN__B2R(KERN_BF16);
    else KERN__B2R(KERN_F16);
#undef KERN__B2R
#undef KERN__B2
}

/* Elementwise segment: add, (bias +) GELU, GELU backward. */
static void kern__norm_ew_seg__neon(const kern__norm_ew *e, const void *p, const void *q,
                                     void *o, const float *bias, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i += 4) {
        int64_t m = n - i < 4 ? n - i : 4;
        float32x4_t v = kern__norm_ld__neon(p, e->a.dt, i, m);
        if (e->op == KERN__NORM_EW_ADD) {
            v = vaddq_f32(v, kern__norm_ld__neon(q, e->b.dt, i, m));
        } else if (e->op == KERN__NORM_EW_GELU) {
            if (bias) v = vaddq_f32(v, kern__norm_ldf__neon(bias + i, m));
            v = kern__norm_gelu__neon(v, e->tanh_form);
        } else {
            v = vmulq_f32(v, kern__norm_gelu_grad__neon(kern__norm_ld__neon(q, e->b.dt, i, m), e->tanh_form));
        }
        kern__norm_st__neon(o, e->o.dt, i, m, v, e->nt);
    }
}
#endif

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
    if (eps != eps || eps < 0.0f || eps > 3.4028234e38f)
        return kern__err(KERN_ERR_ARG, "%s: eps=%g must be finite and >= 0", op, (double)eps);
    *out = eps_set || eps != 0.0f ? eps : 1e-5f;
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

/* Validates kern_norm's operands (writes nothing): *eps, *rows, *H. */
static kern_status kern__norm_fwd_check(const char *op, const kern_tensor *x,
                                        const kern_tensor *out, const kern_norm_params *pp,
                                        float *eps, int64_t *rows_out, int64_t *H_out) {
    kern_norm_params p;
    kern_status st;
    int64_t H, rows = 0;
    if (pp) p = *pp;
    else memset(&p, 0, sizeof p);
    if (!x || !out) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !x ? "x" : "out");
    if ((st = kern__norm_check_rowt(x, op, "x", NULL, NULL)) != KERN_OK) return st;
    if ((st = kern__norm_check_rowt(out, op, "out", x, "x")) != KERN_OK) return st;
    if (p.residual && (st = kern__norm_check_rowt(p.residual, op, "residual", x, "x")) != KERN_OK)
        return st;
    if (p.residual_out &&
        (st = kern__norm_check_rowt(p.residual_out, op, "residual_out", x, "x")) != KERN_OK)
        return st;
    H = x->shape[x->ndim - 1];
    if ((st = kern__norm_rows(x, op, &rows)) != KERN_OK) return st;
    if (p.weight && (st = kern__norm_check_vec(p.weight, op, "weight", H)) != KERN_OK) return st;
    if (p.bias && (st = kern__norm_check_vec(p.bias, op, "bias", H)) != KERN_OK) return st;
    if ((int)p.norm != KERN_NORM_LAYER && (int)p.norm != KERN_NORM_RMS)
        return kern__err(KERN_ERR_ARG, "%s: params.norm=%d is not a kern_norm_kind", op, (int)p.norm);
    if ((int)p.act < KERN_ACT_NONE || (int)p.act >= KERN_ACT_COUNT)
        return kern__err(KERN_ERR_ARG, "%s: params.act=%d is not a kern_act", op, (int)p.act);
    if ((int)p.act > KERN_ACT_GELU_TANH)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: params.act=%s is not supported by this op (it supports none, "
                         "gelu, gelu_tanh)", op, kern_act_name(p.act));
    if (p.mean && p.norm == KERN_NORM_RMS)
        return kern__err(KERN_ERR_ARG, "%s: mean was given but RMSNorm has no mean (pass rstd only)", op);
    if (p.mean && (st = kern__norm_check_stats(p.mean, op, "mean", rows)) != KERN_OK) return st;
    if (p.rstd && (st = kern__norm_check_stats(p.rstd, op, "rstd", rows)) != KERN_OK) return st;
    if ((st = kern__norm_check_eps(op, p.eps, p.eps_set, eps)) != KERN_OK) return st;
    {
        const kern_tensor *outs[4], *ins[4];
        const char *on[4] = {"out", "residual_out", "mean", "rstd"};
        const char *in[4] = {"x", "residual", "weight", "bias"};
        outs[0] = out; outs[1] = p.residual_out; outs[2] = p.mean; outs[3] = p.rstd;
        ins[0] = x; ins[1] = p.residual; ins[2] = p.weight; ins[3] = p.bias;
        if ((st = kern__norm_check_alias(op, outs, on, 4, ins, in, 4)) != KERN_OK) return st;
    }
    *rows_out = rows;
    *H_out = H;
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
    kern_status st;
    int64_t H, rows;
    float eps;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if ((st = kern__norm_fwd_check(op, x, out, params, &eps, &rows, &H)) != KERN_OK) return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__norm_fwd_scratch(rows, H, &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_norm(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *out,
                               const kern_norm_params *params) {
    static const char *op = "kern_norm";
    kern_norm_params p;
    kern_status st;
    kern__norm_fwd a;
    int64_t H, rows = 0, Hp;
    float eps;
    uint32_t f;
    size_t sh, th;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    if ((st = kern__norm_fwd_check(op, x, out, &p, &eps, &rows, &H)) != KERN_OK) return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__norm_fwd_scratch(rows, H, &sh, &th);
    if ((st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size, sh, th)) != KERN_OK) {
        kern__op_end(ctx);
        return st;
    }
    if (rows > 0 && H == 0 && (p.mean || p.rstd)) { /* PyTorch: mean 0, rstd NaN (no loop
                                                       over rows without them: x may be
                                                       [2^40, 0]) */
        int64_t r;
        for (r = 0; r < rows; r++) {
            if (p.mean) ((float *)p.mean->data)[r] = 0.0f;
            if (p.rstd) ((float *)p.rstd->data)[r] = (float)NAN;
        }
    }
    if (rows == 0 || H == 0) {
        kern__op_end(ctx);
        return KERN_OK;
    }
    Hp = (H + 15) & ~(int64_t)15; /* H < 2^62 here: x holds rows * H > 0 elements */
    memset(&a, 0, sizeof a);
    {
        /* weight / bias as f32 (ones / zeros when absent: the vector loops
         * always apply the affine, x * 1 + 0 is exact) */
        float *ws = (float *)kern__workspace(ctx, (size_t)(2 * Hp) * sizeof(float));
        int64_t j;
        if (!ws || kern__reserve_thread_scratch(ctx, (size_t)Hp * sizeof(float)) != KERN_OK) {
            kern__op_end(ctx);
            return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %lld bytes of scratch", op,
                             (long long)(3 * Hp * 4));
        }
        if (!p.weight)
            for (j = 0; j < H; j++) ws[j] = 1.0f;
        if (!p.bias)
            for (j = 0; j < H; j++) ws[Hp + j] = 0.0f;
        a.w = p.weight ? kern__norm_vec_f32(ctx, p.weight, ws, H) : ws;
        a.b = p.bias ? kern__norm_vec_f32(ctx, p.bias, ws + Hp, H) : ws + Hp;
    }
    kern__norm_view_init(&a.x, x);
    kern__norm_view_init(&a.r, p.residual);
    kern__norm_view_init(&a.o, out);
    kern__norm_view_init(&a.ro, p.residual_out);
    a.mean = p.mean ? (float *)p.mean->data : NULL;
    a.rstd = p.rstd ? (float *)p.rstd->data : NULL;
    a.H = H;
    a.Hp = Hp;
    a.rows = rows;
    a.rpt = H >= 16384 ? 1 : 16384 / H;
    a.eps = eps;
    a.rms = p.norm == KERN_NORM_RMS;
    a.act = (int)p.act;
    a.nt = kern__norm_bytes(out) + kern__norm_bytes(p.residual_out) >= KERN_NORM_NT_BYTES;
    a.ctx = ctx;
    a.row = kern__norm_fwd_row__scalar;
    f = kern_ctx_features(ctx);
    (void)f;
#ifdef KERN_X86
    if ((f & KERN_CPU_AVX512F) && (f & KERN_CPU_AVX512BW) && (f & KERN_CPU_AVX512VL))
        a.row = kern__norm_fwd_row__avx512;
    else if ((f & KERN_CPU_AVX2) && (f & KERN_CPU_FMA) && (f & KERN_CPU_F16C))
        a.row = kern__norm_fwd_row__avx2;
#endif
#ifdef KERN_NEON
    if (f & KERN_CPU_NEON) a.row = kern__norm_fwd_row__neon;
#endif
    kern_parallel_for(ctx, (rows + a.rpt - 1) / a.rpt, kern__norm_fwd_task, &a);
    kern__op_end(ctx);
    return KERN_OK;
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

/* Validates kern_norm_backward's operands (writes nothing). */
static kern_status kern__norm_bwd_check(const char *op, const kern_tensor *dout,
                                        const kern_tensor *x, const kern_tensor *dx,
                                        const kern_norm_backward_params *pp, float *eps,
                                        int64_t *rows_out, int64_t *H_out) {
    kern_norm_backward_params p;
    kern_status st;
    int64_t H, rows = 0;
    if (pp) p = *pp;
    else memset(&p, 0, sizeof p);
    if (!dout || !x || !dx)
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !dout ? "dout" : !x ? "x" : "dx");
    if ((st = kern__norm_check_rowt(x, op, "x", NULL, NULL)) != KERN_OK) return st;
    if ((st = kern__norm_check_rowt(dout, op, "dout", x, "x")) != KERN_OK) return st;
    if ((st = kern__norm_check_rowt(dx, op, "dx", x, "x")) != KERN_OK) return st;
    if (p.dresidual && (st = kern__norm_check_rowt(p.dresidual, op, "dresidual", x, "x")) != KERN_OK)
        return st;
    H = x->shape[x->ndim - 1];
    if ((st = kern__norm_rows(x, op, &rows)) != KERN_OK) return st;
    if (p.weight && (st = kern__norm_check_vec(p.weight, op, "weight", H)) != KERN_OK) return st;
    if (p.bias && (st = kern__norm_check_vec(p.bias, op, "bias", H)) != KERN_OK) return st;
    if (p.dweight && (st = kern__norm_check_vec(p.dweight, op, "dweight", H)) != KERN_OK) return st;
    if (p.dbias && (st = kern__norm_check_vec(p.dbias, op, "dbias", H)) != KERN_OK) return st;
    if ((int)p.norm != KERN_NORM_LAYER && (int)p.norm != KERN_NORM_RMS)
        return kern__err(KERN_ERR_ARG, "%s: params.norm=%d is not a kern_norm_kind", op, (int)p.norm);
    if ((int)p.act < KERN_ACT_NONE || (int)p.act >= KERN_ACT_COUNT)
        return kern__err(KERN_ERR_ARG, "%s: params.act=%d is not a kern_act", op, (int)p.act);
    if ((int)p.act > KERN_ACT_GELU_TANH)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: params.act=%s is not supported by this op (it supports none, "
                         "gelu, gelu_tanh)", op, kern_act_name(p.act));
    if (p.dweight && !p.weight)
        return kern__err(KERN_ERR_ARG, "%s: dweight was given but weight is NULL", op);
    if (p.dbias && !p.bias)
        return kern__err(KERN_ERR_ARG, "%s: dbias was given but bias is NULL", op);
    if (p.norm == KERN_NORM_RMS && p.mean)
        return kern__err(KERN_ERR_ARG, "%s: mean was given but RMSNorm has no mean", op);
    if (p.norm == KERN_NORM_LAYER && !p.mean != !p.rstd)
        return kern__err(KERN_ERR_ARG, "%s: LayerNorm needs both mean and rstd, or neither (%s is NULL)",
                         op, p.mean ? "rstd" : "mean");
    if (p.mean && (st = kern__norm_check_stats(p.mean, op, "mean", rows)) != KERN_OK) return st;
    if (p.rstd && (st = kern__norm_check_stats(p.rstd, op, "rstd", rows)) != KERN_OK) return st;
    if ((st = kern__norm_check_eps(op, p.eps, p.eps_set, eps)) != KERN_OK) return st;
    {
        const kern_tensor *outs[3], *ins[7];
        const char *on[3] = {"dx", "dweight", "dbias"};
        const char *in[7] = {"dout", "x", "dresidual", "weight", "bias", "mean", "rstd"};
        outs[0] = dx; outs[1] = p.dweight; outs[2] = p.dbias;
        ins[0] = dout; ins[1] = x; ins[2] = p.dresidual; ins[3] = p.weight; ins[4] = p.bias;
        ins[5] = p.mean; ins[6] = p.rstd;
        if ((st = kern__norm_check_alias(op, outs, on, 3, ins, in, 7)) != KERN_OK) return st;
    }
    *rows_out = rows;
    *H_out = H;
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
    /* the row kernels accumulate dbias partials only next to dweight
     * partials: dbias alone still takes the dweight partials' space */
    nfl = 2 * Hp + (dw || db ? nblk * Hp : 0) + (db ? nblk * Hp : 0);
    *shared = (size_t)nfl * sizeof(float);
    *thread = (size_t)(2 * Hp) * sizeof(float);
}

KERN_API kern_status kern_norm_backward_workspace_size(kern_ctx *ctx, const kern_tensor *dout,
                                                       const kern_tensor *x, const kern_tensor *dx,
                                                       const kern_norm_backward_params *params,
                                                       size_t *bytes) {
    static const char *op = "kern_norm_backward_workspace_size";
    kern_status st;
    int64_t H, rows;
    float eps;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if ((st = kern__norm_bwd_check(op, dout, x, dx, params, &eps, &rows, &H)) != KERN_OK) return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__norm_bwd_scratch(rows, H, params, &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_norm_backward(kern_ctx *ctx, const kern_tensor *dout,
                                        const kern_tensor *x, const kern_tensor *dx,
                                        const kern_norm_backward_params *params) {
    static const char *op = "kern_norm_backward";
    kern_norm_backward_params p;
    kern_status st;
    kern__norm_bwd a;
    int64_t H, rows = 0, Hp, ntasks;
    float eps;
    uint32_t f;
    size_t sh, th;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    if ((st = kern__norm_bwd_check(op, dout, x, dx, &p, &eps, &rows, &H)) != KERN_OK) return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__norm_bwd_scratch(rows, H, &p, &sh, &th);
    if ((st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size, sh, th)) != KERN_OK) {
        kern__op_end(ctx);
        return st;
    }
    memset(&a, 0, sizeof a);
    if (rows == 0 || H == 0) { /* empty: dweight/dbias are sums over nothing */
        int64_t j;
        for (j = 0; (p.dweight || p.dbias) && j < H; j++) { /* (x may be [0, 2^40]) */
            if (p.dweight) kern__norm_put(p.dweight->data, p.dweight->dtype, j, 0.0f);
            if (p.dbias) kern__norm_put(p.dbias->data, p.dbias->dtype, j, 0.0f);
        }
        kern__op_end(ctx);
        return KERN_OK;
    }
    Hp = (H + 15) & ~(int64_t)15; /* H < 2^62 here: x holds rows * H > 0 elements */
    kern__norm_bwd_blocks(rows, H, p.dweight || p.dbias, &a.rpt, &a.nblk);
    ntasks = (rows + a.rpt - 1) / a.rpt;
    {
        /* the row kernels accumulate dbias partials only next to dweight
         * partials (part 2 = both): dbias alone still gets pw scratch */
        const int want_pw = p.dweight || p.dbias;
        int64_t nfl = 2 * Hp + (want_pw ? a.nblk * Hp : 0) + (p.dbias ? a.nblk * Hp : 0);
        float *ws = (float *)kern__workspace(ctx, (size_t)nfl * sizeof(float));
        if (!ws || kern__reserve_thread_scratch(ctx, (size_t)(2 * Hp) * sizeof(float)) != KERN_OK) {
            kern__op_end(ctx);
            return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %lld bytes of scratch", op,
                             (long long)(nfl * 4));
        }
        /* weight/bias as f32 arrays padded with zeros to Hp (the vector
         * loops read w, b, pw, pb in whole vectors): the caller's f32 array
         * when H needs no padding, else converted/copied; ones/zeros when
         * absent */
        a.w = kern__norm_bwd_vec(ctx, p.weight, ws, H, Hp, 1.0f);
        a.b = kern__norm_bwd_vec(ctx, p.bias, ws + Hp, H, Hp, 0.0f);
        a.pw = want_pw ? ws + 2 * Hp : NULL;
        a.pb = p.dbias ? ws + 2 * Hp + a.nblk * Hp : NULL;
    }
    kern__norm_view_init(&a.dy, dout);
    kern__norm_view_init(&a.x, x);
    kern__norm_view_init(&a.dx, dx);
    kern__norm_view_init(&a.dr, p.dresidual);
    a.mean = p.mean ? (const float *)p.mean->data : NULL;
    a.rstd = p.rstd ? (const float *)p.rstd->data : NULL;
    a.H = H;
    a.Hp = Hp;
    a.rows = rows;
    a.eps = eps;
    a.rms = p.norm == KERN_NORM_RMS;
    a.act = (int)p.act;
    a.ctx = ctx;
    a.dweight = p.dweight;
    a.dbias = p.dbias;
    a.row = kern__norm_bwd_row__scalar;
    f = kern_ctx_features(ctx);
    (void)f;
#ifdef KERN_X86
    if ((f & KERN_CPU_AVX512F) && (f & KERN_CPU_AVX512BW) && (f & KERN_CPU_AVX512VL))
        a.row = kern__norm_bwd_row__avx512;
    else if ((f & KERN_CPU_AVX2) && (f & KERN_CPU_FMA) && (f & KERN_CPU_F16C))
        a.row = kern__norm_bwd_row__avx2;
#endif
#ifdef KERN_NEON
    if (f & KERN_CPU_NEON) a.row = kern__norm_bwd_row__neon;
#endif
    kern_parallel_for(ctx, ntasks, kern__norm_bwd_task, &a);
    if (p.dweight || p.dbias)
        kern_parallel_for(ctx, (H + KERN__NORM_RED_COLS - 1) / KERN__NORM_RED_COLS,
                          kern__norm_bwd_reduce_task, &a);
    kern__op_end(ctx);
    return KERN_OK;
}

/* ---------------------------------------------------------- elementwise */

#define KERN__NORM_EW_SEG 8192
static void kern__norm_ew_task(void *arg, int64_t task, int thread) {
    const kern__norm_ew *e = (const kern__norm_ew *)arg;
    (void)thread;
    if (e->nseg > 1) {
        int64_t r = task / e->nseg, j0 = (task % e->nseg) * e->seg;
        int64_t n = e->H - j0 < e->seg ? e->H - j0 : e->seg;
        const char *p = (const char *)kern__norm_row(&e->a, r) + j0 * (int64_t)kern_dtype_size(e->a.dt);
        const char *q = e->b.base ? (const char *)kern__norm_row(&e->b, r) +
                                        j0 * (int64_t)kern_dtype_size(e->b.dt)
                                  : NULL;
        char *o = (char *)kern__norm_row(&e->o, r) + j0 * (int64_t)kern_dtype_size(e->o.dt);
        e->seg_fn(e, p, q, o, e->bias ? e->bias + j0 : NULL, n);
    } else {
        int64_t r = task * e->rpt, r1 = r + e->rpt < e->rows ? r + e->rpt : e->rows;
        for (; r < r1; r++)
            e->seg_fn(e, kern__norm_row(&e->a, r), kern__norm_row(&e->b, r), kern__norm_row(&e->o, r),
                      e->bias, e->H);
    }
    kern__norm_fence(e->nt);
}

static kern_status kern__norm_ew_run(kern_ctx *ctx, const char *op, int ewop, const kern_tensor *a,
                                 const char *aname, const kern_tensor *b, const char *bname,
                                 const kern_tensor *bias, const kern_tensor *o, const char *oname,
                                 int act) {
    kern_status st;
    kern__norm_ew e;
    int64_t H, rows = 0;
    uint32_t f;
    if (!a || !o || (ewop != KERN__NORM_EW_GELU && !b))
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !a ? aname : !o ? oname : bname);
    if ((st = kern__norm_check_rowt(a, op, aname, NULL, NULL)) != KERN_OK) return st;
    if (b && (st = kern__norm_check_rowt(b, op, bname, a, aname)) != KERN_OK) return st;
    if ((st = kern__norm_check_rowt(o, op, oname, a, aname)) != KERN_OK) return st;
    H = a->shape[a->ndim - 1];
    if ((st = kern__norm_rows(a, op, &rows)) != KERN_OK) return st;
    if (bias && (st = kern__norm_check_vec(bias, op, "bias", H)) != KERN_OK) return st;
    if (act != (int)KERN_ACT_GELU && act != (int)KERN_ACT_GELU_TANH)
        return kern__err(KERN_ERR_ARG, "%s: act=%d (%s) must be KERN_ACT_GELU or KERN_ACT_GELU_TANH",
                         op, act, kern_act_name((kern_act)act));
    {
        const kern_tensor *outs[1], *ins[3];
        const char *on[1], *in[3];
        outs[0] = o; on[0] = oname;
        ins[0] = a; ins[1] = b; ins[2] = bias;
        in[0] = aname; in[1] = bname; in[2] = "bias";
        if ((st = kern__norm_check_alias(op, outs, on, 1, ins, in, 3)) != KERN_OK) return st;
    }
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    if (rows == 0 || H == 0) {
        kern__op_end(ctx);
        return KERN_OK;
    }
    memset(&e, 0, sizeof e);
    if (bias && bias->dtype != KERN_F32) {
        float *ws = (float *)kern__workspace(ctx, (size_t)H * sizeof(float));
        if (!ws) {
            kern__op_end(ctx);
            return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %lld bytes of workspace", op,
                             (long long)(H * 4));
        }
        e.bias = kern__norm_vec_f32(ctx, bias, ws, H);
    } else if (bias) {
        e.bias = (const float *)bias->data;
    }
    kern__norm_view_init(&e.a, a);
    kern__norm_view_init(&e.b, b);
    kern__norm_view_init(&e.o, o);
    e.H = H;
    e.rows = rows;
    e.op = ewop;
    e.tanh_form = act == (int)KERN_ACT_GELU_TANH;
    e.nt = kern__norm_bytes(o) >= KERN_NORM_NT_BYTES;
    if (H > 2 * KERN__NORM_EW_SEG) {
        e.seg = KERN__NORM_EW_SEG;
        e.nseg = (H + e.seg - 1) / e.seg;
    } else {
        e.seg = H;
        e.nseg = 1;
        e.rpt = H >= 16384 ? 1 : 16384 / H;
    }
    e.seg_fn = kern__norm_ew_seg__scalar;
    f = kern_ctx_features(ctx);
    (void)f;
#ifdef KERN_X86
    if ((f & KERN_CPU_AVX512F) && (f & KERN_CPU_AVX512BW) && (f & KERN_CPU_AVX512VL))
        e.seg_fn = kern__norm_ew_seg__avx512;
    else if ((f & KERN_CPU_AVX2) && (f & KERN_CPU_FMA) && (f & KERN_CPU_F16C))
        e.seg_fn = kern__norm_ew_seg__avx2;
#endif
#ifdef KERN_NEON
    if (f & KERN_CPU_NEON) e.seg_fn = kern__norm_ew_seg__neon;
#endif
    kern_parallel_for(ctx, e.nseg > 1 ? rows * e.nseg : (rows + e.rpt - 1) / e.rpt,
                      kern__norm_ew_task, &e);
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_gelu(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *out,
                               kern_act act) {
    return kern__norm_ew_run(ctx, "kern_gelu", KERN__NORM_EW_GELU, x, "x", NULL, "", NULL, out, "out",
                         (int)act);
}
KERN_API kern_status kern_bias_gelu(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *bias,
                                    const kern_tensor *out, kern_act act) {
    return kern__norm_ew_run(ctx, "kern_bias_gelu", KERN__NORM_EW_GELU, x, "x", NULL, "", bias, out,
                         "out", (int)act);
}
KERN_API kern_status kern_gelu_backward(kern_ctx *ctx, const kern_tensor *dout,
                                        const kern_tensor *x, const kern_tensor *dx,
                                        kern_act act) {
    return kern__norm_ew_run(ctx, "kern_gelu_backward", KERN__NORM_EW_GELU_BWD, dout, "dout", x, "x",
                         NULL, dx, "dx", (int)act);
}
KERN_API kern_status kern_add(kern_ctx *ctx, const kern_tensor *a, const kern_tensor *b,
                              const kern_tensor *out) {
    return kern__norm_ew_run(ctx, "kern_add", KERN__NORM_EW_ADD, a, "a", b, "b", NULL, out, "out",
                         (int)KERN_ACT_GELU);
}

#ifdef __cplusplus
}
#endif
KERN__IMPL_DIAG_END
#endif /* KERN_IMPLEMENTATION */
