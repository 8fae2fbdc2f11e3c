#include "core/kittens/sketch_saved_linear_input.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/kittens/compact_factor.h"
#include "core/kittens/gaussian_sketch.h"
#include "core/kittens/kitten_key.h"
#include "core/kittens/saved_input_util.h"

MOK_NN_BEGIN

namespace {

class SketchSavedLinearInput final : public SavedLinearInput {
 public:
  explicit SketchSavedLinearInput(const CompactOptions& options) : options_(options) {}

  void save(const Tensor& x_in, const MemTag& tag) override {
    const auto [n, d] = rows_cols(x_in);
    n_ = n;
    d_in_ = d;
    r_ = std::max(1, std::min<int>(options_.rank, static_cast<int>(d)));
    tag_ = tag;
    error_terms_.reset();
    const ExecContext& cx = ExecContext::current();
    Tensor wide;
    const Tensor& x = in_dtype(x_in, kRealDType, wide);  // (n, d_in), f32 on a GPU
    Tensor q = sketch();                                   // (r, d_in)
    Tensor p = cx.empty({n, static_cast<int64_t>(r_)}, kRealDType, options_.factor_bits ? MemTag{} : tag);
    if (n > 0) cx.ops().gemm(false, true, n, r_, d, 1.0, x, d, q, d, 0.0, p, r_);  // P = X·Qᵀ  (n, r)
    QuantizeOptions rounding{options_.factor_bits, options_.stochastic_rounding,
                             kitten_step_seed(options_.seed, options_.step),
                             kitten_draw_stream(tag.layer, tag.kind, KittenDraw::rounding)};
    p_.keep(std::move(p), options_.factor_bits, rounding, tag);
    error_ = options_.measure_error ? 0.0 : -1.0;
    if (options_.measure_error && n_ > 0) measure_error(x, q);
  }

  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    check_grad_shapes("sketch", n_, d_in_, dy, dw);
    const int64_t d_out = rows_cols(dy).second;
    if (n_ > 0) {
      const ExecContext& cx = ExecContext::current();
      Tensor q = sketch();  // regenerated: the same Q forward used
      Tensor scratch;
      const Tensor& p = p_.dense(scratch, dy.dtype());  // P̃ in dY's dtype (bf16 on a bf16 GPU)
      Tensor t = cx.empty({static_cast<int64_t>(r_), d_out}, kRealDType);
      cx.ops().gemm(true, false, r_, d_out, n_, 1.0, p, r_, dy, d_out, 0.0, t, d_out);  // T = Pᵀ·dY  (r, d_out)
      // dW += scale · Qᵀ·T  (d_in, d_out)
      cx.ops().gemm(true, false, d_in_, d_out, r_, scale, q, d_in_, t, d_out, 1.0, dw, d_out);
    }
    p_.reset();
  }

  int64_t held_bytes() const override { return p_.held_bytes(); }
  Tensor error_terms() const override { return error_terms_.empty() ? Tensor{} : error_terms_.view(0, {2}); }
  double last_relative_error() const override {
    if (error_terms_.empty()) return error_;
    const auto [err, xx] = QuantizedMatrix::read_error_terms(error_terms_);
    return relative_error_of(err, xx);
  }
  std::string describe() const override {
    std::string s = "sketch r=" + std::to_string(options_.rank);
    if (options_.factor_bits) s += " P" + std::to_string(options_.factor_bits) + "bit";
    return s;
  }

 private:
  Tensor sketch() const {
    const ExecContext& cx = ExecContext::current();
    Tensor q = cx.empty({static_cast<int64_t>(r_), d_in_}, kRealDType);
    cx.ops().gaussian_fill(q, 1.0 / r_, kitten_step_seed(options_.seed, options_.step),
                           kitten_draw_stream(tag_.layer, tag_.kind, KittenDraw::sketch));
    return q;
  }

  // [Σ (X − P̃·Q)², Σ X²] over a strided sample of rows, left on the device.
  void measure_error(const Tensor& x, const Tensor& q) {
    const ExecContext& cx = ExecContext::current();
    Tensor scratch;
    const Tensor& p = p_.dense(scratch);
    const int64_t stride = error_row_stride(n_);
    const int64_t rows = (n_ + stride - 1) / stride;
    Tensor sampled;
    if (stride > 1) {  // rows 0, stride, 2·stride, … of P̃
      std::vector<int32_t> index(static_cast<size_t>(rows));
      for (int64_t i = 0; i < rows; ++i) index[static_cast<size_t>(i)] = static_cast<int32_t>(i * stride);
      const Tensor order = cx.upload(index.data(), {rows}, DType::i32);
      sampled = cx.empty({rows, static_cast<int64_t>(r_)}, kRealDType);
      cx.ops().gather_rows(p, order, 1, sampled);
    }
    const Tensor& ps = stride > 1 ? sampled : p;
    Tensor xh = cx.empty({rows, d_in_}, kRealDType);
    cx.ops().gemm(false, false, rows, d_in_, r_, 1.0, ps, r_, q, d_in_, 0.0, xh, d_in_);  // X̂ rows = P̃ rows·Q
    error_terms_ = cx.empty({2}, DType::f64);
    cx.ops().sampled_error_terms(x, stride, xh, error_terms_);
  }

  CompactOptions options_;
  CompactFactor p_;
  MemTag tag_;
  int64_t n_ = 0, d_in_ = 0;
  int r_ = 0;
  double error_ = -1.0;  // when no terms were measured
  Tensor error_terms_;   // (2) f64 of the last save, or empty
};

}  // namespace

std::unique_ptr<SavedLinearInput> make_sketch_saved_linear_input(const CompactOptions& options) {
  return std::make_unique<SketchSavedLinearInput>(options);
}

MOK_NN_END
