/* test_sdpa.c — kern_sdpa forward/backward against a double-precision
 * reference that materializes the softmax.
 *
 * Tolerances (kt_tol scaled, the factor justified here once):
 *   forward f32: kt_tol(F32) x 20. The kernel rounds q.k (a length-D
 *     reduction) and p.v (a length-Lk reduction) in f32 and uses a
 *     polynomial 2^x with 1e-7 relative error; with D, Lk <= 300 the
 *     observed worst error is a few 1e-6 on O(1) outputs.
 *   forward f16: kt_tol(F16) x 2 (output rounding plus f32 accumulation).
 *   forward bf16: kt_tol(BF16) x 4: output rounding, plus P rounded to bf16
 *     (2^-9 relative per probability) before P.V with vdpbf16ps, which
 *     errs by up to ~p_max * 2^-9 * |v| on outputs that cancel to ~0.
 *   backward: compared by normalized MSE (dq/dk/dv are long reductions
 *     with cancellation): f32 1e-9, f16 1e-5, bf16 1e-4.
 */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_sdpa.h"
#include "kt.h"

/* ------------------------------------------------------------ reference */

typedef struct tcase {
    int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
    kern_dtype dt;
    int blhd;     /* [B,L,H,D] memory layout for q, k, v, out */
    int pad;      /* extra elements per row (strided rows) */
    int causal, bottom_right, window;
    int64_t wl, wr;
    float scale, softcap, dropout;
    int mask_kind; /* 0 none, 1 bool [Lq,Lk], 2 f32 [B,1,Lq,Lk], 3 bool [B,Hq,1,Lk],
                      4 bf16 [Hq,Lq,Lk], 5 f32 [Lk], 6 f32 [B,1,1,Lk] (padding) */
    int klens;     /* 0 none, 1 i32, 2 i64 */
    int want_lse;
    /* decomposed relative position (SAM): grids, table rows and dtype,
     * interpolation */
    int rel, rinterp;
    int64_t rqh, rqw, rkh, rkw, rnh, rnw;
    kern_dtype rdt;
} tcase;

static tcase tc_default(void) {
    tcase c;
    memset(&c, 0, sizeof c);
    c.B = 1; c.Hq = 1; c.Hkv = 1; c.Lq = 7; c.Lk = 7; c.D = 16; c.Dv = 16;
    c.dt = KERN_F32;
    c.wl = c.wr = -1;
    c.want_lse = 1;
    return c;
}

/* A tensor [B,H,L,D] in BHLD or BLHD memory with `pad` extra elements per
 * row; returns the allocation. */
static void *tc_alloc(const tcase *c, int64_t H, int64_t L, int64_t D, kern_tensor *t,
                      const char *what, size_t *bytes) {
    int64_t row = D + c->pad, n = c->B * H * L * row;
    size_t es = kern_dtype_size(c->dt);
    void *p = kt_alloc((size_t)(n > 0 ? n : 1) * es, what);
    memset(t, 0, sizeof *t);
    t->data = p;
    t->dtype = c->dt;
    t->ndim = 4;
    t->shape[0] = c->B; t->shape[1] = H; t->shape[2] = L; t->shape[3] = D;
    t->stride[3] = 1;
    if (c->blhd) {
        t->stride[1] = row;
        t->stride[2] = H * row;
        t->stride[0] = L * H * row;
    } else {
        t->stride[2] = row;
        t->stride[1] = L * row;
        t->stride[0] = H * L * row;
    }
    *bytes = (size_t)(n > 0 ? n : 1) * es;
    return p;
}

static int64_t toff(const kern_tensor *t, int64_t b, int64_t h, int64_t i, int64_t d) {
    return b * t->stride[0] + h * t->stride[1] + i * t->stride[2] + d * t->stride[3];
}

static void ref_range(const tcase *c, int64_t i, int64_t lk, int64_t *lo, int64_t *hi) {
    /* independent restatement of the documented visibility rule */
    int64_t off = c->bottom_right ? lk - c->Lq : 0, j;
    *lo = lk;
    *hi = 0;
    for (j = 0; j < lk; j++) {
        int vis = 1;
        if ((c->causal || c->bottom_right) && j > i + off) vis = 0;
        if (c->window && c->wl >= 0 && j < i + off - c->wl) vis = 0;
        if (c->window && c->wr >= 0 && j > i + off + c->wr) vis = 0;
        if (vis) {
            if (j < *lo) *lo = j;
            *hi = j + 1;
        }
    }
    if (*hi == 0) *lo = 0;
}

typedef struct tdata {
    kern_tensor q, k, v, o, mask, klens, lse, rph, rpw;
    void *qp, *kp, *vp, *op, *mp, *klp, *lsep, *rhp, *rwp;
    size_t qb, kb, vb, ob, mb;
    int has_mask, has_klens;
    /* relative position: tables resized to 2*max-1 rows (double) and the
     * row index of every (query, key) coordinate pair per axis */
    double *rth, *rtw;
    int64_t *ridxh, *ridxw;
} tdata;

/* Sets case c to use the decomposed relative position on the given grids
 * (table lengths 2*max-1, f32, no interpolation). */
static void tc_rel(tcase *c, int64_t qh, int64_t qw, int64_t kh, int64_t kw) {
    c->rel = 1;
    c->rqh = qh; c->rqw = qw; c->rkh = kh; c->rkw = kw;
    c->Lq = qh * qw;
    c->Lk = kh * kw;
    c->rnh = 2 * (qh > kh ? qh : kh) - 1;
    c->rnw = 2 * (qw > kw ? qw : kw) - 1;
    c->rdt = KERN_F32;
}

/* HF SAM's get_rel_pos restated: a table [n][D] (strided view) resized
 * linearly (torch's F.interpolate, align_corners=False, index math in f32)
 * to m = 2*max(q,k)-1 rows in double; idx[a*k + b] = the row for query
 * coordinate a, key coordinate b (coords scaled in f32, truncated). */
static void ref_rel_table(const kern_tensor *t, int64_t q, int64_t k, double *out,
                          int64_t *idx) {
    int64_t n = t->shape[0], D = t->shape[1], m = 2 * (q > k ? q : k) - 1, r, e, a, b;
    float sq = k > q ? (float)((double)k / q) : 1.0f, sk = q > k ? (float)((double)q / k) : 1.0f;
    for (r = 0; r < m; r++) {
        float sc = (float)n / (float)m, src = sc * ((float)r + 0.5f) - 0.5f, lam;
        int64_t i0, i1;
        if (n == m) src = (float)r;
        if (src < 0) src = 0;
        i0 = (int64_t)src;
        if (i0 > n - 1) i0 = n - 1;
        lam = src - (float)i0;
        i1 = i0 + (i0 < n - 1);
        for (e = 0; e < D; e++)
            out[r * D + e] = (1.0 - lam) * kt_get(t->data, t->dtype, i0 * t->stride[0] + e) +
                             lam * kt_get(t->data, t->dtype, i1 * t->stride[0] + e);
    }
    for (a = 0; a < q; a++)
        for (b = 0; b < k; b++) {
            float x = (float)a * sq - (float)b * sk + (float)((double)(k - 1) * sk);
            idx[a * k + b] = (int64_t)x;
        }
}

static void td_make(const tcase *c, tdata *d, kt_rng *rng) {
    int64_t i, n;
    memset(d, 0, sizeof *d);
    d->qp = tc_alloc(c, c->Hq, c->Lq, c->D, &d->q, "q", &d->qb);
    d->kp = tc_alloc(c, c->Hkv, c->Lk, c->D, &d->k, "k", &d->kb);
    d->vp = tc_alloc(c, c->Hkv, c->Lk, c->Dv, &d->v, "v", &d->vb);
    d->op = tc_alloc(c, c->Hq, c->Lq, c->Dv, &d->o, "out", &d->ob);
    kt_fill_normal(rng, d->qp, c->dt, (int64_t)(d->qb / kern_dtype_size(c->dt)), 1.0);
    kt_fill_normal(rng, d->kp, c->dt, (int64_t)(d->kb / kern_dtype_size(c->dt)), 1.0);
    kt_fill_normal(rng, d->vp, c->dt, (int64_t)(d->vb / kern_dtype_size(c->dt)), 1.0);
    if (c->mask_kind) {
        int64_t sh[4];
        int nd = 0;
        kern_dtype mdt = KERN_BOOL;
        switch (c->mask_kind) {
        case 1: nd = 2; sh[0] = c->Lq; sh[1] = c->Lk; mdt = KERN_BOOL; break;
        case 2: nd = 4; sh[0] = c->B; sh[1] = 1; sh[2] = c->Lq; sh[3] = c->Lk; mdt = KERN_F32; break;
        case 3: nd = 4; sh[0] = c->B; sh[1] = c->Hq; sh[2] = 1; sh[3] = c->Lk; mdt = KERN_BOOL; break;
        case 4: nd = 3; sh[0] = c->Hq; sh[1] = c->Lq; sh[2] = c->Lk; mdt = KERN_BF16; break;
        case 6: nd = 4; sh[0] = c->B; sh[1] = 1; sh[2] = 1; sh[3] = c->Lk; mdt = KERN_F32; break;
        default: nd = 1; sh[0] = c->Lk; mdt = KERN_F32; break;
        }
        n = 1;
        for (i = 0; i < nd; i++) n *= sh[i];
        d->mb = (size_t)(n > 0 ? n : 1) * kern_dtype_size(mdt);
        d->mp = kt_alloc(d->mb, "mask");
        for (i = 0; i < n; i++) {
            if (mdt == KERN_BOOL) ((uint8_t *)d->mp)[i] = kt_uniform(rng, 0, 1) < 0.7;
            else {
                double x = kt_uniform(rng, 0, 1) < 0.15 ? -INFINITY : kt_normal(rng);
                kt_set(d->mp, mdt, i, x);
            }
        }
        kern_tensor_init(&d->mask, d->mp, mdt, nd, sh);
        d->has_mask = 1;
    }
    if (c->klens) {
        d->klp = kt_alloc((size_t)(c->B > 0 ? c->B : 1) * 8, "k_lens");
        for (i = 0; i < c->B; i++) {
            int64_t x = kt_randint(rng, 0, c->Lk + 1);
            if (i == 0) x = c->Lk; /* one full, others random (incl. 0) */
            if (c->klens == 1) ((int32_t *)d->klp)[i] = (int32_t)x;
            else ((int64_t *)d->klp)[i] = x;
        }
        d->klens = kern_tensor_1d(d->klp, c->klens == 1 ? KERN_I32 : KERN_I64, c->B);
        d->has_klens = 1;
    }
    if (c->rel) {
        /* tables as strided views (3 elements of padding per row) */
        int64_t e, D3 = c->D + 3, mh = 2 * (c->rqh > c->rkh ? c->rqh : c->rkh) - 1;
        int64_t mw = 2 * (c->rqw > c->rkw ? c->rqw : c->rkw) - 1;
        size_t es = kern_dtype_size(c->rdt);
        d->rhp = kt_alloc((size_t)(c->rnh * D3 > 0 ? c->rnh * D3 : 1) * es, "rel_pos_h");
        d->rwp = kt_alloc((size_t)(c->rnw * D3 > 0 ? c->rnw * D3 : 1) * es, "rel_pos_w");
        kt_fill_normal(rng, d->rhp, c->rdt, c->rnh * D3, 0.5);
        kt_fill_normal(rng, d->rwp, c->rdt, c->rnw * D3, 0.5);
        d->rph = kern_tensor_2d(d->rhp, c->rdt, c->rnh, c->D);
        d->rpw = kern_tensor_2d(d->rwp, c->rdt, c->rnw, c->D);
        d->rph.stride[0] = d->rpw.stride[0] = D3;
        d->rth = (double *)malloc((size_t)((mh > 0 ? mh : 1) * c->D) * sizeof(double));
        d->rtw = (double *)malloc((size_t)((mw > 0 ? mw : 1) * c->D) * sizeof(double));
        d->ridxh = (int64_t *)malloc((size_t)(c->rqh * c->rkh + 1) * sizeof(int64_t));
        d->ridxw = (int64_t *)malloc((size_t)(c->rqw * c->rkw + 1) * sizeof(int64_t));
        ref_rel_table(&d->rph, c->rqh, c->rkh, d->rth, d->ridxh);
        ref_rel_table(&d->rpw, c->rqw, c->rkw, d->rtw, d->ridxw);
        (void)e;
    }
    d->lsep = kt_alloc((size_t)(c->B * c->Hq * c->Lq > 0 ? c->B * c->Hq * c->Lq : 1) * 4, "lse");
    d->lse = kern_tensor_4d(d->lsep, KERN_F32, 1, c->B, c->Hq, c->Lq);
    d->lse.ndim = 3;
    d->lse.shape[0] = c->B; d->lse.shape[1] = c->Hq; d->lse.shape[2] = c->Lq;
    d->lse.stride[0] = c->Hq * c->Lq; d->lse.stride[1] = c->Lq; d->lse.stride[2] = 1;
}

