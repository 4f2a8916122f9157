/* gen_da_check.c -- decode-attention instances written by `kern_gen.py
 * decode_attention` (mk/gen.mk: da_a f32 with GQA, 3 new rows and
 * 64-row splits; da_b bf16 q over an i8 cache with row scales, Dv != D,
 * the [B, Hkv, Lmax, D] layout and i64 lengths; da_c f32 q over an f16
 * cache in that layout, 256-row splits; da_d bf16 q and cache, 512-row
 * splits): against kern_decode_attention on the same tensors (views with
 * the instance's strides) within 2e-6 of the output's largest magnitude
 * (bf16 y: plus one bf16 ulp of the value, the output rounding); every
 * ISA level and 2 threads bit for bit with the scalar twin at one; k_lens
 * from 0 (nothing visible: zeros) to Lmax; bad lengths and NULLs: the
 * status, y untouched. */
#include "kern.h"
#include "kt.h"
#define DA_A_IMPLEMENTATION
#include "da_a.h"
#define DA_B_IMPLEMENTATION
#include "da_b.h"
#define DA_C_IMPLEMENTATION
#include "da_c.h"
#define DA_D_IMPLEMENTATION
#include "da_d.h"

typedef kern_status (*gen_da_fn)(kern_ctx *, const void *, const void *, const void *, const void *,
                                 const float *, const float *, void *, float *);

/* each instance behind one signature */
#define GEN_DA_WRAP(name, QT, CT, LT)                                                               \
    static kern_status name##_any(kern_ctx *c, const void *q, const void *k, const void *v,         \
                                  const void *l, const float *ks, const float *vs, void *y,         \
                                  float *sc) {                                                      \
        return name##_run(c, (const QT *)q, (const CT *)k, (const CT *)v, (const LT *)l, ks, vs,    \
                          (QT *)y, sc);                                                             \
    }
GEN_DA_WRAP(da_a, float, float, int32_t)
GEN_DA_WRAP(da_b, uint16_t, int8_t, int64_t)
GEN_DA_WRAP(da_c, float, uint16_t, int32_t)
GEN_DA_WRAP(da_d, uint16_t, uint16_t, int32_t)

typedef struct gen_da_case {
    const char *what;
    int64_t B, LQ, H, HKV, D, DV, LMAX, scratch;
    kern_dtype qdt, cdt, ldt;
    int bhsd;      /* caches [B, Hkv, Lmax, D] */
    float scale;   /* 0: 1/sqrt(D) */
    gen_da_fn run;
} gen_da_case;

static void gen_da_view(kern_tensor *t, void *p, kern_dtype dt, int nd, const int64_t *sh, const int64_t *st) {
    int i;
    memset(t, 0, sizeof *t);
    t->data = p;
    t->dtype = dt;
    t->ndim = nd;
    for (i = 0; i < nd; i++) {
        t->shape[i] = sh[i];
        t->stride[i] = st[i];
    }
}

