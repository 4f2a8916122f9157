"""Shared helpers for kern's Python peer benchmarks (PyTorch, ONNX Runtime,
SciPy). Each peer script is run by bench/run as

    bench/.venv/bin/python bench/peers/<family>.py --threads 1,2 \
        [--filter REGEX] [--quick]

and prints one JSON object per line on stdout:

    {"family": ..., "case": ..., "threads": T, "impl": "torch",
     "seconds": median seconds per call, "flops": per call, "bytes": per call}

`case` must be the same string the C benchmark uses for the same work, and
flops/bytes must be counted the same way. A peer that cannot run prints
{"family", "case", "threads", "impl", "skipped": "why"} instead; nothing is
ever faked.
"""
import argparse
import json
import re
import statistics
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--filter", default="")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    a.threads = [int(t) for t in a.threads.split(",") if t]
    a.rx = re.compile(a.filter) if a.filter else None
    return a


def wanted(args, family, case, impl, threads=None):
    """True if --filter matches "family/impl/t<T>/case" (the C benchmark
    name, for T = threads or any of --threads) or "family/impl/case"."""
    if args.rx is None:
        return True
    if args.rx.search("%s/%s/%s" % (family, impl, case)):
        return True
    for t in ([threads] if threads is not None else args.threads):
        if args.rx.search("%s/%s/t%d/%s" % (family, impl, t, case)):
            return True
    return False


def timeit(fn, quick=False, min_time=None, reps=None):
    """Median seconds per call: warm up, then time batches of calls."""
    min_time = min_time if min_time is not None else (0.05 if quick else 0.3)
    reps = reps if reps is not None else (3 if quick else 7)
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    batch = max(1, int(min_time / reps / one))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - t0) / batch)
    return statistics.median(samples)


def emit(family, case, threads, impl, seconds=None, flops=0.0, nbytes=0.0,
         skipped=None):
    row = {"family": family, "case": case, "threads": threads, "impl": impl}
    if skipped is not None:
        row["skipped"] = skipped
    else:
        row.update({"seconds": seconds, "flops": flops, "bytes": nbytes})
    sys.stdout.write(json.dumps(row) + "\n")
    sys.stdout.flush()


def set_torch_threads(torch, n):
    torch.set_num_threads(n)
