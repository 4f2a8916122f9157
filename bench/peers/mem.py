"""PyTorch peer for the "mem" family (bench/bench_mem.c): the same cases,
byte counts and thread counts, with preallocated outputs.

  read/f32/n<N>            x.sum()
  copy/f32/n<N>            y.copy_(x)
  triad/f32/n<N>           torch.add(b, c, alpha=3, out=a)
  convert/<s>_to_<d>/n<N>  out.copy_(src)  (dtype conversion into out)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, parse_args, set_torch_threads, timeit, wanted  # noqa: E402

FAMILY = "mem"
MEM_N = [65536, 32 << 20]
CVT_N = [131072, 64 << 20]
CVT = [("bf16", "f32"), ("f16", "f32"), ("f32", "bf16"), ("f32", "f16")]
SIZE = {"f32": 4, "f16": 2, "bf16": 2}


def cases():
    for s in range(2):
        for op in ("read", "copy", "triad"):
            n = MEM_N[s]
            yield "%s/f32/n%d" % (op, n), op, None, None, n
        for src, dst in CVT:
            n = CVT_N[s]
            yield "convert/%s_to_%s/n%d" % (src, dst, n), "convert", src, dst, n


def nbytes(op, src, dst, n):
    return {"read": 4 * n, "copy": 8 * n, "triad": 12 * n}.get(
        op, n * (SIZE.get(src, 0) + SIZE.get(dst, 0)))


def main():
    args = parse_args()
    try:
        import torch
    except ImportError as e:
        for name, op, src, dst, n in cases():
            for t in args.threads:
                if wanted(args, FAMILY, name, "torch", t):
                    emit(FAMILY, name, t, "torch", skipped="torch not importable: %s" % e)
        return
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    g = torch.Generator().manual_seed(1)
    bufs = {}

    def buf(role, dtype, n):  # nonzero data in [-1, 1), made once
        key = (role, dtype, n)
        if key not in bufs:
            x = torch.rand(n, generator=g) * 2 - 1
            x[x == 0] = 0.5
            bufs[key] = x.to(dtype)
        return bufs[key]

    for name, op, src, dst, n in cases():
        for t in args.threads:
            if not wanted(args, FAMILY, name, "torch", t):
                continue
            set_torch_threads(torch, t)
            if op == "read":
                x = buf("x", torch.float32, n)
                fn = lambda x=x: x.sum()  # noqa: E731
            elif op == "copy":
                x, y = buf("x", torch.float32, n), buf("y", torch.float32, n)
                fn = lambda x=x, y=y: y.copy_(x)  # noqa: E731
            elif op == "triad":
                b, c, a = (buf("x", torch.float32, n), buf("z", torch.float32, n),
                           buf("y", torch.float32, n))
                fn = lambda a=a, b=b, c=c: torch.add(b, c, alpha=3.0, out=a)  # noqa: E731
            else:
                s, o = buf("src", dt[src], n), buf("dst", dt[dst], n)
                fn = lambda s=s, o=o: o.copy_(s)  # noqa: E731
            sec = timeit(fn, quick=args.quick)
            emit(FAMILY, name, t, "torch", seconds=sec, nbytes=float(nbytes(op, src, dst, n)))


if __name__ == "__main__":
    main()
