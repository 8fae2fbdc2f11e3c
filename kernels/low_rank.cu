#include "kernels/low_rank.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/backend/cholesky_qr.h"
#include "kernels/counter_rng.cuh"
#include "kernels/cuda_check.h"
#include "kernels/fixed_order_reduce.cuh"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;
// Sums of squares: a fixed grid (never the device's SM count), so the order is fixed.
constexpr int kSumBlocks = 256;
// Gram partials: rows per block, rows per shared-memory tile (·cols floats ≤ 8 KiB).
constexpr int64_t kGramRows = kCholeskyQrGramRows;  // the host twin's blocks (core/backend/cholesky_qr.h)
constexpr int kTileFloats = 2048;

static_assert(kSumBlocks == kThreads, "the finish kernels read one partial per thread");

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

__global__ void gaussian_fill_kernel(float* out, long long count, double sd, uint64_t seed, uint64_t stream) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    out[i] = static_cast<float>(sd * counter_normal01(seed, stream, static_cast<uint64_t>(i)));
}

// --- error sums

// partial[block] = Σ a[i]² over this block's grid-strided elements.
__global__ void sum_squares_kernel(const float* a, long long count, double* partial) {
  __shared__ double warp_part[kThreads / 32];
  double s = 0.0;
  for (long long i = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; i < count;
       i += static_cast<long long>(kSumBlocks) * kThreads) {
    const double v = a[i];
    s += v * v;
  }
  s = block_sum<kThreads>(s, warp_part);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// One block: xx = Σ partial_x, kk = Σ partial_k (block order); terms = [max(0, xx − kk) + extra, xx].
__global__ void projection_finish_kernel(const double* partial_x, const double* partial_k, const double* extra,
                                         double* terms) {
  __shared__ double warp_part[kThreads / 32];
  const double xx = block_sum<kThreads>(partial_x[threadIdx.x], warp_part);
  const double kk = block_sum<kThreads>(partial_k[threadIdx.x], warp_part);
  if (threadIdx.x == 0) {
    terms[0] = fmax(0.0, xx - kk) + (extra ? extra[0] : 0.0);
    terms[1] = xx;
  }
}

__global__ void sampled_sums_kernel(const float* x, long long stride, const float* x_hat, long long rows,
                                    long long cols, double* partial_num, double* partial_den) {
  __shared__ double warp_part[kThreads / 32];
  double num = 0.0, den = 0.0;
  const long long count = rows * cols;
  for (long long e = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; e < count;
       e += static_cast<long long>(kSumBlocks) * kThreads) {
    const long long i = e / cols, c = e - i * cols;
    const double xv = x[i * stride * cols + c];
    const double d = xv - static_cast<double>(x_hat[e]);
    num += d * d;
    den += xv * xv;
  }
  num = block_sum<kThreads>(num, warp_part);
  den = block_sum<kThreads>(den, warp_part);
  if (threadIdx.x == 0) {
    partial_num[blockIdx.x] = num;
    partial_den[blockIdx.x] = den;
  }
}

__global__ void sampled_finish_kernel(const double* partial_num, const double* partial_den, double* terms) {
  __shared__ double warp_part[kThreads / 32];
  const double num = block_sum<kThreads>(partial_num[threadIdx.x], warp_part);
  const double den = block_sum<kThreads>(partial_den[threadIdx.x], warp_part);
  if (threadIdx.x == 0) {
    terms[0] = num;
    terms[1] = den;
  }
}

// --- CholeskyQR2

// partial[b] (cols, cols) = Σ y[i]ᵀ·y[i] over rows i of block b ([b·kGramRows, …)), in row order.
// Each thread owns entries p = (j, k) of the block's partial and accumulates them in global memory.
__global__ void gram_partial_kernel(const float* y, long long rows, int cols, double* partial) {
  __shared__ float tile[kTileFloats];
  const int tile_rows = max(1, kTileFloats / cols);
  const long long row0 = blockIdx.x * kGramRows;
  const long long row1 = min(rows, row0 + kGramRows);
  const int entries = cols * cols;
  double* out = partial + static_cast<long long>(blockIdx.x) * entries;
  for (int p = threadIdx.x; p < entries; p += kThreads) out[p] = 0.0;
  for (long long t0 = row0; t0 < row1; t0 += tile_rows) {
    const int n = static_cast<int>(min(static_cast<long long>(tile_rows), row1 - t0));
    __syncthreads();  // the previous tile is used up
    for (int e = threadIdx.x; e < n * cols; e += kThreads) tile[e] = y[t0 * cols + e];
    __syncthreads();
    for (int p = threadIdx.x; p < entries; p += kThreads) {
      const int j = p / cols, k = p - j * cols;
      double s = out[p];
      for (int t = 0; t < n; ++t) s += static_cast<double>(tile[t * cols + j]) * static_cast<double>(tile[t * cols + k]);
      out[p] = s;
    }
  }
}

// One block. G = Σ_b partial[b] (block order) into a (cols, cols); Cholesky G = RᵀR (R upper,
// right-looking, in a) with dependent columns dropped (pivot ≤ tol²·G_jj: inv_diag 0, row of R
// zero); then rinv = R⁻¹ (upper), one column per thread by back substitution. A dropped column
// j has rinv[:, j] = 0 and rinv[j, :] = 0, so y·rinv has column j zero and uses no y_j.
__global__ void cholesky_inverse_kernel(const double* partial, int blocks, int cols, double* a, double* g_diag,
                                        double* inv_diag, double* rinv) {
  const int entries = cols * cols;
  for (int p = threadIdx.x; p < entries; p += kThreads) {
    double s = 0.0;
    for (int b = 0; b < blocks; ++b) s += partial[static_cast<long long>(b) * entries + p];
    a[p] = s;
    const int j = p / cols;
    if (p == j * cols + j) g_diag[j] = s;
  }
  __syncthreads();
  const double tol2 = kCholeskyQrDependentColumn * kCholeskyQrDependentColumn;
  for (int j = 0; j < cols; ++j) {
    if (threadIdx.x == 0) {
      const double d = a[j * cols + j];
      const bool keep = d > tol2 * g_diag[j];  // false for NaN too
      const double rjj = keep ? sqrt(d) : 0.0;
      a[j * cols + j] = rjj;
      inv_diag[j] = keep ? 1.0 / rjj : 0.0;
    }
    __syncthreads();
    const double inv = inv_diag[j];
    for (int l = j + 1 + threadIdx.x; l < cols; l += kThreads) a[j * cols + l] *= inv;  // row j of R
    __syncthreads();
    const int m = cols - j - 1;
    for (int q = threadIdx.x; q < m * m; q += kThreads) {
      const int k = j + 1 + q / m, l = j + 1 + q % m;
      if (l >= k) a[k * cols + l] -= a[j * cols + k] * a[j * cols + l];
    }
    __syncthreads();
  }
  for (int l = threadIdx.x; l < cols; l += kThreads) {
    for (int i = cols - 1; i > l; --i) rinv[i * cols + l] = 0.0;
    rinv[l * cols + l] = inv_diag[l];
    for (int i = l - 1; i >= 0; --i) {
      double s = 0.0;
      for (int k = i + 1; k <= l; ++k) s += a[i * cols + k] * rinv[k * cols + l];
      rinv[i * cols + l] = -s * inv_diag[i];
    }
  }
}

// out[i, l] = Σ_{k ≤ l} y[i, k]·rinv[k, l], in double.
__global__ void apply_rinv_kernel(const float* y, long long rows, int cols, const double* rinv, float* out) {
  const long long count = rows * cols;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = e / cols;
    const int l = static_cast<int>(e - i * cols);
    const float* yr = y + i * cols;
    double s = 0.0;
    for (int k = 0; k <= l; ++k) s += static_cast<double>(yr[k]) * rinv[k * cols + l];
    out[e] = static_cast<float>(s);
  }
}

