/* test_fault.c — fault injection over every op family (issue 19): each op
 * runs on a fresh context whose allocator refuses allocation 1, then 2,
 * 3, ... until the op succeeds (kt_fault_sweep in kt.h). Every refusal
 * must give KERN_ERR_NOMEM with a message, the caller's outputs (tensors
 * and handle pointers) byte-identical, and nothing leaked once the
 * context is destroyed. Shapes are chosen so that each op takes the
 * paths that allocate: gemm packing, split keys in sdpa, the fast and
 * general scatter paths, the spmm transpose, thread scratch on 1 and 2
 * threads. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern.h"
#include "kt.h"

#define KF_N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void fill(uint64_t salt, void *p, kern_dtype dt, int64_t n) {
    kt_rng r = kt_rng_make(salt);
    kt_fill_normal(&r, p, dt, n, 1.0);
}

/* Sweeps fn on 1 and 2 threads (the best ISA); the op must have needed
 * at least one allocation on one of them. */
static void sweep(const char *what, kt_fault_fn fn, void *arg, const kt_region *out, int nout) {
    int t, most = 0;
    for (t = 1; t <= 2; t++) {
        int n = kt_fault_sweep(what, t, KERN_ISA_AUTO, fn, arg, out, nout);
        if (n < 0) return;
        if (n > most) most = n;
    }
    KT_CHECK(most > 0, "%s: no allocation to refuse (the sweep tests nothing)", what);
}

/* ============================================================== gemm */

static float g_a[96 * 80], g_b[80 * 72], g_bias[72], g_c[96 * 72];

static kern_status op_gemm(kern_ctx *ctx, void *arg) {
    kern_tensor a = kern_tensor_2d(g_a, KERN_F32, 96, 80), b = kern_tensor_2d(g_b, KERN_F32, 80, 72);
    kern_tensor c = kern_tensor_2d(g_c, KERN_F32, 96, 72), bias = kern_tensor_1d(g_bias, KERN_F32, 72);
    kern_gemm_params p;
    (void)arg;
    memset(&p, 0, sizeof p);
    p.epilogue.bias = &bias;
    p.epilogue.act = KERN_ACT_GELU;
    return kern_gemm(ctx, &a, &b, &c, &p);
}
static kern_status op_gemm_pack(kern_ctx *ctx, void *arg) {
    kern_tensor b = kern_tensor_2d(g_b, KERN_F32, 80, 72);
    kern_gemm_packed_b **h = (kern_gemm_packed_b **)arg;
    kern_status st = kern_gemm_pack_b(ctx, &b, h, NULL);
    if (st == KERN_OK) {
        kern_gemm_packed_b_free(ctx, *h);
        *h = NULL;
    }
    return st;
}

KT_TEST(fault_gemm) {
    kern_gemm_packed_b *h = NULL;
    kt_region rc = {g_c, sizeof g_c, "c"}, rh = {&h, sizeof h, "*out"};
    fill(1, g_a, KERN_F32, KF_N(g_a));
    fill(2, g_b, KERN_F32, KF_N(g_b));
    fill(3, g_bias, KERN_F32, KF_N(g_bias));
    fill(4, g_c, KERN_F32, KF_N(g_c));
    sweep("kern_gemm", op_gemm, NULL, &rc, 1);
    sweep("kern_gemm_pack_b", op_gemm_pack, &h, &rh, 1);
}

/* ============================================================= qgemm */

static float q_x[33 * 64], q_w[40 * 64], q_y[33 * 40], q_sc[33];
static int8_t q_xq[33 * 64], q_a8[33 * 64], q_b8[64 * 40];
static int32_t q_c32[33 * 40];

