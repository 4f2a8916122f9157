/* test_base.c — tests for kern_base.h: status and messages, dtypes,
 * f16/bf16 conversions (exhaustive, against a reference written here with
 * double arithmetic, not the header's bit tricks), CPU features and ISA
 * caps, the context and thread pool, tensors and bad input, Philox. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_base.h"
#include "kt.h"

#include <float.h>
#include <pthread.h>
#include <unistd.h>

#ifdef KT_SANITIZER
#define RANDOM_SWEEP 300000
#else
#define RANDOM_SWEEP 4000000
#endif

/* ================================================= reference conversions */

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* f32 (exact) -> a binary format with `mbits` stored mantissa bits and
 * exponent bias `bias`, by double arithmetic: scale to the format's quantum,
 * round with nearbyint (ties to even), rebuild the fields. NaN is handled
 * by the callers (the format's quiet-NaN rule). */
static uint16_t ref_round(float f, int mbits, int bias) {
    uint32_t u = f2u(f);
    uint16_t sgn = (uint16_t)((u >> 31) << 15);
    uint16_t inf = (uint16_t)(((2 * bias + 1) << mbits));
    int emin = 1 - bias, e, lead;
    double x = fabs((double)f), q, r, maxv;
    if (isinf(x)) return sgn | inf;
    if (x == 0) return sgn;
    frexp(x, &e);
    lead = e - 1 < emin ? emin : e - 1;
    q = ldexp(1.0, lead - mbits);
    r = nearbyint(x / q) * q;
    maxv = ldexp(2.0 - ldexp(1.0, -mbits), bias);
    if (r > maxv) return sgn | inf;
    if (r == 0) return sgn;
    if (r < ldexp(1.0, emin))
        return (uint16_t)(sgn | (uint16_t)(r / ldexp(1.0, emin - mbits)));
    frexp(r, &e);
    lead = e - 1;
    return (uint16_t)(sgn | (uint16_t)((lead + bias) << mbits) |
                      (uint16_t)((uint32_t)(r / ldexp(1.0, lead - mbits)) -
                                 (1u << mbits)));
}
static uint16_t ref_f32_to_f16(float f) {
    uint32_t u = f2u(f);
    if (isnan(f)) /* quiet, keep sign and the top 10 payload bits */
        return (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu));
    return ref_round(f, 10, 15);
}
static uint16_t ref_f32_to_bf16(float f) {
    uint32_t u = f2u(f);
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x0040u);
    return ref_round(f, 7, 127);
}
/* Decodes from the fields with ldexp; NaN: sign and payload kept, quiet. */
static uint32_t ref_f16_to_f32(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) {
        if (m == 0) return ((uint32_t)s << 31) | 0x7f800000u;
        return ((uint32_t)s << 31) | 0x7fc00000u | ((uint32_t)m << 13);
    }
    v = e == 0 ? ldexp((double)m, -24) : ldexp(1024.0 + m, e - 25);
    return f2u((float)(s ? -v : v)) | ((uint32_t)s << 31);
}
static uint32_t ref_bf16_to_f32(uint16_t h) {
    int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
    double v;
    if (e == 255) {
        if (m == 0) return ((uint32_t)s << 31) | 0x7f800000u;
        return ((uint32_t)s << 31) | 0x7fc00000u | ((uint32_t)m << 16);
    }
    v = e == 0 ? ldexp((double)m, -133) : ldexp(128.0 + m, e - 134);
    return f2u((float)(s ? -v : v)) | ((uint32_t)s << 31);
}

/* ======================================================= status, dtypes */

KT_TEST(status_names) {
    KT_CHECK(KERN_OK == 0);
    KT_CHECK(!strcmp(kern_status_name(KERN_OK), "KERN_OK"));
    KT_CHECK(!strcmp(kern_status_name(KERN_ERR_ARG), "KERN_ERR_ARG"));
    KT_CHECK(!strcmp(kern_status_name(KERN_ERR_SHAPE), "KERN_ERR_SHAPE"));
    KT_CHECK(!strcmp(kern_status_name(KERN_ERR_DTYPE), "KERN_ERR_DTYPE"));
    KT_CHECK(!strcmp(kern_status_name(KERN_ERR_LAYOUT), "KERN_ERR_LAYOUT"));
    KT_CHECK(!strcmp(kern_status_name(KERN_ERR_INDEX), "KERN_ERR_INDEX"));
    KT_CHECK(!strcmp(kern_status_name(KERN_ERR_NOMEM), "KERN_ERR_NOMEM"));
    KT_CHECK(!strcmp(kern_status_name(KERN_ERR_UNSUPPORTED), "KERN_ERR_UNSUPPORTED"));
    KT_CHECK(!strcmp(kern_status_name(KERN_ERR_DEVICE), "KERN_ERR_DEVICE"));
    KT_CHECK(!strcmp(kern_status_name((kern_status)99), "KERN_STATUS_UNKNOWN"));
    KT_CHECK(!strcmp(kern_status_name((kern_status)-1), "KERN_STATUS_UNKNOWN"));
    KT_CHECK(KERN_STATUS_COUNT == 9, "count=%d", (int)KERN_STATUS_COUNT);
    for (int s = 0; s < KERN_STATUS_COUNT; s++)
        KT_CHECK(strcmp(kern_status_text((kern_status)s), "unknown status") != 0,
                 "status %d has no text", s);
    KT_CHECK(!strcmp(kern_status_text(KERN_ERR_SHAPE), "shape mismatch"));
}

static void *other_thread_error(void *p) {
    char *out = (char *)p;
    /* a fresh thread starts with an empty message */
    strcpy(out, kern_last_error());
    kern_parallel_for(NULL, 1, NULL, NULL); /* sets this thread's message */
    strcat(out, "|");
    strcat(out, kern_last_error());
    return NULL;
}

KT_TEST(last_error_thread_local) {
    char buf[1024] = {0};
    pthread_t th;
    kern__err(KERN_ERR_SHAPE, "main thread message %d", 7);
    KT_CHECK(pthread_create(&th, NULL, other_thread_error, buf) == 0);
    pthread_join(th, NULL);
    KT_CHECK(!strcmp(buf, "|kern_parallel_for: fn is NULL"), "got \"%s\"", buf);
    KT_CHECK(!strcmp(kern_last_error(), "main thread message 7"), "got \"%s\"",
             kern_last_error());
    /* the old message may be an argument of the new one */
    KT_CHECK(kern__err(KERN_ERR_ARG, "outer: %s", kern_last_error()) == KERN_ERR_ARG);
    KT_CHECK(!strcmp(kern_last_error(), "outer: main thread message 7"), "got \"%s\"",
             kern_last_error());
    kern_clear_error();
    KT_CHECK(kern_last_error()[0] == 0);
    {   /* long messages are truncated, NUL-terminated */
        char big[2000];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = 0;
        kern__err(KERN_ERR_ARG, "%s", big);
        KT_CHECK(strlen(kern_last_error()) > 100 && strlen(kern_last_error()) < 2000);
    }
}

KT_TEST(dtypes) {
    KT_CHECK(kern_dtype_size(KERN_F32) == 4);
    KT_CHECK(kern_dtype_size(KERN_F16) == 2);
    KT_CHECK(kern_dtype_size(KERN_BF16) == 2);
    KT_CHECK(kern_dtype_size(KERN_I8) == 1);
    KT_CHECK(kern_dtype_size(KERN_U8) == 1);
    KT_CHECK(kern_dtype_size(KERN_I32) == 4);
    KT_CHECK(kern_dtype_size(KERN_I64) == 8);
    KT_CHECK(kern_dtype_size(KERN_BOOL) == 1);
    KT_CHECK(kern_dtype_size(KERN_DTYPE_NONE) == 0);
    KT_CHECK(kern_dtype_size((kern_dtype)77) == 0);
    KT_CHECK(!strcmp(kern_dtype_name(KERN_BF16), "bf16"));
    KT_CHECK(!strcmp(kern_dtype_name(KERN_F16), "f16"));
    KT_CHECK(!strcmp(kern_dtype_name(KERN_F32), "f32"));
    KT_CHECK(!strcmp(kern_dtype_name(KERN_I64), "i64"));
    KT_CHECK(!strcmp(kern_dtype_name(KERN_BOOL), "bool"));
    KT_CHECK(!strcmp(kern_dtype_name((kern_dtype)77), "invalid"));
    KT_CHECK(kern_dtype_is_float(KERN_F32) && kern_dtype_is_float(KERN_F16) &&
             kern_dtype_is_float(KERN_BF16));
    KT_CHECK(!kern_dtype_is_float(KERN_I8) && !kern_dtype_is_float(KERN_I32) &&
             !kern_dtype_is_float(KERN_BOOL));
}

/* ========================================================= conversions */

KT_TEST(reference_self_check) {
    /* the reference itself, on values whose encodings are known */
    KT_CHECK(ref_f32_to_f16(1.0f) == 0x3c00);
    KT_CHECK(ref_f32_to_f16(-2.0f) == 0xc000);
    KT_CHECK(ref_f32_to_f16(65504.0f) == 0x7bff);
    KT_CHECK(ref_f32_to_f16(65519.99f) == 0x7bff);
    KT_CHECK(ref_f32_to_f16(65520.0f) == 0x7c00);
    KT_CHECK(ref_f32_to_f16(ldexpf(1.0f, -24)) == 0x0001);
    KT_CHECK(ref_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000); /* tie to even */
    KT_CHECK(ref_f32_to_f16(ldexpf(3.0f, -25)) == 0x0002); /* tie to even */
    KT_CHECK(ref_f32_to_f16(ldexpf(1.0f, -14)) == 0x0400);
    KT_CHECK(ref_f32_to_f16(0.333333343f) == 0x3555);
    KT_CHECK(ref_f32_to_bf16(1.0f) == 0x3f80);
    KT_CHECK(ref_f32_to_bf16(3.14159274f) == 0x4049);
    KT_CHECK(ref_f32_to_bf16(u2f(0x3f808000u)) == 0x3f80); /* tie to even */
    KT_CHECK(ref_f32_to_bf16(u2f(0x3f818000u)) == 0x3f82);
    KT_CHECK(ref_f32_to_bf16(FLT_MAX) == 0x7f80);
    KT_CHECK(ref_f32_to_bf16(u2f(0x7f7f7fffu)) == 0x7f7f);
    KT_CHECK(ref_f32_to_bf16(u2f(0x00008000u)) == 0x0000); /* tie, subnormal */
    KT_CHECK(ref_f32_to_bf16(u2f(0x00018000u)) == 0x0002);
    KT_CHECK(ref_f16_to_f32(0x3c00) == 0x3f800000u);
    KT_CHECK(ref_f16_to_f32(0x0001) == f2u(ldexpf(1.0f, -24)));
    KT_CHECK(ref_f16_to_f32(0x8000) == 0x80000000u);
    KT_CHECK(ref_f16_to_f32(0x7c01) == 0x7fc02000u);
    KT_CHECK(ref_bf16_to_f32(0x0001) == 0x00010000u);
    KT_CHECK(ref_bf16_to_f32(0xff81) == 0xffc10000u);
}

