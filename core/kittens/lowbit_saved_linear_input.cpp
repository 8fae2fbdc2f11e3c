#include "core/kittens/lowbit_saved_linear_input.h"

#include "core/backend/exec_context.h"
#include "core/kittens/kitten_key.h"
#include "core/kittens/quantized_matrix.h"
#include "core/kittens/saved_input_util.h"

MOK_NN_BEGIN

namespace {

class LowbitSavedLinearInput final : public SavedLinearInput {
 public:
  explicit LowbitSavedLinearInput(const CompactOptions& options) : options_(options) {}

  void save(const Tensor& x, const MemTag& tag) override {
    rows_cols(x);  // checks x is not a scalar
    shape_ = x.shape();
    QuantizeOptions q{options_.bits, options_.stochastic_rounding, kitten_step_seed(options_.seed, options_.step),
                      kitten_draw_stream(tag.layer, tag.kind, KittenDraw::rounding)};
    codes_.quantize(x, q, tag, options_.measure_error);
    // Shares the terms' storage: they outlive the codes (asked for after backward too).
    error_terms_ = codes_.error_terms().empty() ? Tensor{} : codes_.error_terms().view(0, {2});
  }

  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    const int64_t n = codes_.rows(), d_in = codes_.cols();
    check_grad_shapes("lowbit", n, d_in, dy, dw);
    const int64_t d_out = rows_cols(dy).second;
    if (n > 0) {
      const Tensor x = codes_.dequantized();
      // dW += scale · X̃ᵀ·dY  (d_in, d_out)
      ExecContext::current().ops().gemm(true, false, d_in, d_out, n, scale, x, d_in, dy, d_out, 1.0, dw, d_out);
    }
    codes_.reset();
  }

  Tensor restore() const override {
    Tensor x = ExecContext::current().activation(shape_);
    if (!codes_.empty()) codes_.dequantize(x);
    return x;
  }

  int64_t held_bytes() const override { return codes_.held_bytes(); }
  void release() override { codes_.reset(); }
  Tensor error_terms() const override { return error_terms_.empty() ? Tensor{} : error_terms_.view(0, {2}); }
  double last_relative_error() const override {
    if (error_terms_.empty()) return -1.0;
    const auto [err, xx] = QuantizedMatrix::read_error_terms(error_terms_);
    return relative_error_of(err, xx);
  }
  std::string describe() const override {
    return "lowbit " + std::to_string(options_.bits) + "bit" + (options_.stochastic_rounding ? " stochastic" : "");
  }

 private:
  CompactOptions options_;
  QuantizedMatrix codes_;
  Tensor error_terms_;  // (2) f64 of the last save, or empty
  std::vector<int64_t> shape_;
};

}  // namespace

std::unique_ptr<SavedLinearInput> make_lowbit_saved_linear_input(const CompactOptions& options) {
  return std::make_unique<LowbitSavedLinearInput>(options);
}

MOK_NN_END
