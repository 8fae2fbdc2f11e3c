#pragma once
// One sample of a metric with the three x coordinates a plot can use, so switching the
// x-axis between step, tokens and wall time needs no second copy of the data.

#include <cstdint>

#include <QString>

namespace mok::gui {

struct MetricPoint {
  int64_t step = 0;
  int64_t tokens = 0;
  double wall_s = 0.0;
  double value = 0.0;
};

enum class XAxisMode { step, tokens, wall_time };

inline double x_of(const MetricPoint& p, XAxisMode mode) {
  switch (mode) {
    case XAxisMode::step: return double(p.step);
    case XAxisMode::tokens: return double(p.tokens);
    case XAxisMode::wall_time: return p.wall_s;
  }
  return double(p.step);
}

inline QString x_axis_label(XAxisMode mode) {
  switch (mode) {
    case XAxisMode::step: return QStringLiteral("step");
    case XAxisMode::tokens: return QStringLiteral("tokens");
    case XAxisMode::wall_time: return QStringLiteral("wall time (s)");
  }
  return {};
}

}  // namespace mok::gui
