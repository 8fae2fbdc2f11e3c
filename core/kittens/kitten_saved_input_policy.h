#pragma once
// KittenSavedInputPolicy: the model's SavedInputPolicy hook driven by a KittenPolicy.
//
// The model asks once per layer object for a keeper and reuses it every step; the keeper
// returned here asks the KittenPolicy again at every save(), so the method and rank follow
// the schedule (exact warm-up, rank decay, adaptive control) and a sketch is redrawn per
// step. Each keeper owns its subspace basis (one per linear layer, so per expert too).
//
// Linear inputs ("….input" of a linear layer) get exact / sketch / rsvd / subspace / lowbit;
// elementwise kinds ("attn.qkv", "<norm>.input", "<mlp>.act.input") get exact or lowbit
// (recompute is the model's own option, see kitten_wants_recompute()).

#include <cstdint>
#include <memory>
#include <string>

#include "core/kittens/kitten_policy.h"
#include "core/model/saved_input_policy.h"

MOK_NN_BEGIN

class KittenSavedInputPolicy final : public SavedInputPolicy {
 public:
  KittenSavedInputPolicy(const KittensConfig& config, int layers, uint64_t seed, int64_t total_steps);
  std::unique_ptr<SavedLinearInput> make(int layer, const std::string& kind) override;
  void set_step(int64_t step) override { policy_->set_step(step); }
  // Exact and low-bit copies are row-wise; sketch, rsvd and subspace are not.
  bool row_wise(int layer, const std::string& kind) const override;
  bool replayable_from(int64_t step) const override { return policy_->replayable_from(step); }
  void step_recorded() override { policy_->remember_step_stats(); }
  void step_replayed() override { policy_->restore_step_stats(); }
  KittenPolicy& policy() { return *policy_; }
  const KittenPolicy& policy() const { return *policy_; }

 private:
  std::shared_ptr<KittenPolicy> policy_;
};

// Whether the settings ask the model to recompute cheap elementwise tensors (norm outputs,
// MLP hidden) in backward instead of keeping them.
bool kitten_wants_recompute(const KittensConfig& config);

MOK_NN_END
