#include "core/model/inference_session.h"

#include <stdexcept>
#include <string>

MOK_NN_BEGIN

InferenceSession::InferenceSession(LanguageModel& model, int max_len)
    : model_(model), max_len_(max_len > 0 ? max_len : model.options().max_seq_len),
      cache_(model.make_kv_cache(max_len_)) {}

std::vector<real> InferenceSession::feed(const int32_t* tokens, int n) {
  if (n < 1) throw std::invalid_argument("InferenceSession: nothing to feed");
  if (position_ + n > max_len_)
    throw std::length_error("InferenceSession: the cache holds " + std::to_string(max_len_) +
                            " positions; " + std::to_string(position_ + n) + " needed (reset and prefill a shorter context)");
  Tensor logits = model_.forward_cached(tokens, n, position_, cache_);
  position_ += n;
  const int64_t vocab = logits.dim(1);
  const real* last = logits.data() + (n - 1) * vocab;
  return std::vector<real>(last, last + vocab);
}

std::vector<real> InferenceSession::prefill(const std::vector<int32_t>& prompt) {
  position_ = 0;
  return feed(prompt.data(), static_cast<int>(prompt.size()));
}

std::vector<real> InferenceSession::decode(int32_t token) { return feed(&token, 1); }

MOK_NN_END
