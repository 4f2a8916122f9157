/* kern_base.h — types, status, dtype conversion, CPU features, thread pool,
 * context. Part of kern, an embeddable header-only C kernel library.
 *
 * Usage (stb pattern): include anywhere for declarations; in exactly one
 * translation unit write
 *
 *     #define KERN_IMPLEMENTATION
 *     #include "kern_base.h"        (or kern.h, or any kernel header)
 *
 * Define KERN_STATIC as well to make every function static (single-TU use).
 *
 * Conventions (see README.md):
 *   - every fallible call returns kern_status; KERN_OK is 0. On error nothing
 *     is written to outputs and kern_last_error() returns a thread-local
 *     sentence naming the argument and the values.
 *   - kern_tensor is a view: data, dtype, ndim, shape[], stride[] (strides in
 *     elements; stride 0 broadcasts).
 *   - kern_ctx carries the thread pool (or a user parallel_for hook), the
 *     allocator, reusable scratch, an ISA cap and a deterministic flag.
 *     NULL means the process-wide default context (one thread per online
 *     CPU, created on first use, thread safe).
 *
 * Concurrency contract: kernel calls on one context are serialized. Every
 * op takes the context's lock for its whole duration, so two user threads
 * may call kernels on the same context at once; the second waits (use one
 * context per thread to run ops in parallel). A kernel called from inside
 * an op or a task of the same context (a nested op; also through a user
 * parallel_for hook, or via another context's task) returns
 * KERN_ERR_UNSUPPORTED instead of deadlocking; kern_parallel_for called
 * from inside any task runs the inner loop inline on the calling thread,
 * keeping its thread index. kern_convert may be called anywhere.
 *
 * Example:
 *     kern_ctx *ctx;
 *     kern_ctx_params p = {0};
 *     p.n_threads = 2;
 *     if (kern_ctx_create(&p, &ctx) != KERN_OK) puts(kern_last_error());
 *     ...
 *     kern_ctx_destroy(ctx);
 */
#ifndef KERN_BASE_H
#define KERN_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef KERN_API
#  ifdef KERN_STATIC
#    if defined(__GNUC__) || defined(__clang__)
#      define KERN_API static __attribute__((unused))
#    else
#      define KERN_API static
#    endif
#  else
#    define KERN_API extern
#  endif
#endif

#define KERN_VERSION_MAJOR 0
#define KERN_VERSION_MINOR 1
#define KERN_VERSION_PATCH 0

#define KERN_MAX_DIMS 8

/* ------------------------------------------------------------------ status */

/* One list gives the enum and the names. */
#define KERN_STATUS_LIST(X)                                                   \
    X(OK, "ok")                                                               \
    X(ERR_ARG, "invalid argument")                                            \
    X(ERR_SHAPE, "shape mismatch")                                            \
    X(ERR_DTYPE, "unsupported dtype")                                         \
    X(ERR_LAYOUT, "unsupported layout")                                       \
    X(ERR_INDEX, "index out of range")                                        \
    X(ERR_NOMEM, "out of memory")                                             \
    X(ERR_UNSUPPORTED, "unsupported")                                         \
    X(ERR_DEVICE, "device error")

typedef enum kern_status {
#define KERN__STATUS_ENUM(name, text) KERN_##name,
    KERN_STATUS_LIST(KERN__STATUS_ENUM)
#undef KERN__STATUS_ENUM
    KERN_STATUS_COUNT
} kern_status;

/* "KERN_ERR_SHAPE" etc.; "KERN_STATUS_UNKNOWN" for values out of range. */
KERN_API const char *kern_status_name(kern_status s);
/* A short description ("shape mismatch"). */
KERN_API const char *kern_status_text(kern_status s);
/* Thread-local message of the last failed call on this thread ("" if none). */
KERN_API const char *kern_last_error(void);
KERN_API void kern_clear_error(void);

/* ------------------------------------------------------------------ dtypes */

typedef enum kern_dtype {
    KERN_DTYPE_NONE = 0, /* zero is reserved: an uninitialised tensor */
    KERN_F32,
    KERN_F16,
    KERN_BF16,
    KERN_I8,
    KERN_U8,
    KERN_I32,
    KERN_I64,
    KERN_BOOL,
    KERN_DTYPE_COUNT
} kern_dtype;

/* Bytes per element (0 for invalid dtypes). */
KERN_API size_t kern_dtype_size(kern_dtype dt);
/* "f32", "bf16", ... ("invalid" for bad values). */
KERN_API const char *kern_dtype_name(kern_dtype dt);
KERN_API int kern_dtype_is_float(kern_dtype dt);

/* ------------------------------------------------------------- activations */

/* The one activation vocabulary of every op with a fused activation
 * (gemm, qlinear, sparse24_linear, norm, the graph executor) and of the
 * standalone activation ops. Zero is "none". The values are stable. */
typedef enum kern_act {
    KERN_ACT_NONE = 0,      /* identity */
    KERN_ACT_GELU = 1,      /* 0.5 x (1 + erf(x / sqrt 2)): torch gelu,
                               approximate='none' */
    KERN_ACT_GELU_TANH = 2, /* x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)):
                               torch gelu, approximate='tanh' */
    KERN_ACT_RELU = 3,      /* max(x, 0); NaN stays NaN */
    KERN_ACT_SILU = 4,      /* x * sigmoid(x): torch silu */
    KERN_ACT_COUNT
} kern_act;
/* "none", "gelu", "gelu_tanh", "relu", "silu" ("invalid" otherwise). */
KERN_API const char *kern_act_name(kern_act act);

/* ------------------------------------------------------------------ tensors */

typedef struct kern_tensor {
    void *data;
    kern_dtype dtype;
    int ndim;
    int64_t shape[KERN_MAX_DIMS];
    int64_t stride[KERN_MAX_DIMS]; /* in elements; 0 = broadcast */
} kern_tensor;

/* Contiguous row-major view. Validates ndim, sizes and byte-size overflow;
 * on error *t is left untouched. */
KERN_API kern_status kern_tensor_init(kern_tensor *t, void *data, kern_dtype dt,
                                      int ndim, const int64_t *shape);
/* Strided view; stride may be NULL for contiguous. */
KERN_API kern_status kern_tensor_init_strided(kern_tensor *t, void *data,
                                              kern_dtype dt, int ndim,
                                              const int64_t *shape,
                                              const int64_t *stride);
/* Unchecked convenience constructors for the common ranks (contiguous). */
static inline kern_tensor kern_tensor_1d(void *d, kern_dtype dt, int64_t n0) {
    kern_tensor t;
    memset(&t, 0, sizeof t);
    t.data = d; t.dtype = dt; t.ndim = 1;
    t.shape[0] = n0; t.stride[0] = 1;
    return t;
}
static inline kern_tensor kern_tensor_2d(void *d, kern_dtype dt, int64_t n0,
                                         int64_t n1) {
    kern_tensor t;
    memset(&t, 0, sizeof t);
    t.data = d; t.dtype = dt; t.ndim = 2;
    t.shape[0] = n0; t.shape[1] = n1;
    t.stride[0] = n1; t.stride[1] = 1;
    return t;
}
static inline kern_tensor kern_tensor_4d(void *d, kern_dtype dt, int64_t n0,
                                         int64_t n1, int64_t n2, int64_t n3) {
    kern_tensor t;
    memset(&t, 0, sizeof t);
    t.data = d; t.dtype = dt; t.ndim = 4;
    t.shape[0] = n0; t.shape[1] = n1; t.shape[2] = n2; t.shape[3] = n3;
    t.stride[3] = 1; t.stride[2] = n3; t.stride[1] = n2 * n3;
    t.stride[0] = n1 * n2 * n3;
    return t;
}

/* Number of elements (product of shape; 0 if any dim is 0; -1 on overflow
 * or invalid ndim/shape). */
KERN_API int64_t kern_tensor_numel(const kern_tensor *t);
/* 1 if strides are exactly row-major contiguous (size-1 dims ignored). */
KERN_API int kern_tensor_is_contiguous(const kern_tensor *t);
/* 1 if the last dim has unit stride (or size <= 1; 1 for ndim 0, 0 for an
 * ndim outside 0..KERN_MAX_DIMS). */
KERN_API int kern_tensor_last_dim_unit(const kern_tensor *t);
/* Validates a view: non-NULL, ndim in 0..KERN_MAX_DIMS, known dtype, sizes
 * >= 0, strides >= 0... (negative strides are accepted only if
 * allow_negative), data non-NULL when numel > 0, and the addressed byte
 * span fits in int64_t. `op` and `name` go into the message, e.g.
 * "kern_gemm: a.shape[1]=-3 is negative". */
KERN_API kern_status kern_tensor_check(const kern_tensor *t, const char *op,
                                       const char *name);
/* Lowest and one-past-highest element offsets the view addresses (relative
 * to data, in elements). Both 0 for an empty view. Requires a checked view
 * (an unchecked one whose span overflows gives 0, 0). */
KERN_API void kern_tensor_span(const kern_tensor *t, int64_t *lo, int64_t *hi);
/* 1 if the byte ranges the two views address overlap (also 1 when a
 * non-empty view's byte range overflows: it cannot be shown disjoint). */
KERN_API int kern_tensors_overlap(const kern_tensor *a, const kern_tensor *b);
/* Broadcast `t` to `ndim`/`shape` (numpy rules, aligned at the right); on
 * success *out is a view with stride 0 on broadcast dims. The message names
 * `op`, `name` and the offending dim. */
KERN_API kern_status kern_tensor_broadcast_to(const kern_tensor *t, int ndim,
                                              const int64_t *shape,
                                              kern_tensor *out, const char *op,
                                              const char *name);
/* Writes "[2,3,4]" into buf (always NUL-terminated). Returns buf. */
KERN_API char *kern_shape_str(const kern_tensor *t, char *buf, size_t size);

/* Overflow-safe arithmetic: return 1 on overflow (result unspecified). */
static inline int kern_mul_overflow_i64(int64_t a, int64_t b, int64_t *r) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_mul_overflow(a, b, r);
#else
    if (a > 0 ? (b > INT64_MAX / a || b < INT64_MIN / a)
              : a < -1 ? (b < INT64_MAX / a || b > INT64_MIN / a)
                       : (a == -1 && b == INT64_MIN))
        return 1;
    *r = a * b;
    return 0;
#endif
}
static inline int kern_add_overflow_i64(int64_t a, int64_t b, int64_t *r) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_add_overflow(a, b, r);
#else
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 1;
    *r = a + b;
    return 0;
#endif
}

/* --------------------------------------------------- f16 / bf16 conversion */

/* Scalar conversions: round to nearest even, Inf kept, NaN kept and made
 * quiet (sign and top payload bits kept), subnormals exact. These are the
 * bit-exact definitions every vector path matches. */
