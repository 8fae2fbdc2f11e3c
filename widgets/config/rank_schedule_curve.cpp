#include "widgets/config/rank_schedule_curve.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#if __has_include("core/kittens/rank_schedule.h")
#include "core/kittens/rank_schedule.h"
#define MOK_GUI_CORE_RANK_SCHEDULE 1
#endif

namespace mok::gui {

namespace {

#ifndef MOK_GUI_CORE_RANK_SCHEDULE
int local_rank(const KittensConfig& k, int64_t step, int64_t total) {
  const int start = std::clamp(k.rank, std::max(1, k.min_rank), std::max(k.min_rank, k.max_rank));
  const int end = std::max(1, k.min_rank);
  const int64_t span = std::max<int64_t>(1, total - k.warmup_steps);
  const double t = std::clamp(double(step - k.warmup_steps) / double(span), 0.0, 1.0);
  double r = start;
  if (k.schedule == "linear") r = start + (end - start) * t;
  else if (k.schedule == "cosine") r = end + (start - end) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
  else if (k.schedule == "step") r = std::max<double>(end, start * std::pow(0.5, std::floor(t * 4.0)));
  return std::max(1, int(std::lround(r)));
}
#endif

}  // namespace

bool rank_schedule_from_core() {
#ifdef MOK_GUI_CORE_RANK_SCHEDULE
  return true;
#else
  return false;
#endif
}

std::vector<RankAtStep> rank_schedule_curve(const ExperimentConfig& config, int samples) {
  const int64_t total = std::max(1, config.train.steps);
  samples = std::max(2, samples);
  std::vector<RankAtStep> out;
  out.reserve(size_t(samples));
  int64_t last = -1;
  for (int i = 0; i < samples; ++i) {
    const int64_t step = total * i / (samples - 1);
    if (step == last) continue;
    last = step;
    RankAtStep p;
    p.step = step;
#ifdef MOK_GUI_CORE_RANK_SCHEDULE
    p.exact = config.kittens.mode == "exact" || rank_schedule_exact(config.kittens, step);
    p.rank = scheduled_rank(config.kittens, step, total);
#else
    p.exact = config.kittens.mode == "exact" || step < config.kittens.warmup_steps;
    p.rank = local_rank(config.kittens, step, total);
#endif
    out.push_back(p);
  }
  return out;
}

}  // namespace mok::gui
