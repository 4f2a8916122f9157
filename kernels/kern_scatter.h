/* kern_scatter.h — scatter_reduce and gather, the message-passing kernels of
 * graph neural networks. Part of kern, an embeddable header-only C kernel
 * library.
 *
 * WHAT IT COMPUTES
 *   kern_scatter_reduce(ctx, self, dim, index, src, reduce, include_self,
 *                       out, arg_out, params)
 *     PyTorch torch.Tensor.scatter_reduce(dim, index, src, reduce,
 *     include_self) (out-of-place; out may be the very same view as self for
 *     the in-place scatter_reduce_). For a 3-D tensor and dim = 0:
 *         out[index[i][j][k]][j][k] = reduce(out[..], src[i][j][k])
 *     over every position of index, where out starts as self.
 *       reduce:  KERN_REDUCE_SUM, _PROD, _MEAN, _AMAX, _AMIN.
 *       include_self != 0 (PyTorch's default): self takes part in the
 *         reduction of every position that receives a value. include_self = 0
 *         resets only the positions that receive at least one value.
 *         Positions that receive nothing keep self either way.
 *       mean divides by the number of values received (+1 for self when
 *         include_self); integer dtypes floor-divide (as PyTorch: -7/2 = -4).
 *       NaN propagates for every reduce, amax/amin included.
 *       Integers wrap on overflow (sum/prod/mean in the dtype's width, as
 *         PyTorch on CPU).
 *     arg_out (optional, amax/amin only, same shape as self, i32 or i64):
 *       the position along `dim` of the src element that produced each
 *       output (in the GNN case, the edge id). The rule is PyTorch's
 *       spmm_reduce rule: a later value replaces the running result when it
 *       is strictly greater (amax) / smaller (amin) or is NaN, so ties go to
 *       the first position and a NaN result points at the last NaN.
 *       Sentinel index.shape[dim] (= E in the GNN case) where no src value
 *       won: the position received nothing, or include_self and self held
 *       the result.
 *   kern_gather(ctx, src, dim, index, out)
 *     PyTorch torch.gather: out[i][j][k] = src[index[i][j][k]][j][k]
 *     (dim = 0). The backward of scatter(sum).
 *   kern_scatter_plan_init / kern_scatter_reduce_planned
 *     A reusable plan for a 1-D index that is scattered many times (GNN
 *     layers reuse the same edges every layer and epoch): the edges grouped
 *     by destination (CSR by destination: rowptr [N+1] and a stable
 *     permutation of the E edge ids). kern_scatter_plan_bytes() reports the
 *     memory it needs; the caller provides it. A planned call skips the
 *     O(E + N) counting sort and gives the same bits for any thread count.
 *
 * SHAPES AND LAYOUTS
 *   self, src, out: f32, bf16, f16, i32 or i64, all the same dtype, 1..8
 *   dims, any non-negative strides. index: i32 or i64, any strides.
 *   PyTorch's rules: index.ndim == src.ndim == self.ndim,
 *   index.shape[d] <= src.shape[d] for every d, index.shape[d] <=
 *   self.shape[d] for d != dim, 0 <= index < self.shape[dim]; out has
 *   self's shape. dim may be negative (counts from the end).
 *   kern extension (the GNN form): a 1-D index [E] with 2-D self/src and
 *   dim 0 means index.view(E, 1).expand(E, F).
 *   Fast path (the GNN case): dim 0, 2-D (or 1-D) tensors whose feature
 *   dim has unit stride (rows may have any stride), index 1-D [E] or [E, F]
 *   with stride 0 on dim 1 (torch's index.view(-1,1).expand(E, F)), and
 *   index.shape[1] == F. Everything else takes the general path (any dim,
 *   any strides; sort-based per line, parallel over lines).
 *   f16/bf16 accumulate in f32 and round once at the end; f32 in f32;
 *   integers in 64-bit.
 *
 * ALGORITHM (fast path; measured on a 2-core Zen 4, see docs/scatter.md)
 *   "stream" (default): edges are read in index order so that src, the big
 *     tensor (E x F), streams sequentially from DRAM, and the randomly
 *     addressed output rows are software-prefetched. Each thread owns a
 *     contiguous range of edges and reduces it into its own partial output
 *     (thread 0 into out itself for f32/i64), recording per-row counts; a
 *     second parallel phase over rows merges the partials in edge order.
 *     No atomics, no serial scatter; amax/amin/arg results are identical
 *     for any thread count; sum/mean/prod of floats may differ in the last
 *     bits between thread counts (the partial sums are added in a
 *     different association). Scratch: (threads - 1) partial outputs.
 *   "csr": a stable counting sort by destination (parallel, O(E + N)), then
 *     each output row is reduced from its src rows (gathered with software
 *     prefetch) in L1 and written once; rows are split between threads by
 *     edge count. Same bits for any thread count. Used for planned calls,
 *     when the context is deterministic, when the stream partials would
 *     exceed KERN_SCATTER_STREAM_MAX_BYTES (default 1 GiB), and with 2+
 *     threads on graphs of average degree < 24 (the partials of such
 *     graphs fall out of L3; measured).
 *   Owner-computes (each thread keeps a destination range) was measured
 *   too: no gain on 2 threads when every thread scans all edges, 2x slower
 *   with per-thread edge lists (two interleaved src streams collide).
 *
 * ISA PATHS (docs/scatter.md)
 *   The float rows are one template (gen/templates/kern_scatter_rows.c.in)
 *   expanded into the generated region below for scalar, AVX2, AVX-512 and
 *   NEON; one const table per ISA level, kern__scatter_fns_for(level), the
 *   level from the context's ISA cap. Every level gives the scalar level's
 *   bits. Integer rows are portable C. The AVX-512 expansion and gather's
 *   AVX-512 row copy are compiled, not run, on an AVX2-only machine.
 *
 * ERRORS (nothing is written on error)
 *   KERN_ERR_ARG    NULL tensor, reduce not one of the five (0 is
 *                   reserved and invalid), arg_out with sum/prod/mean, dim
 *                   out of range, out overlapping index/src (or overlapping
 *                   self without being the same view), a bad plan.
 *   KERN_ERR_DTYPE  index not i32/i64, data dtype unsupported or mixed,
 *                   arg_out not i32/i64.
 *   KERN_ERR_SHAPE  ndim mismatch, index larger than src (any dim) or than
 *                   self (dims other than dim), out/arg_out shape != self.
 *   KERN_ERR_INDEX  an index value < 0 or >= self.shape[dim] (gather:
 *                   src.shape[dim]); the message names the first offending
 *                   position in row-major order and its value.
 *   KERN_ERR_LAYOUT out or arg_out with overlapping elements (a zero
 *                   stride; an output needs distinct elements); planned
 *                   calls: a feature dim without unit stride.
 *   KERN_ERR_UNSUPPORTED  arg_out with index.shape[dim] >= 2^31 - 1, or
 *                   a 0-dim tensor.
 *   KERN_ERR_NOMEM  scratch allocation failed (also when the sizes make the
 *                   scratch size overflow).
 *
 * PARAMS (kern_scatter_params, NULL or zero-initialised = defaults)
 *   workspace, workspace_size: NULL = the context's reusable scratch; else
 *   caller memory of at least kern_scatter_reduce_workspace_size() (or
 *   kern_scatter_reduce_planned_workspace_size()) bytes, from which the
 *   call takes all its scratch (smaller: KERN_ERR_ARG). The size depends on
 *   the context (threads, deterministic flag: they choose the strategy).
 *   kern_scatter_plan_init and kern_gather take no caller workspace
 *   (plan_init uses the context's scratch for its histogram; gather none).
 *
 * EXAMPLE (a GNN mean aggregation: x_i = mean over edges j->i of msg_e)
 *     // msg [E, F] f32, dst [E] i64, agg [N, F] f32 (self = zeros)
 *     kern_tensor s = kern_tensor_2d(zeros, KERN_F32, N, F);
 *     kern_tensor i = kern_tensor_1d(dst, KERN_I64, E);
 *     kern_tensor m = kern_tensor_2d(msg, KERN_F32, E, F);
 *     kern_tensor o = kern_tensor_2d(agg, KERN_F32, N, F);
 *     if (kern_scatter_reduce(ctx, &s, 0, &i, &m, KERN_REDUCE_MEAN, 0, &o,
 *                             NULL, NULL) != KERN_OK) puts(kern_last_error());
 */
#ifndef KERN_SCATTER_H
#define KERN_SCATTER_H

#include "kern_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reductions. 0 is reserved (a zero-initialised value) and rejected. */
typedef enum kern_reduce {
    KERN_REDUCE_INVALID = 0,
    KERN_REDUCE_SUM,
    KERN_REDUCE_PROD,
    KERN_REDUCE_MEAN,
    KERN_REDUCE_AMAX,
    KERN_REDUCE_AMIN,
    KERN_REDUCE_COUNT
} kern_reduce;

/* "sum", "prod", "mean", "amax", "amin" ("invalid" otherwise). */
KERN_API const char *kern_reduce_name(kern_reduce r);

/* Options of kern_scatter_reduce and kern_scatter_reduce_planned; zero (or
 * a NULL pointer) = defaults. Every field's zero is its default: nothing to
 * resolve. */
typedef struct kern_scatter_params {
    void *workspace;       /* optional caller scratch of at least the call's */
    size_t workspace_size; /* *_workspace_size bytes; NULL = the context's */
} kern_scatter_params;

/* See the top of the file. arg_out and params may be NULL. */
KERN_API kern_status kern_scatter_reduce(kern_ctx *ctx, const kern_tensor *self,
                                         int dim, const kern_tensor *index,
                                         const kern_tensor *src, kern_reduce reduce,
                                         int include_self, const kern_tensor *out,
                                         const kern_tensor *arg_out,
                                         const kern_scatter_params *params);
/* Scratch bytes kern_scatter_reduce takes on this context (its thread
 * count and deterministic flag choose the strategy) for these operands.
 * Validates the arguments like kern_scatter_reduce except the index
 * values. */
KERN_API kern_status kern_scatter_reduce_workspace_size(
    kern_ctx *ctx, const kern_tensor *self, int dim, const kern_tensor *index,
    const kern_tensor *src, kern_reduce reduce, int include_self, const kern_tensor *out,
    const kern_tensor *arg_out, size_t *bytes);

/* PyTorch gather. src/out: any kern dtype (the same); index i32/i64. */
KERN_API kern_status kern_gather(kern_ctx *ctx, const kern_tensor *src, int dim,
                                 const kern_tensor *index, const kern_tensor *out);

/* A destination-grouped (CSR) view of a 1-D index, reusable across calls.
 * Fields are read-only for the user; the memory is the caller's. */
typedef struct kern_scatter_plan {
    int64_t n_rows;  /* N = self.shape[0] the plan was built for */
    int64_t n_edges; /* E = index length */
    int64_t *rowptr; /* [N + 1]: edges of row r are perm[rowptr[r] .. rowptr[r+1]) */
    void *perm;      /* [E] edge ids, increasing within each row */
    int perm_i64;    /* perm is int64_t (E > INT32_MAX) instead of int32_t */
    uint32_t magic;  /* set by kern_scatter_plan_init */
} kern_scatter_plan;

/* Bytes of caller memory a plan for N rows and E edges needs (0 if
 * n_rows/n_edges are negative or the size overflows). */
KERN_API size_t kern_scatter_plan_bytes(int64_t n_rows, int64_t n_edges);
/* Builds the plan of a 1-D index (i32/i64, any stride) for n_rows rows in
 * mem (64-byte alignment recommended, at least kern_scatter_plan_bytes).
 * Validates the index (KERN_ERR_INDEX as above). The plan stays valid as
 * long as mem lives and the index values do not change. */
KERN_API kern_status kern_scatter_plan_init(kern_ctx *ctx, const kern_tensor *index,
                                            int64_t n_rows, void *mem, size_t mem_bytes,
                                            kern_scatter_plan *plan);
/* scatter_reduce along dim 0 with the plan's index: self/out [N, F] (or
 * [N]), src [>= E, F] (or [>= E]), feature dim unit stride. */
KERN_API kern_status kern_scatter_reduce_planned(kern_ctx *ctx,
                                                 const kern_scatter_plan *plan,
                                                 const kern_tensor *self,
                                                 const kern_tensor *src,
                                                 kern_reduce reduce, int include_self,
                                                 const kern_tensor *out,
                                                 const kern_tensor *arg_out,
                                                 const kern_scatter_params *params);
KERN_API kern_status kern_scatter_reduce_planned_workspace_size(
    kern_ctx *ctx, const kern_scatter_plan *plan, const kern_tensor *self,
    const kern_tensor *src, kern_reduce reduce, int include_self, const kern_tensor *out,
    const kern_tensor *arg_out, size_t *bytes);

#ifndef KERN_SCATTER_STREAM_MAX_BYTES
#define KERN_SCATTER_STREAM_MAX_BYTES ((size_t)1 << 30)
#endif

#ifdef __cplusplus
}
#endif
#endif /* KERN_SCATTER_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_SCATTER_IMPLEMENTED)
KERN__IMPL_DIAG_BEGIN
#define KERN_SCATTER_IMPLEMENTED

#ifdef KERN_X86
#include <immintrin.h>
#endif
#ifdef KERN_NEON
#include <arm_neon.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KERN__SC_MAGIC 0x5c477e21u
/* Rows prefetched ahead: measured 8..16 equally good on Zen 4 (12 used). */
#define KERN__SC_PF 12
/* below this average degree (E / N), 2+ threads use the csr strategy */
#define KERN__SC_CSR_DEGREE 24

enum { KERN__SC_ADD = 0, KERN__SC_MUL, KERN__SC_MAX, KERN__SC_MIN };

KERN_API const char *kern_reduce_name(kern_reduce r) {
    switch (r) {
    case KERN_REDUCE_SUM: return "sum";
    case KERN_REDUCE_PROD: return "prod";
    case KERN_REDUCE_MEAN: return "mean";
    case KERN_REDUCE_AMAX: return "amax";
    case KERN_REDUCE_AMIN: return "amin";
    default: return "invalid";
    }
}

static int kern__sc_op_of(kern_reduce r) {
    switch (r) {
    case KERN_REDUCE_PROD: return KERN__SC_MUL;
    case KERN_REDUCE_AMAX: return KERN__SC_MAX;
    case KERN_REDUCE_AMIN: return KERN__SC_MIN;
    default: return KERN__SC_ADD;
    }
}

