/* kern_llm.h — the small ops of a decoder LLM step: rotary position
 * embedding, the SwiGLU product, KV-cache append, argmax / top-k.
 * Part of kern, an embeddable header-only C kernel library.
 *
 * WHAT IT COMPUTES
 *   kern_rope(ctx, x, out, params)
 *     Rotary position embedding of x [B, L, H, D] into out (same shape;
 *     out may be x itself: in place). The position of x[b, l] is
 *     offsets[b] + l (offsets NULL = 0: prefill; per-sequence lengths:
 *     decode). Only the first r = rotary_dim dims rotate (0 = D; even,
 *     <= D); dims r..D-1 pass through. With f_i = inv_freq[i] (i < r/2)
 *     and angle a = pos * f_i, c = cos a, s = sin a:
 *       KERN_ROPE_HALF (default; GPT-NeoX, Hugging Face Llama rotate_half):
 *         pairs (i, i + r/2)
 *       KERN_ROPE_INTERLEAVED (GPT-J, Meta's original Llama): pairs (2i, 2i+1)
 *     and for a pair (x1, x2):  out1 = x1 c - x2 s,  out2 = x2 c + x1 s,
 *     each product rounded to f32, then the sum (no fma): the same
 *     roundings as torch's `x * cos + rotate_half(x) * sin` in f32, so
 *     given the same c, s the f32 result has torch's bits. bf16/f16
 *     inputs are computed in f32 and rounded once (torch rounds each op).
 *     inv_freq[i] = (float)(1 / theta^(2i / r)) (computed in double,
 *     rounded to f32 as Hugging Face stores it); the angle pos * f_i and
 *     its cos/sin are computed in double and rounded once to f32, so c, s
 *     are within 0.5 ulp of the exact values for every position (torch
 *     forms pos * f_i in f32: at position 4096 its angle is off by up to
 *     ~2.4e-4 rad).
 *     params.table: a caller table [P, r] (f32) of cos and sin per
 *     position, filled by kern_rope_table_init with exactly the values
 *     above, or by the caller with any frequencies (Llama-3 / YaRN
 *     scaled ones): row p = cos(p f_0) .. cos(p f_{r/2-1}), sin(p f_0) ..
 *     sin(p f_{r/2-1}). The same table serves both styles.
 *   kern_rope_table_init(ctx, table, params)   fills such a table.
 *
 *   kern_silu_mul(ctx, a, b, out)
 *     SwiGLU's gated product out = silu(a) * b (torch: F.silu(a) * b), with
 *     b NULL: a is [..., 2F] (the fused gate+up projection's output), the
 *     gate a[..., :F] and up a[..., F:], out [..., F]. silu is the shared
 *     math layer's (kern_activation(KERN_ACT_SILU)), the product rounded to
 *     f32 without fusing: out has the bits of kern_activation(a) into f32
 *     followed by an f32 multiply, then one rounding to out's dtype (torch
 *     in bf16 rounds silu(a) to bf16 first: within 1 bf16 ulp of kern).
 *
 *   kern_kv_append(ctx, k_new, v_new, k_cache, v_cache, k_lens)
 *     Appends the new rows of each sequence to a preallocated cache:
 *     k_cache[b, k_lens[b] + j] = k_new[b, j] for j < Lnew (likewise v),
 *     converting to the cache's dtype (round to nearest even), then
 *     k_lens[b] += Lnew. v_new and v_cache may both be NULL (K only).
 *     kern_kv_append_ex adds an int8 cache: each new row of each kv head
 *     is stored as symmetric int8 codes (kern_base.h's rule, scale =
 *     absmax / 127 of its D values) with its scale at [b, position, head]
 *     of params.k_scale / v_scale ([B, Lmax, Hkv] f32): a quarter of an
 *     f32 cache's bytes, half of a bf16 one's.
 *     The lengths are those kern_sdpa's params.k_lens reads.
 *
 *   kern_argmax(ctx, x, indices)        torch.argmax(x, dim=-1)
 *     Over the last dim of x [R, V]: the largest value's index (the first
 *     one on ties, as torch.argmax); NaN counts as larger than every
 *     number (the first NaN wins, as torch). Rows run in parallel. A
 *     token id is never checked here: ids >= vocab are the embedding
 *     lookup's error (kern_gather, KERN_ERR_INDEX).
 *
 *   kern_topk(ctx, x, values, indices)   torch.topk(x, k, dim=-1)
 *     The k = indices.shape[1] largest of each row of x [R, V], sorted
 *     largest first, ties to the lower index, NaN largest (torch's sorted
 *     order); values (NULL = not wanted) [R, k]. k > V: KERN_ERR_SHAPE.
 *
 *   kern_linear_gemv(ctx, x, w, y, params)   F.linear for decode sizes
 *     y [M, N] = epilogue(x [M, K] . w [N, K]^T), w f32/bf16/f16 or i8
 *     with params.w_scale [N] f32 (y = scale[n] * sum_k x w before the
 *     epilogue). The weight streams once from memory (M = 1..8); threads
 *     split N. f32 accumulation (not kern_gemm's summation order). w may
 *     be K-contiguous (F.linear's [N, K]) or N-contiguous (the transposed
 *     view of a row-major [K, N] weight, x @ W's layout: stride {1, ldw}),
 *     each streamed in its own address order. params.x_quant (an i8,
 *     K-contiguous w): x rows quantized by kern_base.h's int8 rule into
 *     the workspace and summed exactly in int32 (vpdpbusd on AVX512-VNNI):
 *     kern_qlinear's numerics and bits on an unpacked weight.
 *
 *   kern_decode_attention(ctx, q, k_cache, v_cache, k_lens, out, params)
 *     out[b, l, h] = softmax(scale q k^T) v over cache rows
 *     0 .. k_lens[b] - Lq + l (the new rows already appended), kv head
 *     h / (H / Hkv); 0 where no row is visible. scale: 0 = 1/sqrt(D) unless
 *     scale_set. Split-KV over 128-row chunks with a log-sum-exp merge; the
 *     same bits for any thread count. Workspace:
 *     kern_decode_attention_workspace_size, params.workspace. An i8 cache
 *     (K, V or both) reads its codes with params.k_scale / v_scale (as
 *     kern_kv_append_ex wrote them): the score is (q . codes) times the
 *     row's K scale, and the row's V scale multiplies its probability.
 *
 * LAYOUTS
 *   gemv: x [M, K], w [N, K] with unit stride along K, y [M, N] any
 *   strides. decode attention: q [B, Lq, H, D], caches [B, Lmax, Hkv, D]
 *   ([.., Dv] for v), out [B, Lq, H, Dv], unit last strides; k_lens [B].
 *   x, out: 4-D [B, L, H, D], any strides on B, L, H, unit stride on D;
 *   f32, bf16 or f16 each (out's dtype may differ from x's). q and k are
 *   rotated by two calls (their H differ under GQA).
 *   offsets: [B] i32/i64, any stride. table: 2-D f32, unit last stride.
 *   kv_append: k_new [B, Lnew, Hkv, D], k_cache [B, Lmax, Hkv, D] (v: Dv
 *   may differ from D), any strides but a unit last one; f32/bf16/f16
 *   each; k_lens [B] i32/i64. argmax: x [R, V] f32/bf16/f16 (any
 *   strides), indices [R] i32/i64.
 *   silu_mul: a, b, out of 1..8 dims, any strides but a unit last one,
 *   f32/bf16/f16 each; out may be a or b itself (not another overlap).
 *
 * PARAMS (kern_rope_params; NULL or zero-initialised = defaults)
 *   style       0 = KERN_ROPE_HALF
 *   rotary_dim  0 = D (or table.shape[1] with a table)
 *   theta       0 = 10000 (the "base"; Llama-3 uses 500000)
 *   offsets     NULL = every sequence starts at position 0
 *   table       NULL = cos/sin computed per position (needs the workspace:
 *               r/2 floats of inverse frequencies)
 *   workspace, workspace_size: NULL = the context's scratch; else at least
 *               kern_rope_workspace_size() bytes.
 *
 * ERRORS (nothing is written on error)
 *   KERN_ERR_ARG    NULL x/out, theta <= 1 or not finite, a negative
 *                   offset, a position >= 2^31 without a table, out
 *                   overlapping x without being x, a small workspace.
 *   KERN_ERR_SHAPE  not 4-D, out's shape differs, odd or too large
 *                   rotary_dim, offsets not [B], a table whose width is not
 *                   rotary_dim, a position past the table's last row
 *                   (names the sequence and the position).
 *   KERN_ERR_DTYPE  x/out not f32/bf16/f16, offsets not i32/i64, table not f32.
 *   KERN_ERR_LAYOUT D without unit stride; out with overlapping elements.
 *   kv_append: a sequence whose k_lens[b] + Lnew exceeds Lmax (a prompt
 *   longer than the cache) is KERN_ERR_SHAPE naming it, k_lens[b] < 0
 *   KERN_ERR_INDEX, a cache of another shape KERN_ERR_SHAPE, of a non-float
 *   dtype KERN_ERR_DTYPE: the caches and k_lens untouched. argmax: V = 0
 *   with rows is KERN_ERR_SHAPE.
 *
 *   topk: indices/values overlapping x, k > V KERN_ERR_SHAPE. gemv: an i8
 *   w without params.w_scale (or a scale with a float w) KERN_ERR_ARG, K
 *   without unit stride KERN_ERR_LAYOUT; x_quant with a float w or a too
 *   small workspace KERN_ERR_ARG, with an N-contiguous w KERN_ERR_LAYOUT,
 *   with K > 131071 KERN_ERR_SHAPE. decode attention: k_lens[b] >
 *   Lmax KERN_ERR_SHAPE, < 0 KERN_ERR_INDEX, H not a multiple of Hkv
 *   KERN_ERR_SHAPE. An i8 cache without its scale tensor (or a scale
 *   tensor with a float cache) KERN_ERR_ARG, a scale tensor not f32
 *   KERN_ERR_DTYPE or not [B, Lmax, Hkv] KERN_ERR_SHAPE, in kv_append and
 *   decode attention alike. Nothing is written on error.
 *
 * ISA
 *   AVX2 and scalar; gemv and decode attention also have AVX-512
 *   bodies (gemv: f32 rows over 8 KiB at M = 1, every weight at M >= 2;
 *   at the avx512bf16 level bf16 x against bf16 w at M >= 2 runs
 *   vdpbf16ps, which counts denormals as zero), the rest run the AVX2 one
 *   there. rope, silu_mul, kv_append and topk
 *   give the same bits on every level; gemv and decode attention sum in
 *   another order on each. NEON runs the scalar body.
 *
 * EXAMPLE (decode: one new token per sequence, positions = cache lengths)
 *     kern_tensor q = kern_tensor_4d(qbuf, KERN_BF16, B, 1, Hq, 128);
 *     kern_tensor pos = kern_tensor_1d(k_lens, KERN_I64, B);
 *     kern_rope_params rp = {0};
 *     rp.theta = 500000;
 *     rp.offsets = &pos;
 *     kern_rope(ctx, &q, &q, &rp);     // in place; same for k with Hkv
 */
#ifndef KERN_LLM_H
#define KERN_LLM_H

#include "kern_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kern_rope_style {
    KERN_ROPE_DEFAULT = 0,    /* = KERN_ROPE_HALF */
    KERN_ROPE_HALF = 1,       /* pairs (i, i + r/2): GPT-NeoX, HF Llama */
    KERN_ROPE_INTERLEAVED = 2 /* pairs (2i, 2i + 1): GPT-J */
} kern_rope_style;

typedef struct kern_rope_params {
    kern_rope_style style;      /* 0 = KERN_ROPE_HALF */
    int64_t rotary_dim;         /* 0 = D (or the table's width) */
    double theta;               /* 0 = 10000 */
    const kern_tensor *offsets; /* NULL = 0; [B] i32/i64 start positions */
    const kern_tensor *table;   /* NULL = computed; f32 [P, rotary_dim] */
    void *workspace;            /* NULL = the context's scratch */
    size_t workspace_size;
} kern_rope_params;

/* out = silu(a) * b; b NULL: a = [gate | up] along the last dim. */
KERN_API kern_status kern_silu_mul(kern_ctx *ctx, const kern_tensor *a, const kern_tensor *b,
                                   const kern_tensor *out);

/* Appends k_new (and v_new) at k_lens, then advances k_lens. */
KERN_API kern_status kern_kv_append(kern_ctx *ctx, const kern_tensor *k_new,
                                    const kern_tensor *v_new, const kern_tensor *k_cache,
                                    const kern_tensor *v_cache, const kern_tensor *k_lens);

/* kern_kv_append's options (zero = none). An i8 cache stores each new
 * row of each kv head as int8 codes with the symmetric rule of kern_base.h
 * (scale = absmax / 127 over the row's D values, codes rne(x / scale)),
 * and the scale at [b, position, head] of its scale tensor, which
 * kern_decode_attention then reads (params.k_scale / v_scale). */
typedef struct kern_kv_append_params {
    const kern_tensor *k_scale; /* an i8 k_cache: [B, Lmax, Hkv] f32 */
    const kern_tensor *v_scale; /* an i8 v_cache: [B, Lmax, Hkv] f32 */
} kern_kv_append_params;
KERN_API kern_status kern_kv_append_ex(kern_ctx *ctx, const kern_tensor *k_new,
                                       const kern_tensor *v_new, const kern_tensor *k_cache,
                                       const kern_tensor *v_cache, const kern_tensor *k_lens,
                                       const kern_kv_append_params *params);
/* indices[r] = argmax over x[r, :] (first on ties, NaN largest). */
KERN_API kern_status kern_argmax(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *indices);
/* The k largest of each row of x [R, V], k = indices.shape[1]: indices
 * [R, k] (i32/i64) and values [R, k] (NULL = not wanted), sorted largest
 * first, ties to the lower index, NaN largest (torch.topk(x, k, -1,
 * largest=True, sorted=True)). No scratch: the heap lives in indices. */
KERN_API kern_status kern_topk(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *values,
                               const kern_tensor *indices);

/* kern_linear_gemv: y = epilogue(x w^T (* w_scale)) for few rows of x. */
typedef struct kern_gemv_params {
    kern_epilogue epilogue;     /* bias [N] (or [M] per row), act, residual [M, N], out_scale */
    const kern_tensor *w_scale; /* [N] f32 per-output-channel scales: required with an i8 w,
                                   NULL otherwise */
    int x_quant;                /* i8 w only: quantize each x row with kern_base.h's symmetric
                                   int8 rule (kern_qlinear's dynamic activations) and sum the
                                   products exactly in int32 (vpdpbusd on the AVX512-VNNI
                                   levels): y = epilogue(acc * s_x[m] * s_w[n]), kern_qlinear's
                                   numerics and bits. 0 = x used as given (f32 products) */
    void *workspace;            /* x_quant's codes: NULL = the context's scratch; else at
                                   least kern_linear_gemv_workspace_size() bytes */
    size_t workspace_size;
} kern_gemv_params;

/* y [M, N] = x [M, K] . w [N, K]^T (torch F.linear's weight layout; w
 * K-contiguous, or N-contiguous: a row-major [K, N] weight's transpose),
 * times w_scale[n] for an i8 w, then the shared epilogue. With
 * epilogue.glu, w [N, K] holds kern_glu_pack's gate/up rows (w_scale and
 * bias [N] in the same order) and y is [M, N/2] (SwiGLU in one pass). Built for
 * M = 1..8 (decode): the weight streams once from memory, threads split
 * N. Any M works (the weight is re-read from cache per 8 rows). */
KERN_API kern_status kern_linear_gemv(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *w,
                                      const kern_tensor *y, const kern_gemv_params *params);
/* Caller workspace bytes kern_linear_gemv needs for x [M, K] and these
 * params on this context (0 unless params->x_quant). */
KERN_API kern_status kern_linear_gemv_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                                     const kern_gemv_params *params, size_t *bytes);

/* kern_decode_attention: attention of a few new queries per sequence
 * against a KV cache with per-sequence lengths (see the top). */
typedef struct kern_decode_attention_params {
    float scale;       /* 0 (and scale_set 0) = 1/sqrt(D) */
    int scale_set;     /* nonzero: scale used as given, 0 included */
    const kern_tensor *k_scale; /* an i8 k_cache: [B, Lmax, Hkv] f32, the scale of
                                   each cached row and kv head (kern_kv_append_ex) */
    const kern_tensor *v_scale; /* an i8 v_cache: likewise */
    void *workspace;   /* NULL = the context's scratch */
    size_t workspace_size;
} kern_decode_attention_params;

/* out [B, Lq, H, Dv] = softmax(scale q k^T) v over the first k_lens[b]
 * rows of the cache, query l of Lq seeing rows 0 .. k_lens[b] - Lq + l
 * (the new rows are already appended: causal, bottom right); GQA when
 * Hkv divides H (query head h reads kv head h / (H / Hkv)). */
KERN_API kern_status kern_decode_attention(kern_ctx *ctx, const kern_tensor *q,
                                           const kern_tensor *k_cache,
                                           const kern_tensor *v_cache,
                                           const kern_tensor *k_lens, const kern_tensor *out,
                                           const kern_decode_attention_params *params);
KERN_API kern_status kern_decode_attention_workspace_size(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k_cache, const kern_tensor *v_cache,
    const kern_tensor *k_lens, const kern_tensor *out, const kern_decode_attention_params *params,
    size_t *bytes);

/* Resolves the defaults in place for head dim `head_dim`: style HALF,
 * rotary_dim = the table's width or head_dim, theta 10000. NULL ignored. */
KERN_API void kern_rope_params_defaults(kern_rope_params *p, int64_t head_dim);

/* Rotates x into out (see the top). params may be NULL. */
KERN_API kern_status kern_rope(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *out,
                               const kern_rope_params *params);
/* Scratch bytes kern_rope takes on this context for these operands (0
 * with a table). Validates like kern_rope (not the offsets' values). */
KERN_API kern_status kern_rope_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                              const kern_tensor *out,
                                              const kern_rope_params *params, size_t *bytes);
/* Fills table [P, r] (f32, unit last stride) with the cos/sin of
 * positions 0..P-1 as kern_rope computes them. Uses params->theta and
 * params->rotary_dim (0 or r; anything else KERN_ERR_SHAPE); r even. */
KERN_API kern_status kern_rope_table_init(kern_ctx *ctx, const kern_tensor *table,
                                          const kern_rope_params *params);

#ifdef __cplusplus
}
#endif
#endif /* KERN_LLM_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_LLM_IMPLEMENTED)
#define KERN_LLM_IMPLEMENTED

#include <math.h>
#ifdef KERN_X86
#include <immintrin.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ row bodies
 * The rotation of one head row over a chunk of n pairs starting at pair
 * p0: c, s hold the chunk's cos/sin (n of each). HALF: pairs (i, i + h);
 * INTERLEAVED: c2/s2 hold the chunk expanded per element (c_i twice,
 * -s_i then +s_i), so out = x c2 + swap_pairs(x) s2. Products are
 * rounded before the sum (kern__s_mul / kern__mul__avx2 keep the compiler
 * from fusing), the same bits on every ISA. */
typedef struct kern__rope_fns {
    const char *name;
    void (*half)(const void *x, kern_dtype xdt, void *o, kern_dtype odt, int64_t h,
                 int64_t p0, int64_t n, const float *c, const float *s);
    void (*inter)(const void *x, kern_dtype xdt, void *o, kern_dtype odt, int64_t p0,
                  int64_t n, const float *c2, const float *s2);
    void (*copy)(const void *x, kern_dtype xdt, void *o, kern_dtype odt, int64_t n);
    void (*silu_mul)(const void *a, kern_dtype adt, const void *b, kern_dtype bdt, void *o,
                     kern_dtype odt, int64_t n);
    /* The first i in [i0, n) of the unit-stride row x with x[i] > thr or
     * x[i] NaN (thr not NaN); n if none. */
    int64_t (*above)(const void *x, kern_dtype dt, int64_t i0, int64_t n, float thr);
} kern__rope_fns;

static void kern__rope_half__scalar(const void *x, kern_dtype xdt, void *o, kern_dtype odt,
                                    int64_t h, int64_t p0, int64_t n, const float *c,
                                    const float *s) {
    size_t xs = kern_dtype_size(xdt), os = kern_dtype_size(odt);
    const char *xp = (const char *)x;
    char *op = (char *)o;
    int64_t i;
    for (i = 0; i < n; i++) {
        int64_t a = p0 + i, b = a + h;
        float x1 = kern__s_load_f32(xp + a * xs, xdt, 1);
        float x2 = kern__s_load_f32(xp + b * xs, xdt, 1);
        float o1 = kern__s_mul(x1, c[i]) - kern__s_mul(x2, s[i]);
        float o2 = kern__s_mul(x2, c[i]) + kern__s_mul(x1, s[i]);
        kern__s_store_f32(op + a * os, odt, o1, 1, 0);
        kern__s_store_f32(op + b * os, odt, o2, 1, 0);
    }
}
static void kern__rope_inter__scalar(const void *x, kern_dtype xdt, void *o, kern_dtype odt,
                                     int64_t p0, int64_t n, const float *c2, const float *s2) {
    size_t xs = kern_dtype_size(xdt), os = kern_dtype_size(odt);
    const char *xp = (const char *)x + 2 * p0 * (int64_t)xs;
    char *op = (char *)o + 2 * p0 * (int64_t)os;
    int64_t i;
    for (i = 0; i < 2 * n; i += 2) {
        float x1 = kern__s_load_f32(xp + i * xs, xdt, 1);
        float x2 = kern__s_load_f32(xp + (i + 1) * xs, xdt, 1);
        float o1 = kern__s_mul(x1, c2[i]) + kern__s_mul(x2, s2[i]);
        float o2 = kern__s_mul(x2, c2[i + 1]) + kern__s_mul(x1, s2[i + 1]);
        kern__s_store_f32(op + i * os, odt, o1, 1, 0);
        kern__s_store_f32(op + (i + 1) * os, odt, o2, 1, 0);
    }
}
static void kern__llm_copy__scalar(const void *x, kern_dtype xdt, void *o, kern_dtype odt,
                                   int64_t n) {
    size_t xs = kern_dtype_size(xdt), os = kern_dtype_size(odt);
    int64_t i;
    if (xdt == odt) {
        memmove(o, x, (size_t)n * xs);
        return;
    }
    for (i = 0; i < n; i++)
        kern__s_store_f32((char *)o + i * os, odt,
                          kern__s_load_f32((const char *)x + i * xs, xdt, 1), 1, 0);
}
/* silu(a) * b, the product kept apart from silu's last operation. */
static void kern__silu_mul__scalar(const void *a, kern_dtype adt, const void *b, kern_dtype bdt,
                                   void *o, kern_dtype odt, int64_t n) {
    size_t as = kern_dtype_size(adt), bs = kern_dtype_size(bdt), os = kern_dtype_size(odt);
    int64_t i;
    for (i = 0; i < n; i++) {
        float g = kern__s_silu(kern__s_load_f32((const char *)a + i * as, adt, 1));
        float u = kern__s_load_f32((const char *)b + i * bs, bdt, 1);
        kern__s_store_f32((char *)o + i * os, odt, kern__s_mul(g, u), 1, 0);
    }
}
static int64_t kern__above__scalar(const void *x, kern_dtype dt, int64_t i0, int64_t n,
                                   float thr) {
    size_t es = kern_dtype_size(dt);
    int64_t i;
    for (i = i0; i < n; i++) {
        float v = kern__s_load_f32((const char *)x + i * es, dt, 1);
        if (v > thr || v != v) return i;
    }
    return n;
}
static const kern__rope_fns kern__rope_fns_scalar = {"scalar", kern__rope_half__scalar,
                                                     kern__rope_inter__scalar,
                                                     kern__llm_copy__scalar,
                                                     kern__silu_mul__scalar,
                                                     kern__above__scalar};

