#pragma once
// check_experiment_config: the value checks a parsed config must pass — each key's range or
// choices from the schema, then the rules that tie keys together (top_k ≤ experts, heads
// divide d_model into an even head width, batch divisible by grad_accum, ...). Returns every
// issue in schema order, so a form can highlight all bad fields at once; the loaders throw
// the first one with the file:line:column of its key.

#include <cstddef>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"

namespace mok {

struct ConfigIssue {
  std::string key_path;  // "model.top_k", "kittens.layers.7", "kittens.kinds.moe.expert.bits"
  std::string message;

  friend bool operator==(const ConfigIssue&, const ConfigIssue&) = default;
};

// The longest `name` accepted, in bytes: the name becomes part of the run's checkpoint
// folder name, and file systems cap a file name at 255 bytes.
inline constexpr size_t kMaxRunNameBytes = 128;

std::vector<ConfigIssue> check_experiment_config(const ExperimentConfig& config);

// model.moe_layers as a per-layer flag vector of length `layers`; throws std::invalid_argument
// with a message when the spec is malformed or names a layer ≥ layers.
std::vector<bool> parse_moe_layers(const std::string& spec, int layers);

// parallel.gpus: "2,3" → {2, 3}; empty when the text is not a comma list of indices ≥ 0.
std::vector<int> parse_gpu_list(const std::string& spec);

}  // namespace mok
