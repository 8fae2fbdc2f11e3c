#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/fixed_order_reduce.cuh"
#include "kernels/moe_routing.h"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kExpertsPerLane = kMaxRouterExperts / 32;  // router kernels: the most experts a lane holds

unsigned int warp_blocks(int64_t rows) { return blocks_for(rows, kWarpsPerBlock); }

// ---- 16-byte vectors of T for the row kernels (V = 16 / sizeof(T)), or scalars (V = 1) ----

template <typename T, int V>
__device__ inline void load_vec(const T* p, float (&v)[V]) {
  if constexpr (V == 1) {
    v[0] = to_float(p[0]);
  } else {
    static_assert(V * sizeof(T) == 16, "a vector is 16 bytes");
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = to_float(e[i]);
  }
}

template <typename T, int V>
__device__ inline void store_vec(T* p, const float (&v)[V]) {
  if constexpr (V == 1) {
    p[0] = from_float<T>(v[0]);
  } else {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int i = 0; i < V; ++i) e[i] = from_float<T>(v[i]);
    *reinterpret_cast<uint4*>(p) = raw;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Rows of d elements can be read as 16-byte vectors when every row start is 16-byte aligned.
template <typename T>
bool rows_vectorizable(int64_t d, std::initializer_list<const void*> ptrs) {
  if ((d * static_cast<int64_t>(sizeof(T))) % 16 != 0) return false;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}

// ---- router: softmax and top-k, W lanes per token ----
//
// A token's E experts lie on W = min(32, E rounded up to a power of 2) lanes of a warp, EPL =
// E / W (rounded up) per lane: expert e on lane e % W, slot e / W. So 32 / W tokens share a
// warp (4 at E = 8) and no lane holds only padding. Sums and maxima are xor butterflies
// within the W lanes; for E ≤ 32 padded to W they give the bits a whole-warp butterfly gives
// (the other lanes would add zeros).

// The shape of a router kernel launch.
struct RouterLanes {
  int width = 32, per_lane = 1;
};

RouterLanes router_lanes(int E) {
  RouterLanes r;
  int w = 1;
  while (w < E && w < 32) w *= 2;
  r.width = w;
  r.per_lane = (E + w - 1) / w;
  return r;
}

template <int W>
__device__ inline float lanes_sum(float v) {
  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o, W);
  return v;
}
template <int W>
__device__ inline float lanes_max(float v) {
  for (int o = W / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o, W));
  return v;
}

// The largest value over the W lanes and its index, ties to the lower index; every lane ends
// with the same pair.
template <int W>
__device__ inline void lanes_argmax(float& best, int& best_e) {
  for (int o = W / 2; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, best, o, W);
    const int other_e = __shfl_xor_sync(0xffffffffu, best_e, o, W);
    if (other > best || (other == best && other_e < best_e)) {
      best = other;
      best_e = other_e;
    }
  }
}

template <int W, int EPL>
__global__ void router_softmax_topk_kernel(const float* logits, int64_t n, int E, int k, float* probs, float* lse,
                                           int32_t* expert, float* gate, RouterLocality loc) {
  constexpr int kTokensPerWarp = 32 / W;
  const int64_t warp_t0 = (blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32) * kTokensPerWarp;
  if (warp_t0 >= n) return;  // the whole warp: the shuffles below need every lane of a live warp
  const int lane = threadIdx.x % W;
  const int64_t t = warp_t0 + (threadIdx.x % 32) / W;
  const bool live = t < n;
  const float* l = logits + t * E;
  float v[EPL];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int e = lane + W * i;
    v[i] = live && e < E ? l[e] : -INFINITY;
    m = fmaxf(m, v[i]);
  }
  m = lanes_max<W>(m);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int e = lane + W * i;
    v[i] = e < E ? expf(v[i] - m) : 0.f;
    s += v[i];
  }
  s = lanes_sum<W>(s);
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int e = lane + W * i;
    v[i] = v[i] / s;
    if (live && e < E) probs[t * E + e] = v[i];
  }
  if (live && lane == 0) lse[t] = m + logf(s);

  // Repeated selection: the largest untaken p, ties to the lower expert index. (p ≥ 0, so
  // −1 marks experts that are taken or beyond E.) Nothing here is indexed by a runtime value,
  // so it all stays in registers: the locality mask as this lane's bits, the chosen expert
  // and gate of slot s on lane s (k ≤ W), their sum in slot order.
  unsigned taken = 0;       // bit i: expert lane + W·i is taken
  unsigned local_bits = 0;  // bit i: expert lane + W·i lives on this rank
  if (loc.enabled) {
#pragma unroll
    for (int i = 0; i < EPL; ++i)  // expert lane + W·i: word i when W = 32, else word 0
      if (loc.local[W == 32 ? i : 0] >> (W == 32 ? lane : lane + W * i) & 1u) local_bits |= 1u << i;
  }
  float my_p = 0.f, chosen_sum = 0.f;
  int my_e = 0;
  for (int slot = 0; slot < k; ++slot) {
    float best = -1.f, best_l = -1.f;  // over all untaken experts, and over the local ones
    int best_e = 0x7fffffff, best_le = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      const int e = lane + W * i;
      const float p = (e < E && !(taken >> i & 1u)) ? v[i] : -1.f;
      if (p > best) {  // strict: within a lane e increases with i, so ties keep the lower
        best = p;
        best_e = e;
      }
      if (loc.enabled && e < E && (local_bits >> i & 1u) && p > best_l) {
        best_l = p;
        best_le = e;
      }
    }
    lanes_argmax<W>(best, best_e);
    if (loc.enabled) {
      lanes_argmax<W>(best_l, best_le);
      // best_e's locality bit, from the lane that holds it (the token's lanes agree on best_e)
      const unsigned owner_bits = __shfl_sync(0xffffffffu, local_bits, best_e % W, W);
      const bool best_is_local = (owner_bits >> (best_e / W) & 1u) != 0;
      if (!best_is_local && best_le < E && static_cast<double>(best_l) >= static_cast<double>(best) - loc.margin) {
        best = best_l;
        best_e = best_le;
      }
    }
    if (best_e % W == lane) taken |= 1u << (best_e / W);
    chosen_sum += best;
    if (lane == slot) {
      my_p = best;
      my_e = best_e;
    }
  }
  if (live && lane < k) {
    expert[t * k + lane] = my_e;
    gate[t * k + lane] = my_p / chosen_sum;
  }
}

