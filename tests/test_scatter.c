/* Tests for kern_scatter.h: scatter_reduce (fast GNN path, stream and csr
 * strategies, planned, general any-dim path) and gather, against plain
 * references (double accumulation for floats, wrapping int64 for ints). */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_scatter.h"
#include "kt.h"

#ifdef KT_SANITIZER
#define SC_BIG 0
#else
#define SC_BIG 1
#endif

static const kern_reduce ALL_RED[5] = {KERN_REDUCE_SUM, KERN_REDUCE_PROD, KERN_REDUCE_MEAN,
                                       KERN_REDUCE_AMAX, KERN_REDUCE_AMIN};
static const kern_dtype ALL_DT[5] = {KERN_F32, KERN_BF16, KERN_F16, KERN_I32, KERN_I64};

static int is_int(kern_dtype dt) { return dt == KERN_I32 || dt == KERN_I64; }

/* ----------------------------------------------------------- reference */

typedef struct {
    int nd;
    int64_t shape[KERN_MAX_DIMS];
} shp;

static int64_t idx_get(const kern_tensor *t, int64_t off) {
    return t->dtype == KERN_I64 ? ((const int64_t *)t->data)[off]
                                : ((const int32_t *)t->data)[off];
}
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
static int64_t lin_of(const kern_tensor *t, const int64_t *c) { /* row-major position */
    int64_t l = 0;
    int d;
    for (d = 0; d < t->ndim; d++) l = l * t->shape[d] + c[d];
    return l;
}
static int64_t iget(const kern_tensor *t, int64_t off) {
    return t->dtype == KERN_I64 ? ((const int64_t *)t->data)[off]
                                : (int64_t)((const int32_t *)t->data)[off];
}
static int64_t floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

/* Sequential reference of torch scatter_reduce. idx may be the expanded
 * view. want (doubles) and wantarg are in row-major order of self. */
static void ref_scatter(const kern_tensor *self, int dim, const kern_tensor *idx,
                        const kern_tensor *src, kern_reduce red, int incl, double *want,
                        int64_t *wantarg) {
    int64_t n = kern_tensor_numel(self), i, c[KERN_MAX_DIMS], t[KERN_MAX_DIMS];
    int64_t *cnt = (int64_t *)calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
    int64_t *iacc = (int64_t *)calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
    int isint = is_int(self->dtype);
    int nd = self->ndim, d;
    int64_t L = idx->shape[dim];
    memset(c, 0, sizeof c);
    if (n > 0)
        do {
            int64_t l = lin_of(self, c), o = off_of(self, c);
            if (isint) iacc[l] = iget(self, o);
            else want[l] = kt_get(self->data, self->dtype, o);
            if (wantarg) wantarg[l] = L;
        } while (next_coord(nd, self->shape, c));
    memset(c, 0, sizeof c);
    if (kern_tensor_numel(idx) > 0)
        do {
            int64_t tv = idx_get(idx, off_of(idx, c)), l;
            int64_t so = off_of(src, c);
            for (d = 0; d < nd; d++) t[d] = c[d];
            t[dim] = tv;
            l = lin_of(self, t);
            if (isint) {
                int64_t v = iget(src, so);
                if (cnt[l] == 0 && !incl) {
                    iacc[l] = v;
                    if (wantarg) wantarg[l] = c[dim];
                } else if (red == KERN_REDUCE_SUM || red == KERN_REDUCE_MEAN) {
                    iacc[l] = (int64_t)((uint64_t)iacc[l] + (uint64_t)v);
                } else if (red == KERN_REDUCE_PROD) {
                    iacc[l] = (int64_t)((uint64_t)iacc[l] * (uint64_t)v);
                } else if ((red == KERN_REDUCE_AMAX && v > iacc[l]) ||
                           (red == KERN_REDUCE_AMIN && v < iacc[l])) {
                    iacc[l] = v;
                    if (wantarg) wantarg[l] = c[dim];
                }
            } else {
                double v = kt_get(src->data, src->dtype, so);
                if (cnt[l] == 0 && !incl) {
                    want[l] = v;
                    if (wantarg) wantarg[l] = c[dim];
                } else if (red == KERN_REDUCE_SUM || red == KERN_REDUCE_MEAN) {
                    want[l] += v;
                } else if (red == KERN_REDUCE_PROD) {
                    want[l] *= v;
                } else if ((red == KERN_REDUCE_AMAX && (v > want[l] || v != v)) ||
                           (red == KERN_REDUCE_AMIN && (v < want[l] || v != v))) {
                    want[l] = v;
                    if (wantarg) wantarg[l] = c[dim];
                }
            }
            cnt[l]++;
        } while (next_coord(nd, idx->shape, c));
    for (i = 0; i < n; i++) {
        int64_t div = cnt[i] + (incl ? 1 : 0);
        if (isint) {
            int64_t v = iacc[i];
            if (self->dtype == KERN_I32) v = (int64_t)(int32_t)(uint32_t)(uint64_t)v;
            if (red == KERN_REDUCE_MEAN && cnt[i] > 0) v = floordiv(v, div);
            want[i] = (double)v;
        } else if (red == KERN_REDUCE_MEAN && cnt[i] > 0) {
            want[i] /= (double)div;
        }
    }
    free(cnt);
    free(iacc);
}

/* reads a strided tensor into row-major doubles */
static void read_rm(const kern_tensor *t, double *v) {
    int64_t c[KERN_MAX_DIMS];
    memset(c, 0, sizeof c);
    if (kern_tensor_numel(t) <= 0) return;
    do {
        int64_t o = off_of(t, c);
        v[lin_of(t, c)] = is_int(t->dtype) ? (double)iget(t, o) : kt_get(t->data, t->dtype, o);
    } while (next_coord(t->ndim, t->shape, c));
}

/* -------------------------------------------------------- data helpers */

static void fill_vals(kt_rng *r, void *p, kern_dtype dt, int64_t n, kern_reduce red) {
    int64_t i;
    for (i = 0; i < n; i++) {
        if (is_int(dt)) {
            int64_t v = red == KERN_REDUCE_PROD ? kt_randint(r, -3, 4) : kt_randint(r, -50, 51);
            if (dt == KERN_I64) ((int64_t *)p)[i] = v * (red == KERN_REDUCE_PROD ? 1 : 1000003);
            else ((int32_t *)p)[i] = (int32_t)v;
        } else if (red == KERN_REDUCE_PROD) {
            kt_set(p, dt, i, kt_uniform(r, 0.9, 1.1) * (kt_next(r) & 1 ? 1 : -1));
        } else if (red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN) {
            /* a coarse grid, so ties happen */
            kt_set(p, dt, i, (double)kt_randint(r, -8, 9) * 0.25);
        } else {
            kt_set(p, dt, i, kt_normal(r));
        }
    }
}

/* graph destinations: random, or power law (hubs at low ids, many rows
 * with degree 0) */
static void fill_dst(kt_rng *r, void *p, kern_dtype it, int64_t E, int64_t N, int power,
                     int64_t stride) {
    int64_t e;
    for (e = 0; e < E; e++) {
        int64_t v;
        if (power) {
            double u = kt_uniform(r, 0, 1);
            v = (int64_t)((double)N * u * u * u * u);
            if (v >= N) v = N - 1;
        } else {
            v = kt_randint(r, 0, N);
        }
        if (it == KERN_I64) ((int64_t *)p)[e * stride] = v;
        else ((int32_t *)p)[e * stride] = (int32_t)v;
    }
}

static kt_tol_t red_tol(kern_dtype dt, kern_reduce red, int64_t maxcnt) {
    double f = 1.0;
    if (red == KERN_REDUCE_SUM || red == KERN_REDUCE_MEAN || red == KERN_REDUCE_PROD)
        f = 2.0 * sqrt((double)maxcnt + 1.0);
    if (dt == KERN_F32 && red == KERN_REDUCE_PROD) f *= 4;
    return kt_tol_scaled(dt, f);
}

