/* bench_sdpa.c — family `sdpa`: kern_sdpa forward/backward/decode against
 * the naive math path (impl `naive`: per head, S = scale q k^T materialized
 * with kern_gemm, a row softmax (threaded over rows), then P v with
 * kern_gemm — what PyTorch's math backend does; its backward likewise).
 * PyTorch and ONNX Runtime run from bench/peers/sdpa.py with the same case
 * names.
 *
 * Cases (issue 4):
 *   fwd|bwd/<dt>/B1/H16/L<L>/D<D>[/causal], L in {512,1024,2048,4096},
 *     D in {64,128}, dt in {f32,bf16}; FLOPs 4*B*H*L*L*D (halved when
 *     causal: useful work), backward 2.5x that.
 *   decode/<dt>/B<B>/Hq32/Hkv8/Lk<Lk>/D128, B in {1,8}, Lk in {4096,32768}:
 *     bytes = the K and V bytes read (peak kind DRAM).
 *   fwd/f32/B8/H12/L128/D64/padmask: BERT-base's attention with its
 *     additive [B, 1, 1, Lk] padding mask (batch entry b masks its last
 *     8*b keys with -inf); FLOPs counted as unmasked. No naive impl.
 * The whole grid takes a while; select with --benchmark_filter (e.g.
 * 'sdpa/kern/t1/fwd/f32/B1/H16/L1024/D128$', or bench/run --filter).
 */
#include "kern_gemm.h"
#include "kern_sdpa.h"
#include "kbench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct scase {
    int kind; /* 0 fwd, 1 bwd, 2 decode */
    int64_t B, Hq, Hkv, Lq, Lk, D;
    kern_dtype dt;
    int causal;
    int padmask; /* an additive f32 [B, 1, 1, Lk] padding mask */
    char name[96];
} scase;

#define NCASES 128
static scase cases[NCASES];
static int ncases;

/* Reusable buffers (grown on demand; one case runs at a time). */
enum { BQ, BK, BV, BO, BDO, BDQ, BDK, BDV, BLSE, BS, BP, BDP, BP16, BM, NBUF };
static void *buf[NBUF];
static size_t bufsz[NBUF];
static void *getbuf(int i, size_t bytes, kern_dtype fill) {
    return kbench_grow(&buf[i], &bufsz[i], bytes, fill, 1000 + (uint64_t)i);
}

static double case_flops(const scase *c) {
    double f = 4.0 * (double)c->B * (double)c->Hq * (double)c->Lq * (double)c->Lk * (double)c->D;
    if (c->causal) f *= 0.5;
    if (c->kind == 1) f *= 2.5;
    return f;
}

typedef struct tens {
    kern_tensor q, k, v, o, dout, dq, dk, dv, lse, mask;
} tens;

