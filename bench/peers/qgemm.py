"""Peers for the `qgemm` family (int8 dynamic-quantization linear layers).

Same cases and work counts as bench/bench_qgemm.c: case "int8/M<M>/N<N>/K<K>",
flops = 2*M*N*K, bytes = N*K (the int8 weight) when M <= 16, else 0.

impls
  torch         torch.ao.nn.quantized.dynamic.Linear with per-channel qint8
                weights (fbgemm/x86 engine): f32 x in, dynamic quantization
                of x, int8 GEMM, f32 out, bias
  torch_int_mm  torch._int_mm(int8 [M,K], int8 [K,N]) -> int32 [M,N]
  onnxruntime   com.microsoft DynamicQuantizeMatMul (f32 A quantized at run
                time, int8 B [K,N] with per-column scales, bias); the model
                is written with a minimal protobuf encoder below so that the
                `onnx` package is not needed
"""
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, over_cap, parse_args, set_torch_threads, timeit, wanted  # noqa: E402

FAMILY = "qgemm"
CASES = [(2048, 4096, 4096), (512, 4096, 4096), (128, 768, 3072),
         (16, 4096, 4096), (1, 4096, 4096), (4096, 4096, 4096)]


def case_name(m, n, k):
    return "int8/M%d/N%d/K%d" % (m, n, k)


def work(m, n, k):
    return 2.0 * m * n * k, (float(n) * k if m <= 16 else 0.0)


# ---------------------------------------------------------------- protobuf

def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fv(field, v):
    return _varint(field << 3) + _varint(v)


def _fb(field, b):
    if isinstance(b, str):
        b = b.encode()
    return _varint((field << 3) | 2) + _varint(len(b)) + b


ONNX_FLOAT, ONNX_INT8 = 1, 3


def _tensor(name, dtype, dims, raw):
    return b"".join(_fv(1, d) for d in dims) + _fv(2, dtype) + _fb(8, name) + _fb(9, raw)


def _value_info(name, dtype, dims):
    shape = b"".join(_fb(1, _fv(1, d)) for d in dims)
    return _fb(1, name) + _fb(2, _fb(1, _fv(1, dtype) + _fb(2, shape)))


def dqmm_model(m, n, k, bq, bscale, bias):
    """ModelProto bytes: Y = DynamicQuantizeMatMul(A, B, b_scale, b_zp, bias)."""
    import numpy as np
    node = (_fb(1, "A") + _fb(1, "B") + _fb(1, "b_scale") + _fb(1, "b_zp") + _fb(1, "bias")
            + _fb(2, "Y") + _fb(3, "dqmm") + _fb(4, "DynamicQuantizeMatMul")
            + _fb(7, "com.microsoft"))
    inits = [
        _tensor("B", ONNX_INT8, [k, n], np.ascontiguousarray(bq).tobytes()),
        _tensor("b_scale", ONNX_FLOAT, [n], bscale.astype(np.float32).tobytes()),
        _tensor("b_zp", ONNX_INT8, [n], np.zeros(n, np.int8).tobytes()),
        _tensor("bias", ONNX_FLOAT, [n], bias.astype(np.float32).tobytes()),
    ]
    graph = (_fb(1, node) + _fb(2, "qgemm")
             + b"".join(_fb(5, t) for t in inits)
             + _fb(11, _value_info("A", ONNX_FLOAT, [m, k]))
             + _fb(12, _value_info("Y", ONNX_FLOAT, [m, n])))
    opsets = _fb(8, _fb(1, "") + _fv(2, 17)) + _fb(8, _fb(1, "com.microsoft") + _fv(2, 1))
    return _fv(1, 8) + opsets + _fb(7, graph)


# ---------------------------------------------------------------- peers

