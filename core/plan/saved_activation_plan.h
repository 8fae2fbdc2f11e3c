#pragma once
// The saved-activation part of the memory plan: every tensor the model keeps from forward for
// backward, by layer and kind (the MemTag kinds the model saves under), with what the config's
// kitten policy keeps of it — exact, a low-bit copy, a low-rank factor, or nothing (recomputed).
// With activation checkpointing a layer keeps only its input ("block.input").
//
// One table (saved_activation_plan.cpp, kSavedKinds) lists the kinds each layer type keeps and
// their width per token; the kitten choices come from a KittenPolicy built from the config,
// the same functions the model asks when it saves (core/kittens/kitten_policy.h). After one
// training forward of a dropless model the memory tracker's bytes per (layer, kind) are these,
// to the byte, for every keeper (tests/core/test_saved_activation_plan).

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"

namespace mok {

struct PlannedSavedTensor {
  int layer = -1;     // transformer layer; -1 for model-level tensors (embedding, final norm, head, loss)
  std::string kind;   // the kind it is saved under, e.g. "attn.qkv.input"
  double rows = 0.0;  // per rank and micro-batch: tokens, or routed copies (tokens · top_k)
  double cols = 0.0;  // elements per row
  std::string kept;   // "exact", "lowbit 4", "sketch r=16", "recompute", ...
  double bytes = 0.0; // what is held from the end of forward until backward uses it
  // Backward rebuilds a low-bit or recomputed tensor at full size (compute dtype) while the
  // stage that uses it runs; 0 for tensors kept exact or low-rank (dW from the factors).
  double restored_bytes = 0.0;
  // the backward stage that rebuilds it: "attention", "ffn" (norm + MLP/MoE), "model", or
  // "block" (activation checkpointing: restored_bytes = what the layer's forward keeps again)
  std::string stage;
};

// The saved tensors of one micro-batch on one rank at training step `step` (the kitten
// policy's choice then: everything exact before kittens.warmup_steps).
std::vector<PlannedSavedTensor> plan_saved_activations(const ExperimentConfig& config, int64_t step);

// Their sum: the peak of saved-activation bytes (all of them are live when backward starts).
double saved_activation_bytes(const std::vector<PlannedSavedTensor>& tensors);

// The tensors grouped by (kind, how kept), summed over layers, largest first (ties in the
// order the plan lists them): where the saved bytes go (MemoryEstimate::saved_by_kind).
struct SavedKindBytes {
  std::string kind, kept;
  int layers = 0;
  double bytes = 0.0;
};
std::vector<SavedKindBytes> saved_bytes_by_kind(const std::vector<PlannedSavedTensor>& tensors);

// Bytes of the last layer's saved tensors that its backward has released by the time its
// attention backward runs: the FFN stage's (norm, MLP or MoE) and Wo's input. With activation
// checkpointing, those of the block's forward run again. At step `step`, as
// plan_saved_activations.
double released_before_attention_bytes(const ExperimentConfig& config, int64_t step);

// Workspace that compact keeping adds in backward: the full-size tensors one stage of one
// layer rebuilds at once, for the largest such stage (0 when everything is exact).
double restore_workspace_bytes(const std::vector<PlannedSavedTensor>& tensors);

}  // namespace mok
