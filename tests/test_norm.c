/* test_norm.c — kern_norm / kern_norm_backward / GELU family against plain
 * double-precision references, on every ISA path the CPU has. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_norm.h"
#include "kt.h"

#include <float.h>

/* ------------------------------------------------------------ helpers */

static const kern_dtype kDT[3] = {KERN_F32, KERN_BF16, KERN_F16};

/* A [rows, H] matrix with row stride rs (elements), guarded and poisoned. */
typedef struct tbuf {
    void *p;
    kern_dtype dt;
    int64_t rows, H, rs;
    size_t bytes;
} tbuf;

static tbuf tb_make(kern_dtype dt, int64_t rows, int64_t H, int64_t rs, const char *what) {
    tbuf b;
    b.dt = dt;
    b.rows = rows;
    b.H = H;
    b.rs = rs;
    b.bytes = (size_t)((rows > 0 ? (rows - 1) * rs + H : 0) + 1) * kern_dtype_size(dt);
    b.p = kt_alloc(b.bytes, what);
    kt_poison(b.p, b.bytes);
    return b;
}
static kern_tensor tb_t(const tbuf *b) {
    kern_tensor t = kern_tensor_2d(b->p, b->dt, b->rows, b->H);
    t.stride[0] = b->rs;
    return t;
}
static double tb_get(const tbuf *b, int64_t r, int64_t j) { return kt_get(b->p, b->dt, r * b->rs + j); }
static void tb_set(tbuf *b, int64_t r, int64_t j, double v) { kt_set(b->p, b->dt, r * b->rs + j, v); }
static void tb_fill(kt_rng *g, tbuf *b, double scale, double offset) {
    int64_t r, j;
    for (r = 0; r < b->rows; r++)
        for (j = 0; j < b->H; j++) tb_set(b, r, j, offset + scale * kt_normal(g));
}
/* Checks every element against want[r*H + j]; gaps between rows must still
 * hold the poison. */
static int tb_check(const char *what, const tbuf *b, const double *want, kt_tol_t tol) {
    int64_t r, j;
    int ok = 1;
    (void)j;
    for (r = 0; r < b->rows && ok; r++) {
        ok = kt__close(__FILE__, __LINE__, what, (const char *)b->p + (size_t)(r * b->rs) * kern_dtype_size(b->dt),
                       b->dt, 1, want + r * b->H, b->H, tol);
        if (ok && r + 1 < b->rows) {
            const unsigned char *gap = (const unsigned char *)b->p + (size_t)(r * b->rs + b->H) * kern_dtype_size(b->dt);
            size_t k, n = (size_t)(b->rs - b->H) * kern_dtype_size(b->dt);
            for (k = 0; k < n; k++)
                if (gap[k] != 0xFF) {
                    KT_CHECK(gap[k] == 0xFF, "%s: row gap written after row %lld", what, (long long)r);
                    ok = 0;
                    break;
                }
        }
    }
    return ok;
}

/* Double references of every kern_act and its derivative (the GELUs in
 * forms that keep relative accuracy for negative x). */
static double sigmoid_ref(double v) { return v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v)); }
static double act_ref(double x, int act) {
    double v;
    switch (act) {
    case KERN_ACT_GELU: return 0.5 * x * erfc(-x * 0.70710678118654752);
    case KERN_ACT_GELU_TANH:
        v = 2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x);
        return x * sigmoid_ref(v);
    case KERN_ACT_RELU: return x > 0 ? x : 0.0;
    case KERN_ACT_SILU: return x * sigmoid_ref(x);
    default: return x;
    }
}
static double act_grad_ref(double x, int act) {
    double v, s;
    switch (act) {
    case KERN_ACT_GELU:
        return 0.5 * erfc(-x * 0.70710678118654752) + x * exp(-0.5 * x * x) * 0.3989422804014327;
    case KERN_ACT_GELU_TANH:
        v = 2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x);
        s = sigmoid_ref(v);
        return s + x * s * (1.0 - s) * 2.0 * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
    case KERN_ACT_RELU: return x > 0 ? 1.0 : 0.0;
    case KERN_ACT_SILU:
        s = sigmoid_ref(x);
        return s * (1.0 + x * (1.0 - s));
    default: return 1.0;
    }
}
static const kern_act kActs[5] = {KERN_ACT_NONE, KERN_ACT_GELU, KERN_ACT_GELU_TANH, KERN_ACT_RELU,
                                  KERN_ACT_SILU};

/* ------------------------------------------------------ forward tests */

typedef struct fcase {
    int64_t rows, H;
    kern_dtype xdt, rdt, odt, rodt, wdt, bdt;
    int residual, weight, bias, rout, stats, act, rms;
    int64_t pad_x, pad_r, pad_o, pad_ro; /* extra row stride */
    float eps;
    int eps_set;
} fcase;

/* Double reference of one row. */
static void ref_row(const double *h, int64_t H, int rms, double eps, const double *w,
                    const double *b, int act, double *out, double *mean, double *rstd) {
    double m = 0, v = 0, rs;
    int64_t j;
    if (!rms) {
        for (j = 0; j < H; j++) m += h[j];
        m /= (double)H;
    }
    for (j = 0; j < H; j++) v += (h[j] - m) * (h[j] - m);
    v /= (double)H;
    rs = 1.0 / sqrt(v + eps);
    for (j = 0; j < H; j++) {
        double y = (h[j] - m) * rs;
        if (w) y *= w[j];
        if (b) y += b[j];
        out[j] = act_ref(y, act);
    }
    *mean = m;
    *rstd = rs;
}

static kern_tensor vec_t(void *p, kern_dtype dt, int64_t H) { return kern_tensor_1d(p, dt, H); }

/* Runs one forward case on ctx; returns 0 on failure. If `keep` is given,
 * the output bytes are copied there (for thread comparisons). */
static int run_fwd(kern_ctx *ctx, const fcase *c, double xscale, double xoff, void *keep) {
    kt_rng g = kt_rng_make((uint64_t)(c->rows * 131 + c->H));
    int64_t R = c->rows, H = c->H, r, j;
    tbuf x = tb_make(c->xdt, R, H, H + c->pad_x, "x"), res, out, ro;
    void *w = NULL, *b = NULL;
    float *mean = NULL, *rstd = NULL;
    double *want = (double *)malloc(sizeof(double) * (size_t)(R * H + 1));
    double *wro = (double *)malloc(sizeof(double) * (size_t)(R * H + 1));
    double *wm = (double *)malloc(sizeof(double) * (size_t)(R + 1));
    double *wr = (double *)malloc(sizeof(double) * (size_t)(R + 1));
    double *h = (double *)malloc(sizeof(double) * (size_t)(H + 1));
    double *wd = (double *)malloc(sizeof(double) * (size_t)(H + 1));
    double *bd = (double *)malloc(sizeof(double) * (size_t)(H + 1));
    kern_tensor xt, rt, ot, rot, wt, bt, mt, st;
    kern_norm_params p;
    int ok = 1;
    double eps = c->eps_set || c->eps != 0 ? c->eps : 1e-5;
    memset(&p, 0, sizeof p);
    tb_fill(&g, &x, xscale, xoff);
    res = tb_make(c->rdt, R, H, H + c->pad_r, "residual");
    if (c->residual) tb_fill(&g, &res, 1.0, 0.0);
    out = tb_make(c->odt, R, H, H + c->pad_o, "out");
    ro = tb_make(c->rodt, R, H, H + c->pad_ro, "residual_out");
    xt = tb_t(&x);
    rt = tb_t(&res);
    ot = tb_t(&out);
    rot = tb_t(&ro);
    p.norm = c->rms ? KERN_NORM_RMS : KERN_NORM_LAYER;
    p.act = (kern_act)c->act;
    p.eps = c->eps;
    p.eps_set = c->eps_set;
    if (c->residual) p.residual = &rt;
    if (c->rout) p.residual_out = &rot;
    if (c->weight) {
        w = kt_alloc((size_t)H * kern_dtype_size(c->wdt) + 1, "weight");
        for (j = 0; j < H; j++) kt_set(w, c->wdt, j, 1.0 + 0.5 * kt_normal(&g));
        wt = vec_t(w, c->wdt, H);
        p.weight = &wt;
    }
    if (c->bias) {
        b = kt_alloc((size_t)H * kern_dtype_size(c->bdt) + 1, "bias");
        for (j = 0; j < H; j++) kt_set(b, c->bdt, j, 0.5 * kt_normal(&g));
        bt = vec_t(b, c->bdt, H);
        p.bias = &bt;
    }
    if (c->stats) {
        mean = (float *)kt_alloc(sizeof(float) * (size_t)(R + 1), "mean");
        rstd = (float *)kt_alloc(sizeof(float) * (size_t)(R + 1), "rstd");
        kt_poison(mean, sizeof(float) * (size_t)(R + 1));
        kt_poison(rstd, sizeof(float) * (size_t)(R + 1));
        mt = kern_tensor_1d(mean, KERN_F32, R);
        st = kern_tensor_1d(rstd, KERN_F32, R);
        if (!c->rms) p.mean = &mt;
        p.rstd = &st;
    }
    for (j = 0; j < H; j++) {
        wd[j] = c->weight ? kt_get(w, c->wdt, j) : 1.0;
        bd[j] = c->bias ? kt_get(b, c->bdt, j) : 0.0;
    }
    for (r = 0; r < R; r++) {
        for (j = 0; j < H; j++) {
            h[j] = tb_get(&x, r, j) + (c->residual ? tb_get(&res, r, j) : 0.0);
            wro[r * H + j] = (float)h[j]; /* the f32 sum, rounded to its dtype by the check */
        }
        ref_row(h, H, c->rms, eps, c->weight ? wd : NULL, c->bias ? bd : NULL, c->act, want + r * H,
                &wm[r], &wr[r]);
    }
    KT_OK(kern_norm(ctx, &xt, &ot, &p));
    {
        /* long rows: the f32 statistics carry ~sqrt(H) ulps */
        kt_tol_t tol = kt_tol(c->odt);
        if (c->odt == KERN_F32 && H >= 1024) tol = kt_tol_scaled(KERN_F32, 4.0);
        ok &= tb_check("out", &out, want, tol);
    }
    if (c->rout) ok &= tb_check("residual_out", &ro, wro, kt_tol(c->rodt));
    if (c->stats) {
        if (!c->rms) ok &= kt_assert_close("mean", mean, KERN_F32, wm, R, kt_tol(KERN_F32));
        ok &= kt_assert_close("rstd", rstd, KERN_F32, wr, R, kt_tol_scaled(KERN_F32, H >= 1024 ? 4.0 : 1.0));
        KT_CHECK(((uint32_t *)mean)[R] == 0xFFFFFFFFu && ((uint32_t *)rstd)[R] == 0xFFFFFFFFu,
                 "stats written past rows");
    }
    if (keep) memcpy(keep, out.p, out.bytes);
    kt_free(x.p);
    kt_free(res.p);
    kt_free(out.p);
    kt_free(ro.p);
    kt_free(w);
    kt_free(b);
    kt_free(mean);
    kt_free(rstd);
    free(want);
    free(wro);
    free(wm);
    free(wr);
    free(h);
    free(wd);
    free(bd);
    return ok;
}

