#pragma once
// A warning for a training step that runs much longer than a step should: someone watching
// a silent progress bar cannot tell a slow step from a hang, nor know that a stop is safe.
//
//   SlowStepNotice notice;                         // warns past 60 s
//   std::string w = notice.check(step, elapsed_s); // "" or the line to show
//
// Asked while the step runs (at its cancellation check points) and once when it ends, it
// warns at most once per step, and after the first warning only for a step that runs more
// than twice as long as the longest one warned about, so a run whose every step is slow
// says so once instead of every step.

#include <cstdint>
#include <string>

namespace mok {

class SlowStepNotice {
 public:
  static constexpr double kDefaultThresholdS = 60.0;

  // stops_mid_step: whether a stop abandons the step in progress (one rank) or waits for
  // it to end (several ranks), for the advice in the warning.
  explicit SlowStepNotice(double threshold_s = kDefaultThresholdS, bool stops_mid_step = true)
      : threshold_s_(threshold_s), stops_mid_step_(stops_mid_step) {}

  // `step`: the step's number, 1-based; `elapsed_s`: how long it has run so far (or in all,
  // once it ended: `finished`). Returns the warning, or "" when there is none to give.
  std::string check(int64_t step, double elapsed_s, bool finished = false);

 private:
  double threshold_s_;
  bool stops_mid_step_;
  int64_t warned_step_ = 0;  // the last step warned about (0: none)
  double warned_s_ = 0.0;    // the longest time warned about
};

}  // namespace mok
