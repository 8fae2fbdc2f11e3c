#include "core/model/linear.h"

#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/model/init.h"

MOK_NN_BEGIN

namespace {
class ExactPolicy final : public SavedInputPolicy {
 public:
  std::unique_ptr<SavedLinearInput> make(int, const std::string&) override {
    return make_exact_saved_linear_input();
  }
};
}  // namespace

std::shared_ptr<SavedInputPolicy> make_exact_saved_input_policy() {
  return std::make_shared<ExactPolicy>();
}

Linear::Linear(const std::string& name, int64_t d_in, int64_t d_out, double init_std, uint64_t seed,
               int layer, std::string kind, bool expert)
    : w_(make_parameter(name, {d_in, d_out}, init_std, seed, 0, true, expert)),
      layer_(layer), kind_(std::move(kind)) {}

Linear::Linear(Parameter weight, int layer, std::string kind)
    : w_(std::move(weight)), layer_(layer), kind_(std::move(kind)) {}

void Linear::set_policy(SavedInputPolicy* policy) {
  policy_ = policy;
  saved_.reset();
}

Tensor Linear::product(const Tensor& x, MemTag out_tag, bool real_output, const Tensor* residual) const {
  const ExecContext& cx = ExecContext::current();
  const int64_t n = x.dim(0);
  if (x.numel() != n * d_in())
    throw std::invalid_argument("Linear " + w_.name + ": input " + x.shape_string() +
                                " does not have " + std::to_string(d_in()) + " columns");
  // GEMM with beta 0 (or the residual's add): every element written
  Tensor y = cx.empty({n, d_out()}, real_output ? kRealDType : cx.compute_dtype(), std::move(out_tag));
  times_weight(x, false, residual, "output", y);
  return y;
}

void Linear::times_weight(const Tensor& a, bool transposed, const Tensor* residual, const char* what,
                          Tensor& out) const {
  const int64_t n = out.dim(0), cols = out.dim(1), k = transposed ? d_out() : d_in();
  Ops& ops = ExecContext::current().ops();
  if (!residual) {
    ops.gemm(false, transposed, n, cols, k, 1.0, a, k, w_.compute(), d_out(), 0.0, out, cols);
    return;
  }
  if (residual->numel() != out.numel() || residual->dtype() != out.dtype())
    throw std::invalid_argument("Linear " + w_.name + ": residual " + residual->shape_string() +
                                " does not match the " + what + " " + out.shape_string());
  ops.gemm_add(false, transposed, n, cols, k, 1.0, a, k, w_.compute(), d_out(), *residual, out);
}

SavedLinearInput& Linear::saved_input_for_save() {
  if (!saved_) saved_ = policy_ ? policy_->make(layer_, kind_) : make_exact_saved_linear_input();
  return *saved_;
}

Tensor Linear::forward(const Tensor& x, bool keep, MemTag out_tag, bool real_output, const Tensor* residual) {
  Tensor y = product(x, std::move(out_tag), real_output, residual);
  if (keep) saved_input_for_save().save(x, MemTag{MemCategory::saved_activations, layer_, kind_});
  return y;
}

Tensor Linear::forward(Tensor&& x, bool keep, MemTag out_tag, bool real_output, const Tensor* residual) {
  Tensor y = product(x, std::move(out_tag), real_output, residual);
  if (keep) saved_input_for_save().save_owned(std::move(x), MemTag{MemCategory::saved_activations, layer_, kind_});
  return y;
}

Tensor Linear::input_grad(const Tensor& dy, const Tensor* residual) const {
  const ExecContext& cx = ExecContext::current();
  const int64_t n = dy.dim(0);
  Tensor dx = cx.activation({n, d_in()});
  times_weight(dy, true, residual, "input gradient", dx);
  return dx;
}

void Linear::weight_grad(const Tensor& dy, const Tensor* recomputed_x) {
  if (recomputed_x) {
    const int64_t n = dy.dim(0);
    ExecContext::current().ops().gemm(true, false, d_in(), d_out(), n, 1.0, *recomputed_x, d_in(), dy, d_out(), 1.0,
                                      w_.grad, d_out());
    return;
  }
  if (!saved_) throw std::logic_error("Linear " + w_.name + ": backward without a saved forward");
  saved_->accumulate_weight_grad(dy, w_.grad, real(1));
}

Tensor Linear::backward(const Tensor& dy, const Tensor* residual) {
  Tensor dx = input_grad(dy, residual);
  weight_grad(dy);
  return dx;
}

MOK_NN_END
