/* test_sdpa_cuda.cu — kern_cuda_sdpa (kernels/cuda/kern_sdpa.cuh) against a
 * plain double-precision reference in this file: forward, backward (fast
 * and deterministic), varlen, every option, f16 and bf16, head dims 64, 96,
 * 128, 256 and padded ones, [B,H,L,D] / [B,L,H,D] / padded / misaligned
 * views, the dropout mask bit for bit against kern_dropout_keep, and every
 * documented error (status, message, outputs untouched).
 *
 * Built two ways from this one source:
 *   nvcc (make cuda): runs on a GPU (make test-cuda) with the full grid;
 *   g++ -DKERN_CUDA_EMULATE (make test): runs the kernels on the CPU through
 *   kernels/cuda/kern_cuda_emu.cuh with a reduced grid (small shapes; the
 *   emulator runs every CUDA thread as a coroutine).
 *
 * Tolerances (kt_tol of the dtype, scaled; the reference is exact in
 * double from the same rounded inputs):
 *   out: kt_tol_scaled(dt, 4): f16 rtol 8e-3 atol 4e-4, bf16 rtol 6.4e-2
 *        atol 4e-3, plus 2u * sum_j p_j z_j |v_j| per element. The kernel
 *        rounds P to the input dtype before P V, as FlashAttention does:
 *        each weight carries a relative error up to u (2^-11 f16, 2^-8
 *        bf16), so out moves by up to u * sum_j p_j |v_j| (check_out).
 *   lse: kt_tol_scaled(f32, 20) (rtol 2e-4, atol 2e-5): q.k accumulated in
 *        f32 over D <= 256 products and exp2 approximated by ex2.approx
 *        (relative error 2^-22) on the GPU.
 *   dq, dk, dv: an absolute bound 4 u * max|ref| (+ kt_tol rtol), plus a
 *        normalized MSE below 16 u^2. Gradients are sums over up to Lq
 *        (dk, dv) or Lk (dq) terms whose factors (P, dS) were rounded to
 *        the dtype before the tensor-core products, so their error scales
 *        with the size of the whole tensor rather than of each entry. dq
 *        and dk also carry the rounding of delta (ref_backward, check_grad).
 */
/* make cuda links the implementation compiled once by nvcc
 * (build/cuda/kern_sdpa_cuda.o, -DKERN_SDPA_CUDA_LINKED); alone, or as the
 * emulator build, the file carries it. */
#ifndef KERN_SDPA_CUDA_LINKED
#define KERN_IMPLEMENTATION
#endif
#include "kern_sdpa.cuh"
#include "kt.h"

#include <math.h>

#include <vector>

#ifdef KERN_CUDA_EMULATE
#define EMU 1
#else
#define EMU 0
#endif

/* ---------------------------------------------------------- device memory */

static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        fprintf(stdout, "cudaMalloc(%zu) failed: %s (this build needs a GPU; make test runs the emulated "
                        "build of this file)\n",
                bytes, cudaGetErrorString(cudaGetLastError()));
        exit(2);
    }
    return p;
}
static void dev_free(void *p) { cudaFree(p); }
static void to_dev(void *d, const void *h, size_t n) { cudaMemcpy(d, h, n, cudaMemcpyHostToDevice); }
static void to_host(void *h, const void *d, size_t n) { cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost); }
static void dev_sync(void) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stdout, "CUDA error: %s\n", cudaGetErrorString(e));
        exit(2);
    }
}

/* A device buffer with a host mirror. */
struct dbuf {
    void *d;
    std::vector<unsigned char> h;
    dbuf() : d(NULL) {}
    void make(size_t bytes) {
        if (bytes < 16) bytes = 16; /* empty tensors still get a real buffer */
        h.assign(bytes, 0);
        d = dev_alloc(bytes);
    }
    void upload() { to_dev(d, h.data(), h.size()); }
    void download() { to_host(h.data(), d, h.size()); }
    void poison() {
        memset(h.data(), 0xFF, h.size());
        upload();
    }
    ~dbuf() {
        if (d) dev_free(d);
    }
};

/* ---------------------------------------------------------- a test case */

struct cfg {
    int B, Hq, Hkv, Lq, Lk, D, Dv;
    kern_dtype dt;
    int layout;    /* 0: [B,H,L,D] memory; 1: [B,L,H,D] */
    int pad;       /* extra elements after each row's D (strided view) */
    int misalign;  /* device base offset in elements (disables cp.async) */
    int causal;    /* 0, 1 top-left, 2 bottom-right */
    int window;
    int64_t wl, wr;
    float softcap, scale, dropout_p;
    uint64_t seed, offset;
    int mask;      /* 0 none, 1 bool [Lq,Lk], 2 f32 [B,1,Lq,Lk], 3 bf16/f16
                      [Hq,1,Lk] additive, 4 bool [B,Hq,Lq,Lk] with empty rows */
    std::vector<int> klens;            /* per batch, empty = none */
    std::vector<int> seq_q, seq_k;     /* varlen when non-empty */
    int lse;       /* request lse */
    int splits;    /* params.num_splits */
    int bwd;       /* 0 none, 1 fast, 2 deterministic, 3 both */
    double vscale; /* scale of q and k values (score magnitude) */
    cfg()
        : B(1), Hq(1), Hkv(1), Lq(16), Lk(16), D(64), Dv(64), dt(KERN_F16), layout(0), pad(0),
          misalign(0), causal(0), window(0), wl(-1), wr(-1), softcap(0), scale(0), dropout_p(0),
          seed(1234), offset(0), mask(0), lse(1), splits(0), bwd(0), vscale(1.0) {}
};

static int is_varlen(const cfg &c) { return !c.seq_q.empty(); }

/* Element offset of (b, h, i, x) in an operand with H heads, L rows and X
 * columns (plus the pad), in the case's layout; varlen operands are
 * [T, H, X] with the sequence's first row t0. */
struct layout_t {
    int varlen, lay, H, L, X, pad;
    int64_t s[3]; /* strides for b, h, row */
    void init(const cfg &c, int H_, int L_, int X_, int64_t T) {
        varlen = is_varlen(c);
        lay = c.layout;
        H = H_;
        L = L_;
        X = X_;
        pad = c.pad;
        const int64_t xp = X + pad;
        if (varlen) {
            s[0] = 0;
            s[1] = xp;
            s[2] = (int64_t)H * xp;
            (void)T;
        } else if (lay == 0) {
            s[0] = (int64_t)H * L * xp;
            s[1] = (int64_t)L * xp;
            s[2] = xp;
        } else {
            s[0] = (int64_t)L * H * xp;
            s[1] = xp;
            s[2] = (int64_t)H * xp;
        }
    }
    int64_t at(int b, int h, int64_t row, int x) const { return b * s[0] + h * s[1] + row * s[2] + x; }
};

/* All buffers of a case. */
struct problem {
    cfg c;
    int nseq;
    std::vector<int64_t> q0, k0; /* varlen starts */
    std::vector<int> lq, lk, lkv; /* rows, keys owned, keys visible */
    int64_t Tq, Tk;
    layout_t Lq_, Lk_, Lv_, Lo_; /* q, k, v, out (dq/dout like q/out) */
    size_t nq, nk, nv, no;      /* elements incl. padding */
    dbuf q, k, v, o, dout, dq, dk, dv, lse, mask, klens, cuq, cuk;
    kern_tensor tq, tk, tv, to, tdout, tdq, tdk, tdv, tlse, tmask, tklens, tcuq, tcuk;
    kern_cuda_sdpa_params p;
    size_t es;
};

static kern_tensor view(void *d, kern_dtype dt, int nd, const int64_t *shape, const int64_t *stride) {
    kern_tensor t;
    memset(&t, 0, sizeof t);
    t.data = d;
    t.dtype = dt;
    t.ndim = nd;
    for (int i = 0; i < nd; i++) {
        t.shape[i] = shape[i];
        t.stride[i] = stride[i];
    }
    return t;
}
static kern_tensor op_view(const problem &P, const layout_t &L, void *d, int64_t T) {
    int64_t shape[4], stride[4];
    if (L.varlen) {
        shape[0] = T; shape[1] = L.H; shape[2] = L.X;
        stride[0] = L.s[2]; stride[1] = L.s[1]; stride[2] = 1;
        return view(d, P.c.dt, 3, shape, stride);
    }
    shape[0] = P.c.B; shape[1] = L.H; shape[2] = L.L; shape[3] = L.X;
    stride[0] = L.s[0]; stride[1] = L.s[1]; stride[2] = L.s[2]; stride[3] = 1;
    return view(d, P.c.dt, 4, shape, stride);
}
static size_t op_elems(const cfg &c, const layout_t &L, int64_t T) {
    if (L.varlen) return (size_t)(T * L.s[2]) + c.misalign;
    return (size_t)c.B * L.s[0] + c.misalign;
}

