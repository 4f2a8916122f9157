/* bench_mem.c — family "mem": memory bandwidth, the bound of every
 * pointwise kernel, and kern_convert (f16/bf16 <-> f32).
 *
 * Cases (f32 unless named; nonzero data; bytes = read + written):
 *   read/f32/n65536, read/f32/n33554432         sum of x          4n bytes
 *   copy/f32/n65536, copy/f32/n33554432         y = x             8n bytes
 *   triad/f32/n65536, triad/f32/n33554432       a = b + 3c        12n bytes
 *   convert/bf16_to_f32/n131072, .../n67108864  kern_convert      6n bytes
 *   convert/f16_to_f32/..., convert/f32_to_bf16/..., convert/f32_to_f16/...
 * The small size is L2-resident (peak=l2), the large one DRAM (peak=dram).
 * Impls:
 *   kern   read/copy/triad: AVX2 loops split over the context's threads with
 *          kern_parallel_for (non-temporal stores at DRAM size);
 *          convert: kern_convert
 *   naive  the plain C loop on the calling thread (for convert: the scalar
 *          kern_bf16_to_f32 etc. in a loop), whatever the thread count
 * PyTorch runs the same cases in bench/peers/mem.py.
 */
#include "kern_base.h"
#include "kbench.h"

#include <stdio.h>
#include <string.h>
#ifdef KERN_X86
#include <immintrin.h>
#endif

enum { OP_READ, OP_COPY, OP_TRIAD, OP_CVT };

typedef struct mem_case {
    int op;
    kern_dtype sdt, ddt; /* convert only */
    int64_t n;
    char name[64];
} mem_case;

/* Buffers are made once per (role, size) and shared by the cases. */
typedef struct buf_entry {
    const char *role;
    int64_t bytes;
    kern_dtype dt;
    void *p;
} buf_entry;
static buf_entry bufs[32];
static int n_bufs;
static void *get_buf(const char *role, kern_dtype dt, int64_t n) {
    int64_t bytes = n * (int64_t)kern_dtype_size(dt);
    for (int i = 0; i < n_bufs; i++)
        if (!strcmp(bufs[i].role, role) && bufs[i].bytes >= bytes && bufs[i].dt == dt)
            return bufs[i].p;
    if (n_bufs == 32) return NULL;
    bufs[n_bufs].role = role;
    bufs[n_bufs].bytes = bytes;
    bufs[n_bufs].dt = dt;
    bufs[n_bufs].p = kbench_alloc((size_t)bytes);
    if (bufs[n_bufs].p) kbench_fill(bufs[n_bufs].p, dt, n, (uint64_t)n_bufs + 1);
    return bufs[n_bufs++].p;
}

/* ------------------------------------------------------------ kernels */

#define NT_BYTES ((int64_t)16 << 20)

typedef struct mem_job {
    int op;
    const float *x, *b, *c;
    float *y;
    int64_t n, per;
    int nt, avx2;
    double partial[64 * 8]; /* read: a cache line per thread */
} mem_job;

