/* kern_qgemm.h — int8 dynamic-quantization matmul (PyTorch dynamic quantized
 * Linear / torchao int8-dynamic-activation + int8-weight).
 *
 * What it computes
 *   Weights W [N,K] (f32/bf16) are quantized once, per output channel,
 *   symmetric int8 in [-127,127]:  s_w[n] = amax_k |W[n,k]| / 127,
 *   wq[n,k] = clamp(rne(W[n,k] * (1/s_w[n])), -127, 127), and packed for the
 *   ISA path the context selects (kern_qweight_pack). At run time every row
 *   (token) of x [...,K] is quantized the same way with its own scale s_x[m]
 *   while it is packed for the GEMM (kern_qlinear), the int8 x int8 products
 *   are summed exactly in int32, and the epilogue computes
 *       y[m,n] = act(acc[m,n] * s_x[m] * s_w[n] + bias[n]) + residual[m,n]
 *   in f32 (params.epilogue, kern_base.h's kern_epilogue: act none, GELU
 *   erf or GELU tanh; bias per column; residual), stored as f32 or bf16.
 *   RELU / SILU, bias_per_row and an out_scale other than 0 or 1 are
 *   KERN_ERR_UNSUPPORTED for now (the int8 epilogue lacks them). This is
 *   torch.ao.nn.quantized.dynamic.Linear / torchao's
 *   int8_dynamic_activation_int8_weight numerics with symmetric per-token
 *   activations (torch's quantize_per_tensor_dynamic uses an asymmetric u8
 *   activation instead; kern_quantize_per_token offers that as an option).
 *
 * Quantization rule (bit-exact on every path, f32 arithmetic):
 *   amax  = max |v| over the finite values of the row (0 if none)
 *   scale = amax / 127  (amax == 0 -> 1; a scale below FLT_MIN -> FLT_MIN)
 *   inv   = 1 / scale
 *   q     = clamp(rne(v * inv), -127, 127)   rne = round half to even
 *   Non-finite inputs: +-Inf quantize to +-127 and NaN to 0 (int8 cannot
 *   carry them; the scale comes from the finite values only). Asymmetric u8:
 *   lo = min(min v, 0), hi = max(max v, 0), scale = (hi - lo) / 255 (0 -> 1,
 *   < FLT_MIN -> FLT_MIN), zp = clamp(-rne(lo * inv), 0, 255),
 *   q = clamp(rne(v * inv) + zp, 0, 255), NaN -> zp.
 *
 * Layouts
 *   x [..., K] f32/bf16, last dim unit stride, leading dims any non-negative
 *   strides (flattened into M in row-major order); y [..., N] likewise with
 *   the same leading shape; bias [N] f32/bf16 any stride; residual like y
 *   (it may be exactly y, for an in-place add). Packed weight: panels of 32
 *   output channels, data[p][g][j][t] = wq[32p + j][4g + t] (zero padded),
 *   i.e. ceil(N/32) panels of ceil(K/4) groups of 32x4 bytes; scales [N] f32
 *   and colsum[n] = sum_k wq[n,k] (int32) beside it.
 *   kern_gemm_s8s8s32: a [M,K] i8, b [K,N] i8 (torch._int_mm convention),
 *   c [M,N] i32; any non-negative strides (a transposed view of b works).
 *
 * ISA paths (kern_qgemm_isa_for(ctx) tells which one a context runs):
 *   AVX-512 VNNI  vpdpbusd zmm, 14x32 tiles. vpdpbusd multiplies u8 by s8,
 *                 so activations are stored as q + 128 (u8) and the epilogue
 *                 subtracts 128 * colsum[n] (wrapping int32: exact).
 *   AVX-VNNI      the same with VEX ymm vpdpbusd, 6x16 tiles (compiled on
 *                 every x86 build; runs where the CPU has AVX-VNNI).
 *   AVX2          vpmaddubsw is NOT used: its int16 pair sum saturates
 *                 (2*255*127 > 32767, and even 2*128*128 for raw s8), and the
 *                 exact sign trick (vpsignb, then |a| * sign-applied b) costs
 *                 the same 4 uops per 32 MACs as widening. So both operands
 *                 are widened to int16 (vpmovsxbw) and multiplied with
 *                 vpmaddwd, whose int32 pair sums cannot overflow for 8-bit
 *                 inputs: exact for the whole s8 range, no compensation.
 *   NEON          sdot (s8 x s8) when built with the dot-product extension
 *                 (__ARM_FEATURE_DOTPROD); otherwise AArch64 uses scalar.
 *   scalar        portable C, always built.
 *   Small M (decode): when M <= the path's tile height the packed weight is
 *   streamed exactly once (software prefetch ahead), split over threads by
 *   column panels.
 *
 * K bound: K <= KERN_QGEMM_MAX_K = 131071 = 2^17 - 1. Then every exact int32
 *   result satisfies |sum a*b| <= K * 128 * 128 < 2^31 (s8 x s8), so no path
 *   overflows; the VNNI +128 intermediate may wrap but the compensated
 *   result is exact modulo 2^32 and therefore exact. M, N: any size whose
 *   tensors are valid views (spans fit in int64).
 *
 * Errors (nothing written on error; kern_last_error() names the argument):
 *   KERN_ERR_ARG       NULL arguments, non-finite weights or scales, a
 *                      corrupt serialized buffer, overlapping in/out views
 *   KERN_ERR_SHAPE     K mismatch between x and the packed weight, y/bias/
 *                      residual shapes, K > KERN_QGEMM_MAX_K
 *   KERN_ERR_DTYPE     unsupported dtypes
 *   KERN_ERR_LAYOUT    last dim not unit stride (x, y, residual), negative
 *                      strides, self-overlapping outputs
 *   KERN_ERR_UNSUPPORTED a packed weight from another ISA path or format
 *                      version (detected by its tag); epilogue options the
 *                      int8 epilogue lacks (see above)
 *   A caller workspace (params.workspace) smaller than the op's
 *   _workspace_size is KERN_ERR_ARG.
 *
 * Handles and params
 *   kern_qweight is opaque: kern_qweight_get_info gives N, K, the path it
 *   was packed for, the format version and its bytes. Pack, then free:
 *   kern_qweight_pack(ctx, w, &qw, params) ... kern_qweight_free(ctx, qw).
 *   kern_qweight_params_defaults(ctx, &p) resolves isa 0 to the context's
 *   path; kern_qlinear_params_defaults resolves epilogue.out_scale.
 *   kern_qlinear, kern_quantize_per_token and kern_gemm_s8s8s32 take an
 *   optional caller workspace (params.workspace / workspace_size, NULL =
 *   the context's scratch) of at least their _workspace_size bytes.
 *   KERN_ERR_NOMEM     allocation failures
 *
 * Example
 *     kern_qweight *qw = NULL;
 *     kern_tensor w = kern_tensor_2d(wdata, KERN_F32, N, K);
 *     kern_tensor x = kern_tensor_2d(xdata, KERN_F32, M, K);
 *     kern_tensor y = kern_tensor_2d(ydata, KERN_F32, M, N);
 *     kern_tensor b = kern_tensor_1d(bdata, KERN_F32, N);
 *     kern_qlinear_params p = {0};
 *     p.epilogue.bias = &b;
 *     p.epilogue.act = KERN_ACT_GELU_TANH;
 *     if (kern_qweight_pack(ctx, &w, &qw, NULL) != KERN_OK ||
 *         kern_qlinear(ctx, &x, qw, &y, &p) != KERN_OK)
 *         puts(kern_last_error());
 *     kern_qweight_free(ctx, qw);
 */
#ifndef KERN_QGEMM_H
#define KERN_QGEMM_H

#include "kern_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the packed-weight format (in memory and serialized). */
#define KERN_QWEIGHT_VERSION 1u
/* Largest K any int8 GEMM here accepts (see the K bound above). */
#define KERN_QGEMM_MAX_K 131071
/* Output channels per packed panel. */
#define KERN_QGEMM_NR 32

/* The int8 GEMM paths; also the tag a packed weight carries. */
typedef enum kern_qgemm_isa {
    KERN_QGEMM_ISA_NONE = 0, /* zero: "the path the context selects" */
    KERN_QGEMM_ISA_SCALAR,
    KERN_QGEMM_ISA_AVX2,
    KERN_QGEMM_ISA_AVXVNNI,
    KERN_QGEMM_ISA_AVX512VNNI,
    KERN_QGEMM_ISA_NEON_DOT,
    KERN_QGEMM_ISA_COUNT
} kern_qgemm_isa;

/* The path a context runs (from kern_ctx_features; NULL = default ctx). */
KERN_API kern_qgemm_isa kern_qgemm_isa_for(const kern_ctx *ctx);
/* "scalar", "avx2", "avxvnni", "avx512vnni", "neon-dot" ("invalid"). */
KERN_API const char *kern_qgemm_isa_name(kern_qgemm_isa isa);

/* An opaque packed int8 weight: made by kern_qweight_pack,
 * kern_qweight_pack_int8 or kern_qweight_deserialize (one allocation from
 * the context's allocator), described by kern_qweight_get_info, released by
 * kern_qweight_free. */
typedef struct kern_qweight kern_qweight;

/* What kern_qweight_get_info reports. */
typedef struct kern_qweight_info {
    int64_t n, k;        /* logical shape [N, K] */
    kern_dtype dtype;    /* KERN_I8 (values), with f32 per-channel scales */
    kern_qgemm_isa isa;  /* the path it was packed for: kern_qlinear runs it
                            only on a context that selects this path */
    uint32_t version;    /* KERN_QWEIGHT_VERSION */
    size_t data_bytes;   /* the packed panels: ceil(N/32) ceil(K/4) 128 */
    size_t bytes;        /* the whole allocation (header, scales, colsums,
                            panels) */
} kern_qweight_info;

typedef struct kern_qweight_params {
    /* Path to pack for; KERN_QGEMM_ISA_NONE (0) = the one ctx selects. A
     * weight packed for another path is legal (e.g. to serialize for
     * another machine) but kern_qlinear rejects it. */
    kern_qgemm_isa isa;
} kern_qweight_params;

/* Resolves the defaults in place: isa 0 becomes kern_qgemm_isa_for(ctx)
 * (NULL ctx = the default context). NULL p is ignored. */
KERN_API void kern_qweight_params_defaults(const kern_ctx *ctx, kern_qweight_params *p);

/* w [N, K] f32/bf16 (any non-negative strides) -> *out. Rejects non-finite
 * weights (KERN_ERR_ARG naming the first one), K > KERN_QGEMM_MAX_K.
 * params may be NULL. */
KERN_API kern_status kern_qweight_pack(kern_ctx *ctx, const kern_tensor *w,
                                       kern_qweight **out,
                                       const kern_qweight_params *params);
/* Already-quantized weights: wq [N, K] i8 (full s8 range allowed) and
 * scales [N] f32 (finite, > 0), e.g. from a torchao checkpoint. */
KERN_API kern_status kern_qweight_pack_int8(kern_ctx *ctx, const kern_tensor *wq,
                                            const kern_tensor *scales,
                                            kern_qweight **out,
                                            const kern_qweight_params *params);
/* Frees with the allocator of ctx (NULL = default context); pass a context
 * with the same allocator as the one that made qw. NULL qw is ignored. */
KERN_API void kern_qweight_free(kern_ctx *ctx, kern_qweight *qw);
/* Shape, path, format version and bytes of a packed weight. */
KERN_API kern_status kern_qweight_get_info(const kern_qweight *qw, kern_qweight_info *out);
/* The int8 values [N, K] (i8, any strides) and/or scales [N] (f32); either
 * output may be NULL. */
KERN_API kern_status kern_qweight_unpack(const kern_qweight *qw,
                                         const kern_tensor *wq,
                                         const kern_tensor *scales);

/* Serialized form, all integers little-endian, floats IEEE-754 binary32:
 *   off  size  field
 *   0    4     magic "KQW8"
 *   4    4     u32 format version (KERN_QWEIGHT_VERSION)
 *   8    4     u32 ISA tag (kern_qgemm_isa value)
 *   12   4     u32 panel width (32)
 *   16   8     u64 N
 *   24   8     u64 K
 *   32   8     u64 data bytes D = ceil(N/32) * ceil(K/4) * 128
 *   40   4N    f32 scales[N]
 *   40+4N 4N   i32 colsum[N]
 *   40+8N D    packed data, layout as in the header comment
 *   40+8N+D 4  u32 FNV-1a (32-bit) of every preceding byte
 * Total kern_qweight_serialized_size(qw) = 44 + 8N + D bytes. */
KERN_API size_t kern_qweight_serialized_size(const kern_qweight *qw);
KERN_API kern_status kern_qweight_serialize(const kern_qweight *qw, void *buf,
                                            size_t size);
/* Validates everything (magic, sizes, checksum, finite positive scales,
 * colsums against the data, zero padding) and rejects another version or an
 * ISA tag other than the path ctx selects with KERN_ERR_UNSUPPORTED. */
KERN_API kern_status kern_qweight_deserialize(kern_ctx *ctx, const void *buf,
                                              size_t size, kern_qweight **out);

/* Options of kern_quantize_per_token; NULL or zero = defaults (every
 * field's zero is its own default: nothing to resolve). */
typedef struct kern_quant_params {
    int asymmetric;  /* 0: symmetric s8 [-127,127], xq KERN_I8;
                        1: asymmetric u8 [0,255] with a zero point, xq KERN_U8 */
    int per_tensor;  /* 0: one scale per row; 1: one for the whole tensor */
    const kern_tensor *zero_points; /* asymmetric only: i32, numel = number
                                       of scales */
    void *workspace;                /* optional caller scratch of at least */
    size_t workspace_size;          /* kern_quantize_per_token_workspace_size() */
} kern_quant_params;

/* x [..., K] f32/bf16 (any non-negative strides) -> xq (same shape, i8 or
 * u8, any strides), scales f32 with numel = rows (product of the leading
 * dims) or 1 when per_tensor (any shape: [M], [M,1], [...]); filled in
 * row-major order. params may be NULL. */
KERN_API kern_status kern_quantize_per_token(kern_ctx *ctx, const kern_tensor *x,
                                             const kern_tensor *xq,
                                             const kern_tensor *scales,
                                             const kern_quant_params *params);
/* Scratch bytes kern_quantize_per_token takes on this context (validates
 * like it; params->workspace is ignored). */
KERN_API kern_status kern_quantize_per_token_workspace_size(
    kern_ctx *ctx, const kern_tensor *x, const kern_tensor *xq,
    const kern_tensor *scales, const kern_quant_params *params, size_t *bytes);

/* Options of kern_gemm_s8s8s32; NULL or zero = defaults. */
typedef struct kern_gemm_s8s8s32_params {
    void *workspace;       /* optional caller scratch of at least */
    size_t workspace_size; /* kern_gemm_s8s8s32_workspace_size() bytes */
} kern_gemm_s8s8s32_params;

/* c = a . b exactly in int32 (torch._int_mm): a [M,K] i8, b [K,N] i8,
 * c [M,N] i32. K <= KERN_QGEMM_MAX_K. params may be NULL. */
KERN_API kern_status kern_gemm_s8s8s32(kern_ctx *ctx, const kern_tensor *a,
                                       const kern_tensor *b, const kern_tensor *c,
                                       const kern_gemm_s8s8s32_params *params);
KERN_API kern_status kern_gemm_s8s8s32_workspace_size(kern_ctx *ctx, const kern_tensor *a,
                                                      const kern_tensor *b,
                                                      const kern_tensor *c, size_t *bytes);

typedef struct kern_qlinear_params {
    /* kern_base.h's epilogue: bias [N] f32/bf16 (any stride), act NONE /
     * GELU / GELU_TANH, residual of y's shape, f32/bf16, may be y itself.
     * bias_per_row, an out_scale other than 0 or 1 and the RELU / SILU
     * activations are KERN_ERR_UNSUPPORTED for now. */
    kern_epilogue epilogue;
    void *workspace;       /* optional caller scratch of at least */
    size_t workspace_size; /* kern_qlinear_workspace_size() bytes */
} kern_qlinear_params;

/* Resolves the defaults in place (epilogue.out_scale 0 -> 1). */
KERN_API void kern_qlinear_params_defaults(kern_qlinear_params *p);

/* y = act(quant(x) . qw^T dequantized + bias) + residual (the epilogue of
 * params). params may be NULL. qw must be packed for the path ctx
 * selects. */
KERN_API kern_status kern_qlinear(kern_ctx *ctx, const kern_tensor *x,
                                  const kern_qweight *qw, const kern_tensor *y,
                                  const kern_qlinear_params *params);
/* Scratch bytes kern_qlinear takes on this context (validates like it,
 * including the packed path; params->workspace is ignored). */
