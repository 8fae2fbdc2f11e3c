#include "kernels/zero_ranges.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"

namespace mok::cuda {
namespace {

constexpr int kMaxRanges = 256;  // per launch: the argument stays about 4 KiB
constexpr int kThreads = 256;

// The ranges of one launch as prefix sums of 16-byte words: word i of the launch lies in
// range r with start[r] ≤ i < start[r + 1].
struct RangeList {
  int count = 0;
  int64_t start[kMaxRanges + 1];
  uint4* base[kMaxRanges];
};

__global__ void zero_ranges_kernel(const __grid_constant__ RangeList list) {
  const int64_t total = list.start[list.count];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    int lo = 0, hi = list.count;  // neighbouring threads find the same range (one broadcast read)
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (list.start[mid] <= i) lo = mid;
      else hi = mid;
    }
    list.base[lo][i - list.start[lo]] = make_uint4(0, 0, 0, 0);
  }
}

void launch(const RangeList& list, cudaStream_t stream) {
  const int64_t words = list.start[list.count];
  if (words == 0) return;
  // at most 16 blocks per multiprocessor of an H200 (132); each thread loops over the rest,
  // so any GPU gets every word
  const int64_t blocks = std::min<int64_t>((words + kThreads - 1) / kThreads, 132 * 16);
  zero_ranges_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(list);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool zero_ranges_fits(const DeviceByteRange& range) {
  return reinterpret_cast<uintptr_t>(range.p) % 16 == 0 && range.bytes % 16 == 0 && range.bytes >= 0;
}

void zero_ranges(const std::vector<DeviceByteRange>& ranges, cudaStream_t stream) {
  for (const DeviceByteRange& r : ranges)
    if (!zero_ranges_fits(r))
      throw std::invalid_argument("zero_ranges: a range of " + std::to_string(r.bytes) +
                                  " bytes is not 16-byte aligned in start and length");
  RangeList list;
  list.start[0] = 0;
  for (const DeviceByteRange& r : ranges) {
    if (r.bytes == 0) continue;
    list.base[list.count] = static_cast<uint4*>(r.p);
    list.start[list.count + 1] = list.start[list.count] + r.bytes / 16;
    if (++list.count == kMaxRanges) {
      launch(list, stream);
      list.count = 0;
    }
  }
  launch(list, stream);
}

}  // namespace mok::cuda
