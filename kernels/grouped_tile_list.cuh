#pragma once
// The output tiles of a grouped GEMM call as both grouped kernels take them
// (grouped_gemm_kernel.cu, grouped_gemm_wgmma.cu): group by group, inside a group row tile by
// row tile with the column tiles fastest (neighbouring tiles share A rows; a group's B_g stays
// in L2). Output tiles are over (segment rows × n) for the rows forms and over (k × n) of dW_g
// for weight_grad. A tile finds its place by a binary search.
//
// Where the list comes from: with host offsets fill_tile_list builds it on the host and the
// kernels carry it in their launch argument (TileListInLaunchArgument: read through the
// constant cache, nothing host-side outlives the launch). With device offsets
// build_tile_list_on_device builds the same list (one block, a thread per group) in device
// memory right before the GEMM on its stream, and the kernels read it from there
// (TileListInDeviceMemory): the host never sees the counts. The host only knows M, so the grid
// is sized by grouped_tile_bound, and what lies past list.tiles does nothing.
//
// Order of the groups: the rows forms list them as given (every tile costs the same k). A
// weight_grad tile's cost is its group's segment rows (the reduction), which routing makes
// uneven, so there the groups come by decreasing rows (ties by index): the mma.sync kernel's
// CTAs start largest first, and the persistent wgmma kernel's rounds (one tile per CTA, every
// other round walked backwards) pair large tiles with small ones. On the device a group's
// place is its rank (the groups with more rows, and those with as many and a lower index):
// the same order as the host's stable sort.

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

__host__ __device__ inline int64_t grouped_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Output tiles (tile_m × tile_n) of a group of m_g rows: over (m_g × n), or (k × n) of dW_g.
__host__ __device__ inline int64_t grouped_segment_tiles(bool weight_grad, int64_t n, int64_t k, int64_t m_g,
                                                         int tile_m, int tile_n) {
  if (m_g <= 0) return 0;
  return grouped_ceil_div(weight_grad ? k : m_g, tile_m) * grouped_ceil_div(n, tile_n);
}
inline int64_t grouped_group_tiles(const GroupedKernelCall& call, int64_t m_g, int tile_m, int tile_n) {
  return grouped_segment_tiles(call.form == GroupedKernelForm::weight_grad, call.n, call.k, m_g, tile_m, tile_n);
}

// The most tiles any split of call.rows (M) rows into call.groups segments can give: at most
// min(groups, M) segments are non-empty, and splitting M rows into s segments adds at most s
// partial row tiles. The grid of a call with device offsets (call.rows < 2^31).
inline int64_t grouped_tile_bound(const GroupedKernelCall& call, int tile_m, int tile_n) {
  if (call.rows <= 0 || call.groups <= 0) return 0;
  const int64_t segments = std::min<int64_t>(call.groups, call.rows);
  const int64_t column_tiles = grouped_ceil_div(call.n, tile_n);
  if (call.form == GroupedKernelForm::weight_grad) return segments * grouped_ceil_div(call.k, tile_m) * column_tiles;
  return (grouped_ceil_div(call.rows, tile_m) + segments) * column_tiles;
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

// Builds the list of `call` (device offsets, accepted by grouped_kernel_refusal) into
// call.device_list with one block on `stream`: the list fill_tile_list would build from the
// same offsets. It traps (a launch failure, sticky) when the offsets break their contract
// (decreasing, negative, offsets[groups] > call.rows): the GEMM would read and write past M.
// Rows past offsets[groups] belong to no group and are left as they are.
// kernels/grouped_tile_list.cu.
void build_tile_list_on_device(const GroupedKernelCall& call, int tile_m, int tile_n, cudaStream_t stream);

// Where a kernel reads its list (a member of its launch argument, which is __grid_constant__,
// so list() refers to the argument itself, not a local copy).
struct TileListInLaunchArgument {
  GroupedTileList value;
  __host__ __device__ const GroupedTileList& list() const { return value; }
};
struct TileListInDeviceMemory {
  const GroupedTileList* pointer;
  __host__ __device__ const GroupedTileList& list() const { return *pointer; }
};

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
