/* kern_sdpa.h — flash-attention scaled dot product attention on the CPU,
 * forward and backward. Part of kern (header-only; see kern_base.h).
 *
 * WHAT IT COMPUTES
 *   out = dropout(softmax(capped(scale * q k^T) + mask)) v
 * with PyTorch's torch.nn.functional.scaled_dot_product_attention semantics
 * (attn_mask, is_causal, scale, enable_gqa, dropout_p) and FlashAttention's
 * extras (bottom-right causal, sliding window, softcap, per-batch key lengths,
 * varlen packed sequences, log-sum-exp output, backward from lse).
 * The Lq x Lk score matrix is never materialized: the forward runs over
 * query panels x key blocks with an online softmax (running max and sum, the
 * accumulator rescaled only when the max grows, normalized once at the end),
 * in O(threads x tile) scratch.
 *
 * LAYOUTS (shapes are logical; strides are any, in elements, but the last
 * dim of q, k, v, out, dout, dq, dk, dv must have unit stride, so both
 * [B,H,L,D] and [B,L,H,D] memory layouts work without copies)
 *   q    [B, Hq,  Lq, D]      k [B, Hkv, Lk, D]     v [B, Hkv, Lk, Dv]
 *   out  [B, Hq,  Lq, Dv]     lse (optional output) f32 [B, Hq, Lq]
 *   varlen: q [Tq, Hq, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv], out [Tq, Hq, Dv],
 *   cu_seqlens_q/k [nseq+1] (i32 or i64, cu[0] = 0, non-decreasing, last =
 *   Tq / Tk), lse f32 [Hq, Tq] (the FlashAttention-2 varlen convention).
 *   dtypes: q, k, v, out (and dout, dq, dk, dv) all f32, all bf16 or all f16.
 *   Accumulation is f32; outputs are written in the input dtype.
 *
 * SEMANTICS OF THE OPTIONS (kern_sdpa_params, zero-initialised = defaults)
 *   scale, scale_set  scale 0 = 1/sqrt(D) unless scale_set, which makes
 *                scale be used as given, 0 included (PyTorch's scale=0.0).
 *                Any other finite value is used as given, negative
 *                included (as PyTorch, which accepts any float).
 *                kern_sdpa_params_defaults(&p, D) shows the resolved value.
 *   attn_mask    NULL = none. KERN_BOOL (true = attend) or f32/f16/bf16
 *                (added to the scores), broadcast to [B, Hq, Lq, Lk] with
 *                numpy rules through strides (e.g. [Lq,Lk], [B,1,Lq,Lk],
 *                [B,Hq,1,Lk]); any strides. Dense entry points only.
 *   is_causal    top-left aligned causal mask (PyTorch): key j is visible to
 *                query i iff j <= i.
 *   causal_bottom_right  bottom-right aligned causal mask (FlashAttention
 *                >= 2.1): j <= i + Lk_b - Lq_b, where Lk_b is the key length
 *                of that batch entry (k_lens[b], the varlen sequence length,
 *                or Lk) and Lq_b likewise. Implies causal; wins over
 *                is_causal when both are set.
 *   window_set   0 = no sliding window. Nonzero: key j is visible to query i
 *                iff i + off - window_left <= j <= i + off + window_right,
 *                with off = 0 (top-left) or Lk_b - Lq_b when
 *                causal_bottom_right is set; window_left/right = -1 means
 *                unbounded on that side (FlashAttention's window_size), and
 *                any bound up to INT64_MAX is exact (no overflow).
 *   softcap      0 = none; > 0: s = softcap * tanh(s / softcap) applied to
 *                scale*q.k before the mask (Gemma 2, FlashAttention).
 *   enable_gqa   allows Hq = G * Hkv (query head h uses kv head h / G).
 *                Without it Hq must equal Hkv.
 *   dropout_p, seed, offset  dropout on the attention probabilities, kept
 *                ones scaled by 1/(1-p). The mask is kern_dropout_keep(seed,
 *                offset, ((b*Hq + h)*Lq + i)*Lk + j, kern_dropout_threshold(p))
 *                (kern_base.h; Philox4x32-10), identical for any thread
 *                count, in forward and backward, and in the CUDA kernel.
 *                For varlen, b is the sequence and Lq/Lk are max_seqlen_q/k
 *                (only here: the work depends on the actual lengths in
 *                cu_seqlens, never on max_seqlen, which may be anything up
 *                to INT64_MAX that is not below the longest sequence).
 *   k_lens       NULL = all keys. [B] i32/i64: keys j >= k_lens[b] are
 *                masked (padded batches, KV caches). Dense entry points only.
 *   lse          NULL = not written. f32 output: log(sum_j exp(s_ij)) of the
 *                masked, capped scores (before dropout), in natural log.
 *   workspace, workspace_size  NULL = the context's reusable scratch; else
 *                caller memory of at least the entry point's
 *                *_workspace_size bytes (kern_sdpa_workspace_size, ..._varlen_,
 *                ..._backward_, ..._varlen_backward_), from which the call
 *                takes all its scratch; smaller is KERN_ERR_ARG.
 *   A row with no visible key gives zeros in out and -inf in lse (and zero
 *   gradients), never NaN.
 *   NaN: a NaN in q row i makes out row i (and lse i) NaN. A NaN in key j
 *   makes every row that can see key j NaN; rows that mask j stay finite. A
 *   NaN in v[j] reaches every row that sees j, and may also reach rows that
 *   mask j when j lies in a key block they compute (0 * NaN, as in PyTorch's
 *   math path, where it reaches every row). A NaN in an additive mask entry
 *   makes that row NaN. Inf in scores behaves as in IEEE softmax.
 *
 * ENTRY POINTS
 *   kern_sdpa            forward, dense.
 *   kern_sdpa_varlen     forward, packed sequences.
 *   kern_sdpa_backward   dq, dk, dv from q, k, v, out, dout and the forward's
 *                        lse (FlashAttention-2: P recomputed per tile,
 *                        delta = rowsum(dout * out)). dk, dv are summed over
 *                        the query heads of a GQA group. Deterministic: the
 *                        same bits for any thread count (no atomics; the
 *                        split of the key range depends only on the shape).
 *   kern_sdpa_varlen_backward  the same for packed sequences.
 *
 * ERRORS (nothing is written on error; kern_last_error() names the argument)
 *   KERN_ERR_ARG     NULL q/k/v/out/..., dropout_p outside [0,1), window
 *                    < -1, a non-finite scale, a negative or non-finite
 *                    softcap, outputs that overlap inputs or each other, a
 *                    caller workspace smaller than the *_workspace_size.
 *   KERN_ERR_SHAPE   ndim, B/H/L/D mismatches between q, k, v, out (and
 *                    dout, dq, dk, dv, lse), Hq not a multiple of Hkv, Hq !=
 *                    Hkv without enable_gqa, D = 0, a mask that does not
 *                    broadcast, k_lens / cu_seqlens of the wrong length.
 *   KERN_ERR_DTYPE   mixed or non-float q/k/v dtypes, a mask that is not
 *                    bool/f32/f16/bf16, lse not f32, k_lens / cu_seqlens not
 *                    i32/i64.
 *   KERN_ERR_LAYOUT  a non-unit last-dim stride; an output (out, lse, dq,
 *                    dk, dv) whose elements overlap (e.g. a zero stride).
 *   KERN_ERR_INDEX   k_lens[b] < 0 or > Lk; cu_seqlens not starting at 0,
 *                    decreasing, not ending at T, or with a sequence longer
 *                    than max_seqlen.
 *   KERN_ERR_UNSUPPORTED  attn_mask or k_lens with the varlen entry points.
 *   KERN_ERR_NOMEM   scratch could not be allocated.
 *
 * ISA PATHS (chosen at run time from kern_ctx_features(ctx))
 *   AVX-512: 8x32 f32 FMA microkernel; bf16 q/k/v through vdpbf16ps
 *   (AVX512_BF16) for q.k and p.v with P rounded to bf16 (as FlashAttention
 *   does on GPUs); f16 converted to f32 while packing tiles.
 *   AVX2+FMA: 6x16 f32 microkernel (bf16/f16 converted while packing).
 *   NEON: 4x16 f32 microkernel (compile-checked only). Scalar: plain C.
 *   exp: 2^x as round-to-nearest split plus a degree-6 polynomial on
 *   [-0.5, 0.5] (max relative error 1.1e-7, i.e. about 1 f32 ulp; tested),
 *   exact 0 for -inf, NaN kept; the scalar path uses libm exp2f.
 *
 * SCRATCH AND THREADS (kern_sdpa_workspace_size & co. give the exact bytes)
 *   Forward: per-thread scratch of about (4 panels x 32 rows x (D + Dv) + 64
 *   keys x (D + 2 Dv)) x 4 bytes; decode-shaped problems (few query rows
 *   per kv head) split the key range into a shape-dependent number of parts
 *   (a second parallel phase combines them, so both threads work at
 *   B*H = 1) and use a workspace of parts x rows x (Dv + 2) floats.
 *   Causal work is ordered long tasks first. Backward: a workspace of f32
 *   dk/dv accumulators (B*Hkv*Lk*(D+Dv) floats), parts x B*Hq*Lq*D floats
 *   for the partial dq (parts = number of key ranges, shape-dependent), and
 *   2*B*Hq*Lq floats for delta and lse.
 *
 * EXAMPLE
 *     // q [1,8,128,64], k/v [1,2,128,64] f32, out [1,8,128,64]; causal GQA.
 *     kern_tensor q = kern_tensor_4d(qp, KERN_F32, 1, 8, 128, 64);
 *     kern_tensor k = kern_tensor_4d(kp, KERN_F32, 1, 2, 128, 64);
 *     kern_tensor v = kern_tensor_4d(vp, KERN_F32, 1, 2, 128, 64);
 *     kern_tensor o = kern_tensor_4d(op, KERN_F32, 1, 8, 128, 64);
 *     kern_sdpa_params p = {0};             // C++: kern_sdpa_params p{};
 *     p.is_causal = 1;
 *     p.enable_gqa = 1;
 *     if (kern_sdpa(NULL, &q, &k, &v, &o, &p) != KERN_OK)
 *         fprintf(stderr, "%s\n", kern_last_error());
 */
#ifndef KERN_SDPA_H
#define KERN_SDPA_H

#include "kern_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_sdpa_params {
    const kern_tensor *attn_mask; /* NULL = none; bool or additive float */
    int is_causal;                /* top-left causal (PyTorch) */
    int causal_bottom_right;      /* bottom-right causal (FlashAttention) */
    float scale;                  /* 0 = 1/sqrt(D) unless scale_set */
    int scale_set;                /* nonzero: scale is used as given, 0 included */
    int enable_gqa;               /* allow Hq = G * Hkv */
    float dropout_p;              /* [0, 1); 0 = no dropout */
    uint64_t seed, offset;        /* dropout generator key and offset */
    int window_set;               /* 0 = no sliding window */
    int64_t window_left, window_right; /* with window_set; -1 = unbounded */
    float softcap;                /* 0 = none */
    const kern_tensor *k_lens;    /* NULL = all keys; [B] i32/i64 */
    const kern_tensor *lse;       /* NULL = none; f32 output (forward) */
    void *workspace;              /* optional caller scratch (host memory for
                                     kern_sdpa*, device memory for the CUDA
                                     entry points) of at least the call's
                                     *_workspace_size bytes; NULL = the
                                     context's scratch */
    size_t workspace_size;
} kern_sdpa_params;

/* Resolves the defaults in place for queries of head dim `head_dim`: scale
 * 0 without scale_set becomes 1/sqrt(head_dim) (computed as the kernels
 * do), then scale_set = 1; with head_dim <= 0 the scale is left alone. The
 * other fields' zeros are their defaults already (no mask, not causal, no
 * GQA, no dropout, no window, no softcap, all keys, no lse, the context's
 * scratch). NULL is ignored. */
KERN_API void kern_sdpa_params_defaults(kern_sdpa_params *p, int64_t head_dim);

/* Forward. params may be NULL (all defaults). */
KERN_API kern_status kern_sdpa(kern_ctx *ctx, const kern_tensor *q,
                               const kern_tensor *k, const kern_tensor *v,
                               const kern_tensor *out,
                               const kern_sdpa_params *params);

/* Scratch bytes each entry point takes on this context (its thread count
 * and ISA level) for these operands: the size params->workspace must have
 * (0 when the call needs none). Each validates like its entry point;
 * params->workspace is ignored. */
KERN_API kern_status kern_sdpa_workspace_size(kern_ctx *ctx, const kern_tensor *q,
                                              const kern_tensor *k,
                                              const kern_tensor *v,
                                              const kern_tensor *out,
                                              const kern_sdpa_params *params,
                                              size_t *bytes);
KERN_API kern_status kern_sdpa_varlen_workspace_size(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k, const kern_tensor *v,
    const kern_tensor *out, const kern_tensor *cu_seqlens_q,
    const kern_tensor *cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
    const kern_sdpa_params *params, size_t *bytes);
KERN_API kern_status kern_sdpa_backward_workspace_size(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k, const kern_tensor *v,
    const kern_tensor *out, const kern_tensor *dout, const kern_tensor *lse,
    const kern_tensor *dq, const kern_tensor *dk, const kern_tensor *dv,
    const kern_sdpa_params *params, size_t *bytes);
KERN_API kern_status kern_sdpa_varlen_backward_workspace_size(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k, const kern_tensor *v,
    const kern_tensor *out, const kern_tensor *dout, const kern_tensor *lse,
    const kern_tensor *dq, const kern_tensor *dk, const kern_tensor *dv,
    const kern_tensor *cu_seqlens_q, const kern_tensor *cu_seqlens_k,
    int64_t max_seqlen_q, int64_t max_seqlen_k, const kern_sdpa_params *params,
    size_t *bytes);

/* Forward over packed sequences: sequence s has queries
 * [cu_seqlens_q[s], cu_seqlens_q[s+1]) and keys [cu_seqlens_k[s],
 * cu_seqlens_k[s+1]). params->attn_mask and params->k_lens must be NULL;
 * params->lse, when given, is f32 [Hq, Tq]. */
KERN_API kern_status kern_sdpa_varlen(kern_ctx *ctx, const kern_tensor *q,
                                      const kern_tensor *k,
                                      const kern_tensor *v,
                                      const kern_tensor *out,
                                      const kern_tensor *cu_seqlens_q,
                                      const kern_tensor *cu_seqlens_k,
                                      int64_t max_seqlen_q,
                                      int64_t max_seqlen_k,
                                      const kern_sdpa_params *params);

/* Backward: dq [B,Hq,Lq,D], dk [B,Hkv,Lk,D], dv [B,Hkv,Lk,Dv] (input dtype)
 * from the forward's out and lse (f32 [B,Hq,Lq]) and the upstream gradient
 * dout [B,Hq,Lq,Dv]. params must be the forward's (params->lse is
 * ignored). */
KERN_API kern_status kern_sdpa_backward(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k,
    const kern_tensor *v, const kern_tensor *out, const kern_tensor *dout,
    const kern_tensor *lse, const kern_tensor *dq, const kern_tensor *dk,
    const kern_tensor *dv, const kern_sdpa_params *params);

/* Backward over packed sequences (lse f32 [Hq, Tq]). */
KERN_API kern_status kern_sdpa_varlen_backward(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k,
    const kern_tensor *v, const kern_tensor *out, const kern_tensor *dout,
    const kern_tensor *lse, const kern_tensor *dq, const kern_tensor *dk,
    const kern_tensor *dv, const kern_tensor *cu_seqlens_q,
    const kern_tensor *cu_seqlens_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, const kern_sdpa_params *params);

#ifdef __cplusplus
}
#endif
#endif /* KERN_SDPA_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_SDPA_IMPLEMENTED)
KERN__IMPL_DIAG_BEGIN
#define KERN_SDPA_IMPLEMENTED

#include <math.h>
#ifdef KERN_X86
#include <immintrin.h>
#endif
#ifdef KERN_NEON
#include <arm_neon.h>
#endif


#ifdef __cplusplus
extern "C" {
#endif

/* Blocking, the same for every ISA so that scratch layouts and the order of
 * reductions depend only on the shape:
 *   NQ  query rows per panel (the vector lanes of the score tile S^T[key][row]:
 *       the softmax over keys is then vertical, no horizontal reductions);
 *   BK  keys per block (S^T tile 64 x 32 f32 = 8 KiB, stays in L1);
 *   QB  panels per task sharing each K/V block while it is in L1/L2;
 *   ROWS_MAX  below this many query rows per kv head (decode), the row path
 *       computes q.k as dot products instead of wasting panel lanes. */
#define KERN__SDPA_NQ 32
#define KERN__SDPA_BK 64
#define KERN__SDPA_QB 4
#define KERN__SDPA_ROWS_MAX 16
/* Decode-shaped problems are split along the keys until there are about
 * this many tasks (independent of the thread count, for determinism). */
#define KERN__SDPA_SPLIT_TASKS 32
#define KERN__SDPA_SPLIT_MIN_KEYS 512
/* Backward: key ranges per (batch, kv head) until about this many tasks. */
#define KERN__SDPA_BWD_TASKS 8

#define KERN__SDPA_LOG2E 1.4426950408889634f
#define KERN__SDPA_LN2 0.6931471805599453f

/* 2^f on [-0.5, 0.5], relative-error minimax fit (max 1.05e-7 in f32
 * Horner arithmetic). */
#define KERN__SDPA_P1 0.6931471824645996f
#define KERN__SDPA_P2 0.24022646248340607f
#define KERN__SDPA_P3 0.05550328642129898f
#define KERN__SDPA_P4 0.009618489071726799f
#define KERN__SDPA_P5 0.0013399930903688073f
#define KERN__SDPA_P6 0.00015345806605182588f

/* ------------------------------------------------------------ ISA table */

/* C[m][n] (+)= sum_k A[m*a_rs + k*a_ks] * B[k*b_ks + n], m < M, n < N
 * (B rows and C rows contiguous in n; only N lanes are read or written). */
typedef void (*kern__sdpa_mk_fn)(int64_t M, int64_t N, int64_t K,
                                 const float *a, int64_t a_rs, int64_t a_ks,
                                 const float *b, int64_t b_ks, float *c,
                                 int64_t c_rs, int acc);
/* bf16 pairs: C[m][n] (+)= sum_kp A2[m][kp] . B2[kp][n], where A2[m][kp] is
 * the two bf16 at a + m*a_rs + kp*a_kps and B2[kp][n] the two at
 * b + kp*b_ks + 2n (elements). */
typedef void (*kern__sdpa_mk16_fn)(int64_t M, int64_t N, int64_t KP,
                                   const uint16_t *a, int64_t a_rs,
                                   int64_t a_kps, const uint16_t *b,
                                   int64_t b_ks, float *c, int64_t c_rs,
                                   int acc);
/* One online-softmax step over S^T[nk][NQ] (scores in log2 units times c):
 * updates m, l, returns P = 2^(c*S - m) in S and the rescale factors in
 * alpha; returns nonzero if any lane's max grew (alpha != 1). */
typedef int (*kern__sdpa_step_fn)(float *s, int64_t nk, float c, float *m,
                                  float *l, float *alpha);
/* x[i] = 2^x[i] for i < n. */
typedef void (*kern__sdpa_exp2_fn)(float *x, int64_t n);
/* O^T[c][lane] *= alpha[lane] for c < rows, NQ lanes. */
typedef void (*kern__sdpa_scale_fn)(float *ot, int64_t rows, const float *alpha);
/* Rows path (few query rows): S[r*ls + j] = sum_d qf[r*ldq + d] * K_j[d]
 * for j < nk, r < R; K_j at k + j*k_rs elements of dtype dt; qf rows are
 * zero-padded to a multiple of 16. */
typedef void (*kern__sdpa_dots_fn)(int64_t nk, int64_t R, int64_t D,
                                   const float *qf, int64_t ldq,
                                   const void *k, int64_t k_rs, kern_dtype dt,
                                   float *s, int64_t ls);
/* Online-softmax step in row layout (keys along a row): rows r < R of
 * S[r*ls + j], j < nk; otherwise as kern__sdpa_step_fn. */
typedef int (*kern__sdpa_rstep_fn)(float *s, int64_t ls, int64_t R, int64_t nk,
                                   float c, float *m, float *l, float *alpha);
/* bf16 pairs for vdpbf16ps: P2[jp][lane] = (P[2jp][lane], P[2jp+1][lane])
 * from S^T[nk][NQ] (a zero second half when 2jp+1 = nk). */
typedef void (*kern__sdpa_p2_fn)(const float *s, int64_t nk, uint16_t *p2);
/* V pairs: VP[jp][c] = (V[2jp][c], V[2jp+1][c]) for c < Dv, rows at v +
 * j*vrs (bf16). */
typedef void (*kern__sdpa_vpack_fn)(const uint16_t *v, int64_t vrs, int64_t nk,
                                    int64_t Dv, uint16_t *vp);

typedef struct kern__sdpa_isa {
    kern__sdpa_mk_fn mk;
    kern__sdpa_mk16_fn mk16; /* NULL: no native bf16 dot product */
    kern__sdpa_step_fn step;
    kern__sdpa_exp2_fn exp2;
    kern__sdpa_scale_fn scale;
    kern__sdpa_dots_fn dots;
    kern__sdpa_rstep_fn rstep;
    kern__sdpa_p2_fn p2;
    kern__sdpa_vpack_fn vpack;
    /* rows path with bf16 q/k: S[r*ls + j] from bf16 q rows (zero-padded
     * to a multiple of 32) through vdpbf16ps; NULL when unavailable */
    void (*dots16)(int64_t nk, int64_t R, int64_t D, const uint16_t *q16, int64_t ldq,
                   const uint16_t *k, int64_t k_rs, float *s, int64_t ls);
    /* rows path: P rows to bf16 (zero padded to even) */
    void (*rows16)(const float *s, int64_t ls, int64_t R, int64_t nk, uint16_t *p16, int64_t lp);
} kern__sdpa_isa;

/* ---------------------------------------------------------- scalar path */

static void kern__sdpa_mk_f32__scalar(int64_t M, int64_t N, int64_t K,
                                      const float *a, int64_t a_rs,
                                      int64_t a_ks, const float *b,
                                      int64_t b_ks, float *c, int64_t c_rs,
                                      int acc) {
    int64_t m, n0, n, k;
    for (m = 0; m < M; m++) {
        for (n0 = 0; n0 < N; n0 += 16) {
            float t[16];
            int64_t nn = N - n0 < 16 ? N - n0 : 16;
            float *cr = c + m * c_rs + n0;
            for (n = 0; n < nn; n++) t[n] = acc ? cr[n] : 0.0f;
            for (k = 0; k < K; k++) {
                float av = a[m * a_rs + k * a_ks];
                const float *br = b + k * b_ks + n0;
                for (n = 0; n < nn; n++) t[n] += av * br[n];
            }
            for (n = 0; n < nn; n++) cr[n] = t[n];
        }
    }
}

static void kern__sdpa_exp2__scalar(float *x, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) x[i] = exp2f(x[i]);
}

