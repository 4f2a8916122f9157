/* kbench.h — benchmarks in C over Google Benchmark (the C++ lives only in
 * kbench_shim.cc).
 *
 * A benchmark file registers cases from a constructor and leaves main() to
 * the shim. It includes the headers as declarations and is linked with
 * kern's implementation compiled once (build/gen/kern_impl.o; see the
 * Makefile):
 *
 *     #include "kern_gemm.h"
 *     #include "kbench.h"
 *
 *     static void run_kern(kbench_state *st, void *user) {
 *         gemm_case *c = user;
 *         kern_ctx *ctx = kbench_ctx(kbench_threads(st));
 *         ... setup (untimed) ...
 *         while (kbench_next(st)) kern_gemm(ctx, ...);
 *         kbench_set_flops(st, 2.0 * M * N * K);   // per iteration
 *     }
 *     KBENCH_INIT(gemm) {
 *         kbench_add("gemm", "f32/M2048/N4096/K4096", "kern", 1,
 *                    KBENCH_PEAK_F32, run_kern, &case_a);
 *         kbench_add("gemm", "f32/M2048/N4096/K4096", "openblas", 1, ...);
 *         kbench_headline("gemm", "f32/M2048/N4096/K4096");  // default set
 *     }
 *
 * Names: Google Benchmark sees "family/impl/t<threads>/case", and the
 * label carries the peak kind, so bench/run can rebuild rows of
 * {family, case, threads, impl, seconds, gflops, gbps, peak_fraction}.
 * Register ours and each peer for one case next to each other: the runner
 * repeats whole runs (A B A B) and takes medians, so drift hits all impls.
 * Work counts (flops, bytes) must be the same for every impl of a case.
 * Write nonzero data (kbench_fill).
 */
#ifndef KBENCH_H
#define KBENCH_H

#include <stddef.h>
#include <stdint.h>

#include "kern_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kbench_state kbench_state;
typedef void (*kbench_fn)(kbench_state *st, void *user);

/* What a case's peak fraction is measured against. */
typedef enum kbench_peak {
    KBENCH_PEAK_NONE = 0,
    KBENCH_PEAK_F32,   /* FP32 FMA FLOP/s */
    KBENCH_PEAK_BF16,  /* vdpbf16ps FLOP/s */
    KBENCH_PEAK_INT8,  /* vpdpbusd OP/s */
    KBENCH_PEAK_AMX_BF16, /* tdpbf16ps FLOP/s (the AMX level's bf16 GEMM) */
    KBENCH_PEAK_DRAM,  /* DRAM bandwidth (bytes read + written) */
    KBENCH_PEAK_L2,    /* L2-resident bandwidth */
    KBENCH_PEAK_L1,    /* L1-resident bandwidth */
    KBENCH_PEAK_LATENCY /* a latency case: no peak, report seconds */
} kbench_peak;

/* Registers a case. Strings are copied. */
void kbench_add(const char *family, const char *case_name, const char *impl,
                int threads, kbench_peak peak, kbench_fn fn, void *user);

/* Marks a registered case as one of its family's headline cases: the few
 * that define the family (README's figure rows). The default `make bench`
 * (bench/run without --full) runs only these, every impl and thread count
 * registered under the case name, and the Python peers follow the same
 * list. `bench_<family> --kbench_headline` prints them, one "family/case"
 * a line, and exits. Strings are copied. */
void kbench_headline(const char *family, const char *case_name);

/* The timing loop: `while (kbench_next(st)) { work }`. Setup before the
 * loop is not timed. */
int kbench_next(kbench_state *st);
void kbench_pause(kbench_state *st);
void kbench_resume(kbench_state *st);
/* Work per iteration (both optional). */
void kbench_set_flops(kbench_state *st, double flops_per_iter);
void kbench_set_bytes(kbench_state *st, double bytes_per_iter);
/* An extra named counter (per-iteration value). */
void kbench_counter(kbench_state *st, const char *name, double value);
/* Marks the case skipped (a missing peer, an unsupported ISA): reported as
 * skipped by bench/run, never faked. Return from fn right after. */
void kbench_skip(kbench_state *st, const char *why);
int kbench_threads(const kbench_state *st);

/* A cached context with n threads (pool started once per process). */
kern_ctx *kbench_ctx(int threads);
/* 64-byte aligned memory, filled with nonzero pseudo-random data of the
 * dtype (values in [-1, 1), never exactly 0). Freed at exit. */
void *kbench_alloc(size_t bytes);
void kbench_fill(void *p, kern_dtype dt, int64_t n, uint64_t seed);
/* 64-byte aligned memory the caller frees with free() (per-case buffers;
 * contents undefined); NULL when out of memory. */
void *kbench_aligned(size_t bytes);
/* A reusable buffer *p of capacity *cap grown to at least `bytes`: new
 * memory is filled with kbench_fill(fill, seed), or zeroed when fill is
 * KERN_DTYPE_NONE. Returns *p (NULL when out of memory). */
void *kbench_grow(void **p, size_t *cap, size_t bytes, kern_dtype fill, uint64_t seed);
/* Keeps the compiler from deleting a result. */
void kbench_use(const void *p);

#define KBENCH_INIT(name)                                                     \
    static void kbench_init_##name(void);                                     \
    __attribute__((constructor)) static void kbench_ctor_##name(void) {      \
        kbench_init_##name();                                                 \
    }                                                                         \
    static void kbench_init_##name(void)

/* A whole-model case (files that include kern_graph.h before this
 * header): runs the plan once (a failure skips the case with kern's
 * message), then times kern_graph_run on the inputs, and reports `flops`
 * and the plan's counters (arena_MiB, packed_MiB, steps). */
#ifdef KERN_GRAPH_H
static inline void kbench_time_plan(kbench_state *st, kern_graph_plan *p, const kern_tensor *in,
                                    int n_in, double flops) {
    kern_graph_plan_stats s;
    kern_tensor out;
    memset(&out, 0, sizeof out);
    if (kern_graph_run(p, in, n_in, &out, 1) != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    while (kbench_next(st)) {
        memset(&out, 0, sizeof out);
        kern_graph_run(p, in, n_in, &out, 1);
    }
    kbench_use(out.data);
    kbench_set_flops(st, flops);
    memset(&s, 0, sizeof s);
    kern_graph_plan_stats_get(p, &s);
    kbench_counter(st, "arena_MiB", s.arena_bytes / 1048576.0);
    kbench_counter(st, "packed_MiB", s.packed_bytes / 1048576.0);
    kbench_counter(st, "steps", s.n_steps);
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* KBENCH_H */
