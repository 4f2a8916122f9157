/* Tests for kern_spmm.h: spmm_reduce forward/backward against plain and
 * dense references and finite differences, CSR validate / COO->CSR /
 * transpose, errors. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_spmm.h"
#include "kt.h"

#ifdef KT_SANITIZER
#define SP_BIG 0
#else
#define SP_BIG 1
#endif

static const kern_reduce RED4[4] = {KERN_REDUCE_SUM, KERN_REDUCE_MEAN, KERN_REDUCE_AMAX,
                                    KERN_REDUCE_AMIN};

static int64_t ix(const void *p, kern_dtype dt, int64_t i) {
    return dt == KERN_I64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}
static void setix(void *p, kern_dtype dt, int64_t i, int64_t v) {
    if (dt == KERN_I64) ((int64_t *)p)[i] = v;
    else ((int32_t *)p)[i] = (int32_t)v;
}

/* A CSR in guarded buffers. */
typedef struct {
    kern_csr a;
} csr_buf;

static void csr_free(kern_csr *a) {
    kt_free(a->rowptr);
    kt_free(a->col);
    kt_free(a->values);
}

/* random or power-law graph: rows = destinations, cols = sources; built
 * through kern_coo_to_csr (stable, duplicates kept) */
static kern_csr make_graph(kt_rng *r, int64_t N, int64_t E, int power, kern_dtype it,
                           kern_dtype vdt, int with_values, int grid) {
    kern_csr a;
    size_t is = kern_dtype_size(it);
    void *row = kt_alloc((size_t)E * is + 1, "coo row"), *col = kt_alloc((size_t)E * is + 1, "coo col");
    void *val = with_values ? kt_alloc((size_t)E * kern_dtype_size(vdt) + 1, "coo val") : NULL;
    int64_t e;
    for (e = 0; e < E; e++) {
        int64_t rr, cc;
        if (power) {
            double u = kt_uniform(r, 0, 1);
            rr = (int64_t)((double)N * u * u * u * u);
            u = kt_uniform(r, 0, 1);
            cc = (int64_t)((double)N * u * u);
        } else {
            rr = kt_randint(r, 0, N);
            cc = kt_randint(r, 0, N);
        }
        if (rr >= N) rr = N - 1;
        if (cc >= N) cc = N - 1;
        setix(row, it, e, rr);
        setix(col, it, e, cc);
        if (val) {
            static const double g[6] = {0.5, 1, 2, -1, -0.5, 1.5};
            kt_set(val, vdt, e, grid ? g[kt_randint(r, 0, 6)] : kt_uniform(r, -1.5, 1.5));
        }
    }
    memset(&a, 0, sizeof a);
    a.rowptr = kt_alloc((size_t)(N + 1) * is, "rowptr");
    a.col = kt_alloc((size_t)E * is + 1, "col");
    a.values = val ? kt_alloc((size_t)E * kern_dtype_size(vdt) + 1, "values") : NULL;
    KT_OK(kern_coo_to_csr(NULL, N, N, E, row, col, val, it, vdt, KERN_COO_KEEP_DUPLICATES, &a));
    kt_free(row);
    kt_free(col);
    kt_free(val);
    return a;
}

static double aval(const kern_csr *a, int64_t k) {
    return a->values ? kt_get(a->values, a->value_dtype, k) : 1.0;
}

/* PyTorch spmm_reduce reference (double), arg per the torch rule */
static void ref_spmm(const kern_csr *a, const void *x, kern_dtype dt, int64_t F, kern_reduce red,
                     double *want, int64_t *wantarg) {
    int64_t i, k, f;
    for (i = 0; i < a->nrows; i++) {
        int64_t s = ix(a->rowptr, a->index_dtype, i), e = ix(a->rowptr, a->index_dtype, i + 1);
        for (f = 0; f < F; f++) {
            double acc = red == KERN_REDUCE_AMAX ? -INFINITY : red == KERN_REDUCE_AMIN ? INFINITY : 0;
            int64_t arg = a->nnz;
            for (k = s; k < e; k++) {
                double v = aval(a, k) * kt_get(x, dt, ix(a->col, a->index_dtype, k) * F + f);
                if (red == KERN_REDUCE_SUM || red == KERN_REDUCE_MEAN) acc += v;
                else if ((red == KERN_REDUCE_AMAX && (v > acc || v != v)) ||
                         (red == KERN_REDUCE_AMIN && (v < acc || v != v))) {
                    acc = v;
                    arg = k;
                }
            }
            if (s == e) acc = 0;
            else if (red == KERN_REDUCE_MEAN) acc /= (double)(e - s);
            want[i * F + f] = acc;
            if (wantarg) wantarg[i * F + f] = arg;
        }
    }
}

static int64_t max_row(const kern_csr *a) {
    int64_t i, m = 0;
    for (i = 0; i < a->nrows; i++) {
        int64_t d = ix(a->rowptr, a->index_dtype, i + 1) - ix(a->rowptr, a->index_dtype, i);
        if (d > m) m = d;
    }
    return m;
}

static void run_case(kern_ctx *ctx, int64_t N, int64_t E, int64_t F, int power, kern_dtype dt,
                     kern_dtype it, kern_dtype vdt, int with_values, kern_reduce red,
                     kern_dtype argdt, uint64_t salt) {
    kt_rng r = kt_rng_make(salt);
    int mm = red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN;
    kern_csr a = make_graph(&r, N, E, power, it, vdt, with_values, mm);
    size_t es = kern_dtype_size(dt);
    void *x = kt_alloc((size_t)(N * F) * es + 1, "dense");
    void *y = kt_alloc((size_t)(N * F) * es + 1, "out");
    void *arg = mm ? kt_alloc((size_t)(N * F) * kern_dtype_size(argdt) + 1, "arg") : NULL;
    double *want = (double *)malloc((size_t)(N * F + 1) * sizeof(double));
    int64_t *wantarg = (int64_t *)malloc((size_t)(N * F + 1) * sizeof(int64_t)), i;
    kern_tensor tx = kern_tensor_2d(x, dt, N, F), ty = kern_tensor_2d(y, dt, N, F);
    kern_tensor ta = kern_tensor_2d(arg, argdt, N, F);
    double f = 2.0 * sqrt((double)max_row(&a) + 1.0);
    if (mm) {
        for (i = 0; i < N * F; i++) kt_set(x, dt, i, (double)kt_randint(&r, -8, 9) * 0.25);
    } else {
        kt_fill_normal(&r, x, dt, N * F, 1.0);
    }
    kt_poison(y, (size_t)(N * F) * es);
    if (arg) kt_poison(arg, (size_t)(N * F) * kern_dtype_size(argdt));
    KT_OK(kern_spmm_reduce(ctx, &a, &tx, &ty, red, arg ? &ta : NULL, NULL));
    ref_spmm(&a, x, dt, F, red, want, wantarg);
    kt_assert_close("out", y, dt, want, N * F, kt_tol_scaled(dt, mm ? 1.0 : f));
    if (arg)
        for (i = 0; i < N * F; i++) {
            int64_t g = ix(arg, argdt, i);
            if (g != wantarg[i]) {
                KT_CHECK(g == wantarg[i], "arg[%lld]=%lld want %lld", (long long)i, (long long)g,
                         (long long)wantarg[i]);
                break;
            }
        }
    csr_free(&a);
    kt_free(x);
    kt_free(y);
    kt_free(arg);
    free(want);
    free(wantarg);
}