static inline int64_t kern__sc_ix(const void *p, int is64, int64_t i) {
    return is64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

static inline void kern__sc_prefetch(const void *p, int64_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
    const char *c = (const char *)p;
    int64_t b;
    for (b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, 3);
#else
    (void)p; (void)bytes;
#endif
}

/* Scratch sizes: acc + n * es bytes rounded up to 64, saturating at
 * SIZE_MAX. No allocation of SIZE_MAX bytes succeeds, so sizes that
 * overflow become KERN_ERR_NOMEM instead of a wrapped, too small buffer. */
static inline size_t kern__sc_sz(size_t acc, int64_t n, int64_t es) {
    int64_t b;
    size_t r;
    if (acc == SIZE_MAX || n < 0 || kern_mul_overflow_i64(n, es, &b) || b > INT64_MAX - 63)
        return SIZE_MAX;
    r = ((size_t)b + 63) & ~(size_t)63;
    return r > SIZE_MAX - 1 - acc ? SIZE_MAX : acc + r;
}
static inline size_t kern__sc_add(size_t a, size_t b) {
    return a == SIZE_MAX || b > SIZE_MAX - 1 - a ? SIZE_MAX : a + b;
}
/* The NOMEM message for a scratch size from kern__sc_sz. */
static kern_status kern__sc_nomem(const char *op, size_t bytes) {
    if (bytes == SIZE_MAX)
        return kern__err(KERN_ERR_NOMEM, "%s: the scratch size overflows (the sizes are too large)",
                         op);
    return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes of scratch", op, bytes);
}

/* Byte stride of dim 0 of t; 0 when the stride is never used and may be
 * any value (e.g. 2^62) that overflows when scaled: a dim of one element,
 * or an empty view. A non-empty checked view's strides scale safely. */
static inline int64_t kern__sc_rsb(const kern_tensor *t, size_t es) {
    int64_t b;
    return t->shape[0] > 1 && !kern_mul_overflow_i64(t->stride[0], (int64_t)es, &b) ? b : 0;
}

/* KERN_ERR_LAYOUT for an output whose elements overlap (a zero stride). */
static kern_status kern__sc_check_writable(const kern_tensor *t, const char *op,
                                           const char *name) {
    char sh[96], st[96];
    kern_tensor s;
    if (!kern__tensor_self_overlap(t)) return KERN_OK;
    s = *t;
    memcpy(s.shape, t->stride, sizeof s.shape);
    return kern__err(KERN_ERR_LAYOUT,
                     "%s: %s has overlapping elements (shape %s, strides %s); an output needs "
                     "distinct elements",
                     op, name, kern_shape_str(t, sh, sizeof sh), kern_shape_str(&s, st, sizeof st));
}

/* ----------------------------------------------------- row primitives
 * The reduction engine works on rows of n elements. Float dtypes
 * (f32/bf16/f16) accumulate in float rows, integers in int64 rows. Every
 * primitive takes the source row x in its storage dtype and a weight w
 * (spmm values; 1 for scatter), and optionally an int32 arg row that
 * records `pos` where a max/min update is taken. */
typedef struct kern__scatter_fns {
    const char *name;
    /* acc = w * x (arg = pos) */
    void (*set)(void *acc, const void *x, kern_dtype dt, float w, int64_t n,
                int32_t *arg, int32_t pos);
    /* acc = op(acc, w * x) */
    void (*upd)(int op, void *acc, const void *x, kern_dtype dt, float w,
                int64_t n, int32_t *arg, int32_t pos);
    /* acc = op(acc, b), b a partial accumulator row (args merged) */
    void (*merge)(int op, void *acc, int32_t *arg, const void *b,
                  const int32_t *barg, int64_t n);
    /* out = acc (/ div when div > 0; integers floor-divide) */
    void (*store)(void *out, kern_dtype dt, const void *acc, int64_t n, int64_t div);
    size_t acc_size;
    /* float tables: upd for f32 x without arg (the GNN hot loop); NULL for integers */
    void (*upd_f32)(int op, float *acc, const float *x, int64_t n, float w);
    /* gather's row copy (dtype-agnostic bytes); copy_nt: it can stream */
    void (*copy)(char *d, const char *s, int64_t n, int nt);
    int copy_nt;
} kern__scatter_fns;

/* element i of a row of dtype dt (f32/bf16/f16), through kern_base.h */
static inline float kern__sc_ldf(const void *x, kern_dtype dt, int64_t i) {
    return kern__s_load_f32((const char *)x + i * (dt == KERN_F32 ? 4 : 2), dt, 1);
}

/* integer primitives: int64 accumulators, wrapping arithmetic */
static inline int64_t kern__sc_ldi(const void *x, kern_dtype dt, int64_t i) {
    return dt == KERN_I64 ? ((const int64_t *)x)[i] : (int64_t)((const int32_t *)x)[i];
}
static inline int64_t kern__sc_wrap_add(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
static inline int64_t kern__sc_wrap_mul(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a * (uint64_t)b);
}
static void kern__sc_seti(void *accp, const void *x, kern_dtype dt, float w, int64_t n,
                          int32_t *arg, int32_t pos) {
    int64_t *acc = (int64_t *)accp;
    int64_t i;
    (void)w;
    for (i = 0; i < n; i++) acc[i] = kern__sc_ldi(x, dt, i);
    if (arg)
        for (i = 0; i < n; i++) arg[i] = pos;
}
static void kern__sc_updi(int op, void *accp, const void *x, kern_dtype dt, float w,
                          int64_t n, int32_t *arg, int32_t pos) {
    int64_t *acc = (int64_t *)accp;
    int64_t i;
    (void)w;
    for (i = 0; i < n; i++) {
        int64_t v = kern__sc_ldi(x, dt, i);
        switch (op) {
        case KERN__SC_ADD: acc[i] = kern__sc_wrap_add(acc[i], v); break;
        case KERN__SC_MUL: acc[i] = kern__sc_wrap_mul(acc[i], v); break;
        case KERN__SC_MAX:
            if (v > acc[i]) {
                acc[i] = v;
                if (arg) arg[i] = pos;
            }
            break;
        default:
            if (v < acc[i]) {
                acc[i] = v;
                if (arg) arg[i] = pos;
            }
            break;
        }
    }
}
static void kern__sc_mergei(int op, void *accp, int32_t *arg, const void *bp,
                            const int32_t *barg, int64_t n) {
    int64_t *acc = (int64_t *)accp;
    const int64_t *b = (const int64_t *)bp;
    int64_t i;
    for (i = 0; i < n; i++) {
        switch (op) {
        case KERN__SC_ADD: acc[i] = kern__sc_wrap_add(acc[i], b[i]); break;
        case KERN__SC_MUL: acc[i] = kern__sc_wrap_mul(acc[i], b[i]); break;
        case KERN__SC_MAX:
            if (b[i] > acc[i]) {
                acc[i] = b[i];
                if (arg) arg[i] = barg[i];
            }
            break;
        default:
            if (b[i] < acc[i]) {
                acc[i] = b[i];
                if (arg) arg[i] = barg[i];
            }
            break;
        }
    }
}
static inline int64_t kern__sc_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}
static void kern__sc_storei(void *out, kern_dtype dt, const void *accp, int64_t n,
                            int64_t div) {
    const int64_t *acc = (const int64_t *)accp;
    int64_t i;
    for (i = 0; i < n; i++) {
        if (dt == KERN_I64) {
            int64_t v = acc[i];
            ((int64_t *)out)[i] = div > 0 ? kern__sc_floordiv(v, div) : v;
        } else {
            /* wrap to 32 bits first: PyTorch sums int32 in int32 */
            int64_t v = (int64_t)(int32_t)(uint32_t)(uint64_t)acc[i];
            ((int32_t *)out)[i] = (int32_t)(div > 0 ? kern__sc_floordiv(v, div) : v);
        }
    }
}


/* The float rows: one body per ISA from gen/templates/kern_scatter_rows.c.in
 * (AVX2/AVX-512/NEON vectors with masked tails; the scalar expansion is the
 * bit-exact twin). */
/* BEGIN GENERATED kern_tmpl.py: kern_scatter_rows isa=scalar,avx2,avx512,neon — do not edit */
/* ---- scalar ---- */

/* arg[l] = src ? src[l] : pos for the lanes l < nn where u is set (the
 * position that produced a new max/min). Exact bit moves on every ISA. */
KERN__AINLINE void kern__s_sc_argsel(int32_t *arg, int u, const int32_t *src, int32_t pos,
                                                  int nn) {
    (void)nn;
    if (u) *arg = src ? *src : pos;
}

/* The lanes where v replaces a in a max (op = KERN__SC_MAX) or min: v
 * strictly greater / smaller, or v NaN (so NaN propagates and ties keep the
 * first position). */
KERN__AINLINE int kern__s_sc_take(int op, float v, float a) {
    return ((op == KERN__SC_MAX ? ((v) > (a)) : ((v) < (a))) | ((!(((v) == (v))))));
}

/* a = op(a, v) without args: add, mul, or max/min with NaN of v kept (a NaN
 * in a stays: kern__s_max(v, a) gives a when either is NaN). */
KERN__AINLINE float kern__s_sc_op(int op, float a, float v) {
    if (op == KERN__SC_ADD) return ((a) + (v));
    if (op == KERN__SC_MUL) return kern__s_mul(a, v);
    if (op == KERN__SC_MAX) return ((((v) == (v))) ? (kern__s_max(v, a)) : (v));
    return ((((v) == (v))) ? (kern__s_min(v, a)) : (v));
}

/* acc = w * x (arg = pos), x in dtype dt (a constant after inlining) */
KERN__AINLINE void kern__s_sc_set_core(float *acc, const void *x, kern_dtype dt, float w,
                                                    int64_t n, int32_t *arg, int32_t pos) {
    const char *xp = (const char *)x;
    const int64_t es = dt == KERN_F32 ? 4 : 2;
    const float vw = (w);
    const int all = ((0.0f) == (0.0f));
    int64_t i;
    for (i = 0; i < n; i += 1) {
        const int nn = n - i < 1 ? (int)(n - i) : 1;
        float v = kern__s_load_f32(xp + i * es, dt, nn);
        if (w != 1.0f) v = kern__s_mul(v, vw);
        if (nn == 1) (*(float *)(acc + i) = (v));
        else (*(float *)(acc + i) = (v));
        if (arg) kern__s_sc_argsel(arg + i, all, NULL, pos, nn);
    }
}
static void kern__s_sc_set(void *accp, const void *x, kern_dtype dt, float w, int64_t n,
                                        int32_t *arg, int32_t pos) {
    float *acc = (float *)accp;
    if (dt == KERN_F32) kern__s_sc_set_core(acc, x, KERN_F32, w, n, arg, pos);
    else if (dt == KERN_BF16) kern__s_sc_set_core(acc, x, KERN_BF16, w, n, arg, pos);
    else kern__s_sc_set_core(acc, x, KERN_F16, w, n, arg, pos);
}

/* acc = op(acc, w * x) for f32 x without args: the GNN hot loop, op and
 * usew constants after inlining */
KERN__AINLINE void kern__s_sc_upd_f32_core(int op, int usew, float *acc, const float *xf,
                                                        int64_t n, float w) {
    const float vw = (w);
    int64_t i;
    for (i = 0; i + 1 <= n; i += 1) {
        float v = (*(const float *)(xf + i));
        if (usew) v = kern__s_mul(v, vw);
        (*(float *)(acc + i) = (kern__s_sc_op(op, (*(const float *)(acc + i)), v)));
    }
    if (i < n) {
        const int nn = (int)(n - i);
        float v = (*(const float *)(xf + i));
        (void)nn;
        if (usew) v = kern__s_mul(v, vw);
        (*(float *)(acc + i) = (kern__s_sc_op(op, (*(const float *)(acc + i)), v)));
    }
}
static void kern__s_sc_upd_f32(int op, float *acc, const float *xf, int64_t n, float w) {
    const int usew = w != 1.0f;
    switch (op) {
    case KERN__SC_ADD:
        if (usew) kern__s_sc_upd_f32_core(KERN__SC_ADD, 1, acc, xf, n, w);
        else kern__s_sc_upd_f32_core(KERN__SC_ADD, 0, acc, xf, n, w);
        break;
    case KERN__SC_MUL: kern__s_sc_upd_f32_core(KERN__SC_MUL, usew, acc, xf, n, w); break;
    case KERN__SC_MAX: kern__s_sc_upd_f32_core(KERN__SC_MAX, usew, acc, xf, n, w); break;
    default: kern__s_sc_upd_f32_core(KERN__SC_MIN, usew, acc, xf, n, w); break;
    }
}

/* acc = op(acc, w * x), x in dtype dt, arg = pos where a max/min update is
 * taken (arg may be NULL) */
static void kern__s_sc_upd(int op, void *accp, const void *x, kern_dtype dt, float w,
                                        int64_t n, int32_t *arg, int32_t pos) {
    float *acc = (float *)accp;
    const char *xp = (const char *)x;
    int64_t es, i;
    float vw;
    if (dt == KERN_F32 && !arg) {
        kern__s_sc_upd_f32(op, acc, (const float *)x, n, w);
        return;
    }
    es = dt == KERN_F32 ? 4 : 2;
    vw = (w);
    for (i = 0; i < n; i += 1) {
        const int nn = n - i < 1 ? (int)(n - i) : 1;
        float v = kern__s_load_f32(xp + i * es, dt, nn);
        float a = nn == 1 ? (*(const float *)(acc + i)) : (*(const float *)(acc + i));
        if (w != 1.0f) v = kern__s_mul(v, vw);
        if (op == KERN__SC_ADD || op == KERN__SC_MUL) {
            a = kern__s_sc_op(op, a, v);
        } else {
            const int u = kern__s_sc_take(op, v, a);
            a = ((u) ? (v) : (a));
            if (arg) kern__s_sc_argsel(arg + i, u, NULL, pos, nn);
        }
        if (nn == 1) (*(float *)(acc + i) = (a));
        else (*(float *)(acc + i) = (a));
    }
}

/* acc = op(acc, b), b a partial accumulator row; arg takes barg where b
 * wins a max/min (arg and barg both NULL or both set) */
static void kern__s_sc_merge(int op, void *accp, int32_t *arg, const void *bp,
                                          const int32_t *barg, int64_t n) {
    float *acc = (float *)accp;
    const float *b = (const float *)bp;
    int64_t i;
    for (i = 0; i < n; i += 1) {
        const int nn = n - i < 1 ? (int)(n - i) : 1;
        const float v = nn == 1 ? (*(const float *)(b + i)) : (*(const float *)(b + i));
        float a = nn == 1 ? (*(const float *)(acc + i)) : (*(const float *)(acc + i));
        if (op == KERN__SC_ADD || op == KERN__SC_MUL) {
            a = kern__s_sc_op(op, a, v);
        } else {
            const int u = kern__s_sc_take(op, v, a);
            a = ((u) ? (v) : (a));
            if (arg) kern__s_sc_argsel(arg + i, u, barg + i, 0, nn);
        }
        if (nn == 1) (*(float *)(acc + i) = (a));
        else (*(float *)(acc + i) = (a));
    }
}

/* out = acc (/ div when div > 0), rounded to dtype dt (a constant after
 * inlining) */
KERN__AINLINE void kern__s_sc_store_core(void *out, kern_dtype dt, const float *acc,
                                                      int64_t n, int64_t div) {
    char *o = (char *)out;
    const int64_t es = dt == KERN_F32 ? 4 : 2;
    const float vd = ((float)div);
    int64_t i;
    for (i = 0; i + 1 <= n; i += 1) {
        float v = (*(const float *)(acc + i));
        if (div > 0) v = ((v) / (vd));
        kern__s_store_f32(o + i * es, dt, v, 1, 0);
    }
    if (i < n) {
        const int nn = (int)(n - i);
        float v = (*(const float *)(acc + i));
        if (div > 0) v = ((v) / (vd));
        kern__s_store_f32(o + i * es, dt, v, nn, 0);
    }
}
static void kern__s_sc_store(void *out, kern_dtype dt, const void *accp, int64_t n,
                                          int64_t div) {
    const float *acc = (const float *)accp;
    if (dt == KERN_F32) kern__s_sc_store_core(out, KERN_F32, acc, n, div);
    else if (dt == KERN_BF16) kern__s_sc_store_core(out, KERN_BF16, acc, n, div);
    else kern__s_sc_store_core(out, KERN_F16, acc, n, div);
}
#ifdef KERN_X86
/* ---- avx2 ---- */

