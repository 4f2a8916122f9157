#!/usr/bin/env bash
# make install-check: install kern into a temporary prefix, build examples
# against it with pkg-config (library and header-only) and with CMake
# (find_package: shared, static, header-only; add_subdirectory of the
# source tree), run them, uninstall, and check the prefix is left empty.
# Needs cc, c++, pkg-config and cmake (tests/deps.sh installs them); a
# missing tool fails the check. The header-only builds compile the
# implementation at -O0 to keep the check short.
set -u
cd "$(dirname "$0")/.."
for t in pkg-config cmake "${CC:-cc}" "${CXX:-c++}"; do
  command -v "$t" >/dev/null 2>&1 || { echo "install-check: '$t' not found (make deps installs it)"; echo "[install-check] 0 ok, 1 failed"; exit 1; }
done
CC=${CC:-cc}; CXX=${CXX:-c++}
pass=0; fail=0
check() { # check NAME COMMAND...
  local name=$1; shift
  if "$@" > "$W/$name.log" 2>&1; then pass=$((pass+1)); echo "ok   $name"
  else fail=$((fail+1)); echo "FAIL $name"; tail -n 20 "$W/$name.log"; fi
}
W=$(mktemp -d); P=$W/prefix; mkdir "$P"
trap 'rm -rf "$W"' EXIT
check install make -s install PREFIX="$P"
export PKG_CONFIG_PATH=$P/lib/pkgconfig
check pkgconfig-lib sh -c "$CC -O2 -std=c11 examples/gemm_prepacked.c \$(pkg-config --cflags --libs kern-lib) -Wl,-rpath,$P/lib -o $W/gemm_lib && $W/gemm_lib"
check pkgconfig-header-only sh -c "printf '#define KERN_IMPLEMENTATION\n#include <kern/kern.h>\n' > $W/impl.c &&
  $CC -O0 -std=c11 -D_GNU_SOURCE \$(pkg-config --cflags kern) -c $W/impl.c -o $W/impl.o &&
  $CC -O2 -std=c11 \$(pkg-config --cflags kern) examples/gcn_layer.c $W/impl.o \$(pkg-config --libs kern) -o $W/gcn_hdr && $W/gcn_hdr"
# a vendored kern.h beside a program must not shadow <kern/kern.h>
check no-shadowing sh -c "mkdir -p $W/v && echo '#error vendored kern.h picked up' > $W/v/kern.h &&
  printf '#include <kern/kern.h>\nint main(void) { return KERN_VERSION_MAJOR; }\n' > $W/v/m.c &&
  $CC -std=c11 -I$W/v \$(pkg-config --cflags kern) -fsyntax-only $W/v/m.c"
check cmake-find-package sh -c "cmake -S tests/install -B $W/cm -DCMAKE_PREFIX_PATH=$P -DCMAKE_C_COMPILER=$CC -DCMAKE_CXX_COMPILER=$CXX >/dev/null &&
  cmake --build $W/cm -j 2 >/dev/null && $W/cm/bert_shared && $W/cm/sdpa_static && $W/cm/engine_hdr"
check cmake-add-subdirectory sh -c "cmake -S tests/install -B $W/sub -DKERN_SOURCE_DIR=$PWD -DCMAKE_C_COMPILER=$CC -DCMAKE_CXX_COMPILER=$CXX >/dev/null &&
  cmake --build $W/sub -j 2 >/dev/null && $W/sub/gcn_sub"
check uninstall make -s uninstall PREFIX="$P"
check prefix-empty sh -c "test -z \"\$(find $P -mindepth 1 | head)\" || { find $P -mindepth 1; false; }"
echo "[install-check] $pass ok, $fail failed"
[ "$fail" -eq 0 ]
