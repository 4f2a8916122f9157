/* bench_qgemm.c — family `qgemm`: int8 dynamic-quantization linear layers.
 *
 * Case strings: "int8/M<M>/N<N>/K<K>"; work = 2*M*N*K int8 ops (peak kind
 * INT8: the vpdpbusd peak, or on AVX2 without VNNI the vpmaddubsw +
 * vpmaddwd peak, bench/peaks.c); for M <= 16 the bytes counter is the int8
 * weight N*K, so GB/s reads as "weight streamed per second" (the same count
 * for every impl; the f32 baselines really stream 4x that, see the
 * `weight_bytes_read` counter).
 *
 * Impls (f32 x [M,K] in, f32 y [M,N] out, bias, weights prepacked outside
 * the timed loop):
 *   kern             kern_qlinear end to end (per-token quantization of x
 *                    fused into packing, int8 GEMM, dequant + bias epilogue)
 *   kern_int_mm      kern_gemm_s8s8s32 on int8 inputs (torch._int_mm
 *                    semantics: packs both operands every call) — the
 *                    like-for-like of torch_int_mm, and a lower bound on
 *                    the int8 core
 *   kern_int_mm_packed  kern_gemm_s8s8s32 with b packed once outside the
 *                    timed loop (kern_gemm_s8s8s32_pack_b, params.packed_b):
 *                    only a is packed per call
 *   kern_f32         our f32 kern_gemm with the weight prepacked by
 *                    kern_gemm_pack_b, bias fused
 *   openblas_f32     cblas_sgemm, the f32 baseline in the same run
 *   onednn           oneDNN 2.6 s8s8 -> f32 matmul, weights prepacked, x
 *                    quantized per tensor (kern_quantize_per_token, timed).
 *                    The per-channel output scale s_x*s_w[n] and the bias
 *                    are binary post-ops with [1,N] tensors: oneDNN 2.6
 *                    sends runtime output scales to its slower gemm:jit,
 *                    while this form stays on brg:avx512_core_vnni.
 *   onednn_rowscale  per-token x scales. A per-row ([M,1]) binary post-op
 *                    makes oneDNN 2.6 fall back to ref_int8:any (~1000x
 *                    slower), and 2.6 has no source scales, so this is its
 *                    best expression: the same brgemm matmul (post-op mul by
 *                    s_w[n]) followed by a separate oneDNN binary primitive
 *                    y = y * s_x[M,1] with a binary-add post-op for the bias
 *                    (one extra pass over y).
 * Python peers (bench/peers/qgemm.py): torch (dynamic quantized Linear),
 * torch_int_mm (torch._int_mm), onnxruntime (DynamicQuantizeMatMul).
 */
#include "kern_qgemm.h"
#include "kern_gemm.h"
#include "kbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KBENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef KBENCH_HAVE_DNNL
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#endif

typedef struct qcase {
    int64_t M, N, K;
    char name[64];
} qcase;

static qcase qcases[] = {
    {2048, 4096, 4096, ""}, {512, 4096, 4096, ""}, {128, 768, 3072, ""},
    {16, 4096, 4096, ""},   {1, 4096, 4096, ""},   {4096, 4096, 4096, ""},
};
#define NCASES ((int)(sizeof qcases / sizeof qcases[0]))

/* Buffers of the case being run (one case at a time: the largest needs
 * ~350 MB, so a new case releases the previous one's). */
static struct {
    const qcase *c;
    float *x, *w, *bias, *y;
    int8_t *xq8, *wq8, *wkn8; /* x int8 [M,K]; w int8 [N,K]; w int8 [K,N] */
    float *sw;
    int32_t *c32;
    kern_qweight *qw;
    kern_gemm_packed_b *pw;
    kern_gemm_s8s8s32_packed_b *pb8; /* wkn8 packed */
} cur;


static void release_case(void) {
    free(cur.x);
    free(cur.w);
    free(cur.bias);
    free(cur.y);
    free(cur.xq8);
    free(cur.wq8);
    free(cur.wkn8);
    free(cur.sw);
    free(cur.c32);
    kern_qweight_free(NULL, cur.qw);
    kern_gemm_packed_b_free(NULL, cur.pw);
    kern_gemm_s8s8s32_packed_b_free(NULL, cur.pb8);
    memset(&cur, 0, sizeof cur);
}