static void td_free(tdata *d) {
    kt_free(d->qp); kt_free(d->kp); kt_free(d->vp); kt_free(d->op);
    if (d->mp) kt_free(d->mp);
    if (d->klp) kt_free(d->klp);
    if (d->rhp) {
        kt_free(d->rhp);
        kt_free(d->rwp);
        free(d->rth);
        free(d->rtw);
        free(d->ridxh);
        free(d->ridxw);
    }
    kt_free(d->lsep);
}

static kern_sdpa_params tc_params(const tcase *c, tdata *d) {
    kern_sdpa_params p;
    memset(&p, 0, sizeof p);
    p.attn_mask = d->has_mask ? &d->mask : NULL;
    p.is_causal = c->causal;
    p.causal_bottom_right = c->bottom_right;
    p.scale = c->scale;
    p.enable_gqa = c->Hq != c->Hkv;
    p.dropout_p = c->dropout;
    p.seed = 0x1234567890abcdefull;
    p.offset = 77;
    p.window_set = c->window;
    p.window_left = c->wl;
    p.window_right = c->wr;
    p.softcap = c->softcap;
    p.k_lens = d->has_klens ? &d->klens : NULL;
    p.lse = c->want_lse ? &d->lse : NULL;
    if (c->rel) {
        p.rel_pos_h = &d->rph;
        p.rel_pos_w = &d->rpw;
        p.rel_q_h = c->rqh;
        p.rel_q_w = c->rqw;
        p.rel_k_h = c->rkh;
        p.rel_k_w = c->rkw;
        p.rel_pos_interpolate = c->rinterp;
    }
    return p;
}

/* The materialized decomposed relative-position bias of query row i of
 * (b, h) against key j: q_i . Rh[idx_h] + q_i . Rw[idx_w] (unscaled q). */
static double rel_bias(const tcase *c, const tdata *d, int64_t b, int64_t h, int64_t i,
                       int64_t j) {
    int64_t hi = i / c->rqw, wi = i % c->rqw, hj = j / c->rkw, wj = j % c->rkw, e;
    const double *rh = d->rth + d->ridxh[hi * c->rkh + hj] * c->D;
    const double *rw = d->rtw + d->ridxw[wi * c->rkw + wj] * c->D;
    double acc = 0;
    for (e = 0; e < c->D; e++)
        acc += kt_get(d->qp, c->dt, toff(&d->q, b, h, i, e)) * (rh[e] + rw[e]);
    return acc;
}

static double mask_val(const tcase *c, const tdata *d, int64_t b, int64_t h, int64_t i,
                       int64_t j, int *vis) {
    kern_tensor bm;
    int64_t full[4], o;
    double x;
    *vis = 1;
    if (!d->has_mask) return 0;
    full[0] = c->B; full[1] = c->Hq; full[2] = c->Lq; full[3] = c->Lk;
    kern_tensor_broadcast_to(&d->mask, 4, full, &bm, "t", "m");
    o = b * bm.stride[0] + h * bm.stride[1] + i * bm.stride[2] + j * bm.stride[3];
    x = kt_get(bm.data, bm.dtype, o);
    if (bm.dtype == KERN_BOOL) {
        *vis = x != 0;
        return 0;
    }
    if (x == -INFINITY) *vis = 0;
    return x;
}

static int64_t klen_of(const tcase *c, const tdata *d, int64_t b) {
    if (!d->has_klens) return c->Lk;
    return (int64_t)kt_get(d->klp, c->klens == 1 ? KERN_I32 : KERN_I64, b);
}

/* Reference forward: out [B,Hq,Lq,Dv] and lse [B,Hq,Lq] (contiguous,
 * double). P (normalized, before dropout) optionally into pr
 * [B,Hq,Lq,Lk]. */
static void ref_fwd(const tcase *c, const tdata *d, double *out, double *lse, double *pr) {
    int64_t b, h, i, j, e, G = c->Hq / c->Hkv;
    double scale = c->scale != 0 ? c->scale : 1.0 / sqrt((double)c->D);
    uint32_t thr = kern_dropout_threshold(c->dropout);
    double *s = (double *)malloc((size_t)(c->Lk > 0 ? c->Lk : 1) * sizeof(double));
    for (b = 0; b < c->B; b++)
        for (h = 0; h < c->Hq; h++)
            for (i = 0; i < c->Lq; i++) {
                int64_t hk = h / G, lk = klen_of(c, d, b), lo, hi;
                double m = -INFINITY, l = 0;
                double *orow = out + ((b * c->Hq + h) * c->Lq + i) * c->Dv;
                ref_range(c, i, lk, &lo, &hi);
                for (j = 0; j < c->Lk; j++) {
                    double acc = 0, x;
                    int vis;
                    for (e = 0; e < c->D; e++)
                        acc += kt_get(d->qp, c->dt, toff(&d->q, b, h, i, e)) *
                               kt_get(d->kp, c->dt, toff(&d->k, b, hk, j, e));
                    x = scale * acc;
                    if (c->softcap > 0) x = c->softcap * tanh(x / c->softcap);
                    if (c->rel) x += rel_bias(c, d, b, h, i, j);
                    x += mask_val(c, d, b, h, i, j, &vis);
                    if (!vis || j < lo || j >= hi || j >= lk) x = -INFINITY;
                    s[j] = x;
                    if (x > m) m = x;
                }
                for (e = 0; e < c->Dv; e++) orow[e] = 0;
                if (m == -INFINITY) {
                    if (lse) lse[(b * c->Hq + h) * c->Lq + i] = -INFINITY;
                    if (pr)
                        for (j = 0; j < c->Lk; j++) pr[((b * c->Hq + h) * c->Lq + i) * c->Lk + j] = 0;
                    continue;
                }
                for (j = 0; j < c->Lk; j++) l += exp(s[j] - m);
                if (lse) lse[(b * c->Hq + h) * c->Lq + i] = m + log(l);
                for (j = 0; j < c->Lk; j++) {
                    double p = exp(s[j] - m) / l;
                    if (pr) pr[((b * c->Hq + h) * c->Lq + i) * c->Lk + j] = p;
                    if (c->dropout > 0) {
                        uint64_t idx = (((uint64_t)b * c->Hq + h) * c->Lq + i) * c->Lk + j;
                        p = kern_dropout_keep(0x1234567890abcdefull, 77, idx, thr)
                                ? p / (1.0 - c->dropout)
                                : 0.0;
                    }
                    if (p == 0) continue;
                    for (e = 0; e < c->Dv; e++)
                        orow[e] += p * kt_get(d->vp, c->dt, toff(&d->v, b, hk, j, e));
                }
            }
    free(s);
}

static kt_tol_t fwd_tol(kern_dtype dt) {
    return kt_tol_scaled(dt, dt == KERN_F32 ? 20.0 : (dt == KERN_BF16 ? 4.0 : 2.0));
}

/* Compares out (strided tensor) against the reference. */
static int check_out(const tcase *c, const tdata *d, const double *want, const char *what) {
    int64_t b, h, i, e, n = c->B * c->Hq * c->Lq * c->Dv, t = 0;
    double *got = (double *)malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    int ok;
    float *gf = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (b = 0; b < c->B; b++)
        for (h = 0; h < c->Hq; h++)
            for (i = 0; i < c->Lq; i++)
                for (e = 0; e < c->Dv; e++) got[t++] = kt_get(d->op, c->dt, toff(&d->o, b, h, i, e));
    for (t = 0; t < n; t++) gf[t] = (float)got[t];
    ok = kt_assert_close(what, gf, KERN_F32, want, n, fwd_tol(c->dt));
    free(got);
    free(gf);
    return ok;
}

static kern_status run_fwd(kern_ctx *ctx, const tcase *c, tdata *d) {
    kern_sdpa_params p = tc_params(c, d);
    kt_poison(d->op, d->ob);
    kt_poison(d->lsep, (size_t)(c->B * c->Hq * c->Lq) * 4);
    return kern_sdpa(ctx, &d->q, &d->k, &d->v, &d->o, &p);
}

/* Runs case c on every ISA with 1 and 2 threads; checks against the
 * reference, lse, and that 1 and 2 threads give identical bytes. */
static void fwd_case(const tcase *c, uint64_t salt) {
    kt_rng rng = kt_rng_make(salt);
    tdata d;
    int64_t n = c->B * c->Hq * c->Lq * c->Dv, nl = c->B * c->Hq * c->Lq;
    double *want = (double *)malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    double *wl = (double *)malloc((size_t)(nl > 0 ? nl : 1) * sizeof(double));
    unsigned char *o1 = NULL;
    td_make(c, &d, &rng);
    ref_fwd(c, &d, want, wl, NULL);
    o1 = (unsigned char *)malloc(d.ob);
    {
        KT_FOR_EACH_ISA(isa, ctx, 1) {
            kern_ctx *ctx2 = kt_ctx(2, isa);
            kt_context("%s B%lld H%lld/%lld L%lld/%lld D%lld/%lld %s%s c%d br%d w%d(%lld,%lld) "
                       "sc%g cap%g p%g mask%d kl%d",
                       kern_isa_name(isa), (long long)c->B, (long long)c->Hq, (long long)c->Hkv,
                       (long long)c->Lq, (long long)c->Lk, (long long)c->D, (long long)c->Dv,
                       kern_dtype_name(c->dt), c->blhd ? " blhd" : "", c->causal,
                       c->bottom_right, c->window, (long long)c->wl, (long long)c->wr,
                       (double)c->scale, (double)c->softcap, (double)c->dropout, c->mask_kind,
                       c->klens);
            KT_OK(run_fwd(ctx, c, &d));
            check_out(c, &d, want, "out");
            if (c->want_lse)
                kt_assert_close("lse", d.lsep, KERN_F32, wl, nl,
                                kt_tol_scaled(KERN_F32, c->dt == KERN_F32 ? 20.0 : 2000.0));
            memcpy(o1, d.op, d.ob);
            KT_OK(run_fwd(ctx2, c, &d));
            kt_assert_bytes_equal("out 1 vs 2 threads", o1, d.op, d.ob);
        }
    }
    free(o1);
    free(want);
    free(wl);
    td_free(&d);
}

/* ------------------------------------------------------------ exp2 */

KT_TEST(exp2_accuracy) {
    static const float special[] = {-INFINITY, -1000.0f, -200.0f, -150.0f, -126.5f, -127.0f, 0.0f,
                                    127.0f, 127.9f, 129.0f, 500.0f, INFINITY};
    float x[4096 + 12];
    int i, n = 4096;
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        const kern__sdpa_fns *t = kern__sdpa_fns_for(kern_ctx_isa(ctx), kern_ctx_uarch(ctx));
        double worst = 0;
        kt_context("%s", kern_isa_name(isa));
        for (i = 0; i < n; i++) x[i] = (float)(-125.0 + 250.0 * i / n) + (float)i * 1e-4f;
        for (i = 0; i < 12; i++) x[n + i] = special[i];
        {
            float y[4096 + 12 + 1];
            memcpy(y, x, sizeof x);
            y[n + 12] = NAN;
            t->exp2(y, n + 13);
            for (i = 0; i < n; i++) {
                double w = exp2((double)x[i]), e = fabs(y[i] - w) / w;
                if (e > worst) worst = e;
            }
            KT_CHECK(worst < 2.5e-7, "max rel error %g", worst);
            KT_CHECK(y[n + 0] == 0.0f && y[n + 1] == 0.0f && y[n + 2] == 0.0f, "-inf/-1000/-200 -> %g %g %g",
                     (double)y[n], (double)y[n + 1], (double)y[n + 2]);
            KT_CHECK(y[n + 3] >= 0.0f && y[n + 3] < 1e-38f, "2^-150 -> %g", (double)y[n + 3]);
            KT_CHECK(y[n + 6] == 1.0f, "2^0 -> %g", (double)y[n + 6]);
            KT_CHECK(fabs(y[n + 7] - 1.7014118e38) / 1.7014118e38 < 1e-6, "2^127 -> %g", (double)y[n + 7]);
            KT_CHECK(isinf(y[n + 9]) && isinf(y[n + 10]) && isinf(y[n + 11]), "overflow -> %g %g %g",
                     (double)y[n + 9], (double)y[n + 10], (double)y[n + 11]);
            KT_CHECK(isnan(y[n + 12]), "NaN -> %g", (double)y[n + 12]);
        }
    }
}

/* Every level reaches its own table: AVX512 and AVX512_BF16 differ (the
 * bf16 kernels), the VNNI levels share their base level's table; the Xeon
 * class runs bf16 through the f32 kernels at AVX512_BF16 too (vdpbf16ps is
 * half the f32 FMA rate there), i.e. the AVX512 level's table; AMX has
 * the tile table for every class (only Xeons have tiles). */
