#include "core/model/lm_head.h"

#include "core/backend/gemm.h"
#include "core/util/thread_pool.h"

MOK_NN_BEGIN

LmHead::LmHead(const std::string& name, int64_t d, int64_t vocab, Parameter* tied_embedding,
               double init_std, uint64_t seed)
    : d_(d), vocab_(vocab), tied_(tied_embedding) {
  if (!tied_) untied_ = std::make_unique<Linear>(name, d, vocab, init_std, seed, -1, "head.input");
}

void LmHead::set_policy(SavedInputPolicy* policy) {
  policy_ = policy;
  saved_.reset();
  if (untied_) untied_->set_policy(policy);
}

Tensor LmHead::forward(const Tensor& x, bool keep, MemTag out_tag) {
  if (untied_) return untied_->forward(x, keep, std::move(out_tag));
  const int64_t n = x.dim(0);
  Tensor logits = Tensor::uninitialized({n, vocab_}, std::move(out_tag));
  matmul_nt(x.data(), tied_->value.data(), logits.data(), n, d_, vocab_);  // x·Eᵀ
  if (keep) {
    if (!saved_) saved_ = policy_ ? policy_->make(-1, "head.input") : make_exact_saved_linear_input();
    saved_->save(x, MemTag{MemCategory::saved_activations, -1, "head.input"});
  }
  return logits;
}

Tensor LmHead::backward(const Tensor& dlogits) {
  if (untied_) return untied_->backward(dlogits);
  const int64_t n = dlogits.dim(0);
  Tensor dx = Tensor::uninitialized({n, d_});
  matmul(dlogits.data(), tied_->value.data(), dx.data(), n, vocab_, d_);  // dlogits·E
  // dE (vocab, d) += (xᵀ·dlogits)ᵀ: the policy forms (d, vocab); add it transposed.
  Tensor dw({d_, vocab_});
  saved_->accumulate_weight_grad(dlogits, dw, real(1));
  real* g = tied_->grad.data();
  parallel_for(vocab_, 16, [&](int64_t v0, int64_t v1) {
    for (int64_t v = v0; v < v1; ++v)
      for (int64_t j = 0; j < d_; ++j) g[v * d_ + j] += dw[j * vocab_ + v];
  });
  return dx;
}

MOK_NN_END
