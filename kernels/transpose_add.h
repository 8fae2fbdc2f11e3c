#pragma once
// y (rows, cols) += xᵀ with x stored (cols, rows), fp32 (CUDA): the tied LM head adds the
// (d, vocab) weight gradient its saved input forms into the embedding's (vocab, d) gradient.
// Each element of y is written by one thread: deterministic.

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

void transpose_add(float* y, const float* x, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace mok::cuda