KERN_API kern_status kern_qlinear_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                                 const kern_qweight *qw,
                                                 const kern_tensor *y,
                                                 const kern_qlinear_params *params,
                                                 size_t *bytes);

#ifdef __cplusplus
}
#endif
#endif /* KERN_QGEMM_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_QGEMM_IMPLEMENTED)
KERN__IMPL_DIAG_BEGIN
#define KERN_QGEMM_IMPLEMENTED

/* The packed weight (opaque in the public half). */
struct kern_qweight {
    int64_t n, k;          /* logical shape [N, K] */
    kern_qgemm_isa isa;    /* the path it was packed for */
    uint32_t version;      /* KERN_QWEIGHT_VERSION */
    int64_t k4;            /* ceil(K / 4) */
    int64_t n_panels;      /* ceil(N / 32) */
    float *scales;         /* [N] per-channel scales */
    int32_t *colsum;       /* [N] sum over k of wq[n, k] */
    int8_t *data;          /* n_panels * k4 * 128 bytes, 64-byte aligned */
    size_t data_bytes;
};

#include <float.h>
#ifdef KERN_X86
#include <immintrin.h>
#endif
#if defined(KERN_NEON)
#include <arm_neon.h>
#if defined(__ARM_FEATURE_DOTPROD)
#define KERN__QG_NEON_DOT 1
#endif
#endif

#if defined(__GNUC__) || defined(__clang__)
#define KERN__QG_INLINE static inline __attribute__((always_inline))
#else
#define KERN__QG_INLINE static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KERN__QG_MAGIC "KQW8"
#define KERN__QG_HDR 40
/* A quantize-pack chunk of x stays below this many packed bytes. */
#define KERN__QG_CHUNK_BYTES ((int64_t)16 << 20)

/* ------------------------------------------------------- scalar numerics */

/* Round half to even for |v| <= 2^22 (the values here are clamped first):
 * adding 1.5 * 2^23 leaves no fraction bits in the default rounding mode. */
static inline float kern__qg_rne(float v) {
    return (v + 12582912.0f) - 12582912.0f;
}
static inline int kern__qg_isfinite(float v) {
    return (kern__f32_bits(v) & 0x7fffffffu) < 0x7f800000u;
}
/* scale from the extreme: amax == 0 -> 1, tiny -> FLT_MIN (so 1/scale is
 * finite). `div` is 127 or 255. */
static inline float kern__qg_scale(float range, float div) {
    float s = range / div;
    if (range == 0.0f) return 1.0f;
    if (s < FLT_MIN) s = FLT_MIN;
    return s;
}

/* exp(x) for the GELU epilogue: Cephes expf polynomial, clamped to
 * [-87.3, 88.3]; relative error ~2 ulp. Vector versions do the same ops. */
#define KERN__QG_EXP_LO (-87.3f)
#define KERN__QG_EXP_HI 88.3f
#define KERN__QG_LOG2E 1.44269504088896341f
#define KERN__QG_C1 0.693359375f
#define KERN__QG_C2 (-2.12194440e-4f)
#define KERN__QG_P0 1.9875691500e-4f
#define KERN__QG_P1 1.3981999507e-3f
#define KERN__QG_P2 8.3334519073e-3f
#define KERN__QG_P3 4.1665795894e-2f
#define KERN__QG_P4 1.6666665459e-1f
#define KERN__QG_P5 5.0000001201e-1f
static inline float kern__qg_expf(float x) {
    float fx, r, r2, y;
    if (!(x > KERN__QG_EXP_LO)) x = KERN__QG_EXP_LO; /* NaN too */
    if (x > KERN__QG_EXP_HI) x = KERN__QG_EXP_HI;
    fx = kern__qg_rne(x * KERN__QG_LOG2E);
    r = x - fx * KERN__QG_C1;
    r = r - fx * KERN__QG_C2;
    r2 = r * r;
    y = KERN__QG_P0;
    y = y * r + KERN__QG_P1;
    y = y * r + KERN__QG_P2;
    y = y * r + KERN__QG_P3;
    y = y * r + KERN__QG_P4;
    y = y * r + KERN__QG_P5;
    y = y * r2 + r + 1.0f;
    return y * kern__bits_f32((uint32_t)((int32_t)fx + 127) << 23);
}
/* GELU(erf) with erf from Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7),
 * the approximation PyTorch's vectorized CPU GELU uses; written so that the
 * negative side is r*t*exp(-z^2) directly (no 1 + erf cancellation). */
#define KERN__QG_AS_P 0.3275911f
#define KERN__QG_AS_A1 0.254829592f
#define KERN__QG_AS_A2 (-0.284496736f)
#define KERN__QG_AS_A3 1.421413741f
#define KERN__QG_AS_A4 (-1.453152027f)
#define KERN__QG_AS_A5 1.061405429f
static inline float kern__qg_gelu_erf(float x) {
    float z = x * 0.70710678118654752f;
    float a = kern__bits_f32(kern__f32_bits(z) & 0x7fffffffu);
    float t = 1.0f / (1.0f + KERN__QG_AS_P * a);
    float p = KERN__QG_AS_A5;
    float w;
    p = p * t + KERN__QG_AS_A4;
    p = p * t + KERN__QG_AS_A3;
    p = p * t + KERN__QG_AS_A2;
    p = p * t + KERN__QG_AS_A1;
    p = p * t;
    w = p * kern__qg_expf(-(a * a)); /* erfc(|z|) */
    return x < 0.0f ? 0.5f * x * w : 0.5f * x * (2.0f - w);
}
/* GELU(tanh): 0.5 x (1 + tanh u) = x / (1 + exp(-2u)). */
static inline float kern__qg_gelu_tanh(float x) {
    float u = 0.7978845608028654f * (x + 0.044715f * (x * x * x));
    return x / (1.0f + kern__qg_expf(-2.0f * u));
}
static inline float kern__qg_load_f(const void *p, kern_dtype dt, int64_t i) {
    return dt == KERN_F32 ? ((const float *)p)[i]
                          : kern_bf16_to_f32(((const uint16_t *)p)[i]);
}

/* ---------------------------------------------------------- view helpers */

/* Element offset of row `row` of t, rows = all dims but the last, in
 * row-major order. */
static int64_t kern__qg_row_off(const kern_tensor *t, int64_t row) {
    int64_t off = 0;
    int d;
    for (d = t->ndim - 2; d >= 0; d--) {
        int64_t s = t->shape[d];
        off += (row % s) * t->stride[d];
        row /= s;
    }
    return off;
}
/* The stride between consecutive rows when the leading dims collapse into
 * one (then row m starts at m * stride), else -1. */
static int64_t kern__qg_flat_rows(const kern_tensor *t) {
    int64_t rs = -1, extent = 0;
    int d;
    if (t->ndim <= 1) return 0;
    for (d = t->ndim - 2; d >= 0; d--) {
        if (t->shape[d] == 1) continue;
        if (rs < 0) {
            rs = t->stride[d];
            extent = rs * t->shape[d];
        } else {
            if (t->stride[d] != extent) return -1;
            extent *= t->shape[d];
        }
    }
    return rs < 0 ? 0 : rs;
}
static int64_t kern__qg_row_off_fast(const kern_tensor *t, int64_t flat, int64_t row) {
    return flat >= 0 ? row * flat : kern__qg_row_off(t, row);
}

/* Element offset of flat index i over all dims (row-major). */
static int64_t kern__qg_elem_off(const kern_tensor *t, int64_t i) {
    int64_t off = 0;
    int d;
    for (d = t->ndim - 1; d >= 0; d--) {
        int64_t s = t->shape[d];
        off += (i % s) * t->stride[d];
        i /= s;
    }
    return off;
}
/* Number of rows (product of all dims but the last; 1 for ndim <= 1). */
static int64_t kern__qg_rows(const kern_tensor *t) {
    int64_t m = 1;
    int d;
    for (d = 0; d < t->ndim - 1; d++) m *= t->shape[d];
    return m;
}
/* 1 if two distinct index tuples of t can address the same element. */
static int kern__qg_self_overlap(const kern_tensor *t) {
    int idx[KERN_MAX_DIMS], n = 0, i, j;
    int64_t extent = 1;
    for (i = 0; i < t->ndim; i++)
        if (t->shape[i] > 1) idx[n++] = i;
    for (i = 1; i < n; i++) /* insertion sort by stride */
        for (j = i; j > 0 && t->stride[idx[j]] < t->stride[idx[j - 1]]; j--) {
            int tmp = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = tmp;
        }
    for (i = 0; i < n; i++) {
        int64_t s = t->stride[idx[i]];
        if (s < extent) return 1;
        extent = s * t->shape[idx[i]];
    }
    return 0;
}
static int kern__qg_same_view(const kern_tensor *a, const kern_tensor *b) {
    int i;
    if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i] ||
            (a->shape[i] > 1 && a->stride[i] != b->stride[i]))
            return 0;
    return 1;
}
static kern_status kern__qg_nonneg(const kern_tensor *t, const char *op,
                                   const char *name) {
    int i;
    for (i = 0; i < t->ndim; i++)
        if (t->stride[i] < 0)
            return kern__err(KERN_ERR_LAYOUT, "%s: %s.stride[%d]=%lld is negative",
                             op, name, i, (long long)t->stride[i]);
    return KERN_OK;
}

/* -------------------------------------------------- row quantize helpers
 * minmax: min(0, finite values) and max(0, finite values) of n elements;
 * *nonfinite counts the others. quant: q = clamp(rne(v*inv) + zp, lo, hi)
 * as bytes, NaN -> zp. Scalar versions take an element stride. */

static void kern__qg_minmax__scalar(const void *x, kern_dtype dt, int64_t n,
                                    int64_t stride, float *mn, float *mx,
                                    int64_t *nonfinite) {
    float lo = 0.0f, hi = 0.0f;
    int64_t i, bad = 0;
    for (i = 0; i < n; i++) {
        float v = kern__qg_load_f(x, dt, i * stride);
        if (!kern__qg_isfinite(v)) { bad++; continue; }
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    *mn = lo;
    *mx = hi;
    *nonfinite = bad;
}
static void kern__qg_quant__scalar(const void *x, kern_dtype dt, int64_t n,
                                   int64_t stride, float inv, int zp, int lo,
                                   int hi, uint8_t *q) {
    const float flo = (float)(lo - zp), fhi = (float)(hi - zp);
    int64_t i;
    for (i = 0; i < n; i++) {
        float v = kern__qg_load_f(x, dt, i * stride) * inv;
        int r;
        if (v != v) v = 0.0f;
        if (v < flo) v = flo;
        if (v > fhi) v = fhi;
        r = (int)kern__qg_rne(v) + zp;
        q[i] = (uint8_t)(r & 0xff);
    }
}

#ifdef KERN_X86
KERN_TARGET_AVX512 static inline __m512 kern__qg_ld16__avx512(const void *x, kern_dtype dt,
                                                              int64_t i, __mmask16 m) {
    if (dt == KERN_F32) return _mm512_maskz_loadu_ps(m, (const float *)x + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)x + i)), 16));
}
KERN_TARGET_AVX512 static void kern__qg_minmax__avx512(const void *x, kern_dtype dt,
                                                       int64_t n, float *mn, float *mx,
                                                       int64_t *nonfinite) {
    __m512 lo0 = _mm512_setzero_ps(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    int64_t i = 0, bad = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 v0 = kern__qg_ld16__avx512(x, dt, i, 0xffff);
        __m512 v1 = kern__qg_ld16__avx512(x, dt, i + 16, 0xffff);
        __mmask16 f0 = _mm512_cmplt_epi32_mask(
            _mm512_and_si512(_mm512_castps_si512(v0), absm), inf);
        __mmask16 f1 = _mm512_cmplt_epi32_mask(
            _mm512_and_si512(_mm512_castps_si512(v1), absm), inf);
        lo0 = _mm512_mask_min_ps(lo0, f0, lo0, v0);
        hi0 = _mm512_mask_max_ps(hi0, f0, hi0, v0);
        lo1 = _mm512_mask_min_ps(lo1, f1, lo1, v1);
        hi1 = _mm512_mask_max_ps(hi1, f1, hi1, v1);
        if (KERN_UNLIKELY((f0 & f1) != 0xffff))
            bad += 32 - __builtin_popcount((unsigned)f0) - __builtin_popcount((unsigned)f1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = kern__qg_ld16__avx512(x, dt, i, m);
        __mmask16 f = _mm512_mask_cmplt_epi32_mask(
            m, _mm512_and_si512(_mm512_castps_si512(v), absm), inf);
        lo0 = _mm512_mask_min_ps(lo0, f, lo0, v);
        hi0 = _mm512_mask_max_ps(hi0, f, hi0, v);
        bad += __builtin_popcount((unsigned)m) - __builtin_popcount((unsigned)f);
    }
    *mn = _mm512_reduce_min_ps(_mm512_min_ps(lo0, lo1));
    *mx = _mm512_reduce_max_ps(_mm512_max_ps(hi0, hi1));
    *nonfinite = bad;
}
KERN_TARGET_AVX512 static void kern__qg_quant__avx512(const void *x, kern_dtype dt,
                                                      int64_t n, float inv, int zp,
                                                      int lo, int hi, uint8_t *q) {
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512 flo = _mm512_set1_ps((float)(lo - zp)), fhi = _mm512_set1_ps((float)(hi - zp));
    const __m512i vzp = _mm512_set1_epi32(zp);
    int64_t i = 0;
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_mul_ps(kern__qg_ld16__avx512(x, dt, i, m), vinv);
        __mmask16 ord = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
        __m512i r;
        v = _mm512_maskz_mov_ps(ord, v);
        v = _mm512_min_ps(_mm512_max_ps(v, flo), fhi);
        r = _mm512_add_epi32(
            _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vzp);
        _mm_mask_storeu_epi8(q + i, m, _mm512_cvtepi32_epi8(r));
    }
}

KERN_TARGET_AVX2 static inline __m256 kern__qg_ld8__avx2(const void *x, kern_dtype dt,
                                                         int64_t i) {
    if (dt == KERN_F32) return _mm256_loadu_ps((const float *)x + i);
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)x + i))),
        16));
}
KERN_TARGET_AVX2 static void kern__qg_minmax__avx2(const void *x, kern_dtype dt, int64_t n,
                                                   float *mn, float *mx,
                                                   int64_t *nonfinite) {
    __m256 lo = _mm256_setzero_ps(), hi = lo;
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    float l[8], h[8], tlo, thi;
    int64_t i = 0, bad = 0, tbad;
    int j;
    for (; i + 8 <= n; i += 8) {
        __m256 v = kern__qg_ld8__avx2(x, dt, i);
        __m256i fin = _mm256_cmpgt_epi32(inf, _mm256_and_si256(_mm256_castps_si256(v), absm));
        __m256 vf = _mm256_and_ps(v, _mm256_castsi256_ps(fin)); /* non-finite -> 0 */
        lo = _mm256_min_ps(lo, vf);
        hi = _mm256_max_ps(hi, vf);
        if (KERN_UNLIKELY(_mm256_movemask_ps(_mm256_castsi256_ps(fin)) != 0xff))
            bad += 8 - __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(fin)));
    }
    _mm256_storeu_ps(l, lo);
    _mm256_storeu_ps(h, hi);
    kern__qg_minmax__scalar((const char *)x + i * (int64_t)kern_dtype_size(dt), dt, n - i, 1,
                            &tlo, &thi, &tbad);
    for (j = 0; j < 8; j++) {
        if (l[j] < tlo) tlo = l[j];
        if (h[j] > thi) thi = h[j];
    }
    *mn = tlo;
    *mx = thi;
    *nonfinite = bad + tbad;
}
KERN_TARGET_AVX2 static void kern__qg_quant__avx2(const void *x, kern_dtype dt, int64_t n,
                                                  float inv, int zp, int lo, int hi,
                                                  uint8_t *q) {
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256 flo = _mm256_set1_ps((float)(lo - zp)), fhi = _mm256_set1_ps((float)(hi - zp));
    const __m256i vzp = _mm256_set1_epi32(zp);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(kern__qg_ld8__avx2(x, dt, i), vinv);
        __m256i r;
        __m128i p;
        v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
        v = _mm256_min_ps(_mm256_max_ps(v, flo), fhi);
        r = _mm256_add_epi32(
            _mm256_cvttps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
            vzp);
        /* values fit in 0..255 or -127..127: take the low byte of each */
        r = _mm256_shuffle_epi8(r, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,
                                                    -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1,
                                                    -1, -1, -1, -1, -1, -1, -1, -1));
        p = _mm_unpacklo_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storel_epi64((__m128i *)(q + i), p);
    }
    kern__qg_quant__scalar((const char *)x + i * (int64_t)kern_dtype_size(dt), dt, n - i, 1,
                           inv, zp, lo, hi, q + i);
}
#endif /* KERN_X86 */

/* ---------------------------------------------------------- path table */

