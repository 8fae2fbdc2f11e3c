#pragma once
// Settings shared by the compact SavedLinearInput policies (sketch, rsvd, subspace, lowbit).

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

struct CompactOptions {
  int rank = 16;                     // low-rank policies: r (clamped to min(tokens, d_in))
  uint64_t seed = 1234;              // run seed; random draws are keyed (seed, step, layer, kind)
  int64_t step = 0;                  // training step the saved tensor belongs to
  int power_iters = 1;               // rsvd / subspace refresh: power iterations
  int factor_bits = 0;               // sketch / subspace: 0 keeps P in `real`; 8 or 4 quantizes it
  int bits = 8;                      // lowbit: 8 or 4
  bool stochastic_rounding = false;  // low-bit codes: stochastic instead of nearest rounding
  bool measure_error = true;         // compute last_relative_error() at save
};

MOK_NN_END
