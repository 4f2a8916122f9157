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
 *       y[m,n] = out_scale * (act(acc[m,n] * s_x[m] * s_w[n] + bias) + residual[m,n])
 *   in f32 (params.epilogue: kern_base.h's kern_epilogue and its one
 *   implementation, kern__epi: any kern_act, bias [N] or per row [M],
 *   residual, out_scale), stored as f32 or bf16. The activations are the
 *   shared math layer's, so the fused result has the bits of the unfused
 *   ops (tested on every ISA level). This is
 *   torch.ao.nn.quantized.dynamic.Linear / torchao's
 *   int8_dynamic_activation_int8_weight numerics with symmetric per-token
 *   activations (torch's quantize_per_tensor_dynamic uses an asymmetric u8
 *   activation instead; kern_quantize_per_token offers that as an option).
 *
 * Quantization rule (kern_base.h's one int8 rule, kern__quant_scale and
 * kern__v_quant_row; bit-exact on every path, f32 arithmetic):
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
 *   Or b packed once (kern_gemm_s8s8s32_pack_b, the same panels and column
 *   sums, no scales) and passed as params.packed_b with b = NULL.
 *
 * ISA paths: one function table per ISA level (kern_ctx_isa), holding the
 *   int8 path below and the level's row helpers (quantize, dequantize,
 *   epilogue); kern_qgemm_isa_for(ctx) tells the int8 path a context runs:
 *     level           int8 path     row helpers
 *     SCALAR          scalar        scalar
 *     AVX2            AVX2          AVX2
 *     AVX2_VNNI       AVX-VNNI      AVX2
 *     AVX512          AVX2          AVX-512 (no int8 dot product without VNNI)
 *     AVX512_VNNI     AVX-512 VNNI  AVX-512 (AVX512_BF16: the same)
 *     NEON            scalar        NEON
 *     NEON_DOT        NEON sdot     NEON (NEON_BF16: the same)
 *   AVX-512 VNNI  vpdpbusd zmm, 14x32 tiles. vpdpbusd multiplies u8 by s8,
 *                 so activations are stored as q + 128 (u8) and the epilogue
 *                 subtracts 128 * colsum[n] (wrapping int32: exact).
 *   AVX-VNNI      the same with VEX ymm vpdpbusd, 6x32 tiles in two
 *                 16-column halves (compiled on every x86 build; runs where
 *                 the CPU has AVX-VNNI).
 *   AVX2          vpmaddubsw on sign-magnitude activations, 2x32 tiles:
 *                 a is packed as |q| (u8) and its sign as a byte mask m, and
 *                 the kernel multiplies |q| by w ^ m (= w, or -w - 1 where
 *                 q < 0) and adds sum over negative q of |q| per row (stored
 *                 with the panel): exact. |q| <= 128 and w ^ m in [-128,
 *                 127] keep every int16 pair sum in [-32768, 32512], so
 *                 vpmaddubsw never saturates, for any s8 inputs: no
 *                 condition on -128 and no fallback. vpmaddwd by ones then
 *                 sums the pairs into int32. (The former kernel, int16
 *                 widening + vpmaddwd, stays for the tests.)
 *   NEON sdot     s8 x s8, 4x32 tiles, one row at a time; built in every
 *                 AArch64 build with GCC >= 10 (a target attribute) or with
 *                 __ARM_FEATURE_DOTPROD (clang), run on the NEON_DOT level.
 *   scalar        portable C, always built.
 *   The microkernels are hand-written per ISA: each is a different tile and
 *   instruction mix (the two VNNI ones differ in register budget, 14 rows x
 *   2 zmm against 6 rows x 2 ymm in two column halves). Everything else
 *   per ISA is written once: the dequantization of a tile and the u8 range
 *   in gen/templates/kern_qgemm.c.in (the generated region below), the
 *   quantization rule, the epilogue and the activations in kern_base.h.
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
 *                      corrupt serialized buffer, overlapping in/out views,
 *                      b given together with params.packed_b
 *   KERN_ERR_SHAPE     K mismatch between x and the packed weight, y/bias/
 *                      residual shapes, K > KERN_QGEMM_MAX_K
 *   KERN_ERR_DTYPE     unsupported dtypes
 *   KERN_ERR_LAYOUT    last dim not unit stride (x, y, residual), negative
 *                      strides, self-overlapping outputs
 *   KERN_ERR_UNSUPPORTED a packed weight from another ISA path or format
 *                      version (detected by its tag)
 *   A caller workspace (params.workspace) smaller than the op's
 *   _workspace_size is KERN_ERR_ARG.
 *
 * Handles and params
 *   kern_qweight is opaque: kern_qweight_get_info gives N, K, the path it
 *   was packed for, the format version and its bytes. Pack, then free:
 *   kern_qweight_pack(ctx, w, &qw, params) ... kern_qweight_free(ctx, qw).
 *   kern_qweight_params_defaults(ctx, &p) resolves isa 0 to the context's
 *   path; kern_qlinear_params_defaults resolves epilogue.out_scale.
 *   kern_gemm_s8s8s32_packed_b is opaque too (the same lifetime:
 *   kern_gemm_s8s8s32_pack_b(ctx, b, &pb, params) ... _packed_b_get_info ...
 *   kern_gemm_s8s8s32_packed_b_free(ctx, pb)); its layout does not depend on
 *   the ISA, so any context uses it.
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

/* Opaque prepacked b of kern_gemm_s8s8s32 (kern_gemm_s8s8s32_pack_b). */
typedef struct kern_gemm_s8s8s32_packed_b kern_gemm_s8s8s32_packed_b;

/* Options of kern_gemm_s8s8s32; NULL or zero = defaults (every field's
 * zero is its own default: nothing to resolve). */
typedef struct kern_gemm_s8s8s32_params {
    const kern_gemm_s8s8s32_packed_b *packed_b; /* with b = NULL: b packed once */
    void *workspace;       /* optional caller scratch of at least */
    size_t workspace_size; /* kern_gemm_s8s8s32_workspace_size() bytes */
} kern_gemm_s8s8s32_params;

/* Options of kern_gemm_s8s8s32_pack_b; zero = defaults. */
typedef struct kern_gemm_s8s8s32_pack_params {
    int trans_b; /* nonzero: b is [N, K] (a torch Linear weight) */
} kern_gemm_s8s8s32_pack_params;

/* What kern_gemm_s8s8s32_packed_b_get_info reports. */
typedef struct kern_gemm_s8s8s32_packed_b_info {
    int64_t k, n;      /* the logical b is [K, N] */
    size_t data_bytes; /* the panels: ceil(N/32) ceil(K/4) 128 */
    size_t bytes;      /* memory held, handle included */
    /* The panel layout does not depend on the ISA: any context (any ISA
     * level, any thread count) can use the handle. */
} kern_gemm_s8s8s32_packed_b_info;

/* c = a . b exactly in int32 (torch._int_mm): a [M,K] i8, b [K,N] i8,
 * c [M,N] i32. K <= KERN_QGEMM_MAX_K. params may be NULL. With
 * params->packed_b, b must be NULL and the packed b is used: only a is
 * packed per call (the small-M case, where packing b cost as much as the
 * product). */
KERN_API kern_status kern_gemm_s8s8s32(kern_ctx *ctx, const kern_tensor *a,
                                       const kern_tensor *b, const kern_tensor *c,
                                       const kern_gemm_s8s8s32_params *params);
/* Scratch bytes kern_gemm_s8s8s32 takes on this context (validates like
 * it; params->workspace is ignored, params->packed_b counts). */
KERN_API kern_status kern_gemm_s8s8s32_workspace_size(kern_ctx *ctx, const kern_tensor *a,
                                                      const kern_tensor *b,
                                                      const kern_tensor *c,
                                                      const kern_gemm_s8s8s32_params *params,
                                                      size_t *bytes);
/* Packs b ([K,N], or [N,K] with params->trans_b; i8, any non-negative
 * strides, 1 <= K <= KERN_QGEMM_MAX_K, N >= 1) once into the panels
 * kern_gemm_s8s8s32 streams, with its column sums. *out is allocated with
 * the context's allocator and written only on success; params may be
 * NULL. */
KERN_API kern_status kern_gemm_s8s8s32_pack_b(kern_ctx *ctx, const kern_tensor *b,
                                              kern_gemm_s8s8s32_packed_b **out,
                                              const kern_gemm_s8s8s32_pack_params *params);
/* Frees a packed b (NULL is ignored) with the allocator of ctx (NULL = the
 * default context): pass a context with the allocator that packed it. */
KERN_API void kern_gemm_s8s8s32_packed_b_free(kern_ctx *ctx, kern_gemm_s8s8s32_packed_b *p);
/* Shape and bytes of a packed b. */
KERN_API kern_status kern_gemm_s8s8s32_packed_b_get_info(const kern_gemm_s8s8s32_packed_b *p,
                                                        kern_gemm_s8s8s32_packed_b_info *out);

