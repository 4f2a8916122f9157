"""Shared helpers for kern's Python peer benchmarks (PyTorch, ONNX Runtime,
SciPy). Each peer script is run by bench/run as

    bench/.venv/bin/python bench/peers/<family>.py --threads 1,2 \
        [--filter REGEX] [--cases FILE] [--skip FILE] [--quick] \
        [--min-time S] [--reps N] [--max-call S]

and prints one JSON object per line on stdout:

    {"family": ..., "case": ..., "threads": T, "impl": "torch",
     "seconds": median seconds per call, "flops": per call, "bytes": per call}

`case` must be the same string the C benchmark uses for the same work, and
flops/bytes must be counted the same way. A peer that cannot run prints
{"family", "case", "threads", "impl", "skipped": "why"} instead; nothing is
ever faked.

--cases FILE (one case string a line) restricts the run to those cases:
bench/run passes the cases it selected from the C benchmark (the family's
headline cases by default), so the peers measure exactly what kern does.
--skip FILE ("impl case" a line) leaves those out: bench/run lists there
what an earlier round could time only once (see --max-call). `wanted()`
applies both together with --filter; a peer script only has to ask
`wanted()` before each case. --min-time and --reps set `timeit`'s defaults.

--max-call S bounds the cost of a slow peer: when the warm-up call takes
longer than S seconds, `timeit` times one more call and returns it, and the
next `emit` marks the row with a "note" saying so (the runner then leaves
that impl and case out of later rounds). `over_cap(seconds)` lets a script
skip, with the reason, a call it can estimate beforehand to be that slow
(the skipped row it emits next gets a note too).
"""
import argparse
import json
import re
import statistics
import sys
import time


# timeit's defaults when a call does not give them (set by --min-time/--reps)
_TIMING = {"min_time": None, "reps": None, "max_call": None}
# set by timeit when it timed a single call (over --max-call), read by emit
_LAST = {"note": None}


def parse_args(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--filter", default="")
    ap.add_argument("--cases", default="", help="file: the case strings to run, one a line")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--min-time", type=float, default=None, help="seconds per measurement")
    ap.add_argument("--reps", type=int, default=None, help="timed batches per measurement")
    ap.add_argument("--skip", default="", help='file: "impl case" pairs to leave out, one a line')
    ap.add_argument("--max-call", type=float, default=None,
                    help="a call slower than this (seconds) is timed once")
    a = ap.parse_args(argv)
    a.threads = [int(t) for t in a.threads.split(",") if t]
    a.rx = re.compile(a.filter) if a.filter else None
    a.case_set = None
    if a.cases:
        with open(a.cases) as f:
            a.case_set = set(line.strip() for line in f if line.strip())
    a.skip_set = set()
    if a.skip:
        with open(a.skip) as f:
            for line in f:
                parts = line.strip().split(" ", 1)
                if len(parts) == 2:
                    a.skip_set.add((parts[0], parts[1]))
    _TIMING["min_time"] = a.min_time
    _TIMING["reps"] = a.reps
    _TIMING["max_call"] = a.max_call
    _LAST["note"] = None
    return a


def wanted(args, family, case, impl, threads=None):
    """True if the case is in --cases (when given) and --filter matches
    "family/impl/t<T>/case" (the C benchmark name, for T = threads or any of
    --threads) or "family/impl/case"."""
    if getattr(args, "case_set", None) is not None and case not in args.case_set:
        return False
    if (impl, case) in getattr(args, "skip_set", ()):
        return False
    if args.rx is None:
        return True
    if args.rx.search("%s/%s/%s" % (family, impl, case)):
        return True
    for t in ([threads] if threads is not None else args.threads):
        if args.rx.search("%s/%s/t%d/%s" % (family, impl, t, case)):
            return True
    return False


def timeit(fn, quick=False, min_time=None, reps=None):
    """Median seconds per call: warm up, then time `reps` batches of calls
    (together about min_time). A call slower than min_time/reps is timed
    one call a batch, and the probe call counts as the first batch."""
    if min_time is None:
        min_time = _TIMING["min_time"]
    if min_time is None:
        min_time = 0.05 if quick else 0.3
    if reps is None:
        reps = _TIMING["reps"]
    if reps is None:
        reps = 3 if quick else 7
    reps = max(1, reps)
    cap = _TIMING["max_call"]
    _LAST["note"] = None
    t0 = time.perf_counter()
    fn()
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    if cap is not None and warm > cap:
        _LAST["note"] = ("timed once: the first call took %.3g s, over the %g s cap of "
                         "this run (--max-call)" % (warm, cap))
        return one
    batch = max(1, int(min_time / reps / one))
    samples = []
    if batch == 1:
        samples.append(one)
    while len(samples) < reps:
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
    if _LAST["note"]:
        row["note"] = _LAST["note"]
    _LAST["note"] = None
    sys.stdout.write(json.dumps(row) + "\n")
    sys.stdout.flush()


def max_call():
    """--max-call in seconds, or None."""
    return _TIMING["max_call"]


def over_cap(est_seconds):
    """The reason to skip a call estimated to take est_seconds, when that is
    over --max-call; None otherwise."""
    cap = _TIMING["max_call"]
    if cap is None or est_seconds is None or est_seconds <= cap:
        return None
    # the next emit carries a note, so the runner does not ask again
    _LAST["note"] = "not timed: estimated over the %g s cap (--max-call)" % cap
    return ("one call would take about %.3g s here, over the %g s cap of this run "
            "(--max-call; bench/run --max-call N measures it)" % (est_seconds, cap))


def first_line(e, n=200):
    """The first line of an exception's text, at most n characters: what a
    skipped row says about why."""
    return (str(e).splitlines() or ["?"])[0][:n]


def rotating(copies, fn):
    """A call that runs fn(0), fn(1), ..., fn(copies - 1), fn(0), ...: each
    timed call reads another copy of its operands (bigger than the caches
    together), so the cache never holds the next call's data."""
    state = [0]

    def call():
        i = state[0]
        state[0] = (i + 1) % copies
        return fn(i)
    return call


def set_torch_threads(torch, n):
    torch.set_num_threads(n)


def cached(store, key, make):
    """store[key], made by make() the first time it is asked for (a
    quantized or compiled copy of a model shared by several cases)."""
    if key not in store:
        store[key] = make()
    return store[key]


# why torch.compile has no int8 rows (every family says it the same way)
COMPILE_INT8_SKIP = "torch.compile of quantize_dynamic modules is not measured here"


def int8_dynamic(torch, model):
    """torch's int8 dynamic quantization of every nn.Linear (qint8 weights),
    the peer of kern's quantize transform."""
    return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def time_threads(args, family, case, impl, call, torch, flops=0.0, nbytes=0.0, skip=None,
                 compiled=False):
    """Times call at each of --threads and emits a row each (a skipped row
    for every thread count when skip gives a reason). compiled: one
    untimed call per thread count first (torch.compile compiles again for a
    new thread count). A call that raises skips that and the remaining
    thread counts with its message, which is returned (None otherwise)."""
    for t in args.threads:
        if skip is not None:
            emit(family, case, t, impl, skipped=skip)
            continue
        set_torch_threads(torch, t)
        try:
            if compiled:
                call()
            s = timeit(call, args.quick)
        except Exception as e:  # noqa: BLE001
            skip = "%s failed: %s" % (impl, first_line(e, 200))
            emit(family, case, t, impl, skipped=skip)
            continue
        emit(family, case, t, impl, s, flops, nbytes)
    return skip
