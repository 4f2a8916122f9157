/* kern_spmm.h — CSR sparse x dense matmul with sum/mean/amax/amin reduce,
 * its backward, and CSR utilities (validate, COO -> CSR, transpose).
 * Part of kern, an embeddable header-only C kernel library. Builds on
 * kern_scatter.h (its row engine and counting sort).
 *
 * WHAT IT COMPUTES
 *   kern_spmm_reduce(ctx, a, dense, out, reduce, arg_out, params)
 *     PyTorch torch.sparse.mm(a, dense, reduce) for a CSR matrix a
 *     [nrows x ncols] (torch._sparse_mm_reduce_impl, the CPU kernel):
 *       out[i, f] = reduce over k in row i of  values[k] * dense[col[k], f]
 *     reduce: KERN_REDUCE_SUM, _MEAN (divides by the row's nnz), _AMAX,
 *     _AMIN (PROD is not defined for spmm, as in PyTorch). Rows without
 *     entries give 0. values == NULL means all ones. Entries are reduced
 *     in CSR order with f32 accumulation; amax/amin start from -inf/+inf.
 *     arg_out (optional, amax/amin, [nrows, F], i32/i64): the entry
 *     position k that won, PyTorch's rule: a later entry replaces the
 *     running result when strictly greater (amax) / smaller (amin) or NaN
 *     (ties go to the first entry, a NaN result points at the last NaN);
 *     sentinel nnz where no entry won (empty rows, or all values -inf for
 *     amax / +inf for amin), exactly as PyTorch.
 *     Every output row is computed by one thread in CSR order: the same bits
 *     for any thread count and every reduce.
 *   kern_spmm_reduce_backward(ctx, a, dense, grad_out, reduce, arg_out,
 *                             grad_dense, grad_values, params)
 *     Gradients of kern_spmm_reduce as PyTorch defines them:
 *       sum/mean: grad_dense = a^T (rows scaled by 1/nnz for mean) @
 *                 grad_out; grad_values[k] = <grad_out[i], dense[col[k]]>
 *                 (/ nnz(i) for mean).
 *       amax/amin: the gradient flows to the winning entry only (arg_out
 *                 from the forward is required): grad_dense[col[k], f] +=
 *                 values[k] * grad_out[i, f] and grad_values[k] +=
 *                 grad_out[i, f] * dense[col[k], f] where arg_out[i, f]==k.
 *     Either output may be NULL. Both are computed in parallel without a
 *     serial scatter: grad_dense from the transposed CSR (one thread per
 *     output row), grad_values per entry.
 *   kern_csr_validate: rowptr[0] == 0, monotone, rowptr[nrows] == nnz,
 *     0 <= col < ncols; reports sortedness, duplicates, empty rows and the
 *     largest row.
 *   kern_coo_to_csr: stable (entries of a row keep their COO order) O(nnz +
 *     nrows) counting sort; duplicates kept, or summed into the first
 *     occurrence (KERN_COO_SUM_DUPLICATES, O(nnz + ncols) extra).
 *   kern_csr_transpose: a^T as CSR, stable (each row of a^T lists rows of
 *     a in increasing order), optionally the position map perm[k'] = k.
 *
 * LAYOUTS
 *   kern_csr: rowptr [nrows + 1] and col [nnz] of index_dtype (i32 or i64),
 *   values [nnz] of value_dtype (f32, bf16 or f16) or NULL; all contiguous.
 *   dense [ncols, F], out/grad_out [nrows, F], grad_dense [ncols, F]: f32,
 *   bf16 or f16 (the same dtype), feature dim unit stride, any row stride.
 *   grad_values: 1-D [nnz], f32/bf16/f16, any stride.
 *
 * ALGORITHM
 *   Rows are split between threads by nnz + rows (binary search on rowptr),
 *   not by row count, so power-law graphs balance. Each row is reduced in
 *   registers/L1 over the feature dim (AVX-512, AVX2, scalar; NEON compile-
 *   checked) and written once; the dense rows of upcoming entries are
 *   software-prefetched 12 entries ahead.
 *
 * ERRORS (nothing is written on error)
 *   KERN_ERR_ARG    NULL arguments, negative sizes, a bad rowptr (names the
 *                   first offending position), reduce not sum/mean/amax/amin,
 *                   arg_out with sum/mean, missing arg_out in an amax/amin
 *                   backward, outputs overlapping inputs, too small buffers.
 *   KERN_ERR_INDEX  a column (or COO row/column) out of range: the first
 *                   offending position and its value.
 *   KERN_ERR_DTYPE  index dtype not i32/i64, value/dense dtype unsupported,
 *                   mixed dense/out dtypes, arg_out not i32/i64.
 *   KERN_ERR_SHAPE  dense.shape[0] != ncols, out not [nrows, F], ...
 *   KERN_ERR_LAYOUT a feature dim without unit stride; an output with
 *                   overlapping elements (a zero stride).
 *   KERN_ERR_NOMEM  scratch allocation failed, or the sizes make the
 *                   scratch size overflow (e.g. a transpose with ncols near
 *                   2^61). COO -> CSR with summed duplicates needs O(nnz)
 *                   scratch whatever ncols is.
 *   KERN_ERR_UNSUPPORTED arg_out with nnz >= 2^31 - 1.
 *
 * PARAMS (kern_spmm_params, NULL or zero-initialised = defaults)
 *   workspace, workspace_size: NULL = the context's reusable scratch; else
 *   caller memory of at least kern_spmm_reduce_workspace_size() /
 *   kern_spmm_reduce_backward_workspace_size() bytes (smaller: KERN_ERR_ARG).
 *   The CSR utilities (coo_to_csr, transpose) use the context's scratch.
 *
 * EXAMPLE (one GNN layer's max aggregation and its backward)
 *     kern_csr a;  // a.nrows = a.ncols = N, rowptr/col i64, values NULL
 *     ...
 *     kern_tensor x = kern_tensor_2d(xbuf, KERN_F32, N, F);
 *     kern_tensor y = kern_tensor_2d(ybuf, KERN_F32, N, F);
 *     kern_tensor arg = kern_tensor_2d(argbuf, KERN_I64, N, F);
 *     kern_spmm_reduce(ctx, &a, &x, &y, KERN_REDUCE_AMAX, &arg, NULL);
 *     ...
 *     kern_tensor gy = kern_tensor_2d(gybuf, KERN_F32, N, F);
 *     kern_tensor gx = kern_tensor_2d(gxbuf, KERN_F32, N, F);
 *     kern_spmm_reduce_backward(ctx, &a, &x, &gy, KERN_REDUCE_AMAX, &arg,
 *                               &gx, NULL, NULL);
 */
#ifndef KERN_SPMM_H
#define KERN_SPMM_H

#include "kern_base.h"
#include "kern_scatter.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_csr {
    int64_t nrows, ncols, nnz;
    void *rowptr;           /* [nrows + 1], index_dtype */
    void *col;              /* [nnz], index_dtype */
    void *values;           /* [nnz], value_dtype; NULL = all ones */
    kern_dtype index_dtype; /* KERN_I32 or KERN_I64 */
    kern_dtype value_dtype; /* KERN_F32, KERN_BF16 or KERN_F16 */
} kern_csr;

