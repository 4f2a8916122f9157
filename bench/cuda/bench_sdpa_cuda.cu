/* bench_sdpa_cuda.cu — kern_cuda_sdpa forward/backward and split-KV
 * decode on the GPU (family sdpa_cuda). Standalone (no Google Benchmark):
 * CUDA-event timing, warm-up, median of repeated runs, one JSON line per
 * case in the protocol of bench/peers/common.py:
 *
 *   {"family": "sdpa_cuda", "case": ..., "threads": 1, "impl": "kern",
 *    "seconds": median per call, "flops": per call, "bytes": per call}
 *
 * bench/peers/sdpa_cuda.py times PyTorch's scaled_dot_product_attention
 * with the flash (impl torch_flash) and cuDNN (impl torch_cudnn) backends
 * on the same case strings. "threads" is 1 (one stream on one GPU).
 *
 * Cases (the FlashAttention papers' grid): 16k tokens in total (B = 16384 /
 * L), H*D = 2048, D in {64, 128, 256}, L in {512 .. 16k}, causal or not,
 * forward and backward, f16 and bf16; decode B = 8, Hq = 32, Hkv = 8,
 * Lq = 1, Lk in {4k, 32k}, D = 128. Memory layout [B, L, H, D] (the
 * FlashAttention layout; torch gets the same memory through a transpose).
 * FLOPs: forward 4*B*H*Lq*Lk*D, halved when causal (work actually needed);
 * backward 2.5x the forward (five matmuls instead of two). Decode bytes:
 * K and V read plus q read and out written.
 *
 * Usage: bench_sdpa_cuda [--filter REGEX] [--quick] [--list]
 */
#ifndef KERN_SDPA_CUDA_LINKED /* make cuda links build/cuda/kern_sdpa_cuda.o */
#define KERN_IMPLEMENTATION
#endif
#include "kern_sdpa.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

struct bcase {
    std::string name;
    int bwd, causal;
    int B, Hq, Hkv, Lq, Lk, D;
    kern_dtype dt;
    double flops, bytes;
};

static std::vector<bcase> make_cases(void) {
    std::vector<bcase> v;
    const int Ls[6] = {512, 1024, 2048, 4096, 8192, 16384};
    const int Ds[3] = {64, 128, 256};
    const kern_dtype dts[2] = {KERN_F16, KERN_BF16};
    char buf[160];
    for (int bwd = 0; bwd < 2; bwd++)
        for (int t = 0; t < 2; t++)
            for (int di = 0; di < 3; di++)
                for (int causal = 0; causal < 2; causal++)
                    for (int li = 0; li < 6; li++) {
                        bcase c;
                        c.bwd = bwd;
                        c.causal = causal;
                        c.D = Ds[di];
                        c.Hq = c.Hkv = 2048 / c.D;
                        c.Lq = c.Lk = Ls[li];
                        c.B = 16384 / c.Lq;
                        c.dt = dts[t];
                        snprintf(buf, sizeof buf, "%s/%s/B%d/H%d/L%d/D%d/%s", bwd ? "bwd" : "fwd",
                                 kern_dtype_name(c.dt), c.B, c.Hq, c.Lq, c.D, causal ? "causal" : "full");
                        c.name = buf;
                        c.flops = 4.0 * c.B * c.Hq * (double)c.Lq * c.Lk * c.D * (causal ? 0.5 : 1.0) *
                                  (bwd ? 2.5 : 1.0);
                        c.bytes = 0;
                        v.push_back(c);
                    }
    for (int t = 0; t < 2; t++)
        for (int lk : {4096, 32768}) {
            bcase c;
            c.bwd = 0;
            c.causal = 0;
            c.B = 8;
            c.Hq = 32;
            c.Hkv = 8;
            c.Lq = 1;
            c.Lk = lk;
            c.D = 128;
            c.dt = dts[t];
            snprintf(buf, sizeof buf, "decode/%s/B8/Hq32/Hkv8/Lq1/Lk%d/D128", kern_dtype_name(c.dt), lk);
            c.name = buf;
            c.flops = 4.0 * c.B * c.Hq * (double)c.Lq * c.Lk * c.D;
            c.bytes = 2.0 * (2.0 * c.B * c.Hkv * (double)c.Lk * c.D + 2.0 * c.B * c.Hq * c.Lq * c.D);
            v.push_back(c);
        }
    return v;
}

