#include "kernels/copy_ranges.h"

#include "kernels/range_list.cuh"

namespace mok::cuda {
namespace {

template <typename Word>
struct CopyAt {
  Word* dst;
  const Word* src;
};

template <typename Word>
__global__ void copy_ranges_kernel(const __grid_constant__ RangeList<CopyAt<Word>> list) {
  const int64_t total = list.start[list.count];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int r = range_of_word(list, i);
    const int64_t w = i - list.start[r];
    list.at[r].dst[w] = list.at[r].src[w];
  }
}

template <typename Word>
auto launcher(cudaStream_t stream) {
  return [stream](const RangeList<CopyAt<Word>>& list) {
    copy_ranges_kernel<Word><<<range_blocks(list.start[list.count]), kRangeThreads, 0, stream>>>(list);
    MOK_CUDA_CHECK_LAUNCH();
  };
}

bool aligned(const void* p, int64_t bytes, int64_t word) {
  return reinterpret_cast<uintptr_t>(p) % word == 0 && bytes % word == 0;
}

}  // namespace

void copy_ranges(const std::vector<DeviceCopyRange>& ranges, cudaStream_t stream) {
  auto launch16 = launcher<uint4>(stream);
  auto launch4 = launcher<uint32_t>(stream);
  RangeBatcher<CopyAt<uint4>, decltype(launch16)> words16(launch16);
  RangeBatcher<CopyAt<uint32_t>, decltype(launch4)> words4(launch4);
  for (const DeviceCopyRange& r : ranges) {
    if (r.bytes <= 0) continue;
    if (aligned(r.dst, r.bytes, 16) && aligned(r.src, r.bytes, 16))
      words16.add({static_cast<uint4*>(r.dst), static_cast<const uint4*>(r.src)}, r.bytes / 16);
    else if (aligned(r.dst, r.bytes, 4) && aligned(r.src, r.bytes, 4))
      words4.add({static_cast<uint32_t*>(r.dst), static_cast<const uint32_t*>(r.src)}, r.bytes / 4);
    else
      MOK_CUDA_CHECK(cudaMemcpyAsync(r.dst, r.src, static_cast<size_t>(r.bytes), cudaMemcpyDeviceToDevice, stream));
  }
  words16.finish();
  words4.finish();
}

}  // namespace mok::cuda
