/* kern_sdpa.cuh — flash-attention scaled dot product attention on NVIDIA
 * GPUs (sm_80 and newer), forward and backward. Part of kern (header-only;
 * see kern_base.h). The CUDA twin of kernels/kern_sdpa.h: same options, same
 * semantics, same dropout mask, so a caller switches devices by switching
 * the entry point.
 *
 * WHAT IT COMPUTES
 *   out = dropout(softmax(capped(scale * q k^T) + mask)) v
 * with PyTorch's torch.nn.functional.scaled_dot_product_attention semantics
 * (attn_mask, is_causal, scale, enable_gqa, dropout_p) and FlashAttention's
 * extras (bottom-right causal, sliding window, softcap, per-batch key
 * lengths, varlen packed sequences, log-sum-exp output, backward from lse).
 * FlashAttention-2 structure: a block of query rows streams over key blocks
 * with an online softmax; S = Q K^T and O += P V run on tensor cores through
 * mma.sync.m16n8k16 (f16/bf16 in, f32 accumulate) fed by ldmatrix from
 * shared memory, which cp.async fills one key block ahead of use (two
 * stages). P is rounded
 * to the input dtype before P V (as FlashAttention does).
 *
 * LAYOUTS (device pointers; shapes logical; strides any, in elements, with
 * unit stride on the last dim, so [B,H,L,D] and [B,L,H,D] both work)
 *   q    [B, Hq,  Lq, D]      k [B, Hkv, Lk, D]     v [B, Hkv, Lk, Dv]
 *   out  [B, Hq,  Lq, Dv]     lse (optional output) f32 [B, Hq, Lq]
 *   varlen: q [Tq, Hq, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv], out [Tq, Hq, Dv],
 *   cu_seqlens_q/k [nseq+1] i32/i64 on the device, lse f32 [Hq, Tq].
 *   dtypes: q, k, v, out (dout, dq, dk, dv) all f16 or all bf16; f32
 *   accumulation. D, Dv in 1..256: 64, 96, 128 and 256 have their own
 *   instantiation; other sizes run in the next larger one with the extra
 *   columns zero-filled on load and never stored.
 *   Fast path: base pointers 16-byte aligned and the B/H/L strides multiples
 *   of 8 elements (cp.async moves 16-byte chunks); other views take a slower
 *   element-wise load path with the same results.
 *
 * OPTIONS: kern_cuda_sdpa_params. Its first member, sdpa, IS the CPU
 *   kernel's kern_sdpa_params (kernels/kern_sdpa.h, included by this
 *   header), with the same meaning (see that header): attn_mask (bool: true
 *   = attend, or f32/f16/bf16 additive; broadcast to [B,Hq,Lq,Lk] through
 *   strides, device memory), is_causal (top-left), causal_bottom_right
 *   (j <= i + Lk_b - Lq_b), scale / scale_set (0 = 1/sqrt(D) unless
 *   scale_set), enable_gqa (Hq = G*Hkv, head h uses kv head h/G),
 *   dropout_p / seed / offset (mask kern_dropout_keep(seed, offset,
 *   ((b*Hq + h)*Lq + i)*Lk + j, kern_dropout_threshold(p)) of kern_base.h,
 *   bit-identical to the CPU kernel; varlen: b = sequence, Lq/Lk =
 *   max_seqlen_q/k), window_set / window_left / window_right (-1 =
 *   unbounded), softcap (s = softcap*tanh(s/softcap) before the mask),
 *   k_lens ([B] i32/i64 on the device), lse (f32 output), and
 *   workspace / workspace_size, here device scratch for split-KV and
 *   backward: NULL = cudaMallocAsync/cudaFreeAsync on the stream;
 *   kern_cuda_sdpa_workspace_size() says how much is needed (256-byte
 *   aligned). A kern_sdpa_params set up for the CPU call works unchanged:
 *   cp.sdpa = p.
 *   A row with no visible key gives zeros in out, -inf in lse and zero
 *   gradients.
 *   CUDA-only fields after it (zero = default):
 *   deterministic  backward only. 0: dq accumulated with f32 atomicAdd from
 *                  the key-block programs (fast; run-to-run bits may
 *                  differ). Nonzero: no atomics anywhere; a second kernel
 *                  computes dq per query block, the same bits on every run.
 *                  dk and dv never use atomics (GQA groups summed in-block).
 *   num_splits     forward: 0 = heuristic split-KV for decode-shaped
 *                  problems (few query blocks, long keys: the key range is
 *                  cut into parts computed by separate blocks and merged by
 *                  a combine kernel); 1 = never split; n > 1 = n parts.
 *
 * DIFFERENCES FROM THE CPU KERNEL (the values live on the device, and
 *   reading them back would stall the stream): k_lens and cu_seqlens values
 *   are not validated; the kernels clamp them (k_lens[b] to [0, Lk],
 *   sequence bounds to [0, T] and lengths to max_seqlen) and never access
 *   memory outside the tensors. f32 tensors are not supported
 *   (KERN_ERR_DTYPE).
 *
 * ENTRY POINTS (stream: a cudaStream_t, NULL = the default stream; all
 *   work is queued on it, nothing synchronizes)
 *   kern_cuda_sdpa, kern_cuda_sdpa_varlen, kern_cuda_sdpa_backward,
 *   kern_cuda_sdpa_varlen_backward, kern_cuda_sdpa_workspace_size.
 *   Backward (FlashAttention-2): delta = rowsum(dout*out), then one program
 *   per key block recomputes P for every query block of every head of its
 *   GQA group and accumulates dk, dv in registers (shared memory for head
 *   dim 256).
 *
 * ERRORS (nothing is written and no kernel is launched on error;
 *   kern_last_error() names the argument)
 *   KERN_ERR_ARG     NULL tensors, host pointers where device pointers are
 *                    required (cudaPointerGetAttributes), dropout_p outside
 *                    [0,1), window < -1, bad scale/softcap, overlapping
 *                    outputs, a workspace that is too small.
 *   KERN_ERR_SHAPE   as kern_sdpa (ndim, B/H/L/D mismatches, Hq not a
 *                    multiple of Hkv, D = 0, mask not broadcastable, k_lens
 *                    or cu_seqlens of the wrong length).
 *   KERN_ERR_DTYPE   f32 or mixed q/k/v/out, bad mask/lse/k_lens dtypes.
 *   KERN_ERR_LAYOUT  non-unit last-dim stride.
 *   KERN_ERR_UNSUPPORTED  D or Dv > 256, sizes beyond the launch limits
 *                    (L >= 2^31, B > 65535), attn_mask/k_lens with varlen,
 *                    rel_pos_h/rel_pos_w (CPU only),
 *                    a device without enough shared memory (sm_80+ needed).
 *   KERN_ERR_DEVICE  a CUDA runtime error, with the runtime's message.
 *
 * BUILD: one translation unit compiled by nvcc (-std=c++17, sm_80/sm_90)
 *   defines KERN_IMPLEMENTATION before including this header; C files
 *   include it for the declarations (the header is C outside nvcc, even
 *   with KERN_IMPLEMENTATION defined; it brings kern_sdpa.h's declarations,
 *   never its implementation) and link that object with -lcudart
 *   (or -lcudart_static -lstdc++ -ldl -lrt -lpthread). The nvcc unit also
 *   implements kern_base.h; if another unit of the program already does,
 *   define KERN_BASE_IMPLEMENTED next to KERN_IMPLEMENTATION in the nvcc
 *   unit. With -DKERN_CUDA_EMULATE a C++17 host compiler builds everything
 *   against kern_cuda_emu.cuh (tests only).
 *
 * EXAMPLE
 *     // d_q [2,16,1024,128] f16, d_k/d_v [2,4,1024,128], d_o like d_q.
 *     kern_tensor q = kern_tensor_4d(d_q, KERN_F16, 2, 16, 1024, 128);
 *     kern_tensor k = kern_tensor_4d(d_k, KERN_F16, 2, 4, 1024, 128);
 *     kern_tensor v = kern_tensor_4d(d_v, KERN_F16, 2, 4, 1024, 128);
 *     kern_tensor o = kern_tensor_4d(d_o, KERN_F16, 2, 16, 1024, 128);
 *     kern_cuda_sdpa_params p;
 *     memset(&p, 0, sizeof p);
 *     p.sdpa.is_causal = 1;
 *     p.sdpa.enable_gqa = 1;
 *     if (kern_cuda_sdpa(stream, &q, &k, &v, &o, &p) != KERN_OK)
 *         fprintf(stderr, "%s\n", kern_last_error());
 */
#ifndef KERN_CUDA_SDPA_CUH
#define KERN_CUDA_SDPA_CUH

#include "kern_base.h"
/* kern_sdpa_params comes from the CPU header. Declarations only: the CPU
 * kernel's implementation is not part of a CUDA translation unit (include
 * kern_sdpa.h again after this header, or in another unit, for it). */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_SDPA_H)
#pragma push_macro("KERN_IMPLEMENTATION")
#undef KERN_IMPLEMENTATION
#include "kern_sdpa.h"
#pragma pop_macro("KERN_IMPLEMENTATION")
#else
#include "kern_sdpa.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_cuda_sdpa_params {
    kern_sdpa_params sdpa; /* the options of kern_sdpa, same meaning (see
                              kernels/kern_sdpa.h); sdpa.workspace is device
                              memory here (NULL = cudaMallocAsync) */
    /* --- CUDA only --- */
    int deterministic;     /* backward: no atomics in dq */
    int num_splits;        /* forward split-KV: 0 auto, 1 off, n */
} kern_cuda_sdpa_params;

/* Forward. params may be NULL (all defaults). */
KERN_API kern_status kern_cuda_sdpa(void *stream, const kern_tensor *q,
                                    const kern_tensor *k, const kern_tensor *v,
                                    const kern_tensor *out,
                                    const kern_cuda_sdpa_params *params);

/* Forward over packed sequences (FlashAttention varlen convention):
 * sequence s has queries [cu_seqlens_q[s], cu_seqlens_q[s+1]) and keys
 * [cu_seqlens_k[s], cu_seqlens_k[s+1]); no attn_mask or k_lens; lse, when
 * given, is f32 [Hq, Tq]. */
KERN_API kern_status kern_cuda_sdpa_varlen(
    void *stream, const kern_tensor *q, const kern_tensor *k,
    const kern_tensor *v, const kern_tensor *out,
    const kern_tensor *cu_seqlens_q, const kern_tensor *cu_seqlens_k,
    int64_t max_seqlen_q, int64_t max_seqlen_k,
    const kern_cuda_sdpa_params *params);

/* Backward: dq [B,Hq,Lq,D], dk [B,Hkv,Lk,D], dv [B,Hkv,Lk,Dv] (input dtype)
 * from the forward's out and lse (f32 [B,Hq,Lq]) and dout [B,Hq,Lq,Dv].
 * params must be the forward's (params->lse is ignored). */
KERN_API kern_status kern_cuda_sdpa_backward(
    void *stream, const kern_tensor *q, const kern_tensor *k,
    const kern_tensor *v, const kern_tensor *out, const kern_tensor *dout,
    const kern_tensor *lse, const kern_tensor *dq, const kern_tensor *dk,
    const kern_tensor *dv, const kern_cuda_sdpa_params *params);

/* Backward over packed sequences (lse f32 [Hq, Tq]). */
KERN_API kern_status kern_cuda_sdpa_varlen_backward(
    void *stream, const kern_tensor *q, const kern_tensor *k,
    const kern_tensor *v, const kern_tensor *out, const kern_tensor *dout,
    const kern_tensor *lse, const kern_tensor *dq, const kern_tensor *dk,
    const kern_tensor *dv, const kern_tensor *cu_seqlens_q,
    const kern_tensor *cu_seqlens_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, const kern_cuda_sdpa_params *params);

/* Device scratch (bytes) that kern_cuda_sdpa (backward = 0) or
 * kern_cuda_sdpa_backward (backward = 1) needs for these dense tensors and
 * params on the current device (0 when none). For varlen, pass q/k/v views
 * shaped [nseq, H, max_seqlen, D]. */
KERN_API kern_status kern_cuda_sdpa_workspace_size(
    const kern_tensor *q, const kern_tensor *k, const kern_tensor *v,
    const kern_cuda_sdpa_params *params, int backward, size_t *bytes);

#ifdef __cplusplus
}
#endif
#endif /* KERN_CUDA_SDPA_CUH */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
/* Only nvcc (or a C++17 compiler with KERN_CUDA_EMULATE) compiles the
 * implementation; elsewhere KERN_IMPLEMENTATION leaves this header as
 * declarations, so a C translation unit that implements the CPU headers may
 * include it too. */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_CUDA_SDPA_IMPLEMENTED) && \
    defined(__cplusplus) && (defined(__CUDACC__) || defined(KERN_CUDA_EMULATE))
#define KERN_CUDA_SDPA_IMPLEMENTED

#include <math.h>
#include <stdint.h>

/* ------------------------------------------------ device portability layer
 * Everything the kernels do on the device goes through these helpers: PTX
 * under nvcc, kern_cuda_emu.cuh under KERN_CUDA_EMULATE. */
#if defined(KERN_CUDA_EMULATE)
#include "kern_cuda_emu.cuh"
#define KERN__CU_DEV static inline
#define KERN__CU_SMEM(T, name) T *name = (T *)kern__emu_smem()
/* kernel(args...) on grid x block with smem bytes of dynamic shared memory */
#define KERN__CU_LAUNCH(kernel, grid, block, smem, stream, ...)               \
    ((void)(stream), kern__emu_launch((const void *)(kernel), grid, block, smem, \
                     [&]() { (kernel)(__VA_ARGS__); }))
struct alignas(16) kern__cu_u4 {
    uint32_t x, y, z, w;
};
#else
#include <cuda_runtime.h>
#define KERN__CU_DEV static __device__ __forceinline__
#define KERN__CU_SMEM(T, name)                                                \
    extern __shared__ __align__(16) unsigned char kern__cu_smem_raw[];        \
    T *name = (T *)kern__cu_smem_raw
#define KERN__CU_LAUNCH(kernel, grid, block, smem, stream, ...)               \
    ((kernel)<<<grid, block, smem, stream>>>(__VA_ARGS__))
typedef uint4 kern__cu_u4;
#endif

#if defined(KERN_CUDA_EMULATE)
#define KERN__CU_UNROLL
#else
#define KERN__CU_UNROLL _Pragma("unroll")
#endif

#define KERN__CU_LOG2E 1.4426950408889634f
#define KERN__CU_LN2 0.6931471805599453f

#if !defined(KERN_CUDA_EMULATE)
KERN__CU_DEV uint32_t kern__cu_saddr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
#endif

/* ldmatrix.x4: lane l gives the row address of row l%8 of matrix l/8. */
KERN__CU_DEV void kern__cu_ldsm(uint32_t r[4], const void *p) {
#if defined(KERN_CUDA_EMULATE)
    kern__emu_ldmatrix_x4(r, p, 0);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(kern__cu_saddr(p)));
#endif
}
KERN__CU_DEV void kern__cu_ldsm_t(uint32_t r[4], const void *p) {
#if defined(KERN_CUDA_EMULATE)
    kern__emu_ldmatrix_x4(r, p, 1);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(kern__cu_saddr(p)));
#endif
}
/* d (16x8 f32) += a (16x16, row) * b (16x8, col). */
template <bool BF>
KERN__CU_DEV void kern__cu_mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(KERN_CUDA_EMULATE)
    uint32_t b[2] = {b0, b1};
    kern__emu_mma(d, a, b, BF ? 1 : 0);
#else
    if (BF)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
/* 16-byte global -> shared copy of which the first `bytes` (0..16) are
 * read and the rest zero-filled. */
KERN__CU_DEV void kern__cu_cp16(void *dst, const void *src, int bytes) {
#if defined(KERN_CUDA_EMULATE)
    kern__emu_cp_async16(dst, src, bytes);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(kern__cu_saddr(dst)),
                 "l"(src), "r"(bytes));
