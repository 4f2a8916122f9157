#!/usr/bin/env python3
"""SAM's image encoder in kern: export a Hugging Face SamVisionModel to kern's
text IR + safetensors, run it with build/kern-run, compare with Hugging Face.

    bench/.venv/bin/python models/sam.py                  # small config, padded windows
    bench/.venv/bin/python models/sam.py --vit-b          # SAM ViT-B: image 1024,
        # hidden 768, 12 heads, 12 layers, window 14 (64x64 grid padded to
        # 70x70), global attention in layers 2, 5, 8, 11, mlp 3072, neck 256

The model is built from a SamVisionConfig (nothing is downloaded) with
random weights: every parameter gets seeded noise (the rel-pos tables and
the absolute position embedding too, which HF initialises to zero). The
graph is written as HF computes it, with kern's ops:

    patch embedding   the 16x16 stride-16 convolution as reshape/permute
                      (a copy) + linear over (c, ky, kx)
    window partition  pad (concat with expanded zeros), reshape, permute,
                      reshape; unpartition the reverse, then slices (crop)
    attention         qkv linear, reshape/permute/split into heads,
                      sdpa_relpos (the fused decomposed rel-pos bias)
    neck              1x1 conv = linear, LayerNorm2d = layer_norm over the
                      channels of the NHWC tensor, 3x3 conv = im2col (zero
                      pad by concat, nine slices, concat) + linear

Derived weights (the convolutions as [out, in*kh*kw] matrices) are written
under new names next to HF's. Files go to build/models/sam-<config>/.

Checks (--checks, each one kern-run of the same f32 graph, the variants by
the plan's transforms):
    f32            max|kern - hf| / max|hf| <= 1e-4
    int8           every block linear int8-dynamic (--quantize): SQNR vs
                   HF f32 >= 30 dB
    sparse24       the MLP linears pruned 2:4 and run sparse (--sparsify):
                   SQNR vs HF f32 reported (the pruning's cost; random
                   weights lose a lot), vs HF with the same pruning >= 60 dB
    int8+sparse24  the post's last step: attention linears int8, MLP 2:4
                   (vs HF with the same pruning >= 30 dB)
    int8+sparse24-int8
                   the steps stacked: every block linear int8 and the MLP's
                   pruned 2:4 first (qlinear prune=1, run by the dense int8
                   kernels: the integer sums of a 2:4 int8 product), held
                   as int8+sparse24
    bf16           the graph as torch.autocast(bfloat16) runs it (its own
                   model-bf16.kg and bf16 weights, written next to the f32
                   ones): the block linears, the attention and the
                   convolutions (patch embedding, neck: conv2d is on CPU
                   autocast's bf16 list) in bf16, LayerNorms, residual
                   adds and the rest in f32. SQNR
                   vs HF f32, held to HF autocast-bf16's own distance from
                   HF f32 less 3 dB. A bf16 step only where the CPU has a
                   native bf16 dot (AVX512-BF16; AMX tiles for the linears).
    bf16+int8, bf16+int8+sparse24
                   the post's order: int8 and 2:4 on top of the bf16 model
                   (the bf16 graph with --quantize / --sparsify), held as
                   int8 and int8+sparse24 are. bf16+int8+sparse24 is not
                   among the default checks: on ViT-B it is 26.9 dB from HF
                   f32 with the same pruning (the bf16 rounding of the
                   pruned MLP on top of int8 attention), under the 30 dB
                   int8+sparse24 meets from the f32 graph

Timing (--bench 1,2 [--variants f32,int8,...] [--compile] [--rounds N]):
seconds per image for kern-run and HF eager (and torch.compile) on the
same weights and image, rounds interleaved, medians, load average printed.
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import time

from ir_casts import casts  # models/ is on sys.path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", type=int, default=128)
    ap.add_argument("--patch", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--window", type=int, default=3)
    ap.add_argument("--global", dest="glob", default="1,3")
    ap.add_argument("--mlp", type=int, default=128)
    ap.add_argument("--out-ch", type=int, default=32)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--checks", default="f32,bf16,int8,sparse24,int8+sparse24,bf16+int8",
                    help="f32 (max rel err <= 1e-4), int8, sparse24 (SQNR reported)")
    ap.add_argument("--bench", default="", help="thread counts to time, e.g. 1,2")
    ap.add_argument("--variants", default="f32", help="kern variants timed by --bench")
    ap.add_argument("--rounds", type=int, default=2, help="--bench rounds (A B A B)")
    ap.add_argument("--compile", action="store_true", help="--bench torch.compile too")
    ap.add_argument("--export-only", action="store_true",
                    help="write the IR, weights and input (f32 and bf16) and stop: no HF run, "
                    "no checks (what bench/bench_sam.c runs when the files are missing)")
    ap.add_argument("--vit-b", action="store_true",
                    help="SAM ViT-B's vision config (overrides the size options)")
    a = ap.parse_args(argv)
    if a.vit_b:
        a.image, a.patch, a.hidden, a.heads, a.layers = 1024, 16, 768, 12, 12
        a.window, a.glob, a.mlp, a.out_ch = 14, "2,5,8,11", 3072, 256
    return a


def build_model(a, attn="eager"):
    """The seeded SamVisionModel; attn is HF's attention implementation
    ("eager" materializes the bias and runs matmul/softmax/matmul, "sdpa"
    passes it to F.scaled_dot_product_attention); the weights do not
    depend on it."""
    import torch
    from transformers import SamVisionConfig
    from transformers.models.sam.modeling_sam import SamVisionModel
    glob = [int(x) for x in a.glob.split(",") if x != ""]
    cfg = SamVisionConfig(hidden_size=a.hidden, num_hidden_layers=a.layers,
                          num_attention_heads=a.heads, image_size=a.image, patch_size=a.patch,
                          window_size=a.window, global_attn_indexes=glob, mlp_dim=a.mlp,
                          output_channels=a.out_ch, attn_implementation=attn)
    if a.vit_b:  # the sizes above are SamVisionConfig's defaults, SAM ViT-B's
        ref = SamVisionConfig()
        for f in ("hidden_size", "num_hidden_layers", "num_attention_heads", "image_size",
                  "patch_size", "window_size", "global_attn_indexes", "mlp_dim",
                  "output_channels", "use_rel_pos", "qkv_bias", "layer_norm_eps"):
            x, y = getattr(cfg, f), getattr(ref, f)
            assert (list(x) if isinstance(x, (list, tuple)) else x) == \
                (list(y) if isinstance(y, (list, tuple)) else y), f
    torch.manual_seed(a.seed)
    model = SamVisionModel(cfg).eval()
    g = torch.Generator().manual_seed(a.seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name and name.endswith("weight"):
                p.copy_(1.0 + torch.randn(p.shape, generator=g) * 0.05)
            elif name.endswith("bias") or "rel_pos" in name or "pos_embed" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            elif p.dim() >= 2:  # HF's initializer_range (1e-10) would leave them ~0
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
    return cfg, model


def is_bf16_param(name):
    """The weights the bf16 graph holds in bf16: the block linears' and the
    convolutions' (as matrices) that autocast runs in bf16."""
    if name.endswith("weight2d"):
        return True
    return ".layers." in name and (".attn.qkv." in name or ".attn.proj." in name or
                                   ".mlp." in name) and name.endswith("weight")


