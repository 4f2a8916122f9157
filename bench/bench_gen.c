/* bench_gen.c — family `gen`: code written by gen/kern_gen.py against the
 * graph executor and the generic GEMM (mk/gen.mk generates the headers).
 *
 * Cases
 *   bert-base/B1-L16, bert-base/B1-L32   the 12-layer BERT-base encoder
 *       (gen/bert_ir.py: hidden 768, 12 heads, 3072, vocab 30522), f32,
 *       random weights. impls: kern_graph (the executor, every pass, one
 *       plan bound at L=32); gen (kern_gen.py model: the same kernels with
 *       constant shapes and the same passes, bit-identical to the executor
 *       without its decomposed-pattern pass); gen_spec (--specialize-max-m
 *       64: the linears and norms through generated instances, the GEMMs
 *       over the context's threads, within f32 tolerance). Peer:
 *       onnxruntime (bench/peers/gen.py).
 *   bert-base/B8-L128   the same at batch 8, seq 128 (1024 rows: the
 *       large-M case, where generated code must not be slower than the
 *       executor). impls: kern_graph (plan bound at B=8, L=128); gen. No
 *       gen_spec: its instances are for M <= 64. Peer: onnxruntime.
 *   gemm/f32/M<m>/N4096/K4096, m in 1, 4, 16, 64   y = x.W^T, W a torch
 *       Linear weight packed once. impls: kern_gemm (prepacked with
 *       kern_gemm_pack_b); gen (kern_gen.py gemm, its own packing, x
 *       copied per call into its row tiles' layout in the context's
 *       workspace, K in blocks at M = 64; column panels over the
 *       threads). 1 and 2 threads.
 *   gemm/bf16/M<m>/N4096/K4096   the same with x, W and y bf16. impls:
 *       kern_gemm (bf16 tensors, W prepacked with kern_gemm_pack_b); gen
 *       (kern_gen.py gemm --dtype bf16: W packed bf16, x widened once per
 *       call); at M = 1 and 4 also kern_linear_gemv (kern_llm.h's decode
 *       GEMV, the bf16 weight streamed as stored). Two weights used in
 *       turn (2 x 32 MiB, past the L3), so every call reads its weight
 *       from DRAM; the f32 weight (64 MiB) is past it alone.
 *   qlinear/int8/M<m>/N4096/K4096, m in 1, 4, 16, 64   int8 dynamic
 *       linear (x f32 quantized per row, W int8 per channel). impls:
 *       kern_qlinear (kern_qweight_pack); gen (kern_gen.py qlinear: the
 *       same bits). The 16 MiB int8 weight can stay in a 32 MiB L3.
 *   dispatch/layer_norm-chain-1000/H16   per-node cost (run_chain below).
 *   llama/f32/decode/C4096   one decode step of the issue-size Llama
 *       (gen/llama_ir.py's defaults: hidden 2048, 16 heads of 128 on 4 KV
 *       heads, SwiGLU 5632, 8 layers, vocab 32000, f32 weights and caches
 *       of 4160 rows) with 4096 tokens cached: kv_append writes row 4096,
 *       decode attention reads 4097 rows. impls: kern_graph (plan bound at
 *       B=1, L=1: the linears through kern_linear_gemv); gen (kern_gen.py
 *       model at B=1, L=1: the same kernel calls); gen_spec (--specialize-
 *       max-m 8: GEMM instances for the M = 1 linears, over weights they
 *       pack at prepare, the norm and decode-attention instances). Bytes: the weights (one
 *       embedding row) and the K and V rows read; peak DRAM.
 *   decode_attention/<f32|bf16|i8>/H16-Hkv4-D128/C4096   one decode
 *       step's attention alone at the Llama's size (16 query heads of 128
 *       on 4 KV heads, caches of 4160 rows, 4097 read; i8 with per-row
 *       scales). impls: kern_decode_attention (a generated header that
 *       calls it); gen_spec (--specialize-max-m: the generated instance).
 *       Calls rotate over copies of the caches (1.25 x the reported L3
 *       together, at least 96 MiB), so each reads them from memory as a
 *       decoder's layers do. Bytes: the K and
 *       V rows read (and their scales); peak DRAM.
 * FLOPs: 2.M.N.K for the GEMMs; for BERT 2 x (weights of the linears) x
 * tokens plus the attention products.
 */
