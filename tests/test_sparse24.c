/* Tests for kernels/kern_sparse24.h: prune, compress/decompress, metadata
 * interop (hand-computed CUTLASS layout vectors), and the sparse linear
 * against a dense double-precision reference on the pruned weight. */
#define KERN_IMPLEMENTATION
#include "kern_sparse24.h"
#include "kt.h"

#include <float.h>

/* kern_sparse24_linear with the bias given apart (most cases vary it). */
static kern_status lin(kern_ctx *ctx, const kern_tensor *x, const kern_sparse24 *sw,
                       const kern_tensor *bias, const kern_tensor *y,
                       const kern_sparse24_linear_params *p) {
    kern_sparse24_linear_params q;
    if (p) q = *p;
    else memset(&q, 0, sizeof q);
    q.epilogue.bias = bias;
    return kern_sparse24_linear(ctx, x, sw, y, &q);
}

/* ------------------------------------------------------- references */

/* Magnitude rank for the reference prune: NaN above everything. */
static double ref_key(kern_dtype dt, const void *p, int64_t i) {
    double v = kt_get(p, dt, i);
    if (isnan(v)) return HUGE_VAL;
    if (isinf(v)) return 1e308;
    return fabs(v);
}

/* Reference prune of a contiguous [N,K]: sort each group's indices by
 * (key desc, index asc), keep the first two. */
static void ref_prune(kern_dtype dt, const void *w, void *out, int64_t N, int64_t K) {
    size_t es = kern_dtype_size(dt);
    int64_t n, g;
    for (n = 0; n < N; n++)
        for (g = 0; g < (K + 3) / 4; g++) {
            int r = (int)(K - 4 * g < 4 ? K - 4 * g : 4), order[4], i, j;
            for (i = 0; i < r; i++) order[i] = i;
            for (i = 0; i < r; i++)
                for (j = i + 1; j < r; j++) {
                    double ki = ref_key(dt, w, n * K + 4 * g + order[i]);
                    double kj = ref_key(dt, w, n * K + 4 * g + order[j]);
                    if (kj > ki || (kj == ki && order[j] < order[i])) {
                        int t = order[i]; order[i] = order[j]; order[j] = t;
                    }
                }
            for (i = 0; i < r; i++) {
                int64_t e = n * K + 4 * g + order[i];
                if (i < 2) memcpy((char *)out + e * es, (const char *)w + e * es, es);
                else memset((char *)out + e * es, 0, es);
            }
        }
}

static double gelu_ref(double v, int act) {
    if (act == KERN_ACT_GELU) return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    if (act == KERN_ACT_GELU_TANH)
        return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    if (act == KERN_ACT_RELU) return v > 0 ? v : 0.0;
    if (act == KERN_ACT_SILU) return v / (1.0 + exp(-v));
    return v;
}

/* Random 2:4 weight: prune of N(0,1) data plus some groups with 0 or 1
 * nonzeros. */
static void make_sparse_w(kt_rng *r, kern_dtype dt, void *w, int64_t N, int64_t K) {
    size_t es = kern_dtype_size(dt);
    void *dense = malloc((size_t)(N * K) * es);
    int64_t i;
    if (dt == KERN_I8)
        for (i = 0; i < N * K; i++) ((int8_t *)dense)[i] = (int8_t)kt_randint(r, -127, 128);
    else
        kt_fill_normal(r, dense, dt, N * K, 1.0);
    for (i = 0; i < N * K; i++) /* ~10% zeros so some groups have < 2 */
        if (kt_randint(r, 0, 10) == 0) memset((char *)dense + i * es, 0, es);
    ref_prune(dt, dense, w, N, K);
    free(dense);
}

/* -------------------------------------------------------------- prune */

KT_TEST(prune_hand) {
    /* one row, groups: plain, ties, NaN, zeros, Inf, -0 */
    float w[24] = {1, -3, 2, 0.5f,         /* keep -3, 2 */
                   2, 2, 2, 2,              /* ties: keep 0, 1 */
                   1, NAN, 5, -5,           /* NaN kept, then 5 (lower of the tie) */
                   0, 0, 0, 0,              /* all zero */
                   -INFINITY, 1, NAN, NAN,  /* NaN, NaN beat Inf; lower NaN first */
                   -0.0f, 0.0f, 0, 1e-30f}; /* 1e-30 and -0 (tie with 0: lower) */
    float want[24] = {0, -3, 2, 0, 2, 2, 0, 0, 0, NAN, 5, 0, 0, 0, 0, 0,
                      0, 0, NAN, NAN, -0.0f, 0, 0, 1e-30f};
    float out[24];
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, 1, 24), to = kern_tensor_2d(out, KERN_F32, 1, 24);
    int i;
    kt_poison(out, sizeof out);
    KT_OK(kern_sparse24_prune(kt_ctx(1, KERN_ISA_AUTO), &tw, &to, NULL));
    for (i = 0; i < 24; i++)
        KT_CHECK((isnan(want[i]) && isnan(out[i])) || (kern__f32_bits(want[i]) == kern__f32_bits(out[i])),
                 "out[%d]=%g want %g", i, out[i], want[i]);
    /* in place */
    KT_OK(kern_sparse24_prune(NULL, &tw, &tw, NULL));
    for (i = 0; i < 24; i++)
        KT_CHECK((isnan(want[i]) && isnan(w[i])) || w[i] == want[i], "in place w[%d]=%g", i, w[i]);
}

KT_TEST(prune_pad_and_errors) {
    float w[2 * 7] = {1, 2, 3, 4, 5, 6, 7, 7, 6, 5, 4, 3, 2, 1};
    float out[14], keep[14];
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, 2, 7), to = kern_tensor_2d(out, KERN_F32, 2, 7);
    kern_sparse24_params p;
    memset(&p, 0, sizeof p);
    kt_poison(out, sizeof out);
    memcpy(keep, out, sizeof out);
    KT_ERROR(kern_sparse24_prune(NULL, &tw, &to, &p), KERN_ERR_SHAPE, "multiple of 4");
    kt_assert_bytes_equal("out untouched", out, keep, sizeof out);
    p.pad_k = 1;
    KT_OK(kern_sparse24_prune(NULL, &tw, &to, &p));
    {
        /* tail group of 3: keep the two largest of the three */
        float want[14] = {0, 0, 3, 4, 0, 6, 7, 7, 6, 0, 0, 3, 2, 0};
        int i;
        for (i = 0; i < 14; i++) KT_CHECK(out[i] == want[i], "out[%d]=%g want %g", i, out[i], want[i]);
    }
    {
        kern_tensor tb = kern_tensor_2d(out, KERN_BF16, 2, 7);
        kern_tensor t3 = kern_tensor_2d(out, KERN_F32, 2, 6);
        kern_tensor part = kern_tensor_2d(w + 1, KERN_F32, 2, 7);
        kern_tensor i32 = kern_tensor_2d(out, KERN_I32, 2, 7);
        KT_ERROR(kern_sparse24_prune(NULL, &tw, &tb, &p), KERN_ERR_DTYPE, "out.dtype");
        KT_ERROR(kern_sparse24_prune(NULL, &tw, &t3, &p), KERN_ERR_SHAPE, "out.shape");
        KT_ERROR(kern_sparse24_prune(NULL, &i32, &i32, &p), KERN_ERR_DTYPE, "w.dtype");
        part.shape[1] = 6;
        tw.shape[1] = 6;
        KT_ERROR(kern_sparse24_prune(NULL, &tw, &part, &p), KERN_ERR_ARG, "overlaps");
        KT_ERROR(kern_sparse24_prune(NULL, NULL, &part, &p), KERN_ERR_ARG, "w");
    }
}

KT_TEST(prune_random_all_dtypes) {
    static const kern_dtype dts[4] = {KERN_F32, KERN_BF16, KERN_F16, KERN_I8};
    kt_rng r = kt_rng_make(1);
    int d;
    for (d = 0; d < 4; d++) {
        kern_dtype dt = dts[d];
        int64_t N = 13, K = 52, ld = 61, i, j;
        size_t es = kern_dtype_size(dt);
        char *w = (char *)kt_alloc((size_t)(N * K) * es, "w");
        char *want = (char *)kt_alloc((size_t)(N * K) * es, "want");
        char *out = (char *)kt_alloc((size_t)(N * ld) * es, "out");
        kern_tensor tw = kern_tensor_2d(w, dt, N, K), to = kern_tensor_2d(out, dt, N, K);
        kt_context("dtype %s", kern_dtype_name(dt));
        if (dt == KERN_I8)
            for (i = 0; i < N * K; i++) ((int8_t *)w)[i] = (int8_t)kt_randint(&r, -3, 4); /* many ties */
        else
            for (i = 0; i < N * K; i++) kt_set(w, dt, i, (double)kt_randint(&r, -3, 4)); /* ties */
        kt_set(w, dt, 5, NAN);
        ref_prune(dt, w, want, N, K);
        to.stride[0] = ld; /* strided out */
        kt_poison(out, (size_t)(N * ld) * es);
        KT_OK(kern_sparse24_prune(NULL, &tw, &to, NULL));
        for (i = 0; i < N; i++)
            for (j = 0; j < K; j++)
                KT_CHECK(memcmp(out + (i * ld + j) * es, want + (i * K + j) * es, es) == 0,
                         "[%lld,%lld] differs", (long long)i, (long long)j);
        kt_free(w);
        kt_free(want);
        kt_free(out);
    }
}

