#include "core/model/expert_dispatcher.h"

#include <cstring>
#include <stdexcept>

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

namespace {

std::vector<std::vector<int64_t>> pairs_by_expert(const RoutingDecision& r) {
  std::vector<std::vector<int64_t>> pairs(r.experts);
  for (int64_t p = 0; p < r.tokens * r.k; ++p)
    if (r.expert[p] >= 0) pairs[r.expert[p]].push_back(p);
  return pairs;
}

// rows (m, d) of src picked by pairs/k (token index of each pair)
Tensor gather_rows(const Tensor& src, const std::vector<int64_t>& pairs, int k, int64_t d) {
  Tensor out = Tensor::uninitialized({static_cast<int64_t>(pairs.size()), d});
  parallel_for(static_cast<int64_t>(pairs.size()), 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(out.data() + i * d, src.data() + (pairs[i] / k) * d, d * sizeof(real));
  });
  return out;
}

}  // namespace

void combine_pairs(const Tensor& per_pair, const std::vector<int32_t>& expert, const real* scale,
                   int64_t n, int k, int64_t d, Tensor& dst) {
  parallel_for(n, 32, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      real* y = dst.data() + t * d;
      for (int64_t j = 0; j < d; ++j) y[j] = 0;
      for (int s = 0; s < k; ++s) {
        const int64_t p = t * k + s;
        if (expert[p] < 0) continue;
        const real g = scale ? scale[p] : real(1);
        const real* src = per_pair.data() + p * d;
        for (int64_t j = 0; j < d; ++j) y[j] += g * src[j];
      }
    }
  });
}


Tensor LocalDispatcher::forward(const Tensor& x, const RoutingDecision& r, ExpertBank& bank, bool keep) {
  const int64_t n = x.dim(0), d = x.dim(1);
  auto pairs = pairs_by_expert(r);
  // (n·k, d) expert output per pair, ungated; rows of dropped pairs stay unwritten and unread
  Tensor per_pair = Tensor::uninitialized({n * r.k, d});
  for (int e = 0; e < r.experts; ++e) {
    if (pairs[e].empty()) continue;
    if (!bank.experts[e]) throw std::logic_error("LocalDispatcher: expert " + std::to_string(e) + " is not here");
    Tensor xe = gather_rows(x, pairs[e], r.k, d);
    Tensor ye = bank.experts[e]->forward(xe, keep);
    const auto& pe = pairs[e];
    parallel_for(static_cast<int64_t>(pe.size()), 64, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        std::memcpy(per_pair.data() + pe[i] * d, ye.data() + i * d, d * sizeof(real));
    });
  }
  Tensor y = Tensor::uninitialized({n, d});
  combine_pairs(per_pair, r.expert, r.gate.data(), n, r.k, d, y);
  if (keep) {
    pairs_ = std::move(pairs);
    gate_ = r.gate;
    n_ = n;
    k_ = r.k;
  }
  return y;
}

Tensor LocalDispatcher::backward(const Tensor& dy, ExpertBank& bank, std::vector<real>& dgate) {
  const int64_t n = n_, d = dy.dim(1);
  const int k = k_;
  dgate.assign(n * k, real(0));
  Tensor per_pair_dx = Tensor::uninitialized({n * k, d});  // read only where expert_of ≥ 0
  std::vector<int32_t> expert_of(n * k, -1);
  for (int e = 0; e < static_cast<int>(pairs_.size()); ++e) {
    const auto& pe = pairs_[e];
    if (pe.empty()) continue;
    const int64_t m = static_cast<int64_t>(pe.size());
    Tensor dye = gather_rows(dy, pe, k, d);
    std::vector<real> ge(m), dge(m);
    for (int64_t i = 0; i < m; ++i) ge[i] = gate_[pe[i]];
    Tensor dxe = bank.experts[e]->backward_gated(dye, ge.data(), dge.data());
    for (int64_t i = 0; i < m; ++i) {
      dgate[pe[i]] = dge[i];
      expert_of[pe[i]] = e;
    }
    parallel_for(m, 64, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        std::memcpy(per_pair_dx.data() + pe[i] * d, dxe.data() + i * d, d * sizeof(real));
    });
  }
  Tensor dx = Tensor::uninitialized({n, d});
  combine_pairs(per_pair_dx, expert_of, nullptr, n, k, d, dx);  // gates already applied
  pairs_.clear();
  gate_.clear();
  return dx;
}

MOK_NN_END
