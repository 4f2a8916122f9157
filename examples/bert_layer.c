/* bert_layer.c — one BERT encoder layer (post-LayerNorm), three ways to run
 * its feed-forward block: f32 GEMM, int8 dynamic quantization (kern_qlinear)
 * and 2:4 sparse weights (kern_sparse24_linear).
 *
 *   qkv  = x Wqkv^T + bqkv              [T, 3*Hd] = [B, L, 3, H, D]
 *   ctx  = sdpa(q, k, v)                 strided views into qkv, out [B, L, H, D]
 *   h1   = LayerNorm(x + ctx Wo^T + bo)  residual add fused into kern_norm
 *   f    = GELU(h1 W1^T + b1)            GELU fused into the GEMM epilogue
 *   out  = LayerNorm(h1 + f W2^T + b2)
 *
 * The FFN weights are pruned to 2:4 first, so the f32 and 2:4 results agree
 * to rounding and the int8 result to quantization error. */
#include <kern/kern.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 2, L = 16, H = 4, D = 16, HD = H * D, FF = 4 * HD, T = B * L };

#define CHECK(call)                                                       \
    do {                                                                  \
        if ((call) != KERN_OK) {                                          \
            fprintf(stderr, "%s: %s\n", #call, kern_last_error());        \
            exit(1);                                                      \
        }                                                                 \
    } while (0)

static float *filled(int64_t n, float amp, unsigned seed) {
    float *p = (float *)malloc((size_t)n * sizeof *p);
    int64_t i;
    if (!p) exit(1);
    for (i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = amp * ((float)(seed >> 8) / 8388608.0f - 1.0f);
    }
    return p;
}

/* y = act(x W^T + b) with W [n, k] (torch Linear layout) */
static void linear(kern_ctx *ctx, const float *x, int64_t t, int64_t k, const float *w,
                   const float *b, int64_t n, kern_act act, float *y) {
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, t, k), tw = kern_tensor_2d(w, KERN_F32, n, k);
    kern_tensor tb = kern_tensor_1d(b, KERN_F32, n), ty = kern_tensor_2d(y, KERN_F32, t, n);
    kern_gemm_params p = {0};
    p.trans_b = 1;
    p.epilogue.bias = &tb;
    p.epilogue.act = act;
    CHECK(kern_gemm(ctx, &tx, &tw, &ty, &p));
}

/* y = LayerNorm(x + r) * g + beta over rows of HD */
static void add_layernorm(kern_ctx *ctx, const float *x, const float *r, const float *g,
                          const float *beta, float *y) {
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, T, HD), tr = kern_tensor_2d(r, KERN_F32, T, HD);
    kern_tensor ty = kern_tensor_2d(y, KERN_F32, T, HD);
    kern_tensor tg = kern_tensor_1d(g, KERN_F32, HD), tb = kern_tensor_1d(beta, KERN_F32, HD);
    kern_norm_params p = {0}; /* LayerNorm, eps 1e-5; C++: kern_norm_params p{}; */
    p.residual = &tr;
    p.weight = &tg;
    p.bias = &tb;
    p.eps = 1e-12f; /* BERT's */
    CHECK(kern_norm(ctx, &tx, &ty, &p));
}

/* [B, H, L, D] view of q, k or v inside qkv [B, L, 3, H, D] */
static kern_tensor qkv_view(const float *qkv, int which) {
    const int64_t shape[4] = {B, H, L, D};
    const int64_t stride[4] = {L * 3 * HD, D, 3 * HD, 1};
    kern_tensor t;
    CHECK(kern_tensor_init_strided(&t, qkv + which * HD, KERN_F32, 4, shape, stride));
    return t;
}

