#pragma once
// SwiGLU activation (CUDA), the semantics of core/backend/swiglu_kernel.h:
//   h = silu(gate) ∘ up, with a = [gate | up] per row
//   a, da: (n, 2·f) T;  h, dh: (n, f) T
// Arithmetic in float; elementwise, so bitwise repeatable.

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

template <typename T>
void swiglu_forward(const T* a, int64_t n, int64_t f, T* h, cudaStream_t stream);

// da written (both halves) from dh and the saved pre-activation a.
template <typename T>
void swiglu_backward(const T* a, const T* dh, int64_t n, int64_t f, T* da, cudaStream_t stream);

// The routed experts' backward through their gates (gate: n floats): dgate[r] = Σ_j dh[r, j]·h[r, j]
// with h = swiglu_forward(a) rebuilt (the bits of row_dot over the forward's h), and da as
// swiglu_backward gives it for dh's row r scaled by gate[r] and rounded to T, as scale_rows
// does. dh is left as it is. Zero-size f gives dgate = 0.
template <typename T>
void swiglu_backward_gated(const T* a, const T* dh, const float* gate, int64_t n, int64_t f, T* da, float* dgate,
                           cudaStream_t stream);

}  // namespace mok::cuda