/* arg[l] = src ? src[l] : pos for the lanes l < nn where u is set (the
 * position that produced a new max/min). Exact bit moves on every ISA. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_sc_argsel__avx2(int32_t *arg, __m256 u, const int32_t *src, int32_t pos,
                                                  int nn) {
    const __m256i m = _mm256_and_si256(_mm256_castps_si256(u), kern__tailmask__avx2(nn));
    _mm256_maskstore_epi32((int *)arg, m,
                           src ? _mm256_maskload_epi32((const int *)src, m) : _mm256_set1_epi32(pos));
}

/* The lanes where v replaces a in a max (op = KERN__SC_MAX) or min: v
 * strictly greater / smaller, or v NaN (so NaN propagates and ties keep the
 * first position). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_sc_take__avx2(int op, __m256 v, __m256 a) {
    return _mm256_or_ps(op == KERN__SC_MAX ? _mm256_cmp_ps(v, a, _CMP_GT_OQ) : _mm256_cmp_ps(v, a, _CMP_LT_OQ), _mm256_xor_ps(_mm256_castsi256_ps(_mm256_set1_epi32(-1)), _mm256_cmp_ps(v, v, _CMP_EQ_OQ)));
}

/* a = op(a, v) without args: add, mul, or max/min with NaN of v kept (a NaN
 * in a stays: _mm256_max_ps(v, a) gives a when either is NaN). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__v_sc_op__avx2(int op, __m256 a, __m256 v) {
    if (op == KERN__SC_ADD) return _mm256_add_ps(a, v);
    if (op == KERN__SC_MUL) return kern__mul__avx2(a, v);
    if (op == KERN__SC_MAX) return _mm256_blendv_ps(v, _mm256_max_ps(v, a), _mm256_cmp_ps(v, v, _CMP_EQ_OQ));
    return _mm256_blendv_ps(v, _mm256_min_ps(v, a), _mm256_cmp_ps(v, v, _CMP_EQ_OQ));
}

/* acc = w * x (arg = pos), x in dtype dt (a constant after inlining) */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_sc_set_core__avx2(float *acc, const void *x, kern_dtype dt, float w,
                                                    int64_t n, int32_t *arg, int32_t pos) {
    const char *xp = (const char *)x;
    const int64_t es = dt == KERN_F32 ? 4 : 2;
    const __m256 vw = _mm256_set1_ps(w);
    const __m256 all = _mm256_cmp_ps(_mm256_setzero_ps(), _mm256_setzero_ps(), _CMP_EQ_OQ);
    int64_t i;
    for (i = 0; i < n; i += 8) {
        const int nn = n - i < 8 ? (int)(n - i) : 8;
        __m256 v = kern__v_load_f32__avx2(xp + i * es, dt, nn);
        if (w != 1.0f) v = kern__mul__avx2(v, vw);
        if (nn == 8) _mm256_storeu_ps(acc + i, v);
        else kern__storen__avx2(acc + i, v, nn);
        if (arg) kern__v_sc_argsel__avx2(arg + i, all, NULL, pos, nn);
    }
}
KERN_TARGET_AVX2 static void kern__v_sc_set__avx2(void *accp, const void *x, kern_dtype dt, float w, int64_t n,
                                        int32_t *arg, int32_t pos) {
    float *acc = (float *)accp;
    if (dt == KERN_F32) kern__v_sc_set_core__avx2(acc, x, KERN_F32, w, n, arg, pos);
    else if (dt == KERN_BF16) kern__v_sc_set_core__avx2(acc, x, KERN_BF16, w, n, arg, pos);
    else kern__v_sc_set_core__avx2(acc, x, KERN_F16, w, n, arg, pos);
}

/* acc = op(acc, w * x) for f32 x without args: the GNN hot loop, op and
 * usew constants after inlining */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_sc_upd_f32_core__avx2(int op, int usew, float *acc, const float *xf,
                                                        int64_t n, float w) {
    const __m256 vw = _mm256_set1_ps(w);
    int64_t i;
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(xf + i);
        if (usew) v = kern__mul__avx2(v, vw);
        _mm256_storeu_ps(acc + i, kern__v_sc_op__avx2(op, _mm256_loadu_ps(acc + i), v));
    }
    if (i < n) {
        const int nn = (int)(n - i);
        __m256 v = kern__loadn__avx2(xf + i, nn);
        (void)nn;
        if (usew) v = kern__mul__avx2(v, vw);
        kern__storen__avx2(acc + i, kern__v_sc_op__avx2(op, kern__loadn__avx2(acc + i, nn), v), nn);
    }
}
KERN_TARGET_AVX2 static void kern__v_sc_upd_f32__avx2(int op, float *acc, const float *xf, int64_t n, float w) {
    const int usew = w != 1.0f;
    switch (op) {
    case KERN__SC_ADD:
        if (usew) kern__v_sc_upd_f32_core__avx2(KERN__SC_ADD, 1, acc, xf, n, w);
        else kern__v_sc_upd_f32_core__avx2(KERN__SC_ADD, 0, acc, xf, n, w);
        break;
    case KERN__SC_MUL: kern__v_sc_upd_f32_core__avx2(KERN__SC_MUL, usew, acc, xf, n, w); break;
    case KERN__SC_MAX: kern__v_sc_upd_f32_core__avx2(KERN__SC_MAX, usew, acc, xf, n, w); break;
    default: kern__v_sc_upd_f32_core__avx2(KERN__SC_MIN, usew, acc, xf, n, w); break;
    }
}

/* acc = op(acc, w * x), x in dtype dt, arg = pos where a max/min update is
 * taken (arg may be NULL) */
KERN_TARGET_AVX2 static void kern__v_sc_upd__avx2(int op, void *accp, const void *x, kern_dtype dt, float w,
                                        int64_t n, int32_t *arg, int32_t pos) {
    float *acc = (float *)accp;
    const char *xp = (const char *)x;
    int64_t es, i;
    __m256 vw;
    if (dt == KERN_F32 && !arg) {
        kern__v_sc_upd_f32__avx2(op, acc, (const float *)x, n, w);
        return;
    }
    es = dt == KERN_F32 ? 4 : 2;
    vw = _mm256_set1_ps(w);
    for (i = 0; i < n; i += 8) {
        const int nn = n - i < 8 ? (int)(n - i) : 8;
        __m256 v = kern__v_load_f32__avx2(xp + i * es, dt, nn);
        __m256 a = nn == 8 ? _mm256_loadu_ps(acc + i) : kern__loadn__avx2(acc + i, nn);
        if (w != 1.0f) v = kern__mul__avx2(v, vw);
        if (op == KERN__SC_ADD || op == KERN__SC_MUL) {
            a = kern__v_sc_op__avx2(op, a, v);
        } else {
            const __m256 u = kern__v_sc_take__avx2(op, v, a);
            a = _mm256_blendv_ps(a, v, u);
            if (arg) kern__v_sc_argsel__avx2(arg + i, u, NULL, pos, nn);
        }
        if (nn == 8) _mm256_storeu_ps(acc + i, a);
        else kern__storen__avx2(acc + i, a, nn);
    }
}

/* acc = op(acc, b), b a partial accumulator row; arg takes barg where b
 * wins a max/min (arg and barg both NULL or both set) */
KERN_TARGET_AVX2 static void kern__v_sc_merge__avx2(int op, void *accp, int32_t *arg, const void *bp,
                                          const int32_t *barg, int64_t n) {
    float *acc = (float *)accp;
    const float *b = (const float *)bp;
    int64_t i;
    for (i = 0; i < n; i += 8) {
        const int nn = n - i < 8 ? (int)(n - i) : 8;
        const __m256 v = nn == 8 ? _mm256_loadu_ps(b + i) : kern__loadn__avx2(b + i, nn);
        __m256 a = nn == 8 ? _mm256_loadu_ps(acc + i) : kern__loadn__avx2(acc + i, nn);
        if (op == KERN__SC_ADD || op == KERN__SC_MUL) {
            a = kern__v_sc_op__avx2(op, a, v);
        } else {
            const __m256 u = kern__v_sc_take__avx2(op, v, a);
            a = _mm256_blendv_ps(a, v, u);
            if (arg) kern__v_sc_argsel__avx2(arg + i, u, barg + i, 0, nn);
        }
        if (nn == 8) _mm256_storeu_ps(acc + i, a);
        else kern__storen__avx2(acc + i, a, nn);
    }
}

/* out = acc (/ div when div > 0), rounded to dtype dt (a constant after
 * inlining) */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_sc_store_core__avx2(void *out, kern_dtype dt, const float *acc,
                                                      int64_t n, int64_t div) {
    char *o = (char *)out;
    const int64_t es = dt == KERN_F32 ? 4 : 2;
    const __m256 vd = _mm256_set1_ps((float)div);
    int64_t i;
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(acc + i);
        if (div > 0) v = _mm256_div_ps(v, vd);
        kern__v_store_f32__avx2(o + i * es, dt, v, 8, 0);
    }
    if (i < n) {
        const int nn = (int)(n - i);
        __m256 v = kern__loadn__avx2(acc + i, nn);
        if (div > 0) v = _mm256_div_ps(v, vd);
        kern__v_store_f32__avx2(o + i * es, dt, v, nn, 0);
    }
}
KERN_TARGET_AVX2 static void kern__v_sc_store__avx2(void *out, kern_dtype dt, const void *accp, int64_t n,
                                          int64_t div) {
    const float *acc = (const float *)accp;
    if (dt == KERN_F32) kern__v_sc_store_core__avx2(out, KERN_F32, acc, n, div);
    else if (dt == KERN_BF16) kern__v_sc_store_core__avx2(out, KERN_BF16, acc, n, div);
    else kern__v_sc_store_core__avx2(out, KERN_F16, acc, n, div);
}
/* ---- avx512 ---- */

/* arg[l] = src ? src[l] : pos for the lanes l < nn where u is set (the
 * position that produced a new max/min). Exact bit moves on every ISA. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_sc_argsel__avx512(int32_t *arg, __mmask16 u, const int32_t *src, int32_t pos,
                                                  int nn) {
    const __mmask16 m = (__mmask16)(u & kern__tailmask__avx512(nn));
    _mm512_mask_storeu_epi32(arg, m, src ? _mm512_maskz_loadu_epi32(m, src) : _mm512_set1_epi32(pos));
}

/* The lanes where v replaces a in a max (op = KERN__SC_MAX) or min: v
 * strictly greater / smaller, or v NaN (so NaN propagates and ties keep the
 * first position). */
KERN_TARGET_AVX512 KERN__AINLINE __mmask16 kern__v_sc_take__avx512(int op, __m512 v, __m512 a) {
    return ((__mmask16)((op == KERN__SC_MAX ? _mm512_cmp_ps_mask(v, a, _CMP_GT_OQ) : _mm512_cmp_ps_mask(v, a, _CMP_LT_OQ)) | (((__mmask16)~(_mm512_cmp_ps_mask(v, v, _CMP_EQ_OQ))))));
}

/* a = op(a, v) without args: add, mul, or max/min with NaN of v kept (a NaN
 * in a stays: _mm512_max_ps(v, a) gives a when either is NaN). */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__v_sc_op__avx512(int op, __m512 a, __m512 v) {
    if (op == KERN__SC_ADD) return _mm512_add_ps(a, v);
    if (op == KERN__SC_MUL) return kern__mul__avx512(a, v);
    if (op == KERN__SC_MAX) return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_EQ_OQ), v, _mm512_max_ps(v, a));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_EQ_OQ), v, _mm512_min_ps(v, a));
}

/* acc = w * x (arg = pos), x in dtype dt (a constant after inlining) */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_sc_set_core__avx512(float *acc, const void *x, kern_dtype dt, float w,
                                                    int64_t n, int32_t *arg, int32_t pos) {
    const char *xp = (const char *)x;
    const int64_t es = dt == KERN_F32 ? 4 : 2;
    const __m512 vw = _mm512_set1_ps(w);
    const __mmask16 all = _mm512_cmp_ps_mask(_mm512_setzero_ps(), _mm512_setzero_ps(), _CMP_EQ_OQ);
    int64_t i;
    for (i = 0; i < n; i += 16) {
        const int nn = n - i < 16 ? (int)(n - i) : 16;
        __m512 v = kern__v_load_f32__avx512(xp + i * es, dt, nn);
        if (w != 1.0f) v = kern__mul__avx512(v, vw);
        if (nn == 16) _mm512_storeu_ps(acc + i, v);
        else kern__storen__avx512(acc + i, v, nn);
        if (arg) kern__v_sc_argsel__avx512(arg + i, all, NULL, pos, nn);
    }
}
KERN_TARGET_AVX512 static void kern__v_sc_set__avx512(void *accp, const void *x, kern_dtype dt, float w, int64_t n,
                                        int32_t *arg, int32_t pos) {
    float *acc = (float *)accp;
    if (dt == KERN_F32) kern__v_sc_set_core__avx512(acc, x, KERN_F32, w, n, arg, pos);
    else if (dt == KERN_BF16) kern__v_sc_set_core__avx512(acc, x, KERN_BF16, w, n, arg, pos);
    else kern__v_sc_set_core__avx512(acc, x, KERN_F16, w, n, arg, pos);
}

/* acc = op(acc, w * x) for f32 x without args: the GNN hot loop, op and
 * usew constants after inlining */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_sc_upd_f32_core__avx512(int op, int usew, float *acc, const float *xf,
                                                        int64_t n, float w) {
    const __m512 vw = _mm512_set1_ps(w);
    int64_t i;
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(xf + i);
        if (usew) v = kern__mul__avx512(v, vw);
        _mm512_storeu_ps(acc + i, kern__v_sc_op__avx512(op, _mm512_loadu_ps(acc + i), v));
    }
    if (i < n) {
        const int nn = (int)(n - i);
        __m512 v = kern__loadn__avx512(xf + i, nn);
        (void)nn;
        if (usew) v = kern__mul__avx512(v, vw);
        kern__storen__avx512(acc + i, kern__v_sc_op__avx512(op, kern__loadn__avx512(acc + i, nn), v), nn);
    }
}
KERN_TARGET_AVX512 static void kern__v_sc_upd_f32__avx512(int op, float *acc, const float *xf, int64_t n, float w) {
    const int usew = w != 1.0f;
    switch (op) {
    case KERN__SC_ADD:
        if (usew) kern__v_sc_upd_f32_core__avx512(KERN__SC_ADD, 1, acc, xf, n, w);
        else kern__v_sc_upd_f32_core__avx512(KERN__SC_ADD, 0, acc, xf, n, w);
        break;
    case KERN__SC_MUL: kern__v_sc_upd_f32_core__avx512(KERN__SC_MUL, usew, acc, xf, n, w); break;
    case KERN__SC_MAX: kern__v_sc_upd_f32_core__avx512(KERN__SC_MAX, usew, acc, xf, n, w); break;
    default: kern__v_sc_upd_f32_core__avx512(KERN__SC_MIN, usew, acc, xf, n, w); break;
    }
}

/* acc = op(acc, w * x), x in dtype dt, arg = pos where a max/min update is
 * taken (arg may be NULL) */
KERN_TARGET_AVX512 static void kern__v_sc_upd__avx512(int op, void *accp, const void *x, kern_dtype dt, float w,
                                        int64_t n, int32_t *arg, int32_t pos) {
    float *acc = (float *)accp;
    const char *xp = (const char *)x;
    int64_t es, i;
    __m512 vw;
    if (dt == KERN_F32 && !arg) {
        kern__v_sc_upd_f32__avx512(op, acc, (const float *)x, n, w);
        return;
    }
    es = dt == KERN_F32 ? 4 : 2;
    vw = _mm512_set1_ps(w);
    for (i = 0; i < n; i += 16) {
        const int nn = n - i < 16 ? (int)(n - i) : 16;
        __m512 v = kern__v_load_f32__avx512(xp + i * es, dt, nn);
        __m512 a = nn == 16 ? _mm512_loadu_ps(acc + i) : kern__loadn__avx512(acc + i, nn);
        if (w != 1.0f) v = kern__mul__avx512(v, vw);
        if (op == KERN__SC_ADD || op == KERN__SC_MUL) {
            a = kern__v_sc_op__avx512(op, a, v);
        } else {
            const __mmask16 u = kern__v_sc_take__avx512(op, v, a);
            a = _mm512_mask_blend_ps(u, a, v);
            if (arg) kern__v_sc_argsel__avx512(arg + i, u, NULL, pos, nn);
        }
        if (nn == 16) _mm512_storeu_ps(acc + i, a);
        else kern__storen__avx512(acc + i, a, nn);
    }
}

/* acc = op(acc, b), b a partial accumulator row; arg takes barg where b
 * wins a max/min (arg and barg both NULL or both set) */
KERN_TARGET_AVX512 static void kern__v_sc_merge__avx512(int op, void *accp, int32_t *arg, const void *bp,
                                          const int32_t *barg, int64_t n) {
    float *acc = (float *)accp;
    const float *b = (const float *)bp;
    int64_t i;
    for (i = 0; i < n; i += 16) {
        const int nn = n - i < 16 ? (int)(n - i) : 16;
        const __m512 v = nn == 16 ? _mm512_loadu_ps(b + i) : kern__loadn__avx512(b + i, nn);
        __m512 a = nn == 16 ? _mm512_loadu_ps(acc + i) : kern__loadn__avx512(acc + i, nn);
        if (op == KERN__SC_ADD || op == KERN__SC_MUL) {
            a = kern__v_sc_op__avx512(op, a, v);
        } else {
            const __mmask16 u = kern__v_sc_take__avx512(op, v, a);
            a = _mm512_mask_blend_ps(u, a, v);
            if (arg) kern__v_sc_argsel__avx512(arg + i, u, barg + i, 0, nn);
        }
        if (nn == 16) _mm512_storeu_ps(acc + i, a);
        else kern__storen__avx512(acc + i, a, nn);
    }
}

