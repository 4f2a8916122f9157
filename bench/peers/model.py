"""Peers for family `model` (bench/bench_model.c): the same models in
PyTorch eager (impl `torch`), torch.compile (`torch_compile`), ONNX Runtime
(`onnxruntime`, BERT only) and PyTorch Geometric (`pyg`, GraphSAGE).

  bert-base/<dt>/B<b>/L<l>  models/bert.py's seeded BertModel (eager
      attention), last_hidden_state, no padding. dt f32; bf16 =
      torch.autocast("cpu", bfloat16) for torch and torch_compile (ONNX
      Runtime's CPU provider has no bf16 GEMM: skipped); int8 = torch's
      quantize_dynamic of every nn.Linear (qint8) for torch, onnxruntime's
      quantize_dynamic (QInt8 weights) of the exported f32 model for
      onnxruntime; torch_compile int8 is skipped.
  graphsage/f32/N100000/E1000000/F64  models/graphsage.py's model (PyG
      SAGEConv, mean) on its graph, impl pyg.

Slow set-ups are cached under build/models/: the ONNX export
(bert-base/model.onnx, model-int8.onnx) and torch.compile's Inductor cache
(build/models/inductor-cache); compiling and the first call are outside the
timing.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "models"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(ROOT, "build", "models", "inductor-cache"))
import common  # noqa: E402

FAMILY = "model"
BERT = [(dt, b, l) for dt in ("f32", "bf16", "int8") for (b, l) in ((8, 128), (1, 128), (1, 512), (8, 512))]
SAGE_CASE = "graphsage/f32/N100000/E1000000/F64"
SAGE_DIR = os.path.join(ROOT, "build", "models", "graphsage-N100000-E1000000-F64-128-128")
BERT_DIR = os.path.join(ROOT, "build", "models", "bert-base")


def bert_flops(b, l):
    H, I, T = 768.0, 3072.0, float(b * l)
    return 12.0 * (2.0 * T * (4.0 * H * H + 2.0 * H * I) + 4.0 * b * l * l * H)


def sage_flops():
    N, E = 100000.0, 1000000.0
    return 2.0 * N * 64 * 128 * 2 + 2.0 * N * 128 * 128 * 2 + E * (64 + 128)


class BertArgs:
    layers, hidden, heads, intermediate, vocab, seed = 12, 768, 12, 0, 30522, 0


def bert_inputs(torch, b, l):
    g = torch.Generator().manual_seed(b * 1000 + l)
    return (torch.randint(0, 30522, (b, l), generator=g), torch.zeros(b, l, dtype=torch.int64),
            torch.ones(b, l, dtype=torch.int64))


def onnx_model(torch, model, int8):
    """The exported model (cached), and its int8-dynamic quantization."""
    path = os.path.join(BERT_DIR, "model.onnx")
    if not os.path.exists(path):
        os.makedirs(BERT_DIR, exist_ok=True)
        ins = bert_inputs(torch, 2, 16)

        class Wrap(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids, token_type_ids, attention_mask):
                return self.m(input_ids=input_ids, token_type_ids=token_type_ids,
                              attention_mask=attention_mask).last_hidden_state

        dyn = {k: {0: "B", 1: "L"} for k in ("input_ids", "token_type_ids", "attention_mask")}
        torch.onnx.export(Wrap(model), ins, path + ".tmp", input_names=list(dyn),
                          output_names=["last_hidden_state"], dynamic_axes=dyn, opset_version=17,
                          dynamo=False)
        os.replace(path + ".tmp", path)
    if not int8:
        return path
    qpath = os.path.join(BERT_DIR, "model-int8.onnx")
    if not os.path.exists(qpath):
        from onnxruntime.quantization import QuantType, quantize_dynamic
        quantize_dynamic(path, qpath + ".tmp.onnx", weight_type=QuantType.QInt8)
        os.replace(qpath + ".tmp.onnx", qpath)
    return qpath


def run_bert(args, torch):
    import bert
    model = None
    models = {}
    ort_err = {}
    comp_err = None
    for dt, b, l in BERT:
        case = "bert-base/%s/B%d/L%d" % (dt, b, l)
        impls = [i for i in ("torch", "torch_compile", "onnxruntime") if common.wanted(args, FAMILY, case, i)]
        if not impls:
            continue
        if model is None:
            _, model = bert.build_model(BertArgs)
        fl = bert_flops(b, l)
        ids, tt, mask = bert_inputs(torch, b, l)
        for impl in impls:
            skip, call = None, None
            try:
                if impl == "torch":
                    m = model
                    if dt == "int8":
                        m = common.cached(models, "q", lambda: common.int8_dynamic(torch, model))

                    def call(m=m, dt=dt):
                        with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16,
                                                                     enabled=dt == "bf16"):
                            return m(input_ids=ids, token_type_ids=tt, attention_mask=mask)
                elif impl == "torch_compile":
                    if dt == "int8":
                        skip = common.COMPILE_INT8_SKIP
                    elif comp_err:
                        skip = comp_err
                    else:
                        cm = common.cached(models, "c", lambda: torch.compile(model, dynamic=False))

                        def call(cm=cm, dt=dt):
                            with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16,
                                                                         enabled=dt == "bf16"):
                                return cm(input_ids=ids, token_type_ids=tt, attention_mask=mask)
                        try:
                            common.set_torch_threads(torch, args.threads[0])
                            call()
                        except Exception as e:
                            comp_err = "torch.compile failed: %s" % common.first_line(e, 200)
                            skip = comp_err
                else:
                    if dt == "bf16":
                        skip = "onnxruntime's CPU provider has no bf16 GEMM"
                    elif dt in ort_err:
                        skip = ort_err[dt]
                    else:
                        try:
                            import onnxruntime as ort
                            path = onnx_model(torch, model, dt == "int8")
                        except Exception as e:
                            ort_err[dt] = "onnx export/quantization failed: %s" % common.first_line(e)
                            skip = ort_err[dt]
            except Exception as e:
                skip = "%s: %s" % (impl, common.first_line(e, 200))
            for t in args.threads:
                if skip:
                    common.emit(FAMILY, case, t, impl, skipped=skip)
                    continue
                common.set_torch_threads(torch, t)
                if impl == "torch_compile":
                    call()  # Inductor compiles again for a new thread count: not timed
                if impl == "onnxruntime":
                    so = ort.SessionOptions()
                    so.intra_op_num_threads = t
                    so.inter_op_num_threads = 1
                    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                    feed = {"input_ids": ids.numpy(), "token_type_ids": tt.numpy(),
                            "attention_mask": mask.numpy()}

                    def call(sess=sess, feed=feed):
                        return sess.run(None, feed)
                s = common.timeit(call, args.quick)
                common.emit(FAMILY, case, t, impl, s, fl, 0.0)


def run_sage(args, torch):
    if not common.wanted(args, FAMILY, SAGE_CASE, "pyg"):
        return
    try:
        import numpy as np
        import graphsage
        from safetensors.torch import load_file

        class A:
            nodes, edges, fin, fhid, fout, seed = 100000, 1000000, 64, 128, 128, 0
        m, ref = graphsage.build_model(A)
        if not ref.startswith("torch_geometric"):
            raise RuntimeError(ref)
        if not os.path.exists(os.path.join(SAGE_DIR, "edge_index.safetensors")):
            src, dst, _ = graphsage.power_law_graph(A.nodes, A.edges, A.seed + 2)
            ei = torch.from_numpy(np.stack([src, dst]))
        else:
            ei = load_file(os.path.join(SAGE_DIR, "edge_index.safetensors"))["edge_index"]
        x = torch.randn(A.nodes, A.fin, generator=torch.Generator().manual_seed(A.seed + 3))
    except Exception as e:
        for t in args.threads:
            common.emit(FAMILY, SAGE_CASE, t, "pyg", skipped=common.first_line(e, 200))
        return

    def call():
        with torch.inference_mode():
            return m(x, ei)
    for t in args.threads:
        common.set_torch_threads(torch, t)
        common.emit(FAMILY, SAGE_CASE, t, "pyg", common.timeit(call, args.quick), sage_flops(), 0.0)


def main():
    args = common.parse_args()
    try:
        import torch
    except Exception as e:  # pragma: no cover
        for dt, b, l in BERT:
            case = "bert-base/%s/B%d/L%d" % (dt, b, l)
            for impl in ("torch", "torch_compile", "onnxruntime"):
                if common.wanted(args, FAMILY, case, impl):
                    for t in args.threads:
                        common.emit(FAMILY, case, t, impl, skipped="torch not importable: %s" % e)
        return
    run_bert(args, torch)
    run_sage(args, torch)


if __name__ == "__main__":
    main()
