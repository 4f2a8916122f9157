/* bench_sam.c — family `sam` (issue 21): SAM ViT-B's attention with the
 * decomposed relative-position bias.
 *
 * Impls on the same case:
 *   kern         kern_sdpa with rel_pos_h/rel_pos_w (the bias fused into
 *                the flash loop, never materialized);
 *   plain        kern_sdpa without the bias (the speed the fused kernel is
 *                held against: target >= 0.7 of it);
 *   materialize  the bias formed first, then kern_sdpa with it as an f32
 *                attn_mask (what HF's SamVisionSdpaAttention does): per
 *                chunk of heads, T = q Rtab^T with kern_gemm, the [L, L]
 *                bias gathered from it (threaded over rows), kern_sdpa on
 *                the chunk. Target: the fused kernel >= 3x this.
 * Peers from bench/peers/sam.py: `torch_eager` (HF SamVisionAttention's
 * matmul + einsum bias + softmax + matmul) and `torch_sdpa_mask`
 * (F.scaled_dot_product_attention with the bias as attn_mask, as HF's sdpa
 * attention), both including forming the bias.
 *
 * Cases: relpos/<dt>/B<B>/H12/G<g>x<g>/D64 — global attention at 64 x 64
 * tokens (B 1) and 14 x 14 windows (B 25: the padded 70 x 70 grid). FLOPs
 * 4 B H L^2 D for every impl (the bias is not counted).
 */
#include "kern_gemm.h"
#include "kern_sdpa.h"
#include "kbench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct mcase {
    int64_t B, H, g, D; /* g x g grid, L = g * g */
    kern_dtype dt;
    char name[80];
} mcase;

#define NCASES 8
static mcase cases[NCASES];
static int ncases;

enum { BQ, BK, BV, BO, BRH, BRW, BT, BBIAS, NBUF };
static void *buf[NBUF];
static size_t bufsz[NBUF];
static void *getbuf(int i, size_t bytes, kern_dtype fill) {
    return kbench_grow(&buf[i], &bufsz[i], bytes, fill, 2000 + (uint64_t)i);
}

typedef struct tens {
    kern_tensor q, k, v, o, rh, rw;
} tens;

static int setup(const mcase *c, tens *t) {
    int64_t L = c->g * c->g, n = c->B * c->H * L * c->D, nr = (2 * c->g - 1) * c->D;
    size_t es = kern_dtype_size(c->dt);
    void *q = getbuf(BQ, (size_t)n * es, c->dt), *k = getbuf(BK, (size_t)n * es, c->dt);
    void *v = getbuf(BV, (size_t)n * es, c->dt), *o = getbuf(BO, (size_t)n * es, c->dt);
    void *rh = getbuf(BRH, (size_t)nr * 4, KERN_F32), *rw = getbuf(BRW, (size_t)nr * 4, KERN_F32);
    if (!q || !k || !v || !o || !rh || !rw) return 0;
    t->q = kern_tensor_4d(q, c->dt, c->B, c->H, L, c->D);
    t->k = kern_tensor_4d(k, c->dt, c->B, c->H, L, c->D);
    t->v = kern_tensor_4d(v, c->dt, c->B, c->H, L, c->D);
    t->o = kern_tensor_4d(o, c->dt, c->B, c->H, L, c->D);
    t->rh = kern_tensor_2d(rh, KERN_F32, 2 * c->g - 1, c->D);
    t->rw = kern_tensor_2d(rw, KERN_F32, 2 * c->g - 1, c->D);
    return 1;
}

static void set_work(kbench_state *st, const mcase *c) {
    double L = (double)(c->g * c->g);
    kbench_set_flops(st, 4.0 * (double)c->B * (double)c->H * L * L * (double)c->D);
}

static kern_sdpa_params rel_params(const mcase *c, tens *t) {
    kern_sdpa_params p;
    memset(&p, 0, sizeof p);
    p.rel_pos_h = &t->rh;
    p.rel_pos_w = &t->rw;
    p.rel_q_h = p.rel_q_w = p.rel_k_h = p.rel_k_w = c->g;
    return p;
}

