/* kern_cuda_emu.cuh — a CPU emulation of the small subset of CUDA that
 * kern's CUDA kernels use, so their logic can be executed and tested on a
 * machine without a GPU. For tests only; never for speed.
 *
 * Build a CUDA translation unit with a C++17 host compiler instead of nvcc:
 *
 *     g++ -std=c++17 -x c++ -DKERN_CUDA_EMULATE file.cu
 *
 * The kernel headers include this file instead of <cuda_runtime.h> when
 * KERN_CUDA_EMULATE is defined. What it emulates:
 *   - kernel launches: every CUDA thread of a block is a coroutine
 *     (ucontext); blocks run one after another. __syncthreads() is a block
 *     barrier, warp collectives (ldmatrix, mma, shuffles) are warp barriers.
 *     The scheduler runs one thread until it blocks, lowest thread first on
 *     even launches and highest first on odd ones, so warps drift as far
 *     apart as the barriers allow: a missing __syncthreads shows up as
 *     wrong results rather than being hidden by lockstep execution.
 *   - ldmatrix.x4 (plain and .trans) and mma.sync.m16n8k16 (f16/bf16 in,
 *     f32 accumulate) from the fragment layouts in the PTX ISA manual,
 *     implemented from the per-lane ownership tables directly.
 *   - cp.async: copies are queued per thread and performed only when a
 *     cp.async.wait_group retires their group, so reading shared memory
 *     before waiting reads stale data.
 *   - dynamic shared memory is filled with 0xFF (NaN) at every block start.
 *   - failure injection for tests: kern__emu_state().fail_mallocs = n makes
 *     the next n cudaMalloc/cudaMallocAsync calls fail.
 *   - the runtime calls the kernels and tests use (cudaMalloc & co. on host
 *     memory, with a registry so cudaPointerGetAttributes can tell "device"
 *     allocations from other host pointers), launch checks (block size,
 *     grid limits, dynamic shared memory above 48 KiB needs
 *     cudaFuncSetAttribute first), a 4-SM compute capability 8.x device
 *     with 227 KiB of shared memory per block.
 *   - address checks: ldmatrix rows and cp.async destinations must lie in
 *     the block's dynamic shared memory, cp.async sources inside a
 *     cudaMalloc allocation (an out-of-bounds tile load aborts with a
 *     message instead of reading neighbouring memory).
 *   - context switches: a hand-written x86-64 register switch (glibc's
 *     swapcontext makes a system call per switch and is ~50x slower);
 *     ucontext elsewhere or with -DKERN_CUDA_EMU_UCONTEXT.
 * What it does not emulate: timing, true concurrency between blocks
 * (blocks are sequential, so inter-block races are invisible; the kernels
 * have none except atomicAdd), memory-model subtleties beyond the above.
 */
#ifndef KERN_CUDA_EMU_CUH
#define KERN_CUDA_EMU_CUH

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

#include "kern_base.h"

