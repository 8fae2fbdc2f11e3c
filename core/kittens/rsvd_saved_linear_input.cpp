#include "core/kittens/rsvd_saved_linear_input.h"

#include <algorithm>
#include <cmath>

#include "core/backend/exec_context.h"
#include "core/kittens/kitten_key.h"
#include "core/kittens/quantized_matrix.h"
#include "core/kittens/randomized_range.h"
#include "core/kittens/saved_input_util.h"

MOK_NN_BEGIN

namespace {

class RsvdSavedLinearInput final : public SavedLinearInput {
 public:
  explicit RsvdSavedLinearInput(const CompactOptions& options) : options_(options) {}

  void save(const Tensor& x_in, const MemTag& tag) override {
    const auto [n, d] = rows_cols(x_in);
    n_ = n;
    d_in_ = d;
    r_ = static_cast<int>(std::min<int64_t>({static_cast<int64_t>(options_.rank), n, d}));
    u_.reset();
    b_.reset();
    error_terms_.reset();
    if (r_ < 1) {
      error_ = n * d == 0 ? 0.0 : 1.0;
      return;
    }
    const ExecContext& cx = ExecContext::current();
    Tensor wide;
    const Tensor& x = in_dtype(x_in, kRealDType, wide);  // (n, d_in), f32 on a GPU
    u_ = randomized_range(x, n, d, r_, options_.power_iters, RangeSide::columns,
                          kitten_step_seed(options_.seed, options_.step),
                          kitten_draw_stream(tag.layer, tag.kind, KittenDraw::range), tag);
    b_ = cx.empty({static_cast<int64_t>(r_), d}, kRealDType, tag);
    cx.ops().gemm(true, false, r_, d, n, 1.0, u_, r_, x, d, 0.0, b_, d);  // B = Uᵀ·X  (r, d_in)
    if (options_.measure_error) {
      // U's nonzero columns are orthonormal: ‖X − U·B‖² = ‖X‖² − ‖B‖².
      error_terms_ = cx.empty({2}, DType::f64);
      cx.ops().projection_error_terms(x, b_, nullptr, error_terms_);
    } else {
      error_ = -1.0;
    }
  }

  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    check_grad_shapes("rsvd", n_, d_in_, dy, dw);
    const int64_t d_out = rows_cols(dy).second;
    if (r_ > 0) {
      const ExecContext& cx = ExecContext::current();
      Tensor scratch;
      const Tensor& u = in_dtype(u_, dy.dtype(), scratch);  // U in dY's dtype (bf16 on a bf16 GPU)
      Tensor t = cx.empty({static_cast<int64_t>(r_), d_out}, kRealDType);
      cx.ops().gemm(true, false, r_, d_out, n_, 1.0, u, r_, dy, d_out, 0.0, t, d_out);  // T = Uᵀ·dY  (r, d_out)
      // dW += scale · Bᵀ·T  (d_in, d_out)
      cx.ops().gemm(true, false, d_in_, d_out, r_, scale, b_, d_in_, t, d_out, 1.0, dw, d_out);
    }
    u_.reset();
    b_.reset();
  }

  int64_t held_bytes() const override { return u_.bytes() + b_.bytes(); }
  Tensor error_terms() const override { return error_terms_.empty() ? Tensor{} : error_terms_.view(0, {2}); }
  double last_relative_error() const override {
    if (error_terms_.empty()) return error_;
    const auto [err, xx] = QuantizedMatrix::read_error_terms(error_terms_);
    return relative_error_of(err, xx);
  }
  std::string describe() const override {
    return "rsvd r=" + std::to_string(options_.rank) + " q=" + std::to_string(options_.power_iters);
  }

 private:
  CompactOptions options_;
  Tensor u_, b_;
  int64_t n_ = 0, d_in_ = 0;
  int r_ = 0;
  double error_ = -1.0;  // when no terms were measured
  Tensor error_terms_;   // (2) f64 of the last save, or empty
};

}  // namespace

std::unique_ptr<SavedLinearInput> make_rsvd_saved_linear_input(const CompactOptions& options) {
  return std::make_unique<RsvdSavedLinearInput>(options);
}

MOK_NN_END
