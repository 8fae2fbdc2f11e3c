#pragma once
// TopKRouter: token-choice top-k routing with load-balancing and z losses.
//   x (n, d) → logits = x·Wr (n, E) → p = softmax(logits) (max-subtracted)
//   → top-k of p per token (ties: lower expert index) → gates = p_chosen / Σ p_chosen
//   → capacity: pairs beyond ceil(c·n·k/E) per expert, in (token, slot) order, are dropped
// Losses (both added to the objective, both with gradients):
//   aux = aux_coef · E · Σ_e f_e·P_e, f_e = (pairs routed to e)/(n·k), P_e = mean_t p_te
//   z   = z_coef · mean_t logsumexp(logits_t)²
// Top-k is piecewise constant in x: the gradient flows through the gate values and the
// losses, never through the choice itself (f_e is treated as constant).
// Kept for backward: x via Wr's SavedLinearInput ("moe.router.input"), the probabilities
// ("moe.router.probs", n·E), the log-sum-exp ("moe.router.lse", n) and the chosen experts
// ("moe.router.choice", n·k int32).

#include <cstdint>
#include <string>

#include "core/model/linear.h"
#include "core/routing/locality_policy.h"
#include "core/routing/routing_decision.h"

MOK_NN_BEGIN

struct RouterLosses {
  double aux = 0.0;  // weighted by aux_coef
  double z = 0.0;    // weighted by z_coef
};

class TopKRouter {
 public:
  TopKRouter(const std::string& prefix, int64_t d, int experts, int k, double init_std,
             uint64_t seed, int layer, double aux_coef, double z_coef, double capacity_factor);

  RoutingDecision forward(const Tensor& x, bool keep, RouterLosses* losses);
  // dgate (n·k): gradient of the objective w.r.t. the gates (0 for dropped pairs), already
  // scaled. loss_scale multiplies the aux and z gradients. Returns dx (n, d).
  Tensor backward(const std::vector<real>& dgate, real loss_scale);

  // MoK locality-aware routing: prefer this rank's experts within a margin (off by default).
  void set_locality(LocalityPolicy policy) { locality_ = std::move(policy); }
  const LocalityPolicy& locality() const { return locality_; }

  Linear& proj() { return proj_; }
  int experts() const { return experts_; }
  int k() const { return k_; }

 private:
  int experts_, k_;
  int layer_;
  double aux_coef_, z_coef_, capacity_factor_;
  Linear proj_;          // Wr (d, E)
  Tensor probs_, lse_;   // (n, E), (n)
  ByteBuffer choice_;    // (n·k) int32 chosen experts, before capacity
  std::vector<double> f_;  // (E) routed fraction per expert, for the aux gradient
  int64_t n_ = 0;
  LocalityPolicy locality_;  // MoK: empty = plain top-k
};

MOK_NN_END