/* ------------------------------------------------------------ qualifiers */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* ------------------------------------------------------------ runtime API */
typedef int cudaError_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorNoDevice = 100
};
typedef void *cudaStream_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3
};
struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void *devicePointer;
    void *hostPointer;
};
enum cudaDeviceAttr {
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

struct kern__emu_state_t {
    std::map<uintptr_t, size_t> allocs; /* start -> size */
    std::map<const void *, int> smem_attr;
    cudaError_t last_error;
    int sms;
    long launches;
    int fail_mallocs; /* tests: the next n cudaMalloc calls fail */
};
static kern__emu_state_t &kern__emu_state() {
    static kern__emu_state_t s = {std::map<uintptr_t, size_t>(), std::map<const void *, int>(),
                                  cudaSuccess, 4, 0, 0};
    return s;
}
static inline cudaError_t kern__emu_fail(cudaError_t e) {
    kern__emu_state().last_error = e;
    return e;
}
static inline const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (emulated)";
    case cudaErrorMemoryAllocation: return "out of memory (emulated)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (emulated)";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (emulated)";
    default: return "unknown error (emulated)";
    }
}
static inline const char *cudaGetErrorName(cudaError_t e) {
    return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated";
}
static inline cudaError_t cudaGetLastError(void) {
    cudaError_t e = kern__emu_state().last_error;
    kern__emu_state().last_error = cudaSuccess;
    return e;
}
static inline cudaError_t cudaPeekAtLastError(void) { return kern__emu_state().last_error; }
static inline cudaError_t cudaMalloc(void **p, size_t n) {
    void *q = NULL;
    if (kern__emu_state().fail_mallocs > 0) {
        kern__emu_state().fail_mallocs--;
        return kern__emu_fail(cudaErrorMemoryAllocation);
    }
    if (posix_memalign(&q, 256, n ? n : 1) != 0) return kern__emu_fail(cudaErrorMemoryAllocation);
    memset(q, 0xCD, n); /* device memory starts as garbage */
    kern__emu_state().allocs[(uintptr_t)q] = n;
    *p = q;
    return cudaSuccess;
}
template <class T> static inline cudaError_t cudaMalloc(T **p, size_t n) {
    return cudaMalloc((void **)p, n);
}
static inline cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    if (!kern__emu_state().allocs.erase((uintptr_t)p)) return kern__emu_fail(cudaErrorInvalidValue);
    free(p);
    return cudaSuccess;
}
static inline cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
static inline cudaError_t cudaFreeAsync(void *p, cudaStream_t) { return cudaFree(p); }
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
    if (n) memmove(d, s, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k,
                                          cudaStream_t) {
    return cudaMemcpy(d, s, n, k);
}
static inline cudaError_t cudaMemset(void *d, int v, size_t n) {
    if (n) memset(d, v, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t) {
    return cudaMemset(d, v, n);
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline cudaError_t cudaStreamCreate(cudaStream_t *s) {
    *s = (cudaStream_t)(uintptr_t)0x5157;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaGetDevice(int *d) {
    *d = 0;
    return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int *n) {
    *n = 1;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int) {
    switch (a) {
    case cudaDevAttrMultiProcessorCount: *v = kern__emu_state().sms; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *v = 8; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = 48 * 1024; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 227 * 1024; return cudaSuccess;
    default: return kern__emu_fail(cudaErrorInvalidValue);
    }
}
template <class F>
static inline cudaError_t cudaFuncSetAttribute(F *fn, cudaFuncAttribute a, int v) {
    if (a != cudaFuncAttributeMaxDynamicSharedMemorySize || v < 0 || v > 227 * 1024)
        return kern__emu_fail(cudaErrorInvalidValue);
    kern__emu_state().smem_attr[(const void *)fn] = v;
    return cudaSuccess;
}
static inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p) {
    std::map<uintptr_t, size_t> &m = kern__emu_state().allocs;
    std::map<uintptr_t, size_t>::iterator it = m.upper_bound((uintptr_t)p);
    memset(a, 0, sizeof *a);
    a->type = cudaMemoryTypeUnregistered;
    a->device = -2;
    if (it != m.begin()) {
        --it;
        if ((uintptr_t)p < it->first + (it->second ? it->second : 1)) {
            a->type = cudaMemoryTypeDevice;
            a->device = 0;
            a->devicePointer = (void *)p;
        }
    }
    return cudaSuccess;
}

/* ------------------------------------------------------------ scheduler */
struct kern__emu_cp {
    void *dst;
    const void *src;
    int bytes;
    long group;
};
/* Context switch. glibc's swapcontext makes a sigprocmask system call per
 * switch (about 2 us here); on x86-64 a 10-instruction switch of the
 * callee-saved registers, MXCSR and the x87 control word does the same job
 * about 50x faster. Other targets use ucontext. */
#if defined(__x86_64__) && !defined(KERN_CUDA_EMU_UCONTEXT)
#define KERN__EMU_FAST_SWITCH 1
extern "C" void kern__emu_switch(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".weak kern__emu_switch\n"
        ".type kern__emu_switch,@function\n"
        "kern__emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n"
        "  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n"
        "  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size kern__emu_switch, .-kern__emu_switch\n");
#endif

struct kern__emu_thread {
    ucontext_t ctx;
    void *sp; /* saved stack pointer (fast switch) */
    dim3 tidx;
    int tid;
    int state; /* 0 runnable, 1 waiting at a barrier, 2 done */
    int waitk; /* 0 warp barrier, 1 block barrier */
    long committed;
    std::vector<kern__emu_cp> pending;
};
struct kern__emu_block {
    ucontext_t sched;
    void *sched_sp;
    std::vector<kern__emu_thread> th;
    std::vector<char *> stacks;
    int nthreads;
    int done;
    /* incremental barrier bookkeeping: live threads, threads waiting at a
     * block barrier, and per warp the live, warp-barrier-waiting and
     * runnable counts */
    int live, at_block;
    int wlive[32], wat[32], wrun[32];
    const std::function<void()> *body;
    std::vector<unsigned char> smem;
    /* warp exchange slots */
    const void *addr[1024];
    uint32_t a[1024][4], b[1024][2];
    float f[1024];
    uint32_t u[1024];
};
static kern__emu_block *kern__emu_blk;
static kern__emu_thread *kern__emu_cur;
static dim3 kern__emu_block_idx, kern__emu_block_dim, kern__emu_grid_dim;

#define threadIdx (kern__emu_cur->tidx)
#define blockIdx kern__emu_block_idx
#define blockDim kern__emu_block_dim
#define gridDim kern__emu_grid_dim

static inline void kern__emu_yield(void) {
#ifdef KERN__EMU_FAST_SWITCH
    kern__emu_switch(&kern__emu_cur->sp, kern__emu_blk->sched_sp);
#else
    swapcontext(&kern__emu_cur->ctx, &kern__emu_blk->sched);
#endif
}
static void kern__emu_entry(void) {
    (*kern__emu_blk->body)();
    kern__emu_cur->state = 2;
    kern__emu_blk->done++;
    kern__emu_yield();
}
/* Barrier among the live threads of one warp (block = 0) or of the block. */
static inline void kern__emu_barrier(int block) {
    kern__emu_cur->state = 1;
    kern__emu_cur->waitk = block;
    kern__emu_yield();
}
static inline void __syncthreads(void) { kern__emu_barrier(1); }
static inline void kern__emu_sync_warp(void) { kern__emu_barrier(0); }

/* Bookkeeping after thread t stopped (at a barrier or for good): releases
 * the warp barrier or the block barrier it completed. */
static void kern__emu_release(kern__emu_block *B, int t) {
    kern__emu_thread *x = &B->th[(size_t)t];
    int w = t / 32, w0 = w * 32, w1 = w0 + 32 < B->nthreads ? w0 + 32 : B->nthreads, i;
    B->wrun[w]--;
    if (x->state == 2) {
        B->live--;
        B->wlive[w]--;
    } else if (x->waitk == 0) {
        B->wat[w]++;
    } else {
        B->at_block++;
    }
    if (B->wlive[w] > 0 && B->wat[w] == B->wlive[w]) {
        for (i = w0; i < w1; i++)
            if (B->th[(size_t)i].state == 1) B->th[(size_t)i].state = 0;
        B->wrun[w] = B->wat[w];
        B->wat[w] = 0;
    }
    if (B->live > 0 && B->at_block == B->live) {
        for (i = 0; i < B->nthreads; i++)
            if (B->th[(size_t)i].state == 1) {
                B->th[(size_t)i].state = 0;
                B->wrun[i / 32]++;
            }
        B->at_block = 0;
    }
}

/* Runs one block: always resumes the first runnable thread (in ascending
 * or descending order), so one warp runs ahead until a block barrier stops
 * it. */
static void kern__emu_run_block(const std::function<void()> &body, int nthreads, size_t smem) {
    static kern__emu_block *B = new kern__emu_block();
    const size_t stack_size = 256 * 1024;
    int i, reverse = (int)(kern__emu_state().launches & 1);
    kern__emu_blk = B;
    B->body = &body;
    B->nthreads = nthreads;
    B->th.resize((size_t)nthreads);
    while ((int)B->stacks.size() < nthreads) B->stacks.push_back((char *)malloc(stack_size));
    B->smem.assign(smem + 16, (unsigned char)0xFF);
    B->done = 0;
    B->live = nthreads;
    B->at_block = 0;
    for (i = 0; i < 32; i++) {
        int n = nthreads - 32 * i;
        n = n < 0 ? 0 : n > 32 ? 32 : n;
        B->wlive[i] = n;
        B->wat[i] = 0;
        B->wrun[i] = n;
    }
    for (i = 0; i < nthreads; i++) {
        kern__emu_thread *t = &B->th[(size_t)i];
        t->tid = i;
        t->tidx = dim3((unsigned)i, 0, 0);
        t->state = 0;
        t->waitk = 0;
        t->committed = 0;
        t->pending.clear();
#ifdef KERN__EMU_FAST_SWITCH
        {
            /* A frame kern__emu_switch can "return" from into the entry:
             * 6 callee-saved registers, then MXCSR/x87 CW, with the return
             * address at a 16-byte aligned slot (rsp = 8 mod 16 at entry). */
            uintptr_t top = ((uintptr_t)B->stacks[(size_t)i] + stack_size - 64) & ~(uintptr_t)15;
            uint64_t *f = (uint64_t *)top;
            f[0] = (uint64_t)(uintptr_t)&kern__emu_entry;
            for (int r = 1; r <= 6; r++) f[-r] = 0;
            f[-7] = 0x1F80u | ((uint64_t)0x037Fu << 32);
            t->sp = (void *)&f[-7];
        }
#else
        getcontext(&t->ctx);
        t->ctx.uc_stack.ss_sp = B->stacks[(size_t)i];
        t->ctx.uc_stack.ss_size = stack_size;
        t->ctx.uc_link = NULL;
        makecontext(&t->ctx, kern__emu_entry, 0);
#endif
    }
    while (B->done < nthreads) {
        int pick = -1, nw = (nthreads + 31) / 32;
        for (int k = 0; k < nw && pick < 0; k++) {
            int w = reverse ? nw - 1 - k : k;
            if (B->wrun[w] <= 0) continue;
            for (int j = 0; j < 32; j++) {
                int idx = w * 32 + (reverse ? 31 - j : j);
                if (idx < nthreads && B->th[(size_t)idx].state == 0) { pick = idx; break; }
            }
        }
        if (pick < 0) {
            fprintf(stderr, "kern_cuda_emu: deadlock (threads wait at barriers that cannot "
                            "complete: mixed warp/block barriers)\n");
            abort();
        }
        kern__emu_cur = &B->th[(size_t)pick];
#ifdef KERN__EMU_FAST_SWITCH
        kern__emu_switch(&B->sched_sp, kern__emu_cur->sp);
#else
        swapcontext(&B->sched, &kern__emu_cur->ctx);
#endif
        kern__emu_release(B, pick);
    }
}

static inline cudaError_t kern__emu_launch(const void *fn, dim3 grid, dim3 block, size_t smem,
                                           const std::function<void()> &body) {
    kern__emu_state_t &S = kern__emu_state();
    unsigned nt = block.x * block.y * block.z;
    int limit = 48 * 1024;
    if (S.smem_attr.count(fn)) limit = S.smem_attr[fn] > limit ? S.smem_attr[fn] : limit;
    if (nt == 0 || nt > 1024 || block.y != 1 || block.z != 1 || grid.x == 0 || grid.y == 0 ||
        grid.z == 0 || grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u)
        return kern__emu_fail(cudaErrorInvalidConfiguration);
    if ((long)smem > limit) return kern__emu_fail(cudaErrorInvalidValue);
    kern__emu_grid_dim = grid;
    kern__emu_block_dim = block;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                kern__emu_block_idx = dim3(x, y, z);
                kern__emu_run_block(body, (int)nt, smem);
            }
    S.launches++;
    return cudaSuccess;
}

/* ------------------------------------------------------------ primitives */
static inline void *kern__emu_smem(void) {
    return (void *)(((uintptr_t)kern__emu_blk->smem.data() + 15) & ~(uintptr_t)15);
}
static inline float __shfl_xor_sync(unsigned, float v, int m) {
    kern__emu_block *B = kern__emu_blk;
    int tid = kern__emu_cur->tid, lane = tid & 31;
    float r;
    B->f[tid] = v;
    kern__emu_sync_warp();
    r = B->f[tid - lane + (lane ^ m)];
    kern__emu_sync_warp();
    return r;
}
static inline unsigned __shfl_xor_sync(unsigned, unsigned v, int m) {
    kern__emu_block *B = kern__emu_blk;
    int tid = kern__emu_cur->tid, lane = tid & 31;
    unsigned r;
    B->u[tid] = v;
    kern__emu_sync_warp();
    r = B->u[tid - lane + (lane ^ m)];
    kern__emu_sync_warp();
    return r;
}
static inline int __shfl_xor_sync(unsigned mask, int v, int m) {
    return (int)__shfl_xor_sync(mask, (unsigned)v, m);
}
static inline float __shfl_sync(unsigned, float v, int src) {
    kern__emu_block *B = kern__emu_blk;
    int tid = kern__emu_cur->tid, lane = tid & 31;
    float r;
    B->f[tid] = v;
    kern__emu_sync_warp();
    r = B->f[tid - lane + (src & 31)];
    kern__emu_sync_warp();
    return r;
}
static inline void __syncwarp(unsigned = 0xffffffffu) { kern__emu_sync_warp(); }
/* Address checks: a shared-memory access must lie inside the block's
 * dynamic shared memory, a global one inside a cudaMalloc allocation. */
static inline void kern__emu_check_smem(const void *p, size_t bytes, const char *what) {
    kern__emu_block *B = kern__emu_blk;
    uintptr_t lo = (uintptr_t)kern__emu_smem(), hi = (uintptr_t)B->smem.data() + B->smem.size() - 16;
    if ((uintptr_t)p < lo || (uintptr_t)p + bytes > hi) {
        fprintf(stderr, "kern_cuda_emu: %s at %p (+%zu) is outside dynamic shared memory "
                        "[%p, %p)\n", what, p, bytes, (void *)lo, (void *)hi);
        abort();
    }
}
static inline void kern__emu_check_global(const void *p, size_t bytes, const char *what) {
    std::map<uintptr_t, size_t> &m = kern__emu_state().allocs;
    std::map<uintptr_t, size_t>::iterator it = m.upper_bound((uintptr_t)p);
    if (it != m.begin()) {
        --it;
        if ((uintptr_t)p + bytes <= it->first + it->second) return;
    }
    fprintf(stderr, "kern_cuda_emu: %s reads %p (+%zu), outside every cudaMalloc "
                    "allocation\n", what, p, bytes);
    abort();
}
static inline float atomicAdd(float *p, float v) {
    float old = *p;
    *p = old + v;
    return old;
}
/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8i..8i+7 give
 * the row addresses of matrix i; without .trans, lane l receives in r[i]
 * elements (row l/4, cols 2(l%4), 2(l%4)+1) of matrix i; with .trans it
 * receives (row 2(l%4), col l/4) and (row 2(l%4)+1, col l/4). The element
 * with the lower index sits in the low 16 bits. */
static inline void kern__emu_ldmatrix_x4(uint32_t r[4], const void *p, int trans) {
    kern__emu_block *B = kern__emu_blk;
    int tid = kern__emu_cur->tid, lane = tid & 31, w0 = tid - lane;
    if (((uintptr_t)p & 15) != 0) {
        fprintf(stderr, "kern_cuda_emu: ldmatrix row address %p is not 16-byte aligned\n", p);
        abort();
    }
    kern__emu_check_smem(p, 16, "ldmatrix row");
    B->addr[tid] = p;
    kern__emu_sync_warp();
    for (int i = 0; i < 4; i++) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t *row = (const uint16_t *)B->addr[w0 + i * 8 + lane / 4];
            lo = row[2 * (lane % 4)];
            hi = row[2 * (lane % 4) + 1];
        } else {
            const uint16_t *r0 = (const uint16_t *)B->addr[w0 + i * 8 + 2 * (lane % 4)];
            const uint16_t *r1 = (const uint16_t *)B->addr[w0 + i * 8 + 2 * (lane % 4) + 1];
            lo = r0[lane / 4];
            hi = r1[lane / 4];
        }
        r[i] = (uint32_t)lo | ((uint32_t)hi << 16);
    }
    kern__emu_sync_warp();
}
static inline float kern__emu_h2f(uint16_t h, int bf) {
    return bf ? kern_bf16_to_f32(h) : kern_f16_to_f32(h);
}
/* mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32, D = A*B + C
 * with groupID g = lane/4, t = lane%4:
 *   A (16x16): a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..)
 *   B (16x8):  b0 (k 2t..2t+1, n g)  b1 (k 2t+8..2t+9, n g)
 *   C/D (16x8): c0,c1 (g, 2t..2t+1)  c2,c3 (g+8, 2t..2t+1) */
