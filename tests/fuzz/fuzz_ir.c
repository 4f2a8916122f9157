/* libFuzzer harness for the graph IR reader (kern_graph_read_ir) and, for
 * inputs that parse, the writer, the planner and the executor.
 *
 * Contract checked on every input:
 *   - the status is a kern_status; an error leaves *out untouched, sets a
 *     message, and frees everything it allocated (counted through the
 *     context's allocator);
 *   - a graph that parses writes IR that reads back and writes the same
 *     bytes (the round trip);
 *   - when its weights are small, the graph is planned with every symbol
 *     bound to 3 and zero weights, and run on zero inputs: every call
 *     returns a status, nothing crashes, nothing leaks.
 * Build: make fuzz FUZZERS=ir (clang -fsanitize=fuzzer,address,undefined).
 * Without libFuzzer, -DKF_REPLAY (the corpus replay of make test) or
 * -DKERN_FUZZ_MAIN gives a main that runs the files
 * named on the command line. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz.h"

static char *fz_write(const kern_graph *g, size_t *n) {
    char *b;
    FZ_CHECK(kern_graph_write_ir(g, NULL, 0, n) == KERN_OK);
    b = (char *)malloc(*n + 1);
    FZ_CHECK(kern_graph_write_ir(g, b, *n + 1, n) == KERN_OK);
    return b;
}

static void fz_plan_and_run(kern_graph *g) {
    int64_t bounds[KERN_GRAPH_MAX_SYMBOLS];
    int i, v, n_in = kern_graph_n_inputs(g), n_out = kern_graph_n_outputs(g);
    kern_graph_plan_params pp;
    kern_graph_plan *p = NULL;
    kern_tensor in[64], out[64];
    void *bufs[64];
    kern_status st;
    kern_ctx *ctx = NULL;
    kern_ctx_params cp;
    if (n_in > 64 || n_out > 64 || kern_graph_n_nodes(g) > 200) return;
    for (i = 0; i < KERN_GRAPH_MAX_SYMBOLS; i++) bounds[i] = 3;
    /* zero weights, when small */
    for (v = 1;; v++) {
        kern_graph_val_info info;
        int64_t n = 1;
        int d;
        if (kern_graph_val_get(g, v, &info)) break;
        if (info.kind != KERN_GRAPH_VAL_WEIGHT || info.has_data) continue;
        for (d = 0; d < info.ndim; d++) n *= info.dims[d];
        if (n > (1 << 16)) return;
        {
            void *buf = calloc((size_t)(n ? n : 1), 8);
            kern_tensor t;
            char name[160];
            snprintf(name, sizeof name, "%s", info.name);
            if (kern_tensor_init(&t, buf, info.dtype, info.ndim, info.dims) == KERN_OK)
                kern_graph_bind_weight(g, name, &t, KERN_GRAPH_COPY);
            free(buf);
        }
    }
    memset(&pp, 0, sizeof pp);
    pp.bounds = bounds;
    pp.n_bounds = kern_graph_n_symbols(g);
    pp.cache_size = 1;
    /* a context of its own: the kernels' scratch goes with it */
    memset(&cp, 0, sizeof cp);
    cp.n_threads = 1;
    cp.allocator.alloc = fz_alloc;
    cp.allocator.free = fz_free;
    if (kern_ctx_create(&cp, &ctx)) abort();
    st = kern_graph_plan_create(g, ctx, &pp, &p);
    FZ_CHECK(st >= 0 && st < KERN_STATUS_COUNT);
    if (st) {
        FZ_CHECK(kern_last_error()[0] != 0);
        FZ_CHECK(p == NULL);
        kern_ctx_destroy(ctx);
        return;
    }
    memset(bufs, 0, sizeof bufs);
    for (i = 0; i < n_in; i++) {
        kern_graph_val_info info;
        int64_t shape[KERN_MAX_DIMS], n = 1;
        int d, ok = 1;
        kern_graph_val_get(g, kern_graph_input_at(g, i), &info);
        for (d = 0; d < info.ndim; d++) {
            if (kern_graph_dim_eval(g, info.dims[d], bounds, &shape[d])) ok = 0;
            n *= ok ? shape[d] : 1;
        }
        if (!ok || n > (1 << 16)) {
            int k;
            for (k = 0; k < i; k++) free(bufs[k]);
            kern_graph_plan_free(p);
            kern_ctx_destroy(ctx);
            return;
        }
        bufs[i] = calloc((size_t)(n ? n : 1), 8);
        kern_tensor_init(&in[i], bufs[i], info.dtype, info.ndim, shape);
        if (!in[i].data) in[i].data = bufs[i];
    }
    memset(out, 0, sizeof out);
    st = kern_graph_run(p, in, n_in, out, n_out);
    FZ_CHECK(st >= 0 && st < KERN_STATUS_COUNT);
    if (st) FZ_CHECK(kern_last_error()[0] != 0);
    for (i = 0; i < n_in; i++) free(bufs[i]);
    kern_graph_plan_free(p);
    kern_ctx_destroy(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kern_graph *g = (kern_graph *)(uintptr_t)0x10, *g2 = NULL;
    long before;
    kern_status st;
    kern_ctx *ctx = fz_ctx();
    if (size > (1 << 16)) return 0;
    before = live;
    kern_clear_error();
    st = kern_graph_read_ir(ctx, (const char *)data, size, &g);
    FZ_CHECK(st >= 0 && st < KERN_STATUS_COUNT);
    if (st != KERN_OK) {
        FZ_CHECK(g == (kern_graph *)(uintptr_t)0x10);
        FZ_CHECK(kern_last_error()[0] != 0);
        FZ_CHECK(live == before);
        return 0;
    }
    {
        size_t n1, n2;
        char *a = fz_write(g, &n1), *b;
        FZ_CHECK(kern_graph_read_ir(ctx, a, n1, &g2) == KERN_OK);
        b = fz_write(g2, &n2);
        FZ_CHECK(n1 == n2 && memcmp(a, b, n1) == 0);
        free(a);
        free(b);
        kern_graph_destroy(g2);
    }
    fz_plan_and_run(g);
    kern_graph_destroy(g);
    FZ_CHECK(live == before);
    return 0;
}

#if defined(KF_REPLAY) || defined(KERN_FUZZ_MAIN)
#include "fz_replay.h"
#endif
