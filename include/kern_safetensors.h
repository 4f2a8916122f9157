/* kern_safetensors.h — read and write safetensors files (the weight format
 * of Hugging Face and most PyTorch checkpoints). Part of kern, an
 * embeddable header-only C kernel library; needs only kern_base.h.
 *
 * WHAT IT DOES
 *   Reads a safetensors file (or a buffer holding one) into an object that
 *   lists its tensors (name, dtype, shape, bytes) and hands out kern_tensor
 *   views of them; writes kern_tensor views (any strides) into a new file or
 *   buffer. The graph executor (kern_graph.h) binds its weights from it and
 *   `kern-run` reads inputs and writes outputs with it.
 *
 * THE FORMAT (https://github.com/huggingface/safetensors)
 *   8 bytes   N, unsigned little-endian: the length of the header
 *   N bytes   UTF-8 JSON object: for each tensor
 *               "name": {"dtype": "F32", "shape": [2, 3],
 *                        "data_offsets": [begin, end]}
 *             and optionally "__metadata__": {"key": "value", ...}
 *             (strings only); trailing spaces may pad the header
 *   the rest  the data section: tensor bytes, row-major, little-endian, at
 *             [begin, end) relative to the start of this section
 *
 * VALIDATION (the reader rejects, with the byte position or the tensor name)
 *   - a file shorter than 8 bytes, N larger than the file or than
 *     params.max_header_bytes (default 100,000,000, the reference
 *     implementation's limit), a header that is not valid UTF-8 or not one
 *     JSON object (strict RFC 8259: no comments, no trailing commas, no
 *     NaN, nesting at most 64 deep), anything but spaces after it;
 *   - duplicate names, a name containing NUL, a tensor entry without
 *     "dtype", "shape" or "data_offsets" (or with one of them twice; other
 *     keys are skipped), "__metadata__" that is not an object of strings;
 *   - shapes and offsets that are not non-negative integers, more than
 *     KERN_MAX_DIMS dims (KERN_ERR_UNSUPPORTED), begin > end, element counts
 *     or byte sizes that overflow, end - begin != numel * dtype size
 *     (KERN_ERR_SHAPE);
 *   - a dtype the format does not define (KERN_ERR_DTYPE);
 *   - data regions that overlap, leave holes, or do not end exactly at the
 *     end of the file (a truncated file: "tensor 'w' ends at byte E of the
 *     data section but the file holds D bytes"), as the reference
 *     implementation does.
 *   Nothing is read outside the buffer, and on any error nothing is
 *   allocated (the message names what was wrong). The parser is fuzzed
 *   (tests/fuzz/fuzz_safetensors.c).
 *
 * DTYPES
 *   BOOL U8 I8 F16 BF16 I32 I64 F32 map to kern dtypes. F64, I16, U16, U32,
 *   U64, F8_E4M3 and F8_E5M2 are accepted and listed (entry.dtype =
 *   KERN_DTYPE_NONE, entry.dtype_name says which); asking for a kern_tensor
 *   view of one is KERN_ERR_DTYPE. Data is little-endian (the format's
 *   rule); on a big-endian host open fails with KERN_ERR_UNSUPPORTED.
 *
 * MEMORY (the choice: read, not mmap)
 *   kern_safetensors_open reads the whole file into one buffer from the
 *   context's allocator, placed so that the data section starts 64-byte
 *   aligned (every tensor is then aligned to its element size, since the
 *   format's writers keep offsets multiples of the element size). Reading
 *   rather than mapping means a file truncated or rewritten later cannot
 *   fault (SIGBUS) in the middle of a run, and the same code serves
 *   buffers. To avoid the copy, map the file yourself and call
 *   kern_safetensors_from_memory with params.borrow = 1: the object then
 *   points into your buffer, which must outlive it (a view of a tensor
 *   whose data is not aligned to its element size is KERN_ERR_LAYOUT).
 *
 * WRITING
 *   kern_safetensors_save(ctx, path, items, n, params) writes the tensors in
 *   the order given, contiguous (strided views are gathered), with a
 *   compact header padded with spaces to a multiple of 8 bytes and the
 *   metadata pairs of params (if any) first. It writes to "<path>.tmp" and
 *   renames, so a failed save never leaves a partial file at `path`.
 *   kern_safetensors_serialized_size / kern_safetensors_serialize do the
 *   same into memory. Names must be unique, non-empty, valid UTF-8 and not
 *   "__metadata__".
 *
 * EXAMPLE
 *     kern_safetensors *st;
 *     kern_tensor w;
 *     if (kern_safetensors_open(NULL, "model.safetensors", NULL, &st) != KERN_OK)
 *         puts(kern_last_error());
 *     if (kern_safetensors_tensor(st, "encoder.layer.0.attention.self.query.weight",
 *                                 &w) == KERN_OK) { ... use w ... }
 *     kern_safetensors_free(NULL, st);
 *
 *     kern_safetensors_item it[1] = {{"y", &y}};
 *     kern_safetensors_save(NULL, "out.safetensors", it, 1, NULL);
 */
#ifndef KERN_SAFETENSORS_H
#define KERN_SAFETENSORS_H

#include "kern_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_safetensors kern_safetensors;

typedef struct kern_safetensors_params {
    int borrow; /* from_memory: nonzero = point into the caller's buffer
                   (it must outlive the object); 0 = copy it */
    uint64_t max_header_bytes; /* 0 = 100,000,000 */
} kern_safetensors_params;

typedef struct kern_safetensors_entry {
    const char *name;       /* owned by the object */
    const char *dtype_name; /* the file's spelling: "F32", "BF16", ... */
    kern_dtype dtype;       /* KERN_DTYPE_NONE for dtypes kern lacks */
    int ndim;
    int64_t shape[KERN_MAX_DIMS];
    const void *data;  /* start of the tensor's bytes */
    uint64_t offset;   /* byte offset in the data section */
    uint64_t nbytes;
} kern_safetensors_entry;

/* Reads and validates a file (see MEMORY). params may be NULL. */
KERN_API kern_status kern_safetensors_open(kern_ctx *ctx, const char *path,
                                           const kern_safetensors_params *params,
                                           kern_safetensors **out);
/* Validates a buffer holding a whole safetensors file. */
KERN_API kern_status kern_safetensors_from_memory(kern_ctx *ctx, const void *buf,
                                                  size_t size,
                                                  const kern_safetensors_params *params,
                                                  kern_safetensors **out);
/* Frees with the allocator of ctx (the context used to open it, or one with
 * the same allocator). NULL is ignored. */
KERN_API void kern_safetensors_free(kern_ctx *ctx, kern_safetensors *st);

/* Number of tensors; entry i in data-offset order. */
KERN_API int64_t kern_safetensors_count(const kern_safetensors *st);
KERN_API kern_status kern_safetensors_entry_at(const kern_safetensors *st, int64_t i,
                                               kern_safetensors_entry *out);
/* By name (binary search); KERN_ERR_ARG naming the tensor when absent. */
KERN_API kern_status kern_safetensors_find(const kern_safetensors *st, const char *name,
                                           kern_safetensors_entry *out);
/* A contiguous view of the named tensor (read-only data: kern never writes
 * through it). KERN_ERR_DTYPE for dtypes kern lacks. */
KERN_API kern_status kern_safetensors_tensor(const kern_safetensors *st, const char *name,
                                             kern_tensor *out);
/* "__metadata__": number of pairs, pair i (in file order), lookup (NULL when
 * absent). */
KERN_API int64_t kern_safetensors_metadata_count(const kern_safetensors *st);
KERN_API kern_status kern_safetensors_metadata_at(const kern_safetensors *st, int64_t i,
                                                  const char **key, const char **value);