typedef struct kern_qlinear_params {
    /* kern_base.h's epilogue: bias f32/bf16 (any stride) [N], or [M] (one
     * per row of y, rows = its leading dims flattened) with bias_per_row;
     * any kern_act; residual of y's shape, f32/bf16, may be y itself;
     * out_scale (0 = 1). glu: qw packs a [2F, K] weight in kern_glu_pack's
     * order (gate and up interleaved; a bias [2F] too) and y is [.., F] =
     * act(gate) * up: SwiGLU as one int8 GEMM, x quantized once. */
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

/* A prepacked b of kern_gemm_s8s8s32 (opaque in the public half): the
 * weight panel layout of kern_qweight, without scales or ISA tag. */
struct kern_gemm_s8s8s32_packed_b {
    int64_t k, n;      /* the logical b is [K, N] */
    int64_t k4;        /* ceil(K / 4) */
    int64_t n_panels;  /* ceil(N / 32) */
    int32_t *colsum;   /* [N] sum over k of b[k, n] */
    int8_t *data;      /* n_panels * k4 * 128 bytes, 64-byte aligned */
    size_t data_bytes, bytes;
};

#include <float.h>
#ifdef KERN_X86
#include <immintrin.h>
#endif
#if defined(KERN_NEON)
#include <arm_neon.h>
#if defined(__ARM_FEATURE_DOTPROD)
#define KERN__QG_NEON_DOT 1
#define KERN__QG_TARGET_DOT
#elif defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
/* GCC's arm_neon.h declares sdot under a target pragma, so a function with
 * that target builds in any AArch64 build and runs on the NEON_DOT level
 * (clang declares it only when the whole build has dotprod) */
#define KERN__QG_NEON_DOT 1
#define KERN__QG_TARGET_DOT __attribute__((target("arch=armv8.2-a+dotprod")))
#endif
#endif

#if defined(__GNUC__) || defined(__clang__)
#define KERN__QG_INLINE static inline __attribute__((always_inline))
/* Keeps a vector in a register at this point: without it GCC hoists the
 * independent products of a microkernel step ahead of the accumulations
 * and spills accumulators to the stack. */
#define KERN__QG_PIN(v) __asm__("" : "+x"(v));
#else
#define KERN__QG_INLINE static inline
#define KERN__QG_PIN(v)
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KERN__QG_MAGIC "KQW8"
#define KERN__QG_HDR 40
/* A quantize-pack chunk of x stays below this many packed bytes. */
#define KERN__QG_CHUNK_BYTES ((int64_t)16 << 20)

static inline int kern__qg_isfinite(float v) {
    return (kern__f32_bits(v) & 0x7fffffffu) < 0x7f800000u;
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

/* ------------------------------------------------- per-ISA row helpers
 * The dequantization of an int32 tile and the asymmetric range, written
 * once in gen/templates/kern_qgemm.c.in (the quantization rule itself and
 * the epilogue are kern_base.h's). */
/* BEGIN GENERATED kern_tmpl.py: kern_qgemm isa=scalar,avx2,avx512,neon — do not edit */
/* ---- scalar ---- */

/* f32 accumulators of the top-left mr x nr corner of an int32 tile c (row
 * stride KERN_QGEMM_NR): t[r][j] = (float)(c[r][j] - comp * 128 colsum[j])
 * * sx[r] * sw[j], rounded in that order. The subtraction wraps in int32,
 * which is exact (the u8 + 128 activations of the VNNI paths; see the K
 * bound). sw and colsum start at the tile's first column; nothing past
 * column nr of them is read. A full tile (nr = KERN_QGEMM_NR, a constant
 * after inlining) runs without tail checks. */
KERN__AINLINE void kern__s_qg_dequant_core(const int32_t *c, int mr, int nr, const float *sx,
                                                        const float *sw, const int32_t *colsum, int comp,
                                                        float *t) {
    int r, j;
    for (r = 0; r < mr; r++) {
        const float vs = (sx[r]);
        const int32_t *cr = c + r * KERN_QGEMM_NR;
        float *tr = t + r * KERN_QGEMM_NR;
        for (j = 0; j < nr; j += 1) {
            const int nn = nr - j < 1 ? nr - j : 1;
            int32_t a = nn == 1 ? (*(const int32_t *)(cr + j)) : (*(const int32_t *)(cr + j));
            float v;
            if (comp) a = kern__s_isub(a, kern__s_ishl(nn == 1 ? (*(const int32_t *)(colsum + j)) : (*(const int32_t *)(colsum + j)), 7));
            v = kern__s_mul(((float)(a)), vs);
            v = kern__s_mul(v, nn == 1 ? (*(const float *)(sw + j)) : (*(const float *)(sw + j)));
            if (nn == 1) (*(float *)(tr + j) = (v));
            else (*(float *)(tr + j) = (v));
        }
    }
}
static inline void kern__s_qg_dequant(const int32_t *c, int mr, int nr, const float *sx,
                                                   const float *sw, const int32_t *colsum, int comp,
                                                   float *t) {
    if (nr == KERN_QGEMM_NR) kern__s_qg_dequant_core(c, mr, KERN_QGEMM_NR, sx, sw, colsum, comp, t);
    else kern__s_qg_dequant_core(c, mr, nr, sx, sw, colsum, comp, t);
}

/* min(0, finite values) and max(0, finite values) of n contiguous elements
 * (the range of kern_base.h's asymmetric u8 rule); *nonfinite gets the
 * count of the others. Exact on every ISA. */
static inline void kern__s_qg_minmax(const void *x, kern_dtype dt, int64_t n, float *mn, float *mx,
                                                  int64_t *nonfinite) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    float lo = 0.0f, hi = 0.0f;
    int64_t bad = 0, i;
    for (i = 0; i < n; i += 1) {
        const int nn = n - i < 1 ? (int)(n - i) : 1;
        float v = kern__s_load_f32(p + i * es, dt, nn);
        int fin = ((kern__s_abs(v)) < ((INFINITY)));
        v = ((fin) ? (v) : (0.0f));
        lo = kern__s_min(lo, v);
        hi = kern__s_max(hi, v);
        if (!(fin)) bad += ((!(fin))); /* lanes past nn load as 0 */
    }
    *mn = -((-(lo)));
    *mx = (hi);
    *nonfinite = bad;
}
#ifdef KERN_X86
/* ---- avx2 ---- */

/* f32 accumulators of the top-left mr x nr corner of an int32 tile c (row
 * stride KERN_QGEMM_NR): t[r][j] = (float)(c[r][j] - comp * 128 colsum[j])
 * * sx[r] * sw[j], rounded in that order. The subtraction wraps in int32,
 * which is exact (the u8 + 128 activations of the VNNI paths; see the K
 * bound). sw and colsum start at the tile's first column; nothing past
 * column nr of them is read. A full tile (nr = KERN_QGEMM_NR, a constant
 * after inlining) runs without tail checks. */
KERN_TARGET_AVX2 KERN__AINLINE void kern__v_qg_dequant_core__avx2(const int32_t *c, int mr, int nr, const float *sx,
                                                        const float *sw, const int32_t *colsum, int comp,
                                                        float *t) {
    int r, j;
    for (r = 0; r < mr; r++) {
        const __m256 vs = _mm256_set1_ps(sx[r]);
        const int32_t *cr = c + r * KERN_QGEMM_NR;
        float *tr = t + r * KERN_QGEMM_NR;
        for (j = 0; j < nr; j += 8) {
            const int nn = nr - j < 8 ? nr - j : 8;
            __m256i a = nn == 8 ? _mm256_loadu_si256((const __m256i *)(const void *)(cr + j)) : _mm256_maskload_epi32((const int *)(const void *)(cr + j), kern__tailmask__avx2(nn));
            __m256 v;
            if (comp) a = _mm256_sub_epi32(a, _mm256_slli_epi32(nn == 8 ? _mm256_loadu_si256((const __m256i *)(const void *)(colsum + j)) : _mm256_maskload_epi32((const int *)(const void *)(colsum + j), kern__tailmask__avx2(nn)), 7));
            v = kern__mul__avx2(_mm256_cvtepi32_ps(a), vs);
            v = kern__mul__avx2(v, nn == 8 ? _mm256_loadu_ps(sw + j) : kern__loadn__avx2(sw + j, nn));
            if (nn == 8) _mm256_storeu_ps(tr + j, v);
            else kern__storen__avx2(tr + j, v, nn);
        }
    }
}
KERN_TARGET_AVX2 static inline void kern__v_qg_dequant__avx2(const int32_t *c, int mr, int nr, const float *sx,
                                                   const float *sw, const int32_t *colsum, int comp,
                                                   float *t) {
    if (nr == KERN_QGEMM_NR) kern__v_qg_dequant_core__avx2(c, mr, KERN_QGEMM_NR, sx, sw, colsum, comp, t);
    else kern__v_qg_dequant_core__avx2(c, mr, nr, sx, sw, colsum, comp, t);
}

/* min(0, finite values) and max(0, finite values) of n contiguous elements
 * (the range of kern_base.h's asymmetric u8 rule); *nonfinite gets the
 * count of the others. Exact on every ISA. */
KERN_TARGET_AVX2 static inline void kern__v_qg_minmax__avx2(const void *x, kern_dtype dt, int64_t n, float *mn, float *mx,
                                                  int64_t *nonfinite) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    int64_t bad = 0, i;
    for (i = 0; i < n; i += 8) {
        const int nn = n - i < 8 ? (int)(n - i) : 8;
        __m256 v = kern__v_load_f32__avx2(p + i * es, dt, nn);
        __m256 fin = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), _mm256_set1_ps(INFINITY), _CMP_LT_OQ);
        v = _mm256_blendv_ps(_mm256_setzero_ps(), v, fin);
        lo = _mm256_min_ps(lo, v);
        hi = _mm256_max_ps(hi, v);
        if (!(_mm256_movemask_ps(fin) == 0xff)) bad += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_xor_ps(_mm256_castsi256_ps(_mm256_set1_epi32(-1)), fin))); /* lanes past nn load as 0 */
    }
    *mn = -kern__hmax__avx2(_mm256_xor_ps(_mm256_set1_ps(-0.0f), lo));
    *mx = kern__hmax__avx2(hi);
    *nonfinite = bad;
}
/* ---- avx512 ---- */

/* f32 accumulators of the top-left mr x nr corner of an int32 tile c (row
 * stride KERN_QGEMM_NR): t[r][j] = (float)(c[r][j] - comp * 128 colsum[j])
 * * sx[r] * sw[j], rounded in that order. The subtraction wraps in int32,
 * which is exact (the u8 + 128 activations of the VNNI paths; see the K
 * bound). sw and colsum start at the tile's first column; nothing past
 * column nr of them is read. A full tile (nr = KERN_QGEMM_NR, a constant
 * after inlining) runs without tail checks. */
KERN_TARGET_AVX512 KERN__AINLINE void kern__v_qg_dequant_core__avx512(const int32_t *c, int mr, int nr, const float *sx,
                                                        const float *sw, const int32_t *colsum, int comp,
                                                        float *t) {
    int r, j;
    for (r = 0; r < mr; r++) {
        const __m512 vs = _mm512_set1_ps(sx[r]);
        const int32_t *cr = c + r * KERN_QGEMM_NR;
        float *tr = t + r * KERN_QGEMM_NR;
        for (j = 0; j < nr; j += 16) {
            const int nn = nr - j < 16 ? nr - j : 16;
            __m512i a = nn == 16 ? _mm512_loadu_si512((const void *)(cr + j)) : _mm512_maskz_loadu_epi32(kern__tailmask__avx512(nn), (const void *)(cr + j));
            __m512 v;
            if (comp) a = _mm512_sub_epi32(a, _mm512_slli_epi32(nn == 16 ? _mm512_loadu_si512((const void *)(colsum + j)) : _mm512_maskz_loadu_epi32(kern__tailmask__avx512(nn), (const void *)(colsum + j)), 7));
            v = kern__mul__avx512(_mm512_cvtepi32_ps(a), vs);
            v = kern__mul__avx512(v, nn == 16 ? _mm512_loadu_ps(sw + j) : kern__loadn__avx512(sw + j, nn));
            if (nn == 16) _mm512_storeu_ps(tr + j, v);
            else kern__storen__avx512(tr + j, v, nn);
        }
    }
}
KERN_TARGET_AVX512 static inline void kern__v_qg_dequant__avx512(const int32_t *c, int mr, int nr, const float *sx,
                                                   const float *sw, const int32_t *colsum, int comp,
                                                   float *t) {
    if (nr == KERN_QGEMM_NR) kern__v_qg_dequant_core__avx512(c, mr, KERN_QGEMM_NR, sx, sw, colsum, comp, t);
    else kern__v_qg_dequant_core__avx512(c, mr, nr, sx, sw, colsum, comp, t);
}

/* min(0, finite values) and max(0, finite values) of n contiguous elements
 * (the range of kern_base.h's asymmetric u8 rule); *nonfinite gets the
 * count of the others. Exact on every ISA. */