static inline uint32_t kern__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float kern__bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline float kern_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
        u |= 0x00400000u; /* quiet NaN */
    return kern__bits_f32(u);
}
static inline uint16_t kern_f32_to_bf16(float f) {
    uint32_t u = kern__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign/payload, quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float kern_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);
        if (man) u |= 0x00400000u; /* quiet NaN */
    } else if (exp != 0) {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal: normalize */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400u));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    return kern__bits_f32(u);
}
static inline uint16_t kern_f32_to_f16(float f) {
    uint32_t u = kern__f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, keep top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* rounds to >= 65520: Inf (incl. Inf input) */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal f16 */
        uint32_t r = a - 0x38000000u; /* rebias 127 -> 15 */
        r += 0x0fffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a < 0x33000000u) /* below half the smallest subnormal: +-0 */
        return (uint16_t)sign;
    { /* subnormal f16: shift the full mantissa, round to nearest even */
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
}

/* ------------------------------------------------ counter-based dropout */

/* Host/device qualifier so the same inline code builds for CUDA. */
#if defined(__CUDACC__)
#define KERN_HOSTDEV __host__ __device__
#else
#define KERN_HOSTDEV
#endif

/* Philox4x32-10 (Salmon et al., SC'11): 4 x 32-bit outputs from a 128-bit
 * counter and a 64-bit key. */
