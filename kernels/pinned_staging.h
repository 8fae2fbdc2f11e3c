#pragma once
// PinnedStaging: host-to-device copies that stay asynchronous.
//
// A cudaMemcpyAsync from pageable host memory may first wait for everything already queued
// on the stream (the driver stages it through pinned memory of its own), so a step that
// uploads many small index tensors would wait for the GPU at each one. Here the bytes are
// first copied into a pinned ring buffer (memcpy, on the host) and the device copy is queued
// from there: the host goes on at once. Each queued copy records an event; a part of the
// ring is reused only after the copy that read it has finished (its event), which in a
// ring of kBytes is almost always long past.
//
// One per allocator (per device and stream). Copies larger than kLargest take the plain path.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace mok::cuda {

class PinnedStaging {
 public:
  static constexpr size_t kBytes = size_t(64) << 20;
  static constexpr size_t kLargest = kBytes / 4;

  explicit PinnedStaging(cudaStream_t stream);
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // Queues dst ← host_src (bytes) on the stream; host_src may be reused when this returns.
  void copy_to_device(void* dst, const void* host_src, size_t bytes);

 private:
  struct Pending {
    size_t begin, end;  // ring bytes the copy reads
    cudaEvent_t done;
  };
  void retire_front(bool wait);

  cudaStream_t stream_;
  std::mutex mutex_;
  unsigned char* ring_ = nullptr;  // null when pinned memory could not be had: plain copies
  size_t head_ = 0;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;
};

}  // namespace mok::cuda