#ifdef KERN_X86
KERN_TARGET_AVX2 static void kern__rope_half__avx2(const void *x, kern_dtype xdt, void *o,
                                                   kern_dtype odt, int64_t h, int64_t p0,
                                                   int64_t n, const float *c, const float *s) {
    size_t xs = kern_dtype_size(xdt), os = kern_dtype_size(odt);
    const char *x1p = (const char *)x + p0 * (int64_t)xs, *x2p = x1p + h * (int64_t)xs;
    char *o1p = (char *)o + p0 * (int64_t)os, *o2p = o1p + h * (int64_t)os;
    int64_t i;
    for (i = 0; i < n; i += 8) {
        int m = n - i >= 8 ? 8 : (int)(n - i);
        __m256 x1 = kern__v_load_f32__avx2(x1p + i * xs, xdt, m);
        __m256 x2 = kern__v_load_f32__avx2(x2p + i * xs, xdt, m);
        __m256 cv = kern__loadn__avx2(c + i, m), sv = kern__loadn__avx2(s + i, m);
        __m256 o1 = _mm256_sub_ps(kern__mul__avx2(x1, cv), kern__mul__avx2(x2, sv));
        __m256 o2 = _mm256_add_ps(kern__mul__avx2(x2, cv), kern__mul__avx2(x1, sv));
        kern__v_store_f32__avx2(o1p + i * os, odt, o1, m, 0);
        kern__v_store_f32__avx2(o2p + i * os, odt, o2, m, 0);
    }
}
KERN_TARGET_AVX2 static void kern__rope_inter__avx2(const void *x, kern_dtype xdt, void *o,
                                                    kern_dtype odt, int64_t p0, int64_t n,
                                                    const float *c2, const float *s2) {
    size_t xs = kern_dtype_size(xdt), os = kern_dtype_size(odt);
    const char *xp = (const char *)x + 2 * p0 * (int64_t)xs;
    char *op = (char *)o + 2 * p0 * (int64_t)os;
    int64_t i, e = 2 * n;
    for (i = 0; i < e; i += 8) {
        int m = e - i >= 8 ? 8 : (int)(e - i);
        __m256 xv = kern__v_load_f32__avx2(xp + i * xs, xdt, m);
        __m256 sw = _mm256_permute_ps(xv, 0xB1); /* (x1, x2) -> (x2, x1) per pair */
        __m256 cv = kern__loadn__avx2(c2 + i, m), sv = kern__loadn__avx2(s2 + i, m);
        __m256 ov = _mm256_add_ps(kern__mul__avx2(xv, cv), kern__mul__avx2(sw, sv));
        kern__v_store_f32__avx2(op + i * os, odt, ov, m, 0);
    }
}
KERN_TARGET_AVX2 static void kern__llm_copy__avx2(const void *x, kern_dtype xdt, void *o,
                                                  kern_dtype odt, int64_t n) {
    size_t xs = kern_dtype_size(xdt), os = kern_dtype_size(odt);
    int64_t i;
    if (xdt == odt) {
        memmove(o, x, (size_t)n * xs);
        return;
    }
    for (i = 0; i < n; i += 8) {
        int m = n - i >= 8 ? 8 : (int)(n - i);
        kern__v_store_f32__avx2((char *)o + i * os, odt,
                                kern__v_load_f32__avx2((const char *)x + i * xs, xdt, m), m, 0);
    }
}
KERN_TARGET_AVX2 static void kern__silu_mul__avx2(const void *a, kern_dtype adt, const void *b,
                                                  kern_dtype bdt, void *o, kern_dtype odt,
                                                  int64_t n) {
    size_t as = kern_dtype_size(adt), bs = kern_dtype_size(bdt), os = kern_dtype_size(odt);
    int64_t i;
    for (i = 0; i < n; i += 8) {
        int m = n - i >= 8 ? 8 : (int)(n - i);
        __m256 g = kern__v_silu__avx2(kern__v_load_f32__avx2((const char *)a + i * as, adt, m));
        __m256 u = kern__v_load_f32__avx2((const char *)b + i * bs, bdt, m);
        kern__v_store_f32__avx2((char *)o + i * os, odt, kern__mul__avx2(g, u), m, 0);
    }
}
/* 32 values per step: one movemask test of four compares (v > thr or
 * unordered) skips the many rows' values below the k-th best. */
KERN_TARGET_AVX2 static int64_t kern__above__avx2(const void *x, kern_dtype dt, int64_t i0,
                                                  int64_t n, float thr) {
    size_t es = kern_dtype_size(dt);
    const char *p = (const char *)x;
    __m256 t = _mm256_set1_ps(thr);
    int64_t i = i0;
    for (; i + 32 <= n; i += 32) {
        __m256 c0 = _mm256_cmp_ps(kern__v_load_f32__avx2(p + i * es, dt, 8), t, _CMP_NLE_UQ);
        __m256 c1 = _mm256_cmp_ps(kern__v_load_f32__avx2(p + (i + 8) * es, dt, 8), t, _CMP_NLE_UQ);
        __m256 c2 = _mm256_cmp_ps(kern__v_load_f32__avx2(p + (i + 16) * es, dt, 8), t, _CMP_NLE_UQ);
        __m256 c3 = _mm256_cmp_ps(kern__v_load_f32__avx2(p + (i + 24) * es, dt, 8), t, _CMP_NLE_UQ);
        if (_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(c0, c1), _mm256_or_ps(c2, c3)))) break;
    }
    for (; i < n; i += 8) {
        int m = n - i >= 8 ? 8 : (int)(n - i);
        int bits = _mm256_movemask_ps(
                       _mm256_cmp_ps(kern__v_load_f32__avx2(p + i * es, dt, m), t, _CMP_NLE_UQ)) &
                   ((1 << m) - 1);
        if (bits) return i + __builtin_ctz((unsigned)bits);
    }
    return n;
}
static const kern__rope_fns kern__rope_fns_avx2 = {"avx2", kern__rope_half__avx2,
                                                   kern__rope_inter__avx2, kern__llm_copy__avx2,
                                                   kern__silu_mul__avx2, kern__above__avx2};
#endif

static const kern__rope_fns *kern__rope_fns_for(kern_isa isa) {
    switch (isa) {
#ifdef KERN_X86
    case KERN_ISA_AMX:
    case KERN_ISA_AVX512_BF16: /* no AVX-512 body yet: the AVX2 one */
    case KERN_ISA_AVX512_VNNI:
    case KERN_ISA_AVX512:
    case KERN_ISA_AVX2_VNNI:
    case KERN_ISA_AVX2: return &kern__rope_fns_avx2;
#endif
    default: return &kern__rope_fns_scalar;
    }
}

/* ------------------------------------------------------------ shared bits */

/* Element i of a 1-D i32/i64 view. */
static int64_t kern__llm_ix(const kern_tensor *t, int64_t i) {
    const char *p = (const char *)t->data + i * t->stride[0] * (int64_t)kern_dtype_size(t->dtype);
    if (t->dtype == KERN_I64) {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    } else {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
}
static int kern__llm_float_dt(kern_dtype dt) {
    return dt == KERN_F32 || dt == KERN_BF16 || dt == KERN_F16;
}
/* A view and an output: same view (in place) is fine, any other byte
 * overlap is not. */
static int kern__llm_same_view(const kern_tensor *a, const kern_tensor *b) {
    int d;
    if (a->data != b->data || a->ndim != b->ndim ||
        kern_dtype_size(a->dtype) != kern_dtype_size(b->dtype))
        return 0;
    for (d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->stride[d] != b->stride[d]))
            return 0;
    return 1;
}
/* Checks a 1-D index vector [n] of i32/i64. */
static kern_status kern__llm_check_lens(const kern_tensor *t, int64_t n, const char *op,
                                        const char *name) {
    kern_status st = kern_tensor_check(t, op, name);
    if (st != KERN_OK) return st;
    if (t->dtype != KERN_I32 && t->dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s is not i32/i64", op, name,
                         kern_dtype_name(t->dtype));
    if (t->ndim != 1 || t->shape[0] != n)
        return kern__err(KERN_ERR_SHAPE, "%s: %s must be [%lld]", op, name, (long long)n);
    return KERN_OK;
}

/* ------------------------------------------------------------------ rope */

#define KERN__ROPE_CHUNK 64 /* pairs per cos/sin block (stack: 4 x 64 floats) */

typedef struct kern__rope_job {
    const kern__rope_fns *fns;
    const char *x;
    char *o;
    kern_dtype xdt, odt;
    int64_t B, L, H, D, r;
    int64_t xs[3], os[3]; /* byte strides of B, L, H */
    int inter;
    const kern_tensor *offsets;
    const float *invf;  /* [r/2] without a table */
    const char *table;  /* row p at table + p * trs */
    int64_t trs;
    int64_t rows, per_task;
} kern__rope_job;

/* cos/sin of pos * invf[i], i in [p0, p0 + n), in double, rounded once. */
static void kern__rope_cs(double pos, const float *invf, int64_t p0, int64_t n, float *c,
                          float *s) {
    int64_t i;
    for (i = 0; i < n; i++) {
        double a = pos * (double)invf[p0 + i];
        c[i] = (float)cos(a);
        s[i] = (float)sin(a);
    }
}

static void kern__rope_task(void *arg, int64_t task, int thread) {
    const kern__rope_job *J = (const kern__rope_job *)arg;
    float c[KERN__ROPE_CHUNK], s[KERN__ROPE_CHUNK];
    float c2[2 * KERN__ROPE_CHUNK], s2[2 * KERN__ROPE_CHUNK];
    int64_t row, r0 = task * J->per_task, r1 = r0 + J->per_task, half = J->r / 2;
    size_t xe = kern_dtype_size(J->xdt), oe = kern_dtype_size(J->odt);
    (void)thread;
    if (r1 > J->rows) r1 = J->rows;
    for (row = r0; row < r1; row++) {
        int64_t b = row / J->L, l = row % J->L, h, p0;
        int64_t pos = (J->offsets ? kern__llm_ix(J->offsets, b) : 0) + l;
        const char *xr = J->x + b * J->xs[0] + l * J->xs[1];
        char *orow = J->o + b * J->os[0] + l * J->os[1];
        for (p0 = 0; p0 < half; p0 += KERN__ROPE_CHUNK) {
            int64_t n = half - p0 < KERN__ROPE_CHUNK ? half - p0 : KERN__ROPE_CHUNK, i;
            if (J->table) {
                const float *tr = (const float *)(const void *)(J->table + pos * J->trs);
                memcpy(c, tr + p0, (size_t)n * sizeof(float));
                memcpy(s, tr + half + p0, (size_t)n * sizeof(float));
            } else {
                kern__rope_cs((double)pos, J->invf, p0, n, c, s);
            }
            if (J->inter)
                for (i = 0; i < n; i++) {
                    c2[2 * i] = c2[2 * i + 1] = c[i];
                    s2[2 * i] = -s[i];
                    s2[2 * i + 1] = s[i];
                }
            for (h = 0; h < J->H; h++) {
                const char *xh = xr + h * J->xs[2];
                char *oh = orow + h * J->os[2];
                if (J->inter)
                    J->fns->inter(xh, J->xdt, oh, J->odt, p0, n, c2, s2);
                else
                    J->fns->half(xh, J->xdt, oh, J->odt, half, p0, n, c, s);
            }
        }
        if (J->r < J->D && (J->x != J->o || J->xdt != J->odt || J->xs[2] != J->os[2]))
            for (h = 0; h < J->H; h++)
                J->fns->copy(xr + h * J->xs[2] + J->r * (int64_t)xe, J->xdt,
                             orow + h * J->os[2] + J->r * (int64_t)oe, J->odt, J->D - J->r);
    }
}

KERN_API void kern_rope_params_defaults(kern_rope_params *p, int64_t head_dim) {
    if (!p) return;
    if (p->style == KERN_ROPE_DEFAULT) p->style = KERN_ROPE_HALF;
    if (p->rotary_dim == 0) {
        if (p->table && p->table->ndim == 2) p->rotary_dim = p->table->shape[1];
        else if (head_dim > 0) p->rotary_dim = head_dim;
    }
    if (p->theta == 0) p->theta = 10000.0;
}

/* Everything kern_rope checks before reading the offsets' values. */
static kern_status kern__rope_validate(const kern_tensor *x, const kern_tensor *out,
                                       const kern_rope_params *pp, kern_rope_params *rp,
                                       const char *op) {
    kern_status st;
    int d;
    kern_rope_params p;
    memset(&p, 0, sizeof p);
    if (pp) p = *pp;
    if (!x || !out) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !x ? "x" : "out");
    if ((st = kern_tensor_check(x, op, "x")) != KERN_OK) return st;
    if ((st = kern_tensor_check(out, op, "out")) != KERN_OK) return st;
    if (!kern__llm_float_dt(x->dtype) || !kern__llm_float_dt(out->dtype))
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s is not f32/bf16/f16", op,
                         kern__llm_float_dt(x->dtype) ? "out" : "x",
                         kern_dtype_name(kern__llm_float_dt(x->dtype) ? out->dtype : x->dtype));
    if (x->ndim != 4)
        return kern__err(KERN_ERR_SHAPE, "%s: x must be 4-D [B, L, H, D], has %d dims", op,
                         x->ndim);
    for (d = 0; d < 4; d++)
        if (out->ndim != 4 || out->shape[d] != x->shape[d])
            return kern__err(KERN_ERR_SHAPE, "%s: out's shape differs from x's [%lld, %lld, %lld, %lld]",
                             op, (long long)x->shape[0], (long long)x->shape[1],
                             (long long)x->shape[2], (long long)x->shape[3]);
    if (p.style != KERN_ROPE_DEFAULT && p.style != KERN_ROPE_HALF &&
        p.style != KERN_ROPE_INTERLEAVED)
        return kern__err(KERN_ERR_ARG, "%s: params.style=%d is not a kern_rope_style", op,
                         (int)p.style);
    if (!(p.theta == 0 || (p.theta > 1 && p.theta < 1e300)))
        return kern__err(KERN_ERR_ARG, "%s: params.theta=%g must be > 1 and finite (0 = 10000)",
                         op, p.theta);
    if (p.table) {
        if ((st = kern_tensor_check(p.table, op, "params.table")) != KERN_OK) return st;
        if (p.table->dtype != KERN_F32)
            return kern__err(KERN_ERR_DTYPE, "%s: params.table.dtype=%s is not f32", op,
                             kern_dtype_name(p.table->dtype));
        if (p.table->ndim != 2)
            return kern__err(KERN_ERR_SHAPE, "%s: params.table must be 2-D [P, rotary_dim]", op);
        if (p.table->shape[0] > 0 && p.table->shape[1] > 1 && p.table->stride[1] != 1)
            return kern__err(KERN_ERR_LAYOUT, "%s: params.table's last dim needs unit stride", op);
    }
    kern_rope_params_defaults(&p, x->shape[3]);
    if (p.rotary_dim < 0 || p.rotary_dim % 2 || p.rotary_dim > x->shape[3])
        return kern__err(KERN_ERR_SHAPE, "%s: rotary_dim=%lld must be even and in 0..D=%lld", op,
                         (long long)p.rotary_dim, (long long)x->shape[3]);
    if (p.table && p.table->shape[1] != p.rotary_dim)
        return kern__err(KERN_ERR_SHAPE, "%s: params.table is %lld wide but rotary_dim=%lld", op,
                         (long long)p.table->shape[1], (long long)p.rotary_dim);
    if (p.offsets &&
        (st = kern__llm_check_lens(p.offsets, x->shape[0], op, "params.offsets")) != KERN_OK)
        return st;
    if (x->shape[3] > 1 && (x->stride[3] != 1 || out->stride[3] != 1))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s's last dim needs unit stride", op,
                         x->stride[3] != 1 ? "x" : "out");
    if (kern__tensor_self_overlap(out))
        return kern__err(KERN_ERR_LAYOUT, "%s: out has overlapping elements", op);
    if (!kern__llm_same_view(x, out) && kern_tensors_overlap(x, out))
        return kern__err(KERN_ERR_ARG, "%s: out overlaps x without being x", op);
    if (p.offsets && kern_tensors_overlap(p.offsets, out))
        return kern__err(KERN_ERR_ARG, "%s: out overlaps params.offsets", op);
    *rp = p;
    return KERN_OK;
}

static size_t kern__rope_shared(const kern_rope_params *p) {
    return p->table ? 0 : (size_t)(p->rotary_dim / 2) * sizeof(float);
}

KERN_API kern_status kern_rope_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                              const kern_tensor *out,
                                              const kern_rope_params *params, size_t *bytes) {
    static const char *op = "kern_rope_workspace_size";
    kern_rope_params p;
    kern_status st;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if ((st = kern__rope_validate(x, out, params, &p, op)) != KERN_OK) return st;
    if (!ctx) ctx = kern_default_ctx();
    if (!ctx) return kern__err(KERN_ERR_NOMEM, "%s: no default context", op);
    *bytes = kern__op_workspace_bytes(ctx, kern__rope_shared(&p), 0);
    return KERN_OK;
}

static void kern__rope_invf(double theta, int64_t r, float *invf) {
    int64_t i;
    for (i = 0; i < r / 2; i++) invf[i] = (float)(1.0 / pow(theta, (double)(2 * i) / (double)r));
}

KERN_API kern_status kern_rope(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *out,
                               const kern_rope_params *params) {
    static const char *op = "kern_rope";
    kern_rope_params p;
    kern_status st;
    kern__rope_job J;
    int64_t b, tasks;
    size_t xe, oe;
    if ((st = kern__rope_validate(x, out, params, &p, op)) != KERN_OK) return st;
    /* positions: every one must be reachable before anything is written */
    for (b = 0; b < x->shape[0] && x->shape[1] > 0; b++) {
        int64_t off = p.offsets ? kern__llm_ix(p.offsets, b) : 0;
        int64_t last = off + x->shape[1] - 1;
        if (off < 0)
            return kern__err(KERN_ERR_ARG, "%s: params.offsets[%lld]=%lld is negative", op,
                             (long long)b, (long long)off);
        if (p.table && last >= p.table->shape[0])
            return kern__err(KERN_ERR_SHAPE,
                             "%s: sequence %lld reaches position %lld, past the table's %lld rows",
                             op, (long long)b, (long long)last, (long long)p.table->shape[0]);
        if (!p.table && last >= ((int64_t)1 << 31))
            return kern__err(KERN_ERR_ARG, "%s: sequence %lld reaches position %lld >= 2^31", op,
                             (long long)b, (long long)last);
    }
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size, kern__rope_shared(&p), 0);
    if (st == KERN_OK && kern_tensor_numel(x) > 0) {
        memset(&J, 0, sizeof J);
        J.fns = kern__rope_fns_for(kern_ctx_isa(ctx));
        J.x = (const char *)x->data;
        J.o = (char *)out->data;
        J.xdt = x->dtype;
        J.odt = out->dtype;
        J.B = x->shape[0];
        J.L = x->shape[1];
        J.H = x->shape[2];
        J.D = x->shape[3];
        J.r = p.rotary_dim;
        xe = kern_dtype_size(x->dtype);
        oe = kern_dtype_size(out->dtype);
        for (b = 0; b < 3; b++) {
            J.xs[b] = x->stride[b] * (int64_t)xe;
            J.os[b] = out->stride[b] * (int64_t)oe;
        }
        J.inter = p.style == KERN_ROPE_INTERLEAVED;
        J.offsets = p.offsets;
        if (p.table) {
            J.table = (const char *)p.table->data;
            J.trs = p.table->stride[0] * (int64_t)sizeof(float);
        } else if (J.r > 0) {
            float *invf = (float *)kern__workspace(ctx, kern__rope_shared(&p));
            if (!invf) st = kern__err(KERN_ERR_NOMEM, "%s: no scratch for %lld frequencies", op,
                                      (long long)(J.r / 2));
            else kern__rope_invf(p.theta, J.r, invf);
            J.invf = invf;
        }
        if (st == KERN_OK) {
            J.rows = J.B * J.L;
            /* about 16 K elements per task: decode (B*L small) stays on one */
            J.per_task = (16384 + J.H * J.D - 1) / (J.H * J.D > 0 ? J.H * J.D : 1);
            if (J.per_task < 1) J.per_task = 1;
            tasks = (J.rows + J.per_task - 1) / J.per_task;
            st = kern_parallel_for(ctx, tasks, kern__rope_task, &J);
        }
    }
    kern__op_end(ctx);
    return st;
}

KERN_API kern_status kern_rope_table_init(kern_ctx *ctx, const kern_tensor *table,
                                          const kern_rope_params *params) {
    static const char *op = "kern_rope_table_init";
    kern_status st;
    double theta = params && params->theta != 0 ? params->theta : 10000.0;
    int64_t r, P, pos, half;
    float *invf = NULL;
    if (!table) return kern__err(KERN_ERR_ARG, "%s: table is NULL", op);
    if ((st = kern_tensor_check(table, op, "table")) != KERN_OK) return st;
    if (table->dtype != KERN_F32)
        return kern__err(KERN_ERR_DTYPE, "%s: table.dtype=%s is not f32", op,
                         kern_dtype_name(table->dtype));
    if (table->ndim != 2) return kern__err(KERN_ERR_SHAPE, "%s: table must be 2-D [P, r]", op);
    P = table->shape[0];
    r = table->shape[1];
    if (r % 2 || (params && params->rotary_dim != 0 && params->rotary_dim != r))
        return kern__err(KERN_ERR_SHAPE, "%s: table width %lld must be even and equal rotary_dim",
                         op, (long long)r);
    if (!(theta > 1 && theta < 1e300))
        return kern__err(KERN_ERR_ARG, "%s: params.theta=%g must be > 1 and finite (0 = 10000)",
                         op, theta);
    if (P > 0 && r > 1 && table->stride[1] != 1)
        return kern__err(KERN_ERR_LAYOUT, "%s: table's last dim needs unit stride", op);
    if (kern__tensor_self_overlap(table))
        return kern__err(KERN_ERR_LAYOUT, "%s: table has overlapping elements", op);
    if (P > ((int64_t)1 << 31))
        return kern__err(KERN_ERR_ARG, "%s: %lld positions (at most 2^31)", op, (long long)P);
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    half = r / 2;
    if (P > 0 && half > 0) {
        invf = (float *)kern__workspace(ctx, (size_t)half * sizeof(float));
        if (!invf) st = kern__err(KERN_ERR_NOMEM, "%s: no scratch for %lld frequencies", op,
                                  (long long)half);
    }
    if (invf) {
        kern__rope_invf(theta, r, invf);
        for (pos = 0; pos < P; pos++) {
            float *row = (float *)table->data + pos * table->stride[0];
            kern__rope_cs((double)pos, invf, 0, half, row, row + half);
        }
    }
    kern__op_end(ctx);
    return st;
}

/* -------------------------------------------------------------- silu_mul */

typedef struct kern__rows_job {
    const kern__rope_fns *fns;
    const char *a, *b;
    char *o;
    kern_dtype adt, bdt, odt;
    int nd;                     /* leading dims */
    int64_t shape[KERN_MAX_DIMS];
    int64_t as[KERN_MAX_DIMS], bs[KERN_MAX_DIMS], os[KERN_MAX_DIMS]; /* bytes */
    int64_t F, rows, per_task;
} kern__rows_job;

static void kern__silu_mul_task(void *arg, int64_t task, int thread) {
    const kern__rows_job *J = (const kern__rows_job *)arg;
    int64_t row, r0 = task * J->per_task, r1 = r0 + J->per_task;
    (void)thread;
    if (r1 > J->rows) r1 = J->rows;
    for (row = r0; row < r1; row++) {
        int64_t rem = row, ao = 0, bo = 0, oo = 0, i;
        int d;
        for (d = J->nd - 1; d >= 0; d--) {
            i = rem % J->shape[d];
            rem /= J->shape[d];
            ao += i * J->as[d];
            bo += i * J->bs[d];
            oo += i * J->os[d];
        }
        J->fns->silu_mul(J->a + ao, J->adt, J->b + bo, J->bdt, J->o + oo, J->odt, J->F);
    }
}

KERN_API kern_status kern_silu_mul(kern_ctx *ctx, const kern_tensor *a, const kern_tensor *b,
                                   const kern_tensor *out) {
    static const char *op = "kern_silu_mul";
    kern_status st;
    kern__rows_job J;
    int d, nd;
    int64_t F;
    if (!a || !out) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !a ? "a" : "out");
    if ((st = kern_tensor_check(a, op, "a")) != KERN_OK) return st;
    if (b && (st = kern_tensor_check(b, op, "b")) != KERN_OK) return st;
    if ((st = kern_tensor_check(out, op, "out")) != KERN_OK) return st;
    if (!kern__llm_float_dt(a->dtype) || (b && !kern__llm_float_dt(b->dtype)) ||
        !kern__llm_float_dt(out->dtype)) {
        const kern_tensor *t = !kern__llm_float_dt(a->dtype) ? a : !kern__llm_float_dt(out->dtype) ? out : b;
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s is not f32/bf16/f16", op,
                         t == a ? "a" : t == b ? "b" : "out", kern_dtype_name(t->dtype));
    }
    nd = a->ndim;
    if (nd < 1) return kern__err(KERN_ERR_SHAPE, "%s: a must have at least 1 dim", op);
    if (out->ndim != nd || (b && b->ndim != nd))
        return kern__err(KERN_ERR_SHAPE, "%s: a has %d dims but %s has %d", op, nd,
                         out->ndim != nd ? "out" : "b", out->ndim != nd ? out->ndim : b->ndim);
    F = b ? a->shape[nd - 1] : a->shape[nd - 1] / 2;
    if (!b && a->shape[nd - 1] % 2)
        return kern__err(KERN_ERR_SHAPE, "%s: without b, a's last dim (%lld) must be even: [gate | up]",
                         op, (long long)a->shape[nd - 1]);
    for (d = 0; d < nd; d++) {
        int64_t want = d == nd - 1 ? F : a->shape[d];
        if (out->shape[d] != want || (b && b->shape[d] != want))
            return kern__err(KERN_ERR_SHAPE, "%s: %s.shape[%d]=%lld, want %lld", op,
                             out->shape[d] != want ? "out" : "b", d,
                             (long long)(out->shape[d] != want ? out->shape[d] : b->shape[d]),
                             (long long)want);
    }
    if (F > 1 && (a->stride[nd - 1] != 1 || out->stride[nd - 1] != 1 ||
                  (b && b->stride[nd - 1] != 1)))
        return kern__err(KERN_ERR_LAYOUT, "%s: the last dim needs unit stride", op);
    if (kern__tensor_self_overlap(out))
        return kern__err(KERN_ERR_LAYOUT, "%s: out has overlapping elements", op);
    if (b ? (!kern__llm_same_view(out, a) && kern_tensors_overlap(out, a)) ||
                (!kern__llm_same_view(out, b) && kern_tensors_overlap(out, b))
          : kern_tensors_overlap(out, a))
        return kern__err(KERN_ERR_ARG, "%s: out overlaps %s without being it", op,
                         b ? (kern_tensors_overlap(out, a) ? "a" : "b") : "a");
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    if (kern_tensor_numel(out) > 0) {
        size_t ae = kern_dtype_size(a->dtype), oe = kern_dtype_size(out->dtype);
        size_t be = b ? kern_dtype_size(b->dtype) : ae;
        memset(&J, 0, sizeof J);
        J.fns = kern__rope_fns_for(kern_ctx_isa(ctx));
        J.a = (const char *)a->data;
        J.b = b ? (const char *)b->data : J.a + F * (int64_t)ae;
        J.o = (char *)out->data;
        J.adt = a->dtype;
        J.bdt = b ? b->dtype : a->dtype;
        J.odt = out->dtype;
        J.nd = nd - 1;
        J.rows = 1;
        for (d = 0; d < nd - 1; d++) {
            J.shape[d] = a->shape[d];
            J.as[d] = a->stride[d] * (int64_t)ae;
            J.bs[d] = (b ? b->stride[d] : a->stride[d]) * (int64_t)be;
            J.os[d] = out->stride[d] * (int64_t)oe;
            J.rows *= a->shape[d];
        }
        J.F = F;
        J.per_task = (32768 + F - 1) / F;
        st = kern_parallel_for(ctx, (J.rows + J.per_task - 1) / J.per_task, kern__silu_mul_task,
                               &J);
    }
    kern__op_end(ctx);
    return st;
}