KT_TEST(fns_table_per_level) {
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        const kern__sdpa_fns *t = kern__sdpa_fns_for(kern_ctx_isa(ctx), kern_ctx_uarch(ctx));
        const char *want = "scalar";
        int bf16 = 0;
        int u;
        kt_context("%s", kern_isa_name(isa));
        for (u = KERN_UARCH_GENERIC; u < KERN_UARCH_COUNT; u++) {
            const kern__sdpa_fns *tu = kern__sdpa_fns_for(isa, kern__uarch_effective((kern_uarch)u, isa));
            const kern__sdpa_fns *tg = kern__sdpa_fns_for(isa, KERN_UARCH_GENERIC);
            if (u == KERN_UARCH_XEON_AVX512 && isa == KERN_ISA_AVX512_BF16)
                KT_CHECK(tu == kern__sdpa_fns_for(KERN_ISA_AVX512, KERN_UARCH_GENERIC),
                         "xeon at avx512_bf16: %s", tu->name);
            else
                KT_CHECK(tu == tg, "%s at %s: %s", kern_uarch_name((kern_uarch)u),
                         kern_isa_name(isa), tu->name);
        }
        if (isa == KERN_ISA_AMX) { /* tiles, with the Xeon class's rows path */
            KT_CHECK(strcmp(t->name, "amx") == 0 && t->mk16 && t->tiles_on && t->tiles_off &&
                         t->vpackt && !t->dots16 && t->rows16,
                     "table %s at amx", t->name);
            continue;
        }
        KT_CHECK(!t->tiles_on && !t->vpackt, "tile kernels in %s", t->name);
        if (kern_ctx_uarch(ctx) == KERN_UARCH_XEON_AVX512) continue;
        switch (isa) {
        case KERN_ISA_AVX2:
        case KERN_ISA_AVX2_VNNI: want = "avx2"; break;
        case KERN_ISA_AVX512:
        case KERN_ISA_AVX512_VNNI: want = "avx512"; break;
        case KERN_ISA_AVX512_BF16: want = "avx512_bf16"; bf16 = 1; break;
        case KERN_ISA_NEON:
        case KERN_ISA_NEON_DOT:
        case KERN_ISA_NEON_BF16: want = "neon"; break;
        default: break;
        }
        KT_CHECK(strcmp(t->name, want) == 0, "table %s, want %s", t->name, want);
        KT_CHECK((t->mk16 != NULL) == bf16 && (t->dots16 != NULL) == bf16 &&
                     (t->rows16 != NULL) == bf16,
                 "bf16 kernels %s at %s", t->mk16 ? "present" : "absent", t->name);
    }
}

/* ------------------------------------------------------------ forward */

KT_TEST(fwd_basic_shapes) {
    /* sampled grid over the axes; Lq != Lk included */
    static const int64_t L[] = {1, 7, 64, 65, 129, 300};
    static const int64_t HD[][2] = {{1, 1}, {3, 3}, {4, 2}, {8, 1}};
    static const int64_t DD[][2] = {{16, 16}, {64, 64}, {80, 80}, {128, 128}, {64, 32}, {16, 80}};
    int ci;
#ifdef KT_SANITIZER
    int ncases = 8;
#else
    int ncases = 40;
#endif
    kt_rng rng = kt_rng_make(1);
    for (ci = 0; ci < ncases; ci++) {
        tcase c = tc_default();
        c.B = 1 + (ci & 1);
        c.Hq = HD[ci % 4][0];
        c.Hkv = HD[ci % 4][1];
        c.Lq = L[kt_randint(&rng, 0, 6)];
        c.Lk = L[kt_randint(&rng, 0, 6)];
        c.D = DD[ci % 6][0];
        c.Dv = DD[ci % 6][1];
        c.blhd = (ci / 3) & 1;
        /* keep the scalar-ISA cost bounded */
        if (c.Lq * c.Lk * c.Hq * c.B * (c.D + c.Dv) > 12000000) c.Lk = 65;
        fwd_case(&c, (uint64_t)ci);
    }
}


KT_TEST(fwd_dtypes) {
    static const kern_dtype dts[] = {KERN_BF16, KERN_F16};
    static const int64_t DD[][2] = {{16, 16}, {64, 64}, {80, 80}, {72, 72}, {96, 112}, {7, 9}};
    int ci;
    for (ci = 0; ci < 12; ci++) {
        tcase c = tc_default();
        c.dt = dts[ci & 1];
        c.B = 1 + (ci % 3 == 0);
        c.Hq = ci % 4 == 1 ? 4 : 2;
        c.Hkv = ci % 4 == 1 ? 2 : 2;
        c.Lq = ci % 5 == 0 ? 1 : 65;
        c.Lk = ci % 3 == 0 ? 129 : 64 + ci;
        c.D = DD[ci % 6][0];
        c.Dv = DD[ci % 6][1];
        c.blhd = ci & 2;
        c.causal = ci % 4 == 3;
        c.mask_kind = ci % 6 == 2 ? 2 : 0;
        fwd_case(&c, 100 + (uint64_t)ci);
    }
}

KT_TEST(fwd_head_dims) {
    static const int64_t Ds[] = {1, 2, 3, 8, 17, 31, 33, 63, 72, 80, 96, 112, 127, 160, 256};
    int ci;
    for (ci = 0; ci < 15; ci++) {
        tcase c = tc_default();
        c.D = Ds[ci];
        c.Dv = Ds[(ci + 5) % 15];
        c.Lq = 33 + ci;
        c.Lk = 70;
        c.dt = ci % 3 == 0 ? KERN_BF16 : KERN_F32;
        c.pad = ci % 2 ? 3 : 0; /* strided rows */
        fwd_case(&c, 200 + (uint64_t)ci);
    }
}

/* Heads whose K and V pass 512 KiB run 8 query panels a task (256 rows)
 * instead of 4: a last task with fewer panels, GQA lanes, causal both
 * alignments, a mask with fully masked rows, dropout, bf16, and a key split
 * (few tasks, long keys) whose partial rows are 256 a task. */
KT_TEST(fwd_eight_panel_tasks) {
    int ci;
#ifdef KT_SANITIZER
    int ncases = 3;
#else
    int ncases = 6;
#endif
    for (ci = 0; ci < ncases; ci++) {
        tcase c = tc_default();
        c.D = c.Dv = 128;
        c.Lq = 300;
        c.Lk = 520; /* 520 * 256 * 4 bytes >= 512 KiB */
        switch (ci) {
        case 0: c.Hq = 2; c.Hkv = 1; break;
        case 1: c.causal = 1; c.Lq = 290; break;
        case 2: c.dt = KERN_BF16; c.Lk = 1030; c.Lq = 260; c.causal = 1; c.bottom_right = 1; break;
        case 3: c.mask_kind = 2; c.B = 2; c.Lq = 270; break;
        case 4: c.dropout = 0.25f; break;
        default: c.D = c.Dv = 64; c.Lk = 1100; c.Lq = 300; c.blhd = 1; break; /* split */
        }
        fwd_case(&c, 300 + (uint64_t)ci);
    }
}

static tcase opt_base(int i) {
    tcase c = tc_default();
    c.B = 2;
    c.Hq = 4;
    c.Hkv = i % 2 ? 2 : 4;
    c.Lq = i % 3 == 0 ? 65 : 129;
    c.Lk = i % 3 == 1 ? 65 : 129;
    c.D = 64;
    c.Dv = i % 2 ? 48 : 64;
    c.blhd = i % 2;
    return c;
}

KT_TEST(fwd_options_alone) {
    int i;
    for (i = 0; i < 17; i++) {
        tcase c = opt_base(i);
        switch (i) {
        case 0: c.causal = 1; break;
        case 1: c.bottom_right = 1; break;
        case 2: c.window = 1; c.wl = 20; c.wr = 5; break;
        case 3: c.window = 1; c.wl = 0; c.wr = -1; break;
        case 4: c.softcap = 2.5f; break;
        case 5: c.scale = 0.3f; break;
        case 6: c.mask_kind = 1; break;
        case 7: c.mask_kind = 2; break;
        case 8: c.mask_kind = 3; break;
        case 9: c.mask_kind = 4; break;
        case 10: c.mask_kind = 5; break;
        case 11: c.klens = 1; break;
        case 12: c.klens = 2; break;
        case 13: c.dropout = 0.3f; break;
        case 14: c.Hq = 8; c.Hkv = 1; break; /* MQA */
        case 15: c.mask_kind = 6; break; /* BERT's padding mask: one row per batch entry */
        default: c.want_lse = 0; break;
        }
        fwd_case(&c, 300 + (uint64_t)i);
    }
}

KT_TEST(fwd_options_combined) {
    int i;
    kt_rng rng = kt_rng_make(5);
    for (i = 0; i < 16; i++) {
        tcase c = opt_base(i);
        c.causal = kt_randint(&rng, 0, 2);
        c.bottom_right = kt_randint(&rng, 0, 3) == 0;
        c.window = kt_randint(&rng, 0, 2);
        c.wl = kt_randint(&rng, -1, 40);
        c.wr = kt_randint(&rng, -1, 10);
        c.softcap = kt_randint(&rng, 0, 2) ? 3.0f : 0.0f;
        c.scale = kt_randint(&rng, 0, 2) ? 0.2f : 0.0f;
        c.mask_kind = (int)kt_randint(&rng, 0, 6);
        c.klens = (int)kt_randint(&rng, 0, 3);
        c.dropout = kt_randint(&rng, 0, 2) ? 0.2f : 0.0f;
        c.dt = i % 4 == 3 ? KERN_BF16 : (i % 4 == 2 ? KERN_F16 : KERN_F32);
        fwd_case(&c, 400 + (uint64_t)i);
    }
}

/* Rows with no visible key: zeros and -inf, never NaN. */
KT_TEST(fwd_fully_masked_rows) {
    int i;
    for (i = 0; i < 4; i++) {
        tcase c = opt_base(i);
        kt_rng rng = kt_rng_make(9);
        tdata d;
        kern_sdpa_params p;
        int64_t b, h, r, e;
        c.mask_kind = 1;
        td_make(&c, &d, &rng);
        /* mask rows 0 and 5 fully; with k_lens 0 for batch 1 every row of
         * it is masked */
        for (r = 0; r < c.Lk; r++) {
            ((uint8_t *)d.mp)[0 * c.Lk + r] = 0;
            ((uint8_t *)d.mp)[5 * c.Lk + r] = 0;
        }
        c.klens = 1;
        d.klp = kt_alloc(16, "k_lens");
        ((int32_t *)d.klp)[0] = (int32_t)c.Lk;
        ((int32_t *)d.klp)[1] = 0;
        d.klens = kern_tensor_1d(d.klp, KERN_I32, 2);
        d.has_klens = 1;
        if (i >= 2) { /* window that sees nothing for early rows */
            c.window = 1;
            c.wl = -1;
            c.wr = -1;
            c.causal = 1;
        }
        p = tc_params(&c, &d);
        {
            KT_FOR_EACH_ISA(isa, ctx, 2) {
                kt_context("%s case %d", kern_isa_name(isa), i);
                kt_poison(d.op, d.ob);
                KT_OK(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p));
                for (b = 0; b < c.B; b++)
                    for (h = 0; h < c.Hq; h++)
                        for (r = 0; r < c.Lq; r++) {
                            float lse = ((float *)d.lsep)[(b * c.Hq + h) * c.Lq + r];
                            int masked = b == 1 || r == 0 || r == 5;
                            for (e = 0; e < c.Dv; e++) {
                                double x = kt_get(d.op, c.dt, toff(&d.o, b, h, r, e));
                                if (masked) KT_CHECK(x == 0.0, "row b%lld h%lld i%lld: %g", (long long)b, (long long)h, (long long)r, x);
                                else KT_CHECK(isfinite(x), "row b%lld i%lld not finite", (long long)b, (long long)r);
                            }
                            if (masked) KT_CHECK(lse == -INFINITY, "lse %g", (double)lse);
                            else KT_CHECK(isfinite(lse), "lse %g", (double)lse);
                        }
            }
        }
        td_free(&d);
    }
}

/* NaN in q row i -> out row i NaN only; NaN in a key -> the rows that see
 * it NaN, the rows that mask it finite. */
KT_TEST(fwd_nan_propagation) {
    tcase c = tc_default();
    kt_rng rng = kt_rng_make(3);
    tdata d;
    kern_sdpa_params p;
    int64_t r, e;
    c.Lq = 40;
    c.Lk = 40;
    c.D = 32;
    c.Dv = 32;
    c.causal = 1;
    td_make(&c, &d, &rng);
    ((float *)d.qp)[toff(&d.q, 0, 0, 3, 5)] = NAN;  /* query 3 */
    ((float *)d.kp)[toff(&d.k, 0, 0, 20, 7)] = NAN; /* key 20: rows >= 20 */
    p = tc_params(&c, &d);
    {
        KT_FOR_EACH_ISA(isa, ctx, 1) {
            kt_context("%s", kern_isa_name(isa));
            KT_OK(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p));
            for (r = 0; r < c.Lq; r++) {
                int want_nan = r == 3 || r >= 20;
                float lse = ((float *)d.lsep)[r];
                for (e = 0; e < c.Dv; e++) {
                    float x = ((float *)d.op)[toff(&d.o, 0, 0, r, e)];
                    KT_CHECK(want_nan ? isnan(x) : isfinite(x), "row %lld col %lld: %g", (long long)r, (long long)e, (double)x);
                }
                KT_CHECK(want_nan ? isnan(lse) : isfinite(lse), "lse row %lld: %g", (long long)r, (double)lse);
            }
        }
    }
    td_free(&d);
}