/* Packed activation formats. */
enum { KERN__QG_A_S8 = 0, KERN__QG_A_U8 = 1, KERN__QG_A_S16 = 2 };

/* Microkernel contract: c[r*32 + j] = sum_g sum_t a[g][r][t] * b[g][j][t]
 * for r < mr, j < 32, over k4 groups; a is a packed activation panel of mr
 * rows in the path's format, b a weight panel (64-byte aligned). For the u8
 * format a holds q + 128, so c includes + 128 * colsum. pf: 128 bytes per
 * group are prefetched into L2 from there (the weight stream ahead, or the
 * next weight panel while this one is reused from L2); never dereferenced. */
typedef void (*kern__qg_ukernel_fn)(int mr, int64_t k4, const void *a,
                                    const int8_t *b, int32_t *c, const int8_t *pf);
struct kern__qg_epi;
typedef void (*kern__qg_epi_fn)(const struct kern__qg_epi *e, const int32_t *tile,
                                int mr, int64_t m0, const float *sx, int64_t n0,
                                int nr);
typedef void (*kern__qg_minmax_fn)(const void *x, kern_dtype dt, int64_t n, float *mn,
                                   float *mx, int64_t *nonfinite);
typedef void (*kern__qg_quant_fn)(const void *x, kern_dtype dt, int64_t n, float inv,
                                  int zp, int lo, int hi, uint8_t *q);

typedef struct kern__qg_ops {
    kern_qgemm_isa isa;
    int mr_max;   /* rows per microkernel tile */
    int a_fmt;    /* KERN__QG_A_* */
    kern__qg_ukernel_fn ukernel;
    kern__qg_epi_fn epi;
    kern__qg_minmax_fn minmax; /* unit stride */
    kern__qg_quant_fn quant;   /* unit stride */
} kern__qg_ops;

static void kern__qg_minmax_unit__scalar(const void *x, kern_dtype dt, int64_t n,
                                         float *mn, float *mx, int64_t *nonfinite) {
    kern__qg_minmax__scalar(x, dt, n, 1, mn, mx, nonfinite);
}
static void kern__qg_quant_unit__scalar(const void *x, kern_dtype dt, int64_t n, float inv,
                                        int zp, int lo, int hi, uint8_t *q) {
    kern__qg_quant__scalar(x, dt, n, 1, inv, zp, lo, hi, q);
}

/* ------------------------------------------------------------ epilogue */

typedef struct kern__qg_epi {
    const float *sw;       /* [N] */
    const int32_t *colsum; /* [N] */
    int comp;              /* subtract 128 * colsum (u8 activations) */
    const float *bias;     /* [N] f32 or NULL */
    int act;
    const kern_tensor *y;
    const kern_tensor *res; /* NULL: none */
    int64_t n;
    int64_t y_flat, res_flat; /* kern__qg_flat_rows */
} kern__qg_epi;

static inline float kern__qg_act(int act, float v) {
    if (act == KERN_ACT_GELU) return kern__qg_gelu_erf(v);
    if (act == KERN_ACT_GELU_TANH) return kern__qg_gelu_tanh(v);
    return v;
}

static void kern__qg_epi__scalar(const kern__qg_epi *e, const int32_t *tile, int mr,
                                 int64_t m0, const float *sx, int64_t n0, int nr) {
    int r, j;
    for (r = 0; r < mr; r++) {
        char *yrow = (char *)e->y->data + kern__qg_row_off_fast(e->y, e->y_flat, m0 + r) *
                                              (int64_t)kern_dtype_size(e->y->dtype);
        const char *rrow = e->res ? (const char *)e->res->data +
                                        kern__qg_row_off_fast(e->res, e->res_flat, m0 + r) *
                                            (int64_t)kern_dtype_size(e->res->dtype)
                                  : NULL;
        for (j = 0; j < nr; j++) {
            int64_t n = n0 + j;
            uint32_t a = (uint32_t)tile[r * KERN_QGEMM_NR + j];
            float v;
            if (e->comp) a -= (uint32_t)e->colsum[n] << 7;
            v = (float)(int32_t)a;
            v = v * sx[r];
            v = v * e->sw[n];
            if (e->bias) v = v + e->bias[n];
            v = kern__qg_act(e->act, v);
            if (rrow) v = v + kern__qg_load_f(rrow, e->res->dtype, n);
            if (e->y->dtype == KERN_F32) ((float *)yrow)[n] = v;
            else ((uint16_t *)yrow)[n] = kern_f32_to_bf16(v);
        }
    }
}

#ifdef KERN_X86
KERN_TARGET_AVX512 static inline __m512 kern__qg_exp__avx512(__m512 x) {
    __m512 fx, r, r2, y;
    __m512i n;
    x = _mm512_max_ps(x, _mm512_set1_ps(KERN__QG_EXP_LO)); /* NaN -> LO */
    x = _mm512_min_ps(x, _mm512_set1_ps(KERN__QG_EXP_HI));
    fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(KERN__QG_LOG2E)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_sub_ps(x, _mm512_mul_ps(fx, _mm512_set1_ps(KERN__QG_C1)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(fx, _mm512_set1_ps(KERN__QG_C2)));
    r2 = _mm512_mul_ps(r, r);
    y = _mm512_set1_ps(KERN__QG_P0);
    y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(KERN__QG_P1));
    y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(KERN__QG_P2));
    y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(KERN__QG_P3));
    y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(KERN__QG_P4));
    y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(KERN__QG_P5));
    y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(y, r2), r), _mm512_set1_ps(1.0f));
    n = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(fx), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(n));
}
KERN_TARGET_AVX512 static inline __m512 kern__qg_act__avx512(int act, __m512 x) {
    if (act == KERN_ACT_GELU) {
        __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
        __m512 a = _mm512_castsi512_ps(
            _mm512_and_si512(_mm512_castps_si512(z), _mm512_set1_epi32(0x7fffffff)));
        __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f),
                                 _mm512_add_ps(_mm512_set1_ps(1.0f),
                                               _mm512_mul_ps(_mm512_set1_ps(KERN__QG_AS_P), a)));
        __m512 p = _mm512_set1_ps(KERN__QG_AS_A5), w, hx;
        __mmask16 neg;
        p = _mm512_add_ps(_mm512_mul_ps(p, t), _mm512_set1_ps(KERN__QG_AS_A4));
        p = _mm512_add_ps(_mm512_mul_ps(p, t), _mm512_set1_ps(KERN__QG_AS_A3));
        p = _mm512_add_ps(_mm512_mul_ps(p, t), _mm512_set1_ps(KERN__QG_AS_A2));
        p = _mm512_add_ps(_mm512_mul_ps(p, t), _mm512_set1_ps(KERN__QG_AS_A1));
        p = _mm512_mul_ps(p, t);
        w = _mm512_mul_ps(p, kern__qg_exp__avx512(
                                 _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(a, a))));
        hx = _mm512_mul_ps(_mm512_set1_ps(0.5f), x);
        neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
        return _mm512_mask_blend_ps(neg, _mm512_mul_ps(hx, _mm512_sub_ps(_mm512_set1_ps(2.0f), w)),
                                    _mm512_mul_ps(hx, w));
    }
    if (act == KERN_ACT_GELU_TANH) {
        __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
        __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                                 _mm512_add_ps(x, _mm512_mul_ps(_mm512_set1_ps(0.044715f), x3)));
        __m512 e = kern__qg_exp__avx512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u));
        return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    }
    return x;
}
/* f32 -> bf16 exactly like kern_f32_to_bf16 (round to nearest even, NaN
 * kept and quieted). */
KERN_TARGET_AVX512 static inline __m256i kern__qg_bf16__avx512(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __m512i rnd = _mm512_add_epi32(
        u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                            _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
    rnd = _mm512_mask_or_epi32(rnd, nan, u, _mm512_set1_epi32(0x00400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rnd, 16));
}
KERN_TARGET_AVX512 static void kern__qg_epi__avx512(const kern__qg_epi *e, const int32_t *tile,
                                                    int mr, int64_t m0, const float *sx,
                                                    int64_t n0, int nr) {
    int r, j;
    for (r = 0; r < mr; r++) {
        char *yrow = (char *)e->y->data + kern__qg_row_off_fast(e->y, e->y_flat, m0 + r) *
                                              (int64_t)kern_dtype_size(e->y->dtype);
        const char *rrow = e->res ? (const char *)e->res->data +
                                        kern__qg_row_off_fast(e->res, e->res_flat, m0 + r) *
                                            (int64_t)kern_dtype_size(e->res->dtype)
                                  : NULL;
        const __m512 vsx = _mm512_set1_ps(sx[r]);
        for (j = 0; j < nr; j += 16) {
            int64_t n = n0 + j;
            __mmask16 m = nr - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nr - j)) - 1u);
            __m512i acc = _mm512_loadu_si512((const void *)(tile + r * KERN_QGEMM_NR + j));
            __m512 v;
            if (e->comp)
                acc = _mm512_sub_epi32(
                    acc, _mm512_slli_epi32(_mm512_maskz_loadu_epi32(m, e->colsum + n), 7));
            v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), vsx);
            v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, e->sw + n));
            if (e->bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, e->bias + n));
            v = kern__qg_act__avx512(e->act, v);
            if (rrow) v = _mm512_add_ps(v, kern__qg_ld16__avx512(rrow, e->res->dtype, n, m));
            if (e->y->dtype == KERN_F32) _mm512_mask_storeu_ps((float *)yrow + n, m, v);
            else _mm256_mask_storeu_epi16((uint16_t *)yrow + n, m, kern__qg_bf16__avx512(v));
        }
    }
}

KERN_TARGET_AVX2 static inline __m256 kern__qg_exp__avx2(__m256 x) {
    __m256 fx, r, r2, y;
    __m256i n;
    x = _mm256_max_ps(x, _mm256_set1_ps(KERN__QG_EXP_LO));
    x = _mm256_min_ps(x, _mm256_set1_ps(KERN__QG_EXP_HI));
    fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(KERN__QG_LOG2E)),
                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_sub_ps(x, _mm256_mul_ps(fx, _mm256_set1_ps(KERN__QG_C1)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(fx, _mm256_set1_ps(KERN__QG_C2)));
    r2 = _mm256_mul_ps(r, r);
    y = _mm256_set1_ps(KERN__QG_P0);
    y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(KERN__QG_P1));
    y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(KERN__QG_P2));
    y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(KERN__QG_P3));
    y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(KERN__QG_P4));
    y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(KERN__QG_P5));
    y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(y, r2), r), _mm256_set1_ps(1.0f));
    n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(n));
}
KERN_TARGET_AVX2 static inline __m256 kern__qg_act__avx2(int act, __m256 x) {
    if (act == KERN_ACT_GELU) {
        __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
        __m256 a = _mm256_castsi256_ps(
            _mm256_and_si256(_mm256_castps_si256(z), _mm256_set1_epi32(0x7fffffff)));
        __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f),
                                 _mm256_add_ps(_mm256_set1_ps(1.0f),
                                               _mm256_mul_ps(_mm256_set1_ps(KERN__QG_AS_P), a)));
        __m256 p = _mm256_set1_ps(KERN__QG_AS_A5), w, hx;
        p = _mm256_add_ps(_mm256_mul_ps(p, t), _mm256_set1_ps(KERN__QG_AS_A4));
        p = _mm256_add_ps(_mm256_mul_ps(p, t), _mm256_set1_ps(KERN__QG_AS_A3));
        p = _mm256_add_ps(_mm256_mul_ps(p, t), _mm256_set1_ps(KERN__QG_AS_A2));
        p = _mm256_add_ps(_mm256_mul_ps(p, t), _mm256_set1_ps(KERN__QG_AS_A1));
        p = _mm256_mul_ps(p, t);
        w = _mm256_mul_ps(p, kern__qg_exp__avx2(
                                 _mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a))));
        hx = _mm256_mul_ps(_mm256_set1_ps(0.5f), x);
        return _mm256_blendv_ps(_mm256_mul_ps(hx, _mm256_sub_ps(_mm256_set1_ps(2.0f), w)),
                                _mm256_mul_ps(hx, w),
                                _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    }
    if (act == KERN_ACT_GELU_TANH) {
        __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
                                 _mm256_add_ps(x, _mm256_mul_ps(_mm256_set1_ps(0.044715f), x3)));
        __m256 e = kern__qg_exp__avx2(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
        return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    }
    return x;
}
KERN_TARGET_AVX2 static void kern__qg_epi__avx2(const kern__qg_epi *e, const int32_t *tile,
                                                int mr, int64_t m0, const float *sx,
                                                int64_t n0, int nr) {
    int r, j;
    int nv = nr & ~7;
    for (r = 0; r < mr; r++) {
        char *yrow = (char *)e->y->data + kern__qg_row_off_fast(e->y, e->y_flat, m0 + r) *
                                              (int64_t)kern_dtype_size(e->y->dtype);
        const char *rrow = e->res ? (const char *)e->res->data +
                                        kern__qg_row_off_fast(e->res, e->res_flat, m0 + r) *
                                            (int64_t)kern_dtype_size(e->res->dtype)
                                  : NULL;
        const __m256 vsx = _mm256_set1_ps(sx[r]);
        for (j = 0; j < nv; j += 8) {
            int64_t n = n0 + j;
            __m256i acc = _mm256_loadu_si256((const __m256i *)(tile + r * KERN_QGEMM_NR + j));
            __m256 v;
            if (e->comp)
                acc = _mm256_sub_epi32(
                    acc, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(e->colsum + n)), 7));
            v = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), vsx);
            v = _mm256_mul_ps(v, _mm256_loadu_ps(e->sw + n));
            if (e->bias) v = _mm256_add_ps(v, _mm256_loadu_ps(e->bias + n));
            v = kern__qg_act__avx2(e->act, v);
            if (rrow) v = _mm256_add_ps(v, kern__qg_ld8__avx2(rrow, e->res->dtype, n));
            if (e->y->dtype == KERN_F32) {
                _mm256_storeu_ps((float *)yrow + n, v);
            } else {
                __m256i u = _mm256_castps_si256(v);
                __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                __m256i rnd = _mm256_add_epi32(
                    u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                        _mm256_and_si256(_mm256_srli_epi32(u, 16),
                                                         _mm256_set1_epi32(1))));
                __m256i res = _mm256_srli_epi32(
                    _mm256_blendv_epi8(rnd, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan),
                    16);
                __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(res, res), 0x08);
                _mm_storeu_si128((__m128i *)((uint16_t *)yrow + n), _mm256_castsi256_si128(p));
            }
        }
    }
    if (nv < nr) /* column tail: same formula in scalar code */
        kern__qg_epi__scalar(e, tile + nv, mr, m0, sx, n0 + nv, nr - nv);
}
#endif /* KERN_X86 */

/* --------------------------------------------------------- microkernels */

/* Portable: a is s8 [k4][mr][4]. Partial sums stay within the final bound
 * (|.| <= K * 128^2 < 2^31), so int32 never overflows. */
static void kern__qgemm_s8s8_4x32__scalar(int mr, int64_t k4, const void *a_,
                                          const int8_t *b, int32_t *c, const int8_t *pf) {
    const int8_t *a = (const int8_t *)a_;
    int r, j;
    int64_t g;
    (void)pf;
    for (r = 0; r < mr; r++)
        for (j = 0; j < KERN_QGEMM_NR; j++) c[r * KERN_QGEMM_NR + j] = 0;
    for (g = 0; g < k4; g++) {
        const int8_t *bg = b + g * 128;
        for (r = 0; r < mr; r++) {
            const int8_t *ar = a + (g * mr + r) * 4;
            int32_t a0 = ar[0], a1 = ar[1], a2 = ar[2], a3 = ar[3];
            int32_t *cr = c + r * KERN_QGEMM_NR;
            for (j = 0; j < KERN_QGEMM_NR; j++)
                cr[j] += a0 * bg[4 * j] + a1 * bg[4 * j + 1] + a2 * bg[4 * j + 2] +
                         a3 * bg[4 * j + 3];
        }
    }
}

#define KERN__QG_R14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define KERN__QG_R6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define KERN__QG_R3(X) X(0) X(1) X(2)

#ifdef KERN_X86
/* AVX-512 VNNI, up to 14 rows x 32 columns: 28 zmm accumulators, two weight
 * vectors and one broadcast (31 of 32 registers). Per group of 4 k: 2 zmm
 * weight loads, MR dword broadcasts, 2*MR vpdpbusd. The weight stream is
 * prefetched 1 KiB ahead (it comes from DRAM on the decode path). */
