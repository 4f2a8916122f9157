# kern — build. `make help` lists the targets. CC, CXX, CFLAGS, O overridable.
CC      ?= cc
CXX     ?= c++
O       ?= -O2
CFLAGS  ?= -g
# Debug info of the sanitizer, fuzz and emulation builds (their own
# optimisation flags are fixed). .ci/run sets it and CFLAGS to -g1: line
# tables, all a sanitizer report or a backtrace symbolizes, and a third
# less compile time than -g on the implementation.
DEBUG_INFO ?= -g
NVCC    ?= nvcc
PREFIX  ?= /usr/local
PYTHON  ?= python3

WARN     := -Wall -Wextra
INC      := -Iinclude -Ikernels -Itests
BASEFLAGS = $(O) $(CFLAGS) $(WARN) -std=c11 -D_GNU_SOURCE $(INC)
LIBS     := -lm -lpthread

HEADERS   := $(wildcard include/*.h) $(wildcard kernels/*.h)
TEST_SRC  := $(wildcard tests/test_*.c)
TESTS     := $(patsubst tests/%.c,build/tests/%,$(TEST_SRC))
ASAN_TESTS  := $(patsubst tests/%.c,build/asan/%,$(TEST_SRC))
UBSAN_TESTS := $(patsubst tests/%.c,build/ubsan/%,$(TEST_SRC))
SAN_TESTS   := $(patsubst tests/%.c,build/san/%,$(TEST_SRC))
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCHES   := $(patsubst bench/%.c,build/bench/%,$(BENCH_SRC))

# Peer libraries for the benchmarks only (never the library): used when
# their headers are installed (make deps).
BENCH_DEFS :=
BENCH_LIBS := -lbenchmark -lpthread -lm
# OpenBLAS by its own config header (a netlib cblas.h alone, from
# libblas-dev, lacks blasint and the threading calls the benchmark uses).
OPENBLAS_CFG := $(firstword $(wildcard /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h \
                  /usr/include/x86_64-linux-gnu/openblas*/openblas_config.h \
                  /usr/include/openblas/openblas_config.h /usr/include/openblas_config.h))
ifneq ($(OPENBLAS_CFG),)
BENCH_DEFS += -DKBENCH_HAVE_OPENBLAS -I$(patsubst %/,%,$(dir $(OPENBLAS_CFG)))
BENCH_LIBS += -lopenblas
endif
ifneq ($(wildcard /usr/include/dnnl.h /usr/include/oneapi/dnnl/dnnl.h),)
BENCH_DEFS += -DKBENCH_HAVE_DNNL
BENCH_LIBS += -ldnnl
endif

.PHONY: all test test-uarch asan ubsan sanitize compile-check bench bench-full bench-build peers peers-llamacpp cuda test-cuda \
        deps install amalgamate clean help examples gen gen-check test-neon

all: $(TESTS) build/examples/amalgamated

help:
	@echo "make deps bench   install what a fresh machine needs, run the headline benchmarks with peers"
	@echo "make bench-full   the whole benchmark suite (all cases of every family)"
	@echo "make test         build and run every test that needs no GPU"
	@echo "make asan|ubsan   the tests under AddressSanitizer / UndefinedBehaviorSanitizer"
	@echo "make sanitize     the tests under ASan and UBSan in one build (what CI runs)"
	@echo "make tsan         the tests under ThreadSanitizer (clang)"
	@echo "make fuzz FUZZ_SECONDS=N  every libFuzzer target N seconds on its corpus (clang)"
	@echo "make compile-check  every header as C99, C11, C++17 with gcc and clang"
	@echo "make cuda         compile the CUDA code, tests and benchmarks (sm_80, sm_90)"
	@echo "make test-cuda    run the CUDA tests (GPU machine)"
	@echo "make peers        PyTorch, ONNX Runtime, matplotlib, ... into bench/.venv (peers, charts)"
	@echo "make peers-llamacpp  llama-cpp-python (built from source, ~10 min) for the llm family"
	@echo "make amalgamate   write dist/kern.h"
	@echo "make gen          expand gen/templates into the headers' generated regions"
	@echo "make gen-check    fail if a generated region differs from its template"
	@echo "make test-neon    AArch64 NEON build of NEON_TESTS, run under qemu-user"
	@echo "make lib          build/libkern.a and build/libkern.so (the implementation, compiled once)"
	@echo "make examples     build examples/ (make test runs them)"
	@echo "make doc-check    compile every C block of README.md and docs/*.md"
	@echo "make install PREFIX=/usr/local   headers, libraries, pkg-config and CMake files"
	@echo "make uninstall PREFIX=/usr/local remove what make install wrote (its manifest)"
	@echo "make install-check  install to a temporary prefix, build examples with pkg-config and CMake"

build/tests/%: tests/%.c $(HEADERS) tests/kt.h
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $< -o $@ $(LIBS)

