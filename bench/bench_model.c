/* bench_model.c — family `model`: whole models through the graph executor.
 *
 * Cases
 *   bert-base/<dt>/B<b>/L<l>   BERT-base (12 layers, hidden 768, 12 heads,
 *       3072, vocab 30522), last_hidden_state of a batch of b sequences of l
 *       tokens (no padding), dt f32, bf16 (as torch.autocast(bfloat16) runs
 *       it: linears and attention bf16, norms and residual adds f32) or
 *       int8 (the f32 graph with every encoder linear quantized to int8
 *       dynamic at plan time, kern_qlinear). FLOPs: the GEMMs and the two
 *       attention products, 2·T·(4H² + 2·H·I) + 4·B·L²·H per layer (T =
 *       B·L), the same count for every impl.
 *   graphsage/f32/N100000/E1000000/F64   a 2-layer SAGEConv (mean), F 64 ->
 *       128 -> 128, on the seeded power-law graph of models/graphsage.py.
 *       FLOPs: the four GEMMs plus one add per edge and feature.
 * impls: kern_graph (this file; the model's IR + safetensors planned once
 *   per case, the run timed); the peers in bench/peers/model.py: torch
 *   (eager), torch_compile, onnxruntime (torch.onnx export; BERT only), pyg
 *   (GraphSAGE).
 * The models are the files models/bert.py and models/graphsage.py write
 * into build/models/ (not checked in); when they are missing this file
 * runs `bench/.venv/bin/python models/<m>.py --export-only` once, and
 * skips the case if that fails.
 */
#include "kern.h"
#include "kbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct mcase {
    const char *model; /* "bert-base" or "graphsage" */
    const char *dt;    /* f32, bf16, int8 */
    int64_t b, l;
} mcase;

#define BERT_DIR "build/models/bert-base"
#define SAGE_DIR "build/models/graphsage-N100000-E1000000-F64-128-128"

static int have_file(const char *p) { return access(p, R_OK) == 0; }

/* Writes the model's files with its script when they are missing. */
static int ensure_files(const char *kg, const char *script) {
    char cmd[512];
    if (have_file(kg)) return 1;
    if (!have_file("bench/.venv/bin/python")) return 0;
    snprintf(cmd, sizeof cmd, "bench/.venv/bin/python %s --export-only >&2", script);
    if (system(cmd) != 0) return 0;
    return have_file(kg);
}

static double bert_flops(int64_t b, int64_t l) {
    const double H = 768, I = 3072, T = (double)b * (double)l;
    return 12.0 * (2.0 * T * (4.0 * H * H + 2.0 * H * I) + 4.0 * (double)b * (double)l * (double)l * H);
}

static double sage_flops(void) {
    const double N = 100000, E = 1000000;
    return 2.0 * N * 64 * 128 * 2 + 2.0 * N * 128 * 128 * 2 + E * (64 + 128);
}

