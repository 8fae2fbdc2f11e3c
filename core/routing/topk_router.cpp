#include "core/routing/topk_router.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

TopKRouter::TopKRouter(const std::string& prefix, int64_t d, int experts, int k, double init_std,
                       uint64_t seed, int layer, double aux_coef, double z_coef, double capacity_factor)
    : experts_(experts), k_(k), layer_(layer), aux_coef_(aux_coef), z_coef_(z_coef),
      capacity_factor_(capacity_factor),
      proj_(prefix + ".w_router", d, experts, init_std, seed, layer, "moe.router.input") {
  if (k < 1 || k > experts)
    throw std::invalid_argument("TopKRouter: top_k " + std::to_string(k) + " must be in [1, experts=" +
                                std::to_string(experts) + "]");
}

void TopKRouter::set_locality_loss(std::vector<uint8_t> local, double coef) {
  if (!(coef >= 0.0))
    throw std::invalid_argument("TopKRouter: locality loss coefficient must be ≥ 0");
  if (!local.empty() && static_cast<int>(local.size()) != experts_)
    throw std::invalid_argument("TopKRouter: locality mask names " + std::to_string(local.size()) +
                                " experts, the router has " + std::to_string(experts_));
  loss_local_ = std::move(local);
  locality_coef_ = coef;
}

RoutingDecision TopKRouter::forward(const Tensor& x, bool keep, RouterLosses* losses) {
  const int64_t n = x.dim(0);
  const int E = experts_, k = k_;
  Tensor logits = proj_.forward(x, keep);
  Tensor probs({n, E}, keep ? MemTag{MemCategory::saved_activations, layer_, "moe.router.probs"} : MemTag{});
  Tensor lse({n}, keep ? MemTag{MemCategory::saved_activations, layer_, "moe.router.lse"} : MemTag{});
  RoutingDecision r;
  r.tokens = n;
  r.k = k;
  r.experts = E;
  r.expert.assign(n * k, -1);
  r.gate.assign(n * k, real(0));
  parallel_for(n, 64, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const real* l = logits.data() + t * E;
      real* p = probs.data() + t * E;
      real m = l[0];
      for (int e = 1; e < E; ++e) m = std::max(m, l[e]);
      real s = 0;
      for (int e = 0; e < E; ++e) s += (p[e] = std::exp(l[e] - m));
      for (int e = 0; e < E; ++e) p[e] /= s;
      lse[t] = m + std::log(s);
      // top-k by repeated selection: largest p, ties to the lower index (MoK: with the
      // locality preference when set, core/routing/locality_policy.h)
      int32_t* ch = r.expert.data() + t * k;
      real* g = r.gate.data() + t * k;
      select_top_k(p, E, k, &locality_, ch);
      real chosen_sum = 0;
      for (int slot = 0; slot < k; ++slot) chosen_sum += p[ch[slot]];
      for (int slot = 0; slot < k; ++slot) g[slot] = p[ch[slot]] / chosen_sum;
    }
  });
  // Load, fractions, capacity (sequential: token order decides who is dropped).
  r.load.assign(E, 0);
  for (int64_t i = 0; i < n * k; ++i) r.load[r.expert[i]]++;
  if (keep) {
    choice_ = ByteBuffer(n * k * static_cast<int64_t>(sizeof(int32_t)),
                         MemTag{MemCategory::saved_activations, layer_, "moe.router.choice"});
    std::memcpy(choice_.data(), r.expert.data(), n * k * sizeof(int32_t));
  }
  if (capacity_factor_ > 0) {
    r.capacity = static_cast<int64_t>(std::ceil(capacity_factor_ * static_cast<double>(n) * k / E));
    std::vector<int64_t> used(E, 0);
    for (int64_t i = 0; i < n * k; ++i) {
      int32_t& e = r.expert[i];
      if (used[e] >= r.capacity) {
        e = -1;
        r.dropped++;
      } else {
        used[e]++;
      }
    }
  }
  // Losses
  std::vector<double> f(E, 0.0);
  if (count_reducer_) {
    // Global fractions: Σ_ranks load_e / (Σ_ranks n · k). r.load stays this rank's (metrics).
    std::vector<int64_t> counts(r.load);
    counts.push_back(n);
    count_reducer_(counts.data(), static_cast<int64_t>(counts.size()));
    const double pairs = static_cast<double>(counts[E]) * k;
    for (int e = 0; e < E; ++e) f[e] = pairs > 0 ? static_cast<double>(counts[e]) / pairs : 0.0;
  } else {
    for (int e = 0; e < E; ++e) f[e] = n ? static_cast<double>(r.load[e]) / (static_cast<double>(n) * k) : 0.0;
  }
  if (losses && n > 0) {
    std::vector<double> pmean(E, 0.0);
    for (int64_t t = 0; t < n; ++t)
      for (int e = 0; e < E; ++e) pmean[e] += probs[t * E + e];
    double aux = 0.0;
    for (int e = 0; e < E; ++e) aux += f[e] * pmean[e] / static_cast<double>(n);
    losses->aux = aux_coef_ * E * aux;
    double z = 0.0;
    for (int64_t t = 0; t < n; ++t) z += static_cast<double>(lse[t]) * lse[t];
    losses->z = z_coef_ * z / static_cast<double>(n);
    if (locality_loss_active()) {
      // Probability mass on other ranks' experts, mean over this rank's tokens.
      double remote = 0.0;
      for (int64_t t = 0; t < n; ++t)
        for (int e = 0; e < E; ++e)
          if (!loss_local_[e]) remote += probs[t * E + e];
      losses->locality = locality_coef_ * remote / static_cast<double>(n);
    }
  }
  if (keep) {
    probs_ = std::move(probs);
    lse_ = std::move(lse);
    f_ = std::move(f);
    n_ = n;
  }
  return r;
}