KT_TEST(half_to_f32_all_patterns) {
    int bad16 = 0, badb = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t g16 = f2u(kern_f16_to_f32((uint16_t)h)), w16 = ref_f16_to_f32((uint16_t)h);
        uint32_t gb = f2u(kern_bf16_to_f32((uint16_t)h)), wb = ref_bf16_to_f32((uint16_t)h);
        if (g16 != w16 && bad16++ < 3)
            KT_CHECK(g16 == w16, "f16 0x%04x -> 0x%08x, want 0x%08x", h, g16, w16);
        if (gb != wb && badb++ < 3)
            KT_CHECK(gb == wb, "bf16 0x%04x -> 0x%08x, want 0x%08x", h, gb, wb);
    }
    KT_CHECK(bad16 == 0 && badb == 0, "%d f16 and %d bf16 patterns differ", bad16, badb);
}

/* Checks kern_f32_to_{f16,bf16}(x) against the reference; counts errors. */
static int check_down(float x, int *bad) {
    uint16_t g16 = kern_f32_to_f16(x), w16 = ref_f32_to_f16(x);
    uint16_t gb = kern_f32_to_bf16(x), wb = ref_f32_to_bf16(x);
    if (g16 != w16 || gb != wb) {
        if ((*bad)++ < 4)
            KT_CHECK(g16 == w16 && gb == wb,
                     "f32 0x%08x (%.9g): f16 0x%04x want 0x%04x, bf16 0x%04x want 0x%04x",
                     f2u(x), x, g16, w16, gb, wb);
        return 1;
    }
    return 0;
}

KT_TEST(f32_to_half_every_value_and_midpoint) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        /* every f16 value, its neighbours in f32 and the midpoint to the next */
        float v16 = u2f(ref_f16_to_f32((uint16_t)h));
        float vb = u2f(ref_bf16_to_f32((uint16_t)h));
        check_down(v16, &bad);
        check_down(vb, &bad);
        if (isnan(v16) || isnan(vb)) continue;
        if (!isinf(v16)) {
            check_down(nextafterf(v16, INFINITY), &bad);
            check_down(nextafterf(v16, -INFINITY), &bad);
        }
        if (!isinf(vb)) {
            check_down(nextafterf(vb, INFINITY), &bad);
            check_down(nextafterf(vb, -INFINITY), &bad);
        }
        if ((h & 0x7fff) < 0x7c00) { /* midpoint to the next f16 magnitude */
            double a = u2f(ref_f16_to_f32((uint16_t)h));
            double b = (h & 0x7fff) == 0x7bff
                           ? (h & 0x8000 ? -65536.0 : 65536.0) /* to Inf */
                           : (double)u2f(ref_f16_to_f32((uint16_t)(h + 1)));
            float mid = (float)((a + b) / 2); /* exact: 12 significant bits */
            KT_CHECK((double)mid == (a + b) / 2);
            check_down(mid, &bad);
            check_down(nextafterf(mid, INFINITY), &bad);
            check_down(nextafterf(mid, -INFINITY), &bad);
            /* tie to even: the even neighbour wins */
            {
                uint16_t r = kern_f32_to_f16(mid);
                uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
                if (r != want && bad++ < 4)
                    KT_CHECK(r == want, "f16 midpoint after 0x%04x -> 0x%04x", h, r);
            }
        }
        if ((h & 0x7fff) < 0x7f80) { /* bf16 midpoint: the f32 bits below */
            float mid = u2f(((uint32_t)h << 16) + 0x8000u);
            uint16_t r = kern_f32_to_bf16(mid);
            uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            check_down(mid, &bad);
            if (r != want && bad++ < 4)
                KT_CHECK(r == want, "bf16 midpoint after 0x%04x -> 0x%04x", h, r);
        }
    }
    KT_CHECK(bad == 0, "%d values differ", bad);
}

KT_TEST(f32_to_half_thresholds) {
    /* values with their expected encodings, stated here, not computed */
    static const struct { uint32_t f; uint16_t h16, hb; } t[] = {
        {0x00000000u, 0x0000, 0x0000}, {0x80000000u, 0x8000, 0x8000},
        {0x3f800000u, 0x3c00, 0x3f80}, {0x477fe000u, 0x7bff, 0x4780}, /* 65504 */
        {0x477fefffu, 0x7bff, 0x4780}, /* just below 65520 */
        {0x477ff000u, 0x7c00, 0x4780}, /* 65520 -> Inf in f16 */
        {0xc77ff000u, 0xfc00, 0xc780},
        {0x47800000u, 0x7c00, 0x4780}, /* 65536 */
        {0x7f7fffffu, 0x7c00, 0x7f80}, /* FLT_MAX -> Inf in both */
        {0x7f7f7fffu, 0x7c00, 0x7f7f}, /* largest f32 that stays finite in bf16 */
        {0x7f7f8000u, 0x7c00, 0x7f80}, /* tie at the top: rounds to even = Inf */
        {0x7f800000u, 0x7c00, 0x7f80}, {0xff800000u, 0xfc00, 0xff80},
        {0x38800000u, 0x0400, 0x3880}, /* 2^-14: smallest normal f16 */
        {0x387fe000u, 0x0400, 0x3880}, /* 2^-14 - 2^-25: tie, up to normal */
        {0x387fc000u, 0x03ff, 0x3880}, /* largest subnormal f16 */
        {0x387f8000u, 0x03fe, 0x3880},
        {0x33800000u, 0x0001, 0x3380}, /* 2^-24: smallest subnormal */
        {0x33000000u, 0x0000, 0x3300}, /* 2^-25: tie -> 0 (even) */
        {0x33000001u, 0x0001, 0x3300}, /* just above the tie */
        {0x33c00000u, 0x0002, 0x33c0}, /* 1.5*2^-24: tie -> 2 (even) */
        {0x32ffffffu, 0x0000, 0x3300},
        {0x00800000u, 0x0000, 0x0080}, /* smallest normal f32 */
        {0x00000001u, 0x0000, 0x0000}, /* smallest subnormal f32 */
        {0x007fffffu, 0x0000, 0x0080}, /* largest subnormal f32 -> bf16 normal */
        {0x00408000u, 0x0000, 0x0040}, /* bf16 subnormal tie -> even */
        {0x00418000u, 0x0000, 0x0042},
        {0x3f808000u, 0x3c04, 0x3f80}, /* bf16 tie -> even (down) */
        {0x3f818000u, 0x3c0c, 0x3f82}, /* bf16 tie -> even (up) */
        {0x3f801000u, 0x3c00, 0x3f80}, /* f16 tie 1+2^-11 -> 1 */
        {0x3f803000u, 0x3c02, 0x3f80}, /* f16 tie 1+3*2^-11 -> 1+2^-9 */
        {0x7fc00000u, 0x7e00, 0x7fc0}, /* quiet NaN */
        {0x7f800001u, 0x7e00, 0x7fc0}, /* signalling NaN, low payload: quieted */
        {0x7fa00000u, 0x7f00, 0x7fe0}, /* signalling NaN, payload kept */
        {0xffffffffu, 0xffff, 0xffff}, /* all ones */
        {0xff812345u, 0xfe09, 0xffc1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        float x = u2f(t[i].f);
        uint16_t g16 = kern_f32_to_f16(x), gb = kern_f32_to_bf16(x);
        KT_CHECK(g16 == t[i].h16, "f32 0x%08x -> f16 0x%04x, want 0x%04x", t[i].f, g16, t[i].h16);
        KT_CHECK(gb == t[i].hb, "f32 0x%08x -> bf16 0x%04x, want 0x%04x", t[i].f, gb, t[i].hb);
        KT_CHECK(ref_f32_to_f16(x) == t[i].h16, "ref f16 of 0x%08x", t[i].f);
        KT_CHECK(ref_f32_to_bf16(x) == t[i].hb, "ref bf16 of 0x%08x", t[i].f);
    }
    /* NaN and Inf round trips keep the class and sign */
    KT_CHECK(isnan(kern_f16_to_f32(0x7c01)) && isnan(kern_bf16_to_f32(0xff81)));
    KT_CHECK(kern_f16_to_f32(0xfc00) == -INFINITY && kern_bf16_to_f32(0x7f80) == INFINITY);
    KT_CHECK(signbit(kern_f16_to_f32(0x8000)) && signbit(kern_bf16_to_f32(0x8000)));
}

KT_TEST(f32_to_half_random_sweep) {
    kt_rng r = kt_rng_make(1);
    int bad = 0;
    for (int i = 0; i < RANDOM_SWEEP; i++) {
        uint32_t u = (uint32_t)kt_next(&r);
        if (i & 1) /* half of them with exponents 2^-27..2^23 (the f16 range) */
            u = (u & 0x807fffffu) | ((100u + (uint32_t)((u >> 8) % 51u)) << 23);
        check_down(u2f(u), &bad);
    }
    /* every NaN payload class (top bits) for both signs */
    for (uint32_t m = 1; m < (1u << 23); m += 4093)
        for (int s = 0; s < 2; s++) check_down(u2f(((uint32_t)s << 31) | 0x7f800000u | m), &bad);
    KT_CHECK(bad == 0, "%d values differ", bad);
}

/* kern_convert on every ISA path, lengths 0..40 and unaligned starts,
 * compared with the scalar functions; guard bytes catch any overrun. */
KT_TEST(convert_vector_paths_match_scalar) {
    kt_rng r = kt_rng_make(2);
    float fsrc[48 + 4];
    uint16_t hsrc[48 + 4];
    for (int i = 0; i < 52; i++) {
        uint32_t u = (uint32_t)kt_next(&r);
        if (i % 5 == 0) u = 0x7f800000u | (u & 0x807fffffu); /* Inf/NaN */
        if (i % 7 == 0) u &= 0x807fffffu;                     /* subnormal */
        if (i % 3 == 0) u = (u & 0x83ffffffu) | 0x38000000u;  /* f16 range */
        fsrc[i] = u2f(u);
        hsrc[i] = (uint16_t)(kt_next(&r));
    }
    {
        KT_FOR_EACH_ISA(isa, ctx, 1) {
            for (int dir = 0; dir < 4; dir++) {
                kern_dtype sdt = dir < 2 ? (dir ? KERN_F16 : KERN_BF16) : KERN_F32;
                kern_dtype ddt = dir < 2 ? KERN_F32 : (dir == 2 ? KERN_BF16 : KERN_F16);
                for (int off = 0; off < 4; off++) {
                    for (int n = 0; n <= 40; n++) {
                        size_t db = (size_t)n * kern_dtype_size(ddt);
                        void *dst = kt_alloc_misaligned(db, (size_t)(off + 1) * kern_dtype_size(ddt), "dst");
                        const void *src = sdt == KERN_F32 ? (const void *)(fsrc + off)
                                                          : (const void *)(hsrc + off);
                        kt_poison(dst, db);
                        kt_context("isa=%s dir=%d off=%d n=%d", kern_isa_name(isa), dir, off, n);
                        KT_OK(kern_convert(ctx, sdt, src, ddt, dst, n));
                        for (int i = 0; i < n; i++) {
                            uint32_t got, want;
                            if (dir == 0) { got = f2u(((float *)dst)[i]); want = f2u(kern_bf16_to_f32(hsrc[off + i])); }
                            else if (dir == 1) { got = f2u(((float *)dst)[i]); want = f2u(kern_f16_to_f32(hsrc[off + i])); }
                            else if (dir == 2) { got = ((uint16_t *)dst)[i]; want = kern_f32_to_bf16(fsrc[off + i]); }
                            else { got = ((uint16_t *)dst)[i]; want = kern_f32_to_f16(fsrc[off + i]); }
                            if (got != want) {
                                KT_CHECK(got == want, "element %d: 0x%x want 0x%x", i, got, want);
                                break;
                            }
                        }
                        kt_free(dst);
                    }
                }
            }
        }
    }
    kt_context("");
}

/* All 65,536 patterns through every path and thread count; a random f32
 * array down; and arrays big enough for the multi-threaded and the
 * non-temporal (streaming store) paths, at an unaligned destination. */
KT_TEST(convert_arrays_all_paths) {
    kt_rng r = kt_rng_make(3);
    /* 16 MiB destinations take the streaming-store path */
    const int64_t big = ((int64_t)4 << 20) + 13, big_dn = ((int64_t)8 << 20) + 13;
    uint16_t *h = (uint16_t *)malloc((size_t)big * 2);
    uint16_t *h2 = (uint16_t *)malloc((size_t)big_dn * 2 + 64);
    float *f = (float *)malloc((size_t)big_dn * 4);
    float *fo = (float *)malloc((size_t)big * 4 + 64);
    KT_REQUIRE(h && h2 && f && fo);
    for (int64_t i = 0; i < big; i++) h[i] = (uint16_t)(i < 65536 ? (uint64_t)i : kt_next(&r));
    for (int64_t i = 0; i < big_dn; i++) f[i] = u2f((uint32_t)kt_next(&r));
    for (int threads = 1; threads <= 2; threads++) {
        KT_FOR_EACH_ISA(isa, ctx, threads) {
            int64_t sizes[3] = {65536, 100003, big};
            for (int si = 0; si < 3; si++) {
                int64_t n = sizes[si];
                float *out = (float *)((char *)fo + 4); /* not 64-byte aligned */
                uint16_t *out16 = (uint16_t *)((char *)h2 + 2);
                int64_t bad = 0;
                kt_context("isa=%s threads=%d n=%lld", kern_isa_name(isa), threads, (long long)n);
                KT_OK(kern_convert(ctx, KERN_BF16, h, KERN_F32, out, n));
                for (int64_t i = 0; i < n; i++) bad += f2u(out[i]) != f2u(kern_bf16_to_f32(h[i]));
                KT_CHECK(bad == 0, "bf16->f32: %lld differ", (long long)bad);
                KT_OK(kern_convert(ctx, KERN_F16, h, KERN_F32, out, n));
                bad = 0;
                for (int64_t i = 0; i < n; i++) bad += f2u(out[i]) != f2u(kern_f16_to_f32(h[i]));
                KT_CHECK(bad == 0, "f16->f32: %lld differ", (long long)bad);
                if (si == 2) n = big_dn;
                KT_OK(kern_convert(ctx, KERN_F32, f, KERN_BF16, out16, n));
                bad = 0;
                for (int64_t i = 0; i < n; i++) bad += out16[i] != kern_f32_to_bf16(f[i]);
                KT_CHECK(bad == 0, "f32->bf16: %lld differ", (long long)bad);
                KT_OK(kern_convert(ctx, KERN_F32, f, KERN_F16, out16, n));
                bad = 0;
                for (int64_t i = 0; i < n; i++) bad += out16[i] != kern_f32_to_f16(f[i]);
                KT_CHECK(bad == 0, "f32->f16: %lld differ", (long long)bad);
            }
        }
    }
    kt_context("");
    free(h); free(h2); free(f); free(fo);
}

/* Every bf16 and f16 tie (and its neighbours) through every vector path:
 * checks the hardware rounding (vcvtne2ps2bf16, vcvtps2ph) on the cases
 * where ties-to-even matters, in blocks with and without specials. */
KT_TEST(convert_ties_all_paths) {
    const int64_t n = 65536 * 3;
    float *fb = (float *)malloc((size_t)n * 4), *ff = (float *)malloc((size_t)n * 4);
    uint16_t *out = (uint16_t *)malloc((size_t)n * 2);
    KT_REQUIRE(fb && ff && out);
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t mid = (h << 16) + 0x8000u;
        double a = u2f(ref_f16_to_f32((uint16_t)h));
        double b = (h & 0x7fff) >= 0x7bff ? a : (double)u2f(ref_f16_to_f32((uint16_t)(h + 1)));
        float m16 = (float)((a + b) / 2);
        fb[3 * h] = u2f(mid);
        fb[3 * h + 1] = u2f(mid - 1);
        fb[3 * h + 2] = u2f(mid + 1);
        ff[3 * h] = m16;
        ff[3 * h + 1] = nextafterf(m16, -INFINITY);
        ff[3 * h + 2] = nextafterf(m16, INFINITY);
    }
    for (int threads = 1; threads <= 2; threads++) {
        KT_FOR_EACH_ISA(isa, ctx, threads) {
            int64_t bad = 0, first = -1;
            KT_OK(kern_convert(ctx, KERN_F32, fb, KERN_BF16, out, n));
            for (int64_t i = 0; i < n; i++)
                if (out[i] != kern_f32_to_bf16(fb[i]) && !bad++) first = i;
            KT_CHECK(bad == 0, "%s: %lld bf16 ties differ, first f32 0x%08x -> 0x%04x",
                     kern_isa_name(isa), (long long)bad, first >= 0 ? f2u(fb[first]) : 0,
                     first >= 0 ? out[first] : 0);
            bad = 0;
            KT_OK(kern_convert(ctx, KERN_F32, ff, KERN_F16, out, n));
            for (int64_t i = 0; i < n; i++)
                if (out[i] != kern_f32_to_f16(ff[i]) && !bad++) first = i;
            KT_CHECK(bad == 0, "%s: %lld f16 ties differ, first f32 0x%08x -> 0x%04x",
                     kern_isa_name(isa), (long long)bad, first >= 0 ? f2u(ff[first]) : 0,
                     first >= 0 ? out[first] : 0);
        }
    }
    free(fb); free(ff); free(out);
}

