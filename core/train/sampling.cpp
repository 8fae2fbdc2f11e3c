#include "core/train/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

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
  // Ids by decreasing logit (ties: lower id first), so filtering is a prefix.
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  int keep = o.top_k > 0 ? std::min(o.top_k, n) : n;
  std::vector<double> p(keep);
  const double top = logits[ids[0]];
  double sum = 0;
  for (int i = 0; i < keep; ++i) sum += p[i] = std::exp((logits[ids[i]] - top) / o.temperature);
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
  double u = rng.uniform() * sum;
  for (int i = 0; i < keep; ++i) {
    u -= p[i];
    if (u <= 0) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace mok
