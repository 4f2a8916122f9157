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

/* g++ 12 (C++ only, at -O1 and above) reports "'__Y' is used uninitialized"
 * and "may be used uninitialized" inside its own AVX-512 intrinsics (the
 * `__Y = __Y` idiom of _mm512_undefined_*), wherever kern's AVX-512
 * functions inline them. Each header's implementation section is bracketed
 * by KERN__IMPL_DIAG_BEGIN/END (push/pop): the user's code around the
 * #include keeps every warning, and the same code compiled as C (where the
 * false positive does not arise) still reports a real uninitialized use. */
#if defined(__cplusplus) && defined(__GNUC__) && !defined(__clang__)
#define KERN__IMPL_DIAG_BEGIN                                                  \
    _Pragma("GCC diagnostic push")                                             \
    _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")                      \
    _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define KERN__IMPL_DIAG_END _Pragma("GCC diagnostic pop")
#else
#define KERN__IMPL_DIAG_BEGIN
#define KERN__IMPL_DIAG_END
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
/* act(x) for one float, with the bits every kern kernel and fused epilogue
 * gives (the shared math layer; the vector paths agree with it): for code
 * outside kern that must match them, e.g. gen/kern_gen.py's element-wise
 * loops. KERN_ACT_NONE and values outside kern_act: x. */
KERN_API float kern_act_f32(kern_act act, float x);

/* ------------------------------------------------------------------ tensors */

/* A view of memory kern does not own. `data` is `void *` so one struct
 * serves inputs and outputs; kern never writes through a view it takes as
 * an input (every `const kern_tensor *` argument or params field documented
 * as an input), so wrapping read-only memory (a `const float *` weight, a
 * mapped file) is safe: the constructors below take `const void *`. */
typedef struct kern_tensor {
    void *data;
    kern_dtype dtype;
    int ndim;
    int64_t shape[KERN_MAX_DIMS];
    int64_t stride[KERN_MAX_DIMS]; /* in elements; 0 = broadcast */
} kern_tensor;

/* Drops const from a data pointer (the view's field is void *; see above)
 * without a cast-qual warning in C or C++. */
#ifdef __cplusplus
#define KERN__UNCONST(p) const_cast<void *>(static_cast<const void *>(p))
#else
#define KERN__UNCONST(p) ((void *)(uintptr_t)(const void *)(p))
#endif

/* The constructors store the data pointer without reading through it: tell
 * GCC (>= 11), so wrapping a not yet written output buffer does not warn
 * "may be used uninitialized" through the const parameter. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define KERN__NO_ACCESS(i) __attribute__((access(none, i)))
#else
#define KERN__NO_ACCESS(i)
#endif

/* Contiguous row-major view. Validates ndim, sizes and byte-size overflow;
 * on error *t is left untouched. */
KERN_API kern_status kern_tensor_init(kern_tensor *t, const void *data,
                                      kern_dtype dt, int ndim,
                                      const int64_t *shape) KERN__NO_ACCESS(2);
/* Strided view; stride may be NULL for contiguous. */
KERN_API kern_status kern_tensor_init_strided(kern_tensor *t, const void *data,
                                              kern_dtype dt, int ndim,
                                              const int64_t *shape,
                                              const int64_t *stride)
    KERN__NO_ACCESS(2);
/* Unchecked convenience constructors for the common ranks (contiguous). */
KERN__NO_ACCESS(1) static inline kern_tensor kern_tensor_1d(const void *d, kern_dtype dt,
                                         int64_t n0) {
    kern_tensor t;
    memset(&t, 0, sizeof t);
    t.data = KERN__UNCONST(d); t.dtype = dt; t.ndim = 1;
    t.shape[0] = n0; t.stride[0] = 1;
    return t;
}
KERN__NO_ACCESS(1) static inline kern_tensor kern_tensor_2d(const void *d, kern_dtype dt,
                                         int64_t n0, int64_t n1) {
    kern_tensor t;
    memset(&t, 0, sizeof t);
    t.data = KERN__UNCONST(d); t.dtype = dt; t.ndim = 2;
    t.shape[0] = n0; t.shape[1] = n1;
    t.stride[0] = n1; t.stride[1] = 1;
    return t;
}
KERN__NO_ACCESS(1) static inline kern_tensor kern_tensor_3d(const void *d, kern_dtype dt,
                                         int64_t n0, int64_t n1, int64_t n2) {
    kern_tensor t;
    memset(&t, 0, sizeof t);
    t.data = KERN__UNCONST(d); t.dtype = dt; t.ndim = 3;
    t.shape[0] = n0; t.shape[1] = n1; t.shape[2] = n2;
    t.stride[2] = 1; t.stride[1] = n2; t.stride[0] = n1 * n2;
    return t;
}
KERN__NO_ACCESS(1) static inline kern_tensor kern_tensor_4d(const void *d, kern_dtype dt,
                                         int64_t n0, int64_t n1, int64_t n2,
                                         int64_t n3) {
    kern_tensor t;
    memset(&t, 0, sizeof t);
    t.data = KERN__UNCONST(d); t.dtype = dt; t.ndim = 4;
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

/* ---------------------------------------------------------------- epilogue */

/* The one fused epilogue of the linear ops (kern_gemm, kern_qlinear,
 * kern_sparse24_linear), embedded in their params as `epilogue`:
 *
 *     out = out_scale * ( act(acc + bias) + residual )
 *
 * where acc is the op's linear result (gemm: alpha op(A) op(B) + beta C;
 * qlinear: the dequantized int8 product; sparse24: x W^T, times the
 * per-channel scale of an i8 weight). Zero-initialised = no epilogue.
 * A family that does not implement an option yet rejects it with
 * KERN_ERR_UNSUPPORTED naming it (see each header and docs/api.md). */
typedef struct kern_epilogue {
    const kern_tensor *bias;     /* NULL, or 1-D [N] ([M] with bias_per_row) */
    int bias_per_row;            /* nonzero: one bias value per output row */
    kern_act act;                /* KERN_ACT_NONE (0) = identity */
    const kern_tensor *residual; /* NULL, or broadcastable to the output;
                                    may be exactly the output view where the
                                    family says so */
    float out_scale;             /* 0 = 1 (a zero scale would only give
                                    zeros, so 0 is free to mean "default") */
    int glu;                     /* nonzero: a gated linear unit (below) */
} kern_epilogue;

/* The gated epilogue (epilogue.glu, in kern_gemm and kern_linear_gemv):
 * the op's N linear columns hold gate and up projections interleaved in
 * groups of KERN_GLU_GROUP (8 gate columns, then the 8 matching up
 * columns; a last group of 2w < 16 columns: w gates, then w ups), the
 * order kern_glu_pack writes a weight, bias or scale in. The output has
 * N/2 columns:
 *
 *     out[:, f] = out_scale * ( act(gate_f + bias) * (up_f + bias) + residual )
 *
 * with bias [N] in the interleaved order and residual over the [M, N/2]
 * output. act applies to the gate only: silu gives SwiGLU (Llama's MLP),
 * gelu GeGLU, relu ReGLU, none the bilinear unit. One GEMM over the
 * interleaved weight thus replaces the gate and up GEMMs and the silu_mul
 * pass over their [M, 2F] result. */
#define KERN_GLU_GROUP 8

/* Interleaves gate and up along dimension `dim` (negative: from the end)
 * into out in the glu order above: gate and up have the same dtype and
 * shape, out that shape with dimension dim doubled. dim 0 of an
 * F.linear weight [F, K] (or its bias or per-channel scale [F]) gives the
 * [2F, K] weight kern_gemm (trans_b) and kern_linear_gemv take; dim -1 of
 * a [K, F] weight the [K, 2F] one. Any strides; out may not overlap the
 * inputs. Plain copies (no context, no threads): a load-time step. */
KERN_API kern_status kern_glu_pack(const kern_tensor *gate, const kern_tensor *up,
                                   const kern_tensor *out, int dim);
/* Which source row (or column) position j of a glu-packed dimension of
 * 2F holds: *up = 0 for gate f, 1 for up f; returns f. */
static inline int64_t kern_glu_source(int64_t j, int64_t F, int *up) {
    int64_t q = j / (2 * KERN_GLU_GROUP), o = j % (2 * KERN_GLU_GROUP);
    int64_t w = F - q * KERN_GLU_GROUP < KERN_GLU_GROUP ? F - q * KERN_GLU_GROUP : KERN_GLU_GROUP;
    *up = o >= w;
    return q * KERN_GLU_GROUP + (o >= w ? o - w : o);
}

/* Resolves the defaults in place: out_scale 0 becomes 1. NULL is ignored. */
KERN_API void kern_epilogue_defaults(kern_epilogue *e);

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

/* Microarchitecture classes: which tuning table (blocking, tile shapes,
 * thresholds) a family uses at a given ISA level. A class changes speed;
 * it may change the rounding of a result as another machine would (e.g.
 * other k blocks in a GEMM), always within the op's documented tolerance,
 * and never what `deterministic` promises within one context.
 *   GENERIC      the ISA level's generic table (any CPU; AVX-512 levels
 *                take the Zen 4 numbers, tuned on one zmm FMA a cycle)
 *   ZEN4         AMD family 19h with AVX-512: zmm FMAs double-pumped over
 *                256-bit pipes (one a cycle), 1 MiB L2
 *   XEON_AVX512  Intel AVX-512 with two zmm FMA ports (measured), 2 MiB L2
 *   ZEN5         AMD family 1Ah with two zmm FMA ports (measured; the
 *                full 512-bit datapath), 1 MiB L2, fast vdpbf16ps
 * A class applies only at the ISA levels it was tuned for (the AVX-512
 * levels); at any other level a context reports and uses GENERIC. */
typedef enum kern_uarch {
    KERN_UARCH_AUTO = 0, /* kern_cpu_info()->uarch */
    KERN_UARCH_GENERIC,
    KERN_UARCH_ZEN4,
    KERN_UARCH_XEON_AVX512,
    KERN_UARCH_ZEN5,
    KERN_UARCH_COUNT
} kern_uarch;
/* "auto", "generic", "zen4", "xeon_avx512", "zen5"; "invalid" otherwise. */
KERN_API const char *kern_uarch_name(kern_uarch u);
/* The class named s (as kern_uarch_name writes it); KERN_UARCH_COUNT if
 * none. */
KERN_API kern_uarch kern_uarch_from_name(const char *s);

/* What kern knows of the CPU it runs on (computed once, thread safe). */
typedef struct kern_cpu_info_t {
    char vendor[16];  /* CPUID vendor ("GenuineIntel", "AuthenticAMD"); "" off x86 */
    char brand[64];   /* CPUID brand string, spaces trimmed; "" if none */
    int family, model, stepping; /* x86 display family/model; 0 elsewhere */
    /* Time of a block of independent zmm FMAs over the same block of ymm
     * FMAs: about 1 on a core with two 512-bit FMA ports, about 2 where a
     * zmm FMA takes both 256-bit pipes or the only 512-bit port. 0 when
     * not measured (no AVX-512, or a vendor whose class CPUID decides). */
    double zmm_ymm_ratio;
    kern_uarch uarch; /* the detected class (never AUTO) */
} kern_cpu_info_t;
KERN_API const kern_cpu_info_t *kern_cpu_info(void);

/* ISA levels: what a context may use. Each level grants an exact feature
 * set (cumulative within its chain); a level is available iff the CPU has
 * every feature it grants. A context capped at a level uses exactly that
 * level's features, so every path a machine can run is selectable (e.g.
 * capping at KERN_ISA_AVX512 on an AVX512-BF16 machine runs the non-BF16
 * bf16 paths; KERN_ISA_AVX2 on an AVX-VNNI machine the plain AVX2 int8
 * path). The order below is the order of kern_isa_list.
 *   SCALAR        portable C, no features
 *   AVX2          avx2 fma f16c
 *   AVX2_VNNI     AVX2 + avxvnni
 *   AVX512        AVX2 + avx512f avx512bw avx512vl avx512dq
 *   AVX512_VNNI   AVX512 + avx512vnni
 *   AVX512_BF16   AVX512_VNNI + avx512bf16
 *   AMX           AVX512_BF16 + amx-tile amx-bf16 amx-int8, with the tile
 *                 state granted by the OS (Linux: arch_prctl
 *                 ARCH_REQ_XCOMP_PERM, requested once when the features are
 *                 probed) and a compiler that has the AMX intrinsics (GCC 11,
 *                 clang 12). bf16 GEMMs run on tiles (tdpbf16ps; M <= 2
 *                 against a prepacked B excepted); every other kernel is
 *                 the AVX512_BF16 one.
 *   NEON          neon (AArch64 Advanced SIMD)
 *   NEON_DOT      NEON + dotprod
 *   NEON_BF16     NEON_DOT + bf16 (+ fp16 when the CPU has it) */
typedef enum kern_isa {
    KERN_ISA_AUTO = 0, /* the best this CPU has */
    KERN_ISA_SCALAR,
    KERN_ISA_AVX2,
    KERN_ISA_AVX2_VNNI,
    KERN_ISA_AVX512,
    KERN_ISA_AVX512_VNNI,
    KERN_ISA_AVX512_BF16,
    KERN_ISA_AMX,
    KERN_ISA_NEON,
    KERN_ISA_NEON_DOT,
    KERN_ISA_NEON_BF16,
    KERN_ISA_COUNT
} kern_isa;
/* "scalar", "avx2", "avx2_vnni", "avx512", "avx512_vnni", "avx512_bf16",
 * "amx", "neon", "neon_dot", "neon_bf16" ("auto"; "invalid" otherwise). */
KERN_API const char *kern_isa_name(kern_isa isa);
/* The KERN_CPU_* features the level needs (independent of this CPU; 0 for
 * SCALAR; for AUTO the best level's). */
KERN_API uint32_t kern_isa_required(kern_isa isa);
/* Feature mask the level grants on this CPU: exactly kern_isa_required(isa)
 * when the CPU has all of it, else 0 (KERN_ISA_SCALAR grants 0 and is
 * always available). */
KERN_API uint32_t kern_isa_features(kern_isa isa);
KERN_API int kern_isa_available(kern_isa isa);
/* The best (last in kern_isa_list order) level this CPU supports. */
KERN_API kern_isa kern_isa_best(void);
/* Every level of this CPU family (x86 or AArch64; SCALAR only elsewhere or
 * under KERN_NO_SIMD), SCALAR first, into out[0..]; returns how many.
 * `cap` bounds the array (KERN_ISA_COUNT is always enough). With
 * available_only, the levels the CPU lacks are left out. For a level the
 * CPU lacks, kern_isa_missing names the missing features. */
KERN_API int kern_isa_list(kern_isa *out, int cap, int available_only);
/* Writes the features the level needs but this CPU lacks ("avx512bf16",
 * "" if none) into buf (always NUL-terminated); returns buf. */
KERN_API char *kern_isa_missing(kern_isa isa, char *buf, size_t size);

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
    kern_uarch uarch; /* tuning class; KERN_UARCH_AUTO = detected. Forcing
                         a class is for tuning and tests: any class runs
                         on any CPU (same results, other speed) */
    int flush_denormals; /* nonzero: ops on this context (and the tasks of
                            its pool) run with subnormal floats flushed to
                            zero, inputs and results (x86 MXCSR FTZ + DAZ,
                            AArch64 FPCR.FZ); the calling thread's mode is
                            restored when the op returns. Subnormal
                            operands cost a microcode assist per
                            instruction on many x86 cores (torch's
                            set_flush_denormal, ORT's denormal-as-zero) */
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
/* The tuning class in effect: the params' class (AUTO resolved), or
 * GENERIC where the context's ISA level has no table for that class. */
KERN_API kern_uarch kern_ctx_uarch(const kern_ctx *ctx);
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

/* The tuning class a context at level isa runs (u resolved, then generic
 * below the AVX-512 levels: the per-class tables exist there only). */
KERN_API kern_uarch kern__uarch_effective(kern_uarch u, kern_isa isa);

/* Memory through the context's allocator (64-byte aligned). */
KERN_API void *kern__alloc(kern_ctx *ctx, size_t size);
KERN_API void kern__free(kern_ctx *ctx, void *ptr);

/* Shared workspace of at least `size` bytes, 64-byte aligned, reused across
 * ops (grown when too small, never shrunk). Valid until the next call of
 * kern__workspace on this context; NULL on allocation failure. Call only
 * between kern__op_begin/end, outside tasks. */
KERN_API void *kern__workspace(kern_ctx *ctx, size_t size);
/* Caller workspaces (the `workspace`, `workspace_size` fields of an op's
 * params). An op that declares its scratch as `shared` bytes (what it asks
 * of kern__workspace, at most) and `per_thread` bytes (what it asks of
 * kern__reserve_thread_scratch, at most) needs
 * kern__op_workspace_bytes(ctx, shared, per_thread) bytes of caller memory:
 * 64 bytes of alignment slack, the shared block and one block per context
 * thread, each rounded up to 64 (0 when both are 0; SIZE_MAX on overflow).
 * kern__op_workspace (between kern__op_begin/end) checks `size` against
 * that (KERN_ERR_ARG naming `op` when too small) and, when mem is not
 * NULL, serves the op's kern__workspace / kern__reserve_thread_scratch /
 * kern__thread_scratch calls from mem until kern__op_end (a request above
 * the declared sizes then fails as an allocation failure would). mem NULL:
 * the context's own scratch, nothing changes. */
KERN_API size_t kern__op_workspace_bytes(const kern_ctx *ctx, size_t shared,
                                         size_t per_thread);
KERN_API kern_status kern__op_workspace(kern_ctx *ctx, const char *op, void *mem,
                                        size_t size, size_t shared,
                                        size_t per_thread);
/* The family-independent checks of a kern_epilogue (NULL = none): act must
 * be a kern_act value (else KERN_ERR_ARG); an act outside `acts` (a mask
 * of 1u << KERN_ACT_*), bias_per_row without `per_row_ok` or an out_scale
 * other than 0 and 1 without `out_scale_ok` give KERN_ERR_UNSUPPORTED.
 * Messages name `op` and params.epilogue.<field>. */
KERN_API kern_status kern__epilogue_check(const kern_epilogue *e, const char *op,
                                          unsigned acts, int per_row_ok,
                                          int out_scale_ok);
/* In kern__epilogue_check's `acts`: the op implements epilogue.glu (else
 * a nonzero glu is KERN_ERR_UNSUPPORTED). */
#define KERN__EPI_GLU_OK (1u << 31)
/* kern_gemm's epilogue after alpha, in place on columns [j0, j0 + n) of
 * rows [0, m) of an f32 output (row stride ldy), on the context's ISA
 * (gen/kern_gen.py's GEMM instances; defined with the math layer). */
KERN_API void kern__epilogue_apply_f32(kern_ctx *ctx, float *y, int64_t ldy, int64_t m, int64_t j0,
                                       int64_t n, float alpha, const kern_epilogue *epi);
/* The same from an f32 accumulator tile t (row stride ldt; t[0] is output
 * element (i0, j0)) into rows [i0, i0 + m), columns [j0, j0 + n) of an
 * output y of dtype ydt (f32, bf16 or f16; row stride ldy, unit columns),
 * rounded once as kern_gemm stores it (the bf16 GEMM instances). */
KERN_API void kern__epilogue_apply_tile(kern_ctx *ctx, const float *t, int64_t ldt, void *y,
                                        kern_dtype ydt, int64_t ldy, int64_t i0, int64_t m,
                                        int64_t j0, int64_t n, float alpha,
                                        const kern_epilogue *epi);
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
/* AMX tiles: GCC 11 and clang 12 have the intrinsics (KERN_NO_AMX opts
 * out; the level is then never available). */
#if !defined(KERN_NO_AMX) && defined(__x86_64__) &&                           \
    ((defined(__clang__) && __clang_major__ >= 12) ||                         \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define KERN__HAVE_AMX 1
#define KERN_TARGET_AMX                                                       \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,"     \
                          "avx2,fma,f16c,amx-tile,amx-bf16,amx-int8")))
#endif
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
KERN__IMPL_DIAG_BEGIN
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
#ifdef __linux__
#include <sys/mman.h>
#endif
#ifdef KERN_X86
#include <cpuid.h>
#include <immintrin.h>
#endif
#ifdef KERN_NEON
#include <arm_neon.h>
#include <sys/auxv.h>
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

KERN_API void kern_epilogue_defaults(kern_epilogue *e) {
    if (e && e->out_scale == 0.0f) e->out_scale = 1.0f;
}

KERN_API kern_status kern__epilogue_check(const kern_epilogue *e, const char *op,
                                          unsigned acts, int per_row_ok,
                                          int out_scale_ok) {
    int a;
    char list[64];
    size_t n = 0;
    if (!e) return KERN_OK;
    a = (int)e->act;
    if (a < 0 || a >= (int)KERN_ACT_COUNT)
        return kern__err(KERN_ERR_ARG, "%s: params.epilogue.act=%d is not a kern_act", op, a);
    if (!(acts & (1u << a))) {
        int i;
        list[0] = 0;
        for (i = 0; i < (int)KERN_ACT_COUNT; i++)
            if ((acts & (1u << i)) && n < sizeof list) {
                int w = snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "",
                                 kern_act_name((kern_act)i));
                if (w > 0) n += (size_t)w;
            }
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: params.epilogue.act=%s is not supported by this op (it "
                         "supports %s)", op, kern_act_name(e->act), list);
    }
    if (e->glu && !(acts & KERN__EPI_GLU_OK))
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: params.epilogue.glu is not supported by this op (kern_gemm and "
                         "kern_linear_gemv implement it)", op);
    if (e->bias_per_row && !per_row_ok)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: params.epilogue.bias_per_row is not supported by this op "
                         "(only a per-column bias [N])", op);
    if (!out_scale_ok && e->out_scale != 0.0f && e->out_scale != 1.0f)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: params.epilogue.out_scale=%g is not supported by this op "
                         "(only 0 or 1)", op, (double)e->out_scale);
    return KERN_OK;
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

KERN_API kern_status kern_glu_pack(const kern_tensor *gate, const kern_tensor *up,
                                   const kern_tensor *out, int dim) {
    static const char *op = "kern_glu_pack";
    char s1[96], s2[96], s3[96];
    int64_t idx[KERN_MAX_DIMS], es, run, F, total, t;
    int nd, d, nloop;
    kern_status st;
    if (!gate || !up || !out)
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !gate ? "gate" : !up ? "up" : "out");
    if ((st = kern_tensor_check(gate, op, "gate")) != KERN_OK) return st;
    if ((st = kern_tensor_check(up, op, "up")) != KERN_OK) return st;
    if ((st = kern_tensor_check(out, op, "out")) != KERN_OK) return st;
    if (up->dtype != gate->dtype || out->dtype != gate->dtype)
        return kern__err(KERN_ERR_DTYPE, "%s: gate.dtype=%s, up.dtype=%s, out.dtype=%s (must be "
                         "the same)", op, kern_dtype_name(gate->dtype), kern_dtype_name(up->dtype),
                         kern_dtype_name(out->dtype));
    nd = gate->ndim;
    if (dim < -nd || dim >= nd)
        return kern__err(KERN_ERR_ARG, "%s: dim=%d is outside [-%d, %d) for gate.shape=%s", op,
                         dim, nd, nd, kern_shape_str(gate, s1, sizeof s1));
    if (dim < 0) dim += nd;
    for (d = 0; d < nd && up->ndim == nd && out->ndim == nd; d++)
        if (up->shape[d] != gate->shape[d] ||
            out->shape[d] != (d == dim ? 2 * gate->shape[d] : gate->shape[d]))
            break;
    if (up->ndim != nd || out->ndim != nd || d < nd)
        return kern__err(KERN_ERR_SHAPE, "%s: gate.shape=%s and up.shape=%s must match and "
                         "out.shape=%s be theirs with dim %d doubled", op,
                         kern_shape_str(gate, s1, sizeof s1), kern_shape_str(up, s2, sizeof s2),
                         kern_shape_str(out, s3, sizeof s3), dim);
    if (kern__tensor_self_overlap(out))
        return kern__err(KERN_ERR_LAYOUT, "%s: out has overlapping elements", op);
    if (kern_tensors_overlap(out, gate) || kern_tensors_overlap(out, up))
        return kern__err(KERN_ERR_ARG, "%s: out overlaps %s", op,
                         kern_tensors_overlap(out, gate) ? "gate" : "up");
    total = kern_tensor_numel(out);
    if (total == 0) return KERN_OK;
    es = (int64_t)kern_dtype_size(out->dtype);
    F = gate->shape[dim];
    /* runs along the last dim when it is not `dim` and unit-stride in all
     * three (a weight's rows), else single elements */
    run = 1;
    nloop = nd;
    if (dim != nd - 1 && gate->stride[nd - 1] == 1 && up->stride[nd - 1] == 1 &&
        out->stride[nd - 1] == 1) {
        run = out->shape[nd - 1];
        nloop = nd - 1;
    }
    memset(idx, 0, sizeof idx);
    for (t = 0; t < total; t += run) {
        int isup;
        int64_t f = kern_glu_source(idx[dim], F, &isup), so = 0, oo = 0;
        const kern_tensor *src = isup ? up : gate;
        for (d = 0; d < nloop; d++) {
            so += (d == dim ? f : idx[d]) * src->stride[d];
            oo += idx[d] * out->stride[d];
        }
        memcpy((char *)out->data + oo * es, (const char *)src->data + so * es, (size_t)(run * es));
        for (d = nloop - 1; d >= 0; d--) {
            if (++idx[d] < out->shape[d]) break;
            idx[d] = 0;
        }
    }
    return KERN_OK;
}

KERN__NO_ACCESS(2)
static kern_status kern__tensor_init(kern_tensor *t, const void *data,
                                    kern_dtype dt, int ndim, const int64_t *shape,
                                    const int64_t *stride, const char *op) {
    kern_tensor tmp;
    int i;
    kern_status st;
    if (!t) return kern__err(KERN_ERR_ARG, "%s: t is NULL", op);
    if (ndim < 0 || ndim > KERN_MAX_DIMS)
        return kern__err(KERN_ERR_ARG, "%s: ndim=%d is outside 0..%d", op,
                         ndim, KERN_MAX_DIMS);
    if (ndim > 0 && !shape)
        return kern__err(KERN_ERR_ARG, "%s: shape is NULL with ndim=%d", op,
                         ndim);
    memset(&tmp, 0, sizeof tmp);
    tmp.data = KERN__UNCONST(data);
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
                                 "%s: shape[%d]=%lld is negative", op, i,
                                 (long long)tmp.shape[i]);
            tmp.stride[i] = ovf ? 0 : s;
            if (i > 0 && !ovf && tmp.shape[i] > 0 && kern_mul_overflow_i64(s, tmp.shape[i], &s)) {
                if (!empty)
                    return kern__err(KERN_ERR_SHAPE,
                                     "%s: shape[%d]=%lld makes the "
                                     "element count overflow int64",
                                     op, i, (long long)tmp.shape[i]);
                ovf = 1;
            }
        }
    }
    st = kern_tensor_check(&tmp, op, "tensor");
    if (st != KERN_OK) return st;
    *t = tmp;
    return KERN_OK;
}

KERN_API kern_status kern_tensor_init_strided(kern_tensor *t, const void *data,
                                              kern_dtype dt, int ndim,
                                              const int64_t *shape,
                                              const int64_t *stride) {
    return kern__tensor_init(t, data, dt, ndim, shape, stride,
                             "kern_tensor_init_strided");
}

