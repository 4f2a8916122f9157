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

#include <math.h>
#include <string.h>

#include "kern_base.h"

#if defined(__GNUC__) || defined(__clang__)
#define KF__UNUSED __attribute__((unused))
#else
#define KF__UNUSED
#endif

/* ---------------------------------------------------------- scatter */
#ifdef KERN_SCATTER_H
static KF__UNUSED kern_status kf_scatter_reduce(kern_ctx *ctx, const kern_tensor *self, int dim,
                                                const kern_tensor *index, const kern_tensor *src,
                                                kern_reduce reduce, int include_self,
                                                const kern_tensor *out, const kern_tensor *arg_out) {
    return kern_scatter_reduce(ctx, self, dim, index, src, reduce, include_self, out, arg_out,
                               NULL);
}
static KF__UNUSED kern_status kf_scatter_reduce_planned(kern_ctx *ctx,
                                                        const kern_scatter_plan *plan,
                                                        const kern_tensor *self,
                                                        const kern_tensor *src, kern_reduce reduce,
                                                        int include_self, const kern_tensor *out,
                                                        const kern_tensor *arg_out) {
    return kern_scatter_reduce_planned(ctx, plan, self, src, reduce, include_self, out, arg_out,
                                       NULL);
}
#endif

/* ------------------------------------------------------------- spmm */
#ifdef KERN_SPMM_H
static KF__UNUSED kern_status kf_spmm_reduce(kern_ctx *ctx, const kern_csr *a,
                                             const kern_tensor *dense, const kern_tensor *out,
                                             kern_reduce reduce, const kern_tensor *arg_out) {
    return kern_spmm_reduce(ctx, a, dense, out, reduce, arg_out, NULL);
}
static KF__UNUSED kern_status kf_spmm_reduce_backward(kern_ctx *ctx, const kern_csr *a,
                                                      const kern_tensor *dense,
                                                      const kern_tensor *grad_out,
                                                      kern_reduce reduce,
                                                      const kern_tensor *arg_out,
                                                      const kern_tensor *grad_dense,
                                                      const kern_tensor *grad_values) {
    return kern_spmm_reduce_backward(ctx, a, dense, grad_out, reduce, arg_out, grad_dense,
                                     grad_values, NULL);
}
#endif

/* ------------------------------------------------------------- sdpa */
#ifdef KERN_SDPA_H
/* Sliding window on/off and its bounds (-1 = unbounded side). */
static KF__UNUSED void kf_sdpa_window(kern_sdpa_params *p, int on, int64_t left, int64_t right) {
    p->window_set = on;
    p->window_left = left;
    p->window_right = right;
}
static KF__UNUSED int kf_sdpa_window_on(const kern_sdpa_params *p) { return p->window_set != 0; }
/* scale: explicit = 0 leaves 0 meaning 1/sqrt(D); explicit = 1 uses
 * `scale` as given, 0 included. */
static KF__UNUSED void kf_sdpa_scale(kern_sdpa_params *p, int explicit_scale, float scale) {
    p->scale = scale;
    p->scale_set = explicit_scale;
}
/* The scale the op uses for head dim D. */
static KF__UNUSED double kf_sdpa_scale_used(const kern_sdpa_params *p, int64_t D) {
    return p->scale_set || p->scale != 0 ? (double)p->scale : 1.0 / sqrt((double)D);
}
#endif

/* ------------------------------------------------------------- norm */
#ifdef KERN_NORM_H
/* eps: explicit = 0 leaves the default (1e-5); explicit = 1 uses `eps`
 * as given, 0 included. */
static KF__UNUSED void kf_norm_eps(kern_norm_params *p, int explicit_eps, float eps) {
    p->eps = explicit_eps ? eps : 0.0f;
    p->eps_set = explicit_eps;
}
static KF__UNUSED void kf_norm_bwd_eps(kern_norm_backward_params *p, int explicit_eps, float eps) {
    p->eps = explicit_eps ? eps : 0.0f;
    p->eps_set = explicit_eps;
}
/* The eps the forward uses. */
static KF__UNUSED float kf_norm_eps_used(const kern_norm_params *p) {
    return p->eps_set || p->eps != 0.0f ? p->eps : 1e-5f;
}
/* approx: KERN_ACT_GELU or KERN_ACT_GELU_TANH; any other value is passed
 * on as one the op must reject. */
