"""Peers for family `gen` (bench/bench_gen.c): ONNX Runtime (impl
`onnxruntime`, CPU provider, every graph optimization) on BERT-base f32,
batch 1, seq 16 and 32, and batch 8, seq 128: the cases bert-base/B1-L16,
B1-L32 and B8-L128 that the generated model (kern_gen.py) runs. The model is models/bert.py's seeded
BertModel exported once to ONNX (cached by peers/model.py under
build/models/bert-base/); flops are counted as bench_gen.c counts them.
The GEMM cases (gemm/f32/M*/N4096/K4096) have no peer here (family gemm
has them)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import model as model_peer  # noqa: E402

FAMILY = "gen"
CASES = [(1, 16), (1, 32), (8, 128)]


def main():
    args = common.parse_args()
    todo = [(b, l) for b, l in CASES if common.wanted(args, FAMILY, "bert-base/B%d-L%d" % (b, l),
                                                       "onnxruntime")]
    if not todo:
        return
    try:
        import torch
        import onnxruntime as ort
        import bert
        _, m = bert.build_model(model_peer.BertArgs)
        path = model_peer.onnx_model(torch, m, False)
    except Exception as e:
        for b, l in todo:
            for t in args.threads:
                common.emit(FAMILY, "bert-base/B%d-L%d" % (b, l), t, "onnxruntime",
                            skipped="onnxruntime / export: %s" % common.first_line(e, 200))
        return
    for b, l in todo:
        case = "bert-base/B%d-L%d" % (b, l)
        ids, tt, mask = model_peer.bert_inputs(torch, b, l)
        feed = {"input_ids": ids.numpy(), "token_type_ids": tt.numpy(), "attention_mask": mask.numpy()}
        for t in args.threads:
            so = ort.SessionOptions()
            so.intra_op_num_threads = t
            so.inter_op_num_threads = 1
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

            def call(sess=sess):
                return sess.run(None, feed)
            common.emit(FAMILY, case, t, "onnxruntime", common.timeit(call, args.quick),
                        model_peer.bert_flops(b, l), 0.0)


if __name__ == "__main__":
    main()
