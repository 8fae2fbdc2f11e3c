#include "core/kittens/compact_factor.h"

MOK_NN_BEGIN

double CompactFactor::keep(Tensor&& p, int bits, const QuantizeOptions& rounding, const MemTag& tag) {
  reset();
  if (bits == 0) {
    dense_ = std::move(p);
    return 0.0;
  }
  QuantizeOptions q = rounding;
  q.bits = bits;
  quantized_.quantize(p, q, tag, true);
  p.reset();
  return QuantizedMatrix::read_error_terms(quantized_.error_terms())[0];
}

const Tensor& CompactFactor::dense(Tensor& scratch) const {
  if (quantized_.empty()) return dense_;
  scratch = quantized_.dequantized();
  return scratch;
}

MOK_NN_END