KERN_API const char *kern_safetensors_metadata(const kern_safetensors *st,
                                               const char *key);

/* ------------------------------------------------------------- writing */

typedef struct kern_safetensors_item {
    const char *name;
    const kern_tensor *tensor; /* any dtype, any non-negative strides */
} kern_safetensors_item;

typedef struct kern_safetensors_write_params {
    const char *const *metadata; /* 2 * n_metadata strings: key, value, ... */
    int64_t n_metadata;
} kern_safetensors_write_params;

/* Bytes kern_safetensors_serialize writes for these items. */
KERN_API kern_status kern_safetensors_serialized_size(
    kern_ctx *ctx, const kern_safetensors_item *items, int64_t n,
    const kern_safetensors_write_params *params, size_t *bytes);
KERN_API kern_status kern_safetensors_serialize(kern_ctx *ctx,
                                                const kern_safetensors_item *items,
                                                int64_t n,
                                                const kern_safetensors_write_params *params,
                                                void *buf, size_t size);
/* Writes "<path>.tmp", then renames it to path. */
KERN_API kern_status kern_safetensors_save(kern_ctx *ctx, const char *path,
                                           const kern_safetensors_item *items, int64_t n,
                                           const kern_safetensors_write_params *params);

#ifdef __cplusplus
}
#endif
#endif /* KERN_SAFETENSORS_H */

/* ====================================================================== */
/*                              IMPLEMENTATION                            */
/* ====================================================================== */
#if defined(KERN_IMPLEMENTATION) && !defined(KERN_SAFETENSORS_IMPLEMENTED)
#define KERN_SAFETENSORS_IMPLEMENTED

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KERN__ST_OP "kern_safetensors"
#define KERN__ST_MAX_DEPTH 64

typedef struct kern__st_dtype {
    const char *name;
    kern_dtype dtype;
    unsigned size;
} kern__st_dtype;

static const kern__st_dtype kern__st_dtypes[] = {
    {"BOOL", KERN_BOOL, 1},          {"U8", KERN_U8, 1},
    {"I8", KERN_I8, 1},              {"F8_E5M2", KERN_DTYPE_NONE, 1},
    {"F8_E4M3", KERN_DTYPE_NONE, 1}, {"I16", KERN_DTYPE_NONE, 2},
    {"U16", KERN_DTYPE_NONE, 2},     {"F16", KERN_F16, 2},
    {"BF16", KERN_BF16, 2},          {"I32", KERN_I32, 4},
    {"U32", KERN_DTYPE_NONE, 4},     {"F32", KERN_F32, 4},
    {"F64", KERN_DTYPE_NONE, 8},     {"I64", KERN_I64, 8},
    {"U64", KERN_DTYPE_NONE, 8}};
#define KERN__ST_NDTYPES ((int)(sizeof kern__st_dtypes / sizeof kern__st_dtypes[0]))

typedef struct kern__st_entry {
    const char *name;
    const kern__st_dtype *dt;
    int ndim;
    int64_t shape[KERN_MAX_DIMS];
    uint64_t begin, end;
} kern__st_entry;

struct kern_safetensors {
    int64_t n, n_meta;
    kern__st_entry *entries;  /* data-offset order */
    kern__st_entry **by_name; /* sorted by name */
    const char **meta;        /* 2 * n_meta: key, value */
    const unsigned char *data; /* the data section */
    uint64_t data_size;
    void *file; /* owned copy of the file (NULL when borrowed) */
};

/* ------------------------------------------------------- JSON (strict) */

typedef struct kern__js {
    const unsigned char *p, *beg, *end;
    /* fill pass: where decoded strings go; NULL while counting */
    char *pool;
    size_t pool_used, pool_cap;
} kern__js;

static long long kern__js_pos(const kern__js *j) {
    return (long long)(8 + (j->p - j->beg)); /* byte offset in the file */
}

static kern_status kern__js_fail(const kern__js *j, const char *what) {
    if (j->p >= j->end)
        return kern__err(KERN_ERR_ARG,
                         KERN__ST_OP ": header ends at file byte %lld where %s was "
                         "expected",
                         kern__js_pos(j), what);
    return kern__err(KERN_ERR_ARG,
                     KERN__ST_OP ": header byte %lld ('%c'): expected %s",
                     kern__js_pos(j), (*j->p >= 32 && *j->p < 127) ? *j->p : '?', what);
}