static int kern__sdpa_step__scalar(float *s, int64_t nk, float c, float *m,
                                   float *l, float *alpha) {
    int64_t j, r;
    int changed = 0;
    float mx[KERN__SDPA_NQ], ms[KERN__SDPA_NQ], sum[KERN__SDPA_NQ];
    for (r = 0; r < KERN__SDPA_NQ; r++) mx[r] = -INFINITY;
    for (j = 0; j < nk; j++)
        for (r = 0; r < KERN__SDPA_NQ; r++) {
            float x = s[j * KERN__SDPA_NQ + r] * c;
            s[j * KERN__SDPA_NQ + r] = x;
            /* NaN-keeping max: the NaN lands in P below anyway */
            if (x > mx[r]) mx[r] = x;
        }
    for (r = 0; r < KERN__SDPA_NQ; r++) {
        alpha[r] = 1.0f;
        if (mx[r] > m[r]) {
            alpha[r] = exp2f(m[r] - mx[r]);
            m[r] = mx[r];
            changed = 1;
        }
        ms[r] = m[r] == -INFINITY ? 0.0f : m[r];
        sum[r] = 0.0f;
    }
    for (j = 0; j < nk; j++)
        for (r = 0; r < KERN__SDPA_NQ; r++) {
            float p = exp2f(s[j * KERN__SDPA_NQ + r] - ms[r]);
            s[j * KERN__SDPA_NQ + r] = p;
            sum[r] += p;
        }
    for (r = 0; r < KERN__SDPA_NQ; r++) l[r] = l[r] * alpha[r] + sum[r];
    return changed;
}

static void kern__sdpa_scale__scalar(float *ot, int64_t rows, const float *alpha) {
    int64_t c, r;
    for (c = 0; c < rows; c++)
        for (r = 0; r < KERN__SDPA_NQ; r++) ot[c * KERN__SDPA_NQ + r] *= alpha[r];
}

static inline float kern__sdpa_ld(const void *p, kern_dtype dt, int64_t i) {
    if (dt == KERN_F32) return ((const float *)p)[i];
    if (dt == KERN_BF16) return kern_bf16_to_f32(((const uint16_t *)p)[i]);
    return kern_f16_to_f32(((const uint16_t *)p)[i]);
}

static void kern__sdpa_dots__scalar(int64_t nk, int64_t R, int64_t D,
                                    const float *qf, int64_t ldq, const void *k,
                                    int64_t k_rs, kern_dtype dt, float *s, int64_t ls) {
    int64_t j, r, d;
    for (j = 0; j < nk; j++) {
        for (r = 0; r < R; r++) {
            float acc = 0.0f;
            for (d = 0; d < D; d++)
                acc += qf[r * ldq + d] * kern__sdpa_ld(k, dt, j * k_rs + d);
            s[r * ls + j] = acc;
        }
    }
}

static int kern__sdpa_rstep__scalar(float *s, int64_t ls, int64_t R, int64_t nk, float c,
                                    float *m, float *l, float *alpha) {
    int64_t r, j;
    int changed = 0;
    for (r = 0; r < R; r++) {
        float *row = s + r * ls, mx = -INFINITY, ms, sum = 0.0f;
        for (j = 0; j < nk; j++) {
            row[j] *= c;
            if (row[j] > mx) mx = row[j];
        }
        alpha[r] = 1.0f;
        if (mx > m[r]) {
            alpha[r] = exp2f(m[r] - mx);
            m[r] = mx;
            changed = 1;
        }
        ms = m[r] == -INFINITY ? 0.0f : m[r];
        for (j = 0; j < nk; j++) {
            row[j] = exp2f(row[j] - ms);
            sum += row[j];
        }
        l[r] = l[r] * alpha[r] + sum;
    }
    return changed;
}

static void kern__sdpa_p2__scalar(const float *s, int64_t nk, uint16_t *p2) {
    int64_t jp, r, nkp = (nk + 1) / 2;
    for (jp = 0; jp < nkp; jp++) {
        const float *s0 = s + 2 * jp * KERN__SDPA_NQ;
        uint16_t *dst = p2 + jp * KERN__SDPA_NQ * 2;
        for (r = 0; r < KERN__SDPA_NQ; r++) {
            dst[2 * r] = kern_f32_to_bf16(s0[r]);
            dst[2 * r + 1] = 2 * jp + 1 < nk ? kern_f32_to_bf16(s0[KERN__SDPA_NQ + r]) : 0;
        }
    }
}

static void kern__sdpa_vpack__scalar(const uint16_t *v, int64_t vrs, int64_t nk, int64_t Dv,
                                     uint16_t *vp) {
    int64_t jp, c, nkp = (nk + 1) / 2;
    for (jp = 0; jp < nkp; jp++) {
        const uint16_t *v0 = v + 2 * jp * vrs;
        const uint16_t *v1 = 2 * jp + 1 < nk ? v0 + vrs : NULL;
        uint16_t *dst = vp + jp * Dv * 2;
        for (c = 0; c < Dv; c++) {
            dst[2 * c] = v0[c];
            dst[2 * c + 1] = v1 ? v1[c] : 0;
        }
    }
}

/* ------------------------------------------------------------ AVX2 path */
#ifdef KERN_X86

KERN_TARGET_AVX2 static inline __m256i kern__sdpa_tailmask__avx2(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? (n < 0 ? 0 : n) : 8)), idx);
}

/* 6 rows x 16 lanes: 12 ymm accumulators, 2 B loads and 6 broadcasts per
 * k step. B loads and C stores are masked for the lane tail. */
#define KERN__SDPA_A2ROW(r)                                                   \
    {                                                                         \
        __m256 x = _mm256_broadcast_ss(a##r + ao);                            \
        c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);                            \
        c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);                            \
    }
KERN_TARGET_AVX2 static void kern__sdpa_mk_6x16__avx2(
    int64_t K, const float *const *ap, int64_t a_ks, const float *b,
    int64_t b_ks, float *const *cp, int mr, int64_t nn, int acc) {
    const float *a0 = ap[0], *a1 = ap[1], *a2 = ap[2], *a3 = ap[3];
    const float *a4 = ap[4], *a5 = ap[5];
    __m256i k0 = kern__sdpa_tailmask__avx2(nn), k1 = kern__sdpa_tailmask__avx2(nn - 8);
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    int64_t ao = 0, k;
    c00 = c01 = c10 = c11 = c20 = c21 = _mm256_setzero_ps();
    c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    if (acc) {
#define KERN__SDPA_A2LD(r)                                                    \
    if (mr > r) {                                                             \
        c##r##0 = _mm256_maskload_ps(cp[r], k0);                              \
        c##r##1 = _mm256_maskload_ps(cp[r] + 8, k1);                          \
    }
        KERN__SDPA_A2LD(0) KERN__SDPA_A2LD(1) KERN__SDPA_A2LD(2)
        KERN__SDPA_A2LD(3) KERN__SDPA_A2LD(4) KERN__SDPA_A2LD(5)
#undef KERN__SDPA_A2LD
    }
    for (k = 0; k < K; k++) {
        __m256 b0 = _mm256_maskload_ps(b, k0), b1 = _mm256_maskload_ps(b + 8, k1);
        KERN__SDPA_A2ROW(0) KERN__SDPA_A2ROW(1) KERN__SDPA_A2ROW(2)
        KERN__SDPA_A2ROW(3) KERN__SDPA_A2ROW(4) KERN__SDPA_A2ROW(5)
        ao += a_ks;
        b += b_ks;
    }
#define KERN__SDPA_A2ST(r)                                                    \
    if (mr > r) {                                                             \
        _mm256_maskstore_ps(cp[r], k0, c##r##0);                              \
        _mm256_maskstore_ps(cp[r] + 8, k1, c##r##1);                          \
    }
    KERN__SDPA_A2ST(0) KERN__SDPA_A2ST(1) KERN__SDPA_A2ST(2)
    KERN__SDPA_A2ST(3) KERN__SDPA_A2ST(4) KERN__SDPA_A2ST(5)
#undef KERN__SDPA_A2ST
}

KERN_TARGET_AVX2 static void kern__sdpa_mk_f32__avx2(int64_t M, int64_t N, int64_t K,
                                                     const float *a, int64_t a_rs,
                                                     int64_t a_ks, const float *b,
                                                     int64_t b_ks, float *c,
                                                     int64_t c_rs, int acc) {
    int64_t m0, n0;
    for (m0 = 0; m0 < M; m0 += 6) {
        int mr = (int)(M - m0 < 6 ? M - m0 : 6), r;
        const float *ap[6];
        float *cp[6];
        for (n0 = 0; n0 < N; n0 += 16) {
            for (r = 0; r < 6; r++) {
                int64_t rr = m0 + (r < mr ? r : 0);
                ap[r] = a + rr * a_rs;
                cp[r] = c + rr * c_rs + n0;
            }
            kern__sdpa_mk_6x16__avx2(K, ap, a_ks, b + n0, b_ks, cp, mr, N - n0, acc);
        }
    }
}

KERN_TARGET_AVX2 static inline __m256 kern__sdpa_exp2v__avx2(__m256 x) {
    __m256 n, f, p;
    __m256i e;
    x = _mm256_max_ps(_mm256_set1_ps(-127.0f), x); /* NaN stays (2nd operand) */
    x = _mm256_min_ps(_mm256_set1_ps(128.0f), x);
    n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    f = _mm256_sub_ps(x, n);
    p = _mm256_set1_ps(KERN__SDPA_P6);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(KERN__SDPA_P5));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(KERN__SDPA_P4));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(KERN__SDPA_P3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(KERN__SDPA_P2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(KERN__SDPA_P1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    /* 2^n by exponent bits: n = -127 gives +0 (so -inf -> 0), n = 128 gives
     * +Inf; a NaN x gives NaN p times a finite factor. */
    e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

KERN_TARGET_AVX2 static void kern__sdpa_exp2__avx2(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, kern__sdpa_exp2v__avx2(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i km = kern__sdpa_tailmask__avx2(n - i);
        _mm256_maskstore_ps(x + i, km, kern__sdpa_exp2v__avx2(_mm256_maskload_ps(x + i, km)));
    }
}

KERN_TARGET_AVX2 static int kern__sdpa_step__avx2(float *s, int64_t nk, float c,
                                                  float *m, float *l, float *alpha) {
    int64_t j;
    int v, changed = 0;
    const __m256 cv = _mm256_set1_ps(c), ninf = _mm256_set1_ps(-INFINITY);
    for (v = 0; v < KERN__SDPA_NQ / 8; v++) {
        __m256 mx = ninf, mo = _mm256_loadu_ps(m + 8 * v), mn, al, ms, sum;
        for (j = 0; j < nk; j++) {
            float *sp = s + j * KERN__SDPA_NQ + 8 * v;
            __m256 x = _mm256_mul_ps(_mm256_loadu_ps(sp), cv);
            _mm256_storeu_ps(sp, x);
            mx = _mm256_max_ps(mx, x);
        }
        mn = _mm256_max_ps(mx, mo); /* NaN in mx is dropped here: fine */
        {
            __m256 gt = _mm256_cmp_ps(mn, mo, _CMP_GT_OQ);
            int msk = _mm256_movemask_ps(gt);
            al = _mm256_set1_ps(1.0f);
            if (msk) {
                al = _mm256_blendv_ps(al, kern__sdpa_exp2v__avx2(_mm256_sub_ps(mo, mn)), gt);
                changed = 1;
            }
        }
        _mm256_storeu_ps(m + 8 * v, mn);
        _mm256_storeu_ps(alpha + 8 * v, al);
        ms = _mm256_blendv_ps(mn, _mm256_setzero_ps(), _mm256_cmp_ps(mn, ninf, _CMP_EQ_OQ));
        sum = _mm256_setzero_ps();
        for (j = 0; j < nk; j++) {
            float *sp = s + j * KERN__SDPA_NQ + 8 * v;
            __m256 p = kern__sdpa_exp2v__avx2(_mm256_sub_ps(_mm256_loadu_ps(sp), ms));
            _mm256_storeu_ps(sp, p);
            sum = _mm256_add_ps(sum, p);
        }
        _mm256_storeu_ps(l + 8 * v, _mm256_fmadd_ps(_mm256_loadu_ps(l + 8 * v), al, sum));
    }
    return changed;
}

KERN_TARGET_AVX2 static void kern__sdpa_scale__avx2(float *ot, int64_t rows,
                                                    const float *alpha) {
    int64_t c;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 8; v++) {
        __m256 al = _mm256_loadu_ps(alpha + 8 * v);
        for (c = 0; c < rows; c++) {
            float *p = ot + c * KERN__SDPA_NQ + 8 * v;
            _mm256_storeu_ps(p, _mm256_mul_ps(_mm256_loadu_ps(p), al));
        }
    }
}

KERN_TARGET_AVX2 static inline __m256 kern__sdpa_ld8__avx2(const void *p, kern_dtype dt,
                                                           int64_t i, int64_t n) {
    if (dt == KERN_F32)
        return _mm256_maskload_ps((const float *)p + i, kern__sdpa_tailmask__avx2(n));
    {
        uint16_t t[8];
        int64_t e;
        const uint16_t *h = (const uint16_t *)p + i;
        __m128i w;
        for (e = 0; e < 8; e++) t[e] = e < n ? h[e] : 0;
        w = _mm_loadu_si128((const __m128i *)t);
        if (dt == KERN_BF16)
            return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(w), 16));
        return _mm256_cvtph_ps(w);
    }
}

KERN_TARGET_AVX2 static void kern__sdpa_dots__avx2(int64_t nk, int64_t R, int64_t D,
                                                   const float *qf, int64_t ldq,
                                                   const void *k, int64_t k_rs,
                                                   kern_dtype dt, float *s, int64_t ls) {
    int64_t j, r, d;
    for (j = 0; j < nk; j++) {
        for (r = 0; r < R; r += 4) {
            __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
            int64_t r1 = r + 1 < R ? r + 1 : r, r2 = r + 2 < R ? r + 2 : r;
            int64_t r3 = r + 3 < R ? r + 3 : r;
            float t[8];
            int e;
            for (d = 0; d < D; d += 8) {
                __m256 kv = kern__sdpa_ld8__avx2(k, dt, j * k_rs + d, D - d);
                c0 = _mm256_fmadd_ps(_mm256_loadu_ps(qf + r * ldq + d), kv, c0);
                c1 = _mm256_fmadd_ps(_mm256_loadu_ps(qf + r1 * ldq + d), kv, c1);
                c2 = _mm256_fmadd_ps(_mm256_loadu_ps(qf + r2 * ldq + d), kv, c2);
                c3 = _mm256_fmadd_ps(_mm256_loadu_ps(qf + r3 * ldq + d), kv, c3);
            }
            /* horizontal sums of 4 vectors */
            {
                __m256 h01 = _mm256_hadd_ps(c0, c1), h23 = _mm256_hadd_ps(c2, c3);
                __m256 h = _mm256_hadd_ps(h01, h23);
                __m128 lo = _mm256_castps256_ps128(h), hi = _mm256_extractf128_ps(h, 1);
                _mm_storeu_ps(t, _mm_add_ps(lo, hi));
            }
            for (e = 0; e < 4 && r + e < R; e++) s[(r + e) * ls + j] = t[e];
        }
    }
}

KERN_TARGET_AVX2 static int kern__sdpa_rstep__avx2(float *s, int64_t ls, int64_t R, int64_t nk,
                                                   float c, float *m, float *l, float *alpha) {
    const __m256 cv = _mm256_set1_ps(c), ninf = _mm256_set1_ps(-INFINITY);
    int64_t r, j;
    int changed = 0;
    for (r = 0; r < R; r++) {
        float *row = s + r * ls, mx, ms, t[8];
        __m256 vm = ninf, sum = _mm256_setzero_ps(), msv;
        int e;
        for (j = 0; j < nk; j += 8) {
            __m256i km = kern__sdpa_tailmask__avx2(nk - j);
            __m256 x = _mm256_mul_ps(_mm256_maskload_ps(row + j, km), cv);
            _mm256_maskstore_ps(row + j, km, x);
            vm = _mm256_max_ps(vm, _mm256_blendv_ps(ninf, x, _mm256_castsi256_ps(km)));
        }
        _mm256_storeu_ps(t, vm);
        mx = t[0];
        for (e = 1; e < 8; e++) mx = t[e] > mx ? t[e] : mx;
        alpha[r] = 1.0f;
        if (mx > m[r]) {
            alpha[r] = exp2f(m[r] - mx);
            m[r] = mx;
            changed = 1;
        }
        ms = m[r] == -INFINITY ? 0.0f : m[r];
        msv = _mm256_set1_ps(ms);
        for (j = 0; j < nk; j += 8) {
            __m256i km = kern__sdpa_tailmask__avx2(nk - j);
            __m256 p = kern__sdpa_exp2v__avx2(_mm256_sub_ps(_mm256_maskload_ps(row + j, km), msv));
            p = _mm256_and_ps(p, _mm256_castsi256_ps(km));
            _mm256_maskstore_ps(row + j, km, p);
            sum = _mm256_add_ps(sum, p);
        }
        _mm256_storeu_ps(t, sum);
        l[r] = l[r] * alpha[r] + (((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7])));
    }
    return changed;
}

/* --------------------------------------------------------- AVX-512 path */

/* 8 rows x 32 lanes: 16 zmm accumulators, 2 B loads and 8 broadcasts per k
 * step; lane tails through masks. */
#define KERN__SDPA_A5ROW2(r)                                                  \
    {                                                                         \
        __m512 x = _mm512_set1_ps(a##r[ao]);                                  \
        c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                            \
        c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);                            \
    }
