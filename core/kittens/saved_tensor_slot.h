#pragma once
// SavedTensorSlot: how a layer keeps an elementwise tensor for backward (norm input, the
// attention's q/k/v, a SwiGLU pre-activation). Without a policy it holds the tensor itself,
// exactly as before; with one it hands the tensor to the policy's keeper (e.g. an 8-bit
// copy) and gives back the restored tensor in backward.

#include <memory>
#include <string>

#include "core/model/saved_input_policy.h"

MOK_NN_BEGIN

class SavedTensorSlot {
 public:
  SavedTensorSlot(int layer, std::string kind) : layer_(layer), kind_(std::move(kind)) {}

  void set_policy(SavedInputPolicy* policy) { policy_ = policy; reset(); }
  SavedInputPolicy* policy() const { return policy_; }
  // The tag to allocate the tensor under when it is going to be kept: saved_activations when
  // kept as is, workspace when a compact copy will be made of it.
  MemTag output_tag(bool keep) const {
    return keep && !policy_ ? MemTag{MemCategory::saved_activations, layer_, kind_} : MemTag{};
  }
  // Keeps t (moved in) for backward.
  void keep(Tensor&& t);
  // Keeps t for backward without copying it where it can: as is (another handle to its
  // bytes, now counted as saved) or as the policy's compact copy. For a tensor nobody writes
  // in place afterwards (a norm's input: the residual stream). A view is copied.
  void keep_shared(const Tensor& t);
  // The kept tensor (restored once into a workspace copy when compact).
  const Tensor& get() const;
  void reset();
  bool empty() const { return exact_.empty() && !keeper_; }

 private:
  int layer_;
  std::string kind_;
  SavedInputPolicy* policy_ = nullptr;
  Tensor exact_;
  std::unique_ptr<SavedLinearInput> keeper_;
  mutable Tensor restored_;
};

MOK_NN_END
