#!/usr/bin/env python3
"""GraphSAGE in kern: a 2-layer SAGEConv model (mean aggregation) exported to
kern's text IR + safetensors, run with build/kern-run on a synthetic
power-law graph, compared with PyTorch Geometric's SAGEConv.

    bench/.venv/bin/python models/graphsage.py                  # N=100k, E=1M, F=64 -> 128 -> 128
    bench/.venv/bin/python models/graphsage.py --nodes 1000 --edges 10000
    bench/.venv/bin/python models/graphsage.py --export-only

The model: h = relu(SAGEConv(F_in, F_hid)(x)); out = SAGEConv(F_hid, F_out)(h),
where SAGEConv(x)_i = lin_l(mean_{j -> i} x_j) + lin_r(x_i) (lin_r without
bias; a node without in-edges aggregates to 0). In kern's IR the
aggregation is spmm_reduce(rowptr, col, -, x) reduce=mean over the graph in
CSR by destination (rowptr [N+1], col = sources), followed by two linears
and an add that the planner fuses into the second GEMM's epilogue.

The graph: E edges whose destinations follow a power law (node i of a
random permutation receives edges with probability ~ 1/(i+1)^0.8, so a few
hubs hold thousands of in-edges and many nodes none) and whose sources are
uniform. Seeded. Files go to build/models/graphsage-N<n>-E<e>/.

Check (one line; exit status 1 on failure): max|kern - pyg| / max|pyg| <=
1e-4 in f32. Without torch_geometric the reference is the formula above in
plain torch (index_add_ / bincount), and the line says so.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def power_law_graph(n, e, seed):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.power(np.arange(1, n + 1, dtype=np.float64), 0.8)
    p /= p.sum()
    perm = rng.permutation(n)
    dst = perm[rng.choice(n, size=e, p=p)].astype(np.int64)
    src = rng.integers(0, n, size=e, dtype=np.int64)
    order = np.argsort(dst, kind="stable")
    src, dst = src[order], dst[order]
    rowptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=rowptr[1:])
    return src, dst, rowptr


def ir_text(fin, fhid, fout):
    L = ["kern-graph 1", "dim N", "dim E",
         "input x f32 [N,%d]" % fin, "input rowptr i64 [N+1]", "input col i64 [E]"]
    dims = [("conv1", fin, fhid), ("conv2", fhid, fout)]
    for c, a, b in dims:
        L.append("weight %s.lin_l.weight f32 [%d,%d]" % (c, b, a))
        L.append("weight %s.lin_l.bias f32 [%d]" % (c, b))
        L.append("weight %s.lin_r.weight f32 [%d,%d]" % (c, b, a))
    x = "x"
    for i, (c, a, b) in enumerate(dims):
        L.append("%s.aggr = spmm_reduce(rowptr, col, -, %s) reduce=mean" % (c, x))
        L.append("%s.l = linear(%s.aggr, %s.lin_l.weight, %s.lin_l.bias)" % (c, c, c, c))
        L.append("%s.r = linear(%s, %s.lin_r.weight)" % (c, x, c))
        y = "%s.out" % c if i == 0 else "out"
        L.append("%s = add(%s.l, %s.r)" % (y, c, c))
        if i == 0:
            L.append("h1 = relu(%s)" % y)
            x = "h1"
    L.append("output out")
    return "\n".join(L) + "\n"


def build_model(args):
    import torch
    try:
        from torch_geometric.nn import SAGEConv
        have_pyg = True
    except Exception as ex:  # reported on the result line
        have_pyg = False
        why = str(ex).splitlines()[0]

    class Plain(torch.nn.Module):
        """SAGEConv's formula in plain torch (the reference without PyG)."""
        def __init__(self, a, b):
            super().__init__()
            self.lin_l = torch.nn.Linear(a, b, bias=True)
            self.lin_r = torch.nn.Linear(a, b, bias=False)

        def forward(self, x, edge_index):
            src, dst = edge_index[0], edge_index[1]
            agg = torch.zeros(x.shape[0], x.shape[1], dtype=x.dtype)
            agg.index_add_(0, dst, x[src])
            deg = torch.bincount(dst, minlength=x.shape[0]).clamp(min=1).to(x.dtype)
            return self.lin_l(agg / deg[:, None]) + self.lin_r(x)

    class Sage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            mk = (lambda a, b: SAGEConv(a, b, aggr="mean")) if have_pyg else Plain
            self.conv1 = mk(args.fin, args.fhid)
            self.conv2 = mk(args.fhid, args.fout)

        def forward(self, x, edge_index):
            return self.conv2(torch.relu(self.conv1(x, edge_index)), edge_index)

    torch.manual_seed(args.seed)
    m = Sage().eval()
    g = torch.Generator().manual_seed(args.seed + 1)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    ref = "torch_geometric %s SAGEConv" % __import__("torch_geometric").__version__ if have_pyg \
        else "plain-torch SAGEConv formula (torch_geometric: %s)" % why
    return m, ref


