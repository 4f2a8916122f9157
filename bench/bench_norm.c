/* bench_norm.c — family `norm`: fused residual + LayerNorm/RMSNorm + GELU,
 * forward and backward, against our own unfused sequence of separate
 * passes (impl `kern_unfused`: add, then norm, then GELU, each reading and
 * writing memory, as eager PyTorch does). PyTorch eager and torch.compile
 * run from bench/peers/norm.py with the same case strings and byte counts.
 *
 * Cases: "<dir>/<op>/<dtype>/R<rows>/H<hidden>"
 *   dir   fwd | bwd
 *   op    ln_gelu  y = gelu(layer_norm(x) * w + b)
 *         res_ln   h = x + r; y = layer_norm(h) * w + b   (h is an output)
 *         rms      y = rms_norm(x) * w
 *   dtype f32 | bf16 (every tensor of the case, weights included)
 * Bytes per call (the same for every impl): the minimal traffic of the
 * fused op, counted once per tensor:
 *   fwd ln_gelu: x, w, b read; y written.
 *   fwd res_ln:  x, r, w, b read; y, h written.
 *   fwd rms:     x, w read; y written.
 *   bwd ln_gelu: dy, x, w, b, mean, rstd read; dx, dw, db written.
 *   bwd res_ln:  dy, h, dh (gradient arriving at h), w, mean, rstd read;
 *                dx, dw, db written.
 *   bwd rms:     dy, x, w, rstd read; dx, dw written.
 * Peak kind: L2 when the bytes fit the 1 MiB L2 (the 1x4096 cases), DRAM
 * otherwise.
 */
#include "kern_norm.h"
#include "kbench.h"

#include <stdio.h>
#include <stdlib.h>

enum { OP_LN_GELU, OP_RES_LN, OP_RMS };
static const char *op_names[] = {"ln_gelu", "res_ln", "rms"};

typedef struct ncase {
    int op, bwd;
    kern_dtype dt;
    int64_t R, H;
    double bytes;
} ncase;

static void *balloc(size_t bytes, kern_dtype dt, uint64_t seed) {
    void *p = kbench_aligned(bytes);
    if (p) kbench_fill(p, dt, (int64_t)(bytes / kern_dtype_size(dt)), seed);
    return p;
}

static double case_bytes(const ncase *c) {
    double es = (double)kern_dtype_size(c->dt), m = (double)(c->R * c->H) * es;
    double v = (double)c->H * es, st = (double)c->R * 4;
    if (!c->bwd) {
        if (c->op == OP_LN_GELU) return 2 * m + 2 * v;
        if (c->op == OP_RES_LN) return 4 * m + 2 * v;
        return 2 * m + v;
    }
    if (c->op == OP_LN_GELU) return 3 * m + 4 * v + 2 * st;
    if (c->op == OP_RES_LN) return 4 * m + 3 * v + 2 * st;
    return 3 * m + 2 * v + st;
}

/* All buffers of one case (freed when the case ends: the suite would not
 * fit in memory otherwise). */
typedef struct bufs {
    void *x, *r, *y, *h, *z, *w, *b, *dy, *dh, *dx, *dz, *dw, *db;
    float *mean, *rstd;
} bufs;

static void bufs_make(bufs *B, const ncase *c) {
    size_t m = (size_t)(c->R * c->H) * kern_dtype_size(c->dt), v = (size_t)c->H * kern_dtype_size(c->dt);
    memset(B, 0, sizeof *B);
    B->x = balloc(m, c->dt, 1);
    B->r = balloc(m, c->dt, 2);
    B->y = balloc(m, c->dt, 3);
    B->h = balloc(m, c->dt, 4);
    B->z = balloc(m, c->dt, 5);
    B->w = balloc(v, c->dt, 6);
    B->b = balloc(v, c->dt, 7);
    B->dw = balloc(v, c->dt, 8);
    B->db = balloc(v, c->dt, 9);
    B->mean = (float *)balloc((size_t)c->R * 4, KERN_F32, 10);
    B->rstd = (float *)balloc((size_t)c->R * 4, KERN_F32, 11);
    if (c->bwd) {
        B->dy = balloc(m, c->dt, 12);
        B->dh = balloc(m, c->dt, 13);
        B->dx = balloc(m, c->dt, 14);
        B->dz = balloc(m, c->dt, 15);
    }
}
static void bufs_free(bufs *B) {
    free(B->x); free(B->r); free(B->y); free(B->h); free(B->z); free(B->w); free(B->b);
    free(B->dw); free(B->db); free(B->mean); free(B->rstd);
    free(B->dy); free(B->dh); free(B->dx); free(B->dz);
}

