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
// recomputed, xs not when backward rebuilds it) — whole tensors when kept exactly; with a saved-input policy (kittens), one
// copy of all rows when the policy's copy is row-wise (low-bit: a row's codes depend on that
// row alone, so one copy equals per-expert copies and costs one launch), else per expert
// through the policy's keepers (low-rank factors are fitted to each expert's rows, as a
// separate SwiGluMlp's would be).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/row_segments.h"
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

  // segments: the experts' rows in xs (on the host or the device: core/backend/row_segments.h;
  // a saved-input policy whose copies are fitted per expert reads them). xs is taken over:
  // kept exactly, it is kept without a copy.
  Tensor forward(Tensor xs, const RowSegments& segments, bool keep);
  // gate (m), dgate (m, written): `real` on the layer's device. Returns dxs (m, d).
  Tensor backward_gated(const Tensor& dys, const Tensor& gate, Tensor& dgate);
  // Makes xs (m, d) again, for the up projection's weight gradient when forward kept no copy
  // of it (set_rebuild_input).
  using InputRebuild = std::function<Tensor()>;
  // The same with dys_gated (m, d) = scale_rows(dys, gate) made by the caller (taken over:
  // released once the down projection's weight gradient has it). rebuild_input: required when
  // the forward kept no xs, called when the weight gradient needs it.
  Tensor backward_gated(const Tensor& dys, Tensor&& dys_gated, const Tensor& gate, Tensor& dgate,
                        const InputRebuild* rebuild_input = nullptr);

  // The same passes by ranges of experts, for a caller whose rows arrive range by range (the
  // classic dispatcher's chunks, each travelling while the range before it computes). Ranges
  // go in order, each starting where the last ended, up to G; each writes only its experts'
  // rows, with the ops of the whole pass on those rows (so a row's values, and each expert's
  // weight gradient, are those of one pass; a range's segments keep the pass's group count,
  // by which a GPU picks its product method: RowSegments::range). Host offsets only.
  //   begin_forward(xs, segments, keep)   xs (m, d) whole: later ranges' rows may not be there yet
  //   forward_experts(g0, g1)              experts [g0, g1)
  //   end_forward() → ys (m, d)            after the last range; keeps what backward needs
  //   begin_backward(gate, dgate)          gate (m); dgate (m) written range by range
  //   backward_experts(dys, g0, g1)        dys (m, d): the range's rows arrived
  //   end_backward() → dxs (m, d)
  // forward() is one range [0, G); backward_gated() is the same ops over all rows at once.
  void begin_forward(Tensor xs, const RowSegments& segments, bool keep);
  void forward_experts(int g0, int g1);
  Tensor end_forward();
  // The pass's output so far: ys in a forward (after its first range), dxs (m, d) in a
  // backward; a range's rows are final once it has run.
  const Tensor& pass_output() const { return pass_.active && !pass_.dxs.empty() ? pass_.dxs : pass_.ys; }
  void begin_backward(const Tensor& gate, Tensor& dgate, const InputRebuild* rebuild_input = nullptr);
  void backward_experts(const Tensor& dys, int g0, int g1);
  Tensor end_backward();

  void set_policy(SavedInputPolicy* policy);
  SavedInputPolicy* policy() const { return policy_; }
  void set_recompute_hidden(bool on) { recompute_hidden_ = on; }
  bool recompute_hidden() const { return recompute_hidden_; }
  // Forwards from now on keep no copy of xs ("moe.expert.up.input"): backward rebuilds it
  // through backward_gated's rebuild_input (the local dispatcher gathers it again).
  void set_rebuild_input(bool on) { rebuild_input_ = on; }
  bool rebuild_input() const { return rebuild_input_; }

 private:
  struct Stack {
    Tensor value, grad, compute;  // (G, rows, cols); compute empty when the master is computed with,
                                  // value empty when the compute copy is the only copy (init.h)
    const Tensor& weights() const { return compute.empty() ? value : compute; }
  };
  // One kind's saved input (xs or h) between forward and backward.
  struct SavedRows {
    Tensor whole;                                // no policy: the tensor itself
    bool one_copy = false;                       // with a policy: `all` holds every row this step
    std::unique_ptr<SavedLinearInput> all;       // row-wise copy of every row
    std::vector<std::unique_ptr<SavedLinearInput>> per_expert;  // copies fitted to each expert's rows
  };
  // Keeps x (m, cols) for a weight gradient: whole (taken over), in one copy, or per expert.
  void save_input(Tensor&& x, const std::string& kind, SavedRows& saved);
  // dW += Xᵀ·dY per expert from what save_input kept (or from `recomputed` x when given).
  void weight_grad(const Tensor& dy, SavedRows& saved, Stack& w, const Tensor* recomputed);
  Tensor restore_act();  // a (m, 2f); with a policy, frees the compact copy
  void reset_saved();
  // Range [g0, g1) of a pass by ranges: checked in order; whether it is the last.
  bool take_range(int g0, int g1, const char* pass);
  // Rows [r0, r1) of t (rows, cols); t itself when they are all of it.
  static Tensor row_range(const Tensor& t, int64_t r0, int64_t r1);
  // Stack s's blocks [g0, g1) (G, rows, cols) as a (g1 − g0, rows, cols) view.
  static Tensor stack_range(const Tensor& s, int g0, int g1);
  void weight_grad_range(const Tensor& dy, SavedRows& saved, Stack& w, const Tensor* x_whole, int g0, int g1);

  std::vector<ExpertSpec> specs_;
  int64_t d_, f_;
  int layer_;
  std::string kind_;
  Stack up_, down_;
  SavedInputPolicy* policy_ = nullptr;
  bool recompute_hidden_ = false;
  bool rebuild_input_ = false;

  // A pass by ranges in progress.
  struct Pass {
    bool active = false;
    int next = 0;  // first expert of the next range
    bool keep = false;
    RowSegments segments;
    Tensor xs, a, h, ys;  // forward
    Tensor gate, a_back, h_back, x_back, dxs;  // backward: inputs restored or rebuilt for it
    Tensor h_copy, x_copy;                      // backward: one-copy saved inputs, restored
    Tensor* dgate = nullptr;
    const InputRebuild* rebuild = nullptr;
  };
  Pass pass_;

  // Kept between forward and backward.
  RowSegments segments_;
  bool hidden_kept_ = true;
  bool input_kept_ = true;
  SavedRows xs_saved_, h_saved_;
  Tensor a_kept_;            // exact
  SavedTensorSlot act_slot_;  // with a policy (elementwise copies are row-wise: one for all rows)
};

MOK_NN_END
