#pragma once
// One pre-norm decoder block:
//   h   = x + Attention(RMSNorm(x))
//   out = h + FFN(RMSNorm(h)),  FFN = SwiGLU MLP (dense) or MoE layer
//   x, h, out: (batch·seq, d)
// With recompute, the normalised inputs of the attention and the FFN (dense MLP, or the MoE
// layer's router and experts where its dispatcher can gather them again) and every SwiGLU
// hidden are not kept: backward rebuilds them from the norm input / pre-activation.
// With checkpoint (plain activation checkpointing), a training forward keeps only x and
// backward first runs the block's forward again, keeping everything, then goes back through
// it: the same operations on the same input, so results are bitwise those of a kept forward.

#include <memory>
#include <vector>

#include "core/kittens/saved_tensor_slot.h"
#include "core/model/attention.h"
#include "core/model/moe_layer.h"
#include "core/model/rms_norm.h"
#include "core/model/swiglu_mlp.h"

MOK_NN_BEGIN

struct BlockConfig {
  int64_t d = 128;
  int heads = 4;
  int64_t dense_hidden = 512;
  bool moe = false;
  MoeConfig moe_config;
  double norm_eps = 1e-5;
  double init_std = 0.02;
  double out_std = 0.02;  // output projections (wo, w_down)
  bool recompute = false;
  bool checkpoint = false;
};

class TransformerBlock {
 public:
  TransformerBlock(int layer, const BlockConfig& config, const RopeTable* rope, uint64_t seed);

  // x: (batch·seq, d); nothing may write x in place until backward (the residual stream).
  Tensor forward(const Tensor& x, int batch, int seq, bool keep, MoeStats* stats);
  Tensor backward(const Tensor& dy, real loss_scale);
  Tensor forward_cached(const Tensor& x, LayerKvCache& cache, int pos0);
  // B sequences of n new rows each (x: (B·n, d)); attention per sequence, the rest over all rows.
  Tensor forward_cached_batch(const Tensor& x, int n, const std::vector<LayerKvCache*>& cache,
                              const std::vector<int>& pos0);

  void collect_parameters(std::vector<Parameter*>& out);
  void set_policy(SavedInputPolicy* policy);
  bool is_moe() const { return moe_ != nullptr; }
  MoeLayer* moe() { return moe_.get(); }
  SwiGluMlp* mlp() { return mlp_.get(); }
  Attention& attention() { return attn_; }

 private:
  Tensor forward_keeping(const Tensor& x, int batch, int seq, bool keep, MoeStats* stats);

  int layer_;
  BlockConfig config_;
  RmsNorm attn_norm_;
  Attention attn_;
  RmsNorm ffn_norm_;
  std::unique_ptr<SwiGluMlp> mlp_;
  std::unique_ptr<MoeLayer> moe_;
  // checkpoint: the block input and its shape, from forward until backward.
  SavedTensorSlot input_;
  int batch_ = 0, seq_ = 0;
};

MOK_NN_END