#include "kern.h"
#include "kbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BERT_L16_IMPLEMENTATION
#include "../build/gen/bench/bert_l16.h"
#define BERT_L32_IMPLEMENTATION
#include "../build/gen/bench/bert_l32.h"
#define BERT_L16_SPEC_IMPLEMENTATION
#include "../build/gen/bench/bert_l16_spec.h"
#define BERT_L32_SPEC_IMPLEMENTATION
#include "../build/gen/bench/bert_l32_spec.h"
#define BERT_B8_L128_IMPLEMENTATION
#include "../build/gen/bench/bert_b8_l128.h"
#define GEMM_M1_IMPLEMENTATION
#include "../build/gen/bench/gemm_m1.h"
#define GEMM_M4_IMPLEMENTATION
#include "../build/gen/bench/gemm_m4.h"
#define GEMM_M16_IMPLEMENTATION
#include "../build/gen/bench/gemm_m16.h"
#define GEMM_M64_IMPLEMENTATION
#include "../build/gen/bench/gemm_m64.h"
#define GEMM_BF16_M1_IMPLEMENTATION
#include "../build/gen/bench/gemm_bf16_m1.h"
#define GEMM_BF16_M4_IMPLEMENTATION
#include "../build/gen/bench/gemm_bf16_m4.h"
#define GEMM_BF16_M16_IMPLEMENTATION
#include "../build/gen/bench/gemm_bf16_m16.h"
#define GEMM_BF16_M64_IMPLEMENTATION
#include "../build/gen/bench/gemm_bf16_m64.h"
#define CHAIN_IMPLEMENTATION
#include "../build/gen/bench/chain.h"
#define QLINEAR_M1_IMPLEMENTATION
#include "../build/gen/bench/qlinear_m1.h"
#define QLINEAR_M4_IMPLEMENTATION
#include "../build/gen/bench/qlinear_m4.h"
#define QLINEAR_M16_IMPLEMENTATION
#include "../build/gen/bench/qlinear_m16.h"
#define QLINEAR_M64_IMPLEMENTATION
#include "../build/gen/bench/qlinear_m64.h"
#define LLAMA_DEC_IMPLEMENTATION
#include "../build/gen/bench/llama_dec.h"
#define LLAMA_DEC_SPEC_IMPLEMENTATION
#include "../build/gen/bench/llama_dec_spec.h"
#define DATTN_F32_LIB_IMPLEMENTATION
#include "../build/gen/bench/dattn_f32_lib.h"
#define DATTN_F32_INST_IMPLEMENTATION
#include "../build/gen/bench/dattn_f32_inst.h"
#define DATTN_BF16_LIB_IMPLEMENTATION
#include "../build/gen/bench/dattn_bf16_lib.h"
#define DATTN_BF16_INST_IMPLEMENTATION
#include "../build/gen/bench/dattn_bf16_inst.h"
#define DATTN_I8_LIB_IMPLEMENTATION
#include "../build/gen/bench/dattn_i8_lib.h"
#define DATTN_I8_INST_IMPLEMENTATION
#include "../build/gen/bench/dattn_i8_inst.h"

/* ---------------------------------------------------------------- BERT */

#define NW BERT_L16_N_WEIGHTS
static void *bert_w[NW];

/* The scales of a trained (or Hugging Face initialised) BERT: LayerNorm
 * weights near 1, the rest about 0.02 (uniform in +-0.0346: std 0.02),
 * as the ONNX Runtime peer's seeded BertModel has them. Weights uniform in
 * +-1 put the FFN's pre-activations at a standard deviation near 20, so
 * most GELU outputs were subnormal floats, and every FMA on them took a
 * microcode assist on the Xeon (the f32 BERT-base B1 L16 executor 62.7 ms
 * against 40.9 with the flush-to-zero bits set), a cost the peer's data
 * never pays. */
static void bert_scale(const char *name, float *w, int64_t n) {
    int64_t i;
    int ln = strstr(name, "LayerNorm.weight") != NULL;
    for (i = 0; i < n; i++) w[i] = ln ? 1.0f + 0.05f * w[i] : 0.0346f * w[i];
}

static int bert_weights(void) {
    int i;
    if (bert_w[0]) return 0;
    for (i = 0; i < NW; i++) {
        int64_t n = 1;
        int d;
        for (d = 0; d < bert_l16_weight_ndim[i]; d++) n *= bert_l16_weight_shapes[i][d];
        bert_w[i] = kbench_alloc((size_t)n * 4);
        if (!bert_w[i]) return 1;
        kbench_fill(bert_w[i], KERN_F32, n, 100 + (uint64_t)i);
        bert_scale(bert_l16_weight_names[i], (float *)bert_w[i], n);
    }
    return 0;
}

typedef struct bert_in {
    int64_t B, L;
    int64_t *ids, *tt;
    float *mask, *out;
} bert_in;

static void bert_inputs(bert_in *b, int64_t B, int64_t L) {
    int64_t i, n = B * L;
    b->B = B;
    b->L = L;
    b->ids = (int64_t *)kbench_alloc((size_t)n * 8);
    b->tt = (int64_t *)kbench_alloc((size_t)n * 8);
    b->mask = (float *)kbench_alloc((size_t)n * 4);
    b->out = (float *)kbench_alloc((size_t)n * 768 * 4);
    for (i = 0; i < n; i++) {
        b->ids[i] = (i * 7919 + 13) % 30522;
        b->tt[i] = 0;
        b->mask[i] = 0;
    }
}

static double bert_flops(int64_t B, int64_t L) {
    double lin = 12.0 * (4.0 * 768 * 768 + 2.0 * 768 * 3072);
    return (double)B * (2.0 * lin * (double)L + 12.0 * 4.0 * (double)L * (double)L * 768);
}

typedef struct bcase {
    int64_t B, L;
    int impl; /* 0 executor, 1 gen, 2 gen_spec */
} bcase;

/* executor plans by thread count: [t][0] bound at B=1, L=32; [t][1] at
 * B=8, L=128 */
static kern_graph_plan *bert_plan[3][2];
static kern_graph *bert_graph[3][2];

