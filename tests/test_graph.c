/* Tests for kern_graph.h: the builder and its validation, the text IR
 * (byte-exact round trip of every graph built here, every parse error),
 * a small BERT encoder and GraphSAGE against direct kernel calls, the
 * fusion corpus, the memory planner (random DAGs, BERT-like chains),
 * runs without allocation, determinism across thread counts, safetensors
 * binding, and the tooling (profile, DOT, numerics checker). */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_graph.h"
#include "kt.h"

#include <unistd.h>

#ifdef KT_SANITIZER
#define TG_RUNS 300
#else
#define TG_RUNS 10000
#endif

/* ---------------------------------------------------------- helpers */

#define tg_roundtrip kt_graph_roundtrip

static char *tg_ir(kern_graph *g) {
    size_t n;
    char *a;
    kern_graph_write_ir(g, NULL, 0, &n);
    a = (char *)malloc(n + 1);
    kern_graph_write_ir(g, a, n + 1, &n);
    return a;
}

/* A weight with N(0, scale) values, copied into the graph. */
static kern_graph_val tg_weight(kern_graph *g, kt_rng *r, const char *name, kern_dtype dt,
                                int ndim, const int64_t *shape, double scale) {
    kern_tensor t;
    int64_t n = 1;
    int i;
    void *buf;
    kern_graph_val v = 0;
    for (i = 0; i < ndim; i++) n *= shape[i];
    buf = malloc((size_t)(n ? n : 1) * kern_dtype_size(dt));
    kt_fill_normal(r, buf, dt, n, scale);
    kern_tensor_init(&t, buf, dt, ndim, shape);
    KT_OK(kern_graph_weight(g, name, &t, KERN_GRAPH_COPY, &v));
    free(buf);
    return v;
}
static kern_graph_val tg_w2(kern_graph *g, kt_rng *r, const char *name, int64_t a, int64_t b,
                            double scale) {
    int64_t s[2];
    s[0] = a;
    s[1] = b;
    return tg_weight(g, r, name, KERN_F32, 2, s, scale);
}
static kern_graph_val tg_w1(kern_graph *g, kt_rng *r, const char *name, int64_t a, double scale,
                            double offset) {
    kern_tensor t;
    float *buf = (float *)malloc((size_t)a * 4);
    int64_t i;
    kern_graph_val v = 0;
    for (i = 0; i < a; i++) buf[i] = (float)(offset + scale * kt_normal(r));
    t = kern_tensor_1d(buf, KERN_F32, a);
    KT_OK(kern_graph_weight(g, name, &t, KERN_GRAPH_COPY, &v));
    free(buf);
    return v;
}

/* data pointer of a graph weight (test access to the implementation) */
static float *tg_wdata(kern_graph *g, const char *name) {
    return (float *)kern__graph_weight_data(g, name);
}

static kern_graph_val tg_node(kern_graph *g, kern_graph_op op, const char *name,
                              kern_graph_val a, kern_graph_val b, kern_graph_val c,
                              const kern_graph_attrs *at) {
    kern_graph_node_desc d;
    kern_graph_val out[KERN_GRAPH_MAX_OUTPUTS];
    memset(&d, 0, sizeof d);
    memset(out, 0, sizeof out);
    d.op = op;
    d.name = name;
    d.inputs[0] = a;
    d.inputs[1] = b;
    d.inputs[2] = c;
    if (at) d.attrs = *at;
    KT_OK(kern_graph_add(g, &d, out));
    return out[0];
}

static kern_graph_attrs tg_attrs(void) {
    kern_graph_attrs a;
    memset(&a, 0, sizeof a);
    return a;
}

static kern_graph_val tg_reshape(kern_graph *g, const char *name, kern_graph_val x, int n,
                                 const int64_t *dims) {
    kern_graph_attrs a = tg_attrs();
    a.n_shape = n;
    memcpy(a.shape, dims, sizeof(int64_t) * (size_t)n);
    return tg_node(g, KERN_GRAPH_OP_RESHAPE, name, x, 0, 0, &a);
}
static kern_graph_val tg_permute(kern_graph *g, const char *name, kern_graph_val x, int p0, int p1,
                                 int p2, int p3) {
    kern_graph_attrs a = tg_attrs();
    a.n_perm = 4;
    a.perm[0] = p0;
    a.perm[1] = p1;
    a.perm[2] = p2;
    a.perm[3] = p3;
    return tg_node(g, KERN_GRAPH_OP_PERMUTE, name, x, 0, 0, &a);
}

static kern_tensor kern_tensor_3d_tg(float *p, int64_t a, int64_t b, int64_t c) {
    kern_tensor t;
    int64_t s[3];
    s[0] = a;
    s[1] = b;
    s[2] = c;
    kern_tensor_init(&t, p, KERN_F32, 3, s);
    return t;
}

static double tg_sqnr(const float *got, const double *want, int64_t n) {
    double s = 0, e = 0;
    int64_t i;
    for (i = 0; i < n; i++) {
        s += want[i] * want[i];
        e += (got[i] - want[i]) * (got[i] - want[i]);
    }
    return e > 0 ? 10 * log10(s / e) : 999;
}

/* max |got - want| / max |want| */
static double tg_relerr(const float *got, const double *want, int64_t n) {
    double m = 0, e = 0;
    int64_t i;
    for (i = 0; i < n; i++) {
        if (fabs(want[i]) > m) m = fabs(want[i]);
        if (fabs(got[i] - want[i]) > e) e = fabs(got[i] - want[i]);
    }
    return m > 0 ? e / m : e;
}

/* --------------------------------------------------- builder, IR */

KT_TEST(graph_dims_and_exprs) {
    kern_graph *g;
    int64_t b, l, bl, lb, p, lp, n1, e;
    char buf[64];
    KT_OK(kern_graph_create(NULL, &g));
    KT_OK(kern_graph_symbol(g, "B", &b));
    KT_OK(kern_graph_dim(g, "L", &l));
    KT_OK(kern_graph_dim(g, "B*L", &bl));
    KT_OK(kern_graph_dim(g, "L*B", &lb));
    KT_CHECK(bl == lb, "B*L and L*B intern to one dim");
    KT_OK(kern_graph_dim(g, "P+L", &p));
    KT_OK(kern_graph_dim(g, "L+P", &lp));
    KT_CHECK(p == lp);
    KT_CHECK(strcmp(kern_graph_dim_str(g, lp, buf, sizeof buf), "L+P") == 0, "%s", buf);
    KT_OK(kern_graph_dim(g, "2*L-1", &n1));
    KT_CHECK(strcmp(kern_graph_dim_str(g, n1, buf, sizeof buf), "2*L-1") == 0, "%s", buf);
    KT_OK(kern_graph_dim(g, "768", &e));
    KT_CHECK(e == 768);
    KT_OK(kern_graph_dim(g, "L-L+3", &e));
    KT_CHECK(e == 3, "L-L+3 folds to a constant, got %lld", (long long)e);
    KT_OK(kern_graph_dim(g, "B*B*L", &e));
    KT_CHECK(strcmp(kern_graph_dim_str(g, e, buf, sizeof buf), "B*B*L") == 0, "%s", buf);
    KT_ERROR(kern_graph_dim(g, "B+", &e), KERN_ERR_ARG, "offset 2");
    KT_ERROR(kern_graph_dim(g, "B/2", &e), KERN_ERR_ARG, "offset 1");
    KT_ERROR(kern_graph_dim(g, "-3", &e), KERN_ERR_SHAPE, "negative");
    KT_ERROR(kern_graph_symbol(g, "1x", &e), KERN_ERR_ARG, "not a symbol name");
    KT_CHECK(kern_graph_n_symbols(g) == 3 && strcmp(kern_graph_symbol_name(g, 2), "P") == 0);
    tg_roundtrip(g);
    kern_graph_destroy(g);
}

/* A graph with one node of every kind the IR can spell, for the round
 * trip and the printer. */
KT_TEST(graph_ir_every_op_roundtrip) {
    kern_graph *g;
    kt_rng r = kt_rng_make(1);
    kern_graph_val x, ids, w, b, y, m, q, k, v, s, t, sc, a1, parts[3], rp, col, dense, idx;
    kern_graph_attrs a;
    int64_t sh[4];
    KT_OK(kern_graph_create(NULL, &g));
    KT_OK(kern_graph_input_s(g, "x", KERN_F32, "[B,L,16]", &x));
    KT_OK(kern_graph_input_s(g, "ids", KERN_I64, "[B,L]", &ids));
    w = tg_w2(g, &r, "w", 48, 16, 0.1);
    b = tg_w1(g, &r, "b", 48, 0.1, 0);
    a = tg_attrs();
    a.act = KERN_ACT_GELU_TANH;
    a.alpha_set = 1;
    a.alpha = 0.5f;
    a.out_scale = 1.25f;
    {
        kern_graph_node_desc d;
        memset(&d, 0, sizeof d);
        d.op = KERN_GRAPH_OP_LINEAR;
        d.name = "lin";
        d.inputs[0] = x;
        d.inputs[1] = w;
        d.inputs[2] = b;
        d.attrs = a;
        KT_OK(kern_graph_add(g, &d, &y));
    }
    a = tg_attrs();
    a.axis = -1;
    a.n_sizes = 3;
    a.sizes[0] = a.sizes[1] = a.sizes[2] = 16;
    {
        kern_graph_node_desc d;
        memset(&d, 0, sizeof d);
        d.op = KERN_GRAPH_OP_SPLIT;
        d.name = "q";
        d.inputs[0] = y;
        d.attrs = a;
        d.output_names[1] = "k";
        d.output_names[2] = "v";
        KT_OK(kern_graph_add(g, &d, parts));
        q = parts[0];
        k = parts[1];
        v = parts[2];
    }
    {
        int64_t B, L;
        kern_graph_dim(g, "B", &B);
        kern_graph_dim(g, "L", &L);
        sh[0] = B; sh[1] = L; sh[2] = 2; sh[3] = 8;
    }
    q = tg_permute(g, "qh", tg_reshape(g, "q4", q, 4, sh), 0, 2, 1, 3);
    k = tg_permute(g, "kh", tg_reshape(g, "k4", k, 4, sh), 0, 2, 1, 3);
    v = tg_permute(g, "vh", tg_reshape(g, "v4", v, 4, sh), 0, 2, 1, 3);
    a = tg_attrs();
    a.is_causal = 1;
    a.scale = 0.25f;
    a.softcap = 30;
    a.window_set = 1;
    a.window_left = 3;
    a.window_right = -1;
    s = tg_node(g, KERN_GRAPH_OP_SDPA, "att", q, k, v, &a);
    a = tg_attrs();
    a.axis = 1;
    a.axis2 = 2;
    t = tg_node(g, KERN_GRAPH_OP_TRANSPOSE, "att_t", s, 0, 0, &a);
    sh[2] = KERN_GRAPH_DIM_INFER;
    t = tg_reshape(g, "att_flat", t, 3, sh);
    a = tg_attrs();
    a.eps_set = 1;
    a.eps = 1e-12f;
    a.act = KERN_ACT_GELU;
    {
        kern_graph_val g1 = tg_w1(g, &r, "ln.w", 16, 0.1, 1), b1 = tg_w1(g, &r, "ln.b", 16, 0.1, 0);
        kern_graph_node_desc d;
        kern_graph_val outs[2];
        memset(&d, 0, sizeof d);
        d.op = KERN_GRAPH_OP_LAYER_NORM;
        d.name = "ln";
        d.inputs[0] = t;
        d.inputs[1] = g1;
        d.inputs[2] = b1;
        d.inputs[3] = x;
        d.n_outputs = 2;
        d.output_names[1] = "ln_sum";
        d.attrs = a;
        KT_OK(kern_graph_add(g, &d, outs));
        m = outs[0];
    }
    KT_OK(kern_graph_scalar(g, "three", KERN_F32, 3.0, &sc));
    m = tg_node(g, KERN_GRAPH_OP_MUL, "m3", m, sc, 0, NULL);
    a = tg_attrs();
    a.exponent = 2.5f;
    m = tg_node(g, KERN_GRAPH_OP_POW, "pw", m, 0, 0, &a);
    a = tg_attrs();
    a.alpha_set = 1;
    a.alpha = -0.0f;
    m = tg_node(g, KERN_GRAPH_OP_SCALE, "neg0", m, 0, 0, &a);
    m = tg_node(g, KERN_GRAPH_OP_SOFTMAX, "sm", m, 0, 0, NULL);
    a1 = tg_node(g, KERN_GRAPH_OP_REDUCE_MEAN, "rm", m, 0, 0, NULL);
    a = tg_attrs();
    a.axis = 1;
    a.start = 1;
    {
        int64_t lm1;
        kern_graph_dim(g, "L-1", &lm1);
        a.length = lm1;
    }
    a1 = tg_node(g, KERN_GRAPH_OP_SLICE, "sl", a1, 0, 0, &a);
    a = tg_attrs();
    a.dtype = KERN_BF16;
    a1 = tg_node(g, KERN_GRAPH_OP_CAST, "c16", a1, 0, 0, &a);
    {
        int64_t e[2] = {8, 16};
        kern_graph_val tab = tg_weight(g, &r, "emb", KERN_F32, 2, e, 1.0);
        kern_graph_val em = tg_node(g, KERN_GRAPH_OP_EMBEDDING, "em", ids, tab, 0, NULL);
        kern_graph_node_desc d;
        kern_graph_val cc;
        memset(&d, 0, sizeof d);
        d.op = KERN_GRAPH_OP_CONCAT;
        d.name = "cat";
        d.inputs[0] = em;
        d.inputs[1] = x;
        d.attrs.axis = -1;
        KT_OK(kern_graph_add(g, &d, &cc));
        KT_OK(kern_graph_output(g, cc));
    }
    KT_OK(kern_graph_output(g, a1));
    /* graph kernels */
    KT_OK(kern_graph_input_s(g, "rowptr", KERN_I32, "[N+1]", &rp));
    KT_OK(kern_graph_input_s(g, "col", KERN_I32, "[E]", &col));
    KT_OK(kern_graph_input_s(g, "feat", KERN_F32, "[N,8]", &dense));
    a = tg_attrs();
    a.reduce = KERN_REDUCE_MEAN;
    {
        kern_graph_node_desc d;
        kern_graph_val o;
        memset(&d, 0, sizeof d);
        d.op = KERN_GRAPH_OP_SPMM_REDUCE;
        d.name = "agg";
        d.inputs[0] = rp;
        d.inputs[1] = col;
        d.inputs[3] = dense;
        d.attrs = a;
        KT_OK(kern_graph_add(g, &d, &o));
        KT_OK(kern_graph_input_s(g, "dst", KERN_I64, "[E]", &idx));
        {
            kern_graph_val src = tg_node(g, KERN_GRAPH_OP_EMBEDDING, "gath", col, dense, 0, NULL);
            (void)src;
        }
        a = tg_attrs();
        a.reduce = KERN_REDUCE_AMAX;
        a.include_self = 1;
        o = tg_node(g, KERN_GRAPH_OP_SCATTER_REDUCE, "sc", o, idx,
                    kern_graph_find(g, "gath"), &a);
        KT_OK(kern_graph_output(g, o));
    }
    {
        kern_graph_val xq[2];
        kern_graph_node_desc d;
        memset(&d, 0, sizeof d);
        d.op = KERN_GRAPH_OP_QUANTIZE_PER_TOKEN;
        d.name = "xq";
        d.inputs[0] = x;
        d.output_names[1] = "xq_scales";
        KT_OK(kern_graph_add(g, &d, xq));
        a = tg_attrs();
        a.act = KERN_ACT_GELU;
        KT_OK(kern_graph_output(g, tg_node(g, KERN_GRAPH_OP_QLINEAR, "ql", x, w, 0, &a)));
        a = tg_attrs();
        a.prune = 1;
        KT_OK(kern_graph_output(g, tg_node(g, KERN_GRAPH_OP_SPARSE24_LINEAR, "sp", x, w, b, &a)));
        KT_OK(kern_graph_output(g, xq[1]));
    }
    {
        kern_graph_val r1 = tg_node(g, KERN_GRAPH_OP_REDUCE_SUM, "rs", x, 0, 0, NULL);
        kern_graph_attrs a2 = tg_attrs();
        a2.n_shape = 4;
        a2.shape[0] = 2;
        a2.shape[1] = KERN_GRAPH_DIM_INFER;
        a2.shape[2] = KERN_GRAPH_DIM_INFER;
        a2.shape[3] = 5;
        KT_OK(kern_graph_output(g, tg_node(g, KERN_GRAPH_OP_EXPAND, "ex", r1, 0, 0, &a2)));
    }
    tg_roundtrip(g);
    {
        char *ir = tg_ir(g);
        KT_CHECK(strstr(ir, "lin = linear(x, w, b) act=gelu_tanh alpha=0.5 out_scale=1.25\n") != NULL, "%s", ir);
        KT_CHECK(strstr(ir, "q, k, v = split(lin) axis=-1 sizes=16,16,16\n") != NULL, "%s", ir);
        KT_CHECK(strstr(ir, "att = sdpa(qh, kh, vh) is_causal=1 scale=0.25 softcap=30 window=3,-1\n") != NULL, "%s", ir);
        KT_CHECK(strstr(ir, "ex = expand(rs) shape=2,-1,-1,5\n") != NULL, "%s", ir);
        KT_CHECK(strstr(ir, "ln, ln_sum = layer_norm(att_flat, ln.w, ln.b, x) act=gelu eps=1e-12\n") != NULL, "%s", ir);
        KT_CHECK(strstr(ir, "neg0 = scale(pw) alpha=-0\n") != NULL, "%s", ir);
        KT_CHECK(strstr(ir, "sl = slice(rm) axis=1 start=1 length=L-1\n") != NULL, "%s", ir);
        KT_CHECK(strstr(ir, "input rowptr i32 [N+1]\n") != NULL, "%s", ir);
        KT_CHECK(strstr(ir, "agg = spmm_reduce(rowptr, col, -, feat) reduce=mean\n") != NULL, "%s", ir);
        KT_CHECK(strstr(ir, "const three f32 [] 3\n") != NULL, "%s", ir);
        free(ir);
    }
    kern_graph_destroy(g);
}

/* Every builder error: status, a message naming the node and its inputs,
 * and the graph unchanged (same IR). */