KT_TEST(convert_errors) {
    float f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint16_t h[8], before[8];
    kt_poison(h, sizeof h);
    memcpy(before, h, sizeof h);
    KT_ERROR(kern_convert(NULL, KERN_F32, f, KERN_I8, h, 8), KERN_ERR_DTYPE, "f32 -> i8");
    KT_ERROR(kern_convert(NULL, KERN_F16, f, KERN_BF16, h, 8), KERN_ERR_DTYPE, "kern_convert");
    KT_ERROR(kern_convert(NULL, KERN_F32, f, KERN_F16, h, -1), KERN_ERR_ARG, "n=-1");
    KT_ERROR(kern_convert(NULL, KERN_F32, NULL, KERN_F16, h, 8), KERN_ERR_ARG, "src is NULL");
    KT_ERROR(kern_convert(NULL, KERN_F32, f, KERN_F16, NULL, 8), KERN_ERR_ARG, "dst is NULL");
    KT_ERROR(kern_convert(NULL, KERN_F32, f, KERN_F16, (char *)f + 4, 4), KERN_ERR_ARG, "overlap");
    KT_ERROR(kern_convert(NULL, KERN_F32, f, KERN_F16, h, INT64_MAX / 2), KERN_ERR_ARG, "overflow");
    KT_CHECK(!memcmp(h, before, sizeof h), "dst written on error");
    KT_OK(kern_convert(NULL, KERN_F32, NULL, KERN_F16, NULL, 0)); /* empty is fine */
    KT_OK(kern_convert(NULL, KERN_F32, f, KERN_F16, h, 8));
    KT_CHECK(h[7] == 0x4800, "8.0 -> 0x%04x", h[7]);
}

/* =================================================== CPU features, ISA */

/* The kernel's view of the CPU flags (it also masks what the OS does not
 * enable), to cross-check cpuid + xgetbv. */
static KT__UNUSED int cpuinfo_flag(const char *flag, int *have_file) {
    FILE *fp = fopen("/proc/cpuinfo", "r");
    char line[8192];
    int found = 0;
    *have_file = 0;
    if (!fp) return 0;
    while (fgets(line, sizeof line, fp)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        *have_file = 1;
        {
            char *tok = strtok(strchr(line, ':') + 1, " \n");
            for (; tok; tok = strtok(NULL, " \n"))
                if (!strcmp(tok, flag)) found = 1;
        }
        break;
    }
    fclose(fp);
    return found;
}

KT_TEST(cpu_features) {
    uint32_t f = kern_cpu_features();
    char buf[256];
    KT_CHECK(f == kern_cpu_features(), "not stable");
#if defined(__x86_64__) && !defined(KERN_NO_SIMD)
    {
        static const struct { uint32_t bit; const char *flag; } m[] = {
            {KERN_CPU_AVX2, "avx2"}, {KERN_CPU_FMA, "fma"}, {KERN_CPU_F16C, "f16c"},
            {KERN_CPU_AVX512F, "avx512f"}, {KERN_CPU_AVX512BW, "avx512bw"},
            {KERN_CPU_AVX512VL, "avx512vl"}, {KERN_CPU_AVX512DQ, "avx512dq"},
            {KERN_CPU_AVX512VNNI, "avx512_vnni"}, {KERN_CPU_AVX512BF16, "avx512_bf16"},
            {KERN_CPU_AVXVNNI, "avx_vnni"}, {KERN_CPU_AMX_TILE, "amx_tile"},
            {KERN_CPU_AMX_INT8, "amx_int8"}, {KERN_CPU_AMX_BF16, "amx_bf16"}};
        for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
            int have_file, flag = cpuinfo_flag(m[i].flag, &have_file);
            if (!have_file) break;
            KT_CHECK(!!(f & m[i].bit) == flag, "%s: cpuid says %d, /proc/cpuinfo %d",
                     m[i].flag, !!(f & m[i].bit), flag);
        }
    }
#endif
    kern_cpu_features_str(f, buf, sizeof buf);
    if (f & KERN_CPU_AVX2) KT_CHECK(strstr(buf, "avx2") != NULL, "%s", buf);
    if (f & KERN_CPU_AVX512BF16) KT_CHECK(strstr(buf, "avx512bf16") != NULL, "%s", buf);
    KT_CHECK(!strcmp(kern_cpu_features_str(0, buf, sizeof buf), "scalar"));
    kern_cpu_features_str(0xffffffffu, buf, 12); /* truncated, terminated */
    KT_CHECK(strlen(buf) < 12, "%s", buf);
    KT_CHECK(kern_cpu_features_str(f, NULL, 0) == NULL);
}

