#pragma once
// Randomized range finder (Halko, Martinsson & Tropp): an orthonormal basis of the leading
// column space (or row space) of A (n, d) from a Gaussian test matrix and power iterations.
// Runs through the rank's ops, so on the device of A.

#include <cstdint>

#include "core/tensor/tensor.h"

MOK_NN_BEGIN

enum class RangeSide {
  columns,  // U (n, r): A ≈ U·(Uᵀ·A); needs r ≤ n
  rows,     // V (d, r): A ≈ (A·V)·Vᵀ; needs r ≤ d
};

// a (n, d) `real` (f32 on a GPU). Y = A·Ω (or Aᵀ·Ω), then `power_iters` times
// Y = A·(Aᵀ·Y) (or Aᵀ·(A·Y)), each followed by Ops::orthonormalize_columns (Householder on
// the CPU, CholeskyQR2 on a GPU). Ω's entries come from counter_normal(seed, stream, ·).
// When r ≥ rank(A), range(result) ⊇ range(A) (resp. row space) up to rounding.
// Returns Y `real` on a's device, counted under `tag`.
Tensor randomized_range(const Tensor& a, int64_t n, int64_t d, int r, int power_iters, RangeSide side,
                        uint64_t seed, uint64_t stream, const MemTag& tag);

MOK_NN_END
