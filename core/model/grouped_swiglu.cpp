#include "core/model/grouped_swiglu.h"

#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/model/init.h"

MOK_NN_BEGIN

namespace {

MemTag saved_tag(int layer, const std::string& kind) { return MemTag{MemCategory::saved_activations, layer, kind}; }

}  // namespace

GroupedSwiGlu::GroupedSwiGlu(const std::vector<ExpertSpec>& experts, int64_t d, int64_t f, double init_std,
                             double out_std, int layer, const std::string& kind)
    : specs_(experts), d_(d), f_(f), layer_(layer), kind_(kind), act_slot_(layer, kind + ".act.input") {
  const ExecContext& cx = ExecContext::current();
  const int64_t G = groups();
  const MemTag value_tag{MemCategory::parameters, -1, ""}, grad_tag{MemCategory::gradients, -1, ""};
  auto make_stack = [&](Stack& s, int64_t rows, int64_t cols) {
    s.value = cx.empty({G, rows, cols}, kRealDType, value_tag);
    if (ForwardOnlyParameters::gradients()) s.grad = cx.zeros({G, rows, cols}, kRealDType, grad_tag);
    if (cx.compute_dtype() != kRealDType) s.compute = cx.empty({G, rows, cols}, cx.compute_dtype(), value_tag);
  };
  make_stack(up_, d, 2 * f);
  make_stack(down_, f, d);
  // Every expert's values drawn by name into its block, as a separate expert's would be;
  // expert_view() hands out views of the same blocks.
  auto block = [&](const Stack& s, int64_t g, int64_t rows, int64_t cols) {
    Tensor value = s.value.view(g * rows * cols, {rows, cols});
    Tensor compute = s.compute.empty() ? Tensor() : s.compute.view(g * rows * cols, {rows, cols});
    return std::pair<Tensor, Tensor>(std::move(value), std::move(compute));
  };
  for (int g = 0; g < G; ++g) {
    auto [up_value, up_compute] = block(up_, g, d, 2 * f);
    draw_parameter_into(specs_[g].prefix + ".w_up", init_std, specs_[g].seed, up_value, up_compute);
    auto [down_value, down_compute] = block(down_, g, f, d);
    draw_parameter_into(specs_[g].prefix + ".w_down", out_std, specs_[g].seed, down_value, down_compute);
  }
  xs_saved_.per_expert.resize(G);
  h_saved_.per_expert.resize(G);
}

std::unique_ptr<SwiGluMlp> GroupedSwiGlu::expert_view(int g) const {
  auto view = [&](const Stack& s, int64_t rows, int64_t cols, const std::string& name) {
    Parameter p;
    p.name = name;
    p.value = s.value.view(g * rows * cols, {rows, cols});
    if (!s.grad.empty()) p.grad = s.grad.view(g * rows * cols, {rows, cols});
    if (!s.compute.empty()) p.compute_copy = s.compute.view(g * rows * cols, {rows, cols});
    p.weight_decay = true;
    p.expert = true;
    return p;
  };
  return std::make_unique<SwiGluMlp>(view(up_, d_, 2 * f_, specs_[g].prefix + ".w_up"),
                                     view(down_, f_, d_, specs_[g].prefix + ".w_down"), layer_, kind_);
}

void GroupedSwiGlu::set_policy(SavedInputPolicy* policy) {
  policy_ = policy;
  for (SavedRows* saved : {&xs_saved_, &h_saved_}) {
    saved->all.reset();
    for (auto& k : saved->per_expert) k.reset();
  }
  act_slot_.set_policy(policy);
  reset_saved();
}

void GroupedSwiGlu::save_input(Tensor&& x, const std::string& kind, SavedRows& saved) {
  const MemTag tag = saved_tag(layer_, kind);
  if (!policy_) {
    saved.whole = x.retag(tag) ? std::move(x) : x.clone(tag);
    return;
  }
  saved.one_copy = policy_->row_wise(layer_, kind);
  if (saved.one_copy) {
    if (!saved.all) saved.all = policy_->make(layer_, kind);
    saved.all->save(x, tag);
    return;
  }
  const int64_t cols = x.dim(1);
  for (int g = 0; g < groups(); ++g) {
    const int64_t r0 = segments_.begin(g), rows = segments_.size(g);
    if (rows == 0) continue;
    if (!saved.per_expert[g]) saved.per_expert[g] = policy_->make(layer_, kind);
    saved.per_expert[g]->save(x.view(r0 * cols, {rows, cols}), tag);
  }
}

void GroupedSwiGlu::weight_grad(const Tensor& dy, SavedRows& saved, Stack& w, const Tensor* recomputed) {
  Ops& ops = ExecContext::current().ops();
  if (recomputed || !policy_) {
    ops.grouped_weight_grad(segments_, recomputed ? *recomputed : saved.whole, dy, w.grad);
    saved.whole.reset();
    return;
  }
  if (saved.one_copy) {
    const Tensor x = saved.all->restore();
    saved.all->release();
    ops.grouped_weight_grad(segments_, x, dy, w.grad);
    return;
  }
  const int64_t rows_w = w.grad.dim(1), cols_w = w.grad.dim(2), cols = dy.dim(1);
  for (int g = 0; g < groups(); ++g) {
    const int64_t r0 = segments_.begin(g), rows = segments_.size(g);
    if (rows == 0) continue;
    Tensor dw = w.grad.view(g * rows_w * cols_w, {rows_w, cols_w});
    saved.per_expert[g]->accumulate_weight_grad(dy.view(r0 * cols, {rows, cols}), dw, real(1));
  }
}

