/* gen_norm_check.c -- norm instances written by `kern_gen.py norm`
 * (mk/gen.mk: norm_a layer, norm_b rms; bf16: norm_bf_a layer with bf16
 * weight and bias, norm_bf_b rms with f32 ones): against a double
 * reference, with every combination of residual, residual_out, weight and
 * bias present or NULL; the AVX2 row and its scalar twin bit for bit;
 * bf16 also in place (y over x, residual_out over residual). */
#include "kern.h"
#include "kt.h"
#define NORM_A_IMPLEMENTATION
#include "norm_a.h"
#define NORM_B_IMPLEMENTATION
#include "norm_b.h"
#define NORM_BF_A_IMPLEMENTATION
#include "norm_bf_a.h"
#define NORM_BF_B_IMPLEMENTATION
#include "norm_bf_b.h"

typedef kern_status (*gen_norm_fn)(kern_ctx *, const float *, const float *, const float *, const float *,
                                   float *, float *);

static void gen_norm_case(const char *what, int64_t R, int64_t H, int rms, double eps, gen_norm_fn run) {
    kt_rng r = kt_rng_make((uint64_t)(R * 1009 + H));
    float *x = (float *)kt_alloc((size_t)(R * H) * 4, "x"), *res = (float *)kt_alloc((size_t)(R * H) * 4, "res");
    float *wt = (float *)kt_alloc((size_t)H * 4, "w"), *bs = (float *)kt_alloc((size_t)H * 4, "b");
    float *y0 = (float *)kt_alloc((size_t)(R * H) * 4, "y0"), *y1 = (float *)kt_alloc((size_t)(R * H) * 4, "y1");
    float *s0 = (float *)kt_alloc((size_t)(R * H) * 4, "s0"), *s1 = (float *)kt_alloc((size_t)(R * H) * 4, "s1");
    kern_ctx *sc = kt_ctx(1, KERN_ISA_SCALAR), *best = kt_ctx(1, KERN_ISA_AUTO);
    int combo;
    kt_fill_normal(&r, x, KERN_F32, R * H, 1.0);
    kt_fill_normal(&r, res, KERN_F32, R * H, 1.0);
    kt_fill_normal(&r, wt, KERN_F32, H, 1.0);
    kt_fill_normal(&r, bs, KERN_F32, H, 1.0);
    for (combo = 0; combo < 16; combo++) {
        const float *rp = combo & 1 ? res : NULL, *wp = combo & 4 ? wt : NULL, *bp = combo & 8 ? bs : NULL;
        int keep = (combo & 2) && rp;
        int64_t i, j, bad = -1;
        KT_OK(run(sc, x, rp, wp, bp, y0, keep ? s0 : NULL));
        KT_OK(run(best, x, rp, wp, bp, y1, keep ? s1 : NULL));
        KT_CHECK(memcmp(y0, y1, (size_t)(R * H) * 4) == 0 && (!keep || memcmp(s0, s1, (size_t)(R * H) * 4) == 0),
                 "%s combo %d: scalar and %s differ", what, combo, kern_isa_name(kern_ctx_isa(best)));
        for (i = 0; i < R && bad < 0; i++) {
            double mean = 0, var = 0;
            for (j = 0; j < H; j++) mean += (double)x[i * H + j] + (rp ? rp[i * H + j] : 0);
            mean = rms ? 0 : mean / (double)H;
            for (j = 0; j < H; j++) {
                double d = (double)x[i * H + j] + (rp ? rp[i * H + j] : 0) - mean;
                var += d * d;
            }
            var /= (double)H;
            for (j = 0; j < H && bad < 0; j++) {
                double v = (double)x[i * H + j] + (rp ? rp[i * H + j] : 0);
                double ref = (v - mean) / sqrt(var + eps) * (wp ? wp[j] : 1) + (bp ? bp[j] : 0);
                if (!(fabs(y0[i * H + j] - ref) <= 1e-5 * (1 + fabs(ref)) * sqrt((double)H))) bad = i * H + j;
                if (keep && s0[i * H + j] != (float)(x[i * H + j] + rp[i * H + j])) bad = i * H + j;
            }
        }
        KT_CHECK(bad < 0, "%s combo %d: element %lld: %.9g", what, combo, (long long)bad,
                 bad < 0 ? 0.0 : (double)y0[bad]);
    }
    KT_ERROR(run(sc, NULL, NULL, NULL, NULL, y0, NULL), KERN_ERR_ARG, "NULL");
    kt_free(x);
    kt_free(res);
    kt_free(wt);
    kt_free(bs);
    kt_free(y0);
    kt_free(y1);
    kt_free(s0);
    kt_free(s1);
}

typedef kern_status (*gen_norm_bf_fn)(kern_ctx *, const uint16_t *, const uint16_t *, const uint16_t *,
                                      const uint16_t *, uint16_t *, uint16_t *);
typedef kern_status (*gen_norm_bff_fn)(kern_ctx *, const uint16_t *, const uint16_t *, const float *,
                                       const float *, uint16_t *, uint16_t *);

static kern_status gen_norm_bf_call(gen_norm_bf_fn rb, gen_norm_bff_fn rf, kern_ctx *ctx, const uint16_t *x,
                                    const uint16_t *res, const void *w, const void *b, uint16_t *y, uint16_t *so) {
    if (rb) return rb(ctx, x, res, (const uint16_t *)w, (const uint16_t *)b, y, so);
    return rf(ctx, x, res, (const float *)w, (const float *)b, y, so);
}

/* bf16 x, residual, y, residual_out; weight and bias bf16 (rb) or f32
 * (rf). y within the f32 instance's bound (its statistics are the same
 * f32 code) plus half a bf16 ulp (2^-8 of |y|: the one output rounding);
 * residual_out exactly bf16(f32(x) + f32(residual)). */
