/* Tests for kern_safetensors.h: write/read round trips (every dtype,
 * strided views, scalars, empty tensors, metadata, escaped names), files
 * written by the reference implementation's layout, every validation rule
 * with its status and message, every truncation of a valid file, random
 * corruptions (no crash, no out-of-bounds read under ASan), and no memory
 * left allocated after an error. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_safetensors.h"
#include "kt.h"

#include <unistd.h>

/* A context whose allocator counts live blocks (kt.h's, never refusing). */
static kt_falloc counting;
#define live_blocks (counting.live)
static kern_ctx *counting_ctx(void) {
    static kern_ctx *c;
    if (!c) c = kt_ctx_falloc(1, KERN_ISA_AUTO, 0, &counting);
    return c;
}

/* Builds a file image from a header string and n data bytes (0x11 fill). */
static unsigned char *image(const char *hdr, size_t ndata, size_t *size) {
    size_t hl = strlen(hdr), i;
    unsigned char *b = (unsigned char *)malloc(8 + hl + ndata + 1);
    for (i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    memset(b + 8 + hl, 0x11, ndata);
    *size = 8 + hl + ndata;
    return b;
}

/* Parses a header + data; expects `want` and a message containing needle. */
static void expect_bad(const char *hdr, size_t ndata, kern_status want, const char *needle) {
    size_t size;
    unsigned char *b = image(hdr, ndata, &size);
    kern_safetensors *st = NULL;
    int64_t before = live_blocks;
    kern_safetensors_params p;
    memset(&p, 0, sizeof p);
    kt_context("header %s + %zu bytes", hdr, ndata);
    KT_ERROR(kern_safetensors_from_memory(counting_ctx(), b, size, NULL, &st), want, needle);
    KT_CHECK(st == NULL);
    p.borrow = 1;
    KT_ERROR(kern_safetensors_from_memory(counting_ctx(), b, size, &p, &st), want, needle);
    KT_CHECK(live_blocks == before, "%lld blocks left allocated after an error",
             (long long)(live_blocks - before));
    kt_context("");
    free(b);
}

KT_TEST(st_roundtrip_all_dtypes) {
    static const kern_dtype dts[] = {KERN_F32, KERN_F16, KERN_BF16, KERN_I8, KERN_U8,
                                     KERN_I32, KERN_I64, KERN_BOOL};
    kern_tensor ts[8 + 3];
    kern_safetensors_item items[8 + 3];
    char names[8 + 3][32];
    void *bufs[8 + 3];
    kt_rng r = kt_rng_make(1);
    int i, n = 0;
    size_t size;
    unsigned char *img;
    kern_safetensors *st;
    const char *meta[4] = {"format", "pt", "note", "caf\xc3\xa9 \"quoted\"\n"};
    kern_safetensors_write_params wp;
    kern_ctx *ctx = counting_ctx();
    memset(&wp, 0, sizeof wp);
    wp.metadata = meta;
    wp.n_metadata = 2;
    for (i = 0; i < 8; i++) {
        int64_t shape[3] = {3, 5, 7};
        size_t bytes = 105 * kern_dtype_size(dts[i]);
        int64_t k;
        bufs[n] = malloc(bytes);
        for (k = 0; k < (int64_t)bytes; k++) ((unsigned char *)bufs[n])[k] = (unsigned char)kt_next(&r);
        KT_OK(kern_tensor_init(&ts[n], bufs[n], dts[i], 3, shape));
        snprintf(names[n], sizeof names[n], "t.%s", kern_dtype_name(dts[i]));
        items[n].name = names[n];
        items[n].tensor = &ts[n];
        n++;
    }
    { /* a strided (transposed) view, a scalar and an empty tensor */
        int64_t shape[2] = {5, 3}, stride[2] = {1, 5};
        static float sc = 3.5f;
        int64_t eshape[2] = {0, 4};
        bufs[n] = malloc(15 * 4);
        for (i = 0; i < 15; i++) ((float *)bufs[n])[i] = (float)i;
        KT_OK(kern_tensor_init_strided(&ts[n], bufs[n], KERN_F32, 2, shape, stride));
        items[n].name = "weird \"name\"\\ with \x01 ctl and \xe2\x82\xac";
        items[n].tensor = &ts[n];
        n++;
        KT_OK(kern_tensor_init(&ts[n], &sc, KERN_F32, 0, NULL));
        bufs[n] = NULL;
        items[n].name = "scalar";
        items[n].tensor = &ts[n];
        n++;
        KT_OK(kern_tensor_init(&ts[n], NULL, KERN_BF16, 2, eshape));
        bufs[n] = NULL;
        items[n].name = "empty";
        items[n].tensor = &ts[n];
        n++;
    }
    KT_OK(kern_safetensors_serialized_size(ctx, items, n, &wp, &size));
    KT_CHECK((size - 0) % 1 == 0);
    img = (unsigned char *)malloc(size);
    KT_ERROR(kern_safetensors_serialize(ctx, items, n, &wp, img, size - 1), KERN_ERR_ARG,
             "needed");
    KT_OK(kern_safetensors_serialize(ctx, items, n, &wp, img, size));
    {
        uint64_t hl = 0;
        for (i = 7; i >= 0; i--) hl = (hl << 8) | img[i];
        KT_CHECK((8 + hl) % 8 == 0, "header length %llu not padded", (unsigned long long)hl);
    }
    KT_OK(kern_safetensors_from_memory(ctx, img, size, NULL, &st));
    KT_REQUIRE(st != NULL);
    KT_CHECK(kern_safetensors_count(st) == n);
    KT_CHECK(kern_safetensors_metadata_count(st) == 2);
    KT_CHECK(kern_safetensors_metadata(st, "note") &&
             strcmp(kern_safetensors_metadata(st, "note"), meta[3]) == 0);
    KT_CHECK(kern_safetensors_metadata(st, "absent") == NULL);
    for (i = 0; i < n; i++) {
        kern_safetensors_entry e;
        kern_tensor t;
        int64_t k, numel = kern_tensor_numel(items[i].tensor);
        size_t es = kern_dtype_size(items[i].tensor->dtype);
        KT_OK(kern_safetensors_find(st, items[i].name, &e));
        KT_CHECK(e.dtype == items[i].tensor->dtype && e.ndim == items[i].tensor->ndim,
                 "%s", items[i].name);
        KT_OK(kern_safetensors_tensor(st, items[i].name, &t));
        KT_CHECK(kern_tensor_is_contiguous(&t));
        KT_CHECK(((uintptr_t)t.data % es) == 0 || numel == 0, "misaligned %s", items[i].name);
        for (k = 0; k < numel; k++) {
            /* element k of the original view in row-major order */
            int64_t off = 0, rem = k;
            int d;
            for (d = items[i].tensor->ndim - 1; d >= 0; d--) {
                off += (rem % items[i].tensor->shape[d]) * items[i].tensor->stride[d];
                rem /= items[i].tensor->shape[d];
            }
            if (memcmp((char *)t.data + k * (int64_t)es,
                       (char *)items[i].tensor->data + off * (int64_t)es, es) != 0) {
                KT_CHECK(0, "%s element %lld differs", items[i].name, (long long)k);
                break;
            }
        }
    }
    {
        kern_safetensors_entry e0, e1;
        KT_OK(kern_safetensors_entry_at(st, 0, &e0));
        KT_OK(kern_safetensors_entry_at(st, 1, &e1));
        KT_CHECK(e0.offset <= e1.offset);
        KT_ERROR(kern_safetensors_entry_at(st, n, &e0), KERN_ERR_INDEX, "outside");
        KT_ERROR(kern_safetensors_find(st, "nope", &e0), KERN_ERR_ARG, "'nope' is not in the file");
    }
    kern_safetensors_free(ctx, st);
    /* the same through a file */
    {
        char path[64];
        snprintf(path, sizeof path, "/tmp/kern_st_test_%d.safetensors", (int)getpid());
        KT_OK(kern_safetensors_save(ctx, path, items, n, &wp));
        KT_OK(kern_safetensors_open(ctx, path, NULL, &st));
        KT_CHECK(kern_safetensors_count(st) == n);
        {
            kern_tensor t;
            kern_safetensors_entry e;
            KT_OK(kern_safetensors_find(st, "t.f32", &e));
            KT_CHECK((((uintptr_t)e.data - (uintptr_t)e.offset) & 63) == 0,
                     "data section not 64-byte aligned");
            KT_OK(kern_safetensors_tensor(st, "t.f32", &t));
            KT_CHECK(memcmp(t.data, bufs[0], 105 * 4) == 0);
        }
        kern_safetensors_free(ctx, st);
        { /* every truncation of the file fails cleanly */
            FILE *f = fopen(path, "rb");
            size_t fs, cut;
            unsigned char *whole;
            fseek(f, 0, SEEK_END);
            fs = (size_t)ftell(f);
            fseek(f, 0, SEEK_SET);
            whole = (unsigned char *)malloc(fs);
            KT_REQUIRE(fread(whole, 1, fs, f) == fs);
            fclose(f);
            for (cut = 0; cut < fs; cut++) {
                int64_t before = live_blocks;
                kern_safetensors_params bp;
                memset(&bp, 0, sizeof bp);
                bp.borrow = 1;
                st = NULL;
                if (kern_safetensors_from_memory(ctx, whole, cut, &bp, &st) == KERN_OK) {
                    KT_CHECK(0, "a file cut to %zu of %zu bytes was accepted", cut, fs);
                    kern_safetensors_free(ctx, st);
                }
                KT_CHECK(strlen(kern_last_error()) > 10);
                KT_CHECK(live_blocks == before);
            }
            f = fopen(path, "wb");
            fwrite(whole, 1, fs - 3, f);
            fclose(f);
            KT_ERROR(kern_safetensors_open(ctx, path, NULL, &st), KERN_ERR_ARG, "truncated");
            free(whole);
        }
        remove(path);
        KT_ERROR(kern_safetensors_open(ctx, path, NULL, &st), KERN_ERR_ARG, "cannot open");
    }
    for (i = 0; i < n; i++) free(bufs[i]);
    free(img);
    KT_CHECK(live_blocks == 0, "%lld blocks leaked", (long long)live_blocks);
}

/* The layout the Python package writes: tensors sorted, spaces after the
 * JSON, metadata first. */
KT_TEST(st_reference_layout) {
    const char *hdr =
        "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F64\",\"shape\":[1,1],\"data_offsets\":"
        "[8,16]},\"c\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[16,18]}}      ";
    size_t size;
    unsigned char *b = image(hdr, 18, &size);
    kern_safetensors *st;
    kern_safetensors_entry e;
    kern_tensor t;
    KT_OK(kern_safetensors_from_memory(NULL, b, size, NULL, &st));
    KT_REQUIRE(st != NULL);
    KT_OK(kern_safetensors_find(st, "b", &e));
    KT_CHECK(e.dtype == KERN_DTYPE_NONE && strcmp(e.dtype_name, "F64") == 0);
    KT_ERROR(kern_safetensors_tensor(st, "b", &t), KERN_ERR_DTYPE, "F64");
    KT_OK(kern_safetensors_tensor(st, "c", &t));
    KT_CHECK(t.ndim == 0 && t.dtype == KERN_BF16);
    {
        const char *k, *v;
        KT_OK(kern_safetensors_metadata_at(st, 0, &k, &v));
        KT_CHECK(strcmp(k, "format") == 0 && strcmp(v, "pt") == 0);
    }
    kern_safetensors_free(NULL, st);
    free(b);
}

KT_TEST(st_rejects_bad_headers) {
    const char *ok1 = "\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]";
    char h[512];
    /* structure */
    expect_bad("", 0, KERN_ERR_ARG, "'{'");
    expect_bad("[]", 0, KERN_ERR_ARG, "'{'");
    expect_bad("{", 0, KERN_ERR_ARG, "header ends");
    expect_bad("{}x", 0, KERN_ERR_ARG, "end of the header");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}", 8, KERN_ERR_ARG,
               "a string");
    expect_bad("{\"a\" {}}", 0, KERN_ERR_ARG, "':'");
    expect_bad("{'a':1}", 0, KERN_ERR_ARG, "a string");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":NaN}}", 8,
               KERN_ERR_ARG, "JSON value");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":01}}", 8,
               KERN_ERR_ARG, "");
    /* strings */
    expect_bad("{\"a\x01\":{}}", 0, KERN_ERR_ARG, "control character");
    expect_bad("{\"a\xff\":{}}", 0, KERN_ERR_ARG, "UTF-8");
    expect_bad("{\"a\xc0\xaf\":{}}", 0, KERN_ERR_ARG, "UTF-8");
    expect_bad("{\"a\xed\xa0\x80\":{}}", 0, KERN_ERR_ARG, "UTF-8");
    expect_bad("{\"\\q\":{}}", 0, KERN_ERR_ARG, "escape");
    expect_bad("{\"\\ud800\":{}}", 0, KERN_ERR_ARG, "low surrogate");
    expect_bad("{\"\\udc00\":{}}", 0, KERN_ERR_ARG, "surrogate");
    expect_bad("{\"\\u12g4\":{}}", 0, KERN_ERR_ARG, "hex digit");
    expect_bad("{\"a\\u0000b\":{}}", 0, KERN_ERR_ARG, "U+0000");
    expect_bad("{\"\":{}}", 0, KERN_ERR_ARG, "empty tensor name");
    /* entries */
    expect_bad("{\"a\":{}}", 0, KERN_ERR_ARG, "tensor 'a' has no \"dtype\"");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, KERN_ERR_ARG, "data_offsets");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               8, KERN_ERR_ARG, "given twice");
    expect_bad("{\"a\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
               KERN_ERR_DTYPE, "\"F31\" is not a safetensors dtype");
    expect_bad("{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, KERN_ERR_ARG,
               "a string");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
               KERN_ERR_ARG, "dimension");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8,
               KERN_ERR_ARG, "no fraction");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}",
               8, KERN_ERR_UNSUPPORTED, "more than 8 dims");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}",
               8, KERN_ERR_SHAPE, "overflows");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}",
               8, KERN_ERR_SHAPE, "overflows");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
               KERN_ERR_SHAPE, "tensor 'a': F32 of 3 elements is 12 bytes");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
               KERN_ERR_ARG, "backwards");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, KERN_ERR_ARG,
               "two offsets");
    snprintf(h, sizeof h, "{\"a\":{%s},\"a\":{%s}}", ok1, ok1);
    expect_bad(h, 16, KERN_ERR_ARG, "tensor 'a' appears twice");
    /* offsets */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               12, KERN_ERR_ARG, "overlaps");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
               KERN_ERR_ARG, "belong to no tensor");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 7,
               KERN_ERR_ARG, "truncated: tensor 'a' ends at byte 8");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9,
               KERN_ERR_ARG, "after the last tensor");
    /* metadata */
    expect_bad("{\"__metadata__\":{\"k\":1}}", 0, KERN_ERR_ARG, "__metadata__ values are strings");
    expect_bad("{\"__metadata__\":[]}", 0, KERN_ERR_ARG, "object of strings");
    expect_bad("{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0, KERN_ERR_ARG,
               "metadata key 'k' appears twice");
    expect_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, KERN_ERR_ARG, "given twice");
    /* depth */
    {
        char deep[400];
        int i, n = 0;
        n += snprintf(deep + n, sizeof deep - (size_t)n,
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":");
        for (i = 0; i < 100; i++) deep[n++] = '[';
        for (i = 0; i < 100; i++) deep[n++] = ']';
        deep[n++] = '}';
        deep[n++] = '}';
        deep[n] = 0;
        expect_bad(deep, 8, KERN_ERR_ARG, "nesting deeper");
    }
    { /* header length beyond the file / the limit */
        unsigned char b[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
        kern_safetensors *st = NULL;
        kern_safetensors_params p;
        KT_ERROR(kern_safetensors_from_memory(NULL, b, 10, NULL, &st), KERN_ERR_ARG,
                 "truncated: the header length is 65535");
        KT_ERROR(kern_safetensors_from_memory(NULL, b, 5, NULL, &st), KERN_ERR_ARG,
                 "shorter than the 8-byte");
        b[0] = 2;
        b[1] = 0;
        memset(&p, 0, sizeof p);
        p.max_header_bytes = 1;
        KT_ERROR(kern_safetensors_from_memory(NULL, b, 10, &p, &st), KERN_ERR_ARG,
                 "exceeds the limit");
        KT_OK(kern_safetensors_from_memory(NULL, b, 10, NULL, &st));
        KT_CHECK(kern_safetensors_count(st) == 0);
        kern_safetensors_free(NULL, st);
    }
}

