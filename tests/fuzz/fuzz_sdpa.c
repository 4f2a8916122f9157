/* fuzz_sdpa.c — kern_sdpa, kern_sdpa_varlen and both backwards on shapes,
 * strides, dtypes and every option from the input: scale (negative, raw
 * bits), causal top-left/bottom-right, sliding windows up to INT64_MAX,
 * softcap, dropout, GQA, k_lens, masks of every broadcast shape and
 * dtype, lse, cu_seqlens and max_seqlen far above (or below) the actual
 * lengths. Contract: kf.h. Invariant of a successful f32 forward with
 * modest finite inputs: out and lse match a plain double reference (loose
 * tolerance: this catches wrong answers, the unit tests measure accuracy);
 * a successful backward gives finite gradients for finite inputs. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_sdpa.h"
#include "kf.h"
#include "kf_adapt.h"

#include <math.h>

typedef struct sp {
    int varlen, bwd;
    kern_dtype dt;
    int64_t B, Hq, Hkv, Lq, Lk, D, Dv, Tq, Tk, maxq, maxk;
    int64_t cuq[6], cuk[6];
    kern_tensor q, k, v, o, lse, mask, klens, cq, ck, dout, dq, dk, dv;
    kern_sdpa_params p;
    int has_mask, has_klens, has_lse;
} sp;

static float pick_float_param(kf_in *in, int nonneg) {
    uint8_t c = kf_u8(in);
    if (c < 128) return 0.0f;
    if (c < 250) {
        static const float v[8] = {0.125f, 0.5f, 1.0f, 2.0f, 30.0f, 0.01f, 3.0f, 1e-3f};
        float x = v[c & 7];
        return nonneg || !(c & 8) ? x : -x;
    }
    return kern__bits_f32(kf_u32(in));
}

static int64_t pick_window(kf_in *in) {
    uint8_t c = kf_u8(in);
    if (c < 200) return (int64_t)(c % 12) - 1;
    return kf_size(in, 80) - 1;
}

/* [B,H,L,D] dense or [T,H,D] varlen, BHLD or BLHD memory */
static int make4(kf_in *in, kern_tensor *t, const sp *s, int64_t H, int64_t L, int64_t D, int out,
                 const char *what) {
    int64_t sh[4];
    int ok;
    if (s->varlen) {
        sh[0] = L; sh[1] = H; sh[2] = D;
        return kf_tensor(in, t, s->dt, 3, sh, out, what);
    }
    sh[0] = s->B; sh[1] = H; sh[2] = L; sh[3] = D;
    ok = kf_tensor(in, t, s->dt, 4, sh, out, what);
    if (ok && t->data && kf_bool(in, 3) && kern_tensor_is_contiguous(t) && kern_tensor_numel(t) > 0 &&
        kern_tensor_check(t, "", "") == KERN_OK) {
        /* the same bytes as [B,L,H,D] */
        t->stride[1] = D;
        t->stride[2] = H * D;
        t->stride[0] = L * H * D;
    }
    kern_clear_error();
    return ok;
}

