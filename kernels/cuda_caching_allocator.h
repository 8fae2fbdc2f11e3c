#pragma once
// CudaCachingAllocator: the Allocator of one CUDA device (core/tensor/allocator.h).
//
// Stream-ordered: every tensor of a rank is used on that rank's compute stream, so a freed
// block can be handed out again at once — any kernel that used it was enqueued earlier on the
// same stream and finishes first. Fills and copies are enqueued on that stream; a copy to the
// host waits for it, a copy from the host does not (it goes through pinned staging,
// kernels/pinned_staging.h).
//
// Blocks are 256-byte aligned and grouped by size class (the request rounded up by at most
// 1/8, as the CPU's block cache does), so expert batches whose row count changes a little each
// step find a block. Freed blocks stay reserved for reuse; when cudaMalloc fails, every cached
// block is given back and the allocation tried once more, and then the error names the device
// and what was live and reserved. reserved = live + cached, as PyTorch reports it.

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor/allocator.h"
#include "kernels/pinned_staging.h"

namespace mok::cuda {

class OpProfiler;

class CudaCachingAllocator final : public mok::Allocator {
 public:
  CudaCachingAllocator(int device, cudaStream_t stream);
  ~CudaCachingAllocator() override;

  mok::Device device() const override { return mok::Device::cuda(device_); }
  void* allocate(int64_t bytes) override;
  void release(void* block, int64_t bytes) override;
  void memset(void* p, int value, int64_t bytes) override;
  // One launch for the 16-byte aligned ranges (kernels/zero_ranges.h), a memset for the others.
  void zero_ranges(const std::vector<ByteRange>& ranges) override;
  void copy_to_host(void* host_dst, const void* src, int64_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, int64_t bytes) override;
  void copy_within(void* dst, const void* src, int64_t bytes) override;
  int64_t cached_bytes() const override;
  // Reserved bytes may not pass it: the cache is given back first, then the request fails.
  void set_limit(int64_t bytes) override;

  int64_t reserved_bytes() const override;  // held from the driver: live blocks + cached ones
  int64_t peak_reserved_bytes() const override;
  void reset_peak_reserved() override;
  // Gives every cached block back to the driver (waits for the stream first).
  void trim();
  // Device copies and fills (tensor clones, zeroed gradients) go to `profiler` as ops of
  // their own when it is enabled; null: not profiled.
  void set_profiler(OpProfiler* profiler) { profiler_ = profiler; }

 private:
  OpProfiler* profiler_ = nullptr;
  static int64_t size_class(int64_t bytes);

  int device_;
  cudaStream_t stream_;
  mutable std::mutex mutex_;
  std::map<int64_t, std::vector<void*>> free_;  // size class → cached blocks
  int64_t cached_ = 0, reserved_ = 0, peak_reserved_ = 0, limit_ = 0;
  std::unique_ptr<PinnedStaging> staging_;
};

}  // namespace mok::cuda