KT_TEST(graph_builder_errors) {
    kern_graph *g;
    kt_rng r = kt_rng_make(2);
    kern_graph_val x, w, y, ids;
    char *before, *after;
    kern_graph_node_desc d;
    KT_OK(kern_graph_create(NULL, &g));
    KT_OK(kern_graph_input_s(g, "x", KERN_F32, "[B,L,64]", &x));
    KT_OK(kern_graph_input_s(g, "ids", KERN_I32, "[B,L]", &ids));
    w = tg_w2(g, &r, "w", 32, 48, 0.1);
    before = tg_ir(g);
    KT_ERROR(kern_graph_linear(g, "l", x, w, 0, KERN_ACT_NONE, &y), KERN_ERR_SHAPE,
             "node 'l' (linear; x=[B,L,64] f32, weight=[32,48] f32): x.shape[-1]=64 != weight.shape[1]=48");
    KT_ERROR(kern_graph_linear(g, "x", x, w, 0, KERN_ACT_NONE, &y), KERN_ERR_ARG,
             "a value named 'x' already exists");
    KT_ERROR(kern_graph_linear(g, "bad name", x, w, 0, KERN_ACT_NONE, &y), KERN_ERR_ARG, "bad name");
    KT_ERROR(kern_graph_linear(g, "l", x, 0, 0, KERN_ACT_NONE, &y), KERN_ERR_ARG, "input 'weight' is missing");
    KT_ERROR(kern_graph_linear(g, "l", x, 999, 0, KERN_ACT_NONE, &y), KERN_ERR_ARG, "not in the graph");
    KT_ERROR(kern_graph_binary(g, KERN_GRAPH_OP_ADD, "a", x, ids, &y), KERN_ERR_DTYPE, "b must be f32");
    KT_ERROR(kern_graph_binary(g, KERN_GRAPH_OP_ADD, "a", x, w, &y), KERN_ERR_SHAPE, "do not broadcast");
    memset(&d, 0, sizeof d);
    d.op = KERN_GRAPH_OP_ADD;
    d.name = "a";
    d.inputs[0] = x;
    d.inputs[1] = x;
    d.attrs.eps_set = 1;
    KT_ERROR(kern_graph_add(g, &d, &y), KERN_ERR_ARG, "attribute 'eps' does not apply to op 'add'");
    memset(&d, 0, sizeof d);
    d.op = KERN_GRAPH_OP_RESHAPE;
    d.name = "rs";
    d.inputs[0] = x;
    d.attrs.n_shape = 2;
    d.attrs.shape[0] = 7;
    d.attrs.shape[1] = KERN_GRAPH_DIM_INFER;
    KT_ERROR(kern_graph_add(g, &d, &y), KERN_ERR_SHAPE, "cannot infer the -1 dim: 64*B*L elements over 7");
    memset(&d, 0, sizeof d);
    d.op = KERN_GRAPH_OP_SDPA;
    d.name = "at";
    d.inputs[0] = x;
    d.inputs[1] = x;
    d.inputs[2] = x;
    KT_ERROR(kern_graph_add(g, &d, &y), KERN_ERR_SHAPE, "q, k, v must be 4-D");
    memset(&d, 0, sizeof d);
    d.op = KERN_GRAPH_OP_LAYER_NORM;
    d.name = "ln";
    d.inputs[0] = x;
    d.attrs.act = KERN_ACT_SILU;
    KT_ERROR(kern_graph_add(g, &d, &y), KERN_ERR_UNSUPPORTED, "act=silu");
    d.attrs.act = KERN_ACT_NONE;
    d.n_outputs = 2;
    KT_ERROR(kern_graph_add(g, &d, &y), KERN_ERR_ARG, "2 with a residual");
    memset(&d, 0, sizeof d);
    d.op = KERN_GRAPH_OP_SPLIT;
    d.name = "sp";
    d.inputs[0] = x;
    d.attrs.axis = 2;
    d.n_outputs = 5;
    KT_ERROR(kern_graph_add(g, &d, &y), KERN_ERR_SHAPE, "does not split into 5 equal pieces");
    d.attrs.axis = 3;
    d.n_outputs = 2;
    KT_ERROR(kern_graph_add(g, &d, &y), KERN_ERR_ARG, "axis 3 is outside the 3 dims");
    memset(&d, 0, sizeof d);
    d.op = (kern_graph_op)999;
    d.name = "zz";
    KT_ERROR(kern_graph_add(g, &d, &y), KERN_ERR_ARG, "not a kern_graph_op");
    KT_ERROR(kern_graph_input_s(g, "z", KERN_F32, "[B,", &y), KERN_ERR_ARG, "shape");
    {
        kern_tensor t = kern_tensor_2d(NULL, KERN_F32, 3, 4);
        t.dtype = KERN_DTYPE_NONE;
        KT_ERROR(kern_graph_weight(g, "ww", &t, 0, &y), KERN_ERR_DTYPE, "ww");
    }
    after = tg_ir(g);
    KT_CHECK(strcmp(before, after) == 0, "a failed add changed the graph:\n%s\n---\n%s", before, after);
    KT_CHECK(kern_graph_n_nodes(g) == 0);
    free(before);
    free(after);
    kern_graph_destroy(g);
}

static void tg_bad_ir(const char *text, kern_status want, const char *needle) {
    kern_graph *g = (kern_graph *)(uintptr_t)1;
    kt_context("IR: %s", text);
    KT_ERROR(kern_graph_read_ir(NULL, text, strlen(text), &g), want, needle);
    KT_CHECK(g == (kern_graph *)(uintptr_t)1, "output written on error");
    kt_context("");
}

KT_TEST(graph_ir_errors) {
    tg_bad_ir("", KERN_ERR_ARG, "no 'kern-graph 1' header");
    tg_bad_ir("kern-graf 1\n", KERN_ERR_ARG, "line 1, column 1: expected the header");
    tg_bad_ir("kern-graph 2\n", KERN_ERR_UNSUPPORTED, "IR version '2'");
    tg_bad_ir("kern-graph 1 x\n", KERN_ERR_ARG, "line 1, column 14: unexpected text");
    tg_bad_ir("kern-graph 1\ninput x f32 [B]\n", KERN_ERR_ARG,
              "line 2, column 14: symbol 'B' is not declared");
    tg_bad_ir("kern-graph 1\ndim B\ninput x f32 [B]\ny = lineer(x, x)\n", KERN_ERR_ARG,
              "line 4, column 5: unknown op 'lineer'");
    tg_bad_ir("kern-graph 1\ndim B\ninput x f32 [B]\ny = add(x, q)\n", KERN_ERR_ARG,
              "line 4, column 12: 'q' is not defined");
    tg_bad_ir("kern-graph 1\ndim B\ninput x f32 [B]\na = add(x, b)\nb = add(x, c)\nc = add(a, x)\n",
              KERN_ERR_ARG, "cycle: 'a' (line 4) -> 'b' (line 5) -> 'c' (line 6) -> 'a'");
    tg_bad_ir("kern-graph 1\ndim B\ninput x f32 [B]\ny = add(x, x) eps=1\n", KERN_ERR_ARG,
              "line 4, column 15: attribute 'eps' does not apply to op 'add'");
    tg_bad_ir("kern-graph 1\ndim B\ninput x f32 [B]\ny = add(x, x) bogus=1\n", KERN_ERR_ARG,
              "unknown attribute 'bogus'");
    tg_bad_ir("kern-graph 1\ndim B\ninput x f32 [B]\ny = gelu(x\n", KERN_ERR_ARG,
              "line 4, column 11: expected ',' or ')'");
    tg_bad_ir("kern-graph 1\ndim B\ninput x f32 [B]\ny = gelu(x) act\n", KERN_ERR_ARG,
              "expected key=value");
    tg_bad_ir("kern-graph 1\ndim B\ninput x f32 [B]\ninput x f32 [B]\n", KERN_ERR_ARG,
              "line 4, column 7: 'x' is already defined on line 3");
    tg_bad_ir("kern-graph 1\ninput x f33 [2]\n", KERN_ERR_DTYPE, "line 2, column 9: unknown dtype 'f33'");
    tg_bad_ir("kern-graph 1\ninput x f32 [2,]\n", KERN_ERR_ARG, "line 2");
    tg_bad_ir("kern-graph 1\ninput x f32 2\n", KERN_ERR_ARG, "a shape is written");
    tg_bad_ir("kern-graph 1\ndim B\nweight w f32 [B]\n", KERN_ERR_SHAPE, "weight shapes are concrete");
    tg_bad_ir("kern-graph 1\nconst c f32 [2] 1\n", KERN_ERR_SHAPE, "1 values for a shape of 2");
    tg_bad_ir("kern-graph 1\nconst c f32 [2] 1,2,3\n", KERN_ERR_SHAPE, "more than the 2 values");
    tg_bad_ir("kern-graph 1\nconst c f32 [] x\n", KERN_ERR_ARG, "expected a number");
    tg_bad_ir("kern-graph 1\ninput x f32 [4]\ny = linear(x, x)\n", KERN_ERR_SHAPE,
              "line 3, column 5: node 'y' (linear; x=[4] f32, weight=[4] f32): weight must be 2-D");
    tg_bad_ir("kern-graph 1\ninput x f32 [4]\noutput z\n", KERN_ERR_ARG, "'z' is not defined");
    tg_bad_ir("kern-graph 1\ninput x f32 [4]\n= add(x, x)\n", KERN_ERR_ARG, "line 3, column 1");
    tg_bad_ir("kern-graph 1\ninput x f32 [4]\ny = split(x) axis=0 sizes=1,1,2\n", KERN_ERR_ARG,
              "3 sizes for 1 outputs");
    tg_bad_ir("kern-graph 1\ninput x f32 [4]\ny = add(x, x)\x01\n", KERN_ERR_ARG, "control character");
    tg_bad_ir("kern-graph 1\ndim B\ninput x f32 [B]\ny = softmax(x) \n"
              "z = reshape(y) shape=Q\n", KERN_ERR_ARG, "symbol 'Q' is not declared");
    { /* forward references resolve (a text need not be in order) */
        const char *t = "kern-graph 1\ny = gelu(x)\noutput y\ndim B\ninput x f32 [B,4]\n";
        kern_graph *g = NULL;
        KT_OK(kern_graph_read_ir(NULL, t, strlen(t), &g));
        KT_CHECK(g && kern_graph_n_nodes(g) == 1);
        kern_graph_destroy(g);
    }
    { /* comments, blank lines, CRLF and extra spaces are accepted */
        const char *t = "# a model\r\nkern-graph 1\r\n\r\ndim B\ninput  x  f32  [B,4]\n  y = gelu( x )  # no\n";
        kern_graph *g = NULL;
        kern_status st = kern_graph_read_ir(NULL, t, strlen(t), &g);
        /* a '#' inside a node line is not a comment: the word after it is
         * not key=value */
        KT_CHECK(st == KERN_ERR_ARG, "%s", kern_last_error());
        t = "# a model\r\nkern-graph 1\r\n\r\ndim B\ninput  x  f32  [B,4]\n  y = gelu( x )\noutput y\n";
        KT_OK(kern_graph_read_ir(NULL, t, strlen(t), &g));
        kern_graph_destroy(g);
        /* and spaces in the header and around the dims of a shape (what
         * gen/kern_gen.py reads too), not inside a dim expression */
        t = "kern-graph \t 1 \ndim B\ninput x f32 [ B , 2*2 ]\nweight w f32 [ ]\ny = gelu(x)\noutput y\n";
        g = NULL;
        KT_OK(kern_graph_read_ir(NULL, t, strlen(t), &g));
        {
            char *ir = tg_ir(g);
            KT_CHECK(strstr(ir, "input x f32 [B,4]\n") != NULL && strstr(ir, "weight w f32 []\n") != NULL,
                     "%s", ir);
            free(ir);
        }
        kern_graph_destroy(g);
    }
    tg_bad_ir("kern-graph 1\ninput x f32 [2 * 3]\n", KERN_ERR_ARG, "expected '+', '-' or '*'");
    tg_bad_ir("kern-graph 1\ninput x f32 [2, ,3]\n", KERN_ERR_ARG, "empty dim");
    tg_bad_ir("kern-graph  2\n", KERN_ERR_UNSUPPORTED, "IR version '2'");
    /* integer constants hold integers of their dtype (the plan casts) */
    tg_bad_ir("kern-graph 1\nconst c i32 [3] 0,inf,1\n", KERN_ERR_ARG, "value inf (element 1) is not an integer");
    tg_bad_ir("kern-graph 1\nconst c i64 [2] 0,2.5\n", KERN_ERR_ARG, "value 2.5 (element 1)");
    tg_bad_ir("kern-graph 1\nconst c i8 [1] 128\n", KERN_ERR_ARG, "that i8 holds");
    tg_bad_ir("kern-graph 1\nconst c bool [1] nan\n", KERN_ERR_ARG, "that bool holds");
    tg_bad_ir("kern-graph 1 x\n", KERN_ERR_ARG, "unexpected text after the header");
}

/* ------------------------------------------------ BERT-style encoder */

typedef struct tg_bert {
    int layers;
    int64_t hidden, heads, inter, vocab, max_pos;
} tg_bert;

/* Builds the encoder as Hugging Face's BertModel computes it: separate
 * bias adds, GELU and residual adds (the passes fuse them), Q/K/V as three
 * linears (merged by the QKV pass), the attention through sdpa with an
 * additive mask [B,1,1,L]. */
static kern_graph *tg_bert_build(const tg_bert *c, uint64_t seed) {
    kern_graph *g;
    kt_rng r = kt_rng_make(seed);
    kern_graph_val ids, tt, mask, h, e, pos, te;
    int64_t B, L, sh4[4], sh3[3], es[2];
    int l;
    char nm[96], nm2[96];
    kern_graph_attrs a;
    if (kern_graph_create(NULL, &g)) return NULL;
    kern_graph_input_s(g, "input_ids", KERN_I64, "[B,L]", &ids);
    kern_graph_input_s(g, "token_type_ids", KERN_I64, "[B,L]", &tt);
    kern_graph_input_s(g, "attention_mask", KERN_F32, "[B,1,1,L]", &mask);
    kern_graph_dim(g, "B", &B);
    kern_graph_dim(g, "L", &L);
    es[0] = c->vocab;
    es[1] = c->hidden;
    e = tg_node(g, KERN_GRAPH_OP_EMBEDDING, "emb.word",
                ids, tg_weight(g, &r, "embeddings.word_embeddings.weight", KERN_F32, 2, es, 0.5), 0, NULL);
    es[0] = c->max_pos;
    a = tg_attrs();
    a.axis = 0;
    a.length = L;
    pos = tg_node(g, KERN_GRAPH_OP_SLICE, "emb.pos",
                  tg_weight(g, &r, "embeddings.position_embeddings.weight", KERN_F32, 2, es, 0.5), 0, 0, &a);
    es[0] = 2;
    te = tg_node(g, KERN_GRAPH_OP_EMBEDDING, "emb.type",
                 tt, tg_weight(g, &r, "embeddings.token_type_embeddings.weight", KERN_F32, 2, es, 0.5), 0, NULL);
    e = tg_node(g, KERN_GRAPH_OP_ADD, "emb.sum1", e, pos, 0, NULL);
    e = tg_node(g, KERN_GRAPH_OP_ADD, "emb.sum2", e, te, 0, NULL);
    a = tg_attrs();
    a.eps_set = 1;
    a.eps = 1e-12f;
    h = tg_node(g, KERN_GRAPH_OP_LAYER_NORM, "emb.ln", e,
                tg_w1(g, &r, "embeddings.LayerNorm.weight", c->hidden, 0.1, 1.0),
                tg_w1(g, &r, "embeddings.LayerNorm.bias", c->hidden, 0.1, 0), &a);
    sh4[0] = B; sh4[1] = L; sh4[2] = c->heads; sh4[3] = c->hidden / c->heads;
    sh3[0] = B; sh3[1] = L; sh3[2] = c->hidden;
    for (l = 0; l < c->layers; l++) {
        kern_graph_val q, k, v, ctx, o, h1, it, o2;
        const char *qkv[3] = {"query", "key", "value"};
        kern_graph_val *dst[3];
        int j;
        dst[0] = &q; dst[1] = &k; dst[2] = &v;
        for (j = 0; j < 3; j++) {
            kern_graph_val y;
            snprintf(nm, sizeof nm, "encoder.layer.%d.attention.self.%s.weight", l, qkv[j]);
            snprintf(nm2, sizeof nm2, "encoder.layer.%d.attention.self.%s.bias", l, qkv[j]);
            {
                kern_graph_val wv = tg_w2(g, &r, nm, c->hidden, c->hidden, 0.15);
                kern_graph_val bv = tg_w1(g, &r, nm2, c->hidden, 0.1, 0);
                snprintf(nm, sizeof nm, "l%d.%s", l, qkv[j]);
                KT_OK(kern_graph_linear(g, nm, h, wv, bv, KERN_ACT_NONE, &y));
            }
            snprintf(nm, sizeof nm, "l%d.%s.4d", l, qkv[j]);
            y = tg_reshape(g, nm, y, 4, sh4);
            snprintf(nm, sizeof nm, "l%d.%s.heads", l, qkv[j]);
            *dst[j] = tg_permute(g, nm, y, 0, 2, 1, 3);
        }
        snprintf(nm, sizeof nm, "l%d.attn", l);
        {
            kern_graph_node_desc d;
            memset(&d, 0, sizeof d);
            d.op = KERN_GRAPH_OP_SDPA;
            d.name = nm;
            d.inputs[0] = q;
            d.inputs[1] = k;
            d.inputs[2] = v;
            d.inputs[3] = mask;
            KT_OK(kern_graph_add(g, &d, &ctx));
        }
        snprintf(nm, sizeof nm, "l%d.attn.t", l);
        ctx = tg_permute(g, nm, ctx, 0, 2, 1, 3);
        snprintf(nm, sizeof nm, "l%d.attn.flat", l);
        ctx = tg_reshape(g, nm, ctx, 3, sh3);
        snprintf(nm, sizeof nm, "encoder.layer.%d.attention.output.dense.weight", l);
        snprintf(nm2, sizeof nm2, "encoder.layer.%d.attention.output.dense.bias", l);
        {
            kern_graph_val wv = tg_w2(g, &r, nm, c->hidden, c->hidden, 0.15), bv = tg_w1(g, &r, nm2, c->hidden, 0.1, 0);
            snprintf(nm, sizeof nm, "l%d.attn.out", l);
            KT_OK(kern_graph_linear(g, nm, ctx, wv, 0, KERN_ACT_NONE, &o));
            snprintf(nm, sizeof nm, "l%d.attn.out.bias", l);
            o = tg_node(g, KERN_GRAPH_OP_ADD, nm, o, bv, 0, NULL);
        }
        snprintf(nm, sizeof nm, "l%d.attn.res", l);
        o = tg_node(g, KERN_GRAPH_OP_ADD, nm, o, h, 0, NULL);
        snprintf(nm, sizeof nm, "encoder.layer.%d.attention.output.LayerNorm.weight", l);
        snprintf(nm2, sizeof nm2, "encoder.layer.%d.attention.output.LayerNorm.bias", l);
        {
            kern_graph_val gw = tg_w1(g, &r, nm, c->hidden, 0.1, 1.0), gb = tg_w1(g, &r, nm2, c->hidden, 0.1, 0);
            snprintf(nm, sizeof nm, "l%d.ln1", l);
            h1 = tg_node(g, KERN_GRAPH_OP_LAYER_NORM, nm, o, gw, gb, &a);
        }
        snprintf(nm, sizeof nm, "encoder.layer.%d.intermediate.dense.weight", l);
        snprintf(nm2, sizeof nm2, "encoder.layer.%d.intermediate.dense.bias", l);
        {
            kern_graph_val wv = tg_w2(g, &r, nm, c->inter, c->hidden, 0.15), bv = tg_w1(g, &r, nm2, c->inter, 0.1, 0);
            snprintf(nm, sizeof nm, "l%d.inter", l);
            KT_OK(kern_graph_linear(g, nm, h1, wv, bv, KERN_ACT_NONE, &it));
            snprintf(nm, sizeof nm, "l%d.gelu", l);
            it = tg_node(g, KERN_GRAPH_OP_GELU, nm, it, 0, 0, NULL);
        }
        snprintf(nm, sizeof nm, "encoder.layer.%d.output.dense.weight", l);
        snprintf(nm2, sizeof nm2, "encoder.layer.%d.output.dense.bias", l);
        {
            kern_graph_val wv = tg_w2(g, &r, nm, c->hidden, c->inter, 0.08), bv = tg_w1(g, &r, nm2, c->hidden, 0.1, 0);
            snprintf(nm, sizeof nm, "l%d.out", l);
            KT_OK(kern_graph_linear(g, nm, it, wv, bv, KERN_ACT_NONE, &o2));
        }
        snprintf(nm, sizeof nm, "l%d.out.res", l);
        o2 = tg_node(g, KERN_GRAPH_OP_ADD, nm, o2, h1, 0, NULL);
        snprintf(nm, sizeof nm, "encoder.layer.%d.output.LayerNorm.weight", l);
        snprintf(nm2, sizeof nm2, "encoder.layer.%d.output.LayerNorm.bias", l);
        {
            kern_graph_val gw = tg_w1(g, &r, nm, c->hidden, 0.1, 1.0), gb = tg_w1(g, &r, nm2, c->hidden, 0.1, 0);
            snprintf(nm, sizeof nm, "l%d.ln2", l);
            h = tg_node(g, KERN_GRAPH_OP_LAYER_NORM, nm, o2, gw, gb, &a);
        }
    }
    KT_OK(kern_graph_output(g, h));
    return g;
}

/* The same model from direct kernel calls (no graph): embeddings in plain
 * loops, kern_norm, kern_gemm with bias, kern_sdpa, the residual adds done
 * by kern_norm's residual input. Writes out [B,L,H]. */
