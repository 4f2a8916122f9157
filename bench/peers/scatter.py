"""Peers for family `scatter` (see bench/bench_scatter.c for the cases, the
byte counts and the graph definition, reproduced here with numpy):

  torch              Tensor.scatter_reduce(0, index.view(-1,1).expand(E,F),
                     src, reduce, include_self=True, out=...) — the expanded
                     index form PyTorch 2.x optimizes on CPU; for gather,
                     torch.gather(x, 0, expanded index, out=...)
  torch_index_add    torch.index_add(self, 0, index, src, out=...) (sum)
  torch_index_select torch.index_select(x, 0, index, out=...) (gather)

Outputs are preallocated (out=) so the timing does not include PyTorch's
allocation of the result.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

FAMILY = "scatter"
SEED = 12345
# (name, N, E, power-law)
GRAPHS = {"random": (100000, 1000000, False), "powerlaw": (232965, 11461589, True)}
CASES = [("random", 64), ("random", 128), ("powerlaw", 64)]
REDUCES = ["sum", "mean", "amax", "amin", "prod"]

_M64 = (1 << 64) - 1


def mix(np, z):
    """splitmix64 finalizer of z + golden, elementwise on uint64 (wraps)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def node(np, h, N, power, A):
    if not power:
        return (h % np.uint64(N)).astype(np.int64)
    u = h >> np.uint64(43)
    c = u * u * u
    v = ((c >> np.uint64(31)) * np.uint64(N)) >> np.uint64(32)
    return ((v * np.uint64(A) + np.uint64(12345)) % np.uint64(N)).astype(np.int64)


def make_graph(np, name):
    """(N, E, dst, src) exactly as the C benchmarks generate them."""
    N, E, power = GRAPHS[name]
    e = np.arange(E, dtype=np.uint64)
    with np.errstate(over="ignore"):
        base = np.uint64(SEED) + np.uint64(2) * e
        dst = node(np, mix(np, base), N, power, 7919)
        src = node(np, mix(np, base + np.uint64(1)), N, power, 104729)
    return N, E, dst, src


def case_name(op, gname, F):
    N, E, _ = GRAPHS[gname]
    return "%s/f32/%s/N%d/E%d/F%d" % (op, gname, N, E, F)


def main():
    args = common.parse_args()
    try:
        import numpy as np
        import torch
    except Exception as ex:  # noqa: BLE001
        for g, F in CASES:
            for op in REDUCES + ["gather"]:
                for t in args.threads:
                    common.emit(FAMILY, case_name(op, g, F), t, "torch",
                                skipped="torch/numpy not importable: %s" % ex)
        return
    graphs = {}
    for gname, F in CASES:
        if not any(common.wanted(args, FAMILY, case_name(op, gname, F), impl)
                   for op in REDUCES + ["gather"]
                   for impl in ("torch", "torch_index_add", "torch_index_select")):
            continue  # nothing of this graph and width is wanted: no setup
        if gname not in graphs:
            graphs[gname] = make_graph(np, gname)
        N, E, dst, _ = graphs[gname]
        idx = torch.from_numpy(dst)
        gen = torch.Generator().manual_seed(F)
        src = torch.rand(E, F, generator=gen) * 2 - 1
        selfv = torch.rand(N, F, generator=gen) * 2 - 1
        out = torch.empty(N, F)
        iexp = idx.view(-1, 1).expand(E, F)
        sbytes = E * F * 4.0 + E * 8.0 + N * F * 4.0
        gbytes = E * F * 8.0 + E * 8.0
        for t in args.threads:
            common.set_torch_threads(torch, t)
            for red in REDUCES:
                name = case_name(red, gname, F)
                if common.wanted(args, FAMILY, name, "torch"):
                    def f(red=red):
                        torch.scatter_reduce(selfv, 0, iexp, src, red, include_self=True, out=out)
                    common.emit(FAMILY, name, t, "torch", common.timeit(f, args.quick), 0.0, sbytes)
                if red == "sum" and common.wanted(args, FAMILY, name, "torch_index_add"):
                    def f():
                        torch.index_add(selfv, 0, idx, src, out=out)
                    common.emit(FAMILY, name, t, "torch_index_add", common.timeit(f, args.quick),
                                0.0, sbytes)
            name = case_name("gather", gname, F)
            gout = src  # [E, F] buffer, as the C side reuses its src
            if common.wanted(args, FAMILY, name, "torch"):
                def f():
                    torch.gather(selfv, 0, iexp, out=gout)
                common.emit(FAMILY, name, t, "torch", common.timeit(f, args.quick), 0.0, gbytes)
            if common.wanted(args, FAMILY, name, "torch_index_select"):
                def f():
                    torch.index_select(selfv, 0, idx, out=gout)
                common.emit(FAMILY, name, t, "torch_index_select", common.timeit(f, args.quick),
                            0.0, gbytes)
        del src, selfv, out, iexp


if __name__ == "__main__":
    main()