KERN_API kern_status kern_tensor_init(kern_tensor *t, const void *data,
                                      kern_dtype dt, int ndim,
                                      const int64_t *shape) {
    return kern__tensor_init(t, data, dt, ndim, shape, NULL, "kern_tensor_init");
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

#ifdef KERN_X86
/* Linux (5.16 and up) hands out the 8 KiB tile data state only on request:
 * without ARCH_REQ_XCOMP_PERM the first tile instruction faults. The
 * permission is the process's, for every thread. Elsewhere: not granted
 * (no AMX level). */
static int kern__amx_permit(void) {
#if defined(__linux__) && defined(__x86_64__)
    long r; /* syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) */
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(158L), "D"(0x1023L), "S"(18L)
                     : "rcx", "r11", "memory");
    return r == 0;
#else
    return 0;
#endif
}
#endif

#ifdef KERN__HAVE_AMX
/* Loads this thread's tile configuration (palette 1): tiles 0-7 with 64
 * bytes a row and rows[t] rows (the AMX kernels of kern_gemm.h and
 * kern_qgemm.h). Not _tile_loadconfig: GCC 12's version tells the compiler
 * it reads 8 bytes, and the stores of the rows and colsb fields were
 * dropped (the first tile instruction then faulted). */
KERN_TARGET_AMX static inline void kern__amx_config(const uint8_t rows[8]) {
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } c;
    int t;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (t = 0; t < 8; t++) {
        c.colsb[t] = 64;
        c.rows[t] = rows[t];
    }
    __asm__ volatile("ldtilecfg %0" : : "m"(c));
}
#endif

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
                if ((xcr0 & 0x60000) == 0x60000 && ((d >> 24) & 1) &&
                    kern__amx_permit()) { /* AMX tile config+data */
                    f |= KERN_CPU_AMX_TILE;
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

/* ------------------------------------------------- microarchitecture class */

KERN_API const char *kern_uarch_name(kern_uarch u) {
    switch (u) {
    case KERN_UARCH_AUTO: return "auto";
    case KERN_UARCH_GENERIC: return "generic";
    case KERN_UARCH_ZEN4: return "zen4";
    case KERN_UARCH_XEON_AVX512: return "xeon_avx512";
    case KERN_UARCH_ZEN5: return "zen5";
    default: return "invalid";
    }
}

KERN_API kern_uarch kern_uarch_from_name(const char *s) {
    int u;
    if (!s) return KERN_UARCH_COUNT;
    for (u = 0; u < KERN_UARCH_COUNT; u++)
        if (strcmp(s, kern_uarch_name((kern_uarch)u)) == 0) return (kern_uarch)u;
    return KERN_UARCH_COUNT;
}

#ifdef KERN_X86
/* Seconds for `iters` steps of 12 independent zmm (or ymm) FMA chains:
 * enough chains to cover a 4-cycle latency on two ports, so the time is
 * the FMA throughput's. */
#define KERN__PROBE_R12(X, T, S) X(0, T, S) X(1, T, S) X(2, T, S) X(3, T, S) \
    X(4, T, S) X(5, T, S) X(6, T, S) X(7, T, S) X(8, T, S) X(9, T, S) X(10, T, S) X(11, T, S)
#define KERN__PROBE_DECL(i, VT, SET) VT c##i = SET((float)(i) * seed);
#define KERN__PROBE_STEP(i, FMA, u) c##i = FMA(c##i, m, a);
#define KERN__PROBE_FN(NAME, VT, SET, FMA, ADD, LOW)                          \
    KERN_TARGET_AVX512 static double NAME(long iters, float *sink) {          \
        volatile float seed = 0.999f;                                         \
        VT m = SET(seed), a = SET(seed * 1e-3f), r;                           \
        struct timespec t0, t1;                                               \
        long i;                                                               \
        KERN__PROBE_R12(KERN__PROBE_DECL, VT, SET)                            \
        clock_gettime(CLOCK_MONOTONIC, &t0);                                  \
        for (i = 0; i < iters; i++) {                                         \
            KERN__PROBE_R12(KERN__PROBE_STEP, FMA, 0)                         \
            __asm__ volatile("" ::: "memory");                                \
        }                                                                     \
        clock_gettime(CLOCK_MONOTONIC, &t1);                                  \
        r = ADD(ADD(ADD(c0, c1), ADD(c2, c3)), ADD(ADD(c4, c5), ADD(c6, c7)));  \
        r = ADD(r, ADD(ADD(c8, c9), ADD(c10, c11)));                          \
        *sink += LOW(r);                                                      \
        return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec); \
    }
#define KERN__PROBE_LOWZ(v) _mm_cvtss_f32(_mm512_castps512_ps128(v))
#define KERN__PROBE_LOWY(v) _mm_cvtss_f32(_mm256_castps256_ps128(v))
KERN__PROBE_FN(kern__probe_zmm, __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps,
               KERN__PROBE_LOWZ)
KERN__PROBE_FN(kern__probe_ymm, __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps,
               KERN__PROBE_LOWY)

/* zmm time / ymm time, best of 7 alternated rounds (a preempted round can
 * only come out slower); a first longer zmm round lets the core settle its
 * 512-bit frequency. */
static double kern__probe_zmm_ymm(void) {
    float sink = 0.0f;
    double bz = 1e30, by = 1e30;
    int r;
    (void)kern__probe_zmm(16384, &sink);
    for (r = 0; r < 7; r++) {
        double tz = kern__probe_zmm(4096, &sink), ty = kern__probe_ymm(4096, &sink);
        if (tz < bz) bz = tz;
        if (ty < by) by = ty;
    }
    if (sink == 12345.0f) bz += 1e-12; /* keeps the chains live */
    return by > 0.0 ? bz / by : 0.0;
}
#endif

static kern_cpu_info_t kern__cpu_info_cache;
static pthread_once_t kern__cpu_info_once = PTHREAD_ONCE_INIT;

static void kern__detect_cpu_info(void) {
    kern_cpu_info_t *ci = &kern__cpu_info_cache;
    memset(ci, 0, sizeof *ci);
    ci->uarch = KERN_UARCH_GENERIC;
#ifdef KERN_X86
    {
        unsigned a, b, c, d, max_leaf, max_ext, i;
        int is_intel, is_amd;
        if (__get_cpuid(0, &max_leaf, &b, &c, &d)) {
            memcpy(ci->vendor, &b, 4);
            memcpy(ci->vendor + 4, &d, 4);
            memcpy(ci->vendor + 8, &c, 4);
            ci->vendor[12] = 0;
            __cpuid_count(1, 0, a, b, c, d);
            ci->stepping = (int)(a & 0xf);
            ci->family = (int)((a >> 8) & 0xf);
            ci->model = (int)((a >> 4) & 0xf);
            if (ci->family == 0xf) ci->family += (int)((a >> 20) & 0xff);
            if (ci->family == 0x6 || ci->family >= 0xf) ci->model |= (int)(((a >> 16) & 0xf) << 4);
        }
        __cpuid(0x80000000u, max_ext, b, c, d);
        if (max_ext >= 0x80000004u) {
            unsigned w[12];
            char raw[49], *p = raw;
            size_t n;
            for (i = 0; i < 3; i++)
                __cpuid(0x80000002u + i, w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
            memcpy(raw, w, 48);
            raw[48] = 0;
            while (*p == ' ') p++;
            n = strlen(p);
            while (n > 0 && p[n - 1] == ' ') n--;
            if (n >= sizeof ci->brand) n = sizeof ci->brand - 1;
            memcpy(ci->brand, p, n);
            ci->brand[n] = 0;
        }
        is_intel = strcmp(ci->vendor, "GenuineIntel") == 0;
        is_amd = strcmp(ci->vendor, "AuthenticAMD") == 0;
        if ((kern_cpu_features() & KERN_CPU_AVX512F) && (is_intel || is_amd)) {
            ci->zmm_ymm_ratio = kern__probe_zmm_ymm();
            /* AMD family 19h (Zen 4) runs zmm on 256-bit pipes; an Intel
             * core with two 512-bit FMA ports runs zmm as fast as ymm, and
             * so does a Zen 5 core with the full 512-bit datapath (family
             * 1Ah: EPYC 9005, Ryzen 9000; the mobile parts double-pump
             * and measure about 2). Anything else (an Intel part with one
             * 512-bit port, a double-pumped Zen 5) has no table of its
             * own: GENERIC. */
            if (is_amd && ci->family == 0x19) ci->uarch = KERN_UARCH_ZEN4;
            else if (is_amd && ci->family == 0x1a && ci->zmm_ymm_ratio > 0.0 &&
                     ci->zmm_ymm_ratio < 1.5)
                ci->uarch = KERN_UARCH_ZEN5;
            else if (is_intel && ci->zmm_ymm_ratio > 0.0 && ci->zmm_ymm_ratio < 1.5)
                ci->uarch = KERN_UARCH_XEON_AVX512;
        }
    }
#endif
}

KERN_API const kern_cpu_info_t *kern_cpu_info(void) {
    pthread_once(&kern__cpu_info_once, kern__detect_cpu_info);
    return &kern__cpu_info_cache;
}

/* The class a context at level isa uses: the per-class tables exist for
 * the AVX-512 levels only. */
KERN_API kern_uarch kern__uarch_effective(kern_uarch u, kern_isa isa) {
    if (u == KERN_UARCH_AUTO) u = kern_cpu_info()->uarch;
    if (isa != KERN_ISA_AVX512 && isa != KERN_ISA_AVX512_VNNI && isa != KERN_ISA_AVX512_BF16 &&
        isa != KERN_ISA_AMX)
        return KERN_UARCH_GENERIC;
    return u;
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
    case KERN_ISA_AVX2_VNNI: return "avx2_vnni";
    case KERN_ISA_AVX512: return "avx512";
    case KERN_ISA_AVX512_VNNI: return "avx512_vnni";
    case KERN_ISA_AVX512_BF16: return "avx512_bf16";
    case KERN_ISA_AMX: return "amx";
    case KERN_ISA_NEON: return "neon";
    case KERN_ISA_NEON_DOT: return "neon_dot";
    case KERN_ISA_NEON_BF16: return "neon_bf16";
    default: return "invalid";
    }
}

#define KERN__AVX2_BASE (KERN_CPU_AVX2 | KERN_CPU_FMA | KERN_CPU_F16C)
#define KERN__AVX512_BASE                                                     \
    (KERN__AVX2_BASE | KERN_CPU_AVX512F | KERN_CPU_AVX512BW |                  \
     KERN_CPU_AVX512VL | KERN_CPU_AVX512DQ)

KERN_API uint32_t kern_isa_required(kern_isa isa) {
    switch (isa) {
    case KERN_ISA_SCALAR: return 0;
    case KERN_ISA_AVX2: return KERN__AVX2_BASE;
    case KERN_ISA_AVX2_VNNI: return KERN__AVX2_BASE | KERN_CPU_AVXVNNI;
    case KERN_ISA_AVX512: return KERN__AVX512_BASE;
    case KERN_ISA_AVX512_VNNI: return KERN__AVX512_BASE | KERN_CPU_AVX512VNNI;
    case KERN_ISA_AVX512_BF16:
        return KERN__AVX512_BASE | KERN_CPU_AVX512VNNI | KERN_CPU_AVX512BF16;
    case KERN_ISA_AMX:
        return KERN__AVX512_BASE | KERN_CPU_AVX512VNNI | KERN_CPU_AVX512BF16 |
               KERN_CPU_AMX_TILE | KERN_CPU_AMX_BF16 | KERN_CPU_AMX_INT8;
    case KERN_ISA_NEON: return KERN_CPU_NEON;
    case KERN_ISA_NEON_DOT: return KERN_CPU_NEON | KERN_CPU_NEON_DOT;
    case KERN_ISA_NEON_BF16: return KERN_CPU_NEON | KERN_CPU_NEON_DOT | KERN_CPU_NEON_BF16;
    case KERN_ISA_AUTO: return kern_isa_required(kern_isa_best());
    default: return 0;
    }
}

KERN_API uint32_t kern_isa_features(kern_isa isa) {
    uint32_t f = kern_cpu_features(), need;
    if (isa == KERN_ISA_AUTO) isa = kern_isa_best();
    if (isa <= KERN_ISA_SCALAR || isa >= KERN_ISA_COUNT) return 0;
    need = kern_isa_required(isa);
    if ((f & need) != need) return 0;
#ifndef KERN__HAVE_AMX
    if (isa == KERN_ISA_AMX) return 0; /* no tile intrinsics in this build */
#endif
    /* fp16 arithmetic comes with the bf16 level when the CPU has it */
    if (isa == KERN_ISA_NEON_BF16) need |= f & KERN_CPU_NEON_FP16;
    return need;
}

KERN_API int kern_isa_available(kern_isa isa) {
    if (isa == KERN_ISA_SCALAR || isa == KERN_ISA_AUTO) return 1;
    if (isa <= KERN_ISA_AUTO || isa >= KERN_ISA_COUNT) return 0;
    return kern_isa_features(isa) != 0;
}

/* The levels of the family this build targets, in order. */
static int kern__isa_family(kern_isa *out) {
    int n = 0, i;
    out[n++] = KERN_ISA_SCALAR;
#ifdef KERN_X86
    for (i = KERN_ISA_AVX2; i <= KERN_ISA_AMX; i++) out[n++] = (kern_isa)i;
#endif
#ifdef KERN_NEON
    for (i = KERN_ISA_NEON; i <= KERN_ISA_NEON_BF16; i++) out[n++] = (kern_isa)i;
#endif
    (void)i;
    return n;
}

KERN_API kern_isa kern_isa_best(void) {
    kern_isa all[KERN_ISA_COUNT];
    int n = kern__isa_family(all), i;
    for (i = n - 1; i > 0; i--)
        if (kern_isa_available(all[i])) return all[i];
    return KERN_ISA_SCALAR;
}

KERN_API int kern_isa_list(kern_isa *out, int cap, int available_only) {
    kern_isa all[KERN_ISA_COUNT];
    int n = kern__isa_family(all), i, k = 0;
    if (!out || cap <= 0) return 0;
    for (i = 0; i < n && k < cap; i++)
        if (!available_only || kern_isa_available(all[i])) out[k++] = all[i];
    return k;
}

KERN_API char *kern_isa_missing(kern_isa isa, char *buf, size_t size) {
    uint32_t need = (isa <= KERN_ISA_AUTO || isa >= KERN_ISA_COUNT) ? 0 : kern_isa_required(isa);
    if (!buf || size == 0) return buf;
    need &= ~kern_cpu_features();
    if (!need) {
        buf[0] = 0;
        return buf;
    }
    return kern_cpu_features_str(need, buf, size);
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
    unsigned fpmode; /* the thread's float mode before the frame, */
    int fpset;       /* when the frame changed it (flush_denormals) */
} kern__frame;

/* The thread's float control word, and the mode flush_denormals sets:
 * x86 MXCSR with FTZ (bit 15) and DAZ (bit 6), AArch64 FPCR with FZ (bit
 * 24). Elsewhere nothing changes. */
static inline unsigned kern__fp_get(void) {
#if defined(KERN_X86)
    return _mm_getcsr();
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    uint64_t v;
    __asm__ volatile("mrs %0, fpcr" : "=r"(v));
    return (unsigned)v;
#else
    return 0;
#endif
}
static inline void kern__fp_set(unsigned m) {
#if defined(KERN_X86)
    _mm_setcsr(m);
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    uint64_t v = m;
    __asm__ volatile("msr fpcr, %0" : : "r"(v));
#else
    (void)m;
#endif
}
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
    /* the running op's caller workspace (kern__op_workspace), or NULL */
    char *op_ws;
    size_t op_ws_shared, op_ws_thread;
};

static KERN__TLS const kern__frame *kern__tls_frame;

/* Enters ctx's float mode in frame f (saving the thread's), or leaves it. */
static inline void kern__fp_enter(const struct kern_ctx *ctx, kern__frame *f) {
    f->fpmode = 0;
    f->fpset = 0;
    if (!ctx || !ctx->params.flush_denormals) return;
    f->fpmode = kern__fp_get();
#if defined(KERN_X86)
    kern__fp_set(f->fpmode | 0x8040u);
    f->fpset = 1;
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    kern__fp_set(f->fpmode | (1u << 24));
    f->fpset = 1;
#endif
}
static inline void kern__fp_leave(const kern__frame *f) {
    if (f->fpset) kern__fp_set(f->fpmode);
}

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

/* Blocks of KERN__HUGE bytes and more (prepacked weights, arenas) start
 * on a 2 MiB boundary and their whole 2 MiB pages are advised as huge
 * pages (Linux MADV_HUGEPAGE; with transparent huge pages in "madvise"
 * mode nothing else gets them): a weight streamed from memory then misses
 * the TLB once per 2 MiB instead of once per 4 KiB page, and the
 * prefetchers' hints are not dropped at page walks. The tail past the
 * last whole page keeps small pages, so no memory is added. Xeon (family
 * 6 model 0xa7), generated BERT-base B1 L16, 3 alternated runs, min ms,
 * 1 / 2 threads: 27.0 / 15.3 -> 25.6 / 14.2. A context's own allocator
 * (kern_ctx_params.allocator) bypasses this. */
#define KERN__HUGE ((size_t)2 << 20)
static void *kern__sys_alloc(size_t size, size_t align) {
    void *p = NULL;
    if (size == 0) size = align;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (size >= KERN__HUGE && align <= KERN__HUGE) {
        if (posix_memalign(&p, KERN__HUGE, size) != 0) return NULL;
        (void)madvise(p, size / KERN__HUGE * KERN__HUGE, MADV_HUGEPAGE);
        return p;
    }
#endif
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
    kern__fp_enter(ctx, &f);
    for (i = 0; i < n; i++) fn(arg, i, thread);
    kern__fp_leave(&f);
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
    kern__fp_enter(ctx, &f);
    for (;;) {
        int64_t i = __atomic_fetch_add(&ctx->next_task, job->chunk,
                                       __ATOMIC_RELAXED);
        int64_t end;
        if (i >= job->n_tasks) break;
        end = job->n_tasks - i > job->chunk ? i + job->chunk : job->n_tasks;
        for (int64_t k = i; k < end; k++) job->fn(job->arg, k, thread);
        __atomic_fetch_add(&ctx->done, end - i, __ATOMIC_RELEASE);
    }
    kern__fp_leave(&f);
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
    kern__fp_enter(h->ctx, &f);
    h->fn(h->arg, task, thread);
    kern__fp_leave(&f);
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
    if ((int)p.uarch < 0 || p.uarch >= KERN_UARCH_COUNT)
        return kern__err(KERN_ERR_ARG, "kern_ctx_create: uarch=%d is not a kern_uarch",
                         (int)p.uarch);
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
KERN_API kern_uarch kern_ctx_uarch(const kern_ctx *ctx) {
    if (!ctx) ctx = kern_default_ctx();
    return ctx ? kern__uarch_effective(ctx->params.uarch, ctx->isa) : KERN_UARCH_GENERIC;
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
    kern__fp_enter(ctx, &ctx->op_frame);
    *pctx = ctx;
    return KERN_OK;
}

KERN_API void kern__op_end(kern_ctx *ctx) {
    if (!ctx) return;
    ctx->op_ws = NULL;
    kern__fp_leave(&ctx->op_frame);
    kern__tls_frame = ctx->op_frame.prev;
    pthread_mutex_unlock(&ctx->op_lock);
}

KERN_API void *kern__workspace(kern_ctx *ctx, size_t size) {
    if (ctx->op_ws) return size <= ctx->op_ws_shared ? ctx->op_ws : NULL;
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
    if (ctx->op_ws) {
        if (size <= ctx->op_ws_thread) return KERN_OK;
        return kern__err(KERN_ERR_NOMEM,
                         "kern: %zu bytes of thread scratch exceed the %zu the "
                         "caller workspace holds per thread", size, ctx->op_ws_thread);
    }
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
    if (ctx->op_ws)
        return ctx->op_ws + ctx->op_ws_shared + (size_t)thread * ctx->op_ws_thread;
    return ctx->slots[thread].ptr;
}

static size_t kern__al64_size(size_t n) {
    return n > (size_t)-1 - 63 ? (size_t)-1 : (n + 63) & ~(size_t)63;
}

KERN_API size_t kern__op_workspace_bytes(const kern_ctx *ctx, size_t shared,
                                         size_t per_thread) {
    size_t s = kern__al64_size(shared), t = kern__al64_size(per_thread);
    size_t nt = (size_t)(ctx->n_threads > 0 ? ctx->n_threads : 1), total;
    if (shared == 0 && per_thread == 0) return 0;
    if (s == (size_t)-1 || t == (size_t)-1) return (size_t)-1;
    if (t != 0 && nt > ((size_t)-1 - 64 - s) / t) return (size_t)-1;
    total = 64 + s + nt * t;
    return total;
}

KERN_API kern_status kern__op_workspace(kern_ctx *ctx, const char *op, void *mem,
                                        size_t size, size_t shared,
                                        size_t per_thread) {
    size_t need = kern__op_workspace_bytes(ctx, shared, per_thread);
    if (!mem) return KERN_OK;
    if (size < need)
        return kern__err(KERN_ERR_ARG,
                         "%s: params.workspace_size=%zu but this call needs %zu bytes "
                         "(see its _workspace_size function)", op, size, need);
    if (need == 0) return KERN_OK;
    ctx->op_ws = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    ctx->op_ws_shared = kern__al64_size(shared);
    ctx->op_ws_thread = kern__al64_size(per_thread);
    return KERN_OK;
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
/* The bf16 of each lane in its high 16 bits (the low bits are junk):
 * two such vectors make 32 bf16 with one word permute. */
KERN_TARGET_AVX512 static inline __m512i kern__f32x16_bf16hi__avx512(__m512i u) {
    __mmask16 nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
        _mm512_set1_epi32(0x7f800000));
    __m512i rnd = _mm512_add_epi32(
        u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                            _mm512_and_si512(_mm512_srli_epi32(u, 16),
                                             _mm512_set1_epi32(1))));
    return _mm512_mask_or_epi32(rnd, nan, u, _mm512_set1_epi32(0x00400000));
}
KERN_TARGET_AVX512 static inline __m256i kern__f32x16_bf16__avx512(__m512i u) {
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(kern__f32x16_bf16hi__avx512(u), 16));
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

/* ======================================================================
 * Internal math layer (kern__ names; not a stable public API).
 *
 * One set of functions shared by every family, named by contract and ISA:
 * kern__s_NAME(float) is the scalar twin of kern__v_NAME__avx2(__m256),
 * kern__v_NAME__avx512(__m512) and kern__v_NAME__neon(float32x4_t). The
 * bodies are written once in gen/templates/kern_math.c.in and expanded
 * below by gen/kern_tmpl.py (make gen), so every ISA runs the same
 * operations in the same order: each is a correctly rounded IEEE operation
 * (add, sub, mul, div, fma), a min/max defined as x86 does (min(a, b) =
 * a < b ? a : b: the second operand for NaN), a compare/select, an integer
 * or bit operation, or an exact table lookup. The scalar twin therefore
 * returns the same bits as every vector version for every input (NaN
 * results are NaN; their payload is not specified), which is what makes a
 * fused epilogue and the standalone op bit-identical, tails included. This
 * needs IEEE f32 arithmetic without contraction of separate multiplies and
 * adds: every V_MUL goes through an empty asm barrier, so -ffp-contract=fast
 * (GCC's default outside ISO C modes) cannot fuse it; -ffast-math breaks the
 * guarantee.
 *
 * Accuracy over the whole f32 range: max error in ulps of the exact result
 * (2^-149 below 2^-126; the gradients, which cross zero, in ulps of their
 * largest term), over all 2^32 inputs against a double reference
 * (tests/math_sweep.c, AVX2 = every ISA); tests/test_math.c asserts the
 * bound column on 2^20 sampled inputs plus special values on every ISA the
 * machine runs. Details and speed: docs/internals.md.
 *
 *   function        all 2^32   bound    specials
 *   exp             1.046      1.1      exp(-Inf) = 0, overflow Inf,
 *                                       subnormal results rounded once
 *   exp2            0.898      1.1      as exp
 *   exp2_neg        0.843      1.1      for x >= -126; below, |err| <=
 *                                       0.71 * 2^-126 (flushes to 0 below
 *                                       -126.5); exp2(-Inf) = 0; x <= 127
 *   erf             1.055      1.1      erf(+-0) = +-0, erf(+-Inf) = +-1
 *   tanh            1.456      2        tanh(-0) = -0, +-Inf -> +-1
 *   sigmoid         2.402      2.5      +-Inf -> 1 / 0
 *   silu            3.141      3.5      silu(-0) = -0, silu(-Inf) = NaN
 *   silu_grad       4.848      5        +-Inf -> NaN (torch)
 *   gelu            3.511      4        x Phi(x) to the underflow (no
 *                                       cancellation for x < 0); gelu(-0)
 *                                       = -0, gelu(x <= -14.4) = -0,
 *                                       gelu(+Inf) = Inf, gelu(-Inf) = NaN
 *   gelu_grad       3.751      4        +-Inf -> NaN (torch)
 *   gelu_tanh       2.467 for |2u| <= 1, 213.9 at x = -10.04: bound
 *                   3 + 2.6 |2u| (2u = 2 sqrt(2/pi)(x + 0.044715 x^3) is
 *                   rounded in f32 and its error is amplified by |2u| for
 *                   x < 0); x sigmoid(2u) without cancellation
 *   gelu_tanh_grad  2.973 for |2u| <= 1, 209.0 overall: bound 3.5 +
 *                   2.6 |2u|; 1 for x >= 1e19 up to FLT_MAX, 0 for
 *                   x <= -1e19, +-Inf -> NaN (torch)
 *   relu            exact               relu(-0) = -0, NaN -> NaN
 *   NaN in gives NaN out everywhere.
 * ====================================================================== */

#include <math.h>

/* Keeps the compiler from fusing a multiply into a following add. */
#if defined(__GNUC__) || defined(__clang__)
#if defined(__x86_64__) || defined(__i386__)
#define KERN__FBARRIER(v) __asm__("" : "+x"(v))
#elif defined(__aarch64__)
#define KERN__FBARRIER(v) __asm__("" : "+w"(v))
#else
#define KERN__FBARRIER(v) ((void)0)
#endif
#define KERN__AINLINE static inline __attribute__((always_inline))
#else
#define KERN__FBARRIER(v) ((void)0)
#define KERN__AINLINE static inline
#endif

