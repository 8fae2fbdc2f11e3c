#pragma once
// Linear layer without bias: Y = X·W.
//   X (n, d_in), W (d_in, d_out), Y (n, d_out); products run through the rank's Ops with the
//   weight's compute copy (core/model/parameter.h).
// Forward hands X to a SavedLinearInput (from the SavedInputPolicy) for dW = Xᵀ·dY;
// backward's dX = dY·Wᵀ needs no saved tensor. The two backward halves are separate so
// that callers can scale dY differently for each (MoE gates) or supply a recomputed X.

#include <memory>
#include <string>

#include "core/model/parameter.h"
#include "core/model/saved_input_policy.h"

MOK_NN_BEGIN

class Linear {
 public:
  // `kind`: the saved-activation kind of X (e.g. "attn.qkv.input"); `layer`: block index.
  Linear(const std::string& name, int64_t d_in, int64_t d_out, double init_std, uint64_t seed,
         int layer, std::string kind, bool expert = false);
  // Over an existing weight (e.g. a view of stacked expert weights).
  Linear(Parameter weight, int layer, std::string kind);

  // keep: save X for backward. out_tag: how Y's bytes are counted. Y is in the context's
  // compute dtype, or in `real` when real_output (router logits). residual: Y = X·W + residual
  // (n, d_out), in one pass where the backend fuses it (a block's residual stream).
  Tensor forward(const Tensor& x, bool keep, MemTag out_tag = {}, bool real_output = false,
                 const Tensor* residual = nullptr);
  // The same for an x the caller no longer needs: kept exactly, it is kept without a copy.
  Tensor forward(Tensor&& x, bool keep, MemTag out_tag = {}, bool real_output = false,
                 const Tensor* residual = nullptr);
  // dX = dY·Wᵀ and dW += Xᵀ·dY; returns dX (n, d_in). residual: dX = dY·Wᵀ + residual (n, d_in),
  // in one pass where the backend fuses it (a gradient that joins another branch's).
  Tensor backward(const Tensor& dy, const Tensor* residual = nullptr);
  // dX = dY·Wᵀ (+ residual) only.
  Tensor input_grad(const Tensor& dy, const Tensor* residual = nullptr) const;
  // dW += Xᵀ·dY from what forward saved, or from `recomputed_x` when given (then forward
  // must have run with keep = false).
  void weight_grad(const Tensor& dy, const Tensor* recomputed_x = nullptr);

  Parameter& weight() { return w_; }
  const Parameter& weight() const { return w_; }
  int64_t d_in() const { return w_.dim(0); }
  int64_t d_out() const { return w_.dim(1); }
  const std::string& kind() const { return kind_; }
  // Policy for later saves (not owned; null = exact). Drops the current saved-input object.
  void set_policy(SavedInputPolicy* policy);
  SavedInputPolicy* policy() const { return policy_; }
  SavedLinearInput* saved_input() { return saved_.get(); }

 private:
  Tensor product(const Tensor& x, MemTag out_tag, bool real_output, const Tensor* residual) const;  // Y = X·W (+ R)
  // out (n, cols) = a·W, or a·Wᵀ when transposed, + residual when given (checked against out,
  // named `what` in the message).
  void times_weight(const Tensor& a, bool transposed, const Tensor* residual, const char* what, Tensor& out) const;
  SavedLinearInput& saved_input_for_save();

  Parameter w_;  // (d_in, d_out)
  int layer_;
  std::string kind_;
  SavedInputPolicy* policy_ = nullptr;
  std::unique_ptr<SavedLinearInput> saved_;
};

MOK_NN_END
