/* kf_adapt.h — the one place where the fuzzers (tests/fuzz/) and the
 * fault-injection test (tests/test_fault.c) meet the public signatures
 * that are being reworked (docs/api.md): one section per family, each
 * compiled only when that family's header was included. When a signature
 * or a params field changes, edit the section here; the harnesses call
 * only these wrappers for the changing parts.
 *
 * Handles are wrapped in small structs (kf_qw, kf_s24) so that "the
 * output must be untouched on error" names the same bytes whether the
 * library fills a caller struct or returns a pointer. */
#ifndef KERN_KF_ADAPT_H
#define KERN_KF_ADAPT_H

#include "kern_base.h"

#if defined(__GNUC__) || defined(__clang__)
#define KF__UNUSED __attribute__((unused))
#else
#define KF__UNUSED
#endif

/* ------------------------------------------------------------- sdpa */
#ifdef KERN_SDPA_H
/* Sliding window on/off and its bounds (-1 = unbounded side). */
static KF__UNUSED void kf_sdpa_window(kern_sdpa_params *p, int on, int64_t left, int64_t right) {
    p->has_window = on;
    p->window_left = left;
    p->window_right = right;
}
#endif

/* ------------------------------------------------------------- norm */
#ifdef KERN_NORM_H
/* eps: explicit = 0 leaves the default (1e-5); explicit = 1 uses `eps`
 * as given, 0 included. */
static KF__UNUSED void kf_norm_eps(kern_norm_params *p, int explicit_eps, float eps) {
    p->eps = explicit_eps ? eps : 0.0f;
    p->eps_zero = explicit_eps && eps == 0.0f;
}
static KF__UNUSED void kf_norm_bwd_eps(kern_norm_backward_params *p, int explicit_eps, float eps) {
    p->eps = explicit_eps ? eps : 0.0f;
    p->eps_zero = explicit_eps && eps == 0.0f;
}
/* approx: KERN_ACT_GELU or KERN_ACT_GELU_TANH; anything else is passed on
 * as a value the op must reject. */
static KF__UNUSED kern_gelu_approx kf__gelu_approx(kern_act a) {
    return a == KERN_ACT_GELU ? KERN_GELU_ERF
           : a == KERN_ACT_GELU_TANH ? KERN_GELU_TANH : (kern_gelu_approx)(a + 7);
}
static KF__UNUSED kern_status kf_gelu(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *out,
                                      kern_act approx) {
    return kern_gelu(ctx, x, out, kf__gelu_approx(approx));
}
static KF__UNUSED kern_status kf_bias_gelu(kern_ctx *ctx, const kern_tensor *x,
                                           const kern_tensor *bias, const kern_tensor *out,
                                           kern_act approx) {
    return kern_bias_gelu(ctx, x, bias, out, kf__gelu_approx(approx));
}
static KF__UNUSED kern_status kf_gelu_backward(kern_ctx *ctx, const kern_tensor *dout,
                                               const kern_tensor *x, const kern_tensor *dx,
                                               kern_act approx) {
    return kern_gelu_backward(ctx, dout, x, dx, kf__gelu_approx(approx));
}
#endif

/* ------------------------------------------------------------ qgemm */
#ifdef KERN_QGEMM_H
typedef struct kf_qw {
    kern_qweight *qw;
} kf_qw;
static KF__UNUSED kern_status kf_qweight_pack(kern_ctx *ctx, const kern_tensor *w, kf_qw *h) {
    return kern_qweight_pack(ctx, w, &h->qw, NULL);
}
static KF__UNUSED kern_status kf_qweight_pack_int8(kern_ctx *ctx, const kern_tensor *wq,
                                                   const kern_tensor *scales, kf_qw *h) {
    return kern_qweight_pack_int8(ctx, wq, scales, &h->qw, NULL);
}
static KF__UNUSED kern_status kf_qweight_deserialize(kern_ctx *ctx, const void *buf, size_t size,
                                                     kf_qw *h) {
    return kern_qweight_deserialize(ctx, buf, size, &h->qw);
}
static KF__UNUSED size_t kf_qweight_serialized_size(const kf_qw *h) {
    return kern_qweight_serialized_size(h->qw);
}
static KF__UNUSED kern_status kf_qweight_serialize(const kf_qw *h, void *buf, size_t size) {
    return kern_qweight_serialize(h->qw, buf, size);
}
static KF__UNUSED kern_status kf_qweight_unpack(const kf_qw *h, const kern_tensor *wq,
                                                const kern_tensor *scales) {
    return kern_qweight_unpack(h->qw, wq, scales);
}
static KF__UNUSED void kf_qweight_shape(const kf_qw *h, int64_t *n, int64_t *k) {
    *n = h->qw->n;
    *k = h->qw->k;
}
static KF__UNUSED void kf_qweight_free(kern_ctx *ctx, kf_qw *h) {
    kern_qweight_free(ctx, h->qw);
    h->qw = NULL;
}
/* act: a kern_act; NONE, GELU and GELU_TANH have the same values in
 * kern_qlinear_act and kern_sparse24_act, the others are passed on as is. */
static KF__UNUSED kern_status kf_qlinear(kern_ctx *ctx, const kern_tensor *x, const kf_qw *h,
                                         const kern_tensor *bias, const kern_tensor *y, kern_act act,
                                         const kern_tensor *residual) {
    kern_qlinear_params p;
    memset(&p, 0, sizeof p);
    p.act = (kern_qlinear_act)act;
    p.residual = residual;
    return kern_qlinear(ctx, x, h->qw, bias, y, &p);
}
#endif