// Launches kernel<W, EPL> for E's lane shape (W: 1 … 32; EPL > 1 only at W = 32).
template <template <int, int> class Launch, typename... Args>
void launch_router(int E, int64_t n, Args&&... args) {
  const RouterLanes r = router_lanes(E);
  const unsigned blocks = blocks_for(n, int64_t(kWarpsPerBlock) * (32 / r.width));
  switch (r.width * 100 + r.per_lane) {
    case 101: Launch<1, 1>::run(blocks, args...); break;
    case 201: Launch<2, 1>::run(blocks, args...); break;
    case 401: Launch<4, 1>::run(blocks, args...); break;
    case 801: Launch<8, 1>::run(blocks, args...); break;
    case 1601: Launch<16, 1>::run(blocks, args...); break;
    case 3201: Launch<32, 1>::run(blocks, args...); break;
    case 3202: Launch<32, 2>::run(blocks, args...); break;
    case 3203: case 3204: Launch<32, 4>::run(blocks, args...); break;
    default: Launch<32, kExpertsPerLane>::run(blocks, args...); break;  // E ≤ 256
  }
}

template <int W, int EPL>
struct SoftmaxTopkLaunch {
  static void run(unsigned blocks, const float* logits, int64_t n, int E, int k, float* probs, float* lse,
                  int32_t* expert, float* gate, const RouterLocality& loc, cudaStream_t stream) {
    router_softmax_topk_kernel<W, EPL><<<blocks, kThreads, 0, stream>>>(logits, n, E, k, probs, lse, expert, gate, loc);
  }
};

void check_router_shape(const char* what, int64_t n, int E, int k) {
  if (n < 0 || E < 1 || E > kMaxRouterExperts || k < 1 || k > E || k > kMaxRouterTopK)
    throw std::invalid_argument(std::string(what) + ": tokens " + std::to_string(n) + ", experts " +
                                std::to_string(E) + ", top_k " + std::to_string(k) + " (need 1 ≤ experts ≤ " +
                                std::to_string(kMaxRouterExperts) + ", 1 ≤ top_k ≤ min(experts, " +
                                std::to_string(kMaxRouterTopK) + "))");
}

// ---- pair sort: a stable counting sort by expert, in tiles of pairs ----
//
// 1. tile_counts (tiles, E): each tile's pairs per expert;
// 2. one block: per expert, the tiles' exclusive prefix (in place), load, counts (capacity
//    applied) and start_kept, the experts' exclusive prefix of counts;
// 3. each tile again, 256 pairs at a time in pair order: a pair's rank among its expert's
//    pairs = the earlier tiles' count + the earlier rounds' + the earlier warps' + the
//    earlier lanes' with the same expert (__match_any_sync). All integer counts: the same
//    result in every run, whatever the timing. Expert ids outside [0, E) are not placed.

