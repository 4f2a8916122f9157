/* bench_graph.c — family `graph`: what the executor itself costs.
 *
 * Cases
 *   dispatch/chain10000/<mode>   a chain of 10,000 executor-owned nodes,
 *       y_i = y_{i-1} + c on 16-element f32 tensors (c a scalar constant),
 *       run from a plan. Time per node = run time / 10,000; c_loop is the
 *       same 160,000 adds in a plain loop (the compute alone).
 *       mode inline: default plan (tiny nodes run on the calling thread);
 *       mode split:  parallel_min < 0, every node split over the threads
 *                    inside one parallel region (synchronization per node).
 *     impls: kern_graph; kern_public (the same chain as 10,000 calls of the
 *       public kern_add, which validates and takes the context lock on
 *       every call: the cost the executor avoids); c_loop (the adds in a
 *       plain loop: the compute alone).
 *   plan/bert-base/B8-L128   building the 12-layer BERT-base graph (hidden
 *       768, 12 heads, 3072, vocab 30522) and planning it: shape inference,
 *       passes, memory plan, first binding. Counters build_us and plan_us
 *       (prepacking excluded: plan time minus the weight preparation the
 *       plan reports), both in thread CPU time; the iteration time
 *       includes prepacking.
 *   plan/bert-base/B8-L128/no-qkv   the same with the Q/K/V merge off:
 *       that pass concatenates 12 x 7 MiB of weights (weight preparation,
 *       excluded from plan_us), which leaves the caches cold for the rest
 *       of the plan and, through the allocator, the next iteration's
 *       pages fresh. This case shows the planning work without that
 *       traffic (one pass fewer, the same graph otherwise).
 *   replan/bert-base/L<n>        a shape change within the bound: the binding
 *       for a new sequence length is resolved (every tensor and step of the
 *       plan), which kern_graph_run does on a cache miss. Counter
 *       us_per_rebind.
 * All are latency cases (no peak). Weights are zeros borrowed from one
 * buffer: timings of planning do not depend on their values.
 */
#define KERN_IMPLEMENTATION
#include "kern.h"
#include "kbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAIN 10000

/* ------------------------------------------------------------ dispatch */

typedef struct dcase {
    int split;
} dcase;

static kern_graph *chain_graph(kern_ctx *ctx) {
    kern_graph *g;
    kern_graph_val x, c, y;
    char nm[32];
    int i;
    if (kern_graph_create(ctx, &g)) return NULL;
    kern_graph_input_s(g, "x", KERN_F32, "[16]", &x);
    kern_graph_scalar(g, "c", KERN_F32, 1e-3, &c);
    y = x;
    for (i = 0; i < CHAIN; i++) {
        snprintf(nm, sizeof nm, "n%d", i);
        if (kern_graph_binary(g, KERN_GRAPH_OP_ADD, nm, y, c, &y)) return NULL;
    }
    kern_graph_output(g, y);
    return g;
}

