#pragma once
// Row-wise low-bit codes, the CPU kernels behind Ops::quantize_rows / dequantize_rows (what
// kitten activations keep, core/kittens/quantized_matrix.h).
//
// A (rows, cols) matrix becomes signed codes q ∈ [−qmax, qmax] (qmax = 127 for 8 bits, 7 for
// 4 bits) and one float32 scale per row, scale = absmax(row) / qmax; x̃ = q · scale.
//   8 bits: one byte per element (two's complement).
//   4 bits: two elements per byte, q + 8 ∈ [1, 15]; element c in the low nibble when c is even.
// Rounding: nearest (ties to even, |x − x̃| ≤ scale/2) or stochastic (floor(x/scale + u),
// |x − x̃| < scale, E[x̃] = x), with u counter-based on (seed, stream, r·cols + c), so the
// codes do not depend on the thread count or the device.

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

struct QuantizeOptions {
  int bits = 8;              // 8 or 4
  bool stochastic = false;   // stochastic rounding instead of nearest
  uint64_t seed = 0;         // stochastic rounding only
  uint64_t stream = 0;
};

inline int quantized_qmax(int bits) { return bits == 8 ? 127 : 7; }
// Bytes of one row's codes.
inline int64_t quantized_row_bytes(int64_t cols, int bits) { return (cols * bits + 7) / 8; }

// Writes codes (rows · quantized_row_bytes) and scales (rows). Returns Σ (x − x̃)², summed
// per row in column order, then over rows in row order (thread-count independent).
double quantize_rows_cpu(const real* x, int64_t rows, int64_t cols, const QuantizeOptions& options,
                         uint8_t* codes, float* scales);
// out (rows, cols) = x̃.
void dequantize_rows_cpu(const uint8_t* codes, const float* scales, int64_t rows, int64_t cols, int bits,
                         real* out);

MOK_NN_END
