#pragma once
// Causal multi-head self-attention with rotary position embedding.
//   x (batch·seq, d) → qkv = x·Wqkv (batch·seq, 3d) → RoPE on q, k → causal softmax attention
//   per head (online softmax) → o (batch·seq, d) → y = o·Wo (batch·seq, d)
// Kept for backward: the qkv input through Wqkv's SavedLinearInput ("attn.qkv.input"), o
// ("attn.out.input": by this layer when kept exactly — it serves Wo's weight gradient and the
// attention backward — else through Wo's policy), q/k/v after RoPE ("attn.qkv", batch·seq·3d)
// and the log-sum-exp per (batch, head, position) ("attn.lse"). No (seq × seq) tensor is kept.

#include "core/kittens/saved_tensor_slot.h"
#include <string>
#include <vector>

#include "core/backend/rope.h"
#include "core/model/linear.h"

MOK_NN_BEGIN

// Keys and values of earlier positions for incremental decoding (one sequence).
struct LayerKvCache {
  Tensor k, v;  // (max_len, d), rows [0, length) filled; k after RoPE
};

class Attention {
 public:
  Attention(const std::string& prefix, int64_t d, int heads, double init_std, double out_std,
            uint64_t seed, int layer, const RopeTable* rope);

  // keep_input = false leaves Wqkv's input unsaved: backward then needs `recomputed_x`.
  // residual (n, d): returns residual + attention(x), the add fused into Wo's product.
  Tensor forward(const Tensor& x, int batch, int seq, bool keep, bool keep_input = true,
                 const Tensor* residual = nullptr);
  // The same for an x nobody else holds: Wqkv keeps it without a copy.
  Tensor forward(Tensor&& x, int batch, int seq, bool keep, bool keep_input = true,
                 const Tensor* residual = nullptr);
  Tensor backward(const Tensor& dy, const Tensor* recomputed_x = nullptr);
  // New rows x (n, d) at positions [pos0, pos0 + n) of one sequence; appends their keys and
  // values to the cache and attends over rows [0, pos0 + n). Keeps nothing for backward.
  Tensor forward_cached(const Tensor& x, LayerKvCache& cache, int pos0);
  // B sequences at once: x (B·n, d) holds n new rows of each sequence, sequence b's rows
  // at [b·n, (b+1)·n) and positions [pos0[b], pos0[b] + n). Wqkv and Wo run over all B·n
  // rows; RoPE, the cache append and attention run per sequence on its own cache[b].
  Tensor forward_cached_batch(const Tensor& x, int n, const std::vector<LayerKvCache*>& cache,
                              const std::vector<int>& pos0);

  Linear& qkv() { return qkv_; }
  Linear& out() { return out_; }
  // How q/k/v ("attn.qkv") is kept for backward (null = exactly).
  void set_saved_policy(SavedInputPolicy* policy) { qkv_saved_.set_policy(policy); }

 private:
  // forward after Wqkv: RoPE, attention, Wo; qkv (n, 3d).
  Tensor forward_from_qkv(Tensor qkv, int batch, int seq, bool keep, const Tensor* residual);
  int64_t d_;
  int heads_, hd_;
  int layer_;
  const RopeTable* rope_;
  Linear qkv_, out_;
  SavedTensorSlot qkv_saved_;  // (batch·seq, 3d) q, k after RoPE, v
  Tensor lse_;        // (batch, heads, seq)
  Tensor o_;          // (batch·seq, d) attention output, when kept here (Wo without a policy)
  int batch_ = 0, seq_ = 0;
};

MOK_NN_END