/* ---------------------------------------------------- compress */

KT_TEST(compress_roundtrip) {
    static const kern_dtype dts[4] = {KERN_F32, KERN_BF16, KERN_F16, KERN_I8};
    static const int64_t shapes[][2] = {{1, 4}, {17, 8}, {33, 60}, {16, 132}, {5, 7}, {40, 66}};
    kt_rng r = kt_rng_make(2);
    int d, s;
    for (d = 0; d < 4; d++)
        for (s = 0; s < 6; s++) {
            kern_dtype dt = dts[d];
            int64_t N = shapes[s][0], K = shapes[s][1], i;
            size_t es = kern_dtype_size(dt), bytes = (size_t)(N * K) * es;
            char *w = (char *)kt_alloc(bytes, "w"), *back = (char *)kt_alloc(bytes, "back");
            kern_tensor tw = kern_tensor_2d(w, dt, N, K), tb = kern_tensor_2d(back, dt, N, K);
            kern_sparse24 *sw = NULL;
            kern_sparse24_params p;
            memset(&p, 0, sizeof p);
            sw = NULL;
            p.pad_k = K % 4 != 0;
            kt_context("%s [%lld,%lld]", kern_dtype_name(dt), (long long)N, (long long)K);
            make_sparse_w(&r, dt, w, N, K);
            if (dt != KERN_I8) { /* NaN and Inf survive; -0 at a dropped place becomes +0 */
                int64_t nz = 0;
                for (i = 0; i < N * K; i++)
                    if (kern__sp24_nz(dt, w + i * es)) {
                        kt_set(w, dt, i, nz == 0 ? NAN : nz == 3 ? -INFINITY : kt_get(w, dt, i));
                        nz++;
                    } else if (i % 3 == 0) {
                        kt_set(w, dt, i, -0.0);
                    }
            }
            KT_OK(kern_sparse24_compress(NULL, &tw, &sw, &p));
            KT_REQUIRE(sw->values != NULL);
            KT_CHECK(sw->n == N && sw->k == K && sw->dtype == dt, "sw header");
            kt_poison(back, bytes);
            KT_OK(kern_sparse24_decompress(NULL, sw, &tb));
            for (i = 0; i < N * K; i++) {
                int wz = !kern__sp24_nz(dt, w + i * es);
                if (wz) KT_CHECK(!kern__sp24_nz(dt, back + i * es), "elem %lld not zero", (long long)i);
                else KT_CHECK(memcmp(w + i * es, back + i * es, es) == 0, "elem %lld differs",
                              (long long)i);
            }
            /* a zero comes back as +0, or as the same bits when it was a kept slot */
            for (i = 0; i < N * K; i++)
                if (!kern__sp24_nz(dt, w + i * es)) {
                    int z = 1;
                    size_t b;
                    for (b = 0; b < es; b++) z &= back[i * es + b] == 0;
                    KT_CHECK(z || memcmp(w + i * es, back + i * es, es) == 0,
                             "elem %lld is neither +0 nor w's bits", (long long)i);
                }
            kern_sparse24_free(NULL, sw);
            kt_free(w);
            kt_free(back);
        }
}

KT_TEST(compress_codes_for_few_nonzeros) {
    /* groups: none, only 0, only 1, only 2, only 3, (0,3), (1,3): codes as
     * PyTorch: 0xE 0x8 0x9 0xE 0xE 0xC 0xD; ROWMAJOR export shows them. */
    float w[32] = {0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0,
                   0, 0, 0, 4, 5, 0, 0, 6, 0, 7, 0, 8, 0, 0, 0, 0};
    unsigned char meta[4];
    float vals[16];
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, 1, 32);
    kern_tensor tv = kern_tensor_2d(vals, KERN_F32, 1, 16), tm = kern_tensor_2d(meta, KERN_U8, 1, 4);
    kern_sparse24 *sw = NULL;
    kern_sparse24_params p;
    float wantv[16] = {0, 0, 1, 0, 2, 0, 3, 0, 0, 4, 5, 6, 7, 8, 0, 0};
    int i;
    sw = NULL;
    memset(&p, 0, sizeof p);
    p.meta_layout = KERN_SPARSE24_META_ROWMAJOR;
    KT_OK(kern_sparse24_compress(NULL, &tw, &sw, NULL));
    KT_OK(kern_sparse24_export(NULL, sw, &tv, &tm, &p));
    /* word 0 = codes E,8,9,E -> 0xE98E; word 1 = E,C,D,E -> 0xEDCE */
    KT_CHECK(meta[0] == 0x8E && meta[1] == 0xE9, "word0 %02x%02x", meta[1], meta[0]);
    KT_CHECK(meta[2] == 0xCE && meta[3] == 0xED, "word1 %02x%02x", meta[3], meta[2]);
    for (i = 0; i < 16; i++) KT_CHECK(vals[i] == wantv[i], "vals[%d]=%g want %g", i, vals[i], wantv[i]);
    kern_sparse24_free(NULL, sw);
}

KT_TEST(compress_errors) {
    float w[3 * 12];
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, 3, 12);
    kern_sparse24 *sw = NULL, *keep;
    kern_sparse24_params p;
    int i;
    memset(&p, 0, sizeof p);
    for (i = 0; i < 36; i++) w[i] = (i % 4 < 2) ? 1.0f : 0.0f;
    w[2 * 12 + 4 + 3] = -1.0f; /* row 2 group 1: 3 nonzeros */
    w[2 * 12 + 8 + 2] = 5.0f;  /* row 2 group 2: also bad, but later */
    memset(&sw, 0x3c, sizeof sw);
    keep = sw;
    KT_ERROR(kern_sparse24_compress(NULL, &tw, &sw, &p), KERN_ERR_ARG, "row 2 group 1");
    KT_CHECK(memcmp(&sw, &keep, sizeof sw) == 0, "sw untouched");
    w[2 * 12 + 4 + 3] = 0.0f;
    w[2 * 12 + 8 + 2] = -0.0f; /* -0 is a zero */
    w[1] = NAN;                /* NaN counts as a nonzero, 2 in group 0: ok */
    sw = NULL;
    KT_OK(kern_sparse24_compress(NULL, &tw, &sw, &p));
    kern_sparse24_free(NULL, sw);
    w[2] = 3.0f; /* row 0 group 0: 1, NaN, 3 */
    KT_ERROR(kern_sparse24_compress(NULL, &tw, &sw, &p), KERN_ERR_ARG, "row 0 group 0");
    w[2] = 0.0f;
    {
        kern_tensor t10 = kern_tensor_2d(w, KERN_F32, 3, 10), ti = kern_tensor_2d(w, KERN_I32, 3, 12);
        kern_tensor sc = kern_tensor_1d(w, KERN_F32, 3);
        sw = NULL;
        KT_ERROR(kern_sparse24_compress(NULL, &t10, &sw, &p), KERN_ERR_SHAPE, "multiple of 4");
        KT_ERROR(kern_sparse24_compress(NULL, &ti, &sw, &p), KERN_ERR_DTYPE, "w.dtype");
        KT_ERROR(kern_sparse24_compress(NULL, &tw, NULL, &p), KERN_ERR_ARG, "sw");
        p.quantize = KERN_I8; /* w has a NaN */
        KT_ERROR(kern_sparse24_compress(NULL, &tw, &sw, &p), KERN_ERR_ARG, "not finite");
        p.quantize = KERN_F16;
        KT_ERROR(kern_sparse24_compress(NULL, &tw, &sw, &p), KERN_ERR_DTYPE, "quantize");
        p.quantize = KERN_DTYPE_NONE;
        p.scales = &sc;
        KT_ERROR(kern_sparse24_compress(NULL, &tw, &sw, &p), KERN_ERR_ARG, "scales");
        KT_CHECK(sw == NULL, "sw untouched");
    }
}

