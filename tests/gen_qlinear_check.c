/* gen_qlinear_check.c -- int8 dynamic linear instances written by
 * `kern_gen.py qlinear` (mk/gen.mk generates qlinear_a .. qlinear_d:
 * tails in M, N and K, a BERT-sized one, one row, and a blocking other
 * than the default). The instance sums the int8 products exactly and
 * dequantizes and runs the epilogue as kern_qlinear does, so it must equal
 * kern_qlinear bit for bit: on every ISA level this CPU runs, at 1, 2 and
 * 3 threads, with and without bias, for an f32 weight (NAME_pack) and for
 * int8 codes over the whole s8 range with their scales (NAME_pack_int8),
 * for x rows with NaN, +-Inf and all zeros. A double reference of the
 * unquantized product bounds the quantization error. */
#include "kern.h"
#include "kt.h"
#define QLINEAR_A_IMPLEMENTATION
#include "qlinear_a.h"
#define QLINEAR_B_IMPLEMENTATION
#include "qlinear_b.h"
#define QLINEAR_C_IMPLEMENTATION
#include "qlinear_c.h"
#define QLINEAR_D_IMPLEMENTATION
#include "qlinear_d.h"

typedef kern_status (*gen_pack_fn)(kern_ctx *, const float *, void *);
typedef void (*gen_pack8_fn)(const int8_t *, const float *, void *);
typedef kern_status (*gen_run_fn)(kern_ctx *, const float *, const void *, const float *, float *,
                                  void *);

typedef struct gen_ql {
    const char *what;
    int64_t M, N, K;
    size_t packed_bytes, work_bytes;
    gen_pack_fn pack;
    gen_pack8_fn pack8;
    gen_run_fn run;
} gen_ql;

/* kern_qlinear on the same operands: y = x . qw^T (+ bias) */
static void gen_ql_kern(kern_ctx *ctx, const gen_ql *c, const float *x, const kern_qweight *qw,
                        const float *bias, float *y) {
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, c->M, c->K);
    kern_tensor ty = kern_tensor_2d(y, KERN_F32, c->M, c->N);
    kern_tensor tb = kern_tensor_1d(bias, KERN_F32, c->N);
    kern_qlinear_params p;
    memset(&p, 0, sizeof p);
    if (bias) p.epilogue.bias = &tb;
    KT_OK(kern_qlinear(ctx, &tx, qw, &ty, &p));
}

/* the instance against kern_qlinear on every ISA and thread count; the
 * kern_qweight is packed for each context's path from w (f32) or from
 * codes and scales */
static void gen_ql_compare(const gen_ql *c, const char *form, const float *x, const void *pk,
                           const float *w, const int8_t *codes, const float *sc,
                           const float *bias) {
    size_t yb = (size_t)(c->M * c->N) * 4;
    float *y0 = (float *)kt_alloc(yb, "y0"), *y1 = (float *)kt_alloc(yb, "y1");
    void *work = kt_alloc(c->work_bytes, "work");
    int threads;
    for (threads = 1; threads <= 3; threads++) {
        KT_FOR_EACH_ISA(isa, ctx, threads) {
            int64_t j, bad = -1;
            kern_qweight *qw = NULL;
            if (w) {
                kern_tensor tw = kern_tensor_2d(w, KERN_F32, c->N, c->K);
                KT_OK(kern_qweight_pack(ctx, &tw, &qw, NULL));
            } else {
                kern_tensor tq = kern_tensor_2d(codes, KERN_I8, c->N, c->K);
                kern_tensor ts = kern_tensor_1d(sc, KERN_F32, c->N);
                KT_OK(kern_qweight_pack_int8(ctx, &tq, &ts, &qw, NULL));
            }
            memset(y0, 0x5A, yb);
            memset(y1, 0xA5, yb);
            memset(work, 0xFF, c->work_bytes);
            gen_ql_kern(ctx, c, x, qw, bias, y0);
            KT_OK(c->run(ctx, x, pk, bias, y1, work));
            for (j = 0; j < c->M * c->N && bad < 0; j++)
                if (memcmp(&y0[j], &y1[j], 4)) bad = j;
            KT_CHECK(bad < 0, "%s %s %s threads=%d bias=%d: y[%lld] = %.9g, kern_qlinear %.9g",
                     c->what, form, kern_isa_name(isa), threads, bias != NULL, (long long)bad,
                     bad < 0 ? 0.0 : y1[bad], bad < 0 ? 0.0 : y0[bad]);
            kern_qweight_free(ctx, qw);
        }
    }
    kt_free(y0);
    kt_free(y1);
    kt_free(work);
}

