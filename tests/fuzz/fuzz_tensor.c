/* fuzz_tensor.c — the tensor-view helpers of kern_base.h on arbitrary
 * views (any ndim, shape, stride, dtype, data): kern_tensor_init(_strided),
 * _check, _numel, _is_contiguous, _last_dim_unit, _span, kern_tensors_overlap,
 * kern_tensor_broadcast_to, kern_shape_str, the name/size lookups, and
 * kern_convert through a fuzzed context. Views live in exactly-sized heap
 * blocks, so a read past shape[]/stride[] is an ASan report. Contract:
 * kf.h, plus the consistency of the helpers with each other. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_base.h"
#include "kf.h"
#include "kf_adapt.h"

static kern_tensor *raw_view(kf_in *in) {
    kern_tensor *t = (kern_tensor *)kf_in_buf(sizeof *t, "view");
    int d;
    uint8_t c = kf_u8(in);
    memset(t, 0, sizeof *t);
    t->ndim = c < 240 ? (int)(c % 9) : (int)(int8_t)kf_u8(in);
    t->dtype = kf_u8(in) < 240 ? (kern_dtype)kf_int(in, 1, KERN_DTYPE_COUNT - 1)
                               : (kern_dtype)(int)(int8_t)kf_u8(in);
    for (d = 0; d < KERN_MAX_DIMS; d++) t->shape[d] = kf_size(in, 5);
    {
        int64_t s = 1;
        for (d = KERN_MAX_DIMS - 1; d >= 0; d--) {
            uint8_t k = kf_u8(in);
            t->stride[d] = k < 160 ? s : k < 200 ? 0 : kf_size(in, 40);
            if (t->shape[d] > 0 && kern_mul_overflow_i64(s, t->shape[d], &s)) s = 1;
        }
    }
    /* the data pointer: NULL, or a real block (only valid views small
     * enough are given one that covers them; no helper reads data) */
    t->data = kf_bool(in, 4) ? NULL : kf_in_buf(16, "data");
    return t;
}

static void check_consistent(const kern_tensor *t) {
    kern_status st;
    int64_t n = kern_tensor_numel(t), lo = 7, hi = 7, prod = 1, eb;
    int d, contig = kern_tensor_is_contiguous(t), unit = kern_tensor_last_dim_unit(t);
    char buf[8];
    int ok_nd = t->ndim >= 0 && t->ndim <= KERN_MAX_DIMS;
    kern_clear_error();
    st = kern_tensor_check(t, "kf", "t");
    kf__op = "kern_tensor_check";
    KF_ASSERT(st == KERN_OK || kern_last_error()[0], "error without a message");
    KF_ASSERT(contig == 0 || contig == 1);
    KF_ASSERT(unit == 0 || unit == 1);
    if (!ok_nd) {
        KF_ASSERT(st != KERN_OK && n == -1 && !contig && !unit, "invalid ndim %d", t->ndim);
        return;
    }
    for (d = 0; d < t->ndim && prod >= 0; d++) {
        if (t->shape[d] < 0) prod = -1;
        else if (t->shape[d] == 0) prod = -2;
    }
    if (prod == -1) KF_ASSERT(n == -1 && st != KERN_OK, "negative shape");
    if (prod == -2) KF_ASSERT(n == 0, "empty view numel %lld", (long long)n);
    kern_tensor_span(t, &lo, &hi);
    if (st != KERN_OK) return;
    /* a valid view */
    KF_ASSERT(n >= 0);
    KF_ASSERT(kern_dtype_size(t->dtype) > 0);
    if (n == 0) {
        KF_ASSERT(lo == 0 && hi == 0 && contig, "empty view span %lld..%lld", (long long)lo,
                  (long long)hi);
    } else {
        KF_ASSERT(t->data != NULL, "data NULL with %lld elements", (long long)n);
        KF_ASSERT(lo <= 0 && hi >= 1 && !kern_mul_overflow_i64(hi - lo, (int64_t)kern_dtype_size(t->dtype), &eb),
                  "span %lld..%lld", (long long)lo, (long long)hi);
        KF_ASSERT(kern_tensors_overlap(t, t), "a view does not overlap itself");
        if (contig) KF_ASSERT(hi - lo == n, "contiguous view spans %lld for %lld elements",
                              (long long)(hi - lo), (long long)n);
    }
    kern_shape_str(t, buf, sizeof buf);
    KF_ASSERT(memchr(buf, 0, sizeof buf) != NULL);
}

