#include "core/train/rank_device.h"

namespace mok {

std::string RankDevice::label() const { return kind == "cpu" ? kind : kind + ":" + std::to_string(index); }

RankDevice bind_rank_device(const ExperimentConfig& config, int rank, int ranks, int local_rank) {
  (void)config, (void)rank, (void)ranks, (void)local_rank;
  return RankDevice{};  // every rank on the host CPU (the only device the trainer runs on yet)
}

}  // namespace mok
