"""Peers for family `spmm` (cases, bytes and graph as in bench/bench_spmm.c;
the graph generator is shared with bench/peers/scatter.py):

  torch  torch.sparse.mm(csr, x, reduce) on a torch.sparse_csr_tensor built
         directly from crow/col/values (no coalescing: duplicates kept and
         edge order within a row kept, the same CSR as the C side)
  scipy  scipy.sparse.csr_matrix @ x (sum only; SciPy is single-threaded,
         so only the 1-thread row is measured)
"""
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import scatter  # noqa: E402  (graph generator)

FAMILY = "spmm"
CASES = [("random", 64), ("random", 128), ("powerlaw", 64)]
REDUCES = ["sum", "mean", "amax", "amin"]


def main():
    args = common.parse_args()
    try:
        import numpy as np
        import torch
    except Exception as ex:  # noqa: BLE001
        for g, F in CASES:
            for red in REDUCES:
                for t in args.threads:
                    common.emit(FAMILY, scatter.case_name(red, g, F), t, "torch",
                                skipped="torch/numpy not importable: %s" % ex)
        return
    try:
        import scipy.sparse as sp
    except Exception as ex:  # noqa: BLE001
        sp = None
        sp_err = str(ex)
    warnings.filterwarnings("ignore")
    graphs = {}
    for gname, F in CASES:
        if not any(common.wanted(args, FAMILY, scatter.case_name(red, gname, F), impl)
                   for red in REDUCES for impl in ("torch", "scipy")):
            continue  # nothing of this graph and width is wanted: no setup
        if gname not in graphs:
            N, E, dst, src = scatter.make_graph(np, gname)
            order = np.argsort(dst, kind="stable")
            crow = np.zeros(N + 1, dtype=np.int64)
            crow[1:] = np.cumsum(np.bincount(dst, minlength=N))
            col = src[order]
            vals = (np.random.default_rng(7).random(E, dtype=np.float32) * 2 - 1)
            graphs[gname] = (N, E, crow, col, vals)
        N, E, crow, col, vals = graphs[gname]
        A = torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(col),
                                    torch.from_numpy(vals), (N, N))
        x = torch.rand(N, F, generator=torch.Generator().manual_seed(F)) * 2 - 1
        nbytes = E * F * 4.0 + E * 12.0 + (N + 1) * 8.0 + N * F * 4.0
        for t in args.threads:
            common.set_torch_threads(torch, t)
            for red in REDUCES:
                name = scatter.case_name(red, gname, F)
                if common.wanted(args, FAMILY, name, "torch"):
                    def f(red=red):
                        torch.sparse.mm(A, x, red)
                    common.emit(FAMILY, name, t, "torch", common.timeit(f, args.quick), 0.0, nbytes)
                if red == "sum" and common.wanted(args, FAMILY, name, "scipy"):
                    if sp is None:
                        common.emit(FAMILY, name, t, "scipy", skipped="scipy: %s" % sp_err)
                    elif t != 1:
                        common.emit(FAMILY, name, t, "scipy",
                                    skipped="scipy sparse @ dense is single-threaded")
                    else:
                        S = sp.csr_matrix((vals, col, crow), shape=(N, N))
                        xn = x.numpy()
                        common.emit(FAMILY, name, t, "scipy",
                                    common.timeit(lambda: S @ xn, args.quick), 0.0, nbytes)


if __name__ == "__main__":
    main()
