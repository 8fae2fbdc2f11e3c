#include "core/kittens/compact_factor.h"

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

void CompactFactor::keep(Tensor&& p, int bits, const QuantizeOptions& rounding, const MemTag& tag) {
  reset();
  if (bits == 0) {
    dense_ = std::move(p);
    return;
  }
  QuantizeOptions q = rounding;
  q.bits = bits;
  quantized_.quantize(p, q, tag, true);
  p.reset();
}

const Tensor& CompactFactor::dense(Tensor& scratch, DType dtype) const {
  const ExecContext& cx = ExecContext::current();
  if (quantized_.empty()) {
    if (dense_.dtype() == dtype) return dense_;
    scratch = cx.empty(dense_.shape(), dtype);
    cx.ops().convert(dense_, scratch);
    return scratch;
  }
  scratch = cx.empty({quantized_.rows(), quantized_.cols()}, dtype);
  quantized_.dequantize(scratch);
  return scratch;
}

MOK_NN_END
