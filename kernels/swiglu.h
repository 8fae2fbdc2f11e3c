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

// da written (both halves) from dh and the saved pre-activation a. With row_scale (n floats),
// row r of dh is first scaled by row_scale[r] and rounded to T, as scale_rows does (dh itself
// is left as it is).
template <typename T>
void swiglu_backward(const T* a, const T* dh, int64_t n, int64_t f, T* da, cudaStream_t stream,
                     const float* row_scale = nullptr);

}  // namespace mok::cuda
