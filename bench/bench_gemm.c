/* bench_gemm.c — family `gemm`: dense GEMM, C = A B, row-major A [M,K],
 * B [K,N], C [M,N].
 *
 * Case strings: "<dt>/M<M>/N<N>/K<K>" with dt = f32 (f32 in, f32 out; peak
 * kind F32) or bf16 (bf16 in, bf16 out; peak kind BF16, the vdpbf16ps
 * peak). Work = 2*M*N*K flops for every impl. For M <= 16 the bytes counter
 * is the weight K*N*size(dt), so GB/s reads as weight streamed per second
 * (compare with DRAM bandwidth at M = 1).
 * Epilogue cases "f32/M<M>/N<N>/K<K>/bias+gelu+res": C = gelu_erf(A B +
 * bias) + R, the same flops counted, so the GFLOP/s ratio against the plain
 * case is the epilogue overhead.
 *
 * Impls:
 *   kern         kern_gemm, B as given (packed inside every call; for
 *                M <= 16 the row-major f32 B is streamed without packing)
 *   kern_packed  kern_gemm with B prepacked by kern_gemm_pack_b outside the
 *                timed loop (the weight-reuse case), M <= 128 and the
 *                f32 BERT-base shapes at M = 1024
 *   openblas     cblas_sgemm (f32); cblas_sbgemm for bf16 (note: OpenBLAS
 *                writes an f32 C there, ours writes bf16), threads set
 *                with openblas_set_num_threads before each run; on the
 *                epilogue cases sgemm followed by one plain C loop for
 *                bias + GELU + residual (the unfused baseline)
 *   naive        the textbook i-j-k triple loop, 1 thread, only where it
 *                finishes in reasonable time (<= 6e8 flops)
 * Python peer (bench/peers/gemm.py): torch.matmul (torch.addmm + gelu + add
 * on the epilogue cases).
 */
#include "kern_gemm.h"
#include "kbench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KBENCH_HAVE_OPENBLAS
#include <cblas.h>
#include <dlfcn.h>
/* cblas_sbgemm is declared by the header but missing from OpenBLAS builds
 * without BUILD_BFLOAT16 (Debian's): looked up at run time. */
typedef void (*sbgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint,
                          blasint, blasint, float, const bfloat16 *, blasint, const bfloat16 *,
                          blasint, float, float *, blasint);
#endif

typedef struct gcase {
    int64_t M, N, K;
    kern_dtype dt;
    int epi;
    char name[80];
} gcase;

#define MAXC 40
static gcase gcases[MAXC];
static int ncases;

static void add_case(int64_t M, int64_t N, int64_t K, kern_dtype dt, int epi) {
    gcase *c = &gcases[ncases++];
    c->M = M; c->N = N; c->K = K; c->dt = dt; c->epi = epi;
    snprintf(c->name, sizeof c->name, "%s/M%lld/N%lld/K%lld%s", kern_dtype_name(dt), (long long)M,
             (long long)N, (long long)K, epi ? "/bias+gelu+res" : "");
}

/* Buffers of the case being run (one at a time: the largest needs ~200 MB). */
static struct {
    const gcase *c;
    void *a, *b, *cm, *bias, *res;
    float *c32; /* f32 C for OpenBLAS sbgemm */
    kern_gemm_packed_b *pb;
} cur;


static void release_case(void) {
    free(cur.a); free(cur.b); free(cur.cm); free(cur.bias); free(cur.res); free(cur.c32);
    kern_gemm_packed_b_free(NULL, cur.pb);
    memset(&cur, 0, sizeof cur);
}

static int prepare(const gcase *c) {
    size_t es = kern_dtype_size(c->dt);
    if (cur.c == c) return 1;
    release_case();
    cur.a = kbench_aligned((size_t)(c->M * c->K) * es);
    cur.b = kbench_aligned((size_t)(c->K * c->N) * es);
    cur.cm = kbench_aligned((size_t)(c->M * c->N) * es);
    cur.c32 = (float *)kbench_aligned((size_t)(c->M * c->N) * 4);
    cur.bias = kbench_aligned((size_t)c->N * 4);
    cur.res = kbench_aligned((size_t)(c->M * c->N) * 4);
    if (!cur.a || !cur.b || !cur.cm || !cur.c32 || !cur.bias || !cur.res) {
        release_case();
        return 0;
    }
    kbench_fill(cur.a, c->dt, c->M * c->K, 1);
    kbench_fill(cur.b, c->dt, c->K * c->N, 2);
    kbench_fill(cur.cm, c->dt, c->M * c->N, 3);
    kbench_fill(cur.c32, KERN_F32, c->M * c->N, 3);
    kbench_fill(cur.bias, KERN_F32, c->N, 4);
    kbench_fill(cur.res, KERN_F32, c->M * c->N, 5);
    cur.c = c;
    return 1;
}

