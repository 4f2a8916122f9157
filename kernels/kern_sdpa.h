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
 *   rel_pos_h, rel_pos_w, rel_q_h, rel_q_w, rel_k_h, rel_k_w,
 *   rel_pos_interpolate  SAM's decomposed relative position (HF
 *                SamVisionAttention's get_rel_pos / add_decomposed_rel_pos),
 *                dense forward only: s_ij = capped(scale q_i.k_j) +
 *                q_i . Rh[ih(i, j)] + q_i . Rw[iw(i, j)] + mask, with the
 *                unscaled q; query i sits at (i / rel_q_w, i % rel_q_w) of
 *                a rel_q_h x rel_q_w grid (Lq = rel_q_h * rel_q_w), key j
 *                likewise on rel_k_h x rel_k_w; ih = trunc(a * sq - b * sk +
 *                (rel_k_h - 1) * sk) with sq = max(kh/qh, 1), sk = max(qh/kh,
 *                1) in f32, iw likewise. Tables [N, D], any float dtype and
 *                strides, shared by batch entries and heads; N must be
 *                2 * max(q, k) - 1 on its axis, or with rel_pos_interpolate
 *                any N >= 1, resized as F.interpolate(mode="linear"). The
 *                [Lq, Lk] bias is never formed: per query panel the kernel
 *                computes q . (the table rows its rows reach) with the
 *                microkernel and adds rh[kh] + rw[kw] to each score tile.
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
 *   KERN_ERR_ARG     NULL q/k/v/out/..., only one of rel_pos_h/rel_pos_w,
 *                    dropout_p outside [0,1), window
 *                    < -1, a non-finite scale, a negative or non-finite
 *                    softcap, outputs that overlap inputs or each other, a
 *                    caller workspace smaller than the *_workspace_size.
 *   KERN_ERR_SHAPE   ndim, B/H/L/D mismatches between q, k, v, out (and
 *                    dout, dq, dk, dv, lse), Hq not a multiple of Hkv, Hq !=
 *                    Hkv without enable_gqa, D = 0, a mask that does not
 *                    broadcast, k_lens / cu_seqlens of the wrong length,
 *                    a rel-pos grid whose product is not Lq / Lk, a rel_pos
 *                    table not [N, D] or of the wrong N.
 *   KERN_ERR_DTYPE   mixed or non-float q/k/v dtypes, a mask that is not
 *                    bool/f32/f16/bf16, lse not f32, k_lens / cu_seqlens not
 *                    i32/i64.
 *   KERN_ERR_LAYOUT  a non-unit last-dim stride; an output (out, lse, dq,
 *                    dk, dv) whose elements overlap (e.g. a zero stride).
 *   KERN_ERR_INDEX   k_lens[b] < 0 or > Lk; cu_seqlens not starting at 0,
 *                    decreasing, not ending at T, or with a sequence longer
 *                    than max_seqlen.
 *   KERN_ERR_UNSUPPORTED  attn_mask or k_lens with the varlen entry points;
 *                    rel_pos_h/w with varlen or the backward.
 *   KERN_ERR_NOMEM   scratch could not be allocated.
 *
 * ISA PATHS (one const table per level: kern__sdpa_fns_for(kern_ctx_isa(ctx)))
 *   AVX512_BF16: 8x32 f32 FMA microkernel; bf16 q/k/v through vdpbf16ps
 *   for q.k and p.v with P rounded to bf16 (as FlashAttention does on
 *   GPUs), and in the backward all five products (P and dS rounded). AVX512 / AVX512_VNNI: the same without vdpbf16ps (bf16
 *   converted to f32 while packing tiles). f16 converted likewise.
 *   AVX2 / AVX2_VNNI: 6x16 f32 microkernel. NEON: 4x16 f32 microkernel.
 *   Scalar: plain C.
 *   Softmax steps (exp2, panel step, rows step, rescale): written once in
 *   gen/templates/kern_sdpa.c.in, expanded below for scalar, AVX2, AVX-512
 *   and NEON (make gen / gen-check). Microkernels, rows-path dots and the
 *   bf16 kernels are hand-written per ISA (different tile shapes and
 *   reductions). exp: the math layer's kern__v_exp2_neg in the softmax
 *   (0.843 ulp, -inf -> 0, NaN kept), kern__v_exp2 over the whole range
 *   elsewhere; the scalar twins are bit-identical (docs/internals.md).
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
    /* Decomposed relative position bias (SAM, MViTv2; forward, dense
     * entry points): scores[i][j] += q_i . Rh[h(i), h(j)] + q_i . Rw[w(i),
     * w(j)] with the unscaled q, queries on a rel_q_h x rel_q_w grid and
     * keys on a rel_k_h x rel_k_w grid (row-major: i = h(i) * rel_q_w +
     * w(i)). NULL = none; both or neither. [Nh, D] / [Nw, D], any float
     * dtype and strides, shared by every batch entry and head. */
    const kern_tensor *rel_pos_h, *rel_pos_w;
    int64_t rel_q_h, rel_q_w, rel_k_h, rel_k_w;
    int rel_pos_interpolate;      /* 0: Nh must be 2*max(rel_q_h, rel_k_h)-1
                                     (Nw likewise); nonzero: any length >= 1,
                                     resized linearly as HF SAM's get_rel_pos */
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

/* ------------------------------------------------------------ ISA table
 * (kern__ prefix: for kern's kernels and tests, not a stable API): one
 * const table per level, kern__sdpa_fns_for(kern_ctx_isa(ctx),
 * kern_ctx_uarch(ctx)). Declared here so that test_sdpa links the
 * implementation compiled once. */

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
/* Pairs transposed for the panels: xt[dp][r] = the pair (rows[r][2dp],
 * rows[r][2dp+1]) for r < NQ, dp < np; a NULL row gives zeros. */
typedef void (*kern__sdpa_pairs_fn)(const uint16_t *const *rows, int64_t np, uint16_t *xt);

typedef struct kern__sdpa_fns {
    const char *name;
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
    /* decomposed relative position added to a panel (template) */
    void (*relpos)(float *s, int64_t nk, float c, const float *rh, const float *rw, int64_t jh0,
                   int64_t jw0, int64_t kw);
    /* backward elementwise steps over [nk][NQ] (template): P^T from the
     * scores and lse2; dS^T in place of dP^T */
    void (*bwd_p)(const float *s, const float *lse2, int64_t nk, float *pp);
    void (*bwd_ds)(float *dp, const float *pp, const float *t, const float *delta, int64_t nk,
                   float scale);
    /* tile kernels (AMX): mk16 needs the tile configuration, loaded per
     * task by tiles_on and released by tiles_off; the panel path's P.V
     * then reads V^T rows (vpackt, [Dv][BK], keys adjacent) instead of V
     * pairs. NULL elsewhere. */
    void (*tiles_on)(void);
    void (*tiles_off)(void);
    kern__sdpa_vpack_fn vpackt;
    /* K rows [nk][D] to a contiguous [nk][ld] copy, zero past D (tiles) */
    void (*kcopy)(const uint16_t *k, int64_t krs, int64_t nk, int64_t D, int64_t ld,
                  uint16_t *dst);
    kern__sdpa_pairs_fn pairs;
    /* a finished panel out: row r < nr of O^T[Dv][NQ] (already scaled) to
     * dst[r] as f32, bf16 or f16 (16 x 16 transposes); NULL: per row */
    void (*opanel)(const float *ot, int64_t Dv, int64_t nr, void *const *dst, kern_dtype dt);
    /* rows path P.V with 16-bit V read in place: C[M][N] += A[M][K]
     * B[K][N], A rows k-contiguous, B rows b_ks elements apart, bf16 or
     * f16 (dt); NULL: V is converted to f32 per block first */
    void (*mkv16)(int64_t M, int64_t N, int64_t K, const float *a, int64_t a_rs,
                  const uint16_t *b, int64_t b_ks, kern_dtype dt, float *c, int64_t c_rs);
} kern__sdpa_fns;
KERN_API const kern__sdpa_fns *kern__sdpa_fns_for(kern_isa isa, kern_uarch uarch);

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
 *   BK  the forward's key-block capacity (its S^T tile [BK][NQ] f32, the
 *       row stride of S in the row path and of V^T for the tiles); each
 *       problem runs blocks of p->bk <= BK keys: 64 (S^T 8 KiB, stays in
 *       L1), 128 on AMX tiles at D >= 128 or with the rel-pos bias, where
 *       a 64-key block leaves P V two 16-pair chunks per accumulator load
 *       and store (1.1-1.24x there, docs/sdpa.md);
 *   BWD_BK  keys per block in the backward;
 *   QB  panels per task sharing each K/V block while it is in L1/L2;
 *   ROWS_MAX  below this many query rows per kv head (decode), the row path
 *       computes q.k as dot products instead of wasting panel lanes. */
#define KERN__SDPA_NQ 32
#define KERN__SDPA_BK 128
#define KERN__SDPA_BK_VEC 64
#define KERN__SDPA_BWD_BK 64
/* query panels a forward task runs against each key block: 8 when one
 * head's K and V pass KERN__SDPA_QB_BYTES (the block then comes from the
 * L3 or DRAM once for 8 panels), else 4 (more tasks for small problems);
 * the tile table also takes 8 whenever that leaves 8 tasks (its per-block
 * packing is a larger share). A row's reductions run over the key blocks
 * in the same order either way, so this changes no result. */
#define KERN__SDPA_QB 4
#define KERN__SDPA_QB_MAX 8
#define KERN__SDPA_QB_BYTES ((int64_t)512 * 1024)
#define KERN__SDPA_ROWS_MAX 16
/* Decode-shaped problems are split along the keys until there are about
 * this many tasks (independent of the thread count, for determinism). */
#define KERN__SDPA_SPLIT_TASKS 32
#define KERN__SDPA_SPLIT_MIN_KEYS 512
/* Backward: key ranges per (batch, kv head) until about this many tasks. */
#define KERN__SDPA_BWD_TASKS 8

#define KERN__SDPA_LOG2E 1.4426950408889634f
#define KERN__SDPA_LN2 0.6931471805599453f


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

static void kern__sdpa_pairs__scalar(const uint16_t *const *rows, int64_t np, uint16_t *xt) {
    int64_t r, dp;
    for (r = 0; r < KERN__SDPA_NQ; r++)
        for (dp = 0; dp < np; dp++) {
            uint16_t *o = xt + (dp * KERN__SDPA_NQ + r) * 2;
            if (rows[r]) memcpy(o, rows[r] + 2 * dp, 4);
            else o[0] = o[1] = 0;
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

/* ------------------------------------------- softmax steps (generated) */
/* exp2, the panel and row online-softmax steps and the accumulator rescale
 * for every ISA, from gen/templates/kern_sdpa.c.in (scalar twin
 * kern__s_sdpa_*, then kern__v_sdpa_*__avx2/__avx512/__neon). */
/* BEGIN GENERATED kern_tmpl.py: kern_sdpa isa=scalar,avx2,avx512,neon — do not edit */
/* ---- scalar ---- */
/* x[i] = 2^x[i] for i < n (the whole f32 range: overflow gives +Inf,
 * -Inf gives 0, NaN stays NaN). */
static void kern__s_sdpa_exp2(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 1 <= n; i += 1) (*(float *)(x + i) = (kern__s_exp2((*(const float *)(x + i)))));
    if (i < n) (*(float *)(x + i) = (kern__s_exp2((*(const float *)(x + i)))));
}

/* One online-softmax step over the panel S^T[nk][NQ] (see
 * kern__sdpa_step_fn), one vector of lanes at a time, two keys per
 * iteration (independent max and sum chains). With c > 0 the max is taken
 * over the raw scores (c * max s = max c * s, rounding being monotonic)
 * and P = 2^(c s - m) in one fma, so the scores are read twice and written
 * once; otherwise (c <= 0 or NaN) c * s is stored first. */
static int kern__s_sdpa_step(float *s, int64_t nk, float c, float *m, float *l,
                                           float *alpha) {
    const float cv = (c), ninf = (-INFINITY);
    const int raw = c > 0.0f;
    const float cp = raw ? cv : (1.0f);
    int64_t j;
    int v, changed = 0;
    for (v = 0; v < KERN__SDPA_NQ / 1; v++) {
        float mx = ninf, mx1 = ninf, mo = (*(const float *)(m + 1 * v)), mn, al = (1.0f), nms;
        float sum = 0.0f, sum1 = 0.0f;
        int gt;
        float *sv = s + 1 * v;
        if (raw) {
            for (j = 0; j + 2 <= nk; j += 2) { /* a NaN score is left out of the max; it reaches P below */
                mx = kern__s_max((*(const float *)(sv + j * KERN__SDPA_NQ)), mx);
                mx1 = kern__s_max((*(const float *)(sv + (j + 1) * KERN__SDPA_NQ)), mx1);
            }
            if (j < nk) mx = kern__s_max((*(const float *)(sv + j * KERN__SDPA_NQ)), mx);
            mx = kern__s_mul(kern__s_max(mx, mx1), cv);
        } else {
            for (j = 0; j < nk; j++) {
                float x = kern__s_mul((*(const float *)(sv + j * KERN__SDPA_NQ)), cv);
                (*(float *)(sv + j * KERN__SDPA_NQ) = (x));
                mx = kern__s_max(x, mx);
            }
        }
        mn = kern__s_max(mx, mo);
        gt = ((mn) > (mo));
        if ((gt)) {
            al = ((gt) ? (kern__s_exp2_neg(((mo) - (mn)))) : (al));
            changed = 1;
        }
        (*(float *)(m + 1 * v) = (mn));
        (*(float *)(alpha + 1 * v) = (al));
        nms = (-(((((mn) == (ninf))) ? (0.0f) : (mn))));
        for (j = 0; j + 2 <= nk; j += 2) {
            float p0 = kern__s_exp2_neg(kern__s_fma((*(const float *)(sv + j * KERN__SDPA_NQ)), cp, nms));
            float p1 = kern__s_exp2_neg(kern__s_fma((*(const float *)(sv + (j + 1) * KERN__SDPA_NQ)), cp, nms));
            (*(float *)(sv + j * KERN__SDPA_NQ) = (p0));
            (*(float *)(sv + (j + 1) * KERN__SDPA_NQ) = (p1));
            sum = ((sum) + (p0));
            sum1 = ((sum1) + (p1));
        }
        if (j < nk) {
            float p0 = kern__s_exp2_neg(kern__s_fma((*(const float *)(sv + j * KERN__SDPA_NQ)), cp, nms));
            (*(float *)(sv + j * KERN__SDPA_NQ) = (p0));
            sum = ((sum) + (p0));
        }
        (*(float *)(l + 1 * v) = (kern__s_fma((*(const float *)(l + 1 * v)), al, ((sum) + (sum1)))));
    }
    return changed;
}

/* O^T[c][lane] *= alpha[lane] for c < rows, NQ lanes. */
static void kern__s_sdpa_scale(float *ot, int64_t rows, const float *alpha) {
    int64_t c;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 1; v++) {
        float al = (*(const float *)(alpha + 1 * v));
        for (c = 0; c < rows; c++) {
            float *p = ot + c * KERN__SDPA_NQ + 1 * v;
            (*(float *)(p) = (kern__s_mul((*(const float *)(p)), al)));
        }
    }
}

/* The online-softmax step in row layout (keys along a row; see
 * kern__sdpa_rstep_fn): full vectors, then the key tail lane by lane. */
static int kern__s_sdpa_rstep(float *s, int64_t ls, int64_t R, int64_t nk, float c,
                                            float *m, float *l, float *alpha) {
    const float cv = (c);
    int64_t r, j;
    int e, changed = 0;
    for (r = 0; r < R; r++) {
        float *row = s + r * ls, mx, ms, sum = 0.0f, t[1];
        float vm = (-INFINITY), vs = 0.0f, msv;
        for (j = 0; j + 1 <= nk; j += 1) {
            float x = kern__s_mul((*(const float *)(row + j)), cv);
            (*(float *)(row + j) = (x));
            vm = kern__s_max(x, vm); /* NaN left out of the max, as in the panel step */
        }
        mx = (vm);
        for (; j < nk; j++) {
            float x = row[j] * c;
            row[j] = x;
            mx = x > mx ? x : mx;
        }
        alpha[r] = 1.0f;
        if (mx > m[r]) {
            alpha[r] = kern__s_exp2_neg(m[r] - mx);
            m[r] = mx;
            changed = 1;
        }
        ms = m[r] == -INFINITY ? 0.0f : m[r];
        msv = (ms);
        for (j = 0; j + 1 <= nk; j += 1) {
            float p = kern__s_exp2_neg((((*(const float *)(row + j))) - (msv)));
            (*(float *)(row + j) = (p));
            vs = ((vs) + (p));
        }
        (*(float *)(t) = (vs));
        for (e = 0; e < 1; e++) sum += t[e];
        for (; j < nk; j++) {
            row[j] = kern__s_exp2_neg(row[j] - ms);
            sum += row[j];
        }
        l[r] = l[r] * alpha[r] + sum;
    }
    return changed;
}

/* Decomposed relative position (SAM): S^T[j][lane] = S^T[j][lane] * c +
 * rh[jh][lane] + rw[jw][lane] for the keys j < nk of a block, key j at
 * grid cell (jh, jw) starting at (jh0, jw0) on a key grid kw wide. */
static void kern__s_sdpa_relpos(float *s, int64_t nk, float c, const float *rh,
                                              const float *rw, int64_t jh0, int64_t jw0,
                                              int64_t kw) {
    const float cv = (c);
    int64_t j, jh = jh0, jw = jw0;
    int v;
    for (j = 0; j < nk; j++) {
        const float *a = rh + jh * KERN__SDPA_NQ, *b = rw + jw * KERN__SDPA_NQ;
        float *sp = s + j * KERN__SDPA_NQ;
        for (v = 0; v < KERN__SDPA_NQ / 1; v++)
            (*(float *)(sp + 1 * v) = (kern__s_fma((*(const float *)(sp + 1 * v)), cv, (((*(const float *)(a + 1 * v))) + ((*(const float *)(b + 1 * v)))))));
        if (++jw == kw) {
            jw = 0;
            jh++;
        }
    }
}

/* The backward's P^T = 2^(s - lse2) over S^T[nk][NQ], lane r against
 * lse2[r] (the same bits as the difference followed by the array exp2). */
static void kern__s_sdpa_bwd_p(const float *s, const float *lse2, int64_t nk,
                                             float *pp) {
    int64_t j;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 1; v++) {
        float l2 = (*(const float *)(lse2 + 1 * v));
        for (j = 0; j < nk; j++) {
            int64_t o = j * KERN__SDPA_NQ + 1 * v;
            (*(float *)(pp + o) = (kern__s_exp2((((*(const float *)(s + o))) - (l2)))));
        }
    }
}

/* The backward's dS^T = P^T (dP^T - delta) (1 - t^2) scale in place of
 * dp over [nk][NQ] (t = NULL: no softcap factor), 0 where P = 0. */
static void kern__s_sdpa_bwd_ds(float *dp, const float *pp, const float *t,
                                              const float *delta, int64_t nk, float scale) {
    const float sc = (scale), one = (1.0f), zero = 0.0f;
    int64_t j;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 1; v++) {
        float dl = (*(const float *)(delta + 1 * v));
        for (j = 0; j < nk; j++) {
            int64_t o = j * KERN__SDPA_NQ + 1 * v;
            float p = (*(const float *)(pp + o)), ds = kern__s_mul(p, (((*(const float *)(dp + o))) - (dl)));
            if (t) {
                float tt = (*(const float *)(t + o));
                ds = kern__s_mul(ds, ((one) - (kern__s_mul(tt, tt))));
            }
            (*(float *)(dp + o) = (((((p) == (zero))) ? (zero) : (kern__s_mul(ds, sc)))));
        }
    }
}
#ifdef KERN_X86
/* ---- avx2 ---- */
/* x[i] = 2^x[i] for i < n (the whole f32 range: overflow gives +Inf,
 * -Inf gives 0, NaN stays NaN). */
KERN_TARGET_AVX2 static void kern__v_sdpa_exp2__avx2(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, kern__v_exp2__avx2(_mm256_loadu_ps(x + i)));
    if (i < n) kern__storen__avx2(x + i, kern__v_exp2__avx2(kern__loadn__avx2(x + i, (int)(n - i))), (int)(n - i));
}

/* One online-softmax step over the panel S^T[nk][NQ] (see
 * kern__sdpa_step_fn), one vector of lanes at a time, two keys per
 * iteration (independent max and sum chains). With c > 0 the max is taken
 * over the raw scores (c * max s = max c * s, rounding being monotonic)
 * and P = 2^(c s - m) in one fma, so the scores are read twice and written
 * once; otherwise (c <= 0 or NaN) c * s is stored first. */