/* ---- scalar vocabulary (the twins' operations) ---- */
static inline float kern__s_mul(float a, float b) {
    float r = a * b;
    KERN__FBARRIER(r);
    return r;
}
static inline float kern__s_fma(float a, float b, float c) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_fmaf(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}
static inline float kern__s_sqrt(float a) { return sqrtf(a); }
static inline float kern__s_min(float a, float b) { return a < b ? a : b; }
static inline float kern__s_max(float a, float b) { return a > b ? a : b; }
static inline float kern__s_abs(float a) { return kern__bits_f32(kern__f32_bits(a) & 0x7fffffffu); }
static inline float kern__s_andf(float a, float b) {
    return kern__bits_f32(kern__f32_bits(a) & kern__f32_bits(b));
}
static inline float kern__s_orf(float a, float b) {
    return kern__bits_f32(kern__f32_bits(a) | kern__f32_bits(b));
}
static inline float kern__s_xorf(float a, float b) {
    return kern__bits_f32(kern__f32_bits(a) ^ kern__f32_bits(b));
}
static inline int32_t kern__s_iadd(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static inline int32_t kern__s_isub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
static inline int32_t kern__s_ishl(int32_t a, int n) { return (int32_t)((uint32_t)a << n); }
static inline int32_t kern__s_isrl(int32_t a, int n) { return (int32_t)((uint32_t)a >> n); }
static inline int32_t kern__s_isra(int32_t a, int n) {
    return a >= 0 ? a >> n : (int32_t)~(~(uint32_t)a >> n);
}
/* Round to nearest even for |a| < 2^22 (the callers clamp first). */
static inline int32_t kern__s_cvtn(float a) {
    return (int32_t)((a + 12582912.0f) - 12582912.0f);
}
/* Truncation like cvttps2dq: out of range and NaN give INT32_MIN. */
static inline int32_t kern__s_cvtt(float a) {
    return (a > -2147483648.0f && a < 2147483648.0f) ? (int32_t)a : INT32_MIN;
}

#ifdef KERN_X86
KERN_TARGET_AVX2 static inline __m256 kern__mul__avx2(__m256 a, __m256 b) {
    __m256 r = _mm256_mul_ps(a, b);
    KERN__FBARRIER(r);
    return r;
}
KERN_TARGET_AVX512 static inline __m512 kern__mul__avx512(__m512 a, __m512 b) {
    __m512 r = _mm512_mul_ps(a, b);
    __asm__("" : "+v"(r));
    return r;
}
KERN_TARGET_AVX2 static inline __m256i kern__tailmask__avx2(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/* n floats (0 <= n <= 8), the rest 0; nothing past p + n is read. */
KERN_TARGET_AVX2 static inline __m256 kern__loadn__avx2(const float *p, int n) {
    return _mm256_maskload_ps(p, kern__tailmask__avx2(n));
}
/* A whole vector is a plain store: AMD's masked 256-bit store is
 * microcoded (a dozen cycles each on Zen 2/3), and loops call this with
 * n = 8 on every step but the last. */
KERN_TARGET_AVX2 static inline void kern__storen__avx2(float *p, __m256 v, int n) {
    if (n >= 8)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, kern__tailmask__avx2(n), v);
}
/* In-register transpose of an 8x8 block of floats: lane j of r[i] -> lane i
 * of r[j] (the AVX2 packs of kern_gemm.h and kern_sparse24.h). */
KERN_TARGET_AVX2 static inline void kern__v_tr8__avx2(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
KERN_TARGET_AVX512 static inline __mmask16 kern__tailmask__avx512(int n) {
    return (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
}
KERN_TARGET_AVX512 static inline __m512 kern__loadn__avx512(const float *p, int n) {
    return _mm512_maskz_loadu_ps(kern__tailmask__avx512(n), p);
}
KERN_TARGET_AVX512 static inline void kern__storen__avx512(float *p, __m512 v, int n) {
    _mm512_mask_storeu_ps(p, kern__tailmask__avx512(n), v);
}
#endif
#ifdef KERN_NEON
static inline float32x4_t kern__mul__neon(float32x4_t a, float32x4_t b) {
    float32x4_t r = vmulq_f32(a, b);
    KERN__FBARRIER(r);
    return r;
}
static inline float32x4_t kern__min__neon(float32x4_t a, float32x4_t b) {
    return vbslq_f32(vcltq_f32(a, b), a, b);
}
static inline float32x4_t kern__max__neon(float32x4_t a, float32x4_t b) {
    return vbslq_f32(vcgtq_f32(a, b), a, b);
}
/* tab[k & 7] per lane (tbl over 32 bytes). */
static inline float32x4_t kern__lut8__neon(const float *tab, int32x4_t k) {
    uint8x16x2_t t;
    uint32x4_t i = vandq_u32(vreinterpretq_u32_s32(k), vdupq_n_u32(7u));
    t.val[0] = vreinterpretq_u8_f32(vld1q_f32(tab));
    t.val[1] = vreinterpretq_u8_f32(vld1q_f32(tab + 4));
    i = vaddq_u32(vmulq_n_u32(i, 0x04040404u), vdupq_n_u32(0x03020100u));
    return vreinterpretq_f32_u8(vqtbl2q_u8(t, vreinterpretq_u8_u32(i)));
}
static inline float32x4_t kern__loadn__neon(const float *p, int n) {
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (n >= 4) return vld1q_f32(p);
    memcpy(t, p, sizeof(float) * (size_t)(n > 0 ? n : 0));
    return vld1q_f32(t);
}
static inline void kern__storen__neon(float *p, float32x4_t v, int n) {
    float t[4];
    if (n >= 4) {
        vst1q_f32(p, v);
        return;
    }
    vst1q_f32(t, v);
    memcpy(p, t, sizeof(float) * (size_t)(n > 0 ? n : 0));
}
#endif

/* ---- dtype load / store with tails (f32, bf16, f16 <-> f32 lanes) ----
 * kern__v_load_f32__ISA(p, dt, n): n elements of dtype dt at p (n >= VW:
 * a full vector; 0 <= n < VW: the first n, the rest 0, nothing past p + n
 * read) as f32, exactly as kern_bf16_to_f32 / kern_f16_to_f32.
 * kern__v_store_f32__ISA(p, dt, v, n, nt): the first min(n, VW) lanes
 * stored, rounded to nearest even as kern_f32_to_bf16 / kern_f32_to_f16;
 * nt = non-temporal for full vectors (p then aligned to the store width:
 * 4 VW bytes for f32, 2 VW for bf16/f16; call kern__nt_fence() after the
 * last one). kern__s_load_f32 / kern__s_store_f32 are the one-element
 * twins (n is ignored). */
KERN__AINLINE float kern__s_load_f32(const void *p, kern_dtype dt, int n) {
    (void)n;
    if (dt == KERN_F32) return *(const float *)p;
    if (dt == KERN_BF16) return kern_bf16_to_f32(*(const uint16_t *)p);
    return kern_f16_to_f32(*(const uint16_t *)p);
}
KERN__AINLINE void kern__s_store_f32(void *p, kern_dtype dt, float v, int n, int nt) {
    (void)n;
    (void)nt;
    if (dt == KERN_F32) *(float *)p = v;
    else if (dt == KERN_BF16) *(uint16_t *)p = kern_f32_to_bf16(v);
    else *(uint16_t *)p = kern_f32_to_f16(v);
}
static inline void kern__nt_fence(void) {
#ifdef KERN_X86
    _mm_sfence();
#endif
}
#ifdef KERN_X86
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_load_f32__avx2(const void *p, kern_dtype dt, int n) {
    __m128i h;
    if (dt == KERN_F32)
        return n >= 8 ? _mm256_loadu_ps((const float *)p) : kern__loadn__avx2((const float *)p, n);
    if (n >= 8) {
        h = _mm_loadu_si128((const __m128i *)p);
    } else {
        uint16_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        memcpy(t, p, 2 * (size_t)(n > 0 ? n : 0));
        h = _mm_loadu_si128((const __m128i *)(const void *)t);
    }
    if (dt == KERN_BF16) return _mm256_castsi256_ps(kern__bf16x8_f32__avx2(h));
    return _mm256_cvtph_ps(h);
}
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_store_f32__avx2(void *p, kern_dtype dt, __m256 v, int n,
                                                           int nt) {
    __m128i h;
    if (dt == KERN_F32) {
        if (n < 8) kern__storen__avx2((float *)p, v, n);
        else if (nt) _mm256_stream_ps((float *)p, v);
        else _mm256_storeu_ps((float *)p, v);
        return;
    }
    h = dt == KERN_BF16 ? kern__f32x8_bf16__avx2(_mm256_castps_si256(v))
                        : _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    if (n >= 8) {
        if (nt) _mm_stream_si128((__m128i *)p, h);
        else _mm_storeu_si128((__m128i *)p, h);
    } else {
        uint16_t t[8];
        _mm_storeu_si128((__m128i *)(void *)t, h);
        memcpy(p, t, 2 * (size_t)(n > 0 ? n : 0));
    }
}
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_load_f32__avx512(const void *p, kern_dtype dt, int n) {
    __mmask16 m = kern__tailmask__avx512(n < 0 ? 0 : n);
    __m256i h;
    if (dt == KERN_F32) return _mm512_maskz_loadu_ps(m, p);
    h = _mm256_maskz_loadu_epi16(m, p);
    if (dt == KERN_BF16) return _mm512_castsi512_ps(kern__bf16x16_f32__avx512(h));
    return _mm512_cvtph_ps(h);
}
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_store_f32__avx512(void *p, kern_dtype dt, __m512 v,
                                                               int n, int nt) {
    __mmask16 m = kern__tailmask__avx512(n < 0 ? 0 : n);
    __m256i h;
    if (dt == KERN_F32) {
        if (n >= 16 && nt) _mm512_stream_ps((float *)p, v);
        else _mm512_mask_storeu_ps(p, m, v);
        return;
    }
    h = dt == KERN_BF16 ? kern__f32x16_bf16__avx512(_mm512_castps_si512(v))
                        : _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    if (n >= 16 && nt) _mm256_stream_si256((__m256i *)p, h);
    else _mm256_mask_storeu_epi16(p, m, h);
}
#endif
#ifdef KERN_NEON
static inline float32x4_t kern__v_load_f32__neon(const void *p, kern_dtype dt, int n) {
    uint16x4_t h;
    if (dt == KERN_F32) return kern__loadn__neon((const float *)p, n);
    if (n >= 4) {
        h = vld1_u16((const uint16_t *)p);
    } else {
        uint16_t t[4] = {0, 0, 0, 0};
        memcpy(t, p, 2 * (size_t)(n > 0 ? n : 0));
        h = vld1_u16(t);
    }
    if (dt == KERN_BF16) {
        uint32x4_t v = vshll_n_u16(h, 16);
        uint32x4_t nan = vcgtq_u32(vandq_u32(v, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
        return vreinterpretq_f32_u32(vorrq_u32(v, vandq_u32(nan, vdupq_n_u32(0x00400000u))));
    }
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}
static inline void kern__v_store_f32__neon(void *p, kern_dtype dt, float32x4_t v, int n, int nt) {
    uint16x4_t h;
    (void)nt;
    if (dt == KERN_F32) {
        kern__storen__neon((float *)p, v, n);
        return;
    }
    if (dt == KERN_BF16) {
        uint32x4_t u = vreinterpretq_u32_f32(v);
        uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
        uint32x4_t rnd = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fffu), vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1))));
        h = vshrn_n_u32(vbslq_u32(nan, vorrq_u32(u, vdupq_n_u32(0x00400000u)), rnd), 16);
    } else {
        h = vreinterpret_u16_f16(vcvt_f16_f32(v));
    }
    if (n >= 4) {
        vst1_u16((uint16_t *)p, h);
    } else {
        uint16_t t[4];
        vst1_u16(t, h);
        memcpy(p, t, 2 * (size_t)(n > 0 ? n : 0));
    }
}
#endif

/* ---- helpers of V_HMAX / V_STOREB ---- */
#ifdef KERN_X86
KERN_TARGET_AVX2 static inline float kern__hmax__avx2(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
/* low bytes of 8 int32 lanes (values in 0..255 or -128..127) */
KERN_TARGET_AVX2 static inline void kern__storeb__avx2(uint8_t *p, __m256i r, int n) {
    __m128i b;
    r = _mm256_shuffle_epi8(r, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,
                                                -1, -1, -1, -1));
    b = _mm_unpacklo_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    if (n >= 8) {
        _mm_storel_epi64((__m128i *)(void *)p, b);
    } else {
        uint8_t t[8];
        _mm_storel_epi64((__m128i *)(void *)t, b);
        memcpy(p, t, (size_t)(n > 0 ? n : 0));
    }
}
KERN_TARGET_AVX512 static inline void kern__storeb__avx512(uint8_t *p, __m512i r, int n) {
    _mm_mask_storeu_epi8(p, kern__tailmask__avx512(n < 0 ? 0 : n), _mm512_cvtepi32_epi8(r));
}
#endif
#ifdef KERN_NEON
static inline void kern__storeb__neon(uint8_t *p, int32x4_t r, int n) {
    uint8_t t[8];
    uint16x4_t h = vmovn_u32(vreinterpretq_u32_s32(r));
    vst1_u8(t, vmovn_u16(vcombine_u16(h, h)));
    memcpy(p, t, (size_t)(n >= 4 ? 4 : (n > 0 ? n : 0)));
}
#endif

/* ---- the one GEMM epilogue ----
 * For element (i, j) of the output, with acc the f32 accumulator the
 * family computed (alpha folds in a scalar scale such as GEMM's alpha):
 *     v = alpha * acc
 *     v = fma(beta, src[i, j - src_j0], v)          if src (beta * C)
 *     v = v + bias[per_row ? i : j]                  if bias
 *     v = act(v)                                     (kern_act)
 *     v = v + res[i, j]                              if res
 *     v = v * out_scale
 *     dst[i, j - dst_j0] = v rounded to dst_dt (nearest even)
 * in that order with those roundings on every ISA (so a family's fused
 * epilogue gives the bits of the unfused ops that compute the same
 * sequence, e.g. kern__s_act). Operands are f32 / bf16 / f16 with any
 * element strides (unit column stride is the fast path; 0 broadcasts);
 * res may be dst itself (same elements: each vector is read before it is
 * written), other overlaps are undefined. The public kern_epilogue (bias,
 * bias_per_row, act, residual, out_scale) fills bias / act / res /
 * out_scale; the family fills alpha, src and dst. */
typedef struct kern__epi {
    float alpha;
    const char *src; /* NULL: no beta * C term */
    kern_dtype src_dt;
    int64_t src_rs, src_cs, src_j0;
    float beta;
    const char *bias; /* NULL: none */
    kern_dtype bias_dt;
    int64_t bias_st;
    int bias_per_row;
    kern_act act;
    const char *res; /* NULL: none */
    kern_dtype res_dt;
    int64_t res_rs, res_cs;
    float out_scale;
    char *dst;
    kern_dtype dst_dt;
    int64_t dst_rs, dst_cs, dst_j0;
    int nt; /* non-temporal full-vector stores (unit dst_cs, rows aligned) */
    int glu; /* gated (kern_epilogue.glu): the tile's columns are glu groups
                (j0 a multiple of 2 KERN_GLU_GROUP), src and bias are read
                at the tile's columns, res and dst at the output's (j / 2;
                dst_j0 in output columns); no nt */
} kern__epi;

/* alpha = out_scale = 1, nothing added, act none; dst to be set. */
static inline void kern__epi_init(kern__epi *e) {
    memset(e, 0, sizeof *e);
    e->alpha = 1.0f;
    e->out_scale = 1.0f;
    e->act = KERN_ACT_NONE;
}
/* The stride of dimension d as an epilogue uses it: 0 for a dimension of
 * size 1, whose stride is never stepped and may be any value (callers
 * multiply it by element sizes, which must not overflow). */
static inline int64_t kern__epi_stride(const kern_tensor *t, int d) {
    return t->shape[d] <= 1 ? 0 : t->stride[d];
}
/* bias: a 1-D view ([N], or [M] with per_row); residual: a 2-D (or
 * broadcast) view of the [M, N] output, NULL for none. */
static inline void kern__epi_set_bias(kern__epi *e, const kern_tensor *bias, int per_row) {
    e->bias = bias ? (const char *)bias->data : NULL;
    e->bias_dt = bias ? bias->dtype : KERN_F32;
    e->bias_st = bias && bias->ndim > 0 ? kern__epi_stride(bias, bias->ndim - 1) : 0;
    e->bias_per_row = per_row;
}
static inline void kern__epi_set_residual(kern__epi *e, const kern_tensor *res) {
    e->res = res ? (const char *)res->data : NULL;
    e->res_dt = res ? res->dtype : KERN_F32;
    e->res_rs = res && res->ndim >= 2 ? kern__epi_stride(res, res->ndim - 2) : 0;
    e->res_cs = res && res->ndim >= 1 ? kern__epi_stride(res, res->ndim - 1) : 0;
}

/* ---- the one int8 quantization rule ----
 * Symmetric: scale = absmax / 127 over the finite values (1 when absmax
 * is 0; FLT_MIN when smaller, so 1/scale is finite), inv = 1 / scale,
 *     q = clamp(rne(v * inv), -127, 127),  NaN -> 0, +-Inf -> +-127.
 * Asymmetric (u8, zero point zp): scale = (max - min) / 255 likewise,
 *     q = clamp(rne(v * inv) + zp, 0, 255).
 * kern__v_quant_row__ISA applies it to a row; kern__v_absmax__ISA finds the
 * range. Every ISA gives the same codes (rne is exact). */
static inline float kern__quant_scale_div(float range, float div) {
    float s = range / div;
    if (range == 0.0f) return 1.0f;
    if (s < 1.17549435e-38f) s = 1.17549435e-38f; /* FLT_MIN */
    return s;
}
static inline float kern__quant_scale(float absmax) { return kern__quant_scale_div(absmax, 127.0f); }

/* ---- constants and tables (fitted by gen/math_fit.py) ---- */
#define KERN__M_LOG2E 0x1.715476p+0f     /* RN(log2 e) */
#define KERN__M_LN2HI 0x1.62e430p-1f     /* RN(ln 2) */
#define KERN__M_LN2LO -0x1.05c610p-29f   /* RN(ln 2 - LN2HI) */
#define KERN__M_MAGIC 12582912.0f         /* 1.5 * 2^23: x + MAGIC rounds x */
#define KERN__M_MAGIC191 12583103.0f      /* MAGIC + 191: exponent bias 127 + 64 */
#define KERN__M_MAGIC127 12583039.0f      /* MAGIC + 127 */
#define KERN__M_TWOM64 0x1p-64f          /* 2^-64 */
#define KERN__M_INV_SQRT_2PI 0x1.988454p-2f
#define KERN__M_GT_C1 0x1.988454p+0f    /* 2 sqrt(2/pi) */
#define KERN__M_GT_C2 0x1.2444f2p-4f    /* 2 sqrt(2/pi) 0.044715 */
#define KERN__M_GT_C2X3 0x1.b6676cp-3f  /* 6 sqrt(2/pi) 0.044715 */
#define KERN__M_GELU_LO -3.0f             /* below: the exp(-x^2/2) g(|x|) form */
#define KERN__M_GELU_HI 5.9f              /* above: Phi(x) = 1 exactly */
#define KERN__M_GELU_NEG_SCALE 0x1.555556p+0f /* 4/3: index of [-3, 0) */
#define KERN__M_GELU_POS_SCALE 0x1.555556p-1f /* 2/3: index of [0, 6) */
#define KERN__M_MILLS_AMAX 16.5f
#define KERN__M_EXP_LO -104.0f /* exp: below the result rounds to 0 */
#define KERN__M_EXP_HI 89.0f   /* above: Inf */
#define KERN__M_EXPNEG_LO -132.5f /* exp of y <= 0: below, the scale is exactly 0 */
/* exp(r) = 1 + r + r^2 P(r), |r| <= ln2/2 (0.82 ulp in f32); 2^f = 1 + f Q(f),
 * |f| <= 1/2 (0.69 ulp); tanh(x) = x + x s T(s), s = x^2, |x| < 0.625. */
#define KERN__M_EXP_P0 5.000000000e-01f
#define KERN__M_EXP_P1 1.666657031e-01f
#define KERN__M_EXP_P2 4.166686535e-02f
#define KERN__M_EXP_P3 8.364181966e-03f
#define KERN__M_EXP_P4 1.390170772e-03f
#define KERN__M_EXP2_Q0 6.931471825e-01f
#define KERN__M_EXP2_Q1 2.402264923e-01f
#define KERN__M_EXP2_Q2 5.550357327e-02f
#define KERN__M_EXP2_Q3 9.618237615e-03f
#define KERN__M_EXP2_Q4 1.339073526e-03f
#define KERN__M_EXP2_Q5 1.540350204e-04f
#define KERN__M_TANH_T0 -3.333332837e-01f
#define KERN__M_TANH_T1 1.333277076e-01f
#define KERN__M_TANH_T2 -5.385095254e-02f
#define KERN__M_TANH_T3 2.099734917e-02f
#define KERN__M_TANH_T4 -6.096931640e-03f
/* GELU: Phi(x) = P(X <= x) on 8 intervals anchored at their left end A:
 * Phi(x) = C0 + t (C1 + t (... C8)), t = x - A[k], k = floor(4/3 (x + 3))
 * on [-3, 0), 4 + floor(2/3 x) on [0, 6). Anchoring at the left end keeps
 * the rounding of C0 relative to the smallest value of the interval, so
 * the negative side holds its relative accuracy (1.67 ulp in f32 over
 * every interval; C0 of [0, 1.5) is exactly 1/2 and the last interval
 * gives exactly 1 at the clamp 5.9). */
static const float kern__m_gelu_tab[10][8] = {
    /* A    */ {-3.000000000e+00f, -2.250000000e+00f, -1.500000000e+00f, -7.500000000e-01f, 0.000000000e+00f, 1.500000000e+00f, 3.000000000e+00f, 4.500000000e+00f},
    /* C0   */ {1.349898055e-03f, 1.222447306e-02f, 6.680720299e-02f, 2.266273499e-01f, 5.000000000e-01f, 9.331927896e-01f, 9.986500740e-01f, 9.999966025e-01f},
    /* C1   */ {4.431848414e-03f, 3.173965216e-02f, 1.295175999e-01f, 3.011374176e-01f, 3.989430368e-01f, 1.295173317e-01f, 4.431832582e-03f, 1.598389645e-05f},
    /* C2   */ {6.647720467e-03f, 3.570627421e-02f, 9.713485837e-02f, 1.129308790e-01f, -1.534294825e-05f, -9.712762386e-02f, -6.638421677e-03f, -3.599656338e-05f},
    /* C3   */ {5.910061765e-03f, 2.150509320e-02f, 2.704128623e-02f, -2.203128487e-02f, -6.638623774e-02f, 2.689088322e-02f, 5.837813951e-03f, 5.137228436e-05f},
    /* C4   */ {3.317562863e-03f, 6.037719548e-03f, -6.469360087e-03f, -2.245554700e-02f, -3.206771216e-04f, 6.426263135e-03f, -3.113066079e-03f, -5.127704935e-05f},
    /* C5   */ {1.128936652e-03f, -1.329652296e-04f, -4.516549408e-03f, -1.729973243e-03f, 1.045185886e-02f, -6.598627195e-03f, 8.067222079e-04f, 3.647174526e-05f},
    /* C6   */ {7.449830446e-05f, -1.551365713e-03f, -3.104822943e-03f, 5.791673437e-03f, -2.686710504e-04f, 1.501728897e-03f, 9.614173177e-05f, -1.765873822e-05f},
    /* C7   */ {-5.199677980e-05f, 1.872914290e-04f, 2.839949448e-03f, -2.071726136e-03f, -1.325950143e-03f, 2.933481483e-05f, -1.294447720e-04f, 5.160652108e-06f},
    /* C8   */ {-5.872985275e-05f, -6.952208787e-05f, -7.211990887e-04f, 5.170103977e-04f, 2.667455119e-04f, -4.173915295e-05f, 2.665098873e-05f, -6.776084547e-07f},
};
/* GELU tail, x < -3: Phi(x) = exp(-x^2/2) g(a), a = -x, with the Mills
 * ratio form g(a) = exp(a^2/2) Q(a) (smooth, ~ 1/(a sqrt(2 pi))) fitted on
 * [3,4), [4,6), [6,8), [8,12), [12,16.5] (row (bits(a) >> 22) & 7, center
 * CEN, degree 7, 1.0 ulp in f32). */
static const float kern__m_mills_tab[9][8] = {
    /* CEN  */ {3.500000000e+00f, 3.500000000e+00f, 5.000000000e+00f, 7.000000000e+00f, 1.000000000e+01f, 1.425000000e+01f, 1.425000000e+01f, 1.425000000e+01f},
    /* G0   */ {1.063451543e-01f, 1.063451543e-01f, 7.691930234e-02f, 5.589348078e-02f, 3.950669244e-02f, 2.786006965e-02f, 2.786006965e-02f, 2.786006965e-02f},
    /* G1   */ {-2.673424222e-02f, -2.673424222e-02f, -1.434575580e-02f, -7.687903475e-03f, -3.875339404e-03f, -1.936294138e-03f, -1.936294138e-03f, -1.936294138e-03f},
    /* G2   */ {6.387654692e-03f, 6.387654692e-03f, 2.595278434e-03f, 1.039080904e-03f, 3.766547889e-04f, 1.339393202e-04f, 1.339393202e-04f, 1.339393202e-04f},
    /* G3   */ {-1.459153602e-03f, -1.459153602e-03f, -4.564804549e-04f, -1.381154725e-04f, -3.627979095e-05f, -9.221839719e-06f, -9.221839719e-06f, -9.221839719e-06f},
    /* G4   */ {3.201083164e-04f, 3.201083164e-04f, 7.814452692e-05f, 1.806193177e-05f, 3.458237870e-06f, 6.315621022e-07f, 6.315621022e-07f, 6.315621022e-07f},
    /* G5   */ {-6.771655899e-05f, -6.771655899e-05f, -1.306929971e-05f, -2.327146603e-06f, -3.274278413e-07f, -4.308930457e-08f, -4.308930457e-08f, -4.308930457e-08f},
    /* G6   */ {1.413263362e-05f, 1.413263362e-05f, 2.250060788e-06f, 3.050622297e-07f, 3.302809759e-08f, 3.069179355e-09f, 3.069179355e-09f, 3.069179355e-09f},
    /* G7   */ {-2.795552746e-06f, -2.795552746e-06f, -3.581249359e-07f, -3.811975091e-08f, -3.068248100e-09f, -2.073603650e-10f, -2.073603650e-10f, -2.073603650e-10f},
};
/* erf on [0, 4): k = floor(2|x|), t = |x| - CEN_k, erf(|x|) = C0_k + t E_k +
 * t^2 Q_k(t) (E_0 = 1, C0_0 = 0: relative accuracy down to subnormals; for
 * k > 0 E_k = 0 and C0_k = erf(CEN_k) rounded first so the fit absorbs it),
 * Q_k of degree 6 fitted at Chebyshev nodes; 1.06 ulp over every f32. */
static const float kern__m_erf_tab[10][8] = {
    /* CEN */ {0.0f, 0.75f, 1.25f, 1.75f, 2.25f, 2.75f, 3.25f, 3.75f},
    /* C0 */ {0.0f, 0.711155653f, 0.92290014f, 0.986671686f, 0.998537302f,
              0.999899387f, 0.999995708f, 0.999999881f},
    /* E  */ {1.0f},
    /* Q0 */ {1.283791810e-01f, 6.429310441e-01f, 2.365211248e-01f, 5.277499557e-02f,
              7.142318878e-03f, 5.862772814e-04f, 2.918902283e-05f, 8.814314469e-07f},
    /* Q1 */ {-1.526091751e-06f, -4.822038114e-01f, -2.956550121e-01f, -9.236053377e-02f,
              -1.607554965e-02f, -1.614937792e-03f, -9.810509073e-05f, -1.726850769e-06f},
    /* Q2 */ {-3.760786355e-01f, 2.678855695e-02f, 1.675358415e-01f, 9.015733749e-02f,
              2.172453143e-02f, 2.760384232e-03f, 1.958112698e-04f, 7.969994840e-06f},
    /* Q3 */ {-5.544511368e-04f, 1.509167701e-01f, -5.992406048e-03f, -4.792079702e-02f,
              -1.885819063e-02f, -3.143775510e-03f, -1.481104264e-04f, -8.116546815e-05f},
    /* Q4 */ {1.158386245e-01f, -5.322370678e-02f, -4.718513787e-02f, 6.619999185e-03f,
              1.065944601e-02f, 2.756165108e-03f, 3.136723535e-04f, 1.834070645e-05f},
    /* Q5 */ {-7.936138660e-03f, -2.915494889e-02f, 1.910836063e-02f, 7.079086732e-03f,
              -5.233601667e-03f, -2.883156529e-03f, -1.746387803e-03f, 6.980282487e-04f},
    /* Q6 */ {-1.802313328e-02f, 1.794599555e-02f, 3.732174402e-03f, -5.947053432e-03f,
              -7.159141242e-04f, 6.369662588e-04f, 1.731987140e-04f, 1.704738133e-05f}};
#define KERN__ERF_XMAX 3.99999976f /* the float below 4 */