KERN_TARGET_AVX512VNNI KERN__QG_INLINE void
kern__qg_u8s8_body__avx512vnni(const int MR, int64_t k4, const uint8_t *a, const int8_t *b,
                               int32_t *c, const int8_t *pf) {
#define KERN__QG_DECL(r) __m512i c##r##_0 = _mm512_setzero_si512(), c##r##_1 = c##r##_0;
    KERN__QG_R14(KERN__QG_DECL)
#undef KERN__QG_DECL
    int64_t g;
    for (g = 0; g < k4; g++) {
        const __m512i b0 = _mm512_load_si512((const void *)b);
        const __m512i b1 = _mm512_load_si512((const void *)(b + 64));
        _mm_prefetch((const char *)pf, _MM_HINT_T1);
        _mm_prefetch((const char *)(pf + 64), _MM_HINT_T1);
#define KERN__QG_STEP(r)                                                      \
    if (MR > r) {                                                             \
        int32_t av_;                                                          \
        __m512i a_;                                                           \
        memcpy(&av_, a + 4 * r, 4);                                           \
        a_ = _mm512_set1_epi32(av_);                                          \
        c##r##_0 = _mm512_dpbusd_epi32(c##r##_0, a_, b0);                     \
        c##r##_1 = _mm512_dpbusd_epi32(c##r##_1, a_, b1);                     \
    }
        KERN__QG_R14(KERN__QG_STEP)
#undef KERN__QG_STEP
        a += 4 * MR;
        b += 128;
        pf += 128;
    }
#define KERN__QG_STORE(r)                                                     \
    if (MR > r) {                                                             \
        _mm512_storeu_si512((void *)(c + 32 * r), c##r##_0);                  \
        _mm512_storeu_si512((void *)(c + 32 * r + 16), c##r##_1);             \
    }
    KERN__QG_R14(KERN__QG_STORE)
#undef KERN__QG_STORE
}
#define KERN__QG_INST(r)                                                      \
    KERN_TARGET_AVX512VNNI static void kern__qgemm_u8s8_##r##x32__avx512vnni( \
        int64_t k4, const uint8_t *a, const int8_t *b, int32_t *c, const int8_t *pf) { \
        kern__qg_u8s8_body__avx512vnni(r + 1, k4, a, b, c, pf);               \
    }
KERN__QG_R14(KERN__QG_INST)
#undef KERN__QG_INST
static void kern__qgemm_u8s8_14x32__avx512vnni(int mr, int64_t k4, const void *a,
                                               const int8_t *b, int32_t *c, const int8_t *pf) {
    const uint8_t *au = (const uint8_t *)a;
    switch (mr) {
#define KERN__QG_CASE(r)                                                      \
    case r + 1: kern__qgemm_u8s8_##r##x32__avx512vnni(k4, au, b, c, pf); break;
        KERN__QG_R14(KERN__QG_CASE)
#undef KERN__QG_CASE
    default: break;
    }
}

/* AVX-VNNI (VEX ymm, 16 registers): two 16-column halves, up to 6 rows x
 * 2 ymm = 12 accumulators + 2 weight vectors + 1 broadcast. */
KERN_TARGET_AVXVNNI KERN__QG_INLINE void
kern__qg_u8s8_body__avxvnni(const int MR, int64_t k4, const uint8_t *a, const int8_t *b,
                            int32_t *c, const int8_t *pf) {
    int h;
    for (h = 0; h < 2; h++) {
#define KERN__QG_DECL(r) __m256i c##r##_0 = _mm256_setzero_si256(), c##r##_1 = c##r##_0;
        KERN__QG_R6(KERN__QG_DECL)
#undef KERN__QG_DECL
        const uint8_t *ap = a;
        const int8_t *bp = b + 64 * h, *pp = pf + 64 * h;
        int64_t g;
        for (g = 0; g < k4; g++) {
            const __m256i b0 = _mm256_load_si256((const __m256i *)bp);
            const __m256i b1 = _mm256_load_si256((const __m256i *)(bp + 32));
            _mm_prefetch((const char *)pp, _MM_HINT_T1);
            pp += 128;
#define KERN__QG_STEP(r)                                                      \
    if (MR > r) {                                                             \
        int32_t av_;                                                          \
        __m256i a_;                                                           \
        memcpy(&av_, ap + 4 * r, 4);                                          \
        a_ = _mm256_set1_epi32(av_);                                          \
        c##r##_0 = _mm256_dpbusd_avx_epi32(c##r##_0, a_, b0);                 \
        c##r##_1 = _mm256_dpbusd_avx_epi32(c##r##_1, a_, b1);                 \
    }
            KERN__QG_R6(KERN__QG_STEP)
#undef KERN__QG_STEP
            ap += 4 * MR;
            bp += 128;
        }
#define KERN__QG_STORE(r)                                                     \
    if (MR > r) {                                                             \
        _mm256_storeu_si256((__m256i *)(c + 32 * r + 16 * h), c##r##_0);      \
        _mm256_storeu_si256((__m256i *)(c + 32 * r + 16 * h + 8), c##r##_1);  \
    }
        KERN__QG_R6(KERN__QG_STORE)
#undef KERN__QG_STORE
    }
}
#define KERN__QG_INST(r)                                                      \
    KERN_TARGET_AVXVNNI static void kern__qgemm_u8s8_##r##x32__avxvnni(       \
        int64_t k4, const uint8_t *a, const int8_t *b, int32_t *c, const int8_t *pf) { \
        kern__qg_u8s8_body__avxvnni(r + 1, k4, a, b, c, pf);                  \
    }
KERN__QG_R6(KERN__QG_INST)
#undef KERN__QG_INST
static void kern__qgemm_u8s8_6x32__avxvnni(int mr, int64_t k4, const void *a,
                                           const int8_t *b, int32_t *c, const int8_t *pf) {
    const uint8_t *au = (const uint8_t *)a;
    switch (mr) {
#define KERN__QG_CASE(r)                                                      \
    case r + 1: kern__qgemm_u8s8_##r##x32__avxvnni(k4, au, b, c, pf); break;
        KERN__QG_R6(KERN__QG_CASE)
#undef KERN__QG_CASE
    default: break;
    }
}

/* AVX2 without VNNI: a is s16 [k4][mr][4]. A 16-byte weight chunk (4
 * columns x 4 k) is widened with vpmovsxbw; a row's 4 activations are
 * broadcast as one qword, so vpmaddwd gives lanes (col, k0k1) and
 * (col, k2k3); the two halves are added with vphaddd at the end. Up to 3
 * rows x 4 chunks = 12 accumulators + 3 broadcasts + 1 widened chunk. */
KERN_TARGET_AVX2 KERN__QG_INLINE void kern__qg_s16s8_body__avx2(const int MR, int64_t k4,
                                                                const int16_t *a,
                                                                const int8_t *b, int32_t *c,
                                                                const int8_t *pf) {
    int h;
    for (h = 0; h < 2; h++) {
#define KERN__QG_DECL(r)                                                      \
    __m256i c##r##_0 = _mm256_setzero_si256(), c##r##_1 = c##r##_0,           \
            c##r##_2 = c##r##_0, c##r##_3 = c##r##_0, a##r = c##r##_0;
        KERN__QG_R3(KERN__QG_DECL)
#undef KERN__QG_DECL
        const int16_t *ap = a;
        const int8_t *bp = b + 64 * h, *pp = pf + 64 * h;
        int64_t g;
        for (g = 0; g < k4; g++) {
            __m256i w;
            _mm_prefetch((const char *)pp, _MM_HINT_T1);
            pp += 128;
#define KERN__QG_BCAST(r)                                                     \
    if (MR > r) {                                                             \
        long long q_;                                                         \
        memcpy(&q_, ap + 4 * r, 8);                                           \
        a##r = _mm256_set1_epi64x(q_);                                        \
    }
            KERN__QG_R3(KERN__QG_BCAST)
#undef KERN__QG_BCAST
#define KERN__QG_MADD(r, j)                                                   \
    if (MR > r) c##r##_##j = _mm256_add_epi32(c##r##_##j, _mm256_madd_epi16(w, a##r));
#define KERN__QG_CHUNK(j)                                                     \
    w = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(bp + 16 * j)));  \
    KERN__QG_MADD(0, j) KERN__QG_MADD(1, j) KERN__QG_MADD(2, j)
            KERN__QG_CHUNK(0)
            KERN__QG_CHUNK(1)
            KERN__QG_CHUNK(2)
            KERN__QG_CHUNK(3)
#undef KERN__QG_CHUNK
#undef KERN__QG_MADD
            ap += 4 * MR;
            bp += 128;
        }
#define KERN__QG_STORE(r)                                                     \
    if (MR > r) {                                                             \
        __m256i lo_ = _mm256_permute4x64_epi64(_mm256_hadd_epi32(c##r##_0, c##r##_1), 0xD8); \
        __m256i hi_ = _mm256_permute4x64_epi64(_mm256_hadd_epi32(c##r##_2, c##r##_3), 0xD8); \
        _mm256_storeu_si256((__m256i *)(c + 32 * r + 16 * h), lo_);           \
        _mm256_storeu_si256((__m256i *)(c + 32 * r + 16 * h + 8), hi_);       \
    }
        KERN__QG_R3(KERN__QG_STORE)
#undef KERN__QG_STORE
    }
}
#define KERN__QG_INST(r)                                                      \
    KERN_TARGET_AVX2 static void kern__qgemm_s16s8_##r##x32__avx2(            \
        int64_t k4, const int16_t *a, const int8_t *b, int32_t *c, const int8_t *pf) { \
        kern__qg_s16s8_body__avx2(r + 1, k4, a, b, c, pf);                    \
    }
KERN__QG_R3(KERN__QG_INST)
#undef KERN__QG_INST
static void kern__qgemm_s16s8_3x32__avx2(int mr, int64_t k4, const void *a, const int8_t *b,
                                         int32_t *c, const int8_t *pf) {
    const int16_t *as = (const int16_t *)a;
    switch (mr) {
#define KERN__QG_CASE(r)                                                      \
    case r + 1: kern__qgemm_s16s8_##r##x32__avx2(k4, as, b, c, pf); break;
        KERN__QG_R3(KERN__QG_CASE)
#undef KERN__QG_CASE
    default: break;
    }
}
#endif /* KERN_X86 */

#ifdef KERN__QG_NEON_DOT
/* AArch64 sdot: a is s8 [k4][mr][4]; one row at a time, 4 accumulators of
 * 4 columns per 16-column half; the row's 4 bytes are duplicated to every
 * lane so vdotq_s32 gives 4 columns x 4 k per instruction. */
static void kern__qgemm_s8s8_4x32__neondot(int mr, int64_t k4, const void *a_,
                                           const int8_t *b, int32_t *c, const int8_t *pf) {
    const int8_t *a = (const int8_t *)a_;
    int h, r;
    (void)pf;
    for (h = 0; h < 2; h++)
        for (r = 0; r < mr; r++) {
            int32x4_t c0 = vdupq_n_s32(0), c1 = c0, c2 = c0, c3 = c0;
            const int8_t *bp = b + 64 * h;
            int64_t g;
            for (g = 0; g < k4; g++) {
                int32_t av;
                int8x16_t va;
                memcpy(&av, a + (g * mr + r) * 4, 4);
                va = vreinterpretq_s8_s32(vdupq_n_s32(av));
                c0 = vdotq_s32(c0, vld1q_s8(bp), va);
                c1 = vdotq_s32(c1, vld1q_s8(bp + 16), va);
                c2 = vdotq_s32(c2, vld1q_s8(bp + 32), va);
                c3 = vdotq_s32(c3, vld1q_s8(bp + 48), va);
                bp += 128;
            }
            vst1q_s32(c + 32 * r + 16 * h, c0);
            vst1q_s32(c + 32 * r + 16 * h + 4, c1);
            vst1q_s32(c + 32 * r + 16 * h + 8, c2);
            vst1q_s32(c + 32 * r + 16 * h + 12, c3);
        }
}
#endif

static kern__qg_ops kern__qg_get_ops(kern_qgemm_isa isa) {
    kern__qg_ops o;
    o.isa = KERN_QGEMM_ISA_SCALAR;
    o.mr_max = 4;
    o.a_fmt = KERN__QG_A_S8;
    o.ukernel = kern__qgemm_s8s8_4x32__scalar;
    o.epi = kern__qg_epi__scalar;
    o.minmax = kern__qg_minmax_unit__scalar;
    o.quant = kern__qg_quant_unit__scalar;
    (void)isa;
#ifdef KERN_X86
    if (isa == KERN_QGEMM_ISA_AVX512VNNI) {
        o.isa = isa;
        o.mr_max = 14;
        o.a_fmt = KERN__QG_A_U8;
        o.ukernel = kern__qgemm_u8s8_14x32__avx512vnni;
        o.epi = kern__qg_epi__avx512;
        o.minmax = kern__qg_minmax__avx512;
        o.quant = kern__qg_quant__avx512;
    } else if (isa == KERN_QGEMM_ISA_AVXVNNI || isa == KERN_QGEMM_ISA_AVX2) {
        o.isa = isa;
        o.epi = kern__qg_epi__avx2;
        o.minmax = kern__qg_minmax__avx2;
        o.quant = kern__qg_quant__avx2;
        if (isa == KERN_QGEMM_ISA_AVXVNNI) {
            o.mr_max = 6;
            o.a_fmt = KERN__QG_A_U8;
            o.ukernel = kern__qgemm_u8s8_6x32__avxvnni;
        } else {
            o.mr_max = 3;
            o.a_fmt = KERN__QG_A_S16;
            o.ukernel = kern__qgemm_s16s8_3x32__avx2;
        }
    }
#endif
#ifdef KERN__QG_NEON_DOT
    if (isa == KERN_QGEMM_ISA_NEON_DOT) {
        o.isa = isa;
        o.ukernel = kern__qgemm_s8s8_4x32__neondot;
    }
#endif
    return o;
}

KERN_API kern_qgemm_isa kern_qgemm_isa_for(const kern_ctx *ctx) {
    uint32_t f = kern_ctx_features(ctx);
    (void)f;
#ifdef KERN_X86
    {
        const uint32_t v512 = KERN_CPU_AVX512F | KERN_CPU_AVX512BW | KERN_CPU_AVX512VL |
                              KERN_CPU_AVX512DQ | KERN_CPU_AVX512VNNI;
        const uint32_t v2 = KERN_CPU_AVX2 | KERN_CPU_FMA | KERN_CPU_F16C;
        if ((f & v512) == v512) return KERN_QGEMM_ISA_AVX512VNNI;
        if ((f & v2) == v2 && (f & KERN_CPU_AVXVNNI)) return KERN_QGEMM_ISA_AVXVNNI;
        if ((f & v2) == v2) return KERN_QGEMM_ISA_AVX2;
    }
#endif
#ifdef KERN__QG_NEON_DOT
    if (f & KERN_CPU_NEON_DOT) return KERN_QGEMM_ISA_NEON_DOT;
#endif
    return KERN_QGEMM_ISA_SCALAR;
}

KERN_API const char *kern_qgemm_isa_name(kern_qgemm_isa isa) {
    switch (isa) {
    case KERN_QGEMM_ISA_SCALAR: return "scalar";
    case KERN_QGEMM_ISA_AVX2: return "avx2";
    case KERN_QGEMM_ISA_AVXVNNI: return "avxvnni";
    case KERN_QGEMM_ISA_AVX512VNNI: return "avx512vnni";
    case KERN_QGEMM_ISA_NEON_DOT: return "neon-dot";
    default: return "invalid";
    }
}

/* ------------------------------------------------------ shared packing */

/* Row `r` of an mr-row activation panel from 4*k4 int8 values (zero
 * padded), in the path's format. */
static void kern__qg_pack_a_row(int fmt, const int8_t *q, int64_t k4, int mr, int r,
                                void *panel) {
    int64_t g;
    if (fmt == KERN__QG_A_U8) {
        uint8_t *p = (uint8_t *)panel + (int64_t)r * 4;
        for (g = 0; g < k4; g++) {
            uint32_t v;
            memcpy(&v, q + 4 * g, 4);
            v ^= 0x80808080u; /* q + 128 */
            memcpy(p + g * mr * 4, &v, 4);
        }
    } else if (fmt == KERN__QG_A_S16) {
        int16_t *p = (int16_t *)panel + (int64_t)r * 4;
        for (g = 0; g < k4; g++) {
            int16_t *d = p + g * mr * 4;
            d[0] = q[4 * g];
            d[1] = q[4 * g + 1];
            d[2] = q[4 * g + 2];
            d[3] = q[4 * g + 3];
        }
    } else {
        int8_t *p = (int8_t *)panel + (int64_t)r * 4;
        for (g = 0; g < k4; g++) memcpy(p + g * mr * 4, q + 4 * g, 4);
    }
}
static int kern__qg_a_bytes(int fmt) { return fmt == KERN__QG_A_S16 ? 2 : 1; }

/* Split of M rows into panels of at most mr_max rows: balanced, except
 * that two panels are split full + rest (M = 16 on a 14-row kernel: 14 + 2,
 * not 8 + 8), so the pass that streams the weight from memory does the most
 * work per weight byte and the short one reuses it from L2. */
typedef struct kern__qg_mpan {
    int64_t n, base, rem, first; /* first > 0: panel 0 has `first` rows */
} kern__qg_mpan;
static kern__qg_mpan kern__qg_mpan_make(int64_t m, int mr_max) {
    kern__qg_mpan p;
    p.n = (m + mr_max - 1) / mr_max;
    if (p.n < 1) p.n = 1;
    p.first = 0;
    p.base = m / p.n;
    p.rem = m % p.n;
    if (p.n == 2) {
        p.first = mr_max;
        p.base = m - mr_max;
        p.rem = 0;
    }
    return p;
}
static int64_t kern__qg_mpan_row0(const kern__qg_mpan *p, int64_t i) {
    if (p->first) return i == 0 ? 0 : p->first + (i - 1) * p->base;
    return i * p->base + (i < p->rem ? i : p->rem);
}
static int kern__qg_mpan_rows(const kern__qg_mpan *p, int64_t i) {
    if (p->first) return (int)(i == 0 ? p->first : p->base);
    return (int)(p->base + (i < p->rem ? 1 : 0));
}

/* Quantize one row (n values, element stride) with the symmetric rule into
 * q; returns the scale. */
static float kern__qg_quant_row_sym(const kern__qg_ops *o, const void *x, kern_dtype dt,
                                    int64_t n, int64_t stride, int8_t *q,
                                    int64_t *nonfinite) {
    float mn, mx, amax, s;
    if (stride == 1) o->minmax(x, dt, n, &mn, &mx, nonfinite);
    else kern__qg_minmax__scalar(x, dt, n, stride, &mn, &mx, nonfinite);
    amax = -mn > mx ? -mn : mx;
    s = kern__qg_scale(amax, 127.0f);
    if (stride == 1) o->quant(x, dt, n, 1.0f / s, 0, -127, 127, (uint8_t *)q);
    else kern__qg_quant__scalar(x, dt, n, stride, 1.0f / s, 0, -127, 127, (uint8_t *)q);
    return s;
}

/* Weight panel p from rows of int8 values: dst[g][j][t] = q_j[4g + t]. */
static void kern__qg_pack_b_row(const int8_t *q, int64_t k4, int j, int8_t *panel) {
    int64_t g;
    for (g = 0; g < k4; g++) memcpy(panel + g * 128 + 4 * j, q + 4 * g, 4);
}

/* ------------------------------------------------------ weight packing */

static size_t kern__qg_round64(size_t v) { return (v + 63) & ~(size_t)63; }

static kern_status kern__qg_alloc_qw(kern_ctx *ctx, int64_t n, int64_t k, kern_qgemm_isa isa,
                                     kern_qweight **out, const char *op) {
    int64_t k4 = (k + 3) / 4, np = (n + KERN_QGEMM_NR - 1) / KERN_QGEMM_NR, data;
    size_t hdr = kern__qg_round64(sizeof(kern_qweight));
    size_t vec = kern__qg_round64((size_t)n * 4);
    size_t total;
    char *base;
    kern_qweight *qw;
    if (kern_mul_overflow_i64(np, k4 * 128, &data) || data > (int64_t)(SIZE_MAX / 2))
        return kern__err(KERN_ERR_SHAPE, "%s: N=%lld, K=%lld is too large to pack", op,
                         (long long)n, (long long)k);
    total = hdr + 2 * vec + (size_t)data;
    base = (char *)kern__alloc(ctx, total);
    if (!base)
        return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes for the packed weight",
                         op, total);
    qw = (kern_qweight *)base;
    memset(qw, 0, sizeof *qw);
    qw->n = n;
    qw->k = k;
    qw->isa = isa;
    qw->version = KERN_QWEIGHT_VERSION;
    qw->k4 = k4;
    qw->n_panels = np;
    qw->scales = (float *)(base + hdr);
    qw->colsum = (int32_t *)(base + hdr + vec);
    qw->data = (int8_t *)(base + hdr + 2 * vec);
    qw->data_bytes = (size_t)data;
    *out = qw;
    return KERN_OK;
}

typedef struct kern__qg_packw_job {
    kern__qg_ops ops;
    const kern_tensor *w;       /* f32/bf16 [N,K], or i8 for pack_int8 */
    const kern_tensor *scales;  /* pack_int8 only */
    kern_qweight *qw;
    int64_t *row_bad;           /* per panel: first row with a non-finite value, or -1 */
    kern_ctx *ctx;
} kern__qg_packw_job;

static void kern__qg_packw_task(void *arg, int64_t p, int thread) {
    kern__qg_packw_job *jb = (kern__qg_packw_job *)arg;
    kern_qweight *qw = jb->qw;
    const kern_tensor *w = jb->w;
    int8_t *q = (int8_t *)kern__thread_scratch(jb->ctx, thread);
    int8_t *panel = qw->data + p * qw->k4 * 128;
    int64_t esz = (int64_t)kern_dtype_size(w->dtype);
    int j;
    memset(panel, 0, (size_t)(qw->k4 * 128));
    jb->row_bad[p] = -1;
    for (j = 0; j < KERN_QGEMM_NR; j++) {
        int64_t n = p * KERN_QGEMM_NR + j, k, sum = 0;
        const char *row;
        if (n >= qw->n) break;
        row = (const char *)w->data + n * w->stride[0] * esz;
        memset(q, 0, (size_t)(qw->k4 * 4));
        if (w->dtype == KERN_I8) {
            for (k = 0; k < qw->k; k++) q[k] = ((const int8_t *)row)[k * w->stride[1]];
            qw->scales[n] = ((const float *)jb->scales->data)[n * jb->scales->stride[0]];
        } else {
            int64_t bad = 0;
            qw->scales[n] = kern__qg_quant_row_sym(&jb->ops, row, w->dtype, qw->k,
                                                   qw->k > 1 ? w->stride[1] : 1, q, &bad);
            if (bad && jb->row_bad[p] < 0) jb->row_bad[p] = n;
        }
        for (k = 0; k < qw->k; k++) sum += q[k];
        qw->colsum[n] = (int32_t)sum;
        kern__qg_pack_b_row(q, qw->k4, j, panel);
    }
}

static kern_status kern__qg_check_isa_param(const kern_qweight_params *params,
                                            const kern_ctx *ctx, kern_qgemm_isa *isa,
                                            const char *op) {
    *isa = params ? params->isa : KERN_QGEMM_ISA_NONE;
    if ((int)*isa < 0 || *isa >= KERN_QGEMM_ISA_COUNT)
        return kern__err(KERN_ERR_ARG, "%s: params.isa=%d is not a kern_qgemm_isa", op,
                         (int)*isa);
    if (*isa == KERN_QGEMM_ISA_NONE) *isa = kern_qgemm_isa_for(ctx);
    return KERN_OK;
}

static kern_status kern__qg_pack_common(kern_ctx *ctx, const kern_tensor *w,
                                        const kern_tensor *scales, kern_qweight **out,
                                        kern_qgemm_isa isa, const char *op) {
    kern__qg_packw_job jb;
    kern_qweight *qw = NULL;
    kern_status st;
    int64_t p;
    st = kern__qg_alloc_qw(ctx, w->shape[0], w->shape[1], isa, &qw, op);
    if (st) return st;
    memset(&jb, 0, sizeof jb);
    /* values are quantized with the vector helpers of the context's own
     * level (bit-identical on every path) */
    jb.ops = kern__qg_get_ops(kern_qgemm_isa_for(ctx));
    jb.w = w;
    jb.scales = scales;
    jb.qw = qw;
    jb.ctx = ctx;
    jb.row_bad = (int64_t *)kern__alloc(ctx, (size_t)qw->n_panels * sizeof(int64_t));
    if (!jb.row_bad) {
        kern__free(ctx, qw);
        return kern__err(KERN_ERR_NOMEM, "%s: out of memory", op);
    }
    st = kern__reserve_thread_scratch(ctx, (size_t)(qw->k4 * 4 + 64));
    if (!st) st = kern_parallel_for(ctx, qw->n_panels, kern__qg_packw_task, &jb);
    if (!st)
        for (p = 0; p < qw->n_panels; p++)
            if (jb.row_bad[p] >= 0) {
                int64_t n = jb.row_bad[p], k;
                int64_t esz = (int64_t)kern_dtype_size(w->dtype);
                const char *row = (const char *)w->data + n * w->stride[0] * esz;
                for (k = 0; k < w->shape[1]; k++)
                    if (!kern__qg_isfinite(kern__qg_load_f(row, w->dtype, k * w->stride[1])))
                        break;
                st = kern__err(KERN_ERR_ARG, "%s: w[%lld,%lld]=%g is not finite", op,
                               (long long)n, (long long)k,
                               (double)kern__qg_load_f(row, w->dtype, k * w->stride[1]));
                break;
            }
    kern__free(ctx, jb.row_bad);
    if (st) {
        kern__free(ctx, qw);
        return st;
    }
    *out = qw;
    return KERN_OK;
}

static kern_status kern__qg_check_w(const kern_tensor *w, const char *op, const char *name) {
    kern_status st = kern_tensor_check(w, op, name);
    if (st) return st;
    st = kern__qg_nonneg(w, op, name);
    if (st) return st;
    if (w->ndim != 2)
        return kern__err(KERN_ERR_SHAPE, "%s: %s.ndim=%d, want 2 ([N, K])", op, name, w->ndim);
    if (w->shape[0] < 1 || w->shape[1] < 1)
        return kern__err(KERN_ERR_SHAPE, "%s: %s.shape=[%lld,%lld] is empty", op, name,
                         (long long)w->shape[0], (long long)w->shape[1]);
    if (w->shape[1] > KERN_QGEMM_MAX_K)
        return kern__err(KERN_ERR_SHAPE, "%s: K=%lld exceeds KERN_QGEMM_MAX_K=%d", op,
                         (long long)w->shape[1], KERN_QGEMM_MAX_K);
    return KERN_OK;
}

KERN_API kern_status kern_qweight_pack(kern_ctx *ctx, const kern_tensor *w, kern_qweight **out,
                                       const kern_qweight_params *params) {
    const char *op = "kern_qweight_pack";
    kern_qgemm_isa isa;
    kern_status st;
    if (!out) return kern__err(KERN_ERR_ARG, "%s: out is NULL", op);
    st = kern__qg_check_w(w, op, "w");
    if (st) return st;
    if (w->dtype != KERN_F32 && w->dtype != KERN_BF16)
        return kern__err(KERN_ERR_DTYPE, "%s: w.dtype=%s, want f32 or bf16", op,
                         kern_dtype_name(w->dtype));
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    st = kern__qg_check_isa_param(params, ctx, &isa, op);
    if (!st) st = kern__qg_pack_common(ctx, w, NULL, out, isa, op);
    kern__op_end(ctx);
    return st;
}

KERN_API kern_status kern_qweight_pack_int8(kern_ctx *ctx, const kern_tensor *wq,
                                            const kern_tensor *scales, kern_qweight **out,
                                            const kern_qweight_params *params) {
    const char *op = "kern_qweight_pack_int8";
    kern_qgemm_isa isa;
    kern_status st;
    int64_t n;
    if (!out) return kern__err(KERN_ERR_ARG, "%s: out is NULL", op);
    st = kern__qg_check_w(wq, op, "wq");
    if (st) return st;
    if (wq->dtype != KERN_I8)
        return kern__err(KERN_ERR_DTYPE, "%s: wq.dtype=%s, want i8", op,
                         kern_dtype_name(wq->dtype));
    st = kern_tensor_check(scales, op, "scales");
    if (st) return st;
    st = kern__qg_nonneg(scales, op, "scales");
    if (st) return st;
    if (scales->dtype != KERN_F32)
        return kern__err(KERN_ERR_DTYPE, "%s: scales.dtype=%s, want f32", op,
                         kern_dtype_name(scales->dtype));
    if (scales->ndim != 1 || scales->shape[0] != wq->shape[0])
        return kern__err(KERN_ERR_SHAPE, "%s: scales must be [%lld]", op,
                         (long long)wq->shape[0]);
    for (n = 0; n < wq->shape[0]; n++) {
        float s = ((const float *)scales->data)[n * scales->stride[0]];
        if (!kern__qg_isfinite(s) || !(s > 0.0f))
            return kern__err(KERN_ERR_ARG, "%s: scales[%lld]=%g is not finite and positive",
                             op, (long long)n, (double)s);
    }
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    st = kern__qg_check_isa_param(params, ctx, &isa, op);
    if (!st) st = kern__qg_pack_common(ctx, wq, scales, out, isa, op);
    kern__op_end(ctx);
    return st;
}

KERN_API void kern_qweight_free(kern_ctx *ctx, kern_qweight *qw) {
    if (!qw) return;
    if (!ctx) ctx = kern_default_ctx();
    kern__free(ctx, qw);
}

KERN_API kern_status kern_qweight_get_info(const kern_qweight *qw, kern_qweight_info *out) {
    const char *op = "kern_qweight_get_info";
    if (!qw) return kern__err(KERN_ERR_ARG, "%s: qw is NULL", op);
    if (!out) return kern__err(KERN_ERR_ARG, "%s: out is NULL", op);
    memset(out, 0, sizeof *out);
    out->n = qw->n;
    out->k = qw->k;
    out->dtype = KERN_I8;
    out->isa = qw->isa;
    out->version = qw->version;
    out->data_bytes = qw->data_bytes;
    /* the one allocation of kern__qg_alloc_qw */
    out->bytes = kern__qg_round64(sizeof(kern_qweight)) + 2 * kern__qg_round64((size_t)qw->n * 4) +
                 qw->data_bytes;
    return KERN_OK;
}

KERN_API void kern_qweight_params_defaults(const kern_ctx *ctx, kern_qweight_params *p) {
    if (!p) return;
    if (p->isa == KERN_QGEMM_ISA_NONE) p->isa = kern_qgemm_isa_for(ctx);
}

static int8_t kern__qg_qw_at(const kern_qweight *qw, int64_t n, int64_t k) {
    return qw->data[(n / KERN_QGEMM_NR) * qw->k4 * 128 + (k / 4) * 128 +
                    (n % KERN_QGEMM_NR) * 4 + (k % 4)];
}

KERN_API kern_status kern_qweight_unpack(const kern_qweight *qw, const kern_tensor *wq,
                                         const kern_tensor *scales) {
    const char *op = "kern_qweight_unpack";
    kern_status st;
    int64_t n, k;
    if (!qw) return kern__err(KERN_ERR_ARG, "%s: qw is NULL", op);
    if (wq) {
        st = kern_tensor_check(wq, op, "wq");
        if (st) return st;
        st = kern__qg_nonneg(wq, op, "wq");
        if (st) return st;
        if (wq->dtype != KERN_I8)
            return kern__err(KERN_ERR_DTYPE, "%s: wq.dtype=%s, want i8", op,
                             kern_dtype_name(wq->dtype));
        if (wq->ndim != 2 || wq->shape[0] != qw->n || wq->shape[1] != qw->k)
            return kern__err(KERN_ERR_SHAPE, "%s: wq must be [%lld,%lld]", op,
                             (long long)qw->n, (long long)qw->k);
        if (kern__qg_self_overlap(wq))
            return kern__err(KERN_ERR_LAYOUT, "%s: wq has overlapping elements", op);
    }
    if (scales) {
        st = kern_tensor_check(scales, op, "scales");
        if (st) return st;
        st = kern__qg_nonneg(scales, op, "scales");
        if (st) return st;
        if (scales->dtype != KERN_F32)
            return kern__err(KERN_ERR_DTYPE, "%s: scales.dtype=%s, want f32", op,
                             kern_dtype_name(scales->dtype));
        if (scales->ndim != 1 || scales->shape[0] != qw->n)
            return kern__err(KERN_ERR_SHAPE, "%s: scales must be [%lld]", op, (long long)qw->n);
        if (kern__qg_self_overlap(scales))
            return kern__err(KERN_ERR_LAYOUT, "%s: scales has overlapping elements", op);
        if (wq && kern_tensors_overlap(wq, scales))
            return kern__err(KERN_ERR_ARG, "%s: wq and scales overlap", op);
    }
    if (wq)
        for (n = 0; n < qw->n; n++)
            for (k = 0; k < qw->k; k++)
                ((int8_t *)wq->data)[n * wq->stride[0] + k * wq->stride[1]] =
                    kern__qg_qw_at(qw, n, k);
    if (scales)
        for (n = 0; n < qw->n; n++)
            ((float *)scales->data)[n * scales->stride[0]] = qw->scales[n];
    return KERN_OK;
}

/* -------------------------------------------------------- serialization */

static void kern__qg_put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}
static void kern__qg_put64(unsigned char *p, uint64_t v) {
    kern__qg_put32(p, (uint32_t)v);
    kern__qg_put32(p + 4, (uint32_t)(v >> 32));
}
static uint32_t kern__qg_get32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static uint64_t kern__qg_get64(const unsigned char *p) {
    return (uint64_t)kern__qg_get32(p) | ((uint64_t)kern__qg_get32(p + 4) << 32);
}
static uint32_t kern__qg_fnv(const unsigned char *p, size_t n) {
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

KERN_API size_t kern_qweight_serialized_size(const kern_qweight *qw) {
    if (!qw) return 0;
    return (size_t)KERN__QG_HDR + 8 * (size_t)qw->n + qw->data_bytes + 4;
}

KERN_API kern_status kern_qweight_serialize(const kern_qweight *qw, void *buf, size_t size) {
    const char *op = "kern_qweight_serialize";
    unsigned char *p = (unsigned char *)buf;
    size_t need, off;
    int64_t n;
    if (!qw) return kern__err(KERN_ERR_ARG, "%s: qw is NULL", op);
    if (!buf) return kern__err(KERN_ERR_ARG, "%s: buf is NULL", op);
    need = kern_qweight_serialized_size(qw);
    if (size < need)
        return kern__err(KERN_ERR_ARG, "%s: size=%zu but the serialized weight needs %zu bytes",
                         op, size, need);
    memcpy(p, KERN__QG_MAGIC, 4);
    kern__qg_put32(p + 4, qw->version);
    kern__qg_put32(p + 8, (uint32_t)qw->isa);
    kern__qg_put32(p + 12, KERN_QGEMM_NR);
    kern__qg_put64(p + 16, (uint64_t)qw->n);
    kern__qg_put64(p + 24, (uint64_t)qw->k);
    kern__qg_put64(p + 32, (uint64_t)qw->data_bytes);
    off = KERN__QG_HDR;
    for (n = 0; n < qw->n; n++, off += 4) kern__qg_put32(p + off, kern__f32_bits(qw->scales[n]));
    for (n = 0; n < qw->n; n++, off += 4) kern__qg_put32(p + off, (uint32_t)qw->colsum[n]);
    memcpy(p + off, qw->data, qw->data_bytes);
    off += qw->data_bytes;
    kern__qg_put32(p + off, kern__qg_fnv(p, off));
    return KERN_OK;
}

KERN_API kern_status kern_qweight_deserialize(kern_ctx *ctx, const void *buf, size_t size,
                                              kern_qweight **out) {
    const char *op = "kern_qweight_deserialize";
    const unsigned char *p = (const unsigned char *)buf;
    uint32_t version, isa, nr;
    uint64_t n, k, data;
    size_t need, off;
    kern_qweight *qw = NULL;
    kern_qgemm_isa want;
    kern_status st;
    int64_t i, kk;
    if (!buf) return kern__err(KERN_ERR_ARG, "%s: buf is NULL", op);
    if (!out) return kern__err(KERN_ERR_ARG, "%s: out is NULL", op);
    if (size < KERN__QG_HDR + 4)
        return kern__err(KERN_ERR_ARG, "%s: size=%zu is shorter than the %d-byte header", op,
                         size, KERN__QG_HDR + 4);
    if (memcmp(p, KERN__QG_MAGIC, 4) != 0)
        return kern__err(KERN_ERR_ARG, "%s: bad magic (not a serialized kern_qweight)", op);
    version = kern__qg_get32(p + 4);
    isa = kern__qg_get32(p + 8);
    nr = kern__qg_get32(p + 12);
    n = kern__qg_get64(p + 16);
    k = kern__qg_get64(p + 24);
    data = kern__qg_get64(p + 32);
    if (version != KERN_QWEIGHT_VERSION)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: format version %u, this build reads version %u", op, version,
                         KERN_QWEIGHT_VERSION);
    if (isa == 0 || isa >= KERN_QGEMM_ISA_COUNT)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: unknown ISA tag %u", op, isa);
    if (nr != KERN_QGEMM_NR)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: panel width %u, want %d", op, nr,
                         KERN_QGEMM_NR);
    if (n < 1 || n > ((uint64_t)1 << 40) || k < 1 || k > KERN_QGEMM_MAX_K)
        return kern__err(KERN_ERR_ARG, "%s: N=%llu, K=%llu out of range", op,
                         (unsigned long long)n, (unsigned long long)k);
    if (data != ((n + KERN_QGEMM_NR - 1) / KERN_QGEMM_NR) * ((k + 3) / 4) * 128)
        return kern__err(KERN_ERR_ARG, "%s: data size %llu does not match N=%llu, K=%llu", op,
                         (unsigned long long)data, (unsigned long long)n,
                         (unsigned long long)k);
    need = (size_t)KERN__QG_HDR + 8 * (size_t)n + (size_t)data + 4;
    if (size != need)
        return kern__err(KERN_ERR_ARG, "%s: size=%zu but the header describes %zu bytes", op,
                         size, need);
    if (kern__qg_get32(p + need - 4) != kern__qg_fnv(p, need - 4))
        return kern__err(KERN_ERR_ARG, "%s: checksum mismatch (corrupt buffer)", op);
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    want = kern_qgemm_isa_for(ctx);
    if ((kern_qgemm_isa)isa != want) {
        kern__op_end(ctx);
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: weight packed for %s but the context selects %s; repack it", op,
                         kern_qgemm_isa_name((kern_qgemm_isa)isa), kern_qgemm_isa_name(want));
    }
    st = kern__qg_alloc_qw(ctx, (int64_t)n, (int64_t)k, (kern_qgemm_isa)isa, &qw, op);
    kern__op_end(ctx);
    if (st) return st;
    off = KERN__QG_HDR;
    for (i = 0; i < (int64_t)n; i++, off += 4) {
        qw->scales[i] = kern__bits_f32(kern__qg_get32(p + off));
        if (!kern__qg_isfinite(qw->scales[i]) || !(qw->scales[i] > 0.0f)) {
            st = kern__err(KERN_ERR_ARG, "%s: scales[%lld]=%g is not finite and positive", op,
                           (long long)i, (double)qw->scales[i]);
            goto fail;
        }
    }
    for (i = 0; i < (int64_t)n; i++, off += 4) qw->colsum[i] = (int32_t)kern__qg_get32(p + off);
    memcpy(qw->data, p + off, (size_t)data);
    /* colsums must match the data and padding must be zero: a wrong colsum
     * would silently bias every VNNI result */
    for (i = 0; i < qw->n_panels * KERN_QGEMM_NR; i++) {
        int64_t s = 0;
        for (kk = 0; kk < qw->k4 * 4; kk++) {
            int8_t v = kern__qg_qw_at(qw, i, kk);
            if ((i >= (int64_t)n || kk >= (int64_t)k) && v != 0) {
                st = kern__err(KERN_ERR_ARG, "%s: nonzero padding at [%lld,%lld]", op,
                               (long long)i, (long long)kk);
                goto fail;
            }
            s += v;
        }
        if (i < (int64_t)n && s != qw->colsum[i]) {
            st = kern__err(KERN_ERR_ARG, "%s: colsum[%lld]=%d does not match the data (%lld)",
                           op, (long long)i, (int)qw->colsum[i], (long long)s);
            goto fail;
        }
    }
    *out = qw;
    return KERN_OK;