struct OrthoWorkspace {
  double *partial, *a, *g_diag, *inv_diag, *rinv;
  float* y2;
};

OrthoWorkspace carve(void* workspace, int64_t rows, int64_t cols) {
  const int64_t blocks = (rows + kGramRows - 1) / kGramRows;
  auto* p = static_cast<char*>(workspace);
  OrthoWorkspace w{};
  w.partial = reinterpret_cast<double*>(p);
  p += align256(static_cast<size_t>(blocks * cols * cols) * sizeof(double));
  w.a = reinterpret_cast<double*>(p);
  p += align256(static_cast<size_t>(cols * cols) * sizeof(double));
  w.rinv = reinterpret_cast<double*>(p);
  p += align256(static_cast<size_t>(cols * cols) * sizeof(double));
  w.g_diag = reinterpret_cast<double*>(p);
  p += align256(static_cast<size_t>(cols) * sizeof(double));
  w.inv_diag = reinterpret_cast<double*>(p);
  p += align256(static_cast<size_t>(cols) * sizeof(double));
  w.y2 = reinterpret_cast<float*>(p);
  return w;
}

int grid_for(long long count) { return static_cast<int>(std::min<long long>((count + kThreads - 1) / kThreads, 8192)); }

}  // namespace

void gaussian_fill(float* out, int64_t count, double sd, uint64_t seed, uint64_t stream_id, cudaStream_t stream) {
  if (count <= 0) return;
  gaussian_fill_kernel<<<grid_for(count), kThreads, 0, stream>>>(out, count, sd, seed, stream_id);
  MOK_CUDA_CHECK_LAUNCH();
}

