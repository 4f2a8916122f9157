/* test_api.c — the public API vocabulary shared by every family (docs/api.md):
 * const-friendly tensor views, the kern_epilogue checks, caller workspaces
 * (every *_workspace_size: exactly that many bytes work, one byte less is
 * KERN_ERR_ARG), the *_info queries of packed handles, the *_defaults
 * functions and the options a family rejects as KERN_ERR_UNSUPPORTED. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern.h"
#include "kt.h"

/* ======================================================= tensor views */

/* Read-only data wraps without a cast (this file is C11 -Wall -Wextra;
 * tests/compile_check.sh compiles the same calls as C++17). */
static const float kt_const_weights[2 * 3 * 4] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                  13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                                  23, 24};

KT_TEST(const_views) {
    const float *w = kt_const_weights;
    const int64_t shape[3] = {2, 3, 4}, stride[3] = {12, 1, 3};
    kern_tensor a = kern_tensor_1d(w, KERN_F32, 24);
    kern_tensor b = kern_tensor_2d(w, KERN_F32, 6, 4);
    kern_tensor c = kern_tensor_3d(w, KERN_F32, 2, 3, 4);
    kern_tensor d = kern_tensor_4d(w, KERN_F32, 1, 2, 3, 4);
    kern_tensor e, f;
    KT_OK(kern_tensor_init(&e, w, KERN_F32, 3, shape));
    KT_OK(kern_tensor_init_strided(&f, w, KERN_F32, 3, shape, stride));
    KT_CHECK(a.data == (const void *)w && b.data == (const void *)w && c.data == (const void *)w);
    KT_CHECK(d.data == (const void *)w && e.data == (const void *)w && f.data == (const void *)w);
    KT_CHECK(c.ndim == 3 && c.shape[0] == 2 && c.shape[1] == 3 && c.shape[2] == 4);
    KT_CHECK(c.stride[0] == 12 && c.stride[1] == 4 && c.stride[2] == 1);
    KT_CHECK(kern_tensor_is_contiguous(&c) && kern_tensor_numel(&c) == 24);
    KT_CHECK(!memcmp(c.shape, e.shape, sizeof c.shape) && !memcmp(c.stride, e.stride, sizeof c.stride));
    KT_CHECK(f.stride[1] == 1 && f.stride[2] == 3 && !kern_tensor_is_contiguous(&f));
    {   /* an input view of const memory through an op: nothing is written */
        float out[24];
        kern_tensor o = kern_tensor_3d(out, KERN_F32, 2, 3, 4);
        KT_OK(kern_add(NULL, &c, &e, &o));
        for (int i = 0; i < 24; i++) KT_CHECK(out[i] == 2 * w[i], "i=%d", i);
    }
}

KT_TEST(tensor_init_messages_name_the_function) {
    float buf[4];
    kern_tensor t;
    int64_t sh[1] = {-1}, st[1] = {1};
    KT_ERROR(kern_tensor_init_strided(NULL, buf, KERN_F32, 1, sh, st), KERN_ERR_ARG,
             "kern_tensor_init_strided: t is NULL");
    KT_ERROR(kern_tensor_init_strided(&t, buf, KERN_F32, 9, sh, st), KERN_ERR_ARG,
             "kern_tensor_init_strided: ndim=9");
    KT_ERROR(kern_tensor_init_strided(&t, buf, KERN_F32, 1, NULL, st), KERN_ERR_ARG,
             "kern_tensor_init_strided: shape is NULL");
    KT_ERROR(kern_tensor_init_strided(&t, buf, KERN_F32, 1, sh, st), KERN_ERR_SHAPE,
             "kern_tensor_init_strided:");
    KT_ERROR(kern_tensor_init(&t, buf, KERN_F32, 1, sh), KERN_ERR_SHAPE,
             "kern_tensor_init: shape[0]=-1");
    KT_ERROR(kern_tensor_init(NULL, buf, KERN_F32, 1, sh), KERN_ERR_ARG, "kern_tensor_init: t");
}

/* ========================================================== epilogue */

KT_TEST(epilogue_defaults_and_checks) {
    kern_epilogue e;
    const unsigned gelu_only = 1u << KERN_ACT_NONE | 1u << KERN_ACT_GELU | 1u << KERN_ACT_GELU_TANH;
    memset(&e, 0, sizeof e);
    kern_epilogue_defaults(&e);
    KT_CHECK(e.out_scale == 1.0f && e.act == KERN_ACT_NONE && !e.bias && !e.residual);
    e.out_scale = 0.5f;
    kern_epilogue_defaults(&e);
    KT_CHECK(e.out_scale == 0.5f, "an explicit value changed");
    kern_epilogue_defaults(NULL);
    KT_OK(kern__epilogue_check(NULL, "kt_op", 0, 0, 0));
    memset(&e, 0, sizeof e);
    KT_OK(kern__epilogue_check(&e, "kt_op", gelu_only, 0, 0));
    e.out_scale = 1.0f;
    KT_OK(kern__epilogue_check(&e, "kt_op", gelu_only, 0, 0));
    e.act = (kern_act)9;
    KT_ERROR(kern__epilogue_check(&e, "kt_op", gelu_only, 0, 0), KERN_ERR_ARG,
             "kt_op: params.epilogue.act=9 is not a kern_act");
    e.act = KERN_ACT_SILU;
    KT_ERROR(kern__epilogue_check(&e, "kt_op", gelu_only, 0, 0), KERN_ERR_UNSUPPORTED,
             "act=silu is not supported by this op (it supports none, gelu, gelu_tanh)");
    e.act = KERN_ACT_NONE;
    e.bias_per_row = 1;
    KT_ERROR(kern__epilogue_check(&e, "kt_op", gelu_only, 0, 0), KERN_ERR_UNSUPPORTED,
             "bias_per_row");
    KT_OK(kern__epilogue_check(&e, "kt_op", gelu_only, 1, 0));
    e.out_scale = 2.0f;
    KT_ERROR(kern__epilogue_check(&e, "kt_op", gelu_only, 1, 0), KERN_ERR_UNSUPPORTED,
             "out_scale=2");
    KT_OK(kern__epilogue_check(&e, "kt_op", gelu_only, 1, 1));
}

/* =================================================== caller workspaces */

KT_TEST(op_workspace_mechanism) {
    kern_ctx *ctx = kt_ctx(3, KERN_ISA_AUTO), *c = ctx;
    size_t need = kern__op_workspace_bytes(ctx, 100, 10);
    char *mem = (char *)malloc(need + 1);
    KT_CHECK(need == 64 + 128 + 3 * 64, "need=%zu", need);
    KT_CHECK(kern__op_workspace_bytes(ctx, 0, 0) == 0);
    KT_CHECK(kern__op_workspace_bytes(ctx, (size_t)-1, 0) == (size_t)-1);
    KT_CHECK(kern__op_workspace_bytes(ctx, 0, (size_t)-1 / 2) == (size_t)-1);
    KT_OK(kern__op_begin(&c, "kt_ws"));
    KT_ERROR(kern__op_workspace(ctx, "kt_ws", mem, need - 1, 100, 10), KERN_ERR_ARG,
             "kt_ws: params.workspace_size=");
    KT_OK(kern__op_workspace(ctx, "kt_ws", mem + 1, need, 100, 10));
    {
        char *s = (char *)kern__workspace(ctx, 100);
        KT_CHECK(s >= mem + 1 && (uintptr_t)s % 64 == 0);
        KT_CHECK(kern__workspace(ctx, 101 + 27) == s, "a request within the rounded block");
        KT_CHECK(kern__workspace(ctx, 129) == NULL, "a request above the declared size");
        KT_OK(kern__reserve_thread_scratch(ctx, 10));
        KT_STATUS(kern__reserve_thread_scratch(ctx, 65), KERN_ERR_NOMEM);
        for (int t = 0; t < 3; t++) {
            char *p = (char *)kern__thread_scratch(ctx, t);
            KT_CHECK(p == s + 128 + 64 * t, "thread %d", t);
            KT_CHECK(p + 64 <= mem + 1 + need);
        }
    }
    kern__op_end(c);
    KT_OK(kern__op_begin(&c, "kt_ws"));
    {   /* after the op the context's own scratch is back */
        char *s = (char *)kern__workspace(ctx, 100);
        KT_CHECK(s && (s < mem || s >= mem + need + 1));
    }
    kern__op_end(c);
    free(mem);
}

