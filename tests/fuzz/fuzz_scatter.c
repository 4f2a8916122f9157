/* fuzz_scatter.c — kern_scatter_reduce (fast GNN path and the general
 * any-dim path), kern_gather, kern_scatter_plan_bytes / _plan_init /
 * kern_scatter_reduce_planned on shapes, strides, dims, dtypes and index
 * values from the input. Contract: kf.h. Invariants of a success: gather
 * copies exactly; scatter leaves every position no index element targets
 * equal to self (arg_out = the sentinel there), an amax/amin arg_out
 * points at the src element whose value the output holds, and integer
 * (and float amax/amin) results equal a plain reference bit for bit. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_scatter.h"
#include "kf.h"
#include "kf_adapt.h"

static const kern_dtype DATA_DT[5] = {KERN_F32, KERN_BF16, KERN_F16, KERN_I32, KERN_I64};

static kern_dtype pick_data_dtype(kf_in *in) {
    uint8_t c = kf_u8(in);
    return c < 250 ? DATA_DT[c % 5] : (kern_dtype)(c % 10);
}
static kern_dtype pick_index_dtype(kf_in *in) {
    uint8_t c = kf_u8(in);
    return c < 125 ? KERN_I32 : c < 250 ? KERN_I64 : (kern_dtype)(c % 10);
}

/* the element offset of coordinate c in t */
static int64_t off_of(const kern_tensor *t, const int64_t *c) {
    int64_t o = 0;
    int d;
    for (d = 0; d < t->ndim; d++) o += c[d] * t->stride[d];
    return o;
}
static int next_coord(int nd, const int64_t *shape, int64_t *c) {
    int d;
    for (d = nd - 1; d >= 0; d--) {
        if (++c[d] < shape[d]) return 1;
        c[d] = 0;
    }
    return 0;
}
static int is_int(kern_dtype dt) { return dt == KERN_I32 || dt == KERN_I64; }
static int64_t geti(const void *p, kern_dtype dt, int64_t o) {
    return dt == KERN_I64 ? ((const int64_t *)p)[o] : (int64_t)((const int32_t *)p)[o];
}
static void bytes_at(const kern_tensor *t, int64_t o, void *dst) {
    memcpy(dst, (const char *)t->data + o * (int64_t)kern_dtype_size(t->dtype),
           kern_dtype_size(t->dtype));
}

/* Index values: mostly in [0, limit), sometimes anything. */
static void fill_index(kf_in *in, const kern_tensor *t, int64_t limit) {
    int64_t c[KERN_MAX_DIMS] = {0};
    if (!t->data || (t->dtype != KERN_I32 && t->dtype != KERN_I64) || kern_tensor_numel(t) <= 0 ||
        kern_tensor_check(t, "", "") != KERN_OK) {
        kern_clear_error();
        return;
    }
    do {
        int64_t v = kf_bool(in, 48) ? kf_size(in, 8) - 2
                                    : (limit > 0 ? kf_int(in, 0, limit > 255 ? 255 : limit - 1) : 0);
        if (t->dtype == KERN_I64) ((int64_t *)t->data)[off_of(t, c)] = v;
        else ((int32_t *)t->data)[off_of(t, c)] = (int32_t)v;
    } while (next_coord(t->ndim, t->shape, c));
}

/* out position of index element c (the index's own coordinates with dim
 * replaced by the index value) */
static void target(const kern_tensor *idx, int dim, const int64_t *c, int64_t *tc) {
    int d;
    for (d = 0; d < idx->ndim; d++) tc[d] = c[d];
    tc[dim] = geti(idx->data, idx->dtype, off_of(idx, c));
}

/* The reference of one output position: reduce the src values whose index
 * element targets it, in index (row-major) order, as kern documents. */