static double geth(const problem &P, const dbuf &b, int64_t e) {
    return kt_get(b.h.data(), P.c.dt, e + P.c.misalign);
}

/* Builds inputs (random), poisoned outputs and the views. */
static void problem_init(problem &P, const cfg &c) {
    P.c = c;
    P.es = 2;
    const int varlen = is_varlen(c);
    P.nseq = varlen ? (int)c.seq_q.size() : c.B;
    P.q0.assign(P.nseq, 0);
    P.k0.assign(P.nseq, 0);
    P.lq.assign(P.nseq, c.Lq);
    P.lk.assign(P.nseq, c.Lk);
    P.Tq = P.Tk = 0;
    if (varlen) {
        for (int s = 0; s < P.nseq; s++) {
            P.q0[s] = P.Tq;
            P.k0[s] = P.Tk;
            P.lq[s] = c.seq_q[s];
            P.lk[s] = c.seq_k[s];
            P.Tq += c.seq_q[s];
            P.Tk += c.seq_k[s];
        }
    }
    P.lkv = P.lk;
    for (int s = 0; s < (int)c.klens.size() && s < P.nseq; s++)
        P.lkv[s] = c.klens[s] < P.lk[s] ? c.klens[s] : P.lk[s];
    P.Lq_.init(c, c.Hq, c.Lq, c.D, P.Tq);
    P.Lk_.init(c, c.Hkv, c.Lk, c.D, P.Tk);
    P.Lv_.init(c, c.Hkv, c.Lk, c.Dv, P.Tk);
    P.Lo_.init(c, c.Hq, c.Lq, c.Dv, P.Tq);
    P.nq = op_elems(c, P.Lq_, P.Tq);
    P.nk = op_elems(c, P.Lk_, P.Tk);
    P.nv = op_elems(c, P.Lv_, P.Tk);
    P.no = op_elems(c, P.Lo_, P.Tq);
    kt_rng r = kt_rng_make(0x5d9a);
    P.q.make(P.nq * 2);
    P.k.make(P.nk * 2);
    P.v.make(P.nv * 2);
    P.dout.make(P.no * 2);
    memset(P.q.h.data(), 0xFF, P.q.h.size()); /* padding stays NaN: never read */
    memset(P.k.h.data(), 0xFF, P.k.h.size());
    memset(P.v.h.data(), 0xFF, P.v.h.size());
    memset(P.dout.h.data(), 0xFF, P.dout.h.size());
    struct fill_t {
        dbuf *b;
        const layout_t *L;
        int64_t T;
        double sc;
    } fills[4] = {{&P.q, &P.Lq_, P.Tq, c.vscale}, {&P.k, &P.Lk_, P.Tk, c.vscale},
                  {&P.v, &P.Lv_, P.Tk, 1.0}, {&P.dout, &P.Lo_, P.Tq, 1.0}};
    for (int f = 0; f < 4; f++) {
        const layout_t &L = *fills[f].L;
        const int nb = varlen ? 1 : c.B;
        const int64_t rows = varlen ? fills[f].T : L.L;
        for (int b = 0; b < nb; b++)
            for (int h = 0; h < L.H; h++)
                for (int64_t i = 0; i < rows; i++)
                    for (int x = 0; x < L.X; x++)
                        kt_set(fills[f].b->h.data(), c.dt, L.at(b, h, i, x) + c.misalign,
                               kt_normal(&r) * fills[f].sc);
    }
    P.q.upload();
    P.k.upload();
    P.v.upload();
    P.dout.upload();
    P.o.make(P.no * 2);
    P.o.poison();
    P.dq.make(P.nq * 2);
    P.dq.poison();
    P.dk.make(P.nk * 2);
    P.dk.poison();
    P.dv.make(P.nv * 2);
    P.dv.poison();
    const int64_t nl = varlen ? (int64_t)c.Hq * P.Tq : (int64_t)c.B * c.Hq * c.Lq;
    P.lse.make((size_t)nl * 4);
    P.lse.poison();
    char *qd = (char *)P.q.d + c.misalign * 2, *kd = (char *)P.k.d + c.misalign * 2;
    char *vd = (char *)P.v.d + c.misalign * 2, *od = (char *)P.o.d + c.misalign * 2;
    P.tq = op_view(P, P.Lq_, qd, P.Tq);
    P.tk = op_view(P, P.Lk_, kd, P.Tk);
    P.tv = op_view(P, P.Lv_, vd, P.Tk);
    P.to = op_view(P, P.Lo_, od, P.Tq);
    P.tdout = op_view(P, P.Lo_, (char *)P.dout.d + c.misalign * 2, P.Tq);
    P.tdq = op_view(P, P.Lq_, (char *)P.dq.d + c.misalign * 2, P.Tq);
    P.tdk = op_view(P, P.Lk_, (char *)P.dk.d + c.misalign * 2, P.Tk);
    P.tdv = op_view(P, P.Lv_, (char *)P.dv.d + c.misalign * 2, P.Tk);
    {
        int64_t shape[3], stride[3];
        if (varlen) {
            shape[0] = c.Hq; shape[1] = P.Tq;
            stride[0] = P.Tq; stride[1] = 1;
            P.tlse = view(P.lse.d, KERN_F32, 2, shape, stride);
        } else {
            shape[0] = c.B; shape[1] = c.Hq; shape[2] = c.Lq;
            stride[0] = (int64_t)c.Hq * c.Lq; stride[1] = c.Lq; stride[2] = 1;
            P.tlse = view(P.lse.d, KERN_F32, 3, shape, stride);
        }
    }
    memset(&P.p, 0, sizeof P.p);
    P.p.sdpa.is_causal = c.causal == 1;
    P.p.sdpa.causal_bottom_right = c.causal == 2;
    P.p.sdpa.window_set = c.window;
    P.p.sdpa.window_left = c.wl;
    P.p.sdpa.window_right = c.wr;
    P.p.sdpa.softcap = c.softcap;
    P.p.sdpa.scale = c.scale;
    P.p.sdpa.dropout_p = c.dropout_p;
    P.p.sdpa.seed = c.seed;
    P.p.sdpa.offset = c.offset;
    P.p.sdpa.enable_gqa = c.Hq != c.Hkv;
    P.p.num_splits = c.splits;
    P.p.sdpa.lse = c.lse ? &P.tlse : NULL;
    if (c.mask) {
        int64_t shape[4], stride[4];
        int nd;
        kern_dtype mdt;
        size_t n;
        if (c.mask == 1) {
            nd = 2; mdt = KERN_BOOL;
            shape[0] = c.Lq; shape[1] = c.Lk; stride[0] = c.Lk; stride[1] = 1;
        } else if (c.mask == 2) {
            nd = 4; mdt = KERN_F32;
            shape[0] = c.B; shape[1] = 1; shape[2] = c.Lq; shape[3] = c.Lk;
            stride[0] = (int64_t)c.Lq * c.Lk; stride[1] = 0; stride[2] = c.Lk; stride[3] = 1;
        } else if (c.mask == 3) {
            nd = 3; mdt = c.dt;
            shape[0] = c.Hq; shape[1] = 1; shape[2] = c.Lk;
            stride[0] = c.Lk; stride[1] = 0; stride[2] = 1;
        } else {
            nd = 4; mdt = KERN_BOOL;
            shape[0] = c.B; shape[1] = c.Hq; shape[2] = c.Lq; shape[3] = c.Lk;
            stride[0] = (int64_t)c.Hq * c.Lq * c.Lk; stride[1] = (int64_t)c.Lq * c.Lk;
            stride[2] = c.Lk; stride[3] = 1;
        }
        n = 1;
        for (int i = 0; i < nd; i++) n *= (size_t)shape[i];
        P.mask.make(n * kern_dtype_size(mdt));
        for (size_t e = 0; e < n; e++) {
            double x;
            if (mdt == KERN_BOOL) {
                x = kt_uniform(&r, 0, 1) < 0.7;
                if (c.mask == 4 && (e / (size_t)c.Lk) % 5 == 2) x = 0; /* empty rows */
            } else {
                x = kt_uniform(&r, 0, 1) < 0.15 ? -INFINITY : kt_uniform(&r, -2, 2);
            }
            kt_set(P.mask.h.data(), mdt, (int64_t)e, x);
        }
        P.mask.upload();
        P.tmask = view(P.mask.d, mdt, nd, shape, stride);
        P.p.sdpa.attn_mask = &P.tmask;
    }
    if (!c.klens.empty()) {
        int64_t shape[1] = {(int64_t)c.klens.size()}, stride[1] = {1};
        P.klens.make(c.klens.size() * 8);
        for (size_t s = 0; s < c.klens.size(); s++) ((int64_t *)P.klens.h.data())[s] = c.klens[s];
        P.klens.upload();
        P.tklens = view(P.klens.d, KERN_I64, 1, shape, stride);
        P.p.sdpa.k_lens = &P.tklens;
    }
    if (varlen) {
        int64_t shape[1] = {P.nseq + 1}, stride[1] = {1};
        P.cuq.make((size_t)(P.nseq + 1) * 4);
        P.cuk.make((size_t)(P.nseq + 1) * 4);
        for (int s = 0; s <= P.nseq; s++) {
            ((int32_t *)P.cuq.h.data())[s] = (int32_t)(s < P.nseq ? P.q0[s] : P.Tq);
            ((int32_t *)P.cuk.h.data())[s] = (int32_t)(s < P.nseq ? P.k0[s] : P.Tk);
        }
        P.cuq.upload();
        P.cuk.upload();
        P.tcuq = view(P.cuq.d, KERN_I32, 1, shape, stride);
        P.tcuk = view(P.cuk.d, KERN_I32, 1, shape, stride);
    }
}

