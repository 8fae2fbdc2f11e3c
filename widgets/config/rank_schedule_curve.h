#pragma once
// The rank a kitten policy will use at each step of a run, for drawing the schedule before
// the run starts. Uses core/kittens/rank_schedule.h when the core provides it, else a
// local evaluator of the same schedules (constant, linear and cosine decay from `rank` to
// `min_rank`, step halving, exact warm-up, adaptive as its starting rank within a band).

#include <cstdint>
#include <vector>

#include "core/config/experiment_config.h"

namespace mok::gui {

struct RankAtStep {
  int64_t step = 0;
  int rank = 0;       // scheduled rank
  bool exact = false; // exact warm-up or mode exact: no compact copy at this step
};

// `samples` points spread over [0, config.train.steps], always including both ends.
std::vector<RankAtStep> rank_schedule_curve(const ExperimentConfig& config, int samples = 400);

// True when the evaluator is the core's own (rank_schedule.h), false for the local one.
bool rank_schedule_from_core();

}  // namespace mok::gui
