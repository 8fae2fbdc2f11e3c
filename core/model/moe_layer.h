#pragma once
// Mixture-of-experts feed-forward layer.
//   x (n, d) → router (TopKRouter) → decision → dispatcher (ExpertDispatcher) runs the E
//   routed SwiGLU experts over their gathered tokens and combines y = Σ_s gate·expert(x)
//   → + shared expert(x) when configured → y (n, d)
// Saved tensors: see TopKRouter, SwiGluMlp (kinds "moe.expert.*", "moe.shared.*").

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
  bool recompute = false;        // experts keep no hidden h (rebuilt from the pre-activation)
  // (experts) which routed experts this replica holds; empty → all. Expert parallelism
  // leaves the others' slots null in the ExpertBank (their memory lives on other ranks).
  std::vector<bool> local_experts;
};

struct MoeStats {
  RouterLosses losses;
  std::vector<int64_t> load;  // (E) pairs routed per expert (before capacity)
  int64_t dropped = 0;
};

class MoeLayer {
 public:
  MoeLayer(const std::string& prefix, const MoeConfig& config, double init_std, double out_std,
           uint64_t seed, int layer);

  // residual (n, d): returns residual + moe(x), the add in the dispatcher's combine where it
  // can (the block's residual stream).
  Tensor forward(const Tensor& x, bool keep, MoeStats* stats, const Tensor* residual = nullptr);
  // loss_scale multiplies the aux and z loss gradients.
  Tensor backward(const Tensor& dy, real loss_scale);

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
};

MOK_NN_END
