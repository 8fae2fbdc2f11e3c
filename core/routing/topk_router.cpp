#include "core/routing/topk_router.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

RouterLosses::Values RouterLosses::read() const {
  Values v;
  if (!sums) return v;
  RouterLossSums s;
  const std::vector<double> host = sums->values<double>();
  s.aux = host[0];
  s.z_sum = host[1];
  s.remote_sum = host[2];
  v.aux = aux_coef_experts * s.aux;
  v.z = z_coef * s.z_sum / static_cast<double>(tokens);
  // Probability mass on other ranks' experts, mean over this rank's tokens.
  if (locality) v.locality = locality_coef * s.remote_sum / static_cast<double>(tokens);
  return v;
}

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

RoutingDecision TopKRouter::forward(const Tensor& x, bool keep, RouterLosses* losses, bool keep_input) {
  pending_.reset();  // (one left by a forward that threw before its finish_forward)
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int64_t n = x.dim(0);
  const int E = experts_, k = k_;
  Tensor logits = proj_.forward(x, keep && keep_input, {}, /*real_output=*/true);  // (n, E)
  Tensor probs = cx.empty({n, E}, kRealDType, keep ? MemTag{MemCategory::saved_activations, layer_, "moe.router.probs"} : MemTag{});
  Tensor lse = cx.empty({n}, kRealDType, keep ? MemTag{MemCategory::saved_activations, layer_, "moe.router.lse"} : MemTag{});
  RoutingDecision r;
  r.tokens = n;
  r.k = k;
  r.experts = E;
  r.expert = cx.empty({n * k}, DType::i32);
  r.gate = cx.empty({n * k}, kRealDType);
  // top-k: largest p, ties to the lower index (MoK: with the locality preference when set,
  // core/routing/locality_policy.h)
  ops.router_softmax_topk(logits, k, locality_.enabled() ? &locality_ : nullptr, probs, lse, r.expert, r.gate);
  logits.reset();
  if (keep) choice_ = r.expert.clone(MemTag{MemCategory::saved_activations, layer_, "moe.router.choice"});
  // Load, capacity (token order decides who is dropped) and the sort by expert.
  if (capacity_factor_ > 0)
    r.capacity = static_cast<int64_t>(std::ceil(capacity_factor_ * static_cast<double>(n) * k / E));
  r.pairs = ops.sort_pairs(r.expert, E, r.capacity, /*all_routed=*/true);
  r.dropped = r.pairs.dropped;
  // Losses, from the fractions f_e = load_e / pairs
  if (count_reducer_ && (keep || losses)) {
    // Global fractions: Σ_ranks load_e / (Σ_ranks n · k), once finish_forward() has the
    // counts (a forward that needs neither the losses nor backward, decoding, skips the
    // ranks' exchange). The counts start for the host now; finish_forward() reads them after
    // the dispatch, whose own waits for the device brought them, so this one waits for nothing.
    pending_ = PendingCounts{ops.read_later(r.pairs.load), std::move(probs), std::move(lse), losses, keep, n};
    return r;
  }
  losses_and_saved(std::move(probs), std::move(lse), r.pairs.load.view(0, r.pairs.load.shape()),
                   static_cast<double>(n) * k, losses, keep, n);
  return r;
}

void TopKRouter::finish_forward(RouterLosses* losses) {
  if (!pending_) return;
  PendingCounts p = std::move(*pending_);
  pending_.reset();
  if (losses != p.losses)
    throw std::logic_error("TopKRouter::finish_forward: not the losses the forward was given");
  // r.pairs.load stays this rank's (metrics); the reducer sums every rank's, then the tokens.
  std::vector<int64_t> counts = p.load->values<int64_t>();
  counts.push_back(p.n);
  count_reducer_(counts.data(), static_cast<int64_t>(counts.size()));
  const double pairs = static_cast<double>(counts[experts_]) * k_;
  Tensor load = ExecContext::current().upload(counts.data(), {experts_}, DType::i64);
  losses_and_saved(std::move(p.probs), std::move(p.lse), std::move(load), pairs, losses, p.keep, p.n);
}

void TopKRouter::losses_and_saved(Tensor probs, Tensor lse, Tensor load, double pairs, RouterLosses* losses,
                                  bool keep, int64_t n) {
  Ops& ops = ExecContext::current().ops();
  if (losses && n > 0) {
    Tensor sums = ExecContext::current().empty({3}, DType::f64);
    ops.router_loss_sums(probs, lse, load, pairs, locality_loss_active() ? &loss_local_ : nullptr, sums);
    losses->sums = ops.read_later(sums);
    losses->aux_coef_experts = aux_coef_ * experts_;
    losses->z_coef = z_coef_;
    losses->locality_coef = locality_coef_;
    losses->locality = locality_loss_active();
    losses->tokens = n;
  }
  if (keep) {
    probs_ = std::move(probs);
    lse_ = std::move(lse);
    load_ = std::move(load);
    pairs_ = pairs;
    n_ = n;
  }
}

Tensor TopKRouter::backward(const Tensor& dgate, real loss_scale, const Tensor* residual,
                            const Tensor* recomputed_x) {
  const ExecContext& cx = ExecContext::current();
  const int64_t n = n_;
  const int E = experts_;
  Tensor dlogits = cx.empty({n, E}, kRealDType);
  const real aux_w = static_cast<real>(aux_coef_ * E / static_cast<double>(n)) * loss_scale;
  const real z_w = static_cast<real>(2.0 * z_coef_ / static_cast<double>(n)) * loss_scale;
  const bool loc = locality_loss_active();
  const real loc_w = static_cast<real>(locality_coef_ / static_cast<double>(n)) * loss_scale;
  cx.ops().router_backward(probs_, lse_, choice_, dgate, load_, pairs_, loc ? &loss_local_ : nullptr, aux_w, z_w,
                           loc_w, dlogits);
  load_.reset();
  probs_.reset();
  lse_.reset();
  choice_.reset();
  if (dlogits.dtype() != cx.compute_dtype()) {  // the projection computes in the compute dtype
    Tensor d = cx.activation(dlogits.shape());
    cx.ops().convert(dlogits, d);
    dlogits = std::move(d);
  }
  if (!recomputed_x) return proj_.backward(dlogits, residual);
  Tensor dx = proj_.input_grad(dlogits, residual);  // the order of Linear::backward
  proj_.weight_grad(dlogits, recomputed_x);
  return dx;
}

MOK_NN_END
