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
  const double err = quantized_.quantize(p.data(), p.dim(0), p.dim(1), q, tag);
  p.reset();
  return err;
}

const real* CompactFactor::dense(Tensor& scratch) const {
  if (quantized_.empty()) return dense_.data();
  scratch = Tensor({quantized_.rows(), quantized_.cols()});
  quantized_.dequantize(scratch.data());
  return scratch.data();
}

MOK_NN_END