fail:
    kern__free(ctx, qw);
    return st;
}

/* ----------------------------------------------------- per-token quantize */

typedef struct kern__qg_qjob {
    kern__qg_ops ops;
    kern_ctx *ctx;
    const kern_tensor *x, *xq, *scales, *zp;
    int asym;
    int64_t rows, k, rows_per_task;
    float *part; /* per task: min, max (per-tensor phase 1) */
    float t_inv; /* per-tensor phase 2 */
    int t_zp;
} kern__qg_qjob;

static void kern__qg_qparams(int asym, float mn, float mx, float *scale, float *inv, int *zp) {
    if (!asym) {
        float amax = -mn > mx ? -mn : mx;
        *scale = kern__qg_scale(amax, 127.0f);
        *inv = 1.0f / *scale;
        *zp = 0;
    } else {
        float z;
        *scale = kern__qg_scale(mx - mn, 255.0f);
        *inv = 1.0f / *scale;
        z = -(mn * *inv); /* mn <= 0 */
        if (z > 255.0f) z = 255.0f;
        if (!(z > 0.0f)) z = 0.0f;
        *zp = (int)kern__qg_rne(z);
    }
}

static int64_t kern__qg_last_stride(const kern_tensor *t, int64_t k) {
    return t->ndim > 0 && k > 1 ? t->stride[t->ndim - 1] : 1;
}

