#include "kernels/cached_attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/fixed_order_reduce.cuh"
#include "kernels/vector_pack.cuh"

namespace mok::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kChunk = kCachedKeyChunk;
// Below this many (row, head) pairs a chunk gets a block of its own (the split form).
constexpr int64_t kSplitBelowQueries = 4096;

// One thread per (row, column) of the new keys and values.
template <typename T>
__global__ void append_kv_kernel(const T* qkv, int n, int64_t d, T* const* k_cache, T* const* v_cache,
                                 const int32_t* pos0, int64_t total) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const int64_t row = i / (2 * d), c = i % (2 * d);  // row = b·n + r
  const int64_t b = row / n, r = row % n;
  T* dst = c < d ? k_cache[b] : v_cache[b];
  dst[(pos0[b] + r) * d + c % d] = qkv[row * 3 * d + d + c];
}

// Softmax state over the keys merged so far: max score, sum of exp(score − max) and one
// output dimension's sum of exp(score − max)·value.
struct Running {
  float m = -INFINITY, l = 0.f, a = 0.f;
};

// Merges a chunk's (m, l, a) into the state; every merge of a row runs this in chunk order.
__device__ inline void merge_chunk(Running& run, float m, float l, float a) {
  const float top = fmaxf(run.m, m);
  const float old = run.m == -INFINITY ? 0.f : expf(run.m - top), add = expf(m - top);
  run.l = run.l * old + l * add;
  run.a = run.a * old + a * add;
  run.m = top;
}

// Launch shape of a (row, head) pair's work: L lanes per key (a power of two, ≤ 32), each
// holding NP packs of V elements of the head dimension: dims (p·L + lane)·V + e, e < V, so
// the padded index of a dimension is the dimension itself.
template <typename T, int L, int NP>
struct Layout {
  static constexpr int V = kPack<T>;
  static constexpr int kGroups = kThreads / L;       // keys in flight per block
  static constexpr int kPadded = NP * L * V;         // ≥ hd
};

// Block-shared storage of one chunk's work.
template <int Padded, int Groups>
struct ChunkShared {
  float p[kChunk];                  // scores
  float part[Groups * Padded];      // each lane group's weighted sum of values
};

// The chunk [t0, t1) of one (row, head): its max score m, sum l of exp(s − m), and (in
// sh.part, summed over groups by the caller) Σ exp(s − m)·v. Call from every thread.
template <typename T, int L, int NP, int Padded, int Groups>
__device__ inline void chunk_partial(const float (&q)[NP][kPack<T>], const T* K, const T* Vc, int64_t d, int hd,
                                     bool vec, int64_t t0, int64_t t1, ChunkShared<Padded, Groups>& sh, float& m,
                                     float& l) {
  constexpr int V = kPack<T>;
  const int lane = threadIdx.x % L, group = threadIdx.x / L;
  // Scores: every lane runs the same iterations (the shuffles need the whole warp).
#pragma unroll 8
  for (int64_t base = t0; base < t1; base += Groups) {
    const int64_t t = base + group;
    float dot = 0.f;
    if (t < t1) {
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        const int64_t j = int64_t(p * L + lane) * V;
        float k[V];
        if (j < hd) {
          load_row_pack<V>(K + t * d, j, hd, vec, k);
#pragma unroll
          for (int e = 0; e < V; ++e) dot += q[p][e] * k[e];
        }
      }
    }
#pragma unroll
    for (int o = L / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(kFullWarp, dot, o);
    if (t < t1 && lane == 0) sh.p[t - t0] = dot;
  }
  __syncthreads();
  // Every warp reduces all the chunk's scores itself, lane i taking scores i, i + 32, …: the
  // same order in each warp, so each gets the same bits, and no further barrier is needed.
  const int count = static_cast<int>(t1 - t0), warp_lane = threadIdx.x % 32;
  float mx = -INFINITY;
  for (int i = warp_lane; i < count; i += 32) mx = fmaxf(mx, sh.p[i]);
  m = warp_max(mx);
  float sum = 0.f;
  for (int i = warp_lane; i < count; i += 32) sum += expf(sh.p[i] - m);
  l = warp_sum(sum);
  float acc[NP][V] = {};
#pragma unroll 8
  for (int64_t t = t0 + group; t < t1; t += Groups) {
    const float w = expf(sh.p[t - t0] - m);
#pragma unroll
    for (int p = 0; p < NP; ++p) {
      const int64_t j = int64_t(p * L + lane) * V;
      if (j < hd) {
        float v[V];
        load_row_pack<V>(Vc + t * d, j, hd, vec, v);
#pragma unroll
        for (int e = 0; e < V; ++e) acc[p][e] += w * v[e];
      }
    }
  }
#pragma unroll
  for (int p = 0; p < NP; ++p)
#pragma unroll
    for (int e = 0; e < V; ++e) sh.part[group * Padded + (p * L + lane) * V + e] = acc[p][e];
  __syncthreads();
}