KERN_TARGET_AVX2 static int kern__v_sdpa_step__avx2(float *s, int64_t nk, float c, float *m, float *l,
                                           float *alpha) {
    const __m256 cv = _mm256_set1_ps(c), ninf = _mm256_set1_ps(-INFINITY);
    const int raw = c > 0.0f;
    const __m256 cp = raw ? cv : _mm256_set1_ps(1.0f);
    int64_t j;
    int v, changed = 0;
    for (v = 0; v < KERN__SDPA_NQ / 8; v++) {
        __m256 mx = ninf, mx1 = ninf, mo = _mm256_loadu_ps(m + 8 * v), mn, al = _mm256_set1_ps(1.0f), nms;
        __m256 sum = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
        __m256 gt;
        float *sv = s + 8 * v;
        if (raw) {
            for (j = 0; j + 2 <= nk; j += 2) { /* a NaN score is left out of the max; it reaches P below */
                mx = _mm256_max_ps(_mm256_loadu_ps(sv + j * KERN__SDPA_NQ), mx);
                mx1 = _mm256_max_ps(_mm256_loadu_ps(sv + (j + 1) * KERN__SDPA_NQ), mx1);
            }
            if (j < nk) mx = _mm256_max_ps(_mm256_loadu_ps(sv + j * KERN__SDPA_NQ), mx);
            mx = kern__mul__avx2(_mm256_max_ps(mx, mx1), cv);
        } else {
            for (j = 0; j < nk; j++) {
                __m256 x = kern__mul__avx2(_mm256_loadu_ps(sv + j * KERN__SDPA_NQ), cv);
                _mm256_storeu_ps(sv + j * KERN__SDPA_NQ, x);
                mx = _mm256_max_ps(x, mx);
            }
        }
        mn = _mm256_max_ps(mx, mo);
        gt = _mm256_cmp_ps(mn, mo, _CMP_GT_OQ);
        if ((_mm256_movemask_ps(gt) != 0)) {
            al = _mm256_blendv_ps(al, kern__v_exp2_neg__avx2(_mm256_sub_ps(mo, mn)), gt);
            changed = 1;
        }
        _mm256_storeu_ps(m + 8 * v, mn);
        _mm256_storeu_ps(alpha + 8 * v, al);
        nms = _mm256_xor_ps(_mm256_set1_ps(-0.0f), _mm256_blendv_ps(mn, _mm256_setzero_ps(), _mm256_cmp_ps(mn, ninf, _CMP_EQ_OQ)));
        for (j = 0; j + 2 <= nk; j += 2) {
            __m256 p0 = kern__v_exp2_neg__avx2(_mm256_fmadd_ps(_mm256_loadu_ps(sv + j * KERN__SDPA_NQ), cp, nms));
            __m256 p1 = kern__v_exp2_neg__avx2(_mm256_fmadd_ps(_mm256_loadu_ps(sv + (j + 1) * KERN__SDPA_NQ), cp, nms));
            _mm256_storeu_ps(sv + j * KERN__SDPA_NQ, p0);
            _mm256_storeu_ps(sv + (j + 1) * KERN__SDPA_NQ, p1);
            sum = _mm256_add_ps(sum, p0);
            sum1 = _mm256_add_ps(sum1, p1);
        }
        if (j < nk) {
            __m256 p0 = kern__v_exp2_neg__avx2(_mm256_fmadd_ps(_mm256_loadu_ps(sv + j * KERN__SDPA_NQ), cp, nms));
            _mm256_storeu_ps(sv + j * KERN__SDPA_NQ, p0);
            sum = _mm256_add_ps(sum, p0);
        }
        _mm256_storeu_ps(l + 8 * v, _mm256_fmadd_ps(_mm256_loadu_ps(l + 8 * v), al, _mm256_add_ps(sum, sum1)));
    }
    return changed;
}

/* O^T[c][lane] *= alpha[lane] for c < rows, NQ lanes. */
KERN_TARGET_AVX2 static void kern__v_sdpa_scale__avx2(float *ot, int64_t rows, const float *alpha) {
    int64_t c;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 8; v++) {
        __m256 al = _mm256_loadu_ps(alpha + 8 * v);
        for (c = 0; c < rows; c++) {
            float *p = ot + c * KERN__SDPA_NQ + 8 * v;
            _mm256_storeu_ps(p, kern__mul__avx2(_mm256_loadu_ps(p), al));
        }
    }
}

/* The online-softmax step in row layout (keys along a row; see
 * kern__sdpa_rstep_fn): full vectors, then the key tail lane by lane. */
KERN_TARGET_AVX2 static int kern__v_sdpa_rstep__avx2(float *s, int64_t ls, int64_t R, int64_t nk, float c,
                                            float *m, float *l, float *alpha) {
    const __m256 cv = _mm256_set1_ps(c);
    int64_t r, j;
    int e, changed = 0;
    for (r = 0; r < R; r++) {
        float *row = s + r * ls, mx, ms, sum = 0.0f, t[8];
        __m256 vm = _mm256_set1_ps(-INFINITY), vs = _mm256_setzero_ps(), msv;
        for (j = 0; j + 8 <= nk; j += 8) {
            __m256 x = kern__mul__avx2(_mm256_loadu_ps(row + j), cv);
            _mm256_storeu_ps(row + j, x);
            vm = _mm256_max_ps(x, vm); /* NaN left out of the max, as in the panel step */
        }
        mx = kern__hmax__avx2(vm);
        for (; j < nk; j++) {
            float x = row[j] * c;
            row[j] = x;
            mx = x > mx ? x : mx;
        }
        alpha[r] = 1.0f;
        if (mx > m[r]) {
            alpha[r] = kern__s_exp2_neg(m[r] - mx);
            m[r] = mx;
            changed = 1;
        }
        ms = m[r] == -INFINITY ? 0.0f : m[r];
        msv = _mm256_set1_ps(ms);
        for (j = 0; j + 8 <= nk; j += 8) {
            __m256 p = kern__v_exp2_neg__avx2(_mm256_sub_ps(_mm256_loadu_ps(row + j), msv));
            _mm256_storeu_ps(row + j, p);
            vs = _mm256_add_ps(vs, p);
        }
        _mm256_storeu_ps(t, vs);
        for (e = 0; e < 8; e++) sum += t[e];
        for (; j < nk; j++) {
            row[j] = kern__s_exp2_neg(row[j] - ms);
            sum += row[j];
        }
        l[r] = l[r] * alpha[r] + sum;
    }
    return changed;
}

/* Decomposed relative position (SAM): S^T[j][lane] = S^T[j][lane] * c +
 * rh[jh][lane] + rw[jw][lane] for the keys j < nk of a block, key j at
 * grid cell (jh, jw) starting at (jh0, jw0) on a key grid kw wide. */
KERN_TARGET_AVX2 static void kern__v_sdpa_relpos__avx2(float *s, int64_t nk, float c, const float *rh,
                                              const float *rw, int64_t jh0, int64_t jw0,
                                              int64_t kw) {
    const __m256 cv = _mm256_set1_ps(c);
    int64_t j, jh = jh0, jw = jw0;
    int v;
    for (j = 0; j < nk; j++) {
        const float *a = rh + jh * KERN__SDPA_NQ, *b = rw + jw * KERN__SDPA_NQ;
        float *sp = s + j * KERN__SDPA_NQ;
        for (v = 0; v < KERN__SDPA_NQ / 8; v++)
            _mm256_storeu_ps(sp + 8 * v, _mm256_fmadd_ps(_mm256_loadu_ps(sp + 8 * v), cv, _mm256_add_ps(_mm256_loadu_ps(a + 8 * v), _mm256_loadu_ps(b + 8 * v))));
        if (++jw == kw) {
            jw = 0;
            jh++;
        }
    }
}

/* The backward's P^T = 2^(s - lse2) over S^T[nk][NQ], lane r against
 * lse2[r] (the same bits as the difference followed by the array exp2). */
KERN_TARGET_AVX2 static void kern__v_sdpa_bwd_p__avx2(const float *s, const float *lse2, int64_t nk,
                                             float *pp) {
    int64_t j;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 8; v++) {
        __m256 l2 = _mm256_loadu_ps(lse2 + 8 * v);
        for (j = 0; j < nk; j++) {
            int64_t o = j * KERN__SDPA_NQ + 8 * v;
            _mm256_storeu_ps(pp + o, kern__v_exp2__avx2(_mm256_sub_ps(_mm256_loadu_ps(s + o), l2)));
        }
    }
}

/* The backward's dS^T = P^T (dP^T - delta) (1 - t^2) scale in place of
 * dp over [nk][NQ] (t = NULL: no softcap factor), 0 where P = 0. */
KERN_TARGET_AVX2 static void kern__v_sdpa_bwd_ds__avx2(float *dp, const float *pp, const float *t,
                                              const float *delta, int64_t nk, float scale) {
    const __m256 sc = _mm256_set1_ps(scale), one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    int64_t j;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 8; v++) {
        __m256 dl = _mm256_loadu_ps(delta + 8 * v);
        for (j = 0; j < nk; j++) {
            int64_t o = j * KERN__SDPA_NQ + 8 * v;
            __m256 p = _mm256_loadu_ps(pp + o), ds = kern__mul__avx2(p, _mm256_sub_ps(_mm256_loadu_ps(dp + o), dl));
            if (t) {
                __m256 tt = _mm256_loadu_ps(t + o);
                ds = kern__mul__avx2(ds, _mm256_sub_ps(one, kern__mul__avx2(tt, tt)));
            }
            _mm256_storeu_ps(dp + o, _mm256_blendv_ps(kern__mul__avx2(ds, sc), zero, _mm256_cmp_ps(p, zero, _CMP_EQ_OQ)));
        }
    }
}
/* ---- avx512 ---- */
/* x[i] = 2^x[i] for i < n (the whole f32 range: overflow gives +Inf,
 * -Inf gives 0, NaN stays NaN). */
KERN_TARGET_AVX512 static void kern__v_sdpa_exp2__avx512(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, kern__v_exp2__avx512(_mm512_loadu_ps(x + i)));
    if (i < n) kern__storen__avx512(x + i, kern__v_exp2__avx512(kern__loadn__avx512(x + i, (int)(n - i))), (int)(n - i));
}

/* One online-softmax step over the panel S^T[nk][NQ] (see
 * kern__sdpa_step_fn), one vector of lanes at a time, two keys per
 * iteration (independent max and sum chains). With c > 0 the max is taken
 * over the raw scores (c * max s = max c * s, rounding being monotonic)
 * and P = 2^(c s - m) in one fma, so the scores are read twice and written
 * once; otherwise (c <= 0 or NaN) c * s is stored first. */
KERN_TARGET_AVX512 static int kern__v_sdpa_step__avx512(float *s, int64_t nk, float c, float *m, float *l,
                                           float *alpha) {
    const __m512 cv = _mm512_set1_ps(c), ninf = _mm512_set1_ps(-INFINITY);
    const int raw = c > 0.0f;
    const __m512 cp = raw ? cv : _mm512_set1_ps(1.0f);
    int64_t j;
    int v, changed = 0;
    for (v = 0; v < KERN__SDPA_NQ / 16; v++) {
        __m512 mx = ninf, mx1 = ninf, mo = _mm512_loadu_ps(m + 16 * v), mn, al = _mm512_set1_ps(1.0f), nms;
        __m512 sum = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
        __mmask16 gt;
        float *sv = s + 16 * v;
        if (raw) {
            for (j = 0; j + 2 <= nk; j += 2) { /* a NaN score is left out of the max; it reaches P below */
                mx = _mm512_max_ps(_mm512_loadu_ps(sv + j * KERN__SDPA_NQ), mx);
                mx1 = _mm512_max_ps(_mm512_loadu_ps(sv + (j + 1) * KERN__SDPA_NQ), mx1);
            }
            if (j < nk) mx = _mm512_max_ps(_mm512_loadu_ps(sv + j * KERN__SDPA_NQ), mx);
            mx = kern__mul__avx512(_mm512_max_ps(mx, mx1), cv);
        } else {
            for (j = 0; j < nk; j++) {
                __m512 x = kern__mul__avx512(_mm512_loadu_ps(sv + j * KERN__SDPA_NQ), cv);
                _mm512_storeu_ps(sv + j * KERN__SDPA_NQ, x);
                mx = _mm512_max_ps(x, mx);
            }
        }
        mn = _mm512_max_ps(mx, mo);
        gt = _mm512_cmp_ps_mask(mn, mo, _CMP_GT_OQ);
        if (((gt) != 0)) {
            al = _mm512_mask_blend_ps(gt, al, kern__v_exp2_neg__avx512(_mm512_sub_ps(mo, mn)));
            changed = 1;
        }
        _mm512_storeu_ps(m + 16 * v, mn);
        _mm512_storeu_ps(alpha + 16 * v, al);
        nms = _mm512_xor_ps(_mm512_set1_ps(-0.0f), _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mn, ninf, _CMP_EQ_OQ), mn, _mm512_setzero_ps()));
        for (j = 0; j + 2 <= nk; j += 2) {
            __m512 p0 = kern__v_exp2_neg__avx512(_mm512_fmadd_ps(_mm512_loadu_ps(sv + j * KERN__SDPA_NQ), cp, nms));
            __m512 p1 = kern__v_exp2_neg__avx512(_mm512_fmadd_ps(_mm512_loadu_ps(sv + (j + 1) * KERN__SDPA_NQ), cp, nms));
            _mm512_storeu_ps(sv + j * KERN__SDPA_NQ, p0);
            _mm512_storeu_ps(sv + (j + 1) * KERN__SDPA_NQ, p1);
            sum = _mm512_add_ps(sum, p0);
            sum1 = _mm512_add_ps(sum1, p1);
        }
        if (j < nk) {
            __m512 p0 = kern__v_exp2_neg__avx512(_mm512_fmadd_ps(_mm512_loadu_ps(sv + j * KERN__SDPA_NQ), cp, nms));
            _mm512_storeu_ps(sv + j * KERN__SDPA_NQ, p0);
            sum = _mm512_add_ps(sum, p0);
        }
        _mm512_storeu_ps(l + 16 * v, _mm512_fmadd_ps(_mm512_loadu_ps(l + 16 * v), al, _mm512_add_ps(sum, sum1)));
    }
    return changed;
}

/* O^T[c][lane] *= alpha[lane] for c < rows, NQ lanes. */
KERN_TARGET_AVX512 static void kern__v_sdpa_scale__avx512(float *ot, int64_t rows, const float *alpha) {
    int64_t c;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 16; v++) {
        __m512 al = _mm512_loadu_ps(alpha + 16 * v);
        for (c = 0; c < rows; c++) {
            float *p = ot + c * KERN__SDPA_NQ + 16 * v;
            _mm512_storeu_ps(p, kern__mul__avx512(_mm512_loadu_ps(p), al));
        }
    }
}

/* The online-softmax step in row layout (keys along a row; see
 * kern__sdpa_rstep_fn): full vectors, then the key tail lane by lane. */
KERN_TARGET_AVX512 static int kern__v_sdpa_rstep__avx512(float *s, int64_t ls, int64_t R, int64_t nk, float c,
                                            float *m, float *l, float *alpha) {
    const __m512 cv = _mm512_set1_ps(c);
    int64_t r, j;
    int e, changed = 0;
    for (r = 0; r < R; r++) {
        float *row = s + r * ls, mx, ms, sum = 0.0f, t[16];
        __m512 vm = _mm512_set1_ps(-INFINITY), vs = _mm512_setzero_ps(), msv;
        for (j = 0; j + 16 <= nk; j += 16) {
            __m512 x = kern__mul__avx512(_mm512_loadu_ps(row + j), cv);
            _mm512_storeu_ps(row + j, x);
            vm = _mm512_max_ps(x, vm); /* NaN left out of the max, as in the panel step */
        }
        mx = _mm512_reduce_max_ps(vm);
        for (; j < nk; j++) {
            float x = row[j] * c;
            row[j] = x;
            mx = x > mx ? x : mx;
        }
        alpha[r] = 1.0f;
        if (mx > m[r]) {
            alpha[r] = kern__s_exp2_neg(m[r] - mx);
            m[r] = mx;
            changed = 1;
        }
        ms = m[r] == -INFINITY ? 0.0f : m[r];
        msv = _mm512_set1_ps(ms);
        for (j = 0; j + 16 <= nk; j += 16) {
            __m512 p = kern__v_exp2_neg__avx512(_mm512_sub_ps(_mm512_loadu_ps(row + j), msv));
            _mm512_storeu_ps(row + j, p);
            vs = _mm512_add_ps(vs, p);
        }
        _mm512_storeu_ps(t, vs);
        for (e = 0; e < 16; e++) sum += t[e];
        for (; j < nk; j++) {
            row[j] = kern__s_exp2_neg(row[j] - ms);
            sum += row[j];
        }
        l[r] = l[r] * alpha[r] + sum;
    }
    return changed;
}

/* Decomposed relative position (SAM): S^T[j][lane] = S^T[j][lane] * c +
 * rh[jh][lane] + rw[jw][lane] for the keys j < nk of a block, key j at
 * grid cell (jh, jw) starting at (jh0, jw0) on a key grid kw wide. */
KERN_TARGET_AVX512 static void kern__v_sdpa_relpos__avx512(float *s, int64_t nk, float c, const float *rh,
                                              const float *rw, int64_t jh0, int64_t jw0,
                                              int64_t kw) {
    const __m512 cv = _mm512_set1_ps(c);
    int64_t j, jh = jh0, jw = jw0;
    int v;
    for (j = 0; j < nk; j++) {
        const float *a = rh + jh * KERN__SDPA_NQ, *b = rw + jw * KERN__SDPA_NQ;
        float *sp = s + j * KERN__SDPA_NQ;
        for (v = 0; v < KERN__SDPA_NQ / 16; v++)
            _mm512_storeu_ps(sp + 16 * v, _mm512_fmadd_ps(_mm512_loadu_ps(sp + 16 * v), cv, _mm512_add_ps(_mm512_loadu_ps(a + 16 * v), _mm512_loadu_ps(b + 16 * v))));
        if (++jw == kw) {
            jw = 0;
            jh++;
        }
    }
}

/* The backward's P^T = 2^(s - lse2) over S^T[nk][NQ], lane r against
 * lse2[r] (the same bits as the difference followed by the array exp2). */
KERN_TARGET_AVX512 static void kern__v_sdpa_bwd_p__avx512(const float *s, const float *lse2, int64_t nk,
                                             float *pp) {
    int64_t j;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 16; v++) {
        __m512 l2 = _mm512_loadu_ps(lse2 + 16 * v);
        for (j = 0; j < nk; j++) {
            int64_t o = j * KERN__SDPA_NQ + 16 * v;
            _mm512_storeu_ps(pp + o, kern__v_exp2__avx512(_mm512_sub_ps(_mm512_loadu_ps(s + o), l2)));
        }
    }
}

/* The backward's dS^T = P^T (dP^T - delta) (1 - t^2) scale in place of
 * dp over [nk][NQ] (t = NULL: no softcap factor), 0 where P = 0. */
KERN_TARGET_AVX512 static void kern__v_sdpa_bwd_ds__avx512(float *dp, const float *pp, const float *t,
                                              const float *delta, int64_t nk, float scale) {
    const __m512 sc = _mm512_set1_ps(scale), one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    int64_t j;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 16; v++) {
        __m512 dl = _mm512_loadu_ps(delta + 16 * v);
        for (j = 0; j < nk; j++) {
            int64_t o = j * KERN__SDPA_NQ + 16 * v;
            __m512 p = _mm512_loadu_ps(pp + o), ds = kern__mul__avx512(p, _mm512_sub_ps(_mm512_loadu_ps(dp + o), dl));
            if (t) {
                __m512 tt = _mm512_loadu_ps(t + o);
                ds = kern__mul__avx512(ds, _mm512_sub_ps(one, kern__mul__avx512(tt, tt)));
            }
            _mm512_storeu_ps(dp + o, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(p, zero, _CMP_EQ_OQ), kern__mul__avx512(ds, sc), zero));
        }
    }
}
#endif /* KERN_X86 */
#ifdef KERN_NEON
/* ---- neon ---- */
/* x[i] = 2^x[i] for i < n (the whole f32 range: overflow gives +Inf,
 * -Inf gives 0, NaN stays NaN). */
static void kern__v_sdpa_exp2__neon(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, kern__v_exp2__neon(vld1q_f32(x + i)));
    if (i < n) kern__storen__neon(x + i, kern__v_exp2__neon(kern__loadn__neon(x + i, (int)(n - i))), (int)(n - i));
}

/* One online-softmax step over the panel S^T[nk][NQ] (see
 * kern__sdpa_step_fn), one vector of lanes at a time, two keys per
 * iteration (independent max and sum chains). With c > 0 the max is taken
 * over the raw scores (c * max s = max c * s, rounding being monotonic)
 * and P = 2^(c s - m) in one fma, so the scores are read twice and written
 * once; otherwise (c <= 0 or NaN) c * s is stored first. */
