#pragma once
// KittenPolicy: decides, for every tensor a layer keeps for backward, how it is kept at the
// current training step — and records what that cost in accuracy.
//
//   linear inputs      exact | sketch | rsvd | subspace | lowbit        (make_linear_input)
//   elementwise saves  exact | recompute | lowbit                       (choose_elementwise)
//
// The choice comes from KittensConfig:
//   mode exact   everything exact (the reference core).
//   mode kitten  the measured preset (kitten_preset()), under any `kinds` / `layers` overrides.
//   mode custom  every linear input uses `method` at the scheduled rank, elementwise tensors
//                follow `elementwise`; `kinds` / `layers` overrides apply.
// Tensor kinds are matched by prefix against `kinds` (longest prefix wins), e.g. a kinds entry
// "moe.expert" covers "moe.expert.up.input" and "moe.expert.down.input".
// During the exact warm-up (step < warmup_steps) every tensor is exact.
//
// Ranks come from the rank schedule (core/kittens/rank_schedule.h), per layer; with the
// adaptive schedule each layer's controller is fed the mean relative reconstruction error its
// low-rank inputs measured during the previous step. rank_in_force(L) and
// measured_error(L) are the metrics kittens/rank/layer<L> and kittens/error/layer<L>.
//
// Thread safety: make_linear_input and the saved inputs it returns may be used from several
// threads at once; error sums are kept in fixed point so their value does not depend on the
// order saves arrive in. set_step must not race with them.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/kittens/rank_schedule.h"
#include "core/kittens/saved_linear_input.h"
#include "core/kittens/subspace_saved_linear_input.h"

MOK_NN_BEGIN

enum class SavedTensorMethod { exact, sketch, rsvd, subspace, lowbit, recompute };
const char* saved_tensor_method_name(SavedTensorMethod m);

struct SavedTensorChoice {
  SavedTensorMethod method = SavedTensorMethod::exact;
  int rank = 0;         // low-rank methods
  int bits = 8;         // lowbit
  int factor_bits = 0;  // sketch / subspace: bits of the P factor (0 = full precision)
  bool is_low_rank() const {
    return method == SavedTensorMethod::sketch || method == SavedTensorMethod::rsvd ||
           method == SavedTensorMethod::subspace;
  }
};

// Whether a tensor kind is an elementwise saved tensor (norm inputs "<norm>.input", the
// attention's "attn.qkv", SwiGLU pre-activations "<mlp>.act.input", "ce.grad"), as opposed
// to the input of a linear layer ("attn.qkv.input", "moe.expert.up.input", "head.input", …).
bool is_elementwise_kind(std::string_view kind);

// The kinds table `mode: kitten` starts from (before the user's `kinds` entries).
std::map<std::string, KittenKindOverride> kitten_preset();

// Empty when the kitten settings are usable, else a message naming the key.
std::string kitten_config_problem(const KittensConfig& config);

class KittenPolicy {
 public:
  // layers: transformer layers of the model; total_steps: the run's length (linear/cosine
  // horizon when schedule_steps is 0); seed: the run seed (sketches, rounding).
  KittenPolicy(const KittensConfig& config, int layers, uint64_t seed, int64_t total_steps);
  ~KittenPolicy();
  KittenPolicy(const KittenPolicy&) = delete;
  KittenPolicy& operator=(const KittenPolicy&) = delete;

  // Starts training step `step`: finishes the previous step's error measurements (feeding
  // the adaptive controllers) and fixes the ranks in force for this step.
  void set_step(int64_t step);
  int64_t step() const { return step_; }

  // Everything exact at every step (mode exact): models may skip the policy altogether.
  bool all_exact() const;

  SavedTensorChoice choose_linear(int layer, std::string_view kind) const;
  SavedTensorChoice choose_elementwise(int layer, std::string_view kind) const;

  // A SavedLinearInput for the input of linear layer (layer, kind) at the current step;
  // nullptr when the choice is exact (the layer keeps X itself, as the reference core does).
  // `basis`: the subspace basis to use (one per layer object); null → one per (layer, kind).
  std::unique_ptr<SavedLinearInput> make_linear_input(int layer, std::string_view kind,
                                                      std::shared_ptr<SubspaceBasis> basis = nullptr);
  // For an elementwise tensor whose choice is lowbit: a low-bit keeper (save, then restore()).
  // nullptr for exact and recompute.
  std::unique_ptr<SavedLinearInput> make_elementwise_copy(int layer, std::string_view kind);

  // Rank the low-rank inputs of `layer` use now (0 when the layer is exact now or keeps no
  // linear input low-rank, e.g. the all-low-bit kitten preset).
  int rank_in_force(int layer) const;
  // Mean relative reconstruction error of `layer`'s compact saves during the last finished
  // step: of its low-rank inputs when it has any, else of its low-bit ones; -1 when none.
  double measured_error(int layer) const;
  // Same, for the step in progress (so far).
  double current_error(int layer) const;
  // (name, value) pairs: kittens/rank/layer<L> and kittens/error/layer<L> (the latter only
  // for layers with a measurement).
  std::vector<std::pair<std::string, double>> metrics() const;

  // Whether every step from `step` on keeps each tensor the same way with nothing chosen per
  // save: no low-rank method for any kind, nearest rounding, the exact warm-up over.
  bool replayable_from(int64_t step) const;
  // For a step recorded and replayed: the error sums and pending measurements the recorded
  // step's saves left, remembered; and put back after each replay (the pending terms are the
  // replay's: the same device memory, written again).
  void remember_step_stats();
  void restore_step_stats();

  int layers() const { return layers_; }
  const KittensConfig& config() const { return config_; }

  struct Stats;  // per-layer error sums (shared with the saved inputs)

 private:
  const KittenKindOverride* kind_entry(std::string_view kind, bool allow_catch_all) const;
  int layer_rank(int layer) const;
  bool layer_exact(int layer) const;

  KittensConfig config_;
  std::map<std::string, KittenKindOverride> kinds_;  // preset + user's entries
  int layers_;
  uint64_t seed_;
  int64_t total_steps_;
  int64_t step_ = 0;
  std::vector<AdaptiveRankController> adaptive_;
  std::vector<double> last_error_;
  std::shared_ptr<Stats> stats_;
  std::mutex bases_mutex_;
  std::map<std::pair<int, std::string>, std::shared_ptr<SubspaceBasis>> bases_;
};

MOK_NN_END
