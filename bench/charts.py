#!/usr/bin/env python3
"""bench/charts.py — one PNG per family from a results file of bench/run.

    bench/.venv/bin/python bench/charts.py [--out DIR] [--families a,b] RESULTS.json

Each chart has two panels, one row of bars per case and thread count:
  * left: the fraction of the case's peak (its `peak` kind at that thread
    count) reached by kern and by each peer, side by side; a family without
    peak kinds (latencies) shows the time per call on a log scale instead;
  * right: each peer's time divided by kern's (log scale; above 1 kern is
    faster).
Writes DIR/<family>.png (default: bench/results/charts) and prints each
path. bench/run calls it after a run when bench/.venv has matplotlib.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def family_data(rows):
    """(groups [(case, threads)], impls [kern first], by {(case, thr, impl): row})."""
    groups, impls, by = [], [], {}
    for r in rows:
        g = (r["case"], r["threads"])
        if g not in groups:
            groups.append(g)
        if r["impl"] not in impls:
            impls.append(r["impl"])
        by[(r["case"], r["threads"], r["impl"])] = r
    first = {i: k for k, i in enumerate(impls)}
    impls.sort(key=lambda i: (i != "kern", i.startswith("kern_"), first[i]))
    return groups, impls, by


def chart(plt, family, rows, path):
    groups, impls, by = family_data(rows)
    peers = [i for i in impls if i != "kern"]
    has_peak = any(r.get("peak_fraction") is not None for r in rows)
    n = len(groups)
    # cases run down the page (a long family makes a tall chart that stays
    # readable at page width); left: fraction of peak, right: ratios
    step = max(0.3, 0.14 * len(impls) + 0.08)
    height = 1.8 + n * step
    fig, (left, right) = plt.subplots(1, 2, figsize=(13.0, height), sharey=True,
                                      gridspec_kw={"width_ratios": [3, 2]})
    bar = 0.8 / max(len(impls), 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color = {i: colors[k % len(colors)] for k, i in enumerate(impls)}
    ys = list(range(n))
    for k, impl in enumerate(impls):
        vals = []
        for case, thr in groups:
            r = by.get((case, thr, impl))
            if r is None or not r.get("seconds"):
                vals.append(float("nan"))
            elif has_peak:
                pf = r.get("peak_fraction")
                vals.append(100.0 * pf if pf is not None else float("nan"))
            else:
                vals.append(r["seconds"])
        off = (k - (len(impls) - 1) / 2.0) * bar
        left.barh([y + off for y in ys], vals, bar, label=impl, color=color[impl],
                  edgecolor="black" if impl == "kern" else "none", linewidth=0.6)
    if has_peak:
        left.set_xlabel("% of the case's peak")
        left.axvline(100.0, color="grey", linewidth=0.8, linestyle="--")
    else:
        left.set_xscale("log")
        left.set_xlabel("seconds per call (log)")
    left.set_yticks(ys)
    left.set_yticklabels(["%s t%d" % g for g in groups], fontsize=8)
    left.set_ylim(n - 0.5, -0.5)
    left.grid(axis="x", alpha=0.3)
    left.legend(fontsize=8, loc="lower right")
    cpu = next((r["cpu"] for r in rows if r.get("cpu")), "")
    fig.suptitle("%s: %s per case, and peer time / kern time%s" % (
        family, "fraction of peak" if has_peak else "time", "\n%s" % cpu if cpu else ""),
        fontsize=10)

    for k, impl in enumerate(peers):
        vals = []
        for case, thr in groups:
            p, kr = by.get((case, thr, impl)), by.get((case, thr, "kern"))
            if p and kr and p.get("seconds") and kr.get("seconds"):
                vals.append(p["seconds"] / kr["seconds"])
            else:
                vals.append(float("nan"))
        off = (k + 1 - (len(impls) - 1) / 2.0) * bar
        right.barh([y + off for y in ys], vals, bar, color=color[impl])
    right.set_xscale("log")
    right.axvline(1.0, color="black", linewidth=0.8)
    right.set_xlabel("peer time / kern time (log; above 1: kern is faster)")
    right.grid(axis="x", alpha=0.3)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / height))  # room for the title
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "charts"))
    ap.add_argument("--families", default="")
    args = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        sys.stderr.write("matplotlib not available (%s): `make peers` installs it into "
                         "bench/.venv\n" % e)
        return 3
    with open(args.results) as f:
        rows = json.load(f)
    fams = []
    for r in rows:
        if r["family"] not in fams:
            fams.append(r["family"])
    if args.families:
        want = [f for f in args.families.split(",") if f]
        fams = [f for f in fams if f in want]
    os.makedirs(args.out, exist_ok=True)
    for fam in fams:
        frows = [r for r in rows if r["family"] == fam]
        if not any(r.get("seconds") for r in frows):
            continue
        path = os.path.join(args.out, "%s.png" % fam)
        chart(plt, fam, frows, path)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
