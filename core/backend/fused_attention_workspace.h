#pragma once
// The workspace of the fused (cuDNN) attention backward on a GPU, shared by the kernel
// (kernels/cudnn_attention.h) and the memory plan (core/plan/memory_plan.cpp) so the two agree.
//
// Its deterministic form materialises dP, a bf16 (S × S) matrix per (sequence, head), so the
// backward runs in chunks: the largest divisor of B in whole sequences whose dP fits the cap,
// or where one sequence does not fit, one sequence and the largest divisor of H in heads that
// does (at least one head). Each chunk also keeps D = rowsum(dO ∘ O), a float per row.

#include <cstddef>

namespace mok {

// Bytes of dP a call. Each call has a fixed cost: at 16 × 1024 tokens, 12 heads of 64 on an H200
// the whole batch in one call (384 MiB) takes 0.33 ms, in 2 (192 MiB) 0.37 ms, in 8 (48 MiB)
// 0.57 ms (docs/benchmarks.md), so the cap keeps such batches whole.
inline constexpr size_t kFusedAttentionMaxWorkspace = size_t(512) << 20;

struct FusedAttentionChunk {
  int sequences = 1, heads = 1;  // per backward call
};

inline FusedAttentionChunk fused_attention_backward_chunk(int batch, int seq, int heads,
                                                          size_t cap = kFusedAttentionMaxWorkspace) {
  const size_t per_head = size_t(seq) * size_t(seq) * 2;  // bf16 dP of one (sequence, head)
  FusedAttentionChunk chunk{1, 1};
  if (size_t(heads) * per_head <= cap) {
    chunk.heads = heads;
    for (int c = 1; c <= batch; ++c)
      if (batch % c == 0 && size_t(c) * heads * per_head <= cap) chunk.sequences = c;
  } else {
    for (int h = 1; h <= heads; ++h)
      if (heads % h == 0 && size_t(h) * per_head <= cap) chunk.heads = h;
  }
  return chunk;
}

// dP and D of one chunk, bytes (cuDNN adds at most a little of its own).
inline size_t fused_attention_backward_bytes(FusedAttentionChunk chunk, int seq) {
  return size_t(chunk.sequences) * chunk.heads * seq * (size_t(seq) * 2 + sizeof(float));
}

}  // namespace mok
