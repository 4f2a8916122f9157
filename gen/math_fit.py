#!/usr/bin/env python3
"""math_fit.py - fits the coefficient tables of kern's internal math layer.

Development tool, not part of the build: needs numpy and mpmath (both in
bench/.venv after `make peers`). Prints the C tables that
include/kern_base.h holds between "math tables (gen/math_fit.py)" markers,
and for each piece the worst error of its f32 evaluation (Horner with
fused multiply-adds, coefficients rounded to f32) on a dense grid.

    bench/.venv/bin/python gen/math_fit.py

Fits are near-minimax (Lawson reweighting of least squares at Chebyshev
nodes), in relative error, against 40-digit mpmath references. Rerun the
exhaustive sweep (tests/math_sweep.c) after changing any table.
"""
import math

import mpmath as mp
import numpy as np

mp.mp.dps = 40


def r32(x):
    return float(np.float32(float(x)))


def fma32(a, b, c):
    return r32(mp.mpf(a) * mp.mpf(b) + mp.mpf(c))


def horner32(coefs, t):  # coefs highest degree first
    q = coefs[0]
    for c in coefs[1:]:
        q = fma32(q, t, c)
    return q


def ulp_err(got, ref):
    ref = float(ref)
    if ref == 0:
        return abs(got) / 2.0 ** -149
    _, e = math.frexp(ref)
    return abs(got - ref) / 2.0 ** max(e - 24, -149)


def lawson(func, a, b, deg, shift=0.0, npts=400, iters=40, fixed0=None):
    """Coefficients (highest first) of p(t), t = x - shift, minimizing the
    relative error on [a, b]. With fixed0, p(t) = fixed0 + t q(t)."""
    xs = np.array([(a + b) / 2 + (b - a) / 2 * math.cos(math.pi * (k + 0.5) / npts)
                   for k in range(npts)])
    fx = np.array([float(func(mp.mpf(float(x)))) for x in xs])
    t = xs - shift
    if fixed0 is None:
        V, rhs = np.vander(t, deg + 1), fx
    else:
        V, rhs = np.vander(t, deg + 1)[:, :-1], fx - fixed0
    scale = np.abs(fx)
    w = np.ones(npts)
    for _ in range(iters):
        W = np.sqrt(w) / scale
        c, *_ = np.linalg.lstsq(V * W[:, None], rhs * W, rcond=None)
        err = np.abs(V @ c - rhs) / scale
        w = w * err
        w = w / w.sum()
    c = list(c)
    if fixed0 is not None:
        c.append(fixed0)
    return c


def fmt_row(name, vals):
    return "    /* %-4s */ {%s}," % (name, ", ".join("%.9ef" % v for v in vals))


def gelu_tables():
    """Phi(x) = P(X <= x) on 8 intervals anchored at their left end."""
    phi = mp.ncdf
    ivs = [(-3, -2.25), (-2.25, -1.5), (-1.5, -0.75), (-0.75, 0),
           (0, 1.5), (1.5, 3), (3, 4.5), (4.5, 6)]
    deg = 8
    anchors, coefs, worst = [], [], 0
    for a, b in ivs:
        c0 = 0.5 if a == 0 else r32(phi(mp.mpf(a)))
        c = lawson(phi, a - 0.01, b + 0.01, deg, shift=a, fixed0=c0)
        c32 = [r32(v) for v in c]
        anchors.append(r32(a))
        coefs.append(c32)
        for x in np.linspace(a - 0.005, min(b + 0.005, 5.9), 1500):
            x = r32(x)
            worst = max(worst, ulp_err(horner32(c32, r32(x - a)), phi(mp.mpf(x))))
    top = horner32(coefs[7], r32(r32(5.9) - 4.5))
    print("/* gelu Phi table: worst %.2f ulp; Phi(5.9) evaluates to %r */" % (worst, top))
    assert top == 1.0, "the clamp point must give exactly 1"
    assert coefs[4][-1] == 0.5
    rows = [fmt_row("A", anchors)]
    for d in range(deg + 1):
        rows.append(fmt_row("C%d" % d, [coefs[k][deg - d] for k in range(8)]))
    return rows


def mills_tables():
    """g(a) = exp(a^2/2) Q(a) on [3, 16.5], row k = (bits(a) >> 22) & 7."""
    g = lambda a: mp.exp(a * a / 2) * mp.ncdf(-a)
    ivs = {1: (3, 4), 2: (4, 6), 3: (6, 8), 4: (8, 12), 5: (12, 16.5)}
    deg = 7
    cen, coefs, worst = {}, {}, 0
    for k, (a, b) in ivs.items():
        c0 = r32((a + b) / 2)
        c = [r32(v) for v in lawson(g, a - 0.01, b + 0.01, deg, shift=c0)]
        cen[k], coefs[k] = c0, c
        for x in np.linspace(a, b, 1500):
            x = r32(x)
            worst = max(worst, ulp_err(horner32(c, r32(x - c0)), g(mp.mpf(x))))
    for k, src in ((0, 1), (6, 5), (7, 5)):  # unused rows and [16, 24) copy neighbours
        cen[k], coefs[k] = cen[src], coefs[src]
    print("/* gelu tail g table: worst %.2f ulp */" % worst)
    rows = [fmt_row("CEN", [cen[k] for k in range(8)])]
    for d in range(deg + 1):
        rows.append(fmt_row("G%d" % d, [coefs[k][deg - d] for k in range(8)]))
    return rows


def small_polys():
    L = float(mp.log(2)) / 2 + 0.006
    P = lambda r: (mp.exp(r) - 1 - r) / (r * r) if r != 0 else mp.mpf(0.5)
    ce = [r32(v) for v in lawson(P, -L, L, 4)]
    Q = lambda f: (mp.power(2, f) - 1) / f if f != 0 else mp.log(2)
    c2 = [r32(v) for v in lawson(Q, -0.5, 0.5, 5)]
    T = lambda s: (mp.tanh(mp.sqrt(s)) - mp.sqrt(s)) / (mp.sqrt(s) * s) if s != 0 else mp.mpf(-1) / 3
    ct = [r32(v) for v in lawson(T, 1e-12, 0.625 ** 2, 4)]
    we = max(ulp_err(r32(fma32(horner32(ce, r32(r)), r32(r32(r) * r32(r)), r32(r)) + 1.0),
                     mp.exp(mp.mpf(r32(r)))) for r in np.linspace(-L, L, 3001))
    w2 = max(ulp_err(horner32(c2 + [1.0], r32(f)), mp.power(2, mp.mpf(r32(f))))
             for f in np.linspace(-0.5, 0.5, 3001))
    print("/* exp poly %.2f ulp, exp2 poly %.2f ulp */" % (we, w2))
    out = []
    for i, v in enumerate(reversed(ce)):
        out.append("#define KERN__M_EXP_P%d %.9ef" % (i, v))
    for i, v in enumerate(reversed(c2)):
        out.append("#define KERN__M_EXP2_Q%d %.9ef" % (i, v))
    for i, v in enumerate(reversed(ct)):
        out.append("#define KERN__M_TANH_T%d %.9ef" % (i, v))
    return out


if __name__ == "__main__":
    print("\n".join(small_polys()))
    print("static const float kern__m_gelu_tab[10][8] = {")
    print("\n".join(gelu_tables()))
    print("};")
    print("static const float kern__m_mills_tab[9][8] = {")
    print("\n".join(mills_tables()))
    print("};")
