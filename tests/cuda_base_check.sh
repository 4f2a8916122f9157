#!/usr/bin/env bash
# nvcc compiles the base header (declarations and implementation) as CUDA
# host code for sm_80 and sm_90: the CUDA headers build on it.
set -e
NVCC=${1:-nvcc}
mkdir -p build/cuda
printf '#define KERN_IMPLEMENTATION\n#include "kern_base.h"\n__global__ void k(float *x){ x[threadIdx.x] = 1.f; }\nint main(void){ return kern_dtype_size(KERN_F32) == 4 ? 0 : 1; }\n' > build/cuda/base_check.cu
$NVCC -std=c++17 -Iinclude -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 build/cuda/base_check.cu -o build/cuda/base_check -lpthread
echo "cuda: kern_base.h compiles with nvcc"
