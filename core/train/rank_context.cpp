#include "core/train/rank_context.h"

#include <exception>
#include <string>

#include "core/parallel/expert_placement.h"

namespace mok {

std::string parallel_config_problem(const ExperimentConfig& cfg, int ranks) {
  const std::string r = std::to_string(ranks);
  if (ranks < 1) return "parallel.ranks: must be at least 1";
  if (ranks == 1) return {};
  const int rows_per_micro = cfg.train.grad_accum > 0 ? cfg.train.batch / cfg.train.grad_accum : 0;
  if (rows_per_micro % ranks != 0)
    return "train.batch (" + std::to_string(cfg.train.batch) + ") / train.grad_accum (" +
           std::to_string(cfg.train.grad_accum) + ") = " + std::to_string(rows_per_micro) +
           " rows per micro-batch must divide by parallel.ranks (" + r + "): every rank reads an equal shard";
  if (cfg.model.experts > 0) {
    try {
      (void)ExpertPlacement::parse(cfg.parallel.expert_placement, cfg.model.experts, ranks);
    } catch (const std::exception& e) {
      return std::string("parallel.expert_placement: ") + e.what();
    }
    if (cfg.routing.dispatcher != "classic" && cfg.routing.dispatcher != "mok")
      return "routing.dispatcher: unknown dispatcher '" + cfg.routing.dispatcher + "'; use classic or mok";
  }
  return {};
}

}  // namespace mok