/* BEGIN GENERATED kern_tmpl.py: kern_math isa=scalar,avx2,avx512,neon — do not edit */
/* ---- scalar ---- */
/* exp(y) for y <= 0 as ps * 2^-64, ps = p 2^(n+64) (exact: a power of two
 * times p). The caller forms (m ps) 2^-64, so m exp(y) is rounded at most
 * twice and correctly scaled into the subnormal range; ps is exactly 0 for
 * y < ~-132.4 (then m exp(y) = +-0 for finite m and NaN for infinite m).
 * The _lo form adds ylo, a small correction, to the reduced argument
 * (y + ylo is the argument to better than f32). */
KERN__AINLINE float kern__s_expneg_core(float y, float ylo, int has_lo) {
    float nf, n, r, r2, q, p;
    y = kern__s_max((KERN__M_EXPNEG_LO), y); /* NaN passes (second operand) */
    nf = kern__s_fma(y, (KERN__M_LOG2E), (KERN__M_MAGIC191));
    n = ((nf) - ((KERN__M_MAGIC191)));
    r = kern__s_fma(n, (-KERN__M_LN2HI), y); /* exact */
    r = kern__s_fma(n, (-KERN__M_LN2LO), r);
    if (has_lo) r = ((r) + (ylo));
    r2 = kern__s_mul(r, r);
    q = kern__s_fma((KERN__M_EXP_P4), r, (KERN__M_EXP_P3));
    q = kern__s_fma(q, r, (KERN__M_EXP_P2));
    q = kern__s_fma(q, r, (KERN__M_EXP_P1));
    q = kern__s_fma(q, r, (KERN__M_EXP_P0));
    p = ((kern__s_fma(q, r2, r)) + ((1.0f)));
    return kern__s_mul(p, kern__bits_f32((uint32_t)(kern__s_ishl(((int32_t)kern__f32_bits(nf)), 23)))); /* exponent field 191 + n */
}
KERN__AINLINE float kern__s_expneg_ps(float y) { return kern__s_expneg_core(y, y, 0); }
KERN__AINLINE float kern__s_expneg_ps_lo(float y, float ylo) {
    return kern__s_expneg_core(y, ylo, 1);
}
/* (m ps) 2^-64 = m exp(y). */
KERN__AINLINE float kern__s_expneg_apply(float m, float ps) {
    return kern__s_mul(kern__s_mul(m, ps), (KERN__M_TWOM64));
}
/* exp(y), y <= 0. */
KERN__AINLINE float kern__s_expneg(float y) {
    return kern__s_mul(kern__s_expneg_ps(y), (KERN__M_TWOM64));
}

/* p 2^n for integer n in [-152, 128] (n as a float and as the bits of
 * nf = n + MAGIC), rounded once: the first factor keeps p 2^n1 normal. */
KERN__AINLINE float kern__s_scale2(float p, float n, float nf) {
    int32_t ni = kern__s_isub(((int32_t)kern__f32_bits(nf)), ((int32_t)(0x4B400000)));
    int32_t n1 = kern__s_isra(ni, 1);
    int32_t n2 = kern__s_isub(ni, n1);
    float s1 = kern__bits_f32((uint32_t)(kern__s_ishl(kern__s_iadd(n1, ((int32_t)(127))), 23)));
    float s2 = kern__bits_f32((uint32_t)(kern__s_ishl(kern__s_iadd(n2, ((int32_t)(127))), 23)));
    (void)n;
    return kern__s_mul(kern__s_mul(p, s1), s2);
}

/* e^x over the whole f32 range. */
KERN__AINLINE float kern__s_exp(float x) {
    float nf, n, r, r2, q, p;
    x = kern__s_min((KERN__M_EXP_HI), kern__s_max((KERN__M_EXP_LO), x));
    nf = kern__s_fma(x, (KERN__M_LOG2E), (KERN__M_MAGIC));
    n = ((nf) - ((KERN__M_MAGIC)));
    r = kern__s_fma(n, (-KERN__M_LN2HI), x);
    r = kern__s_fma(n, (-KERN__M_LN2LO), r);
    r2 = kern__s_mul(r, r);
    q = kern__s_fma((KERN__M_EXP_P4), r, (KERN__M_EXP_P3));
    q = kern__s_fma(q, r, (KERN__M_EXP_P2));
    q = kern__s_fma(q, r, (KERN__M_EXP_P1));
    q = kern__s_fma(q, r, (KERN__M_EXP_P0));
    p = ((kern__s_fma(q, r2, r)) + ((1.0f)));
    return kern__s_scale2(p, n, nf);
}

/* 2^f, |f| <= 1/2. */
KERN__AINLINE float kern__s_exp2_poly(float f) {
    float q = kern__s_fma((KERN__M_EXP2_Q5), f, (KERN__M_EXP2_Q4));
    q = kern__s_fma(q, f, (KERN__M_EXP2_Q3));
    q = kern__s_fma(q, f, (KERN__M_EXP2_Q2));
    q = kern__s_fma(q, f, (KERN__M_EXP2_Q1));
    q = kern__s_fma(q, f, (KERN__M_EXP2_Q0));
    return kern__s_fma(q, f, (1.0f));
}
/* 2^x over the whole f32 range. */
KERN__AINLINE float kern__s_exp2(float x) {
    float nf, n;
    x = kern__s_min((128.0f), kern__s_max((-151.0f), x));
    nf = ((x) + ((KERN__M_MAGIC)));
    n = ((nf) - ((KERN__M_MAGIC)));
    return kern__s_scale2(kern__s_exp2_poly(((x) - (n))), n, nf);
}
/* 2^x for softmax (x <= 127; after max subtraction x <= 0): one exponent
 * field scale, results below 2^-126.5 flush to 0 and exp2(-Inf) = 0. */
KERN__AINLINE float kern__s_exp2_neg(float x) {
    float y = kern__s_max((-127.0f), x);
    float nf = ((y) + ((KERN__M_MAGIC127)));
    float n = ((nf) - ((KERN__M_MAGIC127)));
    float p = kern__s_exp2_poly(((y) - (n)));
    return kern__s_mul(p, kern__bits_f32((uint32_t)(kern__s_ishl(((int32_t)kern__f32_bits(nf)), 23)))); /* 2^n, 0 for n = -127 */
}

/* erf: 8 intervals of width 1/2 on [0, 4) (kern__m_erf_tab), sign or-ed
 * back, |x| clamped to the float below 4 where the last interval gives 1. */
KERN__AINLINE float kern__s_erf(float x) {
    float ax = kern__s_min((3.99999976f), kern__s_abs(x));
    int32_t k = kern__s_cvtt(((ax) + (ax)));
    float t = ((ax) - (((kern__m_erf_tab[0])[(k) & 7])));
    float q = ((kern__m_erf_tab[9])[(k) & 7]);
    q = kern__s_fma(q, t, ((kern__m_erf_tab[8])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_erf_tab[7])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_erf_tab[6])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_erf_tab[5])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_erf_tab[4])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_erf_tab[3])[(k) & 7]));
    q = kern__s_fma(t, q, kern__s_fma(t, ((kern__m_erf_tab[2])[(k) & 7]), ((kern__m_erf_tab[1])[(k) & 7])));
    return kern__s_orf(q, kern__s_andf(x, (-0.0f)));
}

/* tanh: |x| + |x| s T(s) below 0.625, else 1 - 2w/(1 + w), w = exp(-2|x|);
 * the sign of x or-ed back last (tanh(-0) = -0). */
KERN__AINLINE float kern__s_tanh(float x) {
    float ax = kern__s_abs(x), s = kern__s_mul(x, x), q, w, l;
    int small = ((ax) < ((0.625f)));
    q = kern__s_fma((KERN__M_TANH_T4), s, (KERN__M_TANH_T3));
    q = kern__s_fma(q, s, (KERN__M_TANH_T2));
    q = kern__s_fma(q, s, (KERN__M_TANH_T1));
    q = kern__s_fma(q, s, (KERN__M_TANH_T0));
    q = kern__s_fma(ax, kern__s_mul(q, s), ax);
    w = kern__s_expneg(kern__s_mul(ax, (-2.0f)));
    l = (((1.0f)) - (((((w) + (w))) / (((w) + ((1.0f)))))));
    return kern__s_orf(((small) ? (q) : (l)), kern__s_andf(x, (-0.0f)));
}

/* sigmoid(x) = (x >= 0 ? 1 : w) / (1 + w), w = exp(-|x|). */
KERN__AINLINE float kern__s_sigmoid(float x) {
    float w = kern__s_expneg(kern__s_orf(x, (-0.0f)));
    float num = ((((x) >= (0.0f))) ? ((1.0f)) : (w));
    return ((num) / ((((1.0f)) + (w))));
}

/* silu(x) = x sigmoid(x): q = x / (1 + w), and for x < 0 q w with the
 * exponent applied last (subnormal results rounded once). */
KERN__AINLINE float kern__s_silu(float x) {
    float ps = kern__s_expneg_ps(kern__s_orf(x, (-0.0f)));
    float w = kern__s_mul(ps, (KERN__M_TWOM64));
    float q = ((x) / ((((1.0f)) + (w))));
    return ((((x) < (0.0f))) ? (kern__s_expneg_apply(q, ps)) : (q));
}
/* silu'(x) = s (1 + x (1 - s)), s = sigmoid(x), d = 1 + w, i = 1/d:
 * x >= 0: i + (x i i) w;  x < 0: (i (1 + x i)) w. x is clamped where w is
 * already 0 so the multipliers stay finite; +-Inf give NaN (torch). */
KERN__AINLINE float kern__s_silu_grad(float x) {
    float ps, w, i, xc, m, e;
    int neg = ((x) < (0.0f));
    ps = kern__s_expneg_ps(kern__s_orf(x, (-0.0f)));
    w = kern__s_mul(ps, (KERN__M_TWOM64));
    i = (((1.0f)) / ((((1.0f)) + (w))));
    xc = kern__s_min((140.0f), kern__s_max((-140.0f), x));
    m = ((neg) ? (kern__s_mul(i, kern__s_fma(xc, i, (1.0f)))) : (kern__s_mul(kern__s_mul(xc, i), i)));
    m = ((m) + (((x) - (x)))); /* NaN for +-Inf */
    e = kern__s_expneg_apply(m, ps);
    return ((neg) ? (e) : (((i) + (e))));
}

/* Phi(x) for x >= -3 (table, kern__m_gelu_tab); x is clamped to 5.9,
 * where Phi rounds to 1. */
KERN__AINLINE float kern__s_gelu_phi(float x) {
    float xc = kern__s_min((KERN__M_GELU_HI), kern__s_max((KERN__M_GELU_LO), x));
    float sc = ((((x) < (0.0f))) ? ((KERN__M_GELU_NEG_SCALE)) : ((KERN__M_GELU_POS_SCALE)));
    int32_t k = kern__s_cvtt(kern__s_fma(xc, sc, (4.0f)));
    float t = ((xc) - (((kern__m_gelu_tab[0])[(k) & 7])));
    float q = ((kern__m_gelu_tab[9])[(k) & 7]);
    q = kern__s_fma(q, t, ((kern__m_gelu_tab[8])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_gelu_tab[7])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_gelu_tab[6])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_gelu_tab[5])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_gelu_tab[4])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_gelu_tab[3])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_gelu_tab[2])[(k) & 7]));
    return kern__s_fma(q, t, ((kern__m_gelu_tab[1])[(k) & 7]));
}
/* x < -3: g(a) = exp(a^2/2) Q(a), a = min(-x, 16.5) (kern__m_mills_tab),
 * and p, s of exp(-a^2/2) with a^2 split exactly (a a = hi + lo). */
KERN__AINLINE float kern__s_gelu_mills(float a) {
    int32_t k = kern__s_isrl(((int32_t)kern__f32_bits(a)), 22);
    float t = ((a) - (((kern__m_mills_tab[0])[(k) & 7])));
    float q = ((kern__m_mills_tab[8])[(k) & 7]);
    q = kern__s_fma(q, t, ((kern__m_mills_tab[7])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_mills_tab[6])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_mills_tab[5])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_mills_tab[4])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_mills_tab[3])[(k) & 7]));
    q = kern__s_fma(q, t, ((kern__m_mills_tab[2])[(k) & 7]));
    return kern__s_fma(q, t, ((kern__m_mills_tab[1])[(k) & 7]));
}
KERN__AINLINE float kern__s_gauss_ps(float a) {
    float hi = kern__s_mul(a, a);
    float lo = kern__s_fma(a, a, -(hi));
    return kern__s_expneg_ps_lo(kern__s_mul(hi, (-0.5f)), kern__s_mul(lo, (-0.5f)));
}

/* GELU (erf): x Phi(x). x >= -3: x times the table Phi; x < -3 (rare in
 * practice: a vector computes it only when one of its lanes needs it):
 * ((x g(a)) exp(-x^2/2)), relative accuracy down to the underflow. */
KERN__AINLINE float kern__s_gelu(float x) {
    float r = kern__s_mul(x, kern__s_gelu_phi(x));
    int tail = ((x) < ((KERN__M_GELU_LO)));
    if ((tail)) {
        float a = kern__s_min((KERN__M_MILLS_AMAX), kern__s_abs(x));
        float ps = kern__s_gauss_ps(a);
        r = ((tail) ? (kern__s_expneg_apply(kern__s_mul(x, kern__s_gelu_mills(a)), ps)) : (r));
    }
    return r;
}
/* GELU (erf) gradient: Phi(x) + x phi(x), phi(x) = exp(-x^2/2)/sqrt(2 pi);
 * for x < -3 (g(a) + x/sqrt(2 pi)) exp(-x^2/2) in one piece. */
KERN__AINLINE float kern__s_gelu_grad(float x) {
    float a = kern__s_min((KERN__M_MILLS_AMAX), kern__s_abs(x));
    int tail = ((x) < ((KERN__M_GELU_LO)));
    float ps = kern__s_gauss_ps(a);
    float r = ((kern__s_gelu_phi(x)) + (kern__s_expneg_apply(kern__s_mul(x, (KERN__M_INV_SQRT_2PI)), ps)));
    if ((tail)) {
        float m = kern__s_fma(x, (KERN__M_INV_SQRT_2PI), kern__s_gelu_mills(a));
        r = ((tail) ? (kern__s_expneg_apply(m, ps)) : (r));
    }
    return r;
}

/* GELU (tanh): x sigmoid(v), v = 2u = x (C1 + C2 x^2): q = x / (1 + w),
 * w = exp(-|v|), and for x < 0 q w with the exponent applied last. */
KERN__AINLINE float kern__s_gelu_tanh(float x) {
    float v = kern__s_mul(x, kern__s_fma(kern__s_mul(x, x), (KERN__M_GT_C2), (KERN__M_GT_C1)));
    float ps = kern__s_expneg_ps(kern__s_orf(v, (-0.0f)));
    float w = kern__s_mul(ps, (KERN__M_TWOM64));
    float q = ((x) / ((((1.0f)) + (w))));
    return ((((x) < (0.0f))) ? (kern__s_expneg_apply(q, ps)) : (q));
}
/* Its gradient: sigmoid(v) + x sigmoid(v) (1 - sigmoid(v)) v',
 * v' = C1 + 3 C2 x^2; as silu_grad with x v' in place of x (x clamped to
 * +-64 in the multipliers: w is 0 long before, so |x| up to FLT_MAX stays
 * finite; +-Inf give NaN as torch). */
KERN__AINLINE float kern__s_gelu_tanh_grad(float x) {
    float x2 = kern__s_mul(x, x);
    float v = kern__s_mul(x, kern__s_fma(x2, (KERN__M_GT_C2), (KERN__M_GT_C1)));
    float xc = kern__s_min((64.0f), kern__s_max((-64.0f), x));
    float xd = kern__s_mul(xc, kern__s_fma(kern__s_mul(xc, xc), (KERN__M_GT_C2X3), (KERN__M_GT_C1)));
    float ps, w, i, m, e;
    int neg = ((x) < (0.0f));
    ps = kern__s_expneg_ps(kern__s_orf(v, (-0.0f)));
    w = kern__s_mul(ps, (KERN__M_TWOM64));
    i = (((1.0f)) / ((((1.0f)) + (w))));
    m = ((neg) ? (kern__s_mul(i, kern__s_fma(xd, i, (1.0f)))) : (kern__s_mul(kern__s_mul(xd, i), i)));
    m = ((m) + (((x) - (x)))); /* NaN for +-Inf */
    e = kern__s_expneg_apply(m, ps);
    return ((neg) ? (e) : (((i) + (e))));
}

/* relu: max(x, 0) with NaN kept (second operand) and relu(-0) = -0. */
KERN__AINLINE float kern__s_relu(float x) { return kern__s_max(0.0f, x); }

/* The activation of the shared kern_act vocabulary. With a constant act
 * (see KERN__ACT_DISPATCH) the switch folds away. */
KERN__AINLINE float kern__s_act(float x, kern_act act) {
    switch (act) {
    case KERN_ACT_GELU: return kern__s_gelu(x);
    case KERN_ACT_GELU_TANH: return kern__s_gelu_tanh(x);
    case KERN_ACT_RELU: return kern__s_relu(x);
    case KERN_ACT_SILU: return kern__s_silu(x);
    default: return x;
    }
}
/* d act / dx (KERN_ACT_NONE: 1; RELU: 1 for x > 0, else 0). */
KERN__AINLINE float kern__s_act_grad(float x, kern_act act) {
    switch (act) {
    case KERN_ACT_GELU: return kern__s_gelu_grad(x);
    case KERN_ACT_GELU_TANH: return kern__s_gelu_tanh_grad(x);
    case KERN_ACT_RELU: return ((((x) > (0.0f))) ? ((1.0f)) : (0.0f));
    case KERN_ACT_SILU: return kern__s_silu_grad(x);
    default: return (1.0f);
    }
}

/* y[i] = act(x[i]) for n floats (x == y allowed); the tail is a masked
 * vector, so every element gets the same bits as the scalar twin. */
static inline void kern__s_act_row(const float *x, float *y, int64_t n, kern_act act) {
    int64_t i = 0;
    switch (act) {
#define KERN__ACT_ROW_CASE(A)                                                  \
    case A:                                                                    \
        for (; i + 1 <= n; i += 1) (*(float *)(y + i) = (kern__s_act((*(const float *)(x + i)), A))); \
        if (i < n) (*(float *)(y + i) = (kern__s_act((*(const float *)(x + i)), A))); \
        break;
    KERN__ACT_ROW_CASE(KERN_ACT_GELU)
    KERN__ACT_ROW_CASE(KERN_ACT_GELU_TANH)
    KERN__ACT_ROW_CASE(KERN_ACT_RELU)
    KERN__ACT_ROW_CASE(KERN_ACT_SILU)
#undef KERN__ACT_ROW_CASE
    default:
        if (x != y) memmove(y, x, sizeof(float) * (size_t)n);
        break;
    }
}
#ifdef KERN_X86
/* ---- avx2 ---- */
/* exp(y) for y <= 0 as ps * 2^-64, ps = p 2^(n+64) (exact: a power of two
 * times p). The caller forms (m ps) 2^-64, so m exp(y) is rounded at most
 * twice and correctly scaled into the subnormal range; ps is exactly 0 for
 * y < ~-132.4 (then m exp(y) = +-0 for finite m and NaN for infinite m).
 * The _lo form adds ylo, a small correction, to the reduced argument
 * (y + ylo is the argument to better than f32). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_expneg_core__avx2(__m256 y, __m256 ylo, int has_lo) {
    __m256 nf, n, r, r2, q, p;
    y = _mm256_max_ps(_mm256_set1_ps(KERN__M_EXPNEG_LO), y); /* NaN passes (second operand) */
    nf = _mm256_fmadd_ps(y, _mm256_set1_ps(KERN__M_LOG2E), _mm256_set1_ps(KERN__M_MAGIC191));
    n = _mm256_sub_ps(nf, _mm256_set1_ps(KERN__M_MAGIC191));
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-KERN__M_LN2HI), y); /* exact */
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-KERN__M_LN2LO), r);
    if (has_lo) r = _mm256_add_ps(r, ylo);
    r2 = kern__mul__avx2(r, r);
    q = _mm256_fmadd_ps(_mm256_set1_ps(KERN__M_EXP_P4), r, _mm256_set1_ps(KERN__M_EXP_P3));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(KERN__M_EXP_P2));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(KERN__M_EXP_P1));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(KERN__M_EXP_P0));
    p = _mm256_add_ps(_mm256_fmadd_ps(q, r2, r), _mm256_set1_ps(1.0f));
    return kern__mul__avx2(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(nf), 23))); /* exponent field 191 + n */
}
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_expneg_ps__avx2(__m256 y) { return kern__v_expneg_core__avx2(y, y, 0); }
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_expneg_ps_lo__avx2(__m256 y, __m256 ylo) {
    return kern__v_expneg_core__avx2(y, ylo, 1);
}
/* (m ps) 2^-64 = m exp(y). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_expneg_apply__avx2(__m256 m, __m256 ps) {
    return kern__mul__avx2(kern__mul__avx2(m, ps), _mm256_set1_ps(KERN__M_TWOM64));
}
/* exp(y), y <= 0. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_expneg__avx2(__m256 y) {
    return kern__mul__avx2(kern__v_expneg_ps__avx2(y), _mm256_set1_ps(KERN__M_TWOM64));
}

/* p 2^n for integer n in [-152, 128] (n as a float and as the bits of
 * nf = n + MAGIC), rounded once: the first factor keeps p 2^n1 normal. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_scale2__avx2(__m256 p, __m256 n, __m256 nf) {
    __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(nf), _mm256_set1_epi32(0x4B400000));
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    (void)n;
    return kern__mul__avx2(kern__mul__avx2(p, s1), s2);
}

/* e^x over the whole f32 range. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_exp__avx2(__m256 x) {
    __m256 nf, n, r, r2, q, p;
    x = _mm256_min_ps(_mm256_set1_ps(KERN__M_EXP_HI), _mm256_max_ps(_mm256_set1_ps(KERN__M_EXP_LO), x));
    nf = _mm256_fmadd_ps(x, _mm256_set1_ps(KERN__M_LOG2E), _mm256_set1_ps(KERN__M_MAGIC));
    n = _mm256_sub_ps(nf, _mm256_set1_ps(KERN__M_MAGIC));
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-KERN__M_LN2HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-KERN__M_LN2LO), r);
    r2 = kern__mul__avx2(r, r);
    q = _mm256_fmadd_ps(_mm256_set1_ps(KERN__M_EXP_P4), r, _mm256_set1_ps(KERN__M_EXP_P3));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(KERN__M_EXP_P2));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(KERN__M_EXP_P1));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(KERN__M_EXP_P0));
    p = _mm256_add_ps(_mm256_fmadd_ps(q, r2, r), _mm256_set1_ps(1.0f));
    return kern__v_scale2__avx2(p, n, nf);
}

/* 2^f, |f| <= 1/2. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_exp2_poly__avx2(__m256 f) {
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(KERN__M_EXP2_Q5), f, _mm256_set1_ps(KERN__M_EXP2_Q4));
    q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(KERN__M_EXP2_Q3));
    q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(KERN__M_EXP2_Q2));
    q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(KERN__M_EXP2_Q1));
    q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(KERN__M_EXP2_Q0));
    return _mm256_fmadd_ps(q, f, _mm256_set1_ps(1.0f));
}
/* 2^x over the whole f32 range. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_exp2__avx2(__m256 x) {
    __m256 nf, n;
    x = _mm256_min_ps(_mm256_set1_ps(128.0f), _mm256_max_ps(_mm256_set1_ps(-151.0f), x));
    nf = _mm256_add_ps(x, _mm256_set1_ps(KERN__M_MAGIC));
    n = _mm256_sub_ps(nf, _mm256_set1_ps(KERN__M_MAGIC));
    return kern__v_scale2__avx2(kern__v_exp2_poly__avx2(_mm256_sub_ps(x, n)), n, nf);
}
/* 2^x for softmax (x <= 127; after max subtraction x <= 0): one exponent
 * field scale, results below 2^-126.5 flush to 0 and exp2(-Inf) = 0. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_exp2_neg__avx2(__m256 x) {
    __m256 y = _mm256_max_ps(_mm256_set1_ps(-127.0f), x);
    __m256 nf = _mm256_add_ps(y, _mm256_set1_ps(KERN__M_MAGIC127));
    __m256 n = _mm256_sub_ps(nf, _mm256_set1_ps(KERN__M_MAGIC127));
    __m256 p = kern__v_exp2_poly__avx2(_mm256_sub_ps(y, n));
    return kern__mul__avx2(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(nf), 23))); /* 2^n, 0 for n = -127 */
}

/* erf: 8 intervals of width 1/2 on [0, 4) (kern__m_erf_tab), sign or-ed
 * back, |x| clamped to the float below 4 where the last interval gives 1. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_erf__avx2(__m256 x) {
    __m256 ax = _mm256_min_ps(_mm256_set1_ps(3.99999976f), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x));
    __m256i k = _mm256_cvttps_epi32(_mm256_add_ps(ax, ax));
    __m256 t = _mm256_sub_ps(ax, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_erf_tab[0]), k));
    __m256 q = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_erf_tab[9]), k);
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_erf_tab[8]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_erf_tab[7]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_erf_tab[6]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_erf_tab[5]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_erf_tab[4]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_erf_tab[3]), k));
    q = _mm256_fmadd_ps(t, q, _mm256_fmadd_ps(t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_erf_tab[2]), k), _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_erf_tab[1]), k)));
    return _mm256_or_ps(q, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)));
}

/* tanh: |x| + |x| s T(s) below 0.625, else 1 - 2w/(1 + w), w = exp(-2|x|);
 * the sign of x or-ed back last (tanh(-0) = -0). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_tanh__avx2(__m256 x) {
    __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), s = kern__mul__avx2(x, x), q, w, l;
    __m256 small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ);
    q = _mm256_fmadd_ps(_mm256_set1_ps(KERN__M_TANH_T4), s, _mm256_set1_ps(KERN__M_TANH_T3));
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(KERN__M_TANH_T2));
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(KERN__M_TANH_T1));
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(KERN__M_TANH_T0));
    q = _mm256_fmadd_ps(ax, kern__mul__avx2(q, s), ax);
    w = kern__v_expneg__avx2(kern__mul__avx2(ax, _mm256_set1_ps(-2.0f)));
    l = _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_div_ps(_mm256_add_ps(w, w), _mm256_add_ps(w, _mm256_set1_ps(1.0f))));
    return _mm256_or_ps(_mm256_blendv_ps(l, q, small), _mm256_and_ps(x, _mm256_set1_ps(-0.0f)));
}

/* sigmoid(x) = (x >= 0 ? 1 : w) / (1 + w), w = exp(-|x|). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_sigmoid__avx2(__m256 x) {
    __m256 w = kern__v_expneg__avx2(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
    __m256 num = _mm256_blendv_ps(w, _mm256_set1_ps(1.0f), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ));
    return _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), w));
}

/* silu(x) = x sigmoid(x): q = x / (1 + w), and for x < 0 q w with the
 * exponent applied last (subnormal results rounded once). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_silu__avx2(__m256 x) {
    __m256 ps = kern__v_expneg_ps__avx2(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
    __m256 w = kern__mul__avx2(ps, _mm256_set1_ps(KERN__M_TWOM64));
    __m256 q = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), w));
    return _mm256_blendv_ps(q, kern__v_expneg_apply__avx2(q, ps), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}
/* silu'(x) = s (1 + x (1 - s)), s = sigmoid(x), d = 1 + w, i = 1/d:
 * x >= 0: i + (x i i) w;  x < 0: (i (1 + x i)) w. x is clamped where w is
 * already 0 so the multipliers stay finite; +-Inf give NaN (torch). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_silu_grad__avx2(__m256 x) {
    __m256 ps, w, i, xc, m, e;
    __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    ps = kern__v_expneg_ps__avx2(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
    w = kern__mul__avx2(ps, _mm256_set1_ps(KERN__M_TWOM64));
    i = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), w));
    xc = _mm256_min_ps(_mm256_set1_ps(140.0f), _mm256_max_ps(_mm256_set1_ps(-140.0f), x));
    m = _mm256_blendv_ps(kern__mul__avx2(kern__mul__avx2(xc, i), i), kern__mul__avx2(i, _mm256_fmadd_ps(xc, i, _mm256_set1_ps(1.0f))), neg);
    m = _mm256_add_ps(m, _mm256_sub_ps(x, x)); /* NaN for +-Inf */
    e = kern__v_expneg_apply__avx2(m, ps);
    return _mm256_blendv_ps(_mm256_add_ps(i, e), e, neg);
}

