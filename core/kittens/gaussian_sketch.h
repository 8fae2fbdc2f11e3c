#pragma once
// Gaussian sketch matrices drawn from counter-based random numbers.

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

// q (rows, cols) row-major, entries N(0, variance), element (i, j) drawn from counter
// i·cols + j of (seed, stream). With rows = r and variance = 1/r: E[qᵀq] = I (cols × cols).
void fill_gaussian(real* q, int64_t rows, int64_t cols, double variance, uint64_t seed, uint64_t stream);

MOK_NN_END
