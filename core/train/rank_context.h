#pragma once
// RankContext: one rank's part in a training run over R ranks (expert parallelism for the
// routed experts, data parallelism for everything else; see docs/parallel.md).
//
//   R = 1: comm is null and the trainer runs exactly its single-process path.
//   R > 1: every rank builds the same model replica with only its own experts
//          (ModelOptions::local_experts), one dispatcher per MoE layer over `comm`, reads
//          rows [r·b/R, (r+1)·b/R) of every (micro-)batch of b rows, runs backward with an
//          extra 1/R (its share of the global mean), sums the dense gradients over ranks,
//          and clips with the global norm. Rank 0 (the leader) alone writes metrics, the
//          run store, checkpoints and progress.
//
// The per-step figures each rank has (loss, load, traffic, time) are summed over ranks by
// reduce_step_figures: one all_reduce_sum of doubles (fixed rank order, so every rank gets
// the same bits, and counts below 2⁵³ stay exact).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/dist/comm_stats.h"
#include "core/dist/communicator.h"
#include "core/dist/expert_placement.h"
#include "core/model/expert_dispatcher.h"
#include "core/model/parameter.h"

MOK_NN_BEGIN
class LanguageModel;
MOK_NN_END

namespace mok {

class AdamW;

struct RankContext {
  Communicator* comm = nullptr;  // null → a single rank, nothing exchanged
  int rank = 0;
  int ranks = 1;
  ExpertPlacement placement;     // set when comm is
  std::vector<ExpertDispatcher*> dispatchers;  // one per MoE layer (owned by the layers)

  bool leader() const { return rank == 0; }
  bool parallel() const { return comm != nullptr; }
  // This rank's rows of a global batch of `batch` rows (batch divides by ranks).
  int shard_rows(int batch) const { return batch / ranks; }
  int shard_begin(int batch) const { return rank * (batch / ranks); }
};

// Why `config` cannot run on `ranks` ranks (batch split, experts per rank, placement,
// dispatcher), or "" when it can.
std::string parallel_config_problem(const ExperimentConfig& config, int ranks);

// What one rank measured during one optimizer step.
struct StepFigures {
  double loss_sum = 0.0;     // Σ over micro-batches of mean loss · target tokens
  double tokens = 0.0;       // target tokens
  double aux = 0.0, z = 0.0; // Σ over micro-batches of this rank's aux and z losses
  double locality = 0.0;     // … and of its locality loss
  double dropped = 0.0;      // (token, expert) pairs dropped by the capacity factor
  double local_pairs = 0.0;  // routed pairs whose expert lives on the token's own rank
  std::vector<std::vector<double>> load;  // [MoE layer][expert] pairs routed (this rank's tokens)
  // Traffic and time, this rank.
  double remote_bytes = 0.0, dispatch_bytes = 0.0, combine_bytes = 0.0, grad_bytes = 0.0;
  double comm_s = 0.0;       // wall time inside collectives (waiting for peers included)
  double modeled_s = 0.0;    // emulated link time (LinkModel)
  double step_s = 0.0;       // wall time of the step

  // Fills the traffic and time fields from the communicator's counters since `before`.
  void take_comm(const CommStats& now, const CommStats& before);
};

// Sums every field over ranks in place (CommPurpose::control); the same values on every
// rank afterwards. Times become sums too: divide by ranks for per-rank means.
void reduce_step_figures(RankContext& rc, StepFigures& f);

// The leader's full copy of a sharded model, for a checkpoint: every parameter (the
// experts of all ranks) and its AdamW moments, in the order of a single-rank model, so the
// checkpoint is the one R = 1 would write and resumes at any R.
struct GatheredModel {
  std::unique_ptr<LanguageModel> model;  // null on other ranks
  std::vector<Parameter*> params;
  std::unique_ptr<AdamW> adam;
  GatheredModel();
  GatheredModel(GatheredModel&&) noexcept;
  GatheredModel& operator=(GatheredModel&&) noexcept;
  ~GatheredModel();
};

// Collective: every rank sends the values and moments of its experts to rank 0
// (CommPurpose::weights); rank 0 builds a full replica from local_model.options() (every
// expert), fills it and returns it. Costs one full model of memory on rank 0 while held.
GatheredModel gather_model(RankContext& rc, LanguageModel& local_model, const std::vector<Parameter*>& params,
                           const AdamW& adam);

}  // namespace mok
