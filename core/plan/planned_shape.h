#pragma once
// The shape facts every part of the memory plan reads off a config the same way, also for a
// config the checks would refuse (the plan is shown while a config is being edited).

#include <vector>

#include "core/config/experiment_config.h"

namespace mok {

// Vocabulary size: the BPE tokenizer's (at least 256), else the 256 bytes.
int planned_vocab(const ExperimentConfig& config);

// Which layers have experts (model.moe_layers; all false without experts). A spec that does
// not parse counts every layer as MoE.
std::vector<bool> planned_moe_layers(const ExperimentConfig& config);

}  // namespace mok
