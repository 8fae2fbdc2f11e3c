#pragma once
// TopKRouter: token-choice top-k routing with load-balancing and z losses.
//   x (n, d) → logits = x·Wr (n, E) → p = softmax(logits) (max-subtracted)
//   → top-k of p per token (ties: lower expert index) → gates = p_chosen / Σ p_chosen
//   → capacity: pairs beyond ceil(c·n·k/E) per expert, in (token, slot) order, are dropped
// Losses (all added to the objective, all with gradients):
//   aux = aux_coef · E · Σ_e f_e·P_e, f_e = (pairs routed to e)/(n·k), P_e = mean_t p_te
//   z   = z_coef · mean_t logsumexp(logits_t)²
//   locality = locality_coef · mean_t Σ_{e not on this rank} p_te   (MoK, expert parallel
//         only: set_locality_loss; pushes probability mass toward this rank's experts)
// Top-k is piecewise constant in x: the gradient flows through the gate values and the
// losses, never through the choice itself (f_e is treated as constant).
// Kept for backward: x via Wr's SavedLinearInput ("moe.router.input"; not when the caller
// recomputes x for backward), the probabilities
// ("moe.router.probs", n·E), the log-sum-exp ("moe.router.lse", n) and the chosen experts
// ("moe.router.choice", n·k int32).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model/linear.h"
#include "core/routing/locality_policy.h"
#include "core/routing/routing_decision.h"

MOK_NN_BEGIN

// The router's losses of one forward. Their sums reach the host when read() (after the
// step), so that a MoE layer need not wait for the device (core/backend/host_reading.h).
struct RouterLosses {
  struct Values {
    double aux = 0.0;       // weighted by aux_coef
    double z = 0.0;         // weighted by z_coef
    double locality = 0.0;  // weighted by locality_coef; 0 unless set_locality_loss is active
  };
  std::shared_ptr<HostReading> sums;  // (3) f64: RouterLossSums' fields; null: no tokens (all 0)
  double aux_coef_experts = 0.0;  // aux_coef · experts
  double z_coef = 0.0, locality_coef = 0.0;
  bool locality = false;  // the locality loss is active
  int64_t tokens = 0;
  // The sums on the host (waits for the device) with the coefficients applied.
  Values read() const;
};

class TopKRouter {
 public:
  TopKRouter(const std::string& prefix, int64_t d, int experts, int k, double init_std,
             uint64_t seed, int layer, double aux_coef, double z_coef, double capacity_factor);

  // keep_input = false: Wr keeps no copy of x; backward then needs it (recomputed_x).
  // With a count reducer (below), the losses and what backward keeps wait for
  // finish_forward(losses), called with the same pointer once the routing has been used.
  RoutingDecision forward(const Tensor& x, bool keep, RouterLosses* losses, bool keep_input = true);
  // The global fractions of a forward with a count reducer: the ranks' exchange of the counts,
  // then the losses (into `losses`) and what backward needs. Nothing to do otherwise. Every
  // rank calls it at the same point (after the dispatch): the reducer is a collective.
  void finish_forward(RouterLosses* losses);
  // dgate (n·k, `real`, on the layer's device): gradient of the objective w.r.t. the gates
  // (0 for dropped pairs), already scaled. loss_scale multiplies the aux and z gradients.
  // Returns dx (n, d); with residual (n, d), residual + dx, the add fused into the projection's
  // input gradient where the backend can (the MoE layer's other branch). recomputed_x: the
  // forward's x again, for Wr's gradient when forward kept no copy of it.
  Tensor backward(const Tensor& dgate, real loss_scale, const Tensor* residual = nullptr,
                  const Tensor* recomputed_x = nullptr);

  // Expert parallelism: each rank routes only its shard of the batch, but the load-balancing
  // loss must use the global fractions f_e for the objective (and its gradient) to be the
  // same for any rank count. The reducer sums E + 1 counts over ranks in place — the pairs
  // routed to each expert, then the token count — in a fixed order (a Communicator's
  // all_reduce_sum). Every rank's finish_forward after a forward that keeps for backward or
  // asks for losses calls it, together (others need no global fractions). Null (the default): this
  // rank's counts, and R = 1 stays bitwise as before.
  using CountReducer = std::function<void(int64_t* counts, int64_t n)>;
  void set_count_reducer(CountReducer reducer) { count_reducer_ = std::move(reducer); }
  // MoK locality-aware routing: prefer this rank's experts within a margin (off by default).
  void set_locality(LocalityPolicy policy) { locality_ = std::move(policy); }
  const LocalityPolicy& locality() const { return locality_; }
  // MoK locality auxiliary loss: `local` (E) is 1 where the expert lives on this rank; the
  // loss is coef · mean_t Σ_{e: local[e] = 0} p_te and its gradient flows through the
  // softmax into the logits (scaled by backward's loss_scale like aux and z). Active only
  // with a non-empty mask and coef > 0; otherwise the router is bitwise as without it.
  void set_locality_loss(std::vector<uint8_t> local, double coef);
  bool locality_loss_active() const { return !loss_local_.empty() && locality_coef_ > 0.0; }
  double locality_coef() const { return locality_coef_; }

  Linear& proj() { return proj_; }
  int experts() const { return experts_; }
  int k() const { return k_; }

 private:
  int experts_, k_;
  int layer_;
  double aux_coef_, z_coef_, capacity_factor_;
  Linear proj_;          // Wr (d, E)
  Tensor probs_, lse_;   // (n, E), (n)
  Tensor choice_;        // (n·k) i32 chosen experts, before capacity
  // For the aux gradient: pairs routed per expert ((E) i64 on the layer's device; global with a
  // reducer) and their total; f_e = load_e / pairs
  Tensor load_;
  double pairs_ = 0.0;
  CountReducer count_reducer_;
  int64_t n_ = 0;
  // A forward's state until finish_forward (only with a count reducer).
  struct PendingCounts {
    std::shared_ptr<HostReading> load;  // (E) i64: this rank's pairs per expert
    Tensor probs, lse;
    RouterLosses* losses = nullptr;
    bool keep = false;
    int64_t n = 0;
  };
  std::optional<PendingCounts> pending_;
  // The losses from the fractions load_e / pairs, and what backward keeps.
  void losses_and_saved(Tensor probs, Tensor lse, Tensor load, double pairs, RouterLosses* losses, bool keep,
                        int64_t n);
  LocalityPolicy locality_;  // MoK: empty = plain top-k
  std::vector<uint8_t> loss_local_;  // (E) mask of the locality loss; empty = no loss
  double locality_coef_ = 0.0;
};

MOK_NN_END
