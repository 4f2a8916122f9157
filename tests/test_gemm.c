/* test_gemm.c — kern_gemm against a double-accumulating reference. */
#define KERN_IMPLEMENTATION
#include "kern_gemm.h"
#include "kt.h"

/* ------------------------------------------------------------ reference */

static double ref_act(int act, double x) {
    switch (act) {
    case KERN_ACT_RELU: return x < 0 ? 0 : x;
    case KERN_ACT_GELU: return 0.5 * x * erfc(-x / sqrt(2.0));
    case KERN_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case KERN_ACT_SILU: return x / (1.0 + exp(-x));
    default: return x;
    }
}

/* Pack params with trans_b = tb. */
static const kern_gemm_pack_params *pk(int tb) {
    static kern_gemm_pack_params p[2] = {{0}, {1}};
    return &p[tb != 0];
}

/* A 2-D strided operand. */
typedef struct mat {
    void *p;
    kern_dtype dt;
    int64_t rs, cs;
} mat;

static double mget(const mat *m, int64_t i, int64_t j) { return kt_get(m->p, m->dt, i * m->rs + j * m->cs); }

/* out[i*N + j] = out_scale * (act(alpha sum_k opA(i,k) opB(k,j) + beta C(i,j) + bias) + res) */
static void ref_gemm(int64_t M, int64_t N, int64_t K, const mat *A, const mat *B, const mat *C,
                     const kern_gemm_params *p, const mat *bias, const mat *res, double *out) {
    double alpha = p->alpha_set ? p->alpha : 1.0, scale = p->epilogue.out_scale != 0 ? p->epilogue.out_scale : 1.0;
    int64_t i, j, k;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double s = 0, x;
            for (k = 0; k < K; k++) s += mget(A, i, k) * mget(B, k, j);
            x = alpha * s;
            if (p->beta != 0) x += (double)p->beta * mget(C, i, j);
            if (bias) x += p->epilogue.bias_per_row ? mget(bias, i, 0) : mget(bias, j, 0);
            x = ref_act(p->epilogue.act, x);
            if (res) x += mget(res, i, j);
            out[i * N + j] = x * scale;
        }
}

static kt_tol_t gemm_tol(kern_dtype c_dt, int64_t K) {
    return kt_tol_scaled(c_dt, 1.0 + sqrt((double)K) / 4.0);
}

/* ---------------------------------------------------------- one 2-D case */

typedef struct gcase {
    int64_t M, N, K;
    int ta, tb;
    kern_dtype in_dt, c_dt;
    int64_t pad_a, pad_b, pad_c; /* extra elements per row */
    int c_colmajor;              /* C stored transposed (unit row stride) */
    int c_gen;                   /* C with both strides non-unit */
    int use_bias, bias_per_row, bias_stride;
    kern_dtype bias_dt;
    int use_res;
    kern_dtype res_dt;
    int res_is_c; /* epilogue.residual = c itself (C0 read as the residual) */
    int act;
    int alpha_set;
    float alpha, beta, out_scale;
    int packed; /* 1: prepack B with the same ctx */
} gcase;

static gcase gc_default(int64_t M, int64_t N, int64_t K) {
    gcase g;
    memset(&g, 0, sizeof g);
    g.M = M; g.N = N; g.K = K;
    g.in_dt = KERN_F32; g.c_dt = KERN_F32;
    g.bias_dt = KERN_F32; g.res_dt = KERN_F32;
    g.bias_stride = 1;
    return g;
}

/* Runs g on ctx; checks against the reference; optionally returns C bytes
 * (f32 view of the result, M*N) for determinism checks. */
static void run_case(kern_ctx *ctx, const gcase *g, float *result_out) {
    int64_t M = g->M, N = g->N, K = g->K;
    size_t ies = kern_dtype_size(g->in_dt), ces = kern_dtype_size(g->c_dt);
    /* storage shapes */
    int64_t ar = g->ta ? K : M, ac = g->ta ? M : K;
    int64_t br = g->tb ? N : K, bc = g->tb ? K : N;
    int64_t lda = ac + g->pad_a, ldb = bc + g->pad_b;
    int64_t a_n = ar * lda + 1, b_n = br * ldb + 1, c_n;
    int64_t c_rs, c_cs;
    void *A, *B, *C, *C0, *bias = NULL, *res = NULL;
    double *want;
    kern_tensor ta, tb, tc, tbias, tres;
    kern_gemm_params p;
    kern_gemm_packed_b *pb = NULL;
    mat mA, mB, mC0, mbias, mres;
    kt_rng r = kt_rng_make((uint64_t)(M * 1000003 + N * 1009 + K * 7 + g->ta * 2 + g->tb));
    int64_t i, j;
    if (g->c_colmajor) { c_rs = 1; c_cs = M + g->pad_c; c_n = N * c_cs + 1; }
    else if (g->c_gen) { c_rs = 2 * N + 3; c_cs = 2; c_n = M * c_rs + 1; }
    else { c_rs = N + g->pad_c; c_cs = 1; c_n = M * c_rs + 1; }
    A = kt_alloc((size_t)a_n * ies, "A");
    B = kt_alloc((size_t)b_n * ies, "B");
    C = kt_alloc((size_t)c_n * ces, "C");
    C0 = kt_alloc((size_t)c_n * ces, "C0");
    want = (double *)malloc(sizeof(double) * (size_t)(M * N + 1));
    kt_fill_normal(&r, A, g->in_dt, a_n, 1.0);
    kt_fill_normal(&r, B, g->in_dt, b_n, 1.0 / sqrt((double)(K > 0 ? K : 1)));
    if (g->beta != 0 || g->res_is_c) kt_fill_normal(&r, C0, g->c_dt, c_n, 1.0);
    else kt_poison(C0, (size_t)c_n * ces); /* beta = 0 must not read C */
    memcpy(C, C0, (size_t)c_n * ces);
    memset(&p, 0, sizeof p);
    p.trans_a = g->ta;
    p.trans_b = g->tb;
    p.alpha_set = g->alpha_set;
    p.alpha = g->alpha;
    p.beta = g->beta;
    p.epilogue.act = (kern_act)g->act;
    p.epilogue.out_scale = g->out_scale;
    {
        int64_t sa[2], sb[2], sc[2], sha[2], shb[2], shc[2];
        sha[0] = ar; sha[1] = ac; sa[0] = lda; sa[1] = 1;
        shb[0] = br; shb[1] = bc; sb[0] = ldb; sb[1] = 1;
        shc[0] = M; shc[1] = N; sc[0] = c_rs; sc[1] = c_cs;
        KT_OK(kern_tensor_init_strided(&ta, A, g->in_dt, 2, sha, sa));
        KT_OK(kern_tensor_init_strided(&tb, B, g->in_dt, 2, shb, sb));
        KT_OK(kern_tensor_init_strided(&tc, C, g->c_dt, 2, shc, sc));
    }
    mA.p = A; mA.dt = g->in_dt; mA.rs = g->ta ? 1 : lda; mA.cs = g->ta ? lda : 1;
    mB.p = B; mB.dt = g->in_dt; mB.rs = g->tb ? 1 : ldb; mB.cs = g->tb ? ldb : 1;
    mC0.p = C0; mC0.dt = g->c_dt; mC0.rs = c_rs; mC0.cs = c_cs;
    if (g->use_bias) {
        int64_t bl = g->bias_per_row ? M : N, st = g->bias_stride;
        size_t bes = kern_dtype_size(g->bias_dt);
        bias = kt_alloc((size_t)(bl * st + 1) * bes, "bias");
        kt_fill_normal(&r, bias, g->bias_dt, bl * st + 1, 1.0);
        KT_OK(kern_tensor_init_strided(&tbias, bias, g->bias_dt, 1, &bl, &st));
        p.epilogue.bias = &tbias;
        p.epilogue.bias_per_row = g->bias_per_row;
        mbias.p = bias; mbias.dt = g->bias_dt; mbias.rs = st; mbias.cs = 0;
    }
    if (g->use_res) {
        /* residual stored transposed with padding (any strides) */
        int64_t shr[2], sr[2];
        size_t res_es = kern_dtype_size(g->res_dt);
        int64_t rn = N * (M + 2) + 1;
        res = kt_alloc((size_t)rn * res_es, "res");
        kt_fill_normal(&r, res, g->res_dt, rn, 1.0);
        shr[0] = M; shr[1] = N; sr[0] = 1; sr[1] = M + 2;
        KT_OK(kern_tensor_init_strided(&tres, res, g->res_dt, 2, shr, sr));
        p.epilogue.residual = &tres;
        mres.p = res; mres.dt = g->res_dt; mres.rs = 1; mres.cs = M + 2;
    }
    if (g->res_is_c) p.epilogue.residual = &tc;
    ref_gemm(M, N, K, &mA, &mB, &mC0, &p, g->use_bias ? &mbias : NULL,
             g->use_res ? &mres : g->res_is_c ? &mC0 : NULL, want);
    if (g->packed) {
        KT_OK(kern_gemm_pack_b(ctx, &tb, &pb, pk(g->tb)));
        p.packed_b = pb;
        KT_OK(kern_gemm(ctx, &ta, NULL, &tc, &p));
    } else {
        KT_OK(kern_gemm(ctx, &ta, &tb, &tc, &p));
    }
    /* compare, element by element with the strided C */
    {
        kt_tol_t tol = gemm_tol(g->c_dt, K);
        int64_t bad = 0;
        for (i = 0; i < M && bad < 3; i++)
            for (j = 0; j < N && bad < 3; j++) {
                double got = kt_get(C, g->c_dt, i * c_rs + j * c_cs), w = want[i * N + j];
                int ok = (isnan(w) && isnan(got)) || fabs(got - w) <= tol.atol + tol.rtol * fabs(w);
                if (!ok) {
                    KT_CHECK(ok, "C[%lld,%lld] = %.9g, want %.9g", (long long)i, (long long)j, got, w);
                    bad++;
                }
                if (result_out) result_out[i * N + j] = (float)got;
            }
        /* untouched gaps of C (padding) */
        if (!g->c_colmajor && !g->c_gen && g->pad_c)
            for (i = 0; i < M; i++)
                for (j = N; j < c_rs; j++)
                    KT_CHECK(memcmp((char *)C + (i * c_rs + j) * ces, (char *)C0 + (i * c_rs + j) * ces,
                                    ces) == 0,
                             "padding of C written at [%lld,%lld]", (long long)i, (long long)j);
    }
    kern_gemm_packed_b_free(ctx, pb);
    free(want);
    kt_free(A);
    kt_free(B);
    kt_free(C);
    kt_free(C0);
    kt_free(bias);
    kt_free(res);
}