static kern_status op_qpack(kern_ctx *ctx, void *arg) {
    kern_tensor w = kern_tensor_2d(q_w, KERN_F32, 40, 64);
    kern_qweight **h = (kern_qweight **)arg;
    kern_status st = kern_qweight_pack(ctx, &w, h, NULL);
    if (st == KERN_OK) {
        kern_qweight_free(ctx, *h);
        *h = NULL;
    }
    return st;
}
static kern_status op_qlinear(kern_ctx *ctx, void *arg) {
    kern_tensor x = kern_tensor_2d(q_x, KERN_F32, 33, 64), y = kern_tensor_2d(q_y, KERN_F32, 33, 40);
    return kern_qlinear(ctx, &x, (const kern_qweight *)arg, &y, NULL);
}
static kern_status op_quant(kern_ctx *ctx, void *arg) {
    kern_tensor x = kern_tensor_2d(q_x, KERN_F32, 33, 64), xq = kern_tensor_2d(q_xq, KERN_I8, 33, 64);
    kern_tensor s = kern_tensor_1d(q_sc, KERN_F32, 33);
    (void)arg;
    return kern_quantize_per_token(ctx, &x, &xq, &s, NULL);
}
static kern_status op_s8s8(kern_ctx *ctx, void *arg) {
    kern_tensor a = kern_tensor_2d(q_a8, KERN_I8, 33, 64), b = kern_tensor_2d(q_b8, KERN_I8, 64, 40);
    kern_tensor c = kern_tensor_2d(q_c32, KERN_I32, 33, 40);
    (void)arg;
    return kern_gemm_s8s8s32(ctx, &a, &b, &c, NULL);
}
static kern_status op_s8s8_pack(kern_ctx *ctx, void *arg) {
    kern_tensor b = kern_tensor_2d(q_b8, KERN_I8, 64, 40);
    kern_gemm_s8s8s32_packed_b **h = (kern_gemm_s8s8s32_packed_b **)arg;
    kern_status st = kern_gemm_s8s8s32_pack_b(ctx, &b, h, NULL);
    if (st == KERN_OK) {
        kern_gemm_s8s8s32_packed_b_free(ctx, *h);
        *h = NULL;
    }
    return st;
}
static kern_status op_s8s8_packed(kern_ctx *ctx, void *arg) {
    kern_tensor a = kern_tensor_2d(q_a8, KERN_I8, 33, 64), c = kern_tensor_2d(q_c32, KERN_I32, 33, 40);
    kern_gemm_s8s8s32_params p;
    memset(&p, 0, sizeof p);
    p.packed_b = (const kern_gemm_s8s8s32_packed_b *)arg;
    return kern_gemm_s8s8s32(ctx, &a, NULL, &c, &p);
}

KT_TEST(fault_qgemm) {
    kern_qweight *h = NULL, *qw = NULL;
    kern_gemm_s8s8s32_packed_b *pb = NULL;
    kern_tensor w = kern_tensor_2d(q_w, KERN_F32, 40, 64);
    kt_region rh = {&h, sizeof h, "*out"}, ry = {q_y, sizeof q_y, "y"}, rpb = {&pb, sizeof pb, "*out"};
    kt_region rq[2] = {{q_xq, sizeof q_xq, "xq"}, {q_sc, sizeof q_sc, "scales"}};
    kt_region rc = {q_c32, sizeof q_c32, "c"};
    int i;
    fill(5, q_x, KERN_F32, KF_N(q_x));
    fill(6, q_w, KERN_F32, KF_N(q_w));
    fill(7, q_y, KERN_F32, KF_N(q_y));
    for (i = 0; i < KF_N(q_a8); i++) q_a8[i] = (int8_t)(i * 37 % 255 - 127);
    for (i = 0; i < KF_N(q_b8); i++) q_b8[i] = (int8_t)(i * 53 % 255 - 127);
    memset(q_xq, 0x5a, sizeof q_xq);
    memset(q_c32, 0x5a, sizeof q_c32);
    sweep("kern_qweight_pack", op_qpack, &h, &rh, 1);
    KT_OK(kern_qweight_pack(kt_ctx(1, KERN_ISA_AUTO), &w, &qw, NULL));
    sweep("kern_qlinear", op_qlinear, qw, &ry, 1);
    kern_qweight_free(kt_ctx(1, KERN_ISA_AUTO), qw);
    sweep("kern_quantize_per_token", op_quant, NULL, rq, 2);
    sweep("kern_gemm_s8s8s32", op_s8s8, NULL, &rc, 1);
    sweep("kern_gemm_s8s8s32_pack_b", op_s8s8_pack, &pb, &rpb, 1);
    {
        kern_tensor b = kern_tensor_2d(q_b8, KERN_I8, 64, 40);
        KT_OK(kern_gemm_s8s8s32_pack_b(kt_ctx(1, KERN_ISA_AUTO), &b, &pb, NULL));
        sweep("kern_gemm_s8s8s32 (packed b)", op_s8s8_packed, pb, &rc, 1);
        kern_gemm_s8s8s32_packed_b_free(kt_ctx(1, KERN_ISA_AUTO), pb);
    }
}

