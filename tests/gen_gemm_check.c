/* gen_gemm_check.c -- GEMM instances written by `kern_gen.py gemm`
 * (mk/gen.mk generates gemm_a .. gemm_d, gemm_d with a blocking other than
 * the default): against a double
 * reference within f32 rounding of the products' magnitudes, the AVX2
 * kernel and its scalar twin bit for bit, with and without bias, and the
 * column panels split over 2 and 3 threads bit for bit with one. */
#include "kern.h"
#include "kt.h"
#define GEMM_A_IMPLEMENTATION
#include "gemm_a.h"
#define GEMM_B_IMPLEMENTATION
#include "gemm_b.h"
#define GEMM_C_IMPLEMENTATION
#include "gemm_c.h"
#define GEMM_D_IMPLEMENTATION
#include "gemm_d.h"

typedef void (*gen_pack_fn)(const float *, float *);
typedef kern_status (*gen_run_fn)(kern_ctx *, const float *, const float *, const float *, float *);

static void gen_gemm_case(const char *what, int64_t M, int64_t N, int64_t K, size_t packed_floats,
                          gen_pack_fn pack, gen_run_fn run) {
    kt_rng r = kt_rng_make((uint64_t)(M * 1000003 + N * 1009 + K));
    float *x = (float *)kt_alloc((size_t)(M * K) * 4, "x");
    float *w = (float *)kt_alloc((size_t)(N * K) * 4, "w");
    float *bias = (float *)kt_alloc((size_t)N * 4, "bias");
    float *pk = (float *)kt_alloc(packed_floats * 4, "packed");
    float *y0 = (float *)kt_alloc((size_t)(M * N) * 4, "y0");
    float *y1 = (float *)kt_alloc((size_t)(M * N) * 4, "y1");
    int use_bias, bad = 0;
    kern_ctx *sc = kt_ctx(1, KERN_ISA_SCALAR), *best = kt_ctx(1, KERN_ISA_AUTO);
    int nt;
    kt_fill_normal(&r, x, KERN_F32, M * K, 1.0);
    kt_fill_normal(&r, w, KERN_F32, N * K, 1.0);
    kt_fill_normal(&r, bias, KERN_F32, N, 1.0);
    pack(w, pk);
    for (use_bias = 0; use_bias < 2; use_bias++) {
        int64_t i, j, k;
        KT_OK(run(sc, x, pk, use_bias ? bias : NULL, y0));
        KT_OK(run(best, x, pk, use_bias ? bias : NULL, y1));
        KT_CHECK(memcmp(y0, y1, (size_t)(M * N) * 4) == 0, "%s: scalar and %s differ", what,
                 kern_isa_name(kern_ctx_isa(best)));
        for (nt = 2; nt <= 3; nt++) {
            memset(y1, 0xA5, (size_t)(M * N) * 4);
            KT_OK(run(kt_ctx(nt, KERN_ISA_AUTO), x, pk, use_bias ? bias : NULL, y1));
            KT_CHECK(memcmp(y0, y1, (size_t)(M * N) * 4) == 0, "%s: %d threads differ from one", what, nt);
        }
        for (i = 0; i < M && !bad; i++)
            for (j = 0; j < N && !bad; j++) {
                double ref = use_bias ? bias[j] : 0, mag = use_bias ? fabs(bias[j]) : 0;
                for (k = 0; k < K; k++) {
                    ref += (double)x[i * K + k] * w[j * K + k];
                    mag += fabs((double)x[i * K + k] * w[j * K + k]);
                }
                if (fabs(y0[i * N + j] - ref) > 1e-6 * (double)K * mag / sqrt((double)K) + 1e-6) {
                    KT_CHECK(0, "%s bias=%d: y[%lld,%lld] = %.9g, reference %.9g", what, use_bias,
                             (long long)i, (long long)j, y0[i * N + j], ref);
                    bad = 1;
                }
            }
    }
    KT_ERROR(run(sc, NULL, pk, NULL, y0), KERN_ERR_ARG, "NULL");
    kt_free(x);
    kt_free(w);
    kt_free(bias);
    kt_free(pk);
    kt_free(y0);
    kt_free(y1);
}

KT_TEST(gen_gemm_instances) {
    gen_gemm_case("gemm_a", GEMM_A_M, GEMM_A_N, GEMM_A_K, GEMM_A_PACKED_FLOATS, gemm_a_pack, gemm_a_run);
    gen_gemm_case("gemm_b", GEMM_B_M, GEMM_B_N, GEMM_B_K, GEMM_B_PACKED_FLOATS, gemm_b_pack, gemm_b_run);
    gen_gemm_case("gemm_c", GEMM_C_M, GEMM_C_N, GEMM_C_K, GEMM_C_PACKED_FLOATS, gemm_c_pack, gemm_c_run);
    gen_gemm_case("gemm_d", GEMM_D_M, GEMM_D_N, GEMM_D_K, GEMM_D_PACKED_FLOATS, gemm_d_pack, gemm_d_run);
}

KT_MAIN()
