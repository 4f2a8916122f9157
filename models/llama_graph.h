/* llama_graph.h — a Llama-style decoder (Hugging Face LlamaForCausalLM:
 * RMSNorm, GQA attention with half-split rotary embedding, SwiGLU MLP,
 * untied lm_head) built with kern's graph API, one graph for prefill and
 * decode. Used by tests/test_llm.c (a tiny model against a plain C
 * reference) and models/llama_run.c (Hugging Face weights from
 * safetensors, checked by models/llama.py).
 *
 * Graph inputs, in order:
 *   ids     [B, L] i64        the new tokens of each sequence
 *   k_lens  [B] i64           rows already in the caches (= the position
 *                             of the first new token); not modified
 *   k_cache.<i>, v_cache.<i>  [B, Lmax, Hkv, D] (f32, or bf16 for a bf16
 *                             model), one pair per layer: the caller's
 *                             caches, appended in place; with cfg.kv_int8
 *                             i8, each pair followed by k_scale.<i>,
 *                             v_scale.<i> [B, Lmax, Hkv] f32 (in place too)
 * Outputs: logits [B, L, V] (the model's dtype), k_lens + L [B] i64; with
 * cfg.last_logits, logits [B, 1, V] of the last position only (the final
 * norm and lm_head run on one row per sequence, as generate() does) and a
 * third output, next [B, 1] i64: their argmax (greedy decoding's token).
 * cfg.dtype: KERN_F32 (0) or KERN_BF16: weights, activations and caches in
 * that dtype (a Hugging Face model loaded with torch_dtype=bfloat16).
 * cfg.int8: the seven projections of each layer run as qlinear (int8
 * dynamic quantization: x per token, the f32 weights per output channel at
 * plan time; torch.ao.quantization.quantize_dynamic's scheme); lm_head
 * stays f32.
 * Weights (Hugging Face names, [out, in] as nn.Linear stores them):
 *   model.embed_tokens.weight, model.layers.<i>.{input_layernorm,
 *   post_attention_layernorm}.weight, model.layers.<i>.self_attn.
 *   {q,k,v,o}_proj.weight, model.layers.<i>.mlp.{gate,up,down}_proj.weight,
 *   model.norm.weight, lm_head.weight, and rope.table [Lmax, D] (the
 *   cos/sin table, from kern_rope_table_init; not in HF's file).
 * Declared without data: bind them (kern_graph_bind_weight or
 * kern_graph_bind_safetensors) before planning.
 */
#ifndef KERN_MODELS_LLAMA_GRAPH_H
#define KERN_MODELS_LLAMA_GRAPH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct llama_cfg {
    int64_t vocab, hidden, heads, kv_heads, head_dim, ffn, layers, max_len;
    double rope_theta;
    float rms_eps;
    kern_dtype dtype; /* 0 = KERN_F32, or KERN_BF16 */
    int int8;         /* the layers' linears as qlinear (f32 model only) */
    int kv_int8;      /* int8 KV caches: inputs k_cache.<i>, v_cache.<i> are i8
                         and followed by k_scale.<i>, v_scale.<i> [B, Lmax, Hkv]
                         f32 (kern_kv_append_ex's per-row-and-head scales) */
    int last_logits;  /* logits of the last position + next = their argmax */
} llama_cfg;

static kern_status llama__w(kern_graph *g, kern_dtype dt, const char *name, int ndim, int64_t d0,
                            int64_t d1, kern_graph_val *out) {
    kern_tensor t;
    memset(&t, 0, sizeof t); /* data NULL: declared, bound later */
    t.dtype = dt;
    t.ndim = ndim;
    t.shape[0] = d0;
    t.shape[1] = d1;
    t.stride[ndim - 1] = 1;
    if (ndim == 2) t.stride[0] = d1;
    return kern_graph_weight(g, name, &t, KERN_GRAPH_BORROW, out);
}

