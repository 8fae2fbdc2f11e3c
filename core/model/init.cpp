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
thread_local bool forward_only = false;
}  // namespace

ForwardOnlyParameters::ForwardOnlyParameters() : previous_(forward_only) { forward_only = true; }
ForwardOnlyParameters::~ForwardOnlyParameters() { forward_only = previous_; }
bool ForwardOnlyParameters::gradients() { return !forward_only; }

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
    if (ForwardOnlyParameters::gradients()) p.grad = Tensor(shape, grad_tag);
    draw_parameter_values(name, std, seed, fill, p.value.data(), p.value.numel());
    return p;
  }
  Tensor host = Tensor::uninitialized(shape);
  draw_parameter_values(name, std, seed, fill, host.data(), host.numel());
  p.value = cx.empty(shape, kRealDType, value_tag);
  if (ForwardOnlyParameters::gradients()) p.grad = cx.zeros(shape, kRealDType, grad_tag);
  p.value.copy_from_host(host.data(), host.bytes());
  if (cx.compute_dtype() != kRealDType) {
    p.compute_copy = cx.empty(shape, cx.compute_dtype(), value_tag);
    cx.ops().convert(p.value, p.compute_copy);
  }
  return p;
}

void draw_parameter_into(const std::string& name, double std, uint64_t seed, Tensor& value, Tensor& compute) {
  if (value.is_cpu()) {
    draw_parameter_values(name, std, seed, real(0), value.data(), value.numel());
  } else {
    Tensor host = Tensor::uninitialized(value.shape());
    draw_parameter_values(name, std, seed, real(0), host.data(), host.numel());
    value.copy_from_host(host.data(), host.bytes());
  }
  if (!compute.empty()) ExecContext::current().ops().convert(value, compute);
}

MOK_NN_END
