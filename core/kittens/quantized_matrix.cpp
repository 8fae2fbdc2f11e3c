#include "core/kittens/quantized_matrix.h"

#include <stdexcept>
#include <string>

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

int64_t QuantizedMatrix::bytes_for(int64_t rows, int64_t cols, int bits) {
  return rows * row_bytes(cols, bits) + rows * static_cast<int64_t>(sizeof(float));
}

void QuantizedMatrix::reset() {
  codes_.reset();
  scales_.reset();
  error_terms_.reset();
  rows_ = cols_ = 0;
}

float QuantizedMatrix::scale(int64_t row) const {
  float s = 0.0f;
  scales_.view(row, {1}).copy_to_host(&s, sizeof(float));
  return s;
}

void QuantizedMatrix::quantize(const Tensor& x, const QuantizeOptions& options, const MemTag& tag,
                               bool measure_error) {
  if (options.bits != 8 && options.bits != 4)
    throw std::invalid_argument("QuantizedMatrix: bits must be 8 or 4, got " + std::to_string(options.bits));
  if (x.rank() < 1) throw std::invalid_argument("QuantizedMatrix: scalar tensor");
  reset();
  cols_ = x.dim(-1);
  rows_ = cols_ ? x.numel() / cols_ : 0;
  bits_ = options.bits;
  const ExecContext& cx = ExecContext::current();
  if (rows_ == 0) {  // nothing kept, nothing lost: both sums are 0
    if (measure_error) error_terms_ = cx.zeros({2}, DType::f64);
    return;
  }
  codes_ = cx.empty({rows_, row_bytes(cols_, bits_)}, DType::u8, tag);
  scales_ = cx.empty({rows_}, DType::f32, tag);
  if (measure_error) error_terms_ = cx.empty({2}, DType::f64);
  cx.ops().quantize_rows(x, options, codes_, scales_, measure_error ? &error_terms_ : nullptr);
}

void QuantizedMatrix::dequantize(Tensor& out) const {
  if (out.numel() != rows_ * cols_)
    throw std::invalid_argument("QuantizedMatrix: dequantize into " + out.shape_string() + ", but the copy is (" +
                                std::to_string(rows_) + ", " + std::to_string(cols_) + ")");
  if (rows_ == 0) return;
  ExecContext::current().ops().dequantize_rows(codes_, scales_, bits_, out);
}

Tensor QuantizedMatrix::dequantized() const {
  Tensor out = ExecContext::current().activation({rows_, cols_});
  dequantize(out);
  return out;
}

std::array<double, 2> QuantizedMatrix::read_error_terms(const Tensor& terms) {
  std::array<double, 2> v{0.0, 0.0};
  if (!terms.empty()) terms.copy_to_host(v.data(), sizeof(v));
  return v;
}

MOK_NN_END
