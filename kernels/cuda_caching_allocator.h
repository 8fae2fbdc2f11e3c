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
//
// While a step is recorded as a CUDA graph (set_recording), its blocks become the graph's —
// those handed out while recording and those freed then: the addresses are baked into the
// graph, so a block it uses is handed out again only inside that recording, never to other
// work that might still hold it at the next replay. The graph keeps them (live or cached)
// until release_recorded_blocks(), when it is destroyed.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "core/tensor/allocator.h"
#include "kernels/pinned_staging.h"

namespace mok::cuda {

class OpProfiler;
class StepRecording;

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
  // One launch for the ranges on the 16-byte grid, one for those on the 4-byte grid, a copy for
  // any other (kernels/copy_ranges.h).
  void copy_ranges(const std::vector<CopyRange>& ranges) override;
  int64_t cached_bytes() const override;
  // Reserved bytes may not pass it: the cache is given back first, then the request fails.
  void set_limit(int64_t bytes) override;
  int64_t device_capacity_bytes() const override;  // the GPU's memory in all (cudaMemGetInfo)

  int64_t reserved_bytes() const override;  // held from the driver: live blocks + cached ones
  int64_t peak_reserved_bytes() const override;
  int64_t peak_live_block_bytes() const override;
  void reset_peak_reserved() override;
  // Gives every cached block back to the driver (waits for the stream first); not while
  // recording a step, and never the blocks of a recorded graph.
  void trim();
  // Device copies and fills (tensor clones, zeroed gradients) go to `profiler` as ops of
  // their own when it is enabled; null: not profiled.
  void set_profiler(OpProfiler* profiler) { profiler_ = profiler; }

  // Recording a step (non-null) or not: copies from the host go through `recording`, copies
  // to the host throw (the host cannot read a value before the graph has run), and blocks
  // handed out become the recorded graph's.
  void set_recording(StepRecording* recording);
  // The recorded graph is gone: its blocks go back to the cache (those still live, when released).
  void release_recorded_blocks();
  int64_t recorded_block_bytes() const;  // held for recorded graphs, live or not

 private:
  OpProfiler* profiler_ = nullptr;
  static int64_t size_class(int64_t bytes);
  // After a block is handed out: the live blocks' bytes (reserved less both caches) into the peak.
  void note_live_locked() { peak_live_ = std::max(peak_live_, reserved_ - cached_ - recorded_cached_); }

  int device_;
  cudaStream_t stream_;
  mutable std::mutex mutex_;
  std::map<int64_t, std::vector<void*>> free_;  // size class → cached blocks
  int64_t cached_ = 0, reserved_ = 0, peak_reserved_ = 0, peak_live_ = 0, limit_ = 0;
  StepRecording* recording_ = nullptr;
  std::unordered_set<void*> recorded_;                   // blocks a recorded graph uses
  std::map<int64_t, std::vector<void*>> recorded_free_;  // those of them not live now
  int64_t recorded_bytes_ = 0, recorded_cached_ = 0;
  std::unique_ptr<PinnedStaging> staging_;
};

}  // namespace mok::cuda
