/* fuzz_csr.c — CSR tools and spmm: kern_csr_validate, kern_coo_to_csr,
 * kern_csr_transpose, kern_spmm_reduce(_backward) on CSRs, COO lists and
 * sizes from the input (huge ncols, odd nnz, bad rowptrs, bad dtypes).
 * See kf.h for the contract every call is checked against. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_spmm.h"
#include "kf.h"
#include "kf_adapt.h"

/* Sizes the harness can back with real buffers. */
#define CSR_MAX 4096

static int64_t ix(const void *p, int is64, int64_t i) {
    return is64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}
static void put(void *p, int is64, int64_t i, int64_t v) {
    if (is64) ((int64_t *)p)[i] = v;
    else ((int32_t *)p)[i] = (int32_t)v;
}

static kern_dtype pick_index_dtype(kf_in *in) {
    uint8_t c = kf_u8(in);
    if (c < 120) return KERN_I32;
    if (c < 250) return KERN_I64;
    return (kern_dtype)(c % 10);
}
static kern_dtype pick_value_dtype(kf_in *in) {
    static const kern_dtype v[3] = {KERN_F32, KERN_BF16, KERN_F16};
    uint8_t c = kf_u8(in);
    return c < 250 ? v[c % 3] : (kern_dtype)(c % 10);
}

/* A CSR from the input: rowptr mostly valid (random row lengths summing
 * to nnz), sometimes raw; columns mostly in range. Returns 0 to skip (sizes
 * the harness cannot back with buffers). */
static int make_csr(kf_in *in, kern_csr *a, int allow_huge_ncols) {
    int is64, k;
    size_t is;
    int64_t r;
    memset(a, 0, sizeof *a);
    a->index_dtype = pick_index_dtype(in);
    a->value_dtype = pick_value_dtype(in);
    a->nrows = kf_size(in, 24);
    a->ncols = kf_size(in, 24);
    a->nnz = kf_size(in, 96);
    if (!allow_huge_ncols && a->ncols > CSR_MAX) a->ncols = a->ncols % 7;
    if (a->nrows > CSR_MAX || a->nnz > CSR_MAX) return 0;
    is64 = a->index_dtype == KERN_I64;
    is = is64 ? 8 : 4;
    a->rowptr = kf_in_buf((size_t)((a->nrows > 0 ? a->nrows : 0) + 1) * is, "rowptr");
    a->col = kf_in_buf((size_t)(a->nnz > 0 ? a->nnz : 0) * is, "col");
    if (kf_bool(in, 3)) {
        a->values = kf_in_buf((size_t)(a->nnz > 0 ? a->nnz : 0) * kern_dtype_size(KERN_F32),
                              "values");
        if (a->nnz > 0 && kern_dtype_size(a->value_dtype))
            kf_fill_values(in, a->values, kern_dtype_is_float(a->value_dtype) ? a->value_dtype : KERN_F32,
                           a->nnz);
    }
    if (a->nrows < 0 || a->nnz < 0) return 1;
    k = kf_u8(in);
    if (k < 24) {
        kf_fill(in, a->rowptr, (size_t)(a->nrows + 1) * is);
    } else {
        int64_t left = a->nnz;
        put(a->rowptr, is64, 0, 0);
        for (r = 0; r < a->nrows; r++) {
            int64_t take = r + 1 == a->nrows ? left : kf_int(in, 0, left < 64 ? left : 64);
            if (take > left) take = left;
            left -= take;
            put(a->rowptr, is64, r + 1, ix(a->rowptr, is64, r) + take);
        }
        if (a->nrows == 0 && k < 200) a->nnz = 0;
        if (k >= 250 && a->nrows > 0) /* break monotonicity or the end */
            put(a->rowptr, is64, kf_int(in, 0, a->nrows), kf_size(in, 96));
    }
    for (r = 0; r < a->nnz; r++) {
        int64_t c = kf_bool(in, 40) ? kf_size(in, 32) - 1 : (a->ncols > 0 ? kf_int(in, 0, a->ncols > 4095 ? 4095 : a->ncols - 1) : 0);
        put(a->col, is64, r, c);
    }
    if (kf_bool(in, 32)) a->rowptr = NULL;
    return 1;
}