static void fuzz_views(kf_in *in) {
    kern_tensor *a = raw_view(in), *b = raw_view(in), *o;
    int64_t shape[KERN_MAX_DIMS + 2];
    int nd, d, r;
    size_t sz;
    char *sbuf;
    check_consistent(a);
    check_consistent(b);
    /* overlap: symmetric, no UB on any pair */
    r = kern_tensors_overlap(a, b);
    kf__op = "kern_tensors_overlap";
    KF_ASSERT(r == kern_tensors_overlap(b, a), "not symmetric");
    /* shape_str into an exactly-sized buffer of any size */
    sz = (size_t)kf_int(in, 0, 40);
    sbuf = (char *)kf_in_buf(sz, "shape_str buffer");
    kern_shape_str(a, sz ? sbuf : NULL, sz);
    if (sz) KF_ASSERT(memchr(sbuf, 0, sz) != NULL, "not NUL-terminated in %zu bytes", sz);
    /* broadcast a to a target shape */
    nd = (int)kf_int(in, 0, 9);
    if (kf_bool(in, 32)) nd = (int)(int8_t)kf_u8(in);
    for (d = 0; d < KERN_MAX_DIMS + 2; d++) {
        int src = d - (nd - a->ndim);
        shape[d] = kf_bool(in, 3) && a->ndim >= 0 && a->ndim <= KERN_MAX_DIMS && src >= 0 &&
                           src < a->ndim
                       ? a->shape[src]
                       : kf_size(in, 5);
    }
    o = (kern_tensor *)kf_out(in, sizeof *o, "broadcast out");
    kf_call();
    if (kf_check(kern_tensor_broadcast_to(a, nd, kf_bool(in, 32) ? NULL : shape,
                                          kf_bool(in, 64) ? NULL : o, "kf", "a"),
                 "kern_tensor_broadcast_to")) {
        kern_status sa;
        KF_ASSERT(o->ndim == nd && o->data == a->data && o->dtype == a->dtype);
        for (d = 0; d < nd; d++) KF_ASSERT(o->shape[d] == shape[d], "shape[%d]", d);
        kern_clear_error();
        sa = kern_tensor_check(a, "kf", "a");
        if (sa == KERN_OK) {
            kf__op = "kern_tensor_check (of a broadcast of a valid view)";
            KF_ASSERT(kern_tensor_check(o, "kf", "out") == KERN_OK);
        }
        check_consistent(o);
    }
}

static void fuzz_init(kf_in *in) {
    kern_tensor *t = (kern_tensor *)kf_out(in, sizeof(kern_tensor), "tensor");
    int64_t shape[KERN_MAX_DIMS], stride[KERN_MAX_DIMS];
    int nd = (int)kf_int(in, 0, 8), d, strided = kf_bool(in, 3);
    kern_dtype dt = kf_u8(in) < 240 ? (kern_dtype)kf_int(in, 1, KERN_DTYPE_COUNT - 1)
                                    : (kern_dtype)(int)(int8_t)kf_u8(in);
    void *data;
    kern_status st;
    if (kf_bool(in, 24)) nd = (int)(int8_t)kf_u8(in);
    for (d = 0; d < KERN_MAX_DIMS; d++) {
        shape[d] = kf_size(in, 6);
        stride[d] = kf_bool(in, 2) ? 1 : kf_size(in, 50);
    }
    data = kf_bool(in, 4) ? NULL : kf_in_buf(8, "data");
    kf_call();
    if (strided)
        st = kern_tensor_init_strided(kf_bool(in, 64) ? NULL : t, data, dt, nd,
                                      kf_bool(in, 64) ? NULL : shape, kf_bool(in, 2) ? stride : NULL);
    else
        st = kern_tensor_init(kf_bool(in, 64) ? NULL : t, data, dt, nd, kf_bool(in, 64) ? NULL : shape);
    if (kf_check(st, strided ? "kern_tensor_init_strided" : "kern_tensor_init")) {
        kern_clear_error();
        kf__op = "kern_tensor_check (of an initialised view)";
        KF_ASSERT(kern_tensor_check(t, "kf", "t") == KERN_OK);
        KF_ASSERT(t->ndim == nd && t->dtype == dt && t->data == data);
        check_consistent(t);
    }
}

