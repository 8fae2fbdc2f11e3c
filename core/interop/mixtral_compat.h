#pragma once
// Which mok models the Mixtral export represents exactly, and what it leaves out.
//
// Refused (the Mixtral model would compute different logits):
//   - a dense layer (model.experts 0, or model.moe_layers other than all): every Mixtral
//     layer is sparse;
//   - model.shared_expert: Mixtral has none, and Qwen2-MoE's shared expert is scaled by
//     sigmoid(x·w) (no bias), which equals mok's ungated one for no weight w.
// Left out, with a note (they do not change what the model computes at inference):
//   - kitten settings (saved-activation copies: training memory only);
//   - routing.capacity_factor > 0: training and evaluation drop pairs beyond capacity, but
//     mok's inference (mok generate) and Transformers route dropless; the export equals that;
//   - routing.policy locality / locality_aux_coef: only with several expert-parallel ranks;
//     on one rank (and in the export) routing is plain top-k;
//   - the router z-loss, the dispatcher, parallel and precision settings.

#include <string>
#include <vector>

#include "core/config/experiment_config.h"

namespace mok {

// One line per reason the model cannot be written as Mixtral; empty when it can.
std::vector<std::string> mixtral_export_problems(const ExperimentConfig& config);

// One line per setting of `config` that the export does not carry (see above).
std::vector<std::string> mixtral_export_notes(const ExperimentConfig& config);

}  // namespace mok