KT_TEST(compress_quantize) {
    kt_rng r = kt_rng_make(3);
    int64_t N = 19, K = 24, n, k;
    float *w = (float *)kt_alloc((size_t)(N * K) * 4, "w");
    int8_t *q = (int8_t *)kt_alloc((size_t)(N * K), "q");
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, N, K), tq = kern_tensor_2d(q, KERN_I8, N, K);
    kern_sparse24 *sw = NULL;
    kern_sparse24_params p;
    sw = NULL;
    memset(&p, 0, sizeof p);
    make_sparse_w(&r, KERN_F32, w, N, K);
    for (k = 0; k < K; k++) w[3 * K + k] = 0.0f; /* an all-zero row: scale 1 */
    for (k = 0; k < K; k++) /* a subnormal row: the scale clamps to FLT_MIN */
        if (w[5 * K + k] != 0.0f) w[5 * K + k] = w[5 * K + k] > 0 ? 1e-39f : -2e-39f;
    p.quantize = KERN_I8;
    KT_OK(kern_sparse24_compress(NULL, &tw, &sw, &p));
    KT_REQUIRE(sw->dtype == KERN_I8 && sw->scales != NULL);
    KT_OK(kern_sparse24_decompress(NULL, sw, &tq));
    for (n = 0; n < N; n++) {
        float amax = 0, s;
        for (k = 0; k < K; k++) amax = fabsf(w[n * K + k]) > amax ? fabsf(w[n * K + k]) : amax;
        /* kern_base.h's int8 rule: scale = absmax / 127 (1 for 0, at least
         * FLT_MIN), q = clamp(rne(v * (1 / scale)), -127, 127) */
        s = amax > 0 ? amax / 127.0f : 1.0f;
        if (s < FLT_MIN) s = FLT_MIN;
        KT_CHECK(sw->scales[n] == s, "scale[%lld]=%g want %g", (long long)n, sw->scales[n], s);
        for (k = 0; k < K; k++) {
            float qf = rintf(w[n * K + k] * (1.0f / s));
            int want = (int)(qf > 127.0f ? 127.0f : qf < -127.0f ? -127.0f : qf);
            KT_CHECK(q[n * K + k] == want, "q[%lld,%lld]=%d want %d", (long long)n, (long long)k,
                     q[n * K + k], want);
        }
    }
    kern_sparse24_free(NULL, sw);
    kt_free(w);
    kt_free(q);
}

/* ------------------------------------------------------ metadata */

/* Hand-computed CUTLASS positions (from the reorder described in the
 * header, worked out on paper): {rows, words per row, wide, r, c, pos}. */
static const int hand_pos[][6] = {
    /* 16-bit words, N=32 */
    {32, 2, 0, 0, 0, 0},  {32, 2, 0, 1, 0, 8},   {32, 2, 0, 8, 0, 1},  {32, 2, 0, 9, 0, 9},
    {32, 2, 0, 31, 0, 61}, {32, 2, 0, 0, 1, 2},  {32, 2, 0, 8, 1, 3},  {32, 2, 0, 2, 0, 16},
    {32, 2, 0, 16, 0, 4}, {32, 2, 0, 1, 1, 10},
    /* 16-bit, N=64, 4 words: column pair 1 starts at 2*N = 128 */
    {64, 4, 0, 0, 2, 128}, {64, 4, 0, 32, 0, 64}, {64, 4, 0, 33, 3, 128 + 64 + 8 + 2},
    /* 32-bit words, N=16 */
    {16, 2, 1, 0, 0, 0}, {16, 2, 1, 1, 0, 4}, {16, 2, 1, 8, 0, 1}, {16, 2, 1, 15, 0, 29},
    {16, 2, 1, 0, 1, 2}, {16, 2, 1, 8, 1, 3},
    /* 32-bit, N=32: second block of 16 rows starts at 32 */
    {32, 1, 1, 16, 0, 32}, {32, 1, 1, 17, 0, 36}};

/* PyTorch's older gather formula (torch/sparse/_semi_structured_conversions.py,
 * 16-bit words), an independent derivation of the same layout. */
static int64_t gather_pos16(int64_t r, int64_t c, int64_t N) {
    static const int magic1[4] = {0, 1, 4, 5};
    return (c % 2) * 2 + (c / 2) * 2 * N + (r % 8) * 8 + magic1[(r / 8) % 4] + (r / 32) * 64;
}

KT_TEST(meta_cutlass_positions) {
    size_t i;
    for (i = 0; i < sizeof hand_pos / sizeof hand_pos[0]; i++) {
        const int *h = hand_pos[i];
        int64_t got = kern__sp24_cutlass_pos(h[3], h[4], h[0], h[2]);
        KT_CHECK(got == h[5], "N=%d wide=%d (r=%d,c=%d): pos %lld want %d", h[0], h[2], h[3], h[4],
                 (long long)got, h[5]);
    }
    {
        int64_t N, r, c;
        for (N = 32; N <= 96; N += 32)
            for (r = 0; r < N; r++)
                for (c = 0; c < 6; c++)
                    KT_CHECK(kern__sp24_cutlass_pos(r, c, N, 0) == gather_pos16(r, c, N),
                             "N=%lld r=%lld c=%lld", (long long)N, (long long)r, (long long)c);
    }
}

/* Builds a bf16 [32,16] weight where row r's 4 group codes are a function of
 * r, exports it and checks the words at hand-computed positions. */
KT_TEST(meta_export_hand_vectors) {
    static const unsigned codes[6] = {0x4, 0x8, 0xC, 0x9, 0xD, 0xE};
    uint16_t w[32 * 32];
    uint16_t vals[32 * 16];
    unsigned char meta[32 * 4];
    kern_tensor tw = kern_tensor_2d(w, KERN_BF16, 32, 32);
    kern_tensor tv = kern_tensor_2d(vals, KERN_BF16, 32, 16), tm = kern_tensor_2d(meta, KERN_U8, 32, 4);
    kern_sparse24 *sw = NULL;
    int r, g;
    memset(w, 0, sizeof w);
    sw = NULL;
    for (r = 0; r < 32; r++)
        for (g = 0; g < 8; g++) {
            unsigned c = codes[(r + g) % 6];
            w[r * 32 + 4 * g + (c & 3)] = kern_f32_to_bf16((float)(r + 1));
            w[r * 32 + 4 * g + (c >> 2)] = kern_f32_to_bf16((float)-(g + 1));
        }
    KT_OK(kern_sparse24_compress(NULL, &tw, &sw, NULL));
    kt_poison(meta, sizeof meta);
    KT_OK(kern_sparse24_export(NULL, sw, &tv, &tm, NULL));
    {
        /* row 0 word 0: groups 0..3 -> codes 4,8,C,9 -> 0x9C84 at position 0.
         * row 1 word 0: codes 8,C,9,D -> 0xD9C8 at position 8.
         * row 8 word 0: (8..11) mod 6 = 2,3,4,5 -> C,9,D,E -> 0xED9C at 1.
         * row 31 word 0: (31..34) mod 6 = 1,2,3,4 -> 8,C,9,D -> 0xD9C8 at 61.
         * row 0 word 1: groups 4..7 -> 4,5,0,1 -> D,E,4,8 -> 0x84ED at 2.
         * row 8 word 1: (12..15) mod 6 = 0,1,2,3 -> 4,8,C,9 -> 0x9C84 at 3. */
        struct { int pos; unsigned word; } want[6] = {{0, 0x9C84}, {8, 0xD9C8}, {1, 0xED9C},
                                                     {61, 0xD9C8}, {2, 0x84ED}, {3, 0x9C84}};
        int i;
        for (i = 0; i < 6; i++) {
            unsigned got = meta[2 * want[i].pos] | (meta[2 * want[i].pos + 1] << 8);
            KT_CHECK(got == want[i].word, "word at %d: %04x want %04x", want[i].pos, got, want[i].word);
        }
        /* values: row 1 group 0 code 8 -> (2, -1) */
        KT_CHECK(kern_bf16_to_f32(vals[16]) == 2.0f && kern_bf16_to_f32(vals[17]) == -1.0f,
                 "values row 1: %g %g", kern_bf16_to_f32(vals[16]), kern_bf16_to_f32(vals[17]));
    }
    kern_sparse24_free(NULL, sw);
}

/* PyTorch 2.15's sparse_semi_structured_from_dense_cutlass (the CUTLASS
 * conversion behind to_sparse_semi_structured; plain tensor code, run on the
 * CPU here, no GPU) applied to the weight built by interop_dense(); the
 * generator script is in docs/sparse24.md. */