typedef struct kern_csr_props {
    int sorted;          /* columns nondecreasing in every row */
    int unique;          /* no column repeated within a row (checked when sorted;
                            -1 = not checked because the rows are unsorted) */
    int64_t empty_rows;  /* rows without entries */
    int64_t max_row_nnz; /* largest row */
} kern_csr_props;

/* Checks a CSR (see the top). props may be NULL. */
KERN_API kern_status kern_csr_validate(kern_ctx *ctx, const kern_csr *a,
                                       kern_csr_props *props);

/* flags for kern_coo_to_csr */
enum {
    KERN_COO_KEEP_DUPLICATES = 0, /* default */
    KERN_COO_SUM_DUPLICATES = 1
};
/* COO (row[k], col[k], values[k]) -> CSR into out's caller buffers:
 * out->rowptr [nrows + 1], out->col [nnz], out->values [nnz] (needed when
 * values != NULL, or when summing duplicates of an all-ones matrix: then
 * f32 multiplicities are written and out->value_dtype becomes f32). Sets
 * out's sizes and dtypes (the index and value dtypes of the input). */
KERN_API kern_status kern_coo_to_csr(kern_ctx *ctx, int64_t nrows, int64_t ncols,
                                     int64_t nnz, const void *row, const void *col,
                                     const void *values, kern_dtype index_dtype,
                                     kern_dtype value_dtype, int flags, kern_csr *out);

/* out = a^T into out's caller buffers: rowptr [ncols + 1], col [nnz],
 * values [nnz] (when a has values). perm (optional, [nnz] of a's index
 * dtype) receives the position in a of each entry of out. */
KERN_API kern_status kern_csr_transpose(kern_ctx *ctx, const kern_csr *a, kern_csr *out,
                                        void *perm);

/* Options of kern_spmm_reduce and kern_spmm_reduce_backward; zero (or a
 * NULL pointer) = defaults, every field's zero being its default. */
typedef struct kern_spmm_params {
    void *workspace;       /* optional caller scratch of at least the call's */
    size_t workspace_size; /* *_workspace_size bytes; NULL = the context's */
} kern_spmm_params;

KERN_API kern_status kern_spmm_reduce(kern_ctx *ctx, const kern_csr *a,
                                      const kern_tensor *dense, const kern_tensor *out,
                                      kern_reduce reduce, const kern_tensor *arg_out,
                                      const kern_spmm_params *params);
/* Scratch bytes kern_spmm_reduce takes on this context for these operands
 * (validates the arguments, not the CSR's index values). */
KERN_API kern_status kern_spmm_reduce_workspace_size(kern_ctx *ctx, const kern_csr *a,
                                                     const kern_tensor *dense,
                                                     const kern_tensor *out,
                                                     kern_reduce reduce,
                                                     const kern_tensor *arg_out,
                                                     size_t *bytes);

KERN_API kern_status kern_spmm_reduce_backward(kern_ctx *ctx, const kern_csr *a,
                                               const kern_tensor *dense,
                                               const kern_tensor *grad_out,
                                               kern_reduce reduce,
                                               const kern_tensor *arg_out,
                                               const kern_tensor *grad_dense,
                                               const kern_tensor *grad_values,
                                               const kern_spmm_params *params);
KERN_API kern_status kern_spmm_reduce_backward_workspace_size(
    kern_ctx *ctx, const kern_csr *a, const kern_tensor *dense, const kern_tensor *grad_out,
    kern_reduce reduce, const kern_tensor *arg_out, const kern_tensor *grad_dense,
    const kern_tensor *grad_values, size_t *bytes);

#ifdef __cplusplus
}
#endif
#endif /* KERN_SPMM_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_SPMM_IMPLEMENTED)
KERN__IMPL_DIAG_BEGIN
#define KERN_SPMM_IMPLEMENTED