/* ---------------------------------------------------------- reference */

static double mask_at(const problem &P, int b, int h, int i, int j, int *attend) {
    const cfg &c = P.c;
    *attend = 1;
    if (!c.mask) return 0;
    const kern_tensor &m = P.tmask;
    kern_tensor full;
    int64_t shape[4] = {c.B, c.Hq, c.Lq, c.Lk};
    kern_tensor_broadcast_to(&m, 4, shape, &full, "test", "mask");
    int64_t e = b * full.stride[0] + h * full.stride[1] + (int64_t)i * full.stride[2] +
                (int64_t)j * full.stride[3];
    double x = kt_get(P.mask.h.data(), m.dtype, e);
    if (m.dtype == KERN_BOOL) {
        *attend = x != 0;
        return 0;
    }
    return x;
}

/* Probabilities of one row (before dropout), the row's lse, and the
 * softcap derivative factor per key; returns 0 if no key is visible. */
static int ref_row(const problem &P, int b, int h, int i, std::vector<double> &pr,
                   std::vector<double> &gf, double *lse) {
    const cfg &c = P.c;
    const int hk = h / (c.Hq / c.Hkv), lq = P.lq[b], lk = P.lkv[b];
    const int64_t off = c.causal == 2 ? (int64_t)lk - lq : 0;
    const double scale = c.scale > 0 ? c.scale : 1.0 / sqrt((double)c.D);
    const int nk = P.lk[b];
    std::vector<double> s(nk);
    std::vector<int> vis(nk);
    double mx = -INFINITY;
    pr.assign(nk, 0.0);
    gf.assign(nk, scale);
    for (int j = 0; j < nk; j++) {
        int ok = j < lk;
        if (c.causal && j > i + off) ok = 0;
        if (c.window && c.wl >= 0 && j < i + off - c.wl) ok = 0;
        if (c.window && c.wr >= 0 && j > i + off + c.wr) ok = 0;
        double x = 0;
        for (int d = 0; d < c.D; d++)
            x += geth(P, P.q, P.Lq_.at(b, h, P.q0[b] + i, d)) * geth(P, P.k, P.Lk_.at(b, hk, P.k0[b] + j, d));
        x *= scale;
        if (c.softcap > 0) {
            double t = tanh(x / c.softcap);
            x = c.softcap * t;
            gf[j] = scale * (1 - t * t);
        }
        int att;
        x += mask_at(P, b, h, i, j, &att);
        if (!att) ok = 0;
        vis[j] = ok && x != -INFINITY;
        s[j] = x;
        if (vis[j] && x > mx) mx = x;
    }
    if (mx == -INFINITY) {
        *lse = -INFINITY;
        return 0;
    }
    double sum = 0;
    for (int j = 0; j < nk; j++)
        if (vis[j]) {
            pr[j] = exp(s[j] - mx);
            sum += pr[j];
        }
    for (int j = 0; j < nk; j++) pr[j] /= sum;
    *lse = mx + log(sum);
    return 1;
}

/* Dropout factor Z_ij: 1/(1-p) if kept, 0 if dropped (1 without dropout),
 * from the CPU mapping in kern_base.h. */
static double ref_z(const problem &P, int b, int h, int i, int j) {
    const cfg &c = P.c;
    if (c.dropout_p <= 0) return 1.0;
    uint64_t idx = (((uint64_t)b * c.Hq + h) * (uint64_t)c.Lq + i) * (uint64_t)c.Lk + j;
    return kern_dropout_keep(c.seed, c.offset, idx, kern_dropout_threshold(c.dropout_p))
               ? 1.0 / (1.0 - (double)c.dropout_p)
               : 0.0;
}

/* Forward reference: out [rows in (b, h, i) order][Dv], lse, and mag (like
 * out): sum_j p_j z_j |v_jd|, the size of what P V adds up (see check_out). */
static void ref_forward(const problem &P, std::vector<double> &out, std::vector<double> &lse,
                        std::vector<double> &mag) {
    const cfg &c = P.c;
    std::vector<double> pr, gf;
    out.clear();
    lse.clear();
    mag.clear();
    for (int b = 0; b < P.nseq; b++)
        for (int h = 0; h < c.Hq; h++)
            for (int i = 0; i < P.lq[b]; i++) {
                double l;
                const int hk = h / (c.Hq / c.Hkv);
                ref_row(P, b, h, i, pr, gf, &l);
                lse.push_back(l);
                for (int d = 0; d < c.Dv; d++) {
                    double acc = 0, m = 0;
                    for (int j = 0; j < P.lk[b]; j++)
                        if (pr[j] != 0) {
                            const double t = pr[j] * ref_z(P, b, h, i, j) *
                                             geth(P, P.v, P.Lv_.at(b, hk, P.k0[b] + j, d));
                            acc += t;
                            m += fabs(t);
                        }
                    out.push_back(acc);
                    mag.push_back(m);
                }
            }
}

/* Backward reference: dq like q rows, dk/dv like k rows, (b, h, row) order.
 * mq and mk bound the part of the kernel's error that the result's size
 * does not: delta = rowsum(dout o out) is taken from out rounded to the
 * dtype, so it carries an error up to u * dabs, dabs = sum_d |dout_d out_d|,
 * and dS = P o (Z dP - delta) passes it on as P * u * dabs * |gf|. When dS
 * cancels (one visible key with dropout: dq = dk = 0 exactly) that is all
 * that is left; mq / mk are sum_j p_j |gf_j| dabs |k_jd| (|q_id|). */
static void ref_backward(const problem &P, std::vector<double> &dq, std::vector<double> &dk,
                         std::vector<double> &dv, std::vector<double> &mq, std::vector<double> &mk) {
    const cfg &c = P.c;
    const int G = c.Hq / c.Hkv;
    std::vector<double> pr, gf;
    dq.clear();
    mq.clear();
    /* dk/dv indexed [b][hk][j][x] over the owned keys */
    std::vector<int64_t> kbase(P.nseq + 1, 0);
    for (int b = 0; b < P.nseq; b++) kbase[b + 1] = kbase[b] + (int64_t)c.Hkv * P.lk[b];
    dk.assign((size_t)kbase[P.nseq] * c.D, 0.0);
    dv.assign((size_t)kbase[P.nseq] * c.Dv, 0.0);
    mk.assign(dk.size(), 0.0);
    for (int b = 0; b < P.nseq; b++)
        for (int h = 0; h < c.Hq; h++)
            for (int i = 0; i < P.lq[b]; i++) {
                const int hk = h / G, nk = P.lk[b];
                double l;
                std::vector<double> dqrow(c.D, 0.0), mqrow(c.D, 0.0);
                if (ref_row(P, b, h, i, pr, gf, &l)) {
                    std::vector<double> dp(nk, 0.0), z(nk, 1.0), orow(c.Dv, 0.0);
                    double delta = 0, dabs = 0;
                    for (int j = 0; j < nk; j++) {
                        if (pr[j] == 0) continue;
                        z[j] = ref_z(P, b, h, i, j);
                        for (int d = 0; d < c.Dv; d++) {
                            const double vv = geth(P, P.v, P.Lv_.at(b, hk, P.k0[b] + j, d));
                            dp[j] += geth(P, P.dout, P.Lo_.at(b, h, P.q0[b] + i, d)) * vv;
                            orow[d] += pr[j] * z[j] * vv;
                        }
                        delta += pr[j] * z[j] * dp[j];
                    }
                    for (int d = 0; d < c.Dv; d++)
                        dabs += fabs(geth(P, P.dout, P.Lo_.at(b, h, P.q0[b] + i, d)) * orow[d]);
                    for (int j = 0; j < nk; j++) {
                        if (pr[j] == 0) continue;
                        const double ds = pr[j] * (z[j] * dp[j] - delta) * gf[j];
                        const double dsa = pr[j] * dabs * fabs(gf[j]);
                        const int64_t kr = kbase[b] + (int64_t)hk * nk + j;
                        for (int d = 0; d < c.D; d++) {
                            const double kv = geth(P, P.k, P.Lk_.at(b, hk, P.k0[b] + j, d));
                            const double qv = geth(P, P.q, P.Lq_.at(b, h, P.q0[b] + i, d));
                            dqrow[d] += ds * kv;
                            mqrow[d] += dsa * fabs(kv);
                            dk[kr * c.D + d] += ds * qv;
                            mk[kr * c.D + d] += dsa * fabs(qv);
                        }
                        for (int d = 0; d < c.Dv; d++)
                            dv[kr * c.Dv + d] +=
                                pr[j] * z[j] * geth(P, P.dout, P.Lo_.at(b, h, P.q0[b] + i, d));
                    }
                }
                dq.insert(dq.end(), dqrow.begin(), dqrow.end());
                mq.insert(mq.end(), mqrow.begin(), mqrow.end());
            }
}