// Dimension i's sum over the lane groups, in group order.
template <int Padded, int Groups>
__device__ inline float group_sum(const ChunkShared<Padded, Groups>& sh, int i) {
  float s = sh.part[i];
  for (int g = 1; g < Groups; ++g) s += sh.part[g * Padded + i];
  return s;
}

// Grid: x = (row, head) pairs (row-major: row·heads + head), y = chunks (split form) or 1
// (loop form). The split form leaves each chunk's (m, l, Σ) in scratch for merge_kernel,
// except for rows of one chunk, whose block writes the output itself.
template <typename T, int L, int NP>
__global__ void __launch_bounds__(kThreads) chunk_kernel(const T* qkv, int n, T* const* k_cache, T* const* v_cache,
                                                         const int32_t* pos0, int heads, int hd, float scale, bool vec,
                                                         bool split, int chunks_max, float* scratch, T* o) {
  using Lay = Layout<T, L, NP>;
  constexpr int V = Lay::V, Padded = Lay::kPadded, Groups = Lay::kGroups;
  __shared__ ChunkShared<Padded, Groups> sh;
  const int64_t w = blockIdx.x;
  const int h = static_cast<int>(w % heads);
  const int64_t row = w / heads, b = row / n, r = row % n;
  const int64_t d = int64_t(heads) * hd;
  const int64_t keys = pos0[b] + r + 1;
  const int chunks = static_cast<int>((keys + kChunk - 1) / kChunk);
  const int first = split ? static_cast<int>(blockIdx.y) : 0;
  if (first >= chunks) return;  // the whole block leaves: no barrier is waited for
  const int last = split ? first + 1 : chunks;

  const int lane = threadIdx.x % L;
  const T* qrow = qkv + row * 3 * d + int64_t(h) * hd;
  float q[NP][V];
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    const int64_t j = int64_t(p * L + lane) * V;
    if (j < hd) {
      load_row_pack<V>(qrow, j, hd, vec, q[p]);
#pragma unroll
      for (int e = 0; e < V; ++e) q[p][e] *= scale;
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) q[p][e] = 0.f;
    }
  }
  const T* K = k_cache[b] + int64_t(h) * hd;
  const T* Vc = v_cache[b] + int64_t(h) * hd;
  constexpr int kPerThread = (Padded + kThreads - 1) / kThreads;
  Running run[kPerThread];
  for (int c = first; c < last; ++c) {
    const int64_t t0 = int64_t(c) * kChunk, t1 = keys < t0 + kChunk ? keys : t0 + kChunk;
    float m, l;
    chunk_partial<T, L, NP, Padded, Groups>(q, K, Vc, d, hd, vec, t0, t1, sh, m, l);
    if (split && chunks > 1) {
      float* out = scratch + (w * chunks_max + c) * int64_t(2 + Padded);
      if (threadIdx.x == 0) {
        out[0] = m;
        out[1] = l;
      }
      for (int i = threadIdx.x; i < Padded; i += kThreads) out[2 + i] = group_sum(sh, i);
      return;
    }
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int i = threadIdx.x + k * kThreads;
      if (i < Padded) merge_chunk(run[k], m, l, group_sum(sh, i));
    }
    __syncthreads();  // sh is the next chunk's
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int j = threadIdx.x + k * kThreads;
    if (j < hd) o[row * d + int64_t(h) * hd + j] = from_float<T>(run[k].a / run[k].l);
  }
}

// The split form's second pass: one block per (row, head) of more than one chunk merges the
// chunks' partial results in chunk order, as the loop form does.
template <typename T>
__global__ void merge_kernel(const float* scratch, int n, const int32_t* pos0, int heads, int hd, int padded,
                             int chunks_max, T* o) {
  const int64_t w = blockIdx.x;
  const int h = static_cast<int>(w % heads);
  const int64_t row = w / heads, b = row / n, r = row % n;
  const int64_t keys = pos0[b] + r + 1;
  const int chunks = static_cast<int>((keys + kChunk - 1) / kChunk);
  if (chunks <= 1) return;  // written by its chunk's block
  const int64_t d = int64_t(heads) * hd;
  for (int j = threadIdx.x; j < hd; j += blockDim.x) {
    Running run;
    for (int c = 0; c < chunks; ++c) {
      const float* part = scratch + (w * chunks_max + c) * int64_t(2 + padded);
      merge_chunk(run, part[0], part[1], part[2 + j]);
    }
    o[row * d + int64_t(h) * hd + j] = from_float<T>(run.a / run.l);
  }
}