static void tg_bert_direct(kern_ctx *ctx, kern_graph *g, const tg_bert *c, int64_t B, int64_t L,
                           const int64_t *ids, const int64_t *tt, const float *mask, float *out) {
    int64_t H = c->hidden, T = B * L, nh = c->heads, dh = H / nh, i, j;
    float *h = (float *)malloc((size_t)(T * H) * 4), *x = (float *)malloc((size_t)(T * H) * 4);
    float *q = (float *)malloc((size_t)(T * H) * 4), *k = (float *)malloc((size_t)(T * H) * 4);
    float *v = (float *)malloc((size_t)(T * H) * 4), *at = (float *)malloc((size_t)(T * H) * 4);
    float *h1 = (float *)malloc((size_t)(T * H) * 4), *it = (float *)malloc((size_t)(T * c->inter) * 4);
    const float *we = tg_wdata(g, "embeddings.word_embeddings.weight");
    const float *pe = tg_wdata(g, "embeddings.position_embeddings.weight");
    const float *te = tg_wdata(g, "embeddings.token_type_embeddings.weight");
    char nm[128];
    kern_norm_params np;
    kern_tensor tx, th, tw, tb;
    int l;
    for (i = 0; i < T; i++)
        for (j = 0; j < H; j++)
            x[i * H + j] = (we[ids[i] * H + j] + pe[(i % L) * H + j]) + te[tt[i] * H + j];
    memset(&np, 0, sizeof np);
    np.eps = 1e-12f;
    tx = kern_tensor_2d(x, KERN_F32, T, H);
    th = kern_tensor_2d(h, KERN_F32, T, H);
    tw = kern_tensor_1d((void *)tg_wdata(g, "embeddings.LayerNorm.weight"), KERN_F32, H);
    tb = kern_tensor_1d((void *)tg_wdata(g, "embeddings.LayerNorm.bias"), KERN_F32, H);
    np.weight = &tw;
    np.bias = &tb;
    KT_OK(kern_norm(ctx, &tx, &th, &np));
    for (l = 0; l < c->layers; l++) {
        const char *qkv[3] = {"query", "key", "value"};
        float *dst[3];
        int jj;
        dst[0] = q; dst[1] = k; dst[2] = v;
        for (jj = 0; jj < 3; jj++) {
            kern_gemm_params gp;
            kern_tensor w2, b1, y = kern_tensor_2d(dst[jj], KERN_F32, T, H);
            snprintf(nm, sizeof nm, "encoder.layer.%d.attention.self.%s.weight", l, qkv[jj]);
            w2 = kern_tensor_2d(tg_wdata(g, nm), KERN_F32, H, H);
            snprintf(nm, sizeof nm, "encoder.layer.%d.attention.self.%s.bias", l, qkv[jj]);
            b1 = kern_tensor_1d(tg_wdata(g, nm), KERN_F32, H);
            memset(&gp, 0, sizeof gp);
            gp.trans_b = 1;
            gp.epilogue.bias = &b1;
            KT_OK(kern_gemm(ctx, &th, &w2, &y, &gp));
        }
        {
            /* [B,L,nh,dh] memory viewed as [B,nh,L,dh] */
            int64_t shp[4], st4[4];
            kern_tensor tq, tk, tv, to, tm;
            kern_sdpa_params sp;
            shp[0] = B; shp[1] = nh; shp[2] = L; shp[3] = dh;
            st4[0] = L * H; st4[1] = dh; st4[2] = H; st4[3] = 1;
            kern_tensor_init_strided(&tq, q, KERN_F32, 4, shp, st4);
            kern_tensor_init_strided(&tk, k, KERN_F32, 4, shp, st4);
            kern_tensor_init_strided(&tv, v, KERN_F32, 4, shp, st4);
            kern_tensor_init_strided(&to, at, KERN_F32, 4, shp, st4);
            tm = kern_tensor_4d((void *)mask, KERN_F32, B, 1, 1, L);
            memset(&sp, 0, sizeof sp);
            sp.attn_mask = &tm;
            KT_OK(kern_sdpa(ctx, &tq, &tk, &tv, &to, &sp));
        }
        {
            kern_gemm_params gp;
            kern_tensor w2, b1, ta = kern_tensor_2d(at, KERN_F32, T, H), ty = kern_tensor_2d(x, KERN_F32, T, H);
            kern_tensor th1 = kern_tensor_2d(h1, KERN_F32, T, H), g1, g2;
            snprintf(nm, sizeof nm, "encoder.layer.%d.attention.output.dense.weight", l);
            w2 = kern_tensor_2d(tg_wdata(g, nm), KERN_F32, H, H);
            snprintf(nm, sizeof nm, "encoder.layer.%d.attention.output.dense.bias", l);
            b1 = kern_tensor_1d(tg_wdata(g, nm), KERN_F32, H);
            memset(&gp, 0, sizeof gp);
            gp.trans_b = 1;
            gp.epilogue.bias = &b1;
            KT_OK(kern_gemm(ctx, &ta, &w2, &ty, &gp));
            snprintf(nm, sizeof nm, "encoder.layer.%d.attention.output.LayerNorm.weight", l);
            g1 = kern_tensor_1d(tg_wdata(g, nm), KERN_F32, H);
            snprintf(nm, sizeof nm, "encoder.layer.%d.attention.output.LayerNorm.bias", l);
            g2 = kern_tensor_1d(tg_wdata(g, nm), KERN_F32, H);
            np.weight = &g1;
            np.bias = &g2;
            np.residual = &th;
            KT_OK(kern_norm(ctx, &ty, &th1, &np));
        }
        {
            kern_gemm_params gp;
            kern_tensor w2, b1, ti = kern_tensor_2d(it, KERN_F32, T, c->inter), th1 = kern_tensor_2d(h1, KERN_F32, T, H);
            kern_tensor ty = kern_tensor_2d(x, KERN_F32, T, H), g1, g2;
            snprintf(nm, sizeof nm, "encoder.layer.%d.intermediate.dense.weight", l);
            w2 = kern_tensor_2d(tg_wdata(g, nm), KERN_F32, c->inter, H);
            snprintf(nm, sizeof nm, "encoder.layer.%d.intermediate.dense.bias", l);
            b1 = kern_tensor_1d(tg_wdata(g, nm), KERN_F32, c->inter);
            memset(&gp, 0, sizeof gp);
            gp.trans_b = 1;
            gp.epilogue.bias = &b1;
            gp.epilogue.act = KERN_ACT_GELU;
            KT_OK(kern_gemm(ctx, &th1, &w2, &ti, &gp));
            snprintf(nm, sizeof nm, "encoder.layer.%d.output.dense.weight", l);
            w2 = kern_tensor_2d(tg_wdata(g, nm), KERN_F32, H, c->inter);
            snprintf(nm, sizeof nm, "encoder.layer.%d.output.dense.bias", l);
            b1 = kern_tensor_1d(tg_wdata(g, nm), KERN_F32, H);
            gp.epilogue.act = KERN_ACT_NONE;
            gp.epilogue.bias = &b1;
            KT_OK(kern_gemm(ctx, &ti, &w2, &ty, &gp));
            snprintf(nm, sizeof nm, "encoder.layer.%d.output.LayerNorm.weight", l);
            g1 = kern_tensor_1d(tg_wdata(g, nm), KERN_F32, H);
            snprintf(nm, sizeof nm, "encoder.layer.%d.output.LayerNorm.bias", l);
            g2 = kern_tensor_1d(tg_wdata(g, nm), KERN_F32, H);
            np.weight = &g1;
            np.bias = &g2;
            np.residual = &th1;
            KT_OK(kern_norm(ctx, &ty, &th, &np));
        }
        np.residual = NULL;
    }
    memcpy(out, h, (size_t)(T * H) * 4);
    free(h); free(x); free(q); free(k); free(v); free(at); free(h1); free(it);
}

typedef struct tg_bert_in {
    int64_t B, L;
    int64_t *ids, *tt;
    float *mask;
    kern_tensor t[3];
} tg_bert_in;

static void tg_bert_inputs(tg_bert_in *in, const tg_bert *c, int64_t B, int64_t L, kt_rng *r) {
    int64_t i, b;
    in->B = B;
    in->L = L;
    in->ids = (int64_t *)malloc((size_t)(B * L + 1) * 8);
    in->tt = (int64_t *)malloc((size_t)(B * L + 1) * 8);
    in->mask = (float *)malloc((size_t)(B * L + 1) * 4);
    for (i = 0; i < B * L; i++) {
        in->ids[i] = kt_randint(r, 0, c->vocab);
        in->tt[i] = (i % L) >= L / 2;
    }
    for (b = 0; b < B; b++) { /* padded: the last b keys of batch b masked */
        for (i = 0; i < L; i++) in->mask[b * L + i] = (i >= L - b && i > 0) ? -10000.0f : 0.0f;
    }
    in->t[0] = kern_tensor_2d(in->ids, KERN_I64, B, L);
    in->t[1] = kern_tensor_2d(in->tt, KERN_I64, B, L);
    in->t[2] = kern_tensor_4d(in->mask, KERN_F32, B, 1, 1, L);
}
static void tg_bert_inputs_free(tg_bert_in *in) {
    free(in->ids);
    free(in->tt);
    free(in->mask);
}

static const tg_bert TG_BERT = {2, 64, 4, 256, 100, 64};

/* A GELU / GELU-tanh / SiLU / ReLU node the epilogue pass leaves alone
 * computes what the fused epilogue does (the shared math layer): linear +
 * act planned with and without the pass give the same bits, on every ISA
 * level; and kern_act_f32 is that function. */
KT_TEST(graph_unfused_act_matches_fused) {
    static const char *acts[] = {"gelu", "gelu_tanh", "silu", "relu"};
    static const kern_act kacts[] = {KERN_ACT_GELU, KERN_ACT_GELU_TANH, KERN_ACT_SILU, KERN_ACT_RELU};
    float xd[7 * 40], wd[33 * 40], y0[7 * 33], y1[7 * 33];
    kt_rng r = kt_rng_make(7);
    int a, i;
    kt_fill_normal(&r, xd, KERN_F32, 7 * 40, 2.0);
    kt_fill_normal(&r, wd, KERN_F32, 33 * 40, 0.5);
    for (a = 0; a < 4; a++) {
        char text[256];
        kern_graph *g = NULL;
        kern_tensor x, w, y;
        int64_t xs[2] = {7, 40}, ws[2] = {33, 40}, ys[2] = {7, 33};
        snprintf(text, sizeof text, "kern-graph 1\ninput x f32 [7,40]\nweight w f32 [33,40]\n"
                 "h = linear(x, w)\ny = %s(h)\noutput y\n", acts[a]);
        KT_OK(kern_graph_read_ir(NULL, text, strlen(text), &g));
        KT_OK(kern_tensor_init(&x, xd, KERN_F32, 2, xs));
        KT_OK(kern_tensor_init(&w, wd, KERN_F32, 2, ws));
        KT_OK(kern_graph_bind_weight(g, "w", &w, KERN_GRAPH_BORROW));
        KT_FOR_EACH_ISA(isa, ctx, 1) {
            kern_graph_plan *p0 = NULL, *p1 = NULL;
            kern_graph_plan_params pp;
            memset(&pp, 0, sizeof pp);
            KT_OK(kern_graph_plan_create(g, ctx, &pp, &p0));
            pp.disable = KERN_GRAPH_PASS_EPILOGUE;
            KT_OK(kern_graph_plan_create(g, ctx, &pp, &p1));
            KT_OK(kern_tensor_init(&y, y0, KERN_F32, 2, ys));
            KT_OK(kern_graph_run(p0, &x, 1, &y, 1));
            KT_OK(kern_tensor_init(&y, y1, KERN_F32, 2, ys));
            KT_OK(kern_graph_run(p1, &x, 1, &y, 1));
            KT_CHECK(memcmp(y0, y1, sizeof y0) == 0, "%s: the unfused node differs from the fused epilogue",
                     acts[a]);
            kern_graph_plan_free(p0);
            kern_graph_plan_free(p1);
        }
        { /* kern_act_f32 on the linear's own output */
            kern_graph_plan *p = NULL;
            kern_graph_plan_params pp;
            float h[7 * 33];
            const char *t2 = "kern-graph 1\ninput x f32 [7,40]\nweight w f32 [33,40]\nh = linear(x, w)\noutput h\n";
            kern_graph *g2 = NULL;
            memset(&pp, 0, sizeof pp);
            KT_OK(kern_graph_read_ir(NULL, t2, strlen(t2), &g2));
            KT_OK(kern_graph_bind_weight(g2, "w", &w, KERN_GRAPH_BORROW));
            KT_OK(kern_graph_plan_create(g2, NULL, &pp, &p));
            KT_OK(kern_tensor_init(&y, h, KERN_F32, 2, ys));
            KT_OK(kern_graph_run(p, &x, 1, &y, 1));
            for (i = 0; i < 7 * 33; i++) h[i] = kern_act_f32(kacts[a], h[i]);
            KT_CHECK(memcmp(h, y0, sizeof h) == 0, "%s: kern_act_f32 differs from the fused epilogue",
                     acts[a]);
            kern_graph_plan_free(p);
            kern_graph_destroy(g2);
        }
        kern_graph_destroy(g);
    }
    KT_CHECK(kern_act_f32(KERN_ACT_NONE, 1.5f) == 1.5f && kern_act_f32((kern_act)99, -2.0f) == -2.0f);
}

KT_TEST(graph_bert_f32_matches_direct_calls) {
    kern_graph *g = tg_bert_build(&TG_BERT, 11), *g2 = NULL;
    kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    kt_rng r = kt_rng_make(5);
    int trial;
    KT_REQUIRE(g != NULL);
    tg_roundtrip(g);
    /* plan the graph read back from its own IR, with the weights bound
     * through a safetensors file */
    {
        char *ir = tg_ir(g);
        char path[96];
        kern_safetensors *st = NULL;
        snprintf(path, sizeof path, "/tmp/kern_tg_bert_%d.safetensors", (int)getpid());
        KT_OK(kern_graph_save_weights(g, path));
        KT_OK(kern_graph_read_ir(ctx, ir, strlen(ir), &g2));
        KT_OK(kern_safetensors_open(ctx, path, NULL, &st));
        KT_OK(kern_graph_bind_safetensors(g2, st, KERN_GRAPH_COPY));
        kern_safetensors_free(ctx, st);
        remove(path);
        free(ir);
    }
    KT_REQUIRE(g2 != NULL);
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=3,L=40";
    KT_OK(kern_graph_plan_create(g2, ctx, &pp, &p));
    KT_REQUIRE(p != NULL);
    {
        kern_graph_plan_stats s;
        const char *rep = kern_graph_plan_report(p);
        kern_graph_plan_stats_get(p, &s);
        KT_CHECK(strstr(rep, "-> one GEMM") != NULL, "Q/K/V not merged:\n%s", rep);
        KT_CHECK(strstr(rep, "linear 'l0.attn.out' + bias+residual -> 'l0.attn.res'") != NULL, "bias/residual not fused:\n%s", rep);
        KT_CHECK(strstr(rep, "+ gelu") != NULL, "gelu not fused:\n%s", rep);
        KT_CHECK(s.arena_bytes <= s.max_live_bytes, "arena %zu > max-live %zu", s.arena_bytes, s.max_live_bytes);
        KT_CHECK(s.n_nodes < s.n_nodes_graph);
    }
    for (trial = 0; trial < 4; trial++) {
        int64_t B = 1 + trial % 3, L = trial == 0 ? 40 : 1 + kt_randint(&r, 0, 40);
        tg_bert_in in;
        float *want = (float *)malloc((size_t)(B * L * TG_BERT.hidden) * 4);
        double *wd = (double *)malloc((size_t)(B * L * TG_BERT.hidden) * 8);
        kern_tensor out;
        int64_t i;
        tg_bert_inputs(&in, &TG_BERT, B, L, &r);
        tg_bert_direct(ctx, g, &TG_BERT, B, L, in.ids, in.tt, in.mask, want);
        for (i = 0; i < B * L * TG_BERT.hidden; i++) wd[i] = want[i];
        memset(&out, 0, sizeof out);
        kt_context("B=%lld L=%lld", (long long)B, (long long)L);
        KT_OK(kern_graph_run(p, in.t, 3, &out, 1));
        KT_CHECK(out.ndim == 3 && out.shape[0] == B && out.shape[1] == L && out.shape[2] == TG_BERT.hidden);
        {
            double e = tg_relerr((const float *)out.data, wd, B * L * TG_BERT.hidden);
            KT_CHECK(e <= 2e-5, "max error %.3g of the largest magnitude", e);
        }
        tg_bert_inputs_free(&in);
        free(want);
        free(wd);
    }
    kern_graph_plan_free(p);
    kern_graph_destroy(g2);
    kern_graph_destroy(g);
}

/* params.quantize over many linears: each rewrite appends its note ("int8
 * dynamic") to the plan's copy of the name table, which has room for a
 * quarter more and then moves, while the transform pass still logs the
 * node's name (short names: the table moves within the first 20 nodes).
 * Every line of the report names its node (under ASan: no read of the
 * moved table). */
KT_TEST(graph_quantize_many_names) {
    kern_graph *g = NULL;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    kt_rng r = kt_rng_make(17);
    kern_graph_val x, y;
    char name[32];
    int i;
    KT_OK(kern_graph_create(NULL, &g));
    kern_graph_input_s(g, "x", KERN_F32, "[L,16]", &x);
    y = x;
    for (i = 0; i < 60; i++) {
        kern_graph_val w;
        snprintf(name, sizeof name, "w%02d", i);
        w = tg_w2(g, &r, name, 16, 16, 0.2);
        snprintf(name, sizeof name, "l%02d", i);
        y = tg_node(g, KERN_GRAPH_OP_LINEAR, name, y, w, 0, NULL);
    }
    KT_OK(kern_graph_output(g, y));
    memset(&pp, 0, sizeof pp);
    pp.bind = "L=3";
    pp.quantize = "*";
    KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
    for (i = 0; i < 60; i++) {
        char line[64];
        snprintf(line, sizeof line, "quantize: 'l%02d' -> qlinear\n", i);
        KT_CHECK(strstr(kern_graph_plan_report(p), line) != NULL, "no '%s' in\n%s", line,
                 kern_graph_plan_report(p));
    }
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
}

/* params.quantize and params.sparsify on the same linears (int8 + 2:4):
 * qlinear with prune=1, the weight pruned (kern_sparse24_prune) and then
 * quantized. Bit for bit the plan of the same graph over weights pruned
 * beforehand with quantize alone, at every level and through the QKV
 * merge (d, e: one qlinear, pruned per row); K not a multiple of 4 is
 * quantized only, and said; the IR of a qlinear with prune=1 round-trips,
 * and prune=1 on an i8 weight or K % 4 != 0 is refused. */