static kern_status llama__node(kern_graph *g, kern_graph_op op, const char *name,
                               kern_graph_val a, kern_graph_val b, kern_graph_val c,
                               kern_graph_val d4, kern_graph_val e, const kern_graph_attrs *at,
                               kern_graph_val *out) {
    kern_graph_node_desc d;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.name = name;
    d.inputs[0] = a;
    d.inputs[1] = b;
    d.inputs[2] = c;
    d.inputs[3] = d4;
    d.inputs[4] = e;
    if (at) d.attrs = *at;
    return kern_graph_add(g, &d, out);
}

/* x w^T (+ residual): linear (residual is input 3), or qlinear (int8
 * dynamic; input 4) when q */
static kern_status llama__lin(kern_graph *g, int q, const char *name, kern_graph_val x,
                              kern_graph_val w, kern_graph_val residual, kern_graph_val *out) {
    return llama__node(g, q ? KERN_GRAPH_OP_QLINEAR : KERN_GRAPH_OP_LINEAR, name, x, w, 0,
                       q ? 0 : residual, q ? residual : 0, NULL, out);
}

static kern_status llama__reshape(kern_graph *g, const char *name, kern_graph_val x, int n,
                                  const int64_t *shape, kern_graph_val *out) {
    kern_graph_attrs at;
    memset(&at, 0, sizeof at);
    at.n_shape = n;
    memcpy(at.shape, shape, sizeof(int64_t) * (size_t)n);
    return llama__node(g, KERN_GRAPH_OP_RESHAPE, name, x, 0, 0, 0, 0, &at, out);
}