static void set_work(kbench_state *st, const gcase *c) {
    kbench_set_flops(st, 2.0 * (double)c->M * (double)c->N * (double)c->K);
    if (c->M <= 16) kbench_set_bytes(st, (double)(c->K * c->N) * (double)kern_dtype_size(c->dt));
}

static void run_kern_impl(kbench_state *st, const gcase *c, int packed) {
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_tensor ta, tb, tc, tbias, tres;
    kern_gemm_params p;
    if (!prepare(c)) { kbench_skip(st, "out of memory"); return; }
    ta = kern_tensor_2d(cur.a, c->dt, c->M, c->K);
    tb = kern_tensor_2d(cur.b, c->dt, c->K, c->N);
    tc = kern_tensor_2d(cur.cm, c->dt, c->M, c->N);
    tbias = kern_tensor_1d(cur.bias, KERN_F32, c->N);
    tres = kern_tensor_2d(cur.res, KERN_F32, c->M, c->N);
    memset(&p, 0, sizeof p);
    if (c->epi) {
        p.epilogue.bias = &tbias;
        p.epilogue.act = KERN_ACT_GELU;
        p.epilogue.residual = &tres;
    }
    if (packed) {
        if (!cur.pb && kern_gemm_pack_b(ctx, &tb, &cur.pb, NULL) != KERN_OK) {
            kbench_skip(st, kern_last_error());
            return;
        }
        p.packed_b = cur.pb;
    }
    if (kern_gemm(ctx, &ta, packed ? NULL : &tb, &tc, &p) != KERN_OK) { /* warm-up, checks */
        kbench_skip(st, kern_last_error());
        return;
    }
    while (kbench_next(st)) kern_gemm(ctx, &ta, packed ? NULL : &tb, &tc, &p);
    kbench_use(cur.cm);
    set_work(st, c);
}

static void run_kern(kbench_state *st, void *user) { run_kern_impl(st, (const gcase *)user, 0); }
static void run_kern_packed(kbench_state *st, void *user) { run_kern_impl(st, (const gcase *)user, 1); }

static float gelu_ref(float x) { return 0.5f * x * erfcf(-x * 0.70710678f); }

static void run_openblas(kbench_state *st, void *user) {
    const gcase *c = (const gcase *)user;
#ifdef KBENCH_HAVE_OPENBLAS
    int M = (int)c->M, N = (int)c->N, K = (int)c->K;
    if (!prepare(c)) { kbench_skip(st, "out of memory"); return; }
    openblas_set_num_threads(kbench_threads(st));
    if (c->dt == KERN_F32) {
        const float *bias = (const float *)cur.bias, *res = (const float *)cur.res;
        float *C = (float *)cur.cm;
        while (kbench_next(st)) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f,
                        (const float *)cur.a, K, (const float *)cur.b, N, 0.0f, C, N);
            if (c->epi) {
                int64_t i, j;
                for (i = 0; i < c->M; i++)
                    for (j = 0; j < c->N; j++)
                        C[i * N + j] = gelu_ref(C[i * N + j] + bias[j]) + res[i * N + j];
            }
        }
    } else {
        sbgemm_fn sbgemm = (sbgemm_fn)dlsym(RTLD_DEFAULT, "cblas_sbgemm");
        if (!sbgemm) {
            kbench_skip(st, "this OpenBLAS build has no cblas_sbgemm (built without BUILD_BFLOAT16)");
            return;
        }
        while (kbench_next(st))
            sbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f,
                   (const bfloat16 *)cur.a, K, (const bfloat16 *)cur.b, N, 0.0f, cur.c32, N);
    }
    kbench_use(cur.cm);
    kbench_use(cur.c32);
    set_work(st, c);