constexpr int kSortTile = 1024;                          // pairs per block
constexpr int kMaxSortExperts = 1024;                    // shared memory: (warps + 1) counts per expert
constexpr int kSortRounds = kSortTile / kThreads;

int64_t sort_tiles(int64_t pairs) { return (pairs + kSortTile - 1) / kSortTile; }

__global__ void sort_tile_counts_kernel(const int32_t* expert, int64_t pairs, int E, int32_t* tile_counts) {
  extern __shared__ int32_t hist[];  // E
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  const int64_t begin = blockIdx.x * int64_t(kSortTile);
  for (int r = 0; r < kSortRounds; ++r) {
    const int64_t p = begin + r * kThreads + threadIdx.x;
    if (p < pairs) {
      const int32_t e = expert[p];
      if (e >= 0 && e < E) atomicAdd(&hist[e], 1);  // integer adds: the order does not matter
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) tile_counts[blockIdx.x * int64_t(E) + e] = hist[e];
}

// Inclusive prefix sum over a warp's lanes.
template <typename V>
__device__ inline V warp_inclusive_scan(V v, int lane) {
  for (int o = 1; o < 32; o <<= 1) {
    const V before = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += before;
  }
  return v;
}

// One block of kScanThreads: a warp per expert at a time scans its column of tile_counts,
// 32 tiles per step, which becomes each tile's first rank per expert (exclusive prefix over
// tiles); then warp 0 scans the kept counts into start_kept.
constexpr int kScanThreads = 1024;

__global__ void sort_expert_ranges_kernel(int32_t* tile_counts, int64_t tiles, int E, int64_t capacity,
                                          int64_t* load, int64_t* counts, int64_t* start_kept, int64_t* offsets) {
  __shared__ int64_t kept[kMaxSortExperts];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int e = warp; e < E; e += kScanThreads / 32) {
    int64_t carry = 0;
    for (int64_t t0 = 0; t0 < tiles; t0 += 32) {
      const int64_t t = t0 + lane;
      const int32_t c = t < tiles ? tile_counts[t * E + e] : 0;
      const int32_t inclusive = warp_inclusive_scan(c, lane);
      if (t < tiles) tile_counts[t * E + e] = static_cast<int32_t>(carry + inclusive - c);
      carry += __shfl_sync(0xffffffffu, inclusive, 31);
    }
    if (lane == 0) {
      load[e] = carry;
      kept[e] = capacity > 0 && carry > capacity ? capacity : carry;
      counts[e] = kept[e];
    }
  }
  __syncthreads();
  if (warp == 0) {
    int64_t carry = 0;
    for (int e0 = 0; e0 < E; e0 += 32) {
      const int e = e0 + lane;
      const int64_t c = e < E ? kept[e] : 0;
      const int64_t inclusive = warp_inclusive_scan(c, lane);
      if (e < E) start_kept[e] = carry + inclusive - c;
      if (offsets && e < E) offsets[e] = carry + inclusive - c;
      carry += __shfl_sync(0xffffffffu, inclusive, 31);
    }
    if (offsets && lane == 0) offsets[E] = carry;
  }
}

__global__ void routed_fractions_kernel(const int64_t* load, int E, double pairs, float* f) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e < E) f[e] = pairs > 0 ? static_cast<float>(static_cast<double>(load[e]) / pairs) : 0.f;
}

__global__ void sort_place_pairs_kernel(const int32_t* expert, int64_t pairs, int E, int64_t capacity,
                                        const int32_t* tile_first, const int64_t* start_kept, int32_t* order,
                                        int32_t* row_of_pair) {
  extern __shared__ int32_t shared[];
  int32_t* warp_count = shared;                  // (warps, E): this round's pairs per warp and expert
  int32_t* running = shared + kWarpsPerBlock * E;  // (E): the tile's pairs per expert in earlier rounds
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned lanes_before = (1u << lane) - 1u;
  for (int e = threadIdx.x; e < E; e += blockDim.x) running[e] = 0;
  const int64_t begin = blockIdx.x * int64_t(kSortTile);
  for (int r = 0; r < kSortRounds; ++r) {
    for (int i = threadIdx.x; i < kWarpsPerBlock * E; i += blockDim.x) warp_count[i] = 0;
    __syncthreads();
    const int64_t p = begin + r * kThreads + threadIdx.x;
    const bool valid = p < pairs;
    int32_t e = valid ? expert[p] : -1;
    if (e < 0 || e >= E) e = -1;  // not placed
    const unsigned same = __match_any_sync(0xffffffffu, e);
    if (e >= 0 && (same & lanes_before) == 0) warp_count[warp * E + e] = __popc(same);
    __syncthreads();
    if (valid) {
      int32_t pos = -1;
      if (e >= 0) {
        int64_t rank = int64_t(tile_first[blockIdx.x * int64_t(E) + e]) + running[e] + __popc(same & lanes_before);
        for (int w = 0; w < warp; ++w) rank += warp_count[w * E + e];
        if (capacity == 0 || rank < capacity) {
          pos = static_cast<int32_t>(start_kept[e] + rank);
          order[pos] = static_cast<int32_t>(p);
        }
      }
      row_of_pair[p] = pos;
    }
    __syncthreads();
    for (int x = threadIdx.x; x < E; x += blockDim.x) {
      int32_t add = 0;
      for (int w = 0; w < kWarpsPerBlock; ++w) add += warp_count[w * E + x];
      running[x] += add;
    }
    __syncthreads();
  }
}

