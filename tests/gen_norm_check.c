/* gen_norm_check.c -- norm instances written by `kern_gen.py norm`
 * (mk/gen.mk: norm_a layer, norm_b rms): against a double reference, with
 * every combination of residual, residual_out, weight and bias present or
 * NULL; the AVX2 row and its scalar twin bit for bit. */
#include "kern.h"
#include "kt.h"
#define NORM_A_IMPLEMENTATION
#include "norm_a.h"
#define NORM_B_IMPLEMENTATION
#include "norm_b.h"

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

KT_TEST(gen_norm_instances) {
    gen_norm_case("norm_a", NORM_A_ROWS, NORM_A_HIDDEN, 0, 1e-5, norm_a_run);
    gen_norm_case("norm_b", NORM_B_ROWS, NORM_B_HIDDEN, 1, (double)1e-6f, norm_b_run);
}

KT_MAIN()
