#include "core/kittens/lowbit_saved_linear_input.h"

#include <cmath>

#include "core/backend/gemm.h"
#include "core/kittens/kitten_key.h"
#include "core/kittens/quantized_matrix.h"
#include "core/kittens/saved_input_util.h"

MOK_NN_BEGIN

namespace {

class LowbitSavedLinearInput final : public SavedLinearInput {
 public:
  explicit LowbitSavedLinearInput(const CompactOptions& options) : options_(options) {}

  void save(const Tensor& x, const MemTag& tag) override {
    const auto [n, d] = rows_cols(x);
    shape_ = x.shape();
    QuantizeOptions q{options_.bits, options_.stochastic_rounding, kitten_step_seed(options_.seed, options_.step),
                      kitten_draw_stream(tag.layer, tag.kind, KittenDraw::rounding)};
    const double err = codes_.quantize(x.data(), n, d, q, tag);
    if (options_.measure_error) {
      const double xx = sum_squares(x.data(), x.numel());
      error_ = xx > 0.0 ? std::sqrt(err / xx) : 0.0;
    } else {
      error_ = -1.0;
    }
  }

  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    const int64_t n = codes_.rows(), d_in = codes_.cols();
    check_grad_shapes("lowbit", n, d_in, dy, dw);
    const int64_t d_out = rows_cols(dy).second;
    if (n > 0) {
      Tensor x({n, d_in});
      codes_.dequantize(x.data());
      // dW += scale · X̃ᵀ·dY  (d_in, d_out)
      gemm(true, false, d_in, d_out, n, scale, x.data(), d_in, dy.data(), d_out, real(1), dw.data(), d_out);
    }
    codes_.reset();
  }

  Tensor restore() const override {
    Tensor x(shape_);
    if (!codes_.empty()) codes_.dequantize(x.data());
    return x;
  }

  int64_t held_bytes() const override { return codes_.held_bytes(); }
  double last_relative_error() const override { return error_; }
  std::string describe() const override {
    return "lowbit " + std::to_string(options_.bits) + "bit" + (options_.stochastic_rounding ? " stochastic" : "");
  }

 private:
  CompactOptions options_;
  QuantizedMatrix codes_;
  std::vector<int64_t> shape_;
  double error_ = -1.0;
};

}  // namespace

std::unique_ptr<SavedLinearInput> make_lowbit_saved_linear_input(const CompactOptions& options) {
  return std::make_unique<LowbitSavedLinearInput>(options);
}

MOK_NN_END
