#pragma once
// What the expert-parallel dispatcher tests share: a bank of SwiGLU experts with fixed
// seeds, a top-3 routing and token rows drawn from a counter RNG (a function of the global token index, so every
// rank can draw its own shard), an expert's weight gradients as one vector, and the two
// comparisons the tests make (relative difference, bitwise equality).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/model/expert_dispatcher.h"
#include "core/backend/exec_context.h"
#include "core/routing/routing_decision.h"
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

// Tokens t0 … t1 − 1 of the global batch routed to 3 distinct experts of `experts` each
// (expert of slot s drawn from counter_bits(seed, expert_stream + s, t), clashes moved to the
// next expert), gates descending and summing to 1 (a from counter_uniform(seed, 3, t) in
// [0.4, 0.7], then 60 % of the rest, then the rest); pair (t, s) is dropped (−1) where
// dropped(t, s). A function of the global token index, so every rank can draw its own shard.
template <class Dropped>
RoutingDecision top3_routing(int experts, int64_t t0, int64_t t1, uint64_t seed, uint64_t expert_stream,
                             Dropped dropped) {
  constexpr int k = 3;
  std::vector<int32_t> ex;
  std::vector<real> gt;
  for (int64_t t = t0; t < t1; ++t) {
    int chosen[k];
    for (int s = 0; s < k; ++s) {
      int e = static_cast<int>(counter_bits(seed, expert_stream + s, t) % experts);
      for (bool clash = true; clash;) {
        clash = false;
        for (int q = 0; q < s; ++q) clash |= chosen[q] == e;
        if (clash) e = (e + 1) % experts;
      }
      chosen[s] = e;
    }
    const double a = 0.4 + 0.3 * counter_uniform(seed, 3, t), b = (1.0 - a) * 0.6;
    const double g[k] = {a, b, 1.0 - a - b};
    for (int s = 0; s < k; ++s) {
      ex.push_back(dropped(t, s) ? -1 : chosen[s]);
      gt.push_back(static_cast<real>(g[s]));
    }
  }
  return routing_decision_from(ex, gt, k, experts);
}

// A host i32 tensor of `v`, and an i32 tensor's values.
inline Tensor i32_tensor(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i32, cpu_allocator());
  std::copy(v.begin(), v.end(), t.data_as<int32_t>());
  return t;
}
inline std::vector<int32_t> i32_values(const Tensor& t) {
  return std::vector<int32_t>(t.data_as<int32_t>(), t.data_as<int32_t>() + t.numel());
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