static void kern__qg_qrow_minmax(const kern__qg_qjob *jb, int64_t m, float *mn, float *mx) {
    const kern_tensor *x = jb->x;
    const char *row = (const char *)x->data +
                      kern__qg_row_off(x, m) * (int64_t)kern_dtype_size(x->dtype);
    int64_t stride = kern__qg_last_stride(x, jb->k), bad;
    if (stride == 1) jb->ops.minmax(row, x->dtype, jb->k, mn, mx, &bad);
    else kern__qg_minmax__scalar(row, x->dtype, jb->k, stride, mn, mx, &bad);
}

static void kern__qg_qrow_write(const kern__qg_qjob *jb, int64_t m, float inv, int zp,
                                uint8_t *tmp) {
    const kern_tensor *x = jb->x, *xq = jb->xq;
    const char *row = (const char *)x->data +
                      kern__qg_row_off(x, m) * (int64_t)kern_dtype_size(x->dtype);
    uint8_t *qrow = (uint8_t *)xq->data + kern__qg_row_off(xq, m);
    int64_t xs = kern__qg_last_stride(x, jb->k), qs = kern__qg_last_stride(xq, jb->k), i;
    int lo = jb->asym ? 0 : -127, hi = jb->asym ? 255 : 127;
    uint8_t *dst = qs == 1 ? qrow : tmp;
    if (xs == 1) jb->ops.quant(row, x->dtype, jb->k, inv, zp, lo, hi, dst);
    else kern__qg_quant__scalar(row, x->dtype, jb->k, xs, inv, zp, lo, hi, dst);
    if (qs != 1)
        for (i = 0; i < jb->k; i++) qrow[i * qs] = tmp[i];
}

/* per-token: rows of task t, start to finish */
static void kern__qg_q_rows_task(void *arg, int64_t t, int thread) {
    kern__qg_qjob *jb = (kern__qg_qjob *)arg;
    int64_t m0 = t * jb->rows_per_task, m1 = m0 + jb->rows_per_task, m;
    uint8_t *tmp = (uint8_t *)kern__thread_scratch(jb->ctx, thread);
    if (m1 > jb->rows) m1 = jb->rows;
    for (m = m0; m < m1; m++) {
        float mn, mx, s, inv;
        int zp;
        kern__qg_qrow_minmax(jb, m, &mn, &mx);
        kern__qg_qparams(jb->asym, mn, mx, &s, &inv, &zp);
        ((float *)jb->scales->data)[kern__qg_elem_off(jb->scales, m)] = s;
        if (jb->asym) ((int32_t *)jb->zp->data)[kern__qg_elem_off(jb->zp, m)] = zp;
        kern__qg_qrow_write(jb, m, inv, zp, tmp);
    }
}
/* per-tensor phase 1: min/max of the rows of task t */
static void kern__qg_q_minmax_task(void *arg, int64_t t, int thread) {
    kern__qg_qjob *jb = (kern__qg_qjob *)arg;
    int64_t m0 = t * jb->rows_per_task, m1 = m0 + jb->rows_per_task, m;
    float lo = 0.0f, hi = 0.0f;
    (void)thread;
    if (m1 > jb->rows) m1 = jb->rows;
    for (m = m0; m < m1; m++) {
        float mn, mx;
        kern__qg_qrow_minmax(jb, m, &mn, &mx);
        if (mn < lo) lo = mn;
        if (mx > hi) hi = mx;
    }
    jb->part[2 * t] = lo;
    jb->part[2 * t + 1] = hi;
}
/* per-tensor phase 2 */
static void kern__qg_q_write_task(void *arg, int64_t t, int thread) {
    kern__qg_qjob *jb = (kern__qg_qjob *)arg;
    int64_t m0 = t * jb->rows_per_task, m1 = m0 + jb->rows_per_task, m;
    uint8_t *tmp = (uint8_t *)kern__thread_scratch(jb->ctx, thread);
    if (m1 > jb->rows) m1 = jb->rows;
    for (m = m0; m < m1; m++) kern__qg_qrow_write(jb, m, jb->t_inv, jb->t_zp, tmp);
}

/* Validates kern_quantize_per_token's operands (writes nothing). */
static kern_status kern__qg_quant_check(const char *op, const kern_tensor *x,
                                        const kern_tensor *xq, const kern_tensor *scales,
                                        const kern_quant_params *pp, int64_t *rows_out,
                                        int64_t *k_out) {
    kern_quant_params p;
    kern_status st;
    int64_t rows, k, nsc;
    int d;
    if (pp) p = *pp;
    else memset(&p, 0, sizeof p);
    st = kern_tensor_check(x, op, "x");
    if (!st) st = kern_tensor_check(xq, op, "xq");
    if (!st) st = kern_tensor_check(scales, op, "scales");
    if (st) return st;
    if (!st) st = kern__qg_nonneg(x, op, "x");
    if (!st) st = kern__qg_nonneg(xq, op, "xq");
    if (!st) st = kern__qg_nonneg(scales, op, "scales");
    if (st) return st;
    if (x->dtype != KERN_F32 && x->dtype != KERN_BF16)
        return kern__err(KERN_ERR_DTYPE, "%s: x.dtype=%s, want f32 or bf16", op,
                         kern_dtype_name(x->dtype));
    if (xq->dtype != (p.asymmetric ? KERN_U8 : KERN_I8))
        return kern__err(KERN_ERR_DTYPE, "%s: xq.dtype=%s, want %s for %s quantization", op,
                         kern_dtype_name(xq->dtype), p.asymmetric ? "u8" : "i8",
                         p.asymmetric ? "asymmetric" : "symmetric");
    if (scales->dtype != KERN_F32)
        return kern__err(KERN_ERR_DTYPE, "%s: scales.dtype=%s, want f32", op,
                         kern_dtype_name(scales->dtype));
    if (x->ndim < 1)
        return kern__err(KERN_ERR_SHAPE, "%s: x.ndim=0, want [..., K]", op);
    if (xq->ndim != x->ndim)
        return kern__err(KERN_ERR_SHAPE, "%s: xq.ndim=%d but x.ndim=%d", op, xq->ndim, x->ndim);
    for (d = 0; d < x->ndim; d++)
        if (xq->shape[d] != x->shape[d])
            return kern__err(KERN_ERR_SHAPE, "%s: xq.shape[%d]=%lld but x.shape[%d]=%lld", op, d,
                             (long long)xq->shape[d], d, (long long)x->shape[d]);
    rows = kern__qg_rows(x);
    k = x->shape[x->ndim - 1];
    nsc = kern_tensor_numel(scales);
    if (nsc != (p.per_tensor ? 1 : rows))
        return kern__err(KERN_ERR_SHAPE, "%s: scales has %lld elements, want %lld (%s)", op,
                         (long long)nsc, (long long)(p.per_tensor ? 1 : rows),
                         p.per_tensor ? "per tensor" : "one per row");
    if (kern__qg_self_overlap(xq) || kern__qg_self_overlap(scales))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s has overlapping elements", op,
                         kern__qg_self_overlap(xq) ? "xq" : "scales");
    if (kern_tensors_overlap(x, xq) || kern_tensors_overlap(x, scales) ||
        kern_tensors_overlap(xq, scales))
        return kern__err(KERN_ERR_ARG, "%s: x, xq and scales must not overlap", op);
    if (p.asymmetric) {
        const kern_tensor *z = p.zero_points;
        if (!z) return kern__err(KERN_ERR_ARG, "%s: asymmetric needs params.zero_points", op);
        st = kern_tensor_check(z, op, "zero_points");
        if (!st) st = kern__qg_nonneg(z, op, "zero_points");
        if (st) return st;
        if (z->dtype != KERN_I32)
            return kern__err(KERN_ERR_DTYPE, "%s: zero_points.dtype=%s, want i32", op,
                             kern_dtype_name(z->dtype));
        if (kern_tensor_numel(z) != nsc)
            return kern__err(KERN_ERR_SHAPE, "%s: zero_points has %lld elements, want %lld", op,
                             (long long)kern_tensor_numel(z), (long long)nsc);
        if (kern__qg_self_overlap(z))
            return kern__err(KERN_ERR_LAYOUT, "%s: zero_points has overlapping elements", op);
        if (kern_tensors_overlap(z, x) || kern_tensors_overlap(z, xq) ||
            kern_tensors_overlap(z, scales))
            return kern__err(KERN_ERR_ARG, "%s: zero_points overlaps another argument", op);
    }
    *rows_out = rows;
    *k_out = k;
    return KERN_OK;
}

