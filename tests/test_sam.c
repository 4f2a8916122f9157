/* test_sam.c — the SAM ViT-B pieces of issue 21 at graph level: the
 * sdpa_relpos op (SAM attention with the decomposed relative-position
 * bias, kern_sdpa's rel_pos options) built through the API and the text
 * IR, against kern_sdpa called directly (the kernel itself is tested
 * against a materializing reference in test_sdpa.c, fwd_relpos_*), and a
 * small SAM image encoder written in the text IR as models/sam.py writes
 * it (patch embedding, padded window partition, sdpa_relpos, unpartition
 * and crop, a global block) fed bad input: an image of the wrong size,
 * rel-pos tables of the wrong length, a window that does not divide the
 * padded grid. Each is a status and a message naming the tensor, with
 * nothing run or bound.
 */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_graph.h"
#include "kt.h"

/* q, k, v [B,H,g*g,D] inputs and rel tables [2g-1, D] as weights. */
typedef struct sgraph {
    kern_graph *g;
    float *rh, *rw;
    int64_t B, H, gh, gw, D;
} sgraph;

static kern_status build(sgraph *s, kern_ctx *ctx, float scale, kern_graph_val *out) {
    kern_graph_val q, k, v, wh, ww, y;
    kern_graph_node_desc d;
    kern_tensor th, tw;
    int64_t dims[4];
    kern_status st;
    dims[0] = s->B; dims[1] = s->H; dims[2] = s->gh * s->gw; dims[3] = s->D;
    if ((st = kern_graph_create(ctx, &s->g))) return st;
    kern_graph_input(s->g, "q", KERN_F32, 4, dims, &q);
    kern_graph_input(s->g, "k", KERN_F32, 4, dims, &k);
    kern_graph_input(s->g, "v", KERN_F32, 4, dims, &v);
    th = kern_tensor_2d(s->rh, KERN_F32, 2 * s->gh - 1, s->D);
    tw = kern_tensor_2d(s->rw, KERN_F32, 2 * s->gw - 1, s->D);
    kern_graph_weight(s->g, "attn.rel_pos_h", &th, KERN_GRAPH_BORROW, &wh);
    kern_graph_weight(s->g, "attn.rel_pos_w", &tw, KERN_GRAPH_BORROW, &ww);
    memset(&d, 0, sizeof d);
    d.op = KERN_GRAPH_OP_SDPA_RELPOS;
    d.name = "attn";
    d.inputs[0] = q; d.inputs[1] = k; d.inputs[2] = v; d.inputs[3] = wh; d.inputs[4] = ww;
    d.attrs.scale = scale;
    if ((st = kern_graph_add(s->g, &d, &y))) return st;
    *out = y;
    return kern_graph_output(s->g, y);
}