static const int64_t GRID[] = {1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 257, 512};
#define NGRID ((int)(sizeof GRID / sizeof GRID[0]))

/* Every grid value for M, N and K in turn, the other two dims rotating
 * through small awkward sizes, all four transpose combinations. */
KT_TEST(grid_f32_every_isa) {
    static const int64_t other[] = {1, 5, 13, 33, 70, 17, 3};
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        int v, which;
        for (which = 0; which < 3; which++)
            for (v = 0; v < NGRID; v++) {
                int64_t x = GRID[v], o1 = other[(v + which) % 7], o2 = other[(v * 3 + which + 2) % 7];
                gcase g = gc_default(which == 0 ? x : o1, which == 1 ? x : (which == 0 ? o1 : o2),
                                     which == 2 ? x : o2);
#ifdef KT_SANITIZER
                if (x > 200 && isa == KERN_ISA_SCALAR) continue;
#endif
                g.ta = (v + which) & 1;
                g.tb = ((v + which) >> 1) & 1;
                kt_context("isa=%s M=%lld N=%lld K=%lld ta=%d tb=%d", kern_isa_name(isa),
                           (long long)g.M, (long long)g.N, (long long)g.K, g.ta, g.tb);
                run_case(ctx, &g, NULL);
            }
    }
}

/* Shapes that cross MR/NR/KC block boundaries in all dims, and (M > 512,
 * row-major B) the general packed path: several k passes, A read in place
 * (N <= 256), A packed in two 2040-row chunks (M > 2040). */
KT_TEST(block_edges) {
    static const int64_t sh[][3] = {{129, 257, 65}, {65, 63, 700},  {257, 129, 321}, {12, 32, 320},
                                    {13, 33, 641},  {100, 300, 1000}, {530, 300, 1100}, {600, 70, 1030},
                                    {2100, 300, 40}, {2100, 40, 30}};
    int s;
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        for (s = 0; s < 10; s++) {
            gcase g = gc_default(sh[s][0], sh[s][1], sh[s][2]);
#ifdef KT_SANITIZER
            if ((s == 5 || s == 6) && isa == KERN_ISA_SCALAR) continue;
#endif
            g.ta = s < 6 ? s & 1 : s == 7;
            g.tb = s < 6 ? (s >> 1) & 1 : 0;
            g.beta = s == 6 ? 1.0f : 0.0f;
            g.use_bias = s == 8;
            kt_context("isa=%s M=%lld N=%lld K=%lld", kern_isa_name(isa), (long long)g.M,
                       (long long)g.N, (long long)g.K);
            run_case(ctx, &g, NULL);
        }
    }
}

/* Every input dtype x output dtype, with a K that takes several passes. */
KT_TEST(dtypes) {
    static const kern_dtype dts[] = {KERN_F32, KERN_BF16, KERN_F16};
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        int x, y, s;
        for (x = 0; x < 3; x++)
            for (y = 0; y < 3; y++)
                for (s = 0; s < 3; s++) {
                    static const int64_t sh[][3] = {{29, 70, 700}, {5, 45, 333}, {40, 33, 17}};
                    gcase g = gc_default(sh[s][0], sh[s][1], sh[s][2]);
                    g.in_dt = dts[x];
                    g.c_dt = dts[y];
                    g.tb = s == 1;
                    g.ta = s == 2;
                    g.beta = s == 0 ? 0.5f : 0.0f;
                    kt_context("isa=%s in=%s c=%s M=%lld N=%lld K=%lld", kern_isa_name(isa),
                               kern_dtype_name(g.in_dt), kern_dtype_name(g.c_dt), (long long)g.M,
                               (long long)g.N, (long long)g.K);
                    run_case(ctx, &g, NULL);
                }
    }
}

/* Every epilogue, alone and combined, on the general and small-M paths. */
KT_TEST(epilogues) {
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        int act, combo, s;
        for (s = 0; s < 2; s++)
            for (act = 0; act < KERN_ACT_COUNT; act++)
                for (combo = 0; combo < 6; combo++) {
                    gcase g = s == 0 ? gc_default(37, 45, 70) : gc_default(3, 77, 400);
                    g.act = act;
                    g.use_bias = combo == 1 || combo >= 4;
                    g.bias_per_row = combo == 4;
                    g.bias_stride = combo == 5 ? 3 : 1;
                    g.bias_dt = combo == 5 ? KERN_BF16 : KERN_F32;
                    g.use_res = combo == 2 || combo >= 4;
                    g.res_dt = combo == 4 ? KERN_F16 : KERN_F32;
                    if (combo == 3 || combo == 5) {
                        g.alpha_set = 1;
                        g.alpha = -1.5f;
                        g.beta = 0.75f;
                        g.out_scale = 0.5f;
                    }
                    if (combo == 5) g.c_dt = KERN_BF16;
                    kt_context("isa=%s act=%d combo=%d M=%lld", kern_isa_name(isa), act, combo,
                               (long long)g.M);
                    run_case(ctx, &g, NULL);
                }
    }
}

/* Epilogues on the general (packed) path with several k passes, M above
 * the AVX2 streaming limit: the shape of a transformer linear (a [N,K]
 * weight, as given or prepacked; f32 and f16 inputs; A as given and
 * transposed), every activation with bias and residual. */
KT_TEST(epilogues_general_multi_pass) {
    static const int64_t sh[][3] = {{140, 70, 600}, {257, 45, 530}};
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        int s, act;
        for (s = 0; s < 2; s++)
            for (act = 0; act < KERN_ACT_COUNT; act++) {
                gcase g = gc_default(sh[s][0], sh[s][1], sh[s][2]);
                g.tb = 1;
                g.ta = act == 2;
                g.act = act;
                g.use_bias = 1;
                g.use_res = 1;
                g.packed = act & 1;
                g.in_dt = act == 3 ? KERN_F16 : KERN_F32;
                g.c_dt = act == 4 ? KERN_BF16 : KERN_F32;
                g.pad_a = s;
                kt_context("isa=%s act=%d M=%lld N=%lld K=%lld", kern_isa_name(isa), act,
                           (long long)g.M, (long long)g.N, (long long)g.K);
                run_case(ctx, &g, NULL);
                if (act == 1) run_case(kt_ctx(2, isa), &g, NULL);
            }
    }
}

/* The residual c itself (c = act(alpha A B + beta c + bias) + c): one k
 * pass and several (the partial sums then wait in scratch), the general
 * and small-M paths, bf16 and transposed C, with beta, 1 and 2 threads. */
KT_TEST(residual_is_c) {
    static const int64_t sh[][3] = {{37, 45, 70}, {40, 70, 1100}, {3, 77, 400}, {9, 40, 700}, {130, 33, 600}};
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        int s, v;
        for (s = 0; s < 5; s++)
            for (v = 0; v < 4; v++) {
                gcase g = gc_default(sh[s][0], sh[s][1], sh[s][2]);
                g.res_is_c = 1;
                g.use_bias = 1;
                g.act = v == 0 ? KERN_ACT_GELU : v == 1 ? KERN_ACT_SILU : KERN_ACT_NONE;
                g.beta = v == 1 ? 0.5f : 0.0f;
                g.c_dt = v == 2 ? KERN_BF16 : KERN_F32;
                g.c_colmajor = v == 3;
                g.out_scale = v == 3 ? 2.0f : 0.0f;
                g.tb = s & 1;
                kt_context("isa=%s M=%lld N=%lld K=%lld v=%d", kern_isa_name(isa), (long long)g.M,
                           (long long)g.N, (long long)g.K, v);
                run_case(ctx, &g, NULL);
                run_case(kt_ctx(2, isa), &g, NULL);
            }
    }
}

/* alpha = 0 with the flag, beta with NaN-poisoned C, out_scale. */
KT_TEST(alpha_beta) {
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        static const float alphas[] = {0.0f, 1.0f, -2.0f}, betas[] = {0.0f, 1.0f, -0.5f};
        int x, y;
        for (x = 0; x < 3; x++)
            for (y = 0; y < 3; y++) {
                gcase g = gc_default(33, 65, 400);
                g.alpha_set = 1;
                g.alpha = alphas[x];
                g.beta = betas[y];
                g.c_dt = y == 2 ? KERN_F16 : KERN_F32;
                kt_context("isa=%s alpha=%g beta=%g", kern_isa_name(isa), g.alpha, g.beta);
                run_case(ctx, &g, NULL);
                g.M = 4; /* small-M path */
                run_case(ctx, &g, NULL);
            }
    }
}

/* Padded leading dims, transposed C (computed as C^T), C with no unit
 * stride, a strided bias and a transposed residual. */
KT_TEST(strides) {
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        int s;
        for (s = 0; s < 8; s++) {
            gcase g = gc_default(s & 4 ? 9 : 47, 53, s & 2 ? 700 : 31);
            g.pad_a = 3;
            g.pad_b = 5;
            g.pad_c = 7;
            g.ta = s & 1;
            g.tb = (s >> 1) & 1;
            g.c_colmajor = s == 1 || s == 6;
            g.c_gen = s == 3 || s == 4;
            g.use_bias = 1;
            g.bias_per_row = s & 1;
            g.bias_stride = 2;
            g.use_res = 1;
            g.act = KERN_ACT_SILU;
            g.beta = s == 6 ? 1.0f : 0.0f;
            g.c_dt = s == 4 ? KERN_BF16 : KERN_F32;
            kt_context("isa=%s s=%d", kern_isa_name(isa), s);
            run_case(ctx, &g, NULL);
        }
    }
}

/* Packed B against the reference: every dtype, both layouts, small and
 * large M, N across panel edges, K across passes. */
KT_TEST(packed_b) {
    static const kern_dtype dts[] = {KERN_F32, KERN_BF16, KERN_F16};
    static const int64_t Ms[] = {1, 2, 3, 5, 8, 9, 16, 17, 100};
    static const int64_t Ns[] = {1, 31, 32, 33, 100};
    static const int64_t Ks[] = {1, 7, 300, 701};
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        int d, mi, ni, ki = 0;
        for (d = 0; d < 3; d++)
            for (mi = 0; mi < 9; mi++)
                for (ni = 0; ni < 5; ni++) {
                    gcase g = gc_default(Ms[mi], Ns[ni], Ks[ki++ % 4]);
                    g.in_dt = dts[d];
                    g.tb = (mi + ni) & 1;
                    g.packed = 1;
                    g.use_bias = ni == 2;
                    g.act = ni == 3 ? KERN_ACT_GELU_TANH : 0;
                    g.beta = mi == 4 ? 1.0f : 0.0f;
                    kt_context("isa=%s dt=%s M=%lld N=%lld K=%lld tb=%d", kern_isa_name(isa),
                               kern_dtype_name(g.in_dt), (long long)g.M, (long long)g.N,
                               (long long)g.K, g.tb);
                    run_case(ctx, &g, NULL);
                }
    }
}

