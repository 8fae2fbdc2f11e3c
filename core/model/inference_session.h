#pragma once
// InferenceSession: incremental decoding of one sequence with a KV cache.
//   prefill(prompt) → logits (vocab) for the token after the prompt
//   decode(token)   → logits (vocab) for the token after `token`
// Keys and values of every earlier position stay in the cache, so each decode step runs the
// model on one new position only. The logits equal those of a full-sequence forward (up to
// float rounding). MoE layers run dropless. Sampling (temperature, top-k, top-p) lives with
// the caller. The cache holds max_len positions; when it is full, start again with reset()
// and prefill the most recent tokens.

#include <cstdint>
#include <vector>

#include "core/model/attention.h"
#include "core/model/language_model.h"

MOK_NN_BEGIN

class InferenceSession {
 public:
  // max_len ≤ the model's max_seq_len; 0 → max_seq_len.
  explicit InferenceSession(LanguageModel& model, int max_len = 0);

  std::vector<real> prefill(const std::vector<int32_t>& prompt);
  std::vector<real> decode(int32_t token);
  void reset() { position_ = 0; }
  int position() const { return position_; }  // tokens in the cache
  int max_len() const { return max_len_; }

 private:
  std::vector<real> feed(const int32_t* tokens, int n);
  LanguageModel& model_;
  int max_len_;
  int position_ = 0;
  std::vector<LayerKvCache> cache_;
};

MOK_NN_END