def ir_text(cfg, B, shapes, mode="f32"):
    """kern's text IR for SamVisionModel's forward. mode "bf16": as
    torch.autocast(bfloat16) runs it on the CPU, the block linears, the
    attention and the convolutions in bf16 (bf16 weights, activations cast
    to bf16 before them, cast back to f32 after); everything else f32."""
    C, H = cfg.hidden_size, cfg.num_attention_heads
    hd = C // H
    p, S = cfg.patch_size, cfg.image_size
    g = S // p
    O = cfg.output_channels
    eps = repr(float(cfg.layer_norm_eps))
    L = []
    w = L.append
    w("kern-graph 1")
    w("input pixel_values f32 [%d,3,%d,%d]" % (B, S, S))
    for n, s in shapes:
        w("weight %s %s [%s]" % (n, "bf16" if mode == "bf16" and is_bf16_param(n) else "f32",
                                 ",".join(str(x) for x in s)))

    low, high = casts(w, mode)

    w("const zero f32 [1,1,1,1] 0")
    e = "vision_encoder"
    w("pe.6 = reshape(pixel_values) shape=%d,3,%d,%d,%d,%d" % (B, g, p, g, p))
    w("pe.p = permute(pe.6) perm=0,2,4,1,3,5")
    w("pe.cols = reshape(pe.p) shape=%d,%d,%d,%d" % (B, g, g, 3 * p * p))
    w("pe = linear(%s, %s.patch_embed.projection.weight2d, %s.patch_embed.projection.bias)"
      % (low("pe.cols"), e, e))
    w("h.0 = add(%s, %s.pos_embed)" % (high("pe"), e))
    for i in range(cfg.num_hidden_layers):
        lp = "%s.layers.%d" % (e, i)
        x = "h.%d" % i
        ws = 0 if i in cfg.global_attn_indexes else cfg.window_size
        w("%s.ln1 = layer_norm(%s, %s.layer_norm1.weight, %s.layer_norm1.bias) eps=%s"
          % (lp, x, lp, lp, eps))
        cur = lp + ".ln1"
        if ws > 0:
            gp = (g + ws - 1) // ws * ws
            pad = gp - g
            if pad:
                w("%s.zh = expand(zero) shape=%d,%d,%d,%d" % (lp, B, pad, g, C))
                w("%s.padh = concat(%s, %s.zh) axis=1" % (lp, cur, lp))
                w("%s.zw = expand(zero) shape=%d,%d,%d,%d" % (lp, B, gp, pad, C))
                w("%s.pad = concat(%s.padh, %s.zw) axis=2" % (lp, lp, lp))
                cur = lp + ".pad"
            n = gp // ws
            Bw, side = B * n * n, ws
            w("%s.win6 = reshape(%s) shape=%d,%d,%d,%d,%d,%d" % (lp, cur, B, n, ws, n, ws, C))
            w("%s.winp = permute(%s.win6) perm=0,1,3,2,4,5" % (lp, lp))
            w("%s.win = reshape(%s.winp) shape=%d,%d,%d,%d" % (lp, lp, Bw, ws, ws, C))
            cur = lp + ".win"
        else:
            Bw, side = B, g
        Lt = side * side
        a = lp + ".attn"
        w("%s.qkv = linear(%s, %s.qkv.weight, %s.qkv.bias)" % (a, low(cur), a, a))
        w("%s.qkv5 = reshape(%s.qkv) shape=%d,%d,3,%d,%d" % (a, a, Bw, Lt, H, hd))
        w("%s.qkvp = permute(%s.qkv5) perm=2,0,3,1,4" % (a, a))
        w("%s.q5, %s.k5, %s.v5 = split(%s.qkvp) axis=0 sizes=1,1,1" % (a, a, a, a))
        for t in "qkv":
            w("%s.%s = reshape(%s.%s5) shape=%d,%d,%d,%d" % (a, t, a, t, Bw, H, Lt, hd))
        w("%s.ctx = sdpa_relpos(%s.q, %s.k, %s.v, %s.rel_pos_h, %s.rel_pos_w)" % (a, a, a, a, a, a))
        w("%s.ctxp = permute(%s.ctx) perm=0,2,1,3" % (a, a))
        w("%s.ctx4 = reshape(%s.ctxp) shape=%d,%d,%d,%d" % (a, a, Bw, side, side, C))
        w("%s.proj = linear(%s.ctx4, %s.proj.weight, %s.proj.bias)" % (a, a, a, a))
        cur = high(a + ".proj")
        if ws > 0:
            w("%s.un6 = reshape(%s) shape=%d,%d,%d,%d,%d,%d" % (lp, cur, B, n, n, ws, ws, C))
            w("%s.unp = permute(%s.un6) perm=0,1,3,2,4,5" % (lp, lp))
            w("%s.un = reshape(%s.unp) shape=%d,%d,%d,%d" % (lp, lp, B, gp, gp, C))
            cur = lp + ".un"
            if gp != g:
                w("%s.croph = slice(%s) axis=1 start=0 length=%d" % (lp, cur, g))
                w("%s.crop = slice(%s.croph) axis=2 start=0 length=%d" % (lp, lp, g))
                cur = lp + ".crop"
        w("%s.res = add(%s, %s)" % (lp, x, cur))
        w("%s.ln2 = layer_norm(%s.res, %s.layer_norm2.weight, %s.layer_norm2.bias) eps=%s"
          % (lp, lp, lp, lp, eps))
        w("%s.mlp.lin1 = linear(%s, %s.mlp.lin1.weight, %s.mlp.lin1.bias)"
          % (lp, low(lp + ".ln2"), lp, lp))
        w("%s.mlp.act = gelu(%s.mlp.lin1)" % (lp, lp))
        w("%s.mlp.lin2 = linear(%s.mlp.act, %s.mlp.lin2.weight, %s.mlp.lin2.bias)" % (lp, lp, lp, lp))
        w("h.%d = add(%s.res, %s)" % (i + 1, lp, high(lp + ".mlp.lin2")))
    x = "h.%d" % cfg.num_hidden_layers
    nk = e + ".neck"
    w("neck.c1 = linear(%s, %s.conv1.weight2d)" % (low(x), nk))
    w("neck.ln1 = layer_norm(%s, %s.layer_norm1.weight, %s.layer_norm1.bias) eps=%s"
      % (high("neck.c1"), nk, nk, eps))
    w("neck.zr = expand(zero) shape=%d,1,%d,%d" % (B, g, O))
    w("neck.padh = concat(neck.zr, neck.ln1, neck.zr) axis=1")
    w("neck.zc = expand(zero) shape=%d,%d,1,%d" % (B, g + 2, O))
    w("neck.pad = concat(neck.zc, neck.padh, neck.zc) axis=2")
    sl = []
    for dy in range(3):
        w("neck.r%d = slice(neck.pad) axis=1 start=%d length=%d" % (dy, dy, g))
        for dx in range(3):
            w("neck.s%d%d = slice(neck.r%d) axis=2 start=%d length=%d" % (dy, dx, dy, dx, g))
            sl.append("neck.s%d%d" % (dy, dx))
    w("neck.cols8 = concat(%s) axis=3" % ", ".join(sl[:8]))
    w("neck.cols = concat(neck.cols8, %s) axis=3" % sl[8])
    w("neck.c2 = linear(%s, %s.conv2.weight2d)" % (low("neck.cols"), nk))
    w("neck.ln2 = layer_norm(%s, %s.layer_norm2.weight, %s.layer_norm2.bias) eps=%s"
      % (high("neck.c2"), nk, nk, eps))
    w("neck.nchw = permute(neck.ln2) perm=0,3,1,2")
    w("last_hidden_state = copy(neck.nchw)")
    w("output last_hidden_state")
    return "\n".join(L) + "\n"


