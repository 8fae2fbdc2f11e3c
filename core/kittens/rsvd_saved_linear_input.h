#pragma once
// Randomized-SVD saved input: U (n, r) = orthonormal basis of X's leading column space from a
// randomized range finder with power iterations, B = Uᵀ·X (r, d_in); X ≈ U·B, and
// dW = Bᵀ·(Uᵀ·dY). Data-dependent (biased, but optimal-ish for the rank) and exact once
// r ≥ rank(X). Held bytes = (n·r + r·d_in)·sizeof(real); r is clamped to min(n, d_in).

#include <memory>

#include "core/kittens/compact_options.h"
#include "core/kittens/saved_linear_input.h"

MOK_NN_BEGIN

std::unique_ptr<SavedLinearInput> make_rsvd_saved_linear_input(const CompactOptions& options);

MOK_NN_END