#ifdef __cplusplus
extern "C" {
#endif

static int kern__sp_float(kern_dtype dt) {
    return dt == KERN_F32 || dt == KERN_BF16 || dt == KERN_F16;
}

/* --------------------------------------------------------- validation */

typedef struct kern__sp_vjob {
    const kern_csr *a;
    int is64;
    int64_t ntasks;
    const int64_t *bounds;
    int64_t *bad;     /* per task: first bad col position or -1 */
    int *sorted, *unique;
    int64_t *empty, *maxrow;
} kern__sp_vjob;

static void kern__sp_validate_task(void *p, int64_t t, int thread) {
    const kern__sp_vjob *V = (const kern__sp_vjob *)p;
    const kern_csr *a = V->a;
    int64_t r, sorted = 1, unique = 1, empty = 0, mx = 0;
    (void)thread;
    V->bad[t] = -1;
    for (r = V->bounds[t]; r < V->bounds[t + 1]; r++) {
        int64_t s = kern__sc_ix(a->rowptr, V->is64, r), e = kern__sc_ix(a->rowptr, V->is64, r + 1);
        int64_t k, prev = -1;
        if (s == e) empty++;
        if (e - s > mx) mx = e - s;
        for (k = s; k < e; k++) {
            int64_t c = kern__sc_ix(a->col, V->is64, k);
            if (c < 0 || c >= a->ncols) {
                V->bad[t] = k;
                return;
            }
            if (c < prev) sorted = 0;
            else if (c == prev) unique = 0;
            prev = c;
        }
    }
    V->sorted[t] = (int)sorted;
    V->unique[t] = (int)unique;
    V->empty[t] = empty;
    V->maxrow[t] = mx;
}

/* Checks everything; on success fills props (if any). Runs inside an op
 * (ctx held) so it may use kern_parallel_for; uses no workspace. */
static kern_status kern__sp_validate(kern_ctx *ctx, const kern_csr *a, kern_csr_props *props,
                                     const char *op) {
    int is64;
    int64_t r, prev, nt, t;
    int64_t bounds[65], bad[64], empty[64], maxrow[64];
    int sorted[64], unique[64];
    kern__sp_vjob V;
    if (!a) return kern__err(KERN_ERR_ARG, "%s: csr is NULL", op);
    if (a->nrows < 0 || a->ncols < 0 || a->nnz < 0)
        return kern__err(KERN_ERR_ARG, "%s: csr sizes nrows=%lld ncols=%lld nnz=%lld must be >= 0",
                         op, (long long)a->nrows, (long long)a->ncols, (long long)a->nnz);
    if (a->index_dtype != KERN_I32 && a->index_dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: csr.index_dtype=%s is not i32 or i64", op,
                         kern_dtype_name(a->index_dtype));
    if (a->values && !kern__sp_float(a->value_dtype))
        return kern__err(KERN_ERR_DTYPE, "%s: csr.value_dtype=%s is not f32, bf16 or f16", op,
                         kern_dtype_name(a->value_dtype));
    if (!a->rowptr) return kern__err(KERN_ERR_ARG, "%s: csr.rowptr is NULL", op);
    if (!a->col && a->nnz > 0) return kern__err(KERN_ERR_ARG, "%s: csr.col is NULL", op);
    is64 = a->index_dtype == KERN_I64;
    if (!is64 && (a->nnz > INT32_MAX || a->nrows >= INT32_MAX || a->ncols > INT32_MAX))
        return kern__err(KERN_ERR_ARG, "%s: sizes do not fit i32 indices (nnz=%lld)", op,
                         (long long)a->nnz);
    prev = kern__sc_ix(a->rowptr, is64, 0);
    if (prev != 0)
        return kern__err(KERN_ERR_ARG, "%s: csr.rowptr[0]=%lld, must be 0", op, (long long)prev);
    for (r = 1; r <= a->nrows; r++) {
        int64_t v = kern__sc_ix(a->rowptr, is64, r);
        if (v < prev)
            return kern__err(KERN_ERR_ARG,
                             "%s: csr.rowptr is not monotone: rowptr[%lld]=%lld < rowptr[%lld]=%lld",
                             op, (long long)r, (long long)v, (long long)(r - 1), (long long)prev);
        prev = v;
    }
    if (prev != a->nnz)
        return kern__err(KERN_ERR_ARG, "%s: csr.rowptr[%lld]=%lld but nnz=%lld", op,
                         (long long)a->nrows, (long long)prev, (long long)a->nnz);
    nt = a->nnz + a->nrows < 65536 ? 1 : (int64_t)kern_ctx_threads(ctx) * 4;
    if (nt > 64) nt = 64;
    if (nt > a->nrows) nt = a->nrows > 0 ? a->nrows : 1;
    if (a->nrows > 0) kern__sc_split_rows(a->rowptr, is64, a->nrows, nt, bounds);
    else { bounds[0] = 0; bounds[1] = 0; }
    V.a = a; V.is64 = is64; V.ntasks = nt; V.bounds = bounds; V.bad = bad;
    V.sorted = sorted; V.unique = unique; V.empty = empty; V.maxrow = maxrow;
    kern_parallel_for(ctx, nt, kern__sp_validate_task, &V);
    for (t = 0; t < nt; t++)
        if (bad[t] >= 0) {
            int64_t k = bad[t], lo = 0, hi = a->nrows;
            while (lo < hi) { /* the row holding entry k */
                int64_t mid = lo + (hi - lo) / 2;
                if (kern__sc_ix(a->rowptr, is64, mid + 1) <= k) lo = mid + 1;
                else hi = mid;
            }
            return kern__err(KERN_ERR_INDEX, "%s: csr.col[%lld]=%lld is out of range [0, %lld) (row %lld)",
                             op, (long long)k, (long long)kern__sc_ix(a->col, is64, k),
                             (long long)a->ncols, (long long)lo);
        }
    if (props) {
        kern_csr_props p;
        p.sorted = 1; p.unique = 1; p.empty_rows = 0; p.max_row_nnz = 0;
        for (t = 0; t < nt; t++) {
            p.sorted &= sorted[t];
            p.unique &= unique[t];
            p.empty_rows += empty[t];
            if (maxrow[t] > p.max_row_nnz) p.max_row_nnz = maxrow[t];
        }
        if (!p.sorted) p.unique = -1;
        *props = p;
    }
    return KERN_OK;
}

KERN_API kern_status kern_csr_validate(kern_ctx *ctx, const kern_csr *a,
                                       kern_csr_props *props) {
    kern_status st;
    if ((st = kern__op_begin(&ctx, "kern_csr_validate")) != KERN_OK) return st;
    st = kern__sp_validate(ctx, a, props, "kern_csr_validate");
    kern__op_end(ctx);
    return st;
}

/* ------------------------------------------------------ conversions */

static inline void kern__sp_put_ix(void *p, int is64, int64_t i, int64_t v) {
    if (is64) ((int64_t *)p)[i] = v;
    else ((int32_t *)p)[i] = (int32_t)v;
}
static inline void kern__sp_put_f(void *p, kern_dtype dt, int64_t i, float v) {
    if (dt == KERN_F32) ((float *)p)[i] = v;
    else if (dt == KERN_BF16) ((uint16_t *)p)[i] = kern_f32_to_bf16(v);
    else ((uint16_t *)p)[i] = kern_f32_to_f16(v);
}
static inline void kern__sp_copy_val(void *dst, const void *src, kern_dtype dt, int64_t di,
                                     int64_t si) {
    size_t es = kern_dtype_size(dt);
    memcpy((char *)dst + di * (int64_t)es, (const char *)src + si * (int64_t)es, es);
}

static kern_status kern__sp_check_coords(kern_ctx *ctx, const void *p, kern_dtype dt, int64_t n,
                                         int64_t limit, const char *op, const char *name) {
    kern_tensor t = kern_tensor_1d((void *)p, dt, n);
    kern_status st = kern__sc_check_index(ctx, &t, limit, op);
    if (st != KERN_OK) {
        /* rename "index[...]" to the argument's name */
        char msg[512];
        const char *m = kern_last_error(), *at = strstr(m, "index[");
        if (at)
            snprintf(msg, sizeof msg, "%.*s%s%s", (int)(at - m), m, name, at + 5);
        else
            snprintf(msg, sizeof msg, "%s", m);
        return kern__err(st, "%s", msg);
    }
    return KERN_OK;
}

typedef struct kern__sp_gjob { /* gather col/values through a permutation */
    const int64_t *perm;
    const void *col, *val;
    void *ocol, *oval;
    int is64;
    kern_dtype vdt;
    int64_t n, ntasks;
} kern__sp_gjob;
static void kern__sp_permute_task(void *p, int64_t t, int thread) {
    const kern__sp_gjob *G = (const kern__sp_gjob *)p;
    int64_t k0 = G->n * t / G->ntasks, k1 = G->n * (t + 1) / G->ntasks, k;
    (void)thread;
    for (k = k0; k < k1; k++) {
        int64_t s = G->perm[k];
        kern__sp_put_ix(G->ocol, G->is64, k, kern__sc_ix(G->col, G->is64, s));
        if (G->val) kern__sp_copy_val(G->oval, G->val, G->vdt, k, s);
    }
}

KERN_API kern_status kern_coo_to_csr(kern_ctx *ctx, int64_t nrows, int64_t ncols,
                                     int64_t nnz, const void *row, const void *col,
                                     const void *values, kern_dtype index_dtype,
                                     kern_dtype value_dtype, int flags, kern_csr *out) {
    static const char *op = "kern_coo_to_csr";
    kern_status st;
    int is64, sum = (flags & KERN_COO_SUM_DUPLICATES) != 0;
    kern__sc_sort S;
    char *w;
    size_t hb, pb, rb, mb, total;
    int64_t hcap = 0;
    if (!out) return kern__err(KERN_ERR_ARG, "%s: out is NULL", op);
    if (nrows < 0 || ncols < 0 || nnz < 0)
        return kern__err(KERN_ERR_ARG, "%s: nrows=%lld ncols=%lld nnz=%lld must be >= 0", op,
                         (long long)nrows, (long long)ncols, (long long)nnz);
    if (index_dtype != KERN_I32 && index_dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: index_dtype=%s is not i32 or i64", op,
                         kern_dtype_name(index_dtype));
    if (values && !kern__sp_float(value_dtype))
        return kern__err(KERN_ERR_DTYPE, "%s: value_dtype=%s is not f32, bf16 or f16", op,
                         kern_dtype_name(value_dtype));
    if (flags & ~KERN_COO_SUM_DUPLICATES)
        return kern__err(KERN_ERR_ARG, "%s: flags=%d has unknown bits", op, flags);
    is64 = index_dtype == KERN_I64;
    if (!is64 && (nnz > INT32_MAX || nrows >= INT32_MAX || ncols > INT32_MAX))
        return kern__err(KERN_ERR_ARG, "%s: sizes do not fit i32 indices", op);
    if (nnz > 0 && (!row || !col))
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !row ? "row" : "col");
    if (!out->rowptr || (nnz > 0 && !out->col))
        return kern__err(KERN_ERR_ARG, "%s: out->%s is NULL", op, !out->rowptr ? "rowptr" : "col");
    if (nnz > 0 && (values || sum) && !out->values)
        return kern__err(KERN_ERR_ARG, "%s: out->values is NULL but values are produced", op);
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    if ((st = kern__sp_check_coords(ctx, row, index_dtype, nnz, nrows, op, "row")) != KERN_OK ||
        (st = kern__sp_check_coords(ctx, col, index_dtype, nnz, ncols, op, "col")) != KERN_OK)
        goto done;
    memset(&S, 0, sizeof S);
    S.key = row; S.key64 = is64; S.key_s = 1; S.E = nnz; S.N = nrows;
    S.P = kern__sc_sort_parts(ctx, nnz);
    /* Summing duplicates marks the columns of the current row: a dense
     * array over the columns when ncols is comparable to nnz, otherwise a
     * hash table of 2^k >= 2 nnz slots, so that the work and memory are
     * O(nnz) whatever ncols is (ncols alone must not drive either). */
    if (sum && ncols > 4096 && (ncols - 4096) / 4 > nnz) {
        hcap = 8;
        while (hcap < nnz && hcap < ((int64_t)1 << 60)) hcap *= 2;
        hcap *= 2;
    }
    hb = kern__sc_sz(0, nrows, 8 * (int64_t)S.P);
    pb = kern__sc_sz(0, nnz, 8);
    rb = kern__sc_sz(64, nrows, 8); /* nrows + 1 entries */
    mb = !sum ? 0 : hcap ? kern__sc_sz(0, hcap, 16) : kern__sc_sz(0, ncols, 8);
    total = kern__sc_sz(kern__sc_add(kern__sc_add(kern__sc_add(hb, pb), rb), mb), sum ? nnz : 0, 4);
    w = total == SIZE_MAX ? NULL : (char *)kern__workspace(ctx, total);
    if (!w) {
        st = kern__sc_nomem(op, total);
        goto done;
    }
    S.hist = (int64_t *)w;
    S.perm = w + hb;
    S.perm64 = 1;
    S.rowptr = (int64_t *)(w + hb + pb);
    if ((st = kern__sc_counting_sort(ctx, &S)) != KERN_OK) goto done;
    if (!sum) {
        kern__sp_gjob G;
        int64_t r;
        G.perm = (const int64_t *)S.perm; G.col = col; G.val = values;
        G.ocol = out->col; G.oval = values ? out->values : NULL;
        G.is64 = is64; G.vdt = value_dtype; G.n = nnz;
        G.ntasks = nnz < 65536 ? 1 : (int64_t)kern_ctx_threads(ctx) * 4;
        if (nnz > 0) kern_parallel_for(ctx, G.ntasks, kern__sp_permute_task, &G);
        for (r = 0; r <= nrows; r++) kern__sp_put_ix(out->rowptr, is64, r, S.rowptr[r]);
        out->nnz = nnz;
        out->value_dtype = value_dtype;
    } else {
        /* duplicates summed into their first occurrence: mark[c] = output
         * position of column c in the current row (positions below the
         * row's start are stale). Hashed: slot h holds (column, position);
         * a stale slot counts as free, which is safe because the slots a
         * row's probe passes over all hold entries of that row. */
        int64_t *mark = (int64_t *)((char *)S.rowptr + rb);
        float *accv = (float *)((char *)mark + mb);
        const int64_t *perm = (const int64_t *)S.perm;
        kern_dtype odt = values ? value_dtype : KERN_F32;
        int64_t r, k, n = 0;
        if (hcap)
            for (k = 0; k < hcap; k++) mark[2 * k + 1] = -1;
        else
            for (k = 0; k < ncols; k++) mark[k] = -1;
        kern__sp_put_ix(out->rowptr, is64, 0, 0);
        for (r = 0; r < nrows; r++) {
            int64_t start = n;
            for (k = S.rowptr[r]; k < S.rowptr[r + 1]; k++) {
                int64_t s = perm[k], c = kern__sc_ix(col, is64, s), *m;
                float v = values ? kern__sc_ldf(values, value_dtype, s) : 1.0f;
                if (hcap) {
                    uint64_t h = ((uint64_t)c * 0x9e3779b97f4a7c15ull) >> 17;
                    for (;; h++) {
                        m = mark + 2 * (int64_t)(h & (uint64_t)(hcap - 1));
                        if (m[1] < start || m[0] == c) break;
                    }
                    m[0] = c;
                    m++;
                } else {
                    m = mark + c;
                }
                if (*m >= start) {
                    accv[*m] += v;
                } else {
                    *m = n;
                    kern__sp_put_ix(out->col, is64, n, c);
                    accv[n++] = v;
                }
            }
            kern__sp_put_ix(out->rowptr, is64, r + 1, n);
        }
        /* values summed in f32, rounded once */
        for (k = 0; k < n; k++) kern__sp_put_f(out->values, odt, k, accv[k]);
        out->nnz = n;
        out->value_dtype = odt;
    }
    out->nrows = nrows;
    out->ncols = ncols;
    out->index_dtype = index_dtype;
    if (!values && !sum) out->values = NULL;
done:
    kern__op_end(ctx);
    return st;
}

