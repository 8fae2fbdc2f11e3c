#include "core/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/config/experiment_config.h"

namespace mok {

LrSchedule::LrSchedule(double lr, int64_t total_steps, int64_t warmup_steps, Kind kind,
                       double min_lr_ratio)
    : lr_(lr), min_ratio_(min_lr_ratio), total_(std::max<int64_t>(total_steps, 1)),
      warmup_(std::max<int64_t>(warmup_steps, 0)), kind_(kind) {}

bool LrSchedule::parse_kind(const std::string& name, Kind* out) {
  if (name == "cosine") *out = Kind::cosine;
  else if (name == "linear") *out = Kind::linear;
  else if (name == "constant") *out = Kind::constant;
  else return false;
  return true;
}

LrSchedule LrSchedule::from_config(const TrainConfig& train) {
  Kind kind;
  if (!parse_kind(train.schedule, &kind)) {
    throw std::invalid_argument("train.schedule: unknown schedule '" + train.schedule +
                                "' (expected cosine, linear or constant)");
  }
  return LrSchedule(train.lr, train.steps, train.warmup_steps, kind, train.min_lr_ratio);
}

double LrSchedule::lr_at(int64_t step) const {
  if (step < warmup_) return lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  if (kind_ == Kind::constant) return lr_;
  const int64_t decay_steps = total_ - warmup_;
  // progress 0 at the first step after warm-up, 1 at the last step (total − 1).
  double progress = decay_steps > 1 ? static_cast<double>(step - warmup_) /
                                          static_cast<double>(decay_steps - 1)
                                    : 1.0;
  progress = std::clamp(progress, 0.0, 1.0);
  const double min_lr = lr_ * min_ratio_;
  if (kind_ == Kind::linear) return lr_ - (lr_ - min_lr) * progress;
  return min_lr + (lr_ - min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace mok