/* Small-M with a row-major f32 B streamed in place (no packing), N not a
 * multiple of 32 (the last columns go through a padded panel). */
KT_TEST(small_m_streaming) {
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        int64_t m;
        for (m = 1; m <= 17; m++) {
            gcase g = gc_default(m, 32 * (m % 3) + 37, m * 41 + 3);
            g.pad_b = 11;
            g.ta = m == 7;
            g.use_bias = m & 1;
            g.act = m % KERN_ACT_COUNT;
            kt_context("isa=%s M=%lld N=%lld K=%lld", kern_isa_name(isa), (long long)g.M,
                       (long long)g.N, (long long)g.K);
            run_case(ctx, &g, NULL);
        }
    }
}

/* In the streaming path (B row-major [K, N] read in place, or prepacked)
 * each output element is one k-ordered FMA chain carried across k chunks
 * whatever kernel computes it, so an f32 row gives the same bits at every
 * M there: rows of M = 1..16 calls (the small-M kernels) against the same
 * rows of an M = 100 call (the main kernel, still streaming on every
 * level), K across several k chunks. */
KT_TEST(small_m_rows_match) {
    const int64_t MB = 100, N = 70, K = 600;
    float *A = (float *)kt_alloc(sizeof(float) * (size_t)(MB * K), "A");
    float *B = (float *)kt_alloc(sizeof(float) * (size_t)(K * N), "B");
    float *C0 = (float *)kt_alloc(sizeof(float) * (size_t)(MB * N), "C0");
    float *C1 = (float *)kt_alloc(sizeof(float) * (size_t)(16 * N), "C1");
    kt_rng r = kt_rng_make(77);
    kt_fill_normal(&r, A, KERN_F32, MB * K, 1.0);
    kt_fill_normal(&r, B, KERN_F32, K * N, 0.1);
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        int lay;
        for (lay = 0; lay < 2; lay++) { /* B as given, prepacked */
            kern_gemm_params p;
            kern_gemm_packed_b *pb = NULL;
            kern_tensor tb = kern_tensor_2d(B, KERN_F32, K, N);
            kern_tensor ta = kern_tensor_2d(A, KERN_F32, MB, K), tc = kern_tensor_2d(C0, KERN_F32, MB, N);
            int64_t m;
            memset(&p, 0, sizeof p);
            if (lay == 1) {
                KT_OK(kern_gemm_pack_b(ctx, &tb, &pb, NULL));
                p.packed_b = pb;
            }
            KT_OK(kern_gemm(ctx, &ta, lay ? NULL : &tb, &tc, &p));
            for (m = 1; m <= 16; m++) {
                int64_t row0 = (m * 37) % (MB - m);
                kern_tensor sa = kern_tensor_2d(A + row0 * K, KERN_F32, m, K);
                kern_tensor sc = kern_tensor_2d(C1, KERN_F32, m, N);
                kt_context("isa=%s layout=%d M=%lld", kern_isa_name(isa), lay, (long long)m);
                KT_OK(kern_gemm(ctx, &sa, lay ? NULL : &tb, &sc, &p));
                KT_CHECK(!memcmp(C1, C0 + row0 * N, sizeof(float) * (size_t)(m * N)),
                         "rows differ from the M = 100 call's");
            }
            kern_gemm_packed_b_free(ctx, pb);
        }
    }
    kt_free(A); kt_free(B); kt_free(C0); kt_free(C1);
}

/* A bf16 B at M <= 16: read in place (rows) or from its prepacked pair
 * panels by the bf16 small-M kernels on AVX2, without converting B on each
 * call. The f32 result has the bits of the same GEMM on the f32 values
 * (f32 A and B, streamed): each element is the same k-ordered FMA chain.
 * Other levels take their own bf16 paths: checked against the f32 result
 * within tolerance. N with a partial last column group, K odd (the pair
 * panels' last word half empty) and across k chunks, a padded row stride. */
KT_TEST(bf16_small_m_streaming) {
    /* K odd: the pair tables pack such a B; K even: they read its rows in
     * place (kern__gemm_br_*), the same bits as against the packed B */
    static const int64_t Ks[2] = {601, 600};
    /* M above 16: the main kernel's row twin where the class has one */
    static const int64_t Ms[19] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 37, 40};
    const int64_t N = 75, LDB = 80, KM = 601, MM = 40;
    uint16_t *A = (uint16_t *)kt_alloc(sizeof(uint16_t) * (size_t)(MM * KM), "A");
    uint16_t *B = (uint16_t *)kt_alloc(sizeof(uint16_t) * (size_t)(KM * LDB), "B");
    float *Af = (float *)kt_alloc(sizeof(float) * (size_t)(MM * KM), "Af");
    float *Bf = (float *)kt_alloc(sizeof(float) * (size_t)(KM * N), "Bf");
    float *C0 = (float *)kt_alloc(sizeof(float) * (size_t)(MM * N), "C0");
    float *C1 = (float *)kt_alloc(sizeof(float) * (size_t)(MM * N), "C1");
    float *C2 = (float *)kt_alloc(sizeof(float) * (size_t)(MM * N), "C2");
    kt_rng r = kt_rng_make(78);
    int64_t i, k, n;
    int ki;
    kt_fill_normal(&r, A, KERN_BF16, MM * KM, 1.0);
    kt_fill_normal(&r, B, KERN_BF16, KM * LDB, 0.1);
    for (ki = 0; ki < 2; ki++) {
        const int64_t K = Ks[ki];
        for (i = 0; i < MM; i++)
            for (k = 0; k < K; k++) Af[i * K + k] = kern_bf16_to_f32(A[i * K + k]);
        for (k = 0; k < K; k++)
            for (n = 0; n < N; n++) Bf[k * N + n] = kern_bf16_to_f32(B[k * LDB + n]);
        KT_FOR_EACH_ISA(isa, ctx, 2) {
            kern_tensor tb = kern_tensor_2d(B, KERN_BF16, K, N), tbf = kern_tensor_2d(Bf, KERN_F32, K, N);
            kern_gemm_packed_b *pb = NULL;
            int64_t m;
            int mi;
            /* the f32 tables' row kernels widen B exactly: the f32 bits */
            const kern__gemm_fns *fb = kern__gemm_fns_for(kern_ctx_isa(ctx), kern_ctx_uarch(ctx), KERN_BF16);
            int exact = fb->brows && fb->fmt == KERN__GEMM_FMT_F32;
            tb.stride[0] = LDB;
            KT_OK(kern_gemm_pack_b(ctx, &tb, &pb, NULL));
            for (mi = 0; mi < 19; mi++) {
                int lay;
                m = Ms[mi];
                for (lay = 0; lay < 2; lay++) {
                    kern_tensor ta = kern_tensor_2d(A, KERN_BF16, m, K), taf = kern_tensor_2d(Af, KERN_F32, m, K);
                    kern_tensor tc0 = kern_tensor_2d(C0, KERN_F32, m, N);
                    kern_tensor tc1 = kern_tensor_2d(lay ? C2 : C1, KERN_F32, m, N);
                    kern_gemm_params p;
                    memset(&p, 0, sizeof p);
                    kt_context("isa=%s K=%lld %s M=%lld", kern_isa_name(isa), (long long)K,
                               lay ? "prepacked" : "rows", (long long)m);
                    KT_OK(kern_gemm(ctx, &taf, &tbf, &tc0, &p));
                    p.packed_b = lay ? pb : NULL;
                    KT_OK(kern_gemm(ctx, &ta, lay ? NULL : &tb, &tc1, &p));
                    /* a prepacked B in pairs: AVX2's p kernels widen it
                     * exactly too, AVX-512 keeps the pair kernels; above
                     * 16 rows only a row twin of the main kernel keeps
                     * the f32 path's k pieces */
                    if (exact && (m <= 16 || (!lay && fb->brows_main)) &&
                        (!lay || isa == KERN_ISA_AVX2 || isa == KERN_ISA_AVX2_VNNI)) {
                        KT_CHECK(!memcmp(C0, lay ? C2 : C1, sizeof(float) * (size_t)(m * N)),
                                 "bits differ from f32");
                    } else {
                        double *w = (double *)malloc(sizeof(double) * (size_t)(m * N));
                        for (i = 0; i < m * N; i++) w[i] = C0[i];
                        kt_assert_close("bf16 vs f32", lay ? C2 : C1, KERN_F32, w, m * N,
                                        gemm_tol(KERN_F32, K));
                        free(w);
                    }
                }
                if (K % 2 == 0 && fb->fmt == KERN__GEMM_FMT_PAIR)
                    KT_CHECK(!memcmp(C1, C2, sizeof(float) * (size_t)(m * N)), "rows and prepacked differ");
            }
            kern_gemm_packed_b_free(ctx, pb);
        }
    }
    kt_free(A); kt_free(B); kt_free(Af); kt_free(Bf); kt_free(C0); kt_free(C1); kt_free(C2);
}

/* A weight packed by one ISA level is usable by every other. */
KT_TEST(packed_b_cross_isa) {
    kern_isa isas[KERN_ISA_COUNT];
    int n = kt_isas(isas), x, y, d;
    static const kern_dtype dts[] = {KERN_F32, KERN_BF16, KERN_F16};
    int64_t M = 20, N = 45, K = 130;
    for (d = 0; d < 3; d++) {
        size_t es = kern_dtype_size(dts[d]);
        void *A = kt_alloc((size_t)(M * K) * es, "A"), *B = kt_alloc((size_t)(K * N) * es, "B");
        float *C1 = (float *)kt_alloc((size_t)(M * N) * 4, "C1"), *C2 = (float *)kt_alloc((size_t)(M * N) * 4, "C2");
        kt_rng r = kt_rng_make((uint64_t)d);
        kern_tensor ta = kern_tensor_2d(A, dts[d], M, K), tb = kern_tensor_2d(B, dts[d], K, N);
        kern_tensor tc1 = kern_tensor_2d(C1, KERN_F32, M, N), tc2 = kern_tensor_2d(C2, KERN_F32, M, N);
        kt_fill_normal(&r, A, dts[d], M * K, 1.0);
        kt_fill_normal(&r, B, dts[d], K * N, 0.1);
        for (x = 0; x < n; x++) {
            kern_gemm_packed_b *pb = NULL;
            KT_OK(kern_gemm_pack_b(kt_ctx(1, isas[x]), &tb, &pb, pk(0)));
            for (y = 0; y < n; y++) {
                kern_gemm_params p;
                kern_ctx *cy = kt_ctx(1, isas[y]);
                memset(&p, 0, sizeof p);
                kt_context("dt=%s pack=%s run=%s", kern_dtype_name(dts[d]), kern_isa_name(isas[x]),
                           kern_isa_name(isas[y]));
                KT_OK(kern_gemm(cy, &ta, &tb, &tc1, &p));
                p.packed_b = pb;
                KT_OK(kern_gemm(cy, &ta, NULL, &tc2, &p));
                {
                    double *w = (double *)malloc(sizeof(double) * (size_t)(M * N));
                    int64_t i;
                    for (i = 0; i < M * N; i++) w[i] = C1[i];
                    kt_assert_close("packed vs unpacked", C2, KERN_F32, w, M * N, gemm_tol(KERN_F32, K));
                    free(w);
                }
            }
            kern_gemm_packed_b_free(kt_ctx(1, isas[x]), pb);
        }
        kt_free(A); kt_free(B); kt_free(C1); kt_free(C2);
    }
}

