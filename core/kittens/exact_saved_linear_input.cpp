// The exact policy: keep X as it is (on its device) and form dW += scale · Xᵀ·dY with one GEMM.
#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/kittens/saved_linear_input.h"

MOK_NN_BEGIN

namespace {

class ExactSavedLinearInput final : public SavedLinearInput {
 public:
  void save(const Tensor& x, const MemTag& tag) override { x_ = x.clone(tag); }
  void save_owned(Tensor&& x, const MemTag& tag) override {
    if (!x.retag(tag)) return save(x, tag);  // shared storage: copy it
    x_ = std::move(x);
  }

  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    const int64_t n = x_.rank() ? x_.dim(0) : 0;
    if (n == 0) {  // no rows (e.g. an expert that got no tokens): nothing to add
      x_.reset();
      return;
    }
    const int64_t d_in = x_.numel() / n;
    const int64_t d_out = dw.numel() / d_in;
    if (dy.numel() != n * d_out || dw.numel() != d_in * d_out)
      throw std::invalid_argument("ExactSavedLinearInput: shapes of X " + x_.shape_string() +
                                  ", dY " + dy.shape_string() + ", dW " + dw.shape_string() +
                                  " do not match");
    // dW(d_in, d_out) += scale · X(n, d_in)ᵀ · dY(n, d_out)
    ExecContext::current().ops().gemm(true, false, d_in, d_out, n, scale, x_, d_in, dy, d_out, 1.0, dw, d_out);
    x_.reset();
  }

  int64_t held_bytes() const override { return x_.bytes(); }
  void release() override { x_.reset(); }
  Tensor restore() const override { return x_.clone(MemTag{}); }
  std::string describe() const override { return "exact"; }

 private:
  Tensor x_;  // (n, d_in), tagged saved_activations
};

}  // namespace

std::unique_ptr<SavedLinearInput> make_exact_saved_linear_input() {
  return std::make_unique<ExactSavedLinearInput>();
}

MOK_NN_END
