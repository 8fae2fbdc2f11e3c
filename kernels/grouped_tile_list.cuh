#pragma once
// The output tiles of a grouped GEMM call as both grouped kernels take them
// (grouped_gemm_kernel.cu, grouped_gemm_wgmma.cu): group by group, inside a group row tile by
// row tile with the column tiles fastest (neighbouring tiles share A rows; a group's B_g stays
// in L2). Output tiles are over (segment rows × n) for the rows forms and over (k × n) of dW_g
// for weight_grad. The list is two prefix arrays carried in the launch argument, so nothing
// host-side outlives the launch; a tile finds its group by a binary search.

#include <cstdint>

#include "kernels/grouped_gemm_kernel.h"

namespace mok::cuda {

struct GroupedTileList {
  int groups = 0;
  int tiles_n = 0;  // column tiles of every group
  int tiles = 0;    // all tiles
  int tile_start[kGroupedKernelMaxGroups + 1];  // first tile of group g; [groups] = tiles
  int row_start[kGroupedKernelMaxGroups + 1];   // off[g]
};

inline int64_t grouped_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Output tiles (tile_m × tile_n) of a group of m_g rows.
inline int64_t grouped_group_tiles(const GroupedKernelCall& call, int64_t m_g, int tile_m, int tile_n) {
  if (m_g <= 0) return 0;
  const int64_t rows = call.form == GroupedKernelForm::weight_grad ? call.k : m_g;
  return grouped_ceil_div(rows, tile_m) * grouped_ceil_div(call.n, tile_n);
}

// The list of `call` (accepted by grouped_kernel_refusal: at most kGroupedKernelMaxGroups
// groups, fewer than 2^31 rows and tiles).
inline void fill_tile_list(const GroupedKernelCall& call, int tile_m, int tile_n, GroupedTileList& list) {
  list.groups = call.groups;
  list.tiles_n = static_cast<int>(grouped_ceil_div(call.n, tile_n));
  int64_t tiles = 0;
  for (int g = 0; g < call.groups; ++g) {
    list.tile_start[g] = static_cast<int>(tiles);
    list.row_start[g] = static_cast<int>(call.host_offsets[g]);
    tiles += grouped_group_tiles(call, call.host_offsets[g + 1] - call.host_offsets[g], tile_m, tile_n);
  }
  list.tile_start[call.groups] = static_cast<int>(tiles);
  list.row_start[call.groups] = call.groups > 0 ? static_cast<int>(call.host_offsets[call.groups]) : 0;
  list.tiles = static_cast<int>(tiles);
}

// Where tile `tile` lies: its group g, its origin (m0: row in the segment for the rows forms,
// row of dW_g for weight_grad; n0: column), and the segment's rows [seg0, seg0 + seg_rows).
struct GroupedTile {
  int g, m0, n0, seg0, seg_rows;
};

__host__ __device__ inline GroupedTile locate_tile(const GroupedTileList& list, int tile, int tile_m, int tile_n) {
  int lo = 0, hi = list.groups;  // tile_start[lo] ≤ tile < tile_start[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (list.tile_start[mid] <= tile) lo = mid;
    else hi = mid;
  }
  GroupedTile t;
  t.g = lo;
  const int local = tile - list.tile_start[lo];
  t.m0 = (local / list.tiles_n) * tile_m;
  t.n0 = (local % list.tiles_n) * tile_n;
  t.seg0 = list.row_start[lo];
  t.seg_rows = list.row_start[lo + 1] - t.seg0;
  return t;
}

}  // namespace mok::cuda