# Each sanitizer flavour's compile command (mk/linked.mk and mk/fuzz.mk
# use them too).
ASAN_COMPILE  = $(CC) -O1 $(DEBUG_INFO) -fno-omit-frame-pointer -fsanitize=address $(WARN) -std=c11 -D_GNU_SOURCE $(INC) -DKT_SANITIZER
UBSAN_COMPILE = $(CC) -O1 $(DEBUG_INFO) -fsanitize=undefined -fno-sanitize-recover=undefined $(WARN) -std=c11 -D_GNU_SOURCE $(INC) -DKT_SANITIZER

build/asan/%: tests/%.c $(HEADERS) tests/kt.h
	@mkdir -p $(@D)
	$(ASAN_COMPILE) $< -o $@ $(LIBS)

build/ubsan/%: tests/%.c $(HEADERS) tests/kt.h
	@mkdir -p $(@D)
	$(UBSAN_COMPILE) $< -o $@ $(LIBS)

# ASan and UBSan in one build: what CI runs (one compile of every test
# instead of two; the separate targets stay for reading one report alone).
SAN_FLAGS = -O1 $(DEBUG_INFO) -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SAN_COMPILE = $(CC) $(SAN_FLAGS) $(WARN) -std=c11 -D_GNU_SOURCE $(INC) -DKT_SANITIZER
build/san/%: tests/%.c $(HEADERS) tests/kt.h
	@mkdir -p $(@D)
	$(SAN_COMPILE) $< -o $@ $(LIBS)

# The vendoring check: an example compiled against dist/kern.h alone. At
# -O0: what it checks is that the one file is complete and compiles clean
# (half the compile time of -O2); the optimiser's warnings on the same
# code are compile-check's opt builds.
build/examples/amalgamated: examples/basic.c dist/kern.h
	@mkdir -p $(@D)
	$(CC) -O0 $(WARN) -Werror -std=c11 -D_GNU_SOURCE -Idist -DKERN_EXAMPLE_SINGLE_FILE examples/basic.c -o $@ $(LIBS)

amalgamate: dist/kern.h
dist/kern.h: gen/amalgamate.py $(HEADERS)
	@mkdir -p dist
	$(PYTHON) gen/amalgamate.py -o $@

test: all
	@tests/run $(TESTS) build/examples/amalgamated tests/test_bench_run.py

