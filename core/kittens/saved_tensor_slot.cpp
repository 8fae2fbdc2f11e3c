#include "core/kittens/saved_tensor_slot.h"

MOK_NN_BEGIN

void SavedTensorSlot::keep(Tensor&& t) {
  reset();
  if (!policy_) {
    exact_ = std::move(t);
    return;
  }
  keeper_ = policy_->make(layer_, kind_);
  keeper_->save(t, MemTag{MemCategory::saved_activations, layer_, kind_});
  t.reset();
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
