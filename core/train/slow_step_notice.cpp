#include "core/train/slow_step_notice.h"

#include <algorithm>
#include <cstdio>

namespace mok {

std::string SlowStepNotice::check(int64_t step, double elapsed_s, bool finished) {
  if (step == warned_step_) return {};
  if (elapsed_s <= std::max(threshold_s_, 2.0 * warned_s_)) return {};
  warned_step_ = step;
  warned_s_ = elapsed_s;
  char took[64];
  std::snprintf(took, sizeof took, finished ? "took %.0f s" : "has been running for %.0f s", elapsed_s);
  return "warning: step " + std::to_string(step) + " " + took + " (over " +
         std::to_string(static_cast<int>(threshold_s_)) + " s): the run is working, slowly. " +
         (stops_mid_step_ ? "Ctrl-C (or Stop) stops cleanly: the step is abandoned and the last whole step saved"
                          : "Ctrl-C (or Stop) stops cleanly after this step, which is then saved");
}

}  // namespace mok