static int64_t max_count(const kern_tensor *idx1d, int64_t N) {
    int64_t *c = (int64_t *)calloc((size_t)(N > 0 ? N : 1), 8), m = 0, e;
    for (e = 0; e < idx1d->shape[0]; e++) {
        int64_t v = idx_get(idx1d, e * idx1d->stride[0]);
        if (++c[v] > m) m = c[v];
    }
    free(c);
    return m;
}

/* Runs one fast-path case on ctx and checks values (and args). */
static void run_fast_case(kern_ctx *ctx, int64_t N, int64_t E, int64_t F, kern_dtype dt,
                          kern_dtype it, kern_reduce red, int incl, int expanded, int power,
                          int with_arg, kern_dtype argdt, uint64_t salt) {
    kt_rng r = kt_rng_make(salt);
    size_t es = kern_dtype_size(dt);
    void *self = kt_alloc((size_t)(N * F) * es + 1, "self");
    void *src = kt_alloc((size_t)(E * F) * es + 1, "src");
    void *out = kt_alloc((size_t)(N * F) * es + 1, "out");
    void *idx = kt_alloc((size_t)E * kern_dtype_size(it) + 1, "index");
    void *arg = with_arg ? kt_alloc((size_t)(N * F) * kern_dtype_size(argdt) + 1, "arg") : NULL;
    double *want = (double *)malloc((size_t)(N * F + 1) * sizeof(double));
    double *got = (double *)malloc((size_t)(N * F + 1) * sizeof(double));
    int64_t *wantarg = (int64_t *)malloc((size_t)(N * F + 1) * sizeof(int64_t));
    kern_tensor ts = kern_tensor_2d(self, dt, N, F), tsrc = kern_tensor_2d(src, dt, E, F);
    kern_tensor to = kern_tensor_2d(out, dt, N, F), ti = kern_tensor_1d(idx, it, E), tie;
    kern_tensor ta = kern_tensor_2d(arg, argdt, N, F);
    int64_t i;
    fill_vals(&r, self, dt, N * F, red);
    fill_vals(&r, src, dt, E * F, red);
    fill_dst(&r, idx, it, E, N, power, 1);
    kt_poison(out, (size_t)(N * F) * es);
    if (arg) kt_poison(arg, (size_t)(N * F) * kern_dtype_size(argdt));
    tie = ti;
    tie.ndim = 2;
    tie.shape[1] = F;
    tie.stride[1] = 0;
    KT_OK(kern_scatter_reduce(ctx, &ts, 0, expanded ? &tie : &ti, &tsrc, red, incl, &to,
                              arg ? &ta : NULL, NULL));
    ref_scatter(&ts, 0, &tie, &tsrc, red, incl, want, arg ? wantarg : NULL);
    read_rm(&to, got);
    kt_assert_close("out", out, dt, want, N * F, red_tol(dt, red, max_count(&ti, N)));
    if (arg) {
        for (i = 0; i < N * F; i++) {
            int64_t g = argdt == KERN_I64 ? ((int64_t *)arg)[i] : ((int32_t *)arg)[i];
            if (g != wantarg[i]) {
                KT_CHECK(g == wantarg[i], "arg[%lld]=%lld want %lld", (long long)i, (long long)g,
                         (long long)wantarg[i]);
                break;
            }
        }
    }
    kt_free(self);
    kt_free(src);
    kt_free(out);
    kt_free(idx);
    kt_free(arg);
    free(want);
    free(got);
    free(wantarg);
}

/* ------------------------------------------------------------- tests */

KT_TEST(scatter_fast_grid) {
    static const int64_t Ns[3] = {1, 7, 1000}, Es[3] = {0, 1, 5000};
    static const int64_t Fs[6] = {1, 3, 16, 17, 64, 129};
    int th;
    int counter = 0;
    for (th = 1; th <= 2; th++) {
        KT_FOR_EACH_ISA(isa, ctx, th) {
            int power, a, b, c, k;
            for (power = 0; power < 2; power++)
                for (a = 0; a < 3; a++)
                    for (b = 0; b < 3; b++)
                        for (c = 0; c < 6; c++)
                            for (k = 0; k < 10; k++) {
                                kern_reduce red = ALL_RED[k / 2];
                                int incl = k & 1;
                                kern_dtype dt = ALL_DT[(counter + a + c) % 5];
                                kern_dtype it = (counter / 5) & 1 ? KERN_I32 : KERN_I64;
                                int mm = red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN;
                                counter++;
                                if (!SC_BIG && Es[b] == 5000 && Fs[c] > 17) continue;
                                /* thin the big cases: every ISA still sees each reduce */
                                if (Es[b] == 5000 && Fs[c] >= 17 && (counter % 3) != 0) continue;
                                kt_context("isa=%s threads=%d %s N=%lld E=%lld F=%lld %s %s "
                                           "incl=%d idx=%s",
                                           kern_isa_name(isa), th, power ? "power" : "random",
                                           (long long)Ns[a], (long long)Es[b], (long long)Fs[c],
                                           kern_dtype_name(dt), kern_reduce_name(red), incl,
                                           kern_dtype_name(it));
                                run_fast_case(ctx, Ns[a], Es[b], Fs[c], dt, it, red, incl,
                                              counter & 1, power, mm && (counter & 2),
                                              counter & 4 ? KERN_I64 : KERN_I32,
                                              (uint64_t)counter);
                            }
        }
    }
}

/* the stream strategy with real partitions (E*F large enough for 2
 * partitions) and the csr strategy (deterministic context) */
KT_TEST(scatter_strategies) {
    int k, det;
    for (det = 0; det < 2; det++)
        for (k = 0; k < 10; k++) {
            kern_reduce red = ALL_RED[k / 2];
            int incl = k & 1;
            int d;
            for (d = 0; d < 5; d++) {
                kern_ctx *ctx = kt_ctx_ex(2, KERN_ISA_AUTO, det);
                int mm = red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN;
                kt_context("det=%d %s incl=%d %s", det, kern_reduce_name(red), incl,
                           kern_dtype_name(ALL_DT[d]));
                run_fast_case(ctx, 3000, SC_BIG ? 20000 : 12000, 24, ALL_DT[d], KERN_I64, red,
                              incl, d & 1, (k + d) & 1, mm, KERN_I64, (uint64_t)(k * 7 + d));
            }
        }
}

/* 1 vs 2 threads: amax/amin/arg identical bits; the deterministic context
 * gives identical bits for every reduce */
