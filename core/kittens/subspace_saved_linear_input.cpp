#include "core/kittens/subspace_saved_linear_input.h"

#include <algorithm>
#include <cmath>

#include "core/backend/exec_context.h"
#include "core/kittens/compact_factor.h"
#include "core/kittens/kitten_key.h"
#include "core/kittens/quantized_matrix.h"
#include "core/kittens/randomized_range.h"
#include "core/kittens/saved_input_util.h"

MOK_NN_BEGIN

namespace {

class SubspaceSavedLinearInput final : public SavedLinearInput {
 public:
  SubspaceSavedLinearInput(std::shared_ptr<SubspaceBasis> basis, const CompactOptions& options, int refresh_every)
      : basis_(std::move(basis)), options_(options), refresh_every_(refresh_every) {}

  void save(const Tensor& x_in, const MemTag& tag) override {
    const auto [n, d] = rows_cols(x_in);
    n_ = n;
    d_in_ = d;
    const int r = std::max(1, std::min<int>(options_.rank, static_cast<int>(d)));
    const ExecContext& cx = ExecContext::current();
    Tensor wide;
    const Tensor& x = in_dtype(x_in, kRealDType, wide);  // (n, d_in), f32 on a GPU
    {
      std::lock_guard lock(basis_->mutex);
      const bool stale = !basis_->v || basis_->v->dim(0) != d || basis_->rank != r ||
                         (basis_->refreshed_step != options_.step &&
                          (refresh_every_ <= 0 || options_.step - basis_->refreshed_step >= refresh_every_ ||
                           options_.step < basis_->refreshed_step));
      if (stale && n > 0) {
        MemTag basis_tag = tag;
        basis_tag.kind += ".basis";
        basis_->v = std::make_shared<const Tensor>(
            randomized_range(x, n, d, r, options_.power_iters, RangeSide::rows,
                             kitten_step_seed(options_.seed, options_.step),
                             kitten_draw_stream(tag.layer, tag.kind, KittenDraw::subspace), basis_tag));
        basis_->rank = r;
        basis_->refreshed_step = options_.step;
        ++basis_->refreshes;
      }
      v_ = basis_->v;
    }
    r_ = v_ ? static_cast<int>(v_->dim(1)) : 0;
    if (r_ == 0) return;
    error_terms_.reset();
    Tensor p = cx.empty({n, static_cast<int64_t>(r_)}, kRealDType, options_.factor_bits ? MemTag{} : tag);
    if (n > 0) cx.ops().gemm(false, false, n, r_, d, 1.0, x, d, *v_, r_, 0.0, p, r_);  // P = X·V  (n, r)
    const Tensor p_full = p.view(0, {n, static_cast<int64_t>(r_)});  // P before quantization
    QuantizeOptions rounding{options_.factor_bits, options_.stochastic_rounding,
                             kitten_step_seed(options_.seed, options_.step),
                             kitten_draw_stream(tag.layer, tag.kind, KittenDraw::rounding)};
    p_.keep(std::move(p), options_.factor_bits, rounding, tag);
    if (options_.measure_error) {
      // X − P̃·Vᵀ = (X − P·Vᵀ) + (P − P̃)·Vᵀ, two orthogonal parts (V orthonormal, (X − P·Vᵀ)·V = 0):
      // [‖X‖² − ‖P‖² + ‖P − P̃‖², ‖X‖²].
      const Tensor& quant = p_.error_terms();
      error_terms_ = cx.empty({2}, DType::f64);
      cx.ops().projection_error_terms(x, p_full, quant.empty() ? nullptr : &quant, error_terms_);
    } else {
      error_ = -1.0;
    }
  }

  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    check_grad_shapes("subspace", n_, d_in_, dy, dw);
    const int64_t d_out = rows_cols(dy).second;
    if (r_ > 0 && n_ > 0) {
      const ExecContext& cx = ExecContext::current();
      Tensor scratch;
      const Tensor& p = p_.dense(scratch, dy.dtype());  // P̃ in dY's dtype (bf16 on a bf16 GPU)
      Tensor t = cx.empty({static_cast<int64_t>(r_), d_out}, kRealDType);
      cx.ops().gemm(true, false, r_, d_out, n_, 1.0, p, r_, dy, d_out, 0.0, t, d_out);  // T = Pᵀ·dY  (r, d_out)
      // dW += scale · V·T  (d_in, d_out)
      cx.ops().gemm(false, false, d_in_, d_out, r_, scale, *v_, r_, t, d_out, 1.0, dw, d_out);
    }
    p_.reset();
    v_.reset();
  }

  int64_t held_bytes() const override { return p_.held_bytes(); }
  Tensor error_terms() const override { return error_terms_.empty() ? Tensor{} : error_terms_.view(0, {2}); }
  double last_relative_error() const override {
    if (error_terms_.empty()) return error_;
    const auto [err, xx] = QuantizedMatrix::read_error_terms(error_terms_);
    return relative_error_of(err, xx);
  }
  std::string describe() const override {
    std::string s = "subspace r=" + std::to_string(options_.rank) + " every " + std::to_string(refresh_every_);
    if (options_.factor_bits) s += " P" + std::to_string(options_.factor_bits) + "bit";
    return s;
  }

 private:
  std::shared_ptr<SubspaceBasis> basis_;
  std::shared_ptr<const Tensor> v_;
  CompactOptions options_;
  int refresh_every_;
  CompactFactor p_;
  int64_t n_ = 0, d_in_ = 0;
  int r_ = 0;
  double error_ = -1.0;  // when no terms were measured
  Tensor error_terms_;   // (2) f64 of the last save, or empty
};

}  // namespace

std::unique_ptr<SavedLinearInput> make_subspace_saved_linear_input(std::shared_ptr<SubspaceBasis> basis,
                                                                   const CompactOptions& options,
                                                                   int refresh_every) {
  return std::make_unique<SubspaceSavedLinearInput>(std::move(basis), options, refresh_every);
}

MOK_NN_END
