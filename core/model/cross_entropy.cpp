#include "core/model/cross_entropy.h"

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

CrossEntropySum CrossEntropy::forward(Tensor logits, const int32_t* targets, bool keep) {
  CrossEntropySum s = ExecContext::current().ops().cross_entropy(logits, targets, keep);
  if (keep) {
    grad_ = std::move(logits);
    count_ = s.count;
  }
  return s;
}

Tensor CrossEntropy::backward(real scale) {
  Tensor d = std::move(grad_);
  const real f = count_ ? scale / static_cast<real>(count_) : real(0);
  const ExecContext& cx = ExecContext::current();
  Tensor out = cx.empty(d.shape(), d.dtype());
  cx.ops().scale(d, f, out);
  return out;
}

MOK_NN_END
