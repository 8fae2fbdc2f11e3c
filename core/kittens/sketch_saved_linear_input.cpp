#include "core/kittens/sketch_saved_linear_input.h"

#include <algorithm>
#include <cmath>

#include "core/backend/gemm.h"
#include "core/kittens/compact_factor.h"
#include "core/kittens/gaussian_sketch.h"
#include "core/kittens/kitten_key.h"
#include "core/kittens/saved_input_util.h"

MOK_NN_BEGIN

namespace {

class SketchSavedLinearInput final : public SavedLinearInput {
 public:
  explicit SketchSavedLinearInput(const CompactOptions& options) : options_(options) {}

  void save(const Tensor& x, const MemTag& tag) override {
    const auto [n, d] = rows_cols(x);
    n_ = n;
    d_in_ = d;
    r_ = std::max(1, std::min<int>(options_.rank, static_cast<int>(d)));
    tag_ = tag;
    Tensor q = sketch();  // (r, d_in)
    Tensor p({n, static_cast<int64_t>(r_)}, options_.factor_bits ? MemTag{} : tag);
    matmul_nt(x.data(), q.data(), p.data(), n, d, r_);  // P = X·Qᵀ  (n, r)
    QuantizeOptions rounding{options_.factor_bits, options_.stochastic_rounding,
                             kitten_step_seed(options_.seed, options_.step),
                             kitten_draw_stream(tag.layer, tag.kind, KittenDraw::rounding)};
    p_.keep(std::move(p), options_.factor_bits, rounding, tag);
    error_ = options_.measure_error ? measure_error(x, q) : -1.0;
  }

  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    check_grad_shapes("sketch", n_, d_in_, dy, dw);
    const int64_t d_out = rows_cols(dy).second;
    if (n_ > 0) {
      Tensor q = sketch();  // regenerated: the same Q forward used
      Tensor scratch;
      const real* p = p_.dense(scratch).data();
      Tensor t({static_cast<int64_t>(r_), d_out});
      matmul_tn(p, dy.data(), t.data(), r_, n_, d_out);  // T = Pᵀ·dY  (r, d_out)
      // dW += scale · Qᵀ·T  (d_in, d_out)
      gemm(true, false, d_in_, d_out, r_, scale, q.data(), d_in_, t.data(), d_out, real(1), dw.data(), d_out);
    }
    p_.reset();
  }

  int64_t held_bytes() const override { return p_.held_bytes(); }
  double last_relative_error() const override { return error_; }
  std::string describe() const override {
    std::string s = "sketch r=" + std::to_string(options_.rank);
    if (options_.factor_bits) s += " P" + std::to_string(options_.factor_bits) + "bit";
    return s;
  }

 private:
  Tensor sketch() const {
    Tensor q({static_cast<int64_t>(r_), d_in_});
    fill_gaussian(q.data(), r_, d_in_, 1.0 / r_, kitten_step_seed(options_.seed, options_.step),
                  kitten_draw_stream(tag_.layer, tag_.kind, KittenDraw::sketch));
    return q;
  }

  // ‖X − P̃·Q‖/‖X‖ over a strided sample of rows.
  double measure_error(const Tensor& x, const Tensor& q) const {
    if (n_ == 0) return 0.0;
    Tensor scratch;
    const real* p = p_.dense(scratch).data();
    const int64_t stride = error_row_stride(n_);
    const int64_t rows = (n_ + stride - 1) / stride;
    Tensor ps({rows, static_cast<int64_t>(r_)}), xh({rows, d_in_});
    for (int64_t i = 0; i < rows; ++i)
      std::copy_n(p + i * stride * r_, r_, ps.data() + i * r_);
    matmul(ps.data(), q.data(), xh.data(), rows, r_, d_in_);
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < rows; ++i) {
      const real* xr = x.data() + i * stride * d_in_;
      const real* hr = xh.data() + i * d_in_;
      for (int64_t c = 0; c < d_in_; ++c) {
        const double e = static_cast<double>(xr[c]) - static_cast<double>(hr[c]);
        num += e * e;
        den += static_cast<double>(xr[c]) * static_cast<double>(xr[c]);
      }
    }
    return den > 0.0 ? std::sqrt(num / den) : 0.0;
  }

  CompactOptions options_;
  CompactFactor p_;
  MemTag tag_;
  int64_t n_ = 0, d_in_ = 0;
  int r_ = 0;
  double error_ = -1.0;
};

}  // namespace

std::unique_ptr<SavedLinearInput> make_sketch_saved_linear_input(const CompactOptions& options) {
  return std::make_unique<SketchSavedLinearInput>(options);
}

MOK_NN_END
