#!/usr/bin/env python3
"""Self-test of bench/run's logic that needs no timing: argument errors,
the headline selection, the summary and its geomeans, the results file
(written atomically, never over the last good one with nothing), peaks kept
per CPU, progress lines, the peer helpers (bench/peers/common.py) and the
loaded-once peer process. Prints "ok  name" / "FAIL name: why" and the
summary line tests/run counts: "[test_bench_run] N ok, N failed"."""
import contextlib
import importlib.machinery
import importlib.util
import io
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load(name, path):
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


run = load("bench_run", os.path.join(ROOT, "bench", "run"))
common = load("bench_peers_common", os.path.join(ROOT, "bench", "peers", "common.py"))

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


FAMS = ["gemm", "mem", "pool"]
NAMES = [
    "gemm/kern/t1/f32/M4096/N4096/K4096/real_time",
    "gemm/openblas/t1/f32/M4096/N4096/K4096/real_time",
    "gemm/kern/t2/f32/M4096/N4096/K4096/real_time",
    "gemm/kern/t1/f32/M512/N512/K512/real_time",
    "gemm/openblas/t1/f32/M512/N512/K512/real_time",
    "gemm/kern/t1/bf16/M4096/N4096/K4096/real_time",
    "not a benchmark name",
]
HEADLINE = {("gemm", "f32/M4096/N4096/K4096")}


def args_of(*argv):
    return run.parse_args(list(argv), FAMS)


def raises_usage(argv, *words):
    try:
        run.parse_args(list(argv), FAMS)
    except run.UsageError as e:
        for w in words:
            assert w in str(e), "%r not in %r" % (w, str(e))
        return
    raise AssertionError("no UsageError for %r" % (argv,))


# ------------------------------------------------------------------ args

@test
def args_unknown_family_lists_valid_names():
    raises_usage(["--families", "gemm,nosuch"], "unknown family", "'nosuch'",
                 "valid families: gemm, mem, pool")
    raises_usage(["--families", "a,b"], "unknown families", "'a', 'b'")


@test
def args_bad_values():
    raises_usage(["--threads", "1,x"], "--threads")
    raises_usage(["--threads", "0"], "at least 1")
    raises_usage(["--filter", "f32/(M"], "not a valid regular expression")
    raises_usage(["--rounds", "0"], "--rounds")


@test
def args_modes_and_defaults():
    a = args_of()
    assert a.mode == "headline" and not a.full and a.rounds == 3 and a.threads == [1, 2]
    assert a.family_list == FAMS
    a = args_of("--full", "--families", "pool,gemm", "--threads", "2,1,2")
    assert a.mode == "full" and a.family_list == ["gemm", "pool"] and a.threads == [1, 2]
    a = args_of("--quick", "--rounds", "2")
    assert a.mode == "quick" and a.rounds == 2 and a.min_time == run.MODES["quick"]["min_time"]


@test
def main_unknown_family_exits_2_and_writes_nothing():
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "latest.json")
        with open(out, "w") as f:
            f.write("[\"last good\"]\n")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = run.main(["--families", "nosuch", "--out", out])
        assert rc == 2, rc
        assert "valid families:" in err.getvalue() and "gemm" in err.getvalue()
        with open(out) as f:
            assert f.read() == "[\"last good\"]\n"
        assert os.listdir(d) == ["latest.json"]