KT_TEST(spmm_grid) {
    static const int64_t Ns[3] = {1, 7, 1000}, Es[3] = {0, 1, 5000};
    static const int64_t Fs[6] = {1, 3, 16, 17, 64, 129};
    static const kern_dtype DT[3] = {KERN_F32, KERN_BF16, KERN_F16};
    int counter = 0, th;
    for (th = 1; th <= 2; th++) {
        KT_FOR_EACH_ISA(isa, ctx, th) {
            int power, a, b, c, k;
            for (power = 0; power < 2; power++)
                for (a = 0; a < 3; a++)
                    for (b = 0; b < 3; b++)
                        for (c = 0; c < 6; c++)
                            for (k = 0; k < 4; k++) {
                                kern_dtype dt = DT[(counter + c) % 3];
                                kern_dtype vdt = (counter / 3) & 1 ? KERN_BF16 : KERN_F32;
                                kern_dtype it = (counter / 2) & 1 ? KERN_I32 : KERN_I64;
                                int wv = counter % 5 != 0;
                                counter++;
                                if (Es[b] == 5000 && Fs[c] >= 17 && (counter % 3) != 0) continue;
                                if (!SP_BIG && Es[b] == 5000 && Fs[c] > 17) continue;
                                kt_context("isa=%s threads=%d %s N=%lld E=%lld F=%lld %s %s vals=%s "
                                           "idx=%s",
                                           kern_isa_name(isa), th, power ? "power" : "random",
                                           (long long)Ns[a], (long long)Es[b], (long long)Fs[c],
                                           kern_dtype_name(dt), kern_reduce_name(RED4[k]),
                                           wv ? kern_dtype_name(vdt) : "none", kern_dtype_name(it));
                                run_case(ctx, Ns[a], Es[b], Fs[c], power, dt, it, vdt, wv, RED4[k],
                                         counter & 4 ? KERN_I32 : KERN_I64, (uint64_t)counter);
                            }
        }
    }
}

/* sum and mean against an explicit dense matrix (duplicates add up) */
KT_TEST(spmm_dense_reference) {
    const int64_t N = 60, E = 700, F = 17;
    kt_rng r = kt_rng_make(1);
    kern_csr a = make_graph(&r, N, E, 1, KERN_I32, KERN_F32, 1, 0);
    double *A = (double *)calloc((size_t)(N * N), sizeof(double)), *want;
    float *x = (float *)kt_alloc((size_t)(N * F) * 4, "x"), *y = (float *)kt_alloc((size_t)(N * F) * 4, "y");
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, N, F), ty = kern_tensor_2d(y, KERN_F32, N, F);
    int64_t i, j, k, f, *deg = (int64_t *)calloc((size_t)N, 8);
    int m;
    want = (double *)malloc((size_t)(N * F) * sizeof(double));
    for (i = 0; i < N; i++)
        for (k = ix(a.rowptr, KERN_I32, i); k < ix(a.rowptr, KERN_I32, i + 1); k++) {
            A[i * N + ix(a.col, KERN_I32, k)] += aval(&a, k);
            deg[i]++;
        }
    kt_fill_normal(&r, x, KERN_F32, N * F, 1.0);
    for (m = 0; m < 2; m++) {
        for (i = 0; i < N; i++)
            for (f = 0; f < F; f++) {
                double s = 0;
                for (j = 0; j < N; j++) s += A[i * N + j] * x[j * F + f];
                want[i * F + f] = m && deg[i] ? s / (double)deg[i] : s;
            }
        KT_OK(kern_spmm_reduce(kt_ctx(2, KERN_ISA_AUTO), &a, &tx, &ty,
                               m ? KERN_REDUCE_MEAN : KERN_REDUCE_SUM, NULL, NULL));
        kt_assert_close(m ? "mean" : "sum", y, KERN_F32, want, N * F,
                        kt_tol_scaled(KERN_F32, 2.0 * sqrt((double)max_row(&a) + 1)));
    }
    csr_free(&a);
    kt_free(x);
    kt_free(y);
    free(A);
    free(want);
    free(deg);
}

