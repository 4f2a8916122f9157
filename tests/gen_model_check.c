/* gen_model_check.c -- a header written by gen/kern_gen.py against the
 * graph executor (mk/gen.mk builds one binary per model).
 *
 * Compiled with -DGEN_HEADER="NAME.h" -DGEN_NAME=NAME -DGEN_UNAME=NAME (upper
 * case) -DGEN_IR="model.kg" and GEN_DISABLE, the executor's passes to switch
 * off so its arithmetic order is the one the generated code uses, and
 * GEN_QUANTIZE and GEN_SPARSIFY, the executor's params.quantize and
 * params.sparsify (the header's --quantize and --sparsify). Random
 * weights (i8 ones over the whole s8 range, weights named *scale* in
 * [1e-3, 2e-2]) and inputs (i8 codes over the whole s8 range, other integers
 * in [0, GEN_IDMAX), inputs named *mask* 0 or
 * -10000); the generated model's outputs must equal kern_graph_run's bit
 * for bit (within GEN_TOL of each output's largest magnitude when it is
 * defined: GEMM instances), on every ISA level this CPU runs, at 1 and 2 threads, and again
 * over an arena full of garbage; each generated run starts from the inputs
 * the executor got, and the inputs afterwards (the KV caches kv_append
 * writes in place, nothing else) must equal the executor's too. kern's
 * implementation is its own object
 * (build/gen/kern_impl.o), so each model compiles alone. */
#include "kern.h"
#include "kt.h"
#include GEN_HEADER

#ifndef GEN_DISABLE
#define GEN_DISABLE 0u
#endif
#ifndef GEN_QUANTIZE
#define GEN_QUANTIZE NULL /* the executor's params.quantize (kern_gen.py --quantize) */
#endif
#ifndef GEN_SPARSIFY
#define GEN_SPARSIFY NULL /* the executor's params.sparsify (kern_gen.py --sparsify) */
#endif
#ifndef GEN_BIG
#define GEN_BIG 0 /* 1: a full-size model (BERT-base): uniform weights, the
                     scalar level at one thread and one pass, then only the
                     best level */
#endif
#ifndef GEN_IDMAX
#define GEN_IDMAX 2
#endif

#define GEN_CAT_(a, b) a##b
#define GEN_CAT(a, b) GEN_CAT_(a, b)
#define G(s) GEN_CAT(GEN_NAME, s)
#define GU(s) GEN_CAT(GEN_UNAME, s)

static int64_t gen_numel(const int64_t *shape, int nd) {
    int64_t n = 1;
    int i;
    for (i = 0; i < nd; i++) n *= shape[i];
    return n;
}

static kern_tensor gen_tensor(void *data, kern_dtype dt, int nd, const int64_t *shape) {
    kern_tensor t;
    int64_t acc = 1;
    int i;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dt;
    t.ndim = nd;
    for (i = nd - 1; i >= 0; i--) {
        t.shape[i] = shape[i];
        t.stride[i] = acc;
        acc *= shape[i];
    }
    return t;
}

/* The first element where got differs from want: bit for bit, or (with
 * GEN_TOL: another summation order, the GEMM instances) within GEN_TOL of
 * want's largest magnitude, as the executor's checker (i8 codes within one
 * step: a quantized KV-cache row). -1 when none. */
static int64_t gen_first_diff(const void *got, const void *want, kern_dtype dt, int64_t n) {
    int64_t j;
    size_t es = kern_dtype_size(dt);
#ifdef GEN_TOL
    double mx = 0, tol;
    for (j = 0; j < n; j++) mx = fabs(kt_get(want, dt, j)) > mx ? fabs(kt_get(want, dt, j)) : mx;
    tol = dt == KERN_I8 ? 1.0 : GEN_TOL * mx;
    for (j = 0; j < n; j++)
        if (!(fabs(kt_get(got, dt, j) - kt_get(want, dt, j)) <= tol)) return j;
    (void)es;
#else
    for (j = 0; j < n; j++)
        if (memcmp((const char *)got + j * (int64_t)es, (const char *)want + j * (int64_t)es, es)) return j;
#endif
    return -1;
}

/* got (the generated run's input afterwards, or its output) against the
 * executor's: gen_first_diff's rule, the first difference named */
