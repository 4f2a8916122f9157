/* Tests for kern_llm.h: rope against a double reference (both styles,
 * partial rotary dims, offsets, tables, strided views, every dtype and
 * ISA level), and the bad-input contract. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_llm.h"
#include "kern_norm.h"
#include "kern_graph.h"
#include "kt.h"
#include "../models/llama_graph.h"

static const kern_dtype FDT[3] = {KERN_F32, KERN_BF16, KERN_F16};

/* A [B, L, H, D] view over a buffer laid out [B, H, L, Dp] (strided) or
 * [B, L, H, D] (contiguous). */
typedef struct {
    void *buf;
    size_t bytes;
    kern_tensor t;
} view4;

static void view4_make(view4 *v, kern_dtype dt, int64_t B, int64_t L, int64_t H, int64_t D,
                       int strided, const char *what) {
    size_t es = kern_dtype_size(dt);
    int64_t Dp = strided ? D + 3 : D, n = B * L * H * Dp;
    int64_t shape[4], stride[4];
    shape[0] = B; shape[1] = L; shape[2] = H; shape[3] = D;
    if (strided) {
        stride[0] = H * L * Dp; stride[1] = Dp; stride[2] = L * Dp; stride[3] = 1;
    } else {
        stride[0] = L * H * D; stride[1] = H * D; stride[2] = D; stride[3] = 1;
    }
    v->bytes = (size_t)(n > 0 ? n : 1) * es;
    v->buf = kt_alloc_misaligned(v->bytes, 4, what);
    kern_tensor_init_strided(&v->t, v->buf, dt, 4, shape, stride);
}
static int64_t view4_off(const view4 *v, int64_t b, int64_t l, int64_t h, int64_t d) {
    return b * v->t.stride[0] + l * v->t.stride[1] + h * v->t.stride[2] + d;
}

/* The reference: double products of the f32-rounded input with
 * double-accurate cos/sin of pos * invf (invf rounded to f32). */
static double rope_ref(const view4 *x, int64_t b, int64_t l, int64_t h, int64_t d, int64_t r,
                       int inter, double theta, int64_t pos) {
    kern_dtype dt = x->t.dtype;
    int64_t i, j;
    double xi, xj, a, c, s;
    float invf;
    if (d >= r) return kt_get(x->buf, dt, view4_off(x, b, l, h, d));
    if (inter) {
        i = d / 2;
        j = d ^ 1;
    } else {
        i = d < r / 2 ? d : d - r / 2;
        j = d < r / 2 ? d + r / 2 : d - r / 2;
    }
    invf = (float)(1.0 / pow(theta, (double)(2 * i) / (double)r));
    a = (double)pos * (double)invf;
    c = (double)(float)cos(a);
    s = (double)(float)sin(a);
    xi = kt_get(x->buf, dt, view4_off(x, b, l, h, d));
    xj = kt_get(x->buf, dt, view4_off(x, b, l, h, j));
    /* first of the pair: x1 c - x2 s; second: x2 c + x1 s */
    if ((inter && d % 2 == 0) || (!inter && d < r / 2)) return xi * c - xj * s;
    return xi * c + xj * s;
}

typedef struct {
    int64_t B, L, H, D, r;
} rope_shape;

/* Runs one case, checks it against the reference and returns the result
 * gathered as f32 [B, L, H, D] (exact for every out dtype; caller frees). */
static float *rope_case(kern_ctx *ctx, const rope_shape *sh, kern_dtype xdt, kern_dtype odt,
                        int inter, int strided, int use_offsets, int use_table, int inplace) {
    view4 x, o;
    int64_t B = sh->B, L = sh->L, H = sh->H, D = sh->D, r = sh->r, b, l, h, d;
    float *got;
    int64_t offs[4] = {4093, 7, 30011, 1}, maxoff = 0;
    double theta = use_offsets ? 500000.0 : 10000.0, *want;
    kern_tensor offt = kern_tensor_1d(offs, KERN_I64, B), table;
    float *tab = NULL;
    kern_rope_params p;
    kt_rng rng = kt_rng_make((uint64_t)(xdt * 131 + odt * 17 + inter * 3 + strided));
    kt_context("B%lld L%lld H%lld D%lld r%lld %s->%s %s%s%s%s%s", (long long)B, (long long)L,
               (long long)H, (long long)D, (long long)r, kern_dtype_name(xdt),
               kern_dtype_name(odt), inter ? "inter" : "half", strided ? " strided" : "",
               use_offsets ? " offsets" : "", use_table ? " table" : "", inplace ? " inplace" : "");
    view4_make(&x, xdt, B, L, H, D, strided, "x");
    kt_fill_normal(&rng, x.buf, xdt, (int64_t)(x.bytes / kern_dtype_size(xdt)), 1.0);
    if (inplace) {
        o = x;
    } else {
        view4_make(&o, odt, B, L, H, D, !strided, "out");
        kt_poison(o.buf, o.bytes);
    }
    memset(&p, 0, sizeof p);
    p.style = inter ? KERN_ROPE_INTERLEAVED : (use_table ? KERN_ROPE_HALF : KERN_ROPE_DEFAULT);
    p.rotary_dim = r == D && !use_table ? 0 : r;
    p.theta = theta == 10000.0 ? 0 : theta;
    if (use_offsets) p.offsets = &offt;
    if (use_table) {
        int64_t P;
        for (b = 0; b < B; b++) maxoff = use_offsets && offs[b] > maxoff ? offs[b] : maxoff;
        P = maxoff + L + 2;
        kern_rope_params tp;
        tab = (float *)kt_alloc((size_t)(P * r > 0 ? P * r : 1) * sizeof(float), "table");
        table = kern_tensor_2d(tab, KERN_F32, P, r);
        memset(&tp, 0, sizeof tp);
        tp.theta = p.theta;
        KT_OK(kern_rope_table_init(ctx, &table, &tp));
        p.table = &table;
    }
    want = (double *)malloc(sizeof(double) * (size_t)(B * L * H * D + 1));
    for (b = 0; b < B; b++)
        for (l = 0; l < L; l++)
            for (h = 0; h < H; h++)
                for (d = 0; d < D; d++)
                    want[((b * L + l) * H + h) * D + d] =
                        rope_ref(&x, b, l, h, d, r, inter, theta, (use_offsets ? offs[b] : 0) + l);
    KT_OK(kern_rope(ctx, &x.t, &o.t, &p));
    got = (float *)malloc(sizeof(float) * (size_t)(B * L * H * D + 1));
    {
        kt_tol_t tol = kt_tol(odt);
        for (b = 0; b < B; b++)
            for (l = 0; l < L; l++)
                for (h = 0; h < H; h++)
                    for (d = 0; d < D; d++)
                        got[((b * L + l) * H + h) * D + d] =
                            (float)kt_get(o.buf, odt, view4_off(&o, b, l, h, d));
        if (xdt != KERN_F32) tol.atol *= 4; /* inputs of unit size rounded to 8/11 bits */
        kt_assert_close("rope", got, KERN_F32, want, B * L * H * D, tol);
    }
    if (!inplace && strided == 0) { /* the gaps of the strided out are untouched */
        int64_t k;
        const unsigned char *q = (const unsigned char *)o.buf;
        size_t es = kern_dtype_size(odt);
        for (b = 0; b < B; b++)
            for (h = 0; h < H; h++)
                for (l = 0; l < L; l++)
                    for (k = D * (int64_t)es; k < (D + 3) * (int64_t)es; k++)
                        KT_CHECK(q[(size_t)(view4_off(&o, b, l, h, 0) * (int64_t)es + k)] == 0xFF,
                                 "gap written");
    }
    if (!inplace) kt_free(o.buf);
    kt_free(x.buf);
    if (tab) kt_free(tab);
    free(want);
    return got;
}