/* ------------------------------------------------------------- kv_append */

/* A KV cache's dtype: a float one, or i8 with a scale tensor. */
static int kern__llm_cache_dt(kern_dtype dt) { return kern__llm_float_dt(dt) || dt == KERN_I8; }

/* An i8 KV cache's scale tensor: f32 [B, Lmax, Hkv] (cache c's B, Lmax,
 * Hkv), given exactly when c is i8 (c NULL: sc must be NULL too), not
 * overlapping `other` (sc itself skipped); `written` (kv_append): no
 * overlapping elements either. Messages name op, cn and sn. */
static kern_status kern__llm_kv_scale_check(const char *op, const kern_tensor *c, const kern_tensor *sc,
                                            const char *cn, const char *sn, int written,
                                            const kern_tensor *const *other, int n_other) {
    kern_status st;
    int i;
    if (!c) {
        if (sc) return kern__err(KERN_ERR_ARG, "%s: %s without a %s", op, sn, cn);
        return KERN_OK;
    }
    if ((c->dtype == KERN_I8) != (sc != NULL))
        return kern__err(KERN_ERR_ARG, sc ? "%s: %s is only for an i8 %s" : "%s: %s is needed by an i8 %s "
                         "([B, Lmax, Hkv] f32)", op, sn, cn);
    if (!sc) return KERN_OK;
    if ((st = kern_tensor_check(sc, op, sn)) != KERN_OK) return st;
    if (sc->dtype != KERN_F32)
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s, want f32", op, sn, kern_dtype_name(sc->dtype));
    if (sc->ndim != 3 || sc->shape[0] != c->shape[0] || sc->shape[1] != c->shape[1] ||
        sc->shape[2] != c->shape[2])
        return kern__err(KERN_ERR_SHAPE, "%s: %s must be [%lld, %lld, %lld] (%s's B, Lmax, Hkv)", op, sn,
                         (long long)c->shape[0], (long long)c->shape[1], (long long)c->shape[2], cn);
    if (written && kern__tensor_self_overlap(sc))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s has overlapping elements", op, sn);
    for (i = 0; i < n_other; i++)
        if (other[i] && other[i] != sc && kern_tensors_overlap(sc, other[i]))
            return kern__err(KERN_ERR_ARG, "%s: %s overlaps %s", op, sn,
                             written ? "another operand" : "out");
    return KERN_OK;
}

typedef struct kern__kv_job {
    const kern__rope_fns *fns;
    const kern_tensor *nw[2], *cache[2], *scale[2];
    const kern_tensor *k_lens;
    int64_t Lnew;
} kern__kv_job;

static void kern__kv_task(void *arg, int64_t task, int thread) {
    const kern__kv_job *J = (const kern__kv_job *)arg;
    int64_t b = task / J->Lnew, j = task % J->Lnew, h;
    int64_t pos = kern__llm_ix(J->k_lens, b) + j;
    int w;
    (void)thread;
    for (w = 0; w < 2; w++) {
        const kern_tensor *n = J->nw[w], *c = J->cache[w];
        size_t ne, ce;
        if (!n) continue;
        ne = kern_dtype_size(n->dtype);
        ce = kern_dtype_size(c->dtype);
        if (c->dtype == KERN_I8) { /* codes + the row's scale */
            const kern_tensor *sc = J->scale[w];
            for (h = 0; h < n->shape[2]; h++) {
                float f = kern__s_quant_row_s8(
                    (const char *)n->data + (b * n->stride[0] + j * n->stride[1] + h * n->stride[2]) * (int64_t)ne,
                    n->dtype, n->shape[3],
                    (int8_t *)c->data + (b * c->stride[0] + pos * c->stride[1] + h * c->stride[2]));
                memcpy((char *)sc->data + (b * sc->stride[0] + pos * sc->stride[1] + h * sc->stride[2]) * 4, &f, 4);
            }
            continue;
        }
        for (h = 0; h < n->shape[2]; h++)
            J->fns->copy((const char *)n->data +
                             (b * n->stride[0] + j * n->stride[1] + h * n->stride[2]) * (int64_t)ne,
                         n->dtype,
                         (char *)c->data +
                             (b * c->stride[0] + pos * c->stride[1] + h * c->stride[2]) * (int64_t)ce,
                         c->dtype, n->shape[3]);
    }
}

static kern_status kern__kv_check(const kern_tensor *n, const kern_tensor *c, const char *nn,
                                  const char *cn, const char *op) {
    kern_status st;
    int d;
    if ((st = kern_tensor_check(n, op, nn)) != KERN_OK) return st;
    if ((st = kern_tensor_check(c, op, cn)) != KERN_OK) return st;
    if (!kern__llm_float_dt(n->dtype) || !kern__llm_cache_dt(c->dtype))
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s is not f32/bf16/f16%s", op,
                         kern__llm_float_dt(n->dtype) ? cn : nn,
                         kern_dtype_name(kern__llm_float_dt(n->dtype) ? c->dtype : n->dtype),
                         kern__llm_float_dt(n->dtype) ? " (or i8 with a scale tensor)" : "");
    if (n->ndim != 4 || c->ndim != 4)
        return kern__err(KERN_ERR_SHAPE, "%s: %s must be 4-D [B, L, Hkv, D]", op,
                         n->ndim != 4 ? nn : cn);
    for (d = 0; d < 4; d++)
        if (d != 1 && n->shape[d] != c->shape[d])
            return kern__err(KERN_ERR_SHAPE, "%s: %s.shape[%d]=%lld but %s.shape[%d]=%lld", op, cn,
                             d, (long long)c->shape[d], nn, d, (long long)n->shape[d]);
    if (n->shape[3] > 1 && (n->stride[3] != 1 || c->stride[3] != 1))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s's last dim needs unit stride", op,
                         n->stride[3] != 1 ? nn : cn);
    if (kern__tensor_self_overlap(c))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s has overlapping elements", op, cn);
    if (kern_tensors_overlap(n, c))
        return kern__err(KERN_ERR_ARG, "%s: %s overlaps %s", op, nn, cn);
    return KERN_OK;
}

KERN_API kern_status kern_kv_append(kern_ctx *ctx, const kern_tensor *k_new,
                                    const kern_tensor *v_new, const kern_tensor *k_cache,
                                    const kern_tensor *v_cache, const kern_tensor *k_lens) {
    return kern_kv_append_ex(ctx, k_new, v_new, k_cache, v_cache, k_lens, NULL);
}

KERN_API kern_status kern_kv_append_ex(kern_ctx *ctx, const kern_tensor *k_new,
                                       const kern_tensor *v_new, const kern_tensor *k_cache,
                                       const kern_tensor *v_cache, const kern_tensor *k_lens,
                                       const kern_kv_append_params *params) {
    static const char *op = "kern_kv_append";
    kern_status st;
    kern__kv_job J;
    kern_kv_append_params p;
    int64_t b, B, Lnew, Lmax;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    if (!k_new || !k_cache || !k_lens)
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op,
                         !k_new ? "k_new" : !k_cache ? "k_cache" : "k_lens");
    if (!v_new != !v_cache)
        return kern__err(KERN_ERR_ARG, "%s: v_new and v_cache must both be given or both NULL", op);
    if ((st = kern__kv_check(k_new, k_cache, "k_new", "k_cache", op)) != KERN_OK) return st;
    if (v_new) {
        if ((st = kern__kv_check(v_new, v_cache, "v_new", "v_cache", op)) != KERN_OK) return st;
        if (v_new->shape[0] != k_new->shape[0] || v_new->shape[1] != k_new->shape[1] ||
            v_new->shape[2] != k_new->shape[2] || v_cache->shape[1] != k_cache->shape[1])
            return kern__err(KERN_ERR_SHAPE, "%s: v_new/v_cache differ from k_new/k_cache in B, L or Hkv",
                             op);
        if (kern_tensors_overlap(v_cache, k_cache) || kern_tensors_overlap(v_cache, k_new) ||
            kern_tensors_overlap(k_cache, v_new))
            return kern__err(KERN_ERR_ARG, "%s: the caches overlap each other or the new rows", op);
    }
    B = k_new->shape[0];
    Lnew = k_new->shape[1];
    Lmax = k_cache->shape[1];
    if ((st = kern__llm_check_lens(k_lens, B, op, "k_lens")) != KERN_OK) return st;
    if (kern__tensor_self_overlap(k_lens) || kern_tensors_overlap(k_lens, k_cache) ||
        (v_cache && kern_tensors_overlap(k_lens, v_cache)))
        return kern__err(KERN_ERR_ARG, "%s: k_lens overlaps itself or a cache", op);
    {
        const kern_tensor *oth[7];
        oth[0] = k_new; oth[1] = v_new; oth[2] = k_cache; oth[3] = v_cache; oth[4] = k_lens;
        oth[5] = p.k_scale; oth[6] = p.v_scale;
        if ((st = kern__llm_kv_scale_check(op, k_cache, p.k_scale, "k_cache", "params.k_scale", 1, oth, 7)) ||
            (st = kern__llm_kv_scale_check(op, v_cache, p.v_scale, "v_cache", "params.v_scale", 1, oth, 7)))
            return st;
    }
    for (b = 0; b < B; b++) {
        int64_t n = kern__llm_ix(k_lens, b);
        if (n < 0)
            return kern__err(KERN_ERR_INDEX, "%s: k_lens[%lld]=%lld is negative", op, (long long)b,
                             (long long)n);
        if (n > Lmax - Lnew)
            return kern__err(KERN_ERR_SHAPE,
                             "%s: sequence %lld has %lld rows + %lld new > the cache's %lld", op,
                             (long long)b, (long long)n, (long long)Lnew, (long long)Lmax);
        if (k_lens->dtype == KERN_I32 && n + Lnew > INT32_MAX)
            return kern__err(KERN_ERR_ARG, "%s: k_lens[%lld] would pass INT32_MAX", op, (long long)b);
    }
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    if (B > 0 && Lnew > 0) {
        memset(&J, 0, sizeof J);
        J.fns = kern__rope_fns_for(kern_ctx_isa(ctx));
        J.nw[0] = k_new;
        J.nw[1] = v_new;
        J.cache[0] = k_cache;
        J.cache[1] = v_cache;
        J.scale[0] = p.k_scale;
        J.scale[1] = p.v_scale;
        J.k_lens = k_lens;
        J.Lnew = Lnew;
        st = kern_parallel_for(ctx, B * Lnew, kern__kv_task, &J);
        if (st == KERN_OK)
            for (b = 0; b < B; b++) {
                char *p = (char *)k_lens->data +
                          b * k_lens->stride[0] * (int64_t)kern_dtype_size(k_lens->dtype);
                int64_t n = kern__llm_ix(k_lens, b) + Lnew;
                if (k_lens->dtype == KERN_I64) {
                    memcpy(p, &n, sizeof n);
                } else {
                    int32_t n32 = (int32_t)n;
                    memcpy(p, &n32, sizeof n32);
                }
            }
    }
    kern__op_end(ctx);
    return st;
}

/* ----------------------------------------------------------- argmax/topk */

typedef struct kern__sel_job {
    const kern_tensor *x, *idx;
    int64_t V;
} kern__sel_job;

static float kern__sel_get(const kern_tensor *t, int64_t r, int64_t i) {
    return kern__s_load_f32((const char *)t->data +
                                (r * t->stride[0] + i * t->stride[1]) * (int64_t)kern_dtype_size(t->dtype),
                            t->dtype, 1);
}
static void kern__sel_put_idx(const kern_tensor *t, int64_t r, int64_t c, int64_t v) {
    char *p;
    if (!t) return;
    p = (char *)t->data + (r * t->stride[0] + (t->ndim > 1 ? c * t->stride[1] : 0)) *
                              (int64_t)kern_dtype_size(t->dtype);
    if (t->dtype == KERN_I64) {
        memcpy(p, &v, sizeof v);
    } else {
        int32_t v32 = (int32_t)v;
        memcpy(p, &v32, sizeof v32);
    }
}

static void kern__argmax_task(void *arg, int64_t r, int thread) {
    const kern__sel_job *J = (const kern__sel_job *)arg;
    int64_t i, best = 0;
    float bv = kern__sel_get(J->x, r, 0);
    (void)thread;
    for (i = 1; i < J->V && bv == bv; i++) { /* a NaN cannot be beaten */
        float v = kern__sel_get(J->x, r, i);
        if (v > bv || v != v) {
            bv = v;
            best = i;
        }
    }
    kern__sel_put_idx(J->idx, r, 0, best);
}

KERN_API kern_status kern_argmax(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *indices) {
    static const char *op = "kern_argmax";
    kern_status st;
    kern__sel_job J;
    if (!x || !indices) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !x ? "x" : "indices");
    if ((st = kern_tensor_check(x, op, "x")) != KERN_OK) return st;
    if ((st = kern_tensor_check(indices, op, "indices")) != KERN_OK) return st;
    if (!kern__llm_float_dt(x->dtype))
        return kern__err(KERN_ERR_DTYPE, "%s: x.dtype=%s is not f32/bf16/f16", op,
                         kern_dtype_name(x->dtype));
    if (indices->dtype != KERN_I32 && indices->dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: indices.dtype=%s is not i32/i64", op,
                         kern_dtype_name(indices->dtype));
    if (x->ndim != 2 || indices->ndim != 1 || indices->shape[0] != x->shape[0])
        return kern__err(KERN_ERR_SHAPE, "%s: x must be [R, V] and indices [R]", op);
    if (x->shape[1] == 0 && x->shape[0] > 0)
        return kern__err(KERN_ERR_SHAPE, "%s: argmax over an empty last dim", op);
    if (indices->dtype == KERN_I32 && x->shape[1] > INT32_MAX)
        return kern__err(KERN_ERR_DTYPE, "%s: V=%lld needs i64 indices", op, (long long)x->shape[1]);
    if (kern__tensor_self_overlap(indices))
        return kern__err(KERN_ERR_LAYOUT, "%s: indices has overlapping elements", op);
    if (kern_tensors_overlap(indices, x))
        return kern__err(KERN_ERR_ARG, "%s: indices overlaps x", op);
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    memset(&J, 0, sizeof J);
    J.x = x;
    J.idx = indices;
    J.V = x->shape[1];
    st = kern_parallel_for(ctx, x->shape[0], kern__argmax_task, &J);
    kern__op_end(ctx);
    return st;
}

/* topk: a binary heap of k indices per row kept in the indices row itself,
 * the worst kept element at its root. Order: a before b when a's value is
 * larger, or NaN and b's is not, or equal (both NaN included) with a lower
 * index. Scanning in index order, a later element enters only when it is
 * strictly better than the root: v > root or (v NaN, root not). */
typedef struct kern__topk_job {
    const kern__rope_fns *fns;
    const kern_tensor *x, *val, *idx;
    int64_t V, k;
} kern__topk_job;

static int kern__topk_before(float a, int64_t ia, float b, int64_t ib) {
    if (a != a) return b == b || ia < ib;
    if (b != b) return 0;
    return a > b || (a == b && ia < ib);
}
static int64_t kern__topk_hget(const kern_tensor *t, int64_t r, int64_t c) {
    const char *p = (const char *)t->data +
                    (r * t->stride[0] + c * t->stride[1]) * (int64_t)kern_dtype_size(t->dtype);
    if (t->dtype == KERN_I64) {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    } else {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
}
/* Sifts the element at slot c down a heap of n slots (root = the worst). */
static void kern__topk_sift(const kern__topk_job *J, int64_t r, int64_t c, int64_t n) {
    int64_t e = kern__topk_hget(J->idx, r, c);
    float ev = kern__sel_get(J->x, r, e);
    for (;;) {
        int64_t ch = 2 * c + 1, w, wi;
        float wv;
        if (ch >= n) break;
        w = ch;
        wi = kern__topk_hget(J->idx, r, ch);
        wv = kern__sel_get(J->x, r, wi);
        if (ch + 1 < n) {
            int64_t i2 = kern__topk_hget(J->idx, r, ch + 1);
            float v2 = kern__sel_get(J->x, r, i2);
            if (kern__topk_before(wv, wi, v2, i2)) { /* the worse child rises */
                w = ch + 1;
                wi = i2;
                wv = v2;
            }
        }
        if (!kern__topk_before(ev, e, wv, wi)) break;
        kern__sel_put_idx(J->idx, r, c, wi);
        c = w;
    }
    kern__sel_put_idx(J->idx, r, c, e);
}

static void kern__topk_task(void *arg, int64_t r, int thread) {
    const kern__topk_job *J = (const kern__topk_job *)arg;
    int64_t k = J->k, V = J->V, i, c;
    const char *row = (const char *)J->x->data +
                      r * J->x->stride[0] * (int64_t)kern_dtype_size(J->x->dtype);
    int unit = J->x->stride[1] == 1 || V <= 1;
    float thr;
    (void)thread;
    if (k == 0) return;
    for (i = 0; i < k; i++) kern__sel_put_idx(J->idx, r, i, i);
    for (c = k / 2 - 1; c >= 0; c--) kern__topk_sift(J, r, c, k);
    thr = kern__sel_get(J->x, r, kern__topk_hget(J->idx, r, 0));
    i = k;
    while (i < V && thr == thr) { /* a NaN root cannot be beaten */
        float v;
        if (unit) {
            i = J->fns->above(row, J->x->dtype, i, V, thr);
            if (i >= V) break;
        }
        v = kern__sel_get(J->x, r, i);
        if (v > thr || v != v) {
            kern__sel_put_idx(J->idx, r, 0, i);
            kern__topk_sift(J, r, 0, k);
            thr = kern__sel_get(J->x, r, kern__topk_hget(J->idx, r, 0));
        }
        i++;
    }
    /* heap sort: the worst moves to the end, leaving the best first */
    for (c = k - 1; c > 0; c--) {
        int64_t a = kern__topk_hget(J->idx, r, 0), b = kern__topk_hget(J->idx, r, c);
        kern__sel_put_idx(J->idx, r, 0, b);
        kern__sel_put_idx(J->idx, r, c, a);
        kern__topk_sift(J, r, 0, c);
    }
    if (J->val) {
        size_t ve = kern_dtype_size(J->val->dtype), xe = kern_dtype_size(J->x->dtype);
        for (c = 0; c < k; c++) {
            int64_t ix = kern__topk_hget(J->idx, r, c);
            char *dst = (char *)J->val->data + (r * J->val->stride[0] + c * J->val->stride[1]) * (int64_t)ve;
            const char *src = row + ix * J->x->stride[1] * (int64_t)xe;
            if (J->val->dtype == J->x->dtype) memcpy(dst, src, ve); /* NaN payloads kept */
            else kern__s_store_f32(dst, J->val->dtype, kern__s_load_f32(src, J->x->dtype, 1), 1, 0);
        }
    }
}

KERN_API kern_status kern_topk(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *values,
                               const kern_tensor *indices) {
    static const char *op = "kern_topk";
    kern_status st;
    kern__topk_job J;
    int64_t R, V, k;
    if (!x || !indices) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !x ? "x" : "indices");
    if ((st = kern_tensor_check(x, op, "x")) != KERN_OK) return st;
    if ((st = kern_tensor_check(indices, op, "indices")) != KERN_OK) return st;
    if (values && (st = kern_tensor_check(values, op, "values")) != KERN_OK) return st;
    if (!kern__llm_float_dt(x->dtype) || (values && !kern__llm_float_dt(values->dtype)))
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s is not f32/bf16/f16", op,
                         kern__llm_float_dt(x->dtype) ? "values" : "x",
                         kern_dtype_name(kern__llm_float_dt(x->dtype) ? values->dtype : x->dtype));
    if (indices->dtype != KERN_I32 && indices->dtype != KERN_I64)
        return kern__err(KERN_ERR_DTYPE, "%s: indices.dtype=%s is not i32/i64", op,
                         kern_dtype_name(indices->dtype));
    if (x->ndim != 2 || indices->ndim != 2)
        return kern__err(KERN_ERR_SHAPE, "%s: x must be [R, V] and indices [R, k]", op);
    R = x->shape[0];
    V = x->shape[1];
    k = indices->shape[1];
    if (indices->shape[0] != R)
        return kern__err(KERN_ERR_SHAPE, "%s: indices.shape[0]=%lld but x has %lld rows", op,
                         (long long)indices->shape[0], (long long)R);
    if (k > V)
        return kern__err(KERN_ERR_SHAPE, "%s: k=%lld is larger than the last dim (%lld)", op,
                         (long long)k, (long long)V);
    if (values && (values->ndim != 2 || values->shape[0] != R || values->shape[1] != k))
        return kern__err(KERN_ERR_SHAPE, "%s: values must be [%lld, %lld] like indices", op,
                         (long long)R, (long long)k);
    if (indices->dtype == KERN_I32 && V > INT32_MAX)
        return kern__err(KERN_ERR_DTYPE, "%s: V=%lld needs i64 indices", op, (long long)V);
    if (kern__tensor_self_overlap(indices) || (values && kern__tensor_self_overlap(values)))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s has overlapping elements", op,
                         kern__tensor_self_overlap(indices) ? "indices" : "values");
    if (kern_tensors_overlap(indices, x) ||
        (values && (kern_tensors_overlap(values, x) || kern_tensors_overlap(values, indices))))
        return kern__err(KERN_ERR_ARG, "%s: %s overlaps %s", op,
                         kern_tensors_overlap(indices, x) ? "indices" : "values",
                         kern_tensors_overlap(indices, x) || kern_tensors_overlap(values, x) ? "x" : "indices");
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    memset(&J, 0, sizeof J);
    J.fns = kern__rope_fns_for(kern_ctx_isa(ctx));
    J.x = x;
    J.val = values;
    J.idx = indices;
    J.V = V;
    J.k = k;
    st = kern_parallel_for(ctx, R, kern__topk_task, &J);
    kern__op_end(ctx);
    return st;
}

/* ------------------------------------------------------------------ gemv
 * Four weight rows at a time against one or two x rows: each weight
 * vector is loaded once and feeds every x row, so at M = 1..2 the weight
 * streams from memory exactly once; larger M re-reads a block of
 * KERN__GEMV_NB rows from L2 per pair of x rows. out[m * 4 + r] is the
 * dot product of x row m and weight row r (f32 sums in 8 lanes per row,
 * two partial sums per lane at M = 1, then a horizontal add). */
#define KERN__GEMV_NB 16 /* weight rows per task (a multiple of 2 KERN_GLU_GROUP) */
#define KERN__GEMV_MB 8  /* x rows per epilogue tile */

typedef void (*kern__gemv_dot_fn)(const char *const *w, kern_dtype wdt, const char *x0,
                                  const char *x1, kern_dtype xdt, int m, int64_t K, float *out);

static float kern__gemv_wget(const char *w, kern_dtype wdt, int64_t k) {
    if (wdt == KERN_I8) return (float)((const int8_t *)w)[k];
    return kern__s_load_f32(w + k * (int64_t)kern_dtype_size(wdt), wdt, 1);
}
static void kern__gemv_dot__scalar(const char *const *w, kern_dtype wdt, const char *x0,
                                   const char *x1, kern_dtype xdt, int m, int64_t K, float *out) {
    size_t xe = kern_dtype_size(xdt);
    int r, i;
    for (i = 0; i < m; i++)
        for (r = 0; r < 4; r++) {
            const char *x = i ? x1 : x0;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int64_t k;
            for (k = 0; k < K; k++)
                acc[k & 7] += kern__s_mul(kern__s_load_f32(x + k * (int64_t)xe, xdt, 1),
                                          kern__gemv_wget(w[r], wdt, k));
            out[i * 4 + r] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
                             ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        }
}

#ifdef KERN_X86
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__gemv_wload__avx2(const char *p, kern_dtype wdt,
                                                             int64_t k, int n) {
    if (wdt == KERN_I8) {
        __m128i q;
        if (n >= 8) {
            q = _mm_loadl_epi64((const __m128i *)(p + k));
        } else {
            int8_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            memcpy(t, p + k, (size_t)n);
            q = _mm_loadl_epi64((const __m128i *)t);
        }
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    }
    if (wdt == KERN_BF16 && n >= 8)
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * k))), 16));
    return kern__v_load_f32__avx2(p + k * (int64_t)kern_dtype_size(wdt), wdt, n);
}
KERN_TARGET_AVX2 static inline float kern__gemv_hsum__avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
/* How far ahead (bytes from the current element of each of four weight
 * rows w0.., wb bytes an element) the AVX-512 GEMV bodies prefetch, into
 * L2, not L1: rows of at most 4 KiB (four rows fit half of L1) fetch the
 * next four rows (adjacent when the rows are) at the same k; longer rows
 * fetch 2 KiB ahead in their own row. On Zen 4 at one thread this reads
 * 25-33 GB/s where prefetching into L1 at 128 elements read 17-21 (f32
 * and bf16 at the Llama shapes, docs/llm.md): L1 prefetches hold fill
 * buffers the demand loads then wait for. */