// Workspace of moe_sort_pairs: tile counts (tiles, E) i32, then start_kept (E) i64.
struct SortWorkspace {
  int32_t* tile_counts;
  int64_t* start_kept;
  size_t total;
};

size_t round_up_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

SortWorkspace sort_workspace(void* base, int64_t pairs, int E) {
  const size_t counts_bytes = round_up_256(size_t(sort_tiles(pairs)) * size_t(E) * sizeof(int32_t));
  SortWorkspace w{};
  w.total = counts_bytes + round_up_256(size_t(E) * sizeof(int64_t));
  if (!base) return w;
  w.tile_counts = static_cast<int32_t*>(base);
  w.start_kept = reinterpret_cast<int64_t*>(static_cast<char*>(base) + counts_bytes);
  return w;
}

void check_sort_shape(int64_t pairs, int E, int64_t capacity) {
  if (pairs < 0 || pairs > int64_t(0x7fffffff) || E < 1 || E > kMaxSortExperts || capacity < 0)
    throw std::invalid_argument("moe_sort_pairs: pairs " + std::to_string(pairs) + ", experts " + std::to_string(E) +
                                ", capacity " + std::to_string(capacity) + " (need 0 ≤ pairs < 2^31, 1 ≤ experts ≤ " +
                                std::to_string(kMaxSortExperts) + ", capacity ≥ 0)");
}

// ---- rows: gather, combine, dot, scale (one warp per row, 16-byte vectors when aligned) ----

template <typename T, int V>
__global__ void gather_rows_kernel(const T* src, const int32_t* order, int k, int64_t m, int64_t d, T* out,
                                   const float* s, T* scaled) {
  const int64_t i = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  if (i >= m) return;
  const int lane = threadIdx.x % 32;
  const T* from = src + int64_t(order[i] / k) * d;
  T* to = out + i * d;
  if (scaled) {  // scale_rows' arithmetic on the copied row
    const float si = s[i];
    T* to_scaled = scaled + i * d;
    for (int64_t j = int64_t(lane) * V; j < d; j += 32 * V) {
      float v[V];
      if constexpr (V == 1) {
        to[j] = from[j];
        v[0] = to_float(from[j]);
      } else {
        const uint4 raw = *reinterpret_cast<const uint4*>(from + j);
        *reinterpret_cast<uint4*>(to + j) = raw;
        const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int u = 0; u < V; ++u) v[u] = to_float(e[u]);
      }
#pragma unroll
      for (int u = 0; u < V; ++u) v[u] *= si;
      store_vec<T, V>(to_scaled + j, v);
    }
    return;
  }
  for (int64_t j = int64_t(lane) * V; j < d; j += 32 * V) {
    if constexpr (V == 1) {
      to[j] = from[j];
    } else {
      *reinterpret_cast<uint4*>(to + j) = *reinterpret_cast<const uint4*>(from + j);
    }
  }
}

template <typename T, int V>
__global__ void combine_pairs_kernel(const T* rows, const int32_t* row_of_pair, const float* gate, int64_t n, int k,
                                     int64_t d, T* out, const T* add) {
  const int64_t t = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  if (t >= n) return;
  const int lane = threadIdx.x % 32;
  for (int64_t j = int64_t(lane) * V; j < d; j += 32 * V) {
    float acc[V];
#pragma unroll
    for (int u = 0; u < V; ++u) acc[u] = 0.f;
    for (int s = 0; s < k; ++s) {
      const int32_t r = row_of_pair[t * k + s];
      if (r < 0) continue;
      const float g = gate ? gate[t * k + s] : 1.f;
      float x[V];
      load_vec<T, V>(rows + int64_t(r) * d + j, x);
#pragma unroll
      for (int u = 0; u < V; ++u) acc[u] = fmaf(g, x[u], acc[u]);
    }
    if (add) {
      float a[V];
      load_vec<T, V>(add + t * d + j, a);
#pragma unroll
      for (int u = 0; u < V; ++u) acc[u] = __fadd_rn(acc[u], a[u]);  // not contracted into the last fma
    }
    store_vec<T, V>(out + t * d + j, acc);
  }
}