static void check_scatter(const kern_tensor *self, int dim, const kern_tensor *idx,
                          const kern_tensor *src, kern_reduce red, int incl,
                          const kern_tensor *out, const kern_tensor *arg) {
    int nd = self->ndim, d;
    int64_t oc[KERN_MAX_DIMS] = {0}, ic[KERN_MAX_DIMS], tc[KERN_MAX_DIMS];
    int64_t L = idx->shape[dim];
    kern_dtype dt = self->dtype;
    int minmax = red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN;
    if (kern_tensor_numel(out) == 0) return;
    do {
        int64_t cnt = 0, acci = 0, win = L;
        double accf = 0;
        int same = 1;
        unsigned char got[8], want[8];
        memset(ic, 0, sizeof ic);
        if (kern_tensor_numel(idx) > 0)
            do {
                int64_t x;
                target(idx, dim, ic, tc);
                for (d = 0; d < nd; d++) same = d == 0 ? tc[d] == oc[d] : same && tc[d] == oc[d];
                if (!same) continue;
                if (is_int(dt)) {
                    x = geti(src->data, dt, off_of(src, ic));
                    if (cnt == 0 && !incl) acci = x;
                    else {
                        if (cnt == 0) acci = geti(self->data, dt, off_of(self, oc));
                        switch (red) {
                        case KERN_REDUCE_SUM: case KERN_REDUCE_MEAN:
                            acci = (int64_t)((uint64_t)acci + (uint64_t)x); break;
                        case KERN_REDUCE_PROD: acci = (int64_t)((uint64_t)acci * (uint64_t)x); break;
                        case KERN_REDUCE_AMAX: if (x > acci) { acci = x; win = ic[dim]; } break;
                        default: if (x < acci) { acci = x; win = ic[dim]; } break;
                        }
                    }
                    if (cnt == 0 && !incl) win = ic[dim];
                } else if (minmax) {
                    double v = kt_get(src->data, dt, off_of(src, ic));
                    if (cnt == 0 && !incl) { accf = v; win = ic[dim]; }
                    else {
                        if (cnt == 0) accf = kt_get(self->data, dt, off_of(self, oc));
                        if ((red == KERN_REDUCE_AMAX ? v > accf : v < accf) || v != v) {
                            accf = v;
                            win = ic[dim];
                        }
                    }
                }
                cnt++;
            } while (next_coord(idx->ndim, idx->shape, ic));
        bytes_at(out, off_of(out, oc), got);
        if (cnt == 0) {
            bytes_at(self, off_of(self, oc), want);
            KF_ASSERT(!memcmp(got, want, kern_dtype_size(dt)), "an untargeted output changed");
        } else if (is_int(dt)) {
            if (dt == KERN_I32 && red != KERN_REDUCE_AMAX && red != KERN_REDUCE_AMIN)
                acci = (int64_t)(int32_t)(uint32_t)(uint64_t)acci;
            if (red == KERN_REDUCE_MEAN) {
                int64_t n = cnt + (incl ? 1 : 0), q = acci / n;
                if ((acci % n != 0) && ((acci < 0) != (n < 0))) q--;
                acci = q;
            }
            KF_ASSERT(geti(out->data, dt, off_of(out, oc)) == acci, "int result %lld, want %lld",
                      (long long)geti(out->data, dt, off_of(out, oc)), (long long)acci);
        } else if (minmax) {
            double g = kt_get(out->data, dt, off_of(out, oc));
            KF_ASSERT((g != g && accf != accf) || g == accf, "amax/amin result %g, want %g", g, accf);
        }
        if (arg) {
            int64_t a = geti(arg->data, arg->dtype, off_of(arg, oc));
            if (cnt == 0) KF_ASSERT(a == L, "arg_out %lld at an untargeted position", (long long)a);
            else if (is_int(dt) || minmax) {
                /* ties and NaN payloads aside, the winner is the reference's */
                double g = kt_get(out->data, dt, off_of(out, oc));
                KF_ASSERT(a >= 0 && a <= L, "arg_out %lld outside [0, %lld]", (long long)a,
                          (long long)L);
                if (a < L) {
                    int64_t sc[KERN_MAX_DIMS];
                    double v;
                    for (d = 0; d < nd; d++) sc[d] = oc[d];
                    sc[dim] = a;
                    v = kt_get(src->data, dt, off_of(src, sc));
                    KF_ASSERT((v != v && g != g) || v == g, "arg_out %lld points at %g, out holds %g",
                              (long long)a, v, g);
                }
                KF_ASSERT(a == win || (win < L && a < L), "arg_out %lld, reference %lld",
                          (long long)a, (long long)win);
            }
        }
    } while (next_coord(nd, out->shape, oc));
}

