#include "core/model/init.h"

#include "core/backend/exec_context.h"
#include "core/util/counter_rng.h"

MOK_NN_BEGIN

uint64_t parameter_stream(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

void draw_parameter_values(const std::string& name, double std, uint64_t seed, real fill, real* out, int64_t numel) {
  const uint64_t stream = parameter_stream(name);
  for (int64_t i = 0; i < numel; ++i) out[i] = std > 0 ? static_cast<real>(std * counter_normal(seed, stream, i)) : fill;
}

namespace {

// Writes host values into the (device) tensors of a parameter: value, and the compute copy.
void place_values(Parameter& p, const Tensor& host) {
  ExecContext& cx = ExecContext::current();
  if (p.value.is_cpu()) {
    if (&host != &p.value) std::copy(host.data(), host.data() + host.numel(), p.value.data());
  } else {
    p.value.copy_from_host(host.data(), host.bytes());
  }
  if (!p.compute_copy.empty()) cx.ops().convert(p.value, p.compute_copy);
}

}  // namespace

Parameter make_parameter(const std::string& name, std::vector<int64_t> shape, double std,
                         uint64_t seed, real fill, bool weight_decay, bool expert) {
  ExecContext& cx = ExecContext::current();
  Parameter p;
  p.name = name;
  p.weight_decay = weight_decay;
  p.expert = expert;
  const MemTag value_tag{MemCategory::parameters, -1, ""}, grad_tag{MemCategory::gradients, -1, ""};
  if (cx.is_cpu()) {
    // The CPU core's layout, unchanged: host tensors of `real`, drawn in place.
    p.value = Tensor(shape, value_tag);
    p.grad = Tensor(shape, grad_tag);
    draw_parameter_values(name, std, seed, fill, p.value.data(), p.value.numel());
    return p;
  }
  Tensor host = Tensor::uninitialized(shape);
  draw_parameter_values(name, std, seed, fill, host.data(), host.numel());
  p.value = cx.empty(shape, kRealDType, value_tag);
  p.grad = cx.zeros(shape, kRealDType, grad_tag);
  if (cx.compute_dtype() != kRealDType) p.compute_copy = cx.empty(shape, cx.compute_dtype(), value_tag);
  place_values(p, host);
  return p;
}

Parameter make_parameter_view(const std::string& name, const Tensor& value_stack, const Tensor& grad_stack,
                              const Tensor& compute_stack, int64_t offset, std::vector<int64_t> shape,
                              double std, uint64_t seed, bool weight_decay, bool expert) {
  Parameter p;
  p.name = name;
  p.weight_decay = weight_decay;
  p.expert = expert;
  p.value = value_stack.view(offset, shape);
  p.grad = grad_stack.view(offset, shape);
  if (!compute_stack.empty()) p.compute_copy = compute_stack.view(offset, shape);
  if (p.value.is_cpu()) {
    draw_parameter_values(name, std, seed, real(0), p.value.data(), p.value.numel());
  } else {
    Tensor host = Tensor::uninitialized(shape);
    draw_parameter_values(name, std, seed, real(0), host.data(), host.numel());
    place_values(p, host);
  }
  return p;
}

MOK_NN_END
