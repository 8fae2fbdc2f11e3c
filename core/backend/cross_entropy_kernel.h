#pragma once
// Cross-entropy with a fused log-softmax.
//   logits: (n, V); targets: (n), a negative target marks a row that is not scored.

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

struct CrossEntropySum {
  double loss_sum = 0.0;  // Σ over scored rows of −log p(target)  (nats)
  int64_t count = 0;      // scored rows
};

// When write_grad, logits are overwritten with softmax − onehot(target) (zero rows for
// unscored targets): the gradient of loss_sum.
CrossEntropySum cross_entropy_forward(real* logits, const int32_t* targets, int64_t n, int64_t vocab,
                                      bool write_grad);

MOK_NN_END
