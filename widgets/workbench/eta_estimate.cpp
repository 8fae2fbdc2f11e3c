#include "widgets/workbench/eta_estimate.h"

#include <cmath>

namespace mok::gui {

void EtaEstimate::add(int64_t step, double wall_s) {
  if (!samples_.empty() && step <= samples_.back().step) samples_.clear();  // a new session
  samples_.push_back({step, wall_s});
  while (samples_.size() > kWindow) samples_.pop_front();
}

double EtaEstimate::seconds_left(int64_t total_steps) const {
  if (samples_.size() < 2) return NAN;
  const Sample& a = samples_.front();
  const Sample& b = samples_.back();
  const double per_step = (b.wall_s - a.wall_s) / double(b.step - a.step);
  if (!(per_step >= 0.0)) return NAN;
  return per_step * double(std::max<int64_t>(0, total_steps - b.step));
}

QString format_duration(double seconds) {
  if (!std::isfinite(seconds)) return QStringLiteral("–");
  const int64_t s = int64_t(std::llround(std::max(0.0, seconds)));
  if (s < 60) return QStringLiteral("%1 s").arg(s);
  if (s < 3600) return QStringLiteral("%1 min %2 s").arg(s / 60).arg(s % 60, 2, 10, QChar('0'));
  return QStringLiteral("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60, 2, 10, QChar('0'));
}

}  // namespace mok::gui
