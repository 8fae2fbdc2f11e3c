#pragma once
// Central finite differences in double precision against analytic gradients.
// For a scalar objective L(θ) and a tensor θ, compares dL/dθ from backward with
// (L(θ + h·e_i) − L(θ − h·e_i)) / 2h on a sample of entries (all of them for small tensors)
// and reports ‖num − analytic‖ / ‖num‖ over the sample.

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor/tensor.h"
#include "core/util/counter_rng.h"

namespace gradcheck {

using mok::real;
using mok::Tensor;

inline constexpr double kStep = 1e-6;
inline constexpr double kTolerance = 1e-6;  // a real bug gives errors of 1e-2 and above

inline void fill_normal(real* x, int64_t n, uint64_t seed, uint64_t stream, double scale = 1.0) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<real>(scale * mok::counter_normal(seed, stream, i));
}
inline void fill_normal(Tensor& t, uint64_t seed, uint64_t stream, double scale = 1.0) {
  fill_normal(t.data(), t.numel(), seed, stream, scale);
}

// Σ w·y: the objective whose gradient w.r.t. y is w.
inline double weighted_sum(const Tensor& y, const Tensor& w) {
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y[i]) * w[i];
  return s;
}

// Relative error of the analytic gradient of `objective` w.r.t. x[0..n), over up to
// max_entries entries picked by a fixed stride.
inline double relative_error(const std::function<double()>& objective, real* x, const real* analytic,
                             int64_t n, int64_t max_entries = 160) {
  const int64_t stride = std::max<int64_t>(1, n / max_entries);
  double diff2 = 0.0, num2 = 0.0, ana2 = 0.0;
  for (int64_t i = 0; i < n; i += stride) {
    const real saved = x[i];
    x[i] = saved + kStep;
    const double up = objective();
    x[i] = saved - kStep;
    const double down = objective();
    x[i] = saved;
    const double num = (up - down) / (2 * kStep);
    diff2 += (num - analytic[i]) * (num - analytic[i]);
    num2 += num * num;
    ana2 += static_cast<double>(analytic[i]) * analytic[i];
  }
  return std::sqrt(diff2) / std::max(std::sqrt(std::max(num2, ana2)), 1e-300);
}

// Checks and reports one tensor; fails the test when above tolerance or when the gradient
// is identically zero (a check that compares zero with zero proves nothing).
#define GRADCHECK(name, objective, x, analytic, n)                                            \
  do {                                                                                         \
    const double err_ = gradcheck::relative_error(objective, x, analytic, n);                  \
    double norm_ = 0;                                                                          \
    for (int64_t i_ = 0; i_ < (n); ++i_) norm_ += std::abs(static_cast<double>((analytic)[i_])); \
    qInfo("%-40s rel.err %.3e", std::string(name).c_str(), err_);                             \
    QVERIFY2(norm_ > 0, (std::string(name) + ": gradient is zero").c_str());                   \
    QVERIFY2(err_ < gradcheck::kTolerance, (std::string(name) + ": relative error " +          \
                                            std::to_string(err_)).c_str());                   \
  } while (0)

}  // namespace gradcheck
