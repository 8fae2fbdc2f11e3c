#include "kernels/zero_ranges.h"

#include <stdexcept>
#include <string>

#include "kernels/range_list.cuh"

namespace mok::cuda {
namespace {

struct ZeroAt {
  uint4* base;
};

__global__ void zero_ranges_kernel(const __grid_constant__ RangeList<ZeroAt> list) {
  const int64_t total = list.start[list.count];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int r = range_of_word(list, i);
    list.at[r].base[i - list.start[r]] = make_uint4(0, 0, 0, 0);
  }
}

}  // namespace

bool zero_ranges_fits(const DeviceByteRange& range) { return on_word_grid(range.p, range.bytes); }

void zero_ranges(const std::vector<DeviceByteRange>& ranges, cudaStream_t stream) {
  for (const DeviceByteRange& r : ranges)
    if (!zero_ranges_fits(r))
      throw std::invalid_argument("zero_ranges: a range of " + std::to_string(r.bytes) +
                                  " bytes is not 16-byte aligned in start and length");
  auto launch = [stream](const RangeList<ZeroAt>& list) {
    zero_ranges_kernel<<<range_blocks(list.start[list.count]), kRangeThreads, 0, stream>>>(list);
    MOK_CUDA_CHECK_LAUNCH();
  };
  RangeBatcher<ZeroAt, decltype(launch)> batch(launch);
  for (const DeviceByteRange& r : ranges) batch.add({static_cast<uint4*>(r.p)}, r.bytes / 16);
  batch.finish();
}

}  // namespace mok::cuda