static inline KERN_HOSTDEV void kern_philox4x32_10(const uint32_t ctr_in[4],
                                                   const uint32_t key_in[2],
                                                   uint32_t out[4]) {
    uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
    uint32_t k0 = key_in[0], k1 = key_in[1];
    int r;
    for (r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* The dropout mapping every kern attention kernel (CPU and CUDA) uses, so
 * masks agree across devices, thread counts, forward and backward:
 *   idx   = ((b*Hq + h)*Lq + i)*Lk + j   (element of the [B,Hq,Lq,Lk]
 *           score matrix; for varlen Lq/Lk are max_seqlen_q/k and b the
 *           sequence)
 *   ctr   = { lo32(idx>>2), hi32(idx>>2), lo32(offset), hi32(offset) }
 *   key   = { lo32(seed), hi32(seed) }
 *   u     = philox4x32_10(ctr, key)[idx & 3]
 *   keep  = u >= threshold, threshold = kern_dropout_threshold(p)
 * Kept probabilities are scaled by 1/(1-p). */
static inline KERN_HOSTDEV uint32_t kern_dropout_threshold(float p) {
    double t = (double)p * 4294967296.0;
    if (t <= 0) return 0;
    if (t >= 4294967295.0) return 4294967295u;
    return (uint32_t)t;
}
static inline KERN_HOSTDEV uint32_t kern_dropout_bits(uint64_t seed,
                                                      uint64_t offset,
                                                      uint64_t idx) {
    uint32_t ctr[4], key[2], out[4];
    uint64_t g = idx >> 2;
    ctr[0] = (uint32_t)g; ctr[1] = (uint32_t)(g >> 32);
    ctr[2] = (uint32_t)offset; ctr[3] = (uint32_t)(offset >> 32);
    key[0] = (uint32_t)seed; key[1] = (uint32_t)(seed >> 32);
    kern_philox4x32_10(ctr, key, out);
    return out[idx & 3];
}
static inline KERN_HOSTDEV int kern_dropout_keep(uint64_t seed, uint64_t offset,
                                                 uint64_t idx, uint32_t threshold) {
    return kern_dropout_bits(seed, offset, idx) >= threshold;
}

/* Array conversions, vectorized with the best path the context allows
 * (AVX-512, F16C/AVX2, NEON, scalar); results are bit-identical to the
 * scalar functions above. src and dst must not overlap. n >= 0. */
struct kern_ctx;
KERN_API kern_status kern_convert(struct kern_ctx *ctx, kern_dtype src_dt,
                                  const void *src, kern_dtype dst_dt,
                                  void *dst, int64_t n);

/* ------------------------------------------------------------ CPU features */

enum {
    KERN_CPU_AVX2 = 1u << 0,
    KERN_CPU_FMA = 1u << 1,
    KERN_CPU_F16C = 1u << 2,
    KERN_CPU_AVX512F = 1u << 3,
    KERN_CPU_AVX512BW = 1u << 4,
    KERN_CPU_AVX512VL = 1u << 5,
    KERN_CPU_AVX512DQ = 1u << 6,
    KERN_CPU_AVX512VNNI = 1u << 7,
    KERN_CPU_AVX512BF16 = 1u << 8,
    KERN_CPU_AVXVNNI = 1u << 9,
    KERN_CPU_AMX_TILE = 1u << 10,
    KERN_CPU_AMX_INT8 = 1u << 11,
    KERN_CPU_AMX_BF16 = 1u << 12,
    KERN_CPU_NEON = 1u << 16,
    KERN_CPU_NEON_DOT = 1u << 17,
    KERN_CPU_NEON_BF16 = 1u << 18,
    KERN_CPU_NEON_FP16 = 1u << 19
};
/* Bit mask of KERN_CPU_* the CPU and OS support (cpuid + xgetbv on x86,
 * getauxval on AArch64). Computed once, thread safe. KERN_NO_SIMD at
 * compile time makes it 0. */
KERN_API uint32_t kern_cpu_features(void);
/* Writes e.g. "avx2 fma f16c avx512f ..." (NUL-terminated); returns buf. */
KERN_API char *kern_cpu_features_str(uint32_t features, char *buf, size_t size);

/* ISA levels: what a context may use. A cap lowers the level for tests. */
typedef enum kern_isa {
    KERN_ISA_AUTO = 0, /* the best this CPU has */
    KERN_ISA_SCALAR,   /* portable C only */
    KERN_ISA_AVX2,     /* x86: AVX2 + FMA + F16C (and AVX-VNNI if present) */
    KERN_ISA_AVX512,   /* x86: AVX-512 F/BW/VL/DQ (+VNNI, +BF16 if present) */
    KERN_ISA_NEON,     /* AArch64: NEON (+dot product, +bf16 if present) */
    KERN_ISA_COUNT
} kern_isa;
KERN_API const char *kern_isa_name(kern_isa isa);
/* Feature mask an ISA level grants on this CPU (0 if the CPU lacks the
 * level's base features; KERN_ISA_SCALAR grants 0 and is always
 * available). */
KERN_API uint32_t kern_isa_features(kern_isa isa);
KERN_API int kern_isa_available(kern_isa isa);
/* The best level this CPU supports. */
KERN_API kern_isa kern_isa_best(void);

/* ------------------------------------------------------------------ context */

/* A task: called once per index in [0, n_tasks); `thread` is in
 * [0, kern_ctx_threads(ctx)) and identifies the per-thread scratch slot. */
typedef void (*kern_task_fn)(void *arg, int64_t task, int thread);
/* A user pool: must call fn(arg, i, thread) exactly once for every i in
 * [0, n_tasks), with thread < the n_threads given in kern_ctx_params and no
 * two concurrent calls sharing a thread index, and return when all are
 * done. */
typedef void (*kern_parallel_for_fn)(void *user, int64_t n_tasks,
                                     kern_task_fn fn, void *arg);

typedef struct kern_allocator {
    /* Both set or both NULL (NULL = aligned malloc/free). align is a power
     * of two >= 64. */
    void *(*alloc)(void *user, size_t size, size_t align);
    void (*free)(void *user, void *ptr);
    void *user;
} kern_allocator;

typedef struct kern_ctx_params {
    int n_threads;   /* 0 = one per online CPU; 1 = no worker threads */
    kern_parallel_for_fn parallel_for; /* NULL = built-in pool */
    void *parallel_for_user;
    kern_allocator allocator;
    kern_isa isa_cap; /* KERN_ISA_AUTO = best available */
    int deterministic; /* nonzero: same bits for any thread count where the
                          op documents it can (reductions in fixed order) */
} kern_ctx_params;

typedef struct kern_ctx kern_ctx;

KERN_API kern_status kern_ctx_create(const kern_ctx_params *params,
                                     kern_ctx **out);
/* Joins the workers and frees all scratch. NULL is ignored. Must not be
 * called while an op runs on the context. The default context is never
 * destroyed. */
KERN_API void kern_ctx_destroy(kern_ctx *ctx);
/* The process-wide default context (created once, thread safe); NULL if it
 * could not be created (see kern_last_error). */
KERN_API kern_ctx *kern_default_ctx(void);
KERN_API int kern_ctx_threads(const kern_ctx *ctx);
/* The effective ISA level (cap resolved against the CPU). */
KERN_API kern_isa kern_ctx_isa(const kern_ctx *ctx);
/* KERN_CPU_* features kernels may use under this context's ISA level. */
KERN_API uint32_t kern_ctx_features(const kern_ctx *ctx);
KERN_API int kern_ctx_deterministic(const kern_ctx *ctx);
/* Changes the ISA cap; KERN_ERR_UNSUPPORTED if the CPU lacks the level. */
KERN_API kern_status kern_ctx_set_isa_cap(kern_ctx *ctx, kern_isa cap);

/* Runs fn over [0, n_tasks) on the context's threads (the caller takes
 * part as thread 0), handing out chunks of tasks dynamically, and returns
 * when all are done. n_tasks = 0 returns at once; NULL fn or n_tasks < 0
 * is KERN_ERR_ARG. Inside a task it runs inline. Calls on one context
 * from several user threads are serialized. */
KERN_API kern_status kern_parallel_for(kern_ctx *ctx, int64_t n_tasks,
                                       kern_task_fn fn, void *arg);

/* ------------------------------------------------ internal API for kernels
 * Everything below with the kern__ prefix is for kernel headers; it is not
 * a stable public API. */

/* Sets the thread-local message (printf style) and returns `s`. */
KERN_API kern_status kern__err(kern_status s, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Op bracket: resolves NULL to the default context, rejects nested ops and
 * takes the context lock. On success *ctx is valid and kern__op_end must be
 * called. `op` names the operation in messages. */
KERN_API kern_status kern__op_begin(kern_ctx **ctx, const char *op);
KERN_API void kern__op_end(kern_ctx *ctx);

/* 1 if two distinct index tuples of the (checked) view t address the same
 * element: a zero stride, or strides too small for the dims they step
 * over. Such a view cannot be an output. Conservative for interleaved
 * layouts (dims sorted by stride must each step over the extent of the
 * smaller ones). 0 for views of at most one element. */
KERN_API int kern__tensor_self_overlap(const kern_tensor *t);

/* Memory through the context's allocator (64-byte aligned). */
KERN_API void *kern__alloc(kern_ctx *ctx, size_t size);
KERN_API void kern__free(kern_ctx *ctx, void *ptr);

/* Shared workspace of at least `size` bytes, 64-byte aligned, reused across
 * ops (grown when too small, never shrunk). Valid until the next call of
 * kern__workspace on this context; NULL on allocation failure. Call only
 * between kern__op_begin/end, outside tasks. */
KERN_API void *kern__workspace(kern_ctx *ctx, size_t size);
/* Ensures every thread slot has at least `size` bytes of scratch. Call
 * before kern_parallel_for; then tasks fetch theirs with
 * kern__thread_scratch. Slots are 64-byte aligned and never share a cache
 * line. */
KERN_API kern_status kern__reserve_thread_scratch(kern_ctx *ctx, size_t size);
KERN_API void *kern__thread_scratch(kern_ctx *ctx, int thread);

#if defined(__GNUC__) || defined(__clang__)
#define KERN_RESTRICT __restrict__
#define KERN_LIKELY(x) __builtin_expect(!!(x), 1)
#define KERN_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define KERN_ALIGNED(n) __attribute__((aligned(n)))
#else
#define KERN_RESTRICT
#define KERN_LIKELY(x) (x)
#define KERN_UNLIKELY(x) (x)
#define KERN_ALIGNED(n)
#endif

/* Target attributes for ISA-specific functions. */
#if !defined(KERN_NO_SIMD) && (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__))
#define KERN_X86 1
#define KERN_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KERN_TARGET_AVX512                                                    \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define KERN_TARGET_AVX512VNNI                                                \
    __attribute__((target(                                                    \
        "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define KERN_TARGET_AVX512BF16                                                \
    __attribute__((target(                                                    \
        "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))
#define KERN_TARGET_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#endif
#if !defined(KERN_NO_SIMD) && defined(__aarch64__) && defined(__ARM_NEON)
#define KERN_NEON 1
#endif

/* Internal invariant check (never for user input). Overridable. */
#ifndef KERN_ASSERT
#define KERN_ASSERT(x) ((void)0)
#endif

#ifdef __cplusplus
}
#endif
#endif /* KERN_BASE_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_BASE_IMPLEMENTED)
#define KERN_BASE_IMPLEMENTED

#if !defined(_GNU_SOURCE) && defined(__linux__)
/* sched_getaffinity etc. are not needed; sysconf is POSIX. */
#endif
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef KERN_X86
#include <cpuid.h>
#include <immintrin.h>
#endif
#ifdef KERN_NEON
#include <arm_neon.h>
#include <sys/auxv.h>
#endif
/* g++ 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics
 * (the `__Y = __Y` idiom of _mm512_undefined_*). Silenced for the
 * implementation translation unit only, when compiled as C++. */
#if defined(__cplusplus) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__cplusplus)
#define KERN__TLS thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define KERN__TLS _Thread_local
#else
#define KERN__TLS __thread
#endif

/* --------------------------------------------------------------- status */

static KERN__TLS char kern__errbuf[512];

KERN_API const char *kern_status_name(kern_status s) {
    switch (s) {
#define KERN__STATUS_NAME(name, text) case KERN_##name: return "KERN_" #name;
        KERN_STATUS_LIST(KERN__STATUS_NAME)
#undef KERN__STATUS_NAME
    default: break;
    }
    return "KERN_STATUS_UNKNOWN";
}

KERN_API const char *kern_status_text(kern_status s) {
    switch (s) {
#define KERN__STATUS_TEXT(name, text) case KERN_##name: return text;
        KERN_STATUS_LIST(KERN__STATUS_TEXT)
#undef KERN__STATUS_TEXT
    default: break;
    }
    return "unknown status";
}

KERN_API const char *kern_last_error(void) { return kern__errbuf; }
KERN_API void kern_clear_error(void) { kern__errbuf[0] = 0; }

KERN_API kern_status kern__err(kern_status s, const char *fmt, ...) {
    char tmp[sizeof kern__errbuf]; /* the arguments may be the old message */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(kern__errbuf, tmp, sizeof tmp);
    return s;
}

/* --------------------------------------------------------------- dtypes */

KERN_API size_t kern_dtype_size(kern_dtype dt) {
    switch (dt) {
    case KERN_F32: case KERN_I32: return 4;
    case KERN_F16: case KERN_BF16: return 2;
    case KERN_I8: case KERN_U8: case KERN_BOOL: return 1;
    case KERN_I64: return 8;
    default: return 0;
    }
}

KERN_API const char *kern_dtype_name(kern_dtype dt) {
    switch (dt) {
    case KERN_F32: return "f32";
    case KERN_F16: return "f16";
    case KERN_BF16: return "bf16";
    case KERN_I8: return "i8";
    case KERN_U8: return "u8";
    case KERN_I32: return "i32";
    case KERN_I64: return "i64";
    case KERN_BOOL: return "bool";
    default: return "invalid";
    }
}

KERN_API const char *kern_act_name(kern_act act) {
    switch (act) {
    case KERN_ACT_NONE: return "none";
    case KERN_ACT_GELU: return "gelu";
    case KERN_ACT_GELU_TANH: return "gelu_tanh";
    case KERN_ACT_RELU: return "relu";
    case KERN_ACT_SILU: return "silu";
    default: return "invalid";
    }
}

KERN_API int kern_dtype_is_float(kern_dtype dt) {
    return dt == KERN_F32 || dt == KERN_F16 || dt == KERN_BF16;
}

/* --------------------------------------------------------------- tensors */

KERN_API char *kern_shape_str(const kern_tensor *t, char *buf, size_t size) {
    size_t n = 0;
    int i;
    if (!buf || size == 0) return buf;
    buf[0] = 0;
    if (!t || t->ndim < 0 || t->ndim > KERN_MAX_DIMS) {
        snprintf(buf, size, "[?]");
        return buf;
    }
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (i = 0; i < t->ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ",%lld" : "%lld",
                              (long long)t->shape[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
    return buf;
}

KERN_API int64_t kern_tensor_numel(const kern_tensor *t) {
    int64_t n = 1;
    int i;
    if (!t || t->ndim < 0 || t->ndim > KERN_MAX_DIMS) return -1;
    for (i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0) return -1;
        if (t->shape[i] == 0) return 0;
    }
    for (i = 0; i < t->ndim; i++)
        if (kern_mul_overflow_i64(n, t->shape[i], &n)) return -1;
    return n;
}

KERN_API int kern_tensor_is_contiguous(const kern_tensor *t) {
    int64_t expect = 1;
    int i;
    if (!t || t->ndim < 0 || t->ndim > KERN_MAX_DIMS) return 0;
    if (kern_tensor_numel(t) == 0) return 1;
    for (i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 1) continue;
        if (t->shape[i] == 0) return 1;
        if (t->stride[i] != expect) return 0;
        if (kern_mul_overflow_i64(expect, t->shape[i], &expect)) return 0;
    }
    return 1;
}

KERN_API int kern_tensor_last_dim_unit(const kern_tensor *t) {
    if (t && (t->ndim < 0 || t->ndim > KERN_MAX_DIMS)) return 0;
    if (!t || t->ndim == 0) return 1;
    return t->shape[t->ndim - 1] <= 1 || t->stride[t->ndim - 1] == 1;
}

static kern_status kern__tensor_check(const kern_tensor *t, const char *op,
                                      const char *name, int allow_negative) {
    int i;
    int64_t lo = 0, hi = 0, numel;
    size_t es;
    if (!op) op = "kern";
    if (!name) name = "tensor";
    if (!t) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, name);
    if (t->ndim < 0 || t->ndim > KERN_MAX_DIMS)
        return kern__err(KERN_ERR_ARG, "%s: %s.ndim=%d is outside 0..%d", op,
                         name, t->ndim, KERN_MAX_DIMS);
    es = kern_dtype_size(t->dtype);
    if (es == 0)
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%d is not a kern_dtype",
                         op, name, (int)t->dtype);
    for (i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return kern__err(KERN_ERR_SHAPE, "%s: %s.shape[%d]=%lld is negative",
                             op, name, i, (long long)t->shape[i]);
        if (t->stride[i] < 0 && !allow_negative)
            return kern__err(KERN_ERR_LAYOUT,
                             "%s: %s.stride[%d]=%lld is negative", op, name, i,
                             (long long)t->stride[i]);
    }
    numel = kern_tensor_numel(t);
    if (numel < 0)
        return kern__err(KERN_ERR_SHAPE,
                         "%s: %s has %d dims whose element count overflows "
                         "int64",
                         op, name, t->ndim);
    if (numel == 0) return KERN_OK;
    for (i = 0; i < t->ndim; i++) {
        int64_t ext;
        if (kern_mul_overflow_i64(t->shape[i] - 1, t->stride[i], &ext) ||
            (ext >= 0 ? kern_add_overflow_i64(hi, ext, &hi)
                      : kern_add_overflow_i64(lo, ext, &lo)))
            return kern__err(KERN_ERR_SHAPE,
                             "%s: %s.shape[%d]=%lld with stride %lld overflows "
                             "int64",
                             op, name, i, (long long)t->shape[i],
                             (long long)t->stride[i]);
    }
    {
        int64_t span, bytes;
        if (kern_add_overflow_i64(hi - lo, 1, &span) ||
            kern_mul_overflow_i64(span, (int64_t)es, &bytes))
            return kern__err(KERN_ERR_SHAPE,
                             "%s: %s spans more than INT64_MAX bytes", op, name);
        (void)bytes;
    }
    if (!t->data)
        return kern__err(KERN_ERR_ARG, "%s: %s.data is NULL with %lld elements",
                         op, name, (long long)numel);
    return KERN_OK;
}

KERN_API kern_status kern_tensor_check(const kern_tensor *t, const char *op,
                                       const char *name) {
    return kern__tensor_check(t, op, name, 0);
}

KERN_API kern_status kern_tensor_init_strided(kern_tensor *t, void *data,
                                              kern_dtype dt, int ndim,
                                              const int64_t *shape,
                                              const int64_t *stride) {
    kern_tensor tmp;
    int i;
    kern_status st;
    if (!t) return kern__err(KERN_ERR_ARG, "kern_tensor_init: t is NULL");
    if (ndim < 0 || ndim > KERN_MAX_DIMS)
        return kern__err(KERN_ERR_ARG, "kern_tensor_init: ndim=%d is outside 0..%d",
                         ndim, KERN_MAX_DIMS);
    if (ndim > 0 && !shape)
        return kern__err(KERN_ERR_ARG, "kern_tensor_init: shape is NULL with ndim=%d",
                         ndim);
    memset(&tmp, 0, sizeof tmp);
    tmp.data = data;
    tmp.dtype = dt;
    tmp.ndim = ndim;
    for (i = 0; i < ndim; i++) tmp.shape[i] = shape[i];
    if (stride) {
        for (i = 0; i < ndim; i++) tmp.stride[i] = stride[i];
    } else {
        /* stride[i] = product of the later dims (size-0 dims count as 1,
         * as in PyTorch). Only products a stride needs are formed; in an
         * empty tensor one that overflows is never used and becomes 0. */
        int64_t s = 1;
        int empty = 0, ovf = 0;
        for (i = 0; i < ndim; i++) empty |= tmp.shape[i] == 0;
        for (i = ndim - 1; i >= 0; i--) {
            if (tmp.shape[i] < 0)
                return kern__err(KERN_ERR_SHAPE,
                                 "kern_tensor_init: shape[%d]=%lld is negative", i,
                                 (long long)tmp.shape[i]);
            tmp.stride[i] = ovf ? 0 : s;
            if (i > 0 && !ovf && tmp.shape[i] > 0 && kern_mul_overflow_i64(s, tmp.shape[i], &s)) {
                if (!empty)
                    return kern__err(KERN_ERR_SHAPE,
                                     "kern_tensor_init: shape[%d]=%lld makes the "
                                     "element count overflow int64",
                                     i, (long long)tmp.shape[i]);
                ovf = 1;
            }
        }
    }
    st = kern_tensor_check(&tmp, "kern_tensor_init", "tensor");
    if (st != KERN_OK) return st;
    *t = tmp;
    return KERN_OK;
}

KERN_API kern_status kern_tensor_init(kern_tensor *t, void *data, kern_dtype dt,
                                      int ndim, const int64_t *shape) {
    return kern_tensor_init_strided(t, data, dt, ndim, shape, NULL);
}

/* Element span [lo, hi) of a view with numel > 0; 1 if it overflows
 * int64 (only an invalid view does). */
static int kern__tensor_span(const kern_tensor *t, int64_t *lo, int64_t *hi) {
    int64_t l = 0, h = 0, ext;
    int i;
    for (i = 0; i < t->ndim; i++) {
        if (kern_mul_overflow_i64(t->shape[i] - 1, t->stride[i], &ext) ||
            (ext >= 0 ? kern_add_overflow_i64(h, ext, &h) : kern_add_overflow_i64(l, ext, &l)))
            return 1;
    }
    if (kern_add_overflow_i64(h, 1, &h)) return 1;
    *lo = l;
    *hi = h;
    return 0;
}

KERN_API void kern_tensor_span(const kern_tensor *t, int64_t *lo, int64_t *hi) {
    if (kern_tensor_numel(t) <= 0 || kern__tensor_span(t, lo, hi)) {
        *lo = 0; /* empty (or, for an unchecked view, a span that overflows) */
        *hi = 0;
    }
}

KERN_API int kern_tensors_overlap(const kern_tensor *a, const kern_tensor *b) {
    int64_t alo, ahi, blo, bhi, ea, eb;
    uintptr_t a0, a1, b0, b1;
    if (!a || !b || !a->data || !b->data) return 0;
    if (kern_tensor_numel(a) <= 0 || kern_tensor_numel(b) <= 0) return 0;
    /* a view whose byte span overflows cannot be shown disjoint */
    ea = (int64_t)kern_dtype_size(a->dtype);
    eb = (int64_t)kern_dtype_size(b->dtype);
    if (kern__tensor_span(a, &alo, &ahi) || kern__tensor_span(b, &blo, &bhi) ||
        kern_mul_overflow_i64(alo, ea, &alo) || kern_mul_overflow_i64(ahi, ea, &ahi) ||
        kern_mul_overflow_i64(blo, eb, &blo) || kern_mul_overflow_i64(bhi, eb, &bhi))
        return 1;
    a0 = (uintptr_t)a->data + (uintptr_t)alo;
    a1 = (uintptr_t)a->data + (uintptr_t)ahi;
    b0 = (uintptr_t)b->data + (uintptr_t)blo;
    b1 = (uintptr_t)b->data + (uintptr_t)bhi;
    return a0 < b1 && b0 < a1;
}

KERN_API int kern__tensor_self_overlap(const kern_tensor *t) {
    int idx[KERN_MAX_DIMS], n = 0, i, j;
    int64_t extent = 1;
    if (!t || kern_tensor_numel(t) <= 1) return 0;
    for (i = 0; i < t->ndim; i++)
        if (t->shape[i] > 1) idx[n++] = i;
    for (i = 1; i < n; i++) /* insertion sort by stride */
        for (j = i; j > 0 && t->stride[idx[j]] < t->stride[idx[j - 1]]; j--) {
            int tmp = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = tmp;
        }
    for (i = 0; i < n; i++) {
        int64_t s = t->stride[idx[i]];
        if (s < extent) return 1;
        if (kern_mul_overflow_i64(s, t->shape[idx[i]], &extent)) return 0;
    }
    return 0;
}

KERN_API kern_status kern_tensor_broadcast_to(const kern_tensor *t, int ndim,
                                              const int64_t *shape,
                                              kern_tensor *out, const char *op,
                                              const char *name) {
    kern_tensor r;
    int i;
    if (!op) op = "kern";
    if (!name) name = "tensor";
    if (!t) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, name);
    if (!out)
        return kern__err(KERN_ERR_ARG, "%s: out is NULL broadcasting %s", op,
                         name);
    if (ndim < 0 || ndim > KERN_MAX_DIMS)
        return kern__err(KERN_ERR_ARG,
                         "%s: ndim=%d (broadcasting %s) is outside 0..%d", op,
                         ndim, name, KERN_MAX_DIMS);
    if (ndim > 0 && !shape)
        return kern__err(KERN_ERR_ARG,
                         "%s: shape is NULL with ndim=%d (broadcasting %s)", op,
                         ndim, name);
    if (t->ndim < 0 || t->ndim > ndim)
        return kern__err(KERN_ERR_SHAPE,
                         "%s: %s has %d dims, cannot broadcast to %d dims", op,
                         name, t->ndim, ndim);
    for (i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return kern__err(KERN_ERR_SHAPE,
                             "%s: target shape[%d]=%lld (broadcasting %s) is "
                             "negative",
                             op, i, (long long)shape[i], name);
    {
        int64_t n = 1;
        int empty = 0, ovf = 0;
        for (i = 0; i < ndim; i++) {
            empty |= shape[i] == 0;
            ovf |= kern_mul_overflow_i64(n, shape[i], &n);
        }
        if (ovf && !empty)
            return kern__err(KERN_ERR_SHAPE,
                             "%s: the element count of the target shape (broadcasting %s) "
                             "overflows int64",
                             op, name);
    }
    r = *t;
    r.ndim = ndim;
    for (i = 0; i < ndim; i++) {
        int src = i - (ndim - t->ndim);
        if (src < 0) {
            r.shape[i] = shape[i];
            r.stride[i] = 0;
        } else if (t->shape[src] == shape[i]) {
            r.shape[i] = shape[i];
            r.stride[i] = t->stride[src];
        } else if (t->shape[src] == 1) {
            r.shape[i] = shape[i];
            r.stride[i] = 0;
        } else {
            return kern__err(KERN_ERR_SHAPE,
                             "%s: %s.shape[%d]=%lld does not broadcast to %lld",
                             op, name, src, (long long)t->shape[src],
                             (long long)shape[i]);
        }
    }
    *out = r;
    return KERN_OK;
}

/* ---------------------------------------------------------- CPU features */

static uint32_t kern__features_cache;
static pthread_once_t kern__features_once = PTHREAD_ONCE_INIT;

static void kern__detect_features(void) {
    uint32_t f = 0;
#ifdef KERN_X86
    unsigned a, b, c, d, max_leaf;
    uint64_t xcr0 = 0;
    if (!__get_cpuid(0, &max_leaf, &b, &c, &d)) return;
    __cpuid_count(1, 0, a, b, c, d);
    {
        int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
        int fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
        if (osxsave) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            xcr0 = ((uint64_t)hi << 32) | lo;
        }
        if (avx && (xcr0 & 0x6) == 0x6) { /* OS saves xmm and ymm state */
            if (fma) f |= KERN_CPU_FMA;
            if (f16c) f |= KERN_CPU_F16C;
            if (max_leaf >= 7) {
                unsigned r1[4] = {0, 0, 0, 0}; /* leaf 7 subleaf 1 */
                __cpuid_count(7, 0, a, b, c, d);
                if ((b >> 5) & 1) f |= KERN_CPU_AVX2;
                if ((xcr0 & 0xe0) == 0xe0) { /* opmask, zmm hi256, hi16 zmm */
                    if ((b >> 16) & 1) f |= KERN_CPU_AVX512F;
                    if ((b >> 17) & 1) f |= KERN_CPU_AVX512DQ;
                    if ((b >> 30) & 1) f |= KERN_CPU_AVX512BW;
                    if ((b >> 31) & 1) f |= KERN_CPU_AVX512VL;
                    if ((c >> 11) & 1) f |= KERN_CPU_AVX512VNNI;
                }
                if ((xcr0 & 0x60000) == 0x60000) { /* AMX tile config+data */
                    if ((d >> 24) & 1) f |= KERN_CPU_AMX_TILE;
                    if ((d >> 25) & 1) f |= KERN_CPU_AMX_INT8;
                    if ((d >> 22) & 1) f |= KERN_CPU_AMX_BF16;
                }
                if (a >= 1) {
                    __cpuid_count(7, 1, r1[0], r1[1], r1[2], r1[3]);
                    if ((r1[0] >> 4) & 1) f |= KERN_CPU_AVXVNNI;
                    if (((r1[0] >> 5) & 1) && (xcr0 & 0xe0) == 0xe0)
                        f |= KERN_CPU_AVX512BF16;
                }
            }
        }
    }
#endif
#ifdef KERN_NEON
    {
        unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
        f |= KERN_CPU_NEON; /* mandatory on AArch64 */
        if (hw & (1ul << 20)) f |= KERN_CPU_NEON_DOT;   /* HWCAP_ASIMDDP */
        if (hw & (1ul << 10)) f |= KERN_CPU_NEON_FP16;  /* HWCAP_ASIMDHP */
        if (hw2 & (1ul << 14)) f |= KERN_CPU_NEON_BF16; /* HWCAP2_BF16 */
    }
#endif
    kern__features_cache = f;
}