/* ========================================================== sparse24 */

static float s_w[64 * 64], s_x[20 * 64], s_y[20 * 64], s_d[64 * 64], s_vals[64 * 32];
static uint8_t s_meta[64 * 8];

static kern_status op_s24_compress(kern_ctx *ctx, void *arg) {
    kern_tensor w = kern_tensor_2d(s_w, KERN_F32, 64, 64);
    kern_sparse24 **h = (kern_sparse24 **)arg;
    kern_status st = kern_sparse24_compress(ctx, &w, h, NULL);
    if (st == KERN_OK) {
        kern_sparse24_free(ctx, *h);
        *h = NULL;
    }
    return st;
}
static kern_status op_s24_import(kern_ctx *ctx, void *arg) {
    kern_tensor v = kern_tensor_2d(s_vals, KERN_F32, 64, 32), m = kern_tensor_2d(s_meta, KERN_U8, 64, 8);
    kern_sparse24 **h = (kern_sparse24 **)arg;
    kern_status st = kern_sparse24_import(ctx, &v, &m, h, NULL);
    if (st == KERN_OK) {
        kern_sparse24_free(ctx, *h);
        *h = NULL;
    }
    return st;
}
static kern_status op_s24_linear(kern_ctx *ctx, void *arg) {
    kern_tensor x = kern_tensor_2d(s_x, KERN_F32, 20, 64), y = kern_tensor_2d(s_y, KERN_F32, 20, 64);
    return kern_sparse24_linear(ctx, &x, (const kern_sparse24 *)arg, &y, NULL);
}
static kern_status op_s24_decompress(kern_ctx *ctx, void *arg) {
    kern_tensor d = kern_tensor_2d(s_d, KERN_F32, 64, 64);
    return kern_sparse24_decompress(ctx, (const kern_sparse24 *)arg, &d);
}

KT_TEST(fault_sparse24) {
    kern_sparse24 *h = NULL, *sw = NULL;
    kern_tensor w = kern_tensor_2d(s_w, KERN_F32, 64, 64), pw = kern_tensor_2d(s_d, KERN_F32, 64, 64);
    kern_tensor v = kern_tensor_2d(s_vals, KERN_F32, 64, 32), m = kern_tensor_2d(s_meta, KERN_U8, 64, 8);
    kt_region rh = {&h, sizeof h, "*sw"}, ry = {s_y, sizeof s_y, "y"}, rd = {s_d, sizeof s_d, "out"};
    kern_ctx *c1 = kt_ctx(1, KERN_ISA_AUTO);
    fill(8, s_w, KERN_F32, KF_N(s_w));
    fill(9, s_x, KERN_F32, KF_N(s_x));
    fill(10, s_y, KERN_F32, KF_N(s_y));
    fill(11, s_d, KERN_F32, KF_N(s_d));
    KT_OK(kern_sparse24_prune(c1, &w, &pw, NULL));
    memcpy(s_w, s_d, sizeof s_w);
    KT_OK(kern_sparse24_compress(c1, &w, &sw, NULL));
    KT_OK(kern_sparse24_export(c1, sw, &v, &m, NULL));
    sweep("kern_sparse24_compress", op_s24_compress, &h, &rh, 1);
    sweep("kern_sparse24_import", op_s24_import, &h, &rh, 1);
    /* linear and decompress may need no allocation on one thread: the
     * sweep checks whatever they take */
    kt_fault_sweep("kern_sparse24_linear", 2, KERN_ISA_AUTO, op_s24_linear, sw, &ry, 1);
    kt_fault_sweep("kern_sparse24_decompress", 2, KERN_ISA_AUTO, op_s24_decompress, sw, &rd, 1);
    kern_sparse24_free(c1, sw);
}

