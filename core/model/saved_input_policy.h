#pragma once
// SavedInputPolicy: which SavedLinearInput each linear layer uses to keep its input for
// backward. The model asks once per (layer, tensor kind) when a linear layer first saves;
// kitten policies (core/kittens/) return compact copies per layer and kind, the default
// keeps X exactly.
//
// Kinds used by the model (layer = block index, −1 for model-level tensors):
//   attn.qkv.input, attn.out.input, mlp.up.input, mlp.down.input, moe.router.input,
//   moe.expert.up.input, moe.expert.down.input, moe.shared.up.input, moe.shared.down.input,
//   head.input

#include <cstdint>
#include <memory>
#include <string>

#include "core/kittens/saved_linear_input.h"

MOK_NN_BEGIN

class SavedInputPolicy {
 public:
  virtual ~SavedInputPolicy() = default;
  virtual std::unique_ptr<SavedLinearInput> make(int layer, const std::string& kind) = 0;
  // Training step about to run (kitten rank schedules, sketch redraws); default: ignored.
  virtual void set_step(int64_t /*step*/) {}
  // Whether what (layer, kind) keeps at the current step treats rows independently (a row's
  // copy depends on that row alone: exact, low-bit), so that the rows of all of a layer's
  // experts can be kept as one tensor (core/model/grouped_swiglu.h); false for copies fitted
  // to a whole matrix (low-rank), which each expert must keep of its own rows.
  virtual bool row_wise(int /*layer*/, const std::string& /*kind*/) const { return true; }
  // Whether training steps from `step` on can be recorded once and replayed (CUDA graphs,
  // core/backend/step_graph.h): each keeps the same tensors the same way, with nothing chosen
  // between saves that a replay would skip (no low-rank fits, no stochastic rounding, no exact
  // warm-up left). Default: yes, a policy with no choices per step.
  virtual bool replayable_from(int64_t /*step*/) const { return true; }
  // The step just recorded (remember what its saves leave for the host: error sums) and each
  // replay of it (leave the same again, the sums being the replay's).
  virtual void step_recorded() {}
  virtual void step_replayed() {}
};

// Every linear layer keeps X exactly.
std::shared_ptr<SavedInputPolicy> make_exact_saved_input_policy();

MOK_NN_END