/* Dropout: the kept fraction matches 1-p (binomial, 6 sigma) and the output
 * matches the reference using the documented mapping (fwd_case). */
KT_TEST(fwd_dropout_statistics) {
    int64_t n = 0, kept = 0, idx;
    float pr[3] = {0.1f, 0.5f, 0.9f};
    int t;
    for (t = 0; t < 3; t++) {
        uint32_t thr = kern_dropout_threshold(pr[t]);
        double mean, sd;
        n = 0;
        kept = 0;
        for (idx = 0; idx < 200000; idx++, n++) kept += kern_dropout_keep(42, 7, (uint64_t)idx, thr);
        mean = (double)n * (1.0 - pr[t]);
        sd = sqrt((double)n * pr[t] * (1.0 - pr[t]));
        KT_CHECK(fabs((double)kept - mean) < 6 * sd, "p=%g kept %lld of %lld", (double)pr[t], (long long)kept, (long long)n);
    }
    {
        tcase c = tc_default();
        c.Lq = 64;
        c.Lk = 300;
        c.D = 32;
        c.Dv = 32;
        c.dropout = 0.5f;
        fwd_case(&c, 77);
    }
}

/* Decode shapes: the rows path and the key split (with its combine phase),
 * against the reference (all ISAs, 1 vs 2 threads identical). */
KT_TEST(fwd_decode) {
    int i;
#ifdef KT_SANITIZER
    int64_t lk = 1100;
#else
    int64_t lk = 3000;
#endif
    for (i = 0; i < 6; i++) {
        tcase c = tc_default();
        c.Hq = 8;
        c.Hkv = 2;
        c.Lq = i < 3 ? 1 : (i == 3 ? 3 : 16);
        c.Lk = lk + i;
        c.D = 64;
        c.Dv = 64;
        c.dt = i == 1 ? KERN_BF16 : (i == 2 ? KERN_F16 : KERN_F32);
        c.bottom_right = i >= 3;
        c.klens = i == 4 ? 1 : 0;
        c.window = i == 5;
        c.wl = 700;
        c.wr = -1;
        c.blhd = i & 1;
        fwd_case(&c, 500 + (uint64_t)i);
    }
}

/* Varlen against per-sequence dense calls (bit-identical: the same code
 * runs each sequence) and the reference. */
KT_TEST(fwd_varlen) {
    static const int64_t lq[] = {5, 0, 70, 33}, lk[] = {9, 4, 130, 33};
    int64_t ns = 4, s, Tq = 0, Tk = 0, Hq = 4, Hkv = 2, D = 40, Dv = 24, mq = 0, mk = 0;
    int variant;
    for (variant = 0; variant < 3; variant++) {
        kern_dtype dt = variant == 2 ? KERN_BF16 : KERN_F32;
        size_t es = kern_dtype_size(dt);
        int64_t cuq[5], cuk[5];
        void *qp, *kp, *vp, *op, *lp, *o2, *l2;
        kern_tensor q, k, v, o, cq, ck, lse;
        kern_sdpa_params p;
        kt_rng rng = kt_rng_make(11 + (uint64_t)variant);
        Tq = Tk = mq = mk = 0;
        cuq[0] = cuk[0] = 0;
        for (s = 0; s < ns; s++) {
            Tq += lq[s];
            Tk += lk[s];
            cuq[s + 1] = Tq;
            cuk[s + 1] = Tk;
            if (lq[s] > mq) mq = lq[s];
            if (lk[s] > mk) mk = lk[s];
        }
        qp = kt_alloc((size_t)(Tq * Hq * D) * es, "q");
        kp = kt_alloc((size_t)(Tk * Hkv * D) * es, "k");
        vp = kt_alloc((size_t)(Tk * Hkv * Dv) * es, "v");
        op = kt_alloc((size_t)(Tq * Hq * Dv) * es, "out");
        o2 = kt_alloc((size_t)(Tq * Hq * Dv) * es, "out2");
        lp = kt_alloc((size_t)(Tq * Hq) * 4, "lse");
        l2 = kt_alloc((size_t)(Tq * Hq) * 4, "lse2");
        kt_fill_normal(&rng, qp, dt, Tq * Hq * D, 1.0);
        kt_fill_normal(&rng, kp, dt, Tk * Hkv * D, 1.0);
        kt_fill_normal(&rng, vp, dt, Tk * Hkv * Dv, 1.0);
        {
            int64_t sq[3], sk[3], sv[3], so[3], sl[2];
            sq[0] = Tq; sq[1] = Hq; sq[2] = D;
            sk[0] = Tk; sk[1] = Hkv; sk[2] = D;
            sv[0] = Tk; sv[1] = Hkv; sv[2] = Dv;
            so[0] = Tq; so[1] = Hq; so[2] = Dv;
            sl[0] = Hq; sl[1] = Tq;
            kern_tensor_init(&q, qp, dt, 3, sq);
            kern_tensor_init(&k, kp, dt, 3, sk);
            kern_tensor_init(&v, vp, dt, 3, sv);
            kern_tensor_init(&o, op, dt, 3, so);
            kern_tensor_init(&lse, lp, KERN_F32, 2, sl);
        }
        cq = kern_tensor_1d(cuq, KERN_I64, ns + 1);
        ck = kern_tensor_1d(cuk, KERN_I64, ns + 1);
        memset(&p, 0, sizeof p);
        p.enable_gqa = 1;
        p.lse = &lse;
        p.causal_bottom_right = variant == 1;
        p.dropout_p = variant == 1 ? 0.25f : 0.0f;
        p.seed = 5;
        {
            KT_FOR_EACH_ISA(isa, ctx, 2) {
                kt_context("%s variant %d", kern_isa_name(isa), variant);
                kt_poison(op, (size_t)(Tq * Hq * Dv) * es);
                KT_OK(kern_sdpa_varlen(ctx, &q, &k, &v, &o, &cq, &ck, mq, mk, &p));
                memcpy(o2, op, (size_t)(Tq * Hq * Dv) * es);
                memcpy(l2, lp, (size_t)(Tq * Hq) * 4);
                /* each sequence as a dense [1, L, H, D] problem ([B,L,H,D] strides) */
                for (s = 0; s < ns; s++) {
                    kern_tensor qs = q, ks = k, vs = v, os = o, ls;
                    kern_sdpa_params ps = p;
                    int64_t tcase_lse[1];
                    (void)tcase_lse;
                    if (lq[s] == 0) continue;
                    qs.ndim = ks.ndim = vs.ndim = os.ndim = 4;
#define T4(t, base, L, H, Dd)                                                 \
    t.data = (char *)t.data + (size_t)((base) * (H) * (Dd)) * es;            \
    t.shape[0] = 1; t.shape[1] = H; t.shape[2] = L; t.shape[3] = Dd;         \
    t.stride[0] = (L) * (H) * (Dd); t.stride[1] = Dd; t.stride[2] = (H) * (Dd); t.stride[3] = 1;
                    T4(qs, cuq[s], lq[s], Hq, D)
                    T4(ks, cuk[s], lk[s], Hkv, D)
                    T4(vs, cuk[s], lk[s], Hkv, Dv)
                    T4(os, cuq[s], lq[s], Hq, Dv)
#undef T4
                    memset(&ls, 0, sizeof ls);
                    ls.data = (float *)lp + cuq[s];
                    ls.dtype = KERN_F32;
                    ls.ndim = 3;
                    ls.shape[0] = 1; ls.shape[1] = Hq; ls.shape[2] = lq[s];
                    ls.stride[0] = 0; ls.stride[1] = Tq; ls.stride[2] = 1;
                    ps.lse = &ls;
                    /* dropout indices differ (dense uses Lq/Lk of the
                     * sequence, varlen max_seqlen): compare without dropout */
                    ps.dropout_p = 0;
                    if (p.dropout_p > 0) continue;
                    KT_OK(kern_sdpa(ctx, &qs, &ks, &vs, &os, &ps));
                }
                if (p.dropout_p == 0) {
                    /* dense per sequence may take another path (rows vs
                     * panels, another key split): equal within tolerance */
                    int64_t t, n = Tq * Hq * Dv;
                    double *w = (double *)malloc((size_t)n * sizeof(double));
                    float *g = (float *)malloc((size_t)n * sizeof(float));
                    for (t = 0; t < n; t++) {
                        w[t] = kt_get(op, dt, t);
                        g[t] = (float)kt_get(o2, dt, t);
                    }
                    kt_assert_close("varlen vs dense out", g, KERN_F32, w, n, fwd_tol(dt));
                    for (t = 0; t < Tq * Hq; t++) w[t] = ((float *)lp)[t];
                    kt_assert_close("varlen vs dense lse", l2, KERN_F32, w, Tq * Hq,
                                    kt_tol_scaled(KERN_F32, 20.0));
                    free(w);
                    free(g);
                } else {
                    /* reference with the varlen dropout mapping, sequence by sequence */
                    int64_t h, i, j, e;
                    uint32_t thr = kern_dropout_threshold(p.dropout_p);
                    double worst = 0;
                    for (s = 0; s < ns; s++)
                        for (h = 0; h < Hq; h++)
                            for (i = 0; i < lq[s]; i++) {
                                double sc[200], m = -INFINITY, l = 0, acc[64];
                                int64_t off = lk[s] - lq[s];
                                for (e = 0; e < Dv; e++) acc[e] = 0;
                                for (j = 0; j < lk[s]; j++) {
                                    double dd = 0;
                                    for (e = 0; e < D; e++)
                                        dd += kt_get(qp, dt, ((cuq[s] + i) * Hq + h) * D + e) *
                                              kt_get(kp, dt, ((cuk[s] + j) * Hkv + h / 2) * D + e);
                                    sc[j] = j > i + off ? -INFINITY : dd / sqrt((double)D);
                                    if (sc[j] > m) m = sc[j];
                                }
                                for (j = 0; j < lk[s]; j++) l += exp(sc[j] - m);
                                for (j = 0; j < lk[s]; j++) {
                                    uint64_t idx = (((uint64_t)s * Hq + h) * mq + i) * mk + j;
                                    double pj = exp(sc[j] - m) / l;
                                    if (!kern_dropout_keep(5, 0, idx, thr)) continue;
                                    for (e = 0; e < Dv; e++)
                                        acc[e] += pj / (1 - p.dropout_p) *
                                                  kt_get(vp, dt, ((cuk[s] + j) * Hkv + h / 2) * Dv + e);
                                }
                                for (e = 0; e < Dv; e++) {
                                    double g = kt_get(o2, dt, ((cuq[s] + i) * Hq + h) * Dv + e);
                                    double err = fabs(g - acc[e]) / (1e-5 + 1e-5 * fabs(acc[e]));
                                    if (err > worst) worst = err;
                                }
                            }
                    KT_CHECK(worst < 20, "varlen dropout: worst error %g x kt_tol(f32)", worst);
                }
            }
        }
        kt_free(qp); kt_free(kp); kt_free(vp); kt_free(op); kt_free(o2); kt_free(lp); kt_free(l2);
    }
}

/* ------------------------------------------------------------ backward */

/* Reference gradients in double: dq [B,Hq,Lq,D], dk [B,Hkv,Lk,D],
 * dv [B,Hkv,Lk,Dv] (contiguous) for the upstream gradient dout (strided
 * like out, in td->dop). */