/* 1 and 2 threads give the same bits (every path: general with several
 * passes and a bf16 output, small-M, packed, batch-parallel). */
KT_TEST(threads_identical) {
    KT_FOR_EACH_ISA(isa, ctx1, 1) {
        kern_ctx *ctx2 = kt_ctx(2, isa);
        /* the last: M = 1 over more columns than one streaming task takes
         * (the row kernel where the class has one, split by threads) */
        static const int64_t sh[][3] = {{200, 300, 700}, {7, 500, 900}, {64, 64, 64}, {130, 33, 1200},
                                        {530, 100, 1100}, {1, 4133, 150}};
        int s, v;
        for (s = 0; s < 6; s++)
            for (v = 0; v < 3; v++) {
                gcase g = gc_default(sh[s][0], sh[s][1], sh[s][2]);
                float *r1 = (float *)malloc(sizeof(float) * (size_t)(g.M * g.N));
                float *r2 = (float *)malloc(sizeof(float) * (size_t)(g.M * g.N));
#ifdef KT_SANITIZER
                if (isa == KERN_ISA_SCALAR && (s == 0 || s == 4)) { free(r1); free(r2); continue; }
#endif
                g.in_dt = v == 1 ? KERN_BF16 : KERN_F32;
                g.c_dt = v == 2 ? KERN_BF16 : KERN_F32;
                g.packed = v == 1;
                g.use_bias = 1;
                g.act = KERN_ACT_GELU;
                kt_context("isa=%s s=%d v=%d", kern_isa_name(isa), s, v);
                run_case(ctx1, &g, r1);
                run_case(ctx2, &g, r2);
                kt_assert_bytes_equal("1 vs 2 threads", r1, r2, sizeof(float) * (size_t)(g.M * g.N));
                free(r1);
                free(r2);
            }
    }
}

/* A prepacked B wider than the tables' column pass (nc 2048) on the
 * general path (M above every table's streaming bound): one pass spans
 * every column; against the reference, and the same bits at 1 and 2
 * threads. */
KT_TEST(packed_b_wide) {
    KT_FOR_EACH_ISA(isa, ctx1, 1) {
        kern_ctx *ctx2 = kt_ctx(2, isa);
        int v;
        for (v = 0; v < 2; v++) {
            gcase g = gc_default(520, 2080, v ? 24 : 16);
            float *r1 = (float *)malloc(sizeof(float) * (size_t)(g.M * g.N));
            float *r2 = (float *)malloc(sizeof(float) * (size_t)(g.M * g.N));
            g.in_dt = v ? KERN_BF16 : KERN_F32;
            g.packed = 1;
            g.use_bias = 1;
            kt_context("isa=%s v=%d", kern_isa_name(isa), v);
            run_case(ctx1, &g, r1);
            run_case(ctx2, &g, r2);
            kt_assert_bytes_equal("1 vs 2 threads", r1, r2, sizeof(float) * (size_t)(g.M * g.N));
            free(r1);
            free(r2);
        }
    }
}

/* Batched: a [2,3,M,K] x b [3,K,N] (broadcast over dim 0), b [1,K,N]
 * (size-1 broadcast), many small items (batch-parallel mode), a packed B
 * for every batch, and a batched residual. */
static void run_batched(kern_ctx *ctx, int64_t B0, int64_t B1, int64_t M, int64_t N, int64_t K,
                        int b_mode /* 0: [B1,K,N], 1: [1,K,N], 2: [K,N] packed, 3: [B0,B1,K,N] stride-0 dim */,
                        float *out) {
    int64_t nb = B0 * B1, i, j, x, y;
    float *A = (float *)kt_alloc(sizeof(float) * (size_t)(nb * M * K), "A");
    float *Bm = (float *)kt_alloc(sizeof(float) * (size_t)(B1 * K * N), "B");
    float *C = (float *)kt_alloc(sizeof(float) * (size_t)(nb * M * N), "C");
    float *R = (float *)kt_alloc(sizeof(float) * (size_t)(B1 * M * N), "R");
    double *want = (double *)malloc(sizeof(double) * (size_t)(M * N));
    kern_tensor ta, tb, tc, tr;
    kern_gemm_params p;
    kern_gemm_packed_b *pb = NULL;
    kt_rng r = kt_rng_make((uint64_t)(b_mode * 100 + M));
    int64_t sha[4], shb[4], shc[4], shr[3], stb[4];
    kt_fill_normal(&r, A, KERN_F32, nb * M * K, 1.0);
    kt_fill_normal(&r, Bm, KERN_F32, B1 * K * N, 0.2);
    kt_fill_normal(&r, R, KERN_F32, B1 * M * N, 1.0);
    kt_poison(C, sizeof(float) * (size_t)(nb * M * N));
    sha[0] = B0; sha[1] = B1; sha[2] = M; sha[3] = K;
    shc[0] = B0; shc[1] = B1; shc[2] = M; shc[3] = N;
    shr[0] = B1; shr[1] = M; shr[2] = N;
    KT_OK(kern_tensor_init(&ta, A, KERN_F32, 4, sha));
    KT_OK(kern_tensor_init(&tc, C, KERN_F32, 4, shc));
    KT_OK(kern_tensor_init(&tr, R, KERN_F32, 3, shr));
    memset(&p, 0, sizeof p);
    p.epilogue.residual = &tr;
    if (b_mode == 0) {
        shb[0] = B1; shb[1] = K; shb[2] = N;
        KT_OK(kern_tensor_init(&tb, Bm, KERN_F32, 3, shb));
    } else if (b_mode == 1) {
        shb[0] = 1; shb[1] = K; shb[2] = N;
        KT_OK(kern_tensor_init(&tb, Bm, KERN_F32, 3, shb));
    } else if (b_mode == 2) {
        shb[0] = K; shb[1] = N;
        KT_OK(kern_tensor_init(&tb, Bm, KERN_F32, 2, shb));
        KT_OK(kern_gemm_pack_b(ctx, &tb, &pb, pk(0)));
        p.packed_b = pb;
    } else {
        shb[0] = B0; shb[1] = B1; shb[2] = K; shb[3] = N;
        stb[0] = 0; stb[1] = K * N; stb[2] = N; stb[3] = 1;
        KT_OK(kern_tensor_init_strided(&tb, Bm, KERN_F32, 4, shb, stb));
    }
    KT_OK(kern_gemm(ctx, &ta, pb ? NULL : &tb, &tc, &p));
    for (x = 0; x < B0; x++)
        for (y = 0; y < B1; y++) {
            int64_t item = x * B1 + y, bi = (b_mode == 0 || b_mode == 3) ? y : 0;
            mat mA, mB, mR;
            mA.p = A + item * M * K; mA.dt = KERN_F32; mA.rs = K; mA.cs = 1;
            mB.p = Bm + bi * K * N; mB.dt = KERN_F32; mB.rs = N; mB.cs = 1;
            mR.p = R + y * M * N; mR.dt = KERN_F32; mR.rs = N; mR.cs = 1;
            memset(&p, 0, sizeof p);
            ref_gemm(M, N, K, &mA, &mB, NULL, &p, NULL, &mR, want);
            kt_context("batch mode %d item %lld M=%lld N=%lld K=%lld", b_mode, (long long)item,
                       (long long)M, (long long)N, (long long)K);
            kt_assert_close("C item", C + item * M * N, KERN_F32, want, M * N, gemm_tol(KERN_F32, K));
        }
    if (out)
        for (i = 0; i < nb; i++)
            for (j = 0; j < M * N; j++) out[i * M * N + j] = C[i * M * N + j];
    kern_gemm_packed_b_free(ctx, pb);
    free(want);
    kt_free(A); kt_free(Bm); kt_free(C); kt_free(R);
}

KT_TEST(batch_broadcast) {
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        int mode;
        for (mode = 0; mode < 4; mode++) {
            run_batched(ctx, 2, 3, 17, 33, 45, mode, NULL);   /* batch-parallel */
            run_batched(ctx, 1, 2, 130, 70, 400, mode, NULL); /* phase-parallel */
            run_batched(ctx, 2, 5, 3, 40, 50, mode, NULL);    /* small M */
        }
    }
    { /* identical with 1 and 2 threads in batch-parallel mode */
        float *o1 = (float *)malloc(sizeof(float) * 6 * 17 * 33), *o2 = (float *)malloc(sizeof(float) * 6 * 17 * 33);
        run_batched(kt_ctx(1, KERN_ISA_AUTO), 2, 3, 17, 33, 45, 0, o1);
        run_batched(kt_ctx(2, KERN_ISA_AUTO), 2, 3, 17, 33, 45, 0, o2);
        kt_assert_bytes_equal("batched 1 vs 2 threads", o1, o2, sizeof(float) * 6 * 17 * 33);
        free(o1);
        free(o2);
    }
}

/* Fused == unfused, bit for bit, on every level: kern_gemm with bias, act,
 * residual and out_scale against kern_gemm with the bias alone (f32 C)
 * followed by the shared math layer's activation (kern__s_act: the scalar
 * twin, bit-identical to every vector path, the function kern_gelu and
 * the other ops apply), + residual, * out_scale, rounded to C's dtype. */