typedef struct kern__sp_rowid {
    const void *rowptr;
    int is64;
    int64_t *rowid;
    const int64_t *bounds;
} kern__sp_rowid;
static void kern__sp_rowid_task(void *p, int64_t t, int thread) {
    const kern__sp_rowid *R = (const kern__sp_rowid *)p;
    int64_t r, k;
    (void)thread;
    for (r = R->bounds[t]; r < R->bounds[t + 1]; r++)
        for (k = kern__sc_ix(R->rowptr, R->is64, r); k < kern__sc_ix(R->rowptr, R->is64, r + 1); k++)
            R->rowid[k] = r;
}

/* Builds the transpose structure in scratch: rowptrT [ncols+1] (int64),
 * posT [nnz] (int64: position in a), rowT [nnz] (int64: row in a). */
static kern_status kern__sp_transpose_scratch(kern_ctx *ctx, const kern_csr *a, char *w,
                                              int64_t **rowptrT, int64_t **posT,
                                              int64_t **rowT) {
    kern__sc_sort S;
    kern__sp_rowid R;
    int64_t nt, bounds[65], *rowid;
    size_t nb = kern__sc_sz(0, a->nnz, 8), rb = kern__sc_sz(64, a->ncols, 8);
    kern_status st;
    memset(&S, 0, sizeof S);
    S.key = a->col; S.key64 = a->index_dtype == KERN_I64; S.key_s = 1;
    S.E = a->nnz; S.N = a->ncols; S.P = kern__sc_sort_parts(ctx, a->nnz);
    rowid = (int64_t *)w;
    S.perm = w + nb;
    S.perm64 = 1;
    S.rowptr = (int64_t *)(w + 2 * nb);
    *rowT = (int64_t *)(w + 2 * nb + rb);
    S.hist = (int64_t *)((char *)*rowT + nb);
    nt = a->nrows > 0 ? (a->nnz + a->nrows < 65536 ? 1 : (int64_t)kern_ctx_threads(ctx) * 4) : 0;
    if (nt > 64) nt = 64;
    if (nt > a->nrows) nt = a->nrows;
    if (nt > 0) {
        kern__sc_split_rows(a->rowptr, S.key64, a->nrows, nt, bounds);
        R.rowptr = a->rowptr; R.is64 = S.key64; R.rowid = rowid; R.bounds = bounds;
        kern_parallel_for(ctx, nt, kern__sp_rowid_task, &R);
    }
    if ((st = kern__sc_counting_sort(ctx, &S)) != KERN_OK) return st;
    {
        int64_t k;
        const int64_t *perm = (const int64_t *)S.perm;
        for (k = 0; k < a->nnz; k++) (*rowT)[k] = rowid[perm[k]];
    }
    *rowptrT = S.rowptr;
    *posT = (int64_t *)S.perm;
    return KERN_OK;
}
/* The bytes kern__sp_transpose_scratch carves (SIZE_MAX if they overflow). */
static size_t kern__sp_transpose_bytes(kern_ctx *ctx, const kern_csr *a) {
    size_t nb = kern__sc_sz(0, a->nnz, 8);
    size_t rb = kern__sc_sz(64, a->ncols, 8); /* ncols + 1 entries */
    size_t hb = kern__sc_sz(0, a->ncols, 8 * (int64_t)kern__sc_sort_parts(ctx, a->nnz));
    return kern__sc_add(kern__sc_add(kern__sc_add(kern__sc_add(nb, nb), nb), rb), hb);
}