static void run_chain_graph(kbench_state *st, void *user) {
    const dcase *dc = (const dcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_graph *g = chain_graph(ctx);
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    float x[16] = {1}, y[16] = {0};
    kern_tensor in = kern_tensor_1d(x, KERN_F32, 16), out = kern_tensor_1d(y, KERN_F32, 16);
    memset(&pp, 0, sizeof pp);
    pp.parallel_min = dc->split ? -1 : 0;
    pp.cache_size = 1;
    if (!g || kern_graph_plan_create(g, ctx, &pp, &p)) {
        kbench_skip(st, kern_last_error());
        kern_graph_destroy(g);
        return;
    }
    kern_graph_run(p, &in, 1, &out, 1);
    while (kbench_next(st)) kern_graph_run(p, &in, 1, &out, 1);
    kbench_use(y);
    kbench_counter(st, "nodes", CHAIN);
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
}

static void run_chain_public(kbench_state *st, void *user) {
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    float v[32] = {1};
    kern_tensor a = kern_tensor_1d(&v[0], KERN_F32, 16), c = kern_tensor_1d(&v[16], KERN_F32, 16);
    int i;
    (void)user;
    while (kbench_next(st))
        for (i = 0; i < CHAIN; i++) kern_add(ctx, &a, &c, &a);
    kbench_use(v);
    kbench_counter(st, "nodes", CHAIN);
}

static void run_chain_c(kbench_state *st, void *user) {
    volatile float c = 1e-3f;
    float y[16] = {1};
    int i, j;
    (void)user;
    while (kbench_next(st)) {
        float cc = c;
        for (i = 0; i < CHAIN; i++) {
            for (j = 0; j < 16; j++) y[j] = y[j] + cc;
            __asm__ volatile("" : : "r"(y) : "memory"); /* one pass per node, not folded */
        }
    }
    kbench_use(y);
    kbench_counter(st, "nodes", CHAIN);
}

/* ------------------------------------------------------------ BERT-base */

static void *zeros;
static size_t zeros_bytes;

static kern_graph_val bw(kern_graph *g, const char *name, int64_t a, int64_t b) {
    kern_tensor t;
    kern_graph_val v = 0;
    int64_t sh[2];
    sh[0] = a;
    sh[1] = b;
    kern_tensor_init(&t, zeros, KERN_F32, b ? 2 : 1, sh);
    kern_graph_weight(g, name, &t, KERN_GRAPH_BORROW, &v);
    return v;
}

static kern_graph_val node(kern_graph *g, kern_graph_op op, const char *name, kern_graph_val a,
                           kern_graph_val b, const kern_graph_attrs *at) {
    kern_graph_node_desc d;
    kern_graph_val o = 0;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.name = name;
    d.inputs[0] = a;
    d.inputs[1] = b;
    if (at) d.attrs = *at;
    kern_graph_add(g, &d, &o);
    return o;
}

/* BERT-base as Hugging Face computes it (bias adds, GELU and residual adds
 * as separate nodes, Q/K/V as three linears; the passes fuse them). */
/* Names formatted once (the timed build measures the library, not
 * snprintf): name(k) for k counting the calls in a fixed build order. */
static char names[2048][80];
static int n_names, names_ready, name_pos;
static const char *nm_fmt(const char *fmt, int l, const char *x) {
    if (!names_ready) {
        snprintf(names[n_names], sizeof names[0], fmt, l, x);
        return names[n_names++];
    }
    return names[name_pos++];
}

static kern_graph *bert_base(kern_ctx *ctx) {
    const int64_t H = 768, NH = 12, I = 3072, V = 30522, P = 512;
    kern_graph *g;
    kern_graph_val ids, tt, mask, e, h;
    int64_t B, L, sh4[4], sh3[3];
    kern_graph_attrs a;
    const char *n1, *n2;
    int l;
    if (kern_graph_create(ctx, &g)) return NULL;
    kern_graph_input_s(g, "input_ids", KERN_I64, "[B,L]", &ids);
    kern_graph_input_s(g, "token_type_ids", KERN_I64, "[B,L]", &tt);
    kern_graph_input_s(g, "attention_mask", KERN_F32, "[B,1,1,L]", &mask);
    kern_graph_dim(g, "B", &B);
    kern_graph_dim(g, "L", &L);
    e = node(g, KERN_GRAPH_OP_EMBEDDING, "emb.word", ids, bw(g, "embeddings.word_embeddings.weight", V, H), NULL);
    memset(&a, 0, sizeof a);
    a.length = L;
    {
        kern_graph_val pos = node(g, KERN_GRAPH_OP_SLICE, "emb.pos",
                                  bw(g, "embeddings.position_embeddings.weight", P, H), 0, &a);
        kern_graph_val te = node(g, KERN_GRAPH_OP_EMBEDDING, "emb.type", tt,
                                 bw(g, "embeddings.token_type_embeddings.weight", 2, H), NULL);
        e = node(g, KERN_GRAPH_OP_ADD, "emb.sum1", e, pos, NULL);
        e = node(g, KERN_GRAPH_OP_ADD, "emb.sum2", e, te, NULL);
    }
    memset(&a, 0, sizeof a);
    a.eps_set = 1;
    a.eps = 1e-12f;
    {
        kern_graph_node_desc d;
        memset(&d, 0, sizeof d);
        d.op = KERN_GRAPH_OP_LAYER_NORM;
        d.name = "emb.ln";
        d.inputs[0] = e;
        d.inputs[1] = bw(g, "embeddings.LayerNorm.weight", H, 0);
        d.inputs[2] = bw(g, "embeddings.LayerNorm.bias", H, 0);
        d.attrs = a;
        kern_graph_add(g, &d, &h);
    }
    sh4[0] = B; sh4[1] = L; sh4[2] = NH; sh4[3] = H / NH;
    sh3[0] = B; sh3[1] = L; sh3[2] = H;
    for (l = 0; l < 12; l++) {
        const char *qkv[3] = {"query", "key", "value"};
        kern_graph_val heads[3], o, h1, it, ctxv;
        int j;
        for (j = 0; j < 3; j++) {
            kern_graph_val y;
            kern_graph_attrs ra;
            n1 = nm_fmt("encoder.layer.%d.attention.self.%s.weight", l, qkv[j]);
            n2 = nm_fmt("encoder.layer.%d.attention.self.%s.bias", l, qkv[j]);
            {
                kern_graph_val wv = bw(g, n1, H, H), bv = bw(g, n2, H, 0);
                n1 = nm_fmt("l%d.%s", l, qkv[j]);
                kern_graph_linear(g, n1, h, wv, bv, KERN_ACT_NONE, &y);
            }
            memset(&ra, 0, sizeof ra);
            ra.n_shape = 4;
            memcpy(ra.shape, sh4, sizeof sh4);
            n1 = nm_fmt("l%d.%s.4d", l, qkv[j]);
            y = node(g, KERN_GRAPH_OP_RESHAPE, n1, y, 0, &ra);
            memset(&ra, 0, sizeof ra);
            ra.n_perm = 4;
            ra.perm[0] = 0; ra.perm[1] = 2; ra.perm[2] = 1; ra.perm[3] = 3;
            n1 = nm_fmt("l%d.%s.heads", l, qkv[j]);
            heads[j] = node(g, KERN_GRAPH_OP_PERMUTE, n1, y, 0, &ra);
        }
        {
            kern_graph_node_desc d;
            kern_graph_attrs ra;
            memset(&d, 0, sizeof d);
            n1 = nm_fmt("l%d.attn", l, "");
            d.op = KERN_GRAPH_OP_SDPA;
            d.name = n1;
            d.inputs[0] = heads[0];
            d.inputs[1] = heads[1];
            d.inputs[2] = heads[2];
            d.inputs[3] = mask;
            kern_graph_add(g, &d, &ctxv);
            memset(&ra, 0, sizeof ra);
            ra.n_perm = 4;
            ra.perm[0] = 0; ra.perm[1] = 2; ra.perm[2] = 1; ra.perm[3] = 3;
            n1 = nm_fmt("l%d.attn.t", l, "");
            ctxv = node(g, KERN_GRAPH_OP_PERMUTE, n1, ctxv, 0, &ra);
            memset(&ra, 0, sizeof ra);
            ra.n_shape = 3;
            memcpy(ra.shape, sh3, sizeof sh3);
            n1 = nm_fmt("l%d.attn.flat", l, "");
            ctxv = node(g, KERN_GRAPH_OP_RESHAPE, n1, ctxv, 0, &ra);
        }
        n1 = nm_fmt("encoder.layer.%d.attention.output.dense.weight", l, "");
        n2 = nm_fmt("encoder.layer.%d.attention.output.dense.bias", l, "");
        {
            kern_graph_val wv = bw(g, n1, H, H), bv = bw(g, n2, H, 0);
            n1 = nm_fmt("l%d.attn.out", l, "");
            kern_graph_linear(g, n1, ctxv, wv, 0, KERN_ACT_NONE, &o);
            n1 = nm_fmt("l%d.attn.bias", l, "");
            o = node(g, KERN_GRAPH_OP_ADD, n1, o, bv, NULL);
            n1 = nm_fmt("l%d.attn.res", l, "");
            o = node(g, KERN_GRAPH_OP_ADD, n1, o, h, NULL);
        }
        {
            kern_graph_node_desc d;
            memset(&d, 0, sizeof d);
            n1 = nm_fmt("encoder.layer.%d.attention.output.LayerNorm.weight", l, "");
            n2 = nm_fmt("encoder.layer.%d.attention.output.LayerNorm.bias", l, "");
            d.inputs[1] = bw(g, n1, H, 0);
            d.inputs[2] = bw(g, n2, H, 0);
            n1 = nm_fmt("l%d.ln1", l, "");
            d.op = KERN_GRAPH_OP_LAYER_NORM;
            d.name = n1;
            d.inputs[0] = o;
            d.attrs = a;
            kern_graph_add(g, &d, &h1);
        }
        n1 = nm_fmt("encoder.layer.%d.intermediate.dense.weight", l, "");
        n2 = nm_fmt("encoder.layer.%d.intermediate.dense.bias", l, "");
        {
            kern_graph_val wv = bw(g, n1, I, H), bv = bw(g, n2, I, 0);
            n1 = nm_fmt("l%d.inter", l, "");
            kern_graph_linear(g, n1, h1, wv, bv, KERN_ACT_NONE, &it);
            n1 = nm_fmt("l%d.gelu", l, "");
            it = node(g, KERN_GRAPH_OP_GELU, n1, it, 0, NULL);
        }
        n1 = nm_fmt("encoder.layer.%d.output.dense.weight", l, "");
        n2 = nm_fmt("encoder.layer.%d.output.dense.bias", l, "");
        {
            kern_graph_val wv = bw(g, n1, H, I), bv = bw(g, n2, H, 0);
            n1 = nm_fmt("l%d.out", l, "");
            kern_graph_linear(g, n1, it, wv, bv, KERN_ACT_NONE, &o);
            n1 = nm_fmt("l%d.out.res", l, "");
            o = node(g, KERN_GRAPH_OP_ADD, n1, o, h1, NULL);
        }
        {
            kern_graph_node_desc d;
            memset(&d, 0, sizeof d);
            n1 = nm_fmt("encoder.layer.%d.output.LayerNorm.weight", l, "");
            n2 = nm_fmt("encoder.layer.%d.output.LayerNorm.bias", l, "");
            d.inputs[1] = bw(g, n1, H, 0);
            d.inputs[2] = bw(g, n2, H, 0);
            n1 = nm_fmt("l%d.ln2", l, "");
            d.op = KERN_GRAPH_OP_LAYER_NORM;
            d.name = n1;
            d.inputs[0] = o;
            d.attrs = a;
            kern_graph_add(g, &d, &h);
        }
    }
    kern_graph_output(g, h);
    names_ready = 1;
    name_pos = 0;
    return g;
}

static void need_zeros(void) {
    if (!zeros) {
        zeros_bytes = (size_t)30522 * 768 * 4;
        zeros = calloc(1, zeros_bytes);
    }
}

/* Thread CPU time: planning is single-threaded work, and the shared
 * machine's load would otherwise add other processes' time slices. */
static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run_plan(kbench_state *st, void *user) {
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    double build = 0, plan = 0;
    int64_t n = 0;
    unsigned disable = user ? *(const unsigned *)user : 0;
    need_zeros();
    while (kbench_next(st)) {
        kern_graph_plan *p = NULL;
        kern_graph_plan_params pp;
        kern_graph_plan_stats s;
        double t0, t1;
        kern_graph *g;
        memset(&s, 0, sizeof s);
        if (!names_ready) kern_graph_destroy(bert_base(ctx)); /* formats the names */
        t0 = wall();
        g = bert_base(ctx);
        t1 = wall();
        memset(&pp, 0, sizeof pp);
        pp.bind = "B=8,L=128";
        pp.disable = KERN_GRAPH_PASS_PREPACK | disable;
        pp.external_arena = 1; /* the arena is the caller's: no allocation to time */
        if (!g || kern_graph_plan_create(g, ctx, &pp, &p)) {
            kbench_skip(st, kern_last_error());
            kern_graph_destroy(g);
            return;
        }
        kern_graph_plan_stats_get(p, &s);
        build += t1 - t0;
        plan += (wall() - t1) - s.prepack_cpu_seconds;
        n++;
        kbench_pause(st);
        kern_graph_plan_free(p);
        kern_graph_destroy(g);
        kbench_resume(st);
    }
    if (n) {
        kbench_counter(st, "build_us", build / (double)n * 1e6);
        kbench_counter(st, "plan_us", plan / (double)n * 1e6);
        kbench_counter(st, "build_plan_us", (build + plan) / (double)n * 1e6);
    }
}

typedef struct rcase {
    int64_t L;
} rcase;

static void run_rebind(kbench_state *st, void *user) {
    const rcase *rc = (const rcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_graph *g;
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    int64_t sv[KERN_GRAPH_MAX_SYMBOLS], n = 0;
    double t = 0;
    need_zeros();
    g = bert_base(ctx);
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=8,L=512";
    pp.disable = KERN_GRAPH_PASS_PREPACK;
    pp.external_arena = 1;
    pp.cache_size = 1;
    if (!g || kern_graph_plan_create(g, ctx, &pp, &p)) {
        kbench_skip(st, kern_last_error());
        kern_graph_destroy(g);
        return;
    }
    memset(sv, 0, sizeof sv);
    sv[0] = 8;
    while (kbench_next(st)) {
        kern__ginst *I;
        double t0 = wall();
        /* alternate two lengths so every call misses the 1-slot cache */
        sv[1] = (n & 1) ? rc->L : rc->L - 1;
        kern__gp_inst(p, sv, &I);
        t += wall() - t0;
        n++;
    }
    if (n) kbench_counter(st, "us_per_rebind", t / (double)n * 1e6);
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
}

KBENCH_INIT(graph) {
    static dcase inl = {0}, split = {1};
    static rcase r128 = {128}, r512 = {512};
    static unsigned no_qkv = KERN_GRAPH_PASS_QKV;
    int t;
    for (t = 1; t <= 2; t++) {
        kbench_add("graph", "dispatch/chain10000/inline", "kern_graph", t, KBENCH_PEAK_LATENCY,
                   run_chain_graph, &inl);
        if (t == 2)
            kbench_add("graph", "dispatch/chain10000/split", "kern_graph", t, KBENCH_PEAK_LATENCY,
                       run_chain_graph, &split);
        kbench_add("graph", "dispatch/chain10000/inline", "kern_public", t, KBENCH_PEAK_LATENCY,
                   run_chain_public, NULL);
        kbench_add("graph", "dispatch/chain10000/inline", "c_loop", t, KBENCH_PEAK_LATENCY,
                   run_chain_c, NULL);
    }
    kbench_add("graph", "plan/bert-base/B8-L128", "kern_graph", 1, KBENCH_PEAK_LATENCY, run_plan, NULL);
    kbench_add("graph", "plan/bert-base/B8-L128/no-qkv", "kern_graph", 1, KBENCH_PEAK_LATENCY, run_plan,
               &no_qkv);
    kbench_add("graph", "replan/bert-base/L128", "kern_graph", 1, KBENCH_PEAK_LATENCY, run_rebind, &r128);
    kbench_add("graph", "replan/bert-base/L512", "kern_graph", 1, KBENCH_PEAK_LATENCY, run_rebind, &r512);
}