static int kern__v_sdpa_step__neon(float *s, int64_t nk, float c, float *m, float *l,
                                           float *alpha) {
    const float32x4_t cv = vdupq_n_f32(c), ninf = vdupq_n_f32(-INFINITY);
    const int raw = c > 0.0f;
    const float32x4_t cp = raw ? cv : vdupq_n_f32(1.0f);
    int64_t j;
    int v, changed = 0;
    for (v = 0; v < KERN__SDPA_NQ / 4; v++) {
        float32x4_t mx = ninf, mx1 = ninf, mo = vld1q_f32(m + 4 * v), mn, al = vdupq_n_f32(1.0f), nms;
        float32x4_t sum = vdupq_n_f32(0.0f), sum1 = vdupq_n_f32(0.0f);
        uint32x4_t gt;
        float *sv = s + 4 * v;
        if (raw) {
            for (j = 0; j + 2 <= nk; j += 2) { /* a NaN score is left out of the max; it reaches P below */
                mx = kern__max__neon(vld1q_f32(sv + j * KERN__SDPA_NQ), mx);
                mx1 = kern__max__neon(vld1q_f32(sv + (j + 1) * KERN__SDPA_NQ), mx1);
            }
            if (j < nk) mx = kern__max__neon(vld1q_f32(sv + j * KERN__SDPA_NQ), mx);
            mx = kern__mul__neon(kern__max__neon(mx, mx1), cv);
        } else {
            for (j = 0; j < nk; j++) {
                float32x4_t x = kern__mul__neon(vld1q_f32(sv + j * KERN__SDPA_NQ), cv);
                vst1q_f32(sv + j * KERN__SDPA_NQ, x);
                mx = kern__max__neon(x, mx);
            }
        }
        mn = kern__max__neon(mx, mo);
        gt = vcgtq_f32(mn, mo);
        if ((vmaxvq_u32(gt) != 0)) {
            al = vbslq_f32(gt, kern__v_exp2_neg__neon(vsubq_f32(mo, mn)), al);
            changed = 1;
        }
        vst1q_f32(m + 4 * v, mn);
        vst1q_f32(alpha + 4 * v, al);
        nms = vnegq_f32(vbslq_f32(vceqq_f32(mn, ninf), vdupq_n_f32(0.0f), mn));
        for (j = 0; j + 2 <= nk; j += 2) {
            float32x4_t p0 = kern__v_exp2_neg__neon(vfmaq_f32(nms, vld1q_f32(sv + j * KERN__SDPA_NQ), cp));
            float32x4_t p1 = kern__v_exp2_neg__neon(vfmaq_f32(nms, vld1q_f32(sv + (j + 1) * KERN__SDPA_NQ), cp));
            vst1q_f32(sv + j * KERN__SDPA_NQ, p0);
            vst1q_f32(sv + (j + 1) * KERN__SDPA_NQ, p1);
            sum = vaddq_f32(sum, p0);
            sum1 = vaddq_f32(sum1, p1);
        }
        if (j < nk) {
            float32x4_t p0 = kern__v_exp2_neg__neon(vfmaq_f32(nms, vld1q_f32(sv + j * KERN__SDPA_NQ), cp));
            vst1q_f32(sv + j * KERN__SDPA_NQ, p0);
            sum = vaddq_f32(sum, p0);
        }
        vst1q_f32(l + 4 * v, vfmaq_f32(vaddq_f32(sum, sum1), vld1q_f32(l + 4 * v), al));
    }
    return changed;
}

/* O^T[c][lane] *= alpha[lane] for c < rows, NQ lanes. */
static void kern__v_sdpa_scale__neon(float *ot, int64_t rows, const float *alpha) {
    int64_t c;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 4; v++) {
        float32x4_t al = vld1q_f32(alpha + 4 * v);
        for (c = 0; c < rows; c++) {
            float *p = ot + c * KERN__SDPA_NQ + 4 * v;
            vst1q_f32(p, kern__mul__neon(vld1q_f32(p), al));
        }
    }
}

/* The online-softmax step in row layout (keys along a row; see
 * kern__sdpa_rstep_fn): full vectors, then the key tail lane by lane. */
static int kern__v_sdpa_rstep__neon(float *s, int64_t ls, int64_t R, int64_t nk, float c,
                                            float *m, float *l, float *alpha) {
    const float32x4_t cv = vdupq_n_f32(c);
    int64_t r, j;
    int e, changed = 0;
    for (r = 0; r < R; r++) {
        float *row = s + r * ls, mx, ms, sum = 0.0f, t[4];
        float32x4_t vm = vdupq_n_f32(-INFINITY), vs = vdupq_n_f32(0.0f), msv;
        for (j = 0; j + 4 <= nk; j += 4) {
            float32x4_t x = kern__mul__neon(vld1q_f32(row + j), cv);
            vst1q_f32(row + j, x);
            vm = kern__max__neon(x, vm); /* NaN left out of the max, as in the panel step */
        }
        mx = vmaxvq_f32(vm);
        for (; j < nk; j++) {
            float x = row[j] * c;
            row[j] = x;
            mx = x > mx ? x : mx;
        }
        alpha[r] = 1.0f;
        if (mx > m[r]) {
            alpha[r] = kern__s_exp2_neg(m[r] - mx);
            m[r] = mx;
            changed = 1;
        }
        ms = m[r] == -INFINITY ? 0.0f : m[r];
        msv = vdupq_n_f32(ms);
        for (j = 0; j + 4 <= nk; j += 4) {
            float32x4_t p = kern__v_exp2_neg__neon(vsubq_f32(vld1q_f32(row + j), msv));
            vst1q_f32(row + j, p);
            vs = vaddq_f32(vs, p);
        }
        vst1q_f32(t, vs);
        for (e = 0; e < 4; e++) sum += t[e];
        for (; j < nk; j++) {
            row[j] = kern__s_exp2_neg(row[j] - ms);
            sum += row[j];
        }
        l[r] = l[r] * alpha[r] + sum;
    }
    return changed;
}

/* Decomposed relative position (SAM): S^T[j][lane] = S^T[j][lane] * c +
 * rh[jh][lane] + rw[jw][lane] for the keys j < nk of a block, key j at
 * grid cell (jh, jw) starting at (jh0, jw0) on a key grid kw wide. */
static void kern__v_sdpa_relpos__neon(float *s, int64_t nk, float c, const float *rh,
                                              const float *rw, int64_t jh0, int64_t jw0,
                                              int64_t kw) {
    const float32x4_t cv = vdupq_n_f32(c);
    int64_t j, jh = jh0, jw = jw0;
    int v;
    for (j = 0; j < nk; j++) {
        const float *a = rh + jh * KERN__SDPA_NQ, *b = rw + jw * KERN__SDPA_NQ;
        float *sp = s + j * KERN__SDPA_NQ;
        for (v = 0; v < KERN__SDPA_NQ / 4; v++)
            vst1q_f32(sp + 4 * v, vfmaq_f32(vaddq_f32(vld1q_f32(a + 4 * v), vld1q_f32(b + 4 * v)), vld1q_f32(sp + 4 * v), cv));
        if (++jw == kw) {
            jw = 0;
            jh++;
        }
    }
}

/* The backward's P^T = 2^(s - lse2) over S^T[nk][NQ], lane r against
 * lse2[r] (the same bits as the difference followed by the array exp2). */
static void kern__v_sdpa_bwd_p__neon(const float *s, const float *lse2, int64_t nk,
                                             float *pp) {
    int64_t j;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 4; v++) {
        float32x4_t l2 = vld1q_f32(lse2 + 4 * v);
        for (j = 0; j < nk; j++) {
            int64_t o = j * KERN__SDPA_NQ + 4 * v;
            vst1q_f32(pp + o, kern__v_exp2__neon(vsubq_f32(vld1q_f32(s + o), l2)));
        }
    }
}

/* The backward's dS^T = P^T (dP^T - delta) (1 - t^2) scale in place of
 * dp over [nk][NQ] (t = NULL: no softcap factor), 0 where P = 0. */
static void kern__v_sdpa_bwd_ds__neon(float *dp, const float *pp, const float *t,
                                              const float *delta, int64_t nk, float scale) {
    const float32x4_t sc = vdupq_n_f32(scale), one = vdupq_n_f32(1.0f), zero = vdupq_n_f32(0.0f);
    int64_t j;
    int v;
    for (v = 0; v < KERN__SDPA_NQ / 4; v++) {
        float32x4_t dl = vld1q_f32(delta + 4 * v);
        for (j = 0; j < nk; j++) {
            int64_t o = j * KERN__SDPA_NQ + 4 * v;
            float32x4_t p = vld1q_f32(pp + o), ds = kern__mul__neon(p, vsubq_f32(vld1q_f32(dp + o), dl));
            if (t) {
                float32x4_t tt = vld1q_f32(t + o);
                ds = kern__mul__neon(ds, vsubq_f32(one, kern__mul__neon(tt, tt)));
            }
            vst1q_f32(dp + o, vbslq_f32(vceqq_f32(p, zero), zero, kern__mul__neon(ds, sc)));
        }
    }
}
#endif /* KERN_NEON */
/* END GENERATED */

/* ------------------------------------------------------------ AVX2 path */
#ifdef KERN_X86

KERN_TARGET_AVX2 static inline __m256i kern__sdpa_tailmask__avx2(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? (n < 0 ? 0 : n) : 8)), idx);
}

/* n < 8 elements (f32, bf16 or f16) from p + i widened to f32, zeros past
 * n; a whole vector is one plain load. */
KERN_TARGET_AVX2 static inline __m256 kern__sdpa_ld8__avx2(const void *p, kern_dtype dt,
                                                           int64_t i, int64_t n) {
    if (dt == KERN_F32)
        return n >= 8 ? _mm256_loadu_ps((const float *)p + i)
                      : _mm256_maskload_ps((const float *)p + i, kern__sdpa_tailmask__avx2(n));
    {
        uint16_t t[8];
        int64_t e;
        const uint16_t *h = (const uint16_t *)p + i;
        __m128i w;
        if (n >= 8) {
            w = _mm_loadu_si128((const __m128i *)h);
        } else {
            for (e = 0; e < 8; e++) t[e] = e < n ? h[e] : 0;
            w = _mm_loadu_si128((const __m128i *)t);
        }
        if (dt == KERN_BF16)
            return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(w), 16));
        return _mm256_cvtph_ps(w);
    }
}

#define KERN__SDPA_A2ROW(r, x_)                                               \
    if (RC > r) {                                                             \
        __m256 x = _mm256_broadcast_ss(x_);                                   \
        c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);                            \
        c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);                            \
    }
/* one k step: A element (r, k + o) of k-contiguous rows (AK1), else of the
 * row-contiguous column at p */
#define KERN__SDPA_A2K(o)                                                     \
    {                                                                         \
        __m256 b0, b1;                                                        \
        if (EO) { /* 16 bf16 lanes: even ones by a shift, odd by a mask */   \
            __m256i w_ = _mm256_loadu_si256((const __m256i *)(const void *)bh); \
            b0 = _mm256_castsi256_ps(_mm256_slli_epi32(w_, 16));              \
            b1 = _mm256_castsi256_ps(_mm256_and_si256(w_, hi16));             \
            bh += b_ks;                                                       \
        } else if (B16) {                                                     \
            const kern_dtype bdt = B16 == 1 ? KERN_BF16 : KERN_F16;           \
            b0 = kern__sdpa_ld8__avx2(bh, bdt, 0, full ? 8 : nn);             \
            b1 = kern__sdpa_ld8__avx2(bh, bdt, 8, full ? 8 : nn - 8);         \
            bh += b_ks;                                                       \
        } else {                                                              \
            b0 = full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, k0);       \
            b1 = full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, k1); \
        }                                                                     \
        if (AK1) {                                                            \
            KERN__SDPA_A2ROW(0, a0 + (o)) KERN__SDPA_A2ROW(1, a1 + (o))       \
            KERN__SDPA_A2ROW(2, a2 + (o)) KERN__SDPA_A2ROW(3, a3 + (o))       \
            KERN__SDPA_A2ROW(4, a4 + (o)) KERN__SDPA_A2ROW(5, a5 + (o))       \
        } else {                                                              \
            KERN__SDPA_A2ROW(0, p + 0) KERN__SDPA_A2ROW(1, p + q1)            \
            KERN__SDPA_A2ROW(2, p + q2) KERN__SDPA_A2ROW(3, p + q3)           \
            KERN__SDPA_A2ROW(4, p + q4) KERN__SDPA_A2ROW(5, p + q5)           \
            p += a_ks;                                                        \
        }                                                                     \
        if (!B16) b += b_ks;                                                  \
    }
/* 6 rows x 16 lanes: 12 ymm accumulators, 2 B loads and 6 broadcasts per
 * k step. A full tile (16 lanes) uses plain loads and stores; only the
 * lane tail goes through masks (on AMD a masked 256-bit store is
 * microcoded, a dozen cycles each: with 12 of them per call they cost a
 * quarter of a 64-deep tile's time). The constants: AK1, A's rows are
 * k-contiguous (a_ks = 1: K rows, score rows), else its rows are adjacent
 * (a_rs = 1: V^T), either way every broadcast is one base register and a
 * constant offset; B16, B is f32 at b (0) or bf16 (1) / f16 (2) at bh,
 * widened as it is loaded; RC (6, 4 or 2), the rows computed, so the
 * 4-row edge of a 64-row operand (64 = 6 x 10 + 4) does 8 FMAs a step,
 * not 12 (rows past mr repeat row 0 and are not stored). */
KERN_TARGET_AVX2 KERN__AINLINE void kern__sdpa_mk_6x16_body__avx2(
    int64_t K, const float *a, int64_t a_rs, int64_t a_ks, const float *b, const uint16_t *bh,
    int64_t b_ks, float *c, int64_t c_rs, int mr, int64_t nn, int acc, int full, int RC, int AK1,
    int B16) {
    /* rows past mr read row 0 (in bounds) and are not stored; for rows
     * adjacent in memory (!AK1, a_rs = 1 by contract) too: q_r, the offset
     * of row r at p, is r or 0 (the fuzzer found row 1 read one float past
     * a one-row V^T). Written from the constant 1, not a_rs, so that a
     * whole tile (mr the literal 6) folds them into the broadcasts'
     * displacements: held in registers they cost the backward pass up to
     * a tenth of its time. */
    const float *a0 = a, *a1 = mr > 1 ? a + a_rs : a, *a2 = mr > 2 ? a + 2 * a_rs : a;
    const float *a3 = mr > 3 ? a + 3 * a_rs : a, *a4 = mr > 4 ? a + 4 * a_rs : a;
    const float *a5 = mr > 5 ? a + 5 * a_rs : a, *p = a;
    const int64_t q1 = mr > 1 ? 1 : 0, q2 = mr > 2 ? 2 : 0, q3 = mr > 3 ? 3 : 0;
    const int64_t q4 = mr > 4 ? 4 : 0, q5 = mr > 5 ? 5 : 0;
    __m256i k0 = _mm256_setzero_si256(), k1 = k0;
    /* EO: whole bf16 B rows split into even and odd lanes (one 256-bit load,
     * a shift and an AND, where widening two halves takes two loads, two
     * zero-extensions and two shifts); the accumulators then hold columns
     * [0 2 4 6 | 8 10 12 14] and [1 3 5 7 | 9 11 13 15], put back in order
     * when C is read and written. Each column's products and their order
     * are unchanged: the same bits. */
    const int EO = B16 == 1 && full;
    const __m256i hi16 = _mm256_set1_epi32((int)0xffff0000u);
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    int64_t k;
    if (!full) {
        k0 = kern__sdpa_tailmask__avx2(nn);
        k1 = kern__sdpa_tailmask__avx2(nn - 8);
    }
    c00 = c01 = c10 = c11 = c20 = c21 = _mm256_setzero_ps();
    c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    if (acc) {
#define KERN__SDPA_A2LD(r)                                                    \
    if (mr > r) {                                                             \
        const float *cr = c + r * c_rs;                                       \
        c##r##0 = full ? _mm256_loadu_ps(cr) : _mm256_maskload_ps(cr, k0);    \
        c##r##1 = full ? _mm256_loadu_ps(cr + 8) : _mm256_maskload_ps(cr + 8, k1); \
        if (EO) {                                                             \
            __m256 t0_ = _mm256_permute2f128_ps(c##r##0, c##r##1, 0x20);      \
            __m256 t1_ = _mm256_permute2f128_ps(c##r##0, c##r##1, 0x31);      \
            c##r##0 = _mm256_shuffle_ps(t0_, t1_, _MM_SHUFFLE(2, 0, 2, 0));   \
            c##r##1 = _mm256_shuffle_ps(t0_, t1_, _MM_SHUFFLE(3, 1, 3, 1));   \
        }                                                                     \
    }
        KERN__SDPA_A2LD(0) KERN__SDPA_A2LD(1) KERN__SDPA_A2LD(2)
        KERN__SDPA_A2LD(3) KERN__SDPA_A2LD(4) KERN__SDPA_A2LD(5)
#undef KERN__SDPA_A2LD
    }
    for (k = 0; k < K; k++) {
        KERN__SDPA_A2K(0)
        if (AK1) {
            a0++; a1++; a2++; a3++; a4++; a5++;
        }
    }
#define KERN__SDPA_A2ST(r)                                                    \
    if (mr > r) {                                                             \
        float *cr = c + r * c_rs;                                             \
        if (EO) {                                                             \
            __m256 l_ = _mm256_unpacklo_ps(c##r##0, c##r##1);                 \
            __m256 h_ = _mm256_unpackhi_ps(c##r##0, c##r##1);                 \
            _mm256_storeu_ps(cr, _mm256_permute2f128_ps(l_, h_, 0x20));       \
            _mm256_storeu_ps(cr + 8, _mm256_permute2f128_ps(l_, h_, 0x31));   \
        } else if (full) {                                                    \
            _mm256_storeu_ps(cr, c##r##0);                                    \
            _mm256_storeu_ps(cr + 8, c##r##1);                                \
        } else {                                                              \
            _mm256_maskstore_ps(cr, k0, c##r##0);                             \
            _mm256_maskstore_ps(cr + 8, k1, c##r##1);                         \
        }                                                                     \
    }
    KERN__SDPA_A2ST(0) KERN__SDPA_A2ST(1) KERN__SDPA_A2ST(2)
    KERN__SDPA_A2ST(3) KERN__SDPA_A2ST(4) KERN__SDPA_A2ST(5)
#undef KERN__SDPA_A2ST
}
#undef KERN__SDPA_A2K
#undef KERN__SDPA_A2ROW

/* All tiles of C[M][N] for one A layout (AK1 a constant). Whole 6-row,
 * 16-lane tiles take the first loop: per tile a few adds, not a pointer
 * table (with 64-deep tiles the table's setup and spills cost a sixth of
 * the time). */
KERN_TARGET_AVX2 KERN__AINLINE void kern__sdpa_mk_tiles__avx2(
    int64_t M, int64_t N, int64_t K, const float *a, int64_t a_rs, int64_t a_ks,
    const float *b, const uint16_t *bh, int64_t b_ks, float *c, int64_t c_rs, int acc, int AK1,
    int B16) {
    int64_t m0, n0;
    for (n0 = 0; n0 < N; n0 += 16) {
        int64_t nn = N - n0;
        /* only the operand in use is offset (the other is NULL) */
        const float *bn = B16 ? b : b + n0;
        const uint16_t *bhn = B16 ? bh + n0 : bh;
        for (m0 = 0; m0 + 6 <= M && nn >= 16; m0 += 6)
            kern__sdpa_mk_6x16_body__avx2(K, a + m0 * a_rs, a_rs, a_ks, bn, bhn, b_ks,
                                          c + m0 * c_rs + n0, c_rs, 6, 16, acc, 1, 6, AK1, B16);
        for (; m0 < M; m0 += 6) {
            int mr = (int)(M - m0 < 6 ? M - m0 : 6);
            const float *am = a + m0 * a_rs;
            float *cm = c + m0 * c_rs + n0;
            if (nn < 16)
                kern__sdpa_mk_6x16_body__avx2(K, am, a_rs, a_ks, bn, bhn, b_ks, cm, c_rs,
                                              mr, nn, acc, 0, 6, AK1, B16);
            else if (mr > 4)
                kern__sdpa_mk_6x16_body__avx2(K, am, a_rs, a_ks, bn, bhn, b_ks, cm, c_rs,
                                              mr, nn, acc, 1, 6, AK1, B16);
            else if (mr > 2)
                kern__sdpa_mk_6x16_body__avx2(K, am, a_rs, a_ks, bn, bhn, b_ks, cm, c_rs,
                                              mr, nn, acc, 1, 4, AK1, B16);
            else
                kern__sdpa_mk_6x16_body__avx2(K, am, a_rs, a_ks, bn, bhn, b_ks, cm, c_rs,
                                              mr, nn, acc, 1, 2, AK1, B16);
        }
    }
}

/* C[M][N] (+)= A[M][K] B[K][N] over 6 x 16 tiles; A addressed by (row,
 * k) strides, one of them 1 (every caller: K or score rows, or V^T), B
 * rows b_ks apart, N the lanes. */
KERN_TARGET_AVX2 static void kern__sdpa_mk_f32__avx2(int64_t M, int64_t N, int64_t K,
                                                     const float *a, int64_t a_rs,
                                                     int64_t a_ks, const float *b,
                                                     int64_t b_ks, float *c,
                                                     int64_t c_rs, int acc) {
    if (a_ks == 1) {
        kern__sdpa_mk_tiles__avx2(M, N, K, a, a_rs, 1, b, NULL, b_ks, c, c_rs, acc, 1, 0);
    } else if (a_rs == 1) {
        kern__sdpa_mk_tiles__avx2(M, N, K, a, 1, a_ks, b, NULL, b_ks, c, c_rs, acc, 0, 0);
    } else { /* neither stride 1: no caller passes this */
        kern__sdpa_mk_f32__scalar(M, N, K, a, a_rs, a_ks, b, b_ks, c, c_rs, acc);
    }
}


/* The rows path's P.V over 16-bit V rows read in place (fns.mkv16): each
 * V vector widened as the kernel loads it, where a conversion pass would
 * write and reread an f32 copy of the block. The same products in the same
 * order as the f32 kernel on the converted rows. */
KERN_TARGET_AVX2 static void kern__sdpa_mkv16__avx2(int64_t M, int64_t N, int64_t K,
                                                    const float *a, int64_t a_rs,
                                                    const uint16_t *b, int64_t b_ks, kern_dtype dt,
                                                    float *c, int64_t c_rs) {
    if (dt == KERN_BF16)
        kern__sdpa_mk_tiles__avx2(M, N, K, a, a_rs, 1, NULL, b, b_ks, c, c_rs, 1, 1, 1);
    else
        kern__sdpa_mk_tiles__avx2(M, N, K, a, a_rs, 1, NULL, b, b_ks, c, c_rs, 1, 1, 2);
}

/* Sums of four 8-lane vectors: lane e < 4 of the result's low half is
 * the sum of v_e (pairs within 128-bit halves, then the halves). */
#define KERN__SDPA_HSUM4(c0, c1, c2, c3)                                      \
    _mm256_hadd_ps(_mm256_hadd_ps(c0, c1), _mm256_hadd_ps(c2, c3))

/* One K vector of 8 lanes at element i, all 8 present: f32, or bf16 / f16
 * widened (dt a constant in each instantiation below, so this folds to
 * one load or a load and its widening; kern__sdpa_ld8__avx2 is not
 * forced inline, and forcing it measured 0.96-0.99x here). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__sdpa_ldk8__avx2(const void *p, int dt, int64_t i) {
    __m128i w;
    if (dt == KERN_F32) return _mm256_loadu_ps((const float *)p + i);
    w = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    if (dt == KERN_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(w), 16));
    return _mm256_cvtph_ps(w);
}

/* s[r][j] = q_r . k_j for the rows path: two keys by four query rows a
 * block (8 accumulators; each K vector loaded once for four rows, each q
 * vector once for two keys), a lone last row four keys at a time; every
 * sum is reduced by the same hadd tree as a single key's, so the bits do
 * not depend on the blocking. FULL: D a multiple of 8 (every load whole,
 * no tail test in the loop); dt a constant per instantiation. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__sdpa_dots_body__avx2(int64_t nk, int64_t R, int64_t D,
                                                              const float *qf, int64_t ldq,
                                                              const void *k, int64_t k_rs,
                                                              int dt, float *s, int64_t ls,
                                                              int full) {
    int64_t j, r, d;
#define KERN__SDPA_LDK(i_, n_)                                                \
    (full ? kern__sdpa_ldk8__avx2(k, dt, i_) : kern__sdpa_ld8__avx2(k, (kern_dtype)dt, i_, n_))
    for (r = 0; r < R; r += 4) {
        int64_t r1 = r + 1 < R ? r + 1 : r, r2 = r + 2 < R ? r + 2 : r;
        int64_t r3 = r + 3 < R ? r + 3 : r;
        const float *q0 = qf + r * ldq, *q1 = qf + r1 * ldq, *q2 = qf + r2 * ldq,
                    *q3 = qf + r3 * ldq;
        int e;
        j = 0;
        if (r + 1 == R) /* a lone row (R = 1: no GQA): four keys a block */
            for (; j + 4 <= nk; j += 4) {
                __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, h;
                float t[4];
                for (d = 0; d < D; d += 8) {
                    __m256 x = _mm256_loadu_ps(q0 + d);
                    c0 = _mm256_fmadd_ps(x, KERN__SDPA_LDK(j * k_rs + d, D - d), c0);
                    c1 = _mm256_fmadd_ps(x, KERN__SDPA_LDK((j + 1) * k_rs + d, D - d), c1);
                    c2 = _mm256_fmadd_ps(x, KERN__SDPA_LDK((j + 2) * k_rs + d, D - d), c2);
                    c3 = _mm256_fmadd_ps(x, KERN__SDPA_LDK((j + 3) * k_rs + d, D - d), c3);
                }
                h = KERN__SDPA_HSUM4(c0, c1, c2, c3);
                _mm_storeu_ps(t, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
                for (e = 0; e < 4; e++) s[r * ls + j + e] = t[e];
            }
        for (; j + 2 <= nk; j += 2) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, ha, hb, sum;
            for (d = 0; d < D; d += 8) {
                __m256 ka = KERN__SDPA_LDK(j * k_rs + d, D - d);
                __m256 kb = KERN__SDPA_LDK((j + 1) * k_rs + d, D - d);
                /* each q vector loaded once, into a register (folded into
                 * both FMAs it would be loaded twice: 10 loads a step) */
#define KERN__SDPA_QROW(n)                                                    \
    {                                                                         \
        __m256 x = _mm256_loadu_ps(q##n + d);                                 \
        KERN__FBARRIER(x);                                                    \
        a##n = _mm256_fmadd_ps(x, ka, a##n);                                  \
        b##n = _mm256_fmadd_ps(x, kb, b##n);                                  \
    }
                KERN__SDPA_QROW(0) KERN__SDPA_QROW(1) KERN__SDPA_QROW(2) KERN__SDPA_QROW(3)
#undef KERN__SDPA_QROW
            }
            ha = KERN__SDPA_HSUM4(a0, a1, a2, a3);
            hb = KERN__SDPA_HSUM4(b0, b1, b2, b3);
            /* [a lo | b lo] + [a hi | b hi]: key j's four sums, then j+1's */
            sum = _mm256_add_ps(_mm256_permute2f128_ps(ha, hb, 0x20),
                                _mm256_permute2f128_ps(ha, hb, 0x31));
            {
                /* rows' (j, j+1) pairs: [r0 r0' r1 r1'], [r2 r2' r3 r3'] */
                __m128 lo = _mm256_castps256_ps128(sum), hi = _mm256_extractf128_ps(sum, 1);
                __m128 u0 = _mm_unpacklo_ps(lo, hi), u1 = _mm_unpackhi_ps(lo, hi);
                _mm_storel_pi((__m64 *)(void *)(s + r * ls + j), u0);
                if (r + 1 < R) _mm_storeh_pi((__m64 *)(void *)(s + (r + 1) * ls + j), u0);
                if (r + 2 < R) _mm_storel_pi((__m64 *)(void *)(s + (r + 2) * ls + j), u1);
                if (r + 3 < R) _mm_storeh_pi((__m64 *)(void *)(s + (r + 3) * ls + j), u1);
            }
        }
        for (; j < nk; j++) {
            __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, h;
            float t[4];
            for (d = 0; d < D; d += 8) {
                __m256 kv = KERN__SDPA_LDK(j * k_rs + d, D - d);
                c0 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + d), kv, c0);
                c1 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + d), kv, c1);
                c2 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + d), kv, c2);
                c3 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + d), kv, c3);
            }
            h = KERN__SDPA_HSUM4(c0, c1, c2, c3);
            _mm_storeu_ps(t, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
            for (e = 0; e < 4 && r + e < R; e++) s[(r + e) * ls + j] = t[e];
        }
    }
#undef KERN__SDPA_LDK
}

