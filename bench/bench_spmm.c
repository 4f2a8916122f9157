/* bench_spmm.c — family `spmm`: kern_spmm_reduce (sum, mean, amax, amin)
 * of a CSR graph [N x N] (rows = destinations, columns = sources, i64
 * indices, f32 values) with a dense [N, F] f32, on the graphs of
 * bench_scatter.c (see its comment for the generator, shared with
 * bench/peers/spmm.py):
 *   random:   N = 100,000, nnz = 1,000,000, F in {64, 128}
 *   powerlaw: N = 232,965, nnz = 11,461,589, F = 64.
 * The CSR keeps edge order within a row (stable counting sort, duplicates
 * kept), identical to the peers' CSR.
 * Impls: kern (1 and 2 threads), naive (a serial row loop, 1 thread).
 * bench/peers/spmm.py adds torch (torch.sparse.mm(csr, x, reduce)) and
 * scipy (csr @ x, sum, single-threaded).
 *
 * Bytes per call (every impl; effective bandwidth against the DRAM peak):
 *   dense rows gathered nnz*F*4 + col and values nnz*(8+4) + rowptr
 *   (N+1)*8 + out N*F*4.
 */
#include "kern_spmm.h"
#include "kbench.h"

#include <math.h>
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
    kern_csr a;
    int ready;
} graph;
static graph G[2] = {{"random", 100000, 1000000, 0, {0, 0, 0, NULL, NULL, NULL, KERN_DTYPE_NONE, KERN_DTYPE_NONE}, 0},
                     {"powerlaw", 232965, 11461589, 1, {0, 0, 0, NULL, NULL, NULL, KERN_DTYPE_NONE, KERN_DTYPE_NONE}, 0}};

static int graph_ready(graph *g) {
    int64_t e, *row, *col;
    float *val;
    if (g->ready) return 1;
    row = (int64_t *)malloc((size_t)g->E * 8);
    col = (int64_t *)malloc((size_t)g->E * 8);
    val = (float *)kbench_alloc((size_t)g->E * 4);
    g->a.rowptr = kbench_alloc((size_t)(g->N + 1) * 8);
    g->a.col = kbench_alloc((size_t)g->E * 8);
    g->a.values = kbench_alloc((size_t)g->E * 4);
    if (!row || !col || !val || !g->a.rowptr || !g->a.col || !g->a.values) return 0;
    for (e = 0; e < g->E; e++) {
        row[e] = g_node(g_mix(12345u + 2u * (uint64_t)e), g->N, g->power, 7919u);
        col[e] = g_node(g_mix(12345u + 2u * (uint64_t)e + 1u), g->N, g->power, 104729u);
    }
    kbench_fill(val, KERN_F32, g->E, 7);
    if (kern_coo_to_csr(NULL, g->N, g->N, g->E, row, col, val, KERN_I64, KERN_F32,
                        KERN_COO_KEEP_DUPLICATES, &g->a) != KERN_OK)
        return 0;
    free(row);
    free(col);
    g->ready = 1;
    return 1;
}

typedef struct bufs {
    int g;
    int64_t F;
    float *x, *y;
} bufs;
static bufs B[3] = {{0, 64, NULL, NULL}, {0, 128, NULL, NULL}, {1, 64, NULL, NULL}};

typedef struct scase {
    int b, red, impl; /* impl 0 kern, 1 naive */
} scase;

static void naive_spmm(const kern_csr *a, const float *x, float *y, int64_t F, kern_reduce red) {
    const int64_t *rp = (const int64_t *)a->rowptr, *col = (const int64_t *)a->col;
    const float *v = (const float *)a->values;
    int64_t i, k, f;
    for (i = 0; i < a->nrows; i++) {
        float *o = y + i * F;
        float init = red == KERN_REDUCE_AMAX ? -INFINITY : red == KERN_REDUCE_AMIN ? INFINITY : 0.0f;
        for (f = 0; f < F; f++) o[f] = init;
        for (k = rp[i]; k < rp[i + 1]; k++) {
            const float *xr = x + col[k] * F;
            for (f = 0; f < F; f++) {
                float t = v[k] * xr[f];
                if (red == KERN_REDUCE_SUM || red == KERN_REDUCE_MEAN) o[f] += t;
                else if (red == KERN_REDUCE_AMAX ? (t > o[f] || t != t) : (t < o[f] || t != t)) o[f] = t;
            }
        }
        if (rp[i + 1] == rp[i])
            for (f = 0; f < F; f++) o[f] = 0;
        else if (red == KERN_REDUCE_MEAN)
            for (f = 0; f < F; f++) o[f] /= (float)(rp[i + 1] - rp[i]);
    }
}

static void run(kbench_state *st, void *user) {
    const scase *c = (const scase *)user;
    bufs *b = &B[c->b];
    graph *g = &G[b->g];
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_tensor x, y;
    if (!graph_ready(g)) {
        kbench_skip(st, "out of memory");
        return;
    }
    if (!b->x) {
        b->x = (float *)kbench_alloc((size_t)(g->N * b->F) * 4);
        b->y = (float *)kbench_alloc((size_t)(g->N * b->F) * 4);
        if (!b->x || !b->y) {
            kbench_skip(st, "out of memory");
            return;
        }
        kbench_fill(b->x, KERN_F32, g->N * b->F, 11);
        kbench_fill(b->y, KERN_F32, g->N * b->F, 12);
    }
    x = kern_tensor_2d(b->x, KERN_F32, g->N, b->F);
    y = kern_tensor_2d(b->y, KERN_F32, g->N, b->F);
    if (c->impl == 1) {
        while (kbench_next(st)) naive_spmm(&g->a, b->x, b->y, b->F, (kern_reduce)c->red);
    } else {
        while (kbench_next(st))
            if (kern_spmm_reduce(ctx, &g->a, &x, &y, (kern_reduce)c->red, NULL, NULL) != KERN_OK) {
                kbench_skip(st, kern_last_error());
                return;
            }
    }
    kbench_set_bytes(st, (double)g->E * (double)b->F * 4.0 + (double)g->E * 12.0 +
                             (double)(g->N + 1) * 8.0 + (double)g->N * (double)b->F * 4.0);
    kbench_use(b->y);
}

KBENCH_INIT(spmm) {
    static scase cases[3 * 4 * 2];
    static const int reds[4] = {KERN_REDUCE_SUM, KERN_REDUCE_MEAN, KERN_REDUCE_AMAX,
                                KERN_REDUCE_AMIN};
    int n = 0, bi, ri, ii, t;
    for (bi = 0; bi < 3; bi++)
        for (ri = 0; ri < 4; ri++) {
            char name[160];
            const graph *g = &G[B[bi].g];
            snprintf(name, sizeof name, "%s/f32/%s/N%lld/E%lld/F%lld",
                     kern_reduce_name((kern_reduce)reds[ri]), g->name, (long long)g->N,
                     (long long)g->E, (long long)B[bi].F);
            for (ii = 0; ii < 2; ii++) {
                scase *c = &cases[n++];
                c->b = bi;
                c->red = reds[ri];
                c->impl = ii;
                for (t = 1; t <= (ii ? 1 : 2); t++)
                    kbench_add("spmm", name, ii ? "naive" : "kern", t, KBENCH_PEAK_DRAM, run, c);
            }
        }
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("spmm", "sum/f32/random/N100000/E1000000/F64");
}