KT_TEST(graph_quantize_and_sparsify) {
    static const char *ir =
        "kern-graph 1\ninput x f32 [9,40]\ninput z f32 [9,6]\n"
        "weight wa f32 [33,40]\nweight ba f32 [33]\nweight wd f32 [12,40]\nweight we f32 [8,40]\n"
        "weight wc f32 [5,6]\n"
        "a = linear(x, wa, ba) act=gelu\nd = linear(x, wd)\ne = linear(x, we)\nc = linear(z, wc)\n"
        "output a\noutput d\noutput e\noutput c\n";
    static const char *names[4] = {"wa", "wd", "we", "wc"};
    static const int64_t shp[4][2] = {{33, 40}, {12, 40}, {8, 40}, {5, 6}};
    static const int64_t osh[4][2] = {{9, 33}, {9, 12}, {9, 8}, {9, 5}};
    float xd[9 * 40], zd[9 * 6], bd[33], wd[4][33 * 40], wp[4][33 * 40];
    float ya[4][9 * 33], yb[4][9 * 33];
    kt_rng r = kt_rng_make(29);
    kern_graph *g = NULL, *g2 = NULL;
    kern_tensor in[2], t, out[4];
    int64_t xs[2] = {9, 40}, zs[2] = {9, 6};
    int i;
    kt_fill_normal(&r, xd, KERN_F32, 9 * 40, 1.0);
    kt_fill_normal(&r, zd, KERN_F32, 9 * 6, 1.0);
    kt_fill_normal(&r, bd, KERN_F32, 33, 0.1);
    KT_OK(kern_graph_read_ir(NULL, ir, strlen(ir), &g));
    KT_OK(kern_graph_read_ir(NULL, ir, strlen(ir), &g2));
    t = kern_tensor_1d(bd, KERN_F32, 33);
    KT_OK(kern_graph_bind_weight(g, "ba", &t, KERN_GRAPH_BORROW));
    KT_OK(kern_graph_bind_weight(g2, "ba", &t, KERN_GRAPH_BORROW));
    for (i = 0; i < 4; i++) {
        kern_tensor tp;
        kt_fill_normal(&r, wd[i], KERN_F32, shp[i][0] * shp[i][1], 0.3);
        KT_OK(kern_tensor_init(&t, wd[i], KERN_F32, 2, shp[i]));
        KT_OK(kern_tensor_init(&tp, wp[i], KERN_F32, 2, shp[i]));
        KT_OK(kern_graph_bind_weight(g, names[i], &t, KERN_GRAPH_BORROW));
        if (i < 3) KT_OK(kern_sparse24_prune(NULL, &t, &tp, NULL));
        else memcpy(wp[i], wd[i], sizeof(float) * 30);
        KT_OK(kern_graph_bind_weight(g2, names[i], &tp, KERN_GRAPH_BORROW));
    }
    KT_OK(kern_tensor_init(&in[0], xd, KERN_F32, 2, xs));
    KT_OK(kern_tensor_init(&in[1], zd, KERN_F32, 2, zs));
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        kern_graph_plan *p = NULL, *p2 = NULL;
        kern_graph_plan_params pp;
        const char *rep;
        memset(&pp, 0, sizeof pp);
        pp.quantize = "*";
        pp.sparsify = "a,d,e,c";
        KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
        rep = kern_graph_plan_report(p);
        KT_CHECK(strstr(rep, "quantize+sparsify: 'a' -> qlinear (2:4 pruned at plan time)") != NULL, "%s", rep);
        KT_CHECK(strstr(rep, "no sparsify: 'c': K=6 is not a multiple of 4 (quantized only)") != NULL, "%s", rep);
        KT_CHECK(strstr(rep, "quantize: 'c' -> qlinear") != NULL, "%s", rep);
        KT_CHECK(strstr(rep, "2 qlinears reading 'x'") != NULL, "%s", rep);
        pp.sparsify = NULL;
        KT_OK(kern_graph_plan_create(g2, ctx, &pp, &p2));
        for (i = 0; i < 4; i++) {
            KT_OK(kern_tensor_init(&out[i], ya[i], KERN_F32, 2, osh[i]));
        }
        KT_OK(kern_graph_run(p, in, 2, out, 4));
        for (i = 0; i < 4; i++) KT_OK(kern_tensor_init(&out[i], yb[i], KERN_F32, 2, osh[i]));
        KT_OK(kern_graph_run(p2, in, 2, out, 4));
        for (i = 0; i < 4; i++)
            kt_assert_bytes_equal(names[i], ya[i], yb[i], sizeof(float) * (size_t)(osh[i][0] * osh[i][1]));
        kern_graph_plan_free(p);
        kern_graph_plan_free(p2);
    }
    kern_graph_destroy(g);
    kern_graph_destroy(g2);
    { /* the IR of a qlinear with prune=1; what prune=1 refuses */
        static const char *q = "kern-graph 1\ninput x f32 [3,8]\nweight w f32 [4,8]\n"
                               "y = qlinear(x, w) prune=1\noutput y\n";
        static const char *bad_i8 = "kern-graph 1\ninput x f32 [3,8]\nweight w i8 [4,8]\nweight s f32 [4]\n"
                                    "y = qlinear(x, w, s) prune=1\noutput y\n";
        static const char *bad_k = "kern-graph 1\ninput x f32 [3,6]\nweight w f32 [4,6]\n"
                                   "y = qlinear(x, w) prune=1\noutput y\n";
        kern_graph *h = NULL;
        char *back;
        KT_OK(kern_graph_read_ir(NULL, q, strlen(q), &h));
        back = tg_ir(h);
        KT_CHECK(strcmp(back, q) == 0, "IR:\n%s\nback:\n%s", q, back);
        free(back);
        kern_graph_destroy(h);
        h = NULL;
        KT_ERROR(kern_graph_read_ir(NULL, bad_i8, strlen(bad_i8), &h), KERN_ERR_DTYPE, "prune=1 needs an f32 or bf16 weight");
        KT_CHECK(h == NULL);
        KT_ERROR(kern_graph_read_ir(NULL, bad_k, strlen(bad_k), &h), KERN_ERR_SHAPE, "K=6 is not a multiple of 4");
        KT_CHECK(h == NULL);
    }
}

KT_TEST(graph_bert_int8_dynamic_sqnr) {
    kern_graph *g = tg_bert_build(&TG_BERT, 11);
    kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    kt_rng r = kt_rng_make(6);
    tg_bert_in in;
    int64_t B = 2, L = 33, n = B * L * TG_BERT.hidden, i;
    float *want = (float *)malloc((size_t)n * 4);
    double *wd = (double *)malloc((size_t)n * 8);
    kern_tensor out;
    KT_REQUIRE(g != NULL);
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=2,L=40";
    pp.quantize = "*";
    KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
    KT_REQUIRE(p != NULL);
    KT_CHECK(strstr(kern_graph_plan_report(p), "quantize: 'l1.inter' -> qlinear") != NULL, "%s",
             kern_graph_plan_report(p));
    tg_bert_inputs(&in, &TG_BERT, B, L, &r);
    tg_bert_direct(ctx, g, &TG_BERT, B, L, in.ids, in.tt, in.mask, want);
    for (i = 0; i < n; i++) wd[i] = want[i];
    memset(&out, 0, sizeof out);
    KT_OK(kern_graph_run(p, in.t, 3, &out, 1));
    {
        double sq = tg_sqnr((const float *)out.data, wd, n);
        KT_CHECK(sq >= 30.0, "int8-dynamic SQNR %.1f dB < 30 dB", sq);
        if (getenv("KT_VERBOSE")) printf("  int8 dynamic BERT SQNR %.1f dB\n", sq);
    }
    tg_bert_inputs_free(&in);
    free(want);
    free(wd);
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
}

/* ------------------------------------------------------------ GraphSAGE */

/* Two SAGEConv layers (mean aggregation): h' = lin_l(mean_j h_j) + lin_r(h)
 * (PyG's SAGEConv: lin_l with bias, lin_r without), ReLU between. With
 * scatter = 1 the aggregation is embedding (gather of source rows) +
 * scatter_reduce(mean) instead of spmm_reduce. */
static kern_graph *tg_sage_build(int scatter, int64_t f0, int64_t f1, int64_t f2, uint64_t seed) {
    kern_graph *g;
    kt_rng r = kt_rng_make(seed);
    kern_graph_val x, rp, col, dst, h;
    int l;
    int64_t fi[2], fo[2];
    fi[0] = f0; fo[0] = f1; fi[1] = f1; fo[1] = f2;
    if (kern_graph_create(NULL, &g)) return NULL;
    kern_graph_input_s(g, "x", KERN_F32, "[N,16]", &x);
    (void)f0;
    if (!scatter) {
        kern_graph_input_s(g, "rowptr", KERN_I64, "[N+1]", &rp);
        kern_graph_input_s(g, "col", KERN_I64, "[E]", &col);
    } else {
        kern_graph_input_s(g, "src", KERN_I64, "[E]", &col);
        kern_graph_input_s(g, "dst", KERN_I64, "[E]", &dst);
    }
    h = x;
    for (l = 0; l < 2; l++) {
        char nm[64];
        kern_graph_val agg, a1, a2, wl, bl, wr;
        kern_graph_attrs a = tg_attrs();
        a.reduce = KERN_REDUCE_MEAN;
        snprintf(nm, sizeof nm, "conv%d.agg", l);
        if (!scatter) {
            kern_graph_node_desc d;
            memset(&d, 0, sizeof d);
            d.op = KERN_GRAPH_OP_SPMM_REDUCE;
            d.name = nm;
            d.inputs[0] = rp;
            d.inputs[1] = col;
            d.inputs[3] = h;
            d.attrs = a;
            KT_OK(kern_graph_add(g, &d, &agg));
        } else {
            kern_graph_val src, zero;
            kern_graph_attrs z = tg_attrs();
            char nm2[64];
            snprintf(nm2, sizeof nm2, "conv%d.gather", l);
            src = tg_node(g, KERN_GRAPH_OP_EMBEDDING, nm2, col, h, 0, NULL);
            z.alpha_set = 1;
            z.alpha = 0;
            snprintf(nm2, sizeof nm2, "conv%d.zeros", l);
            zero = tg_node(g, KERN_GRAPH_OP_SCALE, nm2, h, 0, 0, &z);
            a.include_self = 0;
            agg = tg_node(g, KERN_GRAPH_OP_SCATTER_REDUCE, nm, zero, dst, src, &a);
        }
        snprintf(nm, sizeof nm, "conv%d.lin_l.weight", l);
        wl = tg_w2(g, &r, nm, fo[l], fi[l], 0.3);
        snprintf(nm, sizeof nm, "conv%d.lin_l.bias", l);
        bl = tg_w1(g, &r, nm, fo[l], 0.1, 0);
        snprintf(nm, sizeof nm, "conv%d.lin_r.weight", l);
        wr = tg_w2(g, &r, nm, fo[l], fi[l], 0.3);
        snprintf(nm, sizeof nm, "conv%d.l", l);
        KT_OK(kern_graph_linear(g, nm, agg, wl, bl, KERN_ACT_NONE, &a1));
        snprintf(nm, sizeof nm, "conv%d.r", l);
        KT_OK(kern_graph_linear(g, nm, h, wr, 0, KERN_ACT_NONE, &a2));
        snprintf(nm, sizeof nm, "conv%d.out", l);
        h = tg_node(g, KERN_GRAPH_OP_ADD, nm, a1, a2, 0, NULL);
        if (l == 0) h = tg_node(g, KERN_GRAPH_OP_RELU, "conv0.relu", h, 0, 0, NULL);
    }
    KT_OK(kern_graph_output(g, h));
    return g;
}

KT_TEST(graph_graphsage_spmm_and_scatter) {
    int scatter;
    kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
    int64_t N = 300, E = 2000, e, i, j, l;
    kt_rng r = kt_rng_make(9);
    int64_t *src = (int64_t *)malloc((size_t)E * 8), *dst = (int64_t *)malloc((size_t)E * 8);
    int64_t *rowptr = (int64_t *)malloc((size_t)(N + 1) * 8), *col = (int64_t *)malloc((size_t)E * 8);
    float *x = (float *)malloc((size_t)(N * 16) * 4);
    for (e = 0; e < E; e++) { /* power-law-ish destinations */
        double u = kt_uniform(&r, 0, 1);
        dst[e] = (int64_t)((double)N * u * u);
        src[e] = kt_randint(&r, 0, N);
    }
    { /* CSR by destination, stable */
        int64_t *cnt = (int64_t *)calloc((size_t)N + 1, 8);
        for (e = 0; e < E; e++) cnt[dst[e] + 1]++;
        for (i = 0; i < N; i++) cnt[i + 1] += cnt[i];
        memcpy(rowptr, cnt, (size_t)(N + 1) * 8);
        for (e = 0; e < E; e++) col[cnt[dst[e]]++] = src[e];
        free(cnt);
    }
    kt_fill_normal(&r, x, KERN_F32, N * 16, 1.0);
    for (scatter = 0; scatter < 2; scatter++) {
        kern_graph *g = tg_sage_build(scatter, 16, 32, 8, 21);
        kern_graph_plan *p = NULL;
        kern_graph_plan_params pp;
        kern_tensor in[3], out;
        double *h = (double *)malloc((size_t)(N * 32) * 8), *h2 = (double *)malloc((size_t)(N * 32) * 8);
        int64_t fi = 16, fo;
        KT_REQUIRE(g != NULL);
        tg_roundtrip(g);
        memset(&pp, 0, sizeof pp);
        pp.bind = "N=512,E=4096";
        KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
        KT_REQUIRE(p != NULL);
        in[0] = kern_tensor_2d(x, KERN_F32, N, 16);
        if (!scatter) {
            in[1] = kern_tensor_1d(rowptr, KERN_I64, N + 1);
            in[2] = kern_tensor_1d(col, KERN_I64, E);
        } else {
            in[1] = kern_tensor_1d(src, KERN_I64, E);
            in[2] = kern_tensor_1d(dst, KERN_I64, E);
        }
        memset(&out, 0, sizeof out);
        kt_context("scatter=%d", scatter);
        KT_OK(kern_graph_run(p, in, 3, &out, 1));
        /* reference in double */
        for (i = 0; i < N * 16; i++) h[i] = x[i];
        for (l = 0; l < 2; l++) {
            char nm[64];
            const float *wl, *bl, *wr;
            double *agg = (double *)calloc((size_t)(N * fi), 8);
            fo = l == 0 ? 32 : 8;
            snprintf(nm, sizeof nm, "conv%d.lin_l.weight", (int)l);
            wl = tg_wdata(g, nm);
            snprintf(nm, sizeof nm, "conv%d.lin_l.bias", (int)l);
            bl = tg_wdata(g, nm);
            snprintf(nm, sizeof nm, "conv%d.lin_r.weight", (int)l);
            wr = tg_wdata(g, nm);
            for (i = 0; i < N; i++) {
                int64_t deg = rowptr[i + 1] - rowptr[i];
                for (e = rowptr[i]; e < rowptr[i + 1]; e++)
                    for (j = 0; j < fi; j++) agg[i * fi + j] += h[col[e] * fi + j];
                for (j = 0; j < fi && deg; j++) agg[i * fi + j] /= (double)deg;
            }
            for (i = 0; i < N; i++)
                for (j = 0; j < fo; j++) {
                    double acc = bl[j];
                    int64_t k;
                    for (k = 0; k < fi; k++)
                        acc += agg[i * fi + k] * wl[j * fi + k] + h[i * fi + k] * wr[j * fi + k];
                    h2[i * fo + j] = l == 0 && acc < 0 ? 0 : acc;
                }
            memcpy(h, h2, (size_t)(N * fo) * 8);
            fi = fo;
            free(agg);
        }
        KT_CHECK(out.shape[0] == N && out.shape[1] == 8);
        {
            double err = tg_relerr((const float *)out.data, h, N * 8);
            KT_CHECK(err <= 1e-5, "max error %.3g", err);
        }
        kern_graph_plan_free(p);
        kern_graph_destroy(g);
        free(h);
        free(h2);
    }
    free(src); free(dst); free(rowptr); free(col); free(x);
}

/* ------------------------------------------------------ fusion corpus */

/* Small builder for decomposed graphs: auto-named nodes. */
typedef struct tg_b {
    kern_graph *g;
    kt_rng r;
    int n;
    int64_t B, L;
} tg_b;

static kern_graph_val tb_op(tg_b *b, kern_graph_op op, kern_graph_val x, kern_graph_val y,
                            const kern_graph_attrs *a) {
    char nm[32];
    snprintf(nm, sizeof nm, "n%d", b->n++);
    return tg_node(b->g, op, nm, x, y, 0, a);
}
static kern_graph_val tb_c(tg_b *b, double v) {
    char nm[32];
    kern_graph_val c = 0;
    snprintf(nm, sizeof nm, "c%d", b->n++);
    KT_OK(kern_graph_scalar(b->g, nm, KERN_F32, v, &c));
    return c;
}
static kern_graph_val tb_pow(tg_b *b, kern_graph_val x, float e) {
    kern_graph_attrs a = tg_attrs();
    a.exponent = e;
    return tb_op(b, KERN_GRAPH_OP_POW, x, 0, &a);
}
static kern_graph_val tb_scale(tg_b *b, kern_graph_val x, float s) {
    kern_graph_attrs a = tg_attrs();
    a.alpha_set = 1;
    a.alpha = s;
    return tb_op(b, KERN_GRAPH_OP_SCALE, x, 0, &a);
}
static kern_graph_val tb_w1(tg_b *b, int64_t n, double off) {
    char nm[32];
    snprintf(nm, sizeof nm, "w%d", b->n++);
    return tg_w1(b->g, &b->r, nm, n, 0.2, off);
}
static kern_graph_val tb_w2(tg_b *b, int64_t n, int64_t k) {
    char nm[32];
    snprintf(nm, sizeof nm, "w%d", b->n++);
    return tg_w2(b->g, &b->r, nm, n, k, 0.2);
}
#define TB_ADD(x, y) tb_op(b, KERN_GRAPH_OP_ADD, x, y, NULL)
#define TB_SUB(x, y) tb_op(b, KERN_GRAPH_OP_SUB, x, y, NULL)
#define TB_MUL(x, y) tb_op(b, KERN_GRAPH_OP_MUL, x, y, NULL)
#define TB_DIV(x, y) tb_op(b, KERN_GRAPH_OP_DIV, x, y, NULL)
#define TB_U(op, x) tb_op(b, KERN_GRAPH_OP_##op, x, 0, NULL)

/* LayerNorm decompositions over the last dim of x [.., 32] */
static kern_graph_val tb_ln(tg_b *b, kern_graph_val x, int form) {
    kern_graph_val m = TB_U(REDUCE_MEAN, x), d, v, ve, n, w = 0, bb = 0;
    if (form == 3) { /* E[x^2] - E[x]^2 */
        kern_graph_val m2 = TB_U(REDUCE_MEAN, TB_MUL(x, x));
        v = TB_SUB(m2, TB_MUL(m, m));
        d = TB_SUB(x, m);
    } else {
        d = TB_SUB(x, m);
        v = TB_U(REDUCE_MEAN, form == 2 ? TB_MUL(d, d) : tb_pow(b, d, 2));
    }
    ve = form == 5 ? TB_ADD(tb_c(b, 1e-5), v) : TB_ADD(v, tb_c(b, 1e-5));
    switch (form) {
    case 0: case 4: n = TB_DIV(d, TB_U(SQRT, ve)); break;                      /* ONNX export */
    case 1: case 3: n = TB_MUL(d, TB_U(RSQRT, ve)); break;                      /* rsqrt */
    case 2: n = TB_MUL(TB_U(RECIPROCAL, TB_U(SQRT, ve)), d); break;
    default: n = TB_MUL(d, TB_DIV(tb_c(b, 1.0), TB_U(SQRT, ve))); break;
    }
    if (form != 2) w = tb_w1(b, 32, 1.0);
    if (form != 2 && form != 4) bb = tb_w1(b, 32, 0.0);
    if (w) n = form == 1 ? TB_MUL(w, n) : TB_MUL(n, w);
    if (bb) n = form == 1 ? TB_ADD(bb, n) : TB_ADD(n, bb);
    return n;
}
static kern_graph_val tb_rms(tg_b *b, kern_graph_val x, int form) {
    kern_graph_val ms = TB_U(REDUCE_MEAN, form == 1 ? TB_MUL(x, x) : tb_pow(b, x, 2));
    kern_graph_val ve = TB_ADD(ms, tb_c(b, 1e-6)), n;
    if (form == 1) n = TB_DIV(x, TB_U(SQRT, ve));
    else n = TB_MUL(x, TB_U(RSQRT, ve));
    if (form != 2) n = TB_MUL(tb_w1(b, 32, 1.0), n); /* HF Llama: weight * hidden */
    return n;
}
static kern_graph_val tb_gelu(tg_b *b, kern_graph_val x, int form) {
    switch (form) {
    case 0: /* 0.5 * x * (1 + erf(x / sqrt(2))) */
        return TB_MUL(TB_MUL(tb_c(b, 0.5), x),
                      TB_ADD(tb_c(b, 1.0), TB_U(ERF, TB_DIV(x, tb_c(b, 1.4142135623730951)))));
    case 1: /* x * 0.5 * (1.0 + erf(x * 0.7071067811865476)) */
        return TB_MUL(TB_MUL(x, tb_c(b, 0.5)),
                      TB_ADD(TB_U(ERF, TB_MUL(x, tb_c(b, 0.7071067811865476))), tb_c(b, 1.0)));
    case 2: /* x * (0.5 * (1 + erf(scale(x)))) */
        return TB_MUL(x, TB_MUL(tb_c(b, 0.5), TB_ADD(TB_U(ERF, tb_scale(b, x, 0.70710678f)), tb_c(b, 1.0))));
    case 3: /* GPT-2: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) */
        return TB_MUL(TB_MUL(tb_c(b, 0.5), x),
                      TB_ADD(tb_c(b, 1.0),
                             TB_U(TANH, TB_MUL(tb_c(b, 0.7978845608028654),
                                               TB_ADD(x, TB_MUL(tb_c(b, 0.044715), tb_pow(b, x, 3)))))));
    default: /* x*x*x, constants on the other side */
        return TB_MUL(x, TB_MUL(TB_ADD(TB_U(TANH, TB_MUL(TB_ADD(TB_MUL(TB_MUL(x, TB_MUL(x, x)), tb_c(b, 0.044715)), x),
                                                          tb_c(b, 0.7978845608028654))),
                                       tb_c(b, 1.0)),
                                tb_c(b, 0.5)));
    }
}

