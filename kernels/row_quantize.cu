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
// floor(· + u) of the double quotient v/s, clamped to ±qmax. The stochastic codes take this
// path; the nearest ones take nearest_code, which gives the same codes in float.
template <bool Stochastic>
__device__ inline int code_exact(double v, float s, int qmax, const RowQuantizeParams& p, uint64_t index) {
  if (!(s > 0.0f)) return 0;
  const double t = v / static_cast<double>(s);
  const double qd = Stochastic ? floor(t + counter_uniform01(p.seed, p.stream, index)) : rint(t);
  return static_cast<int>(fmin(fmax(qd, -static_cast<double>(qmax)), static_cast<double>(qmax)));
}

// 1.5 · 2²³: adding it to a float f with |f| < 2²² leaves rint(f) (ties to even) in the low
// bits of the sum, so rounding costs two adds instead of a conversion (which issues at a
// quarter of the float rate on sm_90).
constexpr float kRoundMagic = 12582912.0f;
constexpr int kRoundMagicBits = 0x4B400000;

// q as a float, for |q| < 2²²: the same trick backwards.
__device__ inline float small_int_to_float(int q) {
  return __fsub_rn(__int_as_float(q + kRoundMagicBits), kRoundMagic);
}

// nearest_code's answer where tf = v · inv_s does not settle it (see there), still bit for
// bit code_exact's:
// - |tf| ≥ 1024 or not a number: the clamp's ±qmax by v's sign (NaN: −qmax, as fmax(NaN, −qmax)
//   gives), 0 for v = 0 (tf is NaN there only when 1/s overflowed) or a zero scale;
// - within 2⁻¹² of the half-integer m + ½ (m = floor(tf)): v/s lies on the side of m + ½ that
//   the sign of v − (m + ½)·s says, and fma computes that difference exactly before its one
//   rounding, which keeps the sign; 0 is a tie, rounded to the even code. The double quotient
//   agrees: for float v and s with |v/s| < 1024, a nonzero v − (m + ½)·s puts v/s at least
//   2⁻²⁶ from m + ½, far beyond the double division's rounding (2⁻⁴³ there).
__device__ inline int undecided_nearest_code(float v, float s, float tf, int qmax) {
  if (!(s > 0.0f) || v == 0.0f) return 0;
  if (!(fabsf(tf) < 1024.0f)) return v > 0.0f ? qmax : -qmax;
  const float m = floorf(tf);
  const float r = __fmaf_rn(-__fadd_rn(m, 0.5f), s, v);
  const int mi = static_cast<int>(m);
  return r > 0.0f ? mi + 1 : r < 0.0f ? mi : mi + (mi & 1);
}

// code_exact's nearest code, in float: tf = v · inv_s (inv_s = 1/s rounded) is within
// 2⁻²³·|v/s| (two roundings) of v/s, so within 2⁻¹³ for |tf| < 1024, and the double quotient
// within 2⁻⁴³ of v/s. When tf lies farther than 2⁻¹² from a half-integer, all three round to
// the same integer, rint(tf). Otherwise (about one value in 2¹¹, or a non-finite tf)
// undecided_nearest_code decides.
__device__ inline int nearest_code(float v, float s, float inv_s, int qmax) {
  const float tf = __fmul_rn(v, inv_s);
  const float sum = __fadd_rn(tf, kRoundMagic);
  const float n = __fsub_rn(sum, kRoundMagic);  // rint(tf)
  int q = __float_as_int(sum) - kRoundMagicBits;
  if (!(fabsf(tf) < 1024.0f && fabsf(__fsub_rn(tf, n)) < 0.5f - 0x1p-12f)) q = undecided_nearest_code(v, s, tf, qmax);
  return min(max(q, -qmax), qmax);
}

// code_exact's result. (Stochastic is a template argument, so that the common kernels carry
// none of its code.)
template <bool Stochastic>
__device__ inline int code_of(float v, float s, float inv_s, int qmax, const RowQuantizeParams& p, uint64_t index) {
  if (Stochastic) return code_exact<true>(v, s, qmax, p, index);
  return nearest_code(v, s, inv_s, qmax);
}

// 1/s for nearest_code's float product (0 for a zero scale, whose codes are 0).
__device__ inline float inverse_scale(float s) { return s > 0.0f ? 1.0f / s : 0.0f; }