static inline int64_t kern__gemv_pf_dist(int64_t K, int64_t wb, const char *w0, const char *w1) {
    return 4 * K * wb <= 16384 ? 4 * (int64_t)(w1 - w0) : 2048;
}
/* The AVX2 body fetches the next four rows at the same k whatever the row
 * length: 2 KiB ahead in the own row left every group of four long rows
 * starting with three cold streams. Zen 3 (the AVX2 body's machine here),
 * N 4096 and 11008, K 4096, 3 alternated rounds, min: f32 M1 1.08-1.12x
 * (t1) and 1.07-1.24x (t2), M4 1.06-1.09x; bf16 M1 1.21-1.28x, M4
 * 1.06-1.18x; i8 (rows of 4 KiB: already so) level. 8 rows ahead measured
 * about the same, 4 KiB ahead in the own row 0.83-1.06x. Not measured on
 * an AVX-512 machine: those bodies keep kern__gemv_pf_dist. */
static inline int64_t kern__gemv_pf_next4(const char *w0, const char *w1) {
    return 4 * (int64_t)(w1 - w0);
}
/* The body for one weight dtype and one x-row count (constants after
 * inlining). */
/* n <= 8 elements of an x row as f32; bf16 widened by a shift alone (a
 * NaN stays a NaN: the products need no quiet bit), as the weights are */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__gemv_xload__avx2(const char *p, kern_dtype xdt, int n) {
    if (xdt == KERN_BF16 && n == 8)
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16));
    return kern__v_load_f32__avx2(p, xdt, n);
}
KERN_TARGET_AVX2 KERN__AINLINE void kern__gemv_dot_body__avx2(const char *const *w, kern_dtype wdt,
                                                              const char *x0, const char *x1,
                                                              kern_dtype xdt, int m, int64_t K,
                                                              float *out) {
    const char *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    size_t xe = kern_dtype_size(xdt);
    int64_t wb = wdt == KERN_I8 ? 1 : (int64_t)kern_dtype_size(wdt), k = 0;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0; /* x0 rows 0..3 */
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0; /* m = 2: x1; m = 1: second k half */
    const int64_t pd = kern__gemv_pf_next4(w0, w1);
    if (m == 1) {
        for (; k + 16 <= K; k += 16) {
            __m256 xa = kern__gemv_xload__avx2(x0 + k * (int64_t)xe, xdt, 8);
            __m256 xb = kern__gemv_xload__avx2(x0 + (k + 8) * (int64_t)xe, xdt, 8);
            _mm_prefetch(w0 + k * wb + pd, _MM_HINT_T1);
            _mm_prefetch(w1 + k * wb + pd, _MM_HINT_T1);
            _mm_prefetch(w2 + k * wb + pd, _MM_HINT_T1);
            _mm_prefetch(w3 + k * wb + pd, _MM_HINT_T1);
            a0 = _mm256_fmadd_ps(xa, kern__gemv_wload__avx2(w0, wdt, k, 8), a0);
            a1 = _mm256_fmadd_ps(xa, kern__gemv_wload__avx2(w1, wdt, k, 8), a1);
            a2 = _mm256_fmadd_ps(xa, kern__gemv_wload__avx2(w2, wdt, k, 8), a2);
            a3 = _mm256_fmadd_ps(xa, kern__gemv_wload__avx2(w3, wdt, k, 8), a3);
            b0 = _mm256_fmadd_ps(xb, kern__gemv_wload__avx2(w0, wdt, k + 8, 8), b0);
            b1 = _mm256_fmadd_ps(xb, kern__gemv_wload__avx2(w1, wdt, k + 8, 8), b1);
            b2 = _mm256_fmadd_ps(xb, kern__gemv_wload__avx2(w2, wdt, k + 8, 8), b2);
            b3 = _mm256_fmadd_ps(xb, kern__gemv_wload__avx2(w3, wdt, k + 8, 8), b3);
        }
        for (; k < K; k += 8) {
            int n = K - k >= 8 ? 8 : (int)(K - k);
            __m256 xa = kern__gemv_xload__avx2(x0 + k * (int64_t)xe, xdt, n);
            a0 = _mm256_fmadd_ps(xa, kern__gemv_wload__avx2(w0, wdt, k, n), a0);
            a1 = _mm256_fmadd_ps(xa, kern__gemv_wload__avx2(w1, wdt, k, n), a1);
            a2 = _mm256_fmadd_ps(xa, kern__gemv_wload__avx2(w2, wdt, k, n), a2);
            a3 = _mm256_fmadd_ps(xa, kern__gemv_wload__avx2(w3, wdt, k, n), a3);
        }
        out[0] = kern__gemv_hsum__avx2(_mm256_add_ps(a0, b0));
        out[1] = kern__gemv_hsum__avx2(_mm256_add_ps(a1, b1));
        out[2] = kern__gemv_hsum__avx2(_mm256_add_ps(a2, b2));
        out[3] = kern__gemv_hsum__avx2(_mm256_add_ps(a3, b3));
        return;
    }
    /* each weight vector used by both x rows as soon as it is loaded: one
     * weight register live, so the 8 accumulators, 2 x vectors and the
     * widening's temporaries fit the 16 registers (with all four weight
     * vectors live GCC spilled an accumulator, and the loop waited on its
     * store-to-load round trip: bf16 M4 ran at a quarter of DRAM speed) */
    for (; k < K; k += 8) {
        int n = K - k >= 8 ? 8 : (int)(K - k);
        __m256 xa = kern__gemv_xload__avx2(x0 + k * (int64_t)xe, xdt, n);
        __m256 xb = kern__gemv_xload__avx2(x1 + k * (int64_t)xe, xdt, n);
        __m256 v;
        if ((k & 15) == 0) {
            _mm_prefetch(w0 + k * wb + pd, _MM_HINT_T1);
            _mm_prefetch(w1 + k * wb + pd, _MM_HINT_T1);
            _mm_prefetch(w2 + k * wb + pd, _MM_HINT_T1);
            _mm_prefetch(w3 + k * wb + pd, _MM_HINT_T1);
        }
        v = kern__gemv_wload__avx2(w0, wdt, k, n);
        a0 = _mm256_fmadd_ps(xa, v, a0);
        b0 = _mm256_fmadd_ps(xb, v, b0);
        v = kern__gemv_wload__avx2(w1, wdt, k, n);
        a1 = _mm256_fmadd_ps(xa, v, a1);
        b1 = _mm256_fmadd_ps(xb, v, b1);
        v = kern__gemv_wload__avx2(w2, wdt, k, n);
        a2 = _mm256_fmadd_ps(xa, v, a2);
        b2 = _mm256_fmadd_ps(xb, v, b2);
        v = kern__gemv_wload__avx2(w3, wdt, k, n);
        a3 = _mm256_fmadd_ps(xa, v, a3);
        b3 = _mm256_fmadd_ps(xb, v, b3);
    }
    out[0] = kern__gemv_hsum__avx2(a0);
    out[1] = kern__gemv_hsum__avx2(a1);
    out[2] = kern__gemv_hsum__avx2(a2);
    out[3] = kern__gemv_hsum__avx2(a3);
    out[4] = kern__gemv_hsum__avx2(b0);
    out[5] = kern__gemv_hsum__avx2(b1);
    out[6] = kern__gemv_hsum__avx2(b2);
    out[7] = kern__gemv_hsum__avx2(b3);
}
/* The (weight, x) dtype pairs the GEMV dispatchers specialize their
 * bodies for (CASE(WDT, XDT) each); other pairs run the generic body. */
#define KERN__GEMV_DT_PAIRS(CASE)                                                           \
    CASE(KERN_F32, KERN_F32) CASE(KERN_BF16, KERN_F32) CASE(KERN_I8, KERN_F32)             \
    CASE(KERN_BF16, KERN_BF16)
KERN_TARGET_AVX2 static void kern__gemv_dot__avx2(const char *const *w, kern_dtype wdt,
                                                  const char *x0, const char *x1, kern_dtype xdt,
                                                  int m, int64_t K, float *out) {
#define KERN__GEMV_CASE(WDT, XDT)                                                           \
    if (wdt == WDT && xdt == XDT) {                                                       \
        if (m == 1) kern__gemv_dot_body__avx2(w, WDT, x0, x1, XDT, 1, K, out);            \
        else kern__gemv_dot_body__avx2(w, WDT, x0, x1, XDT, 2, K, out);                   \
        return;                                                                           \
    }
    KERN__GEMV_DT_PAIRS(KERN__GEMV_CASE)
#undef KERN__GEMV_CASE
    if (m == 1) kern__gemv_dot_body__avx2(w, wdt, x0, x1, xdt, 1, K, out);
    else kern__gemv_dot_body__avx2(w, wdt, x0, x1, xdt, 2, K, out);
}
/* The AVX-512 form of the body above: 16 lanes a row, the same
 * prefetch. Two x rows against four weight rows are bound by the
 * arithmetic, not the weight stream: 16 lanes do them 20-30 % faster. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__gemv_wload__avx512(const char *p, kern_dtype wdt,
                                                                 int64_t k, int n) {
    if (wdt == KERN_I8) {
        __m128i q = n >= 16 ? _mm_loadu_si128((const __m128i *)(p + k))
                            : _mm_maskz_loadu_epi8(kern__tailmask__avx512(n), p + k);
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
    }
    if (wdt == KERN_BF16 && n >= 16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + 2 * k))), 16));
    if (wdt == KERN_F32 && n >= 16) return _mm512_loadu_ps(p + 4 * k);
    return kern__v_load_f32__avx512(p + k * (int64_t)kern_dtype_size(wdt), wdt, n);
}
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__gemv_xload__avx512(const char *p, kern_dtype xdt,
                                                                 int64_t k, int n) {
    if (xdt == KERN_F32 && n >= 16) return _mm512_loadu_ps(p + 4 * k);
    return kern__v_load_f32__avx512(p + k * (int64_t)kern_dtype_size(xdt), xdt, n);
}
KERN_TARGET_AVX512 KERN__AINLINE void kern__gemv_dot_body__avx512(const char *const *w,
                                                                  kern_dtype wdt, const char *x0,
                                                                  const char *x1, kern_dtype xdt,
                                                                  int m, int64_t K, float *out) {
    const char *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    int64_t wb = wdt == KERN_I8 ? 1 : (int64_t)kern_dtype_size(wdt), k = 0;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m512 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    const int64_t pd = kern__gemv_pf_dist(K, wb, w0, w1);
#define KERN__GEMV_PF4(o)                                                                     \
    _mm_prefetch(w0 + k * wb + pd + (o), _MM_HINT_T1);                                        \
    _mm_prefetch(w1 + k * wb + pd + (o), _MM_HINT_T1);                                        \
    _mm_prefetch(w2 + k * wb + pd + (o), _MM_HINT_T1);                                        \
    _mm_prefetch(w3 + k * wb + pd + (o), _MM_HINT_T1)
    if (m == 1) {
        for (; k + 32 <= K; k += 32) {
            __m512 xa = kern__gemv_xload__avx512(x0, xdt, k, 16);
            __m512 xb = kern__gemv_xload__avx512(x0, xdt, k + 16, 16);
            KERN__GEMV_PF4(0);
            if (wb == 4) { /* 128 bytes a row: two lines */
                KERN__GEMV_PF4(64);
            }
            a0 = _mm512_fmadd_ps(xa, kern__gemv_wload__avx512(w0, wdt, k, 16), a0);
            a1 = _mm512_fmadd_ps(xa, kern__gemv_wload__avx512(w1, wdt, k, 16), a1);
            a2 = _mm512_fmadd_ps(xa, kern__gemv_wload__avx512(w2, wdt, k, 16), a2);
            a3 = _mm512_fmadd_ps(xa, kern__gemv_wload__avx512(w3, wdt, k, 16), a3);
            b0 = _mm512_fmadd_ps(xb, kern__gemv_wload__avx512(w0, wdt, k + 16, 16), b0);
            b1 = _mm512_fmadd_ps(xb, kern__gemv_wload__avx512(w1, wdt, k + 16, 16), b1);
            b2 = _mm512_fmadd_ps(xb, kern__gemv_wload__avx512(w2, wdt, k + 16, 16), b2);
            b3 = _mm512_fmadd_ps(xb, kern__gemv_wload__avx512(w3, wdt, k + 16, 16), b3);
        }
        for (; k < K; k += 16) {
            int n = K - k >= 16 ? 16 : (int)(K - k);
            __m512 xa = kern__gemv_xload__avx512(x0, xdt, k, n);
            a0 = _mm512_fmadd_ps(xa, kern__gemv_wload__avx512(w0, wdt, k, n), a0);
            a1 = _mm512_fmadd_ps(xa, kern__gemv_wload__avx512(w1, wdt, k, n), a1);
            a2 = _mm512_fmadd_ps(xa, kern__gemv_wload__avx512(w2, wdt, k, n), a2);
            a3 = _mm512_fmadd_ps(xa, kern__gemv_wload__avx512(w3, wdt, k, n), a3);
        }
        a0 = _mm512_add_ps(a0, b0);
        a1 = _mm512_add_ps(a1, b1);
        a2 = _mm512_add_ps(a2, b2);
        a3 = _mm512_add_ps(a3, b3);
    } else {
        for (; k < K; k += 16) {
            int n = K - k >= 16 ? 16 : (int)(K - k);
            __m512 xa = kern__gemv_xload__avx512(x0, xdt, k, n);
            __m512 xb = kern__gemv_xload__avx512(x1, xdt, k, n);
            __m512 v0 = kern__gemv_wload__avx512(w0, wdt, k, n);
            __m512 v1 = kern__gemv_wload__avx512(w1, wdt, k, n);
            __m512 v2 = kern__gemv_wload__avx512(w2, wdt, k, n);
            __m512 v3 = kern__gemv_wload__avx512(w3, wdt, k, n);
            if (((k * wb) & 63) == 0) {
                KERN__GEMV_PF4(0);
            }
            a0 = _mm512_fmadd_ps(xa, v0, a0);
            a1 = _mm512_fmadd_ps(xa, v1, a1);
            a2 = _mm512_fmadd_ps(xa, v2, a2);
            a3 = _mm512_fmadd_ps(xa, v3, a3);
            b0 = _mm512_fmadd_ps(xb, v0, b0);
            b1 = _mm512_fmadd_ps(xb, v1, b1);
            b2 = _mm512_fmadd_ps(xb, v2, b2);
            b3 = _mm512_fmadd_ps(xb, v3, b3);
        }
        out[4] = _mm512_reduce_add_ps(b0);
        out[5] = _mm512_reduce_add_ps(b1);
        out[6] = _mm512_reduce_add_ps(b2);
        out[7] = _mm512_reduce_add_ps(b3);
    }
#undef KERN__GEMV_PF4
    out[0] = _mm512_reduce_add_ps(a0);
    out[1] = _mm512_reduce_add_ps(a1);
    out[2] = _mm512_reduce_add_ps(a2);
    out[3] = _mm512_reduce_add_ps(a3);
}
/* out[i] = the lane sum of c[i], i < n (the 4x4 bodies' final sums) */
KERN_TARGET_AVX512 KERN__AINLINE void kern__gemv_sums__avx512(float *out, const __m512 *c, int n) {
    int i;
    for (i = 0; i < n; i++) out[i] = _mm512_reduce_add_ps(c[i]);
}
/* Four x rows (x0 + i * xs bytes) against four weight rows in one pass:
 * 16 accumulators, each weight vector loaded and widened once for four
 * FMAs (the pair body loads it per pair, and reads the rows from cache
 * again for the second pair). Per (x row, weight row) the same k order
 * and final reduction as the pair body: the same bits. out[4 i + r]. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__gemv_dot4x4_body__avx512(const char *const *w, kern_dtype wdt,
                                                                     const char *x0, int64_t xs,
                                                                     kern_dtype xdt, int64_t K, float *out) {
    const char *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    const char *x1 = x0 + xs, *x2 = x1 + xs, *x3 = x2 + xs;
    int64_t wb = wdt == KERN_I8 ? 1 : (int64_t)kern_dtype_size(wdt), k;
    /* named accumulators: an array of them is kept in memory by GCC */
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00;
    __m512 c12 = c00, c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00;
    __m512 c31 = c00, c32 = c00, c33 = c00;
    const int64_t pd = kern__gemv_pf_dist(K, wb, w0, w1);
    for (k = 0; k < K; k += 16) {
        int n = K - k >= 16 ? 16 : (int)(K - k);
        __m512 v0 = kern__gemv_wload__avx512(w0, wdt, k, n);
        __m512 v1 = kern__gemv_wload__avx512(w1, wdt, k, n);
        __m512 v2 = kern__gemv_wload__avx512(w2, wdt, k, n);
        __m512 v3 = kern__gemv_wload__avx512(w3, wdt, k, n);
        __m512 xa;
        if (((k * wb) & 63) == 0) {
            _mm_prefetch(w0 + k * wb + pd, _MM_HINT_T1);
            _mm_prefetch(w1 + k * wb + pd, _MM_HINT_T1);
            _mm_prefetch(w2 + k * wb + pd, _MM_HINT_T1);
            _mm_prefetch(w3 + k * wb + pd, _MM_HINT_T1);
        }
#define KERN__GEMV_ROW(XP, I)                                                                 \
    xa = kern__gemv_xload__avx512(XP, xdt, k, n);                                             \
    c##I##0 = _mm512_fmadd_ps(xa, v0, c##I##0);                                               \
    c##I##1 = _mm512_fmadd_ps(xa, v1, c##I##1);                                               \
    c##I##2 = _mm512_fmadd_ps(xa, v2, c##I##2);                                               \
    c##I##3 = _mm512_fmadd_ps(xa, v3, c##I##3);
        KERN__GEMV_ROW(x0, 0)
        KERN__GEMV_ROW(x1, 1)
        KERN__GEMV_ROW(x2, 2)
        KERN__GEMV_ROW(x3, 3)
#undef KERN__GEMV_ROW
    }
    {
        const __m512 c[16] = {c00, c01, c02, c03, c10, c11, c12, c13,
                              c20, c21, c22, c23, c30, c31, c32, c33};
        kern__gemv_sums__avx512(out, c, 16);
    }
}
KERN_TARGET_AVX512 static void kern__gemv_dot4x4__avx512(const char *const *w, kern_dtype wdt,
                                                         const char *x0, int64_t xs, kern_dtype xdt,
                                                         int64_t K, float *out) {
#define KERN__GEMV_CASE(WDT, XDT)                                                           \
    if (wdt == WDT && xdt == XDT) {                                                       \
        kern__gemv_dot4x4_body__avx512(w, WDT, x0, xs, XDT, K, out);                      \
        return;                                                                           \
    }
    KERN__GEMV_DT_PAIRS(KERN__GEMV_CASE)
#undef KERN__GEMV_CASE
    kern__gemv_dot4x4_body__avx512(w, wdt, x0, xs, xdt, K, out);
}
KERN_TARGET_AVX512 static void kern__gemv_dot__avx512(const char *const *w, kern_dtype wdt,
                                                      const char *x0, const char *x1,
                                                      kern_dtype xdt, int m, int64_t K,
                                                      float *out) {
    if (m == 1) {
        /* One x row streams the weight: 16 lanes read f32 rows over 8 KiB
         * 7-15 % faster; shorter f32 rows and bf16 and i8 rows read as
         * fast or faster through the 8-lane body (docs/llm.md, Zen 4). */
        if (wdt != KERN_F32 || K <= 2048) kern__gemv_dot__avx2(w, wdt, x0, x1, xdt, m, K, out);
        else if (xdt == KERN_F32) kern__gemv_dot_body__avx512(w, KERN_F32, x0, x1, KERN_F32, 1, K, out);
        else kern__gemv_dot_body__avx512(w, KERN_F32, x0, x1, xdt, 1, K, out);
        return;
    }
#define KERN__GEMV_CASE(WDT, XDT)                                                           \
    if (wdt == WDT && xdt == XDT) {                                                       \
        kern__gemv_dot_body__avx512(w, WDT, x0, x1, XDT, 2, K, out);                      \
        return;                                                                           \
    }
    KERN__GEMV_DT_PAIRS(KERN__GEMV_CASE)
#undef KERN__GEMV_CASE
    kern__gemv_dot_body__avx512(w, wdt, x0, x1, xdt, 2, K, out);
}
/* bf16 x rows against bf16 weight rows at the avx512bf16 level (M >= 2):
 * one vdpbf16ps multiplies the 32 pairs of a 64-byte weight vector and an
 * x vector and adds each lane's two products to its f32 sum, where the
 * widening bodies spend two widenings and two FMAs per x row. The
 * products are exact and each is added with one rounding; the
 * instruction counts denormal inputs and results as zero. MR x rows (2 or
 * 4; a constant after inlining) at row stride xs bytes against four weight
 * rows, out[4 i + r]; the L2 prefetch of the bodies above (1, 4 and 8
 * KiB ahead in long rows measured no faster on Zen 4). */
KERN_TARGET_AVX512BF16 KERN__AINLINE __m512bh kern__gemv_bh_ld(const char *p, int64_t k, int n) {
    if (n >= 32) return (__m512bh)_mm512_loadu_si512(p + 2 * k);
    return (__m512bh)_mm512_maskz_loadu_epi16((__mmask32)((1ull << n) - 1), p + 2 * k);
}
KERN_TARGET_AVX512BF16 KERN__AINLINE void kern__gemv_bh_body(const char *const *w, const char *x0,
                                                            int64_t xs, int MR, int64_t K, float *out) {
    const char *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    const char *x1 = x0 + xs, *x2 = x1 + xs, *x3 = x2 + xs;
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00;
    __m512 c12 = c00, c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00;
    __m512 c31 = c00, c32 = c00, c33 = c00;
    const int64_t pd = kern__gemv_pf_dist(K, 2, w0, w1);
    int64_t k;
    for (k = 0; k < K; k += 32) {
        int n = K - k >= 32 ? 32 : (int)(K - k);
        __m512bh v0 = kern__gemv_bh_ld(w0, k, n), v1 = kern__gemv_bh_ld(w1, k, n);
        __m512bh v2 = kern__gemv_bh_ld(w2, k, n), v3 = kern__gemv_bh_ld(w3, k, n), xa;
        _mm_prefetch(w0 + 2 * k + pd, _MM_HINT_T1);
        _mm_prefetch(w1 + 2 * k + pd, _MM_HINT_T1);
        _mm_prefetch(w2 + 2 * k + pd, _MM_HINT_T1);
        _mm_prefetch(w3 + 2 * k + pd, _MM_HINT_T1);
#define KERN__GEMV_BH_ROW(XP, I)                                                              \
    xa = kern__gemv_bh_ld(XP, k, n);                                                          \
    c##I##0 = _mm512_dpbf16_ps(c##I##0, xa, v0);                                              \
    c##I##1 = _mm512_dpbf16_ps(c##I##1, xa, v1);                                              \
    c##I##2 = _mm512_dpbf16_ps(c##I##2, xa, v2);                                              \
    c##I##3 = _mm512_dpbf16_ps(c##I##3, xa, v3);
        KERN__GEMV_BH_ROW(x0, 0)
        KERN__GEMV_BH_ROW(x1, 1)
        if (MR > 2) {
            KERN__GEMV_BH_ROW(x2, 2)
            KERN__GEMV_BH_ROW(x3, 3)
        }
#undef KERN__GEMV_BH_ROW
    }
    {
        const __m512 c[16] = {c00, c01, c02, c03, c10, c11, c12, c13,
                              c20, c21, c22, c23, c30, c31, c32, c33};
        kern__gemv_sums__avx512(out, c, 4 * MR);
    }
}
KERN_TARGET_AVX512BF16 static void kern__gemv_dot4x4__avx512bf16(const char *const *w, kern_dtype wdt,
                                                                 const char *x0, int64_t xs, kern_dtype xdt,
                                                                 int64_t K, float *out) {
    if (wdt == KERN_BF16 && xdt == KERN_BF16) kern__gemv_bh_body(w, x0, xs, 4, K, out);
    else kern__gemv_dot4x4__avx512(w, wdt, x0, xs, xdt, K, out);
}
KERN_TARGET_AVX512BF16 static void kern__gemv_dot__avx512bf16(const char *const *w, kern_dtype wdt,
                                                              const char *x0, const char *x1,
                                                              kern_dtype xdt, int m, int64_t K,
                                                              float *out) {
    /* one x row streams the weight through the widening bodies: with
     * vdpbf16ps the Llama decode step (K = 2048 rows) measured 10-15 %
     * slower on Zen 4 (docs/llm.md) */
    if (wdt != KERN_BF16 || xdt != KERN_BF16 || m == 1) kern__gemv_dot__avx512(w, wdt, x0, x1, xdt, m, K, out);
    else kern__gemv_bh_body(w, x0, x1 - x0, 2, K, out);
}
#endif


/* ---- x_quant: int8 x codes against int8 weight rows, exact int32 sums.
 * xq: m code rows (row stride xs bytes, each zero-padded to a multiple of
 * 64 bytes past K), xsum their sums of codes; w: four K-contiguous weight
 * rows; acc[4 i + r]. Every body computes the same integers, so every ISA
 * level gives the same bits. */
typedef void (*kern__gemv_qdot_fn)(const char *const *w, const int8_t *xq, int64_t xs,
                                   const int32_t *xsum, int m, int64_t K, int32_t *acc);
static void kern__gemv_qdot__scalar(const char *const *w, const int8_t *xq, int64_t xs,
                                    const int32_t *xsum, int m, int64_t K, int32_t *acc) {
    int i, r;
    (void)xsum;
    for (i = 0; i < m; i++)
        for (r = 0; r < 4; r++) {
            const int8_t *a = xq + i * xs, *b = (const int8_t *)w[r];
            int32_t t = 0;
            int64_t k;
            for (k = 0; k < K; k++) t += (int32_t)a[k] * b[k];
            acc[4 * i + r] = t;
        }
}
#ifdef KERN_X86
/* The lane sum of eight int32 (wrapping). */
KERN_TARGET_AVX2 KERN__AINLINE uint32_t kern__gemv_hsum_i32__avx2(__m256i v) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(h);
}
/* The ymm int8 bodies take MR (1 or 2, a constant after inlining) x rows
 * against four weight rows a pass and prefetch the next four rows as the
 * float AVX2 body does (without it the AVX-VNNI body ran M1 at 2.0 ms); a
 * weight row's last partial vector comes through a zeroed copy after the
 * loop (no byte-masked loads here). The pair loops below run MR = 2, then
 * MR = 1 for an odd last row. */
