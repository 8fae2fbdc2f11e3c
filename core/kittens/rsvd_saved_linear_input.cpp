#include "core/kittens/rsvd_saved_linear_input.h"

#include <algorithm>
#include <cmath>

#include "core/backend/gemm.h"
#include "core/kittens/kitten_key.h"
#include "core/kittens/randomized_range.h"
#include "core/kittens/saved_input_util.h"

MOK_NN_BEGIN

namespace {

class RsvdSavedLinearInput final : public SavedLinearInput {
 public:
  explicit RsvdSavedLinearInput(const CompactOptions& options) : options_(options) {}

  void save(const Tensor& x, const MemTag& tag) override {
    const auto [n, d] = rows_cols(x);
    n_ = n;
    d_in_ = d;
    r_ = static_cast<int>(std::min<int64_t>({static_cast<int64_t>(options_.rank), n, d}));
    u_.reset();
    b_.reset();
    if (r_ < 1) {
      error_ = n * d == 0 ? 0.0 : 1.0;
      return;
    }
    u_ = randomized_range(x.data(), n, d, r_, options_.power_iters, RangeSide::columns,
                          kitten_step_seed(options_.seed, options_.step),
                          kitten_draw_stream(tag.layer, tag.kind, KittenDraw::range), tag);
    b_ = Tensor({static_cast<int64_t>(r_), d}, tag);
    matmul_tn(u_.data(), x.data(), b_.data(), r_, n, d);  // B = Uᵀ·X  (r, d_in)
    if (options_.measure_error) {
      // U has orthonormal columns: ‖X − U·B‖² = ‖X‖² − ‖B‖².
      const double xx = sum_squares(x.data(), x.numel());
      const double bb = sum_squares(b_.data(), b_.numel());
      error_ = xx > 0.0 ? std::sqrt(std::max(0.0, xx - bb) / xx) : 0.0;
    } else {
      error_ = -1.0;
    }
  }

  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    check_grad_shapes("rsvd", n_, d_in_, dy, dw);
    const int64_t d_out = rows_cols(dy).second;
    if (r_ > 0) {
      Tensor t({static_cast<int64_t>(r_), d_out});
      matmul_tn(u_.data(), dy.data(), t.data(), r_, n_, d_out);  // T = Uᵀ·dY  (r, d_out)
      // dW += scale · Bᵀ·T  (d_in, d_out)
      gemm(true, false, d_in_, d_out, r_, scale, b_.data(), d_in_, t.data(), d_out, real(1), dw.data(), d_out);
    }
    u_.reset();
    b_.reset();
  }

  int64_t held_bytes() const override { return u_.bytes() + b_.bytes(); }
  double last_relative_error() const override { return error_; }
  std::string describe() const override {
    return "rsvd r=" + std::to_string(options_.rank) + " q=" + std::to_string(options_.power_iters);
  }

 private:
  CompactOptions options_;
  Tensor u_, b_;
  int64_t n_ = 0, d_in_ = 0;
  int r_ = 0;
  double error_ = -1.0;
};

}  // namespace

std::unique_ptr<SavedLinearInput> make_rsvd_saved_linear_input(const CompactOptions& options) {
  return std::make_unique<RsvdSavedLinearInput>(options);
}

MOK_NN_END
