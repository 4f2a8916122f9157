/* llama_generate.c — greedy text generation with a Llama-style model stored
 * as kern text IR + safetensors weights:
 *
 *   llama_generate MODEL.ir MODEL.safetensors [STEPS [THREADS]] < prompt_ids
 *
 * reads the prompt's token ids (separated by spaces, commas or newlines)
 * from stdin, runs them as one prefill, decodes STEPS new tokens (default
 * 32) and prints the new ids and the decode tokens/s. `models/llama_run
 * --export` writes such a pair from a Hugging Face checkpoint (docs/llm.md).
 *
 * The graph's contract (the one models/llama_graph.h builds):
 *   inputs   ids [B, L] i64; k_lens [B] i64 (tokens already cached); then
 *            one k/v cache pair per layer, [B, Lmax, Hkv, D] in any float
 *            dtype. The caches are allocated here from the declared shapes.
 *   outputs  an i64 [B] output (the new lengths) and one named "next"
 *            ([B, 1] i64: the greedy token); others (logits) are ignored.
 * The prompt runs through a plan bound at its length (prepacked weights),
 * which is freed before decoding; the decode steps run through a plan
 * bound at one token (its linears stream the unpacked weights).
 *
 * Without arguments it runs a tiny built-in model (the IR below, random
 * weights) and checks that decoding through the KV cache gives the tokens
 * that re-running the whole sequence from an empty cache gives. */
#include <kern/kern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_IN 130

typedef struct model {
    kern_ctx *ctx;
    kern_graph *g;
    int n_in, out_lens, out_next, n_out;
    int64_t lmax;
    void *cache[MAX_IN];
    size_t cache_bytes[MAX_IN];
    kern_tensor in[MAX_IN];
} model;

static double now_s(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, kern_last_error());
    return 1;
}

/* Checks the graph's inputs and outputs against the contract and
 * allocates the caches. */
static int model_init(model *m) {
    kern_graph_val_info vi;
    int i;
    m->n_in = kern_graph_n_inputs(m->g);
    m->n_out = kern_graph_n_outputs(m->g);
    m->out_lens = m->out_next = -1;
    if (m->n_in < 4 || m->n_in > MAX_IN || m->n_in % 2) {
        fprintf(stderr, "the graph has %d inputs: expected ids, k_lens and cache pairs\n", m->n_in);
        return 1;
    }
    for (i = 2; i < m->n_in; i++) {
        int d;
        if (kern_graph_val_get(m->g, kern_graph_input_at(m->g, i), &vi) != KERN_OK)
            return fail("kern_graph_val_get");
        if (vi.ndim != 4 || vi.dims[1] <= 0 || vi.dims[2] <= 0 || vi.dims[3] <= 0) {
            fprintf(stderr, "input '%s' is not a cache [B, Lmax, Hkv, D]\n", vi.name);
            return 1;
        }
        m->lmax = vi.dims[1];
        m->cache_bytes[i] = kern_dtype_size(vi.dtype);
        for (d = 1; d < 4; d++) m->cache_bytes[i] *= (size_t)vi.dims[d];
        m->cache[i] = malloc(m->cache_bytes[i]);
        if (!m->cache[i]) return 1;
        m->in[i] = kern_tensor_4d(m->cache[i], vi.dtype, 1, vi.dims[1], vi.dims[2], vi.dims[3]);
    }
    for (i = 0; i < m->n_out; i++) {
        if (kern_graph_val_get(m->g, kern_graph_output_at(m->g, i), &vi) != KERN_OK)
            return fail("kern_graph_val_get");
        if (strcmp(vi.name, "next") == 0) m->out_next = i;
        else if (vi.dtype == KERN_I64 && vi.ndim == 1) m->out_lens = i;
    }
    if (m->out_next < 0 || m->out_lens < 0) {
        fprintf(stderr, "the graph has no 'next' output or no [B] i64 lengths output\n");
        return 1;
    }
    return 0;
}

