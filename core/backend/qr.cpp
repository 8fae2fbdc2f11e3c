#include "core/backend/qr.h"

#include <cmath>
#include <stdexcept>
#include <vector>

MOK_NN_BEGIN

void orthonormalize_columns(real* a, int64_t rows, int64_t cols) {
  if (cols == 0 || rows == 0) return;
  if (rows < cols) throw std::invalid_argument("orthonormalize_columns: rows < cols");
  // w: column-major copy (rows, cols); v: the Householder vectors, column j lives in rows j..
  std::vector<double> w(rows * cols), v(rows * cols, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) w[j * rows + i] = a[i * cols + j];

  std::vector<bool> active(cols, false);
  for (int64_t j = 0; j < cols; ++j) {
    double* x = &w[j * rows];
    double norm2 = 0.0;
    for (int64_t i = j; i < rows; ++i) norm2 += x[i] * x[i];
    const double norm = std::sqrt(norm2);
    if (norm == 0.0) continue;  // nothing left in this column: H_j = I
    double* vj = &v[j * rows];
    const double alpha = x[j] >= 0.0 ? -norm : norm;  // sign chosen to avoid cancellation
    for (int64_t i = j; i < rows; ++i) vj[i] = x[i];
    vj[j] -= alpha;
    double vn2 = 0.0;
    for (int64_t i = j; i < rows; ++i) vn2 += vj[i] * vj[i];
    const double vn = std::sqrt(vn2);
    if (vn == 0.0) continue;
    for (int64_t i = j; i < rows; ++i) vj[i] /= vn;
    active[j] = true;
    // Apply H_j = I − 2 v vᵀ to the remaining columns.
    for (int64_t c = j; c < cols; ++c) {
      double* col = &w[c * rows];
      double dot = 0.0;
      for (int64_t i = j; i < rows; ++i) dot += vj[i] * col[i];
      for (int64_t i = j; i < rows; ++i) col[i] -= 2.0 * dot * vj[i];
    }
  }
  // Q = H_0 H_1 … H_{cols−1} · E, E the first cols columns of the identity.
  std::vector<double> q(rows * cols, 0.0);  // column-major
  for (int64_t j = 0; j < cols; ++j) q[j * rows + j] = 1.0;
  for (int64_t j = cols - 1; j >= 0; --j) {
    if (!active[j]) continue;
    const double* vj = &v[j * rows];
    for (int64_t c = 0; c < cols; ++c) {
      double* col = &q[c * rows];
      double dot = 0.0;
      for (int64_t i = j; i < rows; ++i) dot += vj[i] * col[i];
      if (dot == 0.0) continue;
      for (int64_t i = j; i < rows; ++i) col[i] -= 2.0 * dot * vj[i];
    }
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) a[i * cols + j] = static_cast<real>(q[j * rows + i]);
}

MOK_NN_END
