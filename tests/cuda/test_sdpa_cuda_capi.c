/* test_sdpa_cuda_capi.c — the CUDA attention host API from plain C.
 *
 * Compiled by the C compiler (C11, -pedantic -Werror) and linked with an
 * object nvcc built from kernels/cuda/kern_sdpa.cuh (mk/cuda.mk): the
 * declarations are C, the entry points have C linkage, and errors come
 * back through kern_last_error(). Runs on a GPU machine (make test-cuda);
 * the tests that need no device memory also pass on a machine without a
 * GPU.
 */
#include <cuda_runtime_api.h>

#include "kern_sdpa.cuh"
#include "kt.h"

static int have_gpu(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

/* Argument errors are found before any device call. */
KT_TEST(capi_errors_without_device_memory) {
    uint16_t hq[4 * 64], ho[4 * 64];
    float hf[4 * 64];
    kern_tensor q = kern_tensor_4d(hq, KERN_F16, 1, 1, 4, 64);
    kern_tensor o = kern_tensor_4d(ho, KERN_F16, 1, 1, 4, 64);
    kern_tensor f = kern_tensor_4d(hf, KERN_F32, 1, 1, 4, 64);
    kern_cuda_sdpa_params p;
    memset(&p, 0, sizeof p);
    memset(ho, 0x7A, sizeof ho);
    KT_ERROR(kern_cuda_sdpa(NULL, NULL, &q, &q, &o, &p), KERN_ERR_ARG, "q is NULL");
    KT_ERROR(kern_cuda_sdpa(NULL, &f, &f, &f, &f, &p), KERN_ERR_DTYPE, "f16 or bf16");
    p.sdpa.dropout_p = 1.0f;
    KT_ERROR(kern_cuda_sdpa(NULL, &q, &q, &q, &o, &p), KERN_ERR_ARG, "dropout_p");
    p.sdpa.dropout_p = 0.f;
    q.shape[3] = 300;
    KT_ERROR(kern_cuda_sdpa(NULL, &q, &q, &q, &q, &p), KERN_ERR_UNSUPPORTED, "up to 256");
    KT_CHECK(ho[0] == 0x7A7A, "out written on error");
}

/* Host memory where device memory is required. */
KT_TEST(capi_host_pointer) {
    uint16_t hq[4 * 64], ho[4 * 64];
    kern_tensor q = kern_tensor_4d(hq, KERN_BF16, 1, 1, 4, 64);
    kern_tensor o = kern_tensor_4d(ho, KERN_BF16, 1, 1, 4, 64);
    kern_status st;
    memset(ho, 0x7A, sizeof ho);
    memset(hq, 0, sizeof hq);
    st = kern_cuda_sdpa(NULL, &q, &q, &q, &o, NULL);
    if (have_gpu()) {
        KT_CHECK(st == KERN_ERR_ARG, "got %s (%s)", kern_status_name(st), kern_last_error());
        KT_CHECK(strstr(kern_last_error(), "device pointer") != NULL, "message: %s", kern_last_error());
    } else {
        /* no device: the pointer query itself fails */
        KT_CHECK(st == KERN_ERR_DEVICE || st == KERN_ERR_ARG, "got %s (%s)", kern_status_name(st),
                 kern_last_error());
    }
    KT_CHECK(ho[0] == 0x7A7A, "out written on error");
}

/* A real forward: causal, GQA, f16, against a reference in double. */
KT_TEST(capi_forward) {
    enum { B = 1, HQ = 2, HKV = 1, L = 37, D = 64 };
    uint16_t hq[B * HQ * L * D], hk[B * HKV * L * D], hv[B * HKV * L * D], ho[B * HQ * L * D];
    void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL;
    kern_tensor q, k, v, o;
    kern_cuda_sdpa_params p;
    kt_rng r = kt_rng_make(1);
    double want[B * HQ * L * D];
    kern_status st;
    if (!have_gpu()) { /* needs a GPU; make test-cuda runs it there */
        printf("skip capi_forward: no CUDA device\n");
        return;
    }
    kt_fill_normal(&r, hq, KERN_F16, B * HQ * L * D, 1.0);
    kt_fill_normal(&r, hk, KERN_F16, B * HKV * L * D, 1.0);
    kt_fill_normal(&r, hv, KERN_F16, B * HKV * L * D, 1.0);
    KT_REQUIRE(cudaMalloc(&dq, sizeof hq) == cudaSuccess, "cudaMalloc");
    KT_REQUIRE(cudaMalloc(&dk, sizeof hk) == cudaSuccess, "cudaMalloc");
    KT_REQUIRE(cudaMalloc(&dv, sizeof hv) == cudaSuccess, "cudaMalloc");
    KT_REQUIRE(cudaMalloc(&dout, sizeof ho) == cudaSuccess, "cudaMalloc");
    (void)cudaMemcpy(dq, hq, sizeof hq, cudaMemcpyHostToDevice);
    (void)cudaMemcpy(dk, hk, sizeof hk, cudaMemcpyHostToDevice);
    (void)cudaMemcpy(dv, hv, sizeof hv, cudaMemcpyHostToDevice);
    q = kern_tensor_4d(dq, KERN_F16, B, HQ, L, D);
    k = kern_tensor_4d(dk, KERN_F16, B, HKV, L, D);
    v = kern_tensor_4d(dv, KERN_F16, B, HKV, L, D);
    o = kern_tensor_4d(dout, KERN_F16, B, HQ, L, D);
    memset(&p, 0, sizeof p);
    p.sdpa.is_causal = 1;
    p.sdpa.enable_gqa = 1;
    st = kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p);
    KT_CHECK(st == KERN_OK, "%s", kern_last_error());
    KT_CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync");
    (void)cudaMemcpy(ho, dout, sizeof ho, cudaMemcpyDeviceToHost);
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < L; i++) {
            double s[L], mx = -1e300, sum = 0;
            for (int j = 0; j <= i; j++) {
                double x = 0;
                for (int d = 0; d < D; d++)
                    x += kern_f16_to_f32(hq[(h * L + i) * D + d]) * kern_f16_to_f32(hk[j * D + d]);
                s[j] = x / 8.0;
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j <= i; j++) sum += (s[j] = exp(s[j] - mx));
            for (int d = 0; d < D; d++) {
                double acc = 0;
                for (int j = 0; j <= i; j++) acc += s[j] / sum * kern_f16_to_f32(hv[j * D + d]);
                want[(h * L + i) * D + d] = acc;
            }
        }
    kt_assert_close("out", ho, KERN_F16, want, B * HQ * L * D, kt_tol_scaled(KERN_F16, 4));
    (void)cudaFree(dq);
    (void)cudaFree(dk);
    (void)cudaFree(dv);
    (void)cudaFree(dout);
}

KT_MAIN()
