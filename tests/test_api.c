/* test_api.c — the public API vocabulary shared by every family (docs/api.md):
 * const-friendly tensor views, the kern_epilogue checks, caller workspaces
 * (every *_workspace_size: exactly that many bytes work, one byte less is
 * KERN_ERR_ARG), the *_info queries of packed handles, the *_defaults
 * functions and the options a family rejects as KERN_ERR_UNSUPPORTED. */
#define KERN_IMPLEMENTATION
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

KT_MAIN()