KERN_API kern_status kern_csr_transpose(kern_ctx *ctx, const kern_csr *a, kern_csr *out,
                                        void *perm) {
    static const char *op = "kern_csr_transpose";
    kern_status st;
    char *w;
    int64_t *rowptrT, *posT, *rowT, k;
    int is64;
    if (!out) return kern__err(KERN_ERR_ARG, "%s: out is NULL", op);
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    if ((st = kern__sp_validate(ctx, a, NULL, op)) != KERN_OK) goto done;
    if (!out->rowptr || (a->nnz > 0 && !out->col) || (a->nnz > 0 && a->values && !out->values)) {
        st = kern__err(KERN_ERR_ARG, "%s: out->%s is NULL", op,
                       !out->rowptr ? "rowptr" : !out->col ? "col" : "values");
        goto done;
    }
    {
        size_t bytes = kern__sp_transpose_bytes(ctx, a);
        w = bytes == SIZE_MAX ? NULL : (char *)kern__workspace(ctx, bytes);
        if (!w) {
            st = kern__sc_nomem(op, bytes);
            goto done;
        }
    }
    if ((st = kern__sp_transpose_scratch(ctx, a, w, &rowptrT, &posT, &rowT)) != KERN_OK) goto done;
    is64 = a->index_dtype == KERN_I64;
    for (k = 0; k <= a->ncols; k++) kern__sp_put_ix(out->rowptr, is64, k, rowptrT[k]);
    for (k = 0; k < a->nnz; k++) {
        kern__sp_put_ix(out->col, is64, k, rowT[k]);
        if (a->values) kern__sp_copy_val(out->values, a->values, a->value_dtype, k, posT[k]);
        if (perm) kern__sp_put_ix(perm, is64, k, posT[k]);
    }
    out->nrows = a->ncols;
    out->ncols = a->nrows;
    out->nnz = a->nnz;
    out->index_dtype = a->index_dtype;
    out->value_dtype = a->value_dtype;
    if (!a->values) out->values = NULL;
done:
    kern__op_end(ctx);
    return st;
}

/* --------------------------------------------------------------- spmm */

static int kern__sp_rows_ok(const kern_tensor *t) {
    return t->ndim == 2 && (t->shape[1] <= 1 || t->stride[1] == 1);
}

static kern_status kern__sp_check_dense(const kern_tensor *t, const char *op, const char *name,
                                        int64_t rows, int64_t F, kern_dtype dt) {
    kern_status st;
    if (!t) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, name);
    if ((st = kern_tensor_check(t, op, name)) != KERN_OK) return st;
    if (t->ndim != 2)
        return kern__err(KERN_ERR_SHAPE, "%s: %s must be 2-D, has %d dims", op, name, t->ndim);
    if (dt == KERN_DTYPE_NONE) {
        if (!kern__sp_float(t->dtype))
            return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s is not f32, bf16 or f16", op, name,
                             kern_dtype_name(t->dtype));
    } else if (t->dtype != dt) {
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s but dense.dtype=%s", op, name,
                         kern_dtype_name(t->dtype), kern_dtype_name(dt));
    }
    if (rows >= 0 && (t->shape[0] != rows || t->shape[1] != F))
        return kern__err(KERN_ERR_SHAPE, "%s: %s.shape=[%lld,%lld] but expected [%lld,%lld]", op,
                         name, (long long)t->shape[0], (long long)t->shape[1], (long long)rows,
                         (long long)F);
    if (!kern__sp_rows_ok(t))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s.stride[1]=%lld, the feature dim needs unit stride",
                         op, name, (long long)t->stride[1]);
    return KERN_OK;
}

static kern_status kern__sp_check_arg(const kern_tensor *arg, const char *op, int64_t rows,
                                      int64_t F, int64_t nnz) {
    kern_status st;
    if ((st = kern_tensor_check(arg, op, "arg_out")) != KERN_OK) return st;
    if (arg->dtype != KERN_I32 && arg->dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: arg_out.dtype=%s is not i32 or i64", op,
                         kern_dtype_name(arg->dtype));
    if (arg->ndim != 2 || arg->shape[0] != rows || arg->shape[1] != F)
        return kern__err(KERN_ERR_SHAPE, "%s: arg_out must be [%lld,%lld]", op, (long long)rows,
                         (long long)F);
    if (!kern__sp_rows_ok(arg))
        return kern__err(KERN_ERR_LAYOUT, "%s: arg_out's feature dim needs unit stride", op);
    if (nnz >= INT32_MAX)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: arg_out needs nnz < 2^31-1, got %lld", op,
                         (long long)nnz);
    return KERN_OK;
}

static kern_status kern__sp_check_reduce(kern_reduce reduce, const char *op) {
    if (reduce == KERN_REDUCE_SUM || reduce == KERN_REDUCE_MEAN || reduce == KERN_REDUCE_AMAX ||
        reduce == KERN_REDUCE_AMIN)
        return KERN_OK;
    return kern__err(KERN_ERR_ARG, "%s: reduce=%d (%s) is not sum, mean, amax or amin", op,
                     (int)reduce, kern_reduce_name(reduce));
}

