/* peaks.c — measures the machine's peaks once, for bench/run's "fraction of
 * peak" column, and prints them as JSON (bench/run caches the output in
 * bench/results/peaks.json):
 *
 *   f32   FP32 FMA FLOP/s      register-only vfmadd231ps loop (zmm, else ymm)
 *   bf16  BF16 dot FLOP/s      vdpbf16ps loop (AVX512_BF16 only)
 *   int8  int8 dot OP/s        vpdpbusd loop (AVX512_VNNI, else AVX-VNNI), else
 *                              vpmaddubsw + vpmaddwd (AVX2)
 *   amx_bf16, amx_int8         tdpbf16ps / tdpbusd loops on four independent
 *                              16 x 16 accumulator tiles (the kern_isa AMX
 *                              level only: CPU, OS permission and compiler)
 *   l1, l2, dram               read bandwidth (bytes/s) of a 16 KiB, 256 KiB
 *                              and 256 MiB array per thread, nonzero data;
 *                              dram the better of one sequential stream and
 *                              8 interleaved ones (a core pulls more from
 *                              DRAM with several streams in flight: Zen 3,
 *                              one thread, 14-15 GB/s one stream, 20-24
 *                              with 8, and kern's GEMV reads that fast)
 *   dram_copy                  copy with non-temporal stores (read + written)
 *
 * per thread count (1..N, N from argv[1], default 2), all threads running
 * the same loop at once, one thread pinned per CPU, best of several
 * repetitions (a peak is the best the machine does, and the host is
 * shared). Core-private peaks (compute, L1, L2) add up each thread's rate
 * over its own CPU time, so a busy neighbour process does not lower them;
 * DRAM is bytes over wall time, and never less than with fewer threads.
 * Values are in GFLOP/s, GOP/s or GB/s. A peak the CPU lacks is null.
 *
 *     build/bench/peaks [max_threads]   ->   {"f32": {"1": 116.2, ...}, ...}
 */
#define KERN_IMPLEMENTATION
#include "kern_base.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* This thread's CPU time: what a core-private loop achieves while it runs,
 * whatever else the (shared) machine does. */
static double cputime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define FMA_ITERS 8000000L /* x 12 vfmadd x 32 FLOP (zmm): 3 GFLOP, ~25 ms */