KT_TEST(fused_equals_unfused) {
    static const int64_t sh[][3] = {{37, 45, 70}, {3, 77, 400}, {40, 70, 1100}};
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        int s, act, v;
        for (s = 0; s < 3; s++)
            for (act = 0; act < KERN_ACT_COUNT; act++)
                for (v = 0; v < 2; v++) {
                    int64_t M = sh[s][0], N = sh[s][1], K = sh[s][2], i;
                    kern_dtype cdt = v ? KERN_BF16 : KERN_F32;
                    size_t ces = kern_dtype_size(cdt);
                    float *A = (float *)kt_alloc(sizeof(float) * (size_t)(M * K), "A");
                    float *B = (float *)kt_alloc(sizeof(float) * (size_t)(K * N), "B");
                    float *bias = (float *)kt_alloc(sizeof(float) * (size_t)N, "bias");
                    float *R = (float *)kt_alloc(sizeof(float) * (size_t)(M * N), "R");
                    float *P = (float *)kt_alloc(sizeof(float) * (size_t)(M * N), "P");
                    char *C = (char *)kt_alloc(ces * (size_t)(M * N), "C");
                    char *W = (char *)kt_alloc(ces * (size_t)(M * N), "W");
                    kern_tensor ta = kern_tensor_2d(A, KERN_F32, M, K), tb = kern_tensor_2d(B, KERN_F32, K, N);
                    kern_tensor tbias = kern_tensor_1d(bias, KERN_F32, N), tr = kern_tensor_2d(R, KERN_F32, M, N);
                    kern_tensor tp = kern_tensor_2d(P, KERN_F32, M, N), tc = kern_tensor_2d(C, cdt, M, N);
                    kern_gemm_params p;
                    kt_rng r = kt_rng_make((uint64_t)(s * 100 + act * 10 + v));
                    kt_fill_normal(&r, A, KERN_F32, M * K, 1.0);
                    kt_fill_normal(&r, B, KERN_F32, K * N, 3.0 / sqrt((double)K)); /* |x| up to ~10 */
                    kt_fill_normal(&r, bias, KERN_F32, N, 1.0);
                    kt_fill_normal(&r, R, KERN_F32, M * N, 1.0);
                    kt_context("isa=%s M=%lld N=%lld K=%lld act=%s c=%s", kern_isa_name(isa), (long long)M,
                               (long long)N, (long long)K, kern_act_name((kern_act)act), kern_dtype_name(cdt));
                    memset(&p, 0, sizeof p);
                    p.epilogue.bias = &tbias;
                    KT_OK(kern_gemm(ctx, &ta, &tb, &tp, &p));
                    p.epilogue.act = (kern_act)act;
                    p.epilogue.residual = &tr;
                    p.epilogue.out_scale = 0.75f;
                    KT_OK(kern_gemm(ctx, &ta, &tb, &tc, &p));
                    for (i = 0; i < M * N; i++) {
                        float y = kern__s_act(P[i], (kern_act)act);
                        y = y + R[i];
                        y = y * 0.75f;
                        kern__s_store_f32(W + (size_t)i * ces, cdt, y, 1, 0);
                    }
                    kt_assert_bytes_equal("fused vs unfused", C, W, ces * (size_t)(M * N));
                    kt_free(A); kt_free(B); kt_free(bias); kt_free(R); kt_free(P); kt_free(C); kt_free(W);
                }
    }
}

/* The gated epilogue (epilogue.glu): gate and up weights packed by
 * kern_glu_pack (trans_b [2F, K] along dim 0, or [K, 2F] along dim -1),
 * against the double reference act(x Wg + bg) * (x Wu + bu) + res, every
 * ISA, both paths (M <= 512 streams, above it the blocked path), several
 * k passes (K > kc), bf16 inputs and outputs, a strided c, prepacked B;
 * and bit for bit against the same GEMM without glu followed by the
 * combination in f32 where that GEMM runs one k pass. */
KT_TEST(glu_epilogue) {
    static const int64_t sh[][3] = {{1, 8, 16},   {3, 13, 70},   {5, 40, 33},   {17, 45, 200},
                                    {40, 70, 1100}, {600, 24, 40}, {24, 40, 2100}, {2, 1, 3},
                                    {520, 20, 1100}};
    const int nsh = (int)(sizeof sh / sizeof sh[0]);
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        int s, v;
        for (s = 0; s < nsh; s++)
            for (v = 0; v < 6; v++) {
                int64_t M = sh[s][0], F = sh[s][1], K = sh[s][2], N = 2 * F, i, f, k;
                int tb = v != 3, packed = v == 2 || v == 5, cstr = v == 4 ? 3 : 1;
                kern_dtype idt = v == 1 || v == 5 ? KERN_BF16 : KERN_F32;
                kern_dtype cdt = v == 1 || v == 4 ? KERN_BF16 : KERN_F32;
                kern_act act = v == 3 ? KERN_ACT_GELU : v == 4 ? KERN_ACT_NONE : KERN_ACT_SILU;
                size_t ies = kern_dtype_size(idt), ces = kern_dtype_size(cdt);
                char *A = (char *)kt_alloc(ies * (size_t)(M * K), "A");
                char *Wg = (char *)kt_alloc(ies * (size_t)(F * K), "Wg");
                char *Wu = (char *)kt_alloc(ies * (size_t)(F * K), "Wu");
                char *W2 = (char *)kt_alloc(ies * (size_t)(N * K), "W2");
                float *bg = (float *)kt_alloc(sizeof(float) * (size_t)F, "bg");
                float *bu = (float *)kt_alloc(sizeof(float) * (size_t)F, "bu");
                float *b2 = (float *)kt_alloc(sizeof(float) * (size_t)N, "b2");
                float *R = (float *)kt_alloc(sizeof(float) * (size_t)(M * F), "R");
                float *P = (float *)kt_alloc(sizeof(float) * (size_t)(M * N), "P");
                char *C = (char *)kt_alloc(ces * (size_t)(M * F * cstr), "C");
                kern_tensor ta = kern_tensor_2d(A, idt, M, K), tg, tu, tw2;
                kern_tensor tbg = kern_tensor_1d(bg, KERN_F32, F), tbu = kern_tensor_1d(bu, KERN_F32, F);
                kern_tensor tb2 = kern_tensor_1d(b2, KERN_F32, N), tr = kern_tensor_2d(R, KERN_F32, M, F);
                kern_tensor tp = kern_tensor_2d(P, KERN_F32, M, N), tc = kern_tensor_2d(C, cdt, M, F);
                kern_gemm_params p;
                kern_gemm_packed_b *pb = NULL;
                kt_tol_t tol = gemm_tol(cdt, K);
                int64_t bad = 0;
                kt_rng r = kt_rng_make((uint64_t)(s * 100 + v));
                tc.stride[1] = cstr;
                tc.stride[0] = F * cstr;
                kt_fill_normal(&r, A, idt, M * K, 1.0);
                kt_fill_normal(&r, Wg, idt, F * K, 2.0 / sqrt((double)K));
                kt_fill_normal(&r, Wu, idt, F * K, 2.0 / sqrt((double)K));
                kt_fill_normal(&r, bg, KERN_F32, F, 1.0);
                kt_fill_normal(&r, bu, KERN_F32, F, 1.0);
                kt_fill_normal(&r, R, KERN_F32, M * F, 1.0);
                kt_poison(C, ces * (size_t)(M * F * cstr));
                kt_context("isa=%s M=%lld F=%lld K=%lld v=%d", kern_isa_name(isa), (long long)M,
                           (long long)F, (long long)K, v);
                if (tb) { /* F.linear weights [F, K] -> [2F, K] */
                    tg = kern_tensor_2d(Wg, idt, F, K);
                    tu = kern_tensor_2d(Wu, idt, F, K);
                    tw2 = kern_tensor_2d(W2, idt, N, K);
                    KT_OK(kern_glu_pack(&tg, &tu, &tw2, 0));
                } else { /* [K, F] -> [K, 2F] */
                    tg = kern_tensor_2d(Wg, idt, K, F);
                    tu = kern_tensor_2d(Wu, idt, K, F);
                    tw2 = kern_tensor_2d(W2, idt, K, N);
                    KT_OK(kern_glu_pack(&tg, &tu, &tw2, -1));
                }
                KT_OK(kern_glu_pack(&tbg, &tbu, &tb2, 0));
                memset(&p, 0, sizeof p);
                p.trans_b = tb;
                p.epilogue.bias = &tb2;
                p.epilogue.act = act;
                p.epilogue.glu = 1;
                p.epilogue.residual = &tr;
                p.epilogue.out_scale = 0.5f;
                if (packed) {
                    KT_OK(kern_gemm_pack_b(ctx, &tw2, &pb, pk(tb)));
                    p.packed_b = pb;
                    KT_OK(kern_gemm(ctx, &ta, NULL, &tc, &p));
                } else {
                    KT_OK(kern_gemm(ctx, &ta, &tw2, &tc, &p));
                }
                for (i = 0; i < M && bad < 3; i++)
                    for (f = 0; f < F && bad < 3; f++) {
                        double g = bg[f], u = bu[f], w, got;
                        int ok;
                        for (k = 0; k < K; k++) {
                            double a = kt_get(A, idt, i * K + k);
                            g += a * kt_get(Wg, idt, tb ? f * K + k : k * F + f);
                            u += a * kt_get(Wu, idt, tb ? f * K + k : k * F + f);
                        }
                        w = 0.5 * (ref_act(act, g) * u + R[i * F + f]);
                        got = kt_get(C, cdt, (i * F + f) * cstr);
                        ok = fabs(got - w) <= tol.atol * (1.0 + fabs(u)) + tol.rtol * fabs(w);
                        if (!ok) {
                            KT_CHECK(ok, "C[%lld,%lld] = %.9g, want %.9g", (long long)i, (long long)f, got, w);
                            bad++;
                        }
                    }
                if (cstr > 1) /* the gaps of a strided c stay untouched */
                    for (i = 0; i < M * F * cstr; i++)
                        if (i % cstr) {
                            size_t b;
                            for (b = 0; b < ces; b++)
                                KT_CHECK((unsigned char)C[i * (int64_t)ces + (int64_t)b] == 0xFF,
                                         "gap %lld written", (long long)i);
                        }
                /* bits: the plain GEMM on the same packed weight, then the combination */
                if (K <= 1024 && cstr == 1) {
                    char *W = (char *)kt_alloc(ces * (size_t)(M * F), "W");
                    p.epilogue.act = KERN_ACT_NONE;
                    p.epilogue.glu = 0;
                    p.epilogue.residual = NULL;
                    p.epilogue.out_scale = 0;
                    KT_OK(kern_gemm(ctx, &ta, packed ? NULL : &tw2, &tp, &p));
                    for (i = 0; i < M; i++)
                        for (f = 0; f < F; f++) {
                            int64_t q = f / KERN_GLU_GROUP, o = f % KERN_GLU_GROUP;
                            int64_t w = F - q * KERN_GLU_GROUP < KERN_GLU_GROUP ? F - q * KERN_GLU_GROUP
                                                                                : KERN_GLU_GROUP;
                            float y = kern__s_act(P[i * N + 2 * q * KERN_GLU_GROUP + o], act) *
                                      P[i * N + 2 * q * KERN_GLU_GROUP + w + o];
                            y = (y + R[i * F + f]) * 0.5f;
                            kern__s_store_f32(W + (size_t)(i * F + f) * ces, cdt, y, 1, 0);
                        }
                    kt_assert_bytes_equal("glu vs gemm + combination", C, W, ces * (size_t)(M * F));
                    kt_free(W);
                }
                kern_gemm_packed_b_free(ctx, pb);
                kt_free(A); kt_free(Wg); kt_free(Wu); kt_free(W2); kt_free(bg); kt_free(bu);
                kt_free(b2); kt_free(R); kt_free(P); kt_free(C);
            }
    }
}