KERN_API uint32_t kern_cpu_features(void) {
    pthread_once(&kern__features_once, kern__detect_features);
    return kern__features_cache;
}

KERN_API char *kern_cpu_features_str(uint32_t f, char *buf, size_t size) {
    static const struct { uint32_t bit; const char *name; } names[] = {
        {KERN_CPU_AVX2, "avx2"}, {KERN_CPU_FMA, "fma"}, {KERN_CPU_F16C, "f16c"},
        {KERN_CPU_AVX512F, "avx512f"}, {KERN_CPU_AVX512BW, "avx512bw"},
        {KERN_CPU_AVX512VL, "avx512vl"}, {KERN_CPU_AVX512DQ, "avx512dq"},
        {KERN_CPU_AVX512VNNI, "avx512vnni"}, {KERN_CPU_AVX512BF16, "avx512bf16"},
        {KERN_CPU_AVXVNNI, "avxvnni"}, {KERN_CPU_AMX_TILE, "amx-tile"},
        {KERN_CPU_AMX_INT8, "amx-int8"}, {KERN_CPU_AMX_BF16, "amx-bf16"},
        {KERN_CPU_NEON, "neon"}, {KERN_CPU_NEON_DOT, "dotprod"},
        {KERN_CPU_NEON_BF16, "bf16"}, {KERN_CPU_NEON_FP16, "fp16"}};
    size_t n = 0, i;
    if (!buf || size == 0) return buf;
    buf[0] = 0;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(f & names[i].bit)) continue;
        if (n + 1 >= size) break;
        n += (size_t)snprintf(buf + n, size - n, n ? " %s" : "%s", names[i].name);
        if (n >= size) { n = size - 1; break; }
    }
    if (n == 0) snprintf(buf, size, "scalar");
    return buf;
}

KERN_API const char *kern_isa_name(kern_isa isa) {
    switch (isa) {
    case KERN_ISA_AUTO: return "auto";
    case KERN_ISA_SCALAR: return "scalar";
    case KERN_ISA_AVX2: return "avx2";
    case KERN_ISA_AVX512: return "avx512";
    case KERN_ISA_NEON: return "neon";
    default: return "invalid";
    }
}

#define KERN__AVX2_BASE (KERN_CPU_AVX2 | KERN_CPU_FMA | KERN_CPU_F16C)
#define KERN__AVX512_BASE                                                     \
    (KERN__AVX2_BASE | KERN_CPU_AVX512F | KERN_CPU_AVX512BW |                  \
     KERN_CPU_AVX512VL | KERN_CPU_AVX512DQ)