#ifdef KERN_X86
KERN_TARGET_AVX512 static double fma_zmm(long iters) {
    /* distinct starting values: equal ones would be merged by the compiler */
    __m512 a0 = _mm512_set1_ps(1.0f), a1 = _mm512_set1_ps(1.1f), a2 = _mm512_set1_ps(1.2f), a3 = _mm512_set1_ps(1.3f);
    __m512 a4 = _mm512_set1_ps(1.4f), a5 = _mm512_set1_ps(1.5f), a6 = _mm512_set1_ps(1.6f), a7 = _mm512_set1_ps(1.7f);
    __m512 a8 = _mm512_set1_ps(1.8f), a9 = _mm512_set1_ps(1.9f), a10 = _mm512_set1_ps(2.0f), a11 = _mm512_set1_ps(2.1f);
    const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    float out[16];
    for (long i = 0; i < iters; i++) {
        a0 = _mm512_fmadd_ps(a0, x, y); a1 = _mm512_fmadd_ps(a1, x, y);
        a2 = _mm512_fmadd_ps(a2, x, y); a3 = _mm512_fmadd_ps(a3, x, y);
        a4 = _mm512_fmadd_ps(a4, x, y); a5 = _mm512_fmadd_ps(a5, x, y);
        a6 = _mm512_fmadd_ps(a6, x, y); a7 = _mm512_fmadd_ps(a7, x, y);
        a8 = _mm512_fmadd_ps(a8, x, y); a9 = _mm512_fmadd_ps(a9, x, y);
        a10 = _mm512_fmadd_ps(a10, x, y); a11 = _mm512_fmadd_ps(a11, x, y);
    }
    a0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                       _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    a0 = _mm512_add_ps(a0, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    _mm512_storeu_ps(out, a0);
    return (double)out[0];
}
KERN_TARGET_AVX2 static double fma_ymm(long iters) {
    /* distinct starting values: equal ones would be merged by the compiler */
    __m256 a0 = _mm256_set1_ps(1.0f), a1 = _mm256_set1_ps(1.1f), a2 = _mm256_set1_ps(1.2f), a3 = _mm256_set1_ps(1.3f);
    __m256 a4 = _mm256_set1_ps(1.4f), a5 = _mm256_set1_ps(1.5f), a6 = _mm256_set1_ps(1.6f), a7 = _mm256_set1_ps(1.7f);
    __m256 a8 = _mm256_set1_ps(1.8f), a9 = _mm256_set1_ps(1.9f), a10 = _mm256_set1_ps(2.0f), a11 = _mm256_set1_ps(2.1f);
    const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    float out[8];
    for (long i = 0; i < iters; i++) {
        a0 = _mm256_fmadd_ps(a0, x, y); a1 = _mm256_fmadd_ps(a1, x, y);
        a2 = _mm256_fmadd_ps(a2, x, y); a3 = _mm256_fmadd_ps(a3, x, y);
        a4 = _mm256_fmadd_ps(a4, x, y); a5 = _mm256_fmadd_ps(a5, x, y);
        a6 = _mm256_fmadd_ps(a6, x, y); a7 = _mm256_fmadd_ps(a7, x, y);
        a8 = _mm256_fmadd_ps(a8, x, y); a9 = _mm256_fmadd_ps(a9, x, y);
        a10 = _mm256_fmadd_ps(a10, x, y); a11 = _mm256_fmadd_ps(a11, x, y);
    }
    a0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                       _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    a0 = _mm256_add_ps(a0, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    _mm256_storeu_ps(out, a0);
    return (double)out[0];
}
KERN_TARGET_AVX512BF16 static double dpbf16_zmm(long iters) {
    /* distinct starting values: equal ones would be merged by the compiler */
    __m512 a0 = _mm512_set1_ps(1.0f), a1 = _mm512_set1_ps(1.1f), a2 = _mm512_set1_ps(1.2f), a3 = _mm512_set1_ps(1.3f);
    __m512 a4 = _mm512_set1_ps(1.4f), a5 = _mm512_set1_ps(1.5f), a6 = _mm512_set1_ps(1.6f), a7 = _mm512_set1_ps(1.7f);
    __m512 a8 = _mm512_set1_ps(1.8f), a9 = _mm512_set1_ps(1.9f), a10 = _mm512_set1_ps(2.0f), a11 = _mm512_set1_ps(2.1f);
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);
    float out[16];
    for (long i = 0; i < iters; i++) {
        a0 = _mm512_dpbf16_ps(a0, x, y); a1 = _mm512_dpbf16_ps(a1, x, y);
        a2 = _mm512_dpbf16_ps(a2, x, y); a3 = _mm512_dpbf16_ps(a3, x, y);
        a4 = _mm512_dpbf16_ps(a4, x, y); a5 = _mm512_dpbf16_ps(a5, x, y);
        a6 = _mm512_dpbf16_ps(a6, x, y); a7 = _mm512_dpbf16_ps(a7, x, y);
        a8 = _mm512_dpbf16_ps(a8, x, y); a9 = _mm512_dpbf16_ps(a9, x, y);
        a10 = _mm512_dpbf16_ps(a10, x, y); a11 = _mm512_dpbf16_ps(a11, x, y);
    }
    a0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                       _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    a0 = _mm512_add_ps(a0, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    _mm512_storeu_ps(out, a0);
    return (double)out[0];
}
KERN_TARGET_AVX512VNNI static double dpbusd_zmm(long iters) {
    __m512i a0 = _mm512_set1_epi32(1), a1 = _mm512_set1_epi32(2), a2 = _mm512_set1_epi32(3), a3 = _mm512_set1_epi32(4);
    __m512i a4 = _mm512_set1_epi32(5), a5 = _mm512_set1_epi32(6), a6 = _mm512_set1_epi32(7), a7 = _mm512_set1_epi32(8);
    __m512i a8 = _mm512_set1_epi32(9), a9 = _mm512_set1_epi32(10), a10 = _mm512_set1_epi32(11), a11 = _mm512_set1_epi32(12);
    const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
    int out[16];
    for (long i = 0; i < iters; i++) {
        a0 = _mm512_dpbusd_epi32(a0, x, y); a1 = _mm512_dpbusd_epi32(a1, x, y);
        a2 = _mm512_dpbusd_epi32(a2, x, y); a3 = _mm512_dpbusd_epi32(a3, x, y);
        a4 = _mm512_dpbusd_epi32(a4, x, y); a5 = _mm512_dpbusd_epi32(a5, x, y);
        a6 = _mm512_dpbusd_epi32(a6, x, y); a7 = _mm512_dpbusd_epi32(a7, x, y);
        a8 = _mm512_dpbusd_epi32(a8, x, y); a9 = _mm512_dpbusd_epi32(a9, x, y);
        a10 = _mm512_dpbusd_epi32(a10, x, y); a11 = _mm512_dpbusd_epi32(a11, x, y);
    }
    a0 = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                          _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
    a0 = _mm512_add_epi32(a0, _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
    _mm512_storeu_si512((void *)out, a0);
    return (double)out[0];
}
KERN_TARGET_AVXVNNI static double dpbusd_ymm(long iters) {
    __m256i a0 = _mm256_set1_epi32(1), a1 = _mm256_set1_epi32(2), a2 = _mm256_set1_epi32(3), a3 = _mm256_set1_epi32(4);
    __m256i a4 = _mm256_set1_epi32(5), a5 = _mm256_set1_epi32(6), a6 = _mm256_set1_epi32(7), a7 = _mm256_set1_epi32(8);
    __m256i a8 = _mm256_set1_epi32(9), a9 = _mm256_set1_epi32(10), a10 = _mm256_set1_epi32(11), a11 = _mm256_set1_epi32(12);
    const __m256i x = _mm256_set1_epi8(3), y = _mm256_set1_epi8(-2);
    int out[8];
    for (long i = 0; i < iters; i++) {
        a0 = _mm256_dpbusd_avx_epi32(a0, x, y); a1 = _mm256_dpbusd_avx_epi32(a1, x, y);
        a2 = _mm256_dpbusd_avx_epi32(a2, x, y); a3 = _mm256_dpbusd_avx_epi32(a3, x, y);
        a4 = _mm256_dpbusd_avx_epi32(a4, x, y); a5 = _mm256_dpbusd_avx_epi32(a5, x, y);
        a6 = _mm256_dpbusd_avx_epi32(a6, x, y); a7 = _mm256_dpbusd_avx_epi32(a7, x, y);
        a8 = _mm256_dpbusd_avx_epi32(a8, x, y); a9 = _mm256_dpbusd_avx_epi32(a9, x, y);
        a10 = _mm256_dpbusd_avx_epi32(a10, x, y); a11 = _mm256_dpbusd_avx_epi32(a11, x, y);
    }
    a0 = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                          _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7)));
    a0 = _mm256_add_epi32(a0, _mm256_add_epi32(_mm256_add_epi32(a8, a9), _mm256_add_epi32(a10, a11)));
    _mm256_storeu_si256((__m256i *)out, a0);
    return (double)out[0];
}
/* AVX2 without VNNI: vpmaddubsw (32 u8 x s8 products, pairs summed to
 * int16) then vpmaddwd by ones (pairs to int32), kern_qgemm.h's AVX2 form:
 * 64 int8 OP per pair of instructions. 10 chains of two dependent ops. */
