#pragma once
// zero_ranges: sets many device byte ranges to zero in one launch per 256 ranges (the
// gradients of a step, one range per parameter or stacked expert block: 75 fills a step for
// a dense 12-layer model, each a launch of its own through cudaMemsetAsync). Every range must
// start on a 16-byte boundary and hold a multiple of 16 bytes (zero_ranges_fits); the kernel
// stores whole 16-byte words.

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace mok::cuda {

// A plain struct of its own rather than the core's Allocator::ByteRange: that one lives in the
// core's precision namespace (mok::f32 or mok::f64, core/real.h), and the kernels and their
// checks are linked against both.
struct DeviceByteRange {
  void* p = nullptr;
  int64_t bytes = 0;
};

// Whether `range` can go through zero_ranges (16-byte aligned start and length).
bool zero_ranges_fits(const DeviceByteRange& range);

// Zeroes every range on `stream`; throws std::invalid_argument for one that does not fit.
void zero_ranges(const std::vector<DeviceByteRange>& ranges, cudaStream_t stream);

}  // namespace mok::cuda