/* The caller-workspace contract of one op: on a fresh context whose
 * allocator counts, a run with a workspace of exactly *_workspace_size
 * bytes (misaligned on purpose) succeeds, allocates nothing from the
 * context, stays inside the buffer and gives the result of a run on the
 * context's own scratch; one byte less is KERN_ERR_ARG with nothing
 * written. `out` (out_bytes, f32 unless out_f32 is 0: compared bytewise)
 * is the op's output. */
typedef struct ws_case {
    const char *name;
    kern_status (*size)(kern_ctx *ctx, void *st, size_t *bytes);
    kern_status (*run)(kern_ctx *ctx, void *st, void *ws, size_t wsz);
    void *st;
    void *out;
    size_t out_bytes;
    int out_f32;
    kern_isa isa; /* the context's cap (0 = the best this CPU has) */
} ws_case;

typedef struct ws_counter {
    int allocs;
} ws_counter;
static void *ws_alloc(void *user, size_t size, size_t align) {
    void *p = NULL;
    ((ws_counter *)user)->allocs++;
    if (posix_memalign(&p, align, size ? size : 1) != 0) return NULL;
    return p;
}
static void ws_free(void *user, void *p) {
    (void)user;
    free(p);
}

static void ws_check(const ws_case *c, int threads) {
    ws_counter cnt = {0};
    kern_ctx_params cp;
    kern_ctx *ctx = NULL;
    size_t bytes = 0, n = c->out_bytes;
    unsigned char *ref = (unsigned char *)malloc(n ? n : 1);
    unsigned char *snap = (unsigned char *)malloc(n ? n : 1);
    unsigned char *ws;
    kt_context("[%s threads=%d isa=%s]", c->name, threads, kern_isa_name(c->isa));
    memset(&cp, 0, sizeof cp);
    cp.n_threads = threads;
    cp.isa_cap = c->isa;
    cp.allocator.alloc = ws_alloc;
    cp.allocator.free = ws_free;
    cp.allocator.user = &cnt;
    KT_OK(kern_ctx_create(&cp, &ctx));
    if (!ctx) return;
    KT_OK(c->size(ctx, c->st, &bytes));
    KT_CHECK(bytes > 64, "%s needs %zu bytes: the case should need scratch", c->name, bytes);
    ws = (unsigned char *)kt_alloc_misaligned(bytes, 24, "workspace");
    {   /* exactly the size: no allocation from the context */
        int before = cnt.allocs;
        kt_poison(c->out, n);
        KT_OK(c->run(ctx, c->st, ws, bytes));
        KT_CHECK(cnt.allocs == before, "%s allocated %d times with a caller workspace", c->name,
                 cnt.allocs - before);
        memcpy(snap, c->out, n);
    }
    {   /* one byte less: rejected, nothing written */
        kt_poison(c->out, n);
        KT_ERROR(c->run(ctx, c->st, ws, bytes - 1), KERN_ERR_ARG, "workspace_size=");
        for (size_t i = 0; i < n; i++)
            if (((unsigned char *)c->out)[i] != 0xFF) {
                KT_CHECK(0, "%s wrote output byte %zu after rejecting the workspace", c->name, i);
                break;
            }
    }
    kt_poison(c->out, n);
    KT_OK(c->run(ctx, c->st, NULL, 0)); /* the context's scratch */
    memcpy(ref, c->out, n);
    if (c->out_f32) {
        double *want = (double *)malloc((n / 4 + 1) * sizeof(double));
        for (size_t i = 0; i < n / 4; i++) want[i] = ((const float *)(const void *)ref)[i];
        kt_assert_close(c->name, snap, KERN_F32, want, (int64_t)(n / 4), kt_tol(KERN_F32));
        free(want);
    } else {
        kt_assert_bytes_equal(c->name, snap, ref, n);
    }
    kt_free(ws);
    kern_ctx_destroy(ctx);
    free(ref);
    free(snap);
}

/* ------------------------------------------------------------- norm */

typedef struct norm_st {
    kern_tensor x, r, ro, y, w, b, mean, rstd, dy, dx, dw, db;
    kern_norm_params p;
    kern_norm_backward_params bp;
} norm_st;
static kern_status norm_size(kern_ctx *ctx, void *v, size_t *bytes) {
    norm_st *s = (norm_st *)v;
    return kern_norm_workspace_size(ctx, &s->x, &s->y, &s->p, bytes);
}
static kern_status norm_run(kern_ctx *ctx, void *v, void *ws, size_t wsz) {
    norm_st *s = (norm_st *)v;
    kern_norm_params p = s->p;
    p.workspace = ws;
    p.workspace_size = wsz;
    return kern_norm(ctx, &s->x, &s->y, &p);
}
static kern_status norm_bwd_size(kern_ctx *ctx, void *v, size_t *bytes) {
    norm_st *s = (norm_st *)v;
    return kern_norm_backward_workspace_size(ctx, &s->dy, &s->x, &s->dx, &s->bp, bytes);
}
static kern_status norm_bwd_run(kern_ctx *ctx, void *v, void *ws, size_t wsz) {
    norm_st *s = (norm_st *)v;
    kern_norm_backward_params p = s->bp;
    p.workspace = ws;
    p.workspace_size = wsz;
    return kern_norm_backward(ctx, &s->dy, &s->x, &s->dx, &p);
}

KT_TEST(workspace_norm) {
    enum { R = 37, H = 100 };
    static float x[R * H], r[R * H], y[R * H], w[H], b[H], dy[R * H], dx[R * H + 2 * H];
    static uint16_t wb[H];
    kt_rng g = kt_rng_make(1);
    norm_st s;
    ws_case c;
    kt_fill_normal(&g, x, KERN_F32, R * H, 1.0);
    kt_fill_normal(&g, r, KERN_F32, R * H, 1.0);
    kt_fill_normal(&g, w, KERN_F32, H, 1.0);
    kt_fill_normal(&g, b, KERN_F32, H, 1.0);
    kt_fill_normal(&g, dy, KERN_F32, R * H, 1.0);
    kt_fill_normal(&g, wb, KERN_BF16, H, 1.0);
    memset(&s, 0, sizeof s);
    s.x = kern_tensor_2d(x, KERN_F32, R, H);
    s.r = kern_tensor_2d(r, KERN_F32, R, H);
    s.y = kern_tensor_2d(y, KERN_F32, R, H);
    s.w = kern_tensor_1d(wb, KERN_BF16, H);
    s.b = kern_tensor_1d(b, KERN_F32, H);
    s.p.residual = &s.r;
    s.p.weight = &s.w;
    s.p.bias = &s.b;
    s.p.act = KERN_ACT_GELU;
    memset(&c, 0, sizeof c);
    c.name = "kern_norm";
    c.size = norm_size;
    c.run = norm_run;
    c.st = &s;
    c.out = y;
    c.out_bytes = sizeof y;
    c.out_f32 = 1;
    ws_check(&c, 1);
    ws_check(&c, 3);
    c.isa = KERN_ISA_SCALAR;
    ws_check(&c, 2);
    c.isa = KERN_ISA_AUTO;
    /* backward with dweight and dbias (block partials in the workspace);
     * dx, dweight, dbias share one output buffer for the comparison */
    s.dy = kern_tensor_2d(dy, KERN_F32, R, H);
    s.dx = kern_tensor_2d(dx, KERN_F32, R, H);
    s.dw = kern_tensor_1d(dx + R * H, KERN_F32, H);
    s.db = kern_tensor_1d(dx + R * H + H, KERN_F32, H);
    s.w = kern_tensor_1d(w, KERN_F32, H);
    s.bp.weight = &s.w;
    s.bp.bias = &s.b;
    s.bp.dweight = &s.dw;
    s.bp.dbias = &s.db;
    s.bp.act = KERN_ACT_GELU_TANH;
    c.name = "kern_norm_backward";
    c.size = norm_bwd_size;
    c.run = norm_bwd_run;
    c.out = dx;
    c.out_bytes = sizeof dx;
    ws_check(&c, 1);
    ws_check(&c, 2);
}