/* values PyTorch 2.15 printed for the same inputs */
static void golden(kern_ctx *ctx) {
    /* duplicates in row 2 (col 1 twice), NaN in dense */
    int64_t crow[4] = {0, 2, 2, 5}, col[5] = {0, 2, 1, 1, 0};
    float val[5] = {1, 2, -1, 3, 0.5f}, x[6] = {1, 2, 3, -4, 5, NAN}, y[6];
    static const double want[4][6] = {{11, NAN, 0, 0, 6.5, -7},
                                      {5.5, NAN, 0, 0, 13.0 / 6.0, -7.0 / 3.0},
                                      {10, NAN, 0, 0, 9, 4},
                                      {1, NAN, 0, 0, -3, -12}};
    kern_csr a;
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, 3, 2), ty = kern_tensor_2d(y, KERN_F32, 3, 2);
    int k;
    memset(&a, 0, sizeof a);
    a.nrows = 3; a.ncols = 3; a.nnz = 5; a.rowptr = crow; a.col = col; a.values = val;
    a.index_dtype = KERN_I64; a.value_dtype = KERN_F32;
    for (k = 0; k < 4; k++) {
        KT_OK(kern_spmm_reduce(ctx, &a, &tx, &ty, RED4[k], NULL, NULL));
        kt_assert_close(kern_reduce_name(RED4[k]), y, KERN_F32, want[k], 6, kt_tol(KERN_F32));
    }
    /* arg_out: torch's _sparse_mm_reduce_impl */
    {
        int64_t col2[5] = {0, 2, 0, 1, 2}, arg[6];
        float x2[6] = {1, 1, 1, 1, 2, NAN}, x3[6] = {3, 1, 1, 1, 1.5f, 1};
        static const double w2[6] = {4, NAN, 0, 0, 3, NAN}, w3[6] = {3, 2, 0, 0, 3, 3};
        static const double w4[6] = {3, 1, 0, 0, -3, -1};
        static const int64_t a2[6] = {1, 1, 5, 5, 3, 4}, a3[6] = {0, 1, 5, 5, 3, 3},
                             a4[6] = {0, 0, 5, 5, 2, 2};
        kern_tensor tx2 = kern_tensor_2d(x2, KERN_F32, 3, 2), tx3 = kern_tensor_2d(x3, KERN_F32, 3, 2);
        kern_tensor ta = kern_tensor_2d(arg, KERN_I64, 3, 2);
        a.col = col2;
        KT_OK(kern_spmm_reduce(ctx, &a, &tx2, &ty, KERN_REDUCE_AMAX, &ta, NULL));
        kt_assert_close("amax nan", y, KERN_F32, w2, 6, kt_tol(KERN_F32));
        KT_CHECK(memcmp(arg, a2, sizeof arg) == 0, "arg %lld %lld %lld %lld", (long long)arg[0],
                 (long long)arg[1], (long long)arg[4], (long long)arg[5]);
        KT_OK(kern_spmm_reduce(ctx, &a, &tx3, &ty, KERN_REDUCE_AMAX, &ta, NULL));
        kt_assert_close("amax", y, KERN_F32, w3, 6, kt_tol(KERN_F32));
        KT_CHECK(memcmp(arg, a3, sizeof arg) == 0, "arg");
        KT_OK(kern_spmm_reduce(ctx, &a, &tx3, &ty, KERN_REDUCE_AMIN, &ta, NULL));
        kt_assert_close("amin", y, KERN_F32, w4, 6, kt_tol(KERN_F32));
        KT_CHECK(memcmp(arg, a4, sizeof arg) == 0, "arg");
        /* NaN then a larger value: still NaN; two NaNs: arg at the last */
        {
            float x4[6] = {NAN, NAN, 1, 1, NAN, 7};
            KT_OK(kern_spmm_reduce(ctx, &a, &tx2, &ty, KERN_REDUCE_AMAX, &ta, NULL));
            tx2.data = x4;
            KT_OK(kern_spmm_reduce(ctx, &a, &tx2, &ty, KERN_REDUCE_AMAX, &ta, NULL));
            /* row 0: entries 0 (col 0: nan, nan) then 1 (col 2: 2*nan, 2*7) */
            KT_CHECK(y[0] != y[0] && arg[0] == 1 && y[1] != y[1] && arg[1] == 0,
                     "%g %lld %g %lld", y[0], (long long)arg[0], y[1], (long long)arg[1]);
        }
    }
}

KT_TEST(spmm_torch_golden) {
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        kt_context("isa=%s", kern_isa_name(isa));
        golden(ctx);
    }
}

/* 1 vs 2 threads: every reduce, same bits */
KT_TEST(spmm_threads_identical) {
    const int64_t N = 3000, E = SP_BIG ? 60000 : 10000, F = 40;
    kt_rng r = kt_rng_make(2);
    kern_csr a = make_graph(&r, N, E, 1, KERN_I64, KERN_F32, 1, 0);
    float *x = (float *)kt_alloc((size_t)(N * F) * 4, "x");
    float *y1 = (float *)kt_alloc((size_t)(N * F) * 4, "y1"), *y2 = (float *)kt_alloc((size_t)(N * F) * 4, "y2");
    int32_t *a1 = (int32_t *)kt_alloc((size_t)(N * F) * 4, "a1"), *a2 = (int32_t *)kt_alloc((size_t)(N * F) * 4, "a2");
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, N, F), t1 = kern_tensor_2d(y1, KERN_F32, N, F);
    kern_tensor t2 = kern_tensor_2d(y2, KERN_F32, N, F), ta1 = kern_tensor_2d(a1, KERN_I32, N, F);
    kern_tensor ta2 = kern_tensor_2d(a2, KERN_I32, N, F);
    int k;
    kt_fill_normal(&r, x, KERN_F32, N * F, 1.0);
    for (k = 0; k < 4; k++) {
        int mm = k >= 2;
        kt_context("%s", kern_reduce_name(RED4[k]));
        KT_OK(kern_spmm_reduce(kt_ctx(1, KERN_ISA_AUTO), &a, &tx, &t1, RED4[k], mm ? &ta1 : NULL, NULL));
        KT_OK(kern_spmm_reduce(kt_ctx(2, KERN_ISA_AUTO), &a, &tx, &t2, RED4[k], mm ? &ta2 : NULL, NULL));
        kt_assert_bytes_equal("out", y1, y2, (size_t)(N * F) * 4);
        if (mm) kt_assert_bytes_equal("arg", a1, a2, (size_t)(N * F) * 4);
    }
    csr_free(&a);
    kt_free(x); kt_free(y1); kt_free(y2); kt_free(a1); kt_free(a2);
}

/* ------------------------------------------------------------ backward */

/* exact gradients in double (the dense-gradient reference) */
static void ref_backward(const kern_csr *a, const float *x, const float *g, int64_t F,
                         kern_reduce red, const int64_t *arg, double *gd, double *gv) {
    int64_t i, k, f;
    for (i = 0; i < a->ncols * F; i++) gd[i] = 0;
    for (i = 0; i < a->nrows; i++) {
        int64_t s = ix(a->rowptr, a->index_dtype, i), e = ix(a->rowptr, a->index_dtype, i + 1);
        for (k = s; k < e; k++) {
            int64_t c = ix(a->col, a->index_dtype, k);
            double v = aval(a, k), acc = 0;
            for (f = 0; f < F; f++) {
                double gg = g[i * F + f];
                if (red == KERN_REDUCE_SUM || red == KERN_REDUCE_MEAN) {
                    double sc = red == KERN_REDUCE_MEAN ? 1.0 / (double)(e - s) : 1.0;
                    gd[c * F + f] += v * sc * gg;
                    acc += gg * x[c * F + f] * sc;
                } else if (arg[i * F + f] == k) {
                    gd[c * F + f] += v * gg;
                    acc += gg * x[c * F + f];
                }
            }
            gv[k] = acc;
        }
    }
}

static double loss(kern_ctx *ctx, const kern_csr *a, float *x, const float *g, float *y,
                   int64_t F, kern_reduce red) {
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, a->ncols, F), ty = kern_tensor_2d(y, KERN_F32, a->nrows, F);
    double L = 0;
    int64_t i;
    KT_OK(kern_spmm_reduce(ctx, a, &tx, &ty, red, NULL, NULL));
    for (i = 0; i < a->nrows * F; i++) L += (double)g[i] * y[i];
    return L;
}