KERN_TARGET_AVX2 static double maddubs_ymm(long iters) {
    __m256i a0 = _mm256_set1_epi32(1), a1 = _mm256_set1_epi32(2), a2 = _mm256_set1_epi32(3), a3 = _mm256_set1_epi32(4);
    __m256i a4 = _mm256_set1_epi32(5), a5 = _mm256_set1_epi32(6), a6 = _mm256_set1_epi32(7), a7 = _mm256_set1_epi32(8);
    __m256i a8 = _mm256_set1_epi32(9), a9 = _mm256_set1_epi32(10);
    const __m256i y = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
    int out[8];
    for (long i = 0; i < iters; i++) {
        /* the empty asm keeps each chain in its register (GCC otherwise
         * interleaves them through the stack) */
#define PEAK_MU(a) a = _mm256_madd_epi16(_mm256_maddubs_epi16(a, y), ones); __asm__("" : "+x"(a));
        PEAK_MU(a0) PEAK_MU(a1) PEAK_MU(a2) PEAK_MU(a3) PEAK_MU(a4)
        PEAK_MU(a5) PEAK_MU(a6) PEAK_MU(a7) PEAK_MU(a8) PEAK_MU(a9)
#undef PEAK_MU
    }
    a0 = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                          _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7)));
    a0 = _mm256_add_epi32(a0, _mm256_add_epi32(a8, a9));
    _mm256_storeu_si256((__m256i *)out, a0);
    return (double)out[0];
}
/* Sum of an array with 8 independent accumulators (read bandwidth: two
 * loads per cycle need more adds in flight than the add latency allows
 * with fewer), read as `streams` interleaved parts of n / streams floats
 * (256 bytes of each part in turn). */
