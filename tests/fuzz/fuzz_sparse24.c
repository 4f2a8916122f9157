/* fuzz_sparse24.c — 2:4 sparse weights from outside: kern_sparse24_import
 * of (values, metadata) pairs built from the input (random codes, both
 * metadata layouts, i8 values with scales, padded K), export, decompress,
 * prune, compress and kern_sparse24_linear. Contract: kf.h. Invariants: an
 * imported weight exports back to the metadata it came from (codes of
 * groups with fewer than two nonzeros may be canonicalised, so the check
 * is on the decompressed matrix: every group has at most two nonzeros,
 * and compress(decompress(w)) decompresses to the same bytes); prune gives
 * a 2:4 matrix that compresses. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_sparse24.h"
#include "kf.h"
#include "kf_adapt.h"

static const kern_dtype VD[4] = {KERN_F32, KERN_BF16, KERN_F16, KERN_I8};

/* every group of 4 along K has at most 2 nonzero (bitwise) elements */
static void check_24(const kern_tensor *d, int64_t N, int64_t K) {
    int64_t n, g, j;
    size_t es = kern_dtype_size(d->dtype);
    if (kern_tensor_numel(d) <= 0) return;
    for (n = 0; n < N; n++)
        for (g = 0; g < K; g += 4) {
            int nz = 0;
            for (j = g; j < g + 4 && j < K; j++) {
                const unsigned char *e = (const unsigned char *)d->data + (n * d->stride[0] + j * d->stride[1]) * (int64_t)es;
                uint32_t bits = 0;
                memcpy(&bits, e, es);
                if (d->dtype == KERN_F32) bits &= 0x7fffffffu; /* -0.0 is zero */
                else if (es == 2) bits &= 0x7fffu;
                nz += bits != 0;
            }
            KF_ASSERT(nz <= 2, "row %lld group %lld has %d nonzeros", (long long)n, (long long)(g / 4), nz);
        }
}

static void roundtrip(kf_in *in, kern_ctx *ctx, kf_s24 *h) {
    int64_t n, k, sh[2];
    kern_dtype dt;
    kern_tensor d1, d2;
    kf_s24 h2;
    kf_s24_opts o;
    kf_s24_info(h, &n, &k, &dt);
    sh[0] = n; sh[1] = k;
    if (!kf_tensor(in, &d1, dt, 2, sh, 1, "decompressed")) return;
    kf_call();
    if (!kf_check(kf_s24_decompress(ctx, h, &d1), "kern_sparse24_decompress")) return;
    check_24(&d1, n, k);
    memset(&o, 0, sizeof o);
    o.pad_k = k % 4 != 0;
    memset(&h2, 0, sizeof h2);
    kf_out_region(&h2, sizeof h2, "recompressed");
    kf_call();
    if (!kf_check(kf_s24_compress(ctx, &d1, &o, &h2), "kern_sparse24_compress (of a decompressed weight)")) {
        kf_forget(&h2);
        return;
    }
    if (kf_tensor(in, &d2, dt, 2, sh, 1, "decompressed again")) {
        kf_call();
        if (kf_check(kf_s24_decompress(ctx, &h2, &d2), "kern_sparse24_decompress")) {
            int64_t i, j;
            size_t es = kern_dtype_size(dt);
            for (i = 0; i < n && kern_tensor_numel(&d1) > 0; i++)
                for (j = 0; j < k; j++) {
                    /* equal bits, or both zero: a kept -0.0 is a zero to
                     * compress, so it may come back as +0.0 (documented) */
                    const char *a1 = (char *)d1.data + (i * d1.stride[0] + j * d1.stride[1]) * (int64_t)es;
                    const char *a2 = (char *)d2.data + (i * d2.stride[0] + j * d2.stride[1]) * (int64_t)es;
                    uint32_t b1 = 0, b2 = 0, sign = es == 4 ? 0x80000000u : es == 2 ? 0x8000u : 0;
                    memcpy(&b1, a1, es);
                    memcpy(&b2, a2, es);
                    KF_ASSERT(b1 == b2 || ((b1 & ~sign) == 0 && (b2 & ~sign) == 0),
                              "compress(decompress(w)) differs at [%lld,%lld]", (long long)i, (long long)j);
                }
        }
    }
    kf_s24_free(ctx, &h2);
    kf_forget(&h2);
}

