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

}  // namespace mok::cuda
