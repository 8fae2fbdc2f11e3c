#pragma once
// Global gradient-norm clipping. The squared norm is summed parameter by parameter in
// parameter order, each parameter in fixed chunks (parallel_sum), so the norm is bitwise
// the same for any thread count.

#include <vector>

#include "core/model/parameter.h"

namespace mok {

// L2 norm of all gradients together.
double global_grad_norm(const std::vector<Parameter*>& params);

// The clipping factor of a global norm: max_norm / norm when norm > max_norm (and finite), else
// 1 (max_norm <= 0: never clips). AdamW::step takes it to clip inside the update.
double clip_factor(double norm, double max_norm);

// Scales every gradient by max_norm / norm when norm > max_norm (max_norm <= 0: never).
// Returns the norm before clipping. (Training clips inside the update instead: clip_factor.)
double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm);

}  // namespace mok
