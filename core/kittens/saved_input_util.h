#pragma once
// Small helpers shared by the compact SavedLinearInput policies.

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/backend/exec_context.h"
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

// t in `dtype`: t itself, or its copy converted into `scratch` (on a GPU in bf16: X widened
// to f32 for the low-rank factors, a factor rounded to bf16 for the product with dY).
inline const Tensor& in_dtype(const Tensor& t, DType dtype, Tensor& scratch) {
  if (t.dtype() == dtype) return t;
  const ExecContext& cx = ExecContext::current();
  scratch = cx.empty(t.shape(), dtype);
  cx.ops().convert(t, scratch);
  return scratch;
}

// Rows used to measure reconstruction error cheaply: every stride-th row, at most kErrorRows.
constexpr int64_t kErrorRows = 256;
inline int64_t error_row_stride(int64_t rows) { return rows <= kErrorRows ? 1 : (rows + kErrorRows - 1) / kErrorRows; }

MOK_NN_END
