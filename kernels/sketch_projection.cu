#include "kernels/counter_rng.cuh"
#include "kernels/cuda_check.h"
#include "kernels/sketch_projection.h"

#include <algorithm>

namespace mok::cuda {
namespace {

constexpr int kTile = 16;

// Q's entries: the CPU's counter_normal (kernels/counter_rng.cuh), scaled.
__device__ inline float sketch_entry(uint64_t seed, uint64_t stream, uint64_t index, float scale) {
  return static_cast<float>(counter_normal01(seed, stream, index)) * scale;
}

// P (n, r) = X (n, d) · Qᵀ; a 16×16 tile of P per block, Q tiles generated into shared memory.
__global__ void sketch_project_kernel(const float* x, float* p, int n, int d, int r, uint64_t seed,
                                      uint64_t stream, float scale) {
  __shared__ float xs[kTile][kTile + 1];
  __shared__ float qs[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y;  // token
  const int col = blockIdx.x * kTile + threadIdx.x;  // sketch index i
  float acc = 0.f;
  for (int k0 = 0; k0 < d; k0 += kTile) {
    const int kx = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = (row < n && kx < d) ? x[static_cast<long long>(row) * d + kx] : 0.f;
    const int qi = blockIdx.x * kTile + threadIdx.y, qj = k0 + threadIdx.x;
    qs[threadIdx.y][threadIdx.x] =
        (qi < r && qj < d) ? sketch_entry(seed, stream, static_cast<uint64_t>(qi) * d + qj, scale) : 0.f;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += xs[threadIdx.y][k] * qs[threadIdx.x][k];
    __syncthreads();
  }
  if (row < n && col < r) p[static_cast<long long>(row) * r + col] = acc;
}

// dW (d, m) += Qᵀ (d, r) · G (r, m); a 16×16 tile of dW per block.
__global__ void sketch_expand_kernel(const float* g, float* dw, int d, int m, int r, uint64_t seed,
                                     uint64_t stream, float scale) {
  __shared__ float qs[kTile][kTile + 1];  // qs[k][j] = Q[i0+k][row-tile j]
  __shared__ float gs[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y;  // input feature j of W
  const int col = blockIdx.x * kTile + threadIdx.x;  // output feature
  float acc = 0.f;
  for (int i0 = 0; i0 < r; i0 += kTile) {
    const int qi = i0 + threadIdx.y, qj = blockIdx.y * kTile + threadIdx.x;
    qs[threadIdx.y][threadIdx.x] =
        (qi < r && qj < d) ? sketch_entry(seed, stream, static_cast<uint64_t>(qi) * d + qj, scale) : 0.f;
    const int gi = i0 + threadIdx.y;
    gs[threadIdx.y][threadIdx.x] = (gi < r && col < m) ? g[static_cast<long long>(gi) * m + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += qs[k][threadIdx.y] * gs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < d && col < m) dw[static_cast<long long>(row) * m + col] += acc;
}

__global__ void sketch_generate_kernel(float* q, long long count, uint64_t seed, uint64_t stream,
                                       float scale) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    q[i] = sketch_entry(seed, stream, static_cast<uint64_t>(i), scale);
  }
}

}  // namespace

void sketch_generate(float* q, int r, int d, uint64_t seed, uint64_t stream_id, cudaStream_t stream) {
  const long long count = static_cast<long long>(r) * d;
  if (count <= 0) return;
  const long long blocks = std::min<long long>((count + 255) / 256, 65535);
  sketch_generate_kernel<<<static_cast<int>(blocks), 256, 0, stream>>>(q, count, seed, stream_id,
                                                                     rsqrtf(float(r)));
  MOK_CUDA_CHECK_LAUNCH();
}

void sketch_project(const float* x, float* p, int n, int d, int r, uint64_t seed, uint64_t stream_id,
                    cudaStream_t stream) {
  if (n <= 0 || r <= 0) return;
  const dim3 block(kTile, kTile), grid((r + kTile - 1) / kTile, (n + kTile - 1) / kTile);
  sketch_project_kernel<<<grid, block, 0, stream>>>(x, p, n, d, r, seed, stream_id, rsqrtf(float(r)));
  MOK_CUDA_CHECK_LAUNCH();
}

void sketch_expand_weight_grad(const float* g, float* dw, int d, int m, int r, uint64_t seed,
                               uint64_t stream_id, cudaStream_t stream) {
  if (d <= 0 || m <= 0) return;
  const dim3 block(kTile, kTile), grid((m + kTile - 1) / kTile, (d + kTile - 1) / kTile);
  sketch_expand_kernel<<<grid, block, 0, stream>>>(g, dw, d, m, r, seed, stream_id, rsqrtf(float(r)));
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