#define KERN__GEMV_Q_PF4(K_)                                                                 \
    if (((K_) & 63) == 0) {                                                                   \
        _mm_prefetch(w[0] + (K_) + pd, _MM_HINT_T1);                                          \
        _mm_prefetch(w[1] + (K_) + pd, _MM_HINT_T1);                                          \
        _mm_prefetch(w[2] + (K_) + pd, _MM_HINT_T1);                                          \
        _mm_prefetch(w[3] + (K_) + pd, _MM_HINT_T1);                                          \
    }

/* AVX2: codes widened to int16 and multiplied pairwise into int32
 * (vpmaddwd: |a b + c d| <= 2 * 127 * 128, exact). */
KERN_TARGET_AVX2 KERN__AINLINE void kern__gemv_qdot_rows__avx2(const char *const *w, const int8_t *x0,
                                                              const int8_t *x1, int MR, int64_t K, int32_t *acc) {
    const int64_t pd = kern__gemv_pf_next4(w[0], w[1]);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    __m256i xa, xb = a0;
    int64_t k;
#define KERN__GEMV_Q2_ROW(R, V)                                                               \
    {                                                                                         \
        const __m256i v_ = (V);                                                               \
        a##R = _mm256_add_epi32(a##R, _mm256_madd_epi16(xa, v_));                             \
        if (MR > 1) b##R = _mm256_add_epi32(b##R, _mm256_madd_epi16(xb, v_));                 \
    }
#define KERN__GEMV_Q2_X(K_)                                                                   \
    xa = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x0 + (K_))));                 \
    if (MR > 1) xb = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x1 + (K_))));
    for (k = 0; k + 16 <= K; k += 16) {
        KERN__GEMV_Q2_X(k)
        KERN__GEMV_Q_PF4(k)
        KERN__GEMV_Q2_ROW(0, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w[0] + k))))
        KERN__GEMV_Q2_ROW(1, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w[1] + k))))
        KERN__GEMV_Q2_ROW(2, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w[2] + k))))
        KERN__GEMV_Q2_ROW(3, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w[3] + k))))
    }
    if (k < K) {
        int8_t t[4][16];
        int r;
        memset(t, 0, sizeof t);
        for (r = 0; r < 4; r++) memcpy(t[r], w[r] + k, (size_t)(K - k));
        KERN__GEMV_Q2_X(k)
        KERN__GEMV_Q2_ROW(0, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)t[0])))
        KERN__GEMV_Q2_ROW(1, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)t[1])))
        KERN__GEMV_Q2_ROW(2, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)t[2])))
        KERN__GEMV_Q2_ROW(3, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)t[3])))
    }
#undef KERN__GEMV_Q2_X
#undef KERN__GEMV_Q2_ROW
    acc[0] = (int32_t)kern__gemv_hsum_i32__avx2(a0);
    acc[1] = (int32_t)kern__gemv_hsum_i32__avx2(a1);
    acc[2] = (int32_t)kern__gemv_hsum_i32__avx2(a2);
    acc[3] = (int32_t)kern__gemv_hsum_i32__avx2(a3);
    if (MR > 1) {
        acc[4] = (int32_t)kern__gemv_hsum_i32__avx2(b0);
        acc[5] = (int32_t)kern__gemv_hsum_i32__avx2(b1);
        acc[6] = (int32_t)kern__gemv_hsum_i32__avx2(b2);
        acc[7] = (int32_t)kern__gemv_hsum_i32__avx2(b3);
    }
}
KERN_TARGET_AVX2 static void kern__gemv_qdot__avx2(const char *const *w, const int8_t *xq, int64_t xs,
                                                   const int32_t *xsum, int m, int64_t K, int32_t *acc) {
    int i;
    (void)xsum;
    for (i = 0; i + 2 <= m; i += 2) kern__gemv_qdot_rows__avx2(w, xq + i * xs, xq + (i + 1) * xs, 2, K, acc + 4 * i);
    if (i < m) kern__gemv_qdot_rows__avx2(w, xq + i * xs, NULL, 1, K, acc + 4 * i);
}
/* Keeps an accumulator in its register at this point: GCC otherwise moves
 * the VEX vpdpbusd accumulators between registers and through the stack
 * every iteration (as kern_qgemm.h's KERN__QG_PIN). */
#if defined(__GNUC__) || defined(__clang__)
#define KERN__GEMV_PIN(v) __asm__("" : "+x"(v));
#else
#define KERN__GEMV_PIN(v)
#endif
/* AVX-VNNI (VEX, ymm), 32 codes a vector. The weights go in as the
 * unsigned operand, w ^ 0x80 = w + 128 (one vpxor a weight vector), the x
 * codes as they are (signed), and 128 * sum x (xsum, taken once per x row
 * when x is quantized) comes back out: the AVX512-VNNI body does the
 * same. The earlier form (x stored as q + 128, each weight row summed
 * against ones) needed eight accumulators, four weight sums, two x
 * vectors, ones and a weight vector, all 16 registers, and GCC spilled
 * eleven of them in the loop; this one needs 12. */
KERN_TARGET_AVXVNNI KERN__AINLINE void kern__gemv_qdot_rows__avxvnni(const char *const *w, const int8_t *x0,
                                                                    const int8_t *x1, const int32_t *xsum,
                                                                    int MR, int64_t K, int32_t *acc) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    const int64_t pd = kern__gemv_pf_next4(w[0], w[1]);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0, xa,
            xb = a0;
    uint32_t h0 = 128u * (uint32_t)xsum[0], h1 = MR > 1 ? 128u * (uint32_t)xsum[1] : 0u;
    int64_t k;
    int r;
#define KERN__GEMV_QV_ROW(R, V)                                                               \
    {                                                                                         \
        const __m256i v_ = _mm256_xor_si256((V), flip);                                       \
        a##R = _mm256_dpbusd_avx_epi32(a##R, v_, xa);                                         \
        KERN__GEMV_PIN(a##R)                                                                  \
        if (MR > 1) {                                                                         \
            b##R = _mm256_dpbusd_avx_epi32(b##R, v_, xb);                                     \
            KERN__GEMV_PIN(b##R)                                                              \
        }                                                                                     \
    }
#define KERN__GEMV_QV_X(K_)                                                                   \
    xa = _mm256_loadu_si256((const __m256i *)(x0 + (K_)));                                    \
    if (MR > 1) xb = _mm256_loadu_si256((const __m256i *)(x1 + (K_)));
    for (k = 0; k + 32 <= K; k += 32) {
        KERN__GEMV_QV_X(k)
        KERN__GEMV_Q_PF4(k)
        KERN__GEMV_QV_ROW(0, _mm256_loadu_si256((const __m256i *)(w[0] + k)))
        KERN__GEMV_QV_ROW(1, _mm256_loadu_si256((const __m256i *)(w[1] + k)))
        KERN__GEMV_QV_ROW(2, _mm256_loadu_si256((const __m256i *)(w[2] + k)))
        KERN__GEMV_QV_ROW(3, _mm256_loadu_si256((const __m256i *)(w[3] + k)))
    }
    if (k < K) { /* weight codes past K: 0 (+ 128), against x codes 0 */
        int8_t t[4][32];
        memset(t, 0, sizeof t);
        for (r = 0; r < 4; r++) memcpy(t[r], w[r] + k, (size_t)(K - k));
        KERN__GEMV_QV_X(k)
        KERN__GEMV_QV_ROW(0, _mm256_loadu_si256((const __m256i *)t[0]))
        KERN__GEMV_QV_ROW(1, _mm256_loadu_si256((const __m256i *)t[1]))
        KERN__GEMV_QV_ROW(2, _mm256_loadu_si256((const __m256i *)t[2]))
        KERN__GEMV_QV_ROW(3, _mm256_loadu_si256((const __m256i *)t[3]))
    }
#undef KERN__GEMV_QV_X
#undef KERN__GEMV_QV_ROW
    acc[0] = (int32_t)(kern__gemv_hsum_i32__avx2(a0) - h0);
    acc[1] = (int32_t)(kern__gemv_hsum_i32__avx2(a1) - h0);
    acc[2] = (int32_t)(kern__gemv_hsum_i32__avx2(a2) - h0);
    acc[3] = (int32_t)(kern__gemv_hsum_i32__avx2(a3) - h0);
    if (MR > 1) {
        acc[4] = (int32_t)(kern__gemv_hsum_i32__avx2(b0) - h1);
        acc[5] = (int32_t)(kern__gemv_hsum_i32__avx2(b1) - h1);
        acc[6] = (int32_t)(kern__gemv_hsum_i32__avx2(b2) - h1);
        acc[7] = (int32_t)(kern__gemv_hsum_i32__avx2(b3) - h1);
    }
}
KERN_TARGET_AVXVNNI static void kern__gemv_qdot__avxvnni(const char *const *w, const int8_t *xq, int64_t xs,
                                                         const int32_t *xsum, int m, int64_t K,
                                                         int32_t *acc) {
    int i;
    for (i = 0; i + 2 <= m; i += 2)
        kern__gemv_qdot_rows__avxvnni(w, xq + i * xs, xq + (i + 1) * xs, xsum + i, 2, K, acc + 4 * i);
    if (i < m) kern__gemv_qdot_rows__avxvnni(w, xq + i * xs, NULL, xsum + i, 1, K, acc + 4 * i);
}
#undef KERN__GEMV_Q_PF4
/* AVX512-VNNI: the AVX-VNNI body's signs (weights as w ^ 0x80 = w + 128,
 * x codes signed, 128 * xsum back out; the sums wrap in int32 and the
 * difference is exact, |result| < 2^31 for K <= KERN__GEMV_QMAX_K). Up to
 * four x rows against four weight rows per pass, 64 codes a vector; the
 * weight rows' tails are masked loads (zero, + 128, against x codes 0).
 * The L2 prefetch of the float bodies. */
KERN_TARGET_AVX512VNNI static void kern__gemv_qdot__avx512vnni(const char *const *w, const int8_t *xq,
                                                               int64_t xs, const int32_t *xsum, int m,
                                                               int64_t K, int32_t *acc) {
    const char *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    const int8_t *x1 = xq + xs, *x2 = x1 + xs, *x3 = x2 + xs;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i s0 = _mm512_setzero_si512();
    __m512i c00 = s0, c01 = s0, c02 = s0, c03 = s0, c10 = s0, c11 = s0, c12 = s0, c13 = s0;
    __m512i c20 = s0, c21 = s0, c22 = s0, c23 = s0, c30 = s0, c31 = s0, c32 = s0, c33 = s0;
    const int64_t pd = kern__gemv_pf_dist(K, 1, w0, w1);
    int64_t k;
    for (k = 0; k < K; k += 64) {
        const __mmask64 mk = K - k >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (K - k)) - 1);
        const __m512i v0 = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mk, w0 + k), flip);
        const __m512i v1 = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mk, w1 + k), flip);
        const __m512i v2 = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mk, w2 + k), flip);
        const __m512i v3 = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mk, w3 + k), flip);
        __m512i xa;
        _mm_prefetch(w0 + k + pd, _MM_HINT_T1);
        _mm_prefetch(w1 + k + pd, _MM_HINT_T1);
        _mm_prefetch(w2 + k + pd, _MM_HINT_T1);
        _mm_prefetch(w3 + k + pd, _MM_HINT_T1);
#define KERN__GEMV_Q_ROW(XP, I)                                                               \
    xa = _mm512_loadu_si512((const void *)((XP) + k));                                        \
    c##I##0 = _mm512_dpbusd_epi32(c##I##0, v0, xa);                                           \
    c##I##1 = _mm512_dpbusd_epi32(c##I##1, v1, xa);                                           \
    c##I##2 = _mm512_dpbusd_epi32(c##I##2, v2, xa);                                           \
    c##I##3 = _mm512_dpbusd_epi32(c##I##3, v3, xa);
        KERN__GEMV_Q_ROW(xq, 0)
        if (m > 1) {
            KERN__GEMV_Q_ROW(x1, 1)
        }
        if (m > 2) {
            KERN__GEMV_Q_ROW(x2, 2)
        }
        if (m > 3) {
            KERN__GEMV_Q_ROW(x3, 3)
        }
#undef KERN__GEMV_Q_ROW
    }
    {
        const __m512i c[16] = {c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33};
        int i, r;
        for (i = 0; i < m; i++)
            for (r = 0; r < 4; r++)
                acc[4 * i + r] = (int32_t)((uint32_t)_mm512_reduce_add_epi32(c[4 * i + r]) -
                                           128u * (uint32_t)xsum[i]);
    }
}
#endif
/* x_quant: |sum| <= K * 127 * 127 < 2^31, kern_qlinear's K bound */
#define KERN__GEMV_QMAX_K 131071

typedef struct kern__gemv_job {
    kern__gemv_dot_fn dot;
    /* four x rows (row stride xs bytes) at once, or NULL: out[4 i + r] */
    void (*dot4)(const char *const *w, kern_dtype wdt, const char *x0, int64_t xs, kern_dtype xdt,
                 int64_t K, float *out);
    void (*epi_tile)(const kern__epi *e, int64_t i0, int64_t j0, const float *t, int64_t ldt,
                     int m, int n);
    const kern_tensor *x, *w, *scale;
    kern__epi epi;
    int64_t M, N, K;
    /* x_quant: the code rows (row stride xqs bytes), their scales and sums */
    kern__gemv_qdot_fn qdot;
    const int8_t *xq;
    const float *xsc;
    const int32_t *xsum;
    int64_t xqs;
} kern__gemv_job;

/* An i8 weight's per-output scales on a tile's columns n0 .. n0 + nn of
 * its mb rows (row stride ldt); nothing for a float weight. */
static void kern__gemv_scale_tile(const kern__gemv_job *J, int64_t n0, int64_t nn, int mb, float *tile,
                                  int64_t ldt) {
    int64_t j;
    int i;
    if (!J->scale) return;
    for (j = 0; j < nn; j++) {
        float sc = kern__s_load_f32((const char *)J->scale->data + (n0 + j) * J->scale->stride[0] * (int64_t)4,
                                    KERN_F32, 1);
        for (i = 0; i < mb; i++) tile[i * ldt + j] *= sc;
    }
}

/* The four weight rows n0 .. n0 + 3 of a pass (element size wes bytes);
 * rows past the task's last (left = rows left in it) repeat that row, and
 * their results are discarded. */
static void kern__gemv_wrows(const kern__gemv_job *J, int64_t n0, int64_t left, int64_t wes, const char *wr[4]) {
    int r;
    for (r = 0; r < 4; r++)
        wr[r] = (const char *)J->w->data + (n0 + (r < left ? r : left - 1)) * J->w->stride[0] * wes;
}

/* x_quant's task: the same tiles as kern__gemv_task from int32 sums,
 * acc * s_x[m] then (kern__gemv_scale_tile) * s_w[n]: kern_qlinear's order. */
static void kern__gemv_qtask(void *arg, int64_t task, int thread) {
    const kern__gemv_job *J = (const kern__gemv_job *)arg;
    float tile[KERN__GEMV_MB * KERN__GEMV_NB];
    int32_t acc[16];
    int64_t n0 = task * KERN__GEMV_NB, nn = J->N - n0 < KERN__GEMV_NB ? J->N - n0 : KERN__GEMV_NB, m0, g;
    (void)thread;
    for (m0 = 0; m0 < J->M; m0 += KERN__GEMV_MB) {
        int mb = J->M - m0 < KERN__GEMV_MB ? (int)(J->M - m0) : KERN__GEMV_MB;
        for (g = 0; g < nn; g += 4) {
            const char *wr[4];
            int r, i;
            kern__gemv_wrows(J, n0 + g, nn - g, 1, wr);
            for (i = 0; i < mb; i += 4) {
                int m = mb - i < 4 ? mb - i : 4, j;
                J->qdot(wr, J->xq + (m0 + i) * J->xqs, J->xqs, J->xsum + m0 + i, m, J->K, acc);
                for (j = 0; j < m; j++)
                    for (r = 0; r < 4 && g + r < nn; r++)
                        tile[(i + j) * KERN__GEMV_NB + g + r] = (float)acc[j * 4 + r] * J->xsc[m0 + i + j];
            }
        }
        kern__gemv_scale_tile(J, n0, nn, mb, tile, KERN__GEMV_NB);
        J->epi_tile(&J->epi, m0, n0, tile, KERN__GEMV_NB, mb, (int)nn);
    }
}

static void kern__gemv_task(void *arg, int64_t task, int thread) {
    const kern__gemv_job *J = (const kern__gemv_job *)arg;
    float tile[KERN__GEMV_MB * KERN__GEMV_NB], out[16];
    int64_t n0 = task * KERN__GEMV_NB, nn = J->N - n0 < KERN__GEMV_NB ? J->N - n0 : KERN__GEMV_NB;
    int64_t m0, g, wes = J->w->dtype == KERN_I8 ? 1 : (int64_t)kern_dtype_size(J->w->dtype);
    int64_t xes = (int64_t)kern_dtype_size(J->x->dtype);
    (void)thread;
    for (m0 = 0; m0 < J->M; m0 += KERN__GEMV_MB) {
        int mb = J->M - m0 < KERN__GEMV_MB ? (int)(J->M - m0) : KERN__GEMV_MB;
        for (g = 0; g < nn; g += 4) {
            const char *wr[4];
            int r, i;
            kern__gemv_wrows(J, n0 + g, nn - g, wes, wr);
            for (i = 0; i < mb;) {
                int m = J->dot4 && mb - i >= 4 ? 4 : mb - i >= 2 ? 2 : 1, j;
                const char *x0 = (const char *)J->x->data + (m0 + i) * J->x->stride[0] * xes;
                const char *x1 = x0 + (m >= 2 ? J->x->stride[0] * xes : 0);
                if (m == 4) J->dot4(wr, J->w->dtype, x0, J->x->stride[0] * xes, J->x->dtype, J->K, out);
                else J->dot(wr, J->w->dtype, x0, x1, J->x->dtype, m, J->K, out);
                for (j = 0; j < m; j++)
                    for (r = 0; r < 4 && g + r < nn; r++)
                        tile[(i + j) * KERN__GEMV_NB + g + r] = out[j * 4 + r];
                i += m;
            }
        }
        kern__gemv_scale_tile(J, n0, nn, mb, tile, KERN__GEMV_NB);
        J->epi_tile(&J->epi, m0, n0, tile, KERN__GEMV_NB, mb, (int)nn);
    }
}

/* the K-major weight's path (after the decode-attention blocks it uses) */
static kern_status kern__gemv_kmajor(kern_ctx *ctx, kern__gemv_job *J);

static int kern__gemv_same_view(const kern_tensor *a, const kern_tensor *b) {
    return kern__llm_same_view(a, b);
}

/* x_quant's shared scratch for x [M, K]: M code rows padded to 64 bytes
 * (the VNNI bodies read whole vectors of them), then M f32 scales and M
 * int32 sums of codes (the VNNI bodies' correction). */
static size_t kern__gemv_qbytes(int64_t M, int64_t K) {
    return (size_t)M * (size_t)((K + 63) / 64 * 64) + (size_t)M * (sizeof(float) + sizeof(int32_t));
}

KERN_API kern_status kern_linear_gemv_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                                     const kern_gemv_params *params, size_t *bytes) {
    static const char *op = "kern_linear_gemv_workspace_size";
    kern_status st;
    if (!x || !bytes) return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !x ? "x" : "bytes");
    if ((st = kern_tensor_check(x, op, "x")) != KERN_OK) return st;
    if (x->ndim != 2) return kern__err(KERN_ERR_SHAPE, "%s: x must be 2-D [M, K]", op);
    *bytes = params && params->x_quant ? kern__op_workspace_bytes(ctx, kern__gemv_qbytes(x->shape[0], x->shape[1]), 0)
                                       : 0;
    return KERN_OK;
}