/* ---------------------------------------------------------- comparisons */

static double unit_roundoff(kern_dtype dt) { return dt == KERN_BF16 ? 1.0 / 256 : 1.0 / 2048; }

/* out against the reference: kt_tol_scaled(dt, 4) plus 2u * mag per
 * element. The kernel rounds P to the dtype before P V, so each term
 * p_j z_j v_jd carries a relative error up to u and the sum an absolute one
 * up to u * mag; where the terms cancel (|out| << mag) that is larger than
 * a bound scaled by |out| or by a fixed atol (seen at 1.01x the old bound on
 * one of 200k values with an f16 mask and a window). */
static void check_out(const char *what, const std::vector<uint16_t> &got, kern_dtype dt,
                      const std::vector<double> &want, const std::vector<double> &mag) {
    KT_CHECK(got.size() == want.size(), "%s: %zu values, want %zu", what, got.size(), want.size());
    if (got.size() != want.size()) return;
    const kt_tol_t t = kt_tol_scaled(dt, 4);
    const double u = unit_roundoff(dt);
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < want.size(); i++) {
        const double g = kt_get(got.data(), dt, (int64_t)i), w = want[i];
        const double lim = t.atol + t.rtol * fabs(w) + 2 * u * mag[i];
        const double err = fabs(g - w);
        if (err <= lim) continue; /* NaN fails */
        if (bad < 3)
            KT_CHECK(0, "%s[%zu]: got %.9g want %.9g (limit %.3g: rtol %g atol %g + 2u * %.3g)", what, i, g, w, lim,
                     t.rtol, t.atol, mag[i]);
        if (!(err / lim <= worst)) worst = err / lim;
        bad++;
    }
    KT_CHECK(bad == 0, "%s: %zu of %zu values out of tolerance (worst %.3gx the limit)", what, bad, want.size(),
             worst);
}

/* Gathers the logical elements of an operand (b, h, row, x order; varlen
 * rows of each sequence) and checks that every other element (padding)
 * still holds the 0xFFFF poison. */
static std::vector<uint16_t> gather(const problem &P, dbuf &buf, const layout_t &L, int rows_q) {
    std::vector<uint16_t> out;
    buf.download();
    const uint16_t *h = (const uint16_t *)buf.h.data() + P.c.misalign;
    const size_t n = buf.h.size() / 2 - P.c.misalign;
    std::vector<char> seen(n, 0);
    for (int b = 0; b < P.nseq; b++)
        for (int hh = 0; hh < L.H; hh++) {
            const int nr = rows_q ? P.lq[b] : P.lk[b];
            const int64_t r0 = rows_q ? P.q0[b] : P.k0[b];
            for (int i = 0; i < nr; i++)
                for (int x = 0; x < L.X; x++) {
                    int64_t e = L.at(b, hh, r0 + i, x);
                    out.push_back(h[e]);
                    seen[(size_t)e] = 1;
                }
        }
    size_t bad = 0;
    for (size_t e = 0; e < n; e++)
        if (!seen[e] && h[e] != 0xFFFF) bad++;
    KT_CHECK(bad == 0, "%zu elements outside the logical view were written", bad);
    return out;
}

/* mag (NULL for dv): ref_backward's bound of the delta rounding. The
 * absolute bound is 4u * max|ref| + 2u * max(mag); the normalized MSE bound
 * 16u^2 gets 4u^2 sum mag^2 / sum ref^2 added (and holds for ref = 0). */
static void check_grad(const char *what, const std::vector<uint16_t> &got, kern_dtype dt,
                       const std::vector<double> &want, const std::vector<double> *mag) {
    double mx = 0, mm = 0, e_want = 0, e_mag = 0;
    for (size_t i = 0; i < want.size(); i++) {
        mx = fmax(mx, fabs(want[i]));
        e_want += want[i] * want[i];
    }
    if (mag)
        for (size_t i = 0; i < mag->size(); i++) {
            mm = fmax(mm, (*mag)[i]);
            e_mag += (*mag)[i] * (*mag)[i];
        }
    kt_tol_t t = kt_tol(dt);
    const double u = unit_roundoff(dt);
    t.atol += 4 * u * mx + 2 * u * mm;
    KT_CHECK(got.size() == want.size(), "%s: %zu values, want %zu", what, got.size(), want.size());
    if (got.size() != want.size()) return;
    kt_assert_close(what, got.data(), dt, want.data(), (int64_t)want.size(), t);
    double err = 0;
    for (size_t i = 0; i < want.size(); i++) {
        const double d = kt_get(got.data(), dt, (int64_t)i) - want[i];
        err += d * d;
    }
    const double lim = u * u * (16 * e_want + 4 * e_mag);
    KT_CHECK(err <= lim, "%s: normalized MSE %.3g > %.3g", what, e_want > 0 ? err / e_want : err,
             e_want > 0 ? lim / e_want : lim);
}

static kern_status call_forward(problem &P) {
    if (is_varlen(P.c))
        return kern_cuda_sdpa_varlen(NULL, &P.tq, &P.tk, &P.tv, &P.to, &P.tcuq, &P.tcuk, P.c.Lq, P.c.Lk,
                                     &P.p);
    return kern_cuda_sdpa(NULL, &P.tq, &P.tk, &P.tv, &P.to, &P.p);
}
static kern_status call_backward(problem &P) {
    if (is_varlen(P.c))
        return kern_cuda_sdpa_varlen_backward(NULL, &P.tq, &P.tk, &P.tv, &P.to, &P.tdout, &P.tlse, &P.tdq,
                                              &P.tdk, &P.tdv, &P.tcuq, &P.tcuk, P.c.Lq, P.c.Lk, &P.p);
    return kern_cuda_sdpa_backward(NULL, &P.tq, &P.tk, &P.tv, &P.to, &P.tdout, &P.tlse, &P.tdq, &P.tdk,
                                   &P.tdv, &P.p);
}

static void describe(const cfg &c) {
    kt_context("%s B=%d Hq=%d Hkv=%d Lq=%d Lk=%d D=%d Dv=%d layout=%d pad=%d mis=%d causal=%d "
               "win=%d(%lld,%lld) cap=%g drop=%g mask=%d klens=%d varlen=%d splits=%d",
               kern_dtype_name(c.dt), c.B, c.Hq, c.Hkv, c.Lq, c.Lk, c.D, c.Dv, c.layout, c.pad,
               c.misalign, c.causal, c.window, (long long)c.wl, (long long)c.wr, (double)c.softcap,
               (double)c.dropout_p, c.mask, (int)c.klens.size(), (int)c.seq_q.size(), c.splits);
}