static int same_floats(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

KT_TEST(rope_reference) {
    static const rope_shape shapes[] = {
        {1, 1, 1, 2, 2},     {2, 3, 3, 10, 6}, {2, 5, 2, 128, 128}, {1, 2, 3, 80, 32},
        {2, 4, 1, 17, 16}, {3, 1, 4, 130, 130}, {1, 3, 2, 64, 64},
    };
    int si, xi, oi, inter, strided;
    for (si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
        for (xi = 0; xi < 3; xi++)
            for (oi = 0; oi < 3; oi++)
                for (inter = 0; inter < 2; inter++)
                    for (strided = 0; strided < 2; strided++) {
                        const rope_shape *s = &shapes[si];
                        int64_t n = s->B * s->L * s->H * s->D;
                        float *first = NULL;
                        KT_FOR_EACH_ISA(isa, ctx, 1 + (si & 1)) {
                            float *g = rope_case(ctx, s, FDT[xi], FDT[oi], inter, strided,
                                                 si % 2, 0, 0);
                            /* the same bits from a table and on every level */
                            float *t = rope_case(ctx, s, FDT[xi], FDT[oi], inter, strided,
                                                 si % 2, 1, 0);
                            KT_CHECK(same_floats(g, t, n), "table path differs (%s)",
                                     kern_isa_name(isa));
                            free(t);
                            if (xi == oi) { /* in place */
                                t = rope_case(ctx, s, FDT[xi], FDT[oi], inter, strided, si % 2,
                                              si % 3 == 0, 1);
                                KT_CHECK(same_floats(g, t, n), "in place differs (%s)",
                                         kern_isa_name(isa));
                                free(t);
                            }
                            if (!first) first = g;
                            else {
                                KT_CHECK(same_floats(first, g, n), "%s differs from scalar",
                                         kern_isa_name(isa));
                                free(g);
                            }
                        }
                        free(first);
                    }
}

KT_TEST(rope_errors) {
    float x[2 * 3 * 2 * 8], o[2 * 3 * 2 * 8], snap[2 * 3 * 2 * 8], tab[4 * 8];
    int64_t offs[2] = {0, 2}, neg[2] = {0, -1};
    kern_tensor xt = kern_tensor_4d(x, KERN_F32, 2, 3, 2, 8);
    kern_tensor ot = kern_tensor_4d(o, KERN_F32, 2, 3, 2, 8);
    kern_tensor off = kern_tensor_1d(offs, KERN_I64, 2), negt = kern_tensor_1d(neg, KERN_I64, 2);
    kern_tensor tabt = kern_tensor_2d(tab, KERN_F32, 4, 8), bad;
    kern_rope_params p;
    size_t ws = 0;
    int i;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_SCALAR);
    for (i = 0; i < 2 * 3 * 2 * 8; i++) x[i] = (float)i;
    kt_poison(o, sizeof o);
    memcpy(snap, o, sizeof o);
    KT_OK(kern_rope_table_init(ctx, &tabt, NULL));
    memset(&p, 0, sizeof p);
    /* positions 2..4 of sequence 1 against a 4-row table */
    p.offsets = &off;
    p.table = &tabt;
    KT_ERROR(kern_rope(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "past the table");
    p.table = NULL;
    p.offsets = &negt;
    KT_ERROR(kern_rope(ctx, &xt, &ot, &p), KERN_ERR_ARG, "negative");
    p.offsets = NULL;
    p.rotary_dim = 5;
    KT_ERROR(kern_rope(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "rotary_dim");
    p.rotary_dim = 10;
    KT_ERROR(kern_rope(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "rotary_dim");
    p.rotary_dim = 4;
    p.table = &tabt;
    KT_ERROR(kern_rope(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "wide");
    p.table = NULL;
    p.rotary_dim = 0;
    p.theta = 0.5;
    KT_ERROR(kern_rope(ctx, &xt, &ot, &p), KERN_ERR_ARG, "theta");
    p.theta = 0;
    p.style = (kern_rope_style)7;
    KT_ERROR(kern_rope(ctx, &xt, &ot, &p), KERN_ERR_ARG, "style");
    p.style = KERN_ROPE_DEFAULT;
    bad = kern_tensor_4d(x + 1, KERN_F32, 2, 3, 2, 8);
    KT_ERROR(kern_rope(ctx, &xt, &bad, &p), KERN_ERR_ARG, "overlaps");
    bad = ot;
    bad.dtype = KERN_I32;
    KT_ERROR(kern_rope(ctx, &xt, &bad, &p), KERN_ERR_DTYPE, "out.dtype");
    bad = kern_tensor_3d(o, KERN_F32, 6, 2, 8);
    KT_ERROR(kern_rope(ctx, &xt, &bad, &p), KERN_ERR_SHAPE, "shape");
    bad = ot;
    bad.stride[3] = 2;
    bad.shape[0] = 1;
    bad.stride[2] = 16;
    bad.stride[1] = 32;
    KT_ERROR(kern_rope(ctx, &xt, &bad, &p), KERN_ERR_SHAPE, "shape");
    {
        kern_tensor x4 = kern_tensor_4d(x, KERN_F32, 2, 3, 2, 4), o4 = x4;
        o4.data = o;
        o4.stride[3] = 2;
        o4.stride[2] = 8;
        o4.stride[1] = 16;
        o4.stride[0] = 48;
        KT_ERROR(kern_rope(ctx, &x4, &o4, &p), KERN_ERR_LAYOUT, "unit stride");
    }
    bad = kern_tensor_4d(o, KERN_F32, 2, 3, 2, 8);
    bad.stride[2] = 0;
    KT_ERROR(kern_rope(ctx, &xt, &bad, &p), KERN_ERR_LAYOUT, "overlapping");
    bad = kern_tensor_1d(offs, KERN_I64, 1);
    p.offsets = &bad;
    KT_ERROR(kern_rope(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "offsets");
    p.offsets = NULL;
    p.workspace = o;
    p.workspace_size = 1;
    KT_ERROR(kern_rope(ctx, &xt, &ot, &p), KERN_ERR_ARG, "workspace");
    KT_CHECK(memcmp(o, snap, sizeof o) == 0, "an error wrote out");
    /* exactly the reported workspace works */
    p.workspace = NULL;
    KT_OK(kern_rope_workspace_size(ctx, &xt, &ot, &p, &ws));
    {
        void *w = kt_alloc_misaligned(ws, 8, "ws");
        float o2[2 * 3 * 2 * 8];
        KT_OK(kern_rope(ctx, &xt, &ot, NULL));
        p.workspace = w;
        p.workspace_size = ws;
        ot.data = o2;
        KT_OK(kern_rope(ctx, &xt, &ot, &p));
        KT_CHECK(memcmp(o, o2, sizeof o) == 0, "workspace result differs");
        kt_free(w);
    }
    p.workspace = NULL;
    p.workspace_size = 0;
    p.table = &tabt;
    KT_OK(kern_rope_workspace_size(ctx, &xt, &ot, &p, &ws));
    KT_CHECK(ws == 0, "a table needs no workspace (%zu)", ws);
    bad = kern_tensor_2d(tab, KERN_F32, 4, 7);
    KT_ERROR(kern_rope_table_init(ctx, &bad, NULL), KERN_ERR_SHAPE, "even");
}

/* silu_mul against kern_activation(SILU) into f32 then an f32 multiply
 * (bit for bit), a double reference, the packed [gate | up] form, strided
 * rows and in place, on every level. */
static void silu_mul_case(kern_ctx *ctx, int64_t R, int64_t F, kern_dtype adt, kern_dtype bdt,
                          kern_dtype odt, int packed, int inplace) {
    int64_t ars = packed ? 2 * F + 5 : F + 3, i, j; /* padded rows */
    size_t ae = kern_dtype_size(adt), be = kern_dtype_size(bdt), oe = kern_dtype_size(odt);
    char *abuf = (char *)kt_alloc_misaligned((size_t)(R * ars + 1) * ae, 4, "a");
    char *bbuf = (char *)kt_alloc_misaligned((size_t)(R * (F + 1) + 1) * be, 8, "b");
    char *obuf = (char *)kt_alloc_misaligned((size_t)(R * (F + 2) + 1) * oe, 12, "out");
    float *g = (float *)malloc(sizeof(float) * (size_t)(R * F + 1));
    double *want = (double *)malloc(sizeof(double) * (size_t)(R * F + 1));
    float *got = (float *)malloc(sizeof(float) * (size_t)(R * F + 1));
    int64_t sh[2], ast[2] = {ars, 1}, bst[2] = {F + 1, 1}, ost[2] = {F + 2, 1};
    kern_tensor a, b, o, gt;
    kt_rng rng = kt_rng_make((uint64_t)(R * 7 + F + adt * 3 + bdt * 5 + odt));
    kt_context("R%lld F%lld a %s b %s out %s%s%s", (long long)R, (long long)F,
               kern_dtype_name(adt), kern_dtype_name(bdt), kern_dtype_name(odt),
               packed ? " packed" : "", inplace ? " inplace" : "");
    kt_fill_normal(&rng, abuf, adt, R * ars, 4.0);
    kt_fill_normal(&rng, bbuf, bdt, R * (F + 1), 1.0);
    kt_poison(obuf, (size_t)(R * (F + 2) + 1) * oe);
    sh[0] = R;
    sh[1] = packed ? 2 * F : F;
    kern_tensor_init_strided(&a, abuf, adt, 2, sh, ast);
    sh[1] = F;
    kern_tensor_init_strided(&b, packed ? abuf + F * (int64_t)ae : bbuf, packed ? adt : bdt, 2,
                             sh, packed ? ast : bst);
    kern_tensor_init_strided(&o, obuf, odt, 2, sh, ost);
    /* the unfused reference: kern_activation into f32, then multiply */
    {
        kern_tensor ga = a;
        ga.shape[1] = F;
        gt = kern_tensor_2d(g, KERN_F32, R, F);
        KT_OK(kern_activation(ctx, &ga, NULL, &gt, KERN_ACT_SILU));
    }
    for (i = 0; i < R; i++)
        for (j = 0; j < F; j++) {
            double x = kt_get(abuf, adt, i * ars + j);
            double u = packed ? kt_get(abuf, adt, i * ars + F + j) : kt_get(bbuf, bdt, i * (F + 1) + j);
            float prod = g[i * F + j] * (float)u;
            want[i * F + j] = x / (1 + exp(-x)) * u;
            g[i * F + j] = (float)kt_get(&prod, KERN_F32, 0);
            if (odt == KERN_BF16) g[i * F + j] = kern_bf16_to_f32(kern_f32_to_bf16(prod));
            if (odt == KERN_F16) g[i * F + j] = kern_f16_to_f32(kern_f32_to_f16(prod));
        }
    if (inplace && !packed) { /* out = a's own view (same dtype needed) */
        o = a;
    }
    KT_OK(kern_silu_mul(ctx, &a, packed ? NULL : &b, &o));
    for (i = 0; i < R; i++)
        for (j = 0; j < F; j++)
            got[i * F + j] = (float)kt_get(o.data, o.dtype, i * o.stride[0] + j);
    if (!inplace || packed) {
        kt_tol_t tol = kt_tol_scaled(odt, 4);
        kt_assert_close("silu_mul", got, KERN_F32, want, R * F, tol);
        kt_assert_bytes_equal("silu_mul vs activation then mul", got, g, sizeof(float) * (size_t)(R * F));
        for (i = 0; i < R; i++) /* padding untouched */
            KT_CHECK(((unsigned char *)obuf)[(i * (F + 2) + F) * (int64_t)oe] == 0xFF, "row padding written");
    } else if (o.dtype == odt) {
        kt_assert_bytes_equal("silu_mul in place", got, g, sizeof(float) * (size_t)(R * F));
    }
    kt_free(abuf);
    kt_free(bbuf);
    kt_free(obuf);
    free(g);
    free(want);
    free(got);
}

KT_TEST(silu_mul_reference) {
    static const int64_t RF[][2] = {{1, 1}, {3, 7}, {2, 8}, {5, 33}, {4, 256}, {1, 1000}, {0, 5}};
    int k, ai, bi, oi, packed;
    for (k = 0; k < (int)(sizeof RF / sizeof RF[0]); k++)
        for (ai = 0; ai < 3; ai++)
            for (bi = 0; bi < 3; bi++)
                for (oi = 0; oi < 3; oi++)
                    for (packed = 0; packed < 2; packed++) {
                        KT_FOR_EACH_ISA(isa, ctx, 1 + (k & 1)) {
                            (void)isa;
                            silu_mul_case(ctx, RF[k][0], RF[k][1], FDT[ai], FDT[bi], FDT[oi],
                                          packed, 0);
                            if (ai == oi && !packed)
                                silu_mul_case(ctx, RF[k][0], RF[k][1], FDT[ai], FDT[bi],
                                              FDT[oi], 0, 1);
                        }
                    }
}

KT_TEST(silu_mul_errors) {
    float a[4 * 6], b[4 * 3], o[4 * 3], snap[4 * 3];
    kern_tensor at = kern_tensor_2d(a, KERN_F32, 4, 6), bt = kern_tensor_2d(b, KERN_F32, 4, 3);
    kern_tensor ot = kern_tensor_2d(o, KERN_F32, 4, 3), bad;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_SCALAR);
    int i;
    for (i = 0; i < 24; i++) a[i] = (float)i * 0.1f;
    for (i = 0; i < 12; i++) b[i] = 1;
    kt_poison(o, sizeof o);
    memcpy(snap, o, sizeof o);
    KT_ERROR(kern_silu_mul(ctx, &at, &bt, &ot), KERN_ERR_SHAPE, "shape");
    bad = kern_tensor_2d(a, KERN_F32, 4, 5);
    KT_ERROR(kern_silu_mul(ctx, &bad, NULL, &ot), KERN_ERR_SHAPE, "even");
    bad = kern_tensor_2d(a, KERN_I8, 4, 6);
    KT_ERROR(kern_silu_mul(ctx, &bad, NULL, &ot), KERN_ERR_DTYPE, "a.dtype");
    bad = kern_tensor_1d(o, KERN_F32, 3);
    KT_ERROR(kern_silu_mul(ctx, &at, NULL, &bad), KERN_ERR_SHAPE, "dims");
    bad = kern_tensor_2d(a + 1, KERN_F32, 4, 3);
    KT_ERROR(kern_silu_mul(ctx, &at, NULL, &bad), KERN_ERR_ARG, "overlaps");
    bad = ot;
    bad.stride[0] = 0;
    KT_ERROR(kern_silu_mul(ctx, &at, NULL, &bad), KERN_ERR_LAYOUT, "overlapping");
    KT_ERROR(kern_silu_mul(ctx, NULL, NULL, &ot), KERN_ERR_ARG, "NULL");
    KT_CHECK(memcmp(o, snap, sizeof o) == 0, "an error wrote out");
    KT_OK(kern_silu_mul(ctx, &at, NULL, &ot));
}

/* kv_append: decode and prefill appends into strided caches of another
 * dtype at ragged lengths; a too long append leaves everything as it was. */
KT_TEST(kv_append) {
    enum { B = 3, LMAX = 9, H = 2, D = 5, DV = 3 };
    int ni, ci, lt, ln;
    for (ni = 0; ni < 3; ni++)
        for (ci = 0; ci < 3; ci++)
            for (lt = 0; lt < 2; lt++)
                for (ln = 1; ln <= 3; ln += 2) {
                    kern_dtype ndt = FDT[ni], cdt = FDT[ci], ldt = lt ? KERN_I32 : KERN_I64;
                    size_t ne = kern_dtype_size(ndt), ce = kern_dtype_size(cdt);
                    /* caches laid out [B, H, LMAX, D] (head-major), viewed [B, LMAX, H, D] */
                    char *kc = (char *)kt_alloc((size_t)(B * H * LMAX * D) * ce, "k_cache");
                    char *vc = (char *)kt_alloc((size_t)(B * H * LMAX * DV) * ce, "v_cache");
                    char *kn = (char *)kt_alloc((size_t)(B * ln * H * D) * ne, "k_new");
                    char *vn = (char *)kt_alloc((size_t)(B * ln * H * DV) * ne, "v_new");
                    char *kc0 = (char *)malloc((size_t)(B * H * LMAX * D) * ce);
                    char *vc0 = (char *)malloc((size_t)(B * H * LMAX * DV) * ce);
                    int64_t lens64[B] = {0, 4, LMAX - ln}, lens0[B];
                    int32_t lens32[B];
                    int64_t shp[4] = {B, LMAX, H, D}, kst[4] = {H * LMAX * D, D, LMAX * D, 1};
                    int64_t vshp[4] = {B, LMAX, H, DV}, vst[4] = {H * LMAX * DV, DV, LMAX * DV, 1};
                    kern_tensor kct, vct, knt, vnt, lens;
                    int64_t b, j, h, d;
                    kt_rng rng = kt_rng_make((uint64_t)(ni * 9 + ci * 3 + lt + ln * 17));
                    kt_context("new %s cache %s lens %s Lnew %d", kern_dtype_name(ndt),
                               kern_dtype_name(cdt), kern_dtype_name(ldt), ln);
                    for (b = 0; b < B; b++) lens32[b] = (int32_t)lens64[b];
                    memcpy(lens0, lens64, sizeof lens0);
                    kt_fill_normal(&rng, kc, cdt, B * H * LMAX * D, 1.0);
                    kt_fill_normal(&rng, vc, cdt, B * H * LMAX * DV, 1.0);
                    kt_fill_normal(&rng, kn, ndt, B * ln * H * D, 1.0);
                    kt_fill_normal(&rng, vn, ndt, B * ln * H * DV, 1.0);
                    memcpy(kc0, kc, (size_t)(B * H * LMAX * D) * ce);
                    memcpy(vc0, vc, (size_t)(B * H * LMAX * DV) * ce);
                    kern_tensor_init_strided(&kct, kc, cdt, 4, shp, kst);
                    kern_tensor_init_strided(&vct, vc, cdt, 4, vshp, vst);
                    knt = kern_tensor_4d(kn, ndt, B, ln, H, D);
                    vnt = kern_tensor_4d(vn, ndt, B, ln, H, DV);
                    lens = kern_tensor_1d(lt ? (void *)lens32 : (void *)lens64, ldt, B);
                    KT_FOR_EACH_ISA(isa, ctx, 2) {
                        (void)isa;
                        memcpy(kc, kc0, (size_t)(B * H * LMAX * D) * ce);
                        memcpy(vc, vc0, (size_t)(B * H * LMAX * DV) * ce);
                        for (b = 0; b < B; b++) lens32[b] = (int32_t)(lens64[b] = lens0[b]);
                        KT_OK(kern_kv_append(ctx, &knt, &vnt, &kct, &vct, &lens));
                        for (b = 0; b < B; b++) {
                            int64_t nl = lt ? lens32[b] : lens64[b];
                            KT_CHECK(nl == lens0[b] + ln, "k_lens[%lld]=%lld", (long long)b, (long long)nl);
                            for (h = 0; h < H; h++)
                                for (j = 0; j < LMAX; j++) {
                                    int fresh = j >= lens0[b] && j < lens0[b] + ln;
                                    for (d = 0; d < D; d++) {
                                        int64_t co = ((b * H + h) * LMAX + j) * D + d;
                                        float want = fresh ? (float)kt_get(kn, ndt, ((b * ln + j - lens0[b]) * H + h) * D + d)
                                                           : (float)kt_get(kc0, cdt, co);
                                        if (cdt == KERN_BF16) want = kern_bf16_to_f32(kern_f32_to_bf16(want));
                                        if (cdt == KERN_F16) want = kern_f16_to_f32(kern_f32_to_f16(want));
                                        KT_CHECK((float)kt_get(kc, cdt, co) == want, "k b%lld h%lld j%lld d%lld",
                                                 (long long)b, (long long)h, (long long)j, (long long)d);
                                    }
                                    for (d = 0; d < DV; d++) {
                                        int64_t co = ((b * H + h) * LMAX + j) * DV + d;
                                        float want = fresh ? (float)kt_get(vn, ndt, ((b * ln + j - lens0[b]) * H + h) * DV + d)
                                                           : (float)kt_get(vc0, cdt, co);
                                        if (cdt == KERN_BF16) want = kern_bf16_to_f32(kern_f32_to_bf16(want));
                                        if (cdt == KERN_F16) want = kern_f16_to_f32(kern_f32_to_f16(want));
                                        KT_CHECK((float)kt_get(vc, cdt, co) == want, "v b%lld h%lld j%lld d%lld",
                                                 (long long)b, (long long)h, (long long)j, (long long)d);
                                    }
                                }
                        }
                        /* now sequence 2 is full: another append is refused, nothing moves */
                        {
                            char *kc1 = (char *)malloc((size_t)(B * H * LMAX * D) * ce);
                            int64_t l64[B];
                            int32_t l32[B];
                            memcpy(kc1, kc, (size_t)(B * H * LMAX * D) * ce);
                            memcpy(l64, lens64, sizeof l64);
                            memcpy(l32, lens32, sizeof l32);
                            KT_ERROR(kern_kv_append(ctx, &knt, &vnt, &kct, &vct, &lens), KERN_ERR_SHAPE,
                                     "new >");
                            KT_CHECK(memcmp(kc1, kc, (size_t)(B * H * LMAX * D) * ce) == 0, "cache written");
                            KT_CHECK(memcmp(l64, lens64, sizeof l64) == 0 && memcmp(l32, lens32, sizeof l32) == 0,
                                     "k_lens written");
                            free(kc1);
                        }
                    }
                    kt_free(kc);
                    kt_free(vc);
                    kt_free(kn);
                    kt_free(vn);
                    free(kc0);
                    free(vc0);
                }
}

KT_TEST(kv_append_errors) {
    float kc[2 * 4 * 1 * 2], kn[2 * 1 * 1 * 2], snap[16];
    int64_t lens[2] = {1, 2};
    kern_tensor kct = kern_tensor_4d(kc, KERN_F32, 2, 4, 1, 2), knt = kern_tensor_4d(kn, KERN_F32, 2, 1, 1, 2);
    kern_tensor lt = kern_tensor_1d(lens, KERN_I64, 2), bad;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_SCALAR);
    memset(kc, 0, sizeof kc);
    memset(kn, 0, sizeof kn);
    memcpy(snap, kc, sizeof kc);
    bad = kct;
    bad.dtype = KERN_I32;
    KT_ERROR(kern_kv_append(ctx, &knt, NULL, &bad, NULL, &lt), KERN_ERR_DTYPE, "k_cache.dtype");
    bad = kern_tensor_4d(kc, KERN_F32, 2, 4, 1, 1);
    KT_ERROR(kern_kv_append(ctx, &knt, NULL, &bad, NULL, &lt), KERN_ERR_SHAPE, "k_cache.shape[3]");
    KT_ERROR(kern_kv_append(ctx, &knt, &knt, &kct, NULL, &lt), KERN_ERR_ARG, "both");
    lens[1] = -1;
    KT_ERROR(kern_kv_append(ctx, &knt, NULL, &kct, NULL, &lt), KERN_ERR_INDEX, "negative");
    lens[1] = 4;
    KT_ERROR(kern_kv_append(ctx, &knt, NULL, &kct, NULL, &lt), KERN_ERR_SHAPE, "cache");
    bad = kern_tensor_1d(lens, KERN_I64, 1);
    KT_ERROR(kern_kv_append(ctx, &knt, NULL, &kct, NULL, &bad), KERN_ERR_SHAPE, "k_lens");
    KT_CHECK(memcmp(kc, snap, sizeof kc) == 0 && lens[0] == 1 && lens[1] == 4, "an error wrote");
    lens[1] = 3;
    KT_OK(kern_kv_append(ctx, &knt, NULL, &kct, NULL, &lt));
    KT_CHECK(lens[0] == 2 && lens[1] == 4, "lengths not advanced");
}

KT_TEST(argmax) {
    int di, it;
    for (di = 0; di < 3; di++)
        for (it = 0; it < 2; it++) {
            enum { R = 5, V = 1003 };
            kern_dtype dt = FDT[di];
            void *x = kt_alloc((size_t)(R * V) * kern_dtype_size(dt), "x");
            int64_t idx64[R], r, i;
            int32_t idx32[R];
            kern_tensor xt = kern_tensor_2d(x, dt, R, V);
            kern_tensor ix = kern_tensor_1d(it ? (void *)idx32 : (void *)idx64, it ? KERN_I32 : KERN_I64, R);
            kt_rng rng = kt_rng_make((uint64_t)(di * 2 + it));
            kt_fill_normal(&rng, x, dt, R * V, 1.0);
            kt_set(x, dt, 1 * V + 17, 100.0); /* ties: the first wins */
            kt_set(x, dt, 1 * V + 900, 100.0);
            kt_set(x, dt, 2 * V + 5, NAN);    /* NaN wins, the first one */
            kt_set(x, dt, 2 * V + 6, 1000.0);
            kt_set(x, dt, 2 * V + 7, NAN);
            for (i = 0; i < V; i++) kt_set(x, dt, 3 * V + i, -1.0); /* all equal: 0 */
            kt_set(x, dt, 4 * V + V - 1, 50.0); /* the last element */
            KT_OK(kern_argmax(kt_ctx(2, KERN_ISA_SCALAR), &xt, &ix));
            for (r = 0; r < R; r++) {
                int64_t want = 0, got = it ? idx32[r] : idx64[r];
                double bv = kt_get(x, dt, r * V);
                for (i = 1; i < V && !isnan(bv); i++) {
                    double v = kt_get(x, dt, r * V + i);
                    if (v > bv || isnan(v)) bv = v, want = i;
                }
                KT_CHECK(got == want, "%s row %lld: got %lld want %lld", kern_dtype_name(dt),
                         (long long)r, (long long)got, (long long)want);
            }
            KT_CHECK((it ? idx32[1] : idx64[1]) == 17 && (it ? idx32[2] : idx64[2]) == 5 &&
                         (it ? idx32[3] : idx64[3]) == 0 && (it ? idx32[4] : idx64[4]) == V - 1,
                     "tie / NaN rules");
            KT_ERROR(kern_argmax(NULL, &xt, &xt), KERN_ERR_DTYPE, "indices.dtype");
            kt_free(x);
        }
}

/* The reference order of torch.topk: larger first, NaN largest, ties to
 * the lower index. */
static int topk_before(double a, int64_t ia, double b, int64_t ib) {
    if (isnan(a)) return !isnan(b) || ia < ib;
    if (isnan(b)) return 0;
    return a > b || (a == b && ia < ib);
}

#ifdef KT_SANITIZER
#define KT_SANITIZER_ON 1
#else
#define KT_SANITIZER_ON 0
#endif
static const double *topk_row_;
static int topk_cmp(const void *a, const void *b) {
    int64_t ia = *(const int64_t *)a, ib = *(const int64_t *)b;
    return topk_before(topk_row_[ia], ia, topk_row_[ib], ib) ? -1 : 1;
}

KT_TEST(topk) {
    static const int64_t Vs[] = {1, 7, 33, 1000, 32003};
    static const int64_t ks[] = {1, 2, 5, 40, 1000};
    int di, it, vi, ki, st;
    for (di = 0; di < 3; di++)
        for (vi = 0; vi < 5; vi++)
            for (ki = 0; ki < 5; ki++)
                for (st = 0; st < 2; st++) {
                    enum { R = 4 };
                    kern_dtype dt = FDT[di];
                    int64_t V = Vs[vi], k = ks[ki], XS = st ? V + 5 : V, r, i, j;
                    void *x, *vals;
                    int64_t *want;
                    double *rowv;
                    kern_tensor xt, vt, ix;
                    kern_dtype vdt = di == 1 ? KERN_F32 : dt;
                    kt_rng rng = kt_rng_make((uint64_t)(di * 100 + vi * 10 + ki));
                    if (k > V || (KT_SANITIZER_ON && V > 1000)) continue;
                    it = (int)((vi + ki) % 2);
                    x = kt_alloc((size_t)(R * XS) * kern_dtype_size(dt), "x");
                    vals = kt_alloc((size_t)(R * k) * kern_dtype_size(vdt), "vals");
                    want = (int64_t *)malloc((size_t)V * sizeof *want);
                    rowv = (double *)malloc((size_t)V * sizeof *rowv);
                    kt_fill_normal(&rng, x, dt, R * XS, 1.0);
                    /* row 1: few distinct values (ties), row 2: NaNs, row 3: ascending */
                    for (i = 0; i < V; i++) kt_set(x, dt, 1 * XS + i, (double)(kt_next(&rng) % 4));
                    for (i = 0; i < V; i += 3) kt_set(x, dt, 2 * XS + i, NAN);
                    for (i = 0; i < V; i++) kt_set(x, dt, 3 * XS + i, (double)i * 0.25);
                    {
                        int64_t shp[2] = {R, V}, str[2] = {XS, 1};
                        kern_tensor_init_strided(&xt, x, dt, 2, shp, str);
                    }
                    vt = kern_tensor_2d(vals, vdt, R, k);
                    {
                        void *ibuf = kt_alloc((size_t)(R * k) * (it ? 4 : 8), "idx");
                        ix = kern_tensor_2d(ibuf, it ? KERN_I32 : KERN_I64, R, k);
                        KT_FOR_EACH_ISA(isa, ctx, 2) {
                            kt_context("%s V%lld k%lld %s", kern_dtype_name(dt), (long long)V,
                                       (long long)k, kern_isa_name(isa));
                            KT_OK(kern_topk(ctx, &xt, &vt, &ix));
                            for (r = 0; r < R; r++) {
                                /* reference: the whole row sorted in torch's order */
                                for (i = 0; i < V; i++) want[i] = i, rowv[i] = kt_get(x, dt, r * XS + i);
                                topk_row_ = rowv;
                                qsort(want, (size_t)V, sizeof *want, topk_cmp);
                                for (j = 0; j < k; j++) {
                                    int64_t got = it ? ((int32_t *)ibuf)[r * k + j] : ((int64_t *)ibuf)[r * k + j];
                                    double gv = kt_get(vals, vdt, r * k + j), wv = kt_get(x, dt, r * XS + want[j]);
                                    KT_CHECK(got == want[j], "row %lld slot %lld: got %lld want %lld",
                                             (long long)r, (long long)j, (long long)got, (long long)want[j]);
                                    KT_CHECK(gv == wv || (isnan(gv) && isnan(wv)), "value row %lld slot %lld",
                                             (long long)r, (long long)j);
                                    if (got != want[j]) break;
                                }
                            }
                        }
                        kt_context("");
                        kt_free(ibuf);
                    }
                    kt_free(x);
                    kt_free(vals);
                    free(want);
                    free(rowv);
                }
}

KT_TEST(topk_errors) {
    float x[2 * 5], vals[2 * 3], snapv[6];
    int64_t idx[2 * 6], snapi[12];
    int32_t i32[6];
    kern_tensor xt = kern_tensor_2d(x, KERN_F32, 2, 5), it = kern_tensor_2d(idx, KERN_I64, 2, 3);
    kern_tensor vt = kern_tensor_2d(vals, KERN_F32, 2, 3), bad;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_SCALAR);
    int i;
    for (i = 0; i < 10; i++) x[i] = (float)i;
    for (i = 0; i < 12; i++) idx[i] = -7;
    for (i = 0; i < 6; i++) vals[i] = -7.0f;
    memcpy(snapi, idx, sizeof idx);
    memcpy(snapv, vals, sizeof vals);
    bad = kern_tensor_2d(idx, KERN_I64, 2, 6);
    KT_ERROR(kern_topk(ctx, &xt, NULL, &bad), KERN_ERR_SHAPE, "k=6 is larger");
    bad = kern_tensor_2d(idx, KERN_F32, 2, 3);
    KT_ERROR(kern_topk(ctx, &xt, &vt, &bad), KERN_ERR_DTYPE, "indices.dtype");
    bad = kern_tensor_2d(vals, KERN_I32, 2, 3);
    KT_ERROR(kern_topk(ctx, &xt, &bad, &it), KERN_ERR_DTYPE, "values.dtype");
    bad = kern_tensor_2d(vals, KERN_F32, 2, 2);
    KT_ERROR(kern_topk(ctx, &xt, &bad, &it), KERN_ERR_SHAPE, "values must be");
    bad = kern_tensor_2d(idx, KERN_I64, 1, 3);
    KT_ERROR(kern_topk(ctx, &xt, &vt, &bad), KERN_ERR_SHAPE, "indices.shape[0]");
    bad = kern_tensor_2d(x, KERN_I64, 2, 3);
    KT_ERROR(kern_topk(ctx, &xt, NULL, &bad), KERN_ERR_ARG, "overlaps x");
    KT_ERROR(kern_topk(ctx, NULL, &vt, &it), KERN_ERR_ARG, "x is NULL");
    KT_CHECK(memcmp(idx, snapi, sizeof idx) == 0 && memcmp(vals, snapv, sizeof vals) == 0,
             "an error wrote");
    bad = kern_tensor_2d(i32, KERN_I32, 2, 3);
    KT_OK(kern_topk(ctx, &xt, &vt, &bad));
    KT_CHECK(i32[0] == 4 && i32[1] == 3 && i32[2] == 2 && vals[0] == 4.0f && vals[5] == 7.0f,
             "topk of 0..4: %d %d %d", i32[0], i32[1], i32[2]);
    bad = kern_tensor_2d(idx, KERN_I64, 2, 0);
    KT_OK(kern_topk(ctx, &xt, NULL, &bad));
}

/* gemv against a double reference: every weight dtype, x/y dtypes,
 * awkward M, N, K, row strides, the epilogue (bias, SiLU, residual). */
static double silu_d(double v) { return v / (1.0 + exp(-v)); }

KT_TEST(linear_gemv) {
    static const kern_dtype WDT[4] = {KERN_F32, KERN_BF16, KERN_F16, KERN_I8};
    static const int64_t Ms[] = {1, 2, 3, 8, 9};
    static const int64_t Ns[] = {1, 5, 37, 64, 300};
    static const int64_t Ks[] = {1, 7, 64, 300, 2100}; /* 2100: rows over 8 KiB */
    int wi, mi, ni, ki, var;
    for (wi = 0; wi < 4; wi++)
        for (mi = 0; mi < 5; mi++)
            for (ni = 0; ni < 5; ni++)
                for (ki = 0; ki < 5; ki++) {
                    kern_dtype wdt = WDT[wi];
                    int64_t M = Ms[mi], N = Ns[ni], K = Ks[ki], m, n, k;
                    int epi, strided, trans;
                    kern_dtype xdt, ydt;
                    int64_t XS, WS, YS;
                    void *x, *w, *y, *res, *bias;
                    float *scale;
                    double *want, *bound;
                    kern_tensor xt, wt, yt, rt, bt, st;
                    kern_gemv_params p;
                    kt_rng rng;
                    var = (int)(wi + mi + ni + ki);
                    epi = var % 2;
                    strided = (var / 2) % 2;
                    /* w as the transpose of a row-major [K, N] weight (N-contiguous) */
                    trans = (var / 3) % 2;
                    xdt = (var % 3) == 1 ? KERN_BF16 : KERN_F32;
                    ydt = (var % 4) == 3 ? KERN_BF16 : KERN_F32;
                    XS = strided ? K + 3 : K;
                    WS = trans ? (strided ? N + 5 : N) : (strided ? K + 5 : K);
                    YS = strided ? N + 2 : N;
                    rng = kt_rng_make((uint64_t)(wi * 1000 + mi * 100 + ni * 10 + ki));
                    x = kt_alloc((size_t)(M * XS) * kern_dtype_size(xdt), "x");
                    w = kt_alloc((size_t)((trans ? K : N) * WS) * kern_dtype_size(wdt), "w");
                    y = kt_alloc((size_t)(M * YS) * kern_dtype_size(ydt), "y");
                    res = kt_alloc((size_t)(M * N) * 4, "res");
                    bias = kt_alloc((size_t)N * 4, "bias");
                    scale = (float *)kt_alloc((size_t)N * 4, "scale");
                    want = (double *)malloc((size_t)(M * N) * sizeof *want);
                    bound = (double *)malloc((size_t)(M * N) * sizeof *bound);
                    kt_fill_normal(&rng, x, xdt, M * XS, 1.0);
                    if (wdt == KERN_I8) {
                        for (k = 0; k < (trans ? K : N) * WS; k++) ((int8_t *)w)[k] = (int8_t)(kt_next(&rng) % 255 - 127);
                    } else {
                        kt_fill_normal(&rng, w, wdt, (trans ? K : N) * WS, 0.1);
                    }
                    kt_fill_normal(&rng, res, KERN_F32, M * N, 1.0);
                    kt_fill_normal(&rng, bias, KERN_F32, N, 1.0);
                    for (n = 0; n < N; n++) scale[n] = (float)kt_uniform(&rng, 0.001, 0.01);
                    {
                        int64_t sh[2] = {M, K}, str[2] = {XS, 1};
                        kern_tensor_init_strided(&xt, x, xdt, 2, sh, str);
                        sh[0] = N;
                        str[0] = trans ? 1 : WS;
                        str[1] = trans ? WS : 1;
                        kern_tensor_init_strided(&wt, w, wdt, 2, sh, str);
                        sh[0] = M; sh[1] = N; str[0] = YS; str[1] = 1;
                        kern_tensor_init_strided(&yt, y, ydt, 2, sh, str);
                    }
                    rt = kern_tensor_2d(res, KERN_F32, M, N);
                    bt = kern_tensor_1d(bias, KERN_F32, N);
                    st = kern_tensor_1d(scale, KERN_F32, N);
                    memset(&p, 0, sizeof p);
                    if (wdt == KERN_I8) p.w_scale = &st;
                    if (epi) {
                        p.epilogue.bias = &bt;
                        p.epilogue.act = KERN_ACT_SILU;
                        p.epilogue.residual = &rt;
                    }
                    for (m = 0; m < M; m++)
                        for (n = 0; n < N; n++) {
                            double acc = 0, mag = 0, v;
                            for (k = 0; k < K; k++) {
                                double a = kt_get(x, xdt, m * XS + k);
                                int64_t wi_ = trans ? k * WS + n : n * WS + k;
                                double b = wdt == KERN_I8 ? (double)((int8_t *)w)[wi_] : kt_get(w, wdt, wi_);
                                acc += a * b;
                                mag += fabs(a * b);
                            }
                            if (wdt == KERN_I8) acc *= scale[n], mag *= scale[n];
                            v = acc;
                            if (epi) {
                                v = silu_d(acc + ((float *)bias)[n]) + ((float *)res)[m * N + n];
                                mag += fabs(acc + ((float *)bias)[n]) + fabs(((float *)res)[m * N + n]);
                            }
                            want[m * N + n] = v;
                            bound[m * N + n] = 4e-6 * mag * (1.0 + sqrt((double)K) / 8) + 1e-30 +
                                               (ydt == KERN_BF16 ? fabs(v) / 256.0 : 0);
                        }
                    KT_FOR_EACH_ISA(isa, ctx, 2) {
                        kt_context("w %s x %s y %s M%lld N%lld K%lld epi%d strided%d trans%d %s",
                                   kern_dtype_name(wdt), kern_dtype_name(xdt), kern_dtype_name(ydt),
                                   (long long)M, (long long)N, (long long)K, epi, strided, trans,
                                   kern_isa_name(isa));
                        kt_poison(y, (size_t)(M * YS) * kern_dtype_size(ydt));
                        KT_OK(kern_linear_gemv(ctx, &xt, &wt, &yt, &p));
                        for (m = 0; m < M; m++)
                            for (n = 0; n < N; n++) {
                                double g = kt_get(y, ydt, m * YS + n), e = want[m * N + n];
                                KT_CHECK(fabs(g - e) <= bound[m * N + n], "y[%lld, %lld] = %.9g want %.9g",
                                         (long long)m, (long long)n, g, e);
                            }
                    }
                    kt_context("");
                    KT_CHECK(kt_guards_ok(y), "y guard bytes");
                    kt_free(x);
                    kt_free(w);
                    kt_free(y);
                    kt_free(res);
                    kt_free(bias);
                    kt_free(scale);
                    free(want);
                    free(bound);
                }
}

/* params.x_quant: x rows quantized (kern_base.h's rule) and exact int32
 * sums, bit for bit against kern_qlinear on the same codes and scales
 * (kern_qweight_pack_int8), every ISA level (the int8 dot: scalar, AVX2
 * vpmaddwd, AVX512-VNNI vpdpbusd), 1 and 2 threads, K around the 16- and
 * 64-code vectors, x f32/bf16 (strided), y f32/bf16, epilogue or not; a
 * caller workspace of exactly kern_linear_gemv_workspace_size bytes. */
KT_TEST(linear_gemv_x_quant) {
    static const int64_t Ms[] = {1, 2, 3, 4, 5, 8, 9};
    static const int64_t Ns[] = {1, 5, 37, 64};
    static const int64_t Ks[] = {1, 7, 16, 63, 64, 65, 300, 2100};
    int mi, ni, ki;
    for (mi = 0; mi < 7; mi++)
        for (ni = 0; ni < 4; ni++)
            for (ki = 0; ki < 8; ki++) {
                const int64_t M = Ms[mi], N = Ns[ni], K = Ks[ki], XS = (mi + ki) % 2 ? K + 3 : K;
                const int var = mi + ni + ki, epi = var % 2, own_ws = (var / 2) % 2;
                const kern_dtype xdt = var % 3 == 1 ? KERN_BF16 : KERN_F32, ydt = var % 4 == 3 ? KERN_BF16 : KERN_F32;
                const size_t yb = (size_t)(M * N) * kern_dtype_size(ydt);
                void *x = kt_alloc((size_t)(M * XS) * kern_dtype_size(xdt), "x");
                int8_t *w = (int8_t *)kt_alloc((size_t)(N * K), "w");
                float *sc = (float *)kt_alloc((size_t)N * 4, "scale"), *bias = (float *)kt_alloc((size_t)N * 4, "bias");
                float *res = (float *)kt_alloc((size_t)(M * N) * 4, "res");
                void *y = kt_alloc(yb, "y"), *yref = kt_alloc(yb, "yref");
                kern_tensor xt, wt, st, bt, rt, yt, yrt;
                kt_rng rng = kt_rng_make((uint64_t)(7000 + mi * 100 + ni * 10 + ki));
                int64_t i;
                kt_fill_normal(&rng, x, xdt, M * XS, 1.0);
                if (var % 5 == 0) kt_set(x, xdt, 0, 40.0); /* an outlier sets row 0's scale */
                for (i = 0; i < N * K; i++) w[i] = (int8_t)(kt_next(&rng) % 255 - 127);
                if (K >= 2) w[0] = -127, w[1] = 127;
                for (i = 0; i < N; i++) sc[i] = (float)kt_uniform(&rng, 0.001, 0.01);
                kt_fill_normal(&rng, bias, KERN_F32, N, 1.0);
                kt_fill_normal(&rng, res, KERN_F32, M * N, 1.0);
                {
                    int64_t sh[2] = {M, K}, str[2] = {XS, 1};
                    kern_tensor_init_strided(&xt, x, xdt, 2, sh, str);
                }
                wt = kern_tensor_2d(w, KERN_I8, N, K);
                st = kern_tensor_1d(sc, KERN_F32, N);
                bt = kern_tensor_1d(bias, KERN_F32, N);
                rt = kern_tensor_2d(res, KERN_F32, M, N);
                yt = kern_tensor_2d(y, ydt, M, N);
                yrt = kern_tensor_2d(yref, ydt, M, N);
                KT_FOR_EACH_ISA(isa, ctx, 2) {
                    kern_qweight *qw = NULL;
                    kern_qlinear_params qp;
                    kern_gemv_params p;
                    size_t need = 0;
                    void *ws = NULL;
                    kt_context("M%lld N%lld K%lld x %s y %s epi%d ws%d %s", (long long)M, (long long)N, (long long)K,
                               kern_dtype_name(xdt), kern_dtype_name(ydt), epi, own_ws, kern_isa_name(isa));
                    memset(&qp, 0, sizeof qp);
                    memset(&p, 0, sizeof p);
                    if (epi) {
                        qp.epilogue.bias = p.epilogue.bias = &bt;
                        qp.epilogue.act = p.epilogue.act = KERN_ACT_GELU;
                        qp.epilogue.residual = p.epilogue.residual = &rt;
                    }
                    p.w_scale = &st;
                    p.x_quant = 1;
                    KT_OK(kern_qweight_pack_int8(ctx, &wt, &st, &qw, NULL));
                    kt_poison(yref, yb);
                    KT_OK(kern_qlinear(ctx, &xt, qw, &yrt, &qp));
                    kern_qweight_free(ctx, qw);
                    KT_OK(kern_linear_gemv_workspace_size(ctx, &xt, &p, &need));
                    KT_CHECK(need > 0, "x_quant needs a workspace");
                    if (own_ws) {
                        ws = kt_alloc(need, "ws");
                        p.workspace = ws;
                        p.workspace_size = need;
                    }
                    kt_poison(y, yb);
                    KT_OK(kern_linear_gemv(ctx, &xt, &wt, &yt, &p));
                    KT_CHECK(memcmp(y, yref, yb) == 0, "y differs from kern_qlinear's bits");
                    if (ws) {
                        KT_CHECK(kt_guards_ok(ws), "workspace guard bytes");
                        kt_free(ws);
                    }
                }
                kt_context("");
                KT_CHECK(kt_guards_ok(y), "y guard bytes");
                kt_free(x);
                kt_free(w);
                kt_free(sc);
                kt_free(bias);
                kt_free(res);
                kt_free(y);
                kt_free(yref);
            }
}

/* epilogue.glu: gate and up rows packed by kern_glu_pack (weights, i8
 * scales, bias), bit for bit against the plain GEMV on the same packed
 * weight followed by act(gate) * up + residual in f32, every ISA; and the
 * gate and up separately (an F.linear pair) through the plain GEMV. */
KT_TEST(linear_gemv_glu) {
    static const kern_dtype WDT[3] = {KERN_F32, KERN_BF16, KERN_I8};
    static const int64_t Ms[] = {1, 2, 3, 9};
    static const int64_t Fs[] = {1, 8, 13, 40};
    static const int64_t Ks[] = {7, 300, 2100};
    int wi, mi, fi, ki;
    for (wi = 0; wi < 3; wi++)
        for (mi = 0; mi < 4; mi++)
            for (fi = 0; fi < 4; fi++)
                for (ki = 0; ki < 3; ki++) {
                    kern_dtype wdt = WDT[wi], ydt = (mi + fi) % 2 ? KERN_BF16 : KERN_F32;
                    int64_t M = Ms[mi], F = Fs[fi], K = Ks[ki], N = 2 * F, m, f, k;
                    size_t wes = kern_dtype_size(wdt), yes = kern_dtype_size(ydt);
                    float *x = (float *)kt_alloc((size_t)(M * K) * 4, "x");
                    char *wg = (char *)kt_alloc((size_t)(F * K) * wes, "wg");
                    char *wu = (char *)kt_alloc((size_t)(F * K) * wes, "wu");
                    char *w2 = (char *)kt_alloc((size_t)(N * K) * wes, "w2");
                    float *sg = (float *)kt_alloc((size_t)F * 4, "sg"), *su = (float *)kt_alloc((size_t)F * 4, "su");
                    float *s2 = (float *)kt_alloc((size_t)N * 4, "s2"), *b2 = (float *)kt_alloc((size_t)N * 4, "b2");
                    float *res = (float *)kt_alloc((size_t)(M * F) * 4, "res");
                    float *P = (float *)kt_alloc((size_t)(M * N) * 4, "P");
                    char *y = (char *)kt_alloc((size_t)(M * F) * yes, "y");
                    char *want = (char *)kt_alloc((size_t)(M * F) * yes, "want");
                    float *GU = (float *)kt_alloc((size_t)(M * N) * 4, "GU");
                    float *SM = (float *)kt_alloc((size_t)(M * F) * 4, "SM");
                    kern_tensor GUt = kern_tensor_2d(GU, KERN_F32, M, N), SMt = kern_tensor_2d(SM, KERN_F32, M, F);
                    kern_tensor xt = kern_tensor_2d(x, KERN_F32, M, K), gt = kern_tensor_2d(wg, wdt, F, K);
                    kern_tensor ut = kern_tensor_2d(wu, wdt, F, K), w2t = kern_tensor_2d(w2, wdt, N, K);
                    kern_tensor sgt = kern_tensor_1d(sg, KERN_F32, F), sut = kern_tensor_1d(su, KERN_F32, F);
                    kern_tensor s2t = kern_tensor_1d(s2, KERN_F32, N), b2t = kern_tensor_1d(b2, KERN_F32, N);
                    kern_tensor rt = kern_tensor_2d(res, KERN_F32, M, F), Pt = kern_tensor_2d(P, KERN_F32, M, N);
                    kern_tensor yt = kern_tensor_2d(y, ydt, M, F);
                    kern_gemv_params p;
                    kt_rng rng = kt_rng_make((uint64_t)(wi * 1000 + mi * 100 + fi * 10 + ki));
                    kt_fill_normal(&rng, x, KERN_F32, M * K, 1.0);
                    if (wdt == KERN_I8) {
                        for (k = 0; k < F * K; k++) {
                            ((int8_t *)wg)[k] = (int8_t)(kt_next(&rng) % 255 - 127);
                            ((int8_t *)wu)[k] = (int8_t)(kt_next(&rng) % 255 - 127);
                        }
                    } else {
                        kt_fill_normal(&rng, wg, wdt, F * K, 0.1);
                        kt_fill_normal(&rng, wu, wdt, F * K, 0.1);
                    }
                    for (f = 0; f < F; f++) {
                        sg[f] = (float)kt_uniform(&rng, 0.001, 0.01);
                        su[f] = (float)kt_uniform(&rng, 0.001, 0.01);
                    }
                    kt_fill_normal(&rng, b2, KERN_F32, N, 1.0);
                    kt_fill_normal(&rng, res, KERN_F32, M * F, 1.0);
                    KT_OK(kern_glu_pack(&gt, &ut, &w2t, 0));
                    KT_OK(kern_glu_pack(&sgt, &sut, &s2t, -1));
                    KT_FOR_EACH_ISA(isa, ctx, 2) {
                        kt_context("w %s y %s M%lld F%lld K%lld %s", kern_dtype_name(wdt),
                                   kern_dtype_name(ydt), (long long)M, (long long)F, (long long)K,
                                   kern_isa_name(isa));
                        memset(&p, 0, sizeof p);
                        if (wdt == KERN_I8) p.w_scale = &s2t;
                        p.epilogue.bias = &b2t;
                        KT_OK(kern_linear_gemv(ctx, &xt, &w2t, &Pt, &p));
                        /* unpack to [gate | up] rows, silu_mul, then + res, * 2 */
                        for (m = 0; m < M; m++)
                            for (k = 0; k < N; k++) {
                                int up;
                                f = kern_glu_source(k, F, &up);
                                GU[m * N + up * F + f] = P[m * N + k];
                            }
                        KT_OK(kern_silu_mul(ctx, &GUt, NULL, &SMt));
                        for (m = 0; m < M * F; m++) {
                            float v = SM[m] + res[m];
                            v = v * 2.0f;
                            if (ydt == KERN_F32) memcpy(want + m * 4, &v, 4);
                            else {
                                uint16_t h = kern_f32_to_bf16(v);
                                memcpy(want + m * 2, &h, 2);
                            }
                        }
                        p.epilogue.act = KERN_ACT_SILU;
                        p.epilogue.glu = 1;
                        p.epilogue.residual = &rt;
                        p.epilogue.out_scale = 2.0f;
                        kt_poison(y, (size_t)(M * F) * yes);
                        KT_OK(kern_linear_gemv(ctx, &xt, &w2t, &yt, &p));
                        kt_assert_bytes_equal("glu gemv vs gemv + combination", y, want,
                                              (size_t)(M * F) * yes);
                    }
                    kt_context("");
                    KT_CHECK(kt_guards_ok(y), "y guard bytes");
                    kt_free(x); kt_free(wg); kt_free(wu); kt_free(w2); kt_free(sg); kt_free(su);
                    kt_free(s2); kt_free(b2); kt_free(res); kt_free(P); kt_free(y); kt_free(want);
                    kt_free(GU); kt_free(SM);
                }
}

KT_TEST(linear_gemv_errors) {
    float x[2 * 8], w[3 * 8], y[2 * 3], snap[6], sc[3] = {1, 1, 1};
    int8_t w8[3 * 8];
    kern_tensor xt = kern_tensor_2d(x, KERN_F32, 2, 8), wt = kern_tensor_2d(w, KERN_F32, 3, 8);
    kern_tensor yt = kern_tensor_2d(y, KERN_F32, 2, 3), w8t = kern_tensor_2d(w8, KERN_I8, 3, 8);
    kern_tensor sct = kern_tensor_1d(sc, KERN_F32, 3), bad;
    kern_gemv_params p;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_SCALAR);
    int i;
    for (i = 0; i < 16; i++) x[i] = 1.0f;
    for (i = 0; i < 24; i++) w[i] = 0.5f, w8[i] = 2;
    for (i = 0; i < 6; i++) y[i] = -3.0f;
    memcpy(snap, y, sizeof y);
    memset(&p, 0, sizeof p);
    KT_ERROR(kern_linear_gemv(ctx, &xt, &w8t, &yt, &p), KERN_ERR_ARG, "w_scale");
    p.w_scale = &sct;
    KT_ERROR(kern_linear_gemv(ctx, &xt, &wt, &yt, &p), KERN_ERR_ARG, "only for an i8 w");
    p.w_scale = NULL;
    bad = kern_tensor_2d(w, KERN_F32, 3, 7);
    KT_ERROR(kern_linear_gemv(ctx, &xt, &bad, &yt, &p), KERN_ERR_SHAPE, "w.shape[1]");
    bad = kern_tensor_2d(y, KERN_F32, 2, 2);
    KT_ERROR(kern_linear_gemv(ctx, &xt, &wt, &bad, &p), KERN_ERR_SHAPE, "y must be");
    bad = kern_tensor_2d(w, KERN_I32, 3, 8);
    KT_ERROR(kern_linear_gemv(ctx, &xt, &bad, &yt, &p), KERN_ERR_DTYPE, "w.dtype");
    bad = kern_tensor_2d(x, KERN_F32, 2, 3);
    KT_ERROR(kern_linear_gemv(ctx, &xt, &wt, &bad, &p), KERN_ERR_ARG, "overlaps x");
    bad = kern_tensor_1d(sc, KERN_F32, 2);
    p.epilogue.bias = &bad;
    KT_ERROR(kern_linear_gemv(ctx, &xt, &wt, &yt, &p), KERN_ERR_SHAPE, "bias must be [3]");
    p.epilogue.bias = NULL;
    p.epilogue.act = (kern_act)99;
    KT_ERROR(kern_linear_gemv(ctx, &xt, &wt, &yt, &p), KERN_ERR_ARG, "act");
    p.epilogue.act = KERN_ACT_NONE;
    {
        int64_t sh[2] = {2, 8}, str[2] = {8, 2};
        kern_tensor_init_strided(&bad, w, KERN_F32, 2, sh, str);
        KT_ERROR(kern_linear_gemv(ctx, &bad, &wt, &yt, &p), KERN_ERR_LAYOUT, "x needs a unit stride");
        /* w [3, 8] with strides (2, 6): unit along neither K nor N */
        sh[0] = 3;
        str[0] = 2;
        str[1] = 6;
        kern_tensor_init_strided(&bad, w, KERN_F32, 2, sh, str);
        KT_ERROR(kern_linear_gemv(ctx, &xt, &bad, &yt, &p), KERN_ERR_LAYOUT,
                 "w needs a unit stride along K or along N");
    }
    p.epilogue.glu = 1; /* w has 3 rows: no gate/up pairs */
    KT_ERROR(kern_linear_gemv(ctx, &xt, &wt, &yt, &p), KERN_ERR_SHAPE, "even w.shape[0]");
    bad = kern_tensor_2d(w, KERN_F32, 2, 8);
    KT_ERROR(kern_linear_gemv(ctx, &xt, &bad, &yt, &p), KERN_ERR_SHAPE, "glu: half of w's rows");
    p.epilogue.glu = 0;
    /* x_quant: an i8 w only, K-contiguous, K <= 131071, a big enough workspace */
    p.x_quant = 1;
    KT_ERROR(kern_linear_gemv(ctx, &xt, &wt, &yt, &p), KERN_ERR_ARG, "x_quant is only for an i8 w");
    p.w_scale = &sct;
    {
        int64_t sh[2] = {3, 8}, str[2] = {1, 3}; /* w8 as the transpose of [8, 3] */
        size_t need = 0;
        char ws[512];
        kern_tensor_init_strided(&bad, w8, KERN_I8, 2, sh, str);
        KT_ERROR(kern_linear_gemv(ctx, &xt, &bad, &yt, &p), KERN_ERR_LAYOUT, "unit stride along K");
        { /* K = 2^17: refused on the shapes, before any data is read */
            kern_tensor xk = kern_tensor_2d(x, KERN_F32, 1, 131072), wk = kern_tensor_2d(w8, KERN_I8, 1, 131072);
            kern_tensor yk = kern_tensor_2d(y, KERN_F32, 1, 1), sk = kern_tensor_1d(sc, KERN_F32, 1);
            p.w_scale = &sk;
            KT_ERROR(kern_linear_gemv(ctx, &xk, &wk, &yk, &p), KERN_ERR_SHAPE, "K <= 131071");
            p.w_scale = &sct;
        }
        KT_OK(kern_linear_gemv_workspace_size(ctx, &xt, &p, &need));
        KT_CHECK(need > 0 && need <= sizeof ws, "workspace bytes %zu", need);
        p.workspace = ws;
        p.workspace_size = need - 1;
        KT_ERROR(kern_linear_gemv(ctx, &xt, &w8t, &yt, &p), KERN_ERR_ARG, "workspace");
        p.workspace = NULL;
        p.workspace_size = 0;
    }
    p.w_scale = NULL;
    p.x_quant = 0;
    KT_CHECK(memcmp(y, snap, sizeof y) == 0, "an error wrote y");
    KT_OK(kern_linear_gemv(ctx, &xt, &wt, &yt, NULL));
    KT_CHECK(y[0] == 4.0f && y[5] == 4.0f, "y = %g", y[0]);
    p.w_scale = &sct;
    KT_OK(kern_linear_gemv(ctx, &xt, &w8t, &yt, &p));
    KT_CHECK(y[0] == 16.0f && y[5] == 16.0f, "y = %g", y[0]);
}

/* decode attention against a double softmax over the visible rows. */
static void da_ref(const view4 *q, const view4 *k, const view4 *v, const int64_t *lens,
                   double scale, double *want /* [B, Lq, H, Dv] */) {
    int64_t B = q->t.shape[0], Lq = q->t.shape[1], H = q->t.shape[2], D = q->t.shape[3];
    int64_t Hkv = k->t.shape[2], Dv = v->t.shape[3], G = H / Hkv, b, l, h, j, d;
    double *sc = (double *)malloc((size_t)(k->t.shape[1] + 1) * sizeof(double));
    for (b = 0; b < B; b++)
        for (l = 0; l < Lq; l++)
            for (h = 0; h < H; h++) {
                int64_t n = lens[b] - (Lq - 1 - l), hk = h / G;
                double mx = -INFINITY, sum = 0;
                double *o = want + ((b * Lq + l) * H + h) * Dv;
                for (d = 0; d < Dv; d++) o[d] = 0;
                if (n <= 0) continue;
                for (j = 0; j < n; j++) {
                    double a = 0;
                    for (d = 0; d < D; d++)
                        a += kt_get(q->buf, q->t.dtype, view4_off(q, b, l, h, d)) *
                             kt_get(k->buf, k->t.dtype, view4_off(k, b, j, hk, d));
                    sc[j] = a * scale;
                    if (sc[j] > mx) mx = sc[j];
                }
                for (j = 0; j < n; j++) {
                    double pj = exp(sc[j] - mx);
                    sum += pj;
                    for (d = 0; d < Dv; d++) o[d] += pj * kt_get(v->buf, v->t.dtype, view4_off(v, b, j, hk, d));
                }
                for (d = 0; d < Dv; d++) o[d] /= sum;
            }
    free(sc);
}

/* One decode-attention run on c2 (th threads) into o against want (the
 * bf16 output's rounding allowed on top of 2e-5 (vmax + 1)); *first keeps
 * the 1-thread bits and a 2-thread run must equal them. */
static void da_run_check(kern_ctx *c2, int th, const view4 *q, const view4 *k, const view4 *v,
                         const kern_tensor *lt, view4 *o, const kern_decode_attention_params *p,
                         const double *want, double vmax, float **first) {
    int64_t i, n = o->t.shape[0] * o->t.shape[1] * o->t.shape[2] * o->t.shape[3];
    kt_poison(o->buf, o->bytes);
    KT_OK(kern_decode_attention(c2, &q->t, &k->t, &v->t, lt, &o->t, p));
    for (i = 0; i < n; i++) {
        double g = kt_get(o->buf, o->t.dtype, i), w = want[i];
        double tol = 2e-5 * (vmax + 1) + (o->t.dtype == KERN_BF16 ? fabs(w) / 256 : 0);
        if (!(fabs(g - w) <= tol)) {
            KT_CHECK(0, "out[%lld] = %.9g want %.9g", (long long)i, g, w);
            break;
        }
    }
    if (th == 1) { /* the same bits for 1 and 2 threads */
        free(*first);
        *first = (float *)malloc(o->bytes);
        memcpy(*first, o->buf, o->bytes);
    } else {
        KT_CHECK(memcmp(*first, o->buf, o->bytes) == 0, "1 and 2 threads differ");
    }
}

KT_TEST(decode_attention) {
    static const int64_t lens_sets[3][3] = {{1, 7, 513}, {0, 600, 256}, {257, 2, 31}};
    int var;
    for (var = 0; var < 12; var++) {
        /* Lq 13 (two query blocks, split per chunk) and 70 (nine blocks of
         * 8, the last short, each task through every chunk it sees) run
         * the prompt forms */
        int64_t B = 3, Lq = var % 3 == 2 ? 3 : var % 6 == 1 ? 70 : var % 6 == 3 ? 13 : 1;
        int64_t H = var % 2 ? 8 : 4, Hkv = var % 2 ? 2 : 4;
        int64_t D = var % 4 == 1 ? 40 : 64, Dv = var % 4 == 3 ? 24 : D, Lmax = 600, b, i;
        kern_dtype cdt = FDT[var % 3], qdt = var % 4 == 2 ? KERN_BF16 : KERN_F32;
        kern_dtype odt = var % 5 == 4 ? KERN_BF16 : KERN_F32;
        int strided = var % 2;
        int64_t lens[3];
        view4 q, k, v, o;
        double *want, vmax = 0;
        kern_tensor lt;
        float *first = NULL;
        kt_rng rng = kt_rng_make((uint64_t)(500 + var));
        if (KT_SANITIZER_ON && var % 3) continue;
        for (b = 0; b < B; b++) lens[b] = lens_sets[var % 3][b];
        view4_make(&q, qdt, B, Lq, H, D, strided, "q");
        view4_make(&k, cdt, B, Lmax, Hkv, D, strided, "k");
        view4_make(&v, cdt, B, Lmax, Hkv, Dv, strided, "v");
        view4_make(&o, odt, B, Lq, H, Dv, 0, "o");
        kt_fill_normal(&rng, q.buf, qdt, (int64_t)(q.bytes / kern_dtype_size(qdt)), 1.0);
        kt_fill_normal(&rng, k.buf, cdt, (int64_t)(k.bytes / kern_dtype_size(cdt)), 1.0);
        kt_fill_normal(&rng, v.buf, cdt, (int64_t)(v.bytes / kern_dtype_size(cdt)), 1.0);
        want = (double *)malloc((size_t)(B * Lq * H * Dv) * sizeof *want);
        da_ref(&q, &k, &v, lens, 1.0 / sqrt((double)D), want);
        for (i = 0; i < B * Lq * H * Dv; i++) vmax = fabs(want[i]) > vmax ? fabs(want[i]) : vmax;
        lt = kern_tensor_1d(lens, KERN_I64, B);
        KT_FOR_EACH_ISA(isa, ctx, 2) {
            int th;
            for (th = 1; th <= 2; th++) {
                kern_ctx *c2 = kt_ctx(th, isa);
                kt_context("var %d cache %s q %s out %s Lq %lld H %lld/%lld D %lld/%lld %s t%d", var,
                           kern_dtype_name(cdt), kern_dtype_name(qdt), kern_dtype_name(odt),
                           (long long)Lq, (long long)H, (long long)Hkv, (long long)D, (long long)Dv,
                           kern_isa_name(isa), th);
                da_run_check(c2, th, &q, &k, &v, &lt, &o, NULL, want, vmax, &first);
            }
            (void)ctx;
        }
        /* exactly the workspace size works, one byte less is refused */
        {
            kern_ctx *c2 = kt_ctx(2, KERN_ISA_AUTO);
            size_t ws = 0;
            char *mem;
            kern_decode_attention_params p;
            memset(&p, 0, sizeof p);
            KT_OK(kern_decode_attention_workspace_size(c2, &q.t, &k.t, &v.t, &lt, &o.t, &p, &ws));
            mem = (char *)kt_alloc_misaligned(ws ? ws : 1, 3, "ws");
            p.workspace = mem;
            p.workspace_size = ws;
            kt_poison(o.buf, o.bytes);
            KT_OK(kern_decode_attention(c2, &q.t, &k.t, &v.t, &lt, &o.t, &p));
            KT_CHECK(memcmp(first, o.buf, o.bytes) == 0, "caller workspace changed the result");
            p.workspace_size = ws - 1;
            memset(o.buf, 0x11, o.bytes);
            KT_ERROR(kern_decode_attention(c2, &q.t, &k.t, &v.t, &lt, &o.t, &p), KERN_ERR_ARG, "");
            KT_CHECK(((unsigned char *)o.buf)[0] == 0x11, "a refused call wrote out");
            KT_CHECK(kt_guards_ok(mem), "workspace guards");
            kt_free(mem);
        }
        kt_context("");
        free(first);
        free(want);
        kt_free(q.buf);
        kt_free(k.buf);
        kt_free(v.buf);
        kt_free(o.buf);
    }
}

/* The int8 KV cache: kern_kv_append_ex quantizes each row of each kv
 * head (codes and scales checked against the rule written out here), and
 * kern_decode_attention on the i8 caches with their scales matches the
 * double reference on the dequantized caches (every ISA, 1 and 2 threads
 * giving the same bits; strided caches; K int8 with V bf16), and stays
 * within a few percent of attention on the unquantized cache. */
static int8_t kvq_ref_row(const float *x, int64_t n, int8_t *q) {
    float a = 0, s, inv;
    int64_t i;
    for (i = 0; i < n; i++) a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
    s = a == 0 ? 1.0f : a / 127.0f;
    if (s < 1.17549435e-38f) s = 1.17549435e-38f; /* FLT_MIN */
    inv = 1.0f / s;
    for (i = 0; i < n; i++) {
        float v = nearbyintf(x[i] * inv);
        q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return 0;
}
KT_TEST(kv_cache_int8) {
    int var;
    for (var = 0; var < 4; var++) {
        int64_t B = 3, Lq = var == 2 ? 2 : var == 1 ? 70 : 1, H = 8, Hkv = var % 2 ? 2 : 4, D = var == 1 ? 40 : 64;
        int64_t Dv = var == 3 ? 24 : D, Lmax = 300, lens[3] = {1, 130, 257}, zero[3] = {0, 0, 0};
        int strided = var % 2, vint8 = var != 3, b, l, h, d, i;
        kern_dtype vdt = vint8 ? KERN_I8 : KERN_BF16;
        view4 q, kf, vf, k8, v8, kd, vd, o;
        float *ks = (float *)kt_alloc((size_t)(B * Lmax * Hkv) * 4, "ks");
        float *vs = (float *)kt_alloc((size_t)(B * Lmax * Hkv) * 4, "vs");
        kern_tensor kst = kern_tensor_3d(ks, KERN_F32, B, Lmax, Hkv), vst = kern_tensor_3d(vs, KERN_F32, B, Lmax, Hkv);
        kern_tensor zt = kern_tensor_1d(zero, KERN_I64, B), lt = kern_tensor_1d(lens, KERN_I64, B);
        kern_kv_append_params ap;
        kern_decode_attention_params dp;
        double *want, *wantf, vmax = 0, dev = 0;
        float *first = NULL;
        kt_rng rng = kt_rng_make((uint64_t)(900 + var));
        view4_make(&q, KERN_F32, B, Lq, H, D, strided, "q");
        view4_make(&kf, KERN_F32, B, Lmax, Hkv, D, 0, "kf");
        view4_make(&vf, KERN_F32, B, Lmax, Hkv, Dv, 0, "vf");
        view4_make(&k8, KERN_I8, B, Lmax, Hkv, D, strided, "k8");
        view4_make(&v8, vdt, B, Lmax, Hkv, Dv, strided, "v8");
        view4_make(&kd, KERN_F32, B, Lmax, Hkv, D, 0, "kd");
        view4_make(&vd, KERN_F32, B, Lmax, Hkv, Dv, 0, "vd");
        view4_make(&o, KERN_F32, B, Lq, H, Dv, 0, "o");
        kt_fill_normal(&rng, q.buf, KERN_F32, (int64_t)(q.bytes / 4), 1.0);
        kt_fill_normal(&rng, kf.buf, KERN_F32, (int64_t)(kf.bytes / 4), 1.0);
        kt_fill_normal(&rng, vf.buf, KERN_F32, (int64_t)(vf.bytes / 4), 1.0);
        for (i = 0; i < Hkv * D; i++) ((float *)kf.buf)[i] = 0.0f; /* an all-zero row: scale 1 */
        memset(&ap, 0, sizeof ap);
        ap.k_scale = &kst;
        ap.v_scale = vint8 ? &vst : NULL;
        kt_context("kv int8 var %d", var);
        KT_OK(kern_kv_append_ex(NULL, &kf.t, &vf.t, &k8.t, &v8.t, &zt, &ap));
        KT_CHECK(zero[0] == Lmax && zero[2] == Lmax, "lengths not advanced: %lld", (long long)zero[0]);
        /* codes and scales against the rule, and the dequantized caches */
        for (b = 0; b < B; b++)
            for (l = 0; l < Lmax; l++)
                for (h = 0; h < Hkv; h++) {
                    int w;
                    for (w = 0; w < 1 + vint8; w++) {
                        const view4 *src = w ? &vf : &kf, *dst = w ? &v8 : &k8, *deq = w ? &vd : &kd;
                        int64_t n = w ? Dv : D;
                        const float *x = (const float *)src->buf + view4_off(src, b, l, h, 0);
                        const int8_t *c = (const int8_t *)dst->buf + view4_off(dst, b, l, h, 0);
                        float sc = (w ? vs : ks)[(b * Lmax + l) * Hkv + h], a = 0;
                        int8_t rq[64];
                        for (d = 0; d < n; d++) a = fabsf(x[d]) > a ? fabsf(x[d]) : a;
                        kvq_ref_row(x, n, rq);
                        KT_CHECK(sc == (a == 0 ? 1.0f : a / 127.0f), "scale [%lld,%lld,%lld] %g",
                                 (long long)b, (long long)l, (long long)h, sc);
                        KT_CHECK(memcmp(c, rq, (size_t)n) == 0, "codes [%lld,%lld,%lld]", (long long)b,
                                 (long long)l, (long long)h);
                        for (d = 0; d < n; d++)
                            ((float *)deq->buf)[view4_off(deq, b, l, h, d)] = (float)c[d] * sc;
                    }
                    if (!vint8) /* bf16 V: the rounded values */
                        for (d = 0; d < Dv; d++)
                            ((float *)vd.buf)[view4_off(&vd, b, l, h, d)] =
                                (float)kt_get(v8.buf, KERN_BF16, view4_off(&v8, b, l, h, d));
                }
        want = (double *)malloc((size_t)(B * Lq * H * Dv) * sizeof *want);
        wantf = (double *)malloc((size_t)(B * Lq * H * Dv) * sizeof *wantf);
        da_ref(&q, &kd, &vd, lens, 1.0 / sqrt((double)D), want);
        da_ref(&q, &kf, &vf, lens, 1.0 / sqrt((double)D), wantf);
        for (i = 0; i < B * Lq * H * Dv; i++) {
            vmax = fabs(want[i]) > vmax ? fabs(want[i]) : vmax;
            dev = fabs(want[i] - wantf[i]) > dev ? fabs(want[i] - wantf[i]) : dev;
        }
        KT_CHECK(dev < 0.05 * (vmax + 1), "int8 cache moves the output by %.3g (max %.3g)", dev, vmax);
        if (getenv("KT_VERBOSE")) printf("  kv int8 var %d: max deviation from the f32 cache %.3g\n", var, dev);
        memset(&dp, 0, sizeof dp);
        dp.k_scale = &kst;
        dp.v_scale = vint8 ? &vst : NULL;
        KT_FOR_EACH_ISA(isa, ctx, 2) {
            int th;
            for (th = 1; th <= 2; th++) {
                kern_ctx *c2 = kt_ctx(th, isa);
                kt_context("kv int8 var %d %s t%d", var, kern_isa_name(isa), th);
                da_run_check(c2, th, &q, &k8, &v8, &lt, &o, &dp, want, vmax, &first);
            }
            (void)ctx;
        }
        kt_context("");
        free(first);
        free(want);
        free(wantf);
        kt_free(q.buf); kt_free(kf.buf); kt_free(vf.buf); kt_free(k8.buf); kt_free(v8.buf);
        kt_free(kd.buf); kt_free(vd.buf); kt_free(o.buf); kt_free(ks); kt_free(vs);
    }
}

KT_TEST(kv_cache_int8_errors) {
    float q[4 * 8], kn[2 * 8], o[32], snap[32], ks[5 * 2], ks0[5 * 2];
    int8_t kc[5 * 2 * 8], vc[5 * 2 * 8], kc0[5 * 2 * 8];
    float vf[5 * 2 * 8];
    int64_t lens[1] = {3};
    kern_tensor qt = kern_tensor_4d(q, KERN_F32, 1, 1, 4, 8), kt = kern_tensor_4d(kc, KERN_I8, 1, 5, 2, 8);
    kern_tensor vt = kern_tensor_4d(vc, KERN_I8, 1, 5, 2, 8), ot = kern_tensor_4d(o, KERN_F32, 1, 1, 4, 8);
    kern_tensor vft = kern_tensor_4d(vf, KERN_F32, 1, 5, 2, 8), knt = kern_tensor_4d(kn, KERN_F32, 1, 1, 2, 8);
    kern_tensor lt = kern_tensor_1d(lens, KERN_I64, 1), kst = kern_tensor_3d(ks, KERN_F32, 1, 5, 2), bad;
    kern_decode_attention_params dp;
    kern_kv_append_params ap;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    int i;
    for (i = 0; i < 32; i++) q[i] = 0.1f * (float)i, o[i] = -5.0f;
    for (i = 0; i < 16; i++) kn[i] = (float)i;
    for (i = 0; i < 80; i++) kc[i] = vc[i] = (int8_t)i, vf[i] = 1.0f;
    for (i = 0; i < 10; i++) ks[i] = 0.5f;
    memcpy(snap, o, sizeof o);
    memcpy(kc0, kc, sizeof kc);
    memcpy(ks0, ks, sizeof ks);
    memset(&dp, 0, sizeof dp);
    KT_ERROR(kern_decode_attention(ctx, &qt, &kt, &vft, &lt, &ot, &dp), KERN_ERR_ARG, "params.k_scale is needed");
    dp.k_scale = &kst;
    KT_ERROR(kern_decode_attention(ctx, &qt, &kt, &vt, &lt, &ot, &dp), KERN_ERR_ARG, "params.v_scale is needed");
    dp.v_scale = &kst;
    KT_ERROR(kern_decode_attention(ctx, &qt, &kt, &vft, &lt, &ot, &dp), KERN_ERR_ARG, "only for an i8 v_cache");
    bad = kern_tensor_3d(ks, KERN_F32, 1, 2, 5);
    dp.v_scale = NULL;
    dp.k_scale = &bad;
    KT_ERROR(kern_decode_attention(ctx, &qt, &kt, &vft, &lt, &ot, &dp), KERN_ERR_SHAPE, "params.k_scale must be [1, 5, 2]");
    bad = kern_tensor_3d(ks, KERN_BF16, 1, 5, 2);
    KT_ERROR(kern_decode_attention(ctx, &qt, &kt, &vft, &lt, &ot, &dp), KERN_ERR_DTYPE, "want f32");
    KT_CHECK(memcmp(o, snap, sizeof o) == 0, "an error wrote out");
    dp.k_scale = &kst;
    KT_OK(kern_decode_attention(ctx, &qt, &kt, &vft, &lt, &ot, &dp));
    /* append: the same rules, and nothing written on error */
    memset(&ap, 0, sizeof ap);
    KT_ERROR(kern_kv_append_ex(ctx, &knt, NULL, &kt, NULL, &lt, &ap), KERN_ERR_ARG, "params.k_scale is needed");
    ap.k_scale = &kst;
    ap.v_scale = &kst;
    KT_ERROR(kern_kv_append_ex(ctx, &knt, NULL, &kt, NULL, &lt, &ap), KERN_ERR_ARG, "without a v_cache");
    ap.v_scale = NULL;
    bad = kern_tensor_3d(kc, KERN_F32, 1, 5, 2); /* the cache's own memory */
    ap.k_scale = &bad;
    KT_ERROR(kern_kv_append_ex(ctx, &knt, NULL, &kt, NULL, &lt, &ap), KERN_ERR_ARG, "overlaps");
    KT_CHECK(memcmp(kc, kc0, sizeof kc) == 0 && memcmp(ks, ks0, sizeof ks) == 0 && lens[0] == 3,
             "an error wrote the cache, its scales or k_lens");
    ap.k_scale = &kst;
    KT_OK(kern_kv_append_ex(ctx, &knt, NULL, &kt, NULL, &lt, &ap));
    KT_CHECK(lens[0] == 4 && ks[3 * 2] == 7.0f / 127.0f && kc[3 * 16 + 7] == 127, "append: len %lld scale %g code %d",
             (long long)lens[0], ks[3 * 2], kc[3 * 16 + 7]);
}

/* The kv_append and decode_attention nodes with int8 caches and their
 * scale inputs: one decode step through a plan equals the direct calls
 * (caches, scales, lengths and output, bit for bit); the IR round-trips;
 * an i8 cache without scales is refused naming the node. */
KT_TEST(graph_kv_int8_nodes) {
    enum { B = 2, Lmax = 20, Hkv = 2, H = 4, D = 16 };
    kt_rng rng = kt_rng_make(4242);
    static int8_t kc[2][B * Lmax * Hkv * D], vc[2][B * Lmax * Hkv * D];
    static float ks[2][B * Lmax * Hkv], vs[2][B * Lmax * Hkv];
    float kn[B * Hkv * D], vn[B * Hkv * D], q[B * H * D], want[B * H * D];
    int64_t lens[2][B] = {{3, 11}, {3, 11}};
    kern_graph *g = NULL;
    kern_graph_plan *plan = NULL;
    kern_graph_plan_params pp;
    kern_graph_val qv, knv, vnv, kcv, vcv, klv, ksv, vsv, nl, att;
    kern_graph_node_desc d;
    kern_graph_val outs[KERN_GRAPH_MAX_OUTPUTS];
    kern_tensor in[8], out[2], t_kn, t_vn, t_q, t_kc, t_vc, t_ks, t_vs, t_l, t_o;
    kern_kv_append_params ap;
    kern_decode_attention_params dp;
    int i;
    for (i = 0; i < B * Lmax * Hkv * D; i++) kc[0][i] = kc[1][i] = (int8_t)(kt_next(&rng) % 255 - 127);
    for (i = 0; i < B * Lmax * Hkv * D; i++) vc[0][i] = vc[1][i] = (int8_t)(kt_next(&rng) % 255 - 127);
    for (i = 0; i < B * Lmax * Hkv; i++) ks[0][i] = ks[1][i] = vs[0][i] = vs[1][i] = 0.01f;
    kt_fill_normal(&rng, kn, KERN_F32, B * Hkv * D, 1.0);
    kt_fill_normal(&rng, vn, KERN_F32, B * Hkv * D, 1.0);
    kt_fill_normal(&rng, q, KERN_F32, B * H * D, 1.0);
    /* direct calls on copy 1 */
    t_kn = kern_tensor_4d(kn, KERN_F32, B, 1, Hkv, D);
    t_vn = kern_tensor_4d(vn, KERN_F32, B, 1, Hkv, D);
    t_q = kern_tensor_4d(q, KERN_F32, B, 1, H, D);
    t_kc = kern_tensor_4d(kc[1], KERN_I8, B, Lmax, Hkv, D);
    t_vc = kern_tensor_4d(vc[1], KERN_I8, B, Lmax, Hkv, D);
    t_ks = kern_tensor_3d(ks[1], KERN_F32, B, Lmax, Hkv);
    t_vs = kern_tensor_3d(vs[1], KERN_F32, B, Lmax, Hkv);
    t_l = kern_tensor_1d(lens[1], KERN_I64, B);
    t_o = kern_tensor_4d(want, KERN_F32, B, 1, H, D);
    ap.k_scale = &t_ks;
    ap.v_scale = &t_vs;
    KT_OK(kern_kv_append_ex(NULL, &t_kn, &t_vn, &t_kc, &t_vc, &t_l, &ap));
    memset(&dp, 0, sizeof dp);
    dp.k_scale = &t_ks;
    dp.v_scale = &t_vs;
    KT_OK(kern_decode_attention(NULL, &t_q, &t_kc, &t_vc, &t_l, &t_o, &dp));
    /* the graph on copy 0 */
    KT_OK(kern_graph_create(NULL, &g));
    KT_OK(kern_graph_input_s(g, "q", KERN_F32, "[B,1,4,16]", &qv));
    KT_OK(kern_graph_input_s(g, "k_new", KERN_F32, "[B,1,2,16]", &knv));
    KT_OK(kern_graph_input_s(g, "v_new", KERN_F32, "[B,1,2,16]", &vnv));
    KT_OK(kern_graph_input_s(g, "k_cache", KERN_I8, "[B,20,2,16]", &kcv));
    KT_OK(kern_graph_input_s(g, "v_cache", KERN_I8, "[B,20,2,16]", &vcv));
    KT_OK(kern_graph_input_s(g, "k_lens", KERN_I64, "[B]", &klv));
    KT_OK(kern_graph_input_s(g, "k_scale", KERN_F32, "[B,20,2]", &ksv));
    KT_OK(kern_graph_input_s(g, "v_scale", KERN_F32, "[B,20,2]", &vsv));
    memset(&d, 0, sizeof d);
    d.op = KERN_GRAPH_OP_KV_APPEND;
    d.name = "kv";
    d.inputs[0] = knv; d.inputs[1] = vnv; d.inputs[2] = kcv; d.inputs[3] = vcv; d.inputs[4] = klv;
    d.inputs[5] = ksv;
    KT_ERROR(kern_graph_add(g, &d, outs), KERN_ERR_ARG, "an i8 v_cache needs v_scale");
    KT_ERROR(kern_graph_add(g, &d, outs), KERN_ERR_ARG, "'kv'");
    d.inputs[6] = vsv;
    KT_OK(kern_graph_add(g, &d, outs));
    nl = outs[0];
    memset(&d, 0, sizeof d);
    d.op = KERN_GRAPH_OP_DECODE_ATTENTION;
    d.name = "attn";
    d.inputs[0] = qv; d.inputs[1] = kcv; d.inputs[2] = vcv; d.inputs[3] = nl; d.inputs[4] = ksv;
    KT_ERROR(kern_graph_add(g, &d, outs), KERN_ERR_ARG, "v_scale");
    d.inputs[5] = vsv;
    KT_OK(kern_graph_add(g, &d, outs));
    att = outs[0];
    KT_OK(kern_graph_output(g, att));
    KT_OK(kern_graph_output(g, nl));
    kt_graph_roundtrip(g);
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=2";
    KT_OK(kern_graph_plan_create(g, NULL, &pp, &plan));
    KT_REQUIRE(plan != NULL);
    in[0] = t_q;
    in[1] = t_kn;
    in[2] = t_vn;
    in[3] = kern_tensor_4d(kc[0], KERN_I8, B, Lmax, Hkv, D);
    in[4] = kern_tensor_4d(vc[0], KERN_I8, B, Lmax, Hkv, D);
    in[5] = kern_tensor_1d(lens[0], KERN_I64, B);
    in[6] = kern_tensor_3d(ks[0], KERN_F32, B, Lmax, Hkv);
    in[7] = kern_tensor_3d(vs[0], KERN_F32, B, Lmax, Hkv);
    memset(out, 0, sizeof out);
    KT_OK(kern_graph_run(plan, in, 8, out, 2));
    KT_REQUIRE(out[0].data != NULL && out[1].data != NULL);
    kt_assert_bytes_equal("attention", out[0].data, want, sizeof want);
    KT_CHECK(((const int64_t *)out[1].data)[0] == 4 && ((const int64_t *)out[1].data)[1] == 12, "new lengths");
    kt_assert_bytes_equal("k codes", kc[0], kc[1], sizeof kc[0]);
    kt_assert_bytes_equal("v codes", vc[0], vc[1], sizeof vc[0]);
    kt_assert_bytes_equal("k scales", ks[0], ks[1], sizeof ks[0]);
    kt_assert_bytes_equal("v scales", vs[0], vs[1], sizeof vs[0]);
    kern_graph_plan_free(plan);
    kern_graph_destroy(g);
}

/* A decode_attention node with a prompt's worth of queries runs as
 * kern_sdpa on views of the same memory where that is faster (bf16 on
 * AMX, f32 on the AVX-512 levels; kern_graph.h, kern__g_da_sdpa): the
 * same bits as that call on the same level, at 1 and 2 threads, within
 * bf16 / f32 rounding of the double reference at every ISA level (the
 * others run kern_decode_attention), zeros where no key is visible
 * (k_lens[b] < Lq), the plan's own workspace sized for either. */
static int prompt_routed(kern_dtype dt, kern_isa isa) {
    if (dt == KERN_BF16) return isa == KERN_ISA_AMX;
    return isa == KERN_ISA_AVX512 || isa == KERN_ISA_AVX512_VNNI || isa == KERN_ISA_AVX512_BF16 ||
           isa == KERN_ISA_AMX;
}

KT_TEST(graph_prompt_attention_sdpa) {
    enum { B = 3, Lq = 64, H = 4, Hkv = 2, D = 64, Lmax = 640 };
    int64_t lens[B] = {600, 64, 10}, n = B * Lq * H * D, i, b, l, h;
    int di, routed_any = 0;
    for (di = 0; di < 2; di++) {
        kern_dtype dt = di ? KERN_F32 : KERN_BF16;
        size_t es = kern_dtype_size(dt);
        char ir[512];
        kt_rng rng = kt_rng_make(777 + (uint64_t)di);
        view4 q, k, v, o;
        double *want = (double *)malloc((size_t)n * sizeof(double)), vmax = 0;
        char *first = (char *)malloc((size_t)n * es), *sd = (char *)malloc((size_t)n * es);
        kern_graph *g = NULL;
        snprintf(ir, sizeof ir,
                 "kern-graph 1\ninput q %s [3,64,4,64]\ninput kc %s [3,640,2,64]\n"
                 "input vc %s [3,640,2,64]\ninput kl i64 [3]\ny = decode_attention(q, kc, vc, kl)\n"
                 "output y\n",
                 kern_dtype_name(dt), kern_dtype_name(dt), kern_dtype_name(dt));
        view4_make(&q, dt, B, Lq, H, D, 0, "q");
        view4_make(&k, dt, B, Lmax, Hkv, D, 0, "k");
        view4_make(&v, dt, B, Lmax, Hkv, D, 0, "v");
        view4_make(&o, dt, B, Lq, H, D, 0, "o");
        kt_fill_normal(&rng, q.buf, dt, n, 1.0);
        kt_fill_normal(&rng, k.buf, dt, B * Lmax * Hkv * D, 1.0);
        kt_fill_normal(&rng, v.buf, dt, B * Lmax * Hkv * D, 1.0);
        da_ref(&q, &k, &v, lens, 1.0 / sqrt((double)D), want);
        for (i = 0; i < n; i++) vmax = fabs(want[i]) > vmax ? fabs(want[i]) : vmax;
        KT_OK(kern_graph_read_ir(NULL, ir, strlen(ir), &g));
        {
            KT_FOR_EACH_ISA(isa, ctx, 2) {
                int th, routed = prompt_routed(dt, isa);
                if (routed) { /* the direct sdpa call on the views, this level */
                    int64_t qs[4] = {B, H, Lq, D}, qst[4] = {Lq * H * D, D, H * D, 1};
                    int64_t ks[4] = {B, Hkv, Lmax, D}, kst[4] = {Lmax * Hkv * D, D, Hkv * D, 1};
                    kern_tensor q2, k2, v2, o2, lt = kern_tensor_1d(lens, KERN_I64, B);
                    kern_sdpa_params sp;
                    memset(&sp, 0, sizeof sp);
                    sp.causal_bottom_right = 1;
                    sp.enable_gqa = 1;
                    sp.k_lens = &lt;
                    KT_OK(kern_tensor_init_strided(&q2, q.buf, dt, 4, qs, qst));
                    KT_OK(kern_tensor_init_strided(&o2, sd, dt, 4, qs, qst));
                    KT_OK(kern_tensor_init_strided(&k2, k.buf, dt, 4, ks, kst));
                    KT_OK(kern_tensor_init_strided(&v2, v.buf, dt, 4, ks, kst));
                    KT_OK(kern_sdpa(kt_ctx(1, isa), &q2, &k2, &v2, &o2, &sp));
                    routed_any = 1;
                }
                for (th = 1; th <= 2; th++) {
                    kern_ctx *c2 = kt_ctx(th, isa);
                    kern_graph_plan *plan = NULL;
                    kern_tensor in[4], out[1];
                    int bad = 0;
                    kt_context("%s %s t%d", kern_dtype_name(dt), kern_isa_name(isa), th);
                    KT_OK(kern_graph_plan_create(g, c2, NULL, &plan));
                    if (!plan) continue;
                    in[0] = q.t;
                    in[1] = k.t;
                    in[2] = v.t;
                    in[3] = kern_tensor_1d(lens, KERN_I64, B);
                    out[0] = o.t;
                    kt_poison(o.buf, o.bytes);
                    KT_OK(kern_graph_run(plan, in, 4, out, 1));
                    for (b = 0; b < B && !bad; b++)
                        for (l = 0; l < Lq && !bad; l++)
                            for (h = 0; h < H * D && !bad; h++) {
                                int64_t ix = (b * Lq + l) * H * D + h;
                                double g2 = kt_get(o.buf, dt, ix), w = want[ix];
                                double tol = dt == KERN_BF16 ? fabs(w) / 128 + vmax / 128 : 1e-5 * (vmax + 1);
                                if (lens[b] - (Lq - 1 - l) <= 0 ? g2 != 0.0 : !(fabs(g2 - w) <= tol)) {
                                    KT_CHECK(0, "out[%lld,%lld,%lld] = %.9g want %.9g", (long long)b,
                                             (long long)l, (long long)h, g2, w);
                                    bad = 1;
                                }
                            }
                    if (routed) kt_assert_bytes_equal("the sdpa call's bits", o.buf, sd, (size_t)n * es);
                    if (th == 1) memcpy(first, o.buf, (size_t)n * es);
                    else kt_assert_bytes_equal("1 and 2 threads", o.buf, first, (size_t)n * es);
                    kern_graph_plan_free(plan);
                }
                (void)ctx;
            }
        }
        kt_context("");
        kern_graph_destroy(g);
        free(want);
        free(first);
        free(sd);
        kt_free(q.buf);
        kt_free(k.buf);
        kt_free(v.buf);
        kt_free(o.buf);
    }
    if (!routed_any) printf("not run: graph_prompt_attention_sdpa's sdpa route (no AVX-512 level here)\n");
}

/* A kv_append whose new lengths nobody reads still writes the caches: the
 * dead-node pass keeps it (it writes graph inputs). */
KT_TEST(graph_kv_append_not_dead) {
    static const char ir[] =
        "kern-graph 1\n"
        "input kn f32 [1,1,2,8]\n"
        "input vn f32 [1,1,2,8]\n"
        "input kc f32 [1,4,2,8]\n"
        "input vc f32 [1,4,2,8]\n"
        "input kl i32 [1]\n"
        "y = copy(kn)\n"
        "n = kv_append(kn, vn, kc, vc, kl)\n"
        "output y\n";
    float kn[16], vn[16], kc[64], vc[64], y[16];
    int32_t kl = 2;
    kern_graph *g = NULL;
    kern_graph_plan *plan = NULL;
    kern_tensor in[5], out[1];
    int i;
    for (i = 0; i < 16; i++) kn[i] = (float)i + 1.0f, vn[i] = -(float)i - 1.0f;
    memset(kc, 0, sizeof kc);
    memset(vc, 0, sizeof vc);
    KT_OK(kern_graph_read_ir(NULL, ir, sizeof ir - 1, &g));
    KT_OK(kern_graph_plan_create(g, NULL, NULL, &plan));
    in[0] = kern_tensor_4d(kn, KERN_F32, 1, 1, 2, 8);
    in[1] = kern_tensor_4d(vn, KERN_F32, 1, 1, 2, 8);
    in[2] = kern_tensor_4d(kc, KERN_F32, 1, 4, 2, 8);
    in[3] = kern_tensor_4d(vc, KERN_F32, 1, 4, 2, 8);
    in[4] = kern_tensor_1d(&kl, KERN_I32, 1);
    out[0] = kern_tensor_4d(y, KERN_F32, 1, 1, 2, 8);
    KT_OK(kern_graph_run(plan, in, 5, out, 1));
    kt_assert_bytes_equal("k row 2", kc + 2 * 16, kn, sizeof kn);
    kt_assert_bytes_equal("v row 2", vc + 2 * 16, vn, sizeof vn);
    KT_CHECK(kl == 2, "k_lens itself is not changed");
    kern_graph_plan_free(plan);
    kern_graph_destroy(g);
}

KT_TEST(decode_attention_errors) {
    float q[1 * 1 * 4 * 8], kc[1 * 5 * 2 * 8], vc[1 * 5 * 2 * 8], o[32], snap[32];
    int64_t lens[1] = {6};
    kern_tensor qt = kern_tensor_4d(q, KERN_F32, 1, 1, 4, 8), kt = kern_tensor_4d(kc, KERN_F32, 1, 5, 2, 8);
    kern_tensor vt = kern_tensor_4d(vc, KERN_F32, 1, 5, 2, 8), ot = kern_tensor_4d(o, KERN_F32, 1, 1, 4, 8);
    kern_tensor lt = kern_tensor_1d(lens, KERN_I64, 1), bad;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_SCALAR);
    int i;
    for (i = 0; i < 32; i++) q[i] = 0.1f * (float)i, o[i] = -5.0f;
    for (i = 0; i < 80; i++) kc[i] = vc[i] = 0.01f * (float)i;
    memcpy(snap, o, sizeof o);
    KT_ERROR(kern_decode_attention(ctx, &qt, &kt, &vt, &lt, &ot, NULL), KERN_ERR_SHAPE, "past the cache");
    lens[0] = -1;
    KT_ERROR(kern_decode_attention(ctx, &qt, &kt, &vt, &lt, &ot, NULL), KERN_ERR_INDEX, "negative");
    lens[0] = 5;
    bad = kern_tensor_4d(kc, KERN_I32, 1, 5, 2, 8);
    KT_ERROR(kern_decode_attention(ctx, &qt, &bad, &vt, &lt, &ot, NULL), KERN_ERR_DTYPE, "k_cache.dtype");
    bad = kern_tensor_4d(kc, KERN_F32, 1, 5, 3, 8);
    KT_ERROR(kern_decode_attention(ctx, &qt, &bad, &vt, &lt, &ot, NULL), KERN_ERR_SHAPE, "");
    bad = kern_tensor_4d(q, KERN_F32, 1, 1, 3, 8);
    KT_ERROR(kern_decode_attention(ctx, &bad, &kt, &vt, &lt, &ot, NULL), KERN_ERR_SHAPE, "multiple");
    bad = kern_tensor_4d(kc, KERN_F32, 1, 5, 2, 7);
    KT_ERROR(kern_decode_attention(ctx, &qt, &bad, &vt, &lt, &ot, NULL), KERN_ERR_SHAPE, "k_cache.shape[3]");
    bad = kern_tensor_4d(q, KERN_F32, 1, 1, 4, 8);
    KT_ERROR(kern_decode_attention(ctx, &qt, &kt, &vt, &lt, &bad, NULL), KERN_ERR_ARG, "overlaps");
    KT_CHECK(memcmp(o, snap, sizeof o) == 0, "an error wrote out");
    KT_OK(kern_decode_attention(ctx, &qt, &kt, &vt, &lt, &ot, NULL));
}

/* A graph of one linear or matmul node y = op(x, w, b, r) with symbolic
 * rows M: x [M, K] and r [M, N] (lead1: [1, M, K] and [1, M, N]), w and b
 * borrowed; NULL on failure. */
static kern_graph *gemm_node_graph(kern_ctx *ctx, kern_graph_op op, kern_dtype dt, int lead1, int64_t K,
                                   int64_t N, const kern_tensor *wt, const kern_tensor *bt, kern_act act,
                                   int trans_b) {
    kern_graph *g = NULL;
    kern_graph_node_desc d;
    kern_graph_val xv, rv, wv, bv, yv;
    int64_t Ms, shp[3];
    int nd = 2 + lead1;
    if (kern_graph_create(ctx, &g) != KERN_OK) return NULL;
    shp[0] = 1;
    shp[nd - 1] = K;
    if (kern_graph_symbol(g, "M", &Ms) != KERN_OK) goto fail;
    shp[nd - 2] = Ms;
    if (kern_graph_input(g, "x", dt, nd, shp, &xv) != KERN_OK) goto fail;
    shp[nd - 1] = N;
    if (kern_graph_input(g, "r", dt, nd, shp, &rv) != KERN_OK ||
        kern_graph_weight(g, "w", wt, KERN_GRAPH_BORROW, &wv) != KERN_OK ||
        kern_graph_weight(g, "b", bt, KERN_GRAPH_BORROW, &bv) != KERN_OK)
        goto fail;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.name = "y";
    d.inputs[0] = xv;
    d.inputs[1] = wv;
    d.inputs[2] = bv;
    d.inputs[3] = rv;
    d.attrs.act = act;
    d.attrs.trans_b = trans_b;
    if (kern_graph_add(g, &d, &yv) == KERN_OK && kern_graph_output(g, yv) == KERN_OK) return g;
fail:
    kern_graph_destroy(g);
    return NULL;
}

/* The graph's linear at decode sizes: a plan whose bound has at most 8 rows
 * of x keeps the weight unpacked and runs kern_linear_gemv; a larger bound
 * prepacks for kern_gemm. Both against a double reference for M = 1..8,
 * f32/bf16/f16, bias + act + residual, every ISA level. */
static double gelu_d(double v) { return 0.5 * v * (1.0 + erf(v / sqrt(2.0))); }
KT_TEST(graph_linear_gemv_route) {
    enum { N = 37, K = 45 };
    static const kern_act acts[4] = {KERN_ACT_NONE, KERN_ACT_SILU, KERN_ACT_GELU, KERN_ACT_RELU};
    kt_rng rng = kt_rng_make(515);
    int di;
    for (di = 0; di < 3; di++) {
        kern_dtype dt = FDT[di];
        size_t es = kern_dtype_size(dt);
        void *w = malloc((size_t)(N * K) * es), *bias = malloc((size_t)N * es);
        void *x = malloc((size_t)(8 * K) * es), *res = malloc((size_t)(8 * N) * es);
        double want[8 * N], bound[8 * N];
        int64_t M, m, n, k;
        kt_fill_normal(&rng, w, dt, N * K, 0.3);
        kt_fill_normal(&rng, bias, dt, N, 0.5);
        kt_fill_normal(&rng, x, dt, 8 * K, 1.0);
        kt_fill_normal(&rng, res, dt, 8 * N, 1.0);
        for (M = 1; M <= 8; M++) {
            kern_act act = acts[M % 4];
            int route;
            for (m = 0; m < M; m++)
                for (n = 0; n < N; n++) {
                    double acc = 0, mag = 0, v;
                    for (k = 0; k < K; k++) {
                        double a = kt_get(x, dt, m * K + k) * kt_get(w, dt, n * K + k);
                        acc += a;
                        mag += fabs(a);
                    }
                    acc += kt_get(bias, dt, n);
                    mag += fabs(kt_get(bias, dt, n));
                    v = act == KERN_ACT_SILU ? silu_d(acc) : act == KERN_ACT_GELU ? gelu_d(acc)
                        : act == KERN_ACT_RELU ? (acc > 0 ? acc : 0) : acc;
                    v += kt_get(res, dt, m * N + n);
                    mag += fabs(kt_get(res, dt, m * N + n));
                    want[m * N + n] = v;
                    /* f32 sums in another order than the reference; bf16 and
                     * f16 round y once (and gemm may round the pre-residual
                     * value once more) */
                    bound[m * N + n] = 4e-6 * mag * (1.0 + sqrt((double)K) / 8) + 1e-6 * fabs(v) +
                                       (dt == KERN_BF16 ? mag / 128.0 : dt == KERN_F16 ? mag / 1024.0 : 0);
                }
            for (route = 0; route < 2; route++) {
                KT_FOR_EACH_ISA(isa, ctx, 2) {
                    kern_graph *g;
                    kern_graph_plan *plan = NULL;
                    kern_graph_plan_params pp;
                    kern_graph_plan_stats ps;
                    kern_tensor wt = kern_tensor_2d(w, dt, N, K), bt = kern_tensor_1d(bias, dt, N);
                    kern_tensor in[2], out[1];
                    char bind[32];
                    kt_context("%s M%lld %s %s", kern_dtype_name(dt), (long long)M,
                               route ? "prepacked (bound 16)" : "gemv (bound M)", kern_isa_name(isa));
                    g = gemm_node_graph(ctx, KERN_GRAPH_OP_LINEAR, dt, 0, K, N, &wt, &bt, act, 0);
                    KT_REQUIRE(g != NULL);
                    memset(&pp, 0, sizeof pp);
                    snprintf(bind, sizeof bind, "M=%lld", (long long)(route ? 16 : M));
                    pp.bind = bind;
                    KT_OK(kern_graph_plan_create(g, ctx, &pp, &plan));
                    KT_REQUIRE(plan != NULL);
                    KT_OK(kern_graph_plan_stats_get(plan, &ps));
                    KT_CHECK(route ? ps.packed_bytes > 0 : ps.packed_bytes == 0, "packed bytes %zu",
                             ps.packed_bytes);
                    KT_CHECK((strstr(kern_graph_plan_report(plan), "gemv: linear 'y'") != NULL) == !route,
                             "report: %s", kern_graph_plan_report(plan));
                    in[0] = kern_tensor_2d(x, dt, M, K);
                    in[1] = kern_tensor_2d(res, dt, M, N);
                    memset(out, 0, sizeof out);
                    KT_OK(kern_graph_run(plan, in, 2, out, 1));
                    KT_REQUIRE(out[0].data != NULL && out[0].shape[0] == M && out[0].shape[1] == N);
                    for (m = 0; m < M; m++)
                        for (n = 0; n < N; n++) {
                            double gv = kt_get(out[0].data, dt, m * N + n), e = want[m * N + n];
                            KT_CHECK(fabs(gv - e) <= bound[m * N + n], "y[%lld, %lld] = %.9g want %.9g",
                                     (long long)m, (long long)n, gv, e);
                        }
                    kern_graph_plan_free(plan);
                    kern_graph_destroy(g);
                }
            }
        }
        kt_context("");
        free(w);
        free(bias);
        free(x);
        free(res);
    }
}

/* The graph's matmul against a 2-D b (x @ W, W [K, N]; or trans_b, W
 * [N, K]): runs of at most 8 rows of a [1, M, K] go to kern_linear_gemv
 * through W's transpose, bit for bit a direct call on that view; 9 and
 * more rows stay on kern_gemm, bit for bit a direct call. Bias, act and
 * residual, f32/bf16, every ISA level. */
KT_TEST(graph_matmul_gemv_route) {
    enum { N = 29, K = 41, MM = 10 };
    kt_rng rng = kt_rng_make(516);
    int di, tb;
    for (di = 0; di < 2; di++)
        for (tb = 0; tb < 2; tb++) {
            kern_dtype dt = FDT[di];
            size_t es = kern_dtype_size(dt);
            void *w = malloc((size_t)(N * K) * es), *bias = malloc((size_t)N * es);
            void *x = malloc((size_t)(MM * K) * es), *res = malloc((size_t)(MM * N) * es);
            void *want = malloc((size_t)(MM * N) * es);
            int64_t M;
            kt_fill_normal(&rng, w, dt, N * K, 0.3);
            kt_fill_normal(&rng, bias, dt, N, 0.5);
            kt_fill_normal(&rng, x, dt, MM * K, 1.0);
            kt_fill_normal(&rng, res, dt, MM * N, 1.0);
            for (M = 1; M <= 9; M++) {
                KT_FOR_EACH_ISA(isa, ctx, 2) {
                    kern_graph *g;
                    kern_graph_plan *plan = NULL;
                    kern_graph_plan_params pp;
                    kern_tensor wt, bt, in[2], out[1], x2, r2, y2, wn;
                    char bind[32];
                    kt_context("%s %s M%lld %s", kern_dtype_name(dt), tb ? "trans_b" : "[K, N]",
                               (long long)M, kern_isa_name(isa));
                    /* the direct call the run must match */
                    x2 = kern_tensor_2d(x, dt, M, K);
                    r2 = kern_tensor_2d(res, dt, M, N);
                    y2 = kern_tensor_2d(want, dt, M, N);
                    wt = tb ? kern_tensor_2d(w, dt, N, K) : kern_tensor_2d(w, dt, K, N);
                    bt = kern_tensor_1d(bias, dt, N);
                    if (M <= 8) {
                        kern_gemv_params vp;
                        wn = wt;
                        if (!tb) { /* W [K, N] read as [N, K] */
                            wn.shape[0] = N;
                            wn.shape[1] = K;
                            wn.stride[0] = 1;
                            wn.stride[1] = N;
                        }
                        memset(&vp, 0, sizeof vp);
                        vp.epilogue.bias = &bt;
                        vp.epilogue.act = KERN_ACT_SILU;
                        vp.epilogue.residual = &r2;
                        KT_OK(kern_linear_gemv(ctx, &x2, &wn, &y2, &vp));
                    } else {
                        kern_gemm_params gp;
                        memset(&gp, 0, sizeof gp);
                        gp.trans_b = tb;
                        gp.epilogue.bias = &bt;
                        gp.epilogue.act = KERN_ACT_SILU;
                        gp.epilogue.residual = &r2;
                        KT_OK(kern_gemm(ctx, &x2, &wt, &y2, &gp));
                    }
                    g = gemm_node_graph(ctx, KERN_GRAPH_OP_MATMUL, dt, 1, K, N, &wt, &bt, KERN_ACT_SILU, tb);
                    KT_REQUIRE(g != NULL);
                    memset(&pp, 0, sizeof pp);
                    snprintf(bind, sizeof bind, "M=%lld", (long long)MM);
                    pp.bind = bind;
                    KT_OK(kern_graph_plan_create(g, ctx, &pp, &plan));
                    KT_REQUIRE(plan != NULL);
                    in[0] = kern_tensor_3d(x, dt, 1, M, K);
                    in[1] = kern_tensor_3d(res, dt, 1, M, N);
                    memset(out, 0, sizeof out);
                    KT_OK(kern_graph_run(plan, in, 2, out, 1));
                    KT_REQUIRE(out[0].data != NULL && out[0].shape[1] == M && out[0].shape[2] == N);
                    KT_CHECK(memcmp(out[0].data, want, (size_t)(M * N) * es) == 0,
                             "not the direct %s's bits", M <= 8 ? "kern_linear_gemv" : "kern_gemm");
                    kern_graph_plan_free(plan);
                    kern_graph_destroy(g);
                }
            }
            kt_context("");
            free(w);
            free(bias);
            free(x);
            free(res);
            free(want);
        }
}

/* A node of the llm tests' graphs: inputs a, b (0 = absent), attrs, the
 * second output's name (NULL = default). */
static kern_status gn_add(kern_graph *g, kern_graph_op op, const char *name, kern_graph_val a,
                          kern_graph_val b, const kern_graph_attrs *at, const char *out1,
                          kern_graph_val *out) {
    kern_graph_node_desc d;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.name = name;
    d.inputs[0] = a;
    d.inputs[1] = b;
    if (at) d.attrs = *at;
    d.output_names[1] = out1;
    return kern_graph_add(g, &d, out);
}

/* The argmax, topk and rope (interleaved) nodes against direct calls: on
 * the plan's own [B, 3, V] input (one call on [B*3, V]) and through a
 * transposed view that does not flatten (one call per slab), with ties and
 * a NaN, the IR round trip, and bad nodes rejected with the graph
 * unchanged. */
KT_TEST(graph_argmax_topk_rope_nodes) {
    enum { B = 2, T = 3, V = 37, K = 5, L = 4, H = 2, D = 8, P = 16 };
    kt_rng rng = kt_rng_make(808);
    float x[B * T * V], r[B * L * H * D], table[P * D], want_r[B * L * H * D];
    float tv_ref[B * T * K];
    int64_t am_ref[B * T], ti_ref[B * T * K];
    kern_ctx *ctx0 = kt_ctx(1, KERN_ISA_AUTO);
    kern_tensor tt = kern_tensor_2d(table, KERN_F32, P, D), xt2, t_am, t_tv, t_ti, rt, wt;
    kern_rope_params rp;
    int64_t i;
    kt_fill_normal(&rng, x, KERN_F32, B * T * V, 1.0);
    kt_fill_normal(&rng, r, KERN_F32, B * L * H * D, 1.0);
    x[3] = x[20] = 9.0f;              /* a tie in row 0: the first wins */
    x[V + 7] = (float)NAN;            /* row 1: the NaN wins */
    x[2 * V + 11] = x[2 * V + 12] = 5.0f; /* row 2: tied top-k entries */
    memset(&rp, 0, sizeof rp);
    KT_OK(kern_rope_table_init(ctx0, &tt, &rp));
    xt2 = kern_tensor_2d(x, KERN_F32, B * T, V);
    t_am = kern_tensor_1d(am_ref, KERN_I64, B * T);
    t_tv = kern_tensor_2d(tv_ref, KERN_F32, B * T, K);
    t_ti = kern_tensor_2d(ti_ref, KERN_I64, B * T, K);
    KT_OK(kern_argmax(ctx0, &xt2, &t_am));
    KT_OK(kern_topk(ctx0, &xt2, &t_tv, &t_ti));
    KT_CHECK(am_ref[0] == 3 && am_ref[1] == 7, "argmax refs %lld %lld", (long long)am_ref[0],
             (long long)am_ref[1]);
    rt = kern_tensor_4d(r, KERN_F32, B, L, H, D);
    wt = kern_tensor_4d(want_r, KERN_F32, B, L, H, D);
    rp.style = KERN_ROPE_INTERLEAVED;
    rp.table = &tt;
    KT_OK(kern_rope(ctx0, &rt, &wt, &rp));
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        kern_graph *g = NULL;
        kern_graph_plan *plan = NULL;
        kern_graph_plan_params pp;
        kern_graph_val xv, rv, tab, idv, am, tk[2], xtr, amt, ro, dummy;
        kern_graph_attrs at;
        kern_tensor in[3], out[5];
        int64_t ids[2] = {0, 1};
        int nn;
        char *ir;
        size_t n;
        kt_context("%s", kern_isa_name(isa));
        KT_OK(kern_graph_create(ctx, &g));
        KT_REQUIRE(g != NULL);
        KT_OK(kern_graph_input_s(g, "x", KERN_F32, "[B,3,37]", &xv));
        KT_OK(kern_graph_input_s(g, "r", KERN_F32, "[B,4,2,8]", &rv));
        KT_OK(kern_graph_input_s(g, "ids", KERN_I64, "[B]", &idv));
        KT_OK(kern_graph_weight(g, "rope.table", &tt, KERN_GRAPH_BORROW, &tab));
        KT_OK(gn_add(g, KERN_GRAPH_OP_ARGMAX, "am", xv, 0, NULL, NULL, &am));
        memset(&at, 0, sizeof at);
        at.k = K;
        KT_OK(gn_add(g, KERN_GRAPH_OP_TOPK, "tk", xv, 0, &at, "tk_i", tk));
        memset(&at, 0, sizeof at);
        at.axis = 0;
        at.axis2 = 1;
        KT_OK(gn_add(g, KERN_GRAPH_OP_TRANSPOSE, "xt", xv, 0, &at, NULL, &xtr));
        KT_OK(gn_add(g, KERN_GRAPH_OP_ARGMAX, "amt", xtr, 0, NULL, NULL, &amt));
        memset(&at, 0, sizeof at);
        at.interleaved = 1;
        KT_OK(gn_add(g, KERN_GRAPH_OP_ROPE, "ro", rv, tab, &at, NULL, &ro));
        /* bad nodes: an error naming what is wrong, the graph unchanged */
        nn = kern_graph_n_nodes(g);
        memset(&at, 0, sizeof at);
        KT_ERROR(gn_add(g, KERN_GRAPH_OP_TOPK, "bad", xv, 0, &at, NULL, &dummy), KERN_ERR_ARG, "k=0");
        at.k = V + 1;
        KT_ERROR(gn_add(g, KERN_GRAPH_OP_TOPK, "bad", xv, 0, &at, NULL, &dummy), KERN_ERR_SHAPE,
                 "k=38 > the last dim 37");
        KT_ERROR(gn_add(g, KERN_GRAPH_OP_ARGMAX, "bad", xv, 0, &at, NULL, &dummy), KERN_ERR_ARG,
                 "attribute 'k' does not apply");
        KT_ERROR(gn_add(g, KERN_GRAPH_OP_ARGMAX, "bad", idv, 0, NULL, NULL, &dummy), KERN_ERR_DTYPE,
                 "must be f32");
        memset(&at, 0, sizeof at);
        at.interleaved = 1;
        KT_ERROR(gn_add(g, KERN_GRAPH_OP_SILU_MUL, "bad", xv, xv, &at, NULL, &dummy), KERN_ERR_ARG,
                 "attribute 'interleaved' does not apply");
        KT_CHECK(kern_graph_n_nodes(g) == nn, "a rejected node changed the graph");
        KT_OK(kern_graph_output(g, am));
        KT_OK(kern_graph_output(g, tk[0]));
        KT_OK(kern_graph_output(g, tk[1]));
        KT_OK(kern_graph_output(g, amt));
        KT_OK(kern_graph_output(g, ro));
        kt_graph_roundtrip(g);
        KT_OK(kern_graph_write_ir(g, NULL, 0, &n));
        ir = (char *)malloc(n + 1);
        KT_OK(kern_graph_write_ir(g, ir, n + 1, &n));
        KT_CHECK(strstr(ir, "tk, tk_i = topk(x) k=5\n") && strstr(ir, "am = argmax(x)\n") &&
                     strstr(ir, "ro = rope(r, rope.table) interleaved=1\n"),
                 "%s", ir);
        free(ir);
        memset(&pp, 0, sizeof pp);
        pp.bind = "B=2";
        KT_OK(kern_graph_plan_create(g, ctx, &pp, &plan));
        KT_REQUIRE(plan != NULL);
        in[0] = kern_tensor_3d(x, KERN_F32, B, T, V);
        in[1] = kern_tensor_4d(r, KERN_F32, B, L, H, D);
        in[2] = kern_tensor_1d(ids, KERN_I64, B);
        memset(out, 0, sizeof out);
        KT_OK(kern_graph_run(plan, in, 3, out, 5));
        KT_REQUIRE(out[0].dtype == KERN_I64 && out[0].ndim == 2 && out[0].shape[1] == T);
        KT_REQUIRE(out[2].dtype == KERN_I64 && out[2].ndim == 3 && out[2].shape[2] == K);
        KT_REQUIRE(out[3].ndim == 2 && out[3].shape[0] == T && out[3].shape[1] == B);
        for (i = 0; i < B * T; i++) {
            int64_t b = i / T, t = i % T, j;
            KT_CHECK(((const int64_t *)out[0].data)[i] == am_ref[i], "argmax row %lld", (long long)i);
            KT_CHECK(((const int64_t *)out[3].data)[t * B + b] == am_ref[i],
                     "argmax of the transposed view, row %lld", (long long)i);
            for (j = 0; j < K; j++) {
                float gv = ((const float *)out[1].data)[i * K + j], rv2 = tv_ref[i * K + j];
                KT_CHECK(((const int64_t *)out[2].data)[i * K + j] == ti_ref[i * K + j] &&
                             (gv == rv2 || (gv != gv && rv2 != rv2)),
                         "topk row %lld entry %lld", (long long)i, (long long)j);
            }
        }
        KT_CHECK(memcmp(out[4].data, want_r, sizeof want_r) == 0,
                 "interleaved rope node differs from kern_rope");
        kern_graph_plan_free(plan);
        kern_graph_destroy(g);
    }
    kt_context("");
}

/* A tiny Llama (2 layers, GQA 4/2) through the graph (embedding, rms_norm,
 * linear, rope, kv_append, decode_attention, silu_mul) against a plain C
 * forward pass, token by token with its own cache: prefill of 5 tokens for
 * 2 sequences, then greedy decoding. */
typedef struct tl_model {
    llama_cfg c;
    float *emb, *lm, *fnorm, *table;
    float *ln1[2], *wq[2], *wk[2], *wv[2], *wo[2], *ln2[2], *wg[2], *wu[2], *wd[2];
    float *kc[2], *vc[2]; /* reference caches [B][Lmax][Hkv][D] */
} tl_model;

static void tl_rms(const tl_model *m, const float *x, const float *w, float *y) {
    double ss = 0;
    int64_t i;
    float r;
    for (i = 0; i < m->c.hidden; i++) ss += (double)x[i] * x[i];
    r = (float)(1.0 / sqrt(ss / (double)m->c.hidden + m->c.rms_eps));
    for (i = 0; i < m->c.hidden; i++) y[i] = x[i] * r * w[i];
}
static void tl_mv(const float *W, const float *x, int64_t N, int64_t K, float *y) {
    int64_t n, k;
    for (n = 0; n < N; n++) {
        double a = 0;
        for (k = 0; k < K; k++) a += (double)W[n * K + k] * x[k];
        y[n] = (float)a;
    }
}
static void tl_rope(const tl_model *m, float *x, int64_t nh, int64_t pos) {
    int64_t D = m->c.head_dim, hf = D / 2, h, i;
    const float *row = m->table + pos * D;
    for (h = 0; h < nh; h++)
        for (i = 0; i < hf; i++) {
            float a = x[h * D + i], b = x[h * D + i + hf];
            x[h * D + i] = a * row[i] - b * row[hf + i];
            x[h * D + i + hf] = b * row[i] + a * row[hf + i];
        }
}
/* One token of sequence b at position pos: logits[V]. */
static void tl_step(tl_model *m, int64_t b, int64_t tok, int64_t pos, float *logits) {
    const llama_cfg *c = &m->c;
    int64_t Hd = c->hidden, D = c->head_dim, H = c->heads, Hkv = c->kv_heads, G = H / Hkv;
    float h[64], x[64], q[64], k[64], v[64], a[64], o[64], g[128], u[128], sc[64];
    int64_t l, i, hh, j;
    memcpy(h, m->emb + tok * Hd, sizeof(float) * (size_t)Hd);
    for (l = 0; l < c->layers; l++) {
        float *kc = m->kc[l] + b * c->max_len * Hkv * D, *vc = m->vc[l] + b * c->max_len * Hkv * D;
        tl_rms(m, h, m->ln1[l], x);
        tl_mv(m->wq[l], x, H * D, Hd, q);
        tl_mv(m->wk[l], x, Hkv * D, Hd, k);
        tl_mv(m->wv[l], x, Hkv * D, Hd, v);
        tl_rope(m, q, H, pos);
        tl_rope(m, k, Hkv, pos);
        memcpy(kc + pos * Hkv * D, k, sizeof(float) * (size_t)(Hkv * D));
        memcpy(vc + pos * Hkv * D, v, sizeof(float) * (size_t)(Hkv * D));
        for (hh = 0; hh < H; hh++) {
            int64_t kh = hh / G;
            double mx = -1e300, sum = 0, acc[16] = {0};
            for (j = 0; j <= pos; j++) {
                double s = 0;
                for (i = 0; i < D; i++) s += (double)q[hh * D + i] * kc[(j * Hkv + kh) * D + i];
                sc[j] = (float)(s / sqrt((double)D));
                if (sc[j] > mx) mx = sc[j];
            }
            for (j = 0; j <= pos; j++) {
                double p = exp(sc[j] - mx);
                sum += p;
                for (i = 0; i < D; i++) acc[i] += p * vc[(j * Hkv + kh) * D + i];
            }
            for (i = 0; i < D; i++) a[hh * D + i] = (float)(acc[i] / sum);
        }
        tl_mv(m->wo[l], a, Hd, H * D, o);
        for (i = 0; i < Hd; i++) h[i] += o[i];
        tl_rms(m, h, m->ln2[l], x);
        tl_mv(m->wg[l], x, c->ffn, Hd, g);
        tl_mv(m->wu[l], x, c->ffn, Hd, u);
        for (i = 0; i < c->ffn; i++) g[i] = (float)((double)g[i] / (1.0 + exp(-(double)g[i]))) * u[i];
        tl_mv(m->wd[l], g, Hd, c->ffn, o);
        for (i = 0; i < Hd; i++) h[i] += o[i];
    }
    tl_rms(m, h, m->fnorm, x);
    tl_mv(m->lm, x, c->vocab, Hd, logits);
}

static float *tl_rand(kt_rng *r, int64_t n, double scale, double offset) {
    float *p = (float *)malloc((size_t)n * sizeof(float));
    int64_t i;
    for (i = 0; i < n; i++) p[i] = (float)(offset + scale * kt_normal(r));
    return p;
}

/* Binds an f32 weight, converted to bf16 (a copy the graph owns) when the
 * model is bf16. */
static void tl_bind(kern_graph *g, kern_dtype dt, const char *name, float *data, int ndim,
                    int64_t d0, int64_t d1) {
    kern_tensor t;
    int64_t shape[2], n = ndim == 2 ? d0 * d1 : d0, i;
    uint16_t *h = NULL;
    shape[0] = d0;
    shape[1] = d1;
    if (dt == KERN_BF16) {
        h = (uint16_t *)malloc((size_t)n * sizeof *h);
        for (i = 0; i < n; i++) h[i] = kern_f32_to_bf16(data[i]);
    }
    kern_tensor_init(&t, h ? (void *)h : (void *)data, dt, ndim, shape);
    KT_OK(kern_graph_bind_weight(g, name, &t, h ? KERN_GRAPH_COPY : KERN_GRAPH_BORROW));
    free(h);
}

/* The tiny Llama through the graph in one configuration against the plain
 * f32 reference: prefill of 5 tokens for 2 sequences, then 6 decode steps.
 * f32: every position's logits within 1e-4 (relative to the largest) and
 * the same greedy tokens, decoding on kern's own tokens. bf16 (weights,
 * activations and caches) and int8 (the projections as qlinear): fed the
 * reference's tokens (teacher forcing), logits within `tol`, and the
 * greedy token agreeing with the reference's at >= 11 of the 14 (step,
 * sequence) pairs. last: the graph's last-position logits and its `next`
 * output (argmax) instead of all positions. */
/* The tiny model's weights (seeded: the same for every form), its
 * reference caches, and the graph of llama_graph.h in the given form with
 * every weight bound; NULL (and a failed check) on error. */
static kern_graph *tl_build(tl_model *m, kern_ctx *ctx, kern_dtype dt, int int8, int last, int kv8) {
    enum { B = 2 };
    llama_cfg *c = &m->c;
    kt_rng rng = kt_rng_make(77);
    kern_graph *g = NULL;
    int64_t l, V;
    char nm[128];
    memset(m, 0, sizeof *m);
    c->vocab = 64; c->hidden = 32; c->heads = 4; c->kv_heads = 2; c->head_dim = 8;
    c->ffn = 48; c->layers = 2; c->max_len = 16; c->rope_theta = 10000.0; c->rms_eps = 1e-6f;
    c->dtype = dt;
    c->int8 = int8;
    c->kv_int8 = kv8;
    c->last_logits = last;
    V = c->vocab;
    m->emb = tl_rand(&rng, V * c->hidden, 1.0, 0);
    m->lm = tl_rand(&rng, V * c->hidden, 0.3, 0);
    m->fnorm = tl_rand(&rng, c->hidden, 0.1, 1.0);
    for (l = 0; l < 2; l++) {
        m->ln1[l] = tl_rand(&rng, c->hidden, 0.1, 1.0);
        m->ln2[l] = tl_rand(&rng, c->hidden, 0.1, 1.0);
        m->wq[l] = tl_rand(&rng, c->heads * c->head_dim * c->hidden, 0.3, 0);
        m->wk[l] = tl_rand(&rng, c->kv_heads * c->head_dim * c->hidden, 0.3, 0);
        m->wv[l] = tl_rand(&rng, c->kv_heads * c->head_dim * c->hidden, 0.3, 0);
        m->wo[l] = tl_rand(&rng, c->hidden * c->heads * c->head_dim, 0.2, 0);
        m->wg[l] = tl_rand(&rng, c->ffn * c->hidden, 0.2, 0);
        m->wu[l] = tl_rand(&rng, c->ffn * c->hidden, 0.2, 0);
        m->wd[l] = tl_rand(&rng, c->hidden * c->ffn, 0.2, 0);
        m->kc[l] = (float *)calloc((size_t)(B * c->max_len * c->kv_heads * c->head_dim), sizeof(float));
        m->vc[l] = (float *)calloc((size_t)(B * c->max_len * c->kv_heads * c->head_dim), sizeof(float));
    }
    KT_OK(kern_graph_create(ctx, &g));
    if (!g) return NULL;
    KT_OK(llama_graph_build(g, c));
    KT_OK(llama_graph_bind_rope(ctx, g, c, &m->table)); /* the reference reads it too */
    tl_bind(g, dt, "model.embed_tokens.weight", m->emb, 2, V, c->hidden);
    tl_bind(g, dt, "lm_head.weight", m->lm, 2, V, c->hidden);
    tl_bind(g, dt, "model.norm.weight", m->fnorm, 1, c->hidden, 0);
    for (l = 0; l < 2; l++) {
#define TL_B(s, p, nd, a0, a1) (snprintf(nm, sizeof nm, "model.layers.%lld.%s.weight", (long long)l, s), tl_bind(g, dt, nm, p, nd, a0, a1))
        TL_B("input_layernorm", m->ln1[l], 1, c->hidden, 0);
        TL_B("post_attention_layernorm", m->ln2[l], 1, c->hidden, 0);
        TL_B("self_attn.q_proj", m->wq[l], 2, c->heads * c->head_dim, c->hidden);
        TL_B("self_attn.k_proj", m->wk[l], 2, c->kv_heads * c->head_dim, c->hidden);
        TL_B("self_attn.v_proj", m->wv[l], 2, c->kv_heads * c->head_dim, c->hidden);
        TL_B("self_attn.o_proj", m->wo[l], 2, c->hidden, c->heads * c->head_dim);
        TL_B("mlp.gate_proj", m->wg[l], 2, c->ffn, c->hidden);
        TL_B("mlp.up_proj", m->wu[l], 2, c->ffn, c->hidden);
        TL_B("mlp.down_proj", m->wd[l], 2, c->hidden, c->ffn);
#undef TL_B
    }
    return g;
}

static void tl_free(tl_model *m) {
    int l;
    free(m->emb); free(m->lm); free(m->fnorm); free(m->table);
    for (l = 0; l < 2; l++) {
        free(m->ln1[l]); free(m->ln2[l]); free(m->wq[l]); free(m->wk[l]); free(m->wv[l]);
        free(m->wo[l]); free(m->wg[l]); free(m->wu[l]); free(m->wd[l]); free(m->kc[l]); free(m->vc[l]);
    }
}

static void tl_run(kern_dtype dt, int int8, int last, int kv8, double tol) {
    enum { B = 2, P = 5, STEPS = 6 };
    tl_model m;
    llama_cfg *c = &m.c;
    kt_rng rng = kt_rng_make(77);
    kern_graph *g = NULL;
    kern_graph_plan *plan = NULL, *plan_dec = NULL;
    kern_graph_plan_params pp;
    kern_graph_plan_stats ps;
    void *kcache[2], *vcache[2];
    float *kscale[2], *vscale[2];
    float ref_logits[B][64];
    int64_t ids[B * P], lens[B] = {0, 0}, l, b, i, step, V;
    kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
    size_t es = kern_dtype_size(dt);
    double worst = 0;
    int agree = 0, pairs = 0;
    kt_context("%s%s%s%s", kern_dtype_name(dt), int8 ? " int8" : "", last ? " last_logits" : "",
               kv8 ? " kv int8" : "");
    g = tl_build(&m, ctx, dt, int8, last, kv8);
    KT_REQUIRE(g != NULL);
    V = c->vocab;
    if (kv8) es = 1;
    for (l = 0; l < 2; l++) {
        kcache[l] = calloc((size_t)(B * c->max_len * c->kv_heads * c->head_dim), es);
        vcache[l] = calloc((size_t)(B * c->max_len * c->kv_heads * c->head_dim), es);
        kscale[l] = (float *)calloc((size_t)(B * c->max_len * c->kv_heads), sizeof(float));
        vscale[l] = (float *)calloc((size_t)(B * c->max_len * c->kv_heads), sizeof(float));
    }
    kt_graph_roundtrip(g);
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=2,L=5";
    KT_OK(kern_graph_plan_create(g, ctx, &pp, &plan));
    KT_REQUIRE(plan != NULL);
    /* decode through a plan bound at one token: its linears run the GEMV
     * on the unpacked weights */
    pp.bind = "B=2,L=1";
    KT_OK(kern_graph_plan_create(g, ctx, &pp, &plan_dec));
    KT_REQUIRE(plan_dec != NULL);
    KT_OK(kern_graph_plan_stats_get(plan_dec, &ps));
    KT_CHECK(int8 || ps.packed_bytes == 0, "decode plan packed %zu bytes", ps.packed_bytes);
    /* gate/up: one GEMM whose glu epilogue writes silu(gate) * up (the
     * int8 form's qlinears are not merged) */
    KT_CHECK(int8 || strstr(kern_graph_plan_report(plan), "glu epilogue") != NULL,
             "no glu fusion in the prefill plan:\n%s", kern_graph_plan_report(plan));
    KT_CHECK(int8 || strstr(kern_graph_plan_report(plan_dec), "glu epilogue") != NULL,
             "no glu fusion in the decode plan");
    for (i = 0; i < B * P; i++) ids[i] = (int64_t)(kt_next(&rng) % (uint64_t)V);
    for (step = 0; step <= STEPS; step++) {
        int64_t L = step == 0 ? P : 1, pos0 = lens[0], LO = last ? 1 : L;
        kern_tensor in[10], out[3];
        void *caches[4];
        float *scales[4];
        int nin;
        int64_t next[B];
        in[0] = kern_tensor_2d(ids, KERN_I64, B, L);
        in[1] = kern_tensor_1d(lens, KERN_I64, B);
        for (l = 0; l < 2; l++) {
            caches[2 * l] = kcache[l];
            caches[2 * l + 1] = vcache[l];
            scales[2 * l] = kv8 ? kscale[l] : NULL;
            scales[2 * l + 1] = kv8 ? vscale[l] : NULL;
        }
        nin = 2 + llama_graph_cache_inputs(c, B, caches, scales, in + 2);
        memset(out, 0, sizeof out);
        KT_OK(kern_graph_run(step == 0 ? plan : plan_dec, in, nin, out, last ? 3 : 2));
        KT_REQUIRE(out[0].data != NULL && out[0].ndim == 3 && out[0].shape[1] == LO &&
                   out[0].dtype == dt && out[0].stride[1] == V && out[0].stride[0] == LO * V);
        KT_REQUIRE(!last || (out[2].dtype == KERN_I64 && out[2].shape[0] == B && out[2].shape[1] == 1));
        for (b = 0; b < B; b++) {
            const int64_t *nl = (const int64_t *)out[1].data;
            KT_CHECK(nl[b] == pos0 + L, "new length %lld", (long long)nl[b]);
            for (i = 0; i < L; i++) {
                int64_t j, best = 0, rbest = 0, row = last ? 0 : i;
                double mx = 0;
                tl_step(&m, b, ids[b * L + i], pos0 + i, ref_logits[b]);
                if (last && i < L - 1) continue;
                for (j = 0; j < V; j++) mx = fabs(ref_logits[b][j]) > mx ? fabs(ref_logits[b][j]) : mx;
                for (j = 0; j < V; j++) {
                    double gv = kt_get(out[0].data, dt, (b * LO + row) * V + j);
                    double e = fabs(gv - ref_logits[b][j]) / mx;
                    worst = e > worst ? e : worst;
                    if (gv > kt_get(out[0].data, dt, (b * LO + row) * V + best)) best = j;
                    if (ref_logits[b][j] > ref_logits[b][rbest]) rbest = j;
                }
                KT_CHECK(worst < tol, "step %lld seq %lld token %lld: logits rel error %.3g",
                         (long long)step, (long long)b, (long long)i, worst);
                if (i == L - 1) {
                    if (last)
                        KT_CHECK(((const int64_t *)out[2].data)[b] == best,
                                 "step %lld seq %lld: next %lld, argmax of the logits %lld",
                                 (long long)step, (long long)b,
                                 (long long)((const int64_t *)out[2].data)[b], (long long)best);
                    if (dt == KERN_F32 && !int8 && !kv8)
                        KT_CHECK(best == rbest, "step %lld seq %lld: greedy token %lld, reference %lld",
                                 (long long)step, (long long)b, (long long)best, (long long)rbest);
                    agree += best == rbest;
                    pairs++;
                    next[b] = dt == KERN_F32 && !int8 && !kv8 ? best : rbest; /* teacher forcing */
                }
            }
        }
        for (b = 0; b < B; b++) {
            lens[b] = ((const int64_t *)out[1].data)[b];
            ids[b] = next[b]; /* the next step's [B, 1] ids */
        }
    }
    KT_CHECK(agree >= pairs - 3, "greedy tokens agree at %d of %d steps", agree, pairs);
    if (getenv("KT_VERBOSE"))
        printf("  tiny llama %s%s%s: logits rel error %.3g, top-1 agreement %d/%d\n",
               kern_dtype_name(dt), int8 ? " int8" : "", kv8 ? " kv int8" : "", worst, agree, pairs);
    kern_graph_plan_free(plan);
    kern_graph_plan_free(plan_dec);
    kern_graph_destroy(g);
    tl_free(&m);
    for (l = 0; l < 2; l++) {
        free(kcache[l]);
        free(vcache[l]);
        free(kscale[l]);
        free(vscale[l]);
    }
    kt_context("");
}

/* The model's bad input: a token id >= vocab, a prompt longer than the
 * cache (and than the rotary table), a cache of the wrong dtype or shape.
 * Each run fails with its status and a message naming the problem, and
 * the caches and lengths are byte for byte as they were. */
KT_TEST(tiny_llama_graph_bad_input) {
    enum { B = 2 };
    tl_model m;
    llama_cfg *c = &m.c;
    kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
    kern_graph *g = tl_build(&m, ctx, KERN_F32, 0, 1, 0);
    kern_graph_plan *plan = NULL;
    kern_graph_plan_params pp;
    int64_t ids[B * 17], lens[B] = {3, 9}, lens0[B], cn, i, l;
    float *cache[4], *snap[4];
    kern_tensor in[6], out[3];
    KT_REQUIRE(g != NULL);
    cn = B * c->max_len * c->kv_heads * c->head_dim;
    for (l = 0; l < 4; l++) {
        cache[l] = (float *)malloc((size_t)cn * sizeof(float));
        snap[l] = (float *)malloc((size_t)cn * sizeof(float));
        for (i = 0; i < cn; i++) cache[l][i] = (float)(i % 7) - 3.0f;
        memcpy(snap[l], cache[l], (size_t)cn * sizeof(float));
    }
    memcpy(lens0, lens, sizeof lens);
    memset(&pp, 0, sizeof pp);
    pp.bind = "B=2,L=17";
    KT_OK(kern_graph_plan_create(g, ctx, &pp, &plan));
    KT_REQUIRE(plan != NULL);
    for (i = 0; i < B * 17; i++) ids[i] = i % c->vocab;
#define TL_IN(L)                                                                               \
    do {                                                                                       \
        in[0] = kern_tensor_2d(ids, KERN_I64, B, L);                                           \
        in[1] = kern_tensor_1d(lens, KERN_I64, B);                                             \
        for (l = 0; l < 4; l++)                                                                \
            in[2 + l] = kern_tensor_4d(cache[l], KERN_F32, B, c->max_len, c->kv_heads, c->head_dim); \
        memset(out, 0, sizeof out);                                                            \
    } while (0)
    /* a token id >= vocab: the embedding lookup */
    ids[3] = c->vocab;
    TL_IN(4);
    KT_ERROR(kern_graph_run(plan, in, 6, out, 3), KERN_ERR_INDEX, "64");
    ids[3] = 3;
    /* 8 new tokens after 9 cached in a 16-row cache (and a 16-row table):
     * the second sequence overflows */
    TL_IN(8);
    KT_ERROR(kern_graph_run(plan, in, 6, out, 3), KERN_ERR_SHAPE, "16");
    /* the whole prompt longer than the cache */
    lens[0] = lens[1] = 0;
    TL_IN(17);
    KT_ERROR(kern_graph_run(plan, in, 6, out, 3), KERN_ERR_SHAPE, "16");
    lens[0] = lens0[0];
    lens[1] = lens0[1];
    /* a cache of the wrong dtype, of the wrong shape */
    TL_IN(2);
    in[3] = kern_tensor_4d(cache[1], KERN_BF16, B, c->max_len, c->kv_heads, c->head_dim);
    KT_ERROR(kern_graph_run(plan, in, 6, out, 3), KERN_ERR_DTYPE, "v_cache.0");
    TL_IN(2);
    in[4] = kern_tensor_4d(cache[2], KERN_F32, B, c->max_len, c->kv_heads, c->head_dim / 2);
    KT_ERROR(kern_graph_run(plan, in, 6, out, 3), KERN_ERR_SHAPE, "k_cache.1");
#undef TL_IN
    KT_CHECK(lens[0] == lens0[0] && lens[1] == lens0[1], "lengths changed");
    for (l = 0; l < 4; l++)
        KT_CHECK(memcmp(cache[l], snap[l], (size_t)cn * sizeof(float)) == 0,
                 "cache %lld changed by a failed run", (long long)l);
    kern_graph_plan_free(plan);
    kern_graph_destroy(g);
    tl_free(&m);
    for (l = 0; l < 4; l++) {
        free(cache[l]);
        free(snap[l]);
    }
}

KT_TEST(tiny_llama_graph) {
    tl_run(KERN_F32, 0, 0, 0, 1e-4);
    tl_run(KERN_F32, 0, 1, 0, 1e-4);
}

KT_TEST(tiny_llama_graph_bf16_int8) {
    tl_run(KERN_BF16, 0, 1, 0, 0.05);
    tl_run(KERN_F32, 1, 1, 0, 0.05);
    tl_run(KERN_F32, 0, 1, 1, 0.05); /* int8 KV cache */
    tl_run(KERN_BF16, 0, 0, 1, 0.05);
}

KT_MAIN()
