#include "kernels/swiglu.h"

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/fixed_order_reduce.cuh"
#include "kernels/vector_pack.cuh"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 8192;  // grid-stride beyond this

__device__ inline float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// h = silu(gate)·up in float, before rounding to T (the forward's arithmetic, shared by the
// gated backward that rebuilds h)
__device__ inline float swiglu_value(float g, float u) { return g * sigmoid(g) * u; }

// d/dgate = d·up·s·(1 + gate·(1 − s)),  d/dup = d·silu(gate),  s = sigmoid(gate), for the
// gradient d of h (shared by the plain and the gated backward, so they round alike)
__device__ inline void swiglu_grads(float g, float u, float d, float& dg, float& du) {
  const float s = sigmoid(g);
  du = d * (g * s);
  dg = d * u * s * (1.f + g * (1.f - s));
}

// Each thread takes packs of V columns of one row (V = 1 when rows are not pack-aligned):
// pack p covers row p / (f/V), columns (p % (f/V))·V … +V of h, and the same columns of the
// gate and up halves of a.
template <typename T, int V>
__global__ void swiglu_forward_kernel(const T* a, int64_t n, int64_t f, T* h) {
  const int64_t packs_per_row = f / V, packs = n * packs_per_row;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = p / packs_per_row, j = (p % packs_per_row) * V;
    const T* gate = a + r * 2 * f + j;
    float g[V], u[V], out[V];
    load_pack<V>(gate, g);
    load_pack<V>(gate + f, u);
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = swiglu_value(g[k], u[k]);
    store_pack<V>(h + r * f + j, out);
  }
}

template <typename T, int V>
__global__ void swiglu_backward_kernel(const T* a, const T* dh, int64_t n, int64_t f, T* da) {
  const int64_t packs_per_row = f / V, packs = n * packs_per_row;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = p / packs_per_row, j = (p % packs_per_row) * V;
    const T* gate = a + r * 2 * f + j;
    float g[V], u[V], d[V], dg[V], du[V];
    load_pack<V>(gate, g);
    load_pack<V>(gate + f, u);
    load_pack<V>(dh + r * f + j, d);
#pragma unroll
    for (int k = 0; k < V; ++k) swiglu_grads(g[k], u[k], d[k], dg[k], du[k]);
    T* out = da + r * 2 * f + j;
    store_pack<V>(out, dg);
    store_pack<V>(out + f, du);
  }
}

// The routed experts' backward, one warp per row r: dgate[r] = Σ_j dh·h with h rebuilt from
// a and rounded to T as the forward rounds it (lane-strided packs of V, an fma per column in
// order, then the xor butterfly: row_dot's order, so the same bits), and da as
// swiglu_backward_kernel gives it for dh·gate[r] rounded to T (scale_rows' arithmetic). Reads
// a and dh once; h is never read.
constexpr int kWarpsPerBlock = kThreads / 32;

template <typename T, int V>
__global__ void swiglu_backward_gated_kernel(const T* a, const T* dh, const float* gate, int64_t n, int64_t f, T* da,
                                             float* dgate) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  if (r >= n) return;
  const int lane = threadIdx.x % 32;
  const float rs = gate[r];
  float dot = 0.f;
  for (int64_t j = static_cast<int64_t>(lane) * V; j < f; j += 32 * V) {
    const T* gate_half = a + r * 2 * f + j;
    float g[V], u[V], d[V], dg[V], du[V];
    load_pack<V>(gate_half, g);
    load_pack<V>(gate_half + f, u);
    load_pack<V>(dh + r * f + j, d);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float h = to_float(from_float<T>(swiglu_value(g[k], u[k])));
      dot = fmaf(d[k], h, dot);
      swiglu_grads(g[k], u[k], to_float(from_float<T>(d[k] * rs)), dg[k], du[k]);
    }
    T* out = da + r * 2 * f + j;
    store_pack<V>(out, dg);
    store_pack<V>(out + f, du);
  }
  dot = warp_sum(dot);
  if (lane == 0) dgate[r] = dot;
}

unsigned grid_for_packs(int64_t packs) {
  const int64_t blocks = (packs + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// Packs of 16 bytes when every row's halves start on a 16-byte boundary.
template <typename T>
bool packable(int64_t f, const void* p0, const void* p1, const void* p2 = nullptr) {
  return f % kPack<T> == 0 && is_aligned(p0, 16) && is_aligned(p1, 16) && is_aligned(p2, 16);
}

}  // namespace

template <typename T>
void swiglu_forward(const T* a, int64_t n, int64_t f, T* h, cudaStream_t stream) {
  if (n <= 0 || f <= 0) return;
  constexpr int V = kPack<T>;
  if (packable<T>(f, a, h)) {
    swiglu_forward_kernel<T, V><<<grid_for_packs(n * (f / V)), kThreads, 0, stream>>>(a, n, f, h);
  } else {
    swiglu_forward_kernel<T, 1><<<grid_for_packs(n * f), kThreads, 0, stream>>>(a, n, f, h);
  }
  MOK_CUDA_CHECK_LAUNCH();
}

template <typename T>
void swiglu_backward(const T* a, const T* dh, int64_t n, int64_t f, T* da, cudaStream_t stream) {
  if (n <= 0 || f <= 0) return;
  constexpr int V = kPack<T>;
  if (packable<T>(f, a, dh, da)) {
    swiglu_backward_kernel<T, V><<<grid_for_packs(n * (f / V)), kThreads, 0, stream>>>(a, dh, n, f, da);
  } else {
    swiglu_backward_kernel<T, 1><<<grid_for_packs(n * f), kThreads, 0, stream>>>(a, dh, n, f, da);
  }
  MOK_CUDA_CHECK_LAUNCH();
}

template <typename T>
void swiglu_backward_gated(const T* a, const T* dh, const float* gate, int64_t n, int64_t f, T* da, float* dgate,
                           cudaStream_t stream) {
  if (n <= 0) return;
  const unsigned blocks = static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  constexpr int V = kPack<T>;
  if (packable<T>(f, a, dh, da)) {
    swiglu_backward_gated_kernel<T, V><<<blocks, kThreads, 0, stream>>>(a, dh, gate, n, f, da, dgate);
  } else {
    swiglu_backward_gated_kernel<T, 1><<<blocks, kThreads, 0, stream>>>(a, dh, gate, n, f, da, dgate);
  }
  MOK_CUDA_CHECK_LAUNCH();
}

template void swiglu_forward<float>(const float*, int64_t, int64_t, float*, cudaStream_t);
template void swiglu_forward<bf16>(const bf16*, int64_t, int64_t, bf16*, cudaStream_t);
template void swiglu_backward<float>(const float*, const float*, int64_t, int64_t, float*, cudaStream_t);
template void swiglu_backward<bf16>(const bf16*, const bf16*, int64_t, int64_t, bf16*, cudaStream_t);
template void swiglu_backward_gated<float>(const float*, const float*, const float*, int64_t, int64_t, float*, float*,
                                           cudaStream_t);
template void swiglu_backward_gated<bf16>(const bf16*, const bf16*, const float*, int64_t, int64_t, bf16*, float*,
                                          cudaStream_t);

}  // namespace mok::cuda