KERN_TARGET_AVX512 static inline void kern__v_qg_minmax__avx512(const void *x, kern_dtype dt, int64_t n, float *mn, float *mx,
                                                  int64_t *nonfinite) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
    int64_t bad = 0, i;
    for (i = 0; i < n; i += 16) {
        const int nn = n - i < 16 ? (int)(n - i) : 16;
        __m512 v = kern__v_load_f32__avx512(p + i * es, dt, nn);
        __mmask16 fin = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(INFINITY), _CMP_LT_OQ);
        v = _mm512_mask_blend_ps(fin, _mm512_setzero_ps(), v);
        lo = _mm512_min_ps(lo, v);
        hi = _mm512_max_ps(hi, v);
        if (!((fin) == 0xffff)) bad += __builtin_popcount((unsigned)((__mmask16)~(fin))); /* lanes past nn load as 0 */
    }
    *mn = -_mm512_reduce_max_ps(_mm512_xor_ps(_mm512_set1_ps(-0.0f), lo));
    *mx = _mm512_reduce_max_ps(hi);
    *nonfinite = bad;
}
#endif /* KERN_X86 */
#ifdef KERN_NEON
/* ---- neon ---- */

/* f32 accumulators of the top-left mr x nr corner of an int32 tile c (row
 * stride KERN_QGEMM_NR): t[r][j] = (float)(c[r][j] - comp * 128 colsum[j])
 * * sx[r] * sw[j], rounded in that order. The subtraction wraps in int32,
 * which is exact (the u8 + 128 activations of the VNNI paths; see the K
 * bound). sw and colsum start at the tile's first column; nothing past
 * column nr of them is read. A full tile (nr = KERN_QGEMM_NR, a constant
 * after inlining) runs without tail checks. */
KERN__AINLINE void kern__v_qg_dequant_core__neon(const int32_t *c, int mr, int nr, const float *sx,
                                                        const float *sw, const int32_t *colsum, int comp,
                                                        float *t) {
    int r, j;
    for (r = 0; r < mr; r++) {
        const float32x4_t vs = vdupq_n_f32(sx[r]);
        const int32_t *cr = c + r * KERN_QGEMM_NR;
        float *tr = t + r * KERN_QGEMM_NR;
        for (j = 0; j < nr; j += 4) {
            const int nn = nr - j < 4 ? nr - j : 4;
            int32x4_t a = nn == 4 ? vld1q_s32((const int32_t *)(const void *)(cr + j)) : vreinterpretq_s32_f32(kern__loadn__neon((const float *)(const void *)(cr + j), nn));
            float32x4_t v;
            if (comp) a = vsubq_s32(a, vshlq_n_s32(nn == 4 ? vld1q_s32((const int32_t *)(const void *)(colsum + j)) : vreinterpretq_s32_f32(kern__loadn__neon((const float *)(const void *)(colsum + j), nn)), 7));
            v = kern__mul__neon(vcvtq_f32_s32(a), vs);
            v = kern__mul__neon(v, nn == 4 ? vld1q_f32(sw + j) : kern__loadn__neon(sw + j, nn));
            if (nn == 4) vst1q_f32(tr + j, v);
            else kern__storen__neon(tr + j, v, nn);
        }
    }
}
static inline void kern__v_qg_dequant__neon(const int32_t *c, int mr, int nr, const float *sx,
                                                   const float *sw, const int32_t *colsum, int comp,
                                                   float *t) {
    if (nr == KERN_QGEMM_NR) kern__v_qg_dequant_core__neon(c, mr, KERN_QGEMM_NR, sx, sw, colsum, comp, t);
    else kern__v_qg_dequant_core__neon(c, mr, nr, sx, sw, colsum, comp, t);
}

/* min(0, finite values) and max(0, finite values) of n contiguous elements
 * (the range of kern_base.h's asymmetric u8 rule); *nonfinite gets the
 * count of the others. Exact on every ISA. */
static inline void kern__v_qg_minmax__neon(const void *x, kern_dtype dt, int64_t n, float *mn, float *mx,
                                                  int64_t *nonfinite) {
    const char *p = (const char *)x;
    const int64_t es = (int64_t)kern_dtype_size(dt);
    float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
    int64_t bad = 0, i;
    for (i = 0; i < n; i += 4) {
        const int nn = n - i < 4 ? (int)(n - i) : 4;
        float32x4_t v = kern__v_load_f32__neon(p + i * es, dt, nn);
        uint32x4_t fin = vcltq_f32(vabsq_f32(v), vdupq_n_f32(INFINITY));
        v = vbslq_f32(fin, v, vdupq_n_f32(0.0f));
        lo = kern__min__neon(lo, v);
        hi = kern__max__neon(hi, v);
        if (!(vminvq_u32(fin) != 0)) bad += ((int)vaddvq_u32(vshrq_n_u32(vmvnq_u32(fin), 31))); /* lanes past nn load as 0 */
    }
    *mn = -vmaxvq_f32(vnegq_f32(lo));
    *mx = vmaxvq_f32(hi);
    *nonfinite = bad;
}
#endif /* KERN_NEON */
/* END GENERATED */

/* A row of n elements with element stride `stride`, contiguous: the row
 * itself, or gathered into tmp (n elements of dt). */
static const void *kern__qg_unit_row(const void *x, kern_dtype dt, int64_t n, int64_t stride,
                                     void *tmp) {
    int64_t es = (int64_t)kern_dtype_size(dt), i;
    if (stride == 1 || n <= 1) return x;
    for (i = 0; i < n; i++)
        memcpy((char *)tmp + i * es, (const char *)x + i * stride * es, (size_t)es);
    return tmp;
}

/* ---------------------------------------------------------- path table */

/* Packed activation formats. SM (sign-magnitude, the AVX2 vpmaddubsw
 * kernel): per group and row 4 bytes |q| and 4 bytes of sign mask, then
 * one int32 per row after the groups (kern__qg_pack_a_row). */
enum { KERN__QG_A_S8 = 0, KERN__QG_A_U8 = 1, KERN__QG_A_S16 = 2, KERN__QG_A_SM = 3,
       KERN__QG_A_U8T = 4 };
/* U8T (AMX tiles): q + 128 as U8, laid out as tile rows: chunks of 16
 * groups (64 bytes a row), each chunk mr rows: byte (g/16)*mr*64 + r*64 +
 * (g%16)*4; the groups past k4 in the last chunk are zero. */
#define KERN__QG_A_IS_U8(fmt) ((fmt) == KERN__QG_A_U8 || (fmt) == KERN__QG_A_U8T)

/* Microkernel contract: c[r*32 + j] = sum_g sum_t a[g][r][t] * b[g][j][t]
 * for r < mr, j < 32, over k4 groups; a is a packed activation panel of mr
 * rows in the path's format, b a weight panel (64-byte aligned). For the u8
 * format a holds q + 128, so c includes + 128 * colsum. pf: 128 bytes per
 * group are prefetched into L2 from there (the weight stream ahead, or the
 * next weight panel while this one is reused from L2); never dereferenced. */
typedef void (*kern__qg_ukernel_fn)(int mr, int64_t k4, const void *a,
                                    const int8_t *b, int32_t *c, const int8_t *pf);
typedef float (*kern__qg_absmax_fn)(const void *x, kern_dtype dt, int64_t n,
                                   int64_t *nonfinite);
typedef void (*kern__qg_minmax_fn)(const void *x, kern_dtype dt, int64_t n, float *mn,
                                   float *mx, int64_t *nonfinite);
typedef void (*kern__qg_quant_fn)(const void *x, kern_dtype dt, int64_t n, float inv,
                                  int zp, int lo, int hi, uint8_t *q);
typedef void (*kern__qg_dequant_fn)(const int32_t *c, int mr, int nr, const float *sx,
                                    const float *sw, const int32_t *colsum, int comp,
                                    float *t);
typedef void (*kern__qg_epi_tile_fn)(const kern__epi *e, int64_t i0, int64_t j0,
                                     const float *t, int64_t ldt, int m, int n);
typedef void (*kern__qg_epi_row_fn)(const kern__epi *e, int64_t i, int64_t j0,
                                    const float *acc, int n);

typedef struct kern__qg_fns {
    const char *name; /* the ISA level this table serves */
    kern_qgemm_isa isa; /* the int8 path: the tag of the weights it runs */
    int mr_max;   /* rows per microkernel tile */
    int a_fmt;    /* KERN__QG_A_* */
    kern__qg_ukernel_fn ukernel;
    /* the epilogue: int32 tile -> f32 (kern_qgemm.c.in), then kern__epi */
    kern__qg_dequant_fn dequant;
    kern__qg_epi_tile_fn epi_tile;
    kern__qg_epi_row_fn epi_row;
    /* kern_base.h's quantization rule (contiguous rows) */
    kern__qg_absmax_fn absmax;
    kern__qg_minmax_fn minmax;
    kern__qg_quant_fn quant;
} kern__qg_fns;

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

#ifdef KERN__HAVE_AMX
/* AMX tiles (tdpbusd, u8 x s8 like vpdpbusd, so the VNNI weight panels and
 * their compensation serve as they are): up to 32 rows x 32 columns in
 * four int32 tiles; per chunk of 16 groups two A tiles (rows 0-15, 16-31
 * of a U8T panel, 64 bytes a row) and two B tiles (16 groups x 16
 * columns: the panel's 128-byte rows, halves). The configuration is this
 * call's: tiles of exactly min(mr, 16) and mr - 16 rows, so nothing past
 * the panel is read; a last chunk of fewer than 16 groups takes its B rows
 * from a zeroed copy. The tile state is released on return. */
KERN_TARGET_AMX static void kern__qgemm_u8s8_32x32__amx(int mr, int64_t k4, const void *a_,
                                                       const int8_t *b, int32_t *c,
                                                       const int8_t *pf) {
    const uint8_t *a = (const uint8_t *)a_;
    int r0 = mr < 16 ? mr : 16, r1 = mr - r0, two = r1 > 0;
    int64_t nch = k4 / 16, rem = k4 % 16, ch;
    uint8_t rows[8];
    (void)pf;
    rows[0] = rows[1] = rows[4] = (uint8_t)r0;
    rows[2] = rows[3] = rows[5] = (uint8_t)(two ? r1 : 1);
    rows[6] = rows[7] = 16;
    kern__amx_config(rows);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    /* the panel's chunk stride is mr rows; its rows 16.. start 16 rows in */
#define KERN__QG_AMX_CHUNK(AC, BC)                                            \
    _tile_loadd(4, (AC), 64);                                                 \
    _tile_loadd(6, (BC), 128);                                                \
    _tile_loadd(7, (BC) + 64, 128);                                           \
    _tile_dpbusd(0, 4, 6);                                                    \
    _tile_dpbusd(1, 4, 7);                                                    \
    if (two) {                                                                \
        _tile_loadd(5, (AC) + 16 * 64, 64);                                   \
        _tile_dpbusd(2, 5, 6);                                                \
        _tile_dpbusd(3, 5, 7);                                                \
    }
    for (ch = 0; ch < nch; ch++) {
        KERN__QG_AMX_CHUNK(a + ch * mr * 64, b + ch * 16 * 128)
    }
    if (rem) {
        int8_t bt[16 * 128] KERN_ALIGNED(64);
        memset(bt, 0, sizeof bt);
        memcpy(bt, b + nch * 16 * 128, (size_t)(rem * 128));
        KERN__QG_AMX_CHUNK(a + nch * mr * 64, bt)
    }
#undef KERN__QG_AMX_CHUNK
    _tile_stored(0, c, 128);
    _tile_stored(1, c + 16, 128);
    if (two) {
        _tile_stored(2, c + 16 * 32, 128);
        _tile_stored(3, c + 16 * 32 + 16, 128);
    }
    _tile_release();
}
#endif /* KERN__HAVE_AMX */

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

