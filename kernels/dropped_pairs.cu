#include "kernels/dropped_pairs.h"

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"

namespace mok::cuda {

namespace {
__global__ void mark_dropped_kernel(int32_t* expert, const int32_t* row_of_pair, int64_t pairs) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p < pairs && row_of_pair[p] < 0) expert[p] = -1;
}
}  // namespace

void mark_dropped_pairs(int32_t* expert, const int32_t* row_of_pair, int64_t pairs, cudaStream_t stream) {
  if (pairs <= 0) return;
  mark_dropped_kernel<<<blocks_for(pairs, 256), 256, 0, stream>>>(expert, row_of_pair, pairs);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