/* Decomposed attention: q, k, v [B, H, L, D]. kt: 1 = k transposed by a
 * node, 0 = matmul trans_b; scale: 0 none (q pre-scaled), 1 div by
 * sqrt(D), 2 mul by 1/sqrt(D), 3 scale node; mask may be 0. */
static kern_graph_val tb_attn(tg_b *b, kern_graph_val q, kern_graph_val k, kern_graph_val v,
                              kern_graph_val mask, int kt, int scale, int64_t D) {
    kern_graph_attrs a = tg_attrs();
    kern_graph_val s;
    if (kt) {
        a.axis = -1;
        a.axis2 = -2;
        k = tb_op(b, KERN_GRAPH_OP_TRANSPOSE, k, 0, &a);
        a = tg_attrs();
    } else {
        a.trans_b = 1;
    }
    s = tb_op(b, KERN_GRAPH_OP_MATMUL, q, k, &a);
    if (scale == 1) s = TB_DIV(s, tb_c(b, sqrt((double)D)));
    if (scale == 2) s = TB_MUL(s, tb_c(b, 1.0 / sqrt((double)D)));
    if (scale == 3) s = tb_scale(b, s, (float)(1.0 / sqrt((double)D)));
    if (mask) s = TB_ADD(s, mask);
    s = TB_U(SOFTMAX, s);
    return tb_op(b, KERN_GRAPH_OP_MATMUL, s, v, NULL);
}

/* [B,L,Hh*D] -> [B,Hh,L,D] */
static kern_graph_val tb_heads(tg_b *b, kern_graph_val x, int64_t hh, int64_t d) {
    int64_t sh[4];
    char nm[32];
    sh[0] = b->B; sh[1] = b->L; sh[2] = hh; sh[3] = d;
    snprintf(nm, sizeof nm, "n%d", b->n++);
    x = tg_reshape(b->g, nm, x, 4, sh);
    snprintf(nm, sizeof nm, "n%d", b->n++);
    return tg_permute(b->g, nm, x, 0, 2, 1, 3);
}
static kern_graph_val tb_merge(tg_b *b, kern_graph_val x, int64_t hd) {
    int64_t sh[3];
    char nm[32];
    snprintf(nm, sizeof nm, "n%d", b->n++);
    x = tg_permute(b->g, nm, x, 0, 2, 1, 3);
    sh[0] = b->B; sh[1] = b->L; sh[2] = hd;
    snprintf(nm, sizeof nm, "n%d", b->n++);
    return tg_reshape(b->g, nm, x, 3, sh);
}
/* HF repeat_kv: [B,Hkv,L,D] -> [B,Hkv*G,L,D] */
static kern_graph_val tb_repeat_kv(tg_b *b, kern_graph_val k, int64_t hkv, int64_t g, int64_t d) {
    int64_t sh[5];
    kern_graph_attrs a = tg_attrs();
    sh[0] = b->B; sh[1] = hkv; sh[2] = 1; sh[3] = b->L; sh[4] = d;
    a.n_shape = 5;
    memcpy(a.shape, sh, sizeof sh);
    k = tb_op(b, KERN_GRAPH_OP_RESHAPE, k, 0, &a);
    a.shape[2] = g;
    k = tb_op(b, KERN_GRAPH_OP_EXPAND, k, 0, &a);
    a = tg_attrs();
    a.n_shape = 4;
    a.shape[0] = b->B; a.shape[1] = hkv * g; a.shape[2] = b->L; a.shape[3] = d;
    return tb_op(b, KERN_GRAPH_OP_RESHAPE, k, 0, &a);
}
static kern_graph_val tb_lin(tg_b *b, kern_graph_val x, int64_t n, int64_t k, int bias) {
    char nm[32];
    kern_graph_val y = 0, w = tb_w2(b, n, k), bb = bias ? tb_w1(b, n, 0.0) : 0;
    snprintf(nm, sizeof nm, "n%d", b->n++);
    KT_OK(kern_graph_linear(b->g, nm, x, w, bb, KERN_ACT_NONE, &y));
    return y;
}

/* A decomposed attention block; pre: pre-LN (else post-LN), gqa: 8 query
 * heads over 2 kv heads, rms: RMSNorm instead of LayerNorm. */
static kern_graph_val tb_block(tg_b *b, kern_graph_val x, kern_graph_val mask, int pre, int gqa,
                               int rms, int kt, int scale) {
    int64_t hq = gqa ? 8 : 4, hkv = gqa ? 2 : 4, d = 32 / hq;
    kern_graph_val h = pre ? (rms ? tb_rms(b, x, 0) : tb_ln(b, x, 1)) : x, q, k, v, o;
    q = tb_heads(b, tb_lin(b, h, hq * d, 32, !gqa), hq, d);
    k = tb_heads(b, tb_lin(b, h, hkv * d, 32, !gqa), hkv, d);
    v = tb_heads(b, tb_lin(b, h, hkv * d, 32, !gqa), hkv, d);
    if (gqa) {
        k = tb_repeat_kv(b, k, hkv, hq / hkv, d);
        v = tb_repeat_kv(b, v, hkv, hq / hkv, d);
    }
    o = tb_merge(b, tb_attn(b, q, k, v, mask, kt, scale, d), hq * d);
    o = tb_lin(b, o, 32, hq * d, 1);
    o = TB_ADD(x, o);
    if (!pre) o = tb_ln(b, o, 0);
    return o;
}

typedef struct tg_variant {
    const char *name;
    int kind; /* what the variant builds */
    int form;
    const char *want;   /* ops that must remain, comma separated */
    const char *gone;   /* ops that must be gone */
    const char *must;   /* text the pass report must hold (or NULL) */
} tg_variant;

enum { TV_LN, TV_RMS, TV_GELU, TV_EPI_LIN, TV_EPI_MATMUL, TV_EPI_SILU, TV_LIN_GELU, TV_BLOCK,
       TV_RES_NORM, TV_NORM_GELU };

static const tg_variant tg_corpus[] = {
    {"layer_norm div sqrt (ONNX export)", TV_LN, 0, "layer_norm", "reduce_mean,sqrt,div,pow", NULL},
    {"layer_norm rsqrt, commuted affine", TV_LN, 1, "layer_norm", "reduce_mean,rsqrt,sub", NULL},
    {"layer_norm d*d, reciprocal(sqrt), no affine", TV_LN, 2, "layer_norm", "reduce_mean,reciprocal,sqrt", NULL},
    {"layer_norm E[x^2]-E[x]^2", TV_LN, 3, "layer_norm", "reduce_mean,rsqrt,sub,mul", NULL},
    {"layer_norm weight only", TV_LN, 4, "layer_norm", "reduce_mean,sqrt,div", NULL},
    {"layer_norm eps first, 1/sqrt", TV_LN, 5, "layer_norm", "reduce_mean,sqrt,div", NULL},
    {"rms_norm rsqrt (Llama)", TV_RMS, 0, "rms_norm", "reduce_mean,rsqrt,pow,mul", NULL},
    {"rms_norm x/sqrt(mean(x*x)+eps)", TV_RMS, 1, "rms_norm", "reduce_mean,sqrt,div", NULL},
    {"rms_norm no weight", TV_RMS, 2, "rms_norm", "reduce_mean,rsqrt", NULL},
    {"gelu erf 0.5*x*(1+erf(x/sqrt2))", TV_GELU, 0, "gelu", "erf,mul,add,div", NULL},
    {"gelu erf x*0.5*(1+erf(x*c))", TV_GELU, 1, "gelu", "erf,mul,add", NULL},
    {"gelu erf x*(0.5*(1+erf(scale(x))))", TV_GELU, 2, "gelu", "erf,mul,scale", NULL},
    {"gelu tanh GPT-2 pow(x,3)", TV_GELU, 3, "gelu_tanh", "tanh,pow,mul,add", NULL},
    {"gelu tanh x*x*x, constants commuted", TV_GELU, 4, "gelu_tanh", "tanh,mul,add", NULL},
    {"linear + bias + gelu + residual + scale", TV_EPI_LIN, 0, "linear", "add,gelu,mul", NULL},
    {"matmul + alpha + bias + relu", TV_EPI_MATMUL, 0, "matmul", "add,relu,mul", NULL},
    {"linear + silu + residual", TV_EPI_SILU, 0, "linear", "silu,add", NULL},
    {"linear + decomposed gelu", TV_LIN_GELU, 0, "linear", "erf,mul,add,gelu", NULL},
    {"post-LN attention, mask, k transposed, div sqrt(D)", TV_BLOCK, 0, "sdpa,layer_norm", "softmax,matmul,transpose,reduce_mean", NULL},
    {"post-LN attention, mask, trans_b, scale node", TV_BLOCK, 1, "sdpa,layer_norm", "softmax,matmul,reduce_mean", NULL},
    {"pre-LN attention, mask, mul 1/sqrt(D)", TV_BLOCK, 2, "sdpa,layer_norm", "softmax,matmul,reduce_mean", NULL},
    {"pre-LN attention, no mask, q pre-scaled", TV_BLOCK, 3, "sdpa,layer_norm", "softmax,matmul", NULL},
    {"pre-RMSNorm GQA attention (repeat_kv), mask", TV_BLOCK, 4, "sdpa,rms_norm", "softmax,matmul,expand,reduce_mean", NULL},
    {"post-LN GQA attention, trans_b", TV_BLOCK, 5, "sdpa,layer_norm", "softmax,matmul,expand", NULL},
    {"residual add + layer_norm, sum kept", TV_RES_NORM, 0, "layer_norm", "reduce_mean,rsqrt,sub",
     "the sum is its second output"},
    {"layer_norm + gelu", TV_NORM_GELU, 0, "layer_norm", "gelu", "+ gelu"},
};

static int tg_has_op(const kern_graph_plan *p, const char *op) { return kern__graph_plan_has_op(p, op); }

static kern_graph *tg_variant_build(const tg_variant *v, uint64_t seed) {
    tg_b bb, *b = &bb;
    kern_graph_val x, y = 0, mask = 0;
    memset(b, 0, sizeof *b);
    b->r = kt_rng_make(seed);
    if (kern_graph_create(NULL, &b->g)) return NULL;
    kern_graph_input_s(b->g, "x", KERN_F32, "[B,L,32]", &x);
    kern_graph_dim(b->g, "B", &b->B);
    kern_graph_dim(b->g, "L", &b->L);
    switch (v->kind) {
    case TV_LN: y = tb_ln(b, x, v->form); break;
    case TV_RMS: y = tb_rms(b, x, v->form); break;
    case TV_GELU: y = tb_gelu(b, x, v->form); break;
    case TV_EPI_LIN: {
        kern_graph_val l = tb_lin(b, x, 32, 32, 0);
        l = TB_ADD(l, tb_w1(b, 32, 0));
        l = TB_U(GELU, l);
        l = TB_ADD(x, l);
        y = TB_MUL(l, tb_c(b, 0.5));
        break;
    }
    case TV_EPI_MATMUL: {
        kern_graph_val m = tb_op(b, KERN_GRAPH_OP_MATMUL, x, tb_w2(b, 32, 32), NULL);
        m = TB_MUL(tb_c(b, 0.25), m);
        m = TB_ADD(m, tb_w1(b, 32, 0));
        y = TB_U(RELU, m);
        break;
    }
    case TV_EPI_SILU: y = TB_ADD(TB_U(SILU, tb_lin(b, x, 32, 32, 1)), x); break;
    case TV_LIN_GELU: y = tb_gelu(b, tb_lin(b, x, 32, 32, 1), 1); break;
    case TV_BLOCK: {
        static const int pre[6] = {0, 0, 1, 1, 1, 0}, gqa[6] = {0, 0, 0, 0, 1, 1},
                         rms[6] = {0, 0, 0, 0, 1, 0}, kt[6] = {1, 0, 1, 1, 1, 0},
                         sc[6] = {1, 3, 2, 0, 1, 2}, mk[6] = {1, 1, 1, 0, 1, 0};
        int f = v->form;
        if (mk[f]) kern_graph_input_s(b->g, "mask", KERN_F32, "[B,1,L,L]", &mask);
        y = tb_block(b, x, mask, pre[f], gqa[f], rms[f], kt[f], sc[f]);
        break;
    }
    case TV_RES_NORM: {
        kern_graph_val s = TB_ADD(x, TB_U(TANH, x));
        y = TB_ADD(tb_ln(b, s, 1), s);
        break;
    }
    default: y = TB_U(GELU, tb_ln(b, x, 1)); break;
    }
    KT_OK(kern_graph_output(b->g, y));
    return b->g;
}

KT_TEST(graph_fusion_corpus) {
    size_t i;
    int matched = 0;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    kt_rng r = kt_rng_make(4);
    KT_CHECK(sizeof tg_corpus / sizeof tg_corpus[0] >= 20);
    for (i = 0; i < sizeof tg_corpus / sizeof tg_corpus[0]; i++) {
        const tg_variant *v = &tg_corpus[i];
        kern_graph *g = tg_variant_build(v, 100 + i);
        kern_graph_plan *pf = NULL, *pu = NULL;
        kern_graph_plan_params pp;
        int64_t B = 2, L = 7, n = B * L * 32, j;
        float *x = (float *)malloc((size_t)n * 4), *mask = (float *)malloc((size_t)(B * L * L) * 4);
        kern_tensor in[2], of, ou;
        const char *rep;
        char ops[128];
        int ok = 1;
        kt_context("variant '%s'", v->name);
        KT_REQUIRE(g != NULL);
        tg_roundtrip(g);
        memset(&pp, 0, sizeof pp);
        pp.bind = "B=2,L=8";
        KT_OK(kern_graph_plan_create(g, ctx, &pp, &pf));
        pp.disable = KERN_GRAPH_PASS_ALL;
        KT_OK(kern_graph_plan_create(g, ctx, &pp, &pu));
        if (!pf || !pu) { kern_graph_plan_free(pf); kern_graph_plan_free(pu); kern_graph_destroy(g); continue; }
        rep = kern_graph_plan_report(pf);
        if (v->must && !strstr(rep, v->must)) {
            KT_CHECK(0, "report lacks \"%s\":\n%s", v->must, rep);
            ok = 0;
        }
        if (strstr(rep, "no match")) {
            KT_CHECK(0, "non-match reported:\n%s", rep);
            ok = 0;
        }
        snprintf(ops, sizeof ops, "%s", v->want);
        {
            char *tok = strtok(ops, ",");
            for (; tok; tok = strtok(NULL, ","))
                if (!tg_has_op(pf, tok)) { KT_CHECK(0, "op %s missing after fusion:\n%s", tok, rep); ok = 0; }
        }
        snprintf(ops, sizeof ops, "%s", v->gone);
        {
            char *tok = strtok(ops, ",");
            for (; tok; tok = strtok(NULL, ","))
                if (tg_has_op(pf, tok)) { KT_CHECK(0, "op %s left after fusion:\n%s", tok, rep); ok = 0; }
        }
        kt_fill_normal(&r, x, KERN_F32, n, 1.0);
        for (j = 0; j < B * L * L; j++) mask[j] = ((j % L) > (j / L) % L) ? -1e4f : 0.0f;
        in[0] = kern_tensor_3d_tg(x, B, L, 32);
        in[1] = kern_tensor_4d(mask, KERN_F32, B, 1, L, L);
        memset(&of, 0, sizeof of);
        memset(&ou, 0, sizeof ou);
        KT_OK(kern_graph_run(pf, in, kern_graph_n_inputs(g), &of, 1));
        KT_OK(kern_graph_run(pu, in, kern_graph_n_inputs(g), &ou, 1));
        {
            double *wd = (double *)malloc((size_t)n * 8), e;
            for (j = 0; j < n; j++) wd[j] = ((const float *)ou.data)[j];
            e = tg_relerr((const float *)of.data, wd, n);
            KT_CHECK(e <= 1e-4, "fused vs unfused: max error %.3g", e);
            if (e > 1e-4) ok = 0;
            free(wd);
        }
        matched += ok;
        if (!ok) printf("  variant not matched: %s\n", v->name);
        kern_graph_plan_free(pf);
        kern_graph_plan_free(pu);
        kern_graph_destroy(g);
        free(x);
        free(mask);
        kt_context("");
    }
    if (getenv("KT_VERBOSE"))
        printf("  fusion corpus: %d of %d variants matched\n", matched,
               (int)(sizeof tg_corpus / sizeof tg_corpus[0]));
}

/* Near misses: each is reported with the node and the check that failed,
 * and the graph still runs unfused. */