/* ============================================================== norm */

static float n_x[37 * 100], n_out[37 * 100], n_w[100], n_b[100], n_mean[37], n_rstd[37];
static float n_dy[37 * 100], n_dx[37 * 100], n_dw[100], n_db[100];
static uint16_t n_b16[100];

static kern_status op_norm(kern_ctx *ctx, void *arg) {
    kern_tensor x = kern_tensor_2d(n_x, KERN_F32, 37, 100), o = kern_tensor_2d(n_out, KERN_F32, 37, 100);
    kern_tensor w = kern_tensor_1d(n_w, KERN_F32, 100);
    kern_tensor b = kern_tensor_1d(n_b16, KERN_BF16, 100);
    kern_tensor mean = kern_tensor_1d(n_mean, KERN_F32, 37), rstd = kern_tensor_1d(n_rstd, KERN_F32, 37);
    kern_norm_params p;
    (void)arg;
    memset(&p, 0, sizeof p);
    p.weight = &w;
    p.bias = &b;
    p.mean = &mean;
    p.rstd = &rstd;
    return kern_norm(ctx, &x, &o, &p);
}
static kern_status op_norm_bwd(kern_ctx *ctx, void *arg) {
    kern_tensor x = kern_tensor_2d(n_x, KERN_F32, 37, 100), dy = kern_tensor_2d(n_dy, KERN_F32, 37, 100);
    kern_tensor dx = kern_tensor_2d(n_dx, KERN_F32, 37, 100);
    kern_tensor w = kern_tensor_1d(n_w, KERN_F32, 100), b = kern_tensor_1d(n_b, KERN_F32, 100);
    kern_tensor dw = kern_tensor_1d(n_dw, KERN_F32, 100), db = kern_tensor_1d(n_db, KERN_F32, 100);
    kern_norm_backward_params p;
    (void)arg;
    memset(&p, 0, sizeof p);
    p.weight = &w;
    p.bias = &b;
    p.dweight = &dw;
    p.dbias = &db;
    return kern_norm_backward(ctx, &dy, &x, &dx, &p);
}
static kern_status op_bias_gelu(kern_ctx *ctx, void *arg) {
    kern_tensor x = kern_tensor_2d(n_x, KERN_F32, 37, 100), o = kern_tensor_2d(n_out, KERN_F32, 37, 100);
    kern_tensor b = kern_tensor_1d(n_b16, KERN_BF16, 100);
    (void)arg;
    return kern_bias_gelu(ctx, &x, &b, &o, KERN_ACT_GELU_TANH);
}

KT_TEST(fault_norm) {
    kt_region rf[3] = {{n_out, sizeof n_out, "out"}, {n_mean, sizeof n_mean, "mean"},
                       {n_rstd, sizeof n_rstd, "rstd"}};
    kt_region rb[3] = {{n_dx, sizeof n_dx, "dx"}, {n_dw, sizeof n_dw, "dweight"},
                       {n_db, sizeof n_db, "dbias"}};
    fill(12, n_x, KERN_F32, KF_N(n_x));
    fill(13, n_w, KERN_F32, KF_N(n_w));
    fill(14, n_b, KERN_F32, KF_N(n_b));
    fill(15, n_b16, KERN_BF16, KF_N(n_b16));
    fill(16, n_dy, KERN_F32, KF_N(n_dy));
    fill(17, n_out, KERN_F32, KF_N(n_out));
    fill(18, n_dx, KERN_F32, KF_N(n_dx));
    sweep("kern_norm", op_norm, NULL, rf, 3);
    sweep("kern_norm_backward", op_norm_bwd, NULL, rb, 3);
    sweep("kern_bias_gelu", op_bias_gelu, NULL, rf, 1);
}

