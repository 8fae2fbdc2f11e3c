#pragma once
// HostReading: a small device tensor's values on their way to the host, so that the step
// need not wait for the device when it makes them (a MoE layer's router loss sums and
// expert loads, read once the step is done).
//
// Ops::read_later(t) makes one; values() waits where the values are not there yet. A GPU
// reading made while a step is recorded (step_graph.h) is a copy inside the recording: after
// each replay has finished it holds that replay's values, so the recorded step's readings
// are read again after every replay.

#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "core/tensor/tensor.h"

MOK_NN_BEGIN

class HostReading {
 public:
  virtual ~HostReading() = default;
  virtual size_t bytes() const = 0;
  // The bytes (waiting for the device where needed); valid while the reading lives.
  virtual const void* data() = 0;
  template <class T>
  std::vector<T> values() {
    std::vector<T> out(bytes() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), data(), out.size() * sizeof(T));
    return out;
  }
};

// The values copied now (t.copy_to_host: waits for the device).
std::shared_ptr<HostReading> copied_reading(const Tensor& t);

MOK_NN_END