static fcase fc_base(int64_t rows, int64_t H) {
    fcase c;
    memset(&c, 0, sizeof c);
    c.rows = rows;
    c.H = H;
    c.xdt = c.rdt = c.odt = c.rodt = c.wdt = c.bdt = KERN_F32;
    return c;
}
static void fc_dtypes(fcase *c, kt_rng *g) {
    c->xdt = kDT[kt_randint(g, 0, 3)];
    c->rdt = kDT[kt_randint(g, 0, 3)];
    c->odt = kDT[kt_randint(g, 0, 3)];
    c->rodt = kDT[kt_randint(g, 0, 3)];
    c->wdt = kDT[kt_randint(g, 0, 3)];
    c->bdt = kDT[kt_randint(g, 0, 3)];
}
static const char *fc_str(const fcase *c, kern_isa isa, int threads) {
    static char buf[256];
    snprintf(buf, sizeof buf,
             "[%s t%d rows=%lld H=%lld %s act=%d res=%d w=%d b=%d ro=%d st=%d x=%s r=%s o=%s ro=%s w=%s b=%s pads=%lld,%lld,%lld,%lld]",
             kern_isa_name(isa), threads, (long long)c->rows, (long long)c->H, c->rms ? "rms" : "ln",
             c->act, c->residual, c->weight, c->bias, c->rout, c->stats, kern_dtype_name(c->xdt),
             kern_dtype_name(c->rdt), kern_dtype_name(c->odt), kern_dtype_name(c->rodt),
             kern_dtype_name(c->wdt), kern_dtype_name(c->bdt), (long long)c->pad_x, (long long)c->pad_r,
             (long long)c->pad_o, (long long)c->pad_ro);
    return buf;
}

/* Flags alone, all combined, and random mixes, per (rows, H) and ISA. */
KT_TEST(forward_grid) {
    static const int64_t Hs[] = {1, 3, 17, 64, 127, 768, 1024, 4096, 8192};
    static const int64_t Rs[] = {1, 7, 128};
    size_t hi, ri;
    kt_rng g = kt_rng_make(1);
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        for (hi = 0; hi < sizeof Hs / sizeof Hs[0]; hi++)
            for (ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++) {
                int64_t H = Hs[hi], R = Rs[ri];
                int big = R * H > 64 * 1024, k;
#ifdef KT_SANITIZER
                if (R * H > 8 * 1024 && !(R == 1 && H == 8192)) continue;
#endif
                /* 0: plain; 1..6: each flag alone; 7: all; 8..: random mixes */
                for (k = 0; k < (big ? 4 : 12); k++) {
                    fcase c = fc_base(R, H);
                    switch (k) {
                    case 0: break;
                    case 1: c.residual = 1; break;
                    case 2: c.weight = 1; break;
                    case 3: c.bias = 1; c.act = KERN_ACT_GELU; c.weight = 1; c.rout = 1; c.residual = 1; c.stats = 1;
                        fc_dtypes(&c, &g); break;
                    case 4: c.rout = 1; break;
                    case 5: c.stats = 1; c.rms = 1; break;
                    case 6: c.act = KERN_ACT_GELU_TANH; break;
                    case 7: c.residual = c.weight = c.bias = c.rout = c.stats = 1;
                        c.act = KERN_ACT_GELU; break;
                    default:
                        c.residual = (int)kt_randint(&g, 0, 2);
                        c.weight = (int)kt_randint(&g, 0, 2);
                        c.bias = (int)kt_randint(&g, 0, 2);
                        c.rout = (int)kt_randint(&g, 0, 2);
                        c.stats = (int)kt_randint(&g, 0, 2);
                        c.rms = (int)kt_randint(&g, 0, 2);
                        c.act = (int)kt_randint(&g, 0, 5);
                        fc_dtypes(&c, &g);
                        if (k == 8) c.xdt = c.rdt = c.odt = c.rodt = c.wdt = c.bdt = KERN_BF16;
                        if (k == 9) c.xdt = c.rdt = c.odt = c.rodt = c.wdt = c.bdt = KERN_F16;
                        if (k >= 10) {
                            c.pad_x = kt_randint(&g, 0, 9);
                            c.pad_r = kt_randint(&g, 0, 9);
                            c.pad_o = kt_randint(&g, 0, 9);
                            c.pad_ro = kt_randint(&g, 0, 9);
                        }
                        break;
                    }
                    kt_context("%s", fc_str(&c, isa, 2));
                    if (!run_fwd(ctx, &c, 1.0, 0.5, NULL)) return;
                }
            }
    }
}

/* Every dtype mix of (x, residual, out, residual_out) once, weights mixed. */
KT_TEST(forward_all_dtype_mixes) {
    int a, b, c2, d;
    kt_rng g = kt_rng_make(3);
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        for (a = 0; a < 3; a++)
            for (b = 0; b < 3; b++)
                for (c2 = 0; c2 < 3; c2++)
                    for (d = 0; d < 3; d++) {
                        fcase c = fc_base(5, 67);
                        c.residual = c.weight = c.bias = c.rout = c.stats = 1;
                        c.act = (a + b + c2 + d) % 5;
                        c.rms = (a + d) & 1;
                        c.xdt = kDT[a]; c.rdt = kDT[b]; c.odt = kDT[c2]; c.rodt = kDT[d];
                        c.wdt = kDT[kt_randint(&g, 0, 3)];
                        c.bdt = kDT[kt_randint(&g, 0, 3)];
                        kt_context("%s", fc_str(&c, isa, 1));
                        if (!run_fwd(ctx, &c, 2.0, 0.0, NULL)) return;
                    }
    }
}

/* LayerNorm without affine: each row has mean ~ 0 and variance ~ 1. */
KT_TEST(forward_layernorm_moments) {
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        int64_t R = 16, H = 1000, r, j;
        float *x = (float *)kt_alloc(sizeof(float) * (size_t)(R * H), "x");
        float *y = (float *)kt_alloc(sizeof(float) * (size_t)(R * H), "y");
        kern_tensor xt = kern_tensor_2d(x, KERN_F32, R, H), yt = kern_tensor_2d(y, KERN_F32, R, H);
        kt_rng g = kt_rng_make(11);
        for (j = 0; j < R * H; j++) x[j] = (float)(3.0 + 7.0 * kt_normal(&g) + (double)(j / H));
        KT_OK(kern_norm(ctx, &xt, &yt, NULL));
        for (r = 0; r < R; r++) {
            double m = 0, v = 0;
            for (j = 0; j < H; j++) m += y[r * H + j];
            m /= (double)H;
            for (j = 0; j < H; j++) v += (y[r * H + j] - m) * (y[r * H + j] - m);
            v /= (double)H;
            KT_CHECK(fabs(m) < 1e-6 && fabs(v - 1.0) < 1e-4 * 1.01, "%s row %lld: mean %g var %g",
                     kern_isa_name(isa), (long long)r, m, v);
        }
        kt_free(x);
        kt_free(y);
    }
}

/* A row of 1e4 + N(0,1): statistics within 1e-5 relative (f32 two-pass),
 * and the output as accurate as for a centred row. */
KT_TEST(forward_large_offset_numerics) {
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        static const int64_t Hs[] = {4096, 8192, 1000};
        size_t hi;
        for (hi = 0; hi < 3; hi++) {
            fcase c = fc_base(3, Hs[hi]);
            c.stats = 1;
            kt_context("%s", fc_str(&c, isa, 1));
            if (!run_fwd(ctx, &c, 1.0, 1e4, NULL)) return;
            c.rms = 1;
            if (!run_fwd(ctx, &c, 1.0, 1e4, NULL)) return;
        }
    }
}

/* eps: default, explicit, explicit zero. */
KT_TEST(forward_eps) {
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        fcase c = fc_base(7, 33);
        c.stats = 1;
        c.eps = 0.25f;
        kt_context("%s eps", fc_str(&c, isa, 1));
        run_fwd(ctx, &c, 0.3, 0.0, NULL);
        c.eps = 0.0f;
        c.eps_set = 1;
        run_fwd(ctx, &c, 0.3, 0.0, NULL);
        c.rms = 1;
        run_fwd(ctx, &c, 0.3, 0.0, NULL);
    }
}

/* Same bits on 1 and 2 threads. */
KT_TEST(forward_threads_identical) {
    KT_FOR_EACH_ISA(isa, ctx1, 1) {
        kern_ctx *ctx2 = kt_ctx(2, isa);
        fcase c = fc_base(37, 1536);
        size_t bytes = (size_t)(37 * 1536) * 4 + 4;
        void *o1 = malloc(bytes), *o2 = malloc(bytes);
        c.residual = c.weight = c.bias = c.rout = c.stats = 1;
        c.act = KERN_ACT_GELU;
        kt_context("%s", fc_str(&c, isa, 2));
        run_fwd(ctx1, &c, 1.0, 0.0, o1);
        run_fwd(ctx2, &c, 1.0, 0.0, o2);
        kt_assert_bytes_equal("out 1 vs 2 threads", o1, o2, bytes);
        free(o1);
        free(o2);
    }
}

/* Outputs of >= KERN_NORM_NT_BYTES take the non-temporal store path. */
KT_TEST(forward_streaming_stores) {
#ifndef KT_SANITIZER
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        fcase c = fc_base(1025, 4096);
        if (isa == KERN_ISA_SCALAR) continue;
        c.weight = c.bias = 1;
        c.act = KERN_ACT_GELU;
        c.pad_o = 3; /* some rows unaligned: mixed streaming / plain stores */
        kt_context("%s", fc_str(&c, isa, 2));
        run_fwd(ctx, &c, 1.0, 0.0, NULL);
        c.odt = KERN_BF16;
        c.pad_o = 0;
        c.residual = c.rout = 1;
        c.rodt = KERN_BF16;
        run_fwd(ctx, &c, 1.0, 0.0, NULL);
    }