#define KERN__SDPA_A5ROW1(r)                                                  \
    {                                                                         \
        __m512 x = _mm512_set1_ps(a##r[ao]);                                  \
        c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                            \
    }
#define KERN__SDPA_A5ALL(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)

KERN_TARGET_AVX512 static void kern__sdpa_mk_8x32__avx512(
    int64_t K, const float *const *ap, int64_t a_ks, const float *b,
    int64_t b_ks, float *const *cp, int mr, __mmask16 k0, __mmask16 k1,
    int acc) {
    const float *a0 = ap[0], *a1 = ap[1], *a2 = ap[2], *a3 = ap[3];
    const float *a4 = ap[4], *a5 = ap[5], *a6 = ap[6], *a7 = ap[7];
    __m512 c00, c01, c10, c11, c20, c21, c30, c31;
    __m512 c40, c41, c50, c51, c60, c61, c70, c71;
    int64_t ao = 0, k;
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm512_setzero_ps();
    c40 = c41 = c50 = c51 = c60 = c61 = c70 = c71 = _mm512_setzero_ps();
    if (acc) {
#define KERN__SDPA_A5LD(r)                                                    \
    if (mr > r) {                                                             \
        c##r##0 = _mm512_maskz_loadu_ps(k0, cp[r]);                           \
        c##r##1 = _mm512_maskz_loadu_ps(k1, cp[r] + 16);                      \
    }
        KERN__SDPA_A5ALL(KERN__SDPA_A5LD)
#undef KERN__SDPA_A5LD
    }
    for (k = 0; k < K; k++) {
        __m512 b0 = _mm512_maskz_loadu_ps(k0, b), b1 = _mm512_maskz_loadu_ps(k1, b + 16);
        KERN__SDPA_A5ALL(KERN__SDPA_A5ROW2)
        ao += a_ks;
        b += b_ks;
    }
#define KERN__SDPA_A5ST(r)                                                    \
    if (mr > r) {                                                             \
        _mm512_mask_storeu_ps(cp[r], k0, c##r##0);                            \
        _mm512_mask_storeu_ps(cp[r] + 16, k1, c##r##1);                       \
    }
    KERN__SDPA_A5ALL(KERN__SDPA_A5ST)
#undef KERN__SDPA_A5ST
}

KERN_TARGET_AVX512 static void kern__sdpa_mk_8x16__avx512(
    int64_t K, const float *const *ap, int64_t a_ks, const float *b,
    int64_t b_ks, float *const *cp, int mr, __mmask16 k0, int acc) {
    const float *a0 = ap[0], *a1 = ap[1], *a2 = ap[2], *a3 = ap[3];
    const float *a4 = ap[4], *a5 = ap[5], *a6 = ap[6], *a7 = ap[7];
    __m512 c00, c10, c20, c30, c40, c50, c60, c70;
    int64_t ao = 0, k;
    c00 = c10 = c20 = c30 = c40 = c50 = c60 = c70 = _mm512_setzero_ps();
    if (acc) {
#define KERN__SDPA_A5LD(r)                                                    \
    if (mr > r) c##r##0 = _mm512_maskz_loadu_ps(k0, cp[r]);
        KERN__SDPA_A5ALL(KERN__SDPA_A5LD)
#undef KERN__SDPA_A5LD
    }
    for (k = 0; k < K; k++) {
        __m512 b0 = _mm512_maskz_loadu_ps(k0, b);
        KERN__SDPA_A5ALL(KERN__SDPA_A5ROW1)
        ao += a_ks;
        b += b_ks;
    }
#define KERN__SDPA_A5ST(r)                                                    \
    if (mr > r) _mm512_mask_storeu_ps(cp[r], k0, c##r##0);
    KERN__SDPA_A5ALL(KERN__SDPA_A5ST)
#undef KERN__SDPA_A5ST
}

static inline __mmask16 kern__sdpa_k16(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* 4 rows x 64 lanes (16 accumulators) for short M: the rows path's
 * P.V with R <= 4 query rows (decode). */
#define KERN__SDPA_A5ROW4(r)                                                  \
    {                                                                         \
        __m512 x = _mm512_set1_ps(a##r[ao]);                                  \
        c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                            \
        c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);                            \
        c##r##2 = _mm512_fmadd_ps(x, b2, c##r##2);                            \
        c##r##3 = _mm512_fmadd_ps(x, b3, c##r##3);                            \
    }
KERN_TARGET_AVX512 static void kern__sdpa_mk_4x64__avx512(
    int64_t K, const float *const *ap, int64_t a_ks, const float *b,
    int64_t b_ks, float *const *cp, int mr, int64_t nn, int acc) {
    const float *a0 = ap[0], *a1 = ap[1], *a2 = ap[2], *a3 = ap[3];
    __mmask16 k0 = kern__sdpa_k16(nn), k1 = kern__sdpa_k16(nn - 16);
    __mmask16 k2 = kern__sdpa_k16(nn - 32), k3 = kern__sdpa_k16(nn - 48);
    __m512 c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33;
    int64_t ao = 0, k;
    c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = _mm512_setzero_ps();
    c20 = c21 = c22 = c23 = c30 = c31 = c32 = c33 = _mm512_setzero_ps();
    if (acc) {
#define KERN__SDPA_A5LD(r)                                                    \
    if (mr > r) {                                                             \
        c##r##0 = _mm512_maskz_loadu_ps(k0, cp[r]);                           \
        c##r##1 = _mm512_maskz_loadu_ps(k1, cp[r] + 16);                      \
        c##r##2 = _mm512_maskz_loadu_ps(k2, cp[r] + 32);                      \
        c##r##3 = _mm512_maskz_loadu_ps(k3, cp[r] + 48);                      \
    }
        KERN__SDPA_A5LD(0) KERN__SDPA_A5LD(1) KERN__SDPA_A5LD(2) KERN__SDPA_A5LD(3)
#undef KERN__SDPA_A5LD
    }
    for (k = 0; k < K; k++) {
        __m512 b0 = _mm512_maskz_loadu_ps(k0, b), b1 = _mm512_maskz_loadu_ps(k1, b + 16);
        __m512 b2 = _mm512_maskz_loadu_ps(k2, b + 32), b3 = _mm512_maskz_loadu_ps(k3, b + 48);
        KERN__SDPA_A5ROW4(0) KERN__SDPA_A5ROW4(1) KERN__SDPA_A5ROW4(2) KERN__SDPA_A5ROW4(3)
        ao += a_ks;
        b += b_ks;
    }
#define KERN__SDPA_A5ST(r)                                                    \
    if (mr > r) {                                                             \
        _mm512_mask_storeu_ps(cp[r], k0, c##r##0);                            \
        _mm512_mask_storeu_ps(cp[r] + 16, k1, c##r##1);                       \
        _mm512_mask_storeu_ps(cp[r] + 32, k2, c##r##2);                       \
        _mm512_mask_storeu_ps(cp[r] + 48, k3, c##r##3);                       \
    }
    KERN__SDPA_A5ST(0) KERN__SDPA_A5ST(1) KERN__SDPA_A5ST(2) KERN__SDPA_A5ST(3)
#undef KERN__SDPA_A5ST
}

KERN_TARGET_AVX512 static void kern__sdpa_mk_f32__avx512(int64_t M, int64_t N, int64_t K,
                                                         const float *a, int64_t a_rs,
                                                         int64_t a_ks, const float *b,
                                                         int64_t b_ks, float *c,
                                                         int64_t c_rs, int acc) {
    int64_t m0, n0;
    if (M <= 4) {
        const float *ap[4];
        float *cp[4];
        int r, mr = (int)M;
        for (n0 = 0; n0 < N; n0 += 64) {
            for (r = 0; r < 4; r++) {
                int64_t rr = r < mr ? r : 0;
                ap[r] = a + rr * a_rs;
                cp[r] = c + rr * c_rs + n0;
            }
            kern__sdpa_mk_4x64__avx512(K, ap, a_ks, b + n0, b_ks, cp, mr, N - n0, acc);
        }
        return;
    }
    for (m0 = 0; m0 < M; m0 += 8) {
        int mr = (int)(M - m0 < 8 ? M - m0 : 8), r;
        const float *ap[8];
        float *cp[8];
        for (n0 = 0; n0 < N; n0 += 32) {
            int64_t nn = N - n0;
            for (r = 0; r < 8; r++) {
                int64_t rr = m0 + (r < mr ? r : 0);
                ap[r] = a + rr * a_rs;
                cp[r] = c + rr * c_rs + n0;
            }
            if (nn > 16)
                kern__sdpa_mk_8x32__avx512(K, ap, a_ks, b + n0, b_ks, cp, mr,
                                           kern__sdpa_k16(nn), kern__sdpa_k16(nn - 16), acc);
            else
                kern__sdpa_mk_8x16__avx512(K, ap, a_ks, b + n0, b_ks, cp, mr,
                                           kern__sdpa_k16(nn), acc);
        }
    }
}

/* bf16 pairs through vdpbf16ps: 8 rows x 32 lanes, each k step consumes
 * two keys (or two head-dim elements). */
#define KERN__SDPA_B5ROW(r)                                                   \
    {                                                                         \
        uint32_t w;                                                           \
        __m512i x;                                                            \
        memcpy(&w, a##r + ao, 4);                                             \
        x = _mm512_set1_epi32((int)w);                                        \
        c##r##0 = _mm512_dpbf16_ps(c##r##0, (__m512bh)x, (__m512bh)b0);       \
        c##r##1 = _mm512_dpbf16_ps(c##r##1, (__m512bh)x, (__m512bh)b1);       \
    }
KERN_TARGET_AVX512BF16 static void kern__sdpa_mk16_8x32__avx512bf16(
    int64_t KP, const uint16_t *const *ap, int64_t a_kps, const uint16_t *b,
    int64_t b_ks, float *const *cp, int mr, __mmask16 k0, __mmask16 k1,
    int acc) {
    const uint16_t *a0 = ap[0], *a1 = ap[1], *a2 = ap[2], *a3 = ap[3];
    const uint16_t *a4 = ap[4], *a5 = ap[5], *a6 = ap[6], *a7 = ap[7];
    __m512 c00, c01, c10, c11, c20, c21, c30, c31;
    __m512 c40, c41, c50, c51, c60, c61, c70, c71;
    int64_t ao = 0, k;
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm512_setzero_ps();
    c40 = c41 = c50 = c51 = c60 = c61 = c70 = c71 = _mm512_setzero_ps();
    if (acc) {
#define KERN__SDPA_A5LD(r)                                                    \
    if (mr > r) {                                                             \
        c##r##0 = _mm512_maskz_loadu_ps(k0, cp[r]);                           \
        c##r##1 = _mm512_maskz_loadu_ps(k1, cp[r] + 16);                      \
    }
        KERN__SDPA_A5ALL(KERN__SDPA_A5LD)
#undef KERN__SDPA_A5LD
    }
    for (k = 0; k < KP; k++) {
        __m512i b0 = _mm512_maskz_loadu_epi32(k0, b), b1 = _mm512_maskz_loadu_epi32(k1, b + 32);
        KERN__SDPA_A5ALL(KERN__SDPA_B5ROW)
        ao += a_kps;
        b += b_ks;
    }
#define KERN__SDPA_A5ST(r)                                                    \
    if (mr > r) {                                                             \
        _mm512_mask_storeu_ps(cp[r], k0, c##r##0);                            \
        _mm512_mask_storeu_ps(cp[r] + 16, k1, c##r##1);                       \
    }
    KERN__SDPA_A5ALL(KERN__SDPA_A5ST)
#undef KERN__SDPA_A5ST
}

#define KERN__SDPA_B5ROW4(r)                                                  \
    {                                                                         \
        uint32_t w;                                                           \
        __m512bh x;                                                           \
        memcpy(&w, a##r + ao, 4);                                             \
        x = (__m512bh)_mm512_set1_epi32((int)w);                              \
        c##r##0 = _mm512_dpbf16_ps(c##r##0, x, (__m512bh)b0);                 \
        c##r##1 = _mm512_dpbf16_ps(c##r##1, x, (__m512bh)b1);                 \
        c##r##2 = _mm512_dpbf16_ps(c##r##2, x, (__m512bh)b2);                 \
        c##r##3 = _mm512_dpbf16_ps(c##r##3, x, (__m512bh)b3);                 \
    }
/* 4 rows x 64 lanes of bf16 pairs (decode P.V with <= 4 query rows). */
KERN_TARGET_AVX512BF16 static void kern__sdpa_mk16_4x64__avx512bf16(
    int64_t KP, const uint16_t *const *ap, int64_t a_kps, const uint16_t *b,
    int64_t b_ks, float *const *cp, int mr, int64_t nn, int acc) {
    const uint16_t *a0 = ap[0], *a1 = ap[1], *a2 = ap[2], *a3 = ap[3];
    __mmask16 k0 = kern__sdpa_k16(nn), k1 = kern__sdpa_k16(nn - 16);
    __mmask16 k2 = kern__sdpa_k16(nn - 32), k3 = kern__sdpa_k16(nn - 48);
    __m512 c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33;
    int64_t ao = 0, k;
    c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = _mm512_setzero_ps();
    c20 = c21 = c22 = c23 = c30 = c31 = c32 = c33 = _mm512_setzero_ps();
    if (acc) {
#define KERN__SDPA_A5LD(r)                                                    \
    if (mr > r) {                                                             \
        c##r##0 = _mm512_maskz_loadu_ps(k0, cp[r]);                           \
        c##r##1 = _mm512_maskz_loadu_ps(k1, cp[r] + 16);                      \
        c##r##2 = _mm512_maskz_loadu_ps(k2, cp[r] + 32);                      \
        c##r##3 = _mm512_maskz_loadu_ps(k3, cp[r] + 48);                      \
    }
        KERN__SDPA_A5LD(0) KERN__SDPA_A5LD(1) KERN__SDPA_A5LD(2) KERN__SDPA_A5LD(3)
#undef KERN__SDPA_A5LD
    }
    for (k = 0; k < KP; k++) {
        __m512i b0 = _mm512_maskz_loadu_epi32(k0, b), b1 = _mm512_maskz_loadu_epi32(k1, b + 32);
        __m512i b2 = _mm512_maskz_loadu_epi32(k2, b + 64), b3 = _mm512_maskz_loadu_epi32(k3, b + 96);
        KERN__SDPA_B5ROW4(0) KERN__SDPA_B5ROW4(1) KERN__SDPA_B5ROW4(2) KERN__SDPA_B5ROW4(3)
        ao += a_kps;
        b += b_ks;
    }
#define KERN__SDPA_A5ST(r)                                                    \
    if (mr > r) {                                                             \
        _mm512_mask_storeu_ps(cp[r], k0, c##r##0);                            \
        _mm512_mask_storeu_ps(cp[r] + 16, k1, c##r##1);                       \
        _mm512_mask_storeu_ps(cp[r] + 32, k2, c##r##2);                       \
        _mm512_mask_storeu_ps(cp[r] + 48, k3, c##r##3);                       \
    }
    KERN__SDPA_A5ST(0) KERN__SDPA_A5ST(1) KERN__SDPA_A5ST(2) KERN__SDPA_A5ST(3)
#undef KERN__SDPA_A5ST
}

/* Row-layout probabilities to bf16 (pairs along keys are adjacent), zero
 * padded to an even count. */
KERN_TARGET_AVX512BF16 static void kern__sdpa_rows16__avx512bf16(const float *s, int64_t ls,
                                                                 int64_t R, int64_t nk,
                                                                 uint16_t *p16, int64_t lp) {
    int64_t r, j, ne = (nk + 1) & ~(int64_t)1;
    for (r = 0; r < R; r++)
        for (j = 0; j < ne; j += 16) {
            __mmask16 km = kern__sdpa_k16(nk - j), ks = kern__sdpa_k16(ne - j);
            __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(km, s + r * ls + j));
            _mm256_mask_storeu_epi16(p16 + r * lp + j, ks, h);
        }
}

KERN_TARGET_AVX512BF16 static void kern__sdpa_mk16__avx512bf16(
    int64_t M, int64_t N, int64_t KP, const uint16_t *a, int64_t a_rs,
    int64_t a_kps, const uint16_t *b, int64_t b_ks, float *c, int64_t c_rs,
    int acc) {
    int64_t m0, n0;
    if (M <= 4) {
        const uint16_t *ap[4];
        float *cp[4];
        int r, mr = (int)M;
        for (n0 = 0; n0 < N; n0 += 64) {
            for (r = 0; r < 4; r++) {
                int64_t rr = r < mr ? r : 0;
                ap[r] = a + rr * a_rs;
                cp[r] = c + rr * c_rs + n0;
            }
            kern__sdpa_mk16_4x64__avx512bf16(KP, ap, a_kps, b + 2 * n0, b_ks, cp, mr, N - n0, acc);
        }
        return;
    }
    for (m0 = 0; m0 < M; m0 += 8) {
        int mr = (int)(M - m0 < 8 ? M - m0 : 8), r;
        const uint16_t *ap[8];
        float *cp[8];
        for (n0 = 0; n0 < N; n0 += 32) {
            int64_t nn = N - n0;
            for (r = 0; r < 8; r++) {
                int64_t rr = m0 + (r < mr ? r : 0);
                ap[r] = a + rr * a_rs;
                cp[r] = c + rr * c_rs + n0;
            }
            kern__sdpa_mk16_8x32__avx512bf16(KP, ap, a_kps, b + 2 * n0, b_ks, cp, mr,
                                             kern__sdpa_k16(nn), kern__sdpa_k16(nn - 16),
                                             acc);
        }
    }
}

KERN_TARGET_AVX512 static inline __m512 kern__sdpa_exp2v__avx512(__m512 x) {
    __m512 n, f, p;
    /* clamp keeps NaN (second operand); -inf -> -200 -> exactly 0 */
    x = _mm512_max_ps(_mm512_set1_ps(-200.0f), x);
    x = _mm512_min_ps(_mm512_set1_ps(129.0f), x);
    n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    f = _mm512_sub_ps(x, n);
    p = _mm512_set1_ps(KERN__SDPA_P6);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(KERN__SDPA_P5));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(KERN__SDPA_P4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(KERN__SDPA_P3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(KERN__SDPA_P2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(KERN__SDPA_P1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

KERN_TARGET_AVX512 static void kern__sdpa_exp2__avx512(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, kern__sdpa_exp2v__avx512(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 km = kern__sdpa_k16(n - i);
        _mm512_mask_storeu_ps(x + i, km, kern__sdpa_exp2v__avx512(_mm512_maskz_loadu_ps(km, x + i)));
    }
}

KERN_TARGET_AVX512 static int kern__sdpa_step__avx512(float *s, int64_t nk, float c,
                                                      float *m, float *l, float *alpha) {
    const __m512 cv = _mm512_set1_ps(c), ninf = _mm512_set1_ps(-INFINITY);
    __m512 mx0 = ninf, mx1 = ninf, mo0, mo1, mn0, mn1, al0, al1, ms0, ms1;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    __mmask16 g0, g1;
    int64_t j;
    int changed = 0;
    for (j = 0; j < nk; j++) {
        float *sp = s + j * KERN__SDPA_NQ;
        __m512 x0 = _mm512_mul_ps(_mm512_loadu_ps(sp), cv);
        __m512 x1 = _mm512_mul_ps(_mm512_loadu_ps(sp + 16), cv);
        _mm512_storeu_ps(sp, x0);
        _mm512_storeu_ps(sp + 16, x1);
        mx0 = _mm512_max_ps(mx0, x0);
        mx1 = _mm512_max_ps(mx1, x1);
    }
    mo0 = _mm512_loadu_ps(m);
    mo1 = _mm512_loadu_ps(m + 16);
    mn0 = _mm512_max_ps(mx0, mo0);
    mn1 = _mm512_max_ps(mx1, mo1);
    g0 = _mm512_cmp_ps_mask(mn0, mo0, _CMP_GT_OQ);
    g1 = _mm512_cmp_ps_mask(mn1, mo1, _CMP_GT_OQ);
    al0 = al1 = _mm512_set1_ps(1.0f);
    if (g0 | g1) {
        al0 = _mm512_mask_blend_ps(g0, al0, kern__sdpa_exp2v__avx512(_mm512_sub_ps(mo0, mn0)));
        al1 = _mm512_mask_blend_ps(g1, al1, kern__sdpa_exp2v__avx512(_mm512_sub_ps(mo1, mn1)));
        changed = 1;
    }
    _mm512_storeu_ps(m, mn0);
    _mm512_storeu_ps(m + 16, mn1);
    _mm512_storeu_ps(alpha, al0);
    _mm512_storeu_ps(alpha + 16, al1);
    ms0 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mn0, ninf, _CMP_EQ_OQ), mn0, _mm512_setzero_ps());
    ms1 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mn1, ninf, _CMP_EQ_OQ), mn1, _mm512_setzero_ps());
    for (j = 0; j < nk; j++) {
        float *sp = s + j * KERN__SDPA_NQ;
        __m512 p0 = kern__sdpa_exp2v__avx512(_mm512_sub_ps(_mm512_loadu_ps(sp), ms0));
        __m512 p1 = kern__sdpa_exp2v__avx512(_mm512_sub_ps(_mm512_loadu_ps(sp + 16), ms1));
        _mm512_storeu_ps(sp, p0);
        _mm512_storeu_ps(sp + 16, p1);
        s0 = _mm512_add_ps(s0, p0);
        s1 = _mm512_add_ps(s1, p1);
    }
    _mm512_storeu_ps(l, _mm512_fmadd_ps(_mm512_loadu_ps(l), al0, s0));
    _mm512_storeu_ps(l + 16, _mm512_fmadd_ps(_mm512_loadu_ps(l + 16), al1, s1));
    return changed;
}

KERN_TARGET_AVX512 static void kern__sdpa_scale__avx512(float *ot, int64_t rows,
                                                        const float *alpha) {
    __m512 a0 = _mm512_loadu_ps(alpha), a1 = _mm512_loadu_ps(alpha + 16);
    int64_t c;
    for (c = 0; c < rows; c++) {
        float *p = ot + c * KERN__SDPA_NQ;
        _mm512_storeu_ps(p, _mm512_mul_ps(_mm512_loadu_ps(p), a0));
        _mm512_storeu_ps(p + 16, _mm512_mul_ps(_mm512_loadu_ps(p + 16), a1));
    }
}

KERN_TARGET_AVX512 static inline __m512 kern__sdpa_ld16__avx512(const void *p, kern_dtype dt,
                                                                int64_t i, __mmask16 km) {
    if (dt == KERN_F32) return _mm512_maskz_loadu_ps(km, (const float *)p + i);
    {
        __m256i w = _mm256_maskz_loadu_epi16(km, (const uint16_t *)p + i);
        if (dt == KERN_BF16)
            return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w), 16));
        return _mm512_cvtph_ps(w);
    }
}

/* Horizontal sums of a 4x4 block of dot-product accumulators: lane 4r+j of
 * the result is sum(a_rj). Two unpack levels sum within 128-bit lanes, two
 * shuffle levels across them: 9 + 4*6 shuffles/adds for 16 dots. */
KERN_TARGET_AVX512 static inline __m512 kern__sdpa_hsum4__avx512(__m512 a0, __m512 a1,
                                                                 __m512 a2, __m512 a3) {
    __m512 t0 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
    __m512 t1 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t1))),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t1))));
}
KERN_TARGET_AVX512 static inline __m512 kern__sdpa_hsum16__avx512(__m512 u0, __m512 u1,
                                                                  __m512 u2, __m512 u3) {
    __m512 z01 = _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, 0x44), _mm512_shuffle_f32x4(u0, u1, 0xEE));
    __m512 z23 = _mm512_add_ps(_mm512_shuffle_f32x4(u2, u3, 0x44), _mm512_shuffle_f32x4(u2, u3, 0xEE));
    return _mm512_add_ps(_mm512_shuffle_f32x4(z01, z23, 0x88), _mm512_shuffle_f32x4(z01, z23, 0xDD));
}

#define KERN__SDPA_LDF32(p, d, km) _mm512_maskz_loadu_ps(km, (const float *)(p) + (d))
#define KERN__SDPA_LDBF16(p, d, km)                                           \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                    \
        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(km, (const uint16_t *)(p) + (d))), 16))
#define KERN__SDPA_LDF16(p, d, km)                                            \
    _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(km, (const uint16_t *)(p) + (d)))
