#include "core/model/swiglu_mlp.h"

#include <stdexcept>

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

SwiGluMlp::SwiGluMlp(const std::string& prefix, int64_t d, int64_t f, double init_std,
                     double out_std, uint64_t seed, int layer, const std::string& kind, bool expert)
    : d_(d), f_(f), layer_(layer), kind_(kind),
      up_(prefix + ".w_up", d, 2 * f, init_std, seed, layer, kind + ".up.input", expert),
      down_(prefix + ".w_down", f, d, out_std, seed, layer, kind + ".down.input", expert),
      a_(layer, kind + ".act.input") {}

SwiGluMlp::SwiGluMlp(Parameter w_up, Parameter w_down, int layer, const std::string& kind)
    : d_(w_up.dim(0)), f_(w_down.dim(0)), layer_(layer), kind_(kind),
      up_(std::move(w_up), layer, kind + ".up.input"),
      down_(std::move(w_down), layer, kind + ".down.input"),
      a_(layer, kind + ".act.input") {
  if (up_.d_out() != 2 * f_ || down_.d_out() != d_)
    throw std::invalid_argument("SwiGluMlp: w_up " + up_.weight().compute().shape_string() + " and w_down " +
                                down_.weight().compute().shape_string() + " do not make a (d, 2f), (f, d) pair");
}

Tensor SwiGluMlp::forward(const Tensor& x, bool keep, bool keep_input, bool keep_hidden, const Tensor* residual) {
  return forward_from_up(up_.forward(x, keep && keep_input, a_.output_tag(keep)), keep, keep_hidden, residual);
}

Tensor SwiGluMlp::forward(Tensor&& x, bool keep, bool keep_input, bool keep_hidden, const Tensor* residual) {
  return forward_from_up(up_.forward(std::move(x), keep && keep_input, a_.output_tag(keep)), keep, keep_hidden,
                         residual);
}

Tensor SwiGluMlp::forward_from_up(Tensor a, bool keep, bool keep_hidden, const Tensor* residual) {
  const ExecContext& cx = ExecContext::current();
  const int64_t n = a.dim(0);
  keep_hidden = keep_hidden && !recompute_hidden_;
  Tensor h = cx.activation({n, f_});
  cx.ops().swiglu_forward(a, h);
  Tensor y = down_.forward(std::move(h), keep && keep_hidden, {}, false, residual);  // h kept without a copy
  if (keep) {
    a_.keep(std::move(a));
    hidden_kept_ = keep_hidden;
  }
  return y;
}

Tensor SwiGluMlp::backward(const Tensor& dy, const Tensor* recomputed_x) {
  return backward_gated(dy, nullptr, nullptr, recomputed_x);
}

Tensor SwiGluMlp::backward_gated(const Tensor& dy, const Tensor* gate, Tensor* dgate,
                                 const Tensor* recomputed_x) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int64_t n = dy.dim(0);
  Tensor h;  // (n, f), recomputed from a for the weight gradient when not kept (the gated op builds its own)
  if (!hidden_kept_) {
    h = cx.activation({n, f_});
    ops.swiglu_forward(a_.get(), h);
  }
  Tensor dh = down_.input_grad(dy);  // (n, f) = dy·Wdownᵀ, before the gate
  Tensor da;
  if (gate) {
    Tensor dy_gated = cx.activation({n, d_});
    ops.scale_rows(dy, *gate, dy_gated);
    down_.weight_grad(dy_gated, hidden_kept_ ? nullptr : &h);
    dy_gated.reset();
    da = cx.activation({n, 2 * f_});
    // dgate = dy·(h·Wdown) = (dy·Wdownᵀ)·h, and da through the gate
    ops.swiglu_backward_gated(a_.get(), std::move(h), dh, *gate, *dgate, da);
  } else {
    down_.weight_grad(dy, hidden_kept_ ? nullptr : &h);
    h.reset();
    da = cx.activation({n, 2 * f_});
    ops.swiglu_backward(a_.get(), dh, da);
  }
  a_.reset();
  dh.reset();
  Tensor dx = up_.input_grad(da);
  up_.weight_grad(da, recomputed_x);
  return dx;
}

MOK_NN_END