/* Phi(x) for x >= -3 (table, kern__m_gelu_tab); x is clamped to 5.9,
 * where Phi rounds to 1. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_gelu_phi__avx2(__m256 x) {
    __m256 xc = _mm256_min_ps(_mm256_set1_ps(KERN__M_GELU_HI), _mm256_max_ps(_mm256_set1_ps(KERN__M_GELU_LO), x));
    __m256 sc = _mm256_blendv_ps(_mm256_set1_ps(KERN__M_GELU_POS_SCALE), _mm256_set1_ps(KERN__M_GELU_NEG_SCALE), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    __m256i k = _mm256_cvttps_epi32(_mm256_fmadd_ps(xc, sc, _mm256_set1_ps(4.0f)));
    __m256 t = _mm256_sub_ps(xc, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_gelu_tab[0]), k));
    __m256 q = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_gelu_tab[9]), k);
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_gelu_tab[8]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_gelu_tab[7]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_gelu_tab[6]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_gelu_tab[5]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_gelu_tab[4]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_gelu_tab[3]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_gelu_tab[2]), k));
    return _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_gelu_tab[1]), k));
}
/* x < -3: g(a) = exp(a^2/2) Q(a), a = min(-x, 16.5) (kern__m_mills_tab),
 * and p, s of exp(-a^2/2) with a^2 split exactly (a a = hi + lo). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_gelu_mills__avx2(__m256 a) {
    __m256i k = _mm256_srli_epi32(_mm256_castps_si256(a), 22);
    __m256 t = _mm256_sub_ps(a, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_mills_tab[0]), k));
    __m256 q = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_mills_tab[8]), k);
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_mills_tab[7]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_mills_tab[6]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_mills_tab[5]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_mills_tab[4]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_mills_tab[3]), k));
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_mills_tab[2]), k));
    return _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kern__m_mills_tab[1]), k));
}
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_gauss_ps__avx2(__m256 a) {
    __m256 hi = kern__mul__avx2(a, a);
    __m256 lo = _mm256_fmsub_ps(a, a, hi);
    return kern__v_expneg_ps_lo__avx2(kern__mul__avx2(hi, _mm256_set1_ps(-0.5f)), kern__mul__avx2(lo, _mm256_set1_ps(-0.5f)));
}

/* GELU (erf): x Phi(x). x >= -3: x times the table Phi; x < -3 (rare in
 * practice: a vector computes it only when one of its lanes needs it):
 * ((x g(a)) exp(-x^2/2)), relative accuracy down to the underflow. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_gelu__avx2(__m256 x) {
    __m256 r = kern__mul__avx2(x, kern__v_gelu_phi__avx2(x));
    __m256 tail = _mm256_cmp_ps(x, _mm256_set1_ps(KERN__M_GELU_LO), _CMP_LT_OQ);
    if ((_mm256_movemask_ps(tail) != 0)) {
        __m256 a = _mm256_min_ps(_mm256_set1_ps(KERN__M_MILLS_AMAX), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x));
        __m256 ps = kern__v_gauss_ps__avx2(a);
        r = _mm256_blendv_ps(r, kern__v_expneg_apply__avx2(kern__mul__avx2(x, kern__v_gelu_mills__avx2(a)), ps), tail);
    }
    return r;
}
/* GELU (erf) gradient: Phi(x) + x phi(x), phi(x) = exp(-x^2/2)/sqrt(2 pi);
 * for x < -3 (g(a) + x/sqrt(2 pi)) exp(-x^2/2) in one piece. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_gelu_grad__avx2(__m256 x) {
    __m256 a = _mm256_min_ps(_mm256_set1_ps(KERN__M_MILLS_AMAX), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x));
    __m256 tail = _mm256_cmp_ps(x, _mm256_set1_ps(KERN__M_GELU_LO), _CMP_LT_OQ);
    __m256 ps = kern__v_gauss_ps__avx2(a);
    __m256 r = _mm256_add_ps(kern__v_gelu_phi__avx2(x), kern__v_expneg_apply__avx2(kern__mul__avx2(x, _mm256_set1_ps(KERN__M_INV_SQRT_2PI)), ps));
    if ((_mm256_movemask_ps(tail) != 0)) {
        __m256 m = _mm256_fmadd_ps(x, _mm256_set1_ps(KERN__M_INV_SQRT_2PI), kern__v_gelu_mills__avx2(a));
        r = _mm256_blendv_ps(r, kern__v_expneg_apply__avx2(m, ps), tail);
    }
    return r;
}

/* GELU (tanh): x sigmoid(v), v = 2u = x (C1 + C2 x^2): q = x / (1 + w),
 * w = exp(-|v|), and for x < 0 q w with the exponent applied last. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_gelu_tanh__avx2(__m256 x) {
    __m256 v = kern__mul__avx2(x, _mm256_fmadd_ps(kern__mul__avx2(x, x), _mm256_set1_ps(KERN__M_GT_C2), _mm256_set1_ps(KERN__M_GT_C1)));
    __m256 ps = kern__v_expneg_ps__avx2(_mm256_or_ps(v, _mm256_set1_ps(-0.0f)));
    __m256 w = kern__mul__avx2(ps, _mm256_set1_ps(KERN__M_TWOM64));
    __m256 q = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), w));
    return _mm256_blendv_ps(q, kern__v_expneg_apply__avx2(q, ps), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}
/* Its gradient: sigmoid(v) + x sigmoid(v) (1 - sigmoid(v)) v',
 * v' = C1 + 3 C2 x^2; as silu_grad with x v' in place of x (x clamped to
 * +-64 in the multipliers: w is 0 long before, so |x| up to FLT_MAX stays
 * finite; +-Inf give NaN as torch). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_gelu_tanh_grad__avx2(__m256 x) {
    __m256 x2 = kern__mul__avx2(x, x);
    __m256 v = kern__mul__avx2(x, _mm256_fmadd_ps(x2, _mm256_set1_ps(KERN__M_GT_C2), _mm256_set1_ps(KERN__M_GT_C1)));
    __m256 xc = _mm256_min_ps(_mm256_set1_ps(64.0f), _mm256_max_ps(_mm256_set1_ps(-64.0f), x));
    __m256 xd = kern__mul__avx2(xc, _mm256_fmadd_ps(kern__mul__avx2(xc, xc), _mm256_set1_ps(KERN__M_GT_C2X3), _mm256_set1_ps(KERN__M_GT_C1)));
    __m256 ps, w, i, m, e;
    __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    ps = kern__v_expneg_ps__avx2(_mm256_or_ps(v, _mm256_set1_ps(-0.0f)));
    w = kern__mul__avx2(ps, _mm256_set1_ps(KERN__M_TWOM64));
    i = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), w));
    m = _mm256_blendv_ps(kern__mul__avx2(kern__mul__avx2(xd, i), i), kern__mul__avx2(i, _mm256_fmadd_ps(xd, i, _mm256_set1_ps(1.0f))), neg);
    m = _mm256_add_ps(m, _mm256_sub_ps(x, x)); /* NaN for +-Inf */
    e = kern__v_expneg_apply__avx2(m, ps);
    return _mm256_blendv_ps(_mm256_add_ps(i, e), e, neg);
}

/* relu: max(x, 0) with NaN kept (second operand) and relu(-0) = -0. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_relu__avx2(__m256 x) { return _mm256_max_ps(_mm256_setzero_ps(), x); }

/* The activation of the shared kern_act vocabulary. With a constant act
 * (see KERN__ACT_DISPATCH) the switch folds away. */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_act__avx2(__m256 x, kern_act act) {
    switch (act) {
    case KERN_ACT_GELU: return kern__v_gelu__avx2(x);
    case KERN_ACT_GELU_TANH: return kern__v_gelu_tanh__avx2(x);
    case KERN_ACT_RELU: return kern__v_relu__avx2(x);
    case KERN_ACT_SILU: return kern__v_silu__avx2(x);
    default: return x;
    }
}
/* d act / dx (KERN_ACT_NONE: 1; RELU: 1 for x > 0, else 0). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_act_grad__avx2(__m256 x, kern_act act) {
    switch (act) {
    case KERN_ACT_GELU: return kern__v_gelu_grad__avx2(x);
    case KERN_ACT_GELU_TANH: return kern__v_gelu_tanh_grad__avx2(x);
    case KERN_ACT_RELU: return _mm256_blendv_ps(_mm256_setzero_ps(), _mm256_set1_ps(1.0f), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
    case KERN_ACT_SILU: return kern__v_silu_grad__avx2(x);
    default: return _mm256_set1_ps(1.0f);
    }
}

/* y[i] = act(x[i]) for n floats (x == y allowed); the tail is a masked
 * vector, so every element gets the same bits as the scalar twin. */
KERN_TARGET_AVX2 static inline void kern__v_act_row__avx2(const float *x, float *y, int64_t n, kern_act act) {
    int64_t i = 0;
    switch (act) {
#define KERN__ACT_ROW_CASE(A)                                                  \
    case A:                                                                    \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, kern__v_act__avx2(_mm256_loadu_ps(x + i), A)); \
        if (i < n) kern__storen__avx2(y + i, kern__v_act__avx2(kern__loadn__avx2(x + i, (int)(n - i)), A), (int)(n - i)); \
        break;
    KERN__ACT_ROW_CASE(KERN_ACT_GELU)
    KERN__ACT_ROW_CASE(KERN_ACT_GELU_TANH)
    KERN__ACT_ROW_CASE(KERN_ACT_RELU)
    KERN__ACT_ROW_CASE(KERN_ACT_SILU)
#undef KERN__ACT_ROW_CASE
    default:
        if (x != y) memmove(y, x, sizeof(float) * (size_t)n);
        break;
    }
}
/* ---- avx512 ---- */
/* exp(y) for y <= 0 as ps * 2^-64, ps = p 2^(n+64) (exact: a power of two
 * times p). The caller forms (m ps) 2^-64, so m exp(y) is rounded at most
 * twice and correctly scaled into the subnormal range; ps is exactly 0 for
 * y < ~-132.4 (then m exp(y) = +-0 for finite m and NaN for infinite m).
 * The _lo form adds ylo, a small correction, to the reduced argument
 * (y + ylo is the argument to better than f32). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_expneg_core__avx512(__m512 y, __m512 ylo, int has_lo) {
    __m512 nf, n, r, r2, q, p;
    y = _mm512_max_ps(_mm512_set1_ps(KERN__M_EXPNEG_LO), y); /* NaN passes (second operand) */
    nf = _mm512_fmadd_ps(y, _mm512_set1_ps(KERN__M_LOG2E), _mm512_set1_ps(KERN__M_MAGIC191));
    n = _mm512_sub_ps(nf, _mm512_set1_ps(KERN__M_MAGIC191));
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-KERN__M_LN2HI), y); /* exact */
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-KERN__M_LN2LO), r);
    if (has_lo) r = _mm512_add_ps(r, ylo);
    r2 = kern__mul__avx512(r, r);
    q = _mm512_fmadd_ps(_mm512_set1_ps(KERN__M_EXP_P4), r, _mm512_set1_ps(KERN__M_EXP_P3));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(KERN__M_EXP_P2));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(KERN__M_EXP_P1));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(KERN__M_EXP_P0));
    p = _mm512_add_ps(_mm512_fmadd_ps(q, r2, r), _mm512_set1_ps(1.0f));
    return kern__mul__avx512(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(nf), 23))); /* exponent field 191 + n */
}
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_expneg_ps__avx512(__m512 y) { return kern__v_expneg_core__avx512(y, y, 0); }
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_expneg_ps_lo__avx512(__m512 y, __m512 ylo) {
    return kern__v_expneg_core__avx512(y, ylo, 1);
}
/* (m ps) 2^-64 = m exp(y). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_expneg_apply__avx512(__m512 m, __m512 ps) {
    return kern__mul__avx512(kern__mul__avx512(m, ps), _mm512_set1_ps(KERN__M_TWOM64));
}
/* exp(y), y <= 0. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_expneg__avx512(__m512 y) {
    return kern__mul__avx512(kern__v_expneg_ps__avx512(y), _mm512_set1_ps(KERN__M_TWOM64));
}

/* p 2^n for integer n in [-152, 128] (n as a float and as the bits of
 * nf = n + MAGIC), rounded once: the first factor keeps p 2^n1 normal. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_scale2__avx512(__m512 p, __m512 n, __m512 nf) {
    (void)nf;
    return _mm512_scalef_ps(p, n); /* the same single rounding */
}

/* e^x over the whole f32 range. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_exp__avx512(__m512 x) {
    __m512 nf, n, r, r2, q, p;
    x = _mm512_min_ps(_mm512_set1_ps(KERN__M_EXP_HI), _mm512_max_ps(_mm512_set1_ps(KERN__M_EXP_LO), x));
    nf = _mm512_fmadd_ps(x, _mm512_set1_ps(KERN__M_LOG2E), _mm512_set1_ps(KERN__M_MAGIC));
    n = _mm512_sub_ps(nf, _mm512_set1_ps(KERN__M_MAGIC));
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-KERN__M_LN2HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-KERN__M_LN2LO), r);
    r2 = kern__mul__avx512(r, r);
    q = _mm512_fmadd_ps(_mm512_set1_ps(KERN__M_EXP_P4), r, _mm512_set1_ps(KERN__M_EXP_P3));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(KERN__M_EXP_P2));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(KERN__M_EXP_P1));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(KERN__M_EXP_P0));
    p = _mm512_add_ps(_mm512_fmadd_ps(q, r2, r), _mm512_set1_ps(1.0f));
    return kern__v_scale2__avx512(p, n, nf);
}

/* 2^f, |f| <= 1/2. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_exp2_poly__avx512(__m512 f) {
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(KERN__M_EXP2_Q5), f, _mm512_set1_ps(KERN__M_EXP2_Q4));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(KERN__M_EXP2_Q3));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(KERN__M_EXP2_Q2));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(KERN__M_EXP2_Q1));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(KERN__M_EXP2_Q0));
    return _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.0f));
}
/* 2^x over the whole f32 range. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_exp2__avx512(__m512 x) {
    __m512 nf, n;
    x = _mm512_min_ps(_mm512_set1_ps(128.0f), _mm512_max_ps(_mm512_set1_ps(-151.0f), x));
    nf = _mm512_add_ps(x, _mm512_set1_ps(KERN__M_MAGIC));
    n = _mm512_sub_ps(nf, _mm512_set1_ps(KERN__M_MAGIC));
    return kern__v_scale2__avx512(kern__v_exp2_poly__avx512(_mm512_sub_ps(x, n)), n, nf);
}
/* 2^x for softmax (x <= 127; after max subtraction x <= 0): one exponent
 * field scale, results below 2^-126.5 flush to 0 and exp2(-Inf) = 0. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_exp2_neg__avx512(__m512 x) {
    __m512 y = _mm512_max_ps(_mm512_set1_ps(-127.0f), x);
    __m512 nf = _mm512_add_ps(y, _mm512_set1_ps(KERN__M_MAGIC127));
    __m512 n = _mm512_sub_ps(nf, _mm512_set1_ps(KERN__M_MAGIC127));
    __m512 p = kern__v_exp2_poly__avx512(_mm512_sub_ps(y, n));
    return kern__mul__avx512(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(nf), 23))); /* 2^n, 0 for n = -127 */
}

/* erf: 8 intervals of width 1/2 on [0, 4) (kern__m_erf_tab), sign or-ed
 * back, |x| clamped to the float below 4 where the last interval gives 1. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_erf__avx512(__m512 x) {
    __m512 ax = _mm512_min_ps(_mm512_set1_ps(3.99999976f), _mm512_abs_ps(x));
    __m512i k = _mm512_cvttps_epi32(_mm512_add_ps(ax, ax));
    __m512 t = _mm512_sub_ps(ax, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_erf_tab[0]))));
    __m512 q = _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_erf_tab[9])));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_erf_tab[8]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_erf_tab[7]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_erf_tab[6]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_erf_tab[5]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_erf_tab[4]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_erf_tab[3]))));
    q = _mm512_fmadd_ps(t, q, _mm512_fmadd_ps(t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_erf_tab[2]))), _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_erf_tab[1])))));
    return _mm512_or_ps(q, _mm512_and_ps(x, _mm512_set1_ps(-0.0f)));
}

/* tanh: |x| + |x| s T(s) below 0.625, else 1 - 2w/(1 + w), w = exp(-2|x|);
 * the sign of x or-ed back last (tanh(-0) = -0). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_tanh__avx512(__m512 x) {
    __m512 ax = _mm512_abs_ps(x), s = kern__mul__avx512(x, x), q, w, l;
    __mmask16 small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ);
    q = _mm512_fmadd_ps(_mm512_set1_ps(KERN__M_TANH_T4), s, _mm512_set1_ps(KERN__M_TANH_T3));
    q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(KERN__M_TANH_T2));
    q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(KERN__M_TANH_T1));
    q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(KERN__M_TANH_T0));
    q = _mm512_fmadd_ps(ax, kern__mul__avx512(q, s), ax);
    w = kern__v_expneg__avx512(kern__mul__avx512(ax, _mm512_set1_ps(-2.0f)));
    l = _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_div_ps(_mm512_add_ps(w, w), _mm512_add_ps(w, _mm512_set1_ps(1.0f))));
    return _mm512_or_ps(_mm512_mask_blend_ps(small, l, q), _mm512_and_ps(x, _mm512_set1_ps(-0.0f)));
}

/* sigmoid(x) = (x >= 0 ? 1 : w) / (1 + w), w = exp(-|x|). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_sigmoid__avx512(__m512 x) {
    __m512 w = kern__v_expneg__avx512(_mm512_or_ps(x, _mm512_set1_ps(-0.0f)));
    __m512 num = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), w, _mm512_set1_ps(1.0f));
    return _mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), w));
}

/* silu(x) = x sigmoid(x): q = x / (1 + w), and for x < 0 q w with the
 * exponent applied last (subnormal results rounded once). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_silu__avx512(__m512 x) {
    __m512 ps = kern__v_expneg_ps__avx512(_mm512_or_ps(x, _mm512_set1_ps(-0.0f)));
    __m512 w = kern__mul__avx512(ps, _mm512_set1_ps(KERN__M_TWOM64));
    __m512 q = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), w));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), q, kern__v_expneg_apply__avx512(q, ps));
}
/* silu'(x) = s (1 + x (1 - s)), s = sigmoid(x), d = 1 + w, i = 1/d:
 * x >= 0: i + (x i i) w;  x < 0: (i (1 + x i)) w. x is clamped where w is
 * already 0 so the multipliers stay finite; +-Inf give NaN (torch). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_silu_grad__avx512(__m512 x) {
    __m512 ps, w, i, xc, m, e;
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    ps = kern__v_expneg_ps__avx512(_mm512_or_ps(x, _mm512_set1_ps(-0.0f)));
    w = kern__mul__avx512(ps, _mm512_set1_ps(KERN__M_TWOM64));
    i = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), w));
    xc = _mm512_min_ps(_mm512_set1_ps(140.0f), _mm512_max_ps(_mm512_set1_ps(-140.0f), x));
    m = _mm512_mask_blend_ps(neg, kern__mul__avx512(kern__mul__avx512(xc, i), i), kern__mul__avx512(i, _mm512_fmadd_ps(xc, i, _mm512_set1_ps(1.0f))));
    m = _mm512_add_ps(m, _mm512_sub_ps(x, x)); /* NaN for +-Inf */
    e = kern__v_expneg_apply__avx512(m, ps);
    return _mm512_mask_blend_ps(neg, _mm512_add_ps(i, e), e);
}

/* Phi(x) for x >= -3 (table, kern__m_gelu_tab); x is clamped to 5.9,
 * where Phi rounds to 1. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_gelu_phi__avx512(__m512 x) {
    __m512 xc = _mm512_min_ps(_mm512_set1_ps(KERN__M_GELU_HI), _mm512_max_ps(_mm512_set1_ps(KERN__M_GELU_LO), x));
    __m512 sc = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_set1_ps(KERN__M_GELU_POS_SCALE), _mm512_set1_ps(KERN__M_GELU_NEG_SCALE));
    __m512i k = _mm512_cvttps_epi32(_mm512_fmadd_ps(xc, sc, _mm512_set1_ps(4.0f)));
    __m512 t = _mm512_sub_ps(xc, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_gelu_tab[0]))));
    __m512 q = _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_gelu_tab[9])));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_gelu_tab[8]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_gelu_tab[7]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_gelu_tab[6]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_gelu_tab[5]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_gelu_tab[4]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_gelu_tab[3]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_gelu_tab[2]))));
    return _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_gelu_tab[1]))));
}
/* x < -3: g(a) = exp(a^2/2) Q(a), a = min(-x, 16.5) (kern__m_mills_tab),
 * and p, s of exp(-a^2/2) with a^2 split exactly (a a = hi + lo). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_gelu_mills__avx512(__m512 a) {
    __m512i k = _mm512_srli_epi32(_mm512_castps_si512(a), 22);
    __m512 t = _mm512_sub_ps(a, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_mills_tab[0]))));
    __m512 q = _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_mills_tab[8])));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_mills_tab[7]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_mills_tab[6]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_mills_tab[5]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_mills_tab[4]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_mills_tab[3]))));
    q = _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_mills_tab[2]))));
    return _mm512_fmadd_ps(q, t, _mm512_permutexvar_ps(_mm512_and_si512(k, _mm512_set1_epi32(7)), _mm512_castps256_ps512(_mm256_loadu_ps(kern__m_mills_tab[1]))));
}
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_gauss_ps__avx512(__m512 a) {
    __m512 hi = kern__mul__avx512(a, a);
    __m512 lo = _mm512_fmsub_ps(a, a, hi);
    return kern__v_expneg_ps_lo__avx512(kern__mul__avx512(hi, _mm512_set1_ps(-0.5f)), kern__mul__avx512(lo, _mm512_set1_ps(-0.5f)));
}

/* GELU (erf): x Phi(x). x >= -3: x times the table Phi; x < -3 (rare in
 * practice: a vector computes it only when one of its lanes needs it):
 * ((x g(a)) exp(-x^2/2)), relative accuracy down to the underflow. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_gelu__avx512(__m512 x) {
    __m512 r = kern__mul__avx512(x, kern__v_gelu_phi__avx512(x));
    __mmask16 tail = _mm512_cmp_ps_mask(x, _mm512_set1_ps(KERN__M_GELU_LO), _CMP_LT_OQ);
    if (((tail) != 0)) {
        __m512 a = _mm512_min_ps(_mm512_set1_ps(KERN__M_MILLS_AMAX), _mm512_abs_ps(x));
        __m512 ps = kern__v_gauss_ps__avx512(a);
        r = _mm512_mask_blend_ps(tail, r, kern__v_expneg_apply__avx512(kern__mul__avx512(x, kern__v_gelu_mills__avx512(a)), ps));
    }
    return r;
}
/* GELU (erf) gradient: Phi(x) + x phi(x), phi(x) = exp(-x^2/2)/sqrt(2 pi);
 * for x < -3 (g(a) + x/sqrt(2 pi)) exp(-x^2/2) in one piece. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_gelu_grad__avx512(__m512 x) {
    __m512 a = _mm512_min_ps(_mm512_set1_ps(KERN__M_MILLS_AMAX), _mm512_abs_ps(x));
    __mmask16 tail = _mm512_cmp_ps_mask(x, _mm512_set1_ps(KERN__M_GELU_LO), _CMP_LT_OQ);
    __m512 ps = kern__v_gauss_ps__avx512(a);
    __m512 r = _mm512_add_ps(kern__v_gelu_phi__avx512(x), kern__v_expneg_apply__avx512(kern__mul__avx512(x, _mm512_set1_ps(KERN__M_INV_SQRT_2PI)), ps));
    if (((tail) != 0)) {
        __m512 m = _mm512_fmadd_ps(x, _mm512_set1_ps(KERN__M_INV_SQRT_2PI), kern__v_gelu_mills__avx512(a));
        r = _mm512_mask_blend_ps(tail, r, kern__v_expneg_apply__avx512(m, ps));
    }
    return r;
}

/* GELU (tanh): x sigmoid(v), v = 2u = x (C1 + C2 x^2): q = x / (1 + w),
 * w = exp(-|v|), and for x < 0 q w with the exponent applied last. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_gelu_tanh__avx512(__m512 x) {
    __m512 v = kern__mul__avx512(x, _mm512_fmadd_ps(kern__mul__avx512(x, x), _mm512_set1_ps(KERN__M_GT_C2), _mm512_set1_ps(KERN__M_GT_C1)));
    __m512 ps = kern__v_expneg_ps__avx512(_mm512_or_ps(v, _mm512_set1_ps(-0.0f)));
    __m512 w = kern__mul__avx512(ps, _mm512_set1_ps(KERN__M_TWOM64));
    __m512 q = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), w));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), q, kern__v_expneg_apply__avx512(q, ps));
}
/* Its gradient: sigmoid(v) + x sigmoid(v) (1 - sigmoid(v)) v',
 * v' = C1 + 3 C2 x^2; as silu_grad with x v' in place of x (x clamped to
 * +-64 in the multipliers: w is 0 long before, so |x| up to FLT_MAX stays
 * finite; +-Inf give NaN as torch). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_gelu_tanh_grad__avx512(__m512 x) {
    __m512 x2 = kern__mul__avx512(x, x);
    __m512 v = kern__mul__avx512(x, _mm512_fmadd_ps(x2, _mm512_set1_ps(KERN__M_GT_C2), _mm512_set1_ps(KERN__M_GT_C1)));
    __m512 xc = _mm512_min_ps(_mm512_set1_ps(64.0f), _mm512_max_ps(_mm512_set1_ps(-64.0f), x));
    __m512 xd = kern__mul__avx512(xc, _mm512_fmadd_ps(kern__mul__avx512(xc, xc), _mm512_set1_ps(KERN__M_GT_C2X3), _mm512_set1_ps(KERN__M_GT_C1)));
    __m512 ps, w, i, m, e;
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    ps = kern__v_expneg_ps__avx512(_mm512_or_ps(v, _mm512_set1_ps(-0.0f)));
    w = kern__mul__avx512(ps, _mm512_set1_ps(KERN__M_TWOM64));
    i = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), w));
    m = _mm512_mask_blend_ps(neg, kern__mul__avx512(kern__mul__avx512(xd, i), i), kern__mul__avx512(i, _mm512_fmadd_ps(xd, i, _mm512_set1_ps(1.0f))));
    m = _mm512_add_ps(m, _mm512_sub_ps(x, x)); /* NaN for +-Inf */
    e = kern__v_expneg_apply__avx512(m, ps);
    return _mm512_mask_blend_ps(neg, _mm512_add_ps(i, e), e);
}

