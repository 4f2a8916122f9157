/* bench_llm.c — family `llm`: the decode step's memory-bound pieces.
 *
 * Cases: "gemv/<w>/M<m>/N<n>/K<k>"  y [M, N] = x [M, K] . w [N, K]^T
 *   and "gemvT/<w>/M<m>/N<n>/K<k>": the same with the weight stored as
 *   a row-major [K, N] (x @ W's layout), passed as its transposed view
 *   w    f32 | bf16 | i8 (per-output-channel f32 scales); x and y f32
 *        (bf16 weight: x bf16 too, as a bf16 model runs); i8q: an i8
 *        weight with params.x_quant (x quantized per row, int32 sums:
 *        vpdpbusd on AVX512-VNNI), M 1, 4, 8 (and i8 at M 8 beside it)
 *   Bytes per call: the weight (+ its scales), the bytes that must come
 *   from DRAM each decode step; x and y are noise at these sizes.
 *   The weight cycles through enough copies (>= 256 MiB together) that
 *   every call reads it from DRAM, not from the 32 MiB L3.
 * Impls: kern (kern_linear_gemv). The torch peer (bench/peers/llm.py)
 * times F.linear on the same shapes and copies.
 *
 * Cases: "decode/<c>/B<b>/H<h>/Hkv<hkv>/D<d>/L<len>"  one query token per
 *   sequence against a KV cache of `len` rows per sequence (Lmax = len),
 *   cache dtype c (f32 | bf16; q and out the same). Bytes: K and V of the
 *   cache (B * len * Hkv * D * 2 elements). The cache is 64+ MiB for the
 *   large cases; the small ones cycle through copies like the gemv cases.
 *   Impls: kern (kern_decode_attention on the [B, L, Hkv, D] cache),
 *   kern_sdpa (kern_sdpa with k_lens on the same cache viewed as
 *   [B, Hkv, L, D]); the torch peer runs F.scaled_dot_product_attention
 *   (enable_gqa) on [B, Hkv, L, D] tensors.
 * Peak: DRAM.
 *
 * Cases: "llama/<w>/decode/C4096" and "llama/<w>/prefill/P512"  the
 *   issue-size Llama (models/llama_graph.h: vocab 32000, hidden 2048, 16
 *   heads of 128 over 4 KV heads, SwiGLU 5632, 8 layers, random weights)
 *   through the graph executor, w = f32 | bf16 (weights, activations and
 *   caches) | i8 (the layers' projections as qlinear: int8 dynamic, the
 *   f32 weights quantized per channel at plan time; lm_head f32).
 *   decode: one token of one sequence with 4096 tokens already in the KV
 *   cache (random contents; the step writes row 4096 every time), through
 *   a plan bound at one token. Bytes: what one step must read, the weights
 *   (the embedding row, not the table) and the cache (8 layers x K and V x
 *   4096 x 4 x 128): the roofline is the DRAM peak, so the "of peak"
 *   column is the fraction of the roofline the step reaches.
 *   prefill: 512 tokens from an empty cache through a plan bound at
 *   L = 512 (weights prepacked at plan time, not timed), the logits of the
 *   last position only (as generate() computes them). Flops: 2 x the
 *   projection weights x 512, lm_head on one row, attention 4 x 16 x 128 x
 *   512^2 / 2 per layer. Peak: the dtype's compute peak.
 *   The torch peer (bench/peers/llm.py) runs Hugging Face's
 *   LlamaForCausalLM with the same config (eager; bf16 loaded as bf16;
 *   int8 = torch's quantize_dynamic) and a DynamicCache of 4096 random
 *   rows, cropped back after each step.
 */
#include "kern_llm.h"
#include "kern_sdpa.h"
#include "kern_graph.h"
#include "kbench.h"
#include "../models/llama_graph.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct gcase {
    kern_dtype wdt;
    int64_t M, N, K;
    int trans; /* the weight stored [K, N] */
    int xq;    /* params.x_quant (case "gemv/i8q/..."): x quantized per row, int32 sums */
    double bytes;
} gcase;

/* The memory cases cycle through copies of the weight / cache (>= 256 MiB
 * together) so each call reads DRAM. The copies are slices of one region
 * per dtype, filled once per process (kbench_grow): Google Benchmark calls
 * a case several times, and refilling 256 MiB each time was most of the
 * family's run time. */