#endif
}
KERN__CU_DEV void kern__cu_cp_commit(void) {
#if defined(KERN_CUDA_EMULATE)
    kern__emu_cp_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
/* Waits until at most N committed groups of this thread are in flight. */
template <int N> KERN__CU_DEV void kern__cu_cp_wait(void) {
#if defined(KERN_CUDA_EMULATE)
    kern__emu_cp_wait(N);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
KERN__CU_DEV float kern__cu_exp2(float x) { /* 2^x; -inf -> 0 */
#if defined(KERN_CUDA_EMULATE)
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
#endif
}
KERN__CU_DEV float kern__cu_shfl_xor(float v, int m) {
    return __shfl_xor_sync(0xffffffffu, v, m);
}
KERN__CU_DEV void kern__cu_syncwarp(void) { __syncwarp(); }
KERN__CU_DEV float kern__cu_ninf(void) { return -INFINITY; }

/* f16/bf16 storage <-> f32 (round to nearest even). */
template <bool BF> KERN__CU_DEV float kern__cu_h2f(uint16_t h) {
#if defined(KERN_CUDA_EMULATE)
    return BF ? kern_bf16_to_f32(h) : kern_f16_to_f32(h);
#else
    if (BF) return __uint_as_float((uint32_t)h << 16);
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }\n" : "=f"(f) : "h"(h));
    return f;
#endif
}
template <bool BF> KERN__CU_DEV uint16_t kern__cu_f2h(float f) {
#if defined(KERN_CUDA_EMULATE)
    return BF ? kern_f32_to_bf16(f) : kern_f32_to_f16(f);
#else
    uint16_t h;
    if (BF)
        asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(f));
    else
        asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(f));
    return h;
#endif
}
/* Two floats -> packed pair, lo in the low 16 bits (the mma operand order). */
template <bool BF> KERN__CU_DEV uint32_t kern__cu_pack2(float lo, float hi) {
#if defined(KERN_CUDA_EMULATE)
    return (uint32_t)kern__cu_f2h<BF>(lo) | ((uint32_t)kern__cu_f2h<BF>(hi) << 16);
#else
    uint32_t r;
    if (BF)
        asm("cvt.rn.bf16x2.f32 %0, %2, %1;\n" : "=r"(r) : "f"(lo), "f"(hi));
    else
        asm("cvt.rn.f16x2.f32 %0, %2, %1;\n" : "=r"(r) : "f"(lo), "f"(hi));
    return r;
#endif
}

/* ------------------------------------------------------ kernel arguments */

/* Everything a kernel needs, passed by value. Element (b, h, i, d) of a
 * [B,H,L,D] operand x sits at x + b*xs[0] + h*xs[1] + (row0_b + i)*xs[2] + d,
 * where row0_b is 0 for dense tensors and cu_seqlens[b] for varlen (whose
 * xs[0] is 0). */
struct kern__cu_args {
    const uint16_t *q, *k, *v;
    uint16_t *o;
    int64_t qs[3], ks[3], vs[3], os[3];
    int B, Hq, Hkv, G;   /* G = Hq / Hkv */
    int Lq, Lk;          /* dims, or max_seqlen_q/k for varlen */
    int D, Dv;
    int64_t Tq, Tk;      /* varlen: total rows (clamping bound) */
    const void *cu_q, *cu_k; /* varlen offsets, NULL for dense */
    int cu_q_i64, cu_k_i64;
    const void *klen;    /* k_lens or NULL */
    int klen_i64;
    const void *mask;    /* attn_mask or NULL */
    int mask_kind;       /* 0 none, 1 bool, 2 f32, 3 f16, 4 bf16 */
    int64_t ms[4];       /* broadcast strides of the mask over [B,Hq,Lq,Lk] */
    int causal;          /* 0 none, 1 top-left, 2 bottom-right */
    int window;          /* nonzero: wl / wr apply (-1 = unbounded) */
    int64_t wl, wr;
    float scale, scale_log2, softcap;
    int dropout;         /* nonzero: drop_thr / drop_inv apply */
    uint32_t drop_thr;
    float drop_inv;      /* 1 / (1 - p) */
    uint64_t seed, offset;
    float *lse;          /* forward output / backward input, or NULL */
    int64_t ls[3];
    int splits;          /* forward split-KV parts (1 = none) */
    float *part_o, *part_lse;
    int vec_in;          /* q, k, v (and dout) tiles may use cp.async */
    int vec_out;         /* out (dq, dk, dv) rows may use 16-byte stores */
    /* backward */
    const uint16_t *dout;
    int64_t dos[3];
    uint16_t *dq, *dk, *dv;
    int64_t dqs[3], dks[3], dvs[3];
    float *delta;        /* [B*Hq*Lq] */
    float *dq_acc;       /* [B*Hq*Lq, D] f32 (fast mode) or NULL */
};

/* One sequence (batch entry) of the problem. */
struct kern__cu_seq {
    int lq, lk;       /* query rows; visible keys (after k_lens) */
    int lk_own;       /* key rows this sequence owns in the tensors */
    int64_t q0, k0;   /* first row (varlen) */
    int64_t off;      /* alignment of causal / window: lk - lq or 0 */
};

KERN__CU_DEV int64_t kern__cu_ld_idx(const void *p, int i64, int64_t i) {
    return i64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}
KERN__CU_DEV int64_t kern__cu_clamp(int64_t x, int64_t lo, int64_t hi) {
    return x < lo ? lo : x > hi ? hi : x;
}
KERN__CU_DEV kern__cu_seq kern__cu_get_seq(const kern__cu_args &a, int b) {
    kern__cu_seq s;
    if (a.cu_q) {
        int64_t q0 = kern__cu_clamp(kern__cu_ld_idx(a.cu_q, a.cu_q_i64, b), 0, a.Tq);
        int64_t q1 = kern__cu_clamp(kern__cu_ld_idx(a.cu_q, a.cu_q_i64, b + 1), q0, a.Tq);
        int64_t k0 = kern__cu_clamp(kern__cu_ld_idx(a.cu_k, a.cu_k_i64, b), 0, a.Tk);
        int64_t k1 = kern__cu_clamp(kern__cu_ld_idx(a.cu_k, a.cu_k_i64, b + 1), k0, a.Tk);
        s.q0 = q0;
        s.k0 = k0;
        s.lq = (int)kern__cu_clamp(q1 - q0, 0, a.Lq);
        s.lk = (int)kern__cu_clamp(k1 - k0, 0, a.Lk);
    } else {
        s.q0 = 0;
        s.k0 = 0;
        s.lq = a.Lq;
        s.lk = a.Lk;
    }
    s.lk_own = s.lk;
    if (a.klen) s.lk = (int)kern__cu_clamp(kern__cu_ld_idx(a.klen, a.klen_i64, b), 0, s.lk);
    s.off = a.causal == 2 ? (int64_t)s.lk - s.lq : 0;
    return s;
}
/* Is key j visible to query i (mask tensor aside)? */
KERN__CU_DEV bool kern__cu_visible(const kern__cu_args &a, const kern__cu_seq &s, int64_t i,
                                   int64_t j) {
    if (j >= s.lk) return false;
    if (a.causal && j > i + s.off) return false;
    if (a.window) {
        if (a.wl >= 0 && j < i + s.off - a.wl) return false;
        if (a.wr >= 0 && j > i + s.off + a.wr) return false;
    }
    return true;
}
/* Keys [*jlo, *jhi) that query rows imin..imax may see (conservative). */
KERN__CU_DEV void kern__cu_key_range(const kern__cu_args &a, const kern__cu_seq &s, int64_t imin,
                                     int64_t imax, int64_t *jlo, int64_t *jhi) {
    int64_t lo = 0, hi = s.lk;
    if (a.causal && imax + s.off + 1 < hi) hi = imax + s.off + 1;
    if (a.window) {
        if (a.wl >= 0 && imin + s.off - a.wl > lo) lo = imin + s.off - a.wl;
        if (a.wr >= 0 && imax + s.off + a.wr + 1 < hi) hi = imax + s.off + a.wr + 1;
    }
    *jlo = lo;
    *jhi = hi > lo ? hi : lo;
}
/* Query rows [*ilo, *ihi) that may see keys jmin..jmax (conservative). */
KERN__CU_DEV void kern__cu_row_range(const kern__cu_args &a, const kern__cu_seq &s, int64_t jmin,
                                     int64_t jmax, int64_t *ilo, int64_t *ihi) {
    int64_t lo = 0, hi = s.lq;
    if (jmin >= s.lk) hi = 0;
    if (a.causal && jmin - s.off > lo) lo = jmin - s.off;
    if (a.window) {
        if (a.wr >= 0 && jmin - s.off - a.wr > lo) lo = jmin - s.off - a.wr;
        if (a.wl >= 0 && jmax - s.off + a.wl + 1 < hi) hi = jmax - s.off + a.wl + 1;
    }
    *ilo = lo;
    *ihi = hi > lo ? hi : lo;
}
/* Does the key block [n0, n0+bn) need per-element masking for rows
 * imin..imax? */
KERN__CU_DEV bool kern__cu_block_needs_mask(const kern__cu_args &a, const kern__cu_seq &s,
                                            int64_t imin, int64_t imax, int64_t n0, int bn) {
    int64_t n1 = n0 + bn - 1;
    if (a.mask_kind || n1 >= s.lk) return true;
    if (a.causal && n1 > imin + s.off) return true;
    if (a.window) {
        if (a.wl >= 0 && n0 < imax + s.off - a.wl) return true;
        if (a.wr >= 0 && n1 > imin + s.off + a.wr) return true;
    }
    return false;
}
/* The attn_mask entry for (b, h, i, j): a bool (1 = attend) or an additive
 * value. */
KERN__CU_DEV bool kern__cu_mask_bool(const kern__cu_args &a, int b, int h, int64_t i, int64_t j) {
    const unsigned char *m = (const unsigned char *)a.mask;
    return m[b * a.ms[0] + h * a.ms[1] + i * a.ms[2] + j * a.ms[3]] != 0;
}
KERN__CU_DEV float kern__cu_mask_add(const kern__cu_args &a, int b, int h, int64_t i, int64_t j) {
    int64_t e = b * a.ms[0] + h * a.ms[1] + i * a.ms[2] + j * a.ms[3];
    if (a.mask_kind == 2) return ((const float *)a.mask)[e];
    if (a.mask_kind == 3) return kern__cu_h2f<false>(((const uint16_t *)a.mask)[e]);
    return kern__cu_h2f<true>(((const uint16_t *)a.mask)[e]);
}
/* The cold paths of the score loop (softcap, mask tensors, dropout) are
 * out-of-line calls with scalar arguments: inlined, their temporaries
 * competed with the ~190 accumulator registers of the hot loop (ptxas
 * reported spills); as calls they cost only when those options are on. */
#if defined(KERN_CUDA_EMULATE)
#define KERN__CU_COLD static inline
#else
#define KERN__CU_COLD static __device__ __noinline__
#endif
KERN__CU_COLD float kern__cu_score_slow(float qk, float scale, float softcap, int mask_kind,
                                        const void *mask, int64_t e) {
    float s = qk * scale;
    if (softcap > 0.f) s = softcap * tanhf(s / softcap);
    if (mask_kind == 1) {
        if (!((const unsigned char *)mask)[e]) return kern__cu_ninf();
    } else if (mask_kind == 2) {
        s += ((const float *)mask)[e];
    } else if (mask_kind == 3) {
        s += kern__cu_h2f<false>(((const uint16_t *)mask)[e]);
    } else if (mask_kind == 4) {
        s += kern__cu_h2f<true>(((const uint16_t *)mask)[e]);
    }
    return s * KERN__CU_LOG2E;
}
/* Pre-softmax score in log2 units for an accumulated q.k (visible key):
 * scale, softcap, additive mask; -inf for a masked-out bool entry. */
KERN__CU_DEV float kern__cu_score(const kern__cu_args &a, float qk, int b, int h, int64_t i,
                                  int64_t j) {
    const int64_t e = a.mask_kind ? b * a.ms[0] + h * a.ms[1] + i * a.ms[2] + j * a.ms[3] : 0;
    return kern__cu_score_slow(qk, a.scale, a.softcap, a.mask_kind, a.mask, e);
}
KERN__CU_COLD bool kern__cu_keep_idx(uint64_t seed, uint64_t offset, uint64_t idx, uint32_t thr) {
    return kern_dropout_keep(seed, offset, idx, thr) != 0;
}
KERN__CU_DEV bool kern__cu_keep(const kern__cu_args &a, int b, int h, int64_t i, int64_t j) {
    uint64_t idx = (((uint64_t)b * (uint64_t)a.Hq + (uint64_t)h) * (uint64_t)a.Lq + (uint64_t)i) *
                       (uint64_t)a.Lk +
                   (uint64_t)j;
    return kern__cu_keep_idx(a.seed, a.offset, idx, a.drop_thr);
}

/* Loads rows [0, ROWS) x columns [0, ncols) of a tile into shared memory
 * (row pitch HD + 8 elements, so the 8 row addresses of an ldmatrix fall
 * in distinct bank groups), zero-filling columns >= ncols and rows for
 * which rowptr(r) is NULL. vec: 16-byte cp.async (the caller commits and
 * waits); otherwise element-wise loads. */
template <int HD, int ROWS, int NT, class F>
KERN__CU_DEV void kern__cu_load_tile(uint16_t *sm, F rowptr, int ncols, int vec, int tid) {
    const int C = HD / 8;
    for (int idx = tid; idx < ROWS * C; idx += NT) {
        int r = idx / C, c = idx % C;
        uint16_t *dst = sm + r * (HD + 8) + c * 8;
        const uint16_t *src = rowptr(r);
        int n = src ? ncols - c * 8 : 0;
        n = n < 0 ? 0 : n > 8 ? 8 : n;
        if (n == 0) {
            kern__cu_u4 z;
            z.x = z.y = z.z = z.w = 0;
            *(kern__cu_u4 *)dst = z;
        } else if (vec) {
            kern__cu_cp16(dst, src + c * 8, n * 2);
        } else {
            uint16_t t[8];
            KERN__CU_UNROLL
            for (int e = 0; e < 8; e++) t[e] = e < n ? src[c * 8 + e] : (uint16_t)0;
            kern__cu_u4 z;
            z.x = (uint32_t)t[0] | ((uint32_t)t[1] << 16);
            z.y = (uint32_t)t[2] | ((uint32_t)t[3] << 16);
            z.z = (uint32_t)t[4] | ((uint32_t)t[5] << 16);
            z.w = (uint32_t)t[6] | ((uint32_t)t[7] << 16);
            *(kern__cu_u4 *)dst = z;
        }
    }
}
/* kern__cu_load_tile for ROWS whole rows of HD columns, every row present
 * and 16-byte aligned: a thread's chunks sit NT / C rows apart in one
 * column, so one row pointer and one step address them (a few integer
 * instructions per copy against several dozen in the general loop, which
 * recomputes row, column, pointer and bounds for every chunk). */
template <int HD, int ROWS, int NT> struct kern__cu_rows16 {
    enum { C = HD / 8, OK = NT % C == 0 && (ROWS * C) % NT == 0 };
};
/* The short path applies to this problem's tiles (whole blocks aside). */
template <int HD, int ROWS, int NT> KERN__CU_DEV bool kern__cu_rows16_ok(const kern__cu_args &a) {
    return kern__cu_rows16<HD, ROWS, NT>::OK && a.vec_in && a.D == HD && a.Dv == HD;
}
template <int HD, int ROWS, int NT>
KERN__CU_DEV void kern__cu_load_rows16(uint16_t *sm, const uint16_t *g, int64_t rs, int tid) {
    enum { C = HD / 8, RS = NT / C, IT = ROWS * C / NT };
    const int r = tid / C, c = tid % C;
    uint16_t *d = sm + r * (HD + 8) + c * 8;
    const uint16_t *src = g + r * rs + c * 8;
    KERN__CU_UNROLL
    for (int i = 0; i < IT; i++) kern__cu_cp16(d + i * RS * (HD + 8), src + i * RS * rs, 16);
}
/* Stores rows [0, nrows) of a shared tile (pitch HD + 8) to global rows
 * rowptr(r) (NULL = skip), columns [0, ncols), by the threads
 * [0, nthreads) of `part`. */
template <int HD, class F>
KERN__CU_DEV void kern__cu_store_tile(const uint16_t *sm, int nrows, F rowptr, int ncols, int vec,
                                      int part, int nthreads) {
    const int C = HD / 8;
    for (int idx = part; idx < nrows * C; idx += nthreads) {
        int r = idx / C, c = idx % C;
        uint16_t *dst = rowptr(r);
        int n = ncols - c * 8;
        if (!dst || n <= 0) continue;
        const uint16_t *src = sm + r * (HD + 8) + c * 8;
        if (vec && n >= 8) {
            *(kern__cu_u4 *)(dst + c * 8) = *(const kern__cu_u4 *)src;
        } else {
            n = n > 8 ? 8 : n;
            for (int e = 0; e < n; e++) dst[c * 8 + e] = src[e];
        }
    }
}