template <typename T, int V>
__global__ void row_dot_kernel(const T* a, const T* b, int64_t m, int64_t f, float* out) {
  const int64_t i = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  if (i >= m) return;
  const int lane = threadIdx.x % 32;
  float acc = 0.f;
  for (int64_t j = int64_t(lane) * V; j < f; j += 32 * V) {
    float x[V], y[V];
    load_vec<T, V>(a + i * f + j, x);
    load_vec<T, V>(b + i * f + j, y);
#pragma unroll
    for (int u = 0; u < V; ++u) acc = fmaf(x[u], y[u], acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) out[i] = acc;
}

template <typename T, int V>
__global__ void scale_rows_kernel(const T* x, const float* s, int64_t m, int64_t d, T* out) {
  const int64_t i = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  if (i >= m) return;
  const int lane = threadIdx.x % 32;
  const float si = s[i];
  for (int64_t j = int64_t(lane) * V; j < d; j += 32 * V) {
    float v[V];
    load_vec<T, V>(x + i * d + j, v);
#pragma unroll
    for (int u = 0; u < V; ++u) v[u] *= si;
    store_vec<T, V>(out + i * d + j, v);
  }
}

__global__ void pair_values_to_rows_kernel(const float* per_pair, const int32_t* order, int64_t m, float* per_row) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < m) per_row[i] = per_pair[order[i]];
}

__global__ void rows_to_pair_values_kernel(const float* per_row, const int32_t* order, int64_t m, float* per_pair) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < m && order[i] >= 0) per_pair[order[i]] = per_row[i];
}

// ---- router losses: column sums of p per chunk of rows, then one block in a fixed order ----

constexpr int kLossChunkRows = kThreads;
static_assert(kMaxRouterExperts <= kThreads, "router_loss_partials_kernel: a thread per expert at least");

// partial (chunks, E + 1) doubles: column sums of p over the chunk's rows, then Σ lse².
// Thread t sums column t % E over every G-th row from group g = t / E (G = kThreads / E
// groups, so the block's loads are coalesced and every thread has a few rows), then the
// groups' sums are added in group order: a fixed order, whatever the timing.
__global__ void router_loss_partials_kernel(const float* probs, const float* lse, int64_t n, int E, double* partial) {
  const int64_t r0 = blockIdx.x * int64_t(kLossChunkRows);
  const int64_t r1 = r0 + kLossChunkRows < n ? r0 + kLossChunkRows : n;
  double* out = partial + blockIdx.x * int64_t(E + 1);
  __shared__ double group_sum[kThreads];
  const int groups = kThreads / E, e = threadIdx.x % E, g = threadIdx.x / E;
  double s = 0.0;
  if (g < groups)
    for (int64_t r = r0 + g; r < r1; r += groups) s += probs[r * E + e];
  group_sum[threadIdx.x] = s;
  // Σ lse² over the chunk: one row per thread, then a fixed tree over the block.
  __shared__ double tree[kThreads];
  const int64_t r = r0 + threadIdx.x;
  const double l = r < r1 ? double(lse[r]) : 0.0;
  tree[threadIdx.x] = l * l;
  __syncthreads();
  for (int c = threadIdx.x; c < E; c += blockDim.x) {
    double column = 0.0;
    for (int q = 0; q < groups; ++q) column += group_sum[q * E + c];
    out[c] = column;
  }
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) tree[threadIdx.x] += tree[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[E] = tree[0];
}