KERN_API kern_status kern_linear_gemv(kern_ctx *ctx, const kern_tensor *x, const kern_tensor *w,
                                      const kern_tensor *y, const kern_gemv_params *params) {
    static const char *op = "kern_linear_gemv";
    kern_gemv_params p;
    kern_status st;
    kern__gemv_job J;
    const kern_epilogue *ep;
    int64_t M, N, K, No;
    int kmajor;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    ep = &p.epilogue;
    if (!x || !w || !y)
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op, !x ? "x" : !w ? "w" : "y");
    if ((st = kern_tensor_check(x, op, "x")) != KERN_OK) return st;
    if ((st = kern_tensor_check(w, op, "w")) != KERN_OK) return st;
    if ((st = kern_tensor_check(y, op, "y")) != KERN_OK) return st;
    if (!kern__llm_float_dt(x->dtype) || !kern__llm_float_dt(y->dtype))
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s is not f32/bf16/f16", op,
                         kern__llm_float_dt(x->dtype) ? "y" : "x",
                         kern_dtype_name(kern__llm_float_dt(x->dtype) ? y->dtype : x->dtype));
    if (w->dtype != KERN_F32 && w->dtype != KERN_BF16 && w->dtype != KERN_F16 &&
        w->dtype != KERN_I8)
        return kern__err(KERN_ERR_DTYPE, "%s: w.dtype=%s is not f32/bf16/f16/i8", op,
                         kern_dtype_name(w->dtype));
    if ((w->dtype == KERN_I8) != (p.w_scale != NULL))
        return kern__err(KERN_ERR_ARG, "%s: %s", op,
                         p.w_scale ? "params.w_scale is only for an i8 w"
                                   : "an i8 w needs params.w_scale (one f32 scale per output)");
    if (x->ndim != 2 || w->ndim != 2 || y->ndim != 2)
        return kern__err(KERN_ERR_SHAPE, "%s: x [M, K], w [N, K] and y [M, N] must be 2-D", op);
    M = x->shape[0];
    K = x->shape[1];
    N = w->shape[0];
    No = ep->glu ? N / 2 : N;
    if (w->shape[1] != K)
        return kern__err(KERN_ERR_SHAPE, "%s: w.shape[1]=%lld but x.shape[1]=%lld", op,
                         (long long)w->shape[1], (long long)K);
    if (ep->glu && N % 2)
        return kern__err(KERN_ERR_SHAPE, "%s: params.epilogue.glu needs an even w.shape[0] "
                         "(gate and up rows), got %lld", op, (long long)N);
    if (y->shape[0] != M || y->shape[1] != No)
        return kern__err(KERN_ERR_SHAPE, "%s: y must be [%lld, %lld]%s, got [%lld, %lld]", op,
                         (long long)M, (long long)No, ep->glu ? " (glu: half of w's rows)" : "",
                         (long long)y->shape[0], (long long)y->shape[1]);
    /* w either K-contiguous (F.linear's [N, K]) or N-contiguous (the
     * transpose of a row-major [K, N] weight, x @ W's layout) */
    kmajor = K > 1 && w->stride[1] != 1;
    if ((K > 1 && x->stride[1] != 1) || (kmajor && N > 1 && w->stride[0] != 1))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s", op,
                         x->stride[1] != 1 && K > 1 ? "x needs a unit stride along K"
                                                    : "w needs a unit stride along K or along N");
    if (kmajor && w->stride[1] < 0)
        return kern__err(KERN_ERR_LAYOUT, "%s: negative row strides are not supported", op);
    if (p.x_quant) {
        if (w->dtype != KERN_I8)
            return kern__err(KERN_ERR_ARG, "%s: params.x_quant is only for an i8 w (w.dtype=%s)", op,
                             kern_dtype_name(w->dtype));
        if (kmajor)
            return kern__err(KERN_ERR_LAYOUT, "%s: params.x_quant needs w with a unit stride along K", op);
        if (K > KERN__GEMV_QMAX_K)
            return kern__err(KERN_ERR_SHAPE, "%s: params.x_quant needs K <= %d, got %lld", op,
                             KERN__GEMV_QMAX_K, (long long)K);
    }
    if (x->stride[0] < 0 || w->stride[0] < 0)
        return kern__err(KERN_ERR_LAYOUT, "%s: negative row strides are not supported", op);
    if (p.w_scale) {
        const kern_tensor *sc = p.w_scale;
        if ((st = kern_tensor_check(sc, op, "params.w_scale")) != KERN_OK) return st;
        if (sc->dtype != KERN_F32)
            return kern__err(KERN_ERR_DTYPE, "%s: params.w_scale.dtype=%s, want f32", op,
                             kern_dtype_name(sc->dtype));
        if (sc->ndim != 1 || sc->shape[0] != N)
            return kern__err(KERN_ERR_SHAPE, "%s: params.w_scale must be [%lld]", op,
                             (long long)N);
        if (kern_tensors_overlap(sc, y))
            return kern__err(KERN_ERR_ARG, "%s: params.w_scale overlaps y", op);
    }
    if ((st = kern__epilogue_check(ep, op, ((1u << KERN_ACT_COUNT) - 1u) | KERN__EPI_GLU_OK, 1,
                                   1)) != KERN_OK)
        return st;
    if (ep->bias) {
        int64_t want = ep->bias_per_row ? M : N;
        if ((st = kern_tensor_check(ep->bias, op, "params.epilogue.bias")) != KERN_OK) return st;
        if (!kern__llm_float_dt(ep->bias->dtype))
            return kern__err(KERN_ERR_DTYPE, "%s: params.epilogue.bias.dtype=%s is not f32/bf16/f16",
                             op, kern_dtype_name(ep->bias->dtype));
        if (ep->bias->ndim != 1 || ep->bias->shape[0] != want)
            return kern__err(KERN_ERR_SHAPE, "%s: params.epilogue.bias must be [%lld]", op,
                             (long long)want);
        if (kern_tensors_overlap(ep->bias, y))
            return kern__err(KERN_ERR_ARG, "%s: params.epilogue.bias overlaps y", op);
    }
    if (ep->residual) {
        const kern_tensor *r = ep->residual;
        if ((st = kern_tensor_check(r, op, "params.epilogue.residual")) != KERN_OK) return st;
        if (!kern__llm_float_dt(r->dtype))
            return kern__err(KERN_ERR_DTYPE,
                             "%s: params.epilogue.residual.dtype=%s is not f32/bf16/f16", op,
                             kern_dtype_name(r->dtype));
        if (r->ndim != 2 || r->shape[0] != M || r->shape[1] != No)
            return kern__err(KERN_ERR_SHAPE, "%s: params.epilogue.residual must be [%lld, %lld]",
                             op, (long long)M, (long long)No);
        if (kern_tensors_overlap(r, y) && !kern__gemv_same_view(r, y))
            return kern__err(KERN_ERR_ARG,
                             "%s: params.epilogue.residual overlaps y without being y", op);
    }
    if (kern__tensor_self_overlap(y))
        return kern__err(KERN_ERR_LAYOUT, "%s: y has overlapping elements", op);
    if (kern_tensors_overlap(y, x) || kern_tensors_overlap(y, w))
        return kern__err(KERN_ERR_ARG, "%s: y overlaps %s", op,
                         kern_tensors_overlap(y, x) ? "x" : "w");
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    if (p.x_quant && (st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size,
                                              kern__gemv_qbytes(M, K), 0)) != KERN_OK) {
        kern__op_end(ctx);
        return st;
    }
    if (M > 0 && N > 0) {
        memset(&J, 0, sizeof J);
#ifdef KERN_X86
        kern_isa isa = kern_ctx_isa(ctx);
        if (isa == KERN_ISA_AVX512_BF16 || isa == KERN_ISA_AMX) {
            J.dot = kern__gemv_dot__avx512bf16;
            J.dot4 = kern__gemv_dot4x4__avx512bf16;
            J.epi_tile = kern__v_epi_tile__avx2;
        } else if (isa == KERN_ISA_AVX512 || isa == KERN_ISA_AVX512_VNNI) {
            J.dot = kern__gemv_dot__avx512;
            J.dot4 = kern__gemv_dot4x4__avx512;
            J.epi_tile = kern__v_epi_tile__avx2;
        } else if (kern_ctx_features(ctx) & KERN_CPU_AVX2) {
            J.dot = kern__gemv_dot__avx2;
            J.epi_tile = kern__v_epi_tile__avx2;
        } else
#endif
        {
            J.dot = kern__gemv_dot__scalar;
            J.epi_tile = kern__s_epi_tile;
        }
        J.x = x;
        J.w = w;
        J.scale = p.w_scale;
        J.M = M;
        J.N = N;
        J.K = K;
        kern__epi_init(&J.epi);
        kern__epi_set_bias(&J.epi, ep->bias, ep->bias_per_row);
        kern__epi_set_residual(&J.epi, ep->residual);
        J.epi.act = ep->act;
        J.epi.glu = ep->glu != 0; /* task columns start at multiples of KERN__GEMV_NB = 16 */
        J.epi.out_scale = ep->out_scale == 0.0f ? 1.0f : ep->out_scale;
        J.epi.dst = (char *)y->data;
        J.epi.dst_dt = y->dtype;
        J.epi.dst_rs = y->stride[0];
        J.epi.dst_cs = y->stride[1];
        if (p.x_quant) {
            /* the code rows once (every ISA's rule gives the same codes and
             * scales), then the int32 tasks */
            const int64_t xqs = (K + 63) / 64 * 64, xes = (int64_t)kern_dtype_size(x->dtype);
            int8_t *xq = (int8_t *)kern__workspace(ctx, kern__gemv_qbytes(M, K));
            float *xsc = xq ? (float *)(void *)(xq + M * xqs) : NULL;
            int32_t *xsum = xq ? (int32_t *)(void *)(xsc + M) : NULL;
            int64_t m;
            J.qdot = kern__gemv_qdot__scalar;
#ifdef KERN_X86
            if (isa == KERN_ISA_AVX512_VNNI || isa == KERN_ISA_AVX512_BF16 || isa == KERN_ISA_AMX)
                J.qdot = kern__gemv_qdot__avx512vnni;
            else if (isa == KERN_ISA_AVX2_VNNI)
                J.qdot = kern__gemv_qdot__avxvnni;
            else if (kern_ctx_features(ctx) & KERN_CPU_AVX2)
                J.qdot = kern__gemv_qdot__avx2;
#endif
            if (!xq) {
                st = kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes of scratch", op,
                               kern__gemv_qbytes(M, K));
            } else {
                for (m = 0; m < M; m++) {
                    const char *xr = (const char *)x->data + m * x->stride[0] * xes;
                    int8_t *q = xq + m * xqs;
#ifdef KERN_X86
                    if (isa == KERN_ISA_AVX512 || isa == KERN_ISA_AVX512_VNNI || isa == KERN_ISA_AVX512_BF16 ||
                        isa == KERN_ISA_AMX)
                        xsc[m] = kern__v_quant_row_s8__avx512(xr, x->dtype, K, q);
                    else if (kern_ctx_features(ctx) & KERN_CPU_AVX2)
                        xsc[m] = kern__v_quant_row_s8__avx2(xr, x->dtype, K, q);
                    else
#endif
                        xsc[m] = kern__s_quant_row_s8(xr, x->dtype, K, q);
                    memset(q + K, 0, (size_t)(xqs - K));
                    {
                        int64_t k;
                        int32_t t = 0;
                        for (k = 0; k < K; k++) t += q[k];
                        xsum[m] = t;
                    }
                }
                J.xq = xq;
                J.xsc = xsc;
                J.xsum = xsum;
                J.xqs = xqs;
                st = kern_parallel_for(ctx, (N + KERN__GEMV_NB - 1) / KERN__GEMV_NB, kern__gemv_qtask, &J);
            }
        } else if (kmajor)
            st = kern__gemv_kmajor(ctx, &J);
        else
            st = kern_parallel_for(ctx, (N + KERN__GEMV_NB - 1) / KERN__GEMV_NB, kern__gemv_task, &J);
    }
    kern__op_end(ctx);
    return st;
}

/* ------------------------------------------------------ decode attention
 * Split-KV: at decode (Lq <= 8) one task per (sequence, chunk of J->chunk
 * <= KERN__DA_CHUNK cache rows) handles all H * Lq query rows, so each K/V
 * byte is read once per step and the chunk's rows (every kv head of a
 * position is contiguous) are read in address order. A task writes, per
 * query row, its chunk's max m (log2 units), sum l = sum 2^(s - m) and acc
 * = sum 2^(s - m) v to the shared workspace; a second pass merges the
 * chunks with the log-sum-exp rule out = sum_c 2^(m_c - M) acc_c / sum_c
 * 2^(m_c - M) l_c, M = max_c m_c. A prompt (Lq > 8) splits the queries
 * into blocks instead, each task taking every chunk its block sees with
 * the same rule applied as it goes; only chunks some sequence reaches
 * run. The blocking depends on the shapes only: the same bits for any
 * thread count. A row that sees no cache row gets 0. */
#define KERN__DA_CHUNK 128
#ifndef KERN__DA_CHUNK_BYTES /* a chunk's K + V bytes at most (tuning builds may override) */
#define KERN__DA_CHUNK_BYTES (512 << 10)
#endif
#ifndef KERN__DA_PFK
#define KERN__DA_PFK 1 /* K prefetch distance, in blocks of 16 cache rows */
#endif

/* a hint: the line at p into L2 (nothing where the compiler has no builtin) */
static inline void kern__da_prefetch_l2(const void *p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 2);
#else
    (void)p;
#endif
}

typedef struct kern__da_fns {
    float (*dot)(const float *q, const void *k, kern_dtype kdt, int64_t n);
    void (*axpy)(float *acc, float a, const void *v, kern_dtype vdt, int64_t n);
    void (*scale)(float *acc, float a, int64_t n);
    float (*exp2n)(float x);
    /* four q rows (stride qs) against one k row: out[0..3] */
    void (*dot4)(const float *q, int64_t qs, const void *k, kern_dtype kdt, int64_t n, float *out);
    /* four acc rows (stride as) += a[i] * v */
    void (*axpy4)(float *acc, int64_t as, const float *a, const void *v, kern_dtype vdt, int64_t n);
    /* x[i] = 2^(x[i] - m) for i < n; returns their sum (in lane order) */
    float (*exp2row)(float *x, float m, int64_t n);
    /* Whole-block forms (NULL: the row-at-a-time ones above run).
     * qk: S[r * ss + j] = q_r . k_j for r < nq (f32 rows of D at stride D)
     *     and j < n (rows at byte stride ks);
     * pv: acc[r * as + e] += sum_j S[r * ss + j] v_j[e] for r < nq, e < Dv,
     *     j < n (rows at byte stride vs). */
    void (*qk)(const float *q, int64_t nq, int64_t D, const char *k, int64_t ks, kern_dtype kdt,
               int64_t n, float *S, int64_t ss);
    void (*pv)(float *acc, int64_t as, const float *S, int64_t ss, int64_t nq, const char *v,
               int64_t vs, kern_dtype vdt, int64_t n, int64_t Dv);
    /* dst[i] = src[i] * scale (src of dtype dt, unit stride) */
    void (*qrow)(float *dst, const void *src, kern_dtype dt, int64_t n, float scale);
    /* max of x[0 .. n) (-inf for n = 0); x[i] *= s[i] (exact: any order) */
    float (*rowmax)(const float *x, int64_t n);
    void (*vmul)(float *x, const float *s, int64_t n);
} kern__da_fns;

/* An element of a K or V row as f32: the float dtypes, or an i8 code
 * (its per-row scale is applied to the score or the probability). */
static inline float kern__da_s_ld(const char *p, kern_dtype dt) {
    return dt == KERN_I8 ? (float)*(const int8_t *)p : kern__s_load_f32(p, dt, 1);
}
static float kern__da_dot__scalar(const float *q, const void *k, kern_dtype kdt, int64_t n) {
    size_t es = kern_dtype_size(kdt);
    float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i;
    for (i = 0; i < n; i++)
        a[i & 7] += kern__s_mul(q[i], kern__da_s_ld((const char *)k + i * (int64_t)es, kdt));
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}
static void kern__da_axpy__scalar(float *acc, float a, const void *v, kern_dtype vdt, int64_t n) {
    size_t es = kern_dtype_size(vdt);
    int64_t i;
    for (i = 0; i < n; i++)
        acc[i] += kern__s_mul(a, kern__da_s_ld((const char *)v + i * (int64_t)es, vdt));
}
static void kern__da_scale__scalar(float *acc, float a, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) acc[i] = kern__s_mul(acc[i], a);
}
static float kern__da_exp2n(float x) { return kern__s_exp2_neg(x); }
static void kern__da_dot4__scalar(const float *q, int64_t qs, const void *k, kern_dtype kdt,
                                  int64_t n, float *out) {
    int i;
    for (i = 0; i < 4; i++) out[i] = kern__da_dot__scalar(q + i * qs, k, kdt, n);
}
static void kern__da_axpy4__scalar(float *acc, int64_t as, const float *a, const void *v,
                                   kern_dtype vdt, int64_t n) {
    int i;
    for (i = 0; i < 4; i++) kern__da_axpy__scalar(acc + i * as, a[i], v, vdt, n);
}
static float kern__da_exp2row__scalar(float *x, float m, int64_t n) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i;
    for (i = 0; i < n; i++) {
        x[i] = kern__s_exp2_neg(x[i] - m);
        s[i & 7] += x[i];
    }
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}
static float kern__da_rowmax__scalar(const float *x, int64_t n) {
    float m = -INFINITY;
    int64_t i;
    for (i = 0; i < n; i++) m = kern__s_max(m, x[i]);
    return m;
}
static void kern__da_vmul__scalar(float *x, const float *s, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) x[i] = kern__s_mul(x[i], s[i]);
}
static const kern__da_fns kern__da_fns_scalar = {kern__da_dot__scalar, kern__da_axpy__scalar,
                                                 kern__da_scale__scalar, kern__da_exp2n,
                                                 kern__da_dot4__scalar, kern__da_axpy4__scalar,
                                                 kern__da_exp2row__scalar, NULL, NULL, NULL,
                                                 kern__da_rowmax__scalar, kern__da_vmul__scalar};
#ifdef KERN_X86
/* m <= 8 elements of a K or V row (or of q / acc: f32) as f32. bf16 is
 * widened by a shift alone, as in the AVX-512 form: a NaN stays a NaN (the
 * products need no quiet bit), two ops a vector instead of five (they were
 * a fifth of the bf16 qk's instructions). */
KERN_TARGET_AVX2 KERN__AINLINE __m256 kern__da_ld__avx2(const char *p, kern_dtype dt, int m) {
    if (dt == KERN_I8) {
        int64_t t = 0;
        memcpy(&t, p, (size_t)m);
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(t)));
    }
    if (dt == KERN_BF16 && m == 8)
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16));
    return kern__v_load_f32__avx2(p, dt, m);
}
KERN_TARGET_AVX2 static float kern__da_dot__avx2(const float *q, const void *k, kern_dtype kdt,
                                                 int64_t n) {
    size_t es = kern_dtype_size(kdt);
    const char *kp = (const char *)k;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kern__da_ld__avx2(kp + i * es, kdt, 8), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8),
                             kern__da_ld__avx2(kp + (i + 8) * es, kdt, 8), a1);
    }
    for (; i < n; i += 8) {
        int m = n - i >= 8 ? 8 : (int)(n - i);
        a0 = _mm256_fmadd_ps(kern__loadn__avx2(q + i, m), kern__da_ld__avx2(kp + i * es, kdt, m), a0);
    }
    return kern__gemv_hsum__avx2(_mm256_add_ps(a0, a1));
}
KERN_TARGET_AVX2 static void kern__da_axpy__avx2(float *acc, float a, const void *v, kern_dtype vdt,
                                                 int64_t n) {
    size_t es = kern_dtype_size(vdt);
    __m256 av = _mm256_set1_ps(a);
    int64_t i;
    for (i = 0; i < n; i += 8) {
        int m = n - i >= 8 ? 8 : (int)(n - i);
        __m256 r = _mm256_fmadd_ps(av, kern__da_ld__avx2((const char *)v + i * es, vdt, m),
                                   kern__loadn__avx2(acc + i, m));
        if (m == 8) _mm256_storeu_ps(acc + i, r);
        else kern__storen__avx2(acc + i, r, m);
    }
}
KERN_TARGET_AVX2 static void kern__da_scale__avx2(float *acc, float a, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i;
    for (i = 0; i < n; i += 8) {
        int m = n - i >= 8 ? 8 : (int)(n - i);
        __m256 r = kern__mul__avx2(av, kern__loadn__avx2(acc + i, m));
        if (m == 8) _mm256_storeu_ps(acc + i, r);
        else kern__storen__avx2(acc + i, r, m);
    }
}
KERN_TARGET_AVX2 static void kern__da_dot4__avx2(const float *q, int64_t qs, const void *k,
                                                  kern_dtype kdt, int64_t n, float *out) {
    size_t es = kern_dtype_size(kdt);
    const char *kp = (const char *)k;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m128 s01, s23;
    int64_t i;
    for (i = 0; i < n; i += 8) {
        int m = n - i >= 8 ? 8 : (int)(n - i);
        __m256 kv = kern__da_ld__avx2(kp + i * es, kdt, m);
        if (m == 8) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + qs + i), kv, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * qs + i), kv, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * qs + i), kv, a3);
        } else {
            a0 = _mm256_fmadd_ps(kern__loadn__avx2(q + i, m), kv, a0);
            a1 = _mm256_fmadd_ps(kern__loadn__avx2(q + qs + i, m), kv, a1);
            a2 = _mm256_fmadd_ps(kern__loadn__avx2(q + 2 * qs + i, m), kv, a2);
            a3 = _mm256_fmadd_ps(kern__loadn__avx2(q + 3 * qs + i, m), kv, a3);
        }
    }
    /* four horizontal sums at once */
    a0 = _mm256_hadd_ps(a0, a1);
    a2 = _mm256_hadd_ps(a2, a3);
    a0 = _mm256_hadd_ps(a0, a2);
    s01 = _mm256_castps256_ps128(a0);
    s23 = _mm256_extractf128_ps(a0, 1);
    _mm_storeu_ps(out, _mm_add_ps(s01, s23));
}
KERN_TARGET_AVX2 static void kern__da_axpy4__avx2(float *acc, int64_t as, const float *a,
                                                   const void *v, kern_dtype vdt, int64_t n) {
    size_t es = kern_dtype_size(vdt);
    __m256 c0 = _mm256_set1_ps(a[0]), c1 = _mm256_set1_ps(a[1]);
    __m256 c2 = _mm256_set1_ps(a[2]), c3 = _mm256_set1_ps(a[3]);
    float *r0 = acc, *r1 = acc + as, *r2 = acc + 2 * as, *r3 = acc + 3 * as;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 vv = kern__da_ld__avx2((const char *)v + i * es, vdt, 8);
        _mm256_storeu_ps(r0 + i, _mm256_fmadd_ps(c0, vv, _mm256_loadu_ps(r0 + i)));
        _mm256_storeu_ps(r1 + i, _mm256_fmadd_ps(c1, vv, _mm256_loadu_ps(r1 + i)));
        _mm256_storeu_ps(r2 + i, _mm256_fmadd_ps(c2, vv, _mm256_loadu_ps(r2 + i)));
        _mm256_storeu_ps(r3 + i, _mm256_fmadd_ps(c3, vv, _mm256_loadu_ps(r3 + i)));
    }
    if (i < n) {
        int m = (int)(n - i);
        __m256 vv = kern__da_ld__avx2((const char *)v + i * es, vdt, m);
        kern__storen__avx2(r0 + i, _mm256_fmadd_ps(c0, vv, kern__loadn__avx2(r0 + i, m)), m);
        kern__storen__avx2(r1 + i, _mm256_fmadd_ps(c1, vv, kern__loadn__avx2(r1 + i, m)), m);
        kern__storen__avx2(r2 + i, _mm256_fmadd_ps(c2, vv, kern__loadn__avx2(r2 + i, m)), m);
        kern__storen__avx2(r3 + i, _mm256_fmadd_ps(c3, vv, kern__loadn__avx2(r3 + i, m)), m);
    }
}
KERN_TARGET_AVX2 static float kern__da_exp2row__avx2(float *x, float m, int64_t n) {
    __m256 mv = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
    float s[8];
    int64_t i;
    for (i = 0; i < n; i += 8) {
        int c = n - i >= 8 ? 8 : (int)(n - i);
        __m256 e = kern__v_exp2_neg__avx2(_mm256_sub_ps(kern__loadn__avx2(x + i, c), mv));
        if (c < 8) e = _mm256_and_ps(e, _mm256_castsi256_ps(kern__tailmask__avx2(c)));
        kern__storen__avx2(x + i, e, c);
        acc = _mm256_add_ps(acc, e);
    }
    _mm256_storeu_ps(s, acc);
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}
/* NaN-free inputs here (scores of finite q and k), so max's operand order
 * does not matter */
KERN_TARGET_AVX2 static float kern__da_rowmax__avx2(const float *x, int64_t n) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    __m128 h;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    {
        float r = _mm_cvtss_f32(h);
        for (; i < n; i++) r = kern__s_max(r, x[i]);
        return r;
    }
}
KERN_TARGET_AVX2 static void kern__da_vmul__avx2(float *x, const float *s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, kern__mul__avx2(_mm256_loadu_ps(x + i), _mm256_loadu_ps(s + i)));
    for (; i < n; i++) x[i] = kern__s_mul(x[i], s[i]);
}
/* row[i] = base + i * stride for i < n, else base (a valid row to repeat) */
static inline void kern__da_rows4(const float *base, int64_t stride, int n, const float **row) {
    int i;
    for (i = 0; i < 4; i++) row[i] = i < n ? base + i * stride : base;
}
/* AVX2 register blocks (16 ymm registers). qk: 4 q rows x 2 k rows of
 * 8-lane partial dot products in 8 registers along D (each k vector loaded
 * once for the 4 q rows, each q vector once for the 2 k rows), reduced at
 * the end; pv: 4 rows x 16 columns of the accumulators in 8 registers
 * across all n cache rows (each v vector loaded once for the 4 rows, the
 * accumulators read and written once per block instead of once per cache
 * row, which held the row-at-a-time axpy4 to the one 256-bit store a
 * cycle). Both inlined per dtype, as the AVX-512 forms. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__da_qk_body__avx2(const float *q, int64_t nq, int64_t D,
                                                           const char *k, int64_t ks, kern_dtype kdt,
                                                           int64_t n, float *S, int64_t ss) {
    size_t es = kern_dtype_size(kdt);
    int64_t r, j, d;
    for (r = 0; r < nq; r += 4) {
        int rq = nq - r >= 4 ? 4 : (int)(nq - r), i;
        const float *qr[4], *q0, *q1, *q2, *q3;
        kern__da_rows4(q + r * D, D, rq, qr);
        q0 = qr[0], q1 = qr[1], q2 = qr[2], q3 = qr[3];
        for (j = 0; j < n; j += 2) {
            int rk = n - j >= 2 ? 2 : 1;
            const char *k0 = k + j * ks, *k1 = rk > 1 ? k0 + ks : k0;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00;
            __m256 a20 = a00, a21 = a00, a30 = a00, a31 = a00, t0, t1;
            __m128 s0, s1;
            float o[8];
#define KERN__DA_QK2_STEP(M, LDQ)                                               \
    do {                                                                        \
        int64_t off = d * (int64_t)es;                                          \
        __m256 x0 = kern__da_ld__avx2(k0 + off, kdt, M);                        \
        __m256 x1 = kern__da_ld__avx2(k1 + off, kdt, M);                        \
        __m256 y = LDQ(q0 + d);                                                 \
        a00 = _mm256_fmadd_ps(y, x0, a00);                                      \
        a01 = _mm256_fmadd_ps(y, x1, a01);                                      \
        y = LDQ(q1 + d);                                                        \
        a10 = _mm256_fmadd_ps(y, x0, a10);                                      \
        a11 = _mm256_fmadd_ps(y, x1, a11);                                      \
        y = LDQ(q2 + d);                                                        \
        a20 = _mm256_fmadd_ps(y, x0, a20);                                      \
        a21 = _mm256_fmadd_ps(y, x1, a21);                                      \
        y = LDQ(q3 + d);                                                        \
        a30 = _mm256_fmadd_ps(y, x0, a30);                                      \
        a31 = _mm256_fmadd_ps(y, x1, a31);                                      \
    } while (0)
#define KERN__DA_LDQ8(p) _mm256_loadu_ps(p)
#define KERN__DA_LDQN(p) kern__loadn__avx2(p, (int)(D - d))
            for (d = 0; d + 8 <= D; d += 8) KERN__DA_QK2_STEP(8, KERN__DA_LDQ8);
            if (d < D) KERN__DA_QK2_STEP((int)(D - d), KERN__DA_LDQN);
#undef KERN__DA_LDQN
#undef KERN__DA_LDQ8
#undef KERN__DA_QK2_STEP
            /* o = [q0.k0, q1.k0, q2.k0, q3.k0, q0.k1, q1.k1, q2.k1, q3.k1] */
            t0 = _mm256_hadd_ps(_mm256_hadd_ps(a00, a10), _mm256_hadd_ps(a20, a30));
            t1 = _mm256_hadd_ps(_mm256_hadd_ps(a01, a11), _mm256_hadd_ps(a21, a31));
            s0 = _mm_add_ps(_mm256_castps256_ps128(t0), _mm256_extractf128_ps(t0, 1));
            s1 = _mm_add_ps(_mm256_castps256_ps128(t1), _mm256_extractf128_ps(t1, 1));
            _mm_storeu_ps(o, s0);
            _mm_storeu_ps(o + 4, s1);
            for (i = 0; i < rq; i++) {
                S[(r + i) * ss + j] = o[i];
                if (rk > 1) S[(r + i) * ss + j + 1] = o[4 + i];
            }
        }
    }
}
KERN_TARGET_AVX2 static void kern__da_qk__avx2(const float *q, int64_t nq, int64_t D, const char *k,
                                                int64_t ks, kern_dtype kdt, int64_t n, float *S,
                                                int64_t ss) {
    if (kdt == KERN_BF16) kern__da_qk_body__avx2(q, nq, D, k, ks, KERN_BF16, n, S, ss);
    else if (kdt == KERN_F16) kern__da_qk_body__avx2(q, nq, D, k, ks, KERN_F16, n, S, ss);
    else if (kdt == KERN_I8) kern__da_qk_body__avx2(q, nq, D, k, ks, KERN_I8, n, S, ss);
    else kern__da_qk_body__avx2(q, nq, D, k, ks, KERN_F32, n, S, ss);
}
KERN_TARGET_AVX2 KERN__AINLINE void kern__da_pv_body__avx2(float *acc, int64_t as, const float *S,
                                                           int64_t ss, int64_t nq, const char *v,
                                                           int64_t vs, kern_dtype vdt, int64_t n,
                                                           int64_t Dv) {
    size_t es = kern_dtype_size(vdt);
    int64_t r, e, j;
    for (r = 0; r < nq; r += 4) {
        int rq = nq - r >= 4 ? 4 : (int)(nq - r), i;
        const float *pr[4], *p0, *p1, *p2, *p3;
        kern__da_rows4(S + r * ss, ss, rq, pr);
        p0 = pr[0], p1 = pr[1], p2 = pr[2], p3 = pr[3];
        for (e = 0; e < Dv; e += 16) {
            int w = Dv - e >= 16 ? 16 : (int)(Dv - e);
            int m0 = w >= 8 ? 8 : w, m1 = w - 8 > 0 ? w - 8 : 0;
            const char *vp = v + e * (int64_t)es;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00;
            __m256 a20 = a00, a21 = a00, a30 = a00, a31 = a00, x0, x1, b;
            __m256 a[8];
            for (j = 0; j < n; j++, vp += vs) {
                if (w == 16) {
                    x0 = kern__da_ld__avx2(vp, vdt, 8);
                    x1 = kern__da_ld__avx2(vp + 8 * (int64_t)es, vdt, 8);
                } else {
                    x0 = kern__da_ld__avx2(vp, vdt, m0);
                    x1 = m1 ? kern__da_ld__avx2(vp + 8 * (int64_t)es, vdt, m1) : _mm256_setzero_ps();
                }
                b = _mm256_broadcast_ss(p0 + j);
                a00 = _mm256_fmadd_ps(b, x0, a00);
                a01 = _mm256_fmadd_ps(b, x1, a01);
                b = _mm256_broadcast_ss(p1 + j);
                a10 = _mm256_fmadd_ps(b, x0, a10);
                a11 = _mm256_fmadd_ps(b, x1, a11);
                b = _mm256_broadcast_ss(p2 + j);
                a20 = _mm256_fmadd_ps(b, x0, a20);
                a21 = _mm256_fmadd_ps(b, x1, a21);
                b = _mm256_broadcast_ss(p3 + j);
                a30 = _mm256_fmadd_ps(b, x0, a30);
                a31 = _mm256_fmadd_ps(b, x1, a31);
            }
            a[0] = a00, a[1] = a01, a[2] = a10, a[3] = a11;
            a[4] = a20, a[5] = a21, a[6] = a30, a[7] = a31;
            for (i = 0; i < rq; i++) {
                float *o = acc + (r + i) * as + e;
                kern__storen__avx2(o, _mm256_add_ps(kern__loadn__avx2(o, m0), a[2 * i]), m0);
                if (m1) kern__storen__avx2(o + 8, _mm256_add_ps(kern__loadn__avx2(o + 8, m1), a[2 * i + 1]), m1);
            }
        }
    }
}
KERN_TARGET_AVX2 static void kern__da_pv__avx2(float *acc, int64_t as, const float *S, int64_t ss,
                                                int64_t nq, const char *v, int64_t vs, kern_dtype vdt,
                                                int64_t n, int64_t Dv) {
    if (vdt == KERN_BF16) kern__da_pv_body__avx2(acc, as, S, ss, nq, v, vs, KERN_BF16, n, Dv);
    else if (vdt == KERN_F16) kern__da_pv_body__avx2(acc, as, S, ss, nq, v, vs, KERN_F16, n, Dv);
    else if (vdt == KERN_I8) kern__da_pv_body__avx2(acc, as, S, ss, nq, v, vs, KERN_I8, n, Dv);
    else kern__da_pv_body__avx2(acc, as, S, ss, nq, v, vs, KERN_F32, n, Dv);
}
KERN_TARGET_AVX2 static void kern__da_qrow__avx2(float *dst, const void *src, kern_dtype dt, int64_t n,
                                                 float scale) {
    __m256 sv = _mm256_set1_ps(scale);
    size_t es = kern_dtype_size(dt);
    int64_t i;
    for (i = 0; i < n; i += 8) {
        int m = n - i >= 8 ? 8 : (int)(n - i);
        kern__storen__avx2(dst + i, kern__mul__avx2(kern__v_load_f32__avx2((const char *)src + i * (int64_t)es, dt, m), sv), m);
    }
}
static const kern__da_fns kern__da_fns_avx2 = {kern__da_dot__avx2, kern__da_axpy__avx2,
                                               kern__da_scale__avx2, kern__da_exp2n,
                                               kern__da_dot4__avx2, kern__da_axpy4__avx2,
                                               kern__da_exp2row__avx2, kern__da_qk__avx2,
                                               kern__da_pv__avx2, kern__da_qrow__avx2,
                                               kern__da_rowmax__avx2, kern__da_vmul__avx2};