/* Runs forward (and backward when asked) and compares with the reference. */
static void run_case(const cfg &c) {
    problem P;
    describe(c);
    problem_init(P, c);
    kern_status st = call_forward(P);
    KT_REQUIRE(st == KERN_OK, "forward: %s %s", kern_status_name(st), kern_last_error());
    dev_sync();
    std::vector<double> want, wlse, wmag;
    ref_forward(P, want, wlse, wmag);
    std::vector<uint16_t> got = gather(P, P.o, P.Lo_, 1);
    KT_REQUIRE(got.size() == want.size(), "out: %zu values, want %zu", got.size(), want.size());
    check_out("out", got, c.dt, want, wmag);
    if (c.lse) {
        P.lse.download();
        std::vector<float> gl;
        for (int b = 0; b < P.nseq; b++)
            for (int h = 0; h < c.Hq; h++)
                for (int i = 0; i < P.lq[b]; i++) {
                    int64_t e = is_varlen(c) ? (int64_t)h * P.Tq + P.q0[b] + i
                                             : ((int64_t)b * c.Hq + h) * c.Lq + i;
                    gl.push_back(((const float *)P.lse.h.data())[e]);
                }
        kt_assert_close("lse", gl.data(), KERN_F32, wlse.data(), (int64_t)wlse.size(),
                        kt_tol_scaled(KERN_F32, 20));
    }
    if (!c.bwd) return;
    std::vector<double> wdq, wdk, wdv, mdq, mdk;
    ref_backward(P, wdq, wdk, wdv, mdq, mdk);
    std::vector<uint16_t> det_dq;
    for (int mode = 0; mode < 2; mode++) {
        if (!(c.bwd & (mode + 1))) continue;
        for (int rep = 0; rep < (mode == 1 && c.bwd == 3 ? 2 : 1); rep++) {
            P.dq.poison();
            P.dk.poison();
            P.dv.poison();
            P.p.deterministic = mode;
            st = call_backward(P);
            KT_REQUIRE(st == KERN_OK, "backward: %s %s", kern_status_name(st), kern_last_error());
            dev_sync();
            std::vector<uint16_t> gdq = gather(P, P.dq, P.Lq_, 1);
            std::vector<uint16_t> gdk = gather(P, P.dk, P.Lk_, 0);
            std::vector<uint16_t> gdv = gather(P, P.dv, P.Lv_, 0);
            const char *nm[3] = {mode ? "dq (deterministic)" : "dq (fast)", mode ? "dk (deterministic)" : "dk (fast)",
                                 mode ? "dv (deterministic)" : "dv (fast)"};
            check_grad(nm[0], gdq, c.dt, wdq, &mdq);
            check_grad(nm[1], gdk, c.dt, wdk, &mdk);
            check_grad(nm[2], gdv, c.dt, wdv, NULL);
            if (mode == 1 && rep == 0) det_dq = gdq;
            if (mode == 1 && rep == 1)
                KT_CHECK(det_dq == gdq, "deterministic dq differs between two runs");
        }
    }
}

/* ---------------------------------------------------------- the grid
 * PICK(emulator, gpu): the emulator runs every CUDA thread as a coroutine
 * (about 1e5 slower than a GPU), so it gets small shapes; the GPU build
 * runs the full grid. */
#define PICK(e, g) (EMU ? (e) : (g))

static const kern_dtype DTS[2] = {KERN_F16, KERN_BF16};

KT_TEST(fwd_head_dims) {
    /* the four instantiations, both dtypes, Lq != Lk around the tiles */
    const int dims[4] = {64, 96, 128, 256};
    for (int di = 0; di < 4; di++)
        for (int t = 0; t < 2; t++) {
            cfg c;
            c.dt = DTS[t];
            c.D = c.Dv = dims[di];
            c.B = 2;
            c.Hq = c.Hkv = 2;
            c.Lq = PICK(65, 300);
            c.Lk = PICK(97, 517);
            run_case(c);
        }
}

KT_TEST(fwd_padded_head_dims) {
    /* sizes between the instantiations run padded; D != Dv; D = 1; rows
     * that are not 16-byte multiples (D = 36, 100) take the element-wise
     * load path */
    const int dd[][2] = {{1, 1}, {8, 8}, {36, 36}, {40, 72}, {72, 40}, {100, 100}, {130, 96}, {200, 256}, {256, 130}};
    for (int i = 0; i < (int)(sizeof dd / sizeof dd[0]); i++) {
        cfg c;
        c.dt = DTS[i & 1];
        c.D = dd[i][0];
        c.Dv = dd[i][1];
        c.Lq = PICK(33, 130);
        c.Lk = PICK(40, 200);
        run_case(c);
    }
}

KT_TEST(fwd_lengths) {
    const int ls[] = {1, 17, 64, 65, PICK(130, 257)};
    const int n = (int)(sizeof ls / sizeof ls[0]);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            if (EMU && (a + b) % 2) continue;
            cfg c;
            c.dt = DTS[(a + b) & 1];
            c.Lq = ls[a];
            c.Lk = ls[b];
            c.causal = (a * n + b) % 3;
            run_case(c);
        }
    cfg c; /* no keys at all: zeros and -inf */
    c.Lq = 5;
    c.Lk = 0;
    run_case(c);
}

KT_TEST(fwd_layouts) {
    for (int v = 0; v < 5; v++) {
        cfg c;
        c.B = 2;
        c.Hq = 3;
        c.Hkv = 3;
        c.Lq = PICK(40, 150);
        c.Lk = PICK(50, 170);
        c.D = c.Dv = v == 4 ? 96 : 64;
        c.dt = DTS[v & 1];
        if (v == 0) c.layout = 1;                /* [B,L,H,D] memory */
        if (v == 1) c.pad = 8;                   /* padded rows, still aligned */
        if (v == 2) { c.layout = 1; c.pad = 3; } /* misaligned rows: element path */
        if (v == 3) c.misalign = 1;              /* misaligned base */
        if (v == 4) { c.layout = 1; c.pad = 8; c.causal = 2; }
        run_case(c);
    }
}

KT_TEST(fwd_causal_window) {
    const int shapes[][2] = {{PICK(40, 200), PICK(40, 200)}, {PICK(20, 100), PICK(70, 333)}, {PICK(70, 333), PICK(20, 100)}};
    for (int si = 0; si < 3; si++)
        for (int v = 0; v < 6; v++) {
            cfg c;
            c.Lq = shapes[si][0];
            c.Lk = shapes[si][1];
            c.dt = DTS[v & 1];
            c.D = c.Dv = (v % 3 == 0) ? 128 : 64;
            switch (v) {
            case 0: c.causal = 1; break;
            case 1: c.causal = 2; break;
            case 2: c.window = 1; c.wl = 7; c.wr = 3; break;
            case 3: c.window = 1; c.wl = 16; c.wr = 0; c.causal = 2; break;
            case 4: c.window = 1; c.wl = -1; c.wr = 5; break;
            case 5: c.window = 1; c.wl = 33; c.wr = -1; c.causal = 1; break;
            }
            if (EMU && si == 2 && v > 2) continue;
            run_case(c);
        }
}

KT_TEST(fwd_scale_softcap) {
    for (int v = 0; v < 4; v++) {
        cfg c;
        c.dt = DTS[v & 1];
        c.Lq = PICK(33, 150);
        c.Lk = PICK(45, 190);
        c.vscale = 3.0; /* large scores, so the cap matters */
        if (v == 0) c.scale = 0.05f;
        if (v == 1) c.softcap = 5.0f;
        if (v == 2) { c.softcap = 2.0f; c.scale = 0.3f; c.causal = 1; }
        if (v == 3) { c.softcap = 30.0f; c.D = c.Dv = 256; }
        run_case(c);
    }
}

KT_TEST(fwd_masks) {
    for (int m = 1; m <= 4; m++)
        for (int t = 0; t < 2; t++) {
            cfg c;
            c.dt = DTS[t];
            c.mask = m;
            c.B = 2;
            c.Hq = 2;
            c.Hkv = m == 3 ? 1 : 2;
            c.Lq = PICK(21, 90);
            c.Lk = PICK(37, 140);
            c.causal = m == 2 ? 1 : 0;
            run_case(c);
        }
}

KT_TEST(fwd_gqa_mqa) {
    const int hh[][2] = {{4, 2}, {6, 1}, {8, 2}};
    for (int i = 0; i < 3; i++) {
        cfg c;
        c.Hq = hh[i][0];
        c.Hkv = hh[i][1];
        c.dt = DTS[i & 1];
        c.Lq = PICK(i == 2 ? 1 : 30, i == 2 ? 1 : 100); /* decode: the heads of a group pack into one tile */
        c.Lk = PICK(50, 300);
        c.causal = i == 1 ? 2 : 0;
        c.layout = i == 2;
        run_case(c);
    }
}

KT_TEST(fwd_dropout) {
    for (int t = 0; t < 2; t++) {
        cfg c;
        c.dt = DTS[t];
        c.B = 2;
        c.Hq = 2;
        c.Lq = PICK(19, 70);
        c.Lk = PICK(43, 130);
        c.dropout_p = t ? 0.1f : 0.3f;
        c.seed = 0x1234567890abcdefull;
        c.offset = 77 + t;
        c.causal = t;
        run_case(c);
    }
}

KT_TEST(fwd_k_lens) {
    cfg c;
    c.B = 4;
    c.Lq = PICK(20, 64);
    c.Lk = PICK(70, 200);
    c.klens.push_back(0); /* a batch with no keys: zeros and -inf */
    c.klens.push_back(PICK(70, 200));
    c.klens.push_back(1);
    c.klens.push_back(PICK(33, 129));
    run_case(c);
    c.causal = 2; /* bottom-right alignment uses the batch's key length */
    c.dt = KERN_BF16;
    run_case(c);
}