@test
def main_filter_naming_only_a_peer():
    """--filter matching no C benchmark but a Python peer's impl: the peers
    run on the family's cases (and filter themselves); a filter nothing
    matches still exits 2 and leaves the results file alone."""
    saved = {k: getattr(run, k) for k in ("families_available", "build_all", "list_binary",
                                          "get_peaks", "save_costs", "load_costs", "VENV_PY")}
    saved_run = run.Peers.run
    seen = []

    def fake_peer_run(self, argv, threads, timeout, on_row=None):
        seen.append(argv)
        rx = argv[argv.index("--filter") + 1]
        if rx != "peerx":
            return [], None
        rows = [{"family": "gemm", "case": "f32/M4096/N4096/K4096", "threads": 1,
                 "impl": "peerx", "seconds": 0.5, "flops": 1e9, "bytes": 0.0}]
        for r in rows:
            if on_row:
                on_row(r)
        return rows, None

    try:
        run.families_available = lambda: ["gemm"]
        run.build_all = lambda fams: {f: ("/bin/true", "") for f in fams}
        run.list_binary = lambda b: (NAMES, HEADLINE)
        run.get_peaks = lambda threads, remeasure, cpu: ({"f32": {"1": 100.0}}, "test")
        run.save_costs = lambda *a: None
        run.load_costs = lambda *a: {}
        run.VENV_PY = sys.executable
        run.Peers.run = fake_peer_run
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "latest.json")
            with open(out, "w") as f:
                f.write("[\"last good\"]\n")
            err, so = io.StringIO(), io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(so):
                rc = run.main(["--filter", "nosuch", "--threads", "1", "--rounds", "1",
                               "--no-charts", "--out", out])
            assert rc == 2, (rc, err.getvalue())
            assert "matches no benchmark" in err.getvalue(), err.getvalue()
            with open(out) as f:
                assert f.read() == "[\"last good\"]\n"
            cf = seen[-1][seen[-1].index("--cases") + 1] if "--cases" in seen[-1] else None
            assert cf is not None  # headline mode: the peers got the case list
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(so):
                rc = run.main(["--filter", "peerx", "--threads", "1", "--rounds", "1",
                               "--no-charts", "--out", out])
            assert rc == 0, rc
            with open(out) as f:
                rows = json.load(f)
            assert [(r["impl"], r["case"]) for r in rows] == [
                ("peerx", "f32/M4096/N4096/K4096")], rows
    finally:
        for k, v in saved.items():
            setattr(run, k, v)
        run.Peers.run = saved_run


# ------------------------------------------------------------- selection

@test
def headline_selection():
    sel = run.select(NAMES, args_of(), HEADLINE)
    assert sel == NAMES[:3], sel
    sel = run.select(NAMES, args_of("--threads", "1"), HEADLINE)
    assert sel == NAMES[:2], sel
    sel = run.select(NAMES, args_of("--filter", "openblas"), HEADLINE)
    assert sel == [NAMES[1]], sel
    # a binary that tags nothing has no headline cases
    assert run.select(NAMES, args_of(), None) == []
    assert run.select(NAMES, args_of(), set()) == []


@test
def full_selection():
    sel = run.select(NAMES, args_of("--full"), HEADLINE)
    assert sel == NAMES[:6], sel
    sel = run.select(NAMES, args_of("--full", "--filter", "M512"), None)
    assert sel == NAMES[3:5], sel


@test
def headline_listing_and_cases():
    h = run.parse_headline("gemm/f32/M4096/N4096/K4096\nsdpa/decode/f32/B1\n\nbad\n")
    assert h == {("gemm", "f32/M4096/N4096/K4096"), ("sdpa", "decode/f32/B1")}, h
    assert run.cases_of(NAMES) == ["f32/M4096/N4096/K4096", "f32/M512/N512/K512",
                                   "bf16/M4096/N4096/K4096"]


@test
def nothing_selected_message():
    a = args_of("--filter", "M512")
    msg = run.nothing_selected_message(a, 2, FAMS)
    assert "matches no benchmark among the headline cases" in msg, msg
    assert "2 in the full suite do: add --full" in msg, msg
    assert "valid families: gemm, mem, pool" in msg, msg
    msg = run.nothing_selected_message(args_of("--full", "--filter", "zzz"), 0, FAMS)
    assert "headline" not in msg and "valid families" in msg, msg


# -------------------------------------------------- aggregation, summary

def sample(impl, case, thr, sec, flops=2e9, peak="f32", fam="gemm"):
    return {"family": fam, "case": case, "threads": thr, "impl": impl, "seconds": sec,
            "flops": flops, "bytes": 0.0, "peak": peak if impl == "kern" else "none"}


