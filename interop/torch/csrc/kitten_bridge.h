#pragma once
// KittenPolicyBridge: the core's KittenPolicy behind the bridge's SavingPolicy, for the
// element type this file is compiled for (inside MOK_NN_BEGIN: mok::f32 or mok::f64).
// The MoE bridge installs its SavedInputPolicy face in a layer (moe_bridge.cpp).

#include <memory>

#include "core/kittens/kitten_saved_input_policy.h"
#include "interop/torch/csrc/core_bridge.h"

MOK_NN_BEGIN

class KittenPolicyBridge final : public torchext::SavingPolicy {
 public:
  explicit KittenPolicyBridge(const torchext::PolicySettings& settings);

  std::unique_ptr<torchext::LinearInputKeeper> make_keeper(int layer, const std::string& kind,
                                                          torchext::Place place) override;
  void set_step(int64_t step) override;
  int64_t step() const override;
  std::string choice(int layer, const std::string& kind) const override;
  std::vector<std::pair<std::string, double>> metrics() const override;

  // What a core layer installs (core/model/saved_input_policy.h); shares this policy.
  SavedInputPolicy& saved_input_policy() { return *saved_; }
  const KittensConfig& config() const { return saved_->policy().config(); }
  // Throws std::invalid_argument when the policy cannot run at `place` (the float64 build
  // on a GPU); every saving method runs on both devices.
  void check_place(const torchext::Place& place) const;

 private:
  std::shared_ptr<KittenSavedInputPolicy> saved_;
};

MOK_NN_END
