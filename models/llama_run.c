/* llama_run.c — greedy decoding of a Hugging Face Llama-style model with
 * kern's graph (models/llama_graph.h), for models/llama.py's check, and the
 * exporter of that graph for examples/llama_generate.c.
 *
 *   build/models/llama_run WEIGHTS.safetensors CONFIG PROMPT STEPS LOGITS.f32 [FORCE]
 *     CONFIG  vocab,hidden,heads,kv_heads,head_dim,ffn,layers,max_len,theta,eps,threads[,DTYPE]
 *     DTYPE   f32 (default), bf16 (WEIGHTS in bf16; activations and caches
 *             bf16) or int8 (WEIGHTS in f32; the projections as qlinear),
 *             each optionally followed by +kv8: int8 KV caches with a
 *             scale per row and kv head (llama_cfg.kv_int8)
 *     PROMPT  token ids, comma-separated (one sequence)
 *     FORCE   ids, comma-separated: the tokens fed at decode steps 1.. in
 *             place of kern's own greedy choice (teacher forcing, so that
 *             every step's logits are compared in the reference's context)
 *   Runs the prompt as one prefill, then STEPS - 1 decode steps (STEPS new
 *   tokens in all, each the argmax of the last logits: the graph's `next`
 *   output), writes the last position's logits of every step to LOGITS.f32
 *   (STEPS x vocab f32) and prints the new token ids and the decode
 *   tokens/s on stdout.
 *   The prefill runs through a plan bound at the prompt length (prepacked
 *   weights, kern_gemm), freed before decoding; the decode steps run
 *   through a plan bound at one token, whose linears stream the [N, K]
 *   weights with kern_linear_gemv.
 *
 *   build/models/llama_run --export WEIGHTS.safetensors CONFIG OUT.ir OUT.safetensors
 *     Writes the same graph as text IR and its weights (the model's, plus
 *     the rotary table rope.table) as one safetensors file.
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

/* comma-separated ids into a malloc'd array; *n gets the count */
static int64_t *parse_ids(const char *s, int64_t *n) {
    int64_t *ids = (int64_t *)calloc(strlen(s) + 1, sizeof *ids);
    const char *q;
    *n = 0;
    if (!ids) return NULL;
    for (q = s; *q;) {
        char *e;
        ids[(*n)++] = strtoll(q, &e, 10);
        if (e == q) break;
        q = e;
        if (*q == ',') q++;
    }
    return ids;
}

