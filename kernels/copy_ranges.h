#pragma once
// copy_ranges: many device-to-device copies in one launch per 256 ranges (the weights of the
// experts a MoK rank shadows, packed to travel and unpacked on arrival: two ranges an expert,
// which as one cudaMemcpyAsync each kept the GPU waiting for the host's launches). Ranges
// whose source, destination and length lie on the 16-byte grid are copied in 16-byte words,
// those on the 4-byte grid (i32 index segments) in 4-byte words, one launch for each kind; any
// other range is a cudaMemcpyAsync of its own. No destination may overlap another range of the
// call.

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace mok::cuda {

struct DeviceCopyRange {
  void* dst = nullptr;
  const void* src = nullptr;
  int64_t bytes = 0;
};

// Enqueues every copy on `stream`.
void copy_ranges(const std::vector<DeviceCopyRange>& ranges, cudaStream_t stream);

}  // namespace mok::cuda
