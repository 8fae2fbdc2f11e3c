#pragma once
// Attention over KV caches for decoding (Ops::attention_cached; CPU reference:
// CpuOps::attention_cached over core/backend/causal_attention.h). For each sequence b, n new
// rows of qkv (batch·n, 3·h·hd) at positions pos0[b] + r: their keys and values go to rows
// pos0[b] + r of the sequence's caches ((max_len, h·hd) each), then each (query row, head)
// attends to cache rows [0, pos0[b] + r].
//
// The keys are cut into chunks of kCachedKeyChunk. A block of 128 threads takes one chunk of
// one (row, head): groups of lanes each hold the query and take one key at a time (16-byte
// loads of its row), so a block has many keys in flight; the chunk's softmax statistics and
// its weighted sum of values are reduced in a fixed order. The chunks of a row are then merged
// in chunk order (running max, sum and output), either by the same block in a loop (when there
// are enough rows to fill the GPU: a prefill) or by a second kernel over the chunks' partial
// results (decoding: one block per chunk, so a long cache spreads over the GPU). The two give
// the same bits, and a row's result depends on its own keys only, never on the batch around
// it. T: float or bf16; hd ≤ 256.

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

constexpr int kMaxCachedHeadDim = 256;
constexpr int kCachedKeyChunk = 256;

// Float scratch the split form needs for `queries` (row, head) pairs over caches of max_len
// rows (0: the loop form, which needs none, will run).
template <typename T>
int64_t cached_attention_scratch_floats(int64_t queries, int max_len, int hd);

// k_cache, v_cache: device arrays of `batch` device pointers to caches of max_len rows;
// pos0: device (batch) i32. `aligned`: qkv, o and every cache start on 16 bytes (then rows of
// a head dimension that is a multiple of the 16-byte pack move by vector loads). scratch:
// cached_attention_scratch_floats(batch·n·heads, max_len, hd) floats.
template <typename T>
void cached_attention(const T* qkv, int batch, int n, T* const* k_cache, T* const* v_cache, const int32_t* pos0,
                      int max_len, int heads, int hd, bool aligned, float* scratch, T* o, cudaStream_t stream);

}  // namespace mok::cuda