/* out = acc (/ div when div > 0), rounded to dtype dt (a constant after
 * inlining) */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_sc_store_core__avx512(void *out, kern_dtype dt, const float *acc,
                                                      int64_t n, int64_t div) {
    char *o = (char *)out;
    const int64_t es = dt == KERN_F32 ? 4 : 2;
    const __m512 vd = _mm512_set1_ps((float)div);
    int64_t i;
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(acc + i);
        if (div > 0) v = _mm512_div_ps(v, vd);
        kern__v_store_f32__avx512(o + i * es, dt, v, 16, 0);
    }
    if (i < n) {
        const int nn = (int)(n - i);
        __m512 v = kern__loadn__avx512(acc + i, nn);
        if (div > 0) v = _mm512_div_ps(v, vd);
        kern__v_store_f32__avx512(o + i * es, dt, v, nn, 0);
    }
}
KERN_TARGET_AVX512 static void kern__v_sc_store__avx512(void *out, kern_dtype dt, const void *accp, int64_t n,
                                          int64_t div) {
    const float *acc = (const float *)accp;
    if (dt == KERN_F32) kern__v_sc_store_core__avx512(out, KERN_F32, acc, n, div);
    else if (dt == KERN_BF16) kern__v_sc_store_core__avx512(out, KERN_BF16, acc, n, div);
    else kern__v_sc_store_core__avx512(out, KERN_F16, acc, n, div);
}
#endif /* KERN_X86 */
#ifdef KERN_NEON
/* ---- neon ---- */

/* arg[l] = src ? src[l] : pos for the lanes l < nn where u is set (the
 * position that produced a new max/min). Exact bit moves on every ISA. */
KERN__AINLINE void kern__v_sc_argsel__neon(int32_t *arg, uint32x4_t u, const int32_t *src, int32_t pos,
                                                  int nn) {
    uint32_t um[4];
    int l;
    vst1q_u32(um, u);
    for (l = 0; l < nn && l < 4; l++)
        if (um[l]) arg[l] = src ? src[l] : pos;
}

/* The lanes where v replaces a in a max (op = KERN__SC_MAX) or min: v
 * strictly greater / smaller, or v NaN (so NaN propagates and ties keep the
 * first position). */
KERN__AINLINE uint32x4_t kern__v_sc_take__neon(int op, float32x4_t v, float32x4_t a) {
    return vorrq_u32(op == KERN__SC_MAX ? vcgtq_f32(v, a) : vcltq_f32(v, a), vmvnq_u32(vceqq_f32(v, v)));
}

/* a = op(a, v) without args: add, mul, or max/min with NaN of v kept (a NaN
 * in a stays: kern__max__neon(v, a) gives a when either is NaN). */
KERN__AINLINE float32x4_t kern__v_sc_op__neon(int op, float32x4_t a, float32x4_t v) {
    if (op == KERN__SC_ADD) return vaddq_f32(a, v);
    if (op == KERN__SC_MUL) return kern__mul__neon(a, v);
    if (op == KERN__SC_MAX) return vbslq_f32(vceqq_f32(v, v), kern__max__neon(v, a), v);
    return vbslq_f32(vceqq_f32(v, v), kern__min__neon(v, a), v);
}

/* acc = w * x (arg = pos), x in dtype dt (a constant after inlining) */
KERN__AINLINE void kern__v_sc_set_core__neon(float *acc, const void *x, kern_dtype dt, float w,
                                                    int64_t n, int32_t *arg, int32_t pos) {
    const char *xp = (const char *)x;
    const int64_t es = dt == KERN_F32 ? 4 : 2;
    const float32x4_t vw = vdupq_n_f32(w);
    const uint32x4_t all = vceqq_f32(vdupq_n_f32(0.0f), vdupq_n_f32(0.0f));
    int64_t i;
    for (i = 0; i < n; i += 4) {
        const int nn = n - i < 4 ? (int)(n - i) : 4;
        float32x4_t v = kern__v_load_f32__neon(xp + i * es, dt, nn);
        if (w != 1.0f) v = kern__mul__neon(v, vw);
        if (nn == 4) vst1q_f32(acc + i, v);
        else kern__storen__neon(acc + i, v, nn);
        if (arg) kern__v_sc_argsel__neon(arg + i, all, NULL, pos, nn);
    }
}
static void kern__v_sc_set__neon(void *accp, const void *x, kern_dtype dt, float w, int64_t n,
                                        int32_t *arg, int32_t pos) {
    float *acc = (float *)accp;
    if (dt == KERN_F32) kern__v_sc_set_core__neon(acc, x, KERN_F32, w, n, arg, pos);
    else if (dt == KERN_BF16) kern__v_sc_set_core__neon(acc, x, KERN_BF16, w, n, arg, pos);
    else kern__v_sc_set_core__neon(acc, x, KERN_F16, w, n, arg, pos);
}

/* acc = op(acc, w * x) for f32 x without args: the GNN hot loop, op and
 * usew constants after inlining */
KERN__AINLINE void kern__v_sc_upd_f32_core__neon(int op, int usew, float *acc, const float *xf,
                                                        int64_t n, float w) {
    const float32x4_t vw = vdupq_n_f32(w);
    int64_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(xf + i);
        if (usew) v = kern__mul__neon(v, vw);
        vst1q_f32(acc + i, kern__v_sc_op__neon(op, vld1q_f32(acc + i), v));
    }
    if (i < n) {
        const int nn = (int)(n - i);
        float32x4_t v = kern__loadn__neon(xf + i, nn);
        (void)nn;
        if (usew) v = kern__mul__neon(v, vw);
        kern__storen__neon(acc + i, kern__v_sc_op__neon(op, kern__loadn__neon(acc + i, nn), v), nn);
    }
}
static void kern__v_sc_upd_f32__neon(int op, float *acc, const float *xf, int64_t n, float w) {
    const int usew = w != 1.0f;
    switch (op) {
    case KERN__SC_ADD:
        if (usew) kern__v_sc_upd_f32_core__neon(KERN__SC_ADD, 1, acc, xf, n, w);
        else kern__v_sc_upd_f32_core__neon(KERN__SC_ADD, 0, acc, xf, n, w);
        break;
    case KERN__SC_MUL: kern__v_sc_upd_f32_core__neon(KERN__SC_MUL, usew, acc, xf, n, w); break;
    case KERN__SC_MAX: kern__v_sc_upd_f32_core__neon(KERN__SC_MAX, usew, acc, xf, n, w); break;
    default: kern__v_sc_upd_f32_core__neon(KERN__SC_MIN, usew, acc, xf, n, w); break;
    }
}

/* acc = op(acc, w * x), x in dtype dt, arg = pos where a max/min update is
 * taken (arg may be NULL) */
static void kern__v_sc_upd__neon(int op, void *accp, const void *x, kern_dtype dt, float w,
                                        int64_t n, int32_t *arg, int32_t pos) {
    float *acc = (float *)accp;
    const char *xp = (const char *)x;
    int64_t es, i;
    float32x4_t vw;
    if (dt == KERN_F32 && !arg) {
        kern__v_sc_upd_f32__neon(op, acc, (const float *)x, n, w);
        return;
    }
    es = dt == KERN_F32 ? 4 : 2;
    vw = vdupq_n_f32(w);
    for (i = 0; i < n; i += 4) {
        const int nn = n - i < 4 ? (int)(n - i) : 4;
        float32x4_t v = kern__v_load_f32__neon(xp + i * es, dt, nn);
        float32x4_t a = nn == 4 ? vld1q_f32(acc + i) : kern__loadn__neon(acc + i, nn);
        if (w != 1.0f) v = kern__mul__neon(v, vw);
        if (op == KERN__SC_ADD || op == KERN__SC_MUL) {
            a = kern__v_sc_op__neon(op, a, v);
        } else {
            const uint32x4_t u = kern__v_sc_take__neon(op, v, a);
            a = vbslq_f32(u, v, a);
            if (arg) kern__v_sc_argsel__neon(arg + i, u, NULL, pos, nn);
        }
        if (nn == 4) vst1q_f32(acc + i, a);
        else kern__storen__neon(acc + i, a, nn);
    }
}

/* acc = op(acc, b), b a partial accumulator row; arg takes barg where b
 * wins a max/min (arg and barg both NULL or both set) */
static void kern__v_sc_merge__neon(int op, void *accp, int32_t *arg, const void *bp,
                                          const int32_t *barg, int64_t n) {
    float *acc = (float *)accp;
    const float *b = (const float *)bp;
    int64_t i;
    for (i = 0; i < n; i += 4) {
        const int nn = n - i < 4 ? (int)(n - i) : 4;
        const float32x4_t v = nn == 4 ? vld1q_f32(b + i) : kern__loadn__neon(b + i, nn);
        float32x4_t a = nn == 4 ? vld1q_f32(acc + i) : kern__loadn__neon(acc + i, nn);
        if (op == KERN__SC_ADD || op == KERN__SC_MUL) {
            a = kern__v_sc_op__neon(op, a, v);
        } else {
            const uint32x4_t u = kern__v_sc_take__neon(op, v, a);
            a = vbslq_f32(u, v, a);
            if (arg) kern__v_sc_argsel__neon(arg + i, u, barg + i, 0, nn);
        }
        if (nn == 4) vst1q_f32(acc + i, a);
        else kern__storen__neon(acc + i, a, nn);
    }
}

/* out = acc (/ div when div > 0), rounded to dtype dt (a constant after
 * inlining) */
KERN__AINLINE void kern__v_sc_store_core__neon(void *out, kern_dtype dt, const float *acc,
                                                      int64_t n, int64_t div) {
    char *o = (char *)out;
    const int64_t es = dt == KERN_F32 ? 4 : 2;
    const float32x4_t vd = vdupq_n_f32((float)div);
    int64_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(acc + i);
        if (div > 0) v = vdivq_f32(v, vd);
        kern__v_store_f32__neon(o + i * es, dt, v, 4, 0);
    }
    if (i < n) {
        const int nn = (int)(n - i);
        float32x4_t v = kern__loadn__neon(acc + i, nn);
        if (div > 0) v = vdivq_f32(v, vd);
        kern__v_store_f32__neon(o + i * es, dt, v, nn, 0);
    }
}
static void kern__v_sc_store__neon(void *out, kern_dtype dt, const void *accp, int64_t n,
                                          int64_t div) {
    const float *acc = (const float *)accp;
    if (dt == KERN_F32) kern__v_sc_store_core__neon(out, KERN_F32, acc, n, div);
    else if (dt == KERN_BF16) kern__v_sc_store_core__neon(out, KERN_BF16, acc, n, div);
    else kern__v_sc_store_core__neon(out, KERN_F16, acc, n, div);
}
#endif /* KERN_NEON */
/* END GENERATED */

/* gather's row copy: n bytes; nt = non-temporal stores for whole 64-byte
 * blocks (d 64-byte aligned; kern__nt_fence() after the last). The AVX2 and
 * AVX-512 tables stream (a write-once output then costs no read for
 * ownership, a third of a gather's traffic otherwise); the others copy
 * with memcpy. */
static void kern__sc_copy__memcpy(char *d, const char *s, int64_t n, int nt) {
    (void)nt;
    memcpy(d, s, (size_t)n);
}
#ifdef KERN_X86
KERN_TARGET_AVX2 static void kern__sc_copy__avx2(char *d, const char *s, int64_t n, int nt) {
    int64_t i = 0;
    if (nt)
        for (; i + 64 <= n; i += 64) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
            const __m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
            _mm256_stream_si256((__m256i *)(d + i), a);
            _mm256_stream_si256((__m256i *)(d + i + 32), b);
        }
    if (i < n) memcpy(d + i, s + i, (size_t)(n - i));
}
KERN_TARGET_AVX512 static void kern__sc_copy__avx512(char *d, const char *s, int64_t n, int nt) {
    int64_t i = 0;
    if (nt)
        for (; i + 64 <= n; i += 64)
            _mm512_stream_si512((__m512i *)(d + i), _mm512_loadu_si512((const void *)(s + i)));
    for (; i + 64 <= n; i += 64)
        _mm512_storeu_si512((void *)(d + i), _mm512_loadu_si512((const void *)(s + i)));
    if (i < n) {
        __mmask64 m = (n - i) >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
        _mm512_mask_storeu_epi8(d + i, m, _mm512_maskz_loadu_epi8(m, s + i));
    }
}
#endif

/* One const table per ISA level (docs/internals.md); kern_spmm.h uses the
 * same tables (its forward is this row engine with weights). */
static const kern__scatter_fns kern__scatter_fns_int = {
    "int64", kern__sc_seti, kern__sc_updi, kern__sc_mergei, kern__sc_storei, 8, NULL,
    kern__sc_copy__memcpy, 0};
static const kern__scatter_fns kern__scatter_fns_scalar = {
    "scalar", kern__s_sc_set, kern__s_sc_upd, kern__s_sc_merge, kern__s_sc_store, 4,
    kern__s_sc_upd_f32, kern__sc_copy__memcpy, 0};
#ifdef KERN_X86
static const kern__scatter_fns kern__scatter_fns_avx2 = {
    "avx2", kern__v_sc_set__avx2, kern__v_sc_upd__avx2, kern__v_sc_merge__avx2,
    kern__v_sc_store__avx2, 4, kern__v_sc_upd_f32__avx2, kern__sc_copy__avx2, 1};
static const kern__scatter_fns kern__scatter_fns_avx512 = {
    "avx512", kern__v_sc_set__avx512, kern__v_sc_upd__avx512, kern__v_sc_merge__avx512,
    kern__v_sc_store__avx512, 4, kern__v_sc_upd_f32__avx512, kern__sc_copy__avx512, 1};
#endif
#ifdef KERN_NEON
static const kern__scatter_fns kern__scatter_fns_neon = {
    "neon", kern__v_sc_set__neon, kern__v_sc_upd__neon, kern__v_sc_merge__neon,
    kern__v_sc_store__neon, 4, kern__v_sc_upd_f32__neon, kern__sc_copy__memcpy, 0};
#endif
static const kern__scatter_fns *kern__scatter_fns_for(kern_isa level) {
    switch (level) {
#ifdef KERN_X86
    case KERN_ISA_AMX:
    case KERN_ISA_AVX512_BF16:
    case KERN_ISA_AVX512_VNNI:
    case KERN_ISA_AVX512: return &kern__scatter_fns_avx512;
    case KERN_ISA_AVX2_VNNI:
    case KERN_ISA_AVX2: return &kern__scatter_fns_avx2;
#endif
#ifdef KERN_NEON
    case KERN_ISA_NEON_BF16:
    case KERN_ISA_NEON_DOT:
    case KERN_ISA_NEON: return &kern__scatter_fns_neon;
#endif
    default: return &kern__scatter_fns_scalar;
    }
}
/* The rows of dtype dt on ctx's level: integers have one table (int64
 * accumulators, no vector body), floats the level's. */
static const kern__scatter_fns *kern__sc_fns_ctx(const kern_ctx *ctx, kern_dtype dt) {
    if (dt == KERN_I32 || dt == KERN_I64) return &kern__scatter_fns_int;
    return kern__scatter_fns_for(kern_ctx_isa(ctx));
}

/* Writes n int32 args (or the sentinel) to an i32/i64 row. */
static void kern__sc_put_arg(void *dst, int is64, const int32_t *a, int64_t n,
                             int64_t fill, int use_fill) {
    int64_t i;
    if (is64) {
        int64_t *d = (int64_t *)dst;
        for (i = 0; i < n; i++) d[i] = use_fill ? fill : (int64_t)a[i];
    } else {
        int32_t *d = (int32_t *)dst;
        for (i = 0; i < n; i++) d[i] = use_fill ? (int32_t)fill : a[i];
    }
}

/* ------------------------------------------------------ the row engine */