#endif
}

/* 3-D views with leading dims that do not collapse, and in-place use. */
KT_TEST(forward_3d_views_and_in_place) {
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        /* x: [B=3, L=5, H=40] inside a [3, 7, 48] buffer (L padded, H padded) */
        int64_t B = 3, L = 5, H = 40, j, bb, ll;
        float *xb = (float *)kt_alloc(sizeof(float) * 3 * 7 * 48, "xbuf");
        uint16_t *ob = (uint16_t *)kt_alloc(2 * 3 * 5 * 41, "obuf");
        float *xc = (float *)kt_alloc(sizeof(float) * 3 * 5 * 40, "xc");
        float *oc = (float *)kt_alloc(sizeof(float) * 3 * 5 * 40, "oc");
        kern_tensor x, o, x2, o2;
        kern_norm_params p;
        kt_rng g = kt_rng_make(5);
        memset(&p, 0, sizeof p);
        kt_poison(ob, 2 * 3 * 5 * 41);
        for (j = 0; j < 3 * 7 * 48; j++) xb[j] = (float)kt_normal(&g);
        memset(&x, 0, sizeof x);
        x.data = xb; x.dtype = KERN_F32; x.ndim = 3;
        x.shape[0] = B; x.shape[1] = L; x.shape[2] = H;
        x.stride[0] = 7 * 48; x.stride[1] = 48; x.stride[2] = 1;
        o = x;
        o.data = ob; o.dtype = KERN_BF16;
        o.stride[0] = 5 * 41; o.stride[1] = 41;
        for (bb = 0; bb < B; bb++)
            for (ll = 0; ll < L; ll++)
                for (j = 0; j < H; j++) xc[(bb * L + ll) * H + j] = xb[bb * 7 * 48 + ll * 48 + j];
        p.act = KERN_ACT_GELU_TANH;
        KT_OK(kern_norm(ctx, &x, &o, &p));
        x2 = kern_tensor_2d(xc, KERN_F32, B * L, H);
        o2 = kern_tensor_2d(oc, KERN_F32, B * L, H);
        KT_OK(kern_norm(ctx, &x2, &o2, &p));
        for (bb = 0; bb < B; bb++)
            for (ll = 0; ll < L; ll++) {
                double want[40];
                for (j = 0; j < H; j++) want[j] = oc[(bb * L + ll) * H + j];
                kt_assert_close("3-D view out", ob + bb * 205 + ll * 41, KERN_BF16, want, H, kt_tol(KERN_BF16));
                KT_CHECK(ob[bb * 205 + ll * 41 + 40] == 0xFFFF, "pad written");
            }
        /* in place: out = x (f32, contiguous) gives the same values */
        KT_OK(kern_norm(ctx, &x2, &x2, &p));
        kt_assert_bytes_equal("in place", xc, oc, sizeof(float) * 3 * 5 * 40);
        kt_free(xb);
        kt_free(ob);
        kt_free(xc);
        kt_free(oc);
    }
}

/* Residual stream updated in place: residual_out = residual. */
KT_TEST(forward_residual_in_place) {
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        int64_t R = 9, H = 300, j;
        uint16_t *x = (uint16_t *)kt_alloc(2 * (size_t)(R * H), "x");
        uint16_t *r = (uint16_t *)kt_alloc(2 * (size_t)(R * H), "r");
        uint16_t *r0 = (uint16_t *)kt_alloc(2 * (size_t)(R * H), "r0");
        uint16_t *ro = (uint16_t *)kt_alloc(2 * (size_t)(R * H), "ro");
        uint16_t *y1 = (uint16_t *)kt_alloc(2 * (size_t)(R * H), "y1");
        uint16_t *y2 = (uint16_t *)kt_alloc(2 * (size_t)(R * H), "y2");
        kern_tensor xt = kern_tensor_2d(x, KERN_BF16, R, H), rt = kern_tensor_2d(r, KERN_BF16, R, H);
        kern_tensor r0t = kern_tensor_2d(r0, KERN_BF16, R, H), rot = kern_tensor_2d(ro, KERN_BF16, R, H);
        kern_tensor y1t = kern_tensor_2d(y1, KERN_BF16, R, H), y2t = kern_tensor_2d(y2, KERN_BF16, R, H);
        kern_norm_params p;
        kt_rng g = kt_rng_make(9);
        kt_fill_normal(&g, x, KERN_BF16, R * H, 1.0);
        kt_fill_normal(&g, r, KERN_BF16, R * H, 1.0);
        memcpy(r0, r, 2 * (size_t)(R * H));
        memset(&p, 0, sizeof p);
        p.act = KERN_ACT_GELU;
        p.residual = &r0t;
        p.residual_out = &rot;
        KT_OK(kern_norm(ctx, &xt, &y1t, &p));
        p.residual = &rt;
        p.residual_out = &rt;
        KT_OK(kern_norm(ctx, &xt, &y2t, &p));
        kt_assert_bytes_equal("residual_out in place", r, ro, 2 * (size_t)(R * H));
        kt_assert_bytes_equal("out with in-place residual", y1, y2, 2 * (size_t)(R * H));
        for (j = 0; j < 3; j++) KT_CHECK(r[j] != r0[j] || x[j] == 0, "residual not updated");
        kt_free(x); kt_free(r); kt_free(r0); kt_free(ro); kt_free(y1); kt_free(y2);
    }
}

KT_TEST(forward_empty_and_h0) {
    kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
    float buf[4], mean[3], rstd[3];
    kern_tensor x = kern_tensor_2d(buf, KERN_F32, 0, 4), o = kern_tensor_2d(buf, KERN_F32, 0, 4);
    kern_tensor x0 = kern_tensor_2d(buf, KERN_F32, 3, 0), o0 = kern_tensor_2d(buf + 2, KERN_F32, 3, 0);
    kern_tensor mt = kern_tensor_1d(mean, KERN_F32, 3), st = kern_tensor_1d(rstd, KERN_F32, 3);
    kern_norm_params p;
    memset(&p, 0, sizeof p);
    KT_OK(kern_norm(ctx, &x, &o, NULL));
    p.mean = &mt;
    p.rstd = &st;
    KT_OK(kern_norm(ctx, &x0, &o0, &p));
    KT_CHECK(mean[0] == 0.0f && isnan(rstd[2]), "H=0: mean %g rstd %g (PyTorch: 0, nan)", mean[0], rstd[2]);
}

/* ------------------------------------------------------ backward tests */

typedef struct bcase {
    int64_t rows, H;
    kern_dtype xdt, dydt, dxdt, drdt, wdt, dwdt;
    int weight, bias, act, rms, saved, dres, dw, db;
    int64_t pad;
} bcase;

/* Double reference of the backward; fills dx[R*H], dw[H], db[H]. */
static void ref_bwd(const bcase *c, const tbuf *x, const tbuf *dy, const tbuf *dr, const double *w,
                    const double *b, double eps, double *dx, double *dw, double *db) {
    int64_t R = c->rows, H = c->H, r, j;
    double *xh = (double *)malloc(sizeof(double) * (size_t)H), *g = (double *)malloc(sizeof(double) * (size_t)H);
    for (j = 0; j < H; j++) dw[j] = db[j] = 0;
    for (r = 0; r < R; r++) {
        double m = 0, v = 0, rs, sg = 0, sgx = 0;
        for (j = 0; j < H; j++) m += tb_get(x, r, j);
        m = c->rms ? 0.0 : m / (double)H;
        for (j = 0; j < H; j++) v += (tb_get(x, r, j) - m) * (tb_get(x, r, j) - m);
        rs = 1.0 / sqrt(v / (double)H + eps);
        for (j = 0; j < H; j++) {
            double dz = tb_get(dy, r, j);
            xh[j] = (tb_get(x, r, j) - m) * rs;
            if (c->act) dz *= act_grad_ref(xh[j] * (w ? w[j] : 1.0) + (b ? b[j] : 0.0), c->act);
            dw[j] += dz * xh[j];
            db[j] += dz;
            g[j] = dz * (w ? w[j] : 1.0);
            sg += g[j];
            sgx += g[j] * xh[j];
        }
        sg /= (double)H;
        sgx /= (double)H;
        for (j = 0; j < H; j++)
            dx[r * H + j] = rs * (g[j] - (c->rms ? 0.0 : sg) - xh[j] * sgx) + (dr ? tb_get(dr, r, j) : 0.0);
    }
    free(xh);
    free(g);
}

