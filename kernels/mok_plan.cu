#include "kernels/mok_plan.h"

#include <cub/device/device_scan.cuh>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "core/parallel/expert_chunk.h"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;

// counts (E·k): a block's histogram in shared memory when it fits (cells ≤ kSharedCells), added
// to the global one once per nonzero cell; else straight to global memory. Integers: exact in
// any order. (One global atomic per slot put ~128 Ki atomics on a few hundred cells per layer.)
constexpr int kSharedCells = 8192;
__global__ void slot_share_counts_kernel(const int32_t* expert, const int32_t* owner, int64_t n, int k, int cells,
                                         int32_t* counts) {
  extern __shared__ int32_t share_hist[];
  int32_t* hist = share_hist;
  const bool shared = cells <= kSharedCells;
  if (shared) {
    for (int i = threadIdx.x; i < cells; i += blockDim.x) hist[i] = 0;
    __syncthreads();
  }
  const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t < n) {
    const int32_t* e = expert + t * k;
    for (int s = 0; s < k; ++s) {
      if (e[s] < 0) continue;
      const int32_t q = owner[e[s]];
      int m = 0;
      for (int j = 0; j < k; ++j) m += e[j] >= 0 && owner[e[j]] == q;
      atomicAdd((shared ? hist : counts) + int64_t(e[s]) * k + m - 1, 1);
    }
  }
  if (!shared) return;
  __syncthreads();
  for (int i = threadIdx.x; i < cells; i += blockDim.x)
    if (hist[i]) atomicAdd(counts + i, hist[i]);
}

__device__ inline bool ships_to(const int32_t* ex, int k, const int32_t* dest, int q) {
  for (int s = 0; s < k; ++s)
    if (ex[s] >= 0 && dest[ex[s]] == q) return true;
  return false;
}

// flag[q·n + t] = 1 when token t ships to rank q.
__global__ void ship_flags_kernel(const int32_t* expert, const int32_t* dest, int64_t n, int k, int R,
                                  int32_t* flag) {
  const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t >= n) return;
  for (int q = 0; q < R; ++q) flag[q * n + t] = ships_to(expert + t * k, k, dest, q) ? 1 : 0;
}

// rows[q] from the exclusive scan `place` of the flags: the places where q's block starts and ends.
__global__ void ship_counts_kernel(const int32_t* flag, const int32_t* place, int64_t n, int R, int64_t* rows) {
  const int q = threadIdx.x;
  if (q >= R) return;
  const int64_t end = q + 1 < R ? int64_t(place[(q + 1) * n]) : int64_t(place[R * n - 1]) + flag[R * n - 1];
  rows[q] = end - place[q * n];
}

// One thread per (q, token) that ships: the row at place[q·n + t]. Without flags (every_row)
// every (q, token) has its row at q·n + t, one without entries there all pads (head_pair −1).
__global__ void ship_fill_kernel(const int32_t* expert, const float* gate, const int32_t* dest,
                                 const int32_t* local_index, int64_t n, int k, const int32_t* flag,
                                 const int32_t* place, int32_t* token, int32_t* head_pair, int32_t* entry,
                                 float* entry_gate, int32_t* pair, int64_t total) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= total || (flag && !flag[i])) return;
  const int q = static_cast<int>(i / n);
  const int64_t t = i - int64_t(q) * n, row = flag ? int64_t(place[i]) : i;
  const int32_t* ex = expert + t * k;
  token[row] = static_cast<int32_t>(t);
  head_pair[row] = -1;
  int j = 0;
  for (int s = 0; s < k; ++s) {
    if (ex[s] < 0 || dest[ex[s]] != q) continue;
    const int64_t p = t * k + s;
    if (j == 0) head_pair[row] = static_cast<int32_t>(p);
    entry[row * k + j] = local_index[ex[s]];
    entry_gate[row * k + j] = gate[p];
    pair[row * k + j] = static_cast<int32_t>(p);
    ++j;
  }
  for (; j < k; ++j) {
    entry[row * k + j] = -1;
    entry_gate[row * k + j] = 0.0f;
    pair[row * k + j] = -1;
  }
}

