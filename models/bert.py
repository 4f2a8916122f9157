#!/usr/bin/env python3
"""BERT in kern: export a Hugging Face BertModel to kern's text IR +
safetensors, run it with build/kern-run, compare with Hugging Face.

    bench/.venv/bin/python models/bert.py                 # BERT-base, every check
    bench/.venv/bin/python models/bert.py --layers 2 --batch 2 --seq 32
    bench/.venv/bin/python models/bert.py --export-only   # files for the bench

The model is built from a BertConfig (defaults = BERT-base; nothing is
downloaded), random-initialised from --seed; its biases and LayerNorm
parameters get seeded noise too, so every parameter takes part. Files go
to build/models/<name>/ (reused when the config and seed match):

    model.kg              the f32 graph (Hugging Face's computation, unfused)
    model.safetensors     its weights, under model.state_dict()'s names
    model-bf16.kg         the graph as torch.autocast(bfloat16) runs it: linears
                          and attention in bf16, embeddings, residual adds and
                          LayerNorms in f32
    model-bf16.safetensors
    inputs-B<b>-L<l>.safetensors   input_ids, token_type_ids, attention_mask

Checks (one line each, exit status 1 if any fails), against HF in f32:
    f32          max|kern - hf| / max|hf| <= 1e-4
    bf16         max|kern - hf| / max|hf| <= 2e-2
    int8-dynamic SQNR = 10 log10(sum hf^2 / sum (kern - hf)^2) >= 30 dB
(the relative error is over the whole last_hidden_state, padded positions
included: the attention mask has padding in every sequence but the first).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

from ir_casts import casts  # models/ is on sys.path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_model(args):
    import torch
    from transformers import BertConfig, BertModel
    cfg = BertConfig(num_hidden_layers=args.layers, hidden_size=args.hidden,
                     num_attention_heads=args.heads,
                     intermediate_size=args.intermediate or 4 * args.hidden,
                     vocab_size=args.vocab, hidden_act="gelu",
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     attn_implementation="eager")
    torch.manual_seed(args.seed)
    model = BertModel(cfg, add_pooling_layer=False).eval()
    g = torch.Generator().manual_seed(args.seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            elif "LayerNorm.weight" in name:
                p.copy_(1.0 + torch.randn(p.shape, generator=g) * 0.05)
    return cfg, model


def is_gemm_param(name):
    """The parameters of the encoder's linears (bf16 in the bf16 graph)."""
    return name.startswith("encoder.") and "LayerNorm" not in name


