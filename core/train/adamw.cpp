#include "core/train/adamw.h"

#include <stdexcept>

#include "core/backend/exec_context.h"

namespace mok {

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
    // On the parameter's device, `real` (fp32 on a GPU).
    m_.push_back(Tensor::zeros(p->value.shape(), kRealDType, p->value.allocator(), tag));
    v_.push_back(Tensor::zeros(p->value.shape(), kRealDType, p->value.allocator(), tag));
  }
}

void AdamW::step(double lr, double grad_scale) {
  ++step_;
  AdamWStep st;
  st.lr = lr;
  st.beta1 = options_.beta1;
  st.beta2 = options_.beta2;
  st.eps = options_.eps;
  st.weight_decay = options_.weight_decay;
  st.t = step_;
  st.grad_scale = grad_scale;
  ExecContext::current().ops().adamw_step(params_, m_, v_, st);
}

}  // namespace mok
