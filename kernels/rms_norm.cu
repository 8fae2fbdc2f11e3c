#include "kernels/rms_norm.h"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/fixed_order_reduce.cuh"
#include "kernels/vector_pack.cuh"

namespace mok::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;             // forward: 8 rows per block of 256 threads
constexpr int64_t kMaxDgPartials = 512;       // backward: blocks, each writing one dg partial (d)
constexpr int64_t kSharedBudget = 48 * 1024;  // backward: per-warp dg accumulators, bytes

// Lane `lane` owns the packs j = lane·V, lane·V + 32·V, … of every row; a row's sum of squares
// adds each lane's packs in order, then the lanes by the butterfly.

// One warp per row. With saved_rstd, the norm is not recomputed (rms_norm_apply).
template <typename T>
__global__ void rms_norm_forward_kernel(const T* x, const T* g, float eps, int64_t n, int64_t d, T* y,
                                        float* rstd_out, const float* saved_rstd, bool vec) {
  constexpr int V = kPack<T>;
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= n) return;  // the whole warp leaves together
  const T* xr = x + row * d;
  float rs;
  if (saved_rstd) {
    rs = saved_rstd[row];
  } else {
    float ss = 0.f;
    for (int64_t j = lane * V; j < d; j += 32 * V) {
      float xv[V];
      load_row_pack<V>(xr, j, d, vec, xv);
#pragma unroll
      for (int k = 0; k < V; ++k) ss += xv[k] * xv[k];
    }
    ss = warp_sum(ss);
    rs = 1.f / sqrtf(ss / static_cast<float>(d) + eps);
    if (rstd_out && lane == 0) rstd_out[row] = rs;
  }
  T* yr = y + row * d;
  for (int64_t j = lane * V; j < d; j += 32 * V) {
    float xv[V], gv[V], yv[V];
    load_row_pack<V>(xr, j, d, vec, xv);
    load_row_pack<V>(g, j, d, vec, gv);
#pragma unroll
    for (int k = 0; k < V; ++k) yv[k] = xv[k] * rs * gv[k];
    store_row_pack<V>(yr, j, d, vec, yv);
  }
}

// Floats of a warp's dg accumulator: d rounded up to whole packs of V.
template <typename T>
int64_t accumulator_floats(int64_t d) {
  return (d + kPack<T> - 1) / kPack<T> * kPack<T>;
}

// How backward splits the rows: `warps` per block (each with a dg accumulator in shared
// memory), `rows_per_block` consecutive rows per block, `blocks` dg partials. A function of
// (n, d) only, so the summation order is fixed for a shape; sized for the widest
// accumulator (bf16 packs), so the same for both element types.
struct BackwardSplit {
  int warps = 1;
  int64_t rows_per_block = 0;
  int64_t blocks = 0;
};

BackwardSplit backward_split(int64_t n, int64_t d) {
  BackwardSplit s;
  if (n <= 0 || d <= 0) return s;
  s.warps = static_cast<int>(std::clamp<int64_t>(kSharedBudget / (accumulator_floats<bf16>(d) * 4), 1,
                                                 kWarpsPerBlock));
  const int64_t blocks = std::min(kMaxDgPartials, (n + s.warps - 1) / s.warps);
  s.rows_per_block = (n + blocks - 1) / blocks;
  s.blocks = (n + s.rows_per_block - 1) / s.rows_per_block;
  return s;
}

