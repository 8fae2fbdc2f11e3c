#pragma once
// 16-byte packs: V consecutive elements moved by one vector load or store (V = 4 floats or
// 8 bf16), converted to and from float registers. A pack pointer must be aligned to the
// pack's size; launchers test that with is_aligned and fall back to one element at a time.

#include <cstdint>

#include "kernels/cuda_types.h"

namespace mok::cuda {

// Elements of T in one 16-byte load.
template <typename T>
constexpr int kPack = 16 / static_cast<int>(sizeof(T));

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

inline bool is_aligned(const void* p, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

// V elements at p (aligned to V·sizeof(T)) into float registers.
template <int V, typename T>
__device__ inline void load_pack(const T* p, float (&out)[V]) {
  const Pack<T, V> pack = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = to_float(pack.v[k]);
}

template <int V, typename T>
__device__ inline void store_pack(T* p, const float (&in)[V]) {
  Pack<T, V> pack;
#pragma unroll
  for (int k = 0; k < V; ++k) pack.v[k] = from_float<T>(in[k]);
  *reinterpret_cast<Pack<T, V>*>(p) = pack;
}

// The pack of V elements starting at element j of a row of d: one vector load when `vec`
// (the row is aligned and d is a multiple of V), else element by element, zero past d.
// Either way the same elements land in the same registers, so a reduction over them adds
// in the same order whichever path runs.
template <int V, typename T>
__device__ inline void load_row_pack(const T* row, int64_t j, int64_t d, bool vec, float (&out)[V]) {
  if (vec) {
    load_pack<V>(row + j, out);
    return;
  }
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = j + k < d ? to_float(row[j + k]) : 0.f;
}

template <int V, typename T>
__device__ inline void store_row_pack(T* row, int64_t j, int64_t d, bool vec, const float (&in)[V]) {
  if (vec) {
    store_pack<V>(row + j, in);
    return;
  }
#pragma unroll
  for (int k = 0; k < V; ++k)
    if (j + k < d) row[j + k] = from_float<T>(in[k]);
}

}  // namespace mok::cuda
