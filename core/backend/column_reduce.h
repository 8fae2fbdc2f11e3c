#pragma once
// Deterministic reductions over rows: per-row-chunk partials (fixed chunks of
// kReduceRowGrain rows) added in chunk order, so the sum does not depend on the thread count.

#include <cstdint>
#include <functional>

#include "core/real.h"

MOK_NN_BEGIN

constexpr int64_t kReduceRowGrain = 128;

// out(d) += Σ over row chunks of the partial that fn(r0, r1, partial) adds into a zeroed
// partial(d) for rows [r0, r1).
void column_reduce(int64_t rows, int64_t d,
                   const std::function<void(int64_t r0, int64_t r1, real* partial)>& fn, real* out);

MOK_NN_END