def ir_text(cfg, mode, names_shapes):
    """kern's text IR for BertModel's forward (last_hidden_state), written as
    Hugging Face computes it; kern's passes fuse it at plan time.

    mode "f32": everything f32. mode "bf16": as torch.autocast(bfloat16)
    runs it: the linears and attention in bf16 (bf16 weights, activations
    cast to bf16 before them), embeddings, residual adds and LayerNorms in
    f32."""
    H, nh = cfg.hidden_size, cfg.num_attention_heads
    hd = H // nh
    eps = repr(float(cfg.layer_norm_eps))
    lo = "bf16" if mode == "bf16" else "f32"
    L = []
    w = L.append
    w("kern-graph 1")
    w("dim B")
    w("dim L")
    w("input input_ids i64 [B,L]")
    w("input token_type_ids i64 [B,L]")
    w("input attention_mask i64 [B,L]")
    for n, shape in names_shapes:
        w("weight %s %s [%s]" % (n, lo if is_gemm_param(n) else "f32",
                                 ",".join(str(s) for s in shape)))
    w("const one f32 [] 1")
    # torch.finfo(f32).min, the value HF's extended mask uses
    w("const big f32 [] -3.40282347e+38")
    e = "embeddings"
    w("emb.word = embedding(input_ids, %s.word_embeddings.weight)" % e)
    w("emb.type = embedding(token_type_ids, %s.token_type_embeddings.weight)" % e)
    w("emb.pos = slice(%s.position_embeddings.weight) axis=0 start=0 length=L" % e)
    w("emb.sum1 = add(emb.word, emb.type)")
    w("emb.sum = add(emb.sum1, emb.pos)")
    w("h.0 = layer_norm(emb.sum, %s.LayerNorm.weight, %s.LayerNorm.bias) eps=%s" % (e, e, eps))
    w("mask.f = cast(attention_mask) dtype=f32")
    w("mask.inv = sub(one, mask.f)")
    if mode == "bf16":
        # bf16 cannot hold finfo(f32).min (it rounds to -inf): use bf16's min
        w("const bigb f32 [] -3.38953139e+38")
        w("mask.addf = mul(mask.inv, bigb)")
        w("mask.add = cast(mask.addf) dtype=bf16")
    else:
        w("mask.add = mul(mask.inv, big)")
    w("mask = reshape(mask.add) shape=B,1,1,L")

    low, high = casts(w, mode)

    for i in range(cfg.num_hidden_layers):
        p = "encoder.layer.%d" % i
        x = "h.%d" % i
        a = p + ".attention"
        xl = low(x)
        for t in ("query", "key", "value"):
            w("%s.self.%s = linear(%s, %s.self.%s.weight, %s.self.%s.bias)" % (a, t, xl, a, t, a, t))
            w("%s.self.%s.4 = reshape(%s.self.%s) shape=B,L,%d,%d" % (a, t, a, t, nh, hd))
            w("%s.self.%s.h = permute(%s.self.%s.4) perm=0,2,1,3" % (a, t, a, t))
        w("%s.self.ctx = sdpa(%s.self.query.h, %s.self.key.h, %s.self.value.h, mask)" % (a, a, a, a))
        w("%s.self.ctx.p = permute(%s.self.ctx) perm=0,2,1,3" % (a, a))
        w("%s.self.out = reshape(%s.self.ctx.p) shape=B,L,%d" % (a, a, H))
        w("%s.output.dense = linear(%s.self.out, %s.output.dense.weight, %s.output.dense.bias)"
          % (a, a, a, a))
        w("%s.output.res = add(%s, %s)" % (a, high(a + ".output.dense"), x))
        w("%s.output.LayerNorm = layer_norm(%s.output.res, %s.output.LayerNorm.weight, "
          "%s.output.LayerNorm.bias) eps=%s" % (a, a, a, a, eps))
        y = a + ".output.LayerNorm"
        yl = low(y)
        w("%s.intermediate.dense = linear(%s, %s.intermediate.dense.weight, "
          "%s.intermediate.dense.bias)" % (p, yl, p, p))
        w("%s.intermediate.act = gelu(%s.intermediate.dense)" % (p, p))
        w("%s.output.dense = linear(%s.intermediate.act, %s.output.dense.weight, "
          "%s.output.dense.bias)" % (p, p, p, p))
        w("%s.output.res = add(%s, %s)" % (p, high(p + ".output.dense"), y))
        out = "h.%d" % (i + 1) if i + 1 < cfg.num_hidden_layers else "last_hidden_state"
        w("%s = layer_norm(%s.output.res, %s.output.LayerNorm.weight, %s.output.LayerNorm.bias) "
          "eps=%s" % (out, p, p, p, eps))
    if cfg.num_hidden_layers == 0:
        w("last_hidden_state = copy(h.0)")
    w("output last_hidden_state")
    return "\n".join(L) + "\n"


def used_params(model):
    sd = model.state_dict()
    return {k: v for k, v in sd.items() if not k.endswith("position_ids")
            and not k.endswith("token_type_ids")}


def export(args, cfg, model, d):
    """Writes the f32 and bf16 graphs and weights into d (skipped when a
    stamp says they are there for this config and seed)."""
    import torch
    from safetensors.torch import save_file
    stamp = os.path.join(d, "stamp.json")
    key = {"config": cfg.to_dict(), "seed": args.seed, "version": 3}
    key["config"].pop("transformers_version", None)
    if os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == key:
                return
    os.makedirs(d, exist_ok=True)
    sd = used_params(model)
    names_shapes = [(k, list(v.shape)) for k, v in sd.items()]
    for mode, suffix in (("f32", ""), ("bf16", "-bf16")):
        with open(os.path.join(d, "model%s.kg" % suffix), "w") as f:
            f.write(ir_text(cfg, mode, names_shapes))
        save_file({k: v.detach().to(torch.bfloat16 if mode == "bf16" and is_gemm_param(k)
                                    else torch.float32).contiguous() for k, v in sd.items()},
                  os.path.join(d, "model%s.safetensors" % suffix))
    with open(stamp, "w") as f:
        json.dump(key, f)


