#include "core/train/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <vector>

#include "core/util/thread_pool.h"

namespace mok {

int32_t sample_token(std::span<const float> logits, const SamplingOptions& o, CounterRng& rng) {
  const int n = static_cast<int>(logits.size());
  if (n == 0) throw std::invalid_argument("sample_token: empty logits");
  // A NaN sorts nowhere and an infinity makes every probability NaN: the draw would be
  // arbitrary bytes, not text.
  for (const float v : logits) {
    if (!std::isfinite(v)) {
      throw NonFiniteLogits("the model's logits are not finite (NaN or infinity): its weights are damaged or "
                            "drove it out of float range; no token can be sampled");
    }
  }
  if (o.temperature < 0 || !(o.top_p > 0 && o.top_p <= 1) || o.top_k < 0) {
    throw std::invalid_argument("sample_token: temperature must be >= 0, top_p in (0, 1], top_k >= 0");
  }
  if (o.temperature == 0) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const float top = *std::max_element(logits.begin(), logits.end());
  // exp((logit − top) / T) in double: the largest is 1, none overflows.
  auto weight = [&](int32_t id) { return std::exp((static_cast<double>(logits[id]) - top) / o.temperature); };
  thread_local std::vector<double> p;  // a decode step samples hundreds of rows: no allocation per row
  if (o.top_k == 0 && o.top_p >= 1.0) {
    // Nothing filtered: every id keeps its weight, and a draw may walk them in id order, O(vocab)
    // with no sort. An id whose weight underflowed to 0 is never drawn.
    p.resize(n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += p[i] = weight(i);
    double u = rng.uniform() * sum;
    int last = 0;
    for (int i = 0; i < n; ++i) {
      if (p[i] == 0) continue;
      last = i;
      u -= p[i];
      if (u <= 0) return i;
    }
    return last;  // u left a rounding's worth: the last id with weight
  }
  // Filtered: ids by decreasing logit (ties: lower id first), so a filter keeps a prefix. A
  // key is the logit's order-reversed bits above the id, so integer order is that order.
  thread_local std::vector<uint64_t> keys;
  keys.resize(n);
  for (int i = 0; i < n; ++i) {
    const float v = logits[i] == 0.0f ? 0.0f : logits[i];  // −0 ties +0
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    const uint32_t ascending = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
    keys[i] = (static_cast<uint64_t>(~ascending) << 32) | static_cast<uint32_t>(i);
  }
  auto id_at = [&](int i) { return static_cast<int32_t>(keys[i] & 0xffffffffu); };
  int keep = o.top_k > 0 ? std::min(o.top_k, n) : n;
  double sum = 0;
  if (keep < n || o.top_p >= 1.0) {
    // top-k: sort the k candidates, sum their weights in that order.
    if (keep < n) std::nth_element(keys.begin(), keys.begin() + keep, keys.end());
    std::sort(keys.begin(), keys.begin() + keep);
    p.resize(keep);
    for (int i = 0; i < keep; ++i) sum += p[i] = weight(id_at(i));
    if (o.top_p < 1.0) {
      double acc = 0;
      int k = 0;
      while (k < keep) {
        acc += p[k++] / sum;
        if (acc >= o.top_p) break;
      }
      keep = k;
      sum = 0;
      for (int i = 0; i < keep; ++i) sum += p[i];
    }
  } else {
    // top-p over the whole vocabulary: the total weight in id order, then ids sorted only as
    // far as the mass reaches, in doubling blocks (the nucleus is usually a small part).
    double total = 0;
    for (int i = 0; i < n; ++i) total += weight(i);
    p.clear();
    double acc = 0;
    int sorted = 0;
    keep = 0;
    while (keep == 0) {
      const int next = std::min(n, std::max(64, 2 * sorted));
      if (next < n) std::nth_element(keys.begin() + sorted, keys.begin() + next, keys.end());
      std::sort(keys.begin() + sorted, keys.begin() + next);
      for (int i = sorted; i < next; ++i) {
        p.push_back(weight(id_at(i)));
        acc += p.back() / total;
        if (acc >= o.top_p || i + 1 == n) {
          keep = i + 1;
          break;
        }
      }
      sorted = next;
    }
    for (int i = 0; i < keep; ++i) sum += p[i];
  }
  double u = rng.uniform() * sum;
  for (int i = 0; i < keep; ++i) {
    u -= p[i];
    if (u <= 0) return id_at(i);
  }
  return id_at(keep - 1);
}

std::vector<int32_t> sample_tokens(std::span<const float> logits, int vocab, const SamplingOptions& options,
                                   std::vector<CounterRng>& rngs) {
  const int64_t rows = static_cast<int64_t>(rngs.size());
  if (vocab <= 0 || static_cast<int64_t>(logits.size()) != rows * vocab) {
    throw std::invalid_argument("sample_tokens: logits must hold rows × vocab values");
  }
  std::vector<int32_t> out(rows);
  // A pool's task must not throw: each chunk keeps its first error, rethrown in chunk order.
  constexpr int64_t kRowsPerChunk = 16;
  std::vector<std::exception_ptr> errors((rows + kRowsPerChunk - 1) / kRowsPerChunk);
  parallel_for(rows, kRowsPerChunk, [&](int64_t begin, int64_t end) {
    try {
      for (int64_t b = begin; b < end; ++b) out[b] = sample_token(logits.subspan(b * vocab, vocab), options, rngs[b]);
    } catch (...) {
      errors[begin / kRowsPerChunk] = std::current_exception();
    }
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace mok