def fake_results():
    samples = {}

    def add(r):
        samples.setdefault((r["family"], r["case"], r["threads"], r["impl"]), []).append(r)
    for s in (0.010, 0.012, 0.011):
        add(sample("kern", "a", 1, s))
    for s in (0.022, 0.020, 0.021):
        add(sample("torch", "a", 1, s))
    add(sample("kern", "b", 1, 0.040))
    add(sample("torch", "b", 1, 0.020))
    add({"family": "gemm", "case": "b", "threads": 1, "impl": "onnxruntime",
         "skipped": "not installed"})
    add(sample("kern", "c", 1, 1e-6, fam="pool", peak="latency", flops=0.0))
    add(sample("naive", "c", 1, 4e-6, fam="pool", flops=0.0))
    peaks = {"f32": {"1": 100.0, "2": 200.0}}
    return run.aggregate(samples, peaks, "Test CPU (family 1, model 2)")


@test
def aggregate_medians_and_peak_fraction():
    rows = {(r["case"], r["impl"]): r for r in fake_results()}
    k = rows[("a", "kern")]
    assert abs(k["seconds"] - 0.011) < 1e-12 and k["rounds"] == 3
    assert abs(k["gflops"] - 2e9 / 0.011 * 1e-9) < 1e-9
    assert abs(k["peak_fraction"] - k["gflops"] / 100.0) < 1e-12
    assert rows[("a", "torch")]["peak"] == "f32"  # the case's kind, from kern's label
    assert rows[("b", "onnxruntime")]["skipped"] == "not installed"
    assert rows[("c", "kern")]["peak_fraction"] is None
    assert all(r["cpu"] == "Test CPU (family 1, model 2)" for r in rows.values())


@test
def peak_value_absent_instruction():
    peaks = {"f32": {"1": 100.0}, "int8": {"1": None}, "dram": {"1": 10.0},
             "dram_copy": {"1": 20.0}}
    assert run.peak_value(peaks, "f32", 1) == 100.0
    assert run.peak_value(peaks, "int8", 1) is None
    assert run.peak_value(peaks, "dram", 1) == 20.0
    assert run.peak_value(peaks, "latency", 1) is None


@test
def summary_geomean_best_worst():
    assert abs(run.geomean([2.0, 8.0]) - 4.0) < 1e-12
    assert run.geomean([]) is None and run.geomean([0.0, None]) is None
    s = {x["family"]: x for x in run.summarize(fake_results())}
    g = s["gemm"]
    assert g["rows"] == 2
    assert g["best"]["case"] == "a" and g["worst"]["case"] == "b"
    peers = {i: (v, n) for i, v, n in g["peers"]}
    assert set(peers) == {"torch"}, peers  # skipped impls are not compared
    assert abs(peers["torch"][0] - (0.021 / 0.011 * 0.5) ** 0.5) < 1e-9 and peers["torch"][1] == 2
    p = s["pool"]
    assert p["best"] is None and abs(p["peers"][0][1] - 4.0) < 1e-9
    lines = run.format_summary(run.summarize(fake_results()), "Test CPU", [1, 2], "0.1 0.2 0.3",
                               "1.0 1.1 1.2", 75.0)
    text = "\n".join(lines)
    assert "CPU: Test CPU; threads 1,2; load average 0.1 0.2 0.3 at the start, 1.0 1.1 1.2 at the end; 1:15" in text, text
    assert "torch 0.98x (2)" in text, text
    lines = run.format_summary(run.summarize(fake_results()), "Test CPU", [1, 2], "0.1", "0.2",
                               75.0, {"gemm": {"kern": 30.0, "peers": 15.0}}, 12.0)
    text = "\n".join(lines)
    assert "building the benchmarks and measuring the peaks: 0:12" in text, text
    assert "0:45 (0:30 + 0:15)" in text and "0:00 (0:00 + 0:00)" in text, text


@test
def busy_fraction_from_proc_stat():
    with tempfile.TemporaryDirectory() as d:
        st = os.path.join(d, "stat")
        with open(st, "w") as f:
            f.write("cpu  100 0 50 850 0 0 0 0 0 0\n")
        # a file that does not change reads as no time passed: unknown
        assert run.cpu_busy_fraction(0.0, st) is None
    assert run.cpu_busy_fraction(0.0, "/no/such/file") is None
    f = run.cpu_busy_fraction(0.2)
    assert f is None or 0.0 <= f <= 1.0, f


@test
def headline_less_family_known_from_source():
    assert run.tags_headline("gemm") and not run.tags_headline("graph")
    assert run.tags_headline("no-such-family")  # unknown: build it and let make say why


# ----------------------------------------------------------- results file