/* Greedy decoding from an empty cache: prompt[P] -> out[steps]. *tok_s gets
 * the decode tokens/s (0 with one step). */
static int generate(model *m, const int64_t *prompt, int64_t P, int64_t steps, int64_t *out,
                    double *tok_s) {
    kern_graph_plan *plan = NULL;
    kern_graph_plan_params pp;
    kern_tensor res[KERN_GRAPH_MAX_OUTPUTS];
    char bind[48];
    int64_t lens = 0, tok = 0, s;
    double t0 = 0;
    int i;
    if (P < 1 || P + steps - 1 > m->lmax) {
        fprintf(stderr, "%lld prompt tokens + %lld steps do not fit the cache (%lld)\n",
                (long long)P, (long long)steps, (long long)m->lmax);
        return 1;
    }
    for (i = 2; i < m->n_in; i++) memset(m->cache[i], 0, m->cache_bytes[i]);
    memset(&pp, 0, sizeof pp);
    *tok_s = 0;
    for (s = 0; s < steps; s++) {
        int64_t L = s == 0 ? P : 1;
        if (s <= 1) { /* the prompt's plan, then one bound at one token */
            kern_graph_plan_free(plan);
            plan = NULL;
            snprintf(bind, sizeof bind, "B=1,L=%lld", (long long)L);
            pp.bind = bind;
            if (kern_graph_plan_create(m->g, m->ctx, &pp, &plan) != KERN_OK)
                return fail("kern_graph_plan_create");
            t0 = now_s();
        }
        m->in[0] = kern_tensor_2d(s == 0 ? prompt : &tok, KERN_I64, 1, L);
        m->in[1] = kern_tensor_1d(&lens, KERN_I64, 1);
        memset(res, 0, sizeof res);
        if (kern_graph_run(plan, m->in, m->n_in, res, m->n_out) != KERN_OK) {
            kern_graph_plan_free(plan);
            return fail("kern_graph_run");
        }
        lens = ((const int64_t *)res[m->out_lens].data)[0];
        tok = out[s] = ((const int64_t *)res[m->out_next].data)[0];
    }
    if (steps > 1) *tok_s = (double)(steps - 1) / (now_s() - t0);
    kern_graph_plan_free(plan);
    return 0;
}

static void model_free(model *m) {
    int i;
    for (i = 2; i < m->n_in && i < MAX_IN; i++) free(m->cache[i]);
    kern_graph_destroy(m->g);
}

/* ------------------------------------------------------ the tiny model */

/* 1 layer, hidden 16, 2 heads of 8 over 1 kv head, SwiGLU 24, vocab 32,
 * 16 positions: the IR models/llama_graph.h writes for that config. */
