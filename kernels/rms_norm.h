#pragma once
// RMSNorm on rows (CUDA), the semantics of core/backend/rms_norm_kernel.h:
//   y = x · rstd · g,  rstd = 1/sqrt(mean(x²) + eps)
//   x, y, dy, dx: (n, d) T;  g: (d) T;  rstd: (n) float;  dg: (d) float
// T is float or bf16; arithmetic in float. One warp per row. dg is reduced without atomics
// in a fixed order (per-block partials in a caller-provided workspace, then added in block
// order), so it is bitwise repeatable.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mok::cuda {

// rstd may be null (nothing kept).
template <typename T>
void rms_norm_forward(const T* x, const T* g, float eps, int64_t n, int64_t d, T* y, float* rstd,
                      cudaStream_t stream);

// y only, from x and a saved rstd (recompute in backward).
template <typename T>
void rms_norm_apply(const T* x, const T* g, const float* rstd, int64_t n, int64_t d, T* y,
                    cudaStream_t stream);

// Bytes of workspace rms_norm_backward needs for (n, d).
size_t rms_norm_backward_workspace_bytes(int64_t n, int64_t d);

// dx = rstd·(g∘dy − x·rstd²·mean(g∘dy∘x)) (+ add, when given: the residual branch's
// gradient, added in fp32 before dx is rounded to T) (written); dg += Σ_rows dy∘x·rstd
// (accumulated). Throws std::invalid_argument when ws_bytes <
// rms_norm_backward_workspace_bytes(n, d).
template <typename T>
void rms_norm_backward(const T* dy, const T* x, const T* g, const float* rstd, int64_t n, int64_t d,
                       T* dx, float* dg, void* ws, size_t ws_bytes, cudaStream_t stream, const T* add = nullptr);

}  // namespace mok::cuda