static void run_bert(kbench_state *st, void *user) {
    const bcase *c = (const bcase *)user;
    int t = kbench_threads(st);
    kern_ctx *ctx = kbench_ctx(t);
    bert_in in;
    if (bert_weights()) {
        kbench_skip(st, "out of memory for the weights");
        return;
    }
    bert_inputs(&in, c->B, c->L);
    if (c->impl == 0) {
        kern_tensor ti[3], to;
        int64_t s2[2] = {c->B, c->L}, s4[4] = {c->B, 1, 1, c->L}, so[3] = {c->B, c->L, 768};
        int big = c->B > 1;
        if (!bert_plan[t][big]) {
            kern_graph_plan_params pp;
            int i;
            if (kern_graph_load_ir(ctx, "build/gen/bench/bert_base.kg", &bert_graph[t][big])) {
                kbench_skip(st, kern_last_error());
                return;
            }
            for (i = 0; i < NW; i++) {
                kern_tensor w;
                kern_tensor_init(&w, bert_w[i], KERN_F32, bert_l16_weight_ndim[i],
                                 bert_l16_weight_shapes[i]);
                kern_graph_bind_weight(bert_graph[t][big], bert_l16_weight_names[i], &w,
                                       KERN_GRAPH_BORROW);
            }
            memset(&pp, 0, sizeof pp);
            pp.bind = big ? "B=8,L=128" : "B=1,L=32";
            if (kern_graph_plan_create(bert_graph[t][big], ctx, &pp, &bert_plan[t][big])) {
                kbench_skip(st, kern_last_error());
                return;
            }
        }
        kern_tensor_init(&ti[0], in.ids, KERN_I64, 2, s2);
        kern_tensor_init(&ti[1], in.tt, KERN_I64, 2, s2);
        kern_tensor_init(&ti[2], in.mask, KERN_F32, 4, s4);
        kern_tensor_init(&to, in.out, KERN_F32, 3, so);
        while (kbench_next(st)) kern_graph_run(bert_plan[t][big], ti, 3, &to, 1);
    } else {
        const void *inputs[3];
        void *outputs[1];
        void *arena;
        inputs[0] = in.ids;
        inputs[1] = in.tt;
        inputs[2] = in.mask;
        outputs[0] = in.out;
#define GEN_BERT_CASE(P, U)                                                   \
    do {                                                                      \
        static P##_model m;                                                   \
        static int ready;                                                     \
        if (!ready && P##_prepare(kbench_ctx(1), (const void *const *)bert_w, &m)) { \
            kbench_skip(st, kern_last_error());                               \
            return;                                                           \
        }                                                                     \
        ready = 1;                                                            \
        arena = kbench_alloc(P##_arena_bytes(&m) + 64);                       \
        while (kbench_next(st)) P##_run(ctx, &m, inputs, outputs, arena);     \
    } while (0)
        if (c->B == 8) GEN_BERT_CASE(bert_b8_l128, BERT_B8_L128);
        else if (c->impl == 1 && c->L == 16) GEN_BERT_CASE(bert_l16, BERT_L16);
        else if (c->impl == 1) GEN_BERT_CASE(bert_l32, BERT_L32);
        else if (c->L == 16) GEN_BERT_CASE(bert_l16_spec, BERT_L16_SPEC);
        else GEN_BERT_CASE(bert_l32_spec, BERT_L32_SPEC);
#undef GEN_BERT_CASE
    }
    kbench_use(in.out);
    kbench_set_flops(st, bert_flops(c->B, c->L));
}

/* ---------------------------------------------------------------- GEMM */

typedef struct gcase {
    int64_t M;
    int gen; /* 0 kern_gemm, 1 the generated instance, 2 kern_linear_gemv */
    int bf16;
} gcase;

static float *gemm_w, *gemm_x, *gemm_y;

/* the f32 weight [4096, 4096] and x, y for up to 64 rows, made once (the
 * gemm and qlinear cases share them) */
static void gemm_operands(void) {
    const int64_t N = 4096, K = 4096;
    if (gemm_w) return;
    gemm_w = (float *)kbench_alloc((size_t)(N * K) * 4);
    gemm_x = (float *)kbench_alloc((size_t)(64 * K) * 4);
    gemm_y = (float *)kbench_alloc((size_t)(64 * N) * 4);
    kbench_fill(gemm_w, KERN_F32, N * K, 1);
    kbench_fill(gemm_x, KERN_F32, 64 * K, 2);
}
static uint16_t *gemm_wb, *gemm_xb, *gemm_yb;

/* Two weights, used in turn: 2 x 32 MiB of bf16 is past this class of
 * machine's L3 (32 MiB on the Zen 3 host), so each call streams its weight
 * from DRAM as a model's next layer would; one 32 MiB weight would stay
 * partly in L3 between calls. */
static void run_gemm_bf16(kbench_state *st, const gcase *c) {
    const int64_t N = 4096, K = 4096, M = c->M;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    int64_t it = 0;
    int i;
    if (!gemm_wb) {
        gemm_wb = (uint16_t *)kbench_alloc((size_t)(2 * N * K) * 2);
        gemm_xb = (uint16_t *)kbench_alloc((size_t)(64 * K) * 2);
        gemm_yb = (uint16_t *)kbench_alloc((size_t)(64 * N) * 2);
        if (!gemm_wb || !gemm_xb || !gemm_yb) {
            kbench_skip(st, "out of memory");
            return;
        }
        kbench_fill(gemm_wb, KERN_BF16, 2 * N * K, 1);
        kbench_fill(gemm_xb, KERN_BF16, 64 * K, 2);
    }
    if (c->gen == 2) {
        kern_tensor x = kern_tensor_2d(gemm_xb, KERN_BF16, M, K), y = kern_tensor_2d(gemm_yb, KERN_BF16, M, N);
        kern_tensor w[2];
        kern_gemv_params gp;
        memset(&gp, 0, sizeof gp);
        for (i = 0; i < 2; i++) w[i] = kern_tensor_2d(gemm_wb + i * N * K, KERN_BF16, N, K);
        if (kern_linear_gemv(ctx, &x, &w[0], &y, &gp)) {
            kbench_skip(st, kern_last_error());
            return;
        }
        while (kbench_next(st)) kern_linear_gemv(ctx, &x, &w[it++ & 1], &y, &gp);
    } else if (!c->gen) {
        kern_tensor x = kern_tensor_2d(gemm_xb, KERN_BF16, M, K), y = kern_tensor_2d(gemm_yb, KERN_BF16, M, N);
        kern_gemm_pack_params pp;
        kern_gemm_params gp;
        kern_gemm_packed_b *pb[2] = {NULL, NULL};
        memset(&pp, 0, sizeof pp);
        pp.trans_b = 1;
        for (i = 0; i < 2; i++) {
            kern_tensor w = kern_tensor_2d(gemm_wb + i * N * K, KERN_BF16, N, K);
            if (kern_gemm_pack_b(ctx, &w, &pb[i], &pp)) {
                kbench_skip(st, kern_last_error());
                kern_gemm_packed_b_free(ctx, pb[0]);
                return;
            }
        }
        memset(&gp, 0, sizeof gp);
        gp.trans_b = 1;
        while (kbench_next(st)) {
            gp.packed_b = pb[it++ & 1];
            kern_gemm(ctx, &x, NULL, &y, &gp);
        }
        for (i = 0; i < 2; i++) kern_gemm_packed_b_free(ctx, pb[i]);
    } else {
        static uint16_t *pk[2]; /* every M's instance packs N, K alike */
        for (i = 0; i < 2 && !pk[1]; i++) {
            pk[i] = (uint16_t *)kbench_alloc(GEMM_BF16_M1_PACKED_BYTES);
            if (!pk[i]) {
                kbench_skip(st, "out of memory");
                return;
            }
            gemm_bf16_m1_pack(gemm_wb + i * N * K, pk[i]);
        }
        switch (M) {
        case 1: while (kbench_next(st)) gemm_bf16_m1_run(ctx, gemm_xb, pk[it++ & 1], NULL, gemm_yb); break;
        case 4: while (kbench_next(st)) gemm_bf16_m4_run(ctx, gemm_xb, pk[it++ & 1], NULL, gemm_yb); break;
        case 16: while (kbench_next(st)) gemm_bf16_m16_run(ctx, gemm_xb, pk[it++ & 1], NULL, gemm_yb); break;
        default: while (kbench_next(st)) gemm_bf16_m64_run(ctx, gemm_xb, pk[it++ & 1], NULL, gemm_yb); break;
        }
    }
    kbench_use(gemm_yb);
    kbench_set_flops(st, 2.0 * (double)(M * N * K));
}

static void run_gemm(kbench_state *st, void *user) {
    const gcase *c = (const gcase *)user;
    const int64_t N = 4096, K = 4096, M = c->M;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    if (c->bf16) {
        run_gemm_bf16(st, c);
        return;
    }
    gemm_operands();
    if (!c->gen) {
        kern_tensor x = kern_tensor_2d(gemm_x, KERN_F32, M, K), y = kern_tensor_2d(gemm_y, KERN_F32, M, N);
        kern_tensor w = kern_tensor_2d(gemm_w, KERN_F32, N, K);
        kern_gemm_pack_params pp;
        kern_gemm_params gp;
        kern_gemm_packed_b *pb = NULL;
        memset(&pp, 0, sizeof pp);
        pp.trans_b = 1;
        if (kern_gemm_pack_b(ctx, &w, &pb, &pp)) {
            kbench_skip(st, kern_last_error());
            return;
        }
        memset(&gp, 0, sizeof gp);
        gp.trans_b = 1;
        gp.packed_b = pb;
        while (kbench_next(st)) kern_gemm(ctx, &x, NULL, &y, &gp);
        kern_gemm_packed_b_free(ctx, pb);
    } else {
        float *pk = (float *)kbench_alloc(GEMM_M1_PACKED_FLOATS * 4);
        gemm_m1_pack(gemm_w, pk);
        switch (M) {
        case 1: while (kbench_next(st)) gemm_m1_run(ctx, gemm_x, pk, NULL, gemm_y); break;
        case 4: while (kbench_next(st)) gemm_m4_run(ctx, gemm_x, pk, NULL, gemm_y); break;
        case 16: while (kbench_next(st)) gemm_m16_run(ctx, gemm_x, pk, NULL, gemm_y); break;
        default: while (kbench_next(st)) gemm_m64_run(ctx, gemm_x, pk, NULL, gemm_y); break;
        }
    }
    kbench_use(gemm_y);
    kbench_set_flops(st, 2.0 * (double)(M * N * K));
}

/* int8 dynamic linear: kern_qlinear on a kern_qweight_pack weight, or the
 * qlinear instance (its own packing, kern_qlinear's bits) */
static void run_qlinear(kbench_state *st, void *user) {
    const gcase *c = (const gcase *)user;
    const int64_t N = 4096, K = 4096, M = c->M;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    gemm_operands();
    if (!c->gen) {
        kern_tensor x = kern_tensor_2d(gemm_x, KERN_F32, M, K), y = kern_tensor_2d(gemm_y, KERN_F32, M, N);
        kern_tensor w = kern_tensor_2d(gemm_w, KERN_F32, N, K);
        kern_qweight *qw = NULL;
        if (kern_qweight_pack(ctx, &w, &qw, NULL)) {
            kbench_skip(st, kern_last_error());
            return;
        }
        while (kbench_next(st)) kern_qlinear(ctx, &x, qw, &y, NULL);
        kern_qweight_free(ctx, qw);
    } else {
        void *pk = kbench_alloc(QLINEAR_M1_PACKED_BYTES);
        void *work = kbench_alloc(QLINEAR_M64_WORK_BYTES);
        if (qlinear_m1_pack(ctx, gemm_w, pk)) {
            kbench_skip(st, kern_last_error());
            return;
        }
        switch (M) {
        case 1: while (kbench_next(st)) qlinear_m1_run(ctx, gemm_x, pk, NULL, gemm_y, work); break;
        case 4: while (kbench_next(st)) qlinear_m4_run(ctx, gemm_x, pk, NULL, gemm_y, work); break;
        case 16: while (kbench_next(st)) qlinear_m16_run(ctx, gemm_x, pk, NULL, gemm_y, work); break;
        default: while (kbench_next(st)) qlinear_m64_run(ctx, gemm_x, pk, NULL, gemm_y, work); break;
        }
    }
    kbench_use(gemm_y);
    kbench_set_flops(st, 2.0 * (double)(M * N * K));
}

/* per-node cost: a chain of CHAIN_NODES tiny LayerNorms ([1, 16], one
 * kern_norm call each; build/gen/bench/chain.kg). impls: kern_graph (the
 * executor: internal, pre-validated calls), gen (the generated model:
 * kern_norm's public entry with constant views), direct (the same
 * kern_norm calls written by hand on tensors built once: a plain C call
 * per node). Time per run of the chain; per node = time / CHAIN_NODES. */
#define CHAIN_NODES 1000
static void run_chain(kbench_state *st, void *user) {
    int impl = *(const int *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    static float x[16], g[16], y[2][16];
    int i;
    for (i = 0; i < 16; i++) {
        x[i] = (float)i * 0.25f - 2.0f;
        g[i] = 1.0f + (float)i * 0.01f;
    }
    if (impl == 0) {
        kern_graph *gr = NULL;
        kern_graph_plan *p = NULL;
        kern_tensor tw = kern_tensor_1d(g, KERN_F32, 16), tx = kern_tensor_2d(x, KERN_F32, 1, 16);
        kern_tensor ty = kern_tensor_2d(y[0], KERN_F32, 1, 16);
        if (kern_graph_load_ir(ctx, "build/gen/bench/chain.kg", &gr) ||
            kern_graph_bind_weight(gr, "g", &tw, KERN_GRAPH_BORROW) ||
            kern_graph_plan_create(gr, ctx, NULL, &p)) {
            kbench_skip(st, kern_last_error());
            kern_graph_destroy(gr);
            return;
        }
        while (kbench_next(st)) kern_graph_run(p, &tx, 1, &ty, 1);
        kern_graph_plan_free(p);
        kern_graph_destroy(gr);
    } else if (impl == 1) {
        chain_model m;
        const void *w[1], *in[1];
        void *out[1], *arena;
        w[0] = g;
        in[0] = x;
        out[0] = y[0];
        if (chain_prepare(ctx, w, &m)) {
            kbench_skip(st, kern_last_error());
            return;
        }
        arena = kbench_alloc(chain_arena_bytes(&m) + 64);
        while (kbench_next(st)) chain_run(ctx, &m, in, out, arena);
        chain_release(ctx, &m);
    } else {
        kern_tensor tw = kern_tensor_1d(g, KERN_F32, 16), tx = kern_tensor_2d(x, KERN_F32, 1, 16);
        kern_tensor ty[2];
        kern_norm_params np;
        ty[0] = kern_tensor_2d(y[0], KERN_F32, 1, 16);
        ty[1] = kern_tensor_2d(y[1], KERN_F32, 1, 16);
        memset(&np, 0, sizeof np);
        np.norm = KERN_NORM_LAYER;
        np.weight = &tw;
        while (kbench_next(st)) {
            kern_norm(ctx, &tx, &ty[0], &np);
            for (i = 1; i < CHAIN_NODES; i++) kern_norm(ctx, &ty[(i - 1) & 1], &ty[i & 1], &np);
        }
    }
    kbench_use(y[0]);
}

/* --------------------------------------------------------------- Llama */

/* A generated header's prepare, arena size and run behind one signature
 * (the model as void *): P##_prep_, P##_arena_, P##_run_. */
#define GEN_IMPL(P)                                                                       \
    static kern_status P##_prep_(kern_ctx *c, const void *const *w, void *m) {           \
        return P##_prepare(c, w, (P##_model *)m);                                         \
    }                                                                                     \
    static size_t P##_arena_(const void *m) { return P##_arena_bytes((const P##_model *)m); } \
    static kern_status P##_run_(kern_ctx *c, const void *m, const void *const *i, void *const *o, \
                                void *a) {                                                \
        return P##_run(c, (const P##_model *)m, i, o, a);                                 \
    }