/* AVX2 without VNNI, the vpmaddubsw form: up to 2 rows x 32 columns.
 * a is sign-magnitude [k4][mr][8]: per group and row |q| as 4 u8 and the
 * sign mask m = (q < 0 ? 0xff : 0) as 4 bytes; after the k4 groups one
 * int32 per row, negsum = sum of |q| over the row's negative codes. For
 * q < 0, w ^ m = ~w = -w - 1, so |q| * (w ^ m) = q * w - |q|; for q >= 0
 * it is q * w. Hence sum_k |q| * (w ^ m) + negsum = sum_k q * w exactly.
 * vpmaddubsw multiplies the u8 |q| <= 128 by the s8 w ^ m in [-128, 127]
 * and adds adjacent pairs: a pair lies in [-32768, 32512], inside int16, so
 * it never saturates, for any s8 inputs (no -128 condition on either side).
 * vpmaddwd by ones adds the two pairs of a column into int32 (4 k per
 * column, the panel layout of the VNNI paths). Per row and 8 columns: vpxor,
 * vpmaddubsw, vpmaddwd, vpaddd = 32 multiply-adds with two uops on the
 * integer multiply pipes (the old form needs four, docs/qgemm.md).
 * Registers: 8 accumulators, |q| and m of 2 rows, ones, w, 2 temporaries. */
