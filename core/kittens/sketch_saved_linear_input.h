#pragma once
// Gaussian-sketch saved input: X (n, d_in) ≈ P·Q with Q (r, d_in) entries N(0, 1/r), so
// E[QᵀQ] = I and the weight gradient dW = Qᵀ·(Pᵀ·dY), P = X·Qᵀ, is unbiased:
// E[Qᵀ Q] Xᵀ dY = Xᵀ dY. Q is regenerated from counter-based random numbers keyed
// (seed, step, layer, kind) in backward, never stored: held bytes = n·r·sizeof(real)
// (or the quantized size of P with factor_bits = 8/4). The price of unbiasedness is
// variance: ‖X − X·QᵀQ‖/‖X‖ ≈ √(d_in / r) for generic X.

#include <memory>

#include "core/kittens/compact_options.h"
#include "core/kittens/saved_linear_input.h"

MOK_NN_BEGIN

std::unique_ptr<SavedLinearInput> make_sketch_saved_linear_input(const CompactOptions& options);

MOK_NN_END