static const uint16_t torch_meta_bf16[128] = {
    0xee94, 0xe8d8, 0xe8d8, 0x49ec, 0x49ec, 0x8ee9, 0x8ee9, 0xce8d, 0xece8, 0xe949, 0xe949,
    0x8d8e, 0x8d8e, 0x9ece, 0x9ece, 0xee94, 0x8ee9, 0xce8d, 0xce8d, 0x949e, 0x949e, 0xd8ee,
    0xd8ee, 0xece8, 0x9ece, 0xee94, 0xee94, 0xe8d8, 0xe8d8, 0x49ec, 0x49ec, 0x8ee9, 0xd8ee,
    0xece8, 0xece8, 0xe949, 0xe949, 0x8d8e, 0x8d8e, 0x9ece, 0x49ec, 0x8ee9, 0x8ee9, 0xce8d,
    0xce8d, 0x949e, 0x949e, 0xd8ee, 0x8d8e, 0x9ece, 0x9ece, 0xee94, 0xee94, 0xe8d8, 0xe8d8,
    0x49ec, 0x949e, 0xd8ee, 0xd8ee, 0xece8, 0xece8, 0xe949, 0xe949, 0x8d8e, 0x49ec, 0x8ee9,
    0x8ee9, 0xce8d, 0xce8d, 0x949e, 0x949e, 0xd8ee, 0x8d8e, 0x9ece, 0x9ece, 0xee94, 0xee94,
    0xe8d8, 0xe8d8, 0x49ec, 0x949e, 0xd8ee, 0xd8ee, 0xece8, 0xece8, 0xe949, 0xe949, 0x8d8e,
    0xe8d8, 0x49ec, 0x49ec, 0x8ee9, 0x8ee9, 0xce8d, 0xce8d, 0x949e, 0xe949, 0x8d8e, 0x8d8e,
    0x9ece, 0x9ece, 0xee94, 0xee94, 0xe8d8, 0xce8d, 0x949e, 0x949e, 0xd8ee, 0xd8ee, 0xece8,
    0xece8, 0xe949, 0xee94, 0xe8d8, 0xe8d8, 0x49ec, 0x49ec, 0x8ee9, 0x8ee9, 0xce8d, 0xece8,
    0xe949, 0xe949, 0x8d8e, 0x8d8e, 0x9ece, 0x9ece, 0xee94};
static const uint32_t torch_meta_i8[64] = {
    0xe8d8ee94, 0x49ece8d8, 0x8ee949ec, 0xce8d8ee9, 0xe949ece8, 0x8d8ee949, 0x9ece8d8e,
    0xee949ece, 0xce8d8ee9, 0x949ece8d, 0xd8ee949e, 0xece8d8ee, 0xee949ece, 0xe8d8ee94,
    0x49ece8d8, 0x8ee949ec, 0xece8d8ee, 0xe949ece8, 0x8d8ee949, 0x9ece8d8e, 0x8ee949ec,
    0xce8d8ee9, 0x949ece8d, 0xd8ee949e, 0x9ece8d8e, 0xee949ece, 0xe8d8ee94, 0x49ece8d8,
    0xd8ee949e, 0xece8d8ee, 0xe949ece8, 0x8d8ee949, 0x8ee949ec, 0xce8d8ee9, 0x949ece8d,
    0xd8ee949e, 0x9ece8d8e, 0xee949ece, 0xe8d8ee94, 0x49ece8d8, 0xd8ee949e, 0xece8d8ee,
    0xe949ece8, 0x8d8ee949, 0x49ece8d8, 0x8ee949ec, 0xce8d8ee9, 0x949ece8d, 0x8d8ee949,
    0x9ece8d8e, 0xee949ece, 0xe8d8ee94, 0x949ece8d, 0xd8ee949e, 0xece8d8ee, 0xe949ece8,
    0xe8d8ee94, 0x49ece8d8, 0x8ee949ec, 0xce8d8ee9, 0xe949ece8, 0x8d8ee949, 0x9ece8d8e,
    0xee949ece};

static void interop_dense(kern_dtype dt, int N, int K, void *d) {
    static const unsigned masks[11] = {0x3, 0x5, 0x9, 0x6, 0xA, 0xC, 0x0, 0x1, 0x2, 0x4, 0x8};
    int r, g, i;
    memset(d, 0, (size_t)(N * K) * kern_dtype_size(dt));
    for (r = 0; r < N; r++)
        for (g = 0; g < K / 4; g++) {
            unsigned m = masks[(r * 7 + g * 3) % 11];
            for (i = 0; i < 4; i++)
                if (m >> i & 1) {
                    int v = ((r * 5 + g * 11 + i) % 13) - 6;
                    kt_set(d, dt, r * K + 4 * g + i, v ? v : 7);
                }
        }
}

KT_TEST(meta_matches_pytorch) {
    int d;
    for (d = 0; d < 2; d++) {
        kern_dtype dt = d ? KERN_I8 : KERN_BF16;
        int N = 32, K = 64, C = d ? 2 : 4, i;
        char dense[32 * 64 * 2], back[32 * 64 * 2], vals[32 * 32 * 2];
        uint32_t meta[32 * 4];
        kern_tensor tw = kern_tensor_2d(dense, dt, N, K), tb = kern_tensor_2d(back, dt, N, K);
        kern_tensor tv = kern_tensor_2d(vals, dt, N, K / 2);
        kern_tensor tm = d ? kern_tensor_2d(meta, KERN_I32, N, C) : kern_tensor_2d(meta, KERN_U8, N, 2 * C);
        kern_sparse24 *sw = NULL, *sw2 = NULL;
        double sum = 0;
        sw = NULL;
        sw2 = NULL;
        kt_context("%s", kern_dtype_name(dt));
        interop_dense(dt, N, K, dense);
        KT_OK(kern_sparse24_compress(NULL, &tw, &sw, NULL));
        KT_OK(kern_sparse24_export(NULL, sw, &tv, &tm, NULL));
        if (d) KT_CHECK(memcmp(meta, torch_meta_i8, sizeof torch_meta_i8) == 0, "i32 meta differs from PyTorch's");
        else KT_CHECK(memcmp(meta, torch_meta_bf16, sizeof torch_meta_bf16) == 0, "i16 meta differs from PyTorch's");
        for (i = 0; i < N * K / 2; i++) sum += (i + 1) * kt_get(vals, dt, i);
        KT_CHECK(sum == 226959.0, "values checksum %g, PyTorch's is 226959", sum);
        /* PyTorch's words imported give back the dense weight */
        if (d) memcpy(meta, torch_meta_i8, sizeof torch_meta_i8);
        else memcpy(meta, torch_meta_bf16, sizeof torch_meta_bf16);
        KT_OK(kern_sparse24_import(NULL, &tv, &tm, &sw2, NULL));
        KT_OK(kern_sparse24_decompress(NULL, sw2, &tb));
        KT_CHECK(memcmp(dense, back, (size_t)(N * K) * kern_dtype_size(dt)) == 0, "import of PyTorch's meta");
        kern_sparse24_free(NULL, sw);
        kern_sparse24_free(NULL, sw2);
    }
}

KT_TEST(meta_export_import_roundtrip) {
    static const kern_dtype dts[4] = {KERN_F32, KERN_BF16, KERN_F16, KERN_I8};
    kt_rng r = kt_rng_make(4);
    int d, lay;
    for (d = 0; d < 4; d++)
        for (lay = 0; lay < 2; lay++) {
            kern_dtype dt = dts[d];
            int wide = dt == KERN_I8;
            int64_t N = lay ? 21 : 64, K = lay ? 44 : 64;
            int64_t C = lay ? (K + (wide ? 31 : 15)) / (wide ? 32 : 16) : K / (wide ? 32 : 16);
            size_t es = kern_dtype_size(dt);
            char *w = (char *)kt_alloc((size_t)(N * K) * es, "w");
            char *back = (char *)kt_alloc((size_t)(N * K) * es, "back");
            char *vals = (char *)kt_alloc((size_t)(N * K / 2) * es, "vals");
            char *meta = (char *)kt_alloc((size_t)(N * C) * 4, "meta");
            float *sc = (float *)kt_alloc((size_t)N * 4, "scales");
            kern_tensor tw = kern_tensor_2d(w, dt, N, K), tb = kern_tensor_2d(back, dt, N, K);
            kern_tensor tv = kern_tensor_2d(vals, dt, N, K / 2);
            kern_tensor tm = wide ? kern_tensor_2d(meta, KERN_I32, N, C) : kern_tensor_2d(meta, KERN_U8, N, 2 * C);
            kern_tensor tsc = kern_tensor_1d(sc, KERN_F32, N);
            kern_sparse24 *sw = NULL, *sw2 = NULL;
            kern_sparse24_params p;
            int64_t i;
            sw = NULL;
            sw2 = NULL;
            memset(&p, 0, sizeof p);
            p.meta_layout = lay ? KERN_SPARSE24_META_ROWMAJOR : KERN_SPARSE24_META_CUTLASS;
            kt_context("%s layout %d", kern_dtype_name(dt), lay);
            for (i = 0; i < N; i++) sc[i] = (float)(i + 1) * 0.25f;
            make_sparse_w(&r, dt, w, N, K);
            if (wide) p.scales = &tsc;
            KT_OK(kern_sparse24_compress(NULL, &tw, &sw, &p));
            kt_poison(meta, (size_t)(N * C) * 4);
            KT_OK(kern_sparse24_export(NULL, sw, &tv, &tm, &p));
            KT_OK(kern_sparse24_import(NULL, &tv, &tm, &sw2, &p));
            KT_REQUIRE(sw2->values != NULL);
            KT_CHECK(sw2->bytes == sw->bytes &&
                         memcmp(sw2->values, sw->values,
                                sw->bytes - (size_t)((char *)sw->values - (char *)sw)) == 0,
                     "imported storage differs");
            kt_poison(back, (size_t)(N * K) * es);
            KT_OK(kern_sparse24_decompress(NULL, sw2, &tb));
            for (i = 0; i < N * K; i++)
                KT_CHECK(memcmp(w + i * es, back + i * es, es) == 0 ||
                             (!kern__sp24_nz(dt, w + i * es) && !kern__sp24_nz(dt, back + i * es)),
                         "elem %lld", (long long)i);
            /* errors: too small meta, wrong dtype, bad code, CUTLASS alignment */
            {
                kern_tensor small = tm;
                kern_sparse24 *sw3 = NULL;
                sw3 = NULL;
                small.shape[1] -= 1;
                KT_ERROR(kern_sparse24_import(NULL, &tv, &small, &sw3, &p), KERN_ERR_SHAPE, "too small");
                KT_ERROR(kern_sparse24_export(NULL, sw, &tv, &small, &p), KERN_ERR_SHAPE, "too small");
                small = tm;
                small.dtype = wide ? KERN_U8 : KERN_I32;
                KT_ERROR(kern_sparse24_import(NULL, &tv, &small, &sw3, &p), KERN_ERR_DTYPE, "meta.dtype");
                if (!lay) {
                    /* a code with first index >= second: word 0 of row 0 (pos 0) */
                    unsigned char save = (unsigned char)meta[0];
                    meta[0] = (char)((save & 0xF0) | 0x6); /* (2,1) */
                    KT_ERROR(kern_sparse24_import(NULL, &tv, &tm, &sw3, &p), KERN_ERR_ARG, "row 0 group 0");
                    meta[0] = (char)save;
                    small = tm;
                    small.shape[0] = wide ? 8 : 16; /* N not aligned */
                    {
                        kern_tensor tv2 = tv;
                        tv2.shape[0] = small.shape[0];
                        KT_ERROR(kern_sparse24_import(NULL, &tv2, &small, &sw3, &p), KERN_ERR_SHAPE,
                                 "CUTLASS");
                    }
                }
                KT_CHECK(sw3 == NULL, "sw3 untouched");
            }
            kern_sparse24_free(NULL, sw);
            kern_sparse24_free(NULL, sw2);
            kt_free(w); kt_free(back); kt_free(vals); kt_free(meta); kt_free(sc);
        }
}

