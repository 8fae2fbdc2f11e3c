#include "core/kittens/gaussian_sketch.h"

#include <cmath>

#include "core/util/counter_rng.h"
#include "core/util/thread_pool.h"

MOK_NN_BEGIN

void fill_gaussian(real* q, int64_t rows, int64_t cols, double variance, uint64_t seed, uint64_t stream) {
  const double sd = std::sqrt(variance);
  const int64_t n = rows * cols;
  // Each element depends only on its index: any chunking gives the same matrix.
  parallel_for(n, 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      q[i] = static_cast<real>(sd * counter_normal(seed, stream, static_cast<uint64_t>(i)));
  });
}

MOK_NN_END