/* --------------------------------------------------------------- forward
 * One program (block) per BM packed query rows of one (batch, kv head) and
 * one split of the key range. The rows of all G query heads that share a
 * kv head are packed (row r -> head hk*G + r / lq, query r % lq), so a
 * decode step with G heads per kv head reads K and V once. W warps; warp w
 * owns MT m-tiles of 16 rows; keys stream in blocks of BN through a
 * two-stage cp.async pipeline (block n+1 loads while block n computes).
 * Register budget per thread: O MT*HD/2 + S MT*BN/2 floats; Q fragments are
 * re-read from shared memory every key block instead of held. BN = 32
 * keeps O + S within the 255-register budget: ptxas -v (nvcc 13) reports no
 * spills for every instantiation on sm_80 and sm_90 except head dim 128
 * (48 bytes on sm_90); with BN = 64 the 128 instantiation spilled 548
 * bytes. */
template <int HD> struct kern__cu_fwd_cfg;
template <> struct kern__cu_fwd_cfg<64> { enum { W = 4, MT = 2, BN = 32 }; };
template <> struct kern__cu_fwd_cfg<96> { enum { W = 4, MT = 2, BN = 32 }; };
template <> struct kern__cu_fwd_cfg<128> { enum { W = 4, MT = 2, BN = 32 }; };
template <> struct kern__cu_fwd_cfg<256> { enum { W = 4, MT = 1, BN = 32 }; };

template <int HD> static size_t kern__cu_fwd_smem(void) {
    typedef kern__cu_fwd_cfg<HD> C;
    return (size_t)(C::W * C::MT * 16 + 4 * C::BN) * (HD + 8) * 2;
}

