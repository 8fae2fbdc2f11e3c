#include "kernels/transpose_add.h"

#include "kernels/cuda_check.h"

namespace mok::cuda {

namespace {

constexpr int kTile = 32;

// A 32×32 tile of x read along its rows and written along y's rows through shared memory,
// so both sides are coalesced. Block (32, 8): each thread handles 4 rows of the tile.
__global__ void transpose_add_kernel(float* y, const float* x, int64_t rows, int64_t cols) {
  __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read
  const int64_t x_row0 = static_cast<int64_t>(blockIdx.x) * kTile;  // a row of x = a column of y
  const int64_t x_col0 = static_cast<int64_t>(blockIdx.y) * kTile;  // a column of x = a row of y
  for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
    const int64_t r = x_row0 + i, c = x_col0 + threadIdx.x;
    if (r < cols && c < rows) tile[i][threadIdx.x] = x[r * rows + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
    const int64_t yr = x_col0 + i, yc = x_row0 + threadIdx.x;
    if (yr < rows && yc < cols) y[yr * cols + yc] += tile[threadIdx.x][i];
  }
}

}  // namespace

void transpose_add(float* y, const float* x, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  transpose_add_kernel<<<grid, dim3(kTile, 8), 0, stream>>>(y, x, rows, cols);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