/* ============================================================== sdpa */

/* B 1, H 2, Lq 3, Lk 1100 (split keys: a shared partial buffer), D 16. */
#define FQ 3
#define FK 1100
#define FD 16
static float a_q[2 * FQ * FD], a_k[2 * FK * FD], a_v[2 * FK * FD], a_o[2 * FQ * FD], a_lse[2 * FQ];
static float a_do[2 * FQ * FD], a_dq[2 * FQ * FD], a_dk[2 * FK * FD], a_dv[2 * FK * FD];
static int32_t a_cuq[3] = {0, 1, 3}, a_cuk[3] = {0, 600, 1100};

static void sdpa_views(kern_tensor *q, kern_tensor *k, kern_tensor *v, kern_tensor *o,
                       kern_tensor *lse) {
    *q = kern_tensor_4d(a_q, KERN_F32, 1, 2, FQ, FD);
    *k = kern_tensor_4d(a_k, KERN_F32, 1, 2, FK, FD);
    *v = kern_tensor_4d(a_v, KERN_F32, 1, 2, FK, FD);
    *o = kern_tensor_4d(a_o, KERN_F32, 1, 2, FQ, FD);
    *lse = kern_tensor_3d(a_lse, KERN_F32, 1, 2, FQ);
}
static kern_status op_sdpa(kern_ctx *ctx, void *arg) {
    kern_tensor q, k, v, o, lse;
    kern_sdpa_params p;
    (void)arg;
    sdpa_views(&q, &k, &v, &o, &lse);
    memset(&p, 0, sizeof p);
    p.lse = &lse;
    return kern_sdpa(ctx, &q, &k, &v, &o, &p);
}
static kern_status op_sdpa_bwd(kern_ctx *ctx, void *arg) {
    kern_tensor q, k, v, o, lse, dout, dq, dk, dv;
    (void)arg;
    sdpa_views(&q, &k, &v, &o, &lse);
    dout = kern_tensor_4d(a_do, KERN_F32, 1, 2, FQ, FD);
    dq = kern_tensor_4d(a_dq, KERN_F32, 1, 2, FQ, FD);
    dk = kern_tensor_4d(a_dk, KERN_F32, 1, 2, FK, FD);
    dv = kern_tensor_4d(a_dv, KERN_F32, 1, 2, FK, FD);
    return kern_sdpa_backward(ctx, &q, &k, &v, &o, &dout, &lse, &dq, &dk, &dv, NULL);
}
static kern_status op_sdpa_varlen(kern_ctx *ctx, void *arg) {
    kern_tensor q = kern_tensor_3d(a_q, KERN_F32, FQ, 2, FD), k = kern_tensor_3d(a_k, KERN_F32, FK, 2, FD);
    kern_tensor v = kern_tensor_3d(a_v, KERN_F32, FK, 2, FD), o = kern_tensor_3d(a_o, KERN_F32, FQ, 2, FD);
    kern_tensor cq = kern_tensor_1d(a_cuq, KERN_I32, 3), ck = kern_tensor_1d(a_cuk, KERN_I32, 3);
    (void)arg;
    return kern_sdpa_varlen(ctx, &q, &k, &v, &o, &cq, &ck, 2, 600, NULL);
}