static void gen_norm_bf16_case(const char *what, int64_t R, int64_t H, int rms, double eps, gen_norm_bf_fn rb,
                               gen_norm_bff_fn rf) {
    kt_rng r = kt_rng_make((uint64_t)(R * 1009 + H + 3));
    const size_t n = (size_t)(R * H), ws = rb ? 2 : 4;
    uint16_t *x = (uint16_t *)kt_alloc(n * 2, "x"), *res = (uint16_t *)kt_alloc(n * 2, "res");
    void *wt = kt_alloc((size_t)H * ws, "w"), *bs = kt_alloc((size_t)H * ws, "b");
    uint16_t *y0 = (uint16_t *)kt_alloc(n * 2, "y0"), *y1 = (uint16_t *)kt_alloc(n * 2, "y1");
    uint16_t *s0 = (uint16_t *)kt_alloc(n * 2, "s0"), *s1 = (uint16_t *)kt_alloc(n * 2, "s1");
    kern_ctx *sc = kt_ctx(1, KERN_ISA_SCALAR), *best = kt_ctx(1, KERN_ISA_AUTO);
    const kern_dtype wdt = rb ? KERN_BF16 : KERN_F32;
    int combo;
    kt_fill_normal(&r, x, KERN_BF16, R * H, 1.0);
    kt_fill_normal(&r, res, KERN_BF16, R * H, 1.0);
    kt_fill_normal(&r, wt, wdt, H, 1.0);
    kt_fill_normal(&r, bs, wdt, H, 1.0);
    for (combo = 0; combo < 16; combo++) {
        const uint16_t *rp = combo & 1 ? res : NULL;
        const void *wp = combo & 4 ? wt : NULL, *bp = combo & 8 ? bs : NULL;
        int keep = (combo & 2) && rp;
        int64_t i, j, bad = -1;
        memset(y0, 0xA5, n * 2);
        memset(y1, 0xA5, n * 2);
        KT_OK(gen_norm_bf_call(rb, rf, sc, x, rp, wp, bp, y0, keep ? s0 : NULL));
        KT_OK(gen_norm_bf_call(rb, rf, best, x, rp, wp, bp, y1, keep ? s1 : NULL));
        KT_CHECK(memcmp(y0, y1, n * 2) == 0 && (!keep || memcmp(s0, s1, n * 2) == 0),
                 "%s combo %d: scalar and %s differ", what, combo, kern_isa_name(kern_ctx_isa(best)));
        for (i = 0; i < R && bad < 0; i++) {
            double mean = 0, var = 0;
            for (j = 0; j < H; j++) mean += (double)kt_get(x, KERN_BF16, i * H + j) + (rp ? kt_get(rp, KERN_BF16, i * H + j) : 0);
            mean = rms ? 0 : mean / (double)H;
            for (j = 0; j < H; j++) {
                double d = (double)kt_get(x, KERN_BF16, i * H + j) + (rp ? kt_get(rp, KERN_BF16, i * H + j) : 0) - mean;
                var += d * d;
            }
            var /= (double)H;
            for (j = 0; j < H && bad < 0; j++) {
                double v = (double)kt_get(x, KERN_BF16, i * H + j) + (rp ? kt_get(rp, KERN_BF16, i * H + j) : 0);
                double ref = (v - mean) / sqrt(var + eps) * (wp ? kt_get(wp, wdt, j) : 1) + (bp ? kt_get(bp, wdt, j) : 0);
                double got = kt_get(y0, KERN_BF16, i * H + j);
                if (!(fabs(got - ref) <= ldexp(fabs(ref), -8) + 1e-5 * (1 + fabs(ref)) * sqrt((double)H))) bad = i * H + j;
                if (keep && s0[i * H + j] != kern_f32_to_bf16(kern_bf16_to_f32(x[i * H + j]) + kern_bf16_to_f32(rp[i * H + j])))
                    bad = i * H + j;
            }
        }
        KT_CHECK(bad < 0, "%s combo %d: element %lld: %.9g", what, combo, (long long)bad,
                 bad < 0 ? 0.0 : kt_get(y0, KERN_BF16, bad));
        /* in place: y over x, residual_out over residual */
        if (keep) {
            memcpy(y1, x, n * 2);
            memcpy(s1, res, n * 2);
            KT_OK(gen_norm_bf_call(rb, rf, best, y1, s1, wp, bp, y1, s1));
            KT_CHECK(memcmp(y0, y1, n * 2) == 0 && memcmp(s0, s1, n * 2) == 0, "%s combo %d: in place differs", what,
                     combo);
        }
    }
    KT_ERROR(gen_norm_bf_call(rb, rf, sc, NULL, NULL, NULL, NULL, y0, NULL), KERN_ERR_ARG, "NULL");
    kt_free(x);
    kt_free(res);
    kt_free(wt);
    kt_free(bs);
    kt_free(y0);
    kt_free(y1);
    kt_free(s0);
    kt_free(s1);
}

KT_TEST(gen_norm_bf16_instances) {
    gen_norm_bf16_case("norm_bf_a", NORM_BF_A_ROWS, NORM_BF_A_HIDDEN, 0, 1e-5, norm_bf_a_run, NULL);
    gen_norm_bf16_case("norm_bf_b", NORM_BF_B_ROWS, NORM_BF_B_HIDDEN, 1, (double)1e-6f, NULL, norm_bf_b_run);
}

KT_TEST(gen_norm_instances) {
    gen_norm_case("norm_a", NORM_A_ROWS, NORM_A_HIDDEN, 0, 1e-5, norm_a_run);
    gen_norm_case("norm_b", NORM_B_ROWS, NORM_B_HIDDEN, 1, (double)1e-6f, norm_b_run);
}

KT_MAIN()
