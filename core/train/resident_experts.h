#pragma once
// Resident expert copies for generation: MoK's "compute locally" taken once for a whole
// generation instead of per step.
//
// In training a shadow copy is fetched, used and dropped in every step, because the weights
// change after each one. Generation never changes them, and a rank reads its weights from
// the checkpoint anyway: a MoE layer whose every expert the rank also reads there
// ("resident") costs memory only — no bytes between ranks, ever — and its tokens never leave
// the rank. A decode step's exchange is bound by latency, not bytes (two messages and a
// meeting of the ranks per MoE layer, for a few dozen rows), so every resident layer takes
// that latency out of every decode step; with every MoE layer resident a decode step makes
// no collective at all and can be replayed from a recorded CUDA graph, as on one GPU.
//
// Which layers: the first N MoE layers in layer order, the same N on every rank.
//   "off" or "0"  none (every MoE layer dispatches)
//   "all"         every MoE layer
//   N             the first N MoE layers (at most all of them)
//   "auto"        MoK on GPU ranks: as many as fit the rank's memory — its capacity
//                 (parallel.device_memory_limit, else 90 % of the GPU's memory: the CUDA
//                 context, library workspaces and fragmentation are not planned) minus the
//                 generation's memory plan without them (core/plan/generation_plan.h), the
//                 smallest count over ranks. Classic dispatch and CPU ranks: none (CPU ranks
//                 exchange rows as host messages, where a MoE layer waits for no device).
// Classic dispatch always ships tokens to their expert's owner: any other value than off/auto
// is refused with it.

#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/plan/generation_plan.h"

namespace mok {

// Why `value` is not a resident-experts setting for `config`'s dispatcher, or "".
std::string resident_experts_problem(const std::string& value, const ExperimentConfig& config);

// The number of MoE layers a rank holds whole for `value` (already checked), before the ranks
// agree on the smallest. `config` is the run's (parallel.ranks = the generating ranks);
// `capacity_bytes`: the rank's device memory in all (0: a CPU rank).
int resident_layer_count(const std::string& value, const ExperimentConfig& config, const GenerationShape& shape,
                         double capacity_bytes);

// (layers) true for the first `count` MoE layers: ModelOptions::resident_layers.
std::vector<bool> resident_layer_mask(const ModelConfig& model, int count);

}  // namespace mok