GEN_IMPL(llama_dec)
GEN_IMPL(llama_dec_spec)

#define LL_CTX 4096 /* tokens already cached */
static void *ll_in[LLAMA_DEC_N_INPUTS + 1];
static void *ll_w[LLAMA_DEC_N_WEIGHTS + 1];
static kern_graph *ll_graph[3];
static kern_graph_plan *ll_plan[3];

static int64_t ll_numel(const int64_t *shape, int nd) {
    int64_t n = 1;
    int d;
    for (d = 0; d < nd; d++) n *= shape[d];
    return n;
}

/* weights and inputs once (2 GB of f32 weights): ids = 7, k_lens = 4096,
 * the caches filled */
static int ll_setup(void) {
    int i;
    if (ll_w[0]) return 0;
    for (i = 0; i < LLAMA_DEC_N_WEIGHTS; i++) {
        int64_t n = ll_numel(llama_dec_weight_shapes[i], llama_dec_weight_ndim[i]);
        ll_w[i] = kbench_alloc((size_t)n * 4);
        if (!ll_w[i]) return 1;
        kbench_fill(ll_w[i], KERN_F32, n, 300 + (uint64_t)i);
    }
    for (i = 0; i < LLAMA_DEC_N_INPUTS; i++) {
        int64_t n = ll_numel(llama_dec_input_shapes[i], llama_dec_input_ndim[i]);
        kern_dtype dt = llama_dec_input_dtypes[i];
        ll_in[i] = kbench_alloc((size_t)n * kern_dtype_size(dt));
        if (!ll_in[i]) return 1;
        if (dt == KERN_I64) {
            int64_t j;
            for (j = 0; j < n; j++)
                ((int64_t *)ll_in[i])[j] = strcmp(llama_dec_input_names[i], "k_lens") == 0 ? LL_CTX : 7;
        } else {
            kbench_fill(ll_in[i], dt, n, 500 + (uint64_t)i);
        }
    }
    return 0;
}