static int setup_case(const qcase *c) {
    int64_t M = c->M, N = c->N, K = c->K, i, n;
    kern_tensor tw, tu, ts;
    if (cur.c == c) return 1;
    release_case();
    cur.c = c;
    cur.x = (float *)kbench_aligned((size_t)(M * K) * 4);
    cur.w = (float *)kbench_aligned((size_t)(N * K) * 4);
    cur.bias = (float *)kbench_aligned((size_t)N * 4);
    cur.y = (float *)kbench_aligned((size_t)(M * N) * 4);
    cur.xq8 = (int8_t *)kbench_aligned((size_t)(M * K));
    cur.wq8 = (int8_t *)kbench_aligned((size_t)(N * K));
    cur.wkn8 = (int8_t *)kbench_aligned((size_t)(N * K));
    cur.sw = (float *)kbench_aligned((size_t)N * 4);
    cur.c32 = (int32_t *)kbench_aligned((size_t)(M * N) * 4);
    if (!cur.x || !cur.w || !cur.bias || !cur.y || !cur.xq8 || !cur.wq8 || !cur.wkn8 || !cur.sw ||
        !cur.c32)
        return 0;
    kbench_fill(cur.x, KERN_F32, M * K, 1);
    kbench_fill(cur.w, KERN_F32, N * K, 2);
    kbench_fill(cur.bias, KERN_F32, N, 3);
    kbench_fill(cur.y, KERN_F32, M * N, 4);
    kbench_fill(cur.xq8, KERN_I8, M * K, 5);
    /* one packed weight, for the path the (default) context runs */
    tw = kern_tensor_2d(cur.w, KERN_F32, N, K);
    if (kern_qweight_pack(NULL, &tw, &cur.qw, NULL) != KERN_OK) return 0;
    tu = kern_tensor_2d(cur.wq8, KERN_I8, N, K);
    ts = kern_tensor_1d(cur.sw, KERN_F32, N);
    if (kern_qweight_unpack(cur.qw, &tu, &ts) != KERN_OK) return 0;
    for (n = 0; n < N; n++)
        for (i = 0; i < K; i++) cur.wkn8[i * N + n] = cur.wq8[n * K + i];
    return 1;
}

static void set_work(kbench_state *st, const qcase *c, double weight_bytes_read) {
    kbench_set_flops(st, 2.0 * (double)c->M * (double)c->N * (double)c->K);
    if (c->M <= 16) {
        kbench_set_bytes(st, (double)c->N * (double)c->K);
        kbench_counter(st, "weight_bytes_read", weight_bytes_read);
    }
}