static int64_t geti(const void *p, kern_dtype dt, int64_t i) {
    return dt == KERN_I32 ? (int64_t)((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

static int modest(const kern_tensor *t) { /* all values finite and |x| <= 64 */
    int64_t c[KERN_MAX_DIMS] = {0}, o;
    int d;
    if (kern_tensor_numel(t) <= 0) return 1;
    for (;;) {
        double x;
        for (o = 0, d = 0; d < t->ndim; d++) o += c[d] * t->stride[d];
        x = kt_get(t->data, t->dtype, o);
        if (t->dtype != KERN_BOOL && !(fabs(x) <= 64)) return 0;
        for (d = t->ndim - 1; d >= 0; d--) {
            if (++c[d] < t->shape[d]) break;
            c[d] = 0;
        }
        if (d < 0) return 1;
    }
}

/* element offset of (b or token base, h, i, d) */
static int64_t toff(const sp *s, const kern_tensor *t, int64_t base, int64_t h, int64_t i,
                    int64_t d) {
    if (s->varlen) return (base + i) * t->stride[0] + h * t->stride[1] + d * t->stride[2];
    return base * t->stride[0] + h * t->stride[1] + i * t->stride[2] + d * t->stride[3];
}

static void reference_check(const sp *s) {
    const kern_sdpa_params *p = &s->p;
    int64_t b, h, i, j, e, G = s->Hkv > 0 ? s->Hq / s->Hkv : 1;
    double scale = kf_sdpa_scale_used(p, s->D);
    double *sc = (double *)malloc((size_t)(s->Lk + 1) * sizeof(double));
    uint32_t thr = kern_dropout_threshold(p->dropout_p);
    kern_tensor bm;
    if (s->has_mask) {
        int64_t full[4];
        full[0] = s->B; full[1] = s->Hq; full[2] = s->Lq; full[3] = s->Lk;
        kern_tensor_broadcast_to(&s->mask, 4, full, &bm, "kf", "mask");
    }
    for (b = 0; b < s->B; b++) {
        int64_t lq = s->Lq, lk = s->Lk, qb = b, kb = b;
        if (s->varlen) {
            lq = s->cuq[b + 1] - s->cuq[b];
            lk = s->cuk[b + 1] - s->cuk[b];
            qb = s->cuq[b];
            kb = s->cuk[b];
        } else if (s->has_klens) {
            int64_t kl = geti(s->klens.data, s->klens.dtype, b * s->klens.stride[0]);
            if (kl < lk) lk = kl;
        }
        for (h = 0; h < s->Hq; h++)
            for (i = 0; i < lq; i++) {
                int64_t hk = h / G, off = p->causal_bottom_right ? lk - lq : 0;
                double m = -INFINITY, l = 0, lse;
                for (j = 0; j < lk; j++) {
                    double acc = 0, x;
                    int vis = 1;
                    for (e = 0; e < s->D; e++)
                        acc += kt_get(s->q.data, s->dt, toff(s, &s->q, qb, h, i, e)) *
                               kt_get(s->k.data, s->dt, toff(s, &s->k, kb, hk, j, e));
                    x = scale * acc;
                    if (p->softcap > 0) x = p->softcap * tanh(x / p->softcap);
                    if ((p->is_causal || p->causal_bottom_right) && j > i + off) vis = 0;
                    /* window in long double-free form: j - (i + off) vs the bounds */
                    if (kf_sdpa_window_on(p) && p->window_left >= 0 && (double)(i + off - j) > (double)p->window_left) vis = 0;
                    if (kf_sdpa_window_on(p) && p->window_right >= 0 && (double)(j - i - off) > (double)p->window_right) vis = 0;
                    if (s->has_mask) {
                        double mv = kt_get(bm.data, bm.dtype, b * bm.stride[0] + h * bm.stride[1] +
                                                                  i * bm.stride[2] + j * bm.stride[3]);
                        if (bm.dtype == KERN_BOOL) vis &= mv != 0;
                        else x += mv;
                    }
                    sc[j] = vis ? x : -INFINITY;
                    if (sc[j] > m) m = sc[j];
                }
                if (m == -INFINITY) {
                    for (e = 0; e < s->Dv; e++) {
                        double g = kt_get(s->o.data, s->dt, toff(s, &s->o, qb, h, i, e));
                        KF_ASSERT(g == 0, "fully masked row (%lld,%lld,%lld) out %g", (long long)b,
                                  (long long)h, (long long)i, g);
                    }
                    lse = -INFINITY;
                } else {
                    for (j = 0; j < lk; j++) l += exp(sc[j] - m);
                    lse = m + log(l);
                    for (e = 0; e < s->Dv; e++) {
                        double acc = 0, g;
                        for (j = 0; j < lk; j++) {
                            double pj = exp(sc[j] - m) / l;
                            if (p->dropout_p > 0) {
                                uint64_t idx = (((uint64_t)b * (uint64_t)s->Hq + (uint64_t)h) *
                                                    (uint64_t)(s->varlen ? s->maxq : s->Lq) +
                                                (uint64_t)i) * (uint64_t)(s->varlen ? s->maxk : s->Lk) +
                                               (uint64_t)j;
                                pj = kern_dropout_keep(p->seed, p->offset, idx, thr)
                                         ? pj / (1.0 - p->dropout_p) : 0.0;
                            }
                            if (pj != 0) acc += pj * kt_get(s->v.data, s->dt, toff(s, &s->v, kb, hk, j, e));
                        }
                        g = kt_get(s->o.data, s->dt, toff(s, &s->o, qb, h, i, e));
                        KF_ASSERT(fabs(g - acc) <= 1e-3 + 1e-3 * fabs(acc) * (1 + 1.0 / (1.0 - p->dropout_p)),
                                  "out (%lld,%lld,%lld,%lld) = %.9g, reference %.9g", (long long)b,
                                  (long long)h, (long long)i, (long long)e, g, acc);
                    }
                }
                if (s->has_lse) {
                    double g = s->varlen ? ((const float *)s->lse.data)[h * s->lse.stride[0] + (qb + i) * s->lse.stride[1]]
                                         : ((const float *)s->lse.data)[b * s->lse.stride[0] + h * s->lse.stride[1] + i * s->lse.stride[2]];
                    KF_ASSERT((lse == -INFINITY && g == -INFINITY) || fabs(g - lse) <= 1e-3 + 1e-4 * fabs(lse),
                              "lse (%lld,%lld,%lld) = %.9g, reference %.9g", (long long)b,
                              (long long)h, (long long)i, g, lse);
                }
            }
    }
    free(sc);
}

static int all_finite(const kern_tensor *t) {
    int64_t c[KERN_MAX_DIMS] = {0}, o;
    int d;
    if (kern_tensor_numel(t) <= 0) return 1;
    for (;;) {
        for (o = 0, d = 0; d < t->ndim; d++) o += c[d] * t->stride[d];
        if (!isfinite(kt_get(t->data, t->dtype, o))) return 0;
        for (d = t->ndim - 1; d >= 0; d--) {
            if (++c[d] < t->shape[d]) break;
            c[d] = 0;
        }
        if (d < 0) return 1;
    }
}

static void kf_fuzz(kf_in *in) {
    static const kern_dtype DT[3] = {KERN_F32, KERN_BF16, KERN_F16};
    kern_ctx *ctx = kf_ctx_begin(in);
    sp s;
    int ok = 1, G;
    uint8_t c;
    int64_t work;
    memset(&s, 0, sizeof s);
    c = kf_u8(in);
    s.varlen = c & 1;
    s.bwd = (c >> 1) % 3 == 0;
    c = kf_u8(in);
    s.dt = c < 250 ? DT[c % 3] : (kern_dtype)(c % 10);
    s.Hkv = kf_size(in, 3);
    G = (int)kf_int(in, 1, 3);
    s.Hq = s.Hkv <= 64 ? s.Hkv * G : s.Hkv;
    if (kf_bool(in, 32)) s.Hq = kf_size(in, 5);
    s.D = kf_u8(in) < 240 ? kf_int(in, 1, 40) : kf_size(in, 40);
    s.Dv = kf_bool(in, 3) ? s.D : kf_size(in, 40);
    if (s.varlen) {
        int64_t nseq = kf_int(in, 0, 4), i, mq = 0, mk = 0;
        s.cuq[0] = s.cuk[0] = 0;
        for (i = 0; i < nseq; i++) {
            int64_t a = kf_int(in, 0, 40), b = kf_int(in, 0, 40);
            s.cuq[i + 1] = s.cuq[i] + a;
            s.cuk[i + 1] = s.cuk[i] + b;
            if (a > mq) mq = a;
            if (b > mk) mk = b;
        }
        if (kf_bool(in, 24) && nseq > 0) s.cuq[kf_int(in, 0, nseq)] += kf_int(in, -3, 3); /* broken */
        s.B = nseq;
        s.Tq = s.cuq[nseq];
        s.Tk = s.cuk[nseq];
        s.Lq = mq;
        s.Lk = mk;
        c = kf_u8(in);
        s.maxq = c < 128 ? mq : c < 200 ? kf_add(mq, kf_size(in, 100)) : c < 240 ? kf_size(in, 40) : kf__edge[c % KF__NEDGE];
        c = kf_u8(in);
        s.maxk = c < 128 ? mk : c < 200 ? kf_add(mk, kf_size(in, 100)) : c < 240 ? kf_size(in, 40) : kf__edge[c % KF__NEDGE];
        if (s.Tq < 0 || s.Tk < 0) return;
    } else {
        s.B = kf_size(in, 3);
        s.Lq = kf_size(in, 70);
        s.Lk = kf_bool(in, 3) ? s.Lq : kf_size(in, 70);
    }
    /* the harness's budget: attention work and buffers */
    if (s.B > 64 || s.Hq > 64 || s.Hkv > 64 || s.D > 512 || s.Dv > 512 || s.Lq > 4096 || s.Lk > 4096)
        return;
    work = (s.B > 0 ? s.B : 1) * (s.Hq > 0 ? s.Hq : 1) * (s.Lq > 0 ? s.Lq : 1) * (s.Lk > 0 ? s.Lk : 1) *
           ((s.D > 0 ? s.D : 1) + (s.Dv > 0 ? s.Dv : 1));
    if (work > ((int64_t)1 << 22)) return;
    ok &= make4(in, &s.q, &s, s.Hq, s.varlen ? s.Tq : s.Lq, s.D, 0, "q");
    ok &= make4(in, &s.k, &s, s.Hkv, s.varlen ? s.Tk : s.Lk, s.D, 0, "k");
    ok &= make4(in, &s.v, &s, s.Hkv, s.varlen ? s.Tk : s.Lk, s.Dv, 0, "v");
    ok &= make4(in, &s.o, &s, s.Hq, s.varlen ? s.Tq : s.Lq, s.Dv, 1, "out");
    if (!ok) return;
    /* params */
    s.p.is_causal = kf_bool(in, 3);
    s.p.causal_bottom_right = kf_bool(in, 4);
    s.p.scale = pick_float_param(in, 0);
    s.p.enable_gqa = s.Hq != s.Hkv ? !kf_bool(in, 16) : kf_bool(in, 2);
    c = kf_u8(in);
    s.p.dropout_p = c < 200 ? 0.0f : c < 250 ? (float)(c - 200) / 64.0f : kern__bits_f32(kf_u32(in));
    s.p.seed = kf_u64(in);
    s.p.offset = kf_u8(in);
    if (kf_bool(in, 3)) kf_sdpa_window(&s.p, 1, pick_window(in), pick_window(in));
    s.p.softcap = kf_bool(in, 4) ? pick_float_param(in, 1) : 0.0f;
    if (kf_bool(in, 24)) s.p.softcap = -s.p.softcap;
    if (kf_bool(in, 16)) kf_sdpa_scale(&s.p, 1, s.p.scale); /* as given, 0 included */
    /* lse */
    s.has_lse = !kf_bool(in, 3) || s.bwd;
    if (s.has_lse) {
        int64_t sh[3];
        if (s.varlen) {
            sh[0] = s.Hq; sh[1] = s.Tq;
            ok &= kf_tensor(in, &s.lse, kf_bool(in, 48) ? KERN_BF16 : KERN_F32, 2, sh, 1, "lse");
        } else {
            sh[0] = s.B; sh[1] = s.Hq; sh[2] = s.Lq;
            if (kf_bool(in, 48)) sh[2] = kf_add(sh[2], 1);
            ok &= kf_tensor(in, &s.lse, KERN_F32, 3, sh, 1, "lse");
        }
        s.p.lse = &s.lse; /* the backward reads what the forward wrote */
    }
    /* mask (dense only; varlen must reject it) */
    if (kf_bool(in, 3) && (!s.varlen || kf_bool(in, 8))) {
        static const kern_dtype MD[4] = {KERN_BOOL, KERN_F32, KERN_BF16, KERN_F16};
        int64_t sh[KERN_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
        int nd;
        c = kf_u8(in);
        switch (c % 6) {
        case 0: nd = 2; sh[0] = s.Lq; sh[1] = s.Lk; break;
        case 1: nd = 4; sh[0] = s.B; sh[1] = 1; sh[2] = s.Lq; sh[3] = s.Lk; break;
        case 2: nd = 4; sh[0] = s.B; sh[1] = s.Hq; sh[2] = 1; sh[3] = s.Lk; break;
        case 3: nd = 1; sh[0] = s.Lk; break;
        case 4: nd = 3; sh[0] = s.Hq; sh[1] = s.Lq; sh[2] = s.Lk; break;
        default: nd = (int)kf_int(in, 0, 5); sh[0] = kf_size(in, 4); sh[1] = kf_size(in, 4);
                 sh[2] = kf_size(in, 70); sh[3] = kf_size(in, 70); break;
        }
        ok &= kf_tensor(in, &s.mask, kf_u8(in) < 250 ? MD[c >> 6] : KERN_I32, nd, sh, 0, "attn_mask");
        if (ok && s.mask.dtype == KERN_BOOL && s.mask.data && kern_tensor_numel(&s.mask) > 0 &&
            kern_tensor_check(&s.mask, "", "") == KERN_OK) {
            int64_t lo, hi, i2; /* bool: 0/1 mostly */
            kern_tensor_span(&s.mask, &lo, &hi);
            for (i2 = 0; i2 < hi - lo; i2++) ((uint8_t *)s.mask.data)[i2] &= kf_bool(in, 16) ? 0xff : 1;
        }
        kern_clear_error();
        s.has_mask = 1;
        s.p.attn_mask = &s.mask;
    }
    /* k_lens (dense only) */
    if (kf_bool(in, 4) && (!s.varlen || kf_bool(in, 8))) {
        int64_t sh[1], b;
        sh[0] = kf_bool(in, 24) ? kf_size(in, 4) : s.B;
        ok &= kf_tensor(in, &s.klens, kf_bool(in, 2) ? KERN_I32 : KERN_I64, 1, sh, 0, "k_lens");
        if (ok && s.klens.data && kern_tensor_numel(&s.klens) > 0 && kern_tensor_check(&s.klens, "", "") == KERN_OK)
            for (b = 0; b < s.klens.shape[0]; b++)
                kf_set_int(s.klens.data, s.klens.dtype, b * s.klens.stride[0],
                           kf_bool(in, 24) ? kf_add(kf_size(in, 80), -3) : kf_int(in, 0, s.Lk > 0 ? s.Lk : 0));
        kern_clear_error();
        s.has_klens = 1;
        s.p.k_lens = &s.klens;
    }
    if (s.varlen) {
        c = kf_u8(in);
        s.cq = kern_tensor_1d(s.cuq, c & 1 ? KERN_I32 : KERN_I64, s.B + 1);
        s.ck = kern_tensor_1d(s.cuk, c & 2 ? KERN_I32 : KERN_I64, s.B + 1);
        if (c & 1) { int i; int32_t t[6]; for (i = 0; i < 6; i++) t[i] = (int32_t)s.cuq[i]; memcpy(s.cuq, t, sizeof t); }
        if (c & 2) { int i; int32_t t[6]; for (i = 0; i < 6; i++) t[i] = (int32_t)s.cuk[i]; memcpy(s.cuk, t, sizeof t); }
    }
    if (!ok) return;
    if (getenv("KF_DEBUG"))
        fprintf(stderr,
                "sdpa: varlen %d bwd %d %s B %lld Hq %lld Hkv %lld Lq %lld Lk %lld D %lld Dv %lld Tq %lld "
                "Tk %lld maxq %lld maxk %lld causal %d br %d scale %g gqa %d p %g window %d (%lld, %lld) "
                "softcap %g mask %d klens %d lse %d cuq %lld %lld %lld %lld %lld cuk %lld %lld %lld %lld %lld\n",
                s.varlen, s.bwd, kern_dtype_name(s.dt), (long long)s.B, (long long)s.Hq, (long long)s.Hkv,
                (long long)s.Lq, (long long)s.Lk, (long long)s.D, (long long)s.Dv, (long long)s.Tq,
                (long long)s.Tk, (long long)s.maxq, (long long)s.maxk, s.p.is_causal,
                s.p.causal_bottom_right, (double)s.p.scale, s.p.enable_gqa, (double)s.p.dropout_p,
                kf_sdpa_window_on(&s.p), (long long)s.p.window_left, (long long)s.p.window_right,
                (double)s.p.softcap, s.has_mask, s.has_klens, s.has_lse, (long long)s.cuq[0],
                (long long)s.cuq[1], (long long)s.cuq[2], (long long)s.cuq[3], (long long)s.cuq[4],
                (long long)s.cuk[0], (long long)s.cuk[1], (long long)s.cuk[2], (long long)s.cuk[3],
                (long long)s.cuk[4]);
    if (getenv("KF_DEBUG")) {
        const kern_tensor *ts[5];
        int a2, d2;
        ts[0] = &s.q; ts[1] = &s.k; ts[2] = &s.v; ts[3] = &s.o; ts[4] = &s.lse;
        for (a2 = 0; a2 < 4 + s.has_lse; a2++) {
            fprintf(stderr, "  t%d %s data %p shape", a2, kern_dtype_name(ts[a2]->dtype), ts[a2]->data);
            for (d2 = 0; d2 < ts[a2]->ndim; d2++) fprintf(stderr, " %lld", (long long)ts[a2]->shape[d2]);
            fprintf(stderr, " stride");
            for (d2 = 0; d2 < ts[a2]->ndim; d2++) fprintf(stderr, " %lld", (long long)ts[a2]->stride[d2]);
            fprintf(stderr, " values");
            if (ts[a2]->data && a2 < 3) {
                int64_t lo, hi, e2;
                kern_tensor_span(ts[a2], &lo, &hi);
                for (e2 = lo; e2 < hi && e2 < 16; e2++) fprintf(stderr, " %g", kt_get(ts[a2]->data, ts[a2]->dtype, e2));
            }
            fprintf(stderr, "\n");
        }
    }
    kf_call();
    {
        kern_status st = s.varlen ? kern_sdpa_varlen(ctx, &s.q, &s.k, &s.v, &s.o, &s.cq, &s.ck, s.maxq, s.maxk, &s.p)
                                  : kern_sdpa(ctx, &s.q, &s.k, &s.v, &s.o, &s.p);
        int fwd_ok = kf_check(st, s.varlen ? "kern_sdpa_varlen" : "kern_sdpa");
        if (s.varlen && (c & 1)) { int i; int32_t t[6]; memcpy(t, s.cuq, sizeof t); for (i = 5; i >= 0; i--) s.cuq[i] = t[i]; }
        if (s.varlen && (c & 2)) { int i; int32_t t[6]; memcpy(t, s.cuk, sizeof t); for (i = 5; i >= 0; i--) s.cuk[i] = t[i]; }
        if (!fwd_ok) return;
        if (getenv("KF_DEBUG") && s.has_lse && s.lse.data)
            fprintf(stderr, "  lse after: %g %g, out %g %g\n", ((float *)s.lse.data)[0],
                    kern_tensor_numel(&s.lse) > 1 ? ((float *)s.lse.data)[1] : 0.0,
                    s.o.data ? ((float *)s.o.data)[0] : 0.0, kern_tensor_numel(&s.o) > 1 ? ((float *)s.o.data)[1] : 0.0);
        if (s.dt == KERN_F32 && modest(&s.q) && modest(&s.k) && modest(&s.v) &&
            (!s.has_mask || modest(&s.mask)) && isfinite(s.p.scale) && fabsf(s.p.scale) <= 16 &&
            s.p.softcap <= 64 && (s.p.softcap == 0 || s.p.softcap >= 1e-2f))
            reference_check(&s);
    }
    if (!s.bwd) return;
    /* backward from this forward's out and lse */
    ok &= make4(in, &s.dout, &s, s.Hq, s.varlen ? s.Tq : s.Lq, s.Dv, 0, "dout");
    ok &= make4(in, &s.dq, &s, s.Hq, s.varlen ? s.Tq : s.Lq, s.D, 1, "dq");
    ok &= make4(in, &s.dk, &s, s.Hkv, s.varlen ? s.Tk : s.Lk, s.D, 1, "dk");
    ok &= make4(in, &s.dv, &s, s.Hkv, s.varlen ? s.Tk : s.Lk, s.Dv, 1, "dv");
    if (!ok) return;
    if (s.varlen) {
        if (c & 1) { int i; int32_t t[6]; for (i = 0; i < 6; i++) t[i] = (int32_t)s.cuq[i]; memcpy(s.cuq, t, sizeof t); }
        if (c & 2) { int i; int32_t t[6]; for (i = 0; i < 6; i++) t[i] = (int32_t)s.cuk[i]; memcpy(s.cuk, t, sizeof t); }
    }
    s.p.lse = NULL;
    kf_call();
    if (kf_check(s.varlen ? kern_sdpa_varlen_backward(ctx, &s.q, &s.k, &s.v, &s.o, &s.dout, &s.lse, &s.dq,
                                                      &s.dk, &s.dv, &s.cq, &s.ck, s.maxq, s.maxk, &s.p)
                          : kern_sdpa_backward(ctx, &s.q, &s.k, &s.v, &s.o, &s.dout, &s.lse, &s.dq, &s.dk,
                                               &s.dv, &s.p),
                 s.varlen ? "kern_sdpa_varlen_backward" : "kern_sdpa_backward") &&
        s.dt == KERN_F32 && modest(&s.q) && modest(&s.k) && modest(&s.v) && modest(&s.dout) &&
        (!s.has_mask || modest(&s.mask)) && isfinite(s.p.scale) && fabsf(s.p.scale) <= 16 &&
        s.p.softcap <= 64 && (s.p.softcap == 0 || s.p.softcap >= 1e-2f)) {
        KF_ASSERT(all_finite(&s.dq) && all_finite(&s.dk) && all_finite(&s.dv),
                  "non-finite gradient from finite inputs");
    }
}