static void kern__js_ws(kern__js *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int kern__js_hex(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t kern__utf8_put(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at p (0 if invalid): RFC 3629, no
 * overlongs, no surrogates, <= U+10FFFF. */
static int kern__utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    int n, i;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
    else return 0;
    if (end - p < n) return 0;
    for (i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

/* Parses a JSON string at j->p (the opening quote). In the fill pass the
 * decoded, NUL-terminated string goes to the pool and *out points at it.
 * *has_nul is set when it decodes a U+0000. Returns the decoded length in
 * *len. */
static kern_status kern__js_string(kern__js *j, const char **out, size_t *len,
                                   int *has_nul) {
    char *o = NULL;
    size_t n = 0;
    if (j->p >= j->end || *j->p != '"') return kern__js_fail(j, "a string");
    j->p++;
    if (j->pool) o = j->pool + j->pool_used;
    *has_nul = 0;
    for (;;) {
        unsigned c;
        if (j->p >= j->end) return kern__js_fail(j, "the closing quote of a string");
        c = *j->p;
        if (c == '"') { j->p++; break; }
        if (c < 0x20) return kern__js_fail(j, "an escaped control character");
        if (c == '\\') {
            uint32_t cp;
            char tmp[4];
            size_t k;
            if (j->end - j->p < 2) { j->p = j->end; return kern__js_fail(j, "an escape"); }
            c = j->p[1];
            j->p += 2;
            switch (c) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = 8; break;
            case 'f': cp = 12; break;
            case 'n': cp = 10; break;
            case 'r': cp = 13; break;
            case 't': cp = 9; break;
            case 'u': {
                int i, h;
                cp = 0;
                if (j->end - j->p < 4) return kern__js_fail(j, "4 hex digits after \\u");
                for (i = 0; i < 4; i++) {
                    h = kern__js_hex(j->p[i]);
                    if (h < 0) { j->p += i; return kern__js_fail(j, "a hex digit"); }
                    cp = cp * 16 + (uint32_t)h;
                }
                j->p += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return kern__js_fail(j, "a high surrogate before a low one");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo = 0;
                    if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u')
                        return kern__js_fail(j, "a low surrogate \\uDC00..\\uDFFF");
                    for (i = 0; i < 4; i++) {
                        h = kern__js_hex(j->p[2 + i]);
                        if (h < 0) { j->p += 2 + i; return kern__js_fail(j, "a hex digit"); }
                        lo = lo * 16 + (uint32_t)h;
                    }
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return kern__js_fail(j, "a low surrogate \\uDC00..\\uDFFF");
                    j->p += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                break;
            }
            default:
                j->p -= 1;
                return kern__js_fail(j, "a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
            }
            if (cp == 0) *has_nul = 1;
            k = kern__utf8_put(tmp, cp);
            if (o) memcpy(o + n, tmp, k);
            n += k;
        } else {
            int k = kern__utf8_len(j->p, j->end);
            if (k == 0) return kern__js_fail(j, "valid UTF-8");
            if (o) memcpy(o + n, j->p, (size_t)k);
            n += (size_t)k;
            j->p += k;
        }
    }
    if (o) {
        o[n] = 0;
        j->pool_used += n + 1;
        *out = o;
    } else {
        *out = NULL;
    }
    *len = n;
    return KERN_OK;
}

/* A non-negative integer without sign, fraction or exponent. */
static kern_status kern__js_uint(kern__js *j, uint64_t *v, const char *what) {
    uint64_t x = 0;
    const unsigned char *s = j->p;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return kern__js_fail(j, what);
    if (*j->p == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9')
        return kern__js_fail(j, "a number without leading zeros");
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        unsigned d = (unsigned)(*j->p - '0');
        if (x > (UINT64_MAX - d) / 10) {
            j->p = s;
            return kern__err(KERN_ERR_SHAPE,
                             KERN__ST_OP ": header byte %lld: integer overflows 64 bits",
                             kern__js_pos(j));
        }
        x = x * 10 + d;
        j->p++;
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return kern__js_fail(j, "an integer (no fraction or exponent)");
    *v = x;
    return KERN_OK;
}

/* Skips any JSON value (validating it). */
static kern_status kern__js_skip(kern__js *j, int depth) {
    kern_status st;
    kern__js_ws(j);
    if (depth > KERN__ST_MAX_DEPTH)
        return kern__err(KERN_ERR_ARG, KERN__ST_OP ": header byte %lld: nesting deeper than %d",
                         kern__js_pos(j), KERN__ST_MAX_DEPTH);
    if (j->p >= j->end) return kern__js_fail(j, "a value");
    if (*j->p == '"') {
        const char *s;
        size_t n;
        int z;
        char *pool = j->pool;
        j->pool = NULL; /* skipped strings are not kept */
        st = kern__js_string(j, &s, &n, &z);
        j->pool = pool;
        return st;
    }
    if (*j->p == '{' || *j->p == '[') {
        int obj = *j->p == '{';
        unsigned char close = obj ? '}' : ']';
        j->p++;
        kern__js_ws(j);
        if (j->p < j->end && *j->p == close) { j->p++; return KERN_OK; }
        for (;;) {
            kern__js_ws(j);
            if (obj) {
                const char *s;
                size_t n;
                int z;
                char *pool = j->pool;
                j->pool = NULL;
                st = kern__js_string(j, &s, &n, &z);
                j->pool = pool;
                if (st) return st;
                kern__js_ws(j);
                if (j->p >= j->end || *j->p != ':') return kern__js_fail(j, "':'");
                j->p++;
            }
            st = kern__js_skip(j, depth + 1);
            if (st) return st;
            kern__js_ws(j);
            if (j->p < j->end && *j->p == ',') { j->p++; continue; }
            if (j->p < j->end && *j->p == close) { j->p++; return KERN_OK; }
            return kern__js_fail(j, obj ? "',' or '}'" : "',' or ']'");
        }
    }
    if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) {
        /* number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
        if (*j->p == '-') j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9') return kern__js_fail(j, "a digit");
        if (*j->p == '0') j->p++;
        else while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
        if (j->p < j->end && *j->p == '.') {
            j->p++;
            if (j->p >= j->end || *j->p < '0' || *j->p > '9') return kern__js_fail(j, "a digit");
            while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
        }
        if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
            j->p++;
            if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
            if (j->p >= j->end || *j->p < '0' || *j->p > '9') return kern__js_fail(j, "a digit");
            while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
        }
        return KERN_OK;
    }
    {
        static const char *const lits[3] = {"true", "false", "null"};
        int i;
        for (i = 0; i < 3; i++) {
            size_t l = strlen(lits[i]);
            if ((size_t)(j->end - j->p) >= l && memcmp(j->p, lits[i], l) == 0) {
                j->p += l;
                return KERN_OK;
            }
        }
    }
    return kern__js_fail(j, "a JSON value");
}

/* ------------------------------------------------------------- header */

typedef struct kern__st_parse {
    kern__js js;
    kern__st_entry *entries; /* fill pass */
    const char **meta;       /* fill pass */
    int64_t n, n_meta;
    int seen_meta;
} kern__st_parse;

static kern_status kern__st_entry_parse(kern__st_parse *ps, const char *name,
                                        const char *raw, int raw_len, kern__st_entry *e) {
    kern__js *j = &ps->js;
    kern_status st;
    int have_dtype = 0, have_shape = 0, have_off = 0;
    kern__st_entry tmp;
    char nm[72];
    memset(&tmp, 0, sizeof tmp);
    /* messages name the tensor as spelled in the file */
    snprintf(nm, sizeof nm, "%.*s%s", raw_len > 64 ? 64 : raw_len, raw,
             raw_len > 64 ? "..." : "");
    kern__js_ws(j);
    if (j->p >= j->end || *j->p != '{') return kern__js_fail(j, "'{' (a tensor entry)");
    j->p++;
    kern__js_ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        goto check;
    }
    for (;;) {
        const char *key;
        size_t klen;
        int z;
        char keybuf[16];
        const unsigned char *kstart;
        char *pool = j->pool;
        kern__js_ws(j);
        kstart = j->p;
        j->pool = NULL;
        st = kern__js_string(j, &key, &klen, &z);
        j->pool = pool;
        if (st) return st;
        /* compare the raw key (the three keys need no escapes; an escaped
         * spelling of them is treated as an unknown key, and skipped) */
        memset(keybuf, 0, sizeof keybuf);
        if (klen < sizeof keybuf && (size_t)(j->p - kstart) == klen + 2)
            memcpy(keybuf, kstart + 1, klen);
        kern__js_ws(j);
        if (j->p >= j->end || *j->p != ':') return kern__js_fail(j, "':'");
        j->p++;
        kern__js_ws(j);
        if (strcmp(keybuf, "dtype") == 0) {
            const char *dn;
            size_t dl;
            int i;
            const unsigned char *vs = j->p;
            if (have_dtype++)
                return kern__err(KERN_ERR_ARG, KERN__ST_OP ": tensor '%s': \"dtype\" given twice",
                                 nm);
            pool = j->pool;
            j->pool = NULL;
            st = kern__js_string(j, &dn, &dl, &z);
            j->pool = pool;
            if (st) return st;
            tmp.dt = NULL;
            for (i = 0; i < KERN__ST_NDTYPES; i++)
                if (strlen(kern__st_dtypes[i].name) == dl &&
                    (size_t)(j->p - vs) == dl + 2 &&
                    memcmp(vs + 1, kern__st_dtypes[i].name, dl) == 0)
                    tmp.dt = &kern__st_dtypes[i];
            if (!tmp.dt) {
                int l = (int)((j->p - vs) > 40 ? 40 : (j->p - vs));
                return kern__err(KERN_ERR_DTYPE,
                                 KERN__ST_OP ": tensor '%s': dtype %.*s is not a "
                                 "safetensors dtype",
                                 nm, l, (const char *)vs);
            }
        } else if (strcmp(keybuf, "shape") == 0) {
            if (have_shape++)
                return kern__err(KERN_ERR_ARG, KERN__ST_OP ": tensor '%s': \"shape\" given twice",
                                 nm);
            if (j->p >= j->end || *j->p != '[') return kern__js_fail(j, "'[' (a shape)");
            j->p++;
            kern__js_ws(j);
            if (j->p < j->end && *j->p == ']') {
                j->p++;
            } else {
                for (;;) {
                    uint64_t d;
                    kern__js_ws(j);
                    st = kern__js_uint(j, &d, "a dimension (non-negative integer)");
                    if (st) return st;
                    if (tmp.ndim >= KERN_MAX_DIMS)
                        return kern__err(KERN_ERR_UNSUPPORTED,
                                         KERN__ST_OP ": tensor '%s' has more than %d dims",
                                         nm, KERN_MAX_DIMS);
                    if (d > (uint64_t)INT64_MAX)
                        return kern__err(KERN_ERR_SHAPE,
                                         KERN__ST_OP ": tensor '%s': dim %d = %llu is too large",
                                         nm, tmp.ndim, (unsigned long long)d);
                    tmp.shape[tmp.ndim++] = (int64_t)d;
                    kern__js_ws(j);
                    if (j->p < j->end && *j->p == ',') { j->p++; continue; }
                    if (j->p < j->end && *j->p == ']') { j->p++; break; }
                    return kern__js_fail(j, "',' or ']' in a shape");
                }
            }
        } else if (strcmp(keybuf, "data_offsets") == 0) {
            if (have_off++)
                return kern__err(KERN_ERR_ARG,
                                 KERN__ST_OP ": tensor '%s': \"data_offsets\" given twice",
                                 nm);
            if (j->p >= j->end || *j->p != '[') return kern__js_fail(j, "'[' (data_offsets)");
            j->p++;
            kern__js_ws(j);
            st = kern__js_uint(j, &tmp.begin, "an offset (non-negative integer)");
            if (st) return st;
            kern__js_ws(j);
            if (j->p >= j->end || *j->p != ',') return kern__js_fail(j, "',' (two offsets)");
            j->p++;
            kern__js_ws(j);
            st = kern__js_uint(j, &tmp.end, "an offset (non-negative integer)");
            if (st) return st;
            kern__js_ws(j);
            if (j->p >= j->end || *j->p != ']') return kern__js_fail(j, "']' (two offsets)");
            j->p++;
        } else {
            st = kern__js_skip(j, 2);
            if (st) return st;
        }
        kern__js_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == '}') { j->p++; break; }
        return kern__js_fail(j, "',' or '}' in a tensor entry");
    }
check:
    if (!have_dtype || !have_shape || !have_off)
        return kern__err(KERN_ERR_ARG, KERN__ST_OP ": tensor '%s' has no \"%s\"",
                         nm,
                         !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    if (tmp.begin > tmp.end)
        return kern__err(KERN_ERR_ARG,
                         KERN__ST_OP ": tensor '%s': data_offsets [%llu, %llu] run backwards",
                         nm, (unsigned long long)tmp.begin,
                         (unsigned long long)tmp.end);
    {
        uint64_t numel = 1, bytes;
        int i, zero = 0;
        for (i = 0; i < tmp.ndim; i++) if (tmp.shape[i] == 0) zero = 1;
        for (i = 0; i < tmp.ndim && !zero; i++) {
            if ((uint64_t)tmp.shape[i] != 0 &&
                numel > (uint64_t)INT64_MAX / (uint64_t)tmp.shape[i])
                return kern__err(KERN_ERR_SHAPE,
                                 KERN__ST_OP ": tensor '%s': element count overflows",
                                 nm);
            numel *= (uint64_t)tmp.shape[i];
        }
        if (zero) numel = 0;
        if (numel > UINT64_MAX / tmp.dt->size)
            return kern__err(KERN_ERR_SHAPE, KERN__ST_OP ": tensor '%s': byte size overflows",
                             nm);
        bytes = numel * tmp.dt->size;
        if (bytes != tmp.end - tmp.begin)
            return kern__err(KERN_ERR_SHAPE,
                             KERN__ST_OP ": tensor '%s': %s of %llu elements is %llu "
                             "bytes but data_offsets [%llu, %llu] hold %llu",
                             nm, tmp.dt->name, (unsigned long long)numel,
                             (unsigned long long)bytes, (unsigned long long)tmp.begin,
                             (unsigned long long)tmp.end,
                             (unsigned long long)(tmp.end - tmp.begin));
    }
    if (e) {
        tmp.name = name;
        *e = tmp;
    }
    return KERN_OK;
}

static kern_status kern__st_meta_parse(kern__st_parse *ps) {
    kern__js *j = &ps->js;
    kern_status st;
    kern__js_ws(j);
    if (j->p >= j->end || *j->p != '{')
        return kern__js_fail(j, "'{' (__metadata__ is an object of strings)");
    j->p++;
    kern__js_ws(j);
    if (j->p < j->end && *j->p == '}') { j->p++; return KERN_OK; }
    for (;;) {
        const char *k, *v;
        size_t kl, vl;
        int z1, z2;
        kern__js_ws(j);
        st = kern__js_string(j, &k, &kl, &z1);
        if (st) return st;
        kern__js_ws(j);
        if (j->p >= j->end || *j->p != ':') return kern__js_fail(j, "':'");
        j->p++;
        kern__js_ws(j);
        if (j->p >= j->end || *j->p != '"')
            return kern__js_fail(j, "a string (__metadata__ values are strings)");
        st = kern__js_string(j, &v, &vl, &z2);
        if (st) return st;
        if (z1 || z2)
            return kern__err(KERN_ERR_ARG, KERN__ST_OP ": header byte %lld: a metadata "
                             "string contains U+0000", kern__js_pos(j));
        if (ps->meta) {
            ps->meta[2 * ps->n_meta] = k;
            ps->meta[2 * ps->n_meta + 1] = v;
        }
        ps->n_meta++;
        kern__js_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == '}') { j->p++; return KERN_OK; }
        return kern__js_fail(j, "',' or '}' in __metadata__");
    }
}

static kern_status kern__st_header_parse(kern__st_parse *ps) {
    kern__js *j = &ps->js;
    kern_status st;
    if (j->p >= j->end || *j->p != '{')
        return kern__js_fail(j, "'{' (the header is one JSON object)");
    j->p++;
    kern__js_ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
    } else {
        for (;;) {
            const char *name;
            size_t nl;
            int z;
            const unsigned char *ks, *ke;
            kern__js_ws(j);
            ks = j->p;
            st = kern__js_string(j, &name, &nl, &z);
            if (st) return st;
            ke = j->p;
            kern__js_ws(j);
            if (j->p >= j->end || *j->p != ':') return kern__js_fail(j, "':'");
            j->p++;
            if (ke - ks == 14 && memcmp(ks, "\"__metadata__\"", 14) == 0) {
                if (ps->seen_meta++)
                    return kern__err(KERN_ERR_ARG, KERN__ST_OP ": \"__metadata__\" given twice");
                st = kern__st_meta_parse(ps);
                if (st) return st;
            } else {
                if (z)
                    return kern__err(KERN_ERR_ARG,
                                     KERN__ST_OP ": header byte %lld: a tensor name "
                                     "contains U+0000",
                                     (long long)(8 + (ks - j->beg)));
                if (nl == 0)
                    return kern__err(KERN_ERR_ARG,
                                     KERN__ST_OP ": header byte %lld: empty tensor name",
                                     (long long)(8 + (ks - j->beg)));
                st = kern__st_entry_parse(ps, name, (const char *)ks + 1,
                                          (int)(ke - ks) - 2,
                                          ps->entries ? &ps->entries[ps->n] : NULL);
                if (st) return st;
                ps->n++;
            }
            kern__js_ws(j);
            if (j->p < j->end && *j->p == ',') { j->p++; continue; }
            if (j->p < j->end && *j->p == '}') { j->p++; break; }
            return kern__js_fail(j, "',' or '}'");
        }
    }
    kern__js_ws(j);
    if (j->p != j->end) return kern__js_fail(j, "the end of the header (only spaces may follow)");
    return KERN_OK;
}

static int kern__st_cmp_off(const void *a, const void *b) {
    const kern__st_entry *x = (const kern__st_entry *)a, *y = (const kern__st_entry *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}
static int kern__st_cmp_name(const void *a, const void *b) {
    const kern__st_entry *x = *(const kern__st_entry *const *)a;
    const kern__st_entry *y = *(const kern__st_entry *const *)b;
    return strcmp(x->name, y->name);
}
static int kern__st_cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int kern__host_little_endian(void) {
    uint16_t x = 1;
    unsigned char c;
    memcpy(&c, &x, 1);
    return c == 1;
}

/* Validates the file image [buf, buf+size) and builds the object. `owned`
 * (may be NULL) becomes st->file; it is not freed on error. */
static kern_status kern__st_build(kern_ctx *ctx, const unsigned char *buf, size_t size,
                                  const kern_safetensors_params *params, void *owned,
                                  kern_safetensors **out) {
    uint64_t hlen = 0, maxh;
    int i;
    kern__st_parse ps;
    kern_status st;
    size_t bytes, off_entries, off_names, off_meta, off_pool;
    unsigned char *mem;
    kern_safetensors *obj;
    int64_t k;
    const char **meta_idx = NULL;
    if (!kern__host_little_endian())
        return kern__err(KERN_ERR_UNSUPPORTED,
                         KERN__ST_OP ": big-endian hosts are not supported");
    maxh = params && params->max_header_bytes ? params->max_header_bytes : 100000000u;
    if (size < 8)
        return kern__err(KERN_ERR_ARG,
                         KERN__ST_OP ": file is %zu bytes, shorter than the 8-byte header "
                         "length",
                         size);
    for (i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > (uint64_t)(size - 8))
        return kern__err(KERN_ERR_ARG,
                         KERN__ST_OP ": truncated: the header length is %llu bytes but "
                         "only %zu bytes follow",
                         (unsigned long long)hlen, size - 8);
    if (hlen > maxh)
        return kern__err(KERN_ERR_ARG,
                         KERN__ST_OP ": header length %llu exceeds the limit %llu",
                         (unsigned long long)hlen, (unsigned long long)maxh);
    /* pass 1: validate the JSON and count */
    memset(&ps, 0, sizeof ps);
    ps.js.beg = ps.js.p = buf + 8;
    ps.js.end = buf + 8 + hlen;
    st = kern__st_header_parse(&ps);
    if (st) return st;
    /* one block: object, entries, name index, metadata pointers, strings
     * (decoded strings are never longer than their JSON spelling) */
    off_entries = (sizeof(kern_safetensors) + 63) & ~(size_t)63;
    off_names = off_entries + (size_t)ps.n * sizeof(kern__st_entry);
    off_meta = off_names + (size_t)ps.n * sizeof(kern__st_entry *);
    off_pool = off_meta + (size_t)(2 * ps.n_meta + 1) * sizeof(const char *);
    bytes = off_pool + (size_t)hlen + 1;
    mem = (unsigned char *)kern__alloc(ctx, bytes);
    if (!mem)
        return kern__err(KERN_ERR_NOMEM, KERN__ST_OP ": cannot allocate %zu bytes", bytes);
    memset(mem, 0, off_pool);
    obj = (kern_safetensors *)mem;
    obj->entries = (kern__st_entry *)(mem + off_entries);
    obj->by_name = (kern__st_entry **)(mem + off_names);
    obj->meta = (const char **)(mem + off_meta);
    /* pass 2: fill */
    {
        int64_t n = ps.n, nm = ps.n_meta;
        memset(&ps, 0, sizeof ps);
        ps.js.beg = ps.js.p = buf + 8;
        ps.js.end = buf + 8 + hlen;
        ps.js.pool = (char *)(mem + off_pool);
        ps.js.pool_cap = (size_t)hlen + 1;
        ps.entries = obj->entries;
        ps.meta = obj->meta;
        st = kern__st_header_parse(&ps);
        if (st || ps.n != n || ps.n_meta != nm) { /* cannot happen: same input */
            kern__free(ctx, mem);
            return st ? st : kern__err(KERN_ERR_ARG, KERN__ST_OP ": internal parse mismatch");
        }
    }
    obj->n = ps.n;
    obj->n_meta = ps.n_meta;
    obj->data = buf + 8 + hlen;
    obj->data_size = (uint64_t)(size - 8) - hlen;
    /* duplicate names */
    for (k = 0; k < obj->n; k++) obj->by_name[k] = &obj->entries[k];
    if (obj->n > 1) qsort(obj->by_name, (size_t)obj->n, sizeof *obj->by_name, kern__st_cmp_name);
    for (k = 1; k < obj->n; k++)
        if (strcmp(obj->by_name[k - 1]->name, obj->by_name[k]->name) == 0) {
            st = kern__err(KERN_ERR_ARG, KERN__ST_OP ": tensor '%s' appears twice",
                           obj->by_name[k]->name);
            kern__free(ctx, mem);
            return st;
        }
    if (obj->n_meta > 1) { /* duplicate metadata keys */
        meta_idx = (const char **)kern__alloc(ctx, (size_t)obj->n_meta * sizeof(char *));
        if (!meta_idx) {
            kern__free(ctx, mem);
            return kern__err(KERN_ERR_NOMEM, KERN__ST_OP ": out of memory");
        }
        for (k = 0; k < obj->n_meta; k++) meta_idx[k] = obj->meta[2 * k];
        qsort(meta_idx, (size_t)obj->n_meta, sizeof *meta_idx, kern__st_cmp_str);
        for (k = 1; k < obj->n_meta; k++)
            if (strcmp(meta_idx[k - 1], meta_idx[k]) == 0) {
                st = kern__err(KERN_ERR_ARG, KERN__ST_OP ": metadata key '%s' appears twice",
                               meta_idx[k]);
                kern__free(ctx, meta_idx);
                kern__free(ctx, mem);
                return st;
            }
        kern__free(ctx, meta_idx);
    }
    /* offsets: sorted, contiguous from 0, ending at the data size */
    if (obj->n > 1)
        qsort(obj->entries, (size_t)obj->n, sizeof *obj->entries, kern__st_cmp_off);
    /* the entries moved: rebuild the name index */
    for (k = 0; k < obj->n; k++) obj->by_name[k] = &obj->entries[k];
    if (obj->n > 1) qsort(obj->by_name, (size_t)obj->n, sizeof *obj->by_name, kern__st_cmp_name);
    {
        uint64_t pos = 0;
        for (k = 0; k < obj->n; k++) {
            const kern__st_entry *e = &obj->entries[k];
            if (e->begin != pos) {
                if (e->begin < pos)
                    st = kern__err(KERN_ERR_ARG,
                                   KERN__ST_OP ": tensor '%s' at [%llu, %llu] overlaps "
                                   "tensor '%s'",
                                   e->name, (unsigned long long)e->begin,
                                   (unsigned long long)e->end, obj->entries[k - 1].name);
                else
                    st = kern__err(KERN_ERR_ARG,
                                   KERN__ST_OP ": tensor '%s' starts at byte %llu of the "
                                   "data section; bytes %llu..%llu belong to no tensor",
                                   e->name, (unsigned long long)e->begin,
                                   (unsigned long long)pos, (unsigned long long)e->begin);
                kern__free(ctx, mem);
                return st;
            }
            pos = e->end;
        }
        if (pos != obj->data_size) {
            if (pos > obj->data_size)
                st = kern__err(KERN_ERR_ARG,
                               KERN__ST_OP ": truncated: tensor '%s' ends at byte %llu of "
                               "the data section but the file holds %llu",
                               obj->entries[obj->n - 1].name, (unsigned long long)pos,
                               (unsigned long long)obj->data_size);
            else
                st = kern__err(KERN_ERR_ARG,
                               KERN__ST_OP ": %llu bytes after the last tensor belong to "
                               "no tensor",
                               (unsigned long long)(obj->data_size - pos));
            kern__free(ctx, mem);
            return st;
        }
    }
    obj->file = owned;
    *out = obj;
    return KERN_OK;
}

/* A buffer for a file image of `size` bytes whose data section (at 8 +
 * header length) lands 64-byte aligned. Returns the allocation in *alloc
 * and the image start. */
static unsigned char *kern__st_image_alloc(kern_ctx *ctx, size_t size, uint64_t hlen,
                                           void **alloc) {
    size_t shift;
    unsigned char *m;
    if (size > (size_t)-1 - 128) return NULL;
    m = (unsigned char *)kern__alloc(ctx, size + 64);
    if (!m) return NULL;
    shift = (size_t)((64 - ((8 + hlen) & 63)) & 63);
    *alloc = m;
    return m + shift;
}

KERN_API kern_status kern_safetensors_from_memory(kern_ctx *ctx, const void *buf, size_t size,
                                                  const kern_safetensors_params *params,
                                                  kern_safetensors **out) {
    const unsigned char *b = (const unsigned char *)buf;
    kern_status st;
    if (!out) return kern__err(KERN_ERR_ARG, KERN__ST_OP "_from_memory: out is NULL");
    if (!buf && size) return kern__err(KERN_ERR_ARG, KERN__ST_OP "_from_memory: buf is NULL");
    if (params && params->borrow) return kern__st_build(ctx, b, size, params, NULL, out);
    {
        /* validate on the caller's bytes first so an invalid buffer costs
         * no copy, then copy and rebuild the pointers over the copy */
        kern_safetensors *tmp = NULL;
        void *alloc = NULL;
        unsigned char *img;
        uint64_t hlen = 0;
        int i;
        st = kern__st_build(ctx, b, size, params, NULL, &tmp);
        if (st) return st;
        kern_safetensors_free(ctx, tmp);
        for (i = 7; i >= 0; i--) hlen = (hlen << 8) | b[i];
        img = kern__st_image_alloc(ctx, size, hlen, &alloc);
        if (!img)
            return kern__err(KERN_ERR_NOMEM, KERN__ST_OP ": cannot allocate %zu bytes", size);
        memcpy(img, b, size);
        st = kern__st_build(ctx, img, size, params, alloc, out);
        if (st) kern__free(ctx, alloc);
        return st;
    }
}

KERN_API kern_status kern_safetensors_open(kern_ctx *ctx, const char *path,
                                           const kern_safetensors_params *params,
                                           kern_safetensors **out) {
    FILE *f;
    long long fsize;
    unsigned char head[8];
    uint64_t hlen = 0;
    void *alloc = NULL;
    unsigned char *img;
    size_t got;
    int i;
    kern_status st;
    if (!out) return kern__err(KERN_ERR_ARG, KERN__ST_OP "_open: out is NULL");
    if (!path) return kern__err(KERN_ERR_ARG, KERN__ST_OP "_open: path is NULL");
    f = fopen(path, "rb");
    if (!f)
        return kern__err(KERN_ERR_ARG, KERN__ST_OP "_open: cannot open '%s': %s", path,
                         strerror(errno));
    if (fseeko(f, 0, SEEK_END) != 0 || (fsize = (long long)ftello(f)) < 0 ||
        fseeko(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return kern__err(KERN_ERR_ARG, KERN__ST_OP "_open: cannot size '%s' (not a regular file?)",
                         path);
    }
    if ((unsigned long long)fsize > (unsigned long long)((size_t)-1 >> 1)) {
        fclose(f);
        return kern__err(KERN_ERR_NOMEM, KERN__ST_OP "_open: '%s' is too large", path);
    }
    if (fsize < 8) {
        fclose(f);
        return kern__err(KERN_ERR_ARG,
                         KERN__ST_OP "_open: '%s' is %lld bytes, shorter than the 8-byte "
                         "header length",
                         path, fsize);
    }
    if (fread(head, 1, 8, f) != 8) {
        fclose(f);
        return kern__err(KERN_ERR_ARG, KERN__ST_OP "_open: cannot read '%s'", path);
    }
    for (i = 7; i >= 0; i--) hlen = (hlen << 8) | head[i];
    if (hlen > (uint64_t)(fsize - 8)) {
        fclose(f);
        return kern__err(KERN_ERR_ARG,
                         KERN__ST_OP "_open: '%s' is truncated: the header length is %llu "
                         "bytes but only %lld bytes follow",
                         path, (unsigned long long)hlen, fsize - 8);
    }
    img = kern__st_image_alloc(ctx, (size_t)fsize, hlen, &alloc);
    if (!img) {
        fclose(f);
        return kern__err(KERN_ERR_NOMEM, KERN__ST_OP "_open: cannot allocate %lld bytes for '%s'",
                         fsize, path);
    }
    memcpy(img, head, 8);
    got = fread(img + 8, 1, (size_t)fsize - 8, f);
    fclose(f);
    if (got != (size_t)fsize - 8) {
        kern__free(ctx, alloc);
        return kern__err(KERN_ERR_ARG, KERN__ST_OP "_open: '%s' shrank while reading (%zu of %lld bytes)",
                         path, got + 8, fsize);
    }
    st = kern__st_build(ctx, img, (size_t)fsize, params, alloc, out);
    if (st) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kern_last_error());
        kern__free(ctx, alloc);
        /* name the file in the message */
        if (strncmp(msg, KERN__ST_OP ": ", sizeof(KERN__ST_OP ": ") - 1) == 0)
            kern__err(st, KERN__ST_OP "_open: '%s': %s", path,
                      msg + sizeof(KERN__ST_OP ": ") - 1);
    }
    return st;
}

KERN_API void kern_safetensors_free(kern_ctx *ctx, kern_safetensors *st) {
    if (!st) return;
    kern__free(ctx, st->file);
    kern__free(ctx, st);
}

KERN_API int64_t kern_safetensors_count(const kern_safetensors *st) { return st ? st->n : 0; }

static void kern__st_fill(const kern_safetensors *st, const kern__st_entry *e,
                          kern_safetensors_entry *out) {
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->dtype_name = e->dt->name;
    out->dtype = e->dt->dtype;
    out->ndim = e->ndim;
    memcpy(out->shape, e->shape, sizeof out->shape);
    out->data = st->data + e->begin;
    out->offset = e->begin;
    out->nbytes = e->end - e->begin;
}

KERN_API kern_status kern_safetensors_entry_at(const kern_safetensors *st, int64_t i,
                                               kern_safetensors_entry *out) {
    if (!st || !out) return kern__err(KERN_ERR_ARG, KERN__ST_OP "_entry_at: st or out is NULL");
    if (i < 0 || i >= st->n)
        return kern__err(KERN_ERR_INDEX, KERN__ST_OP "_entry_at: i=%lld is outside 0..%lld",
                         (long long)i, (long long)st->n - 1);
    kern__st_fill(st, &st->entries[i], out);
    return KERN_OK;
}

static const kern__st_entry *kern__st_lookup(const kern_safetensors *st, const char *name) {
    int64_t lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->by_name[mid]->name, name);
        if (c == 0) return st->by_name[mid];
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return NULL;
}

KERN_API kern_status kern_safetensors_find(const kern_safetensors *st, const char *name,
                                           kern_safetensors_entry *out) {
    const kern__st_entry *e;
    if (!st || !name || !out)
        return kern__err(KERN_ERR_ARG, KERN__ST_OP "_find: st, name or out is NULL");
    e = kern__st_lookup(st, name);
    if (!e)
        return kern__err(KERN_ERR_ARG, KERN__ST_OP ": tensor '%s' is not in the file", name);
    kern__st_fill(st, e, out);
    return KERN_OK;
}

KERN_API kern_status kern_safetensors_tensor(const kern_safetensors *st, const char *name,
                                             kern_tensor *out) {
    kern_safetensors_entry e;
    kern_tensor t;
    kern_status s;
    size_t es;
    if (!out) return kern__err(KERN_ERR_ARG, KERN__ST_OP "_tensor: out is NULL");
    s = kern_safetensors_find(st, name, &e);
    if (s) return s;
    if (e.dtype == KERN_DTYPE_NONE)
        return kern__err(KERN_ERR_DTYPE,
                         KERN__ST_OP ": tensor '%s' is %s, which kern has no dtype for", name,
                         e.dtype_name);
    es = kern_dtype_size(e.dtype);
    if (e.nbytes && ((uintptr_t)e.data % es) != 0)
        return kern__err(KERN_ERR_LAYOUT,
                         KERN__ST_OP ": tensor '%s' (%s) is not aligned to %zu bytes in a "
                         "borrowed buffer; open the file or copy the buffer",
                         name, e.dtype_name, es);
    memset(&t, 0, sizeof t);
    s = kern_tensor_init(&t, (void *)(uintptr_t)e.data, e.dtype, e.ndim, e.shape);
    if (s) return s;
    if (!t.data) t.data = (void *)(uintptr_t)e.data;
    *out = t;
    return KERN_OK;
}

KERN_API int64_t kern_safetensors_metadata_count(const kern_safetensors *st) {
    return st ? st->n_meta : 0;
}
KERN_API kern_status kern_safetensors_metadata_at(const kern_safetensors *st, int64_t i,
                                                  const char **key, const char **value) {
    if (!st) return kern__err(KERN_ERR_ARG, KERN__ST_OP "_metadata_at: st is NULL");
    if (i < 0 || i >= st->n_meta)
        return kern__err(KERN_ERR_INDEX, KERN__ST_OP "_metadata_at: i=%lld is outside 0..%lld",
                         (long long)i, (long long)st->n_meta - 1);
    if (key) *key = st->meta[2 * i];
    if (value) *value = st->meta[2 * i + 1];
    return KERN_OK;
}
KERN_API const char *kern_safetensors_metadata(const kern_safetensors *st, const char *key) {
    int64_t i;
    if (!st || !key) return NULL;
    for (i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[2 * i], key) == 0) return st->meta[2 * i + 1];
    return NULL;
}

/* ------------------------------------------------------------- writer */

static const char *kern__st_dtype_name(kern_dtype dt) {
    int i;
    for (i = 0; i < KERN__ST_NDTYPES; i++)
        if (kern__st_dtypes[i].dtype == dt && dt != KERN_DTYPE_NONE) return kern__st_dtypes[i].name;
    return NULL;
}

/* Appends to a sized buffer (counts when buf is NULL). */
typedef struct kern__st_out {
    char *buf;
    size_t n, cap;
} kern__st_out;
static void kern__st_put(kern__st_out *o, const char *s, size_t l) {
    if (o->buf && o->n + l <= o->cap) memcpy(o->buf + o->n, s, l);
    o->n += l;
}
static void kern__st_puts(kern__st_out *o, const char *s) { kern__st_put(o, s, strlen(s)); }
static void kern__st_put_json_string(kern__st_out *o, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    kern__st_put(o, "\"", 1);
    for (; *p; p++) {
        char tmp[8];
        if (*p == '"') kern__st_put(o, "\\\"", 2);
        else if (*p == '\\') kern__st_put(o, "\\\\", 2);
        else if (*p < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", *p);
            kern__st_put(o, tmp, 6);
        } else {
            kern__st_put(o, (const char *)p, 1);
        }
    }
    kern__st_put(o, "\"", 1);
}
static int kern__st_valid_utf8(const char *s) {
    const unsigned char *p = (const unsigned char *)s, *e = p + strlen(s);
    while (p < e) {
        int k = kern__utf8_len(p, e);
        if (!k) return 0;
        p += k;
    }
    return 1;
}

static kern_status kern__st_check_items(kern_ctx *ctx, const kern_safetensors_item *items,
                                        int64_t n, const kern_safetensors_write_params *p) {
    int64_t i, k;
    const char *op = KERN__ST_OP "_save";
    (void)ctx;
    if (n < 0) return kern__err(KERN_ERR_ARG, "%s: n=%lld is negative", op, (long long)n);
    if (n > 0 && !items) return kern__err(KERN_ERR_ARG, "%s: items is NULL", op);
    if (p && p->n_metadata < 0)
        return kern__err(KERN_ERR_ARG, "%s: n_metadata=%lld is negative", op,
                         (long long)p->n_metadata);
    if (p && p->n_metadata > 0 && !p->metadata)
        return kern__err(KERN_ERR_ARG, "%s: metadata is NULL with n_metadata=%lld", op,
                         (long long)p->n_metadata);
    for (i = 0; p && i < 2 * p->n_metadata; i++) {
        if (!p->metadata[i])
            return kern__err(KERN_ERR_ARG, "%s: metadata[%lld] is NULL", op, (long long)i);
        if (!kern__st_valid_utf8(p->metadata[i]))
            return kern__err(KERN_ERR_ARG, "%s: metadata[%lld] is not valid UTF-8", op,
                             (long long)i);
        for (k = 0; k < i; k += 2)
            if (i % 2 == 0 && strcmp(p->metadata[k], p->metadata[i]) == 0)
                return kern__err(KERN_ERR_ARG, "%s: metadata key '%s' given twice", op,
                                 p->metadata[i]);
    }
    for (i = 0; i < n; i++) {
        const kern_safetensors_item *it = &items[i];
        kern_status st;
        char what[64];
        if (!it->name || !it->name[0])
            return kern__err(KERN_ERR_ARG, "%s: items[%lld].name is NULL or empty", op,
                             (long long)i);
        if (!kern__st_valid_utf8(it->name))
            return kern__err(KERN_ERR_ARG, "%s: items[%lld].name is not valid UTF-8", op,
                             (long long)i);
        if (strcmp(it->name, "__metadata__") == 0)
            return kern__err(KERN_ERR_ARG, "%s: '__metadata__' is reserved, not a tensor name",
                             op);
        snprintf(what, sizeof what, "tensor '%.40s'", it->name);
        st = kern_tensor_check(it->tensor, op, what);
        if (st) return st;
        if (!kern__st_dtype_name(it->tensor->dtype))
            return kern__err(KERN_ERR_DTYPE, "%s: %s has dtype %s", op, what,
                             kern_dtype_name(it->tensor->dtype));
    }
    /* unique names: sort a copy of the pointers */
    if (n > 1) {
        const char **names = (const char **)kern__alloc(ctx, (size_t)n * sizeof(char *));
        if (!names) return kern__err(KERN_ERR_NOMEM, "%s: out of memory", op);
        for (i = 0; i < n; i++) names[i] = items[i].name;
        qsort(names, (size_t)n, sizeof *names, kern__st_cmp_str);
        for (i = 1; i < n; i++)
            if (strcmp(names[i - 1], names[i]) == 0) {
                kern_status st = kern__err(KERN_ERR_ARG, "%s: tensor '%s' given twice", op,
                                           names[i]);
                kern__free(ctx, names);
                return st;
            }
        kern__free(ctx, names);
    }
    return KERN_OK;
}

/* Data order: by decreasing element size, then as given, so every tensor
 * starts aligned to its element size (the reference writer does the
 * same). Returns the byte offset of item i. */
static uint64_t kern__st_offset(const kern_safetensors_item *items, int64_t n, int64_t i) {
    uint64_t off = 0;
    size_t es = kern_dtype_size(items[i].tensor->dtype);
    int64_t k;
    for (k = 0; k < n; k++) {
        size_t ek = kern_dtype_size(items[k].tensor->dtype);
        if (ek > es || (ek == es && k < i))
            off += (uint64_t)kern_tensor_numel(items[k].tensor) * ek;
    }
    return off;
}

/* The header JSON, padded with spaces so 8 + length is a multiple of 8. */
static size_t kern__st_header(const kern_safetensors_item *items, int64_t n,
                              const kern_safetensors_write_params *p, char *buf, size_t cap) {
    kern__st_out o;
    int64_t i;
    int first = 1;
    o.buf = buf;
    o.n = 0;
    o.cap = cap;
    kern__st_puts(&o, "{");
    if (p && p->n_metadata > 0) {
        kern__st_puts(&o, "\"__metadata__\":{");
        for (i = 0; i < p->n_metadata; i++) {
            if (i) kern__st_puts(&o, ",");
            kern__st_put_json_string(&o, p->metadata[2 * i]);
            kern__st_puts(&o, ":");
            kern__st_put_json_string(&o, p->metadata[2 * i + 1]);
        }
        kern__st_puts(&o, "}");
        first = 0;
    }
    for (i = 0; i < n; i++) {
        const kern_tensor *t = items[i].tensor;
        char tmp[64];
        int d;
        uint64_t bytes = (uint64_t)kern_tensor_numel(t) * kern_dtype_size(t->dtype);
        uint64_t off = kern__st_offset(items, n, i);
        if (!first) kern__st_puts(&o, ",");
        first = 0;
        kern__st_put_json_string(&o, items[i].name);
        kern__st_puts(&o, ":{\"dtype\":\"");
        kern__st_puts(&o, kern__st_dtype_name(t->dtype));
        kern__st_puts(&o, "\",\"shape\":[");
        for (d = 0; d < t->ndim; d++) {
            snprintf(tmp, sizeof tmp, d ? ",%lld" : "%lld", (long long)t->shape[d]);
            kern__st_puts(&o, tmp);
        }
        snprintf(tmp, sizeof tmp, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + bytes));
        kern__st_puts(&o, tmp);
    }
    kern__st_puts(&o, "}");
    while ((8 + o.n) % 8) kern__st_puts(&o, " ");
    return o.n;
}