KT_TEST(scatter_threads_identical) {
    const int64_t N = 2000, E = SC_BIG ? 60000 : 15000, F = 33;
    kt_rng r = kt_rng_make(5);
    float *self = (float *)kt_alloc((size_t)(N * F) * 4, "self");
    float *src = (float *)kt_alloc((size_t)(E * F) * 4, "src");
    float *o1 = (float *)kt_alloc((size_t)(N * F) * 4, "o1");
    float *o2 = (float *)kt_alloc((size_t)(N * F) * 4, "o2");
    int64_t *a1 = (int64_t *)kt_alloc((size_t)(N * F) * 8, "a1");
    int64_t *a2 = (int64_t *)kt_alloc((size_t)(N * F) * 8, "a2");
    int64_t *idx = (int64_t *)kt_alloc((size_t)E * 8, "idx");
    kern_tensor ts = kern_tensor_2d(self, KERN_F32, N, F), tsrc = kern_tensor_2d(src, KERN_F32, E, F);
    kern_tensor t1 = kern_tensor_2d(o1, KERN_F32, N, F), t2 = kern_tensor_2d(o2, KERN_F32, N, F);
    kern_tensor ta1 = kern_tensor_2d(a1, KERN_I64, N, F), ta2 = kern_tensor_2d(a2, KERN_I64, N, F);
    kern_tensor ti = kern_tensor_1d(idx, KERN_I64, E);
    int k, det;
    fill_vals(&r, self, KERN_F32, N * F, KERN_REDUCE_AMAX);
    fill_vals(&r, src, KERN_F32, E * F, KERN_REDUCE_AMAX);
    src[5 * F + 3] = NAN;
    src[900 * F + 7] = NAN;
    fill_dst(&r, idx, KERN_I64, E, N, 1, 1);
    for (det = 0; det < 2; det++)
        for (k = 0; k < 10; k++) {
            kern_reduce red = ALL_RED[k / 2];
            int incl = k & 1, mm = red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN;
            kt_context("det=%d %s incl=%d", det, kern_reduce_name(red), incl);
            KT_OK(kern_scatter_reduce(kt_ctx_ex(1, KERN_ISA_AUTO, det), &ts, 0, &ti, &tsrc, red,
                                      incl, &t1, mm ? &ta1 : NULL, NULL));
            KT_OK(kern_scatter_reduce(kt_ctx_ex(2, KERN_ISA_AUTO, det), &ts, 0, &ti, &tsrc, red,
                                      incl, &t2, mm ? &ta2 : NULL, NULL));
            if (mm || det) {
                kt_assert_bytes_equal("out 1 vs 2 threads", o1, o2, (size_t)(N * F) * 4);
                if (mm) kt_assert_bytes_equal("arg 1 vs 2 threads", a1, a2, (size_t)(N * F) * 8);
            } else {
                double *w = (double *)malloc((size_t)(N * F) * sizeof(double));
                int64_t i;
                for (i = 0; i < N * F; i++) w[i] = o1[i];
                kt_assert_close("out 2 threads vs 1", o2, KERN_F32, w, N * F,
                                red_tol(KERN_F32, red, E));
                free(w);
            }
        }
    kt_free(self); kt_free(src); kt_free(o1); kt_free(o2);
    kt_free(a1); kt_free(a2); kt_free(idx);
}

/* NaN and +-Inf, checked against values PyTorch 2.15 printed for the same
 * inputs (idx [0,0,1,1,2], self [1,2,3,4], src [nan,5,-inf,0.5,nan]) */
KT_TEST(scatter_nan_inf) {
    static const float srcv[5] = {NAN, 5.0f, -INFINITY, 0.5f, NAN};
    static const int64_t idxv[5] = {0, 0, 1, 1, 2};
    /* rows: reduce x include_self (1, then 0) */
    static const float want[5][2][4] = {
        {{NAN, -INFINITY, NAN, 4}, {NAN, -INFINITY, NAN, 4}},  /* sum */
        {{NAN, -INFINITY, NAN, 4}, {NAN, -INFINITY, NAN, 4}},  /* prod */
        {{NAN, -INFINITY, NAN, 4}, {NAN, -INFINITY, NAN, 4}},  /* mean */
        {{NAN, 2, NAN, 4}, {NAN, 0.5f, NAN, 4}},               /* amax */
        {{NAN, -INFINITY, NAN, 4}, {NAN, -INFINITY, NAN, 4}}}; /* amin */
    float self[4] = {1, 2, 3, 4}, out[4];
    int64_t arg[4];
    kern_tensor ts = kern_tensor_1d(self, KERN_F32, 4), to = kern_tensor_1d(out, KERN_F32, 4);
    kern_tensor tsrc = kern_tensor_1d((void *)srcv, KERN_F32, 5);
    kern_tensor ti = kern_tensor_1d((void *)idxv, KERN_I64, 5), ta = kern_tensor_1d(arg, KERN_I64, 4);
    int k, det;
    for (det = 0; det < 2; det++) {
        KT_FOR_EACH_ISA(isa, ctx0, 1) {
            kern_ctx *ctx = kt_ctx_ex(1, isa, det);
            for (k = 0; k < 10; k++) {
                kern_reduce red = ALL_RED[k / 2];
                int incl = !(k & 1), i, mm = red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN;
                double w[4];
                (void)ctx0;
                for (i = 0; i < 4; i++) w[i] = want[k / 2][k & 1][i];
                kt_context("isa=%s det=%d %s incl=%d", kern_isa_name(isa), det,
                           kern_reduce_name(red), incl);
                KT_OK(kern_scatter_reduce(ctx, &ts, 0, &ti, &tsrc, red, incl, &to, mm ? &ta : NULL, NULL));
                kt_assert_close("out", out, KERN_F32, w, 4, kt_tol(KERN_F32));
                if (mm) {
                    /* row 0: the NaN at 0; row 1: amax incl -> self (5),
                     * amax excl -> 3, amin -> 2 (-inf); row 2: NaN at 4; row
                     * 3: nothing */
                    int64_t wa1 = red == KERN_REDUCE_AMAX ? (incl ? 5 : 3) : 2;
                    KT_CHECK(arg[0] == 0 && arg[1] == wa1 && arg[2] == 4 && arg[3] == 5,
                             "arg %lld %lld %lld %lld", (long long)arg[0], (long long)arg[1],
                             (long long)arg[2], (long long)arg[3]);
                }
            }
        }
    }
    /* self NaN propagates through amax (torch: [nan, 4, 5, 4]) */
    {
        float s2[4] = {NAN, 2, 3, 4}, sv[5] = {1, 2, 3, 4, 5};
        double w[4] = {NAN, 4, 5, 4};
        kern_tensor t2 = kern_tensor_1d(s2, KERN_F32, 4), tv = kern_tensor_1d(sv, KERN_F32, 5);
        KT_OK(kern_scatter_reduce(NULL, &t2, 0, &ti, &tv, KERN_REDUCE_AMAX, 1, &to, NULL, NULL));
        kt_assert_close("self nan amax", out, KERN_F32, w, 4, kt_tol(KERN_F32));
    }
}

/* integer mean floor-divides (torch: [1,5,8,10] and [-4,3,7,10]) */
KT_TEST(scatter_int_mean_floor) {
    int32_t self[4] = {10, 10, 10, 10}, src[5] = {-3, -4, 5, 2, 7}, out[4];
    int64_t idxv[5] = {0, 0, 1, 1, 2};
    kern_tensor ts = kern_tensor_1d(self, KERN_I32, 4), to = kern_tensor_1d(out, KERN_I32, 4);
    kern_tensor tsrc = kern_tensor_1d(src, KERN_I32, 5), ti = kern_tensor_1d(idxv, KERN_I64, 5);
    KT_OK(kern_scatter_reduce(NULL, &ts, 0, &ti, &tsrc, KERN_REDUCE_MEAN, 1, &to, NULL, NULL));
    KT_CHECK(out[0] == 1 && out[1] == 5 && out[2] == 8 && out[3] == 10, "%d %d %d %d", out[0],
             out[1], out[2], out[3]);
    KT_OK(kern_scatter_reduce(NULL, &ts, 0, &ti, &tsrc, KERN_REDUCE_MEAN, 0, &to, NULL, NULL));
    KT_CHECK(out[0] == -4 && out[1] == 3 && out[2] == 7 && out[3] == 10, "%d %d %d %d", out[0],
             out[1], out[2], out[3]);
}

