"""PyTorch peer for the "gemm" family (bench/bench_gemm.c): the same cases,
flop/byte counts and thread counts, outputs preallocated.

  <dt>/M<M>/N<N>/K<K>                  torch.matmul(a, b, out=c)
                                       (f32 in/out, or bf16 in/out)
  f32/M<M>/N<N>/K<K>/bias+gelu+res     torch.addmm(bias, a, b, out=c), then
                                       gelu (erf) and add in place: PyTorch's
                                       unfused form of our fused epilogue
Work = 2*M*N*K flops; for M <= 16 the bytes are the weight K*N*size(dt).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, over_cap, parse_args, set_torch_threads, timeit, wanted  # noqa: E402

FAMILY = "gemm"
SHAPES = [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
          (2048, 4096, 4096), (16, 4096, 4096), (1, 4096, 4096), (4096, 4096, 64),
          (4096, 64, 4096), (128, 768, 3072), (4, 4096, 4096), (8, 4096, 4096)]


def cases():
    for dt in ("f32", "bf16"):
        for m, n, k in SHAPES:
            yield "%s/M%d/N%d/K%d" % (dt, m, n, k), dt, m, n, k, False
    yield "f32/M512/N3072/K768", "f32", 512, 3072, 768, False
    yield "f32/M128/N768/K3072/bias+gelu+res", "f32", 128, 768, 3072, True
    yield "f32/M512/N3072/K768/bias+gelu+res", "f32", 512, 3072, 768, True


def main():
    args = parse_args()
    try:
        import torch
    except ImportError as e:
        for name, *_ in cases():
            for t in args.threads:
                if wanted(args, FAMILY, name, "torch", t):
                    emit(FAMILY, name, t, "torch", skipped="torch not importable: %s" % e)
        return
    tdt = {"f32": torch.float32, "bf16": torch.bfloat16}
    size = {"f32": 4, "bf16": 2}
    g = torch.Generator().manual_seed(1)

    def rnd(*shape, dtype):  # nonzero data in [-1, 1)
        x = torch.rand(*shape, generator=g) * 2 - 1
        x[x == 0] = 0.5
        return x.to(dtype)

    for name, dt, m, n, k, epi in cases():
        todo = [t for t in args.threads if wanted(args, FAMILY, name, "torch", t)]
        if not todo:
            continue
        a, b = rnd(m, k, dtype=tdt[dt]), rnd(k, n, dtype=tdt[dt])
        c = torch.empty(m, n, dtype=tdt[dt])
        if epi:
            bias, res = rnd(n, dtype=tdt[dt]), rnd(m, n, dtype=tdt[dt])

            def fn():
                torch.addmm(bias, a, b, out=c)
                torch.nn.functional.gelu(c, approximate="none").add_(res)
        else:
            def fn():
                torch.matmul(a, b, out=c)
        flops = 2.0 * m * n * k
        nbytes = float(k * n * size[dt]) if m <= 16 else 0.0
        for t in todo:
            set_torch_threads(torch, t)
            if dt == "bf16" and m > 16:
                # 16 rows first: without AVX512_BF16/AMX torch's CPU bf16
                # matmul is a plain loop (~0.5 GFLOP/s): minutes a call at
                # 4096^3; over --max-call it is skipped
                t0 = time.perf_counter()
                torch.matmul(a[:16], b)
                why = over_cap((time.perf_counter() - t0) * m / 16)
                if why is not None:
                    emit(FAMILY, name, t, "torch", skipped="torch: " + why)
                    continue
            sec = timeit(fn, quick=args.quick)
            emit(FAMILY, name, t, "torch", seconds=sec, flops=flops, nbytes=nbytes)


if __name__ == "__main__":
    main()
