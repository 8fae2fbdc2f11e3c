#include "kernels/checks/elementwise_reference.h"

#include <algorithm>
#include <cmath>

#include "core/backend/cross_entropy_kernel.h"
#include "core/backend/rms_norm_kernel.h"
#include "core/backend/rope.h"
#include "core/backend/swiglu_kernel.h"
#include "core/model/embedding.h"

#ifndef MOK_REAL_DOUBLE
#error "the kernel checks compare against the double build of the core (mok_nn_f64)"
#endif

namespace mok::cuda::reference {

void rms_norm_forward(const Values& x, const Values& g, double eps, int64_t n, int64_t d, Values& y, Values& rstd) {
  y.assign(static_cast<size_t>(n * d), 0.0);
  rstd.assign(static_cast<size_t>(n), 0.0);
  mok::f64::rms_norm_forward(x.data(), g.data(), eps, n, d, y.data(), rstd.data());
}

void rms_norm_apply(const Values& x, const Values& g, const Values& rstd, int64_t n, int64_t d, Values& y) {
  y.assign(static_cast<size_t>(n * d), 0.0);
  mok::f64::rms_norm_apply(x.data(), g.data(), rstd.data(), n, d, y.data());
}

void rms_norm_backward(const Values& dy, const Values& x, const Values& g, const Values& rstd, int64_t n, int64_t d,
                       Values& dx, Values& dg) {
  dx.assign(static_cast<size_t>(n * d), 0.0);
  mok::f64::rms_norm_backward(dy.data(), x.data(), g.data(), rstd.data(), n, d, dx.data(), dg.data());
}

void rope_table(int max_positions, int hd, double theta, Values& cos, Values& sin) {
  const mok::f64::RopeTable table(max_positions, hd, theta);
  const int half = hd / 2;
  cos.assign(static_cast<size_t>(max_positions) * half, 0.0);
  sin.assign(cos.size(), 0.0);
  for (int p = 0; p < max_positions; ++p)
    for (int i = 0; i < half; ++i) {
      cos[static_cast<size_t>(p) * half + i] = table.cos_row(p)[i];
      sin[static_cast<size_t>(p) * half + i] = table.sin_row(p)[i];
    }
}

void rope_apply(Values& x, int64_t rows, int64_t ld, int heads, int seq, int pos0, int max_positions, int hd,
                double theta, bool inverse) {
  const mok::f64::RopeTable table(max_positions, hd, theta);
  mok::f64::rope_apply(x.data(), rows, ld, heads, seq, pos0, table, inverse);
}

void swiglu_forward(const Values& a, int64_t n, int64_t f, Values& h) {
  h.assign(static_cast<size_t>(n * f), 0.0);
  mok::f64::swiglu_forward(a.data(), n, f, h.data());
}

void swiglu_backward(const Values& a, const Values& dh, int64_t n, int64_t f, Values& da) {
  da.assign(static_cast<size_t>(n * 2 * f), 0.0);
  mok::f64::swiglu_backward(a.data(), dh.data(), n, f, da.data());
}

void cross_entropy_rows(Values& logits, const std::vector<int32_t>& targets, int64_t n, int64_t vocab,
                        bool write_grad, Values& row_loss) {
  row_loss.assign(static_cast<size_t>(n), 0.0);
  for (int64_t r = 0; r < n; ++r)
    row_loss[r] = mok::f64::cross_entropy_forward(logits.data() + r * vocab, &targets[r], 1, vocab, write_grad)
                      .loss_sum;
}

namespace {
// An Embedding whose weight (and gradient) are the given values.
mok::f64::Embedding embedding_with(const Values& w, const Values* dw, int64_t vocab, int64_t d) {
  mok::f64::Embedding e("check.embedding", vocab, d, 0.02, 1);
  std::copy(w.begin(), w.end(), e.weight().value.data());
  if (dw) std::copy(dw->begin(), dw->end(), e.weight().grad.data());
  return e;
}
}  // namespace

void embedding_forward(const Values& w, const std::vector<int32_t>& tokens, int64_t vocab, int64_t d, Values& x) {
  mok::f64::Embedding e = embedding_with(w, nullptr, vocab, d);
  const mok::f64::Tensor out = e.forward(tokens.data(), static_cast<int64_t>(tokens.size()), false);
  x.assign(out.data(), out.data() + out.numel());
}

void embedding_backward(const Values& dx, const std::vector<int32_t>& tokens, int64_t vocab, int64_t d, Values& dw) {
  const auto n = static_cast<int64_t>(tokens.size());
  // The weight's values do not enter backward; forward only keeps the token ids.
  mok::f64::Embedding e = embedding_with(Values(static_cast<size_t>(vocab * d), 0.0), &dw, vocab, d);
  (void)e.forward(tokens.data(), n, true);
  mok::f64::Tensor grad_out = mok::f64::Tensor::uninitialized({n, d});
  std::copy(dx.begin(), dx.end(), grad_out.data());
  e.backward(grad_out);
  const mok::f64::Tensor& g = e.weight().grad;
  dw.assign(g.data(), g.data() + g.numel());
}

void adamw_step(float* w, const float* g, float* m, float* v, int64_t numel, double lr, double beta1, double beta2,
                double eps, double decay, int64_t t) {
  const double b1 = beta1, b2 = beta2;
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(t));
  const double bias2 = 1.0 - std::pow(b2, static_cast<double>(t));
  for (int64_t k = 0; k < numel; ++k) {
    const double gk = g[k];
    const double mk = b1 * m[k] + (1.0 - b1) * gk;
    const double vk = b2 * v[k] + (1.0 - b2) * gk * gk;
    m[k] = static_cast<float>(mk);
    v[k] = static_cast<float>(vk);
    const double update = (mk / bias1) / (std::sqrt(vk / bias2) + eps);
    w[k] = static_cast<float>(decay * w[k] - lr * update);
  }
}

}  // namespace mok::cuda::reference
