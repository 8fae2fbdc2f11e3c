#include "widgets/plot/readable_ticker.h"

#include <algorithm>
#include <cmath>

namespace mok::gui {

double nice_step_at_least(double at_least) {
  if (!(at_least > 0.0) || !std::isfinite(at_least)) return 1.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(at_least)));
  for (double mantissa : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (mantissa * magnitude >= at_least * (1.0 - 1e-9)) return mantissa * magnitude;
  return 10.0 * magnitude;
}

void ReadableTicker::fit_to_length(int pixels, int label_pixels) {
  setTickCount(std::clamp(int(std::lround(double(pixels) / std::max(1, label_pixels + kLabelGapPixels))), 2, 10));
}

double ReadableTicker::getTickStep(const QCPRange& range) {
  double step = nice_step_at_least(range.size() / std::max(1, tickCount()));
  if (whole_numbers_ && step != std::round(step)) step = step < 1.0 ? 1.0 : nice_step_at_least(step * 1.0001);  // 2.5 → 5
  return step;
}

int ReadableTicker::getSubTickCount(double tick_step) {
  if (whole_numbers_ && tick_step <= 1.0) return 0;  // no sub-ticks between whole steps
  const double mantissa = tick_step / std::pow(10.0, std::floor(std::log10(tick_step) + 1e-9));
  return mantissa < 1.5 ? 4 : mantissa < 3.0 ? 3 : 4;
}

}  // namespace mok::gui
