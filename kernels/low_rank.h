#pragma once
// The low-rank kitten keepers' kernels (sketch, rsvd, subspace; core/kittens/): Gaussian test
// matrices from the counter RNG, orthonormal columns by CholeskyQR2, and the error sums of a
// save. All f32 in, sums in double, fixed reduction orders (no atomics): bitwise repeatable.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mok::cuda {

// out[i] = float(sd · counter_normal(seed, stream_id, i)) for i < count: the CPU's values
// (core/kittens/gaussian_sketch.h) with the same double arithmetic.
void gaussian_fill(float* out, int64_t count, double sd, uint64_t seed, uint64_t stream_id, cudaStream_t stream);

// y (rows, cols) row-major, rows ≥ cols, replaced by Q with orthonormal nonzero columns spanning
// range(y) to rounding: core/backend/cholesky_qr.h's CholeskyQR2 (its host twin), with the
// Gram partials over blocks of rows in parallel, the Cholesky and R⁻¹ in one thread block.
size_t orthonormalize_workspace_bytes(int64_t rows, int64_t cols);
void orthonormalize_columns(float* y, int64_t rows, int64_t cols, void* workspace, cudaStream_t stream);

// Bytes of workspace the error sums need.
size_t error_terms_workspace_bytes();
// terms (2 doubles) = [max(0, Σ x² − Σ kept²) + (extra ? extra[0] : 0), Σ x²].
void projection_error_terms(const float* x, int64_t x_count, const float* kept, int64_t kept_count,
                            const double* extra, double* terms, void* workspace, cudaStream_t stream);
// terms = [Σ (x[i·stride, c] − x_hat[i, c])², Σ x[i·stride, c]²] over i < rows, c < cols.
void sampled_error_terms(const float* x, int64_t stride, const float* x_hat, int64_t rows, int64_t cols,
                         double* terms, void* workspace, cudaStream_t stream);

}  // namespace mok::cuda
