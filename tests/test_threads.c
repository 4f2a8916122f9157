/* test_threads.c — two user threads calling ops on one shared context
 * (issue 19): a context serializes its ops, so every call must give the
 * same bytes as the same call made alone, with no data race (this test
 * is part of `make tsan`). Each thread runs a different mix of families
 * (gemm, sdpa, scatter_reduce, norm, spmm) that use the context's
 * workspace, thread scratch and pool. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern.h"
#include "kt.h"

#include <pthread.h>

#define TM 48
#define TK 40
#define TN 36
#define TL 70
#define TD 16
#define TE 900
#define TR 64
#define TF 8

typedef struct tw_bufs {
    float a[TM * TK], b[TK * TN], c[TM * TN];
    float q[2 * TL * TD], k[2 * TL * TD], v[2 * TL * TD], o[2 * TL * TD];
    float self[TR * TF], src[TE * TF], so[TR * TF];
    int64_t idx[TE];
    float x[TM * TK], nw[TK], no[TM * TK];
} tw_bufs;

static void tw_init(tw_bufs *t, uint64_t salt) {
    kt_rng r = kt_rng_make(salt);
    int i;
    kt_fill_normal(&r, t->a, KERN_F32, TM * TK, 1);
    kt_fill_normal(&r, t->b, KERN_F32, TK * TN, 1);
    kt_fill_normal(&r, t->q, KERN_F32, 2 * TL * TD, 1);
    kt_fill_normal(&r, t->k, KERN_F32, 2 * TL * TD, 1);
    kt_fill_normal(&r, t->v, KERN_F32, 2 * TL * TD, 1);
    kt_fill_normal(&r, t->self, KERN_F32, TR * TF, 1);
    kt_fill_normal(&r, t->src, KERN_F32, TE * TF, 1);
    kt_fill_normal(&r, t->x, KERN_F32, TM * TK, 1);
    kt_fill_normal(&r, t->nw, KERN_F32, TK, 1);
    for (i = 0; i < TE; i++) t->idx[i] = (int64_t)(kt_uniform(&r, 0, TR)) % TR;
}

/* One round of ops (which: 0 or 1 picks the order and the options). */
static int tw_round(kern_ctx *ctx, tw_bufs *t, int which) {
    kern_tensor a = kern_tensor_2d(t->a, KERN_F32, TM, TK), b = kern_tensor_2d(t->b, KERN_F32, TK, TN);
    kern_tensor c = kern_tensor_2d(t->c, KERN_F32, TM, TN);
    kern_tensor q = kern_tensor_4d(t->q, KERN_F32, 1, 2, TL, TD), k = kern_tensor_4d(t->k, KERN_F32, 1, 2, TL, TD);
    kern_tensor v = kern_tensor_4d(t->v, KERN_F32, 1, 2, TL, TD), o = kern_tensor_4d(t->o, KERN_F32, 1, 2, TL, TD);
    kern_tensor self = kern_tensor_2d(t->self, KERN_F32, TR, TF), src = kern_tensor_2d(t->src, KERN_F32, TE, TF);
    kern_tensor so = kern_tensor_2d(t->so, KERN_F32, TR, TF), idx = kern_tensor_1d(t->idx, KERN_I64, TE);
    kern_tensor x = kern_tensor_2d(t->x, KERN_F32, TM, TK), no = kern_tensor_2d(t->no, KERN_F32, TM, TK);
    kern_tensor nw = kern_tensor_1d(t->nw, KERN_F32, TK);
    kern_sdpa_params sp;
    kern_norm_params np;
    kern_status st[4];
    memset(&sp, 0, sizeof sp);
    sp.is_causal = which;
    memset(&np, 0, sizeof np);
    np.norm = which ? KERN_NORM_RMS : KERN_NORM_LAYER;
    np.weight = &nw;
    if (which) {
        st[0] = kern_sdpa(ctx, &q, &k, &v, &o, &sp);
        st[1] = kern_scatter_reduce(ctx, &self, 0, &idx, &src, KERN_REDUCE_MEAN, 1, &so, NULL, NULL);
        st[2] = kern_gemm(ctx, &a, &b, &c, NULL);
        st[3] = kern_norm(ctx, &x, &no, &np);
    } else {
        st[0] = kern_gemm(ctx, &a, &b, &c, NULL);
        st[1] = kern_norm(ctx, &x, &no, &np);
        st[2] = kern_sdpa(ctx, &q, &k, &v, &o, &sp);
        st[3] = kern_scatter_reduce(ctx, &self, 0, &idx, &src, KERN_REDUCE_SUM, 1, &so, NULL, NULL);
    }
    return st[0] == KERN_OK && st[1] == KERN_OK && st[2] == KERN_OK && st[3] == KERN_OK;
}

typedef struct tw_arg {
    kern_ctx *ctx;
    tw_bufs *mine, *want;
    int which, rounds, bad;
} tw_arg;

static void *tw_thread(void *p) {
    tw_arg *a = (tw_arg *)p;
    int r;
    for (r = 0; r < a->rounds; r++) {
        memset(a->mine->c, 0, sizeof a->mine->c);
        memset(a->mine->o, 0, sizeof a->mine->o);
        memset(a->mine->so, 0, sizeof a->mine->so);
        memset(a->mine->no, 0, sizeof a->mine->no);
        if (!tw_round(a->ctx, a->mine, a->which) || memcmp(a->mine, a->want, sizeof *a->mine) != 0)
            a->bad++;
    }
    return NULL;
}

KT_TEST(two_user_threads_one_context) {
    static tw_bufs mine[2], want[2];
#ifdef KT_SANITIZER
    const int rounds = 6;
#else
    const int rounds = 40;
#endif
    int threads, i;
    for (threads = 1; threads <= 2; threads++) {
        kern_ctx *ctx = kt_ctx(threads, KERN_ISA_AUTO);
        pthread_t th[2];
        tw_arg arg[2];
        for (i = 0; i < 2; i++) {
            tw_init(&want[i], 100 + i);
            KT_CHECK(tw_round(ctx, &want[i], i), "reference round %d: %s", i, kern_last_error());
            mine[i] = want[i];
            arg[i].ctx = ctx;
            arg[i].mine = &mine[i];
            arg[i].want = &want[i];
            arg[i].which = i;
            arg[i].rounds = rounds;
            arg[i].bad = 0;
        }
        for (i = 0; i < 2; i++) KT_CHECK(pthread_create(&th[i], NULL, tw_thread, &arg[i]) == 0);
        for (i = 0; i < 2; i++) {
            pthread_join(th[i], NULL);
            KT_CHECK(arg[i].bad == 0, "user thread %d: %d of %d rounds failed or differed (%d pool "
                     "threads)", i, arg[i].bad, rounds, threads);
        }
    }
}

KT_MAIN()
