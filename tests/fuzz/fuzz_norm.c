/* fuzz_norm.c — kern_norm, kern_norm_backward, kern_gelu, kern_bias_gelu,
 * kern_gelu_backward and kern_add on shapes, strides, dtypes (mixed per
 * tensor), eps, activations and every optional tensor (in place included)
 * from the input. Contract: kf.h. Invariants of a successful kern_norm on
 * modest finite f32 inputs: out (and mean, rstd, residual_out) match a
 * plain double reference within a loose tolerance; a successful backward
 * gives finite gradients for finite inputs. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_norm.h"
#include "kf.h"
#include "kf_adapt.h"

#include <math.h>

static const kern_dtype FDT[3] = {KERN_F32, KERN_BF16, KERN_F16};

static kern_dtype pick_dt(kf_in *in) {
    uint8_t c = kf_u8(in);
    return c < 250 ? FDT[c % 3] : (kern_dtype)(c % 10);
}
static kern_act pick_act(kf_in *in) {
    uint8_t c = kf_u8(in);
    return c < 250 ? (kern_act)(c % 3) : (kern_act)(int)(int8_t)kf_u8(in);
}

static int64_t rowoff(const kern_tensor *t, int64_t r) { /* row r of the leading dims */
    int64_t o = 0;
    int d;
    for (d = t->ndim - 2; d >= 0; d--) {
        o += (r % t->shape[d]) * t->stride[d];
        r /= t->shape[d];
    }
    return o;
}
static int modest(const kern_tensor *t) {
    int64_t n = kern_tensor_numel(t), rows, H, r, h;
    if (!t || n <= 0) return 1;
    H = t->ndim ? t->shape[t->ndim - 1] : 1;
    rows = H ? n / H : 0;
    for (r = 0; r < rows; r++)
        for (h = 0; h < H; h++) {
            double x = kt_get(t->data, t->dtype, rowoff(t, r) + h * (t->ndim ? t->stride[t->ndim - 1] : 0));
            if (!(fabs(x) <= 64)) return 0;
        }
    return 1;
}
static double at(const kern_tensor *t, int64_t r, int64_t h) {
    return kt_get(t->data, t->dtype, rowoff(t, r) + h * t->stride[t->ndim - 1]);
}
static double act_ref(kern_act a, double x) {
    if (a == KERN_ACT_GELU) return 0.5 * x * erfc(-x / sqrt(2.0));
    if (a == KERN_ACT_GELU_TANH) {
        double u = sqrt(2.0 / 3.141592653589793) * (x + 0.044715 * x * x * x);
        return 0.5 * x * (1 + tanh(u));
    }
    if (a == KERN_ACT_RELU) return x > 0 ? x : 0.0;
    if (a == KERN_ACT_SILU) return x / (1.0 + exp(-x));
    return x;
}
static double tol_of(kern_dtype dt) { return dt == KERN_F32 ? 2e-3 : dt == KERN_BF16 ? 5e-2 : 1e-2; }

