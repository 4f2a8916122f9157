/* test_sam.c — the SAM ViT-B pieces of issue 21 at graph level: the
 * sdpa_relpos op (SAM attention with the decomposed relative-position
 * bias, kern_sdpa's rel_pos options) built through the API and the text
 * IR, against kern_sdpa called directly (the kernel itself is tested
 * against a materializing reference in test_sdpa.c, fwd_relpos_*).
 */
#define KERN_IMPLEMENTATION
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

KT_MAIN()
