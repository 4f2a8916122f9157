/* bench_sparse24.c — family `sparse24`: 2:4 sparse linear layers.
 *
 * Case strings: "<dtype>/M<M>/N<N>/K<K>", dtype f32 or bf16 (x, W, y all in
 * that dtype). Work = 2*M*N*K dense-equivalent FLOP for every impl (the
 * sparse kernel does half of them: its GFLOP/s is the dense-equivalent
 * rate, and the ratio to the dense impls is the speedup). Peak kind F32 or
 * BF16. For M <= 16 the bytes counter is the dense weight N*K*es, the same
 * for every impl (GB/s = "dense weight per second"); the counter
 * `weight_bytes_read` says what each impl really streams.
 *
 * Impls (the same pruned weight, y = x W^T, no epilogue, weights prepared
 * outside the timed loop):
 *   kern        kern_sparse24_linear on the compressed weight
 *   kern_dense  kern_gemm (trans_b, weight prepacked by kern_gemm_pack_b)
 *               on the dense pruned weight
 *   openblas    cblas_sgemm on the dense weight (f32 cases),
 *               openblas_set_num_threads(threads); bf16 cases are skipped:
 *               the installed OpenBLAS 0.3.21 is built without sbgemm
 *
 * Epilogue case "f32/M256/N3072/K768/gelu" (a BERT-base FFN up-projection
 * of 256 tokens): y = gelu_erf(x W^T), the same flops counted as the plain
 * case beside it, so the time against that case is the epilogue's cost.
 *   kern          the GELU fused into kern_sparse24_linear's epilogue
 *   kern_unfused  kern_sparse24_linear, then kern_gelu over y in place
 *   kern_dense    kern_gemm with the GELU epilogue on the dense weight
 */
#include "kern_sparse24.h"
#include "kern_gemm.h"
#include "kern_norm.h"
#include "kbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KBENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

typedef struct scase {
    int64_t M, N, K;
    kern_dtype dt;
    char name[64];
    int gelu; /* the epilogue case: y = gelu(x W^T) */
} scase;

static scase scases[] = {
    {2048, 4096, 4096, KERN_F32, "", 0}, {512, 4096, 4096, KERN_F32, "", 0},
    {128, 768, 3072, KERN_F32, "", 0},   {16, 4096, 4096, KERN_F32, "", 0},
    {1, 4096, 4096, KERN_F32, "", 0},    {2048, 4096, 4096, KERN_BF16, "", 0},
    {512, 4096, 4096, KERN_BF16, "", 0}, {128, 768, 3072, KERN_BF16, "", 0},
    {16, 4096, 4096, KERN_BF16, "", 0},  {1, 4096, 4096, KERN_BF16, "", 0},
    {256, 3072, 768, KERN_F32, "", 0},   {256, 3072, 768, KERN_F32, "", 1},
};
#define NCASES ((int)(sizeof scases / sizeof scases[0]))

/* Buffers of the case being run (one case at a time). */
static struct {
    const scase *c;
    void *x, *w, *y;
    kern_sparse24 *sw;
    kern_gemm_packed_b *pb;
} cur;


static void release_case(void) {
    free(cur.x);
    free(cur.w);
    free(cur.y);
    kern_sparse24_free(NULL, cur.sw);
    kern_gemm_packed_b_free(NULL, cur.pb);
    memset(&cur, 0, sizeof cur);
}

static int setup_case(const scase *c) {
    int64_t M = c->M, N = c->N, K = c->K;
    size_t es = kern_dtype_size(c->dt);
    kern_tensor tw;
    if (cur.c == c) return 1;
    release_case();
    cur.c = c;
    cur.x = kbench_aligned((size_t)(M * K) * es);
    cur.w = kbench_aligned((size_t)(N * K) * es);
    cur.y = kbench_aligned((size_t)(M * N) * es);
    if (!cur.x || !cur.w || !cur.y) return 0;
    kbench_fill(cur.x, c->dt, M * K, 1);
    kbench_fill(cur.w, c->dt, N * K, 2);
    kbench_fill(cur.y, c->dt, M * N, 3);
    tw = kern_tensor_2d(cur.w, c->dt, N, K);
    /* the same pruned weight for every impl */
    if (kern_sparse24_prune(NULL, &tw, &tw, NULL) != KERN_OK) return 0;
    if (kern_sparse24_compress(NULL, &tw, &cur.sw, NULL) != KERN_OK) return 0;
    {
        kern_gemm_pack_params pp;
        memset(&pp, 0, sizeof pp);
        pp.trans_b = 1;
        if (kern_gemm_pack_b(NULL, &tw, &cur.pb, &pp) != KERN_OK) cur.pb = NULL;
    }
    return 1;
}

static void set_work(kbench_state *st, const scase *c, double weight_bytes) {
    double es = (double)kern_dtype_size(c->dt);
    kbench_set_flops(st, 2.0 * (double)c->M * (double)c->N * (double)c->K);
    if (c->M <= 16) kbench_set_bytes(st, (double)c->N * (double)c->K * es);
    kbench_counter(st, "weight_bytes_read", weight_bytes);
}