// The chunks' partials summed per column (E + 1 of them) the same way: thread t takes column
// t % (E + 1) of every G-th chunk from group t / (E + 1), then the groups in order (with more
// columns than threads, one thread per column over every chunk).
__global__ void router_loss_finish_kernel(const double* partial, int64_t chunks, const float* f, const uint8_t* remote,
                                          int E, int64_t n, double* out) {
  __shared__ double group_sum[kThreads];
  __shared__ double column[kMaxRouterExperts + 1];  // Σ_t p_te, then Σ_t lse²
  const int width = E + 1;
  if (width <= kThreads) {
    const int groups = kThreads / width, c = threadIdx.x % width, g = threadIdx.x / width;
    double s = 0.0;
    if (g < groups)
      for (int64_t q = g; q < chunks; q += groups) s += partial[q * width + c];
    group_sum[threadIdx.x] = s;
    __syncthreads();
    for (int e = threadIdx.x; e < width; e += blockDim.x) {
      double total = 0.0;
      for (int q = 0; q < groups; ++q) total += group_sum[q * width + e];
      column[e] = total;
    }
  } else {
    for (int e = threadIdx.x; e < width; e += blockDim.x) {
      double total = 0.0;
      for (int64_t q = 0; q < chunks; ++q) total += partial[q * width + e];
      column[e] = total;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double aux = 0.0, far = 0.0;
    for (int e = 0; e < E; ++e) {
      aux += double(f[e]) * column[e];
      if (remote && remote[e]) far += column[e];
    }
    out[0] = n > 0 ? aux / static_cast<double>(n) : 0.0;
    out[1] = column[E];
    out[2] = far;
  }
}

int64_t loss_chunks(int64_t n) { return (n + kLossChunkRows - 1) / kLossChunkRows; }

// ---- router backward, W lanes per token (as the forward) ----

template <int W, int EPL>
__global__ void router_backward_kernel(const float* probs, const float* lse, const int32_t* choice, const float* dgate,
                                       const float* f, const uint8_t* remote, int64_t n, int E, int k, float aux_w,
                                       float z_w, float loc_w, float* dlogits) {
  constexpr int kTokensPerWarp = 32 / W;
  const int64_t warp_t0 = (blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32) * kTokensPerWarp;
  if (warp_t0 >= n) return;  // the whole warp
  const int lane = threadIdx.x % W;
  const int64_t t = warp_t0 + (threadIdx.x % 32) / W;
  const bool live = t < n;
  const float* p = probs + t * E;
  float pv[EPL], dp[EPL];
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int e = lane + W * i;
    const bool here = live && e < E;
    pv[i] = here ? p[e] : 0.f;
    dp[i] = here ? __fmul_rn(aux_w, f[e]) : 0.f;                      // aux: aux_coef·E·f_e/n
    if (here && remote && remote[e]) dp[i] = __fadd_rn(dp[i], loc_w);  // locality: experts elsewhere
  }
  // gates g_q = p_{c_q}/S: dp_{c_q} += (dg_q − Σ_r dg_r·g_r)/S. Lane q < k (k ≤ W) loads slot
  // q's expert, gate gradient and probability (one round of loads, not k), which the sums
  // then take from it in slot order.
  int my_c = 0;
  float my_dg = 0.f, my_p = 0.f;
  if (live && lane < k) {
    my_c = choice[t * k + lane];
    my_dg = dgate[t * k + lane];
    my_p = p[my_c];
  }
  // Every rounding is named (no products left for the compiler to fuse or not), so the bits
  // do not depend on how the code around them compiles.
  float s = 0.f, dot = 0.f;
  for (int q = 0; q < k; ++q) s = __fadd_rn(s, __shfl_sync(0xffffffffu, my_p, q, W));
  for (int q = 0; q < k; ++q) {
    const float dg_p = __fmul_rn(__shfl_sync(0xffffffffu, my_dg, q, W), __shfl_sync(0xffffffffu, my_p, q, W));
    dot = __fadd_rn(dot, __fdiv_rn(dg_p, s));
  }
  for (int q = 0; q < k; ++q) {
    const int c = __shfl_sync(0xffffffffu, my_c, q, W);
    const float add = __fdiv_rn(__fsub_rn(__shfl_sync(0xffffffffu, my_dg, q, W), dot), s);
#pragma unroll
    for (int i = 0; i < EPL; ++i)
      if (lane + W * i == c) dp[i] = __fadd_rn(dp[i], add);
  }
  // softmax: dl_e = p_e·(dp_e − Σ p·dp); z: + z_w·lse·p_e
  float pdp = 0.f;
#pragma unroll
  for (int i = 0; i < EPL; ++i) pdp = __fmaf_rn(pv[i], dp[i], pdp);
  pdp = lanes_sum<W>(pdp);
  if (!live) return;
  const float zl = __fmul_rn(z_w, lse[t]);
  float* dl = dlogits + t * E;
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int e = lane + W * i;
    if (e < E) dl[e] = __fmaf_rn(pv[i], __fsub_rn(dp[i], pdp), __fmul_rn(zl, pv[i]));
  }
}

template <int W, int EPL>
struct RouterBackwardLaunch {
  static void run(unsigned blocks, const float* probs, const float* lse, const int32_t* choice, const float* dgate,
                  const float* f, const uint8_t* remote, int64_t n, int E, int k, float aux_w, float z_w, float loc_w,
                  float* dlogits, cudaStream_t stream) {
    router_backward_kernel<W, EPL><<<blocks, kThreads, 0, stream>>>(probs, lse, choice, dgate, f, remote, n, E, k,
                                                                    aux_w, z_w, loc_w, dlogits);
  }
};

template <typename T>
constexpr int kVec = 16 / sizeof(T);

}  // namespace