#define TRY(e)                                                                                 \
    do {                                                                                       \
        if ((e) != KERN_OK) {                                                                  \
            fprintf(stderr, "%s: %s\n", #e, kern_last_error());                                \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

int main(int argc, char **argv) {
    llama_cfg c;
    kern_ctx_params cp;
    kern_ctx *ctx = NULL;
    kern_safetensors *st = NULL;
    kern_graph *g = NULL;
    kern_graph_plan *plan = NULL, *dec = NULL;
    kern_graph_plan_params pp;
    float *table, *row;
    void **caches;
    float **scales = NULL; /* +kv8: [2 * layers][max_len * kv_heads] */
    int64_t *ids, *force = NULL, lens = 0, P = 0, n_force = 0, steps = 0, s, l, V, tok = 0;
    int threads = 1, exporting = argc == 6 && strcmp(argv[1], "--export") == 0;
    char bind[64], dtname[16] = "f32";
    const char *wpath = argv[exporting ? 2 : 1], *conf = argv[exporting ? 3 : 2];
    size_t es;
    FILE *out = NULL;
    double t0 = 0, t_dec = 0;
    if (!exporting && argc != 6 && argc != 7) {
        fprintf(stderr,
                "usage: %s WEIGHTS CONFIG PROMPT STEPS LOGITS.f32 [FORCE]\n"
                "       %s --export WEIGHTS CONFIG OUT.ir OUT.safetensors\n",
                argv[0], argv[0]);
        return 2;
    }
    memset(&c, 0, sizeof c);
    if (sscanf(conf, "%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lf,%f,%d,%15s",
               (long long *)&c.vocab, (long long *)&c.hidden, (long long *)&c.heads,
               (long long *)&c.kv_heads, (long long *)&c.head_dim, (long long *)&c.ffn,
               (long long *)&c.layers, (long long *)&c.max_len, &c.rope_theta, &c.rms_eps,
               &threads, dtname) < 11 ||
        c.layers < 1 || c.layers > 64) {
        fprintf(stderr, "bad CONFIG\n");
        return 2;
    }
    {
        char *kv8 = strstr(dtname, "+kv8");
        if (kv8 && kv8[4] == '\0') {
            c.kv_int8 = 1;
            *kv8 = '\0';
        }
    }
    if (strcmp(dtname, "bf16") == 0) c.dtype = KERN_BF16;
    else if (strcmp(dtname, "int8") == 0) c.int8 = 1;
    else if (strcmp(dtname, "f32") != 0) {
        fprintf(stderr, "bad DTYPE '%s' (f32, bf16 or int8, optionally +kv8)\n", dtname);
        return 2;
    }
    c.last_logits = 1;
    V = c.vocab;
    memset(&cp, 0, sizeof cp);
    cp.n_threads = threads;
    TRY(kern_ctx_create(&cp, &ctx));
    TRY(kern_safetensors_open(ctx, wpath, NULL, &st));
    TRY(kern_graph_create(ctx, &g));
    TRY(llama_graph_build(g, &c));
    TRY(llama_graph_bind_rope(ctx, g, &c, &table));
    TRY(kern_graph_bind_safetensors(g, st, KERN_GRAPH_BORROW));
    if (exporting) {
        TRY(kern_graph_save_ir(g, argv[4]));
        TRY(kern_graph_save_weights(g, argv[5]));
        kern_graph_destroy(g);
        kern_safetensors_free(ctx, st);
        kern_ctx_destroy(ctx);
        free(table);
        return 0;
    }
    ids = parse_ids(argv[3], &P);
    steps = atoll(argv[4]);
    if (argc == 7) force = parse_ids(argv[6], &n_force);
    if (!ids || P < 1 || steps < 1 || P + steps > c.max_len + 1) {
        fprintf(stderr, "bad PROMPT or STEPS (the cache holds %lld tokens)\n", (long long)c.max_len);
        return 2;
    }
    memset(&pp, 0, sizeof pp);
    snprintf(bind, sizeof bind, "B=1,L=%lld", (long long)P);
    pp.bind = bind;
    TRY(kern_graph_plan_create(g, ctx, &pp, &plan));
    es = c.kv_int8 ? 1 : kern_dtype_size(c.dtype ? c.dtype : KERN_F32);
    caches = (void **)malloc((size_t)(2 * c.layers) * sizeof *caches);
    if (c.kv_int8) scales = (float **)malloc((size_t)(2 * c.layers) * sizeof *scales);
    row = (float *)malloc((size_t)V * sizeof *row);
    for (l = 0; l < 2 * c.layers; l++) {
        caches[l] = calloc((size_t)(c.max_len * c.kv_heads * c.head_dim), es);
        if (scales) scales[l] = (float *)calloc((size_t)(c.max_len * c.kv_heads), sizeof(float));
    }
    out = fopen(argv[5], "wb");
    if (!out || !row) {
        fprintf(stderr, "cannot write %s\n", argv[5]);
        return 1;
    }
    for (s = 0; s < steps; s++) {
        int64_t L = s == 0 ? P : 1, j;
        kern_tensor in[2 + 4 * 64], res[3];
        if (s == 1) {
            kern_graph_plan_free(plan); /* its prepacked copies go with it */
            plan = NULL;
            pp.bind = "B=1,L=1";
            TRY(kern_graph_plan_create(g, ctx, &pp, &dec));
            t0 = now_s();
        }
        in[0] = kern_tensor_2d(s == 0 ? ids : &tok, KERN_I64, 1, L);
        in[1] = kern_tensor_1d(&lens, KERN_I64, 1);
        memset(res, 0, sizeof res);
        TRY(kern_graph_run(s == 0 ? plan : dec, in,
                           2 + llama_graph_cache_inputs(&c, 1, caches, scales, in + 2), res, 3));
        for (j = 0; j < V; j++) /* logits [1, 1, V] in the model's dtype */
            row[j] = c.dtype == KERN_BF16
                         ? kern_bf16_to_f32(((const uint16_t *)res[0].data)[j])
                         : ((const float *)res[0].data)[j];
        fwrite(row, sizeof(float), (size_t)V, out);
        lens = ((const int64_t *)res[1].data)[0];
        tok = ((const int64_t *)res[2].data)[0];
        printf("%s%lld", s ? "," : "", (long long)tok);
        if (s < n_force) tok = force[s]; /* the reference's token for the next step */
    }
    if (steps > 1) t_dec = now_s() - t0;
    printf("\n%.2f tokens/s decode\n", t_dec > 0 ? (double)(steps - 1) / t_dec : 0.0);
    fclose(out);
    kern_graph_plan_free(plan);
    kern_graph_plan_free(dec);
    kern_graph_destroy(g);
    kern_safetensors_free(ctx, st);
    kern_ctx_destroy(ctx);
    for (l = 0; l < 2 * c.layers; l++) {
        free(caches[l]);
        if (scales) free(scales[l]);
    }
    free(caches);
    free(scales);
    free(row);
    free(table);
    free(ids);
    free(force);
    return 0;
}
