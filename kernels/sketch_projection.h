#pragma once
// The Gaussian sketch of kitten activations on the GPU, with the sketch matrix regenerated
// inside the kernels from a counter-based RNG instead of being stored or read:
//   Q (r, d):  Q[i][j] = N(0,1)(seed, stream, i·d + j) / sqrt(r)   (so E[QᵀQ] = I)
//   forward:   P (n, r) = X (n, d) · Qᵀ            — what is kept instead of X
//   backward:  G (r, m) = Pᵀ · dY (n, m)           — any GEMM (cuBLAS)
//              dW (d, m) += Qᵀ · G                 — Q regenerated again
// The normal variates are the ones core/util/counter_rng.h's counter_normal gives on the
// CPU (same mix and Box-Muller), so CPU and GPU sketches agree to rounding.

#include <cstdint>

#include <cuda_runtime.h>

namespace mok::cuda {

// Q (r, d) into a workspace, regenerated per use (≈ r·d·4 bytes; transient, not kept
// between forward and backward). Then any GEMM (cuBLAS) forms P = X·Qᵀ and dW += Qᵀ·G.
void sketch_generate(float* q, int r, int d, uint64_t seed, uint64_t stream_id, cudaStream_t stream = nullptr);

// Fused variants: Q tiles generated inside the GEMM tiles, never in memory. Every row block
// regenerates its Q tiles, so these are slower than generate + cuBLAS on large n
// (docs/benchmarks.md); kept as the reference point for that measurement.
void sketch_project(const float* x, float* p, int n, int d, int r, uint64_t seed, uint64_t stream_id,
                    cudaStream_t stream = nullptr);
void sketch_expand_weight_grad(const float* g, float* dw, int d, int m, int r, uint64_t seed,
                               uint64_t stream_id, cudaStream_t stream = nullptr);

}  // namespace mok::cuda
