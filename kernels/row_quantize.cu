#include "kernels/row_quantize.h"

#include <algorithm>

#include "kernels/counter_rng.cuh"
#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/fixed_order_reduce.cuh"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline void store_double(float* p, double v) { *p = static_cast<float>(v); }
__device__ inline void store_double(bf16* p, double v) { *p = __double2bfloat16(v); }

// The code of one value, as the CPU rounds it (core/backend/row_quantize.cpp).
__device__ inline int code_of(double v, float s, int qmax, const RowQuantizeParams& p, uint64_t index) {
  if (!(s > 0.0f)) return 0;
  const double t = v / static_cast<double>(s);
  const double qd = p.stochastic ? floor(t + counter_uniform01(p.seed, p.stream, index)) : rint(t);
  return static_cast<int>(fmin(fmax(qd, -static_cast<double>(qmax)), static_cast<double>(qmax)));
}

// One warp per row (kRowsPerBlock rows per block): absmax → scale, then codes and the row's
// two sums. Rows are short (d_model or a few times it), so a warp's shuffles beat a block's
// barriers.
constexpr int kRowsPerBlock = kThreads / 32;

template <typename T>
__global__ void quantize_rows_kernel(const T* x, long long rows, long long cols, RowQuantizeParams p, uint8_t* codes,
                                     float* scales, double* row_terms) {
  const long long r = static_cast<long long>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= rows) return;  // the whole warp: no block-wide barrier follows
  const int lane = threadIdx.x % 32;
  const T* xr = x + r * cols;
  float m = 0.0f;
  for (long long c = lane; c < cols; c += 32) m = fmaxf(m, fabsf(to_float(xr[c])));
  m = warp_max(m);
  const int qmax = p.bits == 8 ? 127 : 7;
  const float s = static_cast<float>(static_cast<double>(m) / qmax);
  if (lane == 0) scales[r] = s;
  const long long rb = (cols * p.bits + 7) / 8;
  uint8_t* rc = codes + r * rb;
  double err = 0.0, xx = 0.0;
  auto one = [&](long long c) {
    const double v = to_float(xr[c]);
    const int q = code_of(v, s, qmax, p, static_cast<uint64_t>(r * cols + c));
    const double d = v - static_cast<double>(q) * static_cast<double>(s);
    err += d * d;
    xx += v * v;
    return q;
  };
  if (p.bits == 8) {
    for (long long c = lane; c < cols; c += 32) rc[c] = static_cast<uint8_t>(static_cast<int8_t>(one(c)));
  } else {
    for (long long j = lane; j < rb; j += 32) {
      uint8_t byte = static_cast<uint8_t>(one(2 * j) + 8);
      if (2 * j + 1 < cols) byte |= static_cast<uint8_t>((one(2 * j + 1) + 8) << 4);
      rc[j] = byte;
    }
  }
  if (row_terms) {
    err = warp_sum(err);
    xx = warp_sum(xx);
    if (lane == 0) {
      row_terms[2 * r] = err;
      row_terms[2 * r + 1] = xx;
    }
  }
}

// terms = Σ over rows of row_terms, one block: each thread adds its rows in order, then a
// fixed-order block sum.
__global__ void sum_row_terms_kernel(const double* row_terms, long long rows, double* terms) {
  __shared__ double part[kThreads / 32];
  double err = 0.0, xx = 0.0;
  for (long long r = threadIdx.x; r < rows; r += kThreads) {
    err += row_terms[2 * r];
    xx += row_terms[2 * r + 1];
  }
  err = block_sum<kThreads>(err, part);
  xx = block_sum<kThreads>(xx, part);
  if (threadIdx.x == 0) {
    terms[0] = err;
    terms[1] = xx;
  }
}

// One thread per byte of codes: one value (8 bits) or two (4 bits).
template <typename T>
__global__ void dequantize_rows_kernel(const uint8_t* codes, const float* scales, long long rows, long long cols,
                                       int bits, T* out) {
  const long long rb = (cols * bits + 7) / 8;
  const long long total = rows * rb;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = i / rb, j = i - r * rb;
    const double s = scales[r];
    const uint8_t byte = codes[i];
    T* o = out + r * cols;
    if (bits == 8) {
      store_double(o + j, static_cast<int8_t>(byte) * s);
    } else {
      store_double(o + 2 * j, ((byte & 0x0F) - 8) * s);
      if (2 * j + 1 < cols) store_double(o + 2 * j + 1, ((byte >> 4) - 8) * s);
    }
  }
}

}  // namespace

size_t quantize_rows_workspace_bytes(int64_t rows, bool measure) {
  return measure ? static_cast<size_t>(rows) * 2 * sizeof(double) : 0;
}

template <typename T>
void quantize_rows(const T* x, int64_t rows, int64_t cols, const RowQuantizeParams& params, uint8_t* codes,
                   float* scales, double* terms, void* workspace, cudaStream_t stream) {
  if (rows <= 0) return;
  double* row_terms = terms ? static_cast<double*>(workspace) : nullptr;
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  quantize_rows_kernel<T><<<blocks, kThreads, 0, stream>>>(x, rows, cols, params, codes, scales, row_terms);
  MOK_CUDA_CHECK_LAUNCH();
  if (terms) {
    sum_row_terms_kernel<<<1, kThreads, 0, stream>>>(row_terms, rows, terms);
    MOK_CUDA_CHECK_LAUNCH();
  }
}

template <typename T>
void dequantize_rows(const uint8_t* codes, const float* scales, int64_t rows, int64_t cols, int bits, T* out,
                     cudaStream_t stream) {
  const long long total = static_cast<long long>(rows) * ((cols * bits + 7) / 8);
  if (total <= 0) return;
  const long long blocks = std::min<long long>((total + 255) / 256, 1 << 16);
  dequantize_rows_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(codes, scales, rows, cols, bits, out);
  MOK_CUDA_CHECK_LAUNCH();
}

template void quantize_rows<float>(const float*, int64_t, int64_t, const RowQuantizeParams&, uint8_t*, float*,
                                   double*, void*, cudaStream_t);
template void quantize_rows<bf16>(const bf16*, int64_t, int64_t, const RowQuantizeParams&, uint8_t*, float*,
                                  double*, void*, cudaStream_t);
template void dequantize_rows<float>(const uint8_t*, const float*, int64_t, int64_t, int, float*, cudaStream_t);
template void dequantize_rows<bf16>(const uint8_t*, const float*, int64_t, int64_t, int, bf16*, cudaStream_t);

}  // namespace mok::cuda
