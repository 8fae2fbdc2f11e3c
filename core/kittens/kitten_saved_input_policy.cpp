#include "core/kittens/kitten_saved_input_policy.h"

MOK_NN_BEGIN

namespace {

// One per layer object: re-asks the policy at every save.
class StepwiseSavedInput final : public SavedLinearInput {
 public:
  StepwiseSavedInput(std::shared_ptr<KittenPolicy> policy, int layer, std::string kind)
      : policy_(std::move(policy)), layer_(layer), kind_(std::move(kind)),
        elementwise_(is_elementwise_kind(kind_)), basis_(std::make_shared<SubspaceBasis>()) {}

  void save(const Tensor& x, const MemTag& tag) override {
    inner_ = elementwise_ ? policy_->make_elementwise_copy(layer_, kind_)
                          : policy_->make_linear_input(layer_, kind_, basis_);
    if (!inner_) inner_ = make_exact_saved_linear_input();
    inner_->save(x, tag);
  }
  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    inner_->accumulate_weight_grad(dy, dw, scale);
    inner_.reset();
  }
  int64_t held_bytes() const override { return inner_ ? inner_->held_bytes() : 0; }
  void release() override { inner_.reset(); }
  Tensor restore() const override { return inner_ ? inner_->restore() : Tensor{}; }
  double last_relative_error() const override { return inner_ ? inner_->last_relative_error() : 0.0; }
  Tensor error_terms() const override { return inner_ ? inner_->error_terms() : Tensor{}; }
  std::string describe() const override { return inner_ ? inner_->describe() : "kitten (nothing saved)"; }

 private:
  std::shared_ptr<KittenPolicy> policy_;
  int layer_;
  std::string kind_;
  bool elementwise_;
  std::shared_ptr<SubspaceBasis> basis_;
  std::unique_ptr<SavedLinearInput> inner_;
};

}  // namespace

KittenSavedInputPolicy::KittenSavedInputPolicy(const KittensConfig& config, int layers, uint64_t seed,
                                               int64_t total_steps)
    : policy_(std::make_shared<KittenPolicy>(config, layers, seed, total_steps)) {}

std::unique_ptr<SavedLinearInput> KittenSavedInputPolicy::make(int layer, const std::string& kind) {
  return std::make_unique<StepwiseSavedInput>(policy_, layer, kind);
}

bool KittenSavedInputPolicy::row_wise(int layer, const std::string& kind) const {
  const SavedTensorChoice c =
      is_elementwise_kind(kind) ? policy_->choose_elementwise(layer, kind) : policy_->choose_linear(layer, kind);
  return !c.is_low_rank();
}

bool kitten_wants_recompute(const KittensConfig& config) {
  if (config.mode == "exact") return false;
  if (config.elementwise == "recompute") return true;
  return config.elementwise == "auto" && config.mode == "kitten";
}

MOK_NN_END