KT_TEST(spmm_backward) {
    int th;
    for (th = 1; th <= 2; th++) {
        KT_FOR_EACH_ISA(isa, ctx, th) {
            int k, big;
            for (big = 0; big < 2; big++)
                for (k = 0; k < 4; k++) {
                    const int64_t N = big ? 500 : 7, E = big ? 4000 : 30, F = big ? 33 : 5;
                    kt_rng r = kt_rng_make((uint64_t)(k + 10 * big));
                    kern_csr a = make_graph(&r, N, E, big, big ? KERN_I64 : KERN_I32, KERN_F32, 1, 0);
                    float *x = (float *)kt_alloc((size_t)(N * F) * 4, "x");
                    float *g = (float *)kt_alloc((size_t)(N * F) * 4, "g");
                    float *y = (float *)kt_alloc((size_t)(N * F) * 4, "y");
                    float *gd = (float *)kt_alloc((size_t)(N * F) * 4, "gd");
                    float *gv = (float *)kt_alloc((size_t)E * 4 + 4, "gv");
                    int64_t *arg = (int64_t *)kt_alloc((size_t)(N * F) * 8, "arg");
                    double *wgd = (double *)malloc((size_t)(N * F) * sizeof(double));
                    double *wgv = (double *)malloc((size_t)(E + 1) * sizeof(double));
                    kern_tensor tx = kern_tensor_2d(x, KERN_F32, N, F), tg = kern_tensor_2d(g, KERN_F32, N, F);
                    kern_tensor ty = kern_tensor_2d(y, KERN_F32, N, F), tgd = kern_tensor_2d(gd, KERN_F32, N, F);
                    kern_tensor tgv = kern_tensor_1d(gv, KERN_F32, a.nnz), ta = kern_tensor_2d(arg, KERN_I64, N, F);
                    int mm = k >= 2;
                    kt_context("isa=%s threads=%d %s big=%d", kern_isa_name(isa), th,
                               kern_reduce_name(RED4[k]), big);
                    kt_fill_normal(&r, x, KERN_F32, N * F, 1.0);
                    kt_fill_normal(&r, g, KERN_F32, N * F, 1.0);
                    KT_OK(kern_spmm_reduce(ctx, &a, &tx, &ty, RED4[k], mm ? &ta : NULL, NULL));
                    kt_poison(gd, (size_t)(N * F) * 4);
                    kt_poison(gv, (size_t)a.nnz * 4);
                    KT_OK(kern_spmm_reduce_backward(ctx, &a, &tx, &tg, RED4[k], mm ? &ta : NULL, &tgd,
                                                    &tgv, NULL));
                    ref_backward(&a, x, g, F, RED4[k], arg, wgd, wgv);
                    kt_assert_close("grad_dense", gd, KERN_F32, wgd, N * F,
                                    kt_tol_scaled(KERN_F32, 2.0 * sqrt((double)E)));
                    kt_assert_close("grad_values", gv, KERN_F32, wgv, a.nnz,
                                    kt_tol_scaled(KERN_F32, 2.0 * sqrt((double)F)));
                    if (!big && isa == KERN_ISA_SCALAR) {
                        /* central finite differences of L = <g, spmm(a, x)> */
                        int64_t i;
                        const float h = 1e-2f;
                        double *fd = (double *)malloc((size_t)(N * F) * sizeof(double));
                        for (i = 0; i < N * F; i++) {
                            float s = x[i];
                            double lp, lm;
                            x[i] = s + h; lp = loss(ctx, &a, x, g, y, F, RED4[k]);
                            x[i] = s - h; lm = loss(ctx, &a, x, g, y, F, RED4[k]);
                            x[i] = s;
                            fd[i] = (lp - lm) / (2.0 * h);
                        }
                        kt_assert_close("grad_dense vs finite differences", gd, KERN_F32, fd, N * F,
                                        kt_tol_scaled(KERN_F32, 1000));
                        for (i = 0; i < a.nnz; i++) {
                            float *vv = (float *)a.values, s = vv[i];
                            double lp, lm;
                            vv[i] = s + h; lp = loss(ctx, &a, x, g, y, F, RED4[k]);
                            vv[i] = s - h; lm = loss(ctx, &a, x, g, y, F, RED4[k]);
                            vv[i] = s;
                            fd[i] = (lp - lm) / (2.0 * h);
                        }
                        kt_assert_close("grad_values vs finite differences", gv, KERN_F32, fd,
                                        a.nnz, kt_tol_scaled(KERN_F32, 1000));
                        free(fd);
                    }
                    csr_free(&a);
                    kt_free(x); kt_free(g); kt_free(y); kt_free(gd); kt_free(gv); kt_free(arg);
                    free(wgd); free(wgv);
                }
        }
    }
}

/* ----------------------------------------------------- CSR utilities */

KT_TEST(csr_validate_props_and_errors) {
    int64_t rp[5] = {0, 2, 2, 5, 6}, col[6] = {1, 3, 0, 0, 2, 3};
    kern_csr a;
    kern_csr_props p;
    memset(&a, 0, sizeof a);
    a.nrows = 4; a.ncols = 4; a.nnz = 6; a.rowptr = rp; a.col = col;
    a.index_dtype = KERN_I64;
    KT_OK(kern_csr_validate(NULL, &a, &p));
    KT_CHECK(p.sorted == 1 && p.unique == 0 && p.empty_rows == 1 && p.max_row_nnz == 3,
             "sorted %d unique %d empty %lld max %lld", p.sorted, p.unique, (long long)p.empty_rows,
             (long long)p.max_row_nnz);
    col[3] = 2; col[4] = 0;
    KT_OK(kern_csr_validate(NULL, &a, &p));
    KT_CHECK(p.sorted == 0 && p.unique == -1, "sorted %d unique %d", p.sorted, p.unique);
    col[4] = 4;
    KT_ERROR(kern_csr_validate(NULL, &a, &p), KERN_ERR_INDEX,
             "csr.col[4]=4 is out of range [0, 4) (row 2)");
    col[4] = 0;
    rp[0] = 1;
    KT_ERROR(kern_csr_validate(NULL, &a, NULL), KERN_ERR_ARG, "rowptr[0]=1, must be 0");
    rp[0] = 0;
    rp[2] = 1;
    KT_ERROR(kern_csr_validate(NULL, &a, NULL), KERN_ERR_ARG,
             "rowptr is not monotone: rowptr[2]=1 < rowptr[1]=2");
    rp[2] = 2;
    rp[4] = 5;
    KT_ERROR(kern_csr_validate(NULL, &a, NULL), KERN_ERR_ARG, "rowptr[4]=5 but nnz=6");
    rp[4] = 6;
    a.index_dtype = KERN_F32;
    KT_ERROR(kern_csr_validate(NULL, &a, NULL), KERN_ERR_DTYPE, "index_dtype=f32");
}

