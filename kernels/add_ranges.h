#pragma once
// add_ranges: y += x over many f32 ranges in one launch per 256 ranges (the weight gradients
// that a MoK rank's shadow copies return to the expert's owner, one pair of blocks an expert,
// each once an add launch of its own). Each value is y + x rounded once, as add_inplace
// gives. Ranges whose y, x and length lie on the 16-byte grid go through the kernel; any other
// is an add_inplace of its own. No y may overlap another range's y or x in the call.

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace mok::cuda {

struct DeviceAddRange {
  float* y = nullptr;
  const float* x = nullptr;
  int64_t count = 0;  // floats
};

// Enqueues every add on `stream`.
void add_ranges(const std::vector<DeviceAddRange>& ranges, cudaStream_t stream);

}  // namespace mok::cuda
