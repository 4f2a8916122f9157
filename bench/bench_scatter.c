/* bench_scatter.c — family `scatter`: scatter_reduce (every reduce,
 * include_self=True, the GNN form: 1-D i64 index [E] along dim 0 of
 * [*, F] f32) and gather, on
 *   random:   N = 100,000 nodes, E = 1,000,000 edges, F in {64, 128}
 *   powerlaw: N = 232,965, E = 11,461,589 (Reddit's nodes, a tenth of its
 *             edges, power-law in-degrees), F = 64.
 * Impls: kern (kern_scatter_reduce / kern_gather, 1 and 2 threads),
 *        kern_csr (kern_scatter_reduce_planned: the csr strategy with the
 *                  plan built outside the timing; shows what a reused plan
 *                  costs against the default stream strategy),
 *        naive (a serial loop over edges, 1 thread).
 * bench/peers/scatter.py adds torch (scatter_reduce with the expanded
 * index, out=), torch_index_add (sum), torch (gather with the expanded
 * index) and torch_index_select (gather).
 *
 * Bytes per call (the same for every impl; "effective" bandwidth, against
 * the DRAM peak): scatter = src E*F*4 + index E*8 + out N*F*4 (self is not
 * counted); gather = rows read E*F*4 + index E*8 + out E*F*4.
 *
 * The graph (identical in bench/peers/scatter.py, bench_spmm.c and
 * bench/peers/spmm.py): with mix() the splitmix64 finalizer and all
 * arithmetic mod 2^64,
 *   h_dst(e) = mix(12345 + 2e), h_src(e) = mix(12345 + 2e + 1)
 *   random:   node(h) = h mod N
 *   powerlaw: u = h >> 43 (21 bits), v = (((u^3) >> 31) * N) >> 32
 *             (P(v < x) = (x/N)^(1/3): node 0 gets ~1.6% of the edges),
 *             node(h) = (v * A + 12345) mod N with A = 7919 for dst and
 *             104729 for src (coprime to N: hubs spread over the ids).
 *   dst[e] = node(h_dst(e)) is the scatter index; src node (spmm's column)
 *   = node(h_src(e)).
 */
#include "kern_scatter.h"
#include "kbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int64_t g_node(uint64_t h, int64_t N, int power, uint64_t A) {
    uint64_t u, c, v;
    if (!power) return (int64_t)(h % (uint64_t)N);
    u = h >> 43;
    c = u * u * u;
    v = ((c >> 31) * (uint64_t)N) >> 32;
    return (int64_t)((v * A + 12345u) % (uint64_t)N);
}

typedef struct graph {
    const char *name;
    int64_t N, E;
    int power;
    int64_t *dst;
    void *plan_mem;
    kern_scatter_plan plan;
} graph;

static graph G[2] = {{"random", 100000, 1000000, 0, NULL, NULL, {0, 0, NULL, NULL, 0, 0}},
                     {"powerlaw", 232965, 11461589, 1, NULL, NULL, {0, 0, NULL, NULL, 0, 0}}};

static int graph_ready(graph *g) {
    int64_t e;
    if (g->dst) return 1;
    g->dst = (int64_t *)kbench_alloc((size_t)g->E * 8);
    if (!g->dst) return 0;
    for (e = 0; e < g->E; e++)
        g->dst[e] = g_node(g_mix(12345u + 2u * (uint64_t)e), g->N, g->power, 7919u);
    return 1;
}

/* per (graph, F) buffers: big [E, F] (scatter src / gather out), self and
 * out [N, F] */
typedef struct bufs {
    int g;
    int64_t F;
    float *big, *self, *out;
} bufs;
static bufs B[3] = {{0, 64, NULL, NULL, NULL}, {0, 128, NULL, NULL, NULL}, {1, 64, NULL, NULL, NULL}};

static int bufs_ready(bufs *b) {
    graph *g = &G[b->g];
    if (b->big) return 1;
    if (!graph_ready(g)) return 0;
    b->big = (float *)kbench_alloc((size_t)(g->E * b->F) * 4);
    b->self = (float *)kbench_alloc((size_t)(g->N * b->F) * 4);
    b->out = (float *)kbench_alloc((size_t)(g->N * b->F) * 4);
    if (!b->big || !b->self || !b->out) return 0;
    kbench_fill(b->big, KERN_F32, g->E * b->F, 1);
    kbench_fill(b->self, KERN_F32, g->N * b->F, 2);
    kbench_fill(b->out, KERN_F32, g->N * b->F, 3);
    return 1;
}

typedef struct scase {
    int b;          /* index into B */
    int red;        /* kern_reduce, or 0 for gather */
    int impl;       /* 0 kern, 1 kern_csr, 2 naive */
} scase;

static double case_bytes(const scase *c) {
    const bufs *b = &B[c->b];
    const graph *g = &G[b->g];
    if (c->red == 0) return (double)g->E * (double)b->F * 8.0 + (double)g->E * 8.0;
    return (double)g->E * (double)b->F * 4.0 + (double)g->E * 8.0 + (double)g->N * (double)b->F * 4.0;
}

