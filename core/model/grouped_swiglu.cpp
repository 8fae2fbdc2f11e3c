#include "core/model/grouped_swiglu.h"

#include <algorithm>
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
    const bool copy = cx.compute_dtype() != kRealDType;  // no master beside it where parameters keep none
    if (!copy || ForwardOnlyParameters::masters()) s.value = cx.empty({G, rows, cols}, kRealDType, value_tag);
    if (ForwardOnlyParameters::gradients()) s.grad = cx.zeros({G, rows, cols}, kRealDType, grad_tag);
    if (copy) s.compute = cx.empty({G, rows, cols}, cx.compute_dtype(), value_tag);
  };
  make_stack(up_, d, 2 * f);
  make_stack(down_, f, d);
  // Every expert's values drawn by name into its block, as a separate expert's would be;
  // expert_view() hands out views of the same blocks.
  auto block = [&](const Stack& s, int64_t g, int64_t rows, int64_t cols) {
    Tensor value = s.value.empty() ? Tensor() : s.value.view(g * rows * cols, {rows, cols});
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
    if (!s.value.empty()) p.value = s.value.view(g * rows * cols, {rows, cols});
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
  begin_forward(std::move(xs), segments, keep);
  forward_experts(0, groups());
  return end_forward();
}

bool GroupedSwiGlu::take_range(int g0, int g1, const char* pass) {
  if (!pass_.active)
    throw std::logic_error(std::string("GroupedSwiGlu: ") + pass + " range without begin_" + pass);
  if (g0 != pass_.next || g1 < g0 || g1 > groups())
    throw std::logic_error(std::string("GroupedSwiGlu: ") + pass + " range [" + std::to_string(g0) + ", " +
                           std::to_string(g1) + ") after experts up to " + std::to_string(pass_.next) + " of " +
                           std::to_string(groups()));
  pass_.next = g1;
  return g1 == groups();
}

Tensor GroupedSwiGlu::row_range(const Tensor& t, int64_t r0, int64_t r1) {
  if (r0 == 0 && r1 == t.dim(0)) return t.view(0, t.shape());
  std::vector<int64_t> shape = t.shape();
  const int64_t width = t.numel() / std::max<int64_t>(1, t.dim(0));
  shape[0] = r1 - r0;
  return t.view(r0 * width, std::move(shape));
}

Tensor GroupedSwiGlu::stack_range(const Tensor& s, int g0, int g1) {
  return s.view(g0 * s.dim(1) * s.dim(2), {g1 - g0, s.dim(1), s.dim(2)});
}

void GroupedSwiGlu::begin_forward(Tensor xs, const RowSegments& segments, bool keep) {
  const int64_t m = xs.dim(0);
  if (segments.groups() != groups() || segments.rows() != m)
    throw std::invalid_argument("GroupedSwiGlu: " + std::to_string(segments.groups()) + " segments of " +
                                std::to_string(segments.rows()) + " rows for " + std::to_string(groups()) +
                                " experts and " + std::to_string(m) + " rows");
  pass_ = Pass{};  // (one an exception left unfinished is dropped: a step recording falls back that way)
  pass_.active = true;
  pass_.keep = keep;
  pass_.segments = segments;
  pass_.xs = std::move(xs);
}

void GroupedSwiGlu::forward_experts(int g0, int g1) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const bool last = take_range(g0, g1, "forward");
  const bool whole = g0 == 0 && last;
  const bool keep = pass_.keep, keep_hidden = !recompute_hidden_;
  const int64_t m = pass_.segments.rows();  // (begin_forward checked it against xs)
  const int64_t r0 = whole ? 0 : pass_.segments.begin(g0), r1 = whole ? m : pass_.segments.begin(g1);
  const bool compute = whole || r1 > r0;
  const RowSegments seg = compute ? pass_.segments.range(g0, g1) : RowSegments();
  if (pass_.a.empty())
    pass_.a = cx.activation({m, 2 * f_}, keep && !policy_ ? saved_tag(layer_, kind_ + ".act.input") : MemTag{});
  Tensor a = row_range(pass_.a, r0, r1);
  if (compute) {
    Tensor x = row_range(pass_.xs, r0, r1);
    ops.grouped_gemm(false, seg, x, stack_range(up_.weights(), g0, g1), 0.0, a);  // (rows, 2f)
  }
  if (last) {
    if (keep) segments_ = pass_.segments;  // (after the product: with the host offsets it may have read)
    if (keep && !rebuild_input_) save_input(std::move(pass_.xs), kind_ + ".up.input", xs_saved_);
    pass_.xs.reset();  // (when not kept) before the hidden is made
  }
  if (pass_.h.empty()) pass_.h = cx.activation({m, f_});
  Tensor h = row_range(pass_.h, r0, r1);
  if (compute) ops.swiglu_forward(a, h);
  if (pass_.ys.empty()) pass_.ys = cx.activation({m, d_});
  if (compute) {
    Tensor y = row_range(pass_.ys, r0, r1);
    ops.grouped_gemm(false, seg, h, stack_range(down_.weights(), g0, g1), 0.0, y);  // (rows, d)
  }
  if (!last) return;
  a.reset();
  h.reset();
  if (keep && keep_hidden) save_input(std::move(pass_.h), kind_ + ".down.input", h_saved_);
  pass_.h.reset();
  if (keep) {
    if (!policy_) a_kept_ = std::move(pass_.a);
    else act_slot_.keep(std::move(pass_.a));
    hidden_kept_ = keep_hidden;
    input_kept_ = !rebuild_input_;
  }
  pass_.a.reset();
}