/* ties go to the first position; a tie with self keeps the sentinel */
KT_TEST(scatter_arg_ties) {
    float self[2 * 2] = {1, 7, 0, 0}, src[4 * 2] = {3, 7, 3, 7, 2, 7, 3, 1}, out[4];
    int64_t idxv[4] = {0, 0, 0, 1};
    int32_t arg[4];
    kern_tensor ts = kern_tensor_2d(self, KERN_F32, 2, 2), to = kern_tensor_2d(out, KERN_F32, 2, 2);
    kern_tensor tsrc = kern_tensor_2d(src, KERN_F32, 4, 2), ti = kern_tensor_1d(idxv, KERN_I64, 4);
    kern_tensor ta = kern_tensor_2d(arg, KERN_I32, 2, 2);
    int det;
    for (det = 0; det < 2; det++) {
        kern_ctx *ctx = kt_ctx_ex(2, KERN_ISA_AUTO, det);
        KT_OK(kern_scatter_reduce(ctx, &ts, 0, &ti, &tsrc, KERN_REDUCE_AMAX, 1, &to, &ta, NULL));
        /* row 0 feature 0: 3 first at edge 0; feature 1: 7 ties self -> 4 */
        KT_CHECK(out[0] == 3 && out[1] == 7 && arg[0] == 0 && arg[1] == 4, "%g %g %d %d", out[0],
                 out[1], arg[0], arg[1]);
        KT_CHECK(out[2] == 3 && out[3] == 1 && arg[2] == 3 && arg[3] == 3, "%g %g %d %d", out[2],
                 out[3], arg[2], arg[3]);
        KT_OK(kern_scatter_reduce(ctx, &ts, 0, &ti, &tsrc, KERN_REDUCE_AMAX, 0, &to, &ta, NULL));
        KT_CHECK(arg[0] == 0 && arg[1] == 0, "%d %d", arg[0], arg[1]);
        KT_OK(kern_scatter_reduce(ctx, &ts, 0, &ti, &tsrc, KERN_REDUCE_AMIN, 0, &to, &ta, NULL));
        KT_CHECK(out[0] == 2 && arg[0] == 2 && out[1] == 7 && arg[1] == 0, "%g %d %g %d", out[0],
                 arg[0], out[1], arg[1]);
    }
}

/* the general path: 3-D tensors, every dim, index smaller than src,
 * strided views, every reduce and dtype */
KT_TEST(scatter_general_3d) {
    int counter = 0, dim, k, d;
    for (dim = -1; dim < 3; dim++)
        for (k = 0; k < 10; k++)
            for (d = 0; d < 5; d++) {
                kern_reduce red = ALL_RED[k / 2];
                int incl = k & 1, dd = dim < 0 ? dim + 3 : dim;
                kern_dtype dt = ALL_DT[d], it = counter & 1 ? KERN_I32 : KERN_I64;
                int mm = red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN;
                int64_t sshape[3] = {5, 4, 6}, ishape[3] = {4, 3, 5}, srcshape[3] = {6, 4, 7};
                kt_rng r = kt_rng_make((uint64_t)counter);
                size_t es = kern_dtype_size(dt);
                void *self, *srcb, *out, *idx, *arg;
                double want[120], got[120];
                int64_t wantarg[120], i, limit;
                kern_tensor ts, tsrc, to, ti, ta;
                int th = 1 + (counter & 1);
                kern_ctx *ctx = kt_ctx(th, counter % 3 == 0 ? KERN_ISA_SCALAR : KERN_ISA_AUTO);
                counter++;
                ishape[dd] = 7; /* may exceed self along dim, not src */
                srcshape[dd] = 9;
                self = kt_alloc(120 * es, "self");
                /* src is a transposed (non-contiguous) view of a buffer */
                srcb = kt_alloc((size_t)(srcshape[0] * srcshape[1] * srcshape[2]) * es, "src");
                out = kt_alloc(120 * es, "out");
                idx = kt_alloc((size_t)(ishape[0] * ishape[1] * ishape[2]) * 8, "idx");
                arg = kt_alloc(120 * 8, "arg");
                KT_OK(kern_tensor_init(&ts, self, dt, 3, sshape));
                KT_OK(kern_tensor_init(&to, out, dt, 3, sshape));
                {
                    int64_t st[3];
                    st[2] = srcshape[0];
                    st[1] = srcshape[0] * srcshape[2];
                    st[0] = 1;
                    KT_OK(kern_tensor_init_strided(&tsrc, srcb, dt, 3, srcshape, st));
                }
                KT_OK(kern_tensor_init(&ti, idx, it, 3, ishape));
                KT_OK(kern_tensor_init(&ta, arg, counter & 2 ? KERN_I64 : KERN_I32, 3, sshape));
                fill_vals(&r, self, dt, 120, red);
                fill_vals(&r, srcb, dt, srcshape[0] * srcshape[1] * srcshape[2], red);
                limit = sshape[dd];
                for (i = 0; i < ishape[0] * ishape[1] * ishape[2]; i++) {
                    int64_t v = kt_randint(&r, 0, limit);
                    if (it == KERN_I64) ((int64_t *)idx)[i] = v;
                    else ((int32_t *)idx)[i] = (int32_t)v;
                }
                kt_poison(out, 120 * es);
                kt_context("dim=%d %s incl=%d %s idx=%s threads=%d", dim, kern_reduce_name(red),
                           incl, kern_dtype_name(dt), kern_dtype_name(it), th);
                KT_OK(kern_scatter_reduce(ctx, &ts, dim, &ti, &tsrc, red, incl, &to,
                                          mm ? &ta : NULL, NULL));
                ref_scatter(&ts, dd, &ti, &tsrc, red, incl, want, mm ? wantarg : NULL);
                read_rm(&to, got);
                kt_assert_close("out", out, dt, want, 120, red_tol(dt, red, 7));
                if (mm)
                    for (i = 0; i < 120; i++) {
                        int64_t g = ta.dtype == KERN_I64 ? ((int64_t *)arg)[i] : ((int32_t *)arg)[i];
                        if (g != wantarg[i]) {
                            KT_CHECK(g == wantarg[i], "arg[%lld]=%lld want %lld", (long long)i,
                                     (long long)g, (long long)wantarg[i]);
                            break;
                        }
                    }
                kt_free(self); kt_free(srcb); kt_free(out); kt_free(idx); kt_free(arg);
            }
}

/* the fast path with strided rows, in place (out == self) */
KT_TEST(scatter_strided_inplace) {
    const int64_t N = 50, E = 300, F = 20, LD = 24;
    kt_rng r = kt_rng_make(11);
    float *buf = (float *)kt_alloc((size_t)(N * LD) * 4, "self/out");
    float *src = (float *)kt_alloc((size_t)(E * LD) * 4, "src");
    int32_t *idx = (int32_t *)kt_alloc((size_t)(E * 3) * 4, "idx");
    double want[50 * 20], *full = (double *)malloc((size_t)(N * F) * sizeof(double));
    kern_tensor ts, tsrc, ti;
    int64_t shp2[2] = {N, F}, st2[2] = {LD, 1}, se[2] = {E, F}, i, j;
    int k;
    for (k = 0; k < 10; k++) {
        kern_reduce red = ALL_RED[k / 2];
        int incl = k & 1;
        fill_vals(&r, buf, KERN_F32, N * LD, red);
        fill_vals(&r, src, KERN_F32, E * LD, red);
        fill_dst(&r, idx, KERN_I32, E, N, k & 1, 3); /* index stride 3 */
        KT_OK(kern_tensor_init_strided(&ts, buf, KERN_F32, 2, shp2, st2));
        KT_OK(kern_tensor_init_strided(&tsrc, src, KERN_F32, 2, se, st2));
        {
            int64_t is = 3;
            KT_OK(kern_tensor_init_strided(&ti, idx, KERN_I32, 1, &E, &is));
        }
        {
            kern_tensor tie = ti;
            tie.ndim = 2; tie.shape[1] = F; tie.stride[1] = 0;
            ref_scatter(&ts, 0, &tie, &tsrc, red, incl, want, NULL);
        }
        kt_context("%s incl=%d", kern_reduce_name(red), incl);
        KT_OK(kern_scatter_reduce(kt_ctx(2, KERN_ISA_AUTO), &ts, 0, &ti, &tsrc, red, incl, &ts,
                                  NULL, NULL));
        for (i = 0; i < N; i++)
            for (j = 0; j < F; j++) full[i * F + j] = buf[i * LD + j];
        {
            double *g = (double *)malloc((size_t)(N * F) * sizeof(double));
            float *gf = (float *)malloc((size_t)(N * F) * 4);
            for (i = 0; i < N * F; i++) gf[i] = (float)full[i];
            kt_assert_close("in place", gf, KERN_F32, want, N * F, red_tol(KERN_F32, red, E));
            free(g);
            free(gf);
        }
    }
    free(full);
    kt_free(buf); kt_free(src); kt_free(idx);
}