// The chunks of the lowest and highest of (q, t)'s entries on q, or false when it has none.
__device__ inline bool row_chunks(const int32_t* ex, int k, const int32_t* dest, const int32_t* local_index, int q,
                                  int L, int C, int* lo, int* hi) {
  int a = INT32_MAX, b = -1;
  for (int s = 0; s < k; ++s) {
    if (ex[s] < 0 || dest[ex[s]] != q) continue;
    a = min(a, local_index[ex[s]]);
    b = max(b, local_index[ex[s]]);
  }
  if (b < 0) return false;
  *lo = expert_chunk(a, L, C);
  *hi = expert_chunk(b, L, C);
  return true;
}

// counts (2·C·R) i64: rows by (lowest entry's chunk, q) at c·R + q, then by the highest's.
// A block's histogram in shared memory, added to the global one once per cell (integers:
// exact in any order).
__global__ void ship_chunk_counts_kernel(const int32_t* expert, const int32_t* dest, const int32_t* local_index,
                                         const int32_t* locals, int64_t n, int k, int R, int C,
                                         unsigned long long* counts) {
  extern __shared__ unsigned int chunk_hist[];
  unsigned int* hist = chunk_hist;
  const int cells = 2 * C * R;
  for (int i = threadIdx.x; i < cells; i += blockDim.x) hist[i] = 0;
  __syncthreads();
  const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t < n) {
    for (int q = 0; q < R; ++q) {
      int lo, hi;
      if (!row_chunks(expert + t * k, k, dest, local_index, q, locals[q], C, &lo, &hi)) continue;
      atomicAdd(hist + lo * R + q, 1u);
      atomicAdd(hist + C * R + hi * R + q, 1u);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < cells; i += blockDim.x)
    if (hist[i]) atomicAdd(counts + i, static_cast<unsigned long long>(hist[i]));
}

// One thread a row: its rank from the offsets (R + 1), then its keys.
__global__ void row_chunk_keys_kernel(const int32_t* entry, int64_t rows, int k, const int64_t* offsets,
                                      const int32_t* locals, int R, int C, int32_t* key_lo, int32_t* key_hi) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= rows) return;
  int q = 0;
  while (q + 1 < R && offsets[q + 1] <= i) ++q;
  int a = INT32_MAX, b = -1;
  for (int j = 0; j < k; ++j) {
    const int32_t l = entry[i * k + j];
    if (l < 0) continue;
    a = min(a, l);
    b = max(b, l);
  }
  if (b < 0) a = b = 0;  // no entries: not a row the plan makes (the host reference refuses it)
  key_lo[i] = expert_chunk(a, locals[q], C) * R + q;
  key_hi[i] = expert_chunk(b, locals[q], C) * R + q;
}

__global__ void replace_negative_kernel(int32_t* v, int64_t m, int32_t pad) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < m && v[i] < 0) v[i] = pad;
}

__global__ void unroute_group_kernel(const int32_t* entry, int64_t m, int32_t group, int32_t* row_of_pair) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < m && entry[i] == group) row_of_pair[i] = -1;
}

// Workspace: flags (R·n i32), places (R·n i32), then cub's scan storage; 256-byte aligned parts.
struct ShipWorkspace {
  int32_t* flag;
  int32_t* place;
  void* scan;
  size_t scan_bytes, total;
};
size_t align256(size_t b) { return (b + 255) / 256 * 256; }
ShipWorkspace ship_workspace(void* base, int64_t n, int R) {
  const int64_t m = n * R;
  size_t scan_bytes = 0;
  MOK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const int32_t*>(nullptr),
                                               static_cast<int32_t*>(nullptr), static_cast<int>(m)));
  auto* b = static_cast<uint8_t*>(base);
  const size_t part = align256(size_t(m) * sizeof(int32_t));
  return {reinterpret_cast<int32_t*>(b), reinterpret_cast<int32_t*>(b ? b + part : nullptr), b ? b + 2 * part : nullptr,
          scan_bytes, 2 * part + align256(scan_bytes)};
}

