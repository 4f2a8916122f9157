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

The whole encoder, encoder/vit-b/<step> (bench/bench_sam.c's steps), on
models/sam.py's seeded SAM ViT-B and the image it writes:

  torch          HF SamVisionModel with its default attention (sdpa: the
                 bias materialized and passed to SDPA), inference mode;
                 step bf16 under torch.autocast(bfloat16), int8 = torch's
                 quantize_dynamic of every nn.Linear (the block linears:
                 the same set kern quantizes); the 2:4 steps and the int8
                 steps on top of bf16 are skipped (torch's semi-structured
                 sparse linear is CUDA-only; its dynamic int8 linear takes
                 f32 activations);
  torch_compile  torch.compile of the same model, f32 and bf16 (compiling
                 and the first call untimed; Inductor's cache under
                 build/models/inductor-cache).

The bf16 steps are skipped on a CPU without a native bf16 dot product, as
kern's are.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "models"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(ROOT, "build", "models", "inductor-cache"))
import common  # noqa: E402

FAMILY = "sam"
IMPLS = ("torch_eager", "torch_sdpa_mask")
STEPS = ("f32", "bf16", "int8", "sparse24", "int8+sparse24", "int8+sparse24-int8", "bf16+int8",
         "bf16+int8+sparse24")
ENC_IMPLS = ("torch", "torch_compile")


def encoder_flops():
    """bench/bench_sam.c's encoder_flops: ViT-B, padded windows counted."""
    C, I, O, T, Tw, H, D = 768.0, 3072.0, 256.0, 4096.0, 4900.0, 12.0, 64.0
    f = 2 * T * C * C
    win = 2 * Tw * C * 3 * C + 2 * Tw * C * C + 4 * 25 * H * 196.0 * 196.0 * D
    glo = 2 * T * C * 3 * C + 2 * T * C * C + 4 * H * T * T * D
    f += 8 * win + 4 * glo + 12 * (2 * 2 * T * C * I)
    f += 2 * T * C * O + 2 * T * 9 * O * O
    return f


def native_bf16():
    """A bf16 dot product in hardware (x86 AVX512-BF16 / AMX-BF16, Arm bf16)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    fl = line.split(":", 1)[1].split()
                    return "avx512_bf16" in fl or "amx_bf16" in fl or "bf16" in fl
    except OSError:
        pass
    return False


def enc_skip(step, impl):
    if step.startswith("bf16") and not native_bf16():
        return "no native bf16 dot product on this CPU: the bf16 steps are skipped"
    if "sparse24" in step:
        return "torch's 2:4 semi-structured sparse linear runs on CUDA only"
    if step.startswith("bf16+"):
        return "no torch CPU equivalent (quantize_dynamic's int8 linear takes f32 activations)"
    if impl == "torch_compile" and step == "int8":
        return common.COMPILE_INT8_SKIP
    return None


def run_encoder(args):
    todo = [(st, i) for st in STEPS for i in ENC_IMPLS
            if common.wanted(args, FAMILY, "encoder/vit-b/" + st, i)]
    if not todo:
        return
    state = {}

    def setup(torch):
        if "model" not in state:
            import sam
            a = sam.parse(["--vit-b"])
            _, state["model"] = sam.build_model(a, attn="sdpa")
            g = torch.Generator().manual_seed(a.seed + 2)
            state["pix"] = torch.randn(1, 3, a.image, a.image, generator=g)
        return state["model"], state["pix"]
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        torch, err = None, "torch not importable: %s" % common.first_line(e)
    fl = encoder_flops()
    comp_err = None
    for step, impl in todo:
        case = "encoder/vit-b/" + step
        skip = enc_skip(step, impl) or (None if torch else err)
        call = None
        if not skip:
            try:
                model, pix = setup(torch)
                m = model
                if step == "int8":
                    m = common.cached(state, "q", lambda: common.int8_dynamic(torch, model))
                if impl == "torch_compile":
                    if comp_err:
                        raise RuntimeError(comp_err)
                    m = common.cached(state, "c", lambda: torch.compile(model, dynamic=False))

                def call(m=m, bf16=step == "bf16"):
                    with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=bf16):
                        return m(pixel_values=pix)
            except Exception as e:  # noqa: BLE001
                skip = "%s: %s" % (impl, common.first_line(e, 200))
        msg = common.time_threads(args, FAMILY, case, impl, call, torch, fl, 0.0, skip,
                                  compiled=impl == "torch_compile")
        if impl == "torch_compile" and msg and not skip:
            comp_err = msg


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
    run_encoder(args)


if __name__ == "__main__":
    main()