KT_TEST(graph_fusion_non_matches_reported) {
    static const struct { int what; const char *needle; } cases[] = {
        {0, "no match: layer_norm at 'n0': eps is not a constant"},
        {1, "no match: gelu at 'n"},
        {2, "no match: gelu_tanh at 'n"},
        {3, "no match: attention at softmax 'n"},
        {4, "no match: rms_norm at 'n"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_b bb, *b = &bb;
        kern_graph_val x, y = 0;
        kern_graph_plan *p = NULL;
        kern_graph_plan_params pp;
        memset(b, 0, sizeof *b);
        b->r = kt_rng_make(7);
        KT_OK(kern_graph_create(NULL, &b->g));
        kern_graph_input_s(b->g, "x", KERN_F32, "[B,32]", &x);
        switch (cases[i].what) {
        case 0: { /* LayerNorm whose eps is an input */
            kern_graph_val m = TB_U(REDUCE_MEAN, x), d = TB_SUB(x, m), epsx;
            kern_graph_val v = TB_U(REDUCE_MEAN, tb_pow(b, d, 2));
            kern_graph_input_s(b->g, "eps", KERN_F32, "[1]", &epsx);
            y = TB_DIV(d, TB_U(SQRT, TB_ADD(v, epsx)));
            break;
        }
        case 1: /* GELU with 0.4 instead of 0.5 */
            y = TB_MUL(TB_MUL(tb_c(b, 0.4), x),
                       TB_ADD(tb_c(b, 1.0), TB_U(ERF, TB_MUL(x, tb_c(b, 0.7071067811865476)))));
            break;
        case 2: /* GELU tanh with 0.05 instead of 0.044715 */
            y = TB_MUL(TB_MUL(tb_c(b, 0.5), x),
                       TB_ADD(tb_c(b, 1.0), TB_U(TANH, TB_MUL(tb_c(b, 0.7978845608028654),
                                                             TB_ADD(x, TB_MUL(tb_c(b, 0.05), tb_pow(b, x, 3)))))));
            break;
        case 3: { /* attention whose probabilities are also an output */
            int64_t sh[4] = {1, 1, 1, 32};
            kern_graph_val q, s, pr;
            kern_graph_attrs a = tg_attrs();
            int64_t bd;
            kern_graph_dim(b->g, "B", &bd);
            sh[2] = bd;
            q = tg_reshape(b->g, "q4", x, 4, sh);
            a.trans_b = 1;
            s = tb_op(b, KERN_GRAPH_OP_MATMUL, q, q, &a);
            pr = TB_U(SOFTMAX, s);
            y = tb_op(b, KERN_GRAPH_OP_MATMUL, pr, q, NULL);
            KT_OK(kern_graph_output(b->g, pr));
            break;
        }
        default: { /* RMSNorm with an add of a tensor, not a constant eps */
            kern_graph_val ms = TB_U(REDUCE_MEAN, TB_MUL(x, x));
            y = TB_MUL(x, TB_U(RSQRT, TB_ADD(ms, ms)));
            break;
        }
        }
        KT_OK(kern_graph_output(b->g, y));
        memset(&pp, 0, sizeof pp);
        pp.bind = "B=4";
        KT_OK(kern_graph_plan_create(b->g, NULL, &pp, &p));
        if (p) {
            KT_CHECK(strstr(kern_graph_plan_report(p), cases[i].needle) != NULL,
                     "case %d: report lacks \"%s\":\n%s", cases[i].what, cases[i].needle,
                     kern_graph_plan_report(p));
            kern_graph_plan_free(p);
        }
        kern_graph_destroy(b->g);
    }
}

/* gate and up nodes of `op` (linear or qlinear) with biases reading x
 * [L,40], up first in node order, + silu_mul: Hugging Face's MLP form. */
static kern_graph *tg_gate_up(kern_graph_op op, const kern_tensor *tg, const kern_tensor *tu,
                              const kern_tensor *tbg, const kern_tensor *tbu) {
    kern_graph *g = NULL;
    kern_graph_val x, gw, uw, gb, ub, ga, up, y;
    kern_graph_node_desc d;
    int bs = op == KERN_GRAPH_OP_QLINEAR ? 3 : 2; /* the bias slot */
    KT_OK(kern_graph_create(NULL, &g));
    kern_graph_input_s(g, "x", KERN_F32, "[L,40]", &x);
    KT_OK(kern_graph_weight(g, "gate.weight", tg, KERN_GRAPH_COPY, &gw));
    KT_OK(kern_graph_weight(g, "up.weight", tu, KERN_GRAPH_COPY, &uw));
    KT_OK(kern_graph_weight(g, "gate.bias", tbg, KERN_GRAPH_COPY, &gb));
    KT_OK(kern_graph_weight(g, "up.bias", tbu, KERN_GRAPH_COPY, &ub));
    memset(&d, 0, sizeof d);
    d.op = op;
    d.name = "up";
    d.inputs[0] = x;
    d.inputs[1] = uw;
    d.inputs[bs] = ub;
    KT_OK(kern_graph_add(g, &d, &up));
    d.name = "gate";
    d.inputs[1] = gw;
    d.inputs[bs] = gb;
    KT_OK(kern_graph_add(g, &d, &ga));
    y = tg_node(g, KERN_GRAPH_OP_SILU_MUL, "swiglu", ga, up, 0, NULL);
    KT_OK(kern_graph_output(g, y));
    return g;
}

/* Plans g with L bound (pp's other fields as given), runs it on x [L, K]
 * and checks its one output is [L, F]. */
static kern_graph_plan *tg_plan_run_l(kern_graph *g, int64_t L, int64_t F, kern_graph_plan_params *pp,
                                      const kern_tensor *tx, kern_tensor *out) {
    kern_graph_plan *p = NULL;
    char bind[32];
    snprintf(bind, sizeof bind, "L=%lld", (long long)L);
    pp->bind = bind;
    KT_OK(kern_graph_plan_create(g, NULL, pp, &p));
    if (!p) return NULL;
    memset(out, 0, sizeof *out);
    KT_OK(kern_graph_run(p, tx, 1, out, 1));
    KT_CHECK(out->data != NULL && out->shape[0] == L && out->shape[1] == F, "output shape");
    pp->bind = NULL;
    return p;
}

/* got within f32 rounding of want (n elements) */
static void tg_close(const float *got, const float *want, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++)
        KT_CHECK(fabsf(got[i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])), "y[%lld] %g vs %g",
                 (long long)i, got[i], want[i]);
}

/* The gated linear: a linear node with glu = 1 over a kern_glu_pack'ed
 * weight equals kern_gemm with epilogue.glu (bit for bit, prefill- and
 * decode-sized); gate and up linears + silu_mul planned with every pass
 * fuse into one such GEMM (the report says so) and give the same bits;
 * with KERN_GRAPH_PASS_GLU off they agree to f32 rounding. The IR
 * round-trips glu=1; an odd weight is a shape error naming the node. */
KT_TEST(graph_glu_linear) {
    enum { K = 40, F = 13 };
    kt_rng r = kt_rng_make(11);
    float wg[F * K], wu[F * K], w2[2 * F * K], bg[F], bu[F], b2[2 * F];
    kern_tensor tg = kern_tensor_2d(wg, KERN_F32, F, K), tu = kern_tensor_2d(wu, KERN_F32, F, K);
    kern_tensor t2 = kern_tensor_2d(w2, KERN_F32, 2 * F, K), tbg = kern_tensor_1d(bg, KERN_F32, F);
    kern_tensor tbu = kern_tensor_1d(bu, KERN_F32, F), tb2 = kern_tensor_1d(b2, KERN_F32, 2 * F);
    kern_graph *g1, *g2;
    kern_graph_val x, w, b, y;
    kern_graph_attrs at = tg_attrs();
    int Ls[2] = {3, 37}, li, form;
    kt_fill_normal(&r, wg, KERN_F32, F * K, 0.3);
    kt_fill_normal(&r, wu, KERN_F32, F * K, 0.3);
    kt_fill_normal(&r, bg, KERN_F32, F, 1.0);
    kt_fill_normal(&r, bu, KERN_F32, F, 1.0);
    KT_OK(kern_glu_pack(&tg, &tu, &t2, 0));
    KT_OK(kern_glu_pack(&tbg, &tbu, &tb2, 0));
    /* g1: the glu node itself */
    KT_OK(kern_graph_create(NULL, &g1));
    kern_graph_input_s(g1, "x", KERN_F32, "[L,40]", &x);
    KT_OK(kern_graph_weight(g1, "w2", &t2, KERN_GRAPH_COPY, &w));
    KT_OK(kern_graph_weight(g1, "b2", &tb2, KERN_GRAPH_COPY, &b));
    at.act = KERN_ACT_SILU;
    at.glu = 1;
    y = tg_node(g1, KERN_GRAPH_OP_LINEAR, "mlp", x, w, b, &at);
    KT_OK(kern_graph_output(g1, y));
    tg_roundtrip(g1);
    {
        char *ir = tg_ir(g1);
        KT_CHECK(strstr(ir, "glu=1") != NULL, "IR lacks glu=1:\n%s", ir);
        free(ir);
    }
    { /* an odd weight: rejected when added, the graph unchanged */
        kern_graph_val wo = 0, yo = 0;
        kern_graph_node_desc d;
        float wodd[3 * K];
        kern_tensor to = kern_tensor_2d(wodd, KERN_F32, 3, K);
        memset(wodd, 0, sizeof wodd);
        KT_OK(kern_graph_weight(g1, "wodd", &to, KERN_GRAPH_COPY, &wo));
        memset(&d, 0, sizeof d);
        d.op = KERN_GRAPH_OP_LINEAR;
        d.name = "bad";
        d.inputs[0] = x;
        d.inputs[1] = wo;
        d.attrs = at;
        KT_ERROR(kern_graph_add(g1, &d, &yo), KERN_ERR_SHAPE, "glu needs an even weight.shape[0]");
        KT_ERROR(kern_graph_add(g1, &d, &yo), KERN_ERR_SHAPE, "'bad'");
    }
    /* g2: gate and up linears with biases + silu_mul (up first in node
     * order: the pass must still pair gate with up) */
    g2 = tg_gate_up(KERN_GRAPH_OP_LINEAR, &tg, &tu, &tbg, &tbu);
    for (li = 0; li < 2; li++)
        for (form = 0; form < 3; form++) {
            int64_t L = Ls[li];
            float *xs = (float *)malloc(sizeof(float) * (size_t)(L * K));
            float *want = (float *)malloc(sizeof(float) * (size_t)(L * F));
            kern_tensor tx = kern_tensor_2d(xs, KERN_F32, L, K), tw = kern_tensor_2d(want, KERN_F32, L, F);
            kern_tensor out;
            kern_graph_plan *p = NULL;
            kern_graph_plan_params pp;
            kern_gemm_params gp;
            kt_fill_normal(&r, xs, KERN_F32, L * K, 1.0);
            memset(&gp, 0, sizeof gp);
            gp.trans_b = 1;
            gp.epilogue.bias = &tb2;
            gp.epilogue.act = KERN_ACT_SILU;
            gp.epilogue.glu = 1;
            if (L <= 8) { /* the graph runs decode-sized linears through the GEMV */
                kern_gemv_params vp;
                memset(&vp, 0, sizeof vp);
                vp.epilogue = gp.epilogue;
                KT_OK(kern_linear_gemv(NULL, &tx, &t2, &tw, &vp));
            } else {
                KT_OK(kern_gemm(NULL, &tx, &t2, &tw, &gp));
            }
            memset(&pp, 0, sizeof pp);
            if (form == 2) pp.disable = KERN_GRAPH_PASS_GLU;
            kt_context("L=%lld form %d", (long long)L, form);
            p = tg_plan_run_l(form ? g2 : g1, L, F, &pp, &tx, &out);
            KT_REQUIRE(p != NULL && out.data != NULL);
            if (form == 1)
                KT_CHECK(strstr(kern_graph_plan_report(p), "glu epilogue") != NULL, "report:\n%s",
                         kern_graph_plan_report(p));
            if (form == 2)
                KT_CHECK(strstr(kern_graph_plan_report(p), "glu epilogue") == NULL, "report:\n%s",
                         kern_graph_plan_report(p));
            if (form < 2)
                kt_assert_bytes_equal("graph glu vs kern_gemm glu", out.data, want,
                                      sizeof(float) * (size_t)(L * F));
            else
                tg_close((const float *)out.data, want, L * F);
            kern_graph_plan_free(p);
            free(xs);
            free(want);
        }
    kt_context("");
    kern_graph_destroy(g1);
    kern_graph_destroy(g2);
}

/* The int8 gated linear: a qlinear node with glu = 1 over a kern_glu_pack'ed
 * weight equals kern_qlinear with epilogue.glu bit for bit; gate and up
 * qlinears (biases, up first) + silu_mul become one merged qlinear with the
 * glu epilogue (x quantized once) with the same bits; with KERN_GRAPH_PASS_GLU
 * off (merged qlinear + split + silu_mul), or the QKV pass off too (two
 * qlinears), they agree to f32 rounding. Linears quantized by the plan
 * (params.quantize) take the same path. */
KT_TEST(graph_glu_qlinear) {
    enum { K = 40, F = 13 };
    kt_rng r = kt_rng_make(12);
    float wg[F * K], wu[F * K], w2[2 * F * K], bg[F], bu[F], b2[2 * F];
    kern_tensor tg = kern_tensor_2d(wg, KERN_F32, F, K), tu = kern_tensor_2d(wu, KERN_F32, F, K);
    kern_tensor t2 = kern_tensor_2d(w2, KERN_F32, 2 * F, K), tbg = kern_tensor_1d(bg, KERN_F32, F);
    kern_tensor tbu = kern_tensor_1d(bu, KERN_F32, F), tb2 = kern_tensor_1d(b2, KERN_F32, 2 * F);
    kern_graph *g1, *g2, *g3;
    kern_graph_val x, w, b, y;
    kern_graph_attrs at = tg_attrs();
    kern_graph_node_desc d;
    kern_qweight *qw = NULL;
    int Ls[2] = {3, 37}, li, form;
    kt_fill_normal(&r, wg, KERN_F32, F * K, 0.3);
    kt_fill_normal(&r, wu, KERN_F32, F * K, 0.3);
    kt_fill_normal(&r, bg, KERN_F32, F, 1.0);
    kt_fill_normal(&r, bu, KERN_F32, F, 1.0);
    KT_OK(kern_glu_pack(&tg, &tu, &t2, 0));
    KT_OK(kern_glu_pack(&tbg, &tbu, &tb2, 0));
    KT_OK(kern_qweight_pack(NULL, &t2, &qw, NULL));
    /* g1: the glu qlinear itself (inputs x, weight, scales?, bias) */
    KT_OK(kern_graph_create(NULL, &g1));
    kern_graph_input_s(g1, "x", KERN_F32, "[L,40]", &x);
    KT_OK(kern_graph_weight(g1, "w2", &t2, KERN_GRAPH_COPY, &w));
    KT_OK(kern_graph_weight(g1, "b2", &tb2, KERN_GRAPH_COPY, &b));
    at.act = KERN_ACT_SILU;
    at.glu = 1;
    memset(&d, 0, sizeof d);
    d.op = KERN_GRAPH_OP_QLINEAR;
    d.name = "mlp";
    d.inputs[0] = x;
    d.inputs[1] = w;
    d.inputs[3] = b;
    d.attrs = at;
    KT_OK(kern_graph_add(g1, &d, &y));
    KT_OK(kern_graph_output(g1, y));
    tg_roundtrip(g1);
    /* g2: gate and up qlinears with biases + silu_mul; g3: the same with
     * linears, quantized by the plan (params.quantize) */
    g2 = tg_gate_up(KERN_GRAPH_OP_QLINEAR, &tg, &tu, &tbg, &tbu);
    g3 = tg_gate_up(KERN_GRAPH_OP_LINEAR, &tg, &tu, &tbg, &tbu);
    for (li = 0; li < 2; li++)
        for (form = 0; form < 5; form++) {
            int64_t L = Ls[li];
            float *xs = (float *)malloc(sizeof(float) * (size_t)(L * K));
            float *want = (float *)malloc(sizeof(float) * (size_t)(L * F));
            kern_tensor tx = kern_tensor_2d(xs, KERN_F32, L, K), tw = kern_tensor_2d(want, KERN_F32, L, F);
            kern_tensor out;
            kern_graph_plan *p = NULL;
            kern_graph_plan_params pp;
            kern_qlinear_params qp;
            const char *rep;
            kt_fill_normal(&r, xs, KERN_F32, L * K, 1.0);
            memset(&qp, 0, sizeof qp);
            qp.epilogue.bias = &tb2;
            qp.epilogue.act = KERN_ACT_SILU;
            qp.epilogue.glu = 1;
            KT_OK(kern_qlinear(NULL, &tx, qw, &tw, &qp));
            memset(&pp, 0, sizeof pp);
            if (form == 2 || form == 3) pp.disable = KERN_GRAPH_PASS_GLU;
            if (form == 3) pp.disable |= KERN_GRAPH_PASS_QKV;
            if (form == 4) pp.quantize = "*";
            kt_context("L=%lld form %d", (long long)L, form);
            p = tg_plan_run_l(form == 4 ? g3 : form ? g2 : g1, L, F, &pp, &tx, &out);
            KT_REQUIRE(p != NULL && out.data != NULL);
            rep = kern_graph_plan_report(p);
            if (form == 1 || form == 4) {
                KT_CHECK(strstr(rep, "glu epilogue") != NULL, "report:\n%s", rep);
                KT_CHECK(strstr(rep, "2 qlinears reading") != NULL, "report:\n%s", rep);
            }
            if (form == 2 || form == 3) KT_CHECK(strstr(rep, "glu epilogue") == NULL, "report:\n%s", rep);
            if (form == 3) KT_CHECK(strstr(rep, "qlinears reading") == NULL, "report:\n%s", rep);
            if (form < 2 || form == 4)
                kt_assert_bytes_equal("graph glu qlinear vs kern_qlinear glu", out.data, want,
                                      sizeof(float) * (size_t)(L * F));
            else
                tg_close((const float *)out.data, want, L * F);
            kern_graph_plan_free(p);
            free(xs);
            free(want);
        }
    kt_context("");
    kern_qweight_free(NULL, qw);
    kern_graph_destroy(g1);
    kern_graph_destroy(g2);
    kern_graph_destroy(g3);
}

/* ------------------------------------------------------ memory planner */

/* Random DAGs: node i reads 1-3 earlier nodes (mode 0: among the last 8,
 * as layers do; mode 1: anywhere, long lifetimes), sizes log-uniform in
 * 64 B .. 1 MiB. The arena must never overlap two live buffers and should
 * average <= 1.03x the max-live lower bound. */
KT_TEST(graph_memplan_random_dags) {
    int mode;
    kt_rng r = kt_rng_make(77);
    for (mode = 0; mode < 2; mode++) {
        int t;
        double sum = 0, worst = 0;
        for (t = 0; t < 1000; t++) {
            int n = 10 + (int)kt_randint(&r, 0, 190), i, k;
            size_t *size = (size_t *)malloc((size_t)n * sizeof(size_t));
            size_t *off = (size_t *)malloc((size_t)n * sizeof(size_t));
            int32_t *first = (int32_t *)malloc((size_t)n * 4), *last = (int32_t *)malloc((size_t)n * 4);
            size_t arena, live;
            int ok;
            for (i = 0; i < n; i++) {
                size[i] = ((size_t)(64 * pow(2, kt_uniform(&r, 0, 14))) + 63) & ~(size_t)63;
                first[i] = last[i] = i;
            }
            for (i = 1; i < n; i++) {
                int nin = 1 + (int)kt_randint(&r, 0, 3);
                for (k = 0; k < nin; k++) {
                    int j = mode ? (int)kt_randint(&r, 0, i) : i - 1 - (int)kt_randint(&r, 0, i < 8 ? i : 8);
                    if (last[j] < i) last[j] = i;
                }
            }
            last[n - 1] = n;
            live = kern__g_maxlive(NULL, n, size, first, last, n);
            arena = kern__g_memplan(NULL, n, size, first, last, live, off, &ok);
            KT_REQUIRE(ok);
            for (i = 0; i < n; i++) { /* no two live buffers overlap */
                KT_CHECK(off[i] + size[i] <= arena);
                for (k = i + 1; k < n; k++)
                    if (!(last[k] < first[i] || first[k] > last[i]))
                        KT_CHECK(off[i] + size[i] <= off[k] || off[k] + size[k] <= off[i],
                                 "buffers %d and %d overlap", i, k);
            }
            KT_CHECK(arena >= live);
            sum += (double)arena / (double)live;
            if ((double)arena / (double)live > worst) worst = (double)arena / (double)live;
            free(size); free(off); free(first); free(last);
        }
        KT_CHECK(sum / 1000 <= 1.03, "mode %d: arena averages %.4fx the max-live bound", mode, sum / 1000);
        if (getenv("KT_VERBOSE"))
            printf("  memplan mode %d: arena / max-live mean %.4f, worst %.4f over 1000 DAGs\n", mode,
                   sum / 1000, worst);
    }
}

/* ------------------------------------------- runs without allocation */

