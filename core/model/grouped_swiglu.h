#pragma once
// GroupedSwiGlu: the routed experts of one MoE layer on this rank, stacked so that each
// projection over all of them is one grouped matrix product.
//   w_up (G, d, 2f), w_down (G, f, d): values, gradients and compute copies. Expert g's
//   weights are views of block g, with the names and values separate SwiGluMlp experts had
//   ("<prefix>.w_up", "<prefix>.w_down"), so checkpoints and results do not change.
//   forward:  xs (m, d) rows sorted by expert, expert g's rows [off[g], off[g+1])
//             → a = xs·W_up[g] (m, 2f) = [gate | up] → h = silu(gate)∘up (m, f)
//             → ys = h·W_down[g] (m, d)
//   backward_gated: row i of ys entered the combine as gate[i]·ys[i]; given dys (m, d),
//             writes the gates' gradient dgate[i] = dys[i]·ys[i] (= (dys·W_downᵀ)[i]·h[i])
//             and returns dxs (m, d).
// Saved for backward, under the kinds separate experts use ("moe.expert.up.input",
// "moe.expert.act.input", "moe.expert.down.input"): xs, a and h (h not when the hidden is
// recomputed) — whole tensors when kept exactly, per expert through the policy's keepers
// when a saved-input policy (kittens) is set, so each expert keeps its own compact copy as a
// separate SwiGluMlp would.

#include <memory>
#include <string>
#include <vector>

#include "core/kittens/saved_tensor_slot.h"
#include "core/model/swiglu_mlp.h"

MOK_NN_BEGIN

class GroupedSwiGlu {
 public:
  struct ExpertSpec {
    std::string prefix;  // e.g. "layers.1.moe.experts.3": weights "<prefix>.w_up", "<prefix>.w_down"
    uint64_t seed = 0;   // initial values: drawn by name from this seed
  };

  GroupedSwiGlu(const std::vector<ExpertSpec>& experts, int64_t d, int64_t f, double init_std, double out_std,
                int layer, const std::string& kind);

  int groups() const { return static_cast<int>(specs_.size()); }
  int64_t d() const { return d_; }
  int64_t hidden() const { return f_; }
  // Expert g as a SwiGluMlp over views of block g (its Parameters are the ones to train).
  std::unique_ptr<SwiGluMlp> expert_view(int g) const;

  // offsets: (G + 1) host row offsets of the experts' segments in xs. xs is taken over: kept
  // exactly, it is kept without a copy.
  Tensor forward(Tensor xs, const std::vector<int64_t>& offsets, bool keep);
  // gate (m), dgate (m, written): `real` on the layer's device. Returns dxs (m, d).
  Tensor backward_gated(const Tensor& dys, const Tensor& gate, Tensor& dgate);

  void set_policy(SavedInputPolicy* policy);
  SavedInputPolicy* policy() const { return policy_; }
  void set_recompute_hidden(bool on) { recompute_hidden_ = on; }
  bool recompute_hidden() const { return recompute_hidden_; }

 private:
  struct Stack {
    Tensor value, grad, compute;  // (G, rows, cols); compute empty when the master is computed with
    const Tensor& weights() const { return compute.empty() ? value : compute; }
  };
  // Keeps x (m, cols) for a weight gradient: whole (taken over), or per expert through `keepers`.
  void save_input(Tensor&& x, const std::string& kind, Tensor& whole,
                  std::vector<std::unique_ptr<SavedLinearInput>>& keepers);
  // dW += Xᵀ·dY per expert from what save_input kept (or from `recomputed` x when given).
  void weight_grad(const Tensor& dy, Tensor& whole, std::vector<std::unique_ptr<SavedLinearInput>>& keepers,
                   Stack& w, const Tensor* recomputed);
  Tensor restore_act();  // a (m, 2f); with a policy, frees each expert's copy as it goes
  void reset_saved();

  std::vector<ExpertSpec> specs_;
  int64_t d_, f_;
  int layer_;
  std::string kind_;
  Stack up_, down_;
  SavedInputPolicy* policy_ = nullptr;
  bool recompute_hidden_ = false;

  // Kept between forward and backward.
  std::vector<int64_t> offsets_;
  bool hidden_kept_ = true;
  Tensor xs_kept_, h_kept_, a_kept_;  // exact
  std::vector<std::unique_ptr<SavedLinearInput>> up_keepers_, down_keepers_;  // with a policy, one per expert
  std::vector<SavedTensorSlot> act_slots_;                                     // with a policy, one per expert
};

MOK_NN_END