KT_TEST(fault_sdpa) {
    kt_region rf[2] = {{a_o, sizeof a_o, "out"}, {a_lse, sizeof a_lse, "lse"}};
    kt_region rb[3] = {{a_dq, sizeof a_dq, "dq"}, {a_dk, sizeof a_dk, "dk"}, {a_dv, sizeof a_dv, "dv"}};
    fill(20, a_q, KERN_F32, KF_N(a_q));
    fill(21, a_k, KERN_F32, KF_N(a_k));
    fill(22, a_v, KERN_F32, KF_N(a_v));
    fill(23, a_do, KERN_F32, KF_N(a_do));
    fill(24, a_dq, KERN_F32, KF_N(a_dq));
    sweep("kern_sdpa", op_sdpa, NULL, rf, 2);
    KT_OK(op_sdpa(kt_ctx(1, KERN_ISA_AUTO), NULL)); /* o and lse for the backward */
    sweep("kern_sdpa_backward", op_sdpa_bwd, NULL, rb, 3);
    sweep("kern_sdpa_varlen", op_sdpa_varlen, NULL, rf, 1);
}

/* =========================================================== scatter */

#define SE 5000
#define SN 300
#define SF 8
static float c_self[SN * SF], c_src[SE * SF], c_out[SN * SF], c_g[SE * SF];
static int64_t c_idx[SE], c_arg[SN * SF], c_idx3[2 * 7 * 3];
static float c_s3[2 * 5 * 3], c_src3[2 * 7 * 3], c_o3[2 * 5 * 3];
static unsigned char c_plan_mem[65536];

static kern_status op_scatter_fast(kern_ctx *ctx, void *arg) {
    kern_tensor self = kern_tensor_2d(c_self, KERN_F32, SN, SF), src = kern_tensor_2d(c_src, KERN_F32, SE, SF);
    kern_tensor out = kern_tensor_2d(c_out, KERN_F32, SN, SF), idx = kern_tensor_1d(c_idx, KERN_I64, SE);
    kern_tensor arg_out = kern_tensor_2d(c_arg, KERN_I64, SN, SF);
    (void)arg;
    return kern_scatter_reduce(ctx, &self, 0, &idx, &src, KERN_REDUCE_AMAX, 1, &out, &arg_out, NULL);
}
static kern_status op_scatter_general(kern_ctx *ctx, void *arg) {
    kern_tensor self = kern_tensor_3d(c_s3, KERN_F32, 2, 5, 3), src = kern_tensor_3d(c_src3, KERN_F32, 2, 7, 3);
    kern_tensor out = kern_tensor_3d(c_o3, KERN_F32, 2, 5, 3), idx = kern_tensor_3d(c_idx3, KERN_I64, 2, 7, 3);
    (void)arg;
    return kern_scatter_reduce(ctx, &self, 1, &idx, &src, KERN_REDUCE_MEAN, 0, &out, NULL, NULL);
}
static kern_status op_gather(kern_ctx *ctx, void *arg) {
    kern_tensor src = kern_tensor_2d(c_self, KERN_F32, SN, SF), g = kern_tensor_2d(c_g, KERN_F32, SE, SF);
    kern_tensor idx = kern_tensor_2d(c_idx, KERN_I64, SE, 1);
    (void)arg;
    idx.shape[1] = SF; /* the GNN gather: one index per row, broadcast over features */
    idx.stride[1] = 0;
    return kern_gather(ctx, &src, 0, &idx, &g);
}
static kern_status op_scatter_planned(kern_ctx *ctx, void *arg) {
    kern_tensor self = kern_tensor_2d(c_self, KERN_F32, SN, SF), src = kern_tensor_2d(c_src, KERN_F32, SE, SF);
    kern_tensor out = kern_tensor_2d(c_out, KERN_F32, SN, SF);
    return kern_scatter_reduce_planned(ctx, (const kern_scatter_plan *)arg, &self, &src,
                                       KERN_REDUCE_SUM, 1, &out, NULL, NULL);
}