static void gen_expect_same(kern_ctx *ctx, int threads, int pass, const char *what, const char *name,
                            const void *got, const void *want, kern_dtype dt, int64_t n) {
    int64_t bad = gen_first_diff(got, want, dt, n);
    KT_CHECK(bad < 0, "%s threads=%d pass %d: %s '%s' element %lld: generated %.9g, executor %.9g",
             kern_isa_name(kern_ctx_isa(ctx)), threads, pass, what, name, (long long)bad,
             bad < 0 ? 0.0 : kt_get(got, dt, bad), bad < 0 ? 0.0 : kt_get(want, dt, bad));
}

static void gen_compare(kern_ctx *ctx, int threads) {
    kern_graph *g = NULL;
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    G(_model) m;
    void *wdata[GU(_N_WEIGHTS) + 1], *idata[GU(_N_INPUTS) + 1];
    void *ifresh[GU(_N_INPUTS) + 1], *iwant[GU(_N_INPUTS) + 1];
    size_t ibytes[GU(_N_INPUTS) + 1];
    void *want[GU(_N_OUTPUTS) + 1], *got[GU(_N_OUTPUTS) + 1];
    kern_tensor in[GU(_N_INPUTS) + 1], out[GU(_N_OUTPUTS) + 1];
    unsigned char *arena;
    size_t abytes, asize;
    kt_rng r = kt_rng_make(7);
    int i, pass;
    memset(&m, 0, sizeof m);
    KT_OK(kern_graph_load_ir(ctx, GEN_IR, &g));
    if (!g) return;
    for (i = 0; i < GU(_N_WEIGHTS); i++) {
        int64_t n = gen_numel(G(_weight_shapes)[i], G(_weight_ndim)[i]);
        kern_tensor t;
        int64_t j;
        wdata[i] = kt_alloc((size_t)(n ? n : 1) * kern_dtype_size(G(_weight_dtypes)[i]), "w");
        if (G(_weight_dtypes)[i] == KERN_I8) /* int8 codes: the whole s8 range */
            for (j = 0; j < n; j++) kt_set(wdata[i], KERN_I8, j, (double)kt_randint(&r, -128, 128));
        else if (strstr(G(_weight_names)[i], "scale")) /* qlinear scales: finite, > 0 */
            kt_fill_uniform(&r, wdata[i], G(_weight_dtypes)[i], n, 1e-3, 2e-2);
        else if (GEN_BIG) /* uniform with the normal's spread: the normal's log
                               and cos were half of a BERT-base check */
            kt_fill_uniform(&r, wdata[i], G(_weight_dtypes)[i], n, -0.866, 0.866);
        else
            kt_fill_normal(&r, wdata[i], G(_weight_dtypes)[i], n, 0.5);
        t = gen_tensor(wdata[i], G(_weight_dtypes)[i], G(_weight_ndim)[i], G(_weight_shapes)[i]);
        KT_OK(kern_graph_bind_weight(g, G(_weight_names)[i], &t, KERN_GRAPH_BORROW));
    }
    for (i = 0; i < GU(_N_INPUTS); i++) {
        kern_dtype dt = G(_input_dtypes)[i];
        int64_t n = gen_numel(G(_input_shapes)[i], G(_input_ndim)[i]), j;
        KT_REQUIRE(kern_graph_find(g, G(_input_names)[i]) == kern_graph_input_at(g, i),
                   "input %d is '%s' in both", i, G(_input_names)[i]);
        idata[i] = kt_alloc((size_t)(n ? n : 1) * kern_dtype_size(dt), "in");
        if (dt == KERN_I8) { /* int8 codes (an i8 KV cache): the whole s8 range */
            for (j = 0; j < n; j++) kt_set(idata[i], dt, j, (double)kt_randint(&r, -128, 128));
        } else if (!kern_dtype_is_float(dt)) {
            for (j = 0; j < n; j++) kt_set(idata[i], dt, j, (double)kt_randint(&r, 0, GEN_IDMAX));
        } else if (strstr(G(_input_names)[i], "mask")) {
            for (j = 0; j < n; j++) kt_set(idata[i], dt, j, j % 7 == 3 ? -10000.0 : 0.0);
        } else {
            kt_fill_normal(&r, idata[i], dt, n, 1.0);
        }
        in[i] = gen_tensor(idata[i], dt, G(_input_ndim)[i], G(_input_shapes)[i]);
        /* the inputs as the executor gets them: kv_append writes the
         * caller's KV caches in place, so each generated run starts from
         * this copy and its inputs afterwards must equal the executor's */
        ibytes[i] = (size_t)(n ? n : 1) * kern_dtype_size(dt);
        ifresh[i] = kt_alloc(ibytes[i], "in0");
        iwant[i] = kt_alloc(ibytes[i], "in1");
        memcpy(ifresh[i], idata[i], ibytes[i]);
    }
    for (i = 0; i < GU(_N_OUTPUTS); i++) {
        int64_t n = gen_numel(G(_output_shapes)[i], G(_output_ndim)[i]);
        size_t bytes = (size_t)(n ? n : 1) * kern_dtype_size(G(_output_dtypes)[i]);
        want[i] = kt_alloc(bytes, "want");
        got[i] = kt_alloc(bytes, "got");
        memset(want[i], 0, bytes);
        out[i] = gen_tensor(want[i], G(_output_dtypes)[i], G(_output_ndim)[i], G(_output_shapes)[i]);
    }
    memset(&pp, 0, sizeof pp);
    pp.bind = GU(_BIND);
    pp.disable = GEN_DISABLE;
    pp.quantize = GEN_QUANTIZE;
    pp.sparsify = GEN_SPARSIFY;
    KT_OK(kern_graph_plan_create(g, ctx, &pp, &p));
    KT_OK(kern_graph_run(p, in, GU(_N_INPUTS), out, GU(_N_OUTPUTS)));
    for (i = 0; i < GU(_N_INPUTS); i++) {
        memcpy(iwant[i], idata[i], ibytes[i]);
        /* NAME_input_written marks exactly the inputs the executor wrote
         * (a cache row may be written with its old bytes: only one way) */
        if (!G(_input_written)[i])
            KT_CHECK(memcmp(iwant[i], ifresh[i], ibytes[i]) == 0,
                     "input '%s' is not marked written but the executor wrote it", G(_input_names)[i]);
    }
    KT_OK(G(_prepare)(ctx, (const void *const *)wdata, &m));
    abytes = G(_arena_bytes)(&m);
    asize = GU(_ARENA_SIZE); /* a variable: 0 for a graph without intermediates */
    KT_CHECK(abytes >= asize, "arena_bytes %zu < ARENA_SIZE", abytes);
    arena = (unsigned char *)kt_alloc(abytes ? abytes : 1, "arena");
    for (pass = 0; pass < (GEN_BIG && kern_ctx_isa(ctx) == KERN_ISA_SCALAR ? 1 : 2); pass++) {
        if (pass) memset(arena, 0xFF, abytes); /* NaN garbage */
        for (i = 0; i < GU(_N_OUTPUTS); i++) {
            int64_t n = gen_numel(G(_output_shapes)[i], G(_output_ndim)[i]);
            memset(got[i], 0xA5, (size_t)(n ? n : 1) * kern_dtype_size(G(_output_dtypes)[i]));
        }
        for (i = 0; i < GU(_N_INPUTS); i++) memcpy(idata[i], ifresh[i], ibytes[i]);
        KT_OK(G(_run)(ctx, &m, (const void *const *)idata, got, arena));
        for (i = 0; i < GU(_N_INPUTS); i++)
            gen_expect_same(ctx, threads, pass, "input", G(_input_names)[i], idata[i], iwant[i],
                            G(_input_dtypes)[i], gen_numel(G(_input_shapes)[i], G(_input_ndim)[i]));
        for (i = 0; i < GU(_N_OUTPUTS); i++)
            gen_expect_same(ctx, threads, pass, "output", G(_output_names)[i], got[i], want[i],
                            G(_output_dtypes)[i], gen_numel(G(_output_shapes)[i], G(_output_ndim)[i]));
    }
    G(_release)(ctx, &m);
    kern_graph_plan_free(p);
    kern_graph_destroy(g);
    kt_free(arena);
    for (i = 0; i < GU(_N_WEIGHTS); i++) kt_free(wdata[i]);
    for (i = 0; i < GU(_N_INPUTS); i++) {
        kt_free(idata[i]);
        kt_free(ifresh[i]);
        kt_free(iwant[i]);
    }
    for (i = 0; i < GU(_N_OUTPUTS); i++) {
        kt_free(want[i]);
        kt_free(got[i]);
    }
}