static void gen_ql_case(const gen_ql *c) {
    kt_rng r = kt_rng_make((uint64_t)(c->M * 1000003 + c->N * 1009 + c->K));
    int64_t M = c->M, N = c->N, K = c->K, i, j, k;
    float *x = (float *)kt_alloc((size_t)(M * K) * 4, "x");
    float *w = (float *)kt_alloc((size_t)(N * K) * 4, "w");
    float *bias = (float *)kt_alloc((size_t)N * 4, "bias");
    float *sc = (float *)kt_alloc((size_t)N * 4, "scales");
    int8_t *codes = (int8_t *)kt_alloc((size_t)(N * K), "codes");
    void *pk = kt_alloc(c->packed_bytes, "packed");
    float *y = (float *)kt_alloc((size_t)(M * N) * 4, "y");
    void *work = kt_alloc(c->work_bytes, "work");
    kern_ctx *sctx = kt_ctx(1, KERN_ISA_SCALAR);
    kt_fill_normal(&r, x, KERN_F32, M * K, 1.0);
    kt_fill_normal(&r, w, KERN_F32, N * K, 1.0);
    kt_fill_normal(&r, bias, KERN_F32, N, 1.0);
    if (M >= 3) { /* a row of zeros; NaN and +-Inf in the last row */
        for (k = 0; k < K; k++) x[1 * K + k] = 0.0f;
        x[(M - 1) * K + 0] = NAN;
        x[(M - 1) * K + K / 2] = INFINITY;
        x[(M - 1) * K + K - 1] = -INFINITY;
    }
    /* f32 weight: quantized as kern_qweight_pack does */
    KT_OK(c->pack(sctx, w, pk));
    gen_ql_compare(c, "f32-weight", x, pk, w, NULL, NULL, NULL);
    gen_ql_compare(c, "f32-weight", x, pk, w, NULL, NULL, bias);
    /* the unquantized double reference (rows without non-finite values):
     * int8 on both sides leaves at most about 2 half-steps of each |x||w| */
    KT_OK(c->run(sctx, x, pk, bias, y, work));
    for (i = 0; i < M; i++) {
        int finite = 1;
        for (k = 0; k < K; k++) finite &= isfinite(x[i * K + k]) != 0;
        if (!finite) continue;
        for (j = 0; j < N; j++) {
            double ref = bias[j], xa = 0, wa = 0;
            for (k = 0; k < K; k++) {
                ref += (double)x[i * K + k] * w[j * K + k];
                xa = fmax(xa, fabs((double)x[i * K + k]));
                wa = fmax(wa, fabs((double)w[j * K + k]));
            }
            if (!(fabs(y[i * N + j] - ref) <= (double)K * xa * wa / 127.0 + 1e-5)) {
                KT_CHECK(0, "%s: y[%lld,%lld] = %.9g, unquantized reference %.9g", c->what,
                         (long long)i, (long long)j, y[i * N + j], ref);
                i = M;
                break;
            }
        }
    }
    /* int8 codes over the whole s8 range, with their scales */
    for (k = 0; k < N * K; k++) codes[k] = (int8_t)kt_randint(&r, -128, 128);
    codes[0] = -128;
    kt_fill_uniform(&r, sc, KERN_F32, N, 1e-3, 2e-2);
    c->pack8(codes, sc, pk);
    gen_ql_compare(c, "int8-weight", x, pk, NULL, codes, sc, bias);
    KT_ERROR(c->run(sctx, NULL, pk, NULL, y, work), KERN_ERR_ARG, "NULL");
    KT_ERROR(c->run(sctx, x, pk, NULL, y, NULL), KERN_ERR_ARG, "NULL");
    KT_ERROR(c->pack(sctx, NULL, pk), KERN_ERR_ARG, "NULL");
    w[3] = NAN; /* kern_qweight_pack refuses it, and so does the instance */
    memset(pk, 0x3C, c->packed_bytes);
    KT_ERROR(c->pack(sctx, w, pk), KERN_ERR_ARG, "");
    kt_free(x);
    kt_free(w);
    kt_free(bias);
    kt_free(sc);
    kt_free(codes);
    kt_free(pk);
    kt_free(y);
    kt_free(work);
}

#define GEN_QL(n, N_)                                                                      \
    {#n, N_##_M, N_##_N, N_##_K, N_##_PACKED_BYTES, N_##_WORK_BYTES, n##_pack, n##_pack_int8, \
     n##_run}

KT_TEST(gen_qlinear_instances) {
    static const gen_ql cases[] = {GEN_QL(qlinear_a, QLINEAR_A), GEN_QL(qlinear_b, QLINEAR_B),
                                   GEN_QL(qlinear_c, QLINEAR_C), GEN_QL(qlinear_d, QLINEAR_D)};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) gen_ql_case(&cases[i]);
}

KT_MAIN()