static void check_props(const kern_csr *a, const kern_csr_props *p) {
    int is64 = a->index_dtype == KERN_I64, sorted = 1, unique = 1;
    int64_t r, k, empty = 0, mx = 0;
    for (r = 0; r < a->nrows; r++) {
        int64_t s = ix(a->rowptr, is64, r), e = ix(a->rowptr, is64, r + 1);
        KF_ASSERT(s <= e && e <= a->nnz, "rowptr[%lld..%lld] = %lld..%lld", (long long)r,
                  (long long)r + 1, (long long)s, (long long)e);
        if (s == e) empty++;
        if (e - s > mx) mx = e - s;
        for (k = s; k < e; k++) {
            int64_t c = ix(a->col, is64, k);
            KF_ASSERT(c >= 0 && c < a->ncols, "col[%lld]=%lld passed validation", (long long)k,
                      (long long)c);
            if (k > s && c < ix(a->col, is64, k - 1)) sorted = 0;
            if (k > s && c == ix(a->col, is64, k - 1)) unique = 0;
        }
    }
    if (!sorted) unique = -1;
    KF_ASSERT(p->sorted == sorted && p->unique == unique && p->empty_rows == empty &&
                  p->max_row_nnz == mx,
              "props %d %d %lld %lld, want %d %d %lld %lld", p->sorted, p->unique,
              (long long)p->empty_rows, (long long)p->max_row_nnz, sorted, unique,
              (long long)empty, (long long)mx);
}

static void fuzz_validate(kf_in *in, kern_ctx *ctx) {
    kern_csr a;
    kern_csr_props props, *pp;
    if (!make_csr(in, &a, 1)) return;
    memset(&props, 0x5c, sizeof props);
    pp = kf_bool(in, 4) ? NULL : &props;
    if (pp) kf_out_region(pp, sizeof *pp, "props");
    kf_call();
    if (kf_check(kern_csr_validate(ctx, kf_bool(in, 64) ? NULL : &a, pp), "kern_csr_validate") && pp)
        check_props(&a, pp);
}

static void fuzz_coo(kf_in *in, kern_ctx *ctx) {
    kern_dtype it = pick_index_dtype(in), vt = pick_value_dtype(in);
    int is64 = it == KERN_I64, flags;
    size_t is = is64 ? 8 : 4;
    int64_t nrows = kf_size(in, 24), ncols = kf_size(in, 24), nnz = kf_size(in, 96), e;
    void *row, *col, *val = NULL;
    kern_csr out;
    int big_rows = nrows > CSR_MAX;
    uint8_t fl = kf_u8(in);
    flags = fl < 250 ? (fl & 1) : fl;
    if (nnz > CSR_MAX) return;
    /* rows past CSR_MAX only where the histogram (8 bytes a row) is above
     * what the allocator grants: the call must then fail before writing */
    if (big_rows && nrows <= (int64_t)(KF_MAX_ALLOC / 8)) return;
    row = kf_in_buf((size_t)(nnz > 0 ? nnz : 0) * is, "row");
    col = kf_in_buf((size_t)(nnz > 0 ? nnz : 0) * is, "col");
    for (e = 0; e < nnz; e++) {
        put(row, is64, e, kf_bool(in, 40) ? kf_size(in, 32) - 1
                                          : (nrows > 0 ? kf_int(in, 0, nrows > 4095 ? 4095 : nrows - 1) : 0));
        put(col, is64, e, kf_bool(in, 40) ? kf_size(in, 32) - 1
                          : kf_bool(in, 4) && ncols > 0 ? ncols - 1 - kf_int(in, 0, 3)
                          : (ncols > 0 ? kf_int(in, 0, ncols > 4095 ? 4095 : ncols - 1) : 0));
    }
    if (kf_bool(in, 2)) {
        val = kf_in_buf((size_t)(nnz > 0 ? nnz : 0) * 4, "values");
        if (nnz > 0) kf_fill_values(in, val, kern_dtype_is_float(vt) ? vt : KERN_F32, nnz);
    }
    memset(&out, 0, sizeof out);
    out.rowptr = kf_out(in, (size_t)((!big_rows && nrows > 0 ? nrows : 0) + 1) * is, "out.rowptr");
    out.col = kf_out(in, (size_t)(nnz > 0 ? nnz : 0) * is, "out.col");
    out.values = kf_out(in, (size_t)(nnz > 0 ? nnz : 0) * 4, "out.values");
    if (kf_bool(in, 40)) out.values = NULL;
    kf_out_region(&out, sizeof out, "out");
    kf_call();
    if (kf_check(kf_bool(in, 64) ? kern_coo_to_csr(ctx, nrows, ncols, nnz, row, col, val, it, vt,
                                                   flags, NULL)
                                 : kern_coo_to_csr(ctx, nrows, ncols, nnz, row, col, val, it, vt,
                                                   flags, &out),
                 "kern_coo_to_csr")) {
        kern_csr_props p;
        int64_t r, k;
        KF_ASSERT(!big_rows, "nrows=%lld succeeded", (long long)nrows);
        KF_ASSERT(out.nrows == nrows && out.ncols == ncols && out.index_dtype == it);
        KF_ASSERT(flags ? out.nnz <= nnz : out.nnz == nnz, "nnz %lld from %lld",
                  (long long)out.nnz, (long long)nnz);
        kf__op = "kern_csr_validate (of kern_coo_to_csr's output)";
        KF_ASSERT(kern_csr_validate(ctx, &out, &p) == KERN_OK);
        if (flags) KF_ASSERT(p.sorted ? p.unique == 1 : 1, "duplicates left after summing");
        /* every input entry lands in its row */
        for (e = 0; e < nnz; e++) {
            int64_t rr = ix(row, is64, e), c = ix(col, is64, e), found = 0;
            for (k = ix(out.rowptr, is64, rr); k < ix(out.rowptr, is64, rr + 1) && !found; k++)
                found = ix(out.col, is64, k) == c;
            KF_ASSERT(found, "entry %lld (%lld, %lld) lost", (long long)e, (long long)rr,
                      (long long)c);
        }
        if (!flags)
            for (r = 0; r < nrows; r++) {
                int64_t n = 0;
                for (e = 0; e < nnz; e++) n += ix(row, is64, e) == r;
                KF_ASSERT(ix(out.rowptr, is64, r + 1) - ix(out.rowptr, is64, r) == n, "row %lld",
                          (long long)r);
            }
    }
}