/* AVX-512: register-blocked blocks. qk holds 4 q rows x 4 k rows of
 * 16-lane partial dot products in 16 registers along D and reduces them at
 * the end (each k vector loaded once for 4 q rows); pv keeps 4 rows x 64
 * columns of the accumulators in 16 registers across all n cache rows
 * (each v vector loaded once for 4 rows, the accumulators touched in memory
 * once per block instead of once per cache row). Rows past nq and cache
 * rows past n repeat a valid row; their results are not stored. */
KERN_TARGET_AVX512 static inline __m128 kern__da_sum4__avx512(__m512 a, __m512 b, __m512 c, __m512 d) {
    __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    __m512 x = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xEE));
    x = _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, 0x4E));
    x = _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, 0xB1));
    return _mm512_castps512_ps128(x); /* [a, b, c, d] summed */
}
/* acc_i += y * x_i for the block's four vectors x0..x3 */
#define KERN__DA_FMA4(y, c0, c1, c2, c3)                                        \
    do {                                                                        \
        c0 = _mm512_fmadd_ps(y, x0, c0);                                        \
        c1 = _mm512_fmadd_ps(y, x1, c1);                                        \
        c2 = _mm512_fmadd_ps(y, x2, c2);                                        \
        c3 = _mm512_fmadd_ps(y, x3, c3);                                        \
    } while (0)
/* The bodies take the dtype as a constant (always inlined into one copy
 * per dtype below), so the conversion is not a branch per load. bf16 is
 * widened by a shift alone: a NaN stays a NaN (the products need no quiet
 * bit), two ops a vector instead of five. */
KERN_TARGET_AVX512 KERN__AINLINE __m512 kern__da_ld__avx512(const void *p, kern_dtype dt, int m) {
    __m256i h;
    if (dt == KERN_F32) return m == 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(kern__tailmask__avx512(m), p);
    if (dt == KERN_I8)
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
            m == 16 ? _mm_loadu_si128((const __m128i *)p) : _mm_maskz_loadu_epi8(kern__tailmask__avx512(m), p)));
    h = m == 16 ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(kern__tailmask__avx512(m), p);
    if (dt == KERN_BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}
KERN_TARGET_AVX512 KERN__AINLINE void kern__da_qk_body__avx512(const float *q, int64_t nq, int64_t D,
                                                               const char *k, int64_t ks, kern_dtype kdt,
                                                               int64_t n, float *S, int64_t ss) {
    size_t es = kern_dtype_size(kdt);
    int64_t r, j, d;
    for (r = 0; r < nq; r += 4) {
        int rq = nq - r >= 4 ? 4 : (int)(nq - r);
        const float *qr[4], *q0, *q1, *q2, *q3;
        kern__da_rows4(q + r * D, D, rq, qr);
        q0 = qr[0], q1 = qr[1], q2 = qr[2], q3 = qr[3];
        for (j = 0; j < n; j += 4) {
            int rk = n - j >= 4 ? 4 : (int)(n - j);
            const char *k0 = k + j * ks, *k1 = rk > 1 ? k0 + ks : k0;
            const char *k2 = rk > 2 ? k0 + 2 * ks : k0, *k3 = rk > 3 ? k0 + 3 * ks : k0;
            __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
            __m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00, a20 = a00, a21 = a00, a22 = a00;
            __m512 a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
            __mmask8 sm = (__mmask8)((1u << rk) - 1);
            float *s0 = S + r * ss + j;
#define KERN__DA_QK_STEP(M)                                                     \
    do {                                                                        \
        int64_t off = d * (int64_t)es;                                          \
        __m512 x0 = kern__da_ld__avx512(k0 + off, kdt, M);                      \
        __m512 x1 = kern__da_ld__avx512(k1 + off, kdt, M);                      \
        __m512 x2 = kern__da_ld__avx512(k2 + off, kdt, M);                      \
        __m512 x3 = kern__da_ld__avx512(k3 + off, kdt, M);                      \
        __m512 y = kern__da_ld__avx512(q0 + d, KERN_F32, M);                    \
        KERN__DA_FMA4(y, a00, a01, a02, a03);                                 \
        y = kern__da_ld__avx512(q1 + d, KERN_F32, M);                           \
        KERN__DA_FMA4(y, a10, a11, a12, a13);                                 \
        y = kern__da_ld__avx512(q2 + d, KERN_F32, M);                           \
        KERN__DA_FMA4(y, a20, a21, a22, a23);                                 \
        y = kern__da_ld__avx512(q3 + d, KERN_F32, M);                           \
        KERN__DA_FMA4(y, a30, a31, a32, a33);                                 \
    } while (0)
            for (d = 0; d + 16 <= D; d += 16) KERN__DA_QK_STEP(16);
            if (d < D) KERN__DA_QK_STEP((int)(D - d));
#undef KERN__DA_QK_STEP
            _mm_mask_storeu_ps(s0, sm, kern__da_sum4__avx512(a00, a01, a02, a03));
            if (rq > 1) _mm_mask_storeu_ps(s0 + ss, sm, kern__da_sum4__avx512(a10, a11, a12, a13));
            if (rq > 2) _mm_mask_storeu_ps(s0 + 2 * ss, sm, kern__da_sum4__avx512(a20, a21, a22, a23));
            if (rq > 3) _mm_mask_storeu_ps(s0 + 3 * ss, sm, kern__da_sum4__avx512(a30, a31, a32, a33));
        }
    }
}
KERN_TARGET_AVX512 static void kern__da_qk__avx512(const float *q, int64_t nq, int64_t D, const char *k,
                                                    int64_t ks, kern_dtype kdt, int64_t n, float *S,
                                                    int64_t ss) {
    if (kdt == KERN_BF16) kern__da_qk_body__avx512(q, nq, D, k, ks, KERN_BF16, n, S, ss);
    else if (kdt == KERN_F16) kern__da_qk_body__avx512(q, nq, D, k, ks, KERN_F16, n, S, ss);
    else if (kdt == KERN_I8) kern__da_qk_body__avx512(q, nq, D, k, ks, KERN_I8, n, S, ss);
    else kern__da_qk_body__avx512(q, nq, D, k, ks, KERN_F32, n, S, ss);
}
/* o[16 c .. 16 c + m_c) += a_c, c = 0..3 (m_c = 0: nothing) */
KERN_TARGET_AVX512 KERN__AINLINE void kern__da_pv_add__avx512(float *o, const int *m, __m512 a0, __m512 a1,
                                                              __m512 a2, __m512 a3) {
    __m512 a[4];
    int c;
    a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3;
    for (c = 0; c < 4 && m[c] > 0; c++)
        kern__storen__avx512(o + 16 * c, _mm512_add_ps(kern__loadn__avx512(o + 16 * c, m[c]), a[c]), m[c]);
}
KERN_TARGET_AVX512 KERN__AINLINE void kern__da_pv_body__avx512(float *acc, int64_t as, const float *S,
                                                               int64_t ss, int64_t nq, const char *v,
                                                               int64_t vs, kern_dtype vdt, int64_t n,
                                                               int64_t Dv) {
    size_t es = kern_dtype_size(vdt);
    int64_t r, e, j;
    for (r = 0; r < nq; r += 4) {
        int rq = nq - r >= 4 ? 4 : (int)(nq - r);
        const float *pr[4], *p0, *p1, *p2, *p3;
        float *o0 = acc + r * as;
        kern__da_rows4(S + r * ss, ss, rq, pr);
        p0 = pr[0], p1 = pr[1], p2 = pr[2], p3 = pr[3];
        for (e = 0; e < Dv; e += 64) {
            int w = Dv - e >= 64 ? 64 : (int)(Dv - e);
            int m[4], c, m0, m1, m2, m3;
            const char *vp = v + e * (int64_t)es;
            __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
            __m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00, a20 = a00, a21 = a00, a22 = a00;
            __m512 a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
            for (c = 0; c < 4; c++) m[c] = w - 16 * c >= 16 ? 16 : w - 16 * c > 0 ? w - 16 * c : 0;
            m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3];
            for (j = 0; j < n; j++, vp += vs) {
                __m512 x0, x1, x2, x3, b;
                if (w == 64) {
                    x0 = kern__da_ld__avx512(vp, vdt, 16);
                    x1 = kern__da_ld__avx512(vp + 16 * (int64_t)es, vdt, 16);
                    x2 = kern__da_ld__avx512(vp + 32 * (int64_t)es, vdt, 16);
                    x3 = kern__da_ld__avx512(vp + 48 * (int64_t)es, vdt, 16);
                } else {
                    x0 = kern__da_ld__avx512(vp, vdt, m0);
                    x1 = kern__da_ld__avx512(vp + 16 * (int64_t)es, vdt, m1);
                    x2 = kern__da_ld__avx512(vp + 32 * (int64_t)es, vdt, m2);
                    x3 = kern__da_ld__avx512(vp + 48 * (int64_t)es, vdt, m3);
                }
                b = _mm512_set1_ps(p0[j]);
                KERN__DA_FMA4(b, a00, a01, a02, a03);
                b = _mm512_set1_ps(p1[j]);
                KERN__DA_FMA4(b, a10, a11, a12, a13);
                b = _mm512_set1_ps(p2[j]);
                KERN__DA_FMA4(b, a20, a21, a22, a23);
                b = _mm512_set1_ps(p3[j]);
                KERN__DA_FMA4(b, a30, a31, a32, a33);
            }
            kern__da_pv_add__avx512(o0 + e, m, a00, a01, a02, a03);
            if (rq > 1) kern__da_pv_add__avx512(o0 + as + e, m, a10, a11, a12, a13);
            if (rq > 2) kern__da_pv_add__avx512(o0 + 2 * as + e, m, a20, a21, a22, a23);
            if (rq > 3) kern__da_pv_add__avx512(o0 + 3 * as + e, m, a30, a31, a32, a33);
        }
    }
}
KERN_TARGET_AVX512 static void kern__da_pv__avx512(float *acc, int64_t as, const float *S, int64_t ss,
                                                    int64_t nq, const char *v, int64_t vs,
                                                    kern_dtype vdt, int64_t n, int64_t Dv) {
    if (vdt == KERN_BF16) kern__da_pv_body__avx512(acc, as, S, ss, nq, v, vs, KERN_BF16, n, Dv);
    else if (vdt == KERN_F16) kern__da_pv_body__avx512(acc, as, S, ss, nq, v, vs, KERN_F16, n, Dv);
    else if (vdt == KERN_I8) kern__da_pv_body__avx512(acc, as, S, ss, nq, v, vs, KERN_I8, n, Dv);
    else kern__da_pv_body__avx512(acc, as, S, ss, nq, v, vs, KERN_F32, n, Dv);
}
KERN_TARGET_AVX512 static void kern__da_qrow__avx512(float *dst, const void *src, kern_dtype dt, int64_t n,
                                                      float scale) {
    __m512 sv = _mm512_set1_ps(scale);
    size_t es = kern_dtype_size(dt);
    int64_t i;
    for (i = 0; i < n; i += 16) {
        int m = n - i >= 16 ? 16 : (int)(n - i);
        kern__storen__avx512(dst + i, kern__mul__avx512(kern__v_load_f32__avx512((const char *)src + i * (int64_t)es, dt, m), sv), m);
    }
}
#undef KERN__DA_FMA4
static const kern__da_fns kern__da_fns_avx512 = {kern__da_dot__avx2, kern__da_axpy__avx2,
                                                 kern__da_scale__avx2, kern__da_exp2n,
                                                 kern__da_dot4__avx2, kern__da_axpy4__avx2,
                                                 kern__da_exp2row__avx2, kern__da_qk__avx512,
                                                 kern__da_pv__avx512, kern__da_qrow__avx512,
                                                 kern__da_rowmax__avx2, kern__da_vmul__avx2};
#endif

typedef struct kern__da_job {
    const kern__da_fns *f;
    kern_ctx *ctx;
    const kern_tensor *q, *k, *v, *lens, *out;
    const kern_tensor *ksc, *vsc; /* i8 caches: [B, Lmax, Hkv] f32 scales */
    int64_t B, Lq, H, Hkv, G, D, Dv, Lmax, rows; /* rows = H * Lq (the merge's rows per sequence) */
    int64_t chunk;  /* cache rows per chunk (<= KERN__DA_CHUNK, the S row stride) */
    int64_t nchunk; /* chunks of Lmax */
    int64_t qb, nqb; /* query positions per block, blocks */
    int64_t trows;  /* H * qb: the rows of a task */
    int64_t cps, nsplit; /* chunks per split, splits of Lmax */
    int64_t nsrun;  /* at run time: the splits the longest sequence needs */
    float scale2;   /* scale * log2(e) */
    float *part;    /* [B][nsplit][nqb][trows][Dv + 2] */
} kern__da_job;

static size_t kern__da_thread_bytes(int64_t rows, int64_t D, int64_t Dv) {
    return (size_t)(rows * (D + KERN__DA_CHUNK) + Dv) * sizeof(float);
}

/* The splits that cover the first n cache rows (0 for n <= 0). */
static int64_t kern__da_splits(const kern__da_job *J, int64_t n) {
    return n > 0 ? ((n + J->chunk - 1) / J->chunk + J->cps - 1) / J->cps : 0;
}
/* The query positions of block qi (qb, or fewer in the last block). */
static int64_t kern__da_block_rows(const kern__da_job *J, int64_t qi) {
    return J->Lq - qi * J->qb < J->qb ? J->Lq - qi * J->qb : J->qb;
}
/* Task (b, split s, block qi)'s rows of the workspace: row r = h * Lb + l
 * - l0 at r * (Dv + 2), each (running max, sum, acc[Dv]). */
static float *kern__da_part(const kern__da_job *J, int64_t b, int64_t s, int64_t qi) {
    return J->part + ((b * J->nsplit + s) * J->nqb + qi) * J->trows * (J->Dv + 2);
}

/* An i8 cache's row scales t [B, Lmax, Hkv] into the chunk's n columns of
 * S (Rh rows per kv head): for each kv head, its scales at rows j0..
 * gathered once into sc, then every q row of that head multiplied by them. */
KERN__AINLINE void kern__da_scale_rows(const kern__da_job *J, const kern_tensor *t, int64_t b, int64_t j0,
                                int64_t n, int64_t Rh, float *S, float *sc) {
    int64_t hk, j, r;
    for (hk = 0; hk < J->Hkv; hk++) {
        const char *p = (const char *)t->data + (b * t->stride[0] + j0 * t->stride[1] + hk * t->stride[2]) * 4;
        for (j = 0; j < n; j++) memcpy(sc + j, p + j * t->stride[1] * 4, 4);
        for (r = hk * Rh; r < (hk + 1) * Rh; r++) J->f->vmul(S + r * KERN__DA_CHUNK, sc, n);
    }
}

/* One (sequence, query block, split) task: the block's H * Lb rows (row r
 * = h * Lb + l - l0) against the split's chunks, in order; within a chunk
 * every kv head of a cache row is read together (the [B, Lmax, Hkv, D]
 * layout keeps them contiguous), so the chunk streams through once. The
 * task's rows of the workspace keep the running max m, sum and acc; a
 * chunk with a larger max rescales them first (the online softmax). A
 * chunk no query of the block sees is never read. */
static void kern__da_task(void *arg, int64_t task, int thread) {
    const kern__da_job *J = (const kern__da_job *)arg;
    int64_t qi = task % J->nqb, s = (task / J->nqb) % J->nsrun, b = task / (J->nqb * J->nsrun);
    int64_t Lq = J->Lq, l0 = qi * J->qb, Lb = kern__da_block_rows(J, qi);
    int64_t R = J->H * Lb, Rh = J->G * Lb, Dv2 = J->Dv + 2;
    int64_t len = kern__llm_ix(J->lens, b), r, j, hk, g, c;
    /* cache rows the block's last query sees, and the chunks that covers */
    int64_t seen = len - Lq + l0 + Lb, c0 = s * J->cps, c1 = c0 + J->cps;
    int64_t cseen = seen > 0 ? (seen + J->chunk - 1) / J->chunk : 0;
    float *qs = (float *)kern__thread_scratch(J->ctx, thread);
    float *S = qs + R * J->D;
    float *part = kern__da_part(J, b, s, qi);
    size_t qe = kern_dtype_size(J->q->dtype), ke = kern_dtype_size(J->k->dtype);
    size_t ve = kern_dtype_size(J->v->dtype);
    const char *kb = (const char *)J->k->data + b * J->k->stride[0] * (int64_t)ke;
    const char *vb = (const char *)J->v->data + b * J->v->stride[0] * (int64_t)ve;
    int64_t ks = J->k->stride[1] * (int64_t)ke, vs = J->v->stride[1] * (int64_t)ve;
    int64_t khs = J->k->stride[2] * (int64_t)ke, vhs = J->v->stride[2] * (int64_t)ve;
    int k_packed = khs == J->D * (int64_t)ke && ks == J->Hkv * khs;
    int v_packed = vhs == J->Dv * (int64_t)ve && vs == J->Hkv * vhs;
    float sc[KERN__DA_CHUNK];
    if (c1 > cseen) c1 = cseen;
    if (c0 >= c1) return; /* the merge reads none of these rows */
    for (r = 0; r < R; r++) {
        float *o = part + r * Dv2;
        o[0] = -INFINITY;
        o[1] = 0.0f;
        memset(o + 2, 0, (size_t)J->Dv * sizeof(float));
    }
    /* q rows, scaled into log2 units, as f32 */
    for (r = 0; r < R; r++) {
        int64_t h = r / Lb, l = l0 + r % Lb, d;
        const char *qp = (const char *)J->q->data +
                         (b * J->q->stride[0] + l * J->q->stride[1] + h * J->q->stride[2]) * (int64_t)qe;
        if (J->f->qrow) {
            J->f->qrow(qs + r * J->D, qp, J->q->dtype, J->D, J->scale2);
            continue;
        }
        for (d = 0; d < J->D; d++)
            qs[r * J->D + d] = kern__s_mul(kern__s_load_f32(qp + d * (int64_t)qe, J->q->dtype, 1), J->scale2);
    }
    for (c = c0; c < c1; c++) {
        int64_t j0 = c * J->chunk, nmax = seen - j0; /* rows of the chunk the last query sees */
        if (nmax > J->chunk) nmax = J->chunk;
        if (J->f->qk) {
            /* scores: blocks of 16 cache rows, 4 rows x every kv head at a
             * time (four address-ordered streams). Before each 4-row x head
             * block, hints fetch its share of the K rows KERN__DA_PFK blocks
             * ahead and of this block's V rows (for the p.v pass below), so
             * the misses are spread over the dot products instead of queued
             * in a burst (measured: a burst per block was 1.6x slower). Only
             * for caches packed as [Lmax, Hkv, D]. */
            int64_t jb, nb, x, j4, pt, nparts, kshare, vshare;
            for (jb = 0; jb < nmax; jb += 16) {
                int64_t ja = jb + 16 * KERN__DA_PFK, na = nmax - ja < 16 ? nmax - ja : 16;
                nb = nmax - jb < 16 ? nmax - jb : 16;
                nparts = J->Hkv * ((nb + 3) / 4);
                kshare = k_packed && na > 0 ? (na * ks / nparts + 63) & ~(int64_t)63 : 0;
                vshare = v_packed ? (nb * vs / nparts + 63) & ~(int64_t)63 : 0;
                for (j4 = 0, pt = 0; j4 < nb; j4 += 4)
                    for (hk = 0; hk < J->Hkv; hk++, pt++) {
                        int64_t ko = (j0 + ja) * ks + pt * kshare, kend = (j0 + ja + na) * ks;
                        int64_t vo = (j0 + jb) * vs + pt * vshare, vend = (j0 + jb + nb) * vs;
                        int64_t n4 = nb - j4 < 4 ? nb - j4 : 4, h2;
                        /* a whole f32 block: two calls of 2 rows (qk's
                         * register block), half of the hints before each: a
                         * burst of the whole share (64 lines) filled the
                         * miss buffers and then the load queue, and the FMAs
                         * behind it waited (measured on Zen 3: 1.04-1.16x;
                         * level for bf16, whose share is half, and 0.95x for
                         * the compute-bound i8 form, so those keep one call) */
                        int nh2 = ke == 4 && n4 == 4 ? 2 : 1;
                        int64_t kh = nh2 == 2 ? (kshare / 2) & ~(int64_t)63 : kshare;
                        int64_t vh = nh2 == 2 ? (vshare / 2) & ~(int64_t)63 : vshare;
                        for (h2 = 0; h2 < nh2; h2++) {
                            int64_t j2 = j4 + h2 * (n4 / nh2);
                            for (x = h2 ? kh : 0; x < (h2 ? kshare : kh) && ko + x < kend; x += 64)
                                kern__da_prefetch_l2(kb + ko + x);
                            for (x = h2 ? vh : 0; x < (h2 ? vshare : vh) && vo + x < vend; x += 64)
                                kern__da_prefetch_l2(vb + vo + x);
                            J->f->qk(qs + hk * Rh * J->D, Rh, J->D, kb + (j0 + jb + j2) * ks + hk * khs,
                                     ks, J->k->dtype, n4 / nh2,
                                     S + hk * Rh * KERN__DA_CHUNK + jb + j2, KERN__DA_CHUNK);
                        }
                    }
            }
        } else
        /* scores, cache row by cache row */
        for (j = 0; j < nmax; j++) {
            const char *krow = kb + (j0 + j) * ks;
            for (hk = 0; hk < J->Hkv; hk++) {
                int64_t r1 = (hk + 1) * Rh;
                float o4[4];
                for (r = hk * Rh; r + 4 <= r1; r += 4) {
                    J->f->dot4(qs + r * J->D, J->D, krow + hk * khs, J->k->dtype, J->D, o4);
                    for (g = 0; g < 4; g++) S[(r + g) * KERN__DA_CHUNK + j] = o4[g];
                }
                for (; r < r1; r++)
                    S[r * KERN__DA_CHUNK + j] = J->f->dot(qs + r * J->D, krow + hk * khs, J->k->dtype, J->D);
            }
        }
        /* an i8 K: score = (q . codes) * the row's scale (the chunk's scales
         * of each kv head gathered once, then a vector multiply per q row) */
        if (J->ksc) kern__da_scale_rows(J, J->ksc, b, j0, nmax, Rh, S, sc);
        /* per row: the new max, the old acc and sum rescaled to it when it
         * grew, probabilities (in S) and their sum */
        for (r = 0; r < R; r++) {
            int64_t n = len - (Lq - 1 - (l0 + r % Lb)) - j0;
            float *sr = S + r * KERN__DA_CHUNK, *o = part + r * Dv2;
            if (n > nmax) n = nmax;
            if (n < 0) n = 0;
            if (n > 0) {
                float m = J->f->rowmax(sr, n);
                if (m <= o[0]) {
                    m = o[0];
                } else if (o[0] != -INFINITY) {
                    float w = J->f->exp2n(o[0] - m);
                    J->f->scale(o + 2, w, J->Dv);
                    o[1] = kern__s_mul(o[1], w);
                }
                o[0] = m;
                o[1] += J->f->exp2row(sr, m, n);
            }
            for (j = n; j < nmax; j++) sr[j] = 0.0f;
        }
        /* an i8 V: each row's scale goes into its weight (the sums are taken) */
        if (J->vsc) kern__da_scale_rows(J, J->vsc, b, j0, nmax, Rh, S, sc);
        if (J->f->pv) {
            for (hk = 0; hk < J->Hkv; hk++)
                J->f->pv(part + hk * Rh * Dv2 + 2, Dv2, S + hk * Rh * KERN__DA_CHUNK, KERN__DA_CHUNK, Rh,
                         vb + j0 * vs + hk * vhs, vs, J->v->dtype, nmax, J->Dv);
        } else
        /* acc += p v, cache row by cache row */
        for (j = 0; j < nmax; j++) {
            const char *vrow = vb + (j0 + j) * vs;
            for (hk = 0; hk < J->Hkv; hk++) {
                int64_t r1 = (hk + 1) * Rh;
                float a4[4];
                for (r = hk * Rh; r + 4 <= r1; r += 4) {
                    for (g = 0; g < 4; g++) a4[g] = S[(r + g) * KERN__DA_CHUNK + j];
                    J->f->axpy4(part + r * Dv2 + 2, Dv2, a4, vrow + hk * vhs, J->v->dtype, J->Dv);
                }
                for (; r < r1; r++)
                    J->f->axpy(part + r * Dv2 + 2, S[r * KERN__DA_CHUNK + j], vrow + hk * vhs,
                               J->v->dtype, J->Dv);
            }
        }
    }
}

