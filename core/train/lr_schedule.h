#pragma once
// Learning-rate schedule: linear warm-up from lr/warmup to lr over `warmup_steps`, then
// decay to lr·min_lr_ratio at the last step: cosine, linear, or constant (stays at lr).
// Steps are 0-based: lr_at(0) is the rate of the first update.

#include <cstdint>
#include <string>

namespace mok {

struct TrainConfig;

class LrSchedule {
 public:
  enum class Kind { cosine, linear, constant };

  LrSchedule(double lr, int64_t total_steps, int64_t warmup_steps, Kind kind, double min_lr_ratio);
  // From the train section (schedule name must be cosine|linear|constant).
  static LrSchedule from_config(const TrainConfig& train);
  static bool parse_kind(const std::string& name, Kind* out);

  double lr_at(int64_t step) const;

 private:
  double lr_, min_ratio_;
  int64_t total_, warmup_;
  Kind kind_;
};

}  // namespace mok