/* One reduction problem in row form (the fast path, planned calls and
 * kern_spmm_reduce all fill this in). Byte strides for rows. */
typedef struct kern__sc_job {
    const kern__scatter_fns *ops;
    kern_ctx *ctx;
    int op, mean, include_self, inplace;
    kern_dtype dt;      /* src/self/out */
    int64_t N, E, F;    /* out rows, edges (or nnz), features */
    size_t es, accsz;
    const char *self;   /* NULL: spmm (empty rows give 0) */
    int64_t self_rs;
    const char *src;
    int64_t src_rs;
    char *out;
    int64_t out_rs;
    const void *idx;    /* stream: destination of each edge */
    int idx64;
    int64_t idx_s;
    char *arg;          /* user arg_out rows or NULL */
    int64_t arg_rs;
    int arg64;
    int32_t sentinel;
    /* stream strategy */
    int P, direct0, precopied; /* precopied: out = self already (stream, direct) */
    char *acc;
    int32_t *cnt;       /* P x N counts (a partition has < 2^31 edges) */
    int32_t *pa;        /* P x N x F partial args */
    /* row-gather (csr) strategy */
    const void *rowptr; /* [N+1] */
    int rowptr64;
    const void *ids;    /* [E] source row of each entry */
    int ids64;
    const void *w;      /* spmm values or NULL */
    kern_dtype wdt;
    int pos_is_k;       /* arg records the entry position k (spmm), else ids[k] */
    int init_const;     /* spmm: start from 0 / -inf / +inf, empty rows give 0 */
    const int64_t *bounds;
    size_t tmp_bytes;
} kern__sc_job;

static inline char *kern__sc_prow(const kern__sc_job *J, int p, int64_t r) {
    if (p == 0 && J->direct0) return J->out + r * J->out_rs;
    return J->acc + (((int64_t)(p - J->direct0) * J->N + r) * J->F) * (int64_t)J->accsz;
}
static inline int32_t *kern__sc_parg(const kern__sc_job *J, int p, int64_t r) {
    return J->pa ? J->pa + ((int64_t)p * J->N + r) * J->F : NULL;
}

static void kern__sc_stream_task(void *a, int64_t p, int thread) {
    const kern__sc_job *J = (const kern__sc_job *)a;
    int64_t e0 = J->E * p / J->P, e1 = J->E * (p + 1) / J->P, e;
    int32_t *cnt = J->cnt + p * J->N;
    const int64_t rowb = J->F * (int64_t)J->accsz, is = J->idx_s, F = J->F;
    const int64_t pf_end = e1 - KERN__SC_PF;
    const kern__scatter_fns *ops = J->ops;
    const int op = J->op, self0 = p == 0 && J->include_self, pre = p == 0 && J->precopied;
    const kern_dtype dt = J->dt;
    /* partition p's accumulator rows: out itself (direct) or scratch */
    char *base = p == 0 && J->direct0
                     ? J->out
                     : J->acc + (int64_t)(p - J->direct0) * J->N * rowb;
    const int64_t brs = p == 0 && J->direct0 ? J->out_rs : rowb;
    int32_t *pa = J->pa ? J->pa + p * J->N * F : NULL;
    /* the GNN hot case (f32 rows, no arg) calls the f32 row loop directly */
    const int fastf32 = ops->upd_f32 && dt == KERN_F32 && !pa;
    (void)thread;
    memset(cnt, 0, (size_t)J->N * sizeof(int32_t));
    for (e = e0; e < e1; e++) {
        int64_t r = kern__sc_ix(J->idx, J->idx64, e * is);
        const char *x = J->src + e * J->src_rs;
        char *acc = base + r * brs;
        int32_t *ar = pa ? pa + r * F : NULL;
        if (e < pf_end)
            kern__sc_prefetch(base + kern__sc_ix(J->idx, J->idx64, (e + KERN__SC_PF) * is) * brs,
                              rowb);
        if (KERN_LIKELY(cnt[r]++ != 0) || pre) {
            if (ar && cnt[r] == 1) { /* first touch of a precopied row */
                int64_t i;
                for (i = 0; i < F; i++) ar[i] = J->sentinel;
            }
            if (fastf32) {
                ops->upd_f32(op, (float *)acc, (const float *)x, F, 1.0f);
                continue;
            }
            ops->upd(op, acc, x, dt, 1.0f, F, ar, (int32_t)e);
        } else if (self0) {
            ops->set(acc, J->self + r * J->self_rs, dt, 1.0f, F, ar, J->sentinel);
            ops->upd(op, acc, x, dt, 1.0f, F, ar, (int32_t)e);
        } else {
            ops->set(acc, x, dt, 1.0f, F, ar, (int32_t)e);
        }
    }
}

/* out = self, rows [N t / n, N (t+1) / n) (sequential: cheaper than reading
 * self rows at random on their first touch) */
typedef struct kern__sc_cp {
    const kern__sc_job *J;
    int64_t n;
} kern__sc_cp;
static void kern__sc_precopy_task(void *a, int64_t t, int thread) {
    const kern__sc_cp *C = (const kern__sc_cp *)a;
    const kern__sc_job *J = C->J;
    int64_t r0 = J->N * t / C->n, r1 = J->N * (t + 1) / C->n, r;
    const size_t rb = (size_t)J->F * J->es;
    (void)thread;
    if (J->self_rs == J->out_rs && (int64_t)rb == J->out_rs) {
        memcpy(J->out + r0 * J->out_rs, J->self + r0 * J->self_rs, rb * (size_t)(r1 - r0));
        return;
    }
    for (r = r0; r < r1; r++) memcpy(J->out + r * J->out_rs, J->self + r * J->self_rs, rb);
}

static void kern__sc_copy_row(char *dst, const char *src, size_t bytes) {
    if (dst != src) memcpy(dst, src, bytes);
}

/* Merge the partials of rows [r0, r1). */
static void kern__sc_combine_task(void *a, int64_t t, int thread) {
    const kern__sc_job *J = (const kern__sc_job *)a;
    const kern__scatter_fns *ops = J->ops;
    int64_t nb = J->bounds[0];
    int64_t r0 = J->N * t / nb, r1 = J->N * (t + 1) / nb, r;
    char *tmp = (char *)kern__thread_scratch(J->ctx, thread);
    int32_t *targ = (int32_t *)(tmp + ((J->F * (int64_t)J->accsz + 63) & ~(int64_t)63));
    const size_t rowbytes = (size_t)J->F * J->es;
    for (r = r0; r < r1; r++) {
        int64_t C = 0;
        int p, p0 = -1;
        char *orow = J->out + r * J->out_rs;
        char *acc;
        int32_t *aa;
        for (p = 0; p < J->P; p++) {
            int64_t c = J->cnt[(int64_t)p * J->N + r];
            if (c && p0 < 0) p0 = p;
            C += c;
        }
        if (C == 0) {
            if (!J->inplace && !J->precopied)
                kern__sc_copy_row(orow, J->self + r * J->self_rs, rowbytes);
            if (J->arg)
                kern__sc_put_arg(J->arg + r * J->arg_rs, J->arg64, NULL, J->F, J->sentinel, 1);
            continue;
        }
        if (p0 == 0 || !J->include_self) {
            acc = kern__sc_prow(J, p0, r);
            aa = kern__sc_parg(J, p0, r);
        } else {
            acc = tmp;
            aa = J->pa ? targ : NULL;
            ops->set(tmp, J->self + r * J->self_rs, J->dt, 1.0f, J->F, aa, J->sentinel);
            ops->merge(J->op, tmp, aa, kern__sc_prow(J, p0, r), kern__sc_parg(J, p0, r), J->F);
        }
        for (p = p0 + 1; p < J->P; p++)
            if (J->cnt[(int64_t)p * J->N + r])
                ops->merge(J->op, acc, aa, kern__sc_prow(J, p, r), kern__sc_parg(J, p, r), J->F);
        if (acc != orow || J->mean)
            ops->store(orow, J->dt, acc, J->F, J->mean ? C + (J->include_self ? 1 : 0) : 0);
        if (J->arg) kern__sc_put_arg(J->arg + r * J->arg_rs, J->arg64, aa, J->F, 0, 0);
    }
}

/* Row-gather: rows [bounds[t], bounds[t+1]) each reduced from its entries. */
static void kern__sc_gather_task(void *a, int64_t t, int thread) {
    const kern__sc_job *J = (const kern__sc_job *)a;
    const kern__scatter_fns *ops = J->ops;
    int64_t r0 = J->bounds[t], r1 = J->bounds[t + 1], r;
    char *acc = (char *)kern__thread_scratch(J->ctx, thread);
    int32_t *aa = J->arg ? (int32_t *)(acc + ((J->F * (int64_t)J->accsz + 63) & ~(int64_t)63))
                         : NULL;
    const size_t rowbytes = (size_t)J->F * J->es;
    const int64_t srcb = J->F * (int64_t)J->es;
    /* f32 rows without arg: the level's f32 row loop, called directly */
    const int fastf32 = ops->upd_f32 && J->dt == KERN_F32 && !aa;
    int64_t kend = kern__sc_ix(J->rowptr, J->rowptr64, r1);
    for (r = r0; r < r1; r++) {
        int64_t s = kern__sc_ix(J->rowptr, J->rowptr64, r);
        int64_t e = kern__sc_ix(J->rowptr, J->rowptr64, r + 1), k = s;
        char *orow = J->out + r * J->out_rs;
        if (s == e) {
            if (J->init_const) memset(orow, 0, rowbytes);
            else if (!J->inplace) kern__sc_copy_row(orow, J->self + r * J->self_rs, rowbytes);
            if (J->arg)
                kern__sc_put_arg(J->arg + r * J->arg_rs, J->arg64, NULL, J->F, J->sentinel, 1);
            continue;
        }
        if (J->init_const) {
            /* PyTorch spmm_reduce: start from 0 / -inf / +inf, arg = nnz */
            int64_t i;
            float init = J->op == KERN__SC_MAX   ? kern__bits_f32(0xff800000u)
                         : J->op == KERN__SC_MIN ? kern__bits_f32(0x7f800000u)
                                                 : 0.0f;
            for (i = 0; i < J->F; i++) ((float *)acc)[i] = init;
            if (aa)
                for (i = 0; i < J->F; i++) aa[i] = J->sentinel;
        } else if (J->include_self) {
            ops->set(acc, J->self + r * J->self_rs, J->dt, 1.0f, J->F, aa, J->sentinel);
        } else {
            int64_t id = kern__sc_ix(J->ids, J->ids64, k);
            ops->set(acc, J->src + id * J->src_rs, J->dt, 1.0f, J->F, aa, (int32_t)id);
            k++;
        }
        for (; k < e; k++) {
            int64_t id = kern__sc_ix(J->ids, J->ids64, k);
            float w = 1.0f;
            if (k + KERN__SC_PF < kend)
                kern__sc_prefetch(J->src + kern__sc_ix(J->ids, J->ids64, k + KERN__SC_PF) *
                                               J->src_rs,
                                  srcb);
            if (J->w) w = kern__sc_ldf(J->w, J->wdt, k);
            if (fastf32) {
                ops->upd_f32(J->op, (float *)acc, (const float *)(J->src + id * J->src_rs), J->F, w);
                continue;
            }
            ops->upd(J->op, acc, J->src + id * J->src_rs, J->dt, w, J->F, aa,
                     (int32_t)(J->pos_is_k ? k : id));
        }
        ops->store(orow, J->dt, acc, J->F,
                   J->mean ? (e - s) + (J->include_self && !J->init_const ? 1 : 0) : 0);
        if (J->arg) kern__sc_put_arg(J->arg + r * J->arg_rs, J->arg64, aa, J->F, 0, 0);
    }
}

/* Splits rows [0, N) into n tasks of about equal (entries + rows). */
static void kern__sc_split_rows(const void *rowptr, int is64, int64_t N, int64_t n,
                                int64_t *bounds) {
    int64_t nnz = kern__sc_ix(rowptr, is64, N), t;
    double total = (double)nnz + (double)N;
    bounds[0] = 0;
    for (t = 1; t < n; t++) {
        double target = total * (double)t / (double)n;
        int64_t lo = bounds[t - 1], hi = N;
        while (lo < hi) { /* first r with rowptr[r] + r >= target */
            int64_t mid = lo + (hi - lo) / 2;
            if ((double)kern__sc_ix(rowptr, is64, mid) + (double)mid < target) lo = mid + 1;
            else hi = mid;
        }
        bounds[t] = lo;
    }
    bounds[n] = N;
}

/* Runs the row-gather engine; J->rowptr/ids set. Uses thread scratch and
 * a small bounds array from `bounds_mem` (n_tasks + 1 entries). */
/* Per-thread scratch of the row engines: one accumulator row and one arg
 * row (stream combine and row gather alike). */
static size_t kern__sc_row_scratch(const kern__sc_job *J) {
    return kern__sc_sz(kern__sc_sz(64, J->F, (int64_t)J->accsz), J->F, 4);
}

static kern_status kern__sc_run_gather(kern__sc_job *J, int64_t *bounds_mem, int64_t ntasks) {
    size_t tmp = kern__sc_row_scratch(J);
    kern_status st = kern__reserve_thread_scratch(J->ctx, tmp);
    if (st != KERN_OK) return st;
    kern__sc_split_rows(J->rowptr, J->rowptr64, J->N, ntasks, bounds_mem);
    J->bounds = bounds_mem;
    return kern_parallel_for(J->ctx, ntasks, kern__sc_gather_task, J);
}

static int64_t kern__sc_gather_ntasks(kern_ctx *ctx, int64_t N) {
    int64_t n = (int64_t)kern_ctx_threads(ctx) * 8;
    if (n > N) n = N;
    return n < 1 ? 1 : n;
}

/* ---------------------------------------------------- counting sort */

typedef struct kern__sc_sort {
    const void *key;
    int key64;
    int64_t key_s, E, N;
    int P;
    int64_t *hist;  /* P x N, then running positions */
    int64_t *rowptr;
    void *perm;
    int perm64;
    const void *carry; /* optional: perm gets carry[e] instead of e */
    int carry64;
} kern__sc_sort;

static void kern__sc_hist_task(void *a, int64_t p, int thread) {
    const kern__sc_sort *S = (const kern__sc_sort *)a;
    int64_t e0 = S->E * p / S->P, e1 = S->E * (p + 1) / S->P, e;
    int64_t *h = S->hist + p * S->N;
    (void)thread;
    memset(h, 0, (size_t)S->N * sizeof(int64_t));
    for (e = e0; e < e1; e++) h[kern__sc_ix(S->key, S->key64, e * S->key_s)]++;
}
static void kern__sc_place_task(void *a, int64_t p, int thread) {
    const kern__sc_sort *S = (const kern__sc_sort *)a;
    int64_t e0 = S->E * p / S->P, e1 = S->E * (p + 1) / S->P, e;
    int64_t *h = S->hist + p * S->N;
    (void)thread;
    for (e = e0; e < e1; e++) {
        int64_t pos = h[kern__sc_ix(S->key, S->key64, e * S->key_s)]++;
        if (S->perm64) ((int64_t *)S->perm)[pos] = e;
        else ((int32_t *)S->perm)[pos] = (int32_t)e;
    }
}
/* Stable counting sort of E keys in [0, N) (validated by the caller):
 * rowptr [N+1], perm [E]. hist: P x N int64 scratch. */
static kern_status kern__sc_counting_sort(kern_ctx *ctx, kern__sc_sort *S) {
    int64_t r, run = 0;
    int p;
    kern_status st = kern_parallel_for(ctx, S->P, kern__sc_hist_task, S);
    if (st != KERN_OK) return st;
    for (r = 0; r < S->N; r++) {
        S->rowptr[r] = run;
        for (p = 0; p < S->P; p++) {
            int64_t c = S->hist[(int64_t)p * S->N + r];
            S->hist[(int64_t)p * S->N + r] = run;
            run += c;
        }
    }
    S->rowptr[S->N] = run;
    return kern_parallel_for(ctx, S->P, kern__sc_place_task, S);
}
static int kern__sc_sort_parts(kern_ctx *ctx, int64_t E) {
    int64_t P = kern_ctx_threads(ctx);
    if (E < 65536) P = 1;
    if (P > E) P = E > 0 ? E : 1;
    return (int)P;
}