def export_weights(model):
    """HF's state dict plus the convolutions as matrices: patch [C, 3*p*p]
    over (c, ky, kx); neck conv1 [O, C]; conv2 [O, 9*O] over (ky, kx, c)."""
    sd = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    e = "vision_encoder"
    pw = sd["%s.patch_embed.projection.weight" % e]
    sd["%s.patch_embed.projection.weight2d" % e] = pw.reshape(pw.shape[0], -1).clone()
    c1 = sd["%s.neck.conv1.weight" % e]
    sd["%s.neck.conv1.weight2d" % e] = c1.reshape(c1.shape[0], -1).clone()
    c2 = sd["%s.neck.conv2.weight" % e]
    sd["%s.neck.conv2.weight2d" % e] = c2.permute(0, 2, 3, 1).reshape(c2.shape[0], -1).contiguous()
    return sd


def sqnr_db(got, want):
    want = want.double()
    n = float(((got.double() - want) ** 2).sum())
    return float("inf") if n == 0 else 10.0 * math.log10(float((want ** 2).sum()) / n)


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


# The variants kern-run applies to the one f32 graph (the plan's transforms).
VARIANTS = {
    "f32": [],
    "bf16": [],  # its own graph and weights (model-bf16.*)
    "int8": ["--quantize", "vision_encoder.layers.*"],      # every block linear
    "sparse24": ["--sparsify", "vision_encoder.layers.*.mlp.*"],  # the MLP linears
    # the post's last step: int8 dynamic attention linears + 2:4 sparse MLP
    "int8+sparse24": ["--quantize", "vision_encoder.layers.*.attn.*",
                      "--sparsify", "vision_encoder.layers.*.mlp.*"],
    # the post's order: int8 and 2:4 on top of the bf16 model (the bf16
    # graph's block linears quantized / sparsified, its attention bf16)
    # the steps stacked: every block linear int8, the MLP's int8 + 2:4
    # (qlinear prune=1: pruned, then quantized; dense int8 kernels)
    "int8+sparse24-int8": ["--quantize", "vision_encoder.layers.*",
                           "--sparsify", "vision_encoder.layers.*.mlp.*"],
    "bf16+int8": ["--quantize", "vision_encoder.layers.*"],
    "bf16+int8+sparse24": ["--quantize", "vision_encoder.layers.*.attn.*",
                           "--sparsify", "vision_encoder.layers.*.mlp.*"],
}