static inline void kern__emu_mma(float d[4], const uint32_t a[4], const uint32_t b[2], int bf) {
    kern__emu_block *B = kern__emu_blk;
    int tid = kern__emu_cur->tid, lane = tid & 31, w0 = tid - lane;
    for (int i = 0; i < 4; i++) B->a[tid][i] = a[i];
    B->b[tid][0] = b[0];
    B->b[tid][1] = b[1];
    kern__emu_sync_warp();
    for (int e = 0; e < 4; e++) {
        int row = lane / 4 + (e >= 2 ? 8 : 0), col = 2 * (lane % 4) + (e & 1);
        float acc = d[e];
        for (int k = 0; k < 16; k++) {
            int areg = (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
            int alane = (row % 8) * 4 + (k % 8) / 2;
            int breg = k >= 8 ? 1 : 0;
            int blane = col * 4 + (k % 8) / 2;
            uint32_t av = B->a[w0 + alane][areg], bv = B->b[w0 + blane][breg];
            uint16_t ah = (uint16_t)((k & 1) ? av >> 16 : av & 0xffff);
            uint16_t bh = (uint16_t)((k & 1) ? bv >> 16 : bv & 0xffff);
            acc += kern__emu_h2f(ah, bf) * kern__emu_h2f(bh, bf);
        }
        d[e] = acc;
    }
    kern__emu_sync_warp();
}
static inline void kern__emu_cp_async16(void *dst, const void *src, int bytes) {
    kern__emu_cp c;
    if (((uintptr_t)dst & 15) || (bytes > 0 && ((uintptr_t)src & 15)) || bytes < 0 || bytes > 16) {
        fprintf(stderr, "kern_cuda_emu: cp.async misaligned or bad size (%p <- %p, %d)\n", dst,
                src, bytes);
        abort();
    }
    kern__emu_check_smem(dst, 16, "cp.async destination");
    if (bytes > 0) kern__emu_check_global(src, (size_t)bytes, "cp.async source");
    c.dst = dst;
    c.src = src;
    c.bytes = bytes;
    c.group = kern__emu_cur->committed;
    kern__emu_cur->pending.push_back(c);
}
static inline void kern__emu_cp_commit(void) { kern__emu_cur->committed++; }
static inline void kern__emu_cp_wait(int n) {
    kern__emu_thread *t = kern__emu_cur;
    std::vector<kern__emu_cp> keep;
    for (size_t i = 0; i < t->pending.size(); i++) {
        kern__emu_cp &c = t->pending[i];
        if (c.group < t->committed - n) {
            memcpy(c.dst, c.src, (size_t)c.bytes);
            memset((char *)c.dst + c.bytes, 0, (size_t)(16 - c.bytes));
        } else {
            keep.push_back(c);
        }
    }
    t->pending.swap(keep);
}

#endif /* KERN_CUDA_EMU_CUH */
