#include "core/model/init.h"

#include "core/backend/exec_context.h"
#include "core/util/counter_rng.h"
#include "core/util/thread_pool.h"

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
  // Element i is a function of (seed, name, i) alone, so chunks drawn on the rank's threads
  // give the same values on any thread count (a 7B model draws 7e9 of them).
  parallel_for(numel, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = std > 0 ? static_cast<real>(std * counter_normal(seed, stream, i)) : fill;
  });
}


namespace {
thread_local bool with_gradients = true;
thread_local bool with_masters = true;
}  // namespace

ForwardOnlyParameters::ForwardOnlyParameters() : previous_gradients_(with_gradients), previous_masters_(with_masters) {
  with_gradients = false;
  with_masters = false;
}
ForwardOnlyParameters::~ForwardOnlyParameters() {
  with_gradients = previous_gradients_;
  with_masters = previous_masters_;
}
bool ForwardOnlyParameters::gradients() { return with_gradients; }
bool ForwardOnlyParameters::masters() { return with_masters; }

BorrowedParameters::BorrowedParameters() : previous_masters_(with_masters) { with_masters = false; }
BorrowedParameters::~BorrowedParameters() { with_masters = previous_masters_; }

namespace {
// Draws N(0, std²) values (std > 0) into a parameter's copies on the current context's
// device: into the master, or a transient `real` buffer when there is none, then converted to
// the compute copy, as upload_parameter_values places host values. Ops::gaussian_fill runs the
// host's counter arithmetic in double (sqrt(std²) is std exactly in binary arithmetic); the
// device's log and cos may round a rare element one ulp of float away from the host's draw,
// and every rank on a GPU draws with the same kernel. (A 7B model's 7·10⁹ draws took about
// half a minute on a host's 16 threads: docs/benchmarks.md.)
void draw_on_device(const std::string& name, double std, uint64_t seed, Tensor& value, Tensor& compute) {
  const ExecContext& cx = ExecContext::current();
  Tensor staging = value.empty() ? cx.empty(compute.shape(), kRealDType) : Tensor();
  Tensor& drawn = value.empty() ? staging : value;
  cx.ops().gaussian_fill(drawn, std * std, seed, parameter_stream(name));
  if (!compute.empty()) cx.ops().convert(drawn, compute);
}

// Whether make_parameter draws on the device: a GPU context of `real` = f32 (the values
// gaussian_fill writes), std > 0 (fills are a few norms' gains, placed from the host).
bool draws_on_device(const ExecContext& cx, double std) {
  return !cx.is_cpu() && kRealDType == DType::f32 && std > 0;
}
}  // namespace

void upload_parameter_values(const real* host, Tensor& value, Tensor& compute) {
  const ExecContext& cx = ExecContext::current();
  if (!value.empty()) {
    value.copy_from_host(host, value.bytes());
    if (!compute.empty()) cx.ops().convert(value, compute);
    return;
  }
  // No master: the values pass through a `real` buffer that lives for the conversion only.
  Tensor staging = cx.empty(compute.shape(), kRealDType);
  staging.copy_from_host(host, staging.bytes());
  cx.ops().convert(staging, compute);
}

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
    if (with_gradients) p.grad = Tensor(shape, grad_tag);
    draw_parameter_values(name, std, seed, fill, p.value.data(), p.value.numel());
    return p;
  }
  const bool copy = cx.compute_dtype() != kRealDType;
  if (!copy || with_masters) p.value = cx.empty(shape, kRealDType, value_tag);
  if (with_gradients) p.grad = cx.zeros(shape, kRealDType, grad_tag);
  if (copy) p.compute_copy = cx.empty(shape, cx.compute_dtype(), value_tag);
  if (draws_on_device(cx, std)) {
    draw_on_device(name, std, seed, p.value, p.compute_copy);
    return p;
  }
  Tensor host = Tensor::uninitialized(shape);
  draw_parameter_values(name, std, seed, fill, host.data(), host.numel());
  upload_parameter_values(host.data(), p.value, p.compute_copy);
  return p;
}

void draw_parameter_into(const std::string& name, double std, uint64_t seed, Tensor& value, Tensor& compute) {
  if (!value.empty() && value.is_cpu()) {
    draw_parameter_values(name, std, seed, real(0), value.data(), value.numel());
    return;
  }
  if (draws_on_device(ExecContext::current(), std)) {
    draw_on_device(name, std, seed, value, compute);
    return;
  }
  Tensor host = Tensor::uninitialized(value.empty() ? compute.shape() : value.shape());
  draw_parameter_values(name, std, seed, real(0), host.data(), host.numel());
  upload_parameter_values(host.data(), value, compute);
}

MOK_NN_END
