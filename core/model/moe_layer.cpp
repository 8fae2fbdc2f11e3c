#include "core/model/moe_layer.h"

#include "core/backend/exec_context.h"

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
  RouterLosses losses;
  RoutingDecision r = router_.forward(x, keep, &losses);
  Ops& ops = ExecContext::current().ops();
  Tensor y;
  if (residual && !shared_) {
    y = dispatcher_->forward_add(x, r, bank_, keep, *residual);  // residual + routed
  } else {
    y = dispatcher_->forward(x, r, bank_, keep);
    if (shared_) ops.add_(y, shared_->forward(x, keep));
    if (residual) ops.add_(y, *residual);  // (routed + shared) + residual
  }
  if (stats) {
    stats->losses = std::move(losses);
    stats->load = r.load;
    stats->dropped = r.dropped;
  }
  return y;
}

Tensor MoeLayer::backward(const Tensor& dy, real loss_scale) {
  Tensor dgate;  // (n·k)
  Tensor dx = dispatcher_->backward(dy, bank_, dgate);
  if (!shared_) return router_.backward(dgate, loss_scale, &dx);  // dx + dxr
  Tensor dxr = router_.backward(dgate, loss_scale);
  ExecContext::current().ops().add2_(dx, dxr, shared_->backward(dy));  // dx += dxr + dxs
  return dx;
}

MOK_NN_END
