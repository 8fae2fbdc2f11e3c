#include "core/train/adamw.h"

#include <cmath>
#include <stdexcept>

#include "core/util/thread_pool.h"

namespace mok {

namespace {
constexpr int64_t kGrain = 1 << 14;  // elements per chunk of the element-wise update
}

AdamW::AdamW(std::vector<Parameter*> params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {
  m_.reserve(params_.size());
  v_.reserve(params_.size());
  for (Parameter* p : params_) {
    if (p->grad.numel() != p->value.numel()) {
      throw std::invalid_argument("AdamW: parameter '" + p->name + "' has value " +
                                  p->value.shape_string() + " but grad " + p->grad.shape_string());
    }
    MemTag tag{MemCategory::optimizer_state, -1, "adamw"};
    m_.emplace_back(p->value.shape(), tag);
    v_.emplace_back(p->value.shape(), tag);
  }
}

void AdamW::step(double lr) {
  ++step_;
  const double b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(step_));
  const double bias2 = 1.0 - std::pow(b2, static_cast<double>(step_));
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    real* w = p.value.data();
    const real* g = p.grad.data();
    real* m = m_[i].data();
    real* v = v_[i].data();
    const double decay = p.weight_decay ? 1.0 - lr * options_.weight_decay : 1.0;
    parallel_for(p.value.numel(), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        const double gk = g[k];
        const double mk = b1 * m[k] + (1.0 - b1) * gk;
        const double vk = b2 * v[k] + (1.0 - b2) * gk * gk;
        m[k] = static_cast<real>(mk);
        v[k] = static_cast<real>(vk);
        const double update = (mk / bias1) / (std::sqrt(vk / bias2) + eps);
        w[k] = static_cast<real>(decay * w[k] - lr * update);
      }
    });
  }
}

}  // namespace mok