/* planned calls give the unplanned results (bits identical to the csr
 * strategy, any thread count) */
KT_TEST(scatter_planned) {
    const int64_t N = 700, E = SC_BIG ? 20000 : 4000, F = 19;
    kt_rng r = kt_rng_make(3);
    size_t pb = kern_scatter_plan_bytes(N, E);
    void *mem = kt_alloc(pb, "plan");
    float *self = (float *)kt_alloc((size_t)(N * F) * 4, "self");
    float *src = (float *)kt_alloc((size_t)(E * F) * 4, "src");
    float *o1 = (float *)kt_alloc((size_t)(N * F) * 4, "o1");
    float *o2 = (float *)kt_alloc((size_t)(N * F) * 4, "o2");
    int32_t *a1 = (int32_t *)kt_alloc((size_t)(N * F) * 4, "a1");
    int32_t *a2 = (int32_t *)kt_alloc((size_t)(N * F) * 4, "a2");
    int64_t *idx = (int64_t *)kt_alloc((size_t)E * 8, "idx");
    kern_tensor ts = kern_tensor_2d(self, KERN_F32, N, F), tsrc = kern_tensor_2d(src, KERN_F32, E, F);
    kern_tensor t1 = kern_tensor_2d(o1, KERN_F32, N, F), t2 = kern_tensor_2d(o2, KERN_F32, N, F);
    kern_tensor ta1 = kern_tensor_2d(a1, KERN_I32, N, F), ta2 = kern_tensor_2d(a2, KERN_I32, N, F);
    kern_tensor ti = kern_tensor_1d(idx, KERN_I64, E);
    kern_scatter_plan plan;
    int k;
    KT_CHECK(pb >= (size_t)((N + 1) * 8 + E * 4), "plan bytes %zu", pb);
    fill_vals(&r, self, KERN_F32, N * F, KERN_REDUCE_SUM);
    fill_vals(&r, src, KERN_F32, E * F, KERN_REDUCE_SUM);
    fill_dst(&r, idx, KERN_I64, E, N, 1, 1);
    KT_OK(kern_scatter_plan_init(kt_ctx(2, KERN_ISA_AUTO), &ti, N, mem, pb, &plan));
    KT_CHECK(plan.rowptr[N] == E, "rowptr[N]=%lld", (long long)plan.rowptr[N]);
    for (k = 0; k < 10; k++) {
        kern_reduce red = ALL_RED[k / 2];
        int incl = k & 1, mm = red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN;
        kt_context("%s incl=%d", kern_reduce_name(red), incl);
        KT_OK(kern_scatter_reduce(kt_ctx_ex(1, KERN_ISA_AUTO, 1), &ts, 0, &ti, &tsrc, red, incl,
                                  &t1, mm ? &ta1 : NULL, NULL));
        KT_OK(kern_scatter_reduce_planned(kt_ctx(2, KERN_ISA_AUTO), &plan, &ts, &tsrc, red, incl,
                                          &t2, mm ? &ta2 : NULL, NULL));
        kt_assert_bytes_equal("planned vs csr", o1, o2, (size_t)(N * F) * 4);
        if (mm) kt_assert_bytes_equal("planned arg", a1, a2, (size_t)(N * F) * 4);
    }
    kt_free(mem); kt_free(self); kt_free(src); kt_free(o1); kt_free(o2);
    kt_free(a1); kt_free(a2); kt_free(idx);
}

/* ---------------------------------------------------------------- gather */

KT_TEST(gather_fast_and_general) {
    int counter = 0, th;
    for (th = 1; th <= 2; th++) {
        KT_FOR_EACH_ISA(isa, ctx, th) {
            static const int64_t Fs[5] = {1, 3, 16, 17, 129};
            int f, d;
            for (f = 0; f < 5; f++)
                for (d = 0; d < 5; d++) {
                    const int64_t N = 37, E = 1000, F = Fs[f];
                    kern_dtype dt = ALL_DT[d], it = counter & 1 ? KERN_I32 : KERN_I64;
                    size_t es = kern_dtype_size(dt);
                    kt_rng r = kt_rng_make((uint64_t)counter);
                    void *src = kt_alloc((size_t)(N * F) * es, "src");
                    void *out = kt_alloc((size_t)(E * F) * es, "out");
                    void *idx = kt_alloc((size_t)E * 8, "idx");
                    kern_tensor ts = kern_tensor_2d(src, dt, N, F), to = kern_tensor_2d(out, dt, E, F);
                    kern_tensor ti = kern_tensor_1d(idx, it, E), tie;
                    int64_t e, j;
                    int bad = 0;
                    counter++;
                    kt_fill_uniform(&r, src, dt, N * F, -100, 100);
                    fill_dst(&r, idx, it, E, N, counter & 1, 1);
                    kt_poison(out, (size_t)(E * F) * es);
                    tie = ti;
                    tie.ndim = 2; tie.shape[1] = F; tie.stride[1] = 0;
                    kt_context("isa=%s threads=%d F=%lld %s", kern_isa_name(isa), th,
                               (long long)F, kern_dtype_name(dt));
                    KT_OK(kern_gather(ctx, &ts, 0, counter & 2 ? &tie : &ti, &to));
                    for (e = 0; e < E && !bad; e++) {
                        int64_t row = idx_get(&ti, e);
                        bad = memcmp((char *)out + e * F * (int64_t)es,
                                     (char *)src + row * F * (int64_t)es, (size_t)F * es) != 0;
                    }
                    KT_CHECK(!bad, "row %lld differs", (long long)(e - 1));
                    /* general: a full index [E, F] along dim 0, and dim 1 */
                    {
                        int64_t ish[2] = {E, F};
                        void *fi = kt_alloc((size_t)(E * F) * 8, "full idx");
                        kern_tensor tfi;
                        KT_OK(kern_tensor_init(&tfi, fi, KERN_I64, 2, ish));
                        for (e = 0; e < E * F; e++) ((int64_t *)fi)[e] = kt_randint(&r, 0, N);
                        KT_OK(kern_gather(ctx, &ts, 0, &tfi, &to));
                        for (e = 0; e < E && !bad; e++)
                            for (j = 0; j < F && !bad; j++)
                                bad = memcmp((char *)out + (e * F + j) * (int64_t)es,
                                             (char *)src + (((int64_t *)fi)[e * F + j] * F + j) *
                                                               (int64_t)es,
                                             es) != 0;
                        KT_CHECK(!bad, "general dim 0 differs at %lld", (long long)(e - 1));
                        for (e = 0; e < E * F; e++) ((int64_t *)fi)[e] = kt_randint(&r, 0, F);
                        tfi.shape[0] = N; /* index [N, F] gathering along dim 1 */
                        to.shape[0] = N;
                        KT_OK(kern_gather(ctx, &ts, 1, &tfi, &to));
                        for (e = 0; e < N && !bad; e++)
                            for (j = 0; j < F && !bad; j++)
                                bad = memcmp((char *)out + (e * F + j) * (int64_t)es,
                                             (char *)src + (e * F + ((int64_t *)fi)[e * F + j]) *
                                                               (int64_t)es,
                                             es) != 0;
                        KT_CHECK(!bad, "general dim 1 differs");
                        kt_free(fi);
                    }
                    kt_free(src); kt_free(out); kt_free(idx);
                }
        }
    }
}

