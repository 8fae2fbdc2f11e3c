#pragma once
// SwiGLU activation: h = silu(gate) ∘ up, with a = [gate | up] per row.
//   a, da: (n, 2·f); h, dh: (n, f)

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

void swiglu_forward(const real* a, int64_t n, int64_t f, real* h);
// da written from dh and the saved pre-activation a.
void swiglu_backward(const real* a, const real* dh, int64_t n, int64_t f, real* da);

MOK_NN_END
