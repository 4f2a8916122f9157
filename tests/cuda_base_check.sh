#!/usr/bin/env bash
# nvcc compiles the base header (declarations and implementation) as CUDA
# host code for sm_80 and sm_90, warning-free (the CUDA headers build on
# it), and the Philox dropout mapping as device code.
set -e
NVCC=${1:-nvcc}
mkdir -p build/cuda
cat > build/cuda/base_check.cu <<'CU'
#define KERN_IMPLEMENTATION
#include "kern_base.h"
__global__ void k(uint32_t *x) { x[threadIdx.x] = kern_dropout_bits(1, 2, threadIdx.x); }
int main(void) { return kern_dtype_size(KERN_F32) == 4 ? 0 : 1; }
CU
$NVCC -std=c++17 -Iinclude -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
  -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
  build/cuda/base_check.cu -o build/cuda/base_check -lpthread
echo "cuda: kern_base.h compiles with nvcc (host and device code, no warnings)"