static void run_kern(kbench_state *st, void *user) {
    const mcase *c = (const mcase *)user;
    int bert = strcmp(c->model, "bert-base") == 0;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    char kg[256], sf[256], bind[64];
    kern_graph *g = NULL;
    kern_graph_plan *p = NULL;
    kern_safetensors *w = NULL, *ist = NULL;
    kern_graph_plan_params pp;
    kern_tensor in[3];
    int64_t *ids = NULL, *tt = NULL, *mask = NULL, i, n;
    int n_in = 3;

    if (bert) {
        const char *suf = strcmp(c->dt, "bf16") == 0 ? "-bf16" : "";
        snprintf(kg, sizeof kg, BERT_DIR "/model%s.kg", suf);
        snprintf(sf, sizeof sf, BERT_DIR "/model%s.safetensors", suf);
        if (!ensure_files(kg, "models/bert.py")) {
            kbench_skip(st, "no " BERT_DIR " (bench/.venv/bin/python models/bert.py --export-only)");
            return;
        }
    } else {
        snprintf(kg, sizeof kg, SAGE_DIR "/model.kg");
        snprintf(sf, sizeof sf, SAGE_DIR "/model.safetensors");
        if (!ensure_files(kg, "models/graphsage.py")) {
            kbench_skip(st, "no " SAGE_DIR " (bench/.venv/bin/python models/graphsage.py --export-only)");
            return;
        }
    }
    if (kern_graph_load_ir(ctx, kg, &g) || kern_safetensors_open(ctx, sf, NULL, &w) ||
        kern_graph_bind_safetensors(g, w, KERN_GRAPH_BORROW)) {
        kbench_skip(st, kern_last_error());
        goto done;
    }
    memset(&pp, 0, sizeof pp);
    if (bert) {
        uint64_t s = 12345;
        int64_t shape[2] = {c->b, c->l};
        n = c->b * c->l;
        ids = (int64_t *)kbench_alloc((size_t)n * 8);
        tt = (int64_t *)kbench_alloc((size_t)n * 8);
        mask = (int64_t *)kbench_alloc((size_t)n * 8);
        for (i = 0; i < n; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            ids[i] = (int64_t)((s >> 33) % 30522);
            tt[i] = 0;
            mask[i] = 1;
        }
        kern_tensor_init(&in[0], ids, KERN_I64, 2, shape);
        kern_tensor_init(&in[1], tt, KERN_I64, 2, shape);
        kern_tensor_init(&in[2], mask, KERN_I64, 2, shape);
        snprintf(bind, sizeof bind, "B=%lld,L=%lld", (long long)c->b, (long long)c->l);
        if (strcmp(c->dt, "int8") == 0) pp.quantize = "encoder.*";
    } else {
        char ip[256];
        snprintf(ip, sizeof ip, SAGE_DIR "/inputs.safetensors");
        if (kern_safetensors_open(ctx, ip, NULL, &ist) || kern_safetensors_tensor(ist, "x", &in[0]) ||
            kern_safetensors_tensor(ist, "rowptr", &in[1]) || kern_safetensors_tensor(ist, "col", &in[2])) {
            kbench_skip(st, kern_last_error());
            goto done;
        }
        snprintf(bind, sizeof bind, "N=%lld,E=%lld", (long long)in[0].shape[0], (long long)in[2].shape[0]);
    }
    pp.bind = bind;
    pp.cache_size = 1;
    if (kern_graph_plan_create(g, ctx, &pp, &p)) {
        kbench_skip(st, kern_last_error());
        goto done;
    }
    kbench_time_plan(st, p, in, n_in, bert ? bert_flops(c->b, c->l) : sage_flops());
done:
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
    kern_safetensors_free(ctx, ist);
    kern_safetensors_free(ctx, w);
}

static mcase cases[] = {
    {"bert-base", "f32", 8, 128},  {"bert-base", "f32", 1, 128},  {"bert-base", "f32", 1, 512},
    {"bert-base", "f32", 8, 512},  {"bert-base", "bf16", 8, 128}, {"bert-base", "bf16", 1, 128},
    {"bert-base", "bf16", 1, 512}, {"bert-base", "bf16", 8, 512}, {"bert-base", "int8", 8, 128},
    {"bert-base", "int8", 1, 128}, {"bert-base", "int8", 1, 512}, {"bert-base", "int8", 8, 512},
    {"graphsage", "f32", 0, 0},
};

static char names[sizeof cases / sizeof cases[0]][64];

KBENCH_INIT(model) {
    size_t k;
    int t;
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mcase *c = &cases[k];
        kbench_peak pk = strcmp(c->dt, "bf16") == 0   ? KBENCH_PEAK_BF16
                         : strcmp(c->dt, "int8") == 0 ? KBENCH_PEAK_INT8
                                                      : KBENCH_PEAK_F32;
        if (strcmp(c->model, "bert-base") == 0)
            snprintf(names[k], sizeof names[k], "bert-base/%s/B%lld/L%lld", c->dt, (long long)c->b,
                     (long long)c->l);
        else
            snprintf(names[k], sizeof names[k], "graphsage/f32/N100000/E1000000/F64");
        for (t = 1; t <= 2; t++) kbench_add("model", names[k], "kern_graph", t, pk, run_kern, c);
    }
    /* headline cases: the default `make bench` set (docs/bench.md). One
     * sequence of 128 tokens: B8/L128 is 2 s a call at 1 thread, and its
     * five impls x 2 thread counts x 3 rounds (with warm-ups) were a
     * quarter of the default run's time; it stays in --full. */
    kbench_headline("model", "bert-base/f32/B1/L128");
    kbench_headline("model", "bert-base/int8/B1/L128");
}
