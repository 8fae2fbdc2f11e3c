#pragma once
// Cross-entropy over the logits with a fused log-softmax; mean over scored targets.
//   logits (n, vocab), targets (n, host; negative = not scored) → loss (nats, host)
// Keeps softmax − onehot in the logits' own buffer ("ce.grad", layer −1, n·vocab): the
// gradient is complete at forward, backward only scales it.

#include <cstdint>

#include "core/backend/cross_entropy_kernel.h"
#include "core/tensor/tensor.h"

MOK_NN_BEGIN

class CrossEntropy {
 public:
  static MemTag saved_tag() { return MemTag{MemCategory::saved_activations, -1, "ce.grad"}; }
  // Consumes the logits. Returns the summed loss and the count of scored targets.
  CrossEntropySum forward(Tensor logits, const int32_t* targets, bool keep);
  // d(scale · mean loss)/dlogits (n, vocab). Frees what forward kept.
  Tensor backward(real scale);

 private:
  Tensor grad_;  // (n, vocab) softmax − onehot
  int64_t count_ = 0;
};

MOK_NN_END
