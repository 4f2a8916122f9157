/* kt.h — kern's small test harness.
 *
 * A test file is one translation unit:
 *
 *     #define KERN_IMPLEMENTATION
 *     #include "kern_gemm.h"
 *     #include "kt.h"
 *
 *     KT_TEST(gemm_small) {
 *         KT_CHECK(x == 3, "x=%d", x);
 *         kt_assert_close_f32("c", got, want, n, kt_tol(KERN_F32));
 *     }
 *
 *     KT_MAIN()
 *
 * Cases register themselves (constructor attribute) and run in file order.
 * `./test_x [substring]` runs the cases whose name contains the substring.
 * Each case gets a fixed seed derived from its name (kt_seed()), printed
 * with any failure. The binary prints one line per failed case, then
 * "[file] N ok, N failed" (the aggregate "N passed, N failed" line is
 * printed by tests/run).
 *
 * Tolerances live in kt_tol() and nowhere else:
 *   f32:  rtol 1e-5, atol 1e-6   (a handful of ulps after a short
 *         reduction; long reductions use kt_assert_nmse with 1e-10)
 *   f16:  rtol 2e-3, atol 1e-4   (one f16 ulp is 2^-10 ~ 9.8e-4; the output
 *         rounding alone costs half of it, the rest is f32 accumulation)
 *   bf16: rtol 1.6e-2, atol 1e-3 (one bf16 ulp is 2^-7 = 7.8e-3; two ulps)
 *   int:  exact
 */
#ifndef KERN_KT_H
#define KERN_KT_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_base.h"

/* Every helper is static; a test uses only some of them. */
#if defined(__GNUC__) || defined(__clang__)
#define KT__UNUSED __attribute__((unused))
#else
#define KT__UNUSED
#endif

typedef void (*kt_fn)(void);
typedef struct kt_case {
    const char *name;
    kt_fn fn;
} kt_case;

#define KT_MAX_CASES 1024
static kt_case kt__cases[KT_MAX_CASES];
static int kt__ncases;
static const char *kt__cur_name = "";
static int kt__cur_failed;
static int kt__cur_reports;
static uint64_t kt__cur_seed;
static char kt__context[256];

static KT__UNUSED void kt__register(const char *name, kt_fn fn) {
    if (kt__ncases < KT_MAX_CASES) {
        kt__cases[kt__ncases].name = name;
        kt__cases[kt__ncases].fn = fn;
        kt__ncases++;
    }
}

#define KT_TEST(name)                                                         \
    static void kt_test_##name(void);                                         \
    __attribute__((constructor)) static void kt_reg_##name(void) {           \
        kt__register(#name, kt_test_##name);                                  \
    }                                                                         \
    static void kt_test_##name(void)

/* Sets a context string printed with failures (e.g. the shape being
 * tested). */
static KT__UNUSED void kt_context(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kt__context, sizeof kt__context, fmt, ap);
    va_end(ap);
}

static KT__UNUSED void kt__fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    kt__cur_failed = 1;
    if (kt__cur_reports++ >= 5) return; /* keep logs readable */
    fprintf(stdout, "FAIL %s (%s:%d, seed=0x%llx)%s%s: ", kt__cur_name, file,
            line, (unsigned long long)kt__cur_seed, kt__context[0] ? " " : "",
            kt__context);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

#define KT_CHECK(cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) kt__fail(__FILE__, __LINE__, "check `" #cond "` " __VA_ARGS__); \
    } while (0)