static int64_t tg_allocs;
static void *tg_count_alloc(void *u, size_t size, size_t align) {
    void *p = NULL;
    (void)u;
    __atomic_fetch_add(&tg_allocs, 1, __ATOMIC_RELAXED);
    if (posix_memalign(&p, align, size ? size : 1) != 0) return NULL;
    return p;
}
static void tg_count_free(void *u, void *p) {
    (void)u;
    free(p);
}
static long tg_rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void tg_no_alloc(int threads, int runs) {
    static const tg_bert cfg = {1, 32, 2, 64, 50, 512};
    kern_ctx *ctx = NULL;
    kern_ctx_params cp;
    kern_graph *g;
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    kt_rng r = kt_rng_make(12);
    tg_bert_in in;
    int i;
    int64_t before;
    long rss0, rss1;
    memset(&cp, 0, sizeof cp);
    cp.n_threads = threads;
    cp.allocator.alloc = tg_count_alloc;
    cp.allocator.free = tg_count_free;
    KT_OK(kern_ctx_create(&cp, &ctx));
    g = tg_bert_build(&cfg, 3);
    KT_REQUIRE(g && ctx);
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=1,L=512";
    KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
    KT_REQUIRE(p != NULL);
    tg_bert_inputs(&in, &cfg, 1, 512, &r);
    /* every family call takes its scratch from the plan's workspace, sized
     * at the bound: not even the first runs (at the bound, at L = 1)
     * allocate */
    before = tg_allocs;
    {
        kern_tensor out;
        memset(&out, 0, sizeof out);
        KT_OK(kern_graph_run(p, in.t, 3, &out, 1));
        in.t[0].shape[1] = in.t[1].shape[1] = in.t[2].shape[3] = 1;
        memset(&out, 0, sizeof out);
        KT_OK(kern_graph_run(p, in.t, 3, &out, 1));
    }
    KT_CHECK(tg_allocs == before, "the first runs allocated %lld times", (long long)(tg_allocs - before));
    rss0 = tg_rss_kb();
    for (i = 0; i < runs; i++) {
        int64_t L = 1 + kt_randint(&r, 0, 512);
        kern_tensor t[3], out;
        t[0] = kern_tensor_2d(in.ids, KERN_I64, 1, L);
        t[1] = kern_tensor_2d(in.tt, KERN_I64, 1, L);
        t[2] = kern_tensor_4d(in.mask, KERN_F32, 1, 1, 1, L);
        memset(&out, 0, sizeof out);
        if (kern_graph_run(p, t, 3, &out, 1) != KERN_OK) {
            KT_CHECK(0, "run %d (L=%lld): %s", i, (long long)L, kern_last_error());
            break;
        }
        if (out.shape[1] != L) {
            KT_CHECK(0, "run %d: output has L=%lld", i, (long long)out.shape[1]);
            break;
        }
    }
    rss1 = tg_rss_kb();
    KT_CHECK(tg_allocs == before, "%lld allocations in %d runs", (long long)(tg_allocs - before), runs);
    KT_CHECK(rss1 - rss0 < 1024, "resident memory grew by %ld KiB over %d runs", rss1 - rss0, runs);
    if (getenv("KT_VERBOSE"))
        printf("  %d runs on %d thread(s), L in [1,512]: %lld allocations, resident %+ld KiB\n", runs,
               threads, (long long)(tg_allocs - before), rss1 - rss0);
    tg_bert_inputs_free(&in);
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
    kern_ctx_destroy(ctx);
}

/* 10,000 runs with random sequence lengths (1 thread; 300 more on 2
 * threads, where the pool and the executor's parallel region run). */
KT_TEST(graph_runs_allocate_nothing) {
    tg_no_alloc(1, TG_RUNS);
    tg_no_alloc(2, 300);
}

/* --------------------------------------------------------- determinism */

KT_TEST(graph_deterministic_across_threads) {
    kern_ctx *c1 = kt_ctx_ex(1, KERN_ISA_AUTO, 1), *c2 = kt_ctx_ex(2, KERN_ISA_AUTO, 1);
    kern_graph *g = tg_bert_build(&TG_BERT, 31);
    kern_graph_plan *p1 = NULL, *p2 = NULL;
    kern_graph_plan_params pp;
    kt_rng r = kt_rng_make(13);
    tg_bert_in in;
    int64_t n = 3 * 37 * TG_BERT.hidden;
    float *ref = (float *)malloc((size_t)n * 4);
    int i;
    KT_REQUIRE(g && c1 && c2);
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=3,L=37";
    pp.parallel_min = 512; /* split even small executor-owned nodes */
    KT_OK(kern_graph_plan_create(g, c1, &pp, &p1));
    KT_OK(kern_graph_plan_create(g, c2, &pp, &p2));
    KT_REQUIRE(p1 && p2);
    tg_bert_inputs(&in, &TG_BERT, 3, 37, &r);
    {
        kern_tensor out;
        memset(&out, 0, sizeof out);
        KT_OK(kern_graph_run(p1, in.t, 3, &out, 1));
        memcpy(ref, out.data, (size_t)n * 4);
    }
    for (i = 0; i < 100; i++) {
        kern_tensor out;
        memset(&out, 0, sizeof out);
        KT_OK(kern_graph_run(i & 1 ? p2 : p1, in.t, 3, &out, 1));
        if (memcmp(ref, out.data, (size_t)n * 4) != 0) {
            kt_assert_bytes_equal("run vs first run", ref, out.data, (size_t)n * 4);
            break;
        }
    }
    tg_bert_inputs_free(&in);
    free(ref);
    kern_graph_plan_free(p1);
    kern_graph_plan_free(p2);
    kern_graph_destroy(g);
}

/* ---------------------------------------------------- plan / run errors */

KT_TEST(graph_plan_and_run_errors) {
    kern_graph *g;
    kt_rng r = kt_rng_make(14);
    kern_graph_val x = 0, m = 0, w = 0, y = 0, e = 0;
    kern_graph_plan *p = (kern_graph_plan *)(uintptr_t)1;
    kern_graph_plan_params pp;
    float xd[64], md[64], od[64];
    kern_tensor in[2], out;
    KT_OK(kern_graph_create(NULL, &g));
    KT_OK(kern_graph_input_s(g, "x", KERN_F32, "[B,8]", &x));
    KT_OK(kern_graph_input_s(g, "m", KERN_F32, "[B,1]", &m));
    w = tg_w2(g, &r, "w", 4, 8, 0.5);
    KT_OK(kern_graph_linear(g, "y", x, w, 0, KERN_ACT_NONE, &y));
    KT_OK(kern_graph_binary(g, KERN_GRAPH_OP_MUL, "ym", y, m, &y));
    KT_OK(kern_graph_output(g, y));
    memset(&pp, 0, sizeof pp);
    KT_ERROR(kern_graph_plan_create(g, NULL, &pp, &p), KERN_ERR_SHAPE, "symbol 'B' is not bound");
    pp.bind = "B=4,Q=3";
    KT_ERROR(kern_graph_plan_create(g, NULL, &pp, &p), KERN_ERR_ARG, "'Q' is not a symbol");
    pp.bind = "B=x";
    KT_ERROR(kern_graph_plan_create(g, NULL, &pp, &p), KERN_ERR_ARG, "bad value for 'B'");
    KT_CHECK(p == (kern_graph_plan *)(uintptr_t)1, "plan written on error");
    pp.bind = "B=4";
    KT_OK(kern_graph_plan_create(g, NULL, &pp, &p));
    KT_REQUIRE(p != NULL);
    kt_fill_normal(&r, xd, KERN_F32, 64, 1);
    kt_fill_normal(&r, md, KERN_F32, 64, 1);
    in[0] = kern_tensor_2d(xd, KERN_F32, 3, 8);
    in[1] = kern_tensor_2d(md, KERN_F32, 3, 1);
    memset(&out, 0, sizeof out);
    KT_ERROR(kern_graph_run(p, in, 1, &out, 1), KERN_ERR_ARG, "1 inputs given, the graph has 2");
    in[1] = kern_tensor_2d(md, KERN_F32, 2, 1);
    KT_ERROR(kern_graph_run(p, in, 2, &out, 1), KERN_ERR_SHAPE,
             "input 'm' dim 0 is 2 but the graph says B = 3 here");
    in[0] = kern_tensor_2d(xd, KERN_F32, 5, 8);
    KT_ERROR(kern_graph_run(p, in, 2, &out, 1), KERN_ERR_SHAPE, "B=5 (from input 'x' dim 0) is outside the planned bound 0..4");
    in[0] = kern_tensor_2d(xd, KERN_I32, 2, 8);
    KT_ERROR(kern_graph_run(p, in, 2, &out, 1), KERN_ERR_DTYPE, "input 'x' is i32, the graph declares f32");
    {
        int64_t sh[2] = {2, 8}, st[2] = {16, 1};
        kern_tensor_init_strided(&in[0], xd, KERN_F32, 2, sh, st);
        KT_ERROR(kern_graph_run(p, in, 2, &out, 1), KERN_ERR_LAYOUT, "input 'x' must be contiguous");
    }
    in[0] = kern_tensor_2d(xd, KERN_F32, 2, 8);
    out = kern_tensor_2d(od, KERN_F32, 2, 5);
    KT_ERROR(kern_graph_run(p, in, 2, &out, 1), KERN_ERR_SHAPE, "output 'ym' is f32 [2,4] here");
    out = kern_tensor_2d(od, KERN_F32, 2, 4);
    KT_OK(kern_graph_run(p, in, 2, &out, 1));
    kern_graph_plan_free(p);
    /* a weight without data */
    {
        kern_tensor t = kern_tensor_2d(NULL, KERN_F32, 4, 8);
        KT_OK(kern_graph_weight(g, "w2", &t, 0, &e));
        KT_OK(kern_graph_linear(g, "y2", x, e, 0, KERN_ACT_NONE, &e));
        KT_OK(kern_graph_output(g, e));
        p = NULL;
        KT_ERROR(kern_graph_plan_create(g, NULL, &pp, &p), KERN_ERR_ARG, "weight 'w2' has no data");
    }
    /* binding from safetensors: missing, mis-shaped, wrong dtype, all or nothing */
    {
        char path[96];
        float wd[40];
        kern_tensor t = kern_tensor_2d(wd, KERN_F32, 5, 8);
        kern_safetensors_item it[1];
        kern_safetensors *st = NULL;
        kern_graph_val_info info;
        snprintf(path, sizeof path, "/tmp/kern_tg_bad_%d.safetensors", (int)getpid());
        memset(wd, 0, sizeof wd);
        it[0].name = "w9";
        it[0].tensor = &t;
        KT_OK(kern_safetensors_save(NULL, path, it, 1, NULL));
        KT_OK(kern_safetensors_open(NULL, path, NULL, &st));
        KT_ERROR(kern_graph_bind_safetensors(g, st, 0), KERN_ERR_ARG,
                 "weight 'w2' is missing from the safetensors file");
        kern_safetensors_free(NULL, st);
        it[0].name = "w2";
        KT_OK(kern_safetensors_save(NULL, path, it, 1, NULL));
        KT_OK(kern_safetensors_open(NULL, path, NULL, &st));
        KT_ERROR(kern_graph_bind_safetensors(g, st, 0), KERN_ERR_SHAPE,
                 "weight 'w2' is declared [4,8] but the data is [5,8]");
        kern_safetensors_free(NULL, st);
        t = kern_tensor_2d(wd, KERN_BF16, 4, 8);
        KT_OK(kern_safetensors_save(NULL, path, it, 1, NULL));
        KT_OK(kern_safetensors_open(NULL, path, NULL, &st));
        KT_ERROR(kern_graph_bind_safetensors(g, st, 0), KERN_ERR_DTYPE,
                 "weight 'w2' is declared f32 but the data is bf16");
        kern_safetensors_free(NULL, st);
        KT_OK(kern_graph_val_get(g, kern_graph_find(g, "w2"), &info));
        KT_CHECK(!info.has_data, "a failed bind left data behind");
        { /* a truncated file is rejected before the graph sees it */
            FILE *f = fopen(path, "r+b");
            KT_REQUIRE(f != NULL);
            KT_CHECK(ftruncate(fileno(f), 100) == 0);
            fclose(f);
            KT_ERROR(kern_safetensors_open(NULL, path, NULL, &st), KERN_ERR_ARG, "truncated");
        }
        remove(path);
    }
    kern_graph_destroy(g);
    /* a symbol no input binds alone */
    KT_OK(kern_graph_create(NULL, &g));
    KT_OK(kern_graph_input_s(g, "x", KERN_F32, "[2*L]", &x));
    KT_OK(kern_graph_unary(g, KERN_GRAPH_OP_GELU, "y", x, &y));
    KT_OK(kern_graph_output(g, y));
    pp.bind = "L=4";
    KT_ERROR(kern_graph_plan_create(g, NULL, &pp, &p), KERN_ERR_SHAPE, "symbol 'L' appears in no input dim");
    kern_graph_destroy(g);
    /* embedding ids out of range */
    KT_OK(kern_graph_create(NULL, &g));
    KT_OK(kern_graph_input_s(g, "ids", KERN_I32, "[N]", &x));
    w = tg_w2(g, &r, "table", 10, 4, 1);
    y = tg_node(g, KERN_GRAPH_OP_EMBEDDING, "emb", x, w, 0, NULL);
    KT_OK(kern_graph_output(g, y));
    pp.bind = "N=8";
    KT_OK(kern_graph_plan_create(g, NULL, &pp, &p));
    {
        int32_t ids[4] = {1, 2, 10, 3};
        kern_tensor t = kern_tensor_1d(ids, KERN_I32, 4);
        memset(&out, 0, sizeof out);
        KT_ERROR(kern_graph_run(p, &t, 1, &out, 1), KERN_ERR_INDEX, "node 'emb' (embedding): id number 2 is outside [0, 10)");
    }
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
    /* a sparse24 weight that is not 2:4 (without prune) fails at plan time */
    KT_OK(kern_graph_create(NULL, &g));
    KT_OK(kern_graph_input_s(g, "x", KERN_F32, "[N,8]", &x));
    w = tg_w2(g, &r, "dense_w", 4, 8, 1);
    y = tg_node(g, KERN_GRAPH_OP_SPARSE24_LINEAR, "sp", x, w, 0, NULL);
    KT_OK(kern_graph_output(g, y));
    KT_ERROR(kern_graph_plan_create(g, NULL, &pp, &p), KERN_ERR_ARG, "node 'sp' (sparse24_linear)");
    kern_graph_destroy(g);
}

KT_TEST(graph_external_arena_and_cache) {
    kern_graph *g = tg_bert_build(&TG_BERT, 41);
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    kt_rng r = kt_rng_make(15);
    void *arena;
    size_t sz;
    int i;
    KT_REQUIRE(g != NULL);
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=2,L=24";
    pp.external_arena = 1;
    pp.cache_size = 2;
    KT_OK(kern_graph_plan_create(g, NULL, &pp, &p));
    KT_REQUIRE(p != NULL);
    sz = kern_graph_plan_arena_size(p);
    KT_CHECK(sz > 0);
    {
        tg_bert_in in;
        kern_tensor out;
        tg_bert_inputs(&in, &TG_BERT, 2, 24, &r);
        memset(&out, 0, sizeof out);
        KT_ERROR(kern_graph_run(p, in.t, 3, &out, 1), KERN_ERR_ARG, "no arena");
        arena = kt_alloc(sz, "arena");
        KT_ERROR(kern_graph_plan_set_arena(p, arena, sz - 1), KERN_ERR_ARG, "must be >=");
        KT_OK(kern_graph_plan_set_arena(p, arena, sz));
        for (i = 0; i < 12; i++) { /* more bindings than cache slots */
            int64_t L = 1 + (i % 5) * 5;
            kern_tensor t[3];
            float *want = (float *)malloc((size_t)(2 * L * TG_BERT.hidden) * 4);
            double *wd = (double *)malloc((size_t)(2 * L * TG_BERT.hidden) * 8);
            int64_t j;
            t[0] = kern_tensor_2d(in.ids, KERN_I64, 2, L);
            t[1] = kern_tensor_2d(in.tt, KERN_I64, 2, L);
            t[2] = kern_tensor_4d(in.mask, KERN_F32, 2, 1, 1, L);
            memset(&out, 0, sizeof out);
            KT_OK(kern_graph_run(p, t, 3, &out, 1));
            KT_CHECK((char *)out.data >= (char *)arena && (char *)out.data < (char *)arena + sz);
            tg_bert_direct(NULL, g, &TG_BERT, 2, L, in.ids, in.tt, in.mask, want);
            for (j = 0; j < 2 * L * TG_BERT.hidden; j++) wd[j] = want[j];
            KT_CHECK(tg_relerr((const float *)out.data, wd, 2 * L * TG_BERT.hidden) <= 2e-5, "L=%lld", (long long)L);
            free(want);
            free(wd);
        }
        kt_free(arena);
        tg_bert_inputs_free(&in);
    }
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
}

/* ------------------------------------------------------------- tooling */

KT_TEST(graph_profile_dot_and_checker) {
    kern_graph *g = tg_bert_build(&TG_BERT, 51);
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    kern_graph_check_result res;
    kt_rng r = kt_rng_make(16);
    tg_bert_in in;
    size_t n;
    char *buf;
    KT_REQUIRE(g != NULL);
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=2,L=16";
    pp.profile = 1;
    KT_OK(kern_graph_plan_create(g, NULL, &pp, &p));
    KT_REQUIRE(p != NULL);
    tg_bert_inputs(&in, &TG_BERT, 2, 16, &r);
    {
        kern_tensor out;
        int i;
        for (i = 0; i < 3; i++) {
            memset(&out, 0, sizeof out);
            KT_OK(kern_graph_run(p, in.t, 3, &out, 1));
        }
    }
    {
        kern_graph_profile_params q;
        memset(&q, 0, sizeof q);
        q.peak_gflops = 116;
        q.peak_gbs = 27;
        KT_OK(kern_graph_plan_profile(p, &q, NULL, 0, &n));
        buf = (char *)malloc(n + 1);
        KT_OK(kern_graph_plan_profile(p, &q, buf, n + 1, &n));
        KT_CHECK(strstr(buf, "GFLOP/s") && strstr(buf, "l0.attn") && strstr(buf, "over 3 runs"), "%s", buf);
        free(buf);
    }
    KT_OK(kern_graph_plan_dot(p, NULL, 0, &n));
    buf = (char *)malloc(n + 1);
    KT_OK(kern_graph_plan_dot(p, buf, n + 1, &n));
    KT_CHECK(strncmp(buf, "digraph kern_graph {", 20) == 0 && strstr(buf, "fillcolor") &&
             strstr(buf, "style=dashed") && buf[n - 2] == '}', "%s", buf);
    free(buf);
    kern_graph_plan_free(p);
    /* checker: the fused plan agrees with the unfused scalar graph */
    memset(&pp, 0, sizeof pp);
    KT_OK(kern_graph_check(g, NULL, &pp, in.t, 3, &res));
    KT_CHECK(res.ok && res.compared > 10, "compared %d, first bad '%s' (%g)\n%s", res.compared,
             res.first_bad, res.max_rel_err, res.report);
    /* int8: SQNR reported, no failure */
    pp.quantize = "*";
    KT_OK(kern_graph_check(g, NULL, &pp, in.t, 3, &res));
    KT_CHECK(res.ok && strstr(res.report, "SQNR"), "%s", res.report);
    /* an injected fault is found and named */
    pp.quantize = NULL;
    kern__graph_check_poison("l1.ln1");
    KT_OK(kern_graph_check(g, NULL, &pp, in.t, 3, &res));
    kern__graph_check_poison(NULL);
    KT_CHECK(!res.ok && strcmp(res.first_bad, "l1.ln1") == 0, "first bad '%s'\n%s", res.first_bad, res.report);
    tg_bert_inputs_free(&in);
    kern_graph_destroy(g);
}

/* Found by fuzz_ir: a graph whose outputs are all empty has no arena (no
 * pointer arithmetic on NULL); and a linear reading a graph input sizes
 * its GEMM workspace at plan time, so even its first run allocates
 * nothing. */
KT_TEST(graph_fuzz_regressions) {
    kern_graph *g;
    kern_graph_val x, y, w;
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    kt_rng r = kt_rng_make(17);
    float xd[64 * 96];
    kern_tensor in, out;
    KT_OK(kern_graph_create(NULL, &g));
    KT_OK(kern_graph_input_s(g, "x", KERN_F32, "[B,L,0]", &x));
    KT_OK(kern_graph_unary(g, KERN_GRAPH_OP_ERF, "y", x, &y));
    KT_OK(kern_graph_output(g, y));
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=2,L=3";
    KT_OK(kern_graph_plan_create(g, NULL, &pp, &p));
    {
        int64_t sh[3] = {2, 3, 0};
        kern_tensor_init(&in, xd, KERN_F32, 3, sh);
        memset(&out, 0, sizeof out);
        KT_OK(kern_graph_run(p, &in, 1, &out, 1));
        KT_CHECK(kern_tensor_numel(&out) == 0);
    }
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
    {
        kern_ctx *ctx = NULL;
        kern_ctx_params cp;
        int64_t before;
        memset(&cp, 0, sizeof cp);
        cp.n_threads = 2;
        cp.allocator.alloc = tg_count_alloc;
        cp.allocator.free = tg_count_free;
        KT_OK(kern_ctx_create(&cp, &ctx));
        KT_OK(kern_graph_create(ctx, &g));
        KT_OK(kern_graph_input_s(g, "x", KERN_F32, "[M,96]", &x));
        w = tg_w2(g, &r, "w", 80, 96, 0.1);
        KT_OK(kern_graph_linear(g, "y", x, w, 0, KERN_ACT_GELU, &y));
        KT_OK(kern_graph_output(g, y));
        pp.bind = "M=64";
        KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
        KT_REQUIRE(p != NULL);
        kt_fill_normal(&r, xd, KERN_F32, 64 * 96, 1);
        in = kern_tensor_2d(xd, KERN_F32, 64, 96);
        before = tg_allocs;
        memset(&out, 0, sizeof out);
        KT_OK(kern_graph_run(p, &in, 1, &out, 1));
        KT_CHECK(tg_allocs == before, "the first run allocated %lld times", (long long)(tg_allocs - before));
        kern_graph_plan_free(p);
        kern_graph_destroy(g);
        kern_ctx_destroy(ctx);
    }
}