#define KERN__SDPA_DOTS4(LD)                                                  \
    for (d = 0; d < D; d += 16) {                                             \
        __mmask16 km = kern__sdpa_k16(D - d);                                 \
        __m512 k0 = LD(kp0, d, km), k1 = LD(kp1, d, km);                       \
        __m512 k2 = LD(kp2, d, km), k3 = LD(kp3, d, km);                       \
        __m512 q = _mm512_loadu_ps(q0 + d);                                   \
        a00 = _mm512_fmadd_ps(q, k0, a00); a01 = _mm512_fmadd_ps(q, k1, a01); \
        a02 = _mm512_fmadd_ps(q, k2, a02); a03 = _mm512_fmadd_ps(q, k3, a03); \
        q = _mm512_loadu_ps(q1 + d);                                          \
        a10 = _mm512_fmadd_ps(q, k0, a10); a11 = _mm512_fmadd_ps(q, k1, a11); \
        a12 = _mm512_fmadd_ps(q, k2, a12); a13 = _mm512_fmadd_ps(q, k3, a13); \
        q = _mm512_loadu_ps(q2 + d);                                          \
        a20 = _mm512_fmadd_ps(q, k0, a20); a21 = _mm512_fmadd_ps(q, k1, a21); \
        a22 = _mm512_fmadd_ps(q, k2, a22); a23 = _mm512_fmadd_ps(q, k3, a23); \
        q = _mm512_loadu_ps(q3 + d);                                          \
        a30 = _mm512_fmadd_ps(q, k0, a30); a31 = _mm512_fmadd_ps(q, k1, a31); \
        a32 = _mm512_fmadd_ps(q, k2, a32); a33 = _mm512_fmadd_ps(q, k3, a33); \
    }

/* 4 query rows x 4 keys per tile: each K chunk is loaded (and converted)
 * once for 4 rows and each q chunk once for 4 keys. */
KERN_TARGET_AVX512 static void kern__sdpa_dots__avx512(int64_t nk, int64_t R, int64_t D,
                                                       const float *qf, int64_t ldq,
                                                       const void *k, int64_t k_rs,
                                                       kern_dtype dt, float *s, int64_t ls) {
    int64_t r0, j0, d;
    size_t es = kern_dtype_size(dt);
    for (r0 = 0; r0 < R; r0 += 4) {
        int64_t nr = R - r0 < 4 ? R - r0 : 4;
        const float *q0 = qf + r0 * ldq, *q1 = nr > 1 ? q0 + ldq : q0;
        const float *q2 = nr > 2 ? q0 + 2 * ldq : q0, *q3 = nr > 3 ? q0 + 3 * ldq : q0;
        for (j0 = 0; j0 < nk; j0 += 4) {
            int64_t nj = nk - j0 < 4 ? nk - j0 : 4, e;
            const char *kp0 = (const char *)k + (size_t)(j0 * k_rs) * es;
            const char *kp1 = nj > 1 ? kp0 + (size_t)k_rs * es : kp0;
            const char *kp2 = nj > 2 ? kp0 + (size_t)(2 * k_rs) * es : kp0;
            const char *kp3 = nj > 3 ? kp0 + (size_t)(3 * k_rs) * es : kp0;
            __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
            __m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
            __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
            __m512 a30 = a00, a31 = a00, a32 = a00, a33 = a00;
            float t[16];
            if (dt == KERN_F32) {
                KERN__SDPA_DOTS4(KERN__SDPA_LDF32)
            } else if (dt == KERN_BF16) {
                KERN__SDPA_DOTS4(KERN__SDPA_LDBF16)
            } else {
                KERN__SDPA_DOTS4(KERN__SDPA_LDF16)
            }
            _mm512_storeu_ps(t, kern__sdpa_hsum16__avx512(kern__sdpa_hsum4__avx512(a00, a01, a02, a03),
                                                          kern__sdpa_hsum4__avx512(a10, a11, a12, a13),
                                                          kern__sdpa_hsum4__avx512(a20, a21, a22, a23),
                                                          kern__sdpa_hsum4__avx512(a30, a31, a32, a33)));
            for (e = 0; e < nr; e++) {
                float *dst = s + (r0 + e) * ls + j0;
                int64_t jj;
                for (jj = 0; jj < nj; jj++) dst[jj] = t[4 * e + jj];
            }
        }
    }
}

KERN_TARGET_AVX512 static int kern__sdpa_rstep__avx512(float *s, int64_t ls, int64_t R, int64_t nk,
                                                       float c, float *m, float *l, float *alpha) {
    const __m512 cv = _mm512_set1_ps(c), ninf = _mm512_set1_ps(-INFINITY);
    int64_t r, j;
    int changed = 0;
    for (r = 0; r < R; r++) {
        float *row = s + r * ls, mx, ms;
        __m512 vm = ninf, sum = _mm512_setzero_ps(), msv;
        for (j = 0; j < nk; j += 16) {
            __mmask16 km = kern__sdpa_k16(nk - j);
            __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(km, row + j), cv);
            _mm512_mask_storeu_ps(row + j, km, x);
            vm = _mm512_mask_max_ps(vm, km, vm, x);
        }
        mx = _mm512_reduce_max_ps(vm);
        alpha[r] = 1.0f;
        if (mx > m[r]) {
            alpha[r] = exp2f(m[r] - mx);
            m[r] = mx;
            changed = 1;
        }
        ms = m[r] == -INFINITY ? 0.0f : m[r];
        msv = _mm512_set1_ps(ms);
        for (j = 0; j < nk; j += 16) {
            __mmask16 km = kern__sdpa_k16(nk - j);
            __m512 p = kern__sdpa_exp2v__avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(km, row + j), msv));
            _mm512_mask_storeu_ps(row + j, km, p);
            sum = _mm512_mask_add_ps(sum, km, sum, p);
        }
        l[r] = l[r] * alpha[r] + _mm512_reduce_add_ps(sum);
    }
    return changed;
}

#define KERN__SDPA_DOTS16                                                     \
    for (d = 0; d < D; d += 32) {                                             \
        int64_t nd = D - d;                                                   \
        __mmask32 km = nd >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << nd) - 1u); \
        __m512bh k0 = (__m512bh)_mm512_maskz_loadu_epi16(km, kp0 + d);        \
        __m512bh k1 = (__m512bh)_mm512_maskz_loadu_epi16(km, kp1 + d);        \
        __m512bh k2 = (__m512bh)_mm512_maskz_loadu_epi16(km, kp2 + d);        \
        __m512bh k3 = (__m512bh)_mm512_maskz_loadu_epi16(km, kp3 + d);        \
        __m512bh q = (__m512bh)_mm512_loadu_si512((const void *)(q0 + d));   \
        a00 = _mm512_dpbf16_ps(a00, q, k0); a01 = _mm512_dpbf16_ps(a01, q, k1); \
        a02 = _mm512_dpbf16_ps(a02, q, k2); a03 = _mm512_dpbf16_ps(a03, q, k3); \
        q = (__m512bh)_mm512_loadu_si512((const void *)(q1 + d));            \
        a10 = _mm512_dpbf16_ps(a10, q, k0); a11 = _mm512_dpbf16_ps(a11, q, k1); \
        a12 = _mm512_dpbf16_ps(a12, q, k2); a13 = _mm512_dpbf16_ps(a13, q, k3); \
        q = (__m512bh)_mm512_loadu_si512((const void *)(q2 + d));            \
        a20 = _mm512_dpbf16_ps(a20, q, k0); a21 = _mm512_dpbf16_ps(a21, q, k1); \
        a22 = _mm512_dpbf16_ps(a22, q, k2); a23 = _mm512_dpbf16_ps(a23, q, k3); \
        q = (__m512bh)_mm512_loadu_si512((const void *)(q3 + d));            \
        a30 = _mm512_dpbf16_ps(a30, q, k0); a31 = _mm512_dpbf16_ps(a31, q, k1); \
        a32 = _mm512_dpbf16_ps(a32, q, k2); a33 = _mm512_dpbf16_ps(a33, q, k3); \
    }

/* The rows path's q.k for bf16 through vdpbf16ps: 4 rows x 4 keys per
 * tile, 32 head-dim elements per instruction; odd D reads a masked zero. */
KERN_TARGET_AVX512BF16 static void kern__sdpa_dots16__avx512bf16(int64_t nk, int64_t R, int64_t D,
                                                                 const uint16_t *q16, int64_t ldq,
                                                                 const uint16_t *k, int64_t k_rs,
                                                                 float *s, int64_t ls) {
    int64_t r0, j0, d;
    for (r0 = 0; r0 < R; r0 += 4) {
        int64_t nr = R - r0 < 4 ? R - r0 : 4;
        const uint16_t *q0 = q16 + r0 * ldq, *q1 = nr > 1 ? q0 + ldq : q0;
        const uint16_t *q2 = nr > 2 ? q0 + 2 * ldq : q0, *q3 = nr > 3 ? q0 + 3 * ldq : q0;
        for (j0 = 0; j0 < nk; j0 += 4) {
            int64_t nj = nk - j0 < 4 ? nk - j0 : 4, e;
            const uint16_t *kp0 = k + j0 * k_rs, *kp1 = nj > 1 ? kp0 + k_rs : kp0;
            const uint16_t *kp2 = nj > 2 ? kp0 + 2 * k_rs : kp0, *kp3 = nj > 3 ? kp0 + 3 * k_rs : kp0;
            __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
            __m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
            __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
            __m512 a30 = a00, a31 = a00, a32 = a00, a33 = a00;
            float t[16];
            KERN__SDPA_DOTS16
            _mm512_storeu_ps(t, kern__sdpa_hsum16__avx512(kern__sdpa_hsum4__avx512(a00, a01, a02, a03),
                                                          kern__sdpa_hsum4__avx512(a10, a11, a12, a13),
                                                          kern__sdpa_hsum4__avx512(a20, a21, a22, a23),
                                                          kern__sdpa_hsum4__avx512(a30, a31, a32, a33)));
            for (e = 0; e < nr; e++) {
                float *dst = s + (r0 + e) * ls + j0;
                int64_t jj;
                for (jj = 0; jj < nj; jj++) dst[jj] = t[4 * e + jj];
            }
        }
    }
}

/* P^T (f32) -> bf16 pairs: vcvtne2ps2bf16 rounds two rows to nearest
 * even, vpermw interleaves them per lane. */
KERN_TARGET_AVX512BF16 static void kern__sdpa_p2__avx512bf16(const float *s, int64_t nk,
                                                             uint16_t *p2) {
    static const uint16_t ix[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                    8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i idx = _mm512_loadu_si512((const void *)ix);
    int64_t jp, nkp = (nk + 1) / 2;
    for (jp = 0; jp < nkp; jp++) {
        const float *s0 = s + 2 * jp * KERN__SDPA_NQ;
        int two = 2 * jp + 1 < nk;
        int v;
        for (v = 0; v < 2; v++) {
            __m512 a = _mm512_loadu_ps(s0 + 16 * v);
            __m512 b = two ? _mm512_loadu_ps(s0 + KERN__SDPA_NQ + 16 * v) : _mm512_setzero_ps();
            __m512i t = (__m512i)_mm512_cvtne2ps_pbh(b, a);
            _mm512_storeu_si512((void *)(p2 + jp * KERN__SDPA_NQ * 2 + 32 * v),
                                _mm512_permutexvar_epi16(idx, t));
        }
    }
}

KERN_TARGET_AVX512BF16 static void kern__sdpa_vpack__avx512bf16(const uint16_t *v, int64_t vrs,
                                                                int64_t nk, int64_t Dv,
                                                                uint16_t *vp) {
    uint16_t lo[32], hi[32];
    __m512i il, ih;
    int64_t jp, c0, nkp = (nk + 1) / 2;
    int i;
    for (i = 0; i < 16; i++) {
        lo[2 * i] = (uint16_t)i;
        lo[2 * i + 1] = (uint16_t)(32 + i);
        hi[2 * i] = (uint16_t)(16 + i);
        hi[2 * i + 1] = (uint16_t)(48 + i);
    }
    il = _mm512_loadu_si512((const void *)lo);
    ih = _mm512_loadu_si512((const void *)hi);
    for (jp = 0; jp < nkp; jp++) {
        const uint16_t *v0 = v + 2 * jp * vrs;
        const uint16_t *v1 = 2 * jp + 1 < nk ? v0 + vrs : NULL;
        uint16_t *dst = vp + jp * Dv * 2;
        for (c0 = 0; c0 < Dv; c0 += 32) {
            int64_t n = Dv - c0 < 32 ? Dv - c0 : 32;
            __mmask32 km = n >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << n) - 1u);
            __mmask32 ml = 2 * n >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << (2 * n)) - 1u);
            __mmask32 mh = n <= 16 ? (__mmask32)0
                                   : (n >= 32 ? (__mmask32)0xFFFFFFFFu
                                              : (__mmask32)((1u << (2 * (n - 16))) - 1u));
            __m512i a = _mm512_maskz_loadu_epi16(km, v0 + c0);
            __m512i b = v1 ? _mm512_maskz_loadu_epi16(km, v1 + c0) : _mm512_setzero_si512();
            _mm512_mask_storeu_epi16(dst + 2 * c0, ml, _mm512_permutex2var_epi16(a, il, b));
            _mm512_mask_storeu_epi16(dst + 2 * c0 + 32, mh, _mm512_permutex2var_epi16(a, ih, b));
        }
    }
}
#endif /* KERN_X86 */

/* ------------------------------------------------------------ NEON path */
#ifdef KERN_NEON
/* 4 rows x 16 lanes (16 q-register accumulators); lane tails through a
 * scalar-staged copy of B and C. */
static void kern__sdpa_mk_f32__neon(int64_t M, int64_t N, int64_t K,
                                    const float *a, int64_t a_rs, int64_t a_ks,
                                    const float *b, int64_t b_ks, float *c,
                                    int64_t c_rs, int acc) {
    int64_t m0, n0, k;
    for (m0 = 0; m0 < M; m0 += 4) {
        int mr = (int)(M - m0 < 4 ? M - m0 : 4), r, v;
        for (n0 = 0; n0 < N; n0 += 16) {
            int64_t nn = N - n0 < 16 ? N - n0 : 16, e;
            float32x4_t cc[4][4];
            const float *ar[4];
            for (r = 0; r < 4; r++) {
                int64_t rr = m0 + (r < mr ? r : 0);
                ar[r] = a + rr * a_rs;
                for (v = 0; v < 4; v++) cc[r][v] = vdupq_n_f32(0.0f);
                if (acc && r < mr) {
                    float t[16];
                    for (e = 0; e < 16; e++) t[e] = e < nn ? c[rr * c_rs + n0 + e] : 0.0f;
                    for (v = 0; v < 4; v++) cc[r][v] = vld1q_f32(t + 4 * v);
                }
            }
            for (k = 0; k < K; k++) {
                float bt[16];
                float32x4_t bv[4];
                const float *br = b + k * b_ks + n0;
                if (nn == 16) {
                    for (v = 0; v < 4; v++) bv[v] = vld1q_f32(br + 4 * v);
                } else {
                    for (e = 0; e < 16; e++) bt[e] = e < nn ? br[e] : 0.0f;
                    for (v = 0; v < 4; v++) bv[v] = vld1q_f32(bt + 4 * v);
                }
                for (r = 0; r < 4; r++) {
                    float32x4_t x = vdupq_n_f32(ar[r][k * a_ks]);
                    for (v = 0; v < 4; v++) cc[r][v] = vfmaq_f32(cc[r][v], x, bv[v]);
                }
            }
            for (r = 0; r < mr; r++) {
                float t[16];
                for (v = 0; v < 4; v++) vst1q_f32(t + 4 * v, cc[r][v]);
                for (e = 0; e < nn; e++) c[(m0 + r) * c_rs + n0 + e] = t[e];
            }
        }
    }
}
#endif /* KERN_NEON */

static void kern__sdpa_pick(kern_ctx *ctx, kern__sdpa_isa *t) {
    uint32_t f = kern_ctx_features(ctx);
    (void)f;
    t->mk = kern__sdpa_mk_f32__scalar;
    t->mk16 = NULL;
    t->step = kern__sdpa_step__scalar;
    t->exp2 = kern__sdpa_exp2__scalar;
    t->scale = kern__sdpa_scale__scalar;
    t->dots = kern__sdpa_dots__scalar;
    t->rstep = kern__sdpa_rstep__scalar;
    t->p2 = kern__sdpa_p2__scalar;
    t->vpack = kern__sdpa_vpack__scalar;
    t->dots16 = NULL;
    t->rows16 = NULL;
#ifdef KERN_X86
    if (f & KERN_CPU_AVX512F) {
        t->mk = kern__sdpa_mk_f32__avx512;
        t->step = kern__sdpa_step__avx512;
        t->exp2 = kern__sdpa_exp2__avx512;
        t->scale = kern__sdpa_scale__avx512;
        t->dots = kern__sdpa_dots__avx512;
        t->rstep = kern__sdpa_rstep__avx512;
        if (f & KERN_CPU_AVX512BF16) {
            t->mk16 = kern__sdpa_mk16__avx512bf16;
            t->p2 = kern__sdpa_p2__avx512bf16;
            t->vpack = kern__sdpa_vpack__avx512bf16;
            t->dots16 = kern__sdpa_dots16__avx512bf16;
            t->rows16 = kern__sdpa_rows16__avx512bf16;
        }
    } else if ((f & KERN_CPU_AVX2) && (f & KERN_CPU_FMA)) {
        t->mk = kern__sdpa_mk_f32__avx2;
        t->step = kern__sdpa_step__avx2;
        t->exp2 = kern__sdpa_exp2__avx2;
        t->scale = kern__sdpa_scale__avx2;
        t->dots = kern__sdpa_dots__avx2;
        t->rstep = kern__sdpa_rstep__avx2;
    }
#endif
#ifdef KERN_NEON
    if (f & KERN_CPU_NEON) t->mk = kern__sdpa_mk_f32__neon;
#endif
}