__global__ void shadow_decisions_kernel(const int32_t* counts, const int32_t* owner, int E, int k, int self,
                                        const ShadowRule rule, double* rows, int32_t* dest) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  double u = 0.0;
  if (owner[e] != self)
    for (int m = 1; m <= k; ++m) u = __dadd_rn(u, __ddiv_rn(static_cast<double>(counts[int64_t(e) * k + m - 1]), m));
  rows[e] = u;
  dest[e] = owner[e] != self && shadow_wins(rule, u) ? -1 : owner[e];
}

__global__ void scatter_positions_kernel(const int32_t* index, int64_t m, int32_t base, int32_t* out) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < m && index[i] >= 0) out[index[i]] = base + static_cast<int32_t>(i);
}

}  // namespace

void slot_share_counts(const int32_t* expert, const int32_t* owner, int64_t n, int k, int E, int32_t* counts,
                       cudaStream_t stream) {
  MOK_CUDA_CHECK(cudaMemsetAsync(counts, 0, size_t(E) * k * sizeof(int32_t), stream));
  if (n <= 0) return;
  const int cells = E * k;
  const size_t shared = cells <= kSharedCells ? size_t(cells) * sizeof(int32_t) : 0;
  slot_share_counts_kernel<<<blocks_for(n, kThreads), kThreads, shared, stream>>>(expert, owner, n, k, cells, counts);
  MOK_CUDA_CHECK_LAUNCH();
}

void shadow_decisions(const int32_t* counts, const int32_t* owner, int E, int k, int self, const ShadowRule& rule,
                      double* rows, int32_t* dest, cudaStream_t stream) {
  if (E <= 0) return;
  shadow_decisions_kernel<<<blocks_for(E, kThreads), kThreads, 0, stream>>>(counts, owner, E, k, self, rule, rows, dest);
  MOK_CUDA_CHECK_LAUNCH();
}

size_t ship_rows_workspace_bytes(int64_t n, int R) { return ship_workspace(nullptr, n, R).total; }

void ship_rows_count(const int32_t* expert, const int32_t* dest, int64_t n, int k, int R, void* ws, size_t ws_bytes,
                     int64_t* rows, cudaStream_t stream) {
  if (R < 1) throw std::invalid_argument("ship_rows_count: " + std::to_string(R) + " ranks");
  if (n * R > int64_t(INT32_MAX)) throw std::invalid_argument("ship_rows_count: more than 2^31 (token, rank) places");
  if (n <= 0) {
    MOK_CUDA_CHECK(cudaMemsetAsync(rows, 0, size_t(R) * sizeof(int64_t), stream));
    return;
  }
  ShipWorkspace w = ship_workspace(ws, n, R);
  if (ws_bytes < w.total) throw std::invalid_argument("ship_rows_count: workspace too small");
  ship_flags_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(expert, dest, n, k, R, w.flag);
  MOK_CUDA_CHECK_LAUNCH();
  MOK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(w.scan, w.scan_bytes, w.flag, w.place, static_cast<int>(n * R), stream));
  ship_counts_kernel<<<1, 32 * ((R + 31) / 32), 0, stream>>>(w.flag, w.place, n, R, rows);
  MOK_CUDA_CHECK_LAUNCH();
}

