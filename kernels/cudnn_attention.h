#pragma once
// Causal attention through cuDNN's fused flash attention (its backend graph API), bf16, in
// the training layout of kernels/flash_attention.h:
//   qkv  (B·S, 3·H·hd)  q | k | v column blocks, RoPE applied
//   o    (B·S, H·hd)
//   lse  (B, H, S)      float, natural log of Σ_j exp(scale·q_i·k_j), scale = 1/sqrt(hd)
// so the two implementations can stand in for each other (cuDNN's "stats" are this lse).
//
// The graphs are the composite form cuDNN matches to its fused kernels: Q·Kᵀ, scale, a causal
// mask (row index ≥ column index, else −inf), softmax with its statistics, P·V; backward
// rebuilds P from the lse, forms dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − rowsum(dO∘O))·scale,
// dK = dSᵀ·Q, dQ = dS·K. dQ is written by its own product over dS (cuDNN's "dP workspace"
// form), not accumulated by atomics, and engines marked non-deterministic are refused: a
// repeated run gives the same bits.
//
// That dP workspace holds a bf16 (S × S) score matrix per (sequence, head), 24 MiB per sequence
// at S = 1024 and 12 heads, so backward runs the batch in chunks of whole sequences, the
// largest divisor of B whose workspace stays within max_backward_workspace, or one sequence in
// chunks of heads where a sequence does not fit (core/backend/fused_attention_workspace.h,
// which the memory plan reads too).
//
// Plans are built once per shape (the first call of a shape costs cuDNN's planning, tens of
// milliseconds) on this object's handle, for the device current at construction. Not
// thread-safe; one object per device and stream owner.

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "core/backend/fused_attention_workspace.h"
#include "kernels/cuda_types.h"

namespace mok::cuda {

namespace cudnn {
class Plan;
}

class CudnnAttention {
 public:
  // Why cuDNN attention cannot run here (no library, too old, no handle); empty when it can.
  static std::string unavailable_reason();

  static constexpr size_t kDefaultMaxBackwardWorkspace = kFusedAttentionMaxWorkspace;

  explicit CudnnAttention(size_t max_backward_workspace = kDefaultMaxBackwardWorkspace);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Workspace bytes of each pass at a shape (builds its plan). Throws when cuDNN has no engine.
  size_t forward_workspace_bytes(int B, int S, int H, int hd);
  size_t backward_workspace_bytes(int B, int S, int H, int hd);

  // o and lse written. ws: forward_workspace_bytes (may be 0 bytes, then null).
  void forward(const bf16* qkv, int B, int S, int H, int hd, bf16* o, float* lse, void* ws, size_t ws_bytes,
               cudaStream_t stream);
  // dqkv (B·S, 3·H·hd) fully written from qkv, the forward's o and lse, and d_o.
  void backward(const bf16* qkv, const bf16* d_o, const float* lse, const bf16* o, int B, int S, int H, int hd,
                bf16* dqkv, void* ws, size_t ws_bytes, cudaStream_t stream);

  // The engines the plans took, for reports ("" before the first call).
  std::string forward_engine() const { return forward_engine_; }
  std::string backward_engine() const { return backward_engine_; }
  // Sequences and heads per backward call at a shape (divisors of B and H).
  FusedAttentionChunk backward_chunk(int B, int S, int H) const;

 private:
  using Shape = std::tuple<int, int, int, int, int>;  // (sequences, S, heads, H, hd) of a call
  const cudnn::Plan& forward_plan(int B, int S, int H, int hd);
  const cudnn::Plan& backward_plan(int B, int S, int H, int hd);

  size_t max_backward_workspace_;
  void* handle_ = nullptr;  // cudnnHandle_t
  std::map<Shape, std::unique_ptr<cudnn::Plan>> forward_plans_, backward_plans_;
  std::string forward_engine_, backward_engine_;
  float one_ = 1.f, neg_inf_;
};

}  // namespace mok::cuda