/* Per-thread scratch of the row engine with f32 accumulators. */
static size_t kern__sp_row_scratch(int64_t F) {
    kern__sc_job J;
    memset(&J, 0, sizeof J);
    J.F = F;
    J.accsz = 4;
    return kern__sc_row_scratch(&J);
}

/* Validates kern_spmm_reduce's arguments except the CSR's index values
 * (writes nothing). */
static kern_status kern__sp_fwd_check(const char *op, const kern_csr *a,
                                      const kern_tensor *dense, const kern_tensor *out,
                                      kern_reduce reduce, const kern_tensor *arg_out) {
    kern_status st;
    int64_t F;
    if (!a) return kern__err(KERN_ERR_ARG, "%s: csr is NULL", op);
    if ((st = kern__sp_check_reduce(reduce, op)) != KERN_OK) return st;
    if ((st = kern__sp_check_dense(dense, op, "dense", -1, 0, KERN_DTYPE_NONE)) != KERN_OK)
        return st;
    if (dense->shape[0] != a->ncols)
        return kern__err(KERN_ERR_SHAPE, "%s: dense.shape[0]=%lld but csr.ncols=%lld", op,
                         (long long)dense->shape[0], (long long)a->ncols);
    F = dense->shape[1];
    if ((st = kern__sp_check_dense(out, op, "out", a->nrows, F, dense->dtype)) != KERN_OK ||
        (st = kern__sc_check_writable(out, op, "out")) != KERN_OK)
        return st;
    if (arg_out) {
        if (reduce != KERN_REDUCE_AMAX && reduce != KERN_REDUCE_AMIN)
            return kern__err(KERN_ERR_ARG, "%s: arg_out is only defined for amax/amin, not %s",
                             op, kern_reduce_name(reduce));
        if ((st = kern__sp_check_arg(arg_out, op, a->nrows, F, a->nnz)) != KERN_OK ||
            (st = kern__sc_check_writable(arg_out, op, "arg_out")) != KERN_OK)
            return st;
        if (kern_tensors_overlap(arg_out, out) || kern_tensors_overlap(arg_out, dense))
            return kern__err(KERN_ERR_ARG, "%s: arg_out overlaps out or dense", op);
    }
    if (kern_tensors_overlap(out, dense)) return kern__err(KERN_ERR_ARG, "%s: out overlaps dense", op);
    return KERN_OK;
}

/* The forward's scratch: the task bounds shared, the row engine's rows
 * per thread. */
static void kern__sp_fwd_scratch(kern_ctx *ctx, const kern_csr *a, int64_t F, size_t *shared,
                                 size_t *thread) {
    *shared = *thread = 0;
    if (a->nrows <= 0 || F <= 0) return;
    *shared = (size_t)(kern__sc_gather_ntasks(ctx, a->nrows) + 1) * 8;
    *thread = kern__sp_row_scratch(F);
}

