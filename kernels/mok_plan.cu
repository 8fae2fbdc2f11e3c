#include "kernels/mok_plan.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;  // ship_rows: one block scans all tokens

__global__ void slot_share_counts_kernel(const int32_t* expert, const int32_t* owner, int64_t n, int k,
                                         int32_t* counts) {
  const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t >= n) return;
  const int32_t* e = expert + t * k;
  for (int s = 0; s < k; ++s) {
    if (e[s] < 0) continue;
    const int32_t q = owner[e[s]];
    int m = 0;
    for (int j = 0; j < k; ++j) m += e[j] >= 0 && owner[e[j]] == q;
    atomicAdd(counts + int64_t(e[s]) * k + m - 1, 1);  // integers: exact in any order
  }
}

__device__ inline bool ships_to(const int32_t* ex, int k, const int32_t* dest, int q) {
  for (int s = 0; s < k; ++s)
    if (ex[s] >= 0 && dest[ex[s]] == q) return true;
  return false;
}

// One block. Thread i takes a contiguous run of tokens; per destination, an exclusive scan
// of the runs' row counts places each run's rows after the earlier runs' (token order).
__global__ void ship_rows_kernel(bool fill, const int32_t* expert, const float* gate, const int32_t* dest,
                                 const int32_t* local_index, int64_t n, int k, int R, const int64_t* row_base,
                                 int64_t* rows, int32_t* token, int32_t* head_pair, int32_t* entry,
                                 float* entry_gate, int32_t* pair) {
  __shared__ long long scan[kScanThreads];
  const int tid = threadIdx.x;
  const int64_t per = (n + kScanThreads - 1) / kScanThreads;
  const int64_t t0 = min(n, tid * per), t1 = min(n, t0 + per);
  for (int q = 0; q < R; ++q) {
    long long c = 0;
    for (int64_t t = t0; t < t1; ++t) c += ships_to(expert + t * k, k, dest, q);
    scan[tid] = c;
    __syncthreads();
    for (int off = 1; off < kScanThreads; off <<= 1) {  // inclusive scan, Hillis–Steele
      const long long v = tid >= off ? scan[tid - off] : 0;
      __syncthreads();
      scan[tid] += v;
      __syncthreads();
    }
    if (!fill) {
      if (tid == kScanThreads - 1) rows[q] = scan[tid];
    } else {
      int64_t row = row_base[q] + (scan[tid] - c);
      for (int64_t t = t0; t < t1; ++t) {
        const int32_t* ex = expert + t * k;
        int j = 0;
        for (int s = 0; s < k; ++s) {
          if (ex[s] < 0 || dest[ex[s]] != q) continue;
          const int64_t p = t * k + s;
          if (j == 0) {
            token[row] = static_cast<int32_t>(t);
            head_pair[row] = static_cast<int32_t>(p);
          }
          entry[row * k + j] = local_index[ex[s]];
          entry_gate[row * k + j] = gate[p];
          pair[row * k + j] = static_cast<int32_t>(p);
          ++j;
        }
        if (j == 0) continue;
        for (; j < k; ++j) {
          entry[row * k + j] = -1;
          entry_gate[row * k + j] = 0.0f;
          pair[row * k + j] = -1;
        }
        ++row;
      }
    }
    __syncthreads();  // scan[] is rewritten for the next destination
  }
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
  slot_share_counts_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(expert, owner, n, k, counts);
  MOK_CUDA_CHECK_LAUNCH();
}

void ship_rows(bool fill, const int32_t* expert, const float* gate, const int32_t* dest, const int32_t* local_index,
               int64_t n, int k, int R, const int64_t* row_base, int64_t* rows, int32_t* token, int32_t* head_pair,
               int32_t* entry, float* entry_gate, int32_t* pair, cudaStream_t stream) {
  if (R < 1) throw std::invalid_argument("ship_rows: " + std::to_string(R) + " ranks");
  ship_rows_kernel<<<1, kScanThreads, 0, stream>>>(fill, expert, gate, dest, local_index, n, k, R, row_base, rows,
                                                   token, head_pair, entry, entry_gate, pair);
  MOK_CUDA_CHECK_LAUNCH();
}

void scatter_positions(const int32_t* index, int64_t m, int32_t base, int32_t* out, cudaStream_t stream) {
  if (m <= 0) return;
  scatter_positions_kernel<<<blocks_for(m, kThreads), kThreads, 0, stream>>>(index, m, base, out);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
