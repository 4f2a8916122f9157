/* gen_sdpa_check.c -- attention instances written by `kern_gen.py sdpa`
 * (mk/gen.mk: sdpa_a decode with grouped heads, sdpa_b causal with 3
 * queries; sdpa_bf_a, sdpa_bf_b their bf16 twins): against a double
 * reference, the AVX2 code and its scalar twin bit for bit, 2 threads bit
 * for bit with one. */
#include "kern.h"
#include "kt.h"
#define SDPA_A_IMPLEMENTATION
#include "sdpa_a.h"
#define SDPA_B_IMPLEMENTATION
#include "sdpa_b.h"
#define SDPA_BF_A_IMPLEMENTATION
#include "sdpa_bf_a.h"
#define SDPA_BF_B_IMPLEMENTATION
#include "sdpa_bf_b.h"

typedef kern_status (*gen_sdpa_fn)(kern_ctx *, const float *, const float *, const float *, float *);

static void gen_sdpa_case(const char *what, int64_t HQ, int64_t HKV, int64_t LQ, int64_t LK, int64_t D,
                          int causal, gen_sdpa_fn run) {
    kt_rng r = kt_rng_make((uint64_t)(HQ * 7 + LK * 131 + D));
    const int64_t nq = HQ * LQ * D, nk = HKV * LK * D;
    float *q = (float *)kt_alloc((size_t)nq * 4, "q"), *k = (float *)kt_alloc((size_t)nk * 4, "k");
    float *v = (float *)kt_alloc((size_t)nk * 4, "v");
    float *y0 = (float *)kt_alloc((size_t)nq * 4, "y0"), *y1 = (float *)kt_alloc((size_t)nq * 4, "y1");
    double *s = (double *)kt_alloc((size_t)LK * 8, "s");
    int64_t h, i, j, d, bad = -1;
    kt_fill_normal(&r, q, KERN_F32, nq, 1.0);
    kt_fill_normal(&r, k, KERN_F32, nk, 1.0);
    kt_fill_normal(&r, v, KERN_F32, nk, 1.0);
    KT_OK(run(kt_ctx(1, KERN_ISA_SCALAR), q, k, v, y0));
    KT_OK(run(kt_ctx(1, KERN_ISA_AUTO), q, k, v, y1));
    KT_CHECK(memcmp(y0, y1, (size_t)nq * 4) == 0, "%s: scalar and best ISA differ", what);
    memset(y1, 0xA5, (size_t)nq * 4);
    KT_OK(run(kt_ctx(2, KERN_ISA_SCALAR), q, k, v, y1));
    KT_CHECK(memcmp(y0, y1, (size_t)nq * 4) == 0, "%s: 2 threads differ from one", what);
    for (h = 0; h < HQ && bad < 0; h++)
        for (i = 0; i < LQ && bad < 0; i++) {
            const float *qi = q + (h * LQ + i) * D;
            const int64_t g = h / (HQ / HKV), last = causal ? LK - LQ + i : LK - 1;
            double mx = -1e300, sum = 0;
            for (j = 0; j <= last; j++) {
                double a = 0;
                for (d = 0; d < D; d++) a += (double)qi[d] * k[(g * LK + j) * D + d];
                s[j] = a / sqrt((double)D);
                mx = s[j] > mx ? s[j] : mx;
            }
            for (j = 0; j <= last; j++) sum += (s[j] = exp(s[j] - mx));
            for (d = 0; d < D && bad < 0; d++) {
                double ref = 0;
                for (j = 0; j <= last; j++) ref += s[j] / sum * v[(g * LK + j) * D + d];
                if (!(fabs(y0[(h * LQ + i) * D + d] - ref) <= 2e-5 * sqrt((double)LK) + 1e-5))
                    bad = (h * LQ + i) * D + d;
            }
        }
    KT_CHECK(bad < 0, "%s: element %lld: %.9g", what, (long long)bad, bad < 0 ? 0.0 : (double)y0[bad]);
    KT_ERROR(run(kt_ctx(1, KERN_ISA_SCALAR), NULL, k, v, y0), KERN_ERR_ARG, "NULL");
    kt_free(q);
    kt_free(k);
    kt_free(v);
    kt_free(y0);
    kt_free(y1);
    kt_free(s);
}

typedef kern_status (*gen_sdpa_bf_fn)(kern_ctx *, const uint16_t *, const uint16_t *, const uint16_t *,
                                      uint16_t *);