int main(void) {
    kern_ctx *ctx = NULL;
    kern_ctx_params cp = {0};
    float *x = filled(T * HD, 1.0f, 1);
    float *wqkv = filled(3 * HD * HD, 0.15f, 2), *bqkv = filled(3 * HD, 0.1f, 3);
    float *wo = filled(HD * HD, 0.15f, 4), *bo = filled(HD, 0.1f, 5);
    float *w1 = filled(FF * HD, 0.15f, 6), *b1 = filled(FF, 0.1f, 7);
    float *w2 = filled(HD * FF, 0.08f, 8), *b2 = filled(HD, 0.1f, 9);
    float *g1 = filled(HD, 0.1f, 10), *be1 = filled(HD, 0.1f, 11);
    float *g2 = filled(HD, 0.1f, 12), *be2 = filled(HD, 0.1f, 13);
    float *qkv = filled(T * 3 * HD, 0, 0), *att = filled(T * HD, 0, 0);
    float *proj = filled(T * HD, 0, 0), *h1 = filled(T * HD, 0, 0);
    float *f = filled(T * FF, 0, 0), *f2 = filled(T * HD, 0, 0);
    float *out[3];
    const char *name[3] = {"f32", "int8", "2:4"};
    kern_tensor q, k, v, o, tw1, tw2;
    kern_sdpa_params sp = {0};
    kern_qweight *qw1 = NULL, *qw2 = NULL;
    kern_sparse24 *sw1 = NULL, *sw2 = NULL;
    double diff[3] = {0, 0, 0};
    int i, variant, ok;

    for (i = 0; i < HD; i++) g1[i] += 1.0f, g2[i] += 1.0f;
    cp.n_threads = 2;
    CHECK(kern_ctx_create(&cp, &ctx));

    /* attention block */
    linear(ctx, x, T, HD, wqkv, bqkv, 3 * HD, KERN_ACT_NONE, qkv);
    q = qkv_view(qkv, 0), k = qkv_view(qkv, 1), v = qkv_view(qkv, 2);
    {
        const int64_t shape[4] = {B, H, L, D}, stride[4] = {L * HD, D, HD, 1};
        CHECK(kern_tensor_init_strided(&o, att, KERN_F32, 4, shape, stride)); /* [B, L, H, D] */
    }
    CHECK(kern_sdpa(ctx, &q, &k, &v, &o, &sp)); /* bidirectional, scale 1/sqrt(D) */
    linear(ctx, att, T, HD, wo, bo, HD, KERN_ACT_NONE, proj);
    add_layernorm(ctx, proj, x, g1, be1, h1);

    /* FFN weights: prune to 2:4 in place (2 of every 4 along K kept) */
    tw1 = kern_tensor_2d(w1, KERN_F32, FF, HD);
    tw2 = kern_tensor_2d(w2, KERN_F32, HD, FF);
    CHECK(kern_sparse24_prune(ctx, &tw1, &tw1, NULL));
    CHECK(kern_sparse24_prune(ctx, &tw2, &tw2, NULL));
    /* ... and prepare them once per format */
    CHECK(kern_qweight_pack(ctx, &tw1, &qw1, NULL)); /* int8, per-channel scales */
    CHECK(kern_qweight_pack(ctx, &tw2, &qw2, NULL));
    CHECK(kern_sparse24_compress(ctx, &tw1, &sw1, NULL));
    CHECK(kern_sparse24_compress(ctx, &tw2, &sw2, NULL));

    for (variant = 0; variant < 3; variant++) {
        kern_tensor th = kern_tensor_2d(h1, KERN_F32, T, HD), tf = kern_tensor_2d(f, KERN_F32, T, FF);
        kern_tensor tf2 = kern_tensor_2d(f2, KERN_F32, T, HD);
        kern_tensor tb1 = kern_tensor_1d(b1, KERN_F32, FF), tb2 = kern_tensor_1d(b2, KERN_F32, HD);
        out[variant] = filled(T * HD, 0, 0);
        if (variant == 0) {
            linear(ctx, h1, T, HD, w1, b1, FF, KERN_ACT_GELU, f);
            linear(ctx, f, T, FF, w2, b2, HD, KERN_ACT_NONE, f2);
        } else if (variant == 1) {
            kern_qlinear_params qp = {0}; /* activations quantized per token */
            qp.epilogue.bias = &tb1;
            qp.epilogue.act = KERN_ACT_GELU;
            CHECK(kern_qlinear(ctx, &th, qw1, &tf, &qp));
            qp.epilogue.bias = &tb2;
            qp.epilogue.act = KERN_ACT_NONE;
            CHECK(kern_qlinear(ctx, &tf, qw2, &tf2, &qp));
        } else {
            kern_sparse24_linear_params lp = {0};
            lp.epilogue.bias = &tb1;
            lp.epilogue.act = KERN_ACT_GELU;
            CHECK(kern_sparse24_linear(ctx, &th, sw1, &tf, &lp));
            lp.epilogue.bias = &tb2;
            lp.epilogue.act = KERN_ACT_NONE;
            CHECK(kern_sparse24_linear(ctx, &tf, sw2, &tf2, &lp));
        }
        add_layernorm(ctx, f2, h1, g2, be2, out[variant]);
        for (i = 0; i < T * HD; i++) {
            double e = fabs((double)out[variant][i] - out[0][i]);
            if (e > diff[variant]) diff[variant] = e;
        }
        printf("bert_layer: FFN %-4s  out[0][0..2] = %+.4f %+.4f %+.4f  max |out - f32| = %.2g\n",
               name[variant], out[variant][0], out[variant][1], out[variant][2], diff[variant]);
    }
    /* outputs are LayerNorm'ed (unit scale): int8 quantization moves them by
     * a few hundredths, 2:4 only by rounding */
    ok = isfinite(out[0][0]) && diff[1] < 0.1 && diff[2] < 1e-4;
    printf("[bert_layer] %d ok, %d failed\n", ok, !ok);

    kern_qweight_free(ctx, qw1), kern_qweight_free(ctx, qw2);
    kern_sparse24_free(ctx, sw1), kern_sparse24_free(ctx, sw2);
    kern_ctx_destroy(ctx);
    free(x), free(wqkv), free(bqkv), free(wo), free(bo), free(w1), free(b1), free(w2), free(b2);
    free(g1), free(be1), free(g2), free(be2), free(qkv), free(att), free(proj), free(h1);
    free(f), free(f2), free(out[0]), free(out[1]), free(out[2]);
    return ok ? 0 : 1;
}
