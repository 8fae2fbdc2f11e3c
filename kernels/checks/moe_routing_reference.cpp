#include "kernels/checks/moe_routing_reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/model/expert_dispatcher.h"
#include "core/routing/topk_router.h"

namespace mok::cuda {

RouterReference reference_router(const RouterCase& c, const std::vector<float>& logits,
                                 const std::vector<float>& dgate) {
  const int64_t n = c.n;
  const int E = c.experts, k = c.k;
  if (static_cast<int64_t>(logits.size()) != n * E || static_cast<int64_t>(dgate.size()) != n * k)
    throw std::invalid_argument("reference_router: logits or dgate of the wrong size");
  f64::TopKRouter router("check.router", E, E, k, 0.1, 1, 0, c.aux_coef, c.z_coef, c.capacity_factor);
  f64::Tensor& w = router.proj().weight().value;  // (E, E) = identity: the input is the logits
  w.zero();
  for (int e = 0; e < E; ++e) w[int64_t(e) * E + e] = 1.0;
  f64::LocalityPolicy prefer_local;  // off unless the case asks for it
  if (!c.remote.empty()) {
    std::vector<uint8_t> local(E);
    for (int e = 0; e < E; ++e) local[e] = c.remote[e] ? 0 : 1;
    router.set_locality_loss(local, c.locality_coef);
    if (c.locality_margin >= 0.0) {
      prefer_local.local = local;
      prefer_local.margin = c.locality_margin;
      router.set_locality(prefer_local);
    }
  }
  f64::Tensor x({n, int64_t(E)});
  for (int64_t i = 0; i < n * E; ++i) x[i] = logits[i];

  f64::RouterLosses losses;
  f64::RoutingDecision r = router.forward(x, true, &losses);
  RouterReference ref;
  ref.gate.assign(r.gate.data(), r.gate.data() + r.gate.numel());
  ref.expert.assign(r.expert.data_as<int32_t>(), r.expert.data_as<int32_t>() + r.expert.numel());
  ref.load = r.pairs.host_load();
  ref.capacity = r.capacity;
  const f64::RouterLosses::Values values = losses.read();
  ref.aux = values.aux;
  ref.z = values.z;
  ref.locality = values.locality;
  ref.f.resize(E);
  for (int e = 0; e < E; ++e) ref.f[e] = n ? double(ref.load[e]) / (double(n) * k) : 0.0;

  // The forward's softmax and top-k again, as the router computes them, for the kept
  // tensors it does not return (probs, lse, the choice before capacity).
  ref.probs.resize(n * E);
  ref.lse.resize(n);
  ref.choice.resize(n * k);
  for (int64_t t = 0; t < n; ++t) {
    const double* l = x.data() + t * E;
    double m = l[0];
    for (int e = 1; e < E; ++e) m = std::max(m, l[e]);
    double s = 0;
    for (int e = 0; e < E; ++e) s += (ref.probs[t * E + e] = std::exp(l[e] - m));
    for (int e = 0; e < E; ++e) ref.probs[t * E + e] /= s;
    ref.lse[t] = m + std::log(s);
    f64::select_top_k(ref.probs.data() + t * E, E, k, prefer_local.enabled() ? &prefer_local : nullptr,
                      ref.choice.data() + t * k);
  }

  f64::Tensor dg({static_cast<int64_t>(dgate.size())});
  std::copy(dgate.begin(), dgate.end(), dg.data());
  f64::Tensor dx = router.backward(dg, c.loss_scale);  // = dlogits · Wrᵀ = dlogits
  ref.dlogits.assign(dx.data(), dx.data() + dx.numel());
  return ref;
}

std::vector<double> reference_combine(const std::vector<double>& per_pair, const std::vector<int32_t>& expert,
                                      const std::vector<double>& scale, int64_t n, int k, int64_t d) {
  f64::Tensor pairs({n * k, d}), out({n, d});
  for (int64_t i = 0; i < n * k * d; ++i) pairs[i] = per_pair[i];
  f64::combine_pairs(pairs, expert.data(), scale.empty() ? nullptr : scale.data(), n, k, d, out);
  return std::vector<double>(out.data(), out.data() + out.numel());
}

}  // namespace mok::cuda