KT_TEST(fault_scatter) {
    kt_region rf[2] = {{c_out, sizeof c_out, "out"}, {c_arg, sizeof c_arg, "arg_out"}};
    kt_region rg = {c_o3, sizeof c_o3, "out"}, rga = {c_g, sizeof c_g, "out"};
    kern_tensor idx = kern_tensor_1d(c_idx, KERN_I64, SE);
    kern_scatter_plan plan;
    int i;
    fill(30, c_self, KERN_F32, KF_N(c_self));
    fill(31, c_src, KERN_F32, KF_N(c_src));
    fill(32, c_out, KERN_F32, KF_N(c_out));
    fill(33, c_s3, KERN_F32, KF_N(c_s3));
    fill(34, c_src3, KERN_F32, KF_N(c_src3));
    fill(35, c_o3, KERN_F32, KF_N(c_o3));
    for (i = 0; i < SE; i++) c_idx[i] = (int64_t)((uint64_t)i * 2654435761u % SN);
    for (i = 0; i < KF_N(c_idx3); i++) c_idx3[i] = i * 7 % 5;
    memset(c_arg, 0x5a, sizeof c_arg);
    sweep("kern_scatter_reduce (fast path)", op_scatter_fast, NULL, rf, 2);
    sweep("kern_scatter_reduce (general path)", op_scatter_general, NULL, &rg, 1);
    kt_fault_sweep("kern_gather", 2, KERN_ISA_AUTO, op_gather, NULL, &rga, 1);
    KT_CHECK(kern_scatter_plan_bytes(SN, SE) <= sizeof c_plan_mem);
    KT_OK(kern_scatter_plan_init(kt_ctx(1, KERN_ISA_AUTO), &idx, SN, c_plan_mem, sizeof c_plan_mem,
                                 &plan));
    kt_fault_sweep("kern_scatter_reduce_planned", 2, KERN_ISA_AUTO, op_scatter_planned, &plan, rf, 1);
}

/* ============================================================== spmm */

#define PN 200
#define PM 150
#define PZ 1500
#define PF 12
static int64_t p_row[PZ], p_col[PZ], p_rp[PN + 1], p_ci[PZ], p_rpT[PM + 1], p_ciT[PZ], p_perm[PZ];
static float p_val[PZ], p_v[PZ], p_vT[PZ], p_x[PM * PF], p_y[PN * PF], p_gy[PN * PF];
static float p_gx[PM * PF], p_gv[PZ];
static int64_t p_arg[PN * PF];

static kern_csr p_csr; /* kern_coo_to_csr's result (duplicates summed) */
static void csr_view(kern_csr *a) { *a = p_csr; }
typedef struct coo_out {
    kern_csr csr;
} coo_out;
static kern_status op_coo(kern_ctx *ctx, void *arg) {
    coo_out *o = (coo_out *)arg;
    return kern_coo_to_csr(ctx, PN, PM, PZ, p_row, p_col, p_val, KERN_I64, KERN_F32,
                           KERN_COO_SUM_DUPLICATES, &o->csr);
}
static kern_status op_transpose(kern_ctx *ctx, void *arg) {
    kern_csr a, *t = (kern_csr *)arg;
    csr_view(&a);
    return kern_csr_transpose(ctx, &a, t, p_perm);
}
static kern_status op_spmm(kern_ctx *ctx, void *arg) {
    kern_csr a;
    kern_tensor x = kern_tensor_2d(p_x, KERN_F32, PM, PF), y = kern_tensor_2d(p_y, KERN_F32, PN, PF);
    kern_tensor ao = kern_tensor_2d(p_arg, KERN_I64, PN, PF);
    (void)arg;
    csr_view(&a);
    return kern_spmm_reduce(ctx, &a, &x, &y, KERN_REDUCE_AMAX, &ao, NULL);
}
static kern_status op_spmm_bwd(kern_ctx *ctx, void *arg) {
    kern_csr a;
    kern_tensor x = kern_tensor_2d(p_x, KERN_F32, PM, PF), gy = kern_tensor_2d(p_gy, KERN_F32, PN, PF);
    kern_tensor gx = kern_tensor_2d(p_gx, KERN_F32, PM, PF), gv = kern_tensor_1d(p_gv, KERN_F32, p_csr.nnz);
    kern_tensor ao = kern_tensor_2d(p_arg, KERN_I64, PN, PF);
    int minmax = *(int *)arg;
    csr_view(&a);
    return kern_spmm_reduce_backward(ctx, &a, &x, &gy, minmax ? KERN_REDUCE_AMIN : KERN_REDUCE_MEAN,
                                     minmax ? &ao : NULL, &gx, &gv, NULL);
}

