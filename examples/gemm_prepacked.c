/* gemm_prepacked.c — a linear layer whose weight is packed once and reused:
 * y = relu(x W^T + b) for several batches of activations.
 *
 * Build (installed kern):  cc -O2 gemm_prepacked.c $(pkg-config --cflags --libs kern-lib)
 * or header-only: add a file with #define KERN_IMPLEMENTATION + #include <kern/kern.h>. */
#include <kern/kern.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { T = 37, K = 96, N = 80 }; /* tokens, in features, out features */

int main(void) {
    static float w[N * K], b[N], x[T * K], y[T * N];
    kern_gemm_packed_b *pw = NULL;
    kern_gemm_pack_params pp = {0};
    kern_gemm_params p = {0}; /* zero = defaults (alpha 1, beta 0, no epilogue) */
    kern_tensor tw, tb, tx, ty;
    double maxerr = 0;
    int i, j, k, round;

    for (i = 0; i < N * K; i++) w[i] = (float)((i * 7 % 23) - 11) / 32.0f;
    for (j = 0; j < N; j++) b[j] = (float)(j % 5) / 8.0f - 0.25f;

    /* the weight is [N, K] like a torch Linear weight, i.e. B transposed */
    tw = kern_tensor_2d(w, KERN_F32, N, K);
    pp.trans_b = 1;
    if (kern_gemm_pack_b(NULL, &tw, &pw, &pp) != KERN_OK) { /* NULL: default context */
        fprintf(stderr, "kern_gemm_pack_b: %s\n", kern_last_error());
        return 1;
    }

    tb = kern_tensor_1d(b, KERN_F32, N);
    p.packed_b = pw; /* ... and pass b = NULL to kern_gemm */
    p.epilogue.bias = &tb;
    p.epilogue.act = KERN_ACT_RELU;
    for (round = 0; round < 3; round++) { /* three batches, one packed weight */
        for (i = 0; i < T * K; i++) x[i] = (float)(((i + round) * 13 % 17) - 8) / 16.0f;
        tx = kern_tensor_2d(x, KERN_F32, T, K);
        ty = kern_tensor_2d(y, KERN_F32, T, N);
        if (kern_gemm(NULL, &tx, NULL, &ty, &p) != KERN_OK) {
            fprintf(stderr, "kern_gemm: %s\n", kern_last_error());
            kern_gemm_packed_b_free(NULL, pw);
            return 1;
        }
        for (i = 0; i < T; i++) /* compare with a plain loop */
            for (j = 0; j < N; j++) {
                double acc = b[j], e;
                for (k = 0; k < K; k++) acc += (double)x[i * K + k] * w[j * K + k];
                if (acc < 0) acc = 0;
                e = fabs(acc - y[i * N + j]);
                if (e > maxerr) maxerr = e;
            }
    }
    kern_gemm_packed_b_free(NULL, pw);
    printf("gemm_prepacked: %dx%dx%d, 3 batches, max |y - reference| = %.2g\n", T, N, K, maxerr);
    printf("[gemm_prepacked] %d ok, %d failed\n", maxerr < 1e-4, maxerr >= 1e-4);
    return maxerr < 1e-4 ? 0 : 1;
}