/* Copies a (possibly strided) tensor's elements, row-major, into dst. */
static void kern__st_gather(const kern_tensor *t, unsigned char *dst) {
    size_t es = kern_dtype_size(t->dtype);
    int64_t n = kern_tensor_numel(t), i;
    int64_t idx[KERN_MAX_DIMS];
    int d;
    if (n <= 0) return;
    if (kern_tensor_is_contiguous(t)) {
        memcpy(dst, t->data, (size_t)n * es);
        return;
    }
    memset(idx, 0, sizeof idx);
    for (i = 0; i < n; i++) {
        int64_t off = 0;
        for (d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
        memcpy(dst + (size_t)i * es, (const unsigned char *)t->data + off * (int64_t)es, es);
        for (d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) break;
            idx[d] = 0;
        }
    }
}

KERN_API kern_status kern_safetensors_serialized_size(
    kern_ctx *ctx, const kern_safetensors_item *items, int64_t n,
    const kern_safetensors_write_params *params, size_t *bytes) {
    kern_status st;
    size_t total;
    int64_t i;
    if (!bytes) return kern__err(KERN_ERR_ARG, KERN__ST_OP "_serialized_size: bytes is NULL");
    st = kern__st_check_items(ctx, items, n, params);
    if (st) return st;
    total = 8 + kern__st_header(items, n, params, NULL, 0);
    for (i = 0; i < n; i++)
        total += (size_t)kern_tensor_numel(items[i].tensor) * kern_dtype_size(items[i].tensor->dtype);
    *bytes = total;
    return KERN_OK;
}