def pruned_copy(model):
    """HF's model with every MLP linear pruned 2:4 as kern_sparse24_prune
    does (the 2 largest |w| of each group of 4 along K kept): the reference
    the sparse kern run must match, apart from the pruning itself."""
    import copy
    import torch
    m = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if ".mlp." in name and name.endswith("weight"):
                n, k = p.shape
                g = p.reshape(n, k // 4, 4)
                keep = g.abs().topk(2, dim=2).indices
                mask = torch.zeros_like(g, dtype=torch.bool).scatter_(2, keep, True)
                p.copy_((g * mask).reshape(n, k))
    return m


def kern_run(a, d, variant, threads, runs):
    """Runs kern-run on the exported model: (output tensor, median ms)."""
    from safetensors.torch import load_file
    out = os.path.join(d, "out-%s.safetensors" % variant)
    stem = "model-bf16" if variant.startswith("bf16") else "model"
    cmd = [os.path.join(ROOT, "build", "kern-run"), os.path.join(d, stem + ".kg"),
           os.path.join(d, stem + ".safetensors"), "--inputs", os.path.join(d, "inputs.safetensors"),
           "--out", out, "--threads", str(threads), "--runs", str(runs)] + VARIANTS[variant]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stdout + r.stderr)
        raise RuntimeError("kern-run exited %d" % r.returncode)
    m = re.search(r"median ([0-9.]+) ms", r.stdout + r.stderr)
    return load_file(out)["last_hidden_state"], (float(m.group(1)) if m else float("nan")), r


