/* llama_bench.c — decode tokens/s of the graph Llama (models/llama_graph.h)
 * with random f32 weights, no files: a prompt of P tokens as one prefill,
 * then STEPS greedy decode steps, timed.
 *
 *   build/models/llama_bench MODE [CONFIG [P STEPS]]
 *     MODE    gemv: prefill through a plan bound at L = P (prepacked
 *             weights, kern_gemm), freed, then decode through a plan bound
 *             at L = 1 (the linears run kern_linear_gemv on the [N, K]
 *             weights); gemm: one plan bound at L = P for both (decode
 *             runs kern_gemm on the prepacked panels, the path before the
 *             GEMV route).
 *     CONFIG  vocab,hidden,heads,kv_heads,head_dim,ffn,layers,max_len,threads
 *             (default 8000,512,8,4,64,1408,4,256,1)
 *   Prints the generated ids, the weight bytes one decode step reads and
 *   the decode tokens/s (median of the per-step times, and the mean).
 */
#define KERN_IMPLEMENTATION
#include "kern.h"
#include "kern_graph.h"
#include "llama_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng_s = 0x9e3779b97f4a7c15ull;
static float rnd(void) { /* uniform in [-1, 1) */
    rng_s = rng_s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_s >> 40) / (double)(1ull << 23) - 1.0);
}