// Lanes per key and packs per lane for a head dimension: the fewest lanes (a power of two)
// that hold it in one pack each, or 32 lanes of two packs (fp32 beyond 128).
struct Split {
  int lanes, packs;
};
template <typename T>
Split split_for(int hd) {
  const int packs = (hd + kPack<T> - 1) / kPack<T>;
  if (packs > 32) return {32, 2};
  int lanes = 1;
  while (lanes < packs) lanes *= 2;
  return {lanes, 1};
}

int chunks_of(int max_len) { return (max_len + kChunk - 1) / kChunk; }

template <typename T, int L, int NP>
void launch(const T* qkv, int n, T* const* k_cache, T* const* v_cache, const int32_t* pos0, int max_len, int heads,
            int hd, bool vec, float* scratch, T* o, int64_t queries, cudaStream_t stream) {
  const float scale = 1.0f / std::sqrt(float(hd));
  const bool split = scratch != nullptr;
  const int chunks_max = chunks_of(max_len);
  const dim3 grid(static_cast<unsigned>(queries), split ? static_cast<unsigned>(chunks_max) : 1u);
  chunk_kernel<T, L, NP><<<grid, kThreads, 0, stream>>>(qkv, n, k_cache, v_cache, pos0, heads, hd, scale, vec, split,
                                                        chunks_max, scratch, o);
  MOK_CUDA_CHECK_LAUNCH();
  if (split && chunks_max > 1) {
    merge_kernel<T><<<static_cast<unsigned>(queries), kThreads, 0, stream>>>(
        scratch, n, pos0, heads, hd, Layout<T, L, NP>::kPadded, chunks_max, o);
    MOK_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

template <typename T>
int64_t cached_attention_scratch_floats(int64_t queries, int max_len, int hd) {
  if (queries >= kSplitBelowQueries || chunks_of(max_len) <= 1) return 0;
  const Split s = split_for<T>(hd);
  return queries * chunks_of(max_len) * (2 + int64_t(s.packs) * s.lanes * kPack<T>);
}

template <typename T>
void cached_attention(const T* qkv, int batch, int n, T* const* k_cache, T* const* v_cache, const int32_t* pos0,
                      int max_len, int heads, int hd, bool aligned, float* scratch, T* o, cudaStream_t stream) {
  if (hd < 1 || hd > kMaxCachedHeadDim)
    throw std::invalid_argument("cached_attention: head dimension " + std::to_string(hd) + " (1 to " +
                                std::to_string(kMaxCachedHeadDim) + ")");
  const int64_t rows = int64_t(batch) * n, d = int64_t(heads) * hd;
  if (rows <= 0) return;
  append_kv_kernel<T><<<blocks_for(rows * 2 * d, 256), 256, 0, stream>>>(qkv, n, d, k_cache, v_cache, pos0,
                                                                         rows * 2 * d);
  MOK_CUDA_CHECK_LAUNCH();
  const int64_t queries = rows * heads;
  if (cached_attention_scratch_floats<T>(queries, max_len, hd) == 0) scratch = nullptr;
  else if (scratch == nullptr) throw std::invalid_argument("cached_attention: the split form needs its scratch");
  const bool vec = aligned && hd % kPack<T> == 0;
  const Split s = split_for<T>(hd);
  constexpr int kWidest = kPack<T> * 32 >= kMaxCachedHeadDim ? 1 : 2;  // packs a lane at hd 256
  const auto go = s.packs == 2  ? launch<T, 32, kWidest>
                  : s.lanes == 1 ? launch<T, 1, 1>
                  : s.lanes == 2 ? launch<T, 2, 1>
                  : s.lanes == 4 ? launch<T, 4, 1>
                  : s.lanes == 8 ? launch<T, 8, 1>
                  : s.lanes == 16 ? launch<T, 16, 1>
                                  : launch<T, 32, 1>;
  go(qkv, n, k_cache, v_cache, pos0, max_len, heads, hd, vec, scratch, o, queries, stream);
}

template int64_t cached_attention_scratch_floats<float>(int64_t, int, int);
template int64_t cached_attention_scratch_floats<bf16>(int64_t, int, int);
template void cached_attention<float>(const float*, int, int, float* const*, float* const*, const int32_t*, int, int,
                                      int, bool, float*, float*, cudaStream_t);
template void cached_attention<bf16>(const bf16*, int, int, bf16* const*, bf16* const*, const int32_t*, int, int, int,
                                     bool, float*, bf16*, cudaStream_t);

}  // namespace mok::cuda