size_t orthonormalize_workspace_bytes(int64_t rows, int64_t cols) {
  const int64_t blocks = (rows + kGramRows - 1) / kGramRows;
  return align256(static_cast<size_t>(blocks * cols * cols) * sizeof(double)) +
         2 * align256(static_cast<size_t>(cols * cols) * sizeof(double)) +
         2 * align256(static_cast<size_t>(cols) * sizeof(double)) +
         align256(static_cast<size_t>(rows * cols) * sizeof(float));
}

void orthonormalize_columns(float* y, int64_t rows, int64_t cols, void* workspace, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (cols > kTileFloats || cols > rows)
    throw std::invalid_argument("orthonormalize_columns: (" + std::to_string(rows) + ", " + std::to_string(cols) +
                                ") needs cols ≤ rows and cols ≤ " + std::to_string(kTileFloats));
  const int blocks = static_cast<int>((rows + kGramRows - 1) / kGramRows);
  const int c = static_cast<int>(cols);
  const OrthoWorkspace w = carve(workspace, rows, cols);
  // Pass 1 reads y and writes y2; pass 2 reads y2 and writes y.
  float* from = y;
  float* to = w.y2;
  for (int pass = 0; pass < 2; ++pass) {
    gram_partial_kernel<<<blocks, kThreads, 0, stream>>>(from, rows, c, w.partial);
    MOK_CUDA_CHECK_LAUNCH();
    cholesky_inverse_kernel<<<1, kThreads, 0, stream>>>(w.partial, blocks, c, w.a, w.g_diag, w.inv_diag, w.rinv);
    MOK_CUDA_CHECK_LAUNCH();
    apply_rinv_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(from, rows, c, w.rinv, to);
    MOK_CUDA_CHECK_LAUNCH();
    std::swap(from, to);
  }
}

size_t error_terms_workspace_bytes() { return 2 * kSumBlocks * sizeof(double); }

void projection_error_terms(const float* x, int64_t x_count, const float* kept, int64_t kept_count,
                            const double* extra, double* terms, void* workspace, cudaStream_t stream) {
  auto* partial = static_cast<double*>(workspace);
  sum_squares_kernel<<<kSumBlocks, kThreads, 0, stream>>>(x, x_count, partial);
  MOK_CUDA_CHECK_LAUNCH();
  sum_squares_kernel<<<kSumBlocks, kThreads, 0, stream>>>(kept, kept_count, partial + kSumBlocks);
  MOK_CUDA_CHECK_LAUNCH();
  projection_finish_kernel<<<1, kThreads, 0, stream>>>(partial, partial + kSumBlocks, extra, terms);
  MOK_CUDA_CHECK_LAUNCH();
}

void sampled_error_terms(const float* x, int64_t stride, const float* x_hat, int64_t rows, int64_t cols,
                         double* terms, void* workspace, cudaStream_t stream) {
  auto* partial = static_cast<double*>(workspace);
  sampled_sums_kernel<<<kSumBlocks, kThreads, 0, stream>>>(x, stride, x_hat, rows, cols, partial,
                                                           partial + kSumBlocks);
  MOK_CUDA_CHECK_LAUNCH();
  sampled_finish_kernel<<<1, kThreads, 0, stream>>>(partial, partial + kSumBlocks, terms);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
