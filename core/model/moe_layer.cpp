#include "core/model/moe_layer.h"

#include "core/backend/exec_context.h"

#include <stdexcept>

MOK_NN_BEGIN

MoeLayer::MoeLayer(const std::string& prefix, const MoeConfig& c, double init_std, double out_std,
                   uint64_t seed, int layer)
    : config_(c),
      router_(prefix, c.d, c.experts, c.top_k, init_std, seed, layer, c.aux_loss_coef, c.z_loss_coef,
              c.capacity_factor),
      dispatcher_(std::make_unique<LocalDispatcher>()) {
  // This rank's experts stacked for grouped products; the others' slots stay null (their
  // memory lives on other ranks).
  std::vector<GroupedSwiGlu::ExpertSpec> specs;
  for (int e = 0; e < c.experts; ++e) specs.push_back({prefix + ".experts." + std::to_string(e), seed});
  bank_ = make_stacked_expert_bank(specs, c.local_experts, c.d, c.hidden, init_std, out_std, layer, "moe.expert");
  if (c.shared_expert)
    shared_ = std::make_unique<SwiGluMlp>(prefix + ".shared", c.d, c.hidden, init_std, out_std, seed,
                                          layer, "moe.shared");
  for (auto& e : bank_.experts)
    if (e) e->set_recompute_hidden(c.recompute);
  bank_.grouped->set_recompute_hidden(c.recompute);
  if (shared_) shared_->set_recompute_hidden(c.recompute);
}

Tensor MoeLayer::forward(const Tensor& x, bool keep, MoeStats* stats, const Tensor* residual) {
  const bool keep_input = !config_.recompute;  // else backward gets x again
  RouterLosses losses;
  RoutingDecision r = router_.forward(x, keep, stats ? &losses : nullptr, keep_input);  // losses only when asked
  // The dispatcher may have been replaced since the last step: asked every forward.
  const bool experts_rebuild = !keep_input && bank_.grouped && dispatcher_->can_rebuild_expert_inputs();
  if (bank_.grouped) bank_.grouped->set_rebuild_input(experts_rebuild);
  if (keep) experts_rebuild_input_ = experts_rebuild;
  Ops& ops = ExecContext::current().ops();
  Tensor y;
  if (residual && !shared_) {
    y = dispatcher_->forward_add(x, r, bank_, keep, *residual);  // residual + routed
  } else {
    y = dispatcher_->forward(x, r, bank_, keep);
    if (shared_) ops.add_(y, shared_->forward(x, keep, keep_input));
    if (residual) ops.add_(y, *residual);  // (routed + shared) + residual
  }
  // Expert parallelism: the global load fractions, after the dispatch has waited for the counts.
  router_.finish_forward(stats ? &losses : nullptr);
  if (stats) {
    stats->losses = std::move(losses);
    stats->load = ops.read_later(r.pairs.load);
    stats->dropped = r.dropped;
  }
  return y;
}

Tensor MoeLayer::backward(const Tensor& dy, real loss_scale, const Tensor* x) {
  if (config_.recompute && !x)
    throw std::logic_error("MoeLayer::backward: the layer kept no copy of its input; pass it, recomputed");
  const Tensor* rebuilt = config_.recompute ? x : nullptr;
  Tensor dgate;  // (n·k)
  Tensor dx = experts_rebuild_input_ ? dispatcher_->backward_from_input(dy, bank_, dgate, *x)
                                     : dispatcher_->backward(dy, bank_, dgate);
  if (!shared_) return router_.backward(dgate, loss_scale, &dx, rebuilt);  // dx + dxr
  Tensor dxr = router_.backward(dgate, loss_scale, nullptr, rebuilt);
  ExecContext::current().ops().add2_(dx, dxr, shared_->backward(dy, rebuilt));  // dx += dxr + dxs
  return dx;
}

MOK_NN_END