Tensor GroupedSwiGlu::forward(Tensor xs, const RowSegments& segments, bool keep) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int64_t m = xs.dim(0);
  if (segments.groups() != groups() || segments.rows() != m)
    throw std::invalid_argument("GroupedSwiGlu: " + std::to_string(segments.groups()) + " segments of " +
                                std::to_string(segments.rows()) + " rows for " + std::to_string(groups()) +
                                " experts and " + std::to_string(m) + " rows");
  const bool keep_hidden = !recompute_hidden_;
  Tensor a = cx.activation({m, 2 * f_}, keep && !policy_ ? saved_tag(layer_, kind_ + ".act.input") : MemTag{});
  ops.grouped_gemm(false, segments, xs, up_.weights(), 0.0, a);  // (m, 2f)
  if (keep) segments_ = segments;  // (after the product: with the host offsets it may have read)
  if (keep && !rebuild_input_) save_input(std::move(xs), kind_ + ".up.input", xs_saved_);
  xs.reset();  // (when not kept) before the hidden is made
  Tensor h = cx.activation({m, f_});
  ops.swiglu_forward(a, h);
  Tensor ys = cx.activation({m, d_});
  ops.grouped_gemm(false, segments, h, down_.weights(), 0.0, ys);  // (m, d)
  if (keep && keep_hidden) save_input(std::move(h), kind_ + ".down.input", h_saved_);
  if (keep) {
    if (!policy_) a_kept_ = std::move(a);
    else act_slot_.keep(std::move(a));
    hidden_kept_ = keep_hidden;
    input_kept_ = !rebuild_input_;
  }
  return ys;
}

Tensor GroupedSwiGlu::restore_act() {
  if (!policy_) return a_kept_.view(0, a_kept_.shape());
  const Tensor& restored = act_slot_.get();
  Tensor a = restored.view(0, restored.shape());  // keeps the restored rows alive
  act_slot_.reset();                              // and frees the compact copy
  return a;
}

Tensor GroupedSwiGlu::backward_gated(const Tensor& dys, const Tensor& gate, Tensor& dgate) {
  const ExecContext& cx = ExecContext::current();
  Tensor dys_gated = cx.activation({dys.dim(0), d_});
  cx.ops().scale_rows(dys, gate, dys_gated);
  return backward_gated(dys, std::move(dys_gated), gate, dgate);
}

Tensor GroupedSwiGlu::backward_gated(const Tensor& dys, Tensor&& dys_gated, const Tensor& gate, Tensor& dgate,
                                     const InputRebuild* rebuild_input) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int64_t m = dys.dim(0);
  if (segments_.empty() || segments_.rows() != m)
    throw std::logic_error("GroupedSwiGlu: backward of " + std::to_string(m) + " rows without a matching forward");
  if (!input_kept_ && !rebuild_input)
    throw std::logic_error("GroupedSwiGlu: forward kept no inputs and backward was given no way to rebuild them");
  Tensor a = restore_act();  // (m, 2f)
  // h (m, f), which the gates' gradient needs: the kept tensor itself when it was kept exactly;
  // rebuilt from a when the down projection's weight gradient needs it too (h not kept); else
  // left to the gated op, which builds it (or, fused, never needs it whole)
  Tensor h;
  if (hidden_kept_ && !policy_) {
    h = h_saved_.whole.view(0, h_saved_.whole.shape());
  } else if (!hidden_kept_) {
    h = cx.activation({m, f_});
    ops.swiglu_forward(a, h);
  }
  Tensor dh = cx.activation({m, f_});
  ops.grouped_gemm(true, segments_, dys, down_.weights(), 0.0, dh);  // dys·W_downᵀ, before the gate
  weight_grad(dys_gated, h_saved_, down_, hidden_kept_ ? nullptr : &h);
  dys_gated.reset();
  Tensor da = cx.activation({m, 2 * f_});
  ops.swiglu_backward_gated(a, std::move(h), dh, gate, dgate, da);  // the gates' gradient, and through them
  a.reset();
  a_kept_.reset();
  dh.reset();
  Tensor dxs = cx.activation({m, d_});
  ops.grouped_gemm(true, segments_, da, up_.weights(), 0.0, dxs);  // da·W_upᵀ
  if (input_kept_) {
    weight_grad(da, xs_saved_, up_, nullptr);
  } else {
    const Tensor xs = (*rebuild_input)();
    weight_grad(da, xs_saved_, up_, &xs);
  }
  reset_saved();
  return dxs;
}

void GroupedSwiGlu::reset_saved() {
  for (SavedRows* saved : {&xs_saved_, &h_saved_}) {
    saved->whole.reset();
    if (saved->all) saved->all->release();
    for (auto& k : saved->per_expert)
      if (k) k->release();
  }
  a_kept_.reset();
  act_slot_.reset();
}

MOK_NN_END