KERN_TARGET_AVX2 static void kern__sdpa_dots__avx2(int64_t nk, int64_t R, int64_t D,
                                                   const float *qf, int64_t ldq,
                                                   const void *k, int64_t k_rs,
                                                   kern_dtype dt, float *s, int64_t ls) {
    if (D % 8 != 0)
        kern__sdpa_dots_body__avx2(nk, R, D, qf, ldq, k, k_rs, dt, s, ls, 0);
    else if (dt == KERN_F32)
        kern__sdpa_dots_body__avx2(nk, R, D, qf, ldq, k, k_rs, KERN_F32, s, ls, 1);
    else if (dt == KERN_BF16)
        kern__sdpa_dots_body__avx2(nk, R, D, qf, ldq, k, k_rs, KERN_BF16, s, ls, 1);
    else
        kern__sdpa_dots_body__avx2(nk, R, D, qf, ldq, k, k_rs, KERN_F16, s, ls, 1);
}
#undef KERN__SDPA_HSUM4

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

/* 16 x 16 transpose of 32-bit elements in registers (unpack 32, unpack 64,
 * then two rounds of 128-bit lane shuffles). */
KERN_TARGET_AVX512 static inline void kern__sdpa_tr16__avx512(__m512i *r) {
    __m512i a[16], b[16], c0, c1, c2, c3;
    int i, k;
    for (i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (i = 0; i < 16; i += 4) {
        b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
        b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
        b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
        b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
    }
    /* b[4g + k] lane L: column 4L + k of rows 4g..4g+3 */
    for (k = 0; k < 4; k++) {
        c0 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0x44);
        c1 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0xEE);
        c2 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0x44);
        c3 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0xEE);
        r[k] = _mm512_shuffle_i32x4(c0, c2, 0x88);
        r[4 + k] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
        r[8 + k] = _mm512_shuffle_i32x4(c1, c3, 0x88);
        r[12 + k] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
    }
}

/* Panel out: O^T[c][r] (r < NQ lanes) to rows dst[r][c], 16 x 16 f32
 * blocks transposed in registers, then stored as dt (f32, bf16 rounded
 * to nearest even, f16). */
KERN_TARGET_AVX512 static void kern__sdpa_opanel__avx512(const float *ot, int64_t Dv, int64_t nr,
                                                         void *const *dst, kern_dtype dt) {
    int64_t c0, r0, i;
    for (c0 = 0; c0 < Dv; c0 += 16) {
        int64_t nc = Dv - c0 < 16 ? Dv - c0 : 16;
        __mmask16 kc = (__mmask16)((1u << nc) - 1u);
        for (r0 = 0; r0 < nr; r0 += 16) {
            __m512i x[16];
            for (i = 0; i < 16; i++)
                x[i] = i < nc ? _mm512_loadu_si512((const void *)(ot + (c0 + i) * KERN__SDPA_NQ + r0))
                              : _mm512_setzero_si512();
            kern__sdpa_tr16__avx512(x);
            for (i = 0; i < 16 && r0 + i < nr; i++) {
                __m512 v = _mm512_castsi512_ps(x[i]);
                if (dt == KERN_F32) {
                    _mm512_mask_storeu_ps((float *)dst[r0 + i] + c0, kc, v);
                } else {
                    __m256i h = dt == KERN_BF16 ? kern__f32x16_bf16__avx512(x[i])
                                                : _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
                    _mm256_mask_storeu_epi16((uint16_t *)dst[r0 + i] + c0, kc, h);
                }
            }
        }
    }
}

/* Pairs transposed: xt[(dp * NQ + r) * 2 + e] = rows[r][2 dp + e] for r <
 * NQ, dp < np (a NULL row reads as zeros), 16 x 16 pairs per transpose. */
KERN_TARGET_AVX512 static void kern__sdpa_pairs__avx512(const uint16_t *const *rows, int64_t np,
                                                        uint16_t *xt) {
    int64_t r0, dp0, i;
    for (r0 = 0; r0 < KERN__SDPA_NQ; r0 += 16)
        for (dp0 = 0; dp0 < np; dp0 += 16) {
            int64_t n = np - dp0 < 16 ? np - dp0 : 16;
            __mmask16 km = (__mmask16)((1u << n) - 1u);
            __m512i r[16];
            for (i = 0; i < 16; i++)
                r[i] = rows[r0 + i] ? _mm512_maskz_loadu_epi32(km, rows[r0 + i] + 2 * dp0)
                                    : _mm512_setzero_si512();
            kern__sdpa_tr16__avx512(r);
            for (i = 0; i < n; i++)
                _mm512_storeu_si512((void *)(xt + ((dp0 + i) * KERN__SDPA_NQ + r0) * 2), r[i]);
        }
}

/* vpermt2w indices interleaving two rows a, b of 32 bf16 into pairs
 * (a[c], b[c]): il for c < 16, ih for c >= 16. */
KERN_TARGET_AVX512 static inline void kern__sdpa_pair_idx__avx512(__m512i *il, __m512i *ih) {
    uint16_t lo[32], hi[32];
    int i;
    for (i = 0; i < 16; i++) {
        lo[2 * i] = (uint16_t)i;
        lo[2 * i + 1] = (uint16_t)(32 + i);
        hi[2 * i] = (uint16_t)(16 + i);
        hi[2 * i + 1] = (uint16_t)(48 + i);
    }
    *il = _mm512_loadu_si512((const void *)lo);
    *ih = _mm512_loadu_si512((const void *)hi);
}

KERN_TARGET_AVX512BF16 static void kern__sdpa_vpack__avx512bf16(const uint16_t *v, int64_t vrs,
                                                                int64_t nk, int64_t Dv,
                                                                uint16_t *vp) {
    __m512i il, ih;
    int64_t jp, c0, nkp = (nk + 1) / 2;
    kern__sdpa_pair_idx__avx512(&il, &ih);
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

#ifdef KERN__HAVE_AMX
/* ------------------------------------------------------------ AMX tiles */
/* bf16 pair products on tiles (tdpbf16ps), for every mk16 call whose A
 * pairs are adjacent (a_kps == 2): a 32 x 32 block is four f32 accumulator
 * tiles (0-3), each 16-pair chunk two A tiles (4-5) and two B tiles (6-7),
 * all 16 rows x 64 bytes. A and B are read in place when the chunk and
 * block are whole; a short chunk, a short block and a partial C go through
 * zero-padded copies (nothing past the operands' extents is read, and no
 * stale bf16 can be a NaN). The configuration is loaded once per task
 * (tiles_on) since ldtilecfg costs about as much as a 32 x 32 block. */
KERN_TARGET_AMX static void kern__sdpa_tiles_on__amx(void) {
    static const uint8_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    kern__amx_config(rows);
}
KERN_TARGET_AMX static void kern__sdpa_tiles_off__amx(void) { _tile_release(); }

KERN_TARGET_AMX static void kern__sdpa_mk16__amx(int64_t M, int64_t N, int64_t KP,
                                                 const uint16_t *a, int64_t a_rs, int64_t a_kps,
                                                 const uint16_t *b, int64_t b_ks, float *c,
                                                 int64_t c_rs, int acc) {
    KERN_ALIGNED(64) uint16_t abuf[32 * 32];
    KERN_ALIGNED(64) uint16_t bbuf[16 * 64];
    KERN_ALIGNED(64) float cbuf[32 * 32];
    int64_t m0, n0, kp0, r, x;
    if (a_kps != 2 || M < 8) { /* strided pairs or a few rows: the vector kernel */
        kern__sdpa_mk16__avx512bf16(M, N, KP, a, a_rs, a_kps, b, b_ks, c, c_rs, acc);
        return;
    }
    for (m0 = 0; m0 < M; m0 += 32) {
        int64_t mr = M - m0 < 32 ? M - m0 : 32;
        int two = mr > 16; /* the lower tile row holds data */
        for (n0 = 0; n0 < N; n0 += 32) {
            int64_t nn = N - n0 < 32 ? N - n0 : 32, cs = c_rs;
            int whole = mr == 32 && nn == 32;
            float *cc = c + m0 * c_rs + n0;
            if (!whole) {
                if (acc) {
                    memset(cbuf, 0, sizeof cbuf);
                    for (r = 0; r < mr; r++) memcpy(cbuf + r * 32, cc + r * c_rs, (size_t)nn * 4);
                }
                cc = cbuf;
                cs = 32;
            }
            if (acc) {
                _tile_loadd(0, cc, cs * 4);
                _tile_loadd(1, cc + 16, cs * 4);
                _tile_loadd(2, cc + 16 * cs, cs * 4);
                _tile_loadd(3, cc + 16 * cs + 16, cs * 4);
            } else {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
            }
            for (kp0 = 0; kp0 < KP; kp0 += 16) {
                int64_t kr = KP - kp0 < 16 ? KP - kp0 : 16, as = a_rs, bs = b_ks;
                const uint16_t *at = a + m0 * a_rs + 2 * kp0, *bt = b + kp0 * b_ks + 2 * n0;
                if (mr < 32 || kr < 16) {
                    memset(abuf, 0, sizeof abuf);
                    for (r = 0; r < mr; r++) memcpy(abuf + r * 32, at + r * a_rs, (size_t)kr * 4);
                    at = abuf;
                    as = 32;
                }
                if (nn < 32 || kr < 16) {
                    memset(bbuf, 0, sizeof bbuf);
                    for (x = 0; x < kr; x++) memcpy(bbuf + x * 64, bt + x * b_ks, (size_t)nn * 4);
                    bt = bbuf;
                    bs = 64;
                }
                _tile_loadd(4, at, as * 2);
                _tile_loadd(6, bt, bs * 2);
                _tile_loadd(7, bt + 32, bs * 2);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                if (two) {
                    _tile_loadd(5, at + 16 * as, as * 2);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
            }
            _tile_stored(0, cc, cs * 4);
            _tile_stored(1, cc + 16, cs * 4);
            if (two) {
                _tile_stored(2, cc + 16 * cs, cs * 4);
                _tile_stored(3, cc + 16 * cs + 16, cs * 4);
            }
            if (!whole) {
                float *dst = c + m0 * c_rs + n0;
                for (r = 0; r < mr; r++) memcpy(dst + r * c_rs, cbuf + r * 32, (size_t)nn * 4);
            }
        }
    }
}

/* V^T for the tile P.V: VT[c][j] = V[j][c] (rows of KERN__SDPA_BK keys,
 * so the pairs along the keys are adjacent, i.e. A for tdpbf16ps), for c
 * < Dv and j < nk rounded up to even (a zero past an odd nk). Pairs of
 * keys are one 32-bit element, so this is a 32-bit transpose of the pair
 * matrix [jp][c], 16 x 16 at a time. */
KERN_TARGET_AMX static void kern__sdpa_vpackt__amx(const uint16_t *v, int64_t vrs, int64_t nk,
                                                   int64_t Dv, uint16_t *vt) {
    __m512i il, ih;
    int64_t nkp = (nk + 1) / 2, jp0, c0, i, h;
    kern__sdpa_pair_idx__avx512(&il, &ih);
    for (c0 = 0; c0 < Dv; c0 += 32) {
        int64_t nc = Dv - c0 < 32 ? Dv - c0 : 32;
        __mmask32 kc = nc >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << nc) - 1u);
        for (jp0 = 0; jp0 < nkp; jp0 += 16) {
            int64_t np = nkp - jp0 < 16 ? nkp - jp0 : 16;
            __mmask16 kp = (__mmask16)((1u << np) - 1u);
            __m512i r0[16], r1[16];
            for (i = 0; i < 16; i++) {
                int64_t j = 2 * (jp0 + i);
                __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
                if (i < np) {
                    a = _mm512_maskz_loadu_epi16(kc, v + j * vrs + c0);
                    if (j + 1 < nk) b = _mm512_maskz_loadu_epi16(kc, v + (j + 1) * vrs + c0);
                }
                r0[i] = _mm512_permutex2var_epi16(a, il, b);
                r1[i] = _mm512_permutex2var_epi16(a, ih, b);
            }
            kern__sdpa_tr16__avx512(r0);
            for (i = 0; i < 16 && i < nc; i++)
                _mm512_mask_storeu_epi32(vt + (c0 + i) * KERN__SDPA_BK + 2 * jp0, kp, r0[i]);
            if (nc > 16) {
                kern__sdpa_tr16__avx512(r1);
                for (h = 16; h < nc; h++)
                    _mm512_mask_storeu_epi32(vt + (c0 + h) * KERN__SDPA_BK + 2 * jp0, kp, r1[h - 16]);
            }
        }
    }
}

KERN_TARGET_AMX static void kern__sdpa_kcopy__amx(const uint16_t *k, int64_t krs, int64_t nk,
                                                  int64_t D, int64_t ld, uint16_t *dst) {
    int64_t j, d;
    for (j = 0; j < nk; j++)
        for (d = 0; d < ld; d += 32) {
            int64_t n = D - d < 32 ? (D - d > 0 ? D - d : 0) : 32;
            __mmask32 km = n >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << n) - 1u);
            __mmask32 ks = ld - d >= 32 ? (__mmask32)0xFFFFFFFFu
                                        : (__mmask32)((1u << (ld - d)) - 1u);
            _mm512_mask_storeu_epi16(dst + j * ld + d, ks,
                                     _mm512_maskz_loadu_epi16(km, k + j * krs + d));
        }
}
#endif /* KERN__HAVE_AMX */
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

/* ------------------------------------------------------------- dispatch */

/* One const table per ISA level (docs/internals.md). The softmax steps
 * come from the template; the microkernels (8x32 AVX-512, 6x16 AVX2, 4x16
 * NEON tiles), the rows-path dot products (different horizontal-sum
 * shapes) and the bf16 kernels (vdpbf16ps) are hand-written per ISA. */
#define KERN__SDPA_SOFTMAX(SFX) kern__v_sdpa_step__##SFX, kern__v_sdpa_exp2__##SFX, \
                                kern__v_sdpa_scale__##SFX
#define KERN__SDPA_BWD(SFX) kern__v_sdpa_bwd_p__##SFX, kern__v_sdpa_bwd_ds__##SFX
static const kern__sdpa_fns kern__sdpa_fns_scalar = {
    "scalar", kern__sdpa_mk_f32__scalar, NULL, kern__s_sdpa_step, kern__s_sdpa_exp2,
    kern__s_sdpa_scale, kern__sdpa_dots__scalar, kern__s_sdpa_rstep, kern__sdpa_p2__scalar,
    kern__sdpa_vpack__scalar, NULL, NULL, kern__s_sdpa_relpos, kern__s_sdpa_bwd_p, kern__s_sdpa_bwd_ds, NULL, NULL, NULL, NULL, kern__sdpa_pairs__scalar, NULL, NULL};