/* --------------------------------------------------------- sparse24 */
#ifdef KERN_SPARSE24_H
typedef struct kf_s24 {
    kern_sparse24 sw;
} kf_s24;
typedef struct kf_s24_opts {
    int pad_k;
    kern_dtype quantize;
    const kern_tensor *scales;
    int rowmajor; /* 0: CUTLASS reordered metadata */
    int64_t k;    /* import: dense K, 0 = 2 * values.shape[1] */
} kf_s24_opts;
static KF__UNUSED kern_sparse24_params kf__s24_params(const kf_s24_opts *o) {
    kern_sparse24_params p;
    memset(&p, 0, sizeof p);
    p.pad_k = o->pad_k;
    p.quantize = o->quantize;
    p.scales = o->scales;
    p.meta_layout = o->rowmajor ? KERN_SPARSE24_META_ROWMAJOR : KERN_SPARSE24_META_CUTLASS;
    p.k = o->k;
    return p;
}
static KF__UNUSED kern_status kf_s24_prune(kern_ctx *ctx, const kern_tensor *w,
                                           const kern_tensor *out, const kf_s24_opts *o) {
    kern_sparse24_params p = kf__s24_params(o);
    return kern_sparse24_prune(ctx, w, out, &p);
}
static KF__UNUSED kern_status kf_s24_compress(kern_ctx *ctx, const kern_tensor *w,
                                              const kf_s24_opts *o, kf_s24 *h) {
    kern_sparse24_params p = kf__s24_params(o);
    return kern_sparse24_compress(ctx, w, &p, &h->sw);
}
static KF__UNUSED kern_status kf_s24_import(kern_ctx *ctx, const kern_tensor *values,
                                            const kern_tensor *meta, const kf_s24_opts *o,
                                            kf_s24 *h) {
    kern_sparse24_params p = kf__s24_params(o);
    return kern_sparse24_import(ctx, values, meta, &p, &h->sw);
}
static KF__UNUSED kern_status kf_s24_export(kern_ctx *ctx, const kf_s24 *h,
                                            const kern_tensor *values, const kern_tensor *meta,
                                            const kf_s24_opts *o) {
    kern_sparse24_params p = kf__s24_params(o);
    return kern_sparse24_export(ctx, &h->sw, values, meta, &p);
}
static KF__UNUSED kern_status kf_s24_decompress(kern_ctx *ctx, const kf_s24 *h,
                                                const kern_tensor *out) {
    return kern_sparse24_decompress(ctx, &h->sw, out);
}
static KF__UNUSED void kf_s24_info(const kf_s24 *h, int64_t *n, int64_t *k, kern_dtype *dt) {
    *n = h->sw.n;
    *k = h->sw.k;
    *dt = h->sw.dtype;
}
static KF__UNUSED void kf_s24_free(kern_ctx *ctx, kf_s24 *h) { kern_sparse24_free(ctx, &h->sw); }
static KF__UNUSED kern_status kf_s24_linear(kern_ctx *ctx, const kern_tensor *x, const kf_s24 *h,
                                            const kern_tensor *bias, const kern_tensor *y,
                                            kern_act act, const kern_tensor *residual) {
    kern_sparse24_linear_params p;
    memset(&p, 0, sizeof p);
    p.act = (kern_sparse24_act)act;
    p.residual = residual;
    return kern_sparse24_linear(ctx, x, &h->sw, bias, y, &p);
}
#endif

/* ------------------------------------------------------------- gemm */
#ifdef KERN_GEMM_H
typedef struct kf_gemm_opts {
    int trans_a, trans_b;
    const kern_tensor *bias;
    kern_act act;
    const kern_tensor *residual;
    float beta;
} kf_gemm_opts;
static KF__UNUSED kern_status kf_gemm(kern_ctx *ctx, const kern_tensor *a, const kern_tensor *b,
                                      const kern_tensor *c, const kf_gemm_opts *o,
                                      const kern_gemm_packed_b *packed) {
    kern_gemm_params p;
    memset(&p, 0, sizeof p);
    p.trans_a = o->trans_a;
    p.trans_b = o->trans_b;
    p.bias = o->bias;
    switch (o->act) {
    case KERN_ACT_NONE: p.act = KERN_GEMM_ACT_NONE; break;
    case KERN_ACT_GELU: p.act = KERN_GEMM_ACT_GELU_ERF; break;
    case KERN_ACT_GELU_TANH: p.act = KERN_GEMM_ACT_GELU_TANH; break;
    case KERN_ACT_RELU: p.act = KERN_GEMM_ACT_RELU; break;
    case KERN_ACT_SILU: p.act = KERN_GEMM_ACT_SILU; break;
    default: p.act = (kern_gemm_act)o->act; break;
    }
    p.residual = o->residual;
    p.beta = o->beta;
    p.packed_b = packed;
    return kern_gemm(ctx, a, packed ? NULL : b, c, &p);
}
static KF__UNUSED kern_status kf_gemm_pack_b(kern_ctx *ctx, const kern_tensor *b, int trans_b,
                                             kern_gemm_packed_b **out) {
    return kern_gemm_pack_b(ctx, b, trans_b, out);
}
#endif

#endif /* KERN_KF_ADAPT_H */