KT_TEST(norm_defaults_and_unsupported) {
    kern_norm_params p;
    kern_norm_backward_params bp;
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    kern_tensor xt = kern_tensor_2d(x, KERN_F32, 2, 4), yt = kern_tensor_2d(y, KERN_F32, 2, 4);
    memset(&p, 0, sizeof p);
    kern_norm_params_defaults(&p);
    KT_CHECK(p.eps == 1e-5f && p.eps_set == 1 && p.norm == KERN_NORM_LAYER && p.act == KERN_ACT_NONE);
    memset(&p, 0, sizeof p);
    p.eps = 0.5f;
    kern_norm_params_defaults(&p);
    KT_CHECK(p.eps == 0.5f && p.eps_set == 1);
    memset(&p, 0, sizeof p);
    p.eps_set = 1; /* a true zero */
    kern_norm_params_defaults(&p);
    KT_CHECK(p.eps == 0.0f && p.eps_set == 1);
    memset(&bp, 0, sizeof bp);
    kern_norm_backward_params_defaults(&bp);
    KT_CHECK(bp.eps == 1e-5f && bp.eps_set == 1);
    kern_norm_params_defaults(NULL);
    kern_norm_backward_params_defaults(NULL);
    {   /* the resolved params give the same result as the zero ones */
        float y2[8];
        kern_tensor y2t = kern_tensor_2d(y2, KERN_F32, 2, 4);
        memset(&p, 0, sizeof p);
        KT_OK(kern_norm(NULL, &xt, &yt, &p));
        kern_norm_params_defaults(&p);
        KT_OK(kern_norm(NULL, &xt, &y2t, &p));
        kt_assert_bytes_equal("defaults", y, y2, sizeof y);
    }
    {   /* SILU and RELU (KERN_ERR_UNSUPPORTED until the shared math layer):
         * the fused activation gives the bits of kern_norm then
         * kern_activation, and the backward runs */
        static const kern_act acts[2] = {KERN_ACT_SILU, KERN_ACT_RELU};
        float z[8], y2[8];
        kern_tensor zt = kern_tensor_2d(z, KERN_F32, 2, 4), y2t = kern_tensor_2d(y2, KERN_F32, 2, 4);
        int i;
        for (i = 0; i < 2; i++) {
            memset(&p, 0, sizeof p);
            p.act = acts[i];
            KT_OK(kern_norm(NULL, &xt, &yt, &p));
            p.act = KERN_ACT_NONE;
            KT_OK(kern_norm(NULL, &xt, &zt, &p));
            KT_OK(kern_activation(NULL, &zt, NULL, &y2t, acts[i]));
            kt_assert_bytes_equal("kern_norm(act) vs kern_norm + kern_activation", y, y2, sizeof y);
            memset(&bp, 0, sizeof bp);
            bp.act = acts[i];
            KT_OK(kern_norm_backward(NULL, &xt, &xt, &yt, &bp));
        }
    }
    memset(&p, 0, sizeof p);
    p.act = (kern_act)77;
    KT_ERROR(kern_norm(NULL, &xt, &yt, &p), KERN_ERR_ARG, "act");
    KT_ERROR(kern_gelu(NULL, &xt, &yt, KERN_ACT_SILU), KERN_ERR_ARG, "act=4 (silu)");
    KT_ERROR(kern_bias_gelu(NULL, &xt, NULL, &yt, (kern_act)0), KERN_ERR_ARG, "act=0 (none)");
    KT_ERROR(kern_gelu_backward(NULL, &xt, &xt, &yt, (kern_act)77), KERN_ERR_ARG, "act=77");
}

/* ------------------------------------------------------------- gemm */

typedef struct gemm_st {
    kern_tensor a, b, c, bias;
    kern_gemm_params p;
} gemm_st;
static kern_status gemm_size(kern_ctx *ctx, void *v, size_t *bytes) {
    gemm_st *s = (gemm_st *)v;
    return kern_gemm_workspace_size(ctx, &s->a, &s->b, &s->c, &s->p, bytes);
}
static kern_status gemm_run(kern_ctx *ctx, void *v, void *ws, size_t wsz) {
    gemm_st *s = (gemm_st *)v;
    kern_gemm_params p = s->p;
    p.workspace = ws;
    p.workspace_size = wsz;
    return kern_gemm(ctx, &s->a, &s->b, &s->c, &p);
}

KT_TEST(workspace_gemm) {
    enum { M = 70, N = 50, K = 300 };
    static float a[M * K], b[N * K], c[M * N], bias[N];
    kt_rng g = kt_rng_make(2);
    gemm_st s;
    ws_case wc;
    kt_fill_normal(&g, a, KERN_F32, M * K, 1.0);
    kt_fill_normal(&g, b, KERN_F32, N * K, 0.1);
    kt_fill_normal(&g, bias, KERN_F32, N, 1.0);
    memset(&s, 0, sizeof s);
    s.a = kern_tensor_2d(a, KERN_F32, M, K);
    s.b = kern_tensor_2d(b, KERN_F32, N, K);
    s.c = kern_tensor_2d(c, KERN_F32, M, N);
    s.bias = kern_tensor_1d(bias, KERN_F32, N);
    s.p.trans_b = 1;
    s.p.epilogue.bias = &s.bias;
    s.p.epilogue.act = KERN_ACT_SILU;
    memset(&wc, 0, sizeof wc);
    wc.name = "kern_gemm";
    wc.size = gemm_size;
    wc.run = gemm_run;
    wc.st = &s;
    wc.out = c;
    wc.out_bytes = sizeof c;
    wc.out_f32 = 1;
    ws_check(&wc, 1);
    ws_check(&wc, 2);
    wc.isa = KERN_ISA_SCALAR;
    ws_check(&wc, 2);
}

KT_TEST(gemm_pack_info_defaults) {
    enum { N = 40, K = 33 };
    static const float w[N * K] = {0};
    static uint16_t wb[N * K];
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, N, K); /* const weights, no cast */
    kern_tensor twb = kern_tensor_2d(wb, KERN_BF16, K, N);
    kern_gemm_pack_params pp;
    kern_gemm_packed_b *pb = NULL, *pbb = NULL;
    kern_gemm_packed_b_info info;
    kern_gemm_params p;
    memset(&pp, 0, sizeof pp);
    pp.trans_b = 1;
    KT_OK(kern_gemm_pack_b(NULL, &tw, &pb, &pp));
    KT_OK(kern_gemm_pack_b(NULL, &twb, &pbb, NULL));
    memset(&info, 0xAB, sizeof info);
    KT_OK(kern_gemm_packed_b_get_info(pb, &info));
    KT_CHECK(info.k == K && info.n == N && info.dtype == KERN_F32 && info.panel_dtype == KERN_F32);
    KT_CHECK(info.bytes >= (size_t)(N * K * 4), "bytes=%zu", info.bytes);
    KT_OK(kern_gemm_packed_b_get_info(pbb, &info));
    KT_CHECK(info.k == K && info.n == N && info.dtype == KERN_BF16 && info.panel_dtype == KERN_BF16);
    KT_CHECK(info.bytes >= (size_t)(N * K * 2), "bytes=%zu", info.bytes);
    KT_ERROR(kern_gemm_packed_b_get_info(NULL, &info), KERN_ERR_ARG, "not a packed B");
    KT_ERROR(kern_gemm_packed_b_get_info(pb, NULL), KERN_ERR_ARG, "out is NULL");
    kern_gemm_packed_b_free(NULL, pb);
    kern_gemm_packed_b_free(NULL, pbb);
    memset(&p, 0, sizeof p);
    kern_gemm_params_defaults(&p);
    KT_CHECK(p.alpha_set == 1 && p.alpha == 1.0f && p.beta == 0.0f && p.epilogue.out_scale == 1.0f);
    memset(&p, 0, sizeof p);
    p.alpha_set = 1; /* alpha = 0 is a real value */
    p.epilogue.out_scale = 3.0f;
    kern_gemm_params_defaults(&p);
    KT_CHECK(p.alpha_set == 1 && p.alpha == 0.0f && p.epilogue.out_scale == 3.0f);
    kern_gemm_params_defaults(NULL);
}

/* ------------------------------------------------------------ qgemm */

