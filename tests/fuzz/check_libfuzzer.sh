#!/usr/bin/env bash
# check_libfuzzer.sh CC — exits non-zero with a clear message when CC
# cannot build a libFuzzer target (-fsanitize=fuzzer,address,undefined).
cc=${1:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "make fuzz: '$cc' not found. The fuzzers need clang with libFuzzer" >&2
  echo "  (Debian/Ubuntu: apt-get install clang; or make fuzz FUZZ_CC=clang-14)." >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' > "$tmp/p.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$tmp/p.c" -o "$tmp/p" >"$tmp/log" 2>&1; then
  echo "make fuzz: '$cc' cannot link a libFuzzer target (-fsanitize=fuzzer,address,undefined):" >&2
  sed -n '1,5p' "$tmp/log" >&2
  echo "  libFuzzer ships with clang (Debian: the clang package; its libclang-rt / compiler-rt)." >&2
  exit 1
fi
