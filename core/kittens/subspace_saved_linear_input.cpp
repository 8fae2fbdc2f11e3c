#include "core/kittens/subspace_saved_linear_input.h"

#include <algorithm>
#include <cmath>

#include "core/backend/gemm.h"
#include "core/kittens/compact_factor.h"
#include "core/kittens/kitten_key.h"
#include "core/kittens/randomized_range.h"
#include "core/kittens/saved_input_util.h"

MOK_NN_BEGIN

namespace {

class SubspaceSavedLinearInput final : public SavedLinearInput {
 public:
  SubspaceSavedLinearInput(std::shared_ptr<SubspaceBasis> basis, const CompactOptions& options, int refresh_every)
      : basis_(std::move(basis)), options_(options), refresh_every_(refresh_every) {}

  void save(const Tensor& x, const MemTag& tag) override {
    const auto [n, d] = rows_cols(x);
    n_ = n;
    d_in_ = d;
    const int r = std::max(1, std::min<int>(options_.rank, static_cast<int>(d)));
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
            randomized_range(x.data(), n, d, r, options_.power_iters, RangeSide::rows,
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
    Tensor p({n, static_cast<int64_t>(r_)}, options_.factor_bits ? MemTag{} : tag);
    matmul(x.data(), v_->data(), p.data(), n, d, r_);  // P = X·V  (n, r)
    const double pp = sum_squares(p.data(), p.numel());
    QuantizeOptions rounding{options_.factor_bits, options_.stochastic_rounding,
                             kitten_step_seed(options_.seed, options_.step),
                             kitten_draw_stream(tag.layer, tag.kind, KittenDraw::rounding)};
    const double quant_err = p_.keep(std::move(p), options_.factor_bits, rounding, tag);
    if (options_.measure_error) {
      // X − P̃·Vᵀ = (X − P·Vᵀ) + (P − P̃)·Vᵀ, two orthogonal parts (V orthonormal, (X − P·Vᵀ)·V = 0).
      const double xx = sum_squares(x.data(), x.numel());
      error_ = xx > 0.0 ? std::sqrt((std::max(0.0, xx - pp) + quant_err) / xx) : 0.0;
    } else {
      error_ = -1.0;
    }
  }

  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    check_grad_shapes("subspace", n_, d_in_, dy, dw);
    const int64_t d_out = rows_cols(dy).second;
    if (r_ > 0 && n_ > 0) {
      Tensor scratch;
      const real* p = p_.dense(scratch).data();
      Tensor t({static_cast<int64_t>(r_), d_out});
      matmul_tn(p, dy.data(), t.data(), r_, n_, d_out);  // T = Pᵀ·dY  (r, d_out)
      // dW += scale · V·T  (d_in, d_out)
      gemm(false, false, d_in_, d_out, r_, scale, v_->data(), r_, t.data(), d_out, real(1), dw.data(), d_out);
    }
    p_.reset();
    v_.reset();
  }

  int64_t held_bytes() const override { return p_.held_bytes(); }
  double last_relative_error() const override { return error_; }
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
  double error_ = -1.0;
};

}  // namespace

std::unique_ptr<SavedLinearInput> make_subspace_saved_linear_input(std::shared_ptr<SubspaceBasis> basis,
                                                                   const CompactOptions& options,
                                                                   int refresh_every) {
  return std::make_unique<SubspaceSavedLinearInput>(std::move(basis), options, refresh_every);
}

MOK_NN_END
