#include "core/model/cross_entropy.h"

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

CrossEntropySum CrossEntropy::forward(Tensor logits, const int32_t* targets, bool keep) {
  const int64_t n = logits.dim(0), vocab = logits.dim(1);
  CrossEntropySum s = cross_entropy_forward(logits.data(), targets, n, vocab, keep);
  if (keep) {
    grad_ = std::move(logits);
    count_ = s.count;
  }
  return s;
}

Tensor CrossEntropy::backward(real scale) {
  Tensor d = std::move(grad_);
  const real f = count_ ? scale / static_cast<real>(count_) : real(0);
  Tensor out = Tensor::uninitialized(d.shape());
  parallel_for(d.numel(), 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = d[i] * f;
  });
  return out;
}

MOK_NN_END