/* ------------------------------------------------- index validation */

typedef struct kern__sc_it {
    int nd;
    int64_t shape[KERN_MAX_DIMS], c[KERN_MAX_DIMS];
    int64_t st[3][KERN_MAX_DIMS]; /* up to three tensors iterated together */
    int64_t off[3];
} kern__sc_it;

static void kern__sc_it_init(kern__sc_it *it, int nd, const int64_t *shape,
                             const int64_t *s0, const int64_t *s1, const int64_t *s2,
                             int64_t flat) {
    int d, k;
    const int64_t *ss[3];
    ss[0] = s0; ss[1] = s1; ss[2] = s2;
    it->nd = nd;
    for (k = 0; k < 3; k++) it->off[k] = 0;
    for (d = nd - 1; d >= 0; d--) {
        it->shape[d] = shape[d];
        it->c[d] = shape[d] > 0 ? flat % shape[d] : 0;
        flat = shape[d] > 0 ? flat / shape[d] : 0;
        for (k = 0; k < 3; k++) {
            it->st[k][d] = ss[k] ? ss[k][d] : 0;
            it->off[k] += it->c[d] * it->st[k][d];
        }
    }
}
/* Steps to the next position. Offsets never leave the views (no step
 * one past the end of a dim), so a large stride cannot overflow them. */
static inline void kern__sc_it_next(kern__sc_it *it) {
    int d, k;
    for (d = it->nd - 1; d >= 0; d--) {
        if (it->c[d] + 1 < it->shape[d]) {
            it->c[d]++;
            for (k = 0; k < 3; k++) it->off[k] += it->st[k][d];
            return;
        }
        for (k = 0; k < 3; k++) it->off[k] -= it->st[k][d] * it->c[d];
        it->c[d] = 0;
    }
}

typedef struct kern__sc_chk {
    const kern_tensor *t;
    int64_t numel, limit, nchunks;
    int64_t *bad; /* per chunk: first bad flat position, or -1 */
} kern__sc_chk;

static void kern__sc_chk_task(void *a, int64_t c, int thread) {
    const kern__sc_chk *K = (const kern__sc_chk *)a;
    int64_t f0 = K->numel * c / K->nchunks, f1 = K->numel * (c + 1) / K->nchunks, f;
    const int is64 = K->t->dtype == KERN_I64;
    kern__sc_it it;
    (void)thread;
    K->bad[c] = -1;
    if (K->t->ndim == 1) {
        int64_t s = K->t->stride[0];
        for (f = f0; f < f1; f++) {
            int64_t v = kern__sc_ix(K->t->data, is64, f * s);
            if (v < 0 || v >= K->limit) { K->bad[c] = f; return; }
        }
        return;
    }
    kern__sc_it_init(&it, K->t->ndim, K->t->shape, K->t->stride, NULL, NULL, f0);
    for (f = f0; f < f1; f++) {
        int64_t v = kern__sc_ix(K->t->data, is64, it.off[0]);
        if (v < 0 || v >= K->limit) { K->bad[c] = f; return; }
        kern__sc_it_next(&it);
    }
}

/* KERN_ERR_INDEX naming the first (row-major) value outside [0, limit). */
static kern_status kern__sc_check_index(kern_ctx *ctx, const kern_tensor *t, int64_t limit,
                                        const char *op) {
    int64_t bad[64], n = kern_tensor_numel(t), c, first = -1;
    kern__sc_chk K;
    if (n <= 0) return KERN_OK;
    K.t = t;
    K.numel = n;
    K.limit = limit;
    K.nchunks = n < 65536 ? 1 : (kern_ctx_threads(ctx) * 4 < 64 ? kern_ctx_threads(ctx) * 4 : 64);
    K.bad = bad;
    kern_parallel_for(ctx, K.nchunks, kern__sc_chk_task, &K);
    for (c = 0; c < K.nchunks; c++)
        if (bad[c] >= 0) { first = bad[c]; break; }
    if (first >= 0) {
        kern__sc_it it;
        char pos[160];
        size_t len = 0;
        int d;
        kern__sc_it_init(&it, t->ndim, t->shape, t->stride, NULL, NULL, first);
        pos[0] = 0;
        for (d = 0; d < t->ndim && len < sizeof pos - 24; d++)
            len += (size_t)snprintf(pos + len, sizeof pos - len, d ? ",%lld" : "%lld",
                                    (long long)it.c[d]);
        return kern__err(KERN_ERR_INDEX,
                         "%s: index[%s]=%lld is out of range [0, %lld)", op, pos,
                         (long long)kern__sc_ix(t->data, t->dtype == KERN_I64, it.off[0]),
                         (long long)limit);
    }
    return KERN_OK;
}

/* ------------------------------------------------- argument checks */

static int kern__sc_data_dtype(kern_dtype dt) {
    return dt == KERN_F32 || dt == KERN_BF16 || dt == KERN_F16 || dt == KERN_I32 ||
           dt == KERN_I64;
}
static int kern__sc_same_view(const kern_tensor *a, const kern_tensor *b) {
    int d;
    if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->stride[d] != b->stride[d]))
            return 0;
    return 1;
}
static kern_status kern__sc_same_shape(const kern_tensor *a, const kern_tensor *b,
                                       const char *op, const char *an, const char *bn) {
    char s1[96], s2[96];
    int d, ok = a->ndim == b->ndim;
    for (d = 0; ok && d < a->ndim; d++) ok = a->shape[d] == b->shape[d];
    if (ok) return KERN_OK;
    return kern__err(KERN_ERR_SHAPE, "%s: %s.shape=%s but %s.shape=%s", op, an,
                     kern_shape_str(a, s1, sizeof s1), bn, kern_shape_str(b, s2, sizeof s2));
}

/* The fast-path row form of a 2-D (or 1-D) tensor: row stride and a unit
 * (or irrelevant) feature stride. */
static int kern__sc_rows_ok(const kern_tensor *t) {
    if (t->ndim == 1) return 1;
    return t->ndim == 2 && (t->shape[1] <= 1 || t->stride[1] == 1);
}
static int64_t kern__sc_feat(const kern_tensor *t) { return t->ndim == 2 ? t->shape[1] : 1; }

/* -------------------------------------------- general path (any dim) */

typedef struct kern__sc_gen {
    const kern__scatter_fns *ops;
    kern_ctx *ctx;
    int op, mean, include_self, dim, nd;
    kern_dtype dt;
    size_t es;
    const kern_tensor *self, *src, *out, *index, *arg;
    int64_t L, nlines, ntasks;
    int64_t lshape[KERN_MAX_DIMS]; /* index shape with dim set to 1 */
    int32_t sentinel;
} kern__sc_gen;

/* prefill: out = self, arg = sentinel, over the whole output */
typedef struct kern__sc_fill {
    const kern_tensor *self, *out, *arg;
    int64_t numel, ntasks;
    int32_t sentinel;
} kern__sc_fill;
static void kern__sc_fill_task(void *a, int64_t t, int thread) {
    const kern__sc_fill *Fl = (const kern__sc_fill *)a;
    int64_t f0 = Fl->numel * t / Fl->ntasks, f1 = Fl->numel * (t + 1) / Fl->ntasks, f;
    size_t es = kern_dtype_size(Fl->out->dtype);
    kern__sc_it it;
    (void)thread;
    kern__sc_it_init(&it, Fl->out->ndim, Fl->out->shape, Fl->out->stride, Fl->self->stride,
                     Fl->arg ? Fl->arg->stride : NULL, f0);
    for (f = f0; f < f1; f++) {
        if (Fl->self->data != Fl->out->data || it.off[0] != it.off[1])
            memcpy((char *)Fl->out->data + it.off[0] * (int64_t)es,
                   (const char *)Fl->self->data + it.off[1] * (int64_t)es, es);
        if (Fl->arg) {
            if (Fl->arg->dtype == KERN_I64) ((int64_t *)Fl->arg->data)[it.off[2]] = Fl->sentinel;
            else ((int32_t *)Fl->arg->data)[it.off[2]] = Fl->sentinel;
        }
        kern__sc_it_next(&it);
    }
}

/* sorts n uint64 keys (tmp: n more): insertion sort when short, else an
 * LSD radix sort over the bytes the largest key uses */
static void kern__sc_sort_keys(uint64_t *k, uint64_t *tmp, int64_t n) {
    uint64_t mx = 0, *a = k, *b = tmp, *t;
    int64_t i;
    int shift;
    if (n <= 48) {
        for (i = 1; i < n; i++) {
            uint64_t v = k[i];
            int64_t j = i - 1;
            while (j >= 0 && k[j] > v) { k[j + 1] = k[j]; j--; }
            k[j + 1] = v;
        }
        return;
    }
    for (i = 0; i < n; i++) if (k[i] > mx) mx = k[i];
    for (shift = 0; shift < 64 && (mx >> shift) != 0; shift += 8) {
        int64_t cnt[257];
        memset(cnt, 0, sizeof cnt);
        for (i = 0; i < n; i++) cnt[((a[i] >> shift) & 255) + 1]++;
        for (i = 0; i < 256; i++) cnt[i + 1] += cnt[i];
        for (i = 0; i < n; i++) b[cnt[(a[i] >> shift) & 255]++] = a[i];
        t = a; a = b; b = t;
    }
    if (a != k) memcpy(k, a, (size_t)n * sizeof(uint64_t));
}

static void kern__sc_gen_task(void *a, int64_t t, int thread) {
    const kern__sc_gen *G = (const kern__sc_gen *)a;
    const kern__scatter_fns *ops = G->ops;
    int64_t l0 = G->nlines * t / G->ntasks, l1 = G->nlines * (t + 1) / G->ntasks, l;
    const int64_t L = G->L;
    uint64_t *keys = (uint64_t *)kern__thread_scratch(G->ctx, thread);
    uint64_t *tmp = keys + L;
    int64_t *accmem = (int64_t *)(tmp + L);
    int32_t aa;
    const int is64 = G->index->dtype == KERN_I64;
    const int64_t isd = G->index->stride[G->dim], ssd = G->src->stride[G->dim];
    const int64_t osd = G->out->stride[G->dim], selfsd = G->self->stride[G->dim];
    const int64_t asd = G->arg ? G->arg->stride[G->dim] : 0;
    kern__sc_it it, it2;
    if (l0 >= l1) return;
    /* lines: iterate the index shape with dim collapsed to 1 */
    kern__sc_it_init(&it, G->nd, G->lshape, G->index->stride, G->src->stride, G->out->stride,
                     l0);
    kern__sc_it_init(&it2, G->nd, G->lshape, G->self->stride, G->arg ? G->arg->stride : NULL,
                     NULL, l0);
    for (l = l0; l < l1; l++) {
        int64_t j, i0;
        for (j = 0; j < L; j++)
            keys[j] = (uint64_t)kern__sc_ix(G->index->data, is64, it.off[0] + j * isd) *
                          (uint64_t)L + (uint64_t)j;
        kern__sc_sort_keys(keys, tmp, L);
        for (i0 = 0; i0 < L;) {
            int64_t tgt = (int64_t)(keys[i0] / (uint64_t)L), i1 = i0, cnt;
            char *op_ = (char *)G->out->data + (it.off[2] + tgt * osd) * (int64_t)G->es;
            const char *sp = (const char *)G->self->data + (it2.off[0] + tgt * selfsd) * (int64_t)G->es;
            while (i1 < L && (int64_t)(keys[i1] / (uint64_t)L) == tgt) i1++;
            cnt = i1 - i0;
            if (G->include_self) {
                ops->set(accmem, sp, G->dt, 1.0f, 1, &aa, G->sentinel);
            } else {
                int64_t jj = (int64_t)(keys[i0] % (uint64_t)L);
                ops->set(accmem, (const char *)G->src->data + (it.off[1] + jj * ssd) * (int64_t)G->es,
                         G->dt, 1.0f, 1, &aa, (int32_t)jj);
                i0++;
            }
            for (; i0 < i1; i0++) {
                int64_t jj = (int64_t)(keys[i0] % (uint64_t)L);
                ops->upd(G->op, accmem,
                         (const char *)G->src->data + (it.off[1] + jj * ssd) * (int64_t)G->es,
                         G->dt, 1.0f, 1, &aa, (int32_t)jj);
            }
            ops->store(op_, G->dt, accmem, 1, G->mean ? cnt + (G->include_self ? 1 : 0) : 0);
            if (G->arg) {
                int64_t ao = it2.off[1] + tgt * asd;
                if (G->arg->dtype == KERN_I64) ((int64_t *)G->arg->data)[ao] = aa;
                else ((int32_t *)G->arg->data)[ao] = aa;
            }
        }
        kern__sc_it_next(&it);
        kern__sc_it_next(&it2);
    }
}

/* --------------------------------------------------- scatter_reduce */

static kern_status kern__sc_validate_common(const char *op, const kern_tensor *self,
                                            const kern_tensor *src, kern_reduce reduce,
                                            const kern_tensor *out, const kern_tensor *arg_out) {
    kern_status st;
    if (!self || !src || !out)
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op,
                         !self ? "self" : !src ? "src" : "out");
    if ((st = kern_tensor_check(self, op, "self")) != KERN_OK) return st;
    if ((st = kern_tensor_check(src, op, "src")) != KERN_OK) return st;
    if ((st = kern_tensor_check(out, op, "out")) != KERN_OK) return st;
    if ((int)reduce <= (int)KERN_REDUCE_INVALID || (int)reduce >= (int)KERN_REDUCE_COUNT)
        return kern__err(KERN_ERR_ARG,
                         "%s: reduce=%d is not a kern_reduce (sum, prod, mean, amax, amin; 0 "
                         "is reserved)",
                         op, (int)reduce);
    if (!kern__sc_data_dtype(self->dtype))
        return kern__err(KERN_ERR_DTYPE, "%s: self.dtype=%s is not f32, bf16, f16, i32 or i64",
                         op, kern_dtype_name(self->dtype));
    if (src->dtype != self->dtype)
        return kern__err(KERN_ERR_DTYPE, "%s: src.dtype=%s but self.dtype=%s", op,
                         kern_dtype_name(src->dtype), kern_dtype_name(self->dtype));
    if (out->dtype != self->dtype)
        return kern__err(KERN_ERR_DTYPE, "%s: out.dtype=%s but self.dtype=%s", op,
                         kern_dtype_name(out->dtype), kern_dtype_name(self->dtype));
    if (self->ndim < 1)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: 0-dim tensors are not supported", op);
    if ((st = kern__sc_same_shape(out, self, op, "out", "self")) != KERN_OK) return st;
    if ((st = kern__sc_check_writable(out, op, "out")) != KERN_OK) return st;
    if (arg_out) {
        if ((st = kern_tensor_check(arg_out, op, "arg_out")) != KERN_OK) return st;
        if (reduce != KERN_REDUCE_AMAX && reduce != KERN_REDUCE_AMIN)
            return kern__err(KERN_ERR_ARG, "%s: arg_out is only defined for amax/amin, not %s",
                             op, kern_reduce_name(reduce));
        if (arg_out->dtype != KERN_I32 && arg_out->dtype != KERN_I64)
            return kern__err(KERN_ERR_DTYPE, "%s: arg_out.dtype=%s is not i32 or i64", op,
                             kern_dtype_name(arg_out->dtype));
        if ((st = kern__sc_same_shape(arg_out, self, op, "arg_out", "self")) != KERN_OK)
            return st;
        if ((st = kern__sc_check_writable(arg_out, op, "arg_out")) != KERN_OK) return st;
        if (kern_tensors_overlap(arg_out, out) || kern_tensors_overlap(arg_out, src) ||
            kern_tensors_overlap(arg_out, self))
            return kern__err(KERN_ERR_ARG, "%s: arg_out overlaps another tensor", op);
    }
    if (kern_tensors_overlap(out, src))
        return kern__err(KERN_ERR_ARG, "%s: out overlaps src", op);
    if (kern_tensors_overlap(out, self) && !kern__sc_same_view(out, self))
        return kern__err(KERN_ERR_ARG,
                         "%s: out overlaps self without being the same view (in place "
                         "needs out == self)",
                         op);
    return KERN_OK;
}