static double ll_bytes(void) {
    double b = 0;
    int i;
    for (i = 0; i < LLAMA_DEC_N_WEIGHTS; i++)
        b += strcmp(llama_dec_weight_names[i], "embed") == 0
                 ? (double)llama_dec_weight_shapes[i][1] * 4
                 : (double)ll_numel(llama_dec_weight_shapes[i], llama_dec_weight_ndim[i]) * 4;
    for (i = 0; i < LLAMA_DEC_N_INPUTS; i++)
        if (llama_dec_input_ndim[i] == 4) /* a cache [1, Lmax, Hkv, D]: LL_CTX + 1 rows read */
            b += (double)(LL_CTX + 1) * (double)(llama_dec_input_shapes[i][2] * llama_dec_input_shapes[i][3]) * 4;
    return b;
}

static void run_llama(kbench_state *st, void *user) {
    int gen = *(const int *)user, t = kbench_threads(st), i;
    kern_ctx *ctx = kbench_ctx(t);
    static float logits[32000 + 16];
    static int64_t next[2], lens[2];
    void *outs[3];
    if (ll_setup()) {
        kbench_skip(st, "out of memory for the weights");
        return;
    }
    outs[0] = logits;
    outs[1] = next;
    outs[2] = lens;
    if (!gen) {
        kern_tensor ti[LLAMA_DEC_N_INPUTS + 1], to[3];
        if (!ll_plan[t]) {
            kern_graph_plan_params pp;
            if (kern_graph_load_ir(ctx, "build/gen/bench/llama.kg", &ll_graph[t])) {
                kbench_skip(st, kern_last_error());
                return;
            }
            for (i = 0; i < LLAMA_DEC_N_WEIGHTS; i++) {
                kern_tensor w;
                kern_tensor_init(&w, ll_w[i], KERN_F32, llama_dec_weight_ndim[i], llama_dec_weight_shapes[i]);
                kern_graph_bind_weight(ll_graph[t], llama_dec_weight_names[i], &w, KERN_GRAPH_BORROW);
            }
            memset(&pp, 0, sizeof pp);
            pp.bind = LLAMA_DEC_BIND;
            if (kern_graph_plan_create(ll_graph[t], ctx, &pp, &ll_plan[t])) {
                kbench_skip(st, kern_last_error());
                return;
            }
        }
        for (i = 0; i < LLAMA_DEC_N_INPUTS; i++)
            kern_tensor_init(&ti[i], ll_in[i], llama_dec_input_dtypes[i], llama_dec_input_ndim[i],
                             llama_dec_input_shapes[i]);
        for (i = 0; i < 3; i++)
            kern_tensor_init(&to[i], outs[i], llama_dec_output_dtypes[i], llama_dec_output_ndim[i],
                             llama_dec_output_shapes[i]);
        while (kbench_next(st))
            if (kern_graph_run(ll_plan[t], ti, LLAMA_DEC_N_INPUTS, to, 3)) {
                kbench_skip(st, kern_last_error());
                return;
            }
    } else {
        /* gen: the plain header; gen_spec: the one with instances, which
         * pack their own copies of the weights (another 1.8 GB) */
        static void *m[3], *arena[3];
        kern_status (*const prep)(kern_ctx *, const void *const *, void *) =
            gen == 1 ? llama_dec_prep_ : llama_dec_spec_prep_;
        size_t (*const arena_bytes)(const void *) = gen == 1 ? llama_dec_arena_ : llama_dec_spec_arena_;
        kern_status (*const run)(kern_ctx *, const void *, const void *const *, void *const *, void *) =
            gen == 1 ? llama_dec_run_ : llama_dec_spec_run_;
        if (!m[gen]) {
            void *mm = kbench_alloc(gen == 1 ? sizeof(llama_dec_model) : sizeof(llama_dec_spec_model));
            if (!mm || prep(kbench_ctx(1), (const void *const *)ll_w, mm)) {
                kbench_skip(st, mm ? kern_last_error() : "out of memory");
                return;
            }
            m[gen] = mm;
            arena[gen] = kbench_alloc(arena_bytes(mm) + 64);
        }
        while (kbench_next(st))
            if (run(ctx, m[gen], (const void *const *)ll_in, outs, arena[gen])) {
                kbench_skip(st, kern_last_error());
                return;
            }
    }
    kbench_use(logits);
    kbench_set_bytes(st, ll_bytes());
}

