/* test_math.c — the internal math layer of kern_base.h (kern__s_* and
 * kern__v_*__ISA): one accuracy test per function over the whole f32
 * range on every ISA level the machine runs, and bit-identity of every
 * vector version to its scalar twin.
 *
 * Inputs: every 4096th f32 bit pattern (2^20 points: both signs, zeros,
 * subnormals, Inf, NaN), 2^18 uniform points on each function's busy
 * range, and the special values. Errors are in ulps of the exact result
 * (2^-149 in the subnormal range) against a double / long double
 * reference; the gradients, whose value may cancel to 0, are measured in
 * ulps of their largest term. The exhaustive figures (all 2^32 inputs)
 * come from tests/math_sweep.c and are quoted in kern_base.h. */
#define KERN_IMPLEMENTATION
#include "kern_base.h"
#include "kt.h"

#include <float.h>

typedef float (*sfn)(float);
typedef void (*arr_fn)(const float *x, float *y, int64_t n);

/* ------------------------------------------------------- references */

static long double phi_l(long double x) { return expl(-0.5L * x * x) * 0.398942280401432677939946L; }
static long double Phi_l(long double x) { return 0.5L * erfcl(-x * 0.707106781186547524400844L); }
static long double sig_l(long double v) {
    return v >= 0 ? 1.0L / (1.0L + expl(-v)) : expl(v) / (1.0L + expl(v));
}
static long double gt_v(long double x) {
    return 2.0L * 0.797884560802865355879892L * (x + 0.044715L * x * x * x);
}
/* value, and the magnitude of its largest term (for the gradients) */
static long double ref_eval(int f, long double x, long double *scale) {
    *scale = 0;
    switch (f) {
    case 0: return expl(x);
    case 1: return exp2l(x);
    case 2: return exp2l(x);
    case 3: return erfl(x);
    case 4: return tanhl(x);
    case 5: return sig_l(x);
    case 6: return x * sig_l(x);
    case 7: {
        long double s = sig_l(x), t = x * s * (1 - s);
        *scale = fabsl(t) > s ? fabsl(t) : s;
        return s + t;
    }
    case 8: return x * Phi_l(x);
    case 9: {
        long double a = Phi_l(x), b = x * phi_l(x);
        *scale = fabsl(b) > a ? fabsl(b) : a;
        return a + b;
    }
    case 10: return x * sig_l(gt_v(x));
    case 11: {
        long double v = gt_v(x), s = sig_l(v);
        long double t = x * s * (1 - s) * 2.0L * 0.797884560802865355879892L * (1 + 3 * 0.044715L * x * x);
        *scale = fabsl(t) > s ? fabsl(t) : s;
        return s + t;
    }
    case 12: return (x > 0 || x == 0 || isnan(x)) ? x : 0.0L;
    default: return 0;
    }
}

/* |got - ref| in ulps of max(|ref|, scale); a result beyond the f32 range
 * must be Inf of the right sign; NaN must match NaN. */
static double ulp_err(float got, long double ref, long double scale) {
    long double a = fabsl(ref), ulp;
    int e;
    if (isnan(ref)) return isnan(got) ? 0.0 : 1e30;
    if (isnan(got)) return 1e30;
    if (a >= (long double)FLT_MAX * (1.0L + ldexpl(1.0L, -25)) || isinf(ref))
        return (isinf(got) && (got > 0) == (ref > 0)) ? 0.0 : 1e30;
    if (isinf(got)) return 1e30;
    if (scale > a) a = scale;
    if (a == 0) return got == 0 ? 0.0 : fabs((double)got) / ldexp(1.0, -149);
    frexpl(a, &e);
    ulp = ldexpl(1.0L, e - 24 < -149 ? -149 : e - 24);
    return (double)(fabsl((long double)got - ref) / ulp);
}

/* ------------------------------------------------------- functions */

#define FN_LIST(X)                                                            \
    X(0, exp) X(1, exp2) X(2, exp2_neg) X(3, erf) X(4, tanh) X(5, sigmoid)    \
    X(6, silu) X(7, silu_grad) X(8, gelu) X(9, gelu_grad) X(10, gelu_tanh)    \
    X(11, gelu_tanh_grad) X(12, relu)
#define N_FN 13

static const char *fn_name[N_FN] = {
#define X(i, name) #name,
    FN_LIST(X)
#undef X
};

static void arr_scalar_any(sfn f, const float *x, float *y, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) y[i] = f(x[i]);
}
#define X(i, name)                                                            \
    static void arr_##name##_scalar(const float *x, float *y, int64_t n) {    \
        arr_scalar_any(kern__s_##name, x, y, n);                              \
    }
FN_LIST(X)
#undef X
static const arr_fn arr_scalar[N_FN] = {
#define X(i, name) arr_##name##_scalar,
    FN_LIST(X)
#undef X
};

