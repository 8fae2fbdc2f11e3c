#pragma once
// CompactFactor: the P (tokens, r) factor of a low-rank saved input, kept either in `real`
// or as an 8-/4-bit QuantizedMatrix with per-row scales.

#include <cstdint>

#include "core/kittens/quantized_matrix.h"
#include "core/tensor/tensor.h"

MOK_NN_BEGIN

class CompactFactor {
 public:
  // Takes p (rows, cols). bits = 0: keeps p itself (allocate it under the saved tag);
  // bits = 8 or 4: keeps a quantized copy under `tag` and frees p.
  // Returns Σ (p − p̃)² (0 when kept as is).
  double keep(Tensor&& p, int bits, const QuantizeOptions& rounding, const MemTag& tag);
  // P̃ (rows, cols): the kept tensor itself, or its dequantized copy written into `scratch`.
  const Tensor& dense(Tensor& scratch) const;
  int64_t rows() const { return quantized_.empty() ? (dense_.empty() ? 0 : dense_.dim(0)) : quantized_.rows(); }
  int64_t held_bytes() const { return dense_.bytes() + quantized_.held_bytes(); }
  void reset() { dense_.reset(); quantized_.reset(); }

 private:
  Tensor dense_;
  QuantizedMatrix quantized_;
};

MOK_NN_END