KT_TEST(st_unknown_keys_and_escapes_accepted) {
    const char *hdr =
        "{\"w\\u00e9\\ud83d\\ude00\\n\":{\"extra\":{\"a\":[1,-2.5e3,true,null,\"s\"]},"
        "\"data_offsets\":[0,4],\"shape\":[1],\"dtype\":\"I32\"}}";
    size_t size;
    unsigned char *b = image(hdr, 4, &size);
    kern_safetensors *st;
    kern_safetensors_entry e;
    KT_OK(kern_safetensors_from_memory(NULL, b, size, NULL, &st));
    KT_REQUIRE(st != NULL);
    KT_OK(kern_safetensors_find(st, "w\xc3\xa9\xf0\x9f\x98\x80\n", &e));
    KT_CHECK(e.nbytes == 4 && e.dtype == KERN_I32);
    kern_safetensors_free(NULL, st);
    free(b);
}

KT_TEST(st_writer_errors) {
    float x[4] = {1, 2, 3, 4};
    kern_tensor t = kern_tensor_1d(x, KERN_F32, 4), bad = t;
    kern_safetensors_item it[2];
    size_t n;
    const char *meta[2] = {"k", NULL};
    kern_safetensors_write_params wp;
    it[0].name = "a";
    it[0].tensor = &t;
    it[1].name = "a";
    it[1].tensor = &t;
    KT_ERROR(kern_safetensors_serialized_size(NULL, it, 2, NULL, &n), KERN_ERR_ARG,
             "tensor 'a' given twice");
    it[1].name = "__metadata__";
    KT_ERROR(kern_safetensors_serialized_size(NULL, it, 2, NULL, &n), KERN_ERR_ARG, "reserved");
    it[1].name = "";
    KT_ERROR(kern_safetensors_serialized_size(NULL, it, 2, NULL, &n), KERN_ERR_ARG, "empty");
    it[1].name = "b\xff";
    KT_ERROR(kern_safetensors_serialized_size(NULL, it, 2, NULL, &n), KERN_ERR_ARG, "UTF-8");
    it[1].name = "b";
    bad.dtype = KERN_DTYPE_NONE;
    it[1].tensor = &bad;
    KT_ERROR(kern_safetensors_serialized_size(NULL, it, 2, NULL, &n), KERN_ERR_DTYPE, "tensor 'b'");
    it[1].tensor = &t;
    memset(&wp, 0, sizeof wp);
    wp.metadata = meta;
    wp.n_metadata = 1;
    KT_ERROR(kern_safetensors_serialized_size(NULL, it, 2, &wp, &n), KERN_ERR_ARG, "metadata[1]");
    KT_ERROR(kern_safetensors_save(NULL, "/nonexistent-dir/x.safetensors", it, 2, NULL),
             KERN_ERR_ARG, "cannot create");
    KT_OK(kern_safetensors_serialized_size(NULL, it, 2, NULL, &n));
}