typedef struct qg_st {
    kern_tensor x, y, bias, res, xq, scales, zp, a, b, c;
    kern_qweight *qw;
    kern_gemm_s8s8s32_packed_b *pb; /* kern_gemm_s8s8s32 with b packed once */
    kern_qlinear_params p;
    kern_quant_params qp;
} qg_st;
static kern_status qlinear_size(kern_ctx *ctx, void *v, size_t *bytes) {
    qg_st *s = (qg_st *)v;
    return kern_qlinear_workspace_size(ctx, &s->x, s->qw, &s->y, &s->p, bytes);
}
static kern_status qlinear_run(kern_ctx *ctx, void *v, void *ws, size_t wsz) {
    qg_st *s = (qg_st *)v;
    kern_qlinear_params p = s->p;
    p.workspace = ws;
    p.workspace_size = wsz;
    return kern_qlinear(ctx, &s->x, s->qw, &s->y, &p);
}
static kern_status quant_size(kern_ctx *ctx, void *v, size_t *bytes) {
    qg_st *s = (qg_st *)v;
    return kern_quantize_per_token_workspace_size(ctx, &s->x, &s->xq, &s->scales, &s->qp, bytes);
}
static kern_status quant_run(kern_ctx *ctx, void *v, void *ws, size_t wsz) {
    qg_st *s = (qg_st *)v;
    kern_quant_params p = s->qp;
    p.workspace = ws;
    p.workspace_size = wsz;
    return kern_quantize_per_token(ctx, &s->x, &s->xq, &s->scales, &p);
}
static kern_status s8_size(kern_ctx *ctx, void *v, size_t *bytes) {
    qg_st *s = (qg_st *)v;
    kern_gemm_s8s8s32_params p;
    memset(&p, 0, sizeof p);
    p.packed_b = s->pb;
    return kern_gemm_s8s8s32_workspace_size(ctx, &s->a, s->pb ? NULL : &s->b, &s->c, &p, bytes);
}
static kern_status s8_run(kern_ctx *ctx, void *v, void *ws, size_t wsz) {
    qg_st *s = (qg_st *)v;
    kern_gemm_s8s8s32_params p;
    memset(&p, 0, sizeof p);
    p.packed_b = s->pb;
    p.workspace = ws;
    p.workspace_size = wsz;
    return kern_gemm_s8s8s32(ctx, &s->a, s->pb ? NULL : &s->b, &s->c, &p);
}

KT_TEST(workspace_qgemm) {
    enum { M = 45, N = 70, K = 130, QOFF = (M * K + 63) / 64 * 64 };
    static float x[M * K], w[N * K], y[M * N], bias[N], res[M * N];
    /* quantize outputs: codes, then scales (one buffer for the comparison) */
    static unsigned char qout[QOFF + 4 * M] __attribute__((aligned(64)));
    static int8_t a8[M * K], b8[K * N];
    static int32_t c32[M * N];
    kt_rng g = kt_rng_make(3);
    qg_st s;
    ws_case c;
    kern_tensor tw;
    int threads;
    kt_fill_normal(&g, x, KERN_F32, M * K, 1.0);
    kt_fill_normal(&g, w, KERN_F32, N * K, 1.0);
    kt_fill_normal(&g, bias, KERN_F32, N, 1.0);
    kt_fill_normal(&g, res, KERN_F32, M * N, 1.0);
    for (int i = 0; i < M * K; i++) a8[i] = (int8_t)kt_randint(&g, -128, 128);
    for (int i = 0; i < K * N; i++) b8[i] = (int8_t)kt_randint(&g, -128, 128);
    for (threads = 1; threads <= 2; threads++) {
        memset(&s, 0, sizeof s);
        s.x = kern_tensor_2d(x, KERN_F32, M, K);
        s.y = kern_tensor_2d(y, KERN_F32, M, N);
        s.bias = kern_tensor_1d(bias, KERN_F32, N);
        s.res = kern_tensor_2d(res, KERN_F32, M, N);
        tw = kern_tensor_2d(w, KERN_F32, N, K);
        /* packed for the default context's path; the test contexts run the
         * same path (no ISA cap) */
        KT_OK(kern_qweight_pack(NULL, &tw, &s.qw, NULL));
        if (!s.qw) return;
        s.p.epilogue.bias = &s.bias;
        s.p.epilogue.residual = &s.res;
        s.p.epilogue.act = KERN_ACT_GELU;
        memset(&c, 0, sizeof c);
        c.name = "kern_qlinear";
        c.size = qlinear_size;
        c.run = qlinear_run;
        c.st = &s;
        c.out = y;
        c.out_bytes = sizeof y;
        c.out_f32 = 1;
        ws_check(&c, threads);
        s.xq = kern_tensor_2d(qout, KERN_I8, M, K);
        s.scales = kern_tensor_1d(qout + QOFF, KERN_F32, M);
        c.name = "kern_quantize_per_token";
        c.size = quant_size;
        c.run = quant_run;
        c.out = qout;
        c.out_bytes = sizeof qout;
        c.out_f32 = 0;
        ws_check(&c, threads);
        s.qp.per_tensor = 1;
        s.scales = kern_tensor_1d(qout + QOFF, KERN_F32, 1);
        c.name = "kern_quantize_per_token per_tensor";
        c.out_bytes = QOFF + 4;
        ws_check(&c, threads);
        s.a = kern_tensor_2d(a8, KERN_I8, M, K);
        s.b = kern_tensor_2d(b8, KERN_I8, K, N);
        s.c = kern_tensor_2d(c32, KERN_I32, M, N);
        c.name = "kern_gemm_s8s8s32";
        c.size = s8_size;
        c.run = s8_run;
        c.out = c32;
        c.out_bytes = sizeof c32;
        ws_check(&c, threads);
        KT_OK(kern_gemm_s8s8s32_pack_b(NULL, &s.b, &s.pb, NULL));
        c.name = "kern_gemm_s8s8s32 packed_b";
        if (s.pb) ws_check(&c, threads);
        kern_gemm_s8s8s32_packed_b_free(NULL, s.pb);
        kern_qweight_free(NULL, s.qw);
    }
}

KT_TEST(qgemm_handle_info_defaults_unsupported) {
    enum { N = 40, K = 21 };
    static float w[N * K], x[3 * K], y[3 * N];
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, N, K);
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, 3, K), ty = kern_tensor_2d(y, KERN_F32, 3, N);
    kern_tensor bias = kern_tensor_1d(w, KERN_F32, 3);
    kern_qweight *qw = NULL;
    kern_qweight_info info;
    kern_qweight_params wp;
    kern_qlinear_params p;
    kt_rng g = kt_rng_make(4);
    kt_fill_normal(&g, w, KERN_F32, N * K, 1.0);
    kt_fill_normal(&g, x, KERN_F32, 3 * K, 1.0);
    KT_OK(kern_qweight_pack(NULL, &tw, &qw, NULL));
    if (!qw) return;
    memset(&info, 0xAB, sizeof info);
    KT_OK(kern_qweight_get_info(qw, &info));
    KT_CHECK(info.n == N && info.k == K && info.dtype == KERN_I8 && info.version == KERN_QWEIGHT_VERSION);
    KT_CHECK(info.isa == kern_qgemm_isa_for(NULL), "isa=%s", kern_qgemm_isa_name(info.isa));
    KT_CHECK(info.data_bytes == (size_t)(2 * 6 * 128), "data_bytes=%zu", info.data_bytes);
    KT_CHECK(info.bytes >= info.data_bytes + 2 * 4 * N, "bytes=%zu", info.bytes);
    KT_ERROR(kern_qweight_get_info(NULL, &info), KERN_ERR_ARG, "qw is NULL");
    KT_ERROR(kern_qweight_get_info(qw, NULL), KERN_ERR_ARG, "out is NULL");
    memset(&wp, 0, sizeof wp);
    kern_qweight_params_defaults(NULL, &wp);
    KT_CHECK(wp.isa == kern_qgemm_isa_for(NULL));
    wp.isa = KERN_QGEMM_ISA_SCALAR;
    kern_qweight_params_defaults(NULL, &wp);
    KT_CHECK(wp.isa == KERN_QGEMM_ISA_SCALAR, "an explicit isa changed");
    kern_qweight_params_defaults(NULL, NULL);
    memset(&p, 0, sizeof p);
    kern_qlinear_params_defaults(&p);
    KT_CHECK(p.epilogue.out_scale == 1.0f && p.epilogue.act == KERN_ACT_NONE);
    KT_OK(kern_qlinear(NULL, &tx, qw, &ty, &p)); /* out_scale 1 is the default */
    KT_OK(kern_qlinear(NULL, &tx, qw, &ty, NULL));
    /* the whole kern_epilogue runs on the int8 path (the shared epilogue;
     * values in test_qgemm.c): RELU / SILU, a per-row bias, out_scale */
    memset(&p, 0, sizeof p);
    p.epilogue.act = KERN_ACT_SILU;
    KT_OK(kern_qlinear(NULL, &tx, qw, &ty, &p));
    p.epilogue.act = KERN_ACT_RELU;
    p.epilogue.bias = &bias;
    p.epilogue.bias_per_row = 1;
    p.epilogue.out_scale = 0.5f;
    KT_OK(kern_qlinear(NULL, &tx, qw, &ty, &p));
    p.epilogue.act = (kern_act)KERN_ACT_COUNT;
    {
        size_t b = 0;
        KT_ERROR(kern_qlinear_workspace_size(NULL, &tx, qw, &ty, &p, &b), KERN_ERR_ARG,
                 "kern_qlinear_workspace_size: params.epilogue.act");
    }
    kern_qweight_free(NULL, qw);
}

