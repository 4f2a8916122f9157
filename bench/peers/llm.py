"""Peers for family `llm`: PyTorch eager (impl `torch`), with the case
strings and byte counts of bench/bench_llm.c (see the comment at its top):

  gemv/<w>/M<m>/N<n>/K<k>: F.linear(x, w) with w [N, K];
    f32: x, w f32; bf16: x, w bf16; i8: torch._weight_int8pack_mm(x, w,
    scales) (x f32... as the op allows: bf16 when f32 is refused), skipped
    with the reason when this torch has no such op.
  decode/<c>/B<b>/H32/Hkv8/D128/L<len>: F.scaled_dot_product_attention of
    q [B, 32, 1, 128] against k, v [B, 8, len, 128] with enable_gqa=True.
The weight (the cache) cycles through copies totalling >= 256 MiB, as in
the C file, so each call reads it from DRAM.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

FAMILY = "llm"
WDTS = ["f32", "bf16", "i8"]
SHAPES = [(4096, 4096), (11008, 4096)]
MS = [1, 4]
DECODE = [(1, 4096), (1, 16384), (4, 4096)]


def decode_cases(args, torch):
    F = torch.nn.functional
    for c in ["f32", "bf16"]:
        for B, L in DECODE:
            case = "decode/%s/B%d/H32/Hkv8/D128/L%d" % (c, B, L)
            if not common.wanted(args, FAMILY, case, "torch"):
                continue
            tdt = torch.float32 if c == "f32" else torch.bfloat16
            es = 4 if c == "f32" else 2
            cb = B * L * 8 * 128 * es
            copies = (256 << 20) // (2 * cb) + 1
            q = torch.rand(B, 32, 1, 128).to(tdt)
            ks = [torch.rand(B, 8, L, 128).to(tdt) for _ in range(copies)]
            vs = [torch.rand(B, 8, L, 128).to(tdt) for _ in range(copies)]
            skip = None
            try:
                F.scaled_dot_product_attention(q, ks[0], vs[0], enable_gqa=True)
            except Exception as e:
                skip = "sdpa(enable_gqa) failed: %s" % common.first_line(e, 160)
            def one(i):
                with torch.no_grad():
                    return F.scaled_dot_product_attention(q, ks[i], vs[i], enable_gqa=True)
            call = common.rotating(copies, one)
            for t in args.threads:
                if skip is not None:
                    common.emit(FAMILY, case, t, "torch", skipped=skip)
                    continue
                common.set_torch_threads(torch, t)
                s = common.timeit(call, args.quick)
                common.emit(FAMILY, case, t, "torch", s, 4.0 * B * 32 * L * 128, float(2 * cb))
            del ks, vs


def main():
    args = common.parse_args()
    cases = []
    for w in WDTS:
        for N, K in SHAPES:
            for M in MS:
                cases.append((w, M, N, K, "gemv/%s/M%d/N%d/K%d" % (w, M, N, K)))
    try:
        import torch
    except Exception as e:  # pragma: no cover
        for _, _, _, _, case in cases:
            for t in args.threads:
                if common.wanted(args, FAMILY, case, "torch"):
                    common.emit(FAMILY, case, t, "torch", skipped="torch not importable: %s" % e)
        return
    F = torch.nn.functional
    for w, M, N, K, case in cases:
        if not common.wanted(args, FAMILY, case, "torch"):
            continue
        es = {"f32": 4, "bf16": 2, "i8": 1}[w]
        wbytes = N * K * es
        nbytes = float(wbytes + (4 * N if w == "i8" else 0))
        copies = (256 << 20) // wbytes + 1
        g = torch.Generator().manual_seed(N + K + M)
        skip = None
        if w == "i8":
            if not hasattr(torch, "_weight_int8pack_mm"):
                skip = "this torch has no _weight_int8pack_mm"
            ws = [torch.randint(-127, 128, (N, K), dtype=torch.int8, generator=g) for _ in range(copies)]
            sc = torch.rand(N, generator=g) * 0.01
            x = torch.rand(M, K, generator=g)
            if skip is None:
                try:
                    torch._weight_int8pack_mm(x, ws[0], sc)
                except Exception:
                    try:
                        x = x.to(torch.bfloat16)
                        sc = sc.to(torch.bfloat16)
                        torch._weight_int8pack_mm(x, ws[0], sc)
                    except Exception as e:
                        skip = "_weight_int8pack_mm failed: %s" % common.first_line(e, 160)
            call = common.rotating(copies, lambda i: torch._weight_int8pack_mm(x, ws[i], sc))
        else:
            tdt = torch.float32 if w == "f32" else torch.bfloat16
            ws = [(torch.rand(N, K, generator=g) * 2 - 1).to(tdt) for _ in range(copies)]
            x = (torch.rand(M, K, generator=g) * 2 - 1).to(tdt)
            def one(i):
                with torch.no_grad():
                    return F.linear(x, ws[i])
            call = common.rotating(copies, one)
        for t in args.threads:
            if skip is not None:
                common.emit(FAMILY, case, t, "torch", skipped=skip)
                continue
            common.set_torch_threads(torch, t)
            s = common.timeit(call, args.quick)
            common.emit(FAMILY, case, t, "torch", s, 2.0 * M * N * K, nbytes)
        del ws
    decode_cases(args, torch)


if __name__ == "__main__":
    main()
