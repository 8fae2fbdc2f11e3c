#pragma once
// Loading, printing, saving and overriding experiment configs (YAML ↔ ExperimentConfig).
//
//   ExperimentConfig c = load_experiment_config("experiments/quickstart.yaml", {"train.steps=50"});
//   std::string yaml = experiment_config_to_yaml(c);   // full, normalized; parses back to == c
//
// Every problem throws ConfigError naming file:line:column and the key path: syntax errors,
// unknown keys (with a "did you mean"), wrong types, duplicate keys, and — through
// check_experiment_config — out-of-range or inconsistent values, located at the key in
// the file (or at the --set argument that last set it). Nothing is written on error.

#include <string>
#include <vector>

#include "core/config/config_check.h"
#include "core/config/config_error.h"
#include "core/config/config_schema.h"
#include "core/config/experiment_config.h"

namespace mok {

// Reads and parses `path`, applies `overrides` ("dotted.key=value", in order), then checks.
ExperimentConfig load_experiment_config(const std::string& path, const std::vector<std::string>& overrides = {});

// As load_experiment_config, from text; `source_name` is the file name used in errors.
ExperimentConfig parse_experiment_config(const std::string& yaml_text, const std::string& source_name,
                                         const std::vector<std::string>& overrides = {});

// Applies one "dotted.key=value" override. The value is a YAML scalar or flow node typed by
// the schema: `model.d_model=256`, `name="my run"`, `kittens.layers.2.rank=32`,
// `kittens.layers={1: {mode: kitten}}` (replaces the map), `model={layers: 2, heads: 2}`
// (sets those keys). Type errors throw; value checks are left to check_experiment_config.
// `index` is the 1-based position among the --set arguments, used as the error "line".
void apply_override(ExperimentConfig& config, const std::string& assignment, int index = 1);

// The whole config as normalized YAML: every key in schema order, no comments.
std::string experiment_config_to_yaml(const ExperimentConfig& config);

// Writes experiment_config_to_yaml(config) to `path` through a temporary file and a rename,
// so a failed save leaves any existing file as it was. Throws ConfigError on I/O failure.
void save_experiment_config(const ExperimentConfig& config, const std::string& path);

}  // namespace mok