/* --------------------------------------------------------- sparse24 */

typedef struct sp_st {
    kern_tensor x, y, bias;
    kern_sparse24 *sw;
    kern_sparse24_linear_params p;
} sp_st;
static kern_status sp_size(kern_ctx *ctx, void *v, size_t *bytes) {
    sp_st *s = (sp_st *)v;
    return kern_sparse24_linear_workspace_size(ctx, &s->x, s->sw, &s->y, &s->p, bytes);
}
static kern_status sp_run(kern_ctx *ctx, void *v, void *ws, size_t wsz) {
    sp_st *s = (sp_st *)v;
    kern_sparse24_linear_params p = s->p;
    p.workspace = ws;
    p.workspace_size = wsz;
    return kern_sparse24_linear(ctx, &s->x, s->sw, &s->y, &p);
}

KT_TEST(workspace_sparse24_linear) {
    enum { N = 48, K = 96, MBIG = 70 };
    static float w[N * K], x[MBIG * K + 64], y[MBIG * N], bias[N];
    static uint16_t wb[N * K], xb[MBIG * K];
    kt_rng g = kt_rng_make(5);
    sp_st s;
    ws_case c;
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, N, K);
    kern_tensor twb = kern_tensor_2d(wb, KERN_BF16, N, K);
    kern_sparse24 *swf = NULL, *swb = NULL;
    kt_fill_normal(&g, w, KERN_F32, N * K, 1.0);
    kt_fill_normal(&g, x, KERN_F32, MBIG * K + 64, 1.0);
    kt_fill_normal(&g, bias, KERN_F32, N, 1.0);
    kt_fill_normal(&g, xb, KERN_BF16, MBIG * K, 1.0);
    KT_OK(kern_sparse24_prune(NULL, &tw, &tw, NULL));
    for (int i = 0; i < N * K; i++) wb[i] = kern_f32_to_bf16(w[i]);
    KT_OK(kern_sparse24_compress(NULL, &tw, &swf, NULL));
    KT_OK(kern_sparse24_compress(NULL, &twb, &swb, NULL));
    if (!swf || !swb) return;
    memset(&c, 0, sizeof c);
    c.name = "kern_sparse24_linear";
    c.size = sp_size;
    c.run = sp_run;
    c.st = &s;
    c.out = y;
    c.out_f32 = 1;
    for (int m = 0; m < 3; m++) {
        /* M > 16: x panels shared + per-thread tiles; M <= 16 with a row
         * stride that is a multiple of 1 KiB: the de-aliased x copy; bf16
         * x with i8-free bf16 weights: the pair panels */
        int64_t M = m == 1 ? 5 : MBIG;
        memset(&s, 0, sizeof s);
        if (m == 0) s.x = kern_tensor_2d(x, KERN_F32, M, K);
        if (m == 1) {
            s.x = kern_tensor_2d(x, KERN_F32, M, K);
            s.x.stride[0] = 256; /* 1 KiB rows */
        }
        if (m == 2) s.x = kern_tensor_2d(xb, KERN_BF16, M, K);
        s.sw = m == 2 ? swb : swf;
        s.y = kern_tensor_2d(y, KERN_F32, M, N);
        s.bias = kern_tensor_1d(bias, KERN_F32, N);
        s.p.epilogue.bias = &s.bias;
        s.p.epilogue.act = KERN_ACT_GELU_TANH;
        c.out_bytes = (size_t)(M * N) * sizeof(float);
        ws_check(&c, 1);
        ws_check(&c, 2);
        c.isa = KERN_ISA_SCALAR; /* the scalar path: per-thread rows only */
        ws_check(&c, 2);
        c.isa = KERN_ISA_AUTO;
    }
    kern_sparse24_free(NULL, swf);
    kern_sparse24_free(NULL, swb);
}

KT_TEST(sparse24_handle_info_defaults_unsupported) {
    enum { N = 20, K = 10 };
    static float w[N * K], x[2 * K], y[2 * N];
    static int8_t vals[N * 6];
    static int32_t meta[N];
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, N, K);
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, 2, K), ty = kern_tensor_2d(y, KERN_F32, 2, N);
    kern_tensor bias = kern_tensor_1d(w, KERN_F32, N);
    kern_sparse24 *sw = NULL, *sq = NULL, *si = NULL;
    kern_sparse24_params sp;
    kern_sparse24_linear_params p;
    kern_sparse24_info info;
    kt_rng g = kt_rng_make(6);
    kt_fill_normal(&g, w, KERN_F32, N * K, 1.0);
    memset(&sp, 0, sizeof sp);
    sp.pad_k = 1;
    KT_OK(kern_sparse24_prune(NULL, &tw, &tw, &sp));
    KT_OK(kern_sparse24_compress(NULL, &tw, &sw, &sp));
    sp.quantize = KERN_I8;
    KT_OK(kern_sparse24_compress(NULL, &tw, &sq, &sp));
    if (!sw || !sq) return;
    memset(&info, 0xAB, sizeof info);
    KT_OK(kern_sparse24_get_info(sw, &info));
    KT_CHECK(info.n == N && info.k == K && info.k_padded == 12 && info.dtype == KERN_F32 &&
             !info.has_scales);
    KT_CHECK(info.bytes >= (size_t)(N * 6 * 4), "bytes=%zu", info.bytes);
    KT_OK(kern_sparse24_get_info(sq, &info));
    KT_CHECK(info.n == N && info.k == K && info.dtype == KERN_I8 && info.has_scales);
    KT_ERROR(kern_sparse24_get_info(NULL, &info), KERN_ERR_ARG, "sw is NULL");
    KT_ERROR(kern_sparse24_get_info(sw, NULL), KERN_ERR_ARG, "out is NULL");
    {   /* import: the same handle lifetime (row-major words, i8 values) */
        kern_tensor tv = kern_tensor_2d(vals, KERN_I8, N, 6);
        kern_tensor tm = kern_tensor_2d(meta, KERN_I32, N, 1);
        memset(&sp, 0, sizeof sp);
        sp.meta_layout = KERN_SPARSE24_META_ROWMAJOR;
        KT_OK(kern_sparse24_export(NULL, sq, &tv, &tm, &sp));
        sp.pad_k = 1;
        sp.k = K;
        KT_OK(kern_sparse24_import(NULL, &tv, &tm, &si, &sp));
        KT_OK(kern_sparse24_get_info(si, &info));
        KT_CHECK(info.n == N && info.k == K && info.dtype == KERN_I8);
        kern_sparse24_free(NULL, si);
    }
    memset(&p, 0, sizeof p);
    kern_sparse24_linear_params_defaults(&p);
    KT_CHECK(p.epilogue.out_scale == 1.0f);
    KT_OK(kern_sparse24_linear(NULL, &tx, sw, &ty, &p));
    KT_OK(kern_sparse24_linear(NULL, &tx, sw, &ty, NULL));
    memset(&p, 0, sizeof p);
    /* every option of kern_base.h's epilogue is supported (values:
     * test_sparse24's linear_epilogue_options and fused_equals_unfused) */
    p.epilogue.act = KERN_ACT_SILU;
    KT_OK(kern_sparse24_linear(NULL, &tx, sw, &ty, &p));
    p.epilogue.act = KERN_ACT_RELU;
    KT_OK(kern_sparse24_linear(NULL, &tx, sw, &ty, &p));
    p.epilogue.act = KERN_ACT_NONE;
    p.epilogue.bias = &bias;
    p.epilogue.bias_per_row = 1; /* a per-row bias is [M]; this one is [N] */
    KT_ERROR(kern_sparse24_linear(NULL, &tx, sw, &ty, &p), KERN_ERR_SHAPE, "(bias_per_row)");
    p.epilogue.bias_per_row = 0;
    p.epilogue.out_scale = -2.0f;
    KT_OK(kern_sparse24_linear(NULL, &tx, sw, &ty, &p));
    kern_sparse24_free(NULL, sw);
    kern_sparse24_free(NULL, sq);
}

/* ------------------------------------------------------------- sdpa */

