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
// Related parts: where a rank runs (rank_device.h), how ranks are started (rank_launch.h),
// the per-step figures summed over ranks (step_figures.h), the leader's full copy of a
// sharded model for checkpoints (gathered_model.h).

#include <memory>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/parallel/communicator.h"
#include "core/parallel/data_plane.h"
#include "core/parallel/expert_placement.h"
#include "core/model/expert_dispatcher.h"
#include "core/train/rank_device.h"

namespace mok {

struct RankContext {
  Communicator* comm = nullptr;  // null → a single rank, nothing exchanged; else the control plane
  int rank = 0;
  int ranks = 1;
  RankDevice device;             // where this rank computes (bind_rank_device)
  std::shared_ptr<DataPlane> data;  // with comm: rows and gradients on the device (after device: freed first)
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

}  // namespace mok
