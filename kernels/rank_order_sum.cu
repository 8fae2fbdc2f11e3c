#include "kernels/cuda_check.h"
#include "kernels/rank_order_sum.h"

namespace mok::cuda {

namespace {

constexpr int kThreads = 256;

// One thread per element: Σ_s parts[s·len + i] in rank order. Floats add in double and round
// once; doubles add with Neumaier's compensation (the host's rules, communicator.cpp).
template <typename T>
__global__ void sum_rank_parts_kernel(const T* __restrict__ parts, int ranks, int64_t len, T* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < len;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(T) == sizeof(float)) {
      double acc = 0.0;
      for (int s = 0; s < ranks; ++s) acc += static_cast<double>(parts[static_cast<int64_t>(s) * len + i]);
      out[i] = static_cast<T>(acc);
    } else {
      double sum = 0.0, err = 0.0;
      for (int s = 0; s < ranks; ++s) {
        const double x = parts[static_cast<int64_t>(s) * len + i];
        const double t = sum + x;
        err += fabs(sum) >= fabs(x) ? (sum - t) + x : (x - t) + sum;
        sum = t;
      }
      out[i] = sum + err;
    }
  }
}

template <typename T>
void launch(const T* parts, int ranks, int64_t len, T* out, cudaStream_t stream) {
  if (len <= 0) return;
  const int64_t blocks = (len + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
  sum_rank_parts_kernel<T><<<grid, kThreads, 0, stream>>>(parts, ranks, len, out);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace

void sum_rank_parts(const float* parts, int ranks, int64_t len, float* out, cudaStream_t stream) {
  launch(parts, ranks, len, out, stream);
}
void sum_rank_parts(const double* parts, int ranks, int64_t len, double* out, cudaStream_t stream) {
  launch(parts, ranks, len, out, stream);
}

}  // namespace mok::cuda