static void run_kern(kbench_state *st, void *user) {
    const scase *c = (const scase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_tensor tx, ty;
    kern_sparse24_linear_params lp;
    if (!setup_case(c)) {
        kbench_skip(st, "setup failed");
        return;
    }
    memset(&lp, 0, sizeof lp);
    lp.epilogue.act = c->gelu ? KERN_ACT_GELU : KERN_ACT_NONE;
    tx = kern_tensor_2d(cur.x, c->dt, c->M, c->K);
    ty = kern_tensor_2d(cur.y, c->dt, c->M, c->N);
    if (kern_sparse24_linear(ctx, &tx, cur.sw, &ty, &lp) != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    while (kbench_next(st)) kern_sparse24_linear(ctx, &tx, cur.sw, &ty, &lp);
    kbench_use(cur.y);
    {
        kern_sparse24_info info;
        kern_sparse24_get_info(cur.sw, &info);
        set_work(st, c, (double)info.bytes);
    }
}

/* The epilogue case unfused: the plain linear, then kern_gelu on y. */
static void run_kern_unfused(kbench_state *st, void *user) {
    const scase *c = (const scase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_tensor tx, ty;
    if (!setup_case(c)) {
        kbench_skip(st, "setup failed");
        return;
    }
    tx = kern_tensor_2d(cur.x, c->dt, c->M, c->K);
    ty = kern_tensor_2d(cur.y, c->dt, c->M, c->N);
    if (kern_sparse24_linear(ctx, &tx, cur.sw, &ty, NULL) != KERN_OK ||
        kern_gelu(ctx, &ty, &ty, KERN_ACT_GELU) != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    while (kbench_next(st)) {
        kern_sparse24_linear(ctx, &tx, cur.sw, &ty, NULL);
        kern_gelu(ctx, &ty, &ty, KERN_ACT_GELU);
    }
    kbench_use(cur.y);
    {
        kern_sparse24_info info;
        kern_sparse24_get_info(cur.sw, &info);
        set_work(st, c, (double)info.bytes);
    }
}

static void run_kern_dense(kbench_state *st, void *user) {
    const scase *c = (const scase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_tensor tx, ty;
    kern_gemm_params p;
    if (!setup_case(c) || !cur.pb) {
        kbench_skip(st, "setup or kern_gemm_pack_b failed");
        return;
    }
    memset(&p, 0, sizeof p);
    p.trans_b = 1;
    p.packed_b = cur.pb;
    p.epilogue.act = c->gelu ? KERN_ACT_GELU : KERN_ACT_NONE;
    tx = kern_tensor_2d(cur.x, c->dt, c->M, c->K);
    ty = kern_tensor_2d(cur.y, c->dt, c->M, c->N);
    if (kern_gemm(ctx, &tx, NULL, &ty, &p) != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    while (kbench_next(st)) kern_gemm(ctx, &tx, NULL, &ty, &p);
    kbench_use(cur.y);
    set_work(st, c, (double)c->N * (double)c->K * (double)kern_dtype_size(c->dt));
}

#ifdef KBENCH_HAVE_OPENBLAS
static void run_openblas(kbench_state *st, void *user) {
    const scase *c = (const scase *)user;
    int M = (int)c->M, N = (int)c->N, K = (int)c->K;
    if (!setup_case(c)) {
        kbench_skip(st, "setup failed");
        return;
    }
    openblas_set_num_threads(kbench_threads(st));
    if (c->dt == KERN_F32) {
        while (kbench_next(st))
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f,
                        (const float *)cur.x, K, (const float *)cur.w, K, 0.0f,
                        (float *)cur.y, N);
        kbench_use(cur.y);
    } else {
        /* Debian's libopenblas declares cblas_sbgemm but is built without
         * it (undefined at link time): no OpenBLAS bf16 GEMM to compare */
        kbench_skip(st, "this OpenBLAS has no bf16 GEMM (cblas_sbgemm not built); compare "
                        "with the f32 row");
        return;
    }
    set_work(st, c, (double)c->N * (double)c->K * (double)kern_dtype_size(c->dt));
}
#endif

KBENCH_INIT(sparse24) {
    int i, t;
    for (i = 0; i < NCASES; i++) {
        scase *c = &scases[i];
        kbench_peak pk = c->dt == KERN_F32 ? KBENCH_PEAK_F32 : KBENCH_PEAK_BF16;
        snprintf(c->name, sizeof c->name, "%s/M%lld/N%lld/K%lld%s", kern_dtype_name(c->dt),
                 (long long)c->M, (long long)c->N, (long long)c->K, c->gelu ? "/gelu" : "");
        for (t = 1; t <= 2; t++) {
            kbench_add("sparse24", c->name, "kern", t, pk, run_kern, c);
            if (c->gelu) kbench_add("sparse24", c->name, "kern_unfused", t, pk, run_kern_unfused, c);
            kbench_add("sparse24", c->name, "kern_dense", t, pk, run_kern_dense, c);
#ifdef KBENCH_HAVE_OPENBLAS
            if (!c->gelu) kbench_add("sparse24", c->name, "openblas", t, pk, run_openblas, c);
#endif
        }
    }
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("sparse24", "f32/M2048/N4096/K4096");
    kbench_headline("sparse24", "f32/M16/N4096/K4096");
}
