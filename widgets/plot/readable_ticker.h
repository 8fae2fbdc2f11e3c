#pragma once
// ReadableTicker: axis ticks that never crowd. The tick step is the smallest 1-2-2.5-5 step
// that gives at most tickCount() ticks (QCustomPlot's own readability steps may give more),
// and on a whole-number axis (steps, tokens) it is a whole number, so a narrow plot
// over steps 10..15 reads "10 12 14", not "1012.515". The owning plot sets tickCount() from
// the axis length in pixels before each replot.

#include <qcustomplot.h>

namespace mok::gui {

class ReadableTicker : public QCPAxisTicker {
 public:
  // Free pixels between two tick labels.
  static constexpr int kLabelGapPixels = 24;

  void set_whole_numbers(bool on) { whole_numbers_ = on; }
  bool whole_numbers() const { return whole_numbers_; }
  // Sets tickCount() for an axis `pixels` long whose labels take `label_pixels` along it.
  void fit_to_length(int pixels, int label_pixels);

 protected:
  double getTickStep(const QCPRange& range) override;
  int getSubTickCount(double tick_step) override;

 private:
  bool whole_numbers_ = false;
};

// The smallest 1, 2, 2.5 or 5 × 10^k that is ≥ `at_least` (> 0).
double nice_step_at_least(double at_least);

}  // namespace mok::gui
