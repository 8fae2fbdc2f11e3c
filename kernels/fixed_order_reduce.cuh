#pragma once
// Reductions in a fixed order: an xor butterfly inside a warp, then the warps' results added
// in warp order. The tree depends only on the launch shape, never on timing, so the same
// inputs give bitwise the same sum on every run (no atomics).

#include <cuda_runtime.h>

namespace mok::cuda {

constexpr unsigned kFullWarp = 0xffffffffu;

// Every lane gets the same bits: a + b and b + a round alike at each level of the butterfly.
template <typename V>
__device__ inline V warp_sum(V v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullWarp, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullWarp, v, o));
  return v;
}

// Block-wide sum for a block of kThreads (a multiple of 32); every thread gets the result.
// `partial` is kThreads/32 values of shared memory. Contains __syncthreads: call from all
// threads of the block.
template <int kThreads, typename V>
__device__ inline V block_sum(V v, V* partial) {
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  V total = partial[0];
  for (int w = 1; w < kThreads / 32; ++w) total += partial[w];
  __syncthreads();  // `partial` may be reused right after
  return total;
}

template <int kThreads>
__device__ inline float block_max(float v, float* partial) {
  v = warp_max(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  float total = partial[0];
  for (int w = 1; w < kThreads / 32; ++w) total = fmaxf(total, partial[w]);
  __syncthreads();
  return total;
}

}  // namespace mok::cuda