KT_TEST(isa_levels_and_caps) {
    kern_isa best = kern_isa_best();
    KT_CHECK(kern_isa_available(KERN_ISA_SCALAR) && kern_isa_available(KERN_ISA_AUTO));
    KT_CHECK(kern_isa_features(KERN_ISA_SCALAR) == 0);
    KT_CHECK(!kern_isa_available((kern_isa)42) && !kern_isa_available((kern_isa)-3));
    KT_CHECK(!strcmp(kern_isa_name(KERN_ISA_AVX512), "avx512"));
    KT_CHECK(!strcmp(kern_isa_name(KERN_ISA_AVX2_VNNI), "avx2_vnni"));
    KT_CHECK(!strcmp(kern_isa_name(KERN_ISA_AVX512_BF16), "avx512_bf16"));
    KT_CHECK(!strcmp(kern_isa_name(KERN_ISA_AMX), "amx"));
    KT_CHECK(!strcmp(kern_isa_name(KERN_ISA_NEON_DOT), "neon_dot"));
    KT_CHECK(!strcmp(kern_isa_name((kern_isa)42), "invalid"));
    KT_CHECK(kern_isa_available(best) && best != KERN_ISA_AUTO);
    KT_CHECK(kern_isa_features(KERN_ISA_AUTO) == kern_isa_features(best));
    {   /* every level grants exactly its required set, or nothing */
        int i;
        uint32_t f = kern_cpu_features();
        for (i = KERN_ISA_SCALAR; i < KERN_ISA_COUNT; i++) {
            kern_isa l = (kern_isa)i;
            uint32_t need = kern_isa_required(l), got = kern_isa_features(l);
            int built = 1; /* AMX needs the compiler's tile intrinsics too */
#ifndef KERN__HAVE_AMX
            if (l == KERN_ISA_AMX) built = 0;
#endif
            if (l == KERN_ISA_NEON_BF16) got &= ~(uint32_t)KERN_CPU_NEON_FP16;
            KT_CHECK(got == (((f & need) == need && built) ? need : 0u), "%s", kern_isa_name(l));
            KT_CHECK(kern_isa_available(l) == (l == KERN_ISA_SCALAR || ((f & need) == need && built)),
                     "%s", kern_isa_name(l));
        }
        /* chains are cumulative */
        KT_CHECK((kern_isa_required(KERN_ISA_AVX2_VNNI) & kern_isa_required(KERN_ISA_AVX2)) ==
                 kern_isa_required(KERN_ISA_AVX2));
        KT_CHECK((kern_isa_required(KERN_ISA_AVX512) & kern_isa_required(KERN_ISA_AVX2)) ==
                 kern_isa_required(KERN_ISA_AVX2));
        KT_CHECK(!(kern_isa_required(KERN_ISA_AVX512) & KERN_CPU_AVXVNNI));
        KT_CHECK((kern_isa_required(KERN_ISA_AVX512_BF16) & kern_isa_required(KERN_ISA_AVX512_VNNI)) ==
                 kern_isa_required(KERN_ISA_AVX512_VNNI));
        KT_CHECK(kern_isa_required(KERN_ISA_AVX512_BF16) & KERN_CPU_AVX512BF16);
        KT_CHECK((kern_isa_required(KERN_ISA_AMX) & kern_isa_required(KERN_ISA_AVX512_BF16)) ==
                 kern_isa_required(KERN_ISA_AVX512_BF16));
        KT_CHECK((kern_isa_required(KERN_ISA_AMX) & KERN_CPU_AMX_BF16) &&
                 (kern_isa_required(KERN_ISA_AMX) & KERN_CPU_AMX_TILE));
        KT_CHECK((kern_isa_required(KERN_ISA_NEON_BF16) & kern_isa_required(KERN_ISA_NEON_DOT)) ==
                 kern_isa_required(KERN_ISA_NEON_DOT));
    }
    {   /* kern_isa_list: SCALAR first, best last among the available ones */
        kern_isa all[KERN_ISA_COUNT], av[KERN_ISA_COUNT];
        char miss[128];
        int n = kern_isa_list(all, KERN_ISA_COUNT, 0), na = kern_isa_list(av, KERN_ISA_COUNT, 1), i;
        KT_CHECK(n >= 1 && all[0] == KERN_ISA_SCALAR && na >= 1 && av[0] == KERN_ISA_SCALAR);
        KT_CHECK(av[na - 1] == best, "%s", kern_isa_name(av[na - 1]));
        KT_CHECK(kern_isa_list(all, 1, 0) == 1 && kern_isa_list(NULL, 4, 0) == 0);
        for (i = 0; i < n; i++) {
            kern_isa_missing(all[i], miss, sizeof miss);
            KT_CHECK((miss[0] == 0) == kern_isa_available(all[i]), "%s: '%s'", kern_isa_name(all[i]), miss);
        }
        KT_CHECK(!strcmp(kern_isa_missing(KERN_ISA_SCALAR, miss, sizeof miss), ""));
#if defined(__x86_64__) && !defined(KERN_NO_SIMD)
        KT_CHECK(n == 7);
#endif
    }
#if defined(__x86_64__) && !defined(KERN_NO_SIMD)
    {
        uint32_t f = kern_cpu_features();
        if ((f & (KERN_CPU_AVX2 | KERN_CPU_FMA | KERN_CPU_F16C)) ==
            (KERN_CPU_AVX2 | KERN_CPU_FMA | KERN_CPU_F16C)) {
            KT_CHECK(kern_isa_available(KERN_ISA_AVX2));
            KT_CHECK(kern_isa_features(KERN_ISA_AVX2) == (KERN_CPU_AVX2 | KERN_CPU_FMA | KERN_CPU_F16C));
        }
        if (f & KERN_CPU_AVX512F) {
            KT_CHECK(best >= KERN_ISA_AVX512);
            KT_CHECK(kern_isa_features(KERN_ISA_AVX512) & KERN_CPU_AVX512BW);
            KT_CHECK(!(kern_isa_features(KERN_ISA_AVX512) & (KERN_CPU_AVX512BF16 | KERN_CPU_AVX512VNNI)));
            KT_CHECK(kern_isa_available(KERN_ISA_AVX512_BF16) == !!(f & KERN_CPU_AVX512BF16) ||
                     !(f & KERN_CPU_AVX512VNNI));
        }
        KT_CHECK(!kern_isa_available(KERN_ISA_NEON));
    }
#endif
    {   /* each level as a cap: the context reports it and nothing above it */
        KT_FOR_EACH_ISA(isa, ctx, 1) {
            uint32_t cf = kern_ctx_features(ctx);
            KT_CHECK(kern_ctx_isa(ctx) == isa);
            KT_CHECK(cf == kern_isa_features(isa), "%s", kern_isa_name(isa));
            if (isa == KERN_ISA_SCALAR) KT_CHECK(cf == 0);
            if (isa == KERN_ISA_AVX2) KT_CHECK(!(cf & (KERN_CPU_AVX512F | KERN_CPU_AVXVNNI)));
            if (isa == KERN_ISA_AVX512) KT_CHECK(!(cf & (KERN_CPU_AVX512BF16 | KERN_CPU_AVX512VNNI)));
        }
    }
    {   /* kern_ctx_set_isa_cap */
        kern_ctx *c = NULL;
        kern_ctx_params p;
        memset(&p, 0, sizeof p);
        p.n_threads = 1;
        KT_OK(kern_ctx_create(&p, &c));
        KT_CHECK(kern_ctx_isa(c) == best);
        KT_OK(kern_ctx_set_isa_cap(c, KERN_ISA_SCALAR));
        KT_CHECK(kern_ctx_isa(c) == KERN_ISA_SCALAR && kern_ctx_features(c) == 0);
        KT_OK(kern_ctx_set_isa_cap(c, KERN_ISA_AUTO));
        KT_CHECK(kern_ctx_isa(c) == best && kern_ctx_features(c) == kern_isa_features(best));
        KT_ERROR(kern_ctx_set_isa_cap(c, (kern_isa)42), KERN_ERR_ARG, "cap=42");
        KT_ERROR(kern_ctx_set_isa_cap(NULL, KERN_ISA_SCALAR), KERN_ERR_ARG, "ctx is NULL");
#if defined(__x86_64__)
        KT_ERROR(kern_ctx_set_isa_cap(c, KERN_ISA_NEON), KERN_ERR_UNSUPPORTED, "neon");
        p.isa_cap = KERN_ISA_NEON;
        KT_ERROR(kern_ctx_create(&p, &c), KERN_ERR_UNSUPPORTED, "isa_cap=neon");
#endif
        kern_ctx_destroy(c);
    }
}

/* ============================================================== pool */

typedef struct count_arg {
    int *count;
    int *thread_ok;
    int threads;
} count_arg;

static void count_task(void *p, int64_t i, int thread) {
    count_arg *a = (count_arg *)p;
    __atomic_fetch_add(&a->count[i], 1, __ATOMIC_RELAXED);
    if (thread < 0 || thread >= a->threads) __atomic_store_n(a->thread_ok, 0, __ATOMIC_RELAXED);
}

static int run_counted(kern_ctx *ctx, int64_t n, int threads) {
    count_arg a;
    int ok = 1, thread_ok = 1;
    a.count = (int *)calloc((size_t)n + 1, sizeof(int));
    a.thread_ok = &thread_ok;
    a.threads = threads;
    KT_OK(kern_parallel_for(ctx, n, count_task, &a));
    for (int64_t i = 0; i < n; i++)
        if (a.count[i] != 1) {
            KT_CHECK(a.count[i] == 1, "task %lld of %lld ran %d times (threads %d)",
                     (long long)i, (long long)n, a.count[i], threads);
            ok = 0;
            break;
        }
    KT_CHECK(a.count[n] == 0, "task past the end ran");
    KT_CHECK(thread_ok, "thread index outside 0..%d", threads - 1);
    free(a.count);
    return ok;
}

KT_TEST(pool_every_task_once) {
    static const int64_t ns[] = {0, 1, 2, 3, 1000, 100003};
    for (int threads = 1; threads <= 4; threads++) {
        kern_ctx *ctx = kt_ctx(threads, KERN_ISA_AUTO);
        KT_REQUIRE(ctx != NULL);
        KT_CHECK(kern_ctx_threads(ctx) == threads);
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (int rep = 0; rep < 20; rep++)
                if (!run_counted(ctx, ns[k], threads)) break;
    }
}

/* Two tasks on two threads that wait for each other: passes only if two
 * threads run them at once, and the caller is thread 0. */
typedef struct meet_arg {
    int started;
    int timeout;
    pthread_t who[2];
    int thread_of[2];
} meet_arg;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void meet_task(void *p, int64_t i, int thread) {
    meet_arg *a = (meet_arg *)p;
    double t0 = now_s();
    a->who[i] = pthread_self();
    a->thread_of[i] = thread;
    __atomic_fetch_add(&a->started, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&a->started, __ATOMIC_ACQUIRE) < 2) {
        if (now_s() - t0 > 10) { a->timeout = 1; return; }
        sched_yield();
    }
}

