#pragma once
// RMSNorm layer: y = x / rms(x) · g.
//   x, y (n, d); g (d). Keeps x ("<kind>.input", n·d) and rstd ("<kind>.rstd", n).

#include <string>

#include "core/kittens/saved_tensor_slot.h"
#include "core/model/parameter.h"

MOK_NN_BEGIN

class RmsNorm {
 public:
  // kind: e.g. "attn_norm" → saved kinds "attn_norm.input", "attn_norm.rstd".
  RmsNorm(const std::string& name, int64_t d, double eps, int layer, std::string kind);
  Tensor forward(const Tensor& x, bool keep);
  // dx (n, d), plus `residual` (n, d) when given (fused where the backend can); g.grad
  // accumulated; frees what was kept.
  Tensor backward(const Tensor& dy, const Tensor* residual = nullptr);
  // y again from the kept x and rstd (for recompute instead of keeping y downstream).
  Tensor recompute_output() const;
  Parameter& weight() { return g_; }
  // How x ("<kind>.input") is kept for backward (null = exactly).
  void set_saved_policy(SavedInputPolicy* policy) { x_.set_policy(policy); }

 private:
  Parameter g_;  // (d)
  real eps_;
  int layer_;
  std::string kind_;
  SavedTensorSlot x_;
  Tensor rstd_;
};

MOK_NN_END