/* Fills n 16-bit values with N(0,1)-ish data on the device. */
__global__ void fill_kernel(uint16_t *p, size_t n, uint32_t seed, int bf) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 13;
        x *= 0x5bd1e995u;
        x ^= x >> 15;
        float f = ((x & 0xffff) / 65536.0f - 0.5f) * 3.4f; /* uniform, variance ~1 */
        uint16_t h;
        if (bf)
            asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
        else
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
        p[i] = h;
    }
}
static void fill(void *p, size_t n, uint32_t seed, kern_dtype dt) {
    fill_kernel<<<1024, 256>>>((uint16_t *)p, n, seed, dt == KERN_BF16);
    CK(cudaGetLastError());
}

/* [B, L, H, D] memory viewed as [B, H, L, D]. */
static kern_tensor bhld(void *p, kern_dtype dt, int B, int H, int L, int D) {
    kern_tensor t;
    memset(&t, 0, sizeof t);
    t.data = p;
    t.dtype = dt;
    t.ndim = 4;
    t.shape[0] = B; t.shape[1] = H; t.shape[2] = L; t.shape[3] = D;
    t.stride[0] = (int64_t)L * H * D; t.stride[1] = D; t.stride[2] = (int64_t)H * D; t.stride[3] = 1;
    return t;
}