KT_TEST(coo_to_csr_stable_and_duplicates) {
    int it_i;
    for (it_i = 0; it_i < 2; it_i++) {
        kern_dtype it = it_i ? KERN_I64 : KERN_I32;
        const int64_t N = 50, M = 40, E = SP_BIG ? 3000 : 600;
        kt_rng r = kt_rng_make((uint64_t)it_i);
        void *row = kt_alloc((size_t)E * 8, "row"), *col = kt_alloc((size_t)E * 8, "col");
        float *val = (float *)kt_alloc((size_t)E * 4, "val");
        kern_csr o;
        int64_t e, i, k, n;
        int sum;
        for (e = 0; e < E; e++) {
            setix(row, it, e, kt_randint(&r, 0, N));
            setix(col, it, e, kt_randint(&r, 0, M));
            val[e] = (float)kt_randint(&r, -4, 5);
        }
        for (sum = 0; sum < 2; sum++) {
            memset(&o, 0, sizeof o);
            o.rowptr = kt_alloc((size_t)(N + 1) * 8, "orp");
            o.col = kt_alloc((size_t)E * 8, "ocol");
            o.values = kt_alloc((size_t)E * 4, "oval");
            KT_OK(kern_coo_to_csr(kt_ctx(2, KERN_ISA_AUTO), N, M, E, row, col, val, it, KERN_F32,
                                  sum ? KERN_COO_SUM_DUPLICATES : 0, &o));
            KT_OK(kern_csr_validate(NULL, &o, NULL));
            /* reference: per row, entries in input order (merged on first
             * occurrence when summing) */
            n = 0;
            for (i = 0; i < N; i++) {
                int64_t start = n;
                KT_CHECK(ix(o.rowptr, it, i) == start, "rowptr[%lld]=%lld want %lld", (long long)i,
                         (long long)ix(o.rowptr, it, i), (long long)start);
                for (e = 0; e < E; e++) {
                    int64_t c = ix(col, it, e), found = -1;
                    if (ix(row, it, e) != i) continue;
                    if (sum)
                        for (k = start; k < n; k++)
                            if (ix(o.col, it, k) == c) found = k;
                    if (found < 0) {
                        KT_CHECK(ix(o.col, it, n) == c, "col[%lld]", (long long)n);
                        n++;
                    }
                }
            }
            KT_CHECK(o.nnz == n, "nnz %lld want %lld", (long long)o.nnz, (long long)n);
            {
                double tot = 0, tot2 = 0;
                for (e = 0; e < E; e++) tot += val[e];
                for (k = 0; k < o.nnz; k++) tot2 += ((float *)o.values)[k];
                KT_CHECK(tot == tot2, "value totals %g %g", tot, tot2);
            }
            kt_free(o.rowptr); kt_free(o.col); kt_free(o.values);
        }
        /* errors: a row out of range names the position */
        setix(row, it, 17, N);
        memset(&o, 0, sizeof o);
        o.rowptr = kt_alloc((size_t)(N + 1) * 8, "orp");
        o.col = kt_alloc((size_t)E * 8, "ocol");
        o.values = kt_alloc((size_t)E * 4, "oval");
        KT_ERROR(kern_coo_to_csr(NULL, N, M, E, row, col, val, it, KERN_F32, 0, &o), KERN_ERR_INDEX,
                 "row[17]=50 is out of range [0, 50)");
        kt_free(o.rowptr); kt_free(o.col); kt_free(o.values);
        kt_free(row); kt_free(col); kt_free(val);
    }
}

KT_TEST(csr_transpose_roundtrip) {
    const int64_t N = 300, E = SP_BIG ? 5000 : 1000;
    kt_rng r = kt_rng_make(4);
    kern_csr a = make_graph(&r, N, E, 1, KERN_I32, KERN_BF16, 1, 0), t, tt;
    int32_t *perm = (int32_t *)kt_alloc((size_t)E * 4, "perm");
    int64_t i, k;
    memset(&t, 0, sizeof t);
    memset(&tt, 0, sizeof tt);
    t.rowptr = kt_alloc((size_t)(N + 1) * 4, "trp"); t.col = kt_alloc((size_t)E * 4, "tcol");
    t.values = kt_alloc((size_t)E * 2, "tval");
    tt.rowptr = kt_alloc((size_t)(N + 1) * 4, "ttrp"); tt.col = kt_alloc((size_t)E * 4, "ttcol");
    tt.values = kt_alloc((size_t)E * 2, "ttval");
    KT_OK(kern_csr_transpose(kt_ctx(2, KERN_ISA_AUTO), &a, &t, perm));
    KT_OK(kern_csr_transpose(kt_ctx(1, KERN_ISA_AUTO), &t, &tt, NULL));
    /* t lists, for each column c, the entries (r, c) in increasing r; perm
     * maps back to a */
    for (k = 0; k < E; k++) {
        int64_t p = perm[k];
        int64_t rr = 0;
        while (ix(a.rowptr, KERN_I32, rr + 1) <= p) rr++;
        KT_CHECK(ix(t.col, KERN_I32, k) == rr, "t.col[%lld]", (long long)k);
        KT_CHECK(((uint16_t *)t.values)[k] == ((uint16_t *)a.values)[p], "t.values[%lld]", (long long)k);
    }
    for (i = 0; i < N; i++) /* within a row of a^T: increasing positions of a */
        for (k = ix(t.rowptr, KERN_I32, i) + 1; k < ix(t.rowptr, KERN_I32, i + 1); k++)
            KT_CHECK(perm[k] > perm[k - 1], "stable at %lld", (long long)k);
    for (i = 0; i < N; i++)
        for (k = ix(t.rowptr, KERN_I32, i); k < ix(t.rowptr, KERN_I32, i + 1); k++)
            KT_CHECK(ix(a.col, KERN_I32, perm[k]) == i, "perm %lld", (long long)k);
    /* a^T^T == a with columns stably sorted within rows */
    KT_CHECK(memcmp(tt.rowptr, a.rowptr, (size_t)(N + 1) * 4) == 0, "rowptr roundtrip");
    for (i = 0; i < N; i++) {
        int64_t s = ix(a.rowptr, KERN_I32, i), e = ix(a.rowptr, KERN_I32, i + 1), c;
        int64_t pos = s;
        for (c = 0; c < N; c++)
            for (k = s; k < e; k++)
                if (ix(a.col, KERN_I32, k) == c) {
                    KT_CHECK(ix(tt.col, KERN_I32, pos) == c &&
                                 ((uint16_t *)tt.values)[pos] == ((uint16_t *)a.values)[k],
                             "roundtrip row %lld", (long long)i);
                    pos++;
                }
    }
    csr_free(&a); csr_free(&t); csr_free(&tt);
    kt_free(perm);
}