/* relu: max(x, 0) with NaN kept (second operand) and relu(-0) = -0. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_relu__avx512(__m512 x) { return _mm512_max_ps(_mm512_setzero_ps(), x); }

/* The activation of the shared kern_act vocabulary. With a constant act
 * (see KERN__ACT_DISPATCH) the switch folds away. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_act__avx512(__m512 x, kern_act act) {
    switch (act) {
    case KERN_ACT_GELU: return kern__v_gelu__avx512(x);
    case KERN_ACT_GELU_TANH: return kern__v_gelu_tanh__avx512(x);
    case KERN_ACT_RELU: return kern__v_relu__avx512(x);
    case KERN_ACT_SILU: return kern__v_silu__avx512(x);
    default: return x;
    }
}
/* d act / dx (KERN_ACT_NONE: 1; RELU: 1 for x > 0, else 0). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_act_grad__avx512(__m512 x, kern_act act) {
    switch (act) {
    case KERN_ACT_GELU: return kern__v_gelu_grad__avx512(x);
    case KERN_ACT_GELU_TANH: return kern__v_gelu_tanh_grad__avx512(x);
    case KERN_ACT_RELU: return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ), _mm512_setzero_ps(), _mm512_set1_ps(1.0f));
    case KERN_ACT_SILU: return kern__v_silu_grad__avx512(x);
    default: return _mm512_set1_ps(1.0f);
    }
}

/* y[i] = act(x[i]) for n floats (x == y allowed); the tail is a masked
 * vector, so every element gets the same bits as the scalar twin. */
KERN_TARGET_AVX512 static inline void kern__v_act_row__avx512(const float *x, float *y, int64_t n, kern_act act) {
    int64_t i = 0;
    switch (act) {
#define KERN__ACT_ROW_CASE(A)                                                  \
    case A:                                                                    \
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, kern__v_act__avx512(_mm512_loadu_ps(x + i), A)); \
        if (i < n) kern__storen__avx512(y + i, kern__v_act__avx512(kern__loadn__avx512(x + i, (int)(n - i)), A), (int)(n - i)); \
        break;
    KERN__ACT_ROW_CASE(KERN_ACT_GELU)
    KERN__ACT_ROW_CASE(KERN_ACT_GELU_TANH)
    KERN__ACT_ROW_CASE(KERN_ACT_RELU)
    KERN__ACT_ROW_CASE(KERN_ACT_SILU)
#undef KERN__ACT_ROW_CASE
    default:
        if (x != y) memmove(y, x, sizeof(float) * (size_t)n);
        break;
    }
}
#endif /* KERN_X86 */
#ifdef KERN_NEON
/* ---- neon ---- */
/* exp(y) for y <= 0 as ps * 2^-64, ps = p 2^(n+64) (exact: a power of two
 * times p). The caller forms (m ps) 2^-64, so m exp(y) is rounded at most
 * twice and correctly scaled into the subnormal range; ps is exactly 0 for
 * y < ~-132.4 (then m exp(y) = +-0 for finite m and NaN for infinite m).
 * The _lo form adds ylo, a small correction, to the reduced argument
 * (y + ylo is the argument to better than f32). */
KERN__AINLINE float32x4_t kern__v_expneg_core__neon(float32x4_t y, float32x4_t ylo, int has_lo) {
    float32x4_t nf, n, r, r2, q, p;
    y = kern__max__neon(vdupq_n_f32(KERN__M_EXPNEG_LO), y); /* NaN passes (second operand) */
    nf = vfmaq_f32(vdupq_n_f32(KERN__M_MAGIC191), y, vdupq_n_f32(KERN__M_LOG2E));
    n = vsubq_f32(nf, vdupq_n_f32(KERN__M_MAGIC191));
    r = vfmaq_f32(y, n, vdupq_n_f32(-KERN__M_LN2HI)); /* exact */
    r = vfmaq_f32(r, n, vdupq_n_f32(-KERN__M_LN2LO));
    if (has_lo) r = vaddq_f32(r, ylo);
    r2 = kern__mul__neon(r, r);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP_P3), vdupq_n_f32(KERN__M_EXP_P4), r);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP_P2), q, r);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP_P1), q, r);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP_P0), q, r);
    p = vaddq_f32(vfmaq_f32(r, q, r2), vdupq_n_f32(1.0f));
    return kern__mul__neon(p, vreinterpretq_f32_s32(vshlq_n_s32(vreinterpretq_s32_f32(nf), 23))); /* exponent field 191 + n */
}
KERN__AINLINE float32x4_t kern__v_expneg_ps__neon(float32x4_t y) { return kern__v_expneg_core__neon(y, y, 0); }
KERN__AINLINE float32x4_t kern__v_expneg_ps_lo__neon(float32x4_t y, float32x4_t ylo) {
    return kern__v_expneg_core__neon(y, ylo, 1);
}
/* (m ps) 2^-64 = m exp(y). */
KERN__AINLINE float32x4_t kern__v_expneg_apply__neon(float32x4_t m, float32x4_t ps) {
    return kern__mul__neon(kern__mul__neon(m, ps), vdupq_n_f32(KERN__M_TWOM64));
}
/* exp(y), y <= 0. */
KERN__AINLINE float32x4_t kern__v_expneg__neon(float32x4_t y) {
    return kern__mul__neon(kern__v_expneg_ps__neon(y), vdupq_n_f32(KERN__M_TWOM64));
}

/* p 2^n for integer n in [-152, 128] (n as a float and as the bits of
 * nf = n + MAGIC), rounded once: the first factor keeps p 2^n1 normal. */
KERN__AINLINE float32x4_t kern__v_scale2__neon(float32x4_t p, float32x4_t n, float32x4_t nf) {
    int32x4_t ni = vsubq_s32(vreinterpretq_s32_f32(nf), vdupq_n_s32(0x4B400000));
    int32x4_t n1 = vshrq_n_s32(ni, 1);
    int32x4_t n2 = vsubq_s32(ni, n1);
    float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
    float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
    (void)n;
    return kern__mul__neon(kern__mul__neon(p, s1), s2);
}

/* e^x over the whole f32 range. */
KERN__AINLINE float32x4_t kern__v_exp__neon(float32x4_t x) {
    float32x4_t nf, n, r, r2, q, p;
    x = kern__min__neon(vdupq_n_f32(KERN__M_EXP_HI), kern__max__neon(vdupq_n_f32(KERN__M_EXP_LO), x));
    nf = vfmaq_f32(vdupq_n_f32(KERN__M_MAGIC), x, vdupq_n_f32(KERN__M_LOG2E));
    n = vsubq_f32(nf, vdupq_n_f32(KERN__M_MAGIC));
    r = vfmaq_f32(x, n, vdupq_n_f32(-KERN__M_LN2HI));
    r = vfmaq_f32(r, n, vdupq_n_f32(-KERN__M_LN2LO));
    r2 = kern__mul__neon(r, r);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP_P3), vdupq_n_f32(KERN__M_EXP_P4), r);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP_P2), q, r);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP_P1), q, r);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP_P0), q, r);
    p = vaddq_f32(vfmaq_f32(r, q, r2), vdupq_n_f32(1.0f));
    return kern__v_scale2__neon(p, n, nf);
}

/* 2^f, |f| <= 1/2. */
KERN__AINLINE float32x4_t kern__v_exp2_poly__neon(float32x4_t f) {
    float32x4_t q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP2_Q4), vdupq_n_f32(KERN__M_EXP2_Q5), f);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP2_Q3), q, f);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP2_Q2), q, f);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP2_Q1), q, f);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_EXP2_Q0), q, f);
    return vfmaq_f32(vdupq_n_f32(1.0f), q, f);
}
/* 2^x over the whole f32 range. */
KERN__AINLINE float32x4_t kern__v_exp2__neon(float32x4_t x) {
    float32x4_t nf, n;
    x = kern__min__neon(vdupq_n_f32(128.0f), kern__max__neon(vdupq_n_f32(-151.0f), x));
    nf = vaddq_f32(x, vdupq_n_f32(KERN__M_MAGIC));
    n = vsubq_f32(nf, vdupq_n_f32(KERN__M_MAGIC));
    return kern__v_scale2__neon(kern__v_exp2_poly__neon(vsubq_f32(x, n)), n, nf);
}
/* 2^x for softmax (x <= 127; after max subtraction x <= 0): one exponent
 * field scale, results below 2^-126.5 flush to 0 and exp2(-Inf) = 0. */
KERN__AINLINE float32x4_t kern__v_exp2_neg__neon(float32x4_t x) {
    float32x4_t y = kern__max__neon(vdupq_n_f32(-127.0f), x);
    float32x4_t nf = vaddq_f32(y, vdupq_n_f32(KERN__M_MAGIC127));
    float32x4_t n = vsubq_f32(nf, vdupq_n_f32(KERN__M_MAGIC127));
    float32x4_t p = kern__v_exp2_poly__neon(vsubq_f32(y, n));
    return kern__mul__neon(p, vreinterpretq_f32_s32(vshlq_n_s32(vreinterpretq_s32_f32(nf), 23))); /* 2^n, 0 for n = -127 */
}

/* erf: 8 intervals of width 1/2 on [0, 4) (kern__m_erf_tab), sign or-ed
 * back, |x| clamped to the float below 4 where the last interval gives 1. */
KERN__AINLINE float32x4_t kern__v_erf__neon(float32x4_t x) {
    float32x4_t ax = kern__min__neon(vdupq_n_f32(3.99999976f), vabsq_f32(x));
    int32x4_t k = vcvtq_s32_f32(vaddq_f32(ax, ax));
    float32x4_t t = vsubq_f32(ax, kern__lut8__neon(kern__m_erf_tab[0], k));
    float32x4_t q = kern__lut8__neon(kern__m_erf_tab[9], k);
    q = vfmaq_f32(kern__lut8__neon(kern__m_erf_tab[8], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_erf_tab[7], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_erf_tab[6], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_erf_tab[5], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_erf_tab[4], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_erf_tab[3], k), q, t);
    q = vfmaq_f32(vfmaq_f32(kern__lut8__neon(kern__m_erf_tab[1], k), t, kern__lut8__neon(kern__m_erf_tab[2], k)), t, q);
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(q), vreinterpretq_u32_f32(vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(x), vreinterpretq_u32_f32(vdupq_n_f32(-0.0f)))))));
}

/* tanh: |x| + |x| s T(s) below 0.625, else 1 - 2w/(1 + w), w = exp(-2|x|);
 * the sign of x or-ed back last (tanh(-0) = -0). */
KERN__AINLINE float32x4_t kern__v_tanh__neon(float32x4_t x) {
    float32x4_t ax = vabsq_f32(x), s = kern__mul__neon(x, x), q, w, l;
    uint32x4_t small = vcltq_f32(ax, vdupq_n_f32(0.625f));
    q = vfmaq_f32(vdupq_n_f32(KERN__M_TANH_T3), vdupq_n_f32(KERN__M_TANH_T4), s);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_TANH_T2), q, s);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_TANH_T1), q, s);
    q = vfmaq_f32(vdupq_n_f32(KERN__M_TANH_T0), q, s);
    q = vfmaq_f32(ax, ax, kern__mul__neon(q, s));
    w = kern__v_expneg__neon(kern__mul__neon(ax, vdupq_n_f32(-2.0f)));
    l = vsubq_f32(vdupq_n_f32(1.0f), vdivq_f32(vaddq_f32(w, w), vaddq_f32(w, vdupq_n_f32(1.0f))));
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(vbslq_f32(small, q, l)), vreinterpretq_u32_f32(vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(x), vreinterpretq_u32_f32(vdupq_n_f32(-0.0f)))))));
}

/* sigmoid(x) = (x >= 0 ? 1 : w) / (1 + w), w = exp(-|x|). */
KERN__AINLINE float32x4_t kern__v_sigmoid__neon(float32x4_t x) {
    float32x4_t w = kern__v_expneg__neon(vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(x), vreinterpretq_u32_f32(vdupq_n_f32(-0.0f)))));
    float32x4_t num = vbslq_f32(vcgeq_f32(x, vdupq_n_f32(0.0f)), vdupq_n_f32(1.0f), w);
    return vdivq_f32(num, vaddq_f32(vdupq_n_f32(1.0f), w));
}

/* silu(x) = x sigmoid(x): q = x / (1 + w), and for x < 0 q w with the
 * exponent applied last (subnormal results rounded once). */
KERN__AINLINE float32x4_t kern__v_silu__neon(float32x4_t x) {
    float32x4_t ps = kern__v_expneg_ps__neon(vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(x), vreinterpretq_u32_f32(vdupq_n_f32(-0.0f)))));
    float32x4_t w = kern__mul__neon(ps, vdupq_n_f32(KERN__M_TWOM64));
    float32x4_t q = vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), w));
    return vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), kern__v_expneg_apply__neon(q, ps), q);
}
/* silu'(x) = s (1 + x (1 - s)), s = sigmoid(x), d = 1 + w, i = 1/d:
 * x >= 0: i + (x i i) w;  x < 0: (i (1 + x i)) w. x is clamped where w is
 * already 0 so the multipliers stay finite; +-Inf give NaN (torch). */
KERN__AINLINE float32x4_t kern__v_silu_grad__neon(float32x4_t x) {
    float32x4_t ps, w, i, xc, m, e;
    uint32x4_t neg = vcltq_f32(x, vdupq_n_f32(0.0f));
    ps = kern__v_expneg_ps__neon(vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(x), vreinterpretq_u32_f32(vdupq_n_f32(-0.0f)))));
    w = kern__mul__neon(ps, vdupq_n_f32(KERN__M_TWOM64));
    i = vdivq_f32(vdupq_n_f32(1.0f), vaddq_f32(vdupq_n_f32(1.0f), w));
    xc = kern__min__neon(vdupq_n_f32(140.0f), kern__max__neon(vdupq_n_f32(-140.0f), x));
    m = vbslq_f32(neg, kern__mul__neon(i, vfmaq_f32(vdupq_n_f32(1.0f), xc, i)), kern__mul__neon(kern__mul__neon(xc, i), i));
    m = vaddq_f32(m, vsubq_f32(x, x)); /* NaN for +-Inf */
    e = kern__v_expneg_apply__neon(m, ps);
    return vbslq_f32(neg, e, vaddq_f32(i, e));
}

/* Phi(x) for x >= -3 (table, kern__m_gelu_tab); x is clamped to 5.9,
 * where Phi rounds to 1. */
KERN__AINLINE float32x4_t kern__v_gelu_phi__neon(float32x4_t x) {
    float32x4_t xc = kern__min__neon(vdupq_n_f32(KERN__M_GELU_HI), kern__max__neon(vdupq_n_f32(KERN__M_GELU_LO), x));
    float32x4_t sc = vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), vdupq_n_f32(KERN__M_GELU_NEG_SCALE), vdupq_n_f32(KERN__M_GELU_POS_SCALE));
    int32x4_t k = vcvtq_s32_f32(vfmaq_f32(vdupq_n_f32(4.0f), xc, sc));
    float32x4_t t = vsubq_f32(xc, kern__lut8__neon(kern__m_gelu_tab[0], k));
    float32x4_t q = kern__lut8__neon(kern__m_gelu_tab[9], k);
    q = vfmaq_f32(kern__lut8__neon(kern__m_gelu_tab[8], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_gelu_tab[7], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_gelu_tab[6], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_gelu_tab[5], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_gelu_tab[4], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_gelu_tab[3], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_gelu_tab[2], k), q, t);
    return vfmaq_f32(kern__lut8__neon(kern__m_gelu_tab[1], k), q, t);
}
/* x < -3: g(a) = exp(a^2/2) Q(a), a = min(-x, 16.5) (kern__m_mills_tab),
 * and p, s of exp(-a^2/2) with a^2 split exactly (a a = hi + lo). */
KERN__AINLINE float32x4_t kern__v_gelu_mills__neon(float32x4_t a) {
    int32x4_t k = vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(vreinterpretq_s32_f32(a)), 22));
    float32x4_t t = vsubq_f32(a, kern__lut8__neon(kern__m_mills_tab[0], k));
    float32x4_t q = kern__lut8__neon(kern__m_mills_tab[8], k);
    q = vfmaq_f32(kern__lut8__neon(kern__m_mills_tab[7], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_mills_tab[6], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_mills_tab[5], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_mills_tab[4], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_mills_tab[3], k), q, t);
    q = vfmaq_f32(kern__lut8__neon(kern__m_mills_tab[2], k), q, t);
    return vfmaq_f32(kern__lut8__neon(kern__m_mills_tab[1], k), q, t);
}
KERN__AINLINE float32x4_t kern__v_gauss_ps__neon(float32x4_t a) {
    float32x4_t hi = kern__mul__neon(a, a);
    float32x4_t lo = vnegq_f32(vfmsq_f32(hi, a, a));
    return kern__v_expneg_ps_lo__neon(kern__mul__neon(hi, vdupq_n_f32(-0.5f)), kern__mul__neon(lo, vdupq_n_f32(-0.5f)));
}

/* GELU (erf): x Phi(x). x >= -3: x times the table Phi; x < -3 (rare in
 * practice: a vector computes it only when one of its lanes needs it):
 * ((x g(a)) exp(-x^2/2)), relative accuracy down to the underflow. */
KERN__AINLINE float32x4_t kern__v_gelu__neon(float32x4_t x) {
    float32x4_t r = kern__mul__neon(x, kern__v_gelu_phi__neon(x));
    uint32x4_t tail = vcltq_f32(x, vdupq_n_f32(KERN__M_GELU_LO));
    if ((vmaxvq_u32(tail) != 0)) {
        float32x4_t a = kern__min__neon(vdupq_n_f32(KERN__M_MILLS_AMAX), vabsq_f32(x));
        float32x4_t ps = kern__v_gauss_ps__neon(a);
        r = vbslq_f32(tail, kern__v_expneg_apply__neon(kern__mul__neon(x, kern__v_gelu_mills__neon(a)), ps), r);
    }
    return r;
}
/* GELU (erf) gradient: Phi(x) + x phi(x), phi(x) = exp(-x^2/2)/sqrt(2 pi);
 * for x < -3 (g(a) + x/sqrt(2 pi)) exp(-x^2/2) in one piece. */
KERN__AINLINE float32x4_t kern__v_gelu_grad__neon(float32x4_t x) {
    float32x4_t a = kern__min__neon(vdupq_n_f32(KERN__M_MILLS_AMAX), vabsq_f32(x));
    uint32x4_t tail = vcltq_f32(x, vdupq_n_f32(KERN__M_GELU_LO));
    float32x4_t ps = kern__v_gauss_ps__neon(a);
    float32x4_t r = vaddq_f32(kern__v_gelu_phi__neon(x), kern__v_expneg_apply__neon(kern__mul__neon(x, vdupq_n_f32(KERN__M_INV_SQRT_2PI)), ps));
    if ((vmaxvq_u32(tail) != 0)) {
        float32x4_t m = vfmaq_f32(kern__v_gelu_mills__neon(a), x, vdupq_n_f32(KERN__M_INV_SQRT_2PI));
        r = vbslq_f32(tail, kern__v_expneg_apply__neon(m, ps), r);
    }
    return r;
}

/* GELU (tanh): x sigmoid(v), v = 2u = x (C1 + C2 x^2): q = x / (1 + w),
 * w = exp(-|v|), and for x < 0 q w with the exponent applied last. */
KERN__AINLINE float32x4_t kern__v_gelu_tanh__neon(float32x4_t x) {
    float32x4_t v = kern__mul__neon(x, vfmaq_f32(vdupq_n_f32(KERN__M_GT_C1), kern__mul__neon(x, x), vdupq_n_f32(KERN__M_GT_C2)));
    float32x4_t ps = kern__v_expneg_ps__neon(vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(v), vreinterpretq_u32_f32(vdupq_n_f32(-0.0f)))));
    float32x4_t w = kern__mul__neon(ps, vdupq_n_f32(KERN__M_TWOM64));
    float32x4_t q = vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), w));
    return vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), kern__v_expneg_apply__neon(q, ps), q);
}
/* Its gradient: sigmoid(v) + x sigmoid(v) (1 - sigmoid(v)) v',
 * v' = C1 + 3 C2 x^2; as silu_grad with x v' in place of x (x clamped to
 * +-64 in the multipliers: w is 0 long before, so |x| up to FLT_MAX stays
 * finite; +-Inf give NaN as torch). */
KERN__AINLINE float32x4_t kern__v_gelu_tanh_grad__neon(float32x4_t x) {
    float32x4_t x2 = kern__mul__neon(x, x);
    float32x4_t v = kern__mul__neon(x, vfmaq_f32(vdupq_n_f32(KERN__M_GT_C1), x2, vdupq_n_f32(KERN__M_GT_C2)));
    float32x4_t xc = kern__min__neon(vdupq_n_f32(64.0f), kern__max__neon(vdupq_n_f32(-64.0f), x));
    float32x4_t xd = kern__mul__neon(xc, vfmaq_f32(vdupq_n_f32(KERN__M_GT_C1), kern__mul__neon(xc, xc), vdupq_n_f32(KERN__M_GT_C2X3)));
    float32x4_t ps, w, i, m, e;
    uint32x4_t neg = vcltq_f32(x, vdupq_n_f32(0.0f));
    ps = kern__v_expneg_ps__neon(vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(v), vreinterpretq_u32_f32(vdupq_n_f32(-0.0f)))));
    w = kern__mul__neon(ps, vdupq_n_f32(KERN__M_TWOM64));
    i = vdivq_f32(vdupq_n_f32(1.0f), vaddq_f32(vdupq_n_f32(1.0f), w));
    m = vbslq_f32(neg, kern__mul__neon(i, vfmaq_f32(vdupq_n_f32(1.0f), xd, i)), kern__mul__neon(kern__mul__neon(xd, i), i));
    m = vaddq_f32(m, vsubq_f32(x, x)); /* NaN for +-Inf */
    e = kern__v_expneg_apply__neon(m, ps);
    return vbslq_f32(neg, e, vaddq_f32(i, e));
}

/* relu: max(x, 0) with NaN kept (second operand) and relu(-0) = -0. */
KERN__AINLINE float32x4_t kern__v_relu__neon(float32x4_t x) { return kern__max__neon(vdupq_n_f32(0.0f), x); }

/* The activation of the shared kern_act vocabulary. With a constant act
 * (see KERN__ACT_DISPATCH) the switch folds away. */
KERN__AINLINE float32x4_t kern__v_act__neon(float32x4_t x, kern_act act) {
    switch (act) {
    case KERN_ACT_GELU: return kern__v_gelu__neon(x);
    case KERN_ACT_GELU_TANH: return kern__v_gelu_tanh__neon(x);
    case KERN_ACT_RELU: return kern__v_relu__neon(x);
    case KERN_ACT_SILU: return kern__v_silu__neon(x);
    default: return x;
    }
}
/* d act / dx (KERN_ACT_NONE: 1; RELU: 1 for x > 0, else 0). */
KERN__AINLINE float32x4_t kern__v_act_grad__neon(float32x4_t x, kern_act act) {
    switch (act) {
    case KERN_ACT_GELU: return kern__v_gelu_grad__neon(x);
    case KERN_ACT_GELU_TANH: return kern__v_gelu_tanh_grad__neon(x);
    case KERN_ACT_RELU: return vbslq_f32(vcgtq_f32(x, vdupq_n_f32(0.0f)), vdupq_n_f32(1.0f), vdupq_n_f32(0.0f));
    case KERN_ACT_SILU: return kern__v_silu_grad__neon(x);
    default: return vdupq_n_f32(1.0f);
    }
}

/* y[i] = act(x[i]) for n floats (x == y allowed); the tail is a masked
 * vector, so every element gets the same bits as the scalar twin. */
static inline void kern__v_act_row__neon(const float *x, float *y, int64_t n, kern_act act) {
    int64_t i = 0;
    switch (act) {
#define KERN__ACT_ROW_CASE(A)                                                  \
    case A:                                                                    \
        for (; i + 4 <= n; i += 4) vst1q_f32(y + i, kern__v_act__neon(vld1q_f32(x + i), A)); \
        if (i < n) kern__storen__neon(y + i, kern__v_act__neon(kern__loadn__neon(x + i, (int)(n - i)), A), (int)(n - i)); \
        break;
    KERN__ACT_ROW_CASE(KERN_ACT_GELU)
    KERN__ACT_ROW_CASE(KERN_ACT_GELU_TANH)
    KERN__ACT_ROW_CASE(KERN_ACT_RELU)
    KERN__ACT_ROW_CASE(KERN_ACT_SILU)
#undef KERN__ACT_ROW_CASE
    default:
        if (x != y) memmove(y, x, sizeof(float) * (size_t)n);
        break;
    }
}
#endif /* KERN_NEON */
/* END GENERATED */

/* kern_act_f32: the shared layer's scalar activation (declared with kern_act) */
KERN_API float kern_act_f32(kern_act act, float x) { return kern__s_act(x, act); }

/* Hoists the activation switch out of a hot loop: CALL(A) is expanded once
 * per activation with A a constant, e.g.
 *     #define ROW(A) my_row__avx2(x, y, n, A);
 *     KERN__ACT_DISPATCH(act, ROW)
 * where my_row__avx2 is always_inline and calls kern__v_act__avx2(v, A). */
#define KERN__ACT_DISPATCH(act, CALL)                                         \
    switch (act) {                                                            \
    case KERN_ACT_GELU: CALL(KERN_ACT_GELU) break;                            \
    case KERN_ACT_GELU_TANH: CALL(KERN_ACT_GELU_TANH) break;                  \
    case KERN_ACT_RELU: CALL(KERN_ACT_RELU) break;                            \
    case KERN_ACT_SILU: CALL(KERN_ACT_SILU) break;                            \
    default: CALL(KERN_ACT_NONE) break;                                       \
    }

/* BEGIN GENERATED kern_tmpl.py: kern_epi isa=scalar,avx2,avx512,neon — do not edit */
/* ---- scalar ---- */
/* 1-wide operand access with any element stride (unit: the fast path). */
KERN__AINLINE float kern__s_ld_strided(const char *p, kern_dtype dt, int64_t cs, int n) {
    if (cs == 1 || n <= 1) return kern__s_load_f32(p, dt, n);
    {
        float t[1];
        int64_t es = (int64_t)kern_dtype_size(dt);
        int k;
        for (k = 0; k < 1; k++) t[k] = k < n ? kern__s_load_f32(p + k * cs * es, dt, 1) : 0.0f;
        return (*(const float *)(t));
    }
}
KERN__AINLINE void kern__s_st_strided(char *p, kern_dtype dt, int64_t cs, float v, int n, int nt) {
    if (cs == 1 || n <= 1) {
        kern__s_store_f32(p, dt, v, n, nt);
    } else {
        float t[1];
        int64_t es = (int64_t)kern_dtype_size(dt);
        int k;
        (*(float *)(t) = (v));
        for (k = 0; k < n && k < 1; k++) kern__s_store_f32(p + k * cs * es, dt, t[k], 1, 0);
    }
}

/* Rows i0 .. i0 + m - 1, columns j0 .. j0 + n - 1 of the output from the
 * tile t (row stride ldt; see kern__epi), with the activation, `unit`
 * (every operand has unit column stride) and `f32` (every operand f32, no
 * streaming stores) constants after inlining, so the common case runs
 * without the per-vector stride and dtype branches. The row-invariant work
 * (sizes, broadcasts, operand addresses) is done once per call and kept in
 * locals: a tile row is only a few vectors, and stores through dst may
 * alias *e. */