static void ref_bwd(const tcase *c, const tdata *d, const void *dop, double *dq, double *dk,
                    double *dv) {
    int64_t b, h, i, j, e, G = c->Hq / c->Hkv;
    double scale = c->scale != 0 ? c->scale : 1.0 / sqrt((double)c->D);
    uint32_t thr = kern_dropout_threshold(c->dropout);
    int64_t nq = c->B * c->Hq * c->Lq * c->D, nk = c->B * c->Hkv * c->Lk;
    double *s = (double *)malloc((size_t)(c->Lk + 1) * sizeof(double));
    double *t = (double *)malloc((size_t)(c->Lk + 1) * sizeof(double));
    double *P = (double *)malloc((size_t)(c->Lk + 1) * sizeof(double));
    double *dP = (double *)malloc((size_t)(c->Lk + 1) * sizeof(double));
    memset(dq, 0, (size_t)nq * sizeof(double));
    memset(dk, 0, (size_t)(nk * c->D) * sizeof(double));
    memset(dv, 0, (size_t)(nk * c->Dv) * sizeof(double));
    for (b = 0; b < c->B; b++)
        for (h = 0; h < c->Hq; h++)
            for (i = 0; i < c->Lq; i++) {
                int64_t hk = h / G, lk = klen_of(c, d, b), lo, hi;
                double m = -INFINITY, l = 0, delta = 0;
                ref_range(c, i, lk, &lo, &hi);
                for (j = 0; j < c->Lk; j++) {
                    double acc = 0, x;
                    int vis;
                    for (e = 0; e < c->D; e++)
                        acc += kt_get(d->qp, c->dt, toff(&d->q, b, h, i, e)) *
                               kt_get(d->kp, c->dt, toff(&d->k, b, hk, j, e));
                    x = scale * acc;
                    t[j] = 0;
                    if (c->softcap > 0) {
                        t[j] = tanh(x / c->softcap);
                        x = c->softcap * t[j];
                    }
                    x += mask_val(c, d, b, h, i, j, &vis);
                    if (!vis || j < lo || j >= hi || j >= lk) x = -INFINITY;
                    s[j] = x;
                    if (x > m) m = x;
                }
                if (m == -INFINITY) continue;
                for (j = 0; j < c->Lk; j++) l += exp(s[j] - m);
                for (j = 0; j < c->Lk; j++) {
                    double zr = 1.0, dpd = 0;
                    P[j] = exp(s[j] - m) / l;
                    if (c->dropout > 0) {
                        uint64_t idx = (((uint64_t)b * c->Hq + h) * c->Lq + i) * c->Lk + j;
                        zr = kern_dropout_keep(0x1234567890abcdefull, 77, idx, thr) ? 1.0 / (1.0 - c->dropout) : 0.0;
                    }
                    for (e = 0; e < c->Dv; e++) {
                        double g = kt_get(dop, c->dt, toff(&d->o, b, h, i, e));
                        dpd += g * kt_get(d->vp, c->dt, toff(&d->v, b, hk, j, e));
                        dv[((b * c->Hkv + hk) * c->Lk + j) * c->Dv + e] += P[j] * zr * g;
                    }
                    dP[j] = dpd * zr;
                    delta += P[j] * dP[j];
                }
                for (j = 0; j < c->Lk; j++) {
                    double ds = P[j] * (dP[j] - delta) * scale;
                    if (c->softcap > 0) ds *= 1 - t[j] * t[j];
                    if (ds == 0) continue;
                    for (e = 0; e < c->D; e++) {
                        dq[((b * c->Hq + h) * c->Lq + i) * c->D + e] +=
                            ds * kt_get(d->kp, c->dt, toff(&d->k, b, hk, j, e));
                        dk[((b * c->Hkv + hk) * c->Lk + j) * c->D + e] +=
                            ds * kt_get(d->qp, c->dt, toff(&d->q, b, h, i, e));
                    }
                }
            }
    free(s);
    free(t);
    free(P);
    free(dP);
}

static double bwd_nmse(kern_dtype dt) {
    return dt == KERN_F32 ? 1e-9 : (dt == KERN_F16 ? 1e-5 : 1e-4);
}

/* Reads a strided [B,H,L,D] tensor into contiguous floats. */
static float *gather4(const kern_tensor *t, const void *data) {
    int64_t b, h, i, e, n = t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3], k = 0;
    float *r = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (b = 0; b < t->shape[0]; b++)
        for (h = 0; h < t->shape[1]; h++)
            for (i = 0; i < t->shape[2]; i++)
                for (e = 0; e < t->shape[3]; e++)
                    r[k++] = (float)kt_get(data, t->dtype, toff(t, b, h, i, e));
    return r;
}

typedef struct tgrad {
    kern_tensor dout, dq, dk, dv;
    void *dop, *dqp, *dkp, *dvp;
    size_t db, dqb, dkb, dvb;
} tgrad;

static void tg_make(const tcase *c, tgrad *g, kt_rng *rng) {
    g->dop = tc_alloc(c, c->Hq, c->Lq, c->Dv, &g->dout, "dout", &g->db);
    g->dqp = tc_alloc(c, c->Hq, c->Lq, c->D, &g->dq, "dq", &g->dqb);
    g->dkp = tc_alloc(c, c->Hkv, c->Lk, c->D, &g->dk, "dk", &g->dkb);
    g->dvp = tc_alloc(c, c->Hkv, c->Lk, c->Dv, &g->dv, "dv", &g->dvb);
    kt_fill_normal(rng, g->dop, c->dt, (int64_t)(g->db / kern_dtype_size(c->dt)), 1.0);
}
static void tg_free(tgrad *g) {
    kt_free(g->dop); kt_free(g->dqp); kt_free(g->dkp); kt_free(g->dvp);
}

static kern_status run_bwd(kern_ctx *ctx, const tcase *c, tdata *d, tgrad *g) {
    kern_sdpa_params p = tc_params(c, d);
    kt_poison(g->dqp, g->dqb);
    kt_poison(g->dkp, g->dkb);
    kt_poison(g->dvp, g->dvb);
    return kern_sdpa_backward(ctx, &d->q, &d->k, &d->v, &d->o, &g->dout, &d->lse, &g->dq, &g->dk,
                              &g->dv, &p);
}

static void bwd_case(const tcase *c0, uint64_t salt) {
    tcase c = *c0;
    kt_rng rng = kt_rng_make(salt);
    tdata d;
    tgrad g;
    int64_t nq = c.B * c.Hq * c.Lq * c.D, nk = c.B * c.Hkv * c.Lk;
    double *wq = (double *)malloc((size_t)(nq > 0 ? nq : 1) * sizeof(double));
    double *wk = (double *)malloc((size_t)(nk * c.D > 0 ? nk * c.D : 1) * sizeof(double));
    double *wv = (double *)malloc((size_t)(nk * c.Dv > 0 ? nk * c.Dv : 1) * sizeof(double));
    unsigned char *s1 = NULL, *s2 = NULL, *s3 = NULL;
    c.want_lse = 1;
    td_make(&c, &d, &rng);
    tg_make(&c, &g, &rng);
    ref_bwd(&c, &d, g.dop, wq, wk, wv);
    s1 = (unsigned char *)malloc(g.dqb);
    s2 = (unsigned char *)malloc(g.dkb);
    s3 = (unsigned char *)malloc(g.dvb);
    {
        KT_FOR_EACH_ISA(isa, ctx, 1) {
            float *gq, *gk, *gv;
            kt_context("%s B%lld H%lld/%lld L%lld/%lld D%lld/%lld %s%s c%d br%d w%d(%lld,%lld) "
                       "cap%g p%g mask%d kl%d",
                       kern_isa_name(isa), (long long)c.B, (long long)c.Hq, (long long)c.Hkv,
                       (long long)c.Lq, (long long)c.Lk, (long long)c.D, (long long)c.Dv,
                       kern_dtype_name(c.dt), c.blhd ? " blhd" : "", c.causal, c.bottom_right,
                       c.window, (long long)c.wl, (long long)c.wr, (double)c.softcap,
                       (double)c.dropout, c.mask_kind, c.klens);
            KT_OK(run_fwd(ctx, &c, &d));
            KT_OK(run_bwd(ctx, &c, &d, &g));
            gq = gather4(&g.dq, g.dqp);
            gk = gather4(&g.dk, g.dkp);
            gv = gather4(&g.dv, g.dvp);
            kt_assert_nmse("dq", gq, KERN_F32, wq, nq, bwd_nmse(c.dt));
            kt_assert_nmse("dk", gk, KERN_F32, wk, nk * c.D, bwd_nmse(c.dt));
            kt_assert_nmse("dv", gv, KERN_F32, wv, nk * c.Dv, bwd_nmse(c.dt));
            free(gq);
            free(gk);
            free(gv);
            memcpy(s1, g.dqp, g.dqb);
            memcpy(s2, g.dkp, g.dkb);
            memcpy(s3, g.dvp, g.dvb);
            KT_OK(run_bwd(kt_ctx(2, isa), &c, &d, &g));
            kt_assert_bytes_equal("dq 1 vs 2 threads", s1, g.dqp, g.dqb);
            kt_assert_bytes_equal("dk 1 vs 2 threads", s2, g.dkp, g.dkb);
            kt_assert_bytes_equal("dv 1 vs 2 threads", s3, g.dvp, g.dvb);
        }
    }
    free(s1);
    free(s2);
    free(s3);
    free(wq);
    free(wk);
    free(wv);
    tg_free(&g);
    td_free(&d);
}

KT_TEST(bwd_shapes) {
    static const int64_t L[] = {1, 7, 64, 65, 129, 300};
    static const int64_t HD[][2] = {{1, 1}, {3, 3}, {4, 2}, {8, 1}};
    static const int64_t DD[][2] = {{16, 16}, {64, 64}, {80, 80}, {128, 128}, {64, 32}, {16, 80}};
    int ci;
    kt_rng rng = kt_rng_make(2);
#ifdef KT_SANITIZER
    int ncases = 6;
#else
    int ncases = 20;
#endif
    for (ci = 0; ci < ncases; ci++) {
        tcase c = tc_default();
        c.B = 1 + (ci & 1);
        c.Hq = HD[ci % 4][0];
        c.Hkv = HD[ci % 4][1];
        c.Lq = L[kt_randint(&rng, 0, 6)];
        c.Lk = L[kt_randint(&rng, 0, 6)];
        c.D = DD[ci % 6][0];
        c.Dv = DD[ci % 6][1];
        c.blhd = (ci / 3) & 1;
        c.dt = ci % 5 == 4 ? KERN_BF16 : (ci % 7 == 6 ? KERN_F16 : KERN_F32);
        if (c.Lq * c.Lk * c.Hq * c.B * (c.D + c.Dv) > 6000000) c.Lk = 65;
        bwd_case(&c, 600 + (uint64_t)ci);
    }
}

KT_TEST(bwd_options) {
    int i;
    kt_rng rng = kt_rng_make(6);
    for (i = 0; i < 20; i++) {
        tcase c = opt_base(i);
        c.Lq = i % 3 == 0 ? 65 : 100;
        c.Lk = i % 3 == 1 ? 65 : 100;
        switch (i) {
        case 0: c.causal = 1; break;
        case 1: c.bottom_right = 1; break;
        case 2: c.window = 1; c.wl = 20; c.wr = 5; break;
        case 3: c.softcap = 2.0f; break;
        case 4: c.mask_kind = 1; break;
        case 5: c.mask_kind = 2; break;
        case 6: c.klens = 1; break;
        case 7: c.dropout = 0.3f; break;
        case 8: c.Hq = 8; c.Hkv = 1; break;
        case 9: c.scale = 0.25f; break;
        default:
            c.causal = kt_randint(&rng, 0, 2);
            c.bottom_right = kt_randint(&rng, 0, 3) == 0;
            c.window = kt_randint(&rng, 0, 2);
            c.wl = kt_randint(&rng, -1, 40);
            c.wr = kt_randint(&rng, -1, 10);
            c.softcap = kt_randint(&rng, 0, 2) ? 3.0f : 0.0f;
            c.mask_kind = (int)kt_randint(&rng, 0, 6);
            c.klens = (int)kt_randint(&rng, 0, 3);
            c.dropout = kt_randint(&rng, 0, 2) ? 0.2f : 0.0f;
            c.dt = i % 3 == 0 ? KERN_BF16 : KERN_F32;
            break;
        }
        bwd_case(&c, 700 + (uint64_t)i);
    }
}

/* B*H = 1 with a long key range: several key ranges (partial dq summed in
 * order), both threads busy, identical bits. */
KT_TEST(bwd_single_head_long) {
    tcase c = tc_default();
    c.Lq = 200;
#ifdef KT_SANITIZER
    c.Lk = 300;
#else
    c.Lk = 700;
#endif
    c.D = 64;
    c.Dv = 64;
    c.causal = 1;
    bwd_case(&c, 800);
}

/* Finite differences of the double reference forward (loss = sum(out *
 * dout)) against the kernel's gradients, on tiny shapes with every option
 * that is differentiable. */