static int run_bwd(kern_ctx *ctx, const bcase *c, void *keep_dx, void *keep_dw) {
    kt_rng g = kt_rng_make((uint64_t)(c->rows * 7 + c->H));
    int64_t R = c->rows, H = c->H, j;
    tbuf x = tb_make(c->xdt, R, H, H + c->pad, "x"), dy = tb_make(c->dydt, R, H, H + 2 * c->pad, "dout");
    tbuf dx = tb_make(c->dxdt, R, H, H + c->pad, "dx"), dr = tb_make(c->drdt, R, H, H, "dres");
    void *w = kt_alloc((size_t)H * 4 + 4, "w"), *b = kt_alloc((size_t)H * 4 + 4, "b");
    void *dw = kt_alloc((size_t)H * 4 + 4, "dw"), *db = kt_alloc((size_t)H * 4 + 4, "db");
    float *mean = (float *)kt_alloc(sizeof(float) * (size_t)(R + 1), "mean");
    float *rstd = (float *)kt_alloc(sizeof(float) * (size_t)(R + 1), "rstd");
    double *wd = (double *)malloc(sizeof(double) * (size_t)(H + 1)), *bd = (double *)malloc(sizeof(double) * (size_t)(H + 1));
    double *wdx = (double *)malloc(sizeof(double) * (size_t)(R * H + 1));
    double *wdw = (double *)malloc(sizeof(double) * (size_t)(H + 1)), *wdb = (double *)malloc(sizeof(double) * (size_t)(H + 1));
    kern_tensor xt = tb_t(&x), dyt = tb_t(&dy), dxt = tb_t(&dx), drt = tb_t(&dr), wt, bt, dwt, dbt, mt, st;
    kern_norm_backward_params p;
    double eps = 1e-5;
    int ok = 1;
    memset(&p, 0, sizeof p);
    tb_fill(&g, &x, 1.5, 0.3);
    tb_fill(&g, &dy, 1.0, 0.0);
    if (c->dres) tb_fill(&g, &dr, 1.0, 0.0);
    for (j = 0; j < H; j++) {
        kt_set(w, c->wdt, j, 1.0 + 0.5 * kt_normal(&g));
        kt_set(b, c->wdt, j, 0.5 * kt_normal(&g));
        wd[j] = kt_get(w, c->wdt, j);
        bd[j] = kt_get(b, c->wdt, j);
    }
    kt_poison(dw, (size_t)H * 4 + 4);
    kt_poison(db, (size_t)H * 4 + 4);
    wt = vec_t(w, c->wdt, H);
    bt = vec_t(b, c->wdt, H);
    dwt = vec_t(dw, c->dwdt, H);
    dbt = vec_t(db, c->dwdt, H);
    mt = kern_tensor_1d(mean, KERN_F32, R);
    st = kern_tensor_1d(rstd, KERN_F32, R);
    p.norm = c->rms ? KERN_NORM_RMS : KERN_NORM_LAYER;
    p.act = (kern_act)c->act;
    if (c->weight) p.weight = &wt;
    if (c->bias) p.bias = &bt;
    if (c->dres) p.dresidual = &drt;
    if (c->dw && c->weight) p.dweight = &dwt;
    if (c->db && c->bias) p.dbias = &dbt;
    ref_bwd(c, &x, &dy, c->dres ? &dr : NULL, c->weight ? wd : NULL, c->bias ? bd : NULL, eps, wdx, wdw, wdb);
    if (c->saved) { /* statistics from our own forward */
        kern_norm_params fp;
        tbuf tmp = tb_make(KERN_F32, R, H, H, "tmp");
        kern_tensor tt = tb_t(&tmp);
        memset(&fp, 0, sizeof fp);
        fp.norm = p.norm;
        if (!c->rms) fp.mean = &mt;
        fp.rstd = &st;
        KT_OK(kern_norm(ctx, &xt, &tt, &fp));
        if (!c->rms) p.mean = &mt;
        p.rstd = &st;
        kt_free(tmp.p);
    }
    KT_OK(kern_norm_backward(ctx, &dyt, &xt, &dxt, &p));
    {
        /* dx = rstd (g - mean g - xhat mean(g xhat)): cancellation of O(1)
         * terms, so f32 results carry a few ulps of the terms */
        kt_tol_t tol = c->dxdt == KERN_F32 ? kt_tol_scaled(KERN_F32, 8.0) : kt_tol(c->dxdt);
        if (c->xdt != KERN_F32 && c->dxdt == KERN_F32) tol = kt_tol_scaled(KERN_F32, 8.0);
        ok &= tb_check("dx", &dx, wdx, tol);
    }
    if (p.dweight) ok &= kt_assert_close("dweight", dw, c->dwdt, wdw, H, c->dwdt == KERN_F32 ? kt_tol_scaled(KERN_F32, sqrt((double)R) * 4) : kt_tol(c->dwdt));
    if (p.dbias) ok &= kt_assert_close("dbias", db, c->dwdt, wdb, H, c->dwdt == KERN_F32 ? kt_tol_scaled(KERN_F32, sqrt((double)R) * 4) : kt_tol(c->dwdt));
    if (keep_dx) memcpy(keep_dx, dx.p, dx.bytes);
    if (keep_dw) memcpy(keep_dw, dw, (size_t)H * 4);
    kt_free(x.p); kt_free(dy.p); kt_free(dx.p); kt_free(dr.p);
    kt_free(w); kt_free(b); kt_free(dw); kt_free(db); kt_free(mean); kt_free(rstd);
    free(wd); free(bd); free(wdx); free(wdw); free(wdb);
    return ok;
}

static bcase bc_base(int64_t rows, int64_t H) {
    bcase c;
    memset(&c, 0, sizeof c);
    c.rows = rows;
    c.H = H;
    c.xdt = c.dydt = c.dxdt = c.drdt = c.wdt = c.dwdt = KERN_F32;
    return c;
}
static const char *bc_str(const bcase *c, kern_isa isa) {
    static char buf[200];
    snprintf(buf, sizeof buf, "[%s rows=%lld H=%lld %s act=%d w=%d b=%d saved=%d dres=%d dw=%d db=%d x=%s dy=%s dx=%s w=%s dw=%s pad=%lld]",
             kern_isa_name(isa), (long long)c->rows, (long long)c->H, c->rms ? "rms" : "ln", c->act, c->weight,
             c->bias, c->saved, c->dres, c->dw, c->db, kern_dtype_name(c->xdt), kern_dtype_name(c->dydt),
             kern_dtype_name(c->dxdt), kern_dtype_name(c->wdt), kern_dtype_name(c->dwdt), (long long)c->pad);
    return buf;
}

KT_TEST(backward_grid) {
    static const int64_t Hs[] = {1, 3, 17, 64, 127, 768, 1024, 4096, 8192};
    static const int64_t Rs[] = {1, 7, 128};
    size_t hi, ri;
    kt_rng g = kt_rng_make(2);
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        for (hi = 0; hi < sizeof Hs / sizeof Hs[0]; hi++)
            for (ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++) {
                int64_t H = Hs[hi], R = Rs[ri];
                int k, big = R * H > 64 * 1024;
#ifdef KT_SANITIZER
                if (R * H > 8 * 1024) continue;
#endif
                for (k = 0; k < (big ? 2 : 6); k++) {
                    bcase c = bc_base(R, H);
                    c.weight = c.bias = c.dw = c.db = 1;
                    switch (k) {
                    case 0: c.act = KERN_ACT_GELU; break;
                    case 1: c.rms = 1; c.saved = 1; c.bias = 0; c.dres = 1; break;
                    case 2: c.weight = c.bias = 0; c.saved = 1; break;
                    case 3: c.act = KERN_ACT_GELU_TANH; c.saved = 1; c.pad = 5; break;
                    default:
                        c.act = (int)kt_randint(&g, 0, 5);
                        c.rms = (int)kt_randint(&g, 0, 2);
                        c.saved = (int)kt_randint(&g, 0, 2);
                        c.dres = (int)kt_randint(&g, 0, 2);
                        c.xdt = kDT[kt_randint(&g, 0, 3)];
                        c.dydt = kDT[kt_randint(&g, 0, 3)];
                        c.dxdt = kDT[kt_randint(&g, 0, 3)];
                        c.drdt = kDT[kt_randint(&g, 0, 3)];
                        c.wdt = kDT[kt_randint(&g, 0, 3)];
                        c.dwdt = kDT[kt_randint(&g, 0, 3)];
                        c.pad = kt_randint(&g, 0, 4);
                        break;
                    }
                    kt_context("%s", bc_str(&c, isa));
                    if (!run_bwd(ctx, &c, NULL, NULL)) return;
                }
            }
    }
}

/* dx and dweight/dbias: the same bits on 1 and 2 threads. */
KT_TEST(backward_deterministic_threads) {
    KT_FOR_EACH_ISA(isa, ctx1, 1) {
        kern_ctx *ctx2 = kt_ctx(2, isa);
        bcase c = bc_base(333, 257);
        size_t nb = (size_t)(333 * 257) * 4 + 4;
        void *dx1 = malloc(nb), *dx2 = malloc(nb), *dw1 = malloc(257 * 4), *dw2 = malloc(257 * 4);
        c.weight = c.bias = c.dw = c.db = 1;
        c.act = KERN_ACT_GELU;
        kt_context("%s", bc_str(&c, isa));
        run_bwd(ctx1, &c, dx1, dw1);
        run_bwd(ctx2, &c, dx2, dw2);
        kt_assert_bytes_equal("dx 1 vs 2 threads", dx1, dx2, nb);
        kt_assert_bytes_equal("dweight 1 vs 2 threads", dw1, dw2, 257 * 4);
        free(dx1); free(dx2); free(dw1); free(dw2);
    }
}

/* Small problems run on the calling thread (KERN_NORM_SERIAL_STEPS): a
 * user pool sees one task; a big one is still split. */
static int64_t small_max_tasks;
static void small_pool(void *user, int64_t n_tasks, kern_task_fn fn, void *arg) {
    int64_t i;
    (void)user;
    if (n_tasks > small_max_tasks) small_max_tasks = n_tasks;
    for (i = 0; i < n_tasks; i++) fn(arg, i, (int)(i & 1));
}
KT_TEST(small_problems_inline) {
    static const int64_t shapes[4][2] = {{1, 4096}, {8, 1024}, {3, 4000}, {512, 1024}};
    kern_ctx_params cp = {0};
    kern_ctx *ctx = NULL;
    int si;
    cp.n_threads = 2;
    cp.parallel_for = small_pool;
    KT_OK(kern_ctx_create(&cp, &ctx));
    if (!ctx) return;
    for (si = 0; si < 4; si++) {
        const int64_t R = shapes[si][0], H = shapes[si][1];
        const int big = R * H * 4 >= KERN_NORM_SERIAL_STEPS * 8;
        float *x = (float *)calloc((size_t)(R * H), 4), *y = (float *)calloc((size_t)(R * H), 4);
        float *w = (float *)calloc((size_t)H, 4), *dw = (float *)calloc((size_t)H, 4);
        float *m = (float *)calloc((size_t)R, 4), *rs = (float *)calloc((size_t)R, 4);
        kern_tensor X = kern_tensor_2d(x, KERN_F32, R, H), Y = kern_tensor_2d(y, KERN_F32, R, H);
        kern_tensor W = kern_tensor_1d(w, KERN_F32, H), DW = kern_tensor_1d(dw, KERN_F32, H);
        kern_tensor M = kern_tensor_1d(m, KERN_F32, R), S = kern_tensor_1d(rs, KERN_F32, R);
        kern_norm_params fp = {0};
        kern_norm_backward_params bp = {0};
        int64_t i;
        for (i = 0; i < R * H; i++) x[i] = (float)(i % 13) - 6.0f;
        for (i = 0; i < H; i++) w[i] = 1.0f;
        kt_context("R=%lld H=%lld", (long long)R, (long long)H);
        fp.weight = &W; fp.mean = &M; fp.rstd = &S; fp.act = KERN_ACT_GELU;
        small_max_tasks = 0;
        KT_OK(kern_norm(ctx, &X, &Y, &fp));
        KT_CHECK(big ? small_max_tasks > 1 : small_max_tasks == 1, "forward: %lld tasks",
                 (long long)small_max_tasks);
        bp.weight = &W; bp.mean = &M; bp.rstd = &S; bp.dweight = &DW;
        small_max_tasks = 0;
        KT_OK(kern_norm_backward(ctx, &X, &X, &Y, &bp));
        KT_CHECK(big ? small_max_tasks > 1 : small_max_tasks == 1, "backward: %lld tasks",
                 (long long)small_max_tasks);
        small_max_tasks = 0;
        KT_OK(kern_gelu(ctx, &X, &Y, KERN_ACT_GELU));
        KT_CHECK(big ? small_max_tasks > 1 : small_max_tasks == 1, "gelu: %lld tasks",
                 (long long)small_max_tasks);
        free(x); free(y); free(w); free(dw); free(m); free(rs);
    }
    kern_ctx_destroy(ctx);
}