// dx per row (one warp per row) and this block's dg partial: Σ over its rows of dy∘x·rstd,
// each warp into its own shared accumulator, then the warps added in order.
//   dg_partial: (gridDim.x, d)
// A warp's accumulator holds column j = q·V + k (pack q, element k) at k·P + q, P = packs per
// row: the lanes of a warp, on consecutive packs, touch consecutive words (no bank conflicts).
template <typename T>
__global__ void rms_norm_backward_kernel(const T* dy, const T* x, const T* g, const float* rstd, int64_t n,
                                         int64_t d, int64_t rows_per_block, T* dx, float* dg_partial,
                                         bool vec, const T* add) {
  constexpr int V = kPack<T>;
  extern __shared__ float warp_dg[];  // (warps, V·P)
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int64_t packs = (d + V - 1) / V, floats = packs * V;
  float* acc = warp_dg + static_cast<int64_t>(warp) * floats;
  for (int64_t q = lane; q < packs; q += 32)
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k * packs + q] = 0.f;

  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int64_t row1 = row0 + rows_per_block < n ? row0 + rows_per_block : n;
  for (int64_t row = row0 + warp; row < row1; row += warps) {
    const T* xr = x + row * d;
    const T* dyr = dy + row * d;
    const float rs = rstd[row];
    float dot = 0.f;  // Σ_j g·dy·x
    for (int64_t j = lane * V; j < d; j += 32 * V) {
      float xv[V], gv[V], dyv[V];
      load_row_pack<V>(xr, j, d, vec, xv);
      load_row_pack<V>(g, j, d, vec, gv);
      load_row_pack<V>(dyr, j, d, vec, dyv);
#pragma unroll
      for (int k = 0; k < V; ++k) dot += gv[k] * dyv[k] * xv[k];
    }
    dot = warp_sum(dot);
    const float c = rs * rs * dot / static_cast<float>(d);
    T* dxr = dx + row * d;
    for (int64_t j = lane * V; j < d; j += 32 * V) {
      float xv[V], gv[V], dyv[V], dxv[V];
      load_row_pack<V>(xr, j, d, vec, xv);
      load_row_pack<V>(g, j, d, vec, gv);
      load_row_pack<V>(dyr, j, d, vec, dyv);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        dxv[k] = __fmul_rn(rs, gv[k] * dyv[k] - xv[k] * c);  // rounded before `add`
        acc[k * packs + j / V] += dyv[k] * xv[k] * rs;  // 0 past d
      }
      if (add) {
        float av[V];
        load_row_pack<V>(add + row * d, j, d, vec, av);
#pragma unroll
        for (int k = 0; k < V; ++k) dxv[k] += av[k];
      }
      store_row_pack<V>(dxr, j, d, vec, dxv);
    }
  }
  __syncthreads();
  float* out = dg_partial + static_cast<int64_t>(blockIdx.x) * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const int64_t at = (j % V) * packs + j / V;
    float s = warp_dg[at];
    for (int w = 1; w < warps; ++w) s += warp_dg[static_cast<int64_t>(w) * floats + at];
    out[j] = s;
  }
}

// The same backward for rows of at most 32·V·P values in whole packs (P packs a lane), with
// a lane's packs of x and dy loaded at once and held for both passes (the general kernel
// loads them again for dx), and the residual's packs loaded at once before dx. Every value
// goes through the general kernel's arithmetic in the same order (the same lanes own the
// same packs, the same rows fall to the same warps and blocks, dg sums in the same shared
// accumulators), so the two give the same bits. 14 % faster at 16 384 × 768 in bf16.
template <typename T, int P>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    rms_norm_backward_held_kernel(const T* dy, const T* x, const T* g, const float* rstd, int64_t n, int64_t d,
                                  int64_t rows_per_block, T* dx, float* dg_partial, const T* add) {
  constexpr int V = kPack<T>;
  using Raw = Pack<T, V>;
  extern __shared__ float warp_dg[];  // (warps, d), laid out as rms_norm_backward_kernel's
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int64_t packs = d / V;
  float* acc = warp_dg + static_cast<int64_t>(warp) * d;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t q = lane + 32 * p;
    if (q < packs)
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k * packs + q] = 0.f;
  }
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int64_t row1 = row0 + rows_per_block < n ? row0 + rows_per_block : n;
  for (int64_t row = row0 + warp; row < row1; row += warps) {
    const Raw* xr = reinterpret_cast<const Raw*>(x + row * d) + lane;
    const Raw* dyr = reinterpret_cast<const Raw*>(dy + row * d) + lane;
    const Raw* gr = reinterpret_cast<const Raw*>(g) + lane;
    Raw xp[P], dyp[P];
#pragma unroll
    for (int p = 0; p < P; ++p)
      if (lane + 32 * p < packs) {
        xp[p] = xr[32 * p];
        dyp[p] = dyr[32 * p];
      }
    const float rs = rstd[row];
    float dot = 0.f;  // Σ_j g·dy·x
#pragma unroll
    for (int p = 0; p < P; ++p)
      if (lane + 32 * p < packs) {
        const Raw gp = gr[32 * p];
#pragma unroll
        for (int k = 0; k < V; ++k) dot += to_float(gp.v[k]) * to_float(dyp[p].v[k]) * to_float(xp[p].v[k]);
      }
    dot = warp_sum(dot);
    const float c = rs * rs * dot / static_cast<float>(d);
    Raw ap[P];
    if (add) {
      const Raw* ar = reinterpret_cast<const Raw*>(add + row * d) + lane;
#pragma unroll
      for (int p = 0; p < P; ++p)
        if (lane + 32 * p < packs) ap[p] = ar[32 * p];
    }
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int64_t q = lane + 32 * p;
      if (q >= packs) continue;
      const Raw gp = gr[32 * p];
      float dxv[V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float gv = to_float(gp.v[k]), dyv = to_float(dyp[p].v[k]), xv = to_float(xp[p].v[k]);
        // rounded before the residual is added (no fused multiply-add across the two): the
        // bits of rms_norm_backward_kernel, and of dx without `add` plus `add` in fp32
        dxv[k] = __fmul_rn(rs, gv * dyv - xv * c);
        acc[k * packs + q] += dyv * xv * rs;
      }
      if (add)
#pragma unroll
        for (int k = 0; k < V; ++k) dxv[k] += to_float(ap[p].v[k]);
      store_pack<V>(dx + row * d + q * V, dxv);
    }
  }
  __syncthreads();
  float* out = dg_partial + static_cast<int64_t>(blockIdx.x) * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const int64_t at = (j % V) * packs + j / V;
    float s = warp_dg[at];
    for (int w = 1; w < warps; ++w) s += warp_dg[static_cast<int64_t>(w) * d + at];
    out[j] = s;
  }
}