int main(int argc, char **argv) {
    const char *filter = NULL;
    int quick = 0, list = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strncmp(argv[i], "--filter=", 9)) filter = argv[i] + 9;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--list")) list = 1;
        else {
            fprintf(stderr, "usage: %s [--filter REGEX] [--quick] [--list]\n", argv[0]);
            return 2;
        }
    }
    std::regex rx(filter ? filter : "");
    std::vector<bcase> cases = make_cases();
    if (list) {
        for (size_t i = 0; i < cases.size(); i++) printf("sdpa_cuda/kern/%s\n", cases[i].name.c_str());
        return 0;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        for (size_t i = 0; i < cases.size(); i++)
            if (!filter || std::regex_search("sdpa_cuda/kern/" + cases[i].name, rx))
                printf("{\"family\": \"sdpa_cuda\", \"case\": \"%s\", \"threads\": 1, \"impl\": \"kern\", "
                       "\"skipped\": \"no CUDA device\"}\n",
                       cases[i].name.c_str());
        return 0;
    }
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (size_t ci = 0; ci < cases.size(); ci++) {
        const bcase &c = cases[ci];
        std::string full = "sdpa_cuda/kern/" + c.name;
        if (filter && !std::regex_search(full, rx)) continue;
        const size_t nq = (size_t)c.B * c.Lq * c.Hq * c.D, nk = (size_t)c.B * c.Lk * c.Hkv * c.D;
        void *q, *k, *v, *o, *dout, *dq, *dk, *dv, *lse;
        CK(cudaMalloc(&q, nq * 2));
        CK(cudaMalloc(&k, nk * 2));
        CK(cudaMalloc(&v, nk * 2));
        CK(cudaMalloc(&o, nq * 2));
        CK(cudaMalloc(&lse, (size_t)c.B * c.Hq * c.Lq * 4));
        dout = dq = dk = dv = NULL;
        if (c.bwd) {
            CK(cudaMalloc(&dout, nq * 2));
            CK(cudaMalloc(&dq, nq * 2));
            CK(cudaMalloc(&dk, nk * 2));
            CK(cudaMalloc(&dv, nk * 2));
            fill(dout, nq, 7, c.dt);
        }
        fill(q, nq, 1, c.dt);
        fill(k, nk, 2, c.dt);
        fill(v, nk, 3, c.dt);
        kern_tensor tq = bhld(q, c.dt, c.B, c.Hq, c.Lq, c.D), tk = bhld(k, c.dt, c.B, c.Hkv, c.Lk, c.D);
        kern_tensor tv = bhld(v, c.dt, c.B, c.Hkv, c.Lk, c.D), to = bhld(o, c.dt, c.B, c.Hq, c.Lq, c.D);
        kern_tensor tdo = bhld(dout, c.dt, c.B, c.Hq, c.Lq, c.D), tdq = bhld(dq, c.dt, c.B, c.Hq, c.Lq, c.D);
        kern_tensor tdk = bhld(dk, c.dt, c.B, c.Hkv, c.Lk, c.D), tdv = bhld(dv, c.dt, c.B, c.Hkv, c.Lk, c.D);
        kern_tensor tl = kern_tensor_4d(lse, KERN_F32, c.B, c.Hq, c.Lq, 1);
        tl.ndim = 3;
        kern_cuda_sdpa_params p;
        memset(&p, 0, sizeof p);
        p.sdpa.is_causal = c.causal;
        p.sdpa.enable_gqa = c.Hq != c.Hkv;
        p.sdpa.lse = &tl;
        /* workspace allocated once, outside the timed region */
        size_t wsf = 0, wsb = 0;
        void *ws = NULL;
        if (kern_cuda_sdpa_workspace_size(&tq, &tk, &tv, &p, 0, &wsf) != KERN_OK ||
            kern_cuda_sdpa_workspace_size(&tq, &tk, &tv, &p, 1, &wsb) != KERN_OK) {
            fprintf(stderr, "%s\n", kern_last_error());
            return 1;
        }
        if (wsb > wsf && c.bwd) wsf = wsb;
        if (wsf) CK(cudaMalloc(&ws, wsf));
        p.sdpa.workspace = ws;
        p.sdpa.workspace_size = wsf;
        kern_status s = kern_cuda_sdpa(st, &tq, &tk, &tv, &to, &p);
        if (s != KERN_OK) {
            printf("{\"family\": \"sdpa_cuda\", \"case\": \"%s\", \"threads\": 1, \"impl\": \"kern\", "
                   "\"skipped\": \"%s\"}\n",
                   c.name.c_str(), kern_last_error());
        } else {
            auto call = [&]() -> kern_status {
                return c.bwd ? kern_cuda_sdpa_backward(st, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv, &p)
                             : kern_cuda_sdpa(st, &tq, &tk, &tv, &to, &p);
            };
            for (int w = 0; w < 3; w++) call(); /* warm-up */
            CK(cudaStreamSynchronize(st));
            /* batch calls so that one timed sample lasts >= ~2 ms */
            CK(cudaEventRecord(e0, st));
            call();
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms1 = 0;
            CK(cudaEventElapsedTime(&ms1, e0, e1));
            int batch = ms1 > 0 ? (int)(2.0 / ms1) : 1;
            batch = batch < 1 ? 1 : batch > 1000 ? 1000 : batch;
            const int reps = quick ? 5 : 15;
            std::vector<double> t;
            for (int r = 0; r < reps; r++) {
                CK(cudaEventRecord(e0, st));
                for (int b = 0; b < batch; b++) call();
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                t.push_back(ms * 1e-3 / batch);
            }
            std::sort(t.begin(), t.end());
            const double med = t[t.size() / 2];
            if (call() != KERN_OK) fprintf(stderr, "%s: %s\n", c.name.c_str(), kern_last_error());
            printf("{\"family\": \"sdpa_cuda\", \"case\": \"%s\", \"threads\": 1, \"impl\": \"kern\", "
                   "\"seconds\": %.9g, \"flops\": %.6g, \"bytes\": %.6g}\n",
                   c.name.c_str(), med, c.flops, c.bytes);
            fprintf(stderr, "%-44s %9.3f ms  %7.1f TFLOP/s%s", c.name.c_str(), med * 1e3, c.flops / med * 1e-12,
                    c.bytes > 0 ? "" : "\n");
            if (c.bytes > 0) fprintf(stderr, "  %7.1f GB/s\n", c.bytes / med * 1e-9);
        }
        fflush(stdout);
        CK(cudaStreamSynchronize(st));
        cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(lse);
        if (ws) cudaFree(ws);
        if (c.bwd) { cudaFree(dout); cudaFree(dq); cudaFree(dk); cudaFree(dv); }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(st);
    return 0;
}
