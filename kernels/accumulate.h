#pragma once
// y (fp32) += x (bf16 or fp32), elementwise (CUDA): adds a block of products formed in the
// compute type into fp32 gradients. Each element is written by one thread: deterministic.

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

template <typename T>
void accumulate_into_f32(float* y, const T* x, int64_t n, cudaStream_t stream);

}  // namespace mok::cuda