/* non-temporal path: big enough output (> 32 MiB), 64-byte rows */
KT_TEST(gather_big_nt) {
    const int64_t N = 1000, E = SC_BIG ? 140000 : 20000, F = 64;
    kt_rng r = kt_rng_make(9);
    float *src = (float *)kt_alloc((size_t)(N * F) * 4, "src");
    float *out = (float *)kt_alloc((size_t)(E * F) * 4, "out");
    int64_t *idx = (int64_t *)kt_alloc((size_t)E * 8, "idx");
    kern_tensor ts = kern_tensor_2d(src, KERN_F32, N, F), to = kern_tensor_2d(out, KERN_F32, E, F);
    kern_tensor ti = kern_tensor_1d(idx, KERN_I64, E);
    int64_t e;
    int bad = 0;
    kt_fill_normal(&r, src, KERN_F32, N * F, 1);
    fill_dst(&r, idx, KERN_I64, E, N, 0, 1);
    KT_FOR_EACH_ISA(isa, ctx, 2) { /* every level's row copy (AVX2 and AVX-512 stream) */
        memset(out, 0, (size_t)(E * F) * 4);
        KT_OK(kern_gather(ctx, &ts, 0, &ti, &to));
        for (e = 0, bad = 0; e < E && !bad; e++) bad = memcmp(out + e * F, src + idx[e] * F, F * 4) != 0;
        KT_CHECK(!bad, "%s: row %lld", kern_isa_name(isa), (long long)(e - 1));
    }
    kt_free(src); kt_free(out); kt_free(idx);
}

/* ---------------------------------------------------------------- errors */

KT_TEST(scatter_errors) {
    float self[12], src[12], out[12], outsave[12];
    int64_t idx[4] = {0, 1, 2, 1}, arg[12];
    float fidx[4] = {0, 1, 2, 1};
    kern_tensor ts = kern_tensor_2d(self, KERN_F32, 3, 4), tsrc = kern_tensor_2d(src, KERN_F32, 3, 4);
    kern_tensor to = kern_tensor_2d(out, KERN_F32, 3, 4), ti = kern_tensor_1d(idx, KERN_I64, 3);
    kern_tensor ta = kern_tensor_2d(arg, KERN_I64, 3, 4), bad;
    int i;
    for (i = 0; i < 12; i++) self[i] = src[i] = (float)i;
    kt_poison(out, sizeof out);
    memcpy(outsave, out, sizeof out);
    /* index out of range / negative: position and value named */
    idx[2] = 3;
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &ti, &tsrc, KERN_REDUCE_SUM, 1, &to, NULL, NULL),
             KERN_ERR_INDEX, "index[2]=3 is out of range [0, 3)");
    idx[2] = -1;
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &ti, &tsrc, KERN_REDUCE_SUM, 1, &to, NULL, NULL),
             KERN_ERR_INDEX, "index[2]=-1");
    {
        int64_t i3[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0}, s3[2] = {3, 4};
        kern_tensor t3;
        KT_OK(kern_tensor_init(&t3, i3, KERN_I64, 2, s3));
        KT_ERROR(kern_scatter_reduce(NULL, &ts, 1, &t3, &tsrc, KERN_REDUCE_AMAX, 0, &to, NULL, NULL),
                 KERN_ERR_INDEX, "index[2,2]=9 is out of range [0, 4)");
    }
    idx[2] = 2;
    kt_assert_bytes_equal("out untouched", out, outsave, sizeof out);
    /* index dtype */
    bad = kern_tensor_1d(fidx, KERN_F32, 3);
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &bad, &tsrc, KERN_REDUCE_SUM, 1, &to, NULL, NULL),
             KERN_ERR_DTYPE, "index.dtype=f32 is not an integer type");
    /* index larger than src */
    bad = kern_tensor_1d(idx, KERN_I64, 4);
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &bad, &tsrc, KERN_REDUCE_SUM, 1, &to, NULL, NULL),
             KERN_ERR_SHAPE, "index.shape[0]=4 > src.shape[0]=3");
    {
        int64_t s3[3] = {3, 4, 1};
        kern_tensor t3;
        KT_OK(kern_tensor_init(&t3, idx, KERN_I64, 3, s3));
        KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &t3, &tsrc, KERN_REDUCE_SUM, 1, &to, NULL, NULL),
                 KERN_ERR_SHAPE, "index has 3 dims but self has 2");
    }
    /* out shape, src dtype, reduce, dim, arg_out misuse, aliasing */
    bad = kern_tensor_2d(out, KERN_F32, 2, 4);
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &ti, &tsrc, KERN_REDUCE_SUM, 1, &bad, NULL, NULL),
             KERN_ERR_SHAPE, "out.shape=[2,4] but self.shape=[3,4]");
    bad = kern_tensor_2d(src, KERN_I32, 3, 4);
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &ti, &bad, KERN_REDUCE_SUM, 1, &to, NULL, NULL),
             KERN_ERR_DTYPE, "src.dtype=i32 but self.dtype=f32");
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &ti, &tsrc, KERN_REDUCE_INVALID, 1, &to, NULL, NULL),
             KERN_ERR_ARG, "reduce=0");
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 2, &ti, &tsrc, KERN_REDUCE_SUM, 1, &to, NULL, NULL),
             KERN_ERR_ARG, "dim=2 is out of range");
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &ti, &tsrc, KERN_REDUCE_SUM, 1, &to, &ta, NULL),
             KERN_ERR_ARG, "arg_out is only defined for amax/amin");
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &ti, &tsrc, KERN_REDUCE_SUM, 1, &tsrc, NULL, NULL),
             KERN_ERR_ARG, "out overlaps src");
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, NULL, &tsrc, KERN_REDUCE_SUM, 1, &to, NULL, NULL),
             KERN_ERR_ARG, "index is NULL");
    kt_assert_bytes_equal("out untouched", out, outsave, sizeof out);
    /* planned: plan not initialised */
    {
        kern_scatter_plan p;
        memset(&p, 0, sizeof p);
        KT_ERROR(kern_scatter_reduce_planned(NULL, &p, &ts, &tsrc, KERN_REDUCE_SUM, 1, &to, NULL, NULL),
                 KERN_ERR_ARG, "not initialised");
        KT_ERROR(kern_scatter_plan_init(NULL, &ti, 3, NULL, 0, &p), KERN_ERR_ARG, "the plan needs");
        idx[1] = 7;
        {
            char mem[1024];
            KT_ERROR(kern_scatter_plan_init(NULL, &ti, 3, mem, sizeof mem, &p), KERN_ERR_INDEX,
                     "index[1]=7");
        }
        idx[1] = 1;
    }
    /* gather: out of range, dtype, shape */
    KT_OK(kern_gather(NULL, &ts, 0, &ti, &to));
    idx[0] = 5;
    kt_poison(out, sizeof out);
    memcpy(outsave, out, sizeof out);
    KT_ERROR(kern_gather(NULL, &ts, 0, &ti, &to), KERN_ERR_INDEX, "index[0]=5 is out of range [0, 3)");
    idx[0] = 0;
    bad = kern_tensor_1d(fidx, KERN_F32, 3);
    KT_ERROR(kern_gather(NULL, &ts, 0, &bad, &to), KERN_ERR_DTYPE, "not an integer type");
    bad = kern_tensor_2d(out, KERN_F32, 3, 3);
    KT_ERROR(kern_gather(NULL, &ts, 0, &ti, &bad), KERN_ERR_SHAPE, "out.shape=[3,3]");
    kt_assert_bytes_equal("gather out untouched", out, outsave, sizeof out);
}

/* ------------------------------------------------ hardening (issue 19) */

/* An index with a zero-size dim has no elements: nothing of its data may
 * be read (NULL data crashed; a one-element buffer was read past, or gave
 * a spurious KERN_ERR_INDEX). */
