#include "kernels/cuda_check.h"
#include "kernels/elementwise_ops.h"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;

// Block-wide sum; every thread gets the result. Fixed shape → fixed order → deterministic.
__device__ float block_sum(float v) {
  __shared__ float partial[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  __syncthreads();
  return total;
}

// One block per row.
__global__ void rmsnorm_forward_kernel(const float* x, const float* g, float* y, float* inv_rms,
                                       int dim, float eps) {
  const float* xr = x + static_cast<long long>(blockIdx.x) * dim;
  float* yr = y + static_cast<long long>(blockIdx.x) * dim;
  float ss = 0.f;
  for (int j = threadIdx.x; j < dim; j += kThreads) ss += xr[j] * xr[j];
  const float inv = rsqrtf(block_sum(ss) / dim + eps);
  for (int j = threadIdx.x; j < dim; j += kThreads) yr[j] = xr[j] * inv * g[j];
  if (threadIdx.x == 0) inv_rms[blockIdx.x] = inv;
}

// dx = inv·(g·dy) − inv³·x·mean(x·g·dy)
__global__ void rmsnorm_backward_dx_kernel(const float* x, const float* g, const float* inv_rms,
                                           const float* dy, float* dx, int dim) {
  const long long off = static_cast<long long>(blockIdx.x) * dim;
  const float inv = inv_rms[blockIdx.x];
  float dot = 0.f;
  for (int j = threadIdx.x; j < dim; j += kThreads) dot += x[off + j] * g[j] * dy[off + j];
  const float mean_dot = block_sum(dot) / dim;
  for (int j = threadIdx.x; j < dim; j += kThreads) {
    dx[off + j] = inv * g[j] * dy[off + j] - inv * inv * inv * x[off + j] * mean_dot;
  }
}

// dg[j] += Σ_rows dy·x·inv, one thread per column, rows in order (deterministic).
__global__ void rmsnorm_backward_dg_kernel(const float* x, const float* inv_rms, const float* dy,
                                           float* dg, int rows, int dim) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= dim) return;
  float acc = 0.f;
  for (int r = 0; r < rows; ++r) {
    const long long i = static_cast<long long>(r) * dim + j;
    acc += dy[i] * x[i] * inv_rms[r];
  }
  dg[j] += acc;
}

__device__ inline float sigmoidf(float a) { return 1.f / (1.f + __expf(-a)); }

__global__ void swiglu_forward_kernel(const float* a, const float* b, float* h, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float s = sigmoidf(a[i]);
    h[i] = a[i] * s * b[i];
  }
}

// d silu(a)/da = s·(1 + a·(1 − s))
__global__ void swiglu_backward_kernel(const float* a, const float* b, const float* dh, float* da,
                                       float* db, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float s = sigmoidf(a[i]);
    const float silu = a[i] * s;
    db[i] = dh[i] * silu;
    da[i] = dh[i] * b[i] * s * (1.f + a[i] * (1.f - s));
  }
}

int grid_for(long long n) {
  const long long blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace

void rmsnorm_forward(const float* x, const float* g, float* y, float* inv_rms, int rows, int dim,
                     float eps, cudaStream_t stream) {
  if (rows <= 0) return;
  rmsnorm_forward_kernel<<<rows, kThreads, 0, stream>>>(x, g, y, inv_rms, dim, eps);
  MOK_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward(const float* x, const float* g, const float* inv_rms, const float* dy,
                      float* dx, float* dg, int rows, int dim, cudaStream_t stream) {
  if (rows <= 0) return;
  rmsnorm_backward_dx_kernel<<<rows, kThreads, 0, stream>>>(x, g, inv_rms, dy, dx, dim);
  MOK_CUDA_CHECK_LAUNCH();
  rmsnorm_backward_dg_kernel<<<(dim + kThreads - 1) / kThreads, kThreads, 0, stream>>>(x, inv_rms, dy, dg,
                                                                                      rows, dim);
  MOK_CUDA_CHECK_LAUNCH();
}

void swiglu_forward(const float* a, const float* b, float* h, long long n, cudaStream_t stream) {
  swiglu_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, h, n);
  MOK_CUDA_CHECK_LAUNCH();
}

void swiglu_backward(const float* a, const float* b, const float* dh, float* da, float* db, long long n,
                     cudaStream_t stream) {
  swiglu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, dh, da, db, n);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