def time_torch(fn, pix, runs, bf16=False):
    import contextlib
    import torch
    ts = []
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with torch.no_grad(), amp:
        for _ in range(runs):
            t0 = time.perf_counter()
            fn(pixel_values=pix)
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def bench(a, d, model, pix, want):
    """Seconds per image, kern variants vs HF eager (and torch.compile),
    rounds interleaved (A B A B), medians; load average beside each."""
    import torch
    print("bench: %s, %d rounds; load average at the start %s" % (cpu_model(), a.rounds, loadavg()))
    rows = []
    for t in [int(x) for x in a.bench.split(",")]:
        torch.set_num_threads(t)
        res = {}
        loads = [loadavg()]
        time_torch(model, pix, 1)  # warm-up
        bf16 = any(v.startswith("bf16") for v in a.variants.split(","))
        if bf16:
            time_torch(model, pix, 1, True)
        comp = None
        if a.compile:
            t0 = time.perf_counter()
            comp = torch.compile(model)
            time_torch(comp, pix, 1)  # compiles
            print("  torch.compile: first call (compile + run) %.1f s, %d threads"
                  % (time.perf_counter() - t0, t))
        for _ in range(a.rounds):
            for v in a.variants.split(","):
                got, ms, _ = kern_run(a, d, v, t, 1)
                res.setdefault("kern " + v, []).append(ms)
                res.setdefault("sqnr " + v, [sqnr_db(got, want)])
            res.setdefault("torch eager", []).append(time_torch(model, pix, 1))
            if bf16:
                res.setdefault("torch eager bf16", []).append(time_torch(model, pix, 1, True))
            if comp is not None:
                res.setdefault("torch.compile", []).append(time_torch(comp, pix, 1))
            loads.append(loadavg())
        base = statistics.median(res["torch eager"])
        for k, ms in res.items():
            if k.startswith("sqnr"):
                continue
            med = statistics.median(ms)
            sq = res.get("sqnr " + k[5:], [None])[0] if k.startswith("kern") else None
            line = ("  %d thr  %-16s %8.2f s/image  %6.3f images/s  eager/this %5.2f  runs %s"
                    % (t, k, med / 1e3, 1e3 / med, base / med,
                       " ".join("%.2f" % (x / 1e3) for x in ms)))
            if sq is not None:
                line += "  SQNR vs HF f32 %.1f dB" % sq
            print(line)
            rows.append((t, k, med))
        print("  load average over the rounds: %s" % " ".join(loads))
    return rows


