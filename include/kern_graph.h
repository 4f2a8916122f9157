/* kern_graph.h — a small graph executor over kern's kernels: build (or read)
 * a model graph, fuse it, plan its memory once, run it many times. Part of
 * kern, an embeddable header-only C kernel library. See docs/graph.md.
 *
 * WHAT IT DOES
 *   A graph is a list of named values (inputs, weights, constants, node
 *   outputs) and nodes (one per kernel call or tensor operation), built
 *   through this API or read from a line-oriented text IR. A plan turns a
 *   graph into a run list for one context: it runs optional passes (fusion
 *   of GEMM epilogues, residual + norm, norm + GELU, merging of Q/K/V
 *   projections into one GEMM, recognition of decomposed LayerNorm /
 *   RMSNorm / GELU / attention, dead-node elimination, int8-dynamic and 2:4
 *   transforms of linears), prepacks weights once, and assigns every
 *   intermediate an offset in one arena from the lifetimes at an upper
 *   bound of the symbolic dims. kern_graph_run then runs any binding within
 *   the bound without allocating and without per-node validation.
 *
 * VALUES AND SHAPES
 *   Dims are int64_t: >= 0 a concrete size; symbolic dims come from
 *   kern_graph_symbol (a name, e.g. "B" or "L") or kern_graph_dim (an
 *   expression: "B*L", "L+P", "N+1", "2*L"; sums of products of symbols
 *   with integer coefficients) and are negative handles. Shape inference
 *   runs when a node is added; two symbolic dims are equal only when their
 *   expressions are (L and P are different dims even if they are bound to
 *   the same value). kern_graph_run derives the binding from the inputs'
 *   shapes (every symbol must appear alone, or as S + constant, in some
 *   input dim).
 *
 * OPS (input slots in order; "?" = optional, 0 means absent)
 *   linear          x [..,K], weight [N,K], bias? [N], residual? -> [..,N]
 *                   y = out_scale * (act(alpha * x W^T + bias) + residual)
 *                   (torch.nn.functional.linear + epilogue; kern_gemm, or
 *                   kern_linear_gemv on the unpacked weight when x has at
 *                   most 8 rows at the plan's bound); glu=1: weight [2F,K]
 *                   in kern_glu_pack's order -> [..,F], act(gate) * up
 *   matmul          a [..,M,K], b [..,K,N], bias? [N], residual? -> [..,M,N]
 *                   trans_a / trans_b, alpha, act, out_scale as linear
 *                   (kern_gemm; kern_linear_gemv on b's transpose when b
 *                   is 2-D and a run has at most 8 rows of a)
 *   sdpa            q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv], mask?,
 *                   k_lens? [B] -> [B,Hq,Lq,Dv]; is_causal,
 *                   causal_bottom_right, scale, enable_gqa, window, softcap
 *                   (torch scaled_dot_product_attention; kern_sdpa)
 *   sdpa_relpos     q [B,H,L,D], k [B,H,L,D], v [B,H,L,Dv], rel_pos_h
 *                   [2*gh-1, D], rel_pos_w [2*gw-1, D] -> [B,H,L,Dv] with
 *                   L = gh*gw: SAM's attention with the decomposed
 *                   relative-position bias fused (HF SamVisionAttention;
 *                   kern_sdpa's rel_pos options, query grid = key grid =
 *                   gh x gw read from the tables' lengths); scale
 *   layer_norm, rms_norm  x [..,H], weight? [H], bias? [H], residual? ->
 *                   y [, x + residual as a second output]; eps, act
 *                   (none/gelu/gelu_tanh) (kern_norm)
 *   gelu gelu_tanh silu relu sigmoid sqrt rsqrt exp tanh erf neg reciprocal
 *                   x -> same shape (elementwise, f32 math)
 *   scale           x -> alpha * x;  pow  x -> x ^ exponent
 *   add sub mul div a, b (numpy broadcasting) -> broadcast shape
 *   softmax         x -> softmax over the last dim
 *   reduce_mean reduce_sum  x [..,H] -> [..,1] (last dim, kept)
 *   embedding       ids (i32/i64) [...], table [V,H] -> [...,H]
 *                   (torch.nn.functional.embedding(ids, table))
 *   reshape         x -> shape (one dim may be -1); a view when the strides
 *                   allow, else a copy
 *   permute transpose slice split expand  views (perm; axis, axis2; axis,
 *                   start, length (0 = to the end); axis, sizes (or equal
 *                   pieces); shape, -1 keeps a dim)
 *   concat          x0, x1, ... (up to 8) along axis
 *   copy            x -> a contiguous copy;  cast  x -> dtype
 *   qlinear         x [..,K], weight [N,K] f32/bf16 (packed at plan time)
 *                   or i8 with scales? [N], bias? [N], residual?
 *                   (int8 dynamic per-token; kern_qlinear); act; glu=1
 *                   as linear (weight [2F,K] in kern_glu_pack's order);
 *                   prune=1 (f32/bf16 weight, K % 4 == 0): pruned 2:4 at
 *                   plan time, then quantized (int8 + 2:4; runs as dense
 *                   int8, exact in integers, where no 2:4 form is faster)
 *   quantize_per_token  x [..,K] -> xq i8 [..,K], scales f32 [..]
 *   sparse24_linear x [..,K], weight [N,K] (2:4 along K, or prune=1 to prune
 *                   at plan time), bias? [N], residual? (kern_sparse24_linear)
 *   scatter_reduce  self, index, src -> self's shape; axis, reduce,
 *                   include_self (torch scatter_reduce; kern_scatter_reduce)
 *   spmm_reduce     rowptr [N+1], col [E], values? [E], dense [C,F] -> [N,F];
 *                   reduce (torch.sparse.mm(csr, dense, reduce))
 *   rope            x [B,L,H,D], table [P,r] f32 (kern_rope_table_init),
 *                   offsets? [B] i32/i64 -> x's shape; half-split rotation
 *                   (HF Llama) of the first r dims at positions offsets[b] + l,
 *                   or with interleaved=1 pairs (2i, 2i+1) (GPT-J) (kern_rope)
 *   silu_mul        a, b? -> silu(a) * b; without b, a = [.., 2F] holds
 *                   [gate | up] -> [.., F] (kern_silu_mul)
 *   kv_append       k_new [B,Lnew,Hkv,D], v_new, k_cache [B,Lmax,Hkv,D],
 *                   v_cache, k_lens [B] -> k_lens + Lnew; writes the new
 *                   rows into the caches, which must be graph inputs (the
 *                   caller's buffers, updated in place; k_lens itself is
 *                   not changed); k_scale?, v_scale? [B,Lmax,Hkv] f32 with
 *                   an i8 cache, graph inputs too (kern_kv_append_ex)
 *   decode_attention q [B,Lq,H,D], k_cache, v_cache [B,Lmax,Hkv,D|Dv],
 *                   k_lens [B], k_scale?, v_scale? (i8 caches) ->
 *                   [B,Lq,H,Dv]; scale (kern_decode_attention)
 *   argmax          x [..,V] -> i64 [..] (torch.argmax(x, -1): first on ties,
 *                   NaN largest) (kern_argmax)
 *   topk            x [..,V] -> values [..,k] (x's dtype), indices i64 [..,k];
 *                   k (torch.topk(x, k, -1), sorted largest first) (kern_topk)
 *   Every node is validated when added (dtypes, ranks, symbolic shapes,
 *   attributes that do not apply); an error names the node, its op and its
 *   inputs' shapes and leaves the graph unchanged.
 *
 * TEXT IR (kern_graph_write_ir / kern_graph_read_ir; docs/graph.md)
 *     kern-graph 1
 *     dim B
 *     input x f32 [B,16]
 *     weight fc.weight f32 [8,16]
 *     const half f32 [] 0.5
 *     y = linear(x, fc.weight) act=gelu
 *     z = mul(y, half)
 *     output z
 *   One declaration or node per line, names not pointers, in the order
 *   they were added. Weight data lives in a safetensors file
 *   (kern_graph_bind_safetensors). write(read(text)) == text byte for byte
 *   for every text the writer produced. Errors name the line and column.
 *
 * MEMORY
 *   Everything a graph or plan owns comes from the allocator of the context
 *   passed at creation. The arena (kern_graph_plan_stats: arena_bytes,
 *   beside the max-live lower bound and the sum of all intermediates) is
 *   allocated by the plan unless params.external_arena is set (then pass
 *   your own with kern_graph_plan_set_arena). kern_graph_run allocates
 *   nothing: the family calls take their scratch from one workspace the
 *   plan sizes at the bound, except scatter_reduce and spmm_reduce (sized
 *   by their index data) and a smaller binding that needs more scratch
 *   than the bound, which use the context's scratch (grown once, then
 *   reused). The graph (and borrowed weights) must outlive its plans.
 *
 * THREADS
 *   Kernel-family nodes call the families' public entry points, which use
 *   the context's pool. Executor-owned nodes (elementwise, softmax,
 *   reductions, copies, embedding) run from the pre-validated plan: small
 *   ones inline on the calling thread, larger ones split over the pool's
 *   threads inside one parallel region per run of consecutive such nodes.
 *   Every executor-owned op gives the same bits for any thread count; with
 *   a deterministic context the families do too. A plan runs one call at a
 *   time (use one plan per thread for concurrent runs).
 *
 * ERRORS
 *   KERN_ERR_ARG (bad names, IR syntax, cycles, dangling names, missing
 *   weights), KERN_ERR_SHAPE (shapes that do not match or do not bind),
 *   KERN_ERR_DTYPE, KERN_ERR_LAYOUT, KERN_ERR_INDEX (embedding ids out of
 *   range), KERN_ERR_UNSUPPORTED, KERN_ERR_NOMEM, each with a message naming
 *   the node / value / line.
 *
 * EXAMPLE
 *     kern_graph *g;
 *     kern_graph_val x, w, y;
 *     kern_graph_create(ctx, &g);
 *     kern_graph_input_s(g, "x", KERN_F32, "[B,16]", &x);
 *     kern_tensor wt = kern_tensor_2d(wdata, KERN_F32, 8, 16);
 *     kern_graph_weight(g, "fc.weight", &wt, 0, &w);
 *     kern_graph_linear(g, "y", x, w, 0, KERN_ACT_GELU, &y);
 *     kern_graph_output(g, y);
 *     kern_graph_plan *p;
 *     kern_graph_plan_params pp = {0};
 *     pp.bind = "B=64";                            // the upper bound
 *     kern_graph_plan_create(g, ctx, &pp, &p);
 *     kern_tensor in = kern_tensor_2d(xdata, KERN_F32, 3, 16), out = {0};
 *     kern_graph_run(p, &in, 1, &out, 1);          // out: a view [3,8]
 *     kern_graph_plan_free(p);
 *     kern_graph_destroy(g);
 */
#ifndef KERN_GRAPH_H
#define KERN_GRAPH_H

#include "kern_base.h"
#include "kern_gemm.h"
#include "kern_norm.h"
#include "kern_qgemm.h"
#include "kern_sparse24.h"
#include "kern_sdpa.h"
#include "kern_scatter.h"
#include "kern_spmm.h"
#include "kern_llm.h"
#include "kern_safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_GRAPH_MAX_INPUTS 8
#define KERN_GRAPH_MAX_OUTPUTS 8
#define KERN_GRAPH_MAX_SYMBOLS 16
/* reshape/expand: this dim is inferred (reshape) or kept (expand) */
#define KERN_GRAPH_DIM_INFER ((int64_t)-1)

/* One list gives the op enum and the IR names. */
#define KERN_GRAPH_OP_LIST(X)                                                 \
    X(LINEAR, "linear")                                                       \
    X(MATMUL, "matmul")                                                       \
    X(SDPA, "sdpa")                                                           \
    X(LAYER_NORM, "layer_norm")                                               \
    X(RMS_NORM, "rms_norm")                                                   \
    X(GELU, "gelu")                                                           \
    X(GELU_TANH, "gelu_tanh")                                                 \
    X(SILU, "silu")                                                           \
    X(RELU, "relu")                                                           \
    X(SIGMOID, "sigmoid")                                                     \
    X(SQRT, "sqrt")                                                           \
    X(RSQRT, "rsqrt")                                                         \
    X(EXP, "exp")                                                             \
    X(TANH, "tanh")                                                           \
    X(ERF, "erf")                                                             \
    X(NEG, "neg")                                                             \
    X(RECIPROCAL, "reciprocal")                                               \
    X(SCALE, "scale")                                                         \
    X(POW, "pow")                                                             \
    X(ADD, "add")                                                             \
    X(SUB, "sub")                                                             \
    X(MUL, "mul")                                                             \
    X(DIV, "div")                                                             \
    X(SOFTMAX, "softmax")                                                     \
    X(REDUCE_MEAN, "reduce_mean")                                             \
    X(REDUCE_SUM, "reduce_sum")                                               \
    X(EMBEDDING, "embedding")                                                 \
    X(RESHAPE, "reshape")                                                     \
    X(PERMUTE, "permute")                                                     \
    X(TRANSPOSE, "transpose")                                                 \
    X(SLICE, "slice")                                                         \
    X(SPLIT, "split")                                                         \
    X(EXPAND, "expand")                                                       \
    X(CONCAT, "concat")                                                       \
    X(COPY, "copy")                                                           \
    X(CAST, "cast")                                                           \
    X(QLINEAR, "qlinear")                                                     \
    X(QUANTIZE_PER_TOKEN, "quantize_per_token")                               \
    X(SPARSE24_LINEAR, "sparse24_linear")                                     \
    X(SCATTER_REDUCE, "scatter_reduce")                                       \
    X(SPMM_REDUCE, "spmm_reduce")                                             \
    X(SDPA_RELPOS, "sdpa_relpos")                                             \
    X(ROPE, "rope")                                                           \
    X(SILU_MUL, "silu_mul")                                                   \
    X(KV_APPEND, "kv_append")                                                 \
    X(DECODE_ATTENTION, "decode_attention")                                   \
    X(ARGMAX, "argmax")                                                       \
    X(TOPK, "topk")

typedef enum kern_graph_op {
    KERN_GRAPH_OP_NONE = 0,
#define KERN__GRAPH_OP_ENUM(name, text) KERN_GRAPH_OP_##name,
    KERN_GRAPH_OP_LIST(KERN__GRAPH_OP_ENUM)
#undef KERN__GRAPH_OP_ENUM
    KERN_GRAPH_OP_COUNT
} kern_graph_op;

/* "linear", ... ("invalid" otherwise). */
KERN_API const char *kern_graph_op_name(kern_graph_op op);

typedef struct kern_graph kern_graph;
typedef struct kern_graph_plan kern_graph_plan;
/* A value of a graph (1, 2, ...); 0 = none / an absent optional input. */
typedef int32_t kern_graph_val;

/* Node attributes, one struct for every op (zero = default; a field that
 * does not apply to the op must stay zero). Dims (shape, sizes, start,
 * length) are concrete sizes or symbolic dims from kern_graph_dim. */
typedef struct kern_graph_attrs {
    kern_act act;        /* linear, matmul, qlinear, sparse24_linear, norms */
    int alpha_set;       /* linear, matmul: alpha * acc; scale: alpha * x */
    float alpha;
    float out_scale;     /* linear, matmul: 0 = 1 */
    int trans_a, trans_b; /* matmul */
    int eps_set;         /* norms: unset = 1e-5 (eps = 0 is a real value) */
    float eps;
    int64_t axis, axis2; /* concat, split, slice, transpose, scatter_reduce;
                            negative counts from the end */
    int n_perm;          /* permute */
    int64_t perm[KERN_MAX_DIMS];
    int n_shape;         /* reshape, expand */
    int64_t shape[KERN_MAX_DIMS];
    int n_sizes;         /* split (0 = equal pieces, one per output) */
    int64_t sizes[KERN_GRAPH_MAX_OUTPUTS];
    int64_t start, length; /* slice: [start, start + length); 0 = to the end */
    float exponent;      /* pow */
    int is_causal, causal_bottom_right, enable_gqa; /* sdpa */
    float scale;         /* sdpa: 0 = 1/sqrt(D) */
    float softcap;       /* sdpa: 0 = none */
    int window_set;      /* sdpa: sliding window (-1 = unbounded side) */
    int64_t window_left, window_right;
    kern_reduce reduce;  /* scatter_reduce, spmm_reduce */
    int include_self;    /* scatter_reduce */
    kern_dtype dtype;    /* cast: the target */
    int prune;           /* sparse24_linear, qlinear: prune the weight 2:4
                            at plan time */
    int interleaved;     /* rope: GPT-J pairs (2i, 2i+1) instead of halves */
    int64_t k;           /* topk: how many (concrete, >= 1) */
    int glu;             /* linear: the gated epilogue (kern_epilogue.glu):
                            weight [2F,K] in kern_glu_pack's order -> [..,F] */
} kern_graph_attrs;

typedef struct kern_graph_node_desc {
    kern_graph_op op;
    const char *name; /* required, unique: the node's and its first output's */
    kern_graph_val inputs[KERN_GRAPH_MAX_INPUTS]; /* by slot, 0 = absent */
    int n_outputs;    /* 0 = the op's default (split: one per size; norms:
                         2 adds the residual sum output) */
    const char *output_names[KERN_GRAPH_MAX_OUTPUTS]; /* [1..]: names of the
                         extra outputs (NULL = "<name>:1", ...) */
    kern_graph_attrs attrs;
} kern_graph_node_desc;

typedef enum kern_graph_val_kind {
    KERN_GRAPH_VAL_NONE = 0,
    KERN_GRAPH_VAL_INPUT,
    KERN_GRAPH_VAL_WEIGHT,
    KERN_GRAPH_VAL_CONST,
    KERN_GRAPH_VAL_NODE
} kern_graph_val_kind;

typedef struct kern_graph_val_info {
    const char *name;
    kern_graph_val_kind kind;
    kern_dtype dtype;
    int ndim;
    int64_t dims[KERN_MAX_DIMS]; /* concrete or symbolic */
    kern_graph_op op;            /* producer (KERN_GRAPH_VAL_NODE) */
    int has_data;                /* weights: data bound */
} kern_graph_val_info;

/* weight flags */
enum {
    KERN_GRAPH_BORROW = 0, /* default: point at the caller's data (contiguous;
                              it must outlive the graph and its plans) */
    KERN_GRAPH_COPY = 1    /* copy into memory the graph owns */
};

/* ------------------------------------------------------------- builder */

/* All graph memory comes from ctx's allocator (NULL = default context). */
KERN_API kern_status kern_graph_create(kern_ctx *ctx, kern_graph **out);
KERN_API void kern_graph_destroy(kern_graph *g);

/* Declares a symbolic dim (name: a letter or '_', then letters, digits,
 * '_'); *dim receives its handle. Declaring an existing name returns it. */
KERN_API kern_status kern_graph_symbol(kern_graph *g, const char *name, int64_t *dim);
/* A dim from an expression ("768", "B*L", "L+P", "N+1", "2*L-1"); symbols
 * are declared on first use. */
KERN_API kern_status kern_graph_dim(kern_graph *g, const char *expr, int64_t *dim);
/* Writes a dim as text ("768", "B*L"). */
KERN_API char *kern_graph_dim_str(const kern_graph *g, int64_t dim, char *buf, size_t size);

/* A graph input (contiguous, row-major, passed to kern_graph_run in the
 * order declared). Names: 1..127 chars of letters, digits and _ . : / - */
KERN_API kern_status kern_graph_input(kern_graph *g, const char *name, kern_dtype dt,
                                      int ndim, const int64_t *dims, kern_graph_val *out);
/* The same with the shape as text: "[B,L,64]". */
KERN_API kern_status kern_graph_input_s(kern_graph *g, const char *name, kern_dtype dt,
                                        const char *shape, kern_graph_val *out);
/* A named weight with t's dtype and (concrete) shape. t->data = NULL
 * declares it only (bind it later); flags: KERN_GRAPH_BORROW or _COPY. */
KERN_API kern_status kern_graph_weight(kern_graph *g, const char *name, const kern_tensor *t,
                                       int flags, kern_graph_val *out);
/* A small constant (stored in the IR): numel values, converted to dt. */
KERN_API kern_status kern_graph_const(kern_graph *g, const char *name, kern_dtype dt,
                                      int ndim, const int64_t *shape, const double *values,
                                      kern_graph_val *out);
/* A 0-d constant. */
KERN_API kern_status kern_graph_scalar(kern_graph *g, const char *name, kern_dtype dt,
                                       double value, kern_graph_val *out);
/* Adds a node; outputs (may be NULL) receives its output values. */
KERN_API kern_status kern_graph_add(kern_graph *g, const kern_graph_node_desc *desc,
                                    kern_graph_val *outputs);
/* Shorthands over kern_graph_add. */
KERN_API kern_status kern_graph_linear(kern_graph *g, const char *name, kern_graph_val x,
                                       kern_graph_val weight, kern_graph_val bias,
                                       kern_act act, kern_graph_val *out);
KERN_API kern_status kern_graph_unary(kern_graph *g, kern_graph_op op, const char *name,
                                      kern_graph_val x, kern_graph_val *out);
KERN_API kern_status kern_graph_binary(kern_graph *g, kern_graph_op op, const char *name,
                                       kern_graph_val a, kern_graph_val b,
                                       kern_graph_val *out);
/* Marks a value as a graph output (in order). */
KERN_API kern_status kern_graph_output(kern_graph *g, kern_graph_val v);

/* Binds data to a declared weight (shape and dtype must match). */
KERN_API kern_status kern_graph_bind_weight(kern_graph *g, const char *name,
                                            const kern_tensor *t, int flags);
/* Binds every weight that has no data from a safetensors file (by name;
 * all-or-nothing: a missing or mis-shaped tensor changes nothing).
 * Borrowed data points into st, which must then outlive the graph. */
KERN_API kern_status kern_graph_bind_safetensors(kern_graph *g, const kern_safetensors *st,
                                                 int flags);
/* Writes every bound weight into a safetensors file. */
KERN_API kern_status kern_graph_save_weights(const kern_graph *g, const char *path);

/* Lookup and introspection. */
KERN_API kern_graph_val kern_graph_find(const kern_graph *g, const char *name);
KERN_API kern_status kern_graph_val_get(const kern_graph *g, kern_graph_val v,
                                        kern_graph_val_info *info);
KERN_API int kern_graph_n_inputs(const kern_graph *g);
KERN_API int kern_graph_n_outputs(const kern_graph *g);
KERN_API kern_graph_val kern_graph_input_at(const kern_graph *g, int i);
KERN_API kern_graph_val kern_graph_output_at(const kern_graph *g, int i);
KERN_API int kern_graph_n_nodes(const kern_graph *g);
KERN_API int kern_graph_n_symbols(const kern_graph *g);
KERN_API const char *kern_graph_symbol_name(const kern_graph *g, int i);
/* Node i in the order added: op, name, inputs, n_outputs and attrs
 * (output_names[k] point into the graph). */
KERN_API kern_status kern_graph_node_get(const kern_graph *g, int i, kern_graph_node_desc *out);
/* Value of a dim with symbol i bound to values[i] (by kern_graph_symbol_name
 * order); KERN_ERR_SHAPE if it overflows or is negative. */
KERN_API kern_status kern_graph_dim_eval(const kern_graph *g, int64_t dim, const int64_t *values,
                                         int64_t *out);

/* ------------------------------------------------------------------ IR */

/* Parses IR text (len bytes; NUL not needed) into a new graph. */
KERN_API kern_status kern_graph_read_ir(kern_ctx *ctx, const char *text, size_t len,
                                        kern_graph **out);
/* Writes the IR into buf (NUL-terminated when it fits); *len = the bytes
 * needed, without the NUL. buf may be NULL with size 0. */
KERN_API kern_status kern_graph_write_ir(const kern_graph *g, char *buf, size_t size,
                                         size_t *len);
KERN_API kern_status kern_graph_load_ir(kern_ctx *ctx, const char *path, kern_graph **out);
KERN_API kern_status kern_graph_save_ir(const kern_graph *g, const char *path);

/* ---------------------------------------------------------------- plan */

/* Passes (params.disable bits skip them; all run by default). */
enum {
    KERN_GRAPH_PASS_DECOMPOSED = 1u << 0, /* decomposed LayerNorm/RMSNorm/GELU/
                                             attention -> fused nodes */
    KERN_GRAPH_PASS_EPILOGUE = 1u << 1,   /* bias/act/residual/scale into GEMMs */
    KERN_GRAPH_PASS_QKV = 1u << 2,        /* linears (or qlinears with f32/bf16
                                             weights) sharing x -> one GEMM */
    KERN_GRAPH_PASS_RESIDUAL_NORM = 1u << 3,
    KERN_GRAPH_PASS_NORM_ACT = 1u << 4,
    KERN_GRAPH_PASS_DCE = 1u << 5,        /* dead-node elimination */
    KERN_GRAPH_PASS_PREPACK = 1u << 6,    /* kern_gemm_pack_b at plan time
                                           * (linears above 8 rows at the bound) */
    KERN_GRAPH_PASS_INPLACE = 1u << 7,    /* outputs over dying inputs */
    KERN_GRAPH_PASS_GLU = 1u << 8,        /* merged gate/up linear (or qlinear)
                                             + silu_mul -> one GEMM with the
                                             glu epilogue */
    KERN_GRAPH_PASS_ALL = 0x1ffu
};

typedef struct kern_graph_plan_params {
    const char *bind;        /* upper bounds of the symbolic dims: "B=8,L=512" */
    const int64_t *bounds;   /* or by symbol index (kern_graph_symbol_name) */
    int n_bounds;
    unsigned disable;        /* KERN_GRAPH_PASS_* bits to skip */
    const char *quantize;    /* linears to make int8 dynamic: NULL = none, "*"
                                = all, or comma-separated name globs (* ?) */
    const char *sparsify;    /* linears to prune to 2:4 and run sparse */
    int external_arena;      /* allocate no arena: call kern_graph_plan_set_arena */
    int keep_intermediates;  /* every value keeps its memory (inspection) */
    int profile;             /* time every node (kern_graph_plan_profile) */
    int64_t parallel_min;    /* executor-owned nodes with fewer elements run on
                                one thread; 0 = 32768; < 0 = always split */
    int cache_size;          /* bindings cached (0 = 4) */
} kern_graph_plan_params;

typedef struct kern_graph_plan_stats {
    size_t arena_bytes;      /* the arena */
    size_t max_live_bytes;   /* lower bound: most bytes live at one step
                                (in-place sharing counted once) */
    size_t sum_bytes;        /* every intermediate in its own memory */
    size_t packed_bytes;     /* prepacked / quantized / compressed weights */
    int n_nodes_graph;       /* nodes in the source graph */
    int n_nodes;             /* nodes after the passes */
    int n_steps;             /* steps run (views cost none) */
    int n_fused;             /* rewrites the passes made */
    int n_inplace;           /* outputs placed over a dying input */
    double plan_seconds;     /* kern_graph_plan_create, prepacking included */
    double prepack_seconds;  /* weight preparation: merging, packing, quantizing */
    double prepack_cpu_seconds; /* the same in thread CPU time */
} kern_graph_plan_stats;

KERN_API kern_status kern_graph_plan_create(kern_graph *g, kern_ctx *ctx,
                                            const kern_graph_plan_params *params,
                                            kern_graph_plan **out);
KERN_API void kern_graph_plan_free(kern_graph_plan *p);
KERN_API kern_status kern_graph_plan_stats_get(const kern_graph_plan *p,
                                               kern_graph_plan_stats *s);
KERN_API size_t kern_graph_plan_arena_size(const kern_graph_plan *p);
/* A caller arena: at least kern_graph_plan_arena_size bytes, 64-byte
 * aligned; it must outlive the runs. */
KERN_API kern_status kern_graph_plan_set_arena(kern_graph_plan *p, void *arena, size_t size);
/* What the passes did, one line each ("fuse ..."; "no match ...: reason"). */
KERN_API const char *kern_graph_plan_report(const kern_graph_plan *p);

/* Runs the plan. inputs: one per graph input, in order, contiguous, shapes
 * consistent with the declared dims and within the plan's bound. outputs:
 * one per graph output; a tensor with data = NULL receives a view into the
 * arena (valid until the next run), otherwise it must be a contiguous
 * tensor of the output's dtype and shape and is written. */
KERN_API kern_status kern_graph_run(kern_graph_plan *p, const kern_tensor *inputs,
                                    int n_inputs, kern_tensor *outputs, int n_outputs);
/* A view of a value of the last run (any value with keep_intermediates;
 * else inputs, outputs and values whose memory is still theirs). */
KERN_API kern_status kern_graph_plan_value(const kern_graph_plan *p, const char *name,
                                           kern_tensor *out);

/* ------------------------------------------------------------- tooling */

typedef struct kern_graph_profile_params {
    double peak_gflops; /* 0 = no share-of-peak column for compute */
    double peak_gbs;    /* 0 = no share-of-peak column for memory */
    int top;            /* 0 = every node; else the slowest `top` */
} kern_graph_profile_params;

/* Per-node table (time, calls, GFLOP/s, GB/s, share of peak, share of
 * total) of the runs since the plan was made or reset (params.profile). */
KERN_API kern_status kern_graph_plan_profile(const kern_graph_plan *p,
                                             const kern_graph_profile_params *pp, char *buf,
                                             size_t size, size_t *len);
KERN_API void kern_graph_plan_profile_reset(kern_graph_plan *p);
/* Graphviz DOT of the planned graph; fused nodes are filled and list what
 * they absorbed, views are dashed. */
KERN_API kern_status kern_graph_plan_dot(const kern_graph_plan *p, char *buf, size_t size,
                                         size_t *len);

typedef struct kern_graph_check_result {
    int ok;                 /* every compared value within tolerance */
    int compared;           /* values compared */
    char first_bad[128];    /* the first node (graph order) out of tolerance */
    double max_rel_err;     /* of that node (or the worst, when ok) */
    char report[2048];      /* one line per compared node, truncated */
} kern_graph_check_result;

/* Numerics checker: runs g unplanned (no passes) on a scalar, 1-thread
 * context and planned with params on ctx, on the same inputs, and compares
 * every value both keep, in graph order, against its dtype's tolerance
 * (f32 1e-4, bf16/f16 3e-2 of the tensor's largest magnitude; SQNR is
 * reported for nodes a transform changed). */
KERN_API kern_status kern_graph_check(kern_graph *g, kern_ctx *ctx,
                                      const kern_graph_plan_params *params,
                                      const kern_tensor *inputs, int n_inputs,
                                      kern_graph_check_result *result);

/* Internals that kern's tests reach (kern__ prefix: not a stable API).
 * The memory planner on bare lifetimes: buffer i of n has size[i] bytes
 * and is live from step first[i] to last[i]; kern__g_maxlive returns the
 * most bytes live at one step (0 on allocation failure) and
 * kern__g_memplan writes each buffer's offset to off[] and returns the
 * arena size (*ok = 0 on allocation failure). kern__graph_check_poison:
 * kern_graph_check then adds 1 to the first element of that value in its
 * planned run (NULL: off), to see the checker fire. */
KERN_API size_t kern__g_maxlive(kern_ctx *ctx, int64_t n, const size_t *size, const int32_t *first,
                                const int32_t *last, int32_t n_steps);
KERN_API size_t kern__g_memplan(kern_ctx *ctx, int64_t n, const size_t *size, const int32_t *first,
                                const int32_t *last, size_t lower_bound, size_t *off, int *ok);
KERN_API void kern__graph_check_poison(const char *value);
/* The data of weight `name` (NULL when g has none of that name); 1 when
 * p's planned order runs an op named `op`. */
KERN_API void *kern__graph_weight_data(const kern_graph *g, const char *name);
KERN_API int kern__graph_plan_has_op(const kern_graph_plan *p, const char *op);

#ifdef __cplusplus
}
#endif
#endif /* KERN_GRAPH_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_GRAPH_IMPLEMENTED)
#define KERN_GRAPH_IMPLEMENTED

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ utilities */

/* Grows *p (elements of `elem` bytes, capacity *cap) to hold `need`; new
 * slots are zeroed when `zero` is set (kern__g_grow), left as they come
 * otherwise (kern__g_grow_raw: arrays whose slots are written before they
 * are read: nodes, values, the string pool). 0 on allocation failure
 * (nothing changed). */
static int kern__g_grow_z(kern_ctx *ctx, void **p, int64_t *cap, int64_t need, size_t elem,
                          int zero) {
    int64_t nc;
    void *q;
    if (need <= *cap) return 1;
    nc = *cap < 16 ? 16 : *cap * 2;
    while (nc < need) nc *= 2;
    q = kern__alloc(ctx, (size_t)nc * elem);
    if (!q) return 0;
    if (*cap) memcpy(q, *p, (size_t)*cap * elem);
    if (zero) memset((char *)q + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    kern__free(ctx, *p);
    *p = q;
    *cap = nc;
    return 1;
}
static int kern__g_grow(kern_ctx *ctx, void **p, int64_t *cap, int64_t need, size_t elem) {
    return kern__g_grow_z(ctx, p, cap, need, elem, 1);
}
static int kern__g_grow_raw(kern_ctx *ctx, void **p, int64_t *cap, int64_t need, size_t elem) {
    return kern__g_grow_z(ctx, p, cap, need, elem, 0);
}

static double kern__g_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A growing text buffer over the caller's (buf, size); counts what it
 * would need. */
typedef struct kern__gsb {
    char *buf;
    size_t size, n;
} kern__gsb;
static void kern__gsb_put(kern__gsb *s, const char *t, size_t l) {
    if (s->buf && s->n < s->size) {
        size_t room = s->size - 1 - s->n;
        memcpy(s->buf + s->n, t, l < room ? l : room);
    }
    s->n += l;
}
static void kern__gsb_puts(kern__gsb *s, const char *t) { kern__gsb_put(s, t, strlen(t)); }
static void kern__gsb_printf(kern__gsb *s, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void kern__gsb_printf(kern__gsb *s, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    int k;
    va_start(ap, fmt);
    k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k >= sizeof tmp) k = (int)sizeof tmp - 1;
    kern__gsb_put(s, tmp, (size_t)k);
}
static void kern__gsb_end(kern__gsb *s) {
    if (s->buf && s->size) s->buf[s->n < s->size ? s->n : s->size - 1] = 0;
}

static void kern__g_copy_str(char *dst, size_t size, const char *src) {
    size_t l = strlen(src);
    if (!size) return;
    if (l >= size) l = size - 1;
    memcpy(dst, src, l);
    dst[l] = 0;
}

/* Shortest %g spelling of a float that reads back to the same float. */
static void kern__g_ftoa(float v, char *buf, size_t size) {
    int prec;
    if (v != v) { snprintf(buf, size, "nan"); return; }
    if (v == (float)INFINITY) { snprintf(buf, size, "inf"); return; }
    if (v == -(float)INFINITY) { snprintf(buf, size, "-inf"); return; }
    {
        /* the shortest spelling that reads back; no exponent for 1e-4 <=
         * |v| < 1e15 (so 30, not 3e+01) */
        double a = fabs((double)v);
        int plain = a == 0 || (a >= 1e-4 && a < 1e15);
        char first[48] = "";
        for (prec = 1; prec <= 9; prec++) {
            snprintf(buf, size, "%.*g", prec, (double)v);
            if ((float)strtod(buf, NULL) != v) continue;
            if (!first[0]) kern__g_copy_str(first, sizeof first, buf);
            if (!plain || !strchr(buf, 'e')) return;
        }
        kern__g_copy_str(buf, size, first);
    }
}
/* The same for doubles (constants). */
static void kern__g_dtoa(double v, char *buf, size_t size) {
    int prec;
    if (v != v) { snprintf(buf, size, "nan"); return; }
    if (v == (double)INFINITY) { snprintf(buf, size, "inf"); return; }
    if (v == -(double)INFINITY) { snprintf(buf, size, "-inf"); return; }
    {
        double a = fabs(v);
        int plain = a == 0 || (a >= 1e-4 && a < 1e15);
        char first[48] = "";
        for (prec = 1; prec <= 17; prec++) {
            snprintf(buf, size, "%.*g", prec, v);
            if (strtod(buf, NULL) != v) continue;
            if (!first[0]) kern__g_copy_str(first, sizeof first, buf);
            if (!plain || !strchr(buf, 'e')) return;
        }
        kern__g_copy_str(buf, size, first);
    }
}

/* Stable sort of idx[0..n) by key[idx[i]] ascending (merge sort with a
 * scratch array of n entries). */
static void kern__g_argsort(int32_t *idx, int32_t *tmp, int64_t n, const int64_t *key) {
    int64_t width, i;
    for (width = 1; width < n; width *= 2) {
        for (i = 0; i < n; i += 2 * width) {
            int64_t a = i, m = i + width < n ? i + width : n, b = m;
            int64_t e = i + 2 * width < n ? i + 2 * width : n, o = i;
            while (a < m && b < e) tmp[o++] = key[idx[b]] < key[idx[a]] ? idx[b++] : idx[a++];
            while (a < m) tmp[o++] = idx[a++];
            while (b < e) tmp[o++] = idx[b++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof(int32_t));
    }
}

/* --------------------------------------------------- graph structures */

#define KERN__G_MAX_TERMS 8
#define KERN__G_NAME_MAX 127

/* A symbolic dim: sum of coef * monomial, monomial = product of symbols
 * (4-bit exponent per symbol, 16 symbols). Canonical: terms sorted by
 * term order (kern__gx_before; the constant last), nonzero coefs. A
 * constant >= 0 is a concrete dim, never an expression; a negative
 * constant (an intermediate such as 3 - 5) is interned like any
 * expression so it cannot be mistaken for a handle. Interned per graph, so
 * two dims are equal iff their handles are. Handle of expr e: -(2 + e). */
typedef struct kern__gexpr {
    int nt;
    int64_t c[KERN__G_MAX_TERMS];
    uint64_t m[KERN__G_MAX_TERMS];
} kern__gexpr;

typedef struct kern__gval {
    uint32_t name;   /* offset in the string pool */
    uint32_t hash;   /* kern__g_hash of the name (low 32 bits) */
    uint8_t kind;    /* kern_graph_val_kind */
    kern_dtype dtype;
    int ndim;
    int64_t dims[KERN_MAX_DIMS];
    int32_t node;    /* producer (NODE) */
    int32_t oidx;    /* output index (NODE) */
    int32_t aux;     /* weight / const slot, or input index */
} kern__gval;

/* What the node scans of the passes and the planner read (op, dead, pos,
 * in, out) lies in the first 64 bytes; the attributes follow. */
typedef struct kern__gnode {
    kern_graph_op op;
    int n_in, n_out;
    /* planner bookkeeping */
    uint8_t dead;
    uint8_t xform;     /* 1: made by the quantize transform, 2: sparsify */
    int64_t pos;       /* order key */
    uint32_t fused;    /* string: what the passes folded in ("" = nothing) */
    kern_graph_val in[KERN_GRAPH_MAX_INPUTS];
    kern_graph_val out[KERN_GRAPH_MAX_OUTPUTS];
    kern_graph_attrs a;
} kern__gnode;

typedef struct kern__gweight {
    int32_t val;
    void *data;  /* contiguous row-major; NULL = not bound */
    int owned;   /* 1: the graph's copy; 2: made by a pass, the plan's */
    int n_src;   /* owned == 2: rows of these weights, concatenated when the
                    plan prepares its weights (glu: two, interleaved in
                    kern_glu_pack's order) */
    int glu;
    int32_t src[KERN_GRAPH_MAX_OUTPUTS];
} kern__gweight;

typedef struct kern__gconst {
    int32_t val;
    double *v;   /* numel values */
    int64_t n;
} kern__gconst;

enum { KERN__GE_DIM = 1, KERN__GE_INPUT, KERN__GE_WEIGHT, KERN__GE_CONST, KERN__GE_NODE,
       KERN__GE_OUTPUT };
typedef struct kern__gentry {
    int32_t kind, idx;
} kern__gentry;

struct kern_graph {
    kern_ctx *ctx;
    char *str;          /* string pool (offset 0 = "") */
    int64_t n_str, cap_str;
    kern__gval *vals;   /* [0] unused */
    int64_t n_vals, cap_vals;
    kern__gnode *nodes;
    int64_t n_nodes, cap_nodes;
    kern__gweight *w;
    int64_t n_w, cap_w;
    kern__gconst *k;
    int64_t n_k, cap_k;
    kern__gentry *ent;  /* declaration order, for the IR */
    int64_t n_ent, cap_ent;
    kern__gexpr *ex;
    int64_t n_ex, cap_ex;
    int32_t *ht;        /* name -> value id, open addressing */
    int64_t cap_ht, n_ht;
    uint32_t sym[KERN_GRAPH_MAX_SYMBOLS];
    int n_sym;
    kern_graph_val *inputs, *outputs;
    int64_t n_inputs, cap_inputs, n_outputs, cap_outputs;
    /* products of symbolic dims already made: {a, b, a*b} by a hash of
     * (a, b) (expressions are interned and never removed, so an entry
     * stays true; all-zero = empty) */
    int64_t mulc[64][3];
};

static const char *kern__g_vname(const kern_graph *g, kern_graph_val v) {
    return v > 0 && v < g->n_vals ? g->str + g->vals[v].name : "?";
}

static int kern__g_intern_n(kern_graph *g, const char *s, size_t l, uint32_t *off) {
    if (!kern__g_grow(g->ctx, (void **)&g->str, &g->cap_str, g->n_str + (int64_t)l + 1, 1))
        return 0;
    memcpy(g->str + g->n_str, s, l + 1);
    *off = (uint32_t)g->n_str;
    g->n_str += (int64_t)l + 1;
    return 1;
}
static int kern__g_intern(kern_graph *g, const char *s, uint32_t *off) {
    return kern__g_intern_n(g, s, strlen(s), off);
}

/* the hash of the l-byte string s */
static uint64_t kern__g_hash_n(const char *s, size_t l) {
    /* FNV-1a over 8-byte words (names are short; this halves the cost of
     * the byte loop), then a final mix */
    uint64_t h = 1469598103934665603ull, w;
    while (l >= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 29;
        s += 8;
        l -= 8;
    }
    w = 0;
    memcpy(&w, s, l);
    h = (h ^ w ^ ((uint64_t)l << 56)) * 1099511628211ull;
    h ^= h >> 32;
    return h;
}
static uint64_t kern__g_hash(const char *s) { return kern__g_hash_n(s, strlen(s)); }

/* The value named `name` (0 if none); hash = kern__g_hash(name). */
static kern_graph_val kern__g_lookup_h(const kern_graph *g, const char *name, uint64_t hash) {
    uint64_t h, mask;
    if (!g->cap_ht) return 0;
    mask = (uint64_t)g->cap_ht - 1;
    for (h = hash & mask;; h = (h + 1) & mask) {
        int32_t v = g->ht[h];
        if (!v) return 0;
        if (g->vals[v].hash == (uint32_t)hash && strcmp(g->str + g->vals[v].name, name) == 0)
            return v;
    }
}
static kern_graph_val kern__g_lookup(const kern_graph *g, const char *name) {
    return kern__g_lookup_h(g, name, kern__g_hash(name));
}

/* Makes room for `extra` more names (so inserting cannot fail later). */
static int kern__g_ht_reserve(kern_graph *g, int64_t extra) {
    int64_t need = g->n_ht + extra, nc, i;
    int32_t *t;
    if (need * 2 <= g->cap_ht) return 1;
    nc = g->cap_ht ? g->cap_ht : 64;
    while (need * 2 > nc) nc *= 2;
    t = (int32_t *)kern__alloc(g->ctx, (size_t)nc * sizeof(int32_t));
    if (!t) return 0;
    memset(t, 0, (size_t)nc * sizeof(int32_t));
    for (i = 0; i < g->cap_ht; i++) {
        int32_t v = g->ht[i];
        uint64_t h;
        if (!v) continue;
        for (h = g->vals[v].hash & (uint64_t)(nc - 1); t[h];
             h = (h + 1) & (uint64_t)(nc - 1)) {
        }
        t[h] = v;
    }
    kern__free(g->ctx, g->ht);
    g->ht = t;
    g->cap_ht = nc;
    return 1;
}
static void kern__g_ht_insert(kern_graph *g, kern_graph_val v) {
    uint64_t mask = (uint64_t)g->cap_ht - 1, h;
    for (h = g->vals[v].hash & mask; g->ht[h]; h = (h + 1) & mask) {
    }
    g->ht[h] = v;
    g->n_ht++;
}

/* Names: 1..127 of [A-Za-z0-9_.:/-], not "-" alone. */

/* High bit of each byte of w set where that byte (< 0x80) lies in
 * [lo, hi]: x + (0x80 - lo) sets it iff x >= lo, x + (0x7f - hi) iff
 * x > hi, and neither sum carries into the next byte. */
#define KERN__G_B8(c) (0x0101010101010101ull * (uint64_t)(c))
static uint64_t kern__g_in8(uint64_t w, unsigned lo, unsigned hi) {
    return (w + KERN__G_B8(0x80u - lo)) & ~(w + KERN__G_B8(0x7fu - hi)) & KERN__G_B8(0x80u);
}
/* The length of a valid name, else -1: eight bytes per step. */
static int kern__g_name_len(const char *s) {
    size_t l, i;
    uint64_t bad = 0;
    if (!s) return -1;
    l = strlen(s);
    if (l == 0 || l > KERN__G_NAME_MAX || (l == 1 && s[0] == '-')) return -1;
    for (i = 0; i < l; i += 8) {
        uint64_t w = 0, pad = 0, x;
        if (i + 8 <= l) {
            memcpy(&w, s + i, 8);
        } else if (l >= 8) { /* the last 8 bytes, overlapping checked ones */
            memcpy(&w, s + l - 8, 8);
        } else { /* a short name, byte by byte (no partial-word copy) */
            size_t k;
            for (k = 0; k < l; k++) w |= (uint64_t)(unsigned char)s[k] << (8 * k);
            pad = KERN__G_B8(0x80u) << (8 * l); /* absent bytes pass */
        }
        x = w & ~KERN__G_B8(0x80u); /* bytes >= 0x80 fail below */
        bad |= (w | ~(kern__g_in8(x, '-', ':') | kern__g_in8(x, 'A', 'Z') |
                      kern__g_in8(x, '_', '_') | kern__g_in8(x, 'a', 'z') | pad)) &
               KERN__G_B8(0x80u);
    }
    return bad ? -1 : (int)l;
}
#undef KERN__G_B8
static int kern__g_sym_ok(const char *s, size_t l) {
    size_t i;
    if (l == 0 || l > 31) return 0;
    for (i = 0; i < l; i++) {
        char c = s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return 0;
    }
    return 1;
}

/* --------------------------------------------------------- dim exprs */

static int kern__gx_is_expr(int64_t d) { return d <= -2; }
static int64_t kern__gx_handle(int64_t e) { return -(2 + e); }
static int64_t kern__gx_index(int64_t d) { return -d - 2; }

/* Normalizes: sort by monomial (descending), merge equal monomials, drop
 * zero coefficients. 0 on overflow. */
/* Term order: higher degree first; then the larger exponent of the
 * earliest declared symbol first ("L+P", "B*L+N", "N+1"). */
static int kern__gx_before(uint64_t a, uint64_t b) {
    int k, da = 0, db = 0;
    for (k = 0; k < 16; k++) {
        da += (int)((a >> (4 * k)) & 15);
        db += (int)((b >> (4 * k)) & 15);
    }
    if (da != db) return da > db;
    for (k = 0; k < 16; k++) {
        uint64_t ea = (a >> (4 * k)) & 15, eb = (b >> (4 * k)) & 15;
        if (ea != eb) return ea > eb;
    }
    return 0;
}

static int kern__gx_norm(kern__gexpr *x) {
    int i, j, n = 0, k = 0;
    for (i = 1; i < x->nt; i++) { /* insertion sort in term order */
        int64_t c = x->c[i];
        uint64_t m = x->m[i];
        for (j = i - 1; j >= 0 && kern__gx_before(m, x->m[j]); j--) {
            x->c[j + 1] = x->c[j];
            x->m[j + 1] = x->m[j];
        }
        x->c[j + 1] = c;
        x->m[j + 1] = m;
    }
    for (i = 0; i < x->nt; i++) {
        if (n > 0 && x->m[n - 1] == x->m[i]) {
            if (kern_add_overflow_i64(x->c[n - 1], x->c[i], &x->c[n - 1])) return 0;
        } else {
            x->c[n] = x->c[i];
            x->m[n] = x->m[i];
            n++;
        }
    }
    for (i = 0; i < n; i++)
        if (x->c[i] != 0) {
            x->c[k] = x->c[i];
            x->m[k] = x->m[i];
            k++;
        }
    x->nt = k;
    return 1;
}

/* Expression of a dim (a concrete dim is a constant term). */
static void kern__gx_of(const kern_graph *g, int64_t d, kern__gexpr *x) {
    if (kern__gx_is_expr(d)) {
        *x = g->ex[kern__gx_index(d)];
    } else {
        memset(x, 0, sizeof *x);
        if (d != 0) {
            x->nt = 1;
            x->c[0] = d;
            x->m[0] = 0;
        }
    }
}

/* Interns a normalized expression; a constant becomes a concrete dim
 * (which may be negative: callers check). 0 on allocation failure. */
static int kern__gx_make(kern_graph *g, const kern__gexpr *x, int64_t *d) {
    int64_t i;
    if (x->nt == 0) { *d = 0; return 1; }
    if (x->nt == 1 && x->m[0] == 0 && x->c[0] >= 0) { *d = x->c[0]; return 1; }
    for (i = 0; i < g->n_ex; i++) {
        const kern__gexpr *y = &g->ex[i];
        if (y->nt == x->nt && memcmp(y->c, x->c, sizeof(int64_t) * (size_t)x->nt) == 0 &&
            memcmp(y->m, x->m, sizeof(uint64_t) * (size_t)x->nt) == 0) {
            *d = kern__gx_handle(i);
            return 1;
        }
    }
    if (!kern__g_grow(g->ctx, (void **)&g->ex, &g->cap_ex, g->n_ex + 1, sizeof(kern__gexpr)))
        return 0;
    g->ex[g->n_ex] = *x;
    *d = kern__gx_handle(g->n_ex);
    g->n_ex++;
    return 1;
}

static kern_status kern__gx_err_complex(void) {
    return kern__err(KERN_ERR_UNSUPPORTED,
                     "kern_graph: a symbolic dim grew beyond %d terms or exponent 15",
                     KERN__G_MAX_TERMS);
}

/* A concrete result that came out negative becomes an interned constant. */
static kern_status kern__gx_fix_neg(kern_graph *g, int64_t *r) {
    kern__gexpr x;
    if (*r >= 0) return KERN_OK;
    memset(&x, 0, sizeof x);
    x.nt = 1;
    x.c[0] = *r;
    if (!kern__gx_make(g, &x, r)) return kern__err(KERN_ERR_NOMEM, "kern_graph: out of memory");
    return KERN_OK;
}

/* 1 if d is a dim of g that is not a negative constant. */
static int kern__gx_valid(const kern_graph *g, int64_t d) {
    const kern__gexpr *x;
    if (!kern__gx_is_expr(d)) return d >= 0;
    if (kern__gx_index(d) >= g->n_ex) return 0;
    x = &g->ex[kern__gx_index(d)];
    return !(x->nt == 1 && x->m[0] == 0 && x->c[0] < 0);
}

/* r = a + sign * b */
static kern_status kern__gx_addsub(kern_graph *g, int64_t a, int64_t b, int sign, int64_t *r) {
    kern__gexpr x, y;
    int i;
    if (!kern__gx_is_expr(a) && !kern__gx_is_expr(b)) {
        if (kern_add_overflow_i64(a, sign * b, r)) return kern__gx_err_complex();
        return kern__gx_fix_neg(g, r);
    }
    kern__gx_of(g, a, &x);
    kern__gx_of(g, b, &y);
    {
        kern__gexpr z;
        memset(&z, 0, sizeof z);
        for (i = 0; i < x.nt; i++) { z.c[z.nt] = x.c[i]; z.m[z.nt] = x.m[i]; z.nt++; }
        for (i = 0; i < y.nt; i++) {
            int j, found = 0;
            for (j = 0; j < z.nt; j++)
                if (z.m[j] == y.m[i]) {
                    if (kern_add_overflow_i64(z.c[j], sign * y.c[i], &z.c[j]))
                        return kern__gx_err_complex();
                    found = 1;
                }
            if (!found) {
                if (z.nt >= KERN__G_MAX_TERMS) return kern__gx_err_complex();
                z.c[z.nt] = sign * y.c[i];
                z.m[z.nt] = y.m[i];
                z.nt++;
            }
        }
        if (!kern__gx_norm(&z)) return kern__gx_err_complex();
        if (!kern__gx_make(g, &z, r))
            return kern__err(KERN_ERR_NOMEM, "kern_graph: out of memory");
    }
    return KERN_OK;
}
static kern_status kern__gx_add(kern_graph *g, int64_t a, int64_t b, int64_t *r) {
    return kern__gx_addsub(g, a, b, 1, r);
}
static kern_status kern__gx_sub(kern_graph *g, int64_t a, int64_t b, int64_t *r) {
    return kern__gx_addsub(g, a, b, -1, r);
}

static int kern__gx_mono_mul(uint64_t a, uint64_t b, uint64_t *r) {
    int k;
    uint64_t out = 0;
    for (k = 0; k < 16; k++) {
        uint64_t e = ((a >> (4 * k)) & 15) + ((b >> (4 * k)) & 15);
        if (e > 15) return 0;
        out |= e << (4 * k);
    }
    *r = out;
    return 1;
}

static kern_status kern__gx_mul(kern_graph *g, int64_t a, int64_t b, int64_t *r) {
    kern__gexpr x, y, z;
    int i, j, slot;
    if (a == 1 || b == 1) { /* the common case in shape products */
        *r = a == 1 ? b : a;
        return KERN_OK;
    }
    if (!kern__gx_is_expr(a) && !kern__gx_is_expr(b)) {
        if (kern_mul_overflow_i64(a, b, r)) return kern__gx_err_complex();
        return kern__gx_fix_neg(g, r);
    }
    {
        uint64_t k = ((uint64_t)a * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)b * 0xc2b2ae3d27d4eb4full);
        slot = (int)(k >> 58);
        if (g->mulc[slot][0] == a && g->mulc[slot][1] == b && g->mulc[slot][2]) {
            *r = g->mulc[slot][2];
            return KERN_OK;
        }
    }
    kern__gx_of(g, a, &x);
    kern__gx_of(g, b, &y);
    memset(&z, 0, sizeof z);
    for (i = 0; i < x.nt; i++)
        for (j = 0; j < y.nt; j++) {
            int64_t c;
            uint64_t m;
            int k, found = 0;
            if (kern_mul_overflow_i64(x.c[i], y.c[j], &c) || !kern__gx_mono_mul(x.m[i], y.m[j], &m))
                return kern__gx_err_complex();
            for (k = 0; k < z.nt; k++)
                if (z.m[k] == m) {
                    if (kern_add_overflow_i64(z.c[k], c, &z.c[k])) return kern__gx_err_complex();
                    found = 1;
                }
            if (!found) {
                if (z.nt >= KERN__G_MAX_TERMS) return kern__gx_err_complex();
                z.c[z.nt] = c;
                z.m[z.nt] = m;
                z.nt++;
            }
        }
    if (!kern__gx_norm(&z)) return kern__gx_err_complex();
    if (!kern__gx_make(g, &z, r)) return kern__err(KERN_ERR_NOMEM, "kern_graph: out of memory");
    g->mulc[slot][0] = a;
    g->mulc[slot][1] = b;
    g->mulc[slot][2] = *r;
    return KERN_OK;
}

/* r = a / b exactly, b a single term (a concrete dim or c*monomial). 1 on
 * success, 0 if not exact or b is not a single term (nothing set). */
static int kern__gx_div(kern_graph *g, int64_t a, int64_t b, int64_t *r) {
    kern__gexpr x, y;
    int i, k;
    if (b == 0) return 0;
    if (!kern__gx_is_expr(a) && !kern__gx_is_expr(b)) {
        if (a % b) return 0;
        *r = a / b;
        return kern__gx_fix_neg(g, r) == KERN_OK;
    }
    kern__gx_of(g, a, &x);
    kern__gx_of(g, b, &y);
    if (y.nt != 1) return 0;
    for (i = 0; i < x.nt; i++) {
        uint64_t m = 0;
        if (x.c[i] % y.c[0]) return 0;
        for (k = 0; k < 16; k++) {
            uint64_t ea = (x.m[i] >> (4 * k)) & 15, eb = (y.m[0] >> (4 * k)) & 15;
            if (ea < eb) return 0;
            m |= (ea - eb) << (4 * k);
        }
        x.c[i] /= y.c[0];
        x.m[i] = m;
    }
    if (!kern__gx_norm(&x)) return 0;
    return kern__gx_make(g, &x, r);
}

/* Value of a dim under symbol values sv[] (overflow -> -1, flagged). */
static int64_t kern__gx_eval(const kern_graph *g, int64_t d, const int64_t *sv, int *bad) {
    const kern__gexpr *x;
    int64_t total = 0;
    int i, k;
    if (!kern__gx_is_expr(d)) return d;
    x = &g->ex[kern__gx_index(d)];
    for (i = 0; i < x->nt; i++) {
        int64_t t = x->c[i];
        for (k = 0; k < 16; k++) {
            int e = (int)((x->m[i] >> (4 * k)) & 15);
            while (e-- > 0)
                if (kern_mul_overflow_i64(t, sv[k], &t)) { *bad = 1; return -1; }
        }
        if (kern_add_overflow_i64(total, t, &total)) { *bad = 1; return -1; }
    }
    return total;
}

/* 1 if d is provably >= 0 for every binding (no negative coefficient). */
static int kern__gx_nonneg(const kern_graph *g, int64_t d) {
    const kern__gexpr *x;
    int i;
    if (!kern__gx_is_expr(d)) return d >= 0;
    x = &g->ex[kern__gx_index(d)];
    for (i = 0; i < x->nt; i++)
        if (x->c[i] < 0) return 0;
    return 1;
}

KERN_API char *kern_graph_dim_str(const kern_graph *g, int64_t d, char *buf, size_t size) {
    kern__gsb s;
    s.buf = buf;
    s.size = size;
    s.n = 0;
    if (!buf || !size) return buf;
    if (!g || !kern__gx_is_expr(d) || kern__gx_index(d) >= g->n_ex) {
        kern__gsb_printf(&s, "%lld", (long long)d);
    } else {
        const kern__gexpr *x = &g->ex[kern__gx_index(d)];
        int i, k;
        for (i = 0; i < x->nt; i++) {
            int64_t c = x->c[i];
            int first = 1;
            if (i > 0) kern__gsb_puts(&s, c < 0 ? "-" : "+");
            else if (c < 0) kern__gsb_puts(&s, "-");
            if (c < 0) c = -c;
            if (c != 1 || x->m[i] == 0) {
                kern__gsb_printf(&s, "%lld", (long long)c);
                first = 0;
            }
            for (k = 0; k < 16; k++) {
                int e = (int)((x->m[i] >> (4 * k)) & 15);
                while (e-- > 0) {
                    if (!first) kern__gsb_puts(&s, "*");
                    kern__gsb_puts(&s, k < g->n_sym ? g->str + g->sym[k] : "?");
                    first = 0;
                }
            }
        }
    }
    kern__gsb_end(&s);
    return buf;
}

/* "[B,L,64]" */
static char *kern__g_shape_str(const kern_graph *g, int ndim, const int64_t *dims, char *buf,
                               size_t size) {
    kern__gsb s;
    int i;
    s.buf = buf;
    s.size = size;
    s.n = 0;
    kern__gsb_puts(&s, "[");
    for (i = 0; i < ndim; i++) {
        char t[96];
        if (i) kern__gsb_puts(&s, ",");
        kern__gsb_puts(&s, kern_graph_dim_str(g, dims[i], t, sizeof t));
    }
    kern__gsb_puts(&s, "]");
    kern__gsb_end(&s);
    return buf;
}

static int kern__g_find_sym(const kern_graph *g, const char *s, size_t l) {
    int i;
    for (i = 0; i < g->n_sym; i++) {
        const char *n = g->str + g->sym[i];
        if (strlen(n) == l && memcmp(n, s, l) == 0) return i;
    }
    return -1;
}

/* Declares a symbol (adds a DIM entry for the IR). -1 on error. */
static int kern__g_add_sym(kern_graph *g, const char *s, size_t l) {
    char tmp[32];
    uint32_t off;
    int i = kern__g_find_sym(g, s, l);
    if (i >= 0) return i;
    if (g->n_sym >= KERN_GRAPH_MAX_SYMBOLS) {
        kern__err(KERN_ERR_UNSUPPORTED, "kern_graph: more than %d symbolic dims",
                  KERN_GRAPH_MAX_SYMBOLS);
        return -1;
    }
    memcpy(tmp, s, l);
    tmp[l] = 0;
    if (!kern__g_grow(g->ctx, (void **)&g->ent, &g->cap_ent, g->n_ent + 1, sizeof(kern__gentry)) ||
        !kern__g_intern(g, tmp, &off)) {
        kern__err(KERN_ERR_NOMEM, "kern_graph: out of memory");
        return -1;
    }
    g->sym[g->n_sym] = off;
    g->ent[g->n_ent].kind = KERN__GE_DIM;
    g->ent[g->n_ent].idx = g->n_sym;
    g->n_ent++;
    return g->n_sym++;
}

/* Parses a dim expression s[0..l): sum of +-products of integers and
 * symbols. declare: unknown symbols are declared (else an error). On error
 * *errpos is the offset of the problem. */
static kern_status kern__g_parse_dim(kern_graph *g, const char *s, size_t l, int declare,
                                     int64_t *out, size_t *errpos) {
    size_t i = 0;
    int64_t total = 0;
    int first = 1;
    kern_status st;
    *errpos = 0;
    if (l == 0) {
        return kern__err(KERN_ERR_ARG, "kern_graph: empty dim");
    }
    while (i < l) {
        int sign = 1;
        int64_t term = 1;
        int nf = 0;
        if (s[i] == '+' || s[i] == '-') {
            sign = s[i] == '-' ? -1 : 1;
            i++;
        } else if (!first) {
            *errpos = i;
            return kern__err(KERN_ERR_ARG, "kern_graph: expected '+', '-' or '*' in a dim");
        }
        first = 0;
        for (;;) {
            size_t b = i;
            int64_t f;
            if (i < l && s[i] >= '0' && s[i] <= '9') {
                uint64_t v = 0;
                while (i < l && s[i] >= '0' && s[i] <= '9') {
                    uint64_t dg = (uint64_t)(s[i] - '0');
                    /* any value up to INT64_MAX: products and sums of dims
                     * reach it, and the writer prints them folded */
                    if (v > ((uint64_t)INT64_MAX - dg) / 10) {
                        *errpos = b;
                        return kern__err(KERN_ERR_ARG, "kern_graph: dim value too large");
                    }
                    v = v * 10 + dg;
                    i++;
                }
                f = (int64_t)v;
            } else if (i < l && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                                 s[i] == '_')) {
                int k;
                while (i < l && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                                 s[i] == '_' || (s[i] >= '0' && s[i] <= '9')))
                    i++;
                if (!kern__g_sym_ok(s + b, i - b)) {
                    *errpos = b;
                    return kern__err(KERN_ERR_ARG, "kern_graph: symbol name too long");
                }
                k = declare ? kern__g_add_sym(g, s + b, i - b) : kern__g_find_sym(g, s + b, i - b);
                if (k < 0) {
                    *errpos = b;
                    if (!declare)
                        return kern__err(KERN_ERR_ARG, "kern_graph: symbol '%.*s' is not declared",
                                         (int)(i - b), s + b);
                    return KERN_ERR_NOMEM;
                }
                {
                    kern__gexpr x;
                    memset(&x, 0, sizeof x);
                    x.nt = 1;
                    x.c[0] = 1;
                    x.m[0] = (uint64_t)1 << (4 * k);
                    if (!kern__gx_make(g, &x, &f))
                        return kern__err(KERN_ERR_NOMEM, "kern_graph: out of memory");
                }
            } else {
                *errpos = i;
                return kern__err(KERN_ERR_ARG, "kern_graph: expected a number or a symbol in a dim");
            }
            st = kern__gx_mul(g, term, f, &term);
            if (st) { *errpos = b; return st; }
            nf++;
            if (i < l && s[i] == '*') { i++; continue; }
            break;
        }
        if (sign < 0) {
            st = kern__gx_mul(g, term, -1, &term);
            if (st) return st;
        }
        st = kern__gx_add(g, total, term, &total);
        if (st) return st;
    }
    *out = total;
    return KERN_OK;
}

/* ------------------------------------------------------------ creation */

KERN_API const char *kern_graph_op_name(kern_graph_op op) {
    switch (op) {
#define KERN__GRAPH_OP_NAME(name, text) case KERN_GRAPH_OP_##name: return text;
        KERN_GRAPH_OP_LIST(KERN__GRAPH_OP_NAME)
#undef KERN__GRAPH_OP_NAME
    default: break;
    }
    return "invalid";
}

KERN_API kern_status kern_graph_create(kern_ctx *ctx, kern_graph **out) {
    kern_graph *g;
    if (!out) return kern__err(KERN_ERR_ARG, "kern_graph_create: out is NULL");
    if (!ctx) {
        ctx = kern_default_ctx();
        if (!ctx) return KERN_ERR_NOMEM;
    }
    g = (kern_graph *)kern__alloc(ctx, sizeof *g);
    if (!g) return kern__err(KERN_ERR_NOMEM, "kern_graph_create: out of memory");
    memset(g, 0, sizeof *g);
    g->ctx = ctx;
    /* room for a 12-layer transformer without regrowing (which copies) */
    if (!kern__g_grow_raw(ctx, (void **)&g->str, &g->cap_str, 16384, 1) ||
        !kern__g_grow_raw(ctx, (void **)&g->vals, &g->cap_vals, 512, sizeof(kern__gval)) ||
        !kern__g_grow_raw(ctx, (void **)&g->nodes, &g->cap_nodes, 256, sizeof(kern__gnode)) ||
        !kern__g_grow(ctx, (void **)&g->ent, &g->cap_ent, 512, sizeof(kern__gentry)) ||
        !kern__g_ht_reserve(g, 1024)) {
        kern_graph_destroy(g);
        return kern__err(KERN_ERR_NOMEM, "kern_graph_create: out of memory");
    }
    g->str[0] = 0;
    g->n_str = 1; /* offset 0 is "" */
    memset(&g->vals[0], 0, sizeof g->vals[0]);
    g->n_vals = 1;
    *out = g;
    return KERN_OK;
}

KERN_API void kern_graph_destroy(kern_graph *g) {
    int64_t i;
    kern_ctx *ctx;
    if (!g) return;
    ctx = g->ctx;
    for (i = 0; i < g->n_w; i++)
        if (g->w[i].owned) kern__free(ctx, g->w[i].data);
    for (i = 0; i < g->n_k; i++) kern__free(ctx, g->k[i].v);
    kern__free(ctx, g->str);
    kern__free(ctx, g->vals);
    kern__free(ctx, g->nodes);
    kern__free(ctx, g->w);
    kern__free(ctx, g->k);
    kern__free(ctx, g->ent);
    kern__free(ctx, g->ex);
    kern__free(ctx, g->ht);
    kern__free(ctx, g->inputs);
    kern__free(ctx, g->outputs);
    kern__free(ctx, g);
}

KERN_API kern_status kern_graph_symbol(kern_graph *g, const char *name, int64_t *dim) {
    size_t e;
    if (!g || !name || !dim) return kern__err(KERN_ERR_ARG, "kern_graph_symbol: NULL argument");
    if (!kern__g_sym_ok(name, strlen(name)))
        return kern__err(KERN_ERR_ARG,
                         "kern_graph_symbol: '%s' is not a symbol name (a letter or '_', then "
                         "letters, digits, '_'; at most 31)",
                         name);
    return kern__g_parse_dim(g, name, strlen(name), 1, dim, &e);
}

KERN_API kern_status kern_graph_dim(kern_graph *g, const char *expr, int64_t *dim) {
    size_t e;
    kern_status st;
    int64_t d;
    if (!g || !expr || !dim) return kern__err(KERN_ERR_ARG, "kern_graph_dim: NULL argument");
    st = kern__g_parse_dim(g, expr, strlen(expr), 1, &d, &e);
    if (st)
        return kern__err(st, "kern_graph_dim: '%s' at offset %zu: %s", expr, e,
                         strncmp(kern_last_error(), "kern_graph: ", 12) == 0
                             ? kern_last_error() + 12
                             : kern_last_error());
    if (!kern__gx_valid(g, d))
        return kern__err(KERN_ERR_SHAPE, "kern_graph_dim: '%s' is negative", expr);
    *dim = d;
    return KERN_OK;
}

/* Reserves room for one more value (+ entries); nothing changes on failure. */
static kern_status kern__g_reserve_val(kern_graph *g, int nvals, const char *name) {
    if (!kern__g_grow_raw(g->ctx, (void **)&g->vals, &g->cap_vals, g->n_vals + nvals,
                          sizeof(kern__gval)) ||
        !kern__g_grow(g->ctx, (void **)&g->ent, &g->cap_ent, g->n_ent + 2, sizeof(kern__gentry)) ||
        !kern__g_grow_raw(g->ctx, (void **)&g->str, &g->cap_str,
                      g->n_str + (int64_t)(nvals * (KERN__G_NAME_MAX + 8)), 1) ||
        !kern__g_ht_reserve(g, nvals))
        return kern__err(KERN_ERR_NOMEM, "kern_graph: out of memory adding '%s'", name);
    return KERN_OK;
}

/* A checked name: its hash and length, from one scan. */
typedef struct kern__gkey {
    uint64_t hash;
    size_t len;
} kern__gkey;

/* Checks a name for a new value; *key is what kern__g_new_val needs. */
static kern_status kern__g_check_new_name(const kern_graph *g, const char *op, const char *name,
                                          kern__gkey *key) {
    int l = kern__g_name_len(name);
    if (l < 0)
        return kern__err(KERN_ERR_ARG,
                         "%s: name '%.140s' is not 1..127 characters of letters, digits and "
                         "_ . : / -",
                         op, name ? name : "(null)");
    key->len = (size_t)l;
    key->hash = kern__g_hash_n(name, key->len);
    if (kern__g_lookup_h(g, name, key->hash))
        return kern__err(KERN_ERR_ARG, "%s: a value named '%s' already exists", op, name);
    return KERN_OK;
}

/* Appends a value (room reserved); key from kern__g_check_new_name. */
static kern_graph_val kern__g_new_val(kern_graph *g, const char *name, kern__gkey key, int kind,
                                      kern_dtype dt, int ndim, const int64_t *dims) {
    kern_graph_val v = (kern_graph_val)g->n_vals++;
    kern__gval *x = &g->vals[v];
    memset(x, 0, sizeof *x);
    kern__g_intern_n(g, name, key.len, &x->name); /* room reserved */
    x->hash = (uint32_t)key.hash;
    x->kind = (uint8_t)kind;
    x->dtype = dt;
    x->ndim = ndim;
    if (ndim) memcpy(x->dims, dims, sizeof(int64_t) * (size_t)ndim);
    kern__g_ht_insert(g, v);
    return v;
}

static kern_status kern__g_check_dims(const kern_graph *g, const char *op, const char *name,
                                      int ndim, const int64_t *dims, int allow_sym) {
    int i;
    if (ndim < 0 || ndim > KERN_MAX_DIMS)
        return kern__err(KERN_ERR_ARG, "%s: '%s': ndim=%d is outside 0..%d", op, name, ndim,
                         KERN_MAX_DIMS);
    if (ndim > 0 && !dims) return kern__err(KERN_ERR_ARG, "%s: '%s': dims is NULL", op, name);
    for (i = 0; i < ndim; i++) {
        if (kern__gx_is_expr(dims[i])) {
            if (!allow_sym)
                return kern__err(KERN_ERR_SHAPE, "%s: '%s': dim %d is symbolic; weights and "
                                 "constants have concrete shapes", op, name, i);
            if (kern__gx_index(dims[i]) >= g->n_ex)
                return kern__err(KERN_ERR_ARG, "%s: '%s': dim %d=%lld is not a dim of this graph",
                                 op, name, i, (long long)dims[i]);
            if (!kern__gx_valid(g, dims[i]))
                return kern__err(KERN_ERR_SHAPE, "%s: '%s': dim %d is negative", op, name, i);
        } else if (dims[i] < 0) {
            return kern__err(KERN_ERR_SHAPE, "%s: '%s': dim %d=%lld is negative", op, name, i,
                             (long long)dims[i]);
        }
    }
    return KERN_OK;
}

KERN_API kern_status kern_graph_input(kern_graph *g, const char *name, kern_dtype dt, int ndim,
                                      const int64_t *dims, kern_graph_val *out) {
    const char *op = "kern_graph_input";
    kern_status st;
    kern__gkey h;
    kern_graph_val v;
    if (!g) return kern__err(KERN_ERR_ARG, "%s: g is NULL", op);
    if ((st = kern__g_check_new_name(g, op, name, &h)) != KERN_OK) return st;
    if (kern_dtype_size(dt) == 0)
        return kern__err(KERN_ERR_DTYPE, "%s: '%s': dtype %d is not a kern_dtype", op, name, (int)dt);
    if ((st = kern__g_check_dims(g, op, name, ndim, dims, 1)) != KERN_OK) return st;
    if ((st = kern__g_reserve_val(g, 1, name)) != KERN_OK) return st;
    if (!kern__g_grow(g->ctx, (void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1,
                      sizeof(kern_graph_val)))
        return kern__err(KERN_ERR_NOMEM, "%s: out of memory", op);
    v = kern__g_new_val(g, name, h, KERN_GRAPH_VAL_INPUT, dt, ndim, dims);
    g->vals[v].aux = (int32_t)g->n_inputs;
    g->inputs[g->n_inputs++] = v;
    g->ent[g->n_ent].kind = KERN__GE_INPUT;
    g->ent[g->n_ent].idx = v;
    g->n_ent++;
    if (out) *out = v;
    return KERN_OK;
}

/* Parses "[d0,d1,...]" (declare unknown symbols). */
static kern_status kern__g_parse_shape(kern_graph *g, const char *s, size_t l, int declare,
                                       int *ndim, int64_t *dims, size_t *errpos) {
    size_t i = 0;
    int n = 0;
    *errpos = 0;
    if (l < 2 || s[0] != '[' || s[l - 1] != ']')
        return kern__err(KERN_ERR_ARG, "kern_graph: a shape is written [d0,d1,...]");
    /* spaces and tabs around each dim are allowed ("[B, L]", "[ ]") */
    for (i = 1; i < l - 1 && (s[i] == ' ' || s[i] == '\t'); i++) {
    }
    if (i == l - 1) { *ndim = 0; return KERN_OK; }
    i = 1;
    while (i < l - 1) {
        size_t b, e, end;
        kern_status st;
        while (i < l - 1 && (s[i] == ' ' || s[i] == '\t')) i++;
        b = i;
        while (i < l - 1 && s[i] != ',') i++;
        for (end = i; end > b && (s[end - 1] == ' ' || s[end - 1] == '\t'); end--) {
        }
        if (n >= KERN_MAX_DIMS) {
            *errpos = b;
            return kern__err(KERN_ERR_ARG, "kern_graph: more than %d dims", KERN_MAX_DIMS);
        }
        st = kern__g_parse_dim(g, s + b, end - b, declare, &dims[n], &e);
        if (st) { *errpos = b + e; return st; }
        if (!kern__gx_valid(g, dims[n])) {
            *errpos = b;
            return kern__err(KERN_ERR_SHAPE, "kern_graph: dim %d is negative", n);
        }
        n++;
        if (i < l - 1) {
            i++;
            if (i == l - 1) { *errpos = i; return kern__err(KERN_ERR_ARG, "kern_graph: empty dim"); }
        }
    }
    *ndim = n;
    return KERN_OK;
}

KERN_API kern_status kern_graph_input_s(kern_graph *g, const char *name, kern_dtype dt,
                                        const char *shape, kern_graph_val *out) {
    int ndim = 0; /* set on success; g++ -O3 cannot see that */
    int64_t dims[KERN_MAX_DIMS];
    size_t e;
    kern_status st;
    if (!g || !shape) return kern__err(KERN_ERR_ARG, "kern_graph_input_s: NULL argument");
    st = kern__g_parse_shape(g, shape, strlen(shape), 1, &ndim, dims, &e);
    if (st)
        return kern__err(st, "kern_graph_input_s: '%s': shape \"%s\" at offset %zu: %s",
                         name ? name : "?", shape, e, kern_last_error() + 12);
    return kern_graph_input(g, name, dt, ndim, dims, out);
}

static kern_status kern__g_weight_data(kern_graph *g, const char *op, const char *name,
                                       const kern_tensor *t, int flags, void **data, int *owned) {
    int64_t n = kern_tensor_numel(t);
    size_t bytes = (size_t)n * kern_dtype_size(t->dtype);
    *owned = 0;
    *data = NULL;
    if (!t->data) return KERN_OK;
    if (flags & KERN_GRAPH_COPY) {
        void *p = kern__alloc(g->ctx, bytes ? bytes : 1);
        int64_t i;
        int64_t idx[KERN_MAX_DIMS];
        size_t es = kern_dtype_size(t->dtype);
        if (!p) return kern__err(KERN_ERR_NOMEM, "%s: '%s': cannot copy %zu bytes", op, name, bytes);
        if (kern_tensor_is_contiguous(t)) {
            memcpy(p, t->data, bytes);
        } else {
            memset(idx, 0, sizeof idx);
            for (i = 0; i < n; i++) {
                int64_t off = 0;
                int d;
                for (d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
                memcpy((char *)p + (size_t)i * es, (const char *)t->data + off * (int64_t)es, es);
                for (d = t->ndim - 1; d >= 0; d--) {
                    if (++idx[d] < t->shape[d]) break;
                    idx[d] = 0;
                }
            }
        }
        *data = p;
        *owned = 1;
        return KERN_OK;
    }
    if (!kern_tensor_is_contiguous(t))
        return kern__err(KERN_ERR_LAYOUT,
                         "%s: '%s': a borrowed weight must be contiguous (use KERN_GRAPH_COPY)",
                         op, name);
    *data = t->data;
    return KERN_OK;
}

KERN_API kern_status kern_graph_weight(kern_graph *g, const char *name, const kern_tensor *t,
                                       int flags, kern_graph_val *out) {
    const char *op = "kern_graph_weight";
    kern_status st;
    kern__gkey h;
    kern_graph_val v;
    void *data;
    int owned;
    kern_tensor chk;
    if (!g || !t) return kern__err(KERN_ERR_ARG, "%s: g or t is NULL", op);
    if ((st = kern__g_check_new_name(g, op, name, &h)) != KERN_OK) return st;
    chk = *t;
    if (!chk.data) { /* declared only: check the shape with a dummy pointer */
        int i;
        for (i = 0; i < chk.ndim && i < KERN_MAX_DIMS; i++) chk.stride[i] = 0;
        chk.data = (void *)g;
    }
    if ((st = kern_tensor_check(&chk, op, name)) != KERN_OK) return st;
    if ((st = kern__g_reserve_val(g, 1, name)) != KERN_OK) return st;
    if (!kern__g_grow(g->ctx, (void **)&g->w, &g->cap_w, g->n_w + 1, sizeof(kern__gweight)))
        return kern__err(KERN_ERR_NOMEM, "%s: out of memory", op);
    if ((st = kern__g_weight_data(g, op, name, t, flags, &data, &owned)) != KERN_OK) return st;
    v = kern__g_new_val(g, name, h, KERN_GRAPH_VAL_WEIGHT, t->dtype, t->ndim, t->shape);
    g->vals[v].aux = (int32_t)g->n_w;
    memset(&g->w[g->n_w], 0, sizeof g->w[g->n_w]);
    g->w[g->n_w].val = v;
    g->w[g->n_w].data = data;
    g->w[g->n_w].owned = owned;
    g->n_w++;
    g->ent[g->n_ent].kind = KERN__GE_WEIGHT;
    g->ent[g->n_ent].idx = v;
    g->n_ent++;
    if (out) *out = v;
    return KERN_OK;
}

KERN_API kern_status kern_graph_const(kern_graph *g, const char *name, kern_dtype dt, int ndim,
                                      const int64_t *shape, const double *values,
                                      kern_graph_val *out) {
    const char *op = "kern_graph_const";
    kern_status st;
    kern__gkey h;
    kern_graph_val v;
    int64_t n = 1;
    int i;
    double *copy;
    if (!g) return kern__err(KERN_ERR_ARG, "%s: g is NULL", op);
    if ((st = kern__g_check_new_name(g, op, name, &h)) != KERN_OK) return st;
    if (kern_dtype_size(dt) == 0)
        return kern__err(KERN_ERR_DTYPE, "%s: '%s': dtype %d is not a kern_dtype", op, name, (int)dt);
    if ((st = kern__g_check_dims(g, op, name, ndim, shape, 0)) != KERN_OK) return st;
    for (i = 0; i < ndim; i++)
        if (kern_mul_overflow_i64(n, shape[i], &n) || n > 65536)
            return kern__err(KERN_ERR_SHAPE,
                             "%s: '%s': constants hold at most 65536 values (use a weight)", op,
                             name);
    if (n > 0 && !values) return kern__err(KERN_ERR_ARG, "%s: '%s': values is NULL", op, name);
    if (dt == KERN_I32 || dt == KERN_I64 || dt == KERN_I8 || dt == KERN_U8 || dt == KERN_BOOL) {
        /* an integer constant holds integers its dtype represents (the
         * conversion at plan time is a plain C cast) */
        const double lo = dt == KERN_I32 ? -2147483648.0 : dt == KERN_I64 ? -9223372036854775808.0
                        : dt == KERN_I8 ? -128.0 : 0.0;
        const double hi = dt == KERN_I32 ? 2147483647.0 : dt == KERN_I64 ? 9223372036854775807.0
                        : dt == KERN_I8 ? 127.0 : dt == KERN_U8 ? 255.0 : 1.0;
        int64_t q;
        for (q = 0; q < n; q++)
            if (!(values[q] >= lo && values[q] < hi + 1.0) || values[q] != floor(values[q]))
                return kern__err(KERN_ERR_ARG,
                                 "%s: '%s': value %g (element %lld) is not an integer that %s holds", op,
                                 name, values[q], (long long)q, kern_dtype_name(dt));
    }
    if ((st = kern__g_reserve_val(g, 1, name)) != KERN_OK) return st;
    if (!kern__g_grow(g->ctx, (void **)&g->k, &g->cap_k, g->n_k + 1, sizeof(kern__gconst)))
        return kern__err(KERN_ERR_NOMEM, "%s: out of memory", op);
    copy = (double *)kern__alloc(g->ctx, (size_t)(n ? n : 1) * sizeof(double));
    if (!copy) return kern__err(KERN_ERR_NOMEM, "%s: out of memory", op);
    if (n) memcpy(copy, values, (size_t)n * sizeof(double));
    v = kern__g_new_val(g, name, h, KERN_GRAPH_VAL_CONST, dt, ndim, shape);
    g->vals[v].aux = (int32_t)g->n_k;
    g->k[g->n_k].val = v;
    g->k[g->n_k].v = copy;
    g->k[g->n_k].n = n;
    g->n_k++;
    g->ent[g->n_ent].kind = KERN__GE_CONST;
    g->ent[g->n_ent].idx = v;
    g->n_ent++;
    if (out) *out = v;
    return KERN_OK;
}

KERN_API kern_status kern_graph_scalar(kern_graph *g, const char *name, kern_dtype dt,
                                       double value, kern_graph_val *out) {
    return kern_graph_const(g, name, dt, 0, NULL, &value, out);
}

KERN_API kern_status kern_graph_output(kern_graph *g, kern_graph_val v) {
    if (!g) return kern__err(KERN_ERR_ARG, "kern_graph_output: g is NULL");
    if (v <= 0 || v >= g->n_vals)
        return kern__err(KERN_ERR_ARG, "kern_graph_output: value %d is not in the graph", (int)v);
    if (!kern__g_grow(g->ctx, (void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1,
                      sizeof(kern_graph_val)) ||
        !kern__g_grow(g->ctx, (void **)&g->ent, &g->cap_ent, g->n_ent + 1, sizeof(kern__gentry)))
        return kern__err(KERN_ERR_NOMEM, "kern_graph_output: out of memory");
    g->outputs[g->n_outputs++] = v;
    g->ent[g->n_ent].kind = KERN__GE_OUTPUT;
    g->ent[g->n_ent].idx = v;
    g->n_ent++;
    return KERN_OK;
}

/* ------------------------------------------------------- attributes */

enum {
    KERN__GA_ACT, KERN__GA_ALPHA, KERN__GA_OUT_SCALE, KERN__GA_TRANS_A, KERN__GA_TRANS_B,
    KERN__GA_EPS, KERN__GA_AXIS, KERN__GA_AXIS2, KERN__GA_PERM, KERN__GA_SHAPE, KERN__GA_SIZES,
    KERN__GA_START, KERN__GA_LENGTH, KERN__GA_EXPONENT, KERN__GA_IS_CAUSAL,
    KERN__GA_CAUSAL_BR, KERN__GA_GQA, KERN__GA_SCALE, KERN__GA_SOFTCAP, KERN__GA_WINDOW,
    KERN__GA_REDUCE, KERN__GA_INCLUDE_SELF, KERN__GA_DTYPE, KERN__GA_PRUNE, KERN__GA_INTERLEAVED,
    KERN__GA_K, KERN__GA_GLU, KERN__GA_COUNT
};
enum {
    KERN__GT_ACT = 1, KERN__GT_FLOATSET, KERN__GT_FLOAT, KERN__GT_BOOL, KERN__GT_INT,
    KERN__GT_INTLIST, KERN__GT_DIMLIST, KERN__GT_DIM, KERN__GT_WINDOW, KERN__GT_REDUCE,
    KERN__GT_DTYPE
};
typedef struct kern__gattr {
    const char *name;
    int type;
    size_t off, off2; /* field; flag / count / second field */
    size_t size;      /* bytes of the field at off */
} kern__gattr;

#define KERN__GOFF(f) offsetof(kern_graph_attrs, f)
#define KERN__GSZ(f) sizeof(((kern_graph_attrs *)0)->f)
static const kern__gattr kern__gattrs[KERN__GA_COUNT] = {
    {"act", KERN__GT_ACT, KERN__GOFF(act), 0, KERN__GSZ(act)},
    {"alpha", KERN__GT_FLOATSET, KERN__GOFF(alpha), KERN__GOFF(alpha_set), KERN__GSZ(alpha)},
    {"out_scale", KERN__GT_FLOAT, KERN__GOFF(out_scale), 0, KERN__GSZ(out_scale)},
    {"trans_a", KERN__GT_BOOL, KERN__GOFF(trans_a), 0, KERN__GSZ(trans_a)},
    {"trans_b", KERN__GT_BOOL, KERN__GOFF(trans_b), 0, KERN__GSZ(trans_b)},
    {"eps", KERN__GT_FLOATSET, KERN__GOFF(eps), KERN__GOFF(eps_set), KERN__GSZ(eps)},
    {"axis", KERN__GT_INT, KERN__GOFF(axis), 0, KERN__GSZ(axis)},
    {"axis2", KERN__GT_INT, KERN__GOFF(axis2), 0, KERN__GSZ(axis2)},
    {"perm", KERN__GT_INTLIST, KERN__GOFF(perm), KERN__GOFF(n_perm), KERN__GSZ(perm)},
    {"shape", KERN__GT_DIMLIST, KERN__GOFF(shape), KERN__GOFF(n_shape), KERN__GSZ(shape)},
    {"sizes", KERN__GT_DIMLIST, KERN__GOFF(sizes), KERN__GOFF(n_sizes), KERN__GSZ(sizes)},
    {"start", KERN__GT_DIM, KERN__GOFF(start), 0, KERN__GSZ(start)},
    {"length", KERN__GT_DIM, KERN__GOFF(length), 0, KERN__GSZ(length)},
    {"exponent", KERN__GT_FLOAT, KERN__GOFF(exponent), 0, KERN__GSZ(exponent)},
    {"is_causal", KERN__GT_BOOL, KERN__GOFF(is_causal), 0, KERN__GSZ(is_causal)},
    {"causal_bottom_right", KERN__GT_BOOL, KERN__GOFF(causal_bottom_right), 0, KERN__GSZ(causal_bottom_right)},
    {"enable_gqa", KERN__GT_BOOL, KERN__GOFF(enable_gqa), 0, KERN__GSZ(enable_gqa)},
    {"scale", KERN__GT_FLOAT, KERN__GOFF(scale), 0, KERN__GSZ(scale)},
    {"softcap", KERN__GT_FLOAT, KERN__GOFF(softcap), 0, KERN__GSZ(softcap)},
    {"window", KERN__GT_WINDOW, KERN__GOFF(window_left), KERN__GOFF(window_set), 2 * sizeof(int64_t)},
    {"reduce", KERN__GT_REDUCE, KERN__GOFF(reduce), 0, KERN__GSZ(reduce)},
    {"include_self", KERN__GT_BOOL, KERN__GOFF(include_self), 0, KERN__GSZ(include_self)},
    {"dtype", KERN__GT_DTYPE, KERN__GOFF(dtype), 0, KERN__GSZ(dtype)},
    {"prune", KERN__GT_BOOL, KERN__GOFF(prune), 0, KERN__GSZ(prune)},
    {"interleaved", KERN__GT_BOOL, KERN__GOFF(interleaved), 0, KERN__GSZ(interleaved)},
    {"k", KERN__GT_INT, KERN__GOFF(k), 0, KERN__GSZ(k)},
    {"glu", KERN__GT_BOOL, KERN__GOFF(glu), 0, KERN__GSZ(glu)}};
#undef KERN__GOFF
#undef KERN__GSZ

#define KERN__GAF(x) (1u << KERN__GA_##x)
#define KERN__GA_GEMM                                                         \
    (KERN__GAF(ACT) | KERN__GAF(ALPHA) | KERN__GAF(OUT_SCALE))
#define KERN__GA_SDPA                                                         \
    (KERN__GAF(IS_CAUSAL) | KERN__GAF(CAUSAL_BR) | KERN__GAF(GQA) | KERN__GAF(SCALE) |      \
     KERN__GAF(SOFTCAP) | KERN__GAF(WINDOW))

/* 1 if attribute `a` holds its default (zero) value. */
static int kern__gattr_default(const kern_graph_attrs *at, int a) {
    const char *b = (const char *)at;
    const kern__gattr *d = &kern__gattrs[a];
    switch (d->type) {
    case KERN__GT_ACT: case KERN__GT_REDUCE: case KERN__GT_DTYPE: case KERN__GT_BOOL: {
        int v;
        memcpy(&v, b + d->off, sizeof v);
        return v == 0;
    }
    case KERN__GT_FLOATSET: case KERN__GT_WINDOW: {
        int v;
        memcpy(&v, b + d->off2, sizeof v);
        if (v) return 0;
        if (d->type == KERN__GT_WINDOW) {
            int64_t l, r;
            memcpy(&l, b + d->off, 8);
            memcpy(&r, b + d->off + 8, 8);
            return l == 0 && r == 0;
        } else {
            float f;
            memcpy(&f, b + d->off, sizeof f);
            return f == 0;
        }
    }
    case KERN__GT_FLOAT: {
        float f;
        memcpy(&f, b + d->off, sizeof f);
        return f == 0 && !signbit(f);
    }
    case KERN__GT_INT: case KERN__GT_DIM: {
        int64_t v;
        memcpy(&v, b + d->off, 8);
        return v == 0;
    }
    case KERN__GT_INTLIST: case KERN__GT_DIMLIST: {
        int n;
        memcpy(&n, b + d->off2, sizeof n);
        return n == 0;
    }
    default: return 1;
    }
}

/* 0 when no attribute outside the set `allowed` (bit a = attribute a)
 * can hold a value: every byte of *at outside the allowed attributes'
 * fields is zero (the common case, checked without the per-attribute
 * table walk). 1 means "look closer" (a padding byte or an unset -0.0f
 * may be nonzero and still hold the default). */
static int kern__gattr_foreign(const kern_graph_attrs *at, unsigned allowed) {
    static const unsigned char zero[sizeof(kern_graph_attrs)] = {0};
    kern_graph_attrs m = *at;
    unsigned char *b = (unsigned char *)&m;
    int a;
    for (a = 0; a < KERN__GA_COUNT; a++) {
        const kern__gattr *d = &kern__gattrs[a];
        if (!((allowed >> a) & 1u)) continue;
        memset(b + d->off, 0, d->size);
        if (d->off2) memset(b + d->off2, 0, sizeof(int));
    }
    return memcmp(&m, zero, sizeof m) != 0;
}

/* ---------------------------------------------------------- op table */

enum { KERN__GC_EXEC = 1, KERN__GC_FAMILY, KERN__GC_VIEW };

typedef struct kern__ginf {
    kern_graph *g;
    kern_graph_op op;
    const char *name;
    const kern_graph_attrs *a;
    const kern__gval *in[KERN_GRAPH_MAX_INPUTS];
    int n_in;
    int n_out;
    kern_dtype odt[KERN_GRAPH_MAX_OUTPUTS];
    int ond[KERN_GRAPH_MAX_OUTPUTS];
    int64_t od[KERN_GRAPH_MAX_OUTPUTS][KERN_MAX_DIMS];
} kern__ginf;

typedef kern_status (*kern__ginfer_fn)(kern__ginf *c);

typedef struct kern__gopdef {
    const char *slots;  /* input slot names; '?' marks optional ones */
    int max_in, min_in;
    int cls;
    int def_out, max_out;
    uint32_t attrs;
    kern__ginfer_fn infer;
} kern__gopdef;

static const kern__gopdef *kern__gop(kern_graph_op op);

/* The slot name of input i of op ("x", "weight", ... or "x3"). */
static void kern__g_slot_name(kern_graph_op op, int i, char *buf, size_t size) {
    const char *s = kern__gop(op)->slots;
    int k = 0;
    while (k < i && *s) {
        if (*s == ',') k++;
        s++;
    }
    if (op == KERN_GRAPH_OP_CONCAT || !*s) {
        snprintf(buf, size, "x%d", i);
        return;
    }
    {
        size_t l = 0;
        while (s[l] && s[l] != ',' && s[l] != '?') l++;
        snprintf(buf, size, "%.*s", (int)l, s);
    }
}

static kern_status kern__ginf_err(const kern__ginf *c, kern_status st, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static kern_status kern__ginf_err(const kern__ginf *c, kern_status st, const char *fmt, ...) {
    char detail[256], ins[300];
    kern__gsb s;
    int i;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    s.buf = ins;
    s.size = sizeof ins;
    s.n = 0;
    for (i = 0; i < c->n_in; i++) {
        char sn[24], sh[120];
        if (!c->in[i]) continue;
        kern__g_slot_name(c->op, i, sn, sizeof sn);
        kern__gsb_printf(&s, "%s%s=%s %s", s.n ? ", " : "", sn,
                         kern__g_shape_str(c->g, c->in[i]->ndim, c->in[i]->dims, sh, sizeof sh),
                         kern_dtype_name(c->in[i]->dtype));
    }
    kern__gsb_end(&s);
    return kern__err(st, "kern_graph: node '%s' (%s; %s): %s", c->name,
                     kern_graph_op_name(c->op), s.n ? ins : "no inputs", detail);
}

static int kern__gd_eq(int64_t a, int64_t b) { return a == b; }

static const char *kern__gd_s(const kern_graph *g, int64_t d, char *buf, size_t size) {
    return kern_graph_dim_str(g, d, buf, size);
}

#define KERN__GIN(i) (c->in[i])
#define KERN__GFLOAT(i)                                                       \
    do {                                                                      \
        if (c->in[i] && !kern_dtype_is_float(c->in[i]->dtype)) {              \
            char sn_[24];                                                     \
            kern__g_slot_name(c->op, i, sn_, sizeof sn_);                     \
            return kern__ginf_err(c, KERN_ERR_DTYPE, "%s must be f32, bf16 or f16", sn_); \
        }                                                                     \
    } while (0)

static kern_status kern__ginf_out(kern__ginf *c, int o, kern_dtype dt, int ndim,
                                  const int64_t *dims) {
    c->odt[o] = dt;
    c->ond[o] = ndim;
    if (ndim) memcpy(c->od[o], dims, sizeof(int64_t) * (size_t)ndim);
    return KERN_OK;
}

/* numpy broadcast of two symbolic shapes */
static kern_status kern__ginf_bcast(kern__ginf *c, int na, const int64_t *a, int nb,
                                    const int64_t *b, int *nout, int64_t *out) {
    int n = na > nb ? na : nb, i;
    for (i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (kern__gd_eq(da, db) || db == 1) out[i] = da;
        else if (da == 1) out[i] = db;
        else {
            char s1[64], s2[64];
            return kern__ginf_err(c, KERN_ERR_SHAPE, "dims %s and %s do not broadcast (dim %d of %d)",
                                  kern__gd_s(c->g, da, s1, sizeof s1),
                                  kern__gd_s(c->g, db, s2, sizeof s2), i, n);
        }
    }
    *nout = n;
    return KERN_OK;
}

/* 1 if shape r broadcasts to shape t */
static int kern__g_bcast_to(int nr, const int64_t *r, int nt, const int64_t *t) {
    int i;
    if (nr > nt) return 0;
    for (i = 0; i < nr; i++) {
        int64_t dr = r[i], dt = t[nt - nr + i];
        if (!kern__gd_eq(dr, dt) && dr != 1) return 0;
    }
    return 1;
}

static kern_status kern__ginf_epilogue(kern__ginf *c, int bias_slot, int res_slot, int64_t n,
                                       int nd, const int64_t *od, uint32_t acts) {
    char s1[64], s2[64];
    if (((unsigned)c->a->act >= KERN_ACT_COUNT) || !((acts >> c->a->act) & 1u))
        return kern__ginf_err(c, KERN_ERR_UNSUPPORTED, "act=%s is not supported by this op",
                              kern_act_name(c->a->act));
    if (bias_slot >= 0 && c->in[bias_slot]) {
        const kern__gval *b = c->in[bias_slot];
        KERN__GFLOAT(bias_slot);
        if (b->ndim != 1 || !kern__gd_eq(b->dims[0], n))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "bias must be [%s]",
                                  kern__gd_s(c->g, n, s1, sizeof s1));
    }
    if (res_slot >= 0 && c->in[res_slot]) {
        const kern__gval *r = c->in[res_slot];
        KERN__GFLOAT(res_slot);
        if (!kern__g_bcast_to(r->ndim, r->dims, nd, od))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "residual does not broadcast to the output %s",
                                  kern__g_shape_str(c->g, nd, od, s2, sizeof s2));
    }
    if (!isfinite(c->a->alpha) || !isfinite(c->a->out_scale))
        return kern__ginf_err(c, KERN_ERR_ARG, "alpha and out_scale must be finite");
    return KERN_OK;
}

#define KERN__GACTS_GEMM                                                      \
    ((1u << KERN_ACT_NONE) | (1u << KERN_ACT_GELU) | (1u << KERN_ACT_GELU_TANH) |            \
     (1u << KERN_ACT_RELU) | (1u << KERN_ACT_SILU))
#define KERN__GACTS_GELU                                                      \
    ((1u << KERN_ACT_NONE) | (1u << KERN_ACT_GELU) | (1u << KERN_ACT_GELU_TANH))

static kern_status kern__ginfer_linear_like(kern__ginf *c, int bias_slot, int res_slot,
                                            uint32_t acts, int need_same_dtype) {
    const kern__gval *x = KERN__GIN(0), *w = KERN__GIN(1);
    int64_t od[KERN_MAX_DIMS];
    char s1[64], s2[64];
    KERN__GFLOAT(0);
    if (x->ndim < 1) return kern__ginf_err(c, KERN_ERR_SHAPE, "x needs at least 1 dim");
    if (w->ndim != 2) return kern__ginf_err(c, KERN_ERR_SHAPE, "weight must be 2-D [N,K]");
    if (need_same_dtype) {
        KERN__GFLOAT(1);
        if (w->dtype != x->dtype)
            return kern__ginf_err(c, KERN_ERR_DTYPE, "x and weight must have the same dtype");
    }
    if (!kern__gd_eq(x->dims[x->ndim - 1], w->dims[1]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "x.shape[-1]=%s != weight.shape[1]=%s",
                              kern__gd_s(c->g, x->dims[x->ndim - 1], s1, sizeof s1),
                              kern__gd_s(c->g, w->dims[1], s2, sizeof s2));
    memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    od[x->ndim - 1] = w->dims[0];
    if (c->a->glu) { /* gate/up rows in glu groups: half the outputs */
        if (w->dims[0] % 2)
            return kern__ginf_err(c, KERN_ERR_SHAPE, "glu needs an even weight.shape[0] (gate and up "
                                  "rows), got %lld", (long long)w->dims[0]);
        od[x->ndim - 1] = w->dims[0] / 2;
    }
    {
        kern_status st = kern__ginf_epilogue(c, bias_slot, res_slot, w->dims[0], x->ndim, od, acts);
        if (st) return st;
    }
    return kern__ginf_out(c, 0, x->dtype, x->ndim, od);
}

static kern_status kern__ginfer_linear(kern__ginf *c) {
    return kern__ginfer_linear_like(c, 2, 3, KERN__GACTS_GEMM, 1);
}

static kern_status kern__ginfer_matmul(kern__ginf *c) {
    const kern__gval *a = KERN__GIN(0), *b = KERN__GIN(1);
    int64_t m, ka, kb, n, od[KERN_MAX_DIMS];
    int nb, st;
    char s1[64], s2[64];
    KERN__GFLOAT(0);
    KERN__GFLOAT(1);
    if (a->ndim < 2 || b->ndim < 2)
        return kern__ginf_err(c, KERN_ERR_SHAPE, "a and b need at least 2 dims");
    if (a->dtype != b->dtype)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "a and b must have the same dtype");
    m = c->a->trans_a ? a->dims[a->ndim - 1] : a->dims[a->ndim - 2];
    ka = c->a->trans_a ? a->dims[a->ndim - 2] : a->dims[a->ndim - 1];
    kb = c->a->trans_b ? b->dims[b->ndim - 1] : b->dims[b->ndim - 2];
    n = c->a->trans_b ? b->dims[b->ndim - 2] : b->dims[b->ndim - 1];
    if (!kern__gd_eq(ka, kb))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "inner dims differ: %s vs %s",
                              kern__gd_s(c->g, ka, s1, sizeof s1), kern__gd_s(c->g, kb, s2, sizeof s2));
    st = kern__ginf_bcast(c, a->ndim - 2, a->dims, b->ndim - 2, b->dims, &nb, od);
    if (st) return (kern_status)st;
    od[nb] = m;
    od[nb + 1] = n;
    st = kern__ginf_epilogue(c, 2, 3, n, nb + 2, od, KERN__GACTS_GEMM);
    if (st) return (kern_status)st;
    return kern__ginf_out(c, 0, a->dtype, nb + 2, od);
}

static kern_status kern__ginfer_sdpa(kern__ginf *c) {
    const kern__gval *q = KERN__GIN(0), *k = KERN__GIN(1), *v = KERN__GIN(2);
    const kern__gval *mask = KERN__GIN(3), *kl = KERN__GIN(4);
    int64_t od[4], full[4], r;
    char s1[64], s2[64];
    KERN__GFLOAT(0);
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return kern__ginf_err(c, KERN_ERR_SHAPE, "q, k, v must be 4-D [B,H,L,D]");
    if (k->dtype != q->dtype || v->dtype != q->dtype)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "q, k, v must have the same dtype");
    if (!kern__gd_eq(q->dims[0], k->dims[0]) || !kern__gd_eq(q->dims[0], v->dims[0]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "batch dims differ");
    if (!kern__gd_eq(q->dims[3], k->dims[3]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "q.shape[3]=%s != k.shape[3]=%s",
                              kern__gd_s(c->g, q->dims[3], s1, sizeof s1),
                              kern__gd_s(c->g, k->dims[3], s2, sizeof s2));
    if (!kern__gd_eq(k->dims[1], v->dims[1]) || !kern__gd_eq(k->dims[2], v->dims[2]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "k and v differ in heads or length");
    if (!kern__gd_eq(q->dims[1], k->dims[1])) {
        if (!c->a->enable_gqa)
            return kern__ginf_err(c, KERN_ERR_SHAPE, "q has %s heads, k %s (enable_gqa not set)",
                                  kern__gd_s(c->g, q->dims[1], s1, sizeof s1),
                                  kern__gd_s(c->g, k->dims[1], s2, sizeof s2));
        if (!kern__gx_div(c->g, q->dims[1], k->dims[1], &r))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "q heads %s are not a multiple of k heads %s",
                                  kern__gd_s(c->g, q->dims[1], s1, sizeof s1),
                                  kern__gd_s(c->g, k->dims[1], s2, sizeof s2));
    }
    od[0] = q->dims[0];
    od[1] = q->dims[1];
    od[2] = q->dims[2];
    od[3] = v->dims[3];
    full[0] = q->dims[0];
    full[1] = q->dims[1];
    full[2] = q->dims[2];
    full[3] = k->dims[2];
    if (mask) {
        if (mask->dtype != KERN_BOOL && !kern_dtype_is_float(mask->dtype))
            return kern__ginf_err(c, KERN_ERR_DTYPE, "mask must be bool or float");
        if (!kern__g_bcast_to(mask->ndim, mask->dims, 4, full))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "mask does not broadcast to %s",
                                  kern__g_shape_str(c->g, 4, full, s1, sizeof s1));
    }
    if (kl) {
        if (kl->dtype != KERN_I32 && kl->dtype != KERN_I64)
            return kern__ginf_err(c, KERN_ERR_DTYPE, "k_lens must be i32 or i64");
        if (kl->ndim != 1 || !kern__gd_eq(kl->dims[0], q->dims[0]))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "k_lens must be [B]");
    }
    if (!isfinite(c->a->scale) || !isfinite(c->a->softcap) || c->a->softcap < 0)
        return kern__ginf_err(c, KERN_ERR_ARG, "scale must be finite, softcap finite and >= 0");
    if (c->a->window_set && (c->a->window_left < -1 || c->a->window_right < -1))
        return kern__ginf_err(c, KERN_ERR_ARG, "window sides must be >= -1");
    return kern__ginf_out(c, 0, q->dtype, 4, od);
}

static kern_status kern__ginfer_norm(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0), *w = KERN__GIN(1), *b = KERN__GIN(2), *r = KERN__GIN(3);
    int64_t h;
    char s1[64];
    KERN__GFLOAT(0);
    KERN__GFLOAT(1);
    KERN__GFLOAT(2);
    KERN__GFLOAT(3);
    if (x->ndim < 1) return kern__ginf_err(c, KERN_ERR_SHAPE, "x needs at least 1 dim");
    h = x->dims[x->ndim - 1];
    if ((w && (w->ndim != 1 || !kern__gd_eq(w->dims[0], h))) ||
        (b && (b->ndim != 1 || !kern__gd_eq(b->dims[0], h))))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "weight and bias must be [%s]",
                              kern__gd_s(c->g, h, s1, sizeof s1));
    if (r) {
        int i;
        if (r->ndim != x->ndim)
            return kern__ginf_err(c, KERN_ERR_SHAPE, "residual must have x's shape");
        for (i = 0; i < x->ndim; i++)
            if (!kern__gd_eq(r->dims[i], x->dims[i]))
                return kern__ginf_err(c, KERN_ERR_SHAPE, "residual must have x's shape");
    }
    if (c->n_out == 0) c->n_out = 1;
    if (c->n_out > 2 || (c->n_out == 2 && !r))
        return kern__ginf_err(c, KERN_ERR_ARG,
                              "a norm has 1 output, or 2 with a residual (the sum x + residual)");
    if (((unsigned)c->a->act >= KERN_ACT_COUNT) || !((KERN__GACTS_GELU >> c->a->act) & 1u))
        return kern__ginf_err(c, KERN_ERR_UNSUPPORTED, "act=%s (norms fuse none/gelu/gelu_tanh)",
                              kern_act_name(c->a->act));
    if (c->a->eps_set && (!(c->a->eps >= 0) || !isfinite(c->a->eps)))
        return kern__ginf_err(c, KERN_ERR_ARG, "eps must be finite and >= 0");
    kern__ginf_out(c, 0, x->dtype, x->ndim, x->dims);
    if (c->n_out == 2) kern__ginf_out(c, 1, x->dtype, x->ndim, x->dims);
    return KERN_OK;
}

static kern_status kern__ginfer_unary(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    KERN__GFLOAT(0);
    if (c->op == KERN_GRAPH_OP_SCALE && !isfinite(c->a->alpha))
        return kern__ginf_err(c, KERN_ERR_ARG, "alpha must be finite");
    if (c->op == KERN_GRAPH_OP_POW && !isfinite(c->a->exponent))
        return kern__ginf_err(c, KERN_ERR_ARG, "exponent must be finite");
    return kern__ginf_out(c, 0, x->dtype, x->ndim, x->dims);
}

static kern_status kern__ginfer_binary(kern__ginf *c) {
    const kern__gval *a = KERN__GIN(0), *b = KERN__GIN(1);
    int64_t od[KERN_MAX_DIMS];
    int n;
    kern_status st;
    kern_dtype dt;
    KERN__GFLOAT(0);
    KERN__GFLOAT(1);
    st = kern__ginf_bcast(c, a->ndim, a->dims, b->ndim, b->dims, &n, od);
    if (st) return st;
    dt = a->dtype;
    if (a->dtype != b->dtype && b->ndim > a->ndim) dt = b->dtype;
    return kern__ginf_out(c, 0, dt, n, od);
}

static kern_status kern__ginfer_rowwise(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    int64_t od[KERN_MAX_DIMS];
    KERN__GFLOAT(0);
    if (x->ndim < 1) return kern__ginf_err(c, KERN_ERR_SHAPE, "x needs at least 1 dim");
    memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    if (c->op != KERN_GRAPH_OP_SOFTMAX) od[x->ndim - 1] = 1;
    return kern__ginf_out(c, 0, x->dtype, x->ndim, od);
}

static kern_status kern__ginfer_embedding(kern__ginf *c) {
    const kern__gval *ids = KERN__GIN(0), *t = KERN__GIN(1);
    int64_t od[KERN_MAX_DIMS];
    if (ids->dtype != KERN_I32 && ids->dtype != KERN_I64)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "ids must be i32 or i64");
    if (t->ndim != 2) return kern__ginf_err(c, KERN_ERR_SHAPE, "table must be 2-D [V,H]");
    if (ids->ndim + 1 > KERN_MAX_DIMS)
        return kern__ginf_err(c, KERN_ERR_SHAPE, "ids have too many dims");
    memcpy(od, ids->dims, sizeof(int64_t) * (size_t)ids->ndim);
    od[ids->ndim] = t->dims[1];
    return kern__ginf_out(c, 0, t->dtype, ids->ndim + 1, od);
}

static kern_status kern__ginf_axis(kern__ginf *c, int64_t axis, int ndim, int *out) {
    int64_t a = axis < 0 ? axis + ndim : axis;
    if (a < 0 || a >= ndim)
        return kern__ginf_err(c, KERN_ERR_ARG, "axis %lld is outside the %d dims", (long long)axis,
                              ndim);
    *out = (int)a;
    return KERN_OK;
}

/* product of dims (symbolic) */
static kern_status kern__g_numel(kern_graph *g, int ndim, const int64_t *dims, int64_t *out) {
    int64_t n = 1;
    int i;
    for (i = 0; i < ndim; i++) {
        kern_status st = kern__gx_mul(g, n, dims[i], &n);
        if (st) return st;
    }
    *out = n;
    return KERN_OK;
}

static kern_status kern__ginfer_reshape(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    int64_t od[KERN_MAX_DIMS], nin, known = 1, inf;
    int i, ni = -1;
    kern_status st;
    char s1[64], s2[64];
    if (c->a->n_shape < 0 || c->a->n_shape > KERN_MAX_DIMS)
        return kern__ginf_err(c, KERN_ERR_ARG, "shape has %d dims", c->a->n_shape);
    for (i = 0; i < c->a->n_shape; i++) {
        int64_t d = c->a->shape[i];
        if (d == KERN_GRAPH_DIM_INFER) {
            if (ni >= 0) return kern__ginf_err(c, KERN_ERR_ARG, "shape has two -1 dims");
            ni = i;
            continue;
        }
        if (!kern__gx_valid(c->g, d))
            return kern__ginf_err(c, KERN_ERR_ARG, "shape[%d]=%lld is not a dim", i, (long long)d);
        st = kern__gx_mul(c->g, known, d, &known);
        if (st) return st;
    }
    st = kern__g_numel(c->g, x->ndim, x->dims, &nin);
    if (st) return st;
    memcpy(od, c->a->shape, sizeof(int64_t) * (size_t)c->a->n_shape);
    if (ni >= 0) {
        if (!kern__gx_div(c->g, nin, known, &inf))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "cannot infer the -1 dim: %s elements over %s",
                                  kern__gd_s(c->g, nin, s1, sizeof s1),
                                  kern__gd_s(c->g, known, s2, sizeof s2));
        od[ni] = inf;
    } else if (!kern__gd_eq(nin, known)) {
        return kern__ginf_err(c, KERN_ERR_SHAPE, "%s elements cannot become %s",
                              kern__gd_s(c->g, nin, s1, sizeof s1), kern__gd_s(c->g, known, s2, sizeof s2));
    }
    return kern__ginf_out(c, 0, x->dtype, c->a->n_shape, od);
}

static kern_status kern__ginfer_permute(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    int64_t od[KERN_MAX_DIMS];
    int i, seen = 0;
    if (c->op == KERN_GRAPH_OP_TRANSPOSE) {
        int a = 0, b = 0;
        kern_status st = kern__ginf_axis(c, c->a->axis, x->ndim, &a);
        if (st) return st;
        st = kern__ginf_axis(c, c->a->axis2, x->ndim, &b);
        if (st) return st;
        memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->ndim);
        od[a] = x->dims[b];
        od[b] = x->dims[a];
        return kern__ginf_out(c, 0, x->dtype, x->ndim, od);
    }
    if (c->a->n_perm != x->ndim)
        return kern__ginf_err(c, KERN_ERR_ARG, "perm has %d entries for %d dims", c->a->n_perm,
                              x->ndim);
    for (i = 0; i < x->ndim; i++) {
        int64_t p = c->a->perm[i];
        if (p < 0 || p >= x->ndim || (seen >> p) & 1)
            return kern__ginf_err(c, KERN_ERR_ARG, "perm is not a permutation of 0..%d", x->ndim - 1);
        seen |= 1 << p;
        od[i] = x->dims[p];
    }
    return kern__ginf_out(c, 0, x->dtype, x->ndim, od);
}

static kern_status kern__ginfer_slice(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    int64_t od[KERN_MAX_DIMS], len;
    int ax = 0;
    kern_status st = kern__ginf_axis(c, c->a->axis, x->ndim, &ax);
    if (st) return st;
    if (!kern__gx_valid(c->g, c->a->start) || !kern__gx_valid(c->g, c->a->length))
        return kern__ginf_err(c, KERN_ERR_ARG, "start and length must be dims >= 0");
    len = c->a->length;
    if (len == 0) {
        st = kern__gx_sub(c->g, x->dims[ax], c->a->start, &len);
        if (st) return st;
    }
    if (!kern__gx_valid(c->g, len))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "start is past the end of dim %d", ax);
    if (!kern__gx_is_expr(x->dims[ax]) && !kern__gx_is_expr(c->a->start) &&
        !kern__gx_is_expr(len) && c->a->start + len > x->dims[ax])
        return kern__ginf_err(c, KERN_ERR_SHAPE, "slice [%lld, %lld) is past dim %d (%lld)",
                              (long long)c->a->start, (long long)(c->a->start + len), ax,
                              (long long)x->dims[ax]);
    memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    od[ax] = len;
    return kern__ginf_out(c, 0, x->dtype, x->ndim, od);
}

static kern_status kern__ginfer_split(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    int ax = 0, i, n;
    int64_t sum = 0, piece;
    kern_status st = kern__ginf_axis(c, c->a->axis, x->ndim, &ax);
    char s1[64], s2[64];
    if (st) return st;
    n = c->a->n_sizes ? c->a->n_sizes : c->n_out;
    if (c->a->n_sizes && c->n_out && c->n_out != c->a->n_sizes)
        return kern__ginf_err(c, KERN_ERR_ARG, "%d sizes for %d outputs", c->a->n_sizes, c->n_out);
    if (n < 1 || n > KERN_GRAPH_MAX_OUTPUTS)
        return kern__ginf_err(c, KERN_ERR_ARG, "split into %d pieces (1..%d)", n,
                              KERN_GRAPH_MAX_OUTPUTS);
    c->n_out = n;
    if (c->a->n_sizes) {
        for (i = 0; i < n; i++) {
            int64_t d = c->a->sizes[i];
            if (!kern__gx_valid(c->g, d))
                return kern__ginf_err(c, KERN_ERR_ARG, "sizes[%d] is not a dim", i);
            st = kern__gx_add(c->g, sum, d, &sum);
            if (st) return st;
        }
        if (!kern__gd_eq(sum, x->dims[ax]))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "sizes add up to %s, dim %d is %s",
                                  kern__gd_s(c->g, sum, s1, sizeof s1), ax,
                                  kern__gd_s(c->g, x->dims[ax], s2, sizeof s2));
    } else if (!kern__gx_div(c->g, x->dims[ax], n, &piece)) {
        return kern__ginf_err(c, KERN_ERR_SHAPE, "dim %d (%s) does not split into %d equal pieces",
                              ax, kern__gd_s(c->g, x->dims[ax], s1, sizeof s1), n);
    }
    for (i = 0; i < n; i++) {
        int64_t od[KERN_MAX_DIMS];
        memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->ndim);
        od[ax] = c->a->n_sizes ? c->a->sizes[i] : piece;
        kern__ginf_out(c, i, x->dtype, x->ndim, od);
    }
    return KERN_OK;
}

static kern_status kern__ginfer_expand(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    int64_t od[KERN_MAX_DIMS];
    int n = c->a->n_shape, i;
    if (n < x->ndim || n > KERN_MAX_DIMS)
        return kern__ginf_err(c, KERN_ERR_ARG, "shape has %d dims, x has %d", n, x->ndim);
    for (i = 0; i < n; i++) {
        int j = i - (n - x->ndim);
        int64_t t = c->a->shape[i], d = j >= 0 ? x->dims[j] : 1;
        if (t == KERN_GRAPH_DIM_INFER) {
            if (j < 0) return kern__ginf_err(c, KERN_ERR_ARG, "-1 in a new leading dim");
            od[i] = d;
        } else if (!kern__gx_valid(c->g, t)) {
            return kern__ginf_err(c, KERN_ERR_ARG, "shape[%d] is not a dim", i);
        } else if (kern__gd_eq(t, d) || d == 1) {
            od[i] = t;
        } else {
            return kern__ginf_err(c, KERN_ERR_SHAPE, "dim %d of x cannot expand to shape[%d]", j, i);
        }
    }
    return kern__ginf_out(c, 0, x->dtype, n, od);
}

static kern_status kern__ginfer_concat(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    int64_t od[KERN_MAX_DIMS];
    int ax = 0, i, d;
    kern_status st = kern__ginf_axis(c, c->a->axis, x->ndim, &ax);
    if (st) return st;
    memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    for (i = 1; i < c->n_in; i++) {
        const kern__gval *y = c->in[i];
        if (!y) return kern__ginf_err(c, KERN_ERR_ARG, "input %d is absent", i);
        if (y->dtype != x->dtype || y->ndim != x->ndim)
            return kern__ginf_err(c, KERN_ERR_SHAPE, "input %d differs in dtype or rank", i);
        for (d = 0; d < x->ndim; d++)
            if (d != ax && !kern__gd_eq(y->dims[d], x->dims[d]))
                return kern__ginf_err(c, KERN_ERR_SHAPE, "input %d differs in dim %d", i, d);
        st = kern__gx_add(c->g, od[ax], y->dims[ax], &od[ax]);
        if (st) return st;
    }
    return kern__ginf_out(c, 0, x->dtype, x->ndim, od);
}

static kern_status kern__ginfer_copy(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    kern_dtype dt = x->dtype;
    if (c->op == KERN_GRAPH_OP_CAST) {
        kern_dtype t = c->a->dtype;
        if (t != KERN_F32 && t != KERN_BF16 && t != KERN_F16 && t != KERN_I32 && t != KERN_I64)
            return kern__ginf_err(c, KERN_ERR_DTYPE, "cast to %s (f32, bf16, f16, i32, i64)",
                                  kern_dtype_name(t));
        if (x->dtype == KERN_I8 || x->dtype == KERN_U8)
            return kern__ginf_err(c, KERN_ERR_DTYPE, "cast from %s", kern_dtype_name(x->dtype));
        dt = t;
    }
    return kern__ginf_out(c, 0, dt, x->ndim, x->dims);
}

static kern_status kern__ginfer_qlinear(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0), *w = KERN__GIN(1), *sc = KERN__GIN(2);
    if (x->dtype != KERN_F32 && x->dtype != KERN_BF16)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "x must be f32 or bf16");
    if (w->dtype == KERN_I8) {
        if (!sc || sc->dtype != KERN_F32 || sc->ndim != 1 || w->ndim != 2 ||
            !kern__gd_eq(sc->dims[0], w->dims[0]))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "an i8 weight needs scales f32 [N]");
    } else if (w->dtype != KERN_F32 && w->dtype != KERN_BF16) {
        return kern__ginf_err(c, KERN_ERR_DTYPE, "weight must be f32, bf16 or i8");
    } else if (sc) {
        return kern__ginf_err(c, KERN_ERR_ARG, "scales only go with an i8 weight");
    }
    if (c->a->prune) {
        if (w->dtype == KERN_I8)
            return kern__ginf_err(c, KERN_ERR_DTYPE, "prune=1 needs an f32 or bf16 weight");
        if (w->ndim == 2 && w->dims[1] % 4)
            return kern__ginf_err(c, KERN_ERR_SHAPE, "prune=1: K=%lld is not a multiple of 4",
                                  (long long)w->dims[1]);
    }
    return kern__ginfer_linear_like(c, 3, 4, KERN__GACTS_GEMM, 0);
}

static kern_status kern__ginfer_quant(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    int64_t od[KERN_MAX_DIMS];
    if (x->dtype != KERN_F32 && x->dtype != KERN_BF16)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "x must be f32 or bf16");
    if (x->ndim < 1) return kern__ginf_err(c, KERN_ERR_SHAPE, "x needs at least 1 dim");
    c->n_out = 2;
    kern__ginf_out(c, 0, KERN_I8, x->ndim, x->dims);
    memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    od[x->ndim - 1] = 1;
    return kern__ginf_out(c, 1, KERN_F32, x->ndim, od);
}

static kern_status kern__ginfer_sparse24(kern__ginf *c) {
    const kern__gval *w = KERN__GIN(1);
    kern_status st = kern__ginfer_linear_like(c, 2, 3, KERN__GACTS_GELU, 1);
    if (st) return st;
    if (w->dims[1] % 4)
        return kern__ginf_err(c, KERN_ERR_SHAPE, "K=%lld is not a multiple of 4",
                              (long long)w->dims[1]);
    return KERN_OK;
}

static kern_status kern__ginfer_scatter(kern__ginf *c) {
    const kern__gval *self = KERN__GIN(0), *idx = KERN__GIN(1), *src = KERN__GIN(2);
    int ax = 0, d;
    kern_status st;
    if (idx->dtype != KERN_I32 && idx->dtype != KERN_I64)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "index must be i32 or i64");
    if (src->dtype != self->dtype || self->dtype == KERN_BOOL || self->dtype == KERN_I8 ||
        self->dtype == KERN_U8)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "self and src must share a float or i32/i64 dtype");
    if ((int)c->a->reduce <= 0 || c->a->reduce >= KERN_REDUCE_COUNT)
        return kern__ginf_err(c, KERN_ERR_ARG, "reduce must be sum, prod, mean, amax or amin");
    st = kern__ginf_axis(c, c->a->axis, self->ndim, &ax);
    if (st) return st;
    if (idx->ndim == 1 && self->ndim == 2 && src->ndim == 2) {
        if (ax != 0) return kern__ginf_err(c, KERN_ERR_SHAPE, "a 1-D index scatters along axis 0");
        if (!kern__gd_eq(src->dims[1], self->dims[1]))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "src and self differ in features");
    } else {
        if (idx->ndim != self->ndim || src->ndim != self->ndim)
            return kern__ginf_err(c, KERN_ERR_SHAPE, "self, index and src need the same rank");
        for (d = 0; d < self->ndim; d++)
            if (d != ax && !kern__gd_eq(idx->dims[d], self->dims[d]) &&
                (kern__gx_is_expr(idx->dims[d]) || kern__gx_is_expr(self->dims[d]) ||
                 idx->dims[d] > self->dims[d]))
                return kern__ginf_err(c, KERN_ERR_SHAPE, "index dim %d exceeds self's", d);
    }
    return kern__ginf_out(c, 0, self->dtype, self->ndim, self->dims);
}

static kern_status kern__ginfer_spmm(kern__ginf *c) {
    const kern__gval *rp = KERN__GIN(0), *col = KERN__GIN(1), *val = KERN__GIN(2), *x = KERN__GIN(3);
    int64_t od[2];
    kern_status st;
    if ((rp->dtype != KERN_I32 && rp->dtype != KERN_I64) || col->dtype != rp->dtype)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "rowptr and col must both be i32 or i64");
    if (rp->ndim != 1 || col->ndim != 1)
        return kern__ginf_err(c, KERN_ERR_SHAPE, "rowptr and col must be 1-D");
    if (val && (val->ndim != 1 || !kern__gd_eq(val->dims[0], col->dims[0]) ||
                !kern_dtype_is_float(val->dtype)))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "values must be float [E] like col");
    KERN__GFLOAT(3);
    if (x->ndim != 2) return kern__ginf_err(c, KERN_ERR_SHAPE, "dense must be 2-D");
    if (c->a->reduce != KERN_REDUCE_SUM && c->a->reduce != KERN_REDUCE_MEAN &&
        c->a->reduce != KERN_REDUCE_AMAX && c->a->reduce != KERN_REDUCE_AMIN)
        return kern__ginf_err(c, KERN_ERR_ARG, "reduce must be sum, mean, amax or amin");
    st = kern__gx_sub(c->g, rp->dims[0], 1, &od[0]);
    if (st) return st;
    if (!kern__gx_valid(c->g, od[0]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "rowptr is empty");
    od[1] = x->dims[1];
    return kern__ginf_out(c, 0, x->dtype, 2, od);
}

/* sdpa_relpos: q, k, v as sdpa without GQA; the grid gh x gw from the
 * tables' lengths (2*gh-1, 2*gw-1), L = gh*gw when L is concrete (a
 * symbolic L is checked by kern_sdpa when the step runs). */
static kern_status kern__ginfer_sdpa_relpos(kern__ginf *c) {
    const kern__gval *q = KERN__GIN(0), *k = KERN__GIN(1), *v = KERN__GIN(2);
    const kern__gval *rh = KERN__GIN(3), *rw = KERN__GIN(4);
    int64_t od[4], gh, gw;
    int i;
    char s1[64], s2[64];
    KERN__GFLOAT(0);
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return kern__ginf_err(c, KERN_ERR_SHAPE, "q, k, v must be 4-D [B,H,L,D]");
    if (k->dtype != q->dtype || v->dtype != q->dtype)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "q, k, v must have the same dtype");
    for (i = 0; i < 3; i++)
        if (!kern__gd_eq(q->dims[i], k->dims[i]) || !kern__gd_eq(q->dims[i], v->dims[i]))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "q, k, v differ in dim %d", i);
    if (!kern__gd_eq(q->dims[3], k->dims[3]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "q.shape[3]=%s != k.shape[3]=%s",
                              kern__gd_s(c->g, q->dims[3], s1, sizeof s1),
                              kern__gd_s(c->g, k->dims[3], s2, sizeof s2));
    if (!kern_dtype_is_float(rh->dtype) || !kern_dtype_is_float(rw->dtype))
        return kern__ginf_err(c, KERN_ERR_DTYPE, "rel_pos_h and rel_pos_w must be float");
    if (rh->ndim != 2 || rw->ndim != 2 || !kern__gd_eq(rh->dims[1], q->dims[3]) ||
        !kern__gd_eq(rw->dims[1], q->dims[3]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "rel_pos_h and rel_pos_w must be [2*g-1, D]");
    if (rh->dims[0] < 1 || rw->dims[0] < 1 || rh->dims[0] % 2 == 0 || rw->dims[0] % 2 == 0)
        return kern__ginf_err(c, KERN_ERR_SHAPE, "rel_pos_h has %s rows, rel_pos_w %s: each "
                              "must be 2*g-1 for a concrete grid side g",
                              kern__gd_s(c->g, rh->dims[0], s1, sizeof s1),
                              kern__gd_s(c->g, rw->dims[0], s2, sizeof s2));
    gh = (rh->dims[0] + 1) / 2;
    gw = (rw->dims[0] + 1) / 2;
    if (q->dims[2] >= 0 && q->dims[2] != gh * gw) {
        /* a square L (SAM's windows and global grid) tells which table is off */
        int64_t L = q->dims[2], g = 0;
        while ((g + 1) * (g + 1) <= L) g++;
        if (g * g == L && (gh == g) != (gw == g))
            return kern__ginf_err(c, KERN_ERR_SHAPE,
                                  "%s has %lld rows but L=%lld is a %lld x %lld grid, which needs "
                                  "2*%lld-1 = %lld", gh == g ? "rel_pos_w" : "rel_pos_h",
                                  (long long)(gh == g ? rw->dims[0] : rh->dims[0]), (long long)L,
                                  (long long)g, (long long)g, (long long)g, (long long)(2 * g - 1));
        return kern__ginf_err(c, KERN_ERR_SHAPE,
                              "L=%lld but the tables give a %lld x %lld grid (rel_pos_h %lld rows, "
                              "rel_pos_w %lld: 2*g-1 each)", (long long)L, (long long)gh,
                              (long long)gw, (long long)rh->dims[0], (long long)rw->dims[0]);
    }
    if (!isfinite(c->a->scale))
        return kern__ginf_err(c, KERN_ERR_ARG, "scale must be finite");
    for (i = 0; i < 3; i++) od[i] = q->dims[i];
    od[3] = v->dims[3];
    return kern__ginf_out(c, 0, q->dtype, 4, od);
}

static kern_status kern__ginfer_rope(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0), *t = KERN__GIN(1), *o = KERN__GIN(2);
    KERN__GFLOAT(0);
    if (x->ndim != 4) return kern__ginf_err(c, KERN_ERR_SHAPE, "x must be 4-D [B,L,H,D]");
    if (t->dtype != KERN_F32 || t->ndim != 2)
        return kern__ginf_err(c, KERN_ERR_SHAPE, "table must be f32 [P, rotary_dim]");
    if (t->dims[1] < 0 || x->dims[3] < 0 || t->dims[1] % 2 || t->dims[1] > x->dims[3])
        return kern__ginf_err(c, KERN_ERR_SHAPE,
                              "table's width must be a concrete even rotary_dim <= D");
    if (o) {
        if (o->dtype != KERN_I32 && o->dtype != KERN_I64)
            return kern__ginf_err(c, KERN_ERR_DTYPE, "offsets must be i32 or i64");
        if (o->ndim != 1 || !kern__gd_eq(o->dims[0], x->dims[0]))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "offsets must be [B]");
    }
    return kern__ginf_out(c, 0, x->dtype, 4, x->dims);
}

static kern_status kern__ginfer_silu_mul(kern__ginf *c) {
    const kern__gval *a = KERN__GIN(0), *b = KERN__GIN(1);
    int64_t od[KERN_MAX_DIMS];
    int d;
    KERN__GFLOAT(0);
    KERN__GFLOAT(1);
    if (a->ndim < 1) return kern__ginf_err(c, KERN_ERR_SHAPE, "a must have at least 1 dim");
    memcpy(od, a->dims, sizeof(int64_t) * (size_t)a->ndim);
    if (b) {
        if (b->ndim != a->ndim)
            return kern__ginf_err(c, KERN_ERR_SHAPE, "a and b must have the same shape");
        for (d = 0; d < a->ndim; d++)
            if (!kern__gd_eq(a->dims[d], b->dims[d]))
                return kern__ginf_err(c, KERN_ERR_SHAPE, "a and b must have the same shape");
    } else {
        int64_t last = a->dims[a->ndim - 1];
        if (last < 0 || last % 2)
            return kern__ginf_err(c, KERN_ERR_SHAPE,
                                  "without b, a's last dim must be concrete and even ([gate | up])");
        od[a->ndim - 1] = last / 2;
    }
    return kern__ginf_out(c, 0, a->dtype, a->ndim, od);
}

/* An i8 cache (slot cs) and its scales (slot ss, f32 [B, Lmax, Hkv]):
 * given together; written in place, so graph inputs when `inplace`. */
static kern_status kern__ginf_kv_scale(kern__ginf *c, int cs, int ss, int inplace) {
    const kern__gval *kc = c->in[cs], *sc = c->in[ss];
    char cn[24], sn[24];
    kern__g_slot_name(c->op, cs, cn, sizeof cn);
    kern__g_slot_name(c->op, ss, sn, sizeof sn);
    if (kc->dtype != KERN_I8) {
        if (sc) return kern__ginf_err(c, KERN_ERR_ARG, "%s is only for an i8 %s", sn, cn);
        if (!kern_dtype_is_float(kc->dtype))
            return kern__ginf_err(c, KERN_ERR_DTYPE, "%s must be f32, bf16, f16 or i8 (with %s)", cn, sn);
        return KERN_OK;
    }
    if (!sc) return kern__ginf_err(c, KERN_ERR_ARG, "an i8 %s needs %s [B,Lmax,Hkv] f32", cn, sn);
    if (sc->dtype != KERN_F32) return kern__ginf_err(c, KERN_ERR_DTYPE, "%s must be f32", sn);
    if (sc->ndim != 3 || kc->ndim != 4 || !kern__gd_eq(sc->dims[0], kc->dims[0]) ||
        !kern__gd_eq(sc->dims[1], kc->dims[1]) || !kern__gd_eq(sc->dims[2], kc->dims[2]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "%s must be [B,Lmax,Hkv] of %s", sn, cn);
    if (inplace && sc->kind != KERN_GRAPH_VAL_INPUT)
        return kern__ginf_err(c, KERN_ERR_ARG, "%s must be a graph input (it is written in place)", sn);
    return KERN_OK;
}

static kern_status kern__ginfer_kv_append(kern__ginf *c) {
    const kern__gval *kn = KERN__GIN(0), *vn = KERN__GIN(1), *kc = KERN__GIN(2);
    const kern__gval *vc = KERN__GIN(3), *kl = KERN__GIN(4);
    kern_status st;
    int i, d;
    for (i = 0; i < 2; i++) KERN__GFLOAT(i);
    for (i = 0; i < 2; i++)
        if (c->in[2 + i]->ndim == 4 && (st = kern__ginf_kv_scale(c, 2 + i, 5 + i, 1)) != KERN_OK) return st;
    for (i = 0; i < 4; i++)
        if (c->in[i]->ndim != 4)
            return kern__ginf_err(c, KERN_ERR_SHAPE, "k_new, v_new, k_cache, v_cache must be 4-D");
    if (kc->kind != KERN_GRAPH_VAL_INPUT || vc->kind != KERN_GRAPH_VAL_INPUT)
        return kern__ginf_err(c, KERN_ERR_ARG,
                              "k_cache and v_cache must be graph inputs (they are written in place)");
    for (d = 0; d < 4; d++)
        if ((d != 1 && (!kern__gd_eq(kn->dims[d], kc->dims[d]) || !kern__gd_eq(vn->dims[d], vc->dims[d]))) ||
            (d < 3 && !kern__gd_eq(kn->dims[d], vn->dims[d])))
            return kern__ginf_err(c, KERN_ERR_SHAPE, "the new rows and the caches disagree in dim %d", d);
    if (!kern__gd_eq(kc->dims[1], vc->dims[1]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "k_cache and v_cache differ in Lmax");
    if (kl->dtype != KERN_I32 && kl->dtype != KERN_I64)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "k_lens must be i32 or i64");
    if (kl->ndim != 1 || !kern__gd_eq(kl->dims[0], kn->dims[0]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "k_lens must be [B]");
    return kern__ginf_out(c, 0, kl->dtype, 1, kl->dims);
}

static kern_status kern__ginfer_decode_attn(kern__ginf *c) {
    const kern__gval *q = KERN__GIN(0), *k = KERN__GIN(1), *v = KERN__GIN(2), *kl = KERN__GIN(3);
    int64_t od[4], r;
    kern_status st;
    KERN__GFLOAT(0);
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return kern__ginf_err(c, KERN_ERR_SHAPE, "q, k_cache, v_cache must be 4-D [B,L,H,D]");
    if ((st = kern__ginf_kv_scale(c, 1, 4, 0)) != KERN_OK || (st = kern__ginf_kv_scale(c, 2, 5, 0)) != KERN_OK)
        return st;
    if (!kern__gd_eq(q->dims[0], k->dims[0]) || !kern__gd_eq(q->dims[0], v->dims[0]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "batch dims differ");
    if (!kern__gd_eq(q->dims[3], k->dims[3]) || !kern__gd_eq(k->dims[1], v->dims[1]) ||
        !kern__gd_eq(k->dims[2], v->dims[2]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "q, k_cache and v_cache disagree in D, Lmax or Hkv");
    if (!kern__gd_eq(q->dims[2], k->dims[2]) && !kern__gx_div(c->g, q->dims[2], k->dims[2], &r))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "q's heads are not a multiple of the cache's");
    if (kl->dtype != KERN_I32 && kl->dtype != KERN_I64)
        return kern__ginf_err(c, KERN_ERR_DTYPE, "k_lens must be i32 or i64");
    if (kl->ndim != 1 || !kern__gd_eq(kl->dims[0], q->dims[0]))
        return kern__ginf_err(c, KERN_ERR_SHAPE, "k_lens must be [B]");
    if (!isfinite(c->a->scale)) return kern__ginf_err(c, KERN_ERR_ARG, "scale must be finite");
    od[0] = q->dims[0];
    od[1] = q->dims[1];
    od[2] = q->dims[2];
    od[3] = v->dims[3];
    return kern__ginf_out(c, 0, q->dtype, 4, od);
}

/* argmax: x [.., V] -> i64 [..] (torch.argmax(x, -1)); topk: x [.., V] ->
 * values [.., k] (x's dtype), indices i64 [.., k] (torch.topk(x, k, -1)). */
static kern_status kern__ginfer_argmax(kern__ginf *c) {
    const kern__gval *x = KERN__GIN(0);
    int64_t od[KERN_MAX_DIMS];
    int64_t V;
    KERN__GFLOAT(0);
    if (x->ndim < 1) return kern__ginf_err(c, KERN_ERR_SHAPE, "x needs at least 1 dim");
    V = x->dims[x->ndim - 1];
    memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    if (c->op == KERN_GRAPH_OP_ARGMAX) {
        if (V == 0) return kern__ginf_err(c, KERN_ERR_SHAPE, "argmax over an empty last dim");
        return kern__ginf_out(c, 0, KERN_I64, x->ndim - 1, od);
    }
    if (c->a->k < 1) return kern__ginf_err(c, KERN_ERR_ARG, "k=%lld must be >= 1", (long long)c->a->k);
    if (V >= 0 && c->a->k > V)
        return kern__ginf_err(c, KERN_ERR_SHAPE, "k=%lld > the last dim %lld", (long long)c->a->k,
                              (long long)V);
    od[x->ndim - 1] = c->a->k;
    c->n_out = 2;
    kern__ginf_out(c, 0, x->dtype, x->ndim, od);
    return kern__ginf_out(c, 1, KERN_I64, x->ndim, od);
}

#define KERN__GA_NONE 0u
static const kern__gopdef kern__gops[KERN_GRAPH_OP_COUNT] = {
    {"", 0, 0, 0, 0, 0, 0, NULL},
    /* LINEAR */ {"x,weight,bias?,residual?", 4, 2, KERN__GC_FAMILY, 1, 1, KERN__GA_GEMM | KERN__GAF(GLU),
                  kern__ginfer_linear},
    /* MATMUL */ {"a,b,bias?,residual?", 4, 2, KERN__GC_FAMILY, 1, 1,
                  KERN__GA_GEMM | KERN__GAF(TRANS_A) | KERN__GAF(TRANS_B), kern__ginfer_matmul},
    /* SDPA */ {"q,k,v,mask?,k_lens?", 5, 3, KERN__GC_FAMILY, 1, 1, KERN__GA_SDPA,
                kern__ginfer_sdpa},
    /* LAYER_NORM */ {"x,weight?,bias?,residual?", 4, 1, KERN__GC_FAMILY, 1, 2,
                      KERN__GAF(ACT) | KERN__GAF(EPS), kern__ginfer_norm},
    /* RMS_NORM */ {"x,weight?,bias?,residual?", 4, 1, KERN__GC_FAMILY, 1, 2,
                    KERN__GAF(ACT) | KERN__GAF(EPS), kern__ginfer_norm},
    /* GELU */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* GELU_TANH */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* SILU */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* RELU */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* SIGMOID */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* SQRT */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* RSQRT */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* EXP */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* TANH */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* ERF */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* NEG */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* RECIPROCAL */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_unary},
    /* SCALE */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, KERN__GAF(ALPHA), kern__ginfer_unary},
    /* POW */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, KERN__GAF(EXPONENT), kern__ginfer_unary},
    /* ADD */ {"a,b", 2, 2, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_binary},
    /* SUB */ {"a,b", 2, 2, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_binary},
    /* MUL */ {"a,b", 2, 2, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_binary},
    /* DIV */ {"a,b", 2, 2, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_binary},
    /* SOFTMAX */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_rowwise},
    /* REDUCE_MEAN */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_rowwise},
    /* REDUCE_SUM */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_rowwise},
    /* EMBEDDING */ {"ids,table", 2, 2, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_embedding},
    /* RESHAPE */ {"x", 1, 1, KERN__GC_VIEW, 1, 1, KERN__GAF(SHAPE), kern__ginfer_reshape},
    /* PERMUTE */ {"x", 1, 1, KERN__GC_VIEW, 1, 1, KERN__GAF(PERM), kern__ginfer_permute},
    /* TRANSPOSE */ {"x", 1, 1, KERN__GC_VIEW, 1, 1, KERN__GAF(AXIS) | KERN__GAF(AXIS2),
                     kern__ginfer_permute},
    /* SLICE */ {"x", 1, 1, KERN__GC_VIEW, 1, 1,
                 KERN__GAF(AXIS) | KERN__GAF(START) | KERN__GAF(LENGTH), kern__ginfer_slice},
    /* SPLIT */ {"x", 1, 1, KERN__GC_VIEW, 0, KERN_GRAPH_MAX_OUTPUTS,
                 KERN__GAF(AXIS) | KERN__GAF(SIZES), kern__ginfer_split},
    /* EXPAND */ {"x", 1, 1, KERN__GC_VIEW, 1, 1, KERN__GAF(SHAPE), kern__ginfer_expand},
    /* CONCAT */ {"", KERN_GRAPH_MAX_INPUTS, 1, KERN__GC_EXEC, 1, 1, KERN__GAF(AXIS),
                  kern__ginfer_concat},
    /* COPY */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, 0, kern__ginfer_copy},
    /* CAST */ {"x", 1, 1, KERN__GC_EXEC, 1, 1, KERN__GAF(DTYPE), kern__ginfer_copy},
    /* QLINEAR */ {"x,weight,scales?,bias?,residual?", 5, 2, KERN__GC_FAMILY, 1, 1,
                   KERN__GAF(ACT) | KERN__GAF(GLU) | KERN__GAF(PRUNE), kern__ginfer_qlinear},
    /* QUANTIZE_PER_TOKEN */ {"x", 1, 1, KERN__GC_FAMILY, 2, 2, 0, kern__ginfer_quant},
    /* SPARSE24_LINEAR */ {"x,weight,bias?,residual?", 4, 2, KERN__GC_FAMILY, 1, 1,
                           KERN__GAF(ACT) | KERN__GAF(PRUNE), kern__ginfer_sparse24},
    /* SCATTER_REDUCE */ {"self,index,src", 3, 3, KERN__GC_FAMILY, 1, 1,
                          KERN__GAF(AXIS) | KERN__GAF(REDUCE) | KERN__GAF(INCLUDE_SELF),
                          kern__ginfer_scatter},
    /* SPMM_REDUCE */ {"rowptr,col,values?,dense", 4, 4, KERN__GC_FAMILY, 1, 1,
                       KERN__GAF(REDUCE), kern__ginfer_spmm},
    /* SDPA_RELPOS */ {"q,k,v,rel_pos_h,rel_pos_w", 5, 5, KERN__GC_FAMILY, 1, 1,
                       KERN__GAF(SCALE), kern__ginfer_sdpa_relpos},
    /* ROPE */ {"x,table,offsets?", 3, 2, KERN__GC_FAMILY, 1, 1, KERN__GAF(INTERLEAVED),
                kern__ginfer_rope},
    /* SILU_MUL */ {"a,b?", 2, 1, KERN__GC_FAMILY, 1, 1, 0, kern__ginfer_silu_mul},
    /* KV_APPEND */ {"k_new,v_new,k_cache,v_cache,k_lens,k_scale?,v_scale?", 7, 5, KERN__GC_FAMILY,
                     1, 1, 0, kern__ginfer_kv_append},
    /* DECODE_ATTENTION */ {"q,k_cache,v_cache,k_lens,k_scale?,v_scale?", 6, 4, KERN__GC_FAMILY, 1, 1,
                            KERN__GAF(SCALE), kern__ginfer_decode_attn},
    /* ARGMAX */ {"x", 1, 1, KERN__GC_FAMILY, 1, 1, 0, kern__ginfer_argmax},
    /* TOPK */ {"x", 1, 1, KERN__GC_FAMILY, 2, 2, KERN__GAF(K), kern__ginfer_argmax}};

static const kern__gopdef *kern__gop(kern_graph_op op) { return &kern__gops[op]; }

/* 1 if input slot i of op is optional */
static int kern__gop_optional(kern_graph_op op, int i) {
    const char *s = kern__gops[op].slots;
    int k = 0;
    if (op == KERN_GRAPH_OP_CONCAT) return i > 0;
    if (op == KERN_GRAPH_OP_SPMM_REDUCE) return i == 2;
    while (k < i && *s) {
        if (*s == ',') k++;
        s++;
    }
    while (*s && *s != ',') {
        if (*s == '?') return 1;
        s++;
    }
    return 0;
}

/* Validates a node description against graph g and infers its outputs. */
static kern_status kern__g_infer_node(kern_graph *g, const kern_graph_node_desc *d,
                                      kern__ginf *c) {
    const kern__gopdef *od;
    int i, a;
    /* (the output descriptions are written by the op's inference) */
    memset(c->in, 0, sizeof c->in);
    c->n_in = 0;
    c->g = g;
    c->op = d->op;
    c->name = d->name ? d->name : "?";
    c->a = &d->attrs;
    if ((int)d->op <= 0 || d->op >= KERN_GRAPH_OP_COUNT)
        return kern__err(KERN_ERR_ARG, "kern_graph: node '%s': op %d is not a kern_graph_op",
                         c->name, (int)d->op);
    od = kern__gop(d->op);
    for (i = 0; i < KERN_GRAPH_MAX_INPUTS; i++) {
        kern_graph_val v = d->inputs[i];
        if (!v) continue;
        if (i >= od->max_in)
            return kern__err(KERN_ERR_ARG, "kern_graph: node '%s' (%s) takes %d inputs, got one in slot %d",
                             c->name, kern_graph_op_name(d->op), od->max_in, i);
        if (v < 0 || v >= g->n_vals)
            return kern__err(KERN_ERR_ARG, "kern_graph: node '%s' (%s): input %d is value %d, not in the graph",
                             c->name, kern_graph_op_name(d->op), i, (int)v);
        c->in[i] = &g->vals[v];
        c->n_in = i + 1;
    }
    for (i = 0; i < od->max_in; i++)
        if (!d->inputs[i] && !kern__gop_optional(d->op, i)) {
            char sn[24];
            kern__g_slot_name(d->op, i, sn, sizeof sn);
            return kern__err(KERN_ERR_ARG, "kern_graph: node '%s' (%s): input '%s' is missing",
                             c->name, kern_graph_op_name(d->op), sn);
        }
    if (d->op == KERN_GRAPH_OP_CONCAT)
        for (i = 1; i < c->n_in; i++)
            if (!d->inputs[i])
                return kern__err(KERN_ERR_ARG, "kern_graph: node '%s' (concat): input %d is absent",
                                 c->name, i);
    if (kern__gattr_foreign(&d->attrs, od->attrs))
        for (a = 0; a < KERN__GA_COUNT; a++)
            if (!((od->attrs >> a) & 1u) && !kern__gattr_default(&d->attrs, a))
                return kern__err(KERN_ERR_ARG,
                                 "kern_graph: node '%s': attribute '%s' does not apply to op '%s'",
                                 c->name, kern__gattrs[a].name, kern_graph_op_name(d->op));
    if (d->n_outputs < 0 || d->n_outputs > od->max_out)
        return kern__err(KERN_ERR_ARG, "kern_graph: node '%s' (%s): n_outputs=%d (at most %d)",
                         c->name, kern_graph_op_name(d->op), d->n_outputs, od->max_out);
    c->n_out = d->n_outputs;
    {
        kern_status st = od->infer(c);
        if (st) return st;
    }
    if (c->n_out == 0) c->n_out = od->def_out;
    for (i = 0; i < c->n_out; i++) {
        int k;
        for (k = 0; k < c->ond[i]; k++)
            if (!kern__gx_valid(g, c->od[i][k]))
                return kern__ginf_err(c, KERN_ERR_SHAPE, "output %d has a negative dim", i);
    }
    return KERN_OK;
}

/* The name of output o of a node being added. */
static void kern__g_out_name(const kern_graph_node_desc *d, int o, char *buf, size_t size) {
    if (o == 0) kern__g_copy_str(buf, size, d->name);
    else if (d->output_names[o]) kern__g_copy_str(buf, size, d->output_names[o]);
    else snprintf(buf, size, "%s:%d", d->name, o);
}

KERN_API kern_status kern_graph_add(kern_graph *g, const kern_graph_node_desc *d,
                                    kern_graph_val *outputs) {
    kern__ginf c;
    kern_status st;
    kern__gkey h[KERN_GRAPH_MAX_OUTPUTS];
    int i, j;
    kern__gnode *n;
    if (!g || !d) return kern__err(KERN_ERR_ARG, "kern_graph_add: g or desc is NULL");
    if ((st = kern__g_check_new_name(g, "kern_graph_add", d->name, &h[0])) != KERN_OK) return st;
    if ((st = kern__g_infer_node(g, d, &c)) != KERN_OK) return st;
    for (i = 1; i < c.n_out; i++) {
        char nm[KERN__G_NAME_MAX + 16];
        kern__g_out_name(d, i, nm, sizeof nm);
        if ((st = kern__g_check_new_name(g, "kern_graph_add", nm, &h[i])) != KERN_OK) return st;
        for (j = 0; j < i; j++) {
            char nj[KERN__G_NAME_MAX + 16];
            kern__g_out_name(d, j, nj, sizeof nj);
            if (strcmp(nj, nm) == 0)
                return kern__err(KERN_ERR_ARG, "kern_graph_add: node '%s' names two outputs '%s'",
                                 d->name, nm);
        }
    }
    if ((st = kern__g_reserve_val(g, c.n_out, d->name)) != KERN_OK) return st;
    if (!kern__g_grow_raw(g->ctx, (void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1,
                      sizeof(kern__gnode)))
        return kern__err(KERN_ERR_NOMEM, "kern_graph_add: out of memory");
    n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = d->op;
    n->n_in = c.n_in;
    memcpy(n->in, d->inputs, sizeof n->in);
    n->a = d->attrs;
    n->n_out = c.n_out;
    n->pos = g->n_nodes * 1024;
    for (i = 0; i < c.n_out; i++) {
        char nm[KERN__G_NAME_MAX + 16];
        kern_graph_val v;
        kern__g_out_name(d, i, nm, sizeof nm);
        v = kern__g_new_val(g, nm, h[i], KERN_GRAPH_VAL_NODE, c.odt[i], c.ond[i], c.od[i]);
        g->vals[v].node = (int32_t)g->n_nodes;
        g->vals[v].oidx = i;
        n->out[i] = v;
        if (outputs) outputs[i] = v;
    }
    g->ent[g->n_ent].kind = KERN__GE_NODE;
    g->ent[g->n_ent].idx = (int32_t)g->n_nodes;
    g->n_ent++;
    g->n_nodes++;
    return KERN_OK;
}

KERN_API kern_status kern_graph_linear(kern_graph *g, const char *name, kern_graph_val x,
                                       kern_graph_val weight, kern_graph_val bias, kern_act act,
                                       kern_graph_val *out) {
    kern_graph_node_desc d;
    memset(&d, 0, sizeof d);
    d.op = KERN_GRAPH_OP_LINEAR;
    d.name = name;
    d.inputs[0] = x;
    d.inputs[1] = weight;
    d.inputs[2] = bias;
    d.attrs.act = act;
    return kern_graph_add(g, &d, out);
}
KERN_API kern_status kern_graph_unary(kern_graph *g, kern_graph_op op, const char *name,
                                      kern_graph_val x, kern_graph_val *out) {
    kern_graph_node_desc d;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.name = name;
    d.inputs[0] = x;
    return kern_graph_add(g, &d, out);
}
KERN_API kern_status kern_graph_binary(kern_graph *g, kern_graph_op op, const char *name,
                                       kern_graph_val a, kern_graph_val b, kern_graph_val *out) {
    kern_graph_node_desc d;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.name = name;
    d.inputs[0] = a;
    d.inputs[1] = b;
    return kern_graph_add(g, &d, out);
}

/* ------------------------------------------------------ introspection */

KERN_API kern_graph_val kern_graph_find(const kern_graph *g, const char *name) {
    if (!g || !name) return 0;
    return kern__g_lookup(g, name);
}
KERN_API kern_status kern_graph_val_get(const kern_graph *g, kern_graph_val v,
                                        kern_graph_val_info *info) {
    const kern__gval *x;
    if (!g || !info) return kern__err(KERN_ERR_ARG, "kern_graph_val_get: NULL argument");
    if (v <= 0 || v >= g->n_vals)
        return kern__err(KERN_ERR_ARG, "kern_graph_val_get: value %d is not in the graph", (int)v);
    x = &g->vals[v];
    memset(info, 0, sizeof *info);
    info->name = g->str + x->name;
    info->kind = (kern_graph_val_kind)x->kind;
    info->dtype = x->dtype;
    info->ndim = x->ndim;
    memcpy(info->dims, x->dims, sizeof info->dims);
    if (x->kind == KERN_GRAPH_VAL_NODE) info->op = g->nodes[x->node].op;
    if (x->kind == KERN_GRAPH_VAL_WEIGHT) info->has_data = g->w[x->aux].data != NULL;
    return KERN_OK;
}
KERN_API int kern_graph_n_inputs(const kern_graph *g) { return g ? (int)g->n_inputs : 0; }
KERN_API int kern_graph_n_outputs(const kern_graph *g) { return g ? (int)g->n_outputs : 0; }
KERN_API kern_graph_val kern_graph_input_at(const kern_graph *g, int i) {
    return g && i >= 0 && i < g->n_inputs ? g->inputs[i] : 0;
}
KERN_API kern_graph_val kern_graph_output_at(const kern_graph *g, int i) {
    return g && i >= 0 && i < g->n_outputs ? g->outputs[i] : 0;
}
KERN_API int kern_graph_n_nodes(const kern_graph *g) { return g ? (int)g->n_nodes : 0; }
KERN_API int kern_graph_n_symbols(const kern_graph *g) { return g ? g->n_sym : 0; }
KERN_API const char *kern_graph_symbol_name(const kern_graph *g, int i) {
    return g && i >= 0 && i < g->n_sym ? g->str + g->sym[i] : NULL;
}

KERN_API kern_status kern_graph_node_get(const kern_graph *g, int i, kern_graph_node_desc *out) {
    const kern__gnode *n;
    int k;
    if (!g || !out) return kern__err(KERN_ERR_ARG, "kern_graph_node_get: NULL argument");
    if (i < 0 || i >= g->n_nodes)
        return kern__err(KERN_ERR_INDEX, "kern_graph_node_get: node %d of %lld", i, (long long)g->n_nodes);
    n = &g->nodes[i];
    memset(out, 0, sizeof *out);
    out->op = n->op;
    out->name = kern__g_vname(g, n->out[0]);
    memcpy(out->inputs, n->in, sizeof out->inputs);
    out->n_outputs = n->n_out;
    for (k = 1; k < n->n_out; k++) out->output_names[k] = kern__g_vname(g, n->out[k]);
    out->attrs = n->a;
    return KERN_OK;
}

KERN_API kern_status kern_graph_dim_eval(const kern_graph *g, int64_t dim, const int64_t *values,
                                         int64_t *out) {
    int bad = 0;
    int64_t v;
    int64_t sv[KERN_GRAPH_MAX_SYMBOLS];
    if (!g || !out || (g->n_sym && !values)) return kern__err(KERN_ERR_ARG, "kern_graph_dim_eval: NULL argument");
    if (kern__gx_is_expr(dim) && kern__gx_index(dim) >= g->n_ex)
        return kern__err(KERN_ERR_ARG, "kern_graph_dim_eval: %lld is not a dim of the graph", (long long)dim);
    memset(sv, 0, sizeof sv);
    if (g->n_sym) memcpy(sv, values, sizeof(int64_t) * (size_t)g->n_sym);
    v = kern__gx_eval(g, dim, sv, &bad);
    if (bad || v < 0) {
        char b[96];
        return kern__err(KERN_ERR_SHAPE, "kern_graph_dim_eval: %s is %s under this binding",
                         kern_graph_dim_str(g, dim, b, sizeof b), bad ? "too large" : "negative");
    }
    *out = v;
    return KERN_OK;
}

/* ------------------------------------------------------------ weights */

static kern_status kern__g_check_weight_tensor(const kern_graph *g, const kern__gval *x,
                                               const kern_tensor *t, const char *op) {
    int i;
    char s1[128], s2[128];
    if (t->dtype != x->dtype)
        return kern__err(KERN_ERR_DTYPE, "%s: weight '%s' is declared %s but the data is %s", op,
                         g->str + x->name, kern_dtype_name(x->dtype), kern_dtype_name(t->dtype));
    if (t->ndim != x->ndim) goto bad;
    for (i = 0; i < t->ndim; i++)
        if (t->shape[i] != x->dims[i]) goto bad;
    return KERN_OK;
bad:
    return kern__err(KERN_ERR_SHAPE, "%s: weight '%s' is declared %s but the data is %s", op,
                     g->str + x->name, kern__g_shape_str(g, x->ndim, x->dims, s1, sizeof s1),
                     kern_shape_str(t, s2, sizeof s2));
}

KERN_API kern_status kern_graph_bind_weight(kern_graph *g, const char *name, const kern_tensor *t,
                                            int flags) {
    const char *op = "kern_graph_bind_weight";
    kern_graph_val v;
    kern__gweight *w;
    void *data;
    int owned;
    kern_status st;
    if (!g || !name || !t) return kern__err(KERN_ERR_ARG, "%s: NULL argument", op);
    v = kern__g_lookup(g, name);
    if (!v || g->vals[v].kind != KERN_GRAPH_VAL_WEIGHT)
        return kern__err(KERN_ERR_ARG, "%s: '%s' is not a weight of the graph", op, name);
    if ((st = kern_tensor_check(t, op, name)) != KERN_OK) return st;
    if ((st = kern__g_check_weight_tensor(g, &g->vals[v], t, op)) != KERN_OK) return st;
    if (!t->data && kern_tensor_numel(t) > 0)
        return kern__err(KERN_ERR_ARG, "%s: '%s': data is NULL", op, name);
    if ((st = kern__g_weight_data(g, op, name, t, flags, &data, &owned)) != KERN_OK) return st;
    w = &g->w[g->vals[v].aux];
    if (w->owned) kern__free(g->ctx, w->data);
    w->data = data;
    w->owned = owned;
    return KERN_OK;
}

KERN_API kern_status kern_graph_bind_safetensors(kern_graph *g, const kern_safetensors *st,
                                                 int flags) {
    const char *op = "kern_graph_bind_safetensors";
    int64_t i;
    kern_status s;
    if (!g || !st) return kern__err(KERN_ERR_ARG, "%s: NULL argument", op);
    /* validate every unbound weight first: all or nothing */
    for (i = 0; i < g->n_w; i++) {
        const kern__gval *x = &g->vals[g->w[i].val];
        kern_tensor t;
        if (g->w[i].data) continue;
        s = kern_safetensors_tensor(st, g->str + x->name, &t);
        if (s == KERN_ERR_ARG)
            return kern__err(KERN_ERR_ARG, "%s: weight '%s' is missing from the safetensors file", op,
                             g->str + x->name);
        if (s) return s;
        if ((s = kern__g_check_weight_tensor(g, x, &t, op)) != KERN_OK) return s;
    }
    {
        /* copies may fail for memory: take them all before binding any */
        void **copies = NULL;
        int64_t nc = 0;
        if (flags & KERN_GRAPH_COPY) {
            copies = (void **)kern__alloc(g->ctx, (size_t)(g->n_w ? g->n_w : 1) * sizeof(void *));
            if (!copies) return kern__err(KERN_ERR_NOMEM, "%s: out of memory", op);
            for (i = 0; i < g->n_w; i++) {
                kern_tensor t;
                int owned;
                copies[i] = NULL;
                if (g->w[i].data) continue;
                kern_safetensors_tensor(st, g->str + g->vals[g->w[i].val].name, &t);
                s = kern__g_weight_data(g, op, g->str + g->vals[g->w[i].val].name, &t,
                                        KERN_GRAPH_COPY, &copies[i], &owned);
                if (s) {
                    int64_t k;
                    for (k = 0; k < i; k++) kern__free(g->ctx, copies[k]);
                    kern__free(g->ctx, copies);
                    return s;
                }
                nc++;
            }
        }
        for (i = 0; i < g->n_w; i++) {
            kern_tensor t;
            if (g->w[i].data) continue;
            if (copies) {
                g->w[i].data = copies[i];
                g->w[i].owned = 1;
            } else {
                kern_safetensors_tensor(st, g->str + g->vals[g->w[i].val].name, &t);
                g->w[i].data = t.data;
                g->w[i].owned = 0;
            }
        }
        (void)nc;
        kern__free(g->ctx, copies);
    }
    return KERN_OK;
}

KERN_API kern_status kern_graph_save_weights(const kern_graph *g, const char *path) {
    kern_safetensors_item *items;
    kern_tensor *ts;
    int64_t i, n = 0;
    kern_status st;
    if (!g || !path) return kern__err(KERN_ERR_ARG, "kern_graph_save_weights: NULL argument");
    items = (kern_safetensors_item *)kern__alloc(g->ctx, (size_t)(g->n_w + 1) *
                                                              (sizeof *items + sizeof *ts));
    if (!items) return kern__err(KERN_ERR_NOMEM, "kern_graph_save_weights: out of memory");
    ts = (kern_tensor *)(void *)(items + g->n_w + 1);
    for (i = 0; i < g->n_w; i++) {
        const kern__gval *x = &g->vals[g->w[i].val];
        if (!g->w[i].data) continue;
        kern_tensor_init(&ts[n], g->w[i].data, x->dtype, x->ndim, x->dims);
        if (!ts[n].data) ts[n].data = (void *)g;
        items[n].name = g->str + x->name;
        items[n].tensor = &ts[n];
        n++;
    }
    st = kern_safetensors_save(g->ctx, path, items, n, NULL);
    kern__free(g->ctx, items);
    return st;
}

/* ------------------------------------------------------------ IR text */

static const char *kern__g_reduce_name(kern_reduce r) {
    switch (r) {
    case KERN_REDUCE_SUM: return "sum";
    case KERN_REDUCE_PROD: return "prod";
    case KERN_REDUCE_MEAN: return "mean";
    case KERN_REDUCE_AMAX: return "amax";
    case KERN_REDUCE_AMIN: return "amin";
    default: return "invalid";
    }
}

static void kern__g_write_attr(const kern_graph *g, kern__gsb *s, const kern_graph_attrs *at,
                               int a) {
    const kern__gattr *d = &kern__gattrs[a];
    const char *b = (const char *)at;
    char t[96];
    kern__gsb_printf(s, " %s=", d->name);
    switch (d->type) {
    case KERN__GT_ACT: {
        kern_act v;
        memcpy(&v, b + d->off, sizeof v);
        kern__gsb_puts(s, kern_act_name(v));
        break;
    }
    case KERN__GT_REDUCE: {
        kern_reduce v;
        memcpy(&v, b + d->off, sizeof v);
        kern__gsb_puts(s, kern__g_reduce_name(v));
        break;
    }
    case KERN__GT_DTYPE: {
        kern_dtype v;
        memcpy(&v, b + d->off, sizeof v);
        kern__gsb_puts(s, kern_dtype_name(v));
        break;
    }
    case KERN__GT_FLOATSET: case KERN__GT_FLOAT: {
        float v;
        memcpy(&v, b + d->off, sizeof v);
        kern__g_ftoa(v, t, sizeof t);
        kern__gsb_puts(s, t);
        break;
    }
    case KERN__GT_BOOL: {
        int v;
        memcpy(&v, b + d->off, sizeof v);
        kern__gsb_printf(s, "%d", v);
        break;
    }
    case KERN__GT_INT: {
        int64_t v;
        memcpy(&v, b + d->off, 8);
        kern__gsb_printf(s, "%lld", (long long)v);
        break;
    }
    case KERN__GT_DIM: {
        int64_t v;
        memcpy(&v, b + d->off, 8);
        kern__gsb_puts(s, kern_graph_dim_str(g, v, t, sizeof t));
        break;
    }
    case KERN__GT_WINDOW: {
        int64_t l, r;
        memcpy(&l, b + d->off, 8);
        memcpy(&r, b + d->off + 8, 8);
        kern__gsb_printf(s, "%lld,%lld", (long long)l, (long long)r);
        break;
    }
    case KERN__GT_INTLIST: case KERN__GT_DIMLIST: {
        int n, i;
        memcpy(&n, b + d->off2, sizeof n);
        for (i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, b + d->off + 8 * (size_t)i, 8);
            if (i) kern__gsb_puts(s, ",");
            if (d->type == KERN__GT_INTLIST) kern__gsb_printf(s, "%lld", (long long)v);
            else kern__gsb_puts(s, kern_graph_dim_str(g, v, t, sizeof t));
        }
        break;
    }
    default: break;
    }
}

static void kern__g_write_node(const kern_graph *g, kern__gsb *s, const kern__gnode *n) {
    int i, last = -1, a;
    char sh[8];
    (void)sh;
    for (i = 0; i < n->n_out; i++)
        kern__gsb_printf(s, "%s%s", i ? ", " : "", kern__g_vname(g, n->out[i]));
    kern__gsb_printf(s, " = %s(", kern_graph_op_name(n->op));
    for (i = 0; i < KERN_GRAPH_MAX_INPUTS; i++)
        if (n->in[i]) last = i;
    for (i = 0; i <= last; i++)
        kern__gsb_printf(s, "%s%s", i ? ", " : "", n->in[i] ? kern__g_vname(g, n->in[i]) : "-");
    kern__gsb_puts(s, ")");
    for (a = 0; a < KERN__GA_COUNT; a++)
        if (((kern__gop(n->op)->attrs >> a) & 1u) && !kern__gattr_default(&n->a, a))
            kern__g_write_attr(g, s, &n->a, a);
}

static void kern__g_write(const kern_graph *g, kern__gsb *s) {
    int64_t e;
    char sh[512];
    kern__gsb_puts(s, "kern-graph 1\n");
    for (e = 0; e < g->n_ent; e++) {
        const kern__gentry *en = &g->ent[e];
        const kern__gval *x = en->kind != KERN__GE_DIM && en->kind != KERN__GE_NODE
                                  ? &g->vals[en->idx] : NULL;
        switch (en->kind) {
        case KERN__GE_DIM: kern__gsb_printf(s, "dim %s\n", g->str + g->sym[en->idx]); break;
        case KERN__GE_INPUT:
        case KERN__GE_WEIGHT:
            kern__gsb_printf(s, "%s %s %s %s\n", en->kind == KERN__GE_INPUT ? "input" : "weight",
                             g->str + x->name, kern_dtype_name(x->dtype),
                             kern__g_shape_str(g, x->ndim, x->dims, sh, sizeof sh));
            break;
        case KERN__GE_CONST: {
            const kern__gconst *k = &g->k[x->aux];
            int64_t i;
            kern__gsb_printf(s, "const %s %s %s", g->str + x->name, kern_dtype_name(x->dtype),
                             kern__g_shape_str(g, x->ndim, x->dims, sh, sizeof sh));
            for (i = 0; i < k->n; i++) {
                char t[40];
                kern__g_dtoa(k->v[i], t, sizeof t);
                kern__gsb_printf(s, "%s%s", i ? "," : " ", t);
            }
            kern__gsb_puts(s, "\n");
            break;
        }
        case KERN__GE_NODE:
            kern__g_write_node(g, s, &g->nodes[en->idx]);
            kern__gsb_puts(s, "\n");
            break;
        case KERN__GE_OUTPUT: kern__gsb_printf(s, "output %s\n", g->str + x->name); break;
        default: break;
        }
    }
}

KERN_API kern_status kern_graph_write_ir(const kern_graph *g, char *buf, size_t size,
                                         size_t *len) {
    kern__gsb s;
    if (!g || !len) return kern__err(KERN_ERR_ARG, "kern_graph_write_ir: g or len is NULL");
    s.buf = buf;
    s.size = size;
    s.n = 0;
    kern__g_write(g, &s);
    kern__gsb_end(&s);
    *len = s.n;
    return KERN_OK;
}

KERN_API kern_status kern_graph_save_ir(const kern_graph *g, const char *path) {
    size_t n;
    char *buf, *tmp;
    FILE *f;
    int ok;
    size_t pl;
    if (!g || !path) return kern__err(KERN_ERR_ARG, "kern_graph_save_ir: NULL argument");
    kern_graph_write_ir(g, NULL, 0, &n);
    pl = strlen(path);
    buf = (char *)kern__alloc(g->ctx, n + 1 + pl + 5);
    if (!buf) return kern__err(KERN_ERR_NOMEM, "kern_graph_save_ir: out of memory");
    kern_graph_write_ir(g, buf, n + 1, &n);
    tmp = buf + n + 1;
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    f = fopen(tmp, "wb");
    if (!f) {
        kern_status st = kern__err(KERN_ERR_ARG, "kern_graph_save_ir: cannot create '%s': %s", tmp,
                                   strerror(errno));
        kern__free(g->ctx, buf);
        return st;
    }
    ok = fwrite(buf, 1, n, f) == n;
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        kern_status st = kern__err(KERN_ERR_ARG, "kern_graph_save_ir: cannot write '%s'", path);
        remove(tmp);
        kern__free(g->ctx, buf);
        return st;
    }
    kern__free(g->ctx, buf);
    return KERN_OK;
}

/* --- reader */

enum { KERN__IR_DIM = 1, KERN__IR_INPUT, KERN__IR_WEIGHT, KERN__IR_CONST, KERN__IR_NODE,
       KERN__IR_OUTPUT };

typedef struct kern__irtok {
    int32_t off, len; /* within the line */
} kern__irtok;

typedef struct kern__irref {
    kern__irtok t;
    int sym; /* a symbol in a dim expression (else a value name) */
} kern__irref;

#define KERN__IR_MAX_REFS (KERN_GRAPH_MAX_INPUTS + 4 * KERN_MAX_DIMS + 16)

typedef struct kern__irst {
    int kind;
    int line;
    const char *text; /* the line (not NUL-terminated) */
    int len;
    int n_out;
    kern__irtok out[KERN_GRAPH_MAX_OUTPUTS]; /* node outputs, or the declared name */
    kern__irtok op, dtype, shape, values;   /* values: const values (len 0 = none) */
    int n_args;
    kern__irtok args[KERN_GRAPH_MAX_INPUTS];
    int n_attr;
    kern__irtok key[KERN__GA_COUNT], val[KERN__GA_COUNT];
    int n_ref;
    kern__irref ref[KERN__IR_MAX_REFS];
    int state;  /* 0 new, 1 on the DFS stack, 2 done */
    int next;   /* DFS: next ref to resolve */
} kern__irst;

typedef struct kern__irp {
    kern_ctx *ctx;
    kern__irst *st;
    int64_t n, cap;
    int32_t *ht; /* name -> 1 + statement index (hash of the token) */
    int64_t cap_ht;
} kern__irp;

static kern_status kern__ir_err(const kern__irst *s, int col, kern_status code, const char *fmt,
                                ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static kern_status kern__ir_err(const kern__irst *s, int col, kern_status code, const char *fmt,
                                ...) {
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return kern__err(code, "kern_graph_read_ir: line %d, column %d: %s", s->line, col + 1, m);
}

static int kern__ir_ws(char c) { return c == ' ' || c == '\t'; }
static int kern__ir_namec(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
}

/* A name token at *i; returns its length (0 if none). */
static int kern__ir_name(const kern__irst *s, int *i, kern__irtok *t) {
    int b;
    while (*i < s->len && kern__ir_ws(s->text[*i])) (*i)++;
    b = *i;
    while (*i < s->len && kern__ir_namec(s->text[*i])) (*i)++;
    t->off = b;
    t->len = *i - b;
    return t->len;
}
/* A token up to whitespace (or `stop`). */
static int kern__ir_word(const kern__irst *s, int *i, kern__irtok *t, char stop) {
    int b;
    while (*i < s->len && kern__ir_ws(s->text[*i])) (*i)++;
    b = *i;
    while (*i < s->len && !kern__ir_ws(s->text[*i]) && s->text[*i] != stop) (*i)++;
    t->off = b;
    t->len = *i - b;
    return t->len;
}
static int kern__ir_tokeq(const kern__irst *s, kern__irtok t, const char *w) {
    return (size_t)t.len == strlen(w) && memcmp(s->text + t.off, w, (size_t)t.len) == 0;
}

/* Records the identifiers of dim expressions in token t as symbol refs. */
static kern_status kern__ir_symrefs(kern__irst *s, kern__irtok t) {
    int i = t.off, e = t.off + t.len;
    while (i < e) {
        char c = s->text[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            int b = i;
            while (i < e && ((s->text[i] >= 'a' && s->text[i] <= 'z') ||
                             (s->text[i] >= 'A' && s->text[i] <= 'Z') || s->text[i] == '_' ||
                             (s->text[i] >= '0' && s->text[i] <= '9')))
                i++;
            if (s->n_ref >= KERN__IR_MAX_REFS)
                return kern__ir_err(s, b, KERN_ERR_ARG, "too many symbols on one line");
            s->ref[s->n_ref].t.off = b;
            s->ref[s->n_ref].t.len = i - b;
            s->ref[s->n_ref].sym = 1;
            s->n_ref++;
        } else if (c >= '0' && c <= '9') {
            while (i < e && s->text[i] >= '0' && s->text[i] <= '9') i++;
        } else {
            i++;
        }
    }
    return KERN_OK;
}

static int kern__ir_is_dim_attr(const kern__irst *s, kern__irtok key) {
    return kern__ir_tokeq(s, key, "shape") || kern__ir_tokeq(s, key, "sizes") ||
           kern__ir_tokeq(s, key, "start") || kern__ir_tokeq(s, key, "length");
}

/* Tokenizes one statement line. */
static kern_status kern__ir_lex(kern__irst *s) {
    int i = 0, j;
    kern__irtok w;
    kern__ir_word(s, &i, &w, 0);
    /* a value may be named like a keyword ("dim = add(a, b)", as the writer
     * prints it): a keyword followed by '=' or ',' starts a node line */
    for (j = i; j < s->len && kern__ir_ws(s->text[j]); j++) {
    }
    if (j < s->len && (s->text[j] == '=' || s->text[j] == ',')) w.len = 0;
    if (kern__ir_tokeq(s, w, "dim") || kern__ir_tokeq(s, w, "output")) {
        s->kind = kern__ir_tokeq(s, w, "dim") ? KERN__IR_DIM : KERN__IR_OUTPUT;
        if (!kern__ir_name(s, &i, &s->out[0]))
            return kern__ir_err(s, i, KERN_ERR_ARG, "expected a name");
        s->n_out = 1;
        if (s->kind == KERN__IR_OUTPUT) {
            s->ref[0].t = s->out[0];
            s->ref[0].sym = 0;
            s->n_ref = 1;
        }
    } else if (kern__ir_tokeq(s, w, "input") || kern__ir_tokeq(s, w, "weight") ||
               kern__ir_tokeq(s, w, "const")) {
        kern_status st;
        s->kind = kern__ir_tokeq(s, w, "input") ? KERN__IR_INPUT
                  : kern__ir_tokeq(s, w, "weight") ? KERN__IR_WEIGHT : KERN__IR_CONST;
        if (!kern__ir_name(s, &i, &s->out[0]))
            return kern__ir_err(s, i, KERN_ERR_ARG, "expected a name");
        s->n_out = 1;
        if (!kern__ir_word(s, &i, &s->dtype, 0))
            return kern__ir_err(s, i, KERN_ERR_ARG, "expected a dtype (f32, bf16, i64, ...)");
        while (i < s->len && kern__ir_ws(s->text[i])) i++;
        if (i < s->len && s->text[i] == '[') { /* the shape, spaces inside it included */
            int e = i;
            while (e < s->len && s->text[e] != ']') e++;
            if (e < s->len) {
                s->shape.off = i;
                s->shape.len = e + 1 - i;
                i = e + 1;
            } else {
                kern__ir_word(s, &i, &s->shape, 0);
            }
        } else if (!kern__ir_word(s, &i, &s->shape, 0)) {
            return kern__ir_err(s, i, KERN_ERR_ARG, "expected a shape [d0,d1,...]");
        }
        if ((st = kern__ir_symrefs(s, s->shape)) != KERN_OK) return st;
        if (s->kind == KERN__IR_CONST) kern__ir_word(s, &i, &s->values, 0);
    } else {
        /* node: outs = op(args) attrs */
        int k;
        i = 0;
        s->kind = KERN__IR_NODE;
        for (;;) {
            if (s->n_out >= KERN_GRAPH_MAX_OUTPUTS)
                return kern__ir_err(s, i, KERN_ERR_ARG, "more than %d outputs", KERN_GRAPH_MAX_OUTPUTS);
            if (!kern__ir_name(s, &i, &s->out[s->n_out])) {
                if (s->n_out == 0)
                    return kern__ir_err(s, i, KERN_ERR_ARG,
                                        "expected a declaration (dim, input, weight, const, "
                                        "output) or a node (name = op(...))");
                return kern__ir_err(s, i, KERN_ERR_ARG, "expected an output name");
            }
            s->n_out++;
            while (i < s->len && kern__ir_ws(s->text[i])) i++;
            if (i < s->len && s->text[i] == ',') { i++; continue; }
            break;
        }
        if (i >= s->len || s->text[i] != '=')
            return kern__ir_err(s, i, KERN_ERR_ARG, "expected '=' after the output names");
        i++;
        while (i < s->len && kern__ir_ws(s->text[i])) i++;
        s->op.off = i;
        while (i < s->len && ((s->text[i] >= 'a' && s->text[i] <= 'z') || s->text[i] == '_' ||
                              (s->text[i] >= '0' && s->text[i] <= '9')))
            i++;
        s->op.len = i - s->op.off;
        if (!s->op.len) return kern__ir_err(s, i, KERN_ERR_ARG, "expected an op name");
        if (i >= s->len || s->text[i] != '(')
            return kern__ir_err(s, i, KERN_ERR_ARG, "expected '(' after the op name");
        i++;
        while (i < s->len && kern__ir_ws(s->text[i])) i++;
        if (i < s->len && s->text[i] == ')') {
            i++;
        } else {
            for (;;) {
                kern__irtok a;
                if (s->n_args >= KERN_GRAPH_MAX_INPUTS)
                    return kern__ir_err(s, i, KERN_ERR_ARG, "more than %d inputs", KERN_GRAPH_MAX_INPUTS);
                if (!kern__ir_name(s, &i, &a))
                    return kern__ir_err(s, i, KERN_ERR_ARG, "expected an input name or '-'");
                s->args[s->n_args++] = a;
                if (!(a.len == 1 && s->text[a.off] == '-')) {
                    s->ref[s->n_ref].t = a;
                    s->ref[s->n_ref].sym = 0;
                    s->n_ref++;
                }
                while (i < s->len && kern__ir_ws(s->text[i])) i++;
                if (i < s->len && s->text[i] == ',') { i++; continue; }
                if (i < s->len && s->text[i] == ')') { i++; break; }
                return kern__ir_err(s, i, KERN_ERR_ARG, "expected ',' or ')'");
            }
        }
        for (;;) {
            kern__irtok kv;
            int eq;
            kern_status st;
            if (!kern__ir_word(s, &i, &kv, 0)) break;
            if (s->n_attr >= KERN__GA_COUNT)
                return kern__ir_err(s, kv.off, KERN_ERR_ARG, "too many attributes");
            for (eq = 0; eq < kv.len && s->text[kv.off + eq] != '='; eq++) {
            }
            if (eq == 0 || eq >= kv.len - 1)
                return kern__ir_err(s, kv.off, KERN_ERR_ARG, "expected key=value");
            s->key[s->n_attr].off = kv.off;
            s->key[s->n_attr].len = eq;
            s->val[s->n_attr].off = kv.off + eq + 1;
            s->val[s->n_attr].len = kv.len - eq - 1;
            for (k = 0; k < s->n_attr; k++)
                if (s->key[k].len == eq && memcmp(s->text + s->key[k].off, s->text + kv.off, (size_t)eq) == 0)
                    return kern__ir_err(s, kv.off, KERN_ERR_ARG, "attribute '%.*s' given twice", eq,
                                        s->text + kv.off);
            if (kern__ir_is_dim_attr(s, s->key[s->n_attr]) &&
                (st = kern__ir_symrefs(s, s->val[s->n_attr])) != KERN_OK)
                return st;
            s->n_attr++;
        }
        return KERN_OK;
    }
    {
        kern__irtok extra;
        if (kern__ir_word(s, &i, &extra, 0))
            return kern__ir_err(s, extra.off, KERN_ERR_ARG, "unexpected '%.*s'",
                                extra.len > 40 ? 40 : extra.len, s->text + extra.off);
    }
    return KERN_OK;
}

static uint64_t kern__ir_hash(const char *p, int len) {
    uint64_t h = 1469598103934665603ull;
    int i;
    for (i = 0; i < len; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

/* The statement defining name (symbol when sym) or -1. */
static int64_t kern__ir_def(const kern__irp *p, const char *name, int len, int sym) {
    uint64_t mask = (uint64_t)p->cap_ht - 1, h;
    for (h = kern__ir_hash(name, len) & mask; p->ht[h]; h = (h + 1) & mask) {
        int32_t e = p->ht[h] - 1;
        const kern__irst *s = &p->st[e >> 3];
        kern__irtok t = s->out[e & 7];
        if (t.len == len && memcmp(s->text + t.off, name, (size_t)len) == 0 &&
            (s->kind == KERN__IR_DIM) == (sym != 0))
            return e >> 3;
    }
    return -1;
}

static kern_status kern__ir_split_lines(kern__irp *p, const char *text, size_t len) {
    size_t i = 0;
    int line = 0, header = 0;
    while (i < len) {
        size_t b = i, e;
        int k;
        kern__irst *s;
        while (i < len && text[i] != '\n') i++;
        e = i;
        if (i < len) i++;
        line++;
        if (e > b && text[e - 1] == '\r') e--;
        for (k = (int)b; k < (int)e && kern__ir_ws(text[k]); k++) {
        }
        if (k == (int)e || text[k] == '#') continue;
        if (e - b > (size_t)1 << 30)
            return kern__err(KERN_ERR_ARG, "kern_graph_read_ir: line %d is too long", line);
        {
            size_t z;
            for (z = b; z < e; z++)
                if (text[z] == 0 || ((unsigned char)text[z] < 32 && text[z] != '\t'))
                    return kern__err(KERN_ERR_ARG,
                                     "kern_graph_read_ir: line %d, column %d: control character",
                                     line, (int)(z - b) + 1);
        }
        if (!header) {
            /* "kern-graph", spaces, the version, nothing else but spaces */
            size_t q = (size_t)k, v0, v1;
            if (e - q < 11 || memcmp(text + q, "kern-graph", 10) != 0 || !kern__ir_ws(text[q + 10]))
                return kern__err(KERN_ERR_ARG,
                                 "kern_graph_read_ir: line %d, column %d: expected the header "
                                 "'kern-graph 1'",
                                 line, k - (int)b + 1);
            for (v0 = q + 10; v0 < e && kern__ir_ws(text[v0]); v0++) {
            }
            for (v1 = v0; v1 < e && !kern__ir_ws(text[v1]); v1++) {
            }
            if (v1 - v0 != 1 || text[v0] != '1')
                return kern__err(KERN_ERR_UNSUPPORTED,
                                 "kern_graph_read_ir: line %d: IR version '%.*s' (this "
                                 "reader knows 1)",
                                 line, (int)(v1 - v0 > 20 ? 20 : v1 - v0), text + v0);
            for (q = v1; q < e; q++)
                if (!kern__ir_ws(text[q]))
                    return kern__err(KERN_ERR_ARG,
                                     "kern_graph_read_ir: line %d, column %d: unexpected text "
                                     "after the header",
                                     line, (int)(q - b) + 1);
            header = 1;
            continue;
        }
        if (!kern__g_grow(p->ctx, (void **)&p->st, &p->cap, p->n + 1, sizeof(kern__irst)))
            return kern__err(KERN_ERR_NOMEM, "kern_graph_read_ir: out of memory");
        s = &p->st[p->n];
        memset(s, 0, sizeof *s);
        s->line = line;
        s->text = text + b;
        s->len = (int)(e - b);
        {
            kern_status st = kern__ir_lex(s);
            if (st) return st;
        }
        p->n++;
    }
    if (!header) return kern__err(KERN_ERR_ARG, "kern_graph_read_ir: empty input (no 'kern-graph 1' header)");
    return KERN_OK;
}

static kern_status kern__ir_index(kern__irp *p) {
    int64_t i, cap = 64;
    int o;
    int64_t total = 0;
    for (i = 0; i < p->n; i++) total += p->st[i].kind == KERN__IR_OUTPUT ? 0 : p->st[i].n_out;
    while (cap < 2 * total + 2) cap *= 2;
    p->ht = (int32_t *)kern__alloc(p->ctx, (size_t)cap * sizeof(int32_t));
    if (!p->ht) return kern__err(KERN_ERR_NOMEM, "kern_graph_read_ir: out of memory");
    memset(p->ht, 0, (size_t)cap * sizeof(int32_t));
    p->cap_ht = cap;
    if (p->n > (int64_t)1 << 27) return kern__err(KERN_ERR_ARG, "kern_graph_read_ir: too many lines");
    for (i = 0; i < p->n; i++) {
        kern__irst *s = &p->st[i];
        if (s->kind == KERN__IR_OUTPUT) continue;
        for (o = 0; o < s->n_out; o++) {
            kern__irtok t = s->out[o];
            uint64_t h, mask = (uint64_t)cap - 1;
            int64_t prev = kern__ir_def(p, s->text + t.off, t.len, s->kind == KERN__IR_DIM);
            if (prev >= 0)
                return kern__ir_err(s, t.off, KERN_ERR_ARG, "'%.*s' is already defined on line %d",
                                    t.len, s->text + t.off, p->st[prev].line);
            for (h = kern__ir_hash(s->text + t.off, t.len) & mask; p->ht[h]; h = (h + 1) & mask) {
            }
            p->ht[h] = (int32_t)(i * 8 + o + 1);
        }
    }
    return KERN_OK;
}

static kern_status kern__ir_dtype(const kern__irst *s, kern__irtok t, kern_dtype *dt) {
    int d;
    for (d = 1; d < KERN_DTYPE_COUNT; d++)
        if (kern__ir_tokeq(s, t, kern_dtype_name((kern_dtype)d))) {
            *dt = (kern_dtype)d;
            return KERN_OK;
        }
    return kern__ir_err(s, t.off, KERN_ERR_DTYPE, "unknown dtype '%.*s'", t.len > 20 ? 20 : t.len,
                        s->text + t.off);
}

/* Re-raises the last error with the statement's line and column. */
static kern_status kern__ir_wrap(const kern__irst *s, int col, kern_status st) {
    char m[512];
    const char *e = kern_last_error();
    if (strncmp(e, "kern_graph: ", 12) == 0) e += 12;
    snprintf(m, sizeof m, "%s", e);
    return kern__ir_err(s, col, st, "%s", m);
}

static kern_status kern__ir_shape(kern_graph *g, const kern__irst *s, kern__irtok t, int *ndim,
                                  int64_t *dims) {
    size_t e;
    kern_status st = kern__g_parse_shape(g, s->text + t.off, (size_t)t.len, 0, ndim, dims, &e);
    if (st) return kern__ir_wrap(s, t.off + (int)e, st);
    return KERN_OK;
}

static kern_status kern__ir_int(const kern__irst *s, const char *p, int len, int col, int64_t *v) {
    int i = 0, neg = 0;
    uint64_t x = 0;
    if (len > 0 && (p[0] == '-' || p[0] == '+')) { neg = p[0] == '-'; i = 1; }
    if (i >= len) return kern__ir_err(s, col, KERN_ERR_ARG, "expected an integer");
    for (; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return kern__ir_err(s, col + i, KERN_ERR_ARG, "expected an integer");
        x = x * 10 + (uint64_t)(p[i] - '0');
        if (x > (uint64_t)INT64_MAX / 16) return kern__ir_err(s, col, KERN_ERR_ARG, "integer too large");
    }
    *v = neg ? -(int64_t)x : (int64_t)x;
    return KERN_OK;
}

static kern_status kern__ir_double(const kern__irst *s, const char *p, int len, int col, double *v) {
    char tmp[64];
    char *end;
    if (len <= 0 || len >= (int)sizeof tmp) return kern__ir_err(s, col, KERN_ERR_ARG, "expected a number");
    memcpy(tmp, p, (size_t)len);
    tmp[len] = 0;
    if (strcmp(tmp, "inf") == 0) { *v = INFINITY; return KERN_OK; }
    if (strcmp(tmp, "-inf") == 0) { *v = -INFINITY; return KERN_OK; }
    if (strcmp(tmp, "nan") == 0) { *v = NAN; return KERN_OK; }
    {
        int i, ok = 1;
        for (i = 0; i < len; i++)
            if (!((tmp[i] >= '0' && tmp[i] <= '9') || tmp[i] == '-' || tmp[i] == '+' ||
                  tmp[i] == '.' || tmp[i] == 'e' || tmp[i] == 'E'))
                ok = 0;
        if (!ok) return kern__ir_err(s, col, KERN_ERR_ARG, "expected a number");
    }
    errno = 0;
    *v = strtod(tmp, &end);
    if (*end || end == tmp) return kern__ir_err(s, col, KERN_ERR_ARG, "expected a number");
    return KERN_OK;
}

static kern_status kern__ir_attr(kern_graph *g, const kern__irst *s, kern_graph_op op, int k,
                                 kern_graph_attrs *at) {
    kern__irtok key = s->key[k], val = s->val[k];
    const char *v = s->text + val.off;
    char *b = (char *)at;
    int a;
    kern_status st;
    for (a = 0; a < KERN__GA_COUNT; a++)
        if (kern__ir_tokeq(s, key, kern__gattrs[a].name)) break;
    if (a == KERN__GA_COUNT)
        return kern__ir_err(s, key.off, KERN_ERR_ARG, "unknown attribute '%.*s'", key.len,
                            s->text + key.off);
    if (!((kern__gop(op)->attrs >> a) & 1u))
        return kern__ir_err(s, key.off, KERN_ERR_ARG, "attribute '%s' does not apply to op '%s'",
                            kern__gattrs[a].name, kern_graph_op_name(op));
    {
        const kern__gattr *d = &kern__gattrs[a];
        switch (d->type) {
        case KERN__GT_ACT: {
            int x;
            for (x = 0; x < KERN_ACT_COUNT; x++)
                if (kern__ir_tokeq(s, val, kern_act_name((kern_act)x))) break;
            if (x == KERN_ACT_COUNT)
                return kern__ir_err(s, val.off, KERN_ERR_ARG, "unknown act '%.*s'", val.len, v);
            {
                kern_act e = (kern_act)x;
                memcpy(b + d->off, &e, sizeof e);
            }
            break;
        }
        case KERN__GT_REDUCE: {
            int x;
            for (x = 1; x < KERN_REDUCE_COUNT; x++)
                if (kern__ir_tokeq(s, val, kern__g_reduce_name((kern_reduce)x))) break;
            if (x == KERN_REDUCE_COUNT)
                return kern__ir_err(s, val.off, KERN_ERR_ARG, "unknown reduce '%.*s'", val.len, v);
            {
                kern_reduce e = (kern_reduce)x;
                memcpy(b + d->off, &e, sizeof e);
            }
            break;
        }
        case KERN__GT_DTYPE: {
            kern_dtype e = KERN_DTYPE_NONE;
            if ((st = kern__ir_dtype(s, val, &e)) != KERN_OK) return st;
            memcpy(b + d->off, &e, sizeof e);
            break;
        }
        case KERN__GT_FLOATSET: case KERN__GT_FLOAT: {
            double x;
            float f;
            int one = 1;
            if ((st = kern__ir_double(s, v, val.len, val.off, &x)) != KERN_OK) return st;
            f = (float)x;
            memcpy(b + d->off, &f, sizeof f);
            if (d->type == KERN__GT_FLOATSET) memcpy(b + d->off2, &one, sizeof one);
            break;
        }
        case KERN__GT_BOOL: {
            int x;
            if (val.len != 1 || (v[0] != '0' && v[0] != '1'))
                return kern__ir_err(s, val.off, KERN_ERR_ARG, "expected 0 or 1");
            x = v[0] - '0';
            memcpy(b + d->off, &x, sizeof x);
            break;
        }
        case KERN__GT_INT: {
            int64_t x;
            if ((st = kern__ir_int(s, v, val.len, val.off, &x)) != KERN_OK) return st;
            memcpy(b + d->off, &x, 8);
            break;
        }
        case KERN__GT_DIM: {
            int64_t x;
            size_t e;
            st = kern__g_parse_dim(g, v, (size_t)val.len, 0, &x, &e);
            if (st) return kern__ir_wrap(s, val.off + (int)e, st);
            memcpy(b + d->off, &x, 8);
            break;
        }
        case KERN__GT_WINDOW: {
            int c;
            int64_t l, r;
            int one = 1;
            for (c = 0; c < val.len && v[c] != ','; c++) {
            }
            if (c >= val.len) return kern__ir_err(s, val.off, KERN_ERR_ARG, "expected left,right");
            if ((st = kern__ir_int(s, v, c, val.off, &l)) != KERN_OK) return st;
            if ((st = kern__ir_int(s, v + c + 1, val.len - c - 1, val.off + c + 1, &r)) != KERN_OK)
                return st;
            memcpy(b + d->off, &l, 8);
            memcpy(b + d->off + 8, &r, 8);
            memcpy(b + d->off2, &one, sizeof one);
            break;
        }
        case KERN__GT_INTLIST: case KERN__GT_DIMLIST: {
            int n = 0, c = 0, maxn = a == KERN__GA_SIZES ? KERN_GRAPH_MAX_OUTPUTS : KERN_MAX_DIMS;
            while (c <= val.len) {
                int e = c;
                int64_t x;
                while (e < val.len && v[e] != ',') e++;
                if (n >= maxn) return kern__ir_err(s, val.off + c, KERN_ERR_ARG, "too many entries");
                if (d->type == KERN__GT_INTLIST) {
                    if ((st = kern__ir_int(s, v + c, e - c, val.off + c, &x)) != KERN_OK) return st;
                } else if (e - c == 2 && v[c] == '-' && v[c + 1] == '1') {
                    x = KERN_GRAPH_DIM_INFER;
                } else {
                    size_t ep;
                    st = kern__g_parse_dim(g, v + c, (size_t)(e - c), 0, &x, &ep);
                    if (st) return kern__ir_wrap(s, val.off + c + (int)ep, st);
                }
                memcpy(b + d->off + 8 * (size_t)n, &x, 8);
                n++;
                c = e + 1;
            }
            memcpy(b + d->off2, &n, sizeof n);
            break;
        }
        default: break;
        }
    }
    return KERN_OK;
}

/* Adds statement s to the graph (its references exist). */
static kern_status kern__ir_exec(kern_graph *g, const kern__irst *s) {
    char name[KERN__G_NAME_MAX + 1];
    kern_status st;
    kern__irtok t0 = s->out[0];
    if (t0.len > KERN__G_NAME_MAX)
        return kern__ir_err(s, t0.off, KERN_ERR_ARG, "name longer than %d characters", KERN__G_NAME_MAX);
    memcpy(name, s->text + t0.off, (size_t)t0.len);
    name[t0.len] = 0;
    switch (s->kind) {
    case KERN__IR_DIM:
        if (!kern__g_sym_ok(name, strlen(name)))
            return kern__ir_err(s, t0.off, KERN_ERR_ARG, "'%s' is not a symbol name", name);
        if (kern__g_add_sym(g, name, strlen(name)) < 0) return kern__ir_wrap(s, t0.off, KERN_ERR_NOMEM);
        return KERN_OK;
    case KERN__IR_OUTPUT: {
        kern_graph_val v = kern__g_lookup(g, name);
        st = kern_graph_output(g, v);
        return st ? kern__ir_wrap(s, t0.off, st) : KERN_OK;
    }
    case KERN__IR_INPUT: case KERN__IR_WEIGHT: case KERN__IR_CONST: {
        kern_dtype dt = KERN_DTYPE_NONE;
        int ndim = 0;
        int64_t dims[KERN_MAX_DIMS];
        if ((st = kern__ir_dtype(s, s->dtype, &dt)) != KERN_OK) return st;
        if ((st = kern__ir_shape(g, s, s->shape, &ndim, dims)) != KERN_OK) return st;
        if (s->kind == KERN__IR_INPUT) {
            st = kern_graph_input(g, name, dt, ndim, dims, NULL);
        } else if (s->kind == KERN__IR_WEIGHT) {
            kern_tensor t;
            int i;
            memset(&t, 0, sizeof t);
            t.dtype = dt;
            t.ndim = ndim;
            for (i = 0; i < ndim; i++) {
                if (kern__gx_is_expr(dims[i]))
                    return kern__ir_err(s, s->shape.off, KERN_ERR_SHAPE, "weight shapes are concrete");
                t.shape[i] = dims[i];
            }
            st = kern_graph_weight(g, name, &t, 0, NULL);
        } else {
            double *vals = NULL;
            int64_t n = 1, cnt = 0;
            int i, c = 0;
            const char *v = s->text + s->values.off;
            for (i = 0; i < ndim; i++) {
                if (kern__gx_is_expr(dims[i]))
                    return kern__ir_err(s, s->shape.off, KERN_ERR_SHAPE, "constant shapes are concrete");
                if (kern_mul_overflow_i64(n, dims[i], &n) || n > 65536)
                    return kern__ir_err(s, s->shape.off, KERN_ERR_SHAPE, "constants hold at most 65536 values");
            }
            vals = (double *)kern__alloc(g->ctx, (size_t)(n ? n : 1) * sizeof(double));
            if (!vals) return kern__err(KERN_ERR_NOMEM, "kern_graph_read_ir: out of memory");
            while (s->values.len > 0 && c <= s->values.len) {
                int e = c;
                while (e < s->values.len && v[e] != ',') e++;
                if (cnt >= n) {
                    kern__free(g->ctx, vals);
                    return kern__ir_err(s, s->values.off + c, KERN_ERR_SHAPE,
                                        "more than the %lld values the shape holds", (long long)n);
                }
                st = kern__ir_double(s, v + c, e - c, s->values.off + c, &vals[cnt]);
                if (st) { kern__free(g->ctx, vals); return st; }
                cnt++;
                c = e + 1;
            }
            if (cnt != n) {
                kern__free(g->ctx, vals);
                return kern__ir_err(s, s->values.len ? s->values.off : s->shape.off + s->shape.len,
                                    KERN_ERR_SHAPE, "%lld values for a shape of %lld",
                                    (long long)cnt, (long long)n);
            }
            st = kern_graph_const(g, name, dt, ndim, dims, vals, NULL);
            kern__free(g->ctx, vals);
        }
        return st ? kern__ir_wrap(s, t0.off, st) : KERN_OK;
    }
    case KERN__IR_NODE: {
        kern_graph_node_desc d;
        char outn[KERN_GRAPH_MAX_OUTPUTS][KERN__G_NAME_MAX + 1];
        int op, i;
        memset(&d, 0, sizeof d);
        for (op = 1; op < KERN_GRAPH_OP_COUNT; op++)
            if (kern__ir_tokeq(s, s->op, kern_graph_op_name((kern_graph_op)op))) break;
        if (op == KERN_GRAPH_OP_COUNT)
            return kern__ir_err(s, s->op.off, KERN_ERR_ARG, "unknown op '%.*s'",
                                s->op.len > 40 ? 40 : s->op.len, s->text + s->op.off);
        d.op = (kern_graph_op)op;
        d.name = name;
        if (s->n_args > kern__gop(d.op)->max_in)
            return kern__ir_err(s, s->args[kern__gop(d.op)->max_in].off, KERN_ERR_ARG,
                                "op '%s' takes at most %d inputs", kern_graph_op_name(d.op),
                                kern__gop(d.op)->max_in);
        for (i = 0; i < s->n_args; i++) {
            kern__irtok a = s->args[i];
            char an[KERN__G_NAME_MAX + 1];
            if (a.len == 1 && s->text[a.off] == '-') continue;
            if (a.len > KERN__G_NAME_MAX)
                return kern__ir_err(s, a.off, KERN_ERR_ARG, "name too long");
            memcpy(an, s->text + a.off, (size_t)a.len);
            an[a.len] = 0;
            d.inputs[i] = kern__g_lookup(g, an);
        }
        for (i = 0; i < s->n_out; i++) {
            if (s->out[i].len > KERN__G_NAME_MAX)
                return kern__ir_err(s, s->out[i].off, KERN_ERR_ARG, "name too long");
            memcpy(outn[i], s->text + s->out[i].off, (size_t)s->out[i].len);
            outn[i][s->out[i].len] = 0;
            if (i) d.output_names[i] = outn[i];
        }
        d.n_outputs = s->n_out;
        for (i = 0; i < s->n_attr; i++)
            if ((st = kern__ir_attr(g, s, d.op, i, &d.attrs)) != KERN_OK) return st;
        st = kern_graph_add(g, &d, NULL);
        if (st) return kern__ir_wrap(s, s->op.off, st);
        {
            /* the node must produce exactly the outputs named */
            kern_graph_val v = kern__g_lookup(g, name);
            const kern__gnode *n = &g->nodes[g->vals[v].node];
            if (n->n_out != s->n_out)
                return kern__ir_err(s, s->out[0].off, KERN_ERR_ARG, "op '%s' has %d outputs, %d named",
                                    kern_graph_op_name(d.op), n->n_out, s->n_out);
        }
        return KERN_OK;
    }
    default: return KERN_OK;
    }
}

/* Depth-first over the references (explicit stack), adding each statement
 * after what it uses: a text whose definitions come first is added in its
 * own order. */
static kern_status kern__ir_build(kern__irp *p, kern_graph *g) {
    int64_t *stack, top, i;
    stack = (int64_t *)kern__alloc(p->ctx, (size_t)(p->n + 1) * sizeof(int64_t));
    if (!stack) return kern__err(KERN_ERR_NOMEM, "kern_graph_read_ir: out of memory");
    for (i = 0; i < p->n; i++) {
        if (p->st[i].state == 2) continue;
        top = 0;
        stack[top++] = i;
        p->st[i].state = 1;
        while (top > 0) {
            kern__irst *s = &p->st[stack[top - 1]];
            if (s->next < s->n_ref) {
                kern__irref r = s->ref[s->next++];
                int64_t d = kern__ir_def(p, s->text + r.t.off, r.t.len, r.sym);
                if (d < 0) {
                    kern_status st = kern__ir_err(s, r.t.off, KERN_ERR_ARG,
                                                  r.sym ? "symbol '%.*s' is not declared (a 'dim' line)"
                                                        : "'%.*s' is not defined",
                                                  r.t.len, s->text + r.t.off);
                    kern__free(p->ctx, stack);
                    return st;
                }
                if (p->st[d].state == 2) continue;
                if (p->st[d].state == 1) {
                    /* a cycle: the stack from d to the top */
                    char m[300];
                    kern__gsb b;
                    int64_t k, from = top - 1;
                    kern_status st;
                    while (from > 0 && stack[from] != d) from--;
                    b.buf = m;
                    b.size = sizeof m;
                    b.n = 0;
                    for (k = from; k < top; k++) {
                        const kern__irst *c = &p->st[stack[k]];
                        kern__gsb_printf(&b, "'%.*s' (line %d) -> ", c->out[0].len > 40 ? 40 : c->out[0].len,
                                         c->text + c->out[0].off, c->line);
                    }
                    kern__gsb_printf(&b, "'%.*s'", p->st[d].out[0].len > 40 ? 40 : p->st[d].out[0].len,
                                     p->st[d].text + p->st[d].out[0].off);
                    kern__gsb_end(&b);
                    st = kern__ir_err(s, r.t.off, KERN_ERR_ARG, "cycle: %s", m);
                    kern__free(p->ctx, stack);
                    return st;
                }
                p->st[d].state = 1;
                stack[top++] = d;
                continue;
            }
            {
                kern_status st = kern__ir_exec(g, s);
                if (st) {
                    kern__free(p->ctx, stack);
                    return st;
                }
            }
            s->state = 2;
            top--;
        }
    }
    kern__free(p->ctx, stack);
    return KERN_OK;
}

KERN_API kern_status kern_graph_read_ir(kern_ctx *ctx, const char *text, size_t len,
                                        kern_graph **out) {
    kern__irp p;
    kern_graph *g = NULL;
    kern_status st;
    if (!out || (!text && len)) return kern__err(KERN_ERR_ARG, "kern_graph_read_ir: NULL argument");
    if (!ctx) {
        ctx = kern_default_ctx();
        if (!ctx) return KERN_ERR_NOMEM;
    }
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    st = kern__ir_split_lines(&p, text, len);
    if (!st) st = kern__ir_index(&p);
    if (!st) st = kern_graph_create(ctx, &g);
    if (!st) st = kern__ir_build(&p, g);
    kern__free(ctx, p.st);
    kern__free(ctx, p.ht);
    if (st) {
        kern_graph_destroy(g);
        return st;
    }
    *out = g;
    return KERN_OK;
}

KERN_API kern_status kern_graph_load_ir(kern_ctx *ctx, const char *path, kern_graph **out) {
    FILE *f;
    long long n;
    char *buf;
    kern_status st;
    if (!path || !out) return kern__err(KERN_ERR_ARG, "kern_graph_load_ir: NULL argument");
    if (!ctx) {
        ctx = kern_default_ctx();
        if (!ctx) return KERN_ERR_NOMEM;
    }
    f = fopen(path, "rb");
    if (!f)
        return kern__err(KERN_ERR_ARG, "kern_graph_load_ir: cannot open '%s': %s", path,
                         strerror(errno));
    if (fseeko(f, 0, SEEK_END) != 0 || (n = (long long)ftello(f)) < 0 || fseeko(f, 0, SEEK_SET) != 0 ||
        n > ((long long)1 << 31)) {
        fclose(f);
        return kern__err(KERN_ERR_ARG, "kern_graph_load_ir: cannot read '%s'", path);
    }
    buf = (char *)kern__alloc(ctx, (size_t)n + 1);
    if (!buf) {
        fclose(f);
        return kern__err(KERN_ERR_NOMEM, "kern_graph_load_ir: out of memory");
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        kern__free(ctx, buf);
        return kern__err(KERN_ERR_ARG, "kern_graph_load_ir: cannot read '%s'", path);
    }
    fclose(f);
    st = kern_graph_read_ir(ctx, buf, (size_t)n, out);
    if (st) {
        char m[512];
        snprintf(m, sizeof m, "%s", kern_last_error());
        kern__err(st, "%s: %s", path, m);
    }
    kern__free(ctx, buf);
    return st;
}

/* ============================================================ planning */

/* storage of a root value */
enum { KERN__GS_ARENA = 1, KERN__GS_INPUT, KERN__GS_OUTPUT, KERN__GS_WEIGHT, KERN__GS_PLAN };

typedef struct kern__gpv {
    int32_t root;    /* value whose memory this one uses (itself for roots) */
    int32_t src;     /* views: the value viewed */
    int8_t view;     /* a view (no step writes it) */
    int8_t storage;  /* roots: KERN__GS_* */
    int8_t live;     /* produced or used by a live node, or an input/output */
    int8_t checked;  /* arena root whose size may grow past the bound's */
    int32_t io;      /* graph input / output index */
    int32_t first, last; /* roots: step range it is live */
    int32_t group;   /* in-place union-find parent */
    size_t bytes;    /* at the bound */
    size_t off;      /* arena offset */
    void *ptr;       /* WEIGHT / PLAN data */
} kern__gpv;

typedef struct kern__gstep {
    int32_t node;
    kern_graph_op op;
    int8_t cls;      /* KERN__GC_EXEC or _FAMILY */
    int8_t copy;     /* a reshape run as a copy */
    kern_gemm_packed_b *pb;
    kern_qweight *qw;
    kern_sparse24 *sw;
    int32_t seg_end; /* exec steps: one past the last step of its segment */
    int64_t bound_rows; /* linear: rows of x at the plan's bound */
} kern__gstep;

struct kern__gex;
typedef void (*kern__gex_fn)(const struct kern__gex *e, int64_t lo, int64_t hi, float *scratch);

/* An executor-owned step, resolved for one binding. */
typedef struct kern__gex {
    kern__gex_fn fn;
    kern_graph_op op;
    const kern_tensor *x[KERN_GRAPH_MAX_INPUTS];
    kern_tensor b0, b1;     /* elementwise inputs broadcast to y's shape */
    kern_tensor yv;         /* y's shape and strides (a reshaped view for copies) */
    const kern_tensor *yt;  /* y itself: its data pointer */
    int64_t poff[KERN_GRAPH_MAX_INPUTS]; /* concat: element offset of each part in y */
    int n_x;
    int8_t sa, sb;          /* kern__gx_flat: input is a single value */
    float f0;
    int64_t units, inner;
    int64_t limit;          /* embedding: table rows */
    volatile int64_t *err;  /* first bad id position + 1 */
} kern__gex;

typedef struct kern__gistep {
    kern__gex e;
    int par;                /* split over threads */
    int seg_par;            /* at a segment's first step: some step splits */
    int64_t chunks;
    double flops, bytes;
} kern__gistep;

typedef struct kern__gpatch {
    int32_t v;
    int32_t io;      /* input index, or output index when is_out */
    int32_t is_out;
    int64_t boff;    /* byte offset from the root's base */
} kern__gpatch;

typedef struct kern__ginst {
    int valid;
    uint64_t stamp;
    int64_t sv[KERN_GRAPH_MAX_SYMBOLS];
    int64_t *exv;           /* value of every dim expression */
    kern_tensor *T;         /* per value */
    kern__gistep *is;       /* per step */
    kern__gpatch *patch;
    int64_t n_patch;
    size_t fam_ws;          /* largest family workspace this binding needs */
} kern__ginst;

typedef struct kern__gctr { /* per-step counters of the parallel region */
    KERN_ALIGNED(64) int64_t next;
    int64_t done;
    char pad[48];
} kern__gctr;

/* Which input dim binds each symbol: input index, dim, offset (dim = S + c).
 * Symbols bound only through expressions are solved from the first input
 * dim of the form S + c; others are an error at plan time. */
typedef struct kern__gbinder {
    int32_t input, dim;
    int64_t c;
} kern__gbinder;

typedef struct kern__gwskey {
    int64_t v[24];
} kern__gwskey;

struct kern_graph_plan {
    kern_ctx *ctx;
    kern_graph *src;
    kern_graph w;            /* working copy */
    kern_graph_plan_params prm;
    int64_t bound[KERN_GRAPH_MAX_SYMBOLS];
    kern__gbinder binders[KERN_GRAPH_MAX_SYMBOLS];
    int32_t *order;          /* live nodes in order */
    int64_t n_order;
    kern__gpv *pv;           /* per value of w */
    kern__gstep *steps;
    int64_t n_steps;
    int32_t *node_step;      /* node -> step (-1: a view) */
    void *arena;
    size_t arena_bytes;
    int arena_owned, arena_set;
    void **allocs;           /* plan-owned blocks (constants, merged weights) */
    int64_t n_allocs, cap_allocs;
    void *fam_ws;
    size_t fam_ws_size;
    int fam_ws_sized;        /* set once the bound's family workspace is known */
    kern__gwskey wsc_key[32]; /* workspace answers by shape (plan time) */
    size_t wsc_val[32];
    int n_wsc;
    int32_t wsn_node[32];     /* other family ops: answers by earlier node */
    size_t wsn_val[32];
    int n_wsn;
    float *scratch;
    size_t scratch_floats;   /* per thread */
    int n_threads;
    kern__ginst *inst;
    int n_inst, cur;
    uint64_t clock;
    kern__gctr *ctr;
    volatile int64_t err;
    double *prof_s;
    int64_t *prof_calls;
    int64_t prof_runs;       /* runs since planning */
    int64_t prof_nruns;      /* runs since the last profile reset */
    char *report;
    int64_t n_report, cap_report;
    kern_graph_plan_stats stats;
    int64_t parallel_min;
    const kern_tensor *run_out; /* outputs of the current run */
};

static void kern__gp_log(kern_graph_plan *p, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Formats fmt into line[cap] when it uses only %s, %d, %lld and %%
 * (what most report lines need), without the cost of vsnprintf. Returns
 * the length, or -1 for any other conversion (the caller then uses
 * vsnprintf). Truncates at cap - 1. */
static int kern__gp_fmt(char *line, size_t cap, const char *fmt, va_list ap) {
    size_t n = 0;
    const char *f;
    for (f = fmt; *f; f++) {
        char num[24];
        const char *t;
        if (*f != '%') {
            if (n + 1 < cap) line[n++] = *f;
            continue;
        }
        f++;
        if (*f == 's') {
            t = va_arg(ap, const char *);
            if (!t) t = "(null)";
        } else if (*f == 'd' || (f[0] == 'l' && f[1] == 'l' && f[2] == 'd')) {
            long long v = *f == 'd' ? (long long)va_arg(ap, int) : va_arg(ap, long long);
            unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
            int k = (int)sizeof num - 1;
            num[k] = 0;
            do { num[--k] = (char)('0' + (int)(u % 10)); u /= 10; } while (u);
            if (v < 0) num[--k] = '-';
            t = num + k;
            if (*f == 'l') f += 2;
        } else if (*f == '%') {
            t = "%";
        } else {
            return -1;
        }
        while (*t && n + 1 < cap) line[n++] = *t++;
    }
    line[n] = 0;
    return (int)n;
}

static void kern__gp_log(kern_graph_plan *p, const char *fmt, ...) {
    char line[600];
    int k;
    va_list ap;
    va_start(ap, fmt);
    k = kern__gp_fmt(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (k < 0) {
        va_start(ap, fmt);
        k = vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
    }
    if (k < 0) return;
    if ((size_t)k >= sizeof line - 1) k = (int)sizeof line - 2;
    line[k++] = '\n';
    if (!kern__g_grow(p->ctx, (void **)&p->report, &p->cap_report, p->n_report + k + 1, 1)) return;
    memcpy(p->report + p->n_report, line, (size_t)k);
    p->n_report += k;
    p->report[p->n_report] = 0;
}

static void *kern__gp_alloc(kern_graph_plan *p, size_t bytes) {
    void *m;
    if (!kern__g_grow(p->ctx, (void **)&p->allocs, &p->cap_allocs, p->n_allocs + 1, sizeof(void *)))
        return NULL;
    m = kern__alloc(p->ctx, bytes ? bytes : 64);
    if (m) p->allocs[p->n_allocs++] = m;
    return m;
}

/* Deep copy of a graph's structure into dst (weight data and constant
 * values are shared, not owned). */
static kern_status kern__g_clone(const kern_graph *s, kern_graph *d) {
    kern_ctx *ctx = s->ctx;
    memset(d, 0, sizeof *d);
    d->ctx = ctx;
/* copies n entries into a block with room for a quarter more (the passes
 * add a few values and nodes); no zeroing: every slot used is written */
#define KERN__GCL(f, n, cap, T)                                               \
    do {                                                                      \
        if (s->n > 0) {                                                       \
            int64_t c_ = s->n + s->n / 4 + 16;                                \
            d->f = (T *)kern__alloc(ctx, (size_t)c_ * sizeof(T));             \
            if (!d->f) goto nomem;                                            \
            memcpy(d->f, s->f, (size_t)s->n * sizeof(T));                     \
            d->cap = c_;                                                      \
        }                                                                     \
        d->n = s->n;                                                          \
    } while (0)
    KERN__GCL(str, n_str, cap_str, char);
    KERN__GCL(vals, n_vals, cap_vals, kern__gval);
    KERN__GCL(nodes, n_nodes, cap_nodes, kern__gnode);
    KERN__GCL(w, n_w, cap_w, kern__gweight);
    KERN__GCL(k, n_k, cap_k, kern__gconst);
    KERN__GCL(ex, n_ex, cap_ex, kern__gexpr);
    KERN__GCL(inputs, n_inputs, cap_inputs, kern_graph_val);
    KERN__GCL(outputs, n_outputs, cap_outputs, kern_graph_val);
#undef KERN__GCL
    {
        int64_t i;
        for (i = 0; i < d->n_w; i++) d->w[i].owned = 0;
    }
    if (s->cap_ht) {
        d->ht = (int32_t *)kern__alloc(ctx, (size_t)s->cap_ht * sizeof(int32_t));
        if (!d->ht) goto nomem;
        memcpy(d->ht, s->ht, (size_t)s->cap_ht * sizeof(int32_t));
        d->cap_ht = s->cap_ht;
        d->n_ht = s->n_ht;
    }
    memcpy(d->sym, s->sym, sizeof d->sym);
    memcpy(d->mulc, s->mulc, sizeof d->mulc);
    d->n_sym = s->n_sym;
    return KERN_OK;
nomem:
    return kern__err(KERN_ERR_NOMEM, "kern_graph_plan_create: out of memory");
}

static void kern__g_clone_free(kern_graph *d) {
    kern_ctx *ctx = d->ctx;
    kern__free(ctx, d->str);
    kern__free(ctx, d->vals);
    kern__free(ctx, d->nodes);
    kern__free(ctx, d->w);
    kern__free(ctx, d->k);
    kern__free(ctx, d->ent);
    kern__free(ctx, d->ex);
    kern__free(ctx, d->ht);
    kern__free(ctx, d->inputs);
    kern__free(ctx, d->outputs);
    memset(d, 0, sizeof *d);
}

/* ---- working-graph edits used by the passes */

/* Adds a node to the working graph at order key `pos` (validated and
 * inferred like kern_graph_add). */
static kern_status kern__gw_add(kern_graph *w, const kern_graph_node_desc *d, int64_t pos,
                                kern_graph_val *outs) {
    kern_status st;
    int64_t idx = w->n_nodes;
    st = kern_graph_add(w, d, outs);
    if (st) return st;
    w->n_ent--; /* the working graph keeps no IR entries */
    w->nodes[idx].pos = pos;
    return KERN_OK;
}

/* A fresh name "<base>.<tag>N" unused in w. */
static void kern__gw_fresh(const kern_graph *w, const char *base, const char *tag, char *buf,
                           size_t size) {
    size_t lb = strlen(base), lt = strlen(tag), k;
    int i;
    if (lb > 90) lb = 90;
    if (size < lb + lt + 24) { /* callers pass >= 128 bytes */
        if (size) buf[0] = 0;
        return;
    }
    memcpy(buf, base, lb);
    buf[lb] = '.';
    memcpy(buf + lb + 1, tag, lt);
    k = lb + 1 + lt;
    for (i = 0;; i++) {
        char d[16];
        int nd = 0, v = i;
        do {
            d[nd++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        {
            int q;
            for (q = 0; q < nd; q++) buf[k + (size_t)q] = d[nd - 1 - q];
            buf[k + (size_t)nd] = 0;
        }
        if (!kern__g_lookup(w, buf)) return;
    }
}

/* Appends to a node's "fused" description. */
static void kern__gw_note(kern_graph *w, kern__gnode *n, const char *what) {
    char buf[400];
    uint32_t off;
    size_t a = n->fused ? strlen(w->str + n->fused) : 0, b = strlen(what);
    if (a + b + 2 > sizeof buf) return;
    if (a) {
        memcpy(buf, w->str + n->fused, a);
        buf[a++] = '+';
    }
    memcpy(buf + a, what, b + 1);
    if (kern__g_intern(w, buf, &off)) n->fused = off;
}

/* use counts of every value over live nodes (+1 per graph output) */
static int32_t *kern__gw_uses(kern_graph_plan *p) {
    kern_graph *w = &p->w;
    int32_t *u = (int32_t *)kern__alloc(p->ctx, (size_t)w->n_vals * sizeof(int32_t));
    int64_t i;
    int k;
    if (!u) return NULL;
    memset(u, 0, (size_t)w->n_vals * sizeof(int32_t));
    for (i = 0; i < w->n_nodes; i++) {
        const kern__gnode *n = &w->nodes[i];
        if (n->dead) continue;
        for (k = 0; k < kern__gop(n->op)->max_in; k++)
            if (n->in[k]) u[n->in[k]]++;
    }
    for (i = 0; i < w->n_outputs; i++) u[w->outputs[i]]++;
    return u;
}

/* dead-node elimination (a node none of whose outputs is used, other than
 * kv_append, which writes graph inputs); returns the nodes removed */
static int64_t kern__gw_dce(kern_graph_plan *p) {
    kern_graph *w = &p->w;
    int64_t removed = 0, i;
    int changed = 1;
    while (changed) {
        int32_t *u = kern__gw_uses(p);
        changed = 0;
        if (!u) return removed;
        for (i = w->n_nodes - 1; i >= 0; i--) {
            kern__gnode *n = &w->nodes[i];
            int k, used = 0;
            if (n->dead) continue;
            for (k = 0; k < n->n_out; k++) used |= u[n->out[k]] > 0;
            /* kv_append writes the caller's caches: never dead */
            if (n->op == KERN_GRAPH_OP_KV_APPEND) used = 1;
            if (!used) {
                n->dead = 1;
                removed++;
                changed = 1;
                for (k = 0; k < KERN_GRAPH_MAX_INPUTS; k++)
                    if (n->in[k]) u[n->in[k]]--;
            }
        }
        kern__free(p->ctx, u);
    }
    return removed;
}

static kern_status kern__g_passes(kern_graph_plan *p);

/* ---- binding */

static kern_status kern__gp_bind(kern_graph_plan *p, const kern_graph_plan_params *prm) {
    kern_graph *w = &p->w;
    int set[KERN_GRAPH_MAX_SYMBOLS];
    int i;
    memset(set, 0, sizeof set);
    if (prm->bounds) {
        if (prm->n_bounds != w->n_sym)
            return kern__err(KERN_ERR_ARG, "kern_graph_plan_create: %d bounds for %d symbols",
                             prm->n_bounds, w->n_sym);
        for (i = 0; i < w->n_sym; i++) {
            p->bound[i] = prm->bounds[i];
            set[i] = 1;
        }
    }
    if (prm->bind) {
        const char *s = prm->bind;
        while (*s) {
            const char *b = s, *eq;
            int k;
            long long v;
            char *end;
            while (*s && *s != ',') s++;
            eq = b;
            while (eq < s && *eq != '=') eq++;
            while (b < eq && *b == ' ') b++;
            if (eq >= s)
                return kern__err(KERN_ERR_ARG, "kern_graph_plan_create: bind \"%s\": expected NAME=VALUE",
                                 prm->bind);
            {
                const char *ne = eq;
                while (ne > b && ne[-1] == ' ') ne--;
                k = kern__g_find_sym(w, b, (size_t)(ne - b));
                if (k < 0)
                    return kern__err(KERN_ERR_ARG, "kern_graph_plan_create: bind: '%.*s' is not a symbol of the graph",
                                     (int)(ne - b), b);
            }
            errno = 0;
            v = strtoll(eq + 1, &end, 10);
            while (*end == ' ') end++;
            if (end != s || errno || v < 0)
                return kern__err(KERN_ERR_ARG, "kern_graph_plan_create: bind: bad value for '%s'",
                                 w->str + w->sym[k]);
            p->bound[k] = v;
            set[k] = 1;
            if (*s == ',') s++;
        }
    }
    for (i = 0; i < w->n_sym; i++)
        if (!set[i])
            return kern__err(KERN_ERR_SHAPE,
                             "kern_graph_plan_create: symbol '%s' is not bound (params.bind \"%s=...\")",
                             w->str + w->sym[i], w->str + w->sym[i]);
    return KERN_OK;
}

static kern_status kern__gp_binders(const kern_graph *w, kern__gbinder *b) {
    int s;
    for (s = 0; s < w->n_sym; s++) {
        int64_t i;
        int d, found = 0;
        for (i = 0; i < w->n_inputs && !found; i++) {
            const kern__gval *x = &w->vals[w->inputs[i]];
            for (d = 0; d < x->ndim && !found; d++) {
                const kern__gexpr *e;
                int t, ok = 1;
                int64_t c = 0;
                if (!kern__gx_is_expr(x->dims[d])) continue;
                e = &w->ex[kern__gx_index(x->dims[d])];
                /* S + c: one term 1*S, optionally a constant */
                if (e->nt < 1 || e->nt > 2) continue;
                if (e->c[0] != 1 || e->m[0] != ((uint64_t)1 << (4 * s))) ok = 0;
                for (t = 1; t < e->nt; t++) {
                    if (e->m[t] != 0) ok = 0;
                    c = e->c[t];
                }
                if (!ok) continue;
                b[s].input = (int32_t)i;
                b[s].dim = d;
                b[s].c = c;
                found = 1;
            }
        }
        if (!found)
            return kern__err(KERN_ERR_SHAPE,
                             "kern_graph_plan_create: symbol '%s' appears in no input dim as '%s' or "
                             "'%s+c', so a run cannot bind it",
                             w->str + w->sym[s], w->str + w->sym[s], w->str + w->sym[s]);
    }
    return KERN_OK;
}

/* ---- concrete views */

/* Strides for viewing (shape, stride) as new_shape without a copy (the
 * rule of torch's view). 1 on success. */
static int kern__g_view_strides(int nd, const int64_t *shape, const int64_t *stride, int nn,
                                const int64_t *nshape, int64_t *nstride) {
    int64_t numel = 1, chunk_base_stride, tensor_numel = 1, view_numel = 1;
    int view_d = nn - 1, tensor_d;
    int i;
    for (i = 0; i < nd; i++) numel *= shape[i];
    if (numel == 0) {
        int64_t s = 1;
        for (i = nn - 1; i >= 0; i--) {
            nstride[i] = s;
            s *= nshape[i] > 0 ? nshape[i] : 1;
        }
        return 1;
    }
    if (nd == 0) {
        for (i = 0; i < nn; i++) nstride[i] = 1;
        return 1;
    }
    chunk_base_stride = stride[nd - 1];
    for (tensor_d = nd - 1; tensor_d >= 0; tensor_d--) {
        tensor_numel *= shape[tensor_d];
        if (tensor_d == 0 ||
            (shape[tensor_d - 1] != 1 && stride[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || nshape[view_d] == 1)) {
                nstride[view_d] = view_numel * chunk_base_stride;
                view_numel *= nshape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return 0;
            if (tensor_d > 0) {
                chunk_base_stride = stride[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

/* Collapses the leading dims of t into one: [d0..dn-2, last] -> [M, last].
 * 1 on success (t unchanged otherwise). */
static int kern__g_flatten2(const kern_tensor *t, kern_tensor *o) {
    int64_t sh[2], st[2];
    if (t->ndim < 1) return 0;
    if (t->ndim == 2) { *o = *t; return 1; }
    sh[0] = 1;
    {
        int i;
        for (i = 0; i < t->ndim - 1; i++) sh[0] *= t->shape[i];
    }
    sh[1] = t->shape[t->ndim - 1];
    if (!kern__g_view_strides(t->ndim, t->shape, t->stride, 2, sh, st)) return 0;
    *o = *t;
    o->ndim = 2;
    memset(o->shape, 0, sizeof o->shape);
    memset(o->stride, 0, sizeof o->stride);
    o->shape[0] = sh[0];
    o->shape[1] = sh[1];
    o->stride[0] = st[0];
    o->stride[1] = st[1];
    return 1;
}

static void kern__g_contig(kern_tensor *t) {
    int64_t s = 1;
    int i;
    for (i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i] > 0 ? t->shape[i] : 1;
    }
}

/* The view an op makes of x: y gets yshape's shape; slices and splits
 * start at `start` along their axis (element offset in *eoff). 0 if a
 * reshape cannot be a view. */
static int kern__g_make_view(const kern__gnode *n, const kern_tensor *x,
                             const kern_tensor *yshape, int64_t start, kern_tensor *y,
                             int64_t *eoff) {
    int i;
    *y = *x;
    *eoff = 0;
    y->ndim = yshape->ndim;
    memcpy(y->shape, yshape->shape, sizeof y->shape);
    switch (n->op) {
    case KERN_GRAPH_OP_RESHAPE:
        memset(y->stride, 0, sizeof y->stride);
        return kern__g_view_strides(x->ndim, x->shape, x->stride, y->ndim, y->shape, y->stride);
    case KERN_GRAPH_OP_PERMUTE:
        for (i = 0; i < x->ndim; i++) y->stride[i] = x->stride[n->a.perm[i]];
        return 1;
    case KERN_GRAPH_OP_TRANSPOSE: {
        int a = (int)(n->a.axis < 0 ? n->a.axis + x->ndim : n->a.axis);
        int b = (int)(n->a.axis2 < 0 ? n->a.axis2 + x->ndim : n->a.axis2);
        memcpy(y->stride, x->stride, sizeof y->stride);
        y->stride[a] = x->stride[b];
        y->stride[b] = x->stride[a];
        return 1;
    }
    case KERN_GRAPH_OP_SLICE: case KERN_GRAPH_OP_SPLIT: {
        int a = (int)(n->a.axis < 0 ? n->a.axis + x->ndim : n->a.axis);
        memcpy(y->stride, x->stride, sizeof y->stride);
        *eoff = start * x->stride[a];
        return 1;
    }
    case KERN_GRAPH_OP_EXPAND: {
        int off = y->ndim - x->ndim;
        memset(y->stride, 0, sizeof y->stride);
        for (i = 0; i < y->ndim; i++) {
            int j = i - off;
            if (j < 0 || (x->shape[j] == 1 && y->shape[i] != 1)) y->stride[i] = 0;
            else y->stride[i] = x->stride[j];
        }
        return 1;
    }
    default: return 0;
    }
}

/* ============================================== executor-owned kernels */

#define KERN__GX_BLK 256

static void kern__gx_load(kern_dtype dt, const char *p, int64_t s, int64_t n, float *o) {
    int64_t i;
    switch (dt) {
    case KERN_F32: {
        const float *q = (const float *)(const void *)p;
        if (s == 1) memcpy(o, q, (size_t)n * 4);
        else for (i = 0; i < n; i++) o[i] = q[i * s];
        break;
    }
    case KERN_BF16: {
        const uint16_t *q = (const uint16_t *)(const void *)p;
        for (i = 0; i < n; i++) o[i] = kern_bf16_to_f32(q[i * s]);
        break;
    }
    case KERN_F16: {
        const uint16_t *q = (const uint16_t *)(const void *)p;
        for (i = 0; i < n; i++) o[i] = kern_f16_to_f32(q[i * s]);
        break;
    }
    case KERN_I32: {
        const int32_t *q = (const int32_t *)(const void *)p;
        for (i = 0; i < n; i++) o[i] = (float)q[i * s];
        break;
    }
    case KERN_I64: {
        const int64_t *q = (const int64_t *)(const void *)p;
        for (i = 0; i < n; i++) o[i] = (float)q[i * s];
        break;
    }
    case KERN_I8: {
        const int8_t *q = (const int8_t *)(const void *)p;
        for (i = 0; i < n; i++) o[i] = (float)q[i * s];
        break;
    }
    default: {
        const uint8_t *q = (const uint8_t *)(const void *)p;
        for (i = 0; i < n; i++) o[i] = (float)q[i * s];
        break;
    }
    }
}

static void kern__gx_store(kern_dtype dt, char *p, int64_t s, int64_t n, const float *v) {
    int64_t i;
    switch (dt) {
    case KERN_F32: {
        float *q = (float *)(void *)p;
        if (s == 1) memcpy(q, v, (size_t)n * 4);
        else for (i = 0; i < n; i++) q[i * s] = v[i];
        break;
    }
    case KERN_BF16: {
        uint16_t *q = (uint16_t *)(void *)p;
        for (i = 0; i < n; i++) q[i * s] = kern_f32_to_bf16(v[i]);
        break;
    }
    case KERN_F16: {
        uint16_t *q = (uint16_t *)(void *)p;
        for (i = 0; i < n; i++) q[i * s] = kern_f32_to_f16(v[i]);
        break;
    }
    default: break; /* integer outputs take the integer path */
    }
}

static void kern__gx_apply(kern_graph_op op, float f0, const float *a, const float *b, float *y,
                           int64_t n) {
    int64_t i;
    switch (op) {
    case KERN_GRAPH_OP_ADD: for (i = 0; i < n; i++) y[i] = a[i] + b[i]; break;
    case KERN_GRAPH_OP_SUB: for (i = 0; i < n; i++) y[i] = a[i] - b[i]; break;
    case KERN_GRAPH_OP_MUL: for (i = 0; i < n; i++) y[i] = a[i] * b[i]; break;
    case KERN_GRAPH_OP_DIV: for (i = 0; i < n; i++) y[i] = a[i] / b[i]; break;
    /* the activations of the fused epilogues, with their bits (the shared
     * math layer): a node the epilogue pass could not fold computes what
     * the fused form would */
    case KERN_GRAPH_OP_GELU: for (i = 0; i < n; i++) y[i] = kern__s_gelu(a[i]); break;
    case KERN_GRAPH_OP_GELU_TANH: for (i = 0; i < n; i++) y[i] = kern__s_gelu_tanh(a[i]); break;
    case KERN_GRAPH_OP_SILU: for (i = 0; i < n; i++) y[i] = kern__s_silu(a[i]); break;
    case KERN_GRAPH_OP_RELU:
        for (i = 0; i < n; i++) y[i] = a[i] > 0 ? a[i] : (a[i] != a[i] ? a[i] : 0.0f);
        break;
    case KERN_GRAPH_OP_SIGMOID: for (i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-a[i])); break;
    case KERN_GRAPH_OP_SQRT: for (i = 0; i < n; i++) y[i] = sqrtf(a[i]); break;
    case KERN_GRAPH_OP_RSQRT: for (i = 0; i < n; i++) y[i] = 1.0f / sqrtf(a[i]); break;
    case KERN_GRAPH_OP_EXP: for (i = 0; i < n; i++) y[i] = expf(a[i]); break;
    case KERN_GRAPH_OP_TANH: for (i = 0; i < n; i++) y[i] = tanhf(a[i]); break;
    case KERN_GRAPH_OP_ERF: for (i = 0; i < n; i++) y[i] = erff(a[i]); break;
    case KERN_GRAPH_OP_NEG: for (i = 0; i < n; i++) y[i] = -a[i]; break;
    case KERN_GRAPH_OP_RECIPROCAL: for (i = 0; i < n; i++) y[i] = 1.0f / a[i]; break;
    case KERN_GRAPH_OP_SCALE: for (i = 0; i < n; i++) y[i] = f0 * a[i]; break;
    case KERN_GRAPH_OP_POW:
        if (f0 == 2.0f) for (i = 0; i < n; i++) y[i] = a[i] * a[i];
        else if (f0 == 1.0f) for (i = 0; i < n; i++) y[i] = a[i];
        else if (f0 == 0.5f) for (i = 0; i < n; i++) y[i] = sqrtf(a[i]);
        else for (i = 0; i < n; i++) y[i] = powf(a[i], f0);
        break;
    default: /* copy, cast, reshape copies */
        if (y != a) memmove(y, a, (size_t)n * sizeof(float));
        break;
    }
}

/* Unravels row r over dims [0, nd-1) of shape. */
static void kern__gx_unravel(int nd, const int64_t *shape, int64_t r, int64_t *idx) {
    int d;
    for (d = nd - 2; d >= 0; d--) {
        int64_t s = shape[d] > 0 ? shape[d] : 1;
        idx[d] = r % s;
        r /= s;
    }
}
static void kern__gx_next(int nd, const int64_t *shape, int64_t *idx) {
    int d;
    for (d = nd - 2; d >= 0; d--) {
        if (++idx[d] < shape[d]) return;
        idx[d] = 0;
    }
}
static int64_t kern__gx_off(int nd, const int64_t *idx, const int64_t *stride) {
    int64_t o = 0;
    int d;
    for (d = 0; d < nd - 1; d++) o += idx[d] * stride[d];
    return o;
}

/* elementwise (1 or 2 inputs broadcast to y), float dtypes */
static void kern__gx_map(const kern__gex *e, int64_t lo, int64_t hi, float *scr) {
    const kern_tensor *y = &e->yv, *a = &e->b0, *b = &e->b1;
    const char *pa0 = (const char *)e->x[0]->data;
    const char *pb0 = e->n_x > 1 ? (const char *)e->x[1]->data : NULL;
    char *py0 = (char *)e->yt->data;
    int nd = y->ndim;
    int64_t idx[KERN_MAX_DIMS], r, inner = e->inner;
    int64_t sy = nd ? y->stride[nd - 1] : 1, sa = nd ? a->stride[nd - 1] : 1,
            sb = nd ? b->stride[nd - 1] : 1;
    size_t ey = kern_dtype_size(y->dtype), ea = kern_dtype_size(a->dtype),
           eb = pb0 ? kern_dtype_size(b->dtype) : 0;
    float *fa = scr, *fb = scr + KERN__GX_BLK, *fy = scr + 2 * KERN__GX_BLK;
    memset(idx, 0, sizeof idx);
    kern__gx_unravel(nd, y->shape, lo, idx);
    for (r = lo; r < hi; r++) {
        int64_t oy = kern__gx_off(nd, idx, y->stride), oa = kern__gx_off(nd, idx, a->stride);
        int64_t ob = pb0 ? kern__gx_off(nd, idx, b->stride) : 0, j;
        for (j = 0; j < inner; j += KERN__GX_BLK) {
            int64_t n = inner - j < KERN__GX_BLK ? inner - j : KERN__GX_BLK;
            const char *pa = pa0 + (oa + j * sa) * (int64_t)ea;
            char *py = py0 + (oy + j * sy) * (int64_t)ey;
            const float *va, *vb = NULL;
            float *vy;
            if (a->dtype == KERN_F32 && sa == 1) va = (const float *)(const void *)pa;
            else { kern__gx_load(a->dtype, pa, sa, n, fa); va = fa; }
            if (pb0) {
                const char *pb = pb0 + (ob + j * sb) * (int64_t)eb;
                if (b->dtype == KERN_F32 && sb == 1) vb = (const float *)(const void *)pb;
                else { kern__gx_load(b->dtype, pb, sb, n, fb); vb = fb; }
            }
            vy = (y->dtype == KERN_F32 && sy == 1) ? (float *)(void *)py : fy;
            kern__gx_apply(e->op, e->f0, va, vb, vy, n);
            if (vy == fy) kern__gx_store(y->dtype, py, sy, n, fy);
        }
        kern__gx_next(nd, y->shape, idx);
    }
}

/* A step with no units of work (an empty output): nothing to touch (its
 * tensors may have no memory at all). */
static void kern__gx_nop(const kern__gex *e, int64_t lo, int64_t hi, float *scr) {
    (void)e;
    (void)lo;
    (void)hi;
    (void)scr;
}

/* The common case, f32 everywhere, y contiguous, each input contiguous
 * with y's shape or a single value: one flat loop over elements (units =
 * elements). The dispatch-bound tiny nodes land here. */
static void kern__gx_flat(const kern__gex *e, int64_t lo, int64_t hi, float *scr) {
    const float *a = (const float *)e->x[0]->data;
    const float *b = e->n_x > 1 ? (const float *)e->x[1]->data : NULL;
    float *y = (float *)e->yt->data;
    int64_t i, n = hi - lo;
    (void)scr;
    y += lo;
    if (!e->sa) a += lo;
    if (b && !e->sb) b += lo;
    switch (e->op) {
    case KERN_GRAPH_OP_ADD:
        if (e->sb) { float c = b[0]; for (i = 0; i < n; i++) y[i] = a[i] + c; }
        else if (e->sa) { float c = a[0]; for (i = 0; i < n; i++) y[i] = c + b[i]; }
        else for (i = 0; i < n; i++) y[i] = a[i] + b[i];
        return;
    case KERN_GRAPH_OP_MUL:
        if (e->sb) { float c = b[0]; for (i = 0; i < n; i++) y[i] = a[i] * c; }
        else if (e->sa) { float c = a[0]; for (i = 0; i < n; i++) y[i] = c * b[i]; }
        else for (i = 0; i < n; i++) y[i] = a[i] * b[i];
        return;
    case KERN_GRAPH_OP_SUB:
        if (e->sb) { float c = b[0]; for (i = 0; i < n; i++) y[i] = a[i] - c; }
        else if (e->sa) { float c = a[0]; for (i = 0; i < n; i++) y[i] = c - b[i]; }
        else for (i = 0; i < n; i++) y[i] = a[i] - b[i];
        return;
    case KERN_GRAPH_OP_DIV:
        if (e->sb) { float c = b[0]; for (i = 0; i < n; i++) y[i] = a[i] / c; }
        else if (e->sa) { float c = a[0]; for (i = 0; i < n; i++) y[i] = c / b[i]; }
        else for (i = 0; i < n; i++) y[i] = a[i] / b[i];
        return;
    default: {
        /* unary ops (a is never a broadcast scalar here) */
        int64_t j;
        for (j = 0; j < n; j += KERN__GX_BLK) {
            int64_t m = n - j < KERN__GX_BLK ? n - j : KERN__GX_BLK;
            kern__gx_apply(e->op, e->f0, a + j, NULL, y + j, m);
        }
        return;
    }
    }
}

/* copies / casts involving integer dtypes (elementwise, same shape) */
static void kern__gx_map_int(const kern__gex *e, int64_t lo, int64_t hi, float *scr) {
    const kern_tensor *y = &e->yv, *a = &e->b0;
    const char *pa0 = (const char *)e->x[0]->data;
    char *py0 = (char *)e->yt->data;
    int nd = y->ndim;
    int64_t idx[KERN_MAX_DIMS], r, j;
    size_t ey = kern_dtype_size(y->dtype), ea = kern_dtype_size(a->dtype);
    (void)scr;
    memset(idx, 0, sizeof idx);
    kern__gx_unravel(nd, y->shape, lo, idx);
    for (r = lo; r < hi; r++) {
        int64_t oy = kern__gx_off(nd, idx, y->stride), oa = kern__gx_off(nd, idx, a->stride);
        int64_t sy = nd ? y->stride[nd - 1] : 1, sa = nd ? a->stride[nd - 1] : 1;
        for (j = 0; j < e->inner; j++) {
            const char *pa = pa0 + (oa + j * sa) * (int64_t)ea;
            char *py = py0 + (oy + j * sy) * (int64_t)ey;
            int64_t iv = 0;
            double dv = 0;
            int isf = kern_dtype_is_float(a->dtype);
            switch (a->dtype) {
            case KERN_F32: { float f; memcpy(&f, pa, 4); dv = f; break; }
            case KERN_BF16: { uint16_t h; memcpy(&h, pa, 2); dv = kern_bf16_to_f32(h); break; }
            case KERN_F16: { uint16_t h; memcpy(&h, pa, 2); dv = kern_f16_to_f32(h); break; }
            case KERN_I32: { int32_t q; memcpy(&q, pa, 4); iv = q; break; }
            case KERN_I64: memcpy(&iv, pa, 8); break;
            case KERN_I8: { int8_t q; memcpy(&q, pa, 1); iv = q; break; }
            default: { uint8_t q; memcpy(&q, pa, 1); iv = q; break; }
            }
            if (isf) iv = dv != dv ? 0 : dv >= 9.2e18 ? INT64_MAX : dv <= -9.2e18 ? INT64_MIN
                                                                           : (int64_t)dv;
            else dv = (double)iv;
            switch (y->dtype) {
            case KERN_F32: { float f = (float)dv; memcpy(py, &f, 4); break; }
            case KERN_BF16: { uint16_t h = kern_f32_to_bf16((float)dv); memcpy(py, &h, 2); break; }
            case KERN_F16: { uint16_t h = kern_f32_to_f16((float)dv); memcpy(py, &h, 2); break; }
            case KERN_I32: { int32_t q = (int32_t)iv; memcpy(py, &q, 4); break; }
            case KERN_I64: memcpy(py, &iv, 8); break;
            case KERN_I8: { int8_t q = (int8_t)iv; memcpy(py, &q, 1); break; }
            default: { uint8_t q = (uint8_t)(iv != 0); memcpy(py, &q, 1); break; }
            }
        }
        kern__gx_next(nd, y->shape, idx);
    }
}

static void kern__gx_softmax(const kern__gex *e, int64_t lo, int64_t hi, float *scr) {
    const kern_tensor *y = &e->yv, *a = &e->b0;
    const char *pa0 = (const char *)e->x[0]->data;
    char *py0 = (char *)e->yt->data;
    int nd = y->ndim;
    int64_t idx[KERN_MAX_DIMS], r, j, n = e->inner;
    size_t ey = kern_dtype_size(y->dtype), ea = kern_dtype_size(a->dtype);
    memset(idx, 0, sizeof idx);
    kern__gx_unravel(nd, y->shape, lo, idx);
    for (r = lo; r < hi; r++) {
        int64_t oy = kern__gx_off(nd, idx, y->stride), oa = kern__gx_off(nd, idx, a->stride);
        float mx = -INFINITY, sum = 0, inv;
        kern__gx_load(a->dtype, pa0 + oa * (int64_t)ea, a->stride[nd - 1], n, scr);
        for (j = 0; j < n; j++) mx = scr[j] > mx ? scr[j] : mx;
        for (j = 0; j < n; j++) {
            scr[j] = mx == -INFINITY ? 0.0f : expf(scr[j] - mx);
            sum += scr[j];
        }
        inv = sum > 0 ? 1.0f / sum : 0.0f;
        for (j = 0; j < n; j++) scr[j] *= inv;
        kern__gx_store(y->dtype, py0 + oy * (int64_t)ey, y->stride[nd - 1], n, scr);
        kern__gx_next(nd, y->shape, idx);
    }
}

static void kern__gx_reduce(const kern__gex *e, int64_t lo, int64_t hi, float *scr) {
    const kern_tensor *y = &e->yv, *a = e->x[0];
    const char *pa0 = (const char *)a->data;
    char *py0 = (char *)e->yt->data;
    int nd = a->ndim;
    int64_t idx[KERN_MAX_DIMS], r, j, n = a->shape[nd - 1], sa = a->stride[nd - 1];
    size_t ea = kern_dtype_size(a->dtype), ey = kern_dtype_size(y->dtype);
    memset(idx, 0, sizeof idx);
    kern__gx_unravel(nd, a->shape, lo, idx);
    for (r = lo; r < hi; r++) {
        int64_t oa = kern__gx_off(nd, idx, a->stride), oy = kern__gx_off(nd, idx, y->stride);
        double acc = 0;
        float v;
        for (j = 0; j < n; j += KERN__GX_BLK) {
            int64_t m = n - j < KERN__GX_BLK ? n - j : KERN__GX_BLK, k;
            kern__gx_load(a->dtype, pa0 + (oa + j * sa) * (int64_t)ea, sa, m, scr);
            for (k = 0; k < m; k++) acc += scr[k];
        }
        v = (float)(e->op == KERN_GRAPH_OP_REDUCE_MEAN ? acc / (double)(n ? n : 1) : acc);
        kern__gx_store(y->dtype, py0 + oy * (int64_t)ey, 1, 1, &v);
        kern__gx_next(nd, a->shape, idx);
    }
}

static void kern__gx_embedding(const kern__gex *e, int64_t lo, int64_t hi, float *scr) {
    const kern_tensor *ids = e->x[0], *t = e->x[1], *y = &e->yv;
    char *py0 = (char *)e->yt->data;
    int nd = ids->ndim + 1; /* unravel over the ids' dims via a padded shape */
    int64_t shp[KERN_MAX_DIMS], idx[KERN_MAX_DIMS], r, h = t->shape[1];
    size_t es = kern_dtype_size(t->dtype);
    int d;
    for (d = 0; d < ids->ndim; d++) shp[d] = ids->shape[d];
    shp[ids->ndim] = 1;
    memset(idx, 0, sizeof idx);
    kern__gx_unravel(nd, shp, lo, idx);
    for (r = lo; r < hi; r++) {
        int64_t off = 0, id;
        const char *src;
        char *dst = py0 + r * h * (int64_t)kern_dtype_size(y->dtype);
        for (d = 0; d < ids->ndim; d++) off += idx[d] * ids->stride[d];
        if (ids->dtype == KERN_I64) memcpy(&id, (const char *)ids->data + off * 8, 8);
        else {
            int32_t q;
            memcpy(&q, (const char *)ids->data + off * 4, 4);
            id = q;
        }
        if (id < 0 || id >= e->limit) {
            int64_t want = r + 1, cur = *e->err;
            while ((cur == 0 || want < cur) &&
                   !__atomic_compare_exchange_n(e->err, &cur, want, 0, __ATOMIC_RELAXED,
                                                __ATOMIC_RELAXED)) {
            }
            kern__gx_next(nd, shp, idx);
            continue;
        }
        src = (const char *)t->data + id * t->stride[0] * (int64_t)es;
        if (t->stride[1] == 1 && t->dtype == y->dtype) {
            memcpy(dst, src, (size_t)h * es);
        } else {
            int64_t j;
            for (j = 0; j < h; j += KERN__GX_BLK) {
                int64_t m = h - j < KERN__GX_BLK ? h - j : KERN__GX_BLK;
                kern__gx_load(t->dtype, src + j * t->stride[1] * (int64_t)es, t->stride[1], m, scr);
                kern__gx_store(y->dtype, dst + j * (int64_t)kern_dtype_size(y->dtype), 1, m, scr);
            }
        }
        kern__gx_next(nd, shp, idx);
    }
}

/* concat: unit = one row (last dim) of one input */
static void kern__gx_concat(const kern__gex *e, int64_t lo, int64_t hi, float *scr) {
    int64_t r;
    char *py0 = (char *)e->yt->data;
    const kern_tensor *y = &e->yv;
    (void)scr;
    for (r = lo; r < hi; r++) {
        int64_t rr = r, idx[KERN_MAX_DIMS], oa, oy, j, n;
        int i;
        const kern_tensor *a;
        size_t es;
        for (i = 0; i < e->n_x; i++) {
            const kern_tensor *xi = e->x[i];
            int64_t k, rows = 1;
            for (k = 0; k < xi->ndim - 1; k++) rows *= xi->shape[k];
            if (rr < rows) break;
            rr -= rows;
        }
        if (i >= e->n_x) return;
        a = e->x[i];
        es = kern_dtype_size(a->dtype);
        memset(idx, 0, sizeof idx);
        kern__gx_unravel(a->ndim, a->shape, rr, idx);
        oa = kern__gx_off(a->ndim, idx, a->stride);
        oy = kern__gx_off(a->ndim, idx, y->stride) + e->poff[i];
        n = a->shape[a->ndim - 1];
        {
            const char *pa = (const char *)a->data + oa * (int64_t)es;
            char *py = py0 + oy * (int64_t)es;
            int64_t sa = a->stride[a->ndim - 1], sy = y->stride[y->ndim - 1];
            if (sa == 1 && sy == 1) memcpy(py, pa, (size_t)n * es);
            else
                for (j = 0; j < n; j++)
                    memcpy(py + j * sy * (int64_t)es, pa + j * sa * (int64_t)es, es);
        }
    }
}

/* ====================================================== family calls
 * Every call into a kernel family is here, one case per op: adapting to a
 * family's new signature is local to this function. */

/* The operands of a linear as kern_gemm takes them: x and y flattened to
 * 2-D when their leading dims collapse (one GEMM of M = rows instead of a
 * batch of small ones), residual likewise. */
typedef struct kern__glin {
    kern_tensor x, y, res;
    const kern_tensor *resp;
} kern__glin;
static void kern__g_lin_args(const kern_tensor *x, const kern_tensor *y, const kern_tensor *res,
                             kern__glin *o) {
    kern_tensor x2, y2, r2;
    o->x = *x;
    o->y = *y;
    o->resp = res;
    if (x->ndim > 2 && kern__g_flatten2(x, &x2) && kern__g_flatten2(y, &y2)) {
        if (!res || res->ndim <= 1) {
            o->x = x2;
            o->y = y2;
        } else if (res->ndim == y->ndim && kern__g_flatten2(res, &r2)) {
            int d, same = 1;
            for (d = 0; d < y->ndim; d++) same &= res->shape[d] == y->shape[d];
            if (same) {
                o->x = x2;
                o->y = y2;
                o->res = r2;
                o->resp = &o->res;
            }
        }
    }
}

static void kern__g_gemm_params(const kern__gnode *n, const kern__gstep *st, const kern_tensor *T,
                                kern__glin *la, kern_gemm_params *gp) {
    memset(gp, 0, sizeof *gp);
    gp->trans_a = n->op == KERN_GRAPH_OP_MATMUL ? n->a.trans_a : 0;
    gp->trans_b = n->op == KERN_GRAPH_OP_MATMUL ? n->a.trans_b : 1;
    gp->alpha_set = n->a.alpha_set;
    gp->alpha = n->a.alpha;
    gp->epilogue.bias = n->in[2] ? &T[n->in[2]] : NULL;
    gp->epilogue.act = n->a.act;
    gp->epilogue.residual = la->resp;
    gp->epilogue.out_scale = n->a.out_scale;
    gp->epilogue.glu = n->a.glu; /* of the gemm family only linear takes the attribute */
    gp->packed_b = st->pb;
}

/* Decode-sized linears. A linear whose x has at most KERN__G_GEMV_M rows
 * at the plan's bound keeps its weight as bound ([N, K], F.linear's layout;
 * no prepacked copy) and runs kern_linear_gemv, which streams that weight
 * once per call whatever the row count up to 8; a larger bound prepacks for
 * kern_gemm as before (and its runs at M <= 8 stay on kern_gemm's packed
 * panels). One form of each weight either way. A matmul against a 2-D b
 * (x @ W with W [K, N], as GPT-2's Conv1D and ONNX exports store
 * weights) takes the same path at runs of at most 8 rows: a's leading
 * dims flatten into rows and kern_linear_gemv reads b through its
 * transpose, N-contiguous (trans_b: b is [N, K] as it is). */
#define KERN__G_GEMV_M 8
static int kern__g_gemv_dt(kern_dtype dt) {
    return dt == KERN_F32 || dt == KERN_BF16 || dt == KERN_F16;
}
/* The node allows the GEMV (op, dtypes, alpha); the shapes are checked per
 * run. */
static int kern__g_gemv_node(const kern__gnode *n, const kern_tensor *w) {
    if ((n->op != KERN_GRAPH_OP_LINEAR && n->op != KERN_GRAPH_OP_MATMUL) || n->a.trans_a) return 0;
    if (n->a.alpha_set && n->a.alpha != 1.0f) return 0;
    return w && w->ndim == 2 && kern__g_gemv_dt(w->dtype);
}
/* This run of a linear or matmul step (la: its x, y and residual as the
 * step passes them to kern_gemm) goes to kern_linear_gemv: then *o holds
 * them as rows (kern__g_lin_args: a linear's are already) and *wv the
 * weight as kern_linear_gemv reads it, [N, K]. The layout tests are
 * kern_linear_gemv's own, so a run sent there is never refused. */
static int kern__g_gemv_args(const kern__gnode *n, const kern__gstep *st, const kern__glin *la,
                             const kern_tensor *w, const kern_tensor *bias, kern__glin *o,
                             kern_tensor *wv) {
    const kern_tensor *r;
    int64_t K, N;
    int kmajor;
    if (st->pb || !kern__g_gemv_node(n, w)) return 0;
    kern__g_lin_args(&la->x, &la->y, la->resp, o);
    r = o->resp;
    *wv = *w;
    if (n->op == KERN_GRAPH_OP_MATMUL && !n->a.trans_b) {
        wv->shape[0] = w->shape[1];
        wv->shape[1] = w->shape[0];
        wv->stride[0] = w->stride[1];
        wv->stride[1] = w->stride[0];
    }
    if (o->x.ndim != 2 || o->y.ndim != 2 || o->x.shape[0] > KERN__G_GEMV_M) return 0;
    if (!kern__g_gemv_dt(o->x.dtype) || !kern__g_gemv_dt(o->y.dtype)) return 0;
    K = o->x.shape[1];
    N = wv->shape[0];
    kmajor = K > 1 && wv->stride[1] != 1;
    if (K > 1 && o->x.stride[1] != 1) return 0;
    if (kmajor && (wv->stride[1] < 0 || (N > 1 && wv->stride[0] != 1))) return 0;
    if (o->x.stride[0] < 0 || wv->stride[0] < 0) return 0;
    if (bias && bias->ndim != 1) return 0;
    if (r && (r->ndim != 2 || r->shape[0] != o->y.shape[0] || r->shape[1] != o->y.shape[1]))
        return 0;
    return 1;
}

/* The view of t's dims after its first `lead`, at index idx over those. */
static kern_tensor kern__g_trail(const kern_tensor *t, const int64_t *idx, int lead) {
    kern_tensor o = *t;
    int64_t off = 0;
    int d;
    for (d = 0; d < lead; d++) off += idx[d] * t->stride[d];
    o.ndim = t->ndim - lead;
    memset(o.shape, 0, sizeof o.shape);
    memset(o.stride, 0, sizeof o.stride);
    for (d = 0; d < o.ndim; d++) {
        o.shape[d] = t->shape[lead + d];
        o.stride[d] = t->stride[lead + d];
    }
    o.data = (char *)t->data + off * (int64_t)kern_dtype_size(t->dtype);
    return o;
}

/* argmax / topk over the last dim at any rank: one call on [R, V] views
 * when the leading dims flatten (always for the plan's own outputs), else
 * one call per [rows, V] slab of the last two dims. */
static kern_status kern__g_lastdim(kern_ctx *ctx, kern_graph_op op, const kern_tensor *x,
                                   const kern_tensor *y, const kern_tensor *y1) {
    kern_tensor xs, ys, is;
    int64_t idx[KERN_MAX_DIMS], n_outer = 1, o;
    int nd = x->ndim, lead = nd > 2 ? nd - 2 : 0, d, flat;
    kern_status st = KERN_OK;
    flat = kern__g_flatten2(x, &xs);
    if (op == KERN_GRAPH_OP_TOPK) {
        flat = flat && kern__g_flatten2(y, &ys) && kern__g_flatten2(y1, &is);
    } else {
        is = *y;
        is.ndim = 1;
        is.shape[0] = 1;
        for (d = 0; d < y->ndim; d++) is.shape[0] *= y->shape[d];
        if (y->ndim == 0) is.stride[0] = 1;
        else flat = flat && kern__g_view_strides(y->ndim, y->shape, y->stride, 1, is.shape, is.stride);
    }
    if (flat) return op == KERN_GRAPH_OP_TOPK ? kern_topk(ctx, &xs, &ys, &is) : kern_argmax(ctx, &xs, &is);
    /* nd > 2 here: slabs over the last two dims (argmax's y: its last one) */
    for (d = 0; d < lead; d++) n_outer *= x->shape[d];
    memset(idx, 0, sizeof idx);
    for (o = 0; o < n_outer && st == KERN_OK; o++, kern__gx_next(lead + 1, x->shape, idx)) {
        kern_tensor xv = kern__g_trail(x, idx, lead), yv = kern__g_trail(y, idx, lead);
        if (op == KERN_GRAPH_OP_TOPK) {
            kern_tensor iv = kern__g_trail(y1, idx, lead);
            st = kern_topk(ctx, &xv, &yv, &iv);
        } else {
            st = kern_argmax(ctx, &xv, &yv);
        }
    }
    return st;
}

/* A decode-attention node with a prompt's worth of new queries (prefill,
 * chunked prefill) runs as kern_sdpa on views of the same memory (q and
 * out [B, Lq, H, D] as [B, H, Lq, D], the caches [B, Lmax, Hkv, D] as
 * [B, Hkv, Lmax, D], k_lens, causal bottom right, GQA): the same
 * function (rows past k_lens[b] - Lq + l masked, zeros where none is
 * visible), with the sdpa family's bf16 tile products where
 * kern_decode_attention computes f32 dot products per row (its form is
 * built for a few queries streaming a long cache). No int8 cache; bf16
 * throughout on AMX tiles, or f32 throughout on an AVX-512 level; Lq >=
 * 16 and Lq x the longest sequence >= 32768. Xeon, 1 thread, H 16 / Hkv
 * 4, D 128, Lmax 4608, ms (decode attention -> sdpa), bf16: Lq 512 of
 * 512 15.2 -> 3.6, 128 of 128 1.30 -> 1.88 (so not there), 64 of 512
 * 3.48 -> 2.11, 16 of 1024 1.82 -> 0.82, 32 of 4096 13.6 -> 3.5; f32: 512
 * of 512 20.5 -> 11.4, 64 of 512 4.36 -> 3.77, 128 of 128 1.54 -> 2.66,
 * 32 of 4096 18.0 -> 9.4 (AVX2 unmeasured: not there). The size query
 * takes the larger of the two (k_lens' values are not known then). */
#ifndef KERN__G_DA_SDPA_LQ
#define KERN__G_DA_SDPA_LQ 16
#endif
#ifndef KERN__G_DA_SDPA_WORK
#define KERN__G_DA_SDPA_WORK 32768
#endif
static int kern__g_da_sdpa(kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k,
                           const kern_tensor *v, const kern_tensor *kl, const kern_tensor *ksc,
                           const kern_tensor *y, int64_t lmax, kern_tensor *q2, kern_tensor *k2,
                           kern_tensor *v2, kern_tensor *y2) {
    int64_t shp[4], str[4];
    kern_isa isa = kern_ctx_isa(ctx);
    kern_dtype dt = q->dtype;
    /* bf16 on the tiles; f32 on every AVX-512 level */
    int ok = dt == KERN_BF16 ? isa == KERN_ISA_AMX
             : dt == KERN_F32 ? isa >= KERN_ISA_AVX512 && isa < KERN_ISA_NEON
                              : 0;
    if (!ok || ksc || !kl || q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || y->ndim != 4 ||
        k->dtype != dt || v->dtype != dt || y->dtype != dt || q->shape[1] < KERN__G_DA_SDPA_LQ ||
        (double)q->shape[1] * (double)lmax < KERN__G_DA_SDPA_WORK)
        return 0;
#define KERN__G_DA_VIEW(dst, t)                                                 \
    shp[0] = t->shape[0]; shp[1] = t->shape[2]; shp[2] = t->shape[1]; shp[3] = t->shape[3]; \
    str[0] = t->stride[0]; str[1] = t->stride[2]; str[2] = t->stride[1]; str[3] = t->stride[3]; \
    if (kern_tensor_init_strided(dst, t->data, t->dtype, 4, shp, str) != KERN_OK) return 0;
    KERN__G_DA_VIEW(q2, q)
    KERN__G_DA_VIEW(k2, k)
    KERN__G_DA_VIEW(v2, v)
    KERN__G_DA_VIEW(y2, y)
#undef KERN__G_DA_VIEW
    return 1;
}

/* Runs one family step with the plan's workspace (ws, ws_size; NULL = the
 * context's scratch). With query != NULL it runs nothing and writes the
 * scratch bytes the call would take instead (0 when the op takes no
 * caller workspace); operands without memory yet (graph inputs and
 * outputs at plan time) get distinct, never-dereferenced addresses, since
 * the sizes depend on shapes only. Linear/matmul are sized by
 * kern__gfam_gemm_ws (cached per shape). */
static kern_status kern__gfam_run(kern_graph_plan *p, const kern__gstep *st, const kern_tensor *T,
                                  void *ws, size_t ws_size, size_t *query) {
    const kern__gnode *n = &p->w.nodes[st->node];
    kern_ctx *ctx = p->ctx;
    const kern_tensor *in_[KERN_GRAPH_MAX_INPUTS], *y = &T[n->out[0]];
    const kern_tensor *y1 = n->n_out > 1 ? &T[n->out[1]] : NULL;
    kern_tensor loc[KERN_GRAPH_MAX_INPUTS + 2];
    int k;
#define KERN__GT(k) (in_[k])
    for (k = 0; k < KERN_GRAPH_MAX_INPUTS; k++) in_[k] = n->in[k] ? &T[n->in[k]] : NULL;
    if (query) {
        *query = 0;
        for (k = 0; k < KERN_GRAPH_MAX_INPUTS + 2; k++) {
            const kern_tensor **tp = k < KERN_GRAPH_MAX_INPUTS ? &in_[k]
                                     : k == KERN_GRAPH_MAX_INPUTS ? &y : &y1;
            if (!*tp || (*tp)->data) continue;
            loc[k] = **tp;
            loc[k].data = (void *)(uintptr_t)(((uint64_t)k + 1) << 40);
            *tp = &loc[k];
        }
    }
    switch (n->op) {
    case KERN_GRAPH_OP_LINEAR: case KERN_GRAPH_OP_MATMUL: {
        kern__glin la;
        kern_gemm_params gp;
        if (n->op == KERN_GRAPH_OP_LINEAR) {
            kern__g_lin_args(KERN__GT(0), y, KERN__GT(3), &la);
        } else {
            la.x = *KERN__GT(0);
            la.y = *y;
            la.resp = KERN__GT(3);
        }
        if (query) return KERN_OK; /* sized by kern__gfam_gemm_ws */
        {
            kern__glin lv;
            kern_tensor wv;
            if (kern__g_gemv_args(n, st, &la, KERN__GT(1), KERN__GT(2), &lv, &wv)) {
                kern_gemv_params vp;
                memset(&vp, 0, sizeof vp);
                vp.epilogue.bias = KERN__GT(2);
                vp.epilogue.act = n->a.act;
                vp.epilogue.residual = lv.resp;
                vp.epilogue.out_scale = n->a.out_scale;
                vp.epilogue.glu = n->a.glu;
                return kern_linear_gemv(ctx, &lv.x, &wv, &lv.y, &vp);
            }
        }
        kern__g_gemm_params(n, st, T, &la, &gp);
        gp.workspace = ws;
        gp.workspace_size = ws ? ws_size : 0;
        return kern_gemm(ctx, &la.x, st->pb ? NULL : KERN__GT(1), &la.y, &gp);
    }
    case KERN_GRAPH_OP_SDPA: {
        kern_sdpa_params sp;
        memset(&sp, 0, sizeof sp);
        sp.attn_mask = KERN__GT(3);
        sp.k_lens = KERN__GT(4);
        sp.is_causal = n->a.is_causal;
        sp.causal_bottom_right = n->a.causal_bottom_right;
        sp.scale = n->a.scale;
        sp.enable_gqa = n->a.enable_gqa;
        sp.softcap = n->a.softcap;
        sp.window_set = n->a.window_set;
        sp.window_left = n->a.window_left;
        sp.window_right = n->a.window_right;
        if (query) {
            sp.k_lens = NULL; /* its values are checked; the size does not depend on it */
            return kern_sdpa_workspace_size(ctx, KERN__GT(0), KERN__GT(1), KERN__GT(2), y, &sp, query);
        }
        sp.workspace = ws;
        sp.workspace_size = ws ? ws_size : 0;
        return kern_sdpa(ctx, KERN__GT(0), KERN__GT(1), KERN__GT(2), y, &sp);
    }
    case KERN_GRAPH_OP_SDPA_RELPOS: {
        kern_sdpa_params sp;
        memset(&sp, 0, sizeof sp);
        sp.scale = n->a.scale;
        sp.rel_pos_h = KERN__GT(3);
        sp.rel_pos_w = KERN__GT(4);
        sp.rel_q_h = sp.rel_k_h = (KERN__GT(3)->shape[0] + 1) / 2;
        sp.rel_q_w = sp.rel_k_w = (KERN__GT(4)->shape[0] + 1) / 2;
        if (query) return kern_sdpa_workspace_size(ctx, KERN__GT(0), KERN__GT(1), KERN__GT(2), y, &sp, query);
        sp.workspace = ws;
        sp.workspace_size = ws ? ws_size : 0;
        return kern_sdpa(ctx, KERN__GT(0), KERN__GT(1), KERN__GT(2), y, &sp);
    }
    case KERN_GRAPH_OP_LAYER_NORM: case KERN_GRAPH_OP_RMS_NORM: {
        kern_norm_params np;
        memset(&np, 0, sizeof np);
        np.norm = n->op == KERN_GRAPH_OP_RMS_NORM ? KERN_NORM_RMS : KERN_NORM_LAYER;
        np.act = n->a.act;
        np.weight = KERN__GT(1);
        np.bias = KERN__GT(2);
        np.residual = KERN__GT(3);
        np.residual_out = y1;
        np.eps = n->a.eps;
        np.eps_set = n->a.eps_set;
        if (query) return kern_norm_workspace_size(ctx, KERN__GT(0), y, &np, query);
        np.workspace = ws;
        np.workspace_size = ws ? ws_size : 0;
        return kern_norm(ctx, KERN__GT(0), y, &np);
    }
    case KERN_GRAPH_OP_QLINEAR: {
        kern__glin la;
        kern_qlinear_params qp;
        kern__g_lin_args(KERN__GT(0), y, KERN__GT(4), &la);
        if (la.x.ndim != 2) return kern__err(KERN_ERR_LAYOUT, "x does not flatten to 2-D");
        memset(&qp, 0, sizeof qp);
        qp.epilogue.bias = KERN__GT(3);
        qp.epilogue.act = n->a.act;
        qp.epilogue.glu = n->a.glu;
        qp.epilogue.residual = la.resp;
        if (query) return kern_qlinear_workspace_size(ctx, &la.x, st->qw, &la.y, &qp, query);
        qp.workspace = ws;
        qp.workspace_size = ws ? ws_size : 0;
        return kern_qlinear(ctx, &la.x, st->qw, &la.y, &qp);
    }
    case KERN_GRAPH_OP_QUANTIZE_PER_TOKEN:
    {
        kern_quant_params qp;
        memset(&qp, 0, sizeof qp);
        if (query) return kern_quantize_per_token_workspace_size(ctx, KERN__GT(0), y, y1, &qp, query);
        qp.workspace = ws;
        qp.workspace_size = ws ? ws_size : 0;
        return kern_quantize_per_token(ctx, KERN__GT(0), y, y1, &qp);
    }
    case KERN_GRAPH_OP_SPARSE24_LINEAR: {
        kern__glin la;
        kern_sparse24_linear_params sp;
        kern__g_lin_args(KERN__GT(0), y, KERN__GT(3), &la);
        if (la.x.ndim != 2) return kern__err(KERN_ERR_LAYOUT, "x does not flatten to 2-D");
        if (st->pb) { /* expanded at plan time (AMX): the dense tile GEMM */
            kern_gemm_params gp;
            kern__g_gemm_params(n, st, T, &la, &gp);
            if (query) return kern_gemm_workspace_size(ctx, &la.x, NULL, &la.y, &gp, query);
            gp.workspace = ws;
            gp.workspace_size = ws ? ws_size : 0;
            return kern_gemm(ctx, &la.x, NULL, &la.y, &gp);
        }
        memset(&sp, 0, sizeof sp);
        sp.epilogue.bias = KERN__GT(2);
        sp.epilogue.act = n->a.act;
        sp.epilogue.residual = la.resp;
        if (query) return kern_sparse24_linear_workspace_size(ctx, &la.x, st->sw, &la.y, &sp, query);
        sp.workspace = ws;
        sp.workspace_size = ws ? ws_size : 0;
        return kern_sparse24_linear(ctx, &la.x, st->sw, &la.y, &sp);
    }
    case KERN_GRAPH_OP_SCATTER_REDUCE: {
        /* scatter and spmm keep the context's scratch: their sizes come from
         * the index data, which a plan does not have */
        const kern_tensor *self = KERN__GT(0);
        if (query) return KERN_OK;
        int dim = (int)(n->a.axis < 0 ? n->a.axis + self->ndim : n->a.axis);
        return kern_scatter_reduce(ctx, self, dim, KERN__GT(1), KERN__GT(2), n->a.reduce,
                                   n->a.include_self, y, NULL, NULL);
    }
    case KERN_GRAPH_OP_SPMM_REDUCE: {
        kern_csr a;
        const kern_tensor *rp = KERN__GT(0), *col = KERN__GT(1), *val = KERN__GT(2);
        const kern_tensor *x = KERN__GT(3);
        if (query) return KERN_OK;
        if (!kern_tensor_is_contiguous(rp) || !kern_tensor_is_contiguous(col) ||
            (val && !kern_tensor_is_contiguous(val)))
            return kern__err(KERN_ERR_LAYOUT, "rowptr, col and values must be contiguous");
        memset(&a, 0, sizeof a);
        a.nrows = rp->shape[0] - 1;
        a.ncols = x->shape[0];
        a.nnz = col->shape[0];
        a.rowptr = rp->data;
        a.col = col->data;
        a.values = val ? val->data : NULL;
        a.index_dtype = rp->dtype;
        a.value_dtype = val ? val->dtype : KERN_F32;
        return kern_spmm_reduce(ctx, &a, x, y, n->a.reduce, NULL, NULL);
    }
    case KERN_GRAPH_OP_ROPE: {
        kern_rope_params rp;
        if (query) return KERN_OK; /* with a table: no scratch */
        memset(&rp, 0, sizeof rp);
        rp.style = n->a.interleaved ? KERN_ROPE_INTERLEAVED : KERN_ROPE_HALF;
        rp.table = KERN__GT(1);
        rp.offsets = KERN__GT(2);
        return kern_rope(ctx, KERN__GT(0), y, &rp);
    }
    case KERN_GRAPH_OP_ARGMAX: case KERN_GRAPH_OP_TOPK:
        if (query) return KERN_OK; /* no scratch */
        return kern__g_lastdim(ctx, n->op, KERN__GT(0), y, y1);
    case KERN_GRAPH_OP_SILU_MUL:
        if (query) return KERN_OK;
        return kern_silu_mul(ctx, KERN__GT(0), KERN__GT(1), y);
    case KERN_GRAPH_OP_KV_APPEND: {
        /* the output starts as k_lens and is advanced by the append */
        const kern_tensor *kl = KERN__GT(4);
        size_t es = kern_dtype_size(kl->dtype);
        int64_t b;
        if (query) return KERN_OK;
        for (b = 0; b < kl->shape[0]; b++)
            memcpy((char *)y->data + b * y->stride[0] * (int64_t)es,
                   (const char *)kl->data + b * kl->stride[0] * (int64_t)es, es);
        {
            kern_kv_append_params ap;
            ap.k_scale = KERN__GT(5);
            ap.v_scale = KERN__GT(6);
            return kern_kv_append_ex(ctx, KERN__GT(0), KERN__GT(1), KERN__GT(2), KERN__GT(3), y, &ap);
        }
    }
    case KERN_GRAPH_OP_DECODE_ATTENTION: {
        kern_decode_attention_params dp;
        kern_sdpa_params sp;
        kern_tensor q2, k2, v2, y2;
        const kern_tensor *kl = KERN__GT(3);
        int64_t lmax = KERN__GT(1)->shape[1], b;
        memset(&dp, 0, sizeof dp);
        dp.scale = n->a.scale;
        dp.k_scale = KERN__GT(4);
        dp.v_scale = KERN__GT(5);
        memset(&sp, 0, sizeof sp);
        sp.scale = n->a.scale;
        sp.causal_bottom_right = 1;
        sp.enable_gqa = 1;
        if (query) {
            kern_status qs = kern_decode_attention_workspace_size(ctx, KERN__GT(0), KERN__GT(1),
                                                                  KERN__GT(2), kl, y, &dp, query);
            size_t s2 = 0;
            if (qs == KERN_OK && kern__g_da_sdpa(ctx, KERN__GT(0), KERN__GT(1), KERN__GT(2), kl,
                                                 KERN__GT(4), y, lmax, &q2, &k2, &v2, &y2) &&
                kern_sdpa_workspace_size(ctx, &q2, &k2, &v2, &y2, &sp, &s2) == KERN_OK && s2 > *query)
                *query = s2;
            return qs;
        }
        if (kl && kl->ndim == 1 && (kl->dtype == KERN_I32 || kl->dtype == KERN_I64)) {
            /* the longest sequence after the append (a bad length is the
             * family call's error, with its message) */
            lmax = 0;
            for (b = 0; b < kl->shape[0]; b++) {
                int64_t len = kern__llm_ix(kl, b);
                if (len > lmax) lmax = len;
            }
        }
        if (lmax <= KERN__GT(1)->shape[1] &&
            kern__g_da_sdpa(ctx, KERN__GT(0), KERN__GT(1), KERN__GT(2), kl, KERN__GT(4), y, lmax, &q2,
                            &k2, &v2, &y2)) {
            sp.k_lens = kl;
            sp.workspace = ws;
            sp.workspace_size = ws ? ws_size : 0;
            return kern_sdpa(ctx, &q2, &k2, &v2, &y2, &sp);
        }
        dp.workspace = ws;
        dp.workspace_size = ws ? ws_size : 0;
        return kern_decode_attention(ctx, KERN__GT(0), KERN__GT(1), KERN__GT(2), KERN__GT(3), y, &dp);
    }
    default:
        return kern__err(KERN_ERR_UNSUPPORTED, "op %s has no family call", kern_graph_op_name(n->op));
    }
#undef KERN__GT
}

/* Scratch a family step needs (0 if none or unknown). Linear/matmul:
 * layers repeat, so the answer is cached per (op, shapes, strides, flags);
 * the other families answer from their _workspace_size. */
static size_t kern__gfam_gemm_ws_q(kern_graph_plan *p, const kern__gstep *st, const kern_tensor *T);
/* 1 if family nodes a and b ask the same of their kernel: op, attributes
 * and, slot by slot, tensors of the same dtype, shape and strides, with
 * or without memory alike, equally aligned and sharing memory alike (a
 * node repeated layer after layer). Then their workspace sizes are equal. */
static int kern__gfam_same(const kern__gnode *a, const kern__gnode *b, const kern_tensor *T) {
    enum { NS = KERN_GRAPH_MAX_INPUTS + KERN_GRAPH_MAX_OUTPUTS };
    const kern_tensor *ta[NS], *tb[NS];
    int i, j;
    if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out ||
        memcmp(&a->a, &b->a, sizeof a->a) != 0)
        return 0;
    for (i = 0; i < NS; i++) {
        kern_graph_val va = i < KERN_GRAPH_MAX_INPUTS ? a->in[i] : a->out[i - KERN_GRAPH_MAX_INPUTS];
        kern_graph_val vb = i < KERN_GRAPH_MAX_INPUTS ? b->in[i] : b->out[i - KERN_GRAPH_MAX_INPUTS];
        const kern_tensor *x, *y;
        if (!va != !vb) return 0;
        ta[i] = tb[i] = NULL;
        if (!va) continue;
        x = ta[i] = &T[va];
        y = tb[i] = &T[vb];
        if (x->dtype != y->dtype || x->ndim != y->ndim || !x->data != !y->data ||
            ((uintptr_t)x->data & 63) != ((uintptr_t)y->data & 63) ||
            memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim) != 0 ||
            memcmp(x->stride, y->stride, sizeof(int64_t) * (size_t)x->ndim) != 0)
            return 0;
    }
    for (i = 0; i < NS; i++)
        for (j = i + 1; j < NS; j++)
            if (ta[i] && ta[j] && ta[i]->data &&
                (ta[i]->data == ta[j]->data) != (tb[i]->data == tb[j]->data))
                return 0;
    return 1;
}

static size_t kern__gfam_ws(kern_graph_plan *p, const kern__gstep *st, const kern_tensor *T) {
    const kern__gnode *n = &p->w.nodes[st->node];
    kern__gwskey k;
    int i, j = 0, d;
    size_t bytes;
    if (n->op != KERN_GRAPH_OP_LINEAR && n->op != KERN_GRAPH_OP_MATMUL) {
        for (i = 0; i < p->n_wsn; i++)
            if (kern__gfam_same(&p->w.nodes[p->wsn_node[i]], n, T)) return p->wsn_val[i];
        bytes = 0;
        if (kern__gfam_run(p, st, T, NULL, 0, &bytes)) return 0;
        if (p->n_wsn < (int)(sizeof p->wsn_val / sizeof p->wsn_val[0])) {
            p->wsn_node[p->n_wsn] = st->node;
            p->wsn_val[p->n_wsn++] = bytes;
        }
        return bytes;
    }
    memset(&k, 0, sizeof k);
    k.v[j++] = n->op;
    k.v[j++] = (n->a.trans_a << 4) | (n->a.trans_b << 3) | ((st->pb != NULL) << 2) |
               ((n->in[2] != 0) << 1) | (n->in[3] != 0);
    k.v[j++] = n->a.act;
    for (i = 0; i < 2; i++) {
        const kern_tensor *t = &T[i == 0 ? n->in[0] : n->out[0]];
        k.v[j++] = t->ndim | (int64_t)t->dtype << 8;
        for (d = 0; d < t->ndim && j < 22; d++) k.v[j++] = t->shape[d] * 1000003 + t->stride[d];
    }
    if (j < 23) k.v[j++] = n->in[1] ? T[n->in[1]].shape[0] * 1000003 + T[n->in[1]].shape[T[n->in[1]].ndim - 1] : 0;
    for (i = 0; i < p->n_wsc; i++)
        if (memcmp(&p->wsc_key[i], &k, sizeof k) == 0) return p->wsc_val[i];
    bytes = kern__gfam_gemm_ws_q(p, st, T);
    if (p->n_wsc < (int)(sizeof p->wsc_val / sizeof p->wsc_val[0])) {
        p->wsc_key[p->n_wsc] = k;
        p->wsc_val[p->n_wsc++] = bytes;
    }
    return bytes;
}

static size_t kern__gfam_gemm_ws_q(kern_graph_plan *p, const kern__gstep *st, const kern_tensor *T) {
    const kern__gnode *n = &p->w.nodes[st->node];
    kern__glin la;
    kern_gemm_params gp;
    kern_tensor t[4];
    size_t bytes = 0;
    int k;
    if (n->op != KERN_GRAPH_OP_LINEAR && n->op != KERN_GRAPH_OP_MATMUL) return 0;
    /* graph inputs and outputs have no memory yet: the size depends on the
     * shapes only, so give them distinct, never-dereferenced addresses */
    for (k = 0; k < 4; k++) {
        kern_graph_val v = k == 3 ? n->out[0] : n->in[k == 2 ? 3 : k];
        if (!v) continue;
        t[k] = T[v];
        if (!t[k].data) t[k].data = (void *)(uintptr_t)(((uint64_t)k + 1) << 40);
    }
    if (n->op == KERN_GRAPH_OP_LINEAR) {
        kern__g_lin_args(&t[0], &t[3], n->in[3] ? &t[2] : NULL, &la);
    } else {
        la.x = t[0];
        la.y = t[3];
        la.resp = n->in[3] ? &t[2] : NULL;
    }
    {
        kern__glin lv;
        kern_tensor wv;
        if (kern__g_gemv_args(n, st, &la, &t[1], n->in[2] ? &T[n->in[2]] : NULL, &lv, &wv))
            return 0; /* kern_linear_gemv takes no workspace */
    }
    kern__g_gemm_params(n, st, T, &la, &gp);
    if (kern_gemm_workspace_size(p->ctx, &la.x, st->pb ? NULL : &t[1], &la.y, &gp, &bytes))
        return 0;
    return bytes;
}

/* FLOPs and bytes of a step, for the profile. */
static void kern__g_cost(const kern_graph_plan *p, const kern__gstep *st, const kern_tensor *T,
                         double *flops, double *bytes) {
    const kern__gnode *n = &p->w.nodes[st->node];
    int k;
    double b = 0, f = 0;
    for (k = 0; k < KERN_GRAPH_MAX_INPUTS; k++)
        if (n->in[k]) b += (double)kern_tensor_numel(&T[n->in[k]]) * (double)kern_dtype_size(T[n->in[k]].dtype);
    for (k = 0; k < n->n_out; k++)
        b += (double)kern_tensor_numel(&T[n->out[k]]) * (double)kern_dtype_size(T[n->out[k]].dtype);
    switch (n->op) {
    case KERN_GRAPH_OP_LINEAR: case KERN_GRAPH_OP_QLINEAR: case KERN_GRAPH_OP_SPARSE24_LINEAR: {
        const kern_tensor *w = &T[n->in[1]];
        f = 2.0 * (double)kern_tensor_numel(&T[n->out[0]]) * (double)w->shape[1];
        if (n->op == KERN_GRAPH_OP_SPARSE24_LINEAR) f *= 0.5;
        break;
    }
    case KERN_GRAPH_OP_MATMUL: {
        const kern_tensor *a = &T[n->in[0]];
        f = 2.0 * (double)kern_tensor_numel(&T[n->out[0]]) *
            (double)(n->a.trans_a ? a->shape[a->ndim - 2] : a->shape[a->ndim - 1]);
        break;
    }
    case KERN_GRAPH_OP_SDPA: case KERN_GRAPH_OP_SDPA_RELPOS: {
        const kern_tensor *q = &T[n->in[0]], *kk = &T[n->in[1]], *v = &T[n->in[2]];
        f = 2.0 * (double)q->shape[0] * (double)q->shape[1] * (double)q->shape[2] *
            (double)kk->shape[2] * (double)(q->shape[3] + v->shape[3]);
        if (n->a.is_causal || n->a.causal_bottom_right) f *= 0.5;
        break;
    }
    default:
        f = (double)kern_tensor_numel(&T[n->out[0]]);
        break;
    }
    *flops = f;
    *bytes = b;
}

/* ======================================================= memory plan */

/* Offsets for n buffers (size, live over steps [first, last]) so that no
 * two buffers live at the same step overlap. Greedy by size with best fit
 * (each buffer, largest first, goes into the smallest gap among the
 * buffers already placed that overlap it in time) or first fit, tried
 * with four orders (size, size x lifetime, lifetime, size class then
 * first use); the smallest arena wins, stopping early at the max-live
 * lower bound. Returns the arena size (0 and *ok = 0
 * on allocation failure). */
typedef struct kern__gmb {
    size_t size, off;
    int32_t first, last, id;
} kern__gmb;

static int kern__gmb_by_size(const void *a, const void *b) {
    const kern__gmb *x = (const kern__gmb *)a, *y = (const kern__gmb *)b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (x->last - x->first != y->last - y->first) return x->last - x->first > y->last - y->first ? -1 : 1;
    return x->id - y->id;
}
static int kern__gmb_by_len(const void *a, const void *b) {
    const kern__gmb *x = (const kern__gmb *)a, *y = (const kern__gmb *)b;
    if (x->last - x->first != y->last - y->first) return x->last - x->first > y->last - y->first ? -1 : 1;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    return x->id - y->id;
}
static int kern__gmb_by_area(const void *a, const void *b) {
    const kern__gmb *x = (const kern__gmb *)a, *y = (const kern__gmb *)b;
    double ax = (double)x->size * (double)(x->last - x->first + 1);
    double ay = (double)y->size * (double)(y->last - y->first + 1);
    if (ax != ay) return ax > ay ? -1 : 1;
    return x->id - y->id;
}

static int kern__gmb_log2(size_t v) {
    int k = 0;
    while (v > 1) { v >>= 1; k++; }
    return k;
}
/* size class (powers of two) first, then earlier first use */
static int kern__gmb_by_class(const void *a, const void *b) {
    const kern__gmb *x = (const kern__gmb *)a, *y = (const kern__gmb *)b;
    int cx = kern__gmb_log2(x->size), cy = kern__gmb_log2(y->size);
    if (cx != cy) return cx > cy ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->id - y->id;
}

static size_t kern__g_place(kern__gmb *b, int64_t n, int32_t *placed, int first_fit) {
    int64_t i, np = 0, k;
    size_t total = 0;
    int32_t *live = placed + n; /* the placed blocks whose lifetimes meet b[i]'s */
    for (i = 0; i < n; i++) {
        size_t best = (size_t)-1, best_off = 0, prev_end = 0;
        int found = 0;
        int64_t nl = 0, j;
        const int32_t fi = b[i].first, la = b[i].last;
        for (k = 0; k < np; k++) { /* without branches: which ones meet is data */
            const kern__gmb *q = &b[placed[k]];
            live[nl] = placed[k];
            nl += (q->last >= fi) & (q->first <= la);
        }
        for (j = 0; j < nl; j++) { /* placed[] is sorted by offset, so is live[] */
            const kern__gmb *q = &b[live[j]];
            if (q->off >= prev_end && q->off - prev_end >= b[i].size && q->off - prev_end < best &&
                !(first_fit && found)) {
                best = q->off - prev_end;
                best_off = prev_end;
                found = 1;
            }
            if (q->off + q->size > prev_end) prev_end = q->off + q->size;
        }
        b[i].off = found ? best_off : prev_end;
        if (b[i].off + b[i].size > total) total = b[i].off + b[i].size;
        for (k = np; k > 0 && b[placed[k - 1]].off > b[i].off; k--) placed[k] = placed[k - 1];
        placed[k] = (int32_t)i;
        np++;
    }
    return total;
}

KERN_API size_t kern__g_memplan(kern_ctx *ctx, int64_t n, const size_t *size, const int32_t *first,
                                const int32_t *last, size_t lower_bound, size_t *off, int *ok) {
    kern__gmb *b;
    int32_t *placed;
    size_t best = (size_t)-1;
    int o;
    int64_t i;
    int (*orders[4])(const void *, const void *) = {kern__gmb_by_size, kern__gmb_by_area,
                                                    kern__gmb_by_len, kern__gmb_by_class};
    *ok = 1;
    if (n == 0) return 0;
    b = (kern__gmb *)kern__alloc(ctx, (size_t)n * sizeof *b);
    placed = (int32_t *)kern__alloc(ctx, (size_t)(2 * n) * sizeof *placed);
    if (!b || !placed) {
        kern__free(ctx, b);
        kern__free(ctx, placed);
        *ok = 0;
        return 0;
    }
    for (o = 0; o < 8; o++) {
        size_t total;
        for (i = 0; i < n; i++) {
            b[i].size = size[i];
            b[i].first = first[i];
            b[i].last = last[i];
            b[i].id = (int32_t)i;
            b[i].off = 0;
        }
        qsort(b, (size_t)n, sizeof *b, orders[o % 4]);
        total = kern__g_place(b, n, placed, o >= 4);
        if (total < best) {
            best = total;
            for (i = 0; i < n; i++) off[b[i].id] = b[i].off;
        }
        if (best <= lower_bound) break; /* optimal: nothing can do better */
    }
    kern__free(ctx, b);
    kern__free(ctx, placed);
    return best;
}

/* The most bytes live at one step. */
KERN_API size_t kern__g_maxlive(kern_ctx *ctx, int64_t n, const size_t *size, const int32_t *first,
                                const int32_t *last, int32_t n_steps) {
    int64_t *delta = (int64_t *)kern__alloc(ctx, (size_t)(n_steps + 2) * sizeof(int64_t));
    int64_t i, cur = 0, best = 0;
    if (!delta) return 0;
    memset(delta, 0, (size_t)(n_steps + 2) * sizeof(int64_t));
    for (i = 0; i < n; i++) {
        delta[first[i]] += (int64_t)size[i];
        delta[last[i] + 1] -= (int64_t)size[i];
    }
    for (i = 0; i <= n_steps; i++) {
        cur += delta[i];
        if (cur > best) best = cur;
    }
    kern__free(ctx, delta);
    return (size_t)best;
}

/* ======================================================= plan creation */

/* Shape of v from exv[] (every expression's value under the binding). */
static kern_status kern__gp_shape_ev(const kern_graph *w, kern_graph_val v, const int64_t *exv,
                                     kern_tensor *t) {
    const kern__gval *x = &w->vals[v];
    int i;
    int64_t s = 1;
    t->dtype = x->dtype;
    t->ndim = x->ndim;
    for (i = x->ndim - 1; i >= 0; i--) {
        int64_t d = x->dims[i];
        if (kern__gx_is_expr(d)) d = exv[kern__gx_index(d)];
        if (d < 0) {
            char s1[64];
            return kern__err(KERN_ERR_SHAPE, "kern_graph: value '%s': dim %d (%s) is %s under this binding",
                             w->str + x->name, i, kern_graph_dim_str(w, x->dims[i], s1, sizeof s1),
                             d == -1 && kern__gx_is_expr(x->dims[i]) ? "too large or negative" : "negative");
        }
        t->shape[i] = d;
        t->stride[i] = s;
        if (d > 0 && kern_mul_overflow_i64(s, d, &s)) {
            /* dims bound separately each fit; their product does not */
            return kern__err(KERN_ERR_SHAPE,
                             "kern_graph: value '%s' has more elements than int64 holds under "
                             "this binding", w->str + x->name);
        }
    }
    for (i = x->ndim; i < KERN_MAX_DIMS; i++) t->shape[i] = t->stride[i] = 0;
    return KERN_OK;
}

static size_t kern__gp_bytes(const kern_tensor *t) {
    int64_t n = kern_tensor_numel(t);
    size_t b = (size_t)(n < 0 ? 0 : n) * kern_dtype_size(t->dtype);
    return (b + 63) & ~(size_t)63;
}

/* Graph outputs must be written by a step into memory of their own: an
 * output that is a view, an input, a weight, a constant or listed twice
 * gets a copy node. */
static kern_status kern__gp_outputs(kern_graph_plan *p) {
    kern_graph *w = &p->w;
    int64_t i, j;
    for (i = 0; i < w->n_outputs; i++) {
        kern_graph_val v = w->outputs[i], nv;
        const kern__gval *x = &w->vals[v];
        int need = x->kind != KERN_GRAPH_VAL_NODE ||
                   kern__gop(w->nodes[x->node].op)->cls == KERN__GC_VIEW;
        for (j = 0; j < i; j++) need |= w->outputs[j] == v;
        if (need) {
            kern_graph_node_desc d;
            char nm[KERN__G_NAME_MAX + 1];
            kern_status st;
            memset(&d, 0, sizeof d);
            kern__gw_fresh(w, w->str + x->name, "out", nm, sizeof nm);
            d.op = KERN_GRAPH_OP_COPY;
            d.name = nm;
            d.inputs[0] = v;
            st = kern__gw_add(w, &d, (int64_t)1 << 60 | i, &nv);
            if (st) return st;
            w->outputs[i] = nv;
        }
    }
    return KERN_OK;
}

static kern_status kern__gp_structure(kern_graph_plan *p) {
    kern_graph *w = &p->w;
    kern_ctx *ctx = p->ctx;
    kern_tensor *TB = NULL;
    int64_t i, s;
    int k;
    kern_status st = KERN_OK;
    int32_t *vstep = NULL; /* value -> defining step (roots) */
    int32_t *parent = NULL;
    size_t *bsize = NULL, *boff = NULL;
    int32_t *bfirst = NULL, *blast = NULL, *bid = NULL;
    int64_t nb = 0, *exb = NULL;
    int inplace = !(p->prm.disable & KERN_GRAPH_PASS_INPLACE) && !p->prm.keep_intermediates;

    /* live nodes in order */
    p->order = (int32_t *)kern__alloc(ctx, (size_t)(w->n_nodes + 1) * sizeof(int32_t));
    p->node_step = (int32_t *)kern__alloc(ctx, (size_t)(w->n_nodes + 1) * sizeof(int32_t));
    p->pv = (kern__gpv *)kern__alloc(ctx, (size_t)w->n_vals * sizeof(kern__gpv));
    TB = (kern_tensor *)kern__alloc(ctx, (size_t)w->n_vals * sizeof(kern_tensor));
    vstep = (int32_t *)kern__alloc(ctx, (size_t)w->n_vals * sizeof(int32_t));
    parent = (int32_t *)kern__alloc(ctx, (size_t)w->n_vals * sizeof(int32_t));
    if (!p->order || !p->node_step || !p->pv || !TB || !vstep || !parent) goto nomem;
    memset(p->pv, 0, (size_t)w->n_vals * sizeof(kern__gpv));
    p->n_order = 0;
    for (i = 0; i < w->n_nodes; i++)
        if (!w->nodes[i].dead) p->order[p->n_order++] = (int32_t)i;
    {
        int64_t *key = (int64_t *)kern__alloc(ctx, (size_t)(w->n_nodes + 1) * sizeof(int64_t));
        int32_t *tmp = (int32_t *)kern__alloc(ctx, (size_t)(w->n_nodes + 1) * sizeof(int32_t));
        if (!key || !tmp) {
            kern__free(ctx, key);
            kern__free(ctx, tmp);
            goto nomem;
        }
        for (i = 0; i < w->n_nodes; i++) key[i] = w->nodes[i].pos;
        kern__g_argsort(p->order, tmp, p->n_order, key);
        kern__free(ctx, key);
        kern__free(ctx, tmp);
    }

    /* live values and their shapes at the bound */
    for (i = 0; i < w->n_inputs; i++) p->pv[w->inputs[i]].live = 1;
    for (i = 0; i < w->n_outputs; i++) p->pv[w->outputs[i]].live = 1;
    for (i = 0; i < p->n_order; i++) {
        const kern__gnode *n = &w->nodes[p->order[i]];
        for (k = 0; k < KERN_GRAPH_MAX_INPUTS; k++)
            if (n->in[k]) p->pv[n->in[k]].live = 1;
        for (k = 0; k < n->n_out; k++) p->pv[n->out[k]].live = 1;
    }
    exb = (int64_t *)kern__alloc(ctx, (size_t)(w->n_ex + 1) * sizeof(int64_t));
    if (!exb) goto nomem;
    for (i = 0; i < w->n_ex; i++) {
        int bad = 0;
        exb[i] = kern__gx_eval(w, kern__gx_handle(i), p->bound, &bad);
        if (bad || exb[i] < 0) exb[i] = -1;
    }
    for (i = 1; i < w->n_vals; i++) {
        p->pv[i].root = (int32_t)i;
        p->pv[i].group = (int32_t)i;
        parent[i] = (int32_t)i;
        vstep[i] = -1;
        if (!p->pv[i].live) continue;
        if ((st = kern__gp_shape_ev(w, (kern_graph_val)i, exb, &TB[i])) != KERN_OK) goto fail;
        p->pv[i].bytes = kern__gp_bytes(&TB[i]);
        switch (w->vals[i].kind) {
        case KERN_GRAPH_VAL_INPUT:
            p->pv[i].storage = KERN__GS_INPUT;
            p->pv[i].io = w->vals[i].aux;
            break;
        case KERN_GRAPH_VAL_WEIGHT: {
            const kern__gweight *wt = &w->w[w->vals[i].aux];
            p->pv[i].storage = wt->owned == 2 ? KERN__GS_PLAN : KERN__GS_WEIGHT;
            p->pv[i].ptr = wt->data;
            if (!wt->data && wt->owned != 2) {
                st = kern__err(KERN_ERR_ARG,
                               "kern_graph_plan_create: weight '%s' has no data (bind it with "
                               "kern_graph_bind_weight or kern_graph_bind_safetensors)",
                               w->str + w->vals[i].name);
                goto fail;
            }
            break;
        }
        case KERN_GRAPH_VAL_CONST: {
            const kern__gconst *kc = &w->k[w->vals[i].aux];
            size_t es = kern_dtype_size(w->vals[i].dtype);
            char *m = (char *)kern__gp_alloc(p, (size_t)kc->n * es);
            int64_t q;
            if (!m) goto nomem;
            for (q = 0; q < kc->n; q++) {
                double v = kc->v[q];
                switch (w->vals[i].dtype) {
                case KERN_F32: { float f = (float)v; memcpy(m + q * 4, &f, 4); break; }
                case KERN_BF16: { uint16_t h = kern_f32_to_bf16((float)v); memcpy(m + q * 2, &h, 2); break; }
                case KERN_F16: { uint16_t h = kern_f32_to_f16((float)v); memcpy(m + q * 2, &h, 2); break; }
                case KERN_I32: { int32_t x = (int32_t)v; memcpy(m + q * 4, &x, 4); break; }
                case KERN_I64: { int64_t x = (int64_t)v; memcpy(m + q * 8, &x, 8); break; }
                case KERN_I8: { int8_t x = (int8_t)v; memcpy(m + q, &x, 1); break; }
                default: { uint8_t x = (uint8_t)v; memcpy(m + q, &x, 1); break; }
                }
            }
            p->pv[i].storage = KERN__GS_PLAN;
            p->pv[i].ptr = m;
            break;
        }
        default: break;
        }
    }

    /* steps and views (at the bound) */
    p->steps = (kern__gstep *)kern__alloc(ctx, (size_t)(p->n_order + 1) * sizeof(kern__gstep));
    if (!p->steps) goto nomem;
    memset(p->steps, 0, (size_t)(p->n_order + 1) * sizeof(kern__gstep));
    p->n_steps = 0;
    for (i = 0; i < p->n_order; i++) {
        const kern__gnode *n = &w->nodes[p->order[i]];
        const kern__gopdef *od = kern__gop(n->op);
        p->node_step[p->order[i]] = -1;
        if (od->cls == KERN__GC_VIEW) {
            int ok = 1;
            int64_t start = 0;
            kern_tensor *x = &TB[n->in[0]];
            for (k = 0; k < n->n_out && ok; k++) {
                kern_tensor yv;
                int64_t eoff;
                if (n->op == KERN_GRAPH_OP_SLICE) {
                    int bad = 0;
                    start = kern__gx_eval(w, n->a.start, p->bound, &bad);
                }
                ok = kern__g_make_view(n, x, &TB[n->out[k]], start, &yv, &eoff);
                if (n->op == KERN_GRAPH_OP_SPLIT) {
                    int a = (int)(n->a.axis < 0 ? n->a.axis + x->ndim : n->a.axis);
                    start += TB[n->out[k]].shape[a];
                }
                if (ok) TB[n->out[k]] = yv;
            }
            if (ok) {
                for (k = 0; k < n->n_out; k++) {
                    p->pv[n->out[k]].view = 1;
                    p->pv[n->out[k]].src = n->in[0];
                    p->pv[n->out[k]].root = p->pv[n->in[0]].root;
                }
                continue;
            }
            /* a reshape whose strides do not allow a view: a copy step */
            kern__g_contig(&TB[n->out[0]]);
            p->steps[p->n_steps].copy = 1;
        }
        p->steps[p->n_steps].node = p->order[i];
        p->steps[p->n_steps].op = n->op;
        if (n->op == KERN_GRAPH_OP_LINEAR && n->in[0]) {
            const kern_tensor *x = &TB[n->in[0]];
            int64_t kx = x->ndim > 0 ? x->shape[x->ndim - 1] : 1;
            p->steps[p->n_steps].bound_rows = kx > 0 ? kern_tensor_numel(x) / kx : 0;
        }
        p->steps[p->n_steps].cls = (int8_t)(od->cls == KERN__GC_VIEW ? KERN__GC_EXEC : od->cls);
        p->node_step[p->order[i]] = (int32_t)p->n_steps;
        for (k = 0; k < n->n_out; k++) {
            p->pv[n->out[k]].storage = KERN__GS_ARENA;
            vstep[n->out[k]] = (int32_t)p->n_steps;
        }
        p->n_steps++;
    }
    for (i = 0; i < w->n_outputs; i++) {
        kern_graph_val v = w->outputs[i];
        p->pv[v].storage = KERN__GS_OUTPUT;
        p->pv[v].io = (int32_t)i;
    }
    /* segments of executor-owned steps */
    for (s = p->n_steps - 1; s >= 0; s--) {
        if (p->steps[s].cls != KERN__GC_EXEC) continue;
        p->steps[s].seg_end = (s + 1 < p->n_steps && p->steps[s + 1].cls == KERN__GC_EXEC)
                                  ? p->steps[s + 1].seg_end : (int32_t)(s + 1);
    }

    /* lifetimes of roots: first = defining step, last = last reading step */
    for (i = 1; i < w->n_vals; i++) {
        p->pv[i].first = vstep[i] < 0 ? 0 : vstep[i];
        p->pv[i].last = p->pv[i].first;
    }
    for (s = 0; s < p->n_steps; s++) {
        const kern__gnode *n = &w->nodes[p->steps[s].node];
        for (k = 0; k < KERN_GRAPH_MAX_INPUTS; k++)
            if (n->in[k]) {
                int32_t r = p->pv[n->in[k]].root;
                if (p->pv[r].last < s) p->pv[r].last = (int32_t)s;
            }
    }
    for (i = 0; i < w->n_outputs; i++) p->pv[w->outputs[i]].last = (int32_t)p->n_steps;
    /* in place: an output takes the memory of an input that dies here */
    p->stats.n_inplace = 0;
    for (s = 0; inplace && s < p->n_steps; s++) {
        const kern__gnode *n = &w->nodes[p->steps[s].node];
        int pairs[2][2], np = 0, q;
        int32_t used_group = -1;
        switch (n->op) {
        case KERN_GRAPH_OP_LAYER_NORM: case KERN_GRAPH_OP_RMS_NORM:
            pairs[np][0] = 0; pairs[np][1] = 0; np++;
            if (n->n_out > 1) { pairs[np][0] = 1; pairs[np][1] = 3; np++; }
            break;
        case KERN_GRAPH_OP_SCATTER_REDUCE: pairs[0][0] = 0; pairs[0][1] = 0; np = 1; break;
        case KERN_GRAPH_OP_ADD: case KERN_GRAPH_OP_SUB: case KERN_GRAPH_OP_MUL: case KERN_GRAPH_OP_DIV:
            pairs[0][0] = 0; pairs[0][1] = 0; pairs[1][0] = 0; pairs[1][1] = 1; np = 2;
            break;
        default:
            if (p->steps[s].cls == KERN__GC_EXEC && !p->steps[s].copy &&
                n->op != KERN_GRAPH_OP_COPY && n->op != KERN_GRAPH_OP_CAST &&
                n->op != KERN_GRAPH_OP_CONCAT && n->op != KERN_GRAPH_OP_EMBEDDING &&
                n->op != KERN_GRAPH_OP_REDUCE_MEAN && n->op != KERN_GRAPH_OP_REDUCE_SUM) {
                pairs[0][0] = 0; pairs[0][1] = 0; np = 1;
            }
            break;
        }
        for (q = 0; q < np; q++) {
            kern_graph_val o = n->out[pairs[q][0]], iv = n->in[pairs[q][1]];
            int32_t g;
            const kern__gval *xo, *xi;
            int other = 0, kk;
            if (!iv) continue;
            if (p->pv[o].storage != KERN__GS_ARENA || p->pv[iv].view ||
                p->pv[iv].storage != KERN__GS_ARENA)
                continue;
            g = p->pv[iv].group;
            while (parent[g] != g) g = parent[g];
            if (g == used_group || p->pv[g].last != s || p->pv[g].bytes != p->pv[o].bytes) continue;
            /* another input reading the donor's memory through a different
             * view would see it overwritten */
            for (kk = 0; kk < KERN_GRAPH_MAX_INPUTS; kk++) {
                int32_t gk;
                if (!n->in[kk] || n->in[kk] == iv) continue;
                gk = p->pv[p->pv[n->in[kk]].root].group;
                while (parent[gk] != gk) gk = parent[gk];
                if (gk == g) other = 1;
            }
            if (other) continue;
            xo = &w->vals[o];
            xi = &w->vals[iv];
            if (xo->dtype != xi->dtype || xo->ndim != xi->ndim ||
                memcmp(xo->dims, xi->dims, sizeof(int64_t) * (size_t)xo->ndim) != 0)
                continue;
            parent[o] = g;
            p->pv[g].last = p->pv[o].last;
            used_group = g;
            p->stats.n_inplace++;
        }
    }
    for (i = 1; i < w->n_vals; i++) {
        int32_t g = (int32_t)i;
        while (parent[g] != g) g = parent[g];
        p->pv[i].group = g;
    }

    /* buffers: arena groups and output roots */
    bsize = (size_t *)kern__alloc(ctx, (size_t)w->n_vals * sizeof(size_t));
    boff = (size_t *)kern__alloc(ctx, (size_t)w->n_vals * sizeof(size_t));
    bfirst = (int32_t *)kern__alloc(ctx, (size_t)w->n_vals * sizeof(int32_t));
    blast = (int32_t *)kern__alloc(ctx, (size_t)w->n_vals * sizeof(int32_t));
    bid = (int32_t *)kern__alloc(ctx, (size_t)w->n_vals * sizeof(int32_t));
    if (!bsize || !boff || !bfirst || !blast || !bid) goto nomem;
    p->stats.sum_bytes = 0;
    for (i = 1; i < w->n_vals; i++) {
        kern__gpv *v = &p->pv[i];
        if (!v->live || v->view) continue;
        if (v->storage != KERN__GS_ARENA && v->storage != KERN__GS_OUTPUT) continue;
        /* a bound past 2^62 bytes in all: no machine holds it, and the
         * planner's sums (signed in kern__g_maxlive) stay exact below it */
        if (v->bytes > ((size_t)1 << 62) - p->stats.sum_bytes) {
            st = kern__err(KERN_ERR_NOMEM, "kern_graph_plan_create: the intermediates need more "
                           "than 2^62 bytes at this binding");
            goto fail;
        }
        p->stats.sum_bytes += v->bytes;
        if (v->group != i) continue;
        bsize[nb] = v->bytes;
        bfirst[nb] = v->first;
        blast[nb] = v->last;
        bid[nb] = (int32_t)i;
        nb++;
    }
    p->stats.max_live_bytes = kern__g_maxlive(ctx, nb, bsize, bfirst, blast, (int32_t)p->n_steps);
    if (p->prm.keep_intermediates) {
        size_t o = 0;
        for (i = 0; i < nb; i++) {
            boff[i] = o;
            o += bsize[i];
        }
        p->arena_bytes = o;
    } else {
        int ok;
        p->arena_bytes = kern__g_memplan(ctx, nb, bsize, bfirst, blast, p->stats.max_live_bytes,
                                         boff, &ok);
        if (!ok) goto nomem;
    }
    for (i = 0; i < nb; i++) p->pv[bid[i]].off = boff[i];
    for (i = 1; i < w->n_vals; i++) {
        kern__gpv *v = &p->pv[i];
        if (!v->live || v->view || (v->storage != KERN__GS_ARENA && v->storage != KERN__GS_OUTPUT))
            continue;
        v->off = p->pv[v->group].off;
        {
            /* sizes that can grow when a symbol shrinks are checked per binding */
            const kern__gval *x = &w->vals[i];
            int d;
            for (d = 0; d < x->ndim; d++)
                if (!kern__gx_nonneg(w, x->dims[d])) v->checked = 1;
        }
    }
    p->stats.arena_bytes = p->arena_bytes;
    p->stats.n_steps = (int)p->n_steps;
    p->stats.n_nodes = (int)p->n_order;

    /* executor scratch: 3 blocks, or a softmax row */
    p->scratch_floats = 3 * KERN__GX_BLK;
    for (s = 0; s < p->n_steps; s++) {
        const kern__gnode *n = &w->nodes[p->steps[s].node];
        if (n->op == KERN_GRAPH_OP_SOFTMAX) {
            const kern_tensor *y = &TB[n->out[0]];
            size_t need = (size_t)(y->ndim ? y->shape[y->ndim - 1] : 1);
            if (need > p->scratch_floats) p->scratch_floats = need;
        }
    }
    p->scratch_floats = (p->scratch_floats + 15) & ~(size_t)15;
    goto done;
nomem:
    st = kern__err(KERN_ERR_NOMEM, "kern_graph_plan_create: out of memory");
fail:
done:
    kern__free(ctx, exb);
    kern__free(ctx, TB);
    kern__free(ctx, vstep);
    kern__free(ctx, parent);
    kern__free(ctx, bsize);
    kern__free(ctx, boff);
    kern__free(ctx, bfirst);
    kern__free(ctx, blast);
    kern__free(ctx, bid);
    return st;
}

/* ============================================================ instances */

static size_t kern__gp_bytes_fast(const kern_tensor *t) {
    int64_t n = 1;
    int i;
    for (i = 0; i < t->ndim; i++) n *= t->shape[i];
    return (((size_t)n * kern_dtype_size(t->dtype)) + 63) & ~(size_t)63;
}

/* Resolves every value's tensor and every step for one binding. */
static kern_status kern__gp_inst_build(kern_graph_plan *p, kern__ginst *I, const int64_t *sv) {
    kern_graph *w = &p->w;
    kern_tensor *T = I->T;
    int64_t i, s;
    int k;
    kern_status st;
    int64_t *exv = I->exv;
    I->valid = 0;
    I->n_patch = 0;
    memcpy(I->sv, sv, sizeof I->sv);
    /* every expression once (-1 marks an overflow or a negative value) */
    for (i = 0; i < w->n_ex; i++) {
        int bad = 0;
        exv[i] = kern__gx_eval(w, kern__gx_handle(i), sv, &bad);
        if (bad || exv[i] < 0) exv[i] = -1;
    }
    /* roots */
    for (i = 1; i < w->n_vals; i++) {
        kern__gpv *v = &p->pv[i];
        if (!v->live || v->view) continue;
        if ((st = kern__gp_shape_ev(w, (kern_graph_val)i, exv, &T[i])) != KERN_OK) return st;
        T[i].data = NULL;
        switch (v->storage) {
        case KERN__GS_ARENA: case KERN__GS_OUTPUT:
            if (v->checked && kern__gp_bytes_fast(&T[i]) > v->bytes)
                return kern__err(KERN_ERR_SHAPE,
                                 "kern_graph_run: value '%s' needs %zu bytes under this binding, "
                                 "more than the %zu planned at the bound",
                                 w->str + w->vals[i].name, kern__gp_bytes_fast(&T[i]), v->bytes);
            T[i].data = p->arena ? (char *)p->arena + v->off : NULL;
            if (v->storage == KERN__GS_OUTPUT) {
                I->patch[I->n_patch].v = (int32_t)i;
                I->patch[I->n_patch].io = v->io;
                I->patch[I->n_patch].is_out = 1;
                I->patch[I->n_patch].boff = 0;
                I->n_patch++;
            }
            break;
        case KERN__GS_INPUT:
            T[i].data = NULL;
            I->patch[I->n_patch].v = (int32_t)i;
            I->patch[I->n_patch].io = v->io;
            I->patch[I->n_patch].is_out = 0;
            I->patch[I->n_patch].boff = 0;
            I->n_patch++;
            break;
        default: T[i].data = v->ptr; break;
        }
    }
    /* views, in order */
    for (i = 0; i < p->n_order; i++) {
        const kern__gnode *n = &w->nodes[p->order[i]];
        int64_t start = 0;
        if (kern__gop(n->op)->cls != KERN__GC_VIEW || p->node_step[p->order[i]] >= 0) continue;
        for (k = 0; k < n->n_out; k++) {
            kern_graph_val o = n->out[k];
            const kern_tensor *x = &T[n->in[0]];
            kern_tensor shp, yv;
            int64_t eoff;
            int32_t root = p->pv[o].root;
            if ((st = kern__gp_shape_ev(w, o, exv, &shp)) != KERN_OK) return st;
            if (n->op == KERN_GRAPH_OP_SLICE) {
                int bad = 0, a = (int)(n->a.axis < 0 ? n->a.axis + x->ndim : n->a.axis);
                start = kern__gx_eval(w, n->a.start, sv, &bad);
                if (bad || start < 0 || start + shp.shape[a] > x->shape[a])
                    return kern__err(KERN_ERR_SHAPE,
                                     "kern_graph_run: node '%s' (slice): [%lld, %lld) is outside dim %d "
                                     "(%lld) under this binding",
                                     w->str + w->vals[o].name, (long long)start,
                                     (long long)(start + shp.shape[a]), a, (long long)x->shape[a]);
            }
            if (!kern__g_make_view(n, x, &shp, start, &yv, &eoff))
                return kern__err(KERN_ERR_LAYOUT,
                                 "kern_graph_run: node '%s' (reshape) is a view at the planned bound "
                                 "but not under this binding; plan with this binding",
                                 w->str + w->vals[o].name);
            if (n->op == KERN_GRAPH_OP_SPLIT) {
                int a = (int)(n->a.axis < 0 ? n->a.axis + x->ndim : n->a.axis);
                start += shp.shape[a];
            }
            if (x->data) yv.data = (char *)x->data + eoff * (int64_t)kern_dtype_size(x->dtype);
            T[o] = yv;
            if (p->pv[root].storage == KERN__GS_INPUT || p->pv[root].storage == KERN__GS_OUTPUT) {
                /* patched per run: find the source's offset */
                int64_t j, sb = 0;
                for (j = 0; j < I->n_patch; j++)
                    if (I->patch[j].v == n->in[0]) sb = I->patch[j].boff;
                I->patch[I->n_patch].v = (int32_t)o;
                I->patch[I->n_patch].io = p->pv[root].io;
                I->patch[I->n_patch].is_out = p->pv[root].storage == KERN__GS_OUTPUT;
                I->patch[I->n_patch].boff = sb + eoff * (int64_t)kern_dtype_size(x->dtype);
                I->n_patch++;
            }
        }
    }
    /* steps */
    I->fam_ws = 0;
    p->n_wsn = 0; /* its answers hold for this binding's tensors only */
    for (s = 0; s < p->n_steps; s++) {
        const kern__gstep *stp = &p->steps[s];
        const kern__gnode *n = &w->nodes[stp->node];
        kern__gistep *is = &I->is[s];
        kern__gex *e = &is->e;
        kern_graph_val y = n->out[0];
        int64_t ny;
        is->par = 0;
        is->chunks = 1;
        is->flops = is->bytes = 0;
        if (p->prm.profile) kern__g_cost(p, stp, T, &is->flops, &is->bytes);
        if (stp->cls == KERN__GC_FAMILY) {
            /* the family workspace is sized once, at the bound (plan time) */
            if (!p->fam_ws_sized) {
                size_t ws = kern__gfam_ws(p, stp, T);
                if (ws > I->fam_ws) I->fam_ws = ws;
            }
            continue;
        }
        memset(e, 0, sizeof *e);
        e->op = n->op;
        e->yt = &T[y];
        e->yv = T[y];
        e->err = &p->err;
        for (k = 0; k < KERN_GRAPH_MAX_INPUTS; k++)
            if (n->in[k]) {
                e->x[k] = &T[n->in[k]];
                e->n_x = k + 1;
            }
        e->inner = T[y].ndim ? T[y].shape[T[y].ndim - 1] : 1;
        ny = kern_tensor_numel(&T[y]);
        e->units = e->inner > 0 ? ny / e->inner : 0;
        switch (n->op) {
        case KERN_GRAPH_OP_SOFTMAX:
            e->b0 = T[n->in[0]];
            e->fn = kern__gx_softmax;
            break;
        case KERN_GRAPH_OP_REDUCE_MEAN: case KERN_GRAPH_OP_REDUCE_SUM: {
            const kern_tensor *x = &T[n->in[0]];
            e->fn = kern__gx_reduce;
            e->units = 1;
            for (k = 0; k < x->ndim - 1; k++) e->units *= x->shape[k];
            break;
        }
        case KERN_GRAPH_OP_EMBEDDING:
            e->fn = kern__gx_embedding;
            e->units = kern_tensor_numel(&T[n->in[0]]);
            e->limit = T[n->in[1]].shape[0];
            break;
        case KERN_GRAPH_OP_CONCAT: {
            int a = (int)(n->a.axis < 0 ? n->a.axis + T[y].ndim : n->a.axis);
            int64_t off = 0;
            e->fn = kern__gx_concat;
            e->units = 0;
            for (k = 0; k < e->n_x; k++) {
                const kern_tensor *x = e->x[k];
                int64_t rows = 1, d;
                for (d = 0; d < x->ndim - 1; d++) rows *= x->shape[d];
                if (x->shape[x->ndim - 1] > 0) e->units += rows;
                e->poff[k] = off * T[y].stride[a];
                off += x->shape[a];
            }
            break;
        }
        default: {
            /* elementwise, copies, casts, reshape copies */
            const kern_tensor *a = &T[n->in[0]];
            int flt = kern_dtype_is_float(a->dtype) && kern_dtype_is_float(T[y].dtype);
            if (stp->copy || n->op == KERN_GRAPH_OP_COPY || n->op == KERN_GRAPH_OP_CAST) {
                /* same element order: view y with x's shape */
                e->yv = T[y];
                e->yv.ndim = a->ndim;
                memcpy(e->yv.shape, a->shape, sizeof e->yv.shape);
                kern__g_contig(&e->yv);
                e->b0 = *a;
                e->inner = a->ndim ? a->shape[a->ndim - 1] : 1;
                e->units = e->inner > 0 ? kern_tensor_numel(a) / e->inner : 0;
                e->fn = flt ? kern__gx_map : kern__gx_map_int;
                e->op = KERN_GRAPH_OP_COPY;
                break;
            }
            if (kern_tensor_broadcast_to(a, T[y].ndim, T[y].shape, &e->b0, "kern_graph_run", "a"))
                return KERN_ERR_SHAPE;
            if (e->n_x > 1 &&
                kern_tensor_broadcast_to(&T[n->in[1]], T[y].ndim, T[y].shape, &e->b1, "kern_graph_run", "b"))
                return KERN_ERR_SHAPE;
            e->fn = kern__gx_map;
            e->f0 = n->op == KERN_GRAPH_OP_SCALE ? (n->a.alpha_set ? n->a.alpha : 1.0f)
                    : n->op == KERN_GRAPH_OP_POW ? n->a.exponent : 0.0f;
            {
                /* the flat path: f32, y contiguous, inputs contiguous like y
                 * or single values (not for a scalar first operand of a
                 * unary op: y would not have its shape) */
                const kern_tensor *b = e->n_x > 1 ? &T[n->in[1]] : NULL;
                int ok = T[y].dtype == KERN_F32 && a->dtype == KERN_F32 &&
                         (!b || b->dtype == KERN_F32) && kern_tensor_is_contiguous(&T[y]);
                int64_t na = ok ? kern_tensor_numel(a) : 0, nb = ok && b ? kern_tensor_numel(b) : 0;
                int ea = ok && na == ny && a->ndim == T[y].ndim && kern_tensor_is_contiguous(a);
                int eb = ok && b && nb == ny && b->ndim == T[y].ndim && kern_tensor_is_contiguous(b);
                int sa1 = ok && b && na == 1, sb1 = ok && b && nb == 1;
                if (ok && (ea || sa1) && (!b || eb || sb1) && !(sa1 && sb1 && ny != 1)) {
                    e->fn = kern__gx_flat;
                    e->sa = (int8_t)(sa1 && !ea);
                    e->sb = (int8_t)(b && sb1 && !eb);
                    e->units = ny;
                    e->inner = 1;
                }
            }
            break;
        }
        }
        if (e->units == 0) e->fn = kern__gx_nop;
        {
            int64_t pm = p->parallel_min;
            is->par = p->n_threads > 1 && e->units > 1 && (pm < 0 || ny >= pm);
            is->chunks = !is->par ? 1 : pm < 0 ? p->n_threads
                         : (e->units < 4 * p->n_threads ? e->units : 4 * p->n_threads);
        }
    }
    for (s = p->n_steps - 1; s >= 0; s--) /* per segment: does any step split? */
        if (p->steps[s].cls == KERN__GC_EXEC)
            I->is[s].seg_par = I->is[s].par ||
                               (s + 1 < p->steps[s].seg_end && I->is[s + 1].seg_par);
    I->valid = 1;
    return KERN_OK;
}

/* The instance for binding sv (built into the least recently used slot on
 * a miss; no allocation). */
static kern_status kern__gp_inst(kern_graph_plan *p, const int64_t *sv, kern__ginst **out) {
    int i, lru = 0;
    kern_status st;
    for (i = 0; i < p->n_inst; i++) {
        kern__ginst *I = &p->inst[i];
        if (I->valid && memcmp(I->sv, sv, sizeof I->sv) == 0) {
            I->stamp = ++p->clock;
            p->cur = i;
            *out = I;
            return KERN_OK;
        }
        if (!I->valid || I->stamp < p->inst[lru].stamp) lru = i;
        if (!I->valid) { lru = i; break; }
    }
    st = kern__gp_inst_build(p, &p->inst[lru], sv);
    if (st) {
        p->inst[lru].valid = 0;
        return st;
    }
    p->inst[lru].stamp = ++p->clock;
    p->cur = lru;
    *out = &p->inst[lru];
    return KERN_OK;
}

/* ============================================================ execution */

typedef struct kern__gregion {
    kern_graph_plan *p;
    kern__ginst *I;
    int64_t a, b;
    volatile int64_t cur; /* published step + 1; -1 = finished */
} kern__gregion;

static void kern__gp_chunks(kern_graph_plan *p, kern__ginst *I, int64_t s, float *scr) {
    kern__gistep *is = &I->is[s];
    kern__gctr *c = &p->ctr[s];
    int64_t nch = is->chunks, u = is->e.units;
    for (;;) {
        int64_t ch = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
        if (ch >= nch) break;
        is->e.fn(&is->e, ch * u / nch, (ch + 1) * u / nch, scr);
        __atomic_fetch_add(&c->done, 1, __ATOMIC_RELEASE);
    }
}

static void kern__gp_region_task(void *arg, int64_t task, int thread) {
    kern__gregion *R = (kern__gregion *)arg;
    kern_graph_plan *p = R->p;
    kern__ginst *I = R->I;
    float *scr = p->scratch + (size_t)task * p->scratch_floats;
    (void)thread;
    if (task == 0) {
        int64_t s;
        for (s = R->a; s < R->b; s++) {
            kern__gistep *is = &I->is[s];
            double t0 = p->prm.profile ? kern__g_now() : 0;
            if (!is->par) {
                is->e.fn(&is->e, 0, is->e.units, scr);
            } else {
                int spins = 0;
                __atomic_store_n(&R->cur, s + 1, __ATOMIC_RELEASE);
                kern__gp_chunks(p, I, s, scr);
                while (__atomic_load_n(&p->ctr[s].done, __ATOMIC_ACQUIRE) < is->chunks) {
                    if (++spins < 4096) kern__cpu_relax();
                    else sched_yield();
                }
            }
            if (p->prm.profile) {
                p->prof_s[s] += kern__g_now() - t0;
                p->prof_calls[s]++;
            }
        }
        __atomic_store_n(&R->cur, -1, __ATOMIC_RELEASE);
    } else {
        int64_t seen = 0;
        int spins = 0;
        for (;;) {
            int64_t c = __atomic_load_n(&R->cur, __ATOMIC_ACQUIRE);
            if (c < 0) break;
            if (c == seen) {
                if (++spins < 4096) kern__cpu_relax();
                else sched_yield();
                continue;
            }
            spins = 0;
            seen = c;
            kern__gp_chunks(p, I, c - 1, scr);
        }
    }
}

static void kern__gp_segment(kern_graph_plan *p, kern__ginst *I, int64_t a, int64_t b) {
    int64_t s;
    if (!I->is[a].seg_par) {
        if (!p->prm.profile) {
            kern__gistep *is = I->is;
            float *scr = p->scratch;
            for (s = a; s < b; s++) is[s].e.fn(&is[s].e, 0, is[s].e.units, scr);
        } else {
            for (s = a; s < b; s++) {
                double t0 = kern__g_now();
                I->is[s].e.fn(&I->is[s].e, 0, I->is[s].e.units, p->scratch);
                p->prof_s[s] += kern__g_now() - t0;
                p->prof_calls[s]++;
            }
        }
        return;
    }
    {
        kern__gregion R;
        for (s = a; s < b; s++) {
            p->ctr[s].next = 0;
            p->ctr[s].done = 0;
        }
        R.p = p;
        R.I = I;
        R.a = a;
        R.b = b;
        R.cur = 0;
        kern_parallel_for(p->ctx, p->n_threads, kern__gp_region_task, &R);
    }
}

static kern_status kern__gp_exec(kern_graph_plan *p, kern__ginst *I) {
    int64_t s = 0;
    void *ws = p->fam_ws;
    (void)I;
    p->err = 0;
    while (s < p->n_steps) {
        const kern__gstep *st = &p->steps[s];
        if (st->cls == KERN__GC_EXEC) {
            kern__gp_segment(p, I, s, st->seg_end);
            if (p->err) {
                const kern__gnode *n = &p->w.nodes[p->steps[s].node];
                int64_t q;
                for (q = s; q < st->seg_end; q++)
                    if (p->w.nodes[p->steps[q].node].op == KERN_GRAPH_OP_EMBEDDING) {
                        n = &p->w.nodes[p->steps[q].node];
                        break;
                    }
                return kern__err(KERN_ERR_INDEX,
                                 "kern_graph_run: node '%s' (embedding): id number %lld is outside "
                                 "[0, %lld)",
                                 kern__g_vname(&p->w, n->out[0]), (long long)(p->err - 1),
                                 (long long)I->T[n->in[1]].shape[0]);
            }
            s = st->seg_end;
        } else {
            double t0 = p->prm.profile ? kern__g_now() : 0;
            kern_status r = kern__gfam_run(p, st, I->T, ws, p->fam_ws_size, NULL);
            if (r == KERN_ERR_ARG && ws)
                /* this binding needs more scratch than the bound did (the
                 * call rejected the workspace and wrote nothing): the
                 * context's, grown once */
                r = kern__gfam_run(p, st, I->T, NULL, 0, NULL);
            if (r) {
                char m[512];
                const kern__gnode *n = &p->w.nodes[st->node];
                snprintf(m, sizeof m, "%s", kern_last_error());
                return kern__err(r, "kern_graph_run: node '%s' (%s): %s", kern__g_vname(&p->w, n->out[0]),
                                 kern_graph_op_name(n->op), m);
            }
            if (p->prm.profile) {
                p->prof_s[s] += kern__g_now() - t0;
                p->prof_calls[s]++;
            }
            s++;
        }
    }
    return KERN_OK;
}

KERN_API kern_status kern_graph_run(kern_graph_plan *p, const kern_tensor *inputs, int n_inputs,
                                    kern_tensor *outputs, int n_outputs) {
    const char *op = "kern_graph_run";
    kern_graph *w;
    int64_t sv[KERN_GRAPH_MAX_SYMBOLS];
    kern__ginst *I;
    kern_status st;
    int i, d;
    int64_t j;
    if (!p) return kern__err(KERN_ERR_ARG, "%s: plan is NULL", op);
    w = &p->w;
    if (n_inputs != w->n_inputs || (n_inputs && !inputs))
        return kern__err(KERN_ERR_ARG, "%s: %d inputs given, the graph has %lld", op, n_inputs,
                         (long long)w->n_inputs);
    if (n_outputs != w->n_outputs || (n_outputs && !outputs))
        return kern__err(KERN_ERR_ARG, "%s: %d outputs given, the graph has %lld", op, n_outputs,
                         (long long)w->n_outputs);
    if (!p->arena && p->arena_bytes)
        return kern__err(KERN_ERR_ARG, "%s: the plan has no arena (kern_graph_plan_set_arena)", op);
    memset(sv, 0, sizeof sv);
    /* bind the symbols from the inputs' shapes */
    for (i = 0; i < w->n_sym; i++) {
        const kern__gbinder *b = &p->binders[i];
        const kern_tensor *t = &inputs[b->input];
        if (t->ndim != w->vals[w->inputs[b->input]].ndim)
            return kern__err(KERN_ERR_SHAPE, "%s: input '%s' has %d dims, the graph declares %d", op,
                             kern__g_vname(w, w->inputs[b->input]), t->ndim,
                             w->vals[w->inputs[b->input]].ndim);
        sv[i] = t->shape[b->dim] - b->c;
        if (sv[i] < 0 || sv[i] > p->bound[i])
            return kern__err(KERN_ERR_SHAPE,
                             "%s: %s=%lld (from input '%s' dim %d) is outside the planned bound "
                             "0..%lld",
                             op, w->str + w->sym[i], (long long)sv[i],
                             kern__g_vname(w, w->inputs[b->input]), b->dim, (long long)p->bound[i]);
    }
    for (i = 0; i < n_inputs; i++) {
        const kern__gval *x = &w->vals[w->inputs[i]];
        const kern_tensor *t = &inputs[i];
        if (t->dtype != x->dtype)
            return kern__err(KERN_ERR_DTYPE, "%s: input '%s' is %s, the graph declares %s", op,
                             w->str + x->name, kern_dtype_name(t->dtype), kern_dtype_name(x->dtype));
        if (t->ndim != x->ndim)
            return kern__err(KERN_ERR_SHAPE, "%s: input '%s' has %d dims, the graph declares %d", op,
                             w->str + x->name, t->ndim, x->ndim);
        for (d = 0; d < x->ndim; d++) {
            int bad = 0;
            int64_t want = kern__gx_eval(w, x->dims[d], sv, &bad);
            if (t->shape[d] != want) {
                char s1[64];
                if (!kern__gx_is_expr(x->dims[d])) /* a constant, not a symbol */
                    return kern__err(KERN_ERR_SHAPE,
                                     "%s: input '%s' dim %d is %lld, the graph declares %lld", op,
                                     w->str + x->name, d, (long long)t->shape[d], (long long)want);
                return kern__err(KERN_ERR_SHAPE,
                                 "%s: input '%s' dim %d is %lld but the graph says %s = %lld here",
                                 op, w->str + x->name, d, (long long)t->shape[d],
                                 kern_graph_dim_str(w, x->dims[d], s1, sizeof s1), (long long)want);
            }
        }
        if (!kern_tensor_is_contiguous(t))
            return kern__err(KERN_ERR_LAYOUT, "%s: input '%s' must be contiguous", op, w->str + x->name);
        if (!t->data && kern_tensor_numel(t) > 0)
            return kern__err(KERN_ERR_ARG, "%s: input '%s' has no data", op, w->str + x->name);
    }
    if ((st = kern__gp_inst(p, sv, &I)) != KERN_OK) return st;
    for (i = 0; i < n_outputs; i++) {
        const kern_tensor *want = &I->T[w->outputs[i]];
        kern_tensor *t = &outputs[i];
        if (!t->data) continue;
        if (t->dtype != want->dtype || t->ndim != want->ndim ||
            memcmp(t->shape, want->shape, sizeof(int64_t) * (size_t)want->ndim) != 0 ||
            !kern_tensor_is_contiguous(t)) {
            char s1[128], s2[128];
            return kern__err(KERN_ERR_SHAPE,
                             "%s: output '%s' is %s %s here, the buffer given is %s %s (contiguous "
                             "required)",
                             op, kern__g_vname(w, w->outputs[i]), kern_dtype_name(want->dtype),
                             kern_shape_str(want, s1, sizeof s1), kern_dtype_name(t->dtype),
                             kern_shape_str(t, s2, sizeof s2));
        }
    }
    /* point the input / output values at this run's memory */
    for (j = 0; j < I->n_patch; j++) {
        const kern__gpatch *pt = &I->patch[j];
        char *base;
        if (pt->is_out) {
            base = outputs[pt->io].data ? (char *)outputs[pt->io].data
                   : p->arena ? (char *)p->arena + p->pv[w->outputs[pt->io]].off : NULL;
        } else {
            base = (char *)inputs[pt->io].data;
        }
        I->T[pt->v].data = base ? base + pt->boff : NULL;
    }
    {   /* the context's float mode (flush_denormals) for the nodes run here */
        kern__frame fm;
        kern__fp_enter(p->ctx, &fm);
        st = kern__gp_exec(p, I);
        kern__fp_leave(&fm);
    }
    if (st) return st;
    for (i = 0; i < n_outputs; i++)
        if (!outputs[i].data) outputs[i] = I->T[w->outputs[i]];
    p->prof_runs++;
    p->prof_nruns++;
    return KERN_OK;
}

KERN_API void kern_graph_plan_free(kern_graph_plan *p) {
    kern_ctx *ctx;
    int64_t i;
    if (!p) return;
    ctx = p->ctx;
    if (p->steps)
        for (i = 0; i < p->n_steps; i++) {
            kern_gemm_packed_b_free(ctx, p->steps[i].pb);
            kern_qweight_free(ctx, p->steps[i].qw);
            kern_sparse24_free(ctx, p->steps[i].sw);
        }
    for (i = 0; i < p->n_allocs; i++) kern__free(ctx, p->allocs[i]);
    kern__free(ctx, p->allocs);
    if (p->arena_owned) kern__free(ctx, p->arena);
    kern__free(ctx, p->fam_ws);
    kern__free(ctx, p->report);
    kern__free(ctx, p->order);
    kern__free(ctx, p->node_step);
    kern__free(ctx, p->pv);
    kern__free(ctx, p->steps);
    for (i = 0; i < p->w.n_w; i++)
        if (p->w.w[i].owned == 2) kern__free(ctx, p->w.w[i].data);
    kern__g_clone_free(&p->w);
    kern__free(ctx, p);
}

/* Weight view of a weight / plan value. */
static kern_tensor kern__gp_wview(const kern_graph_plan *p, kern_graph_val v) {
    kern_tensor t;
    const kern__gval *x = &p->w.vals[v];
    kern_tensor_init(&t, p->pv[v].ptr, x->dtype, x->ndim, x->dims);
    t.data = p->pv[v].ptr;
    return t;
}

/* After packing: frees weight value v when it is a weight the passes
 * merged for its one node (owned == 2); only the packed copy is read from
 * here on, and the tensor the step sees keeps its shape with NULL data. */
static void kern__gp_drop_merged(kern_graph_plan *p, kern_graph_val v) {
    kern__gweight *mw;
    if (p->w.vals[v].kind != KERN_GRAPH_VAL_WEIGHT) return;
    mw = &p->w.w[p->w.vals[v].aux];
    if (mw->owned != 2) return;
    kern__free(p->ctx, mw->data);
    mw->data = NULL;
    p->pv[v].ptr = NULL;
}

/* *pr: a copy of weight *wt pruned 2:4 (kern_sparse24_prune's rule) in
 * memory of the context's allocator, which the caller frees (pr->data,
 * NULL when the allocation failed) */
static kern_status kern__gp_pruned(kern_graph_plan *p, const kern_tensor *wt, kern_tensor *pr) {
    *pr = *wt;
    pr->data = kern__alloc(p->ctx, kern__gp_bytes(wt));
    if (!pr->data) return kern__err(KERN_ERR_NOMEM, "out of memory pruning the weight");
    return kern_sparse24_prune(p->ctx, wt, pr, NULL);
}

static kern_status kern__gp_prepack(kern_graph_plan *p) {
    kern_graph *w = &p->w;
    int64_t s;
    kern_status st;
    /* weights the passes merged: their sources' rows, concatenated */
    for (s = 0; s < w->n_w; s++) {
        kern__gweight *mw = &w->w[s];
        const kern__gval *x = &w->vals[mw->val];
        size_t es = kern_dtype_size(x->dtype), row = es * (size_t)(x->ndim > 1 ? x->dims[1] : 1);
        size_t off = 0;
        int k;
        if (mw->owned != 2 || mw->data || !p->pv[mw->val].live) continue;
        mw->data = kern__alloc(p->ctx, (size_t)x->dims[0] * row + 1);
        if (!mw->data) return kern__err(KERN_ERR_NOMEM, "kern_graph_plan_create: out of memory merging weights");
        if (mw->glu) { /* gate and up rows in kern_glu_pack's order */
            const kern__gval *gv = &w->vals[mw->src[0]], *uv = &w->vals[mw->src[1]];
            kern_tensor g2, u2, o2;
            kern_tensor_init(&o2, mw->data, x->dtype, x->ndim, x->dims);
            kern_tensor_init(&g2, w->w[gv->aux].data, gv->dtype, gv->ndim, gv->dims);
            kern_tensor_init(&u2, w->w[uv->aux].data, uv->dtype, uv->ndim, uv->dims);
            if ((st = kern_glu_pack(&g2, &u2, &o2, 0)) != KERN_OK) return st;
            p->pv[mw->val].ptr = mw->data;
            continue;
        }
        for (k = 0; k < mw->n_src; k++) {
            const kern__gval *sv = &w->vals[mw->src[k]];
            size_t bytes = (size_t)sv->dims[0] * row;
            memcpy((char *)mw->data + off, w->w[sv->aux].data, bytes);
            off += bytes;
        }
        p->pv[mw->val].ptr = mw->data;
    }
    for (s = 0; s < p->n_steps; s++) {
        kern__gstep *stp = &p->steps[s];
        const kern__gnode *n = &w->nodes[stp->node];
        kern_graph_val wv = n->in[1];
        int is_w = wv && (p->pv[wv].storage == KERN__GS_WEIGHT || p->pv[wv].storage == KERN__GS_PLAN);
        const char *nm = kern__g_vname(w, n->out[0]);
        if (n->op == KERN_GRAPH_OP_LINEAR && is_w && !(p->prm.disable & KERN_GRAPH_PASS_PREPACK)) {
            kern_tensor wt = kern__gp_wview(p, wv);
            kern_gemm_pack_params pp;
            if (stp->bound_rows <= KERN__G_GEMV_M && kern__g_gemv_node(n, &wt)) {
                kern__gp_log(p, "gemv: linear '%s' has at most %lld rows at the bound: weight kept as [N, K], not prepacked",
                             nm, (long long)stp->bound_rows);
                continue;
            }
            memset(&pp, 0, sizeof pp);
            pp.trans_b = 1;
            st = kern_gemm_pack_b(p->ctx, &wt, &stp->pb, &pp);
            if (st) goto wrap;
            kern__gp_drop_merged(p, wv);
            p->stats.packed_bytes += (size_t)wt.shape[0] * (size_t)wt.shape[1] *
                                     (wt.dtype == KERN_BF16 ? 2 : 4);
        } else if (n->op == KERN_GRAPH_OP_QLINEAR) {
            kern_tensor wt;
            if (!is_w) {
                st = kern__err(KERN_ERR_ARG, "the weight of a qlinear must be a graph weight");
                goto wrap;
            }
            wt = kern__gp_wview(p, wv);
            if (wt.dtype == KERN_I8) {
                kern_tensor sc;
                if (!n->in[2] || (p->pv[n->in[2]].storage != KERN__GS_WEIGHT &&
                                  p->pv[n->in[2]].storage != KERN__GS_PLAN)) {
                    st = kern__err(KERN_ERR_ARG, "the scales of an i8 qlinear weight must be a graph weight");
                    goto wrap;
                }
                sc = kern__gp_wview(p, n->in[2]);
                st = kern_qweight_pack_int8(p->ctx, &wt, &sc, &stp->qw, NULL);
            } else if (n->a.prune) {
                /* int8 + 2:4: the weight pruned, then quantized per
                 * channel; it runs as dense int8, whose integer sums are
                 * those of a 2:4 int8 product (no 2:4 form beats the dense
                 * int8 kernels on the CPUs kern targets: docs/sam.md) */
                kern_tensor pr;
                st = kern__gp_pruned(p, &wt, &pr);
                if (!st) st = kern_qweight_pack(p->ctx, &pr, &stp->qw, NULL);
                kern__free(p->ctx, pr.data);
            } else {
                st = kern_qweight_pack(p->ctx, &wt, &stp->qw, NULL);
            }
            if (st) goto wrap;
            kern__gp_drop_merged(p, wv);
            {
                kern_qweight_info qi;
                memset(&qi, 0, sizeof qi);
                if (kern_qweight_get_info(stp->qw, &qi) == KERN_OK) p->stats.packed_bytes += qi.bytes;
            }
        } else if (n->op == KERN_GRAPH_OP_SPARSE24_LINEAR) {
            kern_tensor wt, pr;
            void *tmp = NULL;
            if (!is_w) {
                st = kern__err(KERN_ERR_ARG, "the weight of a sparse24_linear must be a graph weight");
                goto wrap;
            }
            wt = kern__gp_wview(p, wv);
            if (n->a.prune) {
                st = kern__gp_pruned(p, &wt, &pr);
                if (!st) st = kern_sparse24_compress(p->ctx, &pr, &stp->sw, NULL);
                kern__free(p->ctx, pr.data);
            } else {
                st = kern_sparse24_compress(p->ctx, &wt, &stp->sw, NULL);
            }
            if (st) goto wrap;
            if (wt.dtype == KERN_BF16 && kern_ctx_isa(p->ctx) == KERN_ISA_AMX &&
                !(p->prm.disable & KERN_GRAPH_PASS_PREPACK)) {
                /* AMX has no sparse tile product, and dense tdpbf16ps beats
                 * the vector 2:4 kernels several times over: the pruned
                 * weight (the 2:4 one, compressed above, so the same
                 * checks and pruning) runs dense from prepacked panels */
                kern_tensor dw;
                kern_gemm_pack_params pp;
                int64_t dsh[2];
                dsh[0] = wt.shape[0];
                dsh[1] = wt.shape[1];
                tmp = kern__alloc(p->ctx, (size_t)(dsh[0] * dsh[1]) * 2);
                if (!tmp) {
                    st = kern__err(KERN_ERR_NOMEM, "out of memory expanding the 2:4 weight");
                    goto wrap;
                }
                st = kern_tensor_init(&dw, tmp, KERN_BF16, 2, dsh);
                if (!st) st = kern_sparse24_decompress(p->ctx, stp->sw, &dw);
                memset(&pp, 0, sizeof pp);
                pp.trans_b = 1;
                if (!st) st = kern_gemm_pack_b(p->ctx, &dw, &stp->pb, &pp);
                kern__free(p->ctx, tmp);
                if (st) goto wrap;
                kern_sparse24_free(p->ctx, stp->sw);
                stp->sw = NULL;
                kern__gp_log(p, "sparse24: linear '%s' on AMX tiles: the 2:4 weight expanded and prepacked dense",
                             nm);
                p->stats.packed_bytes += (size_t)(dsh[0] * dsh[1]) * 2;
                continue;
            }
            {
                kern_sparse24_info si;
                if (kern_sparse24_get_info(stp->sw, &si) == KERN_OK) p->stats.packed_bytes += si.bytes;
            }
        }
        continue;
    wrap: {
        char m[512];
        snprintf(m, sizeof m, "%s", kern_last_error());
        return kern__err(st, "kern_graph_plan_create: node '%s' (%s): %s", nm,
                         kern_graph_op_name(n->op), m);
    }
    }
    return KERN_OK;
}

KERN_API kern_status kern_graph_plan_create(kern_graph *g, kern_ctx *ctx,
                                            const kern_graph_plan_params *params,
                                            kern_graph_plan **out) {
    kern_graph_plan *p;
    kern_graph_plan_params prm;
    kern_status st;
    double t0 = kern__g_now(), t1;
    int i;
    if (!g || !out) return kern__err(KERN_ERR_ARG, "kern_graph_plan_create: g or out is NULL");
    if (!ctx) {
        ctx = kern_default_ctx();
        if (!ctx) return KERN_ERR_NOMEM;
    }
    memset(&prm, 0, sizeof prm);
    if (params) prm = *params;
    if (prm.cache_size < 0 || prm.cache_size > 64)
        return kern__err(KERN_ERR_ARG, "kern_graph_plan_create: cache_size=%d is outside 0..64",
                         prm.cache_size);
    if (g->n_outputs == 0)
        return kern__err(KERN_ERR_ARG, "kern_graph_plan_create: the graph has no outputs");
    p = (kern_graph_plan *)kern__alloc(ctx, sizeof *p);
    if (!p) return kern__err(KERN_ERR_NOMEM, "kern_graph_plan_create: out of memory");
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->src = g;
    p->prm = prm;
    p->n_threads = kern_ctx_threads(ctx);
    p->parallel_min = prm.parallel_min ? prm.parallel_min : 32768;
    p->stats.n_nodes_graph = (int)g->n_nodes;
    if ((st = kern__g_clone(g, &p->w)) != KERN_OK) goto fail;
    if ((st = kern__gp_bind(p, &prm)) != KERN_OK) goto fail;
    if ((st = kern__gp_binders(&p->w, p->binders)) != KERN_OK) goto fail;
    if ((st = kern__g_passes(p)) != KERN_OK) goto fail;
    if ((st = kern__gp_outputs(p)) != KERN_OK) goto fail;
    if ((st = kern__gp_structure(p)) != KERN_OK) goto fail;
    /* run-time memory, all allocated here, before the weights are prepared:
     * with a heap allocator the block then reuses memory freed earlier
     * instead of lying above the prepared weights, where a fresh plan
     * after a freed one would fault in new pages */
    p->n_inst = prm.cache_size ? prm.cache_size : 4;
    {
        /* everything a run uses, in one block (instances are touched only
         * when a binding first needs them) */
        size_t nv = (size_t)p->w.n_vals, ns = (size_t)p->n_steps + 1, ne = (size_t)p->w.n_ex + 1;
        size_t per = nv * sizeof(kern_tensor) + ns * sizeof(kern__gistep) + nv * sizeof(kern__gpatch) +
                     ne * sizeof(int64_t);
        size_t fixed = (size_t)p->n_inst * sizeof(kern__ginst) + ns * sizeof(kern__gctr) +
                       ns * (sizeof(double) + sizeof(int64_t)) +
                       (size_t)p->n_threads * p->scratch_floats * sizeof(float) + 8 * 64;
        char *m;
        per = (per + 63) & ~(size_t)63;
        m = (char *)kern__gp_alloc(p, fixed + (size_t)p->n_inst * per);
        if (!m) goto nomem;
#define KERN__GTAKE(ptr, T, n)                                                \
        do {                                                                  \
            ptr = (T *)(void *)m;                                             \
            m += (((n) * sizeof(T)) + 63) & ~(size_t)63;                      \
        } while (0)
        KERN__GTAKE(p->ctr, kern__gctr, ns);
        KERN__GTAKE(p->inst, kern__ginst, (size_t)p->n_inst);
        KERN__GTAKE(p->prof_s, double, ns);
        KERN__GTAKE(p->prof_calls, int64_t, ns);
        KERN__GTAKE(p->scratch, float, (size_t)p->n_threads * p->scratch_floats);
        memset(p->inst, 0, (size_t)p->n_inst * sizeof(kern__ginst));
        memset(p->prof_s, 0, ns * sizeof(double));
        memset(p->prof_calls, 0, ns * sizeof(int64_t));
        for (i = 0; i < p->n_inst; i++) {
            kern__ginst *I = &p->inst[i];
            KERN__GTAKE(I->T, kern_tensor, nv);
            KERN__GTAKE(I->is, kern__gistep, ns);
            KERN__GTAKE(I->patch, kern__gpatch, nv);
            KERN__GTAKE(I->exv, int64_t, ne);
        }
#undef KERN__GTAKE
    }
    if (!prm.external_arena && p->arena_bytes) {
        p->arena = kern__alloc(ctx, p->arena_bytes);
        if (!p->arena) goto nomem;
        p->arena_owned = 1;
        p->arena_set = 1;
    }
    t1 = kern__g_now();
    {
        struct timespec c0, c1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        if ((st = kern__gp_prepack(p)) != KERN_OK) goto fail;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        p->stats.prepack_cpu_seconds = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    }
    p->stats.prepack_seconds = kern__g_now() - t1;
    /* the binding at the bound checks every op once and sizes the family
     * workspace (one block, shared by the steps, which run one at a time) */
    {
        kern__ginst *I;
        if ((st = kern__gp_inst(p, p->bound, &I)) != KERN_OK) goto fail;
        if (I->fam_ws) {
            p->fam_ws_size = I->fam_ws;
            p->fam_ws = kern__alloc(ctx, p->fam_ws_size);
            if (!p->fam_ws) goto nomem;
        }
        p->fam_ws_sized = 1;
        if (!p->arena) I->valid = 0; /* rebuilt with the arena's address */
    }
    p->stats.plan_seconds = kern__g_now() - t0;
    p->prm.bind = NULL;
    p->prm.bounds = NULL;
    p->prm.quantize = NULL;
    p->prm.sparsify = NULL;
    *out = p;
    return KERN_OK;
nomem:
    st = kern__err(KERN_ERR_NOMEM, "kern_graph_plan_create: out of memory");
fail:
    {
        char m[512];
        snprintf(m, sizeof m, "%s", kern_last_error());
        kern_graph_plan_free(p);
        kern__err(st, "%s", m);
    }
    return st;
}

KERN_API kern_status kern_graph_plan_stats_get(const kern_graph_plan *p, kern_graph_plan_stats *s) {
    if (!p || !s) return kern__err(KERN_ERR_ARG, "kern_graph_plan_stats_get: NULL argument");
    *s = p->stats;
    return KERN_OK;
}
KERN_API size_t kern_graph_plan_arena_size(const kern_graph_plan *p) { return p ? p->arena_bytes : 0; }
KERN_API kern_status kern_graph_plan_set_arena(kern_graph_plan *p, void *arena, size_t size) {
    int i;
    if (!p) return kern__err(KERN_ERR_ARG, "kern_graph_plan_set_arena: plan is NULL");
    if (size < p->arena_bytes || (!arena && p->arena_bytes) || ((uintptr_t)arena & 63))
        return kern__err(KERN_ERR_ARG,
                         "kern_graph_plan_set_arena: the arena must be >= %zu bytes (got %zu) and "
                         "64-byte aligned",
                         p->arena_bytes, size);
    if (p->arena_owned) kern__free(p->ctx, p->arena);
    p->arena = arena;
    p->arena_owned = 0;
    p->arena_set = 1;
    for (i = 0; i < p->n_inst; i++) p->inst[i].valid = 0;
    return KERN_OK;
}
KERN_API const char *kern_graph_plan_report(const kern_graph_plan *p) {
    return p && p->report ? p->report : "";
}

KERN_API kern_status kern_graph_plan_value(const kern_graph_plan *p, const char *name,
                                           kern_tensor *out) {
    kern_graph_val v;
    if (!p || !name || !out) return kern__err(KERN_ERR_ARG, "kern_graph_plan_value: NULL argument");
    v = kern__g_lookup(&p->w, name);
    if (!v) return kern__err(KERN_ERR_ARG, "kern_graph_plan_value: no value '%s'", name);
    if (!p->pv[v].live)
        return kern__err(KERN_ERR_ARG, "kern_graph_plan_value: '%s' is not computed by this plan "
                         "(fused away or dead)", name);
    if (!p->prof_runs || !p->inst[p->cur].valid)
        return kern__err(KERN_ERR_ARG, "kern_graph_plan_value: the plan has not run");
    *out = p->inst[p->cur].T[v];
    return KERN_OK;
}

/* ============================================================== passes */

/* Pass context: consumers of every value over live nodes. */
typedef struct kern__gpx {
    kern_graph_plan *p;
    kern_graph *w;
    int32_t *cstart; /* value -> first entry in cons */
    int32_t *cons;   /* node index of each (value, consumer) pair */
    int32_t *is_out; /* graph output count per value */
    int32_t *fill;   /* scratch: next free entry per value */
    int64_t n_vals;  /* values when the lists were built */
    int64_t cap_vals, cap_cons; /* room in cstart/is_out/fill, cons */
    int fused;
} kern__gpx;

/* Rebuilds the consumer lists (the buffers are kept between passes and
 * grow only when the graph did). */
static kern_status kern__gpx_refresh(kern__gpx *x) {
    kern_graph *w = x->w;
    kern_ctx *ctx = x->p->ctx;
    int64_t i, total = 0, nv = w->n_vals + 1;
    int k;
    if (nv > x->cap_vals) {
        int32_t *m;
        kern__free(ctx, x->cstart);
        x->cstart = x->is_out = x->fill = NULL;
        x->cap_vals = 0;
        m = (int32_t *)kern__alloc(ctx, (size_t)(3 * (nv + 16)) * sizeof(int32_t));
        if (!m) goto nomem;
        x->cstart = m;
        x->is_out = m + nv + 16;
        x->fill = m + 2 * (nv + 16);
        x->cap_vals = nv + 16;
    }
    memset(x->cstart, 0, (size_t)nv * sizeof(int32_t));
    memset(x->is_out, 0, (size_t)nv * sizeof(int32_t));
    for (i = 0; i < w->n_nodes; i++) {
        const kern__gnode *n = &w->nodes[i];
        if (n->dead) continue;
        for (k = 0; k < kern__gop(n->op)->max_in; k++) /* no slot past the op's last */
            if (n->in[k]) { x->cstart[n->in[k] + 1]++; total++; }
    }
    for (i = 0; i < w->n_vals; i++) x->cstart[i + 1] += x->cstart[i];
    if (total + 1 > x->cap_cons) {
        kern__free(ctx, x->cons);
        x->cap_cons = 0;
        x->cons = (int32_t *)kern__alloc(ctx, (size_t)(total + 1 + total / 4) * sizeof(int32_t));
        if (!x->cons) goto nomem;
        x->cap_cons = total + 1 + total / 4;
    }
    memcpy(x->fill, x->cstart, (size_t)nv * sizeof(int32_t));
    for (i = 0; i < w->n_nodes; i++) {
        const kern__gnode *n = &w->nodes[i];
        if (n->dead) continue;
        for (k = 0; k < kern__gop(n->op)->max_in; k++)
            if (n->in[k]) x->cons[x->fill[n->in[k]]++] = (int32_t)i;
    }
    for (i = 0; i < w->n_outputs; i++) x->is_out[w->outputs[i]]++;
    x->n_vals = w->n_vals;
    return KERN_OK;
nomem:
    x->n_vals = 0; /* no lists: every value reads as unused */
    return kern__err(KERN_ERR_NOMEM, "kern_graph_plan_create: out of memory in a pass");
}

static int kern__gpx_nuses(const kern__gpx *x, kern_graph_val v) {
    if (v >= x->n_vals) return 0; /* made after the lists were built */
    return x->cstart[v + 1] - x->cstart[v] + x->is_out[v];
}
/* distinct consumer nodes of v (+ graph outputs) */
static int kern__gpx_nconsumers(const kern__gpx *x, kern_graph_val v) {
    int c, k, n;
    if (v >= x->n_vals) return 0;
    n = x->is_out[v];
    for (c = x->cstart[v]; c < x->cstart[v + 1]; c++) {
        int dup = 0;
        for (k = x->cstart[v]; k < c; k++) dup |= x->cons[k] == x->cons[c];
        n += !dup;
    }
    return n;
}
/* the only consumer of v (NULL if v has other uses or is an output) */
static kern__gnode *kern__gpx_single(const kern__gpx *x, kern_graph_val v) {
    kern__gnode *n;
    if (!v || kern__gpx_nuses(x, v) != 1 || x->is_out[v]) return NULL;
    n = &x->w->nodes[x->cons[x->cstart[v]]];
    /* the lists are refreshed between passes, not after every rewrite: a
     * consumer a rewrite removed is no answer */
    return n->dead ? NULL : n;
}
/* producer of v if it is a live node of op `op` (op 0 = any) */
/* The bias input slot of a GEMM-family node (the residual follows it), 0
 * for other ops: qlinear has its scales before the bias. */
static int kern__gpx_bias_slot(kern_graph_op op) {
    switch (op) {
    case KERN_GRAPH_OP_LINEAR: case KERN_GRAPH_OP_MATMUL: case KERN_GRAPH_OP_SPARSE24_LINEAR:
        return 2;
    case KERN_GRAPH_OP_QLINEAR: return 3;
    default: return 0;
    }
}

static kern__gnode *kern__gpx_prod(const kern__gpx *x, kern_graph_val v, kern_graph_op op) {
    const kern__gval *val;
    kern__gnode *n;
    if (!v) return NULL;
    val = &x->w->vals[v];
    if (val->kind != KERN_GRAPH_VAL_NODE) return NULL;
    n = &x->w->nodes[val->node];
    if (n->dead || n->out[val->oidx] != v) return NULL;
    if (op && n->op != op) return NULL;
    return n;
}
/* a 1-element constant */
static int kern__gpx_const(const kern__gpx *x, kern_graph_val v, double *val) {
    const kern__gval *c;
    if (!v) return 0;
    c = &x->w->vals[v];
    if (c->kind != KERN_GRAPH_VAL_CONST || x->w->k[c->aux].n != 1) return 0;
    *val = x->w->k[c->aux].v[0];
    return 1;
}
static int kern__gpx_near(double a, double b) { return fabs(a - b) <= 1e-4 * fabs(b) + 1e-12; }
static int kern__gpx_same_shape(const kern_graph *w, kern_graph_val a, kern_graph_val b) {
    const kern__gval *x = &w->vals[a], *y = &w->vals[b];
    return x->ndim == y->ndim && memcmp(x->dims, y->dims, sizeof(int64_t) * (size_t)x->ndim) == 0;
}
/* the other input of a binary node (slot other than the one holding v) */
static kern_graph_val kern__gpx_other(const kern__gnode *n, kern_graph_val v) {
    return n->in[0] == v ? n->in[1] : n->in[0];
}
static const char *kern__gpx_name(const kern__gpx *x, const kern__gnode *n) {
    return kern__g_vname(x->w, n->out[0]);
}
/* The node's name into buf (KERN__G_NAME_MAX + 1 bytes): for a pass that
 * logs it after a rewrite, whose note may move the name table. */
static void kern__gpx_name_copy(const kern__gpx *x, const kern__gnode *n, char *buf) {
    const char *nm = kern__gpx_name(x, n);
    size_t l = strlen(nm);
    if (l > KERN__G_NAME_MAX) l = KERN__G_NAME_MAX;
    memcpy(buf, nm, l);
    buf[l] = 0;
}

/* Product factors: flattens a tree of single-use mul / scale / div-by-
 * constant / pow(.,2|3) nodes under v into leaf values and one constant.
 * nodes[] receives the interior nodes. Returns 0 when it overflows. */
typedef struct kern__gfac {
    kern_graph_val leaf[8];
    int nl;
    double c;
    kern__gnode *nodes[16];
    int nn;
} kern__gfac;
static int kern__gpx_factors(const kern__gpx *x, kern_graph_val v, int top, kern__gfac *f) {
    kern__gnode *n = kern__gpx_prod(x, v, KERN_GRAPH_OP_NONE);
    double c;
    if (kern__gpx_const(x, v, &c)) {
        f->c *= c;
        return 1;
    }
    if (n && (top || kern__gpx_single(x, v)) && f->nn < 16) {
        if (n->op == KERN_GRAPH_OP_MUL) {
            f->nodes[f->nn++] = n;
            return kern__gpx_factors(x, n->in[0], 0, f) && kern__gpx_factors(x, n->in[1], 0, f);
        }
        if (n->op == KERN_GRAPH_OP_DIV && kern__gpx_const(x, n->in[1], &c) && c != 0) {
            f->nodes[f->nn++] = n;
            f->c /= c;
            return kern__gpx_factors(x, n->in[0], 0, f);
        }
        if (n->op == KERN_GRAPH_OP_SCALE) {
            f->nodes[f->nn++] = n;
            f->c *= n->a.alpha_set ? n->a.alpha : 1.0;
            return kern__gpx_factors(x, n->in[0], 0, f);
        }
        if (n->op == KERN_GRAPH_OP_POW && (n->a.exponent == 2.0f || n->a.exponent == 3.0f)) {
            int k;
            f->nodes[f->nn++] = n;
            for (k = 0; k < (int)n->a.exponent; k++)
                if (!kern__gpx_factors(x, n->in[0], 0, f)) return 0;
            return 1;
        }
    }
    if (f->nl >= 8) return 0;
    f->leaf[f->nl++] = v;
    return 1;
}
static void kern__gfac_init(kern__gfac *f) {
    memset(f, 0, sizeof *f);
    f->c = 1.0;
}
/* 1 if the factors are exactly the multiset {a x na, b x nb} */
static int kern__gfac_is(const kern__gfac *f, kern_graph_val a, int na, kern_graph_val b, int nb) {
    int i, ca = 0, cb = 0;
    for (i = 0; i < f->nl; i++) {
        if (f->leaf[i] == a && ca < na) ca++;
        else if (f->leaf[i] == b && cb < nb) cb++;
        else return 0;
    }
    return ca == na && cb == nb;
}

/* Turns node `top` into op(inputs) keeping its first output value. */
static kern_status kern__gpx_rewrite(kern__gpx *x, kern__gnode *top, kern_graph_op op,
                                     const kern_graph_val *in, int n_in, const kern_graph_attrs *a,
                                     const char *what) {
    kern_graph *w = x->w;
    kern_graph_node_desc d;
    kern__ginf c;
    kern_status st;
    kern_graph_val y = top->out[0];
    int i;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.name = kern__g_vname(w, y);
    for (i = 0; i < n_in; i++) d.inputs[i] = in[i];
    if (a) d.attrs = *a;
    st = kern__g_infer_node(w, &d, &c);
    if (st) return st;
    if (c.n_out != 1 || c.odt[0] != w->vals[y].dtype || c.ond[0] != w->vals[y].ndim ||
        memcmp(c.od[0], w->vals[y].dims, sizeof(int64_t) * (size_t)c.ond[0]) != 0)
        return kern__err(KERN_ERR_SHAPE, "the fused %s would change the shape of '%s'",
                         kern_graph_op_name(op), d.name);
    top->op = op;
    top->n_in = c.n_in;
    memset(top->in, 0, sizeof top->in);
    for (i = 0; i < n_in; i++) top->in[i] = in[i];
    top->a = d.attrs;
    top->n_out = 1;
    kern__gw_note(w, top, what);
    x->fused++;
    kern__gw_dce(x->p); /* the pattern's other nodes are unused now */
    return kern__gpx_refresh(x);
}

/* The tail shared by both GELU forms: a = add(t, 1) (single use), then a
 * mul tree {x, a, 0.5}. Returns the top node or NULL (reason in *why). */
static kern__gnode *kern__gpx_gelu_tail(const kern__gpx *x, kern_graph_val t, kern_graph_val xv,
                                        const char **why) {
    kern__gnode *add = kern__gpx_single(x, t), *top, *up;
    double one;
    kern__gfac f;
    if (!add || add->op != KERN_GRAPH_OP_ADD ||
        !kern__gpx_const(x, kern__gpx_other(add, t), &one) || !kern__gpx_near(one, 1.0)) {
        *why = "the erf/tanh is not used once, by an add of 1";
        return NULL;
    }
    top = kern__gpx_single(x, add->out[0]);
    if (!top || top->op != KERN_GRAPH_OP_MUL) {
        *why = "1 + erf/tanh is not used once, by a mul";
        return NULL;
    }
    while ((up = kern__gpx_single(x, top->out[0])) && up->op == KERN_GRAPH_OP_MUL) top = up;
    for (;;) {
        kern__gfac_init(&f);
        if (kern__gpx_factors(x, top->out[0], 1, &f) && kern__gfac_is(&f, xv, 1, add->out[0], 1) &&
            kern__gpx_near(f.c, 0.5))
            return top;
        /* maybe the tree grew past the GELU: try one level down */
        if (top->in[0] && kern__gpx_prod(x, top->in[0], KERN_GRAPH_OP_MUL) &&
            kern__gpx_single(x, top->in[0]))
            top = kern__gpx_prod(x, top->in[0], KERN_GRAPH_OP_MUL);
        else if (top->in[1] && kern__gpx_prod(x, top->in[1], KERN_GRAPH_OP_MUL) &&
                 kern__gpx_single(x, top->in[1]))
            top = kern__gpx_prod(x, top->in[1], KERN_GRAPH_OP_MUL);
        else
            break;
    }
    *why = "the product around 1 + erf/tanh is not 0.5 * x * (1 + ...)";
    return NULL;
}

static kern_status kern__gpx_gelu(kern__gpx *x) {
    kern_graph *w = x->w;
    int64_t i;
    for (i = 0; i < w->n_nodes; i++) {
        kern__gnode *n = &w->nodes[i], *top;
        const char *why = NULL;
        kern_graph_val xv = 0;
        int tanh_form = n->op == KERN_GRAPH_OP_TANH;
        kern__gfac f;
        if (n->dead || (n->op != KERN_GRAPH_OP_ERF && !tanh_form)) continue;
        kern__gfac_init(&f);
        if (!kern__gpx_factors(x, n->in[0], 0, &f)) continue;
        if (!tanh_form) {
            /* erf(x / sqrt 2) */
            if (f.nl != 1 || !kern__gpx_near(f.c, 0.70710678118654752)) continue;
            xv = f.leaf[0];
        } else {
            /* tanh(c1 * (x + c2 * x^3)) */
            kern__gnode *s;
            kern__gfac g;
            kern_graph_val cube;
            if (f.nl != 1 || !kern__gpx_near(f.c, 0.7978845608028654)) continue;
            s = kern__gpx_prod(x, f.leaf[0], KERN_GRAPH_OP_ADD);
            if (!s) continue;
            kern__gfac_init(&g);
            cube = s->in[1];
            if (!kern__gpx_factors(x, cube, 0, &g) || !kern__gfac_is(&g, s->in[0], 3, 0, 0)) {
                cube = s->in[0];
                kern__gfac_init(&g);
                if (!kern__gpx_factors(x, cube, 0, &g) || !kern__gfac_is(&g, s->in[1], 3, 0, 0)) {
                    kern__gp_log(x->p, "no match: gelu_tanh at '%s': the argument of tanh is not "
                                 "c1 * (x + c2 * x^3)", kern__gpx_name(x, n));
                    continue;
                }
            }
            if (!kern__gpx_near(g.c, 0.044715)) {
                kern__gp_log(x->p, "no match: gelu_tanh at '%s': cubic coefficient %g is not 0.044715",
                             kern__gpx_name(x, n), g.c);
                continue;
            }
            if (!kern__gpx_single(x, f.leaf[0])) {
                kern__gp_log(x->p, "no match: gelu_tanh at '%s': x + c2 x^3 has other uses",
                             kern__gpx_name(x, n));
                continue;
            }
            xv = g.leaf[0];
        }
        top = kern__gpx_gelu_tail(x, n->out[0], xv, &why);
        if (!top) {
            kern__gp_log(x->p, "no match: %s at '%s': %s", tanh_form ? "gelu_tanh" : "gelu",
                         kern__gpx_name(x, n), why);
            continue;
        }
        {
            kern_status st = kern__gpx_rewrite(x, top, tanh_form ? KERN_GRAPH_OP_GELU_TANH : KERN_GRAPH_OP_GELU,
                                               &xv, 1, NULL, tanh_form ? "decomposed gelu_tanh"
                                                                       : "decomposed gelu");
            if (st) return st;
            kern__gp_log(x->p, "fuse: decomposed %s -> '%s'", tanh_form ? "gelu_tanh" : "gelu",
                         kern__gpx_name(x, top));
        }
    }
    return KERN_OK;
}

/* From ve = v + eps, 1/sqrt(ve) in its spellings: rsqrt(ve),
 * reciprocal(sqrt(ve)), div(1, sqrt(ve)) (kind 1: multiply by *r), or
 * sqrt(ve) for a division (kind 2: divide by *r). 0 = none. */
static int kern__gpx_rstd(const kern__gpx *x, kern_graph_val ve, kern_graph_val *r) {
    kern__gnode *q = kern__gpx_single(x, ve), *c;
    double one;
    if (!q) return 0;
    if (q->op == KERN_GRAPH_OP_RSQRT) { *r = q->out[0]; return 1; }
    if (q->op != KERN_GRAPH_OP_SQRT) return 0;
    c = kern__gpx_single(x, q->out[0]);
    if (c && (c->op == KERN_GRAPH_OP_RECIPROCAL ||
              (c->op == KERN_GRAPH_OP_DIV && c->in[1] == q->out[0] &&
               kern__gpx_const(x, c->in[0], &one) && one == 1.0))) {
        *r = c->out[0];
        return 1;
    }
    *r = q->out[0];
    return 2;
}

/* v + eps with eps a constant: returns v, *eps set. */
static kern_graph_val kern__gpx_add_eps(const kern__gpx *x, kern_graph_val ve, double *eps) {
    kern__gnode *a = kern__gpx_prod(x, ve, KERN_GRAPH_OP_ADD);
    if (!a || !kern__gpx_single(x, ve)) return 0;
    if (kern__gpx_const(x, a->in[1], eps)) return a->in[0];
    if (kern__gpx_const(x, a->in[0], eps)) return a->in[1];
    return 0;
}

/* The node normalizing num by r (kind 1: num * r; kind 2: num / r), or
 * NULL. */
static kern__gnode *kern__gpx_normalize(const kern__gpx *x, kern_graph_val num, kern_graph_val r,
                                        int kind) {
    kern__gnode *m = kern__gpx_single(x, r);
    if (!m) return NULL;
    if (kind == 1 && m->op == KERN_GRAPH_OP_MUL &&
        ((m->in[0] == num && m->in[1] == r) || (m->in[1] == num && m->in[0] == r)))
        return m;
    if (kind == 2 && m->op == KERN_GRAPH_OP_DIV && m->in[0] == num && m->in[1] == r) return m;
    return NULL;
}

/* Optional affine tail: * weight [H], + bias [H]. */
static kern__gnode *kern__gpx_affine(const kern__gpx *x, kern__gnode *top, kern_graph_val *wt,
                                     kern_graph_val *bs, int allow_bias) {
    kern_graph *w = x->w;
    kern__gnode *m = kern__gpx_single(x, top->out[0]);
    const kern__gval *y = &w->vals[top->out[0]];
    int64_t h = y->dims[y->ndim - 1];
    *wt = *bs = 0;
    if (m && m->op == KERN_GRAPH_OP_MUL) {
        kern_graph_val o = kern__gpx_other(m, top->out[0]);
        const kern__gval *ov = &w->vals[o];
        if (ov->ndim == 1 && ov->dims[0] == h && kern_dtype_is_float(ov->dtype) &&
            w->vals[m->out[0]].dtype == y->dtype) {
            *wt = o;
            top = m;
            m = kern__gpx_single(x, top->out[0]);
        }
    }
    if (allow_bias && m && m->op == KERN_GRAPH_OP_ADD) {
        kern_graph_val o = kern__gpx_other(m, top->out[0]);
        const kern__gval *ov = &w->vals[o];
        if (ov->ndim == 1 && ov->dims[0] == h && kern_dtype_is_float(ov->dtype) &&
            w->vals[m->out[0]].dtype == y->dtype) {
            *bs = o;
            top = m;
        }
    }
    return top;
}

static kern_status kern__gpx_norm_emit(kern__gpx *x, kern__gnode *top, kern_graph_op op,
                                       kern_graph_val xv, kern_graph_val wt, kern_graph_val bs,
                                       double eps, const char *what) {
    kern_graph_val in[3];
    kern_graph_attrs a;
    kern_status st;
    memset(&a, 0, sizeof a);
    a.eps_set = 1;
    a.eps = (float)eps;
    in[0] = xv;
    in[1] = wt;
    in[2] = bs;
    st = kern__gpx_rewrite(x, top, op, in, 3, &a, what);
    if (st) return st;
    kern__gp_log(x->p, "fuse: %s -> %s '%s'%s%s", what, kern_graph_op_name(op), kern__gpx_name(x, top),
                 wt ? " with weight" : "", bs ? " and bias" : "");
    return KERN_OK;
}

static kern_status kern__gpx_layernorm(kern__gpx *x) {
    kern_graph *w = x->w;
    int64_t i;
    for (i = 0; i < w->n_nodes; i++) {
        kern__gnode *m1 = &w->nodes[i], *d = NULL, *sq = NULL, *v = NULL, *nrm = NULL, *top;
        kern_graph_val xv, r = 0, ve, var, wt, bs;
        int c, kind = 0;
        double eps;
        const char *why = NULL;
        if (m1->dead || m1->op != KERN_GRAPH_OP_REDUCE_MEAN) continue;
        xv = m1->in[0];
        /* d = x - mean among the consumers of the mean */
        for (c = x->cstart[m1->out[0]]; c < x->cstart[m1->out[0] + 1]; c++) {
            kern__gnode *q = &w->nodes[x->cons[c]];
            if (q->op == KERN_GRAPH_OP_SUB && q->in[0] == xv && q->in[1] == m1->out[0]) d = q;
        }
        if (!d) continue; /* not a LayerNorm anchor (RMSNorm is matched below) */
        if (kern__gpx_nconsumers(x, m1->out[0]) == 1) {
            /* form 1: var = mean((x - mean)^2) */
            int c2;
            for (c2 = x->cstart[d->out[0]]; c2 < x->cstart[d->out[0] + 1]; c2++) {
                kern__gnode *q = &w->nodes[x->cons[c2]];
                kern__gfac f;
                kern__gfac_init(&f);
                if ((q->op == KERN_GRAPH_OP_POW || q->op == KERN_GRAPH_OP_MUL) &&
                    kern__gpx_factors(x, q->out[0], 1, &f) && kern__gfac_is(&f, d->out[0], 2, 0, 0) &&
                    f.c == 1.0 && f.nn == 1)
                    sq = q;
            }
            if (!sq) { why = "x - mean is not squared"; goto nomatch; }
            if (kern__gpx_nconsumers(x, d->out[0]) != 2) {
                why = "x - mean has uses besides the square and the normalization";
                goto nomatch;
            }
            v = kern__gpx_single(x, sq->out[0]);
            if (!v || v->op != KERN_GRAPH_OP_REDUCE_MEAN) {
                why = "the square is not averaged over the last dim";
                goto nomatch;
            }
            var = v->out[0];
        } else {
            /* form 2: var = mean(x^2) - mean^2 */
            kern__gnode *sub = NULL;
            int c2;
            for (c2 = x->cstart[m1->out[0]]; c2 < x->cstart[m1->out[0] + 1]; c2++) {
                kern__gnode *q = &w->nodes[x->cons[c2]];
                kern__gfac f;
                kern__gfac_init(&f);
                if ((q->op == KERN_GRAPH_OP_POW || q->op == KERN_GRAPH_OP_MUL) &&
                    kern__gpx_factors(x, q->out[0], 1, &f) && kern__gfac_is(&f, m1->out[0], 2, 0, 0) &&
                    f.c == 1.0 && f.nn == 1) {
                    kern__gnode *s2 = kern__gpx_single(x, q->out[0]);
                    if (s2 && s2->op == KERN_GRAPH_OP_SUB && s2->in[1] == q->out[0]) sub = s2;
                }
            }
            if (!sub || kern__gpx_nconsumers(x, m1->out[0]) != 2) {
                why = "the mean is used besides x - mean and mean^2 (E[x^2] - E[x]^2 form)";
                goto nomatch;
            }
            v = kern__gpx_prod(x, sub->in[0], KERN_GRAPH_OP_REDUCE_MEAN);
            if (!v || !kern__gpx_single(x, sub->in[0])) { why = "E[x^2] is not a mean"; goto nomatch; }
            {
                kern__gfac f;
                kern__gfac_init(&f);
                sq = kern__gpx_prod(x, v->in[0], KERN_GRAPH_OP_NONE);
                if (!sq || !kern__gpx_single(x, v->in[0]) ||
                    !kern__gpx_factors(x, v->in[0], 1, &f) || !kern__gfac_is(&f, xv, 2, 0, 0) || f.c != 1.0) {
                    why = "E[x^2] does not average x * x";
                    goto nomatch;
                }
            }
            if (kern__gpx_nuses(x, d->out[0]) != 1) { why = "x - mean has other uses"; goto nomatch; }
            var = sub->out[0];
        }
        ve = 0;
        {
            kern__gnode *ae = kern__gpx_single(x, var);
            if (!ae || ae->op != KERN_GRAPH_OP_ADD) { why = "the variance is not followed by + eps"; goto nomatch; }
            if (!kern__gpx_add_eps(x, ae->out[0], &eps) && !(kern__gpx_const(x, kern__gpx_other(ae, var), &eps))) {
                why = "eps is not a constant";
                goto nomatch;
            }
            if (!kern__gpx_const(x, kern__gpx_other(ae, var), &eps)) { why = "eps is not a constant"; goto nomatch; }
            ve = ae->out[0];
        }
        kind = kern__gpx_rstd(x, ve, &r);
        if (!kind) { why = "var + eps does not go (once) through rsqrt / sqrt"; goto nomatch; }
        nrm = kern__gpx_normalize(x, d->out[0], r, kind);
        if (!nrm) { why = "x - mean is not multiplied by rsqrt(var + eps) (or divided by its sqrt)"; goto nomatch; }
        top = kern__gpx_affine(x, nrm, &wt, &bs, 1);
        {
            kern_status st = kern__gpx_norm_emit(x, top, KERN_GRAPH_OP_LAYER_NORM, xv, wt, bs, eps,
                                                 "decomposed layer_norm");
            if (st == KERN_ERR_NOMEM) return st;
            if (st) { why = kern_last_error(); goto nomatch; }
        }
        continue;
    nomatch:
        kern__gp_log(x->p, "no match: layer_norm at '%s': %s", kern__gpx_name(x, m1), why);
    }
    return KERN_OK;
}

static kern_status kern__gpx_rmsnorm(kern__gpx *x) {
    kern_graph *w = x->w;
    int64_t i;
    for (i = 0; i < w->n_nodes; i++) {
        kern__gnode *m = &w->nodes[i], *sq, *ae, *nrm, *top;
        kern_graph_val xv, r, ve, wt, bs;
        kern__gfac f;
        double eps;
        int kind;
        const char *why;
        if (m->dead || m->op != KERN_GRAPH_OP_REDUCE_MEAN) continue;
        sq = kern__gpx_prod(x, m->in[0], KERN_GRAPH_OP_NONE);
        kern__gfac_init(&f);
        if (!sq || !kern__gpx_single(x, m->in[0]) || !kern__gpx_factors(x, m->in[0], 1, &f) ||
            f.nl != 2 || f.leaf[0] != f.leaf[1] || f.c != 1.0)
            continue;
        xv = f.leaf[0];
        ae = kern__gpx_single(x, m->out[0]);
        if (!ae || ae->op != KERN_GRAPH_OP_ADD || !kern__gpx_const(x, kern__gpx_other(ae, m->out[0]), &eps)) {
            /* E[x^2] of a LayerNorm in the E[x^2] - E[x]^2 form is fine */
            if (ae && ae->op == KERN_GRAPH_OP_SUB) continue;
            why = "mean(x^2) is not followed by + eps";
            goto nomatch;
        }
        ve = ae->out[0];
        kind = kern__gpx_rstd(x, ve, &r);
        if (!kind) { why = "mean(x^2) + eps does not go (once) through rsqrt / sqrt"; goto nomatch; }
        nrm = kern__gpx_normalize(x, xv, r, kind);
        if (!nrm) { why = "x is not multiplied by rsqrt(mean(x^2) + eps)"; goto nomatch; }
        top = kern__gpx_affine(x, nrm, &wt, &bs, 0);
        {
            kern_status st = kern__gpx_norm_emit(x, top, KERN_GRAPH_OP_RMS_NORM, xv, wt, bs, eps,
                                                 "decomposed rms_norm");
            if (st == KERN_ERR_NOMEM) return st;
            if (st) { why = kern_last_error(); goto nomatch; }
        }
        continue;
    nomatch:
        kern__gp_log(x->p, "no match: rms_norm at '%s': %s", kern__gpx_name(x, m), why);
    }
    return KERN_OK;
}

/* k repeated for GQA as HF's repeat_kv does: reshape(expand(reshape(k0,
 * [B,Hkv,1,L,D]), [B,Hkv,G,L,D]), [B,Hkv*G,L,D]) -> k0 */
static kern_graph_val kern__gpx_unrepeat(const kern__gpx *x, kern_graph_val k) {
    kern_graph *w = x->w;
    kern__gnode *r2 = kern__gpx_prod(x, k, KERN_GRAPH_OP_RESHAPE), *e, *r1;
    const kern__gval *k0v, *ev;
    if (!r2 || !kern__gpx_single(x, k)) return 0;
    e = kern__gpx_prod(x, r2->in[0], KERN_GRAPH_OP_EXPAND);
    if (!e || !kern__gpx_single(x, r2->in[0])) return 0;
    r1 = kern__gpx_prod(x, e->in[0], KERN_GRAPH_OP_RESHAPE);
    if (!r1 || !kern__gpx_single(x, e->in[0])) return 0;
    k0v = &w->vals[r1->in[0]];
    ev = &w->vals[e->out[0]];
    if (k0v->ndim != 4 || ev->ndim != 5 || ev->dims[0] != k0v->dims[0] || ev->dims[1] != k0v->dims[1] ||
        ev->dims[3] != k0v->dims[2] || ev->dims[4] != k0v->dims[3] ||
        w->vals[r1->out[0]].dims[2] != 1)
        return 0;
    return r1->in[0];
}

static kern_status kern__gpx_attention(kern__gpx *x) {
    kern_graph *w = x->w;
    int64_t i;
    for (i = 0; i < w->n_nodes; i++) {
        kern__gnode *sm = &w->nodes[i], *pv, *qk, *n;
        kern_graph_val s, mask = 0, q, k, v, in[4];
        double scale = 1.0, c;
        kern_graph_attrs a;
        const char *why;
        if (sm->dead || sm->op != KERN_GRAPH_OP_SOFTMAX) continue;
        s = sm->in[0];
        /* + mask */
        n = kern__gpx_prod(x, s, KERN_GRAPH_OP_ADD);
        if (n && kern__gpx_single(x, s)) {
            kern__gnode *l = kern__gpx_prod(x, n->in[0], KERN_GRAPH_OP_NONE);
            kern_graph_val sc = n->in[0];
            mask = n->in[1];
            if (!l || (l->op != KERN_GRAPH_OP_MATMUL && l->op != KERN_GRAPH_OP_MUL &&
                       l->op != KERN_GRAPH_OP_DIV && l->op != KERN_GRAPH_OP_SCALE)) {
                sc = n->in[1];
                mask = n->in[0];
            }
            s = sc;
        }
        /* * scale */
        n = kern__gpx_prod(x, s, KERN_GRAPH_OP_NONE);
        if (n && kern__gpx_single(x, s) &&
            (n->op == KERN_GRAPH_OP_MUL || n->op == KERN_GRAPH_OP_DIV || n->op == KERN_GRAPH_OP_SCALE)) {
            if (n->op == KERN_GRAPH_OP_SCALE) { scale = n->a.alpha_set ? n->a.alpha : 1.0; s = n->in[0]; }
            else if (n->op == KERN_GRAPH_OP_DIV && kern__gpx_const(x, n->in[1], &c) && c != 0) {
                scale = 1.0 / c;
                s = n->in[0];
            } else if (n->op == KERN_GRAPH_OP_MUL && kern__gpx_const(x, n->in[1], &c)) { scale = c; s = n->in[0]; }
            else if (n->op == KERN_GRAPH_OP_MUL && kern__gpx_const(x, n->in[0], &c)) { scale = c; s = n->in[1]; }
        }
        qk = kern__gpx_prod(x, s, KERN_GRAPH_OP_MATMUL);
        if (!qk || !kern__gpx_single(x, s)) continue; /* not attention */
        if (qk->in[2] || qk->in[3] || qk->a.act || qk->a.out_scale != 0 || qk->a.trans_a) {
            why = "q k^T carries an epilogue or trans_a";
            goto nomatch;
        }
        if (qk->a.alpha_set) scale *= qk->a.alpha;
        q = qk->in[0];
        k = qk->in[1];
        if (!qk->a.trans_b) {
            kern__gnode *t = kern__gpx_prod(x, k, KERN_GRAPH_OP_TRANSPOSE);
            int nd = w->vals[k].ndim, a0, a1;
            if (!t || !kern__gpx_single(x, k)) { why = "k is not transposed"; goto nomatch; }
            a0 = (int)(t->a.axis < 0 ? t->a.axis + nd : t->a.axis);
            a1 = (int)(t->a.axis2 < 0 ? t->a.axis2 + nd : t->a.axis2);
            if (!((a0 == nd - 1 && a1 == nd - 2) || (a0 == nd - 2 && a1 == nd - 1))) {
                why = "k is transposed on other dims than the last two";
                goto nomatch;
            }
            k = t->in[0];
        }
        pv = kern__gpx_single(x, sm->out[0]);
        if (!pv || pv->op != KERN_GRAPH_OP_MATMUL || pv->in[0] != sm->out[0] || pv->in[2] ||
            pv->in[3] || pv->a.act || pv->a.trans_a || pv->a.trans_b || pv->a.alpha_set ||
            pv->a.out_scale != 0) {
            why = "the probabilities are not multiplied by v (plain matmul)";
            goto nomatch;
        }
        v = pv->in[1];
        if (w->vals[q].ndim != 4 || w->vals[k].ndim != 4 || w->vals[v].ndim != 4) {
            why = "q, k, v are not 4-D";
            goto nomatch;
        }
        memset(&a, 0, sizeof a);
        a.scale = (float)scale;
        {
            kern_graph_val k0 = kern__gpx_unrepeat(x, k), v0 = kern__gpx_unrepeat(x, v);
            if (k0 && v0) {
                k = k0;
                v = v0;
                a.enable_gqa = 1;
            }
        }
        in[0] = q;
        in[1] = k;
        in[2] = v;
        in[3] = mask;
        {
            kern_status st = kern__gpx_rewrite(x, pv, KERN_GRAPH_OP_SDPA, in, 4, &a,
                                               a.enable_gqa ? "decomposed attention (gqa)"
                                                            : "decomposed attention");
            if (st == KERN_ERR_NOMEM) return st;
            if (st) { why = kern_last_error(); goto nomatch; }
            kern__gp_log(x->p, "fuse: decomposed attention -> sdpa '%s' (scale %g%s%s)",
                         kern__gpx_name(x, pv), scale, mask ? ", mask" : "", a.enable_gqa ? ", gqa" : "");
        }
        continue;
    nomatch:
        kern__gp_log(x->p, "no match: attention at softmax '%s': %s", kern__gpx_name(x, sm), why);
    }
    return KERN_OK;
}

/* Glob match with * and ?, against each comma-separated pattern. */
static int kern__g_glob1(const char *p, size_t pl, const char *s) {
    if (pl == 0) return *s == 0;
    if (*p == '*') {
        for (;; s++) {
            if (kern__g_glob1(p + 1, pl - 1, s)) return 1;
            if (!*s) return 0;
        }
    }
    if (!*s) return 0;
    if (*p == '?' || *p == *s) return kern__g_glob1(p + 1, pl - 1, s + 1);
    return 0;
}
static int kern__g_glob(const char *pats, const char *s) {
    while (*pats) {
        const char *e = pats;
        while (*e && *e != ',') e++;
        if (kern__g_glob1(pats, (size_t)(e - pats), s)) return 1;
        pats = *e ? e + 1 : e;
    }
    return 0;
}

static kern_status kern__gpx_transforms(kern__gpx *x) {
    kern_graph *w = x->w;
    const kern_graph_plan_params *prm = &x->p->prm;
    int64_t i;
    kern_status st;
    for (i = 0; i < w->n_nodes; i++) {
        kern__gnode *n = &w->nodes[i];
        char nm[KERN__G_NAME_MAX + 1]; /* a copy: the rewrite's note may move the names */
        int q, s, s24;
        kern_graph_val wt, in[5];
        if (n->dead || n->op != KERN_GRAPH_OP_LINEAR) continue;
        kern__gpx_name_copy(x, n, nm);
        q = prm->quantize && kern__g_glob(prm->quantize, nm);
        s = prm->sparsify && kern__g_glob(prm->sparsify, nm);
        if (!q && !s) continue;
        wt = n->in[1];
        if (w->vals[wt].kind != KERN_GRAPH_VAL_WEIGHT) {
            kern__gp_log(x->p, "no %s: '%s': the weight is computed, not a graph weight",
                         q ? "quantize" : "sparsify", nm);
            continue;
        }
        if (q && s && w->vals[wt].dims[1] % 4) {
            kern__gp_log(x->p, "no sparsify: '%s': K=%lld is not a multiple of 4 (quantized only)", nm,
                         (long long)w->vals[wt].dims[1]);
            s = 0;
        }
        s24 = s && !q; /* both patterns: a qlinear with prune=1, qlinear's rules */
        /* qlinear takes every act and glu; sparse24_linear gelu or none */
        if (n->a.alpha_set || n->a.out_scale != 0 ||
            (s24 && (n->a.glu || (n->a.act != KERN_ACT_NONE && n->a.act != KERN_ACT_GELU &&
                                n->a.act != KERN_ACT_GELU_TANH)))) {
            kern__gp_log(x->p, "no %s: '%s': %s%s / alpha / out_scale have no %s epilogue",
                         q ? "quantize" : "sparsify", nm, n->a.glu ? "glu, act " : "act ",
                         kern_act_name(n->a.act), q ? "int8" : "2:4");
            continue;
        }
        if (q && w->vals[n->in[0]].dtype != KERN_F32 && w->vals[n->in[0]].dtype != KERN_BF16) {
            kern__gp_log(x->p, "no quantize: '%s': x is %s", nm, kern_dtype_name(w->vals[n->in[0]].dtype));
            continue;
        }
        if (s24 && w->vals[wt].dims[1] % 4) {
            kern__gp_log(x->p, "no sparsify: '%s': K=%lld is not a multiple of 4", nm,
                         (long long)w->vals[wt].dims[1]);
            continue;
        }
        memset(in, 0, sizeof in);
        {
            kern_graph_attrs a;
            memset(&a, 0, sizeof a);
            a.act = n->a.act;
            in[0] = n->in[0];
            in[1] = wt;
            if (q) {
                a.glu = n->a.glu;
                a.prune = s;
                in[3] = n->in[2];
                in[4] = n->in[3];
            } else {
                in[2] = n->in[2];
                in[3] = n->in[3];
                a.prune = 1;
            }
            st = kern__gpx_rewrite(x, n, q ? KERN_GRAPH_OP_QLINEAR : KERN_GRAPH_OP_SPARSE24_LINEAR, in,
                                   q ? 5 : 4, &a, q && s ? "int8 dynamic, 2:4 pruned" : q ? "int8 dynamic" : "2:4 sparse");
            if (st == KERN_ERR_NOMEM) return st;
            if (st) {
                kern__gp_log(x->p, "no %s: '%s': %s", q ? "quantize" : "sparsify", nm, kern_last_error());
                continue;
            }
            x->fused--; /* transforms are not fusions */
            n->xform = (uint8_t)(q ? 1 : 2);
            kern__gp_log(x->p, "%s: '%s' -> %s%s", q && s ? "quantize+sparsify" : q ? "quantize" : "sparsify", nm,
                         kern_graph_op_name(n->op), q && s ? " (2:4 pruned at plan time)" : "");
        }
    }
    return KERN_OK;
}

/* Folds the single consumer c of gemm node n's output into n: the fused
 * node takes c's output value and c's place in the order. */
static kern_status kern__gpx_absorb(kern__gpx *x, kern__gnode *n, kern__gnode *c, const char *what) {
    kern_graph *w = x->w;
    kern_graph_val yo = c->out[0];
    n->out[0] = yo;
    w->vals[yo].node = (int32_t)(n - w->nodes);
    w->vals[yo].oidx = 0;
    if (c->pos > n->pos) n->pos = c->pos;
    c->dead = 1;
    kern__gw_note(w, n, what);
    x->fused++;
    /* consumer lists stay valid for this pass: c's output keeps its
     * consumers, c's other input changes consumer (c -> n) but not count */
    return KERN_OK;
}

static kern_status kern__gpx_epilogue(kern__gpx *x) {
    kern_graph *w = x->w;
    int64_t i;
    kern_status st;
    for (i = 0; i < w->n_nodes; i++) {
        kern__gnode *n = &w->nodes[i];
        int stage = 0; /* 1 bias, 2 act, 3 residual, 4 scale */
        int gemm = n->op == KERN_GRAPH_OP_LINEAR || n->op == KERN_GRAPH_OP_MATMUL;
        int bslot, rslot;
        uint32_t acts, had;
        char orig[KERN__G_NAME_MAX + 1];
        if (n->dead || !(bslot = kern__gpx_bias_slot(n->op))) continue;
        rslot = bslot + 1;
        acts = n->op == KERN_GRAPH_OP_SPARSE24_LINEAR ? KERN__GACTS_GELU : KERN__GACTS_GEMM;
        kern__gpx_name_copy(x, n, orig);
        had = n->fused;
        if (n->in[bslot]) stage = 1;
        if (n->a.act) stage = 2;
        if (n->in[rslot]) stage = 3;
        if (n->a.out_scale != 0) stage = 4;
        if (n->a.glu && stage < 2) stage = 2; /* bias and act act on the gate / up halves */
        for (;;) {
            kern_graph_val y = n->out[0];
            kern__gnode *c = kern__gpx_single(x, y);
            const kern__gval *yv = &w->vals[y];
            int64_t nn = yv->dims[yv->ndim - 1];
            double k;
            if (!c || w->vals[c->out[0]].dtype != yv->dtype) break;
            if (c->op == KERN_GRAPH_OP_ADD && kern__gpx_same_shape(w, c->out[0], y)) {
                kern_graph_val t = kern__gpx_other(c, y);
                const kern__gval *tv = &w->vals[t];
                if (t == y) break;
                if (stage < 1 && tv->ndim == 1 && tv->dims[0] == nn && kern_dtype_is_float(tv->dtype)) {
                    n->in[bslot] = t;
                    if ((st = kern__gpx_absorb(x, n, c, "bias")) != KERN_OK) return st;
                    stage = 1;
                    continue;
                }
                if (stage < 3 && kern_dtype_is_float(tv->dtype) &&
                    kern__g_bcast_to(tv->ndim, tv->dims, yv->ndim, yv->dims)) {
                    n->in[rslot] = t;
                    if ((st = kern__gpx_absorb(x, n, c, "residual")) != KERN_OK) return st;
                    stage = 3;
                    continue;
                }
                break;
            }
            if ((c->op == KERN_GRAPH_OP_GELU || c->op == KERN_GRAPH_OP_GELU_TANH ||
                 c->op == KERN_GRAPH_OP_SILU || c->op == KERN_GRAPH_OP_RELU) && stage < 2) {
                kern_act act = c->op == KERN_GRAPH_OP_GELU ? KERN_ACT_GELU
                               : c->op == KERN_GRAPH_OP_GELU_TANH ? KERN_ACT_GELU_TANH
                               : c->op == KERN_GRAPH_OP_SILU ? KERN_ACT_SILU : KERN_ACT_RELU;
                if (!((acts >> act) & 1u)) break;
                n->a.act = act;
                if ((st = kern__gpx_absorb(x, n, c, kern_act_name(act))) != KERN_OK) return st;
                stage = 2;
                continue;
            }
            if (gemm && stage < 4 &&
                ((c->op == KERN_GRAPH_OP_MUL && (kern__gpx_const(x, kern__gpx_other(c, y), &k))) ||
                 (c->op == KERN_GRAPH_OP_DIV && c->in[0] == y && kern__gpx_const(x, c->in[1], &k) &&
                  k != 0 && (k = 1.0 / k, 1)) ||
                 (c->op == KERN_GRAPH_OP_SCALE && ((k = c->a.alpha_set ? c->a.alpha : 1.0), 1)))) {
                if (!isfinite(k) || k == 0) break;
                if (stage == 0) {
                    n->a.alpha = (float)((n->a.alpha_set ? n->a.alpha : 1.0) * k);
                    n->a.alpha_set = 1;
                    if ((st = kern__gpx_absorb(x, n, c, "alpha")) != KERN_OK) return st;
                    continue;
                }
                n->a.out_scale = (float)k;
                if ((st = kern__gpx_absorb(x, n, c, "scale")) != KERN_OK) return st;
                stage = 4;
                continue;
            }
            break;
        }
        if (n->fused != had)
            kern__gp_log(x->p, "fuse: %s '%s' + %s -> '%s'", kern_graph_op_name(n->op), orig,
                         w->str + n->fused, kern__gpx_name(x, n));
    }
    return KERN_OK;
}

/* Linears that read the same x (Q, K, V; gate and up) -> one GEMM over the
 * concatenated weights, then a split (views). */
static kern_status kern__gpx_qkv(kern__gpx *x) {
    kern_graph *w = x->w;
    int64_t i, j;
    kern_status st;
    for (i = 0; i < w->n_nodes; i++) {
        kern__gnode *a = &w->nodes[i];
        int32_t grp[KERN_GRAPH_MAX_OUTPUTS];
        int ng = 0, g, has_bias, q8 = a->op == KERN_GRAPH_OP_QLINEAR;
        int bs = kern__gpx_bias_slot(a->op), rs = bs + 1; /* bias and residual */
        const kern__gval *wa;
        if (a->dead || (a->op != KERN_GRAPH_OP_LINEAR && !q8)) continue;
        wa = &w->vals[a->in[1]];
        /* qlinear: weights packed at plan time (an i8 weight brings scales) */
        if (q8 && (wa->dtype == KERN_I8 || a->in[2])) continue;
        has_bias = a->in[bs] != 0;
        /* the other readers of x, from the consumer lists (in node order) */
        for (j = a->in[0] < x->n_vals ? x->cstart[a->in[0]] : 0;
             a->in[0] < x->n_vals && j < x->cstart[a->in[0] + 1] && ng < KERN_GRAPH_MAX_OUTPUTS; j++) {
            kern__gnode *b = &w->nodes[x->cons[j]];
            const kern__gval *wb;
            if (x->cons[j] < i || (j > x->cstart[a->in[0]] && x->cons[j] == x->cons[j - 1])) continue;
            if (b->dead || b->op != a->op || b->in[0] != a->in[0] || (q8 && b->in[2])) continue;
            wb = &w->vals[b->in[1]];
            if (wb->kind != KERN_GRAPH_VAL_WEIGHT || wb->dtype != wa->dtype || wb->dims[1] != wa->dims[1] ||
                b->in[rs] || b->a.act || b->a.glu || b->a.alpha_set || b->a.out_scale != 0 ||
                b->a.prune != a->a.prune ||
                (b->in[bs] != 0) != has_bias ||
                (has_bias && (w->vals[b->in[bs]].kind != KERN_GRAPH_VAL_WEIGHT ||
                              w->vals[b->in[bs]].dtype != w->vals[a->in[bs]].dtype)))
                continue;
            grp[ng++] = x->cons[j];
        }
        if (ng < 2 || wa->kind != KERN_GRAPH_VAL_WEIGHT) continue;
        {
            /* the merged weight (and bias), owned by the plan */
            int64_t ntot = 0, k = wa->dims[1];
            kern_tensor wt;
            kern_graph_val wv, bv = 0, merged, outs[KERN_GRAPH_MAX_OUTPUTS];
            char nm[KERN__G_NAME_MAX + 1], lst[300];
            kern_graph_node_desc d;
            int64_t minpos = w->nodes[grp[0]].pos;
            kern_graph_val xin = a->in[0];
            char aname[KERN__G_NAME_MAX + 1];
            snprintf(aname, sizeof aname, "%s", kern__gpx_name(x, a));
            kern_graph_val a_bias = a->in[bs];
            for (g = 0; g < ng; g++) ntot += w->vals[w->nodes[grp[g]].in[1]].dims[0];
            for (g = 0; g < ng; g++)
                if (!w->w[w->vals[w->nodes[grp[g]].in[1]].aux].data ||
                    (has_bias && !w->w[w->vals[w->nodes[grp[g]].in[bs]].aux].data))
                    break;
            if (g < ng) continue; /* unbound weights: planning reports them */
            lst[0] = 0;
            for (g = 0; g < ng; g++) {
                const kern__gnode *b = &w->nodes[grp[g]];
                snprintf(lst + strlen(lst), sizeof lst - strlen(lst), "%s'%s'", g ? ", " : "",
                         kern__gpx_name(x, b));
                if (b->pos < minpos) minpos = b->pos;
            }
            /* the merged weight (and bias) are declared here and filled when
             * the plan prepares its weights (prepack time) */
            kern__gw_fresh(w, aname, "merged_weight", nm, sizeof nm);
            {
                int64_t sh[2];
                memset(&wt, 0, sizeof wt);
                sh[0] = ntot;
                sh[1] = k;
                wt.dtype = wa->dtype;
                wt.ndim = 2;
                wt.shape[0] = sh[0];
                wt.shape[1] = sh[1];
            }
            st = kern_graph_weight(w, nm, &wt, KERN_GRAPH_BORROW, &wv);
            if (st) return st;
            w->n_ent--;
            {
                kern__gweight *mw = &w->w[w->vals[wv].aux];
                mw->owned = 2;
                mw->n_src = ng;
                for (g = 0; g < ng; g++) mw->src[g] = w->nodes[grp[g]].in[1];
            }
            if (has_bias) {
                kern__gw_fresh(w, aname, "merged_bias", nm, sizeof nm);
                memset(&wt, 0, sizeof wt);
                wt.dtype = w->vals[a_bias].dtype;
                wt.ndim = 1;
                wt.shape[0] = ntot;
                st = kern_graph_weight(w, nm, &wt, KERN_GRAPH_BORROW, &bv);
                if (st) return st;
                w->n_ent--;
                {
                    kern__gweight *mb = &w->w[w->vals[bv].aux];
                    mb->owned = 2;
                    mb->n_src = ng;
                    for (g = 0; g < ng; g++) mb->src[g] = w->nodes[grp[g]].in[bs];
                }
            }
            memset(&d, 0, sizeof d);
            kern__gw_fresh(w, aname, "merged", nm, sizeof nm);
            d.op = a->op;
            d.name = nm;
            d.inputs[0] = xin;
            d.inputs[1] = wv;
            d.inputs[bs] = bv;
            d.attrs.prune = a->a.prune; /* int8 + 2:4: every member's, per row */
            if ((st = kern__gw_add(w, &d, minpos, &merged)) != KERN_OK) return st;
            {
                char nbuf[KERN_GRAPH_MAX_OUTPUTS][KERN__G_NAME_MAX + 1], base[KERN__G_NAME_MAX + 1];
                memset(&d, 0, sizeof d);
                kern__gw_fresh(w, kern__g_vname(w, merged), "split", base, sizeof base);
                memcpy(nbuf[0], base, sizeof base);
                d.op = KERN_GRAPH_OP_SPLIT;
                d.name = nbuf[0];
                d.inputs[0] = merged;
                d.attrs.axis = -1;
                d.attrs.n_sizes = ng;
                d.n_outputs = ng;
                for (g = 0; g < ng; g++) {
                    d.attrs.sizes[g] = w->vals[w->nodes[grp[g]].in[1]].dims[0];
                    if (g) {
                        snprintf(nbuf[g], sizeof nbuf[g], "%.100s:%d", base, g);
                        d.output_names[g] = nbuf[g];
                    }
                }
                if ((st = kern__gw_add(w, &d, minpos + 1, outs)) != KERN_OK) return st;
            }
            w->nodes[w->vals[merged].node].fused = 0;
            {
                char what[340];
                snprintf(what, sizeof what, "merged %s", lst);
                kern__gw_note(w, &w->nodes[w->vals[merged].node], what);
            }
            for (g = 0; g < ng; g++) { /* consumers from the lists (valid: built before) */
                kern__gnode *b = &w->nodes[grp[g]];
                kern_graph_val ov = b->out[0];
                int c2, k2;
                for (c2 = x->cstart[ov]; c2 < x->cstart[ov + 1]; c2++) {
                    kern__gnode *q = &w->nodes[x->cons[c2]];
                    for (k2 = 0; k2 < KERN_GRAPH_MAX_INPUTS; k2++)
                        if (q->in[k2] == ov) q->in[k2] = outs[g];
                }
                if (x->is_out[ov])
                    for (k2 = 0; k2 < w->n_outputs; k2++)
                        if (w->outputs[k2] == ov) w->outputs[k2] = outs[g];
                b->dead = 1;
            }
            x->fused++;
            kern__gp_log(x->p, "fuse: %d %ss reading '%s' (%s) -> one GEMM '%s' [%lld outputs]", ng,
                         q8 ? "qlinear" : "linear", kern__g_vname(w, xin), lst,
                         kern__g_vname(w, merged), (long long)ntot);
        }
    }
    return KERN_OK;
}

/* silu_mul(gate, up) over the two halves of a gate/up linear the QKV pass
 * merged -> that linear with the glu epilogue (act silu): its merged
 * weight and bias are interleaved in kern_glu_pack's order when the plan
 * prepares its weights, and it writes the [.., F] product directly (no
 * [.., 2F] intermediate, no silu_mul pass over it). */
static kern_status kern__gpx_glu(kern__gpx *x) {
    kern_graph *w = x->w;
    int64_t i;
    for (i = 0; i < w->n_nodes; i++) {
        kern__gnode *s = &w->nodes[i], *sp, *ln;
        kern__gweight *mw[2] = {NULL, NULL}; /* the merged weight and bias */
        kern_graph_val a, b, lo;
        int k, ok = 1, bs, rs;
        if (s->dead || s->op != KERN_GRAPH_OP_SILU_MUL || !s->in[0] || !s->in[1]) continue;
        a = s->in[0];
        b = s->in[1];
        sp = kern__gpx_prod(x, a, KERN_GRAPH_OP_SPLIT);
        if (!sp || kern__gpx_prod(x, b, KERN_GRAPH_OP_SPLIT) != sp || sp->n_out != 2 || a == b) continue;
        lo = sp->in[0];
        ln = kern__gpx_prod(x, lo, KERN_GRAPH_OP_LINEAR);
        if (!ln) ln = kern__gpx_prod(x, lo, KERN_GRAPH_OP_QLINEAR);
        if (!ln) continue;
        bs = kern__gpx_bias_slot(ln->op);
        rs = bs + 1;
        if (ln->a.glu || ln->a.act || ln->a.alpha_set || ln->a.out_scale != 0 || ln->in[rs]) continue;
        for (k = 0; k < 2 && ok; k++) { /* both made by the QKV pass from two sources */
            kern_graph_val v = ln->in[k ? bs : 1];
            if (!v) continue;
            mw[k] = w->vals[v].kind == KERN_GRAPH_VAL_WEIGHT ? &w->w[w->vals[v].aux] : NULL;
            ok = mw[k] && mw[k]->owned == 2 && mw[k]->n_src == 2 && !mw[k]->glu && !mw[k]->data;
        }
        if (!ok) continue;
        /* the split is the linear's only reader and the silu_mul the only
         * reader of each half; equal halves along the last dim */
        {
            const kern__gval *lv = &w->vals[lo], *ov = &w->vals[s->out[0]];
            int64_t ax = sp->a.axis < 0 ? sp->a.axis + lv->ndim : sp->a.axis;
            if (ax != lv->ndim - 1 || kern__gpx_nuses(x, lo) != 1 || kern__gpx_nuses(x, a) != 1 ||
                kern__gpx_nuses(x, b) != 1 || x->is_out[a] || x->is_out[b] || x->is_out[lo])
                continue;
            if (!kern__gpx_same_shape(w, a, b) || !kern__gpx_same_shape(w, a, s->out[0]) ||
                ov->dtype != lv->dtype || w->vals[a].dims[lv->ndim - 1] * 2 != lv->dims[lv->ndim - 1])
                continue;
        }
        for (k = 0; k < 2; k++) {
            if (!mw[k]) continue;
            if (w->vals[a].oidx == 1) { /* the sources in (gate, up) order */
                int32_t t = mw[k]->src[0];
                mw[k]->src[0] = mw[k]->src[1];
                mw[k]->src[1] = t;
            }
            mw[k]->glu = 1;
        }
        ln->a.glu = 1;
        ln->a.act = KERN_ACT_SILU;
        ln->out[0] = s->out[0];
        w->vals[s->out[0]].node = (int32_t)(ln - w->nodes);
        w->vals[s->out[0]].oidx = 0;
        sp->dead = 1;
        s->dead = 1;
        kern__gw_note(w, ln, "silu_mul (glu)");
        x->fused++;
        kern__gp_log(x->p, "fuse: silu_mul '%s' over the halves of '%s' -> glu epilogue",
                     kern__g_vname(w, s->out[0]), kern__g_vname(w, lo));
    }
    return KERN_OK;
}

static kern_status kern__gpx_residual_norm(kern__gpx *x) {
    kern_graph *w = x->w;
    int64_t i;
    for (i = 0; i < w->n_nodes; i++) {
        kern__gnode *n = &w->nodes[i], *ad;
        kern_graph_val s;
        if (n->dead || (n->op != KERN_GRAPH_OP_LAYER_NORM && n->op != KERN_GRAPH_OP_RMS_NORM) ||
            n->in[3] || n->n_out != 1)
            continue;
        s = n->in[0];
        ad = kern__gpx_prod(x, s, KERN_GRAPH_OP_ADD);
        if (!ad || ad->in[0] == ad->in[1] || !kern__gpx_same_shape(w, ad->in[0], s) ||
            !kern__gpx_same_shape(w, ad->in[1], s) || w->vals[ad->in[0]].dtype != w->vals[s].dtype ||
            w->vals[ad->in[1]].dtype != w->vals[s].dtype)
            continue;
        n->in[0] = ad->in[0];
        n->in[3] = ad->in[1];
        n->n_in = 4;
        if (kern__gpx_nuses(x, s) > 1) {
            /* the sum is needed later: the norm writes it as its second output */
            n->n_out = 2;
            n->out[1] = s;
            w->vals[s].node = (int32_t)i;
            w->vals[s].oidx = 1;
            n->pos = ad->pos;
            kern__gw_note(w, n, "residual (sum kept)");
        } else {
            kern__gw_note(w, n, "residual");
        }
        ad->dead = 1;
        x->fused++;
        kern__gp_log(x->p, "fuse: add '%s' + %s '%s'%s", kern__g_vname(w, s), kern_graph_op_name(n->op),
                     kern__gpx_name(x, n), n->n_out > 1 ? " (the sum is its second output)" : "");
    }
    return KERN_OK;
}

static kern_status kern__gpx_norm_act(kern__gpx *x) {
    kern_graph *w = x->w;
    int64_t i;
    for (i = 0; i < w->n_nodes; i++) {
        kern__gnode *n = &w->nodes[i], *c;
        if (n->dead || (n->op != KERN_GRAPH_OP_LAYER_NORM && n->op != KERN_GRAPH_OP_RMS_NORM) || n->a.act)
            continue;
        c = kern__gpx_single(x, n->out[0]);
        if (!c || (c->op != KERN_GRAPH_OP_GELU && c->op != KERN_GRAPH_OP_GELU_TANH) ||
            w->vals[c->out[0]].dtype != w->vals[n->out[0]].dtype)
            continue;
        n->a.act = c->op == KERN_GRAPH_OP_GELU ? KERN_ACT_GELU : KERN_ACT_GELU_TANH;
        n->out[0] = c->out[0];
        w->vals[c->out[0]].node = (int32_t)i;
        w->vals[c->out[0]].oidx = 0;
        c->dead = 1;
        kern__gw_note(w, n, kern_act_name(n->a.act));
        x->fused++;
        kern__gp_log(x->p, "fuse: %s '%s' + %s", kern_graph_op_name(n->op), kern__gpx_name(x, n),
                     kern_act_name(n->a.act));
    }
    return KERN_OK;
}

static kern_status kern__g_passes(kern_graph_plan *p) {
    kern__gpx x;
    kern_status st = KERN_OK;
    unsigned dis = p->prm.disable;
    memset(&x, 0, sizeof x);
    x.p = p;
    x.w = &p->w;
    if (!(dis & KERN_GRAPH_PASS_DCE)) {
        int64_t r = kern__gw_dce(p);
        if (r) kern__gp_log(p, "dce: removed %lld dead nodes", (long long)r);
    }
    if ((st = kern__gpx_refresh(&x)) != KERN_OK) goto done;
    if (!(dis & KERN_GRAPH_PASS_DECOMPOSED)) {
        if ((st = kern__gpx_layernorm(&x)) != KERN_OK) goto done;
        if ((st = kern__gpx_rmsnorm(&x)) != KERN_OK) goto done;
        if ((st = kern__gpx_gelu(&x)) != KERN_OK) goto done;
        if ((st = kern__gpx_attention(&x)) != KERN_OK) goto done;
        kern__gw_dce(p);
        if ((st = kern__gpx_refresh(&x)) != KERN_OK) goto done;
    }
    if (p->prm.quantize || p->prm.sparsify)
        if ((st = kern__gpx_transforms(&x)) != KERN_OK) goto done;
    if (!(dis & KERN_GRAPH_PASS_EPILOGUE)) {
        if ((st = kern__gpx_epilogue(&x)) != KERN_OK) goto done;
        if ((st = kern__gpx_refresh(&x)) != KERN_OK) goto done;
    }
    if (!(dis & KERN_GRAPH_PASS_QKV)) {
        if ((st = kern__gpx_qkv(&x)) != KERN_OK) goto done;
        if ((st = kern__gpx_refresh(&x)) != KERN_OK) goto done;
        if (!(dis & KERN_GRAPH_PASS_GLU)) {
            if ((st = kern__gpx_glu(&x)) != KERN_OK) goto done;
            if ((st = kern__gpx_refresh(&x)) != KERN_OK) goto done;
        }
    }
    if (!(dis & KERN_GRAPH_PASS_RESIDUAL_NORM)) {
        if ((st = kern__gpx_residual_norm(&x)) != KERN_OK) goto done;
        if ((st = kern__gpx_refresh(&x)) != KERN_OK) goto done;
    }
    if (!(dis & KERN_GRAPH_PASS_NORM_ACT))
        if ((st = kern__gpx_norm_act(&x)) != KERN_OK) goto done;
    if (!(dis & KERN_GRAPH_PASS_DCE)) {
        int64_t r = kern__gw_dce(p);
        if (r) kern__gp_log(p, "dce: removed %lld nodes the fusions left unused", (long long)r);
    }
done:
    p->stats.n_fused = x.fused;
    kern__free(p->ctx, x.cstart); /* with is_out and fill */
    kern__free(p->ctx, x.cons);
    return st;
}

/* ============================================================== tooling */

KERN_API void kern_graph_plan_profile_reset(kern_graph_plan *p) {
    if (!p) return;
    memset(p->prof_s, 0, (size_t)(p->n_steps + 1) * sizeof(double));
    memset(p->prof_calls, 0, (size_t)(p->n_steps + 1) * sizeof(int64_t));
    p->prof_nruns = 0;
}

KERN_API kern_status kern_graph_plan_profile(const kern_graph_plan *p,
                                             const kern_graph_profile_params *pp, char *buf,
                                             size_t size, size_t *len) {
    kern__gsb s;
    double total = 0;
    int64_t i, n;
    int32_t *idx;
    const kern__ginst *I;
    kern_graph_profile_params q;
    if (!p || !len) return kern__err(KERN_ERR_ARG, "kern_graph_plan_profile: NULL argument");
    memset(&q, 0, sizeof q);
    if (pp) q = *pp;
    s.buf = buf;
    s.size = size;
    s.n = 0;
    I = &p->inst[p->cur];
    if (!p->prm.profile || !I->valid) {
        kern__gsb_puts(&s, "(no profile: plan with params.profile = 1 and run)\n");
        kern__gsb_end(&s);
        *len = s.n;
        return KERN_OK;
    }
    idx = (int32_t *)kern__alloc(p->ctx, (size_t)(p->n_steps + 1) * 2 * sizeof(int32_t) +
                                             (size_t)(p->n_steps + 1) * sizeof(int64_t));
    if (!idx) return kern__err(KERN_ERR_NOMEM, "kern_graph_plan_profile: out of memory");
    {
        int64_t *key = (int64_t *)(void *)(idx + 2 * (p->n_steps + 1));
        for (i = 0; i < p->n_steps; i++) {
            idx[i] = (int32_t)i;
            total += p->prof_s[i];
            key[i] = -(int64_t)(p->prof_s[i] * 1e9); /* slowest first */
        }
        kern__g_argsort(idx, idx + p->n_steps + 1, p->n_steps, key);
    }
    n = q.top > 0 && q.top < p->n_steps ? q.top : p->n_steps;
    kern__gsb_printf(&s, "%-40s %-16s %8s %11s %7s %9s %8s %7s\n", "node", "op", "calls", "us/call",
                     "total", "GFLOP/s", "GB/s", "peak");
    for (i = 0; i < n; i++) {
        int32_t st = idx[i];
        const kern__gnode *nd = &p->w.nodes[p->steps[st].node];
        int64_t calls = p->prof_calls[st];
        double t = calls ? p->prof_s[st] / (double)calls : 0;
        double gf = t > 0 ? I->is[st].flops / t * 1e-9 : 0, gb = t > 0 ? I->is[st].bytes / t * 1e-9 : 0;
        double fc = q.peak_gflops > 0 ? gf / q.peak_gflops : 0, fm = q.peak_gbs > 0 ? gb / q.peak_gbs : 0;
        char name[48], opn[40], peak[16];
        snprintf(name, sizeof name, "%.39s", kern__g_vname(&p->w, nd->out[0]));
        snprintf(opn, sizeof opn, "%s%s", kern_graph_op_name(nd->op), nd->fused ? "*" : "");
        if (q.peak_gflops > 0 || q.peak_gbs > 0)
            snprintf(peak, sizeof peak, "%5.1f%% %c", 100.0 * (fc > fm ? fc : fm), fc > fm ? 'c' : 'm');
        else
            snprintf(peak, sizeof peak, "-");
        kern__gsb_printf(&s, "%-40s %-16.16s %8lld %11.2f %6.1f%% %9.2f %8.2f %7s\n", name, opn,
                         (long long)calls, t * 1e6, total > 0 ? 100.0 * p->prof_s[st] / total : 0, gf, gb,
                         peak);
    }
    kern__gsb_printf(&s, "total %.3f ms over %lld runs (%.3f ms/run), %lld steps; * = fused; peak: "
                     "c compute, m memory\n",
                     total * 1e3, (long long)p->prof_nruns,
                     p->prof_nruns ? total * 1e3 / (double)p->prof_nruns : 0.0, (long long)p->n_steps);
    kern__free(p->ctx, idx);
    kern__gsb_end(&s);
    *len = s.n;
    return KERN_OK;
}

KERN_API kern_status kern_graph_plan_dot(const kern_graph_plan *p, char *buf, size_t size,
                                         size_t *len) {
    const kern_graph *w;
    kern__gsb s;
    int64_t i;
    int k;
    if (!p || !len) return kern__err(KERN_ERR_ARG, "kern_graph_plan_dot: NULL argument");
    w = &p->w;
    s.buf = buf;
    s.size = size;
    s.n = 0;
    kern__gsb_puts(&s, "digraph kern_graph {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
    for (i = 0; i < w->n_inputs; i++) {
        const kern__gval *x = &w->vals[w->inputs[i]];
        char sh[200];
        kern__gsb_printf(&s, "  \"v%d\" [shape=ellipse, label=\"%s\\n%s %s\"];\n", (int)w->inputs[i],
                         w->str + x->name, kern_dtype_name(x->dtype),
                         kern__g_shape_str(w, x->ndim, x->dims, sh, sizeof sh));
    }
    for (i = 0; i < p->n_order; i++) {
        const kern__gnode *n = &w->nodes[p->order[i]];
        const kern__gval *y = &w->vals[n->out[0]];
        char sh[200];
        int view = p->node_step[p->order[i]] < 0;
        kern__gsb_printf(&s, "  \"n%d\" [label=\"%s\\n%s%s%s\\n%s %s\"%s%s];\n", (int)p->order[i],
                         w->str + y->name, kern_graph_op_name(n->op), n->fused ? " + " : "",
                         n->fused ? w->str + n->fused : "", kern_dtype_name(y->dtype),
                         kern__g_shape_str(w, y->ndim, y->dims, sh, sizeof sh),
                         view ? ", style=dashed" : "",
                         n->fused ? ", style=filled, fillcolor=\"#ffe0b0\"" : "");
        for (k = 0; k < KERN_GRAPH_MAX_INPUTS; k++) {
            kern_graph_val v = n->in[k];
            const kern__gval *x;
            if (!v) continue;
            x = &w->vals[v];
            if (x->kind == KERN_GRAPH_VAL_INPUT)
                kern__gsb_printf(&s, "  \"v%d\" -> \"n%d\";\n", (int)v, (int)p->order[i]);
            else if (x->kind == KERN_GRAPH_VAL_NODE)
                kern__gsb_printf(&s, "  \"n%d\" -> \"n%d\"%s;\n", (int)x->node, (int)p->order[i],
                                 x->oidx ? " [style=bold]" : "");
        }
    }
    for (i = 0; i < w->n_outputs; i++) {
        const kern__gval *x = &w->vals[w->outputs[i]];
        kern__gsb_printf(&s, "  \"out%d\" [shape=ellipse, label=\"output %d\"];\n  \"n%d\" -> \"out%d\";\n",
                         (int)i, (int)i, (int)x->node, (int)i);
    }
    kern__gsb_puts(&s, "}\n");
    kern__gsb_end(&s);
    *len = s.n;
    return KERN_OK;
}

/* Binding of g's symbols from inputs (as kern_graph_run derives it). */
static kern_status kern__g_bind_inputs(const kern_graph *g, const kern_tensor *inputs, int n,
                                       int64_t *sv) {
    kern__gbinder b[KERN_GRAPH_MAX_SYMBOLS];
    kern_status st;
    int i;
    if (n != g->n_inputs) return kern__err(KERN_ERR_ARG, "kern_graph_check: %d inputs for %lld", n,
                                           (long long)g->n_inputs);
    if ((st = kern__gp_binders(g, b)) != KERN_OK) return st;
    memset(sv, 0, sizeof(int64_t) * KERN_GRAPH_MAX_SYMBOLS);
    for (i = 0; i < g->n_sym; i++) {
        if (inputs[b[i].input].ndim <= b[i].dim)
            return kern__err(KERN_ERR_SHAPE, "kern_graph_check: input %d has too few dims", b[i].input);
        sv[i] = inputs[b[i].input].shape[b[i].dim] - b[i].c;
    }
    return KERN_OK;
}

/* Test hook (kern__graph_check_poison): when set, kern_graph_check adds
 * 1 to the first element of this value in the planned run before
 * comparing (to see it fire). */
static const char *kern__gcheck_poison;
KERN_API void kern__graph_check_poison(const char *value) { kern__gcheck_poison = value; }

KERN_API void *kern__graph_weight_data(const kern_graph *g, const char *name) {
    kern_graph_val v = g ? kern_graph_find(g, name) : 0;
    return v && g->vals[v].kind == KERN_GRAPH_VAL_WEIGHT ? g->w[g->vals[v].aux].data : NULL;
}

KERN_API int kern__graph_plan_has_op(const kern_graph_plan *p, const char *op) {
    int64_t i;
    for (i = 0; p && i < p->n_order; i++)
        if (strcmp(kern_graph_op_name(p->w.nodes[p->order[i]].op), op) == 0) return 1;
    return 0;
}

KERN_API kern_status kern_graph_check(kern_graph *g, kern_ctx *ctx,
                                      const kern_graph_plan_params *params,
                                      const kern_tensor *inputs, int n_inputs,
                                      kern_graph_check_result *res) {
    int64_t sv[KERN_GRAPH_MAX_SYMBOLS];
    kern_graph_plan_params pa, pb;
    kern_graph_plan *A = NULL, *B = NULL;
    kern_ctx *rctx = NULL;
    kern_ctx_params cp;
    kern_tensor *outs = NULL;
    uint8_t *tainted = NULL;
    kern_status st;
    int64_t i;
    kern__gsb rep;
    if (!g || !res) return kern__err(KERN_ERR_ARG, "kern_graph_check: NULL argument");
    if (!ctx) {
        ctx = kern_default_ctx();
        if (!ctx) return KERN_ERR_NOMEM;
    }
    memset(res, 0, sizeof *res);
    res->ok = 1;
    if ((st = kern__g_bind_inputs(g, inputs, n_inputs, sv)) != KERN_OK) return st;
    memset(&cp, 0, sizeof cp);
    cp.n_threads = 1;
    cp.isa_cap = KERN_ISA_SCALAR;
    cp.allocator = ctx->params.allocator;
    if ((st = kern_ctx_create(&cp, &rctx)) != KERN_OK) return st;
    memset(&pa, 0, sizeof pa);
    if (params) pb = *params;
    else memset(&pb, 0, sizeof pb);
    pa.bounds = sv;
    pa.n_bounds = g->n_sym;
    pa.disable = KERN_GRAPH_PASS_ALL;
    pa.keep_intermediates = 1;
    pa.cache_size = 1;
    pb.bind = NULL;
    pb.bounds = sv;
    pb.n_bounds = g->n_sym;
    pb.keep_intermediates = 1;
    pb.external_arena = 0;
    pb.cache_size = 1;
    outs = (kern_tensor *)kern__alloc(ctx, (size_t)(g->n_outputs + 1) * sizeof(kern_tensor));
    if (!outs) { st = kern__err(KERN_ERR_NOMEM, "kern_graph_check: out of memory"); goto done; }
    if ((st = kern_graph_plan_create(g, rctx, &pa, &A)) != KERN_OK) goto done;
    if ((st = kern_graph_plan_create(g, ctx, &pb, &B)) != KERN_OK) goto done;
    memset(outs, 0, (size_t)g->n_outputs * sizeof(kern_tensor));
    if ((st = kern_graph_run(A, inputs, n_inputs, outs, (int)g->n_outputs)) != KERN_OK) goto done;
    memset(outs, 0, (size_t)g->n_outputs * sizeof(kern_tensor));
    if ((st = kern_graph_run(B, inputs, n_inputs, outs, (int)g->n_outputs)) != KERN_OK) goto done;
    if (kern__gcheck_poison) {
        kern_tensor t;
        if (kern_graph_plan_value(B, kern__gcheck_poison, &t) == KERN_OK && t.dtype == KERN_F32 &&
            kern_tensor_numel(&t) > 0)
            ((float *)t.data)[0] += 1.0f;
    }
    /* values downstream of a transformed node (int8, 2:4) differ by design:
     * they are reported with their SQNR, not failed */
    tainted = (uint8_t *)kern__alloc(ctx, (size_t)g->n_vals);
    if (!tainted) { st = kern__err(KERN_ERR_NOMEM, "kern_graph_check: out of memory"); goto done; }
    memset(tainted, 0, (size_t)g->n_vals);
    for (i = 0; i < g->n_nodes; i++) {
        const kern__gnode *n = &g->nodes[i];
        kern_graph_val vb = kern__g_lookup(&B->w, g->str + g->vals[n->out[0]].name);
        int k2, t = vb && B->w.vals[vb].kind == KERN_GRAPH_VAL_NODE &&
                    B->w.nodes[B->w.vals[vb].node].xform;
        for (k2 = 0; k2 < KERN_GRAPH_MAX_INPUTS; k2++) t |= n->in[k2] && tainted[n->in[k2]];
        for (k2 = 0; k2 < n->n_out; k2++) tainted[n->out[k2]] = (uint8_t)t;
    }
    rep.buf = res->report;
    rep.size = sizeof res->report;
    rep.n = 0;
    for (i = 0; i < g->n_nodes; i++) {
        const kern__gnode *n = &g->nodes[i];
        int o;
        for (o = 0; o < n->n_out; o++) {
            const char *nm = g->str + g->vals[n->out[o]].name;
            kern_graph_val vb = kern__g_lookup(&B->w, nm);
            kern_tensor ta, tb;
            int64_t ne, j;
            double maxref = 0, maxerr = 0, sse = 0, ssr = 0, tol;
            int xf, bad;
            if (!vb || !B->pv[vb].live || !A->pv[n->out[o]].live) continue;
            if (kern_graph_plan_value(A, nm, &ta) || kern_graph_plan_value(B, nm, &tb)) continue;
            ne = kern_tensor_numel(&ta);
            if (ne != kern_tensor_numel(&tb) || ta.dtype != tb.dtype) continue;
            xf = tainted[n->out[o]];
            if (kern_dtype_is_float(ta.dtype)) {
                float *fa = (float *)kern__alloc(ctx, (size_t)(ne ? ne : 1) * 8);
                float *fb;
                int64_t idx[KERN_MAX_DIMS];
                if (!fa) { st = kern__err(KERN_ERR_NOMEM, "kern_graph_check: out of memory"); goto done; }
                fb = fa + ne;
                memset(idx, 0, sizeof idx);
                for (j = 0; j < ne; j++) { /* row-major reads of both views */
                    int64_t oa = 0, ob = 0;
                    int d;
                    for (d = 0; d < ta.ndim; d++) {
                        oa += idx[d] * ta.stride[d];
                        ob += idx[d] * tb.stride[d];
                    }
                    kern__gx_load(ta.dtype, (const char *)ta.data + oa * (int64_t)kern_dtype_size(ta.dtype), 1, 1, &fa[j]);
                    kern__gx_load(tb.dtype, (const char *)tb.data + ob * (int64_t)kern_dtype_size(tb.dtype), 1, 1, &fb[j]);
                    for (d = ta.ndim - 1; d >= 0; d--) {
                        if (++idx[d] < ta.shape[d]) break;
                        idx[d] = 0;
                    }
                }
                for (j = 0; j < ne; j++) {
                    double a = fa[j], b = fb[j], e = fabs(a - b);
                    if (a != a || b != b) e = (a != a && b != b) ? 0 : INFINITY;
                    if (fabs(a) > maxref) maxref = fabs(a);
                    if (e > maxerr) maxerr = e;
                    sse += (a - b) * (a - b);
                    ssr += a * a;
                }
                kern__free(ctx, fa);
                tol = ta.dtype == KERN_F32 ? 1e-4 : 3e-2;
                maxerr = maxref > 0 ? maxerr / maxref : maxerr;
                bad = !xf && !(maxerr <= tol);
                if (xf)
                    kern__gsb_printf(&rep, "%-32s %-14s max rel err %.3g, SQNR %.1f dB (after a transform)\n", nm,
                                     kern_graph_op_name(n->op), maxerr,
                                     sse > 0 ? 10.0 * log10(ssr / sse) : 999.0);
                else
                    kern__gsb_printf(&rep, "%-32s %-14s max rel err %.3g %s\n", nm, kern_graph_op_name(n->op),
                                     maxerr, bad ? "BEYOND TOLERANCE" : "ok");
            } else {
                size_t es = kern_dtype_size(ta.dtype);
                bad = 0;
                if (kern_tensor_is_contiguous(&ta) && kern_tensor_is_contiguous(&tb))
                    bad = memcmp(ta.data, tb.data, (size_t)ne * es) != 0;
                maxerr = bad;
                kern__gsb_printf(&rep, "%-32s %-14s %s\n", nm, kern_graph_op_name(n->op),
                                 bad ? "DIFFERS" : "exact");
            }
            res->compared++;
            if (bad && res->ok) {
                res->ok = 0;
                snprintf(res->first_bad, sizeof res->first_bad, "%s", nm);
                res->max_rel_err = maxerr;
            } else if (res->ok && maxerr > res->max_rel_err && !xf) {
                res->max_rel_err = maxerr;
            }
        }
    }
    kern__gsb_end(&rep);
done:
    kern_graph_plan_free(A);
    kern_graph_plan_free(B);
    kern__free(ctx, outs);
    kern__free(ctx, tainted);
    kern_ctx_destroy(rctx);
    return st;
}

#ifdef __cplusplus
}
#endif
#endif /* KERN_IMPLEMENTATION && !KERN_GRAPH_IMPLEMENTED */
