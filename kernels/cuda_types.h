#pragma once
// Element types of the CUDA kernels. Activations and compute copies of weights are `T`:
// float (fp32 runs, parity with the CPU) or __nv_bfloat16 (bf16 runs); statistics (log-sum-
// exp, rstd, router probabilities, losses), gradients of weights and optimizer state are
// float. Kernels load T, compute in float, store T.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace mok::cuda {

using bf16 = __nv_bfloat16;

__host__ __device__ inline float to_float(float x) { return x; }
__host__ __device__ inline float to_float(bf16 x) { return __bfloat162float(x); }

template <typename T>
__host__ __device__ inline T from_float(float x);
template <>
__host__ __device__ inline float from_float<float>(float x) { return x; }
template <>
__host__ __device__ inline bf16 from_float<bf16>(float x) { return __float2bfloat16(x); }

// Launch helper: blocks of `threads` covering n items.
inline unsigned int blocks_for(long long n, int threads) {
  return static_cast<unsigned int>((n + threads - 1) / threads);
}

}  // namespace mok::cuda