KERN_API uint32_t kern_isa_features(kern_isa isa) {
    uint32_t f = kern_cpu_features();
    switch (isa) {
    case KERN_ISA_SCALAR: return 0;
    case KERN_ISA_AVX2:
        if ((f & KERN__AVX2_BASE) != KERN__AVX2_BASE) return 0;
        return f & (KERN__AVX2_BASE | KERN_CPU_AVXVNNI);
    case KERN_ISA_AVX512:
        if ((f & KERN__AVX512_BASE) != KERN__AVX512_BASE) return 0;
        return f & (KERN__AVX512_BASE | KERN_CPU_AVXVNNI | KERN_CPU_AVX512VNNI |
                    KERN_CPU_AVX512BF16 | KERN_CPU_AMX_TILE | KERN_CPU_AMX_INT8 |
                    KERN_CPU_AMX_BF16);
    case KERN_ISA_NEON:
        return (f & KERN_CPU_NEON) ? (f & (KERN_CPU_NEON | KERN_CPU_NEON_DOT |
                                           KERN_CPU_NEON_BF16 |
                                           KERN_CPU_NEON_FP16))
                                   : 0;
    case KERN_ISA_AUTO: return kern_isa_features(kern_isa_best());
    default: return 0;
    }
}

KERN_API int kern_isa_available(kern_isa isa) {
    if (isa == KERN_ISA_SCALAR || isa == KERN_ISA_AUTO) return 1;
    if (isa <= KERN_ISA_AUTO || isa >= KERN_ISA_COUNT) return 0;
    return kern_isa_features(isa) != 0;
}

KERN_API kern_isa kern_isa_best(void) {
    if (kern_isa_available(KERN_ISA_AVX512)) return KERN_ISA_AVX512;
    if (kern_isa_available(KERN_ISA_AVX2)) return KERN_ISA_AVX2;
    if (kern_isa_available(KERN_ISA_NEON)) return KERN_ISA_NEON;
    return KERN_ISA_SCALAR;
}

/* ------------------------------------------------------------ thread pool */

#define KERN__CACHELINE 64

typedef struct kern__slot { /* per-thread scratch, padded to a cache line */
    void *ptr;
    size_t size;
    char pad[KERN__CACHELINE - sizeof(void *) - sizeof(size_t)];
} kern__slot;

/* What a thread is inside: a chain of frames, innermost first, one per op
 * (thread < 0) or per task being run (thread >= 0). A worker's task frame
 * continues the chain of the thread that dispatched the job, so nesting is
 * seen across threads: an op on a context that appears anywhere in the
 * chain would wait for itself (KERN_ERR_UNSUPPORTED), and a parallel_for
 * under any task frame runs inline. */
typedef struct kern__frame {
    struct kern_ctx *ctx;
    int thread;
    const struct kern__frame *prev;
} kern__frame;

typedef struct kern__job {
    kern_task_fn fn;
    void *arg;
    int64_t n_tasks;
    int64_t chunk;
    const kern__frame *caller; /* the dispatching thread's chain */
} kern__job;

struct kern_ctx {
    kern_ctx_params params;
    int n_threads;
    kern_isa isa;
    uint32_t features;
    pthread_mutex_t op_lock;   /* serializes ops on this context */
    kern__frame op_frame;      /* frame of the running op (op_lock held) */
    pthread_mutex_t pf_lock;   /* one parallel_for dispatch at a time */
    /* pool */
    pthread_t *workers;
    int n_workers;
    pthread_mutex_t pool_lock; /* sleep/wake handshake only */
    pthread_cond_t pool_cv;
    kern__job job;
    /* hot words, each on its own cache line */
    /* even: a job is ready; odd: the next job is being written */
    KERN_ALIGNED(64) uint64_t generation;
    KERN_ALIGNED(64) int64_t next_task;
    KERN_ALIGNED(64) int64_t done; /* tasks of the current job finished */
    KERN_ALIGNED(64) int active; /* workers that joined a job and are in it */
    KERN_ALIGNED(64) int stop;
    int sleepers;
    /* scratch */
    kern__slot *slots;
    void *workspace;
    size_t workspace_size;
};

static KERN__TLS const kern__frame *kern__tls_frame;

/* The innermost frame of `ctx` in this thread's chain (NULL if none). */
static const kern__frame *kern__find_frame(const kern_ctx *ctx) {
    const kern__frame *f;
    for (f = kern__tls_frame; f; f = f->prev)
        if (f->ctx == ctx) return f;
    return NULL;
}
/* The innermost task frame of this thread's chain (NULL outside tasks). */
static const kern__frame *kern__task_frame(void) {
    const kern__frame *f;
    for (f = kern__tls_frame; f; f = f->prev)
        if (f->thread >= 0) return f;
    return NULL;
}

static void *kern__sys_alloc(size_t size, size_t align) {
    void *p = NULL;
    if (size == 0) size = align;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align,
                       size) != 0)
        return NULL;
    return p;
}

KERN_API void *kern__alloc(kern_ctx *ctx, size_t size) {
    if (ctx && ctx->params.allocator.alloc)
        return ctx->params.allocator.alloc(ctx->params.allocator.user,
                                           size ? size : 64, 64);
    return kern__sys_alloc(size, 64);
}

KERN_API void kern__free(kern_ctx *ctx, void *ptr) {
    if (!ptr) return;
    if (ctx && ctx->params.allocator.free)
        ctx->params.allocator.free(ctx->params.allocator.user, ptr);
    else
        free(ptr);
}

static inline void kern__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("pause" ::: "memory");
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

/* Runs tasks [0, n) of fn on this thread, inside a task frame. */
static void kern__run_inline(kern_ctx *ctx, int64_t n, kern_task_fn fn,
                             void *arg, int thread) {
    kern__frame f;
    const kern__frame *saved = kern__tls_frame;
    int64_t i;
    f.ctx = ctx;
    f.thread = thread;
    f.prev = saved;
    kern__tls_frame = &f;
    for (i = 0; i < n; i++) fn(arg, i, thread);
    kern__tls_frame = saved;
}

/* Claims chunks of the current job until none are left. */
static void kern__run_tasks(kern_ctx *ctx, const kern__job *job, int thread) {
    kern__frame f;
    const kern__frame *saved = kern__tls_frame;
    f.ctx = ctx;
    f.thread = thread;
    f.prev = job->caller;
    kern__tls_frame = &f;
    for (;;) {
        int64_t i = __atomic_fetch_add(&ctx->next_task, job->chunk,
                                       __ATOMIC_RELAXED);
        int64_t end;
        if (i >= job->n_tasks) break;
        end = job->n_tasks - i > job->chunk ? i + job->chunk : job->n_tasks;
        for (int64_t k = i; k < end; k++) job->fn(job->arg, k, thread);
        __atomic_fetch_add(&ctx->done, end - i, __ATOMIC_RELEASE);
    }
    kern__tls_frame = saved;
}

/* Workers spin this many relax iterations for a new job before sleeping
 * (a few tens of microseconds on current x86 cores). */
#ifndef KERN_SPIN_ITERS
#define KERN_SPIN_ITERS 20000
#endif

typedef struct kern__worker_arg {
    kern_ctx *ctx;
    int thread;
} kern__worker_arg;

/* Job hand-off. The caller marks the generation odd (writing), waits
 * until no worker is inside the previous job, writes the job, and makes the
 * generation even again; it then runs tasks itself and returns once every
 * task is done, without waiting for workers that never woke up (on a busy
 * machine a descheduled worker would otherwise cost a whole time slice).
 * A worker joins a job by raising `active` and then re-reading the
 * generation: seq_cst on both sides means that either the caller sees the
 * worker in `active` (and waits before rewriting the job) or the worker
 * sees the new generation (and leaves the old job alone). */