KT_TEST(graph_sdpa_relpos_matches_kernel) {
    static const int64_t G[][2] = {{14, 14}, {3, 5}, {8, 8}};
    int gi;
    for (gi = 0; gi < 3; gi++) {
        sgraph s;
        kt_rng rng = kt_rng_make(10 + (uint64_t)gi);
        int64_t L, n, nh, nw;
        float *q, *k, *v, *want;
        kern_graph_val y;
        memset(&s, 0, sizeof s);
        s.B = 2; s.H = 3; s.gh = G[gi][0]; s.gw = G[gi][1]; s.D = 16;
        L = s.gh * s.gw;
        n = s.B * s.H * L * s.D;
        nh = (2 * s.gh - 1) * s.D;
        nw = (2 * s.gw - 1) * s.D;
        q = (float *)kt_alloc((size_t)n * 4, "q");
        k = (float *)kt_alloc((size_t)n * 4, "k");
        v = (float *)kt_alloc((size_t)n * 4, "v");
        want = (float *)kt_alloc((size_t)n * 4, "want");
        s.rh = (float *)kt_alloc((size_t)nh * 4, "rh");
        s.rw = (float *)kt_alloc((size_t)nw * 4, "rw");
        kt_fill_normal(&rng, q, KERN_F32, n, 1.0);
        kt_fill_normal(&rng, k, KERN_F32, n, 1.0);
        kt_fill_normal(&rng, v, KERN_F32, n, 1.0);
        kt_fill_normal(&rng, s.rh, KERN_F32, nh, 0.5);
        kt_fill_normal(&rng, s.rw, KERN_F32, nw, 0.5);
        kt_context("grid %lldx%lld", (long long)s.gh, (long long)s.gw);
        KT_OK(build(&s, NULL, 0.0f, &y));
        {
            kern_tensor tq = kern_tensor_4d(q, KERN_F32, s.B, s.H, L, s.D);
            kern_tensor tk = kern_tensor_4d(k, KERN_F32, s.B, s.H, L, s.D);
            kern_tensor tv = kern_tensor_4d(v, KERN_F32, s.B, s.H, L, s.D);
            kern_tensor tw = kern_tensor_4d(want, KERN_F32, s.B, s.H, L, s.D);
            kern_tensor th2 = kern_tensor_2d(s.rh, KERN_F32, 2 * s.gh - 1, s.D);
            kern_tensor tw2 = kern_tensor_2d(s.rw, KERN_F32, 2 * s.gw - 1, s.D);
            kern_tensor ins[3], outt;
            kern_sdpa_params sp;
            kern_graph_plan *p = NULL;
            kern_graph_plan_params pp;
            char *ir;
            size_t len = 0;
            memset(&sp, 0, sizeof sp);
            sp.rel_pos_h = &th2;
            sp.rel_pos_w = &tw2;
            sp.rel_q_h = sp.rel_k_h = s.gh;
            sp.rel_q_w = sp.rel_k_w = s.gw;
            KT_OK(kern_sdpa(NULL, &tq, &tk, &tv, &tw, &sp));
            memset(&pp, 0, sizeof pp);
            KT_OK(kern_graph_plan_create(s.g, NULL, &pp, &p));
            ins[0] = tq; ins[1] = tk; ins[2] = tv;
            memset(&outt, 0, sizeof outt);
            KT_OK(kern_graph_run(p, ins, 3, &outt, 1));
            KT_CHECK(outt.data && kern_tensor_numel(&outt) == n, "output view");
            if (outt.data)
                KT_CHECK(memcmp(outt.data, want, (size_t)n * 4) == 0,
                         "graph output differs from kern_sdpa's");
            kern_graph_plan_free(p);
            /* the IR names the op and reads back to the same text */
            KT_OK(kern_graph_write_ir(s.g, NULL, 0, &len));
            ir = (char *)malloc(len + 1);
            KT_OK(kern_graph_write_ir(s.g, ir, len + 1, &len));
            KT_CHECK(strstr(ir, "attn = sdpa_relpos(q, k, v, attn.rel_pos_h, attn.rel_pos_w)") != NULL,
                     "IR: %s", ir);
            {
                kern_graph *g2 = NULL;
                char *ir2;
                size_t len2 = 0;
                KT_OK(kern_graph_read_ir(NULL, ir, len, &g2));
                if (g2) {
                    kern_graph_write_ir(g2, NULL, 0, &len2);
                    ir2 = (char *)malloc(len2 + 1);
                    kern_graph_write_ir(g2, ir2, len2 + 1, &len2);
                    KT_CHECK(len2 == len && memcmp(ir, ir2, len) == 0, "IR round trip: %s", ir2);
                    free(ir2);
                    kern_graph_destroy(g2);
                }
            }
            free(ir);
        }
        kern_graph_destroy(s.g);
        kt_free(q); kt_free(k); kt_free(v); kt_free(want); kt_free(s.rh); kt_free(s.rw);
    }
}

KT_TEST(graph_sdpa_relpos_errors) {
    sgraph s;
    kern_graph_val y;
    float rh[64 * 16], rw[64 * 16];
    memset(rh, 0, sizeof rh);
    memset(rw, 0, sizeof rw);
    memset(&s, 0, sizeof s);
    s.rh = rh; s.rw = rw;
    s.B = 1; s.H = 2; s.gh = 4; s.gw = 4; s.D = 16;
    KT_OK(build(&s, NULL, 0.0f, &y));
    {
        /* a second node whose tables do not match L = 16 */
        kern_graph_val q, wh, ww;
        kern_graph_node_desc d;
        kern_tensor th = kern_tensor_2d(rh, KERN_F32, 9, 16), te = kern_tensor_2d(rw, KERN_F32, 8, 16);
        int n0;
        q = 1; /* the first input */
        kern_graph_weight(s.g, "bad.h", &th, KERN_GRAPH_BORROW, &wh);
        kern_graph_weight(s.g, "bad.w", &te, KERN_GRAPH_BORROW, &ww);
        memset(&d, 0, sizeof d);
        d.op = KERN_GRAPH_OP_SDPA_RELPOS;
        d.name = "bad";
        d.inputs[0] = q; d.inputs[1] = q; d.inputs[2] = q; d.inputs[3] = wh; d.inputs[4] = ww;
        n0 = 0;
        KT_ERROR(kern_graph_add(s.g, &d, NULL), KERN_ERR_SHAPE, "rel_pos_w 8");
        d.inputs[4] = wh; /* 5 x 5 = 25 != 16 */
        KT_ERROR(kern_graph_add(s.g, &d, NULL), KERN_ERR_SHAPE, "L=16 but the tables give a 5 x 5 grid");
        d.inputs[4] = 0;
        KT_ERROR(kern_graph_add(s.g, &d, NULL), KERN_ERR_ARG, "bad");
        (void)n0;
    }
    kern_graph_destroy(s.g);
}

