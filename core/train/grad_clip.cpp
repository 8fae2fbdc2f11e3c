#include "core/train/grad_clip.h"

#include <cmath>

#include "core/util/thread_pool.h"

namespace mok {

namespace {
constexpr int64_t kGrain = 1 << 14;
}

double global_grad_norm(const std::vector<Parameter*>& params) {
  double sum_sq = 0.0;
  for (const Parameter* p : params) {
    const real* g = p->grad.data();
    sum_sq += parallel_sum(p->grad.numel(), kGrain, [g](int64_t b, int64_t e) {
      double s = 0.0;
      for (int64_t k = b; k < e; ++k) s += static_cast<double>(g[k]) * g[k];
      return s;
    });
  }
  return std::sqrt(sum_sq);
}

double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm) {
  const double norm = global_grad_norm(params);
  if (max_norm > 0.0 && norm > max_norm && std::isfinite(norm)) {
    const real scale = static_cast<real>(max_norm / norm);
    for (Parameter* p : params) {
      real* g = p->grad.data();
      parallel_for(p->grad.numel(), kGrain, [g, scale](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) g[k] *= scale;
      });
    }
  }
  return norm;
}

}  // namespace mok