static void run_fused(kbench_state *st, void *user) {
    const mcase *c = (const mcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_sdpa_params p;
    tens t;
    if (!setup(c, &t)) {
        kbench_skip(st, "out of memory");
        return;
    }
    p = rel_params(c, &t);
    if (kern_sdpa(ctx, &t.q, &t.k, &t.v, &t.o, &p) != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    while (kbench_next(st)) kern_sdpa(ctx, &t.q, &t.k, &t.v, &t.o, &p);
    kbench_use(t.o.data);
    set_work(st, c);
}

static void run_plain(kbench_state *st, void *user) {
    const mcase *c = (const mcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    tens t;
    if (!setup(c, &t)) {
        kbench_skip(st, "out of memory");
        return;
    }
    while (kbench_next(st)) kern_sdpa(ctx, &t.q, &t.k, &t.v, &t.o, NULL);
    kbench_use(t.o.data);
    set_work(st, c);
}

/* The materialized bias of nh consecutive (b, h) pairs: bias[x][i][j] =
 * T[x][i][hi - hj + g - 1] + T[x][i][g2 + wi - wj + g - 1], where T[x][i]
 * holds q_i . Rh rows (first g2 = 2g - 1 columns) then q_i . Rw rows. */
typedef struct gat {
    const float *T;
    float *bias;
    int64_t g, L;
} gat;

static void gather_rows(void *arg, int64_t r, int thread) {
    const gat *a = (const gat *)arg;
    int64_t g = a->g, g2 = 2 * g - 1, L = a->L, x = r / L, i = r % L, hi = i / g, wi = i % g;
    const float *t = a->T + r * 2 * g2;
    float *b = a->bias + (x * L + i) * L, rw[256];
    int64_t hj, wj;
    (void)thread;
    for (wj = 0; wj < g; wj++) rw[wj] = t[g2 + wi - wj + g - 1];
    for (hj = 0; hj < g; hj++) {
        float rh = t[hi - hj + g - 1];
        float *br = b + hj * g;
        for (wj = 0; wj < g; wj++) br[wj] = rh + rw[wj];
    }
}

static void materialize_pass(kern_ctx *ctx, const mcase *c, tens *tp, const float *tab, float *T,
                             float *bias, int64_t chunk);

static void run_materialize(kbench_state *st, void *user) {
    const mcase *c = (const mcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    int64_t L = c->g * c->g, BH = c->B * c->H, g2 = 2 * c->g - 1, chunk;
    float *T, *bias, *tab;
    tens t;
    if (c->dt != KERN_F32 || c->g > 256) {
        kbench_skip(st, "materialize: f32 cases with grids up to 256 only");
        return;
    }
    if (!setup(c, &t)) {
        kbench_skip(st, "out of memory");
        return;
    }
    /* chunks of (b, h) pairs with at most 128 MiB of bias */
    chunk = (int64_t)(((size_t)128 << 20) / ((size_t)(L * L) * 4));
    if (chunk < 1) chunk = 1;
    if (chunk > BH) chunk = BH;
    T = (float *)getbuf(BT, (size_t)(chunk * L * 2 * g2) * 4, KERN_DTYPE_NONE);
    bias = (float *)getbuf(BBIAS, (size_t)(chunk * L * L) * 4, KERN_DTYPE_NONE);
    tab = (float *)kbench_alloc((size_t)(2 * g2 * c->D) * 4);
    if (!T || !bias || !tab) {
        kbench_skip(st, "out of memory");
        return;
    }
    memcpy(tab, t.rh.data, (size_t)(g2 * c->D) * 4);
    memcpy(tab + g2 * c->D, t.rw.data, (size_t)(g2 * c->D) * 4);
    /* first pass untimed: the result must agree with the fused kernel's */
    {
        kern_sdpa_params p = rel_params(c, &t);
        size_t n = (size_t)(BH * L * c->D);
        float *ref = (float *)kbench_alloc(n * 4), worst = 0.0f;
        size_t e;
        kern_sdpa(ctx, &t.q, &t.k, &t.v, &t.o, &p);
        memcpy(ref, t.o.data, n * 4);
        materialize_pass(ctx, c, &t, tab, T, bias, chunk);
        for (e = 0; e < n; e++) {
            float d = fabsf(ref[e] - ((const float *)t.o.data)[e]);
            if (!(d <= worst)) worst = d;
        }
        if (!(worst < 1e-4f)) {
            kbench_skip(st, "materialize: result differs from the fused kernel's");
            return;
        }
    }
    while (kbench_next(st)) materialize_pass(ctx, c, &t, tab, T, bias, chunk);
    kbench_use(t.o.data);
    set_work(st, c);
}

/* One materialize-then-SDPA forward over all (b, h) pairs, chunk at a time. */
static void materialize_pass(kern_ctx *ctx, const mcase *c, tens *tp, const float *tab, float *T,
                             float *bias, int64_t chunk) {
    int64_t L = c->g * c->g, BH = c->B * c->H, g2 = 2 * c->g - 1, x0;
    size_t es = kern_dtype_size(c->dt);
    tens t = *tp;
    {
        for (x0 = 0; x0 < BH; x0 += chunk) {
            int64_t nh = BH - x0 < chunk ? BH - x0 : chunk;
            size_t off = (size_t)(x0 * L * c->D) * es;
            kern_tensor tq = kern_tensor_2d((char *)t.q.data + off, c->dt, nh * L, c->D);
            kern_tensor tt = kern_tensor_2d((float *)tab, KERN_F32, 2 * g2, c->D);
            kern_tensor tT = kern_tensor_2d(T, KERN_F32, nh * L, 2 * g2);
            kern_tensor q4 = kern_tensor_4d((char *)t.q.data + off, c->dt, 1, nh, L, c->D);
            kern_tensor k4 = kern_tensor_4d((char *)t.k.data + off, c->dt, 1, nh, L, c->D);
            kern_tensor v4 = kern_tensor_4d((char *)t.v.data + off, c->dt, 1, nh, L, c->D);
            kern_tensor o4 = kern_tensor_4d((char *)t.o.data + off, c->dt, 1, nh, L, c->D);
            kern_tensor m4 = kern_tensor_4d(bias, KERN_F32, 1, nh, L, L);
            kern_gemm_params gp;
            kern_sdpa_params p;
            gat a;
            memset(&gp, 0, sizeof gp);
            gp.trans_b = 1;
            kern_gemm(ctx, &tq, &tt, &tT, &gp);
            a.T = T;
            a.bias = bias;
            a.g = c->g;
            a.L = L;
            kern_parallel_for(ctx, nh * L, gather_rows, &a);
            memset(&p, 0, sizeof p);
            p.attn_mask = &m4;
            kern_sdpa(ctx, &q4, &k4, &v4, &o4, &p);
        }
    }
}

static void add_case(int64_t B, int64_t H, int64_t g, int64_t D, kern_dtype dt) {
    mcase *c;
    int th;
    if (ncases >= NCASES) return;
    c = &cases[ncases++];
    c->B = B; c->H = H; c->g = g; c->D = D; c->dt = dt;
    snprintf(c->name, sizeof c->name, "relpos/%s/B%lld/H%lld/G%lldx%lld/D%lld",
             kern_dtype_name(dt), (long long)B, (long long)H, (long long)g, (long long)g,
             (long long)D);
    for (th = 1; th <= 2; th++) {
        kbench_peak pk = dt == KERN_BF16 ? KBENCH_PEAK_BF16 : KBENCH_PEAK_F32;
        kbench_add("sam", c->name, "kern", th, pk, run_fused, c);
        kbench_add("sam", c->name, "plain", th, pk, run_plain, c);
        kbench_add("sam", c->name, "materialize", th, pk, run_materialize, c);
    }
}

KBENCH_INIT(sam) {
    add_case(1, 12, 64, 64, KERN_F32);  /* global attention, 64 x 64 tokens */
    add_case(25, 12, 14, 64, KERN_F32); /* 14 x 14 windows of the padded 70 x 70 grid */
    add_case(1, 12, 64, 64, KERN_BF16);
    add_case(25, 12, 14, 64, KERN_BF16);
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("sam", "relpos/f32/B1/H12/G64x64/D64");
    kbench_headline("sam", "relpos/f32/B25/H12/G14x14/D64");
}