static void naive_scatter(const graph *g, const bufs *b, kern_reduce red, int64_t *cnt) {
    const int64_t F = b->F;
    int64_t e, r, f;
    memcpy(b->out, b->self, (size_t)(g->N * F) * 4);
    if (red == KERN_REDUCE_MEAN) memset(cnt, 0, (size_t)g->N * 8);
    for (e = 0; e < g->E; e++) {
        float *o = b->out + g->dst[e] * F;
        const float *s = b->big + e * F;
        switch (red) {
        case KERN_REDUCE_SUM:
            for (f = 0; f < F; f++) o[f] += s[f];
            break;
        case KERN_REDUCE_MEAN:
            for (f = 0; f < F; f++) o[f] += s[f];
            cnt[g->dst[e]]++;
            break;
        case KERN_REDUCE_PROD:
            for (f = 0; f < F; f++) o[f] *= s[f];
            break;
        case KERN_REDUCE_AMAX:
            for (f = 0; f < F; f++)
                if (s[f] > o[f] || s[f] != s[f]) o[f] = s[f];
            break;
        default:
            for (f = 0; f < F; f++)
                if (s[f] < o[f] || s[f] != s[f]) o[f] = s[f];
            break;
        }
    }
    if (red == KERN_REDUCE_MEAN)
        for (r = 0; r < g->N; r++)
            for (f = 0; f < F; f++) b->out[r * F + f] /= (float)(cnt[r] + 1);
}

static void run(kbench_state *st, void *user) {
    const scase *c = (const scase *)user;
    bufs *b = &B[c->b];
    graph *g = &G[b->g];
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_tensor self, out, src, idx;
    if (!bufs_ready(b)) {
        kbench_skip(st, "out of memory");
        return;
    }
    self = kern_tensor_2d(b->self, KERN_F32, g->N, b->F);
    out = kern_tensor_2d(b->out, KERN_F32, g->N, b->F);
    src = kern_tensor_2d(b->big, KERN_F32, g->E, b->F);
    idx = kern_tensor_1d(g->dst, KERN_I64, g->E);
    if (c->red == 0) { /* gather: big[e] = self[dst[e]] */
        if (c->impl == 2) {
            while (kbench_next(st)) {
                int64_t e;
                for (e = 0; e < g->E; e++)
                    memcpy(b->big + e * b->F, b->self + g->dst[e] * b->F, (size_t)b->F * 4);
            }
        } else {
            while (kbench_next(st))
                if (kern_gather(ctx, &self, 0, &idx, &src) != KERN_OK) {
                    kbench_skip(st, kern_last_error());
                    return;
                }
        }
    } else if (c->impl == 2) {
        int64_t *cnt = (int64_t *)malloc((size_t)g->N * 8);
        while (kbench_next(st)) naive_scatter(g, b, (kern_reduce)c->red, cnt);
        free(cnt);
    } else if (c->impl == 1) {
        if (!g->plan_mem) {
            size_t pb = kern_scatter_plan_bytes(g->N, g->E);
            g->plan_mem = kbench_alloc(pb);
            if (!g->plan_mem ||
                kern_scatter_plan_init(ctx, &idx, g->N, g->plan_mem, pb, &g->plan) != KERN_OK) {
                kbench_skip(st, "plan failed");
                return;
            }
        }
        while (kbench_next(st))
            if (kern_scatter_reduce_planned(ctx, &g->plan, &self, &src, (kern_reduce)c->red, 1,
                                            &out, NULL, NULL) != KERN_OK) {
                kbench_skip(st, kern_last_error());
                return;
            }
    } else {
        while (kbench_next(st))
            if (kern_scatter_reduce(ctx, &self, 0, &idx, &src, (kern_reduce)c->red, 1, &out,
                                    NULL, NULL) != KERN_OK) {
                kbench_skip(st, kern_last_error());
                return;
            }
    }
    kbench_set_bytes(st, case_bytes(c));
    kbench_use(b->out);
    kbench_use(b->big);
}

KBENCH_INIT(scatter) {
    static scase cases[3 * 6 * 3];
    static const int reds[6] = {KERN_REDUCE_SUM, KERN_REDUCE_MEAN, KERN_REDUCE_AMAX,
                                KERN_REDUCE_AMIN, KERN_REDUCE_PROD, 0};
    static const char *impls[3] = {"kern", "kern_csr", "naive"};
    int n = 0, bi, ri, ii, t;
    for (bi = 0; bi < 3; bi++)
        for (ri = 0; ri < 6; ri++) {
            char name[160];
            const graph *g = &G[B[bi].g];
            snprintf(name, sizeof name, "%s/f32/%s/N%lld/E%lld/F%lld",
                     reds[ri] ? kern_reduce_name((kern_reduce)reds[ri]) : "gather", g->name,
                     (long long)g->N, (long long)g->E, (long long)B[bi].F);
            for (ii = 0; ii < 3; ii++) {
                scase *c = &cases[n++];
                if (reds[ri] == 0 && ii == 1) continue; /* no planned gather */
                c->b = bi;
                c->red = reds[ri];
                c->impl = ii;
                for (t = 1; t <= (ii == 2 ? 1 : 2); t++)
                    kbench_add("scatter", name, impls[ii], t, KBENCH_PEAK_DRAM, run, c);
            }
        }
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("scatter", "sum/f32/random/N100000/E1000000/F64");
}