/* Builds the graph into g (empty). */
static kern_status llama_graph_build(kern_graph *g, const llama_cfg *c) {
    kern_graph_val ids, lens, h, table, emb, x, q, k, v, a, m, gt, up, newlens = 0, logits, next;
    kern_graph_val kc, vc, ksc = 0, vsc = 0, w[9];
    kern_graph_attrs norm, att;
    int64_t B, L, shp[4];
    char nm[160];
    int64_t i;
    kern_dtype dt = c->dtype ? c->dtype : KERN_F32;
    int q8 = c->int8 != 0;
    kern_status st;
    static const char *wn[9] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                                "self_attn.v_proj", "self_attn.o_proj",
                                "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                                "mlp.down_proj"};
#define LLAMA__TRY(e)                                                                          \
    do {                                                                                       \
        if ((st = (e)) != KERN_OK) return st;                                                  \
    } while (0)
    if ((dt != KERN_F32 && dt != KERN_BF16) || (q8 && dt != KERN_F32))
        return KERN_ERR_DTYPE;
    LLAMA__TRY(kern_graph_symbol(g, "B", &B));
    LLAMA__TRY(kern_graph_symbol(g, "L", &L));
    shp[0] = B;
    shp[1] = L;
    LLAMA__TRY(kern_graph_input(g, "ids", KERN_I64, 2, shp, &ids));
    LLAMA__TRY(kern_graph_input(g, "k_lens", KERN_I64, 1, shp, &lens));
    LLAMA__TRY(llama__w(g, dt, "model.embed_tokens.weight", 2, c->vocab, c->hidden, &emb));
    LLAMA__TRY(llama__w(g, KERN_F32, "rope.table", 2, c->max_len, c->head_dim, &table));
    memset(&norm, 0, sizeof norm);
    norm.eps_set = 1;
    norm.eps = c->rms_eps;
    memset(&att, 0, sizeof att);
    LLAMA__TRY(llama__node(g, KERN_GRAPH_OP_EMBEDDING, "embed", ids, emb, 0, 0, 0, NULL, &h));
    for (i = 0; i < c->layers; i++) {
        int j;
        for (j = 0; j < 9; j++) {
            int vec = j == 0 || j == 5;
            int64_t d0 = j == 1 ? c->heads * c->head_dim
                         : j == 2 || j == 3 ? c->kv_heads * c->head_dim
                         : j == 6 || j == 7 ? c->ffn : c->hidden;
            int64_t d1 = j == 4 ? c->heads * c->head_dim : j == 8 ? c->ffn : c->hidden;
            snprintf(nm, sizeof nm, "model.layers.%lld.%s.weight", (long long)i, wn[j]);
            LLAMA__TRY(llama__w(g, dt, nm, vec ? 1 : 2, d0, d1, &w[j]));
        }
        shp[0] = B;
        shp[1] = c->max_len;
        shp[2] = c->kv_heads;
        shp[3] = c->head_dim;
        snprintf(nm, sizeof nm, "k_cache.%lld", (long long)i);
        LLAMA__TRY(kern_graph_input(g, nm, c->kv_int8 ? KERN_I8 : dt, 4, shp, &kc));
        snprintf(nm, sizeof nm, "v_cache.%lld", (long long)i);
        LLAMA__TRY(kern_graph_input(g, nm, c->kv_int8 ? KERN_I8 : dt, 4, shp, &vc));
        if (c->kv_int8) {
            snprintf(nm, sizeof nm, "k_scale.%lld", (long long)i);
            LLAMA__TRY(kern_graph_input(g, nm, KERN_F32, 3, shp, &ksc));
            snprintf(nm, sizeof nm, "v_scale.%lld", (long long)i);
            LLAMA__TRY(kern_graph_input(g, nm, KERN_F32, 3, shp, &vsc));
        }
#define LLAMA__NM(s) (snprintf(nm, sizeof nm, "l%lld.%s", (long long)i, s), nm)
        LLAMA__TRY(llama__node(g, KERN_GRAPH_OP_RMS_NORM, LLAMA__NM("ln1"), h, w[0], 0, 0, 0, &norm, &x));
        LLAMA__TRY(llama__lin(g, q8, LLAMA__NM("q"), x, w[1], 0, &q));
        LLAMA__TRY(llama__lin(g, q8, LLAMA__NM("k"), x, w[2], 0, &k));
        LLAMA__TRY(llama__lin(g, q8, LLAMA__NM("v"), x, w[3], 0, &v));
        shp[0] = B;
        shp[1] = L;
        shp[2] = c->heads;
        shp[3] = c->head_dim;
        LLAMA__TRY(llama__reshape(g, LLAMA__NM("q4"), q, 4, shp, &q));
        shp[2] = c->kv_heads;
        LLAMA__TRY(llama__reshape(g, LLAMA__NM("k4"), k, 4, shp, &k));
        LLAMA__TRY(llama__reshape(g, LLAMA__NM("v4"), v, 4, shp, &v));
        LLAMA__TRY(llama__node(g, KERN_GRAPH_OP_ROPE, LLAMA__NM("q_rope"), q, table, lens, 0, 0, NULL, &q));
        LLAMA__TRY(llama__node(g, KERN_GRAPH_OP_ROPE, LLAMA__NM("k_rope"), k, table, lens, 0, 0, NULL, &k));
        {
            kern_graph_node_desc d;
            memset(&d, 0, sizeof d);
            d.op = KERN_GRAPH_OP_KV_APPEND;
            d.name = LLAMA__NM("kv");
            d.inputs[0] = k;
            d.inputs[1] = v;
            d.inputs[2] = kc;
            d.inputs[3] = vc;
            d.inputs[4] = lens;
            d.inputs[5] = ksc;
            d.inputs[6] = vsc;
            LLAMA__TRY(kern_graph_add(g, &d, &newlens));
            memset(&d, 0, sizeof d);
            d.op = KERN_GRAPH_OP_DECODE_ATTENTION;
            d.name = LLAMA__NM("attn");
            d.inputs[0] = q;
            d.inputs[1] = kc;
            d.inputs[2] = vc;
            d.inputs[3] = newlens;
            d.inputs[4] = ksc;
            d.inputs[5] = vsc;
            d.attrs = att;
            LLAMA__TRY(kern_graph_add(g, &d, &a));
        }
        shp[2] = c->heads * c->head_dim;
        LLAMA__TRY(llama__reshape(g, LLAMA__NM("attn3"), a, 3, shp, &a));
        LLAMA__TRY(llama__lin(g, q8, LLAMA__NM("o"), a, w[4], h, &h));
        LLAMA__TRY(llama__node(g, KERN_GRAPH_OP_RMS_NORM, LLAMA__NM("ln2"), h, w[5], 0, 0, 0, &norm, &x));
        LLAMA__TRY(llama__lin(g, q8, LLAMA__NM("gate"), x, w[6], 0, &gt));
        LLAMA__TRY(llama__lin(g, q8, LLAMA__NM("up"), x, w[7], 0, &up));
        LLAMA__TRY(llama__node(g, KERN_GRAPH_OP_SILU_MUL, LLAMA__NM("swiglu"), gt, up, 0, 0, 0, NULL, &m));
        LLAMA__TRY(llama__lin(g, q8, LLAMA__NM("down"), m, w[8], h, &h));
#undef LLAMA__NM
    }
    LLAMA__TRY(llama__w(g, dt, "model.norm.weight", 1, c->hidden, 0, &w[0]));
    LLAMA__TRY(llama__w(g, dt, "lm_head.weight", 2, c->vocab, c->hidden, &w[1]));
    if (c->last_logits) { /* h[:, L-1:L, :], a strided view */
        kern_graph_attrs sl;
        memset(&sl, 0, sizeof sl);
        sl.axis = 1;
        LLAMA__TRY(kern_graph_dim(g, "L-1", &sl.start));
        sl.length = 1;
        LLAMA__TRY(llama__node(g, KERN_GRAPH_OP_SLICE, "last", h, 0, 0, 0, 0, &sl, &h));
    }
    LLAMA__TRY(llama__node(g, KERN_GRAPH_OP_RMS_NORM, "final_norm", h, w[0], 0, 0, 0, &norm, &x));
    LLAMA__TRY(llama__lin(g, 0, "logits", x, w[1], 0, &logits));
    LLAMA__TRY(kern_graph_output(g, logits));
    LLAMA__TRY(kern_graph_output(g, newlens));
    if (c->last_logits) {
        LLAMA__TRY(llama__node(g, KERN_GRAPH_OP_ARGMAX, "next", logits, 0, 0, 0, 0, NULL, &next));
        LLAMA__TRY(kern_graph_output(g, next));
    }
#undef LLAMA__TRY
    return KERN_OK;
}