@test
def results_written_atomically_only_when_measured():
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "latest.json")
        with open(out, "w") as f:
            f.write("[\"last good\"]\n")
        nothing = [{"family": "gemm", "case": "a", "threads": 1, "impl": "kern",
                    "seconds": None, "skipped": "no result"}]
        assert run.write_results(out, nothing) is False
        assert run.write_results(out, []) is False
        with open(out) as f:
            assert f.read() == "[\"last good\"]\n"
        rows = fake_results()
        assert run.write_results(out, rows) is True
        with open(out) as f:
            back = json.load(f)
        assert len(back) == len(rows) and all("cpu" in r for r in back)
        assert os.listdir(d) == ["latest.json"], os.listdir(d)  # no temporary left


@test
def peaks_kept_per_cpu():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "peaks.json")
        with open(path, "w") as f:
            json.dump({"f32": {"1": 1.0}}, f)  # the old, unkeyed format
        assert run.load_peaks_file(path) == {}
        run.save_peaks_file(path, "cpu A", {"f32": {"1": 100.0}})
        run.save_peaks_file(path, "cpu B", {"f32": {"1": 50.0}})
        m = run.load_peaks_file(path)
        assert m["cpu A"]["f32"]["1"] == 100.0 and m["cpu B"]["f32"]["1"] == 50.0
        assert "cpu C" not in m


@test
def cpu_info_parses_model_and_key():
    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
            "model name\t: AMD EPYC  7B13\nflags\t\t: fpu avx2 fma f16c\n\n"
            "processor\t: 1\nmodel name\t: AMD EPYC 7B13\n")
    c = run.cpu_info(text)
    assert c["model"] == "AMD EPYC 7B13", c
    assert c["desc"] == "AMD EPYC 7B13 (family 25, model 1)", c
    assert c["key"] == "AMD EPYC 7B13 (family 25, model 1); 2 CPUs; avx2 fma f16c", c
    assert run.cpu_info("")["model"] == "unknown CPU"


@test
def gbench_rows():
    data = {"benchmarks": [
        {"name": "gemm/kern/t1/f32/M1/real_time", "run_name": "gemm/kern/t1/f32/M1/real_time",
         "real_time": 2.0, "time_unit": "ms", "flop": 4e6, "label": "peak=f32"},
        {"name": "gemm/naive/t1/f32/M1/real_time", "error_occurred": True,
         "error_message": "skipped: too slow", "label": ""}]}
    rows = run.rows_from_gbench(data)
    assert rows[0]["seconds"] == 2e-3 and rows[0]["peak"] == "f32" and rows[0]["flops"] == 4e6
    assert rows[1]["skipped"] == "too slow" and rows[1]["peak"] == "none"


# ---------------------------------------------------------------- progress

class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@test
def progress_counts_and_estimates():
    clk, out = Clock(), io.StringIO()
    p = run.Progress(stream=out, tty=False, plain_every=1e9, clock=clk)
    parts = [{"family": "gemm", "round": 1, "part": "kern", "units": 2, "exact": True,
              "keys": ["k1", "k2"]},
             {"family": "gemm", "round": 1, "part": "peers", "units": 2, "exact": False, "keys": []},
             {"family": "gemm", "round": 2, "part": "peers", "units": 2, "exact": False, "keys": []},
             {"family": "gemm", "round": 2, "part": "kern", "units": 2, "exact": True,
              "keys": ["k1", "k2"]}]
    p.set_plan(parts, 2)
    p.start_part(0, "gemm kern")
    assert p.left() is None and "estimating" in out.getvalue()
    clk.t += 2.0
    p.unit("k1")
    clk.t += 2.0
    p.unit("k2")
    p.end_part()
    assert p.done == 2 and p.total() == 8
    assert "case 0 of ~8, gemm kern, 0:00 elapsed" in out.getvalue(), out.getvalue()
    # 3 parts left: kern measured (4 s), peers guessed at 2 units x 2 s
    assert abs(p.left() - (4.0 + 4.0 + 4.0)) < 1e-9, p.left()
    p.start_part(1, "gemm peers")
    clk.t += 3.0
    p.unit("p1")
    p.end_part(later_units=1)  # one row was over the cap: later rounds skip it
    assert p.total() == 2 + 1 + 1 + 2 and p.exact(), (p.total(), p.parts)
    assert "case 3 of 6" in p.line(), p.line()
    assert abs(p.left() - (3.0 + 4.0)) < 1e-9, p.left()
    assert p.cost == {"k1": 2.0, "k2": 2.0, "p1": 3.0}