/* -------------------------------------------------------- linear */

typedef struct lin_case {
    int64_t M, N, K;
    kern_dtype wdt, xdt, ydt;
    int bias, act, res, strided;
    int per_row;     /* bias [M] (epilogue.bias_per_row) */
    float out_scale; /* 0: default */
} lin_case;

/* Runs one linear case on ctx, compares with the dense reference, returns
 * a malloc'ed copy of y (for the thread-determinism check). */
static void *run_linear(kern_ctx *ctx, const lin_case *c, uint64_t salt) {
    kt_rng r = kt_rng_make(salt);
    int64_t M = c->M, N = c->N, K = c->K, i, j, k;
    int64_t ldx = c->strided ? K + 3 : K, ldy = c->strided ? N + 5 : N, ldr = c->strided ? N + 2 : N;
    int64_t bst = c->strided ? 2 : 1;
    kern_dtype wst = c->wdt == KERN_I8 ? KERN_I8 : c->wdt;
    size_t wes = kern_dtype_size(wst), xes = kern_dtype_size(c->xdt), yes = kern_dtype_size(c->ydt);
    char *w = (char *)kt_alloc((size_t)(N * K) * wes, "w");
    char *x = (char *)kt_alloc((size_t)(M * ldx) * xes, "x");
    char *y = (char *)kt_alloc((size_t)(M * ldy) * yes, "y");
    char *res = c->res ? (char *)kt_alloc((size_t)(M * ldr) * yes, "res") : NULL;
    int64_t nb = c->per_row ? M : N;
    float *bias = c->bias ? (float *)kt_alloc((size_t)(nb * bst) * 4, "bias") : NULL;
    float *sc = (float *)kt_alloc((size_t)N * 4, "scales");
    double *want = (double *)malloc((size_t)(M * N) * sizeof(double));
    void *copy = malloc((size_t)(M * ldy) * yes);
    kern_tensor tw = kern_tensor_2d(w, wst, N, K), tx = kern_tensor_2d(x, c->xdt, M, K);
    kern_tensor ty = kern_tensor_2d(y, c->ydt, M, N), tr = kern_tensor_2d(res, c->ydt, M, N);
    kern_tensor tb = kern_tensor_1d(bias, KERN_F32, nb), tsc = kern_tensor_1d(sc, KERN_F32, N);
    kern_sparse24 *sw = NULL;
    kern_sparse24_params sp;
    kern_sparse24_linear_params lp;
    sw = NULL;
    memset(&sp, 0, sizeof sp);
    memset(&lp, 0, sizeof lp);
    tx.stride[0] = ldx;
    ty.stride[0] = ldy;
    tr.stride[0] = ldr;
    tb.stride[0] = bst;
    make_sparse_w(&r, wst, w, N, K);
    kt_fill_normal(&r, x, c->xdt, M * ldx, 1.0);
    if (res) kt_fill_normal(&r, res, c->ydt, M * ldr, 1.0);
    if (bias) kt_fill_normal(&r, bias, KERN_F32, nb * bst, 1.0);
    for (i = 0; i < N; i++) sc[i] = (float)kt_uniform(&r, 0.001, 0.02);
    if (wst == KERN_I8) sp.scales = &tsc;
    sp.pad_k = K % 4 != 0;
    if (kern_sparse24_compress(ctx, &tw, &sw, &sp) != KERN_OK) {
        KT_CHECK(0, "compress failed: %s", kern_last_error());
        goto done;
    }
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double a = 0;
            for (k = 0; k < K; k++) {
                double wv = kt_get(w, wst, j * K + k);
                if (wst == KERN_I8) wv *= sc[j];
                a += wv * kt_get(x, c->xdt, i * ldx + k);
            }
            if (bias) a += bias[(c->per_row ? i : j) * bst];
            a = gelu_ref(a, c->act);
            if (res) a += kt_get(res, c->ydt, i * ldr + j);
            if (c->out_scale != 0.0f) a *= c->out_scale;
            want[i * N + j] = a;
        }
    kt_poison(y, (size_t)(M * ldy) * yes);
    lp.epilogue.act = (kern_act)c->act;
    lp.epilogue.residual = res ? &tr : NULL;
    lp.epilogue.bias_per_row = c->per_row;
    lp.epilogue.out_scale = c->out_scale;
    KT_OK(lin(ctx, &tx, sw, bias ? &tb : NULL, &ty, &lp));
    {
        /* f32 accumulation over K/2 products: scale the per-dtype tolerance
         * by sqrt(K) (random-walk growth of the rounding error) */
        kt_tol_t tol = kt_tol_scaled(c->ydt, c->ydt == KERN_F32 ? sqrt((double)K) : 1.0);
        for (i = 0; i < M; i++)
            if (!kt_assert_close("y", y + i * ldy * (int64_t)yes, c->ydt, want + i * N, N, tol)) break;
        /* padding between rows untouched (still poison) */
        if (c->strided && M > 1) {
            unsigned char *pad = (unsigned char *)y + (N * yes);
            KT_CHECK(pad[0] == 0xFF && pad[5 * yes - 1] == 0xFF, "y row padding written");
        }
    }
    memcpy(copy, y, (size_t)(M * ldy) * yes);
    kern_sparse24_free(ctx, sw);
done:
    kt_free(w); kt_free(x); kt_free(y); kt_free(res); kt_free(bias); kt_free(sc);
    free(want);
    return copy;
}

