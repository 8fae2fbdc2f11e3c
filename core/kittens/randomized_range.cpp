#include "core/kittens/randomized_range.h"

#include <stdexcept>

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

Tensor randomized_range(const Tensor& a, int64_t n, int64_t d, int r, int power_iters, RangeSide side,
                        uint64_t seed, uint64_t stream, const MemTag& tag) {
  const bool cols = side == RangeSide::columns;
  const int64_t out_rows = cols ? n : d;  // rows of the basis
  const int64_t other = cols ? d : n;     // rows of Ω
  if (r < 1 || r > out_rows) throw std::invalid_argument("randomized_range: rank out of range");
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  Tensor omega = cx.empty({other, static_cast<int64_t>(r)}, kRealDType);
  ops.gaussian_fill(omega, 1.0, seed, stream);
  Tensor y = cx.empty({out_rows, static_cast<int64_t>(r)}, kRealDType, tag);
  if (cols) ops.gemm(false, false, n, r, d, 1.0, a, d, omega, r, 0.0, y, r);  // Y = A·Ω   (n, r)
  else      ops.gemm(true, false, d, r, n, 1.0, a, d, omega, r, 0.0, y, r);   // Y = Aᵀ·Ω  (d, r)
  ops.orthonormalize_columns(y);
  for (int it = 0; it < power_iters; ++it) {
    // z = Aᵀ·Y (d, r) or A·Y (n, r), into Ω's buffer; then Y = A·z or Aᵀ·z.
    if (cols) {
      ops.gemm(true, false, d, r, n, 1.0, a, d, y, r, 0.0, omega, r);
      ops.gemm(false, false, n, r, d, 1.0, a, d, omega, r, 0.0, y, r);
    } else {
      ops.gemm(false, false, n, r, d, 1.0, a, d, y, r, 0.0, omega, r);
      ops.gemm(true, false, d, r, n, 1.0, a, d, omega, r, 0.0, y, r);
    }
    ops.orthonormalize_columns(y);
  }
  return y;
}

MOK_NN_END
