/* gen_gemm_check.c -- GEMM instances written by `kern_gen.py gemm`
 * (mk/gen.mk generates gemm_a .. gemm_g, gemm_d, gemm_f and gemm_g with a
 * blocking other than the default, gemm_e and gemm_f with an x past 256
 * KiB, so the f32 ones take K in blocks with a shorter last one, gemm_c
 * and gemm_g walking several panels at once beside single ones, and their
 * bf16 twins gemm_bf_a .. gemm_bf_g): against a double reference within
 * f32 rounding of the products' magnitudes (bf16: plus half a bf16 ulp
 * for the one output rounding), every ISA level's kernel (AVX2, AVX-512)
 * and the scalar twin bit for bit, with and without bias, and the column panels split over 2 and
 * 3 threads bit for bit with one. */
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
#define GEMM_E_IMPLEMENTATION
#include "gemm_e.h"
#define GEMM_F_IMPLEMENTATION
#include "gemm_f.h"
#define GEMM_G_IMPLEMENTATION
#include "gemm_g.h"
#define GEMM_BF_A_IMPLEMENTATION
#include "gemm_bf_a.h"
#define GEMM_BF_B_IMPLEMENTATION
#include "gemm_bf_b.h"
#define GEMM_BF_C_IMPLEMENTATION
#include "gemm_bf_c.h"
#define GEMM_BF_D_IMPLEMENTATION
#include "gemm_bf_d.h"
#define GEMM_BF_E_IMPLEMENTATION
#include "gemm_bf_e.h"
#define GEMM_BF_F_IMPLEMENTATION
#include "gemm_bf_f.h"
#define GEMM_BF_G_IMPLEMENTATION
#include "gemm_bf_g.h"

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
    kern_ctx *sc = kt_ctx(1, KERN_ISA_SCALAR);
    kern_isa lv[KERN_ISA_COUNT];
    int nt, li, nl = kt_isa_levels(lv);
    kt_fill_normal(&r, x, KERN_F32, M * K, 1.0);
    kt_fill_normal(&r, w, KERN_F32, N * K, 1.0);
    kt_fill_normal(&r, bias, KERN_F32, N, 1.0);
    pack(w, pk);
    for (use_bias = 0; use_bias < 2; use_bias++) {
        int64_t i, j, k;
        KT_OK(run(sc, x, pk, use_bias ? bias : NULL, y0));
        for (li = 1; li < nl; li++) { /* every level's body (AVX2, AVX-512) */
            memset(y1, 0xA5, (size_t)(M * N) * 4);
            KT_OK(run(kt_ctx(1, lv[li]), x, pk, use_bias ? bias : NULL, y1));
            KT_CHECK(memcmp(y0, y1, (size_t)(M * N) * 4) == 0, "%s: scalar and %s differ", what,
                     kern_isa_name(lv[li]));
        }
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

typedef void (*gen_pack_bf16_fn)(const uint16_t *, uint16_t *);
typedef kern_status (*gen_run_bf16_fn)(kern_ctx *, const uint16_t *, const uint16_t *, const uint16_t *,
                                       uint16_t *);

/* The inputs are bf16 values, exact in double, so the reference is exact:
 * y may differ from it by the f32 sums (at most (K + 2) roundings of
 * 2^-24 of the products' magnitudes: K FMAs, the two accumulator sets'
 * add, the bias add) and then by the one rounding to bf16 (half an ulp:
 * 2^-8 of |y|). A strict bound, far inside kt_tol's two bf16 ulps. */
static void gen_gemm_bf16_case(const char *what, int64_t M, int64_t N, int64_t K, size_t packed_elems,
                               gen_pack_bf16_fn pack, gen_run_bf16_fn run) {
    kt_rng r = kt_rng_make((uint64_t)(M * 1000003 + N * 1009 + K + 7));
    uint16_t *x = (uint16_t *)kt_alloc((size_t)(M * K) * 2, "x");
    uint16_t *w = (uint16_t *)kt_alloc((size_t)(N * K) * 2, "w");
    uint16_t *bias = (uint16_t *)kt_alloc((size_t)N * 2, "bias");
    uint16_t *pk = (uint16_t *)kt_alloc(packed_elems * 2, "packed");
    uint16_t *y0 = (uint16_t *)kt_alloc((size_t)(M * N) * 2, "y0");
    uint16_t *y1 = (uint16_t *)kt_alloc((size_t)(M * N) * 2, "y1");
    int use_bias, bad = 0;
    kern_ctx *sc = kt_ctx(1, KERN_ISA_SCALAR);
    kern_isa lv[KERN_ISA_COUNT];
    int nt, li, nl = kt_isa_levels(lv);
    kt_fill_normal(&r, x, KERN_BF16, M * K, 1.0);
    kt_fill_normal(&r, w, KERN_BF16, N * K, 1.0);
    kt_fill_normal(&r, bias, KERN_BF16, N, 1.0);
    pack(w, pk);
    for (use_bias = 0; use_bias < 2; use_bias++) {
        int64_t i, j, k;
        memset(y0, 0xA5, (size_t)(M * N) * 2);
        memset(y1, 0xA5, (size_t)(M * N) * 2);
        KT_OK(run(sc, x, pk, use_bias ? bias : NULL, y0));
        for (li = 1; li < nl; li++) {
            memset(y1, 0xA5, (size_t)(M * N) * 2);
            KT_OK(run(kt_ctx(1, lv[li]), x, pk, use_bias ? bias : NULL, y1));
            KT_CHECK(memcmp(y0, y1, (size_t)(M * N) * 2) == 0, "%s: scalar and %s differ", what,
                     kern_isa_name(lv[li]));
        }
        for (nt = 2; nt <= 3; nt++) {
            memset(y1, 0xA5, (size_t)(M * N) * 2);
            KT_OK(run(kt_ctx(nt, KERN_ISA_AUTO), x, pk, use_bias ? bias : NULL, y1));
            KT_CHECK(memcmp(y0, y1, (size_t)(M * N) * 2) == 0, "%s: %d threads differ from one", what, nt);
        }
        for (i = 0; i < M && !bad; i++)
            for (j = 0; j < N && !bad; j++) {
                double b = use_bias ? kern_bf16_to_f32(bias[j]) : 0, ref = b, mag = fabs(b), got, lim;
                for (k = 0; k < K; k++) {
                    double p = (double)kern_bf16_to_f32(x[i * K + k]) * kern_bf16_to_f32(w[j * K + k]);
                    ref += p;
                    mag += fabs(p);
                }
                got = kern_bf16_to_f32(y0[i * N + j]);
                lim = ldexp(fabs(ref), -8) + (1 + ldexp(1, -8)) * (double)(K + 2) * ldexp(mag, -24);
                if (!(fabs(got - ref) <= lim)) {
                    KT_CHECK(0, "%s bias=%d: y[%lld,%lld] = %.9g, reference %.9g (limit %.3g)", what, use_bias,
                             (long long)i, (long long)j, got, ref, lim);
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
    gen_gemm_case("gemm_e", GEMM_E_M, GEMM_E_N, GEMM_E_K, GEMM_E_PACKED_FLOATS, gemm_e_pack, gemm_e_run);
    gen_gemm_case("gemm_f", GEMM_F_M, GEMM_F_N, GEMM_F_K, GEMM_F_PACKED_FLOATS, gemm_f_pack, gemm_f_run);
    gen_gemm_case("gemm_g", GEMM_G_M, GEMM_G_N, GEMM_G_K, GEMM_G_PACKED_FLOATS, gemm_g_pack, gemm_g_run);
}

KT_TEST(gen_gemm_bf16_instances) {
    gen_gemm_bf16_case("gemm_bf_a", GEMM_BF_A_M, GEMM_BF_A_N, GEMM_BF_A_K, GEMM_BF_A_PACKED_ELEMS, gemm_bf_a_pack,
                       gemm_bf_a_run);
    gen_gemm_bf16_case("gemm_bf_b", GEMM_BF_B_M, GEMM_BF_B_N, GEMM_BF_B_K, GEMM_BF_B_PACKED_ELEMS, gemm_bf_b_pack,
                       gemm_bf_b_run);
    gen_gemm_bf16_case("gemm_bf_c", GEMM_BF_C_M, GEMM_BF_C_N, GEMM_BF_C_K, GEMM_BF_C_PACKED_ELEMS, gemm_bf_c_pack,
                       gemm_bf_c_run);
    gen_gemm_bf16_case("gemm_bf_d", GEMM_BF_D_M, GEMM_BF_D_N, GEMM_BF_D_K, GEMM_BF_D_PACKED_ELEMS, gemm_bf_d_pack,
                       gemm_bf_d_run);
    gen_gemm_bf16_case("gemm_bf_e", GEMM_BF_E_M, GEMM_BF_E_N, GEMM_BF_E_K, GEMM_BF_E_PACKED_ELEMS, gemm_bf_e_pack,
                       gemm_bf_e_run);
    gen_gemm_bf16_case("gemm_bf_f", GEMM_BF_F_M, GEMM_BF_F_N, GEMM_BF_F_K, GEMM_BF_F_PACKED_ELEMS, gemm_bf_f_pack,
                       gemm_bf_f_run);
    gen_gemm_bf16_case("gemm_bf_g", GEMM_BF_G_M, GEMM_BF_G_N, GEMM_BF_G_K, GEMM_BF_G_PACKED_ELEMS, gemm_bf_g_pack,
                       gemm_bf_g_run);
}

KT_MAIN()
