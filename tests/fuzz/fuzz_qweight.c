/* fuzz_qweight.c — packed int8 weights from outside: kern_qweight_deserialize
 * on buffers built from the input (a valid serialization, then byte edits,
 * with the header sizes and the checksum fixed up or not, so that the deep
 * checks — scales, colsums, padding — are reached), and kern_qweight_pack /
 * _pack_int8 / _serialize / _unpack / kern_qlinear on weights from the
 * input. Contract: kf.h. Invariants: a buffer that deserializes serializes
 * back to the same bytes; a packed weight round-trips through serialize
 * and deserialize; codes unpacked from a float weight are in [-127, 127]
 * and scales positive. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_qgemm.h"
#include "kf.h"
#include "kf_adapt.h"

/* The serialized header's size (the format in kern_qgemm.h); checked
 * against the implementation's constant when it is compiled in. */
#define QW_HDR 40
#ifdef KERN_IMPLEMENTATION
_Static_assert(QW_HDR == KERN__QG_HDR, "qweight header size");
#endif

#include <math.h>

static uint32_t fnv(const unsigned char *p, size_t n) {
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}
static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

/* a small weight [n, k] from the input, packed with a context of the
 * fuzzed context's ISA level but its own allocator (setup, not under test) */
static int make_packed(kf_in *in, kern_ctx *ctx, kf_qw *h, int64_t *pn, int64_t *pk) {
    int64_t n = kf_int(in, 1, 40), k = kf_int(in, 1, 70), sh[2];
    kern_tensor w;
    float *wd;
    int64_t i;
    kern_ctx *setup = kt_ctx(1, kern_ctx_isa(ctx));
    sh[0] = n; sh[1] = k;
    wd = (float *)kf_in_buf((size_t)(n * k) * 4, "setup weight");
    for (i = 0; i < n * k; i++) {
        wd[i] = kf_float(in);
        if (!isfinite(wd[i])) wd[i] = 1.0f;
    }
    kern_tensor_init(&w, wd, KERN_F32, 2, sh);
    if (!setup || kf_qweight_pack(setup, &w, h) != KERN_OK) return 0;
    *pn = n;
    *pk = k;
    return 1;
}

static void fuzz_deserialize(kf_in *in, kern_ctx *ctx) {
    kf_qw src, out;
    int64_t n, k;
    size_t size;
    unsigned char *buf;
    uint8_t mode = kf_u8(in);
    int edits, e;
    memset(&src, 0, sizeof src);
    memset(&out, 0, sizeof out);
    if (mode < 16) { /* raw bytes */
        size = (size_t)kf_int(in, 0, 600);
        buf = (unsigned char *)kf_in_buf(size, "buffer");
        kf_fill(in, buf, size);
    } else {
        if (!make_packed(in, ctx, &src, &n, &k)) return;
        size = kf_qweight_serialized_size(&src);
        buf = (unsigned char *)kf_in_buf(size + 8, "buffer");
        KF_ASSERT(kf_qweight_serialize(&src, buf, size) == KERN_OK);
        kf_qweight_free(kt_ctx(1, kern_ctx_isa(ctx)), &src);
        /* edits: a byte anywhere, or a field of the header */
        edits = (int)kf_int(in, 0, 4);
        for (e = 0; e < edits; e++) {
            uint8_t c = kf_u8(in);
            size_t at = (size_t)kf_int(in, 0, (int64_t)size - 1);
            if (c < 100) buf[at] ^= (unsigned char)(1u << (c & 7));
            else if (c < 140) put32(buf + 4 * (size_t)kf_int(in, 1, 9), kf_u32(in)); /* header word */
            else if (c < 170 && size > QW_HDR + 4) /* a scale */
                put32(buf + QW_HDR + 4 * (size_t)kf_int(in, 0, n - 1), kern__f32_bits(kf_float(in)));
            else if (c < 200) /* a colsum */
                put32(buf + QW_HDR + 4 * (size_t)(n + kf_int(in, 0, n - 1)), kf_u32(in));
            else buf[at] = kf_u8(in);
        }
        if (kf_bool(in, 8)) size = (size_t)kf_int(in, 0, (int64_t)size + 8); /* wrong size */
        if (!kf_bool(in, 6) && size >= 4) put32(buf + size - 4, fnv(buf, size - 4)); /* checksum */
    }
    kf_out_region(&out, sizeof out, "qw");
    kf_call();
    if (kf_check(kf_qweight_deserialize(ctx, kf_bool(in, 64) ? NULL : buf, size, &out),
                 "kern_qweight_deserialize")) {
        size_t s2 = kf_qweight_serialized_size(&out);
        unsigned char *b2 = (unsigned char *)kf_in_buf(s2, "reserialized");
        kf__op = "kern_qweight_serialize (of a deserialized weight)";
        KF_ASSERT(s2 == size && kf_qweight_serialize(&out, b2, s2) == KERN_OK &&
                      memcmp(b2, buf, size) == 0,
                  "does not serialize back to the same %zu bytes", size);
        kf_qweight_free(ctx, &out);
    }
}