static int setup(const scase *c, tens *t, int grads) {
    size_t es = kern_dtype_size(c->dt);
    size_t nq = (size_t)(c->B * c->Hq * c->Lq * c->D), nk = (size_t)(c->B * c->Hkv * c->Lk * c->D);
    void *q = getbuf(BQ, nq * es, c->dt), *k = getbuf(BK, nk * es, c->dt);
    void *v = getbuf(BV, nk * es, c->dt), *o = getbuf(BO, nq * es, c->dt);
    if (!q || !k || !v || !o) return 0;
    t->q = kern_tensor_4d(q, c->dt, c->B, c->Hq, c->Lq, c->D);
    t->k = kern_tensor_4d(k, c->dt, c->B, c->Hkv, c->Lk, c->D);
    t->v = kern_tensor_4d(v, c->dt, c->B, c->Hkv, c->Lk, c->D);
    t->o = kern_tensor_4d(o, c->dt, c->B, c->Hq, c->Lq, c->D);
    if (c->padmask) {
        float *m = (float *)getbuf(BM, (size_t)(c->B * c->Lk) * 4, KERN_DTYPE_NONE);
        int64_t b, j;
        if (!m) return 0;
        for (b = 0; b < c->B; b++)
            for (j = 0; j < c->Lk; j++) m[b * c->Lk + j] = j >= c->Lk - 8 * b ? -INFINITY : 0.0f;
        t->mask = kern_tensor_4d(m, KERN_F32, c->B, 1, 1, c->Lk);
    }
    if (grads) {
        void *dO = getbuf(BDO, nq * es, c->dt), *dq = getbuf(BDQ, nq * es, KERN_DTYPE_NONE);
        void *dk = getbuf(BDK, nk * es, KERN_DTYPE_NONE), *dv = getbuf(BDV, nk * es, KERN_DTYPE_NONE);
        void *lse = getbuf(BLSE, (size_t)(c->B * c->Hq * c->Lq) * 4, KERN_DTYPE_NONE);
        if (!dO || !dq || !dk || !dv || !lse) return 0;
        t->dout = kern_tensor_4d(dO, c->dt, c->B, c->Hq, c->Lq, c->D);
        t->dq = kern_tensor_4d(dq, c->dt, c->B, c->Hq, c->Lq, c->D);
        t->dk = kern_tensor_4d(dk, c->dt, c->B, c->Hkv, c->Lk, c->D);
        t->dv = kern_tensor_4d(dv, c->dt, c->B, c->Hkv, c->Lk, c->D);
        memset(&t->lse, 0, sizeof t->lse);
        t->lse.data = lse;
        t->lse.dtype = KERN_F32;
        t->lse.ndim = 3;
        t->lse.shape[0] = c->B; t->lse.shape[1] = c->Hq; t->lse.shape[2] = c->Lq;
        t->lse.stride[0] = c->Hq * c->Lq; t->lse.stride[1] = c->Lq; t->lse.stride[2] = 1;
    }
    return 1;
}

static void set_work(kbench_state *st, const scase *c) {
    kbench_set_flops(st, case_flops(c));
    if (c->kind == 2)
        kbench_set_bytes(st, 2.0 * (double)(c->B * c->Hkv * c->Lk * c->D) *
                                 (double)kern_dtype_size(c->dt));
}

/* ------------------------------------------------------------------ kern */