#else
    (void)c;
    kbench_skip(st, "OpenBLAS not installed");
#endif
}

static void run_naive(kbench_state *st, void *user) {
    const gcase *c = (const gcase *)user;
    int64_t i, j, k;
    if (2.0 * (double)c->M * (double)c->N * (double)c->K > 6e8 || c->epi) {
        kbench_skip(st, "naive triple loop only on cases <= 6e8 flops (it runs at ~1 GFLOP/s)");
        return;
    }
    if (!prepare(c)) { kbench_skip(st, "out of memory"); return; }
    while (kbench_next(st)) {
        if (c->dt == KERN_F32) {
            const float *A = (const float *)cur.a, *B = (const float *)cur.b;
            float *C = (float *)cur.cm;
            for (i = 0; i < c->M; i++)
                for (j = 0; j < c->N; j++) {
                    float s = 0;
                    for (k = 0; k < c->K; k++) s += A[i * c->K + k] * B[k * c->N + j];
                    C[i * c->N + j] = s;
                }
        } else {
            const uint16_t *A = (const uint16_t *)cur.a, *B = (const uint16_t *)cur.b;
            uint16_t *C = (uint16_t *)cur.cm;
            for (i = 0; i < c->M; i++)
                for (j = 0; j < c->N; j++) {
                    float s = 0;
                    for (k = 0; k < c->K; k++)
                        s += kern_bf16_to_f32(A[i * c->K + k]) * kern_bf16_to_f32(B[k * c->N + j]);
                    C[i * c->N + j] = kern_f32_to_bf16(s);
                }
        }
        kbench_use(cur.cm);
    }
    set_work(st, c);
}

KBENCH_INIT(gemm) {
    static const int64_t shapes[][3] = {
        {512, 512, 512},    {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
        {2048, 4096, 4096}, {16, 4096, 4096},   {1, 4096, 4096},    {4096, 4096, 64},
        {4096, 64, 4096},   {128, 768, 3072},   {4, 4096, 4096},    {8, 4096, 4096}};
    int s, d, t, i;
    for (d = 0; d < 2; d++)
        for (s = 0; s < 12; s++) add_case(shapes[s][0], shapes[s][1], shapes[s][2], d ? KERN_BF16 : KERN_F32, 0);
    add_case(512, 3072, 768, KERN_F32, 0);
    add_case(128, 768, 3072, KERN_F32, 1);
    add_case(512, 3072, 768, KERN_F32, 1);
    /* BERT-base linears at 1024 tokens (batch 8 x seq 128): QKV, attention
     * output, FFN up, FFN down */
    add_case(1024, 2304, 768, KERN_F32, 0);
    add_case(1024, 768, 768, KERN_F32, 0);
    add_case(1024, 3072, 768, KERN_F32, 0);
    add_case(1024, 768, 3072, KERN_F32, 0);
    for (i = 0; i < ncases; i++) {
        const gcase *c = &gcases[i];
        kbench_peak pk = c->dt == KERN_F32 ? KBENCH_PEAK_F32 : KBENCH_PEAK_BF16;
        /* bf16 runs on AMX tiles where the machine has them: its fraction
         * is of the tile peak */
        if (c->dt == KERN_BF16 && kern_isa_available(KERN_ISA_AMX))
            pk = KBENCH_PEAK_AMX_BF16;
        for (t = 1; t <= 2; t++) {
            kbench_add("gemm", c->name, "kern", t, pk, run_kern, (void *)c);
            if (c->M <= 128 || (c->dt == KERN_F32 && c->M == 1024 && c->K <= 3072))
                kbench_add("gemm", c->name, "kern_packed", t, pk, run_kern_packed, (void *)c);
            kbench_add("gemm", c->name, "openblas", t, pk, run_openblas, (void *)c);
            if (t == 1) kbench_add("gemm", c->name, "naive", t, pk, run_naive, (void *)c);
        }
    }
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("gemm", "f32/M4096/N4096/K4096");
    kbench_headline("gemm", "f32/M16/N4096/K4096");
    kbench_headline("gemm", "f32/M1/N4096/K4096");
}
