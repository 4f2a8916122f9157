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
 *
 * The whole encoder, the post's steps: encoder/vit-b/<step> — SAM ViT-B's
 * image encoder on one 1024 x 1024 image (models/sam.py --vit-b: HF
 * SamVisionModel's config, seeded weights), impl kern_graph: the model's IR
 * + safetensors planned once per case (transforms and prepacking outside
 * the timing), kern_graph_run timed. Steps:
 *   f32                 the f32 graph (fused rel-pos SDPA);
 *   bf16                the bf16 graph (model-bf16.kg: block linears and
 *                       attention bf16, as torch.autocast places them);
 *   int8                every block linear int8 dynamic (the plan's
 *                       quantize transform);
 *   sparse24            the MLP linears pruned 2:4 and run sparse;
 *   int8+sparse24       attention linears int8, MLP 2:4;
 *   int8+sparse24-int8  every block linear int8 and the MLP's pruned 2:4
 *                       first (qlinear prune=1: the dense int8 kernels);
 *   bf16+int8, bf16+int8+sparse24   the same on top of the bf16 graph.
 * The bf16 steps are skipped on a CPU without a native bf16 dot product
 * (AVX512-BF16 / AMX / NEON bf16): there kern's bf16 kernels convert to
 * f32 and the step would be slower than f32 by design. Peers in
 * bench/peers/sam.py: torch (HF SamVisionModel eager with its sdpa
 * attention; autocast bf16; quantize_dynamic int8) and torch_compile.
 * FLOPs (the same for every impl and step, dense-equivalent): the patch
 * embedding, each block's qkv / proj over the rows HF runs them on (the
 * padded 70 x 70 grid in windowed blocks), the two attention products, the
 * MLP, and the neck's two convolutions. The files are written by
 * `bench/.venv/bin/python models/sam.py --vit-b --export-only` (run once
 * by this file when they are missing).
 */
#include "kern.h"
#include "kbench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

/* ---------------------------------------------------- the whole encoder */

#define SAM_DIR "build/models/sam-i1024-h768-l12-w14"

typedef struct ecase {
    const char *step, *quantize, *sparsify;
    int bf16;
    char name[64];
} ecase;

#define SAM_BLOCKS "vision_encoder.layers.*"
#define SAM_ATTN "vision_encoder.layers.*.attn.*"
#define SAM_MLP "vision_encoder.layers.*.mlp.*"
static ecase ecases[] = {
    {"f32", NULL, NULL, 0, ""},
    {"bf16", NULL, NULL, 1, ""},
    {"int8", SAM_BLOCKS, NULL, 0, ""},
    {"sparse24", NULL, SAM_MLP, 0, ""},
    {"int8+sparse24", SAM_ATTN, SAM_MLP, 0, ""},
    {"int8+sparse24-int8", SAM_BLOCKS, SAM_MLP, 0, ""},
    {"bf16+int8", SAM_BLOCKS, NULL, 1, ""},
    {"bf16+int8+sparse24", SAM_ATTN, SAM_MLP, 1, ""},
};

/* ViT-B: image 1024, patch 16 (64 x 64 tokens), hidden 768, 12 heads of
 * 64, 12 blocks (global attention in 4 of them, 14 x 14 windows of the
 * padded 70 x 70 grid in the other 8), MLP 3072, neck 256. */
static double encoder_flops(void) {
    const double C = 768, I = 3072, O = 256, T = 4096, Tw = 4900, H = 12, D = 64;
    double f = 2 * T * C * C;                                   /* patch embedding */
    double win = 2 * Tw * C * 3 * C + 2 * Tw * C * C + 4 * 25 * H * 196.0 * 196.0 * D;
    double glo = 2 * T * C * 3 * C + 2 * T * C * C + 4 * H * T * T * D;
    f += 8 * win + 4 * glo + 12 * (2 * 2 * T * C * I);          /* blocks */
    f += 2 * T * C * O + 2 * T * 9 * O * O;                     /* neck */
    return f;
}

static int native_bf16(void) {
    return kern_isa_available(KERN_ISA_AVX512_BF16) || kern_isa_available(KERN_ISA_NEON_BF16);
}

static void run_encoder(kbench_state *st, void *user) {
    const ecase *c = (const ecase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    const char *stem = c->bf16 ? SAM_DIR "/model-bf16" : SAM_DIR "/model";
    char kg[256], sf[256];
    kern_graph *g = NULL;
    kern_graph_plan *p = NULL;
    kern_safetensors *w = NULL, *ist = NULL;
    kern_graph_plan_params pp;
    kern_tensor in;

    if (c->bf16 && !native_bf16()) {
        kbench_skip(st, "no native bf16 dot product on this CPU (AVX512-BF16, AMX or NEON bf16): "
                        "the bf16 steps are skipped (kern's bf16 kernels would convert to f32)");
        return;
    }
    snprintf(kg, sizeof kg, "%s.kg", stem);
    snprintf(sf, sizeof sf, "%s.safetensors", stem);
    if (access(kg, R_OK) != 0 || access(SAM_DIR "/inputs.safetensors", R_OK) != 0) {
        if (access("bench/.venv/bin/python", X_OK) != 0 ||
            system("bench/.venv/bin/python models/sam.py --vit-b --export-only >&2") != 0 ||
            access(kg, R_OK) != 0) {
            kbench_skip(st, "no " SAM_DIR " (bench/.venv/bin/python models/sam.py --vit-b --export-only)");
            return;
        }
    }
    if (kern_graph_load_ir(ctx, kg, &g) || kern_safetensors_open(ctx, sf, NULL, &w) ||
        kern_graph_bind_safetensors(g, w, KERN_GRAPH_BORROW) ||
        kern_safetensors_open(ctx, SAM_DIR "/inputs.safetensors", NULL, &ist) ||
        kern_safetensors_tensor(ist, "pixel_values", &in)) {
        kbench_skip(st, kern_last_error());
        goto done;
    }
    memset(&pp, 0, sizeof pp);
    pp.quantize = c->quantize;
    pp.sparsify = c->sparsify;
    pp.cache_size = 1;
    if (kern_graph_plan_create(g, ctx, &pp, &p)) {
        kbench_skip(st, kern_last_error());
        goto done;
    }
    kbench_time_plan(st, p, &in, 1, encoder_flops());
done:
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
    kern_safetensors_free(ctx, ist);
    kern_safetensors_free(ctx, w);
}

KBENCH_INIT(sam) {
    size_t e;
    add_case(1, 12, 64, 64, KERN_F32);  /* global attention, 64 x 64 tokens */
    add_case(25, 12, 14, 64, KERN_F32); /* 14 x 14 windows of the padded 70 x 70 grid */
    add_case(1, 12, 64, 64, KERN_BF16);
    add_case(25, 12, 14, 64, KERN_BF16);
    for (e = 0; e < sizeof ecases / sizeof ecases[0]; e++) {
        ecase *c = &ecases[e];
        int th;
        snprintf(c->name, sizeof c->name, "encoder/vit-b/%s", c->step);
        for (th = 1; th <= 2; th++)
            kbench_add("sam", c->name, "kern_graph", th, c->bf16 ? KBENCH_PEAK_BF16 : KBENCH_PEAK_F32,
                       run_encoder, c);
    }
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("sam", "relpos/f32/B1/H12/G64x64/D64");
    kbench_headline("sam", "relpos/f32/B25/H12/G14x14/D64");
}
