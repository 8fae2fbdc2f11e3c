#include "core/backend/exec_context.h"

#include <mutex>
#include <stdexcept>

#include "core/backend/cpu_ops.h"

MOK_NN_BEGIN

ExecContext::ExecContext(std::shared_ptr<Ops> ops, DType compute_dtype)
    : ops_(std::move(ops)), compute_dtype_(compute_dtype) {
  if (!ops_) throw std::invalid_argument("ExecContext: no ops table");
}

Tensor ExecContext::empty(std::vector<int64_t> shape, DType dtype, MemTag tag) const {
  return Tensor::empty(std::move(shape), dtype, allocator(), std::move(tag));
}

Tensor ExecContext::zeros(std::vector<int64_t> shape, DType dtype, MemTag tag) const {
  return Tensor::zeros(std::move(shape), dtype, allocator(), std::move(tag));
}

Tensor ExecContext::upload(const void* host, std::vector<int64_t> shape, DType dtype, MemTag tag) const {
  Tensor t = empty(std::move(shape), dtype, std::move(tag));
  t.copy_from_host(host, t.bytes());
  return t;
}

ExecContext& cpu_context() {
  static ExecContext* context = new ExecContext(std::make_shared<CpuOps>(), kRealDType);  // never destroyed
  return *context;
}

namespace {
thread_local ExecContext* t_current = nullptr;

struct Backends {
  std::mutex mutex;
  std::vector<DeviceBackend> list;
};
Backends& backends() {
  static Backends* b = new Backends;
  return *b;
}
}  // namespace

ExecContext& ExecContext::current() { return t_current ? *t_current : cpu_context(); }

ScopedExecContext::ScopedExecContext(ExecContext& context) : previous_(t_current) {
  context.ops().bind_thread();
  t_current = &context;
}
ScopedExecContext::~ScopedExecContext() { t_current = previous_; }

void register_device_backend(DeviceBackend backend) {
  Backends& b = backends();
  std::lock_guard lock(b.mutex);
  for (auto& existing : b.list)
    if (existing.type == backend.type) {
      existing = std::move(backend);
      return;
    }
  b.list.push_back(std::move(backend));
}

std::vector<DeviceDescription> list_devices() {
  DeviceDescription cpu;
  cpu.device = Device::cpu();
  cpu.name = "CPU";
  cpu.detail = cpu_context().ops().name();
  std::vector<DeviceDescription> out{cpu};
  Backends& b = backends();
  std::lock_guard lock(b.mutex);
  for (const auto& backend : b.list) {
    std::string why;
    for (auto& d : backend.list(&why)) out.push_back(std::move(d));
  }
  return out;
}

std::string device_unavailable_reason(DeviceType type) {
  if (type == DeviceType::cpu) return {};
  Backends& b = backends();
  std::lock_guard lock(b.mutex);
  for (const auto& backend : b.list) {
    if (backend.type != type) continue;
    std::string why;
    if (!backend.list(&why).empty()) return {};
    return why.empty() ? std::string("no CUDA device found") : why;
  }
  return "this build has no CUDA backend (built without nvcc); rebuild where the CUDA toolkit is installed";
}

std::unique_ptr<ExecContext> make_exec_context(Device device, DType compute_dtype) {
  if (device.is_cpu()) {
    if (compute_dtype != kRealDType)
      throw std::runtime_error(std::string("the CPU computes in ") + dtype_name(kRealDType) + ", not " +
                               dtype_name(compute_dtype));
    return std::make_unique<ExecContext>(std::make_shared<CpuOps>(), kRealDType);
  }
  DeviceBackend found;
  {
    Backends& b = backends();
    std::lock_guard lock(b.mutex);
    for (const auto& backend : b.list)
      if (backend.type == device.type) found = backend;
  }
  if (!found.make) throw std::runtime_error("parallel.device: " + device.str() + ": " + device_unavailable_reason(device.type));
  return found.make(device, compute_dtype);
}

MOK_NN_END