KT_TEST(bwd_finite_differences) {
    int v;
    for (v = 0; v < 3; v++) {
        tcase c = tc_default();
        kt_rng rng = kt_rng_make(900 + (uint64_t)v);
        tdata d;
        tgrad g;
        kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
        int64_t n, x, no;
        double *o1, *o2, hstep = 1e-3;
        float *gq, *gk, *gv;
        c.B = 1; c.Hq = 2; c.Hkv = 1; c.Lq = 5; c.Lk = 6; c.D = 4; c.Dv = 3;
        c.causal = v == 1;
        c.softcap = v == 2 ? 1.5f : 0.0f;
        c.mask_kind = v == 2 ? 2 : 0;
        c.dropout = v == 1 ? 0.3f : 0.0f;
        td_make(&c, &d, &rng);
        tg_make(&c, &g, &rng);
        KT_OK(run_fwd(ctx, &c, &d));
        KT_OK(run_bwd(ctx, &c, &d, &g));
        gq = gather4(&g.dq, g.dqp);
        gk = gather4(&g.dk, g.dkp);
        gv = gather4(&g.dv, g.dvp);
        no = c.B * c.Hq * c.Lq * c.Dv;
        o1 = (double *)malloc((size_t)no * sizeof(double));
        o2 = (double *)malloc((size_t)no * sizeof(double));
        for (n = 0; n < 3; n++) {
            kern_tensor *t = n == 0 ? &d.q : (n == 1 ? &d.k : &d.v);
            float *gr = n == 0 ? gq : (n == 1 ? gk : gv);
            int64_t cnt = t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3];
            for (x = 0; x < cnt; x++) {
                int64_t e = x % t->shape[3], r = x / t->shape[3];
                int64_t i = r % t->shape[2], h = (r / t->shape[2]) % t->shape[1], b = r / (t->shape[1] * t->shape[2]);
                float *el = (float *)t->data + toff(t, b, h, i, e), keep = *el;
                double lp = 0, lm = 0, fd;
                int64_t y;
                *el = keep + (float)hstep;
                ref_fwd(&c, &d, o1, NULL, NULL);
                *el = keep - (float)hstep;
                ref_fwd(&c, &d, o2, NULL, NULL);
                *el = keep;
                for (y = 0; y < no; y++) {
                    int64_t ee = y % c.Dv, rr = y / c.Dv;
                    int64_t ii = rr % c.Lq, hh = (rr / c.Lq) % c.Hq, bb = rr / (c.Lq * c.Hq);
                    double gd = kt_get(g.dop, c.dt, toff(&g.dout, bb, hh, ii, ee));
                    lp += o1[y] * gd;
                    lm += o2[y] * gd;
                }
                fd = (lp - lm) / (2 * ((double)(keep + (float)hstep) - (double)keep));
                KT_CHECK(fabs(fd - gr[x]) <= 2e-3 + 2e-3 * fabs(fd), "variant %d tensor %lld elem %lld: fd %g grad %g",
                         v, (long long)n, (long long)x, fd, (double)gr[x]);
            }
        }
        free(o1);
        free(o2);
        free(gq);
        free(gk);
        free(gv);
        tg_free(&g);
        td_free(&d);
    }
}

/* ------------------------------------------------------------ errors */

#define FWD_ERR(expr, st, needle)                                             \
    do {                                                                      \
        kt_poison(d.op, d.ob);                                                \
        kt_poison(d.lsep, 4 * (size_t)(c.B * c.Hq * c.Lq));                   \
        KT_ERROR(expr, st, needle);                                           \
        KT_CHECK(kt_poisoned(d.op, d.ob), "out written on error (%s)", needle);  \
        KT_CHECK(kt_poisoned(d.lsep, 4 * (size_t)(c.B * c.Hq * c.Lq)), "lse written on error (%s)", needle); \
    } while (0)

KT_TEST(errors_forward) {
    tcase c = tc_default();
    kt_rng rng = kt_rng_make(1);
    tdata d;
    kern_sdpa_params p;
    kern_tensor t, m;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    uint8_t mb[64];
    int32_t kl[2] = {7, 7};
    c.B = 2; c.Hq = 4; c.Hkv = 2; c.Lq = 7; c.Lk = 7; c.D = 16; c.Dv = 16;
    td_make(&c, &d, &rng);
    p = tc_params(&c, &d);
    FWD_ERR(kern_sdpa(ctx, NULL, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "q is NULL");
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, NULL, &p), KERN_ERR_ARG, "out is NULL");
    t = d.k; t.shape[0] = 1;
    FWD_ERR(kern_sdpa(ctx, &d.q, &t, &d.v, &d.o, &p), KERN_ERR_SHAPE, "batch mismatch");
    t = d.v; t.shape[1] = 1;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &t, &d.o, &p), KERN_ERR_SHAPE, "v.shape[1]=1");
    t = d.k; t.shape[3] = 8;
    FWD_ERR(kern_sdpa(ctx, &d.q, &t, &d.v, &d.o, &p), KERN_ERR_SHAPE, "k.shape[3]=8");
    t = d.v; t.shape[2] = 6;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &t, &d.o, &p), KERN_ERR_SHAPE, "v.shape[2]=6");
    t = d.o; t.shape[3] = 8;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &t, &p), KERN_ERR_SHAPE, "out.shape");
    {
        kern_tensor k3 = d.k, v3 = d.v;
        k3.shape[1] = 3; v3.shape[1] = 3;
        FWD_ERR(kern_sdpa(ctx, &d.q, &k3, &v3, &d.o, &p), KERN_ERR_SHAPE, "not a multiple of Hkv=3");
    }
    p.enable_gqa = 0;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "needs enable_gqa");
    p = tc_params(&c, &d);
    t = d.k; t.stride[3] = 2;
    FWD_ERR(kern_sdpa(ctx, &d.q, &t, &d.v, &d.o, &p), KERN_ERR_LAYOUT, "k.stride[3]=2");
    t = d.k; t.dtype = KERN_BF16;
    FWD_ERR(kern_sdpa(ctx, &d.q, &t, &d.v, &d.o, &p), KERN_ERR_DTYPE, "k.dtype=bf16");
    t = d.q; t.dtype = KERN_I32;
    FWD_ERR(kern_sdpa(ctx, &t, &d.k, &d.v, &d.o, &p), KERN_ERR_DTYPE, "q.dtype=i32");
    t = d.q; t.ndim = 3;
    FWD_ERR(kern_sdpa(ctx, &t, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "q has 3 dims");
    /* masks */
    memset(mb, 1, sizeof mb);
    m = kern_tensor_2d(mb, KERN_BOOL, 3, 7);
    p.attn_mask = &m;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "attn_mask.shape[0]=3");
    m = kern_tensor_2d(mb, KERN_I32, 1, 7);
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_DTYPE, "attn_mask.dtype=i32");
    p = tc_params(&c, &d);
    p.dropout_p = 1.0f;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "dropout_p=1");
    p.dropout_p = -0.5f;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "dropout_p=-0.5");
    p.dropout_p = NAN;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "dropout_p");
    p = tc_params(&c, &d);
    p.window_set = 1;
    p.window_left = -2;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "window_left=-2");
    p = tc_params(&c, &d);
    p.softcap = -1.0f;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "softcap=-1");
    p = tc_params(&c, &d);
    p.scale = INFINITY;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "scale=inf");
    /* k_lens */
    p = tc_params(&c, &d);
    t = kern_tensor_1d(kl, KERN_I32, 2);
    p.k_lens = &t;
    kl[1] = 8;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_INDEX, "k_lens[1]=8");
    kl[1] = -1;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_INDEX, "k_lens[1]=-1");
    kl[1] = 3;
    t.dtype = KERN_F32;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_DTYPE, "k_lens.dtype=f32");
    t = kern_tensor_1d(kl, KERN_I32, 1);
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "k_lens must be [B]");
    /* lse */
    p = tc_params(&c, &d);
    t = d.lse;
    t.dtype = KERN_F16;
    p.lse = &t;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_DTYPE, "lse.dtype=f16");
    t = d.lse;
    t.shape[2] = 3;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "lse.shape");
    /* aliasing */
    p = tc_params(&c, &d);
    t = d.o;
    t.data = d.qp;
    KT_ERROR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &t, &p), KERN_ERR_ARG, "out overlaps input q");
    t = d.lse;
    t.data = d.op;
    p.lse = &t;
    FWD_ERR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "outputs out and lse overlap");
    td_free(&d);
}

KT_TEST(errors_varlen_backward) {
    tcase c = tc_default();
    kt_rng rng = kt_rng_make(2);
    tdata d;
    tgrad g;
    kern_sdpa_params p;
    kern_tensor t, q3, k3, v3, o3, cq, ck;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    int64_t cu[3] = {0, 4, 7}, cub[3] = {0, 5, 4}, sq[3], sk[3];
    c.B = 1; c.Hq = 2; c.Hkv = 2; c.Lq = 7; c.Lk = 7; c.D = 16; c.Dv = 16;
    td_make(&c, &d, &rng);
    tg_make(&c, &g, &rng);
    p = tc_params(&c, &d);
    KT_OK(run_fwd(ctx, &c, &d));
    /* backward: shapes and aliasing, nothing written */
    t = g.dq;
    t.shape[3] = 8;
    kt_poison(g.dqp, g.dqb);
    kt_poison(g.dkp, g.dkb);
    kt_poison(g.dvp, g.dvb);
    KT_ERROR(kern_sdpa_backward(ctx, &d.q, &d.k, &d.v, &d.o, &g.dout, &d.lse, &t, &g.dk, &g.dv, &p),
             KERN_ERR_SHAPE, "dq.shape");
    KT_ERROR(kern_sdpa_backward(ctx, &d.q, &d.k, &d.v, &d.o, &g.dout, NULL, &g.dq, &g.dk, &g.dv, &p),
             KERN_ERR_ARG, "lse is NULL");
    t = g.dk;
    t.data = g.dqp;
    KT_ERROR(kern_sdpa_backward(ctx, &d.q, &d.k, &d.v, &d.o, &g.dout, &d.lse, &g.dq, &t, &g.dv, &p),
             KERN_ERR_ARG, "overlap");
    t = g.dv;
    t.data = d.vp;
    KT_ERROR(kern_sdpa_backward(ctx, &d.q, &d.k, &d.v, &d.o, &g.dout, &d.lse, &g.dq, &g.dk, &t, &p),
             KERN_ERR_ARG, "dv overlaps input v");
    t = g.dout;
    t.stride[3] = 3;
    KT_ERROR(kern_sdpa_backward(ctx, &d.q, &d.k, &d.v, &d.o, &t, &d.lse, &g.dq, &g.dk, &g.dv, &p),
             KERN_ERR_LAYOUT, "dout.stride[3]=3");
    KT_CHECK(kt_poisoned(g.dqp, g.dqb) && kt_poisoned(g.dkp, g.dkb) && kt_poisoned(g.dvp, g.dvb),
             "gradients written on error");
    /* varlen: q [7,2,16] etc. as [T,H,D] */
    sq[0] = 7; sq[1] = 2; sq[2] = 16;
    sk[0] = 7; sk[1] = 2; sk[2] = 16;
    kern_tensor_init(&q3, d.qp, KERN_F32, 3, sq);
    kern_tensor_init(&k3, d.kp, KERN_F32, 3, sk);
    kern_tensor_init(&v3, d.vp, KERN_F32, 3, sk);
    kern_tensor_init(&o3, d.op, KERN_F32, 3, sq);
    cq = kern_tensor_1d(cu, KERN_I64, 3);
    ck = kern_tensor_1d(cub, KERN_I64, 3);
    memset(&p, 0, sizeof p);
    kt_poison(d.op, d.ob);
    KT_ERROR(kern_sdpa_varlen(ctx, &q3, &k3, &v3, &o3, &cq, &ck, 4, 5, &p), KERN_ERR_INDEX,
             "not increasing");
    cub[2] = 6;
    KT_ERROR(kern_sdpa_varlen(ctx, &q3, &k3, &v3, &o3, &cq, &ck, 4, 5, &p), KERN_ERR_INDEX,
             "cu_seqlens_k[2]=6 but the packed tensor has 7 rows");
    cub[2] = 7;
    KT_ERROR(kern_sdpa_varlen(ctx, &q3, &k3, &v3, &o3, &cq, &ck, 3, 5, &p), KERN_ERR_INDEX,
             "length 4 > max_seqlen 3");
    cu[0] = 1;
    KT_ERROR(kern_sdpa_varlen(ctx, &q3, &k3, &v3, &o3, &cq, &ck, 4, 5, &p), KERN_ERR_INDEX,
             "cu_seqlens_q[0]=1");
    cu[0] = 0;
    ck.dtype = KERN_F32;
    KT_ERROR(kern_sdpa_varlen(ctx, &q3, &k3, &v3, &o3, &cq, &ck, 4, 5, &p), KERN_ERR_DTYPE,
             "cu_seqlens_k.dtype=f32");
    ck.dtype = KERN_I64;
    p.attn_mask = &d.lse;
    KT_ERROR(kern_sdpa_varlen(ctx, &q3, &k3, &v3, &o3, &cq, &ck, 4, 5, &p), KERN_ERR_UNSUPPORTED,
             "attn_mask");
    KT_CHECK(kt_poisoned(d.op, d.ob), "varlen out written on error");
    p.attn_mask = NULL;
    KT_OK(kern_sdpa_varlen(ctx, &q3, &k3, &v3, &o3, &cq, &ck, 4, 5, &p));
    tg_free(&g);
    td_free(&d);
}