template <int HD, bool BF>
__global__ void __launch_bounds__(kern__cu_fwd_cfg<HD>::W * 32)
    kern__cu_sdpa_fwd(const kern__cu_args a) {
    typedef kern__cu_fwd_cfg<HD> C;
    enum { W = C::W, MT = C::MT, BN = C::BN, BM = W * MT * 16, NT = W * 32, P = HD + 8 };
    enum { NTN = BN / 8, NTD = HD / 8 };
    KERN__CU_SMEM(uint16_t, sQ);
    uint16_t *sK = sQ + BM * P; /* [2][BN][P] */
    uint16_t *sV = sK + 2 * BN * P;
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int hk = (int)blockIdx.y % a.Hkv, split = (int)blockIdx.y / a.Hkv, b = (int)blockIdx.z;
    const kern__cu_seq s = kern__cu_get_seq(a, b);
    const int64_t rows = (int64_t)a.G * s.lq;
    /* causal: the last query blocks have the most keys; start them first */
    const int64_t r0 = (int64_t)(a.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BM;
    if (r0 >= rows) return;
    const int rvalid = rows - r0 < BM ? (int)(rows - r0) : BM;
    const int64_t rl = r0 + rvalid - 1;
    int64_t imin = 0, imax = s.lq - 1;
    if (r0 / s.lq == rl / s.lq) {
        imin = r0 % s.lq;
        imax = rl % s.lq;
    }
    int64_t jlo, jhi;
    kern__cu_key_range(a, s, imin, imax, &jlo, &jhi);
    int nb_lo = (int)(jlo / BN), nb_hi = jhi > jlo ? (int)((jhi + BN - 1) / BN) : nb_lo;
    {
        int per = (nb_hi - nb_lo + a.splits - 1) / a.splits;
        int lo = nb_lo + split * per, hi = lo + per;
        nb_lo = lo < nb_hi ? lo : nb_hi;
        nb_hi = hi < nb_hi ? hi : nb_hi;
    }
    /* the rows this thread owns in the accumulator fragments */
    int row_h[MT][2];
    int row_i[MT][2]; /* L < 2^31 (checked on the host) */
    bool row_ok[MT][2];
    KERN__CU_UNROLL
    for (int mt = 0; mt < MT; mt++)
        KERN__CU_UNROLL
        for (int hf = 0; hf < 2; hf++) {
            int rloc = warp * MT * 16 + mt * 16 + (lane >> 2) + hf * 8;
            int64_t rr = r0 + rloc;
            row_ok[mt][hf] = rloc < rvalid;
            if (!row_ok[mt][hf]) rr = r0;
            row_h[mt][hf] = hk * a.G + (int)(rr / s.lq);
            row_i[mt][hf] = (int)(rr % s.lq);
        }
    const int wrow0 = warp * MT * 16;
    int mt_act = (rvalid - wrow0 + 15) / 16; /* m-tiles of this warp with rows */
    mt_act = mt_act < 0 ? 0 : mt_act > MT ? MT : mt_act;

    const uint16_t *kbase = a.k + b * a.ks[0] + (int64_t)hk * a.ks[1] + s.k0 * a.ks[2];
    const uint16_t *vbase = a.v + b * a.vs[0] + (int64_t)hk * a.vs[1] + s.k0 * a.vs[2];
    kern__cu_load_tile<HD, BM, NT>(
        sQ,
        [&](int r) -> const uint16_t * {
            if (r >= rvalid) return nullptr;
            int64_t rr = r0 + r;
            int h = hk * a.G + (int)(rr / s.lq);
            return a.q + b * a.qs[0] + (int64_t)h * a.qs[1] + (s.q0 + rr % s.lq) * a.qs[2];
        },
        a.D, a.vec_in, tid);
    /* whole key blocks of full-width aligned rows take the short path */
    const bool kv_rows16 = kern__cu_rows16_ok<HD, BN, NT>(a);
    auto load_kv = [&](int nb, int st) {
        int64_t n0 = (int64_t)nb * BN;
        if (kv_rows16 && n0 + BN <= s.lk) {
            kern__cu_load_rows16<HD, BN, NT>(sK + st * BN * P, kbase + n0 * a.ks[2], a.ks[2], tid);
            kern__cu_load_rows16<HD, BN, NT>(sV + st * BN * P, vbase + n0 * a.vs[2], a.vs[2], tid);
            return;
        }
        kern__cu_load_tile<HD, BN, NT>(
            sK + st * BN * P,
            [&](int r) -> const uint16_t * {
                return n0 + r < s.lk ? kbase + (n0 + r) * a.ks[2] : nullptr;
            },
            a.D, a.vec_in, tid);
        kern__cu_load_tile<HD, BN, NT>(
            sV + st * BN * P,
            [&](int r) -> const uint16_t * {
                return n0 + r < s.lk ? vbase + (n0 + r) * a.vs[2] : nullptr;
            },
            a.Dv, a.vec_in, tid);
    };
    if (nb_lo < nb_hi) load_kv(nb_lo, 0);
    kern__cu_cp_commit();

    float o[MT][NTD][4];
    float m[MT][2], l[MT][2];
    KERN__CU_UNROLL
    for (int mt = 0; mt < MT; mt++) {
        KERN__CU_UNROLL
        for (int nt = 0; nt < NTD; nt++)
            KERN__CU_UNROLL
            for (int e = 0; e < 4; e++) o[mt][nt][e] = 0.f;
        KERN__CU_UNROLL
        for (int hf = 0; hf < 2; hf++) {
            m[mt][hf] = kern__cu_ninf();
            l[mt][hf] = 0.f;
        }
    }
    const int ksteps = (a.D + 15) / 16, dsteps = (a.Dv + 15) / 16;

    for (int nb = nb_lo; nb < nb_hi; nb++) {
        const int st = (nb - nb_lo) & 1;
        if (nb + 1 < nb_hi) {
            load_kv(nb + 1, st ^ 1);
            kern__cu_cp_commit();
            kern__cu_cp_wait<1>();
        } else {
            kern__cu_cp_wait<0>();
        }
        __syncthreads();
        const uint16_t *cK = sK + st * BN * P, *cV = sV + st * BN * P;
        const int64_t n0 = (int64_t)nb * BN;
        if (mt_act > 0) {
            const bool need = kern__cu_block_needs_mask(a, s, imin, imax, n0, BN);
            float sc[MT][NTN][4];
KERN__CU_UNROLL
            for (int mt = 0; mt < MT; mt++)
KERN__CU_UNROLL
                for (int nt = 0; nt < NTN; nt++)
KERN__CU_UNROLL
                    for (int e = 0; e < 4; e++) sc[mt][nt][e] = 0.f;
            /* S = Q K^T */
KERN__CU_UNROLL
            for (int ks = 0; ks < HD / 16; ks++) {
                if (ks >= ksteps) break;
                uint32_t qa[MT][4];
KERN__CU_UNROLL
                for (int mt = 0; mt < MT; mt++)
                    if (mt < mt_act)
                        kern__cu_ldsm(qa[mt], sQ + (wrow0 + mt * 16 + (lane & 15)) * P + ks * 16 +
                                                  (lane >> 4) * 8);
KERN__CU_UNROLL
                for (int np = 0; np < BN / 16; np++) {
                    uint32_t kb[4];
                    kern__cu_ldsm(kb, cK + (np * 16 + (lane & 7) + (lane >> 4) * 8) * P + ks * 16 +
                                          ((lane >> 3) & 1) * 8);
KERN__CU_UNROLL
                    for (int mt = 0; mt < MT; mt++)
                        if (mt < mt_act) {
                            kern__cu_mma<BF>(sc[mt][2 * np], qa[mt], kb[0], kb[1]);
                            kern__cu_mma<BF>(sc[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
                        }
                }
            }
            /* scores in log2 units, masking. The option tests stay outside
             * the element loops: a block without masking or softcap runs a
             * straight line of multiplies (tests and out-of-line calls
             * inside the loop cost a branch, a reconvergence point and an
             * instruction fetch stall per element, measured by ncu on an
             * H200). */
            if (need || a.softcap > 0.f) {
KERN__CU_UNROLL
                for (int mt = 0; mt < MT; mt++)
KERN__CU_UNROLL
                    for (int nt = 0; nt < NTN; nt++)
KERN__CU_UNROLL
                        for (int e = 0; e < 4; e++) {
                            const int hf = e >> 1;
                            const int64_t j = n0 + nt * 8 + 2 * (lane & 3) + (e & 1);
                            float x = sc[mt][nt][e];
                            if (need)
                                x = row_ok[mt][hf] && kern__cu_visible(a, s, row_i[mt][hf], j)
                                        ? kern__cu_score(a, x, b, row_h[mt][hf], row_i[mt][hf], j)
                                        : kern__cu_ninf();
                            else
                                x = kern__cu_score(a, x, b, row_h[mt][hf], row_i[mt][hf], j);
                            sc[mt][nt][e] = x;
                        }
            } else {
KERN__CU_UNROLL
                for (int mt = 0; mt < MT; mt++)
KERN__CU_UNROLL
                    for (int nt = 0; nt < NTN; nt++)
KERN__CU_UNROLL
                        for (int e = 0; e < 4; e++) sc[mt][nt][e] *= a.scale_log2;
            }
            /* online softmax: new running max, rescale O and l, P = 2^(s - m) */
KERN__CU_UNROLL
            for (int mt = 0; mt < MT; mt++)
KERN__CU_UNROLL
                for (int hf = 0; hf < 2; hf++) {
                    float mx = m[mt][hf];
KERN__CU_UNROLL
                    for (int nt = 0; nt < NTN; nt++)
                        mx = fmaxf(mx, fmaxf(sc[mt][nt][2 * hf], sc[mt][nt][2 * hf + 1]));
                    mx = fmaxf(mx, kern__cu_shfl_xor(mx, 1));
                    mx = fmaxf(mx, kern__cu_shfl_xor(mx, 2));
                    const float base = mx == kern__cu_ninf() ? 0.f : mx;
                    const float corr = kern__cu_exp2(m[mt][hf] - base);
                    m[mt][hf] = mx;
                    float rs = 0.f;
KERN__CU_UNROLL
                    for (int nt = 0; nt < NTN; nt++)
KERN__CU_UNROLL
                        for (int e = 2 * hf; e < 2 * hf + 2; e++) {
                            float p = kern__cu_exp2(sc[mt][nt][e] - base);
                            rs += p;
                            sc[mt][nt][e] = p;
                        }
                    l[mt][hf] = l[mt][hf] * corr + rs;
KERN__CU_UNROLL
                    for (int nt = 0; nt < NTD; nt++) {
                        o[mt][nt][2 * hf] *= corr;
                        o[mt][nt][2 * hf + 1] *= corr;
                    }
                }
            /* dropout after the row sums (l counts every weight), in its
             * own loop for the reason above */
            if (a.dropout) {
KERN__CU_UNROLL
                for (int mt = 0; mt < MT; mt++)
KERN__CU_UNROLL
                    for (int nt = 0; nt < NTN; nt++)
KERN__CU_UNROLL
                        for (int e = 0; e < 4; e++) {
                            const int hf = e >> 1;
                            if (!kern__cu_keep(a, b, row_h[mt][hf], row_i[mt][hf],
                                               n0 + nt * 8 + 2 * (lane & 3) + (e & 1)))
                                sc[mt][nt][e] = 0.f;
                        }
            }
            /* O += P V (P rounded to the input dtype, the C fragment of S
             * reused as the A fragment) */
KERN__CU_UNROLL
            for (int kk = 0; kk < BN / 16; kk++) {
                uint32_t pa[MT][4];
KERN__CU_UNROLL
                for (int mt = 0; mt < MT; mt++) {
                    pa[mt][0] = kern__cu_pack2<BF>(sc[mt][2 * kk][0], sc[mt][2 * kk][1]);
                    pa[mt][1] = kern__cu_pack2<BF>(sc[mt][2 * kk][2], sc[mt][2 * kk][3]);
                    pa[mt][2] = kern__cu_pack2<BF>(sc[mt][2 * kk + 1][0], sc[mt][2 * kk + 1][1]);
                    pa[mt][3] = kern__cu_pack2<BF>(sc[mt][2 * kk + 1][2], sc[mt][2 * kk + 1][3]);
                }
KERN__CU_UNROLL
                for (int np = 0; np < HD / 16; np++) {
                    if (np >= dsteps) break;
                    uint32_t vb[4];
                    kern__cu_ldsm_t(vb, cV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P +
                                            np * 16 + (lane >> 4) * 8);
KERN__CU_UNROLL
                    for (int mt = 0; mt < MT; mt++)
                        if (mt < mt_act) {
                            kern__cu_mma<BF>(o[mt][2 * np], pa[mt], vb[0], vb[1]);
                            kern__cu_mma<BF>(o[mt][2 * np + 1], pa[mt], vb[2], vb[3]);
                        }
                }
            }
        }
        __syncthreads(); /* stage st is refilled by the next iteration */
    }
    kern__cu_cp_wait<0>(); /* an empty key range leaves the Q copies pending */
    __syncthreads();

    /* epilogue: normalize, write O (through shared memory) and lse */
    float inv[MT][2], lsev[MT][2];
KERN__CU_UNROLL
    for (int mt = 0; mt < MT; mt++)
KERN__CU_UNROLL
        for (int hf = 0; hf < 2; hf++) {
            float sum = l[mt][hf];
            sum += kern__cu_shfl_xor(sum, 1);
            sum += kern__cu_shfl_xor(sum, 2);
            inv[mt][hf] = sum > 0.f ? (a.dropout ? a.drop_inv : 1.f) / sum : 0.f;
            lsev[mt][hf] = sum > 0.f ? (m[mt][hf] + log2f(sum)) * KERN__CU_LN2 : kern__cu_ninf();
        }
    if (a.splits > 1) {
        const int64_t nrow = (int64_t)a.B * a.Hq * a.Lq;
        KERN__CU_UNROLL
        for (int mt = 0; mt < MT; mt++)
            KERN__CU_UNROLL
            for (int hf = 0; hf < 2; hf++) {
                if (!row_ok[mt][hf]) continue;
                int64_t row = split * nrow + ((int64_t)b * a.Hq + row_h[mt][hf]) * a.Lq + row_i[mt][hf];
                if ((lane & 3) == 0) a.part_lse[row] = lsev[mt][hf];
                KERN__CU_UNROLL
                for (int nt = 0; nt < NTD; nt++)
                    KERN__CU_UNROLL
                    for (int e = 0; e < 2; e++) {
                        int d = nt * 8 + 2 * (lane & 3) + e;
                        if (d < a.Dv) a.part_o[row * a.Dv + d] = o[mt][nt][2 * hf + e] * inv[mt][hf];
                    }
            }
        return;
    }
KERN__CU_UNROLL
    for (int mt = 0; mt < MT; mt++)
KERN__CU_UNROLL
        for (int hf = 0; hf < 2; hf++) {
            const int rloc = wrow0 + mt * 16 + (lane >> 2) + hf * 8;
KERN__CU_UNROLL
            for (int nt = 0; nt < NTD; nt++)
                *(uint32_t *)(sQ + rloc * P + nt * 8 + 2 * (lane & 3)) = kern__cu_pack2<BF>(
                    o[mt][nt][2 * hf] * inv[mt][hf], o[mt][nt][2 * hf + 1] * inv[mt][hf]);
            if (a.lse && row_ok[mt][hf] && (lane & 3) == 0)
                a.lse[b * a.ls[0] + (int64_t)row_h[mt][hf] * a.ls[1] +
                      (s.q0 + row_i[mt][hf]) * a.ls[2]] = lsev[mt][hf];
        }
    kern__cu_syncwarp();
    kern__cu_store_tile<HD>(
        sQ + wrow0 * P, MT * 16,
        [&](int r) -> uint16_t * {
            int64_t rr = r0 + wrow0 + r;
            if (rr >= rows) return nullptr;
            int h = hk * a.G + (int)(rr / s.lq);
            return a.o + b * a.os[0] + (int64_t)h * a.os[1] + (s.q0 + rr % s.lq) * a.os[2];
        },
        a.Dv, a.vec_out, lane, 32);
}

/* Merges the split-KV partial results: one warp per query row. */
template <bool BF> __global__ void __launch_bounds__(128) kern__cu_sdpa_combine(const kern__cu_args a) {
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int64_t nrow = (int64_t)a.B * a.Hq * a.Lq;
    const int64_t row = (int64_t)blockIdx.x * 4 + warp;
    if (row >= nrow) return;
    const int64_t i = row % a.Lq;
    const int h = (int)((row / a.Lq) % a.Hq), b = (int)(row / ((int64_t)a.Lq * a.Hq));
    const kern__cu_seq s = kern__cu_get_seq(a, b);
    if (i >= s.lq) return;
    uint16_t *out = a.o + b * a.os[0] + (int64_t)h * a.os[1] + (s.q0 + i) * a.os[2];
    float mx = kern__cu_ninf();
    for (int sp = 0; sp < a.splits; sp++) mx = fmaxf(mx, a.part_lse[sp * nrow + row]);
    float lsev = kern__cu_ninf();
    if (mx == kern__cu_ninf()) {
        for (int d = lane; d < a.Dv; d += 32) out[d] = 0;
    } else {
        float wsum = 0.f;
        for (int sp = 0; sp < a.splits; sp++) wsum += expf(a.part_lse[sp * nrow + row] - mx);
        for (int d = lane; d < a.Dv; d += 32) {
            float acc = 0.f;
            for (int sp = 0; sp < a.splits; sp++) {
                float w = expf(a.part_lse[sp * nrow + row] - mx);
                if (w > 0.f) acc += w * a.part_o[(sp * nrow + row) * a.Dv + d];
            }
            out[d] = kern__cu_f2h<BF>(acc / wsum);
        }
        lsev = mx + logf(wsum);
    }
    if (a.lse && lane == 0) a.lse[b * a.ls[0] + (int64_t)h * a.ls[1] + (s.q0 + i) * a.ls[2]] = lsev;
}

/* -------------------------------------------------------------- backward
 * FlashAttention-2: delta_i = sum_d dout_id * out_id; for every key block
 * one program recomputes S^T = K Q^T and P^T = exp(S^T - lse) for each query
 * block of each head of its GQA group, and accumulates
 *   dV += (P o Z)^T dO,  dP^T = V dO^T,  dS^T = P^T o (dP^T o Z - delta),
 *   dK += dS^T Q (times the scale, and the softcap derivative),
 * where Z is the dropout keep mask times 1/(1-p). Warp w owns 16 keys, so
 * P^T and dS^T never leave registers for dV and dK. dQ = dS K either goes
 * through shared memory and f32 atomicAdd (fast mode) or is computed by a
 * second kernel per query block (deterministic mode). */

/* delta for every query row; zeroes the f32 dq accumulator (fast mode). */
template <bool BF> __global__ void __launch_bounds__(128) kern__cu_sdpa_bwd_pre(const kern__cu_args a) {
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int64_t nrow = (int64_t)a.B * a.Hq * a.Lq;
    const int64_t row = (int64_t)blockIdx.x * 4 + warp;
    if (row >= nrow) return;
    const int64_t i = row % a.Lq;
    const int h = (int)((row / a.Lq) % a.Hq), b = (int)(row / ((int64_t)a.Lq * a.Hq));
    const kern__cu_seq s = kern__cu_get_seq(a, b);
    if (i >= s.lq) return;
    const uint16_t *o = a.o + b * a.os[0] + (int64_t)h * a.os[1] + (s.q0 + i) * a.os[2];
    const uint16_t *d = a.dout + b * a.dos[0] + (int64_t)h * a.dos[1] + (s.q0 + i) * a.dos[2];
    float acc = 0.f;
    for (int c = lane; c < a.Dv; c += 32) acc += kern__cu_h2f<BF>(o[c]) * kern__cu_h2f<BF>(d[c]);
    for (int m = 16; m >= 1; m >>= 1) acc += kern__cu_shfl_xor(acc, m);
    if (lane == 0) a.delta[row] = acc;
    if (a.dq_acc)
        for (int c = lane; c < a.D; c += 32) a.dq_acc[row * a.D + c] = 0.f;
}

template <int HD> struct kern__cu_bwd_cfg;
/* W warps x 16 keys = BN; BM query rows per step; ST stages of Q/dO;
 * ACC: dK/dV accumulators in shared memory (f32) instead of registers. */
template <> struct kern__cu_bwd_cfg<64> { enum { W = 4, BM = 64, ST = 2, ACC = 0 }; };
template <> struct kern__cu_bwd_cfg<96> { enum { W = 4, BM = 32, ST = 2, ACC = 0 }; };
template <> struct kern__cu_bwd_cfg<128> { enum { W = 4, BM = 32, ST = 2, ACC = 0 }; };
template <> struct kern__cu_bwd_cfg<256> { enum { W = 2, BM = 32, ST = 1, ACC = 1 }; };

template <int HD> static size_t kern__cu_bwd_smem(void) {
    typedef kern__cu_bwd_cfg<HD> C;
    const size_t BN = C::W * 16, P = HD + 8;
    return (2 * BN * P + 2 * C::ST * C::BM * P + BN * (C::BM + 8)) * 2 + 2 * C::ST * C::BM * 4 +
           (C::ACC ? 2 * BN * HD * 4 : 0);
}

/* Score and softmax factors for one element of the backward: returns P
 * (0 when masked) and sets *gf to d(score)/d(q.k). */
KERN__CU_DEV float kern__cu_bwd_p(const kern__cu_args &a, const kern__cu_seq &s, bool need, float qk,
                                  int b, int h, int64_t i, int64_t j, float lse2, float *gf) {
    float x = qk * a.scale;
    *gf = a.scale;
    if (a.softcap > 0.f) {
        float t = tanhf(x / a.softcap);
        x = a.softcap * t;
        *gf = a.scale * (1.f - t * t);
    }
    if (need) {
        if (i >= s.lq || !kern__cu_visible(a, s, i, j)) return 0.f;
        if (a.mask_kind == 1) {
            if (!kern__cu_mask_bool(a, b, h, i, j)) return 0.f;
        } else if (a.mask_kind) {
            x += kern__cu_mask_add(a, b, h, i, j);
        }
    }
    return kern__cu_exp2(x * KERN__CU_LOG2E - lse2);
}

template <int HD, bool BF>
__global__ void __launch_bounds__(kern__cu_bwd_cfg<HD>::W * 32)
    kern__cu_sdpa_bwd(const kern__cu_args a) {
    typedef kern__cu_bwd_cfg<HD> C;
    enum { W = C::W, BM = C::BM, ST = C::ST, ACC = C::ACC, BN = W * 16, NT = W * 32, P = HD + 8 };
    enum { NTD = HD / 8, NTM = BM / 8, PS = BM + 8 };
    KERN__CU_SMEM(uint16_t, sK);
    uint16_t *sV = sK + BN * P;
    uint16_t *sQ = sV + BN * P;    /* [ST][BM][P] */
    uint16_t *sdO = sQ + ST * BM * P; /* [ST][BM][P] */
    uint16_t *sdS = sdO + ST * BM * P; /* [BN][PS]: dS^T for the dq product */
    float *sL = (float *)(sdS + BN * PS); /* [ST][BM] lse * log2(e) */
    float *sDl = sL + ST * BM;            /* [ST][BM] delta */
    float *sAcc = sDl + ST * BM;          /* ACC: [2][BN][HD] f32 dK, dV */
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int hk = (int)blockIdx.y, b = (int)blockIdx.z;
    const kern__cu_seq s = kern__cu_get_seq(a, b);
    const int64_t n0 = (int64_t)blockIdx.x * BN;
    if (n0 >= s.lk_own) return;
    int64_t ilo, ihi;
    kern__cu_row_range(a, s, n0, n0 + BN - 1, &ilo, &ihi);
    const int nqb = (int)((ihi - ilo + BM - 1) / BM);
    const int nitems = a.G * nqb;
    const bool fast_dq = a.dq_acc != nullptr;
    const int ksteps = (a.D + 15) / 16, dsteps = (a.Dv + 15) / 16;

    kern__cu_load_tile<HD, BN, NT>(
        sK, [&](int r) -> const uint16_t * {
            return n0 + r < s.lk ? a.k + b * a.ks[0] + (int64_t)hk * a.ks[1] + (s.k0 + n0 + r) * a.ks[2]
                                 : nullptr;
        },
        a.D, a.vec_in, tid);
    kern__cu_load_tile<HD, BN, NT>(
        sV, [&](int r) -> const uint16_t * {
            return n0 + r < s.lk ? a.v + b * a.vs[0] + (int64_t)hk * a.vs[1] + (s.k0 + n0 + r) * a.vs[2]
                                 : nullptr;
        },
        a.Dv, a.vec_in, tid);
    const bool q_rows16 = kern__cu_rows16_ok<HD, BM, NT>(a);
    auto load_item = [&](int t, int st) {
        const int h = hk * a.G + t / nqb;
        const int64_t i0 = ilo + (int64_t)(t % nqb) * BM;
        if (q_rows16 && i0 + BM <= s.lq) {
            kern__cu_load_rows16<HD, BM, NT>(
                sQ + st * BM * P, a.q + b * a.qs[0] + (int64_t)h * a.qs[1] + (s.q0 + i0) * a.qs[2], a.qs[2], tid);
            kern__cu_load_rows16<HD, BM, NT>(
                sdO + st * BM * P, a.dout + b * a.dos[0] + (int64_t)h * a.dos[1] + (s.q0 + i0) * a.dos[2],
                a.dos[2], tid);
        } else {
        kern__cu_load_tile<HD, BM, NT>(
            sQ + st * BM * P, [&](int r) -> const uint16_t * {
                return i0 + r < s.lq ? a.q + b * a.qs[0] + (int64_t)h * a.qs[1] + (s.q0 + i0 + r) * a.qs[2]
                                     : nullptr;
            },
            a.D, a.vec_in, tid);
        kern__cu_load_tile<HD, BM, NT>(
            sdO + st * BM * P, [&](int r) -> const uint16_t * {
                return i0 + r < s.lq
                           ? a.dout + b * a.dos[0] + (int64_t)h * a.dos[1] + (s.q0 + i0 + r) * a.dos[2]
                           : nullptr;
            },
            a.Dv, a.vec_in, tid);
        }
        for (int r = tid; r < BM; r += NT) {
            float l2 = INFINITY, dl = 0.f; /* rows past the end: P = 0 */
            if (i0 + r < s.lq) {
                float lse = a.lse[b * a.ls[0] + (int64_t)h * a.ls[1] + (s.q0 + i0 + r) * a.ls[2]];
                l2 = lse == kern__cu_ninf() ? INFINITY : lse * KERN__CU_LOG2E;
                dl = a.delta[((int64_t)b * a.Hq + h) * a.Lq + i0 + r];
            }
            sL[st * BM + r] = l2;
            sDl[st * BM + r] = dl;
        }
    };
    if (ACC)
        for (int x = tid; x < 2 * BN * HD; x += NT) sAcc[x] = 0.f;
    if (nitems > 0) load_item(0, 0);
    kern__cu_cp_commit();

    float dK[ACC ? 1 : NTD][4], dV[ACC ? 1 : NTD][4];
    KERN__CU_UNROLL
    for (int nt = 0; nt < (ACC ? 1 : NTD); nt++)
        KERN__CU_UNROLL
        for (int e = 0; e < 4; e++) dK[nt][e] = dV[nt][e] = 0.f;
    const int kw = warp * 16; /* this warp's keys within the block */

    for (int t = 0; t < nitems; t++) {
        const int st = ST == 2 ? (t & 1) : 0;
        if (ST == 2 && t + 1 < nitems) {
            load_item(t + 1, st ^ 1);
            kern__cu_cp_commit();
            kern__cu_cp_wait<1>();
        } else {
            if (ST == 1 && t > 0) { /* single stage: load this step's tiles now */
                load_item(t, 0);
                kern__cu_cp_commit();
            }
            kern__cu_cp_wait<0>();
        }
        __syncthreads();
        const int h = hk * a.G + t / nqb;
        const int64_t i0 = ilo + (int64_t)(t % nqb) * BM;
        const uint16_t *cQ = sQ + st * BM * P, *cdO = sdO + st * BM * P;
        const float *cL = sL + st * BM, *cD = sDl + st * BM;
        const bool need = i0 + BM > s.lq ||
                          kern__cu_block_needs_mask(a, s, i0, i0 + BM - 1, n0, BN);
        /* S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys */
        float sT[NTM][4], dpT[NTM][4];
KERN__CU_UNROLL
        for (int nt = 0; nt < NTM; nt++)
KERN__CU_UNROLL
            for (int e = 0; e < 4; e++) sT[nt][e] = dpT[nt][e] = 0.f;
KERN__CU_UNROLL
        for (int ks = 0; ks < HD / 16; ks++) {
            if (ks >= ksteps) break;
            uint32_t ka[4];
            kern__cu_ldsm(ka, sK + (kw + (lane & 15)) * P + ks * 16 + (lane >> 4) * 8);
KERN__CU_UNROLL
            for (int np = 0; np < BM / 16; np++) {
                uint32_t qb[4];
                kern__cu_ldsm(qb, cQ + (np * 16 + (lane & 7) + (lane >> 4) * 8) * P + ks * 16 +
                                      ((lane >> 3) & 1) * 8);
                kern__cu_mma<BF>(sT[2 * np], ka, qb[0], qb[1]);
                kern__cu_mma<BF>(sT[2 * np + 1], ka, qb[2], qb[3]);
            }
        }
KERN__CU_UNROLL
        for (int ks = 0; ks < HD / 16; ks++) {
            if (ks >= dsteps) break;
            uint32_t va[4];
            kern__cu_ldsm(va, sV + (kw + (lane & 15)) * P + ks * 16 + (lane >> 4) * 8);
KERN__CU_UNROLL
            for (int np = 0; np < BM / 16; np++) {
                uint32_t ob[4];
                kern__cu_ldsm(ob, cdO + (np * 16 + (lane & 7) + (lane >> 4) * 8) * P + ks * 16 +
                                      ((lane >> 3) & 1) * 8);
                kern__cu_mma<BF>(dpT[2 * np], va, ob[0], ob[1]);
                kern__cu_mma<BF>(dpT[2 * np + 1], va, ob[2], ob[3]);
            }
        }
        /* P^T, dropout, dS^T (in place: sT <- P o Z, dpT <- dS^T). Without
         * masking, softcap or dropout a straight line (see the forward's
         * scores); rows past the end have lse2 = inf, so P = 0 there too. */
        if (!need && !(a.softcap > 0.f) && !a.dropout) {
KERN__CU_UNROLL
            for (int nt = 0; nt < NTM; nt++)
KERN__CU_UNROLL
                for (int e = 0; e < 4; e++) {
                    const int r = nt * 8 + 2 * (lane & 3) + (e & 1);
                    const float p = kern__cu_exp2(sT[nt][e] * a.scale_log2 - cL[r]);
                    dpT[nt][e] = p * (dpT[nt][e] - cD[r]) * a.scale;
                    sT[nt][e] = p;
                }
        } else
KERN__CU_UNROLL
        for (int nt = 0; nt < NTM; nt++)
KERN__CU_UNROLL
            for (int e = 0; e < 4; e++) {
                const int r = nt * 8 + 2 * (lane & 3) + (e & 1);
                const int64_t j = n0 + kw + (lane >> 2) + (e >> 1) * 8;
                float gf;
                float p = kern__cu_bwd_p(a, s, need, sT[nt][e], b, h, i0 + r, j, cL[r], &gf);
                float z = 1.f;
                if (a.dropout) z = kern__cu_keep(a, b, h, i0 + r, j) ? a.drop_inv : 0.f;
                dpT[nt][e] = p * (dpT[nt][e] * z - cD[r]) * gf;
                sT[nt][e] = p * z;
            }
        uint32_t pa[BM / 16][4], da[BM / 16][4];
KERN__CU_UNROLL
        for (int kk = 0; kk < BM / 16; kk++) {
            pa[kk][0] = kern__cu_pack2<BF>(sT[2 * kk][0], sT[2 * kk][1]);
            pa[kk][1] = kern__cu_pack2<BF>(sT[2 * kk][2], sT[2 * kk][3]);
            pa[kk][2] = kern__cu_pack2<BF>(sT[2 * kk + 1][0], sT[2 * kk + 1][1]);
            pa[kk][3] = kern__cu_pack2<BF>(sT[2 * kk + 1][2], sT[2 * kk + 1][3]);
            da[kk][0] = kern__cu_pack2<BF>(dpT[2 * kk][0], dpT[2 * kk][1]);
            da[kk][1] = kern__cu_pack2<BF>(dpT[2 * kk][2], dpT[2 * kk][3]);
            da[kk][2] = kern__cu_pack2<BF>(dpT[2 * kk + 1][0], dpT[2 * kk + 1][1]);
            da[kk][3] = kern__cu_pack2<BF>(dpT[2 * kk + 1][2], dpT[2 * kk + 1][3]);
        }
        if (fast_dq) { /* dS^T to shared memory for dQ = dS K */
KERN__CU_UNROLL
            for (int kk = 0; kk < BM / 16; kk++)
KERN__CU_UNROLL
                for (int x = 0; x < 4; x++) {
                    const int key = kw + (lane >> 2) + (x & 1) * 8;
                    const int r = kk * 16 + (x >> 1) * 8 + 2 * (lane & 3);
                    *(uint32_t *)(sdS + key * PS + r) = da[kk][x];
                }
        }
        /* dV += (P o Z)^T dO and dK += dS^T Q */
KERN__CU_UNROLL
        for (int np = 0; np < HD / 16; np++) {
            if (np < dsteps) {
                float c0[4], c1[4];
                float *g0 = ACC ? sAcc + BN * HD + (kw + (lane >> 2)) * HD + np * 16 + 2 * (lane & 3) : nullptr;
KERN__CU_UNROLL
                for (int e = 0; e < 4; e++) {
                    if (ACC) {
                        c0[e] = g0[(e >> 1) * 8 * HD + (e & 1)];
                        c1[e] = g0[(e >> 1) * 8 * HD + 8 + (e & 1)];
                    } else {
                        c0[e] = dV[ACC ? 0 : 2 * np][e];
                        c1[e] = dV[ACC ? 0 : 2 * np + 1][e];
                    }
                }
KERN__CU_UNROLL
                for (int kk = 0; kk < BM / 16; kk++) {
                    uint32_t vb[4];
                    kern__cu_ldsm_t(vb, cdO + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P +
                                            np * 16 + (lane >> 4) * 8);
                    kern__cu_mma<BF>(c0, pa[kk], vb[0], vb[1]);
                    kern__cu_mma<BF>(c1, pa[kk], vb[2], vb[3]);
                }
KERN__CU_UNROLL
                for (int e = 0; e < 4; e++) {
                    if (ACC) {
                        g0[(e >> 1) * 8 * HD + (e & 1)] = c0[e];
                        g0[(e >> 1) * 8 * HD + 8 + (e & 1)] = c1[e];
                    } else {
                        dV[ACC ? 0 : 2 * np][e] = c0[e];
                        dV[ACC ? 0 : 2 * np + 1][e] = c1[e];
                    }
                }
            }
            if (np < ksteps) {
                float c0[4], c1[4];
                float *g0 = ACC ? sAcc + (kw + (lane >> 2)) * HD + np * 16 + 2 * (lane & 3) : nullptr;
KERN__CU_UNROLL
                for (int e = 0; e < 4; e++) {
                    if (ACC) {
                        c0[e] = g0[(e >> 1) * 8 * HD + (e & 1)];
                        c1[e] = g0[(e >> 1) * 8 * HD + 8 + (e & 1)];
                    } else {
                        c0[e] = dK[ACC ? 0 : 2 * np][e];
                        c1[e] = dK[ACC ? 0 : 2 * np + 1][e];
                    }
                }
KERN__CU_UNROLL
                for (int kk = 0; kk < BM / 16; kk++) {
                    uint32_t qb[4];
                    kern__cu_ldsm_t(qb, cQ + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P +
                                            np * 16 + (lane >> 4) * 8);
                    kern__cu_mma<BF>(c0, da[kk], qb[0], qb[1]);
                    kern__cu_mma<BF>(c1, da[kk], qb[2], qb[3]);
                }
KERN__CU_UNROLL
                for (int e = 0; e < 4; e++) {
                    if (ACC) {
                        g0[(e >> 1) * 8 * HD + (e & 1)] = c0[e];
                        g0[(e >> 1) * 8 * HD + 8 + (e & 1)] = c1[e];
                    } else {
                        dK[ACC ? 0 : 2 * np][e] = c0[e];
                        dK[ACC ? 0 : 2 * np + 1][e] = c1[e];
                    }
                }
            }
        }
        if (fast_dq) { /* dQ[rows, warp's columns] += dS K, f32 atomics */
            __syncthreads();
            enum { NP = HD / 16, UP = (NP + W - 1) / W };
KERN__CU_UNROLL
            for (int u = 0; u < UP; u++) {
                const int np = warp + u * W;
                if (np >= NP || np >= ksteps) break;
                float acc[BM / 16][2][4];
KERN__CU_UNROLL
                for (int mt = 0; mt < BM / 16; mt++)
KERN__CU_UNROLL
                    for (int e = 0; e < 4; e++) acc[mt][0][e] = acc[mt][1][e] = 0.f;
KERN__CU_UNROLL
                for (int kk = 0; kk < BN / 16; kk++) {
                    uint32_t kb[4];
                    kern__cu_ldsm_t(kb, sK + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P +
                                            np * 16 + (lane >> 4) * 8);
KERN__CU_UNROLL
                    for (int mt = 0; mt < BM / 16; mt++) {
                        uint32_t dsa[4];
                        kern__cu_ldsm_t(dsa, sdS + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * PS +
                                                 mt * 16 + ((lane >> 3) & 1) * 8);
                        kern__cu_mma<BF>(acc[mt][0], dsa, kb[0], kb[1]);
                        kern__cu_mma<BF>(acc[mt][1], dsa, kb[2], kb[3]);
                    }
                }
KERN__CU_UNROLL
                for (int mt = 0; mt < BM / 16; mt++)
KERN__CU_UNROLL
                    for (int e = 0; e < 4; e++) {
                        const int64_t i = i0 + mt * 16 + (lane >> 2) + (e >> 1) * 8;
                        if (i >= s.lq) continue;
                        float *dst = a.dq_acc + (((int64_t)b * a.Hq + h) * a.Lq + i) * a.D;
KERN__CU_UNROLL
                        for (int hh = 0; hh < 2; hh++) {
                            const int d = np * 16 + hh * 8 + 2 * (lane & 3) + (e & 1);
                            if (d < a.D) atomicAdd(dst + d, acc[mt][hh][e]);
                        }
                    }
            }
        }
        __syncthreads(); /* buffers of this step are refilled next */
    }
    kern__cu_cp_wait<0>();
    __syncthreads();
    /* dK, dV (this warp's 16 keys) through shared memory to global */
KERN__CU_UNROLL
    for (int nt = 0; nt < NTD; nt++)
KERN__CU_UNROLL
        for (int hf = 0; hf < 2; hf++) {
            const int key = kw + (lane >> 2) + hf * 8, c = nt * 8 + 2 * (lane & 3);
            float k0, k1, v0, v1;
            if (ACC) {
                k0 = sAcc[key * HD + c];
                k1 = sAcc[key * HD + c + 1];
                v0 = sAcc[BN * HD + key * HD + c];
                v1 = sAcc[BN * HD + key * HD + c + 1];
            } else {
                k0 = dK[ACC ? 0 : nt][2 * hf];
                k1 = dK[ACC ? 0 : nt][2 * hf + 1];
                v0 = dV[ACC ? 0 : nt][2 * hf];
                v1 = dV[ACC ? 0 : nt][2 * hf + 1];
            }
            *(uint32_t *)(sK + key * P + c) = kern__cu_pack2<BF>(k0, k1);
            *(uint32_t *)(sV + key * P + c) = kern__cu_pack2<BF>(v0, v1);
        }
    kern__cu_syncwarp();
    kern__cu_store_tile<HD>(
        sK + kw * P, 16, [&](int r) -> uint16_t * {
            int64_t j = n0 + kw + r;
            return j < s.lk_own ? a.dk + b * a.dks[0] + (int64_t)hk * a.dks[1] + (s.k0 + j) * a.dks[2]
                                : nullptr;
        },
        a.D, a.vec_out, lane, 32);
    kern__cu_store_tile<HD>(
        sV + kw * P, 16, [&](int r) -> uint16_t * {
            int64_t j = n0 + kw + r;
            return j < s.lk_own ? a.dv + b * a.dvs[0] + (int64_t)hk * a.dvs[1] + (s.k0 + j) * a.dvs[2]
                                : nullptr;
        },
        a.Dv, a.vec_out, lane, 32);
}

/* Deterministic dQ: one program per BM packed query rows (as the forward),
 * streaming over key blocks: S = Q K^T, P = exp(S - lse), dP = dO V^T,
 * dS = P o (dP o Z - delta), dQ += dS K in registers; no atomics. */
template <int HD> struct kern__cu_dq_cfg;
template <> struct kern__cu_dq_cfg<64> { enum { W = 4, BN = 64 }; };
template <> struct kern__cu_dq_cfg<96> { enum { W = 4, BN = 64 }; };
template <> struct kern__cu_dq_cfg<128> { enum { W = 4, BN = 64 }; };
template <> struct kern__cu_dq_cfg<256> { enum { W = 4, BN = 32 }; };

template <int HD> static size_t kern__cu_dq_smem(void) {
    typedef kern__cu_dq_cfg<HD> C;
    return (size_t)(2 * C::W * 16 + 4 * C::BN) * (HD + 8) * 2;
}

template <int HD, bool BF>
__global__ void __launch_bounds__(kern__cu_dq_cfg<HD>::W * 32)
    kern__cu_sdpa_bwd_dq(const kern__cu_args a) {
    typedef kern__cu_dq_cfg<HD> C;
    enum { W = C::W, BN = C::BN, BM = W * 16, NT = W * 32, P = HD + 8 };
    enum { NTN = BN / 8, NTD = HD / 8 };
    KERN__CU_SMEM(uint16_t, sQ);
    uint16_t *sdO = sQ + BM * P;
    uint16_t *sK = sdO + BM * P; /* [2][BN][P] */
    uint16_t *sV = sK + 2 * BN * P;
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int hk = (int)blockIdx.y, b = (int)blockIdx.z;
    const kern__cu_seq s = kern__cu_get_seq(a, b);
    const int64_t rows = (int64_t)a.G * s.lq;
    /* causal: the last query blocks have the most keys; start them first */
    const int64_t r0 = (int64_t)(a.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BM;
    if (r0 >= rows) return;
    const int rvalid = rows - r0 < BM ? (int)(rows - r0) : BM;
    const int64_t rl = r0 + rvalid - 1;
    int64_t imin = 0, imax = s.lq - 1;
    if (r0 / s.lq == rl / s.lq) {
        imin = r0 % s.lq;
        imax = rl % s.lq;
    }
    int64_t jlo, jhi;
    kern__cu_key_range(a, s, imin, imax, &jlo, &jhi);
    const int nb_lo = (int)(jlo / BN), nb_hi = jhi > jlo ? (int)((jhi + BN - 1) / BN) : nb_lo;
    int row_h[2];
    int row_i[2];
    bool row_ok[2];
    float lse2[2], dlt[2];
    KERN__CU_UNROLL
    for (int hf = 0; hf < 2; hf++) {
        int rloc = warp * 16 + (lane >> 2) + hf * 8;
        int64_t rr = r0 + rloc;
        row_ok[hf] = rloc < rvalid;
        if (!row_ok[hf]) rr = r0;
        row_h[hf] = hk * a.G + (int)(rr / s.lq);
        row_i[hf] = (int)(rr % s.lq);
        float lse = a.lse[b * a.ls[0] + (int64_t)row_h[hf] * a.ls[1] + (s.q0 + row_i[hf]) * a.ls[2]];
        lse2[hf] = !row_ok[hf] || lse == kern__cu_ninf() ? INFINITY : lse * KERN__CU_LOG2E;
        dlt[hf] = a.delta[((int64_t)b * a.Hq + row_h[hf]) * a.Lq + row_i[hf]];
    }
    const bool active = warp * 16 < rvalid;
    const int ksteps = (a.D + 15) / 16, dsteps = (a.Dv + 15) / 16;

    auto qrow = [&](const uint16_t *base, const int64_t *xs) {
        return [&, base, xs](int r) -> const uint16_t * {
            if (r >= rvalid) return nullptr;
            int64_t rr = r0 + r;
            int h = hk * a.G + (int)(rr / s.lq);
            return base + b * xs[0] + (int64_t)h * xs[1] + (s.q0 + rr % s.lq) * xs[2];
        };
    };
    kern__cu_load_tile<HD, BM, NT>(sQ, qrow(a.q, a.qs), a.D, a.vec_in, tid);
    kern__cu_load_tile<HD, BM, NT>(sdO, qrow(a.dout, a.dos), a.Dv, a.vec_in, tid);
    const uint16_t *kbase = a.k + b * a.ks[0] + (int64_t)hk * a.ks[1] + s.k0 * a.ks[2];
    const uint16_t *vbase = a.v + b * a.vs[0] + (int64_t)hk * a.vs[1] + s.k0 * a.vs[2];
    const bool kv_rows16 = kern__cu_rows16_ok<HD, BN, NT>(a);
    auto load_kv = [&](int nb, int st) {
        int64_t n0 = (int64_t)nb * BN;
        if (kv_rows16 && n0 + BN <= s.lk) {
            kern__cu_load_rows16<HD, BN, NT>(sK + st * BN * P, kbase + n0 * a.ks[2], a.ks[2], tid);
            kern__cu_load_rows16<HD, BN, NT>(sV + st * BN * P, vbase + n0 * a.vs[2], a.vs[2], tid);
            return;
        }
        kern__cu_load_tile<HD, BN, NT>(
            sK + st * BN * P,
            [&](int r) -> const uint16_t * { return n0 + r < s.lk ? kbase + (n0 + r) * a.ks[2] : nullptr; },
            a.D, a.vec_in, tid);
        kern__cu_load_tile<HD, BN, NT>(
            sV + st * BN * P,
            [&](int r) -> const uint16_t * { return n0 + r < s.lk ? vbase + (n0 + r) * a.vs[2] : nullptr; },
            a.Dv, a.vec_in, tid);
    };
    if (nb_lo < nb_hi) load_kv(nb_lo, 0);
    kern__cu_cp_commit();

    float dq[NTD][4];
    KERN__CU_UNROLL
    for (int nt = 0; nt < NTD; nt++)
        KERN__CU_UNROLL
        for (int e = 0; e < 4; e++) dq[nt][e] = 0.f;

    for (int nb = nb_lo; nb < nb_hi; nb++) {
        const int st = (nb - nb_lo) & 1;
        if (nb + 1 < nb_hi) {
            load_kv(nb + 1, st ^ 1);
            kern__cu_cp_commit();
            kern__cu_cp_wait<1>();
        } else {
            kern__cu_cp_wait<0>();
        }
        __syncthreads();
        const uint16_t *cK = sK + st * BN * P, *cV = sV + st * BN * P;
        const int64_t n0 = (int64_t)nb * BN;
        if (active) {
            const bool need = kern__cu_block_needs_mask(a, s, imin, imax, n0, BN);
            float sc[NTN][4], dp[NTN][4];
KERN__CU_UNROLL
            for (int nt = 0; nt < NTN; nt++)
KERN__CU_UNROLL
                for (int e = 0; e < 4; e++) sc[nt][e] = dp[nt][e] = 0.f;
KERN__CU_UNROLL
            for (int ks = 0; ks < HD / 16; ks++) {
                if (ks >= ksteps) break;
                uint32_t qa[4];
                kern__cu_ldsm(qa, sQ + (warp * 16 + (lane & 15)) * P + ks * 16 + (lane >> 4) * 8);
KERN__CU_UNROLL
                for (int np = 0; np < BN / 16; np++) {
                    uint32_t kb[4];
                    kern__cu_ldsm(kb, cK + (np * 16 + (lane & 7) + (lane >> 4) * 8) * P + ks * 16 +
                                          ((lane >> 3) & 1) * 8);
                    kern__cu_mma<BF>(sc[2 * np], qa, kb[0], kb[1]);
                    kern__cu_mma<BF>(sc[2 * np + 1], qa, kb[2], kb[3]);
                }
            }
KERN__CU_UNROLL
            for (int ks = 0; ks < HD / 16; ks++) {
                if (ks >= dsteps) break;
                uint32_t oa[4];
                kern__cu_ldsm(oa, sdO + (warp * 16 + (lane & 15)) * P + ks * 16 + (lane >> 4) * 8);
KERN__CU_UNROLL
                for (int np = 0; np < BN / 16; np++) {
                    uint32_t vb[4];
                    kern__cu_ldsm(vb, cV + (np * 16 + (lane & 7) + (lane >> 4) * 8) * P + ks * 16 +
                                          ((lane >> 3) & 1) * 8);
                    kern__cu_mma<BF>(dp[2 * np], oa, vb[0], vb[1]);
                    kern__cu_mma<BF>(dp[2 * np + 1], oa, vb[2], vb[3]);
                }
            }
            if (!need && !(a.softcap > 0.f) && !a.dropout) { /* rows past the end: lse2 = inf, P = 0 */
KERN__CU_UNROLL
                for (int nt = 0; nt < NTN; nt++)
KERN__CU_UNROLL
                    for (int e = 0; e < 4; e++) {
                        const int hf = e >> 1;
                        const float p = kern__cu_exp2(sc[nt][e] * a.scale_log2 - lse2[hf]);
                        sc[nt][e] = p * (dp[nt][e] - dlt[hf]) * a.scale;
                    }
            } else
KERN__CU_UNROLL
            for (int nt = 0; nt < NTN; nt++)
KERN__CU_UNROLL
                for (int e = 0; e < 4; e++) {
                    const int hf = e >> 1;
                    const int64_t j = n0 + nt * 8 + 2 * (lane & 3) + (e & 1);
                    float gf;
                    float p = kern__cu_bwd_p(a, s, need || !row_ok[hf], sc[nt][e], b, row_h[hf],
                                             row_ok[hf] ? (int64_t)row_i[hf] : (int64_t)s.lq, j, lse2[hf], &gf);
                    float z = 1.f;
                    if (a.dropout) z = kern__cu_keep(a, b, row_h[hf], row_i[hf], j) ? a.drop_inv : 0.f;
                    sc[nt][e] = p * (dp[nt][e] * z - dlt[hf]) * gf;
                }
KERN__CU_UNROLL
            for (int kk = 0; kk < BN / 16; kk++) {
                uint32_t da[4];
                da[0] = kern__cu_pack2<BF>(sc[2 * kk][0], sc[2 * kk][1]);
                da[1] = kern__cu_pack2<BF>(sc[2 * kk][2], sc[2 * kk][3]);
                da[2] = kern__cu_pack2<BF>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
                da[3] = kern__cu_pack2<BF>(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
KERN__CU_UNROLL
                for (int np = 0; np < HD / 16; np++) {
                    if (np >= ksteps) break;
                    uint32_t kb[4];
                    kern__cu_ldsm_t(kb, cK + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P +
                                            np * 16 + (lane >> 4) * 8);
                    kern__cu_mma<BF>(dq[2 * np], da, kb[0], kb[1]);
                    kern__cu_mma<BF>(dq[2 * np + 1], da, kb[2], kb[3]);
                }
            }
        }
        __syncthreads();
    }
    kern__cu_cp_wait<0>();
    __syncthreads();
KERN__CU_UNROLL
    for (int hf = 0; hf < 2; hf++) {
        const int rloc = warp * 16 + (lane >> 2) + hf * 8;
KERN__CU_UNROLL
        for (int nt = 0; nt < NTD; nt++)
            *(uint32_t *)(sQ + rloc * P + nt * 8 + 2 * (lane & 3)) =
                kern__cu_pack2<BF>(dq[nt][2 * hf], dq[nt][2 * hf + 1]);
    }
    kern__cu_syncwarp();
    kern__cu_store_tile<HD>(
        sQ + warp * 16 * P, 16,
        [&](int r) -> uint16_t * {
            int64_t rr = r0 + warp * 16 + r;
            if (rr >= rows) return nullptr;
            int h = hk * a.G + (int)(rr / s.lq);
            return a.dq + b * a.dqs[0] + (int64_t)h * a.dqs[1] + (s.q0 + rr % s.lq) * a.dqs[2];
        },
        a.D, a.vec_out, lane, 32);
}

/* Fast mode: dq (input dtype) from the f32 accumulator. */
template <bool BF> __global__ void __launch_bounds__(128) kern__cu_sdpa_bwd_dq_convert(const kern__cu_args a) {
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int64_t nrow = (int64_t)a.B * a.Hq * a.Lq;
    const int64_t row = (int64_t)blockIdx.x * 4 + warp;
    if (row >= nrow) return;
    const int64_t i = row % a.Lq;
    const int h = (int)((row / a.Lq) % a.Hq), b = (int)(row / ((int64_t)a.Lq * a.Hq));
    const kern__cu_seq s = kern__cu_get_seq(a, b);
    if (i >= s.lq) return;
    uint16_t *dst = a.dq + b * a.dqs[0] + (int64_t)h * a.dqs[1] + (s.q0 + i) * a.dqs[2];
    for (int c = lane; c < a.D; c += 32) dst[c] = kern__cu_f2h<BF>(a.dq_acc[row * a.D + c]);
}

/* ================================================================= host */

/* One call, as the entry points describe it. */
struct kern__cu_call {
    const char *fn;
    int backward, varlen;
    const kern_tensor *q, *k, *v, *out, *dout, *lse_in, *dq, *dk, *dv;
    const kern_tensor *cu_q, *cu_k;
    int64_t max_q, max_k;
    const kern_cuda_sdpa_params *p;
};

static kern_status kern__cu_cuda_err(const char *fn, const char *what, cudaError_t e) {
    return kern__err(KERN_ERR_DEVICE, "%s: %s failed: %s", fn, what, cudaGetErrorString(e));
}

/* NULL, view validity, rank and (for attention operands) the last-dim
 * stride. */
static kern_status kern__cu_check_view(const char *fn, const kern_tensor *t, const char *name,
                                       int ndim, int unit_last) {
    kern_status st;
    if (!t) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", fn, name);
    st = kern_tensor_check(t, fn, name);
    if (st != KERN_OK) return st;
    if (t->ndim != ndim)
        return kern__err(KERN_ERR_SHAPE, "%s: %s.ndim=%d, want %d", fn, name, t->ndim, ndim);
    if (unit_last && !kern_tensor_last_dim_unit(t))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s.stride[%d]=%lld, the last dim must have unit stride",
                         fn, name, ndim - 1, (long long)t->stride[ndim - 1]);
    return KERN_OK;
}

static kern_status kern__cu_check_shape(const char *fn, const kern_tensor *t, const char *name,
                                        const int64_t *want) {
    char got[128], exp[128];
    kern_tensor w;
    int i;
    for (i = 0; i < t->ndim; i++)
        if (t->shape[i] != want[i]) break;
    if (i == t->ndim) return KERN_OK;
    w = *t;
    for (i = 0; i < t->ndim; i++) w.shape[i] = want[i];
    return kern__err(KERN_ERR_SHAPE, "%s: %s.shape=%s, want %s", fn, name,
                     kern_shape_str(t, got, sizeof got), kern_shape_str(&w, exp, sizeof exp));
}

/* A pointer the kernels dereference must be device (or managed) memory. */
static kern_status kern__cu_check_device(const char *fn, const void *ptr, const char *name) {
    cudaPointerAttributes at;
    cudaError_t e;
    if (!ptr) return KERN_OK;
    memset(&at, 0, sizeof at);
    e = cudaPointerGetAttributes(&at, ptr);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return kern__cu_cuda_err(fn, "cudaPointerGetAttributes", e);
    }
    if (at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged)
        return kern__err(KERN_ERR_ARG,
                         "%s: %s (%p) is not device memory (cudaPointerGetAttributes type %d); "
                         "a device pointer is required",
                         fn, name, ptr, (int)at.type);
    return KERN_OK;
}

/* 16-byte chunks of every row start on a 16-byte boundary. */
static int kern__cu_rows_aligned(const kern_tensor *t) {
    if ((uintptr_t)t->data % 16) return 0;
    for (int i = 0; i + 1 < t->ndim; i++)
        if (t->shape[i] > 1 && t->stride[i] % 8) return 0;
    return 1;
}

static kern_status kern__cu_check_overlap(const char *fn, const kern_tensor *a, const char *an,
                                          const kern_tensor *b, const char *bn) {
    if (a && b && kern_tensors_overlap(a, b))
        return kern__err(KERN_ERR_ARG, "%s: %s and %s overlap in memory", fn, an, bn);
    return KERN_OK;
}

/* kern__cu_prepare validates a call and fills the kernel arguments in
 * named steps, each a function below: operand views and dtypes, the
 * varlen index tensors, the logical sizes, the shapes against them, the
 * options (scale, dropout, window, mask, k_lens), lse, aliasing, device
 * memory, and last the argument block. */

/* The attention operands of a call, in the order of the messages: q, k,
 * v, out, then for the backward dout, dq, dk, dv. Returns their count. */
static int kern__cu_operands(const kern__cu_call &c, const kern_tensor **ops, const char **names) {
    static const char *const all[8] = {"q", "k", "v", "out", "dout", "dq", "dk", "dv"};
    const kern_tensor *ts[8] = {c.q, c.k, c.v, c.out, c.dout, c.dq, c.dk, c.dv};
    const int n = c.backward ? 8 : 4;
    for (int i = 0; i < n; i++) {
        ops[i] = ts[i];
        names[i] = all[i];
    }
    return n;
}

/* Logical sizes: [B, H, L, X] dense, [T, H, X] varlen (B = nseq, L = the
 * caller's max_seqlen). */
struct kern__cu_sizes {
    int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
};

/* Step 1: every operand a valid view of the right rank with a unit last
 * stride, f16 or bf16, all of q's dtype. */
static kern_status kern__cu_check_operands(const kern__cu_call &c, int nd) {
    const kern_tensor *ops[8];
    const char *names[8];
    const int nops = kern__cu_operands(c, ops, names);
    kern_status st;
    for (int i = 0; i < nops; i++) {
        st = kern__cu_check_view(c.fn, ops[i], names[i], nd, 1);
        if (st != KERN_OK) return st;
    }
    if (c.q->dtype != KERN_F16 && c.q->dtype != KERN_BF16)
        return kern__err(KERN_ERR_DTYPE, "%s: q.dtype=%s; the CUDA kernel takes f16 or bf16", c.fn,
                         kern_dtype_name(c.q->dtype));
    for (int i = 1; i < nops; i++)
        if (ops[i]->dtype != c.q->dtype)
            return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s but q.dtype=%s", c.fn, names[i],
                             kern_dtype_name(ops[i]->dtype), kern_dtype_name(c.q->dtype));
    return KERN_OK;
}

/* Step 2 (varlen): cu_seqlens_q/k contiguous i32/i64 of one length,
 * max_seqlen >= 0, and no option varlen does not take. */
static kern_status kern__cu_check_varlen(const kern__cu_call &c, const kern_sdpa_params *p) {
    const char *fn = c.fn;
    kern_status st = kern__cu_check_view(fn, c.cu_q, "cu_seqlens_q", 1, 0);
    if (st == KERN_OK) st = kern__cu_check_view(fn, c.cu_k, "cu_seqlens_k", 1, 0);
    if (st != KERN_OK) return st;
    if (c.cu_q->dtype != KERN_I32 && c.cu_q->dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: cu_seqlens_q.dtype=%s, want i32 or i64", fn,
                         kern_dtype_name(c.cu_q->dtype));
    if (c.cu_k->dtype != KERN_I32 && c.cu_k->dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: cu_seqlens_k.dtype=%s, want i32 or i64", fn,
                         kern_dtype_name(c.cu_k->dtype));
    if (c.cu_q->shape[0] < 1)
        return kern__err(KERN_ERR_SHAPE, "%s: cu_seqlens_q.shape[0]=0, want nseq+1 >= 1", fn);
    if (c.cu_k->shape[0] != c.cu_q->shape[0])
        return kern__err(KERN_ERR_SHAPE, "%s: cu_seqlens_k.shape[0]=%lld but cu_seqlens_q.shape[0]=%lld",
                         fn, (long long)c.cu_k->shape[0], (long long)c.cu_q->shape[0]);
    if ((c.cu_q->shape[0] > 1 && c.cu_q->stride[0] != 1) ||
        (c.cu_k->shape[0] > 1 && c.cu_k->stride[0] != 1))
        return kern__err(KERN_ERR_LAYOUT, "%s: cu_seqlens_q/k must be contiguous", fn);
    if (c.max_q < 0 || c.max_k < 0)
        return kern__err(KERN_ERR_ARG, "%s: max_seqlen_q=%lld, max_seqlen_k=%lld must be >= 0", fn,
                         (long long)c.max_q, (long long)c.max_k);
    if (p->attn_mask || p->k_lens)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: attn_mask and k_lens are not supported with varlen", fn);
    return KERN_OK;
}

/* Step 3: the logical sizes, read from q, k, v (and cu_seqlens). */
static kern__cu_sizes kern__cu_sizes_of(const kern__cu_call &c) {
    kern__cu_sizes z;
    const int nd = c.varlen ? 3 : 4;
    z.B = c.varlen ? c.cu_q->shape[0] - 1 : c.q->shape[0];
    z.Hq = c.q->shape[1];
    z.Hkv = c.k->shape[1];
    z.Lq = c.varlen ? c.max_q : c.q->shape[2];
    z.Lk = c.varlen ? c.max_k : c.k->shape[2];
    z.D = c.q->shape[nd - 1];
    z.Dv = c.v->shape[nd - 1];
    return z;
}

/* Step 4: every operand's shape against the sizes; heads (GQA), head
 * dims and the launch limits. */
static kern_status kern__cu_check_shapes(const kern__cu_call &c, const kern_sdpa_params *p,
                                         const kern__cu_sizes &z) {
    const char *fn = c.fn;
    const int nd = c.varlen ? 3 : 4;
    const kern_tensor *ops[8];
    const char *names[8];
    const int nops = kern__cu_operands(c, ops, names);
    /* expected shapes: [B,H,L,X] dense, [T,H,X] varlen */
    const int64_t Tq = c.q->shape[0], Tk = c.k->shape[0];
    const int64_t hs[8] = {z.Hq, z.Hkv, z.Hkv, z.Hq, z.Hq, z.Hq, z.Hkv, z.Hkv};
    const int64_t xs[8] = {z.D, z.D, z.Dv, z.Dv, z.Dv, z.D, z.D, z.Dv};
    const int qside[8] = {1, 0, 0, 1, 1, 1, 0, 0};
    kern_status st;
    for (int i = 1; i < nops; i++) {
        int64_t want[4];
        if (c.varlen) {
            want[0] = qside[i] ? Tq : Tk;
            want[1] = hs[i];
            want[2] = xs[i];
        } else {
            want[0] = z.B;
            want[1] = hs[i];
            want[2] = qside[i] ? z.Lq : z.Lk;
            want[3] = xs[i];
        }
        if (i == 2) { /* v: only its last dim may differ from k */
            for (int d = 0; d + 1 < nd; d++)
                if (c.v->shape[d] != c.k->shape[d])
                    return kern__err(KERN_ERR_SHAPE, "%s: v.shape[%d]=%lld but k.shape[%d]=%lld", fn, d,
                                     (long long)c.v->shape[d], d, (long long)c.k->shape[d]);
            continue;
        }
        if (i == 1) {
            if (c.k->shape[0] != want[0] && !c.varlen)
                return kern__err(KERN_ERR_SHAPE, "%s: k.shape[0]=%lld but q.shape[0]=%lld", fn,
                                 (long long)c.k->shape[0], (long long)z.B);
            if (c.k->shape[nd - 1] != z.D)
                return kern__err(KERN_ERR_SHAPE, "%s: q.shape[%d]=%lld but k.shape[%d]=%lld", fn, nd - 1,
                                 (long long)z.D, nd - 1, (long long)c.k->shape[nd - 1]);
            continue;
        }
        st = kern__cu_check_shape(fn, ops[i], names[i], want);
        if (st != KERN_OK) return st;
    }
    if (z.D == 0) return kern__err(KERN_ERR_SHAPE, "%s: head dim D=0", fn);
    if (z.Hkv == 0 && z.Hq > 0)
        return kern__err(KERN_ERR_SHAPE, "%s: k has 0 heads but q has %lld", fn, (long long)z.Hq);
    if (z.Hkv > 0 && z.Hq != z.Hkv) {
        if (!p->enable_gqa)
            return kern__err(KERN_ERR_SHAPE, "%s: q has %lld heads but k has %lld; set enable_gqa for GQA/MQA",
                             fn, (long long)z.Hq, (long long)z.Hkv);
        if (z.Hq % z.Hkv)
            return kern__err(KERN_ERR_SHAPE, "%s: q heads Hq=%lld are not a multiple of kv heads Hkv=%lld", fn,
                             (long long)z.Hq, (long long)z.Hkv);
    }
    if (z.D > 256 || z.Dv > 256)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: head dims D=%lld, Dv=%lld; the CUDA kernel supports up to 256",
                         fn, (long long)z.D, (long long)z.Dv);
    if (p->rel_pos_h || p->rel_pos_w)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: rel_pos_h/rel_pos_w (decomposed relative position) are CPU only (kern_sdpa)", fn);
    if (z.B > 65535 || z.Hkv > 65535 || z.Lq > 2147483647 - 256 || z.Lk > 2147483647 - 256 || z.Hq > 2147483647)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: B=%lld, Hkv=%lld, Lq=%lld, Lk=%lld exceed the launch limits (B, Hkv <= 65535, "
                         "L < 2^31)",
                         fn, (long long)z.B, (long long)z.Hkv, (long long)z.Lq, (long long)z.Lk);
    return KERN_OK;
}

/* Step 5: the scalar options, then attn_mask (kind and broadcast strides)
 * and k_lens into the argument block. */
static kern_status kern__cu_check_options(const char *fn, const kern_sdpa_params *p, const kern__cu_sizes &z,
                                          kern__cu_args *a) {
    kern_status st;
    if (!(p->dropout_p >= 0.f && p->dropout_p < 1.f))
        return kern__err(KERN_ERR_ARG, "%s: dropout_p=%g is outside [0, 1)", fn, (double)p->dropout_p);
    if (!(p->scale >= 0.f) || isinf(p->scale))
        return kern__err(KERN_ERR_ARG, "%s: scale=%g must be finite and >= 0 (0 = 1/sqrt(D))", fn,
                         (double)p->scale);
    if (!(p->softcap >= 0.f) || isinf(p->softcap))
        return kern__err(KERN_ERR_ARG, "%s: softcap=%g must be finite and >= 0 (0 = none)", fn,
                         (double)p->softcap);
    if (p->window_set && (p->window_left < -1 || p->window_right < -1))
        return kern__err(KERN_ERR_ARG, "%s: window_left=%lld, window_right=%lld must be >= -1", fn,
                         (long long)p->window_left, (long long)p->window_right);
    if (p->attn_mask) {
        const kern_tensor *m = p->attn_mask;
        kern_tensor mb;
        memset(&mb, 0, sizeof mb); /* g++ cannot see that broadcast_to sets it on KERN_OK */
        int64_t full[4] = {z.B, z.Hq, z.Lq, z.Lk};
        st = kern_tensor_check(m, fn, "attn_mask");
        if (st != KERN_OK) return st;
        if (m->dtype == KERN_BOOL) a->mask_kind = 1;
        else if (m->dtype == KERN_F32) a->mask_kind = 2;
        else if (m->dtype == KERN_F16) a->mask_kind = 3;
        else if (m->dtype == KERN_BF16) a->mask_kind = 4;
        else
            return kern__err(KERN_ERR_DTYPE, "%s: attn_mask.dtype=%s, want bool, f32, f16 or bf16", fn,
                             kern_dtype_name(m->dtype));
        st = kern_tensor_broadcast_to(m, 4, full, &mb, fn, "attn_mask");
        if (st != KERN_OK) return st;
        a->mask = m->data;
        for (int i = 0; i < 4; i++) a->ms[i] = mb.stride[i];
    }
    if (p->k_lens) {
        const kern_tensor *kl = p->k_lens;
        st = kern__cu_check_view(fn, kl, "k_lens", 1, 0);
        if (st != KERN_OK) return st;
        if (kl->dtype != KERN_I32 && kl->dtype != KERN_I64)
            return kern__err(KERN_ERR_DTYPE, "%s: k_lens.dtype=%s, want i32 or i64", fn, kern_dtype_name(kl->dtype));
        if (kl->shape[0] != z.B)
            return kern__err(KERN_ERR_SHAPE, "%s: k_lens.shape[0]=%lld but B=%lld", fn, (long long)kl->shape[0],
                             (long long)z.B);
        if (z.B > 1 && kl->stride[0] != 1)
            return kern__err(KERN_ERR_LAYOUT, "%s: k_lens.stride[0]=%lld, must be 1", fn, (long long)kl->stride[0]);
        a->klen = kl->data;
        a->klen_i64 = kl->dtype == KERN_I64;
    }
    return KERN_OK;
}

/* Step 6: lse (the backward's input, the forward's optional output), f32
 * [B, Hq, Lq] dense or [Hq, T] varlen. */
static kern_status kern__cu_check_lse(const kern__cu_call &c, const kern_tensor *lse, const char *lse_name,
                                      const kern__cu_sizes &z) {
    int64_t want[3];
    kern_status st;
    if (c.backward && !lse) return kern__err(KERN_ERR_ARG, "%s: lse is NULL", c.fn);
    if (!lse) return KERN_OK;
    st = kern__cu_check_view(c.fn, lse, lse_name, c.varlen ? 2 : 3, 0);
    if (st != KERN_OK) return st;
    if (lse->dtype != KERN_F32)
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s, want f32", c.fn, lse_name, kern_dtype_name(lse->dtype));
    if (c.varlen) {
        want[0] = z.Hq;
        want[1] = c.q->shape[0];
    } else {
        want[0] = z.B;
        want[1] = z.Hq;
        want[2] = z.Lq;
    }
    return kern__cu_check_shape(c.fn, lse, lse_name, want);
}

/* Step 7: no output overlaps an input or another output. */
static kern_status kern__cu_check_aliasing(const kern__cu_call &c, const kern_tensor *lse, const char *lse_name) {
    const kern_tensor *outs[3] = {c.backward ? c.dq : c.out, c.backward ? c.dk : lse, c.backward ? c.dv : NULL};
    const char *onames[3] = {c.backward ? "dq" : "out", c.backward ? "dk" : lse_name, c.backward ? "dv" : NULL};
    const kern_tensor *ins[6] = {c.q, c.k, c.v, c.backward ? c.out : NULL, c.backward ? c.dout : NULL,
                                 c.backward ? lse : NULL};
    const char *inames[6] = {"q", "k", "v", "out", "dout", "lse"};
    kern_status st;
    for (int i = 0; i < 3; i++) {
        if (!outs[i]) continue;
        for (int j = 0; j < 6; j++) {
            st = kern__cu_check_overlap(c.fn, outs[i], onames[i], ins[j], inames[j]);
            if (st != KERN_OK) return st;
        }
        for (int j = i + 1; j < 3; j++) {
            st = kern__cu_check_overlap(c.fn, outs[i], onames[i], outs[j], onames[j]);
            if (st != KERN_OK) return st;
        }
    }
    return KERN_OK;
}

/* Step 8: everything the kernels dereference is device (or managed)
 * memory. */
static kern_status kern__cu_check_memory(const kern__cu_call &c, const kern_tensor *lse, const char *lse_name,
                                         const kern_sdpa_params *p, const kern__cu_args &a, int64_t B) {
    const kern_tensor *ops[8];
    const char *names[8];
    const int nops = kern__cu_operands(c, ops, names);
    kern_status st = KERN_OK;
    for (int i = 0; i < nops && st == KERN_OK; i++)
        if (kern_tensor_numel(ops[i]) > 0) st = kern__cu_check_device(c.fn, ops[i]->data, names[i]);
    if (st == KERN_OK && lse && kern_tensor_numel(lse) > 0) st = kern__cu_check_device(c.fn, lse->data, lse_name);
    if (st == KERN_OK && a.mask && kern_tensor_numel(p->attn_mask) > 0)
        st = kern__cu_check_device(c.fn, a.mask, "attn_mask");
    if (st == KERN_OK && a.klen && B > 0) st = kern__cu_check_device(c.fn, a.klen, "k_lens");
    if (st == KERN_OK && c.varlen) {
        st = kern__cu_check_device(c.fn, c.cu_q->data, "cu_seqlens_q");
        if (st == KERN_OK) st = kern__cu_check_device(c.fn, c.cu_k->data, "cu_seqlens_k");
    }
    return st;
}

/* Step 9: the argument block of a validated call (splits, workspace and
 * vector flags are set by the caller); hd receives the head-dim
 * instantiation. */
static void kern__cu_fill_args(const kern__cu_call &c, const kern_sdpa_params *p, const kern__cu_sizes &z,
                               const kern_tensor *lse, kern__cu_args *a, int *hd) {
    const kern_tensor *ops[8];
    const char *names[8];
    const int nops = kern__cu_operands(c, ops, names);
    int64_t *dst[8] = {a->qs, a->ks, a->vs, a->os, a->dos, a->dqs, a->dks, a->dvs};
    if (c.varlen) {
        a->cu_q = c.cu_q->data;
        a->cu_k = c.cu_k->data;
        a->cu_q_i64 = c.cu_q->dtype == KERN_I64;
        a->cu_k_i64 = c.cu_k->dtype == KERN_I64;
        a->Tq = c.q->shape[0];
        a->Tk = c.k->shape[0];
    }
    a->B = (int)z.B;
    a->Hq = (int)z.Hq;
    a->Hkv = (int)z.Hkv;
    a->G = z.Hkv > 0 ? (int)(z.Hq / z.Hkv) : 1;
    a->Lq = (int)z.Lq;
    a->Lk = (int)z.Lk;
    a->D = (int)z.D;
    a->Dv = (int)z.Dv;
    /* strides (b, h, row): dense [B,H,L,X]; varlen [T,H,X] with b stride 0
     * and the row stride first */
    for (int i = 0; i < nops; i++) {
        dst[i][0] = c.varlen ? 0 : ops[i]->stride[0];
        dst[i][1] = ops[i]->stride[1];
        dst[i][2] = c.varlen ? ops[i]->stride[0] : ops[i]->stride[2];
    }
    a->q = (const uint16_t *)c.q->data;
    a->k = (const uint16_t *)c.k->data;
    a->v = (const uint16_t *)c.v->data;
    a->o = (uint16_t *)c.out->data;
    if (c.backward) {
        a->dout = (const uint16_t *)c.dout->data;
        a->dq = (uint16_t *)c.dq->data;
        a->dk = (uint16_t *)c.dk->data;
        a->dv = (uint16_t *)c.dv->data;
    }
    if (lse) {
        a->lse = (float *)lse->data;
        a->ls[0] = c.varlen ? 0 : lse->stride[0];
        a->ls[1] = c.varlen ? lse->stride[0] : lse->stride[1];
        a->ls[2] = c.varlen ? lse->stride[1] : lse->stride[2];
    }
    a->causal = p->causal_bottom_right ? 2 : p->is_causal ? 1 : 0;
    a->window = p->window_set != 0;
    a->wl = p->window_left;
    a->wr = p->window_right;
    a->scale = p->scale_set || p->scale > 0.f ? p->scale : (float)(1.0 / sqrt((double)z.D));
    a->scale_log2 = a->scale * KERN__CU_LOG2E;
    a->softcap = p->softcap;
    a->dropout = p->dropout_p > 0.f;
    a->drop_thr = kern_dropout_threshold(p->dropout_p);
    a->drop_inv = (float)(1.0 / (1.0 - (double)p->dropout_p));
    a->seed = p->seed;
    a->offset = p->offset;
    a->splits = 1;
    a->vec_in = kern__cu_rows_aligned(c.q) && kern__cu_rows_aligned(c.k) && kern__cu_rows_aligned(c.v) &&
                (!c.backward || kern__cu_rows_aligned(c.dout));
    a->vec_out = c.backward ? kern__cu_rows_aligned(c.dq) && kern__cu_rows_aligned(c.dk) &&
                                  kern__cu_rows_aligned(c.dv)
                            : kern__cu_rows_aligned(c.out);
    {
        int64_t m = z.D > z.Dv ? z.D : z.Dv;
        *hd = m <= 64 ? 64 : m <= 96 ? 96 : m <= 128 ? 128 : 256;
    }
}

/* Validates a call and fills the kernel arguments: the steps above in
 * order; nothing is written to *out on an error. */
static kern_status kern__cu_prepare(const kern__cu_call &c, kern__cu_args *out, int *hd) {
    kern_sdpa_params defaults;
    const kern_sdpa_params *p = c.p ? &c.p->sdpa : NULL;
    const kern_tensor *lse;
    const char *lse_name = c.backward ? "lse" : "params->lse";
    kern__cu_args a;
    kern__cu_sizes z;
    kern_status st;
    if (!p) {
        memset(&defaults, 0, sizeof defaults);
        p = &defaults;
    }
    lse = c.backward ? c.lse_in : p->lse;
    memset(&a, 0, sizeof a);
    st = kern__cu_check_operands(c, c.varlen ? 3 : 4);
    if (st == KERN_OK && c.varlen) st = kern__cu_check_varlen(c, p);
    if (st != KERN_OK) return st;
    z = kern__cu_sizes_of(c);
    st = kern__cu_check_shapes(c, p, z);
    if (st == KERN_OK) st = kern__cu_check_options(c.fn, p, z, &a);
    if (st == KERN_OK) st = kern__cu_check_lse(c, lse, lse_name, z);
    if (st == KERN_OK) st = kern__cu_check_aliasing(c, lse, lse_name);
    if (st == KERN_OK) st = kern__cu_check_memory(c, lse, lse_name, p, a, z.B);
    if (st != KERN_OK) return st;
    kern__cu_fill_args(c, p, z, lse, &a, hd);
    *out = a;
    return KERN_OK;
}

/* Device properties the launches depend on. */
struct kern__cu_dev {
    int sms, smem_optin, major;
};
static kern_status kern__cu_get_dev(const char *fn, kern__cu_dev *d) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d->sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&d->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d->major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return kern__cu_cuda_err(fn, "querying the device", e);
    }
    if (d->major < 8)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: compute capability %d.x; sm_80 or newer is required", fn,
                         d->major);
    return KERN_OK;
}