/* Vector array loops: full vectors, then one masked tail vector. */
#ifdef KERN_X86
#define X(i, name)                                                                          \
    KERN_TARGET_AVX2 static void arr_##name##_avx2(const float *x, float *y, int64_t n) {    \
        int64_t j = 0;                                                                      \
        for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, kern__v_##name##__avx2(_mm256_loadu_ps(x + j))); \
        if (j < n)                                                                          \
            kern__storen__avx2(y + j, kern__v_##name##__avx2(kern__loadn__avx2(x + j, (int)(n - j))), \
                               (int)(n - j));                                               \
    }                                                                                       \
    KERN_TARGET_AVX512 static void arr_##name##_avx512(const float *x, float *y, int64_t n) { \
        int64_t j = 0;                                                                      \
        for (; j + 16 <= n; j += 16) _mm512_storeu_ps(y + j, kern__v_##name##__avx512(_mm512_loadu_ps(x + j))); \
        if (j < n)                                                                          \
            kern__storen__avx512(y + j, kern__v_##name##__avx512(kern__loadn__avx512(x + j, (int)(n - j))), \
                                 (int)(n - j));                                             \
    }
FN_LIST(X)
#undef X
static const arr_fn arr_avx2[N_FN] = {
#define X(i, name) arr_##name##_avx2,
    FN_LIST(X)
#undef X
};
static const arr_fn arr_avx512[N_FN] = {
#define X(i, name) arr_##name##_avx512,
    FN_LIST(X)
#undef X
};
#endif
#ifdef KERN_NEON
#define X(i, name)                                                                          \
    static void arr_##name##_neon(const float *x, float *y, int64_t n) {                    \
        int64_t j = 0;                                                                      \
        for (; j + 4 <= n; j += 4) vst1q_f32(y + j, kern__v_##name##__neon(vld1q_f32(x + j))); \
        if (j < n)                                                                          \
            kern__storen__neon(y + j, kern__v_##name##__neon(kern__loadn__neon(x + j, (int)(n - j))), \
                               (int)(n - j));                                               \
    }
FN_LIST(X)
#undef X
static const arr_fn arr_neon[N_FN] = {
#define X(i, name) arr_##name##_neon,
    FN_LIST(X)
#undef X
};
#endif

/* The vector array loop of function f for an ISA level (NULL for scalar). */
static arr_fn arr_for(kern_isa isa, int f) {
    (void)f;
#ifdef KERN_X86
    if (isa >= KERN_ISA_AVX512 && isa <= KERN_ISA_AMX) return arr_avx512[f];
    if (isa >= KERN_ISA_AVX2) return arr_avx2[f];
#endif
#ifdef KERN_NEON
    if (isa >= KERN_ISA_NEON) return arr_neon[f];
#endif
    (void)isa;
    return arr_scalar[f];
}

/* ------------------------------------------------------------- inputs */

static const float specials[] = {
    0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, -1e-40f, 1.17549435e-38f, -1.17549435e-38f, 1e-30f,
    -1e-30f, 0.5f, -0.5f, 0.625f, -0.625f, 1.0f, -1.0f, 3.0f, -3.0f, -2.9999998f, -3.0000002f,
    4.0f, -4.0f, 5.9f, 6.0f, -7.2f, -8.0f, -10.0f, -10.1f, -13.2f, -14.3f, -14.4f, -16.5f,
    -30.0f, 30.0f, -100.0f, 100.0f, 88.72f, 88.73f, -87.33f, -103.9f, -104.5f, 127.9f, 128.0f,
    -126.0f, -126.6f, -127.0f, -149.0f, -150.0f, -151.0f, 1e19f, -1e19f, 1e30f, -1e30f,
    3.4028235e38f, -3.4028235e38f, INFINITY, -INFINITY, NAN, -NAN};

/* busy range per function: uniform points are drawn from [-r, r] */
static const double busy[N_FN] = {100, 150, 150, 6, 12, 100, 100, 100, 16, 16, 12, 12, 10};

/* Under an emulator (make test-neon) or a sanitizer, a quarter of them. */
#if defined(KT_EMULATED) || defined(KT_SANITIZER)
#define MATH_STRIDE 16384u
#define MATH_UNIFORM_LOG2 16
#else
#define MATH_STRIDE 4096u
#define MATH_UNIFORM_LOG2 18
#endif

static float *make_inputs(int f, int64_t *n) {
    int64_t cap = (int64_t)(0x100000000ull / MATH_STRIDE) + ((int64_t)1 << MATH_UNIFORM_LOG2) + 64, k = 0, i;
    float *x = (float *)malloc(sizeof(float) * (size_t)cap);
    kt_rng g = kt_rng_make(1000 + (uint64_t)f);
    uint64_t u;
    for (u = 0; u < 0x100000000ull; u += MATH_STRIDE) x[k++] = kern__bits_f32((uint32_t)(u + (u >> 20)));
    for (i = 0; i < (int64_t)(sizeof specials / sizeof specials[0]); i++) x[k++] = specials[i];
    while (k < cap) x[k++] = (float)kt_uniform(&g, -busy[f], busy[f]);
    if (f == 2) /* exp2_neg: its domain is x <= 127 */
        for (i = 0; i < k; i++)
            if (x[i] > 127.0f) x[i] = -x[i];
    *n = k;
    return x;
}

/* Bound in ulps for input x (gelu_tanh: grows with |2u|, see kern_base.h). */
static double bound_of(int f, float x) {
    static const double b[N_FN] = {1.1, 1.1, 1.1, 1.1, 2, 2.5, 3.5, 5, 4, 4, 3, 3.5, 0};
    if (f == 10 || f == 11) {
        long double v = fabsl(gt_v(x));
        return b[f] + 2.6 * (double)(v < 1e6L ? v : 1e6L); /* b: 3 and 3.5 */
    }
    return b[f];
}