static void check_norm(const kern_tensor *x, const kern_tensor *out, const kern_norm_params *p,
                       float eps) {
    int64_t H = x->shape[x->ndim - 1], n = kern_tensor_numel(x), rows = H ? n / H : 0, r, h;
    for (r = 0; r < rows && H > 0; r++) {
        double mean = 0, var = 0, rstd;
        double *hv = (double *)malloc((size_t)H * sizeof(double));
        for (h = 0; h < H; h++) {
            hv[h] = at(x, r, h) + (p->residual ? at(p->residual, r, h) : 0.0);
            mean += hv[h];
        }
        mean /= (double)H;
        for (h = 0; h < H; h++) var += p->norm == KERN_NORM_RMS ? hv[h] * hv[h] : (hv[h] - mean) * (hv[h] - mean);
        var /= (double)H;
        rstd = 1.0 / sqrt(var + eps);
        if (!isfinite(rstd) || rstd > 1e3) { free(hv); continue; } /* ill-conditioned row */
        for (h = 0; h < H; h++) {
            double y = (p->norm == KERN_NORM_RMS ? hv[h] : hv[h] - mean) * rstd, g;
            if (p->weight) y *= kt_get(p->weight->data, p->weight->dtype, h * p->weight->stride[0]);
            if (p->bias) y += kt_get(p->bias->data, p->bias->dtype, h * p->bias->stride[0]);
            y = act_ref(p->act, y);
            g = at(out, r, h);
            if (getenv("KF_DEBUG") && !(fabs(g - y) <= tol_of(out->dtype) * (1 + fabs(y)) + 64e-5 * rstd)) {
                int64_t k;
                fprintf(stderr, "norm %d act %d eps %g H %lld rows %lld x %s out %s w %d b %d res %d rstd %g mean %g:",
                        (int)p->norm, (int)p->act, (double)eps, (long long)H, (long long)rows,
                        kern_dtype_name(x->dtype), kern_dtype_name(out->dtype), p->weight != NULL,
                        p->bias != NULL, p->residual != NULL, rstd, mean);
                for (k = 0; k < H && k < 8; k++) fprintf(stderr, " %g", hv[k]);
                if (p->weight) fprintf(stderr, " w0 %g", kt_get(p->weight->data, p->weight->dtype, 0));
                if (p->bias) fprintf(stderr, " b0 %g", kt_get(p->bias->data, p->bias->dtype, 0));
                fprintf(stderr, "\n x nd %d:", x->ndim);
                for (k = 0; k < x->ndim; k++) fprintf(stderr, " %lld/%lld", (long long)x->shape[k], (long long)x->stride[k]);
                fprintf(stderr, " out nd %d:", out->ndim);
                for (k = 0; k < out->ndim; k++) fprintf(stderr, " %lld/%lld", (long long)out->shape[k], (long long)out->stride[k]);
                fprintf(stderr, " out %p x %p\n", out->data, x->data);
            }
            KF_ASSERT(fabs(g - y) <= tol_of(out->dtype) * (1 + fabs(y)) + 64e-5 * rstd,
                      "out row %lld col %lld = %.7g, reference %.7g", (long long)r, (long long)h, g, y);
        }
        if (p->rstd) {
            double g = ((const float *)p->rstd->data)[r];
            KF_ASSERT(fabs(g - rstd) <= 1e-2 * rstd, "rstd[%lld] = %g, reference %g", (long long)r, g, rstd);
        }
        free(hv);
    }
}

static int all_finite(const kern_tensor *t) {
    int64_t n = kern_tensor_numel(t), H, rows, r, h;
    if (!t || n <= 0) return 1;
    H = t->shape[t->ndim - 1];
    rows = H ? n / H : 0;
    for (r = 0; r < rows; r++)
        for (h = 0; h < H; h++)
            if (!isfinite(at(t, r, h))) return 0;
    return 1;
}