static size_t kern__cu_fwd_smem_for(int hd) {
    switch (hd) {
    case 64: return kern__cu_fwd_smem<64>();
    case 96: return kern__cu_fwd_smem<96>();
    case 128: return kern__cu_fwd_smem<128>();
    default: return kern__cu_fwd_smem<256>();
    }
}
static int kern__cu_fwd_bm(int hd) {
    return hd == 64 ? kern__cu_fwd_cfg<64>::W * kern__cu_fwd_cfg<64>::MT * 16
         : hd == 96 ? kern__cu_fwd_cfg<96>::W * kern__cu_fwd_cfg<96>::MT * 16
         : hd == 128 ? kern__cu_fwd_cfg<128>::W * kern__cu_fwd_cfg<128>::MT * 16
                     : kern__cu_fwd_cfg<256>::W * kern__cu_fwd_cfg<256>::MT * 16;
}
static int kern__cu_fwd_bn(int hd) {
    return hd == 64 ? (int)kern__cu_fwd_cfg<64>::BN : hd == 96 ? (int)kern__cu_fwd_cfg<96>::BN
         : hd == 128 ? (int)kern__cu_fwd_cfg<128>::BN : (int)kern__cu_fwd_cfg<256>::BN;
}
static size_t kern__cu_bwd_smem_for(int hd, int deterministic) {
    size_t a, b;
    switch (hd) {
    case 64: a = kern__cu_bwd_smem<64>(); b = kern__cu_dq_smem<64>(); break;
    case 96: a = kern__cu_bwd_smem<96>(); b = kern__cu_dq_smem<96>(); break;
    case 128: a = kern__cu_bwd_smem<128>(); b = kern__cu_dq_smem<128>(); break;
    default: a = kern__cu_bwd_smem<256>(); b = kern__cu_dq_smem<256>(); break;
    }
    return deterministic && b > a ? b : a;
}

