#pragma once
// Outlier-robust autoscale: the value range that holds the central quantiles of the data,
// padded, so one loss spike at step 0 does not flatten the rest of the curve.

#include <vector>

namespace mok::gui {

struct ValueRange {
  double lo = 0.0;
  double hi = 1.0;
  bool valid = false;
};

// Range of `values` between quantiles `lower_q` and `upper_q` (0..1), padded by `pad`
// of the span on each side. Non-finite values are ignored; with `positive_only` (log
// axes) so are values <= 0. `values` is reordered.
ValueRange robust_value_range(std::vector<double>& values, double lower_q, double upper_q,
                              double pad, bool positive_only);

// Debiased exponential moving average, as used for the smoothing slider: with weight w,
// s_n = (sum_i w^(n-i) (1-w) v_i) / (1 - w^n). w = 0 returns the raw values.
class EmaSmoother {
 public:
  explicit EmaSmoother(double weight = 0.0) : weight_(weight) {}
  double push(double v);
  void reset() { num_ = 0.0, den_ = 0.0; }
  double weight() const { return weight_; }

 private:
  double weight_;
  double num_ = 0.0;
  double den_ = 0.0;
};

}  // namespace mok::gui