/* ---- a small SAM encoder in the text IR ------------------------------- */

typedef struct samcfg {
    int64_t S, p, C, H;   /* image side, patch, hidden, heads */
    int64_t ws;           /* window of block 0 (block 1 is global) */
    int64_t gp;           /* padded grid side block 0 is written for (0: the
                           * right one, ws * ceil(g / ws)) */
    int64_t rel_h0;       /* rows of block 0's rel_pos_h in the IR (0: 2*ws-1) */
} samcfg;

typedef struct irbuf {
    char *s;
    size_t n, cap;
} irbuf;

static void irf(irbuf *b, const char *fmt, ...) {
    va_list ap;
    int k;
    if (b->cap - b->n < 512) {
        b->cap = b->cap * 2 + 4096;
        b->s = (char *)realloc(b->s, b->cap);
    }
    va_start(ap, fmt);
    k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* The IR text (caller frees). Block 0 windowed (padded when ws does not
 * divide the grid), block 1 global; attention only, then the residual. */
static char *sam_ir(const samcfg *c, size_t *len) {
    irbuf b;
    int64_t g = c->S / c->p, C = c->C, H = c->H, hd = c->C / c->H, i;
    memset(&b, 0, sizeof b);
    irf(&b, "kern-graph 1\ninput pixel_values f32 [1,3,%lld,%lld]\n", (long long)c->S,
        (long long)c->S);
    irf(&b, "weight pe.w f32 [%lld,%lld]\nweight pe.b f32 [%lld]\n", (long long)C,
        (long long)(3 * c->p * c->p), (long long)C);
    irf(&b, "weight pos f32 [1,%lld,%lld,%lld]\n", (long long)g, (long long)g, (long long)C);
    for (i = 0; i < 2; i++) {
        int64_t side = i == 0 ? c->ws : g;
        int64_t nh = i == 0 && c->rel_h0 ? c->rel_h0 : 2 * side - 1;
        irf(&b, "weight b%lld.ln.w f32 [%lld]\nweight b%lld.ln.b f32 [%lld]\n", (long long)i,
            (long long)C, (long long)i, (long long)C);
        irf(&b, "weight b%lld.qkv.w f32 [%lld,%lld]\nweight b%lld.qkv.b f32 [%lld]\n", (long long)i,
            (long long)(3 * C), (long long)C, (long long)i, (long long)(3 * C));
        irf(&b, "weight b%lld.proj.w f32 [%lld,%lld]\nweight b%lld.proj.b f32 [%lld]\n",
            (long long)i, (long long)C, (long long)C, (long long)i, (long long)C);
        irf(&b, "weight b%lld.rel_pos_h f32 [%lld,%lld]\nweight b%lld.rel_pos_w f32 [%lld,%lld]\n",
            (long long)i, (long long)nh, (long long)hd, (long long)i, (long long)(2 * side - 1),
            (long long)hd);
    }
    irf(&b, "const zero f32 [1,1,1,1] 0\n");
    irf(&b, "pe.6 = reshape(pixel_values) shape=1,3,%lld,%lld,%lld,%lld\n", (long long)g,
        (long long)c->p, (long long)g, (long long)c->p);
    irf(&b, "pe.p = permute(pe.6) perm=0,2,4,1,3,5\n");
    irf(&b, "pe.cols = reshape(pe.p) shape=1,%lld,%lld,%lld\n", (long long)g, (long long)g,
        (long long)(3 * c->p * c->p));
    irf(&b, "pe = linear(pe.cols, pe.w, pe.b)\nh0 = add(pe, pos)\n");
    for (i = 0; i < 2; i++) {
        int64_t gp = i == 0 ? (c->gp ? c->gp : (g + c->ws - 1) / c->ws * c->ws) : g;
        int64_t side = i == 0 ? c->ws : g, n = gp / side, Bw = n * n, L = side * side;
        long long I = (long long)i;
        const char *cur = "ln";
        irf(&b, "b%lld.ln = layer_norm(h%lld, b%lld.ln.w, b%lld.ln.b) eps=1e-06\n", I, I, I, I);
        if (i == 0) {
            if (gp != g) {
                irf(&b, "b0.zh = expand(zero) shape=1,%lld,%lld,%lld\n", (long long)(gp - g),
                    (long long)g, (long long)C);
                irf(&b, "b0.padh = concat(b0.ln, b0.zh) axis=1\n");
                irf(&b, "b0.zw = expand(zero) shape=1,%lld,%lld,%lld\n", (long long)gp,
                    (long long)(gp - g), (long long)C);
                irf(&b, "b0.pad = concat(b0.padh, b0.zw) axis=2\n");
                cur = "pad";
            }
            irf(&b, "b0.win6 = reshape(b0.%s) shape=1,%lld,%lld,%lld,%lld,%lld\n", cur,
                (long long)n, (long long)side, (long long)n, (long long)side, (long long)C);
            irf(&b, "b0.winp = permute(b0.win6) perm=0,1,3,2,4,5\n");
            irf(&b, "b0.win = reshape(b0.winp) shape=%lld,%lld,%lld,%lld\n", (long long)Bw,
                (long long)side, (long long)side, (long long)C);
            cur = "win";
        }
        irf(&b, "b%lld.qkv = linear(b%lld.%s, b%lld.qkv.w, b%lld.qkv.b)\n", I, I, cur, I, I);
        irf(&b, "b%lld.qkv5 = reshape(b%lld.qkv) shape=%lld,%lld,3,%lld,%lld\n", I, I,
            (long long)Bw, (long long)L, (long long)H, (long long)hd);
        irf(&b, "b%lld.qkvp = permute(b%lld.qkv5) perm=2,0,3,1,4\n", I, I);
        irf(&b, "b%lld.q5, b%lld.k5, b%lld.v5 = split(b%lld.qkvp) axis=0 sizes=1,1,1\n", I, I, I, I);
        irf(&b, "b%lld.q = reshape(b%lld.q5) shape=%lld,%lld,%lld,%lld\n", I, I, (long long)Bw,
            (long long)H, (long long)L, (long long)hd);
        irf(&b, "b%lld.k = reshape(b%lld.k5) shape=%lld,%lld,%lld,%lld\n", I, I, (long long)Bw,
            (long long)H, (long long)L, (long long)hd);
        irf(&b, "b%lld.v = reshape(b%lld.v5) shape=%lld,%lld,%lld,%lld\n", I, I, (long long)Bw,
            (long long)H, (long long)L, (long long)hd);
        irf(&b, "b%lld.ctx = sdpa_relpos(b%lld.q, b%lld.k, b%lld.v, b%lld.rel_pos_h, "
            "b%lld.rel_pos_w)\n", I, I, I, I, I, I);
        irf(&b, "b%lld.ctxp = permute(b%lld.ctx) perm=0,2,1,3\n", I, I);
        irf(&b, "b%lld.ctx4 = reshape(b%lld.ctxp) shape=%lld,%lld,%lld,%lld\n", I, I, (long long)Bw,
            (long long)side, (long long)side, (long long)C);
        irf(&b, "b%lld.proj = linear(b%lld.ctx4, b%lld.proj.w, b%lld.proj.b)\n", I, I, I, I);
        cur = "proj";
        if (i == 0) {
            irf(&b, "b0.un6 = reshape(b0.proj) shape=1,%lld,%lld,%lld,%lld,%lld\n", (long long)n,
                (long long)n, (long long)side, (long long)side, (long long)C);
            irf(&b, "b0.unp = permute(b0.un6) perm=0,1,3,2,4,5\n");
            irf(&b, "b0.un = reshape(b0.unp) shape=1,%lld,%lld,%lld\n", (long long)gp,
                (long long)gp, (long long)C);
            cur = "un";
            if (gp != g) {
                irf(&b, "b0.croph = slice(b0.un) axis=1 start=0 length=%lld\n", (long long)g);
                irf(&b, "b0.crop = slice(b0.croph) axis=2 start=0 length=%lld\n", (long long)g);
                cur = "crop";
            }
        }
        irf(&b, "h%lld = add(h%lld, b%lld.%s)\n", (long long)(i + 1), I, I, cur);
    }
    irf(&b, "out = copy(h2)\noutput out\n");
    *len = b.n;
    return b.s;
}

static int64_t info_numel(const kern_graph_val_info *info) {
    int64_t n = 1;
    int i;
    for (i = 0; i < info->ndim; i++) n *= info->dims[i];
    return n;
}

/* Binds every declared weight (1-4 dims, as the IR above has them) to
 * seeded noise from one block (caller frees). */
static float *sam_bind(kern_graph *g, uint64_t seed) {
    int64_t total = 0, off = 0;
    float *w;
    kt_rng rng = kt_rng_make(seed);
    kern_graph_val v;
    kern_graph_val_info info;
    for (v = 1; kern_graph_val_get(g, v, &info) == KERN_OK; v++)
        if (info.kind == KERN_GRAPH_VAL_WEIGHT) total += info_numel(&info);
    w = (float *)kt_alloc((size_t)(total > 0 ? total : 1) * 4, "weights");
    kt_fill_normal(&rng, w, KERN_F32, total, 0.2);
    for (v = 1; kern_graph_val_get(g, v, &info) == KERN_OK; v++) {
        kern_tensor t;
        const int64_t *d = info.dims;
        if (info.kind != KERN_GRAPH_VAL_WEIGHT) continue;
        if (info.ndim == 1) t = kern_tensor_1d(w + off, KERN_F32, d[0]);
        else if (info.ndim == 2) t = kern_tensor_2d(w + off, KERN_F32, d[0], d[1]);
        else if (info.ndim == 3) t = kern_tensor_3d(w + off, KERN_F32, d[0], d[1], d[2]);
        else t = kern_tensor_4d(w + off, KERN_F32, d[0], d[1], d[2], d[3]);
        KT_OK(kern_graph_bind_weight(g, info.name, &t, KERN_GRAPH_BORROW));
        off += info_numel(&info);
    }
    return w;
}

static samcfg sam_small(void) {
    samcfg c;
    memset(&c, 0, sizeof c);
    c.S = 128; c.p = 16; c.C = 32; c.H = 2; c.ws = 3; /* 8x8 grid padded to 9x9 */
    return c;
}

KT_TEST(sam_encoder_bad_image) {
    samcfg c = sam_small();
    size_t len = 0;
    char *ir = sam_ir(&c, &len);
    kern_graph *g = NULL;
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    float *w, *img, *out;
    int64_t S = c.S, g8 = c.S / c.p, no = g8 * g8 * c.C, i, untouched = 1;
    kern_tensor in, o;
    kt_rng rng = kt_rng_make(5);
    KT_OK(kern_graph_read_ir(NULL, ir, len, &g));
    free(ir);
    if (!g) return;
    w = sam_bind(g, 6);
    memset(&pp, 0, sizeof pp);
    KT_OK(kern_graph_plan_create(g, NULL, &pp, &p));
    img = (float *)kt_alloc((size_t)(3 * S * S) * 4, "img");
    out = (float *)kt_alloc((size_t)no * 4, "out");
    kt_fill_normal(&rng, img, KERN_F32, 3 * S * S, 1.0);
    /* the right size runs */
    in = kern_tensor_4d(img, KERN_F32, 1, 3, S, S);
    o = kern_tensor_4d(out, KERN_F32, 1, g8, g8, c.C);
    if (p) {
        KT_OK(kern_graph_run(p, &in, 1, &o, 1));
        for (i = 0; i < no; i++)
            if (!(out[i] == out[i])) break;
        KT_CHECK(i == no, "a NaN at %lld", (long long)i);
        /* a smaller image (same numel would still be the wrong shape) */
        for (i = 0; i < no; i++) out[i] = 12345.0f;
        in = kern_tensor_4d(img, KERN_F32, 1, 3, S - c.p, S);
        KT_ERROR(kern_graph_run(p, &in, 1, &o, 1), KERN_ERR_SHAPE,
                 "input 'pixel_values' dim 2 is 112, the graph declares 128");
        in = kern_tensor_4d(img, KERN_F32, 1, 3, S / 2, S * 2);
        KT_ERROR(kern_graph_run(p, &in, 1, &o, 1), KERN_ERR_SHAPE,
                 "input 'pixel_values' dim 2 is 64, the graph declares 128");
        in = kern_tensor_3d(img, KERN_F32, 3, S, S);
        KT_ERROR(kern_graph_run(p, &in, 1, &o, 1), KERN_ERR_SHAPE,
                 "input 'pixel_values' has 3 dims, the graph declares 4");
        for (i = 0; i < no; i++) untouched &= out[i] == 12345.0f;
        KT_CHECK(untouched, "the output was written on error");
    }
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
    kt_free(w); kt_free(img); kt_free(out);
}

KT_TEST(sam_encoder_bad_relpos) {
    samcfg c = sam_small();
    size_t len = 0;
    char *ir;
    kern_graph *g = NULL;
    /* block 0's window is 3 x 3: rel_pos_h needs 5 rows; 7 in the IR */
    c.rel_h0 = 7;
    ir = sam_ir(&c, &len);
    KT_ERROR(kern_graph_read_ir(NULL, ir, len, &g), KERN_ERR_SHAPE,
             "rel_pos_h has 7 rows but L=9 is a 3 x 3 grid, which needs 2*3-1 = 5");
    KT_CHECK(g == NULL, "a graph came back on error");
    KT_CHECK(strstr(kern_last_error(), "b0.ctx") != NULL, "node not named: %s", kern_last_error());
    free(ir);
    /* an even length is no grid at all */
    c.rel_h0 = 6;
    ir = sam_ir(&c, &len);
    KT_ERROR(kern_graph_read_ir(NULL, ir, len, &g), KERN_ERR_SHAPE, "rel_pos_h has 6 rows");
    free(ir);
    /* the IR is right but the data bound to it is not: nothing is bound */
    c.rel_h0 = 0;
    ir = sam_ir(&c, &len);
    KT_OK(kern_graph_read_ir(NULL, ir, len, &g));
    free(ir);
    if (g) {
        float tab[7 * 16];
        kern_tensor t = kern_tensor_2d(tab, KERN_F32, 7, 16);
        kern_graph_val_info info;
        memset(tab, 0, sizeof tab);
        KT_ERROR(kern_graph_bind_weight(g, "b0.rel_pos_h", &t, KERN_GRAPH_BORROW), KERN_ERR_SHAPE,
                 "b0.rel_pos_h");
        KT_OK(kern_graph_val_get(g, kern_graph_find(g, "b0.rel_pos_h"), &info));
        KT_CHECK(!info.has_data, "the table was bound on error");
        kern_graph_destroy(g);
    }
}

KT_TEST(sam_encoder_bad_window) {
    samcfg c = sam_small();
    size_t len = 0;
    char *ir;
    kern_graph *g = NULL;
    /* window 4 on the 8 x 8 grid written as if padded to 9 x 9: 4 does not
     * divide 9, the partition's reshape names the node and the sizes */
    c.ws = 4; c.gp = 9;
    ir = sam_ir(&c, &len);
    KT_ERROR(kern_graph_read_ir(NULL, ir, len, &g), KERN_ERR_SHAPE,
             "node 'b0.win6' (reshape; x=[1,9,9,32] f32): 2592 elements cannot become 2048");
    KT_CHECK(g == NULL, "a graph came back on error");
    free(ir);
    /* window 3 on the unpadded 8 x 8 grid */
    c.ws = 3; c.gp = 8;
    ir = sam_ir(&c, &len);
    KT_ERROR(kern_graph_read_ir(NULL, ir, len, &g), KERN_ERR_SHAPE,
             "node 'b0.win6' (reshape; x=[1,8,8,32] f32): 2048 elements cannot become 1152");
    free(ir);
    /* the right padding for window 4 (none) and for 5 (8 -> 10) build */
    c.gp = 0;
    for (c.ws = 4; c.ws <= 5; c.ws++) {
        ir = sam_ir(&c, &len);
        kt_context("window %lld", (long long)c.ws);
        KT_OK(kern_graph_read_ir(NULL, ir, len, &g));
        kern_graph_destroy(g);
        g = NULL;
        free(ir);
    }
}

KT_MAIN()
