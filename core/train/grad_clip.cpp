#include "core/train/grad_clip.h"

#include <cmath>

#include "core/backend/exec_context.h"

namespace mok {

double global_grad_norm(const std::vector<Parameter*>& params) {
  return std::sqrt(ExecContext::current().ops().grad_norm_sq(params));
}

double clip_factor(double norm, double max_norm) {
  return max_norm > 0.0 && norm > max_norm && std::isfinite(norm) ? max_norm / norm : 1.0;
}

double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm) {
  const double norm = global_grad_norm(params);
  const double factor = clip_factor(norm, max_norm);
  if (factor != 1.0) ExecContext::current().ops().scale_grads(params, factor);
  return norm;
}

}  // namespace mok