/* Random corruptions of a valid image: never crash, never leak, always a
 * message on error, and an accepted image stays consistent. */
KT_TEST(st_random_corruptions) {
    float x[6] = {1, 2, 3, 4, 5, 6};
    int32_t y[3] = {7, 8, 9};
    kern_tensor a = kern_tensor_2d(x, KERN_F32, 2, 3), b = kern_tensor_1d(y, KERN_I32, 3);
    kern_safetensors_item it[2];
    size_t size;
    unsigned char *img, *mut;
    kt_rng r = kt_rng_make(7);
    int iter;
    kern_ctx *ctx = counting_ctx();
    it[0].name = "a";
    it[0].tensor = &a;
    it[1].name = "b";
    it[1].tensor = &b;
    KT_OK(kern_safetensors_serialized_size(NULL, it, 2, NULL, &size));
    img = (unsigned char *)malloc(size);
    mut = (unsigned char *)malloc(size);
    KT_OK(kern_safetensors_serialize(NULL, it, 2, NULL, img, size));
    for (iter = 0; iter < 20000; iter++) {
        int k, nm = 1 + (int)kt_randint(&r, 0, 4);
        kern_safetensors *st = NULL;
        int64_t before = live_blocks;
        size_t len = size;
        kern_status s;
        memcpy(mut, img, size);
        for (k = 0; k < nm; k++) {
            size_t pos = (size_t)kt_randint(&r, 0, (int64_t)size);
            switch (kt_randint(&r, 0, 4)) {
            case 0: mut[pos] = (unsigned char)kt_next(&r); break;
            case 1: mut[pos] = "{}[]\",:0123456789 -.eE\\u"[kt_randint(&r, 0, 24)]; break;
            case 2: mut[pos] ^= (unsigned char)(1u << kt_randint(&r, 0, 8)); break;
            default: len = pos; break;
            }
        }
        {
            /* exact-size copy so ASan sees reads past the end */
            unsigned char *exact = (unsigned char *)malloc(len ? len : 1);
            kern_safetensors_params p;
            memcpy(exact, mut, len);
            memset(&p, 0, sizeof p);
            p.borrow = (int)(iter & 1);
            s = kern_safetensors_from_memory(ctx, exact, len, &p, &st);
            if (s == KERN_OK) {
                int64_t i, total = 0;
                for (i = 0; i < kern_safetensors_count(st); i++) {
                    kern_safetensors_entry e;
                    KT_OK(kern_safetensors_entry_at(st, i, &e));
                    total += (int64_t)e.nbytes;
                    if (e.nbytes) {
                        volatile unsigned char sink =
                            ((const unsigned char *)e.data)[e.nbytes - 1];
                        (void)sink;
                    }
                }
                kern_safetensors_free(ctx, st);
            } else {
                KT_CHECK(kern_last_error()[0] != 0);
            }
            free(exact);
        }
        KT_CHECK(live_blocks == before, "leak after corruption %d", iter);
    }
    free(img);
    free(mut);
}

KT_MAIN()