KT_TEST(gen_model_matches_executor) {
    int threads;
    for (threads = 1; threads <= 2; threads++) {
        KT_FOR_EACH_ISA(isa, ctx, threads) {
            /* a full-size model: the scalar level once, and the best level
             * (the levels between share its task decomposition and run in
             * the small models' checks) */
            if (GEN_BIG && threads > 1 && isa == KERN_ISA_SCALAR) continue;
            if (GEN_BIG && isa != KERN_ISA_SCALAR && isa != kt_isa_list_[kt_isa_n_ - 1]) continue;
            gen_compare(ctx, threads);
        }
    }
}

/* Weights with fixed patterns (i8 codes over the s8 range, scales 0.01,
 * floats in [-0.25, 0.25)) into wdata[], one kt_alloc each. */
static void gen_fixed_weights(void **wdata) {
    int i;
    for (i = 0; i < GU(_N_WEIGHTS); i++) {
        int64_t n = gen_numel(G(_weight_shapes)[i], G(_weight_ndim)[i]), j;
        kern_dtype dt = G(_weight_dtypes)[i];
        wdata[i] = kt_alloc((size_t)(n ? n : 1) * kern_dtype_size(dt), "w");
        for (j = 0; j < n; j++)
            kt_set(wdata[i], dt, j, dt == KERN_I8 ? (double)(j % 255 - 127)
                                    : strstr(G(_weight_names)[i], "scale") ? 0.01 : (double)(j % 13) / 26.0 - 0.25);
    }
}