// code_of, adding (v − q·s)² and v² to the row's sums in double (the one-value kernel's way).
__device__ inline int code_with_error(float v, float s, float inv_s, int qmax, const RowQuantizeParams& p,
                                      uint64_t index, double& err, double& xx) {
  const int q = p.stochastic ? code_of<true>(v, s, inv_s, qmax, p, index) : code_of<false>(v, s, inv_s, qmax, p, index);
  const double d = static_cast<double>(v) - static_cast<double>(q) * static_cast<double>(s);
  err += d * d;
  xx += static_cast<double>(v) * v;
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
// two sums. For rows that are not a multiple of 8 values or not aligned.
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

// 8 consecutive values, loaded and stored as one access (16 bytes of bf16, 32 of float).
template <typename T>
struct alignas(8 * sizeof(T)) Pack8 {
  T v[8];
};

// The largest |value| of a pack: on bf16 pairs for bf16 (exact, and it keeps the compiler
// from holding the unpacked floats between the two uses of a held pack).
__device__ inline float pack_absmax(const Pack8<float>& pk) {
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) m = fmaxf(m, fabsf(pk.v[k]));
  return m;
}
__device__ inline float pack_absmax(const Pack8<bf16>& pk) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(pk.v);
  __nv_bfloat162 m = __habs2(h[0]);
#pragma unroll
  for (int k = 1; k < 4; ++k) m = __hmax2(m, __habs2(h[k]));
  return fmaxf(__low2float(m), __high2float(m));
}

