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
};

// Every linear layer keeps X exactly.
std::shared_ptr<SavedInputPolicy> make_exact_saved_input_policy();

MOK_NN_END