static void run_grid(kern_dtype wdt, kern_dtype xdt, kern_dtype ydt, uint64_t salt, int threads_check) {
    static const int64_t Ms[6] = {1, 3, 16, 17, 64, 129};
    static const int64_t Ns[4] = {8, 17, 64, 257};
    static const int64_t Ks[6] = {4, 8, 60, 64, 132, 4096};
    kt_rng r = kt_rng_make(salt);
    int idx;
#ifdef KT_SANITIZER
    int ncases = 10;
#else
    int ncases = 26;
#endif
    for (idx = 0; idx < ncases; idx++) {
        lin_case c;
        int mi = idx % 6, ni = (idx / 6 + idx) % 4, ki = (int)kt_randint(&r, 0, 5);
        if (idx % 13 == 12) ki = 5; /* a couple of K=4096 cases */
        memset(&c, 0, sizeof c);
        c.M = Ms[mi]; c.N = Ns[ni]; c.K = Ks[ki];
        if (c.K == 4096 && c.M * c.N > 64 * 64) c.M = 17; /* keep the long cases cheap */
        c.wdt = wdt; c.xdt = xdt; c.ydt = ydt;
        c.bias = idx % 3 != 0;
        c.act = idx % 4 == 1 ? KERN_ACT_GELU : idx % 4 == 3 ? KERN_ACT_GELU_TANH : 0;
        c.res = idx % 5 >= 3;
        c.strided = idx % 2;
        {
            KT_FOR_EACH_ISA(isa, ctx, 1) {
                void *a;
                kt_context("%s w=%s x=%s y=%s M=%lld N=%lld K=%lld bias=%d act=%d res=%d strided=%d",
                           kern_isa_name(isa), kern_dtype_name(wdt), kern_dtype_name(xdt),
                           kern_dtype_name(ydt), (long long)c.M, (long long)c.N, (long long)c.K,
                           c.bias, c.act, c.res, c.strided);
                a = run_linear(ctx, &c, salt * 1000 + (uint64_t)idx);
                if (threads_check) {
                    kern_ctx *c2 = kt_ctx(2, isa);
                    void *b = run_linear(c2, &c, salt * 1000 + (uint64_t)idx);
                    size_t bytes = (size_t)(c.M * (c.strided ? c.N + 5 : c.N)) * kern_dtype_size(ydt);
                    kt_assert_bytes_equal("1 vs 2 threads", a, b, bytes);
                    free(b);
                }
                free(a);
            }
        }
    }
}

KT_TEST(linear_f32) { run_grid(KERN_F32, KERN_F32, KERN_F32, 11, 1); }
KT_TEST(linear_f32_to_bf16) { run_grid(KERN_F32, KERN_F32, KERN_BF16, 12, 0); }
KT_TEST(linear_bf16) { run_grid(KERN_BF16, KERN_BF16, KERN_BF16, 13, 1); }
KT_TEST(linear_bf16_to_f32) { run_grid(KERN_BF16, KERN_BF16, KERN_F32, 14, 0); }
KT_TEST(linear_i8_f32) { run_grid(KERN_I8, KERN_F32, KERN_F32, 15, 1); }
KT_TEST(linear_i8_bf16) { run_grid(KERN_I8, KERN_BF16, KERN_BF16, 16, 0); }

/* The epilogue options of kern_base.h's epilogue (RELU, SILU, bias_per_row,
 * out_scale) against the dense reference, small-M and large-M shapes, every
 * level. */
KT_TEST(linear_epilogue_options) {
    static const kern_dtype dts[3][3] = {{KERN_F32, KERN_F32, KERN_F32},
                                         {KERN_BF16, KERN_BF16, KERN_BF16},
                                         {KERN_I8, KERN_F32, KERN_F32}};
    static const int acts[4] = {KERN_ACT_RELU, KERN_ACT_SILU, KERN_ACT_GELU, KERN_ACT_NONE};
    static const float scales[3] = {0.0f, 0.5f, 3.0f};
    int idx;
    for (idx = 0; idx < 18; idx++) {
        lin_case c;
        memset(&c, 0, sizeof c);
        c.M = idx % 3 == 0 ? 3 : idx % 3 == 1 ? 17 : 70;
        c.N = idx % 2 ? 40 : 24;
        c.K = idx % 4 < 2 ? 68 : 12;
        c.wdt = dts[idx % 3 == 2 ? (idx / 3) % 3 : idx % 3][0];
        c.xdt = dts[idx % 3 == 2 ? (idx / 3) % 3 : idx % 3][1];
        c.ydt = dts[idx % 3 == 2 ? (idx / 3) % 3 : idx % 3][2];
        c.bias = idx % 5 != 4;
        c.per_row = idx % 2;
        c.act = acts[idx % 4];
        c.res = idx % 3 != 1;
        c.strided = (idx / 2) % 2;
        c.out_scale = scales[idx % 3];
        {
            KT_FOR_EACH_ISA(isa, ctx, 1) {
                kt_context("%s w=%s M=%lld N=%lld K=%lld bias=%d per_row=%d act=%d res=%d "
                           "out_scale=%g", kern_isa_name(isa), kern_dtype_name(c.wdt),
                           (long long)c.M, (long long)c.N, (long long)c.K, c.bias, c.per_row,
                           c.act, c.res, (double)c.out_scale);
                free(run_linear(ctx, &c, 500 + (uint64_t)idx));
            }
        }
    }
}

/* Fused == unfused, bit for bit, on every level: kern_sparse24_linear with
 * bias, each act, residual and out_scale against the same call with the
 * bias alone into f32 followed by the shared kern__s_act, + residual,
 * * out_scale, rounded once to y's dtype. Small-M and large-M shapes, f32,
 * bf16 and i8 weights, f32 and bf16 y, per-column and per-row bias. */
KT_TEST(fused_equals_unfused) {
    static const kern_dtype wx[3][2] = {{KERN_F32, KERN_F32}, {KERN_BF16, KERN_BF16}, {KERN_I8, KERN_F32}};
    static const int64_t Ms[2] = {5, 70};
    const int64_t N = 40, K = 68;
    int wi, yi, mi, a, pr;
    for (wi = 0; wi < 3; wi++)
        for (yi = 0; yi < 2; yi++)
            for (mi = 0; mi < 2; mi++)
                for (pr = 0; pr < 2; pr++) {
                    const kern_dtype wdt = wx[wi][0], xdt = wx[wi][1];
                    const kern_dtype ydt = yi ? KERN_BF16 : KERN_F32;
                    const int64_t M = Ms[mi];
                    const size_t yes = kern_dtype_size(ydt);
                    kt_rng r = kt_rng_make(900 + (uint64_t)(wi * 8 + yi * 4 + mi * 2 + pr));
                    char *w = (char *)kt_alloc((size_t)(N * K) * kern_dtype_size(wdt), "w");
                    char *x = (char *)kt_alloc((size_t)(M * K) * kern_dtype_size(xdt), "x");
                    char *y = (char *)kt_alloc((size_t)(M * N) * yes, "y");
                    char *u = (char *)kt_alloc((size_t)(M * N) * yes, "unfused");
                    char *res = (char *)kt_alloc((size_t)(M * N) * yes, "res");
                    float *y0 = (float *)kt_alloc((size_t)(M * N) * 4, "y0");
                    float *bias = (float *)kt_alloc((size_t)(pr ? M : N) * 4, "bias");
                    float *sc = (float *)kt_alloc((size_t)N * 4, "scales");
                    kern_tensor tw = kern_tensor_2d(w, wdt, N, K), tx = kern_tensor_2d(x, xdt, M, K);
                    kern_tensor ty = kern_tensor_2d(y, ydt, M, N), tr = kern_tensor_2d(res, ydt, M, N);
                    kern_tensor t0 = kern_tensor_2d(y0, KERN_F32, M, N);
                    kern_tensor tb = kern_tensor_1d(bias, KERN_F32, pr ? M : N);
                    kern_tensor tsc = kern_tensor_1d(sc, KERN_F32, N);
                    kern_sparse24_params sp;
                    kern_sparse24 *sw = NULL;
                    int64_t i;
                    memset(&sp, 0, sizeof sp);
                    make_sparse_w(&r, wdt, w, N, K);
                    kt_fill_normal(&r, x, xdt, M * K, 1.0);
                    kt_fill_normal(&r, res, ydt, M * N, 1.0);
                    kt_fill_normal(&r, bias, KERN_F32, pr ? M : N, 1.0);
                    for (i = 0; i < N; i++) sc[i] = (float)kt_uniform(&r, 0.05, 0.2);
                    if (wdt == KERN_I8) sp.scales = &tsc;
                    KT_OK(kern_sparse24_compress(NULL, &tw, &sw, &sp));
                    for (a = 0; a < (int)KERN_ACT_COUNT; a++) {
                        KT_FOR_EACH_ISA(isa, ctx, 1) {
                            kern_sparse24_linear_params lp;
                            kt_context("%s w=%s y=%s M=%lld bias_per_row=%d act=%s",
                                       kern_isa_name(isa), kern_dtype_name(wdt),
                                       kern_dtype_name(ydt), (long long)M, pr,
                                       kern_act_name((kern_act)a));
                            memset(&lp, 0, sizeof lp);
                            lp.epilogue.bias = &tb;
                            lp.epilogue.bias_per_row = pr;
                            KT_OK(kern_sparse24_linear(ctx, &tx, sw, &t0, &lp));
                            for (i = 0; i < M * N; i++) {
                                float v = kern__s_act(y0[i], (kern_act)a);
                                v += kern__s_load_f32(res + i * (int64_t)yes, ydt, 1);
                                v *= 0.75f;
                                kern__s_store_f32(u + i * (int64_t)yes, ydt, v, 1, 0);
                            }
                            lp.epilogue.act = (kern_act)a;
                            lp.epilogue.residual = &tr;
                            lp.epilogue.out_scale = 0.75f;
                            kt_poison(y, (size_t)(M * N) * yes);
                            KT_OK(kern_sparse24_linear(ctx, &tx, sw, &ty, &lp));
                            kt_assert_bytes_equal("fused vs unfused", y, u, (size_t)(M * N) * yes);
                        }
                    }
                    kern_sparse24_free(NULL, sw);
                    kt_free(w); kt_free(x); kt_free(y); kt_free(u); kt_free(res); kt_free(y0);
                    kt_free(bias); kt_free(sc);
                }
}