def params(m):
    return {k.replace(".lin_l.lin.", ".lin_l.").replace(".lin_r.lin.", ".lin_r."): v
            for k, v in m.state_dict().items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=100000)
    ap.add_argument("--edges", type=int, default=1000000)
    ap.add_argument("--fin", type=int, default=64)
    ap.add_argument("--fhid", type=int, default=128)
    ap.add_argument("--fout", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--export-only", action="store_true")
    args = ap.parse_args()

    import torch
    from safetensors.torch import save_file, load_file
    torch.set_num_threads(args.threads)
    m, refname = build_model(args)
    d = os.path.join(ROOT, "build", "models", "graphsage-N%d-E%d-F%d-%d-%d" %
                     (args.nodes, args.edges, args.fin, args.fhid, args.fout))
    os.makedirs(d, exist_ok=True)
    sd = params(m)
    expected = {"conv%d.lin_%s" % (i, s) for i in (1, 2) for s in ("l.weight", "l.bias", "r.weight")}
    if set(sd) != expected:
        raise RuntimeError("unexpected SAGEConv parameters: %s" % sorted(sd))
    with open(os.path.join(d, "model.kg"), "w") as f:
        f.write(ir_text(args.fin, args.fhid, args.fout))
    save_file({k: v.detach().contiguous() for k, v in sd.items()}, os.path.join(d, "model.safetensors"))
    src, dst, rowptr = power_law_graph(args.nodes, args.edges, args.seed + 2)
    x = torch.randn(args.nodes, args.fin, generator=torch.Generator().manual_seed(args.seed + 3))
    ipath = os.path.join(d, "inputs.safetensors")
    save_file({"x": x, "rowptr": torch.from_numpy(rowptr), "col": torch.from_numpy(src)}, ipath)
    # for the benchmark's PyG peer: the same graph as edge_index
    save_file({"edge_index": torch.from_numpy(np.stack([src, dst]))},
              os.path.join(d, "edge_index.safetensors"))
    if args.export_only:
        print("graphsage: wrote %s" % d)
        return 0

    with torch.no_grad():
        ref = m(x, torch.from_numpy(np.stack([src, dst]))).numpy()
    outp = os.path.join(d, "out.safetensors")
    cmd = [os.path.join(ROOT, "build", "kern-run"), os.path.join(d, "model.kg"),
           os.path.join(d, "model.safetensors"), "--bind", "N=%d,E=%d" % (args.nodes, args.edges),
           "--inputs", ipath, "--out", outp, "--threads", str(args.threads), "--runs", "1"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout)
        print("FAIL graphsage: kern-run exited with %d" % r.returncode)
        return 1
    out = load_file(outp)["out"].numpy()
    err = float(np.max(np.abs(out.astype(np.float64) - ref)) / np.max(np.abs(ref)))
    lim = 1e-4
    deg = np.diff(rowptr)
    print("%s graphsage N=%d E=%d F=%d->%d->%d (max in-degree %d, %d nodes without in-edges) "
          "f32 vs %s: max rel err %.3g (<= %g)" %
          ("PASS" if err <= lim else "FAIL", args.nodes, args.edges, args.fin, args.fhid,
           args.fout, int(deg.max()), int((deg == 0).sum()), refname, err, lim))
    return 0 if err <= lim else 1


if __name__ == "__main__":
    sys.exit(main())
