#pragma once
// Attention over KV caches for decoding (Ops::attention_cached; CPU reference:
// CpuOps::attention_cached over core/backend/causal_attention.h). For each sequence b, n new
// rows of qkv (batch·n, 3·h·hd) at positions pos0[b] + r: their keys and values go to rows
// pos0[b] + r of the sequence's caches ((max_len, h·hd) each), then one warp per (query row,
// head) attends to cache rows [0, pos0[b] + r] in key order (online softmax in float), so
// the result has one fixed summation order. T: float or bf16; hd ≤ 256.

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

constexpr int kMaxCachedHeadDim = 256;

// k_cache, v_cache: device arrays of `batch` device pointers; pos0: device (batch) i32.
template <typename T>
void cached_attention(const T* qkv, int batch, int n, T* const* k_cache, T* const* v_cache, const int32_t* pos0,
                      int heads, int hd, T* o, cudaStream_t stream);

}  // namespace mok::cuda
