#pragma once
// Randomized range finder (Halko, Martinsson & Tropp): an orthonormal basis of the leading
// column space (or row space) of A (n, d) from a Gaussian test matrix and power iterations.

#include <cstdint>

#include "core/tensor/tensor.h"

MOK_NN_BEGIN

enum class RangeSide {
  columns,  // U (n, r): A ≈ U·(Uᵀ·A); needs r ≤ n
  rows,     // V (d, r): A ≈ (A·V)·Vᵀ; needs r ≤ d
};

// Y = A·Ω (or Aᵀ·Ω), then `power_iters` times Y = A·(Aᵀ·Y) (or Aᵀ·(A·Y)), each followed by a
// Householder re-orthonormalization. Ω's entries come from counter_normal(seed, stream, ·).
// When r ≥ rank(A), range(result) ⊇ range(A) (resp. row space) up to rounding.
Tensor randomized_range(const real* a, int64_t n, int64_t d, int r, int power_iters, RangeSide side,
                        uint64_t seed, uint64_t stream, const MemTag& tag);

MOK_NN_END
