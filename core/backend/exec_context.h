#pragma once
// ExecContext: what one rank computes with — its device, the ops table of that device, the
// allocator its tensors come from, and the compute dtype of activations and of the compute
// copies of weights (`real` on the CPU; f32 or bf16 on a GPU, train.precision). One per rank
// thread or process; layers find theirs with ExecContext::current() (set for the scope of a
// rank with ScopedExecContext), so a model built and run under a CUDA context lives and
// computes on that GPU with no device branches in the layers.
//
// Device contexts other than the CPU come from backends registered at start-up (kernels/
// registers CUDA where it is built): make_exec_context says clearly when none is there.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/ops.h"

MOK_NN_BEGIN

class ExecContext {
 public:
  ExecContext(std::shared_ptr<Ops> ops, DType compute_dtype);

  Ops& ops() const { return *ops_; }
  Device device() const { return ops_->device(); }
  bool is_cpu() const { return device().is_cpu(); }
  DType compute_dtype() const { return compute_dtype_; }
  Allocator& allocator() const { return ops_->allocator(); }

  // Tensors on this context's device. empty(): contents undefined (every element written
  // before it is read); zeros(): zero-filled.
  Tensor empty(std::vector<int64_t> shape, DType dtype, MemTag tag = {}) const;
  Tensor zeros(std::vector<int64_t> shape, DType dtype, MemTag tag = {}) const;
  // Activations: compute dtype, contents undefined.
  Tensor activation(std::vector<int64_t> shape, MemTag tag = {}) const { return empty(std::move(shape), compute_dtype_, std::move(tag)); }
  // Host values copied onto this device.
  Tensor upload(const void* host, std::vector<int64_t> shape, DType dtype, MemTag tag = {}) const;

  // This thread's context: the one a ScopedExecContext set, else the process's CPU context.
  static ExecContext& current();

 private:
  std::shared_ptr<Ops> ops_;
  DType compute_dtype_;
};

// The process's CPU context (CpuOps, compute dtype `real`).
ExecContext& cpu_context();

class ScopedExecContext {
 public:
  explicit ScopedExecContext(ExecContext& context);
  ~ScopedExecContext();
  ScopedExecContext(const ScopedExecContext&) = delete;
  ScopedExecContext& operator=(const ScopedExecContext&) = delete;

 private:
  ExecContext* previous_;
};

// --- device backends

struct DeviceDescription {
  Device device;
  std::string name;         // e.g. "NVIDIA H200"
  int64_t memory_bytes = 0;
  std::string detail;       // e.g. "sm_90, 132 SMs"
  // Versions that decide a GPU run's bits (recorded with each run): "" on the CPU.
  std::string driver_version;   // e.g. "13.0" (the CUDA version the driver supports)
  std::string runtime_version;  // CUDA runtime, e.g. "13.0"
  std::string blas_version;     // cuBLAS, e.g. "13.0.2"
};

struct DeviceBackend {
  DeviceType type = DeviceType::cuda;
  // Devices of this type this process can use (empty when none), and why none when empty.
  std::function<std::vector<DeviceDescription>(std::string* why_none)> list;
  // A context on `device` computing in `compute_dtype`; throws with a clear message.
  std::function<std::unique_ptr<ExecContext>(Device device, DType compute_dtype)> make;
};

void register_device_backend(DeviceBackend backend);
// Every device this process can use: the CPU first, then each registered backend's.
std::vector<DeviceDescription> list_devices();
// Why no device of `type` is usable ("" when one is): no backend built, no driver, no GPU.
std::string device_unavailable_reason(DeviceType type);
// A context for `device` (the CPU's is a fresh CpuOps context); throws std::runtime_error
// saying why when the device cannot be used.
std::unique_ptr<ExecContext> make_exec_context(Device device, DType compute_dtype);

MOK_NN_END