/* ======================================================= problem setup */

/* One description for dense and varlen problems. Offsets are in elements. */
typedef struct kern__sdpa_prob {
    int64_t B, Hq, Hkv, G, D, Dv, Lq, Lk; /* Lq/Lk: max over batch entries */
    /* the longest actual query/key sequences: Lq/Lk for dense; varlen
     * reads them from cu_seqlens (Lq/Lk are max_seqlen as given, used
     * only in the dropout index), so max_seqlen never drives the work */
    int64_t Lq_run, Lk_run;
    kern_dtype dt;
    size_t es;
    const char *q, *k, *v, *o, *dout; /* byte pointers */
    char *dq, *dk, *dv;
    /* strides: [b, h, l] for dense; varlen: b stride unused (cu_seqlens) */
    int64_t qs[3], ks[3], vs[3], os[3], ds[3], dqs[3], dks[3], dvs[3];
    int varlen;
    const void *cuq, *cuk;
    kern_dtype cuq_dt, cuk_dt;
    const kern_tensor *mask; /* broadcast view [B,Hq,Lq,Lk] or NULL */
    kern_tensor maskv;
    const void *klens;
    kern_dtype klens_dt;
    int64_t klens_s;
    float *lse; /* forward output or backward input (f32) */
    int64_t lses[3]; /* dense [b,h,i]; varlen [unused, h, t] */
    float scale, softcap, dropout_p;
    uint32_t drop_thr;
    uint64_t seed, offset;
    int causal, bottom_right, window;
    int64_t wl, wr;
    kern__sdpa_isa isa;
    int bf16_native;
} kern__sdpa_prob;

