#include "kernels/row_quantize.h"

#include <algorithm>
#include <cstdint>

#include "kernels/counter_rng.cuh"
#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/fixed_order_reduce.cuh"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline void store_double(float* p, double v) { *p = static_cast<float>(v); }
__device__ inline void store_double(bf16* p, double v) { *p = __double2bfloat16(v); }

// The code of one value, as the CPU rounds it (core/backend/row_quantize.cpp): rint or
// floor(· + u) of the double quotient v/s, clamped to ±qmax.
//
// Nearest rounding first tries tf = v · inv_s in float (inv_s = 1/s rounded), since a double
// division costs many times a float product. v is a float; tf is within 2⁻²³·|v/s| (two
// roundings) of v/s, so within 2⁻¹³ for |tf| < 1024, and the double quotient is within 2⁻⁴³
// of it. When tf lies farther than 2⁻¹² from a half-integer, all three lie strictly between
// the same two half-integers and round to the same integer: the code is the double path's,
// bit for bit. Otherwise (about one value in 2¹¹, or a non-finite tf) the double path runs.
__device__ inline int code_of(double v, float s, float inv_s, int qmax, const RowQuantizeParams& p, uint64_t index) {
  if (!(s > 0.0f)) return 0;
  if (!p.stochastic) {
    const float tf = static_cast<float>(v) * inv_s;
    if (fabsf(tf) < 1024.0f && fabsf(tf - floorf(tf) - 0.5f) > 0x1p-12f)
      return static_cast<int>(fminf(fmaxf(rintf(tf), -static_cast<float>(qmax)), static_cast<float>(qmax)));
  }
  const double t = v / static_cast<double>(s);
  const double qd = p.stochastic ? floor(t + counter_uniform01(p.seed, p.stream, index)) : rint(t);
  return static_cast<int>(fmin(fmax(qd, -static_cast<double>(qmax)), static_cast<double>(qmax)));
}

// 1/s for code_of's first try (0 for a zero scale, whose codes are 0).
__device__ inline float inverse_scale(float s) { return s > 0.0f ? 1.0f / s : 0.0f; }

// code_of, adding (v − q·s)² and v² to the row's sums.
__device__ inline int code_with_error(double v, float s, float inv_s, int qmax, const RowQuantizeParams& p,
                                      uint64_t index, double& err, double& xx) {
  const int q = code_of(v, s, inv_s, qmax, p, index);
  const double d = v - static_cast<double>(q) * static_cast<double>(s);
  err += d * d;
  xx += v * v;
  return q;
}

// A row's scale from its absmax, as the CPU computes it.
__device__ inline float row_scale(float absmax, int qmax) {
  return static_cast<float>(static_cast<double>(absmax) / qmax);
}

// The warp's sums of row r into row_terms (when measuring).
__device__ inline void store_row_terms(double* row_terms, long long r, int lane, double err, double xx) {
  if (!row_terms) return;
  err = warp_sum(err);
  xx = warp_sum(xx);
  if (lane == 0) {
    row_terms[2 * r] = err;
    row_terms[2 * r + 1] = xx;
  }
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
  const float s = row_scale(m, qmax);
  if (lane == 0) scales[r] = s;
  const long long rb = (cols * p.bits + 7) / 8;
  uint8_t* rc = codes + r * rb;
  const float inv_s = inverse_scale(s);
  double err = 0.0, xx = 0.0;
  auto one = [&](long long c) {
    return code_with_error(to_float(xr[c]), s, inv_s, qmax, p, static_cast<uint64_t>(r * cols + c), err, xx);
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
  store_row_terms(row_terms, r, lane, err, xx);
}

// The same with 8 consecutive values per lane and access (16-byte loads of bf16, two of
// float; 8- or 4-byte stores of codes), for rows of a multiple of 8 values on aligned
// memory: the scalar kernel's one-value accesses leave most of the memory bandwidth unused.
template <typename T>
struct alignas(8 * sizeof(T)) Pack8 {
  T v[8];
};

// The codes of one pack of 8 values at pack index g of row r, stored as 8 or 4 bytes.
template <typename T>
__device__ inline void quantize_pack(const Pack8<T>& pk, long long r, long long cols, long long g, float s, float inv_s,
                                     int qmax, const RowQuantizeParams& p, uint8_t* rc, double& err, double& xx) {
  int q[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    q[i] = code_with_error(to_float(pk.v[i]), s, inv_s, qmax, p, static_cast<uint64_t>(r * cols + 8 * g + i), err, xx);
  if (p.bits == 8) {
    uint2 w;
    w.x = (q[0] & 0xFF) | (q[1] & 0xFF) << 8 | (q[2] & 0xFF) << 16 | static_cast<unsigned>(q[3] & 0xFF) << 24;
    w.y = (q[4] & 0xFF) | (q[5] & 0xFF) << 8 | (q[6] & 0xFF) << 16 | static_cast<unsigned>(q[7] & 0xFF) << 24;
    reinterpret_cast<uint2*>(rc)[g] = w;
  } else {
    unsigned w = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) w |= static_cast<unsigned>(q[i] + 8) << (4 * i);
    reinterpret_cast<unsigned*>(rc)[g] = w;
  }
}

// One warp per row, two passes over it (absmax, then codes; the second mostly from cache).
// Keeping a lane's packs in registers for one pass ran at half this speed on an H200.
template <typename T>
__global__ void quantize_rows_vec8_kernel(const T* x, long long rows, long long cols, RowQuantizeParams p,
                                          uint8_t* codes, float* scales, double* row_terms) {
  const long long r = static_cast<long long>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  const Pack8<T>* xr = reinterpret_cast<const Pack8<T>*>(x + r * cols);
  const long long packs = cols / 8;
  float m = 0.0f;
  for (long long g = lane; g < packs; g += 32) {
    const Pack8<T> pk = xr[g];
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(to_float(pk.v[i])));
  }
  m = warp_max(m);
  const int qmax = p.bits == 8 ? 127 : 7;
  const float s = row_scale(m, qmax), inv_s = inverse_scale(s);
  if (lane == 0) scales[r] = s;
  uint8_t* rc = codes + r * ((cols * p.bits) / 8);
  double err = 0.0, xx = 0.0;
  for (long long g = lane; g < packs; g += 32) quantize_pack(xr[g], r, cols, g, s, inv_s, qmax, p, rc, err, xx);
  store_row_terms(row_terms, r, lane, err, xx);
}

