#include "core/backend/cholesky_qr.h"

#include <cmath>
#include <stdexcept>
#include <vector>

MOK_NN_BEGIN

namespace {

// One pass: y (rows, cols) ← y·R⁻¹ with G = yᵀ·y = RᵀR.
void cholesky_qr_pass(real* y, int64_t rows, int64_t cols) {
  const int64_t c = cols;
  // G in blocks of rows, then the blocks in order (the kernel's order).
  std::vector<double> a(static_cast<size_t>(c * c), 0.0), block(static_cast<size_t>(c * c));
  for (int64_t r0 = 0; r0 < rows; r0 += kCholeskyQrGramRows) {
    const int64_t r1 = std::min(rows, r0 + kCholeskyQrGramRows);
    for (int64_t p = 0; p < c * c; ++p) {
      const int64_t j = p / c, k = p % c;
      double s = 0.0;
      for (int64_t i = r0; i < r1; ++i) s += static_cast<double>(y[i * c + j]) * static_cast<double>(y[i * c + k]);
      block[static_cast<size_t>(p)] = s;
    }
    for (int64_t p = 0; p < c * c; ++p) a[static_cast<size_t>(p)] += block[static_cast<size_t>(p)];
  }
  std::vector<double> g_diag(static_cast<size_t>(c)), inv(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) g_diag[j] = a[j * c + j];
  // Right-looking Cholesky; row j of a becomes row j of R.
  const double tol2 = kCholeskyQrDependentColumn * kCholeskyQrDependentColumn;
  for (int64_t j = 0; j < c; ++j) {
    const double d = a[j * c + j];
    const bool keep = d > tol2 * g_diag[j];
    const double rjj = keep ? std::sqrt(d) : 0.0;
    a[j * c + j] = rjj;
    inv[j] = keep ? 1.0 / rjj : 0.0;
    for (int64_t l = j + 1; l < c; ++l) a[j * c + l] *= inv[j];
    for (int64_t k = j + 1; k < c; ++k)
      for (int64_t l = k; l < c; ++l) a[k * c + l] -= a[j * c + k] * a[j * c + l];
  }
  // R⁻¹ (upper) column by column; a dropped i has inverse pivot 0, so its row and column vanish.
  std::vector<double> rinv(static_cast<size_t>(c * c), 0.0);
  for (int64_t l = 0; l < c; ++l) {
    rinv[l * c + l] = inv[l];
    for (int64_t i = l - 1; i >= 0; --i) {
      double s = 0.0;
      for (int64_t k = i + 1; k <= l; ++k) s += a[i * c + k] * rinv[k * c + l];
      rinv[i * c + l] = -s * inv[i];
    }
  }
  std::vector<double> row(static_cast<size_t>(c));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < c; ++k) row[k] = y[i * c + k];
    for (int64_t l = 0; l < c; ++l) {
      double s = 0.0;
      for (int64_t k = 0; k <= l; ++k) s += row[k] * rinv[k * c + l];
      y[i * c + l] = static_cast<real>(s);
    }
  }
}

}  // namespace

void cholesky_qr2(real* y, int64_t rows, int64_t cols) {
  if (cols > rows) throw std::invalid_argument("cholesky_qr2: cols > rows");
  if (rows == 0 || cols == 0) return;
  cholesky_qr_pass(y, rows, cols);
  cholesky_qr_pass(y, rows, cols);
}

MOK_NN_END