KERN_TARGET_AVX2 static double read_ymm(const float *p, size_t n, int reps, int streams) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    __m256 s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    float out[8];
    size_t part = n / (size_t)streams / 64 * 64;
#define PEAK_READ64(q)                                                        \
    s0 = _mm256_add_ps(s0, _mm256_load_ps(q));                                \
    s1 = _mm256_add_ps(s1, _mm256_load_ps(q + 8));                            \
    s2 = _mm256_add_ps(s2, _mm256_load_ps(q + 16));                           \
    s3 = _mm256_add_ps(s3, _mm256_load_ps(q + 24));                           \
    s4 = _mm256_add_ps(s4, _mm256_load_ps(q + 32));                           \
    s5 = _mm256_add_ps(s5, _mm256_load_ps(q + 40));                           \
    s6 = _mm256_add_ps(s6, _mm256_load_ps(q + 48));                           \
    s7 = _mm256_add_ps(s7, _mm256_load_ps(q + 56));
    for (int r = 0; r < reps; r++)
        if (streams == 1) { /* the L1 and L2 loops: no inner loop to pay for */
            for (size_t i = 0; i < part; i += 64) { PEAK_READ64(p + i) }
        } else {
            for (size_t i = 0; i < part; i += 64)
                for (int q = 0; q < streams; q++) { PEAK_READ64(p + (size_t)q * part + i) }
        }
#undef PEAK_READ64
    s0 = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    s4 = _mm256_add_ps(_mm256_add_ps(s4, s5), _mm256_add_ps(s6, s7));
    _mm256_storeu_ps(out, _mm256_add_ps(s0, s4));
    return (double)out[0];
}
KERN_TARGET_AVX2 static double copy_nt_ymm(const float *p, float *q, size_t n, int reps) {
    for (int r = 0; r < reps; r++)
        for (size_t i = 0; i + 16 <= n; i += 16) {
            _mm256_stream_ps(q + i, _mm256_load_ps(p + i));
            _mm256_stream_ps(q + i + 8, _mm256_load_ps(p + i + 8));
        }
    _mm_sfence();
    return (double)q[n / 2];
}
#endif

#ifdef KERN__HAVE_AMX
/* Tiles 0-3 accumulate, 4-5 and 6-7 are the A and B operands (16 x 64
 * bytes each, loaded once from nonzero data). One tdpbf16ps is
 * 16 x 16 x 32 x 2 FLOP, one tdpbusd 16 x 16 x 64 x 2 OP. */
KERN_TARGET_AMX static double amx_loop(long iters, int int8, const float *src) {
    static const uint8_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    float out[256];
    kern__amx_config(rows);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, src, 64); _tile_loadd(5, src + 256, 64);
    _tile_loadd(6, src + 512, 64); _tile_loadd(7, src + 768, 64);
    if (int8)
        for (long i = 0; i < iters; i++) {
            _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7);
            _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
        }
    else
        for (long i = 0; i < iters; i++) {
            _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
        }
    _tile_stored(0, out, 64);
    _tile_release();
    return (double)out[17];
}
#endif

