"""Peers of bench/cuda/bench_sdpa_cuda.cu (family sdpa_cuda): PyTorch
scaled_dot_product_attention on the GPU with the flash backend (impl
torch_flash) and the cuDNN backend (impl torch_cudnn), on the same cases,
case strings, FLOP and byte counts as the C benchmark:

  fwd|bwd/<dtype>/B<b>/H<h>/L<l>/D<d>/full|causal   16k tokens, H*D = 2048
  decode/<dtype>/B8/Hq32/Hkv8/Lq1/Lk<lk>/D128       split-KV decode, GQA

Memory layout [B, L, H, D] viewed as [B, H, L, D] through a transpose (the
FlashAttention layout, the same memory the C benchmark uses). Forward
FLOPs 4*B*H*Lq*Lk*D (halved when causal), backward 2.5x that; the backward
is timed as torch.autograd.grad of a retained forward graph (backward
kernels only). Timing: CUDA events, warm-up, median of repeated batches.

    bench/.venv/bin/python bench/peers/sdpa_cuda.py [--filter REGEX] [--quick]

Needs a CUDA build of torch and a GPU; otherwise every case is reported as
skipped, with the reason.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, parse_args, wanted  # noqa: E402

FAMILY = "sdpa_cuda"


def cases():
    out = []
    for bwd in (0, 1):
        for dt in ("f16", "bf16"):
            for d in (64, 128, 256):
                for causal in (0, 1):
                    for L in (512, 1024, 2048, 4096, 8192, 16384):
                        b, h = 16384 // L, 2048 // d
                        name = "%s/%s/B%d/H%d/L%d/D%d/%s" % (
                            "bwd" if bwd else "fwd", dt, b, h, L, d,
                            "causal" if causal else "full")
                        flops = 4.0 * b * h * L * L * d * (0.5 if causal else 1.0) * (2.5 if bwd else 1.0)
                        out.append(dict(name=name, bwd=bwd, dt=dt, B=b, Hq=h, Hkv=h, Lq=L, Lk=L, D=d,
                                        causal=causal, flops=flops, bytes=0.0))
    for dt in ("f16", "bf16"):
        for lk in (4096, 32768):
            b, hq, hkv, d = 8, 32, 8, 128
            out.append(dict(name="decode/%s/B8/Hq32/Hkv8/Lq1/Lk%d/D128" % (dt, lk), bwd=0, dt=dt, B=b,
                            Hq=hq, Hkv=hkv, Lq=1, Lk=lk, D=d, causal=0,
                            flops=4.0 * b * hq * 1 * lk * d,
                            bytes=2.0 * (2.0 * b * hkv * lk * d + 2.0 * b * hq * 1 * d)))
    return out


def cuda_time(torch, fn, quick):
    """Median seconds per call with CUDA events (batches of >= ~2 ms)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    fn()
    e1.record()
    e1.synchronize()
    one = max(e0.elapsed_time(e1), 1e-4)
    batch = max(1, min(1000, int(2.0 / one)))
    samples = []
    for _ in range(5 if quick else 15):
        e0.record()
        for _ in range(batch):
            fn()
        e1.record()
        e1.synchronize()
        samples.append(e0.elapsed_time(e1) * 1e-3 / batch)
    return statistics.median(samples)


def main():
    args = parse_args()
    impls = (("torch_flash", "FLASH_ATTENTION"), ("torch_cudnn", "CUDNN_ATTENTION"))
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
    except Exception as e:  # no torch, a CPU build, or no GPU
        for c in cases():
            for impl, _ in impls:
                if wanted(args, FAMILY, c["name"], impl):
                    emit(FAMILY, c["name"], 1, impl, skipped="%s: %s" % (type(e).__name__, e))
        return
    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16}
    for c in cases():
        todo = [(impl, be) for impl, be in impls if wanted(args, FAMILY, c["name"], impl)]
        if not todo:
            continue
        dt = dtypes[c["dt"]]
        g = torch.Generator(device="cuda").manual_seed(1)

        def blhd(h, L):
            x = torch.randn(c["B"], L, h, c["D"], device="cuda", dtype=dt, generator=g)
            return x.transpose(1, 2)

        q, k, v = blhd(c["Hq"], c["Lq"]), blhd(c["Hkv"], c["Lk"]), blhd(c["Hkv"], c["Lk"])
        gqa = c["Hq"] != c["Hkv"]
        for impl, be in todo:
            try:
                with sdpa_kernel(getattr(SDPBackend, be)):
                    if c["bwd"]:
                        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
                        out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=bool(c["causal"]))
                        dout = torch.randn_like(out)

                        def fn():
                            torch.autograd.grad(out, (qg, kg, vg), dout, retain_graph=True)
                    else:
                        kw = {"enable_gqa": True} if gqa else {}

                        def fn():
                            F.scaled_dot_product_attention(q, k, v, is_causal=bool(c["causal"]), **kw)
                    sec = cuda_time(torch, fn, args.quick)
                emit(FAMILY, c["name"], 1, impl, seconds=sec, flops=c["flops"], nbytes=c["bytes"])
            except Exception as e:  # backend unavailable for this case
                emit(FAMILY, c["name"], 1, impl, skipped="%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200]))
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
