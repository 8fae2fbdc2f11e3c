#pragma once
// Row-wise low-bit codes on the GPU (kitten activations), the format and rounding of
// core/backend/row_quantize.h: one float32 absmax scale per row, 8-bit codes or 4-bit codes
// two to a byte, nearest (ties to even) or counter-based stochastic rounding.
//   x, out: (rows, cols) T (float or bf16)   codes: rows · ceil(cols·bits/8) bytes
// Codes and scales equal the CPU's bit for bit on the same input values (each code is the
// CPU's rounding of the double quotient x/scale). The error sums are within 1e-6 of the
// CPU's, relative: float terms summed per 8 values, double across them.

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

struct RowQuantizeParams {
  int bits = 8;
  bool stochastic = false;
  uint64_t seed = 0, stream = 0;
};

// Bytes of workspace quantize_rows needs to measure the error (0 when it does not).
size_t quantize_rows_workspace_bytes(int64_t rows, bool measure);

// codes, scales written. With terms (2 doubles on the device): [Σ (x − x̃)², Σ x²], each
// summed per row, then over rows in a fixed order (bitwise repeatable, no atomics).
template <typename T>
void quantize_rows(const T* x, int64_t rows, int64_t cols, const RowQuantizeParams& params, uint8_t* codes,
                   float* scales, double* terms, void* workspace, cudaStream_t stream);

template <typename T>
void dequantize_rows(const uint8_t* codes, const float* scales, int64_t rows, int64_t cols, int bits, T* out,
                     cudaStream_t stream);

}  // namespace mok::cuda
