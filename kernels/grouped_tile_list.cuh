#pragma once
// The output tiles of a grouped GEMM call as both grouped kernels take them
// (grouped_gemm_kernel.cu, grouped_gemm_wgmma.cu): group by group, inside a group row tile by
// row tile with the column tiles fastest (neighbouring tiles share A rows; a group's B_g stays
// in L2). Output tiles are over (segment rows × n) for the rows forms and over (k × n) of dW_g
// for weight_grad. The list is carried in the launch argument, so nothing host-side outlives
// the launch; a tile finds its place by a binary search.
//
// Order of the groups: the rows forms list them as given (every tile costs the same k). A
// weight_grad tile's cost is its group's segment rows (the reduction), which routing makes
// uneven, so there the groups come by decreasing rows (ties by index): the mma.sync kernel's
// CTAs start largest first, and the persistent wgmma kernel's rounds (one tile per CTA, every
// other round walked backwards) pair large tiles with small ones.

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "kernels/grouped_gemm_kernel.h"

namespace mok::cuda {

struct GroupedTileList {
  int groups = 0;
  int tiles_n = 0;  // column tiles of every group
  int tiles = 0;    // all tiles
  int tile_start[kGroupedKernelMaxGroups + 1];  // first tile of the i-th listed group; [groups] = tiles
  int group_of[kGroupedKernelMaxGroups];        // the i-th listed group
  int row_start[kGroupedKernelMaxGroups + 1];   // by group: off[g]
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
  const int groups = call.groups;
  const int64_t* off = call.host_offsets;
  list.groups = groups;
  list.tiles_n = static_cast<int>(grouped_ceil_div(call.n, tile_n));
  std::iota(list.group_of, list.group_of + groups, 0);
  if (call.form == GroupedKernelForm::weight_grad)
    std::stable_sort(list.group_of, list.group_of + groups,
                     [off](int a, int b) { return off[a + 1] - off[a] > off[b + 1] - off[b]; });
  int64_t tiles = 0;
  for (int i = 0; i < groups; ++i) {
    const int g = list.group_of[i];
    list.tile_start[i] = static_cast<int>(tiles);
    tiles += grouped_group_tiles(call, off[g + 1] - off[g], tile_m, tile_n);
  }
  list.tile_start[groups] = static_cast<int>(tiles);
  for (int g = 0; g <= groups; ++g) list.row_start[g] = static_cast<int>(off[g]);
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
  t.g = list.group_of[lo];
  const int local = tile - list.tile_start[lo];
  t.m0 = (local / list.tiles_n) * tile_m;
  t.n0 = (local % list.tiles_n) * tile_n;
  t.seg0 = list.row_start[t.g];
  t.seg_rows = list.row_start[t.g + 1] - t.seg0;
  return t;
}

// The persistent wgmma kernel's schedule: in round r the grid's CTAs take tiles
// [r·grid, (r + 1)·grid), CTA b the b-th of them, or the b-th from the end in odd rounds.
// A value ≥ tiles means no tile for this CTA in this round.
__host__ __device__ inline int round_tile(int round, int cta, int grid) {
  return round * grid + (round % 2 == 0 ? cta : grid - 1 - cta);
}

}  // namespace mok::cuda