/* ---------------------------------------------------------- threads */

enum { K_F32, K_BF16, K_INT8, K_AMX_BF16, K_AMX_INT8, K_L1, K_L2, K_DRAM, K_DRAM_COPY, K_COUNT };
static const char *kind_name[K_COUNT] = {"f32", "bf16", "int8", "amx_bf16", "amx_int8",
                                         "l1", "l2", "dram", "dram_copy"};
#define AMX_ITERS 400000L /* x 4 tiles x 16 KFLOP (bf16): 26 GFLOP */

typedef struct job {
    int kind;
    uint32_t feat;
    float *buf, *buf2;
    size_t n;
    int reps;
    double work; /* FLOP or bytes done */
    double sink;
    pthread_barrier_t *bar;
    double t0, t1, c0, c1;
    int cpu;
    int streams; /* read kinds: interleaved parts of the array */
} job;

static void *worker(void *p) {
    job *j = (job *)p;
#ifdef __linux__
    { /* one thread per CPU: a fresh thread may otherwise share its parent's
         CPU for a few milliseconds, halving a short measurement */
        cpu_set_t set;
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        CPU_ZERO(&set);
        CPU_SET((int)(j->cpu % (ncpu > 0 ? ncpu : 1)), &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
#endif
    pthread_barrier_wait(j->bar);
    j->t0 = now();
    j->c0 = cputime();
#ifdef KERN_X86
    switch (j->kind) {
    case K_F32:
        if (j->feat & KERN_CPU_AVX512F) { j->sink = fma_zmm(FMA_ITERS); j->work = FMA_ITERS * 12.0 * 32; }
        else { j->sink = fma_ymm(FMA_ITERS); j->work = FMA_ITERS * 12.0 * 16; }
        break;
    case K_BF16:
        j->sink = dpbf16_zmm(FMA_ITERS / 2);
        j->work = FMA_ITERS / 2 * 12.0 * 64;
        break;
    case K_INT8:
        if (j->feat & KERN_CPU_AVX512VNNI) { j->sink = dpbusd_zmm(FMA_ITERS / 2); j->work = FMA_ITERS / 2 * 12.0 * 128; }
        else if (j->feat & KERN_CPU_AVXVNNI) { j->sink = dpbusd_ymm(FMA_ITERS / 2); j->work = FMA_ITERS / 2 * 12.0 * 64; }
        else { j->sink = maddubs_ymm(FMA_ITERS / 2); j->work = FMA_ITERS / 2 * 10.0 * 64; }
        break;
    case K_AMX_BF16:
    case K_AMX_INT8:
#ifdef KERN__HAVE_AMX
        j->sink = amx_loop(AMX_ITERS, j->kind == K_AMX_INT8, j->buf);
        j->work = AMX_ITERS * 4.0 * 16 * 16 * (j->kind == K_AMX_INT8 ? 64 : 32) * 2;
#endif
        break;
    case K_L1: case K_L2: case K_DRAM:
        j->sink = read_ymm(j->buf, j->n, j->reps, j->streams);
        j->work = (double)(j->n / (size_t)j->streams / 64 * 64 * (size_t)j->streams) * 4 * j->reps;
        break;
    case K_DRAM_COPY:
        j->sink = copy_nt_ymm(j->buf, j->buf2, j->n, j->reps);
        j->work = (double)j->n * 8 * j->reps;
        break;
    }
#endif
    j->t1 = now();
    j->c1 = cputime();
    return NULL;
}

/* Runs `kind` on `threads` threads at once; returns G(FL)OP/s or GB/s.
 * Core-private resources (FMA units, L1, L2) are the sum of each thread's
 * rate over its own CPU time; DRAM, shared by all cores, is the total over
 * the wall time of the whole run. */
static double measure(int kind, int threads, uint32_t feat, float **bufs, float **bufs2, int streams) {
    pthread_t th[64];
    job jobs[64];
    pthread_barrier_t bar;
    double t0 = 1e300, t1 = 0, work = 0, rate = 0;
    size_t n = kind == K_L1 ? 4096 : kind == K_L2 ? 65536 : ((size_t)64 << 20);
    int reps = kind == K_L1 ? 200000 : kind == K_L2 ? 12000 : 1;
    if (kind == K_DRAM_COPY) n = (size_t)32 << 20;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].kind = kind;
        jobs[t].feat = feat;
        jobs[t].buf = bufs[t];
        jobs[t].buf2 = bufs2[t];
        jobs[t].n = n;
        jobs[t].reps = reps;
        jobs[t].bar = &bar;
        jobs[t].cpu = t;
        jobs[t].streams = streams;
        pthread_create(&th[t], NULL, worker, &jobs[t]);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        if (jobs[t].t0 < t0) t0 = jobs[t].t0;
        if (jobs[t].t1 > t1) t1 = jobs[t].t1;
        work += jobs[t].work;
        rate += jobs[t].work / (jobs[t].c1 - jobs[t].c0);
    }
    pthread_barrier_destroy(&bar);
    if (kind == K_DRAM || kind == K_DRAM_COPY) return work / (t1 - t0) * 1e-9;
    return rate * 1e-9;
}