/* Every M in the transition zone and tile edges with every epilogue on the
 * best ISA (the grid above samples). */
KT_TEST(linear_edges) {
    static const int64_t Ms[] = {2, 15, 16, 17, 31, 33, 63, 65, 128};
    static const int64_t Ns[] = {1, 15, 16, 33};
    size_t a, b;
    for (a = 0; a < sizeof Ms / sizeof Ms[0]; a++)
        for (b = 0; b < sizeof Ns / sizeof Ns[0]; b++) {
            lin_case c;
            memset(&c, 0, sizeof c);
            c.M = Ms[a]; c.N = Ns[b]; c.K = (a + b) % 2 ? 67 : 68; /* 67: zero-padded tail */
            c.wdt = (a + b) % 3 == 0 ? KERN_F32 : (a + b) % 3 == 1 ? KERN_BF16 : KERN_I8;
            c.xdt = c.wdt == KERN_F32 ? KERN_F32 : KERN_BF16;
            c.ydt = b % 2 ? KERN_BF16 : KERN_F32;
            c.bias = 1; c.act = (int)(a % 3); c.res = (int)(b % 2); c.strided = (int)(a % 2);
            kt_context("M=%lld N=%lld w=%s", (long long)c.M, (long long)c.N, kern_dtype_name(c.wdt));
            free(run_linear(kt_ctx(2, KERN_ISA_AUTO), &c, 77 + a * 10 + b));
        }
}

/* Small M with a row stride that is a multiple of 1 KiB: the small-M path
 * copies x to a padded workspace (cache-set aliasing); every ISA, 1 vs 2
 * threads identical. */
KT_TEST(linear_small_m_aliased_stride) {
    static const int64_t Ms[] = {3, 5, 16};
    size_t a;
    for (a = 0; a < sizeof Ms / sizeof Ms[0]; a++) {
        int d;
        for (d = 0; d < 2; d++) {
            lin_case c;
            memset(&c, 0, sizeof c);
            c.M = Ms[a]; c.N = 33; c.K = d ? 512 : 256; /* 1 KiB rows */
            c.wdt = c.xdt = c.ydt = d ? KERN_BF16 : KERN_F32;
            c.bias = 1; c.res = (int)(a % 2);
            KT_FOR_EACH_ISA(isa, ctx, 1) {
                void *y1, *y2;
                kt_context("%s M=%lld K=%lld %s", kern_isa_name(isa), (long long)c.M,
                           (long long)c.K, kern_dtype_name(c.wdt));
                y1 = run_linear(ctx, &c, 300 + a * 2 + (size_t)d);
                y2 = run_linear(kt_ctx(2, isa), &c, 300 + a * 2 + (size_t)d);
                kt_assert_bytes_equal("1 vs 2 threads", y1, y2,
                                      (size_t)(c.M * c.N) * kern_dtype_size(c.ydt));
                free(y1);
                free(y2);
            }
        }
    }
}

/* The function table of every level of this CPU family (run or not): bf16
 * weights reach the vdpbf16ps table at AVX512_BF16 only, NEON runs f32
 * weights (others the scalar table); every level the machine has runs
 * its own table. */
KT_TEST(dispatch_tables) {
    static const struct {
        kern_isa isa;
        const char *f32, *bf16, *i8;
    } want[] = {
        {KERN_ISA_SCALAR, "scalar", "scalar", "scalar"},
        {KERN_ISA_AVX2, "avx2", "avx2", "avx2"},
        {KERN_ISA_AVX2_VNNI, "avx2", "avx2", "avx2"},
        {KERN_ISA_AVX512, "avx512", "avx512", "avx512"},
        {KERN_ISA_AVX512_VNNI, "avx512", "avx512", "avx512"},
        {KERN_ISA_AVX512_BF16, "avx512", "avx512bf16", "avx512"},
        {KERN_ISA_AMX, "avx512", "avx512bf16", "avx512"},
        {KERN_ISA_NEON, "neon", "scalar", "scalar"},
        {KERN_ISA_NEON_DOT, "neon", "scalar", "scalar"},
        {KERN_ISA_NEON_BF16, "neon", "scalar", "scalar"},
    };
    kern_isa all[KERN_ISA_COUNT];
    int n = kern_isa_list(all, KERN_ISA_COUNT, 0), i;
    size_t w;
    for (i = 0; i < n; i++)
        for (w = 0; w < sizeof want / sizeof want[0]; w++)
            if (want[w].isa == all[i]) {
                kt_context("%s", kern_isa_name(all[i]));
                KT_CHECK(!strcmp(kern__sp24_fns_for(all[i], KERN_F32)->name, want[w].f32), "f32: %s",
                         kern__sp24_fns_for(all[i], KERN_F32)->name);
                KT_CHECK(!strcmp(kern__sp24_fns_for(all[i], KERN_BF16)->name, want[w].bf16), "bf16: %s",
                         kern__sp24_fns_for(all[i], KERN_BF16)->name);
                KT_CHECK(!strcmp(kern__sp24_fns_for(all[i], KERN_I8)->name, want[w].i8), "i8: %s",
                         kern__sp24_fns_for(all[i], KERN_I8)->name);
            }
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        kt_context("%s", kern_isa_name(isa));
        KT_CHECK(kern__sp24_fns_for(kern_ctx_isa(ctx), KERN_F32) == kern__sp24_fns_for(isa, KERN_F32));
    }
}

/* The vector large-M x packers (transposes in registers) against the
 * portable one, byte for byte: every sliver of awkward M, K (Kp % 8 == 4,
 * K past the last whole block), f32 and bf16 x with a padded row stride,
 * the panel's rows past M and columns past K zero. */
KT_TEST(large_m_pack_matches_ref) {
#ifdef KERN_X86
    static const int64_t Ms[4] = {1, 7, 33, 70};
    static const int64_t Ks[5] = {3, 12, 60, 64, 133};
    kt_rng r = kt_rng_make(77);
    int mi, ki, d;
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        const kern__sp24_fns *F = kern__sp24_fns_for(isa, KERN_F32);
        (void)ctx;
        if (!F->lm_mr || F->pack_xt == kern__sp24_pack_xt__ref) continue;
        for (d = 0; d < 2; d++)
            for (mi = 0; mi < 4; mi++)
                for (ki = 0; ki < 5; ki++) {
                    kern_dtype xdt = d ? KERN_BF16 : KERN_F32;
                    int64_t M = Ms[mi], K = Ks[ki], Kp = (K + 3) / 4 * 4, ldx = K + 3, ms;
                    size_t es = kern_dtype_size(xdt), pb = (size_t)(Kp * F->lm_mr) * 4;
                    void *x = kt_alloc((size_t)(M * ldx) * es, "x");
                    float *a = (float *)kt_alloc(pb, "panel"), *b = (float *)kt_alloc(pb, "ref");
                    kern__sp24_job J;
                    memset(&J, 0, sizeof J);
                    kt_fill_normal(&r, x, xdt, M * ldx, 1.0);
                    J.M = M; J.K = K; J.Kp = Kp; J.x = (const char *)x; J.ldx = ldx; J.xdt = xdt;
                    J.mr = F->lm_mr; J.xp_stride = 0;
                    kt_context("%s x=%s M=%lld K=%lld", F->name, kern_dtype_name(xdt), (long long)M,
                               (long long)K);
                    for (ms = 0; ms * F->lm_mr < M; ms++) {
                        memset(a, 0xA5, pb);
                        memset(b, 0x5A, pb);
                        J.xp = a;
                        F->pack_xt(&J, ms);
                        J.xp = b;
                        kern__sp24_pack_xt__ref(&J, ms);
                        kt_assert_bytes_equal("panel", a, b, pb);
                    }
                    kt_free(x); kt_free(a); kt_free(b);
                }
    }
#endif
}

