#pragma once
// DeviceCall: the scope of one bridge call on a CUDA device (core_bridge.h, Place). Float
// build only: the core computes on a GPU with the float core (fp32 weights, f32 or bf16
// activations).
//
// Contexts: one CUDA ExecContext per (device, activation type) for the process, made on first
// use (register_cuda_backend, make_exec_context) and never destroyed; its stream, caching
// allocator and cuBLASLt state serve every keeper and layer of that place.
//
// Streams: the caller (torch) queues work on its current stream; the core on the context's.
// The constructor records an event on the caller's stream and makes the core's stream wait
// for it, so the core reads the caller's tensors only after they are written; the destructor
// records one on the core's stream and makes the caller's stream wait, so the caller reads
// the results (and reuses the memory the core borrowed) only after the core is done. Memory
// the core frees inside a call goes back to its stream-ordered cache and is reused only by
// later core work, which is ordered after this call's.

#include <memory>
#include <vector>

#include "core/backend/exec_context.h"
#include "interop/torch/csrc/core_bridge.h"
#include "interop/torch/csrc/core_threads.h"

MOK_NN_BEGIN

// The context of `place` (device ≥ 0). Throws std::runtime_error saying why when the device
// cannot be used (no CUDA in this build, no driver, no such GPU).
ExecContext& device_context(const torchext::Place& place);

class DeviceCall {
 public:
  DeviceCall(const torchext::Place& place, void* caller_stream);
  // Without a caller's stream (building a layer, reading a figure): the destructor waits for
  // the core's stream instead, so whatever the core queued is done before the caller goes on.
  explicit DeviceCall(const torchext::Place& place);
  ~DeviceCall();
  DeviceCall(const DeviceCall&) = delete;
  DeviceCall& operator=(const DeviceCall&) = delete;

  ExecContext& context() { return context_; }
  // The caller's device memory as a core tensor for this call (no copy, not counted).
  Tensor borrow(const void* data, std::vector<int64_t> shape, DType dtype) const;
  // The place's activation type: bf16 or f32.
  DType activation_dtype() const { return context_.compute_dtype(); }

 private:
  torchext::CoreCall call_;  // the call lock and the host pool (parameter draws run there)
  int previous_device_;       // the caller's current device, given back at the end
  ExecContext& context_;
  ScopedExecContext scope_;   // binds the place's device on this thread
  void* caller_stream_ = nullptr;
  bool has_caller_stream_ = false;
  void* place_ = nullptr;     // the place's events and stream (device_call.cpp)
};

MOK_NN_END
