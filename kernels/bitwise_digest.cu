#include "kernels/bitwise_digest.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;

// A bijective 64-bit mix of the word and its index (a splitmix64 finaliser), so that equal
// words at different places, or swapped words, count differently.
__device__ inline uint64_t mix(uint32_t word, uint64_t index) {
  uint64_t z = (static_cast<uint64_t>(word) << 32 | (index & 0xffffffffu)) ^ (index >> 32) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void digest_kernel(const uint32_t* words, uint64_t n, BitwiseDigest* out) {
  uint64_t sum = 0, nonzero = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t w = words[i];
    sum += mix(w, i);
    nonzero += w != 0;
  }
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
    nonzero += __shfl_xor_sync(0xffffffffu, nonzero, o);
  }
  if (threadIdx.x % 32 == 0) {  // integer adds: the same total in any order
    atomicAdd(reinterpret_cast<unsigned long long*>(&out->fingerprint), static_cast<unsigned long long>(sum));
    atomicAdd(reinterpret_cast<unsigned long long*>(&out->nonzero_words), static_cast<unsigned long long>(nonzero));
  }
}

}  // namespace

void bitwise_digest(const void* data, size_t bytes, BitwiseDigest* out, cudaStream_t stream) {
  if (bytes % 4 != 0 || reinterpret_cast<uintptr_t>(data) % 4 != 0)
    throw std::invalid_argument("bitwise_digest: " + std::to_string(bytes) +
                                " bytes at an address not of whole aligned 4-byte words");
  MOK_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(BitwiseDigest), stream));
  const uint64_t n = bytes / 4;
  if (n == 0) return;
  const uint64_t blocks = std::min<uint64_t>(kMaxBlocks, (n + kThreads - 1) / kThreads);
  digest_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<const uint32_t*>(data), n, out);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