KERN_API kern_status kern_spmm_reduce_workspace_size(kern_ctx *ctx, const kern_csr *a,
                                                     const kern_tensor *dense,
                                                     const kern_tensor *out, kern_reduce reduce,
                                                     const kern_tensor *arg_out, size_t *bytes) {
    static const char *op = "kern_spmm_reduce_workspace_size";
    kern_status st;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if ((st = kern__sp_fwd_check(op, a, dense, out, reduce, arg_out)) != KERN_OK) return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__sp_fwd_scratch(ctx, a, dense->shape[1], &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_spmm_reduce(kern_ctx *ctx, const kern_csr *a,
                                      const kern_tensor *dense, const kern_tensor *out,
                                      kern_reduce reduce, const kern_tensor *arg_out,
                                      const kern_spmm_params *params) {
    static const char *op = "kern_spmm_reduce";
    kern_status st;
    int64_t F;
    size_t sh, th;
    if ((st = kern__sp_fwd_check(op, a, dense, out, reduce, arg_out)) != KERN_OK) return st;
    F = dense->shape[1];
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__sp_fwd_scratch(ctx, a, F, &sh, &th);
    if ((st = kern__op_workspace(ctx, op, params ? params->workspace : NULL,
                                 params ? params->workspace_size : 0, sh, th)) != KERN_OK)
        goto done;
    if ((st = kern__sp_validate(ctx, a, NULL, op)) != KERN_OK) goto done;
    if (a->nrows > 0 && F > 0) {
        kern__sc_job J;
        int64_t nt = kern__sc_gather_ntasks(ctx, a->nrows);
        int64_t *b = (int64_t *)kern__workspace(ctx, sh);
        if (!b) {
            st = kern__err(KERN_ERR_NOMEM, "%s: cannot allocate task bounds", op);
            goto done;
        }
        memset(&J, 0, sizeof J);
        J.ctx = ctx;
        J.dt = dense->dtype;
        J.ops = kern__sc_pick_ops(ctx, dense->dtype);
        J.op = kern__sc_op_of(reduce);
        J.mean = reduce == KERN_REDUCE_MEAN;
        J.es = kern_dtype_size(dense->dtype);
        J.accsz = 4;
        J.N = a->nrows;
        J.F = F;
        J.E = a->nnz;
        J.src = (const char *)dense->data;
        J.src_rs = kern__sc_rsb(dense, J.es);
        J.out = (char *)out->data;
        J.out_rs = kern__sc_rsb(out, J.es);
        if (arg_out) {
            J.arg = (char *)arg_out->data;
            J.arg64 = arg_out->dtype == KERN_I64;
            J.arg_rs = kern__sc_rsb(arg_out, J.arg64 ? 8 : 4);
        }
        J.sentinel = (int32_t)(a->nnz < INT32_MAX ? a->nnz : INT32_MAX);
        J.rowptr = a->rowptr;
        J.rowptr64 = a->index_dtype == KERN_I64;
        J.ids = a->col;
        J.ids64 = J.rowptr64;
        J.w = a->values;
        J.wdt = a->value_dtype;
        J.pos_is_k = 1;
        J.init_const = 1;
        st = kern__sc_run_gather(&J, b, nt);
    }
done:
    kern__op_end(ctx);
    return st;
}

/* ------------------------------------------------------------ backward */

typedef struct kern__sp_bjob {
    const kern_csr *a;
    int is64, minmax, mean;
    int64_t F;
    kern_dtype dt;
    size_t es;
    const char *dense, *gout;
    int64_t dense_rs, gout_rs;
    const char *arg;
    int64_t arg_rs;
    int arg64;
    /* grad_values */
    void *gv;
    int64_t gv_s;
    kern_dtype gvdt;
    /* grad_dense via the transpose */
    char *gd;
    int64_t gd_rs;
    const int64_t *rowptrT, *posT, *rowT;
    const int64_t *bounds;
    kern_ctx *ctx;
} kern__sp_bjob;

static inline float kern__sp_val(const kern_csr *a, int64_t k) {
    return a->values ? kern__sc_ldf(a->values, a->value_dtype, k) : 1.0f;
}
static inline int64_t kern__sp_arg_at(const kern__sp_bjob *B, int64_t r, int64_t f) {
    const char *p = B->arg + r * B->arg_rs;
    return B->arg64 ? ((const int64_t *)p)[f] : (int64_t)((const int32_t *)p)[f];
}

/* grad_values: per row of a (split by nnz), one value per entry */
static void kern__sp_gv_task(void *p, int64_t t, int thread) {
    const kern__sp_bjob *B = (const kern__sp_bjob *)p;
    const kern_csr *a = B->a;
    int64_t r, k, f;
    (void)thread;
    for (r = B->bounds[t]; r < B->bounds[t + 1]; r++) {
        int64_t s = kern__sc_ix(a->rowptr, B->is64, r), e = kern__sc_ix(a->rowptr, B->is64, r + 1);
        /* F == 0: empty rows (their data may be NULL), every gradient 0 */
        const char *g = B->F > 0 ? B->gout + r * B->gout_rs : NULL;
        for (k = s; k < e; k++) {
            const char *x = B->F > 0 ? B->dense + kern__sc_ix(a->col, B->is64, k) * B->dense_rs : NULL;
            float acc = 0.0f;
            if (B->minmax) {
                for (f = 0; f < B->F; f++)
                    if (kern__sp_arg_at(B, r, f) == k)
                        acc += kern__sc_ldf(g, B->dt, f) * kern__sc_ldf(x, B->dt, f);
            } else {
                for (f = 0; f < B->F; f++) acc += kern__sc_ldf(g, B->dt, f) * kern__sc_ldf(x, B->dt, f);
                if (B->mean) acc /= (float)(e - s);
            }
            kern__sp_put_f(B->gv, B->gvdt, k * B->gv_s, acc);
        }
    }
}

/* grad_dense for amax/amin: rows of a^T, masked by arg_out */
static void kern__sp_gd_arg_task(void *p, int64_t t, int thread) {
    const kern__sp_bjob *B = (const kern__sp_bjob *)p;
    float *acc = (float *)kern__thread_scratch(B->ctx, thread);
    int64_t c, kk, f;
    for (c = B->bounds[t]; c < B->bounds[t + 1]; c++) {
        for (f = 0; f < B->F; f++) acc[f] = 0.0f;
        for (kk = B->rowptrT[c]; kk < B->rowptrT[c + 1]; kk++) {
            int64_t k = B->posT[kk], r = B->rowT[kk];
            float v = kern__sp_val(B->a, k);
            const void *g = B->gout + r * B->gout_rs;
            const char *ap = B->arg + r * B->arg_rs;
            if (B->arg64) {
                const int64_t *ar = (const int64_t *)ap;
                for (f = 0; f < B->F; f++)
                    if (ar[f] == k) acc[f] += v * kern__sc_ldf(g, B->dt, f);
            } else {
                const int32_t *ar = (const int32_t *)ap;
                for (f = 0; f < B->F; f++)
                    if (ar[f] == k) acc[f] += v * kern__sc_ldf(g, B->dt, f);
            }
        }
        for (f = 0; f < B->F; f++) kern__sp_put_f(B->gd + c * B->gd_rs, B->dt, f, acc[f]);
    }
}

/* Validates kern_spmm_reduce_backward's arguments except the CSR's index
 * values (writes nothing). */
static kern_status kern__sp_bwd_check(const char *op, const kern_csr *a,
                                      const kern_tensor *dense, const kern_tensor *grad_out,
                                      kern_reduce reduce, const kern_tensor *arg_out,
                                      const kern_tensor *grad_dense,
                                      const kern_tensor *grad_values) {
    kern_status st;
    int64_t F;
    int minmax;
    if (!a) return kern__err(KERN_ERR_ARG, "%s: csr is NULL", op);
    if ((st = kern__sp_check_reduce(reduce, op)) != KERN_OK) return st;
    if ((st = kern__sp_check_dense(dense, op, "dense", -1, 0, KERN_DTYPE_NONE)) != KERN_OK)
        return st;
    if (dense->shape[0] != a->ncols)
        return kern__err(KERN_ERR_SHAPE, "%s: dense.shape[0]=%lld but csr.ncols=%lld", op,
                         (long long)dense->shape[0], (long long)a->ncols);
    F = dense->shape[1];
    if ((st = kern__sp_check_dense(grad_out, op, "grad_out", a->nrows, F, dense->dtype)) != KERN_OK)
        return st;
    minmax = reduce == KERN_REDUCE_AMAX || reduce == KERN_REDUCE_AMIN;
    if (minmax) {
        if (!arg_out)
            return kern__err(KERN_ERR_ARG, "%s: %s needs the forward's arg_out", op,
                             kern_reduce_name(reduce));
        if ((st = kern__sp_check_arg(arg_out, op, a->nrows, F, a->nnz)) != KERN_OK) return st;
    } else if (arg_out) {
        return kern__err(KERN_ERR_ARG, "%s: arg_out is only defined for amax/amin, not %s", op,
                         kern_reduce_name(reduce));
    }
    if (grad_dense) {
        if ((st = kern__sp_check_dense(grad_dense, op, "grad_dense", a->ncols, F, dense->dtype)) !=
                KERN_OK ||
            (st = kern__sc_check_writable(grad_dense, op, "grad_dense")) != KERN_OK)
            return st;
        if (kern_tensors_overlap(grad_dense, dense) || kern_tensors_overlap(grad_dense, grad_out) ||
            (arg_out && kern_tensors_overlap(grad_dense, arg_out)))
            return kern__err(KERN_ERR_ARG, "%s: grad_dense overlaps an input", op);
    }
    if (grad_values) {
        if ((st = kern_tensor_check(grad_values, op, "grad_values")) != KERN_OK) return st;
        if (!kern__sp_float(grad_values->dtype))
            return kern__err(KERN_ERR_DTYPE, "%s: grad_values.dtype=%s is not f32, bf16 or f16", op,
                             kern_dtype_name(grad_values->dtype));
        if (grad_values->ndim != 1 || grad_values->shape[0] != a->nnz)
            return kern__err(KERN_ERR_SHAPE, "%s: grad_values must be [nnz=%lld]", op,
                             (long long)a->nnz);
        if ((st = kern__sc_check_writable(grad_values, op, "grad_values")) != KERN_OK) return st;
        if (kern_tensors_overlap(grad_values, dense) ||
            kern_tensors_overlap(grad_values, grad_out) ||
            (grad_dense && kern_tensors_overlap(grad_values, grad_dense)) ||
            (arg_out && kern_tensors_overlap(grad_values, arg_out)))
            return kern__err(KERN_ERR_ARG, "%s: grad_values overlaps another tensor", op);
    }
    return KERN_OK;
}

/* The backward's scratch: for grad_dense, the transpose of a, the
 * per-entry weights and the task bounds shared, and the row engine's (sum,
 * mean) or one f32 row's (amax, amin) scratch per thread. grad_values
 * takes none. */
static void kern__sp_bwd_scratch(kern_ctx *ctx, const kern_csr *a, int64_t F, int minmax,
                                 const kern_tensor *grad_dense, size_t *shared, size_t *thread) {
    *shared = *thread = 0;
    if (!grad_dense || a->ncols <= 0 || F <= 0) return;
    /* sizes saturate at SIZE_MAX (no allocation of it succeeds); each
     * part is a multiple of 64 bytes, so the int64 task bounds stay
     * aligned for any nnz */
    *shared = kern__sc_sz(kern__sc_add(kern__sp_transpose_bytes(ctx, a),
                                       kern__sc_sz(0, a->nnz, 4)),
                          kern__sc_gather_ntasks(ctx, a->ncols) + 1, 8);
    *thread = minmax ? kern__sc_sz(0, F, 4) : kern__sp_row_scratch(F);
}

KERN_API kern_status kern_spmm_reduce_backward_workspace_size(
    kern_ctx *ctx, const kern_csr *a, const kern_tensor *dense, const kern_tensor *grad_out,
    kern_reduce reduce, const kern_tensor *arg_out, const kern_tensor *grad_dense,
    const kern_tensor *grad_values, size_t *bytes) {
    static const char *op = "kern_spmm_reduce_backward_workspace_size";
    kern_status st;
    size_t sh, th;
    int minmax = reduce == KERN_REDUCE_AMAX || reduce == KERN_REDUCE_AMIN;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if ((st = kern__sp_bwd_check(op, a, dense, grad_out, reduce, arg_out, grad_dense,
                                 grad_values)) != KERN_OK)
        return st;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__sp_bwd_scratch(ctx, a, dense->shape[1], minmax, grad_dense, &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_spmm_reduce_backward(kern_ctx *ctx, const kern_csr *a,
                                               const kern_tensor *dense,
                                               const kern_tensor *grad_out,
                                               kern_reduce reduce,
                                               const kern_tensor *arg_out,
                                               const kern_tensor *grad_dense,
                                               const kern_tensor *grad_values,
                                               const kern_spmm_params *params) {
    static const char *op = "kern_spmm_reduce_backward";
    kern_status st;
    int64_t F;
    int minmax;
    kern__sp_bjob B;
    size_t sh, th;
    if ((st = kern__sp_bwd_check(op, a, dense, grad_out, reduce, arg_out, grad_dense,
                                 grad_values)) != KERN_OK)
        return st;
    F = dense->shape[1];
    minmax = reduce == KERN_REDUCE_AMAX || reduce == KERN_REDUCE_AMIN;
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__sp_bwd_scratch(ctx, a, F, minmax, grad_dense, &sh, &th);
    if ((st = kern__op_workspace(ctx, op, params ? params->workspace : NULL,
                                 params ? params->workspace_size : 0, sh, th)) != KERN_OK)
        goto done;
    if ((st = kern__sp_validate(ctx, a, NULL, op)) != KERN_OK) goto done;
    memset(&B, 0, sizeof B);
    B.a = a; B.is64 = a->index_dtype == KERN_I64; B.minmax = minmax;
    B.mean = reduce == KERN_REDUCE_MEAN; B.F = F; B.dt = dense->dtype;
    B.es = kern_dtype_size(dense->dtype); B.ctx = ctx;
    B.dense = (const char *)dense->data; B.dense_rs = kern__sc_rsb(dense, B.es);
    B.gout = (const char *)grad_out->data; B.gout_rs = kern__sc_rsb(grad_out, B.es);
    if (arg_out) {
        B.arg = (const char *)arg_out->data;
        B.arg64 = arg_out->dtype == KERN_I64;
        B.arg_rs = kern__sc_rsb(arg_out, B.arg64 ? 8 : 4);
    }
    if (grad_dense && a->ncols > 0 && F > 0) {
        /* the transpose and (sum/mean) the per-entry weights live in the
         * workspace; the task bounds after them */
        size_t tb = kern__sp_transpose_bytes(ctx, a), wb = kern__sc_sz(0, a->nnz, 4);
        int64_t nt = kern__sc_gather_ntasks(ctx, a->ncols);
        char *w = (char *)kern__workspace(ctx, sh);
        int64_t *rowptrT, *posT, *rowT, *bounds;
        float *wT;
        if (!w) {
            st = kern__sc_nomem(op, sh);
            goto done;
        }
        if ((st = kern__sp_transpose_scratch(ctx, a, w, &rowptrT, &posT, &rowT)) != KERN_OK)
            goto done;
        wT = (float *)(w + tb);
        bounds = (int64_t *)(w + tb + wb);
        if (!minmax) {
            /* grad_dense[c] = sum over entries (r, c) of w * s(r) * grad_out[r]:
             * the row engine on a^T with gathered grad_out rows */
            kern__sc_job J;
            int64_t kk;
            for (kk = 0; kk < a->nnz; kk++) {
                int64_t r = rowT[kk];
                float v = kern__sp_val(a, posT[kk]);
                if (B.mean)
                    v /= (float)(kern__sc_ix(a->rowptr, B.is64, r + 1) - kern__sc_ix(a->rowptr, B.is64, r));
                wT[kk] = v;
            }
            memset(&J, 0, sizeof J);
            J.ctx = ctx; J.dt = dense->dtype; J.ops = kern__sc_pick_ops(ctx, dense->dtype);
            J.op = KERN__SC_ADD; J.es = B.es; J.accsz = 4; J.N = a->ncols; J.F = F;
            J.E = a->nnz; J.src = B.gout; J.src_rs = B.gout_rs;
            J.out = (char *)grad_dense->data;
            J.out_rs = kern__sc_rsb(grad_dense, B.es);
            J.rowptr = rowptrT; J.rowptr64 = 1; J.ids = rowT; J.ids64 = 1;
            J.w = wT; J.wdt = KERN_F32; J.pos_is_k = 1; J.init_const = 1;
            if ((st = kern__sc_run_gather(&J, bounds, nt)) != KERN_OK) goto done;
        } else {
            B.gd = (char *)grad_dense->data;
            B.gd_rs = kern__sc_rsb(grad_dense, B.es);
            B.rowptrT = rowptrT; B.posT = posT; B.rowT = rowT;
            if ((st = kern__reserve_thread_scratch(ctx, th)) != KERN_OK) goto done;
            kern__sc_split_rows(rowptrT, 1, a->ncols, nt, bounds);
            B.bounds = bounds;
            if ((st = kern_parallel_for(ctx, nt, kern__sp_gd_arg_task, &B)) != KERN_OK) goto done;
        }
    } else if (grad_dense && a->ncols > 0) {
        (void)0; /* F == 0: nothing to write */
    }
    if (grad_values && a->nnz > 0) {
        int64_t nt = kern__sc_gather_ntasks(ctx, a->nrows), bounds[513];
        if (nt > 512) nt = 512;
        B.gv = grad_values->data;
        B.gv_s = grad_values->stride[0];
        B.gvdt = grad_values->dtype;
        kern__sc_split_rows(a->rowptr, B.is64, a->nrows, nt, bounds);
        B.bounds = bounds;
        st = kern_parallel_for(ctx, nt, kern__sp_gv_task, &B);
    }
done:
    kern__op_end(ctx);
    return st;
}

#ifdef __cplusplus
}
#endif
KERN__IMPL_DIAG_END
#endif /* KERN_SPMM_IMPLEMENTED */
