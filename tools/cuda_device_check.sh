#!/usr/bin/env bash
# tools/cuda_device_check.sh — everything one GPU lease checks, in one call:
# the GPU's facts and two measured ceilings (device copy, f16 matrix product
# through torch), the CUDA tests (make test-cuda's binaries), the sdpa_cuda
# benchmark against torch's flash and cuDNN SDPA in the same run, and
# compute-sanitizer over part of the test grid. Run from the repository
# root on the GPU machine after `make cuda` (here or there); results go
# to $OUT (default /tmp/kern_cuda_out): gpu.txt, test.log, capi.log,
# kern.jsonl, torch.jsonl, ceil.txt, sanitize.log, table.txt.
#
#   tools/cuda_device_check.sh [BENCH_FILTER]
#
# Each step has its own time limit, so the whole script ends in about
# nine minutes at most; the comparison table is printed last.
set -u
OUT=${OUT:-/tmp/kern_cuda_out}
mkdir -p "$OUT"
B=build/cuda
PY=${PY:-python3}
FILTER=${1:-}
T0=$(date +%s)
step() { echo "[$(($(date +%s) - T0)) s] $*"; }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

# Binaries built elsewhere (same nvcc major) normally run; if they do not
# start, build here for sm_90 only.
if ! "$B/tests/cuda/test_sdpa_cuda" no_such_case >/dev/null 2>&1; then
    step "carried binaries do not start; building here (sm_90)"
    rm -rf build/cuda
    make cuda CUDA_ARCH="-gencode arch=compute_90,code=sm_90" >"$OUT/build.log" 2>&1 || tail -30 "$OUT/build.log"
fi

step "ceilings"
timeout 60 "$PY" - >"$OUT/ceil.txt" 2>&1 <<'PYEOF'
import torch
def t(fn, n=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(n): fn()
    e1.record(); e1.synchronize()
    return e0.elapsed_time(e1) / n * 1e-3
p = torch.cuda.get_device_properties(0)
print("device %s, %d SMs, L2 %d MiB, torch %s" % (p.name, p.multi_processor_count, p.L2_cache_size >> 20, torch.__version__))
x = torch.randn(1 << 30, device="cuda", dtype=torch.float16); y = torch.empty_like(x)
s = t(lambda: y.copy_(x))
print("copy: %.0f GB/s (read + write, 2 GiB each way)" % (4 * 2**30 / s / 1e9))
del x, y
for dt in (torch.float16, torch.bfloat16):
    a = torch.randn(8192, 8192, device="cuda", dtype=dt); b = torch.randn(8192, 8192, device="cuda", dtype=dt)
    s = t(lambda: a @ b, 10)
    print("matmul %s 8192^3 random: %.0f TFLOP/s" % (dt, 2 * 8192**3 / s / 1e12))
PYEOF
cat "$OUT/ceil.txt"

step "tests (full GPU grid)"
KT_VERBOSE=1 timeout 150 "$B/tests/cuda/test_sdpa_cuda" >"$OUT/test.log" 2>&1
echo "exit $?" >>"$OUT/test.log"
grep -E "^FAIL|ok, |^exit" "$OUT/test.log"
timeout 30 "$B/tests/cuda/test_sdpa_cuda_capi" >"$OUT/capi.log" 2>&1
echo "exit $?" >>"$OUT/capi.log"
tail -2 "$OUT/capi.log"

step "benchmark: kern"
BF=()
[ -n "$FILTER" ] && BF=(--filter "$FILTER")
timeout 120 "$B/bench/cuda/bench_sdpa_cuda" --quick "${BF[@]}" >"$OUT/kern.jsonl" 2>"$OUT/kern.err"
echo "kern bench exit $?, $(wc -l <"$OUT/kern.jsonl") lines"
step "benchmark: torch"
PYTHONUNBUFFERED=1 timeout 150 "$PY" bench/peers/sdpa_cuda.py --quick "${BF[@]}" >"$OUT/torch.jsonl" 2>"$OUT/torch.err"
echo "torch bench exit $?, $(wc -l <"$OUT/torch.jsonl") lines"

step "compute-sanitizer"
{
    failed=$(grep '^FAIL' "$OUT/test.log" | awk '{print $2}' | head -3)
    for t in ${failed:-fwd_lengths bwd_varlen fwd_split_kv}; do
        echo "== memcheck $t"
        timeout 40 compute-sanitizer --tool memcheck --print-limit 5 "$B/tests/cuda/test_sdpa_cuda" "$t" 2>&1 | tail -8
    done
    echo "== racecheck fwd_gqa_mqa"
    timeout 30 compute-sanitizer --tool racecheck --print-limit 5 "$B/tests/cuda/test_sdpa_cuda" fwd_gqa_mqa 2>&1 | tail -6
} >"$OUT/sanitize.log" 2>&1
grep -E "^==|ERROR SUMMARY|RACECHECK SUMMARY|ok, " "$OUT/sanitize.log"

step "table"
"$PY" - "$OUT/kern.jsonl" "$OUT/torch.jsonl" >"$OUT/table.txt" 2>&1 <<'PYEOF'
import json, sys
rows = {}
for f in sys.argv[1:]:
    for line in open(f):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        rows.setdefault(r["case"], {})[r["impl"]] = r
def rate(r):
    if r is None or "seconds" not in r: return None
    if r["case"].startswith("decode"): return r["bytes"] / r["seconds"] / 1e9
    return r["flops"] / r["seconds"] / 1e12
print("%-40s %8s %8s %8s %6s %6s" % ("case (TFLOP/s; decode GB/s)", "kern", "flash", "cudnn", "k/fl", "k/cu"))
for c, d in rows.items():
    k, fl, cu = rate(d.get("kern")), rate(d.get("torch_flash")), rate(d.get("torch_cudnn"))
    f = lambda x: "%8.1f" % x if x else "       -"
    g = lambda a, b: "%6.2f" % (a / b) if a and b else "     -"
    print("%-40s %s %s %s %s %s" % (c, f(k), f(fl), f(cu), g(k, fl), g(k, cu)))
PYEOF
cat "$OUT/table.txt"
step "done"