static void fuzz_transpose(kf_in *in, kern_ctx *ctx) {
    kern_csr a, t;
    int is64;
    size_t is;
    void *perm;
    int huge_cols;
    if (!make_csr(in, &a, 1)) return;
    is64 = a.index_dtype == KERN_I64;
    is = is64 ? 8 : 4;
    /* ncols sizes out.rowptr: past CSR_MAX only where the histogram alone
     * exceeds what the allocator grants */
    huge_cols = a.ncols > CSR_MAX;
    if (huge_cols && a.ncols <= (int64_t)(KF_MAX_ALLOC / 8)) return;
    memset(&t, 0, sizeof t);
    t.rowptr = kf_out(in, (size_t)((!huge_cols && a.ncols > 0 ? a.ncols : 0) + 1) * is, "t.rowptr");
    t.col = kf_out(in, (size_t)(a.nnz > 0 ? a.nnz : 0) * is, "t.col");
    t.values = kf_out(in, (size_t)(a.nnz > 0 ? a.nnz : 0) * 4, "t.values");
    perm = kf_bool(in, 2) ? kf_out(in, (size_t)(a.nnz > 0 ? a.nnz : 0) * is, "perm") : NULL;
    kf_out_region(&t, sizeof t, "t");
    kf_call();
    if (kf_check(kern_csr_transpose(ctx, &a, &t, perm), "kern_csr_transpose")) {
        int64_t r, k;
        KF_ASSERT(!huge_cols);
        KF_ASSERT(t.nrows == a.ncols && t.ncols == a.nrows && t.nnz == a.nnz);
        kf__op = "kern_csr_validate (of the transpose)";
        KF_ASSERT(kern_csr_validate(ctx, &t, NULL) == KERN_OK);
        for (r = 0; r < t.nrows && perm; r++)
            for (k = ix(t.rowptr, is64, r); k < ix(t.rowptr, is64, r + 1); k++) {
                int64_t p = ix(perm, is64, k), ar;
                KF_ASSERT(p >= 0 && p < a.nnz && ix(a.col, is64, p) == r, "perm[%lld]=%lld",
                          (long long)k, (long long)p);
                ar = ix(t.col, is64, k);
                KF_ASSERT(ix(a.rowptr, is64, ar) <= p && p < ix(a.rowptr, is64, ar + 1),
                          "entry %lld: row %lld", (long long)k, (long long)ar);
            }
    }
}