/* ---------------------------------------------------------------- check */

static void check_fn(int f) {
    int64_t n, i, bad_bits = 0;
    float *x = make_inputs(f, &n);
    float *ys = (float *)malloc(sizeof(float) * (size_t)n), *yv = (float *)malloc(sizeof(float) * (size_t)n);
    kern_isa isas[KERN_ISA_COUNT];
    int ni = kt_isa_levels(isas), li;
    double worst = 0, worst_x = 0, worst_ratio = 0;
    arr_scalar[f](x, ys, n);
    for (i = 0; i < n; i++) { /* accuracy of the scalar twin */
        long double scale, r = ref_eval(f, x[i], &scale);
        double e;
        if (f == 2 && x[i] < -126.0f) { /* exp2_neg flush range: absolute */
            KT_CHECK(fabsl((long double)ys[i] - r) < ldexpl(1.0L, -126) || (isnan(ys[i]) && isnan(r)),
                     "%s(%.9g) = %.9g want %.9Lg", fn_name[f], x[i], ys[i], r);
            continue;
        }
        e = ulp_err(ys[i], r, scale);
        if (e / (bound_of(f, x[i]) + 1e-300) > worst_ratio || (e > worst && worst_ratio == 0)) {
            worst_ratio = e / (bound_of(f, x[i]) + 1e-300);
            worst = e;
            worst_x = x[i];
        }
    }
    KT_CHECK(worst_ratio <= 1.0, "%s: %.3f ulp at x=%.9g (bound %.2f)", fn_name[f], worst, worst_x,
             bound_of(f, (float)worst_x));
    if (getenv("KT_VERBOSE"))
        printf("     %-15s worst %.3f ulp at x=%.9g (bound %.2f), %lld inputs\n", fn_name[f], worst,
               worst_x, bound_of(f, (float)worst_x), (long long)n);
    /* every vector version: the scalar twin's bits */
    for (li = 0; li < ni; li++) {
        arr_fn v = arr_for(isas[li], f);
        if (v == arr_scalar[f]) continue;
        kt_poison(yv, sizeof(float) * (size_t)n);
        v(x, yv, n);
        bad_bits = 0;
        for (i = 0; i < n; i++) {
            int same = isnan(ys[i]) ? isnan(yv[i]) : kern__f32_bits(ys[i]) == kern__f32_bits(yv[i]);
            if (!same) {
                if (bad_bits++ < 3)
                    KT_CHECK(0, "%s %s(%.9g) = %.9g (0x%08x), scalar twin %.9g (0x%08x)",
                             kern_isa_name(isas[li]), fn_name[f], x[i], yv[i], kern__f32_bits(yv[i]),
                             ys[i], kern__f32_bits(ys[i]));
            }
        }
        KT_CHECK(bad_bits == 0, "%s %s: %lld of %lld differ from the scalar twin", kern_isa_name(isas[li]),
                 fn_name[f], (long long)bad_bits, (long long)n);
        /* odd lengths: the masked tail gives the same bits too */
        {
            int64_t len;
            for (len = 1; len < 40; len += 3) {
                float t[40];
                kt_poison(t, sizeof t);
                v(x + n - 50, t, len);
                for (i = 0; i < len; i++)
                    KT_CHECK(isnan(ys[n - 50 + i]) ? isnan(t[i]) : kern__f32_bits(t[i]) == kern__f32_bits(ys[n - 50 + i]),
                             "%s %s tail len %lld", kern_isa_name(isas[li]), fn_name[f], (long long)len);
            }
        }
    }
    free(x);
    free(ys);
    free(yv);
}