/* ~64 KiB of input per task */
static int64_t kern__qg_quant_rows_per_task(int64_t k) { return (65536 / (k > 0 ? k : 1)) + 1; }

/* Scratch: one row of codes per thread; per tensor, the (min, max) pair of
 * every task shared. */
static void kern__qg_quant_scratch(int64_t rows, int64_t k, int per_tensor, size_t *shared,
                                   size_t *thread) {
    int64_t rpt = kern__qg_quant_rows_per_task(k), ntask = (rows + rpt - 1) / rpt;
    *shared = rows > 0 && per_tensor ? (size_t)ntask * 2 * sizeof(float) : 0;
    *thread = rows > 0 ? (size_t)k + 64 : 0;
}

KERN_API kern_status kern_quantize_per_token_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                                            const kern_tensor *xq,
                                                            const kern_tensor *scales,
                                                            const kern_quant_params *params,
                                                            size_t *bytes) {
    const char *op = "kern_quantize_per_token_workspace_size";
    kern_status st;
    int64_t rows, k;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    st = kern__qg_quant_check(op, x, xq, scales, params, &rows, &k);
    if (st) return st;
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    kern__qg_quant_scratch(rows, k, params && params->per_tensor, &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_quantize_per_token(kern_ctx *ctx, const kern_tensor *x,
                                             const kern_tensor *xq, const kern_tensor *scales,
                                             const kern_quant_params *params) {
    const char *op = "kern_quantize_per_token";
    kern_quant_params p;
    kern__qg_qjob jb;
    kern_status st;
    int64_t rows, k, ntask;
    size_t sh, th;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    st = kern__qg_quant_check(op, x, xq, scales, &p, &rows, &k);
    if (st) return st;
    if (rows == 0) {
        if (p.per_tensor) { /* no values: scale 1, zero point 0 */
            ((float *)scales->data)[0] = 1.0f;
            if (p.asymmetric) ((int32_t *)p.zero_points->data)[0] = 0;
        }
        return KERN_OK;
    }
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    kern__qg_quant_scratch(rows, k, p.per_tensor, &sh, &th);
    st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size, sh, th);
    if (st) {
        kern__op_end(ctx);
        return st;
    }
    memset(&jb, 0, sizeof jb);
    jb.ops = kern__qg_get_ops(kern_qgemm_isa_for(ctx));
    jb.ctx = ctx;
    jb.x = x;
    jb.xq = xq;
    jb.scales = scales;
    jb.zp = p.zero_points;
    jb.asym = p.asymmetric != 0;
    jb.rows = rows;
    jb.k = k;
    jb.rows_per_task = kern__qg_quant_rows_per_task(k);
    ntask = (rows + jb.rows_per_task - 1) / jb.rows_per_task;
    st = kern__reserve_thread_scratch(ctx, (size_t)k + 64);
    if (!st && !p.per_tensor) {
        st = kern_parallel_for(ctx, ntask, kern__qg_q_rows_task, &jb);
    } else if (!st) {
        jb.part = (float *)kern__workspace(ctx, (size_t)ntask * 2 * sizeof(float));
        if (!jb.part) st = kern__err(KERN_ERR_NOMEM, "%s: out of memory", op);
        if (!st) st = kern_parallel_for(ctx, ntask, kern__qg_q_minmax_task, &jb);
        if (!st) {
            float lo = 0.0f, hi = 0.0f, s;
            int64_t t;
            for (t = 0; t < ntask; t++) {
                if (jb.part[2 * t] < lo) lo = jb.part[2 * t];
                if (jb.part[2 * t + 1] > hi) hi = jb.part[2 * t + 1];
            }
            kern__qg_qparams(jb.asym, lo, hi, &s, &jb.t_inv, &jb.t_zp);
            ((float *)scales->data)[kern__qg_elem_off(scales, 0)] = s;
            if (jb.asym)
                ((int32_t *)p.zero_points->data)[kern__qg_elem_off(p.zero_points, 0)] = jb.t_zp;
            st = kern_parallel_for(ctx, ntask, kern__qg_q_write_task, &jb);
        }
    }
    kern__op_end(ctx);
    return st;
}

/* ------------------------------------------------------ GEMM driver */

typedef struct kern__qg_gjob {
    kern__qg_ops ops;
    kern_ctx *ctx;
    /* weight side: packed panels */
    const int8_t *bdata;
    const int32_t *colsum;
    int64_t n, k, k4, n_np;
    /* activation side */
    const kern_tensor *x; /* qlinear: f32/bf16 [..., K] */
    const kern_tensor *a, *b, *c; /* s8s8s32 */
    kern__qg_mpan mp;
    int64_t p0, p1, chunk_row0; /* panels of the current chunk */
    char *apack;
    int64_t a_row_bytes;
    float *sx;
    /* blocking */
    int64_t mcp, n_mb, ncp, n_nb;
    kern__qg_epi epi;
    int64_t x_flat;
    int is_int;
    int8_t *bpack_w; /* s8s8s32: writable packed B */
    int32_t *colsum_w;
} kern__qg_gjob;

/* qlinear phase 1: quantize + pack one activation panel */
static void kern__qg_qpack_task(void *arg, int64_t t, int thread) {
    kern__qg_gjob *jb = (kern__qg_gjob *)arg;
    int64_t i = jb->p0 + t, r0 = kern__qg_mpan_row0(&jb->mp, i);
    int mr = kern__qg_mpan_rows(&jb->mp, i), r;
    char *panel = jb->apack + (r0 - jb->chunk_row0) * jb->a_row_bytes;
    int8_t *q = (int8_t *)kern__thread_scratch(jb->ctx, thread);
    const kern_tensor *x = jb->x;
    int64_t esz = (int64_t)kern_dtype_size(x->dtype);
    memset(q + jb->k, 0, (size_t)(jb->k4 * 4 - jb->k));
    for (r = 0; r < mr; r++) {
        int64_t m = r0 + r, bad;
        const char *row = (const char *)x->data + kern__qg_row_off_fast(x, jb->x_flat, m) * esz;
        jb->sx[m - jb->chunk_row0] =
            kern__qg_quant_row_sym(&jb->ops, row, x->dtype, jb->k, 1, q, &bad);
        kern__qg_pack_a_row(jb->ops.a_fmt, q, jb->k4, mr, r, panel);
    }
}

/* s8s8s32 phase 1: pack a weight panel (t < n_np) or an activation panel */
static void kern__qg_pack_ab_task(void *arg, int64_t t, int thread) {
    kern__qg_gjob *jb = (kern__qg_gjob *)arg;
    int8_t *q = (int8_t *)kern__thread_scratch(jb->ctx, thread);
    int64_t kk;
    memset(q, 0, (size_t)(jb->k4 * 4));
    if (t < jb->n_np) {
        const kern_tensor *b = jb->b;
        int8_t *panel = jb->bpack_w + t * jb->k4 * 128;
        int64_t n0 = t * KERN_QGEMM_NR, s0 = b->stride[0], s1 = b->stride[1];
        int nr = (int)(jb->n - n0 < KERN_QGEMM_NR ? jb->n - n0 : KERN_QGEMM_NR), j;
        int32_t sum[KERN_QGEMM_NR];
        memset(panel, 0, (size_t)(jb->k4 * 128));
        memset(sum, 0, sizeof sum);
        if (s1 == 1 || jb->k == 1 || nr == 1 || s0 != 1) {
            /* walk b row by row (row-major [K,N]: each row's 32 bytes are
             * contiguous), scattering into the panel */
            const int8_t *base = (const int8_t *)jb->b->data + n0 * s1;
            for (kk = 0; kk < jb->k; kk++) {
                const int8_t *row = base + kk * s0;
                int8_t *dst = panel + (kk >> 2) * 128 + (kk & 3);
                for (j = 0; j < nr; j++) {
                    int8_t v = row[j * s1];
                    dst[4 * j] = v;
                    sum[j] += v;
                }
            }
        } else {
            /* a transposed view ([N,K] memory): each column is contiguous */
            for (j = 0; j < nr; j++) {
                const int8_t *col = (const int8_t *)b->data + (n0 + j) * s1;
                for (kk = 0; kk < jb->k; kk++) {
                    panel[(kk >> 2) * 128 + 4 * j + (kk & 3)] = col[kk];
                    sum[j] += col[kk];
                }
            }
        }
        for (j = 0; j < nr; j++) jb->colsum_w[n0 + j] = sum[j];
    } else {
        const kern_tensor *a = jb->a;
        int64_t i = t - jb->n_np, r0 = kern__qg_mpan_row0(&jb->mp, i);
        int mr = kern__qg_mpan_rows(&jb->mp, i), r;
        char *panel = jb->apack + r0 * jb->a_row_bytes;
        for (r = 0; r < mr; r++) {
            const int8_t *row = (const int8_t *)a->data + (r0 + r) * a->stride[0];
            for (kk = 0; kk < jb->k; kk++) q[kk] = row[kk * a->stride[1]];
            kern__qg_pack_a_row(jb->ops.a_fmt, q, jb->k4, mr, r, panel);
        }
    }
}

/* phase 2: one (m-block, n-block) tile of the output */
static void kern__qg_gemm_task(void *arg, int64_t t, int thread) {
    kern__qg_gjob *jb = (kern__qg_gjob *)arg;
    int64_t mb = t / jb->n_nb, nb = t % jb->n_nb;
    int64_t pa0 = jb->p0 + mb * jb->mcp, pa1 = pa0 + jb->mcp;
    int64_t pb0 = nb * jb->ncp, pb1 = pb0 + jb->ncp, np, i;
    int32_t *tile = (int32_t *)kern__thread_scratch(jb->ctx, thread);
    if (pa1 > jb->p1) pa1 = jb->p1;
    if (pb1 > jb->n_np) pb1 = jb->n_np;
    for (np = pb0; np < pb1; np++) {
        const int8_t *b = jb->bdata + np * jb->k4 * 128;
        const int8_t *next = np + 1 < pb1 ? b + jb->k4 * 128 : b;
        int64_t n0 = np * KERN_QGEMM_NR;
        int nr = (int)(jb->n - n0 < KERN_QGEMM_NR ? jb->n - n0 : KERN_QGEMM_NR);
        for (i = pa0; i < pa1; i++) {
            int64_t r0 = kern__qg_mpan_row0(&jb->mp, i);
            int mr = kern__qg_mpan_rows(&jb->mp, i);
            const char *a = jb->apack + (r0 - jb->chunk_row0) * jb->a_row_bytes;
            /* the first m-panel reads this weight panel from L3/DRAM:
             * prefetch its own stream 4 KiB ahead (this is all the decode
             * path does); the second pulls the next panel into L2 while
             * the rest reuse this one from L2 */
            const int8_t *pf = i == pa0 ? b + 4096 : i == pa0 + 1 ? next : b;
            jb->ops.ukernel(mr, jb->k4, a, b, tile, pf);
            if (jb->is_int) {
                const kern_tensor *c = jb->c;
                int r, j;
                for (r = 0; r < mr; r++) {
                    int32_t *crow = (int32_t *)c->data + (r0 + r) * c->stride[0];
                    for (j = 0; j < nr; j++) {
                        uint32_t v = (uint32_t)tile[r * KERN_QGEMM_NR + j];
                        if (jb->epi.comp) v -= (uint32_t)jb->colsum[n0 + j] << 7;
                        crow[(n0 + j) * c->stride[1]] = (int32_t)v;
                    }
                }
            } else {
                jb->ops.epi(&jb->epi, tile, mr, r0, jb->sx + (r0 - jb->chunk_row0), n0, nr);
            }
        }
    }
}

/* Blocking: an m-block of up to mcp activation panels (~512 KiB packed, in
 * L2) against an n-block of ncp weight panels; each weight panel is read
 * once per m-block. Enough tasks for dynamic balance when threads > 1. */
static void kern__qg_blocking(kern__qg_gjob *jb, int threads) {
    int64_t npan = jb->p1 - jb->p0, target;
    int64_t mcp = (512 * 1024) / (jb->a_row_bytes * jb->ops.mr_max + 1);
    if (mcp < 1) mcp = 1;
    if (mcp > 16) mcp = 16;
    if (mcp > npan) mcp = npan;
    jb->mcp = mcp;
    jb->n_mb = (npan + mcp - 1) / mcp;
    target = threads > 1 ? 8 * (int64_t)threads : 1;
    jb->n_nb = (target + jb->n_mb - 1) / jb->n_mb;
    if (jb->n_nb > jb->n_np) jb->n_nb = jb->n_np;
    if (jb->n_nb < 1) jb->n_nb = 1;
    jb->ncp = (jb->n_np + jb->n_nb - 1) / jb->n_nb;
    jb->n_nb = (jb->n_np + jb->ncp - 1) / jb->ncp;
}

static kern_status kern__qg_check_2d_int(const kern_tensor *t, kern_dtype dt, const char *op,
                                         const char *name) {
    kern_status st = kern_tensor_check(t, op, name);
    if (st) return st;
    st = kern__qg_nonneg(t, op, name);
    if (st) return st;
    if (t->dtype != dt)
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s, want %s", op, name,
                         kern_dtype_name(t->dtype), kern_dtype_name(dt));
    if (t->ndim != 2)
        return kern__err(KERN_ERR_SHAPE, "%s: %s.ndim=%d, want 2", op, name, t->ndim);
    return KERN_OK;
}

/* Validates kern_gemm_s8s8s32's operands (writes nothing). */
static kern_status kern__qg_s8_check(const char *op, const kern_tensor *a, const kern_tensor *b,
                                     const kern_tensor *c) {
    kern_status st;
    int64_t M, N, K;
    st = kern__qg_check_2d_int(a, KERN_I8, op, "a");
    if (!st) st = kern__qg_check_2d_int(b, KERN_I8, op, "b");
    if (!st) st = kern__qg_check_2d_int(c, KERN_I32, op, "c");
    if (st) return st;
    M = a->shape[0];
    K = a->shape[1];
    N = b->shape[1];
    if (b->shape[0] != K)
        return kern__err(KERN_ERR_SHAPE, "%s: a.shape[1]=%lld but b.shape[0]=%lld", op,
                         (long long)K, (long long)b->shape[0]);
    if (c->shape[0] != M || c->shape[1] != N)
        return kern__err(KERN_ERR_SHAPE, "%s: c.shape=[%lld,%lld], want [%lld,%lld]", op,
                         (long long)c->shape[0], (long long)c->shape[1], (long long)M,
                         (long long)N);
    if (K > KERN_QGEMM_MAX_K)
        return kern__err(KERN_ERR_SHAPE,
                         "%s: K=%lld exceeds KERN_QGEMM_MAX_K=%d (int32 could overflow)", op,
                         (long long)K, KERN_QGEMM_MAX_K);
    if (kern__qg_self_overlap(c))
        return kern__err(KERN_ERR_LAYOUT, "%s: c has overlapping elements (a zero stride?)", op);
    if (kern_tensors_overlap(c, a) || kern_tensors_overlap(c, b))
        return kern__err(KERN_ERR_ARG, "%s: c overlaps %s", op,
                         kern_tensors_overlap(c, a) ? "a" : "b");
    return KERN_OK;
}

/* Scratch of kern_gemm_s8s8s32 on the path `ops`: the packed B, its column
 * sums and the packed A shared; per thread the larger of a row of codes and
 * an int32 tile. */
static void kern__qg_s8_scratch(const kern__qg_ops *ops, int64_t M, int64_t N, int64_t K,
                                size_t *shared, size_t *thread) {
    int64_t k4 = (K + 3) / 4, n_np = (N + KERN_QGEMM_NR - 1) / KERN_QGEMM_NR;
    int64_t a_row_bytes = k4 * 4 * kern__qg_a_bytes(ops->a_fmt);
    size_t s1 = (size_t)(k4 * 4 + 64), s2 = (size_t)ops->mr_max * KERN_QGEMM_NR * 4 + 64;
    if (M == 0 || N == 0) {
        *shared = *thread = 0;
        return;
    }
    *shared = kern__qg_round64((size_t)(n_np * k4 * 128)) + kern__qg_round64((size_t)N * 4) +
              kern__qg_round64((size_t)(M * a_row_bytes)) + 64;
    *thread = s1 > s2 ? s1 : s2;
}