def quantize_weight(np, w):
    amax = np.abs(w).max(axis=1)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def main():
    args = parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    try:
        import numpy as np
    except Exception as e:  # pragma: no cover
        for (m, n, k) in CASES:
            for t in args.threads:
                for impl in ("torch", "torch_int_mm", "onnxruntime"):
                    emit(FAMILY, case_name(m, n, k), t, impl, skipped="numpy: %s" % e)
        return
    try:
        import torch
        import torch.ao.nn.quantized.dynamic as nnqd
    except Exception as e:
        torch = None
        torch_err = str(e)
    try:
        import onnxruntime as ort
    except Exception as e:
        ort = None
        ort_err = str(e)

    rng = np.random.default_rng(0)
    for (m, n, k) in CASES:
        name = case_name(m, n, k)
        flops, nbytes = work(m, n, k)
        need = [impl for impl in ("torch", "torch_int_mm", "onnxruntime")
                if wanted(args, FAMILY, name, impl)]
        if not need:
            continue
        x = rng.uniform(-1, 1, size=(m, k)).astype(np.float32)
        w = rng.uniform(-1, 1, size=(n, k)).astype(np.float32)
        bias = rng.uniform(-1, 1, size=(n,)).astype(np.float32)
        wq, ws = quantize_weight(np, w)
        for t in args.threads:
            # --- torch dynamic quantized Linear
            if "torch" in need:
                if torch is None:
                    emit(FAMILY, name, t, "torch", skipped="torch: %s" % torch_err)
                else:
                    try:
                        set_torch_threads(torch, t)
                        lin = nnqd.Linear(k, n, dtype=torch.qint8)
                        qweight = torch.quantize_per_channel(
                            torch.from_numpy(w), torch.from_numpy(ws.astype(np.float64)),
                            torch.zeros(n, dtype=torch.int64), 0, torch.qint8)
                        lin.set_weight_bias(qweight, torch.from_numpy(bias))
                        xt = torch.from_numpy(x)
                        with torch.inference_mode():
                            sec = timeit(lambda: lin(xt), quick=args.quick)
                        emit(FAMILY, name, t, "torch", sec, flops, nbytes)
                    except Exception as e:
                        emit(FAMILY, name, t, "torch", skipped="torch: %s" % e)
            # --- torch._int_mm
            if "torch_int_mm" in need:
                if torch is None:
                    emit(FAMILY, name, t, "torch_int_mm", skipped="torch: %s" % torch_err)
                else:
                    try:
                        set_torch_threads(torch, t)
                        a8 = torch.from_numpy(np.clip(np.rint(x * 127), -127, 127).astype(np.int8))
                        b8 = torch.from_numpy(np.ascontiguousarray(wq.T))
                        with torch.inference_mode():
                            # a few rows first: without AVX-512 VNNI torch's
                            # CPU _int_mm is a plain loop (~1 GOP/s), minutes
                            # a call at M=2048; over --max-call it is skipped
                            probe = a8[:min(m, 4)].contiguous()
                            t0 = time.perf_counter()
                            torch._int_mm(probe, b8)
                            why = over_cap((time.perf_counter() - t0) * m / probe.shape[0])
                            if why is None:
                                torch._int_mm(a8, b8)
                                sec = timeit(lambda: torch._int_mm(a8, b8), quick=args.quick)
                        if why is None:
                            emit(FAMILY, name, t, "torch_int_mm", sec, flops, nbytes)
                        else:
                            emit(FAMILY, name, t, "torch_int_mm", skipped="torch._int_mm: " + why)
                    except Exception as e:
                        emit(FAMILY, name, t, "torch_int_mm", skipped="torch._int_mm: %s" % e)
            # --- ONNX Runtime DynamicQuantizeMatMul
            if "onnxruntime" in need:
                if ort is None:
                    emit(FAMILY, name, t, "onnxruntime", skipped="onnxruntime: %s" % ort_err)
                else:
                    try:
                        so = ort.SessionOptions()
                        so.intra_op_num_threads = t
                        so.inter_op_num_threads = 1
                        sess = ort.InferenceSession(dqmm_model(m, n, k, wq.T, ws, bias), so,
                                                    providers=["CPUExecutionProvider"])
                        feed = {"A": x}
                        sess.run(None, feed)
                        sec = timeit(lambda: sess.run(None, feed), quick=args.quick)
                        emit(FAMILY, name, t, "onnxruntime", sec, flops, nbytes)
                    except Exception as e:
                        emit(FAMILY, name, t, "onnxruntime", skipped="onnxruntime: %s" % e)


if __name__ == "__main__":
    main()