static inline int64_t kern__sdpa_geti(const void *p, kern_dtype dt, int64_t i) {
    return dt == KERN_I32 ? (int64_t)((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

/* Rows (queries) and keys of batch entry b, and their element offsets. */
static inline void kern__sdpa_seq(const kern__sdpa_prob *p, int64_t b, int64_t *lq,
                                  int64_t *lk, int64_t *q0, int64_t *k0) {
    if (p->varlen) {
        int64_t a = kern__sdpa_geti(p->cuq, p->cuq_dt, b);
        int64_t c = kern__sdpa_geti(p->cuk, p->cuk_dt, b);
        *lq = kern__sdpa_geti(p->cuq, p->cuq_dt, b + 1) - a;
        *lk = kern__sdpa_geti(p->cuk, p->cuk_dt, b + 1) - c;
        *q0 = a;
        *k0 = c;
    } else {
        *lq = p->Lq;
        *lk = p->Lk;
        if (p->klens) {
            int64_t kl = kern__sdpa_geti(p->klens, p->klens_dt, b * p->klens_s);
            if (kl < *lk) *lk = kl;
        }
        *q0 = b; /* batch index: offsets use the b stride */
        *k0 = b;
    }
}

/* Element offset of row (b-or-token-base, h, i) in a tensor with strides s. */
static inline int64_t kern__sdpa_off(const kern__sdpa_prob *p, const int64_t *s,
                                     int64_t base, int64_t h, int64_t i) {
    if (p->varlen) return (base + i) * s[2] + h * s[1];
    return base * s[0] + h * s[1] + i * s[2];
}

static inline float *kern__sdpa_lse_ptr(const kern__sdpa_prob *p, int64_t base,
                                        int64_t h, int64_t i) {
    if (p->varlen) return p->lse + h * p->lses[1] + (base + i) * p->lses[2];
    return p->lse + base * p->lses[0] + h * p->lses[1] + i * p->lses[2];
}

/* Visible key range [lo, hi) of query i in a batch entry with lq rows and
 * lk keys (after k_lens). */
static inline void kern__sdpa_range(const kern__sdpa_prob *p, int64_t i, int64_t lq,
                                    int64_t lk, int64_t *lo, int64_t *hi) {
    /* c = i + off is in (-lq, lk); the window bounds may be anything up to
     * INT64_MAX, so they are compared against differences that fit */
    int64_t c = p->bottom_right ? lk - (lq - i) : i, a = 0, z = lk;
    if (p->causal && c + 1 < z) z = c + 1;
    if (p->window) {
        if (p->wl >= 0 && c > p->wl) a = c - p->wl;
        if (p->wr >= 0 && p->wr < z - c - 1) z = c + p->wr + 1;
    }
    if (z < a) z = a;
    if (z < 0) z = a = 0;
    *lo = a;
    *hi = z;
}

/* Per-lane (query row) description within a panel. */
typedef struct kern__sdpa_lane {
    int64_t i, h, lo, hi;
    int64_t moff;    /* mask element offset of (b, h, i, 0) */
    uint64_t didx;   /* dropout index of (b, h, i, 0) */
} kern__sdpa_lane;

static void kern__sdpa_lanes(const kern__sdpa_prob *p, int64_t b, int64_t hk,
                             int64_t r0, int64_t nr, int64_t lq, int64_t lk,
                             kern__sdpa_lane *ln, int64_t *plo, int64_t *phi) {
    int64_t r, lo = INT64_MAX, hi = 0;
    for (r = 0; r < KERN__SDPA_NQ; r++) {
        kern__sdpa_lane *L = ln + r;
        if (r < nr) {
            int64_t row = r0 + r;
            L->i = row / p->G;
            L->h = hk * p->G + row % p->G;
            kern__sdpa_range(p, L->i, lq, lk, &L->lo, &L->hi);
            L->moff = p->mask ? b * p->maskv.stride[0] + L->h * p->maskv.stride[1] +
                                    L->i * p->maskv.stride[2]
                              : 0;
            L->didx = (((uint64_t)b * (uint64_t)p->Hq + (uint64_t)L->h) * (uint64_t)p->Lq +
                       (uint64_t)L->i) * (uint64_t)p->Lk;
            if (L->hi > L->lo) {
                if (L->lo < lo) lo = L->lo;
                if (L->hi > hi) hi = L->hi;
            }
        } else {
            L->i = 0;
            L->h = hk * p->G;
            L->lo = L->hi = 0;
            L->moff = 0;
            L->didx = 0;
        }
    }
    if (hi == 0) lo = 0;
    *plo = lo;
    *phi = hi;
}

/* Scores for keys [j0, j0+nk) -> log2-unit scores with softcap, mask and
 * the visible ranges applied (the scale folded in). Layout: panel S^T[j][lane]
 * (rows = 0) or row layout S[lane*BK + j] (rows = 1, lanes < nr). Used when
 * a block needs more than the plain scale (the fast path folds the scale
 * into the softmax step). With keep_tanh, tmp keeps tanh(u) (softcap). */
static void kern__sdpa_prepare(const kern__sdpa_prob *p, float *s, int64_t nk,
                               int64_t j0, const kern__sdpa_lane *ln, int64_t nr,
                               float *tmp, int keep_tanh, int rows) {
    int64_t jj, r, seg, nseg = rows ? nr : 1, len = rows ? nk : nk * KERN__SDPA_NQ;
    int64_t sj = rows ? 1 : KERN__SDPA_NQ, sr = rows ? KERN__SDPA_BK : 1;
    int64_t nl = rows ? nr : KERN__SDPA_NQ;
    for (seg = 0; seg < nseg; seg++) {
        float *x = s + seg * KERN__SDPA_BK, *t = tmp + seg * KERN__SDPA_BK;
        if (p->softcap > 0) {
            /* t = tanh(u), u = scale*qk/cap: 1 - 2/(2^(2u log2 e) + 1) */
            float c = 2.0f * p->scale / p->softcap * KERN__SDPA_LOG2E;
            float cap = p->softcap * KERN__SDPA_LOG2E;
            for (jj = 0; jj < len; jj++) t[jj] = x[jj] * c;
            p->isa.exp2(t, len);
            for (jj = 0; jj < len; jj++) {
                float th = 1.0f - 2.0f / (t[jj] + 1.0f);
                if (keep_tanh) t[jj] = th;
                x[jj] = th * cap;
            }
        } else {
            float c = p->scale * KERN__SDPA_LOG2E;
            for (jj = 0; jj < len; jj++) x[jj] *= c;
        }
    }
    if (p->mask) {
        const kern_tensor *m = &p->maskv;
        int64_t msj = m->stride[3];
        for (r = 0; r < nr; r++) {
            float *sr0 = s + r * sr;
            for (jj = 0; jj < nk; jj++) {
                int64_t o = ln[r].moff + (j0 + jj) * msj;
                if (m->dtype == KERN_BOOL) {
                    if (!((const uint8_t *)m->data)[o]) sr0[jj * sj] = -INFINITY;
                } else {
                    sr0[jj * sj] += kern__sdpa_ld(m->data, m->dtype, o) * KERN__SDPA_LOG2E;
                }
            }
        }
    }
    for (r = 0; r < nl; r++) {
        int64_t a = ln[r].lo - j0, z = ln[r].hi - j0;
        if (a <= 0 && z >= nk) continue;
        for (jj = 0; jj < nk; jj++)
            if (jj < a || jj >= z) s[jj * sj + r * sr] = -INFINITY;
    }
}

/* Zeroes dropped probabilities (keys j0..) in the panel layout (rows = 0)
 * or the row layout (rows = 1). */
static void kern__sdpa_dropout(const kern__sdpa_prob *p, float *s, int64_t nk,
                               int64_t j0, const kern__sdpa_lane *ln, int64_t nr, int rows) {
    int64_t r, jj, sj = rows ? 1 : KERN__SDPA_NQ, sr = rows ? KERN__SDPA_BK : 1;
    for (r = 0; r < nr; r++) {
        uint64_t base = ln[r].didx + (uint64_t)j0;
        uint32_t bits[4] = {0, 0, 0, 0};
        uint64_t grp = ~(uint64_t)0;
        for (jj = 0; jj < nk; jj++) {
            uint64_t idx = base + (uint64_t)jj;
            if ((idx >> 2) != grp) {
                uint32_t ctr[4], key[2];
                grp = idx >> 2;
                ctr[0] = (uint32_t)grp;
                ctr[1] = (uint32_t)(grp >> 32);
                ctr[2] = (uint32_t)p->offset;
                ctr[3] = (uint32_t)(p->offset >> 32);
                key[0] = (uint32_t)p->seed;
                key[1] = (uint32_t)(p->seed >> 32);
                kern_philox4x32_10(ctr, key, bits);
            }
            if (bits[idx & 3] < p->drop_thr) s[jj * sj + r * sr] = 0.0f;
        }
    }
}

/* ============================================================= forward */

typedef struct kern__sdpa_fwd {
    kern__sdpa_prob *p;
    int64_t nqb, nsplit, chunk, ntasks, rows_cap;
    int rows_path;
    float *part; /* [B][Hkv][nqb][nsplit][rows_cap][Dv+2] when nsplit > 1 */
    kern_ctx *ctx;
} kern__sdpa_fwd;

/* Scratch carve-up; with base NULL it only measures. */
typedef struct kern__sdpa_carve {
    char *base;
    size_t used;
} kern__sdpa_carve;
static void *kern__sdpa_take(kern__sdpa_carve *c, size_t bytes) {
    void *r = c->base ? (void *)(c->base + c->used) : NULL;
    c->used += (bytes + 63) & ~(size_t)63;
    return r;
}

typedef struct kern__sdpa_fscr {
    float *qt;   /* QB x [D][NQ] f32, or bf16 pairs [D/2][NQ][2]; row path: [R][D16] */
    float *ot;   /* QB x [Dv][NQ]; row path: [R][Dv] */
    float *m, *l, *alpha; /* QB x NQ */
    kern__sdpa_lane *ln;  /* QB x NQ */
    float *s, *tmp;       /* [BK][NQ] */
    uint16_t *p2;         /* [BK/2][NQ][2] */
    float *kc, *vc;       /* [BK][D], [BK][Dv] converted tiles */
    uint16_t *vp;         /* [BK/2][Dv][2] */
    float *row;           /* max(D, Dv) + 16 */
} kern__sdpa_fscr;

static size_t kern__sdpa_fscr_carve(const kern__sdpa_prob *p, char *base,
                                    kern__sdpa_fscr *sc) {
    kern__sdpa_carve c;
    int64_t D16 = (p->D + 15) & ~(int64_t)15, Dv = p->Dv, BK = KERN__SDPA_BK;
    int64_t NQ = KERN__SDPA_NQ, QB = KERN__SDPA_QB;
    int64_t mx = (p->D > p->Dv ? p->D : p->Dv) + 16;
    c.base = base;
    c.used = 0;
    sc->qt = (float *)kern__sdpa_take(&c, (size_t)(QB * D16 * NQ) * 4);
    sc->ot = (float *)kern__sdpa_take(&c, (size_t)(QB * (Dv > 0 ? Dv : 1) * NQ) * 4);
    sc->m = (float *)kern__sdpa_take(&c, (size_t)(QB * NQ) * 4);
    sc->l = (float *)kern__sdpa_take(&c, (size_t)(QB * NQ) * 4);
    sc->alpha = (float *)kern__sdpa_take(&c, (size_t)NQ * 4);
    sc->ln = (kern__sdpa_lane *)kern__sdpa_take(&c, (size_t)(QB * NQ) * sizeof(kern__sdpa_lane));
    sc->s = (float *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 4);
    sc->tmp = (float *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 4);
    sc->p2 = (uint16_t *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 2);
    sc->kc = (float *)kern__sdpa_take(&c, (size_t)(BK * p->D) * 4);
    sc->vc = (float *)kern__sdpa_take(&c, (size_t)(BK * (Dv > 0 ? Dv : 1)) * 4);
    sc->vp = (uint16_t *)kern__sdpa_take(&c, (size_t)(BK * (Dv > 0 ? Dv : 1)) * 2);
    sc->row = (float *)kern__sdpa_take(&c, (size_t)mx * 4);
    return c.used;
}

/* Converts n elements of dtype dt at src to f32. */
static inline void kern__sdpa_to_f32(kern_ctx *ctx, const void *src, kern_dtype dt,
                                     float *dst, int64_t n) {
    if (dt == KERN_F32) memcpy(dst, src, (size_t)n * 4);
    else kern_convert(ctx, dt, src, KERN_F32, dst, n);
}
static inline void kern__sdpa_from_f32(kern_ctx *ctx, const float *src, kern_dtype dt,
                                       void *dst, int64_t n) {
    if (dt == KERN_F32) memcpy(dst, src, (size_t)n * 4);
    else kern_convert(ctx, KERN_F32, src, dt, dst, n);
}

/* Writes one finished row: out = acc / l (times the dropout scale), lse. A
 * row with no visible key (l = 0) gets zeros and -inf. acc is read as
 * acc[c * cs]. */
static void kern__sdpa_emit(const kern__sdpa_fwd *f, int64_t base, int64_t h, int64_t i,
                            const float *acc, int64_t cs, float m, float l, float *row) {
    const kern__sdpa_prob *p = f->p;
    int64_t c, Dv = p->Dv;
    float lse;
    /* l == 0 exactly iff no key was visible (the max element contributes
     * 2^0 = 1); a NaN score makes l NaN, which then reaches out and lse */
    if (l == 0.0f) {
        for (c = 0; c < Dv; c++) row[c] = 0.0f;
        lse = -INFINITY;
    } else {
        float inv = 1.0f / l;
        if (p->dropout_p > 0) inv *= 1.0f / (1.0f - p->dropout_p);
        for (c = 0; c < Dv; c++) row[c] = acc[c * cs] * inv;
        lse = (m + log2f(l)) * KERN__SDPA_LN2;
    }
    if (Dv > 0)
        kern__sdpa_from_f32(f->ctx, row, p->dt,
                            (void *)(p->o + (size_t)kern__sdpa_off(p, p->os, base, h, i) * p->es),
                            Dv);
    if (p->lse) *kern__sdpa_lse_ptr(p, base, h, i) = lse;
}

/* Partial result of one key split: acc (unnormalized), m, l. */
static void kern__sdpa_emit_part(const kern__sdpa_fwd *f, int64_t b, int64_t hk, int64_t qb,
                                 int64_t sp, int64_t r, const float *acc, int64_t cs,
                                 float m, float l) {
    int64_t Dv = f->p->Dv, c;
    float *o = f->part + ((((b * f->p->Hkv + hk) * f->nqb + qb) * f->nsplit + sp) *
                              f->rows_cap + r) * (Dv + 2);
    for (c = 0; c < Dv; c++) o[c] = acc[c * cs];
    o[Dv] = m;
    o[Dv + 1] = l;
}

static void kern__sdpa_fwd_task(void *arg, int64_t t, int thread) {
    const kern__sdpa_fwd *f = (const kern__sdpa_fwd *)arg;
    const kern__sdpa_prob *p = f->p;
    kern__sdpa_fscr sc;
    int64_t per = p->B * p->Hkv * f->nsplit, outer = t / per, inner = t % per;
    int64_t qb = p->causal ? f->nqb - 1 - outer : outer;
    int64_t b = inner / (p->Hkv * f->nsplit), hk = (inner / f->nsplit) % p->Hkv;
    int64_t sp = inner % f->nsplit;
    int64_t lq, lk, qbase, kbase, R, ks0, ks1, D = p->D, Dv = p->Dv;
    int64_t NQ = KERN__SDPA_NQ, BK = KERN__SDPA_BK;
    int64_t D16 = (D + 15) & ~(int64_t)15, D32 = (D + 31) & ~(int64_t)31;
    int64_t np, pan, npan, j0, klo = INT64_MAX, khi = 0;
    const char *kp, *vp;
    int64_t krs, vrs;
    int native = p->bf16_native;
    int native16 = f->rows_path && p->dt == KERN_BF16 && p->isa.dots16 != NULL;
    kern__sdpa_fscr_carve(p, (char *)kern__thread_scratch(f->ctx, thread), &sc);
    kern__sdpa_seq(p, b, &lq, &lk, &qbase, &kbase);
    R = lq * p->G;
    ks0 = sp * f->chunk;
    ks1 = ks0 + f->chunk < lk ? ks0 + f->chunk : lk;
    /* an empty k or v may have NULL data: no pointer arithmetic on it */
    kp = lk > 0 ? p->k + (size_t)kern__sdpa_off(p, p->ks, kbase, hk, 0) * p->es : NULL;
    vp = lk > 0 && Dv > 0 ? p->v + (size_t)kern__sdpa_off(p, p->vs, kbase, hk, 0) * p->es : NULL;
    krs = p->ks[2];
    vrs = p->vs[2];
    if (f->rows_path) {
        np = R > 0 ? 1 : 0;
        pan = 0;
        npan = np;
    } else {
        int64_t tot = (R + NQ - 1) / NQ;
        pan = qb * KERN__SDPA_QB;
        if (pan >= tot) return;
        npan = tot - pan < KERN__SDPA_QB ? tot - pan : KERN__SDPA_QB;
        np = npan;
    }
    if (np == 0) return;
    /* pack queries, init state */
    {
        int64_t pi, r, d;
        for (pi = 0; pi < np; pi++) {
            kern__sdpa_lane *ln = sc.ln + pi * NQ;
            int64_t r0 = (pan + pi) * NQ, nr = R - r0 < NQ ? R - r0 : NQ, lo, hi;
            kern__sdpa_lanes(p, b, hk, r0, nr, lq, lk, ln, &lo, &hi);
            if (lo < ks0) lo = ks0;
            if (hi > ks1) hi = ks1;
            if (hi > lo) {
                if (lo < klo) klo = lo;
                if (hi > khi) khi = hi;
            }
            for (r = 0; r < NQ; r++) {
                sc.m[pi * NQ + r] = -INFINITY;
                sc.l[pi * NQ + r] = 0.0f;
            }
            if (f->rows_path) {
                memset(sc.ot, 0, (size_t)(R * Dv) * 4);
                for (r = 0; r < nr; r++) {
                    const char *qr = p->q + (size_t)kern__sdpa_off(p, p->qs, qbase, ln[r].h, ln[r].i) * p->es;
                    if (native16) { /* bf16 rows, zero-padded to D32 */
                        uint16_t *dst = (uint16_t *)sc.qt + r * D32;
                        memcpy(dst, qr, (size_t)D * 2);
                        for (d = D; d < D32; d++) dst[d] = 0;
                    } else {
                        float *dst = sc.qt + r * D16;
                        kern__sdpa_to_f32(f->ctx, qr, p->dt, dst, D);
                        for (d = D; d < D16; d++) dst[d] = 0.0f;
                    }
                }
            } else {
                float *qt = sc.qt + pi * D16 * NQ;
                memset(sc.ot + pi * Dv * NQ, 0, (size_t)(Dv * NQ) * 4);
                for (r = 0; r < NQ; r++) {
                    float *row = sc.row;
                    if (r < nr) {
                        const char *qr = p->q + (size_t)kern__sdpa_off(p, p->qs, qbase, ln[r].h, ln[r].i) * p->es;
                        if (native) {
                            const uint16_t *h16 = (const uint16_t *)qr;
                            uint16_t *q2 = (uint16_t *)qt;
                            for (d = 0; d < D; d++)
                                q2[(d >> 1) * NQ * 2 + r * 2 + (d & 1)] = h16[d];
                            continue;
                        }
                        kern__sdpa_to_f32(f->ctx, qr, p->dt, row, D);
                    } else {
                        if (native) {
                            uint16_t *q2 = (uint16_t *)qt;
                            for (d = 0; d < D; d++) q2[(d >> 1) * NQ * 2 + r * 2 + (d & 1)] = 0;
                            continue;
                        }
                        for (d = 0; d < D; d++) row[d] = 0.0f;
                    }
                    for (d = 0; d < D; d++) qt[d * NQ + r] = row[d];
                }
            }
        }
    }
    /* key blocks */
    for (j0 = klo < khi ? (klo / BK) * BK : 0; j0 < khi; j0 += BK) {
        int64_t nk = khi - j0 < BK ? khi - j0 : BK, pi;
        int converted = 0, packed = 0;
        const float *kf = NULL, *vf = NULL;
        int64_t kfs = krs, vfs = vrs;
        if (p->dt == KERN_F32) {
            kf = (const float *)kp + j0 * krs;
            vf = vp ? (const float *)vp + j0 * vrs : NULL; /* NULL: Dv = 0 */
        }
        for (pi = 0; pi < np; pi++) {
            kern__sdpa_lane *ln = sc.ln + pi * NQ;
            int64_t nr = f->rows_path ? R : (R - (pan + pi) * NQ < NQ ? R - (pan + pi) * NQ : NQ);
            int64_t r, full = 1, any = 0;
            float *m = sc.m + pi * NQ, *l = sc.l + pi * NQ;
            for (r = 0; r < nr; r++) {
                int64_t a = ln[r].lo > ks0 ? ln[r].lo : ks0, z = ln[r].hi < ks1 ? ln[r].hi : ks1;
                if (a < j0 + nk && z > j0) any = 1;
                if (!(a <= j0 && z >= j0 + nk)) full = 0;
            }
            if (!any) continue;
            /* converted f32 tiles: f16, and bf16 without vdpbf16ps (the
             * rows path reads K in any dtype and converts only V) */
            if (p->dt != KERN_F32 && !converted && (f->rows_path ? !native16 : !native)) {
                int64_t jj;
                for (jj = 0; jj < nk; jj++) {
                    if (!f->rows_path)
                        kern__sdpa_to_f32(f->ctx, kp + (size_t)((j0 + jj) * krs) * p->es, p->dt,
                                          sc.kc + jj * D, D);
                    if (Dv > 0)
                        kern__sdpa_to_f32(f->ctx, vp + (size_t)((j0 + jj) * vrs) * p->es, p->dt,
                                          sc.vc + jj * Dv, Dv);
                }
                kf = sc.kc;
                vf = sc.vc;
                kfs = D;
                vfs = Dv;
                converted = 1;
            }
            if ((native16 || (native && !f->rows_path)) && !packed && Dv > 0) {
                p->isa.vpack((const uint16_t *)vp + j0 * vrs, vrs, nk, Dv, sc.vp);
                packed = 1;
            }
            /* scores S^T[j][lane] */
            if (f->rows_path) {
                if (native16)
                    p->isa.dots16(nk, R, D, (const uint16_t *)sc.qt, D32,
                                  (const uint16_t *)kp + j0 * krs, krs, sc.s, BK);
                else
                    p->isa.dots(nk, R, D, sc.qt, D16, kp + (size_t)(j0 * krs) * p->es, krs, p->dt,
                                sc.s, BK);
            } else if (native) {
                p->isa.mk16(nk, NQ, D / 2, (const uint16_t *)kp + j0 * krs, krs, 2,
                            (const uint16_t *)(sc.qt + pi * D16 * NQ), NQ * 2, sc.s, NQ, 0);
            } else {
                p->isa.mk(nk, NQ, D, kf, kfs, 1, sc.qt + pi * D16 * NQ, NQ, sc.s, NQ, 0);
            }
            {
                int changed, rows = f->rows_path;
                float c = p->scale * KERN__SDPA_LOG2E;
                if (!full || p->mask || p->softcap > 0) {
                    /* blocks lie inside [ks0, ks1): only the lanes' ranges
                     * need applying */
                    kern__sdpa_prepare(p, sc.s, nk, j0, ln, nr, sc.tmp, 0, rows);
                    c = 1.0f;
                }
                if (rows) {
                    changed = p->isa.rstep(sc.s, BK, R, nk, c, m, l, sc.alpha);
                    if (changed) {
                        int64_t cc;
                        for (r = 0; r < R; r++)
                            if (sc.alpha[r] != 1.0f)
                                for (cc = 0; cc < Dv; cc++) sc.ot[r * Dv + cc] *= sc.alpha[r];
                    }
                } else {
                    changed = p->isa.step(sc.s, nk, c, m, l, sc.alpha);
                    if (changed) p->isa.scale(sc.ot + pi * Dv * NQ, Dv, sc.alpha);
                }
            }
            if (p->dropout_p > 0) kern__sdpa_dropout(p, sc.s, nk, j0, ln, nr, f->rows_path);
            if (Dv == 0) continue;
            /* O += P V */
            if (f->rows_path) {
                if (native16) {
                    p->isa.rows16(sc.s, BK, R, nk, sc.p2, BK);
                    p->isa.mk16(R, Dv, (nk + 1) / 2, sc.p2, BK, 2, sc.vp, Dv * 2, sc.ot, Dv, 1);
                } else {
                    p->isa.mk(R, Dv, nk, sc.s, BK, 1, vf, vfs, sc.ot, Dv, 1);
                }
            } else if (native) {
                int64_t nkp = (nk + 1) / 2;
                p->isa.p2(sc.s, nk, sc.p2);
                p->isa.mk16(Dv, NQ, nkp, sc.vp, 2, Dv * 2, sc.p2, NQ * 2,
                            sc.ot + pi * Dv * NQ, NQ, 1);
            } else {
                p->isa.mk(Dv, NQ, nk, vf, 1, vfs, sc.s, NQ, sc.ot + pi * Dv * NQ, NQ, 1);
            }
        }
    }
    /* finish */
    {
        int64_t pi, r;
        for (pi = 0; pi < np; pi++) {
            kern__sdpa_lane *ln = sc.ln + pi * NQ;
            int64_t r0 = (pan + pi) * NQ;
            int64_t nr = f->rows_path ? R : (R - r0 < NQ ? R - r0 : NQ);
            for (r = 0; r < nr; r++) {
                const float *acc = f->rows_path ? sc.ot + r * Dv : sc.ot + pi * Dv * NQ + r;
                int64_t cs = f->rows_path ? 1 : NQ;
                if (f->nsplit > 1)
                    kern__sdpa_emit_part(f, b, hk, qb, sp, (f->rows_path ? 0 : pi * NQ) + r,
                                         acc, cs, sc.m[pi * NQ + r], sc.l[pi * NQ + r]);
                else
                    kern__sdpa_emit(f, qbase, ln[r].h, ln[r].i, acc, cs, sc.m[pi * NQ + r],
                                    sc.l[pi * NQ + r], sc.row);
            }
        }
    }
}

/* Combine phase: one task per (b, hk, qb); merges the key splits in order. */
static void kern__sdpa_combine_task(void *arg, int64_t t, int thread) {
    const kern__sdpa_fwd *f = (const kern__sdpa_fwd *)arg;
    const kern__sdpa_prob *p = f->p;
    int64_t qb = t % f->nqb, hk = (t / f->nqb) % p->Hkv, b = t / (f->nqb * p->Hkv);
    int64_t lq, lk, qbase, kbase, R, r0, r1, r, sp, c, Dv = p->Dv;
    float *acc = (float *)kern__thread_scratch(f->ctx, thread);
    float *row = acc + Dv + 16;
    kern__sdpa_seq(p, b, &lq, &lk, &qbase, &kbase);
    (void)lk;
    R = lq * p->G;
    r0 = f->rows_path ? 0 : qb * KERN__SDPA_QB * KERN__SDPA_NQ;
    r1 = r0 + f->rows_cap < R ? r0 + f->rows_cap : R;
    for (r = r0; r < r1; r++) {
        float M = -INFINITY, L = 0.0f;
        int64_t i = r / p->G, h = hk * p->G + r % p->G;
        const float *base = f->part + (((b * p->Hkv + hk) * f->nqb + qb) * f->nsplit *
                                           f->rows_cap + (r - r0)) * (Dv + 2);
        int64_t pstride = f->rows_cap * (Dv + 2);
        for (sp = 0; sp < f->nsplit; sp++) {
            float ms = base[sp * pstride + Dv];
            if (ms > M) M = ms;
        }
        for (c = 0; c < Dv; c++) acc[c] = 0.0f;
        /* a split with no visible key has m = -inf and l = 0: weight 0; a
         * NaN m or l propagates */
        for (sp = 0; sp < f->nsplit; sp++) {
            const float *o = base + sp * pstride;
            float w = o[Dv] == -INFINITY ? 0.0f : exp2f(o[Dv] - M);
            L += o[Dv + 1] * w;
            for (c = 0; c < Dv; c++) acc[c] += o[c] * w;
        }
        kern__sdpa_emit(f, qbase, h, i, acc, 1, M, L, row);
    }
}

/* ============================================================ validation */

static kern_status kern__sdpa_need(const kern_tensor *t, const char *op, const char *name) {
    if (!t) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, name);
    return kern_tensor_check(t, op, name);
}

static kern_status kern__sdpa_unit(const kern_tensor *t, const char *op, const char *name) {
    if (t->ndim > 0 && t->shape[t->ndim - 1] > 1 && t->stride[t->ndim - 1] != 1)
        return kern__err(KERN_ERR_LAYOUT,
                         "%s: %s.stride[%d]=%lld, the last dim must have unit stride", op,
                         name, t->ndim - 1, (long long)t->stride[t->ndim - 1]);
    return KERN_OK;
}

static kern_status kern__sdpa_shape_is(const kern_tensor *t, int nd, const int64_t *want,
                                       const char *op, const char *name, const char *what) {
    int i;
    char b1[128], b2[128];
    kern_tensor w;
    if (t->ndim != nd)
        return kern__err(KERN_ERR_SHAPE, "%s: %s has %d dims, want %d (%s)", op, name, t->ndim,
                         nd, what);
    for (i = 0; i < nd; i++)
        if (t->shape[i] != want[i]) {
            memset(&w, 0, sizeof w);
            w.ndim = nd;
            memcpy(w.shape, want, (size_t)nd * sizeof(int64_t));
            return kern__err(KERN_ERR_SHAPE, "%s: %s.shape=%s but want %s (%s); %s.shape[%d]=%lld",
                             op, name, kern_shape_str(t, b1, sizeof b1),
                             kern_shape_str(&w, b2, sizeof b2), what, name, i,
                             (long long)t->shape[i]);
        }
    return KERN_OK;
}

static kern_status kern__sdpa_check_params(const kern_sdpa_params *pp, const char *op) {
    if (!(pp->dropout_p >= 0.0f && pp->dropout_p < 1.0f))
        return kern__err(KERN_ERR_ARG, "%s: dropout_p=%g is outside [0, 1)", op,
                         (double)pp->dropout_p);
    if (pp->window_left < -1 || pp->window_right < -1)
        return kern__err(KERN_ERR_ARG, "%s: window_left=%lld window_right=%lld; each must be >= -1",
                         op, (long long)pp->window_left, (long long)pp->window_right);
    if (!isfinite(pp->scale))
        return kern__err(KERN_ERR_ARG, "%s: scale=%g is not finite", op, (double)pp->scale);
    if (!(pp->softcap >= 0.0f) || !isfinite(pp->softcap))
        return kern__err(KERN_ERR_ARG, "%s: softcap=%g must be finite and >= 0 (0 = none)", op,
                         (double)pp->softcap);
    return KERN_OK;
}

/* Validates cu_seqlens (i32/i64, [nseq+1], starts at 0, non-decreasing,
 * ends at T, no sequence longer than maxlen). */
static kern_status kern__sdpa_check_cu(const kern_tensor *cu, int64_t nseq_plus1, int64_t T,
                                       int64_t maxlen, const char *op, const char *name,
                                       int64_t *longest) {
    kern_status st = kern__sdpa_need(cu, op, name);
    int64_t s, prev = 0, lmax = 0;
    if (st) return st;
    if (cu->dtype != KERN_I32 && cu->dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s, want i32 or i64", op, name,
                         kern_dtype_name(cu->dtype));
    if (cu->ndim != 1 || cu->shape[0] < 1 || (nseq_plus1 >= 0 && cu->shape[0] != nseq_plus1))
        return kern__err(KERN_ERR_SHAPE, "%s: %s must be 1-D [nseq+1] (ndim=%d, shape[0]=%lld)",
                         op, name, cu->ndim, (long long)(cu->ndim ? cu->shape[0] : 0));
    for (s = 0; s < cu->shape[0]; s++) {
        int64_t x = kern__sdpa_geti(cu->data, cu->dtype, s * cu->stride[0]);
        if (s == 0 && x != 0)
            return kern__err(KERN_ERR_INDEX, "%s: %s[0]=%lld, must be 0", op, name, (long long)x);
        if (x < prev)
            return kern__err(KERN_ERR_INDEX, "%s: %s[%lld]=%lld < %s[%lld]=%lld (not increasing)",
                             op, name, (long long)s, (long long)x, name, (long long)(s - 1),
                             (long long)prev);
        if (x - prev > maxlen)
            return kern__err(KERN_ERR_INDEX,
                             "%s: %s: sequence %lld has length %lld > max_seqlen %lld", op, name,
                             (long long)(s - 1), (long long)(x - prev), (long long)maxlen);
        if (x - prev > lmax) lmax = x - prev;
        prev = x;
    }
    *longest = lmax;
    if (prev != T)
        return kern__err(KERN_ERR_INDEX, "%s: %s[%lld]=%lld but the packed tensor has %lld rows",
                         op, name, (long long)(cu->shape[0] - 1), (long long)prev, (long long)T);
    return KERN_OK;
}

/* The stride of dim d of t as the kernels use it: 0 where it is never
 * needed (d < 0, a dim of one element, an empty view), so that a huge
 * stride there (any value is valid) never enters pointer arithmetic. */
static int64_t kern__sdpa_st(const kern_tensor *t, int d) {
    return d >= 0 && t->shape[d] > 1 && kern_tensor_numel(t) > 0 ? t->stride[d] : 0;
}

/* Common checks and problem setup. mode: 0 forward dense, 1 forward varlen,
 * 2 backward dense, 3 backward varlen. bwd tensors may be NULL in forward. */
static kern_status kern__sdpa_setup(kern__sdpa_prob *P, const char *op, int varlen, int bwd,
                                    const kern_tensor *q, const kern_tensor *k,
                                    const kern_tensor *v, const kern_tensor *out,
                                    const kern_tensor *dout, const kern_tensor *lse,
                                    const kern_tensor *dq, const kern_tensor *dk,
                                    const kern_tensor *dv, const kern_tensor *cuq,
                                    const kern_tensor *cuk, int64_t maxq, int64_t maxk,
                                    const kern_sdpa_params *pp) {
    kern_status st;
    int nd = varlen ? 3 : 4, i;
    int64_t B, Hq, Hkv, Lq, Lk, D, Dv, want[4], Lq_run = 0, Lk_run = 0;
    const char *dims = varlen ? "[T,H,D]" : "[B,H,L,D]";
    memset(P, 0, sizeof *P);
    if ((st = kern__sdpa_need(q, op, "q")) || (st = kern__sdpa_need(k, op, "k")) ||
        (st = kern__sdpa_need(v, op, "v")) || (st = kern__sdpa_need(out, op, "out")))
        return st;
    if (bwd) {
        if ((st = kern__sdpa_need(dout, op, "dout")) || (st = kern__sdpa_need(lse, op, "lse")) ||
            (st = kern__sdpa_need(dq, op, "dq")) || (st = kern__sdpa_need(dk, op, "dk")) ||
            (st = kern__sdpa_need(dv, op, "dv")))
            return st;
    }
    if ((st = kern__sdpa_check_params(pp, op))) return st;
    {
        const kern_tensor *ts[8];
        const char *nm[8] = {"q", "k", "v", "out", "dout", "dq", "dk", "dv"};
        int n = bwd ? 8 : 4;
        ts[0] = q; ts[1] = k; ts[2] = v; ts[3] = out;
        ts[4] = dout; ts[5] = dq; ts[6] = dk; ts[7] = dv;
        if (!kern_dtype_is_float(q->dtype))
            return kern__err(KERN_ERR_DTYPE, "%s: q.dtype=%s, want f32, bf16 or f16", op,
                             kern_dtype_name(q->dtype));
        for (i = 0; i < n; i++) {
            if (ts[i]->dtype != q->dtype)
                return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s but q.dtype=%s", op, nm[i],
                                 kern_dtype_name(ts[i]->dtype), kern_dtype_name(q->dtype));
            if (ts[i]->ndim != nd)
                return kern__err(KERN_ERR_SHAPE, "%s: %s has %d dims, want %d %s", op, nm[i],
                                 ts[i]->ndim, nd, dims);
        }
        for (i = 0; i < n; i++)
            if ((st = kern__sdpa_unit(ts[i], op, nm[i]))) return st;
    }
    if (varlen) {
        B = cuq ? (cuq->ndim == 1 ? cuq->shape[0] - 1 : -1) : -1;
        Hq = q->shape[1];
        Hkv = k->shape[1];
        D = q->shape[2];
        Dv = v->shape[2];
        if (maxq < 0 || maxk < 0)
            return kern__err(KERN_ERR_ARG, "%s: max_seqlen_q=%lld max_seqlen_k=%lld must be >= 0",
                             op, (long long)maxq, (long long)maxk);
        Lq = maxq;
        Lk = maxk;
        if (k->shape[0] != v->shape[0])
            return kern__err(KERN_ERR_SHAPE, "%s: k.shape[0]=%lld but v.shape[0]=%lld", op,
                             (long long)k->shape[0], (long long)v->shape[0]);
        if (k->shape[1] != v->shape[1])
            return kern__err(KERN_ERR_SHAPE, "%s: k.shape[1]=%lld but v.shape[1]=%lld", op,
                             (long long)k->shape[1], (long long)v->shape[1]);
        if (k->shape[2] != D)
            return kern__err(KERN_ERR_SHAPE, "%s: q.shape[2]=%lld but k.shape[2]=%lld", op,
                             (long long)D, (long long)k->shape[2]);
        want[0] = q->shape[0]; want[1] = Hq; want[2] = Dv;
        if ((st = kern__sdpa_shape_is(out, 3, want, op, "out", "[Tq,Hq,Dv]"))) return st;
        if ((st = kern__sdpa_check_cu(cuq, -1, q->shape[0], maxq, op, "cu_seqlens_q", &Lq_run)))
            return st;
        B = cuq->shape[0] - 1;
        if ((st = kern__sdpa_check_cu(cuk, B + 1, k->shape[0], maxk, op, "cu_seqlens_k", &Lk_run)))
            return st;
        if (pp->attn_mask)
            return kern__err(KERN_ERR_UNSUPPORTED, "%s: attn_mask is not supported with varlen", op);
        if (pp->k_lens)
            return kern__err(KERN_ERR_UNSUPPORTED,
                             "%s: k_lens is not supported with varlen (use cu_seqlens_k)", op);
    } else {
        B = q->shape[0];
        Hq = q->shape[1];
        Lq = q->shape[2];
        D = q->shape[3];
        Hkv = k->shape[1];
        Lk = k->shape[2];
        Dv = v->shape[3];
        Lq_run = Lq;
        Lk_run = Lk;
        if (k->shape[0] != B || v->shape[0] != B)
            return kern__err(KERN_ERR_SHAPE, "%s: batch mismatch: q.shape[0]=%lld k.shape[0]=%lld "
                             "v.shape[0]=%lld", op, (long long)B, (long long)k->shape[0],
                             (long long)v->shape[0]);
        if (v->shape[1] != Hkv)
            return kern__err(KERN_ERR_SHAPE, "%s: k.shape[1]=%lld but v.shape[1]=%lld", op,
                             (long long)Hkv, (long long)v->shape[1]);
        if (v->shape[2] != Lk)
            return kern__err(KERN_ERR_SHAPE, "%s: k.shape[2]=%lld but v.shape[2]=%lld", op,
                             (long long)Lk, (long long)v->shape[2]);
        if (k->shape[3] != D)
            return kern__err(KERN_ERR_SHAPE, "%s: q.shape[3]=%lld but k.shape[3]=%lld", op,
                             (long long)D, (long long)k->shape[3]);
        want[0] = B; want[1] = Hq; want[2] = Lq; want[3] = Dv;
        if ((st = kern__sdpa_shape_is(out, 4, want, op, "out", "[B,Hq,Lq,Dv]"))) return st;
    }
    if (D < 1)
        return kern__err(KERN_ERR_SHAPE, "%s: head dim q.shape[%d]=%lld must be >= 1", op, nd - 1,
                         (long long)D);
    if (Hkv == 0 ? Hq != 0 : Hq % Hkv != 0)
        return kern__err(KERN_ERR_SHAPE, "%s: Hq=%lld is not a multiple of Hkv=%lld", op,
                         (long long)Hq, (long long)Hkv);
    if (Hq != Hkv && !pp->enable_gqa)
        return kern__err(KERN_ERR_SHAPE, "%s: Hq=%lld != Hkv=%lld needs enable_gqa", op,
                         (long long)Hq, (long long)Hkv);
    if (bwd) {
        if ((st = kern__sdpa_shape_is(dout, nd, out->shape, op, "dout", "out's shape"))) return st;
        if ((st = kern__sdpa_shape_is(dq, nd, q->shape, op, "dq", "q's shape"))) return st;
        if ((st = kern__sdpa_shape_is(dk, nd, k->shape, op, "dk", "k's shape"))) return st;
        if ((st = kern__sdpa_shape_is(dv, nd, v->shape, op, "dv", "v's shape"))) return st;
    }
    /* lse */
    {
        const kern_tensor *L = bwd ? lse : pp->lse;
        if (L) {
            if ((st = kern_tensor_check(L, op, "lse"))) return st;
            if (L->dtype != KERN_F32)
                return kern__err(KERN_ERR_DTYPE, "%s: lse.dtype=%s, want f32", op,
                                 kern_dtype_name(L->dtype));
            if (varlen) {
                want[0] = Hq; want[1] = q->shape[0];
                if ((st = kern__sdpa_shape_is(L, 2, want, op, "lse", "[Hq,Tq]"))) return st;
                P->lses[1] = kern__sdpa_st(L, 0);
                P->lses[2] = kern__sdpa_st(L, 1);
            } else {
                want[0] = B; want[1] = Hq; want[2] = Lq;
                if ((st = kern__sdpa_shape_is(L, 3, want, op, "lse", "[B,Hq,Lq]"))) return st;
                P->lses[0] = kern__sdpa_st(L, 0);
                P->lses[1] = kern__sdpa_st(L, 1);
                P->lses[2] = kern__sdpa_st(L, 2);
            }
            P->lse = (float *)L->data;
        }
    }
    /* mask */
    if (pp->attn_mask) {
        const kern_tensor *m = pp->attn_mask;
        int64_t full[4];
        if ((st = kern_tensor_check(m, op, "attn_mask"))) return st;
        if (m->dtype != KERN_BOOL && !kern_dtype_is_float(m->dtype))
            return kern__err(KERN_ERR_DTYPE, "%s: attn_mask.dtype=%s, want bool, f32, f16 or bf16",
                             op, kern_dtype_name(m->dtype));
        full[0] = B; full[1] = Hq; full[2] = Lq; full[3] = Lk;
        if (m->ndim > 4)
            return kern__err(KERN_ERR_SHAPE, "%s: attn_mask has %d dims, cannot broadcast to "
                             "[B,Hq,Lq,Lk]", op, m->ndim);
        if ((st = kern_tensor_broadcast_to(m, 4, full, &P->maskv, op, "attn_mask"))) return st;
        for (i = 0; i < 4; i++) P->maskv.stride[i] = kern__sdpa_st(&P->maskv, i);
        P->mask = &P->maskv;
    }
    /* k_lens */
    if (pp->k_lens) {
        const kern_tensor *kl = pp->k_lens;
        int64_t b;
        if ((st = kern_tensor_check(kl, op, "k_lens"))) return st;
        if (kl->dtype != KERN_I32 && kl->dtype != KERN_I64)
            return kern__err(KERN_ERR_DTYPE, "%s: k_lens.dtype=%s, want i32 or i64", op,
                             kern_dtype_name(kl->dtype));
        if (kl->ndim != 1 || kl->shape[0] != B)
            return kern__err(KERN_ERR_SHAPE, "%s: k_lens must be [B]=[%lld] (ndim=%d, shape[0]=%lld)",
                             op, (long long)B, kl->ndim, (long long)(kl->ndim ? kl->shape[0] : 0));
        for (b = 0; b < B; b++) {
            int64_t x = kern__sdpa_geti(kl->data, kl->dtype, b * kl->stride[0]);
            if (x < 0 || x > Lk)
                return kern__err(KERN_ERR_INDEX, "%s: k_lens[%lld]=%lld is outside [0, Lk=%lld]",
                                 op, (long long)b, (long long)x, (long long)Lk);
        }
        P->klens = kl->data;
        P->klens_dt = kl->dtype;
        P->klens_s = kern__sdpa_st(kl, 0);
    }
    /* aliasing: outputs vs inputs and each other */
    {
        const kern_tensor *in[8], *ou[4];
        const char *inm[8], *onm[4];
        int ni = 0, no = 0, a, c;
        in[ni] = q; inm[ni++] = "q";
        in[ni] = k; inm[ni++] = "k";
        in[ni] = v; inm[ni++] = "v";
        if (pp->attn_mask) { in[ni] = pp->attn_mask; inm[ni++] = "attn_mask"; }
        if (pp->k_lens) { in[ni] = pp->k_lens; inm[ni++] = "k_lens"; }
        if (cuq) { in[ni] = cuq; inm[ni++] = "cu_seqlens_q"; }
        if (cuk) { in[ni] = cuk; inm[ni++] = "cu_seqlens_k"; }
        if (bwd) {
            in[ni] = out; inm[ni++] = "out";
            ou[no] = dq; onm[no++] = "dq";
            ou[no] = dk; onm[no++] = "dk";
            ou[no] = dv; onm[no++] = "dv";
        } else {
            ou[no] = out; onm[no++] = "out";
            if (pp->lse) { ou[no] = pp->lse; onm[no++] = "lse"; }
        }
        for (a = 0; a < no; a++) {
            if (kern__tensor_self_overlap(ou[a]))
                return kern__err(KERN_ERR_LAYOUT,
                                 "%s: %s has overlapping elements (a zero or too small stride); an "
                                 "output needs distinct elements",
                                 op, onm[a]);
            for (c = 0; c < ni; c++)
                if (kern_tensors_overlap(ou[a], in[c]))
                    return kern__err(KERN_ERR_ARG, "%s: %s overlaps input %s", op, onm[a], inm[c]);
            if (bwd && (kern_tensors_overlap(ou[a], dout) || kern_tensors_overlap(ou[a], lse)))
                return kern__err(KERN_ERR_ARG, "%s: %s overlaps input %s", op, onm[a],
                                 kern_tensors_overlap(ou[a], dout) ? "dout" : "lse");
            for (c = 0; c < a; c++)
                if (kern_tensors_overlap(ou[a], ou[c]))
                    return kern__err(KERN_ERR_ARG, "%s: outputs %s and %s overlap", op, onm[c],
                                     onm[a]);
        }
    }
    P->B = B; P->Hq = Hq; P->Hkv = Hkv; P->G = Hkv ? Hq / Hkv : 1;
    P->D = D; P->Dv = Dv; P->Lq = Lq; P->Lk = Lk;
    P->Lq_run = Lq_run; P->Lk_run = Lk_run;
    P->dt = q->dtype;
    P->es = kern_dtype_size(q->dtype);
    P->q = (const char *)q->data;
    P->k = (const char *)k->data;
    P->v = (const char *)v->data;
    P->o = (const char *)out->data;
    for (i = 0; i < 3; i++) {
        /* [b, h, l] strides; varlen: [unused, h, token] */
        int d = varlen ? (i == 0 ? -1 : i == 1 ? 1 : 0) : i;
        P->qs[i] = kern__sdpa_st(q, d);
        P->ks[i] = kern__sdpa_st(k, d);
        P->vs[i] = kern__sdpa_st(v, d);
        P->os[i] = kern__sdpa_st(out, d);
        if (bwd) {
            P->ds[i] = kern__sdpa_st(dout, d);
            P->dqs[i] = kern__sdpa_st(dq, d);
            P->dks[i] = kern__sdpa_st(dk, d);
            P->dvs[i] = kern__sdpa_st(dv, d);
        }
    }
    if (bwd) {
        P->dout = (const char *)dout->data;
        P->dq = (char *)dq->data;
        P->dk = (char *)dk->data;
        P->dv = (char *)dv->data;
    }
    P->varlen = varlen;
    if (varlen) {
        P->cuq = cuq->data;
        P->cuk = cuk->data;
        P->cuq_dt = cuq->dtype;
        P->cuk_dt = cuk->dtype;
        /* cu_seqlens are validated contiguous-agnostic: read via stride */
        if (cuq->stride[0] != 1 || cuk->stride[0] != 1)
            return kern__err(KERN_ERR_LAYOUT, "%s: cu_seqlens_q/k must be contiguous (strides %lld, %lld)",
                             op, (long long)cuq->stride[0], (long long)cuk->stride[0]);
    }
    P->scale = pp->scale_set || pp->scale != 0.0f ? pp->scale : 1.0f / sqrtf((float)D);
    P->softcap = pp->softcap;
    P->dropout_p = pp->dropout_p;
    P->drop_thr = kern_dropout_threshold(pp->dropout_p);
    P->seed = pp->seed;
    P->offset = pp->offset;
    P->causal = pp->is_causal || pp->causal_bottom_right;
    P->bottom_right = pp->causal_bottom_right != 0;
    P->window = pp->window_set != 0;
    P->wl = pp->window_left;
    P->wr = pp->window_right;
    (void)maxq;
    (void)maxk;
    return KERN_OK;
}

/* The forward's partition (query panels, key splits) and its scratch: the
 * per-thread tiles and, with split keys, the partial results shared.
 * Returns 0 for an empty problem (nothing to do, no scratch). */
static int kern__sdpa_fwd_plan(kern_ctx *ctx, kern__sdpa_prob *P, kern__sdpa_fwd *fp,
                               size_t *shared, size_t *thread) {
    kern__sdpa_fwd f;
    kern__sdpa_fscr sc;
    size_t scr;
    int64_t R = P->Lq_run * P->G, base, nkb;
    memset(&f, 0, sizeof f);
    *shared = *thread = 0;
    if (P->B == 0 || P->Hq == 0 || P->Lq_run == 0) return 0;
    kern__sdpa_pick(ctx, &P->isa);
    P->bf16_native = P->dt == KERN_BF16 && P->isa.mk16 && (P->D % 2) == 0;
    f.p = P;
    f.ctx = ctx;
    f.rows_path = R < KERN__SDPA_ROWS_MAX;
    if (f.rows_path) {
        f.nqb = 1;
        f.rows_cap = R;
    } else {
        f.nqb = (R + KERN__SDPA_QB * KERN__SDPA_NQ - 1) / (KERN__SDPA_QB * KERN__SDPA_NQ);
        f.rows_cap = KERN__SDPA_QB * KERN__SDPA_NQ;
    }
    base = P->B * P->Hkv * f.nqb;
    nkb = (P->Lk_run + KERN__SDPA_BK - 1) / KERN__SDPA_BK;
    f.nsplit = 1;
    if (base < KERN__SDPA_SPLIT_TASKS && P->Lk_run >= 2 * KERN__SDPA_SPLIT_MIN_KEYS) {
        int64_t want = (KERN__SDPA_SPLIT_TASKS + base - 1) / base;
        int64_t maxs = P->Lk_run / KERN__SDPA_SPLIT_MIN_KEYS;
        f.nsplit = want < maxs ? want : maxs;
        if (f.nsplit < 1) f.nsplit = 1;
    }
    f.chunk = ((nkb + f.nsplit - 1) / f.nsplit) * KERN__SDPA_BK;
    if (f.chunk == 0) f.chunk = KERN__SDPA_BK;
    f.ntasks = base * f.nsplit;
    scr = kern__sdpa_fscr_carve(P, NULL, &sc);
    if (f.rows_path) {
        /* rows path: q rows [R][D16] and O [R][Dv] fit in the panel areas */
    }
    if ((size_t)(2 * P->Dv + 64) * 4 > scr) scr = (size_t)(2 * P->Dv + 64) * 4;
    *thread = scr;
    if (f.nsplit > 1) *shared = (size_t)(base * f.nsplit * f.rows_cap * (P->Dv + 2)) * 4;
    *fp = f;
    return 1;
}

static kern_status kern__sdpa_forward(kern_ctx *ctx, kern__sdpa_prob *P, const char *op,
                                      const kern_sdpa_params *pp) {
    kern__sdpa_fwd f;
    size_t shared, thread;
    kern_status st;
    if (!kern__sdpa_fwd_plan(ctx, P, &f, &shared, &thread)) return KERN_OK;
    if ((st = kern__op_workspace(ctx, op, pp->workspace, pp->workspace_size, shared, thread)))
        return st;
    if ((st = kern__reserve_thread_scratch(ctx, thread))) return st;
    if (f.nsplit > 1) {
        f.part = (float *)kern__workspace(ctx, shared);
        if (!f.part)
            return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes of workspace", op,
                             shared);
    }
    kern_parallel_for(ctx, f.ntasks, kern__sdpa_fwd_task, &f);
    if (f.nsplit > 1) kern_parallel_for(ctx, f.ntasks / f.nsplit, kern__sdpa_combine_task, &f);
    return KERN_OK;
}