/* Fills the row-form fields shared by the stream and gather strategies. */
static void kern__sc_job_rows(kern__sc_job *J, kern_ctx *ctx, const kern_tensor *self,
                              const kern_tensor *src, kern_reduce reduce, int include_self,
                              const kern_tensor *out, const kern_tensor *arg_out, int64_t E) {
    memset(J, 0, sizeof *J);
    J->ctx = ctx;
    J->dt = self->dtype;
    J->ops = kern__sc_fns_ctx(ctx, self->dtype);
    J->op = kern__sc_op_of(reduce);
    J->mean = reduce == KERN_REDUCE_MEAN;
    J->include_self = include_self != 0;
    J->inplace = kern__sc_same_view(out, self);
    J->es = kern_dtype_size(self->dtype);
    J->accsz = J->ops->acc_size;
    J->N = self->shape[0];
    J->F = kern__sc_feat(self);
    J->E = E;
    J->self = (const char *)self->data;
    J->self_rs = kern__sc_rsb(self, J->es);
    J->src = (const char *)src->data;
    J->src_rs = kern__sc_rsb(src, J->es);
    J->out = (char *)out->data;
    J->out_rs = kern__sc_rsb(out, J->es);
    if (arg_out) {
        J->arg = (char *)arg_out->data;
        J->arg64 = arg_out->dtype == KERN_I64;
        J->arg_rs = kern__sc_rsb(arg_out, J->arg64 ? 8 : 4);
    }
    J->sentinel = (int32_t)E;
}

/* The fast path's strategy and scratch (a function of the shapes and the
 * context only). Sets J->P and J->direct0. */
typedef struct kern__sc_fplan {
    int csr;               /* counting sort + row gather, else stream */
    size_t accb, pab, cntb; /* stream: partial outputs, arg partials, counts */
    size_t shared, thread; /* kern__workspace / thread scratch bytes */
} kern__sc_fplan;

static void kern__sc_fast_plan(kern_ctx *ctx, kern__sc_job *J, kern__sc_fplan *pl) {
    const int T = kern_ctx_threads(ctx);
    int64_t N = J->N, E = J->E, F = J->F;
    int P = T;
    size_t total;
    memset(pl, 0, sizeof *pl);
    if (E < 4096 || (double)E * (double)F < 262144.0) P = 1;
    if (P > E) P = E > 0 ? (int)E : 1;
    while (E / P >= INT32_MAX) P++;
    J->P = P;
    J->direct0 = J->dt == KERN_F32 || J->dt == KERN_I64;
    { /* N * F <= self's element count; the products with P may not fit:
       * sizes saturate at SIZE_MAX, which no allocation gives */
        int64_t pnf;
        pl->accb = kern_mul_overflow_i64(P - J->direct0, N * F, &pnf)
                       ? SIZE_MAX : kern__sc_sz(0, pnf, (int64_t)J->accsz);
        pl->pab = !J->arg ? 0 : kern_mul_overflow_i64(P, N * F, &pnf) ? SIZE_MAX
                                                                      : kern__sc_sz(0, pnf, 4);
        pl->cntb = kern__sc_sz(0, N, 4 * (int64_t)P);
        total = kern__sc_add(kern__sc_add(pl->accb, pl->pab), pl->cntb);
    }
    pl->thread = kern__sc_row_scratch(J);
    /* Measured (docs/scatter.md): with 2+ threads the partial outputs of
     * a low-degree graph fall out of L3 and the csr strategy's row gathers
     * scale better; high-degree (power-law) graphs keep hot rows cached
     * and stream wins. One thread: stream always. */
    pl->csr = kern_ctx_deterministic(ctx) || total > KERN_SCATTER_STREAM_MAX_BYTES ||
              (P > 1 && E < (int64_t)KERN__SC_CSR_DEGREE * N);
    if (pl->csr) {
        /* the same parts as kern__sc_fast lays out */
        int64_t nt = kern__sc_gather_ntasks(ctx, N);
        size_t rpb = kern__sc_sz(64, N, 8) /* N + 1 entries */;
        size_t pb = kern__sc_sz(0, E, E > INT32_MAX ? 8 : 4);
        size_t hb = kern__sc_sz(0, N, 8 * (int64_t)kern__sc_sort_parts(ctx, E));
        pl->shared = kern__sc_sz(kern__sc_add(kern__sc_add(rpb, pb), hb), nt + 1, 8);
    } else {
        pl->shared = total;
    }
}

/* The fast path: index (1-D view, length E, element stride idx_s). */
static kern_status kern__sc_fast(kern_ctx *ctx, kern__sc_job *J, const kern_tensor *index1d,
                                 const kern__sc_fplan *pl) {
    const int T = kern_ctx_threads(ctx);
    int64_t N = J->N, E = J->E;
    size_t accb = pl->accb, pab = pl->pab;
    int64_t nb;
    kern_status st;
    J->idx = index1d->data;
    J->idx64 = index1d->dtype == KERN_I64;
    J->idx_s = index1d->stride[0];
    if (pl->csr) {
        /* csr strategy: counting sort, then row gather */
        kern__sc_sort S;
        int64_t nt = kern__sc_gather_ntasks(ctx, N);
        int SP = kern__sc_sort_parts(ctx, E);
        size_t rpb = kern__sc_sz(64, N, 8) /* N + 1 entries */;
        size_t pb = kern__sc_sz(0, E, E > INT32_MAX ? 8 : 4), hb = kern__sc_sz(0, N, 8 * (int64_t)SP);
        char *w = (char *)kern__workspace(ctx, pl->shared);
        if (!w) return kern__sc_nomem("kern_scatter_reduce", pl->shared);
        memset(&S, 0, sizeof S);
        S.key = J->idx; S.key64 = J->idx64; S.key_s = J->idx_s; S.E = E; S.N = N; S.P = SP;
        S.rowptr = (int64_t *)w;
        S.perm = w + rpb;
        S.perm64 = E > INT32_MAX;
        S.hist = (int64_t *)(w + rpb + pb);
        if ((st = kern__sc_counting_sort(ctx, &S)) != KERN_OK) return st;
        J->rowptr = S.rowptr; J->rowptr64 = 1;
        J->ids = S.perm; J->ids64 = S.perm64;
        return kern__sc_run_gather(J, (int64_t *)((char *)S.hist + hb), nt);
    }
    {
        char *w = (char *)kern__workspace(ctx, pl->shared);
        int64_t bounds[1];
        if (!w) return kern__sc_nomem("kern_scatter_reduce", pl->shared);
        if ((st = kern__reserve_thread_scratch(ctx, pl->thread)) != KERN_OK) return st;
        J->acc = w;
        J->pa = J->arg ? (int32_t *)(w + accb) : NULL;
        J->cnt = (int32_t *)(w + accb + pab);
        J->precopied = J->direct0 && J->include_self && !J->inplace;
        if (J->precopied) {
            kern__sc_cp C;
            C.J = J;
            C.n = (int64_t)T * 4 < N ? (int64_t)T * 4 : N;
            if ((st = kern_parallel_for(ctx, C.n, kern__sc_precopy_task, &C)) != KERN_OK) return st;
        }
        if ((st = kern_parallel_for(ctx, J->P, kern__sc_stream_task, J)) != KERN_OK) return st;
        nb = (int64_t)T * 8;
        if (nb > N) nb = N;
        if (nb < 1) nb = 1;
        bounds[0] = nb;
        J->bounds = bounds;
        return kern_parallel_for(ctx, N > 0 ? nb : 0, kern__sc_combine_task, J);
    }
}

/* Validates kern_scatter_reduce's arguments except the index values
 * (writes nothing): *idx is the index as used (the GNN form expanded),
 * *dim_out the resolved dim, *fast whether the GNN fast path runs. */
static kern_status kern__sc_reduce_check(const char *op, const kern_tensor *self, int dim,
                                         const kern_tensor *index, const kern_tensor *src,
                                         kern_reduce reduce, const kern_tensor *out,
                                         const kern_tensor *arg_out, kern_tensor *idx_out,
                                         int *dim_out, int *fast_out) {
    kern_status st;
    kern_tensor idx;
    int nd, d, fast;
    if (!index) return kern__err(KERN_ERR_ARG, "%s: index is NULL", op);
    if ((st = kern_tensor_check(index, op, "index")) != KERN_OK) return st;
    if (index->dtype != KERN_I32 && index->dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: index.dtype=%s is not an integer type (i32/i64)",
                         op, kern_dtype_name(index->dtype));
    if ((st = kern__sc_validate_common(op, self, src, reduce, out, arg_out)) != KERN_OK)
        return st;
    nd = self->ndim;
    if (dim < -nd || dim >= nd)
        return kern__err(KERN_ERR_ARG, "%s: dim=%d is out of range for %d dims", op, dim, nd);
    if (dim < 0) dim += nd;
    if (src->ndim != nd)
        return kern__err(KERN_ERR_SHAPE, "%s: src has %d dims but self has %d", op, src->ndim, nd);
    idx = *index;
    if (index->ndim == 1 && nd == 2 && dim == 0) { /* GNN form: expand over features */
        idx.ndim = 2;
        idx.shape[1] = self->shape[1];
        idx.stride[1] = 0;
    } else if (index->ndim != nd) {
        return kern__err(KERN_ERR_SHAPE, "%s: index has %d dims but self has %d", op,
                         index->ndim, nd);
    }
    for (d = 0; d < nd; d++) {
        if (idx.shape[d] > src->shape[d])
            return kern__err(KERN_ERR_SHAPE, "%s: index.shape[%d]=%lld > src.shape[%d]=%lld", op,
                             d, (long long)idx.shape[d], d, (long long)src->shape[d]);
        if (d != dim && idx.shape[d] > self->shape[d])
            return kern__err(KERN_ERR_SHAPE, "%s: index.shape[%d]=%lld > self.shape[%d]=%lld", op,
                             d, (long long)idx.shape[d], d, (long long)self->shape[d]);
    }
    if (arg_out && idx.shape[dim] >= INT32_MAX)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: arg_out needs index.shape[%d]=%lld < 2^31-1", op, dim,
                         (long long)idx.shape[dim]);
    if (kern_tensors_overlap(out, index))
        return kern__err(KERN_ERR_ARG, "%s: out overlaps index", op);
    if (arg_out && kern_tensors_overlap(arg_out, index))
        return kern__err(KERN_ERR_ARG, "%s: arg_out overlaps index", op);
    fast = dim == 0 && nd <= 2 && kern__sc_rows_ok(self) && kern__sc_rows_ok(src) &&
           kern__sc_rows_ok(out) && (!arg_out || kern__sc_rows_ok(arg_out)) &&
           (nd == 1 || (idx.shape[1] == self->shape[1] &&
                        (idx.stride[1] == 0 || idx.shape[1] <= 1)));
    *idx_out = idx;
    *dim_out = dim;
    *fast_out = fast;
    return KERN_OK;
}

/* The scratch of a checked kern_scatter_reduce on ctx (the fast path's
 * strategy plan, or the general path's per-thread line buffers). */
static void kern__sc_reduce_scratch(kern_ctx *ctx, const kern_tensor *self, int dim,
                                    const kern_tensor *idx, const kern_tensor *src,
                                    kern_reduce reduce, int include_self, const kern_tensor *out,
                                    const kern_tensor *arg_out, int fast, kern__sc_job *J,
                                    kern__sc_fplan *pl, size_t *shared, size_t *thread) {
    *shared = *thread = 0;
    memset(pl, 0, sizeof *pl);
    if (fast) {
        kern__sc_job_rows(J, ctx, self, src, reduce, include_self, out, arg_out, idx->shape[0]);
        if (J->N == 0 || J->F == 0) return;
        kern__sc_fast_plan(ctx, J, pl);
        *shared = pl->shared;
        *thread = pl->thread;
    } else {
        /* none for an empty index (whose other dims may be anything, their
         * product too) */
        if (kern_tensor_numel(idx) > 0) *thread = kern__sc_sz(64, idx->shape[dim], 16);
    }
}

