/* kern-run — load a kern graph (text IR) and its weights (safetensors),
 * bind the symbolic dims, run it and print a per-node profile.
 *
 *   kern-run MODEL.kg [WEIGHTS.safetensors] [options]
 *
 *   --bind B=1,L=128     values of the symbolic dims (also the plan's upper
 *                        bound); with --inputs they default to the inputs'
 *   --inputs FILE        inputs by name from a safetensors file (else random:
 *                        floats N(0,1); names containing "mask" zeros; ids
 *                        feeding an embedding uniform over its rows; other
 *                        integers 0)
 *   --out FILE           write the outputs to a safetensors file (by name)
 *   --random-weights     fill weights the file does not hold with N(0, 0.02)
 *                        (to try an architecture without a checkpoint)
 *   --threads N          (default: one per CPU)     --isa LEVEL (kern_isa_name: avx2, avx512, amx...)
 *   --runs N             timed runs after one warm-up (default 10)
 *   --check              numerics checker: the unfused graph on the scalar
 *                        path vs the planned one, first node beyond tolerance
 *   --no-fuse            plan without any pass
 *   --quantize GLOBS     linears to run int8-dynamic ("*" = all)
 *   --sparsify GLOBS     linears to prune to 2:4 and run sparse
 *   --dot FILE           the planned graph as Graphviz DOT
 *   --report             print what each pass did
 *   --top N              profile rows (default all)
 *   --peak-gflops X, --peak-gbs Y   peaks for the share-of-peak column
 *                        (default: LIMITS.md's per-thread figures x threads)
 *   --seed N
 *
 * Exit status: 0 ok (and the checker agreed), 1 an error (message on
 * stderr), 2 bad usage, 3 the checker found a node beyond tolerance.
 */
#ifndef KT_LINKED /* make links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(void) {
    fprintf(stderr,
            "usage: kern-run MODEL.kg [WEIGHTS.safetensors] [--bind B=1,L=128] [--inputs FILE]\n"
            "       [--out FILE] [--random-weights] [--threads N] [--isa LEVEL (kern_isa_name: avx2, avx512, amx...)]\n"
            "       [--runs N] [--check] [--no-fuse] [--quantize GLOBS] [--sparsify GLOBS]\n"
            "       [--dot FILE] [--report] [--top N] [--peak-gflops X] [--peak-gbs Y] [--seed N]\n");
}

