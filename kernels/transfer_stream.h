#pragma once
// TransferStream: where a GPU data plane runs a group started beside the compute
// (DataPlane::start_group, core/parallel/data_plane.h). The group waits on the transfer stream
// for an event recorded on the compute stream at its start (its data are then ready), runs
// there timed by a CollectiveTimer of that stream (the overlapped time), and records a "moved"
// event; finish() makes the compute stream wait for that event, timed by the plane's
// compute-stream timer (the exposed time). One group at a time (the data plane's rule), so one
// pair of events serves every group.
#include <cuda_runtime.h>

#include <utility>

#include "kernels/collective_timing.h"

namespace mok::cuda {

class TransferStream {
 public:
  // high_priority: the device's highest stream priority (NCCL's kernels then get SMs while the
  // compute stream's products fill the rest); else the default (copy engines need no SMs).
  explicit TransferStream(bool high_priority);
  ~TransferStream();
  TransferStream(const TransferStream&) = delete;
  TransferStream& operator=(const TransferStream&) = delete;

  // Runs enqueue(stream) on the transfer stream after the work `compute` has queued so far.
  template <typename Enqueue>
  void start(cudaStream_t compute, Enqueue&& enqueue) {
    wait_for(compute);
    {
      const auto timed = timer_.scope();
      std::forward<Enqueue>(enqueue)(stream_);
    }
    mark_moved();
  }
  // The compute stream waits for the last started group; `exposed` times the wait.
  void finish(cudaStream_t compute, CollectiveTimer& exposed);

  // Seconds of the started groups since the last call (after the device has caught up).
  double seconds() { return timer_.seconds(); }
  void synchronize() { cudaStreamSynchronize(stream_); }

 private:
  void wait_for(cudaStream_t compute);
  void mark_moved();

  cudaStream_t stream_ = nullptr;
  cudaEvent_t queued_ = nullptr;  // compute stream: the group's data are ready
  cudaEvent_t moved_ = nullptr;   // transfer stream: the group has moved
  CollectiveTimer timer_;         // on stream_ (declared after it: built from it)
};

}  // namespace mok::cuda
