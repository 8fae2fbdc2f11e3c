#include "core/backend/column_reduce.h"

#include <vector>

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

void column_reduce(int64_t rows, int64_t d,
                   const std::function<void(int64_t, int64_t, real*)>& fn, real* out) {
  if (rows <= 0 || d <= 0) return;
  const int64_t chunks = (rows + kReduceRowGrain - 1) / kReduceRowGrain;
  std::vector<real> partial(static_cast<size_t>(chunks * d), real(0));  // (chunks, d)
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      fn(c * kReduceRowGrain, std::min(rows, (c + 1) * kReduceRowGrain), partial.data() + c * d);
  });
  for (int64_t c = 0; c < chunks; ++c) {
    const real* p = partial.data() + c * d;
    for (int64_t j = 0; j < d; ++j) out[j] += p[j];
  }
}

MOK_NN_END