KERN_API kern_status kern_scatter_reduce_workspace_size(
    kern_ctx *ctx, const kern_tensor *self, int dim, const kern_tensor *index,
    const kern_tensor *src, kern_reduce reduce, int include_self, const kern_tensor *out,
    const kern_tensor *arg_out, size_t *bytes) {
    static const char *op = "kern_scatter_reduce_workspace_size";
    kern_status st;
    kern_tensor idx;
    kern__sc_job J;
    kern__sc_fplan pl;
    size_t sh, th;
    int fast;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if ((st = kern__sc_reduce_check(op, self, dim, index, src, reduce, out, arg_out, &idx, &dim,
                                    &fast)) != KERN_OK)
        return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__sc_reduce_scratch(ctx, self, dim, &idx, src, reduce, include_self, out, arg_out, fast,
                            &J, &pl, &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_scatter_reduce(kern_ctx *ctx, const kern_tensor *self, int dim,
                                         const kern_tensor *index, const kern_tensor *src,
                                         kern_reduce reduce, int include_self,
                                         const kern_tensor *out, const kern_tensor *arg_out,
                                         const kern_scatter_params *params) {
    static const char *op = "kern_scatter_reduce";
    kern_status st;
    kern_tensor idx;
    kern__sc_job J;
    kern__sc_fplan pl;
    size_t sh, th;
    int nd, d, fast;
    if ((st = kern__sc_reduce_check(op, self, dim, index, src, reduce, out, arg_out, &idx, &dim,
                                    &fast)) != KERN_OK)
        return st;
    nd = self->ndim;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__sc_reduce_scratch(ctx, self, dim, &idx, src, reduce, include_self, out, arg_out, fast,
                            &J, &pl, &sh, &th);
    st = kern__op_workspace(ctx, op, params ? params->workspace : NULL,
                            params ? params->workspace_size : 0, sh, th);
    if (st != KERN_OK) goto done;
    /* index values: the 1-D form is checked once, not F times; an empty
     * index has no values (its data may be NULL) */
    if (kern_tensor_numel(index) == 0) {
        st = KERN_OK;
    } else if (fast) {
        kern_tensor i1 = idx;
        i1.ndim = 1;
        st = kern__sc_check_index(ctx, index->ndim == 1 ? index : &i1, self->shape[0], op);
    } else {
        st = kern__sc_check_index(ctx, index, self->shape[dim], op);
    }
    if (st != KERN_OK) goto done;
    if (fast) {
        kern_tensor i1 = idx;
        i1.ndim = 1;
        if (J.N == 0 || J.F == 0) { st = KERN_OK; goto done; }
        st = kern__sc_fast(ctx, &J, &i1, &pl);
    } else {
        kern__sc_gen G;
        kern__sc_fill Fl;
        int64_t numel = kern_tensor_numel(self);
        memset(&G, 0, sizeof G);
        G.ctx = ctx;
        G.dt = self->dtype;
        G.ops = kern__sc_fns_ctx(ctx, self->dtype);
        G.op = kern__sc_op_of(reduce);
        G.mean = reduce == KERN_REDUCE_MEAN;
        G.include_self = include_self != 0;
        G.dim = dim;
        G.nd = nd;
        G.es = kern_dtype_size(self->dtype);
        G.self = self; G.src = src; G.out = out; G.index = &idx; G.arg = arg_out;
        G.L = idx.shape[dim];
        G.sentinel = (int32_t)(G.L < INT32_MAX ? G.L : INT32_MAX);
        /* lines: the index shape with dim collapsed; none for an empty
         * index (whose other dims may be anything, their product too) */
        G.nlines = kern_tensor_numel(&idx) > 0;
        for (d = 0; d < nd; d++) {
            G.lshape[d] = d == dim ? 1 : idx.shape[d];
            if (G.nlines) G.nlines *= G.lshape[d];
        }
        Fl.self = self; Fl.out = out; Fl.arg = arg_out; Fl.numel = numel;
        Fl.sentinel = G.sentinel;
        Fl.ntasks = numel < 65536 ? 1 : (int64_t)kern_ctx_threads(ctx) * 4;
        /* scratch first: nothing is written when it cannot be had */
        if (G.L > 0 && G.nlines > 0 && (st = kern__reserve_thread_scratch(ctx, th)) != KERN_OK)
            goto done;
        if (numel > 0) kern_parallel_for(ctx, Fl.ntasks, kern__sc_fill_task, &Fl);
        if (G.L > 0 && G.nlines > 0) {
            G.ntasks = G.nlines < (int64_t)kern_ctx_threads(ctx) * 8
                           ? G.nlines : (int64_t)kern_ctx_threads(ctx) * 8;
            st = kern_parallel_for(ctx, G.ntasks, kern__sc_gen_task, &G);
        }
    }
done:
    kern__op_end(ctx);
    return st;
}

/* ------------------------------------------------------------ plans */

KERN_API size_t kern_scatter_plan_bytes(int64_t n_rows, int64_t n_edges) {
    int64_t a, b;
    if (n_rows < 0 || n_edges < 0 || n_rows == INT64_MAX) return 0;
    if (kern_mul_overflow_i64(n_rows + 1, 8, &a)) return 0;
    if (kern_mul_overflow_i64(n_edges, n_edges > INT32_MAX ? 8 : 4, &b)) return 0;
    if (a > INT64_MAX - 63) return 0;
    a = (a + 63) & ~(int64_t)63;
    if (kern_add_overflow_i64(a, b, &a)) return 0;
    return (size_t)a;
}

KERN_API kern_status kern_scatter_plan_init(kern_ctx *ctx, const kern_tensor *index,
                                            int64_t n_rows, void *mem, size_t mem_bytes,
                                            kern_scatter_plan *plan) {
    static const char *op = "kern_scatter_plan_init";
    kern_status st;
    size_t need;
    kern__sc_sort S;
    char *w;
    if (!index || !plan)
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !index ? "index" : "plan");
    if ((st = kern_tensor_check(index, op, "index")) != KERN_OK) return st;
    if (index->dtype != KERN_I32 && index->dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: index.dtype=%s is not an integer type (i32/i64)",
                         op, kern_dtype_name(index->dtype));
    if (index->ndim != 1)
        return kern__err(KERN_ERR_SHAPE, "%s: index must be 1-D, has %d dims", op, index->ndim);
    if (n_rows < 0)
        return kern__err(KERN_ERR_ARG, "%s: n_rows=%lld is negative", op, (long long)n_rows);
    need = kern_scatter_plan_bytes(n_rows, index->shape[0]);
    if (need == 0)
        return kern__err(KERN_ERR_ARG, "%s: plan size overflows", op);
    if (!mem || mem_bytes < need)
        return kern__err(KERN_ERR_ARG, "%s: mem holds %zu bytes, the plan needs %zu", op,
                         mem ? mem_bytes : (size_t)0, need);
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    st = kern__sc_check_index(ctx, index, n_rows, op);
    if (st == KERN_OK) {
        memset(&S, 0, sizeof S);
        S.key = index->data; S.key64 = index->dtype == KERN_I64; S.key_s = index->stride[0];
        S.E = index->shape[0]; S.N = n_rows; S.P = kern__sc_sort_parts(ctx, S.E);
        w = (char *)kern__workspace(ctx, (size_t)S.P * (size_t)(n_rows > 0 ? n_rows : 1) * 8);
        if (!w) {
            st = kern__err(KERN_ERR_NOMEM, "%s: cannot allocate the histogram", op);
        } else {
            kern_scatter_plan p;
            S.hist = (int64_t *)w;
            S.rowptr = (int64_t *)mem;
            S.perm = (char *)mem + (((size_t)(n_rows + 1) * 8 + 63) & ~(size_t)63);
            S.perm64 = S.E > INT32_MAX;
            st = kern__sc_counting_sort(ctx, &S);
            if (st == KERN_OK) {
                p.n_rows = n_rows; p.n_edges = S.E; p.rowptr = S.rowptr; p.perm = S.perm;
                p.perm_i64 = S.perm64; p.magic = KERN__SC_MAGIC;
                *plan = p;
            }
        }
    }
    kern__op_end(ctx);
    return st;
}

/* Validates kern_scatter_reduce_planned's arguments (writes nothing). */
static kern_status kern__sc_planned_check(const char *op, const kern_scatter_plan *plan,
                                          const kern_tensor *self, const kern_tensor *src,
                                          kern_reduce reduce, const kern_tensor *out,
                                          const kern_tensor *arg_out) {
    kern_status st;
    if (!plan || plan->magic != KERN__SC_MAGIC)
        return kern__err(KERN_ERR_ARG, "%s: plan is NULL or not initialised by "
                                       "kern_scatter_plan_init", op);
    if ((st = kern__sc_validate_common(op, self, src, reduce, out, arg_out)) != KERN_OK)
        return st;
    if (arg_out && plan->n_edges >= INT32_MAX)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: arg_out needs fewer than 2^31-1 edges", op);
    if (self->ndim > 2 || src->ndim != self->ndim)
        return kern__err(KERN_ERR_SHAPE, "%s: self and src must both be 1-D or 2-D (got %d, %d)",
                         op, self->ndim, src->ndim);
    if (self->shape[0] != plan->n_rows)
        return kern__err(KERN_ERR_SHAPE, "%s: self.shape[0]=%lld but the plan has %lld rows", op,
                         (long long)self->shape[0], (long long)plan->n_rows);
    if (src->shape[0] < plan->n_edges)
        return kern__err(KERN_ERR_SHAPE, "%s: src.shape[0]=%lld < the plan's %lld edges", op,
                         (long long)src->shape[0], (long long)plan->n_edges);
    if (self->ndim == 2 && src->shape[1] != self->shape[1])
        return kern__err(KERN_ERR_SHAPE, "%s: src.shape[1]=%lld but self.shape[1]=%lld", op,
                         (long long)src->shape[1], (long long)self->shape[1]);
    if (!kern__sc_rows_ok(self) || !kern__sc_rows_ok(src) || !kern__sc_rows_ok(out) ||
        (arg_out && !kern__sc_rows_ok(arg_out)))
        return kern__err(KERN_ERR_LAYOUT, "%s: the feature dim must have unit stride", op);
    return KERN_OK;
}

/* A planned call's scratch: the task bounds shared, the row engine's
 * per-thread rows. */
static void kern__sc_planned_scratch(kern_ctx *ctx, const kern__sc_job *J, size_t *shared,
                                     size_t *thread) {
    *shared = *thread = 0;
    if (J->N == 0 || J->F == 0) return;
    *shared = (size_t)(kern__sc_gather_ntasks(ctx, J->N) + 1) * 8;
    *thread = kern__sc_row_scratch(J);
}

KERN_API kern_status kern_scatter_reduce_planned_workspace_size(
    kern_ctx *ctx, const kern_scatter_plan *plan, const kern_tensor *self,
    const kern_tensor *src, kern_reduce reduce, int include_self, const kern_tensor *out,
    const kern_tensor *arg_out, size_t *bytes) {
    static const char *op = "kern_scatter_reduce_planned_workspace_size";
    kern_status st;
    kern__sc_job J;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if ((st = kern__sc_planned_check(op, plan, self, src, reduce, out, arg_out)) != KERN_OK)
        return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__sc_job_rows(&J, ctx, self, src, reduce, include_self, out, arg_out, plan->n_edges);
    kern__sc_planned_scratch(ctx, &J, &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_scatter_reduce_planned(kern_ctx *ctx, const kern_scatter_plan *plan,
                                                 const kern_tensor *self,
                                                 const kern_tensor *src, kern_reduce reduce,
                                                 int include_self, const kern_tensor *out,
                                                 const kern_tensor *arg_out,
                                                 const kern_scatter_params *params) {
    static const char *op = "kern_scatter_reduce_planned";
    kern_status st;
    kern__sc_job J;
    size_t sh, th;
    if ((st = kern__sc_planned_check(op, plan, self, src, reduce, out, arg_out)) != KERN_OK)
        return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__sc_job_rows(&J, ctx, self, src, reduce, include_self, out, arg_out, plan->n_edges);
    kern__sc_planned_scratch(ctx, &J, &sh, &th);
    st = kern__op_workspace(ctx, op, params ? params->workspace : NULL,
                            params ? params->workspace_size : 0, sh, th);
    if (st == KERN_OK && J.N > 0 && J.F > 0) {
        int64_t nt = kern__sc_gather_ntasks(ctx, J.N);
        int64_t *b = (int64_t *)kern__workspace(ctx, sh);
        if (!b) {
            st = kern__err(KERN_ERR_NOMEM, "%s: cannot allocate task bounds", op);
        } else {
            J.rowptr = plan->rowptr; J.rowptr64 = 1;
            J.ids = plan->perm; J.ids64 = plan->perm_i64;
            st = kern__sc_run_gather(&J, b, nt);
        }
    }
    kern__op_end(ctx);
    return st;
}

/* ------------------------------------------------------------ gather */

typedef struct kern__ga_job {
    const char *src;
    int64_t src_rs; /* bytes */
    char *out;
    int64_t out_rs;
    const void *idx;
    int idx64;
    int64_t idx_s, E, rowbytes, ntasks;
    int nt;
    const kern__scatter_fns *fns; /* the level's row copy */
    /* general */
    const kern_tensor *gs, *gi, *go;
    int dim;
    size_t es;
    int64_t numel;
} kern__ga_job;


static void kern__ga_fast_task(void *a, int64_t t, int thread) {
    const kern__ga_job *G = (const kern__ga_job *)a;
    int64_t e0 = G->E * t / G->ntasks, e1 = G->E * (t + 1) / G->ntasks, e;
    (void)thread;
    for (e = e0; e < e1; e++) {
        int64_t r = kern__sc_ix(G->idx, G->idx64, e * G->idx_s);
        if (e + KERN__SC_PF < e1)
            kern__sc_prefetch(G->src + kern__sc_ix(G->idx, G->idx64, (e + KERN__SC_PF) * G->idx_s) *
                                           G->src_rs,
                              G->rowbytes);
        G->fns->copy(G->out + e * G->out_rs, G->src + r * G->src_rs, G->rowbytes, G->nt);
    }
    if (G->nt) kern__nt_fence();
}

static void kern__ga_gen_task(void *a, int64_t t, int thread) {
    const kern__ga_job *G = (const kern__ga_job *)a;
    int64_t f0 = G->numel * t / G->ntasks, f1 = G->numel * (t + 1) / G->ntasks, f;
    const int is64 = G->gi->dtype == KERN_I64;
    const int64_t sd = G->gs->stride[G->dim];
    kern__sc_it it;
    (void)thread;
    /* offsets: 0 index, 1 src at dim-coordinate 0, 2 out */
    {
        int64_t s1[KERN_MAX_DIMS];
        int d;
        for (d = 0; d < G->gi->ndim; d++) s1[d] = d == G->dim ? 0 : G->gs->stride[d];
        kern__sc_it_init(&it, G->gi->ndim, G->gi->shape, G->gi->stride, s1, G->go->stride, f0);
    }
    for (f = f0; f < f1; f++) {
        int64_t v = kern__sc_ix(G->gi->data, is64, it.off[0]);
        memcpy((char *)G->go->data + it.off[2] * (int64_t)G->es,
               (const char *)G->gs->data + (it.off[1] + v * sd) * (int64_t)G->es, G->es);
        kern__sc_it_next(&it);
    }
}

KERN_API kern_status kern_gather(kern_ctx *ctx, const kern_tensor *src, int dim,
                                 const kern_tensor *index, const kern_tensor *out) {
    static const char *op = "kern_gather";
    kern_status st;
    kern_tensor idx;
    int nd, d, fast;
    kern__ga_job G;
    if (!src || !index || !out)
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op,
                         !src ? "src" : !index ? "index" : "out");
    if ((st = kern_tensor_check(src, op, "src")) != KERN_OK) return st;
    if ((st = kern_tensor_check(index, op, "index")) != KERN_OK) return st;
    if ((st = kern_tensor_check(out, op, "out")) != KERN_OK) return st;
    if (index->dtype != KERN_I32 && index->dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: index.dtype=%s is not an integer type (i32/i64)",
                         op, kern_dtype_name(index->dtype));
    if (out->dtype != src->dtype)
        return kern__err(KERN_ERR_DTYPE, "%s: out.dtype=%s but src.dtype=%s", op,
                         kern_dtype_name(out->dtype), kern_dtype_name(src->dtype));
    nd = src->ndim;
    if (nd < 1) return kern__err(KERN_ERR_UNSUPPORTED, "%s: 0-dim tensors are not supported", op);
    if (dim < -nd || dim >= nd)
        return kern__err(KERN_ERR_ARG, "%s: dim=%d is out of range for %d dims", op, dim, nd);
    if (dim < 0) dim += nd;
    idx = *index;
    if (index->ndim == 1 && nd == 2 && dim == 0) {
        idx.ndim = 2;
        idx.shape[1] = src->shape[1];
        idx.stride[1] = 0;
    } else if (index->ndim != nd) {
        return kern__err(KERN_ERR_SHAPE, "%s: index has %d dims but src has %d", op, index->ndim,
                         nd);
    }
    for (d = 0; d < nd; d++)
        if (d != dim && idx.shape[d] > src->shape[d])
            return kern__err(KERN_ERR_SHAPE, "%s: index.shape[%d]=%lld > src.shape[%d]=%lld", op,
                             d, (long long)idx.shape[d], d, (long long)src->shape[d]);
    if ((st = kern__sc_same_shape(out, &idx, op, "out", "index")) != KERN_OK) return st;
    if ((st = kern__sc_check_writable(out, op, "out")) != KERN_OK) return st;
    if (kern_tensors_overlap(out, src) || kern_tensors_overlap(out, index))
        return kern__err(KERN_ERR_ARG, "%s: out overlaps %s", op,
                         kern_tensors_overlap(out, src) ? "src" : "index");
    fast = dim == 0 && nd == 2 && kern__sc_rows_ok(src) && kern__sc_rows_ok(out) &&
           (idx.stride[1] == 0 || idx.shape[1] <= 1);
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    if (kern_tensor_numel(index) == 0) { /* no values to check (data may be NULL) */
        st = KERN_OK;
    } else if (fast) {
        kern_tensor i1 = idx;
        i1.ndim = 1;
        st = kern__sc_check_index(ctx, &i1, src->shape[0], op);
    } else {
        st = kern__sc_check_index(ctx, index, src->shape[dim], op);
    }
    if (st == KERN_OK && kern_tensor_numel(out) > 0) {
        memset(&G, 0, sizeof G);
        G.es = kern_dtype_size(src->dtype);
        G.fns = kern__scatter_fns_for(kern_ctx_isa(ctx));
        if (fast) {
            G.src = (const char *)src->data;
            G.src_rs = kern__sc_rsb(src, G.es);
            G.out = (char *)out->data;
            G.out_rs = kern__sc_rsb(out, G.es);
            G.idx = idx.data;
            G.idx64 = idx.dtype == KERN_I64;
            G.idx_s = idx.stride[0];
            G.E = idx.shape[0];
            G.rowbytes = idx.shape[1] * (int64_t)G.es;
            /* non-temporal stores when the output cannot stay in cache */
            G.nt = G.fns->copy_nt && G.E * G.rowbytes > ((int64_t)32 << 20) &&
                   G.rowbytes % 64 == 0 && G.out_rs % 64 == 0 &&
                   ((uintptr_t)out->data & 63) == 0;
            G.ntasks = G.E < 4096 ? 1 : (int64_t)kern_ctx_threads(ctx) * 8;
            st = kern_parallel_for(ctx, G.ntasks, kern__ga_fast_task, &G);
        } else {
            G.gs = src; G.gi = &idx; G.go = out; G.dim = dim;
            G.numel = kern_tensor_numel(out);
            G.ntasks = G.numel < 65536 ? 1 : (int64_t)kern_ctx_threads(ctx) * 4;
            st = kern_parallel_for(ctx, G.ntasks, kern__ga_gen_task, &G);
        }
    }
    kern__op_end(ctx);
    return st;
}

#ifdef __cplusplus
}
#endif
KERN__IMPL_DIAG_END
#endif /* KERN_SCATTER_IMPLEMENTED */