/* bf16 q, k, v, y: the f32 instance's bound (the same f32 arithmetic on
 * the widened values, exact in the double reference) plus half a bf16 ulp
 * of |y| (2^-8: the one output rounding). */
static void gen_sdpa_bf16_case(const char *what, int64_t HQ, int64_t HKV, int64_t LQ, int64_t LK, int64_t D,
                               int causal, gen_sdpa_bf_fn run) {
    kt_rng r = kt_rng_make((uint64_t)(HQ * 7 + LK * 131 + D + 5));
    const int64_t nq = HQ * LQ * D, nk = HKV * LK * D;
    uint16_t *q = (uint16_t *)kt_alloc((size_t)nq * 2, "q"), *k = (uint16_t *)kt_alloc((size_t)nk * 2, "k");
    uint16_t *v = (uint16_t *)kt_alloc((size_t)nk * 2, "v");
    uint16_t *y0 = (uint16_t *)kt_alloc((size_t)nq * 2, "y0"), *y1 = (uint16_t *)kt_alloc((size_t)nq * 2, "y1");
    double *s = (double *)kt_alloc((size_t)LK * 8, "s");
    int64_t h, i, j, d, bad = -1;
    kt_fill_normal(&r, q, KERN_BF16, nq, 1.0);
    kt_fill_normal(&r, k, KERN_BF16, nk, 1.0);
    kt_fill_normal(&r, v, KERN_BF16, nk, 1.0);
    memset(y0, 0xA5, (size_t)nq * 2);
    memset(y1, 0xA5, (size_t)nq * 2);
    KT_OK(run(kt_ctx(1, KERN_ISA_SCALAR), q, k, v, y0));
    KT_OK(run(kt_ctx(1, KERN_ISA_AUTO), q, k, v, y1));
    KT_CHECK(memcmp(y0, y1, (size_t)nq * 2) == 0, "%s: scalar and best ISA differ", what);
    memset(y1, 0xA5, (size_t)nq * 2);
    KT_OK(run(kt_ctx(2, KERN_ISA_AUTO), q, k, v, y1));
    KT_CHECK(memcmp(y0, y1, (size_t)nq * 2) == 0, "%s: 2 threads differ from one", what);
    for (h = 0; h < HQ && bad < 0; h++)
        for (i = 0; i < LQ && bad < 0; i++) {
            const int64_t g = h / (HQ / HKV), last = causal ? LK - LQ + i : LK - 1;
            double mx = -1e300, sum = 0;
            for (j = 0; j <= last; j++) {
                double a = 0;
                for (d = 0; d < D; d++)
                    a += kt_get(q, KERN_BF16, (h * LQ + i) * D + d) * kt_get(k, KERN_BF16, (g * LK + j) * D + d);
                s[j] = a / sqrt((double)D);
                mx = s[j] > mx ? s[j] : mx;
            }
            for (j = 0; j <= last; j++) sum += (s[j] = exp(s[j] - mx));
            for (d = 0; d < D && bad < 0; d++) {
                double ref = 0, got = kt_get(y0, KERN_BF16, (h * LQ + i) * D + d);
                for (j = 0; j <= last; j++) ref += s[j] / sum * kt_get(v, KERN_BF16, (g * LK + j) * D + d);
                if (!(fabs(got - ref) <= ldexp(fabs(ref), -8) + 2e-5 * sqrt((double)LK) + 1e-5))
                    bad = (h * LQ + i) * D + d;
            }
        }
    KT_CHECK(bad < 0, "%s: element %lld: %.9g", what, (long long)bad, bad < 0 ? 0.0 : kt_get(y0, KERN_BF16, bad));
    KT_ERROR(run(kt_ctx(1, KERN_ISA_SCALAR), NULL, k, v, y0), KERN_ERR_ARG, "NULL");
    kt_free(q);
    kt_free(k);
    kt_free(v);
    kt_free(y0);
    kt_free(y1);
    kt_free(s);
}

KT_TEST(gen_sdpa_bf16_instances) {
    gen_sdpa_bf16_case("sdpa_bf_a", 4, 2, 1, 37, 24, 0, sdpa_bf_a_run);
    gen_sdpa_bf16_case("sdpa_bf_b", 6, 2, 3, 50, 64, 1, sdpa_bf_b_run);
}

KT_TEST(gen_sdpa_instances) {
    gen_sdpa_case("sdpa_a", 4, 2, 1, 37, 24, 0, sdpa_a_run);
    gen_sdpa_case("sdpa_b", 6, 2, 3, 50, 64, 1, sdpa_b_run);
}

KT_MAIN()