KT_TEST(scatter_gather_empty_index_reads_nothing) {
    int64_t *one = (int64_t *)kt_alloc(8, "one index");
    float self[3], src[3], out[3];
    int64_t sh3_0[2] = {3, 0}, st11[2] = {1, 1};
    kern_tensor ts, tsrc, to, ti;
    int variant;
    one[0] = 99;
    KT_OK(kern_tensor_init(&ts, self, KERN_F32, 2, sh3_0));
    KT_OK(kern_tensor_init(&tsrc, src, KERN_F32, 2, sh3_0));
    KT_OK(kern_tensor_init(&to, out, KERN_F32, 2, sh3_0));
    for (variant = 0; variant < 2; variant++) {
        /* [3, 0] with NULL data, then with one real (out of range) value */
        KT_OK(kern_tensor_init_strided(&ti, variant ? (void *)one : NULL, KERN_I64, 2, sh3_0,
                                       st11));
        kt_context("index data %s", variant ? "one element" : "NULL");
        KT_OK(kern_scatter_reduce(kt_ctx(1, KERN_ISA_AUTO), &ts, 0, &ti, &tsrc, KERN_REDUCE_SUM, 1,
                                  &to, NULL, NULL));
        KT_OK(kern_scatter_reduce(kt_ctx(2, KERN_ISA_AUTO), &ts, 0, &ti, &tsrc, KERN_REDUCE_AMAX, 0,
                                  &to, NULL, NULL));
        KT_OK(kern_gather(kt_ctx(1, KERN_ISA_AUTO), &tsrc, 0, &ti, &to));
    }
    kt_free(one);
}

/* A dim of size 1 may have any stride (2^62, INT64_MAX): scaling it to
 * bytes or stepping past it must not overflow (UBSan reported signed
 * overflow in the row strides and the general-path iterator). */
KT_TEST(scatter_gather_huge_unused_strides) {
    float self[4] = {1, 2, 3, 4}, src[8] = {5, 6, 7, 8, 9, 10, 11, 12}, out[4], g[8];
    int64_t idx[2] = {0, 0};
    int64_t s14[2] = {1, 4}, big[2] = {(int64_t)1 << 62, 1}, s24[2] = {2, 4};
    kern_tensor ts, tsrc, to, ti = kern_tensor_1d(idx, KERN_I64, 2), tg;
    double want[4], wg[8];
    int i;
    KT_OK(kern_tensor_init_strided(&ts, self, KERN_F32, 2, s14, big));
    KT_OK(kern_tensor_init_strided(&to, out, KERN_F32, 2, s14, big));
    KT_OK(kern_tensor_init(&tsrc, src, KERN_F32, 2, s24));
    for (i = 0; i < 4; i++) want[i] = self[i] + src[i] + src[4 + i];
    KT_OK(kern_scatter_reduce(kt_ctx(1, KERN_ISA_AUTO), &ts, 0, &ti, &tsrc, KERN_REDUCE_SUM, 1, &to,
                              NULL, NULL));
    kt_assert_close("scatter out", out, KERN_F32, want, 4, kt_tol(KERN_F32));
    /* gather from a one-row src with a huge row stride */
    KT_OK(kern_tensor_init(&tg, g, KERN_F32, 2, s24));
    KT_OK(kern_gather(kt_ctx(1, KERN_ISA_AUTO), &ts, 0, &ti, &tg));
    for (i = 0; i < 8; i++) wg[i] = self[i % 4];
    kt_assert_close("gather out", g, KERN_F32, wg, 8, kt_tol(KERN_F32));
    /* general path (dim 1) over [2, 1] views whose size-1 dim has stride
     * INT64_MAX */
    {
        int64_t sh21[2] = {2, 1}, stm[2] = {1, INT64_MAX}, i21[2] = {0, 0};
        float a[2] = {1, 2}, b[2] = {10, 20}, o[2];
        kern_tensor ta, tb, tout, tix;
        double w2[2] = {11, 22};
        KT_OK(kern_tensor_init_strided(&ta, a, KERN_F32, 2, sh21, stm));
        KT_OK(kern_tensor_init_strided(&tb, b, KERN_F32, 2, sh21, stm));
        KT_OK(kern_tensor_init_strided(&tout, o, KERN_F32, 2, sh21, stm));
        KT_OK(kern_tensor_init_strided(&tix, i21, KERN_I64, 2, sh21, stm));
        KT_OK(kern_scatter_reduce(kt_ctx(1, KERN_ISA_AUTO), &ta, 1, &tix, &tb, KERN_REDUCE_SUM, 1,
                                  &tout, NULL, NULL));
        kt_assert_close("general out", o, KERN_F32, w2, 2, kt_tol(KERN_F32));
        KT_OK(kern_gather(kt_ctx(1, KERN_ISA_AUTO), &tb, 1, &tix, &tout));
        w2[0] = 10; w2[1] = 20;
        kt_assert_close("general gather", o, KERN_F32, w2, 2, kt_tol(KERN_F32));
    }
}

KT_TEST(scatter_plan_bytes_limits) {
    KT_CHECK(kern_scatter_plan_bytes(INT64_MAX, 0) == 0);
    KT_CHECK(kern_scatter_plan_bytes(INT64_MAX - 1, 0) == 0);
    KT_CHECK(kern_scatter_plan_bytes(0, INT64_MAX) == 0);
    KT_CHECK(kern_scatter_plan_bytes(-1, 0) == 0);
    KT_CHECK(kern_scatter_plan_bytes(3, 5) == 64 + 20, "%zu", kern_scatter_plan_bytes(3, 5));
}

/* Outputs whose elements overlap (a zero stride) cannot be written:
 * KERN_ERR_LAYOUT, as gemm and qgemm. */
KT_TEST(scatter_gather_reject_self_overlapping_out) {
    float src[12], self[12], out[12], save[12];
    int64_t idx[3] = {0, 1, 2}, sh[2] = {2, 4}, st60[2] = {6, 0}, sh34[2] = {3, 4};
    int64_t st0[2] = {0, 1};
    kern_tensor tsrc, ts, to, ti = kern_tensor_1d(idx, KERN_I64, 2);
    int i;
    for (i = 0; i < 12; i++) src[i] = self[i] = (float)i;
    kt_poison(out, sizeof out);
    memcpy(save, out, sizeof out);
    KT_OK(kern_tensor_init(&tsrc, src, KERN_F32, 2, sh34));
    KT_OK(kern_tensor_init_strided(&to, out, KERN_F32, 2, sh, st60));
    KT_ERROR(kern_gather(NULL, &tsrc, 0, &ti, &to), KERN_ERR_LAYOUT, "out has overlapping elements");
    KT_OK(kern_tensor_init(&ts, self, KERN_F32, 2, sh34));
    KT_OK(kern_tensor_init_strided(&to, out, KERN_F32, 2, sh34, st0));
    ti = kern_tensor_1d(idx, KERN_I64, 3);
    KT_ERROR(kern_scatter_reduce(NULL, &ts, 0, &ti, &tsrc, KERN_REDUCE_SUM, 1, &to, NULL, NULL),
             KERN_ERR_LAYOUT, "out has overlapping elements");
    kt_assert_bytes_equal("out untouched", out, save, sizeof out);
}

/* Every op under fault injection: each refused allocation gives NOMEM
 * with the outputs untouched and nothing leaked. The general path used to
 * fill out = self and the arg_out sentinels before reserving its scratch. */