static float *wbuf(int64_t n, float scale, float offset) {
    float *p = (float *)malloc((size_t)n * sizeof(float));
    int64_t i;
    if (!p) exit(1);
    for (i = 0; i < n; i++) p[i] = offset + scale * rnd();
    return p;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define TRY(e)                                                                                 \
    do {                                                                                       \
        if ((e) != KERN_OK) {                                                                  \
            fprintf(stderr, "%s: %s\n", #e, kern_last_error());                                \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

static int bind(kern_graph *g, const char *name, float *data, int ndim, int64_t d0, int64_t d1) {
    kern_tensor t;
    int64_t shape[2];
    shape[0] = d0;
    shape[1] = d1;
    kern_tensor_init(&t, data, KERN_F32, ndim, shape);
    TRY(kern_graph_bind_weight(g, name, &t, KERN_GRAPH_BORROW));
    return 0;
}

/* One step of the model: L tokens of one sequence; *tok gets the argmax of
 * the last position's logits, *lens the new length. */
static int step(kern_graph_plan *plan, const llama_cfg *c, float **caches, const int64_t *ids,
                int64_t L, int64_t *lens, int64_t *tok) {
    kern_tensor in[2 + 2 * 64], res[2];
    const float *last;
    int64_t l, j, best = 0;
    in[0] = kern_tensor_2d((void *)(uintptr_t)ids, KERN_I64, 1, L);
    in[1] = kern_tensor_1d(lens, KERN_I64, 1);
    for (l = 0; l < 2 * c->layers; l++)
        in[2 + l] = kern_tensor_4d(caches[l], KERN_F32, 1, c->max_len, c->kv_heads, c->head_dim);
    memset(res, 0, sizeof res);
    TRY(kern_graph_run(plan, in, (int)(2 + 2 * c->layers), res, 2));
    last = (const float *)res[0].data + (L - 1) * c->vocab;
    for (j = 1; j < c->vocab; j++)
        if (last[j] > last[best]) best = j;
    *lens = ((const int64_t *)res[1].data)[0];
    *tok = best;
    return 0;
}

int main(int argc, char **argv) {
    llama_cfg c;
    kern_ctx_params cp;
    kern_ctx *ctx = NULL;
    kern_graph *g = NULL;
    kern_graph_plan *pre = NULL, *dec = NULL;
    kern_graph_plan_params pp;
    float *table, **caches, **wts;
    int64_t P = 32, steps = 64, s, l, lens = 0, tok = 0, *ids, nw = 0;
    int threads = 1, gemv;
    double *dt, wbytes, tsum = 0;
    char nm[160], bindstr[64];
    static const char *wn[9] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                                "self_attn.v_proj", "self_attn.o_proj",
                                "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                                "mlp.down_proj"};
    if (argc < 2 || (strcmp(argv[1], "gemv") && strcmp(argv[1], "gemm"))) {
        fprintf(stderr, "usage: %s gemv|gemm [CONFIG [P STEPS]]\n", argv[0]);
        return 2;
    }
    gemv = strcmp(argv[1], "gemv") == 0;
    memset(&c, 0, sizeof c);
    c.vocab = 8000;
    c.hidden = 512;
    c.heads = 8;
    c.kv_heads = 4;
    c.head_dim = 64;
    c.ffn = 1408;
    c.layers = 4;
    c.max_len = 256;
    if (argc > 2 &&
        sscanf(argv[2], "%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%d", (long long *)&c.vocab,
               (long long *)&c.hidden, (long long *)&c.heads, (long long *)&c.kv_heads,
               (long long *)&c.head_dim, (long long *)&c.ffn, (long long *)&c.layers,
               (long long *)&c.max_len, &threads) != 9) {
        fprintf(stderr, "bad CONFIG\n");
        return 2;
    }
    if (argc > 4) {
        P = atoll(argv[3]);
        steps = atoll(argv[4]);
    }
    c.rope_theta = 10000.0;
    c.rms_eps = 1e-6f;
    if (c.layers > 64 || P < 1 || steps < 1 || P + steps > c.max_len) {
        fprintf(stderr, "bad sizes\n");
        return 2;
    }
    memset(&cp, 0, sizeof cp);
    cp.n_threads = threads;
    TRY(kern_ctx_create(&cp, &ctx));
    TRY(kern_graph_create(ctx, &g));
    TRY(llama_graph_build(g, &c));
    TRY(llama_graph_bind_rope(ctx, g, &c, &table));
    wts = (float **)malloc((size_t)(9 * c.layers + 3) * sizeof *wts);
    wts[nw] = wbuf(c.vocab * c.hidden, 1.0f, 0);
    if (bind(g, "model.embed_tokens.weight", wts[nw++], 2, c.vocab, c.hidden)) return 1;
    wts[nw] = wbuf(c.vocab * c.hidden, 0.05f, 0);
    if (bind(g, "lm_head.weight", wts[nw++], 2, c.vocab, c.hidden)) return 1;
    wts[nw] = wbuf(c.hidden, 0.1f, 1.0f);
    if (bind(g, "model.norm.weight", wts[nw++], 1, c.hidden, 0)) return 1;
    wbytes = (double)(c.vocab * c.hidden) * 4;
    for (l = 0; l < c.layers; l++) {
        int j;
        for (j = 0; j < 9; j++) {
            int vec = j == 0 || j == 5;
            int64_t d0 = j == 1 ? c.heads * c.head_dim
                         : j == 2 || j == 3 ? c.kv_heads * c.head_dim
                         : j == 6 || j == 7 ? c.ffn : c.hidden;
            int64_t d1 = j == 4 ? c.heads * c.head_dim : j == 8 ? c.ffn : c.hidden;
            snprintf(nm, sizeof nm, "model.layers.%lld.%s.weight", (long long)l, wn[j]);
            wts[nw] = vec ? wbuf(d0, 0.1f, 1.0f) : wbuf(d0 * d1, 1.0f / (float)d1, 0);
            if (bind(g, nm, wts[nw++], vec ? 1 : 2, d0, d1)) return 1;
            wbytes += (double)(d0 * (vec ? 1 : d1)) * 4;
        }
    }
    caches = (float **)malloc((size_t)(2 * c.layers) * sizeof *caches);
    for (l = 0; l < 2 * c.layers; l++)
        caches[l] = (float *)calloc((size_t)(c.max_len * c.kv_heads * c.head_dim), sizeof(float));
    ids = (int64_t *)malloc((size_t)P * sizeof *ids);
    for (l = 0; l < P; l++) ids[l] = (int64_t)((l * 7919) % c.vocab);
    memset(&pp, 0, sizeof pp);
    snprintf(bindstr, sizeof bindstr, "B=1,L=%lld", (long long)P);
    pp.bind = bindstr;
    TRY(kern_graph_plan_create(g, ctx, &pp, &pre));
    if (step(pre, &c, caches, ids, P, &lens, &tok)) return 1;
    if (gemv) {
        kern_graph_plan_free(pre); /* its prepacked copies go with it */
        pre = NULL;
        pp.bind = "B=1,L=1";
        TRY(kern_graph_plan_create(g, ctx, &pp, &dec));
    } else {
        dec = pre;
    }
    printf("%lld", (long long)tok);
    dt = (double *)malloc((size_t)steps * sizeof *dt);
    for (s = 0; s < steps; s++) {
        int64_t cur = tok;
        double t0 = now_s();
        if (step(dec, &c, caches, &cur, 1, &lens, &tok)) return 1;
        dt[s] = now_s() - t0;
        tsum += dt[s];
        printf(",%lld", (long long)tok);
    }
    qsort(dt, (size_t)steps, sizeof *dt, cmp_d);
    printf("\n%s: %.1f MB of weights per decode step (embedding row aside), %d thread(s)\n",
           argv[1], (wbytes - (double)(c.vocab * c.hidden) * 4) / 1e6, threads);
    printf("%.2f tokens/s decode (median step), %.2f (mean)\n", 1.0 / dt[steps / 2],
           (double)steps / tsum);
    kern_graph_plan_free(dec);
    kern_graph_destroy(g);
    for (l = 0; l < nw; l++) free(wts[l]);
    for (l = 0; l < 2 * c.layers; l++) free(caches[l]);
    free(wts);
    free(caches);
    free(table);
    free(ids);
    free(dt);
    kern_ctx_destroy(ctx);
    return 0;
}
