#pragma once
// Rank schedules: the rank the low-rank kitten policies use at each training step.
//
//   constant  rank
//   linear    rank → final_rank, linearly over schedule_steps after warm-up
//   cosine    rank → final_rank, half a cosine over schedule_steps after warm-up
//   step      rank · step_factor^⌊(step − warm-up)/step_every⌋, bounded by final_rank
//   warmup    exact for warmup_steps, then constant (warmup_steps applies to every schedule)
//   adaptive  starts at rank; a per-layer controller then keeps the measured relative
//             reconstruction error under target_error by moving the rank in [min_rank, max_rank]
//
// Everything but the adaptive controller is a pure function of (config, step, total steps),
// so a plot of the schedule can be drawn before a run.

#include <cstdint>
#include <string>

#include "core/config/experiment_config.h"
#include "core/real.h"

MOK_NN_BEGIN

// True during the exact warm-up (step < warmup_steps): every tensor is kept exactly.
bool rank_schedule_exact(const KittensConfig& config, int64_t step);

// Scheduled rank at `step` (≥ 1; for adaptive, the starting rank clamped to [min, max]).
// total_steps sets the linear/cosine horizon when schedule_steps is 0.
int scheduled_rank(const KittensConfig& config, int64_t step, int64_t total_steps);

// Empty when the schedule settings are usable, else a message naming the key.
std::string rank_schedule_problem(const KittensConfig& config);

// Per-layer controller of the adaptive schedule.
class AdaptiveRankController {
 public:
  // The rank rises by max(1, rank/4) when the error is above target and falls by
  // max(1, rank/8) when it is below kLowerBelow·target: a dead band avoids oscillation.
  static constexpr double kLowerBelow = 0.5;

  AdaptiveRankController() = default;
  AdaptiveRankController(int start_rank, int min_rank, int max_rank, double target_error);
  // Feed the error measured at the current rank (negative: no measurement, no change).
  // Returns the rank for the next step.
  int observe(double relative_error);
  int rank() const { return rank_; }

 private:
  int rank_ = 16, min_ = 1, max_ = 1 << 20;
  double target_ = 0.3;
};

MOK_NN_END
