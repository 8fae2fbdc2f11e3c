#include "kernels/pinned_staging.h"

#include <cstring>

#include "kernels/cuda_check.h"

namespace mok::cuda {

namespace {
constexpr size_t kAlign = 256;
}

PinnedStaging::PinnedStaging(cudaStream_t stream) : stream_(stream) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, kBytes, cudaHostAllocDefault) == cudaSuccess) {
    ring_ = static_cast<unsigned char*>(p);
  } else {
    cudaGetLastError();  // no pinned memory: every copy takes the plain path
  }
}

PinnedStaging::~PinnedStaging() {
  while (!pending_.empty()) retire_front(true);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  if (ring_) cudaFreeHost(ring_);
}

void PinnedStaging::retire_front(bool wait) {
  Pending& p = pending_.front();
  if (wait) MOK_CUDA_CHECK(cudaEventSynchronize(p.done));
  spare_events_.push_back(p.done);
  pending_.pop_front();
}

void PinnedStaging::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  if (!ring_ || bytes > kLargest) {
    MOK_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    return;
  }
  std::lock_guard lock(mutex_);
  // Finished copies give their bytes back without waiting.
  while (!pending_.empty() && cudaEventQuery(pending_.front().done) == cudaSuccess) retire_front(false);
  const size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
  if (head_ + size > kBytes) head_ = 0;
  const size_t begin = head_, end = head_ + size;
  // Copies still reading [begin, end) are the oldest ones (the ring fills in order): wait.
  while (!pending_.empty() && pending_.front().begin < end && begin < pending_.front().end) retire_front(true);
  std::memcpy(ring_ + begin, host_src, bytes);
  MOK_CUDA_CHECK(cudaMemcpyAsync(dst, ring_ + begin, bytes, cudaMemcpyHostToDevice, stream_));
  cudaEvent_t done = nullptr;
  if (spare_events_.empty()) {
    MOK_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  } else {
    done = spare_events_.back();
    spare_events_.pop_back();
  }
  MOK_CUDA_CHECK(cudaEventRecord(done, stream_));
  pending_.push_back({begin, end, done});
  head_ = end;
}

}  // namespace mok::cuda