KT_TEST(fwd_varlen) {
    for (int v = 0; v < 3; v++) {
        cfg c;
        int sq[4] = {5, 0, PICK(33, 130), PICK(20, 64)}, sk[4] = {7, 9, PICK(40, 150), PICK(20, 64)};
        for (int s = 0; s < 4; s++) {
            c.seq_q.push_back(sq[s]);
            c.seq_k.push_back(sk[s]);
        }
        c.Lq = PICK(33, 130); /* max_seqlen */
        c.Lk = PICK(40, 150);
        c.dt = DTS[v & 1];
        if (v == 1) { c.causal = 2; c.Hq = 4; c.Hkv = 2; }
        if (v == 2) { c.dropout_p = 0.2f; c.window = 1; c.wl = 5; c.wr = 5; c.D = c.Dv = 128; }
        run_case(c);
    }
}

KT_TEST(fwd_split_kv) {
    /* forced split counts (including more parts than key blocks) and the
     * heuristic on decode shapes */
    const int sp[4] = {2, 3, 7, 0};
    for (int i = 0; i < 4; i++) {
        cfg c;
        c.B = 2;
        c.Hq = 4;
        c.Hkv = 2;
        c.Lq = i == 1 ? 5 : 1;
        c.Lk = PICK(300, 5000);
        c.dt = DTS[i & 1];
        c.splits = sp[i];
        c.causal = i == 1 ? 2 : 0;
        c.klens.push_back(PICK(300, 5000));
        c.klens.push_back(PICK(170, 3001));
        c.D = c.Dv = i == 2 ? 128 : 64;
        run_case(c);
    }
    cfg c; /* splits with lse not requested, masking and dropout */
    c.Lq = 3;
    c.Lk = PICK(200, 2000);
    c.splits = 4;
    c.lse = 0;
    c.mask = 2;
    c.dropout_p = 0.25f;
    run_case(c);
}

/* ---------------------------------------------------------- backward */

KT_TEST(bwd_head_dims) {
    const int dims[4] = {64, 96, 128, 256};
    for (int di = 0; di < 4; di++)
        for (int t = 0; t < 2; t++) {
            cfg c;
            c.dt = DTS[t];
            c.D = c.Dv = dims[di];
            c.Lq = PICK(40, 200);
            c.Lk = PICK(50, 230);
            c.bwd = 3;
            if (EMU && t == 1 && di != 3) c.bwd = 1 + (di & 1);
            run_case(c);
        }
}

KT_TEST(bwd_options) {
    for (int v = 0; v < 9; v++) {
        cfg c;
        c.dt = DTS[v & 1];
        c.Lq = PICK(33, 150);
        c.Lk = PICK(45, 170);
        c.bwd = EMU ? 1 + (v & 1) : 3;
        switch (v) {
        case 0: c.causal = 1; break;
        case 1: c.causal = 2; c.Lq = PICK(20, 80); break;
        case 2: c.window = 1; c.wl = 9; c.wr = 4; break;
        case 3: c.softcap = 4.0f; c.vscale = 2.0; break;
        case 4: c.Hq = 4; c.Hkv = 2; c.causal = 1; break;
        case 5: c.dropout_p = 0.3f; c.offset = 5; break;
        case 6: c.mask = 4; c.Hq = 2; c.Hkv = 2; break;
        case 7: c.B = 3; c.klens.push_back(0); c.klens.push_back(PICK(45, 170)); c.klens.push_back(20); c.causal = 2; break;
        case 8: c.D = 40; c.Dv = 72; c.layout = 1; c.pad = 3; break;
        }
        run_case(c);
    }
}

KT_TEST(bwd_one_key_dropout) {
    /* one visible key (k_lens = 1) with dropout: dS = P o (Z dP - delta)
     * cancels exactly, so dq = dk = 0 and only the rounding of delta
     * (taken from the rounded out) is left; found on the first GPU run */
    for (int t = 0; t < 2; t++)
        for (int causal = 0; causal < 2; causal++) {
            cfg c;
            c.dt = DTS[t];
            c.Hq = c.Hkv = 2;
            c.Lq = PICK(40, 271);
            c.Lk = 9;
            c.D = 16;
            c.Dv = PICK(64, 128);
            c.causal = causal;
            c.dropout_p = 0.065f;
            c.klens.push_back(1);
            c.bwd = 3;
            run_case(c);
        }
}

KT_TEST(bwd_varlen) {
    cfg c;
    int sq[3] = {PICK(30, 130), 0, 9}, sk[3] = {PICK(25, 100), 6, 17};
    for (int s = 0; s < 3; s++) {
        c.seq_q.push_back(sq[s]);
        c.seq_k.push_back(sk[s]);
    }
    c.Lq = PICK(30, 130);
    c.Lk = PICK(25, 100);
    c.Hq = 2;
    c.Hkv = 1;
    c.causal = 2;
    c.dropout_p = 0.15f;
    c.bwd = 3;
    run_case(c);
}

/* ---------------------------------------------------------- dropout mask
 * With q = 0 every visible key gets p = 1/Lk, and with v one-hot (Dv = Lk,
 * v[j] = e_j) out[i][j] = Z_ij / Lk: the kernel's keep decision for every
 * (b, h, i, j) can be read back from out. It must equal the CPU mapping
 * kern_dropout_keep(seed, offset, ((b*Hq + h)*Lq + i)*Lk + j, threshold)
 * bit for bit (dense: Lq, Lk the dims; varlen: b the sequence and Lq, Lk
 * the max lengths). */
static void dropout_mask_case(int varlen) {
    cfg c;
    c.B = 2;
    c.Hq = 3;
    c.Hkv = 3;
    c.Lq = PICK(20, 100);
    c.Lk = PICK(48, 256);
    c.D = 64;
    c.Dv = c.Lk;
    c.dropout_p = 0.4f;
    c.seed = 0xfeedbeef12345678ull;
    c.offset = (uint64_t)1 << 40;
    if (varlen) {
        c.seq_q.push_back(c.Lq);
        c.seq_q.push_back(c.Lq - 3);
        c.seq_k.push_back(c.Lk - 5);
        c.seq_k.push_back(c.Lk);
    }
    describe(c);
    problem P;
    problem_init(P, c);
    memset(P.q.h.data(), 0, P.q.h.size());
    P.q.upload();
    memset(P.v.h.data(), 0, P.v.h.size());
    for (int b = 0; b < P.nseq; b++)
        for (int h = 0; h < c.Hkv; h++)
            for (int j = 0; j < P.lk[b]; j++)
                kt_set(P.v.h.data(), c.dt, P.Lv_.at(b, h, P.k0[b] + j, j) + c.misalign, 1.0);
    P.v.upload();
    KT_REQUIRE(call_forward(P) == KERN_OK, "%s", kern_last_error());
    dev_sync();
    P.o.download();
    const uint32_t thr = kern_dropout_threshold(c.dropout_p);
    int64_t n = 0, kept = 0, bad = 0;
    for (int b = 0; b < P.nseq; b++)
        for (int h = 0; h < c.Hq; h++)
            for (int i = 0; i < P.lq[b]; i++)
                for (int j = 0; j < P.lk[b]; j++) {
                    const uint64_t idx = (((uint64_t)b * c.Hq + h) * (uint64_t)c.Lq + i) * (uint64_t)c.Lk + j;
                    const int want = kern_dropout_keep(c.seed, c.offset, idx, thr);
                    const double got = geth(P, P.o, P.Lo_.at(b, h, P.q0[b] + i, j));
                    const double val = 1.0 / (P.lk[b] * (1.0 - (double)c.dropout_p));
                    n++;
                    kept += want;
                    if ((got != 0) != want || (want && fabs(got - val) > 4e-3 * val)) {
                        if (bad < 3)
                            KT_CHECK(0, "b=%d h=%d i=%d j=%d: out=%g, CPU mapping keep=%d", b, h, i, j, got, want);
                        bad++;
                    }
                }
    KT_CHECK(bad == 0, "%lld of %lld mask bits differ from kern_dropout_keep", (long long)bad, (long long)n);
    /* and the mask is a real one: about 1-p kept */
    KT_CHECK(kept > n * 0.5 && kept < n * 0.7, "kept %lld of %lld with p=0.4", (long long)kept, (long long)n);
}
KT_TEST(dropout_mask_bits_dense) { dropout_mask_case(0); }
KT_TEST(dropout_mask_bits_varlen) { dropout_mask_case(1); }

/* ---------------------------------------------------------- errors */

static long launches(void) {
#if EMU
    return kern__emu_state().launches;
#else
    return 0;
#endif
}

/* Every output still holds its poison. */
static int untouched(dbuf &b) {
    std::vector<unsigned char> h(b.h.size());
    to_host(h.data(), b.d, h.size());
    for (size_t i = 0; i < h.size(); i++)
        if (h[i] != 0xFF) return 0;
    return 1;
}