typedef struct sdpa_st {
    kern_tensor q, k, v, o, lse, dout, dq, dk, dv, cuq, cuk;
    int64_t maxq, maxk;
    int varlen, bwd;
    kern_sdpa_params p;
} sdpa_st;
static kern_status sdpa_size(kern_ctx *ctx, void *vs, size_t *bytes) {
    sdpa_st *s = (sdpa_st *)vs;
    if (s->bwd && s->varlen)
        return kern_sdpa_varlen_backward_workspace_size(ctx, &s->q, &s->k, &s->v, &s->o, &s->dout,
                                                        &s->lse, &s->dq, &s->dk, &s->dv, &s->cuq,
                                                        &s->cuk, s->maxq, s->maxk, &s->p, bytes);
    if (s->bwd)
        return kern_sdpa_backward_workspace_size(ctx, &s->q, &s->k, &s->v, &s->o, &s->dout,
                                                 &s->lse, &s->dq, &s->dk, &s->dv, &s->p, bytes);
    if (s->varlen)
        return kern_sdpa_varlen_workspace_size(ctx, &s->q, &s->k, &s->v, &s->o, &s->cuq, &s->cuk,
                                               s->maxq, s->maxk, &s->p, bytes);
    return kern_sdpa_workspace_size(ctx, &s->q, &s->k, &s->v, &s->o, &s->p, bytes);
}
static kern_status sdpa_run(kern_ctx *ctx, void *vs, void *ws, size_t wsz) {
    sdpa_st *s = (sdpa_st *)vs;
    kern_sdpa_params p = s->p;
    p.workspace = ws;
    p.workspace_size = wsz;
    if (s->bwd && s->varlen)
        return kern_sdpa_varlen_backward(ctx, &s->q, &s->k, &s->v, &s->o, &s->dout, &s->lse,
                                         &s->dq, &s->dk, &s->dv, &s->cuq, &s->cuk, s->maxq,
                                         s->maxk, &p);
    if (s->bwd)
        return kern_sdpa_backward(ctx, &s->q, &s->k, &s->v, &s->o, &s->dout, &s->lse, &s->dq,
                                  &s->dk, &s->dv, &p);
    if (s->varlen)
        return kern_sdpa_varlen(ctx, &s->q, &s->k, &s->v, &s->o, &s->cuq, &s->cuk, s->maxq,
                                s->maxk, &p);
    return kern_sdpa(ctx, &s->q, &s->k, &s->v, &s->o, &p);
}

KT_TEST(workspace_sdpa) {
    enum { H = 2, D = 24, LQ = 40, LK = 600 };
    static float q[H * LQ * D], k[H * LK * D], v[H * LK * D], dout[H * LQ * D];
    /* outputs in one buffer: o, lse, dq, dk, dv */
    static float outb[H * LQ * D + H * LQ + H * LQ * D + 2 * H * LK * D];
    float *o = outb, *lse = o + H * LQ * D, *dq = lse + H * LQ, *dk = dq + H * LQ * D;
    float *dv = dk + H * LK * D;
    static int32_t cuq[3] = {0, 15, LQ}, cuk[3] = {0, 200, LK};
    kt_rng g = kt_rng_make(7);
    sdpa_st s;
    ws_case c;
    kt_fill_normal(&g, q, KERN_F32, H * LQ * D, 1.0);
    kt_fill_normal(&g, k, KERN_F32, H * LK * D, 1.0);
    kt_fill_normal(&g, v, KERN_F32, H * LK * D, 1.0);
    kt_fill_normal(&g, dout, KERN_F32, H * LQ * D, 1.0);
    memset(&c, 0, sizeof c);
    c.name = "kern_sdpa";
    c.size = sdpa_size;
    c.run = sdpa_run;
    c.st = &s;
    c.out_f32 = 1;
    for (int mode = 0; mode < 5; mode++) {
        memset(&s, 0, sizeof s);
        s.p.is_causal = mode == 1;
        if (mode == 0 || mode == 1) { /* decode shape: split keys (mode 0) */
            int64_t lq = mode == 0 ? 1 : LQ;
            s.q = kern_tensor_4d(q, KERN_F32, 1, H, lq, D);
            s.k = kern_tensor_4d(k, KERN_F32, 1, H, LK, D);
            s.v = kern_tensor_4d(v, KERN_F32, 1, H, LK, D);
            s.o = kern_tensor_4d(o, KERN_F32, 1, H, lq, D);
            s.lse = kern_tensor_3d(lse, KERN_F32, 1, H, lq);
            s.p.lse = &s.lse;
            c.name = mode == 0 ? "kern_sdpa (split keys)" : "kern_sdpa";
            c.out_bytes = (size_t)(H * LQ * D + H * LQ) * 4;
        } else if (mode == 2) {
            s.varlen = 1;
            s.q = kern_tensor_3d(q, KERN_F32, LQ, H, D);
            s.k = kern_tensor_3d(k, KERN_F32, LK, H, D);
            s.v = kern_tensor_3d(v, KERN_F32, LK, H, D);
            s.o = kern_tensor_3d(o, KERN_F32, LQ, H, D);
            s.cuq = kern_tensor_1d(cuq, KERN_I32, 3);
            s.cuk = kern_tensor_1d(cuk, KERN_I32, 3);
            s.maxq = 25;
            s.maxk = 400;
            c.name = "kern_sdpa_varlen";
            c.out_bytes = (size_t)(H * LQ * D) * 4;
        } else {
            /* backward from a forward's out and lse */
            kern_sdpa_params fp;
            memset(&fp, 0, sizeof fp);
            s.bwd = 1;
            s.varlen = mode == 4;
            if (!s.varlen) {
                s.q = kern_tensor_4d(q, KERN_F32, 1, H, LQ, D);
                s.k = kern_tensor_4d(k, KERN_F32, 1, H, LK, D);
                s.v = kern_tensor_4d(v, KERN_F32, 1, H, LK, D);
                s.o = kern_tensor_4d(o, KERN_F32, 1, H, LQ, D);
                s.dout = kern_tensor_4d(dout, KERN_F32, 1, H, LQ, D);
                s.lse = kern_tensor_3d(lse, KERN_F32, 1, H, LQ);
                s.dq = kern_tensor_4d(dq, KERN_F32, 1, H, LQ, D);
                s.dk = kern_tensor_4d(dk, KERN_F32, 1, H, LK, D);
                s.dv = kern_tensor_4d(dv, KERN_F32, 1, H, LK, D);
                fp.lse = &s.lse;
                KT_OK(kern_sdpa(NULL, &s.q, &s.k, &s.v, &s.o, &fp));
                c.name = "kern_sdpa_backward";
            } else {
                s.q = kern_tensor_3d(q, KERN_F32, LQ, H, D);
                s.k = kern_tensor_3d(k, KERN_F32, LK, H, D);
                s.v = kern_tensor_3d(v, KERN_F32, LK, H, D);
                s.o = kern_tensor_3d(o, KERN_F32, LQ, H, D);
                s.dout = kern_tensor_3d(dout, KERN_F32, LQ, H, D);
                s.lse = kern_tensor_2d(lse, KERN_F32, H, LQ);
                s.dq = kern_tensor_3d(dq, KERN_F32, LQ, H, D);
                s.dk = kern_tensor_3d(dk, KERN_F32, LK, H, D);
                s.dv = kern_tensor_3d(dv, KERN_F32, LK, H, D);
                s.cuq = kern_tensor_1d(cuq, KERN_I32, 3);
                s.cuk = kern_tensor_1d(cuk, KERN_I32, 3);
                s.maxq = 25;
                s.maxk = 400;
                fp.lse = &s.lse;
                KT_OK(kern_sdpa_varlen(NULL, &s.q, &s.k, &s.v, &s.o, &s.cuq, &s.cuk, 25, 400, &fp));
                c.name = "kern_sdpa_varlen_backward";
            }
            /* compare dq, dk, dv (o and lse are inputs here) */
            c.out = dq;
            c.out_bytes = (size_t)(H * LQ * D + 2 * H * LK * D) * 4;
            ws_check(&c, 1);
            ws_check(&c, 2);
            continue;
        }
        c.out = outb;
        ws_check(&c, 1);
        ws_check(&c, 2);
        c.isa = KERN_ISA_SCALAR;
        ws_check(&c, 2);
        c.isa = KERN_ISA_AUTO;
    }
}

