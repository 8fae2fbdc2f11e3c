#include "core/kittens/rank_schedule.h"

#include <algorithm>
#include <cmath>

MOK_NN_BEGIN

namespace {

int final_rank_of(const KittensConfig& c) { return c.final_rank > 0 ? c.final_rank : std::max(1, c.min_rank); }

// Progress in [0, 1] through the decay window after warm-up.
double progress(const KittensConfig& c, int64_t step, int64_t total_steps) {
  const int64_t span = c.schedule_steps > 0 ? c.schedule_steps : std::max<int64_t>(1, total_steps - c.warmup_steps);
  const double t = static_cast<double>(step - c.warmup_steps) / static_cast<double>(span);
  return std::clamp(t, 0.0, 1.0);
}

}  // namespace

bool rank_schedule_exact(const KittensConfig& config, int64_t step) { return step < config.warmup_steps; }

int scheduled_rank(const KittensConfig& c, int64_t step, int64_t total_steps) {
  const int start = std::max(1, c.rank);
  const int end = final_rank_of(c);
  double r = start;
  if (c.schedule == "linear") {
    r = start + (end - start) * progress(c, step, total_steps);
  } else if (c.schedule == "cosine") {
    r = end + (start - end) * 0.5 * (1.0 + std::cos(M_PI * progress(c, step, total_steps)));
  } else if (c.schedule == "step") {
    const int64_t drops = std::max<int64_t>(0, step - c.warmup_steps) / std::max(1, c.step_every);
    r = start * std::pow(c.step_factor, static_cast<double>(drops));
    r = std::clamp(r, static_cast<double>(std::min(start, end)), static_cast<double>(std::max(start, end)));
  } else if (c.schedule == "adaptive") {
    r = std::clamp(start, std::max(1, c.min_rank), std::max(c.min_rank, c.max_rank));
  }
  return std::max(1, static_cast<int>(std::lround(r)));
}

std::string rank_schedule_problem(const KittensConfig& c) {
  static const char* kNames[] = {"constant", "linear", "cosine", "step", "warmup", "adaptive"};
  if (std::find_if(std::begin(kNames), std::end(kNames), [&](const char* n) { return c.schedule == n; }) ==
      std::end(kNames))
    return "kittens.schedule: unknown schedule '" + c.schedule +
           "' (constant, linear, cosine, step, warmup, adaptive)";
  if (c.rank < 1) return "kittens.rank: must be at least 1";
  if (c.min_rank < 1) return "kittens.min_rank: must be at least 1";
  if (c.max_rank < c.min_rank) return "kittens.max_rank: must be at least kittens.min_rank";
  if (c.warmup_steps < 0) return "kittens.warmup_steps: must not be negative";
  if (c.schedule_steps < 0) return "kittens.schedule_steps: must not be negative";
  if (c.schedule == "step" && c.step_every < 1) return "kittens.step_every: must be at least 1";
  if (c.schedule == "step" && !(c.step_factor > 0.0)) return "kittens.step_factor: must be positive";
  if (c.schedule == "adaptive" && !(c.target_error > 0.0)) return "kittens.target_error: must be positive";
  return {};
}

AdaptiveRankController::AdaptiveRankController(int start_rank, int min_rank, int max_rank, double target_error)
    : rank_(std::clamp(start_rank, std::max(1, min_rank), std::max(min_rank, max_rank))),
      min_(std::max(1, min_rank)),
      max_(std::max(min_rank, max_rank)),
      target_(target_error) {}

int AdaptiveRankController::observe(double e) {
  if (e < 0.0) return rank_;
  if (e > target_) rank_ = std::min(max_, rank_ + std::max(1, rank_ / 4));
  else if (e < kLowerBelow * target_) rank_ = std::max(min_, rank_ - std::max(1, rank_ / 8));
  return rank_;
}

MOK_NN_END