static const char tiny_ir[] =
    "kern-graph 1\n"
    "dim B\n"
    "dim L\n"
    "input ids i64 [B,L]\n"
    "input k_lens i64 [B]\n"
    "weight model.embed_tokens.weight f32 [32,16]\n"
    "weight rope.table f32 [16,8]\n"
    "weight model.layers.0.input_layernorm.weight f32 [16]\n"
    "weight model.layers.0.self_attn.q_proj.weight f32 [16,16]\n"
    "weight model.layers.0.self_attn.k_proj.weight f32 [8,16]\n"
    "weight model.layers.0.self_attn.v_proj.weight f32 [8,16]\n"
    "weight model.layers.0.self_attn.o_proj.weight f32 [16,16]\n"
    "weight model.layers.0.post_attention_layernorm.weight f32 [16]\n"
    "weight model.layers.0.mlp.gate_proj.weight f32 [24,16]\n"
    "weight model.layers.0.mlp.up_proj.weight f32 [24,16]\n"
    "weight model.layers.0.mlp.down_proj.weight f32 [16,24]\n"
    "input k_cache.0 f32 [B,16,1,8]\n"
    "input v_cache.0 f32 [B,16,1,8]\n"
    "weight model.norm.weight f32 [16]\n"
    "weight lm_head.weight f32 [32,16]\n"
    "embed = embedding(ids, model.embed_tokens.weight)\n"
    "l0.ln1 = rms_norm(embed, model.layers.0.input_layernorm.weight) eps=1e-06\n"
    "l0.q = linear(l0.ln1, model.layers.0.self_attn.q_proj.weight)\n"
    "l0.k = linear(l0.ln1, model.layers.0.self_attn.k_proj.weight)\n"
    "l0.v = linear(l0.ln1, model.layers.0.self_attn.v_proj.weight)\n"
    "l0.q4 = reshape(l0.q) shape=B,L,2,8\n"
    "l0.k4 = reshape(l0.k) shape=B,L,1,8\n"
    "l0.v4 = reshape(l0.v) shape=B,L,1,8\n"
    "l0.q_rope = rope(l0.q4, rope.table, k_lens)\n"
    "l0.k_rope = rope(l0.k4, rope.table, k_lens)\n"
    "l0.kv = kv_append(l0.k_rope, l0.v4, k_cache.0, v_cache.0, k_lens)\n"
    "l0.attn = decode_attention(l0.q_rope, k_cache.0, v_cache.0, l0.kv)\n"
    "l0.attn3 = reshape(l0.attn) shape=B,L,16\n"
    "l0.o = linear(l0.attn3, model.layers.0.self_attn.o_proj.weight, -, embed)\n"
    "l0.ln2 = rms_norm(l0.o, model.layers.0.post_attention_layernorm.weight) eps=1e-06\n"
    "l0.gate = linear(l0.ln2, model.layers.0.mlp.gate_proj.weight)\n"
    "l0.up = linear(l0.ln2, model.layers.0.mlp.up_proj.weight)\n"
    "l0.swiglu = silu_mul(l0.gate, l0.up)\n"
    "l0.down = linear(l0.swiglu, model.layers.0.mlp.down_proj.weight, -, l0.o)\n"
    "last = slice(l0.down) axis=1 start=L-1 length=1\n"
    "final_norm = rms_norm(last, model.norm.weight) eps=1e-06\n"
    "logits = linear(final_norm, lm_head.weight)\n"
    "next = argmax(logits)\n"
    "output logits\n"
    "output l0.kv\n"
    "output next\n";

/* Binds random weights (norm weights near 1) and the rotary table. */
static int tiny_bind(model *m) {
    uint32_t seed = 12345;
    int i, n = 0;
    for (i = 1; i <= 1000; i++) {
        kern_graph_val_info vi;
        kern_tensor t;
        float *w;
        int64_t k, cnt = 1;
        int d;
        kern_status st;
        if (kern_graph_val_get(m->g, i, &vi) != KERN_OK) break; /* past the last value */
        if (vi.kind != KERN_GRAPH_VAL_WEIGHT) continue;
        for (d = 0; d < vi.ndim; d++) cnt *= vi.dims[d];
        w = (float *)malloc((size_t)cnt * sizeof *w);
        if (!w) return 1;
        kern_tensor_init(&t, w, KERN_F32, vi.ndim, vi.dims);
        if (strcmp(vi.name, "rope.table") == 0) {
            if (kern_rope_table_init(m->ctx, &t, NULL) != KERN_OK) return fail("kern_rope_table_init");
        } else {
            int norm = strstr(vi.name, "norm") != NULL;
            for (k = 0; k < cnt; k++) {
                seed = seed * 1664525u + 1013904223u;
                w[k] = (float)((double)(seed >> 8) / (double)(1u << 24) - 0.5) * (norm ? 0.2f : 1.5f) +
                       (norm ? 1.0f : 0.0f);
            }
        }
        st = kern_graph_bind_weight(m->g, vi.name, &t, KERN_GRAPH_COPY);
        free(w);
        if (st != KERN_OK) return fail("kern_graph_bind_weight");
        n++;
    }
    return n == 13 ? 0 : 1;
}