#define EXPECT_ERR(expr, st, needle)                                                                   \
    do {                                                                                               \
        long l0_ = launches();                                                                         \
        KT_ERROR(expr, st, needle);                                                                    \
        KT_CHECK(launches() == l0_, "a kernel was launched by a failing call");                        \
        KT_CHECK(untouched(P.o) && untouched(P.lse) && untouched(P.dq) && untouched(P.dk) &&            \
                     untouched(P.dv),                                                                  \
                 "an output was written by a failing call");                                          \
    } while (0)

KT_TEST(errors_forward) {
    cfg c;
    c.Hq = 2;
    c.Hkv = 2;
    c.Lq = 8;
    c.Lk = 8;
    problem P;
    problem_init(P, c);
    kern_tensor q = P.tq, k = P.tk, v = P.tv, o = P.to, t;
    kern_cuda_sdpa_params p = P.p;
    EXPECT_ERR(kern_cuda_sdpa(NULL, NULL, &k, &v, &o, &p), KERN_ERR_ARG, "q is NULL");
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, NULL, &p), KERN_ERR_ARG, "out is NULL");
    t = q; t.dtype = KERN_F32;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &t, &k, &v, &o, &p), KERN_ERR_DTYPE, "f16 or bf16");
    t = k; t.dtype = KERN_BF16;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &t, &v, &o, &p), KERN_ERR_DTYPE, "k.dtype=bf16");
    t = q; t.ndim = 3;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &t, &k, &v, &o, &p), KERN_ERR_SHAPE, "q.ndim=3");
    t = k; t.shape[3] = 32;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &t, &v, &o, &p), KERN_ERR_SHAPE, "k.shape[3]=32");
    t = v; t.shape[2] = 7;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &t, &o, &p), KERN_ERR_SHAPE, "v.shape[2]=7");
    t = o; t.shape[2] = 7;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &t, &p), KERN_ERR_SHAPE, "out.shape");
    t = k; t.shape[1] = 1; /* GQA without the flag */
    kern_tensor t2 = v; t2.shape[1] = 1;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &t, &t2, &o, &p), KERN_ERR_SHAPE, "enable_gqa");
    p.sdpa.enable_gqa = 1;
    {
        kern_tensor q3 = q, o3 = o;
        q3.shape[1] = 3; q3.shape[0] = 1; o3.shape[1] = 3; o3.shape[0] = 1;
        kern_tensor k3 = k, v3 = v;
        k3.shape[1] = 2; v3.shape[1] = 2;
        q3.stride[1] = o3.stride[1] = 8; /* fits in the buffers */
        EXPECT_ERR(kern_cuda_sdpa(NULL, &q3, &k3, &v3, &o3, &p), KERN_ERR_SHAPE, "not a multiple");
    }
    p.sdpa.enable_gqa = 0;
    t = q; t.stride[3] = 2;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &t, &k, &v, &o, &p), KERN_ERR_LAYOUT, "unit stride");
    t = q; t.shape[3] = 300; t.stride[2] = 300; t.stride[1] = 0; t.stride[0] = 0;
    kern_tensor tk = t, tv = t, to = t;
    tk.data = k.data; tv.data = v.data; to.data = o.data;
    tk.shape[2] = tv.shape[2] = 1; tk.shape[1] = tv.shape[1] = 1;
    t.shape[2] = to.shape[2] = 1; t.shape[1] = to.shape[1] = 1;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &t, &tk, &tv, &to, &p), KERN_ERR_UNSUPPORTED, "up to 256");
    t = q; t.shape[3] = 0; tk = k; tk.shape[3] = 0;
    to = o;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &t, &tk, &v, &o, &p), KERN_ERR_SHAPE, "D=0");
    const float bad_p[3] = {1.0f, -0.1f, NAN};
    for (int i = 0; i < 3; i++) {
        kern_cuda_sdpa_params p2 = p;
        p2.sdpa.dropout_p = bad_p[i];
        EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_ARG, "dropout_p");
    }
    {
        kern_cuda_sdpa_params p2 = p;
        p2.sdpa.scale = -1.f;
        EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_ARG, "scale");
        p2.sdpa.scale = INFINITY;
        EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_ARG, "scale");
        p2.sdpa.scale = 0;
        p2.sdpa.softcap = NAN;
        EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_ARG, "softcap");
        p2.sdpa.softcap = 0;
        p2.sdpa.window_set = 1;
        p2.sdpa.window_left = -2;
        EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_ARG, "window_left=-2");
    }
    /* mask, k_lens, lse */
    dbuf mb;
    mb.make(8 * 8 * 4);
    kern_tensor m = kern_tensor_2d(mb.d, KERN_I32, 8, 8);
    kern_cuda_sdpa_params p2 = p;
    p2.sdpa.attn_mask = &m;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_DTYPE, "attn_mask.dtype=i32");
    m = kern_tensor_2d(mb.d, KERN_BOOL, 3, 8);
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_SHAPE, "does not broadcast");
    std::vector<unsigned char> hostmask(64, 1);
    m = kern_tensor_2d(hostmask.data(), KERN_BOOL, 8, 8);
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_ARG, "attn_mask");
    p2 = p;
    kern_tensor kl = kern_tensor_1d(mb.d, KERN_F32, 1);
    p2.sdpa.k_lens = &kl;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_DTYPE, "k_lens.dtype=f32");
    kl = kern_tensor_1d(mb.d, KERN_I32, 2);
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_SHAPE, "k_lens.shape[0]=2");
    p2 = p;
    kern_tensor l2 = P.tlse;
    l2.dtype = KERN_F16;
    p2.sdpa.lse = &l2;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_DTYPE, "lse.dtype=f16");
    l2 = P.tlse;
    l2.shape[2] = 3;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_SHAPE, "lse.shape");
    /* the decomposed relative position is a CPU-only option */
    p2 = p;
    kern_tensor rp = kern_tensor_2d(mb.d, KERN_F32, 15, 16);
    p2.sdpa.rel_pos_h = p2.sdpa.rel_pos_w = &rp;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &o, &p2), KERN_ERR_UNSUPPORTED, "CPU only");
    /* aliasing and host memory */
    t = o;
    t.data = q.data;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &q, &k, &v, &t, &p), KERN_ERR_ARG, "overlap");
    std::vector<uint16_t> hostq(P.nq, 0);
    t = q;
    t.data = hostq.data();
    EXPECT_ERR(kern_cuda_sdpa(NULL, &t, &k, &v, &o, &p), KERN_ERR_ARG, "device pointer");
}

KT_TEST(errors_backward_varlen) {
    cfg c;
    c.Lq = 8;
    c.Lk = 8;
    problem P;
    problem_init(P, c);
    kern_cuda_sdpa_params p = P.p;
    EXPECT_ERR(kern_cuda_sdpa_backward(NULL, &P.tq, &P.tk, &P.tv, &P.to, &P.tdout, NULL, &P.tdq, &P.tdk,
                                       &P.tdv, &p),
               KERN_ERR_ARG, "lse is NULL");
    kern_tensor t = P.tdk;
    t.data = P.tdq.data;
    EXPECT_ERR(kern_cuda_sdpa_backward(NULL, &P.tq, &P.tk, &P.tv, &P.to, &P.tdout, &P.tlse, &P.tdq, &t,
                                       &P.tdv, &p),
               KERN_ERR_ARG, "overlap");
    t = P.tdout;
    t.shape[3] = 32;
    EXPECT_ERR(kern_cuda_sdpa_backward(NULL, &P.tq, &P.tk, &P.tv, &P.to, &t, &P.tlse, &P.tdq, &P.tdk,
                                       &P.tdv, &p),
               KERN_ERR_SHAPE, "dout.shape");
    t = P.tdq;
    t.dtype = KERN_BF16;
    EXPECT_ERR(kern_cuda_sdpa_backward(NULL, &P.tq, &P.tk, &P.tv, &P.to, &P.tdout, &P.tlse, &t, &P.tdk,
                                       &P.tdv, &p),
               KERN_ERR_DTYPE, "dq.dtype=bf16");
    /* varlen: views [T, H, D] */
    p.sdpa.lse = NULL;
    dbuf cu;
    cu.make(64);
    int32_t h3[3] = {0, 4, 8};
    memcpy(cu.h.data(), h3, sizeof h3);
    cu.upload();
    int64_t sh3[3] = {8, 1, 64}, st3[3] = {64, 64, 1};
    kern_tensor q3 = view(P.q.d, KERN_F16, 3, sh3, st3), k3 = view(P.k.d, KERN_F16, 3, sh3, st3);
    kern_tensor v3 = view(P.v.d, KERN_F16, 3, sh3, st3), o3 = view(P.o.d, KERN_F16, 3, sh3, st3);
    kern_tensor cq = kern_tensor_1d(cu.d, KERN_I32, 3), ck = kern_tensor_1d(cu.d, KERN_I32, 2);
    EXPECT_ERR(kern_cuda_sdpa_varlen(NULL, &q3, &k3, &v3, &o3, &cq, &ck, 4, 4, &p), KERN_ERR_SHAPE,
               "cu_seqlens_k.shape[0]=2");
    ck = kern_tensor_1d(cu.d, KERN_F32, 3);
    EXPECT_ERR(kern_cuda_sdpa_varlen(NULL, &q3, &k3, &v3, &o3, &cq, &ck, 4, 4, &p), KERN_ERR_DTYPE,
               "cu_seqlens_k.dtype=f32");
    ck = cq;
    kern_tensor kl = kern_tensor_1d(cu.d, KERN_I32, 2);
    kern_cuda_sdpa_params p2 = p;
    p2.sdpa.k_lens = &kl;
    EXPECT_ERR(kern_cuda_sdpa_varlen(NULL, &q3, &k3, &v3, &o3, &cq, &ck, 4, 4, &p2), KERN_ERR_UNSUPPORTED,
               "varlen");
    EXPECT_ERR(kern_cuda_sdpa_varlen(NULL, &q3, &k3, &v3, &o3, &cq, &ck, -1, 4, &p), KERN_ERR_ARG,
               "max_seqlen_q=-1");
    std::vector<int32_t> hcu(h3, h3 + 3);
    kern_tensor hq = kern_tensor_1d(hcu.data(), KERN_I32, 3);
    EXPECT_ERR(kern_cuda_sdpa_varlen(NULL, &q3, &k3, &v3, &o3, &hq, &ck, 4, 4, &p), KERN_ERR_ARG,
               "cu_seqlens_q");
    /* a good varlen call on the same views works (and writes) */
    KT_OK(kern_cuda_sdpa_varlen(NULL, &q3, &k3, &v3, &o3, &cq, &ck, 4, 4, &p));
    dev_sync();
}