/* Empty and degenerate sizes. */
KT_TEST(edge_sizes) {
    int v;
    for (v = 0; v < 4; v++) {
        tcase c = tc_default();
        kt_rng rng = kt_rng_make(3);
        tdata d;
        kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
        c.B = 2; c.Hq = 2; c.Hkv = 2; c.Lq = 5; c.Lk = 5;
        if (v == 0) c.Lk = 0;   /* no keys: zeros, -inf */
        if (v == 1) c.Lq = 0;   /* nothing to do */
        if (v == 2) c.Dv = 0;   /* lse only */
        if (v == 3) c.B = 0;
        td_make(&c, &d, &rng);
        kt_context("variant %d", v);
        KT_OK(run_fwd(ctx, &c, &d));
        if (v == 0) {
            int64_t i;
            for (i = 0; i < c.B * c.Hq * c.Lq * c.Dv; i++) KT_CHECK(((float *)d.op)[i] == 0.0f, "out %lld", (long long)i);
            for (i = 0; i < c.B * c.Hq * c.Lq; i++) KT_CHECK(((float *)d.lsep)[i] == -INFINITY, "lse %lld", (long long)i);
        }
        if (v == 2) {
            double wl[64];
            ref_fwd(&c, &d, NULL, wl, NULL);
            kt_assert_close("lse", d.lsep, KERN_F32, wl, c.B * c.Hq * c.Lq, kt_tol_scaled(KERN_F32, 20));
        }
        if (v == 0 || v == 2) { /* backward too */
            tgrad g;
            tg_make(&c, &g, &rng);
            KT_OK(run_bwd(ctx, &c, &d, &g));
            if (v == 0) {
                int64_t i;
                for (i = 0; i < c.B * c.Hq * c.Lq * c.D; i++) KT_CHECK(((float *)g.dqp)[i] == 0.0f, "dq %lld", (long long)i);
            }
            tg_free(&g);
        }
        td_free(&d);
    }
}

/* ------------------------------------------------ hardening (issue 19) */

/* Window bounds up to INT64_MAX mean "unbounded" in effect: the result
 * must be the bits of window -1 (the bound overflowed and gave all-zero
 * rows). Top-left and bottom-right (negative offset when Lq > Lk), the
 * panel and the rows paths, forward and backward. */
KT_TEST(window_extreme_bounds) {
    static const int64_t W[][2] = {{-1, INT64_MAX}, {INT64_MAX, -1}, {INT64_MAX, INT64_MAX},
                                   {INT64_MAX - 3, INT64_MAX - 5}};
    int v, w;
    for (v = 0; v < 4; v++) {
        tcase c = tc_default();
        kt_rng rng = kt_rng_make(40 + (uint64_t)v);
        tdata d;
        tgrad g;
        unsigned char *o1, *q1, *k1, *v1;
        kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
        c.Hq = 2; c.Hkv = 1;
        c.Lq = v & 1 ? 70 : 3;
        c.Lk = 40;
        c.causal = v < 2;
        c.bottom_right = v >= 2;
        c.window = 1;
        c.wl = c.wr = -1;
        td_make(&c, &d, &rng);
        tg_make(&c, &g, &rng);
        KT_OK(run_fwd(ctx, &c, &d));
        KT_OK(run_bwd(ctx, &c, &d, &g));
        o1 = (unsigned char *)malloc(d.ob);
        q1 = (unsigned char *)malloc(g.dqb);
        k1 = (unsigned char *)malloc(g.dkb);
        v1 = (unsigned char *)malloc(g.dvb);
        memcpy(o1, d.op, d.ob);
        memcpy(q1, g.dqp, g.dqb);
        memcpy(k1, g.dkp, g.dkb);
        memcpy(v1, g.dvp, g.dvb);
        for (w = 0; w < 4; w++) {
            c.wl = W[w][0];
            c.wr = W[w][1];
            kt_context("Lq %lld %s, window (%lld, %lld)", (long long)c.Lq,
                       c.bottom_right ? "bottom-right" : "top-left", (long long)c.wl,
                       (long long)c.wr);
            KT_OK(run_fwd(ctx, &c, &d));
            kt_assert_bytes_equal("out", o1, d.op, d.ob);
            KT_OK(run_bwd(ctx, &c, &d, &g));
            kt_assert_bytes_equal("dq", q1, g.dqp, g.dqb);
            kt_assert_bytes_equal("dk", k1, g.dkp, g.dkb);
            kt_assert_bytes_equal("dv", v1, g.dvp, g.dvb);
        }
        free(o1); free(q1); free(k1); free(v1);
        tg_free(&g);
        td_free(&d);
    }
}

/* A negative scale is accepted, as by PyTorch (any float scale): the
 * softmax is over -|scale| q.k, forward and backward against the
 * reference. */
KT_TEST(negative_scale) {
    int v;
    for (v = 0; v < 3; v++) {
        tcase c = tc_default();
        c.Hq = 2; c.Hkv = 1; c.Lq = v == 1 ? 70 : 9; c.Lk = 33;
        c.scale = v == 2 ? -3.0f : -0.3f;
        c.causal = v == 2;
        c.softcap = v == 1 ? 2.0f : 0.0f;
        fwd_case(&c, 60 + (uint64_t)v);
        bwd_case(&c, 60 + (uint64_t)v);
    }
}

/* max_seqlen_q/k far above the actual lengths (up to INT64_MAX, with
 * GQA) must not drive the work or overflow: the same bits as the exact
 * maxima, at once. With dropout the mask index uses max_seqlen as given
 * (documented), so only completion is checked there. */
KT_TEST(varlen_huge_max_seqlen) {
    static const int64_t M[] = {(int64_t)1 << 34, (int64_t)1 << 40, INT64_MAX};
    const int64_t Tq = 4, Tk = 6, Hq = 4, Hkv = 2, D = 16;
    int64_t cuq[3] = {0, 1, 4}, cuk[3] = {0, 2, 6}, sq[3] = {4, 4, 16}, sk[3] = {6, 2, 16};
    int64_t sl[2] = {4, 4};
    float *q = (float *)kt_alloc(Tq * Hq * D * 4, "q"), *k = (float *)kt_alloc(Tk * Hkv * D * 4, "k");
    float *vv = (float *)kt_alloc(Tk * Hkv * D * 4, "v"), *o = (float *)kt_alloc(Tq * Hq * D * 4, "out");
    float *o1 = (float *)kt_alloc(Tq * Hq * D * 4, "out1"), *l = (float *)kt_alloc(Tq * Hq * 4, "lse");
    float *l1 = (float *)kt_alloc(Tq * Hq * 4, "lse1");
    float *dout = (float *)kt_alloc(Tq * Hq * D * 4, "dout");
    float *dq = (float *)kt_alloc(Tq * Hq * D * 4, "dq"), *dk = (float *)kt_alloc(Tk * Hkv * D * 4, "dk");
    float *dv = (float *)kt_alloc(Tk * Hkv * D * 4, "dv");
    float *dq1 = (float *)kt_alloc(Tq * Hq * D * 4, "dq1");
    kern_tensor tq, tk, tv, to, tl, cq = kern_tensor_1d(cuq, KERN_I64, 3);
    kern_tensor ck = kern_tensor_1d(cuk, KERN_I64, 3), tdo, tdq, tdk, tdv;
    kern_sdpa_params p;
    kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
    kt_rng r = kt_rng_make(9);
    int i, j;
    kt_fill_normal(&r, q, KERN_F32, Tq * Hq * D, 1.0);
    kt_fill_normal(&r, k, KERN_F32, Tk * Hkv * D, 1.0);
    kt_fill_normal(&r, vv, KERN_F32, Tk * Hkv * D, 1.0);
    kt_fill_normal(&r, dout, KERN_F32, Tq * Hq * D, 1.0);
    KT_OK(kern_tensor_init(&tq, q, KERN_F32, 3, sq));
    KT_OK(kern_tensor_init(&tk, k, KERN_F32, 3, sk));
    KT_OK(kern_tensor_init(&tv, vv, KERN_F32, 3, sk));
    KT_OK(kern_tensor_init(&to, o, KERN_F32, 3, sq));
    KT_OK(kern_tensor_init(&tl, l, KERN_F32, 2, sl));
    KT_OK(kern_tensor_init(&tdo, dout, KERN_F32, 3, sq));
    KT_OK(kern_tensor_init(&tdq, dq, KERN_F32, 3, sq));
    KT_OK(kern_tensor_init(&tdk, dk, KERN_F32, 3, sk));
    KT_OK(kern_tensor_init(&tdv, dv, KERN_F32, 3, sk));
    memset(&p, 0, sizeof p);
    p.enable_gqa = 1;
    p.lse = &tl;
    p.causal_bottom_right = 1;
    KT_OK(kern_sdpa_varlen(ctx, &tq, &tk, &tv, &to, &cq, &ck, 3, 4, &p));
    KT_OK(kern_sdpa_varlen_backward(ctx, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv, &cq, &ck,
                                    3, 4, &p));
    memcpy(o1, o, Tq * Hq * D * 4);
    memcpy(l1, l, Tq * Hq * 4);
    memcpy(dq1, dq, Tq * Hq * D * 4);
    for (i = 0; i < 3; i++)
        for (j = 0; j < 3; j++) {
            kt_context("max_seqlen_q=%lld max_seqlen_k=%lld", (long long)(j == 1 ? 3 : M[i]),
                       (long long)(j == 2 ? 4 : M[i]));
            kt_poison(o, Tq * Hq * D * 4);
            KT_OK(kern_sdpa_varlen(ctx, &tq, &tk, &tv, &to, &cq, &ck, j == 1 ? 3 : M[i],
                                   j == 2 ? 4 : M[i], &p));
            kt_assert_bytes_equal("out", o1, o, Tq * Hq * D * 4);
            kt_assert_bytes_equal("lse", l1, l, Tq * Hq * 4);
            kt_poison(dq, Tq * Hq * D * 4);
            KT_OK(kern_sdpa_varlen_backward(ctx, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv,
                                            &cq, &ck, j == 1 ? 3 : M[i], j == 2 ? 4 : M[i], &p));
            kt_assert_bytes_equal("dq", dq1, dq, Tq * Hq * D * 4);
        }
    p.dropout_p = 0.5f;
    p.seed = 3;
    KT_OK(kern_sdpa_varlen(ctx, &tq, &tk, &tv, &to, &cq, &ck, INT64_MAX, INT64_MAX, &p));
    KT_OK(kern_sdpa_varlen_backward(ctx, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv, &cq, &ck,
                                    INT64_MAX, INT64_MAX, &p));
    for (i = 0; i < Tq * Hq * D; i++)
        if (!isfinite(o[i]) || !isfinite(dq[i])) {
            KT_CHECK(isfinite(o[i]) && isfinite(dq[i]), "element %d not finite", i);
            break;
        }
    kt_free(q); kt_free(k); kt_free(vv); kt_free(o); kt_free(o1); kt_free(l); kt_free(l1);
    kt_free(dout); kt_free(dq); kt_free(dk); kt_free(dv); kt_free(dq1);
}

/* Found by fuzz_sdpa (inputs in tests/fuzz/corpus/sdpa). */
KT_TEST(fuzz_findings) {
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    /* outputs whose elements overlap: lse with a zero head stride gave
     * the last head's value for every head */
    {
        tcase c = tc_default();
        kt_rng rng = kt_rng_make(70);
        tdata d;
        kern_sdpa_params p;
        c.Hq = 2; c.Hkv = 1; c.Lq = 3; c.Lk = 3;
        td_make(&c, &d, &rng);
        p = tc_params(&c, &d);
        d.lse.stride[1] = 0;
        kt_poison(d.op, d.ob);
        KT_ERROR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_LAYOUT, "lse has overlapping elements");
        d.lse.stride[1] = c.Lq;
        d.o.stride[2] = 0;
        KT_ERROR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_LAYOUT, "out has overlapping elements");
        KT_CHECK(kt_poisoned(d.op, d.ob), "out written on error");
        td_free(&d);
    }
    /* Hq = 0 with Hkv > 0: the backward writes zero dk, dv (it left them) */
    {
        float k[12], v[6], dk[12], dv[6];
        int64_t sq[4] = {1, 0, 3, 2}, so[4] = {1, 0, 3, 1}, sk[4] = {1, 2, 3, 2}, sv[4] = {1, 2, 3, 1};
        int64_t sl[3] = {1, 0, 3};
        kern_tensor tq, tk, tv, to, tl, tdo, tdq, tdk, tdv;
        kern_sdpa_params p;
        int i;
        memset(&p, 0, sizeof p);
        p.enable_gqa = 1;
        KT_OK(kern_tensor_init(&tq, NULL, KERN_F32, 4, sq));
        KT_OK(kern_tensor_init(&tdq, NULL, KERN_F32, 4, sq));
        KT_OK(kern_tensor_init(&to, NULL, KERN_F32, 4, so));
        KT_OK(kern_tensor_init(&tdo, NULL, KERN_F32, 4, so));
        KT_OK(kern_tensor_init(&tl, NULL, KERN_F32, 3, sl));
        KT_OK(kern_tensor_init(&tk, k, KERN_F32, 4, sk));
        KT_OK(kern_tensor_init(&tdk, dk, KERN_F32, 4, sk));
        KT_OK(kern_tensor_init(&tv, v, KERN_F32, 4, sv));
        KT_OK(kern_tensor_init(&tdv, dv, KERN_F32, 4, sv));
        for (i = 0; i < 12; i++) k[i] = 1.0f;
        for (i = 0; i < 6; i++) v[i] = 1.0f;
        kt_poison(dk, sizeof dk);
        kt_poison(dv, sizeof dv);
        KT_OK(kern_sdpa_backward(ctx, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv, &p));
        for (i = 0; i < 12; i++) KT_CHECK(dk[i] == 0.0f, "dk[%d]=%g", i, (double)dk[i]);
        for (i = 0; i < 6; i++) KT_CHECK(dv[i] == 0.0f, "dv[%d]=%g", i, (double)dv[i]);
    }
    /* a size-1 dim may have any stride (INT64_MAX): the same bits as a
     * contiguous view (a one-past step of the key loop overflowed) */
    {
        tcase c = tc_default();
        kt_rng rng = kt_rng_make(71);
        tdata d;
        kern_sdpa_params p;
        unsigned char *o1;
        int i;
        c.Hq = 2; c.Hkv = 1; c.Lq = 1; c.Lk = 1; c.D = 2; c.Dv = 1;
        td_make(&c, &d, &rng);
        p = tc_params(&c, &d);
        o1 = (unsigned char *)malloc(d.ob);
        KT_OK(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p));
        memcpy(o1, d.op, d.ob);
        for (i = 0; i < 3; i++) d.v.stride[i] = INT64_MAX;
        d.v.stride[3] = INT64_MAX;
        KT_OK(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p));
        kt_assert_bytes_equal("out", o1, d.op, d.ob);
        free(o1);
        td_free(&d);
    }
    /* empty k/v (Lk = 0) and v with Dv = 0 may have NULL data */
    {
        tcase c = tc_default();
        kt_rng rng = kt_rng_make(72);
        tdata d;
        tgrad g;
        kern_sdpa_params p;
        int v2;
        for (v2 = 0; v2 < 2; v2++) {
            c = tc_default();
            if (v2 == 0) c.Lk = 0; else c.Dv = 0;
            td_make(&c, &d, &rng);
            tg_make(&c, &g, &rng);
            p = tc_params(&c, &d);
            if (v2 == 0) { d.k.data = NULL; d.v.data = NULL; }
            else { d.v.data = NULL; d.o.data = NULL; }
            KT_OK(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p));
            if (v2 == 0) { g.dk.data = NULL; g.dv.data = NULL; }
            else { g.dv.data = NULL; g.dout.data = NULL; }
            KT_OK(kern_sdpa_backward(ctx, &d.q, &d.k, &d.v, &d.o, &g.dout, &d.lse, &g.dq, &g.dk, &g.dv, &p));
            tg_free(&g);
            td_free(&d);
        }
    }
}