/* dbias without dweight (the partials of each are their own). */
KT_TEST(backward_dbias_alone) {
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        bcase c = bc_base(70, 100);
        c.weight = c.bias = c.db = 1;
        c.act = KERN_ACT_GELU;
        kt_context("%s", bc_str(&c, isa));
        if (!run_bwd(ctx, &c, NULL, NULL)) return;
        c.act = KERN_ACT_SILU;
        c.saved = 1;
        if (!run_bwd(ctx, &c, NULL, NULL)) return;
    }
}

/* ------------------------------------------ fused == unfused, bit for bit */

/* kern_norm with an activation gives the bits of kern_norm without it (f32
 * output) followed by kern_activation (and kern_gelu for the GELUs): the
 * fused pass applies the shared kern__v_act to the same f32 value. Inputs
 * reach below -3 (GELU's tail form) and far past the tails of every act,
 * rows have vector tails, outputs are f32 / bf16 / f16. */
static void fused_unfused_case(kern_ctx *ctx, kern_isa isa, kern_act act, kern_dtype odt, int64_t R,
                               int64_t H, int rms) {
    kt_rng g = kt_rng_make((uint64_t)(R * 1000 + H + act));
    size_t n = (size_t)(R * H);
    float *x = (float *)kt_alloc(4 * n, "x"), *r = (float *)kt_alloc(4 * n, "r");
    float *w = (float *)kt_alloc(4 * (size_t)H, "w"), *b = (float *)kt_alloc(4 * (size_t)H, "b");
    float *t = (float *)kt_alloc(4 * n, "t");
    void *o1 = kt_alloc(4 * n, "fused"), *o2 = kt_alloc(4 * n, "unfused");
    kern_tensor xt = kern_tensor_2d(x, KERN_F32, R, H), rt = kern_tensor_2d(r, KERN_F32, R, H);
    kern_tensor wt = kern_tensor_1d(w, KERN_F32, H), bt = kern_tensor_1d(b, KERN_F32, H);
    kern_tensor tt = kern_tensor_2d(t, KERN_F32, R, H);
    kern_tensor o1t = kern_tensor_2d(o1, odt, R, H), o2t = kern_tensor_2d(o2, odt, R, H);
    kern_norm_params p;
    size_t ob = n * kern_dtype_size(odt);
    int64_t j;
    kt_fill_normal(&g, x, KERN_F32, R * H, 1.0);
    kt_fill_normal(&g, r, KERN_F32, R * H, 1.0);
    for (j = 0; j < H; j++) {
        w[j] = (float)(3.0 * kt_normal(&g));
        b[j] = (float)(2.0 * kt_normal(&g));
    }
    memset(&p, 0, sizeof p);
    p.norm = rms ? KERN_NORM_RMS : KERN_NORM_LAYER;
    p.residual = &rt;
    p.weight = &wt;
    p.bias = &bt;
    kt_context("[%s act=%s out=%s R=%lld H=%lld %s]", kern_isa_name(isa), kern_act_name(act),
               kern_dtype_name(odt), (long long)R, (long long)H, rms ? "rms" : "ln");
    p.act = act;
    KT_OK(kern_norm(ctx, &xt, &o1t, &p));
    p.act = KERN_ACT_NONE;
    KT_OK(kern_norm(ctx, &xt, &tt, &p));
    KT_OK(kern_activation(ctx, &tt, NULL, &o2t, act));
    kt_assert_bytes_equal("kern_norm(act) vs kern_norm + kern_activation", o1, o2, ob);
    if (act == KERN_ACT_GELU || act == KERN_ACT_GELU_TANH) {
        kt_poison(o2, ob);
        KT_OK(kern_gelu(ctx, &tt, &o2t, act));
        kt_assert_bytes_equal("kern_norm(act) vs kern_norm + kern_gelu", o1, o2, ob);
    }
    kt_free(x); kt_free(r); kt_free(w); kt_free(b); kt_free(t); kt_free(o1); kt_free(o2);
}
KT_TEST(fused_equals_unfused) {
    static const kern_dtype odts[3] = {KERN_F32, KERN_BF16, KERN_F16};
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        int a, d;
        for (a = 0; a < 5; a++)
            for (d = 0; d < 3; d++) {
                fused_unfused_case(ctx, isa, kActs[a], odts[d], 9, 67, a & 1);
                fused_unfused_case(ctx, isa, kActs[a], odts[d], 3, 1000, 0);
            }
    }
}

/* Finite differences on tiny shapes: (a) central differences of the
 * double reference forward (step 1e-5) must match our backward within the
 * f32 tolerance; (b) central differences through our own f32 forward
 * (step 1e-2, ~1e-3 accurate) within the bf16 tolerance. The loss is
 * L = sum(out * dy) + sum(residual_out * dres). */
static double fd_loss(const double *x, const double *w, const double *b, const double *dy,
                      int64_t R, int64_t H, int rms, int act) {
    double L = 0, m, rs, *o = (double *)malloc(sizeof(double) * (size_t)H);
    int64_t r, j;
    for (r = 0; r < R; r++) {
        ref_row(x + r * H, H, rms, 1e-5, w, b, act, o, &m, &rs);
        for (j = 0; j < H; j++) L += o[j] * dy[r * H + j];
    }
    free(o);
    return L;
}
KT_TEST(backward_finite_differences) {
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        int cfg;
        for (cfg = 0; cfg < 5; cfg++) {
            int64_t R = 2, H = 5, i, j;
            int rms = cfg & 1;
            int act = cfg == 4 ? KERN_ACT_SILU : cfg == 3 ? KERN_ACT_GELU_TANH : cfg >= 1 ? KERN_ACT_GELU : 0;
            float xf[10], dyf[10], wf[5], bf[5], dxf[10], dwf[5], dbf[5], of[10];
            double x[10], dy[10], w[5], b[5];
            kern_tensor xt = kern_tensor_2d(xf, KERN_F32, R, H), dyt = kern_tensor_2d(dyf, KERN_F32, R, H);
            kern_tensor dxt = kern_tensor_2d(dxf, KERN_F32, R, H), ot = kern_tensor_2d(of, KERN_F32, R, H);
            kern_tensor wt = kern_tensor_1d(wf, KERN_F32, H), bt = kern_tensor_1d(bf, KERN_F32, H);
            kern_tensor dwt = kern_tensor_1d(dwf, KERN_F32, H), dbt = kern_tensor_1d(dbf, KERN_F32, H);
            kern_norm_backward_params p;
            kern_norm_params fp;
            kt_rng g = kt_rng_make(100 + (uint64_t)cfg);
            for (i = 0; i < R * H; i++) {
                xf[i] = (float)kt_normal(&g); x[i] = xf[i];
                dyf[i] = (float)kt_normal(&g); dy[i] = dyf[i];
            }
            for (j = 0; j < H; j++) {
                wf[j] = (float)(1 + 0.5 * kt_normal(&g)); w[j] = wf[j];
                bf[j] = (float)(0.5 * kt_normal(&g)); b[j] = bf[j];
            }
            memset(&p, 0, sizeof p);
            p.norm = rms ? KERN_NORM_RMS : KERN_NORM_LAYER;
            p.act = (kern_act)act;
            p.weight = &wt; p.bias = &bt; p.dweight = &dwt; p.dbias = &dbt;
            KT_OK(kern_norm_backward(ctx, &dyt, &xt, &dxt, &p));
            memset(&fp, 0, sizeof fp);
            fp.norm = p.norm;
            fp.act = p.act;
            fp.weight = &wt;
            fp.bias = &bt;
            kt_context("[%s cfg=%d]", kern_isa_name(isa), cfg);
            for (i = 0; i < R * H + 2 * H; i++) {
                double *v = i < R * H ? &x[i] : i < R * H + H ? &w[i - R * H] : &b[i - R * H - H];
                float *vf = i < R * H ? &xf[i] : i < R * H + H ? &wf[i - R * H] : &bf[i - R * H - H];
                double got = i < R * H ? dxf[i] : i < R * H + H ? dwf[i - R * H] : dbf[i - R * H - H];
                double s = *v, fd, fd32, Lp, Lm;
                float sf = *vf, gotf;
                *v = s + 1e-5;
                Lp = fd_loss(x, w, b, dy, R, H, rms, act);
                *v = s - 1e-5;
                Lm = fd_loss(x, w, b, dy, R, H, rms, act);
                *v = s;
                fd = (Lp - Lm) / 2e-5;
                gotf = (float)got;
                kt_assert_close("grad vs FD(double reference)", &gotf, KERN_F32, &fd, 1,
                                kt_tol_scaled(KERN_F32, 10.0));
                /* through our f32 forward */
                {
                    double l2[2];
                    int sgn;
                    for (sgn = 0; sgn < 2; sgn++) {
                        int64_t k;
                        *vf = sf + (sgn ? -1e-2f : 1e-2f);
                        KT_OK(kern_norm(ctx, &xt, &ot, &fp));
                        l2[sgn] = 0;
                        for (k = 0; k < R * H; k++) l2[sgn] += (double)of[k] * dyf[k];
                    }
                    *vf = sf;
                    fd32 = (l2[0] - l2[1]) / (double)((sf + 1e-2f) - (sf - 1e-2f));
                    kt_assert_close("grad vs FD(our f32 forward)", &gotf, KERN_F32, &fd32, 1,
                                    kt_tol(KERN_BF16));
                }
            }
        }
    }
}

/* ------------------------------------------------ elementwise tests */