static void kern__da_merge_task(void *arg, int64_t row, int thread) {
    const kern__da_job *J = (const kern__da_job *)arg;
    /* row = b * rows + r, r = h * Lq + l */
    int64_t r = row % J->rows, b = row / J->rows, h = r / J->Lq, l = r % J->Lq;
    int64_t qi = l / J->qb, l0 = qi * J->qb, Lb = kern__da_block_rows(J, qi);
    int64_t nsp = kern__da_splits(J, kern__llm_ix(J->lens, b) - (J->Lq - 1 - l));
    int64_t c, stride = J->nqb * J->trows * (J->Dv + 2);
    const float *p0 = kern__da_part(J, b, 0, qi) + (h * Lb + l - l0) * (J->Dv + 2);
    float *acc = (float *)kern__thread_scratch(J->ctx, thread);
    float M = -INFINITY, den = 0.0f;
    size_t oe = kern_dtype_size(J->out->dtype);
    char *op = (char *)J->out->data +
               (b * J->out->stride[0] + l * J->out->stride[1] + h * J->out->stride[2]) * (int64_t)oe;
    int64_t d;
    for (c = 0; c < nsp; c++) M = kern__s_max(M, p0[c * stride]);
    memset(acc, 0, (size_t)J->Dv * sizeof(float));
    if (M != -INFINITY) {
        for (c = 0; c < nsp; c++) {
            const float *p = p0 + c * stride;
            float w;
            if (p[1] == 0.0f && p[0] == -INFINITY) continue;
            w = J->f->exp2n(p[0] - M);
            den += kern__s_mul(w, p[1]);
            J->f->axpy(acc, w, p + 2, KERN_F32, J->Dv);
        }
        J->f->scale(acc, 1.0f / den, J->Dv);
    }
    for (d = 0; d < J->Dv; d++) kern__s_store_f32(op + d * (int64_t)oe, J->out->dtype, acc[d], 1, 0);
}

static kern_status kern__da_check(const char *op, const kern_tensor *q, const kern_tensor *k,
                                  const kern_tensor *v, const kern_tensor *lens,
                                  const kern_tensor *out, int check_values,
                                  const kern_decode_attention_params *p) {
    kern_status st;
    int64_t B, b;
    int d;
    if (!q || !k || !v || !lens || !out)
        return kern__err(KERN_ERR_ARG, "%s: %s is NULL", op,
                         !q ? "q" : !k ? "k_cache" : !v ? "v_cache" : !lens ? "k_lens" : "out");
    if ((st = kern_tensor_check(q, op, "q")) || (st = kern_tensor_check(k, op, "k_cache")) ||
        (st = kern_tensor_check(v, op, "v_cache")) || (st = kern_tensor_check(out, op, "out")))
        return st;
    if (!kern__llm_float_dt(q->dtype) || !kern__llm_cache_dt(k->dtype) ||
        !kern__llm_cache_dt(v->dtype) || !kern__llm_float_dt(out->dtype)) {
        const kern_tensor *t = !kern__llm_float_dt(q->dtype) ? q : !kern__llm_cache_dt(k->dtype) ? k
                               : !kern__llm_cache_dt(v->dtype) ? v : out;
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s is not f32/bf16/f16%s", op,
                         t == q ? "q" : t == k ? "k_cache" : t == v ? "v_cache" : "out",
                         kern_dtype_name(t->dtype), t == k || t == v ? " (or i8 with scales)" : "");
    }
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || out->ndim != 4)
        return kern__err(KERN_ERR_SHAPE, "%s: q, k_cache, v_cache and out must be 4-D", op);
    B = q->shape[0];
    if (k->shape[0] != B || v->shape[0] != B || out->shape[0] != B)
        return kern__err(KERN_ERR_SHAPE, "%s: the batch (%lld) differs between q, the caches and out",
                         op, (long long)B);
    if (k->shape[3] != q->shape[3])
        return kern__err(KERN_ERR_SHAPE, "%s: k_cache.shape[3]=%lld but q.shape[3]=%lld", op,
                         (long long)k->shape[3], (long long)q->shape[3]);
    if (v->shape[1] != k->shape[1] || v->shape[2] != k->shape[2])
        return kern__err(KERN_ERR_SHAPE, "%s: v_cache's [Lmax, Hkv] differ from k_cache's", op);
    if (k->shape[2] < 1 || q->shape[2] % k->shape[2])
        return kern__err(KERN_ERR_SHAPE, "%s: q's %lld heads are not a multiple of the cache's %lld",
                         op, (long long)q->shape[2], (long long)k->shape[2]);
    if (out->shape[1] != q->shape[1] || out->shape[2] != q->shape[2] ||
        out->shape[3] != v->shape[3])
        return kern__err(KERN_ERR_SHAPE, "%s: out must be [%lld, %lld, %lld, %lld]", op,
                         (long long)B, (long long)q->shape[1], (long long)q->shape[2],
                         (long long)v->shape[3]);
    for (d = 0; d < 4; d++) {
        const kern_tensor *t = d == 0 ? q : d == 1 ? k : d == 2 ? v : out;
        if (t->shape[3] > 1 && t->stride[3] != 1)
            return kern__err(KERN_ERR_LAYOUT, "%s: %s's last dim needs unit stride", op,
                             d == 0 ? "q" : d == 1 ? "k_cache" : d == 2 ? "v_cache" : "out");
    }
    if ((st = kern__llm_check_lens(lens, B, op, "k_lens"))) return st;
    if ((st = kern__llm_kv_scale_check(op, k, p ? p->k_scale : NULL, "k_cache", "params.k_scale", 0,
                                       &out, 1)) ||
        (st = kern__llm_kv_scale_check(op, v, p ? p->v_scale : NULL, "v_cache", "params.v_scale", 0,
                                       &out, 1)))
        return st;
    if (kern__tensor_self_overlap(out))
        return kern__err(KERN_ERR_LAYOUT, "%s: out has overlapping elements", op);
    if (kern_tensors_overlap(out, q) || kern_tensors_overlap(out, k) ||
        kern_tensors_overlap(out, v) || kern_tensors_overlap(out, lens))
        return kern__err(KERN_ERR_ARG, "%s: out overlaps an input", op);
    if (check_values)
        for (b = 0; b < B; b++) {
            int64_t n = kern__llm_ix(lens, b);
            if (n < 0)
                return kern__err(KERN_ERR_INDEX, "%s: k_lens[%lld]=%lld is negative", op,
                                 (long long)b, (long long)n);
            if (n > k->shape[1])
                return kern__err(KERN_ERR_SHAPE, "%s: k_lens[%lld]=%lld is past the cache's %lld rows",
                                 op, (long long)b, (long long)n, (long long)k->shape[1]);
        }
    return KERN_OK;
}

static void kern__da_plan(const kern_tensor *q, const kern_tensor *k, const kern_tensor *v,
                          kern__da_job *J, size_t *shared, size_t *thread) {
    memset(J, 0, sizeof *J);
    J->B = q->shape[0];
    J->Lq = q->shape[1];
    J->H = q->shape[2];
    J->D = q->shape[3];
    J->Hkv = k->shape[2];
    J->Lmax = k->shape[1];
    J->Dv = v->shape[3];
    J->G = J->H / J->Hkv;
    J->rows = J->H * J->Lq;
    /* a chunk's K and V rows (all kv heads) within 512 KiB, so the V rows
     * fetched during the scores are still in L2 for p.v: 128 rows for a
     * bf16 Llama cache (Hkv 8, D 128), 64 for f32. Shapes and dtypes only:
     * the same chunking for any thread count. */
    {
        int64_t row = J->Hkv * (J->D * (int64_t)kern_dtype_size(k->dtype) +
                                J->Dv * (int64_t)kern_dtype_size(v->dtype));
        J->chunk = KERN__DA_CHUNK;
        while (J->chunk > 16 && J->chunk * row > ((int64_t)KERN__DA_CHUNK_BYTES)) J->chunk /= 2;
    }
    J->nchunk = (J->Lmax + J->chunk - 1) / J->chunk;
    if (J->nchunk < 1) J->nchunk = 1;
    /* Decode (Lq <= 8): one block of every query, split per chunk, so the
     * step's few rows still spread over the threads. Longer Lq (a prompt
     * through the cache): blocks of about 64 rows (H * qb), and with 8 or
     * more blocks per sequence no split (the blocks are the parallelism;
     * the workspace stays [nqb][trows] instead of [nchunk][rows]); causal
     * blocks skip the chunks past their last query. */
    J->qb = J->Lq <= 8 ? J->Lq : J->H >= 64 ? 1 : 64 / J->H;
    if (J->qb > J->Lq) J->qb = J->Lq;
    if (J->qb < 1) J->qb = 1;
    J->nqb = (J->Lq + J->qb - 1) / J->qb;
    J->trows = J->H * J->qb;
    J->cps = J->nqb >= 8 ? J->nchunk : 1;
    J->nsplit = (J->nchunk + J->cps - 1) / J->cps;
    *shared = (size_t)(J->B * J->nsplit * J->nqb * J->trows * (J->Dv + 2)) * sizeof(float);
    *thread = kern__da_thread_bytes(J->trows, J->D, J->Dv);
    if (J->B * J->H * J->Lq == 0) *shared = *thread = 0;
}

KERN_API kern_status kern_decode_attention_workspace_size(
    kern_ctx *ctx, const kern_tensor *q, const kern_tensor *k_cache, const kern_tensor *v_cache,
    const kern_tensor *k_lens, const kern_tensor *out, const kern_decode_attention_params *params,
    size_t *bytes) {
    static const char *op = "kern_decode_attention_workspace_size";
    kern__da_job J;
    size_t shared, thread;
    kern_status st;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    if ((st = kern__da_check(op, q, k_cache, v_cache, k_lens, out, 0, params))) return st;
    if ((st = kern__op_begin(&ctx, op))) return st;
    kern__da_plan(q, k_cache, v_cache, &J, &shared, &thread);
    *bytes = kern__op_workspace_bytes(ctx, shared, thread);
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_decode_attention(kern_ctx *ctx, const kern_tensor *q,
                                           const kern_tensor *k_cache,
                                           const kern_tensor *v_cache,
                                           const kern_tensor *k_lens, const kern_tensor *out,
                                           const kern_decode_attention_params *params) {
    static const char *op = "kern_decode_attention";
    kern_decode_attention_params p;
    kern__da_job J;
    size_t shared, thread;
    kern_status st;
    float scale;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    if ((st = kern__da_check(op, q, k_cache, v_cache, k_lens, out, 1, &p))) return st;
    if (p.scale_set && !(p.scale == p.scale && p.scale - p.scale == 0.0f))
        return kern__err(KERN_ERR_ARG, "%s: params.scale is not finite", op);
    scale = p.scale_set || p.scale != 0.0f ? p.scale
                                           : (float)(1.0 / sqrt((double)(q->shape[3] > 0 ? q->shape[3] : 1)));
    if ((st = kern__op_begin(&ctx, op)) != KERN_OK) return st;
    kern__da_plan(q, k_cache, v_cache, &J, &shared, &thread);
    if (shared == 0 && thread == 0) {
        kern__op_end(ctx);
        return KERN_OK;
    }
    st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size, shared, thread);
    if (!st) st = kern__reserve_thread_scratch(ctx, thread);
    if (!st) {
        J.part = (float *)kern__workspace(ctx, shared);
        if (!J.part)
            st = kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes of workspace", op, shared);
    }
    if (!st) {
#ifdef KERN_X86
        kern_isa isa = kern_ctx_isa(ctx);
        J.f = isa == KERN_ISA_AVX512 || isa == KERN_ISA_AVX512_VNNI || isa == KERN_ISA_AVX512_BF16 ||
                  isa == KERN_ISA_AMX
                  ? &kern__da_fns_avx512
              : (kern_ctx_features(ctx) & KERN_CPU_AVX2) ? &kern__da_fns_avx2
                                                         : &kern__da_fns_scalar;
#else
        J.f = &kern__da_fns_scalar;
#endif
        J.ctx = ctx;
        J.q = q;
        J.k = k_cache;
        J.v = v_cache;
        J.lens = k_lens;
        J.out = out;
        J.ksc = p.k_scale;
        J.vsc = p.v_scale;
        J.scale2 = (float)((double)scale * 1.4426950408889634);
        {   /* the splits the longest sequence needs */
            int64_t b, lmax = 0;
            for (b = 0; b < J.B; b++)
                if (kern__llm_ix(k_lens, b) > lmax) lmax = kern__llm_ix(k_lens, b);
            J.nsrun = kern__da_splits(&J, lmax);
        }
        st = kern_parallel_for(ctx, J.B * J.nsrun * J.nqb, kern__da_task, &J);
        if (!st) st = kern_parallel_for(ctx, J.B * J.rows, kern__da_merge_task, &J);
    }
    kern__op_end(ctx);
    return st;
}

/* ------------------------------------------- GEMV over a K-major weight
 * w[n, k] at n + k * ldw (the [K, N] row-major weight of x @ W, viewed as
 * F.linear's [N, K]): a task takes KERN__GEMVT_NB columns (4 KiB of an
 * f32 row) and streams the weight's row segments in address order, in
 * blocks of KERN__GEMVT_KC rows; per pair of rows, tile[i, :] += x[i, k]
 * w[k, :] + x[i, k + 1] w[k + 1, :] for up to 4 x rows at once, the tile
 * (4 KiB a row) staying in L1. Rows 5..8 of x take a second pass over the
 * block, from L2. (A column-block order, decode attention's p.v blocks
 * over 16 columns at a time, read one line per row per pass and ran at a
 * third of the K-contiguous GEMV's speed.) */
#ifndef KERN__GEMVT_NB
#define KERN__GEMVT_NB 1024 /* columns per task (a multiple of KERN__GEMV_NB) */
#endif
#ifndef KERN__GEMVT_KC
#define KERN__GEMVT_KC 64   /* weight rows per block */
#endif
#ifndef KERN__GEMVT_PD
#define KERN__GEMVT_PD 8 /* hint distance, in weight rows (4, 16, 32 measured level or slower) */
#endif

/* krem: the weight rows from w to the matrix's end (hints stay inside) */
typedef void (*kern__gemvt_fn)(float *tile, int64_t ldt, const float *xc, int64_t ldx, int mr,
                               const char *w, int64_t ldw, kern_dtype wdt, int64_t kc, int64_t nn,
                               int64_t krem);

static void kern__gemvt_rows__scalar(float *tile, int64_t ldt, const float *xc, int64_t ldx, int mr,
                                     const char *w, int64_t ldw, kern_dtype wdt, int64_t kc,
                                     int64_t nn, int64_t krem) {
    size_t es = kern_dtype_size(wdt);
    int64_t k, j;
    int i;
    (void)krem;
    for (k = 0; k < kc; k++) {
        const char *wr = w + k * ldw;
        for (i = 0; i < mr; i++) {
            float a = xc[i * ldx + k];
            float *t = tile + i * ldt;
            for (j = 0; j < nn; j++) t[j] = kern__s_fma(a, kern__da_s_ld(wr + j * (int64_t)es, wdt), t[j]);
        }
    }
}

#ifdef KERN_X86
/* MR x rows (a constant in each inlined copy) against two weight rows at
 * a time, 8 columns per step: 2 weight loads, MR tile loads, 2 MR FMAs and
 * MR stores (the stores bound it: 16 bytes of f32 weight a cycle at MR 4,
 * above one core's DRAM stream) */
KERN_TARGET_AVX2 KERN__AINLINE void kern__gemvt_body__avx2(float *tile, int64_t ldt, const float *xc,
                                                           int64_t ldx, const int MR, const char *w,
                                                           int64_t ldw, kern_dtype wdt, int64_t kc,
                                                           int64_t nn, int64_t krem) {
    size_t es = kern_dtype_size(wdt);
    int64_t k = 0, j;
    int i;
    for (; k + 2 <= kc; k += 2) {
        const char *w0 = w + k * ldw, *w1 = w0 + ldw;
        /* the two rows KERN__GEMVT_PD ahead, one hint per line as this
         * pair is consumed (the hardware streams alone left the loads
         * waiting on DRAM: short runs of one row segment each) */
        int pf = k + KERN__GEMVT_PD + 1 < krem;
        const char *p0 = pf ? w0 + KERN__GEMVT_PD * ldw : w0, *p1 = pf ? p0 + ldw : w0;
        __m256 b0[4], b1[4];
        for (i = 0; i < MR; i++) {
            b0[i] = _mm256_set1_ps(xc[i * ldx + k]);
            b1[i] = _mm256_set1_ps(xc[i * ldx + k + 1]);
        }
        for (j = 0; j + 8 <= nn; j += 8) {
            __m256 v0 = kern__da_ld__avx2(w0 + j * (int64_t)es, wdt, 8);
            __m256 v1 = kern__da_ld__avx2(w1 + j * (int64_t)es, wdt, 8);
            if (pf && ((j * (int64_t)es) & 63) == 0) {
                kern__da_prefetch_l2(p0 + j * (int64_t)es);
                kern__da_prefetch_l2(p1 + j * (int64_t)es);
            }
            for (i = 0; i < MR; i++) {
                float *t = tile + i * ldt + j;
                _mm256_storeu_ps(t, _mm256_fmadd_ps(b1[i], v1, _mm256_fmadd_ps(b0[i], v0, _mm256_loadu_ps(t))));
            }
        }
        if (j < nn) {
            int m = (int)(nn - j);
            __m256 v0 = kern__da_ld__avx2(w0 + j * (int64_t)es, wdt, m);
            __m256 v1 = kern__da_ld__avx2(w1 + j * (int64_t)es, wdt, m);
            for (i = 0; i < MR; i++) {
                float *t = tile + i * ldt + j;
                kern__storen__avx2(t, _mm256_fmadd_ps(b1[i], v1, _mm256_fmadd_ps(b0[i], v0, kern__loadn__avx2(t, m))), m);
            }
        }
    }
    if (k < kc) { /* the odd last row */
        const char *w0 = w + k * ldw;
        for (j = 0; j < nn; j += 8) {
            int m = nn - j >= 8 ? 8 : (int)(nn - j);
            __m256 v0 = kern__da_ld__avx2(w0 + j * (int64_t)es, wdt, m);
            for (i = 0; i < MR; i++) {
                float *t = tile + i * ldt + j;
                kern__storen__avx2(t, _mm256_fmadd_ps(_mm256_set1_ps(xc[i * ldx + k]), v0, kern__loadn__avx2(t, m)), m);
            }
        }
    }
}
#define KERN__GEMVT_MR(DT)                                                                       \
    do {                                                                                         \
        if (mr == 1) kern__gemvt_body__avx2(tile, ldt, xc, ldx, 1, w, ldw, DT, kc, nn, krem);          \
        else if (mr == 2) kern__gemvt_body__avx2(tile, ldt, xc, ldx, 2, w, ldw, DT, kc, nn, krem);     \
        else if (mr == 3) kern__gemvt_body__avx2(tile, ldt, xc, ldx, 3, w, ldw, DT, kc, nn, krem);     \
        else kern__gemvt_body__avx2(tile, ldt, xc, ldx, 4, w, ldw, DT, kc, nn, krem);                  \
    } while (0)
KERN_TARGET_AVX2 static void kern__gemvt_rows__avx2(float *tile, int64_t ldt, const float *xc,
                                                    int64_t ldx, int mr, const char *w, int64_t ldw,
                                                    kern_dtype wdt, int64_t kc, int64_t nn, int64_t krem) {
    if (wdt == KERN_BF16) KERN__GEMVT_MR(KERN_BF16);
    else if (wdt == KERN_F16) KERN__GEMVT_MR(KERN_F16);
    else if (wdt == KERN_I8) KERN__GEMVT_MR(KERN_I8);
    else KERN__GEMVT_MR(KERN_F32);
}
#undef KERN__GEMVT_MR
#endif

typedef struct kern__gemvt_job {
    const kern__gemv_job *g;
    kern__gemvt_fn rows;
} kern__gemvt_job;

static void kern__gemvt_task(void *arg, int64_t task, int thread) {
    const kern__gemvt_job *T = (const kern__gemvt_job *)arg;
    const kern__gemv_job *J = T->g;
    float tile[KERN__GEMV_MB * KERN__GEMVT_NB], xc[KERN__GEMV_MB * KERN__GEMVT_KC];
    int64_t n0 = task * KERN__GEMVT_NB, nn = J->N - n0 < KERN__GEMVT_NB ? J->N - n0 : KERN__GEMVT_NB;
    size_t wes = kern_dtype_size(J->w->dtype), xes = kern_dtype_size(J->x->dtype);
    int64_t ldw = J->w->stride[1] * (int64_t)wes, m0, k0, k;
    const char *w0 = (const char *)J->w->data + n0 * J->w->stride[0] * (int64_t)wes;
    (void)thread;
    for (m0 = 0; m0 < J->M; m0 += KERN__GEMV_MB) {
        int mb = J->M - m0 < KERN__GEMV_MB ? (int)(J->M - m0) : KERN__GEMV_MB, i;
        for (i = 0; i < mb; i++) memset(tile + i * KERN__GEMVT_NB, 0, (size_t)nn * sizeof(float));
        for (k0 = 0; k0 < J->K; k0 += KERN__GEMVT_KC) {
            int64_t kc = J->K - k0 < KERN__GEMVT_KC ? J->K - k0 : KERN__GEMVT_KC;
            for (i = 0; i < mb; i++) {
                const char *xr = (const char *)J->x->data + ((m0 + i) * J->x->stride[0] + k0) * (int64_t)xes;
                for (k = 0; k < kc; k++)
                    xc[i * KERN__GEMVT_KC + k] = kern__s_load_f32(xr + k * (int64_t)xes, J->x->dtype, 1);
            }
            for (i = 0; i < mb; i += 4)
                T->rows(tile + i * KERN__GEMVT_NB, KERN__GEMVT_NB, xc + i * KERN__GEMVT_KC, KERN__GEMVT_KC,
                        mb - i < 4 ? mb - i : 4, w0 + k0 * ldw, ldw, J->w->dtype, kc, nn, J->K - k0);
        }
        kern__gemv_scale_tile(J, n0, nn, mb, tile, KERN__GEMVT_NB);
        J->epi_tile(&J->epi, m0, n0, tile, KERN__GEMVT_NB, mb, (int)nn);
    }
}

static kern_status kern__gemv_kmajor(kern_ctx *ctx, kern__gemv_job *J) {
    kern__gemvt_job T;
    T.g = J;
    T.rows = kern__gemvt_rows__scalar;
#ifdef KERN_X86
    if (kern_ctx_features(ctx) & KERN_CPU_AVX2) T.rows = kern__gemvt_rows__avx2;
#endif
    return kern_parallel_for(ctx, (J->N + KERN__GEMVT_NB - 1) / KERN__GEMVT_NB, kern__gemvt_task, &T);
}

#ifdef __cplusplus
}
#endif
#endif /* KERN_LLM_IMPLEMENTATION */
