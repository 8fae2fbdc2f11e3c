#include "core/backend/rope.h"

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

RopeTable::RopeTable(int max_positions, int head_dim, double theta)
    : max_positions_(max_positions), head_dim_(head_dim) {
  static std::atomic<uint64_t> tables{0};
  id_ = ++tables;
  if (head_dim % 2) throw std::invalid_argument("RoPE: head dimension must be even, got " + std::to_string(head_dim));
  const int half = head_dim / 2;
  cos_.resize(static_cast<size_t>(max_positions) * half);
  sin_.resize(cos_.size());
  for (int p = 0; p < max_positions; ++p)
    for (int i = 0; i < half; ++i) {
      const double angle = p * std::pow(theta, -2.0 * i / head_dim);
      cos_[static_cast<size_t>(p) * half + i] = static_cast<real>(std::cos(angle));
      sin_[static_cast<size_t>(p) * half + i] = static_cast<real>(std::sin(angle));
    }
}

void rope_apply(real* x, int64_t rows, int64_t ld, int heads, int seq, int pos0,
                const RopeTable& table, bool inverse) {
  const int hd = table.head_dim(), half = hd / 2;
  if (rows > 0 && pos0 + std::min<int64_t>(seq, rows) > table.max_positions())
    throw std::invalid_argument("RoPE: position beyond max_seq_len " + std::to_string(table.max_positions()));
  const real sign = inverse ? real(-1) : real(1);
  parallel_for(rows, 32, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int pos = pos0 + static_cast<int>(r % seq);
      const real* c = table.cos_row(pos);
      const real* s = table.sin_row(pos);
      for (int h = 0; h < heads; ++h) {
        real* a = x + r * ld + static_cast<int64_t>(h) * hd;
        real* b = a + half;
        for (int i = 0; i < half; ++i) {
          const real x1 = a[i], x2 = b[i], si = sign * s[i];
          a[i] = x1 * c[i] - x2 * si;
          b[i] = x1 * si + x2 * c[i];
        }
      }
    }
  });
}

MOK_NN_END