static void fuzz_import(kf_in *in, kern_ctx *ctx) {
    kern_dtype dt = kf_u8(in) < 250 ? VD[kf_u8(in) % 4] : (kern_dtype)(kf_u8(in) % 10);
    int64_t N = kf_size(in, 40), K = kf_size(in, 130), Kp, C, vs[2], ms[2], ss[1];
    kern_tensor values, meta, scales;
    kf_s24 h;
    kf_s24_opts o;
    int ok = 1, i8 = dt == KERN_I8, q = i8 ? 8 : 4;
    memset(&o, 0, sizeof o);
    o.rowmajor = kf_bool(in, 2);
    o.pad_k = kf_bool(in, 4);
    if (o.pad_k && K > 0 && K <= 4096) o.k = K - kf_int(in, 0, 3);
    if (kf_bool(in, 32)) o.k = kf_size(in, 130);
    Kp = K >= 0 && K <= 4096 ? (K + 3) & ~(int64_t)3 : K;
    C = o.rowmajor ? (Kp / 4 + q - 1) / q : Kp / (4 * q);
    vs[0] = N; vs[1] = Kp / 2;
    if (kf_bool(in, 24)) vs[1] = kf_size(in, 70);
    ms[0] = N;
    ms[1] = i8 ? C : 2 * C;
    if (kf_bool(in, 24)) ms[1] = kf_size(in, 40);
    ok &= kf_tensor(in, &values, dt, 2, vs, 0, "values");
    ok &= kf_tensor(in, &meta, i8 ? (kf_bool(in, 24) ? KERN_U8 : KERN_I32) : (kf_bool(in, 24) ? KERN_I32 : KERN_U8),
                    2, ms, 0, "meta");
    if (i8 || kf_bool(in, 16)) {
        ss[0] = kf_bool(in, 16) ? kf_size(in, 40) : N;
        ok &= kf_tensor(in, &scales, KERN_F32, 1, ss, 0, "scales");
        if (ok && scales.data && kern_tensor_numel(&scales) > 0 && kern_tensor_check(&scales, "", "") == KERN_OK &&
            !kf_bool(in, 8)) {
            int64_t i;
            for (i = 0; i < scales.shape[0]; i++) ((float *)scales.data)[i * scales.stride[0]] = 0.25f * (float)kf_int(in, 1, 8);
        }
        kern_clear_error();
        if (!kf_bool(in, 4)) o.scales = &scales;
    }
    if (!ok) return;
    /* metadata codes: valid (first < second, or PyTorch's canonical codes)
     * most of the time */
    if (meta.data && kern_tensor_numel(&meta) > 0 && kern_tensor_check(&meta, "", "") == KERN_OK &&
        kern_tensor_is_contiguous(&meta) && !kf_bool(in, 8)) {
        static const uint8_t good[6] = {0x4, 0x8, 0xC, 0x9, 0xD, 0xE}; /* (0,1) (0,2) (0,3) (1,2) (1,3) (2,3) */
        int64_t nb = kern_tensor_numel(&meta) * (int64_t)kern_dtype_size(meta.dtype), i;
        uint8_t *m = (uint8_t *)meta.data;
        for (i = 0; i < nb; i++) m[i] = (uint8_t)(good[kf_u8(in) % 6] | (good[kf_u8(in) % 6] << 4));
    }
    kern_clear_error();
    memset(&h, 0, sizeof h);
    kf_out_region(&h, sizeof h, "sw");
    kf_call();
    if (kf_check(kf_s24_import(ctx, &values, &meta, &o, &h), "kern_sparse24_import")) {
        /* export again into fresh buffers: the same shapes are accepted */
        kern_tensor v2, m2;
        if (kf_tensor(in, &v2, dt, 2, vs, 1, "exported values") &&
            kf_tensor(in, &m2, meta.dtype, 2, ms, 1, "exported meta")) {
            kf_call();
            kf_check(kf_s24_export(ctx, &h, &v2, &m2, &o), "kern_sparse24_export");
        }
        roundtrip(in, ctx, &h);
        kf_s24_free(ctx, &h);
    }
}