void ship_chunk_counts(const int32_t* expert, const int32_t* dest, const int32_t* local_index, const int32_t* locals,
                       int64_t n, int k, int R, int C, int64_t* counts, cudaStream_t stream) {
  const int cells = 2 * C * R;
  if (C < 1 || cells > kMaxShipChunkCells)
    throw std::invalid_argument("ship_chunk_counts: " + std::to_string(C) + " chunks of " + std::to_string(R) +
                                " ranks (at most " + std::to_string(kMaxShipChunkCells / 2) + " cells)");
  MOK_CUDA_CHECK(cudaMemsetAsync(counts, 0, size_t(cells) * sizeof(int64_t), stream));
  if (n <= 0) return;
  static_assert(sizeof(unsigned long long) == sizeof(int64_t), "counts added as unsigned long long");
  ship_chunk_counts_kernel<<<blocks_for(n, kThreads), kThreads, size_t(cells) * sizeof(unsigned int), stream>>>(
      expert, dest, local_index, locals, n, k, R, C, reinterpret_cast<unsigned long long*>(counts));
  MOK_CUDA_CHECK_LAUNCH();
}

void row_chunk_keys(const int32_t* entry, int64_t rows, int k, const int64_t* offsets, const int32_t* locals, int R,
                    int C, int32_t* key_lo, int32_t* key_hi, cudaStream_t stream) {
  if (rows <= 0) return;
  row_chunk_keys_kernel<<<blocks_for(rows, kThreads), kThreads, 0, stream>>>(entry, rows, k, offsets, locals, R, C,
                                                                             key_lo, key_hi);
  MOK_CUDA_CHECK_LAUNCH();
}

void ship_rows_fill(const int32_t* expert, const float* gate, const int32_t* dest, const int32_t* local_index,
                    int64_t n, int k, int R, const void* ws, int32_t* token, int32_t* head_pair, int32_t* entry,
                    float* entry_gate, int32_t* pair, cudaStream_t stream) {
  if (n <= 0) return;
  const ShipWorkspace w = ship_workspace(const_cast<void*>(ws), n, R);
  ship_fill_kernel<<<blocks_for(n * R, kThreads), kThreads, 0, stream>>>(expert, gate, dest, local_index, n, k, w.flag,
                                                                          w.place, token, head_pair, entry, entry_gate,
                                                                          pair, n * R);
  MOK_CUDA_CHECK_LAUNCH();
}

void ship_rows_fill_every(const int32_t* expert, const float* gate, const int32_t* dest, const int32_t* local_index,
                          int64_t n, int k, int R, int32_t* token, int32_t* head_pair, int32_t* entry,
                          float* entry_gate, int32_t* pair, cudaStream_t stream) {
  if (R < 1) throw std::invalid_argument("ship_rows_fill_every: " + std::to_string(R) + " ranks");
  if (n * R > int64_t(INT32_MAX)) throw std::invalid_argument("ship_rows_fill_every: more than 2^31 rows");
  if (n <= 0) return;
  ship_fill_kernel<<<blocks_for(n * R, kThreads), kThreads, 0, stream>>>(expert, gate, dest, local_index, n, k, nullptr,
                                                                          nullptr, token, head_pair, entry, entry_gate,
                                                                          pair, n * R);
  MOK_CUDA_CHECK_LAUNCH();
}

void replace_negative(int32_t* values, int64_t m, int32_t pad, cudaStream_t stream) {
  if (m <= 0) return;
  replace_negative_kernel<<<blocks_for(m, kThreads), kThreads, 0, stream>>>(values, m, pad);
  MOK_CUDA_CHECK_LAUNCH();
}

void unroute_group(const int32_t* entry, int64_t m, int32_t group, int32_t* row_of_pair, cudaStream_t stream) {
  if (m <= 0) return;
  unroute_group_kernel<<<blocks_for(m, kThreads), kThreads, 0, stream>>>(entry, m, group, row_of_pair);
  MOK_CUDA_CHECK_LAUNCH();
}

void scatter_positions(const int32_t* index, int64_t m, int32_t base, int32_t* out, cudaStream_t stream) {
  if (m <= 0) return;
  scatter_positions_kernel<<<blocks_for(m, kThreads), kThreads, 0, stream>>>(index, m, base, out);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