KT_TEST(spmm_errors) {
    int64_t rp[4] = {0, 1, 3, 4}, col[4] = {0, 2, 1, 1}, arg[6];
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6], ysave[6], gd[6], gv[4];
    kern_csr a;
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, 3, 2), ty = kern_tensor_2d(y, KERN_F32, 3, 2), bad;
    kern_tensor ta = kern_tensor_2d(arg, KERN_I64, 3, 2), tgd = kern_tensor_2d(gd, KERN_F32, 3, 2);
    kern_tensor tgv = kern_tensor_1d(gv, KERN_F32, 4);
    memset(&a, 0, sizeof a);
    a.nrows = 3; a.ncols = 3; a.nnz = 4; a.rowptr = rp; a.col = col; a.index_dtype = KERN_I64;
    kt_poison(y, sizeof y);
    memcpy(ysave, y, sizeof y);
    col[2] = 3;
    KT_ERROR(kern_spmm_reduce(NULL, &a, &tx, &ty, KERN_REDUCE_SUM, NULL, NULL), KERN_ERR_INDEX,
             "csr.col[2]=3 is out of range [0, 3) (row 1)");
    col[2] = 1;
    rp[2] = 0;
    KT_ERROR(kern_spmm_reduce(NULL, &a, &tx, &ty, KERN_REDUCE_SUM, NULL, NULL), KERN_ERR_ARG,
             "rowptr[2]=0 < rowptr[1]=1");
    rp[2] = 3;
    bad = kern_tensor_2d(x, KERN_F32, 2, 3);
    KT_ERROR(kern_spmm_reduce(NULL, &a, &bad, &ty, KERN_REDUCE_SUM, NULL, NULL), KERN_ERR_SHAPE,
             "dense.shape[0]=2 but csr.ncols=3");
    bad = kern_tensor_2d(y, KERN_BF16, 3, 2);
    KT_ERROR(kern_spmm_reduce(NULL, &a, &tx, &bad, KERN_REDUCE_SUM, NULL, NULL), KERN_ERR_DTYPE,
             "out.dtype=bf16 but dense.dtype=f32");
    KT_ERROR(kern_spmm_reduce(NULL, &a, &tx, &ty, KERN_REDUCE_PROD, NULL, NULL), KERN_ERR_ARG,
             "is not sum, mean, amax or amin");
    KT_ERROR(kern_spmm_reduce(NULL, &a, &tx, &ty, KERN_REDUCE_SUM, &ta, NULL), KERN_ERR_ARG,
             "arg_out is only defined for amax/amin");
    KT_ERROR(kern_spmm_reduce(NULL, &a, &tx, &tx, KERN_REDUCE_SUM, NULL, NULL), KERN_ERR_ARG,
             "out overlaps dense");
    {
        int64_t sh[2] = {3, 2}, st[2] = {1, 3};
        KT_OK(kern_tensor_init_strided(&bad, y, KERN_F32, 2, sh, st));
        KT_ERROR(kern_spmm_reduce(NULL, &a, &tx, &bad, KERN_REDUCE_SUM, NULL, NULL), KERN_ERR_LAYOUT,
                 "unit stride");
    }
    kt_assert_bytes_equal("out untouched", y, ysave, sizeof y);
    KT_ERROR(kern_spmm_reduce_backward(NULL, &a, &tx, &ty, KERN_REDUCE_AMAX, NULL, &tgd, &tgv, NULL),
             KERN_ERR_ARG, "needs the forward's arg_out");
    bad = kern_tensor_1d(gv, KERN_F32, 3);
    KT_ERROR(kern_spmm_reduce_backward(NULL, &a, &tx, &ty, KERN_REDUCE_SUM, NULL, &tgd, &bad, NULL),
             KERN_ERR_SHAPE, "grad_values must be [nnz=4]");
}

/* ------------------------------------------------ hardening (issue 19) */

/* A huge ncols with summed duplicates: the column marks must not be sized
 * or initialised by ncols (2^61 * 8 bytes wrapped to a tiny buffer, then
 * the init loop ran past it). O(nnz) work, the entry kept. */
KT_TEST(coo_to_csr_huge_ncols) {
    static const int64_t ncols[3] = {(int64_t)1 << 61, INT64_MAX, (int64_t)1 << 40};
    int i;
    for (i = 0; i < 3; i++) {
        int64_t row[1] = {0}, col[1] = {5}, rp[2] = {-1, -1}, oc[1] = {-1};
        float ov[1] = {-1};
        kern_csr o;
        memset(&o, 0, sizeof o);
        o.rowptr = rp; o.col = oc; o.values = ov;
        kt_context("ncols=%lld", (long long)ncols[i]);
        KT_OK(kern_coo_to_csr(NULL, 1, ncols[i], 1, row, col, NULL, KERN_I64, KERN_F32,
                              KERN_COO_SUM_DUPLICATES, &o));
        KT_CHECK(o.nnz == 1 && rp[0] == 0 && rp[1] == 1 && oc[0] == 5 && ov[0] == 1.0f,
                 "nnz=%lld rowptr={%lld,%lld} col=%lld value=%g", (long long)o.nnz,
                 (long long)rp[0], (long long)rp[1], (long long)oc[0], (double)ov[0]);
        KT_CHECK(o.ncols == ncols[i] && o.value_dtype == KERN_F32);
    }
}

/* Summing duplicates with a column space much larger than nnz (hashed
 * marks) gives exactly what the dense marks give. */
