#!/usr/bin/env bash
# tools/cuda_profile.sh — Nsight Compute over sdpa_cuda benchmark cases, for
# a GPU lease: one launch of the named kernel per case, the full section
# set, with the clocks left alone (--clock-control none). For each case
# $OUT/prof/<name>.details.txt (every section: throughput, occupancy,
# instruction mix, warp stall reasons) and <name>.sass.csv (executed
# instructions and stall samples per SASS instruction), packed into
# $OUT/prof.tgz (the tool returns at most 8 files).
#
#   tools/cuda_profile.sh [BENCH_BINARY]
#
# Cases are NAME FILTER KERNEL_REGEX lines on stdin, e.g.
#   fwd128 'fwd/f16/B4/H16/L4096/D128/full' 'sdpa_fwd'
set -u
OUT=${OUT:-/tmp/kern_cuda_out}
BIN=${1:-build/cuda/bench/cuda/bench_sdpa_cuda}
NCU=${NCU:-ncu}
mkdir -p "$OUT/prof"
while read -r name filt kre; do
    [ -z "$name" ] && continue
    filt=${filt//\'/}
    kre=${kre//\'/}
    echo "== $name ($filt, kernel ~ $kre)"
    timeout 150 "$NCU" --clock-control none --set full --import-source no -k "regex:$kre" --launch-skip 2 \
        --launch-count 1 -f -o "$OUT/prof/$name" "$BIN" --quick --filter "$filt" >"$OUT/prof/$name.run.log" 2>&1
    echo "ncu exit $?"
    "$NCU" --import "$OUT/prof/$name.ncu-rep" --page details >"$OUT/prof/$name.details.txt" 2>&1
    "$NCU" --import "$OUT/prof/$name.ncu-rep" --page source --csv --print-source sass \
        >"$OUT/prof/$name.sass.csv" 2>&1
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Executed Ipc Active|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible" \
        "$OUT/prof/$name.details.txt" | head -12
done
tar czf "$OUT/prof.tgz" -C "$OUT" prof
ls -la "$OUT/prof.tgz"
