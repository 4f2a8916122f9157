# mk/cuda.mk — rules of the CUDA attention family (kernels/cuda/kern_sdpa.cuh).
#
# make test   also builds and runs build/tests/test_sdpa_cuda_emu: the CUDA
#             test source compiled by the host C++ compiler against the CPU
#             emulator (kernels/cuda/kern_cuda_emu.cuh), small shapes only.
# make cuda   also builds build/cuda/tests/cuda/test_sdpa_cuda_capi: a C11 file
#             compiled by $(CC) that links an object nvcc built from the
#             header (proves the host API is plain C), run by make test-cuda.
#
# This file is included at the end of the Makefile, after TESTS and
# CUDA_BIN are defined: the recipes of `test` and `test-cuda` expand them
# when they run, so appending here adds our binaries to those runs, and the
# extra prerequisites below make sure they are built first.

CUDA_HOME ?= /usr/local/cuda

SDPA_CUDA_DEPS := kernels/cuda/kern_sdpa.cuh kernels/kern_sdpa.h include/kern_base.h

build/tests/test_sdpa_cuda_emu: tests/cuda/test_sdpa_cuda.cu kernels/cuda/kern_cuda_emu.cuh $(SDPA_CUDA_DEPS) tests/kt.h
	@mkdir -p $(@D)
	$(CXX) $(O) $(DEBUG_INFO) -std=c++17 -x c++ -DKERN_CUDA_EMULATE $(WARN) $(INC) -Ikernels/cuda $< -o $@ -lm -lpthread

TESTS += build/tests/test_sdpa_cuda_emu
test: build/tests/test_sdpa_cuda_emu

# The implementation as an object (nvcc), for C programs.
build/cuda/kern_sdpa_cuda.o: $(SDPA_CUDA_DEPS) mk/cuda.mk
	@mkdir -p $(@D)
	@printf '#define KERN_IMPLEMENTATION\n#include "kern_sdpa.cuh"\n' > build/cuda/kern_sdpa_cuda.cu
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCH) --threads 0 $(INC) -Ikernels/cuda -Xcompiler -Wall -c build/cuda/kern_sdpa_cuda.cu -o $@

build/cuda/tests/cuda/test_sdpa_cuda_capi: tests/cuda/test_sdpa_cuda_capi.c build/cuda/kern_sdpa_cuda.o tests/kt.h
	@mkdir -p $(@D)
	$(CC) -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -pedantic $(INC) -Ikernels/cuda -I$(CUDA_HOME)/include \
	    $< build/cuda/kern_sdpa_cuda.o -o $@ -L$(CUDA_HOME)/lib64 -lcudart_static -lstdc++ -ldl -lrt -lpthread -lm

CUDA_BIN += build/cuda/tests/cuda/test_sdpa_cuda_capi
cuda: build/cuda/tests/cuda/test_sdpa_cuda_capi
test-cuda: build/cuda/tests/cuda/test_sdpa_cuda_capi