static void fuzz_dense(kf_in *in, kern_ctx *ctx) {
    kern_dtype dt = kf_u8(in) < 250 ? VD[kf_u8(in) % 4] : (kern_dtype)(kf_u8(in) % 10);
    int64_t N = kf_size(in, 40), K = kf_size(in, 70), sh[2], xs[2], ys[2], bs[1], M;
    kern_tensor w, pr, x, y, bias, res;
    kf_s24 h;
    kf_s24_opts o;
    int ok = 1;
    memset(&o, 0, sizeof o);
    o.pad_k = kf_bool(in, 3);
    if (kf_bool(in, 8)) o.quantize = kf_bool(in, 4) ? (kern_dtype)kf_int(in, 0, 9) : KERN_I8;
    sh[0] = N; sh[1] = K;
    ok &= kf_tensor(in, &w, dt, 2, sh, 0, "w");
    ok &= kf_tensor(in, &pr, dt, 2, sh, 1, "pruned");
    if (!ok) return;
    if (kf_bool(in, 6)) { /* in place */
        pr = w;
        if (w.data && kern_tensor_numel(&w) > 0 && kern_tensor_check(&w, "", "") == KERN_OK) {
            int64_t lo, hi;
            kern_tensor_span(&w, &lo, &hi);
            kf_out_region(w.data, (size_t)(hi - lo) * kern_dtype_size(dt), "pruned (= w)");
        }
        kern_clear_error();
    }
    kf_call();
    if (!kf_check(kf_s24_prune(ctx, &w, &pr, &o), "kern_sparse24_prune")) return;
    check_24(&pr, N, K);
    memset(&h, 0, sizeof h);
    kf_out_region(&h, sizeof h, "sw");
    kf_call();
    if (!kf_check(kf_s24_compress(ctx, &pr, &o, &h), "kern_sparse24_compress")) return;
    if (!o.quantize) roundtrip(in, ctx, &h);
    /* linear */
    M = kf_size(in, 20);
    xs[0] = M; xs[1] = kf_bool(in, 16) ? kf_size(in, 70) : K;
    ys[0] = M; ys[1] = N;
    bs[0] = N;
    ok = kf_tensor(in, &x, kf_bool(in, 3) ? KERN_BF16 : KERN_F32, 2, xs, 0, "x");
    ok &= kf_tensor(in, &y, kf_bool(in, 3) ? KERN_BF16 : KERN_F32, 2, ys, 1, "y");
    ok &= kf_tensor(in, &bias, kf_bool(in, 3) ? KERN_BF16 : KERN_F32, 1, bs, 0, "bias");
    ok &= kf_tensor(in, &res, kf_bool(in, 3) ? KERN_BF16 : KERN_F32, 2, ys, 0, "residual");
    if (ok) {
        kern_act act = (kern_act)kf_int(in, 0, 2);
        if (kf_bool(in, 32)) act = (kern_act)kf_int(in, -1, 6);
        kf_call();
        kf_check(kf_s24_linear(ctx, &x, &h, kf_bool(in, 2) ? &bias : NULL, &y, act,
                               kf_bool(in, 4) ? &res : NULL),
                 "kern_sparse24_linear");
    }
    kf_s24_free(ctx, &h);
}

static void kf_fuzz(kf_in *in) {
    kern_ctx *ctx = kf_ctx_begin(in);
    if (kf_u8(in) < 150) fuzz_import(in, ctx);
    else fuzz_dense(in, ctx);
}
