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
  for_each_word(list, [](const CopyAt<Word>& at, int64_t w) { at.dst[w] = at.src[w]; });
}

template <typename Word>
auto launcher(cudaStream_t stream) {
  return [stream](const RangeList<CopyAt<Word>>& list) {
    copy_ranges_kernel<Word><<<range_blocks(list.start[list.count]), kRangeThreads, 0, stream>>>(list);
    MOK_CUDA_CHECK_LAUNCH();
  };
}

}  // namespace

void copy_ranges(const std::vector<DeviceCopyRange>& ranges, cudaStream_t stream) {
  auto launch16 = launcher<uint4>(stream);
  auto launch4 = launcher<uint32_t>(stream);
  RangeBatcher<CopyAt<uint4>, decltype(launch16)> words16(launch16);
  RangeBatcher<CopyAt<uint32_t>, decltype(launch4)> words4(launch4);
  for (const DeviceCopyRange& r : ranges) {
    if (r.bytes <= 0) continue;
    if (on_word_grid(r.dst, r.bytes) && on_word_grid(r.src, r.bytes))
      words16.add({static_cast<uint4*>(r.dst), static_cast<const uint4*>(r.src)}, r.bytes / 16);
    else if (on_word_grid(r.dst, r.bytes, 4) && on_word_grid(r.src, r.bytes, 4))
      words4.add({static_cast<uint32_t*>(r.dst), static_cast<const uint32_t*>(r.src)}, r.bytes / 4);
    else
      MOK_CUDA_CHECK(cudaMemcpyAsync(r.dst, r.src, static_cast<size_t>(r.bytes), cudaMemcpyDeviceToDevice, stream));
  }
  words16.finish();
  words4.finish();
}

}  // namespace mok::cuda
