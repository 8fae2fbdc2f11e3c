#pragma once
// How a GPU data plane measures its collectives.
// CollectiveTimer: the device time of a data plane's collectives on one stream. Each
// collective is bracketed by a pair of CUDA events (Scope); seconds() — after the device has
// caught up, at a step's end — sums their elapsed times and recycles the events. The
// collectives share the compute stream, so this is the time the step spent in them
// (exposed), not the time the host took to queue them.
#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "core/parallel/comm_stats.h"
#include "kernels/op_profiler.h"

namespace mok::cuda {

class CollectiveTimer {
 public:
  explicit CollectiveTimer(cudaStream_t stream) : stream_(stream) {}
  ~CollectiveTimer();
  CollectiveTimer(const CollectiveTimer&) = delete;
  CollectiveTimer& operator=(const CollectiveTimer&) = delete;

  // Records a start event now and an end event when it goes out of scope.
  class Scope {
   public:
    explicit Scope(CollectiveTimer& timer);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CollectiveTimer& timer_;
    cudaEvent_t start_;
  };
  Scope scope() { return Scope(*this); }

  // Seconds of every bracketed collective since the last call (events not yet complete count
  // nothing); the events go back to the pool.
  double seconds();

 private:
  cudaEvent_t take();
  cudaStream_t stream_;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> timed_;
  std::vector<cudaEvent_t> spare_;
};

// The op profiler's scope for one collective, labelled "KIND PURPOSE" (e.g. "nccl_all_to_all
// dispatch"): where MOK_OP_PROFILE shows it.
OpProfiler::Scope profile_collective(OpProfiler& profiler, const char* kind, mok::CommPurpose purpose);

}  // namespace mok::cuda