/* Split-KV parts for the forward: enough blocks for about three per SM
 * when the (rows x heads x batch) grid alone leaves SMs idle, each part
 * keeping at least 4 key blocks. */
static int kern__cu_num_splits(const kern__cu_args &a, const kern_cuda_sdpa_params *p, int hd, int sms) {
    const int64_t bm = kern__cu_fwd_bm(hd), bn = kern__cu_fwd_bn(hd);
    const int64_t nkb = ((int64_t)a.Lk + bn - 1) / bn;
    const int64_t blocks = (((int64_t)a.G * a.Lq + bm - 1) / bm) * a.Hkv * a.B;
    int64_t n;
    if (p && p->num_splits > 0) {
        n = p->num_splits;
    } else {
        if (blocks == 0 || blocks >= sms || nkb < 8) return 1;
        n = (3 * (int64_t)sms + blocks - 1) / blocks;
        if (n > nkb / 4) n = nkb / 4;
    }
    if (n > nkb) n = nkb;
    if (n > 128) n = 128;
    if (n * a.Hkv > 65535) n = 65535 / (a.Hkv > 0 ? a.Hkv : 1);
    return n < 1 ? 1 : (int)n;
}

static size_t kern__cu_align256(size_t x) { return (x + 255) & ~(size_t)255; }

