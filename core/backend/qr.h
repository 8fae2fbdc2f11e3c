#pragma once
// Thin QR by Householder reflections, for the randomized range finders of the kitten
// policies. Householder (not Gram-Schmidt) keeps Q orthonormal to rounding even when the
// columns are (numerically) dependent, which happens whenever the rank asked for exceeds
// the rank of the data.

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

// a (rows, cols) row-major with rows >= cols is replaced by Q (rows, cols) with orthonormal
// columns and range(a) ⊆ range(Q). Work is done in double whatever `real` is.
void orthonormalize_columns(real* a, int64_t rows, int64_t cols);

MOK_NN_END