KERN_API kern_status kern_sdpa(kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k,
                               const kern_tensor *v, const kern_tensor *out,
                               const kern_sdpa_params *params) {
    kern_sdpa_params def;
    kern__sdpa_prob P;
    kern_status st;
    if (!params) {
        memset(&def, 0, sizeof def);
        params = &def;
    }
    if ((st = kern__op_begin(&ctx, "kern_sdpa"))) return st;
    st = kern__sdpa_setup(&P, "kern_sdpa", 0, 0, q, k, v, out, NULL, NULL, NULL, NULL, NULL,
                          NULL, NULL, 0, 0, params);
    if (st == KERN_OK) st = kern__sdpa_forward(ctx, &P, "kern_sdpa", params);
    kern__op_end(ctx);
    return st;
}

KERN_API kern_status kern_sdpa_varlen(kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k,
                                      const kern_tensor *v, const kern_tensor *out,
                                      const kern_tensor *cu_seqlens_q,
                                      const kern_tensor *cu_seqlens_k, int64_t max_seqlen_q,
                                      int64_t max_seqlen_k, const kern_sdpa_params *params) {
    kern_sdpa_params def;
    kern__sdpa_prob P;
    kern_status st;
    if (!params) {
        memset(&def, 0, sizeof def);
        params = &def;
    }
    if ((st = kern__op_begin(&ctx, "kern_sdpa_varlen"))) return st;
    st = kern__sdpa_setup(&P, "kern_sdpa_varlen", 1, 0, q, k, v, out, NULL, NULL, NULL, NULL,
                          NULL, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, params);
    if (st == KERN_OK) st = kern__sdpa_forward(ctx, &P, "kern_sdpa_varlen", params);
    kern__op_end(ctx);
    return st;
}

/* ============================================================ backward */

/* Row indices into the backward workspaces: query rows (b, h, i) and key
 * rows (b, hk, j); dense: [B][H][L], varlen: [T][H]. */
static inline int64_t kern__sdpa_qrow(const kern__sdpa_prob *p, int64_t qbase, int64_t h,
                                      int64_t i) {
    return p->varlen ? (qbase + i) * p->Hq + h : (qbase * p->Hq + h) * p->Lq + i;
}
static inline int64_t kern__sdpa_krow(const kern__sdpa_prob *p, int64_t kbase, int64_t hk,
                                      int64_t j) {
    return p->varlen ? (kbase + j) * p->Hkv + hk : (kbase * p->Hkv + hk) * p->Lk + j;
}

typedef struct kern__sdpa_bwd {
    kern__sdpa_prob *p;
    kern_ctx *ctx;
    int64_t nchunk, chunk, nqrows, nkrows;
    float *dkacc, *dvacc; /* [nkrows][D], [nkrows][Dv] */
    float *dqacc;         /* [nchunk][nqrows][D] */
    float *delta, *lse2;  /* [nqrows] */
} kern__sdpa_bwd;

typedef struct kern__sdpa_bscr {
    float *qt, *qr, *dot, *dor, *dqp; /* [D][NQ], [NQ][D], [Dv][NQ], [NQ][Dv], [NQ][D] */
    float *s, *pp, *dp, *tmp, *zr;    /* [BK][NQ] */
    float *kc, *vc;                   /* [BK][D], [BK][Dv] */
    float *lse2, *delta;              /* [NQ] */
    kern__sdpa_lane *ln;              /* [NQ] */
    float *row;
} kern__sdpa_bscr;

static size_t kern__sdpa_bscr_carve(const kern__sdpa_prob *p, char *base, kern__sdpa_bscr *sc) {
    kern__sdpa_carve c;
    int64_t D = p->D, Dv = p->Dv > 0 ? p->Dv : 1, NQ = KERN__SDPA_NQ, BK = KERN__SDPA_BK;
    c.base = base;
    c.used = 0;
    sc->qt = (float *)kern__sdpa_take(&c, (size_t)(D * NQ) * 4);
    sc->qr = (float *)kern__sdpa_take(&c, (size_t)(D * NQ) * 4);
    sc->dot = (float *)kern__sdpa_take(&c, (size_t)(Dv * NQ) * 4);
    sc->dor = (float *)kern__sdpa_take(&c, (size_t)(Dv * NQ) * 4);
    sc->dqp = (float *)kern__sdpa_take(&c, (size_t)(D * NQ) * 4);
    sc->s = (float *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 4);
    sc->pp = (float *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 4);
    sc->dp = (float *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 4);
    sc->tmp = (float *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 4);
    sc->zr = (float *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 4);
    sc->kc = (float *)kern__sdpa_take(&c, (size_t)(BK * D) * 4);
    sc->vc = (float *)kern__sdpa_take(&c, (size_t)(BK * Dv) * 4);
    sc->lse2 = (float *)kern__sdpa_take(&c, (size_t)NQ * 4);
    sc->delta = (float *)kern__sdpa_take(&c, (size_t)NQ * 4);
    sc->ln = (kern__sdpa_lane *)kern__sdpa_take(&c, (size_t)NQ * sizeof(kern__sdpa_lane));
    sc->row = (float *)kern__sdpa_take(&c, (size_t)((D > Dv ? D : Dv) + 16) * 4);
    return c.used;
}

/* Phase 0, per (b, h): delta = rowsum(dout * out) and lse in log2 units
 * (+inf for rows without visible keys, so that P = 2^(s - lse2) = 0). */
static void kern__sdpa_bwd_prep(void *arg, int64_t t, int thread) {
    const kern__sdpa_bwd *w = (const kern__sdpa_bwd *)arg;
    const kern__sdpa_prob *p = w->p;
    int64_t b = t / p->Hq, h = t % p->Hq, lq, lk, qbase, kbase, i, c, Dv = p->Dv;
    float *a = (float *)kern__thread_scratch(w->ctx, thread), *o = a + Dv + 16;
    kern__sdpa_seq(p, b, &lq, &lk, &qbase, &kbase);
    for (i = 0; i < lq; i++) {
        int64_t qi = kern__sdpa_qrow(p, qbase, h, i);
        float acc = 0.0f, L = *kern__sdpa_lse_ptr(p, qbase, h, i);
        if (Dv > 0) {
            kern__sdpa_to_f32(w->ctx, p->dout + (size_t)kern__sdpa_off(p, p->ds, qbase, h, i) * p->es,
                              p->dt, a, Dv);
            kern__sdpa_to_f32(w->ctx, p->o + (size_t)kern__sdpa_off(p, p->os, qbase, h, i) * p->es,
                              p->dt, o, Dv);
        }
        for (c = 0; c < Dv; c++) acc += a[c] * o[c];
        w->delta[qi] = acc;
        w->lse2[qi] = L == -INFINITY ? INFINITY : L * KERN__SDPA_LOG2E;
    }
}

/* Phase 1, per (b, hk, key range): dk, dv of the range (owned) and the
 * range's partial dq for every query row of the group. */