static void *kern__worker_main(void *p) {
    kern__worker_arg wa = *(kern__worker_arg *)p;
    kern_ctx *ctx = wa.ctx;
    uint64_t seen = 0;
    free(p);
    for (;;) {
        uint64_t gen;
        int spins = 0;
        kern__job job;
        for (;;) {
            gen = __atomic_load_n(&ctx->generation, __ATOMIC_ACQUIRE);
            if ((gen != seen && !(gen & 1)) || __atomic_load_n(&ctx->stop, __ATOMIC_ACQUIRE))
                break;
            if (++spins < KERN_SPIN_ITERS || (gen & 1)) {
                kern__cpu_relax();
                continue;
            }
            pthread_mutex_lock(&ctx->pool_lock);
            ctx->sleepers++;
            while (__atomic_load_n(&ctx->generation, __ATOMIC_ACQUIRE) == seen &&
                   !__atomic_load_n(&ctx->stop, __ATOMIC_ACQUIRE))
                pthread_cond_wait(&ctx->pool_cv, &ctx->pool_lock);
            ctx->sleepers--;
            pthread_mutex_unlock(&ctx->pool_lock);
            spins = 0;
        }
        if (__atomic_load_n(&ctx->stop, __ATOMIC_ACQUIRE)) break;
        __atomic_fetch_add(&ctx->active, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&ctx->generation, __ATOMIC_SEQ_CST) != gen) {
            __atomic_fetch_sub(&ctx->active, 1, __ATOMIC_RELEASE);
            continue; /* the job changed under us: look again */
        }
        seen = gen;
        job = ctx->job;
        kern__run_tasks(ctx, &job, wa.thread);
        __atomic_fetch_sub(&ctx->active, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* The user hook's tasks run inside a task frame too, on whatever thread the
 * hook uses, so nested ops and parallel_fors behave as with the pool. */
typedef struct kern__hook_job {
    kern_ctx *ctx;
    kern_task_fn fn;
    void *arg;
    const kern__frame *caller;
} kern__hook_job;

static void kern__hook_task(void *p, int64_t task, int thread) {
    const kern__hook_job *h = (const kern__hook_job *)p;
    kern__frame f;
    const kern__frame *saved = kern__tls_frame;
    f.ctx = h->ctx;
    f.thread = thread;
    f.prev = h->caller;
    kern__tls_frame = &f;
    h->fn(h->arg, task, thread);
    kern__tls_frame = saved;
}

KERN_API kern_status kern_parallel_for(kern_ctx *ctx, int64_t n_tasks,
                                       kern_task_fn fn, void *arg) {
    const kern__frame *tf;
    if (!fn)
        return kern__err(KERN_ERR_ARG, "kern_parallel_for: fn is NULL");
    if (n_tasks < 0)
        return kern__err(KERN_ERR_ARG, "kern_parallel_for: n_tasks=%lld is negative",
                         (long long)n_tasks);
    if (!ctx) {
        ctx = kern_default_ctx();
        if (!ctx) return KERN_ERR_NOMEM;
    }
    if (n_tasks == 0) return KERN_OK;
    tf = kern__task_frame();
    if (tf) {
        /* Nested (inside a task of any context): run inline on this thread,
         * keeping its thread index when it is a task of this context. */
        const kern__frame *own = kern__find_frame(ctx);
        kern__run_inline(ctx, n_tasks, fn, arg,
                         own && own->thread >= 0 ? own->thread : 0);
        return KERN_OK;
    }
    pthread_mutex_lock(&ctx->pf_lock);
    if (ctx->params.parallel_for) {
        kern__hook_job h;
        h.ctx = ctx;
        h.fn = fn;
        h.arg = arg;
        h.caller = kern__tls_frame;
        ctx->params.parallel_for(ctx->params.parallel_for_user, n_tasks,
                                 kern__hook_task, &h);
    } else if (ctx->n_workers == 0 || n_tasks == 1) {
        kern__run_inline(ctx, n_tasks, fn, arg, 0);
    } else {
        kern__job job;
        int64_t chunk = n_tasks / ((int64_t)ctx->n_threads * 8);
        uint64_t gen = __atomic_load_n(&ctx->generation, __ATOMIC_RELAXED);
        int spins = 0;
        job.fn = fn;
        job.arg = arg;
        job.n_tasks = n_tasks;
        job.chunk = chunk < 1 ? 1 : chunk;
        job.caller = kern__tls_frame;
        __atomic_store_n(&ctx->generation, gen + 1, __ATOMIC_SEQ_CST); /* writing */
        while (__atomic_load_n(&ctx->active, __ATOMIC_SEQ_CST) != 0) {
            if (++spins < 2000) kern__cpu_relax(); /* a straggler of the last job */
            else sched_yield();
        }
        ctx->job = job;
        __atomic_store_n(&ctx->next_task, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&ctx->done, 0, __ATOMIC_RELAXED);
        pthread_mutex_lock(&ctx->pool_lock);
        __atomic_store_n(&ctx->generation, gen + 2, __ATOMIC_RELEASE); /* ready */
        if (ctx->sleepers) pthread_cond_broadcast(&ctx->pool_cv);
        pthread_mutex_unlock(&ctx->pool_lock);
        kern__run_tasks(ctx, &job, 0);
        /* Wait for tasks that workers claimed; yield when they are slow
         * (more threads than free cores). */
        spins = 0;
        while (__atomic_load_n(&ctx->done, __ATOMIC_ACQUIRE) != n_tasks) {
            if (++spins < 2000) kern__cpu_relax();
            else sched_yield();
        }
    }
    pthread_mutex_unlock(&ctx->pf_lock);
    return KERN_OK;
}

static void kern__ctx_free(kern_ctx *ctx) {
    int i;
    if (!ctx) return;
    if (ctx->workers) {
        pthread_mutex_lock(&ctx->pool_lock);
        __atomic_store_n(&ctx->stop, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&ctx->pool_cv);
        pthread_mutex_unlock(&ctx->pool_lock);
        for (i = 0; i < ctx->n_workers; i++) pthread_join(ctx->workers[i], NULL);
        free(ctx->workers);
    }
    if (ctx->slots) {
        for (i = 0; i < ctx->n_threads; i++) kern__free(ctx, ctx->slots[i].ptr);
        free(ctx->slots);
    }
    kern__free(ctx, ctx->workspace);
    pthread_mutex_destroy(&ctx->op_lock);
    pthread_mutex_destroy(&ctx->pf_lock);
    pthread_mutex_destroy(&ctx->pool_lock);
    pthread_cond_destroy(&ctx->pool_cv);
    free(ctx);
}

KERN_API kern_status kern_ctx_create(const kern_ctx_params *params,
                                     kern_ctx **out) {
    kern_ctx_params p;
    kern_ctx *ctx;
    int i;
    void *mem = NULL;
    if (!out) return kern__err(KERN_ERR_ARG, "kern_ctx_create: out is NULL");
    memset(&p, 0, sizeof p);
    if (params) p = *params;
    if (p.n_threads < 0 || p.n_threads > 1024)
        return kern__err(KERN_ERR_ARG,
                         "kern_ctx_create: n_threads=%d is outside 0..1024",
                         p.n_threads);
    if ((p.allocator.alloc == NULL) != (p.allocator.free == NULL))
        return kern__err(KERN_ERR_ARG,
                         "kern_ctx_create: allocator.alloc and allocator.free "
                         "must both be set or both be NULL");
    if ((int)p.isa_cap < 0 || p.isa_cap >= KERN_ISA_COUNT)
        return kern__err(KERN_ERR_ARG, "kern_ctx_create: isa_cap=%d is not a kern_isa",
                         (int)p.isa_cap);
    if (p.isa_cap != KERN_ISA_AUTO && !kern_isa_available(p.isa_cap))
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "kern_ctx_create: isa_cap=%s is not supported by this CPU",
                         kern_isa_name(p.isa_cap));
    if (p.n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        p.n_threads = n < 1 ? 1 : (n > 1024 ? 1024 : (int)n);
    }
    if (posix_memalign(&mem, 64, sizeof(kern_ctx)) != 0)
        return kern__err(KERN_ERR_NOMEM, "kern_ctx_create: out of memory");
    ctx = (kern_ctx *)mem;
    memset(ctx, 0, sizeof *ctx);
    ctx->params = p;
    ctx->n_threads = p.n_threads;
    ctx->isa = p.isa_cap == KERN_ISA_AUTO ? kern_isa_best() : p.isa_cap;
    ctx->features = kern_isa_features(ctx->isa);
    pthread_mutex_init(&ctx->op_lock, NULL);
    pthread_mutex_init(&ctx->pf_lock, NULL);
    pthread_mutex_init(&ctx->pool_lock, NULL);
    pthread_cond_init(&ctx->pool_cv, NULL);
    ctx->slots = (kern__slot *)calloc((size_t)p.n_threads, sizeof(kern__slot));
    if (!ctx->slots) {
        kern__ctx_free(ctx);
        return kern__err(KERN_ERR_NOMEM, "kern_ctx_create: out of memory");
    }
    if (!p.parallel_for && p.n_threads > 1) {
        ctx->workers = (pthread_t *)calloc((size_t)p.n_threads - 1, sizeof(pthread_t));
        if (!ctx->workers) {
            kern__ctx_free(ctx);
            return kern__err(KERN_ERR_NOMEM, "kern_ctx_create: out of memory");
        }
        for (i = 1; i < p.n_threads; i++) {
            kern__worker_arg *wa = (kern__worker_arg *)malloc(sizeof *wa);
            if (wa) { /* filled before the thread can read it */
                wa->ctx = ctx;
                wa->thread = i;
            }
            if (!wa || pthread_create(&ctx->workers[i - 1], NULL,
                                      kern__worker_main, wa) != 0) {
                free(wa);
                kern__ctx_free(ctx);
                return kern__err(KERN_ERR_NOMEM,
                                 "kern_ctx_create: could not start worker %d of %d",
                                 i, p.n_threads - 1);
            }
            ctx->n_workers++;
        }
    }
    *out = ctx;
    return KERN_OK;
}

static kern_ctx *kern__default;
static pthread_once_t kern__default_once = PTHREAD_ONCE_INIT;
static void kern__make_default(void) {
    kern_ctx *c = NULL;
    if (kern_ctx_create(NULL, &c) == KERN_OK)
        __atomic_store_n(&kern__default, c, __ATOMIC_RELEASE);
}
KERN_API kern_ctx *kern_default_ctx(void) {
    kern_ctx *c;
    pthread_once(&kern__default_once, kern__make_default);
    c = __atomic_load_n(&kern__default, __ATOMIC_ACQUIRE);
    if (!c)
        kern__err(KERN_ERR_NOMEM, "kern_default_ctx: could not create the default context");
    return c;
}

KERN_API void kern_ctx_destroy(kern_ctx *ctx) {
    /* The default context is never destroyed (and not created here). A
     * context destroyed from inside its own op or task is left alone. */
    if (!ctx || ctx == __atomic_load_n(&kern__default, __ATOMIC_ACQUIRE)) return;
    if (kern__find_frame(ctx)) return;
    kern__ctx_free(ctx);
}

KERN_API int kern_ctx_threads(const kern_ctx *ctx) {
    if (!ctx) ctx = kern_default_ctx();
    return ctx ? ctx->n_threads : 1;
}
KERN_API kern_isa kern_ctx_isa(const kern_ctx *ctx) {
    if (!ctx) ctx = kern_default_ctx();
    return ctx ? ctx->isa : KERN_ISA_SCALAR;
}
KERN_API uint32_t kern_ctx_features(const kern_ctx *ctx) {
    if (!ctx) ctx = kern_default_ctx();
    return ctx ? ctx->features : 0;
}
KERN_API int kern_ctx_deterministic(const kern_ctx *ctx) {
    if (!ctx) ctx = kern_default_ctx();
    return ctx ? ctx->params.deterministic != 0 : 0;
}
KERN_API kern_status kern_ctx_set_isa_cap(kern_ctx *ctx, kern_isa cap) {
    if (!ctx) return kern__err(KERN_ERR_ARG, "kern_ctx_set_isa_cap: ctx is NULL");
    if ((int)cap < 0 || cap >= KERN_ISA_COUNT)
        return kern__err(KERN_ERR_ARG, "kern_ctx_set_isa_cap: cap=%d is not a kern_isa",
                         (int)cap);
    if (!kern_isa_available(cap))
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "kern_ctx_set_isa_cap: %s is not supported by this CPU",
                         kern_isa_name(cap));
    if (kern__find_frame(ctx))
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "kern_ctx_set_isa_cap: called from inside an op or "
                         "task of the same context");
    pthread_mutex_lock(&ctx->op_lock);
    ctx->params.isa_cap = cap;
    ctx->isa = cap == KERN_ISA_AUTO ? kern_isa_best() : cap;
    ctx->features = kern_isa_features(ctx->isa);
    pthread_mutex_unlock(&ctx->op_lock);
    return KERN_OK;
}

KERN_API kern_status kern__op_begin(kern_ctx **pctx, const char *op) {
    kern_ctx *ctx = *pctx;
    if (!ctx) {
        ctx = kern_default_ctx();
        if (!ctx) return KERN_ERR_NOMEM;
    }
    if (kern__find_frame(ctx))
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: called from inside an op or task of the same "
                         "context; use another context for nested ops",
                         op ? op : "kern");
    pthread_mutex_lock(&ctx->op_lock);
    ctx->op_frame.ctx = ctx;
    ctx->op_frame.thread = -1;
    ctx->op_frame.prev = kern__tls_frame;
    kern__tls_frame = &ctx->op_frame;
    *pctx = ctx;
    return KERN_OK;
}

KERN_API void kern__op_end(kern_ctx *ctx) {
    if (!ctx) return;
    kern__tls_frame = ctx->op_frame.prev;
    pthread_mutex_unlock(&ctx->op_lock);
}

KERN_API void *kern__workspace(kern_ctx *ctx, size_t size) {
    if (size <= ctx->workspace_size && ctx->workspace) return ctx->workspace;
    if (size > (size_t)-1 - 4095) return NULL;
    kern__free(ctx, ctx->workspace);
    ctx->workspace_size = 0;
    size = (size + 4095) & ~(size_t)4095;
    ctx->workspace = kern__alloc(ctx, size);
    if (ctx->workspace) ctx->workspace_size = size;
    return ctx->workspace;
}