KERN_API kern_status kern_safetensors_serialize(kern_ctx *ctx,
                                                const kern_safetensors_item *items, int64_t n,
                                                const kern_safetensors_write_params *params,
                                                void *buf, size_t size) {
    size_t need, hl, off;
    int64_t i;
    unsigned char *b = (unsigned char *)buf;
    kern_status st = kern_safetensors_serialized_size(ctx, items, n, params, &need);
    if (st) return st;
    if (!buf || size < need)
        return kern__err(KERN_ERR_ARG,
                         KERN__ST_OP "_serialize: buffer of %zu bytes, %zu needed", size, need);
    hl = kern__st_header(items, n, params, NULL, 0);
    for (i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    kern__st_header(items, n, params, (char *)b + 8, hl);
    off = 8 + hl;
    for (i = 0; i < n; i++)
        kern__st_gather(items[i].tensor, b + off + (size_t)kern__st_offset(items, n, i));
    return KERN_OK;
}

KERN_API kern_status kern_safetensors_save(kern_ctx *ctx, const char *path,
                                           const kern_safetensors_item *items, int64_t n,
                                           const kern_safetensors_write_params *params) {
    size_t need, hl, plen;
    char *hdr, *tmp;
    unsigned char len8[8];
    FILE *f;
    int64_t i;
    int ok = 1;
    kern_status st;
    if (!path) return kern__err(KERN_ERR_ARG, KERN__ST_OP "_save: path is NULL");
    st = kern_safetensors_serialized_size(ctx, items, n, params, &need);
    if (st) return st;
    hl = kern__st_header(items, n, params, NULL, 0);
    plen = strlen(path);
    hdr = (char *)kern__alloc(ctx, hl + plen + 8);
    if (!hdr) return kern__err(KERN_ERR_NOMEM, KERN__ST_OP "_save: out of memory");
    kern__st_header(items, n, params, hdr, hl);
    tmp = hdr + hl;
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    f = fopen(tmp, "wb");
    if (!f) {
        st = kern__err(KERN_ERR_ARG, KERN__ST_OP "_save: cannot create '%s': %s", tmp,
                       strerror(errno));
        kern__free(ctx, hdr);
        return st;
    }
    for (i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hdr, 1, hl, f) == hl;
    for (i = 0; ok && i < 4 * n; i++) { /* element sizes 8, 4, 2, 1 in turn */
        const kern_tensor *t = items[i % n].tensor;
        size_t es = kern_dtype_size(t->dtype);
        if (es != (size_t)8 >> (i / n)) continue;
        size_t bytes = (size_t)kern_tensor_numel(t) * es;
        if (bytes == 0) continue;
        if (kern_tensor_is_contiguous(t)) {
            ok = fwrite(t->data, 1, bytes, f) == bytes;
        } else {
            unsigned char *g = (unsigned char *)kern__alloc(ctx, bytes);
            if (!g) {
                fclose(f);
                remove(tmp);
                kern__free(ctx, hdr);
                return kern__err(KERN_ERR_NOMEM, KERN__ST_OP "_save: out of memory");
            }
            kern__st_gather(t, g);
            ok = fwrite(g, 1, bytes, f) == bytes;
            kern__free(ctx, g);
        }
    }
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        st = kern__err(KERN_ERR_ARG, KERN__ST_OP "_save: cannot write '%s': %s", path,
                       strerror(errno));
        remove(tmp);
        kern__free(ctx, hdr);
        return st;
    }
    kern__free(ctx, hdr);
    return KERN_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* KERN_IMPLEMENTATION && !KERN_SAFETENSORS_IMPLEMENTED */