/* ------------------------------------------------- relative position */

/* SAM's decomposed relative position fused into the forward, against the
 * reference that materializes the bias: awkward grids (3x5 takes the rows
 * path, 5x3 with GQA a partial panel), SAM's 14x14 windows, a 64x64
 * global grid at small D, query and key grids of different sizes. */
KT_TEST(fwd_relpos_grids) {
    static const int64_t G[][4] = {{3, 5, 3, 5},   {14, 14, 14, 14}, {5, 3, 5, 3}, {7, 9, 7, 9},
                                   {1, 1, 1, 1},   {2, 3, 4, 6},     {4, 6, 2, 3}, {3, 5, 6, 4},
                                   {16, 16, 16, 16}};
    int ci;
    for (ci = 0; ci < 9; ci++) {
        tcase c = tc_default();
        tc_rel(&c, G[ci][0], G[ci][1], G[ci][2], G[ci][3]);
        c.D = c.Dv = ci == 1 ? 64 : 16;
        c.B = 1 + (ci & 1);
        c.Hq = ci == 2 ? 4 : 1 + (ci % 3);
        c.Hkv = ci == 2 ? 2 : c.Hq;
        c.blhd = ci == 3;
        c.pad = ci == 3 ? 5 : 0;
        fwd_case(&c, 100 + (uint64_t)ci);
    }
}

KT_TEST(fwd_relpos_global_64x64) {
    tcase c = tc_default();
#ifdef KT_SANITIZER
    tc_rel(&c, 24, 24, 24, 24);
#else
    tc_rel(&c, 64, 64, 64, 64);
#endif
    c.D = c.Dv = 8;
    fwd_case(&c, 200);
}

/* bf16 and f16 inputs, tables in another dtype; every option with the
 * bias (mask, causal, window, softcap, k_lens, dropout, scale). */
KT_TEST(fwd_relpos_dtypes_options) {
    static const kern_dtype dts[] = {KERN_BF16, KERN_F16, KERN_F32};
    int ci;
    for (ci = 0; ci < 9; ci++) {
        tcase c = tc_default();
        tc_rel(&c, ci & 1 ? 14 : 6, ci & 1 ? 14 : 7, ci & 1 ? 14 : 6, ci & 1 ? 14 : 7);
        c.dt = dts[ci % 3];
        c.rdt = dts[(ci + 1) % 3];
        c.D = c.Dv = ci % 3 == 0 ? 32 : 16;
        c.B = 2;
        c.Hq = 2;
        c.Hkv = ci == 4 ? 1 : 2;
        switch (ci) {
        case 0: c.mask_kind = 2; break;
        case 1: c.causal = 1; break;
        case 2: c.window = 1; c.wl = 5; c.wr = 3; break;
        case 3: c.softcap = 4.0f; break;
        case 4: c.klens = 1; break;
        case 5: c.dropout = 0.25f; break;
        case 6: c.scale = 0.3f; c.mask_kind = 1; break;
        case 7: c.mask_kind = 3; c.blhd = 1; break;
        default: c.bottom_right = 1; c.klens = 2; break;
        }
        fwd_case(&c, 300 + (uint64_t)ci);
    }
}

/* rel_pos_interpolate: tables shorter and longer than 2*max-1 resized as
 * HF does; a decode-shaped problem (key split, partials in the shared
 * workspace ahead of the resized tables). */
KT_TEST(fwd_relpos_interpolate_and_split) {
    tcase c = tc_default();
    tc_rel(&c, 14, 14, 14, 14);
    c.rinterp = 1;
    c.rnh = 7;
    c.rnw = 40;
    fwd_case(&c, 400);
    c = tc_default();
    tc_rel(&c, 1, 4, 32, 32);
    c.rinterp = 1;
    c.rnh = 63;
    c.rnw = 5;
    fwd_case(&c, 401);
}

/* The fused bias against kern_sdpa with the same bias materialized as an
 * f32 attn_mask [B,Hq,Lq,Lk] (the unfused path). */
KT_TEST(fwd_relpos_vs_materialized) {
    tcase c = tc_default();
    tdata d;
    kt_rng rng = kt_rng_make(500);
    int64_t b, h, i, j, n, nm;
    double *want;
    float *bias;
    kern_tensor bt;
    tc_rel(&c, 14, 14, 14, 14);
    c.B = 2;
    c.Hq = c.Hkv = 3;
    c.D = c.Dv = 32;
    td_make(&c, &d, &rng);
    n = c.B * c.Hq * c.Lq * c.Dv;
    nm = c.B * c.Hq * c.Lq * c.Lk;
    bias = (float *)malloc((size_t)nm * 4);
    want = (double *)malloc((size_t)n * sizeof(double));
    for (b = 0; b < c.B; b++)
        for (h = 0; h < c.Hq; h++)
            for (i = 0; i < c.Lq; i++)
                for (j = 0; j < c.Lk; j++)
                    bias[((b * c.Hq + h) * c.Lq + i) * c.Lk + j] = (float)rel_bias(&c, &d, b, h, i, j);
    bt = kern_tensor_4d(bias, KERN_F32, c.B, c.Hq, c.Lq, c.Lk);
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        kern_sdpa_params p;
        int64_t t;
        kt_context("%s", kern_isa_name(isa));
        memset(&p, 0, sizeof p);
        p.attn_mask = &bt;
        KT_OK(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p));
        for (t = 0; t < n; t++) want[t] = ((const float *)d.op)[t];
        p = tc_params(&c, &d);
        p.lse = NULL;
        KT_OK(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p));
        kt_assert_close("fused vs materialized", d.op, KERN_F32, want, n, fwd_tol(KERN_F32));
        { /* caller workspace: the resized tables live in it too */
            size_t ws = 0;
            void *mem;
            for (t = 0; t < n; t++) want[t] = ((const float *)d.op)[t];
            KT_OK(kern_sdpa_workspace_size(ctx, &d.q, &d.k, &d.v, &d.o, &p, &ws));
            mem = kt_alloc(ws ? ws : 1, "workspace");
            p.workspace = mem;
            p.workspace_size = ws;
            kt_poison(d.op, d.ob);
            KT_OK(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p));
            kt_assert_close("caller workspace", d.op, KERN_F32, want, n, kt_tol_scaled(KERN_F32, 0));
            p.workspace_size = ws - 1;
            KT_ERROR(kern_sdpa(ctx, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "workspace");
            kt_free(mem);
        }
    }
    free(bias);
    free(want);
    td_free(&d);
}

KT_TEST(errors_relpos) {
    tcase c = tc_default();
    tdata d;
    kt_rng rng = kt_rng_make(600);
    kern_sdpa_params p, q0;
    kern_tensor bad, ii;
    int32_t ibuf[64];
    tc_rel(&c, 3, 5, 3, 5);
    td_make(&c, &d, &rng);
    q0 = tc_params(&c, &d);
    p = q0; p.rel_pos_w = NULL;
    FWD_ERR(kern_sdpa(NULL, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "rel_pos_w");
    p = q0; p.rel_pos_h = NULL;
    FWD_ERR(kern_sdpa(NULL, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_ARG, "rel_pos_h");
    p = q0; p.rel_q_w = 4;
    FWD_ERR(kern_sdpa(NULL, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "rel_q_h x rel_q_w");
    p = q0; p.rel_k_h = 5; p.rel_k_w = 3;
    /* 5x3 keys: the tables are 2*max-1 = 9 and 5 rows, not 5 and 9 */
    FWD_ERR(kern_sdpa(NULL, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "rel_pos_h has 5 rows");
    p = q0; p.rel_k_h = -3; p.rel_k_w = -5;
    FWD_ERR(kern_sdpa(NULL, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "rel_k_h x rel_k_w");
    bad = d.rph; bad.shape[0] = 4;
    p = q0; p.rel_pos_h = &bad;
    FWD_ERR(kern_sdpa(NULL, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "rel_pos_h has 4 rows");
    bad = d.rpw; bad.shape[1] = c.D - 1;
    p = q0; p.rel_pos_w = &bad;
    FWD_ERR(kern_sdpa(NULL, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "rel_pos_w must be [N, D=16]");
    bad = d.rpw; bad.shape[0] = 0;
    p = q0; p.rel_pos_w = &bad; p.rel_pos_interpolate = 1;
    FWD_ERR(kern_sdpa(NULL, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_SHAPE, "rel_pos_w has 0 rows");
    memset(ibuf, 0, sizeof ibuf);
    ii = kern_tensor_2d(ibuf, KERN_I32, 5, 1);
    p = q0; p.rel_pos_h = &ii;
    FWD_ERR(kern_sdpa(NULL, &d.q, &d.k, &d.v, &d.o, &p), KERN_ERR_DTYPE, "rel_pos_h.dtype");
    /* out overlapping a table */
    bad = d.o;
    bad.data = d.rhp;
    bad.dtype = c.rdt;
    p = q0;
    KT_ERROR(kern_sdpa(NULL, &d.q, &d.k, &d.v, &bad, &p), KERN_ERR_ARG, "overlaps input rel_pos_h");
    /* forward only */
    {
        kern_tensor cu;
        int32_t cub[2] = {0, 15};
        kern_tensor q3 = d.q, k3 = d.k, v3 = d.v, o3 = d.o;
        cu = kern_tensor_1d(cub, KERN_I32, 2);
        q3.ndim = k3.ndim = v3.ndim = o3.ndim = 3;
        q3.shape[0] = k3.shape[0] = v3.shape[0] = o3.shape[0] = 15;
        q3.shape[1] = k3.shape[1] = v3.shape[1] = o3.shape[1] = 1;
        q3.shape[2] = k3.shape[2] = v3.shape[2] = o3.shape[2] = c.D;
        q3.stride[0] = k3.stride[0] = v3.stride[0] = o3.stride[0] = c.D;
        q3.stride[1] = k3.stride[1] = v3.stride[1] = o3.stride[1] = c.D;
        q3.stride[2] = k3.stride[2] = v3.stride[2] = o3.stride[2] = 1;
        p = q0; p.lse = NULL;
        FWD_ERR(kern_sdpa_varlen(NULL, &q3, &k3, &v3, &o3, &cu, &cu, 15, 15, &p),
                KERN_ERR_UNSUPPORTED, "dense forward only");
        KT_ERROR(kern_sdpa_backward(NULL, &d.q, &d.k, &d.v, &d.o, &d.o, &d.lse, &d.q, &d.k, &d.v, &p),
                 KERN_ERR_UNSUPPORTED, "dense forward only");
    }
    td_free(&d);
}

KT_MAIN()