KERN__AINLINE void kern__s_epi_rows_core(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                       int64_t ldt, int m, int n, kern_act act, int unit,
                                                       int f32) {
    const float va = (e->alpha), vb = (e->beta), vo = (e->out_scale);
    const kern_dtype sdt = f32 ? KERN_F32 : e->src_dt, bdt = f32 ? KERN_F32 : e->bias_dt;
    const kern_dtype rdt = f32 ? KERN_F32 : e->res_dt, ddt = f32 ? KERN_F32 : e->dst_dt;
    const int64_t ssz = (int64_t)kern_dtype_size(sdt), dsz = (int64_t)kern_dtype_size(ddt);
    const int64_t rsz = (int64_t)kern_dtype_size(rdt), bsz = (int64_t)kern_dtype_size(bdt);
    const int64_t scs = e->src_cs, bst = e->bias_st, rcs = e->res_cs, dcs = e->dst_cs;
    const int64_t srs = e->src_rs * ssz, rrs = e->res_rs * rsz, drs = e->dst_rs * dsz;
    const char *const src = e->src ? e->src + (i0 * e->src_rs + (j0 - e->src_j0) * scs) * ssz : NULL;
    const char *const bias = e->bias && !e->bias_per_row ? e->bias + j0 * bst * bsz : NULL;
    const char *const bias_row = e->bias && e->bias_per_row ? e->bias + i0 * bst * bsz : NULL;
    const char *const res = e->res ? e->res + (i0 * e->res_rs + j0 * rcs) * rsz : NULL;
    char *const dst = e->dst + (i0 * e->dst_rs + (j0 - e->dst_j0) * dcs) * dsz;
    const int nt = f32 ? 0 : e->nt;
    int r, j;
    for (r = 0; r < m; r++) {
        const float *acc = t + r * ldt;
        const char *sp = src ? src + r * srs : NULL, *rp = res ? res + r * rrs : NULL;
        char *dp = dst + r * drs;
        const float brow = bias_row ? (kern__s_load_f32(bias_row + r * bst * bsz, bdt, 1)) : 0.0f;
        for (j = 0; j < n; j += 1) {
            const int nn = n - j < 1 ? n - j : 1;
            float v = kern__s_mul(va, nn == 1 ? (*(const float *)(acc + j)) : (*(const float *)(acc + j)));
            if (unit) {
                if (sp) v = kern__s_fma(vb, kern__s_load_f32(sp + j * ssz, sdt, nn), v);
                if (bias) v = ((v) + (kern__s_load_f32(bias + j * bsz, bdt, nn)));
                else if (bias_row) v = ((v) + (brow));
                v = kern__s_act(v, act);
                if (rp) v = ((v) + (kern__s_load_f32(rp + j * rsz, rdt, nn)));
                v = kern__s_mul(v, vo);
                kern__s_store_f32(dp + j * dsz, ddt, v, nn, nt && nn == 1);
            } else {
                if (sp) v = kern__s_fma(vb, kern__s_ld_strided(sp + j * scs * ssz, sdt, scs, nn), v);
                if (bias) v = ((v) + (kern__s_ld_strided(bias + j * bst * bsz, bdt, bst, nn)));
                else if (bias_row) v = ((v) + (brow));
                v = kern__s_act(v, act);
                if (rp) v = ((v) + (kern__s_ld_strided(rp + j * rcs * rsz, rdt, rcs, nn)));
                v = kern__s_mul(v, vo);
                kern__s_st_strided(dp + j * dcs * dsz, ddt, dcs, v, nn, nt && nn == 1);
            }
        }
    }
}
KERN__AINLINE void kern__s_epi_rows_act(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                      int64_t ldt, int m, int n, kern_act act) {
    const int unit = (!e->src || e->src_cs == 1) && (!e->bias || e->bias_per_row || e->bias_st == 1) &&
                     (!e->res || e->res_cs == 1) && e->dst_cs == 1;
    const int f32 = (!e->src || e->src_dt == KERN_F32) && (!e->bias || e->bias_dt == KERN_F32) &&
                    (!e->res || e->res_dt == KERN_F32) && e->dst_dt == KERN_F32 && !e->nt;
    if (unit && f32) kern__s_epi_rows_core(e, i0, j0, t, ldt, m, n, act, 1, 1);
    else if (unit) kern__s_epi_rows_core(e, i0, j0, t, ldt, m, n, act, 1, 0);
    else kern__s_epi_rows_core(e, i0, j0, t, ldt, m, n, act, 0, 0);
}
/* Columns j0 .. j0 + n - 1 of output row i from acc[0 .. n). */
KERN__AINLINE void kern__s_epi_row_act(const kern__epi *e, int64_t i, int64_t j0,
                                                     const float *acc, int n, kern_act act) {
    kern__s_epi_rows_act(e, i, j0, acc, 0, 1, n, act);
}
/* One output row. */
static inline void kern__s_epi_row(const kern__epi *e, int64_t i, int64_t j0, const float *acc,
                                                 int n) {
#define KERN__EPI_ROW(A) kern__s_epi_rows_act(e, i, j0, acc, 0, 1, n, A);
    KERN__ACT_DISPATCH(e->act, KERN__EPI_ROW)
#undef KERN__EPI_ROW
}
/* The gated store (e->glu): tile columns j0 .. j0 + n - 1 are glu groups
 * (j0 a multiple of 2 KERN_GLU_GROUP); each group's w gates and w ups
 * become w output columns from (j0 + c) / 2, in the order of the plain
 * store: alpha, beta src, bias, act (the gate only), gate * up, residual,
 * out_scale. Every operand through the strided accessors (unit stride is
 * their fast path): this runs once per output element of a GEMM. */
KERN__AINLINE void kern__s_epi_glu_rows(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                      int64_t ldt, int m, int n, kern_act act) {
    const float va = (e->alpha), vb = (e->beta), vo = (e->out_scale);
    const int64_t ssz = (int64_t)kern_dtype_size(e->src_dt), dsz = (int64_t)kern_dtype_size(e->dst_dt);
    const int64_t rsz = (int64_t)kern_dtype_size(e->res_dt), bsz = (int64_t)kern_dtype_size(e->bias_dt);
    int r, c, q;
    for (r = 0; r < m; r++) {
        const int64_t i = i0 + r;
        const float *acc = t + r * ldt;
        const float brow = e->bias && e->bias_per_row ? (kern__s_load_f32(e->bias + i * e->bias_st * bsz, e->bias_dt, 1)) : 0.0f;
        for (c = 0; c < n; c += 2 * KERN_GLU_GROUP) {
            const int w = (n - c < 2 * KERN_GLU_GROUP ? n - c : 2 * KERN_GLU_GROUP) / 2;
            const int64_t jg = j0 + c, jo = jg / 2;
            for (q = 0; q < w; q += 1) {
                const int nn = w - q < 1 ? w - q : 1;
                float g = kern__s_mul(va, (*(const float *)(acc + c + q))), u = kern__s_mul(va, (*(const float *)(acc + c + w + q))), v;
                if (e->src) {
                    const char *sp = e->src + (i * e->src_rs + (jg + q - e->src_j0) * e->src_cs) * ssz;
                    g = kern__s_fma(vb, kern__s_ld_strided(sp, e->src_dt, e->src_cs, nn), g);
                    u = kern__s_fma(vb, kern__s_ld_strided(sp + w * e->src_cs * ssz, e->src_dt, e->src_cs, nn), u);
                }
                if (e->bias && !e->bias_per_row) {
                    const char *bp = e->bias + (jg + q) * e->bias_st * bsz;
                    g = ((g) + (kern__s_ld_strided(bp, e->bias_dt, e->bias_st, nn)));
                    u = ((u) + (kern__s_ld_strided(bp + w * e->bias_st * bsz, e->bias_dt, e->bias_st, nn)));
                } else if (e->bias) {
                    g = ((g) + (brow));
                    u = ((u) + (brow));
                }
                v = kern__s_mul(kern__s_act(g, act), u);
                if (e->res)
                    v = ((v) + (kern__s_ld_strided(e->res + (i * e->res_rs + (jo + q) * e->res_cs) * rsz,
                                                         e->res_dt, e->res_cs, nn)));
                v = kern__s_mul(v, vo);
                kern__s_st_strided(e->dst + (i * e->dst_rs + (jo + q - e->dst_j0) * e->dst_cs) * dsz,
                                        e->dst_dt, e->dst_cs, v, nn, 0);
            }
        }
    }
}
/* The m x n top-left corner of tile t (row stride ldt) to output rows
 * i0.., columns j0.. (the store of kern_gemm's microkernel contract). */
static inline void kern__s_epi_tile(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                  int64_t ldt, int m, int n) {
    if (e->glu) {
#define KERN__EPI_GLU(A) kern__s_epi_glu_rows(e, i0, j0, t, ldt, m, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__EPI_GLU)
#undef KERN__EPI_GLU
        return;
    }
#define KERN__EPI_TILE(A) kern__s_epi_rows_act(e, i0, j0, t, ldt, m, n, A);
    KERN__ACT_DISPATCH(e->act, KERN__EPI_TILE)
#undef KERN__EPI_TILE
}

/* max |v| over the finite values of n elements (0 if none); *nonfinite
 * (may be NULL) gets the count of the others. Exact on every ISA. */
static inline float kern__s_absmax(const void *x, kern_dtype dt, int64_t n, int64_t *nonfinite) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    float m = 0.0f;
    int64_t bad = 0, i;
    for (i = 0; i < n; i += 1) {
        const int nn = n - i < 1 ? (int)(n - i) : 1;
        float a = kern__s_abs(kern__s_load_f32(p + i * es, dt, nn));
        int fin = ((a) < ((INFINITY)));
        m = kern__s_max(m, ((fin) ? (a) : (0.0f)));
        if (!(fin)) bad += ((!(fin))); /* lanes past nn load as 0 */
    }
    if (nonfinite) *nonfinite = bad;
    return (m);
}
/* q[k] = clamp(rne(x[k] * inv), lo - zp, hi - zp) + zp as bytes, NaN -> zp
 * (the rule above: lo, hi = -127, 127, zp = 0 symmetric; 0, 255 u8). */
static inline void kern__s_quant_row(const void *x, kern_dtype dt, int64_t n, float inv, int zp,
                                                   int lo, int hi, uint8_t *q) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    const float vinv = (inv), flo = ((float)(lo - zp)), fhi = ((float)(hi - zp));
    const int32_t vzp = ((int32_t)(zp));
    int64_t i;
    for (i = 0; i < n; i += 1) {
        const int nn = n - i < 1 ? (int)(n - i) : 1;
        float v = kern__s_mul(kern__s_load_f32(p + i * es, dt, nn), vinv);
        v = ((((v) == (v))) ? (v) : (0.0f));
        v = kern__s_min(fhi, kern__s_max(flo, v));
        (*(uint8_t *)(q + i) = (uint8_t)(kern__s_iadd(kern__s_cvtn(v), vzp)));
    }
}
/* The symmetric rule on one row: codes into q, returns the scale. */
static inline float kern__s_quant_row_s8(const void *x, kern_dtype dt, int64_t n, int8_t *q) {
    float s = kern__quant_scale(kern__s_absmax(x, dt, n, NULL));
    kern__s_quant_row(x, dt, n, 1.0f / s, 0, -127, 127, (uint8_t *)q);
    return s;
}
#ifdef KERN_X86
/* ---- avx2 ---- */
/* 8-wide operand access with any element stride (unit: the fast path). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_ld_strided__avx2(const char *p, kern_dtype dt, int64_t cs, int n) {
    if (cs == 1 || n <= 1) return kern__v_load_f32__avx2(p, dt, n);
    {
        float t[8];
        int64_t es = (int64_t)kern_dtype_size(dt);
        int k;
        for (k = 0; k < 8; k++) t[k] = k < n ? kern__s_load_f32(p + k * cs * es, dt, 1) : 0.0f;
        return _mm256_loadu_ps(t);
    }
}
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_st_strided__avx2(char *p, kern_dtype dt, int64_t cs, __m256 v, int n, int nt) {
    if (cs == 1 || n <= 1) {
        kern__v_store_f32__avx2(p, dt, v, n, nt);
    } else {
        float t[8];
        int64_t es = (int64_t)kern_dtype_size(dt);
        int k;
        _mm256_storeu_ps(t, v);
        for (k = 0; k < n && k < 8; k++) kern__s_store_f32(p + k * cs * es, dt, t[k], 1, 0);
    }
}

/* Rows i0 .. i0 + m - 1, columns j0 .. j0 + n - 1 of the output from the
 * tile t (row stride ldt; see kern__epi), with the activation, `unit`
 * (every operand has unit column stride) and `f32` (every operand f32, no
 * streaming stores) constants after inlining, so the common case runs
 * without the per-vector stride and dtype branches. The row-invariant work
 * (sizes, broadcasts, operand addresses) is done once per call and kept in
 * locals: a tile row is only a few vectors, and stores through dst may
 * alias *e. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_epi_rows_core__avx2(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                       int64_t ldt, int m, int n, kern_act act, int unit,
                                                       int f32) {
    const __m256 va = _mm256_set1_ps(e->alpha), vb = _mm256_set1_ps(e->beta), vo = _mm256_set1_ps(e->out_scale);
    const kern_dtype sdt = f32 ? KERN_F32 : e->src_dt, bdt = f32 ? KERN_F32 : e->bias_dt;
    const kern_dtype rdt = f32 ? KERN_F32 : e->res_dt, ddt = f32 ? KERN_F32 : e->dst_dt;
    const int64_t ssz = (int64_t)kern_dtype_size(sdt), dsz = (int64_t)kern_dtype_size(ddt);
    const int64_t rsz = (int64_t)kern_dtype_size(rdt), bsz = (int64_t)kern_dtype_size(bdt);
    const int64_t scs = e->src_cs, bst = e->bias_st, rcs = e->res_cs, dcs = e->dst_cs;
    const int64_t srs = e->src_rs * ssz, rrs = e->res_rs * rsz, drs = e->dst_rs * dsz;
    const char *const src = e->src ? e->src + (i0 * e->src_rs + (j0 - e->src_j0) * scs) * ssz : NULL;
    const char *const bias = e->bias && !e->bias_per_row ? e->bias + j0 * bst * bsz : NULL;
    const char *const bias_row = e->bias && e->bias_per_row ? e->bias + i0 * bst * bsz : NULL;
    const char *const res = e->res ? e->res + (i0 * e->res_rs + j0 * rcs) * rsz : NULL;
    char *const dst = e->dst + (i0 * e->dst_rs + (j0 - e->dst_j0) * dcs) * dsz;
    const int nt = f32 ? 0 : e->nt;
    int r, j;
    for (r = 0; r < m; r++) {
        const float *acc = t + r * ldt;
        const char *sp = src ? src + r * srs : NULL, *rp = res ? res + r * rrs : NULL;
        char *dp = dst + r * drs;
        const __m256 brow = bias_row ? _mm256_set1_ps(kern__s_load_f32(bias_row + r * bst * bsz, bdt, 1)) : _mm256_setzero_ps();
        for (j = 0; j < n; j += 8) {
            const int nn = n - j < 8 ? n - j : 8;
            __m256 v = kern__mul__avx2(va, nn == 8 ? _mm256_loadu_ps(acc + j) : kern__loadn__avx2(acc + j, nn));
            if (unit) {
                if (sp) v = _mm256_fmadd_ps(vb, kern__v_load_f32__avx2(sp + j * ssz, sdt, nn), v);
                if (bias) v = _mm256_add_ps(v, kern__v_load_f32__avx2(bias + j * bsz, bdt, nn));
                else if (bias_row) v = _mm256_add_ps(v, brow);
                v = kern__v_act__avx2(v, act);
                if (rp) v = _mm256_add_ps(v, kern__v_load_f32__avx2(rp + j * rsz, rdt, nn));
                v = kern__mul__avx2(v, vo);
                kern__v_store_f32__avx2(dp + j * dsz, ddt, v, nn, nt && nn == 8);
            } else {
                if (sp) v = _mm256_fmadd_ps(vb, kern__v_ld_strided__avx2(sp + j * scs * ssz, sdt, scs, nn), v);
                if (bias) v = _mm256_add_ps(v, kern__v_ld_strided__avx2(bias + j * bst * bsz, bdt, bst, nn));
                else if (bias_row) v = _mm256_add_ps(v, brow);
                v = kern__v_act__avx2(v, act);
                if (rp) v = _mm256_add_ps(v, kern__v_ld_strided__avx2(rp + j * rcs * rsz, rdt, rcs, nn));
                v = kern__mul__avx2(v, vo);
                kern__v_st_strided__avx2(dp + j * dcs * dsz, ddt, dcs, v, nn, nt && nn == 8);
            }
        }
    }
}
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_epi_rows_act__avx2(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                      int64_t ldt, int m, int n, kern_act act) {
    const int unit = (!e->src || e->src_cs == 1) && (!e->bias || e->bias_per_row || e->bias_st == 1) &&
                     (!e->res || e->res_cs == 1) && e->dst_cs == 1;
    const int f32 = (!e->src || e->src_dt == KERN_F32) && (!e->bias || e->bias_dt == KERN_F32) &&
                    (!e->res || e->res_dt == KERN_F32) && e->dst_dt == KERN_F32 && !e->nt;
    if (unit && f32) kern__v_epi_rows_core__avx2(e, i0, j0, t, ldt, m, n, act, 1, 1);
    else if (unit) kern__v_epi_rows_core__avx2(e, i0, j0, t, ldt, m, n, act, 1, 0);
    else kern__v_epi_rows_core__avx2(e, i0, j0, t, ldt, m, n, act, 0, 0);
}
/* Columns j0 .. j0 + n - 1 of output row i from acc[0 .. n). */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_epi_row_act__avx2(const kern__epi *e, int64_t i, int64_t j0,
                                                     const float *acc, int n, kern_act act) {
    kern__v_epi_rows_act__avx2(e, i, j0, acc, 0, 1, n, act);
}
/* One output row. */
KERN_TARGET_AVX2 static inline void kern__v_epi_row__avx2(const kern__epi *e, int64_t i, int64_t j0, const float *acc,
                                                 int n) {
#define KERN__EPI_ROW(A) kern__v_epi_rows_act__avx2(e, i, j0, acc, 0, 1, n, A);
    KERN__ACT_DISPATCH(e->act, KERN__EPI_ROW)
#undef KERN__EPI_ROW
}
/* The gated store (e->glu): tile columns j0 .. j0 + n - 1 are glu groups
 * (j0 a multiple of 2 KERN_GLU_GROUP); each group's w gates and w ups
 * become w output columns from (j0 + c) / 2, in the order of the plain
 * store: alpha, beta src, bias, act (the gate only), gate * up, residual,
 * out_scale. Every operand through the strided accessors (unit stride is
 * their fast path): this runs once per output element of a GEMM. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_epi_glu_rows__avx2(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                      int64_t ldt, int m, int n, kern_act act) {
    const __m256 va = _mm256_set1_ps(e->alpha), vb = _mm256_set1_ps(e->beta), vo = _mm256_set1_ps(e->out_scale);
    const int64_t ssz = (int64_t)kern_dtype_size(e->src_dt), dsz = (int64_t)kern_dtype_size(e->dst_dt);
    const int64_t rsz = (int64_t)kern_dtype_size(e->res_dt), bsz = (int64_t)kern_dtype_size(e->bias_dt);
    int r, c, q;
    for (r = 0; r < m; r++) {
        const int64_t i = i0 + r;
        const float *acc = t + r * ldt;
        const __m256 brow = e->bias && e->bias_per_row ? _mm256_set1_ps(kern__s_load_f32(e->bias + i * e->bias_st * bsz, e->bias_dt, 1)) : _mm256_setzero_ps();
        for (c = 0; c < n; c += 2 * KERN_GLU_GROUP) {
            const int w = (n - c < 2 * KERN_GLU_GROUP ? n - c : 2 * KERN_GLU_GROUP) / 2;
            const int64_t jg = j0 + c, jo = jg / 2;
            for (q = 0; q < w; q += 8) {
                const int nn = w - q < 8 ? w - q : 8;
                __m256 g = kern__mul__avx2(va, kern__loadn__avx2(acc + c + q, nn)), u = kern__mul__avx2(va, kern__loadn__avx2(acc + c + w + q, nn)), v;
                if (e->src) {
                    const char *sp = e->src + (i * e->src_rs + (jg + q - e->src_j0) * e->src_cs) * ssz;
                    g = _mm256_fmadd_ps(vb, kern__v_ld_strided__avx2(sp, e->src_dt, e->src_cs, nn), g);
                    u = _mm256_fmadd_ps(vb, kern__v_ld_strided__avx2(sp + w * e->src_cs * ssz, e->src_dt, e->src_cs, nn), u);
                }
                if (e->bias && !e->bias_per_row) {
                    const char *bp = e->bias + (jg + q) * e->bias_st * bsz;
                    g = _mm256_add_ps(g, kern__v_ld_strided__avx2(bp, e->bias_dt, e->bias_st, nn));
                    u = _mm256_add_ps(u, kern__v_ld_strided__avx2(bp + w * e->bias_st * bsz, e->bias_dt, e->bias_st, nn));
                } else if (e->bias) {
                    g = _mm256_add_ps(g, brow);
                    u = _mm256_add_ps(u, brow);
                }
                v = kern__mul__avx2(kern__v_act__avx2(g, act), u);
                if (e->res)
                    v = _mm256_add_ps(v, kern__v_ld_strided__avx2(e->res + (i * e->res_rs + (jo + q) * e->res_cs) * rsz,
                                                         e->res_dt, e->res_cs, nn));
                v = kern__mul__avx2(v, vo);
                kern__v_st_strided__avx2(e->dst + (i * e->dst_rs + (jo + q - e->dst_j0) * e->dst_cs) * dsz,
                                        e->dst_dt, e->dst_cs, v, nn, 0);
            }
        }
    }
}
/* The m x n top-left corner of tile t (row stride ldt) to output rows
 * i0.., columns j0.. (the store of kern_gemm's microkernel contract). */
KERN_TARGET_AVX2 static inline void kern__v_epi_tile__avx2(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                  int64_t ldt, int m, int n) {
    if (e->glu) {
#define KERN__EPI_GLU(A) kern__v_epi_glu_rows__avx2(e, i0, j0, t, ldt, m, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__EPI_GLU)
#undef KERN__EPI_GLU
        return;
    }
#define KERN__EPI_TILE(A) kern__v_epi_rows_act__avx2(e, i0, j0, t, ldt, m, n, A);
    KERN__ACT_DISPATCH(e->act, KERN__EPI_TILE)
#undef KERN__EPI_TILE
}

/* max |v| over the finite values of n elements (0 if none); *nonfinite
 * (may be NULL) gets the count of the others. Exact on every ISA. */
KERN_TARGET_AVX2 static inline float kern__v_absmax__avx2(const void *x, kern_dtype dt, int64_t n, int64_t *nonfinite) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    __m256 m = _mm256_setzero_ps();
    int64_t bad = 0, i;
    for (i = 0; i < n; i += 8) {
        const int nn = n - i < 8 ? (int)(n - i) : 8;
        __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), kern__v_load_f32__avx2(p + i * es, dt, nn));
        __m256 fin = _mm256_cmp_ps(a, _mm256_set1_ps(INFINITY), _CMP_LT_OQ);
        m = _mm256_max_ps(m, _mm256_blendv_ps(_mm256_setzero_ps(), a, fin));
        if (!(_mm256_movemask_ps(fin) == 0xff)) bad += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_xor_ps(_mm256_castsi256_ps(_mm256_set1_epi32(-1)), fin))); /* lanes past nn load as 0 */
    }
    if (nonfinite) *nonfinite = bad;
    return kern__hmax__avx2(m);
}
/* q[k] = clamp(rne(x[k] * inv), lo - zp, hi - zp) + zp as bytes, NaN -> zp
 * (the rule above: lo, hi = -127, 127, zp = 0 symmetric; 0, 255 u8). */
