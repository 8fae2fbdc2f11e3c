#include "core/model/batched_inference_session.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

BatchedInferenceSession::BatchedInferenceSession(LanguageModel& model, int batch, int max_len)
    : model_(model), batch_(batch), max_len_(max_len > 0 ? max_len : model.options().max_seq_len) {
  if (batch < 1) throw std::invalid_argument("BatchedInferenceSession: batch must be >= 1");
  cache_.reserve(batch);
  for (int b = 0; b < batch; ++b) cache_.push_back(model.make_kv_cache(max_len_));
}

std::vector<real> BatchedInferenceSession::feed(const int32_t* tokens, int n) {
  if (n < 1) throw std::invalid_argument("BatchedInferenceSession: nothing to feed");
  if (position_ + n > max_len_)
    throw std::length_error("BatchedInferenceSession: the caches hold " + std::to_string(max_len_) +
                            " positions; " + std::to_string(position_ + n) +
                            " needed (reset and prefill a shorter context)");
  const std::vector<int> pos0(batch_, position_);
  Tensor logits = model_.forward_cached_batch(tokens, batch_, n, pos0, cache_);  // (batch·n, vocab)
  position_ += n;
  const int64_t vocab = logits.dim(1);
  // Each sequence's last row, on the host in `real` (a device's logits may be bf16).
  const ExecContext& cx = ExecContext::current();
  if (logits.dtype() != kRealDType) {
    Tensor wide = cx.empty(logits.shape(), kRealDType);
    cx.ops().convert(logits, wide);
    logits = std::move(wide);
  }
  std::vector<real> all(static_cast<size_t>(logits.numel()));
  logits.copy_to_host(all.data(), logits.bytes());
  std::vector<real> out(static_cast<size_t>(batch_ * vocab));
  for (int b = 0; b < batch_; ++b) {
    const real* last = all.data() + (static_cast<int64_t>(b) * n + n - 1) * vocab;
    std::copy(last, last + vocab, out.begin() + b * vocab);
  }
  return out;
}

std::vector<real> BatchedInferenceSession::prefill(const std::vector<int32_t>& prompts, int n) {
  if (n < 1 || static_cast<int64_t>(prompts.size()) != static_cast<int64_t>(batch_) * n)
    throw std::invalid_argument("BatchedInferenceSession: prefill needs batch · n tokens (" + std::to_string(batch_) +
                                " prompts of " + std::to_string(n) + "), got " + std::to_string(prompts.size()));
  position_ = 0;
  return feed(prompts.data(), n);
}

std::vector<real> BatchedInferenceSession::decode(const std::vector<int32_t>& tokens) {
  if (static_cast<int>(tokens.size()) != batch_)
    throw std::invalid_argument("BatchedInferenceSession: decode needs one token per sequence");
  return feed(tokens.data(), 1);
}

MOK_NN_END
