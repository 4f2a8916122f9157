/* math_sweep.c — exhaustive accuracy of the internal math layer: every one
 * of the 2^32 f32 inputs through the AVX2 version (bit-identical to the
 * scalar twin and every other ISA, see tests/test_math.c) against a double
 * reference. Not part of CI (minutes per function); run by hand after
 * changing gen/templates/kern_math.c.in or a table, and update the figures
 * in kern_base.h and docs/internals.md:
 *
 *     cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude tests/math_sweep.c -o build/math_sweep -lm -lpthread
 *     build/math_sweep [function ...]
 *
 * Metric as tests/test_math.c: ulps of the exact result (2^-149 below
 * 2^-126); the gradients in ulps of their largest term; exp2_neg below
 * -126 as an absolute error in units of 2^-126; gelu_tanh and its gradient
 * also as the ratio to their bound 3 + 2.6 |2u|. */
#define KERN_IMPLEMENTATION
#include "kern_base.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef KERN_X86
enum { F_EXP, F_EXP2, F_EXP2_NEG, F_ERF, F_TANH, F_SIGMOID, F_SILU, F_SILU_GRAD, F_GELU, F_GELU_GRAD,
       F_GELU_TANH, F_GELU_TANH_GRAD, F_N };
static const char *names[F_N] = {"exp", "exp2", "exp2_neg", "erf", "tanh", "sigmoid", "silu",
                                 "silu_grad", "gelu", "gelu_grad", "gelu_tanh", "gelu_tanh_grad"};

KERN_TARGET_AVX2 static void run_block(int f, const float *x, float *y) {
    int i;
    for (i = 0; i < 4096; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i), r;
        switch (f) {
        case F_EXP: r = kern__v_exp__avx2(v); break;
        case F_EXP2: r = kern__v_exp2__avx2(v); break;
        case F_EXP2_NEG: r = kern__v_exp2_neg__avx2(v); break;
        case F_ERF: r = kern__v_erf__avx2(v); break;
        case F_TANH: r = kern__v_tanh__avx2(v); break;
        case F_SIGMOID: r = kern__v_sigmoid__avx2(v); break;
        case F_SILU: r = kern__v_silu__avx2(v); break;
        case F_SILU_GRAD: r = kern__v_silu_grad__avx2(v); break;
        case F_GELU: r = kern__v_gelu__avx2(v); break;
        case F_GELU_GRAD: r = kern__v_gelu_grad__avx2(v); break;
        case F_GELU_TANH: r = kern__v_gelu_tanh__avx2(v); break;
        default: r = kern__v_gelu_tanh_grad__avx2(v); break;
        }
        _mm256_storeu_ps(y + i, r);
    }
}

static double sig(double v) { return v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v)); }
static double gtv(double x) { return 2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x); }
static double ref(int f, double x, double *scale) {
    *scale = 0;
    switch (f) {
    case F_EXP: return exp(x);
    case F_EXP2: case F_EXP2_NEG: return exp2(x);
    case F_ERF: return erf(x);
    case F_TANH: return tanh(x);
    case F_SIGMOID: return sig(x);
    case F_SILU: return x * sig(x);
    case F_SILU_GRAD: {
        double s = sig(x), t = x * s * (1 - s);
        *scale = fmax(fabs(t), s);
        return s + t;
    }
    case F_GELU: return x * 0.5 * erfc(-x * 0.70710678118654752);
    case F_GELU_GRAD: {
        double a = 0.5 * erfc(-x * 0.70710678118654752), b = x * exp(-0.5 * x * x) * 0.3989422804014327;
        *scale = fmax(fabs(b), a);
        return a + b;
    }
    case F_GELU_TANH: return x * sig(gtv(x));
    default: {
        double s = sig(gtv(x)), t = x * s * (1 - s) * 2.0 * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
        *scale = fmax(fabs(t), s);
        return s + t;
    }
    }
}
static double ulp_err(float got, double r, double scale) {
    double a = fabs(r), ulp;
    int e;
    if (isnan(r)) return isnan(got) ? 0.0 : 1e30;
    if (isnan(got)) return 1e30;
    if (a >= (double)FLT_MAX * (1.0 + ldexp(1.0, -25)) || isinf(r))
        return (isinf(got) && (got > 0) == (r > 0)) ? 0.0 : 1e30;
    if (isinf(got)) return 1e30;
    if (scale > a) a = scale;
    if (a == 0) return got == 0 ? 0.0 : fabs((double)got) / ldexp(1.0, -149);
    frexp(a, &e);
    ulp = ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
    return fabs((double)got - r) / ulp;
}

static void sweep(int f) {
    static float x[4096], y[4096];
    uint64_t u;
    double worst = 0, wx = 0, worst_ratio = 0, rx = 0, flush = 0, small_v = 0;
    for (u = 0; u < 0x100000000ull; u += 4096) {
        int i;
        for (i = 0; i < 4096; i++) x[i] = kern__bits_f32((uint32_t)(u + (uint64_t)i));
        if (f == F_EXP2_NEG)
            for (i = 0; i < 4096; i++)
                if (x[i] > 127.0f) x[i] = 0.0f;
        run_block(f, x, y);
        for (i = 0; i < 4096; i++) {
            double s, r, e;
            if (isnan(x[i])) {
                if (!isnan(y[i])) worst = 1e30, wx = x[i];
                continue;
            }
            r = ref(f, x[i], &s);
            if (f == F_EXP2_NEG && x[i] < -126.0f) {
                e = fabs(y[i] - r) / ldexp(1.0, -126);
                if (e > flush) flush = e;
                continue;
            }
            e = ulp_err(y[i], r, s);
            if (e > worst) worst = e, wx = x[i];
            if (f == F_GELU_TANH || f == F_GELU_TANH_GRAD) {
                double v = fabs(gtv(x[i])), ratio = e / (3.0 + 2.6 * fmin(v, 1e6));
                if (ratio > worst_ratio) worst_ratio = ratio, rx = x[i];
                if (v <= 1.0 && e > small_v) small_v = e;
            }
        }
    }
    printf("%-15s max %.3f ulp at x=%.9g", names[f], worst, wx);
    if (f == F_EXP2_NEG) printf("; x < -126: max |err| %.3f * 2^-126", flush);
    if (f == F_GELU_TANH || f == F_GELU_TANH_GRAD)
        printf("; max %.3f ulp for |2u| <= 1; max %.3f of the bound 3 + 2.6|2u| (x=%.9g)", small_v, worst_ratio, rx);
    printf("\n");
    fflush(stdout);
}
#endif

int main(int argc, char **argv) {
#ifdef KERN_X86
    int f, a;
    if (!kern_isa_available(KERN_ISA_AVX2)) return 1;
    for (f = 0; f < F_N; f++) {
        int want = argc < 2;
        for (a = 1; a < argc; a++)
            if (!strcmp(argv[a], names[f])) want = 1;
        if (want) sweep(f);
    }
#else
    (void)argc;
    (void)argv;
#endif
    return 0;
}