def make_inputs(cfg, batch, seq, seed):
    """Token ids, token types (0 then 1 from the middle) and a 0/1 mask with
    padding at the end of every sequence but the first."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, cfg.vocab_size, size=(batch, seq), dtype=np.int64)
    tt = np.zeros((batch, seq), dtype=np.int64)
    tt[:, seq // 2:] = 1
    mask = np.ones((batch, seq), dtype=np.int64)
    for b in range(1, batch):
        n = max(1, seq - int(rng.integers(1, max(2, seq // 2))))
        mask[b, n:] = 0
    return {"input_ids": ids, "token_type_ids": tt, "attention_mask": mask}


def write_inputs(path, inputs):
    from safetensors.numpy import save_file
    save_file({k: np.ascontiguousarray(v) for k, v in inputs.items()}, path)


def kern_run(args, d, kg, st, inputs_path, out_path, batch, seq, extra=()):
    exe = os.path.join(ROOT, "build", "kern-run")
    cmd = [exe, os.path.join(d, kg), os.path.join(d, st), "--bind", "B=%d,L=%d" % (batch, seq),
           "--inputs", inputs_path, "--out", out_path, "--threads", str(args.threads),
           "--runs", "1"] + list(extra)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout)
        raise RuntimeError("kern-run failed (%d): %s" % (r.returncode, " ".join(cmd)))
    return load_out(out_path), time.perf_counter() - t0


def load_out(path, name="last_hidden_state"):
    """The output as f32 numpy (through torch: numpy has no bf16)."""
    import torch
    from safetensors.torch import load_file
    return load_file(path)[name].to(torch.float32).numpy()


def rel_err(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b)) / np.max(np.abs(b)))


def sqnr_db(a, b):
    b64 = b.astype(np.float64)
    n = float(np.sum((a.astype(np.float64) - b64) ** 2))
    return float("inf") if n == 0 else 10.0 * math.log10(float(np.sum(b64 ** 2)) / n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=0, help="default 4 x hidden")
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--name", default="", help="directory under build/models (default from the config)")
    ap.add_argument("--checks", default="f32,bf16,int8")
    ap.add_argument("--export-only", action="store_true")
    args = ap.parse_args()

    import torch
    torch.set_num_threads(args.threads)
    cfg, model = build_model(args)
    name = args.name or ("bert-base" if (args.layers, args.hidden, args.heads, args.vocab) ==
                         (12, 768, 12, 30522) and not args.intermediate else
                         "bert-l%d-h%d-a%d-v%d" % (args.layers, args.hidden, args.heads, args.vocab))
    d = os.path.join(ROOT, "build", "models", name)
    export(args, cfg, model, d)
    if args.export_only:
        print("bert: wrote %s" % d)
        return 0

    inputs = make_inputs(cfg, args.batch, args.seq, args.seed + 2)
    ipath = os.path.join(d, "inputs-B%d-L%d.safetensors" % (args.batch, args.seq))
    write_inputs(ipath, inputs)
    with torch.no_grad():
        t0 = time.perf_counter()
        ref = model(**{k: torch.from_numpy(v) for k, v in inputs.items()}).last_hidden_state.numpy()
        t_hf = time.perf_counter() - t0
    tag = "bert %s B=%d L=%d" % (name, args.batch, args.seq)
    ok = True
    checks = [c for c in args.checks.split(",") if c]
    for c in checks:
        outp = os.path.join(d, "out-%s.safetensors" % c)
        if c == "f32":
            out, t = kern_run(args, d, "model.kg", "model.safetensors", ipath, outp,
                              args.batch, args.seq)
            v, lim = rel_err(out, ref), 1e-4
            good = v <= lim
            line = "%s f32: max rel err %.3g (<= %g)" % (tag, v, lim)
        elif c == "bf16":
            out, t = kern_run(args, d, "model-bf16.kg", "model-bf16.safetensors", ipath, outp,
                              args.batch, args.seq)
            v, lim = rel_err(out, ref), 2e-2
            good = v <= lim
            line = "%s bf16: max rel err %.3g (<= %g)" % (tag, v, lim)
        elif c == "int8":
            out, t = kern_run(args, d, "model.kg", "model.safetensors", ipath, outp,
                              args.batch, args.seq, ["--quantize", "encoder.*"])
            v, lim = sqnr_db(out, ref), 30.0
            good = v >= lim
            line = "%s int8-dynamic: SQNR %.1f dB (>= %g)" % (tag, v, lim)
        else:
            sys.stderr.write("unknown check %s\n" % c)
            return 2
        print("%s %s" % ("PASS" if good else "FAIL", line))
        ok = ok and good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
