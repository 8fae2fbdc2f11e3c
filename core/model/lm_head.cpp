#include "core/model/lm_head.h"

#include "core/backend/exec_context.h"

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
  const ExecContext& cx = ExecContext::current();
  const int64_t n = x.dim(0);
  Tensor logits = cx.activation({n, vocab_}, std::move(out_tag));
  cx.ops().gemm(false, true, n, vocab_, d_, 1.0, x, d_, tied_->compute(), d_, 0.0, logits, vocab_);  // x·Eᵀ
  if (keep) {
    if (!saved_) saved_ = policy_ ? policy_->make(-1, "head.input") : make_exact_saved_linear_input();
    saved_->save(x, MemTag{MemCategory::saved_activations, -1, "head.input"});
  }
  return logits;
}

Tensor LmHead::backward(const Tensor& dlogits) {
  if (untied_) return untied_->backward(dlogits);
  const ExecContext& cx = ExecContext::current();
  const int64_t n = dlogits.dim(0);
  Tensor dx = cx.activation({n, d_});
  cx.ops().gemm(false, false, n, d_, vocab_, 1.0, dlogits, vocab_, tied_->compute(), d_, 0.0, dx, d_);  // dlogits·E
  // dE (vocab, d) += (xᵀ·dlogits)ᵀ: the policy forms (d, vocab); add it transposed.
  Tensor dw = cx.zeros({d_, vocab_}, kRealDType);
  saved_->accumulate_weight_grad(dlogits, dw, real(1));
  cx.ops().add_transposed_(tied_->grad, dw);
  return dx;
}

MOK_NN_END