/* A CUDA runtime error comes back as KERN_ERR_DEVICE with the runtime's
 * message, before anything is launched or written (the emulator injects
 * an allocation failure of the workspace). */
KT_TEST(errors_device) {
#if EMU
    cfg c;
    c.Hq = 4;
    c.Hkv = 1;
    c.Lq = 1;
    c.Lk = 600;
    problem P;
    problem_init(P, c);
    kern__emu_state().fail_mallocs = 1;
    EXPECT_ERR(kern_cuda_sdpa(NULL, &P.tq, &P.tk, &P.tv, &P.to, &P.p), KERN_ERR_DEVICE, "out of memory");
    kern__emu_state().fail_mallocs = 1;
    EXPECT_ERR(kern_cuda_sdpa_backward(NULL, &P.tq, &P.tk, &P.tv, &P.to, &P.tdout, &P.tlse, &P.tdq, &P.tdk,
                                       &P.tdv, &P.p),
               KERN_ERR_DEVICE, "cudaMallocAsync");
    kern__emu_state().fail_mallocs = 0;
    KT_CHECK(cudaGetLastError() == cudaSuccess, "the failed call left a sticky error behind");
#endif
}

/* ---------------------------------------------------------- workspace, streams */

KT_TEST(workspace_and_stream) {
    cfg c;
    c.Hq = 4;
    c.Hkv = 1;
    c.Lq = 1;
    c.Lk = PICK(600, 4000);
    problem P;
    problem_init(P, c);
    size_t need = 0, needb = 0;
    KT_OK(kern_cuda_sdpa_workspace_size(&P.tq, &P.tk, &P.tv, &P.p, 0, &need));
    KT_OK(kern_cuda_sdpa_workspace_size(&P.tq, &P.tk, &P.tv, &P.p, 1, &needb));
    KT_CHECK(need > 0, "decode shape should split (need=%zu)", need);
    KT_CHECK(needb > 0, "backward needs delta and dq scratch (%zu)", needb);
    dbuf ws;
    ws.make(need > needb ? need : needb);
    cudaStream_t s;
    KT_REQUIRE(cudaStreamCreate(&s) == cudaSuccess, "stream");
    P.p.sdpa.workspace = ws.d;
    P.p.sdpa.workspace_size = 16;
    EXPECT_ERR(kern_cuda_sdpa(s, &P.tq, &P.tk, &P.tv, &P.to, &P.p), KERN_ERR_ARG, "workspace_size=16");
    P.p.sdpa.workspace_size = need;
    KT_OK(kern_cuda_sdpa(s, &P.tq, &P.tk, &P.tv, &P.to, &P.p));
    cudaStreamSynchronize(s);
    std::vector<double> want, wlse, wmag;
    ref_forward(P, want, wlse, wmag);
    std::vector<uint16_t> got = gather(P, P.o, P.Lo_, 1);
    check_out("out", got, c.dt, want, wmag);
    P.p.sdpa.workspace_size = needb;
    KT_OK(kern_cuda_sdpa_backward(s, &P.tq, &P.tk, &P.tv, &P.to, &P.tdout, &P.tlse, &P.tdq, &P.tdk, &P.tdv, &P.p));
    cudaStreamSynchronize(s);
    std::vector<double> wdq, wdk, wdv, mdq, mdk;
    ref_backward(P, wdq, wdk, wdv, mdq, mdk);
    check_grad("dk", gather(P, P.dk, P.Lk_, 0), c.dt, wdk, &mdk);
    cudaStreamDestroy(s);
}

/* ---------------------------------------------------------- random mixes
 * Random combinations of every option (seeded: the seed is printed with a
 * failure), forward and backward, to catch interactions the grids miss. */
KT_TEST(random_mixes) {
    kt_rng r = kt_rng_make(42);
    const int dims[] = {1, 16, 24, 64, 72, 96, 128, 160, 256};
    const int n = PICK(80, 400);
    for (int it = 0; it < n; it++) {
        cfg c;
        c.dt = DTS[kt_randint(&r, 0, 2)];
        c.D = dims[kt_randint(&r, 0, 9)];
        c.Dv = kt_randint(&r, 0, 3) ? c.D : dims[kt_randint(&r, 1, 9)];
        const int g = (int)kt_randint(&r, 1, 4);
        c.Hkv = (int)kt_randint(&r, 1, 3);
        c.Hq = c.Hkv * g;
        c.B = (int)kt_randint(&r, 1, 3);
        c.Lq = (int)kt_randint(&r, 1, PICK(70, 300));
        c.Lk = (int)kt_randint(&r, 1, PICK(90, 400));
        c.causal = (int)kt_randint(&r, 0, 3);
        if (kt_randint(&r, 0, 3) == 0) {
            c.window = 1;
            c.wl = kt_randint(&r, -1, 40);
            c.wr = kt_randint(&r, -1, 40);
        }
        if (kt_randint(&r, 0, 4) == 0) c.softcap = (float)kt_uniform(&r, 1, 20);
        if (kt_randint(&r, 0, 4) == 0) c.scale = (float)kt_uniform(&r, 0.02, 0.5);
        if (kt_randint(&r, 0, 4) == 0) c.dropout_p = (float)kt_uniform(&r, 0.05, 0.6);
        c.offset = kt_next(&r);
        c.seed = kt_next(&r);
        c.layout = (int)kt_randint(&r, 0, 2);
        c.pad = kt_randint(&r, 0, 3) ? 0 : (int)kt_randint(&r, 1, 9);
        c.misalign = kt_randint(&r, 0, 6) ? 0 : 1;
        c.splits = kt_randint(&r, 0, 3) ? 0 : (int)kt_randint(&r, 1, 6);
        c.lse = 1;
        const int kind = (int)kt_randint(&r, 0, 4); /* 0 plain, 1 mask, 2 k_lens, 3 varlen */
        if (kind == 1) c.mask = (int)kt_randint(&r, 1, 5);
        if (kind == 2)
            for (int b = 0; b < c.B; b++) c.klens.push_back((int)kt_randint(&r, 0, c.Lk + 1));
        if (kind == 3) {
            int mq = 0, mk = 0;
            for (int s = 0; s < c.B + 1; s++) {
                int lq = (int)kt_randint(&r, 0, c.Lq + 1), lk = (int)kt_randint(&r, 0, c.Lk + 1);
                c.seq_q.push_back(lq);
                c.seq_k.push_back(lk);
                mq = lq > mq ? lq : mq;
                mk = lk > mk ? lk : mk;
            }
            c.Lq = mq; /* max_seqlen: exact or larger */
            c.Lk = mk + (int)kt_randint(&r, 0, 3);
            c.layout = 0;
        }
        c.bwd = (int)kt_randint(&r, 0, 3); /* none, fast, deterministic */
        run_case(c);
        if (kt__cur_failed) return; /* one failing mix is enough to debug */
    }
}

KT_MAIN()
