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
  for_each_word(list, [](const ZeroAt& at, int64_t w) { at.base[w] = make_uint4(0, 0, 0, 0); });
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
