#pragma once
// CUDA versions of the core's elementwise layers, on device pointers (float32, row-major).
// Each has a CPU reference in core/backend and is checked against it in tests/cuda.
//   RMSNorm:  y = x / rms(x) · g,  rms(x) = sqrt(mean(x²) + eps),  x (rows, dim), g (dim)
//   SwiGLU:   h = silu(a) · b,  a, b, h (rows, hidden)

#include <cuda_runtime.h>

namespace mok::cuda {

// y (rows, dim); inv_rms (rows) is kept for backward (no copy of the normalised x).
void rmsnorm_forward(const float* x, const float* g, float* y, float* inv_rms, int rows, int dim,
                     float eps, cudaStream_t stream = nullptr);
// dx (rows, dim) overwritten; dg (dim) accumulated (+=) over rows in a fixed order.
void rmsnorm_backward(const float* x, const float* g, const float* inv_rms, const float* dy,
                      float* dx, float* dg, int rows, int dim, cudaStream_t stream = nullptr);

void swiglu_forward(const float* a, const float* b, float* h, long long n, cudaStream_t stream = nullptr);
// da, db overwritten from dh.
void swiglu_backward(const float* a, const float* b, const float* dh, float* da, float* db, long long n,
                     cudaStream_t stream = nullptr);

}  // namespace mok::cuda
