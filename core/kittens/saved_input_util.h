#pragma once
// Small helpers shared by the compact SavedLinearInput policies.

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/tensor/tensor.h"

MOK_NN_BEGIN

// (rows, cols) of a saved input: the last dimension is d_in, the others are tokens.
inline std::pair<int64_t, int64_t> rows_cols(const Tensor& x) {
  if (x.rank() < 1) throw std::invalid_argument("saved linear input: scalar tensor");
  const int64_t cols = x.dim(-1);
  return {cols ? x.numel() / cols : 0, cols};
}

inline void check_grad_shapes(const char* who, int64_t n, int64_t d_in, const Tensor& dy, const Tensor& dw) {
  const auto [dn, d_out] = rows_cols(dy);
  if (dn != n || dw.numel() != d_in * d_out)
    throw std::invalid_argument(std::string(who) + ": dY " + dy.shape_string() + " / dW " +
                                dw.shape_string() + " do not match the saved input (" +
                                std::to_string(n) + ", " + std::to_string(d_in) + ")");
}

inline double sum_squares(const real* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}

// Rows used to measure reconstruction error cheaply: every stride-th row, at most kErrorRows.
constexpr int64_t kErrorRows = 256;
inline int64_t error_row_stride(int64_t rows) { return rows <= kErrorRows ? 1 : (rows + kErrorRows - 1) / kErrorRows; }

MOK_NN_END