static void fuzz_scatter(kf_in *in, kern_ctx *ctx, int gather) {
    kern_dtype dt = pick_data_dtype(in), it = pick_index_dtype(in);
    int nd = (int)kf_int(in, 1, 4), d, dim, gnn, ok = 1, incl = kf_bool(in, 2);
    int64_t ss[KERN_MAX_DIMS], is[KERN_MAX_DIMS], rs[KERN_MAX_DIMS];
    kern_reduce red = (kern_reduce)kf_int(in, 1, 5);
    kern_tensor self, src, idx, out, arg;
    int use_arg;
    if (kf_bool(in, 40)) red = (kern_reduce)kf_int(in, -1, 7);
    if (kf_bool(in, 64)) nd = kf_bool(in, 2) ? 0 : 9;
    if (nd < 0 || nd > KERN_MAX_DIMS) nd = 9;
    dim = (int)kf_int(in, 0, nd > 0 && nd < 9 ? nd - 1 : 0);
    if (kf_bool(in, 8)) dim -= nd; /* negative dims count from the end */
    if (kf_bool(in, 64)) dim = (int)kf_int(in, -12, 12);
    for (d = 0; d < KERN_MAX_DIMS; d++) {
        ss[d] = kf_size(in, 6);
        is[d] = ss[d] > 0 ? kf_int(in, 0, ss[d]) : 0;
        rs[d] = kf_add(is[d], kf_bool(in, 4) ? kf_int(in, 0, 2) : 0);
    }
    {
        int dd = dim < 0 ? dim + nd : dim;
        if (dd >= 0 && dd < KERN_MAX_DIMS) is[dd] = kf_size(in, 8); /* any length along dim */
        if (dd >= 0 && dd < KERN_MAX_DIMS && rs[dd] < is[dd]) rs[dd] = is[dd];
    }
    if (kf_bool(in, 24)) { /* a shape error */
        d = (int)kf_int(in, 0, KERN_MAX_DIMS - 1);
        is[d] = kf_add(is[d], 1);
    }
    gnn = nd == 2 && dim == 0 && kf_bool(in, 2); /* the 1-D index form */
    if (!gather) {
        ok &= kf_tensor(in, &self, dt, nd, ss, 0, "self");
        ok &= kf_tensor(in, &src, kf_bool(in, 48) ? KERN_F32 : dt, nd, rs, 0, "src");
    } else {
        ok &= kf_tensor(in, &src, dt, nd, ss, 0, "src");
    }
    ok &= kf_tensor(in, &idx, it, gnn ? 1 : nd, is, 0, "index");
    if (!ok) return;
    {
        int dd = dim < 0 ? dim + nd : dim;
        fill_index(in, &idx, nd > 0 && nd < 9 && dd >= 0 && dd < nd ? ss[dd] : 1);
    }
    if (gather) {
        int64_t os[KERN_MAX_DIMS];
        for (d = 0; d < KERN_MAX_DIMS; d++) os[d] = is[d];
        if (gnn) os[1] = ss[1];
        if (!kf_tensor(in, &out, kf_bool(in, 48) ? KERN_I32 : dt, nd, os, 1, "out")) return;
        kf_call();
        if (kf_check(kern_gather(ctx, &src, dim, &idx, &out), "kern_gather") &&
            kern_tensor_numel(&out) > 0) {
            int64_t c[KERN_MAX_DIMS] = {0}, sc[KERN_MAX_DIMS];
            int dd = dim < 0 ? dim + nd : dim;
            do {
                unsigned char a[8], b[8];
                for (d = 0; d < nd; d++) sc[d] = c[d];
                sc[dd] = gnn ? geti(idx.data, it, c[0] * idx.stride[0])
                             : geti(idx.data, it, off_of(&idx, c));
                bytes_at(&out, off_of(&out, c), a);
                bytes_at(&src, off_of(&src, sc), b);
                KF_ASSERT(!memcmp(a, b, kern_dtype_size(dt)), "gather copied the wrong element");
            } while (next_coord(nd, out.shape, c));
        }
        return;
    }
    use_arg = (red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN) ? kf_bool(in, 2) : kf_bool(in, 24);
    if (kf_bool(in, 16)) { /* in place: out is self */
        out = self;
        if (self.data && kern_tensor_numel(&self) > 0 && kern_tensor_check(&self, "", "") == KERN_OK) {
            int64_t lo, hi;
            kern_tensor_span(&self, &lo, &hi);
            kf_out_region(self.data, (size_t)(hi - lo) * kern_dtype_size(dt), "out (= self)");
        }
        kern_clear_error();
    } else if (!kf_tensor(in, &out, kf_bool(in, 48) ? KERN_I64 : dt, nd, ss, 1, "out")) {
        return;
    }
    if (use_arg && !kf_tensor(in, &arg, kf_bool(in, 3) ? KERN_I64 : KERN_I32, nd, ss, 1, "arg_out"))
        return;
    {
        kern_tensor self_copy = self;
        void *keep = NULL;
        int ok_call;
        size_t sbytes = 0;
        /* in place: keep self's bytes for the reference */
        if (out.data == self.data && self.data && kern_tensor_numel(&self) > 0 &&
            kern_tensor_check(&self, "", "") == KERN_OK) {
            int64_t lo, hi;
            kern_tensor_span(&self, &lo, &hi);
            sbytes = (size_t)(hi - lo) * kern_dtype_size(dt);
            keep = kf_in_buf(sbytes, "self copy");
            memcpy(keep, self.data, sbytes);
            self_copy.data = keep;
        }
        kern_clear_error();
        kf_call();
        ok_call = kf_check(kf_scatter_reduce(ctx, &self, dim, &idx, &src, red, incl, &out,
                                             use_arg ? &arg : NULL),
                           "kern_scatter_reduce");
        if (ok_call) {
            kern_tensor ix = idx;
            int dd = dim < 0 ? dim + nd : dim;
            if (gnn) { /* index.view(E, 1).expand(E, F) */
                ix.ndim = 2;
                ix.shape[1] = self.shape[1];
                ix.stride[1] = 0;
            }
            check_scatter(&self_copy, dd, &ix, &src, red, incl, &out, use_arg ? &arg : NULL);
        }
    }
}