static KF__UNUSED kern_status kf_gelu(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *out,
                                      kern_act approx) {
    return kern_gelu(ctx, x, out, approx);
}
static KF__UNUSED kern_status kf_bias_gelu(kern_ctx *ctx, const kern_tensor *x,
                                           const kern_tensor *bias, const kern_tensor *out,
                                           kern_act approx) {
    return kern_bias_gelu(ctx, x, bias, out, approx);
}
static KF__UNUSED kern_status kf_gelu_backward(kern_ctx *ctx, const kern_tensor *dout,
                                               const kern_tensor *x, const kern_tensor *dx,
                                               kern_act approx) {
    return kern_gelu_backward(ctx, dout, x, dx, approx);
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
    kern_qweight_info info;
    memset(&info, 0, sizeof info);
    kern_qweight_get_info(h->qw, &info);
    *n = info.n;
    *k = info.k;
}
static KF__UNUSED void kf_qweight_free(kern_ctx *ctx, kf_qw *h) {
    kern_qweight_free(ctx, h->qw);
    h->qw = NULL;
}
/* act: a kern_act (values outside the enum are passed on as is). */
static KF__UNUSED kern_status kf_qlinear(kern_ctx *ctx, const kern_tensor *x, const kf_qw *h,
                                         const kern_tensor *bias, const kern_tensor *y, kern_act act,
                                         const kern_tensor *residual) {
    kern_qlinear_params p;
    memset(&p, 0, sizeof p);
    p.epilogue.bias = bias;
    p.epilogue.act = act;
    p.epilogue.residual = residual;
    return kern_qlinear(ctx, x, h->qw, y, &p);
}
#endif

/* --------------------------------------------------------- sparse24 */
#ifdef KERN_SPARSE24_H
typedef struct kf_s24 {
    kern_sparse24 *sw;
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
    return kern_sparse24_compress(ctx, w, &h->sw, &p);
}
static KF__UNUSED kern_status kf_s24_import(kern_ctx *ctx, const kern_tensor *values,
                                            const kern_tensor *meta, const kf_s24_opts *o,
                                            kf_s24 *h) {
    kern_sparse24_params p = kf__s24_params(o);
    return kern_sparse24_import(ctx, values, meta, &h->sw, &p);
}
static KF__UNUSED kern_status kf_s24_export(kern_ctx *ctx, const kf_s24 *h,
                                            const kern_tensor *values, const kern_tensor *meta,
                                            const kf_s24_opts *o) {
    kern_sparse24_params p = kf__s24_params(o);
    return kern_sparse24_export(ctx, h->sw, values, meta, &p);
}
static KF__UNUSED kern_status kf_s24_decompress(kern_ctx *ctx, const kf_s24 *h,
                                                const kern_tensor *out) {
    return kern_sparse24_decompress(ctx, h->sw, out);
}
static KF__UNUSED void kf_s24_info(const kf_s24 *h, int64_t *n, int64_t *k, kern_dtype *dt) {
    kern_sparse24_info info;
    memset(&info, 0, sizeof info);
    kern_sparse24_get_info(h->sw, &info);
    *n = info.n;
    *k = info.k;
    *dt = info.dtype;
}
static KF__UNUSED void kf_s24_free(kern_ctx *ctx, kf_s24 *h) {
    kern_sparse24_free(ctx, h->sw);
    h->sw = NULL;
}
static KF__UNUSED kern_status kf_s24_linear(kern_ctx *ctx, const kern_tensor *x, const kf_s24 *h,
                                            const kern_tensor *bias, const kern_tensor *y,
                                            kern_act act, const kern_tensor *residual) {
    kern_sparse24_linear_params p;
    memset(&p, 0, sizeof p);
    p.epilogue.bias = bias;
    p.epilogue.act = act;
    p.epilogue.residual = residual;
    return kern_sparse24_linear(ctx, x, h->sw, y, &p);
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
    p.epilogue.bias = o->bias;
    p.epilogue.act = o->act;
    p.epilogue.residual = o->residual;
    p.beta = o->beta;
    p.packed_b = packed;
    return kern_gemm(ctx, a, packed ? NULL : b, c, &p);
}
static KF__UNUSED kern_status kf_gemm_pack_b(kern_ctx *ctx, const kern_tensor *b, int trans_b,
                                             kern_gemm_packed_b **out) {
    kern_gemm_pack_params p;
    memset(&p, 0, sizeof p);
    p.trans_b = trans_b;
    return kern_gemm_pack_b(ctx, b, out, &p);
}
#endif

#endif /* KERN_KF_ADAPT_H */