/* kern_glu_pack's order and its errors; glu's errors in kern_gemm. */
KT_TEST(glu_errors) {
    float g[3 * 2], u[3 * 2], o[6 * 2], o0[6 * 2], A[4 * 2], C[4 * 6];
    kern_tensor tg = kern_tensor_2d(g, KERN_F32, 3, 2), tu = kern_tensor_2d(u, KERN_F32, 3, 2);
    kern_tensor to = kern_tensor_2d(o, KERN_F32, 6, 2), t;
    kern_tensor ta = kern_tensor_2d(A, KERN_F32, 4, 2), tc = kern_tensor_2d(C, KERN_F32, 4, 6);
    kern_gemm_params p;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    int i, up;
    for (i = 0; i < 6; i++) { g[i] = (float)i; u[i] = (float)(100 + i); }
    for (i = 0; i < 8; i++) A[i] = 1.0f;
    KT_OK(kern_glu_pack(&tg, &tu, &to, 0));
    /* F = 3 < 8: one group, 3 gates then 3 ups */
    for (i = 0; i < 6; i++) {
        int64_t f = kern_glu_source(i, 3, &up);
        KT_CHECK(f == i % 3 && up == (i >= 3), "source of %d: %lld %d", i, (long long)f, up);
        KT_CHECK(o[2 * i] == (up ? u : g)[2 * f] && o[2 * i + 1] == (up ? u : g)[2 * f + 1],
                 "row %d", i);
    }
    { /* F = 20: groups 8+8, 8+8, 4+4 */
        int64_t want[][2] = {{0, 0}, {7, 7}, {8, 0}, {15, 7}, {16, 8}, {31, 15}, {32, 16}, {35, 19}, {36, 16}, {39, 19}};
        for (i = 0; i < 10; i++) {
            int64_t f = kern_glu_source(want[i][0], 20, &up);
            KT_CHECK(f == want[i][1] && up == ((want[i][0] >= 8 && want[i][0] < 16) ||
                                               (want[i][0] >= 24 && want[i][0] < 32) || want[i][0] >= 36),
                     "F=20 j=%lld -> %lld up=%d", (long long)want[i][0], (long long)f, up);
        }
    }
    memcpy(o0, o, sizeof o);
    KT_ERROR(kern_glu_pack(NULL, &tu, &to, 0), KERN_ERR_ARG, "gate is NULL");
    KT_ERROR(kern_glu_pack(&tg, &tu, &to, 2), KERN_ERR_ARG, "dim=2");
    KT_ERROR(kern_glu_pack(&tg, &tu, &to, 1), KERN_ERR_SHAPE, "dim 1 doubled");
    t = kern_tensor_2d(u, KERN_BF16, 3, 2);
    KT_ERROR(kern_glu_pack(&tg, &t, &to, 0), KERN_ERR_DTYPE, "up.dtype=bf16");
    t = kern_tensor_2d(g, KERN_F32, 6, 1);
    KT_ERROR(kern_glu_pack(&tg, &tu, &t, 0), KERN_ERR_SHAPE, "out.shape=[6,1]");
    t = kern_tensor_2d(o, KERN_F32, 6, 2);
    t.stride[0] = 1;
    KT_ERROR(kern_glu_pack(&tg, &tu, &t, 0), KERN_ERR_LAYOUT, "overlapping");
    t = kern_tensor_2d(g, KERN_F32, 6, 2);
    KT_ERROR(kern_glu_pack(&tg, &tu, &t, 0), KERN_ERR_ARG, "out overlaps gate");
    KT_CHECK(!memcmp(o, o0, sizeof o), "out written on error");
    /* kern_gemm: c must have N/2 columns, N even, beta 0 */
    memset(&p, 0, sizeof p);
    p.trans_b = 1;
    p.epilogue.glu = 1;
    for (i = 0; i < 24; i++) C[i] = -7.0f;
    KT_ERROR(kern_gemm(ctx, &ta, &to, &tc, &p), KERN_ERR_SHAPE, "glu: c needs N/2 columns");
    t = kern_tensor_2d(o, KERN_F32, 5, 2);
    KT_ERROR(kern_gemm(ctx, &ta, &t, &tc, &p), KERN_ERR_SHAPE, "even N");
    t = kern_tensor_2d(o, KERN_F32, 6, 2);
    p.beta = 1.0f;
    {
        kern_tensor c3 = kern_tensor_2d(C, KERN_F32, 4, 3);
        KT_ERROR(kern_gemm(ctx, &ta, &t, &c3, &p), KERN_ERR_UNSUPPORTED, "beta=1");
        p.beta = 0;
        for (i = 0; i < 24; i++) KT_CHECK(C[i] == -7.0f, "C[%d] written on error", i);
        KT_OK(kern_gemm(ctx, &ta, &t, &c3, &p)); /* x = ones: C[i, f] = (g f0 + g f1) (u f0 + u f1) */
        for (i = 0; i < 3; i++)
            KT_CHECK(C[i] == (float)((4 * i + 1) * (200 + 4 * i + 1)), "C[0,%d]=%g", i, C[i]);
    }
}

/* Activations over a wide range through a 1x1 "GEMM" per value: each ISA's
 * vector erf/exp against the double reference, no K scaling. */
KT_TEST(activation_accuracy) {
    int64_t n = 2001, i;
    float *x = (float *)kt_alloc(sizeof(float) * (size_t)n, "x"), one = 1.0f;
    float *y = (float *)kt_alloc(sizeof(float) * (size_t)n, "y");
    double *w = (double *)malloc(sizeof(double) * (size_t)n);
    kern_tensor tx = kern_tensor_2d(x, KERN_F32, n, 1), t1 = kern_tensor_2d(&one, KERN_F32, 1, 1);
    kern_tensor ty = kern_tensor_2d(y, KERN_F32, n, 1);
    for (i = 0; i < n; i++) x[i] = (float)(-20.0 + 40.0 * (double)i / (double)(n - 1));
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[2] = 1e-30f;
    x[3] = 88.0f;
    x[4] = -88.0f;
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        int act;
        for (act = 1; act < KERN_ACT_COUNT; act++) {
            kern_gemm_params p;
            memset(&p, 0, sizeof p);
            p.epilogue.act = (kern_act)act;
            for (i = 0; i < n; i++) w[i] = ref_act(act, x[i]);
            kt_context("isa=%s act=%d", kern_isa_name(isa), act);
            KT_OK(kern_gemm(ctx, &tx, &t1, &ty, &p));
            kt_assert_close("act(x)", y, KERN_F32, w, n, kt_tol(KERN_F32));
        }
    }
    kt_free(x);
    kt_free(y);
    free(w);
}

/* The function table of every level of this CPU family (run or not): the
 * levels that have their own kernels reach them (bf16 inputs at
 * AVX512_BF16 the vdpbf16ps table, at AVX512 the f32 one, at AMX the tile
 * table), and the run on each level the machine has uses its level's
 * table. */
KT_TEST(dispatch_tables) {
    static const struct {
        kern_isa isa;
        const char *f32, *bf16, *f32_xeon, *f32_zen5, *bf16_zen5;
    } want[] = {
        {KERN_ISA_SCALAR, "scalar", "scalar", "scalar", "scalar", "scalar"},
        {KERN_ISA_AVX2, "avx2", "avx2", "avx2", "avx2", "avx2"},
        {KERN_ISA_AVX2_VNNI, "avx2", "avx2", "avx2", "avx2", "avx2"},
        {KERN_ISA_AVX512, "avx512", "avx512", "avx512_xeon", "avx512_zen5", "avx512_zen5"},
        {KERN_ISA_AVX512_VNNI, "avx512", "avx512", "avx512_xeon", "avx512_zen5", "avx512_zen5"},
        {KERN_ISA_AVX512_BF16, "avx512", "avx512bf16", "avx512_xeon", "avx512_zen5", "avx512bf16_zen5"},
#ifdef KERN__HAVE_AMX
        {KERN_ISA_AMX, "avx512", "amx", "avx512_xeon", "avx512_zen5", "amx"},
#else
        {KERN_ISA_AMX, "avx512", "avx512bf16", "avx512_xeon", "avx512_zen5", "avx512bf16_zen5"},
#endif
        {KERN_ISA_NEON, "neon", "neon", "neon", "neon", "neon"},
        {KERN_ISA_NEON_DOT, "neon", "neon", "neon", "neon", "neon"},
        {KERN_ISA_NEON_BF16, "neon", "neon", "neon", "neon", "neon"},
    };
    kern_isa all[KERN_ISA_COUNT];
    int n = kern_isa_list(all, KERN_ISA_COUNT, 0), i, u;
    size_t w;
    for (i = 0; i < n; i++)
        for (w = 0; w < sizeof want / sizeof want[0]; w++)
            if (want[w].isa == all[i])
                for (u = KERN_UARCH_GENERIC; u < KERN_UARCH_COUNT; u++) {
                    /* the class as kern_ctx_uarch resolves it at this level */
                    kern_uarch eff = kern__uarch_effective((kern_uarch)u, all[i]);
                    const int z5 = eff == KERN_UARCH_ZEN5;
                    const char *f32 = eff == KERN_UARCH_XEON_AVX512 ? want[w].f32_xeon
                                      : z5                          ? want[w].f32_zen5
                                                                    : want[w].f32;
                    const char *bf16 = z5 ? want[w].bf16_zen5
                                       : want[w].isa == KERN_ISA_AVX512_BF16 &&
                                               eff != KERN_UARCH_XEON_AVX512
                                           ? want[w].bf16
                                           : f32;
                    if (want[w].isa == KERN_ISA_AMX && !z5) {
                        bf16 = want[w].bf16;
#ifdef KERN__HAVE_AMX
                        if (eff == KERN_UARCH_XEON_AVX512) bf16 = "amx_xeon";
#else
                        if (eff == KERN_UARCH_XEON_AVX512) bf16 = f32;
#endif
                    }
                    kt_context("%s %s", kern_isa_name(all[i]), kern_uarch_name((kern_uarch)u));
                    KT_CHECK(!strcmp(kern__gemm_fns_for(all[i], eff, KERN_F32)->name, f32),
                             "f32: %s", kern__gemm_fns_for(all[i], eff, KERN_F32)->name);
                    KT_CHECK(!strcmp(kern__gemm_fns_for(all[i], eff, KERN_F16)->name, f32),
                             "f16: %s", kern__gemm_fns_for(all[i], eff, KERN_F16)->name);
                    KT_CHECK(!strcmp(kern__gemm_fns_for(all[i], eff, KERN_BF16)->name, bf16),
                             "bf16: %s", kern__gemm_fns_for(all[i], eff, KERN_BF16)->name);
                }
    KT_FOR_EACH_ISA(isa, ctx, 1) {
        kt_context("%s", kern_isa_name(isa));
        KT_CHECK(kern__gemm_fns_for(kern_ctx_isa(ctx), kern_ctx_uarch(ctx), KERN_F32) ==
                 kern__gemm_fns_for(isa, kern__uarch_effective(kt_uarch_default(), isa), KERN_F32));
    }
}

