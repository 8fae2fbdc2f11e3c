#include "widgets/plot/robust_range.h"

#include <algorithm>
#include <cmath>

namespace mok::gui {

ValueRange robust_value_range(std::vector<double>& values, double lower_q, double upper_q,
                              double pad, bool positive_only) {
  auto bad = [positive_only](double v) { return !std::isfinite(v) || (positive_only && v <= 0.0); };
  values.erase(std::remove_if(values.begin(), values.end(), bad), values.end());
  ValueRange r;
  if (values.empty()) return r;
  const size_t n = values.size();
  auto at_quantile = [&](double q) {
    size_t k = size_t(std::clamp(q, 0.0, 1.0) * double(n - 1) + 0.5);
    std::nth_element(values.begin(), values.begin() + k, values.end());
    return values[k];
  };
  double lo = at_quantile(lower_q);
  double hi = at_quantile(upper_q);
  if (positive_only) {
    // Pad multiplicatively on a log axis.
    double f = std::pow(std::max(hi / lo, 1.0 + 1e-9), pad);
    if (hi <= lo) f = 1.5;
    r.lo = lo / f;
    r.hi = hi * f;
  } else {
    double span = hi - lo;
    if (span <= 0.0) span = std::max(std::abs(hi) * 0.1, 1e-9);
    r.lo = lo - pad * span;
    r.hi = hi + pad * span;
  }
  r.valid = true;
  return r;
}

double EmaSmoother::push(double v) {
  if (weight_ <= 0.0 || !std::isfinite(v)) return v;
  num_ = weight_ * num_ + (1.0 - weight_) * v;
  den_ = weight_ * den_ + (1.0 - weight_);
  return num_ / den_;
}

}  // namespace mok::gui