static int fail(const char *what) {
    fprintf(stderr, "kern-run: %s: %s\n", what, kern_last_error());
    return 1;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double normal(void) {
    double u1 = ((double)(rnd() >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(rnd() >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static void fill_normal(void *p, kern_dtype dt, int64_t n, double scale) {
    int64_t i;
    for (i = 0; i < n; i++) {
        float v = (float)(normal() * scale);
        if (dt == KERN_F32) ((float *)p)[i] = v;
        else if (dt == KERN_BF16) ((uint16_t *)p)[i] = kern_f32_to_bf16(v);
        else if (dt == KERN_F16) ((uint16_t *)p)[i] = kern_f32_to_f16(v);
    }
}

/* rows of the embedding table that input v feeds (0 if none) */
static int64_t embedding_rows(const kern_graph *g, kern_graph_val v) {
    int i;
    for (i = 0; i < kern_graph_n_nodes(g); i++) {
        kern_graph_node_desc d;
        kern_graph_val_info t;
        if (kern_graph_node_get(g, i, &d) || d.op != KERN_GRAPH_OP_EMBEDDING || d.inputs[0] != v)
            continue;
        if (kern_graph_val_get(g, d.inputs[1], &t) == KERN_OK && t.ndim == 2 && t.dims[0] > 0)
            return t.dims[0];
    }
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *model = NULL, *weights = NULL, *bind = NULL, *inputs_path = NULL, *out_path = NULL;
    const char *dot_path = NULL, *quant = NULL, *sparse = NULL, *isa_s = NULL;
    int threads = 0, runs = 10, check = 0, nofuse = 0, report = 0, top = 0, random_weights = 0;
    double peak_gf = 0, peak_gb = 0;
    kern_ctx *ctx = NULL;
    kern_ctx_params cp;
    kern_graph *g = NULL;
    kern_safetensors *wst = NULL, *ist = NULL;
    kern_graph_plan *p = NULL;
    kern_graph_plan_params pp;
    int64_t sv[KERN_GRAPH_MAX_SYMBOLS];
    kern_tensor *in = NULL, *out = NULL;
    void **bufs = NULL;
    int n_in, n_out, i, rc = 0;
    char bindbuf[512];

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
#define ARG(name) (strcmp(a, name) == 0 && i + 1 < argc)
        if (ARG("--bind")) bind = argv[++i];
        else if (ARG("--inputs")) inputs_path = argv[++i];
        else if (ARG("--out")) out_path = argv[++i];
        else if (ARG("--threads")) threads = atoi(argv[++i]);
        else if (ARG("--isa")) isa_s = argv[++i];
        else if (ARG("--runs")) runs = atoi(argv[++i]);
        else if (ARG("--quantize")) quant = argv[++i];
        else if (ARG("--sparsify")) sparse = argv[++i];
        else if (ARG("--dot")) dot_path = argv[++i];
        else if (ARG("--top")) top = atoi(argv[++i]);
        else if (ARG("--peak-gflops")) peak_gf = atof(argv[++i]);
        else if (ARG("--peak-gbs")) peak_gb = atof(argv[++i]);
        else if (ARG("--seed")) rng_state = strtoull(argv[++i], NULL, 10);
        else if (strcmp(a, "--check") == 0) check = 1;
        else if (strcmp(a, "--no-fuse") == 0) nofuse = 1;
        else if (strcmp(a, "--report") == 0) report = 1;
        else if (strcmp(a, "--random-weights") == 0) random_weights = 1;
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { usage(); return 0; }
        else if (a[0] == '-') { fprintf(stderr, "kern-run: unknown option %s\n", a); usage(); return 2; }
        else if (!model) model = a;
        else if (!weights) weights = a;
        else { usage(); return 2; }
#undef ARG
    }
    if (!model || runs < 0 || threads < 0) { usage(); return 2; }

    memset(&cp, 0, sizeof cp);
    cp.n_threads = threads;
    if (isa_s) {
        kern_isa all[KERN_ISA_COUNT];
        int i, n = kern_isa_list(all, KERN_ISA_COUNT, 0), found = 0;
        for (i = 0; i < n && !found; i++)
            if (strcmp(isa_s, kern_isa_name(all[i])) == 0) { cp.isa_cap = all[i]; found = 1; }
        if (!found) {
            fprintf(stderr, "kern-run: --isa %s: one of", isa_s);
            for (i = 0; i < n; i++) fprintf(stderr, " %s", kern_isa_name(all[i]));
            fprintf(stderr, "\n");
            return 2;
        }
    }
    if (kern_ctx_create(&cp, &ctx)) return fail("context");
    threads = kern_ctx_threads(ctx);
    if (kern_graph_load_ir(ctx, model, &g)) { rc = fail("loading the model"); goto done; }
    if (weights) {
        if (kern_safetensors_open(ctx, weights, NULL, &wst)) { rc = fail("loading the weights"); goto done; }
        if (kern_graph_bind_safetensors(g, wst, KERN_GRAPH_BORROW) && !random_weights) {
            rc = fail("binding the weights");
            goto done;
        }
    }
    if (random_weights) { /* every weight still without data */
        int v, nv = 0;
        for (v = 1;; v++) {
            kern_graph_val_info info;
            if (kern_graph_val_get(g, v, &info)) break;
            nv++;
            if (info.kind == KERN_GRAPH_VAL_WEIGHT && !info.has_data) {
                kern_tensor t;
                int64_t n;
                void *buf;
                char name[160];
                int d;
                snprintf(name, sizeof name, "%s", info.name);
                for (n = 1, d = 0; d < info.ndim; d++) n *= info.dims[d];
                buf = malloc((size_t)(n ? n : 1) * kern_dtype_size(info.dtype));
                if (!buf) { fprintf(stderr, "kern-run: out of memory\n"); rc = 1; goto done; }
                if (kern_dtype_is_float(info.dtype)) fill_normal(buf, info.dtype, n, 0.02);
                else memset(buf, 0, (size_t)n * kern_dtype_size(info.dtype));
                if (kern_tensor_init(&t, buf, info.dtype, info.ndim, info.dims)) { free(buf); rc = fail(name); goto done; }
                if (kern_graph_bind_weight(g, name, &t, KERN_GRAPH_COPY)) { free(buf); rc = fail(name); goto done; }
                free(buf);
            }
        }
        (void)nv;
    }

    n_in = kern_graph_n_inputs(g);
    n_out = kern_graph_n_outputs(g);
    in = (kern_tensor *)calloc((size_t)n_in + 1, sizeof *in);
    out = (kern_tensor *)calloc((size_t)n_out + 1, sizeof *out);
    bufs = (void **)calloc((size_t)n_in + 1, sizeof *bufs);
    if (!in || !out || !bufs) { fprintf(stderr, "kern-run: out of memory\n"); rc = 1; goto done; }
    memset(sv, 0, sizeof sv);
    if (inputs_path && kern_safetensors_open(ctx, inputs_path, NULL, &ist)) { rc = fail("--inputs"); goto done; }
    if (bind) { /* B=1,L=128 */
        const char *s = bind;
        while (*s) {
            const char *eq = strchr(s, '='), *end = strchr(s, ',');
            int k, found = 0;
            if (!end) end = s + strlen(s);
            if (!eq || eq > end) { fprintf(stderr, "kern-run: --bind %s: NAME=VALUE,...\n", bind); rc = 2; goto done; }
            for (k = 0; k < kern_graph_n_symbols(g); k++)
                if (strlen(kern_graph_symbol_name(g, k)) == (size_t)(eq - s) &&
                    strncmp(kern_graph_symbol_name(g, k), s, (size_t)(eq - s)) == 0) {
                    sv[k] = atoll(eq + 1);
                    found = 1;
                }
            if (!found) {
                fprintf(stderr, "kern-run: --bind: '%.*s' is not a dim of the model\n", (int)(eq - s), s);
                rc = 2;
                goto done;
            }
            s = *end ? end + 1 : end;
        }
    }
    for (i = 0; i < n_in; i++) {
        kern_graph_val v = kern_graph_input_at(g, i);
        kern_graph_val_info info;
        int64_t shape[KERN_MAX_DIMS], n = 1;
        int d;
        kern_graph_val_get(g, v, &info);
        if (ist) {
            if (kern_safetensors_tensor(ist, info.name, &in[i])) { rc = fail("--inputs"); goto done; }
            continue;
        }
        if (!bind && kern_graph_n_symbols(g) > 0) {
            fprintf(stderr, "kern-run: the model has symbolic dims: give --bind (or --inputs)\n");
            rc = 2;
            goto done;
        }
        for (d = 0; d < info.ndim; d++) {
            if (kern_graph_dim_eval(g, info.dims[d], sv, &shape[d])) { rc = fail(info.name); goto done; }
            n *= shape[d];
        }
        bufs[i] = calloc((size_t)(n ? n : 1), kern_dtype_size(info.dtype));
        if (!bufs[i]) { fprintf(stderr, "kern-run: out of memory\n"); rc = 1; goto done; }
        if (kern_dtype_is_float(info.dtype) && !strstr(info.name, "mask")) {
            fill_normal(bufs[i], info.dtype, n, 1.0);
        } else if (info.dtype == KERN_I32 || info.dtype == KERN_I64) {
            int64_t rows = embedding_rows(g, v), j;
            for (j = 0; j < n && rows > 0; j++) {
                int64_t id = (int64_t)(rnd() % (uint64_t)rows);
                if (info.dtype == KERN_I64) ((int64_t *)bufs[i])[j] = id;
                else ((int32_t *)bufs[i])[j] = (int32_t)id;
            }
        }
        kern_tensor_init(&in[i], bufs[i], info.dtype, info.ndim, shape);
    }
    if (ist && !bind) { /* the bound is what the inputs hold */
        int k, n = 0;
        bindbuf[0] = 0;
        for (k = 0; k < kern_graph_n_symbols(g); k++) {
            /* find the symbol alone in an input dim */
            int j, d, found = 0;
            int64_t dk;
            kern_graph_symbol(g, kern_graph_symbol_name(g, k), &dk);
            for (j = 0; j < n_in && !found; j++) {
                kern_graph_val_info info;
                kern_graph_val_get(g, kern_graph_input_at(g, j), &info);
                for (d = 0; d < info.ndim && !found; d++)
                    if (info.dims[d] == dk) {
                        sv[k] = in[j].shape[d];
                        found = 1;
                    }
            }
            n += snprintf(bindbuf + n, sizeof bindbuf - (size_t)n, "%s%s=%lld", k ? "," : "",
                          kern_graph_symbol_name(g, k), (long long)sv[k]);
        }
        bind = bindbuf;
    }

    memset(&pp, 0, sizeof pp);
    pp.bind = bind;
    pp.profile = 1;
    pp.quantize = quant;
    pp.sparsify = sparse;
    if (nofuse) pp.disable = KERN_GRAPH_PASS_ALL;
    {
        double t0 = now();
        if (kern_graph_plan_create(g, ctx, &pp, &p)) { rc = fail("planning"); goto done; }
        {
            kern_graph_plan_stats st;
            kern_graph_plan_stats_get(p, &st);
            printf("kern-run: %s: %d nodes -> %d after the passes (%d steps, %d rewrites), bind %s\n",
                   model, st.n_nodes_graph, st.n_nodes, st.n_steps, st.n_fused, bind ? bind : "-");
            printf("kern-run: arena %.2f MiB (max-live bound %.2f MiB, all intermediates %.2f MiB), "
                   "prepacked %.2f MiB, plan %.2f ms (prepack %.2f ms)\n",
                   st.arena_bytes / 1048576.0, st.max_live_bytes / 1048576.0, st.sum_bytes / 1048576.0,
                   st.packed_bytes / 1048576.0, (now() - t0) * 1e3, st.prepack_seconds * 1e3);
        }
    }
    if (report) fputs(kern_graph_plan_report(p), stdout);
    if (dot_path) {
        size_t n;
        char *buf;
        FILE *f;
        kern_graph_plan_dot(p, NULL, 0, &n);
        buf = (char *)malloc(n + 1);
        kern_graph_plan_dot(p, buf, n + 1, &n);
        f = fopen(dot_path, "w");
        if (!f || fwrite(buf, 1, n, f) != n) {
            fprintf(stderr, "kern-run: cannot write %s\n", dot_path);
            rc = 1;
        }
        if (f) fclose(f);
        free(buf);
        if (rc) goto done;
    }
    {
        double *t = (double *)malloc(sizeof(double) * (size_t)(runs + 1));
        int r;
        if (kern_graph_run(p, in, n_in, out, n_out)) { free(t); rc = fail("run"); goto done; }
        kern_graph_plan_profile_reset(p);
        for (r = 0; r < runs; r++) {
            double t0 = now();
            memset(out, 0, sizeof *out * (size_t)n_out);
            if (kern_graph_run(p, in, n_in, out, n_out)) { free(t); rc = fail("run"); goto done; }
            t[r] = now() - t0;
        }
        if (runs > 0) {
            kern_graph_profile_params q;
            size_t n;
            char *buf;
            qsort(t, (size_t)runs, sizeof(double), cmp_double);
            printf("kern-run: %d runs on %d threads: median %.3f ms, min %.3f ms\n", runs, threads,
                   t[runs / 2] * 1e3, t[0] * 1e3);
            memset(&q, 0, sizeof q);
            q.peak_gflops = peak_gf > 0 ? peak_gf : 116.0 * threads; /* LIMITS.md FP32 FMA */
            q.peak_gbs = peak_gb > 0 ? peak_gb : (threads > 1 ? 45.0 : 27.0); /* DRAM read */
            q.top = top;
            kern_graph_plan_profile(p, &q, NULL, 0, &n);
            buf = (char *)malloc(n + 1);
            kern_graph_plan_profile(p, &q, buf, n + 1, &n);
            fputs(buf, stdout);
            free(buf);
        }
        free(t);
    }
    for (i = 0; i < n_out; i++) {
        char s[128];
        kern_graph_val_info info;
        kern_graph_val_get(g, kern_graph_output_at(g, i), &info);
        printf("output %s: %s %s\n", info.name, kern_dtype_name(out[i].dtype), kern_shape_str(&out[i], s, sizeof s));
    }
    if (out_path) {
        kern_safetensors_item *items = (kern_safetensors_item *)calloc((size_t)n_out + 1, sizeof *items);
        for (i = 0; i < n_out; i++) {
            kern_graph_val_info info;
            kern_graph_val_get(g, kern_graph_output_at(g, i), &info);
            items[i].name = info.name;
            items[i].tensor = &out[i];
        }
        if (kern_safetensors_save(ctx, out_path, items, n_out, NULL)) rc = fail(out_path);
        free(items);
        if (rc) goto done;
    }
    if (check) {
        kern_graph_check_result res;
        pp.profile = 0;
        if (kern_graph_check(g, ctx, &pp, in, n_in, &res)) { rc = fail("check"); goto done; }
        fputs(res.report, stdout);
        if (res.ok) {
            printf("check: ok (%d values compared, largest relative error %.3g)\n", res.compared,
                   res.max_rel_err);
        } else {
            printf("check: node '%s' is beyond tolerance (relative error %.3g)\n", res.first_bad,
                   res.max_rel_err);
            rc = 3;
        }
    }
done:
    kern_graph_plan_free(p);
    if (bufs)
        for (i = 0; i < kern_graph_n_inputs(g); i++) free(bufs[i]);
    free(bufs);
    free(in);
    free(out);
    kern_safetensors_free(ctx, ist);
    kern_graph_destroy(g);
    kern_safetensors_free(ctx, wst);
    kern_ctx_destroy(ctx);
    return rc;
}