void router_softmax_topk(const float* logits, int64_t n, int E, int k, float* probs, float* lse, int32_t* expert,
                         float* gate, cudaStream_t stream, const RouterLocality& locality) {
  check_router_shape("router_softmax_topk", n, E, k);
  if (n == 0) return;
  launch_router<SoftmaxTopkLaunch>(E, n, logits, n, E, k, probs, lse, expert, gate, locality, stream);
  MOK_CUDA_CHECK_LAUNCH();
}

size_t moe_sort_pairs_workspace_bytes(int64_t pairs, int E) {
  check_sort_shape(pairs, E, 0);
  return sort_workspace(nullptr, pairs, E).total;
}

void moe_sort_pairs(const int32_t* expert, int64_t pairs, int E, int64_t capacity, int32_t* order,
                    int32_t* row_of_pair, int64_t* load, int64_t* counts, void* ws, size_t ws_bytes,
                    cudaStream_t stream, int64_t* offsets) {
  check_sort_shape(pairs, E, capacity);
  if (!ws) throw std::invalid_argument("moe_sort_pairs: no workspace");
  SortWorkspace w = sort_workspace(ws, pairs, E);
  if (ws_bytes < w.total)
    throw std::invalid_argument("moe_sort_pairs: workspace of " + std::to_string(ws_bytes) + " bytes, needs " +
                                std::to_string(w.total) + " (moe_sort_pairs_workspace_bytes)");
  const int64_t tiles = sort_tiles(pairs);
  if (pairs > 0) {
    sort_tile_counts_kernel<<<static_cast<unsigned>(tiles), kThreads, size_t(E) * sizeof(int32_t), stream>>>(
        expert, pairs, E, w.tile_counts);
    MOK_CUDA_CHECK_LAUNCH();
  }
  sort_expert_ranges_kernel<<<1, kScanThreads, 0, stream>>>(w.tile_counts, tiles, E, capacity, load, counts,
                                                            w.start_kept, offsets);
  MOK_CUDA_CHECK_LAUNCH();
  if (pairs > 0) {
    sort_place_pairs_kernel<<<static_cast<unsigned>(tiles), kThreads,
                              size_t(kWarpsPerBlock + 1) * size_t(E) * sizeof(int32_t), stream>>>(
        expert, pairs, E, capacity, w.tile_counts, w.start_kept, order, row_of_pair);
    MOK_CUDA_CHECK_LAUNCH();
  }
}

void routed_fractions(const int64_t* load, int E, double pairs, float* f, cudaStream_t stream) {
  if (E <= 0) return;
  routed_fractions_kernel<<<(E + kThreads - 1) / kThreads, kThreads, 0, stream>>>(load, E, pairs, f);
  MOK_CUDA_CHECK_LAUNCH();
}

template <typename T>
void gather_rows(const T* src, const int32_t* order, int k, int64_t m, int64_t d, T* out, cudaStream_t stream,
                 const float* s, T* scaled) {
  if (m <= 0 || d <= 0) return;
  if (k < 1) throw std::invalid_argument("gather_rows: top_k must be ≥ 1");
  if (scaled && !s) throw std::invalid_argument("gather_rows: scaled rows without their scales");
  if (rows_vectorizable<T>(d, {src, out, scaled}))
    gather_rows_kernel<T, kVec<T>><<<warp_blocks(m), kThreads, 0, stream>>>(src, order, k, m, d, out, s, scaled);
  else
    gather_rows_kernel<T, 1><<<warp_blocks(m), kThreads, 0, stream>>>(src, order, k, m, d, out, s, scaled);
  MOK_CUDA_CHECK_LAUNCH();
}

template <typename T>
void combine_pairs(const T* rows, const int32_t* row_of_pair, const float* gate, int64_t n, int k, int64_t d, T* out,
                   cudaStream_t stream, const T* add) {
  if (n <= 0 || d <= 0) return;
  if (k < 1) throw std::invalid_argument("combine_pairs: top_k must be ≥ 1");
  if (rows_vectorizable<T>(d, {rows, out}) && (!add || rows_vectorizable<T>(d, {add})))
    combine_pairs_kernel<T, kVec<T>><<<warp_blocks(n), kThreads, 0, stream>>>(rows, row_of_pair, gate, n, k, d, out,
                                                                             add);
  else
    combine_pairs_kernel<T, 1><<<warp_blocks(n), kThreads, 0, stream>>>(rows, row_of_pair, gate, n, k, d, out, add);
  MOK_CUDA_CHECK_LAUNCH();
}

void pair_values_to_rows(const float* per_pair, const int32_t* order, int64_t m, float* per_row, cudaStream_t stream) {
  if (m <= 0) return;
  pair_values_to_rows_kernel<<<blocks_for(m, kThreads), kThreads, 0, stream>>>(per_pair, order, m, per_row);
  MOK_CUDA_CHECK_LAUNCH();
}

