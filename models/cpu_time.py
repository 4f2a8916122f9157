#!/usr/bin/env python3
"""Single-thread CPU time per BERT-base forward for kern and its peers: the
figure to compare on a machine too loaded for wall-clock times (bench/run's
family `model` measures wall time).

    bench/.venv/bin/python models/cpu_time.py [--batch 8] [--seq 128] [--calls 3]
        [--impls kern_f32,kern_int8,kern_bf16,torch,torch_compile,onnxruntime,onnxruntime_int8,torch_int8]
    bench/.venv/bin/python models/cpu_time.py --impls kern_sage,pyg   # GraphSAGE (models/graphsage.py's files)

kern: build/kern-run on build/models/bert-base (models/bert.py --export-only
writes it) with 1 thread; the CPU time of --runs N minus that of --runs 0
(loading, planning and the warm-up run are the same in both), over N.
Peers: time.process_time() around N calls after a warm-up call, in this
process with torch.set_num_threads(1) / ORT intra_op_num_threads=1.
Process CPU time excludes the time spent waiting for a core; it still
includes what sharing the caches with other jobs costs.
"""
import argparse
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(ROOT, "build", "models", "inductor-cache"))


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def kern_cpu(b, l, calls, variant):
    d = os.path.join(ROOT, "build", "models", "bert-base")
    kg, st = ("model-bf16.kg", "model-bf16.safetensors") if variant == "bf16" else \
        ("model.kg", "model.safetensors")
    cmd = [os.path.join(ROOT, "build", "kern-run"), os.path.join(d, kg), os.path.join(d, st),
           "--bind", "B=%d,L=%d" % (b, l), "--threads", "1", "--top", "0"]
    if variant == "int8":
        cmd += ["--quantize", "encoder.*"]
    spent = []
    for n in (0, calls):
        c0 = child_cpu()
        subprocess.run(cmd + ["--runs", str(n)], check=True, stdout=subprocess.DEVNULL)
        spent.append(child_cpu() - c0)
    return (spent[1] - spent[0]) / calls


def kern_sage_cpu(calls):
    d = os.path.join(ROOT, "build", "models", "graphsage-N100000-E1000000-F64-128-128")
    cmd = [os.path.join(ROOT, "build", "kern-run"), os.path.join(d, "model.kg"),
           os.path.join(d, "model.safetensors"), "--inputs", os.path.join(d, "inputs.safetensors"),
           "--threads", "1", "--top", "0"]
    spent = []
    for n in (0, calls):
        c0 = child_cpu()
        subprocess.run(cmd + ["--runs", str(n)], check=True, stdout=subprocess.DEVNULL)
        spent.append(child_cpu() - c0)
    return (spent[1] - spent[0]) / calls


def pyg_fn():
    import torch
    import graphsage
    from safetensors.torch import load_file

    class A:
        nodes, edges, fin, fhid, fout, seed = 100000, 1000000, 64, 128, 128, 0
    m, ref = graphsage.build_model(A)
    d = os.path.join(ROOT, "build", "models", "graphsage-N100000-E1000000-F64-128-128")
    ei = load_file(os.path.join(d, "edge_index.safetensors"))["edge_index"]
    x = load_file(os.path.join(d, "inputs.safetensors"))["x"]

    def fn():
        with torch.inference_mode():
            return m(x, ei)
    return fn


def peer_cpu(fn, calls):
    fn()
    c0 = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - c0) / calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--impls", default="kern_f32,kern_int8,torch,torch_compile,onnxruntime")
    args = ap.parse_args()
    b, l = args.batch, args.seq
    impls = args.impls.split(",")
    import model as peers  # bench/peers/model.py
    flops = peers.bert_flops(b, l)
    with open("/proc/loadavg") as f:
        load0 = f.read().split()[:3]
    res = {}
    torch = None
    m = None
    ids = tt = mask = None
    for impl in impls:
        if impl in ("kern_sage", "pyg"):
            import torch as t_
            t_.set_num_threads(1)
            s = kern_sage_cpu(args.calls) if impl == "kern_sage" else peer_cpu(pyg_fn(), args.calls)
            print("graphsage/f32/N100000/E1000000/F64 t1 %-10s %.4f s CPU per call  %.2f GFLOP/s" %
                  (impl, s, peers.sage_flops() / s / 1e9), flush=True)
            continue
        if impl.startswith("kern_"):
            s = kern_cpu(b, l, args.calls, impl[5:])
        else:
            if torch is None:
                import torch as torch_
                torch = torch_
                torch.set_num_threads(1)
                import bert
                _, m = bert.build_model(peers.BertArgs)
                ids, tt, mask = peers.bert_inputs(torch, b, l)
            if impl in ("torch", "torch_int8", "torch_compile"):
                mm = m
                if impl == "torch_int8":
                    mm = torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
                if impl == "torch_compile":
                    mm = torch.compile(m, dynamic=False)

                def fn(mm=mm):
                    with torch.inference_mode():
                        return mm(input_ids=ids, token_type_ids=tt, attention_mask=mask)
            else:
                import onnxruntime as ort
                path = peers.onnx_model(torch, m, impl == "onnxruntime_int8")
                so = ort.SessionOptions()
                so.intra_op_num_threads = 1
                so.inter_op_num_threads = 1
                sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                feed = {"input_ids": ids.numpy(), "token_type_ids": tt.numpy(),
                        "attention_mask": mask.numpy()}

                def fn(sess=sess, feed=feed):
                    return sess.run(None, feed)
            s = peer_cpu(fn, args.calls)
        res[impl] = s
        print("bert-base/B%d/L%d t1 %-18s %.3f s CPU per call  %.1f GFLOP/s" % (b, l, impl, s, flops / s / 1e9),
              flush=True)
    with open("/proc/loadavg") as f:
        load1 = f.read().split()[:3]
    base = res.get("kern_f32")
    if base:
        for impl, s in res.items():
            if impl != "kern_f32":
                print("  %s / kern_f32 = %.2fx" % (impl, s / base))
    print("load average %s at the start, %s at the end" % (" ".join(load0), " ".join(load1)))


if __name__ == "__main__":
    main()