KERN_TARGET_AVX2 static inline void kern__v_quant_row__avx2(const void *x, kern_dtype dt, int64_t n, float inv, int zp,
                                                   int lo, int hi, uint8_t *q) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    const __m256 vinv = _mm256_set1_ps(inv), flo = _mm256_set1_ps((float)(lo - zp)), fhi = _mm256_set1_ps((float)(hi - zp));
    const __m256i vzp = _mm256_set1_epi32(zp);
    int64_t i;
    for (i = 0; i < n; i += 8) {
        const int nn = n - i < 8 ? (int)(n - i) : 8;
        __m256 v = kern__mul__avx2(kern__v_load_f32__avx2(p + i * es, dt, nn), vinv);
        v = _mm256_blendv_ps(_mm256_setzero_ps(), v, _mm256_cmp_ps(v, v, _CMP_EQ_OQ));
        v = _mm256_min_ps(fhi, _mm256_max_ps(flo, v));
        kern__storeb__avx2(q + i, _mm256_add_epi32(_mm256_cvtps_epi32(v), vzp), nn);
    }
}
/* The symmetric rule on one row: codes into q, returns the scale. */
KERN_TARGET_AVX2 static inline float kern__v_quant_row_s8__avx2(const void *x, kern_dtype dt, int64_t n, int8_t *q) {
    float s = kern__quant_scale(kern__v_absmax__avx2(x, dt, n, NULL));
    kern__v_quant_row__avx2(x, dt, n, 1.0f / s, 0, -127, 127, (uint8_t *)q);
    return s;
}
/* ---- avx512 ---- */
/* 16-wide operand access with any element stride (unit: the fast path). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_ld_strided__avx512(const char *p, kern_dtype dt, int64_t cs, int n) {
    if (cs == 1 || n <= 1) return kern__v_load_f32__avx512(p, dt, n);
    {
        float t[16];
        int64_t es = (int64_t)kern_dtype_size(dt);
        int k;
        for (k = 0; k < 16; k++) t[k] = k < n ? kern__s_load_f32(p + k * cs * es, dt, 1) : 0.0f;
        return _mm512_loadu_ps(t);
    }
}
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_st_strided__avx512(char *p, kern_dtype dt, int64_t cs, __m512 v, int n, int nt) {
    if (cs == 1 || n <= 1) {
        kern__v_store_f32__avx512(p, dt, v, n, nt);
    } else {
        float t[16];
        int64_t es = (int64_t)kern_dtype_size(dt);
        int k;
        _mm512_storeu_ps(t, v);
        for (k = 0; k < n && k < 16; k++) kern__s_store_f32(p + k * cs * es, dt, t[k], 1, 0);
    }
}

/* Rows i0 .. i0 + m - 1, columns j0 .. j0 + n - 1 of the output from the
 * tile t (row stride ldt; see kern__epi), with the activation, `unit`
 * (every operand has unit column stride) and `f32` (every operand f32, no
 * streaming stores) constants after inlining, so the common case runs
 * without the per-vector stride and dtype branches. The row-invariant work
 * (sizes, broadcasts, operand addresses) is done once per call and kept in
 * locals: a tile row is only a few vectors, and stores through dst may
 * alias *e. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_epi_rows_core__avx512(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                       int64_t ldt, int m, int n, kern_act act, int unit,
                                                       int f32) {
    const __m512 va = _mm512_set1_ps(e->alpha), vb = _mm512_set1_ps(e->beta), vo = _mm512_set1_ps(e->out_scale);
    const kern_dtype sdt = f32 ? KERN_F32 : e->src_dt, bdt = f32 ? KERN_F32 : e->bias_dt;
    const kern_dtype rdt = f32 ? KERN_F32 : e->res_dt, ddt = f32 ? KERN_F32 : e->dst_dt;
    const int64_t ssz = (int64_t)kern_dtype_size(sdt), dsz = (int64_t)kern_dtype_size(ddt);
    const int64_t rsz = (int64_t)kern_dtype_size(rdt), bsz = (int64_t)kern_dtype_size(bdt);
    const int64_t scs = e->src_cs, bst = e->bias_st, rcs = e->res_cs, dcs = e->dst_cs;
    const int64_t srs = e->src_rs * ssz, rrs = e->res_rs * rsz, drs = e->dst_rs * dsz;
    const char *const src = e->src ? e->src + (i0 * e->src_rs + (j0 - e->src_j0) * scs) * ssz : NULL;
    const char *const bias = e->bias && !e->bias_per_row ? e->bias + j0 * bst * bsz : NULL;
    const char *const bias_row = e->bias && e->bias_per_row ? e->bias + i0 * bst * bsz : NULL;
    const char *const res = e->res ? e->res + (i0 * e->res_rs + j0 * rcs) * rsz : NULL;
    char *const dst = e->dst + (i0 * e->dst_rs + (j0 - e->dst_j0) * dcs) * dsz;
    const int nt = f32 ? 0 : e->nt;
    int r, j;
    for (r = 0; r < m; r++) {
        const float *acc = t + r * ldt;
        const char *sp = src ? src + r * srs : NULL, *rp = res ? res + r * rrs : NULL;
        char *dp = dst + r * drs;
        const __m512 brow = bias_row ? _mm512_set1_ps(kern__s_load_f32(bias_row + r * bst * bsz, bdt, 1)) : _mm512_setzero_ps();
        for (j = 0; j < n; j += 16) {
            const int nn = n - j < 16 ? n - j : 16;
            __m512 v = kern__mul__avx512(va, nn == 16 ? _mm512_loadu_ps(acc + j) : kern__loadn__avx512(acc + j, nn));
            if (unit) {
                if (sp) v = _mm512_fmadd_ps(vb, kern__v_load_f32__avx512(sp + j * ssz, sdt, nn), v);
                if (bias) v = _mm512_add_ps(v, kern__v_load_f32__avx512(bias + j * bsz, bdt, nn));
                else if (bias_row) v = _mm512_add_ps(v, brow);
                v = kern__v_act__avx512(v, act);
                if (rp) v = _mm512_add_ps(v, kern__v_load_f32__avx512(rp + j * rsz, rdt, nn));
                v = kern__mul__avx512(v, vo);
                kern__v_store_f32__avx512(dp + j * dsz, ddt, v, nn, nt && nn == 16);
            } else {
                if (sp) v = _mm512_fmadd_ps(vb, kern__v_ld_strided__avx512(sp + j * scs * ssz, sdt, scs, nn), v);
                if (bias) v = _mm512_add_ps(v, kern__v_ld_strided__avx512(bias + j * bst * bsz, bdt, bst, nn));
                else if (bias_row) v = _mm512_add_ps(v, brow);
                v = kern__v_act__avx512(v, act);
                if (rp) v = _mm512_add_ps(v, kern__v_ld_strided__avx512(rp + j * rcs * rsz, rdt, rcs, nn));
                v = kern__mul__avx512(v, vo);
                kern__v_st_strided__avx512(dp + j * dcs * dsz, ddt, dcs, v, nn, nt && nn == 16);
            }
        }
    }
}
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_epi_rows_act__avx512(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                      int64_t ldt, int m, int n, kern_act act) {
    const int unit = (!e->src || e->src_cs == 1) && (!e->bias || e->bias_per_row || e->bias_st == 1) &&
                     (!e->res || e->res_cs == 1) && e->dst_cs == 1;
    const int f32 = (!e->src || e->src_dt == KERN_F32) && (!e->bias || e->bias_dt == KERN_F32) &&
                    (!e->res || e->res_dt == KERN_F32) && e->dst_dt == KERN_F32 && !e->nt;
    if (unit && f32) kern__v_epi_rows_core__avx512(e, i0, j0, t, ldt, m, n, act, 1, 1);
    else if (unit) kern__v_epi_rows_core__avx512(e, i0, j0, t, ldt, m, n, act, 1, 0);
    else kern__v_epi_rows_core__avx512(e, i0, j0, t, ldt, m, n, act, 0, 0);
}
/* Columns j0 .. j0 + n - 1 of output row i from acc[0 .. n). */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_epi_row_act__avx512(const kern__epi *e, int64_t i, int64_t j0,
                                                     const float *acc, int n, kern_act act) {
    kern__v_epi_rows_act__avx512(e, i, j0, acc, 0, 1, n, act);
}
/* One output row. */
KERN_TARGET_AVX512 static inline void kern__v_epi_row__avx512(const kern__epi *e, int64_t i, int64_t j0, const float *acc,
                                                 int n) {
#define KERN__EPI_ROW(A) kern__v_epi_rows_act__avx512(e, i, j0, acc, 0, 1, n, A);
    KERN__ACT_DISPATCH(e->act, KERN__EPI_ROW)
#undef KERN__EPI_ROW
}
/* The gated store (e->glu): tile columns j0 .. j0 + n - 1 are glu groups
 * (j0 a multiple of 2 KERN_GLU_GROUP); each group's w gates and w ups
 * become w output columns from (j0 + c) / 2, in the order of the plain
 * store: alpha, beta src, bias, act (the gate only), gate * up, residual,
 * out_scale. Every operand through the strided accessors (unit stride is
 * their fast path): this runs once per output element of a GEMM. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_epi_glu_rows__avx512(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                      int64_t ldt, int m, int n, kern_act act) {
    const __m512 va = _mm512_set1_ps(e->alpha), vb = _mm512_set1_ps(e->beta), vo = _mm512_set1_ps(e->out_scale);
    const int64_t ssz = (int64_t)kern_dtype_size(e->src_dt), dsz = (int64_t)kern_dtype_size(e->dst_dt);
    const int64_t rsz = (int64_t)kern_dtype_size(e->res_dt), bsz = (int64_t)kern_dtype_size(e->bias_dt);
    int r, c, q;
    for (r = 0; r < m; r++) {
        const int64_t i = i0 + r;
        const float *acc = t + r * ldt;
        const __m512 brow = e->bias && e->bias_per_row ? _mm512_set1_ps(kern__s_load_f32(e->bias + i * e->bias_st * bsz, e->bias_dt, 1)) : _mm512_setzero_ps();
        for (c = 0; c < n; c += 2 * KERN_GLU_GROUP) {
            const int w = (n - c < 2 * KERN_GLU_GROUP ? n - c : 2 * KERN_GLU_GROUP) / 2;
            const int64_t jg = j0 + c, jo = jg / 2;
            for (q = 0; q < w; q += 16) {
                const int nn = w - q < 16 ? w - q : 16;
                __m512 g = kern__mul__avx512(va, kern__loadn__avx512(acc + c + q, nn)), u = kern__mul__avx512(va, kern__loadn__avx512(acc + c + w + q, nn)), v;
                if (e->src) {
                    const char *sp = e->src + (i * e->src_rs + (jg + q - e->src_j0) * e->src_cs) * ssz;
                    g = _mm512_fmadd_ps(vb, kern__v_ld_strided__avx512(sp, e->src_dt, e->src_cs, nn), g);
                    u = _mm512_fmadd_ps(vb, kern__v_ld_strided__avx512(sp + w * e->src_cs * ssz, e->src_dt, e->src_cs, nn), u);
                }
                if (e->bias && !e->bias_per_row) {
                    const char *bp = e->bias + (jg + q) * e->bias_st * bsz;
                    g = _mm512_add_ps(g, kern__v_ld_strided__avx512(bp, e->bias_dt, e->bias_st, nn));
                    u = _mm512_add_ps(u, kern__v_ld_strided__avx512(bp + w * e->bias_st * bsz, e->bias_dt, e->bias_st, nn));
                } else if (e->bias) {
                    g = _mm512_add_ps(g, brow);
                    u = _mm512_add_ps(u, brow);
                }
                v = kern__mul__avx512(kern__v_act__avx512(g, act), u);
                if (e->res)
                    v = _mm512_add_ps(v, kern__v_ld_strided__avx512(e->res + (i * e->res_rs + (jo + q) * e->res_cs) * rsz,
                                                         e->res_dt, e->res_cs, nn));
                v = kern__mul__avx512(v, vo);
                kern__v_st_strided__avx512(e->dst + (i * e->dst_rs + (jo + q - e->dst_j0) * e->dst_cs) * dsz,
                                        e->dst_dt, e->dst_cs, v, nn, 0);
            }
        }
    }
}
/* The m x n top-left corner of tile t (row stride ldt) to output rows
 * i0.., columns j0.. (the store of kern_gemm's microkernel contract). */
KERN_TARGET_AVX512 static inline void kern__v_epi_tile__avx512(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                  int64_t ldt, int m, int n) {
    if (e->glu) {
#define KERN__EPI_GLU(A) kern__v_epi_glu_rows__avx512(e, i0, j0, t, ldt, m, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__EPI_GLU)
#undef KERN__EPI_GLU
        return;
    }
#define KERN__EPI_TILE(A) kern__v_epi_rows_act__avx512(e, i0, j0, t, ldt, m, n, A);
    KERN__ACT_DISPATCH(e->act, KERN__EPI_TILE)
#undef KERN__EPI_TILE
}

/* max |v| over the finite values of n elements (0 if none); *nonfinite
 * (may be NULL) gets the count of the others. Exact on every ISA. */
KERN_TARGET_AVX512 static inline float kern__v_absmax__avx512(const void *x, kern_dtype dt, int64_t n, int64_t *nonfinite) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    __m512 m = _mm512_setzero_ps();
    int64_t bad = 0, i;
    for (i = 0; i < n; i += 16) {
        const int nn = n - i < 16 ? (int)(n - i) : 16;
        __m512 a = _mm512_abs_ps(kern__v_load_f32__avx512(p + i * es, dt, nn));
        __mmask16 fin = _mm512_cmp_ps_mask(a, _mm512_set1_ps(INFINITY), _CMP_LT_OQ);
        m = _mm512_max_ps(m, _mm512_mask_blend_ps(fin, _mm512_setzero_ps(), a));
        if (!((fin) == 0xffff)) bad += __builtin_popcount((unsigned)((__mmask16)~(fin))); /* lanes past nn load as 0 */
    }
    if (nonfinite) *nonfinite = bad;
    return _mm512_reduce_max_ps(m);
}
/* q[k] = clamp(rne(x[k] * inv), lo - zp, hi - zp) + zp as bytes, NaN -> zp
 * (the rule above: lo, hi = -127, 127, zp = 0 symmetric; 0, 255 u8). */
KERN_TARGET_AVX512 static inline void kern__v_quant_row__avx512(const void *x, kern_dtype dt, int64_t n, float inv, int zp,
                                                   int lo, int hi, uint8_t *q) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    const __m512 vinv = _mm512_set1_ps(inv), flo = _mm512_set1_ps((float)(lo - zp)), fhi = _mm512_set1_ps((float)(hi - zp));
    const __m512i vzp = _mm512_set1_epi32(zp);
    int64_t i;
    for (i = 0; i < n; i += 16) {
        const int nn = n - i < 16 ? (int)(n - i) : 16;
        __m512 v = kern__mul__avx512(kern__v_load_f32__avx512(p + i * es, dt, nn), vinv);
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_EQ_OQ), _mm512_setzero_ps(), v);
        v = _mm512_min_ps(fhi, _mm512_max_ps(flo, v));
        kern__storeb__avx512(q + i, _mm512_add_epi32(_mm512_cvtps_epi32(v), vzp), nn);
    }
}
/* The symmetric rule on one row: codes into q, returns the scale. */
KERN_TARGET_AVX512 static inline float kern__v_quant_row_s8__avx512(const void *x, kern_dtype dt, int64_t n, int8_t *q) {
    float s = kern__quant_scale(kern__v_absmax__avx512(x, dt, n, NULL));
    kern__v_quant_row__avx512(x, dt, n, 1.0f / s, 0, -127, 127, (uint8_t *)q);
    return s;
}
#endif /* KERN_X86 */
#ifdef KERN_NEON
/* ---- neon ---- */
/* 4-wide operand access with any element stride (unit: the fast path). */
KERN__AINLINE float32x4_t kern__v_ld_strided__neon(const char *p, kern_dtype dt, int64_t cs, int n) {
    if (cs == 1 || n <= 1) return kern__v_load_f32__neon(p, dt, n);
    {
        float t[4];
        int64_t es = (int64_t)kern_dtype_size(dt);
        int k;
        for (k = 0; k < 4; k++) t[k] = k < n ? kern__s_load_f32(p + k * cs * es, dt, 1) : 0.0f;
        return vld1q_f32(t);
    }
}
KERN__AINLINE void kern__v_st_strided__neon(char *p, kern_dtype dt, int64_t cs, float32x4_t v, int n, int nt) {
    if (cs == 1 || n <= 1) {
        kern__v_store_f32__neon(p, dt, v, n, nt);
    } else {
        float t[4];
        int64_t es = (int64_t)kern_dtype_size(dt);
        int k;
        vst1q_f32(t, v);
        for (k = 0; k < n && k < 4; k++) kern__s_store_f32(p + k * cs * es, dt, t[k], 1, 0);
    }
}

/* Rows i0 .. i0 + m - 1, columns j0 .. j0 + n - 1 of the output from the
 * tile t (row stride ldt; see kern__epi), with the activation, `unit`
 * (every operand has unit column stride) and `f32` (every operand f32, no
 * streaming stores) constants after inlining, so the common case runs
 * without the per-vector stride and dtype branches. The row-invariant work
 * (sizes, broadcasts, operand addresses) is done once per call and kept in
 * locals: a tile row is only a few vectors, and stores through dst may
 * alias *e. */
KERN__AINLINE void kern__v_epi_rows_core__neon(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                       int64_t ldt, int m, int n, kern_act act, int unit,
                                                       int f32) {
    const float32x4_t va = vdupq_n_f32(e->alpha), vb = vdupq_n_f32(e->beta), vo = vdupq_n_f32(e->out_scale);
    const kern_dtype sdt = f32 ? KERN_F32 : e->src_dt, bdt = f32 ? KERN_F32 : e->bias_dt;
    const kern_dtype rdt = f32 ? KERN_F32 : e->res_dt, ddt = f32 ? KERN_F32 : e->dst_dt;
    const int64_t ssz = (int64_t)kern_dtype_size(sdt), dsz = (int64_t)kern_dtype_size(ddt);
    const int64_t rsz = (int64_t)kern_dtype_size(rdt), bsz = (int64_t)kern_dtype_size(bdt);
    const int64_t scs = e->src_cs, bst = e->bias_st, rcs = e->res_cs, dcs = e->dst_cs;
    const int64_t srs = e->src_rs * ssz, rrs = e->res_rs * rsz, drs = e->dst_rs * dsz;
    const char *const src = e->src ? e->src + (i0 * e->src_rs + (j0 - e->src_j0) * scs) * ssz : NULL;
    const char *const bias = e->bias && !e->bias_per_row ? e->bias + j0 * bst * bsz : NULL;
    const char *const bias_row = e->bias && e->bias_per_row ? e->bias + i0 * bst * bsz : NULL;
    const char *const res = e->res ? e->res + (i0 * e->res_rs + j0 * rcs) * rsz : NULL;
    char *const dst = e->dst + (i0 * e->dst_rs + (j0 - e->dst_j0) * dcs) * dsz;
    const int nt = f32 ? 0 : e->nt;
    int r, j;
    for (r = 0; r < m; r++) {
        const float *acc = t + r * ldt;
        const char *sp = src ? src + r * srs : NULL, *rp = res ? res + r * rrs : NULL;
        char *dp = dst + r * drs;
        const float32x4_t brow = bias_row ? vdupq_n_f32(kern__s_load_f32(bias_row + r * bst * bsz, bdt, 1)) : vdupq_n_f32(0.0f);
        for (j = 0; j < n; j += 4) {
            const int nn = n - j < 4 ? n - j : 4;
            float32x4_t v = kern__mul__neon(va, nn == 4 ? vld1q_f32(acc + j) : kern__loadn__neon(acc + j, nn));
            if (unit) {
                if (sp) v = vfmaq_f32(v, vb, kern__v_load_f32__neon(sp + j * ssz, sdt, nn));
                if (bias) v = vaddq_f32(v, kern__v_load_f32__neon(bias + j * bsz, bdt, nn));
                else if (bias_row) v = vaddq_f32(v, brow);
                v = kern__v_act__neon(v, act);
                if (rp) v = vaddq_f32(v, kern__v_load_f32__neon(rp + j * rsz, rdt, nn));
                v = kern__mul__neon(v, vo);
                kern__v_store_f32__neon(dp + j * dsz, ddt, v, nn, nt && nn == 4);
            } else {
                if (sp) v = vfmaq_f32(v, vb, kern__v_ld_strided__neon(sp + j * scs * ssz, sdt, scs, nn));
                if (bias) v = vaddq_f32(v, kern__v_ld_strided__neon(bias + j * bst * bsz, bdt, bst, nn));
                else if (bias_row) v = vaddq_f32(v, brow);
                v = kern__v_act__neon(v, act);
                if (rp) v = vaddq_f32(v, kern__v_ld_strided__neon(rp + j * rcs * rsz, rdt, rcs, nn));
                v = kern__mul__neon(v, vo);
                kern__v_st_strided__neon(dp + j * dcs * dsz, ddt, dcs, v, nn, nt && nn == 4);
            }
        }
    }
}
KERN__AINLINE void kern__v_epi_rows_act__neon(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                      int64_t ldt, int m, int n, kern_act act) {
    const int unit = (!e->src || e->src_cs == 1) && (!e->bias || e->bias_per_row || e->bias_st == 1) &&
                     (!e->res || e->res_cs == 1) && e->dst_cs == 1;
    const int f32 = (!e->src || e->src_dt == KERN_F32) && (!e->bias || e->bias_dt == KERN_F32) &&
                    (!e->res || e->res_dt == KERN_F32) && e->dst_dt == KERN_F32 && !e->nt;
    if (unit && f32) kern__v_epi_rows_core__neon(e, i0, j0, t, ldt, m, n, act, 1, 1);
    else if (unit) kern__v_epi_rows_core__neon(e, i0, j0, t, ldt, m, n, act, 1, 0);
    else kern__v_epi_rows_core__neon(e, i0, j0, t, ldt, m, n, act, 0, 0);
}
/* Columns j0 .. j0 + n - 1 of output row i from acc[0 .. n). */
KERN__AINLINE void kern__v_epi_row_act__neon(const kern__epi *e, int64_t i, int64_t j0,
                                                     const float *acc, int n, kern_act act) {
    kern__v_epi_rows_act__neon(e, i, j0, acc, 0, 1, n, act);
}
/* One output row. */
static inline void kern__v_epi_row__neon(const kern__epi *e, int64_t i, int64_t j0, const float *acc,
                                                 int n) {
#define KERN__EPI_ROW(A) kern__v_epi_rows_act__neon(e, i, j0, acc, 0, 1, n, A);
    KERN__ACT_DISPATCH(e->act, KERN__EPI_ROW)
#undef KERN__EPI_ROW
}
/* The gated store (e->glu): tile columns j0 .. j0 + n - 1 are glu groups
 * (j0 a multiple of 2 KERN_GLU_GROUP); each group's w gates and w ups
 * become w output columns from (j0 + c) / 2, in the order of the plain
 * store: alpha, beta src, bias, act (the gate only), gate * up, residual,
 * out_scale. Every operand through the strided accessors (unit stride is
 * their fast path): this runs once per output element of a GEMM. */
KERN__AINLINE void kern__v_epi_glu_rows__neon(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                      int64_t ldt, int m, int n, kern_act act) {
    const float32x4_t va = vdupq_n_f32(e->alpha), vb = vdupq_n_f32(e->beta), vo = vdupq_n_f32(e->out_scale);
    const int64_t ssz = (int64_t)kern_dtype_size(e->src_dt), dsz = (int64_t)kern_dtype_size(e->dst_dt);
    const int64_t rsz = (int64_t)kern_dtype_size(e->res_dt), bsz = (int64_t)kern_dtype_size(e->bias_dt);
    int r, c, q;
    for (r = 0; r < m; r++) {
        const int64_t i = i0 + r;
        const float *acc = t + r * ldt;
        const float32x4_t brow = e->bias && e->bias_per_row ? vdupq_n_f32(kern__s_load_f32(e->bias + i * e->bias_st * bsz, e->bias_dt, 1)) : vdupq_n_f32(0.0f);
        for (c = 0; c < n; c += 2 * KERN_GLU_GROUP) {
            const int w = (n - c < 2 * KERN_GLU_GROUP ? n - c : 2 * KERN_GLU_GROUP) / 2;
            const int64_t jg = j0 + c, jo = jg / 2;
            for (q = 0; q < w; q += 4) {
                const int nn = w - q < 4 ? w - q : 4;
                float32x4_t g = kern__mul__neon(va, kern__loadn__neon(acc + c + q, nn)), u = kern__mul__neon(va, kern__loadn__neon(acc + c + w + q, nn)), v;
                if (e->src) {
                    const char *sp = e->src + (i * e->src_rs + (jg + q - e->src_j0) * e->src_cs) * ssz;
                    g = vfmaq_f32(g, vb, kern__v_ld_strided__neon(sp, e->src_dt, e->src_cs, nn));
                    u = vfmaq_f32(u, vb, kern__v_ld_strided__neon(sp + w * e->src_cs * ssz, e->src_dt, e->src_cs, nn));
                }
                if (e->bias && !e->bias_per_row) {
                    const char *bp = e->bias + (jg + q) * e->bias_st * bsz;
                    g = vaddq_f32(g, kern__v_ld_strided__neon(bp, e->bias_dt, e->bias_st, nn));
                    u = vaddq_f32(u, kern__v_ld_strided__neon(bp + w * e->bias_st * bsz, e->bias_dt, e->bias_st, nn));
                } else if (e->bias) {
                    g = vaddq_f32(g, brow);
                    u = vaddq_f32(u, brow);
                }
                v = kern__mul__neon(kern__v_act__neon(g, act), u);
                if (e->res)
                    v = vaddq_f32(v, kern__v_ld_strided__neon(e->res + (i * e->res_rs + (jo + q) * e->res_cs) * rsz,
                                                         e->res_dt, e->res_cs, nn));
                v = kern__mul__neon(v, vo);
                kern__v_st_strided__neon(e->dst + (i * e->dst_rs + (jo + q - e->dst_j0) * e->dst_cs) * dsz,
                                        e->dst_dt, e->dst_cs, v, nn, 0);
            }
        }
    }
}
/* The m x n top-left corner of tile t (row stride ldt) to output rows
 * i0.., columns j0.. (the store of kern_gemm's microkernel contract). */
static inline void kern__v_epi_tile__neon(const kern__epi *e, int64_t i0, int64_t j0, const float *t,
                                                  int64_t ldt, int m, int n) {
    if (e->glu) {
#define KERN__EPI_GLU(A) kern__v_epi_glu_rows__neon(e, i0, j0, t, ldt, m, n, A);
        KERN__ACT_DISPATCH(e->act, KERN__EPI_GLU)
#undef KERN__EPI_GLU
        return;
    }
#define KERN__EPI_TILE(A) kern__v_epi_rows_act__neon(e, i0, j0, t, ldt, m, n, A);
    KERN__ACT_DISPATCH(e->act, KERN__EPI_TILE)
#undef KERN__EPI_TILE
}

/* max |v| over the finite values of n elements (0 if none); *nonfinite
 * (may be NULL) gets the count of the others. Exact on every ISA. */
static inline float kern__v_absmax__neon(const void *x, kern_dtype dt, int64_t n, int64_t *nonfinite) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    float32x4_t m = vdupq_n_f32(0.0f);
    int64_t bad = 0, i;
    for (i = 0; i < n; i += 4) {
        const int nn = n - i < 4 ? (int)(n - i) : 4;
        float32x4_t a = vabsq_f32(kern__v_load_f32__neon(p + i * es, dt, nn));
        uint32x4_t fin = vcltq_f32(a, vdupq_n_f32(INFINITY));
        m = kern__max__neon(m, vbslq_f32(fin, a, vdupq_n_f32(0.0f)));
        if (!(vminvq_u32(fin) != 0)) bad += ((int)vaddvq_u32(vshrq_n_u32(vmvnq_u32(fin), 31))); /* lanes past nn load as 0 */
    }
    if (nonfinite) *nonfinite = bad;
    return vmaxvq_f32(m);
}
/* q[k] = clamp(rne(x[k] * inv), lo - zp, hi - zp) + zp as bytes, NaN -> zp
 * (the rule above: lo, hi = -127, 127, zp = 0 symmetric; 0, 255 u8). */
static inline void kern__v_quant_row__neon(const void *x, kern_dtype dt, int64_t n, float inv, int zp,
                                                   int lo, int hi, uint8_t *q) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    const float32x4_t vinv = vdupq_n_f32(inv), flo = vdupq_n_f32((float)(lo - zp)), fhi = vdupq_n_f32((float)(hi - zp));
    const int32x4_t vzp = vdupq_n_s32(zp);
    int64_t i;
    for (i = 0; i < n; i += 4) {
        const int nn = n - i < 4 ? (int)(n - i) : 4;
        float32x4_t v = kern__mul__neon(kern__v_load_f32__neon(p + i * es, dt, nn), vinv);
        v = vbslq_f32(vceqq_f32(v, v), v, vdupq_n_f32(0.0f));
        v = kern__min__neon(fhi, kern__max__neon(flo, v));
        kern__storeb__neon(q + i, vaddq_s32(vcvtnq_s32_f32(v), vzp), nn);
    }
}
/* The symmetric rule on one row: codes into q, returns the scale. */
static inline float kern__v_quant_row_s8__neon(const void *x, kern_dtype dt, int64_t n, int8_t *q) {
    float s = kern__quant_scale(kern__v_absmax__neon(x, dt, n, NULL));
    kern__v_quant_row__neon(x, dt, n, 1.0f / s, 0, -127, 127, (uint8_t *)q);
    return s;
}
#endif /* KERN_NEON */
/* END GENERATED */

/* The GEMM epilogue (alpha, then kern_epilogue's bias / act / residual /
 * out_scale, in kern__epi's order and roundings) applied in place to
 * columns [j0, j0 + n) of rows [0, m) of an f32 output y (row stride ldy,
 * unit columns): for code outside the families that computes its own
 * accumulators (gen/kern_gen.py's GEMM instances), so its epilogue gives
 * kern_gemm's bits for the same accumulators. Bias and residual are
 * indexed by the output's (row, column), as in kern_gemm. */
KERN_API void kern__epilogue_apply_tile(kern_ctx *ctx, const float *t, int64_t ldt, void *y,
                                        kern_dtype ydt, int64_t ldy, int64_t i0, int64_t m,
                                        int64_t j0, int64_t n, float alpha,
                                        const kern_epilogue *epi) {
    kern__epi e;
    kern_isa isa = kern_ctx_isa(ctx);
    kern__epi_init(&e);
    e.alpha = alpha;
    if (epi) {
        kern__epi_set_bias(&e, epi->bias, epi->bias_per_row);
        e.act = epi->act;
        kern__epi_set_residual(&e, epi->residual);
        e.out_scale = epi->out_scale != 0.0f ? epi->out_scale : 1.0f;
    }
    e.dst = (char *)y;
    e.dst_dt = ydt;
    e.dst_rs = ldy;
    e.dst_cs = 1;
    if (m <= 0 || n <= 0) return;
#ifdef KERN_X86
    if (isa >= KERN_ISA_AVX512 && isa < KERN_ISA_NEON) {
        kern__v_epi_tile__avx512(&e, i0, j0, t, ldt, (int)m, (int)n);
        return;
    }
    if (isa >= KERN_ISA_AVX2 && isa < KERN_ISA_NEON) {
        kern__v_epi_tile__avx2(&e, i0, j0, t, ldt, (int)m, (int)n);
        return;
    }
#endif
#ifdef KERN_NEON
    if (isa >= KERN_ISA_NEON) {
        kern__v_epi_tile__neon(&e, i0, j0, t, ldt, (int)m, (int)n);
        return;
    }
#endif
    (void)isa;
    kern__s_epi_tile(&e, i0, j0, t, ldt, (int)m, (int)n);
}

KERN_API void kern__epilogue_apply_f32(kern_ctx *ctx, float *y, int64_t ldy, int64_t m, int64_t j0,
                                       int64_t n, float alpha, const kern_epilogue *epi) {
    kern__epilogue_apply_tile(ctx, y + j0, ldy, y, KERN_F32, ldy, 0, m, j0, n, alpha, epi);
}

#ifdef __cplusplus
}
#endif
KERN__IMPL_DIAG_END
#endif /* KERN_IMPLEMENTATION */
