#pragma once
// BatchedInferenceSession: incremental decoding of B sequences at once, each with its own
// KV cache, all at the same position.
//   prefill(prompts (B, n))  → logits (B, vocab) for the token after each prompt
//   decode(tokens (B))       → logits (B, vocab) for the token after each given token
// Attention runs per sequence over its own cache; every other layer runs over the B rows of
// a step together (LanguageModel::forward_cached_batch), so an MoE layer routes and
// dispatches B rows per decode step (B·n in prefill). Sequence b's logits equal those of an
// InferenceSession fed the same tokens, up to float rounding. With an expert-parallel
// dispatcher installed, prefill and decode are collectives.

#include <cstdint>
#include <vector>

#include "core/model/attention.h"
#include "core/model/language_model.h"

MOK_NN_BEGIN

class BatchedInferenceSession {
 public:
  // max_len ≤ the model's max_seq_len; 0 → max_seq_len.
  BatchedInferenceSession(LanguageModel& model, int batch, int max_len = 0);

  // prompts: (batch, n) row-major, every prompt n tokens. Restarts every cache.
  std::vector<real> prefill(const std::vector<int32_t>& prompts, int n);
  // tokens: (batch) one new token per sequence.
  std::vector<real> decode(const std::vector<int32_t>& tokens);
  void reset() { position_ = 0; }
  int batch() const { return batch_; }
  int position() const { return position_; }  // tokens in each cache
  int max_len() const { return max_len_; }

 private:
  std::vector<real> feed(const int32_t* tokens, int n);
  LanguageModel& model_;
  int batch_;
  int max_len_;
  int position_ = 0;
  std::vector<std::vector<LayerKvCache>> cache_;  // [sequence][layer]
};

MOK_NN_END