typedef struct sc_fault {
    kern_tensor self, src, idx, out, arg;
    int dim, use_arg;
    kern_reduce red;
} sc_fault;
static kern_status sc_fault_scatter(kern_ctx *ctx, void *p) {
    sc_fault *f = (sc_fault *)p;
    return kern_scatter_reduce(ctx, &f->self, f->dim, &f->idx, &f->src, f->red, 1, &f->out,
                               f->use_arg ? &f->arg : NULL, NULL);
}
static kern_status sc_fault_gather(kern_ctx *ctx, void *p) {
    sc_fault *f = (sc_fault *)p;
    return kern_gather(ctx, &f->src, f->dim, &f->idx, &f->out);
}
KT_TEST(scatter_gather_fault_injection) {
    enum { N = 40, F = 24, E = 300 };
    float *self = (float *)kt_alloc(N * F * 4, "self"), *src = (float *)kt_alloc(E * F * 4, "src");
    float *out = (float *)kt_alloc(E * F * 4, "out");
    int64_t *idx = (int64_t *)kt_alloc(E * F * 8, "index"), *arg = (int64_t *)kt_alloc(N * F * 8, "arg");
    kt_rng r = kt_rng_make(5);
    sc_fault f;
    kt_region reg[2];
    int threads, dim, use_arg;
    int64_t i;
    kt_fill_normal(&r, self, KERN_F32, N * F, 1.0);
    kt_fill_normal(&r, src, KERN_F32, E * F, 1.0);
    for (i = 0; i < E * F; i++) idx[i] = kt_randint(&r, 0, N);
    kt_poison(out, E * F * 4);
    kt_poison(arg, N * F * 8);
    reg[0].p = out; reg[0].n = E * F * 4; reg[0].what = "out";
    reg[1].p = arg; reg[1].n = N * F * 8; reg[1].what = "arg_out";
    memset(&f, 0, sizeof f);
    f.self = kern_tensor_2d(self, KERN_F32, N, F);
    f.src = kern_tensor_2d(src, KERN_F32, E, F);
    f.out = kern_tensor_2d(out, KERN_F32, N, F);
    f.arg = kern_tensor_2d(arg, KERN_I64, N, F);
    for (threads = 1; threads <= 2; threads++)
        for (dim = 0; dim < 2; dim++)
            for (use_arg = 0; use_arg < 2; use_arg++) {
                kt_context("%d threads, dim %d, arg %d", threads, dim, use_arg);
                f.dim = dim;
                f.use_arg = use_arg;
                f.red = use_arg ? KERN_REDUCE_AMAX : KERN_REDUCE_MEAN;
                /* dim 0: the GNN fast path (1-D index); dim 1: general */
                f.idx = dim == 0 ? kern_tensor_1d(idx, KERN_I64, E) : kern_tensor_2d(idx, KERN_I64, N, F);
                if (dim == 1)
                    for (i = 0; i < N * F; i++) idx[i] = kt_randint(&r, 0, F);
                KT_CHECK(kt_fault_sweep("scatter_reduce", threads, KERN_ISA_AUTO, sc_fault_scatter,
                                        &f, reg, 2) >= 0);
                if (dim == 0)
                    for (i = 0; i < E; i++) idx[i] = kt_randint(&r, 0, N);
            }
    /* gather: fast and general */
    for (dim = 0; dim < 2; dim++) {
        f.dim = dim;
        f.src = kern_tensor_2d(self, KERN_F32, N, F);
        f.idx = dim == 0 ? kern_tensor_1d(idx, KERN_I64, E) : kern_tensor_2d(idx, KERN_I64, N, F);
        f.out = dim == 0 ? kern_tensor_2d(out, KERN_F32, E, F) : kern_tensor_2d(out, KERN_F32, N, F);
        KT_CHECK(kt_fault_sweep("gather", 2, KERN_ISA_AUTO, sc_fault_gather, &f, reg, 1) >= 0);
    }
    kt_free(self); kt_free(src); kt_free(out); kt_free(idx); kt_free(arg);
}

/* Found by fuzz_scatter (inputs in tests/fuzz/corpus/scatter): an empty
 * index with huge other dims on the general path (the line count
 * overflowed). */
KT_TEST(scatter_fuzz_findings) {
    int64_t sh[3] = {(int64_t)1 << 40, 0, (int64_t)1 << 40};
    kern_tensor self, src, idx, out;
    KT_OK(kern_tensor_init(&self, NULL, KERN_F32, 3, sh));
    KT_OK(kern_tensor_init(&src, NULL, KERN_F32, 3, sh));
    KT_OK(kern_tensor_init(&out, NULL, KERN_F32, 3, sh));
    KT_OK(kern_tensor_init(&idx, NULL, KERN_I64, 3, sh));
    KT_OK(kern_scatter_reduce(kt_ctx(1, KERN_ISA_AUTO), &self, 1, &idx, &src, KERN_REDUCE_SUM, 1,
                              &out, NULL, NULL));
    KT_OK(kern_gather(kt_ctx(1, KERN_ISA_AUTO), &src, 1, &idx, &out));
}

/* Every ISA level gives the bits of the scalar level: the float rows are one
 * template (gen/templates/kern_scatter_rows.c.in) whose scalar expansion is
 * the exact twin of the vector ones. Widths with and without vector tails,
 * f32/bf16/f16, every reduce with and without self, arg for amax/amin, the
 * stream (det = 0) and csr (det = 1) strategies, 1 and 2 threads (2 threads
 * of the stream strategy also merge partial rows). Inputs are finite with
 * ties and signed zeros (NaN payloads are unspecified). */
KT_TEST(scatter_levels_same_bits) {
    static const int64_t FS[5] = {1, 7, 8, 13, 37};
    static const kern_dtype DT[3] = {KERN_F32, KERN_BF16, KERN_F16};
    const int64_t N = 23, E = 300;
    kt_rng r = kt_rng_make(41);
    int64_t *idx = (int64_t *)kt_alloc((size_t)E * 8, "idx");
    int fi, di, k, det, th;
    for (k = 0; k < E; k++) idx[k] = kt_randint(&r, 0, N - 3); /* the last rows get nothing */
    for (fi = 0; fi < 5; fi++)
        for (di = 0; di < 3; di++) {
            const int64_t F = FS[fi];
            const kern_dtype dt = DT[di];
            const size_t es = kern_dtype_size(dt), ob = (size_t)(N * F) * es;
            void *self = kt_alloc(ob, "self"), *src = kt_alloc((size_t)(E * F) * es, "src");
            void *ref = kt_alloc(ob, "ref"), *out = kt_alloc(ob, "out");
            int64_t *aref = (int64_t *)kt_alloc((size_t)(N * F) * 8, "aref");
            int64_t *arg = (int64_t *)kt_alloc((size_t)(N * F) * 8, "arg");
            kern_tensor ts = kern_tensor_2d(self, dt, N, F), tsrc = kern_tensor_2d(src, dt, E, F);
            kern_tensor ti = kern_tensor_1d(idx, KERN_I64, E), to = kern_tensor_2d(out, dt, N, F);
            kern_tensor tr = kern_tensor_2d(ref, dt, N, F), ta = kern_tensor_2d(arg, KERN_I64, N, F);
            kern_tensor tar = kern_tensor_2d(aref, KERN_I64, N, F);
            int64_t i;
            /* values on a coarse grid: ties and +-0 (prod stays finite) */
            for (i = 0; i < N * F; i++) kt_set(self, dt, i, (double)kt_randint(&r, -4, 5) * 0.25);
            for (i = 0; i < E * F; i++) {
                double v = (double)kt_randint(&r, -8, 9) * 0.125;
                kt_set(src, dt, i, v == 0 && (i & 1) ? -0.0 : 1.0 + v / 4);
                if (i % 3 == 0) kt_set(src, dt, i, v);
            }
            for (k = 0; k < 10; k++) {
                const kern_reduce red = ALL_RED[k / 2];
                const int incl = !(k & 1), mm = red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN;
                for (det = 0; det < 2; det++)
                    for (th = 1; th <= 2; th++) {
                        KT_OK(kern_scatter_reduce(kt_ctx_ex(th, KERN_ISA_SCALAR, det), &ts, 0, &ti,
                                                  &tsrc, red, incl, &tr, mm ? &tar : NULL, NULL));
                        KT_FOR_EACH_ISA(isa, ctx0, th) {
                            (void)ctx0;
                            kt_context("F=%lld %s %s incl=%d det=%d threads=%d isa=%s", (long long)F,
                                       kern_dtype_name(dt), kern_reduce_name(red), incl, det, th,
                                       kern_isa_name(isa));
                            KT_OK(kern_scatter_reduce(kt_ctx_ex(th, isa, det), &ts, 0, &ti, &tsrc,
                                                      red, incl, &to, mm ? &ta : NULL, NULL));
                            kt_assert_bytes_equal("out", out, ref, ob);
                            if (mm) kt_assert_bytes_equal("arg", arg, aref, (size_t)(N * F) * 8);
                        }
                    }
            }
            kt_free(self); kt_free(src); kt_free(ref); kt_free(out); kt_free(aref); kt_free(arg);
        }
    kt_free(idx);
}

KT_MAIN()