/* kern_convert between every pair of dtypes, any n, overlapping or not;
 * results bit-identical to the scalar conversions. */
static void fuzz_convert(kf_in *in) {
    static const kern_dtype F[3] = {KERN_F32, KERN_BF16, KERN_F16};
    kern_ctx *ctx = kf_ctx_begin(in);
    kern_dtype sd = kf_u8(in) < 245 ? F[kf_u8(in) % 3] : (kern_dtype)kf_int(in, -1, 10);
    kern_dtype dd = kf_u8(in) < 245 ? F[kf_u8(in) % 3] : (kern_dtype)kf_int(in, -1, 10);
    int64_t n = kf_u8(in) < 240 ? kf_int(in, 0, 300) : kf_size(in, 70000);
    size_t ss = kern_dtype_size(sd) ? kern_dtype_size(sd) : 1, ds = kern_dtype_size(dd) ? kern_dtype_size(dd) : 1;
    void *src, *dst;
    int64_t i;
    if (n > 70000) n = kf_bool(in, 2) ? n : 70000; /* huge n: must be rejected or...? */
    if (n > 70000) {
        /* a size no buffer backs: only a NULL src/dst or an error is safe */
        src = NULL;
        dst = NULL;
    } else {
        src = kf_in_buf((size_t)(n > 0 ? n : 0) * ss, "src");
        kf_fill(in, src, (size_t)(n > 0 ? n : 0) * ss);
        dst = kf_out(in, (size_t)(n > 0 ? n : 0) * ds, "dst");
    }
    if (kf_bool(in, 48)) src = dst; /* overlapping */
    kf_call();
    if (kf_check(kern_convert(ctx, sd, src, dd, dst, n), "kern_convert"))
        for (i = 0; i < n; i++) {
            float v = sd == KERN_F32 ? ((const float *)src)[i]
                      : sd == KERN_BF16 ? kern_bf16_to_f32(((const uint16_t *)src)[i])
                                        : kern_f16_to_f32(((const uint16_t *)src)[i]);
            if (dd == KERN_F32) {
                uint32_t a = kern__f32_bits(((const float *)dst)[i]), b = kern__f32_bits(v);
                KF_ASSERT(a == b || (v != v && (a & 0x7fffffffu) > 0x7f800000u),
                          "element %lld: %08x, want %08x", (long long)i, a, b);
            } else {
                uint16_t want = dd == KERN_BF16 ? kern_f32_to_bf16(v) : kern_f32_to_f16(v);
                KF_ASSERT(((const uint16_t *)dst)[i] == want, "element %lld: %04x, want %04x",
                          (long long)i, ((const uint16_t *)dst)[i], want);
            }
        }
}

static void fuzz_names(kf_in *in) {
    int v = (int)(int32_t)kf_u32(in);
    KF_ASSERT(kern_status_name((kern_status)v) && kern_status_text((kern_status)v));
    KF_ASSERT(kern_dtype_name((kern_dtype)v) && kern_act_name((kern_act)v));
    KF_ASSERT(kern_isa_name((kern_isa)v));
    KF_ASSERT(kern_dtype_size((kern_dtype)v) <= 8);
}

static void kf_fuzz(kf_in *in) {
    switch (kf_u8(in) % 4) {
    case 0: fuzz_views(in); break;
    case 1: fuzz_init(in); break;
    case 2: fuzz_convert(in); break;
    default: fuzz_names(in); break;
    }
}
