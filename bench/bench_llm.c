/* bench_llm.c — family `llm`: the decode step's memory-bound pieces.
 *
 * Cases: "gemv/<w>/M<m>/N<n>/K<k>"  y [M, N] = x [M, K] . w [N, K]^T
 *   w    f32 | bf16 | i8 (per-output-channel f32 scales); x and y f32
 *        (bf16 weight: x bf16 too, as a bf16 model runs)
 *   Bytes per call: the weight (+ its scales), the bytes that must come
 *   from DRAM each decode step; x and y are noise at these sizes.
 *   The weight cycles through enough copies (>= 256 MiB together) that
 *   every call reads it from DRAM, not from the 32 MiB L3.
 * Impls: kern (kern_linear_gemv). The torch peer (bench/peers/llm.py)
 * times F.linear on the same shapes and copies.
 * Peak: DRAM.
 */
#define KERN_IMPLEMENTATION
#include "kern_llm.h"
#include "kbench.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct gcase {
    kern_dtype wdt;
    int64_t M, N, K;
    double bytes;
} gcase;

static void run_gemv(kbench_state *st, void *user) {
    const gcase *c = (const gcase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_dtype xdt = c->wdt == KERN_BF16 ? KERN_BF16 : KERN_F32;
    size_t wbytes = (size_t)(c->N * c->K) * (c->wdt == KERN_I8 ? 1 : kern_dtype_size(c->wdt));
    int copies = (int)((256u << 20) / wbytes) + 1, i = 0;
    void **w = (void **)malloc((size_t)copies * sizeof *w);
    void *x = kbench_alloc((size_t)(c->M * c->K) * kern_dtype_size(xdt));
    float *y = (float *)kbench_alloc((size_t)(c->M * c->N) * 4);
    float *sc = (float *)kbench_alloc((size_t)c->N * 4);
    kern_tensor xt = kern_tensor_2d(x, xdt, c->M, c->K), yt = kern_tensor_2d(y, KERN_F32, c->M, c->N);
    kern_tensor st_ = kern_tensor_1d(sc, KERN_F32, c->N), wt;
    kern_gemv_params p;
    kern_status s = KERN_OK;
    int j;
    if (!w) {
        kbench_skip(st, "out of memory");
        return;
    }
    kbench_fill(x, xdt, c->M * c->K, 1);
    kbench_fill(sc, KERN_F32, c->N, 2);
    for (j = 0; j < copies; j++) {
        w[j] = kbench_alloc(wbytes);
        if (!w[j]) {
            kbench_skip(st, "out of memory");
            free(w);
            return;
        }
        if (c->wdt == KERN_I8) memset(w[j], 3 + j, wbytes);
        else kbench_fill(w[j], c->wdt, c->N * c->K, (uint64_t)(10 + j));
    }
    memset(&p, 0, sizeof p);
    if (c->wdt == KERN_I8) p.w_scale = &st_;
    while (kbench_next(st)) {
        wt = kern_tensor_2d(w[i], c->wdt, c->N, c->K);
        s |= kern_linear_gemv(ctx, &xt, &wt, &yt, &p);
        i = (i + 1) % copies;
    }
    kbench_use(y);
    free(w); /* the copies are freed at exit (kbench_alloc) */
    if (s != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    kbench_set_bytes(st, c->bytes);
    kbench_set_flops(st, 2.0 * (double)(c->M * c->N * c->K));
}

KBENCH_INIT(llm) {
    static const kern_dtype wdts[3] = {KERN_F32, KERN_BF16, KERN_I8};
    static const int64_t shapes[2][2] = {{4096, 4096}, {11008, 4096}};
    static const int64_t Ms[2] = {1, 4};
    static gcase cases[3 * 2 * 2];
    int n = 0, wi, si, mi, t;
    for (wi = 0; wi < 3; wi++)
        for (si = 0; si < 2; si++)
            for (mi = 0; mi < 2; mi++) {
                gcase *c = &cases[n++];
                char name[96];
                c->wdt = wdts[wi];
                c->M = Ms[mi];
                c->N = shapes[si][0];
                c->K = shapes[si][1];
                c->bytes = (double)(c->N * c->K) * (c->wdt == KERN_I8 ? 1.0 : (double)kern_dtype_size(c->wdt)) +
                           (c->wdt == KERN_I8 ? 4.0 * (double)c->N : 0.0);
                snprintf(name, sizeof name, "gemv/%s/M%lld/N%lld/K%lld", kern_dtype_name(c->wdt),
                         (long long)c->M, (long long)c->N, (long long)c->K);
                for (t = 1; t <= 2; t++) kbench_add("llm", name, "kern", t, KBENCH_PEAK_DRAM, run_gemv, c);
            }
    kbench_headline("llm", "gemv/f32/M1/N4096/K4096");
    kbench_headline("llm", "gemv/bf16/M1/N4096/K4096");
    kbench_headline("llm", "gemv/i8/M1/N4096/K4096");
}
