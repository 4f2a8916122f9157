/* kf.h — what every kern fuzzer shares: an input reader, a fresh context
 * per input (random thread count, ISA cap, deterministic flag and a
 * failing allocator), guarded caller buffers, and the contract check.
 *
 * A fuzzer is one C file:
 *
 *     #define KERN_IMPLEMENTATION
 *     #include "kern_scatter.h"
 *     #include "kf.h"
 *     #include "kf_adapt.h"
 *
 *     static void kf_fuzz(kf_in *in) {
 *         kern_ctx *ctx = kf_ctx_begin(in);
 *         float *out = (float *)kf_out(in, 64, "out");
 *         ...
 *         kf_call();                       // snapshot the outputs
 *         st = kern_op(ctx, ...);
 *         if (kf_check(st, "kern_op")) { ...cheap invariants of a success... }
 *         kf_ctx_end();                    // destroy; nothing may stay allocated
 *     }
 *
 * Built with clang -fsanitize=fuzzer,address,undefined the file is a
 * libFuzzer target (LLVMFuzzerTestOneInput below). Built with
 * -DKF_REPLAY it gets a main that runs every file (or every file of every
 * directory) given on the command line once and prints the tests/run
 * summary line, so the checked-in corpora replay in `make test` and under
 * the sanitizers.
 *
 * THE CONTRACT (checked after every call, kf_check)
 *   - the status is a kern_status;
 *   - an error has a non-empty kern_last_error() and every registered
 *     output buffer is byte-identical to its state before the call;
 *   - an allocation the allocator refused (the drawn failing position, or
 *     a request above KF_MAX_ALLOC) ends in KERN_ERR_NOMEM;
 *   - after kern_ctx_destroy no allocation of the context is live;
 *   - ASan/UBSan: no out-of-bounds access of the exactly-sized caller
 *     buffers, no undefined behaviour, no leak.
 * A violation prints what and where and aborts (libFuzzer records the
 * input as a crash).
 *
 * Inputs also bound the work: a tensor with more than KF_MAX_NUMEL
 * elements (a broadcast view may be huge) or spanning more than
 * KF_MAX_SPAN elements of memory is not run. Views of any size
 * whose element count is 0 or which are invalid (overflow, negative
 * strides) are run: kern must reject or skip them without work. */
#ifndef KERN_KF_H
#define KERN_KF_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_base.h"
#include "kt.h"

#ifndef KF_MAX_NUMEL
#define KF_MAX_NUMEL ((int64_t)1 << 16)
#endif
#ifndef KF_MAX_SPAN /* elements a valid view may span (its buffer) */
#define KF_MAX_SPAN ((int64_t)1 << 21)
#endif
#ifndef KF_MAX_ALLOC
#define KF_MAX_ALLOC ((size_t)256 << 20)
#endif

/* ------------------------------------------------------------ failures */

static const char *kf__input_name = "";
static const char *kf__op = "";