KT_TEST(pool_caller_participates_and_threads_run_concurrently) {
    kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
    for (int rep = 0; rep < 5; rep++) {
        meet_arg a;
        int caller_idx;
        memset(&a, 0, sizeof a);
        KT_OK(kern_parallel_for(ctx, 2, meet_task, &a));
        KT_REQUIRE(!a.timeout, "the two tasks never ran at the same time");
        KT_CHECK(a.thread_of[0] != a.thread_of[1], "same thread index %d", a.thread_of[0]);
        caller_idx = pthread_equal(a.who[0], pthread_self()) ? 0
                     : pthread_equal(a.who[1], pthread_self()) ? 1 : -1;
        KT_REQUIRE(caller_idx >= 0, "the calling thread ran no task");
        KT_CHECK(a.thread_of[caller_idx] == 0, "caller ran as thread %d", a.thread_of[caller_idx]);
    }
}

/* One slow task among many short ones: with dynamic distribution the other
 * thread takes most of the short ones (a static split would give each
 * thread half). Sleeps, so the check holds on a loaded machine. */
typedef struct uneven_arg {
    int slow_thread;
    int per_thread[4];
} uneven_arg;

static void uneven_task(void *p, int64_t i, int thread) {
    uneven_arg *a = (uneven_arg *)p;
    __atomic_fetch_add(&a->per_thread[thread], 1, __ATOMIC_RELAXED);
    if (i == 0) {
        a->slow_thread = thread;
        usleep(40000);
    } else {
        usleep(300);
    }
}

KT_TEST(pool_uneven_tasks_balance) {
    kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
    uneven_arg a;
    memset(&a, 0, sizeof a);
    KT_OK(kern_parallel_for(ctx, 64, uneven_task, &a));
    KT_CHECK(a.per_thread[0] + a.per_thread[1] == 64);
    KT_CHECK(a.per_thread[a.slow_thread] <= 24,
             "the thread with the slow task also ran %d of 64 tasks (%d/%d)",
             a.per_thread[a.slow_thread], a.per_thread[0], a.per_thread[1]);
}

/* A user pool: the hook runs tasks on two threads it starts itself. */
typedef struct hook_pool {
    int calls;
    int64_t tasks_seen;
} hook_pool;
typedef struct hook_work {
    int64_t n;
    kern_task_fn fn;
    void *arg;
    int64_t next;
    int thread;
} hook_work;
static void *hook_thread(void *p) {
    hook_work *w = (hook_work *)p;
    int me = __atomic_fetch_add(&w->thread, 1, __ATOMIC_RELAXED);
    for (;;) {
        int64_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
        if (i >= w->n) break;
        w->fn(w->arg, i, me);
    }
    return NULL;
}
static void my_parallel_for(void *user, int64_t n, kern_task_fn fn, void *arg) {
    hook_pool *hp = (hook_pool *)user;
    hook_work w;
    pthread_t th[2];
    hp->calls++;
    hp->tasks_seen += n;
    w.n = n; w.fn = fn; w.arg = arg; w.next = 0; w.thread = 0;
    pthread_create(&th[0], NULL, hook_thread, &w);
    pthread_create(&th[1], NULL, hook_thread, &w);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
}

static kern_status fake_op(kern_ctx *ctx, const char *name) {
    kern_status st = kern__op_begin(&ctx, name);
    if (st != KERN_OK) return st;
    kern__op_end(ctx);
    return KERN_OK;
}

typedef struct nest_arg {
    kern_ctx *ctx, *other;
    int unsupported, other_ok, inline_ok, inner_count;
} nest_arg;

static void inner_task(void *p, int64_t i, int thread) {
    nest_arg *a = (nest_arg *)p;
    (void)i; (void)thread;
    __atomic_fetch_add(&a->inner_count, 1, __ATOMIC_RELAXED);
}
typedef struct inline_check {
    pthread_t self;
    int thread;
    int bad;
    int count;
} inline_check;
static void inline_inner(void *p, int64_t i, int thread) {
    inline_check *c = (inline_check *)p;
    (void)i;
    if (!pthread_equal(c->self, pthread_self()) || thread != c->thread) c->bad++;
    c->count++; /* no atomics: inline means one thread */
}
static void nest_task(void *p, int64_t i, int thread) {
    nest_arg *a = (nest_arg *)p;
    inline_check c;
    kern_status st;
    (void)i;
    kern_clear_error();
    st = fake_op(a->ctx, "kt_nested_op");
    if (st == KERN_ERR_UNSUPPORTED && strstr(kern_last_error(), "kt_nested_op"))
        __atomic_fetch_add(&a->unsupported, 1, __ATOMIC_RELAXED);
    if (a->other && fake_op(a->other, "kt_other_op") == KERN_OK)
        __atomic_fetch_add(&a->other_ok, 1, __ATOMIC_RELAXED);
    c.self = pthread_self();
    c.thread = thread;
    c.bad = 0;
    c.count = 0;
    if (kern_parallel_for(a->ctx, 17, inline_inner, &c) == KERN_OK && c.bad == 0 &&
        c.count == 17)
        __atomic_fetch_add(&a->inline_ok, 1, __ATOMIC_RELAXED);
    kern_parallel_for(a->ctx, 5, inner_task, a);
}

KT_TEST(pool_user_hook) {
    hook_pool hp;
    kern_ctx *ctx = NULL;
    kern_ctx_params p;
    count_arg ca;
    int thread_ok = 1;
    nest_arg na;
    memset(&hp, 0, sizeof hp);
    memset(&p, 0, sizeof p);
    p.n_threads = 2;
    p.parallel_for = my_parallel_for;
    p.parallel_for_user = &hp;
    KT_OK(kern_ctx_create(&p, &ctx));
    KT_REQUIRE(ctx != NULL);
    KT_CHECK(kern_ctx_threads(ctx) == 2);
    ca.count = (int *)calloc(1001, sizeof(int));
    ca.thread_ok = &thread_ok;
    ca.threads = 2;
    KT_OK(kern_parallel_for(ctx, 1000, count_task, &ca));
    KT_CHECK(hp.calls == 1 && hp.tasks_seen == 1000, "calls=%d tasks=%lld", hp.calls,
             (long long)hp.tasks_seen);
    for (int i = 0; i < 1000; i++)
        if (ca.count[i] != 1) { KT_CHECK(ca.count[i] == 1, "task %d ran %d times", i, ca.count[i]); break; }
    KT_CHECK(thread_ok);
    free(ca.count);
    /* hook tasks are tasks: nested ops are refused, parallel_for inlines */
    memset(&na, 0, sizeof na);
    na.ctx = ctx;
    KT_OK(kern_parallel_for(ctx, 8, nest_task, &na));
    KT_CHECK(na.unsupported == 8, "%d of 8 nested ops refused", na.unsupported);
    KT_CHECK(na.inline_ok == 8, "%d of 8 nested parallel_for ran inline", na.inline_ok);
    KT_CHECK(na.inner_count == 40);
    KT_CHECK(hp.calls == 2, "nested parallel_for went to the hook (%d calls)", hp.calls);
    KT_OK(kern_parallel_for(ctx, 0, count_task, &ca)); /* n = 0: hook not called */
    KT_CHECK(hp.calls == 2);
    kern_ctx_destroy(ctx);
}

KT_TEST(pool_nested_calls) {
    for (int threads = 1; threads <= 3; threads++) {
        kern_ctx *ctx = kt_ctx(threads, KERN_ISA_AUTO);
        kern_ctx *other = kt_ctx(threads, KERN_ISA_SCALAR);
        nest_arg na;
        memset(&na, 0, sizeof na);
        na.ctx = ctx;
        na.other = other;
        KT_OK(kern_parallel_for(ctx, 50, nest_task, &na));
        KT_CHECK(na.unsupported == 50, "%d of 50 nested ops on the same ctx refused",
                 na.unsupported);
        KT_CHECK(na.other_ok == 50, "%d of 50 ops on another ctx ran", na.other_ok);
        KT_CHECK(na.inline_ok == 50, "%d of 50 nested parallel_for inline on the same thread",
                 na.inline_ok);
        KT_CHECK(na.inner_count == 250);
    }
    {   /* an op inside an op of the same context (outside any task) */
        kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
        kern_ctx *c2 = ctx;
        KT_OK(kern__op_begin(&c2, "kt_outer"));
        KT_ERROR(fake_op(ctx, "kt_inner"), KERN_ERR_UNSUPPORTED, "kt_inner");
        KT_ERROR(kern_ctx_set_isa_cap(ctx, KERN_ISA_SCALAR), KERN_ERR_UNSUPPORTED,
                 "inside an op");
        kern__op_end(c2);
        KT_OK(fake_op(ctx, "kt_after")); /* the lock was released */
    }
}

/* ctx A's task runs an op on ctx B whose task runs an op on A: refused,
 * not a deadlock, because the frame chain follows the work across
 * contexts. */
typedef struct chain_arg {
    kern_ctx *a, *b;
    int refused;
} chain_arg;
static void chain_inner(void *p, int64_t i, int thread) {
    chain_arg *c = (chain_arg *)p;
    (void)i; (void)thread;
    if (fake_op(c->a, "kt_back_to_a") == KERN_ERR_UNSUPPORTED)
        __atomic_fetch_add(&c->refused, 1, __ATOMIC_RELAXED);
}
static void chain_outer(void *p, int64_t i, int thread) {
    chain_arg *c = (chain_arg *)p;
    kern_ctx *b = c->b;
    (void)i; (void)thread;
    if (kern__op_begin(&b, "kt_op_on_b") == KERN_OK) {
        kern_parallel_for(b, 3, chain_inner, c);
        kern__op_end(b);
    }
}
KT_TEST(pool_nested_across_contexts) {
    chain_arg c;
    kern_ctx *a;
    c.a = kt_ctx(2, KERN_ISA_AUTO);
    c.b = kt_ctx(3, KERN_ISA_AUTO);
    c.refused = 0;
    a = c.a;
    KT_OK(kern__op_begin(&a, "kt_op_on_a"));
    KT_OK(kern_parallel_for(a, 4, chain_outer, &c));
    kern__op_end(a);
    KT_CHECK(c.refused == 12, "%d of 12 refused", c.refused);
}

/* Several user threads on one context: bare parallel_for calls, and ops
 * (which must not overlap). */