Tensor TopKRouter::backward(const std::vector<real>& dgate, real loss_scale) {
  const int64_t n = n_;
  const int E = experts_, k = k_;
  const auto* ch_all = reinterpret_cast<const int32_t*>(choice_.data());
  Tensor dlogits({n, E});
  const real aux_w = static_cast<real>(aux_coef_ * E / static_cast<double>(n)) * loss_scale;
  const real z_w = static_cast<real>(2.0 * z_coef_ / static_cast<double>(n)) * loss_scale;
  const bool loc = locality_loss_active();
  const real loc_w = static_cast<real>(locality_coef_ / static_cast<double>(n)) * loss_scale;
  parallel_for(n, 64, [&](int64_t t0, int64_t t1) {
    std::vector<real> dp(E);
    for (int64_t t = t0; t < t1; ++t) {
      const real* p = probs_.data() + t * E;
      const int32_t* ch = ch_all + t * k;
      const real* dg = dgate.data() + t * k;
      // aux: dL/dp_e = aux_coef·E·f_e/n
      for (int e = 0; e < E; ++e) dp[e] = aux_w * static_cast<real>(f_[e]);
      // locality: dL/dp_e = locality_coef/n for experts on other ranks
      if (loc)
        for (int e = 0; e < E; ++e)
          if (!loss_local_[e]) dp[e] += loc_w;
      // gates g_s = p_{c_s}/S: dp_{c_s} += (dg_s − Σ_q dg_q·g_q)/S
      real s = 0, dot = 0;
      for (int q = 0; q < k; ++q) s += p[ch[q]];
      for (int q = 0; q < k; ++q) dot += dg[q] * p[ch[q]] / s;
      for (int q = 0; q < k; ++q) dp[ch[q]] += (dg[q] - dot) / s;
      // softmax: dl_e = p_e·(dp_e − Σ p·dp); z: dl_e += 2·z_coef·lse·p_e/n
      real pdp = 0;
      for (int e = 0; e < E; ++e) pdp += p[e] * dp[e];
      real* dl = dlogits.data() + t * E;
      for (int e = 0; e < E; ++e) dl[e] = p[e] * (dp[e] - pdp) + z_w * lse_[t] * p[e];
    }
  });
  probs_.reset();
  lse_.reset();
  choice_.reset();
  return proj_.backward(dlogits);
}

MOK_NN_END