@test
def progress_uses_history_and_crash_counts():
    clk, out = Clock(), io.StringIO()
    p = run.Progress(stream=out, tty=False, plain_every=1e9, clock=clk)
    p.history = {"k1": 5.0, "k2": 7.0}
    p.set_plan([{"family": "f", "round": 1, "part": "kern", "units": 3, "exact": True,
                 "keys": ["k1", "k2", "k3"]}], 1)
    p.start_part(0, "f")
    assert abs(p.left() - 18.0) < 1e-9, p.left()  # k3 at the known average
    clk.t += 1.0
    p.unit("k1")
    p.end_part()  # the binary died after one: the other two count as run
    assert p.done == 3 and p.left() == 0.0


@test
def progress_tty_redraws_one_line():
    clk, out = Clock(), io.StringIO()
    p = run.Progress(stream=out, tty=True, clock=clk)
    p.set_plan([{"family": "f", "round": 1, "part": "kern", "units": 4, "exact": True,
                 "keys": []}], 1)
    p.start_part(0, "f")
    clk.t += 1.0
    p.unit("a")
    p.message("hello")
    p.clear()
    v = out.getvalue()
    assert v.startswith("\r[") and "\x1b[K" in v and "\n" in v and "hello\n" in v, repr(v)
    assert "[#####...............] case 1 of 4" in v, repr(v)


# ------------------------------------------------------------ peer helpers

@test
def common_wanted_cases_skip_filter():
    with tempfile.TemporaryDirectory() as d:
        cases = os.path.join(d, "c")
        skip = os.path.join(d, "s")
        with open(cases, "w") as f:
            f.write("f32/A\nf32/B\n")
        with open(skip, "w") as f:
            f.write("torch_int_mm f32/B\n")
        a = common.parse_args(["--threads", "1,2", "--cases", cases, "--skip", skip,
                               "--filter", "t2/"])
    assert common.wanted(a, "q", "f32/A", "torch", 2)
    assert not common.wanted(a, "q", "f32/A", "torch", 1)   # --filter t2/
    assert common.wanted(a, "q", "f32/A", "torch")           # any of --threads
    assert not common.wanted(a, "q", "f32/C", "torch", 2)   # not in --cases
    assert not common.wanted(a, "q", "f32/B", "torch_int_mm", 2)  # --skip
    assert common.wanted(a, "q", "f32/B", "torch", 2)
    b = common.parse_args([])
    assert b.case_set is None and common.wanted(b, "q", "anything", "torch", 1)