static void run_kern(kbench_state *st, void *user) {
    const qcase *c = (const qcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_tensor tx, ty, tb;
    kern_qlinear_params qp;
    if (!setup_case(c)) {
        kbench_skip(st, "allocation or packing failed");
        return;
    }
    /* the shared packed weight was made for the default context's path;
     * every kbench context runs the same one */
    tx = kern_tensor_2d(cur.x, KERN_F32, c->M, c->K);
    ty = kern_tensor_2d(cur.y, KERN_F32, c->M, c->N);
    tb = kern_tensor_1d(cur.bias, KERN_F32, c->N);
    memset(&qp, 0, sizeof qp);
    qp.epilogue.bias = &tb;
    if (kern_qlinear(ctx, &tx, cur.qw, &ty, &qp) != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    while (kbench_next(st)) kern_qlinear(ctx, &tx, cur.qw, &ty, &qp);
    kbench_use(cur.y);
    set_work(st, c, (double)c->N * (double)c->K);
}

static void run_kern_int_mm(kbench_state *st, void *user) {
    const qcase *c = (const qcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_tensor ta, tb, tc;
    if (!setup_case(c)) {
        kbench_skip(st, "allocation failed");
        return;
    }
    ta = kern_tensor_2d(cur.xq8, KERN_I8, c->M, c->K);
    tb = kern_tensor_2d(cur.wkn8, KERN_I8, c->K, c->N);
    tc = kern_tensor_2d(cur.c32, KERN_I32, c->M, c->N);
    if (kern_gemm_s8s8s32(ctx, &ta, &tb, &tc, NULL) != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    while (kbench_next(st)) kern_gemm_s8s8s32(ctx, &ta, &tb, &tc, NULL);
    kbench_use(cur.c32);
    set_work(st, c, (double)c->N * (double)c->K);
}

static void run_kern_int_mm_packed(kbench_state *st, void *user) {
    const qcase *c = (const qcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_tensor ta, tb, tc;
    kern_gemm_s8s8s32_params p;
    if (!setup_case(c)) {
        kbench_skip(st, "allocation failed");
        return;
    }
    if (!cur.pb8) {
        tb = kern_tensor_2d(cur.wkn8, KERN_I8, c->K, c->N);
        if (kern_gemm_s8s8s32_pack_b(NULL, &tb, &cur.pb8, NULL) != KERN_OK) {
            kbench_skip(st, kern_last_error());
            return;
        }
    }
    ta = kern_tensor_2d(cur.xq8, KERN_I8, c->M, c->K);
    tc = kern_tensor_2d(cur.c32, KERN_I32, c->M, c->N);
    memset(&p, 0, sizeof p);
    p.packed_b = cur.pb8;
    if (kern_gemm_s8s8s32(ctx, &ta, NULL, &tc, &p) != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    while (kbench_next(st)) kern_gemm_s8s8s32(ctx, &ta, NULL, &tc, &p);
    kbench_use(cur.c32);
    set_work(st, c, (double)c->N * (double)c->K);
}

static void run_kern_f32(kbench_state *st, void *user) {
    const qcase *c = (const qcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_tensor tx, ty, tb, tw;
    kern_gemm_params p;
    if (!setup_case(c)) {
        kbench_skip(st, "allocation failed");
        return;
    }
    if (!cur.pw) {
        tw = kern_tensor_2d(cur.w, KERN_F32, c->N, c->K);
        kern_gemm_pack_params pp;
        memset(&pp, 0, sizeof pp);
        pp.trans_b = 1;
        if (kern_gemm_pack_b(NULL, &tw, &cur.pw, &pp) != KERN_OK) {
            kbench_skip(st, kern_last_error());
            return;
        }
    }
    tx = kern_tensor_2d(cur.x, KERN_F32, c->M, c->K);
    ty = kern_tensor_2d(cur.y, KERN_F32, c->M, c->N);
    tb = kern_tensor_1d(cur.bias, KERN_F32, c->N);
    memset(&p, 0, sizeof p);
    p.epilogue.bias = &tb;
    p.packed_b = cur.pw;
    if (kern_gemm(ctx, &tx, NULL, &ty, &p) != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    while (kbench_next(st)) kern_gemm(ctx, &tx, NULL, &ty, &p);
    kbench_use(cur.y);
    set_work(st, c, 4.0 * (double)c->N * (double)c->K);
}

#ifdef KBENCH_HAVE_OPENBLAS
static void run_openblas(kbench_state *st, void *user) {
    const qcase *c = (const qcase *)user;
    int M = (int)c->M, N = (int)c->N, K = (int)c->K;
    if (!setup_case(c)) {
        kbench_skip(st, "allocation failed");
        return;
    }
    openblas_set_num_threads(kbench_threads(st));
    while (kbench_next(st))
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, cur.x, K, cur.w, K,
                    0.0f, cur.y, N);
    kbench_use(cur.y);
    set_work(st, c, 4.0 * (double)c->N * (double)c->K);
}
#endif

#ifdef KBENCH_HAVE_DNNL
/* oneDNN here is built with OpenMP; its thread count is set through the
 * libgomp that libdnnl already loaded. */
static void dnnl_threads(int n) {
    typedef void (*setfn)(int);
    static setfn fn;
    static int looked;
    if (!looked) {
        void *p = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
        looked = 1;
        memcpy(&fn, &p, sizeof p);
    }
    if (fn) fn(n);
}

#define DNNL_TRY(x)                                                           \
    do {                                                                      \
        if ((x) != dnnl_success) {                                            \
            snprintf(why, sizeof why, "oneDNN call failed: %s", #x);          \
            goto done;                                                        \
        }                                                                     \
    } while (0)

static void run_onednn_impl(kbench_state *st, const qcase *c, int rowscale) {
    static dnnl_engine_t engine;
    static dnnl_stream_t stream;
    char why[256] = "";
    int64_t M = c->M, N = c->N, K = c->K, n;
    int threads = kbench_threads(st);
    kern_ctx *ctx = kbench_ctx(threads);
    dnnl_memory_desc_t src_md, wei_user_md, wei_any_md, dst_md, rs_md, b_md;
    dnnl_matmul_desc_t mm;
    dnnl_binary_desc_t bd;
    dnnl_primitive_attr_t attr = NULL, battr = NULL;
    dnnl_post_ops_t po = NULL, bpo = NULL;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL, bpd = NULL;
    dnnl_primitive_t prim = NULL, reo = NULL, bprim = NULL;
    dnnl_memory_t m_src = NULL, m_wu = NULL, m_w = NULL, m_dst = NULL, m_sc = NULL, m_rs = NULL,
                  m_b = NULL;
    float *xs = NULL, *outsc = NULL;
    dnnl_exec_arg_t args[6], bargs[4];
    int na = 0, nb = 0;
    kern_tensor tx, tq, ts;
    kern_quant_params qp;
    const char *impl = NULL, *bimpl = NULL;
    if (!setup_case(c)) {
        kbench_skip(st, "allocation failed");
        return;
    }
    dnnl_threads(threads);
    if (!engine) {
        if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
            dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
            kbench_skip(st, "oneDNN engine");
            return;
        }
    }
    xs = (float *)kbench_aligned((size_t)M * 4);
    outsc = (float *)kbench_aligned((size_t)N * 4);
    {
        dnnl_dims_t sd = {M, K}, wd = {K, N}, dd = {M, N}, rd = {M, 1}, bdims = {1, N};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_md, 2, sd, dnnl_s8, dnnl_ab));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei_user_md, 2, wd, dnnl_s8, dnnl_ab));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei_any_md, 2, wd, dnnl_s8, dnnl_format_tag_any));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_md, 2, dd, dnnl_f32, dnnl_ab));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&rs_md, 2, rd, dnnl_f32, dnnl_ab));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&b_md, 2, bdims, dnnl_f32, dnnl_ab));
    }
    /* matmul: acc * sc[n] (+ bias[n] unless rowscale) */
    DNNL_TRY(dnnl_matmul_desc_init(&mm, &src_md, &wei_any_md, NULL, &dst_md));
    DNNL_TRY(dnnl_primitive_attr_create(&attr));
    DNNL_TRY(dnnl_post_ops_create(&po));
    DNNL_TRY(dnnl_post_ops_append_binary(po, dnnl_binary_mul, &b_md));
    if (!rowscale) DNNL_TRY(dnnl_post_ops_append_binary(po, dnnl_binary_add, &b_md));
    DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, po));
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &mm, attr, engine, NULL));
    DNNL_TRY(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, (void *)&impl));
    DNNL_TRY(dnnl_primitive_create(&prim, pd));
    /* memories; the weight is reordered (prepacked) once, untimed */
    DNNL_TRY(dnnl_memory_create(&m_src, &src_md, engine, cur.xq8));
    DNNL_TRY(dnnl_memory_create(&m_wu, &wei_user_md, engine, cur.wkn8));
    DNNL_TRY(dnnl_memory_create(&m_w, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                                engine, DNNL_MEMORY_ALLOCATE));
    DNNL_TRY(dnnl_memory_create(&m_dst, &dst_md, engine, cur.y));
    DNNL_TRY(dnnl_memory_create(&m_sc, &b_md, engine, outsc));
    DNNL_TRY(dnnl_memory_create(&m_rs, &rs_md, engine, xs));
    DNNL_TRY(dnnl_memory_create(&m_b, &b_md, engine, cur.bias));
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&rpd, &wei_user_md, engine,
                                                dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                                                engine, NULL));
    DNNL_TRY(dnnl_primitive_create(&reo, rpd));
    args[0].arg = DNNL_ARG_FROM;
    args[0].memory = m_wu;
    args[1].arg = DNNL_ARG_TO;
    args[1].memory = m_w;
    DNNL_TRY(dnnl_primitive_execute(reo, stream, 2, args));
    DNNL_TRY(dnnl_stream_wait(stream));
    args[na].arg = DNNL_ARG_SRC; args[na++].memory = m_src;
    args[na].arg = DNNL_ARG_WEIGHTS; args[na++].memory = m_w;
    args[na].arg = DNNL_ARG_DST; args[na++].memory = m_dst;
    args[na].arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1; args[na++].memory = m_sc;
    if (!rowscale) {
        args[na].arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1;
        args[na++].memory = m_b;
    } else {
        /* y = y * s_x[m] (+ bias[n] as the binary primitive's post-op),
         * in place */
        DNNL_TRY(dnnl_binary_desc_init(&bd, dnnl_binary_mul, &dst_md, &rs_md, &dst_md));
        DNNL_TRY(dnnl_primitive_attr_create(&battr));
        DNNL_TRY(dnnl_post_ops_create(&bpo));
        DNNL_TRY(dnnl_post_ops_append_binary(bpo, dnnl_binary_add, &b_md));
        DNNL_TRY(dnnl_primitive_attr_set_post_ops(battr, bpo));
        DNNL_TRY(dnnl_primitive_desc_create(&bpd, &bd, battr, engine, NULL));
        DNNL_TRY(dnnl_primitive_desc_query(bpd, dnnl_query_impl_info_str, 0, (void *)&bimpl));
        DNNL_TRY(dnnl_primitive_create(&bprim, bpd));
        bargs[nb].arg = DNNL_ARG_SRC_0; bargs[nb++].memory = m_dst;
        bargs[nb].arg = DNNL_ARG_SRC_1; bargs[nb++].memory = m_rs;
        bargs[nb].arg = DNNL_ARG_DST; bargs[nb++].memory = m_dst;
        bargs[nb].arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1; bargs[nb++].memory = m_b;
    }
    /* x quantization is part of the work (dynamic quantization): kern's
     * quantizer, per tensor or per token */
    tx = kern_tensor_2d(cur.x, KERN_F32, M, K);
    tq = kern_tensor_2d(cur.xq8, KERN_I8, M, K);
    ts = kern_tensor_1d(xs, KERN_F32, rowscale ? M : 1);
    memset(&qp, 0, sizeof qp);
    qp.per_tensor = !rowscale;
    while (kbench_next(st)) {
        kern_quantize_per_token(ctx, &tx, &tq, &ts, &qp);
        for (n = 0; n < N; n++) outsc[n] = rowscale ? cur.sw[n] : xs[0] * cur.sw[n];
        dnnl_primitive_execute(prim, stream, na, args);
        if (rowscale) dnnl_primitive_execute(bprim, stream, nb, bargs);
        dnnl_stream_wait(stream);
    }
    kbench_use(cur.y);
    set_work(st, c, (double)N * (double)K);
    {
        static char printed[2][NCASES];
        int ci = (int)(c - qcases);
        if (!printed[rowscale][ci]) {
            printed[rowscale][ci] = 1;
            fprintf(stderr, "qgemm: oneDNN %s %s: matmul \"%s\"%s%s%s\n",
                    rowscale ? "rowscale" : "outscale", c->name, impl ? impl : "?",
                    rowscale ? " + binary \"" : "", rowscale ? (bimpl ? bimpl : "?") : "",
                    rowscale ? "\"" : "");
        }
    }