static void kern__sdpa_bwd_task(void *arg, int64_t t, int thread) {
    const kern__sdpa_bwd *w = (const kern__sdpa_bwd *)arg;
    const kern__sdpa_prob *p = w->p;
    kern__sdpa_bscr sc;
    int64_t per = p->B * p->Hkv, ch = t / per, b = (t % per) / p->Hkv, hk = t % p->Hkv;
    int64_t lq, lk, qbase, kbase, R, ks0, ks1, j, pan, npan, D = p->D, Dv = p->Dv;
    int64_t NQ = KERN__SDPA_NQ, BK = KERN__SDPA_BK, n;
    const char *kp, *vp;
    int64_t krs, vrs;
    float rdrop = p->dropout_p > 0 ? 1.0f / (1.0f - p->dropout_p) : 1.0f;
    kern__sdpa_bscr_carve(p, (char *)kern__thread_scratch(w->ctx, thread), &sc);
    kern__sdpa_seq(p, b, &lq, &lk, &qbase, &kbase);
    R = lq * p->G;
    ks0 = ch * w->chunk;
    ks1 = ks0 + w->chunk < lk ? ks0 + w->chunk : lk;
    /* an empty k or v may have NULL data: no pointer arithmetic on it */
    kp = lk > 0 ? p->k + (size_t)kern__sdpa_off(p, p->ks, kbase, hk, 0) * p->es : NULL;
    vp = lk > 0 && Dv > 0 ? p->v + (size_t)kern__sdpa_off(p, p->vs, kbase, hk, 0) * p->es : NULL;
    krs = p->ks[2];
    vrs = p->vs[2];
    /* this task owns dk/dv rows [ks0, ks1) of (b, hk) */
    for (j = ks0; j < ks1; j++) {
        int64_t kr = kern__sdpa_krow(p, kbase, hk, j);
        memset(w->dkacc + kr * D, 0, (size_t)D * 4);
        if (Dv > 0) memset(w->dvacc + kr * Dv, 0, (size_t)Dv * 4);
    }
    npan = (R + NQ - 1) / NQ;
    for (pan = 0; pan < npan; pan++) {
        kern__sdpa_lane *ln = sc.ln;
        int64_t r0 = pan * NQ, nr = R - r0 < NQ ? R - r0 : NQ, lo, hi, r, d, j0;
        kern__sdpa_lanes(p, b, hk, r0, nr, lq, lk, ln, &lo, &hi);
        if (lo < ks0) lo = ks0;
        if (hi > ks1) hi = ks1;
        memset(sc.dqp, 0, (size_t)(NQ * D) * 4);
        if (hi > lo) {
            /* pack q, dout (rows and transposed), lse2, delta */
            for (r = 0; r < NQ; r++) {
                if (r < nr) {
                    int64_t qi = kern__sdpa_qrow(p, qbase, ln[r].h, ln[r].i);
                    kern__sdpa_to_f32(w->ctx,
                                      p->q + (size_t)kern__sdpa_off(p, p->qs, qbase, ln[r].h, ln[r].i) * p->es,
                                      p->dt, sc.qr + r * D, D);
                    if (Dv > 0)
                        kern__sdpa_to_f32(w->ctx,
                                          p->dout + (size_t)kern__sdpa_off(p, p->ds, qbase, ln[r].h, ln[r].i) * p->es,
                                          p->dt, sc.dor + r * Dv, Dv);
                    sc.lse2[r] = w->lse2[qi];
                    sc.delta[r] = w->delta[qi];
                } else {
                    memset(sc.qr + r * D, 0, (size_t)D * 4);
                    if (Dv > 0) memset(sc.dor + r * Dv, 0, (size_t)Dv * 4);
                    sc.lse2[r] = INFINITY;
                    sc.delta[r] = 0.0f;
                }
                for (d = 0; d < D; d++) sc.qt[d * NQ + r] = sc.qr[r * D + d];
                for (d = 0; d < Dv; d++) sc.dot[d * NQ + r] = sc.dor[r * Dv + d];
            }
            for (j0 = (lo / BK) * BK; j0 < hi; j0 += BK) {
                int64_t nk = hi - j0 < BK ? hi - j0 : BK, e;
                const float *kf, *vf;
                int64_t kfs, vfs;
                n = nk * NQ;
                if (p->dt == KERN_F32) {
                    kf = (const float *)kp + j0 * krs;
                    vf = vp ? (const float *)vp + j0 * vrs : NULL; /* NULL: Dv = 0 */
                    kfs = krs;
                    vfs = vrs;
                } else {
                    int64_t jj;
                    for (jj = 0; jj < nk; jj++) {
                        kern__sdpa_to_f32(w->ctx, kp + (size_t)((j0 + jj) * krs) * p->es, p->dt,
                                          sc.kc + jj * D, D);
                        if (Dv > 0)
                            kern__sdpa_to_f32(w->ctx, vp + (size_t)((j0 + jj) * vrs) * p->es, p->dt,
                                              sc.vc + jj * Dv, Dv);
                    }
                    kf = sc.kc;
                    vf = sc.vc;
                    kfs = D;
                    vfs = Dv;
                }
                /* P^T = 2^(s - lse2), recomputed */
                p->isa.mk(nk, NQ, D, kf, kfs, 1, sc.qt, NQ, sc.s, NQ, 0);
                kern__sdpa_prepare(p, sc.s, nk, j0, ln, nr, sc.tmp, 1, 0);
                for (e = 0; e < n; e++) sc.pp[e] = sc.s[e] - sc.lse2[e % NQ];
                p->isa.exp2(sc.pp, n);
                /* dP^T = V dO^T (dropped, rescaled) */
                if (Dv > 0) p->isa.mk(nk, NQ, Dv, vf, vfs, 1, sc.dot, NQ, sc.dp, NQ, 0);
                else memset(sc.dp, 0, (size_t)n * 4);
                if (p->dropout_p > 0) {
                    for (e = 0; e < n; e++) sc.zr[e] = rdrop;
                    kern__sdpa_dropout(p, sc.zr, nk, j0, ln, nr, 0);
                    for (e = 0; e < n; e++) sc.dp[e] *= sc.zr[e];
                }
                /* dS = P (dP - delta) * scale (* (1 - t^2) with softcap);
                 * masked entries have P = 0 */
                for (e = 0; e < n; e++) {
                    float pe = sc.pp[e], ds = pe == 0.0f ? 0.0f : pe * (sc.dp[e] - sc.delta[e % NQ]);
                    if (p->softcap > 0) ds *= 1.0f - sc.tmp[e] * sc.tmp[e];
                    sc.dp[e] = ds * p->scale;
                }
                if (p->dropout_p > 0)
                    for (e = 0; e < n; e++) sc.pp[e] *= sc.zr[e];
                {
                    float *dkr = w->dkacc + kern__sdpa_krow(p, kbase, hk, j0) * D;
                    float *dvr = w->dvacc + kern__sdpa_krow(p, kbase, hk, j0) * (Dv > 0 ? Dv : 1);
                    int64_t kstep = p->varlen ? p->Hkv : 1; /* key rows of (b, hk) */
                    /* dV += Pd^T dO, dK += dS^T Q, dQ += dS K */
                    if (Dv > 0)
                        p->isa.mk(nk, Dv, NQ, sc.pp, NQ, 1, sc.dor, Dv, dvr, kstep * Dv, 1);
                    p->isa.mk(nk, D, NQ, sc.dp, NQ, 1, sc.qr, D, dkr, kstep * D, 1);
                    p->isa.mk(NQ, D, nk, sc.dp, 1, NQ, kf, kfs, sc.dqp, D, 1);
                }
            }
        }
        for (r = 0; r < nr; r++) {
            int64_t qi = kern__sdpa_qrow(p, qbase, ln[r].h, ln[r].i);
            memcpy(w->dqacc + (ch * w->nqrows + qi) * D, sc.dqp + r * D, (size_t)D * 4);
        }
    }
    /* write the owned dk, dv rows */
    for (j = ks0; j < ks1; j++) {
        int64_t kr = kern__sdpa_krow(p, kbase, hk, j);
        kern__sdpa_from_f32(w->ctx, w->dkacc + kr * D, p->dt,
                            p->dk + (size_t)kern__sdpa_off(p, p->dks, kbase, hk, j) * p->es, D);
        if (Dv > 0)
            kern__sdpa_from_f32(w->ctx, w->dvacc + kr * Dv, p->dt,
                                p->dv + (size_t)kern__sdpa_off(p, p->dvs, kbase, hk, j) * p->es, Dv);
    }
}

/* Zero dk/dv rows beyond a batch entry's key length (k_lens, varlen keys
 * are all covered) and sum the dq partials in key-range order. */
static void kern__sdpa_bwd_final(void *arg, int64_t t, int thread) {
    const kern__sdpa_bwd *w = (const kern__sdpa_bwd *)arg;
    const kern__sdpa_prob *p = w->p;
    int64_t b = t / p->Hq, h = t % p->Hq, lq, lk, qbase, kbase, i, c, d, D = p->D;
    float *acc = (float *)kern__thread_scratch(w->ctx, thread);
    kern__sdpa_seq(p, b, &lq, &lk, &qbase, &kbase);
    for (i = 0; i < lq; i++) {
        int64_t qi = kern__sdpa_qrow(p, qbase, h, i);
        memcpy(acc, w->dqacc + qi * D, (size_t)D * 4);
        for (c = 1; c < w->nchunk; c++) {
            const float *x = w->dqacc + (c * w->nqrows + qi) * D;
            for (d = 0; d < D; d++) acc[d] += x[d];
        }
        kern__sdpa_from_f32(w->ctx, acc, p->dt,
                            p->dq + (size_t)kern__sdpa_off(p, p->dqs, qbase, h, i) * p->es, D);
    }
    /* keys past k_lens get zero gradients (one task per kv head does it) */
    if (!p->varlen && h % p->G == 0 && lk < p->Lk) {
        int64_t hk = h / p->G, j;
        memset(acc, 0, (size_t)(D > p->Dv ? D : p->Dv) * 4);
        for (j = lk; j < p->Lk; j++) {
            kern__sdpa_from_f32(w->ctx, acc, p->dt,
                                p->dk + (size_t)kern__sdpa_off(p, p->dks, kbase, hk, j) * p->es, D);
            if (p->Dv > 0)
                kern__sdpa_from_f32(w->ctx, acc, p->dt,
                                    p->dv + (size_t)kern__sdpa_off(p, p->dvs, kbase, hk, j) * p->es,
                                    p->Dv);
        }
    }
}

/* The backward's partition (key ranges) and its scratch: the f32 dk/dv
 * accumulators, the partial dq of every key range, delta and lse shared;
 * per-thread tiles. Returns 0 for an empty problem. */
static int kern__sdpa_bwd_plan(kern_ctx *ctx, kern__sdpa_prob *P, kern__sdpa_bwd *wp,
                               size_t *shared, size_t *thread) {
    kern__sdpa_bwd w;
    kern__sdpa_bscr sc;
    int64_t nkb, base, Tq, Tk;
    memset(&w, 0, sizeof w);
    *shared = *thread = 0;
    if (P->B == 0 || P->Hq == 0) return 0;
    kern__sdpa_pick(ctx, &P->isa);
    w.p = P;
    w.ctx = ctx;
    if (P->varlen) {
        Tq = kern__sdpa_geti(P->cuq, P->cuq_dt, P->B);
        Tk = kern__sdpa_geti(P->cuk, P->cuk_dt, P->B);
        w.nqrows = Tq * P->Hq;
        w.nkrows = Tk * P->Hkv;
    } else {
        w.nqrows = P->B * P->Hq * P->Lq;
        w.nkrows = P->B * P->Hkv * P->Lk;
    }
    nkb = (P->Lk_run + KERN__SDPA_BK - 1) / KERN__SDPA_BK;
    base = P->B * P->Hkv;
    /* key ranges per (b, hk): a function of the shape only (determinism) */
    w.nchunk = (KERN__SDPA_BWD_TASKS + base - 1) / base;
    if (w.nchunk > nkb) w.nchunk = nkb;
    if (w.nchunk < 1) w.nchunk = 1;
    w.chunk = ((nkb + w.nchunk - 1) / w.nchunk) * KERN__SDPA_BK;
    if (w.chunk == 0) w.chunk = KERN__SDPA_BK;
    *thread = kern__sdpa_bscr_carve(P, NULL, &sc);
    *shared = (size_t)(w.nkrows * (P->D + P->Dv) + w.nchunk * w.nqrows * P->D + 2 * w.nqrows + 64) * 4;
    *wp = w;
    return 1;
}

/* The backward with no query heads (Hkv may be > 0): dk = dv = 0. */
static void kern__sdpa_bwd_zero_kv(kern__sdpa_prob *P) {
    int64_t b, hk, j, lq, lk, qbase, kbase;
    for (b = 0; b < P->B; b++) {
        kern__sdpa_seq(P, b, &lq, &lk, &qbase, &kbase);
        if (!P->varlen) lk = P->Lk; /* every key row, k_lens aside */
        for (hk = 0; hk < P->Hkv; hk++)
            for (j = 0; j < lk; j++) {
                memset(P->dk + (size_t)kern__sdpa_off(P, P->dks, kbase, hk, j) * P->es, 0,
                       (size_t)P->D * P->es);
                if (P->Dv > 0)
                    memset(P->dv + (size_t)kern__sdpa_off(P, P->dvs, kbase, hk, j) * P->es, 0,
                           (size_t)P->Dv * P->es);
            }
    }
}

static kern_status kern__sdpa_backward(kern_ctx *ctx, kern__sdpa_prob *P, const char *op,
                                       const kern_sdpa_params *pp) {
    kern__sdpa_bwd w;
    size_t shared, thread;
    kern_status st;
    char *ws;
    int64_t base;
    if (!kern__sdpa_bwd_plan(ctx, P, &w, &shared, &thread)) {
        if (P->B > 0 && P->Hq == 0) kern__sdpa_bwd_zero_kv(P);
        return KERN_OK;
    }
    if ((st = kern__op_workspace(ctx, op, pp->workspace, pp->workspace_size, shared, thread)))
        return st;
    if ((st = kern__reserve_thread_scratch(ctx, thread))) return st;
    ws = (char *)kern__workspace(ctx, shared);
    if (!ws)
        return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes of workspace", op, shared);
    base = P->B * P->Hkv;
    w.dkacc = (float *)ws;
    w.dvacc = w.dkacc + w.nkrows * P->D;
    w.dqacc = w.dvacc + w.nkrows * P->Dv;
    w.delta = w.dqacc + w.nchunk * w.nqrows * P->D;
    w.lse2 = w.delta + w.nqrows;
    kern_parallel_for(ctx, P->B * P->Hq, kern__sdpa_bwd_prep, &w);
    kern_parallel_for(ctx, w.nchunk * base, kern__sdpa_bwd_task, &w);
    kern_parallel_for(ctx, P->B * P->Hq, kern__sdpa_bwd_final, &w);
    return KERN_OK;
}

KERN_API kern_status kern_sdpa_backward(kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k,
                                        const kern_tensor *v, const kern_tensor *out,
                                        const kern_tensor *dout, const kern_tensor *lse,
                                        const kern_tensor *dq, const kern_tensor *dk,
                                        const kern_tensor *dv, const kern_sdpa_params *params) {
    kern_sdpa_params def;
    kern__sdpa_prob P;
    kern_status st;
    if (!params) {
        memset(&def, 0, sizeof def);
        params = &def;
    }
    if ((st = kern__op_begin(&ctx, "kern_sdpa_backward"))) return st;
    st = kern__sdpa_setup(&P, "kern_sdpa_backward", 0, 1, q, k, v, out, dout, lse, dq, dk, dv,
                          NULL, NULL, 0, 0, params);
    if (st == KERN_OK) st = kern__sdpa_backward(ctx, &P, "kern_sdpa_backward", params);
    kern__op_end(ctx);
    return st;
}

KERN_API kern_status kern_sdpa_varlen_backward(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k, const kern_tensor *v,
    const kern_tensor *out, const kern_tensor *dout, const kern_tensor *lse,
    const kern_tensor *dq, const kern_tensor *dk, const kern_tensor *dv,
    const kern_tensor *cu_seqlens_q, const kern_tensor *cu_seqlens_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, const kern_sdpa_params *params) {
    kern_sdpa_params def;
    kern__sdpa_prob P;
    kern_status st;
    if (!params) {
        memset(&def, 0, sizeof def);
        params = &def;
    }
    if ((st = kern__op_begin(&ctx, "kern_sdpa_varlen_backward"))) return st;
    st = kern__sdpa_setup(&P, "kern_sdpa_varlen_backward", 1, 1, q, k, v, out, dout, lse, dq, dk,
                          dv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, params);
    if (st == KERN_OK) st = kern__sdpa_backward(ctx, &P, "kern_sdpa_varlen_backward", params);
    kern__op_end(ctx);
    return st;
}

/* ----------------------------------------------------- workspace sizes */

static kern_status kern__sdpa_ws_size(kern_ctx *ctx, const char *op, int varlen, int bwd,
                                      const kern_tensor *q, const kern_tensor *k,
                                      const kern_tensor *v, const kern_tensor *out,
                                      const kern_tensor *dout, const kern_tensor *lse,
                                      const kern_tensor *dq, const kern_tensor *dk,
                                      const kern_tensor *dv, const kern_tensor *cuq,
                                      const kern_tensor *cuk, int64_t maxq, int64_t maxk,
                                      const kern_sdpa_params *params, size_t *bytes) {
    kern_sdpa_params def;
    kern__sdpa_prob P;
    kern_status st;
    size_t shared = 0, thread = 0;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if (!params) {
        memset(&def, 0, sizeof def);
        params = &def;
    }
    if ((st = kern__op_begin(&ctx, op))) return st;
    st = kern__sdpa_setup(&P, op, varlen, bwd, q, k, v, out, dout, lse, dq, dk, dv, cuq, cuk,
                          maxq, maxk, params);
    if (st == KERN_OK) {
        if (bwd) {
            kern__sdpa_bwd w;
            kern__sdpa_bwd_plan(ctx, &P, &w, &shared, &thread);
        } else {
            kern__sdpa_fwd f;
            kern__sdpa_fwd_plan(ctx, &P, &f, &shared, &thread);
        }
        *bytes = kern__op_workspace_bytes(ctx, shared, thread);
    }
    kern__op_end(ctx);
    return st;
}

KERN_API kern_status kern_sdpa_workspace_size(kern_ctx *ctx, const kern_tensor *q,
                                              const kern_tensor *k, const kern_tensor *v,
                                              const kern_tensor *out,
                                              const kern_sdpa_params *params, size_t *bytes) {
    return kern__sdpa_ws_size(ctx, "kern_sdpa_workspace_size", 0, 0, q, k, v, out, NULL, NULL,
                              NULL, NULL, NULL, NULL, NULL, 0, 0, params, bytes);
}

KERN_API kern_status kern_sdpa_varlen_workspace_size(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k, const kern_tensor *v,
    const kern_tensor *out, const kern_tensor *cu_seqlens_q, const kern_tensor *cu_seqlens_k,
    int64_t max_seqlen_q, int64_t max_seqlen_k, const kern_sdpa_params *params,
    size_t *bytes) {
    return kern__sdpa_ws_size(ctx, "kern_sdpa_varlen_workspace_size", 1, 0, q, k, v, out, NULL,
                              NULL, NULL, NULL, NULL, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                              max_seqlen_k, params, bytes);
}

KERN_API kern_status kern_sdpa_backward_workspace_size(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k, const kern_tensor *v,
    const kern_tensor *out, const kern_tensor *dout, const kern_tensor *lse,
    const kern_tensor *dq, const kern_tensor *dk, const kern_tensor *dv,
    const kern_sdpa_params *params, size_t *bytes) {
    return kern__sdpa_ws_size(ctx, "kern_sdpa_backward_workspace_size", 0, 1, q, k, v, out,
                              dout, lse, dq, dk, dv, NULL, NULL, 0, 0, params, bytes);
}

KERN_API kern_status kern_sdpa_varlen_backward_workspace_size(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k, const kern_tensor *v,
    const kern_tensor *out, const kern_tensor *dout, const kern_tensor *lse,
    const kern_tensor *dq, const kern_tensor *dk, const kern_tensor *dv,
    const kern_tensor *cu_seqlens_q, const kern_tensor *cu_seqlens_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, const kern_sdpa_params *params, size_t *bytes) {
    return kern__sdpa_ws_size(ctx, "kern_sdpa_varlen_backward_workspace_size", 1, 1, q, k, v,
                              out, dout, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k,
                              max_seqlen_q, max_seqlen_k, params, bytes);
}

KERN_API void kern_sdpa_params_defaults(kern_sdpa_params *p, int64_t head_dim) {
    if (!p) return;
    if (!p->scale_set && p->scale == 0.0f && head_dim > 0) {
        p->scale = 1.0f / sqrtf((float)head_dim);
        p->scale_set = 1;
    } else if (p->scale != 0.0f) {
        p->scale_set = 1;
    }
}


#ifdef __cplusplus
}
#endif
KERN__IMPL_DIAG_END
#endif /* KERN_IMPLEMENTATION */
