"""Peers for the `sdpa` family: PyTorch's scaled_dot_product_attention on the
CPU (impl `torch`) and ONNX Runtime (impl `onnxruntime`).

ONNX Runtime runs the standard ONNX opset-23 `Attention` operator (4-D
[B, H, L, D] inputs, is_causal, GQA by head counts) on its CPU execution
provider. The `onnx` package is not a dependency, so the one-node model is
encoded here directly in protobuf wire format. ONNX Runtime's inference
package has no attention backward: backward cases are reported skipped.

Case names and FLOP/byte counts match bench/bench_sdpa.c exactly.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

FAMILY = "sdpa"


def cases():
    out = []
    for kind in ("fwd", "bwd"):
        for dt in ("f32", "bf16"):
            for D in (64, 128):
                for L in (512, 1024, 2048, 4096):
                    for causal in (0, 1):
                        name = "%s/%s/B1/H16/L%d/D%d%s" % (kind, dt, L, D, "/causal" if causal else "")
                        out.append(dict(kind=kind, dt=dt, B=1, Hq=16, Hkv=16, Lq=L, Lk=L, D=D,
                                        causal=causal, name=name))
    for dt in ("f32", "bf16"):
        for B in (1, 8):
            for Lk in (4096, 32768):
                name = "decode/%s/B%d/Hq32/Hkv8/Lk%d/D128" % (dt, B, Lk)
                out.append(dict(kind="decode", dt=dt, B=B, Hq=32, Hkv=8, Lq=1, Lk=Lk, D=128,
                                causal=0, name=name))
    # BERT-base's attention with its [B, 1, 1, Lk] padding mask (bench_sdpa.c)
    out.append(dict(kind="fwd", dt="f32", B=8, Hq=12, Hkv=12, Lq=128, Lk=128, D=64, causal=0,
                    padmask=1, name="fwd/f32/B8/H12/L128/D64/padmask"))
    return out


def work(c):
    f = 4.0 * c["B"] * c["Hq"] * c["Lq"] * c["Lk"] * c["D"]
    if c["causal"]:
        f *= 0.5
    if c["kind"] == "bwd":
        f *= 2.5
    nbytes = 0.0
    if c["kind"] == "decode":
        nbytes = 2.0 * c["B"] * c["Hkv"] * c["Lk"] * c["D"] * (4 if c["dt"] == "f32" else 2)
    return f, nbytes


# ------------------------------------------------------------------ torch

def run_torch(args, cs):
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001
        for c in cs:
            for t in args.threads:
                if common.wanted(args, FAMILY, c["name"], "torch"):
                    common.emit(FAMILY, c["name"], t, "torch", skipped="torch not importable: %s" % e)
        return
    for c in cs:
        for t in args.threads:
            if not common.wanted(args, FAMILY, c["name"], "torch"):
                continue
            if args.quick and c["Lk"] > 2048 and c["kind"] != "decode":
                continue
            common.set_torch_threads(torch, t)
            dt = torch.float32 if c["dt"] == "f32" else torch.bfloat16
            g = torch.Generator().manual_seed(0)
            q = torch.rand(c["B"], c["Hq"], c["Lq"], c["D"], generator=g).mul_(2).sub_(1).to(dt)
            k = torch.rand(c["B"], c["Hkv"], c["Lk"], c["D"], generator=g).mul_(2).sub_(1).to(dt)
            v = torch.rand(c["B"], c["Hkv"], c["Lk"], c["D"], generator=g).mul_(2).sub_(1).to(dt)
            gqa = c["Hq"] != c["Hkv"]
            flops, nbytes = work(c)
            try:
                if c["kind"] == "bwd":
                    q.requires_grad_(True)
                    k.requires_grad_(True)
                    v.requires_grad_(True)
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(c["causal"]))
                    dout = torch.rand_like(out)

                    def fn():
                        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
                else:
                    mask = None
                    if c.get("padmask"):
                        # batch entry b masks its last 8*b keys (bench_sdpa.c)
                        mask = torch.zeros(c["B"], 1, 1, c["Lk"], dtype=dt)
                        for b in range(1, c["B"]):
                            mask[b, 0, 0, c["Lk"] - 8 * b:] = float("-inf")

                    def fn():
                        with torch.no_grad():
                            F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                           is_causal=bool(c["causal"]),
                                                           enable_gqa=gqa)
                sec = common.timeit(fn, quick=args.quick)
                common.emit(FAMILY, c["name"], t, "torch", sec, flops, nbytes)
            except Exception as e:  # noqa: BLE001
                common.emit(FAMILY, c["name"], t, "torch", skipped="torch failed: %s" % e)


# ------------------------------------------------------------ onnxruntime

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, wire, payload):
    key = _varint((num << 3) | wire)
    if wire == 0:
        return key + _varint(payload)
    return key + _varint(len(payload)) + payload


def _str(num, s):
    return _field(num, 2, s.encode())


def _value_info(name, elem_type, dims):
    shape = b"".join(_field(1, 2, _field(1, 0, d)) for d in dims)          # Dimension.dim_value
    tensor = _field(1, 0, elem_type) + _field(2, 2, shape)                 # TypeProto.Tensor
    return _str(1, name) + _field(2, 2, _field(1, 2, tensor))              # ValueInfoProto


def attention_model(c, elem_type):
    """ModelProto bytes for Y = Attention(Q, K, V) (ONNX opset 23)."""
    attr = _str(1, "is_causal") + _field(20, 0, 2) + _field(3, 0, int(c["causal"]))
    node = (_str(1, "Q") + _str(1, "K") + _str(1, "V") + _str(2, "Y") + _str(3, "attn") +
            _str(4, "Attention") + _field(5, 2, attr))
    qd = [c["B"], c["Hq"], c["Lq"], c["D"]]
    kd = [c["B"], c["Hkv"], c["Lk"], c["D"]]
    graph = (_field(1, 2, node) + _str(2, "sdpa") +
             _field(11, 2, _value_info("Q", elem_type, qd)) +
             _field(11, 2, _value_info("K", elem_type, kd)) +
             _field(11, 2, _value_info("V", elem_type, kd)) +
             _field(12, 2, _value_info("Y", elem_type, qd)))
    opset = _str(1, "") + _field(2, 0, 23)
    return _field(1, 0, 10) + _str(2, "kern-bench") + _field(7, 2, graph) + _field(8, 2, opset)


def run_ort(args, cs):
    try:
        import numpy as np
        import onnxruntime as ort
    except Exception as e:  # noqa: BLE001
        for c in cs:
            for t in args.threads:
                if common.wanted(args, FAMILY, c["name"], "onnxruntime"):
                    common.emit(FAMILY, c["name"], t, "onnxruntime",
                                skipped="onnxruntime not importable: %s" % e)
        return
    for c in cs:
        for t in args.threads:
            if not common.wanted(args, FAMILY, c["name"], "onnxruntime"):
                continue
            if args.quick and c["Lk"] > 2048 and c["kind"] != "decode":
                continue
            if c["kind"] == "bwd":
                common.emit(FAMILY, c["name"], t, "onnxruntime",
                            skipped="onnxruntime (inference package) has no attention backward")
                continue
            if c.get("padmask"):
                common.emit(FAMILY, c["name"], t, "onnxruntime",
                            skipped="the bench's ONNX Attention graph has no mask input")
                continue
            if c["dt"] != "f32":
                # verified with onnxruntime 1.31: a bf16 Attention graph fails
                # at session creation with NOT_IMPLEMENTED on the CPU provider
                common.emit(FAMILY, c["name"], t, "onnxruntime",
                            skipped="onnxruntime CPU provider has no bf16 Attention (NOT_IMPLEMENTED)")
                continue
            flops, nbytes = work(c)
            try:
                so = ort.SessionOptions()
                so.intra_op_num_threads = t
                so.inter_op_num_threads = 1
                so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                sess = ort.InferenceSession(attention_model(c, 1), so,
                                            providers=["CPUExecutionProvider"])
                rng = np.random.default_rng(0)
                feeds = {
                    "Q": rng.uniform(-1, 1, (c["B"], c["Hq"], c["Lq"], c["D"])).astype(np.float32),
                    "K": rng.uniform(-1, 1, (c["B"], c["Hkv"], c["Lk"], c["D"])).astype(np.float32),
                    "V": rng.uniform(-1, 1, (c["B"], c["Hkv"], c["Lk"], c["D"])).astype(np.float32),
                }

                def fn():
                    sess.run(None, feeds)
                sec = common.timeit(fn, quick=args.quick)
                common.emit(FAMILY, c["name"], t, "onnxruntime", sec, flops, nbytes)
            except Exception as e:  # noqa: BLE001
                msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
                common.emit(FAMILY, c["name"], t, "onnxruntime", skipped="onnxruntime failed: %s" % msg)


def main():
    args = common.parse_args()
    cs = cases()
    run_torch(args, cs)
    run_ort(args, cs)


if __name__ == "__main__":
    main()