KT_TEST(sdpa_defaults_and_zero_scale) {
    enum { L = 5, D = 16 };
    float q[L * D], k[L * D], v[L * D], o[L * D], o2[L * D];
    kern_tensor tq = kern_tensor_4d(q, KERN_F32, 1, 1, L, D), tk = kern_tensor_4d(k, KERN_F32, 1, 1, L, D);
    kern_tensor tv = kern_tensor_4d(v, KERN_F32, 1, 1, L, D), to = kern_tensor_4d(o, KERN_F32, 1, 1, L, D);
    kern_tensor to2 = kern_tensor_4d(o2, KERN_F32, 1, 1, L, D);
    kern_sdpa_params p;
    kt_rng g = kt_rng_make(8);
    kt_fill_normal(&g, q, KERN_F32, L * D, 1.0);
    kt_fill_normal(&g, k, KERN_F32, L * D, 1.0);
    kt_fill_normal(&g, v, KERN_F32, L * D, 1.0);
    memset(&p, 0, sizeof p);
    kern_sdpa_params_defaults(&p, D);
    KT_CHECK(p.scale == 0.25f && p.scale_set == 1 && !p.window_set && !p.is_causal);
    memset(&p, 0, sizeof p);
    kern_sdpa_params_defaults(&p, 0);
    KT_CHECK(p.scale == 0.0f && p.scale_set == 0, "no head dim: the scale stays unresolved");
    kern_sdpa_params_defaults(NULL, 64);
    {   /* the resolved params give the same bits as the zero ones (D = 24:
         * 1/sqrt(24) is not exact) */
        float q3[L * 24], k3[L * 24], v3[L * 24], o3[L * 24], o4[L * 24];
        kern_tensor a = kern_tensor_4d(q3, KERN_F32, 1, 1, L, 24), b = kern_tensor_4d(k3, KERN_F32, 1, 1, L, 24);
        kern_tensor c = kern_tensor_4d(v3, KERN_F32, 1, 1, L, 24), d = kern_tensor_4d(o3, KERN_F32, 1, 1, L, 24);
        kern_tensor e = kern_tensor_4d(o4, KERN_F32, 1, 1, L, 24);
        kt_fill_normal(&g, q3, KERN_F32, L * 24, 1.0);
        kt_fill_normal(&g, k3, KERN_F32, L * 24, 1.0);
        kt_fill_normal(&g, v3, KERN_F32, L * 24, 1.0);
        memset(&p, 0, sizeof p);
        KT_OK(kern_sdpa(NULL, &a, &b, &c, &d, &p));
        kern_sdpa_params_defaults(&p, 24);
        KT_OK(kern_sdpa(NULL, &a, &b, &c, &e, &p));
        kt_assert_bytes_equal("resolved scale", o3, o4, sizeof o3);
    }
    /* scale_set with scale 0: every score is 0, out = mean of v (PyTorch's
     * scale=0.0) */
    memset(&p, 0, sizeof p);
    p.scale_set = 1;
    KT_OK(kern_sdpa(NULL, &tq, &tk, &tv, &to, &p));
    {
        double want[D];
        for (int j = 0; j < D; j++) {
            double m = 0;
            for (int i = 0; i < L; i++) m += v[i * D + j];
            want[j] = m / L;
        }
        for (int i = 0; i < L; i++) kt_assert_close("uniform", o + i * D, KERN_F32, want, D, kt_tol(KERN_F32));
    }
    /* without scale_set, 0 is the default 1/sqrt(D) */
    memset(&p, 0, sizeof p);
    KT_OK(kern_sdpa(NULL, &tq, &tk, &tv, &to, &p));
    p.scale = 0.25f;
    KT_OK(kern_sdpa(NULL, &tq, &tk, &tv, &to2, &p));
    kt_assert_bytes_equal("scale 0 = 1/sqrt(D)", o, o2, sizeof o);
    {
        size_t b = 1;
        /* a problem with nothing to do needs no scratch */
        kern_tensor e0 = kern_tensor_4d(q, KERN_F32, 1, 1, 0, D), e1 = kern_tensor_4d(o, KERN_F32, 1, 1, 0, D);
        KT_OK(kern_sdpa_workspace_size(NULL, &e0, &tk, &tv, &e1, NULL, &b));
        KT_CHECK(b == 0, "b=%zu", b);
        KT_ERROR(kern_sdpa_workspace_size(NULL, &tq, &tk, &tv, &to, NULL, NULL), KERN_ERR_ARG,
                 "bytes is NULL");
    }
}

/* ---------------------------------------------------- scatter, spmm */

typedef struct sc_st {
    kern_tensor self, index, src, out, arg;
    int dim, incl, use_arg;
    kern_reduce red;
    kern_scatter_plan *plan;
    /* spmm */
    kern_csr *csr;
    kern_tensor dense, gout, gdense, gvals;
    int spmm; /* 1 forward, 2 backward */
} sc_st;
static kern_status sc_size(kern_ctx *ctx, void *v, size_t *bytes) {
    sc_st *s = (sc_st *)v;
    const kern_tensor *arg = s->use_arg ? &s->arg : NULL;
    if (s->spmm == 1)
        return kern_spmm_reduce_workspace_size(ctx, s->csr, &s->dense, &s->out, s->red, arg, bytes);
    if (s->spmm == 2)
        return kern_spmm_reduce_backward_workspace_size(ctx, s->csr, &s->dense, &s->gout, s->red,
                                                        arg, &s->gdense, &s->gvals, bytes);
    if (s->plan)
        return kern_scatter_reduce_planned_workspace_size(ctx, s->plan, &s->self, &s->src, s->red,
                                                          s->incl, &s->out, arg, bytes);
    return kern_scatter_reduce_workspace_size(ctx, &s->self, s->dim, &s->index, &s->src, s->red,
                                              s->incl, &s->out, arg, bytes);
}
static kern_status sc_run(kern_ctx *ctx, void *v, void *ws, size_t wsz) {
    sc_st *s = (sc_st *)v;
    const kern_tensor *arg = s->use_arg ? &s->arg : NULL;
    kern_scatter_params p;
    kern_spmm_params q;
    memset(&p, 0, sizeof p);
    memset(&q, 0, sizeof q);
    p.workspace = q.workspace = ws;
    p.workspace_size = q.workspace_size = wsz;
    if (s->spmm == 1) return kern_spmm_reduce(ctx, s->csr, &s->dense, &s->out, s->red, arg, &q);
    if (s->spmm == 2)
        return kern_spmm_reduce_backward(ctx, s->csr, &s->dense, &s->gout, s->red, arg,
                                         &s->gdense, &s->gvals, &q);
    if (s->plan)
        return kern_scatter_reduce_planned(ctx, s->plan, &s->self, &s->src, s->red, s->incl,
                                           &s->out, arg, &p);
    return kern_scatter_reduce(ctx, &s->self, s->dim, &s->index, &s->src, s->red, s->incl,
                               &s->out, arg, &p);
}