done:
    if (why[0]) kbench_skip(st, why);
    dnnl_primitive_destroy(prim);
    dnnl_primitive_destroy(reo);
    dnnl_primitive_destroy(bprim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_primitive_desc_destroy(bpd);
    dnnl_post_ops_destroy(po);
    dnnl_post_ops_destroy(bpo);
    dnnl_primitive_attr_destroy(attr);
    dnnl_primitive_attr_destroy(battr);
    dnnl_memory_destroy(m_src);
    dnnl_memory_destroy(m_wu);
    dnnl_memory_destroy(m_w);
    dnnl_memory_destroy(m_dst);
    dnnl_memory_destroy(m_sc);
    dnnl_memory_destroy(m_rs);
    dnnl_memory_destroy(m_b);
    free(xs);
    free(outsc);
}
static void run_onednn(kbench_state *st, void *user) {
    run_onednn_impl(st, (const qcase *)user, 0);
}
static void run_onednn_rowscale(kbench_state *st, void *user) {
    run_onednn_impl(st, (const qcase *)user, 1);
}
#endif

KBENCH_INIT(qgemm) {
    int i, t;
    for (i = 0; i < NCASES; i++) {
        qcase *c = &qcases[i];
        snprintf(c->name, sizeof c->name, "int8/M%lld/N%lld/K%lld", (long long)c->M,
                 (long long)c->N, (long long)c->K);
        for (t = 1; t <= 2; t++) {
            kbench_add("qgemm", c->name, "kern", t, KBENCH_PEAK_INT8, run_kern, c);
            kbench_add("qgemm", c->name, "kern_int_mm", t, KBENCH_PEAK_INT8, run_kern_int_mm, c);
            kbench_add("qgemm", c->name, "kern_int_mm_packed", t, KBENCH_PEAK_INT8,
                       run_kern_int_mm_packed, c);
            kbench_add("qgemm", c->name, "kern_f32", t, KBENCH_PEAK_INT8, run_kern_f32, c);
#ifdef KBENCH_HAVE_OPENBLAS
            kbench_add("qgemm", c->name, "openblas_f32", t, KBENCH_PEAK_INT8, run_openblas, c);
#endif
#ifdef KBENCH_HAVE_DNNL
            kbench_add("qgemm", c->name, "onednn", t, KBENCH_PEAK_INT8, run_onednn, c);
            kbench_add("qgemm", c->name, "onednn_rowscale", t, KBENCH_PEAK_INT8,
                       run_onednn_rowscale, c);
#endif
        }
    }
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("qgemm", "int8/M2048/N4096/K4096");
    kbench_headline("qgemm", "int8/M16/N4096/K4096");
}