/* Every tuning class's blocking on shapes that cross its boundaries (the
 * Xeon row: kc 512, nb 384, mb 192; the generic row: kc 1024, nb 768, mb
 * 96; M above the streaming path's 512), f32 and bf16, with an epilogue
 * and beta, each against the reference, at every level where the classes
 * have tables of their own (elsewhere they all resolve to GENERIC). The
 * bits may differ between classes (other k passes), as between machines. */
KT_TEST(uarch_classes_agree) {
    static const int64_t shapes[][3] = {{600, 420, 1100}, {530, 97, 2100}, {7, 1200, 600}};
    size_t si;
    KT_FOR_EACH_ISA(isa, ctx0, 2) {
        (void)ctx0;
        if (isa != KERN_ISA_AVX512 && isa != KERN_ISA_AVX512_BF16 && isa != KERN_ISA_AMX)
            continue; /* VNNI: same GEMM */
        for (si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int dt;
            for (dt = 0; dt < 2; dt++) {
                gcase g = gc_default(shapes[si][0], shapes[si][1], shapes[si][2]);
                int u;
                g.in_dt = dt ? KERN_BF16 : KERN_F32;
                g.beta = 0.5f;
                g.use_bias = 1;
                g.act = KERN_ACT_GELU;
                for (u = KERN_UARCH_GENERIC; u < KERN_UARCH_COUNT; u++) {
                    kern_ctx *ctx = kt_ctx_full(2, isa, 0, (kern_uarch)u);
                    kt_context("%s %s %s M%lld N%lld K%lld", kern_isa_name(isa),
                               kern_uarch_name((kern_uarch)u), dt ? "bf16" : "f32",
                               (long long)g.M, (long long)g.N, (long long)g.K);
                    KT_CHECK(ctx != NULL);
                    if (!ctx) continue;
                    run_case(ctx, &g, NULL);
                }
            }
        }
    }
}

/* The AMX tile table (bf16 inputs at KERN_ISA_AMX): the plan picks it at
 * every M (M <= 2 against a prepacked B goes to the class's AVX-512 table,
 * run here through the packed variants); shapes
 * across its edges: M and N around the 32 x 32 block, K around the
 * 32-wide tile chunk, odd K (a half pair), K past kc = 2048 (partial sums
 * in C and in scratch), short k passes (small M x N, K > 256) and at 2
 * threads their column windows (N 97, 200), A read in place (even K and row stride, with a
 * padded row stride and a short last chunk), prepacked B, a
 * transposed A (the portable A packing), bf16 C, beta, bias + GELU +
 * residual, 1 and 2 threads, each against the reference. Not run where the
 * machine or the build has no AMX level. */
KT_TEST(amx_tiles) {
#ifdef KERN__HAVE_AMX
    static const int64_t shapes[][3] = {{32, 32, 32},  {33, 31, 1},   {64, 64, 33},
                                        {45, 70, 31},  {96, 40, 513}, {31, 64, 64},
                                        {130, 97, 1100}, {600, 420, 200}, {1, 70, 100},
                                        {2, 33, 65},    {70, 64, 1058}, {40, 48, 2100},
                                        {64, 200, 700}};
    size_t si;
    int th, v;
    if (!kern_isa_available(KERN_ISA_AMX)) {
        printf("not run: amx_tiles (no amx level on this machine)\n");
        return;
    }
    for (th = 1; th <= 2; th++)
        for (si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (v = 0; v < 6; v++) {
                int xeon = v % 2, u = xeon ? KERN_UARCH_XEON_AVX512 : KERN_UARCH_GENERIC;
                kern_ctx *ctx = kt_ctx_full(th, KERN_ISA_AMX, 0, (kern_uarch)u);
                gcase g = gc_default(shapes[si][0], shapes[si][1], shapes[si][2]);
                kern__gemm_plan pl;
                kern_gemm_params p;
                g.in_dt = KERN_BF16;
                if (v == 1) { g.use_bias = 1; g.act = KERN_ACT_GELU; g.use_res = 1; g.beta = 0.5f; }
                if (v == 2) { g.packed = 1; g.tb = 1; g.c_dt = KERN_BF16; }
                if (v == 3) { g.ta = 1; g.pad_a = 3; g.alpha_set = 1; g.alpha = -0.5f; }
                if (v == 4) { g.pad_c = 5; g.pad_a = 2; g.res_is_c = 1; g.out_scale = 2.0f; }
                if (v == 5) { g.c_dt = KERN_BF16; g.packed = 1; g.use_bias = 1; g.act = KERN_ACT_SILU; }
                kt_context("th%d M%lld N%lld K%lld variant %d", th, (long long)g.M, (long long)g.N,
                           (long long)g.K, v);
                KT_CHECK(ctx != NULL);
                if (!ctx) continue;
                {   /* which table the plan runs */
                    kern_tensor a = kern_tensor_2d(NULL, KERN_BF16, g.M, g.K);
                    kern_tensor b = kern_tensor_2d(NULL, KERN_BF16, g.K, g.N);
                    kern_tensor c = kern_tensor_2d(NULL, KERN_F32, g.M, g.N);
                    /* planning reads no data: disjoint addresses */
                    a.data = (void *)(uintptr_t)0x10000000u;
                    b.data = (void *)(uintptr_t)0x20000000u;
                    c.data = (void *)(uintptr_t)0x30000000u;
                    memset(&p, 0, sizeof p);
                    KT_CHECK(kern__gemm_plan_make(ctx, &a, &b, &c, &p, "t", &pl) == KERN_OK);
                    KT_CHECK(!strcmp(pl.ks->name, xeon ? "amx_xeon" : "amx"), "%s", pl.ks->name);
                }
                run_case(ctx, &g, NULL);
            }
#else
    printf("not run: amx_tiles (built without the AMX intrinsics)\n");
#endif
}

/* Empty dims and K = 0 (C = epilogue(beta C)). */
KT_TEST(empty_and_k0) {
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        gcase g = gc_default(5, 7, 0);
        g.beta = 0.5f;
        g.use_bias = 1;
        g.act = KERN_ACT_RELU;
        run_case(ctx, &g, NULL);
        g.M = 40;
        run_case(ctx, &g, NULL);
        g = gc_default(0, 7, 5);
        run_case(ctx, &g, NULL);
        g = gc_default(6, 0, 5);
        run_case(ctx, &g, NULL);
        {
            gcase h = gc_default(3, 9, 0);
            h.packed = 1;
            run_case(ctx, &h, NULL);
        }
    }
}

/* A caller-provided workspace of exactly kern_gemm_workspace_size bytes. */
KT_TEST(workspace) {
    int64_t M = 100, N = 90, K = 800;
    float *A = (float *)kt_alloc(sizeof(float) * (size_t)(M * K), "A");
    float *B = (float *)kt_alloc(sizeof(float) * (size_t)(K * N), "B");
    uint16_t *C = (uint16_t *)kt_alloc(2 * (size_t)(M * N), "C");
    float *C2 = (float *)kt_alloc(sizeof(float) * (size_t)(M * N), "C2");
    kern_tensor ta = kern_tensor_2d(A, KERN_F32, M, K), tb = kern_tensor_2d(B, KERN_F32, K, N);
    kern_tensor tc = kern_tensor_2d(C, KERN_BF16, M, N), tc2 = kern_tensor_2d(C2, KERN_F32, M, N);
    kern_gemm_params p;
    size_t bytes = 0;
    void *ws;
    kt_rng r = kt_rng_make(1);
    int64_t i;
    double *w = (double *)malloc(sizeof(double) * (size_t)(M * N));
    kt_fill_normal(&r, A, KERN_F32, M * K, 1.0);
    kt_fill_normal(&r, B, KERN_F32, K * N, 0.05);
    memset(&p, 0, sizeof p);
    KT_OK(kern_gemm_workspace_size(kt_ctx(2, KERN_ISA_AUTO), &ta, &tb, &tc, &p, &bytes));
    KT_CHECK(bytes > 0, "bytes=%zu", bytes);
    ws = kt_alloc(bytes, "workspace");
    p.workspace = ws;
    p.workspace_size = bytes;
    KT_OK(kern_gemm(kt_ctx(2, KERN_ISA_AUTO), &ta, &tb, &tc, &p));
    p.workspace = NULL;
    KT_OK(kern_gemm(kt_ctx(2, KERN_ISA_AUTO), &ta, &tb, &tc2, &p));
    for (i = 0; i < M * N; i++) w[i] = C2[i];
    kt_assert_close("bf16 C with caller workspace", C, KERN_BF16, w, M * N, kt_tol(KERN_BF16));
    p.workspace = ws;
    p.workspace_size = bytes - 1;
    KT_ERROR(kern_gemm(kt_ctx(2, KERN_ISA_AUTO), &ta, &tb, &tc, &p), KERN_ERR_ARG, "workspace_size");
    kt_free(ws);
    kt_free(A); kt_free(B); kt_free(C); kt_free(C2);
    free(w);
}

/* The workspace for a bound M serves every smaller M (the graph executor
 * sizes its arena at the bound): the streaming path below cfg->stream_m
 * packs all of A, more than the general path's block above it. */