#ifdef KERN_X86
static const kern__sdpa_fns kern__sdpa_fns_avx2 = {
    "avx2", kern__sdpa_mk_f32__avx2, NULL, KERN__SDPA_SOFTMAX(avx2), kern__sdpa_dots__avx2,
    kern__v_sdpa_rstep__avx2, kern__sdpa_p2__scalar, kern__sdpa_vpack__scalar, NULL, NULL,
    kern__v_sdpa_relpos__avx2, KERN__SDPA_BWD(avx2), NULL, NULL, NULL, NULL, kern__sdpa_pairs__scalar, NULL,
    kern__sdpa_mkv16__avx2};
static const kern__sdpa_fns kern__sdpa_fns_avx512 = {
    "avx512", kern__sdpa_mk_f32__avx512, NULL, KERN__SDPA_SOFTMAX(avx512),
    kern__sdpa_dots__avx512, kern__v_sdpa_rstep__avx512, kern__sdpa_p2__scalar,
    kern__sdpa_vpack__scalar, NULL, NULL, kern__v_sdpa_relpos__avx512, KERN__SDPA_BWD(avx512), NULL, NULL, NULL, NULL, kern__sdpa_pairs__scalar, kern__sdpa_opanel__avx512, NULL};
static const kern__sdpa_fns kern__sdpa_fns_avx512_bf16 = {
    "avx512_bf16", kern__sdpa_mk_f32__avx512, kern__sdpa_mk16__avx512bf16,
    KERN__SDPA_SOFTMAX(avx512), kern__sdpa_dots__avx512, kern__v_sdpa_rstep__avx512,
    kern__sdpa_p2__avx512bf16, kern__sdpa_vpack__avx512bf16, kern__sdpa_dots16__avx512bf16,
    kern__sdpa_rows16__avx512bf16, kern__v_sdpa_relpos__avx512, KERN__SDPA_BWD(avx512), NULL, NULL, NULL, NULL, kern__sdpa_pairs__avx512, kern__sdpa_opanel__avx512, NULL};
#ifdef KERN__HAVE_AMX
/* the Xeon class's choices below the tiles: the rows path (decode) in f32
 * (no dots16; rows16 serves the backward) */
static const kern__sdpa_fns kern__sdpa_fns_amx = {
    "amx", kern__sdpa_mk_f32__avx512, kern__sdpa_mk16__amx, KERN__SDPA_SOFTMAX(avx512),
    kern__sdpa_dots__avx512, kern__v_sdpa_rstep__avx512, kern__sdpa_p2__avx512bf16,
    kern__sdpa_vpack__avx512bf16, NULL, kern__sdpa_rows16__avx512bf16, kern__v_sdpa_relpos__avx512,
    KERN__SDPA_BWD(avx512), kern__sdpa_tiles_on__amx, kern__sdpa_tiles_off__amx, kern__sdpa_vpackt__amx, kern__sdpa_kcopy__amx, kern__sdpa_pairs__avx512, kern__sdpa_opanel__avx512, NULL};
#endif
#endif
#ifdef KERN_NEON
static const kern__sdpa_fns kern__sdpa_fns_neon = {
    "neon", kern__sdpa_mk_f32__neon, NULL, KERN__SDPA_SOFTMAX(neon), kern__sdpa_dots__scalar,
    kern__v_sdpa_rstep__neon, kern__sdpa_p2__scalar, kern__sdpa_vpack__scalar, NULL, NULL,
    kern__v_sdpa_relpos__neon, KERN__SDPA_BWD(neon), NULL, NULL, NULL, NULL, kern__sdpa_pairs__scalar, NULL,
    NULL};
#endif
#undef KERN__SDPA_SOFTMAX
#undef KERN__SDPA_BWD