static void run(kbench_state *st, void *user, int unfused) {
    const ncase *c = (const ncase *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    bufs B;
    kern_tensor x, r, y, h, z, w, b, dy, dh, dx, dz, dw, db, mean, rstd;
    kern_norm_params fp, fp_plain;
    kern_norm_backward_params bp;
    kern_status s = KERN_OK;
    if (unfused && c->op == OP_RMS) {
        kbench_skip(st, "RMSNorm with weight is one op: there is nothing to unfuse");
        return;
    }
    bufs_make(&B, c);
    if (!B.x || !B.r || !B.y || !B.h || !B.z || (c->bwd && (!B.dy || !B.dh || !B.dx || !B.dz))) {
        bufs_free(&B);
        kbench_skip(st, "out of memory");
        return;
    }
    x = kern_tensor_2d(B.x, c->dt, c->R, c->H);
    r = kern_tensor_2d(B.r, c->dt, c->R, c->H);
    y = kern_tensor_2d(B.y, c->dt, c->R, c->H);
    h = kern_tensor_2d(B.h, c->dt, c->R, c->H);
    z = kern_tensor_2d(B.z, c->dt, c->R, c->H);
    dy = kern_tensor_2d(B.dy, c->dt, c->R, c->H);
    dh = kern_tensor_2d(B.dh, c->dt, c->R, c->H);
    dx = kern_tensor_2d(B.dx, c->dt, c->R, c->H);
    dz = kern_tensor_2d(B.dz, c->dt, c->R, c->H);
    w = kern_tensor_1d(B.w, c->dt, c->H);
    b = kern_tensor_1d(B.b, c->dt, c->H);
    dw = kern_tensor_1d(B.dw, c->dt, c->H);
    db = kern_tensor_1d(B.db, c->dt, c->H);
    mean = kern_tensor_1d(B.mean, KERN_F32, c->R);
    rstd = kern_tensor_1d(B.rstd, KERN_F32, c->R);

    /* the fused forward of the case */
    memset(&fp, 0, sizeof fp);
    fp.weight = &w;
    if (c->op != OP_RMS) fp.bias = &b;
    if (c->op == OP_LN_GELU) fp.act = KERN_ACT_GELU;
    if (c->op == OP_RES_LN) {
        fp.residual = &r;
        fp.residual_out = &h;
    }
    if (c->op == OP_RMS) fp.norm = KERN_NORM_RMS;
    /* its pieces: the norm alone */
    fp_plain = fp;
    fp_plain.act = KERN_ACT_NONE;
    fp_plain.residual = fp_plain.residual_out = NULL;

    memset(&bp, 0, sizeof bp);
    bp.norm = fp.norm;
    bp.act = fp.act;
    bp.weight = &w;
    bp.bias = fp.bias;
    bp.rstd = &rstd;
    if (c->op != OP_RMS) bp.mean = &mean;
    bp.dweight = &dw;
    if (c->op != OP_RMS) bp.dbias = &db;

    if (c->bwd) { /* saved statistics (and z = the pre-activation, for the unfused GELU) */
        kern_norm_params sp = fp_plain;
        const kern_tensor *src = c->op == OP_RES_LN ? &h : &x;
        if (c->op == OP_RES_LN) s = kern_add(ctx, &x, &r, &h);
        if (c->op != OP_RMS) sp.mean = &mean;
        sp.rstd = &rstd;
        if (s == KERN_OK) s = kern_norm(ctx, src, &z, &sp);
    }
    if (!c->bwd && !unfused) {
        while (kbench_next(st)) s |= kern_norm(ctx, &x, &y, &fp);
    } else if (!c->bwd) {
        while (kbench_next(st)) {
            if (c->op == OP_LN_GELU) {
                s |= kern_norm(ctx, &x, &z, &fp_plain);
                s |= kern_gelu(ctx, &z, &y, KERN_ACT_GELU);
            } else {
                s |= kern_add(ctx, &x, &r, &h);
                s |= kern_norm(ctx, &h, &y, &fp_plain);
            }
        }
    } else if (!unfused) {
        kern_norm_backward_params p = bp;
        if (c->op == OP_RES_LN) p.dresidual = &dh;
        while (kbench_next(st)) s |= kern_norm_backward(ctx, &dy, c->op == OP_RES_LN ? &h : &x, &dx, &p);
    } else {
        kern_norm_backward_params p = bp;
        p.act = KERN_ACT_NONE;
        while (kbench_next(st)) {
            if (c->op == OP_LN_GELU) {
                s |= kern_gelu_backward(ctx, &dy, &z, &dz, KERN_ACT_GELU);
                s |= kern_norm_backward(ctx, &dz, &x, &dx, &p);
            } else {
                s |= kern_norm_backward(ctx, &dy, &h, &dz, &p);
                s |= kern_add(ctx, &dz, &dh, &dx);
            }
        }
    }
    kbench_use(B.y);
    kbench_use(B.dx);
    bufs_free(&B);
    if (s != KERN_OK) {
        kbench_skip(st, kern_last_error());
        return;
    }
    kbench_set_bytes(st, c->bytes);
}
static void run_kern(kbench_state *st, void *user) { run(st, user, 0); }
static void run_unfused(kbench_state *st, void *user) { run(st, user, 1); }

KBENCH_INIT(norm) {
    static const int64_t shapes[4][2] = {{4096, 768}, {4096, 4096}, {16384, 1024}, {1, 4096}};
    static const kern_dtype dts[2] = {KERN_F32, KERN_BF16};
    static ncase cases[2 * 3 * 2 * 4];
    int n = 0, dir, op, di, si, t;
    for (dir = 0; dir < 2; dir++)
        for (op = 0; op < 3; op++)
            for (di = 0; di < 2; di++)
                for (si = 0; si < 4; si++) {
                    ncase *c = &cases[n++];
                    char name[96];
                    c->op = op;
                    c->bwd = dir;
                    c->dt = dts[di];
                    c->R = shapes[si][0];
                    c->H = shapes[si][1];
                    c->bytes = case_bytes(c);
                    snprintf(name, sizeof name, "%s/%s/%s/R%lld/H%lld", dir ? "bwd" : "fwd", op_names[op],
                             kern_dtype_name(c->dt), (long long)c->R, (long long)c->H);
                    for (t = 1; t <= 2; t++) {
                        kbench_peak pk = c->bytes <= 1024.0 * 1024.0 ? KBENCH_PEAK_L2 : KBENCH_PEAK_DRAM;
                        kbench_add("norm", name, "kern", t, pk, run_kern, c);
                        kbench_add("norm", name, "kern_unfused", t, pk, run_unfused, c);
                    }
                }
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("norm", "fwd/res_ln/f32/R4096/H768");
    kbench_headline("norm", "fwd/ln_gelu/f32/R4096/H768");
}
