/* Tests for kern_llm.h: rope against a double reference (both styles,
 * partial rotary dims, offsets, tables, strided views, every dtype and
 * ISA level), and the bad-input contract. */
#define KERN_IMPLEMENTATION
#include "kern_llm.h"
#include "kern_norm.h"
#include "kt.h"

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

KT_MAIN()