#define X(i, name)                                                            \
    KT_TEST(math_##name) { check_fn(i); }
FN_LIST(X)
#undef X

/* ------------------------------------------------------ special values */

static uint32_t bits1(sfn f, float x) { return kern__f32_bits(f(x)); }

KT_TEST(math_special_values) {
    /* signed zeros kept where the math says so */
    KT_CHECK(bits1(kern__s_gelu, -0.0f) == 0x80000000u);
    KT_CHECK(bits1(kern__s_erf, -0.0f) == 0x80000000u);
    KT_CHECK(bits1(kern__s_tanh, -0.0f) == 0x80000000u);
    KT_CHECK(bits1(kern__s_silu, -0.0f) == 0x80000000u);
    KT_CHECK(bits1(kern__s_gelu_tanh, -0.0f) == 0x80000000u);
    KT_CHECK(bits1(kern__s_relu, -0.0f) == 0x80000000u);
    /* erf-GELU of large negative x is -0, not +0 */
    KT_CHECK(bits1(kern__s_gelu, -30.0f) == 0x80000000u);
    KT_CHECK(bits1(kern__s_gelu, -100.0f) == 0x80000000u);
    KT_CHECK(bits1(kern__s_gelu, -1e30f) == 0x80000000u);
    KT_CHECK(bits1(kern__s_gelu, -FLT_MAX) == 0x80000000u);
    /* the cancellation cases of the old forms */
    {
        float g5 = kern__s_gelu(-5.0f), t8 = kern__s_gelu_tanh(-8.0f), t72 = kern__s_gelu_tanh(-7.2f);
        KT_CHECK(fabs(g5 / -1.4332e-6 - 1) < 1e-3, "gelu(-5) = %.9g", g5);
        KT_CHECK(fabs(t8 / -3.108e-21 - 1) < 2e-3, "gelu_tanh(-8) = %.9g", t8);
        KT_CHECK(fabs(t72 / -1.999e-16 - 1) < 2e-3, "gelu_tanh(-7.2) = %.9g", t72);
    }
    /* gelu_tanh_grad finite up to FLT_MAX */
    KT_CHECK(kern__s_gelu_tanh_grad(1e19f) == 1.0f, "%g", kern__s_gelu_tanh_grad(1e19f));
    KT_CHECK(kern__s_gelu_tanh_grad(-1e19f) == 0.0f, "%g", kern__s_gelu_tanh_grad(-1e19f));
    KT_CHECK(kern__s_gelu_tanh_grad(FLT_MAX) == 1.0f);
    KT_CHECK(kern__s_gelu_tanh_grad(-FLT_MAX) == 0.0f);
    KT_CHECK(kern__s_silu_grad(FLT_MAX) == 1.0f && kern__s_silu_grad(-FLT_MAX) == 0.0f);
    /* infinities follow the formulas as PyTorch does */
    KT_CHECK(kern__s_gelu(INFINITY) == INFINITY && isnan(kern__s_gelu(-INFINITY)));
    KT_CHECK(kern__s_gelu_tanh(INFINITY) == INFINITY && isnan(kern__s_gelu_tanh(-INFINITY)));
    KT_CHECK(isnan(kern__s_gelu_grad(INFINITY)) && isnan(kern__s_gelu_grad(-INFINITY)));
    KT_CHECK(isnan(kern__s_gelu_tanh_grad(INFINITY)) && isnan(kern__s_gelu_tanh_grad(-INFINITY)));
    KT_CHECK(kern__s_silu(INFINITY) == INFINITY && isnan(kern__s_silu(-INFINITY)));
    KT_CHECK(kern__s_sigmoid(INFINITY) == 1.0f && kern__s_sigmoid(-INFINITY) == 0.0f);
    KT_CHECK(kern__s_tanh(INFINITY) == 1.0f && kern__s_tanh(-INFINITY) == -1.0f);
    KT_CHECK(kern__s_erf(INFINITY) == 1.0f && kern__s_erf(-INFINITY) == -1.0f);
    KT_CHECK(kern__s_exp(-INFINITY) == 0.0f && kern__s_exp(INFINITY) == INFINITY);
    KT_CHECK(kern__s_exp2(-INFINITY) == 0.0f && kern__s_exp2_neg(-INFINITY) == 0.0f);
    KT_CHECK(kern__s_exp2(128.0f) == INFINITY && kern__s_exp2(-150.0f) == 0.0f);
    KT_CHECK(kern__s_exp2(-149.0f) == 1e-45f && kern__s_exp(0.0f) == 1.0f && kern__s_exp2_neg(0.0f) == 1.0f);
    /* exact values the families rely on */
    KT_CHECK(kern__s_gelu_grad(0.0f) == 0.5f && kern__s_gelu_tanh_grad(0.0f) == 0.5f);
    KT_CHECK(kern__s_gelu(30.0f) == 30.0f && kern__s_gelu_tanh(30.0f) == 30.0f);
    KT_CHECK(kern__s_gelu_grad(30.0f) == 1.0f && kern__s_gelu_tanh_grad(30.0f) == 1.0f);
    KT_CHECK(kern__s_sigmoid(0.0f) == 0.5f && kern__s_silu_grad(0.0f) == 0.5f);
    {
        static const sfn all[] = {kern__s_exp, kern__s_exp2, kern__s_exp2_neg, kern__s_erf,
                                  kern__s_tanh, kern__s_sigmoid, kern__s_silu, kern__s_silu_grad,
                                  kern__s_gelu, kern__s_gelu_grad, kern__s_gelu_tanh,
                                  kern__s_gelu_tanh_grad, kern__s_relu};
        size_t k;
        for (k = 0; k < sizeof all / sizeof all[0]; k++) KT_CHECK(isnan(all[k](NAN)), "%s(NaN)", fn_name[k]);
    }
}

/* The activation dispatch is the functions themselves. */
KT_TEST(math_act_dispatch) {
    float x[37], y[37];
    int i, a;
    kt_rng g = kt_rng_make(3);
    for (i = 0; i < 37; i++) x[i] = (float)kt_uniform(&g, -8, 8);
    for (a = 0; a < KERN_ACT_COUNT; a++) {
        kern__s_act_row(x, y, 37, (kern_act)a);
        for (i = 0; i < 37; i++) {
            float want = a == KERN_ACT_GELU ? kern__s_gelu(x[i])
                       : a == KERN_ACT_GELU_TANH ? kern__s_gelu_tanh(x[i])
                       : a == KERN_ACT_RELU ? kern__s_relu(x[i])
                       : a == KERN_ACT_SILU ? kern__s_silu(x[i]) : x[i];
            KT_CHECK(kern__f32_bits(y[i]) == kern__f32_bits(want), "act %d", a);
            KT_CHECK(kern__f32_bits(kern__s_act(x[i], (kern_act)a)) == kern__f32_bits(want), "act %d", a);
        }
#ifdef KERN_X86
        if (kern_isa_available(KERN_ISA_AVX2)) {
            float z[37];
            kern__v_act_row__avx2(x, z, 37, (kern_act)a);
            kt_assert_bytes_equal("act_row avx2", y, z, sizeof z);
        }
        if (kern_isa_available(KERN_ISA_AVX512)) {
            float z[37];
            kern__v_act_row__avx512(x, z, 37, (kern_act)a);
            kt_assert_bytes_equal("act_row avx512", y, z, sizeof z);
        }
#endif
#ifdef KERN_NEON
        {
            float z[37];
            kern__v_act_row__neon(x, z, 37, (kern_act)a);
            kt_assert_bytes_equal("act_row neon", y, z, sizeof z);
        }
#endif
    }
}

/* ================================================ the rest of the layer */

/* Per-ISA entry points the tests call (the always_inline helpers need a
 * caller compiled for their target). */
typedef struct isa_ops {
    const char *name;
    int vw;
    void (*load)(const void *p, kern_dtype dt, int n, float *out); /* VW floats */
    void (*store)(void *p, kern_dtype dt, const float *in, int n);
    void (*tile)(const kern__epi *e, int64_t i0, int64_t j0, const float *t, int64_t ldt, int m, int n);
    float (*absmax)(const void *x, kern_dtype dt, int64_t n, int64_t *bad);
    void (*quant)(const void *x, kern_dtype dt, int64_t n, float inv, int zp, int lo, int hi, uint8_t *q);
} isa_ops;

static void ld_scalar(const void *p, kern_dtype dt, int n, float *out) { out[0] = n > 0 ? kern__s_load_f32(p, dt, n) : 0.0f; }
static void st_scalar(void *p, kern_dtype dt, const float *in, int n) { if (n > 0) kern__s_store_f32(p, dt, in[0], n, 0); }
static const isa_ops ops_scalar = {"scalar", 1, ld_scalar, st_scalar, kern__s_epi_tile, kern__s_absmax, kern__s_quant_row};
#ifdef KERN_X86
KERN_TARGET_AVX2 static void ld_avx2(const void *p, kern_dtype dt, int n, float *out) {
    _mm256_storeu_ps(out, kern__v_load_f32__avx2(p, dt, n));
}
KERN_TARGET_AVX2 static void st_avx2(void *p, kern_dtype dt, const float *in, int n) {
    kern__v_store_f32__avx2(p, dt, _mm256_loadu_ps(in), n, 0);
}
KERN_TARGET_AVX512 static void ld_avx512(const void *p, kern_dtype dt, int n, float *out) {
    _mm512_storeu_ps(out, kern__v_load_f32__avx512(p, dt, n));
}
KERN_TARGET_AVX512 static void st_avx512(void *p, kern_dtype dt, const float *in, int n) {
    kern__v_store_f32__avx512(p, dt, _mm512_loadu_ps(in), n, 0);
}
static const isa_ops ops_avx2 = {"avx2", 8, ld_avx2, st_avx2, kern__v_epi_tile__avx2, kern__v_absmax__avx2, kern__v_quant_row__avx2};
static const isa_ops ops_avx512 = {"avx512", 16, ld_avx512, st_avx512, kern__v_epi_tile__avx512, kern__v_absmax__avx512, kern__v_quant_row__avx512};
#endif
#ifdef KERN_NEON
static void ld_neon(const void *p, kern_dtype dt, int n, float *out) { vst1q_f32(out, kern__v_load_f32__neon(p, dt, n)); }
static void st_neon(void *p, kern_dtype dt, const float *in, int n) { kern__v_store_f32__neon(p, dt, vld1q_f32(in), n, 0); }
static const isa_ops ops_neon = {"neon", 4, ld_neon, st_neon, kern__v_epi_tile__neon, kern__v_absmax__neon, kern__v_quant_row__neon};
#endif

/* The ops of every ISA the machine runs (scalar first). */
static int all_ops(const isa_ops **out) {
    int n = 0;
    out[n++] = &ops_scalar;
#ifdef KERN_X86
    if (kern_isa_available(KERN_ISA_AVX2)) out[n++] = &ops_avx2;
    if (kern_isa_available(KERN_ISA_AVX512)) out[n++] = &ops_avx512;
#endif
#ifdef KERN_NEON
    if (kern_isa_available(KERN_ISA_NEON)) out[n++] = &ops_neon;
#endif
    return n;
}

static uint32_t rand_bits(kt_rng *g) {
    uint32_t u = (uint32_t)kt_next(g);
    switch (u % 8) { /* specials often */
    case 0: return u & 0x807fffffu;                 /* +-0 / subnormal */
    case 1: return (u & 0x80000000u) | 0x7f800000u; /* +-Inf */
    case 2: return u | 0x7f800000u;                 /* NaN (or Inf) */
    default: return u;
    }
}

KT_TEST(load_store_dtypes) {
    const isa_ops *ops[4];
    int no = all_ops(ops), o, d, n, k, rep;
    static const kern_dtype dts[] = {KERN_F32, KERN_BF16, KERN_F16};
    kt_rng g = kt_rng_make(11);
    for (o = 0; o < no; o++)
        for (d = 0; d < 3; d++)
            for (n = 0; n <= ops[o]->vw; n++)
                for (rep = 0; rep < 50; rep++) {
                    const kern_dtype dt = dts[d];
                    const size_t es = kern_dtype_size(dt);
                    unsigned char *src = (unsigned char *)kt_alloc(16 * es, "src");
                    unsigned char *dst = (unsigned char *)kt_alloc(16 * es, "dst");
                    float got[16], in[16];
                    kt_context("%s %s n=%d", ops[o]->name, kern_dtype_name(dt), n);
                    for (k = 0; k < 16; k++) {
                        uint32_t b = rand_bits(&g);
                        if (dt == KERN_F32) memcpy(src + 4 * k, &b, 4);
                        else { uint16_t h = (uint16_t)b; memcpy(src + 2 * k, &h, 2); }
                        in[k] = kern__bits_f32(rand_bits(&g));
                    }
                    ops[o]->load(src, dt, n, got);
                    for (k = 0; k < ops[o]->vw; k++) {
                        float want = k < n ? kern__s_load_f32(src + k * es, dt, 1) : 0.0f;
                        KT_CHECK(kern__f32_bits(got[k]) == kern__f32_bits(want), "load lane %d: 0x%08x want 0x%08x", k,
                                 kern__f32_bits(got[k]), kern__f32_bits(want));
                    }
                    kt_poison(dst, 16 * es);
                    ops[o]->store(dst, dt, in, n);
                    for (k = 0; k < 16; k++) {
                        unsigned char want[4];
                        if (k < n && k < ops[o]->vw) kern__s_store_f32(want, dt, in[k], 1, 0);
                        else memset(want, 0xFF, 4);
                        KT_CHECK(!memcmp(dst + k * es, want, es), "store element %d", k);
                    }
                    kt_free(src);
                    kt_free(dst);
                }
}

/* Double-precision value of the epilogue for one element (act through the
 * scalar twin, since the act itself is tested above). */
static double epi_ref(const kern__epi *e, int64_t i, int64_t j, float acc) {
    double v = (double)e->alpha * acc;
    float f;
    if (e->src) v += (double)e->beta * kt_get(e->src, e->src_dt, i * e->src_rs + (j - e->src_j0) * e->src_cs);
    if (e->bias) v += kt_get(e->bias, e->bias_dt, (e->bias_per_row ? i : j) * e->bias_st);
    f = kern__s_act((float)v, e->act);
    v = f;
    if (e->res) v += kt_get(e->res, e->res_dt, i * e->res_rs + j * e->res_cs);
    return v * e->out_scale;
}

KT_TEST(epilogue_every_isa) {
    const isa_ops *ops[4];
    int no = all_ops(ops), o, c;
    static const kern_dtype dts[] = {KERN_F32, KERN_BF16, KERN_F16};
    kt_rng g = kt_rng_make(12);
    for (c = 0; c < 400; c++) {
        const int M = (int)kt_randint(&g, 1, 6), N = (int)kt_randint(&g, 1, 41);
        const int64_t i0 = kt_randint(&g, 0, 3), j0 = kt_randint(&g, 0, 5);
        const int64_t rows = i0 + M, cols = j0 + N + 3;
        const int dcs = kt_randint(&g, 0, 4) ? 1 : 2, alias = kt_randint(&g, 0, 5) == 0;
        kern__epi e;
        float *t = (float *)kt_alloc(sizeof(float) * (size_t)(M * 48), "tile");
        void *src, *bias, *res, *ref_out;
        size_t dsz;
        int64_t k, n_out;
        kern__epi_init(&e);
        e.alpha = kt_randint(&g, 0, 2) ? 1.0f : (float)kt_uniform(&g, -2, 2);
        e.dst_dt = dts[kt_randint(&g, 0, 3)];
        e.dst_cs = dcs;
        e.dst_rs = cols * dcs + kt_randint(&g, 0, 3);
        e.act = (kern_act)kt_randint(&g, 0, KERN_ACT_COUNT);
        e.out_scale = kt_randint(&g, 0, 2) ? 1.0f : (float)kt_uniform(&g, 0.25, 3);
        dsz = kern_dtype_size(e.dst_dt);
        n_out = rows * e.dst_rs + 8;
        ref_out = kt_alloc((size_t)n_out * dsz, "dst");
        src = bias = res = NULL;
        if (kt_randint(&g, 0, 2)) { /* beta C */
            e.src_dt = dts[kt_randint(&g, 0, 3)];
            e.src_cs = kt_randint(&g, 1, 3);
            e.src_rs = cols * e.src_cs;
            e.beta = (float)kt_uniform(&g, -1, 1);
            src = kt_alloc((size_t)(rows * e.src_rs + 8) * kern_dtype_size(e.src_dt), "src");
            kt_fill_normal(&g, src, e.src_dt, rows * e.src_rs + 8, 1.0);
            e.src = (const char *)src;
        }
        if (kt_randint(&g, 0, 2)) {
            e.bias_dt = dts[kt_randint(&g, 0, 3)];
            e.bias_per_row = (int)kt_randint(&g, 0, 2);
            e.bias_st = kt_randint(&g, 0, 3); /* 0 broadcasts */
            bias = kt_alloc((size_t)(cols * 3 + rows * 3 + 8) * kern_dtype_size(e.bias_dt), "bias");
            kt_fill_normal(&g, bias, e.bias_dt, cols * 3 + rows * 3 + 8, 1.0);
            e.bias = (const char *)bias;
        }
        kt_fill_normal(&g, t, KERN_F32, M * 48, 2.0);
        for (k = 0; k < 4; k++) t[kt_randint(&g, 0, M * 48)] = kern__bits_f32(rand_bits(&g));
        if (kt_randint(&g, 0, 2)) {
            e.res_dt = alias ? e.dst_dt : dts[kt_randint(&g, 0, 3)];
            e.res_cs = alias ? e.dst_cs : kt_randint(&g, 0, 3);
            e.res_rs = alias ? e.dst_rs : cols * (e.res_cs ? e.res_cs : 1);
            if (!alias) {
                res = kt_alloc((size_t)(rows * e.res_rs + cols * 3 + 8) * kern_dtype_size(e.res_dt), "res");
                kt_fill_normal(&g, res, e.res_dt, rows * e.res_rs + cols * 3 + 8, 1.0);
                e.res = (const char *)res;
            }
        }
        kt_context("case %d M=%d N=%d act=%s dst=%s cs=%d alias=%d", c, M, N, kern_act_name(e.act),
                   kern_dtype_name(e.dst_dt), dcs, alias);
        {
            /* the scalar twin first, then every ISA must give its bytes */
            void *base = kt_alloc((size_t)n_out * dsz, "init");
            kt_fill_normal(&g, base, e.dst_dt, n_out, 1.0);
            for (o = 0; o < no; o++) {
                void *out = o == 0 ? ref_out : kt_alloc((size_t)n_out * dsz, "out");
                memcpy(out, base, (size_t)n_out * dsz);
                e.dst = (char *)out;
                if (alias && e.res_dt) e.res = (const char *)out;
                ops[o]->tile(&e, i0, j0, t, 48, M, N);
                if (o > 0) {
                    kt_context("case %d %s", c, ops[o]->name);
                    kt_assert_bytes_equal("epilogue vs scalar twin", out, ref_out, (size_t)n_out * dsz);
                    kt_free(out);
                }
            }
            /* the scalar twin against a double evaluation */
            {
                int64_t i, j;
                kern__epi er = e;
                if (alias && e.res_dt) er.res = (const char *)base;
                for (i = 0; i < M; i++)
                    for (j = 0; j < N; j++) {
                        double w = epi_ref(&er, i0 + i, j0 + j, t[i * 48 + j]);
                        unsigned char wb[8];
                        double got;
                        kt_set(wb, e.dst_dt, 0, w); /* rounded to the output dtype */
                        w = kt_get(wb, e.dst_dt, 0);
                        got = kt_get(ref_out, e.dst_dt, (i0 + i) * e.dst_rs + (j0 + j) * e.dst_cs);
                        kt_tol_t tol = kt_tol(e.dst_dt);
                        KT_CHECK((isnan(w) && isnan(got)) || got == w ||
                                     fabs(got - w) <= 4 * (tol.atol + tol.rtol * fabs(w)) + 1e-5 * fabs(w),
                                 "[%lld,%lld] got %.9g want %.9g", (long long)i, (long long)j, got, w);
                    }
                /* nothing outside the m x n block was written */
                for (i = 0; i < rows; i++)
                    for (j = 0; j < e.dst_rs; j++) {
                        int inside = i >= i0 && j % dcs == 0 && j / dcs >= j0 && j / dcs < j0 + N;
                        if (!inside)
                            KT_CHECK(!memcmp((char *)ref_out + (i * e.dst_rs + j) * dsz, (char *)base + (i * e.dst_rs + j) * dsz, dsz),
                                     "wrote outside at [%lld,%lld]", (long long)i, (long long)j);
                    }
            }
            kt_free(base);
        }
        kt_free(t);
        kt_free(ref_out);
        kt_free(src);
        kt_free(bias);
        kt_free(res);
    }
}

KT_TEST(quant_rule) {
    const isa_ops *ops[4];
    int no = all_ops(ops), o, c;
    static const kern_dtype dts[] = {KERN_F32, KERN_BF16, KERN_F16};
    kt_rng g = kt_rng_make(13);
    KT_CHECK(kern__quant_scale(0.0f) == 1.0f);
    KT_CHECK(kern__quant_scale(127.0f) == 1.0f);
    KT_CHECK(kern__quant_scale(1e-40f) == 1.17549435e-38f, "FLT_MIN clamp");
    KT_CHECK(kern__quant_scale_div(255.0f, 255.0f) == 1.0f);
    for (c = 0; c < 300; c++) {
        const kern_dtype dt = dts[c % 3];
        const int64_t n = kt_randint(&g, 0, 70);
        const int asym = c % 5 == 4;
        const size_t es = kern_dtype_size(dt);
        void *x = kt_alloc((size_t)n * es + 1, "x");
        uint8_t *q0 = (uint8_t *)kt_alloc((size_t)n + 1, "q0");
        double scale = c % 7 == 0 ? 1e-40 : pow(10.0, kt_uniform(&g, -3, 3));
        int64_t k, bad0 = 0, bad;
        float amax0 = 0, amax, s, inv;
        int zp = asym ? (int)kt_randint(&g, 0, 256) : 0, lo = asym ? 0 : -127, hi = asym ? 255 : 127;
        kt_fill_normal(&g, x, dt, n, scale);
        for (k = 0; k < n; k++)
            if (kt_randint(&g, 0, 20) == 0) kt_set(x, dt, k, kt_randint(&g, 0, 3) == 0 ? NAN : (k & 1 ? INFINITY : -INFINITY));
        for (k = 0; k < n; k++) {
            double v = kt_get(x, dt, k);
            if (!isfinite(v)) bad0++;
            else if (fabs(v) > amax0) amax0 = (float)fabs(v);
        }
        s = kern__quant_scale(amax0);
        inv = 1.0f / s;
        kt_context("case %d %s n=%lld asym=%d", c, kern_dtype_name(dt), (long long)n, asym);
        for (o = 0; o < no; o++) {
            uint8_t *q = (uint8_t *)kt_alloc((size_t)n + 1, "q");
            amax = ops[o]->absmax(x, dt, n, &bad);
            KT_CHECK(amax == amax0 && bad == bad0, "%s absmax %g want %g, bad %lld want %lld", ops[o]->name, amax,
                     amax0, (long long)bad, (long long)bad0);
            kt_poison(q, (size_t)n + 1);
            ops[o]->quant(x, dt, n, inv, zp, lo, hi, q);
            for (k = 0; k < n; k++) {
                float v = (float)kt_get(x, dt, k) * inv; /* the rule, written out */
                int want;
                if (v != v) v = 0.0f;
                if (v < (float)(lo - zp)) v = (float)(lo - zp);
                if (v > (float)(hi - zp)) v = (float)(hi - zp);
                want = ((int)nearbyintf(v) + zp) & 0xff;
                KT_CHECK(q[k] == want, "%s q[%lld] = %d want %d (x=%g)", ops[o]->name, (long long)k, q[k], want,
                         kt_get(x, dt, k));
            }
            KT_CHECK(q[n] == 0xFF, "%s wrote past n", ops[o]->name);
            kt_free(q);
        }
        kt_free(x);
        kt_free(q0);
    }
}

/* The per-family pattern of docs/internals.md: one const function table per
 * level, picked once from the context's level. */
typedef struct kern__demo_fns {
    const char *name;
    void (*act_row)(const float *x, float *y, int64_t n, kern_act act);
    void (*epi_tile)(const kern__epi *e, int64_t i0, int64_t j0, const float *t, int64_t ldt, int m, int n);
} kern__demo_fns;
static const kern__demo_fns kern__demo_fns_scalar = {"scalar", kern__s_act_row, kern__s_epi_tile};
#ifdef KERN_X86
static const kern__demo_fns kern__demo_fns_avx2 = {"avx2", kern__v_act_row__avx2, kern__v_epi_tile__avx2};
static const kern__demo_fns kern__demo_fns_avx512 = {"avx512", kern__v_act_row__avx512, kern__v_epi_tile__avx512};
#endif
#ifdef KERN_NEON
static const kern__demo_fns kern__demo_fns_neon = {"neon", kern__v_act_row__neon, kern__v_epi_tile__neon};
#endif
static const kern__demo_fns *kern__demo_fns_for(kern_isa isa) {
    switch (isa) {
#ifdef KERN_X86
    case KERN_ISA_AMX:
    case KERN_ISA_AVX512_BF16: /* a family with BF16 bodies has its own table here */
    case KERN_ISA_AVX512_VNNI:
    case KERN_ISA_AVX512: return &kern__demo_fns_avx512;
    case KERN_ISA_AVX2_VNNI:
    case KERN_ISA_AVX2: return &kern__demo_fns_avx2;
#endif
#ifdef KERN_NEON
    case KERN_ISA_NEON_BF16:
    case KERN_ISA_NEON_DOT:
    case KERN_ISA_NEON: return &kern__demo_fns_neon;
#endif
    default: return &kern__demo_fns_scalar;
    }
}

KT_TEST(fns_table_pattern) {
    float x[45], y0[45], y[45];
    int i;
    kt_rng g = kt_rng_make(5);
    for (i = 0; i < 45; i++) x[i] = (float)kt_uniform(&g, -6, 6);
    kern__s_act_row(x, y0, 45, KERN_ACT_GELU);
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        const kern__demo_fns *f = kern__demo_fns_for(kern_ctx_isa(ctx));
        kt_context("%s runs %s", kern_isa_name(isa), f->name);
        KT_CHECK(isa == KERN_ISA_SCALAR ? f == &kern__demo_fns_scalar : f != &kern__demo_fns_scalar);
        f->act_row(x, y, 45, KERN_ACT_GELU);
        kt_assert_bytes_equal("gelu row", y, y0, sizeof y);
    }
}

KT_MAIN()