void rows_to_pair_values(const float* per_row, const int32_t* order, int64_t m, int64_t pairs, float* per_pair,
                         cudaStream_t stream) {
  if (pairs <= 0) return;
  MOK_CUDA_CHECK(cudaMemsetAsync(per_pair, 0, size_t(pairs) * sizeof(float), stream));  // 0 bits = 0.0f
  if (m <= 0) return;
  rows_to_pair_values_kernel<<<blocks_for(m, kThreads), kThreads, 0, stream>>>(per_row, order, m, per_pair);
  MOK_CUDA_CHECK_LAUNCH();
}

template <typename T>
void row_dot(const T* a, const T* b, int64_t m, int64_t f, float* out, cudaStream_t stream) {
  if (m <= 0) return;
  if (rows_vectorizable<T>(f, {a, b}))
    row_dot_kernel<T, kVec<T>><<<warp_blocks(m), kThreads, 0, stream>>>(a, b, m, f, out);
  else
    row_dot_kernel<T, 1><<<warp_blocks(m), kThreads, 0, stream>>>(a, b, m, f, out);
  MOK_CUDA_CHECK_LAUNCH();
}

template <typename T>
void scale_rows(const T* x, const float* s, int64_t m, int64_t d, T* out, cudaStream_t stream) {
  if (m <= 0 || d <= 0) return;
  if (rows_vectorizable<T>(d, {x, out}))
    scale_rows_kernel<T, kVec<T>><<<warp_blocks(m), kThreads, 0, stream>>>(x, s, m, d, out);
  else
    scale_rows_kernel<T, 1><<<warp_blocks(m), kThreads, 0, stream>>>(x, s, m, d, out);
  MOK_CUDA_CHECK_LAUNCH();
}

size_t router_losses_workspace_bytes(int64_t n, int E) {
  return size_t(loss_chunks(n)) * size_t(E + 1) * sizeof(double);
}

void router_losses(const float* probs, const float* lse, const float* f, const uint8_t* remote, int64_t n, int E,
                   double* out, void* ws, size_t ws_bytes, cudaStream_t stream) {
  if (n < 0 || E < 1 || E > kMaxRouterExperts)
    throw std::invalid_argument("router_losses: tokens " + std::to_string(n) + ", experts " + std::to_string(E) +
                                " (need 1 ≤ experts ≤ " + std::to_string(kMaxRouterExperts) + ")");
  if (ws_bytes < router_losses_workspace_bytes(n, E))
    throw std::invalid_argument("router_losses: workspace of " + std::to_string(ws_bytes) + " bytes, needs " +
                                std::to_string(router_losses_workspace_bytes(n, E)));
  const int64_t chunks = loss_chunks(n);
  auto* partial = static_cast<double*>(ws);
  if (chunks > 0) {
    router_loss_partials_kernel<<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(probs, lse, n, E, partial);
    MOK_CUDA_CHECK_LAUNCH();
  }
  router_loss_finish_kernel<<<1, kThreads, 0, stream>>>(partial, chunks, f, remote, E, n, out);
  MOK_CUDA_CHECK_LAUNCH();
}

void router_backward(const float* probs, const float* lse, const int32_t* choice, const float* dgate, const float* f,
                     const uint8_t* remote, int64_t n, int E, int k, float aux_w, float z_w, float loc_w,
                     float* dlogits, cudaStream_t stream) {
  check_router_shape("router_backward", n, E, k);
  if (n == 0) return;
  launch_router<RouterBackwardLaunch>(E, n, probs, lse, choice, dgate, f, remote, n, E, k, aux_w, z_w, loc_w, dlogits,
                                      stream);
  MOK_CUDA_CHECK_LAUNCH();
}

#define MOK_MOE_ROUTING_ROWS(T)                                                                                   \
  template void gather_rows<T>(const T*, const int32_t*, int, int64_t, int64_t, T*, cudaStream_t, const float*, \
                               T*);                                                                            \
  template void combine_pairs<T>(const T*, const int32_t*, const float*, int64_t, int, int64_t, T*, cudaStream_t, \
                                 const T*);                                                                      \
  template void row_dot<T>(const T*, const T*, int64_t, int64_t, float*, cudaStream_t);                          \
  template void scale_rows<T>(const T*, const float*, int64_t, int64_t, T*, cudaStream_t);
MOK_MOE_ROUTING_ROWS(float)
MOK_MOE_ROUTING_ROWS(bf16)
#undef MOK_MOE_ROUTING_ROWS

}  // namespace mok::cuda
