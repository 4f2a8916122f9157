/* llama_run.c — greedy decoding of a Hugging Face Llama-style model with
 * kern's graph (models/llama_graph.h), for models/llama.py's check.
 *
 *   build/models/llama_run WEIGHTS.safetensors CONFIG PROMPT STEPS LOGITS.f32
 *     CONFIG  vocab,hidden,heads,kv_heads,head_dim,ffn,layers,max_len,theta,eps,threads
 *     PROMPT  token ids, comma-separated (one sequence)
 *   Runs the prompt as one prefill, then STEPS - 1 decode steps (STEPS new
 *   tokens in all, each the argmax of the last logits), writes the last
 *   position's logits of every step to LOGITS.f32 (STEPS x vocab f32) and
 *   prints the new token ids and the decode tokens/s on stdout.
 *   The prefill runs through a plan bound at the prompt length (prepacked
 *   weights, kern_gemm), freed before decoding; the decode steps run
 *   through a plan bound at one token, whose linears stream the [N, K]
 *   weights with kern_linear_gemv.
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

int main(int argc, char **argv) {
    llama_cfg c;
    kern_ctx_params cp;
    kern_ctx *ctx = NULL;
    kern_safetensors *st = NULL;
    kern_graph *g = NULL;
    kern_graph_plan *plan = NULL, *dec = NULL;
    kern_graph_plan_params pp;
    float *table, **caches;
    int64_t *ids, lens = 0, P = 0, steps, s, l, V, tok = 0;
    int threads = 1;
    char bind[64];
    const char *q;
    FILE *out;
    double t0 = 0, t_dec = 0;
    kern_status err;
    if (argc != 6) {
        fprintf(stderr, "usage: %s WEIGHTS CONFIG PROMPT STEPS LOGITS.f32\n", argv[0]);
        return 2;
    }
    memset(&c, 0, sizeof c);
    if (sscanf(argv[2], "%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lf,%f,%d", (long long *)&c.vocab,
               (long long *)&c.hidden, (long long *)&c.heads, (long long *)&c.kv_heads,
               (long long *)&c.head_dim, (long long *)&c.ffn, (long long *)&c.layers,
               (long long *)&c.max_len, &c.rope_theta, &c.rms_eps, &threads) != 11) {
        fprintf(stderr, "bad CONFIG\n");
        return 2;
    }
    V = c.vocab;
    steps = atoll(argv[4]);
    ids = (int64_t *)calloc((size_t)(strlen(argv[3]) + 1), sizeof *ids);
    for (q = argv[3]; *q;) {
        ids[P++] = strtoll(q, (char **)&q, 10);
        if (*q == ',') q++;
    }
    memset(&cp, 0, sizeof cp);
    cp.n_threads = threads;
#define TRY(e)                                                                                 \
    do {                                                                                       \
        if ((err = (e)) != KERN_OK) {                                                          \
            fprintf(stderr, "%s: %s\n", #e, kern_last_error());                                \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)
    TRY(kern_ctx_create(&cp, &ctx));
    TRY(kern_safetensors_open(ctx, argv[1], NULL, &st));
    TRY(kern_graph_create(ctx, &g));
    TRY(llama_graph_build(g, &c));
    TRY(llama_graph_bind_rope(ctx, g, &c, &table));
    TRY(kern_graph_bind_safetensors(g, st, KERN_GRAPH_BORROW));
    memset(&pp, 0, sizeof pp);
    snprintf(bind, sizeof bind, "B=1,L=%lld", (long long)P);
    pp.bind = bind;
    TRY(kern_graph_plan_create(g, ctx, &pp, &plan));
    caches = (float **)malloc((size_t)(2 * c.layers) * sizeof *caches);
    for (l = 0; l < 2 * c.layers; l++)
        caches[l] = (float *)calloc((size_t)(c.max_len * c.kv_heads * c.head_dim), sizeof(float));
    out = fopen(argv[5], "wb");
    if (!out) {
        fprintf(stderr, "cannot write %s\n", argv[5]);
        return 1;
    }
    for (s = 0; s < steps; s++) {
        int64_t L = s == 0 ? P : 1, j, best = 0;
        kern_tensor in[2 + 2 * 64], res[2];
        const float *last;
        if (s == 1) {
            kern_graph_plan_free(plan); /* its prepacked copies go with it */
            plan = NULL;
            pp.bind = "B=1,L=1";
            TRY(kern_graph_plan_create(g, ctx, &pp, &dec));
            t0 = now_s();
        }
        in[0] = kern_tensor_2d(s == 0 ? ids : &tok, KERN_I64, 1, L);
        in[1] = kern_tensor_1d(&lens, KERN_I64, 1);
        for (l = 0; l < 2 * c.layers && l < 128; l++)
            in[2 + l] = kern_tensor_4d(caches[l], KERN_F32, 1, c.max_len, c.kv_heads, c.head_dim);
        memset(res, 0, sizeof res);
        TRY(kern_graph_run(s == 0 ? plan : dec, in, (int)(2 + 2 * c.layers), res, 2));
        last = (const float *)res[0].data + (L - 1) * V;
        for (j = 1; j < V; j++)
            if (last[j] > last[best]) best = j;
        fwrite(last, sizeof(float), (size_t)V, out);
        lens = ((const int64_t *)res[1].data)[0];
        tok = best;
        printf("%s%lld", s ? "," : "", (long long)best);
    }
    if (steps > 1) t_dec = now_s() - t0;
    printf("\n%.2f tokens/s decode\n", t_dec > 0 ? (double)(steps - 1) / t_dec : 0.0);
    fclose(out);
    kern_graph_plan_free(plan);
    kern_graph_plan_free(dec);
    kern_graph_destroy(g);
    kern_safetensors_free(ctx, st);
    kern_ctx_destroy(ctx);
    return 0;
}