static void run_kern(kbench_state *st, void *user) {
    const scase *c = (const scase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    kern_sdpa_params p;
    tens t;
    if (!setup(c, &t, c->kind == 1)) {
        kbench_skip(st, "out of memory");
        return;
    }
    memset(&p, 0, sizeof p);
    p.is_causal = c->causal;
    p.enable_gqa = c->Hq != c->Hkv;
    if (c->padmask) p.attn_mask = &t.mask;
    if (c->kind == 1) {
        p.lse = &t.lse;
        if (kern_sdpa(ctx, &t.q, &t.k, &t.v, &t.o, &p) != KERN_OK) {
            kbench_skip(st, kern_last_error());
            return;
        }
        while (kbench_next(st))
            kern_sdpa_backward(ctx, &t.q, &t.k, &t.v, &t.o, &t.dout, &t.lse, &t.dq, &t.dk, &t.dv, &p);
        kbench_use(t.dq.data);
    } else {
        while (kbench_next(st)) kern_sdpa(ctx, &t.q, &t.k, &t.v, &t.o, &p);
        kbench_use(t.o.data);
    }
    set_work(st, c);
}

/* ----------------------------------------------------------------- naive */

typedef struct smx {
    float *s;        /* [M][N] scores (scaled) -> probabilities */
    void *p16;       /* bf16 copy of P (bf16 cases) */
    const float *dp; /* backward: dP, overwritten with dS * scale */
    float *ds;
    int64_t M, N, row0; /* row0: query index of row 0 (causal) */
    int causal;
    float scale;
    kern_dtype dt;
    kern_ctx *ctx;
} smx;

static void softmax_row(void *arg, int64_t r, int thread) {
    const smx *a = (const smx *)arg;
    float *s = a->s + r * a->N, m = -INFINITY, l = 0.0f;
    int64_t j, lim = a->causal ? a->row0 + r + 1 : a->N;
    (void)thread;
    if (lim > a->N) lim = a->N;
    for (j = 0; j < lim; j++) m = s[j] > m ? s[j] : m;
    for (j = 0; j < lim; j++) {
        s[j] = expf(s[j] - m);
        l += s[j];
    }
    for (j = 0; j < lim; j++) s[j] /= l;
    for (; j < a->N; j++) s[j] = 0.0f;
    if (a->dt != KERN_F32)
        kern_convert(a->ctx, KERN_F32, s, a->dt, (uint16_t *)a->p16 + r * a->N, a->N);
}

/* dS = P (dP - rowsum(P dP)) * scale, in place of dP (and a bf16 copy). */
static void dsoftmax_row(void *arg, int64_t r, int thread) {
    const smx *a = (const smx *)arg;
    const float *p = a->s + r * a->N;
    float *dp = a->ds + r * a->N, delta = 0.0f;
    int64_t j;
    (void)thread;
    for (j = 0; j < a->N; j++) delta += p[j] * dp[j];
    for (j = 0; j < a->N; j++) dp[j] = p[j] * (dp[j] - delta) * a->scale;
    if (a->dt != KERN_F32)
        kern_convert(a->ctx, KERN_F32, dp, a->dt, (uint16_t *)a->p16 + r * a->N, a->N);
}

static kern_tensor view2(void *base, kern_dtype dt, int64_t rows, int64_t cols, int64_t rs) {
    kern_tensor t = kern_tensor_2d(base, dt, rows, cols);
    t.stride[0] = rs;
    return t;
}

/* out[M,D] = softmax(scale Q K^T) V for one (b, kv head) block of M query
 * rows (decode: the G query heads of the kv head). */
static void naive_block(kern_ctx *ctx, const scase *c, const void *q, const void *k,
                        const void *v, void *o, int64_t M, int64_t row0, float *S, void *P16) {
    kern_gemm_params gp;
    kern_tensor tq = view2((void *)q, c->dt, M, c->D, c->D);
    kern_tensor tk = view2((void *)k, c->dt, c->Lk, c->D, c->D);
    kern_tensor tv = view2((void *)v, c->dt, c->Lk, c->D, c->D);
    kern_tensor ts = kern_tensor_2d(S, KERN_F32, M, c->Lk);
    kern_tensor tp = c->dt == KERN_F32 ? ts : kern_tensor_2d(P16, c->dt, M, c->Lk);
    kern_tensor to = view2(o, c->dt, M, c->D, c->D);
    smx a;
    memset(&gp, 0, sizeof gp);
    gp.trans_b = 1;
    gp.alpha_set = 1;
    gp.alpha = 1.0f / sqrtf((float)c->D);
    kern_gemm(ctx, &tq, &tk, &ts, &gp);
    memset(&a, 0, sizeof a);
    a.s = S;
    a.p16 = P16;
    a.M = M;
    a.N = c->Lk;
    a.row0 = row0;
    a.causal = c->causal;
    a.dt = c->dt;
    a.ctx = ctx;
    kern_parallel_for(ctx, M, softmax_row, &a);
    memset(&gp, 0, sizeof gp);
    kern_gemm(ctx, &tp, &tv, &to, &gp);
}

static void naive_bwd_head(kern_ctx *ctx, const scase *c, const tens *t, int64_t b, int64_t h,
                           float *S, float *dP, void *P16) {
    size_t es = kern_dtype_size(c->dt);
    int64_t L = c->Lq, D = c->D;
    size_t off = (size_t)((b * c->Hq + h) * L * D) * es;
    kern_tensor tq = kern_tensor_2d((char *)t->q.data + off, c->dt, L, D);
    kern_tensor tk = kern_tensor_2d((char *)t->k.data + off, c->dt, L, D);
    kern_tensor tv = kern_tensor_2d((char *)t->v.data + off, c->dt, L, D);
    kern_tensor tdo = kern_tensor_2d((char *)t->dout.data + off, c->dt, L, D);
    kern_tensor tdq = kern_tensor_2d((char *)t->dq.data + off, c->dt, L, D);
    kern_tensor tdk = kern_tensor_2d((char *)t->dk.data + off, c->dt, L, D);
    kern_tensor tdv = kern_tensor_2d((char *)t->dv.data + off, c->dt, L, D);
    kern_tensor ts = kern_tensor_2d(S, KERN_F32, L, L), tdp = kern_tensor_2d(dP, KERN_F32, L, L);
    kern_tensor tp = c->dt == KERN_F32 ? ts : kern_tensor_2d(P16, c->dt, L, L);
    kern_tensor tds = c->dt == KERN_F32 ? tdp : kern_tensor_2d(P16, c->dt, L, L);
    kern_gemm_params gp;
    smx a;
    float scale = 1.0f / sqrtf((float)D);
    /* P = softmax(scale Q K^T) */
    memset(&gp, 0, sizeof gp);
    gp.trans_b = 1;
    gp.alpha_set = 1;
    gp.alpha = scale;
    kern_gemm(ctx, &tq, &tk, &ts, &gp);
    memset(&a, 0, sizeof a);
    a.s = S;
    a.p16 = P16;
    a.M = L;
    a.N = L;
    a.causal = c->causal;
    a.dt = c->dt;
    a.scale = scale;
    a.ctx = ctx;
    kern_parallel_for(ctx, L, softmax_row, &a);
    /* dV = P^T dO */
    memset(&gp, 0, sizeof gp);
    gp.trans_a = 1;
    kern_gemm(ctx, &tp, &tdo, &tdv, &gp);
    /* dP = dO V^T; dS = P (dP - delta) scale */
    memset(&gp, 0, sizeof gp);
    gp.trans_b = 1;
    kern_gemm(ctx, &tdo, &tv, &tdp, &gp);
    a.ds = dP;
    kern_parallel_for(ctx, L, dsoftmax_row, &a);
    /* dQ = dS K, dK = dS^T Q */
    memset(&gp, 0, sizeof gp);
    kern_gemm(ctx, &tds, &tk, &tdq, &gp);
    gp.trans_a = 1;
    kern_gemm(ctx, &tds, &tq, &tdk, &gp);
}

static void run_naive(kbench_state *st, void *user) {
    const scase *c = (const scase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    size_t es = kern_dtype_size(c->dt);
    int64_t G = c->Hq / c->Hkv, rows = c->kind == 2 ? G * c->Lq : c->Lq;
    float *S, *dP = NULL;
    void *P16;
    tens t;
    if (!setup(c, &t, c->kind == 1)) {
        kbench_skip(st, "out of memory");
        return;
    }
    S = (float *)getbuf(BS, (size_t)(rows * c->Lk) * 4, KERN_DTYPE_NONE);
    P16 = getbuf(BP16, (size_t)(rows * c->Lk) * 2, KERN_DTYPE_NONE);
    if (c->kind == 1) dP = (float *)getbuf(BDP, (size_t)(rows * c->Lk) * 4, KERN_DTYPE_NONE);
    if (!S || !P16 || (c->kind == 1 && !dP)) {
        kbench_skip(st, "out of memory");
        return;
    }
    while (kbench_next(st)) {
        int64_t b, h;
        if (c->kind == 1) {
            for (b = 0; b < c->B; b++)
                for (h = 0; h < c->Hq; h++) naive_bwd_head(ctx, c, &t, b, h, S, dP, P16);
        } else if (c->kind == 2) {
            for (b = 0; b < c->B; b++)
                for (h = 0; h < c->Hkv; h++) {
                    size_t qo = (size_t)((b * c->Hq + h * G) * c->Lq * c->D) * es;
                    size_t ko = (size_t)((b * c->Hkv + h) * c->Lk * c->D) * es;
                    naive_block(ctx, c, (char *)t.q.data + qo, (char *)t.k.data + ko,
                                (char *)t.v.data + ko, (char *)t.o.data + qo, rows, 0, S, P16);
                }
        } else {
            for (b = 0; b < c->B; b++)
                for (h = 0; h < c->Hq; h++) {
                    size_t qo = (size_t)((b * c->Hq + h) * c->Lq * c->D) * es;
                    size_t ko = (size_t)((b * c->Hkv + h / G) * c->Lk * c->D) * es;
                    naive_block(ctx, c, (char *)t.q.data + qo, (char *)t.k.data + ko,
                                (char *)t.v.data + ko, (char *)t.o.data + qo, rows, 0, S, P16);
                }
        }
    }
    kbench_use(t.o.data);
    set_work(st, c);
}

/* ------------------------------------------------------------- registry */

static void add_case(int kind, int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq, int64_t Lk,
                     int64_t D, kern_dtype dt, int causal, int padmask) {
    scase *c;
    int t;
    kbench_peak peak;
    if (ncases >= NCASES) return;
    c = &cases[ncases++];
    c->kind = kind;
    c->B = B; c->Hq = Hq; c->Hkv = Hkv; c->Lq = Lq; c->Lk = Lk; c->D = D;
    c->dt = dt;
    c->causal = causal;
    c->padmask = padmask;
    if (kind == 2)
        snprintf(c->name, sizeof c->name, "decode/%s/B%lld/Hq%lld/Hkv%lld/Lk%lld/D%lld",
                 kern_dtype_name(dt), (long long)B, (long long)Hq, (long long)Hkv, (long long)Lk,
                 (long long)D);
    else
        snprintf(c->name, sizeof c->name, "%s/%s/B%lld/H%lld/L%lld/D%lld%s%s", kind ? "bwd" : "fwd",
                 kern_dtype_name(dt), (long long)B, (long long)Hq, (long long)Lq, (long long)D,
                 causal ? "/causal" : "", padmask ? "/padmask" : "");
    peak = kind == 2 ? KBENCH_PEAK_DRAM : (dt == KERN_BF16 ? KBENCH_PEAK_BF16 : KBENCH_PEAK_F32);
    /* bf16 products run on AMX tiles where the machine has them: the
     * fraction is then of the tile peak */
    if (kind != 2 && dt == KERN_BF16 && kern_isa_available(KERN_ISA_AMX))
        peak = KBENCH_PEAK_AMX_BF16;
    for (t = 1; t <= 2; t++) {
        kbench_add("sdpa", c->name, "kern", t, peak, run_kern, c);
        if (!padmask) kbench_add("sdpa", c->name, "naive", t, peak, run_naive, c);
    }
}

KBENCH_INIT(sdpa) {
    static const int64_t Ls[] = {512, 1024, 2048, 4096}, Ds[] = {64, 128};
    static const kern_dtype dts[] = {KERN_F32, KERN_BF16};
    int kind, li, di, ti, causal, bi, ki;
    for (kind = 0; kind < 2; kind++)
        for (ti = 0; ti < 2; ti++)
            for (di = 0; di < 2; di++)
                for (li = 0; li < 4; li++)
                    for (causal = 0; causal < 2; causal++)
                        add_case(kind, 1, 16, 16, Ls[li], Ls[li], Ds[di], dts[ti], causal, 0);
    for (ti = 0; ti < 2; ti++)
        for (bi = 0; bi < 2; bi++)
            for (ki = 0; ki < 2; ki++)
                add_case(2, bi ? 8 : 1, 32, 8, 1, ki ? 32768 : 4096, 128, dts[ti], 0, 0);
    add_case(0, 8, 12, 12, 128, 128, 64, KERN_F32, 0, 1);
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("sdpa", "fwd/f32/B1/H16/L2048/D128");
    kbench_headline("sdpa", "bwd/f32/B1/H16/L2048/D128");
    kbench_headline("sdpa", "decode/f32/B1/Hq32/Hkv8/Lk32768/D128");
}