/* plan_bytes / plan_init / planned: the GNN form with a reusable plan */
static void fuzz_planned(kf_in *in, kern_ctx *ctx) {
    kern_dtype dt = pick_data_dtype(in), it = pick_index_dtype(in);
    int64_t N = kf_size(in, 12), F = kf_size(in, 6), E = kf_size(in, 24), sh[2], es[1];
    kern_reduce red = (kern_reduce)kf_int(in, 1, 5);
    int incl = kf_bool(in, 2), one_d = kf_bool(in, 6), use_arg;
    kern_tensor idx, self, src, out, arg;
    kern_scatter_plan plan;
    size_t need = kern_scatter_plan_bytes(N, E), give;
    void *mem;
    kern_status st;
    es[0] = E;
    if (!kf_tensor(in, &idx, it, 1, es, 0, "index")) return;
    fill_index(in, &idx, N);
    if (need > ((size_t)1 << 24)) need = 0; /* sizes the harness does not back */
    give = need;
    if (kf_bool(in, 16)) { /* too small */
        size_t sub = (size_t)kf_int(in, 1, 8);
        give = sub > give ? 0 : give - sub;
    }
    mem = kf_in_buf(give, "plan memory");
    memset(&plan, 0, sizeof plan);
    kf_out_region(&plan, sizeof plan, "plan");
    kf_call();
    st = kern_scatter_plan_init(ctx, &idx, N, kf_bool(in, 64) ? NULL : mem, give, &plan);
    if (!kf_check(st, "kern_scatter_plan_init")) return;
    KF_ASSERT(need > 0 && give >= need && plan.n_rows == N && plan.n_edges == E);
    {
        int64_t r, k;
        for (r = 0; r < N; r++)
            for (k = plan.rowptr[r]; k < plan.rowptr[r + 1]; k++) {
                int64_t e = plan.perm_i64 ? ((int64_t *)plan.perm)[k] : ((int32_t *)plan.perm)[k];
                KF_ASSERT(e >= 0 && e < E && geti(idx.data, it, e * idx.stride[0]) == r,
                          "plan entry %lld of row %lld is edge %lld", (long long)k, (long long)r,
                          (long long)e);
                KF_ASSERT(k == plan.rowptr[r] || e > (plan.perm_i64 ? ((int64_t *)plan.perm)[k - 1]
                                                                    : ((int32_t *)plan.perm)[k - 1]),
                          "plan rows not stable");
            }
        KF_ASSERT(plan.rowptr[0] == 0 && plan.rowptr[N] == E);
    }
    sh[0] = N; sh[1] = F;
    if (!kf_tensor(in, &self, dt, one_d ? 1 : 2, sh, 0, "self")) return;
    sh[0] = kf_add(E, kf_bool(in, 4) ? kf_int(in, 0, 2) : 0);
    if (kf_bool(in, 24)) sh[0] = kf_size(in, 24);
    if (!kf_tensor(in, &src, dt, one_d ? 1 : 2, sh, 0, "src")) return;
    sh[0] = N;
    if (!kf_tensor(in, &out, dt, one_d ? 1 : 2, sh, 1, "out")) return;
    use_arg = (red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN) && kf_bool(in, 2);
    if (use_arg && !kf_tensor(in, &arg, KERN_I64, one_d ? 1 : 2, sh, 1, "arg_out")) return;
    kf_call();
    if (kf_check(kf_scatter_reduce_planned(ctx, &plan, &self, &src, red, incl, &out,
                                           use_arg ? &arg : NULL),
                 "kern_scatter_reduce_planned")) {
        kern_tensor ix = idx;
        if (!one_d) {
            ix.ndim = 2;
            ix.shape[1] = self.shape[1];
            ix.stride[1] = 0;
        }
        check_scatter(&self, 0, &ix, &src, red, incl, &out, use_arg ? &arg : NULL);
    }
}

static void kf_fuzz(kf_in *in) {
    kern_ctx *ctx = kf_ctx_begin(in);
    uint8_t op = kf_u8(in);
    if (op < 110) fuzz_scatter(in, ctx, 0);
    else if (op < 200) fuzz_scatter(in, ctx, 1);
    else fuzz_planned(in, ctx);
}