static void kf_fuzz(kf_in *in) {
    kern_ctx *ctx = kf_ctx_begin(in);
    int64_t sh[KERN_MAX_DIMS], H, rows = 1, wsh[1], msh[1];
    int nd = (int)kf_int(in, 1, 3), d, ok = 1, op = kf_u8(in) % 6;
    kern_tensor x, out, res, rout, w, b, mean, rstd, dout, dx, dres, dw, db, bias;
    kern_norm_params p;
    kern_norm_backward_params bp;
    float eps = 0.0f;
    int explicit_eps = 0, in_place;
    kern_act act;
    if (kf_bool(in, 64)) nd = (int)kf_int(in, 0, 9);
    for (d = 0; d < KERN_MAX_DIMS; d++) sh[d] = kf_size(in, d == nd - 1 ? 70 : 4);
    H = nd >= 1 && nd <= KERN_MAX_DIMS ? sh[nd - 1] : 0;
    for (d = 0; d + 1 < nd && d < KERN_MAX_DIMS; d++)
        if (sh[d] >= 0 && kern_mul_overflow_i64(rows, sh[d], &rows)) rows = INT64_MAX;
    ok &= kf_tensor(in, &x, pick_dt(in), nd, sh, 0, "x");
    if (getenv("KF_DEBUG")) {
        fprintf(stderr, "norm: op %d nd %d shape", op, nd);
        for (d = 0; d < nd && d < KERN_MAX_DIMS; d++) fprintf(stderr, " %lld", (long long)sh[d]);
        fprintf(stderr, " x strides");
        for (d = 0; d < x.ndim && d < KERN_MAX_DIMS; d++) fprintf(stderr, " %lld", (long long)x.stride[d]);
        fprintf(stderr, " rows %lld H %lld\n", (long long)rows, (long long)H);
    }
    act = pick_act(in);
    in_place = kf_bool(in, 6);
    if (op >= 2) { /* the elementwise ops */
        kern_tensor a2;
        ok &= kf_tensor(in, &out, pick_dt(in), nd, sh, 1, "out");
        if (!ok) return;
        if (in_place && kern_tensor_check(&x, "", "") == KERN_OK && x.data && kern_tensor_numel(&x) > 0) {
            int64_t lo, hi;
            kern_tensor_span(&x, &lo, &hi);
            out = x;
            kf_out_region(x.data, (size_t)(hi - lo) * kern_dtype_size(x.dtype), "out (= x)");
        }
        kern_clear_error();
        switch (op) {
        case 2:
            kf_call();
            kf_check(kf_gelu(ctx, &x, &out, act == KERN_ACT_NONE ? KERN_ACT_GELU : act), "kern_gelu");
            break;
        case 3:
            wsh[0] = H;
            if (!kf_tensor(in, &bias, pick_dt(in), 1, wsh, 0, "bias")) return;
            kf_call();
            kf_check(kf_bias_gelu(ctx, &x, kf_bool(in, 8) ? NULL : &bias, &out,
                                  act == KERN_ACT_NONE ? KERN_ACT_GELU_TANH : act),
                     "kern_bias_gelu");
            break;
        case 4:
            if (!kf_tensor(in, &a2, pick_dt(in), nd, sh, 0, "dout")) return;
            kf_call();
            kf_check(kf_gelu_backward(ctx, &a2, &x, &out, act == KERN_ACT_NONE ? KERN_ACT_GELU : act),
                     "kern_gelu_backward");
            break;
        default:
            if (!kf_tensor(in, &a2, pick_dt(in), nd, sh, 0, "b")) return;
            kf_call();
            kf_check(kern_add(ctx, &x, &a2, &out), "kern_add");
            break;
        }
        return;
    }
    /* kern_norm / kern_norm_backward */
    memset(&p, 0, sizeof p);
    p.norm = kf_u8(in) < 250 ? (kern_norm_kind)kf_int(in, 0, 1) : (kern_norm_kind)kf_int(in, -1, 5);
    p.act = act;
    {
        uint8_t c = kf_u8(in);
        if (c >= 128) {
            explicit_eps = 1;
            eps = c < 200 ? (float)(c & 7) * 1e-3f : c < 250 ? 0.0f : kern__bits_f32(kf_u32(in));
        }
    }
    kf_norm_eps(&p, explicit_eps, eps);
    if (kf_bool(in, 40)) kf_norm_eps(&p, 1, p.eps); /* eps as given, 0 included */
    wsh[0] = H;
    if (kf_bool(in, 24)) wsh[0] = kf_size(in, 70);
    if (kf_bool(in, 2)) { ok &= kf_tensor(in, &w, pick_dt(in), 1, wsh, 0, "weight"); p.weight = &w; }
    if (kf_bool(in, 2)) { ok &= kf_tensor(in, &b, pick_dt(in), 1, wsh, 0, "bias"); p.bias = &b; }
    msh[0] = rows;
    if (kf_bool(in, 24)) msh[0] = kf_size(in, 70);
    if (op == 0) {
        ok &= kf_tensor(in, &out, pick_dt(in), nd, sh, 1, "out");
        if (kf_bool(in, 3)) { ok &= kf_tensor(in, &res, pick_dt(in), nd, sh, 0, "residual"); p.residual = &res; }
        if (kf_bool(in, 3)) {
            ok &= kf_tensor(in, &rout, pick_dt(in), nd, sh, 1, "residual_out");
            p.residual_out = &rout;
        }
        if (kf_bool(in, 3)) { ok &= kf_tensor(in, &mean, kf_bool(in, 32) ? KERN_BF16 : KERN_F32, 1, msh, 1, "mean"); p.mean = &mean; }
        if (kf_bool(in, 3)) { ok &= kf_tensor(in, &rstd, KERN_F32, 1, msh, 1, "rstd"); p.rstd = &rstd; }
        if (!ok) return;
        if (in_place && p.residual && p.residual_out && kern_tensor_check(&res, "", "") == KERN_OK &&
            res.data && kern_tensor_numel(&res) > 0 && res.dtype == rout.dtype) {
            int64_t lo, hi;
            kern_tensor_span(&res, &lo, &hi);
            rout = res; /* residual stream updated in place */
            kf_out_region(res.data, (size_t)(hi - lo) * kern_dtype_size(res.dtype), "residual_out (= residual)");
        }
        kern_clear_error();
        kf_call();
        if (kf_check(kern_norm(ctx, &x, &out, &p), "kern_norm") && x.dtype == KERN_F32 &&
            !p.residual_out && modest(&x) && (!p.residual || modest(p.residual)) &&
            (!p.weight || modest(p.weight)) && (!p.bias || modest(p.bias)) && H > 0)
            check_norm(&x, &out, &p, kf_norm_eps_used(&p));
        return;
    }
    /* backward */
    memset(&bp, 0, sizeof bp);
    bp.norm = p.norm;
    bp.act = p.act;
    bp.weight = p.weight;
    bp.bias = p.bias;
    kf_norm_bwd_eps(&bp, explicit_eps, eps);
    if (kf_bool(in, 3)) { ok &= kf_tensor(in, &mean, KERN_F32, 1, msh, 0, "mean"); bp.mean = &mean; }
    if (kf_bool(in, 3)) { ok &= kf_tensor(in, &rstd, KERN_F32, 1, msh, 0, "rstd"); bp.rstd = &rstd; }
    ok &= kf_tensor(in, &dout, pick_dt(in), nd, sh, 0, "dout");
    ok &= kf_tensor(in, &dx, pick_dt(in), nd, sh, 1, "dx");
    if (kf_bool(in, 4)) { ok &= kf_tensor(in, &dres, pick_dt(in), nd, sh, 0, "dresidual"); bp.dresidual = &dres; }
    if (p.weight && kf_bool(in, 2)) { ok &= kf_tensor(in, &dw, pick_dt(in), 1, wsh, 1, "dweight"); bp.dweight = &dw; }
    if (p.bias && kf_bool(in, 2)) { ok &= kf_tensor(in, &db, pick_dt(in), 1, wsh, 1, "dbias"); bp.dbias = &db; }
    if (kf_bool(in, 32) && !bp.dweight) { ok &= kf_tensor(in, &dw, KERN_F32, 1, wsh, 1, "dweight"); bp.dweight = &dw; }
    if (!ok) return;
    /* saved statistics: positive rstd, modest mean, usually */
    if (bp.rstd && rstd.data && kern_tensor_numel(&rstd) > 0 && kern_tensor_check(&rstd, "", "") == KERN_OK &&
        !kf_bool(in, 16)) {
        int64_t i;
        for (i = 0; i < rstd.shape[0]; i++) ((float *)rstd.data)[i * rstd.stride[0]] = 0.25f + (float)kf_int(in, 0, 8);
    }
    kern_clear_error();
    kf_call();
    if (kf_check(kern_norm_backward(ctx, &dout, &x, &dx, &bp), "kern_norm_backward") &&
        x.dtype == KERN_F32 && dx.dtype == KERN_F32 && modest(&x) && modest(&dout) &&
        (!bp.dresidual || modest(bp.dresidual)) && (!bp.weight || modest(bp.weight)) &&
        (!bp.bias || modest(bp.bias)) && (!bp.mean || modest(bp.mean)) && (!bp.rstd || modest(bp.rstd)) &&
        (bp.rstd || !explicit_eps || eps > 0))
        KF_ASSERT(all_finite(&dx), "non-finite dx from finite inputs");
}