asan: $(ASAN_TESTS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 tests/run $(ASAN_TESTS)

ubsan: $(UBSAN_TESTS)
	@UBSAN_OPTIONS=print_stacktrace=1 tests/run $(UBSAN_TESTS)

sanitize: $(SAN_TESTS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 tests/run $(SAN_TESTS)

compile-check:
	@tests/compile_check.sh

# Generated regions (gen/kern_tmpl.py, docs/gen.md): rewritten only when
# their template changed; gen-check is the CI guard against hand edits.
gen:
	$(PYTHON) gen/kern_tmpl.py
gen-check:
	$(PYTHON) gen/kern_tmpl.py --check

# NEON: the tests cross-compiled for AArch64 and run under qemu-user with
# every CPU feature (-cpu max: dotprod, bf16, fp16), so the NEON, NEON_DOT
# and NEON_BF16 levels all run. KT_EMULATED shrinks the sweeps. Seconds
# under qemu on a 2-core Zen 3 at load 6-10: test_math 61, test_base 42,
# test_qgemm 38, test_sparse24 73, test_spmm 72 (in the set); test_scatter
# 351, test_sdpa 421, test_norm 775, test_gemm > 900 (pass, but too slow
# for CI; run them with NEON_TESTS=...).
NEON_CC    ?= aarch64-linux-gnu-gcc
NEON_QEMU  ?= qemu-aarch64 -cpu max -L /usr/aarch64-linux-gnu
NEON_TESTS ?= test_math test_base test_qgemm test_sparse24 test_spmm
NEON_BINS  := $(patsubst %,build/neon/%,$(NEON_TESTS))
build/neon/%: tests/%.c $(HEADERS) tests/kt.h
	@mkdir -p $(@D)
	$(NEON_CC) $(O) $(CFLAGS) $(WARN) -std=c11 -D_GNU_SOURCE $(INC) -DKT_EMULATED $< -o $@ $(LIBS)
test-neon: $(NEON_BINS)
	@KT_RUNNER="$(NEON_QEMU)" tests/run $(NEON_BINS)

# Tuning classes (kern_uarch, docs/uarch.md): the class-sensitive tests
# once per class, forced through KT_UARCH, so every class's tables run on
# whatever machine runs the tests (a class is a table, not an ISA).
UARCH_TESTS ?= test_gemm test_sdpa
UARCH_CLASSES ?= generic zen4 xeon_avx512 zen5
test-uarch: $(patsubst %,build/tests/%,$(UARCH_TESTS))
	@for u in $(UARCH_CLASSES); do KT_UARCH=$$u tests/run $(patsubst %,build/tests/%,$(UARCH_TESTS)) || exit 1; done

build/bench/kbench_shim.o: bench/kbench_shim.cc bench/kbench.h include/kern_base.h
	@mkdir -p $(@D)
	$(CXX) $(O) -g -std=c++17 -Wall -Iinclude -Ibench -c $< -o $@

# A benchmark includes the headers without KERN_IMPLEMENTATION and links
# the implementation compiled once (build/gen/kern_impl.o, the object the
# generated-model checks use): 13 copies of a minutes-long compile were
# most of a fresh `make bench`. The object and the benchmarks' own
# objects build in parallel. bench_graph times an internal (plan rebind),
# so it keeps the implementation in its own translation unit.
BENCH_CC = $(CC) $(O) $(CFLAGS) $(WARN) -std=c11 -D_GNU_SOURCE -march=x86-64 $(INC) -Ibench $(BENCH_DEFS)
build/bench/%.o: bench/%.c bench/kbench.h $(HEADERS)
	@mkdir -p $(@D)
	$(BENCH_CC) -c $< -o $@
build/bench/%: build/bench/%.o build/bench/kbench_shim.o build/gen/kern_impl.o
	$(CC) $< build/bench/kbench_shim.o build/gen/kern_impl.o -o $@ -lstdc++ $(BENCH_LIBS)
.PRECIOUS: build/bench/%.o
build/bench/bench_graph: bench/bench_graph.c bench/kbench.h build/bench/kbench_shim.o $(HEADERS)
	@mkdir -p $(@D)
	$(BENCH_CC) $< build/bench/kbench_shim.o -o $@ -lstdc++ $(BENCH_LIBS)

# The peak measurement (plain C, its own main): bench/run runs it once and
# caches the result in bench/results/peaks.json.
build/bench/peaks: bench/peaks.c include/kern_base.h
	@mkdir -p $(@D)
	$(CC) -O2 $(CFLAGS) $(WARN) -std=c11 -D_GNU_SOURCE -march=x86-64 $(INC) $< -o $@ -lpthread -lm

bench-build: $(BENCHES) build/bench/peaks

# bench/run builds each family itself, so one family that does not build
# is reported and skipped instead of stopping the suite. `make bench` runs
# the headline cases (those each bench/bench_<family>.c tags with
# kbench_headline); `make bench-full` every case. BENCH_ARGS are passed on
# (e.g. make bench BENCH_ARGS="--quick --families pool,mem").
# The first `make bench` on a machine installs the Python peers (make peers)
# so the table has PyTorch and ONNX Runtime beside kern; NO_PEERS=1 skips
# that (the peers are then reported as skipped).
ifeq ($(NO_PEERS),)
BENCH_PEERS := bench/.venv/bin/python
endif
bench: $(BENCH_PEERS)
	$(PYTHON) bench/run $(BENCH_ARGS)

bench-full: $(BENCH_PEERS)
	$(PYTHON) bench/run --full $(BENCH_ARGS)

bench/.venv/bin/python:
	$(MAKE) peers

peers:
	@test -x bench/.venv/bin/python || $(PYTHON) -m venv bench/.venv
	bench/.venv/bin/pip install --upgrade pip >/dev/null
	bench/.venv/bin/pip install torch onnxruntime numpy scipy matplotlib transformers safetensors onnx torch_geometric

# llama.cpp as a peer of the llm family's whole-model cases: pip builds
# llama-cpp-python from PyPI's source package (cmake and a C++ compiler;
# about 10 minutes on 2 cores), so it is not part of `make peers`.
peers-llamacpp: bench/.venv/bin/python
	bench/.venv/bin/pip install gguf llama-cpp-python

deps:
	@tests/deps.sh

CUDA_ARCH := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
CUDA_SRC  := $(wildcard tests/cuda/*.cu) $(wildcard bench/cuda/*.cu)
CUDA_BIN  := $(patsubst %.cu,build/cuda/%,$(CUDA_SRC))
# The test and the benchmark link the attention's device code compiled
# once (build/cuda/kern_sdpa_cuda.o, mk/cuda.mk; both architectures at
# once): each compiling it again took two minutes of CI.
build/cuda/%: %.cu $(HEADERS) $(wildcard kernels/cuda/*.cuh) build/cuda/kern_sdpa_cuda.o
	@mkdir -p $(@D)
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCH) -DKERN_SDPA_CUDA_LINKED $(INC) -Ikernels/cuda -Ibench -Xcompiler -Wall $< build/cuda/kern_sdpa_cuda.o -o $@ -lpthread

cuda: $(CUDA_BIN)
	@tests/cuda_base_check.sh "$(NVCC)"
	@echo "cuda: built $(words $(CUDA_BIN)) binaries for sm_80 and sm_90"

test-cuda: cuda
	@tests/run $(filter build/cuda/tests/%,$(CUDA_BIN))

# lib, examples, doc-check, install, uninstall, install-check: mk/dx.mk.

clean:
	rm -rf build dist

# Family-specific rules (extra prerequisites for cuda, test, ...) live in
# mk/*.mk, one file per owner.
-include $(wildcard mk/*.mk)