static int self_test(void) {
    model m;
    int64_t prompt[16] = {3, 17, 5, 29, 11}, dec[8], full[8];
    double tok_s, d2;
    int64_t s;
    int ok;
    memset(&m, 0, sizeof m);
    if (kern_ctx_create(NULL, &m.ctx) != KERN_OK) return fail("kern_ctx_create");
    if (kern_graph_read_ir(m.ctx, tiny_ir, strlen(tiny_ir), &m.g) != KERN_OK)
        return fail("kern_graph_read_ir");
    if (tiny_bind(&m) || model_init(&m) || generate(&m, prompt, 5, 8, dec, &tok_s)) return 1;
    /* each token again from an empty cache, prompt + the tokens before it
     * as one prefill */
    for (s = 0; s < 8; s++) {
        if (s) prompt[4 + s] = full[s - 1];
        if (generate(&m, prompt, 5 + s, 1, &full[s], &d2)) return 1;
    }
    ok = memcmp(dec, full, sizeof dec) == 0;
    printf("llama_generate: tiny model (1 layer, vocab 32), 8 greedy tokens through the cache:");
    for (s = 0; s < 8; s++) printf(" %lld", (long long)dec[s]);
    printf(" (%s re-running the whole sequence)\n", ok ? "same as" : "DIFFERENT from");
    printf("[llama_generate] %d ok, %d failed\n", ok, !ok);
    model_free(&m);
    kern_ctx_destroy(m.ctx);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    model m;
    kern_ctx_params cp;
    kern_safetensors *st = NULL;
    int64_t *prompt, *out, P = 0, cap = 256, steps = argc > 3 ? atoll(argv[3]) : 32, s;
    long long v;
    double tok_s;
    if (argc == 1) return self_test();
    if (argc < 3 || steps < 1) {
        fprintf(stderr, "usage: %s MODEL.ir MODEL.safetensors [STEPS [THREADS]] < prompt_ids\n",
                argv[0]);
        return 2;
    }
    prompt = (int64_t *)malloc((size_t)cap * sizeof *prompt);
    for (;;) {
        int c = scanf(" %lld", &v);
        if (c != 1) {
            if (c == EOF || getchar() != ',') break; /* a comma separates too */
            continue;
        }
        if (P == cap) prompt = (int64_t *)realloc(prompt, (size_t)(cap *= 2) * sizeof *prompt);
        if (!prompt) return 1;
        prompt[P++] = (int64_t)v;
    }
    memset(&m, 0, sizeof m);
    memset(&cp, 0, sizeof cp);
    cp.n_threads = argc > 4 ? atoi(argv[4]) : 0; /* 0 = every core */
    if (kern_ctx_create(&cp, &m.ctx) != KERN_OK) return fail("kern_ctx_create");
    if (kern_graph_load_ir(m.ctx, argv[1], &m.g) != KERN_OK) return fail(argv[1]);
    if (kern_safetensors_open(m.ctx, argv[2], NULL, &st) != KERN_OK) return fail(argv[2]);
    if (kern_graph_bind_safetensors(m.g, st, KERN_GRAPH_BORROW) != KERN_OK)
        return fail("kern_graph_bind_safetensors");
    out = (int64_t *)malloc((size_t)steps * sizeof *out);
    if (!out || model_init(&m) || generate(&m, prompt, P, steps, out, &tok_s)) return 1;
    for (s = 0; s < steps; s++) printf("%s%lld", s ? " " : "", (long long)out[s]);
    printf("\n%.2f tokens/s decode (%lld prompt tokens, %lld new)\n", tok_s, (long long)P,
           (long long)steps);
    model_free(&m); /* the graph borrowed the file's tensors: free it first */
    kern_safetensors_free(m.ctx, st);
    kern_ctx_destroy(m.ctx);
    free(prompt);
    free(out);
    return 0;
}
