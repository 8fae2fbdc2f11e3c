#include "kernels/accumulate.h"

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"

#include <algorithm>

namespace mok::cuda {

namespace {
template <typename T>
__global__ void accumulate_kernel(float* y, const T* x, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] += to_float(x[i]);
}
}  // namespace

template <typename T>
void accumulate_into_f32(float* y, const T* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 132 * 16));
  accumulate_kernel<T><<<blocks, 256, 0, stream>>>(y, x, n);
  MOK_CUDA_CHECK_LAUNCH();
}

template void accumulate_into_f32<float>(float*, const float*, int64_t, cudaStream_t);
template void accumulate_into_f32<bf16>(float*, const bf16*, int64_t, cudaStream_t);

}  // namespace mok::cuda