/* Workspace bytes: forward split-KV partials; backward delta and the f32
 * dq accumulator (fast mode). */
static size_t kern__cu_ws_bytes(const kern__cu_args &a, int backward, int deterministic) {
    const size_t nrow = (size_t)a.B * a.Hq * a.Lq;
    if (!backward)
        return a.splits > 1 ? kern__cu_align256((size_t)a.splits * nrow * a.Dv * 4) +
                                  kern__cu_align256((size_t)a.splits * nrow * 4)
                            : 0;
    return kern__cu_align256(nrow * 4) + (deterministic ? 0 : kern__cu_align256(nrow * a.D * 4));
}

/* Gives the call its workspace: the user's, or one from cudaMallocAsync
 * (*owned set, to be released with cudaFreeAsync on the stream). */
static kern_status kern__cu_get_ws(const char *fn, const kern_cuda_sdpa_params *p, size_t need,
                                   cudaStream_t stream, void **ws, int *owned) {
    *ws = NULL;
    *owned = 0;
    if (need == 0) return KERN_OK;
    if (p && p->sdpa.workspace) {
        kern_status st;
        void *w = p->sdpa.workspace;
        if (p->sdpa.workspace_size < need)
            return kern__err(KERN_ERR_ARG, "%s: workspace_size=%zu but this call needs %zu bytes", fn,
                             p->sdpa.workspace_size, need);
        if ((uintptr_t)w % 256)
            return kern__err(KERN_ERR_ARG, "%s: workspace %p is not 256-byte aligned", fn, w);
        st = kern__cu_check_device(fn, w, "workspace");
        if (st != KERN_OK) return st;
        *ws = w;
        return KERN_OK;
    }
    cudaError_t e = cudaMallocAsync(ws, need, stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *ws = NULL;
        return kern__cu_cuda_err(fn, "cudaMallocAsync of the workspace", e);
    }
    *owned = 1;
    return KERN_OK;
}

