#pragma once
// SwiGLU MLP: y = (silu(x·Wg) ∘ x·Wu)·Wd, with Wg and Wu fused as one (d, 2f) matrix.
//   x (n, d) → a = x·Wup (n, 2f) = [gate | up] → h = silu(gate)∘up (n, f) → y = h·Wdown (n, d)
// Kept for backward: x and h through the linear layers ("<kind>.up.input",
// "<kind>.down.input"), and the pre-activation a ("<kind>.act.input", n·2f) — the one
// elementwise tensor of this layer. With keep_hidden = false, h is not kept but recomputed
// from a in backward.
//
// Used as the dense MLP (kind "mlp"), as each routed expert ("moe.expert") and as the shared
// expert ("moe.shared"). For experts the output row t is scaled by a gate g_t; the gated
// backward also returns dL/dg_t = dy_t · (h_t·Wdown).

#include <string>

#include "core/kittens/saved_tensor_slot.h"
#include "core/model/linear.h"

MOK_NN_BEGIN

class SwiGluMlp {
 public:
  SwiGluMlp(const std::string& prefix, int64_t d, int64_t f, double init_std, double out_std,
            uint64_t seed, int layer, const std::string& kind, bool expert = false);
  // Over existing weights w_up (d, 2f) and w_down (f, d), e.g. views of stacked experts.
  SwiGluMlp(Parameter w_up, Parameter w_down, int layer, const std::string& kind);

  // keep_input = false: the up projection's input is not kept (caller recomputes it).
  // residual (n, d): returns residual + mlp(x), the add fused into the down projection.
  Tensor forward(const Tensor& x, bool keep, bool keep_input = true, bool keep_hidden = true,
                 const Tensor* residual = nullptr);
  // The same for an x nobody else holds: the up projection keeps it without a copy.
  Tensor forward(Tensor&& x, bool keep, bool keep_input = true, bool keep_hidden = true,
                 const Tensor* residual = nullptr);
  // Plain backward: dx (n, d).
  Tensor backward(const Tensor& dy, const Tensor* recomputed_x = nullptr);
  // Gated backward: the layer's output rows were used as gate[t]·y[t]; dy is the gradient
  // of the gated sum. gate (n) and dgate (n, written) are `real` on the layer's device
  // (both null: the plain backward). Returns dx (n, d).
  Tensor backward_gated(const Tensor& dy, const Tensor* gate, Tensor* dgate,
                        const Tensor* recomputed_x = nullptr);

  // Never keep h, whatever forward is asked (recompute it from a in backward).
  void set_recompute_hidden(bool on) { recompute_hidden_ = on; }
  bool recompute_hidden() const { return recompute_hidden_; }

  Linear& up() { return up_; }
  Linear& down() { return down_; }
  const Linear& up() const { return up_; }
  const Linear& down() const { return down_; }
  // How the pre-activation ("<kind>.act.input") is kept for backward (null = exactly).
  void set_saved_policy(SavedInputPolicy* policy) { a_.set_policy(policy); }
  SavedInputPolicy* saved_policy() const { return a_.policy(); }
  int64_t hidden() const { return f_; }

 private:
  // forward after the up projection: a (n, 2f) → SwiGLU → down projection.
  Tensor forward_from_up(Tensor a, bool keep, bool keep_hidden, const Tensor* residual);
  int64_t d_, f_;
  int layer_;
  std::string kind_;
  Linear up_, down_;
  SavedTensorSlot a_;  // (n, 2f) pre-activation
  bool hidden_kept_ = true;
  bool recompute_hidden_ = false;
};

MOK_NN_END
