#include "core/train/grad_clip.h"

#include <cmath>

#include "core/backend/exec_context.h"

namespace mok {

double global_grad_norm(const std::vector<Parameter*>& params) {
  return std::sqrt(ExecContext::current().ops().grad_norm_sq(params));
}

double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm) {
  return clip_grad_norm_to(params, global_grad_norm(params), max_norm);
}

double clip_grad_norm_to(const std::vector<Parameter*>& params, double norm, double max_norm) {
  if (max_norm > 0.0 && norm > max_norm && std::isfinite(norm))
    ExecContext::current().ops().scale_grads(params, max_norm / norm);
  return norm;
}

}  // namespace mok
