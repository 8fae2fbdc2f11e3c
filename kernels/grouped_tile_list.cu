#include "kernels/grouped_tile_list.cuh"

// build_tile_list_on_device (interface and the list: grouped_tile_list.cuh): fill_tile_list as
// one block of kGroupedKernelMaxGroups threads, thread g for group g, so that the per-expert
// counts stay on the device (a graph replay reads the offsets the device holds then):
//   1. m_g = off[g+1] − off[g] into shared memory, row_start[g] = off[g]; offsets that break
//      the contract (decreasing, negative, off[groups] > M) trap; rows past off[groups] belong
//      to no group (RowSegments::leading)
//   2. the group's place in the list: g (rows forms), or its rank by decreasing rows, ties by
//      index (weight_grad: the host's stable sort), counted over the other groups' rows (at
//      most 1024 broadcast reads of shared memory per thread)
//   3. group_of[place] = g and the group's tiles at its place; an exclusive sum over the
//      places gives tile_start, and its total the list's tiles
// Integer arithmetic only: the same list as the host's for the same offsets.

#include <cub/block/block_scan.cuh>

#include "kernels/cuda_check.h"

namespace mok::cuda {
namespace {

constexpr int kListThreads = kGroupedKernelMaxGroups;

__global__ void __launch_bounds__(kListThreads)
    build_tile_list_kernel(const int64_t* __restrict__ off, int groups, int64_t rows, bool weight_grad, int64_t n,
                           int64_t k, int tile_m, int tile_n, GroupedTileList* __restrict__ list) {
  using Scan = cub::BlockScan<int, kListThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int64_t segment_rows[kGroupedKernelMaxGroups];  // by group
  __shared__ int tiles_at[kGroupedKernelMaxGroups];          // by place in the list

  const int g = static_cast<int>(threadIdx.x);
  int64_t m_g = 0;
  if (g < groups) {
    const int64_t begin = off[g], end = off[g + 1];
    m_g = end - begin;
    if (m_g < 0 || (g == 0 && begin < 0) || (g == groups - 1 && end > rows)) __trap();
    segment_rows[g] = m_g;
    list->row_start[g] = static_cast<int>(begin);
    if (g == groups - 1) list->row_start[groups] = static_cast<int>(end);  // ≤ rows, checked above
  }
  if (g == 0) {
    list->groups = groups;
    list->tiles_n = static_cast<int>(grouped_ceil_div(n, tile_n));
  }
  __syncthreads();

  if (g < groups) {
    int place = g;
    if (weight_grad) {
      place = 0;
      for (int j = 0; j < groups; ++j) {
        const int64_t m_j = segment_rows[j];
        place += m_j > m_g || (m_j == m_g && j < g);
      }
    }
    list->group_of[place] = g;
    tiles_at[place] = static_cast<int>(grouped_segment_tiles(weight_grad, n, k, m_g, tile_m, tile_n));
  }
  __syncthreads();

  // thread i now stands for the i-th place of the list
  int start = 0, total = 0;
  Scan(scan_storage).ExclusiveSum(g < groups ? tiles_at[g] : 0, start, total);
  if (g < groups) list->tile_start[g] = start;
  if (g == 0) {
    list->tile_start[groups] = total;
    list->tiles = total;
  }
}

}  // namespace

void build_tile_list_on_device(const GroupedKernelCall& call, int tile_m, int tile_n, cudaStream_t stream) {
  build_tile_list_kernel<<<1, kListThreads, 0, stream>>>(call.device_offsets, call.groups, call.rows,
                                                         call.form == GroupedKernelForm::weight_grad, call.n, call.k,
                                                         tile_m, tile_n, call.device_list);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