KERN_API kern_status kern_gemm_s8s8s32_workspace_size(kern_ctx *ctx, const kern_tensor *a,
                                                      const kern_tensor *b,
                                                      const kern_tensor *c, size_t *bytes) {
    const char *op = "kern_gemm_s8s8s32_workspace_size";
    kern_status st;
    kern__qg_ops ops;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    st = kern__qg_s8_check(op, a, b, c);
    if (st) return st;
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    ops = kern__qg_get_ops(kern_qgemm_isa_for(ctx));
    kern__qg_s8_scratch(&ops, a->shape[0], b->shape[1], a->shape[1], &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

KERN_API kern_status kern_gemm_s8s8s32(kern_ctx *ctx, const kern_tensor *a,
                                       const kern_tensor *b, const kern_tensor *c,
                                       const kern_gemm_s8s8s32_params *params) {
    const char *op = "kern_gemm_s8s8s32";
    kern__qg_gjob jb;
    kern_status st;
    int64_t M, N, K, bbytes, abytes, cbytes;
    size_t sh, th;
    char *ws;
    st = kern__qg_s8_check(op, a, b, c);
    if (st) return st;
    M = a->shape[0];
    K = a->shape[1];
    N = b->shape[1];
    if (M == 0 || N == 0) return KERN_OK;
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    memset(&jb, 0, sizeof jb);
    jb.ops = kern__qg_get_ops(kern_qgemm_isa_for(ctx));
    kern__qg_s8_scratch(&jb.ops, M, N, K, &sh, &th);
    st = kern__op_workspace(ctx, op, params ? params->workspace : NULL,
                            params ? params->workspace_size : 0, sh, th);
    if (st) {
        kern__op_end(ctx);
        return st;
    }
    jb.ctx = ctx;
    jb.a = a;
    jb.b = b;
    jb.c = c;
    jb.n = N;
    jb.k = K;
    jb.k4 = (K + 3) / 4;
    jb.n_np = (N + KERN_QGEMM_NR - 1) / KERN_QGEMM_NR;
    jb.mp = kern__qg_mpan_make(M, jb.ops.mr_max);
    jb.p0 = 0;
    jb.p1 = jb.mp.n;
    jb.a_row_bytes = jb.k4 * 4 * kern__qg_a_bytes(jb.ops.a_fmt);
    jb.is_int = 1;
    jb.epi.comp = jb.ops.a_fmt == KERN__QG_A_U8;
    bbytes = (int64_t)kern__qg_round64((size_t)(jb.n_np * jb.k4 * 128));
    cbytes = (int64_t)kern__qg_round64((size_t)N * 4);
    abytes = (int64_t)kern__qg_round64((size_t)(M * jb.a_row_bytes));
    ws = (char *)kern__workspace(ctx, (size_t)(bbytes + cbytes + abytes + 64));
    if (!ws) {
        kern__op_end(ctx);
        return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %lld bytes of workspace", op,
                         (long long)(bbytes + cbytes + abytes));
    }
    jb.bpack_w = (int8_t *)ws;
    jb.bdata = jb.bpack_w;
    jb.colsum_w = (int32_t *)(ws + bbytes);
    jb.colsum = jb.colsum_w;
    jb.epi.colsum = jb.colsum;
    jb.apack = ws + bbytes + cbytes;
    {
        size_t s1 = (size_t)(jb.k4 * 4 + 64);
        size_t s2 = (size_t)jb.ops.mr_max * KERN_QGEMM_NR * 4 + 64;
        st = kern__reserve_thread_scratch(ctx, s1 > s2 ? s1 : s2);
    }
    if (!st) st = kern_parallel_for(ctx, jb.n_np + jb.mp.n, kern__qg_pack_ab_task, &jb);
    if (!st) {
        kern__qg_blocking(&jb, kern_ctx_threads(ctx));
        st = kern_parallel_for(ctx, jb.n_mb * jb.n_nb, kern__qg_gemm_task, &jb);
    }
    kern__op_end(ctx);
    return st;
}

static kern_status kern__qg_check_act(const kern_tensor *t, const char *op, const char *name) {
    kern_status st = kern_tensor_check(t, op, name);
    if (st) return st;
    st = kern__qg_nonneg(t, op, name);
    if (st) return st;
    if (t->dtype != KERN_F32 && t->dtype != KERN_BF16)
        return kern__err(KERN_ERR_DTYPE, "%s: %s.dtype=%s, want f32 or bf16", op, name,
                         kern_dtype_name(t->dtype));
    if (t->ndim < 1)
        return kern__err(KERN_ERR_SHAPE, "%s: %s.ndim=0, want [..., features]", op, name);
    if (!kern_tensor_last_dim_unit(t))
        return kern__err(KERN_ERR_LAYOUT, "%s: %s.stride[%d]=%lld, the last dim must be unit stride",
                         op, name, t->ndim - 1, (long long)t->stride[t->ndim - 1]);
    return KERN_OK;
}

/* Validates kern_qlinear's operands except the packed path (writes
 * nothing). */
static kern_status kern__qg_qlinear_check(const char *op, const kern_tensor *x,
                                          const kern_qweight *qw, const kern_tensor *y,
                                          const kern_qlinear_params *pp) {
    kern_qlinear_params p;
    const kern_tensor *bias;
    kern_status st;
    int64_t N, K;
    int d;
    if (pp) p = *pp;
    else memset(&p, 0, sizeof p);
    bias = p.epilogue.bias;
    if (!qw) return kern__err(KERN_ERR_ARG, "%s: qw is NULL", op);
    if (qw->version != KERN_QWEIGHT_VERSION)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: qw has format version %u, want %u", op,
                         qw->version, KERN_QWEIGHT_VERSION);
    if (qw->n < 1 || qw->k < 1 || qw->k > KERN_QGEMM_MAX_K || !qw->data || !qw->scales ||
        !qw->colsum)
        return kern__err(KERN_ERR_ARG, "%s: qw is not a valid packed weight (N=%lld, K=%lld)",
                         op, (long long)qw->n, (long long)qw->k);
    st = kern__qg_check_act(x, op, "x");
    if (!st) st = kern__qg_check_act(y, op, "y");
    if (st) return st;
    K = x->shape[x->ndim - 1];
    N = y->shape[y->ndim - 1];
    if (K != qw->k)
        return kern__err(KERN_ERR_SHAPE, "%s: x.shape[%d]=%lld but qw.k=%lld", op, x->ndim - 1,
                         (long long)K, (long long)qw->k);
    if (N != qw->n)
        return kern__err(KERN_ERR_SHAPE, "%s: y.shape[%d]=%lld but qw.n=%lld", op, y->ndim - 1,
                         (long long)N, (long long)qw->n);
    if (y->ndim != x->ndim)
        return kern__err(KERN_ERR_SHAPE, "%s: y.ndim=%d but x.ndim=%d", op, y->ndim, x->ndim);
    for (d = 0; d < x->ndim - 1; d++)
        if (y->shape[d] != x->shape[d])
            return kern__err(KERN_ERR_SHAPE, "%s: y.shape[%d]=%lld but x.shape[%d]=%lld", op, d,
                             (long long)y->shape[d], d, (long long)x->shape[d]);
    if (kern__qg_self_overlap(y))
        return kern__err(KERN_ERR_LAYOUT, "%s: y has overlapping elements (a zero stride?)", op);
    if (kern_tensors_overlap(x, y))
        return kern__err(KERN_ERR_ARG, "%s: y overlaps x", op);
    st = kern__epilogue_check(&p.epilogue, op,
                              1u << KERN_ACT_NONE | 1u << KERN_ACT_GELU | 1u << KERN_ACT_GELU_TANH,
                              0, 0);
    if (st) return st;
    if (bias) {
        st = kern_tensor_check(bias, op, "bias");
        if (!st) st = kern__qg_nonneg(bias, op, "bias");
        if (st) return st;
        if (bias->dtype != KERN_F32 && bias->dtype != KERN_BF16)
            return kern__err(KERN_ERR_DTYPE, "%s: bias.dtype=%s, want f32 or bf16", op,
                             kern_dtype_name(bias->dtype));
        if (bias->ndim != 1 || bias->shape[0] != N)
            return kern__err(KERN_ERR_SHAPE, "%s: bias must be [%lld]", op, (long long)N);
        if (kern_tensors_overlap(bias, y))
            return kern__err(KERN_ERR_ARG, "%s: bias overlaps y", op);
    }
    if (p.epilogue.residual) {
        const kern_tensor *r = p.epilogue.residual;
        st = kern__qg_check_act(r, op, "residual");
        if (st) return st;
        if (r->ndim != y->ndim)
            return kern__err(KERN_ERR_SHAPE, "%s: residual.ndim=%d but y.ndim=%d", op, r->ndim,
                             y->ndim);
        for (d = 0; d < y->ndim; d++)
            if (r->shape[d] != y->shape[d])
                return kern__err(KERN_ERR_SHAPE, "%s: residual.shape[%d]=%lld but y.shape[%d]=%lld",
                                 op, d, (long long)r->shape[d], d, (long long)y->shape[d]);
        if (kern_tensors_overlap(r, y) && !kern__qg_same_view(r, y))
            return kern__err(KERN_ERR_ARG,
                             "%s: residual overlaps y without being exactly y", op);
    }
    return KERN_OK;
}

/* Rows of x quantized and packed per chunk (at most ~16 MiB of packed
 * activations): whole panels of the path's tile height. */
static int64_t kern__qg_qlinear_chunk_panels(const kern__qg_ops *ops, int64_t a_row_bytes,
                                             int64_t n_mpanels) {
    int64_t max_rows = KERN__QG_CHUNK_BYTES / a_row_bytes, chunk_panels;
    chunk_panels = max_rows / ops->mr_max;
    if (chunk_panels < 1) chunk_panels = 1;
    if (chunk_panels > n_mpanels) chunk_panels = n_mpanels;
    return chunk_panels;
}

/* Scratch of kern_qlinear on the path `ops`: one chunk of packed
 * activations and their scales, the bias as f32 shared; per thread the
 * larger of a row of codes and an int32 tile. */
static void kern__qg_qlinear_scratch(const kern__qg_ops *ops, int64_t M, int64_t N, int64_t K,
                                     int has_bias, size_t *shared, size_t *thread) {
    int64_t k4 = (K + 3) / 4, a_row_bytes = k4 * 4 * kern__qg_a_bytes(ops->a_fmt), max_rows;
    kern__qg_mpan mp;
    size_t s1 = (size_t)(k4 * 4 + 64), s2 = (size_t)ops->mr_max * KERN_QGEMM_NR * 4 + 64;
    if (M == 0) {
        *shared = *thread = 0;
        return;
    }
    mp = kern__qg_mpan_make(M, ops->mr_max);
    max_rows = (int64_t)ops->mr_max * kern__qg_qlinear_chunk_panels(ops, a_row_bytes, mp.n);
    *shared = kern__qg_round64((size_t)(max_rows * a_row_bytes)) +
              kern__qg_round64((size_t)max_rows * 4) +
              (has_bias ? kern__qg_round64((size_t)N * 4) : 0);
    *thread = s1 > s2 ? s1 : s2;
}

/* The packed weight must be for the path ctx selects. */
static kern_status kern__qg_qlinear_isa(const char *op, const kern_ctx *ctx,
                                        const kern_qweight *qw) {
    kern_qgemm_isa want = kern_qgemm_isa_for(ctx);
    if (qw->isa != want)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: qw was packed for %s but the context selects %s; repack it", op,
                         kern_qgemm_isa_name(qw->isa), kern_qgemm_isa_name(want));
    return KERN_OK;
}

KERN_API kern_status kern_qlinear_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                                 const kern_qweight *qw, const kern_tensor *y,
                                                 const kern_qlinear_params *params,
                                                 size_t *bytes) {
    const char *op = "kern_qlinear_workspace_size";
    kern_status st;
    kern__qg_ops ops;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    st = kern__qg_qlinear_check(op, x, qw, y, params);
    if (st) return st;
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    st = kern__qg_qlinear_isa(op, ctx, qw);
    if (!st) {
        ops = kern__qg_get_ops(qw->isa);
        kern__qg_qlinear_scratch(&ops, kern__qg_rows(x), qw->n, qw->k,
                                 params && params->epilogue.bias, &sh, &th);
        *bytes = kern__op_workspace_bytes(ctx, sh, th);
    }
    kern__op_end(ctx);
    return st;
}

KERN_API void kern_qlinear_params_defaults(kern_qlinear_params *p) {
    if (p) kern_epilogue_defaults(&p->epilogue);
}

KERN_API kern_status kern_qlinear(kern_ctx *ctx, const kern_tensor *x, const kern_qweight *qw,
                                  const kern_tensor *y, const kern_qlinear_params *params) {
    const char *op = "kern_qlinear";
    kern_qlinear_params p;
    kern__qg_gjob jb;
    kern_status st;
    kern_qgemm_isa want;
    int64_t M, N, K, chunk_panels, max_rows, abytes, sbytes, wbytes;
    const kern_tensor *bias;
    char *ws;
    float *bias32 = NULL;
    size_t sh, th;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    bias = p.epilogue.bias;
    st = kern__qg_qlinear_check(op, x, qw, y, &p);
    if (st) return st;
    K = x->shape[x->ndim - 1];
    N = y->shape[y->ndim - 1];
    M = kern__qg_rows(x);
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    st = kern__qg_qlinear_isa(op, ctx, qw);
    if (st) {
        kern__op_end(ctx);
        return st;
    }
    want = qw->isa;
    if (M == 0) {
        kern__op_end(ctx);
        return KERN_OK;
    }
    memset(&jb, 0, sizeof jb);
    jb.ops = kern__qg_get_ops(want);
    kern__qg_qlinear_scratch(&jb.ops, M, N, K, bias != NULL, &sh, &th);
    st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size, sh, th);
    if (st) {
        kern__op_end(ctx);
        return st;
    }
    jb.ctx = ctx;
    jb.x = x;
    jb.bdata = qw->data;
    jb.colsum = qw->colsum;
    jb.n = N;
    jb.k = K;
    jb.k4 = qw->k4;
    jb.n_np = qw->n_panels;
    jb.mp = kern__qg_mpan_make(M, jb.ops.mr_max);
    jb.a_row_bytes = jb.k4 * 4 * kern__qg_a_bytes(jb.ops.a_fmt);
    /* x is quantized and packed in chunks of at most ~16 MiB of packed
     * activations; each chunk is two parallel phases (quantize-pack, GEMM) */
    chunk_panels = kern__qg_qlinear_chunk_panels(&jb.ops, jb.a_row_bytes, jb.mp.n);
    max_rows = (int64_t)jb.ops.mr_max * chunk_panels;
    abytes = (int64_t)kern__qg_round64((size_t)(max_rows * jb.a_row_bytes));
    sbytes = (int64_t)kern__qg_round64((size_t)max_rows * 4);
    wbytes = bias ? (int64_t)kern__qg_round64((size_t)N * 4) : 0;
    ws = (char *)kern__workspace(ctx, (size_t)(abytes + sbytes + wbytes));
    if (!ws) {
        kern__op_end(ctx);
        return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %lld bytes of workspace", op,
                         (long long)(abytes + sbytes + wbytes));
    }
    jb.apack = ws;
    jb.sx = (float *)(ws + abytes);
    if (bias) {
        int64_t n;
        bias32 = (float *)(ws + abytes + sbytes);
        for (n = 0; n < N; n++) bias32[n] = kern__qg_load_f(bias->data, bias->dtype, n * bias->stride[0]);
    }
    jb.epi.sw = qw->scales;
    jb.epi.colsum = qw->colsum;
    jb.epi.comp = jb.ops.a_fmt == KERN__QG_A_U8;
    jb.epi.bias = bias32;
    jb.epi.act = (int)p.epilogue.act;
    jb.epi.y = y;
    jb.epi.res = p.epilogue.residual;
    jb.epi.n = N;
    jb.epi.y_flat = kern__qg_flat_rows(y);
    jb.epi.res_flat = p.epilogue.residual ? kern__qg_flat_rows(p.epilogue.residual) : 0;
    jb.x_flat = kern__qg_flat_rows(x);
    {
        size_t s1 = (size_t)(jb.k4 * 4 + 64);
        size_t s2 = (size_t)jb.ops.mr_max * KERN_QGEMM_NR * 4 + 64;
        st = kern__reserve_thread_scratch(ctx, s1 > s2 ? s1 : s2);
    }
    for (jb.p0 = 0; !st && jb.p0 < jb.mp.n; jb.p0 = jb.p1) {
        jb.p1 = jb.p0 + chunk_panels;
        if (jb.p1 > jb.mp.n) jb.p1 = jb.mp.n;
        jb.chunk_row0 = kern__qg_mpan_row0(&jb.mp, jb.p0);
        st = kern_parallel_for(ctx, jb.p1 - jb.p0, kern__qg_qpack_task, &jb);
        if (!st) {
            kern__qg_blocking(&jb, kern_ctx_threads(ctx));
            st = kern_parallel_for(ctx, jb.n_mb * jb.n_nb, kern__qg_gemm_task, &jb);
        }
    }
    kern__op_end(ctx);
    return st;
}

#ifdef __cplusplus
}
#endif
KERN__IMPL_DIAG_END
#endif /* KERN_IMPLEMENTATION */
