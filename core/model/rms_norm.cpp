#include "core/model/rms_norm.h"

#include "core/backend/rms_norm_kernel.h"
#include "core/model/init.h"

MOK_NN_BEGIN

RmsNorm::RmsNorm(const std::string& name, int64_t d, double eps, int layer, std::string kind)
    : g_(make_parameter(name, {d}, 0.0, 0, real(1), false)), eps_(static_cast<real>(eps)),
      layer_(layer), kind_(std::move(kind)), x_(layer_, kind_ + ".input") {}

Tensor RmsNorm::forward(const Tensor& x, bool keep) {
  const int64_t n = x.dim(0), d = g_.value.numel();
  Tensor y = Tensor::uninitialized({n, d});
  if (keep) {
    x_.keep(x.clone(x_.output_tag(true)));
    rstd_ = Tensor::uninitialized({n}, MemTag{MemCategory::saved_activations, layer_, kind_ + ".rstd"});
  }
  rms_norm_forward(x.data(), g_.value.data(), eps_, n, d, y.data(), keep ? rstd_.data() : nullptr);
  return y;
}

Tensor RmsNorm::recompute_output() const {
  const Tensor& x = x_.get();
  const int64_t n = x.dim(0), d = g_.value.numel();
  Tensor y = Tensor::uninitialized({n, d});
  rms_norm_apply(x.data(), g_.value.data(), rstd_.data(), n, d, y.data());
  return y;
}

Tensor RmsNorm::backward(const Tensor& dy) {
  const Tensor& x = x_.get();
  const int64_t n = x.dim(0), d = g_.value.numel();
  Tensor dx = Tensor::uninitialized({n, d});
  rms_norm_backward(dy.data(), x.data(), g_.value.data(), rstd_.data(), n, d, dx.data(), g_.grad.data());
  x_.reset();
  rstd_.reset();
  return dx;
}

MOK_NN_END
