#pragma once
// ExpertDispatcher: runs the routed experts of one MoE layer.
//
// The MoE layer splits into three separable steps:
//   1. routing   (TopKRouter)        x → RoutingDecision: expert id and gate per (token, slot)
//   2. dispatch  (ExpertDispatcher)  x, decision, experts → y, the gated combine
//   3. expert compute (SwiGluMlp)    one expert on its gathered batch of tokens
// A dispatcher owns step 2 and calls step 3; it decides where tokens and experts meet.
// LocalDispatcher keeps every expert here. Multi-rank dispatchers (core/parallel/) shard the
// ExpertBank over ranks and move tokens (classic: one copy per (token, expert); MoK: one
// copy per (token, rank), or fetch the expert's weights) — same contract:
//
//   forward:  y[t] = Σ_{s=0..k−1, expert(t,s) ≥ 0} gate(t,s) · E_{expert(t,s)}(x[t])
//             summed in slot order, no atomics. Each expert sees its tokens in token order.
//   backward: given dy (n, d): returns dx (n, d) of the routed part (summed in slot order),
//             writes dgate (n·k, `real`, on the layer's device) with
//             dgate(t,s) = dy[t] · E_{expert(t,s)}(x[t]) (0 for dropped pairs), and
//             adds every expert's weight gradients into its Parameter::grad.
// Forward with keep = true keeps what backward needs (inside the experts, tagged
// "moe.expert.*"); backward frees it. Results must not depend on the thread count.

#include <memory>
#include <string>
#include <vector>

#include "core/model/expert_bank.h"
#include "core/routing/routing_decision.h"

MOK_NN_BEGIN

class ExpertDispatcher {
 public:
  virtual ~ExpertDispatcher() = default;
  virtual Tensor forward(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank,
                         bool keep) = 0;
  // forward, then y += residual (n, d): the MoE branch joining the block's residual stream.
  // Here the add after forward; a dispatcher whose combine can take it adds it there.
  virtual Tensor forward_add(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank, bool keep,
                             const Tensor& residual);
  virtual Tensor backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate) = 0;
  virtual std::string name() const = 0;

  // Whether backward can rebuild the experts' inputs from the layer's input instead of the
  // experts keeping them: where every routed row is this rank's own (LocalDispatcher); a
  // multi-rank dispatcher would have to move the rows between ranks again. The MoE layer then
  // runs forward with its stacked experts set not to keep their inputs
  // (GroupedSwiGlu::set_rebuild_input) and backward through backward_from_input.
  virtual bool can_rebuild_expert_inputs() const { return false; }
  // backward, the experts' inputs gathered again from x (n, d): the layer's input, recomputed.
  // Throws std::logic_error where can_rebuild_expert_inputs() is false.
  virtual Tensor backward_from_input(const Tensor& dy, ExpertBank& bank, Tensor& dgate, const Tensor& x);
};

// The host combine of the per-expert dispatchers (core/parallel): dst (n, d) row t =
// Σ_s scale[t·k+s] · per_pair[t·k+s] over the k slots in slot order (no atomics, so the result
// is deterministic); slots whose expert (n·k) is < 0 (dropped) are skipped; scale null → 1
// (e.g. when gates are already applied). Host tensors of `real`.
void combine_pairs(const Tensor& per_pair, const int32_t* expert, const real* scale,
                   int64_t n, int k, int64_t d, Tensor& dst);

// All experts on this rank, stacked: gather the routed rows sorted by expert (the router's
// PairOrder), run every expert with grouped matrix products, combine. Runs through the
// rank's Ops on any device; needs a stacked bank (make_stacked_expert_bank).
class LocalDispatcher final : public ExpertDispatcher {
 public:
  Tensor forward(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank, bool keep) override;
  // The residual added in the combine (Ops::combine_pairs_add).
  Tensor forward_add(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank, bool keep,
                     const Tensor& residual) override;
  Tensor backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate) override;
  std::string name() const override { return "local"; }
  bool can_rebuild_expert_inputs() const override { return true; }
  Tensor backward_from_input(const Tensor& dy, ExpertBank& bank, Tensor& dgate, const Tensor& x) override;

 private:
  Tensor forward_impl(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank, bool keep,
                      const Tensor* residual);
  Tensor backward_impl(const Tensor& dy, ExpertBank& bank, Tensor& dgate, const Tensor* x);
  // Kept between forward and backward: the pair order and the gates.
  Tensor order_, row_of_pair_;  // (m), (n·k) i32
  Tensor gate_;                 // (n·k)
  int64_t n_ = 0;
  int k_ = 0;
};

MOK_NN_END
