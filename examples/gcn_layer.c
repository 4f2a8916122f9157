/* gcn_layer.c — one graph convolution layer (Kipf & Welling):
 *
 *   out = ReLU( Â X W + b ),  Â = D^-1/2 (A + I) D^-1/2
 *
 * The graph arrives as an edge list (COO); kern_coo_to_csr builds the CSR
 * (by destination) into caller buffers, kern_spmm_reduce aggregates the
 * neighbour features (Â X) without materialising per-edge messages, and a
 * GEMM with a fused bias + ReLU applies the weight. */
#include <kern/kern.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 60, F = 24, FOUT = 16, E_MAX = 4 * N };

int main(void) {
    /* edges (self loops included): dst[e] <- src[e], weight val[e] */
    static int64_t dst[E_MAX], src[E_MAX];
    static float val[E_MAX], deg[N];
    /* CSR output buffers: rowptr [N + 1], col and values [nnz] */
    static int64_t rowptr[N + 1], col[E_MAX];
    static float values[E_MAX];
    static float x[N * F], w[F * FOUT], b[FOUT], agg[N * F], out[N * FOUT];
    kern_csr a = {0};
    kern_tensor tx, tagg, tw, tb, tout;
    kern_gemm_params gp = {0};
    double maxerr = 0;
    int64_t e = 0, i, j, k;

    for (i = 0; i < N; i++) { /* a ring plus a chord every third node, undirected */
        int64_t nb[3] = {i, (i + 1) % N, (i + N - 1) % N};
        for (k = 0; k < 3; k++) dst[e] = i, src[e] = nb[k], e++;
        if (i % 3 == 0) {
            dst[e] = i, src[e] = (i + N / 2) % N, e++;
            dst[e] = (i + N / 2) % N, src[e] = i, e++;
        }
    }
    for (k = 0; k < e; k++) deg[dst[k]] += 1.0f;
    for (k = 0; k < e; k++) val[k] = 1.0f / sqrtf(deg[dst[k]] * deg[src[k]]);
    for (i = 0; i < N * F; i++) x[i] = (float)((i * 29 % 31) - 15) / 16.0f;
    for (i = 0; i < F * FOUT; i++) w[i] = (float)((i * 11 % 13) - 6) / 16.0f;
    for (j = 0; j < FOUT; j++) b[j] = (float)j / 64.0f - 0.1f;

    a.rowptr = rowptr, a.col = col, a.values = values;
    if (kern_coo_to_csr(NULL, N, N, e, dst, src, val, KERN_I64, KERN_F32,
                        KERN_COO_SUM_DUPLICATES, &a) != KERN_OK) {
        fprintf(stderr, "kern_coo_to_csr: %s\n", kern_last_error());
        return 1;
    }
    tx = kern_tensor_2d(x, KERN_F32, N, F);
    tagg = kern_tensor_2d(agg, KERN_F32, N, F);
    if (kern_spmm_reduce(NULL, &a, &tx, &tagg, KERN_REDUCE_SUM, NULL, NULL) != KERN_OK) {
        fprintf(stderr, "kern_spmm_reduce: %s\n", kern_last_error());
        return 1;
    }
    tw = kern_tensor_2d(w, KERN_F32, F, FOUT); /* [F, FOUT]: no transpose */
    tb = kern_tensor_1d(b, KERN_F32, FOUT);
    tout = kern_tensor_2d(out, KERN_F32, N, FOUT);
    gp.epilogue.bias = &tb;
    gp.epilogue.act = KERN_ACT_RELU;
    if (kern_gemm(NULL, &tagg, &tw, &tout, &gp) != KERN_OK) {
        fprintf(stderr, "kern_gemm: %s\n", kern_last_error());
        return 1;
    }

    /* plain reference: aggregate edge by edge, then the dense layer */
    {
        static double ref_agg[N * F];
        for (k = 0; k < e; k++)
            for (j = 0; j < F; j++) ref_agg[dst[k] * F + j] += (double)val[k] * x[src[k] * F + j];
        for (i = 0; i < N; i++)
            for (j = 0; j < FOUT; j++) {
                double acc = b[j], err;
                for (k = 0; k < F; k++) acc += ref_agg[i * F + k] * w[k * FOUT + j];
                err = fabs((acc > 0 ? acc : 0) - out[i * FOUT + j]);
                if (err > maxerr) maxerr = err;
            }
    }
    printf("gcn_layer: %d nodes, %lld edges (nnz %lld), %d -> %d features, max |out - reference| = %.2g\n",
           N, (long long)e, (long long)a.nnz, F, FOUT, maxerr);
    printf("[gcn_layer] %d ok, %d failed\n", maxerr < 1e-4, maxerr >= 1e-4);
    return maxerr < 1e-4 ? 0 : 1;
}
