"""Peers for the `sam` family: SAM ViT-B attention with the decomposed
relative-position bias in PyTorch, the two ways Hugging Face's SamModel runs
it (transformers' SamVisionAttention / SamVisionSdpaAttention):

  torch_eager      attn = (q * scale) @ k^T + rel_h + rel_w (the bias from
                   get_rel_pos and two einsums), softmax in f32, @ v;
  torch_sdpa_mask  the same bias materialized as [B, H, L, L] and passed to
                   F.scaled_dot_product_attention as attn_mask.

Both form the bias inside the timed call, as the model does every forward.
The tables have 2 * g - 1 rows (no interpolation). Case names and FLOP
counts (4 B H L^2 D, the bias not counted) match bench/bench_sam.c.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

FAMILY = "sam"
IMPLS = ("torch_eager", "torch_sdpa_mask")


def cases():
    out = []
    for dt in ("f32", "bf16"):
        for B, g in ((1, 64), (25, 14)):
            name = "relpos/%s/B%d/H12/G%dx%d/D64" % (dt, B, g, g)
            out.append(dict(dt=dt, B=B, H=12, g=g, D=64, name=name))
    return out


def flops(c):
    L = c["g"] * c["g"]
    return 4.0 * c["B"] * c["H"] * L * L * c["D"]


def rel_index(torch, g):
    """get_rel_pos's row indices for equal query and key sizes g."""
    coords = torch.arange(g)[:, None] - torch.arange(g)[None, :] + (g - 1)
    return coords.long()


def decomposed_bias(torch, q, rel_h, rel_w, g, idx):
    """[B*H, L, L] bias as HF's get_decomposed_rel_pos: rel_h[b,h,w,kh],
    rel_w[b,h,w,kw] from einsums, broadcast-added."""
    bh, L, D = q.shape
    Rh = rel_h[idx]  # [g, g, D]
    Rw = rel_w[idx]
    r = q.reshape(bh, g, g, D)
    eh = torch.einsum("bhwc,hkc->bhwk", r, Rh)
    ew = torch.einsum("bhwc,wkc->bhwk", r, Rw)
    return (eh[:, :, :, :, None] + ew[:, :, :, None, :]).reshape(bh, L, L)


def run(args, cs):
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001
        for c in cs:
            for t in args.threads:
                for impl in IMPLS:
                    if common.wanted(args, FAMILY, c["name"], impl):
                        common.emit(FAMILY, c["name"], t, impl, skipped="torch not importable: %s" % e)
        return
    for c in cs:
        for t in args.threads:
            for impl in IMPLS:
                if not common.wanted(args, FAMILY, c["name"], impl, t):
                    continue
                if args.quick and c["g"] > 32:
                    continue
                common.set_torch_threads(torch, t)
                dt = torch.float32 if c["dt"] == "f32" else torch.bfloat16
                B, H, g, D = c["B"], c["H"], c["g"], c["D"]
                L = g * g
                gen = torch.Generator().manual_seed(0)

                def rnd(*shape):
                    return torch.rand(*shape, generator=gen).mul_(2).sub_(1).to(dt)
                q, k, v = rnd(B * H, L, D), rnd(B * H, L, D), rnd(B * H, L, D)
                rel_h, rel_w = rnd(2 * g - 1, D), rnd(2 * g - 1, D)
                idx = rel_index(torch, g)
                scale = D ** -0.5
                try:
                    if impl == "torch_eager":
                        def fn():
                            with torch.no_grad():
                                a = (q * scale) @ k.transpose(-2, -1)
                                a = a + decomposed_bias(torch, q, rel_h, rel_w, g, idx)
                                a = torch.softmax(a, dim=-1, dtype=torch.float32).to(dt)
                                return a @ v
                    else:
                        def fn():
                            with torch.no_grad():
                                bias = decomposed_bias(torch, q, rel_h, rel_w, g, idx)
                                return F.scaled_dot_product_attention(
                                    q.view(B, H, L, D), k.view(B, H, L, D), v.view(B, H, L, D),
                                    attn_mask=bias.view(B, H, L, L))
                    sec = common.timeit(fn, quick=args.quick)
                    common.emit(FAMILY, c["name"], t, impl, sec, flops(c), 0.0)
                except Exception as e:  # noqa: BLE001
                    msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
                    common.emit(FAMILY, c["name"], t, impl, skipped="torch failed: %s" % msg)


def main():
    args = common.parse_args()
    run(args, cases())


if __name__ == "__main__":
    main()