/* Makes the rotary table [max_len, head_dim] (malloc'd into *table, the
 * caller frees it after the graph and its plans) and binds it, borrowed,
 * as "rope.table". */
static kern_status llama_graph_bind_rope(kern_ctx *ctx, kern_graph *g, const llama_cfg *c,
                                         float **table) {
    kern_tensor tt;
    kern_rope_params rp;
    kern_status st;
    *table = (float *)malloc((size_t)(c->max_len * c->head_dim) * sizeof(float));
    if (!*table) return KERN_ERR_NOMEM;
    tt = kern_tensor_2d(*table, KERN_F32, c->max_len, c->head_dim);
    memset(&rp, 0, sizeof rp);
    rp.theta = c->rope_theta;
    if ((st = kern_rope_table_init(ctx, &tt, &rp)) != KERN_OK) return st;
    return kern_graph_bind_weight(g, "rope.table", &tt, KERN_GRAPH_BORROW);
}

/* The caches as the graph's inputs after ids and k_lens, in the order
 * llama_graph_build declares them: cache[2 l] and cache[2 l + 1] are layer
 * l's k and v ([B, max_len, kv_heads, head_dim] of the model's dtype, i8
 * with cfg.kv_int8), scale[2 l] and scale[2 l + 1] their [B, max_len,
 * kv_heads] f32 scales with cfg.kv_int8 (scale unused otherwise). Fills
 * in[0..] and returns the count: 2 or 4 a layer. */
static inline int llama_graph_cache_inputs(const llama_cfg *c, int64_t B, void *const *cache,
                                           float *const *scale, kern_tensor *in) {
    kern_dtype cdt = c->kv_int8 ? KERN_I8 : c->dtype ? c->dtype : KERN_F32;
    int n = 0;
    int64_t l, j;
    for (l = 0; l < c->layers; l++) {
        for (j = 0; j < 2; j++)
            in[n++] = kern_tensor_4d(cache[2 * l + j], cdt, B, c->max_len, c->kv_heads, c->head_dim);
        if (c->kv_int8)
            for (j = 0; j < 2; j++)
                in[n++] = kern_tensor_3d(scale[2 * l + j], KERN_F32, B, c->max_len, c->kv_heads);
    }
    return n;
}

#endif /* KERN_MODELS_LLAMA_GRAPH_H */
