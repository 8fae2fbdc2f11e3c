#include "widgets/config/config_warnings.h"

#include <string>

namespace mok::gui {

std::vector<ConfigIssue> config_warnings(const ExperimentConfig& c) {
  std::vector<ConfigIssue> out;
  const ParallelConfig& p = c.parallel;
  if (p.device != "cuda" && !p.gpus.empty())
    out.push_back({"parallel.gpus", "GPU list '" + p.gpus + "' is ignored: parallel.device is " + p.device +
                                        ", so every rank computes on the host CPU"});
  const int steps = c.train.steps;
  if (steps <= 0) return out;  // the checks report that
  const std::string run = std::to_string(steps) + " steps";
  if (c.train.warmup_steps >= steps)
    out.push_back({"train.warmup_steps", "the learning-rate warm-up (" + std::to_string(c.train.warmup_steps) +
                                             " steps) is not shorter than the run (" + run +
                                             "): train.lr is never reached and the schedule never decays"});
  if (c.train.eval_every > steps)
    out.push_back({"train.eval_every", "validation every " + std::to_string(c.train.eval_every) +
                                           " steps never comes round in " + run +
                                           ": the only evaluation is the final one, one point on the Validation plot"});
  if (c.train.checkpoint_every > steps)
    out.push_back({"train.checkpoint_every", "a checkpoint every " + std::to_string(c.train.checkpoint_every) +
                                                 " steps never comes round in " + run + ": only the final one is written"});
  if (c.train.log_every > steps)
    out.push_back({"train.log_every", "a metric row every " + std::to_string(c.train.log_every) + " steps: " + run +
                                          " give one row, at the last step"});
  if (c.kittens.mode == "kitten" && c.kittens.warmup_steps >= steps)
    out.push_back({"kittens.warmup_steps", "the exact warm-up (" + std::to_string(c.kittens.warmup_steps) +
                                               " steps) covers the whole run (" + run +
                                               "): no step uses the kitten policy"});
  return out;
}

}  // namespace mok::gui
