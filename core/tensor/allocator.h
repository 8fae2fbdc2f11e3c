#pragma once
// Allocator: where a tensor's bytes come from and how they are filled and copied, per
// device. The CPU's is the block cache (core/tensor/block_cache.h), shared by the ranks of a
// process; a CUDA device's is a stream-ordered caching allocator
// (kernels/cuda_caching_allocator.h) whose fills and copies are ordered with the device's
// compute stream. Every Tensor and ByteBuffer remembers the allocator it came from, so that
// clone(), zero() and the destructor work on any device.

#include <cstdint>
#include <vector>

#include "core/tensor/dtype.h"

MOK_NN_BEGIN

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // A block of at least `bytes` (> 0), 64-byte aligned on the host and 256-byte aligned on
  // a GPU; contents undefined. Throws std::bad_alloc (or a subclass naming the device) when
  // the memory is not there.
  virtual void* allocate(int64_t bytes) = 0;
  // Gives back a block from allocate(bytes), with the same `bytes`.
  virtual void release(void* block, int64_t bytes) = 0;
  // Sets `bytes` bytes at p (this device's memory) to `value`.
  virtual void memset(void* p, int value, int64_t bytes) = 0;
  // Sets every range of this device's memory to zero: a memset each here; a GPU's allocator
  // zeroes them in one launch (a step's gradients are dozens of ranges).
  struct ByteRange {
    void* p = nullptr;
    int64_t bytes = 0;
  };
  virtual void zero_ranges(const std::vector<ByteRange>& ranges) {
    for (const ByteRange& r : ranges) memset(r.p, 0, r.bytes);
  }
  // Copies between this device's memory and host memory, and within this device. A copy to
  // the host has finished when the call returns.
  virtual void copy_to_host(void* host_dst, const void* src, int64_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, int64_t bytes) = 0;
  virtual void copy_within(void* dst, const void* src, int64_t bytes) = 0;
  // Copies every range within this device's memory: a copy_within each here; a GPU's
  // allocator copies them in one launch (a MoK rank packs its shadowed experts' weights as
  // two ranges an expert). No destination may overlap another range of the call.
  struct CopyRange {
    void* dst = nullptr;
    const void* src = nullptr;
    int64_t bytes = 0;
  };
  virtual void copy_ranges(const std::vector<CopyRange>& ranges) {
    for (const CopyRange& r : ranges)
      if (r.bytes > 0) copy_within(r.dst, r.src, r.bytes);
  }
  // What it holds from its device, in blocks (size classes): reserved = live blocks + cached
  // ones, as PyTorch reports it; reserved ≥ the live bytes of the tensors it serves.
  virtual int64_t cached_bytes() const = 0;    // free blocks kept for reuse
  virtual int64_t reserved_bytes() const = 0;  // live blocks + cached ones
  // Highest reserved_bytes() since reset_peak_reserved() (a trainer resets it every step).
  virtual int64_t peak_reserved_bytes() const = 0;
  // Highest bytes of live blocks (the tensors' blocks at their size class, no cache) since
  // reset_peak_reserved(): what a limit binds, as the cache is given back before a request
  // fails, so the figure a memory plan is held to.
  virtual int64_t peak_live_block_bytes() const = 0;
  virtual void reset_peak_reserved() = 0;  // both peaks
  // A cap on what it may hold from its device, cache included (parallel.device_memory_limit;
  // 0 = none). The CPU's shared block cache keeps none: the rank's MemoryTracker caps a CPU
  // rank's tensors.
  virtual void set_limit(int64_t bytes) { (void)bytes; }
  // The memory its device has in all, in bytes; 0 for the host, whose memory the ranks of a
  // process share with everything else.
  virtual int64_t device_capacity_bytes() const { return 0; }
};

// The host's allocator (the block cache).
Allocator& cpu_allocator();

MOK_NN_END