def main():
    a = parse()
    import torch
    from safetensors.torch import save_file
    torch.set_num_threads(a.threads)
    cfg, model = build_model(a)
    d = os.path.join(ROOT, "build", "models", "sam-i%d-h%d-l%d-w%d" % (a.image, a.hidden, a.layers,
                                                                       a.window))
    os.makedirs(d, exist_ok=True)
    sd = export_weights(model)
    ir = ir_text(cfg, a.batch, [(k, list(v.shape)) for k, v in sd.items()])
    with open(os.path.join(d, "model.kg"), "w") as f:
        f.write(ir)
    save_file(sd, os.path.join(d, "model.safetensors"))
    if any(v.startswith("bf16") for v in a.checks.split(",") + a.variants.split(",")):
        with open(os.path.join(d, "model-bf16.kg"), "w") as f:
            f.write(ir_text(cfg, a.batch, [(k, list(v.shape)) for k, v in sd.items()], "bf16"))
        save_file({k: (v.bfloat16() if is_bf16_param(k) else v) for k, v in sd.items()},
                  os.path.join(d, "model-bf16.safetensors"))
    del sd
    g = torch.Generator().manual_seed(a.seed + 2)
    pix = torch.randn(a.batch, 3, a.image, a.image, generator=g)
    save_file({"pixel_values": pix}, os.path.join(d, "inputs.safetensors"))
    if a.export_only:
        print("wrote %s" % d)
        return 0
    with torch.no_grad():
        want = model(pixel_values=pix).last_hidden_state.float()
    desc = "SAM vision encoder (image %d, hidden %d, %d layers, window %d, global %s)" % (
        a.image, a.hidden, a.layers, a.window, a.glob)
    fails = 0
    want_pruned = None
    for c in [c for c in a.checks.split(",") if c]:  # --checks "" runs none
        try:
            got, _, r = kern_run(a, d, c, a.threads, a.runs)
        except RuntimeError as e:
            print("FAIL %s %s: %s" % (c, desc, e))
            fails += 1
            continue
        if c == "f32":
            err = float((got - want).abs().max() / want.abs().max())
            ok = err <= 1e-4
            print("%s f32 %s: max|kern-hf|/max|hf| = %.3g (limit 1e-4)"
                  % ("ok  " if ok else "FAIL", desc, err))
        elif c == "bf16":
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                ref = model(pixel_values=pix).last_hidden_state.float()
            v, vr = sqnr_db(got, want), sqnr_db(ref, want)
            ok = v >= vr - 3.0
            print("%s bf16 %s: SQNR vs HF f32 %.1f dB; HF autocast-bf16's own %.1f dB (>= %.1f)"
                  % ("ok  " if ok else "FAIL", desc, v, vr, vr - 3.0))
        elif c in ("int8", "bf16+int8"):
            v = sqnr_db(got, want)
            ok = v >= 30.0
            print("%s %s-dynamic %s: SQNR vs HF f32 %.1f dB (>= 30)"
                  % ("ok  " if ok else "FAIL", c, desc, v))
        else:  # 2:4 pruning changes the model: accuracy vs f32, and the
            # match against HF with the same pruning (>= 60 dB; with int8 >= 30)
            if want_pruned is None:
                with torch.no_grad():
                    want_pruned = pruned_copy(model)(pixel_values=pix).last_hidden_state.float()
            v = sqnr_db(got, want_pruned)
            lim = 30.0 if "int8" in c else 60.0
            ok = v >= lim
            print("%s %s %s: SQNR vs HF f32 %.1f dB (the pruning's cost); vs HF with the "
                  "same 2:4 pruning %.1f dB (>= %g)" % ("ok  " if ok else "FAIL", c, desc,
                                                       sqnr_db(got, want), v, lim))
        fails += not ok
        for line in r.stdout.splitlines():
            if "median" in line:
                print("   ", line)
    if a.bench:
        bench(a, d, model, pix, want)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