// One thread per 8 values.
template <typename T>
__global__ void dequantize_rows_vec8_kernel(const uint8_t* codes, const float* scales, long long rows, long long cols,
                                            int bits, T* out) {
  const long long packs = cols / 8, total = rows * packs;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = i / packs;
    const double s = scales[r];
    Pack8<T> pk;
    if (bits == 8) {
      const uint2 w = reinterpret_cast<const uint2*>(codes)[i];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        store_double(&pk.v[k], static_cast<int8_t>((w.x >> (8 * k)) & 0xFF) * s);
        store_double(&pk.v[4 + k], static_cast<int8_t>((w.y >> (8 * k)) & 0xFF) * s);
      }
    } else {
      const unsigned w = reinterpret_cast<const unsigned*>(codes)[i];
#pragma unroll
      for (int k = 0; k < 8; ++k) store_double(&pk.v[k], (static_cast<int>((w >> (4 * k)) & 0xF) - 8) * s);
    }
    reinterpret_cast<Pack8<T>*>(out)[i] = pk;
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// terms = Σ over rows of row_terms, one block of kSumThreads: each thread adds its rows in
// order, then a fixed-order block sum. A wide block, since the rows' loads are what it waits
// for (32 768 rows: 32 per thread).
constexpr int kSumThreads = 1024;

__global__ void __launch_bounds__(kSumThreads) sum_row_terms_kernel(const double* row_terms, long long rows,
                                                                    double* terms) {
  __shared__ double part[kSumThreads / 32];
  double err = 0.0, xx = 0.0;
#pragma unroll 4
  for (long long r = threadIdx.x; r < rows; r += kSumThreads) {
    const double2 t = reinterpret_cast<const double2*>(row_terms)[r];
    err += t.x;
    xx += t.y;
  }
  err = block_sum<kSumThreads>(err, part);
  xx = block_sum<kSumThreads>(xx, part);
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
  if (cols % 8 == 0 && aligned(x, 8 * sizeof(T)) && aligned(codes, 8))
    quantize_rows_vec8_kernel<T><<<blocks, kThreads, 0, stream>>>(x, rows, cols, params, codes, scales, row_terms);
  else
    quantize_rows_kernel<T><<<blocks, kThreads, 0, stream>>>(x, rows, cols, params, codes, scales, row_terms);
  MOK_CUDA_CHECK_LAUNCH();
  if (terms) {
    sum_row_terms_kernel<<<1, kSumThreads, 0, stream>>>(row_terms, rows, terms);
    MOK_CUDA_CHECK_LAUNCH();
  }
}

template <typename T>
void dequantize_rows(const uint8_t* codes, const float* scales, int64_t rows, int64_t cols, int bits, T* out,
                     cudaStream_t stream) {
  if (cols % 8 == 0 && aligned(out, 8 * sizeof(T)) && aligned(codes, 8)) {
    const long long packs = static_cast<long long>(rows) * (cols / 8);
    if (packs <= 0) return;
    const long long blocks = std::min<long long>((packs + 255) / 256, 1 << 16);
    dequantize_rows_vec8_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(codes, scales, rows, cols, bits,
                                                                                      out);
    MOK_CUDA_CHECK_LAUNCH();
    return;
  }
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
