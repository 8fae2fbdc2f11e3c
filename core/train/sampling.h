#pragma once
// Next-token sampling from logits: temperature, top-k and top-p (nucleus) filtering, then a
// draw from a counter-based RNG, so a seed fixes the text. Temperature 0 is greedy
// (argmax, lowest id on ties). Unfiltered, a draw walks the ids in id order (O(vocab), no
// sort); filtered, by decreasing logit (ties: lower id first), where the filter keeps a prefix.
// top-p alone compares the running mass with the whole vocabulary's weight summed in id
// order, so only the nucleus is sorted.

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "core/util/counter_rng.h"

namespace mok {

struct SamplingOptions {
  double temperature = 0.8;  // 0 → greedy
  int top_k = 0;             // keep the k most likely ids; 0 → all
  double top_p = 1.0;        // keep the smallest set whose probability reaches p; 1 → all
};

// Logits with a NaN or an infinity: no distribution to sample from.
struct NonFiniteLogits : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// logits: (vocab). Throws std::invalid_argument on bad options or empty logits,
// NonFiniteLogits when a logit is NaN or infinite.
int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, CounterRng& rng);

// One token for each of rows = rngs.size() rows of logits (rows × vocab, row-major), row b
// drawn with rngs[b], over the current thread pool: the same tokens for any thread count. A
// decode step of hundreds of sequences samples while the device waits. Throws as
// sample_token does, for the first bad row.
std::vector<int32_t> sample_tokens(std::span<const float> logits, int vocab, const SamplingOptions& options,
                                   std::vector<CounterRng>& rngs);

}  // namespace mok
