#pragma once
// QuantizedMatrix: an 8- or 4-bit copy of a (rows, cols) matrix with one absmax scale per
// row, kept on the matrix's device (the format: core/backend/row_quantize.h). The codes are
// made and restored by the rank's ops (Ops::quantize_rows / dequantize_rows), so the same
// copy is a CPU loop or a CUDA kernel.
//
// Held bytes = rows · ceil(cols · bits / 8) + 4 · rows, all counted under the given MemTag.

#include <array>
#include <cstdint>

#include "core/backend/row_quantize.h"
#include "core/tensor/tensor.h"

MOK_NN_BEGIN

class QuantizedMatrix {
 public:
  QuantizedMatrix() = default;
  QuantizedMatrix(QuantizedMatrix&&) noexcept = default;
  QuantizedMatrix& operator=(QuantizedMatrix&&) noexcept = default;

  // Quantizes x (leading dimensions are rows; the last is cols) with the current context's
  // ops. With measure_error, error_terms() holds [Σ (x − x̃)², Σ x²] afterwards.
  void quantize(const Tensor& x, const QuantizeOptions& options, const MemTag& tag, bool measure_error);
  // out (rows, cols), compute dtype, on the copy's device = x̃.
  void dequantize(Tensor& out) const;
  // x̃ as a new (rows, cols) tensor in the compute dtype (untagged: a workspace).
  Tensor dequantized() const;

  // (2) f64 on the copy's device, or empty when the last quantize measured nothing.
  const Tensor& error_terms() const { return error_terms_; }
  // The same read to the host (waits for the device): {Σ (x − x̃)², Σ x²}.
  static std::array<double, 2> read_error_terms(const Tensor& terms);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int bits() const { return bits_; }
  bool empty() const { return rows_ == 0; }
  float scale(int64_t row) const;  // reads one scale to the host
  int64_t held_bytes() const { return codes_.bytes() + scales_.bytes(); }
  void reset();

  // The formula held_bytes() follows.
  static int64_t bytes_for(int64_t rows, int64_t cols, int bits);
  static int64_t row_bytes(int64_t cols, int bits) { return quantized_row_bytes(cols, bits); }

 private:
  Tensor codes_;        // (rows, row_bytes(cols, bits)) u8
  Tensor scales_;       // (rows) f32
  Tensor error_terms_;  // (2) f64, untagged
  int64_t rows_ = 0, cols_ = 0;
  int bits_ = 8;
};

MOK_NN_END
