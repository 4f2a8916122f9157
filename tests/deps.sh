#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build, test and benchmark
# kern: compilers and tools for the tests, Google Benchmark for the
# benchmark runner, OpenBLAS and oneDNN as C peers, and the AArch64 cross
# compiler with qemu-user for `make test-neon`. Idempotent.
set -e
pkgs="build-essential clang cmake pkg-config libbenchmark-dev libopenblas-dev libdnnl-dev python3 gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
missing=""
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -z "$missing" ]; then echo "deps: all present"; exit 0; fi
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "deps: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