KT_TEST(coo_to_csr_sum_sparse_columns_match) {
    const int64_t N = 40, E = 2000;
    int it_i;
    for (it_i = 0; it_i < 2; it_i++) {
        kern_dtype it = it_i ? KERN_I64 : KERN_I32;
        size_t is = kern_dtype_size(it);
        kt_rng r = kt_rng_make(31 + (uint64_t)it_i);
        void *row = kt_alloc((size_t)E * is, "row"), *col = kt_alloc((size_t)E * is, "col");
        float *val = (float *)kt_alloc((size_t)E * 4, "val");
        kern_csr o[2];
        int64_t e, big = it_i ? (int64_t)1 << 50 : INT32_MAX;
        int w;
        for (e = 0; e < E; e++) {
            setix(row, it, e, kt_randint(&r, 0, N));
            setix(col, it, e, kt_randint(&r, 0, 60) * 7);
            val[e] = (float)kt_randint(&r, -4, 5) * 0.5f;
        }
        for (w = 0; w < 2; w++) {
            memset(&o[w], 0, sizeof o[w]);
            o[w].rowptr = kt_alloc((size_t)(N + 1) * is, "orp");
            o[w].col = kt_alloc((size_t)E * is, "ocol");
            o[w].values = kt_alloc((size_t)E * 4, "oval");
            kt_context("%s ncols=%lld", kern_dtype_name(it), (long long)(w ? big : 420));
            KT_OK(kern_coo_to_csr(kt_ctx(2, KERN_ISA_AUTO), N, w ? big : 420, E, row, col, val, it,
                                  KERN_F32, KERN_COO_SUM_DUPLICATES, &o[w]));
        }
        KT_CHECK(o[0].nnz == o[1].nnz, "nnz %lld vs %lld", (long long)o[0].nnz, (long long)o[1].nnz);
        if (o[0].nnz == o[1].nnz) {
            kt_assert_bytes_equal("rowptr", o[0].rowptr, o[1].rowptr, (size_t)(N + 1) * is);
            kt_assert_bytes_equal("col", o[0].col, o[1].col, (size_t)o[0].nnz * is);
            kt_assert_bytes_equal("values", o[0].values, o[1].values, (size_t)o[0].nnz * 4);
        }
        for (w = 0; w < 2; w++) {
            kt_free(o[w].rowptr); kt_free(o[w].col); kt_free(o[w].values);
        }
        kt_free(row); kt_free(col); kt_free(val);
    }
}

/* Odd nnz: the backward's task bounds (int64) after nnz f32 weights must
 * stay 8-byte aligned (UBSan reported misaligned stores). */
KT_TEST(spmm_backward_odd_nnz_alignment) {
    int64_t rp[3] = {0, 2, 3}, col[3] = {0, 1, 1};
    float x[4] = {1, 2, 3, 4}, gy[4] = {1, -1, 0.5f, 2}, gd[4], gv[3];
    double want_gd[4] = {1, -1, 1 + 0.5, -1 + 2}, want_gv[3];
    kern_csr a;
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, 2, 2), tgy = kern_tensor_2d(gy, KERN_F32, 2, 2);
    kern_tensor tgd = kern_tensor_2d(gd, KERN_F32, 2, 2), tgv = kern_tensor_1d(gv, KERN_F32, 3);
    memset(&a, 0, sizeof a);
    a.nrows = 2; a.ncols = 2; a.nnz = 3; a.rowptr = rp; a.col = col; a.index_dtype = KERN_I64;
    want_gv[0] = 1 * 1 + -1 * 2.0;
    want_gv[1] = 1 * 3 + -1 * 4.0;
    want_gv[2] = 0.5 * 3 + 2 * 4.0;
    KT_OK(kern_spmm_reduce_backward(kt_ctx(1, KERN_ISA_AUTO), &a, &tx, &tgy, KERN_REDUCE_SUM, NULL,
                                    &tgd, &tgv, NULL));
    kt_assert_close("grad_dense", gd, KERN_F32, want_gd, 4, kt_tol(KERN_F32));
    kt_assert_close("grad_values", gv, KERN_F32, want_gv, 3, kt_tol(KERN_F32));
}

/* Sizes that make the scratch arithmetic wrap: the transpose of a CSR
 * with ncols near 2^61 needs more than SIZE_MAX bytes and must say so
 * instead of overrunning a wrapped allocation. */
KT_TEST(csr_transpose_huge_ncols) {
    int64_t rp[2] = {0, 0}, orp[2] = {-1, -1};
    kern_csr a, t;
    memset(&a, 0, sizeof a);
    memset(&t, 0, sizeof t);
    a.nrows = 1; a.ncols = (int64_t)1 << 61; a.nnz = 0; a.rowptr = rp;
    a.index_dtype = KERN_I64; a.value_dtype = KERN_F32;
    t.rowptr = orp;
    KT_ERROR(kern_csr_transpose(NULL, &a, &t, NULL), KERN_ERR_NOMEM, "kern_csr_transpose");
    KT_CHECK(orp[0] == -1 && orp[1] == -1, "out written on error");
}

/* Outputs with overlapping elements (stride 0) are rejected; a one-row
 * dense with a huge row stride is fine. */
KT_TEST(spmm_outputs_and_strides) {
    int64_t rp[3] = {0, 2, 3}, col[3] = {0, 0, 0}, sh[2] = {2, 2}, st0[2] = {0, 1};
    int64_t sh1[2] = {1, 2}, big[2] = {(int64_t)1 << 62, 1};
    float x[2] = {1, 2}, y[4], save[4], gv[3], gx[2];
    double want[4] = {2, 4, 1, 2}, wgx[2];
    kern_csr a;
    kern_tensor tx, ty, tgy, tgv, tgx;
    memset(&a, 0, sizeof a);
    a.nrows = 2; a.ncols = 1; a.nnz = 3; a.rowptr = rp; a.col = col; a.index_dtype = KERN_I64;
    KT_OK(kern_tensor_init_strided(&tx, x, KERN_F32, 2, sh1, big));
    KT_OK(kern_tensor_init_strided(&ty, y, KERN_F32, 2, sh, st0));
    kt_poison(y, sizeof y);
    memcpy(save, y, sizeof y);
    KT_ERROR(kern_spmm_reduce(NULL, &a, &tx, &ty, KERN_REDUCE_SUM, NULL, NULL), KERN_ERR_LAYOUT,
             "out has overlapping elements");
    kt_assert_bytes_equal("out untouched", y, save, sizeof y);
    KT_OK(kern_tensor_init(&ty, y, KERN_F32, 2, sh));
    KT_OK(kern_spmm_reduce(kt_ctx(1, KERN_ISA_AUTO), &a, &tx, &ty, KERN_REDUCE_SUM, NULL, NULL));
    kt_assert_close("out", y, KERN_F32, want, 4, kt_tol(KERN_F32));
    /* backward: grad_values with stride 0 is rejected; the one-row dense
     * and grad_dense with huge row strides work */
    tgv = kern_tensor_1d(gv, KERN_F32, 3);
    tgv.stride[0] = 0;
    tgy = ty;
    KT_OK(kern_tensor_init_strided(&tgx, gx, KERN_F32, 2, sh1, big));
    KT_ERROR(kern_spmm_reduce_backward(NULL, &a, &tx, &tgy, KERN_REDUCE_SUM, NULL, &tgx, &tgv, NULL),
             KERN_ERR_LAYOUT, "grad_values has overlapping elements");
    wgx[0] = y[0] + y[0] + y[2]; /* row 0 holds two entries of column 0 */
    wgx[1] = y[1] + y[1] + y[3];
    KT_OK(kern_spmm_reduce_backward(kt_ctx(1, KERN_ISA_AUTO), &a, &tx, &tgy, KERN_REDUCE_SUM, NULL,
                                    &tgx, NULL, NULL));
    kt_assert_close("grad_dense", gx, KERN_F32, wgx, 2, kt_tol(KERN_F32));
}

