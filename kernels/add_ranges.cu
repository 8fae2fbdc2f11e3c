#include "kernels/add_ranges.h"

#include "kernels/elementwise.h"
#include "kernels/range_list.cuh"

namespace mok::cuda {
namespace {

struct AddAt {
  float4* y;
  const float4* x;
};

__global__ void add_ranges_kernel(const __grid_constant__ RangeList<AddAt> list) {
  for_each_word(list, [](const AddAt& at, int64_t w) {
    float4 y = at.y[w];
    const float4 x = at.x[w];
    y.x += x.x;
    y.y += x.y;
    y.z += x.z;
    y.w += x.w;
    at.y[w] = y;
  });
}

}  // namespace

void add_ranges(const std::vector<DeviceAddRange>& ranges, cudaStream_t stream) {
  auto launch = [stream](const RangeList<AddAt>& list) {
    add_ranges_kernel<<<range_blocks(list.start[list.count]), kRangeThreads, 0, stream>>>(list);
    MOK_CUDA_CHECK_LAUNCH();
  };
  RangeBatcher<AddAt, decltype(launch)> batch(launch);
  for (const DeviceAddRange& r : ranges) {
    if (r.count <= 0) continue;
    const int64_t bytes = r.count * static_cast<int64_t>(sizeof(float));
    if (on_word_grid(r.y, bytes) && on_word_grid(r.x, bytes))
      batch.add({reinterpret_cast<float4*>(r.y), reinterpret_cast<const float4*>(r.x)}, bytes / 16);
    else
      add_inplace<float>(r.y, r.x, r.count, stream);
  }
  batch.finish();
}

}  // namespace mok::cuda