KT_TEST(gelu_ops) {
    static const int64_t shapes[][2] = {{1, 1}, {3, 17}, {7, 100}, {2, 40000}, {33, 513}};
    kt_rng g = kt_rng_make(4);
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        size_t si;
        int k;
        for (si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (k = 0; k < 8; k++) {
                int64_t R = shapes[si][0], H = shapes[si][1], r, j;
                kern_dtype adt = kDT[kt_randint(&g, 0, 3)], bdt = kDT[kt_randint(&g, 0, 3)];
                kern_dtype odt = kDT[kt_randint(&g, 0, 3)];
                int op = k & 3, approx = (k >> 2) & 1; /* 0 gelu, 1 bias_gelu, 2 gelu_backward, 3 add */
                int64_t pad = (int64_t)kt_randint(&g, 0, 3);
                tbuf a = tb_make(adt, R, H, H + pad, "a"), b = tb_make(bdt, R, H, H, "b");
                tbuf o = tb_make(odt, R, H, H + 2 * pad, "o");
                float *bias = (float *)kt_alloc(sizeof(float) * (size_t)H, "bias");
                double *want = (double *)malloc(sizeof(double) * (size_t)(R * H));
                kern_tensor at = tb_t(&a), bt = tb_t(&b), ot = tb_t(&o), biast = kern_tensor_1d(bias, KERN_F32, H);
                tb_fill(&g, &a, 3.0, 0.0);
                tb_fill(&g, &b, 3.0, 0.0);
                for (j = 0; j < H; j++) bias[j] = (float)kt_normal(&g);
                for (r = 0; r < R; r++)
                    for (j = 0; j < H; j++) {
                        double va = tb_get(&a, r, j), vb = tb_get(&b, r, j);
                        double *wv = &want[r * H + j];
                        int act = approx ? KERN_ACT_GELU_TANH : KERN_ACT_GELU;
                        if (op == 0) *wv = act_ref(va, act);
                        else if (op == 1) *wv = act_ref((double)(float)(va + bias[j]), act);
                        else if (op == 2) *wv = va * act_grad_ref(vb, act);
                        else *wv = (float)(va + vb);
                    }
                kt_context("[%s op=%d approx=%d R=%lld H=%lld a=%s b=%s o=%s]", kern_isa_name(isa), op, approx,
                           (long long)R, (long long)H, kern_dtype_name(adt), kern_dtype_name(bdt), kern_dtype_name(odt));
                if (op == 0) KT_OK(kern_gelu(ctx, &at, &ot, approx ? KERN_ACT_GELU_TANH : KERN_ACT_GELU));
                else if (op == 1) KT_OK(kern_bias_gelu(ctx, &at, &biast, &ot, approx ? KERN_ACT_GELU_TANH : KERN_ACT_GELU));
                else if (op == 2) KT_OK(kern_gelu_backward(ctx, &at, &bt, &ot, approx ? KERN_ACT_GELU_TANH : KERN_ACT_GELU));
                else KT_OK(kern_add(ctx, &at, &bt, &ot));
                tb_check("elementwise out", &o, want, kt_tol_scaled(odt, odt == KERN_F32 ? 2.0 : 1.0));
                kt_free(a.p); kt_free(b.p); kt_free(o.p); kt_free(bias);
                free(want);
            }
        {
            /* in place, bias_gelu without bias == gelu */
            int64_t n = 1000, j;
            float *x = (float *)kt_alloc(4 * (size_t)n, "x"), *y = (float *)kt_alloc(4 * (size_t)n, "y");
            kern_tensor xt = kern_tensor_1d(x, KERN_F32, n), yt = kern_tensor_1d(y, KERN_F32, n);
            for (j = 0; j < n; j++) x[j] = (float)(4 * kt_normal(&g));
            KT_OK(kern_gelu(ctx, &xt, &yt, KERN_ACT_GELU));
            KT_OK(kern_bias_gelu(ctx, &xt, NULL, &xt, KERN_ACT_GELU));
            kt_assert_bytes_equal("gelu in place", x, y, 4 * (size_t)n);
            kt_free(x); kt_free(y);
        }
    }
}

/* GELU special values: +-0, +-Inf, NaN, large negative (no spurious NaN). */
KT_TEST(gelu_special_values) {
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        float in[8], out[8], gb[8], one[8];
        int k, approx;
        kern_tensor it = kern_tensor_1d(in, KERN_F32, 8), ot = kern_tensor_1d(out, KERN_F32, 8);
        kern_tensor gt = kern_tensor_1d(gb, KERN_F32, 8), onet = kern_tensor_1d(one, KERN_F32, 8);
        in[0] = 0.0f; in[1] = -0.0f; in[2] = INFINITY; in[3] = -INFINITY; in[4] = NAN;
        in[5] = -30.0f; in[6] = -100.0f; in[7] = 30.0f;
        for (k = 0; k < 8; k++) one[k] = 1.0f;
        for (approx = 0; approx < 2; approx++) {
            KT_OK(kern_gelu(ctx, &it, &ot, approx ? KERN_ACT_GELU_TANH : KERN_ACT_GELU));
            KT_OK(kern_gelu_backward(ctx, &onet, &it, &gt, approx ? KERN_ACT_GELU_TANH : KERN_ACT_GELU));
            /* Infinities follow the formula as in PyTorch: GELU(-Inf) and
             * gelu'(+-Inf) are NaN */
            KT_CHECK(out[0] == 0 && out[1] == 0 && out[2] == INFINITY && isnan(out[4]) &&
                         fabsf(out[5]) < 1e-30f && fabsf(out[6]) < 1e-30f && isnan(out[3]) && out[7] == 30.0f,
                     "%s approx=%d: %g %g %g %g %g %g %g %g", kern_isa_name(isa), approx, out[0], out[1],
                     out[2], out[3], out[4], out[5], out[6], out[7]);
            KT_CHECK(gb[0] == 0.5f && gb[1] == 0.5f && isnan(gb[4]) && isnan(gb[2]) && isnan(gb[3]) && fabsf(gb[5]) < 1e-30f &&
                         fabsf(gb[6]) < 1e-30f && gb[7] == 1.0f,
                     "%s approx=%d grad: %g %g %g %g %g %g %g %g", kern_isa_name(isa), approx, gb[0], gb[1],
                     gb[2], gb[3], gb[4], gb[5], gb[6], gb[7]);
        }
    }
}

/* kern_activation / kern_activation_backward: every kern_act, dtype mixes,
 * a bias of each dtype or none, against the double references. */
KT_TEST(activation_ops) {
    static const int64_t shapes[][2] = {{1, 1}, {3, 17}, {7, 100}, {2, 20000}, {5, 513}};
    kt_rng g = kt_rng_make(6);
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        size_t si;
        int a, bwd;
        for (si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (a = 0; a < 5; a++)
                for (bwd = 0; bwd < 2; bwd++) {
                    int64_t R = shapes[si][0], H = shapes[si][1], r, j;
                    kern_act act = kActs[a];
                    kern_dtype xdt = kDT[kt_randint(&g, 0, 3)], ddt = kDT[kt_randint(&g, 0, 3)];
                    kern_dtype odt = kDT[kt_randint(&g, 0, 3)], bdt = kDT[kt_randint(&g, 0, 3)];
                    int use_bias = !bwd && kt_randint(&g, 0, 2);
                    tbuf x = tb_make(xdt, R, H, H + kt_randint(&g, 0, 4), "x"), d = tb_make(ddt, R, H, H, "dout");
                    tbuf o = tb_make(odt, R, H, H + kt_randint(&g, 0, 4), "out");
                    void *bias = kt_alloc((size_t)H * 4, "bias");
                    double *want = (double *)malloc(sizeof(double) * (size_t)(R * H));
                    kern_tensor xt = tb_t(&x), dt = tb_t(&d), ot = tb_t(&o), bt = kern_tensor_1d(bias, bdt, H);
                    tb_fill(&g, &x, 3.0, 0.0);
                    tb_fill(&g, &d, 1.0, 0.0);
                    for (j = 0; j < H; j++) kt_set(bias, bdt, j, kt_normal(&g));
                    for (r = 0; r < R; r++)
                        for (j = 0; j < H; j++) {
                            double v = tb_get(&x, r, j);
                            if (bwd) want[r * H + j] = tb_get(&d, r, j) * act_grad_ref(v, act);
                            else want[r * H + j] = act_ref(use_bias ? (double)(float)(v + kt_get(bias, bdt, j)) : v, act);
                        }
                    kt_context("[%s %s act=%s R=%lld H=%lld x=%s dout=%s out=%s bias=%s]", kern_isa_name(isa),
                               bwd ? "backward" : "forward", kern_act_name(act), (long long)R, (long long)H,
                               kern_dtype_name(xdt), kern_dtype_name(ddt), kern_dtype_name(odt),
                               use_bias ? kern_dtype_name(bdt) : "none");
                    if (bwd) KT_OK(kern_activation_backward(ctx, &dt, &xt, &ot, act));
                    else KT_OK(kern_activation(ctx, &xt, use_bias ? &bt : NULL, &ot, act));
                    tb_check("activation out", &o, want, kt_tol_scaled(odt, odt == KERN_F32 ? 2.0 : 1.0));
                    kt_free(x.p); kt_free(d.p); kt_free(o.p); kt_free(bias);
                    free(want);
                }
        {
            /* in place; NONE is a copy; the GELU ops are the activation op */
            int64_t n = 999, j;
            float *x = (float *)kt_alloc(4 * (size_t)n, "x"), *y = (float *)kt_alloc(4 * (size_t)n, "y");
            float *z = (float *)kt_alloc(4 * (size_t)n, "z");
            kern_tensor xt = kern_tensor_1d(x, KERN_F32, n), yt = kern_tensor_1d(y, KERN_F32, n);
            kern_tensor zt = kern_tensor_1d(z, KERN_F32, n);
            for (j = 0; j < n; j++) x[j] = (float)(4 * kt_normal(&g));
            KT_OK(kern_activation(ctx, &xt, NULL, &yt, KERN_ACT_NONE));
            kt_assert_bytes_equal("activation none = copy", x, y, 4 * (size_t)n);
            KT_OK(kern_activation_backward(ctx, &xt, &yt, &zt, KERN_ACT_NONE));
            kt_assert_bytes_equal("activation_backward none = dout", x, z, 4 * (size_t)n);
            KT_OK(kern_gelu_backward(ctx, &xt, &yt, &zt, KERN_ACT_GELU));
            KT_OK(kern_activation_backward(ctx, &xt, &yt, &yt, KERN_ACT_GELU));
            kt_assert_bytes_equal("gelu_backward = activation_backward(gelu)", z, y, 4 * (size_t)n);
            KT_OK(kern_gelu(ctx, &xt, &yt, KERN_ACT_GELU_TANH));
            KT_OK(kern_activation(ctx, &xt, NULL, &xt, KERN_ACT_GELU_TANH));
            kt_assert_bytes_equal("activation in place = gelu", x, y, 4 * (size_t)n);
            kt_free(x); kt_free(y); kt_free(z);
        }
    }
}