static KT__UNUSED void kf_fail(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
static KT__UNUSED void kf_fail(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "kf: CONTRACT VIOLATION in %s%s%s: ", kf__op,
            kf__input_name[0] ? " on input " : "", kf__input_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (last error: \"%s\")\n", kern_last_error());
    fflush(stderr);
    abort();
}
#define KF_ASSERT(cond, ...)                                                  \
    do {                                                                      \
        if (!(cond)) kf_fail("`" #cond "` " __VA_ARGS__);                     \
    } while (0)

/* ---------------------------------------------------------------- input */

typedef struct kf_in {
    const uint8_t *p;
    size_t n, i;
} kf_in;

static KT__UNUSED uint8_t kf_u8(kf_in *in) { return in->i < in->n ? in->p[in->i++] : 0; }
static KT__UNUSED uint32_t kf_u32(kf_in *in) {
    uint32_t v = 0;
    int k;
    for (k = 0; k < 4; k++) v |= (uint32_t)kf_u8(in) << (8 * k);
    return v;
}
static KT__UNUSED uint64_t kf_u64(kf_in *in) {
    return (uint64_t)kf_u32(in) | ((uint64_t)kf_u32(in) << 32);
}
/* Uniform-ish integer in [lo, hi] (hi - lo < 2^32). */
static KT__UNUSED int64_t kf_int(kf_in *in, int64_t lo, int64_t hi) {
    uint64_t span = (uint64_t)(hi - lo) + 1;
    uint32_t r = span <= 256 ? kf_u8(in) : kf_u32(in);
    return lo + (int64_t)(span ? (uint64_t)r % span : (uint64_t)r);
}
static KT__UNUSED int kf_bool(kf_in *in, int one_in) { return kf_u8(in) % one_in == 0; }

/* Sizes at the edges of what int64, int32 and size_t hold. */
static const int64_t kf__edge[] = {
    0, 1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65,
    INT32_MAX, (int64_t)INT32_MAX + 1, (int64_t)1 << 32, (int64_t)1 << 40,
    ((int64_t)1 << 61) - 1, (int64_t)1 << 61, (int64_t)1 << 62, INT64_MAX - 1, INT64_MAX,
    -1, -2, INT64_MIN};
#define KF__NEDGE ((int)(sizeof kf__edge / sizeof kf__edge[0]))

/* A size: usually in [0, small], sometimes an edge value (huge or
 * negative). */
static KT__UNUSED int64_t kf_size(kf_in *in, int64_t small) {
    uint8_t c = kf_u8(in);
    if (c < 232) return (int64_t)(c % (uint64_t)(small + 1));
    return kf__edge[(c - 232) % KF__NEDGE];
}
/* Stores an integer into element i of an i32 (truncated) or i64 buffer. */
static KT__UNUSED void kf_set_int(void *p, kern_dtype dt, int64_t i, int64_t v) {
    if (dt == KERN_I64) ((int64_t *)p)[i] = v;
    else if (dt == KERN_I32) ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v;
}
/* a + b saturated to the int64 range (for sizes the harness derives) */
static KT__UNUSED int64_t kf_add(int64_t a, int64_t b) {
    int64_t r;
    return kern_add_overflow_i64(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
/* A float from a small vocabulary (exact in bf16/f16 for the small ones)
 * or raw bits (NaN, Inf, subnormals, anything). */
static KT__UNUSED float kf_float(kf_in *in) {
    static const float vocab[16] = {0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -2.0f, 0.25f,
                                    3.0f, -3.0f, 1.5f, -0.0f, 0.125f, -4.0f, 8.0f, 0.75f};
    uint8_t c = kf_u8(in);
    if (c < 224) return vocab[c & 15];
    return kern__bits_f32(kf_u32(in));
}
/* Fills n bytes: from the input while it lasts, then a fixed pattern. */
static KT__UNUSED void kf_fill(kf_in *in, void *dst, size_t n) {
    unsigned char *d = (unsigned char *)dst;
    size_t i, take = in->n - in->i < n ? in->n - in->i : n;
    memcpy(d, in->p + in->i, take);
    in->i += take;
    for (i = take; i < n; i++) d[i] = (unsigned char)(i * 37u + 11u);
}
/* Fills n elements of dtype dt with values from the vocabulary (so that
 * float data is mostly finite and well scaled), or raw bytes. */
static KT__UNUSED void kf_fill_values(kf_in *in, void *dst, kern_dtype dt, int64_t n) {
    int64_t i;
    int raw = kf_bool(in, 8);
    if (raw || !kern_dtype_is_float(dt)) {
        kf_fill(in, dst, (size_t)n * kern_dtype_size(dt));
        return;
    }
    for (i = 0; i < n; i++) kt_set(dst, dt, i, kf_float(in));
}

/* ------------------------------------------------------------- buffers */

#define KF_MAX_BUFS 32
typedef struct kf_buf {
    void *p;
    size_t n;
    unsigned char *snap;
    const char *what;
    int out;
} kf_buf;
static kf_buf kf__bufs[KF_MAX_BUFS];
static int kf__nbufs;

static void *kf__buf(size_t n, const char *what, int out) {
    kf_buf *b;
    if (kf__nbufs >= KF_MAX_BUFS) kf_fail("too many buffers (%s)", what);
    b = &kf__bufs[kf__nbufs++];
    b->p = malloc(n ? n : 1); /* exactly n bytes: ASan sees any overrun */
    if (!b->p) kf_fail("host malloc(%zu) failed", n);
    b->n = n;
    b->snap = NULL;
    b->what = what;
    b->out = out;
    return b->p;
}
/* An input buffer of n bytes (contents up to the caller). */
static KT__UNUSED void *kf_in_buf(size_t n, const char *what) { return kf__buf(n, what, 0); }
/* An output buffer of n bytes filled from the input: it must keep these
 * bytes when a call fails. */
static KT__UNUSED void *kf_out(kf_in *in, size_t n, const char *what) {
    void *p = kf__buf(n, what, 1);
    kf_fill(in, p, n);
    return p;
}
/* Marks a region of host memory that is not a kf buffer (a struct the op
 * fills, a handle pointer) as an output. */
static KT__UNUSED void kf_out_region(void *p, size_t n, const char *what) {
    kf_buf *b;
    if (kf__nbufs >= KF_MAX_BUFS) kf_fail("too many buffers (%s)", what);
    b = &kf__bufs[kf__nbufs++];
    b->p = p;
    b->n = n;
    b->snap = NULL;
    b->what = what;
    b->out = 2; /* not ours to free */
}

/* Stops checking a region (before the memory it names goes away). */
static KT__UNUSED void kf_forget(const void *p) {
    int i;
    for (i = 0; i < kf__nbufs; i++)
        if (kf__bufs[i].p == p && kf__bufs[i].out == 2) kf__bufs[i].out = 3; /* inert */
}

/* ------------------------------------------------------------- tensors */

/* Builds a view of dtype dt with ndim/shape: contiguous usually,
 * otherwise strides from a small vocabulary (padding, zero, huge,
 * negative). Allocates exactly the bytes a valid view spans (NULL data
 * for an empty view now and then); an invalid view gets a small buffer it
 * must never touch. out: register as an output (filled from the input)
 * instead of filling with values. Returns 0 when the view is valid but
 * larger than KF_MAX_NUMEL (the caller then skips the input). */
static KT__UNUSED int kf_tensor(kf_in *in, kern_tensor *t, kern_dtype dt, int ndim,
                                const int64_t *shape, int out, const char *what) {
    int d;
    int64_t numel, lo = 0, hi = 0;
    size_t es, bytes;
    char *base;
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->ndim = ndim;
    if (ndim < 0 || ndim > KERN_MAX_DIMS) {
        t->data = kf_in_buf(64, what);
        return 1;
    }
    for (d = 0; d < ndim; d++) t->shape[d] = shape[d];
    {
        int64_t s = 1;
        uint8_t mode = kf_u8(in);
        for (d = ndim - 1; d >= 0; d--) {
            int64_t c = s;
            if (mode >= 200) { /* perturb this dim's stride */
                uint8_t k = kf_u8(in);
                switch (k % 8) {
                case 0: c = 0; break;
                case 1: c = s < INT64_MAX - 8 ? s + (int64_t)(k >> 3) % 5 : s; break; /* padded */
                case 2: c = s <= INT64_MAX / 2 ? s * 2 : s; break;
                case 3: c = -s; break;
                case 4: c = (int64_t)1 << 62; break;
                case 5: c = INT64_MAX; break;
                case 6: c = kf_size(in, 64); break;
                default: break;
                }
            }
            t->stride[d] = c;
            if (t->shape[d] > 0 && kern_mul_overflow_i64(s, t->shape[d], &s)) s = 1;
        }
    }
    es = kern_dtype_size(dt) ? kern_dtype_size(dt) : 1;
    {
        kern_tensor chk = *t;
        kern_status st;
        chk.data = &chk; /* any non-NULL pointer: the check reads no data */
        st = kern_tensor_check(&chk, "kf", what);
        kern_clear_error();
        if (st != KERN_OK) { /* invalid: kern must reject it untouched */
            t->data = kf_in_buf(64, what);
            return 1;
        }
    }
    numel = kern_tensor_numel(t);
    if (numel > KF_MAX_NUMEL) return 0;
    if (numel == 0 && kf_bool(in, 2)) {
        t->data = NULL;
        return 1;
    }
    kern_tensor_span(t, &lo, &hi);
    if (hi - lo > KF_MAX_SPAN) return 0; /* valid, but too many bytes to back */
    bytes = (size_t)(hi - lo) * es;
    if (out) {
        base = (char *)kf_out(in, bytes, what);
    } else {
        base = (char *)kf_in_buf(bytes, what);
        if (numel > 0 && kern_dtype_size(dt)) kf_fill_values(in, base, dt, hi - lo);
        else kf_fill(in, base, bytes);
    }
    t->data = base - lo * (int64_t)es;
    return 1;
}

/* ------------------------------------------------------------- context */

static kt_falloc kf__fa;
static kern_ctx *kf__ctx;

/* A fresh context for this input: 1..3 threads, an ISA cap this machine
 * has (scalar or any better level), the deterministic flag, and an
 * allocator that refuses the k-th allocation (k drawn, often never) and
 * anything above KF_MAX_ALLOC. */
static KT__UNUSED kern_ctx *kf_ctx_begin(kf_in *in) {
    kern_isa isas[KERN_ISA_COUNT];
    int nisa = kt_isas(isas);
    uint8_t c = kf_u8(in);
    int threads = 1 + c % 3;
    kern_isa isa = isas[(c >> 2) % (unsigned)nisa];
    int det = (c >> 5) & 1;
    memset(&kf__fa, 0, sizeof kf__fa);
    kf__fa.max_bytes = KF_MAX_ALLOC;
    c = kf_u8(in);
    kf__fa.fail_at = c < 128 ? 0 : 1 + (c & 7);
    if (getenv("KF_DEBUG"))
        fprintf(stderr, "kf: context %d threads, %s, deterministic %d, refuse allocation %lld\n",
                threads, kern_isa_name(isa), det, (long long)kf__fa.fail_at);
    kf__ctx = kt_ctx_falloc(threads, isa, det, &kf__fa);
    if (!kf__ctx) kf_fail("cannot create a context (%d threads, %s)", threads, kern_isa_name(isa));
    return kf__ctx;
}
/* Destroys the context; nothing it allocated may be live. */
static KT__UNUSED void kf_ctx_end(void) {
    kern_ctx_destroy(kf__ctx);
    kf__ctx = NULL;
    kf__op = "kern_ctx_destroy";
    if (kf__fa.live != 0 || kf__fa.bad_free != 0)
        kf_fail("%lld allocations live after kern_ctx_destroy, %lld frees of unknown pointers",
                (long long)kf__fa.live, (long long)kf__fa.bad_free);
}

/* ---------------------------------------------------------- the check */

static int64_t kf__refused_before;

/* Call right before the op: snapshots every output buffer. */
static KT__UNUSED void kf_call(void) {
    int i;
    for (i = 0; i < kf__nbufs; i++) {
        kf_buf *b = &kf__bufs[i];
        if (!b->out || b->out == 3) continue;
        free(b->snap);
        b->snap = (unsigned char *)malloc(b->n ? b->n : 1);
        if (!b->snap) kf_fail("host malloc failed");
        memcpy(b->snap, b->p, b->n);
    }
    kf__refused_before = kf__fa.refused;
    kern_clear_error();
}

/* Checks the contract after the op named `op`; returns 1 on KERN_OK. */
static KT__UNUSED int kf_check(kern_status st, const char *op) {
    int i;
    kf__op = op;
    if ((int)st < 0 || (int)st >= (int)KERN_STATUS_COUNT) kf_fail("status %d is not a kern_status", (int)st);
    if (kf__fa.refused > kf__refused_before && st != KERN_ERR_NOMEM)
        kf_fail("an allocation was refused but the status is %s", kern_status_name(st));
    if (st == KERN_OK) return 1;
    if (!kern_last_error()[0]) kf_fail("%s without a message", kern_status_name(st));
    for (i = 0; i < kf__nbufs; i++) {
        kf_buf *b = &kf__bufs[i];
        if (b->out && b->out != 3 && b->snap && memcmp(b->snap, b->p, b->n) != 0) {
            size_t k = 0;
            while (b->snap[k] == ((unsigned char *)b->p)[k]) k++;
            kf_fail("%s but output %s changed (first at byte %zu of %zu)", kern_status_name(st),
                    b->what, k, b->n);
        }
    }
    return 0;
}

/* Frees every buffer of the input. */
static void kf__reset(void) {
    int i;
    for (i = 0; i < kf__nbufs; i++) {
        if (kf__bufs[i].out < 2) free(kf__bufs[i].p);
        free(kf__bufs[i].snap);
    }
    kf__nbufs = 0;
    kf__op = "";
    if (kf__ctx) kf_ctx_end();
}

/* ------------------------------------------------------------- drivers */

static void kf_fuzz(kf_in *in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kf_in in;
    in.p = data;
    in.n = size;
    in.i = 0;
    kf_fuzz(&in);
    kf__reset();
    return 0;
}

#ifdef KF_REPLAY
/* the file-running main, shared with the whole-input fuzzers; the
 * input's name goes into kf's failure messages */
#define FZ_REPLAY_NAME(path) (kf__input_name = (path))
#include "fz_replay.h"
#endif

#endif /* KERN_KF_H */