@test
def common_timeit_cap_and_note():
    common.parse_args(["--max-call", "0.05", "--reps", "3", "--min-time", "0.001"])
    import time as _t
    calls = []

    def slow():
        calls.append(1)
        _t.sleep(0.06 if len(calls) == 1 else 0.0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        s = common.timeit(slow)
        common.emit("f", "c", 1, "torch", s)
        common.emit("f", "c2", 1, "torch", 1.0)
    assert len(calls) == 2, calls  # warm-up over the cap, then one timed call
    rows = [json.loads(l) for l in out.getvalue().splitlines()]
    assert "over the 0.05 s cap" in rows[0]["note"], rows[0]
    assert "note" not in rows[1]
    assert common.over_cap(10.0) and common.over_cap(0.01) is None
    calls.clear()
    s = common.timeit(lambda: calls.append(1))
    assert len(calls) >= 4 and s >= 0.0
    common.parse_args([])
    assert common.over_cap(1e9) is None


@test
def peer_argv_by_mode():
    a = args_of("--filter", "t1")
    v = run.peer_argv(a, "/tmp/c", None)
    assert v[:4] == ["--threads", "1,2", "--max-call", "2"], v
    assert "--cases" in v and "--reps" in v and "--filter" in v and "--skip" not in v
    v = run.peer_argv(args_of("--quick"), None, "/tmp/s")
    assert "--quick" in v and "--skip" in v and "--cases" not in v and "--reps" not in v


@test
def peer_process_loaded_once():
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "fam.py")
        with open(script, "w") as f:
            f.write("import os, sys, json\n"
                    "n = sys.argv[sys.argv.index('--n') + 1]\n"
                    "print('not json')\n"
                    "print(json.dumps({'family': 'fam', 'case': 'c' + n, 'threads': 1,"
                    " 'impl': 'p', 'seconds': 0.5, 'note': 'x' if n == '1' else ''}))\n"
                    "print(json.dumps({'family': 'fam', 'case': 'c', 'threads': 3,"
                    " 'impl': 'p', 'seconds': 0.5}))\n"
                    "print(json.dumps({'family': 'fam', 'case': 'pid', 'threads': 1,"
                    " 'impl': 'p', 'skipped': str(os.getpid())}))\n"
                    "if n == '3': raise ValueError('boom')\n")
        saved = run.VENV_PY
        run.VENV_PY = sys.executable
        try:
            p = run.Peers("fam")
            p.script = script
            seen = []
            r1, e1 = p.run(["--n", "1"], [1, 2], 30, seen.append)
            r2, e2 = p.run(["--n", "2"], [1, 2], 30)
            r3, e3 = p.run(["--n", "3"], [1, 2], 30)
            p.close()
        finally:
            run.VENV_PY = saved
    assert e1 is None and e2 is None, (e1, e2)
    assert [r["case"] for r in r1] == ["c1", "pid"] and len(seen) == 2, r1
    assert r1[0]["note"] == "x" and "note" not in r2[0]
    assert r1[1]["skipped"] == r2[1]["skipped"]  # the same process both rounds
    assert e3 and "boom" in e3, e3
    assert p.proc is None



@test
def peaks_best_of_runs():
    a = {"f32": {"1": 100.5, "2": 102.8}, "bf16": {"1": None, "2": None}, "cpu": "avx2"}
    b = {"f32": {"1": 99.0, "2": 199.6}, "bf16": {"1": None, "2": None}, "cpu": "avx2",
         "dram": {"1": 17.1}}
    m = run.merge_peaks_max(a, b)
    assert m["f32"] == {"1": 100.5, "2": 199.6}, m
    assert m["bf16"] == {"1": None, "2": None} and m["cpu"] == "avx2", m
    assert a["f32"]["2"] == 102.8, "merge changed its argument"


@test
def peer_time_threads():
    class FakeTorch:
        n = []

        def set_num_threads(self, n):
            self.n.append(n)

    class A:
        threads, quick = [1, 2], True
    calls = []

    def ok():
        calls.append(1)

    def bad():
        raise ValueError("boom\nsecond line")
    ft = FakeTorch()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        r1 = common.time_threads(A, "f", "c", "torch", ok, ft, 2.0, 0.0)
        r2 = common.time_threads(A, "f", "c", "torch_compile", bad, ft, compiled=True)
        r3 = common.time_threads(A, "f", "c", "x", ok, ft, skip="why")
    rows = [json.loads(x) for x in out.getvalue().splitlines()]
    assert r1 is None and ft.n[:2] == [1, 2] and len(calls) >= 4, (r1, ft.n, calls)
    assert [r["threads"] for r in rows[:2]] == [1, 2] and rows[0]["flops"] == 2.0, rows
    assert r2 == "torch_compile failed: boom", r2
    assert rows[2]["skipped"] == r2 and rows[3]["skipped"] == r2, rows
    assert r3 == "why" and rows[4]["skipped"] == "why" and rows[5]["skipped"] == "why", rows
    store = {}
    assert common.cached(store, "k", lambda: 5) == 5 and common.cached(store, "k", lambda: 6) == 5

def main():
    ok = failed = 0
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    for t in TESTS:
        if only and only not in t.__name__:
            continue
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                t()
            print("ok   %s" % t.__name__)
            ok += 1
        except Exception as e:  # noqa: BLE001
            import traceback
            tb = traceback.extract_tb(sys.exc_info()[2])[-1]
            print("FAIL %s (line %d): %s: %s" % (t.__name__, tb.lineno, type(e).__name__, e))
            failed += 1
    print("[test_bench_run] %d ok, %d failed" % (ok, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
