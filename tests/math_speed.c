/* math_speed.c — throughput of the shared math layer against the per-family
 * copies it replaced (AVX2, one thread; every family is on the layer now, so
 * no copy is left: the before/after figures are in docs/internals.md). Not a
 * test; run by hand:
 *
 *     cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Ikernels tests/math_speed.c -o build/math_speed -lm -lpthread
 *     build/math_speed [scale]
 *
 * Each row: ns per 8 floats (lower is better) over a 4096-float array in
 * L1, inputs N(0, scale^2) (scale 1 default: what a LayerNorm output looks
 * like), the minimum over 2000 passes. */
#define KERN_IMPLEMENTATION
#include "kern_gemm.h"
#include "kern_qgemm.h"
#include "kern_sdpa.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 4096
#define REPS 2000

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#ifdef KERN_X86
typedef __m256 (*vfn)(__m256);
#define WRAP(name, expr)                                                      \
    KERN_TARGET_AVX2 static __m256 name(__m256 x) { return expr; }
WRAP(new_exp2_neg, kern__v_exp2_neg__avx2(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x))))

/* The minimum over many short passes: robust to preemption on a busy
 * machine (other tenants on the same core still slow every pass). */
KERN_TARGET_AVX2 static double run(vfn f, const float *x, float *y) {
    double best = 1e30;
    int r, i;
    for (r = 0; r < REPS; r++) {
        double t0 = now();
        for (i = 0; i < N; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
        t0 = now() - t0;
        if (t0 < best) best = t0;
    }
    return best / ((double)N / 8) * 1e9;
}

/* The epilogue: kern__v_epi_tile__avx2 on a 6x16 tile (bias, act,
 * residual), ns per tile (kern_gemm's own store, the old column of
 * docs/internals.md, now is this function). */
typedef struct { int act_new; kern_dtype dt; const char *label; } epi_case;
KERN_TARGET_AVX2 static void epi_speed(void) {
    static float t[6 * 16], bias[64], res[6 * 64], out[6 * 64];
    static uint16_t outh[6 * 64];
    static const epi_case cases[] = {
        {KERN_ACT_NONE, KERN_F32, "bias+res f32"},
        {KERN_ACT_GELU, KERN_F32, "bias+gelu+res f32"},
        {KERN_ACT_GELU_TANH, KERN_F32, "bias+gelu_tanh+res f32"},
        {KERN_ACT_NONE, KERN_BF16, "bias+res bf16"},
    };
    size_t c;
    int i;
    for (i = 0; i < 6 * 16; i++) t[i] = (float)((i * 37 % 101) - 50) / 25.0f;
    for (i = 0; i < 64; i++) bias[i] = (float)(i % 7) * 0.1f;
    for (i = 0; i < 6 * 64; i++) res[i] = (float)(i % 11) * 0.05f;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kern__epi e;
        double bn = 1e30;
        int r, k;
        kern__epi_init(&e);
        e.bias = (const char *)bias; e.bias_dt = KERN_F32; e.bias_st = 1;
        e.act = (kern_act)cases[c].act_new;
        e.res = (const char *)res; e.res_dt = KERN_F32; e.res_rs = 64; e.res_cs = 1;
        e.dst = cases[c].dt == KERN_F32 ? (char *)out : (char *)outh; e.dst_dt = cases[c].dt;
        e.dst_rs = 64; e.dst_cs = 1;
        for (r = 0; r < REPS; r++) {
            double t0 = now();
            for (k = 0; k < 16; k++) kern__v_epi_tile__avx2(&e, 0, (k & 3) * 16, t, 16, 6, 16);
            t0 = now() - t0;
            if (t0 < bn) bn = t0;
        }
        printf("  epilogue %-22s %6.1f ns per 6x16 tile\n", cases[c].label, bn / 16 * 1e9);
    }
}
#endif

int main(int argc, char **argv) {
#ifdef KERN_X86
    static float x[N], y[N];
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    int i;
    srand(1);
    for (i = 0; i < N; i++) {
        double u1 = (rand() + 1.0) / (RAND_MAX + 2.0), u2 = rand() / (RAND_MAX + 1.0);
        x[i] = (float)(scale * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    if (!kern_isa_available(KERN_ISA_AVX2)) return 0;
    printf("inputs N(0, %g^2), ns per 8 floats (AVX2), load %s\n", scale, "see /proc/loadavg");
    /* every family is on the layer now: no old copy left to compare with */
    printf("  %-16s new %6.2f\n", "exp2 (x<=0)", run(new_exp2_neg, x, y));
    epi_speed();
#else
    (void)argc;
    (void)argv;
#endif
    return 0;
}