KT_TEST(fault_spmm) {
    coo_out co;
    kern_csr t, a;
    kern_tensor x = kern_tensor_2d(p_x, KERN_F32, PM, PF), y = kern_tensor_2d(p_y, KERN_F32, PN, PF);
    kern_tensor ao = kern_tensor_2d(p_arg, KERN_I64, PN, PF);
    kt_region rc[4] = {{&co, sizeof co, "out"}, {p_rp, sizeof p_rp, "out->rowptr"},
                       {p_ci, sizeof p_ci, "out->col"}, {p_v, sizeof p_v, "out->values"}};
    kt_region rt[5] = {{&t, sizeof t, "out"}, {p_rpT, sizeof p_rpT, "out->rowptr"},
                       {p_ciT, sizeof p_ciT, "out->col"}, {p_vT, sizeof p_vT, "out->values"},
                       {p_perm, sizeof p_perm, "perm"}};
    kt_region rs[2] = {{p_y, sizeof p_y, "out"}, {p_arg, sizeof p_arg, "arg_out"}};
    kt_region rb[2] = {{p_gx, sizeof p_gx, "grad_dense"}, {p_gv, sizeof p_gv, "grad_values"}};
    int i, minmax;
    for (i = 0; i < PZ; i++) {
        p_row[i] = (int64_t)((uint64_t)i * 2654435761u % PN);
        p_col[i] = (int64_t)((i * 37 + i / PN + (i % 3 == 0 ? 0 : i / 7)) % PM); /* a few repeats */
    }
    fill(40, p_val, KERN_F32, PZ);
    fill(41, p_x, KERN_F32, KF_N(p_x));
    fill(42, p_gy, KERN_F32, KF_N(p_gy));
    fill(43, p_gx, KERN_F32, KF_N(p_gx));
    memset(&co, 0, sizeof co);
    co.csr.rowptr = p_rp; co.csr.col = p_ci; co.csr.values = p_v;
    sweep("kern_coo_to_csr", op_coo, &co, rc, 4);
    KT_OK(op_coo(kt_ctx(1, KERN_ISA_AUTO), &co)); /* the CSR the other ops use */
    p_csr = co.csr;
    KT_CHECK(p_csr.nnz > PN && p_csr.nnz < PZ, "nnz %lld", (long long)p_csr.nnz);
    memset(&t, 0, sizeof t);
    t.rowptr = p_rpT; t.col = p_ciT; t.values = p_vT;
    sweep("kern_csr_transpose", op_transpose, &t, rt, 5);
    memset(p_arg, 0x5a, sizeof p_arg);
    kt_fault_sweep("kern_spmm_reduce", 2, KERN_ISA_AUTO, op_spmm, NULL, rs, 2);
    csr_view(&a);
    KT_OK(kern_spmm_reduce(kt_ctx(1, KERN_ISA_AUTO), &a, &x, &y, KERN_REDUCE_AMIN, &ao, NULL));
    for (minmax = 0; minmax <= 1; minmax++)
        sweep(minmax ? "kern_spmm_reduce_backward (amin)" : "kern_spmm_reduce_backward (mean)",
              op_spmm_bwd, &minmax, rb, 2);
}

KT_MAIN()
