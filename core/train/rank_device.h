#pragma once
// RankDevice: where one rank of a training run computes, and the one place that chooses it.
//
// Today every rank computes on the host CPU (parallel.device: cpu; Trainer::unsupported_reason
// refuses anything else before a run starts). A GPU build extends bind_rank_device — e.g.
// parallel.device cuda → {kind "cuda", index = local_rank} — and the parts that build and
// step the model read RankContext::device; nothing else chooses a device.

#include <string>

#include "core/config/experiment_config.h"

namespace mok {

struct RankDevice {
  std::string kind = "cpu";  // "cpu" (later: "cuda")
  int index = 0;             // device ordinal on this host (0 for the CPU)

  // "cpu", "cuda:1": what events and the run store show.
  std::string label() const;
};

// The device of rank `rank` (of `ranks`), the `local_rank`-th rank of this host: one local
// thread or one MPI process.
RankDevice bind_rank_device(const ExperimentConfig& config, int rank, int ranks, int local_rank);

}  // namespace mok