KERN_TARGET_AVX2 KERN__QG_INLINE void kern__qg_sm_body__avx2(const int MR, int64_t k4,
                                                             const uint8_t *a,
                                                             const int8_t *b, int32_t *c,
                                                             const int8_t *pf) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i c0_0 = _mm256_setzero_si256(), c0_1 = c0_0, c0_2 = c0_0, c0_3 = c0_0;
    __m256i c1_0 = c0_0, c1_1 = c0_0, c1_2 = c0_0, c1_3 = c0_0;
    int64_t g;
    for (g = 0; g < k4; g++) {
        __m256i u0, m0, u1 = c0_0, m1 = c0_0, w, t;
        int32_t v_;
        _mm_prefetch((const char *)pf, _MM_HINT_T1);
        _mm_prefetch((const char *)(pf + 64), _MM_HINT_T1);
        memcpy(&v_, a, 4);
        u0 = _mm256_set1_epi32(v_);
        memcpy(&v_, a + 4, 4);
        m0 = _mm256_set1_epi32(v_);
        if (MR > 1) {
            memcpy(&v_, a + 8, 4);
            u1 = _mm256_set1_epi32(v_);
            memcpy(&v_, a + 12, 4);
            m1 = _mm256_set1_epi32(v_);
        }
#define KERN__QG_SM(r, j)                                                     \
    t = _mm256_madd_epi16(_mm256_maddubs_epi16(u##r, _mm256_xor_si256(w, m##r)), ones); \
    c##r##_##j = _mm256_add_epi32(c##r##_##j, t);                             \
    KERN__QG_PIN(c##r##_##j)
#define KERN__QG_SMJ(j)                                                       \
    w = _mm256_load_si256((const __m256i *)(b + 32 * j));                     \
    KERN__QG_SM(0, j)                                                         \
    if (MR > 1) { KERN__QG_SM(1, j) }
        KERN__QG_SMJ(0)
        KERN__QG_SMJ(1)
        KERN__QG_SMJ(2)
        KERN__QG_SMJ(3)
#undef KERN__QG_SMJ
#undef KERN__QG_SM
        a += 8 * MR;
        b += 128;
        pf += 128;
    }
    {
        int32_t n_;
        __m256i ng;
        memcpy(&n_, a, 4); /* the corrections follow the k4 groups */
        ng = _mm256_set1_epi32(n_);
        _mm256_storeu_si256((__m256i *)c, _mm256_add_epi32(c0_0, ng));
        _mm256_storeu_si256((__m256i *)(c + 8), _mm256_add_epi32(c0_1, ng));
        _mm256_storeu_si256((__m256i *)(c + 16), _mm256_add_epi32(c0_2, ng));
        _mm256_storeu_si256((__m256i *)(c + 24), _mm256_add_epi32(c0_3, ng));
        if (MR > 1) {
            memcpy(&n_, a + 4, 4);
            ng = _mm256_set1_epi32(n_);
            _mm256_storeu_si256((__m256i *)(c + 32), _mm256_add_epi32(c1_0, ng));
            _mm256_storeu_si256((__m256i *)(c + 40), _mm256_add_epi32(c1_1, ng));
            _mm256_storeu_si256((__m256i *)(c + 48), _mm256_add_epi32(c1_2, ng));
            _mm256_storeu_si256((__m256i *)(c + 56), _mm256_add_epi32(c1_3, ng));
        }
    }
}
KERN_TARGET_AVX2 static void kern__qgemm_sm_1x32__avx2(int64_t k4, const uint8_t *a,
                                                      const int8_t *b, int32_t *c,
                                                      const int8_t *pf) {
    kern__qg_sm_body__avx2(1, k4, a, b, c, pf);
}
KERN_TARGET_AVX2 static void kern__qgemm_sm_2x32__avx2(int64_t k4, const uint8_t *a,
                                                      const int8_t *b, int32_t *c,
                                                      const int8_t *pf) {
    kern__qg_sm_body__avx2(2, k4, a, b, c, pf);
}
static void kern__qgemm_sm_2x32_avx2(int mr, int64_t k4, const void *a, const int8_t *b,
                                     int32_t *c, const int8_t *pf) {
    if (mr == 2) kern__qgemm_sm_2x32__avx2(k4, (const uint8_t *)a, b, c, pf);
    else if (mr == 1) kern__qgemm_sm_1x32__avx2(k4, (const uint8_t *)a, b, c, pf);
}
#endif /* KERN_X86 */

#ifdef KERN__QG_NEON_DOT
/* AArch64 sdot: a is s8 [k4][mr][4]; one row at a time, 4 accumulators of
 * 4 columns per 16-column half; the row's 4 bytes are duplicated to every
 * lane so vdotq_s32 gives 4 columns x 4 k per instruction. */
KERN__QG_TARGET_DOT static void kern__qgemm_s8s8_4x32__neondot(int mr, int64_t k4, const void *a_,
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

/* ------------------------------------------------------ dispatch tables */

/* One table per ISA level (docs/internals.md): the int8 path (the tag a
 * packed weight carries), its tile, and the row helpers of the level.
 * Levels reach their own tables; where the CPU level adds nothing the int8
 * path can use, the int8 half is the lower level's:
 *   AVX2          AVX2 vpmaddwd 3x32, AVX2 helpers
 *   AVX2_VNNI     AVX-VNNI vpdpbusd ymm 6x32, AVX2 helpers
 *   AVX512        AVX2 vpmaddwd 3x32 (no int8 dot product without VNNI:
 *                 vpmaddubsw saturates, see above), AVX-512 helpers
 *   AVX512_VNNI   vpdpbusd zmm 14x32, AVX-512 helpers; AVX512_BF16 the same
 *   NEON          the portable 4x32 kernel, NEON helpers
 *   NEON_DOT      sdot 4x32 (when the compiler can build it), NEON helpers;
 *                 NEON_BF16 the same */
#define KERN__QG_FNS(NAME, ISA, MR, FMT, UK, V)                                \
    static const kern__qg_fns kern__qg_fns_##NAME = {                         \
        #NAME, ISA, MR, FMT, UK, V(qg_dequant), V(epi_tile), V(epi_row), V(absmax), \
        V(qg_minmax), V(quant_row)};
#define KERN__QG_S(f) kern__s_##f
KERN__QG_FNS(scalar, KERN_QGEMM_ISA_SCALAR, 4, KERN__QG_A_S8, kern__qgemm_s8s8_4x32__scalar,
             KERN__QG_S)
#ifdef KERN_X86
#define KERN__QG_V2(f) kern__v_##f##__avx2
#define KERN__QG_V5(f) kern__v_##f##__avx512
KERN__QG_FNS(avx2, KERN_QGEMM_ISA_AVX2, 2, KERN__QG_A_SM, kern__qgemm_sm_2x32_avx2,
             KERN__QG_V2)
KERN__QG_FNS(avx2_wd, KERN_QGEMM_ISA_AVX2, 3, KERN__QG_A_S16, kern__qgemm_s16s8_3x32__avx2,
             KERN__QG_V2)
KERN__QG_FNS(avx2_vnni, KERN_QGEMM_ISA_AVXVNNI, 6, KERN__QG_A_U8,
             kern__qgemm_u8s8_6x32__avxvnni, KERN__QG_V2)
KERN__QG_FNS(avx512, KERN_QGEMM_ISA_AVX2, 2, KERN__QG_A_SM, kern__qgemm_sm_2x32_avx2,
             KERN__QG_V5)
KERN__QG_FNS(avx512_wd, KERN_QGEMM_ISA_AVX2, 3, KERN__QG_A_S16, kern__qgemm_s16s8_3x32__avx2,
             KERN__QG_V5)
KERN__QG_FNS(avx512_vnni, KERN_QGEMM_ISA_AVX512VNNI, 14, KERN__QG_A_U8,
             kern__qgemm_u8s8_14x32__avx512vnni, KERN__QG_V5)
#ifdef KERN__HAVE_AMX
KERN__QG_FNS(amx, KERN_QGEMM_ISA_AVX512VNNI, 32, KERN__QG_A_U8T, kern__qgemm_u8s8_32x32__amx,
             KERN__QG_V5)
#endif
#endif
#ifdef KERN_NEON
#define KERN__QG_VN(f) kern__v_##f##__neon
KERN__QG_FNS(neon, KERN_QGEMM_ISA_SCALAR, 4, KERN__QG_A_S8, kern__qgemm_s8s8_4x32__scalar,
             KERN__QG_VN)
#ifdef KERN__QG_NEON_DOT
KERN__QG_FNS(neon_dot, KERN_QGEMM_ISA_NEON_DOT, 4, KERN__QG_A_S8,
             kern__qgemm_s8s8_4x32__neondot, KERN__QG_VN)
#endif
#endif

/* The table of a level. `widen` != 0 picks, on the two levels that run the
 * AVX2 int8 path, the vpmaddwd kernel instead of the vpmaddubsw one (same
 * weights, same results: the tests run both; the library always uses
 * widen = 0). */
static const kern__qg_fns *kern__qg_fns_variant(kern_isa level, int widen) {
    (void)widen;
    switch (level) {
#ifdef KERN_X86
    case KERN_ISA_AVX2: return widen ? &kern__qg_fns_avx2_wd : &kern__qg_fns_avx2;
    case KERN_ISA_AVX2_VNNI: return &kern__qg_fns_avx2_vnni;
    case KERN_ISA_AVX512: return widen ? &kern__qg_fns_avx512_wd : &kern__qg_fns_avx512;
    case KERN_ISA_AMX:
#ifdef KERN__HAVE_AMX
        return &kern__qg_fns_amx;
#endif
        /* fall through */
    case KERN_ISA_AVX512_VNNI:
    case KERN_ISA_AVX512_BF16: return &kern__qg_fns_avx512_vnni;
#endif
#ifdef KERN_NEON
#ifdef KERN__QG_NEON_DOT
    case KERN_ISA_NEON_DOT:
    case KERN_ISA_NEON_BF16: return &kern__qg_fns_neon_dot;
#else
    case KERN_ISA_NEON_DOT:
    case KERN_ISA_NEON_BF16:
#endif
    case KERN_ISA_NEON: return &kern__qg_fns_neon;
#endif
    default: return &kern__qg_fns_scalar;
    }
}
static const kern__qg_fns *kern__qg_fns_for(kern_isa level) {
    return kern__qg_fns_variant(level, 0);
}
/* Below this many rows the AMX table hands the GEMM to the VNNI one (same
 * weight panels): a 1-row tile spends as long per chunk as a full one.
 * Xeon, 1 thread, qlinear N = K = 4096, VNNI -> tiles: M 1 0.63-0.65 ->
 * 0.65-0.72 ms, M 16 1.30-1.39 -> 0.78-0.81, M 512 23.6-24.0 -> 9.5-10.3. */
#ifndef KERN__QG_AMX_MIN_M
#define KERN__QG_AMX_MIN_M 4
#endif
static const kern__qg_fns *kern__qg_fns_rows(const kern__qg_fns *f, int64_t M) {
#ifdef KERN__HAVE_AMX
    if (f == &kern__qg_fns_amx && M < KERN__QG_AMX_MIN_M) return &kern__qg_fns_avx512_vnni;
#endif
    (void)M;
    return f;
}

/* The table of the level ctx runs (NULL = the default context). */
static const kern__qg_fns *kern__qg_fns_ctx(const kern_ctx *ctx) {
    return kern__qg_fns_for(kern_ctx_isa(ctx));
}

KERN_API kern_qgemm_isa kern_qgemm_isa_for(const kern_ctx *ctx) {
    return kern__qg_fns_ctx(ctx)->isa;
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
    if (fmt == KERN__QG_A_U8T) {
        uint8_t *p = (uint8_t *)panel + (int64_t)r * 64;
        int64_t kp = (k4 + 15) / 16 * 16;
        for (g = 0; g < kp; g++) {
            uint32_t v = 0;
            if (g < k4) {
                memcpy(&v, q + 4 * g, 4);
                v ^= 0x80808080u; /* q + 128 */
            }
            memcpy(p + (g / 16) * mr * 64 + (g % 16) * 4, &v, 4);
        }
    } else if (fmt == KERN__QG_A_U8) {
        uint8_t *p = (uint8_t *)panel + (int64_t)r * 4;
        for (g = 0; g < k4; g++) {
            uint32_t v;
            memcpy(&v, q + 4 * g, 4);
            v ^= 0x80808080u; /* q + 128 */
            memcpy(p + g * mr * 4, &v, 4);
        }
    } else if (fmt == KERN__QG_A_SM) {
        /* four codes at a time in a uint32: m = 0xff in each byte whose
         * sign bit is set; |q| = (v ^ m) + (m & 1) bytewise (~q + 1 <= 128,
         * no carry between bytes); negsum adds the bytes of |q| & m */
        uint8_t *p = (uint8_t *)panel + (int64_t)r * 8;
        uint32_t neg = 0;
        for (g = 0; g < k4; g++) {
            uint32_t v, m, u, n;
            memcpy(&v, q + 4 * g, 4);
            m = ((v >> 7) & 0x01010101u) * 0xffu;
            u = (v ^ m) + (m & 0x01010101u);
            n = u & m;
            n = (n & 0x00ff00ffu) + ((n >> 8) & 0x00ff00ffu);
            neg += (n & 0xffffu) + (n >> 16);
            memcpy(p + g * mr * 8, &u, 4);
            memcpy(p + g * mr * 8 + 4, &m, 4);
        }
        memcpy((uint8_t *)panel + k4 * mr * 8 + (int64_t)r * 4, &neg, 4);
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
/* Bytes of one packed activation row of k4 groups in the format fmt. */
static int64_t kern__qg_a_row_bytes(int fmt, int64_t k4) {
    if (fmt == KERN__QG_A_SM) return k4 * 8 + 4;
    if (fmt == KERN__QG_A_U8T) return (k4 + 15) / 16 * 64;
    return k4 * 4 * (fmt == KERN__QG_A_S16 ? 2 : 1);
}

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

/* kern_base.h's symmetric rule on one row of n values with element stride
 * `stride` (gathered into tmp, n elements of dt, when not 1): codes into q,
 * returns the scale; *nonfinite counts the non-finite values. */
static float kern__qg_quant_row_s8(const kern__qg_fns *o, const void *x, kern_dtype dt,
                                   int64_t n, int64_t stride, void *tmp, int8_t *q,
                                   int64_t *nonfinite) {
    float s;
    x = kern__qg_unit_row(x, dt, n, stride, tmp);
    s = kern__quant_scale(o->absmax(x, dt, n, nonfinite));
    o->quant(x, dt, n, 1.0f / s, 0, -127, 127, (uint8_t *)q);
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
    const kern__qg_fns *f;
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
    void *tmp = (char *)q + kern__qg_round64((size_t)(qw->k4 * 4)); /* a gathered row */
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
            qw->scales[n] = kern__qg_quant_row_s8(jb->f, row, w->dtype, qw->k, w->stride[1],
                                                  tmp, q, &bad);
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
    jb.f = kern__qg_fns_ctx(ctx);
    jb.w = w;
    jb.scales = scales;
    jb.qw = qw;
    jb.ctx = ctx;
    jb.row_bad = (int64_t *)kern__alloc(ctx, (size_t)qw->n_panels * sizeof(int64_t));
    if (!jb.row_bad) {
        kern__free(ctx, qw);
        return kern__err(KERN_ERR_NOMEM, "%s: out of memory", op);
    }
    st = kern__reserve_thread_scratch(ctx, kern__qg_round64((size_t)(qw->k4 * 4)) +
                                               (size_t)qw->k * kern_dtype_size(w->dtype) + 64);
    if (!st) st = kern_parallel_for(ctx, qw->n_panels, kern__qg_packw_task, &jb);
    if (!st)
        for (p = 0; p < qw->n_panels; p++)
            if (jb.row_bad[p] >= 0) {
                int64_t n = jb.row_bad[p], k;
                int64_t esz = (int64_t)kern_dtype_size(w->dtype);
                const char *row = (const char *)w->data + n * w->stride[0] * esz;
                for (k = 0; k < w->shape[1]; k++)
                    if (!kern__qg_isfinite(kern__s_load_f32(row + k * w->stride[1] * esz,
                                                            w->dtype, 1)))
                        break;
                st = kern__err(KERN_ERR_ARG, "%s: w[%lld,%lld]=%g is not finite", op,
                               (long long)n, (long long)k,
                               (double)kern__s_load_f32(row + k * w->stride[1] * esz, w->dtype, 1));
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
    const kern__qg_fns *f;
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
        *scale = kern__quant_scale(-mn > mx ? -mn : mx);
        *inv = 1.0f / *scale;
        *zp = 0;
    } else {
        float z;
        *scale = kern__quant_scale_div(mx - mn, 255.0f);
        *inv = 1.0f / *scale;
        z = -(mn * *inv); /* mn <= 0 */
        if (z > 255.0f) z = 255.0f;
        if (!(z > 0.0f)) z = 0.0f;
        *zp = (int)kern__s_cvtn(z);
    }
}

static int64_t kern__qg_last_stride(const kern_tensor *t, int64_t k) {
    return t->ndim > 0 && k > 1 ? t->stride[t->ndim - 1] : 1;
}

/* Thread scratch of the quantizer: a row of codes (for a strided xq), then
 * a gathered row of x (for a strided x). */
static size_t kern__qg_qtmp_bytes(const kern_tensor *x, int64_t k) {
    return kern__qg_round64((size_t)k) +
           (kern__qg_last_stride(x, k) != 1 ? (size_t)k * kern_dtype_size(x->dtype) : 0) + 64;
}

/* Row m of x, contiguous (gathered into the thread's scratch if strided). */
static const void *kern__qg_qrow(const kern__qg_qjob *jb, int64_t m, uint8_t *tmp) {
    const kern_tensor *x = jb->x;
    const char *row = (const char *)x->data +
                      kern__qg_row_off(x, m) * (int64_t)kern_dtype_size(x->dtype);
    return kern__qg_unit_row(row, x->dtype, jb->k, kern__qg_last_stride(x, jb->k),
                             tmp + kern__qg_round64((size_t)jb->k));
}

/* The range the rule needs: [-absmax, absmax] symmetric, [min, max] u8. */
static void kern__qg_qrow_range(const kern__qg_qjob *jb, const void *row, float *mn, float *mx) {
    int64_t bad;
    if (jb->asym) {
        jb->f->minmax(row, jb->x->dtype, jb->k, mn, mx, &bad);
    } else {
        *mx = jb->f->absmax(row, jb->x->dtype, jb->k, NULL);
        *mn = -*mx;
    }
}

static void kern__qg_qrow_write(const kern__qg_qjob *jb, int64_t m, const void *row, float inv,
                                int zp, uint8_t *tmp) {
    const kern_tensor *xq = jb->xq;
    uint8_t *qrow = (uint8_t *)xq->data + kern__qg_row_off(xq, m);
    int64_t qs = kern__qg_last_stride(xq, jb->k), i;
    uint8_t *dst = qs == 1 ? qrow : tmp;
    jb->f->quant(row, jb->x->dtype, jb->k, inv, zp, jb->asym ? 0 : -127, jb->asym ? 255 : 127,
                  dst);
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
        const void *row = kern__qg_qrow(jb, m, tmp);
        float mn, mx, s, inv;
        int zp;
        kern__qg_qrow_range(jb, row, &mn, &mx);
        kern__qg_qparams(jb->asym, mn, mx, &s, &inv, &zp);
        ((float *)jb->scales->data)[kern__qg_elem_off(jb->scales, m)] = s;
        if (jb->asym) ((int32_t *)jb->zp->data)[kern__qg_elem_off(jb->zp, m)] = zp;
        kern__qg_qrow_write(jb, m, row, inv, zp, tmp);
    }
}
/* per-tensor phase 1: the range of the rows of task t */
static void kern__qg_q_minmax_task(void *arg, int64_t t, int thread) {
    kern__qg_qjob *jb = (kern__qg_qjob *)arg;
    int64_t m0 = t * jb->rows_per_task, m1 = m0 + jb->rows_per_task, m;
    uint8_t *tmp = (uint8_t *)kern__thread_scratch(jb->ctx, thread);
    float lo = 0.0f, hi = 0.0f;
    if (m1 > jb->rows) m1 = jb->rows;
    for (m = m0; m < m1; m++) {
        float mn, mx;
        kern__qg_qrow_range(jb, kern__qg_qrow(jb, m, tmp), &mn, &mx);
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
    for (m = m0; m < m1; m++)
        kern__qg_qrow_write(jb, m, kern__qg_qrow(jb, m, tmp), jb->t_inv, jb->t_zp, tmp);
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

/* Scratch: kern__qg_qtmp_bytes per thread; per tensor, the (min, max)
 * pair of every task shared. */
static void kern__qg_quant_scratch(const kern_tensor *x, int64_t rows, int64_t k, int per_tensor,
                                   size_t *shared, size_t *thread) {
    int64_t rpt = kern__qg_quant_rows_per_task(k), ntask = (rows + rpt - 1) / rpt;
    *shared = rows > 0 && per_tensor ? (size_t)ntask * 2 * sizeof(float) : 0;
    *thread = rows > 0 ? kern__qg_qtmp_bytes(x, k) : 0;
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
    kern__qg_quant_scratch(x, rows, k, params && params->per_tensor, &sh, &th);
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
    kern__qg_quant_scratch(x, rows, k, p.per_tensor, &sh, &th);
    st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size, sh, th);
    if (st) {
        kern__op_end(ctx);
        return st;
    }
    memset(&jb, 0, sizeof jb);
    jb.f = kern__qg_fns_ctx(ctx);
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
    st = kern__reserve_thread_scratch(ctx, kern__qg_qtmp_bytes(x, k));
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
    const kern__qg_fns *f;
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
    int64_t x_flat;
    int is_int;  /* s8s8s32: int32 out; else the qlinear epilogue */
    int comp;    /* u8 activations: subtract 128 * colsum */
    /* qlinear epilogue: dequant with sx, sw, then kern__epi on rows */
    const float *sw;
    kern__epi epi;
    int epi_flat; /* y and residual rows at m * row stride (else per row) */
    const kern_tensor *y, *res;
    int8_t *bpack_w; /* s8s8s32: b packed per call (NULL: it came packed) */
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
            kern__qg_quant_row_s8(jb->f, row, x->dtype, jb->k, 1, NULL, q, &bad);
        kern__qg_pack_a_row(jb->f->a_fmt, q, jb->k4, mr, r, panel);
    }
}

/* Weight panel p of a [K,N] i8 view b (any strides) with its column sums:
 * panel[g][j][t] = b[4g + t][32p + j], zero padded. */
static void kern__qg_pack_b_panel(const kern_tensor *b, int64_t k4, int64_t p, int8_t *panel,
                                  int32_t *colsum) {
    int64_t K = b->shape[0], N = b->shape[1], kk;
    int64_t n0 = p * KERN_QGEMM_NR, s0 = b->stride[0], s1 = b->stride[1];
    int nr = (int)(N - n0 < KERN_QGEMM_NR ? N - n0 : KERN_QGEMM_NR), j;
    int32_t sum[KERN_QGEMM_NR];
    memset(panel, 0, (size_t)(k4 * 128));
    memset(sum, 0, sizeof sum);
    if (s1 == 1 || K == 1 || nr == 1 || s0 != 1) {
        /* walk b row by row (row-major [K,N]: each row's 32 bytes are
         * contiguous), scattering into the panel */
        const int8_t *base = (const int8_t *)b->data + n0 * s1;
        for (kk = 0; kk < K; kk++) {
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
            for (kk = 0; kk < K; kk++) {
                panel[(kk >> 2) * 128 + 4 * j + (kk & 3)] = col[kk];
                sum[j] += col[kk];
            }
        }
    }
    for (j = 0; j < nr; j++) colsum[n0 + j] = sum[j];
}

/* s8s8s32 phase 1: pack a weight panel (t < n_np, unless b came packed) or
 * an activation panel */
static void kern__qg_pack_ab_task(void *arg, int64_t t, int thread) {
    kern__qg_gjob *jb = (kern__qg_gjob *)arg;
    int8_t *q = (int8_t *)kern__thread_scratch(jb->ctx, thread);
    int64_t kk;
    if (jb->bpack_w && t < jb->n_np) {
        kern__qg_pack_b_panel(jb->b, jb->k4, t, jb->bpack_w + t * jb->k4 * 128, jb->colsum_w);
    } else {
        const kern_tensor *a = jb->a;
        int64_t i = t - (jb->bpack_w ? jb->n_np : 0), r0 = kern__qg_mpan_row0(&jb->mp, i);
        int mr = kern__qg_mpan_rows(&jb->mp, i), r;
        char *panel = jb->apack + r0 * jb->a_row_bytes;
        memset(q, 0, (size_t)(jb->k4 * 4));
        for (r = 0; r < mr; r++) {
            const int8_t *row = (const int8_t *)a->data + (r0 + r) * a->stride[0];
            for (kk = 0; kk < jb->k; kk++) q[kk] = row[kk * a->stride[1]];
            kern__qg_pack_a_row(jb->f->a_fmt, q, jb->k4, mr, r, panel);
        }
    }
}

/* kern_qlinear's epilogue (kern_base.h's kern__epi) on the f32 tile t of
 * output rows r0 .. r0 + mr - 1, columns n0 .. n0 + nr - 1. */
static void kern__qg_epi_rows(const kern__qg_gjob *jb, const float *t, int mr, int64_t r0,
                              int64_t n0, int nr) {
    int r;
    if (jb->epi_flat) {
        jb->f->epi_tile(&jb->epi, r0, n0, t, KERN_QGEMM_NR, mr, nr);
        return;
    }
    for (r = 0; r < mr; r++) { /* leading dims that do not collapse: row bases */
        kern__epi e = jb->epi;
        int64_t m = r0 + r;
        e.dst = (char *)jb->y->data +
                kern__qg_row_off(jb->y, m) * (int64_t)kern_dtype_size(jb->y->dtype);
        e.dst_rs = 0;
        if (jb->res) {
            e.res = (const char *)jb->res->data +
                    kern__qg_row_off(jb->res, m) * (int64_t)kern_dtype_size(jb->res->dtype);
            e.res_rs = 0;
        }
        if (e.glu) /* the gated store is a tile store: one row of it */
            jb->f->epi_tile(&e, m, n0, t + r * KERN_QGEMM_NR, KERN_QGEMM_NR, 1, nr);
        else
            jb->f->epi_row(&e, m, n0, t + r * KERN_QGEMM_NR, nr);
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
            jb->f->ukernel(mr, jb->k4, a, b, tile, pf);
            if (jb->is_int) {
                const kern_tensor *c = jb->c;
                int r, j;
                for (r = 0; r < mr; r++) {
                    int32_t *crow = (int32_t *)c->data + (r0 + r) * c->stride[0];
                    for (j = 0; j < nr; j++) {
                        uint32_t v = (uint32_t)tile[r * KERN_QGEMM_NR + j];
                        if (jb->comp) v -= (uint32_t)jb->colsum[n0 + j] << 7;
                        crow[(n0 + j) * c->stride[1]] = (int32_t)v;
                    }
                }
            } else {
                float *t = (float *)(void *)(tile + jb->f->mr_max * KERN_QGEMM_NR);
                jb->f->dequant(tile, mr, nr, jb->sx + (r0 - jb->chunk_row0), jb->sw + n0,
                                jb->colsum + n0, jb->comp, t);
                kern__qg_epi_rows(jb, t, mr, r0, n0, nr);
            }
        }
    }
}

/* Blocking: an m-block of up to mcp activation panels (~512 KiB packed, in
 * L2) against an n-block of ncp weight panels; each weight panel is read
 * once per m-block. Enough tasks for dynamic balance when threads > 1. */
static void kern__qg_blocking(kern__qg_gjob *jb, int threads) {
    int64_t npan = jb->p1 - jb->p0, target;
    int64_t mcp = (512 * 1024) / (jb->a_row_bytes * jb->f->mr_max + 1);
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

/* Validates kern_gemm_s8s8s32's operands (writes nothing): b, or pb (then
 * b must be NULL). */
static kern_status kern__qg_s8_check(const char *op, const kern_tensor *a, const kern_tensor *b,
                                     const kern_tensor *c, const kern_gemm_s8s8s32_packed_b *pb) {
    kern_status st;
    int64_t M, N, K, Kb;
    if (pb && b)
        return kern__err(KERN_ERR_ARG, "%s: b must be NULL when params.packed_b is given", op);
    if (pb && (pb->k < 1 || pb->n < 1 || pb->k > KERN_QGEMM_MAX_K || !pb->data || !pb->colsum))
        return kern__err(KERN_ERR_ARG, "%s: params.packed_b is not a packed b", op);
    st = kern__qg_check_2d_int(a, KERN_I8, op, "a");
    if (!st && !pb) st = kern__qg_check_2d_int(b, KERN_I8, op, "b");
    if (!st) st = kern__qg_check_2d_int(c, KERN_I32, op, "c");
    if (st) return st;
    M = a->shape[0];
    K = a->shape[1];
    N = pb ? pb->n : b->shape[1];
    Kb = pb ? pb->k : b->shape[0];
    if (Kb != K)
        return kern__err(KERN_ERR_SHAPE, "%s: a.shape[1]=%lld but %s=%lld", op, (long long)K,
                         pb ? "packed_b.k" : "b.shape[0]", (long long)Kb);
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
    if (kern_tensors_overlap(c, a) || (b && kern_tensors_overlap(c, b)))
        return kern__err(KERN_ERR_ARG, "%s: c overlaps %s", op,
                         kern_tensors_overlap(c, a) ? "a" : "b");
    return KERN_OK;
}

/* Scratch of kern_gemm_s8s8s32 on the table f: the packed b and its column
 * sums (unless b came packed) and the packed a shared; per thread the
 * larger of a row of codes and an int32 tile. */
static void kern__qg_s8_scratch(const kern__qg_fns *f, int64_t M, int64_t N, int64_t K,
                                int b_packed, size_t *shared, size_t *thread) {
    int64_t k4 = (K + 3) / 4, n_np = (N + KERN_QGEMM_NR - 1) / KERN_QGEMM_NR;
    int64_t a_row_bytes = kern__qg_a_row_bytes(f->a_fmt, k4);
    size_t s1 = (size_t)(k4 * 4 + 64), s2 = (size_t)f->mr_max * KERN_QGEMM_NR * 4 + 64;
    if (M == 0 || N == 0) {
        *shared = *thread = 0;
        return;
    }
    *shared = (b_packed ? 0 : kern__qg_round64((size_t)(n_np * k4 * 128)) +
                                  kern__qg_round64((size_t)N * 4)) +
              kern__qg_round64((size_t)(M * a_row_bytes)) + 64;
    *thread = s1 > s2 ? s1 : s2;
}

KERN_API kern_status kern_gemm_s8s8s32_workspace_size(kern_ctx *ctx, const kern_tensor *a,
                                                      const kern_tensor *b,
                                                      const kern_tensor *c,
                                                      const kern_gemm_s8s8s32_params *params,
                                                      size_t *bytes) {
    const char *op = "kern_gemm_s8s8s32_workspace_size";
    const kern_gemm_s8s8s32_packed_b *pb = params ? params->packed_b : NULL;
    kern_status st;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    st = kern__qg_s8_check(op, a, b, c, pb);
    if (st) return st;
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    kern__qg_s8_scratch(kern__qg_fns_rows(kern__qg_fns_ctx(ctx), a->shape[0]), a->shape[0],
                        c->shape[1], a->shape[1], pb != NULL,
                        &sh, &th);
    *bytes = kern__op_workspace_bytes(ctx, sh, th);
    kern__op_end(ctx);
    return KERN_OK;
}

/* The job of kern_gemm_s8s8s32 on ctx's table, its workspace carved: the
 * packed b (unless pb), its column sums and the packed a. */
static kern_status kern__qg_s8_setup(kern__qg_gjob *jb, kern_ctx *ctx, const kern__qg_fns *f,
                                     const kern_tensor *a, const kern_tensor *b,
                                     const kern_tensor *c, const kern_gemm_s8s8s32_packed_b *pb,
                                     const char *op) {
    int64_t M = a->shape[0], K = a->shape[1], N = c->shape[1], bbytes, cbytes, abytes;
    char *ws;
    memset(jb, 0, sizeof *jb);
    jb->f = f;
    jb->ctx = ctx;
    jb->a = a;
    jb->b = b;
    jb->c = c;
    jb->n = N;
    jb->k = K;
    jb->k4 = (K + 3) / 4;
    jb->n_np = (N + KERN_QGEMM_NR - 1) / KERN_QGEMM_NR;
    jb->mp = kern__qg_mpan_make(M, jb->f->mr_max);
    jb->p0 = 0;
    jb->p1 = jb->mp.n;
    jb->a_row_bytes = kern__qg_a_row_bytes(jb->f->a_fmt, jb->k4);
    jb->is_int = 1;
    jb->comp = KERN__QG_A_IS_U8(jb->f->a_fmt);
    bbytes = pb ? 0 : (int64_t)kern__qg_round64((size_t)(jb->n_np * jb->k4 * 128));
    cbytes = pb ? 0 : (int64_t)kern__qg_round64((size_t)N * 4);
    abytes = (int64_t)kern__qg_round64((size_t)(M * jb->a_row_bytes));
    ws = (char *)kern__workspace(ctx, (size_t)(bbytes + cbytes + abytes + 64));
    if (!ws)
        return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %lld bytes of workspace", op,
                         (long long)(bbytes + cbytes + abytes));
    if (pb) {
        jb->bdata = pb->data;
        jb->colsum = pb->colsum;
    } else {
        jb->bpack_w = (int8_t *)ws;
        jb->colsum_w = (int32_t *)(ws + bbytes);
        jb->bdata = jb->bpack_w;
        jb->colsum = jb->colsum_w;
    }
    jb->apack = ws + bbytes + cbytes;
    return KERN_OK;
}

/* kern_gemm_s8s8s32 on the table of ctx's level (widen: kern__qg_fns_variant). */
static kern_status kern__qg_gemm_s8s8s32(kern_ctx *ctx, const kern_tensor *a,
                                         const kern_tensor *b, const kern_tensor *c,
                                         const kern_gemm_s8s8s32_params *params, int widen) {
    const char *op = "kern_gemm_s8s8s32";
    const kern_gemm_s8s8s32_packed_b *pb = params ? params->packed_b : NULL;
    const kern__qg_fns *f;
    kern__qg_gjob jb;
    kern_status st;
    size_t sh, th;
    st = kern__qg_s8_check(op, a, b, c, pb);
    if (st) return st;
    if (a->shape[0] == 0 || c->shape[1] == 0) return KERN_OK;
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    f = kern__qg_fns_rows(kern__qg_fns_variant(kern_ctx_isa(ctx), widen), a->shape[0]);
    kern__qg_s8_scratch(f, a->shape[0], c->shape[1], a->shape[1], pb != NULL, &sh, &th);
    st = kern__op_workspace(ctx, op, params ? params->workspace : NULL,
                            params ? params->workspace_size : 0, sh, th);
    if (!st) st = kern__qg_s8_setup(&jb, ctx, f, a, b, c, pb, op);
    if (!st) st = kern__reserve_thread_scratch(ctx, th);
    if (!st)
        st = kern_parallel_for(ctx, (jb.bpack_w ? jb.n_np : 0) + jb.mp.n, kern__qg_pack_ab_task,
                               &jb);
    if (!st) {
        kern__qg_blocking(&jb, kern_ctx_threads(ctx));
        st = kern_parallel_for(ctx, jb.n_mb * jb.n_nb, kern__qg_gemm_task, &jb);
    }
    kern__op_end(ctx);
    return st;
}

KERN_API kern_status kern_gemm_s8s8s32(kern_ctx *ctx, const kern_tensor *a,
                                       const kern_tensor *b, const kern_tensor *c,
                                       const kern_gemm_s8s8s32_params *params) {
    return kern__qg_gemm_s8s8s32(ctx, a, b, c, params, 0);
}

/* ------------------------------------------------------ packed b */

static kern_status kern__qg_s8_pack_check(const char *op, const kern_tensor *b, int trans,
                                          kern_gemm_s8s8s32_packed_b **out) {
    kern_status st;
    int64_t K, N;
    if (!out) return kern__err(KERN_ERR_ARG, "%s: out is NULL", op);
    st = kern__qg_check_2d_int(b, KERN_I8, op, "b");
    if (st) return st;
    K = b->shape[trans ? 1 : 0];
    N = b->shape[trans ? 0 : 1];
    if (K < 1 || N < 1)
        return kern__err(KERN_ERR_SHAPE, "%s: b.shape=[%lld,%lld] is empty", op,
                         (long long)b->shape[0], (long long)b->shape[1]);
    if (K > KERN_QGEMM_MAX_K)
        return kern__err(KERN_ERR_SHAPE, "%s: K=%lld exceeds KERN_QGEMM_MAX_K=%d", op,
                         (long long)K, KERN_QGEMM_MAX_K);
    return KERN_OK;
}

typedef struct kern__qg_s8pack_job {
    kern_tensor b; /* the [K,N] view */
    kern_gemm_s8s8s32_packed_b *pb;
} kern__qg_s8pack_job;

static void kern__qg_s8pack_task(void *arg, int64_t p, int thread) {
    kern__qg_s8pack_job *jb = (kern__qg_s8pack_job *)arg;
    (void)thread;
    kern__qg_pack_b_panel(&jb->b, jb->pb->k4, p, jb->pb->data + p * jb->pb->k4 * 128,
                          jb->pb->colsum);
}

KERN_API kern_status kern_gemm_s8s8s32_pack_b(kern_ctx *ctx, const kern_tensor *b,
                                              kern_gemm_s8s8s32_packed_b **out,
                                              const kern_gemm_s8s8s32_pack_params *params) {
    const char *op = "kern_gemm_s8s8s32_pack_b";
    int trans = params && params->trans_b;
    kern__qg_s8pack_job jb;
    kern_gemm_s8s8s32_packed_b *pb;
    int64_t K, N, k4, np, data;
    size_t hdr = kern__qg_round64(sizeof(kern_gemm_s8s8s32_packed_b)), vec, total;
    kern_status st = kern__qg_s8_pack_check(op, b, trans, out);
    if (st) return st;
    K = b->shape[trans ? 1 : 0];
    N = b->shape[trans ? 0 : 1];
    k4 = (K + 3) / 4;
    np = (N + KERN_QGEMM_NR - 1) / KERN_QGEMM_NR;
    if (kern_mul_overflow_i64(np, k4 * 128, &data) || data > (int64_t)(SIZE_MAX / 2) ||
        (uint64_t)N > SIZE_MAX / 8)
        return kern__err(KERN_ERR_SHAPE, "%s: N=%lld, K=%lld is too large to pack", op,
                         (long long)N, (long long)K);
    vec = kern__qg_round64((size_t)N * 4);
    total = hdr + vec + (size_t)data;
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    pb = (kern_gemm_s8s8s32_packed_b *)kern__alloc(ctx, total);
    if (!pb) {
        kern__op_end(ctx);
        return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %zu bytes for the packed b", op,
                         total);
    }
    memset(pb, 0, sizeof *pb);
    pb->k = K;
    pb->n = N;
    pb->k4 = k4;
    pb->n_panels = np;
    pb->colsum = (int32_t *)(void *)((char *)pb + hdr);
    pb->data = (int8_t *)pb + hdr + vec;
    pb->data_bytes = (size_t)data;
    pb->bytes = total;
    jb.b = *b;
    if (trans) { /* the [K,N] view of an [N,K] b */
        jb.b.shape[0] = K;
        jb.b.shape[1] = N;
        jb.b.stride[0] = b->stride[1];
        jb.b.stride[1] = b->stride[0];
    }
    jb.pb = pb;
    st = kern_parallel_for(ctx, np, kern__qg_s8pack_task, &jb);
    kern__op_end(ctx);
    if (st) {
        kern__free(ctx, pb);
        return st;
    }
    *out = pb;
    return KERN_OK;
}

KERN_API void kern_gemm_s8s8s32_packed_b_free(kern_ctx *ctx, kern_gemm_s8s8s32_packed_b *p) {
    if (!p) return;
    if (!ctx) ctx = kern_default_ctx();
    kern__free(ctx, p);
}

KERN_API kern_status kern_gemm_s8s8s32_packed_b_get_info(const kern_gemm_s8s8s32_packed_b *p,
                                                        kern_gemm_s8s8s32_packed_b_info *out) {
    const char *op = "kern_gemm_s8s8s32_packed_b_get_info";
    if (!p) return kern__err(KERN_ERR_ARG, "%s: p is NULL", op);
    if (!out) return kern__err(KERN_ERR_ARG, "%s: out is NULL", op);
    memset(out, 0, sizeof *out);
    out->k = p->k;
    out->n = p->n;
    out->data_bytes = p->data_bytes;
    out->bytes = p->bytes;
    return KERN_OK;
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

/* The packed weight itself (its version and fields). */
static kern_status kern__qg_check_qw(const char *op, const kern_qweight *qw) {
    if (!qw) return kern__err(KERN_ERR_ARG, "%s: qw is NULL", op);
    if (qw->version != KERN_QWEIGHT_VERSION)
        return kern__err(KERN_ERR_UNSUPPORTED, "%s: qw has format version %u, want %u", op,
                         qw->version, KERN_QWEIGHT_VERSION);
    if (qw->n < 1 || qw->k < 1 || qw->k > KERN_QGEMM_MAX_K || !qw->data || !qw->scales ||
        !qw->colsum)
        return kern__err(KERN_ERR_ARG, "%s: qw is not a valid packed weight (N=%lld, K=%lld)",
                         op, (long long)qw->n, (long long)qw->k);
    return KERN_OK;
}

/* params.epilogue's operands: bias [N] ([M] rows with bias_per_row),
 * residual of y's shape (y itself or disjoint from it). */
static kern_status kern__qg_check_epilogue(const char *op, const kern_epilogue *e,
                                           const kern_tensor *y, int64_t M, int64_t N) {
    const kern_tensor *bias = e->bias, *r = e->residual;
    kern_status st =
        kern__epilogue_check(e, op, ((1u << KERN_ACT_COUNT) - 1u) | KERN__EPI_GLU_OK, 1, 1);
    int d;
    if (st) return st;
    if (bias) {
        int64_t want = e->bias_per_row ? M : N;
        st = kern_tensor_check(bias, op, "bias");
        if (!st) st = kern__qg_nonneg(bias, op, "bias");
        if (st) return st;
        if (bias->dtype != KERN_F32 && bias->dtype != KERN_BF16)
            return kern__err(KERN_ERR_DTYPE, "%s: bias.dtype=%s, want f32 or bf16", op,
                             kern_dtype_name(bias->dtype));
        if (bias->ndim != 1 || bias->shape[0] != want)
            return kern__err(KERN_ERR_SHAPE, "%s: bias must be [%lld] (%s)", op, (long long)want,
                             e->bias_per_row ? "one value per row of y" : "one per column");
        if (kern_tensors_overlap(bias, y))
            return kern__err(KERN_ERR_ARG, "%s: bias overlaps y", op);
    }
    if (r) {
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

/* Validates kern_qlinear's operands except the packed path (writes
 * nothing). */
static kern_status kern__qg_qlinear_check(const char *op, const kern_tensor *x,
                                          const kern_qweight *qw, const kern_tensor *y,
                                          const kern_qlinear_params *pp) {
    kern_qlinear_params p;
    kern_status st;
    int64_t N, K;
    int d;
    if (pp) p = *pp;
    else memset(&p, 0, sizeof p);
    st = kern__qg_check_qw(op, qw);
    if (!st) st = kern__qg_check_act(x, op, "x");
    if (!st) st = kern__qg_check_act(y, op, "y");
    if (st) return st;
    K = x->shape[x->ndim - 1];
    N = y->shape[y->ndim - 1];
    if (K != qw->k)
        return kern__err(KERN_ERR_SHAPE, "%s: x.shape[%d]=%lld but qw.k=%lld", op, x->ndim - 1,
                         (long long)K, (long long)qw->k);
    if (p.epilogue.glu && qw->n % 2)
        return kern__err(KERN_ERR_SHAPE,
                         "%s: params.epilogue.glu needs an even qw.n (gate and up rows in "
                         "kern_glu_pack's order), qw.n=%lld", op, (long long)qw->n);
    if (p.epilogue.glu ? 2 * N != qw->n : N != qw->n)
        return kern__err(KERN_ERR_SHAPE, "%s: y.shape[%d]=%lld but qw.n=%lld%s", op, y->ndim - 1,
                         (long long)N, (long long)qw->n,
                         p.epilogue.glu ? " (glu: y needs qw.n / 2 columns)" : "");
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
    return kern__qg_check_epilogue(op, &p.epilogue, y, kern__qg_rows(x), qw->n);
}

/* Rows of x quantized and packed per chunk (at most ~16 MiB of packed
 * activations): whole panels of the path's tile height. */
static int64_t kern__qg_qlinear_chunk_panels(const kern__qg_fns *ops, int64_t a_row_bytes,
                                             int64_t n_mpanels) {
    int64_t max_rows = KERN__QG_CHUNK_BYTES / a_row_bytes, chunk_panels;
    chunk_panels = max_rows / ops->mr_max;
    if (chunk_panels < 1) chunk_panels = 1;
    if (chunk_panels > n_mpanels) chunk_panels = n_mpanels;
    return chunk_panels;
}

/* Scratch of kern_qlinear on the path `ops`: one chunk of packed
 * activations and their scales shared; per thread the larger of a row of
 * codes and an int32 tile with its f32 twin. */
static void kern__qg_qlinear_scratch(const kern__qg_fns *ops, int64_t M, int64_t K,
                                     size_t *shared, size_t *thread) {
    int64_t k4 = (K + 3) / 4, a_row_bytes = kern__qg_a_row_bytes(ops->a_fmt, k4), max_rows;
    kern__qg_mpan mp;
    size_t s1 = (size_t)(k4 * 4 + 64), s2 = 2 * (size_t)ops->mr_max * KERN_QGEMM_NR * 4 + 64;
    if (M == 0) {
        *shared = *thread = 0;
        return;
    }
    mp = kern__qg_mpan_make(M, ops->mr_max);
    max_rows = (int64_t)ops->mr_max * kern__qg_qlinear_chunk_panels(ops, a_row_bytes, mp.n);
    *shared = kern__qg_round64((size_t)(max_rows * a_row_bytes)) +
              kern__qg_round64((size_t)max_rows * 4);
    *thread = s1 > s2 ? s1 : s2;
}

/* The packed weight must be for the int8 path of the table f. */
static kern_status kern__qg_qlinear_isa(const char *op, const kern__qg_fns *f,
                                        const kern_qweight *qw) {
    if (qw->isa != f->isa)
        return kern__err(KERN_ERR_UNSUPPORTED,
                         "%s: qw was packed for %s but the context selects %s; repack it", op,
                         kern_qgemm_isa_name(qw->isa), kern_qgemm_isa_name(f->isa));
    return KERN_OK;
}

KERN_API kern_status kern_qlinear_workspace_size(kern_ctx *ctx, const kern_tensor *x,
                                                 const kern_qweight *qw, const kern_tensor *y,
                                                 const kern_qlinear_params *params,
                                                 size_t *bytes) {
    const char *op = "kern_qlinear_workspace_size";
    kern_status st;
    const kern__qg_fns *f;
    size_t sh, th;
    if (!bytes) return kern__err(KERN_ERR_ARG, "%s: bytes is NULL", op);
    st = kern__qg_qlinear_check(op, x, qw, y, params);
    if (st) return st;
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    f = kern__qg_fns_rows(kern__qg_fns_ctx(ctx), kern__qg_rows(x));
    st = kern__qg_qlinear_isa(op, f, qw);
    if (!st) {
        kern__qg_qlinear_scratch(f, kern__qg_rows(x), qw->k, &sh, &th);
        *bytes = kern__op_workspace_bytes(ctx, sh, th);
    }
    kern__op_end(ctx);
    return st;
}

KERN_API void kern_qlinear_params_defaults(kern_qlinear_params *p) {
    if (p) kern_epilogue_defaults(&p->epilogue);
}

/* The epilogue of kern_qlinear as kern_base.h's kern__epi: the dequantized
 * tile is its acc (alpha 1), then bias, act, residual, out_scale, stored
 * in y's dtype. */
static void kern__qg_qlinear_epi(kern__qg_gjob *jb, const kern_qweight *qw, const kern_tensor *y,
                                 const kern_epilogue *ep) {
    const kern_tensor *res = ep->residual;
    int64_t y_flat = kern__qg_flat_rows(y), r_flat = res ? kern__qg_flat_rows(res) : 0;
    kern__epi *e = &jb->epi;
    kern__epi_init(e);
    kern__epi_set_bias(e, ep->bias, ep->bias_per_row);
    kern__epi_set_residual(e, res);
    e->act = ep->act;
    e->glu = ep->glu != 0;
    e->out_scale = ep->out_scale == 0.0f ? 1.0f : ep->out_scale;
    e->dst = (char *)y->data;
    e->dst_dt = y->dtype;
    e->dst_cs = 1;
    e->dst_rs = y_flat;
    e->res_cs = 1;
    e->res_rs = r_flat;
    jb->epi_flat = y_flat >= 0 && r_flat >= 0;
    jb->y = y;
    jb->res = res;
    jb->sw = qw->scales;
    jb->comp = KERN__QG_A_IS_U8(jb->f->a_fmt);
}

/* Quantizes and packs x chunk by chunk (at most ~16 MiB of packed
 * activations each), running the GEMM on each: two parallel phases per
 * chunk. */
static kern_status kern__qg_qlinear_run(kern__qg_gjob *jb, const char *op) {
    kern_ctx *ctx = jb->ctx;
    int64_t chunk_panels = kern__qg_qlinear_chunk_panels(jb->f, jb->a_row_bytes, jb->mp.n);
    int64_t max_rows = (int64_t)jb->f->mr_max * chunk_panels;
    int64_t abytes = (int64_t)kern__qg_round64((size_t)(max_rows * jb->a_row_bytes));
    int64_t sbytes = (int64_t)kern__qg_round64((size_t)max_rows * 4);
    size_t s1 = (size_t)(jb->k4 * 4 + 64);
    size_t s2 = 2 * (size_t)jb->f->mr_max * KERN_QGEMM_NR * 4 + 64;
    char *ws = (char *)kern__workspace(ctx, (size_t)(abytes + sbytes));
    kern_status st;
    if (!ws)
        return kern__err(KERN_ERR_NOMEM, "%s: cannot allocate %lld bytes of workspace", op,
                         (long long)(abytes + sbytes));
    jb->apack = ws;
    jb->sx = (float *)(ws + abytes);
    st = kern__reserve_thread_scratch(ctx, s1 > s2 ? s1 : s2);
    for (jb->p0 = 0; !st && jb->p0 < jb->mp.n; jb->p0 = jb->p1) {
        jb->p1 = jb->p0 + chunk_panels;
        if (jb->p1 > jb->mp.n) jb->p1 = jb->mp.n;
        jb->chunk_row0 = kern__qg_mpan_row0(&jb->mp, jb->p0);
        st = kern_parallel_for(ctx, jb->p1 - jb->p0, kern__qg_qpack_task, jb);
        if (!st) {
            kern__qg_blocking(jb, kern_ctx_threads(ctx));
            st = kern_parallel_for(ctx, jb->n_mb * jb->n_nb, kern__qg_gemm_task, jb);
        }
    }
    return st;
}

/* kern_qlinear on the table of ctx's level (widen: kern__qg_fns_variant). */
static kern_status kern__qg_qlinear(kern_ctx *ctx, const kern_tensor *x, const kern_qweight *qw,
                                    const kern_tensor *y, const kern_qlinear_params *params,
                                    int widen) {
    const char *op = "kern_qlinear";
    kern_qlinear_params p;
    kern__qg_gjob jb;
    kern_status st;
    int64_t M;
    size_t sh, th;
    if (params) p = *params;
    else memset(&p, 0, sizeof p);
    st = kern__qg_qlinear_check(op, x, qw, y, &p);
    if (st) return st;
    M = kern__qg_rows(x);
    st = kern__op_begin(&ctx, op);
    if (st) return st;
    memset(&jb, 0, sizeof jb);
    jb.f = kern__qg_fns_rows(kern__qg_fns_variant(kern_ctx_isa(ctx), widen), M);
    st = kern__qg_qlinear_isa(op, jb.f, qw);
    if (st || M == 0) {
        kern__op_end(ctx);
        return st;
    }
    kern__qg_qlinear_scratch(jb.f, M, qw->k, &sh, &th);
    st = kern__op_workspace(ctx, op, p.workspace, p.workspace_size, sh, th);
    if (!st) {
        jb.ctx = ctx;
        jb.x = x;
        jb.x_flat = kern__qg_flat_rows(x);
        jb.bdata = qw->data;
        jb.colsum = qw->colsum;
        jb.n = qw->n;
        jb.k = qw->k;
        jb.k4 = qw->k4;
        jb.n_np = qw->n_panels;
        jb.mp = kern__qg_mpan_make(M, jb.f->mr_max);
        jb.a_row_bytes = kern__qg_a_row_bytes(jb.f->a_fmt, jb.k4);
        kern__qg_qlinear_epi(&jb, qw, y, &p.epilogue);
        st = kern__qg_qlinear_run(&jb, op);
    }
    kern__op_end(ctx);
    return st;
}

KERN_API kern_status kern_qlinear(kern_ctx *ctx, const kern_tensor *x, const kern_qweight *qw,
                                  const kern_tensor *y, const kern_qlinear_params *params) {
    return kern__qg_qlinear(ctx, x, qw, y, params, 0);
}

#ifdef __cplusplus
}
#endif
KERN__IMPL_DIAG_END
#endif /* KERN_IMPLEMENTATION */