/* Every family op through the graph gives the same bits as the direct
 * call with the same parameters (the executor adds nothing but views). */
/* The direct call a sparse24_linear node with prune=1 stands for: w pruned
 * into pr, compressed, run with bias and act into y. */
static void tg_sparse24_direct(kern_ctx *ctx, const kern_tensor *w, const kern_tensor *pr,
                               const kern_tensor *x, const kern_tensor *bias, kern_act act,
                               const kern_tensor *y) {
    kern_sparse24 *sw = NULL;
    kern_sparse24_linear_params sp;
    KT_OK(kern_sparse24_prune(ctx, w, pr, NULL));
    KT_OK(kern_sparse24_compress(ctx, pr, &sw, NULL));
    memset(&sp, 0, sizeof sp);
    sp.epilogue.bias = bias;
    sp.epilogue.act = act;
    KT_OK(kern_sparse24_linear(ctx, x, sw, y, &sp));
    kern_sparse24_free(ctx, sw);
}

/* A bf16 sparse24_linear (pruned at plan time, bias, gelu): at level AMX
 * the plan expands the 2:4 weight and runs the dense tile GEMM (the same
 * pruned product, another summation order: bf16 tolerance), and says so in
 * its report; below AMX it is the 2:4 kernel, bit for bit. */
KT_TEST(graph_sparse24_bf16_dense_on_tiles) {
    const int64_t M = 70, K = 96, N = 48;
    kt_rng r = kt_rng_make(61);
    uint16_t *x = (uint16_t *)malloc(2 * M * K), *w = (uint16_t *)malloc(2 * N * K);
    uint16_t *pr = (uint16_t *)malloc(2 * N * K), *want = (uint16_t *)malloc(2 * M * N);
    float *bias = (float *)malloc(4 * N);
    kern_tensor tx, tw, tpr, tb, tw_want;
    kt_fill_normal(&r, x, KERN_BF16, M * K, 1);
    kt_fill_normal(&r, w, KERN_BF16, N * K, 0.2);
    kt_fill_normal(&r, bias, KERN_F32, N, 0.3);
    tx = kern_tensor_2d(x, KERN_BF16, M, K);
    tw = kern_tensor_2d(w, KERN_BF16, N, K);
    tpr = kern_tensor_2d(pr, KERN_BF16, N, K);
    tb = kern_tensor_1d(bias, KERN_F32, N);
    tw_want = kern_tensor_2d(want, KERN_BF16, M, N);
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        kern_graph *g = NULL;
        kern_graph_plan *p = NULL;
        kern_graph_val vx = 0, wv = 0, bv = 0, y = 0;
        kern_graph_attrs at;
        kern_graph_plan_params pp;
        kern_tensor out;
        int tiles = isa == KERN_ISA_AMX;
        kt_context("%s", kern_isa_name(isa));
        tg_sparse24_direct(ctx, &tw, &tpr, &tx, &tb, KERN_ACT_GELU, &tw_want);
        KT_OK(kern_graph_create(NULL, &g));
        kern_graph_input_s(g, "x", KERN_BF16, "[M,96]", &vx);
        KT_OK(kern_graph_weight(g, "w", &tw, 0, &wv));
        KT_OK(kern_graph_weight(g, "b", &tb, 0, &bv));
        at = tg_attrs();
        at.prune = 1;
        at.act = KERN_ACT_GELU;
        y = tg_node(g, KERN_GRAPH_OP_SPARSE24_LINEAR, "s24", vx, wv, bv, &at);
        KT_OK(kern_graph_output(g, y));
        memset(&pp, 0, sizeof pp);
        pp.bind = "M=70";
        KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
        KT_REQUIRE(p != NULL);
        memset(&out, 0, sizeof out);
        KT_OK(kern_graph_run(p, &tx, 1, &out, 1));
        KT_CHECK((strstr(kern_graph_plan_report(p), "expanded and prepacked dense") != NULL) == tiles,
                 "report: %s", kern_graph_plan_report(p));
        if (tiles) {
            int64_t i, bad = 0;
            for (i = 0; i < M * N; i++) {
                float a = kern_bf16_to_f32(((const uint16_t *)out.data)[i]);
                float b = kern_bf16_to_f32(want[i]);
                if (!(fabsf(a - b) <= 0.02f + 0.02f * fabsf(b))) bad++;
            }
            KT_CHECK(bad == 0, "%lld of %lld outputs off the 2:4 kernel's", (long long)bad,
                     (long long)(M * N));
        } else {
            kt_assert_bytes_equal("sparse24_linear bf16", out.data, want, (size_t)(2 * M * N));
        }
        kern_graph_plan_free(p);
        kern_graph_destroy(g);
    }
    kt_context("");
    free(x); free(w); free(pr); free(want); free(bias);
}

KT_TEST(graph_family_ops_match_direct_calls) {
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    kt_rng r = kt_rng_make(18);
    kern_graph *g;
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    int variant;
    /* sdpa with every option, GQA 4/2, both causal alignments */
    for (variant = 0; variant < 3; variant++) {
        int64_t B = 2, Hq = 4, Hkv = 2, Lq = 5, Lk = 9, D = 8;
        float *q = (float *)malloc(4 * B * Hq * Lq * D), *k = (float *)malloc(4 * B * Hkv * Lk * D);
        float *v = (float *)malloc(4 * B * Hkv * Lk * D), *want = (float *)malloc(4 * B * Hq * Lq * D);
        float *mask = (float *)malloc(4 * Lq * Lk);
        int32_t klens[2] = {7, 9};
        kern_graph_val vq, vk, vv, vm, vl, y;
        kern_graph_node_desc d;
        kern_tensor tq, tk, tv, tm, tl, to, in[5], out;
        kern_sdpa_params sp;
        int64_t i;
        kt_fill_normal(&r, q, KERN_F32, B * Hq * Lq * D, 1);
        kt_fill_normal(&r, k, KERN_F32, B * Hkv * Lk * D, 1);
        kt_fill_normal(&r, v, KERN_F32, B * Hkv * Lk * D, 1);
        for (i = 0; i < Lq * Lk; i++) mask[i] = (float)kt_uniform(&r, -1, 0);
        KT_OK(kern_graph_create(NULL, &g));
        kern_graph_input_s(g, "q", KERN_F32, "[B,4,Q,8]", &vq);
        kern_graph_input_s(g, "k", KERN_F32, "[B,2,K,8]", &vk);
        kern_graph_input_s(g, "v", KERN_F32, "[B,2,K,8]", &vv);
        kern_graph_input_s(g, "mask", KERN_F32, "[Q,K]", &vm);
        kern_graph_input_s(g, "k_lens", KERN_I32, "[B]", &vl);
        memset(&d, 0, sizeof d);
        d.op = KERN_GRAPH_OP_SDPA;
        d.name = "att";
        d.inputs[0] = vq; d.inputs[1] = vk; d.inputs[2] = vv; d.inputs[3] = vm; d.inputs[4] = vl;
        d.attrs.enable_gqa = 1;
        d.attrs.is_causal = variant == 0;
        d.attrs.causal_bottom_right = variant == 1;
        d.attrs.scale = 0.3f;
        d.attrs.softcap = variant == 2 ? 5.0f : 0.0f;
        d.attrs.window_set = variant == 2;
        d.attrs.window_left = 3;
        d.attrs.window_right = 1;
        KT_OK(kern_graph_add(g, &d, &y));
        KT_OK(kern_graph_output(g, y));
        tg_roundtrip(g);
        memset(&pp, 0, sizeof pp);
        pp.bind = "B=2,Q=8,K=16";
        KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
        tq = kern_tensor_4d(q, KERN_F32, B, Hq, Lq, D);
        tk = kern_tensor_4d(k, KERN_F32, B, Hkv, Lk, D);
        tv = kern_tensor_4d(v, KERN_F32, B, Hkv, Lk, D);
        tm = kern_tensor_2d(mask, KERN_F32, Lq, Lk);
        tl = kern_tensor_1d(klens, KERN_I32, B);
        to = kern_tensor_4d(want, KERN_F32, B, Hq, Lq, D);
        memset(&sp, 0, sizeof sp);
        sp.attn_mask = &tm;
        sp.k_lens = &tl;
        sp.enable_gqa = 1;
        sp.is_causal = variant == 0;
        sp.causal_bottom_right = variant == 1;
        sp.scale = 0.3f;
        sp.softcap = variant == 2 ? 5.0f : 0.0f;
        sp.window_set = variant == 2;
        sp.window_left = 3;
        sp.window_right = 1;
        KT_OK(kern_sdpa(ctx, &tq, &tk, &tv, &to, &sp));
        in[0] = tq; in[1] = tk; in[2] = tv; in[3] = tm; in[4] = tl;
        memset(&out, 0, sizeof out);
        KT_OK(kern_graph_run(p, in, 5, &out, 1));
        kt_context("sdpa variant %d", variant);
        kt_assert_bytes_equal("sdpa", out.data, want, (size_t)(4 * B * Hq * Lq * D));
        kern_graph_plan_free(p);
        kern_graph_destroy(g);
        free(q); free(k); free(v); free(want); free(mask);
    }
    kt_context("");
    /* qlinear with an i8 weight + scales, bias, residual, gelu; the same
     * weight as f32 quantized at plan time; 2:4 sparse with pruning;
     * quantize_per_token */
    {
        int64_t M = 7, K = 32, N = 24, i;
        float *x = (float *)malloc(4 * M * K), *res = (float *)malloc(4 * M * N), *bias = (float *)malloc(4 * N);
        float *wf = (float *)malloc(4 * N * K), *sc = (float *)malloc(4 * N), *want = (float *)malloc(4 * M * N);
        int8_t *wq = (int8_t *)malloc(N * K), *xq = (int8_t *)malloc(M * K);
        float *xs = (float *)malloc(4 * M);
        kern_graph_val vx, vr, y1, y2, y3, q2[2], wv, sv, bv, wfv;
        kern_tensor tx, tr, tb, twq, tsc, twf, out[5];
        kern_qweight *qw = NULL;
        kern_qlinear_params qp;
        kt_fill_normal(&r, x, KERN_F32, M * K, 1);
        kt_fill_normal(&r, res, KERN_F32, M * N, 1);
        kt_fill_normal(&r, bias, KERN_F32, N, 0.3);
        kt_fill_normal(&r, wf, KERN_F32, N * K, 0.2);
        for (i = 0; i < N * K; i++) wq[i] = (int8_t)kt_randint(&r, -127, 128);
        for (i = 0; i < N; i++) sc[i] = (float)kt_uniform(&r, 0.001, 0.01);
        tx = kern_tensor_2d(x, KERN_F32, M, K);
        tr = kern_tensor_2d(res, KERN_F32, M, N);
        tb = kern_tensor_1d(bias, KERN_F32, N);
        twq = kern_tensor_2d(wq, KERN_I8, N, K);
        tsc = kern_tensor_1d(sc, KERN_F32, N);
        twf = kern_tensor_2d(wf, KERN_F32, N, K);
        KT_OK(kern_graph_create(NULL, &g));
        kern_graph_input_s(g, "x", KERN_F32, "[M,32]", &vx);
        kern_graph_input_s(g, "res", KERN_F32, "[M,24]", &vr);
        KT_OK(kern_graph_weight(g, "wq", &twq, 0, &wv));
        KT_OK(kern_graph_weight(g, "wq.scales", &tsc, 0, &sv));
        KT_OK(kern_graph_weight(g, "bias", &tb, 0, &bv));
        KT_OK(kern_graph_weight(g, "wf", &twf, 0, &wfv));
        {
            kern_graph_node_desc d;
            memset(&d, 0, sizeof d);
            d.op = KERN_GRAPH_OP_QLINEAR;
            d.name = "q8";
            d.inputs[0] = vx; d.inputs[1] = wv; d.inputs[2] = sv; d.inputs[3] = bv; d.inputs[4] = vr;
            d.attrs.act = KERN_ACT_GELU;
            KT_OK(kern_graph_add(g, &d, &y1));
            memset(&d, 0, sizeof d);
            d.op = KERN_GRAPH_OP_QLINEAR;
            d.name = "qf";
            d.inputs[0] = vx; d.inputs[1] = wfv; d.inputs[3] = bv;
            KT_OK(kern_graph_add(g, &d, &y2));
            memset(&d, 0, sizeof d);
            d.op = KERN_GRAPH_OP_SPARSE24_LINEAR;
            d.name = "s24";
            d.inputs[0] = vx; d.inputs[1] = wfv; d.inputs[2] = bv;
            d.attrs.prune = 1;
            d.attrs.act = KERN_ACT_GELU_TANH;
            KT_OK(kern_graph_add(g, &d, &y3));
            memset(&d, 0, sizeof d);
            d.op = KERN_GRAPH_OP_QUANTIZE_PER_TOKEN;
            d.name = "xq";
            d.inputs[0] = vx;
            d.output_names[1] = "xq.scales";
            KT_OK(kern_graph_add(g, &d, q2));
        }
        kern_graph_output(g, y1);
        kern_graph_output(g, y2);
        kern_graph_output(g, y3);
        kern_graph_output(g, q2[0]);
        kern_graph_output(g, q2[1]);
        tg_roundtrip(g);
        memset(&pp, 0, sizeof pp);
        pp.bind = "M=16";
        KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
        KT_REQUIRE(p != NULL);
        {
            kern_tensor in[2];
            in[0] = tx;
            in[1] = tr;
            memset(out, 0, sizeof out);
            KT_OK(kern_graph_run(p, in, 2, out, 5));
        }
        /* direct calls */
        KT_OK(kern_qweight_pack_int8(ctx, &twq, &tsc, &qw, NULL));
        memset(&qp, 0, sizeof qp);
        qp.epilogue.bias = &tb;
        qp.epilogue.act = KERN_ACT_GELU;
        qp.epilogue.residual = &tr;
        {
            kern_tensor tw = kern_tensor_2d(want, KERN_F32, M, N);
            KT_OK(kern_qlinear(ctx, &tx, qw, &tw, &qp));
            kt_assert_bytes_equal("qlinear i8", out[0].data, want, (size_t)(4 * M * N));
            kern_qweight_free(ctx, qw);
            KT_OK(kern_qweight_pack(ctx, &twf, &qw, NULL));
            memset(&qp, 0, sizeof qp);
            qp.epilogue.bias = &tb;
            KT_OK(kern_qlinear(ctx, &tx, qw, &tw, &qp));
            kt_assert_bytes_equal("qlinear f32 weight", out[1].data, want, (size_t)(4 * M * N));
            kern_qweight_free(ctx, qw);
        }
        {
            float *pr = (float *)malloc(4 * N * K);
            kern_tensor tpr = kern_tensor_2d(pr, KERN_F32, N, K), tw = kern_tensor_2d(want, KERN_F32, M, N);
            tg_sparse24_direct(ctx, &twf, &tpr, &tx, &tb, KERN_ACT_GELU_TANH, &tw);
            kt_assert_bytes_equal("sparse24_linear", out[2].data, want, (size_t)(4 * M * N));
            free(pr);
        }
        {
            kern_tensor txq = kern_tensor_2d(xq, KERN_I8, M, K), txs = kern_tensor_2d(xs, KERN_F32, M, 1);
            KT_OK(kern_quantize_per_token(ctx, &tx, &txq, &txs, NULL));
            kt_assert_bytes_equal("quantize xq", out[3].data, xq, (size_t)(M * K));
            kt_assert_bytes_equal("quantize scales", out[4].data, xs, (size_t)(4 * M));
        }
        kern_graph_plan_free(p);
        kern_graph_destroy(g);
        free(x); free(res); free(bias); free(wf); free(sc); free(want); free(wq); free(xq); free(xs);
    }
    /* views, concat, cast, expand, softmax, reduce: against plain loops */
    {
        int64_t A = 3, Bd = 4, i, j;
        float x[12], *o;
        kern_graph_val vx, t, c, e, cs, sm, rd;
        kern_graph_attrs a;
        kern_tensor in, out[4];
        for (i = 0; i < 12; i++) x[i] = (float)i - 5.5f;
        KT_OK(kern_graph_create(NULL, &g));
        kern_graph_input_s(g, "x", KERN_F32, "[3,4]", &vx);
        a = tg_attrs();
        a.axis = 0;
        a.axis2 = 1;
        t = tg_node(g, KERN_GRAPH_OP_TRANSPOSE, "t", vx, 0, 0, &a); /* [4,3] */
        a = tg_attrs();
        a.axis = 1;
        {
            kern_graph_node_desc d;
            memset(&d, 0, sizeof d);
            d.op = KERN_GRAPH_OP_CONCAT;
            d.name = "cat";
            d.inputs[0] = t;
            d.inputs[1] = t;
            d.attrs = a;
            KT_OK(kern_graph_add(g, &d, &c)); /* [4,6] */
        }
        a = tg_attrs();
        a.dtype = KERN_BF16;
        cs = tg_node(g, KERN_GRAPH_OP_CAST, "cs", c, 0, 0, &a);
        a = tg_attrs();
        a.n_shape = 3;
        a.shape[0] = 2;
        a.shape[1] = 3;
        a.shape[2] = 4;
        {
            kern_graph_val r3;
            kern_graph_attrs a2 = tg_attrs();
            a2.n_shape = 3;
            a2.shape[0] = 1; a2.shape[1] = 3; a2.shape[2] = 4;
            r3 = tg_reshape(g, "r3", vx, 3, a2.shape);
            e = tg_node(g, KERN_GRAPH_OP_EXPAND, "ex", r3, 0, 0, &a); /* [2,3,4] */
        }
        sm = tg_node(g, KERN_GRAPH_OP_SOFTMAX, "sm", t, 0, 0, NULL);
        rd = tg_node(g, KERN_GRAPH_OP_REDUCE_SUM, "rd", t, 0, 0, NULL);
        kern_graph_output(g, cs);
        kern_graph_output(g, e);
        kern_graph_output(g, sm);
        kern_graph_output(g, rd);
        tg_roundtrip(g);
        memset(&pp, 0, sizeof pp);
        KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
        KT_REQUIRE(p != NULL);
        in = kern_tensor_2d(x, KERN_F32, A, Bd);
        memset(out, 0, sizeof out);
        KT_OK(kern_graph_run(p, &in, 1, out, 4));
        for (i = 0; i < 4; i++)
            for (j = 0; j < 6; j++) {
                uint16_t h = ((const uint16_t *)out[0].data)[i * 6 + j];
                KT_CHECK(h == kern_f32_to_bf16(x[(j % 3) * 4 + i]), "cat/cast [%d,%d]", (int)i, (int)j);
            }
        o = (float *)out[1].data;
        for (i = 0; i < 24; i++) KT_CHECK(o[i] == x[i % 12], "expand %d", (int)i);
        o = (float *)out[2].data;
        for (i = 0; i < 4; i++) {
            double m = -1e30, sum = 0;
            for (j = 0; j < 3; j++) m = x[j * 4 + i] > m ? x[j * 4 + i] : m;
            for (j = 0; j < 3; j++) sum += exp(x[j * 4 + i] - m);
            for (j = 0; j < 3; j++)
                KT_CHECK(fabs(o[i * 3 + j] - exp(x[j * 4 + i] - m) / sum) < 1e-6, "softmax [%d,%d]", (int)i, (int)j);
            KT_CHECK(fabs(((float *)out[3].data)[i] - (x[i] + x[4 + i] + x[8 + i])) < 1e-5, "reduce %d", (int)i);
        }
        kern_graph_plan_free(p);
        kern_graph_destroy(g);
    }
}

KT_MAIN()
