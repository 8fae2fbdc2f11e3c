#pragma once
// QuantizedMatrix: an 8- or 4-bit copy of a (rows, cols) matrix with one absmax scale per
// row. Codes are signed integers q ∈ [−qmax, qmax] (qmax = 127 for 8 bits, 7 for 4 bits);
// the value restored is q · scale with scale = absmax(row) / qmax, stored as float32.
//
// Rounding: nearest (|x − x̃| ≤ scale/2) or stochastic (|x − x̃| < scale, E[x̃] = x; the
// random numbers are counter-based on (seed, stream, element index), so thread-count
// independent).
//
// Held bytes = rows · ceil(cols · bits / 8) + 4 · rows, all counted under the given MemTag.

#include <cstdint>

#include "core/tensor/tensor.h"

MOK_NN_BEGIN

struct QuantizeOptions {
  int bits = 8;              // 8 or 4
  bool stochastic = false;   // stochastic rounding instead of nearest
  uint64_t seed = 0;         // stochastic rounding only
  uint64_t stream = 0;
};

class QuantizedMatrix {
 public:
  QuantizedMatrix() = default;
  QuantizedMatrix(QuantizedMatrix&&) noexcept = default;
  QuantizedMatrix& operator=(QuantizedMatrix&&) noexcept = default;

  // Quantizes x (rows, cols). Returns Σ (x − x̃)² over all elements (for error metrics),
  // summed per row then in row order, so independent of the thread count.
  double quantize(const real* x, int64_t rows, int64_t cols, const QuantizeOptions& options,
                  const MemTag& tag);
  // out (rows, cols) = x̃.
  void dequantize(real* out) const;
  // Rows [r0, r1) of x̃ into out ((r1 − r0), cols).
  void dequantize_rows(int64_t r0, int64_t r1, real* out) const;

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int bits() const { return bits_; }
  bool empty() const { return rows_ == 0; }
  float scale(int64_t row) const;
  int64_t held_bytes() const { return codes_.size() + scales_.size(); }
  void reset();

  // The formula held_bytes() follows.
  static int64_t bytes_for(int64_t rows, int64_t cols, int bits);
  static int64_t row_bytes(int64_t cols, int bits) { return (cols * bits + 7) / 8; }

 private:
  ByteBuffer codes_;   // rows · row_bytes(cols, bits)
  ByteBuffer scales_;  // rows float32
  int64_t rows_ = 0, cols_ = 0;
  int bits_ = 8;
};

MOK_NN_END
