#include "kernels/rope.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/vector_pack.cuh"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per pair (row, head, i): a = x[i], b = x[i + hd/2] turn by (cos, ±sin) of the
// row's position. blockIdx.y strides over rows; threads over the heads·hd/2 pairs of a row.
template <typename T>
__global__ void rope_kernel(T* x, int64_t rows, int64_t ld, int heads, int seq, int pos0, const int32_t* seq_pos0,
                            const float* cos, const float* sin, int half, float sign) {
  const int pair = blockIdx.x * kThreads + threadIdx.x;
  if (pair >= heads * half) return;
  const int h = pair / half, i = pair % half;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t pos = (seq_pos0 ? seq_pos0[r / seq] : pos0) + r % seq;
    const float c = cos[pos * half + i], s = sign * sin[pos * half + i];
    T* a = x + r * ld + static_cast<int64_t>(h) * 2 * half + i;
    T* b = a + half;
    const float x1 = to_float(*a), x2 = to_float(*b);
    *a = from_float<T>(x1 * c - x2 * s);
    *b = from_float<T>(x1 * s + x2 * c);
  }
}

// The same with V = 16 bytes of consecutive pairs per thread: one vector load and store of
// each half (a at i..i+V, b at i+V/2.. of the other half), the cos and sin rows as float
// vectors. For half a multiple of V, rows of 16-byte-aligned width: the scalar kernel's
// 2-byte accesses leave half the memory bandwidth unused. The same float arithmetic per
// element, so the same bits.
template <typename T>
__global__ void rope_vec_kernel(T* x, int64_t rows, int64_t ld, int heads, int seq, int pos0, const int32_t* seq_pos0,
                                const float* cos, const float* sin, int half, float sign) {
  constexpr int V = kPack<T>;
  const int per_head = half / V, per_row = heads * per_head;
  const int64_t total = rows * per_row;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / per_row;
    const int g = static_cast<int>(t - r * per_row);
    const int h = g / per_head, i = (g % per_head) * V;
    const int64_t pos = (seq_pos0 ? seq_pos0[r / seq] : pos0) + r % seq;
    T* a = x + r * ld + static_cast<int64_t>(h) * 2 * half + i;
    float xa[V], xb[V], c[V], sn[V];
    load_pack<V>(a, xa);
    load_pack<V>(a + half, xb);
    load_pack<V>(cos + pos * half + i, c);
    load_pack<V>(sin + pos * half + i, sn);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float s = sign * sn[k];
      const float x1 = xa[k], x2 = xb[k];
      xa[k] = x1 * c[k] - x2 * s;
      xb[k] = x1 * s + x2 * c[k];
    }
    store_pack<V>(a, xa);
    store_pack<V>(a + half, xb);
  }
}

}  // namespace

template <typename T>
void rope_apply(T* x, int64_t rows, int64_t ld, int heads, int seq, int pos0, const float* cos,
                const float* sin, int hd, bool inverse, cudaStream_t stream, const int32_t* seq_pos0) {
  if (hd <= 0 || hd % 2)
    throw std::invalid_argument("rope_apply: head dimension must be even and positive, got " + std::to_string(hd));
  if (seq <= 0 || pos0 < 0 || heads < 0 || ld < static_cast<int64_t>(heads) * hd)
    throw std::invalid_argument("rope_apply: seq=" + std::to_string(seq) + ", pos0=" + std::to_string(pos0) +
                                ", " + std::to_string(heads) + " heads of " + std::to_string(hd) +
                                " in rows of " + std::to_string(ld));
  if (rows <= 0 || heads == 0) return;
  const int half = hd / 2;
  constexpr int V = kPack<T>;
  if (half % V == 0 && (ld * static_cast<int64_t>(sizeof(T))) % 16 == 0 && is_aligned(x, 16) && is_aligned(cos, 16) &&
      is_aligned(sin, 16)) {
    const int64_t total = rows * (static_cast<int64_t>(heads) * half / V);
    const int blocks = static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535 * 8));
    rope_vec_kernel<T><<<blocks, kThreads, 0, stream>>>(x, rows, ld, heads, seq, pos0, seq_pos0, cos, sin, half,
                                                         inverse ? -1.f : 1.f);
    MOK_CUDA_CHECK_LAUNCH();
    return;
  }
  const dim3 grid(blocks_for(static_cast<long long>(heads) * half, kThreads),
                  static_cast<unsigned>(rows < 65535 ? rows : 65535));
  rope_kernel<T><<<grid, kThreads, 0, stream>>>(x, rows, ld, heads, seq, pos0, seq_pos0, cos, sin, half,
                                                inverse ? -1.f : 1.f);
  MOK_CUDA_CHECK_LAUNCH();
}

template void rope_apply<float>(float*, int64_t, int64_t, int, int, int, const float*, const float*, int, bool,
                                cudaStream_t, const int32_t*);
template void rope_apply<bf16>(bf16*, int64_t, int64_t, int, int, int, const float*, const float*, int, bool,
                               cudaStream_t, const int32_t*);

}  // namespace mok::cuda