// The codes of the pack at pack index g of row r, stored as 8 or 4 bytes. When Measure, the
// pack's (v − q·s)² and v² are summed in float (each term rounded once, so a pack's sums are
// within 10 · 2⁻²⁴ of exact, relative) and added to the row's double sums: per-value double
// arithmetic would cost more than the rest of the kernel.
template <bool Measure, bool Stochastic, typename T>
__device__ inline void quantize_pack(const Pack8<T>& pk, long long r, long long cols, long long g, float s, float inv_s,
                                     int qmax, const RowQuantizeParams& p, uint8_t* rc, double& err, double& xx) {
  int q[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    q[i] = code_of<Stochastic>(to_float(pk.v[i]), s, inv_s, qmax, p, static_cast<uint64_t>(r * cols + 8 * g + i));
  if (Measure) {
    float pack_err = 0.0f, pack_xx = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float v = to_float(pk.v[i]);
      const float d = __fmaf_rn(-small_int_to_float(q[i]), s, v);
      pack_err = __fmaf_rn(d, d, pack_err);
      pack_xx = __fmaf_rn(v, v, pack_xx);
    }
    err += pack_err;
    xx += pack_xx;
  }
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

// One warp per row, two passes over it (absmax, then codes; the second mostly from cache):
// for rows longer than the held kernel below takes.
template <typename T>
__global__ void quantize_rows_vec8_kernel(const T* x, long long rows, long long cols, RowQuantizeParams p,
                                          uint8_t* codes, float* scales, double* row_terms) {
  const long long r = static_cast<long long>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  const Pack8<T>* xr = reinterpret_cast<const Pack8<T>*>(x + r * cols);
  const long long packs = cols / 8;
  float m = 0.0f;
  for (long long g = lane; g < packs; g += 32) m = fmaxf(m, pack_absmax(xr[g]));
  m = warp_max(m);
  const int qmax = p.bits == 8 ? 127 : 7;
  const float s = row_scale(m, qmax), inv_s = inverse_scale(s);
  if (lane == 0) scales[r] = s;
  uint8_t* rc = codes + r * ((cols * p.bits) / 8);
  double err = 0.0, xx = 0.0;
  for (long long g = lane; g < packs; g += 32) {
    if (p.stochastic) quantize_pack<true, true>(xr[g], r, cols, g, s, inv_s, qmax, p, rc, err, xx);
    else quantize_pack<true, false>(xr[g], r, cols, g, s, inv_s, qmax, p, rc, err, xx);
  }
  store_row_terms(row_terms, r, lane, err, xx);
}

// Rows held in registers: each row is split over G warps of a block, each lane loading at
// most kHeldPacks packs of 8 values, all issued before any is used, so a row costs one trip
// to memory with every load in flight. The G warps combine their absmax and sums through
// shared memory, in warp order (no atomics: one result in every run).
// 4 packs a lane: on an H200, 1 or 2 packs a lane over more warps ran 1.2–2.1× longer
// (each warp's fixed work per row outweighs the parallelism gained).
constexpr int kHeldPacks = 4;
constexpr int kMaxWarpsPerRow = kThreads / 32;

template <typename T, bool Measure, bool Stochastic>
__global__ void __launch_bounds__(kThreads) quantize_rows_held_kernel(const T* x, long long rows, long long cols,
                                                                  int warps_per_row, RowQuantizeParams p,
                                                                  uint8_t* codes, float* scales, double* row_terms) {
  __shared__ float part_max[kThreads / 32];
  __shared__ double part_err[kThreads / 32], part_xx[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int part = warp % warps_per_row, first = warp - part;  // this warp's share; the row's first warp
  const long long r = static_cast<long long>(blockIdx.x) * (blockDim.x / 32 / warps_per_row) + warp / warps_per_row;
  const bool valid = r < rows;  // no early return: barriers follow
  const long long packs = cols / 8;
  const Pack8<T>* xr = reinterpret_cast<const Pack8<T>*>(x + (valid ? r : 0) * cols);
  const long long g0 = static_cast<long long>(part) * 32 * kHeldPacks + lane;  // slot i: pack g0 + 32 i
  Pack8<T> pk[kHeldPacks];
#pragma unroll
  for (int i = 0; i < kHeldPacks; ++i)
    if (valid && g0 + 32 * i < packs) pk[i] = xr[g0 + 32 * i];
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < kHeldPacks; ++i)
    if (valid && g0 + 32 * i < packs) m = fmaxf(m, pack_absmax(pk[i]));
  m = warp_max(m);
  if (warps_per_row > 1) {
    if (lane == 0) part_max[warp] = m;
    __syncthreads();
    for (int w = 0; w < warps_per_row; ++w) m = fmaxf(m, part_max[first + w]);
  }
  const int qmax = p.bits == 8 ? 127 : 7;
  const float s = row_scale(m, qmax), inv_s = inverse_scale(s);
  double err = 0.0, xx = 0.0;
  if (valid) {
    if (part == 0 && lane == 0) scales[r] = s;
    uint8_t* rc = codes + r * ((cols * p.bits) / 8);
#pragma unroll
    for (int i = 0; i < kHeldPacks; ++i)
      if (g0 + 32 * i < packs)
        quantize_pack<Measure, Stochastic>(pk[i], r, cols, g0 + 32 * i, s, inv_s, qmax, p, rc, err, xx);
  }
  if (!Measure) return;
  err = warp_sum(err);
  xx = warp_sum(xx);
  if (warps_per_row > 1) {
    if (lane == 0) {
      part_err[warp] = err;
      part_xx[warp] = xx;
    }
    __syncthreads();
    if (part == 0 && lane == 0)
      for (int w = 1; w < warps_per_row; ++w) {
        err += part_err[first + w];
        xx += part_xx[first + w];
      }
  }
  if (valid && part == 0 && lane == 0) {
    row_terms[2 * r] = err;
    row_terms[2 * r + 1] = xx;
  }
}

// Launches the held kernel for rows of `cols` values (a multiple of 8); false, launching
// nothing, for rows longer than kMaxWarpsPerRow warps hold.
template <typename T>
bool launch_held_quantize(const T* x, long long rows, long long cols, const RowQuantizeParams& p, uint8_t* codes,
                          float* scales, double* row_terms, cudaStream_t stream) {
  constexpr long long kPerWarp = 32 * kHeldPacks;  // packs a warp holds
  const long long warps_per_row = std::max<long long>((cols / 8 + kPerWarp - 1) / kPerWarp, 1);
  if (warps_per_row > kMaxWarpsPerRow) return false;
  const int w = static_cast<int>(warps_per_row);
  const int rows_per_block = std::max(1, (kThreads / 32) / w);
  const unsigned blocks = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
  const unsigned threads = static_cast<unsigned>(32 * w * rows_per_block);
  auto launch = [&](auto kernel, double* terms) {
    kernel<<<blocks, threads, 0, stream>>>(x, rows, cols, w, p, codes, scales, terms);
  };
  if (p.stochastic) {
    if (row_terms) launch(quantize_rows_held_kernel<T, true, true>, row_terms);
    else launch(quantize_rows_held_kernel<T, false, true>, nullptr);
  } else {
    if (row_terms) launch(quantize_rows_held_kernel<T, true, false>, row_terms);
    else launch(quantize_rows_held_kernel<T, false, false>, nullptr);
  }
  return true;
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
  if (cols % 8 == 0 && aligned(x, 8 * sizeof(T)) && aligned(codes, 8)) {
    if (!launch_held_quantize<T>(x, rows, cols, params, codes, scales, row_terms, stream))
      quantize_rows_vec8_kernel<T><<<blocks, kThreads, 0, stream>>>(x, rows, cols, params, codes, scales, row_terms);
  } else
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