/* NAME_run allocates nothing, from its first call on (from its second
 * with NAME_DATA_SCRATCH: scatter_reduce and spmm_reduce size their
 * scratch from the index data): the kernels' scratch is the arena's
 * workspace (sized at prepare for the context);
 * on a context of another thread count it falls back to that context's
 * scratch and gives the same bits. */
KT_TEST(gen_model_run_allocates_nothing) {
    kt_falloc fa;
    kern_ctx *ctx, *other;
    G(_model) m;
    void *wdata[GU(_N_WEIGHTS) + 1], *idata[GU(_N_INPUTS) + 1];
    void *y0[GU(_N_OUTPUTS) + 1], *y1[GU(_N_OUTPUTS) + 1];
    size_t yb[GU(_N_OUTPUTS) + 1];
    unsigned char *arena;
    int64_t calls;
    int i;
    if (GEN_BIG) return; /* the small models check it; 110 M weights would double the time */
    memset(&fa, 0, sizeof fa);
    ctx = kt_ctx_falloc(2, KERN_ISA_AUTO, 0, &fa);
    KT_REQUIRE(ctx, "context");
    gen_fixed_weights(wdata);
    for (i = 0; i < GU(_N_INPUTS); i++) {
        int64_t n = gen_numel(G(_input_shapes)[i], G(_input_ndim)[i]), j;
        kern_dtype dt = G(_input_dtypes)[i];
        idata[i] = kt_alloc((size_t)(n ? n : 1) * kern_dtype_size(dt), "in");
        for (j = 0; j < n; j++) kt_set(idata[i], dt, j, kern_dtype_is_float(dt) ? (double)(j % 7) / 7.0 : 1.0);
    }
    for (i = 0; i < GU(_N_OUTPUTS); i++) {
        yb[i] = (size_t)(gen_numel(G(_output_shapes)[i], G(_output_ndim)[i]) + 1) *
                kern_dtype_size(G(_output_dtypes)[i]);
        y0[i] = kt_alloc(yb[i], "y0");
        y1[i] = kt_alloc(yb[i], "y1");
    }
    KT_OK(G(_prepare)(ctx, (const void *const *)wdata, &m));
    arena = (unsigned char *)kt_alloc(G(_arena_bytes)(&m) + 1, "arena");
    calls = fa.calls;
    KT_OK(G(_run)(ctx, &m, (const void *const *)idata, y0, arena));
    if (GU(_DATA_SCRATCH)) calls = fa.calls; /* scatter/spmm: the first run sizes the scratch */
    KT_OK(G(_run)(ctx, &m, (const void *const *)idata, y0, arena));
    KT_CHECK(fa.calls == calls, "NAME_run allocated %lld times", (long long)(fa.calls - calls));
    other = kt_ctx(1, KERN_ISA_AUTO);
    KT_OK(G(_run)(other, &m, (const void *const *)idata, y1, arena));
    for (i = 0; i < GU(_N_OUTPUTS); i++)
        KT_CHECK(memcmp(y0[i], y1[i], yb[i] - kern_dtype_size(G(_output_dtypes)[i])) == 0,
                 "output '%s' differs on a 1-thread context", G(_output_names)[i]);
    G(_release)(ctx, &m);
    kern_ctx_destroy(ctx);
    KT_CHECK(fa.live == 0, "%lld allocations live after release", (long long)fa.live);
    kt_free(arena);
    for (i = 0; i < GU(_N_WEIGHTS); i++) kt_free(wdata[i]);
    for (i = 0; i < GU(_N_INPUTS); i++) kt_free(idata[i]);
    for (i = 0; i < GU(_N_OUTPUTS); i++) {
        kt_free(y0[i]);
        kt_free(y1[i]);
    }
}