typedef struct conc_arg {
    kern_ctx *ctx;
    int id;
    int errors;
    int *in_op;
    int *overlaps;
} conc_arg;
typedef struct conc_task_arg {
    int *count;
} conc_task_arg;
static void conc_task(void *p, int64_t i, int thread) {
    conc_task_arg *a = (conc_task_arg *)p;
    (void)thread;
    __atomic_fetch_add(&a->count[i], 1, __ATOMIC_RELAXED);
}
static void *conc_thread(void *p) {
    conc_arg *c = (conc_arg *)p;
    int count[37];
    conc_task_arg ta;
    ta.count = count;
#ifdef KT_SANITIZER
    const int reps = 60;
#else
    const int reps = 300;
#endif
    for (int r = 0; r < reps; r++) {
        int n = 1 + (r * 7 + c->id) % 37;
        kern_ctx *ctx = c->ctx;
        memset(count, 0, sizeof count);
        if (r % 2) {
            if (kern__op_begin(&ctx, "kt_conc_op") != KERN_OK) { c->errors++; continue; }
            if (__atomic_exchange_n(c->in_op, 1, __ATOMIC_ACQ_REL))
                __atomic_fetch_add(c->overlaps, 1, __ATOMIC_RELAXED);
            kern_parallel_for(ctx, n, conc_task, &ta);
            __atomic_store_n(c->in_op, 0, __ATOMIC_RELEASE);
            kern__op_end(ctx);
        } else {
            kern_parallel_for(ctx, n, conc_task, &ta);
        }
        for (int i = 0; i < n; i++)
            if (count[i] != 1) c->errors++;
    }
    return NULL;
}
KT_TEST(pool_concurrent_callers) {
    for (int threads = 1; threads <= 3; threads += 2) {
        kern_ctx *ctx = kt_ctx(threads, KERN_ISA_AUTO);
        pthread_t th[4];
        conc_arg ca[4];
        int in_op = 0, overlaps = 0;
        for (int i = 0; i < 4; i++) {
            ca[i].ctx = ctx;
            ca[i].id = i;
            ca[i].errors = 0;
            ca[i].in_op = &in_op;
            ca[i].overlaps = &overlaps;
            pthread_create(&th[i], NULL, conc_thread, &ca[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            KT_CHECK(ca[i].errors == 0, "caller %d: %d wrong task counts (threads %d)", i,
                     ca[i].errors, threads);
        }
        KT_CHECK(overlaps == 0, "%d ops overlapped on one context", overlaps);
    }
}

static void *get_default(void *p) {
    *(kern_ctx **)p = kern_default_ctx();
    return NULL;
}
typedef struct pid_arg { int threads_seen; } pid_arg;
static void noop_task(void *p, int64_t i, int thread) {
    (void)p; (void)i; (void)thread;
}
KT_TEST(default_context) {
    pthread_t th[4];
    kern_ctx *got[4];
    kern_ctx *d;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, get_default, &got[i]);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    d = kern_default_ctx();
    KT_REQUIRE(d != NULL, "%s", kern_last_error());
    for (int i = 0; i < 4; i++) KT_CHECK(got[i] == d, "thread %d got another default", i);
    KT_CHECK(kern_ctx_threads(NULL) == kern_ctx_threads(d));
    KT_CHECK(kern_ctx_threads(d) == (ncpu < 1 ? 1 : ncpu), "threads=%d cpus=%ld",
             kern_ctx_threads(d), ncpu);
    KT_CHECK(kern_ctx_isa(NULL) == kern_isa_best());
    KT_CHECK(kern_ctx_features(NULL) == kern_isa_features(kern_isa_best()));
    KT_CHECK(kern_ctx_deterministic(NULL) == 0);
    run_counted(NULL, 1000, (int)ncpu);
    kern_ctx_destroy(d); /* ignored */
    KT_CHECK(kern_default_ctx() == d);
    run_counted(d, 77, (int)ncpu);
    {
        kern_ctx *c = NULL;
        KT_OK(kern__op_begin(&c, "kt_default_op"));
        KT_CHECK(c == d, "NULL did not resolve to the default context");
        kern__op_end(c);
    }
    KT_OK(kern_parallel_for(NULL, 3, noop_task, NULL));
    kern_ctx_destroy(NULL);
}

/* Tuning classes: every name parses back to its class, an unknown name
 * is KERN_UARCH_COUNT, and the detected class follows the rule written in
 * kern_base.h (vendor, family and the measured zmm/ymm ratio). */
KT_TEST(uarch_names_and_detection) {
    const kern_cpu_info_t *ci = kern_cpu_info();
    int u, want = KERN_UARCH_GENERIC;
    for (u = 0; u < KERN_UARCH_COUNT; u++) {
        const char *nm = kern_uarch_name((kern_uarch)u);
        kt_context("%s", nm);
        KT_CHECK(strcmp(nm, "invalid") != 0);
        KT_CHECK(kern_uarch_from_name(nm) == (kern_uarch)u);
    }
    KT_CHECK(!strcmp(kern_uarch_name(KERN_UARCH_ZEN5), "zen5"));
    KT_CHECK(!strcmp(kern_uarch_name(KERN_UARCH_COUNT), "invalid"));
    KT_CHECK(kern_uarch_from_name("zen6") == KERN_UARCH_COUNT);
    KT_CHECK(kern_uarch_from_name(NULL) == KERN_UARCH_COUNT);
    if (kern_cpu_features() & KERN_CPU_AVX512F) {
        int amd = !strcmp(ci->vendor, "AuthenticAMD"), intel = !strcmp(ci->vendor, "GenuineIntel");
        int two = ci->zmm_ymm_ratio > 0.0 && ci->zmm_ymm_ratio < 1.5;
        if (amd && ci->family == 0x19) want = KERN_UARCH_ZEN4;
        else if (amd && ci->family == 0x1a && two) want = KERN_UARCH_ZEN5;
        else if (intel && two) want = KERN_UARCH_XEON_AVX512;
    }
    kt_context("%s family 0x%x ratio %.2f", ci->vendor, ci->family, ci->zmm_ymm_ratio);
    KT_CHECK(ci->uarch == (kern_uarch)want, "detected %s", kern_uarch_name(ci->uarch));
}

KT_TEST(ctx_create_errors_and_flags) {
    kern_ctx *c = (kern_ctx *)(uintptr_t)0x1234, *keep = c;
    kern_ctx_params p;
    memset(&p, 0, sizeof p);
    KT_ERROR(kern_ctx_create(&p, NULL), KERN_ERR_ARG, "out is NULL");
    p.n_threads = -1;
    KT_ERROR(kern_ctx_create(&p, &c), KERN_ERR_ARG, "n_threads=-1");
    p.n_threads = 5000;
    KT_ERROR(kern_ctx_create(&p, &c), KERN_ERR_ARG, "n_threads=5000");
    p.n_threads = 1;
    p.isa_cap = (kern_isa)17;
    KT_ERROR(kern_ctx_create(&p, &c), KERN_ERR_ARG, "isa_cap=17");
    p.isa_cap = KERN_ISA_AUTO;
    p.allocator.alloc = (void *(*)(void *, size_t, size_t))1;
    KT_ERROR(kern_ctx_create(&p, &c), KERN_ERR_ARG, "allocator.alloc");
    KT_CHECK(c == keep, "out written on error");
    memset(&p, 0, sizeof p);
    p.deterministic = 1;
    p.n_threads = 2;
    KT_OK(kern_ctx_create(&p, &c));
    KT_CHECK(kern_ctx_deterministic(c) == 1 && kern_ctx_threads(c) == 2);
    kern_ctx_destroy(c);
    KT_OK(kern_ctx_create(NULL, &c)); /* NULL params: defaults */
    KT_CHECK(kern_ctx_threads(c) == kern_ctx_threads(kern_default_ctx()));
    KT_CHECK(kern_ctx_deterministic(c) == 0);
    kern_ctx_destroy(c);
}

KT_TEST(parallel_for_bad_input) {
    kern_ctx *ctx = kt_ctx(2, KERN_ISA_AUTO);
    int calls = 0;
    KT_ERROR(kern_parallel_for(ctx, 10, NULL, &calls), KERN_ERR_ARG, "fn is NULL");
    KT_ERROR(kern_parallel_for(ctx, -5, noop_task, &calls), KERN_ERR_ARG, "n_tasks=-5");
    KT_ERROR(kern_parallel_for(NULL, 1, NULL, NULL), KERN_ERR_ARG, "kern_parallel_for");
    KT_OK(kern_parallel_for(ctx, 0, noop_task, NULL));
}

/* Thread scratch: 64-byte aligned, one slot per thread, no overlap, and
 * each task sees only its own thread's bytes. Workspace: aligned, reused. */
typedef struct scratch_arg {
    kern_ctx *ctx;
    size_t size;
    int bad;
} scratch_arg;
static void scratch_task(void *p, int64_t i, int thread) {
    scratch_arg *a = (scratch_arg *)p;
    unsigned char *s = (unsigned char *)kern__thread_scratch(a->ctx, thread);
    unsigned char v = (unsigned char)(i * 31 + 7);
    if (!s) { __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED); return; }
    memset(s, v, a->size);
    for (volatile int spin = 0; spin < 50; spin++) {}
    for (size_t k = 0; k < a->size; k++)
        if (s[k] != v) { __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED); return; }
}
KT_TEST(scratch_and_workspace) {
    kern_ctx *ctx = kt_ctx(4, KERN_ISA_AUTO), *c = ctx;
    scratch_arg a;
    void *w1, *w2, *w3;
    KT_OK(kern__op_begin(&c, "kt_scratch"));
    KT_OK(kern__reserve_thread_scratch(ctx, 100));
    for (int t = 0; t < 4; t++) {
        uintptr_t p = (uintptr_t)kern__thread_scratch(ctx, t);
        KT_CHECK(p != 0 && p % 64 == 0, "slot %d at %p", t, (void *)p);
        for (int u = 0; u < t; u++) {
            uintptr_t q = (uintptr_t)kern__thread_scratch(ctx, u);
            KT_CHECK(p >= q + 128 || q >= p + 128, "slots %d and %d share bytes", t, u);
        }
    }
    KT_CHECK(kern__thread_scratch(ctx, 4) == NULL && kern__thread_scratch(ctx, -1) == NULL);
    a.ctx = ctx;
    a.size = 100;
    a.bad = 0;
    KT_OK(kern_parallel_for(ctx, 4000, scratch_task, &a));
    KT_CHECK(a.bad == 0, "%d tasks saw another thread's scratch bytes", a.bad);
    {   /* growing keeps it working; a smaller request reuses the slots */
        void *s0 = kern__thread_scratch(ctx, 0);
        KT_OK(kern__reserve_thread_scratch(ctx, 64));
        KT_CHECK(kern__thread_scratch(ctx, 0) == s0, "shrinking reallocated");
        KT_OK(kern__reserve_thread_scratch(ctx, 5000));
        a.size = 5000;
        KT_OK(kern_parallel_for(ctx, 400, scratch_task, &a));
        KT_CHECK(a.bad == 0);
    }
    KT_ERROR(kern__reserve_thread_scratch(ctx, (size_t)-1), KERN_ERR_NOMEM, "thread scratch");
    w1 = kern__workspace(ctx, 1000);
    KT_CHECK(w1 && (uintptr_t)w1 % 64 == 0);
    memset(w1, 1, 1000);
    w2 = kern__workspace(ctx, 10);
    KT_CHECK(w2 == w1, "smaller workspace request reallocated");
    w3 = kern__workspace(ctx, 1 << 20);
    KT_CHECK(w3 && (uintptr_t)w3 % 64 == 0);
    memset(w3, 2, 1 << 20);
    KT_CHECK(kern__workspace(ctx, (size_t)-1) == NULL);
    kern__op_end(c);
}

