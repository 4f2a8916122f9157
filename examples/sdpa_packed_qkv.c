/* sdpa_packed_qkv.c — attention straight out of a fused QKV projection.
 *
 * A fused projection writes one buffer [B, L, 3, H, D] (q, k, v of every
 * head side by side per token). kern_sdpa takes q, k, v as [B, H, L, D]
 * views with any strides (unit stride in D), so the three are strided views
 * into that buffer: no copy, no transpose. The output is written as
 * [B, L, H, D] (ready for the output projection) through a strided view too. */
#include <kern/kern.h>

#include <math.h>
#include <stdio.h>

enum { B = 2, L = 24, H = 3, D = 16 };

/* [B, H, L, D] view of head-interleaved memory: element (b, h, l, d) at
 * base[b * sb + l * sl + h * D + d] */
static kern_status view_bhld(kern_tensor *t, const float *base, int64_t sb, int64_t sl) {
    const int64_t shape[4] = {B, H, L, D};
    const int64_t stride[4] = {sb, D, sl, 1};
    return kern_tensor_init_strided(t, base, KERN_F32, 4, shape, stride);
}

int main(void) {
    static float qkv[B * L * 3 * H * D], out[B * L * H * D];
    kern_tensor q, k, v, o;
    kern_sdpa_params p = {0}; /* C++: kern_sdpa_params p{}; */
    const int64_t tok = 3 * H * D; /* elements per token in qkv */
    double maxerr = 0;
    int b, h, i, j, d, n;

    for (n = 0; n < B * L * 3 * H * D; n++) qkv[n] = (float)((n * 37 % 101) - 50) / 50.0f;

    if (view_bhld(&q, qkv + 0 * H * D, L * tok, tok) != KERN_OK ||
        view_bhld(&k, qkv + 1 * H * D, L * tok, tok) != KERN_OK ||
        view_bhld(&v, qkv + 2 * H * D, L * tok, tok) != KERN_OK ||
        view_bhld(&o, out, L * H * D, H * D) != KERN_OK) {
        fprintf(stderr, "%s\n", kern_last_error());
        return 1;
    }
    p.is_causal = 1; /* scale 0 = 1/sqrt(D) */
    if (kern_sdpa(NULL, &q, &k, &v, &o, &p) != KERN_OK) {
        fprintf(stderr, "kern_sdpa: %s\n", kern_last_error());
        return 1;
    }

    /* plain causal softmax attention on the same buffer */
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++)
            for (i = 0; i < L; i++) {
                const float *qi = qkv + (b * L + i) * tok + h * D;
                double s[L], mx = -INFINITY, sum = 0;
                for (j = 0; j <= i; j++) {
                    const float *kj = qkv + (b * L + j) * tok + H * D + h * D;
                    double dot = 0;
                    for (d = 0; d < D; d++) dot += (double)qi[d] * kj[d];
                    s[j] = dot / sqrt((double)D);
                    if (s[j] > mx) mx = s[j];
                }
                for (j = 0; j <= i; j++) sum += s[j] = exp(s[j] - mx);
                for (d = 0; d < D; d++) {
                    double acc = 0, e;
                    for (j = 0; j <= i; j++)
                        acc += s[j] * qkv[(b * L + j) * tok + 2 * H * D + h * D + d];
                    e = fabs(acc / sum - out[((b * L + i) * H + h) * D + d]);
                    if (e > maxerr) maxerr = e;
                }
            }
    printf("sdpa_packed_qkv: B=%d L=%d H=%d D=%d causal, max |out - reference| = %.2g\n",
           B, L, H, D, maxerr);
    printf("[sdpa_packed_qkv] %d ok, %d failed\n", maxerr < 1e-4, maxerr >= 1e-4);
    return maxerr < 1e-4 ? 0 : 1;
}