KT_TEST(workspace_monotonic_in_m) {
    static const int64_t NK[][2] = {{64, 64}, {256, 64}, {64, 256}, {768, 3072}, {3072, 768}};
    static const int64_t Ms[] = {1, 5, 6, 64, 127, 128, 129, 144, 200, 512, 1024};
    size_t n, mi, mj;
    KT_FOR_EACH_ISA(isa, ctx, 2) {
        for (n = 0; n < sizeof NK / sizeof NK[0]; n++) {
            size_t sz[sizeof Ms / sizeof Ms[0]];
            for (mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                /* sizes only: never read or written, distinct ranges */
                kern_tensor ta = kern_tensor_2d((void *)(uintptr_t)0x10000000u, KERN_F32, Ms[mi], NK[n][1]);
                kern_tensor tb = kern_tensor_2d((void *)(uintptr_t)0x20000000u, KERN_F32, NK[n][1], NK[n][0]);
                kern_tensor tc = kern_tensor_2d((void *)(uintptr_t)0x30000000u, KERN_F32, Ms[mi], NK[n][0]);
                kern_gemm_params p;
                memset(&p, 0, sizeof p);
                sz[mi] = 0;
                KT_OK(kern_gemm_workspace_size(ctx, &ta, &tb, &tc, &p, &sz[mi]));
            }
            for (mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
                for (mj = 0; mj < mi; mj++)
                    KT_CHECK(sz[mj] <= sz[mi], "%s N=%lld K=%lld: M=%lld needs %zu bytes but M=%lld %zu",
                             kern_isa_name(isa), (long long)NK[n][0], (long long)NK[n][1],
                             (long long)Ms[mj], sz[mj], (long long)Ms[mi], sz[mi]);
        }
    }
}

/* Every documented error: status, message, and C untouched. */
KT_TEST(errors) {
    float A[6 * 4], B[4 * 5], C[6 * 5], Cref[6 * 5], bias[7];
    uint16_t Bh[4 * 5];
    kern_tensor ta = kern_tensor_2d(A, KERN_F32, 6, 4), tb = kern_tensor_2d(B, KERN_F32, 4, 5);
    kern_tensor tc = kern_tensor_2d(C, KERN_F32, 6, 5), t;
    kern_tensor tbh = kern_tensor_2d(Bh, KERN_BF16, 4, 5);
    kern_gemm_params p;
    kern_gemm_packed_b *pb = NULL, *pbh = NULL;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    int i;
    for (i = 0; i < 24; i++) A[i] = (float)i;
    for (i = 0; i < 20; i++) { B[i] = 1.0f; Bh[i] = kern_f32_to_bf16(1.0f); }
    for (i = 0; i < 30; i++) C[i] = Cref[i] = -7.0f;
    for (i = 0; i < 7; i++) bias[i] = 1.0f;
    memset(&p, 0, sizeof p);
    KT_ERROR(kern_gemm(ctx, NULL, &tb, &tc, &p), KERN_ERR_ARG, "a is NULL");
    KT_ERROR(kern_gemm(ctx, &ta, NULL, &tc, &p), KERN_ERR_ARG, "b is NULL");
    KT_ERROR(kern_gemm(ctx, &ta, &tb, NULL, &p), KERN_ERR_ARG, "c is NULL");
    /* inner dims */
    t = kern_tensor_2d(B, KERN_F32, 5, 4);
    KT_ERROR(kern_gemm(ctx, &ta, &t, &tc, &p), KERN_ERR_SHAPE, "inner dimensions differ");
    KT_ERROR(kern_gemm(ctx, &ta, &t, &tc, &p), KERN_ERR_SHAPE, "b.shape=[5,4]");
    p.trans_a = 1;
    KT_ERROR(kern_gemm(ctx, &ta, &tb, &tc, &p), KERN_ERR_SHAPE, "op(a) is [4,6]");
    p.trans_a = 0;
    /* c shape */
    t = kern_tensor_2d(C, KERN_F32, 5, 6);
    KT_ERROR(kern_gemm(ctx, &ta, &tb, &t, &p), KERN_ERR_SHAPE, "c.shape=[5,6]");
    /* ndim */
    t = kern_tensor_1d(A, KERN_F32, 24);
    KT_ERROR(kern_gemm(ctx, &t, &tb, &tc, &p), KERN_ERR_SHAPE, "a has 1 dims");
    /* batch dims that do not broadcast: a [2,3,4] b [3,4,5] c [2,3,5] */
    {
        kern_tensor a3, b3, c3;
        int64_t sa[3] = {2, 3, 4}, sb[3] = {3, 4, 5}, sc[3] = {2, 3, 5};
        KT_OK(kern_tensor_init(&a3, A, KERN_F32, 3, sa));
        KT_OK(kern_tensor_init(&b3, B, KERN_F32, 3, sb));
        KT_OK(kern_tensor_init(&c3, C, KERN_F32, 3, sc));
        /* b needs 60 floats: use a zero batch stride view instead of memory */
        b3.stride[0] = 0;
        KT_ERROR(kern_gemm(ctx, &a3, &b3, &c3, &p), KERN_ERR_SHAPE, "batch dims do not broadcast");
        sc[0] = 3;
        KT_OK(kern_tensor_init(&c3, C, KERN_F32, 3, sc));
        c3.stride[0] = 0; /* (never reached: the shape check comes first) */
        KT_ERROR(kern_gemm(ctx, &a3, &tb, &c3, &p), KERN_ERR_SHAPE, "c.shape[0]=3");
    }
    /* dtypes */
    KT_ERROR(kern_gemm(ctx, &ta, &tbh, &tc, &p), KERN_ERR_DTYPE, "b.dtype=bf16");
    t = kern_tensor_2d(C, KERN_I32, 6, 5);
    KT_ERROR(kern_gemm(ctx, &ta, &tb, &t, &p), KERN_ERR_DTYPE, "c.dtype=i32");
    t = kern_tensor_2d(A, KERN_I8, 6, 4);
    {
        kern_tensor t2 = kern_tensor_2d(B, KERN_I8, 4, 5);
        KT_ERROR(kern_gemm(ctx, &t, &t2, &tc, &p), KERN_ERR_DTYPE, "a.dtype=i8");
    }
    /* aliasing */
    t = kern_tensor_2d(A, KERN_F32, 6, 5);
    KT_ERROR(kern_gemm(ctx, &ta, &tb, &t, &p), KERN_ERR_ARG, "c overlaps a");
    t = kern_tensor_2d(B, KERN_F32, 4, 5);
    {
        kern_tensor tcb = kern_tensor_2d(B, KERN_F32, 4, 5), ta4 = kern_tensor_2d(A, KERN_F32, 4, 4);
        KT_ERROR(kern_gemm(ctx, &ta4, &t, &tcb, &p), KERN_ERR_ARG, "c overlaps b");
    }
    /* bias */
    t = kern_tensor_1d(bias, KERN_F32, 7);
    p.epilogue.bias = &t;
    KT_ERROR(kern_gemm(ctx, &ta, &tb, &tc, &p), KERN_ERR_SHAPE, "bias.shape=[7]");
    p.epilogue.bias = NULL;
    /* residual that does not broadcast */
    t = kern_tensor_2d(bias, KERN_F32, 1, 7);
    p.epilogue.residual = &t;
    KT_ERROR(kern_gemm(ctx, &ta, &tb, &tc, &p), KERN_ERR_SHAPE, "residual");
    t = kern_tensor_2d(C + 1, KERN_F32, 1, 5);
    p.epilogue.residual = &t;
    KT_ERROR(kern_gemm(ctx, &ta, &tb, &tc, &p), KERN_ERR_ARG, "c overlaps residual");
    t = kern_tensor_2d(C, KERN_BF16, 6, 5); /* c's memory, another dtype: not c itself */
    KT_ERROR(kern_gemm(ctx, &ta, &tb, &tc, &p), KERN_ERR_ARG, "c overlaps residual");
    { /* c's memory with other strides: not c itself */
        kern_tensor c5 = kern_tensor_2d(C, KERN_F32, 5, 5), a5 = kern_tensor_2d(A, KERN_F32, 5, 4);
        t = c5;
        t.stride[0] = 6;
        KT_ERROR(kern_gemm(ctx, &a5, &tb, &c5, &p), KERN_ERR_ARG, "c overlaps residual");
    }
    p.epilogue.residual = NULL;
    /* act */
    p.epilogue.act = (kern_act)99;
    KT_ERROR(kern_gemm(ctx, &ta, &tb, &tc, &p), KERN_ERR_ARG, "params.epilogue.act=99");
    p.epilogue.act = KERN_ACT_NONE;
    /* c with a zero stride */
    t = tc;
    t.stride[0] = 0;
    KT_ERROR(kern_gemm(ctx, &ta, &tb, &t, &p), KERN_ERR_LAYOUT, "c.stride[0]=0");
    /* negative stride */
    t = ta;
    t.stride[1] = -1;
    KT_ERROR(kern_gemm(ctx, &t, &tb, &tc, &p), KERN_ERR_LAYOUT, "a.stride[1]=-1");
    /* packed B: wrong K, wrong dtype, b given too */
    {
        kern_tensor b6 = kern_tensor_2d(B, KERN_F32, 5, 4); /* K = 5 */
        KT_OK(kern_gemm_pack_b(ctx, &b6, &pb, pk(0)));
        KT_OK(kern_gemm_pack_b(ctx, &tbh, &pbh, pk(0)));
        p.packed_b = pb;
        KT_ERROR(kern_gemm(ctx, &ta, NULL, &tc, &p), KERN_ERR_SHAPE, "packed_b has K=5");
        p.packed_b = pbh;
        KT_ERROR(kern_gemm(ctx, &ta, NULL, &tc, &p), KERN_ERR_DTYPE, "packed from bf16");
        KT_ERROR(kern_gemm(ctx, &ta, &tb, &tc, &p), KERN_ERR_ARG, "b must be NULL");
        p.packed_b = NULL;
    }
    KT_ERROR(kern_gemm_pack_b(ctx, &ta, NULL, pk(0)), KERN_ERR_ARG, "out is NULL");
    t = kern_tensor_1d(A, KERN_F32, 4);
    {
        kern_gemm_packed_b *x = NULL;
        KT_ERROR(kern_gemm_pack_b(ctx, &t, &x, pk(0)), KERN_ERR_SHAPE, "b has 1 dims");
        KT_CHECK(x == NULL, "out written on error");
    }
    KT_ERROR(kern_gemm_workspace_size(ctx, &ta, &tb, &tc, &p, NULL), KERN_ERR_ARG, "bytes is NULL");
    for (i = 0; i < 30; i++) KT_CHECK(C[i] == Cref[i], "C[%d] written on error", i);
    /* and a valid call after all that works */
    KT_OK(kern_gemm(ctx, &ta, &tb, &tc, &p));
    for (i = 0; i < 6; i++)
        KT_CHECK(C[i * 5] == (float)(4 * i * 4 + 6), "C[%d,0]=%g", i, C[i * 5]);
    kern_gemm_packed_b_free(ctx, pb);
    kern_gemm_packed_b_free(ctx, pbh);
}

KT_MAIN()