typedef struct count_alloc {
    int allocs, frees, bad_align;
    size_t bytes;
} count_alloc;
static void *ca_alloc(void *user, size_t size, size_t align) {
    count_alloc *c = (count_alloc *)user;
    void *p = NULL;
    c->allocs++;
    c->bytes += size;
    if (align < 64 || (align & (align - 1))) c->bad_align++;
    if (posix_memalign(&p, align, size) != 0) return NULL;
    return p;
}
static void ca_free(void *user, void *p) {
    count_alloc *c = (count_alloc *)user;
    c->frees++;
    free(p);
}
KT_TEST(allocator_hook) {
    count_alloc ca;
    kern_ctx *ctx = NULL, *c;
    kern_ctx_params p;
    memset(&ca, 0, sizeof ca);
    memset(&p, 0, sizeof p);
    p.n_threads = 3;
    p.allocator.alloc = ca_alloc;
    p.allocator.free = ca_free;
    p.allocator.user = &ca;
    KT_OK(kern_ctx_create(&p, &ctx));
    c = ctx;
    KT_OK(kern__op_begin(&c, "kt_alloc"));
    KT_OK(kern__reserve_thread_scratch(ctx, 256));
    KT_CHECK(ca.allocs == 3, "thread scratch: %d allocations for 3 threads", ca.allocs);
    KT_CHECK(kern__workspace(ctx, 5000) != NULL);
    KT_CHECK(ca.allocs == 4 && ca.bytes >= 3 * 256 + 5000, "allocs=%d bytes=%zu", ca.allocs, ca.bytes);
    {
        void *x = kern__alloc(ctx, 10);
        KT_CHECK(x && (uintptr_t)x % 64 == 0);
        kern__free(ctx, x);
    }
    kern__op_end(c);
    kern_ctx_destroy(ctx);
    KT_CHECK(ca.allocs == ca.frees, "%d allocations, %d frees", ca.allocs, ca.frees);
    KT_CHECK(ca.bad_align == 0);
}

/* Blocks of 2 MiB and more from the default allocator start on a 2 MiB
 * boundary (their whole pages advised as huge pages on Linux); smaller
 * ones and a context's own allocator are untouched. */
KT_TEST(large_blocks_huge_page_aligned) {
    size_t sizes[3] = {(size_t)2 << 20, ((size_t)5 << 20) + 4096 + 3, ((size_t)2 << 20) - 64};
    int i;
    for (i = 0; i < 3; i++) {
        unsigned char *x = (unsigned char *)kern__alloc(NULL, sizes[i]);
        KT_REQUIRE(x != NULL, "%zu bytes", sizes[i]);
        KT_CHECK((uintptr_t)x % 64 == 0);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (sizes[i] >= ((size_t)2 << 20))
            KT_CHECK((uintptr_t)x % ((size_t)2 << 20) == 0, "%zu bytes at %p", sizes[i], (void *)x);
#endif
        memset(x, 0x5a, sizes[i]);   /* every byte ours, the tail too */
        KT_CHECK(x[sizes[i] - 1] == 0x5a && x[0] == 0x5a);
        kern__free(NULL, x);
    }
}

/* ============================================================ tensors */

KT_TEST(tensor_init_and_queries) {
    float buf[2 * 3 * 4];
    int64_t shape[3] = {2, 3, 4};
    kern_tensor t, v;
    char s[64];
    int64_t lo, hi;
    KT_OK(kern_tensor_init(&t, buf, KERN_F32, 3, shape));
    KT_CHECK(t.ndim == 3 && t.stride[0] == 12 && t.stride[1] == 4 && t.stride[2] == 1);
    KT_CHECK(kern_tensor_numel(&t) == 24);
    KT_CHECK(kern_tensor_is_contiguous(&t) && kern_tensor_last_dim_unit(&t));
    KT_CHECK(!strcmp(kern_shape_str(&t, s, sizeof s), "[2,3,4]"), "%s", s);
    KT_CHECK(!strcmp(kern_shape_str(&t, s, 4), "[2,"), "%s", s); /* truncated */
    KT_OK(kern_tensor_check(&t, "kt_op", "x"));
    kern_tensor_span(&t, &lo, &hi);
    KT_CHECK(lo == 0 && hi == 24);
    {   /* transposed view of the last two dims */
        int64_t vs[3] = {4, 2, 3}, st[3] = {12, 1, 4};
        KT_OK(kern_tensor_init_strided(&v, buf, KERN_F32, 3, vs, st));
        KT_CHECK(!kern_tensor_is_contiguous(&v) && !kern_tensor_last_dim_unit(&v));
        KT_CHECK(kern_tensor_numel(&v) == 24);
    }
    {   /* size-1 dims with odd strides are still contiguous */
        int64_t vs[3] = {1, 6, 1}, st[3] = {999, 1, 77};
        KT_OK(kern_tensor_init_strided(&v, buf, KERN_F32, 3, vs, st));
        KT_CHECK(kern_tensor_is_contiguous(&v));
    }
    {   /* 0-d tensor: one element */
        KT_OK(kern_tensor_init(&v, buf, KERN_BF16, 0, NULL));
        KT_CHECK(kern_tensor_numel(&v) == 1 && kern_tensor_is_contiguous(&v));
        KT_CHECK(!strcmp(kern_shape_str(&v, s, sizeof s), "[]"), "%s", s);
    }
    {   /* empty tensor: NULL data allowed */
        int64_t es[2] = {0, 5};
        KT_OK(kern_tensor_init(&v, NULL, KERN_F32, 2, es));
        KT_CHECK(kern_tensor_numel(&v) == 0 && kern_tensor_is_contiguous(&v));
        kern_tensor_span(&v, &lo, &hi);
        KT_CHECK(lo == 0 && hi == 0);
    }
    {   /* constructors */
        kern_tensor a = kern_tensor_1d(buf, KERN_F32, 7);
        kern_tensor b = kern_tensor_2d(buf, KERN_F16, 3, 5);
        kern_tensor c = kern_tensor_4d(buf, KERN_BF16, 2, 3, 4, 5);
        KT_CHECK(a.ndim == 1 && a.shape[0] == 7 && a.stride[0] == 1);
        KT_CHECK(b.ndim == 2 && b.stride[0] == 5 && b.stride[1] == 1 && b.dtype == KERN_F16);
        KT_CHECK(c.ndim == 4 && c.stride[0] == 60 && c.stride[1] == 20 && c.stride[2] == 5 &&
                 c.stride[3] == 1 && kern_tensor_numel(&c) == 120);
        KT_CHECK(kern_tensor_is_contiguous(&c));
    }
    {   /* negative strides: span covers below data */
        int64_t vs[1] = {5}, st[1] = {-2};
        kern_tensor n;
        memset(&n, 0, sizeof n);
        n.data = buf + 10; n.dtype = KERN_F32; n.ndim = 1; n.shape[0] = vs[0]; n.stride[0] = st[0];
        kern_tensor_span(&n, &lo, &hi);
        KT_CHECK(lo == -8 && hi == 1, "lo=%lld hi=%lld", (long long)lo, (long long)hi);
    }
}

KT_TEST(tensor_bad_input) {
    float buf[16];
    kern_tensor t, before;
    int64_t shape[3] = {2, 3, 4};
    memset(&t, 0xAB, sizeof t);
    before = t;
    KT_ERROR(kern_tensor_init(NULL, buf, KERN_F32, 3, shape), KERN_ERR_ARG, "t is NULL");
    KT_ERROR(kern_tensor_init(&t, buf, KERN_F32, -1, shape), KERN_ERR_ARG, "ndim=-1");
    KT_ERROR(kern_tensor_init(&t, buf, KERN_F32, 9, shape), KERN_ERR_ARG, "ndim=9 is outside 0..8");
    KT_ERROR(kern_tensor_init(&t, buf, KERN_F32, 2, NULL), KERN_ERR_ARG, "shape is NULL");
    {
        int64_t neg[3] = {2, -3, 4};
        KT_ERROR(kern_tensor_init(&t, buf, KERN_F32, 3, neg), KERN_ERR_SHAPE, "shape[1]=-3");
    }
    {   /* element count overflows */
        int64_t huge[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 4};
        KT_ERROR(kern_tensor_init(&t, buf, KERN_F32, 3, huge), KERN_ERR_SHAPE, "overflow");
    }
    {   /* element count fits, the byte count does not */
        int64_t huge[1] = {(int64_t)1 << 62};
        KT_ERROR(kern_tensor_init(&t, buf, KERN_F32, 1, huge), KERN_ERR_SHAPE, "INT64_MAX bytes");
    }
    {   /* strided extent overflows */
        int64_t sh[2] = {3, 3}, st[2] = {INT64_MAX / 2, 1};
        KT_ERROR(kern_tensor_init_strided(&t, buf, KERN_F32, 2, sh, st), KERN_ERR_SHAPE,
                 "stride");
    }
    KT_ERROR(kern_tensor_init(&t, buf, (kern_dtype)0, 3, shape), KERN_ERR_DTYPE, "dtype=0");
    KT_ERROR(kern_tensor_init(&t, buf, (kern_dtype)99, 3, shape), KERN_ERR_DTYPE, "dtype=99");
    KT_ERROR(kern_tensor_init(&t, NULL, KERN_F32, 3, shape), KERN_ERR_ARG, "data is NULL with 24 elements");
    {
        int64_t st[3] = {12, -4, 1};
        KT_ERROR(kern_tensor_init_strided(&t, buf, KERN_F32, 3, shape, st), KERN_ERR_LAYOUT,
                 "stride[1]=-4");
    }
    KT_CHECK(!memcmp(&t, &before, sizeof t), "tensor written on error");
    /* kern_tensor_check names the op and argument */
    KT_ERROR(kern_tensor_check(NULL, "kern_foo", "weight"), KERN_ERR_ARG, "kern_foo: weight is NULL");
    {
        kern_tensor x = kern_tensor_2d(buf, KERN_F32, 4, 4);
        x.ndim = 12;
        KT_ERROR(kern_tensor_check(&x, "kern_foo", "x"), KERN_ERR_ARG, "kern_foo: x.ndim=12");
        x.ndim = 2;
        x.shape[1] = -7;
        KT_ERROR(kern_tensor_check(&x, "kern_foo", "x"), KERN_ERR_SHAPE, "x.shape[1]=-7 is negative");
        x.shape[1] = 4;
        x.dtype = (kern_dtype)42;
        KT_ERROR(kern_tensor_check(&x, "kern_foo", "x"), KERN_ERR_DTYPE, "x.dtype=42");
        KT_CHECK(kern_tensor_numel(NULL) == -1);
        x.dtype = KERN_F32;
        x.shape[0] = INT64_MAX / 2; x.shape[1] = 3;
        KT_CHECK(kern_tensor_numel(&x) == -1);
        KT_CHECK(!kern_tensor_is_contiguous(NULL));
    }
}

