#include "core/model/swiglu_mlp.h"

#include "core/backend/swiglu_kernel.h"
#include "core/util/thread_pool.h"

MOK_NN_BEGIN

SwiGluMlp::SwiGluMlp(const std::string& prefix, int64_t d, int64_t f, double init_std,
                     double out_std, uint64_t seed, int layer, const std::string& kind, bool expert)
    : d_(d), f_(f), layer_(layer), kind_(kind),
      up_(prefix + ".w_up", d, 2 * f, init_std, seed, layer, kind + ".up.input", expert),
      down_(prefix + ".w_down", f, d, out_std, seed, layer, kind + ".down.input", expert),
      a_(layer, kind + ".act.input") {}

Tensor SwiGluMlp::forward(const Tensor& x, bool keep, bool keep_input, bool keep_hidden) {
  const int64_t n = x.dim(0);
  keep_hidden = keep_hidden && !recompute_hidden_;
  Tensor a = up_.forward(x, keep && keep_input,
                         a_.output_tag(keep));
  Tensor h = Tensor::uninitialized({n, f_});
  swiglu_forward(a.data(), n, f_, h.data());
  Tensor y = down_.forward(h, keep && keep_hidden);
  if (keep) {
    a_.keep(std::move(a));
    hidden_kept_ = keep_hidden;
  }
  return y;
}

Tensor SwiGluMlp::backward(const Tensor& dy, const Tensor* recomputed_x) {
  return backward_gated(dy, nullptr, nullptr, recomputed_x);
}

Tensor SwiGluMlp::backward_gated(const Tensor& dy, const real* gate, real* dgate,
                                 const Tensor* recomputed_x) {
  const int64_t n = dy.dim(0);
  Tensor h;  // (n, f), recomputed from a when needed
  if (gate || !hidden_kept_) {
    h = Tensor::uninitialized({n, f_});
    swiglu_forward(a_.get().data(), n, f_, h.data());
  }
  Tensor dh = down_.input_grad(dy);  // (n, f) = dy·Wdownᵀ, before the gate
  if (gate) {
    Tensor dy_gated = Tensor::uninitialized({n, d_});
    parallel_for(n, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        real* dhr = dh.data() + r * f_;
        const real* hr = h.data() + r * f_;
        real s = 0;
        for (int64_t j = 0; j < f_; ++j) s += dhr[j] * hr[j];
        dgate[r] = s;  // dy·(h·Wdown) = (dy·Wdownᵀ)·h
        for (int64_t j = 0; j < f_; ++j) dhr[j] *= gate[r];
        const real* dyr = dy.data() + r * d_;
        real* dgr = dy_gated.data() + r * d_;
        for (int64_t j = 0; j < d_; ++j) dgr[j] = gate[r] * dyr[j];
      }
    });
    down_.weight_grad(dy_gated, hidden_kept_ ? nullptr : &h);
  } else {
    down_.weight_grad(dy, hidden_kept_ ? nullptr : &h);
  }
  h.reset();
  Tensor da = Tensor::uninitialized({n, 2 * f_});
  swiglu_backward(a_.get().data(), dh.data(), n, f_, da.data());
  a_.reset();
  dh.reset();
  Tensor dx = up_.input_grad(da);
  up_.weight_grad(da, recomputed_x);
  return dx;
}

MOK_NN_END