#ifdef KERN_X86
KERN_TARGET_AVX2 static float read__avx2(const float *p, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    __m256 s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    float out[8], r = 0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
        s4 = _mm256_add_ps(s4, _mm256_loadu_ps(p + i + 32));
        s5 = _mm256_add_ps(s5, _mm256_loadu_ps(p + i + 40));
        s6 = _mm256_add_ps(s6, _mm256_loadu_ps(p + i + 48));
        s7 = _mm256_add_ps(s7, _mm256_loadu_ps(p + i + 56));
    }
    s0 = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    s4 = _mm256_add_ps(_mm256_add_ps(s4, s5), _mm256_add_ps(s6, s7));
    _mm256_storeu_ps(out, _mm256_add_ps(s0, s4));
    for (int k = 0; k < 8; k++) r += out[k];
    for (; i < n; i++) r += p[i];
    return r;
}
KERN_TARGET_AVX2 static void copy__avx2(const float *x, float *y, int64_t n, int nt) {
    int64_t i = 0;
    if (nt) {
        for (; i < n && ((uintptr_t)(y + i) & 31); i++) y[i] = x[i];
        for (; i + 32 <= n; i += 32) {
            _mm256_stream_ps(y + i, _mm256_loadu_ps(x + i));
            _mm256_stream_ps(y + i + 8, _mm256_loadu_ps(x + i + 8));
            _mm256_stream_ps(y + i + 16, _mm256_loadu_ps(x + i + 16));
            _mm256_stream_ps(y + i + 24, _mm256_loadu_ps(x + i + 24));
        }
        _mm_sfence();
    }
    for (; i + 32 <= n; i += 32) {
        _mm256_storeu_ps(y + i, _mm256_loadu_ps(x + i));
        _mm256_storeu_ps(y + i + 8, _mm256_loadu_ps(x + i + 8));
        _mm256_storeu_ps(y + i + 16, _mm256_loadu_ps(x + i + 16));
        _mm256_storeu_ps(y + i + 24, _mm256_loadu_ps(x + i + 24));
    }
    for (; i < n; i++) y[i] = x[i];
}
KERN_TARGET_AVX2 static void triad__avx2(const float *b, const float *c, float *a,
                                         int64_t n, int nt) {
    const __m256 s = _mm256_set1_ps(3.0f);
    int64_t i = 0;
    if (nt) {
        for (; i < n && ((uintptr_t)(a + i) & 31); i++) a[i] = b[i] + 3.0f * c[i];
        for (; i + 16 <= n; i += 16) {
            _mm256_stream_ps(a + i, _mm256_fmadd_ps(s, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
            _mm256_stream_ps(a + i + 8, _mm256_fmadd_ps(s, _mm256_loadu_ps(c + i + 8),
                                                        _mm256_loadu_ps(b + i + 8)));
        }
        _mm_sfence();
    }
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(a + i, _mm256_fmadd_ps(s, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
        _mm256_storeu_ps(a + i + 8, _mm256_fmadd_ps(s, _mm256_loadu_ps(c + i + 8),
                                                    _mm256_loadu_ps(b + i + 8)));
    }
    for (; i < n; i++) a[i] = b[i] + 3.0f * c[i];
}
#endif

static float read__naive(const float *p, int64_t n) {
    float r = 0;
    for (int64_t i = 0; i < n; i++) r += p[i];
    return r;
}
static void copy__naive(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i];
}
static void triad__naive(const float *b, const float *c, float *a, int64_t n) {
    for (int64_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
}

static void mem_task(void *p, int64_t task, int thread) {
    mem_job *j = (mem_job *)p;
    int64_t a = task * j->per, len = j->n - a < j->per ? j->n - a : j->per;
    (void)thread;
#ifdef KERN_X86
    if (j->avx2) {
        if (j->op == OP_READ) j->partial[(thread % 64) * 8] += read__avx2(j->x + a, len);
        else if (j->op == OP_COPY) copy__avx2(j->x + a, j->y + a, len, j->nt);
        else triad__avx2(j->b + a, j->c + a, j->y + a, len, j->nt);
        return;
    }
#endif
    if (j->op == OP_READ) j->partial[(thread % 64) * 8] += read__naive(j->x + a, len);
    else if (j->op == OP_COPY) copy__naive(j->x + a, j->y + a, len);
    else triad__naive(j->b + a, j->c + a, j->y + a, len);
}

static int64_t case_bytes(const mem_case *c) {
    switch (c->op) {
    case OP_READ: return 4 * c->n;
    case OP_COPY: return 8 * c->n;
    case OP_TRIAD: return 12 * c->n;
    default: return c->n * (int64_t)(kern_dtype_size(c->sdt) + kern_dtype_size(c->ddt));
    }
}

static void run_kern(kbench_state *st, void *user) {
    mem_case *c = (mem_case *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    if (!ctx) { kbench_skip(st, "no context"); return; }
    if (c->op == OP_CVT) {
        void *src = get_buf(c->sdt == KERN_F32 ? "x" : kern_dtype_name(c->sdt), c->sdt, c->n);
        void *dst = get_buf(c->ddt == KERN_F32 ? "y" : "y16", c->ddt, c->n);
        if (!src || !dst) { kbench_skip(st, "out of memory"); return; }
        kern_convert(ctx, c->sdt, src, c->ddt, dst, c->n); /* warm up */
        while (kbench_next(st)) kern_convert(ctx, c->sdt, src, c->ddt, dst, c->n);
        kbench_use(dst);
    } else {
        static mem_job j; /* large (partials); one benchmark runs at a time */
        int threads = kern_ctx_threads(ctx);
        int64_t n_tasks;
        memset(&j, 0, sizeof j);
        j.op = c->op;
        j.n = c->n;
        j.x = (const float *)get_buf("x", KERN_F32, c->n);
        j.b = j.x;
        j.c = (const float *)get_buf("z", KERN_F32, c->n);
        j.y = (float *)get_buf("y", KERN_F32, c->n);
        if (!j.x || !j.c || !j.y) { kbench_skip(st, "out of memory"); return; }
        j.nt = c->op != OP_READ && case_bytes(c) >= NT_BYTES;
        j.avx2 = (kern_ctx_features(ctx) & (KERN_CPU_AVX2 | KERN_CPU_FMA)) ==
                 (KERN_CPU_AVX2 | KERN_CPU_FMA);
        /* cache-sized: one contiguous piece per thread (each stays in its
         * core's L2); DRAM-sized: 1 MiB pieces handed out dynamically */
        if (case_bytes(c) >= NT_BYTES) j.per = 1 << 18;
        else j.per = ((c->n + threads - 1) / threads + 63) & ~(int64_t)63;
        n_tasks = (c->n + j.per - 1) / j.per;
        kern_parallel_for(ctx, n_tasks, mem_task, &j); /* warm up */
        while (kbench_next(st)) kern_parallel_for(ctx, n_tasks, mem_task, &j);
        kbench_use(&j.partial[0]);
        kbench_use(j.y);
    }
    kbench_set_bytes(st, (double)case_bytes(c));
}

static void run_naive(kbench_state *st, void *user) {
    mem_case *c = (mem_case *)user;
    if (c->op == OP_CVT) {
        void *src = get_buf(c->sdt == KERN_F32 ? "x" : kern_dtype_name(c->sdt), c->sdt, c->n);
        void *dst = get_buf(c->ddt == KERN_F32 ? "y" : "y16", c->ddt, c->n);
        if (!src || !dst) { kbench_skip(st, "out of memory"); return; }
        while (kbench_next(st)) {
            const uint16_t *h = (const uint16_t *)src;
            const float *f = (const float *)src;
            float *fo = (float *)dst;
            uint16_t *ho = (uint16_t *)dst;
            if (c->sdt == KERN_BF16) for (int64_t i = 0; i < c->n; i++) fo[i] = kern_bf16_to_f32(h[i]);
            else if (c->sdt == KERN_F16) for (int64_t i = 0; i < c->n; i++) fo[i] = kern_f16_to_f32(h[i]);
            else if (c->ddt == KERN_BF16) for (int64_t i = 0; i < c->n; i++) ho[i] = kern_f32_to_bf16(f[i]);
            else for (int64_t i = 0; i < c->n; i++) ho[i] = kern_f32_to_f16(f[i]);
            kbench_use(dst);
        }
    } else {
        const float *x = (const float *)get_buf("x", KERN_F32, c->n);
        const float *z = (const float *)get_buf("z", KERN_F32, c->n);
        float *y = (float *)get_buf("y", KERN_F32, c->n);
        volatile float sink = 0;
        if (!x || !z || !y) { kbench_skip(st, "out of memory"); return; }
        while (kbench_next(st)) {
            if (c->op == OP_READ) sink += read__naive(x, c->n);
            else if (c->op == OP_COPY) copy__naive(x, y, c->n);
            else triad__naive(x, z, y, c->n);
            kbench_use(y);
        }
        (void)sink;
    }
    kbench_set_bytes(st, (double)case_bytes(c));
}

static mem_case cases[32];
static int n_cases;

static void add_case(int op, kern_dtype s, kern_dtype d, int64_t n) {
    mem_case *c = &cases[n_cases++];
    static const char *opname[3] = {"read", "copy", "triad"};
    c->op = op;
    c->sdt = s;
    c->ddt = d;
    c->n = n;
    if (op == OP_CVT)
        snprintf(c->name, sizeof c->name, "convert/%s_to_%s/n%lld", kern_dtype_name(s),
                 kern_dtype_name(d), (long long)n);
    else
        snprintf(c->name, sizeof c->name, "%s/f32/n%lld", opname[op], (long long)n);
}

KBENCH_INIT(mem) {
    static const int64_t mem_n[2] = {65536, (int64_t)32 << 20};   /* 256 KiB, 128 MiB */
    static const int64_t cvt_n[2] = {131072, (int64_t)64 << 20};  /* 128K, 64M elements */
    for (int s = 0; s < 2; s++) {
        for (int op = OP_READ; op <= OP_TRIAD; op++) add_case(op, KERN_F32, KERN_F32, mem_n[s]);
        add_case(OP_CVT, KERN_BF16, KERN_F32, cvt_n[s]);
        add_case(OP_CVT, KERN_F16, KERN_F32, cvt_n[s]);
        add_case(OP_CVT, KERN_F32, KERN_BF16, cvt_n[s]);
        add_case(OP_CVT, KERN_F32, KERN_F16, cvt_n[s]);
    }
    for (int k = 0; k < n_cases; k++) {
        kbench_peak pk = case_bytes(&cases[k]) >= NT_BYTES ? KBENCH_PEAK_DRAM : KBENCH_PEAK_L2;
        for (int t = 1; t <= 2; t++) {
            kbench_add("mem", cases[k].name, "kern", t, pk, run_kern, &cases[k]);
            kbench_add("mem", cases[k].name, "naive", t, pk, run_naive, &cases[k]);
        }
    }
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("mem", "convert/bf16_to_f32/n131072");
    kbench_headline("mem", "convert/bf16_to_f32/n67108864");
}