/* Special values of the new activations: relu keeps NaN and -0, silu and
 * its gradient follow the formulas at +-Inf as PyTorch. */
KT_TEST(activation_special_values) {
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        float in[6] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -100.0f}, out[6], gr[6], one[6];
        kern_tensor it = kern_tensor_1d(in, KERN_F32, 6), ot = kern_tensor_1d(out, KERN_F32, 6);
        kern_tensor gt = kern_tensor_1d(gr, KERN_F32, 6), onet = kern_tensor_1d(one, KERN_F32, 6);
        int k;
        for (k = 0; k < 6; k++) one[k] = 1.0f;
        KT_OK(kern_activation(ctx, &it, NULL, &ot, KERN_ACT_RELU));
        KT_CHECK(out[0] == 0 && !signbit(out[0]) && out[1] == 0 && signbit(out[1]) && out[2] == INFINITY &&
                     out[3] == 0 && isnan(out[4]) && out[5] == 0,
                 "%s relu: %g %g %g %g %g %g", kern_isa_name(isa), out[0], out[1], out[2], out[3], out[4], out[5]);
        KT_OK(kern_activation_backward(ctx, &onet, &it, &gt, KERN_ACT_RELU));
        KT_CHECK(gr[0] == 0 && gr[1] == 0 && gr[2] == 1 && gr[3] == 0 && gr[5] == 0,
                 "%s relu': %g %g %g %g %g", kern_isa_name(isa), gr[0], gr[1], gr[2], gr[3], gr[5]);
        KT_OK(kern_activation(ctx, &it, NULL, &ot, KERN_ACT_SILU));
        KT_CHECK(out[0] == 0 && signbit(out[1]) && out[2] == INFINITY && isnan(out[3]) && isnan(out[4]) &&
                     out[5] <= 0 && out[5] > -1e-40f,
                 "%s silu: %g %g %g %g %g %g", kern_isa_name(isa), out[0], out[1], out[2], out[3], out[4], out[5]);
        KT_OK(kern_activation_backward(ctx, &onet, &it, &gt, KERN_ACT_SILU));
        KT_CHECK(gr[0] == 0.5f && gr[1] == 0.5f && isnan(gr[2]) && isnan(gr[3]) && isnan(gr[4]) &&
                     fabsf(gr[5]) < 1e-40f,
                 "%s silu': %g %g %g %g %g %g", kern_isa_name(isa), gr[0], gr[1], gr[2], gr[3], gr[4], gr[5]);
    }
}

/* Each ISA level the machine runs reaches its own table (norm has one
 * body per base level: VNNI / BF16 / dot levels share it). */
KT_TEST(dispatch_table_per_level) {
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        const char *want = "scalar";
        if (isa == KERN_ISA_AVX2 || isa == KERN_ISA_AVX2_VNNI) want = "avx2";
        if (isa == KERN_ISA_AVX512 || isa == KERN_ISA_AVX512_VNNI || isa == KERN_ISA_AVX512_BF16 ||
            isa == KERN_ISA_AMX)
            want = "avx512";
        if (isa == KERN_ISA_NEON || isa == KERN_ISA_NEON_DOT || isa == KERN_ISA_NEON_BF16) want = "neon";
        KT_CHECK(kern_ctx_isa(ctx) == isa, "context level %s, asked %s", kern_isa_name(kern_ctx_isa(ctx)),
                 kern_isa_name(isa));
        KT_CHECK(!strcmp(kern__norm_table_name(kern_ctx_isa(ctx)), want), "%s: table %s, want %s",
                 kern_isa_name(isa), kern__norm_table_name(kern_ctx_isa(ctx)), want);
    }
}

/* --------------------------------------------------------- bad input */

KT_TEST(errors) {
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    float x[24], r[24], o[24], ro[24], w[6], b[6], mean[4], rstd[4], big[64];
    int32_t xi[24];
    kern_tensor xt = kern_tensor_2d(x, KERN_F32, 4, 6), ot = kern_tensor_2d(o, KERN_F32, 4, 6);
    kern_tensor rt = kern_tensor_2d(r, KERN_F32, 4, 6), rot = kern_tensor_2d(ro, KERN_F32, 4, 6);
    kern_tensor wt = kern_tensor_1d(w, KERN_F32, 6), bt = kern_tensor_1d(b, KERN_F32, 6);
    kern_tensor mt = kern_tensor_1d(mean, KERN_F32, 4), st = kern_tensor_1d(rstd, KERN_F32, 4);
    kern_tensor bad;
    kern_norm_params p;
    kern_norm_backward_params bp;
    unsigned char snap[4][96];
    int i;
    for (i = 0; i < 24; i++) x[i] = r[i] = (float)i;
    for (i = 0; i < 6; i++) w[i] = b[i] = 1.0f;
#define SNAP()                                                                                     \
    do {                                                                                           \
        kt_poison(o, sizeof o); kt_poison(ro, sizeof ro);                                          \
        kt_poison(mean, sizeof mean); kt_poison(rstd, sizeof rstd);                                \
        memcpy(snap[0], o, 96); memcpy(snap[1], ro, 96);                                           \
        memcpy(snap[2], mean, 16); memcpy(snap[3], rstd, 16);                                      \
    } while (0)
#define UNTOUCHED()                                                                                \
    KT_CHECK(!memcmp(snap[0], o, 96) && !memcmp(snap[1], ro, 96) && !memcmp(snap[2], mean, 16) && \
                 !memcmp(snap[3], rstd, 16),                                                       \
             "outputs written on error")
#define FULLP()                                                                                    \
    do {                                                                                           \
        memset(&p, 0, sizeof p);                                                                   \
        p.residual = &rt; p.residual_out = &rot; p.weight = &wt; p.bias = &bt;                      \
        p.mean = &mt; p.rstd = &st;                                                                \
    } while (0)
    FULLP(); SNAP();
    KT_ERROR(kern_norm(ctx, NULL, &ot, &p), KERN_ERR_ARG, "kern_norm: x is NULL");
    KT_ERROR(kern_norm(ctx, &xt, NULL, &p), KERN_ERR_ARG, "out is NULL");
    UNTOUCHED();
    /* weight length */
    bad = kern_tensor_1d(w, KERN_F32, 5);
    FULLP(); p.weight = &bad; SNAP();
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "weight has shape [5] but must be [6]");
    UNTOUCHED();
    /* bias shape [1,6] */
    bad = kern_tensor_2d(b, KERN_F32, 1, 6);
    FULLP(); p.bias = &bad; SNAP();
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "bias has shape [1,6]");
    UNTOUCHED();
    /* residual shape */
    bad = kern_tensor_2d(r, KERN_F32, 3, 6);
    FULLP(); p.residual = &bad; SNAP();
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "residual.shape[0]=3 but x.shape[0]=4");
    UNTOUCHED();
    bad = kern_tensor_2d(r, KERN_F32, 4, 5);
    FULLP(); p.residual = &bad; SNAP();
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "residual.shape[1]=5 but x.shape[1]=6");
    UNTOUCHED();
    /* rows mismatch between x and out */
    bad = kern_tensor_2d(o, KERN_F32, 3, 6);
    FULLP(); SNAP();
    KT_ERROR(kern_norm(ctx, &xt, &bad, &p), KERN_ERR_SHAPE, "out.shape[0]=3 but x.shape[0]=4");
    UNTOUCHED();
    bad = kern_tensor_1d(o, KERN_F32, 24);
    KT_ERROR(kern_norm(ctx, &xt, &bad, &p), KERN_ERR_SHAPE, "out has 1 dims but x has 2");
    UNTOUCHED();
    /* residual_out shape */
    bad = kern_tensor_2d(ro, KERN_F32, 4, 4);
    FULLP(); p.residual_out = &bad; SNAP();
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "residual_out.shape[1]=4");
    UNTOUCHED();
    /* eps */
    FULLP(); p.eps = -1e-3f; SNAP();
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_ARG, "eps=-0.001 must be finite and >= 0");
    FULLP(); p.eps = NAN;
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_ARG, "eps=nan");
    FULLP(); p.eps = INFINITY;
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_ARG, "eps=inf");
    FULLP(); p.eps = -1e-3f; p.eps_set = 1;
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_ARG, "eps=-0.001 must be finite and >= 0");
    UNTOUCHED();
    /* RMSNorm: bias supported, mean rejected */
    FULLP(); p.norm = KERN_NORM_RMS; SNAP();
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_ARG, "RMSNorm has no mean");
    UNTOUCHED();
    p.mean = NULL;
    KT_OK(kern_norm(ctx, &xt, &ot, &p));
    /* every kern_act is supported */
    FULLP(); p.mean = NULL; p.rstd = NULL; p.act = KERN_ACT_RELU;
    KT_OK(kern_norm(ctx, &xt, &ot, &p));
    p.act = KERN_ACT_SILU;
    KT_OK(kern_norm(ctx, &xt, &ot, &p));
    /* enums */
    FULLP(); p.act = (kern_act)7; SNAP();
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_ARG, "params.act=7");
    FULLP(); p.norm = (kern_norm_kind)-1;
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_ARG, "params.norm=-1");
    UNTOUCHED();
    /* dtypes */
    bad = kern_tensor_2d(xi, KERN_I32, 4, 6);
    FULLP(); SNAP();
    KT_ERROR(kern_norm(ctx, &bad, &ot, &p), KERN_ERR_DTYPE, "x.dtype=i32");
    bad = kern_tensor_1d(mean, KERN_F16, 4);
    p.mean = &bad;
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_DTYPE, "mean.dtype=f16; statistics are f32");
    bad = kern_tensor_1d(mean, KERN_F32, 3);
    p.mean = &bad;
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_SHAPE, "mean has 3 elements but x has 4 rows");
    UNTOUCHED();
    /* layouts */
    bad = kern_tensor_2d(big, KERN_F32, 4, 6);
    bad.stride[1] = 2;
    bad.stride[0] = 13;
    FULLP(); SNAP();
    KT_ERROR(kern_norm(ctx, &bad, &ot, &p), KERN_ERR_LAYOUT, "x.stride[1]=2; the last dim must have unit stride");
    bad = kern_tensor_1d(big, KERN_F32, 6);
    bad.stride[0] = 2;
    p.weight = &bad;
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_LAYOUT, "weight.stride[0]=2");
    UNTOUCHED();
    /* aliasing: out overlapping x partially, outputs overlapping each other */
    bad = kern_tensor_2d(x + 1, KERN_F32, 4, 5);
    FULLP(); SNAP();
    {
        kern_tensor x5 = kern_tensor_2d(x, KERN_F32, 4, 5), r5 = kern_tensor_2d(r, KERN_F32, 4, 5);
        kern_tensor ro5 = kern_tensor_2d(ro, KERN_F32, 4, 5);
        kern_tensor w5 = kern_tensor_1d(w, KERN_F32, 5), b5 = kern_tensor_1d(b, KERN_F32, 5);
        p.residual = &r5; p.residual_out = &ro5; p.weight = &w5; p.bias = &b5;
        KT_ERROR(kern_norm(ctx, &x5, &bad, &p), KERN_ERR_ARG, "out overlaps x");
    }
    FULLP(); p.residual_out = &ot;
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_ARG, "outputs out and residual_out overlap");
    bad = kern_tensor_1d(o, KERN_F32, 4);
    FULLP(); p.rstd = &bad;
    KT_ERROR(kern_norm(ctx, &xt, &ot, &p), KERN_ERR_ARG, "outputs out and rstd overlap");
    UNTOUCHED();

    /* backward */
    memset(&bp, 0, sizeof bp);
    bp.dweight = &wt;
    SNAP();
    KT_ERROR(kern_norm_backward(ctx, &xt, &rt, &ot, &bp), KERN_ERR_ARG, "dweight was given but weight is NULL");
    memset(&bp, 0, sizeof bp);
    bp.mean = &mt;
    KT_ERROR(kern_norm_backward(ctx, &xt, &rt, &ot, &bp), KERN_ERR_ARG, "needs both mean and rstd");
    bp.norm = KERN_NORM_RMS;
    KT_ERROR(kern_norm_backward(ctx, &xt, &rt, &ot, &bp), KERN_ERR_ARG, "RMSNorm has no mean");
    memset(&bp, 0, sizeof bp);
    bad = kern_tensor_2d(o, KERN_F32, 4, 5);
    KT_ERROR(kern_norm_backward(ctx, &xt, &rt, &bad, &bp), KERN_ERR_SHAPE, "dx.shape[1]=5 but x.shape[1]=6");
    bp.eps = -1.0f;
    KT_ERROR(kern_norm_backward(ctx, &xt, &rt, &ot, &bp), KERN_ERR_ARG, "kern_norm_backward: eps=-1");
    memset(&bp, 0, sizeof bp);
    bad = kern_tensor_1d(w, KERN_F32, 7);
    bp.weight = &bad;
    KT_ERROR(kern_norm_backward(ctx, &xt, &rt, &ot, &bp), KERN_ERR_SHAPE, "weight has shape [7] but must be [6]");
    UNTOUCHED();

    /* elementwise */
    SNAP();
    bad = kern_tensor_2d(o, KERN_F32, 4, 5);
    KT_ERROR(kern_gelu(ctx, &xt, &bad, KERN_ACT_GELU), KERN_ERR_SHAPE, "kern_gelu: out.shape[1]=5 but x.shape[1]=6");
    KT_ERROR(kern_gelu(ctx, &xt, &ot, KERN_ACT_RELU), KERN_ERR_ARG, "act=3 (relu) must be KERN_ACT_GELU or KERN_ACT_GELU_TANH");
    KT_ERROR(kern_gelu(ctx, &xt, &ot, KERN_ACT_NONE), KERN_ERR_ARG, "act=0 (none)");
    bad = kern_tensor_1d(b, KERN_F32, 5);
    KT_ERROR(kern_bias_gelu(ctx, &xt, &bad, &ot, KERN_ACT_GELU), KERN_ERR_SHAPE, "kern_bias_gelu: bias has shape [5]");
    bad = kern_tensor_2d(r, KERN_F32, 4, 5);
    KT_ERROR(kern_gelu_backward(ctx, &xt, &bad, &ot, KERN_ACT_GELU), KERN_ERR_SHAPE, "x.shape[1]=5 but dout.shape[1]=6");
    KT_ERROR(kern_add(ctx, &xt, NULL, &ot), KERN_ERR_ARG, "kern_add: b is NULL");
    KT_ERROR(kern_activation(ctx, NULL, NULL, &ot, KERN_ACT_RELU), KERN_ERR_ARG, "kern_activation: x is NULL");
    KT_ERROR(kern_activation(ctx, &xt, NULL, &ot, (kern_act)7), KERN_ERR_ARG, "kern_activation: act=7 is not a kern_act");
    bad = kern_tensor_1d(b, KERN_F32, 5);
    KT_ERROR(kern_activation(ctx, &xt, &bad, &ot, KERN_ACT_SILU), KERN_ERR_SHAPE, "kern_activation: bias has shape [5]");
    bad = kern_tensor_2d(r, KERN_F32, 4, 5);
    KT_ERROR(kern_activation_backward(ctx, &xt, &bad, &ot, KERN_ACT_RELU), KERN_ERR_SHAPE,
             "kern_activation_backward: x.shape[1]=5 but dout.shape[1]=6");
    KT_ERROR(kern_activation_backward(ctx, &xt, &rt, &ot, (kern_act)-1), KERN_ERR_ARG, "act=-1 is not a kern_act");
    UNTOUCHED();
