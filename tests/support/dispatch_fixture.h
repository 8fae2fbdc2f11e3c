#pragma once
// What the expert-parallel dispatcher tests share: a bank of SwiGLU experts with fixed
// seeds, token rows drawn from a counter RNG (a function of the global token index, so every
// rank can draw its own shard), an expert's weight gradients as one vector, and the two
// comparisons the tests make (relative difference, bitwise equality).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/model/expert_dispatcher.h"
#include "core/model/swiglu_mlp.h"
#include "core/util/counter_rng.h"

namespace mok::test {

// `experts` SwiGLU experts (d, f), expert e seeded 100 + e, stacked (so the LocalDispatcher
// can run them) with a SwiGluMlp view per expert (what the per-expert dispatchers run).
inline ExpertBank make_expert_bank(int experts, int64_t d, int64_t f) {
  std::vector<GroupedSwiGlu::ExpertSpec> specs;
  for (int e = 0; e < experts; ++e) specs.push_back({"moe.expert" + std::to_string(e), static_cast<uint64_t>(100 + e)});
  return make_stacked_expert_bank(specs, {}, d, f, 0.3, 0.3, 0, "moe.expert");
}

// Rows t0 … t1 − 1 of the global (tokens, d) matrix of normal values of `stream`.
inline Tensor token_rows(uint64_t stream, int64_t t0, int64_t t1, int64_t d) {
  Tensor x({t1 - t0, d});
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t j = 0; j < d; ++j)
      x[(t - t0) * d + j] = static_cast<real>(counter_normal(11, stream, t * d + j));
  return x;
}

// The expert's up then down weight gradients.
inline std::vector<real> expert_grads(SwiGluMlp& m) {
  std::vector<real> g(m.up().weight().grad.span().begin(), m.up().weight().grad.span().end());
  g.insert(g.end(), m.down().weight().grad.span().begin(), m.down().weight().grad.span().end());
  return g;
}

// max |a − b| / max |b| (1e30 when the sizes differ).
inline double rel_diff(const std::vector<real>& a, const std::vector<real>& b) {
  if (a.size() != b.size()) return 1e30;
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return den > 0 ? num / den : num;
}

inline bool same_bits(const std::vector<real>& a, const std::vector<real>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(real)) == 0;
}

}  // namespace mok::test
