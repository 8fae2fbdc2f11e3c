#include "core/kittens/randomized_range.h"

#include <stdexcept>

#include "core/backend/gemm.h"
#include "core/backend/qr.h"
#include "core/kittens/gaussian_sketch.h"

MOK_NN_BEGIN

Tensor randomized_range(const real* a, int64_t n, int64_t d, int r, int power_iters, RangeSide side,
                        uint64_t seed, uint64_t stream, const MemTag& tag) {
  const bool cols = side == RangeSide::columns;
  const int64_t out_rows = cols ? n : d;    // rows of the basis
  const int64_t other = cols ? d : n;       // rows of Ω
  if (r < 1 || r > out_rows) throw std::invalid_argument("randomized_range: rank out of range");
  Tensor omega({other, static_cast<int64_t>(r)});
  fill_gaussian(omega.data(), other, r, 1.0, seed, stream);
  Tensor y({out_rows, static_cast<int64_t>(r)}, tag);
  if (cols) matmul(a, omega.data(), y.data(), n, d, r);     // Y = A·Ω   (n, r)
  else      matmul_tn(a, omega.data(), y.data(), d, n, r);  // Y = Aᵀ·Ω  (d, r)
  orthonormalize_columns(y.data(), out_rows, r);
  for (int it = 0; it < power_iters; ++it) {
    // z = Aᵀ·Y (d, r) or A·Y (n, r); then Y = A·z or Aᵀ·z.
    if (cols) {
      matmul_tn(a, y.data(), omega.data(), d, n, r);
      matmul(a, omega.data(), y.data(), n, d, r);
    } else {
      matmul(a, y.data(), omega.data(), n, d, r);
      matmul_tn(a, omega.data(), y.data(), d, n, r);
    }
    orthonormalize_columns(y.data(), out_rows, r);
  }
  return y;
}

MOK_NN_END