KT_TEST(linear_residual_in_place) {
    int64_t M = 20, N = 24, K = 16, i;
    float *w = (float *)kt_alloc((size_t)(N * K) * 4, "w"), *x = (float *)kt_alloc((size_t)(M * K) * 4, "x");
    float *y = (float *)kt_alloc((size_t)(M * N) * 4, "y"), *y0 = (float *)kt_alloc((size_t)(M * N) * 4, "y0");
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, N, K), tx = kern_tensor_2d(x, KERN_F32, M, K);
    kern_tensor ty = kern_tensor_2d(y, KERN_F32, M, N), ty0 = kern_tensor_2d(y0, KERN_F32, M, N);
    kern_sparse24 *sw = NULL;
    kern_sparse24_linear_params lp;
    kt_rng r = kt_rng_make(5);
    sw = NULL;
    memset(&lp, 0, sizeof lp);
    make_sparse_w(&r, KERN_F32, w, N, K);
    kt_fill_normal(&r, x, KERN_F32, M * K, 1.0);
    kt_fill_normal(&r, y, KERN_F32, M * N, 1.0);
    memcpy(y0, y, (size_t)(M * N) * 4);
    KT_OK(kern_sparse24_compress(NULL, &tw, &sw, NULL));
    lp.epilogue.residual = &ty;
    KT_OK(lin(NULL, &tx, sw, NULL, &ty, &lp));
    {
        float *plain = (float *)malloc((size_t)(M * N) * 4);
        kern_tensor tp = kern_tensor_2d(plain, KERN_F32, M, N);
        lp.epilogue.residual = NULL;
        KT_OK(lin(NULL, &tx, sw, NULL, &tp, &lp));
        for (i = 0; i < M * N; i++) KT_CHECK(y[i] == plain[i] + y0[i], "y[%lld]", (long long)i);
        free(plain);
    }
    (void)ty0;
    kern_sparse24_free(NULL, sw);
    kt_free(w); kt_free(x); kt_free(y); kt_free(y0);
}

KT_TEST(linear_errors) {
    int64_t M = 4, N = 16, K = 8;
    float w[16 * 8], x[4 * 8 + 8], y[4 * 16 + 16], keep[4 * 16 + 16];
    uint16_t xb[4 * 8];
    kern_tensor tw = kern_tensor_2d(w, KERN_F32, N, K), tx = kern_tensor_2d(x, KERN_F32, M, K);
    kern_tensor ty = kern_tensor_2d(y, KERN_F32, M, N), txb = kern_tensor_2d(xb, KERN_BF16, M, K);
    kern_sparse24 *sw = NULL, *sw16 = NULL, empty;
    kern_sparse24_linear_params lp;
    int i;
    sw = NULL;
    sw16 = NULL;
    memset(&empty, 0, sizeof empty);
    memset(&lp, 0, sizeof lp);
    for (i = 0; i < 16 * 8; i++) w[i] = i % 4 < 2 ? 1.0f : 0.0f;
    for (i = 0; i < 40; i++) x[i] = 1.0f;
    memset(xb, 0, sizeof xb);
    KT_OK(kern_sparse24_compress(NULL, &tw, &sw, NULL));
    {
        uint16_t w16[16 * 8];
        kern_tensor t16 = kern_tensor_2d(w16, KERN_F16, N, K);
        for (i = 0; i < 16 * 8; i++) w16[i] = i % 4 < 2 ? 0x3c00 : 0;
        KT_OK(kern_sparse24_compress(NULL, &t16, &sw16, NULL));
    }
    kt_poison(y, sizeof y);
    memcpy(keep, y, sizeof y);
    {
        kern_tensor xk = kern_tensor_2d(x, KERN_F32, M, 12), yn = kern_tensor_2d(y, KERN_F32, M, 15);
        kern_tensor xs = tx, ov = kern_tensor_2d(x + 8, KERN_F32, M, N);
        kern_tensor bias = kern_tensor_1d(x, KERN_F32, 15), res = kern_tensor_2d(y + 1, KERN_F32, M, N);
        kern_tensor y8 = kern_tensor_2d(y, KERN_I8, M, N);
        xs.stride[1] = 2;
        xs.stride[0] = 16;
        lp.epilogue.act = (kern_act)9;
        KT_ERROR(lin(NULL, &tx, sw, NULL, &ty, &lp), KERN_ERR_ARG, "params.epilogue.act=9");
        lp.epilogue.act = KERN_ACT_NONE;
        KT_ERROR(lin(NULL, &xk, sw, NULL, &ty, &lp), KERN_ERR_SHAPE, "x.shape[1]=12");
        KT_ERROR(lin(NULL, &tx, sw, NULL, &yn, &lp), KERN_ERR_SHAPE, "y.shape");
        KT_ERROR(lin(NULL, &txb, sw, NULL, &ty, &lp), KERN_ERR_DTYPE, "x.dtype=bf16");
        KT_ERROR(lin(NULL, &tx, sw16, NULL, &ty, &lp), KERN_ERR_DTYPE, "f16");
        KT_ERROR(lin(NULL, &tx, sw, NULL, &y8, &lp), KERN_ERR_DTYPE, "y.dtype");
        KT_ERROR(lin(NULL, &xs, sw, NULL, &ty, &lp), KERN_ERR_LAYOUT, "x.stride[1]");
        KT_ERROR(lin(NULL, &tx, &empty, NULL, &ty, &lp), KERN_ERR_ARG, "not a valid");
        KT_ERROR(lin(NULL, &tx, NULL, NULL, &ty, &lp), KERN_ERR_ARG, "sw is NULL");
        KT_ERROR(lin(NULL, &tx, sw, &bias, &ty, &lp), KERN_ERR_SHAPE, "bias");
        KT_ERROR(lin(NULL, &tx, sw, NULL, &ov, &lp), KERN_ERR_ARG, "overlaps x");
        lp.epilogue.residual = &res;
        KT_ERROR(lin(NULL, &tx, sw, NULL, &ty, &lp), KERN_ERR_ARG, "residual");
        lp.epilogue.residual = NULL;
    }
    kt_assert_bytes_equal("y untouched", y, keep, sizeof y);
    kern_sparse24_free(NULL, sw);
    kern_sparse24_free(NULL, sw16);
}

/* Found by fuzz_sparse24 (inputs in tests/fuzz/corpus/sparse24). */
KT_TEST(sparse24_fuzz_findings) {
    kern_sparse24_params p;
    memset(&p, 0, sizeof p);
    /* prune of an empty [2^40, 0] weight: nothing to do, at once (it
     * looped over the rows) */
    {
        int64_t sh[2] = {(int64_t)1 << 40, 0};
        kern_tensor w;
        KT_OK(kern_tensor_init(&w, NULL, KERN_F32, 2, sh));
        KT_OK(kern_sparse24_prune(NULL, &w, &w, &p));
    }
    /* outputs with overlapping elements */
    {
        float w[8] = {1, 2, 3, 4, 5, 6, 7, 8}, o[4] = {9, 9, 9, 9};
        int64_t sh[2] = {2, 4}, st[2] = {0, 1};
        kern_tensor tw = kern_tensor_2d(w, KERN_F32, 2, 4), to;
        KT_OK(kern_tensor_init_strided(&to, o, KERN_F32, 2, sh, st));
        KT_ERROR(kern_sparse24_prune(NULL, &tw, &to, &p), KERN_ERR_LAYOUT, "out has overlapping elements");
        KT_CHECK(o[0] == 9 && o[3] == 9, "written on error");
    }
    /* quantizing subnormal weights: the scale is at least FLT_MIN (it was
     * 0, making w / scale NaN and its int8 conversion undefined) */
    {
        float w[4] = {1e-45f, 0, 0, -1e-45f}, back[4];
        kern_tensor tw = kern_tensor_2d(w, KERN_F32, 1, 4), tb = kern_tensor_2d(back, KERN_I8, 1, 4);
        kern_sparse24 *sw = NULL;
        int8_t *b8 = (int8_t *)back;
        p.quantize = KERN_I8;
        KT_OK(kern_sparse24_compress(NULL, &tw, &sw, &p));
        KT_CHECK(sw->scales[0] == 1.17549435e-38f, "scale %g", (double)sw->scales[0]);
        KT_OK(kern_sparse24_decompress(NULL, sw, &tb));
        KT_CHECK(b8[0] == 0 && b8[1] == 0 && b8[2] == 0 && b8[3] == 0, "codes %d %d %d %d", b8[0],
                 b8[1], b8[2], b8[3]);
        kern_sparse24_free(NULL, sw);
        p.quantize = KERN_DTYPE_NONE;
    }
    /* import: values.shape[1] near 2^62 (2 * shape[1] overflowed) */
    {
        int64_t vs[2] = {1, (int64_t)1 << 62}, ms[2] = {1, 2};
        uint8_t meta[2] = {0x44, 0x44}, v1[1];
        kern_tensor tv, tm;
        kern_sparse24 *sw = NULL;
        KT_OK(kern_tensor_init(&tv, v1, KERN_I8, 2, vs));
        KT_OK(kern_tensor_init(&tm, meta, KERN_U8, 2, ms));
        KT_ERROR(kern_sparse24_import(NULL, &tv, &tm, &sw, &p), KERN_ERR_SHAPE, "too large");
        KT_CHECK(sw == NULL, "sw written on error");
    }
}

KT_MAIN()
