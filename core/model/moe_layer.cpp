#include "core/model/moe_layer.h"

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

MoeLayer::MoeLayer(const std::string& prefix, const MoeConfig& c, double init_std, double out_std,
                   uint64_t seed, int layer)
    : config_(c),
      router_(prefix, c.d, c.experts, c.top_k, init_std, seed, layer, c.aux_loss_coef, c.z_loss_coef,
              c.capacity_factor),
      dispatcher_(std::make_unique<LocalDispatcher>()) {
  for (int e = 0; e < c.experts; ++e)
    bank_.experts.push_back(std::make_unique<SwiGluMlp>(prefix + ".experts." + std::to_string(e), c.d,
                                                        c.hidden, init_std, out_std, seed, layer,
                                                        "moe.expert", true));
  if (c.shared_expert)
    shared_ = std::make_unique<SwiGluMlp>(prefix + ".shared", c.d, c.hidden, init_std, out_std, seed,
                                          layer, "moe.shared");
  for (auto& e : bank_.experts) e->set_recompute_hidden(c.recompute);
  if (shared_) shared_->set_recompute_hidden(c.recompute);
}

Tensor MoeLayer::forward(const Tensor& x, bool keep, MoeStats* stats) {
  RouterLosses losses;
  RoutingDecision r = router_.forward(x, keep, &losses);
  Tensor y = dispatcher_->forward(x, r, bank_, keep);
  if (shared_) {
    Tensor ys = shared_->forward(x, keep);
    parallel_for(y.numel(), 4096, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] += ys[i];
    });
  }
  if (stats) {
    stats->losses = losses;
    stats->load = r.load;
    stats->dropped = r.dropped;
  }
  return y;
}

Tensor MoeLayer::backward(const Tensor& dy, real loss_scale) {
  std::vector<real> dgate;
  Tensor dx = dispatcher_->backward(dy, bank_, dgate);
  Tensor dxr = router_.backward(dgate, loss_scale);
  Tensor dxs;
  if (shared_) dxs = shared_->backward(dy);
  parallel_for(dx.numel(), 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dx[i] += dxr[i] + (shared_ ? dxs[i] : real(0));
  });
  return dx;
}

MOK_NN_END