// Packs a lane the held kernel needs for rows of d values (d a multiple of V), or 0 when
// the rows are too wide for it.
template <typename T>
int held_packs_per_lane(int64_t d) {
  constexpr int64_t kMaxPacks = 4;  // the held kernels the launcher instantiates: P = 1..4
  const int64_t packs = d / kPack<T>;
  const int64_t per_lane = (packs + 31) / 32;
  return per_lane >= 1 && per_lane <= kMaxPacks ? static_cast<int>(per_lane) : 0;
}

// dg[j] += Σ_b partial[b][j], b in a fixed order: thread (x, y) of a 32×32 block adds the
// partials b ≡ y (mod 32) in order for column x, then the 32 sums are added in y order (32
// groups rather than 8: a thread's chain of dependent adds is 16 long instead of 64 for 512
// partials; the dense model's norm backward took 3 % less time on an H200).
constexpr int kColumnGroups = 32;

__global__ void add_dg_partials_kernel(const float* partial, int64_t blocks, int64_t d, float* dg) {
  __shared__ float sums[kColumnGroups][32];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float s = 0.f;
  if (j < d)
    for (int64_t b = threadIdx.y; b < blocks; b += kColumnGroups) s += partial[b * d + j];
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < d) {
    float total = sums[0][threadIdx.x];
    for (int y = 1; y < kColumnGroups; ++y) total += sums[y][threadIdx.x];
    dg[j] += total;
  }
}

template <typename T>
bool rows_vectorizable(int64_t d, std::initializer_list<const void*> pointers) {
  if (d % kPack<T> != 0) return false;
  for (const void* p : pointers)
    if (!is_aligned(p, 16)) return false;
  return true;
}

template <typename T>
void launch_forward(const T* x, const T* g, float eps, int64_t n, int64_t d, T* y, float* rstd_out,
                    const float* saved_rstd, cudaStream_t stream) {
  if (n <= 0 || d <= 0) return;
  const bool vec = rows_vectorizable<T>(d, {x, g, y});
  const auto blocks = static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  rms_norm_forward_kernel<T><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x, g, eps, n, d, y, rstd_out,
                                                                         saved_rstd, vec);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename T>
void rms_norm_forward(const T* x, const T* g, float eps, int64_t n, int64_t d, T* y, float* rstd,
                      cudaStream_t stream) {
  launch_forward(x, g, eps, n, d, y, rstd, nullptr, stream);
}