#define LLM_CYCLE ((size_t)256 << 20)
static void *region[3];
static size_t region_sz[3];
static char *cycle_region(kern_dtype dt, size_t bytes) {
    int i = dt == KERN_F32 ? 0 : dt == KERN_I8 ? 2 : 1;
    return (char *)kbench_grow(&region[i], &region_sz[i], bytes, dt, 10 + (uint64_t)i);
}
static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

static void run_gemv(kbench_state *st, void *user) {
    const gcase *c = (const gcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_dtype xdt = c->wdt == KERN_BF16 ? KERN_BF16 : KERN_F32;
    size_t wbytes = round64((size_t)(c->N * c->K) * (c->wdt == KERN_I8 ? 1 : kern_dtype_size(c->wdt)));
    int copies = (int)(LLM_CYCLE / wbytes) + 1, i = 0;
    char *w = cycle_region(c->wdt, (size_t)copies * wbytes);
    void *x = kbench_alloc((size_t)(c->M * c->K) * kern_dtype_size(xdt));
    float *y = (float *)kbench_alloc((size_t)(c->M * c->N) * 4);
    float *sc = (float *)kbench_alloc((size_t)c->N * 4);
    kern_tensor xt = kern_tensor_2d(x, xdt, c->M, c->K), yt = kern_tensor_2d(y, KERN_F32, c->M, c->N);
    kern_tensor st_ = kern_tensor_1d(sc, KERN_F32, c->N), wt;
    kern_gemv_params p;
    kern_status s = KERN_OK;
    if (!w || !x || !y || !sc) {
        kbench_skip(st, "out of memory");
        return;
    }
    kbench_fill(x, xdt, c->M * c->K, 1);
    kbench_fill(sc, KERN_F32, c->N, 2);
    memset(&p, 0, sizeof p);
    if (c->wdt == KERN_I8) p.w_scale = &st_;
    p.x_quant = c->xq;
    while (kbench_next(st)) {
        if (c->trans) {
            int64_t sh[2] = {c->N, c->K}, str[2] = {1, c->N};
            kern_tensor_init_strided(&wt, w + (size_t)i * wbytes, c->wdt, 2, sh, str);
        } else {
            wt = kern_tensor_2d(w + (size_t)i * wbytes, c->wdt, c->N, c->K);
        }
        s |= kern_linear_gemv(ctx, &xt, &wt, &yt, &p);
        i = (i + 1) % copies;
    }
    kbench_use(y);
    if (s != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    kbench_set_bytes(st, c->bytes);
    kbench_set_flops(st, 2.0 * (double)(c->M * c->N * c->K));
}

typedef struct dcase {
    kern_dtype dt;
    int64_t B, H, Hkv, D, L;
    double bytes;
} dcase;

static void run_decode(kbench_state *st, void *user, int sdpa) {
    const dcase *c = (const dcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    /* an i8 cache: f32 q and out, each copy's codes followed by its
     * per-row-and-head scales [B, L, Hkv] (read every step too) */
    int q8 = c->dt == KERN_I8;
    kern_dtype qdt = q8 ? KERN_F32 : c->dt;
    size_t es = kern_dtype_size(c->dt), qes = kern_dtype_size(qdt);
    size_t cb = round64((size_t)(c->B * c->L * c->Hkv * c->D) * es);
    size_t sb = q8 ? round64((size_t)(c->B * c->L * c->Hkv) * 4) : 0, blk = 2 * (cb + sb);
    int copies = (int)(LLM_CYCLE / blk) + 1, i = 0, j;
    char *kv = cycle_region(c->dt, (size_t)copies * blk);
    void *q = kbench_alloc((size_t)(c->B * c->H * c->D) * qes), *o = kbench_alloc((size_t)(c->B * c->H * c->D) * qes);
    int64_t *lens = (int64_t *)kbench_alloc((size_t)c->B * 8);
    kern_tensor qt, ot, kt, vt, kst, vst, lt = kern_tensor_1d(lens, KERN_I64, c->B);
    kern_decode_attention_params dp;
    kern_status s = KERN_OK;
#define KC(j) (kv + (size_t)(j) * blk)
#define VC(j) (kv + (size_t)(j) * blk + cb)
#define KS(j) (kv + (size_t)(j) * blk + 2 * cb)
#define VS(j) (kv + (size_t)(j) * blk + 2 * cb + sb)
    if (!kv || !q || !o || !lens) {
        kbench_skip(st, "out of memory");
        return;
    }
    for (j = 0; j < c->B; j++) lens[j] = c->L;
    kbench_fill(q, qdt, c->B * c->H * c->D, 3);
    if (q8) {
        if (sdpa) {
            kbench_skip(st, "kern_sdpa has no int8 cache");
            return;
        }
        for (j = 0; j < copies; j++) {
            int64_t e;
            for (e = 0; e < c->B * c->L * c->Hkv; e++) {
                float f = 0.01f + 0.001f * (float)(e % 7);
                memcpy(KS(j) + 4 * e, &f, 4);
                memcpy(VS(j) + 4 * e, &f, 4);
            }
        }
    }
    memset(&dp, 0, sizeof dp);
    if (!sdpa) {
        qt = kern_tensor_4d(q, qdt, c->B, 1, c->H, c->D);
        ot = kern_tensor_4d(o, qdt, c->B, 1, c->H, c->D);
        while (kbench_next(st)) {
            kt = kern_tensor_4d(KC(i), c->dt, c->B, c->L, c->Hkv, c->D);
            vt = kern_tensor_4d(VC(i), c->dt, c->B, c->L, c->Hkv, c->D);
            if (q8) {
                kst = kern_tensor_3d(KS(i), KERN_F32, c->B, c->L, c->Hkv);
                vst = kern_tensor_3d(VS(i), KERN_F32, c->B, c->L, c->Hkv);
                dp.k_scale = &kst;
                dp.v_scale = &vst;
            }
            s |= kern_decode_attention(ctx, &qt, &kt, &vt, &lt, &ot, &dp);
            i = (i + 1) % copies;
        }
    } else {
        int64_t shp[4] = {c->B, c->Hkv, c->L, c->D};
        int64_t str[4] = {c->L * c->Hkv * c->D, c->D, c->Hkv * c->D, 1};
        kern_sdpa_params p;
        memset(&p, 0, sizeof p);
        p.enable_gqa = 1;
        p.k_lens = &lt;
        qt = kern_tensor_4d(q, c->dt, c->B, c->H, 1, c->D);
        ot = kern_tensor_4d(o, c->dt, c->B, c->H, 1, c->D);
        while (kbench_next(st)) {
            kern_tensor_init_strided(&kt, KC(i), c->dt, 4, shp, str);
            kern_tensor_init_strided(&vt, VC(i), c->dt, 4, shp, str);
            s |= kern_sdpa(ctx, &qt, &kt, &vt, &ot, &p);
            i = (i + 1) % copies;
        }
    }
#undef KC
#undef VC
#undef KS
#undef VS
    kbench_use(o);
    if (s != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    kbench_set_bytes(st, c->bytes);
    kbench_set_flops(st, 4.0 * (double)(c->B * c->H * c->L * c->D));
}
static void run_decode_kern(kbench_state *st, void *user) { run_decode(st, user, 0); }
static void run_decode_sdpa(kbench_state *st, void *user) { run_decode(st, user, 1); }

/* ------------------------------------------------------ the whole model */

#define LL_CACHE 4096
#define LL_PREFILL 512
typedef struct lcase {
    kern_dtype w; /* f32, bf16, or i8 (qlinear over f32 weights) */
    int prefill;
    int kv8;      /* int8 KV caches (llama_cfg.kv_int8) */
} lcase;

/* One model at a time (the f32 one is 2 GB): built on first use, kept while
 * the next case has the same weights, freed when it does not. */
static struct {
    kern_dtype w;
    int kv8;
    int plan_threads;
    llama_cfg c;
    kern_graph *g;
    kern_graph_plan *plan; /* bound at one token or at LL_PREFILL */
    int plan_prefill;
    void *weights, *cache;
    float *table, *scales; /* kv8: [2 * layers][max_len * kv_heads] */
    size_t cache_bytes;
} LL;

static void ll_cfg(llama_cfg *c, kern_dtype w, int kv8) {
    memset(c, 0, sizeof *c);
    c->vocab = 32000;
    c->hidden = 2048;
    c->heads = 16;
    c->kv_heads = 4;
    c->head_dim = 128;
    c->ffn = 5632;
    c->layers = 8;
    c->max_len = LL_CACHE + 64;
    c->rope_theta = 10000.0;
    c->rms_eps = 1e-6f;
    c->dtype = w == KERN_BF16 ? KERN_BF16 : KERN_F32;
    c->int8 = w == KERN_I8;
    c->kv_int8 = kv8;
    c->last_logits = 1;
}

static void ll_free(void) {
    kern_graph_plan_free(LL.plan);
    kern_graph_destroy(LL.g);
    free(LL.weights);
    free(LL.cache);
    free(LL.table);
    free(LL.scales);
    memset(&LL, 0, sizeof LL);
}

/* Builds the graph (the default allocator: not tied to a thread count)
 * and binds every weight to slices of one filled buffer. */
static const char *ll_build(kern_dtype w, int kv8) {
    kern_dtype dt;
    size_t total = 0, off = 0, es;
    int pass, i;
    ll_free();
    ll_cfg(&LL.c, w, kv8);
    dt = LL.c.dtype;
    es = kern_dtype_size(dt);
    if (kern_graph_create(NULL, &LL.g) != KERN_OK || llama_graph_build(LL.g, &LL.c) != KERN_OK ||
        llama_graph_bind_rope(NULL, LL.g, &LL.c, &LL.table) != KERN_OK)
        return kern_last_error();
    for (pass = 0; pass < 2; pass++) { /* sizes, then binding */
        for (i = 1;; i++) {
            kern_graph_val_info vi;
            kern_tensor t;
            int64_t n = 1;
            int d;
            if (kern_graph_val_get(LL.g, i, &vi) != KERN_OK) break;
            if (vi.kind != KERN_GRAPH_VAL_WEIGHT || vi.has_data) continue;
            for (d = 0; d < vi.ndim; d++) n *= vi.dims[d];
            if (pass == 0) {
                total += ((size_t)n * es + 63) & ~(size_t)63;
                continue;
            }
            kern_tensor_init(&t, (char *)LL.weights + off, dt, vi.ndim, vi.dims);
            off += ((size_t)n * es + 63) & ~(size_t)63;
            if (kern_graph_bind_weight(LL.g, vi.name, &t, KERN_GRAPH_BORROW) != KERN_OK)
                return kern_last_error();
        }
        if (pass == 0) {
            LL.weights = kbench_aligned(total);
            if (!LL.weights) return "out of memory";
            kbench_fill(LL.weights, dt, (int64_t)(total / es), 31);
        }
    }
    if (kv8) { /* i8 codes, and a scale per row and kv head */
        int64_t ns = 2 * LL.c.layers * LL.c.max_len * LL.c.kv_heads, j;
        dt = KERN_I8;
        es = 1;
        LL.scales = (float *)kbench_aligned((size_t)ns * sizeof(float));
        if (!LL.scales) return "out of memory";
        for (j = 0; j < ns; j++) LL.scales[j] = 0.01f + 0.001f * (float)(j % 7);
    }
    LL.cache_bytes = (size_t)(LL.c.max_len * LL.c.kv_heads * LL.c.head_dim) * es;
    LL.cache = kbench_aligned(LL.cache_bytes * 2 * (size_t)LL.c.layers);
    if (!LL.cache) return "out of memory";
    kbench_fill(LL.cache, dt, (int64_t)(LL.cache_bytes * 2 * (size_t)LL.c.layers / es), 32);
    LL.w = w;
    LL.kv8 = kv8;
    return NULL;
}

/* The weight bytes one decode step reads, the weights' count, the
 * prefill's flops. */
static double ll_weight_bytes(const llama_cfg *c, kern_dtype w) {
    double H = (double)c->hidden, F = (double)c->ffn, A = (double)(c->heads * c->head_dim);
    double KV = (double)(c->kv_heads * c->head_dim), V = (double)c->vocab;
    double proj = H * A * 2 + H * KV * 2 + 3 * H * F, es = w == KERN_BF16 ? 2 : 4;
    double layer = w == KERN_I8 ? proj + 4 * (A + 2 * KV + H + 2 * F + H) : proj * es;
    return (double)c->layers * (layer + 2 * H * es) + V * H * es + H * es + H * es;
}
static double ll_params(const llama_cfg *c) {
    double H = (double)c->hidden, F = (double)c->ffn, A = (double)(c->heads * c->head_dim);
    double KV = (double)(c->kv_heads * c->head_dim);
    return (double)c->layers * (H * A * 2 + H * KV * 2 + 3 * H * F) + (double)c->vocab * H;
}
static double ll_prefill_flops(const llama_cfg *c) {
    double H = (double)c->hidden, F = (double)c->ffn, A = (double)(c->heads * c->head_dim);
    double KV = (double)(c->kv_heads * c->head_dim), P = LL_PREFILL;
    double proj = H * A * 2 + H * KV * 2 + 3 * H * F;
    return (double)c->layers * (2 * proj * P + 2.0 * A * P * P) + 2 * (double)c->vocab * H;
}

static void run_llama(kbench_state *st, void *user) {
    const lcase *lc = (const lcase *)user;
    int threads = kbench_threads(st);
    kern_ctx *ctx = kbench_ctx(threads);
    int64_t L = lc->prefill ? LL_PREFILL : 1, lens = 0, i;
    int64_t *ids = (int64_t *)kbench_alloc(LL_PREFILL * sizeof(int64_t));
    kern_tensor in[2 + 4 * 8], res[3];
    void *caches[2 * 8];
    float *scales[2 * 8];
    kern_status s = KERN_OK;
    const char *why;
    int l, nin;
    if (LL.w != lc->w || LL.kv8 != lc->kv8 || !LL.g) {
        if ((why = ll_build(lc->w, lc->kv8)) != NULL) {
            ll_free();
            kbench_skip(st, why);
            return;
        }
    }
    if (!LL.plan || LL.plan_prefill != lc->prefill || LL.plan_threads != threads) {
        kern_graph_plan_params pp;
        kern_graph_plan_free(LL.plan);
        LL.plan = NULL;
        memset(&pp, 0, sizeof pp);
        pp.bind = lc->prefill ? "B=1,L=512" : "B=1,L=1";
        if (kern_graph_plan_create(LL.g, ctx, &pp, &LL.plan) != KERN_OK) {
            kbench_skip(st, kern_last_error());
            ll_free();
            return;
        }
        LL.plan_prefill = lc->prefill;
        LL.plan_threads = threads;
    }
    for (i = 0; i < L; i++) ids[i] = (i * 7919) % LL.c.vocab;
    in[0] = kern_tensor_2d(ids, KERN_I64, 1, L);
    in[1] = kern_tensor_1d(&lens, KERN_I64, 1);
    for (l = 0; l < 2 * LL.c.layers; l++) { /* slices of one buffer: layer l / 2's k or v */
        caches[l] = (char *)LL.cache + (size_t)l * LL.cache_bytes;
        scales[l] = LL.scales ? LL.scales + (size_t)l * (size_t)(LL.c.max_len * LL.c.kv_heads) : NULL;
    }
    nin = 2 + llama_graph_cache_inputs(&LL.c, 1, caches, scales, in + 2);
    while (kbench_next(st)) {
        lens = lc->prefill ? 0 : LL_CACHE;
        memset(res, 0, sizeof res);
        s |= kern_graph_run(LL.plan, in, nin, res, 3);
    }
    if (s != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    if (lc->prefill) {
        kbench_set_flops(st, ll_prefill_flops(&LL.c));
    } else {
        double kv = 2.0 * (double)(LL.c.layers * LL_CACHE * LL.c.kv_heads) *
                    (lc->kv8 ? (double)LL.c.head_dim + 4.0
                             : (double)LL.c.head_dim * (double)kern_dtype_size(LL.c.dtype));
        kbench_set_bytes(st, ll_weight_bytes(&LL.c, lc->w) + kv);
        kbench_set_flops(st, 2.0 * ll_params(&LL.c));
    }
}

KBENCH_INIT(llm) {
    static const kern_dtype wdts[3] = {KERN_F32, KERN_BF16, KERN_I8};
    static const int64_t shapes[2][2] = {{4096, 4096}, {11008, 4096}};
    static const int64_t Ms[2] = {1, 4};
    static gcase cases[2 * 3 * 2 * 2];
    int n = 0, wi, si, mi, t, tr;
    for (tr = 0; tr < 2; tr++)
    for (wi = 0; wi < 3; wi++)
        for (si = 0; si < 2; si++)
            for (mi = 0; mi < 2; mi++) {
                gcase *c = &cases[n++];
                char name[96];
                c->trans = tr;
                c->wdt = wdts[wi];
                c->M = Ms[mi];
                c->N = shapes[si][0];
                c->K = shapes[si][1];
                c->bytes = (double)(c->N * c->K) * (c->wdt == KERN_I8 ? 1.0 : (double)kern_dtype_size(c->wdt)) +
                           (c->wdt == KERN_I8 ? 4.0 * (double)c->N : 0.0);
                snprintf(name, sizeof name, "gemv%s/%s/M%lld/N%lld/K%lld", tr ? "T" : "", kern_dtype_name(c->wdt),
                         (long long)c->M, (long long)c->N, (long long)c->K);
                for (t = 1; t <= 2; t++) kbench_add("llm", name, "kern", t, KBENCH_PEAK_DRAM, run_gemv, c);
            }
    { /* i8 weights with x quantized (params.x_quant, vpdpbusd on VNNI), and
       * the plain i8 form at M = 8 beside it */
        static gcase qc[2 * 4];
        static const int64_t qM[4] = {1, 4, 8, 8};
        int q = 0, qi;
        for (si = 0; si < 2; si++)
            for (qi = 0; qi < 4; qi++) {
                gcase *c = &qc[q++];
                char name[96];
                memset(c, 0, sizeof *c);
                c->wdt = KERN_I8;
                c->xq = qi < 3;
                c->M = qM[qi];
                c->N = shapes[si][0];
                c->K = shapes[si][1];
                c->bytes = (double)(c->N * c->K) + 4.0 * (double)c->N;
                snprintf(name, sizeof name, "gemv/%s/M%lld/N%lld/K%lld", c->xq ? "i8q" : "i8", (long long)c->M,
                         (long long)c->N, (long long)c->K);
                for (t = 1; t <= 2; t++) kbench_add("llm", name, "kern", t, KBENCH_PEAK_DRAM, run_gemv, c);
            }
    }
    {
        static const kern_dtype ddts[3] = {KERN_F32, KERN_BF16, KERN_I8};
        static const int64_t dshapes[3][2] = {{1, 4096}, {1, 16384}, {4, 4096}}; /* B, L */
        static dcase dc[3 * 3];
        int di, k2 = 0;
        for (di = 0; di < 3; di++)
            for (si = 0; si < 3; si++) {
                dcase *c = &dc[k2++];
                char name[96];
                c->dt = ddts[di];
                c->B = dshapes[si][0];
                c->L = dshapes[si][1];
                c->H = 32;
                c->Hkv = 8;
                c->D = 128;
                c->bytes = 2.0 * (double)(c->B * c->L * c->Hkv) *
                           ((double)c->D * (double)kern_dtype_size(c->dt) + (c->dt == KERN_I8 ? 4.0 : 0.0));
                snprintf(name, sizeof name, "decode/%s/B%lld/H32/Hkv8/D128/L%lld", kern_dtype_name(c->dt),
                         (long long)c->B, (long long)c->L);
                for (t = 1; t <= 2; t++) {
                    kbench_add("llm", name, "kern", t, KBENCH_PEAK_DRAM, run_decode_kern, c);
                    if (c->dt != KERN_I8)
                        kbench_add("llm", name, "kern_sdpa", t, KBENCH_PEAK_DRAM, run_decode_sdpa, c);
                }
            }
    }
    {
        static const kern_dtype lws[3] = {KERN_F32, KERN_BF16, KERN_I8};
        static lcase lcs[8];
        static const kbench_peak pk[3] = {KBENCH_PEAK_F32, KBENCH_PEAK_BF16, KBENCH_PEAK_INT8};
        int li, ph;
        for (ph = 0; ph < 2; ph++)
            for (li = 0; li < 3; li++) {
                lcase *c = &lcs[ph * 3 + li];
                char name[96];
                c->w = lws[li];
                c->prefill = ph;
                if (ph) snprintf(name, sizeof name, "llama/%s/prefill/P%d", kern_dtype_name(c->w), LL_PREFILL);
                else snprintf(name, sizeof name, "llama/%s/decode/C%d", kern_dtype_name(c->w), LL_CACHE);
                for (t = 1; t <= 2; t++)
                    kbench_add("llm", name, "kern", t, ph ? pk[li] : KBENCH_PEAK_DRAM, run_llama, c);
            }
        for (li = 0; li < 2; li++) { /* decode over int8 KV caches (kern only) */
            lcase *c = &lcs[6 + li];
            char name[96];
            c->w = lws[li];
            c->kv8 = 1;
            snprintf(name, sizeof name, "llama/%s/decode-kv8/C%d", kern_dtype_name(c->w), LL_CACHE);
            for (t = 1; t <= 2; t++) kbench_add("llm", name, "kern", t, KBENCH_PEAK_DRAM, run_llama, c);
        }
    }
    kbench_headline("llm", "decode/bf16/B1/H32/Hkv8/D128/L4096");
    kbench_headline("llm", "gemv/f32/M1/N4096/K4096");
    kbench_headline("llm", "gemv/bf16/M1/N4096/K4096");
    kbench_headline("llm", "gemv/i8/M1/N4096/K4096");
}
