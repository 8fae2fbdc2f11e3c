#pragma once
// Mixture-of-experts feed-forward layer.
//   x (n, d) → router (TopKRouter) → decision → dispatcher (ExpertDispatcher) runs the E
//   routed SwiGLU experts over their gathered tokens and combines y = Σ_s gate·expert(x)
//   → + shared expert(x) when configured → y (n, d)
// Saved tensors: see TopKRouter, SwiGluMlp (kinds "moe.expert.*", "moe.shared.*"); with
// MoeConfig::recompute no copy of x (the router's, the shared and routed experts' inputs).

#include <memory>
#include <string>
#include <vector>

#include "core/model/expert_dispatcher.h"
#include "core/routing/topk_router.h"

MOK_NN_BEGIN

struct MoeConfig {
  int64_t d = 0;
  int experts = 8;
  int top_k = 2;
  int64_t hidden = 256;
  bool shared_expert = false;
  double aux_loss_coef = 0.01;
  double z_loss_coef = 0.001;
  double capacity_factor = 0.0;  // 0 → dropless
  // Experts keep no hidden h (rebuilt from the pre-activation), and the layer keeps no copy of
  // its input x: the block recomputes x for backward, which rebuilds from it the router's and
  // the shared expert's inputs, and the routed experts' where the dispatcher can gather them
  // again (ExpertDispatcher::can_rebuild_expert_inputs).
  bool recompute = false;
  // (experts) which routed experts this replica holds; empty → all. Expert parallelism
  // leaves the others' slots null in the ExpertBank (their memory lives on other ranks).
  std::vector<bool> local_experts;
};

struct MoeStats {
  RouterLosses losses;
  std::shared_ptr<HostReading> load;  // (E) i64: pairs routed per expert (before capacity)
  int64_t dropped = 0;
};

class MoeLayer {
 public:
  MoeLayer(const std::string& prefix, const MoeConfig& config, double init_std, double out_std,
           uint64_t seed, int layer);

  // residual (n, d): returns residual + moe(x), the add in the dispatcher's combine where it
  // can (the block's residual stream).
  Tensor forward(const Tensor& x, bool keep, MoeStats* stats, const Tensor* residual = nullptr);
  // loss_scale multiplies the aux and z loss gradients. x: the forward's input again (the
  // block recomputes it); required with MoeConfig::recompute, unused otherwise.
  Tensor backward(const Tensor& dy, real loss_scale, const Tensor* x = nullptr);

  TopKRouter& router() { return router_; }
  ExpertBank& experts() { return bank_; }
  SwiGluMlp* shared_expert() { return shared_.get(); }
  // Replaces the dispatcher (e.g. a multi-rank one); the layer owns it.
  void set_dispatcher(std::unique_ptr<ExpertDispatcher> dispatcher) { dispatcher_ = std::move(dispatcher); }
  ExpertDispatcher& dispatcher() { return *dispatcher_; }

 private:
  MoeConfig config_;
  TopKRouter router_;
  ExpertBank bank_;
  std::unique_ptr<SwiGluMlp> shared_;
  std::unique_ptr<ExpertDispatcher> dispatcher_;
  // Of the last keeping forward: whether the experts' inputs are to be rebuilt from x.
  bool experts_rebuild_input_ = false;
};

MOK_NN_END