template <typename T>
void rms_norm_apply(const T* x, const T* g, const float* rstd, int64_t n, int64_t d, T* y,
                    cudaStream_t stream) {
  if (n > 0 && !rstd) throw std::invalid_argument("rms_norm_apply: rstd is null");
  launch_forward(x, g, 0.f, n, d, y, nullptr, rstd, stream);
}

size_t rms_norm_backward_workspace_bytes(int64_t n, int64_t d) {
  const BackwardSplit s = backward_split(n, d);
  return static_cast<size_t>(s.blocks * std::max<int64_t>(d, 0)) * sizeof(float);
}

template <typename T>
void rms_norm_backward(const T* dy, const T* x, const T* g, const float* rstd, int64_t n, int64_t d,
                       T* dx, float* dg, void* ws, size_t ws_bytes, cudaStream_t stream, const T* add) {
  const BackwardSplit s = backward_split(n, d);
  if (s.blocks == 0) return;
  const size_t need = rms_norm_backward_workspace_bytes(n, d);
  if (ws_bytes < need)
    throw std::invalid_argument("rms_norm_backward: workspace of " + std::to_string(ws_bytes) +
                                " bytes, needs " + std::to_string(need) + " for n=" + std::to_string(n) +
                                ", d=" + std::to_string(d));
  const size_t shared = static_cast<size_t>(s.warps * accumulator_floats<T>(d)) * sizeof(float);
  if (shared > static_cast<size_t>(kSharedBudget)) {  // only when d > 12288: opt in to more
    int device = 0, optin = 0;
    MOK_CUDA_CHECK(cudaGetDevice(&device));
    MOK_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (shared > static_cast<size_t>(optin))
      throw std::invalid_argument("rms_norm_backward: d=" + std::to_string(d) + " needs " +
                                  std::to_string(shared) + " bytes of shared memory per block; the device has " +
                                  std::to_string(optin));
    MOK_CUDA_CHECK(cudaFuncSetAttribute(rms_norm_backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared)));
  }
  float* partial = static_cast<float*>(ws);
  const bool vec = rows_vectorizable<T>(d, {dy, x, g, dx}) && (!add || rows_vectorizable<T>(d, {add}));
  const dim3 grid(static_cast<unsigned>(s.blocks)), block(static_cast<unsigned>(s.warps * 32));
  using HeldKernel = void (*)(const T*, const T*, const T*, const float*, int64_t, int64_t, int64_t, T*, float*,
                              const T*);
  const HeldKernel held_kernels[] = {rms_norm_backward_held_kernel<T, 1>, rms_norm_backward_held_kernel<T, 2>,
                                     rms_norm_backward_held_kernel<T, 3>, rms_norm_backward_held_kernel<T, 4>};
  if (const int held = vec ? held_packs_per_lane<T>(d) : 0; held > 0)
    held_kernels[held - 1]<<<grid, block, shared, stream>>>(dy, x, g, rstd, n, d, s.rows_per_block, dx, partial,
                                                            add);
  else
    rms_norm_backward_kernel<T><<<grid, block, shared, stream>>>(dy, x, g, rstd, n, d, s.rows_per_block, dx,
                                                                 partial, vec, add);
  MOK_CUDA_CHECK_LAUNCH();
  add_dg_partials_kernel<<<static_cast<unsigned>((d + 31) / 32), dim3(32, kColumnGroups), 0, stream>>>(
      partial, s.blocks, d, dg);
  MOK_CUDA_CHECK_LAUNCH();
}

#define MOK_INSTANTIATE_RMS_NORM(T)                                                                      \
  template void rms_norm_forward<T>(const T*, const T*, float, int64_t, int64_t, T*, float*,             \
                                    cudaStream_t);                                                       \
  template void rms_norm_apply<T>(const T*, const T*, const float*, int64_t, int64_t, T*, cudaStream_t); \
  template void rms_norm_backward<T>(const T*, const T*, const T*, const float*, int64_t, int64_t, T*,   \
                                     float*, void*, size_t, cudaStream_t, const T*);
MOK_INSTANTIATE_RMS_NORM(float)
MOK_INSTANTIATE_RMS_NORM(bf16)
#undef MOK_INSTANTIATE_RMS_NORM

}  // namespace mok::cuda
