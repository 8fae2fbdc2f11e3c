#include "kernels/cached_attention.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// One thread per (row, column) of the new keys and values.
template <typename T>
__global__ void append_kv_kernel(const T* qkv, int n, int64_t d, T* const* k_cache, T* const* v_cache,
                                 const int32_t* pos0, int64_t total) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const int64_t row = i / (2 * d), c = i % (2 * d);  // row = b·n + r
  const int64_t b = row / n, r = row % n;
  T* dst = c < d ? k_cache[b] : v_cache[b];
  dst[(pos0[b] + r) * d + c % d] = qkv[row * 3 * d + d + c];
}

// Xor butterfly: a fixed pattern, every lane ends with the same bits.
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp per (query row, head); lane j holds dimensions j, j + 32, …
template <typename T>
__global__ void cached_attention_kernel(const T* qkv, int n, T* const* k_cache, T* const* v_cache,
                                        const int32_t* pos0, int heads, int hd, float scale, T* o, int64_t queries) {
  constexpr int kPerLane = kMaxCachedHeadDim / 32;
  const int64_t w = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  if (w >= queries) return;
  const int lane = threadIdx.x % 32;
  const int h = static_cast<int>(w % heads);
  const int64_t row = w / heads, b = row / n, r = row % n;
  const int64_t d = int64_t(heads) * hd;
  const T* q = qkv + row * 3 * d + int64_t(h) * hd;
  const T* K = k_cache[b] + int64_t(h) * hd;
  const T* V = v_cache[b] + int64_t(h) * hd;
  const int64_t keys = pos0[b] + r + 1;
  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int j = lane + 32 * i;
    qv[i] = j < hd ? to_float(q[j]) * scale : 0.f;
    acc[i] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  for (int64_t t = 0; t < keys; ++t) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int j = lane + 32 * i;
      if (j < hd) s += qv[i] * to_float(K[t * d + j]);
    }
    s = warp_sum(s);
    const float m_new = fmaxf(m, s);
    const float c = expf(m - m_new), p = expf(s - m_new);
    l = l * c + p;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int j = lane + 32 * i;
      if (j < hd) acc[i] = acc[i] * c + p * to_float(V[t * d + j]);
    }
    m = m_new;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int j = lane + 32 * i;
    if (j < hd) o[row * d + int64_t(h) * hd + j] = from_float<T>(acc[i] / l);
  }
}

}  // namespace

template <typename T>
void cached_attention(const T* qkv, int batch, int n, T* const* k_cache, T* const* v_cache, const int32_t* pos0,
                      int heads, int hd, T* o, cudaStream_t stream) {
  if (hd < 1 || hd > kMaxCachedHeadDim)
    throw std::invalid_argument("cached_attention: head dimension " + std::to_string(hd) + " (1 to " +
                                std::to_string(kMaxCachedHeadDim) + ")");
  const int64_t rows = int64_t(batch) * n, d = int64_t(heads) * hd;
  if (rows <= 0) return;
  append_kv_kernel<T><<<blocks_for(rows * 2 * d, kThreads), kThreads, 0, stream>>>(qkv, n, d, k_cache, v_cache, pos0,
                                                                                   rows * 2 * d);
  MOK_CUDA_CHECK_LAUNCH();
  const int64_t queries = rows * heads;
  cached_attention_kernel<T><<<blocks_for(queries, kWarps), kThreads, 0, stream>>>(
      qkv, n, k_cache, v_cache, pos0, heads, hd, 1.0f / std::sqrt(float(hd)), o, queries);
  MOK_CUDA_CHECK_LAUNCH();
}

template void cached_attention<float>(const float*, int, int, float* const*, float* const*, const int32_t*, int, int,
                                      float*, cudaStream_t);
template void cached_attention<bf16>(const bf16*, int, int, bf16* const*, bf16* const*, const int32_t*, int, int,
                                     bf16*, cudaStream_t);

}  // namespace mok::cuda