static void gen_da_check(const gen_da_case *c) {
    kt_rng r = kt_rng_make((uint64_t)(c->H * 7 + c->LMAX * 131 + c->D));
    const int64_t B = c->B, LQ = c->LQ, H = c->H, HKV = c->HKV, D = c->D, DV = c->DV, LM = c->LMAX;
    const int64_t nq = B * LQ * H * D, ny = B * LQ * H * DV, nk = B * LM * HKV * D, nv = B * LM * HKV * DV;
    const int64_t ns = B * LM * HKV;
    const size_t qe = kern_dtype_size(c->qdt), ce = kern_dtype_size(c->cdt), le = kern_dtype_size(c->ldt);
    const int i8 = c->cdt == KERN_I8;
    void *q = kt_alloc((size_t)nq * qe, "q"), *k = kt_alloc((size_t)nk * ce, "k");
    void *v = kt_alloc((size_t)nv * ce, "v"), *y0 = kt_alloc((size_t)ny * qe, "y0");
    void *y1 = kt_alloc((size_t)ny * qe, "y1"), *ref = kt_alloc((size_t)ny * qe, "ref");
    void *lens = kt_alloc((size_t)B * le, "lens");
    float *ks = (float *)kt_alloc((size_t)ns * 4, "ks"), *vs = (float *)kt_alloc((size_t)ns * 4, "vs");
    float *scr = (float *)kt_alloc((size_t)c->scratch * 4, "scratch");
    kern_tensor tq, tk, tv, tl, ty, tks, tvs;
    kern_decode_attention_params dp;
    int64_t i, b, round;
    const int64_t shq[4] = {B, LQ, H, D}, stq[4] = {LQ * H * D, H * D, D, 1};
    const int64_t shy[4] = {B, LQ, H, DV}, sty[4] = {LQ * H * DV, H * DV, DV, 1};
    const int64_t shk[4] = {B, LM, HKV, D}, shv[4] = {B, LM, HKV, DV}, shs[3] = {B, LM, HKV};
    int64_t stk[4], stv[4], sts[3], shl[1] = {B}, stl[1] = {1};
    if (c->bhsd) {
        const int64_t a[4] = {HKV * LM * D, D, LM * D, 1}, bb[4] = {HKV * LM * DV, DV, LM * DV, 1};
        const int64_t s3[3] = {HKV * LM, 1, LM};
        memcpy(stk, a, sizeof a);
        memcpy(stv, bb, sizeof bb);
        memcpy(sts, s3, sizeof s3);
    } else {
        const int64_t a[4] = {LM * HKV * D, HKV * D, D, 1}, bb[4] = {LM * HKV * DV, HKV * DV, DV, 1};
        const int64_t s3[3] = {LM * HKV, HKV, 1};
        memcpy(stk, a, sizeof a);
        memcpy(stv, bb, sizeof bb);
        memcpy(sts, s3, sizeof s3);
    }
    kt_context("%s", c->what);
    kt_fill_normal(&r, q, c->qdt, nq, 1.0);
    if (i8) {
        for (i = 0; i < nk; i++) ((int8_t *)k)[i] = (int8_t)kt_randint(&r, -128, 128);
        for (i = 0; i < nv; i++) ((int8_t *)v)[i] = (int8_t)kt_randint(&r, -128, 128);
        for (i = 0; i < ns; i++) ks[i] = (float)kt_uniform(&r, 0.001, 0.03);
        for (i = 0; i < ns; i++) vs[i] = (float)kt_uniform(&r, 0.001, 0.03);
    } else {
        kt_fill_normal(&r, k, c->cdt, nk, 1.0);
        kt_fill_normal(&r, v, c->cdt, nv, 1.0);
    }
    gen_da_view(&tq, q, c->qdt, 4, shq, stq);
    gen_da_view(&tk, k, c->cdt, 4, shk, stk);
    gen_da_view(&tv, v, c->cdt, 4, shv, stv);
    gen_da_view(&tl, lens, c->ldt, 1, shl, stl);
    gen_da_view(&ty, ref, c->qdt, 4, shy, sty);
    gen_da_view(&tks, ks, KERN_F32, 3, shs, sts);
    gen_da_view(&tvs, vs, KERN_F32, 3, shs, sts);
    memset(&dp, 0, sizeof dp);
    dp.scale = c->scale;
    if (i8) {
        dp.k_scale = &tks;
        dp.v_scale = &tvs;
    }
    for (round = 0; round < 3; round++) {
        double mx = 0;
        int64_t bad = -1;
        for (b = 0; b < B; b++) {
            /* round 0: full caches (every split and chunk); then the
             * first sequence sees nothing or fewer rows than Lq, the others
             * random lengths */
            int64_t n = round == 0 ? LM : b == 0 ? (round == 1 ? 0 : LQ - 1) : kt_randint(&r, 1, LM + 1);
            kt_set(lens, c->ldt, b, (double)n);
        }
        KT_OK(kern_decode_attention(kt_ctx(1, KERN_ISA_SCALAR), &tq, &tk, &tv, &tl, &ty, &dp));
        KT_OK(c->run(kt_ctx(1, KERN_ISA_SCALAR), q, k, v, lens, i8 ? ks : NULL, i8 ? vs : NULL, y0, scr));
        {
            KT_FOR_EACH_ISA(isa, ctx, 1) {
                int t;
                for (t = 1; t <= 2; t++) {
                    kern_ctx *cx = t == 1 ? ctx : kt_ctx(2, isa);
                    memset(y1, 0xA5, (size_t)ny * qe);
                    KT_OK(c->run(cx, q, k, v, lens, i8 ? ks : NULL, i8 ? vs : NULL, y1, scr));
                    KT_CHECK(memcmp(y0, y1, (size_t)ny * qe) == 0, "%s round %lld: %s at %d threads "
                             "differs from the scalar twin", c->what, (long long)round, kern_isa_name(isa), t);
                }
            }
        }
        for (i = 0; i < ny; i++) {
            const double a = fabs(kt_get(ref, c->qdt, i));
            mx = a > mx ? a : mx;
        }
        for (i = 0; i < ny && bad < 0; i++) {
            const double want = kt_get(ref, c->qdt, i), got = kt_get(y0, c->qdt, i);
            const double tol = 2e-6 * mx + (c->qdt == KERN_BF16 ? ldexp(fabs(want), -7) : 0.0);
            if (!(fabs(got - want) <= tol)) bad = i;
        }
        KT_CHECK(bad < 0, "%s round %lld: y[%lld] = %.9g, kern_decode_attention %.9g", c->what,
                 (long long)round, (long long)bad, bad < 0 ? 0.0 : kt_get(y0, c->qdt, bad),
                 bad < 0 ? 0.0 : kt_get(ref, c->qdt, bad));
    }
    /* bad input: the status, y untouched */
    memset(y1, 0x5A, (size_t)ny * qe);
    memcpy(y0, y1, (size_t)ny * qe);
    kt_set(lens, c->ldt, B - 1, -1.0);
    KT_ERROR(c->run(kt_ctx(2, KERN_ISA_AUTO), q, k, v, lens, i8 ? ks : NULL, i8 ? vs : NULL, y1, scr),
             KERN_ERR_INDEX, "is negative");
    kt_set(lens, c->ldt, B - 1, (double)(LM + 1));
    KT_ERROR(c->run(kt_ctx(2, KERN_ISA_AUTO), q, k, v, lens, i8 ? ks : NULL, i8 ? vs : NULL, y1, scr),
             KERN_ERR_SHAPE, "past the cache");
    kt_set(lens, c->ldt, B - 1, (double)LM);
    KT_ERROR(c->run(kt_ctx(1, KERN_ISA_AUTO), NULL, k, v, lens, i8 ? ks : NULL, i8 ? vs : NULL, y1, scr),
             KERN_ERR_ARG, "NULL");
    KT_ERROR(c->run(kt_ctx(1, KERN_ISA_AUTO), q, k, v, lens, i8 ? ks : NULL, i8 ? vs : NULL, y1, NULL),
             KERN_ERR_ARG, "NULL");
    if (i8)
        KT_ERROR(c->run(kt_ctx(1, KERN_ISA_AUTO), q, k, v, lens, NULL, vs, y1, scr), KERN_ERR_ARG, "k_scale");
    KT_CHECK(memcmp(y0, y1, (size_t)ny * qe) == 0, "%s: an error wrote y", c->what);
    kt_free(q);
    kt_free(k);
    kt_free(v);
    kt_free(y0);
    kt_free(y1);
    kt_free(ref);
    kt_free(lens);
    kt_free(ks);
    kt_free(vs);
    kt_free(scr);
}

KT_TEST(gen_da_instances) {
    static const gen_da_case cases[] = {
        {"da_a", 2, 3, 8, 2, 24, 24, 300, DA_A_SCRATCH_FLOATS, KERN_F32, KERN_F32, KERN_I32, 0, 0.0f,
         da_a_any},
        {"da_b", 1, 1, 4, 4, 32, 16, 200, DA_B_SCRATCH_FLOATS, KERN_BF16, KERN_I8, KERN_I64, 1, 0.3f,
         da_b_any},
        {"da_c", 3, 2, 6, 3, 40, 40, 150, DA_C_SCRATCH_FLOATS, KERN_F32, KERN_F16, KERN_I32, 1, 0.0f,
         da_c_any},
        {"da_d", 2, 1, 16, 2, 64, 64, 520, DA_D_SCRATCH_FLOATS, KERN_BF16, KERN_BF16, KERN_I32, 0, 0.0f,
         da_d_any},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) gen_da_check(&cases[i]);
}

KT_MAIN()