KERN_API kern_status kern__reserve_thread_scratch(kern_ctx *ctx, size_t size) {
    int i;
    if (size > (size_t)-1 - 63)
        return kern__err(KERN_ERR_NOMEM,
                         "kern: cannot allocate %zu bytes of thread scratch", size);
    size = (size + 63) & ~(size_t)63;
    for (i = 0; i < ctx->n_threads; i++) {
        kern__slot *s = &ctx->slots[i];
        if (s->size >= size && s->ptr) continue;
        kern__free(ctx, s->ptr);
        s->size = 0;
        s->ptr = kern__alloc(ctx, size);
        if (!s->ptr)
            return kern__err(KERN_ERR_NOMEM,
                             "kern: cannot allocate %zu bytes of thread scratch",
                             size);
        s->size = size;
    }
    return KERN_OK;
}

KERN_API void *kern__thread_scratch(kern_ctx *ctx, int thread) {
    if (thread < 0 || thread >= ctx->n_threads) return NULL;
    return ctx->slots[thread].ptr;
}
/* ----------------------------------------------------- array conversions */

/* From this many destination bytes on, kern_convert writes with
 * non-temporal stores: the result cannot stay in cache anyway, and
 * streaming skips reading the destination lines first (about 1.5x on a
 * DRAM-bound conversion). */
#ifndef KERN_CONVERT_NT_BYTES
#define KERN_CONVERT_NT_BYTES ((int64_t)16 << 20)
#endif
/* kern_convert splits an array across the context's threads when every
 * thread gets at least this many elements. */
#ifndef KERN_CONVERT_MIN_PER_THREAD
#define KERN_CONVERT_MIN_PER_THREAD 32768
#endif

/* (src, dst, n, nt): nt = use non-temporal stores where the path has them. */
typedef void (*kern__cvt_fn)(const void *src, void *dst, int64_t n, int nt);

static void kern__cvt_bf16_f32__ref(const void *s, void *d, int64_t n, int nt) {
    int64_t i;
    (void)nt;
    for (i = 0; i < n; i++)
        ((float *)d)[i] = kern_bf16_to_f32(((const uint16_t *)s)[i]);
}
static void kern__cvt_f16_f32__ref(const void *s, void *d, int64_t n, int nt) {
    int64_t i;
    (void)nt;
    for (i = 0; i < n; i++)
        ((float *)d)[i] = kern_f16_to_f32(((const uint16_t *)s)[i]);
}
static void kern__cvt_f32_bf16__ref(const void *s, void *d, int64_t n, int nt) {
    int64_t i;
    (void)nt;
    for (i = 0; i < n; i++)
        ((uint16_t *)d)[i] = kern_f32_to_bf16(((const float *)s)[i]);
}
static void kern__cvt_f32_f16__ref(const void *s, void *d, int64_t n, int nt) {
    int64_t i;
    (void)nt;
    for (i = 0; i < n; i++)
        ((uint16_t *)d)[i] = kern_f32_to_f16(((const float *)s)[i]);
}

#ifdef KERN_X86
/* bf16 <-> f32 in integer ops: exactly the scalar rounding
 * (vcvtneps2bf16 flushes subnormals, so it is not used here). Tails use
 * masked loads and stores. With nt, the head runs up to a 64-byte aligned
 * destination and the body streams. */
KERN_TARGET_AVX512 static inline __m512i kern__bf16x16_f32__avx512(__m256i h) {
    __m512i v = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(v, _mm512_set1_epi32(0x7fffffff)),
        _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_or_epi32(v, nan, v, _mm512_set1_epi32(0x00400000));
}
KERN_TARGET_AVX512 static inline __m256i kern__f32x16_bf16__avx512(__m512i u) {
    __mmask16 nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
        _mm512_set1_epi32(0x7f800000));
    __m512i rnd = _mm512_add_epi32(
        u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                            _mm512_and_si512(_mm512_srli_epi32(u, 16),
                                             _mm512_set1_epi32(1))));
    __m512i res = _mm512_mask_or_epi32(rnd, nan, u, _mm512_set1_epi32(0x00400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(res, 16));
}
KERN_TARGET_AVX512 static void kern__cvt_bf16_f32__avx512(const void *sv, void *dv,
                                                          int64_t n, int nt) {
    const uint16_t *s = (const uint16_t *)sv;
    float *d = (float *)dv;
    int64_t i = 0;
    if (nt) {
        for (; i < n && ((uintptr_t)(d + i) & 63); i++) d[i] = kern_bf16_to_f32(s[i]);
        for (; i + 32 <= n; i += 32) {
            __m512i a = kern__bf16x16_f32__avx512(_mm256_loadu_si256((const __m256i *)(s + i)));
            __m512i b = kern__bf16x16_f32__avx512(_mm256_loadu_si256((const __m256i *)(s + i + 16)));
            _mm512_stream_si512((__m512i *)(d + i), a);
            _mm512_stream_si512((__m512i *)(d + i + 16), b);
        }
        _mm_sfence();
    }
    for (; i + 32 <= n; i += 32) {
        __m512i a = kern__bf16x16_f32__avx512(_mm256_loadu_si256((const __m256i *)(s + i)));
        __m512i b = kern__bf16x16_f32__avx512(_mm256_loadu_si256((const __m256i *)(s + i + 16)));
        _mm512_storeu_si512((void *)(d + i), a);
        _mm512_storeu_si512((void *)(d + i + 16), b);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff
                                  : (__mmask16)((1u << (unsigned)(n - i)) - 1u);
        __m512i a = kern__bf16x16_f32__avx512(_mm256_maskz_loadu_epi16(m, s + i));
        _mm512_mask_storeu_epi32((void *)(d + i), m, a);
    }
}
KERN_TARGET_AVX512 static void kern__cvt_f32_bf16__avx512(const void *sv, void *dv,
                                                          int64_t n, int nt) {
    const float *s = (const float *)sv;
    uint16_t *d = (uint16_t *)dv;
    int64_t i = 0;
    if (nt) {
        for (; i < n && ((uintptr_t)(d + i) & 31); i++) d[i] = kern_f32_to_bf16(s[i]);
        for (; i + 16 <= n; i += 16)
            _mm256_stream_si256((__m256i *)(d + i),
                                kern__f32x16_bf16__avx512(_mm512_loadu_si512((const void *)(s + i))));
        _mm_sfence();
    }
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i),
                            kern__f32x16_bf16__avx512(_mm512_loadu_si512((const void *)(s + i))));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (unsigned)(n - i)) - 1u);
        _mm256_mask_storeu_epi16((void *)(d + i), m,
                                 kern__f32x16_bf16__avx512(_mm512_maskz_loadu_epi32(m, s + i)));
    }
}
/* With AVX512_BF16, vcvtne2ps2bf16 converts 32 floats in one instruction
 * and rounds to nearest even like the scalar code, but it treats
 * subnormal inputs as zero and its NaN result is not specified bit for
 * bit: blocks holding a subnormal or a NaN (rare) take the integer path. */
KERN_TARGET_AVX512BF16 static void kern__cvt_f32_bf16__avx512bf16(const void *sv, void *dv,
                                                                  int64_t n, int nt) {
    const float *s = (const float *)sv;
    uint16_t *d = (uint16_t *)dv;
    int64_t i = 0;
    if (nt)
        for (; i < n && ((uintptr_t)(d + i) & 63); i++) d[i] = kern_f32_to_bf16(s[i]);
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(s + i), b = _mm512_loadu_ps(s + i + 16);
        __m512i r;
        if (_mm512_kor(_mm512_fpclass_ps_mask(a, 0xa1), /* QNaN|SNaN|denormal */
                       _mm512_fpclass_ps_mask(b, 0xa1)))
            r = _mm512_inserti64x4(
                _mm512_castsi256_si512(kern__f32x16_bf16__avx512(_mm512_castps_si512(a))),
                kern__f32x16_bf16__avx512(_mm512_castps_si512(b)), 1);
        else
            r = (__m512i)_mm512_cvtne2ps_pbh(b, a);
        if (nt) _mm512_stream_si512((__m512i *)(d + i), r);
        else _mm512_storeu_si512((void *)(d + i), r);
    }
    if (nt) _mm_sfence();
    if (i < n) kern__cvt_f32_bf16__avx512(s + i, d + i, n - i, 0);
}
/* F16C rounds to nearest even and handles subnormals, Inf and NaN (made
 * quiet, payload truncated) exactly like the scalar functions. */
KERN_TARGET_AVX512 static void kern__cvt_f16_f32__avx512(const void *sv, void *dv,
                                                         int64_t n, int nt) {
    const uint16_t *s = (const uint16_t *)sv;
    float *d = (float *)dv;
    int64_t i = 0;
    if (nt) {
        for (; i < n && ((uintptr_t)(d + i) & 63); i++) d[i] = kern_f16_to_f32(s[i]);
        for (; i + 32 <= n; i += 32) {
            __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i)));
            __m512 b = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i + 16)));
            _mm512_stream_ps(d + i, a);
            _mm512_stream_ps(d + i + 16, b);
        }
        _mm_sfence();
    }
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i)));
        __m512 b = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i + 16)));
        _mm512_storeu_ps(d + i, a);
        _mm512_storeu_ps(d + i + 16, b);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff
                                  : (__mmask16)((1u << (unsigned)(n - i)) - 1u);
        _mm512_mask_storeu_ps(d + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i)));
    }
}
KERN_TARGET_AVX512 static void kern__cvt_f32_f16__avx512(const void *sv, void *dv,
                                                         int64_t n, int nt) {
    const float *s = (const float *)sv;
    uint16_t *d = (uint16_t *)dv;
    int64_t i = 0;
    if (nt) {
        for (; i < n && ((uintptr_t)(d + i) & 31); i++) d[i] = kern_f32_to_f16(s[i]);
        for (; i + 16 <= n; i += 16)
            _mm256_stream_si256((__m256i *)(d + i),
                                _mm512_cvtps_ph(_mm512_loadu_ps(s + i),
                                                _MM_FROUND_TO_NEAREST_INT));
        _mm_sfence();
    }
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (unsigned)(n - i)) - 1u);
        _mm256_mask_storeu_epi16((void *)(d + i), m,
                                 _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, s + i),
                                                 _MM_FROUND_TO_NEAREST_INT));
    }
}

