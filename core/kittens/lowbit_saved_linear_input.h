#pragma once
// Low-bit saved input: X kept as 8- or 4-bit codes with one absmax scale per row
// (QuantizedMatrix); dW = X̃ᵀ·dY with X̃ dequantized in backward. restore() gives X̃ for
// layers that need X itself (also used for low-bit elementwise tensors).
// Held bytes = n·ceil(d_in·bits/8) + 4·n.

#include <memory>

#include "core/kittens/compact_options.h"
#include "core/kittens/saved_linear_input.h"

MOK_NN_BEGIN

std::unique_ptr<SavedLinearInput> make_lowbit_saved_linear_input(const CompactOptions& options);

MOK_NN_END