KT_TEST(workspace_scatter_and_spmm) {
    enum { NMAX = 4096, E = 8192, F = 32 };
    static float self[NMAX * F], src[E * F];
    /* out rows then the i32 arg rows: one buffer for the comparison */
    static int32_t outb[2 * NMAX * F];
    static int64_t idx[E];
    static unsigned char plan_mem[1 << 17];
    kt_rng g = kt_rng_make(9);
    sc_st s;
    ws_case c;
    /* small integers: every sum is exact in any order */
    for (int i = 0; i < NMAX * F; i++) self[i] = (float)kt_randint(&g, -8, 9);
    for (int i = 0; i < E * F; i++) src[i] = (float)kt_randint(&g, -8, 9);
    memset(&c, 0, sizeof c);
    c.run = sc_run;
    c.size = sc_size;
    c.st = &s;
    c.out = outb;
    c.out_f32 = 0;
    for (int mode = 0; mode < 4; mode++) {
        /* 0: stream (N = 100, degree 82), 1: csr (N = 4096, degree 2 with 2
         * threads; stream with 1), 2: general path (dim 1), 3: planned */
        int64_t N = mode == 0 ? 100 : mode == 2 ? 64 : NMAX;
        memset(&s, 0, sizeof s);
        for (int e = 0; e < E; e++) idx[e] = kt_randint(&g, 0, mode == 2 ? 16 : N);
        s.red = mode == 1 ? KERN_REDUCE_AMAX : KERN_REDUCE_SUM;
        s.use_arg = mode == 1;
        s.incl = 1;
        if (mode == 2) {
            /* scatter along dim 1: self/out [64, 16], index/src [64, 128] */
            s.dim = 1;
            s.self = kern_tensor_2d(self, KERN_F32, 64, 16);
            s.out = kern_tensor_2d(outb, KERN_F32, 64, 16);
            s.index = kern_tensor_2d(idx, KERN_I64, 64, 128);
            s.src = kern_tensor_2d(src, KERN_F32, 64, 128);
            c.out_bytes = 64 * 16 * 4;
        } else {
            s.self = kern_tensor_2d(self, KERN_F32, N, F);
            s.out = kern_tensor_2d(outb, KERN_F32, N, F);
            s.arg = kern_tensor_2d(outb + NMAX * F, KERN_I32, N, F);
            s.index = kern_tensor_1d(idx, KERN_I64, E);
            s.src = kern_tensor_2d(src, KERN_F32, E, F);
            c.out_bytes = sizeof outb;
        }
        if (mode == 3) {
            static kern_scatter_plan plan;
            KT_REQUIRE(kern_scatter_plan_bytes(N, E) <= sizeof plan_mem);
            KT_OK(kern_scatter_plan_init(NULL, &s.index, N, plan_mem, sizeof plan_mem, &plan));
            s.plan = &plan;
        }
        c.name = mode == 0 ? "kern_scatter_reduce (stream)"
                 : mode == 1 ? "kern_scatter_reduce (csr)"
                 : mode == 2 ? "kern_scatter_reduce (general)" : "kern_scatter_reduce_planned";
        ws_check(&c, 1);
        ws_check(&c, 2);
    }
    {   /* spmm forward and backward on a random CSR [N x M] */
        enum { NR = 300, NC = 200, NNZ = 3000 };
        static int64_t rowptr[NR + 1], col[NNZ];
        static float vals[NNZ], dense[NC * F], gout[NR * F];
        /* forward: out then arg; backward: grad_dense then grad_values */
        kern_csr a;
        for (int r = 0; r <= NR; r++) rowptr[r] = (int64_t)NNZ * r / NR;
        for (int k = 0; k < NNZ; k++) {
            col[k] = kt_randint(&g, 0, NC);
            vals[k] = (float)kt_randint(&g, -3, 4);
        }
        for (int i = 0; i < NC * F; i++) dense[i] = (float)kt_randint(&g, -8, 9);
        for (int i = 0; i < NR * F; i++) gout[i] = (float)kt_randint(&g, -8, 9);
        memset(&a, 0, sizeof a);
        a.nrows = NR; a.ncols = NC; a.nnz = NNZ;
        a.rowptr = rowptr; a.col = col; a.values = vals;
        a.index_dtype = KERN_I64; a.value_dtype = KERN_F32;
        for (int mode = 0; mode < 3; mode++) {
            memset(&s, 0, sizeof s);
            s.csr = &a;
            s.dense = kern_tensor_2d(dense, KERN_F32, NC, F);
            s.red = mode == 2 ? KERN_REDUCE_AMAX : KERN_REDUCE_MEAN;
            if (mode == 0) {
                s.spmm = 1;
                s.out = kern_tensor_2d(outb, KERN_F32, NR, F);
                c.name = "kern_spmm_reduce";
                c.out_bytes = NR * F * 4;
            } else {
                s.spmm = 2;
                s.gout = kern_tensor_2d(gout, KERN_F32, NR, F);
                s.gdense = kern_tensor_2d(outb, KERN_F32, NC, F);
                s.gvals = kern_tensor_1d(outb + NC * F, KERN_F32, NNZ);
                if (mode == 2) {
                    /* the forward's arg_out, kept apart from the outputs */
                    static int32_t argb[NR * F];
                    static float tmp[NR * F];
                    kern_tensor to = kern_tensor_2d(tmp, KERN_F32, NR, F);
                    s.arg = kern_tensor_2d(argb, KERN_I32, NR, F);
                    s.use_arg = 1;
                    KT_OK(kern_spmm_reduce(NULL, &a, &s.dense, &to, KERN_REDUCE_AMAX, &s.arg, NULL));
                }
                c.name = mode == 1 ? "kern_spmm_reduce_backward (mean)"
                                   : "kern_spmm_reduce_backward (amax)";
                c.out_bytes = (NC * F + NNZ) * 4;
            }
            ws_check(&c, 1);
            ws_check(&c, 2);
        }
    }
}

/* a task of ctx_flush_denormals: the product of two 1e-21 (subnormal
 * unless flushed) on whichever thread runs it, after ~50 us of work so
 * that the pool's workers join */
typedef struct fz_rec {
    int flush, worker_ran, bad;
} fz_rec;
static void fz_task(void *arg, int64_t t, int thread) {
    fz_rec *r = (fz_rec *)arg;
    volatile float x = 1e-21f, acc = 0.0f;
    float y;
    int i;
    (void)t;
    for (i = 0; i < 20000; i++) acc = acc + 1.0f;
    y = x * x;
    if (thread > 0) __atomic_store_n(&r->worker_ran, 1, __ATOMIC_RELAXED);
    if (r->flush ? y != 0.0f : !(y > 0.0f)) __atomic_store_n(&r->bad, 1, __ATOMIC_RELAXED);
}

/* kern_ctx_params.flush_denormals: an op's subnormal results become 0
 * (FTZ) and subnormal inputs read as 0 (DAZ), on the calling thread and
 * the pool's workers (a parallel_for whose tasks check the mode on
 * whichever thread runs them); without it both stay; the caller's own
 * mode is the same after the call. x86 (MXCSR) and AArch64 (FPCR.FZ). */
KT_TEST(ctx_flush_denormals) {
#if defined(__x86_64__) || defined(__aarch64__)
    enum { N = 256 };
    static float a[N * N], b[N * N], c[N * N], d[N * N], e[N * N];
    int threads, flush, i;
    for (i = 0; i < N * N; i++) {
        a[i] = 1e-21f; /* products 1e-42, sums of 256 2.56e-40: subnormal */
        b[i] = 1e-21f;
        d[i] = i % 2 ? 1e-40f : 0.0f; /* a subnormal input */
        e[i] = 1e30f;
    }
    for (threads = 1; threads <= 2; threads++)
        for (flush = 0; flush <= 1; flush++) {
            kern_ctx_params cp;
            kern_ctx *ctx = NULL;
            kern_tensor ta = kern_tensor_2d(a, KERN_F32, N, N), tb = kern_tensor_2d(b, KERN_F32, N, N);
            kern_tensor td = kern_tensor_2d(d, KERN_F32, N, N), te = kern_tensor_2d(e, KERN_F32, N, N);
            kern_tensor tc = kern_tensor_2d(c, KERN_F32, N, N);
            kern_gemm_params gp;
            volatile float tiny = 1e-20f;
            memset(&cp, 0, sizeof cp);
            memset(&gp, 0, sizeof gp);
            cp.n_threads = threads;
            cp.flush_denormals = flush;
            KT_OK(kern_ctx_create(&cp, &ctx));
            KT_OK(kern_gemm(ctx, &ta, &tb, &tc, &gp));
            for (i = 0; i < N * N; i++)
                if (flush ? c[i] != 0.0f : !(c[i] > 0.0f && c[i] < 1.17549435e-38f)) break;
            KT_CHECK(i == N * N, "threads %d flush %d: c[%d] = %g (want %s)", threads, flush, i,
                     (double)c[i], flush ? "0" : "the subnormal 2.56e-40");
            KT_OK(kern_gemm(ctx, &td, &te, &tc, &gp)); /* 128 x 1e-40 x 1e30 unless DAZ */
            KT_CHECK(flush ? c[0] == 0.0f : c[0] > 1e-9f, "threads %d flush %d: DAZ gave %g", threads,
                     flush, (double)c[0]);
            KT_CHECK(tiny * tiny > 0.0f, "flush %d: the caller's float mode changed", flush);
            if (threads > 1) { /* the workers' tasks, directly */
                fz_rec r;
                int tries;
                memset(&r, 0, sizeof r);
                r.flush = flush;
                for (tries = 0; tries < 50 && !r.worker_ran; tries++)
                    KT_OK(kern_parallel_for(ctx, 64, fz_task, &r));
                KT_CHECK(r.worker_ran, "no task ran on a worker in 50 calls");
                KT_CHECK(!r.bad, "flush %d: a task saw the wrong float mode", flush);
                KT_CHECK(tiny * tiny > 0.0f, "flush %d: parallel_for changed the caller's mode", flush);
            }
            kern_ctx_destroy(ctx);
        }
#else
    printf("not run: ctx_flush_denormals (no x86 or AArch64 float mode here)\n");
#endif
}

KT_MAIN()