/* Like KT_CHECK but returns from the test case on failure. */
#define KT_REQUIRE(cond, ...)                                                 \
    do {                                                                      \
        if (!(cond)) {                                                        \
            kt__fail(__FILE__, __LINE__, "require `" #cond "` " __VA_ARGS__); \
            return;                                                           \
        }                                                                     \
    } while (0)
/* Asserts a status; prints kern_last_error() when it differs. */
#define KT_STATUS(expr, want)                                                 \
    do {                                                                      \
        kern_status kt_st_ = (expr);                                          \
        if (kt_st_ != (want))                                                 \
            kt__fail(__FILE__, __LINE__, "%s returned %s, want %s (%s)",      \
                     #expr, kern_status_name(kt_st_), kern_status_name(want), \
                     kern_last_error());                                      \
    } while (0)
#define KT_OK(expr) KT_STATUS(expr, KERN_OK)
/* Asserts an error status and that the message contains `needle`. */
#define KT_ERROR(expr, want, needle)                                          \
    do {                                                                      \
        kern_status kt_st_;                                                   \
        kern_clear_error();                                                   \
        kt_st_ = (expr);                                                      \
        if (kt_st_ != (want))                                                 \
            kt__fail(__FILE__, __LINE__, "%s returned %s, want %s (%s)",      \
                     #expr, kern_status_name(kt_st_), kern_status_name(want), \
                     kern_last_error());                                      \
        else if (!strstr(kern_last_error(), (needle)))                        \
            kt__fail(__FILE__, __LINE__,                                      \
                     "%s: message \"%s\" does not mention \"%s\"", #expr,     \
                     kern_last_error(), (needle));                            \
    } while (0)

/* ------------------------------------------------------------ random */

typedef struct kt_rng {
    uint64_t s;
} kt_rng;

static KT__UNUSED uint64_t kt_seed(void) { return kt__cur_seed; }
static KT__UNUSED kt_rng kt_rng_make(uint64_t salt) {
    kt_rng r;
    r.s = kt__cur_seed ^ (salt * 0x9e3779b97f4a7c15ull);
    return r;
}
static KT__UNUSED uint64_t kt_next(kt_rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [lo, hi). */
static KT__UNUSED double kt_uniform(kt_rng *r, double lo, double hi) {
    return lo + (hi - lo) * (double)(kt_next(r) >> 11) * (1.0 / 9007199254740992.0);
}
static KT__UNUSED double kt_normal(kt_rng *r) {
    double u1 = kt_uniform(r, 1e-300, 1.0), u2 = kt_uniform(r, 0.0, 1.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static KT__UNUSED int64_t kt_randint(kt_rng *r, int64_t lo, int64_t hi) { /* [lo, hi) */
    return lo + (int64_t)(kt_next(r) % (uint64_t)(hi - lo));
}

/* ---------------------------------------------------- guarded buffers */

/* A buffer with 64 guard bytes on each side, checked by kt_free. The
 * payload is 64-byte aligned unless `misalign` (bytes, taken modulo 64) is
 * given. */
#define KT_GUARD 64
#define KT_GUARD_BYTE 0xA5
typedef struct kt__hdr {
    size_t size;
    size_t misalign;
    const char *what;
    size_t pad[5];
} kt__hdr;

static KT__UNUSED void *kt_alloc_misaligned(size_t size, size_t misalign, const char *what) {
    size_t total;
    unsigned char *base;
    kt__hdr *h;
    misalign %= 64; /* only the offset from a 64-byte boundary matters */
    total = sizeof(kt__hdr) + KT_GUARD + misalign + size + KT_GUARD;
    if (posix_memalign((void **)&base, 64, total) != 0) return NULL;
    h = (kt__hdr *)base;
    h->size = size;
    h->misalign = misalign;
    h->what = what;
    memset(base + sizeof(kt__hdr), KT_GUARD_BYTE, KT_GUARD + misalign);
    memset(base + sizeof(kt__hdr) + KT_GUARD + misalign + size, KT_GUARD_BYTE,
           KT_GUARD);
    memset(base + sizeof(kt__hdr) + KT_GUARD + misalign, 0x5A, size);
    return base + sizeof(kt__hdr) + KT_GUARD + misalign;
}
static KT__UNUSED void *kt_alloc(size_t size, const char *what) {
    return kt_alloc_misaligned(size, 0, what);
}
static KT__UNUSED kt__hdr *kt__header(void *p) {
    unsigned char *u = (unsigned char *)p;
    size_t mis = 0;
    /* header sits at a 64-aligned base; try the recorded misalignment */
    kt__hdr *h = (kt__hdr *)(u - KT_GUARD - sizeof(kt__hdr));
    if (((uintptr_t)h & 63) == 0 && h->misalign == 0) return h;
    for (mis = 1; mis < 64; mis++) {
        h = (kt__hdr *)(u - KT_GUARD - mis - sizeof(kt__hdr));
        if (((uintptr_t)h & 63) == 0 && h->misalign == mis) return h;
    }
    return NULL;
}
/* Returns 1 if guards are intact. */
static KT__UNUSED int kt_guards_ok(void *p) {
    kt__hdr *h;
    unsigned char *u = (unsigned char *)p;
    size_t i;
    if (!p) return 1;
    h = kt__header(p);
    if (!h) return 0;
    for (i = 0; i < KT_GUARD + h->misalign; i++)
        if (u[-(ptrdiff_t)(i + 1)] != KT_GUARD_BYTE) return 0;
    for (i = 0; i < KT_GUARD; i++)
        if (u[h->size + i] != KT_GUARD_BYTE) return 0;
    return 1;
}
#define kt_free(p)                                                            \
    do {                                                                      \
        void *kt_p_ = (void *)(p);                                            \
        if (kt_p_) {                                                          \
            kt__hdr *kt_h_ = kt__header(kt_p_);                               \
            if (!kt_guards_ok(kt_p_))                                         \
                kt__fail(__FILE__, __LINE__, "guard bytes around %s overwritten", \
                         kt_h_ ? kt_h_->what : "?");                          \
            free(kt_h_);                                                      \
        }                                                                     \
    } while (0)

/* Fills with a NaN pattern (0xFF bytes: NaN in f32/f16/bf16, -1 in ints). */
static KT__UNUSED void kt_poison(void *p, size_t bytes) { memset(p, 0xFF, bytes); }
/* 1 while every byte is still kt_poison's 0xFF (nothing written) */
static KT__UNUSED int kt_poisoned(const void *p, size_t bytes) {
    const unsigned char *u = (const unsigned char *)p;
    size_t i;
    for (i = 0; i < bytes; i++)
        if (u[i] != 0xFF) return 0;
    return 1;
}

/* ---------------------------------------------------------- dtypes */

typedef struct kt_tol_t {
    double rtol, atol;
} kt_tol_t;

static KT__UNUSED kt_tol_t kt_tol(kern_dtype dt) {
    kt_tol_t t;
    switch (dt) {
    case KERN_F32: t.rtol = 1e-5; t.atol = 1e-6; break;
    case KERN_F16: t.rtol = 2e-3; t.atol = 1e-4; break;
    case KERN_BF16: t.rtol = 1.6e-2; t.atol = 1e-3; break;
    default: t.rtol = 0; t.atol = 0; break;
    }
    return t;
}
/* Scales a tolerance (e.g. by sqrt(K) for long reductions). */
static KT__UNUSED kt_tol_t kt_tol_scaled(kern_dtype dt, double factor) {
    kt_tol_t t = kt_tol(dt);
    t.rtol *= factor;
    t.atol *= factor;
    return t;
}

/* Reads element i of a float-typed buffer as double. */
static KT__UNUSED double kt_get(const void *p, kern_dtype dt, int64_t i) {
    switch (dt) {
    case KERN_F32: return ((const float *)p)[i];
    case KERN_F16: return kern_f16_to_f32(((const uint16_t *)p)[i]);
    case KERN_BF16: return kern_bf16_to_f32(((const uint16_t *)p)[i]);
    case KERN_I8: return ((const int8_t *)p)[i];
    case KERN_U8: return ((const uint8_t *)p)[i];
    case KERN_BOOL: return ((const uint8_t *)p)[i];
    case KERN_I32: return ((const int32_t *)p)[i];
    case KERN_I64: return (double)((const int64_t *)p)[i];
    default: return NAN;
    }
}
/* Writes element i (rounding to the storage dtype). */
static KT__UNUSED void kt_set(void *p, kern_dtype dt, int64_t i, double v) {
    switch (dt) {
    case KERN_F32: ((float *)p)[i] = (float)v; break;
    case KERN_F16: ((uint16_t *)p)[i] = kern_f32_to_f16((float)v); break;
    case KERN_BF16: ((uint16_t *)p)[i] = kern_f32_to_bf16((float)v); break;
    case KERN_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case KERN_U8: case KERN_BOOL: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case KERN_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case KERN_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    default: break;
    }
}
/* Fills n elements with N(0, scale) (rounded to dt), returns nothing. */
static KT__UNUSED void kt_fill_normal(kt_rng *r, void *p, kern_dtype dt, int64_t n, double scale) {
    int64_t i;
    for (i = 0; i < n; i++) kt_set(p, dt, i, kt_normal(r) * scale);
}
static KT__UNUSED void kt_fill_uniform(kt_rng *r, void *p, kern_dtype dt, int64_t n, double lo,
                            double hi) {
    int64_t i;
    for (i = 0; i < n; i++) kt_set(p, dt, i, kt_uniform(r, lo, hi));
}

/* Compares n values of `got` (dtype dt, element stride gs) against double
 * `want`: |got - want| <= atol + rtol*|want|. NaN must match NaN, Inf must
 * match exactly. Reports the first few mismatches. Returns 1 if all match. */
static KT__UNUSED int kt__close(const char *file, int line, const char *what, const void *got,
                     kern_dtype dt, int64_t gs, const double *want, int64_t n,
                     kt_tol_t tol) {
    int64_t i, bad = 0, first = -1;
    double worst = 0;
    for (i = 0; i < n; i++) {
        double g = kt_get(got, dt, i * gs), w = want[i];
        int ok;
        if (isnan(w) || isnan(g)) ok = isnan(w) && isnan(g);
        else if (isinf(w) || isinf(g)) ok = g == w;
        else {
            double err = fabs(g - w), lim = tol.atol + tol.rtol * fabs(w);
            ok = err <= lim;
            if (!ok && err / (lim > 0 ? lim : 1e-300) > worst)
                worst = err / (lim > 0 ? lim : 1e-300);
        }
        if (!ok) {
            if (bad < 3)
                kt__fail(file, line, "%s[%lld]: got %.9g want %.9g (rtol %g atol %g)",
                         what, (long long)i, g, w, tol.rtol, tol.atol);
            if (first < 0) first = i;
            bad++;
        }
    }
    if (bad)
        kt__fail(file, line, "%s: %lld of %lld values out of tolerance (worst %.3gx the limit)",
                 what, (long long)bad, (long long)n, worst);
    return bad == 0;
}
#define kt_assert_close(what, got, dt, want, n, tol)                          \
    kt__close(__FILE__, __LINE__, what, got, dt, 1, want, n, tol)
#define kt_assert_close_strided(what, got, dt, gs, want, n, tol)              \
    kt__close(__FILE__, __LINE__, what, got, dt, gs, want, n, tol)

/* Normalized MSE: sum (g-w)^2 / sum w^2 <= bound. */
static KT__UNUSED int kt__nmse(const char *file, int line, const char *what, const void *got,
                    kern_dtype dt, const double *want, int64_t n, double bound) {
    double num = 0, den = 0, v;
    int64_t i;
    for (i = 0; i < n; i++) {
        double d = kt_get(got, dt, i) - want[i];
        num += d * d;
        den += want[i] * want[i];
    }
    v = den > 0 ? num / den : num;
    if (!(v <= bound)) {
        kt__fail(file, line, "%s: normalized MSE %.3g > %.3g", what, v, bound);
        return 0;
    }
    return 1;
}
#define kt_assert_nmse(what, got, dt, want, n, bound)                         \
    kt__nmse(__FILE__, __LINE__, what, got, dt, want, n, bound)

/* Bytes equal (for exactness checks: determinism, int results). */
#define kt_assert_bytes_equal(what, a, b, n)                                  \
    do {                                                                      \
        if (memcmp((a), (b), (n)) != 0) {                                     \
            size_t kt_i_ = 0;                                                 \
            while (((const unsigned char *)(a))[kt_i_] ==                     \
                   ((const unsigned char *)(b))[kt_i_]) kt_i_++;              \
            kt__fail(__FILE__, __LINE__, "%s: bytes differ first at byte %zu", \
                     what, kt_i_);                                            \
        }                                                                     \
    } while (0)

/* ------------------------------------------------------------ contexts */

/* A cached context with `threads` threads, ISA cap `isa` and tuning class
 * `uarch` (destroyed at exit). NULL if the ISA is not available. The class
 * of the plain helpers is KERN_UARCH_AUTO unless the environment variable
 * KT_UARCH names one ("generic", "zen4", "xeon_avx512", "zen5"): `make test-uarch`
 * runs the class-sensitive tests once per class that way, so every class's
 * tables are checked on whatever machine runs the tests. */
#define KT_MAX_CTX 48
static struct {
    int threads;
    kern_isa isa;
    int det;
    kern_uarch uarch;
    kern_ctx *ctx;
} kt__ctxs[KT_MAX_CTX];
static int kt__nctx;
static KT__UNUSED kern_uarch kt_uarch_default(void) {
    static int done;
    static kern_uarch u = KERN_UARCH_AUTO;
    if (!done) {
        const char *e = getenv("KT_UARCH");
        done = 1;
        if (e && *e) {
            u = kern_uarch_from_name(e);
            if (u == KERN_UARCH_COUNT) {
                fprintf(stderr, "KT_UARCH=%s is not a kern_uarch name\n", e);
                exit(2);
            }
            printf("tuning class forced: %s\n", kern_uarch_name(u));
        }
    }
    return u;
}
static KT__UNUSED kern_ctx *kt_ctx_full(int threads, kern_isa isa, int deterministic,
                                        kern_uarch uarch) {
    int i;
    kern_ctx_params p;
    kern_ctx *c = NULL;
    if (!kern_isa_available(isa)) return NULL;
    for (i = 0; i < kt__nctx; i++)
        if (kt__ctxs[i].threads == threads && kt__ctxs[i].isa == isa &&
            kt__ctxs[i].det == deterministic && kt__ctxs[i].uarch == uarch)
            return kt__ctxs[i].ctx;
    memset(&p, 0, sizeof p);
    p.n_threads = threads;
    p.isa_cap = isa;
    p.deterministic = deterministic;
    p.uarch = uarch;
    if (kern_ctx_create(&p, &c) != KERN_OK || kt__nctx >= KT_MAX_CTX) {
        kern_ctx_destroy(c);
        return NULL;
    }
    kt__ctxs[kt__nctx].threads = threads;
    kt__ctxs[kt__nctx].isa = isa;
    kt__ctxs[kt__nctx].det = deterministic;
    kt__ctxs[kt__nctx].uarch = uarch;
    kt__ctxs[kt__nctx].ctx = c;
    kt__nctx++;
    return c;
}
static KT__UNUSED kern_ctx *kt_ctx_ex(int threads, kern_isa isa, int deterministic) {
    return kt_ctx_full(threads, isa, deterministic, kt_uarch_default());
}
static KT__UNUSED kern_ctx *kt_ctx(int threads, kern_isa isa) { return kt_ctx_ex(threads, isa, 0); }

/* Every ISA level of this build's CPU family that the machine runs, in
 * kern_isa_list order (SCALAR first, best last); out needs KERN_ISA_COUNT
 * entries. The levels the machine lacks are reported once per test binary
 * as "not run: <level> (cpu lacks <features>)", never skipped silently. */
static int kt__isa_reported;
static KT__UNUSED int kt_isa_levels(kern_isa *out) {
    kern_isa all[KERN_ISA_COUNT];
    int n = kern_isa_list(all, KERN_ISA_COUNT, 0), i, k = 0;
    for (i = 0; i < n; i++) {
        if (kern_isa_available(all[i])) {
            out[k++] = all[i];
        } else if (!kt__isa_reported) {
            char miss[128];
            printf("not run: %s (cpu lacks %s)\n", kern_isa_name(all[i]),
                   kern_isa_missing(all[i], miss, sizeof miss));
        }
    }
#ifdef KT_TSAN
    /* ThreadSanitizer looks for races in the task decompositions, which
     * the ISA tables only resize: the lowest and the best level here, the
     * levels between under make test and the ASan/UBSan job (the whole
     * CI then stays under half an hour) */
    if (k > 2) {
        if (!kt__isa_reported)
            printf("tsan: levels %s..%s left to the other jobs\n", kern_isa_name(out[1]),
                   kern_isa_name(out[k - 2]));
        out[1] = out[k - 1];
        k = 2;
    }
#endif
    kt__isa_reported = 1;
    return k;
}
/* The ISA levels this CPU has, best last, for KT_FOR_EACH_ISA. */
static KT__UNUSED int kt_isas(kern_isa *out) { return kt_isa_levels(out); }
/* Level isa is among those KT_FOR_EACH_ISA visits in this build (the CPU
 * has it and, under KT_TSAN, it is the lowest or the best). */
static KT__UNUSED int kt_isa_runs(kern_isa isa) {
    kern_isa l[KERN_ISA_COUNT];
    int n = kt_isas(l), i;
    for (i = 0; i < n; i++)
        if (l[i] == isa) return 1;
    return 0;
}
/* for each available ISA level: `isa` is the level, `ctx` a context capped
 * to it with `threads` threads. Sets the failure context to the ISA name. */
#define KT_FOR_EACH_ISA(isa, ctx, threads)                                    \
    kern_isa kt_isa_list_[KERN_ISA_COUNT];                                    \
    int kt_isa_n_ = kt_isas(kt_isa_list_), kt_isa_i_;                         \
    for (kt_isa_i_ = 0; kt_isa_i_ < kt_isa_n_; kt_isa_i_++)                   \
        for (kern_isa isa = kt_isa_list_[kt_isa_i_], *kt_once_ = &isa;        \
             kt_once_; kt_once_ = NULL)                                       \
            for (kern_ctx *ctx = kt_ctx(threads, isa); ctx; ctx = NULL)

/* ----------------------------------------------------- fault injection */

/* A counting allocator for kern_ctx_params.allocator that refuses the
 * allocation at 1-based position `fail_at` (0 = none) and every request
 * larger than `max_bytes` (0 = no cap), and tracks what is still live, so
 * a test can check that an op returns KERN_ERR_NOMEM with its outputs
 * untouched and that nothing leaks once the context is destroyed. Thread
 * safe (kern allocates from the calling thread today, but need not). */
typedef struct kt_falloc {
    int64_t fail_at;  /* 1-based position to refuse; 0 = none */
    size_t max_bytes; /* refuse larger requests; 0 = no cap */
    int64_t calls;    /* allocations asked for */
    int64_t refused;  /* allocations refused (position or cap) */
    int64_t live;     /* allocations not freed yet */
    int64_t bad_free; /* frees of pointers this allocator did not give */
} kt_falloc;

#define KT__FALLOC_MAGIC 0x6b74666cu
typedef struct kt__fhdr { /* sits `align` bytes before the payload */
    uint32_t magic;
    uint32_t align;
    void *base;
} kt__fhdr;

static KT__UNUSED void *kt__falloc_alloc(void *user, size_t size, size_t align) {
    kt_falloc *fa = (kt_falloc *)user;
    int64_t pos = __atomic_add_fetch(&fa->calls, 1, __ATOMIC_SEQ_CST);
    void *base = NULL;
    unsigned char *p;
    kt__fhdr h;
    if (align < sizeof(kt__fhdr)) align = 64;
    if ((fa->fail_at > 0 && pos == fa->fail_at) || (fa->max_bytes && size > fa->max_bytes) ||
        size > (size_t)-1 - 2 * align) {
        __atomic_add_fetch(&fa->refused, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    if (posix_memalign(&base, align, size + align) != 0) {
        __atomic_add_fetch(&fa->refused, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    p = (unsigned char *)base + align;
    h.magic = KT__FALLOC_MAGIC;
    h.align = (uint32_t)align;
    h.base = base;
    memcpy(p - sizeof h, &h, sizeof h);
    __atomic_add_fetch(&fa->live, 1, __ATOMIC_SEQ_CST);
    return p;
}
static KT__UNUSED void kt__falloc_free(void *user, void *ptr) {
    kt_falloc *fa = (kt_falloc *)user;
    kt__fhdr h;
    if (!ptr) return;
    memcpy(&h, (unsigned char *)ptr - sizeof h, sizeof h);
    if (h.magic != KT__FALLOC_MAGIC) {
        __atomic_add_fetch(&fa->bad_free, 1, __ATOMIC_SEQ_CST);
        return;
    }
    h.magic = 0;
    memcpy((unsigned char *)ptr - sizeof h, &h, sizeof h);
    __atomic_sub_fetch(&fa->live, 1, __ATOMIC_SEQ_CST);
    free(h.base);
}
/* A fresh (uncached) context using `fa`; NULL if it cannot be made. The
 * caller destroys it. */
static KT__UNUSED kern_ctx *kt_ctx_falloc(int threads, kern_isa isa, int deterministic,
                                          kt_falloc *fa) {
    kern_ctx_params p;
    kern_ctx *c = NULL;
    memset(&p, 0, sizeof p);
    p.n_threads = threads;
    p.isa_cap = isa;
    p.deterministic = deterministic;
    p.allocator.alloc = kt__falloc_alloc;
    p.allocator.free = kt__falloc_free;
    p.allocator.user = fa;
    if (kern_ctx_create(&p, &c) != KERN_OK) return NULL;
    return c;
}

/* An output region whose bytes must not change when an op fails. */
typedef struct kt_region {
    const void *p;
    size_t n;
    const char *what;
} kt_region;

/* One run of an op under fault injection: returns the op's status. `arg`
 * is the test's; on success the function releases whatever the op
 * created (packed weights, handles) through ctx. */
typedef kern_status (*kt_fault_fn)(kern_ctx *ctx, void *arg);

/* Runs fn with a fresh context (threads, isa) whose allocator refuses
 * allocation 1, then 2, 3, ... until fn succeeds without a refusal. After
 * every refusal it checks: status KERN_ERR_NOMEM, a non-empty message,
 * the `nout` output regions byte-identical to before the call, and no
 * live allocation once the context is destroyed (also after the final
 * success). Returns the number of allocation positions exercised, or -1
 * after a failure (reported through KT_CHECK-style messages). */
#define kt_fault_sweep(what, threads, isa, fn, arg, out, nout)                \
    kt__fault_sweep(__FILE__, __LINE__, what, threads, isa, fn, arg, out, nout)
static KT__UNUSED int kt__fault_sweep(const char *file, int line, const char *what, int threads,
                                      kern_isa isa, kt_fault_fn fn, void *arg,
                                      const kt_region *out, int nout) {
    unsigned char *snap[16];
    int64_t k;
    int i, result = -1;
    if (nout > 16) nout = 16;
    for (i = 0; i < nout; i++) {
        snap[i] = (unsigned char *)malloc(out[i].n ? out[i].n : 1);
        if (out[i].n) memcpy(snap[i], out[i].p, out[i].n);
    }
    for (k = 1; k <= 100000; k++) {
        kt_falloc fa;
        kern_ctx *ctx;
        kern_status st;
        int changed = -1;
        memset(&fa, 0, sizeof fa);
        fa.fail_at = k;
        ctx = kt_ctx_falloc(threads, isa, 0, &fa);
        if (!ctx) {
            kt__fail(file, line, "%s: cannot create a context", what);
            break;
        }
        kern_clear_error();
        st = fn(ctx, arg);
        for (i = 0; i < nout && st != KERN_OK; i++)
            if (out[i].n && memcmp(snap[i], out[i].p, out[i].n) != 0) changed = i;
        kern_ctx_destroy(ctx);
        if (fa.live != 0 || fa.bad_free != 0) {
            kt__fail(file, line, "%s, allocation %lld refused: %lld allocations leaked, %lld bad frees",
                     what, (long long)k, (long long)fa.live, (long long)fa.bad_free);
            break;
        }
        if (st == KERN_OK && fa.refused == 0) {
            result = (int)(k - 1);
            break;
        }
        if (st == KERN_OK) { /* the op recovered from the refusal: reset the outputs */
            for (i = 0; i < nout; i++)
                if (out[i].n) memcpy((void *)out[i].p, snap[i], out[i].n);
            continue;
        }
        if (st != KERN_ERR_NOMEM || fa.refused == 0) {
            kt__fail(file, line, "%s, allocation %lld of %lld refused: %s (%s), want KERN_ERR_NOMEM",
                     what, (long long)k, (long long)fa.calls, kern_status_name(st),
                     kern_last_error());
            break;
        }
        if (!kern_last_error()[0]) {
            kt__fail(file, line, "%s, allocation %lld refused: NOMEM without a message", what,
                     (long long)k);
            break;
        }
        if (changed >= 0) {
            kt__fail(file, line, "%s, allocation %lld refused: NOMEM but %s was written", what,
                     (long long)k, out[changed].what ? out[changed].what : "an output");
            break;
        }
    }
    for (i = 0; i < nout; i++) free(snap[i]);
    return result;
}

#ifdef KERN_GRAPH_H
/* Writes g's IR, reads it back and writes again: the texts must match
 * byte for byte (the IR's contract, checked on every graph a test builds). */
static KT__UNUSED void kt_graph_roundtrip(kern_graph *g) {
    size_t n, n2;
    char *a, *b;
    kern_graph *g2 = NULL;
    KT_OK(kern_graph_write_ir(g, NULL, 0, &n));
    a = (char *)malloc(n + 1);
    KT_OK(kern_graph_write_ir(g, a, n + 1, &n));
    KT_OK(kern_graph_read_ir(NULL, a, n, &g2));
    if (!g2) {
        free(a);
        return;
    }
    KT_OK(kern_graph_write_ir(g2, NULL, 0, &n2));
    b = (char *)malloc(n2 + 1);
    KT_OK(kern_graph_write_ir(g2, b, n2 + 1, &n2));
    KT_CHECK(n == n2 && memcmp(a, b, n) == 0, "IR round trip differs:\n%s\n----\n%s", a, b);
    kern_graph_destroy(g2);
    free(a);
    free(b);
}
#endif

/* ---------------------------------------------------------------- main */

static KT__UNUSED int kt_main(int argc, char **argv, const char *file) {
    int i, passed = 0, failed = 0;
    const char *filter = argc > 1 ? argv[1] : NULL;
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    {
        const kern_cpu_info_t *ci = kern_cpu_info();
        kern_uarch u = kt_uarch_default();
        printf("[%s] cpu: %s (%s family 0x%x model 0x%x), tuning class %s%s\n", base,
               ci->brand[0] ? ci->brand : "unknown", ci->vendor[0] ? ci->vendor : "-",
               ci->family, ci->model, kern_uarch_name(u == KERN_UARCH_AUTO ? ci->uarch : u),
               u == KERN_UARCH_AUTO ? "" : " (forced)");
    }
    for (i = 0; i < kt__ncases; i++) {
        const char *n = kt__cases[i].name;
        uint64_t h = 1469598103934665603ull;
        const char *c;
        if (filter && !strstr(n, filter)) continue;
        for (c = n; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        kt__cur_name = n;
        kt__cur_seed = h;
        kt__cur_failed = 0;
        kt__cur_reports = 0;
        kt__context[0] = 0;
        kern_clear_error();
        kt__cases[i].fn();
        if (kt__cur_failed) failed++; else passed++;
        if (getenv("KT_VERBOSE"))
            printf("%s %s\n", kt__cur_failed ? "FAIL" : "ok  ", n);
    }
    for (i = 0; i < kt__nctx; i++) kern_ctx_destroy(kt__ctxs[i].ctx);
    printf("[%s] %d ok, %d failed\n", base, passed, failed);
    return failed ? 1 : 0;
}
#define KT_MAIN()                                                             \
    int main(int argc, char **argv) { return kt_main(argc, argv, __FILE__); }

#endif /* KERN_KT_H */