/* The table of level isa and class uarch (kern_ctx_uarch). */
KERN_API const kern__sdpa_fns *kern__sdpa_fns_for(kern_isa isa, kern_uarch uarch) {
    (void)uarch;
    switch (isa) {
#ifdef KERN_X86
    case KERN_ISA_AMX:
#ifdef KERN__HAVE_AMX
        return &kern__sdpa_fns_amx;
#endif
        /* fall through */
    case KERN_ISA_AVX512_BF16:
        if (uarch != KERN_UARCH_XEON_AVX512) return &kern__sdpa_fns_avx512_bf16;
        /* fall through */
    case KERN_ISA_AVX512_VNNI:
    case KERN_ISA_AVX512: return &kern__sdpa_fns_avx512;
    case KERN_ISA_AVX2_VNNI:
    case KERN_ISA_AVX2: return &kern__sdpa_fns_avx2;
#endif
#ifdef KERN_NEON
    case KERN_ISA_NEON_BF16:
    case KERN_ISA_NEON_DOT:
    case KERN_ISA_NEON: return &kern__sdpa_fns_neon;
#endif
    default: return &kern__sdpa_fns_scalar;
    }
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
    const kern__sdpa_fns *fn;
    int bf16_native;
    int64_t qb; /* forward: query panels per task (KERN__SDPA_QB or _QB_MAX) */
    int64_t bk; /* forward: keys per block (KERN__SDPA_BK_VEC, or _BK on some tile problems) */
    /* decomposed relative position: grids, table lengths after resizing
     * (2 * max - 1), coordinate scales, the tables as given and their f32
     * resized copies (in the forward's shared workspace) */
    int relpos;
    int64_t rqh, rqw, rkh, rkw, rnh, rnw;
    float rsqh, rskh, rsqw, rskw;
    const kern_tensor *rph, *rpw;
    float *rth, *rtw;
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
    int mask_done = 0;
    if (p->mask && !rows && p->softcap <= 0 && nr == KERN__SDPA_NQ && p->maskv.dtype == KERN_F32) {
        /* the panel's lanes share one mask row (a [B, 1, 1, Lk] padding
         * mask): scale and mask in one pass, x = x c + m log2(e), one
         * mask value down each key's column of NQ lanes */
        const kern_tensor *m = &p->maskv;
        int same = 1;
        for (r = 1; r < nr && same; r++) same = ln[r].moff == ln[0].moff;
        if (same) {
            const float *mr = (const float *)m->data + ln[0].moff + j0 * m->stride[3];
            float c = p->scale * KERN__SDPA_LOG2E;
            for (jj = 0; jj < nk; jj++) {
                float a = mr[jj * m->stride[3]] * KERN__SDPA_LOG2E;
                float *col = s + jj * KERN__SDPA_NQ;
                for (r = 0; r < KERN__SDPA_NQ; r++) col[r] = col[r] * c + a;
            }
            mask_done = 1;
            nseg = 0;
        }
    }
    for (seg = 0; seg < nseg; seg++) {
        float *x = s + seg * KERN__SDPA_BK, *t = tmp + seg * KERN__SDPA_BK;
        if (p->softcap > 0) {
            /* t = tanh(u), u = scale*qk/cap: 1 - 2/(2^(2u log2 e) + 1) */
            float c = 2.0f * p->scale / p->softcap * KERN__SDPA_LOG2E;
            float cap = p->softcap * KERN__SDPA_LOG2E;
            for (jj = 0; jj < len; jj++) t[jj] = x[jj] * c;
            p->fn->exp2(t, len);
            for (jj = 0; jj < len; jj++) {
                float th = 1.0f - 2.0f / (t[jj] + 1.0f);
                if (keep_tanh) t[jj] = th;
                x[jj] = th * cap;
            }
        } else if (!rows) { /* key by key, fixed-length lanes (vectorized) */
            float c = p->scale * KERN__SDPA_LOG2E;
            for (jj = 0; jj < nk; jj++)
                for (r = 0; r < KERN__SDPA_NQ; r++) x[jj * KERN__SDPA_NQ + r] *= c;
        } else {
            float c = p->scale * KERN__SDPA_LOG2E;
            for (jj = 0; jj < len; jj++) x[jj] *= c;
        }
    }
    if (p->mask && !mask_done) {
        const kern_tensor *m = &p->maskv;
        int64_t msj = m->stride[3];
        if (m->dtype == KERN_F32) {
            for (r = 0; r < nr; r++) {
                const float *mr = (const float *)m->data + ln[r].moff + j0 * msj;
                float *sr0 = s + r * sr;
                for (jj = 0; jj < nk; jj++) sr0[jj * sj] += mr[jj * msj] * KERN__SDPA_LOG2E;
            }
        } else {
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
    /* decomposed relative position (P->relpos): queries as f32 [D][NQ]
     * (for bf16-native panels and the rows path), q . table rows
     * [max(rnh, rnw)][NQ], and per panel the bias terms in log2 units
     * QB x [rkh][NQ] and QB x [rkw][NQ] */
    float *qf, *rt, *rh, *rw;
} kern__sdpa_fscr;

static size_t kern__sdpa_fscr_carve(const kern__sdpa_prob *p, char *base,
                                    kern__sdpa_fscr *sc) {
    kern__sdpa_carve c;
    int64_t D16 = (p->D + 15) & ~(int64_t)15, Dv = p->Dv, BK = KERN__SDPA_BK;
    int64_t NQ = KERN__SDPA_NQ, QB = p->qb;
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
    /* f32 K, or bf16 K rows padded to D32 for the tile kernels */
    sc->kc = (float *)kern__sdpa_take(
        &c, (size_t)(BK * (p->D * 2 > ((p->D + 31) & ~(int64_t)31) ? p->D * 2
                                                                    : (p->D + 31) & ~(int64_t)31)) * 2);
    sc->vc = (float *)kern__sdpa_take(&c, (size_t)(BK * (Dv > 0 ? Dv : 1)) * 4);
    sc->vp = (uint16_t *)kern__sdpa_take(&c, (size_t)(BK * (Dv > 0 ? Dv : 1)) * 2);
    sc->row = (float *)kern__sdpa_take(&c, (size_t)mx * 4);
    sc->qf = sc->rt = sc->rh = sc->rw = NULL;
    if (p->relpos) {
        int64_t nt = p->rnh > p->rnw ? p->rnh : p->rnw;
        sc->qf = (float *)kern__sdpa_take(&c, (size_t)(p->D * NQ) * 4);
        sc->rt = (float *)kern__sdpa_take(&c, (size_t)(nt * NQ) * 4);
        sc->rh = (float *)kern__sdpa_take(&c, (size_t)(QB * p->rkh * NQ) * 4);
        sc->rw = (float *)kern__sdpa_take(&c, (size_t)(QB * p->rkw * NQ) * 4);
    }
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

/* A finished row's output factor (1 / l, times the dropout scale) and its
 * lse. l == 0 exactly iff no key was visible (the max element contributes
 * 2^0 = 1): factor 0, lse -inf; a NaN score makes l NaN, which then
 * reaches out and lse. */
static inline float kern__sdpa_row_inv(const kern__sdpa_prob *p, float m, float l, float *inv) {
    if (l == 0.0f) {
        *inv = 0.0f;
        return -INFINITY;
    }
    *inv = 1.0f / l;
    if (p->dropout_p > 0) *inv *= 1.0f / (1.0f - p->dropout_p);
    return (m + log2f(l)) * KERN__SDPA_LN2;
}

/* Writes one finished row: out = acc / l (times the dropout scale), lse. A
 * row with no visible key (l = 0) gets zeros and -inf. acc is read as
 * acc[c * cs]. */
static void kern__sdpa_emit(const kern__sdpa_fwd *f, int64_t base, int64_t h, int64_t i,
                            const float *acc, int64_t cs, float m, float l, float *row) {
    const kern__sdpa_prob *p = f->p;
    int64_t c, Dv = p->Dv;
    float inv, lse = kern__sdpa_row_inv(p, m, l, &inv);
    if (l == 0.0f)
        for (c = 0; c < Dv; c++) row[c] = 0.0f;
    else
        for (c = 0; c < Dv; c++) row[c] = acc[c * cs] * inv;
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

/* One forward task's state: which (query block, batch, kv head, key split)
 * it computes, its scratch and the key range its lanes can see. */
typedef struct kern__sdpa_ftask {
    const kern__sdpa_fwd *f;
    const kern__sdpa_prob *p;
    kern__sdpa_fscr sc;
    int64_t qb, b, hk, sp;
    int64_t lq, lk, qbase, kbase, R, ks0, ks1;
    int64_t D16, D32, pan, np, klo, khi;
    const char *kp, *vp;
    int64_t krs, vrs;
    int native, native16;
} kern__sdpa_ftask;

/* The current key block's K and V as the microkernels read them: the
 * operands in place (f32), or converted / bf16-paired once per block. */
typedef struct kern__sdpa_ktile {
    const float *kf, *vf;
    int64_t kfs, vfs;
    int converted, packed;
    const uint16_t *k16; /* tiles: K rows [nk][D32], contiguous, zero-padded */
    const uint16_t *v16; /* rows path, 16-bit V read in place (fns.mkv16), else NULL */
} kern__sdpa_ktile;

/* Step 1: decodes task t (causal work long tasks first) and finds its
 * panels; returns 0 when there is nothing to compute. */
static int kern__sdpa_fwd_locate(kern__sdpa_ftask *T, const kern__sdpa_fwd *f, int64_t t,
                                 int thread) {
    const kern__sdpa_prob *p = f->p;
    int64_t per = p->B * p->Hkv * f->nsplit, outer = t / per, inner = t % per;
    int64_t NQ = KERN__SDPA_NQ;
    T->f = f;
    T->p = p;
    T->qb = p->causal ? f->nqb - 1 - outer : outer;
    T->b = inner / (p->Hkv * f->nsplit);
    T->hk = (inner / f->nsplit) % p->Hkv;
    T->sp = inner % f->nsplit;
    T->D16 = (p->D + 15) & ~(int64_t)15;
    T->D32 = (p->D + 31) & ~(int64_t)31;
    T->klo = INT64_MAX;
    T->khi = 0;
    T->native = p->bf16_native;
    T->native16 = f->rows_path && p->dt == KERN_BF16 && p->fn->dots16 != NULL;
    kern__sdpa_fscr_carve(p, (char *)kern__thread_scratch(f->ctx, thread), &T->sc);
    kern__sdpa_seq(p, T->b, &T->lq, &T->lk, &T->qbase, &T->kbase);
    T->R = T->lq * p->G;
    T->ks0 = T->sp * f->chunk;
    T->ks1 = T->ks0 + f->chunk < T->lk ? T->ks0 + f->chunk : T->lk;
    /* an empty k or v may have NULL data: no pointer arithmetic on it */
    T->kp = T->lk > 0 ? p->k + (size_t)kern__sdpa_off(p, p->ks, T->kbase, T->hk, 0) * p->es
                      : NULL;
    T->vp = T->lk > 0 && p->Dv > 0
                ? p->v + (size_t)kern__sdpa_off(p, p->vs, T->kbase, T->hk, 0) * p->es
                : NULL;
    T->krs = p->ks[2];
    T->vrs = p->vs[2];
    if (f->rows_path) {
        T->np = T->R > 0 ? 1 : 0;
        T->pan = 0;
    } else {
        int64_t tot = (T->R + NQ - 1) / NQ;
        T->pan = T->qb * p->qb;
        if (T->pan >= tot) return 0;
        T->np = tot - T->pan < p->qb ? tot - T->pan : p->qb;
    }
    return T->np > 0;
}

/* Lanes (query rows) of panel pi: R on the rows path, else up to NQ. */
static inline int64_t kern__sdpa_fwd_nr(const kern__sdpa_ftask *T, int64_t pi) {
    int64_t r0 = (T->pan + pi) * KERN__SDPA_NQ;
    if (T->f->rows_path) return T->R;
    return T->R - r0 < KERN__SDPA_NQ ? T->R - r0 : KERN__SDPA_NQ;
}

/* Packs panel pi's queries: bf16 pairs [D/2][NQ][2] (native), f32
 * [D][NQ], or on the rows path rows of D16 f32 / D32 bf16, zero-padded. */
static void kern__sdpa_fwd_pack_q(kern__sdpa_ftask *T, int64_t pi, int64_t nr) {
    const kern__sdpa_prob *p = T->p;
    const kern__sdpa_lane *ln = T->sc.ln + pi * KERN__SDPA_NQ;
    int64_t NQ = KERN__SDPA_NQ, D = p->D, r, d;
    if (T->f->rows_path) {
        for (r = 0; r < nr; r++) {
            const char *qr =
                p->q + (size_t)kern__sdpa_off(p, p->qs, T->qbase, ln[r].h, ln[r].i) * p->es;
            if (T->native16) { /* bf16 rows, zero-padded to D32 */
                uint16_t *dst = (uint16_t *)T->sc.qt + r * T->D32;
                memcpy(dst, qr, (size_t)D * 2);
                for (d = D; d < T->D32; d++) dst[d] = 0;
            } else {
                float *dst = T->sc.qt + r * T->D16;
                kern__sdpa_to_f32(T->f->ctx, qr, p->dt, dst, D);
                for (d = D; d < T->D16; d++) dst[d] = 0.0f;
            }
        }
        return;
    }
    {
        float *qt = T->sc.qt + pi * T->D16 * NQ, *row = T->sc.row;
        const uint16_t *rows[KERN__SDPA_NQ];
        for (r = 0; r < NQ; r++) {
            const char *qr = r < nr ? p->q + (size_t)kern__sdpa_off(p, p->qs, T->qbase, ln[r].h,
                                                                   ln[r].i) * p->es
                                    : NULL;
            if (T->native) {
                rows[r] = (const uint16_t *)(const void *)qr;
                continue;
            }
            if (qr) kern__sdpa_to_f32(T->f->ctx, qr, p->dt, row, D);
            else for (d = 0; d < D; d++) row[d] = 0.0f;
            for (d = 0; d < D; d++) qt[d * NQ + r] = row[d];
        }
        if (T->native) { /* [D/2][NQ][2], zero pairs to D32 / 2 for the tiles */
            p->fn->pairs(rows, D / 2, (uint16_t *)qt);
            if (p->fn->vpackt && T->D32 > D)
                memset((uint16_t *)qt + D * NQ, 0, (size_t)((T->D32 - D) * NQ) * 2);
        }
    }
}

/* Row of the resized relative-position table that query coordinate a and
 * key coordinate b read on one axis (HF SAM's get_rel_pos: a * sq - b * sk
 * + (k - 1) * sk in f32, truncated), clamped to the table. */
static inline int64_t kern__sdpa_rel_idx(int64_t a, int64_t b, float sq, float sk, int64_t k,
                                         int64_t n) {
    float x = (float)a * sq - (float)b * sk + (float)((double)(k - 1) * (double)sk);
    int64_t r = x > 0.0f ? (int64_t)x : 0;
    return r < n ? r : n - 1;
}

/* Step 2b (relative position): panel pi's bias terms in log2 units,
 * rh[kh][lane] = q_lane . Rh[idx(h(lane), kh)] and rw likewise: one
 * microkernel call per axis over the table rows the lanes reach, then a
 * gather. Lanes past nr get zeros. */
static void kern__sdpa_fwd_relpos(kern__sdpa_ftask *T, int64_t pi, int64_t nr) {
    const kern__sdpa_prob *p = T->p;
    const kern__sdpa_lane *ln = T->sc.ln + pi * KERN__SDPA_NQ;
    int64_t NQ = KERN__SDPA_NQ, D = p->D, r, d, ax, kx, a[KERN__SDPA_NQ];
    const float *qf;
    if (!T->f->rows_path && !T->native) {
        qf = T->sc.qt + pi * T->D16 * NQ; /* already f32 [D][NQ], zero lanes past nr */
    } else if (!T->f->rows_path) {
        /* bf16 panels: the packed pairs [D/2][NQ][2] (zero lanes past nr)
         * widened exactly, the low half of each pair being d even */
        const uint32_t *pr = (const uint32_t *)(const void *)(T->sc.qt + pi * T->D16 * NQ);
        float *dst = T->sc.qf;
        for (d = 0; d < D / 2; d++)
            for (r = 0; r < NQ; r++) {
                uint32_t w = pr[d * NQ + r], lo = w << 16, hi = w & 0xFFFF0000u;
                memcpy(dst + 2 * d * NQ + r, &lo, 4);
                memcpy(dst + (2 * d + 1) * NQ + r, &hi, 4);
            }
        qf = dst;
    } else {
        float *dst = T->sc.qf, *row = T->sc.row;
        for (r = 0; r < NQ; r++) {
            if (r < nr) {
                const char *qr =
                    p->q + (size_t)kern__sdpa_off(p, p->qs, T->qbase, ln[r].h, ln[r].i) * p->es;
                kern__sdpa_to_f32(T->f->ctx, qr, p->dt, row, D);
                for (d = 0; d < D; d++) dst[d * NQ + r] = row[d];
            } else {
                for (d = 0; d < D; d++) dst[d * NQ + r] = 0.0f;
            }
        }
        qf = dst;
    }
    for (ax = 0; ax < 2; ax++) {
        int64_t kq = ax ? p->rkw : p->rkh, n = ax ? p->rnw : p->rnh, lo, hi, amin = INT64_MAX,
                amax = -1;
        float sq = ax ? p->rsqw : p->rsqh, sk = ax ? p->rskw : p->rskh;
        const float *tab = ax ? p->rtw : p->rth;
        float *out = ax ? T->sc.rw + pi * p->rkw * NQ : T->sc.rh + pi * p->rkh * NQ;
        if (kq == 0) continue;
        for (r = 0; r < nr; r++) {
            a[r] = ax ? ln[r].i % p->rqw : ln[r].i / p->rqw;
            if (a[r] < amin) amin = a[r];
            if (a[r] > amax) amax = a[r];
        }
        if (amax < 0) {
            memset(out, 0, (size_t)(kq * NQ) * 4);
            continue;
        }
        /* the index grows with the query coordinate, falls with the key's */
        lo = kern__sdpa_rel_idx(amin, kq - 1, sq, sk, kq, n);
        hi = kern__sdpa_rel_idx(amax, 0, sq, sk, kq, n);
        p->fn->mk(hi - lo + 1, NQ, D, tab + lo * D, D, 1, qf, NQ, T->sc.rt, NQ, 0);
        if (sq == 1.0f && sk == 1.0f) { /* equal sides: row a - kx + kq - 1 */
            for (r = 0; r < nr; r++) {
                const float *src = T->sc.rt + (a[r] + kq - 1 - lo) * NQ + r;
                for (kx = 0; kx < kq; kx++) out[kx * NQ + r] = src[-kx * NQ] * KERN__SDPA_LOG2E;
            }
            for (; r < NQ; r++)
                for (kx = 0; kx < kq; kx++) out[kx * NQ + r] = 0.0f;
            continue;
        }
        for (kx = 0; kx < kq; kx++)
            for (r = 0; r < NQ; r++)
                out[kx * NQ + r] =
                    r < nr ? T->sc.rt[(kern__sdpa_rel_idx(a[r], kx, sq, sk, kq, n) - lo) * NQ + r] *
                                 KERN__SDPA_LOG2E
                           : 0.0f;
    }
}

/* Step 2: per panel, the lanes' visible key ranges (their union in
 * [klo, khi)), the softmax state and the packed queries. */
static void kern__sdpa_fwd_init(kern__sdpa_ftask *T) {
    const kern__sdpa_prob *p = T->p;
    int64_t NQ = KERN__SDPA_NQ, pi, r, Dv = p->Dv;
    for (pi = 0; pi < T->np; pi++) {
        kern__sdpa_lane *ln = T->sc.ln + pi * NQ;
        int64_t r0 = (T->pan + pi) * NQ, nr = T->R - r0 < NQ ? T->R - r0 : NQ, lo, hi;
        kern__sdpa_lanes(p, T->b, T->hk, r0, nr, T->lq, T->lk, ln, &lo, &hi);
        if (lo < T->ks0) lo = T->ks0;
        if (hi > T->ks1) hi = T->ks1;
        if (hi > lo) {
            if (lo < T->klo) T->klo = lo;
            if (hi > T->khi) T->khi = hi;
        }
        for (r = 0; r < NQ; r++) {
            T->sc.m[pi * NQ + r] = -INFINITY;
            T->sc.l[pi * NQ + r] = 0.0f;
        }
        if (T->f->rows_path) memset(T->sc.ot, 0, (size_t)(T->R * Dv) * 4);
        else memset(T->sc.ot + pi * Dv * NQ, 0, (size_t)(Dv * NQ) * 4);
        kern__sdpa_fwd_pack_q(T, pi, nr);
        if (p->relpos) kern__sdpa_fwd_relpos(T, pi, nr);
    }
}

/* K and V of block [j0, j0 + nk) in the form the chosen kernels read,
 * done once per block (for the first panel that needs it): f32 copies for
 * f16, and for bf16 without vdpbf16ps (the rows path reads K in any dtype
 * and converts only V); V bf16 pairs for the native bf16 kernels. */
static void kern__sdpa_fwd_ktile(const kern__sdpa_ftask *T, kern__sdpa_ktile *kt, int64_t j0,
                                 int64_t nk) {
    const kern__sdpa_prob *p = T->p;
    int64_t D = p->D, Dv = p->Dv, jj;
    int rows = T->f->rows_path;
    if (p->dt != KERN_F32 && !kt->converted && !kt->v16 &&
        (rows ? !T->native16 : !T->native)) {
        for (jj = 0; jj < nk; jj++) {
            if (!rows)
                kern__sdpa_to_f32(T->f->ctx, T->kp + (size_t)((j0 + jj) * T->krs) * p->es, p->dt,
                                  T->sc.kc + jj * D, D);
            if (Dv > 0)
                kern__sdpa_to_f32(T->f->ctx, T->vp + (size_t)((j0 + jj) * T->vrs) * p->es, p->dt,
                                  T->sc.vc + jj * Dv, Dv);
        }
        kt->kf = T->sc.kc;
        kt->vf = T->sc.vc;
        kt->kfs = D;
        kt->vfs = Dv;
        kt->converted = 1;
    }
    if ((T->native16 || (T->native && !rows)) && !kt->packed && Dv > 0) {
        kern__sdpa_vpack_fn pack = !rows && p->fn->vpackt ? p->fn->vpackt : p->fn->vpack;
        pack((const uint16_t *)T->vp + j0 * T->vrs, T->vrs, nk, Dv, T->sc.vp);
        kt->packed = 1;
    }
    if (T->native && !rows && p->fn->kcopy && !kt->k16) {
        /* K rows in place sit a power of two apart (heads x D) and alias
         * in L1; the panels of the task read this contiguous copy */
        uint16_t *k16 = (uint16_t *)(void *)T->sc.kc;
        p->fn->kcopy((const uint16_t *)T->kp + j0 * T->krs, T->krs, nk, D, T->D32, k16);
        kt->k16 = k16;
    }
}

/* Keys ahead of the one being scored whose K rows the rows path
 * prefetches (a chunk of 8 takes about the DRAM latency at D 128). */
#define KERN__SDPA_PFK 16
#if defined(__GNUC__) || defined(__clang__)
#define KERN__SDPA_PREFETCH(ptr, loc) __builtin_prefetch((const void *)(ptr), 0, (loc))
#else
#define KERN__SDPA_PREFETCH(ptr, loc) ((void)0)
#endif

/* Scores of panel pi against block j0: S^T[j][lane] (panels) or
 * S[row][j] (rows path). */
static void kern__sdpa_fwd_scores(const kern__sdpa_ftask *T, const kern__sdpa_ktile *kt,
                                  int64_t pi, int64_t j0, int64_t nk) {
    const kern__sdpa_prob *p = T->p;
    const kern__sdpa_fscr *sc = &T->sc;
    int64_t NQ = KERN__SDPA_NQ, D = p->D;
    if (T->f->rows_path) {
        /* 8 keys at a time, each chunk after the prefetch of the K rows
         * KERN__SDPA_PFK keys ahead (into L1) and of this chunk's V rows
         * (into L2, for the p.v after the block's scores): decode reads
         * each K and V row once, rows heads x D apart, each in a new page
         * where the hardware prefetchers start cold. */
        int64_t c0, kb = D * (int64_t)p->es, vb = p->Dv * (int64_t)p->es;
        int64_t ch = T->R > 1 ? 2 : 4;
        for (c0 = 0; c0 < nk; c0 += ch) {
            int64_t cn = nk - c0 < ch ? nk - c0 : ch, jj, b;
            for (jj = 0; jj < cn; jj++) {
                int64_t jk = j0 + c0 + jj + KERN__SDPA_PFK, jv = j0 + c0 + jj;
                if (jk < T->ks1)
                    for (b = 0; b < kb; b += 64) KERN__SDPA_PREFETCH(T->kp + jk * T->krs * p->es + b, 3);
                for (b = 0; b < vb; b += 64) KERN__SDPA_PREFETCH(T->vp + jv * T->vrs * p->es + b, 2);
            }
            if (T->native16)
                p->fn->dots16(cn, T->R, D, (const uint16_t *)sc->qt, T->D32,
                              (const uint16_t *)T->kp + (j0 + c0) * T->krs, T->krs, sc->s + c0,
                              KERN__SDPA_BK);
            else
                p->fn->dots(cn, T->R, D, sc->qt, T->D16, T->kp + (size_t)((j0 + c0) * T->krs) * p->es,
                            T->krs, p->dt, sc->s + c0, KERN__SDPA_BK);
        }
    } else if (kt->k16) { /* queries zero-padded to D32 as well */
        p->fn->mk16(nk, NQ, T->D32 / 2, kt->k16, T->D32, 2,
                    (const uint16_t *)(sc->qt + pi * T->D16 * NQ), NQ * 2, sc->s, NQ, 0);
    } else if (T->native) {
        p->fn->mk16(nk, NQ, D / 2, (const uint16_t *)T->kp + j0 * T->krs, T->krs, 2,
                    (const uint16_t *)(sc->qt + pi * T->D16 * NQ), NQ * 2, sc->s, NQ, 0);
    } else {
        p->fn->mk(nk, NQ, D, kt->kf, kt->kfs, 1, sc->qt + pi * T->D16 * NQ, NQ, sc->s, NQ, 0);
    }
}

/* The online softmax of panel pi's scores (masks, softcap and ranges
 * applied first unless the block is fully visible and plain), with the
 * accumulator rescaled when a lane's max grew. */
static void kern__sdpa_fwd_softmax(const kern__sdpa_ftask *T, int64_t pi, int64_t j0, int64_t nk,
                                   int64_t nr, int full) {
    const kern__sdpa_prob *p = T->p;
    const kern__sdpa_fscr *sc = &T->sc;
    int64_t NQ = KERN__SDPA_NQ, Dv = p->Dv, r, cc;
    float *m = sc->m + pi * NQ, *l = sc->l + pi * NQ;
    float c = p->scale * KERN__SDPA_LOG2E;
    if (!full || p->mask || p->softcap > 0) {
        /* blocks lie inside [ks0, ks1): only the lanes' ranges need applying */
        kern__sdpa_prepare(p, sc->s, nk, j0, sc->ln + pi * NQ, nr, sc->tmp, 0, T->f->rows_path);
        c = 1.0f;
    }
    if (p->relpos) { /* s = s * c + rh + rw (a masked -inf stays -inf) */
        const float *rh = sc->rh + pi * p->rkh * NQ, *rw = sc->rw + pi * p->rkw * NQ;
        if (T->f->rows_path) {
            int64_t jj;
            for (r = 0; r < T->R; r++)
                for (jj = 0; jj < nk; jj++) {
                    float *x = sc->s + r * KERN__SDPA_BK + jj;
                    *x = *x * c + (rh[((j0 + jj) / p->rkw) * NQ + r] +
                                   rw[((j0 + jj) % p->rkw) * NQ + r]);
                }
        } else {
            p->fn->relpos(sc->s, nk, c, rh, rw, j0 / p->rkw, j0 % p->rkw, p->rkw);
        }
        c = 1.0f;
    }
    if (T->f->rows_path) {
        if (p->fn->rstep(sc->s, KERN__SDPA_BK, T->R, nk, c, m, l, sc->alpha))
            for (r = 0; r < T->R; r++)
                if (sc->alpha[r] != 1.0f)
                    for (cc = 0; cc < Dv; cc++) sc->ot[r * Dv + cc] *= sc->alpha[r];
    } else if (p->fn->step(sc->s, nk, c, m, l, sc->alpha)) {
        p->fn->scale(sc->ot + pi * Dv * NQ, Dv, sc->alpha);
    }
}

/* O += P V for panel pi. */
static void kern__sdpa_fwd_pv(const kern__sdpa_ftask *T, const kern__sdpa_ktile *kt, int64_t pi,
                              int64_t nk) {
    const kern__sdpa_prob *p = T->p;
    const kern__sdpa_fscr *sc = &T->sc;
    int64_t NQ = KERN__SDPA_NQ, Dv = p->Dv, BK = KERN__SDPA_BK;
    if (T->f->rows_path) {
        if (T->native16) {
            p->fn->rows16(sc->s, BK, T->R, nk, sc->p2, BK);
            p->fn->mk16(T->R, Dv, (nk + 1) / 2, sc->p2, BK, 2, sc->vp, Dv * 2, sc->ot, Dv, 1);
        } else if (kt->v16) {
            p->fn->mkv16(T->R, Dv, nk, sc->s, BK, kt->v16, T->vrs, p->dt, sc->ot, Dv);
        } else {
            p->fn->mk(T->R, Dv, nk, sc->s, BK, 1, kt->vf, kt->vfs, sc->ot, Dv, 1);
        }
    } else if (T->native) {
        /* V^T rows (vpackt: pairs adjacent along a row) or V pairs */
        int vt = p->fn->vpackt != NULL;
        p->fn->p2(sc->s, nk, sc->p2);
        p->fn->mk16(Dv, NQ, (nk + 1) / 2, sc->vp, vt ? BK : 2, vt ? 2 : Dv * 2, sc->p2, NQ * 2,
                    sc->ot + pi * Dv * NQ, NQ, 1);
    } else {
        p->fn->mk(Dv, NQ, nk, kt->vf, 1, kt->vfs, sc->s, NQ, sc->ot + pi * Dv * NQ, NQ, 1);
    }
}

/* Step 3: key block [j0, j0 + nk) for every panel that sees part of it. */
static void kern__sdpa_fwd_block(kern__sdpa_ftask *T, int64_t j0, int64_t nk) {
    const kern__sdpa_prob *p = T->p;
    kern__sdpa_ktile kt;
    int64_t NQ = KERN__SDPA_NQ, pi;
    kt.kf = kt.vf = NULL;
    kt.kfs = T->krs;
    kt.vfs = T->vrs;
    kt.converted = kt.packed = 0;
    kt.k16 = NULL;
    kt.v16 = NULL;
    if (T->f->rows_path && !T->native16 && p->dt != KERN_F32 && p->fn->mkv16 && T->vp)
        kt.v16 = (const uint16_t *)(const void *)T->vp + j0 * T->vrs;
    if (p->dt == KERN_F32) {
        kt.kf = (const float *)T->kp + j0 * T->krs;
        kt.vf = T->vp ? (const float *)T->vp + j0 * T->vrs : NULL; /* NULL: Dv = 0 */
    }
    for (pi = 0; pi < T->np; pi++) {
        const kern__sdpa_lane *ln = T->sc.ln + pi * NQ;
        int64_t nr = kern__sdpa_fwd_nr(T, pi), r;
        int full = 1, any = 0;
        for (r = 0; r < nr; r++) {
            int64_t a = ln[r].lo > T->ks0 ? ln[r].lo : T->ks0;
            int64_t z = ln[r].hi < T->ks1 ? ln[r].hi : T->ks1;
            if (a < j0 + nk && z > j0) any = 1;
            if (!(a <= j0 && z >= j0 + nk)) full = 0;
        }
        if (!any) continue;
        kern__sdpa_fwd_ktile(T, &kt, j0, nk);
        kern__sdpa_fwd_scores(T, &kt, pi, j0, nk);
        kern__sdpa_fwd_softmax(T, pi, j0, nk, nr, full);
        if (p->dropout_p > 0)
            kern__sdpa_dropout(p, T->sc.s, nk, j0, T->sc.ln + pi * NQ, nr, T->f->rows_path);
        if (p->Dv > 0) kern__sdpa_fwd_pv(T, &kt, pi, nk);
    }
}

/* A finished panel straight into the output: O^T scaled in place by each
 * lane's factor (the multiply kern__sdpa_emit does, vectorized), then
 * column r copied to query r's output row (opanel: 16 x 16 transposes and
 * the dtype conversion; else f32 only, column by column). */
static void kern__sdpa_fwd_emit_panel(const kern__sdpa_ftask *T, int64_t pi, int64_t nr) {
    const kern__sdpa_prob *p = T->p;
    const kern__sdpa_fscr *sc = &T->sc;
    const kern__sdpa_lane *ln = sc->ln + pi * KERN__SDPA_NQ;
    int64_t NQ = KERN__SDPA_NQ, Dv = p->Dv, r, c;
    float *ot = sc->ot + pi * Dv * NQ, *inv = sc->alpha;
    for (r = 0; r < nr; r++) {
        float lse = kern__sdpa_row_inv(p, sc->m[pi * NQ + r], sc->l[pi * NQ + r], &inv[r]);
        if (p->lse) *kern__sdpa_lse_ptr(p, T->qbase, ln[r].h, ln[r].i) = lse;
    }
    for (; r < NQ; r++) inv[r] = 0.0f; /* lanes past the last query */
    p->fn->scale(ot, Dv, inv);
    if (p->fn->opanel) { /* transposed in registers, any float dtype */
        void *dst[KERN__SDPA_NQ];
        for (r = 0; r < nr; r++)
            dst[r] = (void *)(p->o + (size_t)kern__sdpa_off(p, p->os, T->qbase, ln[r].h, ln[r].i) *
                                         p->es);
        p->fn->opanel(ot, Dv, nr, dst, p->dt);
        for (r = 0; r < nr; r++)
            if (sc->l[pi * NQ + r] == 0.0f) memset(dst[r], 0, (size_t)(Dv * p->es));
        return;
    }
    for (r = 0; r < nr; r++) {
        float *o = (float *)(void *)(p->o + (size_t)kern__sdpa_off(p, p->os, T->qbase, ln[r].h,
                                                                   ln[r].i) * 4);
        if (sc->l[pi * NQ + r] == 0.0f)
            for (c = 0; c < Dv; c++) o[c] = 0.0f;
        else
            for (c = 0; c < Dv; c++) o[c] = ot[c * NQ + r];
    }
}

/* Step 4: writes the finished rows (or this split's partial results). */
static void kern__sdpa_fwd_finish(const kern__sdpa_ftask *T) {
    const kern__sdpa_fwd *f = T->f;
    const kern__sdpa_fscr *sc = &T->sc;
    int64_t NQ = KERN__SDPA_NQ, Dv = T->p->Dv, pi, r;
    for (pi = 0; pi < T->np; pi++) {
        const kern__sdpa_lane *ln = sc->ln + pi * NQ;
        int64_t nr = kern__sdpa_fwd_nr(T, pi);
        if (f->nsplit == 1 && !f->rows_path && (T->p->dt == KERN_F32 || T->p->fn->opanel) &&
            Dv > 0) {
            kern__sdpa_fwd_emit_panel(T, pi, nr);
            continue;
        }
        for (r = 0; r < nr; r++) {
            const float *acc = f->rows_path ? sc->ot + r * Dv : sc->ot + pi * Dv * NQ + r;
            int64_t cs = f->rows_path ? 1 : NQ;
            float m = sc->m[pi * NQ + r], l = sc->l[pi * NQ + r];
            if (f->nsplit > 1)
                kern__sdpa_emit_part(f, T->b, T->hk, T->qb, T->sp, (f->rows_path ? 0 : pi * NQ) + r,
                                     acc, cs, m, l);
            else
                kern__sdpa_emit(f, T->qbase, ln[r].h, ln[r].i, acc, cs, m, l, sc->row);
        }
    }
}

/* One forward task: locate, init (ranges, state, packed queries), the key
 * blocks in order, finish. */
static void kern__sdpa_fwd_task(void *arg, int64_t t, int thread) {
    kern__sdpa_ftask T;
    int64_t j0, BK = ((const kern__sdpa_fwd *)arg)->p->bk;
    if (!kern__sdpa_fwd_locate(&T, (const kern__sdpa_fwd *)arg, t, thread)) return;
    kern__sdpa_fwd_init(&T);
    if (T.p->fn->tiles_on) T.p->fn->tiles_on();
    for (j0 = T.klo < T.khi ? (T.klo / BK) * BK : 0; j0 < T.khi; j0 += BK)
        kern__sdpa_fwd_block(&T, j0, T.khi - j0 < BK ? T.khi - j0 : BK);
    if (T.p->fn->tiles_off) T.p->fn->tiles_off();
    kern__sdpa_fwd_finish(&T);
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
    r0 = f->rows_path ? 0 : qb * p->qb * KERN__SDPA_NQ;
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
            float w = o[Dv] == -INFINITY ? 0.0f : kern__s_exp2_neg(o[Dv] - M);
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

/* The operands of one entry point, as kern__sdpa_setup's steps read them
 * (bwd tensors NULL in forward, cu_seqlens NULL for dense). */
typedef struct kern__sdpa_args {
    const char *op;
    int varlen, bwd;
    const kern_tensor *q, *k, *v, *out, *dout, *lse, *dq, *dk, *dv, *cuq, *cuk;
    int64_t maxq, maxk;
    const kern_sdpa_params *pp;
} kern__sdpa_args;

/* Step 1: every tensor present, the params in range, one float dtype, the
 * right number of dims and unit last-dim strides. */
static kern_status kern__sdpa_check_operands(const kern__sdpa_args *a) {
    kern_status st;
    const char *op = a->op;
    const kern_tensor *ts[8];
    const char *nm[8] = {"q", "k", "v", "out", "dout", "dq", "dk", "dv"};
    int nd = a->varlen ? 3 : 4, n = a->bwd ? 8 : 4, i;
    if ((st = kern__sdpa_need(a->q, op, "q")) || (st = kern__sdpa_need(a->k, op, "k")) ||
        (st = kern__sdpa_need(a->v, op, "v")) || (st = kern__sdpa_need(a->out, op, "out")))
        return st;
    if (a->bwd) {
        if ((st = kern__sdpa_need(a->dout, op, "dout")) ||
            (st = kern__sdpa_need(a->lse, op, "lse")) || (st = kern__sdpa_need(a->dq, op, "dq")) ||
            (st = kern__sdpa_need(a->dk, op, "dk")) || (st = kern__sdpa_need(a->dv, op, "dv")))
            return st;
    }
    if ((st = kern__sdpa_check_params(a->pp, op))) return st;
    ts[0] = a->q; ts[1] = a->k; ts[2] = a->v; ts[3] = a->out;
    ts[4] = a->dout; ts[5] = a->dq; ts[6] = a->dk; ts[7] = a->dv;
    if (!kern_dtype_is_float(a->q->dtype))
        return kern__err(KERN_ERR_DTYPE, "%s: q.dtype=%s, want f32, bf16 or f16", op,
                         kern_dtype_name(a->q->dtype));
    for (i = 0; i < n; i++) {
        if (ts[i]->dtype != a->q->dtype)
            return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s but q.dtype=%s", op, nm[i],
                             kern_dtype_name(ts[i]->dtype), kern_dtype_name(a->q->dtype));
        if (ts[i]->ndim != nd)
            return kern__err(KERN_ERR_SHAPE, "%s: %s has %d dims, want %d %s", op, nm[i],
                             ts[i]->ndim, nd, a->varlen ? "[T,H,D]" : "[B,H,L,D]");
    }
    for (i = 0; i < n; i++)
        if ((st = kern__sdpa_unit(ts[i], op, nm[i]))) return st;
    return KERN_OK;
}

/* Step 2 (varlen): B, H, D, Dv, the max lengths and the longest actual
 * sequences from q, k, v, out and cu_seqlens. */
static kern_status kern__sdpa_shapes_varlen(kern__sdpa_prob *P, const kern__sdpa_args *a) {
    kern_status st;
    const char *op = a->op;
    const kern_tensor *q = a->q, *k = a->k, *v = a->v;
    int64_t want[3];
    P->Hq = q->shape[1];
    P->Hkv = k->shape[1];
    P->D = q->shape[2];
    P->Dv = v->shape[2];
    if (a->maxq < 0 || a->maxk < 0)
        return kern__err(KERN_ERR_ARG, "%s: max_seqlen_q=%lld max_seqlen_k=%lld must be >= 0",
                         op, (long long)a->maxq, (long long)a->maxk);
    P->Lq = a->maxq;
    P->Lk = a->maxk;
    if (k->shape[0] != v->shape[0])
        return kern__err(KERN_ERR_SHAPE, "%s: k.shape[0]=%lld but v.shape[0]=%lld", op,
                         (long long)k->shape[0], (long long)v->shape[0]);
    if (k->shape[1] != v->shape[1])
        return kern__err(KERN_ERR_SHAPE, "%s: k.shape[1]=%lld but v.shape[1]=%lld", op,
                         (long long)k->shape[1], (long long)v->shape[1]);
    if (k->shape[2] != P->D)
        return kern__err(KERN_ERR_SHAPE, "%s: q.shape[2]=%lld but k.shape[2]=%lld", op,
                         (long long)P->D, (long long)k->shape[2]);
    want[0] = q->shape[0]; want[1] = P->Hq; want[2] = P->Dv;
    if ((st = kern__sdpa_shape_is(a->out, 3, want, op, "out", "[Tq,Hq,Dv]"))) return st;
    if ((st = kern__sdpa_check_cu(a->cuq, -1, q->shape[0], a->maxq, op, "cu_seqlens_q",
                                  &P->Lq_run)))
        return st;
    P->B = a->cuq->shape[0] - 1;
    if ((st = kern__sdpa_check_cu(a->cuk, P->B + 1, k->shape[0], a->maxk, op, "cu_seqlens_k",
                                  &P->Lk_run)))
        return st;
    if (a->pp->attn_mask)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: attn_mask is not supported with varlen", op);
    if (a->pp->k_lens)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: k_lens is not supported with varlen (use cu_seqlens_k)", op);
    return KERN_OK;
}

/* Step 2 (dense): B, H, L, D, Dv from q, k, v, out. */
static kern_status kern__sdpa_shapes_dense(kern__sdpa_prob *P, const kern__sdpa_args *a) {
    const char *op = a->op;
    const kern_tensor *q = a->q, *k = a->k, *v = a->v;
    int64_t want[4];
    P->B = q->shape[0];
    P->Hq = q->shape[1];
    P->Lq = q->shape[2];
    P->D = q->shape[3];
    P->Hkv = k->shape[1];
    P->Lk = k->shape[2];
    P->Dv = v->shape[3];
    P->Lq_run = P->Lq;
    P->Lk_run = P->Lk;
    if (k->shape[0] != P->B || v->shape[0] != P->B)
        return kern__err(KERN_ERR_SHAPE, "%s: batch mismatch: q.shape[0]=%lld k.shape[0]=%lld "
                         "v.shape[0]=%lld", op, (long long)P->B, (long long)k->shape[0],
                         (long long)v->shape[0]);
    if (v->shape[1] != P->Hkv)
        return kern__err(KERN_ERR_SHAPE, "%s: k.shape[1]=%lld but v.shape[1]=%lld", op,
                         (long long)P->Hkv, (long long)v->shape[1]);
    if (v->shape[2] != P->Lk)
        return kern__err(KERN_ERR_SHAPE, "%s: k.shape[2]=%lld but v.shape[2]=%lld", op,
                         (long long)P->Lk, (long long)v->shape[2]);
    if (k->shape[3] != P->D)
        return kern__err(KERN_ERR_SHAPE, "%s: q.shape[3]=%lld but k.shape[3]=%lld", op,
                         (long long)P->D, (long long)k->shape[3]);
    want[0] = P->B; want[1] = P->Hq; want[2] = P->Lq; want[3] = P->Dv;
    return kern__sdpa_shape_is(a->out, 4, want, op, "out", "[B,Hq,Lq,Dv]");
}

/* Step 3: head dims and groups; the backward tensors' shapes. */
static kern_status kern__sdpa_check_heads(const kern__sdpa_prob *P, const kern__sdpa_args *a) {
    kern_status st;
    const char *op = a->op;
    int nd = a->varlen ? 3 : 4;
    if (P->D < 1)
        return kern__err(KERN_ERR_SHAPE, "%s: head dim q.shape[%d]=%lld must be >= 1", op, nd - 1,
                         (long long)P->D);
    if (P->Hkv == 0 ? P->Hq != 0 : P->Hq % P->Hkv != 0)
        return kern__err(KERN_ERR_SHAPE, "%s: Hq=%lld is not a multiple of Hkv=%lld", op,
                         (long long)P->Hq, (long long)P->Hkv);
    if (P->Hq != P->Hkv && !a->pp->enable_gqa)
        return kern__err(KERN_ERR_SHAPE, "%s: Hq=%lld != Hkv=%lld needs enable_gqa", op,
                         (long long)P->Hq, (long long)P->Hkv);
    if (a->bwd) {
        if ((st = kern__sdpa_shape_is(a->dout, nd, a->out->shape, op, "dout", "out's shape")) ||
            (st = kern__sdpa_shape_is(a->dq, nd, a->q->shape, op, "dq", "q's shape")) ||
            (st = kern__sdpa_shape_is(a->dk, nd, a->k->shape, op, "dk", "k's shape")) ||
            (st = kern__sdpa_shape_is(a->dv, nd, a->v->shape, op, "dv", "v's shape")))
            return st;
    }
    return KERN_OK;
}

/* Step 4: the optional lse (forward output, backward input). */
static kern_status kern__sdpa_setup_lse(kern__sdpa_prob *P, const kern__sdpa_args *a) {
    kern_status st;
    const char *op = a->op;
    const kern_tensor *L = a->bwd ? a->lse : a->pp->lse;
    int64_t want[3];
    if (!L) return KERN_OK;
    if ((st = kern_tensor_check(L, op, "lse"))) return st;
    if (L->dtype != KERN_F32)
        return kern__err(KERN_ERR_DTYPE, "%s: lse.dtype=%s, want f32", op,
                         kern_dtype_name(L->dtype));
    if (a->varlen) {
        want[0] = P->Hq; want[1] = a->q->shape[0];
        if ((st = kern__sdpa_shape_is(L, 2, want, op, "lse", "[Hq,Tq]"))) return st;
        P->lses[1] = kern__sdpa_st(L, 0);
        P->lses[2] = kern__sdpa_st(L, 1);
    } else {
        want[0] = P->B; want[1] = P->Hq; want[2] = P->Lq;
        if ((st = kern__sdpa_shape_is(L, 3, want, op, "lse", "[B,Hq,Lq]"))) return st;
        P->lses[0] = kern__sdpa_st(L, 0);
        P->lses[1] = kern__sdpa_st(L, 1);
        P->lses[2] = kern__sdpa_st(L, 2);
    }
    P->lse = (float *)L->data;
    return KERN_OK;
}

/* Step 5: the attention mask (broadcast view) and k_lens. */
static kern_status kern__sdpa_setup_masks(kern__sdpa_prob *P, const kern__sdpa_args *a) {
    kern_status st;
    const char *op = a->op;
    int i;
    if (a->pp->attn_mask) {
        const kern_tensor *m = a->pp->attn_mask;
        int64_t full[4];
        if ((st = kern_tensor_check(m, op, "attn_mask"))) return st;
        if (m->dtype != KERN_BOOL && !kern_dtype_is_float(m->dtype))
            return kern__err(KERN_ERR_DTYPE, "%s: attn_mask.dtype=%s, want bool, f32, f16 or bf16",
                             op, kern_dtype_name(m->dtype));
        full[0] = P->B; full[1] = P->Hq; full[2] = P->Lq; full[3] = P->Lk;
        if (m->ndim > 4)
            return kern__err(KERN_ERR_SHAPE, "%s: attn_mask has %d dims, cannot broadcast to "
                             "[B,Hq,Lq,Lk]", op, m->ndim);
        if ((st = kern_tensor_broadcast_to(m, 4, full, &P->maskv, op, "attn_mask"))) return st;
        for (i = 0; i < 4; i++) P->maskv.stride[i] = kern__sdpa_st(&P->maskv, i);
        P->mask = &P->maskv;
    }
    if (a->pp->k_lens) {
        const kern_tensor *kl = a->pp->k_lens;
        int64_t b;
        if ((st = kern_tensor_check(kl, op, "k_lens"))) return st;
        if (kl->dtype != KERN_I32 && kl->dtype != KERN_I64)
            return kern__err(KERN_ERR_DTYPE, "%s: k_lens.dtype=%s, want i32 or i64", op,
                             kern_dtype_name(kl->dtype));
        if (kl->ndim != 1 || kl->shape[0] != P->B)
            return kern__err(KERN_ERR_SHAPE, "%s: k_lens must be [B]=[%lld] (ndim=%d, shape[0]=%lld)",
                             op, (long long)P->B, kl->ndim,
                             (long long)(kl->ndim ? kl->shape[0] : 0));
        for (b = 0; b < P->B; b++) {
            int64_t x = kern__sdpa_geti(kl->data, kl->dtype, b * kl->stride[0]);
            if (x < 0 || x > P->Lk)
                return kern__err(KERN_ERR_INDEX, "%s: k_lens[%lld]=%lld is outside [0, Lk=%lld]",
                                 op, (long long)b, (long long)x, (long long)P->Lk);
        }
        P->klens = kl->data;
        P->klens_dt = kl->dtype;
        P->klens_s = kern__sdpa_st(kl, 0);
    }
    return KERN_OK;
}

/* Whether a x b == n exactly (all >= 0, no overflow). */
static int kern__sdpa_grid_is(int64_t a, int64_t b, int64_t n) {
    if (a < 0 || b < 0) return 0;
    if (a == 0 || b == 0) return n == 0;
    return a <= n / b && a * b == n;
}

/* Step 5b: the decomposed relative position tables and grids (forward,
 * dense only). Table lengths: 2 * max(query, key) - 1 on each axis, or any
 * length >= 1 with rel_pos_interpolate (resized in the forward). */
static kern_status kern__sdpa_setup_relpos(kern__sdpa_prob *P, const kern__sdpa_args *a) {
    kern_status st;
    const kern_sdpa_params *pp = a->pp;
    const char *op = a->op;
    const kern_tensor *t[2];
    const char *nm[2] = {"rel_pos_h", "rel_pos_w"};
    int64_t n[2], x;
    int i;
    if (!pp->rel_pos_h && !pp->rel_pos_w) return KERN_OK;
    if (!pp->rel_pos_h || !pp->rel_pos_w)
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL but %s is given (both or neither)", op,
                         pp->rel_pos_h ? "rel_pos_w" : "rel_pos_h",
                         pp->rel_pos_h ? "rel_pos_h" : "rel_pos_w");
    if (a->varlen || a->bwd)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: rel_pos_h/rel_pos_w are supported by the "
                         "dense forward only (kern_sdpa)", op);
    if (!kern__sdpa_grid_is(pp->rel_q_h, pp->rel_q_w, P->Lq))
        return kern__err(KERN_ERR_SHAPE, "%s: query grid rel_q_h x rel_q_w = %lld x %lld does "
                         "not match q's Lq=%lld", op, (long long)pp->rel_q_h,
                         (long long)pp->rel_q_w, (long long)P->Lq);
    if (!kern__sdpa_grid_is(pp->rel_k_h, pp->rel_k_w, P->Lk))
        return kern__err(KERN_ERR_SHAPE, "%s: key grid rel_k_h x rel_k_w = %lld x %lld does "
                         "not match k's Lk=%lld", op, (long long)pp->rel_k_h,
                         (long long)pp->rel_k_w, (long long)P->Lk);
    t[0] = pp->rel_pos_h;
    t[1] = pp->rel_pos_w;
    n[0] = 2 * (pp->rel_q_h > pp->rel_k_h ? pp->rel_q_h : pp->rel_k_h) - 1;
    n[1] = 2 * (pp->rel_q_w > pp->rel_k_w ? pp->rel_q_w : pp->rel_k_w) - 1;
    for (i = 0; i < 2; i++) {
        if ((st = kern_tensor_check(t[i], op, nm[i]))) return st;
        if (!kern_dtype_is_float(t[i]->dtype))
            return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s, want f32, bf16 or f16", op, nm[i],
                             kern_dtype_name(t[i]->dtype));
        if (t[i]->ndim != 2 || t[i]->shape[1] != P->D)
            return kern__err(KERN_ERR_SHAPE, "%s: %s must be [N, D=%lld] (ndim=%d, shape[%d]=%lld)",
                             op, nm[i], (long long)P->D, t[i]->ndim, t[i]->ndim == 2 ? 1 : 0,
                             (long long)(t[i]->ndim == 2 ? t[i]->shape[1]
                                                        : t[i]->ndim ? t[i]->shape[0] : 0));
        x = t[i]->shape[0];
        if (n[i] >= 1 && (pp->rel_pos_interpolate ? x < 1 : x != n[i]))
            return kern__err(KERN_ERR_SHAPE,
                             pp->rel_pos_interpolate
                                 ? "%s: %s has %lld rows; interpolation needs at least 1 (%lld)"
                                 : "%s: %s has %lld rows, want 2*max(query, key)-1 = %lld on "
                                   "this grid (or set rel_pos_interpolate)",
                             op, nm[i], (long long)x, (long long)n[i]);
    }
    P->relpos = 1;
    P->rqh = pp->rel_q_h;
    P->rqw = pp->rel_q_w;
    P->rkh = pp->rel_k_h;
    P->rkw = pp->rel_k_w;
    P->rnh = n[0] > 0 ? n[0] : 0;
    P->rnw = n[1] > 0 ? n[1] : 0;
    /* HF's coordinate scales: the shorter side is stretched to the longer */
    P->rsqh = P->rkh > P->rqh && P->rqh > 0 ? (float)((double)P->rkh / (double)P->rqh) : 1.0f;
    P->rskh = P->rqh > P->rkh && P->rkh > 0 ? (float)((double)P->rqh / (double)P->rkh) : 1.0f;
    P->rsqw = P->rkw > P->rqw && P->rqw > 0 ? (float)((double)P->rkw / (double)P->rqw) : 1.0f;
    P->rskw = P->rqw > P->rkw && P->rkw > 0 ? (float)((double)P->rqw / (double)P->rkw) : 1.0f;
    P->rph = t[0];
    P->rpw = t[1];
    return KERN_OK;
}

/* Step 6: outputs with distinct elements, overlapping no input and no
 * other output. */
static kern_status kern__sdpa_check_alias(const kern__sdpa_args *a) {
    const kern_tensor *in[10], *ou[4];
    const char *inm[10], *onm[4], *op = a->op;
    const kern_sdpa_params *pp = a->pp;
    int ni = 0, no = 0, x, c;
    in[ni] = a->q; inm[ni++] = "q";
    in[ni] = a->k; inm[ni++] = "k";
    in[ni] = a->v; inm[ni++] = "v";
    if (pp->attn_mask) { in[ni] = pp->attn_mask; inm[ni++] = "attn_mask"; }
    if (pp->k_lens) { in[ni] = pp->k_lens; inm[ni++] = "k_lens"; }
    if (pp->rel_pos_h) { in[ni] = pp->rel_pos_h; inm[ni++] = "rel_pos_h"; }
    if (pp->rel_pos_w) { in[ni] = pp->rel_pos_w; inm[ni++] = "rel_pos_w"; }
    if (a->cuq) { in[ni] = a->cuq; inm[ni++] = "cu_seqlens_q"; }
    if (a->cuk) { in[ni] = a->cuk; inm[ni++] = "cu_seqlens_k"; }
    if (a->bwd) {
        in[ni] = a->out; inm[ni++] = "out";
        ou[no] = a->dq; onm[no++] = "dq";
        ou[no] = a->dk; onm[no++] = "dk";
        ou[no] = a->dv; onm[no++] = "dv";
    } else {
        ou[no] = a->out; onm[no++] = "out";
        if (pp->lse) { ou[no] = pp->lse; onm[no++] = "lse"; }
    }
    for (x = 0; x < no; x++) {
        if (kern__tensor_self_overlap(ou[x]))
            return kern__err(KERN_ERR_LAYOUT,
                             "%s: %s has overlapping elements (a zero or too small stride); an "
                             "output needs distinct elements",
                             op, onm[x]);
        for (c = 0; c < ni; c++)
            if (kern_tensors_overlap(ou[x], in[c]))
                return kern__err(KERN_ERR_ARG, "%s: %s overlaps input %s", op, onm[x], inm[c]);
        if (a->bwd && (kern_tensors_overlap(ou[x], a->dout) || kern_tensors_overlap(ou[x], a->lse)))
            return kern__err(KERN_ERR_ARG, "%s: %s overlaps input %s", op, onm[x],
                             kern_tensors_overlap(ou[x], a->dout) ? "dout" : "lse");
        for (c = 0; c < x; c++)
            if (kern_tensors_overlap(ou[x], ou[c]))
                return kern__err(KERN_ERR_ARG, "%s: outputs %s and %s overlap", op, onm[c],
                                 onm[x]);
    }
    return KERN_OK;
}

/* Step 7: data pointers, strides and the resolved options. */
static kern_status kern__sdpa_fill(kern__sdpa_prob *P, const kern__sdpa_args *a) {
    const kern_sdpa_params *pp = a->pp;
    int i;
    P->G = P->Hkv ? P->Hq / P->Hkv : 1;
    P->dt = a->q->dtype;
    P->es = kern_dtype_size(a->q->dtype);
    P->q = (const char *)a->q->data;
    P->k = (const char *)a->k->data;
    P->v = (const char *)a->v->data;
    P->o = (const char *)a->out->data;
    for (i = 0; i < 3; i++) {
        /* [b, h, l] strides; varlen: [unused, h, token] */
        int d = a->varlen ? (i == 0 ? -1 : i == 1 ? 1 : 0) : i;
        P->qs[i] = kern__sdpa_st(a->q, d);
        P->ks[i] = kern__sdpa_st(a->k, d);
        P->vs[i] = kern__sdpa_st(a->v, d);
        P->os[i] = kern__sdpa_st(a->out, d);
        if (a->bwd) {
            P->ds[i] = kern__sdpa_st(a->dout, d);
            P->dqs[i] = kern__sdpa_st(a->dq, d);
            P->dks[i] = kern__sdpa_st(a->dk, d);
            P->dvs[i] = kern__sdpa_st(a->dv, d);
        }
    }
    if (a->bwd) {
        P->dout = (const char *)a->dout->data;
        P->dq = (char *)a->dq->data;
        P->dk = (char *)a->dk->data;
        P->dv = (char *)a->dv->data;
    }
    P->varlen = a->varlen;
    if (a->varlen) {
        P->cuq = a->cuq->data;
        P->cuk = a->cuk->data;
        P->cuq_dt = a->cuq->dtype;
        P->cuk_dt = a->cuk->dtype;
        /* cu_seqlens are validated contiguous-agnostic: read via stride */
        if (a->cuq->stride[0] != 1 || a->cuk->stride[0] != 1)
            return kern__err(KERN_ERR_LAYOUT, "%s: cu_seqlens_q/k must be contiguous (strides %lld, %lld)",
                             a->op, (long long)a->cuq->stride[0], (long long)a->cuk->stride[0]);
    }
    P->scale = pp->scale_set || pp->scale != 0.0f ? pp->scale : 1.0f / sqrtf((float)P->D);
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
    return KERN_OK;
}

/* Common checks and problem setup, in the steps above (errors in this
 * order). bwd tensors may be NULL in forward, cu_seqlens for dense. */
static kern_status kern__sdpa_setup(kern__sdpa_prob *P, const char *op, int varlen, int bwd,
                                    const kern_tensor *q, const kern_tensor *k,
                                    const kern_tensor *v, const kern_tensor *out,
                                    const kern_tensor *dout, const kern_tensor *lse,
                                    const kern_tensor *dq, const kern_tensor *dk,
                                    const kern_tensor *dv, const kern_tensor *cuq,
                                    const kern_tensor *cuk, int64_t maxq, int64_t maxk,
                                    const kern_sdpa_params *pp) {
    kern_status st;
    kern__sdpa_args a;
    a.op = op; a.varlen = varlen; a.bwd = bwd;
    a.q = q; a.k = k; a.v = v; a.out = out;
    a.dout = dout; a.lse = lse; a.dq = dq; a.dk = dk; a.dv = dv;
    a.cuq = cuq; a.cuk = cuk; a.maxq = maxq; a.maxk = maxk; a.pp = pp;
    memset(P, 0, sizeof *P);
    if ((st = kern__sdpa_check_operands(&a))) return st;
    st = varlen ? kern__sdpa_shapes_varlen(P, &a) : kern__sdpa_shapes_dense(P, &a);
    if (st || (st = kern__sdpa_check_heads(P, &a)) || (st = kern__sdpa_setup_lse(P, &a)) ||
        (st = kern__sdpa_setup_masks(P, &a)) || (st = kern__sdpa_setup_relpos(P, &a)) ||
        (st = kern__sdpa_check_alias(&a)))
        return st;
    return kern__sdpa_fill(P, &a);
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
    P->fn = kern__sdpa_fns_for(kern_ctx_isa(ctx), kern_ctx_uarch(ctx));
    P->bf16_native = P->dt == KERN_BF16 && P->fn->mk16 && (P->D % 2) == 0;
    f.p = P;
    f.ctx = ctx;
    f.rows_path = R < KERN__SDPA_ROWS_MAX;
    P->qb = (int64_t)P->es * P->Lk_run * (P->D + P->Dv) >= KERN__SDPA_QB_BYTES
                ? KERN__SDPA_QB_MAX
                : KERN__SDPA_QB;
    /* tiles: the per-block packing (V^T, K copy) is a larger share of a
     * panel's work, so 8 panels share it when that still leaves tasks */
    if (P->bf16_native && P->fn->tiles_on &&
        P->B * P->Hkv * ((R + KERN__SDPA_QB_MAX * KERN__SDPA_NQ - 1) /
                         (KERN__SDPA_QB_MAX * KERN__SDPA_NQ)) >= 8)
        P->qb = KERN__SDPA_QB_MAX;
    /* tiles: 128-key blocks where they measured faster (D >= 128, the
     * rel-pos bias); a plain D 64 problem ran 4-12 % slower with them */
    P->bk = P->bf16_native && P->fn->tiles_on && (P->D >= 128 || P->relpos) ? KERN__SDPA_BK
                                                                             : KERN__SDPA_BK_VEC;
    if (f.rows_path) {
        f.nqb = 1;
        f.rows_cap = R;
    } else {
        f.nqb = (R + P->qb * KERN__SDPA_NQ - 1) / (P->qb * KERN__SDPA_NQ);
        f.rows_cap = P->qb * KERN__SDPA_NQ;
    }
    base = P->B * P->Hkv * f.nqb;
    nkb = (P->Lk_run + P->bk - 1) / P->bk;
    f.nsplit = 1;
    if (base < KERN__SDPA_SPLIT_TASKS && P->Lk_run >= 2 * KERN__SDPA_SPLIT_MIN_KEYS) {
        int64_t want = (KERN__SDPA_SPLIT_TASKS + base - 1) / base;
        int64_t maxs = P->Lk_run / KERN__SDPA_SPLIT_MIN_KEYS;
        f.nsplit = want < maxs ? want : maxs;
        if (f.nsplit < 1) f.nsplit = 1;
    }
    f.chunk = ((nkb + f.nsplit - 1) / f.nsplit) * P->bk;
    if (f.chunk == 0) f.chunk = P->bk;
    f.ntasks = base * f.nsplit;
    scr = kern__sdpa_fscr_carve(P, NULL, &sc);
    if (f.rows_path) {
        /* rows path: q rows [R][D16] and O [R][Dv] fit in the panel areas */
    }
    if ((size_t)(2 * P->Dv + 64) * 4 > scr) scr = (size_t)(2 * P->Dv + 64) * 4;
    *thread = scr;
    if (f.nsplit > 1) *shared = (size_t)(base * f.nsplit * f.rows_cap * (P->Dv + 2)) * 4;
    /* the resized f32 relative-position tables follow the partials */
    if (P->relpos) *shared = ((*shared + 63) & ~(size_t)63) + (size_t)((P->rnh + P->rnw) * P->D) * 4;
    *fp = f;
    return 1;
}

/* A relative-position table [in, D] (any float dtype, any strides) as f32
 * [n, D]: copied when in = n, else resized linearly along its length as
 * torch's F.interpolate(mode="linear", align_corners=False), in f32. */
static void kern__sdpa_rel_resize(const kern_tensor *t, int64_t n, int64_t D, float *dst) {
    int64_t in = t->shape[0], r, d, s0 = t->stride[0], s1 = t->stride[1];
    float sc = (float)in / (float)n;
    for (r = 0; r < n; r++) {
        int64_t i0 = r, i1 = r;
        float l0 = 1.0f, l1 = 0.0f;
        if (in != n) {
            float src = sc * ((float)r + 0.5f) - 0.5f;
            if (src < 0.0f) src = 0.0f;
            i0 = (int64_t)src;
            if (i0 > in - 1) i0 = in - 1;
            l1 = src - (float)i0;
            if (l1 < 0.0f) l1 = 0.0f;
            if (l1 > 1.0f) l1 = 1.0f;
            l0 = 1.0f - l1;
            i1 = i0 + (i0 < in - 1 ? 1 : 0);
        }
        for (d = 0; d < D; d++) {
            float x0 = kern__sdpa_ld(t->data, t->dtype, i0 * s0 + d * s1);
            float x1 = kern__sdpa_ld(t->data, t->dtype, i1 * s0 + d * s1);
            dst[r * D + d] = in == n ? x0 : l0 * x0 + l1 * x1;
        }
    }
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
    if (shared > 0) {
        char *ws = (char *)kern__workspace(ctx, shared);
        if (!ws)
            return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes of workspace", op,
                             shared);
        if (f.nsplit > 1) f.part = (float *)ws;
        if (P->relpos) {
            size_t off = f.nsplit > 1 ? (size_t)(f.ntasks * f.rows_cap * (P->Dv + 2)) * 4 : 0;
            P->rth = (float *)(ws + ((off + 63) & ~(size_t)63));
            P->rtw = P->rth + P->rnh * P->D;
            kern__sdpa_rel_resize(P->rph, P->rnh, P->D, P->rth);
            kern__sdpa_rel_resize(P->rpw, P->rnw, P->D, P->rtw);
        }
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
    /* bf16 through vdpbf16ps (kern__sdpa_bwd16; bf16 problems only):
     * q, dout rows [NQ][D], [NQ][Dv]; the same as word-transposed pairs
     * along d [D/2][NQ][2], [Dv/2][NQ][2]; as pairs along rows (vpack)
     * [NQ/2][D][2], [NQ/2][Dv][2]; a key block's K as pairs along keys
     * [BK/2][D][2]; P^T, dS^T to bf16 [BK][NQ]; dS pairs along keys
     * [BK/2][NQ][2] (p2), and (tiles) dS rows [NQ][BK] */
    uint16_t *q16, *do16, *q16t, *do16t, *q2, *do2, *k2, *pp16, *ds16, *ds2, *dsr;
} kern__sdpa_bscr;

static size_t kern__sdpa_bscr_carve(const kern__sdpa_prob *p, char *base, kern__sdpa_bscr *sc) {
    kern__sdpa_carve c;
    int64_t D = p->D, Dv = p->Dv > 0 ? p->Dv : 1, NQ = KERN__SDPA_NQ, BK = KERN__SDPA_BWD_BK;
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
    if (p->dt == KERN_BF16) {
        sc->q16 = (uint16_t *)kern__sdpa_take(&c, (size_t)(NQ * D) * 2);
        sc->do16 = (uint16_t *)kern__sdpa_take(&c, (size_t)(NQ * Dv) * 2);
        sc->q16t = (uint16_t *)kern__sdpa_take(&c, (size_t)(NQ * D) * 2);
        sc->do16t = (uint16_t *)kern__sdpa_take(&c, (size_t)(NQ * Dv) * 2);
        sc->q2 = (uint16_t *)kern__sdpa_take(&c, (size_t)(NQ * D) * 2);
        sc->do2 = (uint16_t *)kern__sdpa_take(&c, (size_t)(NQ * Dv) * 2);
        sc->k2 = (uint16_t *)kern__sdpa_take(&c, (size_t)(BK * D) * 2);
        sc->pp16 = (uint16_t *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 2);
        sc->ds16 = (uint16_t *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 2);
        sc->ds2 = (uint16_t *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 2);
        sc->dsr = (uint16_t *)kern__sdpa_take(&c, (size_t)(BK * NQ) * 2);
    }
    return c.used;
}

/* x [NQ][n] bf16 (n even) as 4-byte pairs along a row, transposed:
 * xt[(dp * NQ + r) * 2 + {0, 1}] = x[r * n + 2 dp + {0, 1}]. */
static void kern__sdpa_pairs_t(const kern__sdpa_fns *fn, const uint16_t *x, int64_t n,
                               uint16_t *xt) {
    const uint16_t *rows[KERN__SDPA_NQ];
    int64_t r;
    for (r = 0; r < KERN__SDPA_NQ; r++) rows[r] = x + r * n;
    fn->pairs(rows, n / 2, xt);
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

/* dS^T = P^T (dP^T - delta) * scale (* (1 - t^2) with softcap) over n
 * entries of [nk][NQ] in place of dp; masked entries have P = 0. With
 * dropout, dP is masked and rescaled first and P after. */
static void kern__sdpa_bwd_ds(const kern__sdpa_prob *p, kern__sdpa_bscr *sc, int64_t nk,
                              int64_t j0, const kern__sdpa_lane *ln, int64_t nr, float rdrop) {
    int64_t n = nk * KERN__SDPA_NQ, e;
    if (p->dropout_p > 0) {
        for (e = 0; e < n; e++) sc->zr[e] = rdrop;
        kern__sdpa_dropout(p, sc->zr, nk, j0, ln, nr, 0);
        for (e = 0; e < n; e++) sc->dp[e] *= sc->zr[e];
    }
    p->fn->bwd_ds(sc->dp, sc->pp, p->softcap > 0 ? sc->tmp : NULL, sc->delta, nk, p->scale);
    if (p->dropout_p > 0)
        for (e = 0; e < n; e++) sc->pp[e] *= sc->zr[e];
}

/* The panel's per-lane lse2 and delta (padding lanes: P = 0, delta 0). */
static void kern__sdpa_bwd_lanes(const kern__sdpa_bwd *w, kern__sdpa_bscr *sc,
                                 const kern__sdpa_lane *ln, int64_t nr, int64_t qbase) {
    int64_t r;
    for (r = 0; r < KERN__SDPA_NQ; r++) {
        int64_t qi = r < nr ? kern__sdpa_qrow(w->p, qbase, ln[r].h, ln[r].i) : 0;
        sc->lse2[r] = r < nr ? w->lse2[qi] : INFINITY;
        sc->delta[r] = r < nr ? w->delta[qi] : 0.0f;
    }
}

/* One query panel of the backward on bf16 operands (kern__sdpa_bwd_task's
 * b16 case): keys [lo, hi) of the task's range, dk/dv into the f32
 * accumulators, the panel's dq into sc->dqp. */
static void kern__sdpa_bwd16_panel(const kern__sdpa_bwd *w, kern__sdpa_bscr *sc,
                                   const kern__sdpa_lane *ln, int64_t nr, int64_t qbase,
                                   const char *kp, int64_t krs, const char *vp, int64_t vrs,
                                   int64_t lo, int64_t hi, int64_t kbase, int64_t hk, float rdrop) {
    const kern__sdpa_prob *p = w->p;
    const kern__sdpa_fns *fn = p->fn;
    int64_t NQ = KERN__SDPA_NQ, BK = KERN__SDPA_BWD_BK, D = p->D, Dv = p->Dv, r, j0;
    int64_t kstep = p->varlen ? p->Hkv : 1; /* key rows of (b, hk) */
    for (r = 0; r < NQ; r++) {
        if (r < nr) {
            memcpy(sc->q16 + r * D, p->q + (size_t)kern__sdpa_off(p, p->qs, qbase, ln[r].h, ln[r].i) * 2,
                   (size_t)D * 2);
            if (Dv > 0)
                memcpy(sc->do16 + r * Dv,
                       p->dout + (size_t)kern__sdpa_off(p, p->ds, qbase, ln[r].h, ln[r].i) * 2,
                       (size_t)Dv * 2);
        } else {
            memset(sc->q16 + r * D, 0, (size_t)D * 2);
            if (Dv > 0) memset(sc->do16 + r * Dv, 0, (size_t)Dv * 2);
        }
    }
    kern__sdpa_bwd_lanes(w, sc, ln, nr, qbase);
    kern__sdpa_pairs_t(fn, sc->q16, D, sc->q16t);
    fn->vpack(sc->q16, D, NQ, D, sc->q2);
    if (Dv > 0) {
        kern__sdpa_pairs_t(fn, sc->do16, Dv, sc->do16t);
        fn->vpack(sc->do16, Dv, NQ, Dv, sc->do2);
    }
    for (j0 = (lo / BK) * BK; j0 < hi; j0 += BK) {
        int64_t nk = hi - j0 < BK ? hi - j0 : BK, n = nk * NQ;
        const uint16_t *kb = (const uint16_t *)(const void *)kp + j0 * krs;
        float *dkr = w->dkacc + kern__sdpa_krow(p, kbase, hk, j0) * D;
        float *dvr = w->dvacc + kern__sdpa_krow(p, kbase, hk, j0) * (Dv > 0 ? Dv : 1);
        /* P^T = 2^(s - lse2), recomputed */
        fn->mk16(nk, NQ, D / 2, kb, krs, 2, sc->q16t, NQ * 2, sc->s, NQ, 0);
        kern__sdpa_prepare(p, sc->s, nk, j0, ln, nr, sc->tmp, 1, 0);
        fn->bwd_p(sc->s, sc->lse2, nk, sc->pp);
        /* dP^T = V dO^T */
        if (Dv > 0)
            fn->mk16(nk, NQ, Dv / 2, (const uint16_t *)(const void *)vp + j0 * vrs, vrs, 2, sc->do16t,
                     NQ * 2, sc->dp, NQ, 0);
        else
            memset(sc->dp, 0, (size_t)n * 4);
        kern__sdpa_bwd_ds(p, sc, nk, j0, ln, nr, rdrop);
        /* dV += Pd^T dO, dK += dS^T Q (pairs along query rows), dQ += dS K
         * (pairs along keys) */
        if (Dv > 0) {
            fn->rows16(sc->pp, NQ, nk, NQ, sc->pp16, NQ);
            fn->mk16(nk, Dv, NQ / 2, sc->pp16, NQ, 2, sc->do2, 2 * Dv, dvr, kstep * Dv, 1);
        }
        fn->rows16(sc->dp, NQ, nk, NQ, sc->ds16, NQ);
        fn->mk16(nk, D, NQ / 2, sc->ds16, NQ, 2, sc->q2, 2 * D, dkr, kstep * D, 1);
        fn->p2(sc->dp, nk, sc->ds2);
        fn->vpack(kb, krs, nk, D, sc->k2);
        if (fn->tiles_on) { /* tiles want dS rows (pairs along keys adjacent) */
            const uint16_t *rows[KERN__SDPA_NQ];
            for (r = 0; r < NQ; r++) rows[r] = r < (nk + 1) / 2 ? sc->ds2 + r * NQ * 2 : NULL;
            fn->pairs(rows, NQ, sc->dsr); /* [key pair][lane] -> [lane][key pair] */
            fn->mk16(NQ, D, (nk + 1) / 2, sc->dsr, 2 * NQ, 2, sc->k2, 2 * D, sc->dqp, D, 1);
        } else {
            fn->mk16(NQ, D, (nk + 1) / 2, sc->ds2, 2, 2 * NQ, sc->k2, 2 * D, sc->dqp, D, 1);
        }
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
    int64_t NQ = KERN__SDPA_NQ, BK = KERN__SDPA_BWD_BK, n;
    const char *kp, *vp;
    int64_t krs, vrs;
    float rdrop = p->dropout_p > 0 ? 1.0f / (1.0f - p->dropout_p) : 1.0f;
    /* bf16 with vdpbf16ps: the five products on bf16 operands (P and dS
     * rounded to bf16, as the forward rounds P), f32 accumulation */
    int b16 = p->dt == KERN_BF16 && p->fn->mk16 && D % 2 == 0 && Dv % 2 == 0;
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
        if (hi > lo && b16) {
            if (p->fn->tiles_on) p->fn->tiles_on();
            kern__sdpa_bwd16_panel(w, &sc, ln, nr, qbase, kp, krs, vp, vrs, lo, hi, kbase, hk, rdrop);
            if (p->fn->tiles_off) p->fn->tiles_off();
        } else if (hi > lo) {
            /* pack q, dout (rows and transposed), lse2, delta */
            kern__sdpa_bwd_lanes(w, &sc, ln, nr, qbase);
            for (r = 0; r < NQ; r++) {
                if (r < nr) {
                    kern__sdpa_to_f32(w->ctx,
                                      p->q + (size_t)kern__sdpa_off(p, p->qs, qbase, ln[r].h, ln[r].i) * p->es,
                                      p->dt, sc.qr + r * D, D);
                    if (Dv > 0)
                        kern__sdpa_to_f32(w->ctx,
                                          p->dout + (size_t)kern__sdpa_off(p, p->ds, qbase, ln[r].h, ln[r].i) * p->es,
                                          p->dt, sc.dor + r * Dv, Dv);
                } else {
                    memset(sc.qr + r * D, 0, (size_t)D * 4);
                    if (Dv > 0) memset(sc.dor + r * Dv, 0, (size_t)Dv * 4);
                }
                for (d = 0; d < D; d++) sc.qt[d * NQ + r] = sc.qr[r * D + d];
                for (d = 0; d < Dv; d++) sc.dot[d * NQ + r] = sc.dor[r * Dv + d];
            }
            for (j0 = (lo / BK) * BK; j0 < hi; j0 += BK) {
                int64_t nk = hi - j0 < BK ? hi - j0 : BK;
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
                p->fn->mk(nk, NQ, D, kf, kfs, 1, sc.qt, NQ, sc.s, NQ, 0);
                kern__sdpa_prepare(p, sc.s, nk, j0, ln, nr, sc.tmp, 1, 0);
                p->fn->bwd_p(sc.s, sc.lse2, nk, sc.pp);
                /* dP^T = V dO^T (dropped, rescaled) */
                if (Dv > 0) p->fn->mk(nk, NQ, Dv, vf, vfs, 1, sc.dot, NQ, sc.dp, NQ, 0);
                else memset(sc.dp, 0, (size_t)n * 4);
                kern__sdpa_bwd_ds(p, &sc, nk, j0, ln, nr, rdrop);
                {
                    float *dkr = w->dkacc + kern__sdpa_krow(p, kbase, hk, j0) * D;
                    float *dvr = w->dvacc + kern__sdpa_krow(p, kbase, hk, j0) * (Dv > 0 ? Dv : 1);
                    int64_t kstep = p->varlen ? p->Hkv : 1; /* key rows of (b, hk) */
                    /* dV += Pd^T dO, dK += dS^T Q, dQ += dS K */
                    if (Dv > 0)
                        p->fn->mk(nk, Dv, NQ, sc.pp, NQ, 1, sc.dor, Dv, dvr, kstep * Dv, 1);
                    p->fn->mk(nk, D, NQ, sc.dp, NQ, 1, sc.qr, D, dkr, kstep * D, 1);
                    p->fn->mk(NQ, D, nk, sc.dp, 1, NQ, kf, kfs, sc.dqp, D, 1);
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
    P->fn = kern__sdpa_fns_for(kern_ctx_isa(ctx), kern_ctx_uarch(ctx));
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
    nkb = (P->Lk_run + KERN__SDPA_BWD_BK - 1) / KERN__SDPA_BWD_BK;
    base = P->B * P->Hkv;
    /* key ranges per (b, hk): a function of the shape only (determinism) */
    w.nchunk = (KERN__SDPA_BWD_TASKS + base - 1) / base;
    if (w.nchunk > nkb) w.nchunk = nkb;
    if (w.nchunk < 1) w.nchunk = 1;
    w.chunk = ((nkb + w.nchunk - 1) / w.nchunk) * KERN__SDPA_BWD_BK;
    if (w.chunk == 0) w.chunk = KERN__SDPA_BWD_BK;
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