int main(int argc, char **argv) {
    int max_threads = argc > 1 ? atoi(argv[1]) : 2;
    uint32_t feat = kern_cpu_features();
    float *bufs[64], *bufs2[64];
    char fs[256];
    int have[K_COUNT];
    if (max_threads < 1) max_threads = 1;
    if (max_threads > 64) max_threads = 64;
    have[K_F32] = (feat & (KERN_CPU_AVX2 | KERN_CPU_FMA)) == (KERN_CPU_AVX2 | KERN_CPU_FMA);
    have[K_BF16] = !!(feat & KERN_CPU_AVX512BF16);
    have[K_INT8] = !!(feat & (KERN_CPU_AVX512VNNI | KERN_CPU_AVXVNNI | KERN_CPU_AVX2));
    have[K_AMX_BF16] = have[K_AMX_INT8] = kern_isa_available(KERN_ISA_AMX);
    have[K_L1] = have[K_L2] = have[K_DRAM] = have[K_DRAM_COPY] = !!(feat & KERN_CPU_AVX2);
    for (int t = 0; t < max_threads; t++) {
        size_t bytes = (size_t)64 << 22; /* 256 MiB per thread */
        if (posix_memalign((void **)&bufs[t], 64, bytes) != 0 ||
            posix_memalign((void **)&bufs2[t], 64, bytes / 2) != 0) {
            fprintf(stderr, "peaks: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < bytes / 4; i++) bufs[t][i] = (float)(i % 1000) * 0.001f + 0.5f;
        memset(bufs2[t], 1, bytes / 2);
    }
    /* dram_streams: how "dram" was read (bench/run re-measures a kept
     * entry read another way) */
    printf("{\"cpu\": \"%s\", \"dram_streams\": 8", kern_cpu_features_str(feat, fs, sizeof fs));
    for (int k = 0; k < K_COUNT; k++) {
        double best = 0;
        printf(", \"%s\": {", kind_name[k]);
        for (int t = 1; t <= max_threads; t++) {
            if (k < K_DRAM) best = 0; /* DRAM: at least the fewer-thread figure */
            if (have[k]) {
                int tries = k >= K_DRAM ? 6 : 4;
                for (int r = 0; r < tries; r++) {
                    /* DRAM read: one stream and 8 in turn */
                    double v = measure(k, t, feat, bufs, bufs2, k == K_DRAM && r % 2 ? 8 : 1);
                    if (v > best) best = v;
                }
            }
            if (have[k]) printf("%s\"%d\": %.1f", t > 1 ? ", " : "", t, best);
            else printf("%s\"%d\": null", t > 1 ? ", " : "", t);
            fflush(stdout);
        }
        printf("}");
    }
    printf("}\n");
    for (int t = 0; t < max_threads; t++) {
        free(bufs[t]);
        free(bufs2[t]);
    }
    return 0;
}