KT_TEST(tensor_broadcast_and_overlap) {
    float buf[64];
    kern_tensor t = kern_tensor_2d(buf, KERN_F32, 3, 1), out, before;
    int64_t target[3] = {2, 3, 4};
    KT_OK(kern_tensor_broadcast_to(&t, 3, target, &out, "kt", "bias"));
    KT_CHECK(out.ndim == 3 && out.shape[0] == 2 && out.shape[1] == 3 && out.shape[2] == 4);
    KT_CHECK(out.stride[0] == 0 && out.stride[1] == 1 && out.stride[2] == 0,
             "strides %lld %lld %lld", (long long)out.stride[0], (long long)out.stride[1],
             (long long)out.stride[2]);
    KT_CHECK(kern_tensor_numel(&out) == 24 && out.data == buf);
    memset(&out, 0x5C, sizeof out);
    before = out;
    {
        int64_t bad[3] = {2, 5, 4};
        KT_ERROR(kern_tensor_broadcast_to(&t, 3, bad, &out, "kt_op", "bias"), KERN_ERR_SHAPE,
                 "kt_op: bias.shape[0]=3 does not broadcast to 5");
    }
    {
        int64_t small[1] = {3};
        KT_ERROR(kern_tensor_broadcast_to(&t, 1, small, &out, "kt_op", "bias"), KERN_ERR_SHAPE,
                 "bias has 2 dims, cannot broadcast to 1");
    }
    {
        int64_t neg[3] = {2, -3, 4};
        KT_ERROR(kern_tensor_broadcast_to(&t, 3, neg, &out, "kt_op", "bias"), KERN_ERR_SHAPE,
                 "shape[1]=-3");
    }
    KT_ERROR(kern_tensor_broadcast_to(&t, 9, target, &out, "kt_op", "bias"), KERN_ERR_ARG, "ndim=9");
    KT_ERROR(kern_tensor_broadcast_to(NULL, 3, target, &out, "kt_op", "bias"), KERN_ERR_ARG,
             "bias is NULL");
    KT_ERROR(kern_tensor_broadcast_to(&t, 3, NULL, &out, "kt_op", "bias"), KERN_ERR_ARG,
             "shape is NULL");
    KT_ERROR(kern_tensor_broadcast_to(&t, 3, target, NULL, "kt_op", "bias"), KERN_ERR_ARG,
             "out is NULL");
    KT_CHECK(!memcmp(&out, &before, sizeof out), "out written on error");
    /* overlap */
    {
        kern_tensor a = kern_tensor_1d(buf, KERN_F32, 32);
        kern_tensor b = kern_tensor_1d(buf + 32, KERN_F32, 32);
        kern_tensor c = kern_tensor_1d(buf + 31, KERN_F32, 2);
        kern_tensor h = kern_tensor_1d(buf + 16, KERN_BF16, 32); /* 64 bytes from byte 64 */
        kern_tensor e = kern_tensor_1d(buf, KERN_F32, 0);
        kern_tensor col = kern_tensor_2d(buf, KERN_F32, 4, 1);
        KT_CHECK(!kern_tensors_overlap(&a, &b));
        KT_CHECK(kern_tensors_overlap(&a, &c) && kern_tensors_overlap(&b, &c));
        KT_CHECK(kern_tensors_overlap(&a, &h));
        KT_CHECK(!kern_tensors_overlap(&b, &h));
        KT_CHECK(!kern_tensors_overlap(&a, &e), "empty view overlaps");
        KT_CHECK(kern_tensors_overlap(&a, &a));
        col.stride[0] = 16; /* rows 0,16,32,48 */
        KT_CHECK(kern_tensors_overlap(&col, &b));
    }
}

KT_TEST(overflow_helpers) {
    int64_t r;
    KT_CHECK(!kern_mul_overflow_i64(3, 4, &r) && r == 12);
    KT_CHECK(kern_mul_overflow_i64(INT64_MAX / 2 + 1, 2, &r));
    KT_CHECK(kern_mul_overflow_i64(-2, INT64_MAX, &r));
    KT_CHECK(!kern_mul_overflow_i64(-1, INT64_MAX, &r) && r == -INT64_MAX);
    KT_CHECK(kern_mul_overflow_i64(-1, INT64_MIN, &r));
    KT_CHECK(!kern_add_overflow_i64(INT64_MAX - 1, 1, &r) && r == INT64_MAX);
    KT_CHECK(kern_add_overflow_i64(INT64_MAX, 1, &r));
    KT_CHECK(kern_add_overflow_i64(INT64_MIN, -1, &r));
}

/* ============================================================ Philox */

KT_TEST(philox_known_answers) {
    /* Random123 kat_vectors, "philox4x32 10" lines: ctr[4] key[2] -> out[4] */
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
        {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu,
         0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
        {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u,
         0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
    for (int k = 0; k < 3; k++) {
        uint32_t out[4];
        kern_philox4x32_10(kat[k], kat[k] + 4, out);
        for (int j = 0; j < 4; j++)
            KT_CHECK(out[j] == kat[k][6 + j], "vector %d word %d: 0x%08x want 0x%08x", k, j,
                     out[j], kat[k][6 + j]);
    }
    {   /* the dropout mapping: element idx uses word idx&3 of block idx>>2 */
        uint64_t seed = 0x0123456789abcdefull, off = 0xfedcba9876543210ull;
        for (uint64_t idx = 0; idx < 64; idx += 5) {
            uint64_t g = (idx + ((uint64_t)1 << 35)) >> 2;
            uint32_t ctr[4] = {(uint32_t)g, (uint32_t)(g >> 32), (uint32_t)off, (uint32_t)(off >> 32)};
            uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];
            kern_philox4x32_10(ctr, key, out);
            KT_CHECK(kern_dropout_bits(seed, off, idx + ((uint64_t)1 << 35)) == out[idx & 3]);
        }
    }
}

KT_TEST(dropout_keep_fraction) {
    static const float ps[] = {0.0f, 0.1f, 0.25f, 0.5f, 0.9f};
#ifdef KT_SANITIZER
    const int n = 100000;
#else
    const int n = 1000000;
#endif
    KT_CHECK(kern_dropout_threshold(0.0f) == 0);
    KT_CHECK(kern_dropout_threshold(-1.0f) == 0);
    KT_CHECK(kern_dropout_threshold(1.0f) == 0xffffffffu);
    KT_CHECK(kern_dropout_threshold(0.5f) == 0x80000000u);
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        uint32_t th = kern_dropout_threshold(ps[k]);
        int kept = 0;
        double frac, sd = sqrt(ps[k] * (1.0 - ps[k]) / n);
        for (int i = 0; i < n; i++) kept += kern_dropout_keep(42, 7, (uint64_t)i, th);
        frac = (double)kept / n;
        KT_CHECK(fabs(frac - (1.0 - ps[k])) <= 5 * sd + 1e-12, "p=%g kept %.5f", ps[k], frac);
    }
    /* different seeds and offsets give different masks */
    {
        uint32_t th = kern_dropout_threshold(0.5f);
        int same_seed = 0, same_off = 0;
        for (int i = 0; i < 4096; i++) {
            same_seed += kern_dropout_keep(1, 0, (uint64_t)i, th) == kern_dropout_keep(2, 0, (uint64_t)i, th);
            same_off += kern_dropout_keep(1, 0, (uint64_t)i, th) == kern_dropout_keep(1, 1, (uint64_t)i, th);
        }
        KT_CHECK(same_seed > 1800 && same_seed < 2300, "%d", same_seed);
        KT_CHECK(same_off > 1800 && same_off < 2300, "%d", same_off);
    }
}

/* ------------------------------------------------ hardening (issue 19) */

KT_TEST(tensor_views_hardening) {
    kern_tensor t, *h;
    float buf[4];
    /* last_dim_unit of an invalid ndim reads nothing past the arrays */
    memset(&t, 0, sizeof t);
    t.data = buf; t.dtype = KERN_F32; t.ndim = 9;
    t.stride[0] = 1; /* what shape[8] aliased */
    KT_CHECK(kern_tensor_last_dim_unit(&t) == 0, "ndim 9");
    t.ndim = -1;
    KT_CHECK(kern_tensor_last_dim_unit(&t) == 0, "ndim -1");
    h = (kern_tensor *)kt_alloc(sizeof *h, "tensor");
    memset(h, 0, sizeof *h);
    h->ndim = 1000;
    KT_CHECK(kern_tensor_last_dim_unit(h) == 0, "ndim 1000");
    kt_free(h);
    /* empty tensors whose other dims are huge are valid: numel 0 */
    {
        int64_t a[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 0};
        int64_t b[3] = {0, (int64_t)1 << 40, (int64_t)1 << 40};
        int64_t c[4] = {INT64_MAX, INT64_MAX, 0, INT64_MAX};
        KT_OK(kern_tensor_init(&t, NULL, KERN_F32, 3, a));
        KT_CHECK(t.stride[0] == (int64_t)1 << 40 && t.stride[1] == 1 && t.stride[2] == 1,
                 "strides %lld %lld %lld", (long long)t.stride[0], (long long)t.stride[1],
                 (long long)t.stride[2]);
        KT_CHECK(kern_tensor_numel(&t) == 0 && kern_tensor_is_contiguous(&t));
        KT_OK(kern_tensor_check(&t, "kt", "a"));
        KT_OK(kern_tensor_init(&t, NULL, KERN_BF16, 3, b));
        KT_CHECK(kern_tensor_numel(&t) == 0 && kern_tensor_is_contiguous(&t));
        KT_OK(kern_tensor_init(&t, buf, KERN_I64, 4, c));
        KT_CHECK(kern_tensor_numel(&t) == 0 && kern_tensor_is_contiguous(&t));
        KT_OK(kern_tensor_check(&t, "kt", "c"));
    }
    /* broadcasting to a shape whose element count overflows is an error */
    {
        kern_tensor one = kern_tensor_1d(buf, KERN_F32, 1), out;
        int64_t big[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 1};
        int64_t empty[3] = {(int64_t)1 << 40, 0, (int64_t)1 << 40};
        KT_ERROR(kern_tensor_broadcast_to(&one, 3, big, &out, "kt_op", "x"), KERN_ERR_SHAPE,
                 "overflows");
        KT_OK(kern_tensor_broadcast_to(&one, 3, empty, &out, "kt_op", "x"));
        KT_CHECK(kern_tensor_numel(&out) == 0);
        KT_OK(kern_tensor_check(&out, "kt", "out"));
    }
    /* an unchecked view whose span overflows: no overflow inside, and it
     * cannot be shown disjoint from anything (found by fuzz_csr) */
    {
        kern_tensor a = kern_tensor_1d(buf, KERN_F32, 2), b = kern_tensor_1d(buf + 2, KERN_F32, 2);
        int64_t lo = 5, hi = 5;
        KT_CHECK(!kern_tensors_overlap(&a, &b));
        a.stride[0] = INT64_MAX;
        KT_CHECK(kern_tensors_overlap(&a, &b) == 1 && kern_tensors_overlap(&b, &a) == 1);
        kern_tensor_span(&a, &lo, &hi);
        KT_CHECK(lo == 0 && hi == 0);
    }
}

KT_MAIN()
