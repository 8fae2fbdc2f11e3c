#pragma once
// OpProfiler: where a training step spends its GPU time, op by op. When enabled, every op of
// CudaOps records a CUDA event before and after its work on the rank's stream; collect()
// waits for the stream and sums the elapsed times by label (an op's name, with the shape for
// matrix products). An op called from inside another op is not counted twice: only the
// outermost scope records. Disabled (the default) a scope costs one branch.
//
// The device time between an op's two events includes any idle gap inside the op (a host
// wait for counts, say); a step's wall time minus the sum over all ops is the time the GPU
// waited for the host between ops.

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mok::cuda {

class OpProfiler {
 public:
  struct Row {
    std::string label;
    int64_t calls = 0;
    double ms = 0.0;       // summed device time
    double host_ms = 0.0;  // summed host time inside the op (launches, allocations, waits)
    double host_before_ms = 0.0;  // summed host time since the previous op ended: the model's own work
  };

  class Scope {
   public:
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      if (owner_) owner_->leave(slot_);
    }

   private:
    friend class OpProfiler;
    Scope(OpProfiler* owner, size_t slot) : owner_(owner), slot_(slot) {}
    OpProfiler* owner_;
    size_t slot_;  // kNotRecorded for a disabled or nested scope
  };

  explicit OpProfiler(cudaStream_t stream) : stream_(stream) {}
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }

  // label() (returning std::string) is called only when the scope records. Host time is
  // measured from here to the scope's end.
  template <typename Label>
  Scope scope(Label&& label) {
    if (!enabled_) return Scope(nullptr, kNotRecorded);
    if (depth_++ > 0) return Scope(this, kNotRecorded);
    return Scope(this, enter(label()));
  }

  // scope() of `profiler`, or a scope that records nothing when there is none.
  template <typename Label>
  static Scope scope_of(OpProfiler* profiler, Label&& label) {
    return profiler ? profiler->scope(std::forward<Label>(label)) : Scope(nullptr, kNotRecorded);
  }

  // Waits for the stream; the rows by label, largest time first; forgets them.
  std::vector<Row> collect();

 private:
  static constexpr size_t kNotRecorded = static_cast<size_t>(-1);
  size_t enter(std::string label);
  void leave(size_t slot);
  cudaEvent_t take_event();

  struct Pending {
    std::string label;
    cudaEvent_t start = nullptr, stop = nullptr;
    std::chrono::steady_clock::time_point host_start;
    double host_ms = 0.0, host_before_ms = 0.0;
  };
  cudaStream_t stream_;
  bool enabled_ = false;
  int depth_ = 0;
  std::chrono::steady_clock::time_point last_leave_{};  // zero: no op has ended since collect()
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> spare_;  // events of collected scopes, reused
};

// The profile as a table: by op family (shapes merged), then the `top` largest op shapes,
// each per step over `steps` steps that took `wall_s` seconds in all. The wall time minus the
// time in ops is what the GPU spent waiting for the host between ops.
std::string format_op_profile(const std::vector<OpProfiler::Row>& rows, const std::string& title, int steps,
                              double wall_s, int top);

}  // namespace mok::cuda