#undef SNAP
#undef UNTOUCHED
#undef FULLP
}

/* Found by fuzz_norm (inputs in tests/fuzz/corpus/norm). */
KT_TEST(norm_fuzz_findings) {
    /* dbias without dweight: the row kernels wrote dweight partials
     * through a NULL pointer (segfault on every ISA) */
    {
        float x[48], dy[48], dx[48], b[24], db1[24], db2[24], dw[24], ones[24];
        int i;
        KT_FOR_EACH_ISA(isa, ctx, 2) {
            kern_tensor tx = kern_tensor_2d(x, KERN_F32, 2, 24), tdy = kern_tensor_2d(dy, KERN_F32, 2, 24);
            kern_tensor tdx = kern_tensor_2d(dx, KERN_F32, 2, 24), tb = kern_tensor_1d(b, KERN_F32, 24);
            kern_tensor tdb = kern_tensor_1d(db1, KERN_F32, 24), tdw = kern_tensor_1d(dw, KERN_F32, 24);
            kern_tensor tw = kern_tensor_1d(ones, KERN_F32, 24);
            kern_norm_backward_params p;
            for (i = 0; i < 48; i++) { x[i] = (float)(i % 7) - 3; dy[i] = 0.5f * (float)(i % 3); }
            for (i = 0; i < 24; i++) b[i] = 0.1f * (float)i;
            memset(&p, 0, sizeof p);
            p.bias = &tb;
            p.dbias = &tdb;
            p.act = KERN_ACT_GELU;
            kt_context("%s", kern_isa_name(isa));
            KT_OK(kern_norm_backward(ctx, &tdy, &tx, &tdx, &p));
            /* the same dbias with a weight of ones and dweight requested */
            for (i = 0; i < 24; i++) ones[i] = 1.0f;
            p.weight = &tw;
            p.dweight = &tdw;
            tdb.data = db2;
            KT_OK(kern_norm_backward(ctx, &tdy, &tx, &tdx, &p));
            kt_assert_bytes_equal("dbias alone vs with dweight", db1, db2, sizeof db1);
        }
    }
    /* an output whose rows overlap (row stride 0) kept only the last row */
    {
        float x[2] = {1, 2}, o[1] = {7};
        int64_t sh[2] = {2, 1}, st0[2] = {0, 0};
        kern_tensor tx = kern_tensor_2d(x, KERN_F32, 2, 1), to;
        kern_norm_params p;
        memset(&p, 0, sizeof p);
        p.norm = KERN_NORM_RMS;
        KT_OK(kern_tensor_init_strided(&to, o, KERN_F32, 2, sh, st0));
        KT_ERROR(kern_norm(NULL, &tx, &to, &p), KERN_ERR_LAYOUT, "out has overlapping elements");
        KT_ERROR(kern_add(NULL, &tx, &tx, &to), KERN_ERR_LAYOUT, "out has overlapping elements");
        KT_CHECK(o[0] == 7, "out written on error");
    }
    /* H = 0 with 2^40 rows and no mean/rstd: nothing to do, at once (it
     * looped over the rows) */
    {
        int64_t sh[2] = {(int64_t)1 << 40, 0};
        kern_tensor x, out;
        kern_norm_params p;
        memset(&p, 0, sizeof p);
        KT_OK(kern_tensor_init(&x, NULL, KERN_F32, 2, sh));
        KT_OK(kern_tensor_init(&out, NULL, KERN_F32, 2, sh));
        KT_OK(kern_norm(kt_ctx(1, KERN_ISA_AUTO), &x, &out, &p));
    }
    /* no rows and a huge H: the forward's padded H overflowed, the
     * backward looped over H without dweight/dbias to zero */
    {
        int64_t sh[2] = {0, INT64_MAX - 1}, sh2[2] = {0, (int64_t)1 << 40};
        kern_tensor x, out, dy;
        kern_norm_params p;
        kern_norm_backward_params bp;
        memset(&p, 0, sizeof p);
        memset(&bp, 0, sizeof bp);
        KT_OK(kern_tensor_init(&x, NULL, KERN_F32, 2, sh));
        KT_OK(kern_tensor_init(&out, NULL, KERN_F32, 2, sh));
        KT_OK(kern_norm(kt_ctx(1, KERN_ISA_AUTO), &x, &out, &p));
        KT_OK(kern_tensor_init(&x, NULL, KERN_F32, 2, sh2));
        KT_OK(kern_tensor_init(&out, NULL, KERN_F32, 2, sh2));
        KT_OK(kern_tensor_init(&dy, NULL, KERN_F32, 2, sh2));
        KT_OK(kern_norm_backward(kt_ctx(1, KERN_ISA_AUTO), &dy, &x, &out, &bp));
    }
}

KT_MAIN()