Tensor GroupedSwiGlu::end_forward() {
  if (!pass_.active || pass_.next != groups())
    throw std::logic_error("GroupedSwiGlu: end_forward before the last range");
  Tensor ys = std::move(pass_.ys);
  pass_ = Pass{};
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

void GroupedSwiGlu::begin_backward(const Tensor& gate, Tensor& dgate, const InputRebuild* rebuild_input) {
  const ExecContext& cx = ExecContext::current();
  const int64_t m = segments_.rows();
  if (segments_.empty() || gate.numel() != m || dgate.numel() != m)
    throw std::logic_error("GroupedSwiGlu: backward of " + std::to_string(gate.numel()) +
                           " rows without a matching forward");
  if (!input_kept_ && !rebuild_input)
    throw std::logic_error("GroupedSwiGlu: forward kept no inputs and backward was given no way to rebuild them");
  pass_ = Pass{};
  pass_.active = true;
  pass_.segments = segments_;
  pass_.gate = gate.view(0, gate.shape());
  pass_.dgate = &dgate;
  pass_.rebuild = rebuild_input;
  pass_.dxs = cx.activation({m, d_});
  pass_.a_back = restore_act();  // (m, 2f)
  // h as backward_gated takes it: the kept tensor, rebuilt from a, or left to the gated op.
  if (hidden_kept_ && !policy_) {
    pass_.h_back = h_saved_.whole.view(0, h_saved_.whole.shape());
  } else if (!hidden_kept_) {
    pass_.h_back = cx.activation({m, f_});
    cx.ops().swiglu_forward(pass_.a_back, pass_.h_back);
  }
}

void GroupedSwiGlu::weight_grad_range(const Tensor& dy, SavedRows& saved, Stack& w, const Tensor* x_whole, int g0,
                                      int g1) {
  Ops& ops = ExecContext::current().ops();
  const RowSegments& whole = pass_.segments;
  const int64_t r0 = whole.begin(g0), r1 = whole.begin(g1);
  const Tensor* x = x_whole;
  if (!x && saved.one_copy) {  // restored once, for every range
    Tensor& restored = &saved == &h_saved_ ? pass_.h_copy : pass_.x_copy;
    if (restored.empty()) {
      restored = saved.all->restore();
      saved.all->release();
    }
    x = &restored;
  }
  if (x) {
    Tensor dw = stack_range(w.grad, g0, g1);
    ops.grouped_weight_grad(whole.range(g0, g1), row_range(*x, r0, r1), dy, dw);
    return;
  }
  const int64_t rows_w = w.grad.dim(1), cols_w = w.grad.dim(2), cols = dy.dim(1);
  for (int g = g0; g < g1; ++g) {
    const int64_t e0 = whole.begin(g) - r0, rows = whole.size(g);
    if (rows == 0) continue;
    Tensor dw = w.grad.view(g * rows_w * cols_w, {rows_w, cols_w});
    saved.per_expert[g]->accumulate_weight_grad(dy.view(e0 * cols, {rows, cols}), dw, real(1));
  }
}

void GroupedSwiGlu::backward_experts(const Tensor& dys, int g0, int g1) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const bool last = take_range(g0, g1, "backward");
  const RowSegments& whole = pass_.segments;
  const int64_t m = whole.rows();
  if (dys.dim(0) != m) throw std::logic_error("GroupedSwiGlu: backward range of a dys that is not the pass's rows");
  const int64_t r0 = whole.begin(g0), r1 = whole.begin(g1), rows = r1 - r0;
  if (rows > 0) {
    const RowSegments seg = whole.range(g0, g1);
    const Tensor dy = row_range(dys, r0, r1);
    const Tensor gate = pass_.gate.view(r0, {rows});
    Tensor dgate = pass_.dgate->view(r0, {rows});
    Tensor dy_gated = cx.activation({rows, d_});
    ops.scale_rows(dy, gate, dy_gated);
    Tensor dh = cx.activation({rows, f_});
    ops.grouped_gemm(true, seg, dy, stack_range(down_.weights(), g0, g1), 0.0, dh);  // dy·W_downᵀ, before the gate
    const Tensor* h_whole = hidden_kept_ ? (policy_ ? nullptr : &h_saved_.whole) : &pass_.h_back;
    weight_grad_range(dy_gated, h_saved_, down_, h_whole, g0, g1);
    dy_gated.reset();
    Tensor da = cx.activation({rows, 2 * f_});
    Tensor h = pass_.h_back.empty() ? Tensor() : row_range(pass_.h_back, r0, r1);
    ops.swiglu_backward_gated(row_range(pass_.a_back, r0, r1), std::move(h), dh, gate, dgate, da);
    dh.reset();
    Tensor dx = row_range(pass_.dxs, r0, r1);
    ops.grouped_gemm(true, seg, da, stack_range(up_.weights(), g0, g1), 0.0, dx);  // da·W_upᵀ
    if (input_kept_) {
      weight_grad_range(da, xs_saved_, up_, policy_ ? nullptr : &xs_saved_.whole, g0, g1);
    } else {
      if (pass_.x_back.empty()) pass_.x_back = (*pass_.rebuild)();
      weight_grad_range(da, xs_saved_, up_, &pass_.x_back, g0, g1);
    }
  }
  if (!last) return;
  pass_.a_back.reset();
  a_kept_.reset();
}

Tensor GroupedSwiGlu::end_backward() {
  if (!pass_.active || pass_.next != groups())
    throw std::logic_error("GroupedSwiGlu: end_backward before the last range");
  Tensor dxs = std::move(pass_.dxs);
  pass_ = Pass{};
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