/* ------------------------------------------------- decode attention alone
 * One generated header per (cache dtype, impl): its inputs filled once
 * (k_lens = LL_CTX + 1, the step after kv_append), prepare once, then
 * runs. */
typedef struct da_impl {
    const char *dt, *impl;
    int n_in;
    const kern_dtype *dts;
    const int *nd;
    const int64_t (*shapes)[8];
    const char *const *names;
    size_t model_bytes;
    kern_status (*prepare)(kern_ctx *, const void *const *, void *);
    size_t (*arena)(const void *);
    kern_status (*run)(kern_ctx *, const void *, const void *const *, void *const *, void *);
} da_impl;
GEN_IMPL(dattn_f32_lib)
GEN_IMPL(dattn_f32_inst)
GEN_IMPL(dattn_bf16_lib)
GEN_IMPL(dattn_bf16_inst)
GEN_IMPL(dattn_i8_lib)
GEN_IMPL(dattn_i8_inst)
#define DA_ROW(P, DT, IMPL)                                                                 \
    {DT, IMPL, (int)(sizeof P##_input_ndim / sizeof P##_input_ndim[0]) - 1, P##_input_dtypes, \
     P##_input_ndim, P##_input_shapes, P##_input_names, sizeof(P##_model), P##_prep_, P##_arena_, \
     P##_run_}
static const da_impl da_impls[6] = {
    DA_ROW(dattn_f32_lib, "f32", "kern_decode_attention"), DA_ROW(dattn_f32_inst, "f32", "gen_spec"),
    DA_ROW(dattn_bf16_lib, "bf16", "kern_decode_attention"), DA_ROW(dattn_bf16_inst, "bf16", "gen_spec"),
    DA_ROW(dattn_i8_lib, "i8", "kern_decode_attention"), DA_ROW(dattn_i8_inst, "i8", "gen_spec")};

#define DA_MAXCOPY 256
/* the caches' copies together: 1.25 x the L3 the system reports (at least
 * 96 MiB), so a call's rows come from memory (a VM may report the host's
 * whole L3: 480 MiB on the Xeon) */
static double da_copies_bytes(void) {
    double b = 96.0 * (1 << 20);
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0 && 1.25 * (double)l3 > b) b = 1.25 * (double)l3;
#endif
    return b;
}
static void run_dattn(kbench_state *st, void *user) {
    const da_impl *d = (const da_impl *)user;
    const int k = (int)(d - da_impls);
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    static void *in[6][DA_MAXCOPY][8], *model[6], *arena[6];
    const int kc = k & ~1; /* the two impls of a dtype share its copies */
    static double bytes[6];
    static int copies[6];
    static float y[16 * 128];
    void *out[1];
    int i, c, it = 0;
    if (!model[k]) { /* inputs, prepare and arena once per impl */
        double cache_bytes = 0;
        for (i = 0; i < d->n_in; i++) {
            int64_t n = ll_numel(d->shapes[i], d->nd[i]);
            if (d->nd[i] >= 3 && strcmp(d->names[i], "q") != 0) { /* caches, scales: the rows read */
                bytes[k] += (double)(LL_CTX + 1) * (double)(n / d->shapes[i][1]) *
                            (double)kern_dtype_size(d->dts[i]);
                cache_bytes += (double)n * (double)kern_dtype_size(d->dts[i]);
            }
        }
        copies[k] = (int)(da_copies_bytes() / cache_bytes) + 1;
        if (copies[k] > DA_MAXCOPY) copies[k] = DA_MAXCOPY;
        for (c = 0; c < copies[k] && in[kc][0][0] && kc != k; c++)
            memcpy(in[k][c], in[kc][c], sizeof in[k][c]);
        for (c = 0; c < copies[k] && !(in[kc][0][0] && kc != k); c++)
            for (i = 0; i < d->n_in; i++) {
                int64_t n = ll_numel(d->shapes[i], d->nd[i]);
                if (c > 0 && !(d->nd[i] >= 3 && strcmp(d->names[i], "q") != 0)) {
                    in[k][c][i] = in[k][0][i]; /* q and k_lens: one copy */
                    continue;
                }
                in[k][c][i] = kbench_alloc((size_t)n * kern_dtype_size(d->dts[i]));
                if (!in[k][c][i]) {
                    kbench_skip(st, "out of memory");
                    return;
                }
                if (d->dts[i] == KERN_I64)
                    ((int64_t *)in[k][c][i])[0] = LL_CTX + 1;
                else
                    kbench_fill(in[k][c][i], d->dts[i], n, 700 + (uint64_t)i);
            }
        model[k] = kbench_alloc(d->model_bytes);
        if (!model[k] || d->prepare(kbench_ctx(1), NULL, model[k])) {
            kbench_skip(st, model[k] ? kern_last_error() : "out of memory");
            model[k] = NULL;
            return;
        }
        arena[k] = kbench_alloc(d->arena(model[k]) + 64);
    }
    out[0] = y;
    /* each call on the next copy of the caches: as in a decoder, whose
     * layers' caches together are past the L3, every call reads its K and V
     * rows from memory */
    while (kbench_next(st))
        if (d->run(ctx, model[k], (const void *const *)in[k][it++ % copies[k]], out, arena[k])) {
            kbench_skip(st, kern_last_error());
            return;
        }
    kbench_use(y);
    kbench_set_bytes(st, bytes[k]);
}

KBENCH_INIT(gen) {
    static const bcase b[8] = {{1, 16, 0}, {1, 16, 1}, {1, 16, 2}, {1, 32, 0},
                               {1, 32, 1}, {1, 32, 2}, {8, 128, 0}, {8, 128, 1}};
    static const char *const impl[3] = {"kern_graph", "gen", "gen_spec"};
    static const gcase g[18] = {{1, 0, 0},  {1, 1, 0},  {4, 0, 0},  {4, 1, 0},  {16, 0, 0}, {16, 1, 0},
                                {64, 0, 0}, {64, 1, 0}, {1, 0, 1},  {1, 1, 1},  {1, 2, 1},  {4, 0, 1},
                                {4, 1, 1},  {4, 2, 1},  {16, 0, 1}, {16, 1, 1}, {64, 0, 1}, {64, 1, 1}};
    static const char *const gimpl[3] = {"kern_gemm", "gen", "kern_linear_gemv"};
    int i, t;
    char nm[64];
    for (i = 0; i < 8; i++)
        for (t = 1; t <= 2; t++) {
            snprintf(nm, sizeof nm, "bert-base/B%d-L%d", (int)b[i].B, (int)b[i].L);
            kbench_add("gen", nm, impl[b[i].impl], t, KBENCH_PEAK_F32, run_bert, (void *)&b[i]);
        }
    for (i = 0; i < 18; i++) {
        snprintf(nm, sizeof nm, "gemm/%s/M%d/N4096/K4096", g[i].bf16 ? "bf16" : "f32", (int)g[i].M);
        for (t = 1; t <= 2; t++)
            kbench_add("gen", nm, gimpl[g[i].gen], t, KBENCH_PEAK_F32, run_gemm, (void *)&g[i]);
    }
    for (i = 0; i < 8; i++) {
        snprintf(nm, sizeof nm, "qlinear/int8/M%d/N4096/K4096", (int)g[i].M);
        for (t = 1; t <= 2; t++)
            kbench_add("gen", nm, g[i].gen ? "gen" : "kern_qlinear", t, KBENCH_PEAK_INT8, run_qlinear,
                       (void *)&g[i]);
    }
    {
        static const int chain_impl[3] = {0, 1, 2};
        static const char *const cname[3] = {"kern_graph", "gen", "direct"};
        for (i = 0; i < 3; i++)
            kbench_add("gen", "dispatch/layer_norm-chain-1000/H16", cname[i], 1, KBENCH_PEAK_LATENCY,
                       run_chain, (void *)&chain_impl[i]);
    }
    {
        static const int ll_impl[3] = {0, 1, 2};
        static const char *const lname[3] = {"kern_graph", "gen", "gen_spec"};
        for (i = 0; i < 3; i++)
            for (t = 1; t <= 2; t++)
                kbench_add("gen", "llama/f32/decode/C4096", lname[i], t, KBENCH_PEAK_DRAM, run_llama,
                           (void *)&ll_impl[i]);
    }
    for (i = 0; i < 6; i++)
        for (t = 1; t <= 2; t++) {
            snprintf(nm, sizeof nm, "decode_attention/%s/H16-Hkv4-D128/C4096", da_impls[i].dt);
            kbench_add("gen", nm, da_impls[i].impl, t, KBENCH_PEAK_DRAM, run_dattn, (void *)&da_impls[i]);
        }
    kbench_headline("gen", "bert-base/B1-L16");
    kbench_headline("gen", "gemm/f32/M16/N4096/K4096");
}