static void fuzz_pack(kf_in *in, kern_ctx *ctx) {
    static const kern_dtype WD[3] = {KERN_F32, KERN_BF16, KERN_I8};
    int64_t sh[2], xs[2], ys[2], bs[1], N, K, M;
    kern_tensor w, sc, x, y, bias, res;
    kf_qw qw;
    kern_dtype wdt = kf_u8(in) < 250 ? WD[kf_u8(in) % 3] : (kern_dtype)(kf_u8(in) % 10);
    int ok = 1, int8 = wdt == KERN_I8;
    kern_status st;
    sh[0] = N = kf_size(in, 40);
    sh[1] = K = kf_size(in, 70);
    memset(&qw, 0, sizeof qw);
    ok &= kf_tensor(in, &w, wdt, 2, sh, 0, "w");
    if (int8) {
        bs[0] = kf_bool(in, 16) ? kf_size(in, 40) : N;
        ok &= kf_tensor(in, &sc, KERN_F32, 1, bs, 0, "scales");
        if (ok && sc.data && kern_tensor_numel(&sc) > 0 && kern_tensor_check(&sc, "", "") == KERN_OK &&
            !kf_bool(in, 8)) {
            int64_t i;
            for (i = 0; i < sc.shape[0]; i++) ((float *)sc.data)[i * sc.stride[0]] = 0.5f + (float)kf_int(in, 0, 3);
        }
        kern_clear_error();
    }
    if (!ok) return;
    kf_out_region(&qw, sizeof qw, "qw");
    kf_call();
    st = int8 ? kf_qweight_pack_int8(ctx, &w, &sc, &qw) : kf_qweight_pack(ctx, &w, &qw);
    if (!kf_check(st, int8 ? "kern_qweight_pack_int8" : "kern_qweight_pack")) return;
    {
        /* serialize -> deserialize -> serialize: the same bytes */
        size_t s = kf_qweight_serialized_size(&qw);
        unsigned char *b1 = (unsigned char *)kf_in_buf(s, "serialized"), *b2;
        kf_qw back;
        int64_t n2, k2;
        memset(&back, 0, sizeof back);
        kf__op = "kern_qweight_serialize";
        KF_ASSERT(kf_qweight_serialize(&qw, b1, s) == KERN_OK);
        KF_ASSERT(kf_qweight_serialize(&qw, b1, s - 1) == KERN_ERR_ARG, "a too small buffer accepted");
        kf_call();
        if (kf_check(kf_qweight_deserialize(ctx, b1, s, &back), "kern_qweight_deserialize (round trip)")) {
            b2 = (unsigned char *)kf_in_buf(s, "serialized again");
            KF_ASSERT(kf_qweight_serialize(&back, b2, s) == KERN_OK && memcmp(b1, b2, s) == 0,
                      "round trip changed the bytes");
            kf_qweight_free(ctx, &back);
        }
        kf_qweight_shape(&qw, &n2, &k2);
        KF_ASSERT(n2 == N && k2 == K);
    }
    {
        /* unpack: codes in [-127, 127], positive finite scales */
        int64_t s2[2], s1[1];
        kern_tensor wq, scl;
        s2[0] = N; s2[1] = K; s1[0] = N;
        if (kf_tensor(in, &wq, KERN_I8, 2, s2, 1, "unpacked") && kf_tensor(in, &scl, KERN_F32, 1, s1, 1, "unpacked scales")) {
            kf_call();
            if (kf_check(kf_qweight_unpack(&qw, &wq, &scl), "kern_qweight_unpack")) {
                int64_t i, j;
                for (i = 0; i < N; i++) {
                    float f = ((float *)scl.data)[i * scl.stride[0]];
                    KF_ASSERT(isfinite(f) && f > 0, "scale %lld = %g", (long long)i, (double)f);
                    for (j = 0; j < K && !int8; j++) { /* pack_int8 takes the full s8 range */
                        int8_t v = ((int8_t *)wq.data)[i * wq.stride[0] + j * wq.stride[1]];
                        KF_ASSERT(v >= -127, "code %d from a float weight", v);
                    }
                }
            }
        }
    }
    /* qlinear on a small x */
    M = kf_size(in, 9);
    xs[0] = M; xs[1] = kf_bool(in, 16) ? kf_size(in, 70) : K;
    ys[0] = M; ys[1] = N;
    bs[0] = N;
    ok = kf_tensor(in, &x, kf_bool(in, 4) ? KERN_BF16 : KERN_F32, 2, xs, 0, "x");
    ok &= kf_tensor(in, &y, kf_bool(in, 4) ? KERN_BF16 : KERN_F32, 2, ys, 1, "y");
    ok &= kf_tensor(in, &bias, kf_bool(in, 4) ? KERN_BF16 : KERN_F32, 1, bs, 0, "bias");
    ok &= kf_tensor(in, &res, KERN_F32, 2, ys, 0, "residual");
    if (ok) {
        kern_act act = (kern_act)kf_int(in, 0, 2);
        int use_bias = kf_bool(in, 2), use_res = kf_bool(in, 4);
        if (kf_bool(in, 32)) act = (kern_act)kf_int(in, -1, 6);
        kf_call();
        kf_check(kf_qlinear(ctx, &x, &qw, use_bias ? &bias : NULL, &y, act, use_res ? &res : NULL),
                 "kern_qlinear");
    }
    kf_qweight_free(ctx, &qw);
}

static void kf_fuzz(kf_in *in) {
    kern_ctx *ctx = kf_ctx_begin(in);
    if (kf_u8(in) < 160) fuzz_deserialize(in, ctx);
    else fuzz_pack(in, ctx);
}