/* Found by fuzz_csr (their inputs are in tests/fuzz/corpus/csr). */
KT_TEST(spmm_fuzz_findings) {
    /* a histogram size that saturates, added to others, must stay
     * saturated (it wrapped and the scratch pointers went below it) */
    {
        int64_t row[2] = {0, 1}, col[2] = {1, 0}, rp[1] = {-1}, oc[2] = {-1, -1};
        float ov[2] = {-1, -1};
        kern_csr o;
        memset(&o, 0, sizeof o);
        o.rowptr = rp; o.col = oc; o.values = ov;
        KT_ERROR(kern_coo_to_csr(NULL, (int64_t)1 << 61, 4, 2, row, col, NULL, KERN_I64, KERN_F32,
                                 KERN_COO_SUM_DUPLICATES, &o),
                 KERN_ERR_NOMEM, "overflows");
        KT_CHECK(rp[0] == -1 && oc[0] == -1 && ov[0] == -1.0f, "written on error");
    }
    /* backward: arg_out with sum is an error (it was used unchecked), and
     * F = 0 with NULL data gives zero value gradients */
    {
        int64_t rp[3] = {0, 2, 3}, col[3] = {0, 1, 1}, arg[4], sh0[2] = {2, 0};
        float x[4], gy[4], gv[3] = {7, 7, 7};
        double zero[3] = {0, 0, 0};
        kern_csr a;
        kern_tensor tx = kern_tensor_2d(x, KERN_F32, 2, 2), tgy = kern_tensor_2d(gy, KERN_F32, 2, 2);
        kern_tensor ta = kern_tensor_2d(arg, KERN_I64, 2, 2), tgv = kern_tensor_1d(gv, KERN_F32, 3);
        kern_tensor ex, egy;
        memset(&a, 0, sizeof a);
        a.nrows = 2; a.ncols = 2; a.nnz = 3; a.rowptr = rp; a.col = col; a.index_dtype = KERN_I64;
        ta.stride[0] = INT64_MAX; /* invalid: must be rejected, not used */
        KT_ERROR(kern_spmm_reduce_backward(NULL, &a, &tx, &tgy, KERN_REDUCE_SUM, &ta, NULL, &tgv, NULL),
                 KERN_ERR_ARG, "arg_out is only defined for amax/amin");
        KT_OK(kern_tensor_init(&ex, NULL, KERN_F32, 2, sh0));
        KT_OK(kern_tensor_init(&egy, NULL, KERN_F32, 2, sh0));
        KT_OK(kern_spmm_reduce_backward(kt_ctx(1, KERN_ISA_AUTO), &a, &ex, &egy, KERN_REDUCE_MEAN,
                                        NULL, NULL, &tgv, NULL));
        kt_assert_close("grad_values", gv, KERN_F32, zero, 3, kt_tol(KERN_F32));
    }
}

/* Every ISA level gives the bits of the scalar level (the float rows are
 * one template; docs/scatter.md): weighted and unweighted, f32/bf16/f16,
 * widths with and without vector tails, every reduce, arg for amax/amin,
 * 1 and 2 threads. */
KT_TEST(spmm_levels_same_bits) {
    static const int64_t FS[4] = {1, 7, 16, 37};
    static const kern_dtype DT[3] = {KERN_F32, KERN_BF16, KERN_F16};
    const int64_t N = 41, E = 400;
    int fi, di, k, wv, th;
    for (wv = 0; wv < 2; wv++)
        for (di = 0; di < 3; di++) {
            kt_rng r = kt_rng_make(43 + (uint64_t)(wv * 3 + di));
            const kern_dtype dt = DT[di];
            kern_csr a = make_graph(&r, N, E, 0, KERN_I64, dt, wv, 0);
            for (fi = 0; fi < 4; fi++) {
                const int64_t F = FS[fi];
                const size_t es = kern_dtype_size(dt), ob = (size_t)(N * F) * es;
                void *x = kt_alloc(ob, "x"), *ref = kt_alloc(ob, "ref"), *y = kt_alloc(ob, "y");
                int64_t *aref = (int64_t *)kt_alloc((size_t)(N * F) * 8, "aref");
                int64_t *arg = (int64_t *)kt_alloc((size_t)(N * F) * 8, "arg");
                kern_tensor tx = kern_tensor_2d(x, dt, N, F), tr = kern_tensor_2d(ref, dt, N, F);
                kern_tensor ty = kern_tensor_2d(y, dt, N, F), ta = kern_tensor_2d(arg, KERN_I64, N, F);
                kern_tensor tar = kern_tensor_2d(aref, KERN_I64, N, F);
                kt_fill_normal(&r, x, dt, N * F, 1.0);
                for (k = 0; k < 4; k++) {
                    const int mm = k >= 2;
                    for (th = 1; th <= 2; th++) {
                        KT_OK(kern_spmm_reduce(kt_ctx(th, KERN_ISA_SCALAR), &a, &tx, &tr, RED4[k],
                                               mm ? &tar : NULL, NULL));
                        KT_FOR_EACH_ISA(isa, ctx, th) {
                            kt_context("F=%lld %s %s values=%d threads=%d isa=%s", (long long)F,
                                       kern_dtype_name(dt), kern_reduce_name(RED4[k]), wv, th,
                                       kern_isa_name(isa));
                            KT_OK(kern_spmm_reduce(ctx, &a, &tx, &ty, RED4[k], mm ? &ta : NULL, NULL));
                            kt_assert_bytes_equal("out", y, ref, ob);
                            if (mm) kt_assert_bytes_equal("arg", arg, aref, (size_t)(N * F) * 8);
                        }
                    }
                }
                kt_free(x); kt_free(ref); kt_free(y); kt_free(aref); kt_free(arg);
            }
            csr_free(&a);
        }
}

KT_MAIN()