template <class K> static cudaError_t kern__cu_smem_attr(K kernel, size_t smem) {
    if (smem <= 48 * 1024) return cudaSuccess;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

template <int HD, bool BF> static cudaError_t kern__cu_launch_fwd(const kern__cu_args &a, cudaStream_t st) {
    typedef kern__cu_fwd_cfg<HD> C;
    const int BM = C::W * C::MT * 16;
    const size_t smem = kern__cu_fwd_smem<HD>();
    void (*kf)(const kern__cu_args) = kern__cu_sdpa_fwd<HD, BF>;
    cudaError_t e = kern__cu_smem_attr(kf, smem);
    if (e != cudaSuccess) return e;
    dim3 grid((unsigned)(((int64_t)a.G * a.Lq + BM - 1) / BM), (unsigned)(a.Hkv * a.splits), (unsigned)a.B);
    KERN__CU_LAUNCH(kf, grid, dim3(C::W * 32), smem, st, a);
    e = cudaGetLastError();
    if (e != cudaSuccess || a.splits <= 1) return e;
    const int64_t nrow = (int64_t)a.B * a.Hq * a.Lq;
    void (*kc)(const kern__cu_args) = kern__cu_sdpa_combine<BF>;
    KERN__CU_LAUNCH(kc, dim3((unsigned)((nrow + 3) / 4)), dim3(128), 0, st, a);
    return cudaGetLastError();
}

template <int HD, bool BF>
static cudaError_t kern__cu_launch_bwd(const kern__cu_args &a, cudaStream_t st) {
    typedef kern__cu_bwd_cfg<HD> C;
    typedef kern__cu_dq_cfg<HD> Q;
    const int64_t nrow = (int64_t)a.B * a.Hq * a.Lq;
    void (*kb)(const kern__cu_args) = kern__cu_sdpa_bwd<HD, BF>;
    void (*kq)(const kern__cu_args) = kern__cu_sdpa_bwd_dq<HD, BF>;
    /* every attribute before the first launch: a failure launches nothing */
    cudaError_t e = kern__cu_smem_attr(kb, kern__cu_bwd_smem<HD>());
    if (e == cudaSuccess && !a.dq_acc) e = kern__cu_smem_attr(kq, kern__cu_dq_smem<HD>());
    if (e != cudaSuccess) return e;
    if (nrow > 0) {
        void (*kp)(const kern__cu_args) = kern__cu_sdpa_bwd_pre<BF>;
        KERN__CU_LAUNCH(kp, dim3((unsigned)((nrow + 3) / 4)), dim3(128), 0, st, a);
        e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    if (a.Lk > 0) {
        const int BN = C::W * 16;
        const size_t smem = kern__cu_bwd_smem<HD>();
        KERN__CU_LAUNCH(kb, dim3((unsigned)(((int64_t)a.Lk + BN - 1) / BN), (unsigned)a.Hkv, (unsigned)a.B),
                        dim3(C::W * 32), smem, st, a);
        e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    if (nrow == 0) return cudaSuccess;
    if (a.dq_acc) {
        void (*kc)(const kern__cu_args) = kern__cu_sdpa_bwd_dq_convert<BF>;
        KERN__CU_LAUNCH(kc, dim3((unsigned)((nrow + 3) / 4)), dim3(128), 0, st, a);
    } else {
        const int BM = Q::W * 16;
        const size_t smem = kern__cu_dq_smem<HD>();
        KERN__CU_LAUNCH(kq, dim3((unsigned)(((int64_t)a.G * a.Lq + BM - 1) / BM), (unsigned)a.Hkv, (unsigned)a.B),
                        dim3(Q::W * 32), smem, st, a);
    }
    return cudaGetLastError();
}

template <bool BF> static cudaError_t kern__cu_dispatch(const kern__cu_args &a, int hd, int backward, cudaStream_t st) {
#if defined(KERN__CU_ONLY_HD) /* development builds: one instantiation */
    (void)hd;
    return backward ? kern__cu_launch_bwd<KERN__CU_ONLY_HD, BF>(a, st)
                    : kern__cu_launch_fwd<KERN__CU_ONLY_HD, BF>(a, st);
#else
    switch (hd) {
    case 64: return backward ? kern__cu_launch_bwd<64, BF>(a, st) : kern__cu_launch_fwd<64, BF>(a, st);
    case 96: return backward ? kern__cu_launch_bwd<96, BF>(a, st) : kern__cu_launch_fwd<96, BF>(a, st);
    case 128: return backward ? kern__cu_launch_bwd<128, BF>(a, st) : kern__cu_launch_fwd<128, BF>(a, st);
    default: return backward ? kern__cu_launch_bwd<256, BF>(a, st) : kern__cu_launch_fwd<256, BF>(a, st);
    }
#endif
}

/* Validate, plan, allocate, launch. */
static kern_status kern__cu_run(const kern__cu_call &c, void *stream) {
    kern__cu_args a;
    kern__cu_dev dev;
    int hd = 0, owned = 0;
    void *ws = NULL;
    const int det = c.p ? c.p->deterministic != 0 : 0;
    cudaStream_t st = (cudaStream_t)stream;
    kern_status s = kern__cu_prepare(c, &a, &hd);
    if (s != KERN_OK) return s;
    /* nothing to compute: forward with no query rows; backward with
     * neither query rows nor keys */
    if ((int64_t)a.B * a.Hq == 0 || (!c.backward && a.Lq == 0) ||
        (c.backward && a.Lq == 0 && a.Lk == 0))
        return KERN_OK;
    s = kern__cu_get_dev(c.fn, &dev);
    if (s != KERN_OK) return s;
    {
        const size_t need = c.backward ? kern__cu_bwd_smem_for(hd, det) : kern__cu_fwd_smem_for(hd);
        if (need > (size_t)dev.smem_optin)
            return kern__err(KERN_ERR_UNSUPPORTED,
                             "%s: head dim %d needs %zu bytes of shared memory per block, the device allows %d",
                             c.fn, hd, need, dev.smem_optin);
    }
    if (!c.backward) a.splits = kern__cu_num_splits(a, c.p, hd, dev.sms);
    const size_t need = kern__cu_ws_bytes(a, c.backward, det);
    s = kern__cu_get_ws(c.fn, c.p, need, st, &ws, &owned);
    if (s != KERN_OK) return s;
    if (need) {
        const size_t nrow = (size_t)a.B * a.Hq * a.Lq;
        char *w = (char *)ws;
        if (!c.backward) {
            a.part_o = (float *)w;
            a.part_lse = (float *)(w + kern__cu_align256((size_t)a.splits * nrow * a.Dv * 4));
        } else {
            a.delta = (float *)w;
            a.dq_acc = det ? NULL : (float *)(w + kern__cu_align256(nrow * 4));
        }
    }
    cudaError_t e = c.q->dtype == KERN_BF16 ? kern__cu_dispatch<true>(a, hd, c.backward, st)
                                            : kern__cu_dispatch<false>(a, hd, c.backward, st);
    if (owned) {
        cudaError_t e2 = cudaFreeAsync(ws, st);
        if (e == cudaSuccess && e2 != cudaSuccess) e = e2;
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return kern__cu_cuda_err(c.fn, "kernel launch", e);
    }
    return KERN_OK;
}

static kern__cu_call kern__cu_call_make(const char *fn) {
    kern__cu_call c;
    memset(&c, 0, sizeof c);
    c.fn = fn;
    return c;
}

extern "C" {

KERN_API kern_status kern_cuda_sdpa(void *stream, const kern_tensor *q, const kern_tensor *k,
                                    const kern_tensor *v, const kern_tensor *out,
                                    const kern_cuda_sdpa_params *params) {
    kern__cu_call c = kern__cu_call_make("kern_cuda_sdpa");
    c.q = q; c.k = k; c.v = v; c.out = out; c.p = params;
    return kern__cu_run(c, stream);
}

KERN_API kern_status kern_cuda_sdpa_varlen(void *stream, const kern_tensor *q, const kern_tensor *k,
                                           const kern_tensor *v, const kern_tensor *out,
                                           const kern_tensor *cu_seqlens_q, const kern_tensor *cu_seqlens_k,
                                           int64_t max_seqlen_q, int64_t max_seqlen_k,
                                           const kern_cuda_sdpa_params *params) {
    kern__cu_call c = kern__cu_call_make("kern_cuda_sdpa_varlen");
    c.varlen = 1;
    c.q = q; c.k = k; c.v = v; c.out = out; c.p = params;
    c.cu_q = cu_seqlens_q; c.cu_k = cu_seqlens_k;
    c.max_q = max_seqlen_q; c.max_k = max_seqlen_k;
    return kern__cu_run(c, stream);
}

KERN_API kern_status kern_cuda_sdpa_backward(void *stream, const kern_tensor *q, const kern_tensor *k,
                                             const kern_tensor *v, const kern_tensor *out,
                                             const kern_tensor *dout, const kern_tensor *lse,
                                             const kern_tensor *dq, const kern_tensor *dk,
                                             const kern_tensor *dv, const kern_cuda_sdpa_params *params) {
    kern__cu_call c = kern__cu_call_make("kern_cuda_sdpa_backward");
    c.backward = 1;
    c.q = q; c.k = k; c.v = v; c.out = out; c.dout = dout; c.lse_in = lse;
    c.dq = dq; c.dk = dk; c.dv = dv; c.p = params;
    return kern__cu_run(c, stream);
}

KERN_API kern_status kern_cuda_sdpa_varlen_backward(
    void *stream, const kern_tensor *q, const kern_tensor *k, const kern_tensor *v,
    const kern_tensor *out, const kern_tensor *dout, const kern_tensor *lse, const kern_tensor *dq,
    const kern_tensor *dk, const kern_tensor *dv, const kern_tensor *cu_seqlens_q,
    const kern_tensor *cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
    const kern_cuda_sdpa_params *params) {
    kern__cu_call c = kern__cu_call_make("kern_cuda_sdpa_varlen_backward");
    c.backward = 1;
    c.varlen = 1;
    c.q = q; c.k = k; c.v = v; c.out = out; c.dout = dout; c.lse_in = lse;
    c.dq = dq; c.dk = dk; c.dv = dv; c.p = params;
    c.cu_q = cu_seqlens_q; c.cu_k = cu_seqlens_k;
    c.max_q = max_seqlen_q; c.max_k = max_seqlen_k;
    return kern__cu_run(c, stream);
}

KERN_API kern_status kern_cuda_sdpa_workspace_size(const kern_tensor *q, const kern_tensor *k,
                                                   const kern_tensor *v,
                                                   const kern_cuda_sdpa_params *params, int backward,
                                                   size_t *bytes) {
    const char *fn = "kern_cuda_sdpa_workspace_size";
    kern__cu_args a;
    kern__cu_dev dev;
    kern_status s;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", fn);
    s = kern__cu_check_view(fn, q, "q", 4, 0);
    if (s == KERN_OK) s = kern__cu_check_view(fn, k, "k", 4, 0);
    if (s == KERN_OK) s = kern__cu_check_view(fn, v, "v", 4, 0);
    if (s != KERN_OK) return s;
    memset(&a, 0, sizeof a);
    a.B = (int)q->shape[0];
    a.Hq = (int)q->shape[1];
    a.Hkv = k->shape[1] > 0 ? (int)k->shape[1] : 1;
    a.G = a.Hq / a.Hkv > 0 ? a.Hq / a.Hkv : 1;
    a.Lq = (int)q->shape[2];
    a.Lk = (int)k->shape[2];
    a.D = (int)q->shape[3];
    a.Dv = (int)v->shape[3];
    a.splits = 1;
    if (!backward) {
        int64_t m = a.D > a.Dv ? a.D : a.Dv;
        int hd = m <= 64 ? 64 : m <= 96 ? 96 : m <= 128 ? 128 : 256;
        s = kern__cu_get_dev(fn, &dev);
        if (s != KERN_OK) return s;
        a.splits = kern__cu_num_splits(a, params, hd, dev.sms);
    }
    *bytes = kern__cu_ws_bytes(a, backward, params ? params->deterministic != 0 : 0);
    return KERN_OK;
}

} /* extern "C" */

#endif /* KERN_IMPLEMENTATION && !KERN_CUDA_SDPA_IMPLEMENTED */
