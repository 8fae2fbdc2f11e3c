#include "core/model/rms_norm.h"

#include "core/backend/exec_context.h"
#include "core/model/init.h"

MOK_NN_BEGIN

RmsNorm::RmsNorm(const std::string& name, int64_t d, double eps, int layer, std::string kind)
    : g_(make_parameter(name, {d}, 0.0, 0, real(1), false)), eps_(static_cast<real>(eps)),
      layer_(layer), kind_(std::move(kind)), x_(layer_, kind_ + ".input") {}

Tensor RmsNorm::forward(const Tensor& x, bool keep) {
  const ExecContext& cx = ExecContext::current();
  const int64_t n = x.dim(0), d = g_.numel();
  Tensor y = cx.activation({n, d});
  if (keep) {
    x_.keep_shared(x);  // x is the residual stream, which nothing writes in place
    rstd_ = cx.empty({n}, kRealDType, MemTag{MemCategory::saved_activations, layer_, kind_ + ".rstd"});
  }
  cx.ops().rms_norm_forward(x, g_.compute(), eps_, y, keep ? &rstd_ : nullptr);
  return y;
}

Tensor RmsNorm::recompute_output() const {
  const ExecContext& cx = ExecContext::current();
  const Tensor& x = x_.get();
  const int64_t n = x.dim(0), d = g_.numel();
  Tensor y = cx.activation({n, d});
  cx.ops().rms_norm_apply(x, g_.compute(), rstd_, y);
  return y;
}

Tensor RmsNorm::backward(const Tensor& dy, const Tensor* residual) {
  const ExecContext& cx = ExecContext::current();
  const Tensor& x = x_.get();
  const int64_t n = x.dim(0), d = g_.numel();
  Tensor dx = cx.activation({n, d});
  if (residual)
    cx.ops().rms_norm_backward_add(dy, x, g_.compute(), rstd_, *residual, dx, g_.grad);
  else
    cx.ops().rms_norm_backward(dy, x, g_.compute(), rstd_, dx, g_.grad);
  x_.reset();
  rstd_.reset();
  return dx;
}

MOK_NN_END