/* NAME_prepare under allocation failure: refusing each of its allocations
 * in turn gives KERN_ERR_NOMEM (every packing path of the model: kern_gemm
 * and kern_qweight packs, 2:4 compression and its pruning copy, the dense
 * expansion on AMX, instance weights, merged Q/K/V), a zeroed model, and
 * nothing left allocated once the context is gone; past the last one it
 * succeeds. */
KT_TEST(gen_model_prepare_out_of_memory) {
    void *wdata[GU(_N_WEIGHTS) + 1];
    int64_t k;
    int i, done = 0;
    if (GEN_BIG) return;
    gen_fixed_weights(wdata);
    for (k = 1; k < 10000 && !done; k++) {
        kt_falloc fa;
        kern_ctx *ctx;
        G(_model) m;
        kern_status st;
        memset(&fa, 0, sizeof fa);
        ctx = kt_ctx_falloc(2, KERN_ISA_AUTO, 0, &fa);
        KT_REQUIRE(ctx, "context");
        fa.fail_at = fa.calls + k;
        st = G(_prepare)(ctx, (const void *const *)wdata, &m);
        if (st == KERN_OK) {
            KT_CHECK(fa.refused == 0, "prepare succeeded past a refused allocation (%lld)", (long long)k);
            G(_release)(ctx, &m);
            done = 1;
        } else {
            size_t b;
            int zero = 1;
            KT_CHECK(st == KERN_ERR_NOMEM, "allocation %lld refused: %s, want KERN_ERR_NOMEM (%s)",
                     (long long)k, kern_status_name(st), kern_last_error());
            for (b = 0; b < sizeof m; b++) zero &= ((const unsigned char *)&m)[b] == 0;
            KT_CHECK(zero, "allocation %lld refused: the model is not zeroed", (long long)k);
        }
        kern_ctx_destroy(ctx);
        KT_CHECK(fa.live == 0, "allocation %lld refused: %lld allocations live", (long long)k,
                 (long long)fa.live);
        KT_CHECK(fa.bad_free == 0, "allocation %lld refused: bad frees", (long long)k);
    }
    KT_CHECK(done, "prepare never succeeded");
    for (i = 0; i < GU(_N_WEIGHTS); i++) kt_free(wdata[i]);
}

KT_TEST(gen_model_bad_arguments) {
    G(_model) m;
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_SCALAR);
    KT_ERROR(G(_prepare)(ctx, NULL, NULL), KERN_ERR_ARG, "NULL");
    KT_ERROR(G(_run)(ctx, NULL, NULL, NULL, NULL), KERN_ERR_ARG, "NULL");
    memset(&m, 0, sizeof m);
    G(_release)(ctx, &m);
}

KT_MAIN()
