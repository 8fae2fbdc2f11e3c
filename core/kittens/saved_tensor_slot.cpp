#include "core/kittens/saved_tensor_slot.h"

MOK_NN_BEGIN

void SavedTensorSlot::keep(Tensor&& t) {
  if (policy_) {
    keep_shared(t);  // the policy's compact copy
    t.reset();
    return;
  }
  reset();
  exact_ = std::move(t);
}

void SavedTensorSlot::keep_shared(const Tensor& t) {
  reset();
  if (policy_) {
    keeper_ = policy_->make(layer_, kind_);
    keeper_->save(t, MemTag{MemCategory::saved_activations, layer_, kind_});
    return;
  }
  const MemTag tag{MemCategory::saved_activations, layer_, kind_};
  exact_ = t.share_or_clone(tag);
}

const Tensor& SavedTensorSlot::get() const {
  if (!keeper_) return exact_;
  if (restored_.empty()) restored_ = keeper_->restore();
  return restored_;
}

void SavedTensorSlot::reset() {
  exact_.reset();
  keeper_.reset();
  restored_.reset();
}

MOK_NN_END