KERN_TARGET_AVX2 static inline __m256i kern__bf16x8_f32__avx2(__m128i h) {
    __m256i v = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    return _mm256_or_si256(v, _mm256_and_si256(nan, _mm256_set1_epi32(0x00400000)));
}
KERN_TARGET_AVX2 static inline __m128i kern__f32x8_bf16__avx2(__m256i u) {
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    __m256i rnd = _mm256_add_epi32(
        u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                            _mm256_and_si256(_mm256_srli_epi32(u, 16),
                                             _mm256_set1_epi32(1))));
    __m256i res = _mm256_blendv_epi8(
        rnd, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);
    /* 8 x u32 (< 65536) to u16: pack within lanes, then fix the order */
    __m256i p = _mm256_packus_epi32(_mm256_srli_epi32(res, 16), _mm256_setzero_si256());
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}
KERN_TARGET_AVX2 static void kern__cvt_bf16_f32__avx2(const void *sv, void *dv,
                                                      int64_t n, int nt) {
    const uint16_t *s = (const uint16_t *)sv;
    float *d = (float *)dv;
    int64_t i = 0;
    if (nt) {
        for (; i < n && ((uintptr_t)(d + i) & 31); i++) d[i] = kern_bf16_to_f32(s[i]);
        for (; i + 8 <= n; i += 8)
            _mm256_stream_si256((__m256i *)(d + i),
                                kern__bf16x8_f32__avx2(_mm_loadu_si128((const __m128i *)(s + i))));
        _mm_sfence();
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_si256((__m256i *)(d + i),
                            kern__bf16x8_f32__avx2(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = kern_bf16_to_f32(s[i]);
}
KERN_TARGET_AVX2 static void kern__cvt_f32_bf16__avx2(const void *sv, void *dv,
                                                      int64_t n, int nt) {
    const float *s = (const float *)sv;
    uint16_t *d = (uint16_t *)dv;
    int64_t i = 0;
    if (nt) {
        for (; i < n && ((uintptr_t)(d + i) & 15); i++) d[i] = kern_f32_to_bf16(s[i]);
        for (; i + 8 <= n; i += 8)
            _mm_stream_si128((__m128i *)(d + i),
                             kern__f32x8_bf16__avx2(_mm256_loadu_si256((const __m256i *)(s + i))));
        _mm_sfence();
    }
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         kern__f32x8_bf16__avx2(_mm256_loadu_si256((const __m256i *)(s + i))));
    for (; i < n; i++) d[i] = kern_f32_to_bf16(s[i]);
}
KERN_TARGET_AVX2 static void kern__cvt_f16_f32__avx2(const void *sv, void *dv,
                                                     int64_t n, int nt) {
    const uint16_t *s = (const uint16_t *)sv;
    float *d = (float *)dv;
    int64_t i = 0;
    if (nt) {
        for (; i < n && ((uintptr_t)(d + i) & 31); i++) d[i] = kern_f16_to_f32(s[i]);
        for (; i + 8 <= n; i += 8)
            _mm256_stream_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
        _mm_sfence();
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = kern_f16_to_f32(s[i]);
}
KERN_TARGET_AVX2 static void kern__cvt_f32_f16__avx2(const void *sv, void *dv,
                                                     int64_t n, int nt) {
    const float *s = (const float *)sv;
    uint16_t *d = (uint16_t *)dv;
    int64_t i = 0;
    if (nt) {
        for (; i < n && ((uintptr_t)(d + i) & 15); i++) d[i] = kern_f32_to_f16(s[i]);
        for (; i + 8 <= n; i += 8)
            _mm_stream_si128((__m128i *)(d + i),
                             _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
        _mm_sfence();
    }
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = kern_f32_to_f16(s[i]);
}
#endif /* KERN_X86 */

#ifdef KERN_NEON
static void kern__cvt_bf16_f32__neon(const void *sv, void *dv, int64_t n, int nt) {
    const uint16_t *s = (const uint16_t *)sv;
    float *d = (float *)dv;
    int64_t i = 0;
    const uint32x4_t absm = vdupq_n_u32(0x7fffffffu), inf = vdupq_n_u32(0x7f800000u);
    const uint32x4_t q = vdupq_n_u32(0x00400000u);
    (void)nt;
    for (; i + 4 <= n; i += 4) {
        uint32x4_t v = vshll_n_u16(vld1_u16(s + i), 16);
        uint32x4_t nan = vcgtq_u32(vandq_u32(v, absm), inf);
        v = vorrq_u32(v, vandq_u32(nan, q));
        vst1q_f32(d + i, vreinterpretq_f32_u32(v));
    }
    for (; i < n; i++) d[i] = kern_bf16_to_f32(s[i]);
}
static void kern__cvt_f32_bf16__neon(const void *sv, void *dv, int64_t n, int nt) {
    const float *s = (const float *)sv;
    uint16_t *d = (uint16_t *)dv;
    int64_t i = 0;
    const uint32x4_t absm = vdupq_n_u32(0x7fffffffu), inf = vdupq_n_u32(0x7f800000u);
    const uint32x4_t r = vdupq_n_u32(0x7fffu), one = vdupq_n_u32(1), q = vdupq_n_u32(0x00400000u);
    (void)nt;
    for (; i + 4 <= n; i += 4) {
        uint32x4_t u = vld1q_u32((const uint32_t *)(s + i));
        uint32x4_t nan = vcgtq_u32(vandq_u32(u, absm), inf);
        uint32x4_t rnd = vaddq_u32(u, vaddq_u32(r, vandq_u32(vshrq_n_u32(u, 16), one)));
        uint32x4_t res = vbslq_u32(nan, vorrq_u32(u, q), rnd);
        vst1_u16(d + i, vshrn_n_u32(res, 16));
    }
    for (; i < n; i++) d[i] = kern_f32_to_bf16(s[i]);
}
/* FCVT rounds to nearest even (FPCR default), keeps subnormals (FZ16 clear)
 * and quiets NaNs keeping the top payload bits, like the scalar code. */
static void kern__cvt_f16_f32__neon(const void *sv, void *dv, int64_t n, int nt) {
    const uint16_t *s = (const uint16_t *)sv;
    float *d = (float *)dv;
    int64_t i = 0;
    (void)nt;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(d + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(s + i))));
    for (; i < n; i++) d[i] = kern_f16_to_f32(s[i]);
}
static void kern__cvt_f32_f16__neon(const void *sv, void *dv, int64_t n, int nt) {
    const float *s = (const float *)sv;
    uint16_t *d = (uint16_t *)dv;
    int64_t i = 0;
    (void)nt;
    for (; i + 4 <= n; i += 4)
        vst1_u16(d + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(s + i))));
    for (; i < n; i++) d[i] = kern_f32_to_f16(s[i]);
}
#endif

/* The conversion function for (src, dst) under the feature mask `f`. */
static kern__cvt_fn kern__cvt_pick(kern_dtype s, kern_dtype d, uint32_t f) {
    int k = s == KERN_BF16 ? 0 : s == KERN_F16 ? 1 : d == KERN_BF16 ? 2 : 3;
    (void)f;
#ifdef KERN_X86
    if (k == 2 && (f & KERN_CPU_AVX512BF16) && (f & KERN_CPU_AVX512DQ))
        return kern__cvt_f32_bf16__avx512bf16;
    if (f & KERN_CPU_AVX512F) {
        static const kern__cvt_fn t[4] = {
            kern__cvt_bf16_f32__avx512, kern__cvt_f16_f32__avx512,
            kern__cvt_f32_bf16__avx512, kern__cvt_f32_f16__avx512};
        return t[k];
    }
    if ((f & KERN_CPU_AVX2) && (f & KERN_CPU_F16C)) {
        static const kern__cvt_fn t[4] = {
            kern__cvt_bf16_f32__avx2, kern__cvt_f16_f32__avx2,
            kern__cvt_f32_bf16__avx2, kern__cvt_f32_f16__avx2};
        return t[k];
    }
#endif
#ifdef KERN_NEON
    if (f & KERN_CPU_NEON) {
        static const kern__cvt_fn t[4] = {
            kern__cvt_bf16_f32__neon, kern__cvt_f16_f32__neon,
            kern__cvt_f32_bf16__neon, kern__cvt_f32_f16__neon};
        return t[k];
    }
#endif
    {
        static const kern__cvt_fn t[4] = {
            kern__cvt_bf16_f32__ref, kern__cvt_f16_f32__ref,
            kern__cvt_f32_bf16__ref, kern__cvt_f32_f16__ref};
        return t[k];
    }
}

typedef struct kern__cvt_job {
    kern__cvt_fn fn;
    const char *src;
    char *dst;
    int64_t ssz, dsz, n, per;
    int nt;
} kern__cvt_job;

static void kern__cvt_task(void *p, int64_t task, int thread) {
    const kern__cvt_job *j = (const kern__cvt_job *)p;
    int64_t a = task * j->per;
    int64_t len = j->n - a < j->per ? j->n - a : j->per;
    (void)thread;
    j->fn(j->src + a * j->ssz, j->dst + a * j->dsz, len, j->nt);
}

KERN_API kern_status kern_convert(kern_ctx *ctx, kern_dtype s, const void *src,
                                  kern_dtype d, void *dst, int64_t n) {
    kern__cvt_job job;
    int64_t n_tasks = 1;
    int threads;
    int ok = (s == KERN_F32 && (d == KERN_BF16 || d == KERN_F16)) ||
             (d == KERN_F32 && (s == KERN_BF16 || s == KERN_F16));
    if (!ok)
        return kern__err(KERN_ERR_DTYPE,
                         "kern_convert: %s -> %s is not supported (f32 <-> "
                         "f16/bf16 only)",
                         kern_dtype_name(s), kern_dtype_name(d));
    if (n < 0)
        return kern__err(KERN_ERR_ARG, "kern_convert: n=%lld is negative", (long long)n);
    if (n > INT64_MAX / 4)
        return kern__err(KERN_ERR_ARG,
                         "kern_convert: n=%lld elements overflow int64 bytes",
                         (long long)n);
    if (n == 0) return KERN_OK;
    if (!src || !dst)
        return kern__err(KERN_ERR_ARG, "kern_convert: %s is NULL", src ? "dst" : "src");
    job.ssz = (int64_t)kern_dtype_size(s);
    job.dsz = (int64_t)kern_dtype_size(d);
    {
        uintptr_t a0 = (uintptr_t)src, a1 = a0 + (uintptr_t)(n * job.ssz);
        uintptr_t b0 = (uintptr_t)dst, b1 = b0 + (uintptr_t)(n * job.dsz);
        if (a0 < b1 && b0 < a1)
            return kern__err(KERN_ERR_ARG, "kern_convert: src and dst overlap");
    }
    if (!ctx) {
        ctx = kern_default_ctx();
        if (!ctx) return KERN_ERR_NOMEM;
    }
    job.fn = kern__cvt_pick(s, d, kern_ctx_features(ctx));
    job.src = (const char *)src;
    job.dst = (char *)dst;
    job.n = n;
    job.nt = n * job.dsz >= KERN_CONVERT_NT_BYTES;
    threads = kern_ctx_threads(ctx);
    if (job.nt) {
        /* DRAM-sized: 1 MiB-ish pieces handed out dynamically */
        job.per = (int64_t)1 << 18;
        n_tasks = (n + job.per - 1) / job.per;
    } else if (threads > 1 && n >= 2 * (int64_t)KERN_CONVERT_MIN_PER_THREAD) {
        /* cache-sized: one contiguous piece per thread */
        n_tasks = n / KERN_CONVERT_MIN_PER_THREAD;
        if (n_tasks > threads) n_tasks = threads;
        job.per = ((n + n_tasks - 1) / n_tasks + 63) & ~(int64_t)63;
        n_tasks = (n + job.per - 1) / job.per;
    }
    if (n_tasks <= 1) {
        job.fn(src, dst, n, job.nt);
        return KERN_OK;
    }
    return kern_parallel_for(ctx, n_tasks, kern__cvt_task, &job);
}

#ifdef __cplusplus
}
#endif
#endif /* KERN_IMPLEMENTATION */