static void fuzz_spmm(kf_in *in, kern_ctx *ctx, int backward) {
    kern_csr a;
    kern_tensor dense, out, arg, gd, gv;
    int64_t F = kf_size(in, 9), sh[2];
    kern_dtype dt = pick_value_dtype(in);
    kern_reduce red = (kern_reduce)kf_int(in, 0, 6);
    int use_arg, ok = 1;
    if (!make_csr(in, &a, 1)) return;
    if (!kern_dtype_size(dt)) dt = KERN_F32;
    sh[0] = a.ncols; sh[1] = F;
    if (kf_bool(in, 16)) sh[0] = kf_size(in, 24);
    ok &= kf_tensor(in, &dense, dt, kf_bool(in, 32) ? 1 : 2, sh, 0, "dense");
    sh[0] = a.nrows;
    use_arg = red == KERN_REDUCE_AMAX || red == KERN_REDUCE_AMIN ? !kf_bool(in, 3) : kf_bool(in, 16);
    if (!backward) {
        ok &= kf_tensor(in, &out, kf_bool(in, 32) ? KERN_BF16 : dt, 2, sh, 1, "out");
        if (use_arg) ok &= kf_tensor(in, &arg, kf_bool(in, 2) ? KERN_I64 : KERN_I32, 2, sh, 1, "arg_out");
        if (!ok) return;
        kf_call();
        if (kf_check(kf_spmm_reduce(ctx, &a, &dense, &out, red, use_arg ? &arg : NULL),
                     "kern_spmm_reduce") && use_arg) {
            int is64 = a.index_dtype == KERN_I64;
            int64_t r, f;
            for (r = 0; r < a.nrows; r++)
                for (f = 0; f < F; f++) {
                    int64_t g = kt_get(arg.data, arg.dtype, r * arg.stride[0] + f);
                    KF_ASSERT(g == a.nnz || (g >= ix(a.rowptr, is64, r) && g < ix(a.rowptr, is64, r + 1)),
                              "arg_out[%lld,%lld]=%lld outside row %lld", (long long)r,
                              (long long)f, (long long)g, (long long)r);
                }
        }
    } else {
        kern_tensor gout;
        int want_gd = !kf_bool(in, 4), want_gv = !kf_bool(in, 3);
        int64_t nn[1];
        ok &= kf_tensor(in, &gout, dt, 2, sh, 0, "grad_out");
        if (use_arg) {
            int64_t r, f;
            ok &= kf_tensor(in, &arg, kf_bool(in, 2) ? KERN_I64 : KERN_I32, 2, sh, 0, "arg_out");
            /* arg values: mostly the sentinel or an entry of the row */
            if (ok && arg.data && kern_tensor_numel(&arg) > 0 && kern_tensor_check(&arg, "", "") == KERN_OK &&
                a.rowptr && a.nrows >= 0 && (a.index_dtype == KERN_I32 || a.index_dtype == KERN_I64))
                for (r = 0; r < a.nrows && r < arg.shape[0]; r++)
                    for (f = 0; f < arg.shape[1]; f++)
                        kf_set_int(arg.data, arg.dtype, r * arg.stride[0] + f * arg.stride[1],
                                   kf_bool(in, 3) ? a.nnz : kf_int(in, 0, a.nnz > 0 ? a.nnz - 1 : 0));
            kern_clear_error();
        }
        sh[0] = a.ncols;
        if (want_gd) ok &= kf_tensor(in, &gd, dt, 2, sh, 1, "grad_dense");
        nn[0] = a.nnz;
        if (want_gv) ok &= kf_tensor(in, &gv, kf_bool(in, 8) ? KERN_BF16 : KERN_F32, 1, nn, 1, "grad_values");
        if (!ok) return;
        kf_call();
        kf_check(kf_spmm_reduce_backward(ctx, &a, &dense, &gout, red, use_arg ? &arg : NULL,
                                         want_gd ? &gd : NULL, want_gv ? &gv : NULL),
                 "kern_spmm_reduce_backward");
    }
}

static void kf_fuzz(kf_in *in) {
    kern_ctx *ctx = kf_ctx_begin(in);
    switch (kf_u8(in) % 5) {
    case 0: fuzz_validate(in, ctx); break;
    case 1: fuzz_coo(in, ctx); break;
    case 2: fuzz_transpose(in, ctx); break;
    case 3: fuzz_spmm(in, ctx, 0); break;
    default: fuzz_spmm(in, ctx, 1); break;
    }
}
