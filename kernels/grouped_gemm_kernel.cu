#include "kernels/grouped_gemm_kernel.h"

// The grouped GEMM kernel (interface and products: grouped_gemm_kernel.h).
//
// Work: one CTA per output tile of the call's tile list (grouped_tile_list.cuh: group by
// group, column tiles fastest, found by a binary search). Output tiles are over (segment rows
// × n) for the rows forms, and over (k × n) of dW_g for weight_grad, whose reduction runs over
// the segment's rows. Host offsets: the list is in the launch argument and the grid is its
// tiles. Device offsets: build_tile_list_on_device writes the list just before, the kernel
// (instantiated for TileListInDeviceMemory) reads it from global memory, and the grid is
// grouped_tile_bound: CTAs past list.tiles return at once.
//
// A CTA: warps as kWarpsM (rows) × kWarpsN (columns), each a kWarpM × kWarpN block of m16n8
// fp32 accumulators (64 × 64 in the wide tiles, 16 × 64 in the one-warp decode tile). The
// reduction runs in steps of kTileK = 32 through a kStages-deep ring of shared-memory stages
// filled by cp.async (stage s of step kt: slot kt % kStages):
//
//   prologue: start steps 0 .. kStages-2, one commit group each (empty groups past the end,
//             so that group i always holds step i)
//   step kt:  wait until ≤ kStages-2 groups are pending (group kt, hence step kt, has landed
//             for this thread) — __syncthreads (… for every thread; and every warp is done
//             with step kt-1, whose slot is refilled next) — start step kt+kStages-1 into
//             slot (kt-1) % kStages, commit — two k16 mma sub-steps on slot kt % kStages.
//
// Operands in shared memory keep their global layout (grouped_gemm_tiles.cuh):
//   rows         A k-inner [m][k]   B k-outer [k][n]     (B_g (k, n) has n contiguous)
//   rows_bt      A k-inner [m][k]   B k-inner [n][k]     (B_g stored (n, k))
//   weight_grad  A k-outer [r][k]   B k-outer [r][n]     (the reduction r is the segment's
//                rows; A[rows g] read as stored is (r × k), i.e. the m-major k-outer tile of Aᵀ)
// Bounds: operand chunks beyond the segment's rows, beyond k or beyond n are zero-filled, so
// they add exact zeros; outputs are stored only inside the segment (rows forms) or inside
// dW_g (weight_grad) and inside n.
//
// Epilogue: each lane holds (row g, columns 2t, 2t+1) and (row g+8, …) of every m16n8 block
// (g = lane/4, t = lane%4) and stores them as one bf16 pair (4 bytes) or one float2 (8 bytes)
// straight from registers: out = alpha·acc + beta·old (old not read when beta = 0).

#include <cuda_bf16.h>

#include <climits>
#include <stdexcept>

#include "kernels/cuda_check.h"
#include "kernels/grouped_gemm_tiles.cuh"
#include "kernels/grouped_tile_list.cuh"
#include "kernels/grouped_gemm_wgmma.h"

namespace mok::cuda {
namespace {

using bf16 = __nv_bfloat16;
using namespace grouped_tiles;

// The launch argument (with the list in it ≈ 12 KiB; CUDA ≥ 12.1 takes up to 32 KiB of kernel
// arguments). ListAt: TileListInLaunchArgument or TileListInDeviceMemory.
template <class ListAt>
struct GroupedKernelParams {
  const bf16* a;
  int64_t lda;
  const bf16* b;  // B (groups, …), or dY (M, n) for weight_grad
  int64_t ldb;
  int64_t b_group_stride;
  void* c;  // bf16 C (M, n), or fp32 dW (groups, k, n)
  int64_t ldc;
  int64_t c_group_stride;
  int n, k;
  float alpha, beta;
  ListAt tile_list;
};

// kWarpsM × kWarpsN warps of kWarpM × kWarpN outputs, a ring of kStages stages.
//   128×256: 2 × 4 warps of 64×64 (4 m16 × 8 n8 accumulator blocks, 128 floats a thread), one
//            CTA per SM (≈ 240 registers a thread, 120 KiB of stages)
//   128×128: 2 × 2 such warps, two CTAs per SM (80 KiB of stages each)
//   16×64:   one warp of 16×64 (32 floats a thread) and 8 stages (47 KiB): a CTA per 64 columns
//            of a decode-sized segment, several per SM, 7 steps of B (28 KiB) in flight each
template <int kWarpsM_, int kWarpsN_, int kWarpM_, int kStages_, int kMinBlocks_>
struct TileShape {
  static constexpr int kWarpsM = kWarpsM_, kWarpsN = kWarpsN_, kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kWarpM = kWarpM_, kWarpN = 64;
  static constexpr int kTileM = kWarpsM * kWarpM, kTileN = kWarpsN * kWarpN;
  static constexpr int kStages = kStages_;
  static constexpr int kFragsM = kWarpM / 16;  // m16 blocks per warp
  static constexpr int kFragsN = kWarpN / 8;   // n8 blocks per warp (read two at a time)
  static constexpr int kMinBlocks = kMinBlocks_;
  static_assert(kWarpM % 16 == 0 && kFragsN % 2 == 0, "whole m16 blocks, n8 blocks in pairs");
};
using Tile128x256 = TileShape<2, 4, 64, 4, 1>;
using Tile128x128 = TileShape<2, 2, 64, 4, 2>;
using Tile16x64 = TileShape<1, 1, 16, 8, 4>;

// Shared-memory storage of one form and tile shape (elements, bf16).
template <GroupedKernelForm F, class S>
struct StageLayout {
  static constexpr bool kAKOuter = F == GroupedKernelForm::weight_grad;
  static constexpr bool kBKOuter = F != GroupedKernelForm::rows_bt;
  static constexpr int kLdA = kAKOuter ? S::kTileM + 8 : kLdKInner;
  static constexpr int kLdB = kBKOuter ? S::kTileN + 8 : kLdKInner;
  static constexpr int kAElems = kAKOuter ? kTileK * kLdA : S::kTileM * kLdA;
  static constexpr int kBElems = kBKOuter ? kTileK * kLdB : S::kTileN * kLdB;
  static constexpr int kStageElems = kAElems + kBElems;
  static constexpr size_t kSmemBytes = size_t(S::kStages) * kStageElems * sizeof(bf16);
  static_assert(kAElems % 8 == 0 && kStageElems % 8 == 0, "tiles start on 16-byte boundaries");
};

template <GroupedKernelForm F, class S, class ListAt>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks)
    grouped_gemm_kernel(const __grid_constant__ GroupedKernelParams<ListAt> p) {
  using L = StageLayout<F, S>;
  constexpr bool kWeightGrad = F == GroupedKernelForm::weight_grad;
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  bf16* const smem = reinterpret_cast<bf16*>(smem_bytes);

  // ---- this CTA's tile: group g, origin (m0, n0), segment rows [seg0, seg0 + seg_rows) ----
  const GroupedTileList& list = p.tile_list.list();
  if (static_cast<int>(blockIdx.x) >= list.tiles) return;  // device offsets: the grid is a bound
  const GroupedTile at = locate_tile(list, static_cast<int>(blockIdx.x), S::kTileM, S::kTileN);
  const int g = at.g, m0 = at.m0, n0 = at.n0, seg0 = at.seg0, seg_rows = at.seg_rows;

  // Operand origins (element (0, 0) of step 0, inside the tensors since the tile exists) and
  // the reduction's length. The steps advance a_next/b_next (the next step to load) by
  // kTileK rows (k-outer) or kTileK columns (k-inner).
  const bf16* a_next;
  const bf16* b_next;
  int reduction;
  if constexpr (kWeightGrad) {  // A[rows g] (r, k) columns m0..; dY[rows g] (r, n) columns n0..
    a_next = p.a + int64_t(seg0) * p.lda + m0;
    b_next = p.b + int64_t(seg0) * p.ldb + n0;
    reduction = seg_rows;
  } else {  // A[rows g] rows m0..; B_g (k, n) columns n0.., or B_g (n, k) rows n0..
    a_next = p.a + int64_t(seg0 + m0) * p.lda;
    const bf16* const b_group = p.b + int64_t(g) * p.b_group_stride;
    b_next = F == GroupedKernelForm::rows ? b_group + n0 : b_group + int64_t(n0) * p.ldb;
    reduction = p.k;
  }
  const int steps = (reduction + kTileK - 1) / kTileK;

  // The next step's operand blocks into ring slot `slot`, `left` reduction indices from its
  // start to the end; what lies beyond the segment, k or n is zero.
  auto load_next = [&](int slot, int left) {
    bf16* const as = smem + slot * L::kStageElems;
    bf16* const bs = as + L::kAElems;
    if constexpr (kWeightGrad) {
      load_tile_async<kTileK, S::kTileM, S::kThreads>(as, a_next, p.lda, left, p.k - m0);
      load_tile_async<kTileK, S::kTileN, S::kThreads>(bs, b_next, p.ldb, left, p.n - n0);
      a_next += kTileK * p.lda;
      b_next += kTileK * p.ldb;
    } else {
      load_tile_async<S::kTileM, kTileK, S::kThreads>(as, a_next, p.lda, seg_rows - m0, left);
      a_next += kTileK;
      if constexpr (F == GroupedKernelForm::rows) {
        load_tile_async<kTileK, S::kTileN, S::kThreads>(bs, b_next, p.ldb, left, p.n - n0);
        b_next += kTileK * p.ldb;
      } else {
        load_tile_async<S::kTileN, kTileK, S::kThreads>(bs, b_next, p.ldb, p.n - n0, left);
        b_next += kTileK;
      }
    }
  };

  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int warp_m0 = (warp / S::kWarpsN) * S::kWarpM;  // the warp's block inside the tile
  const int warp_n0 = (warp % S::kWarpsN) * S::kWarpN;

  float acc[S::kFragsM][S::kFragsN][4];
#pragma unroll
  for (int i = 0; i < S::kFragsM; ++i)
#pragma unroll
    for (int j = 0; j < S::kFragsN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < S::kStages - 1; ++s) {
    if (s < steps) load_next(s, reduction - s * kTileK);
    mma::cp_async_commit();
  }
  for (int kt = 0; kt < steps; ++kt) {
    mma::cp_async_wait<S::kStages - 2>();
    __syncthreads();
    const int ahead = kt + S::kStages - 1;
    if (ahead < steps) load_next(ahead % S::kStages, reduction - ahead * kTileK);
    mma::cp_async_commit();

    const bf16* const as = smem + (kt % S::kStages) * L::kStageElems;
    const bf16* const bs = as + L::kAElems;
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      // B fragments of the warp's columns, then A one m16 block at a time (fewer live registers)
      uint32_t bfr[S::kFragsN / 2][4];
#pragma unroll
      for (int j = 0; j < S::kFragsN / 2; ++j) {
        if constexpr (L::kBKOuter) load_b_k_outer<L::kLdB>(bfr[j], bs, kk, warp_n0 + 16 * j, lane);
        else load_b_k_inner(bfr[j], bs, kk, warp_n0 + 16 * j, lane);
      }
#pragma unroll
      for (int i = 0; i < S::kFragsM; ++i) {
        uint32_t af[4];
        if constexpr (L::kAKOuter) load_a_k_outer<L::kLdA>(af, as, warp_m0 + 16 * i, kk, lane);
        else load_a_k_inner(af, as, warp_m0 + 16 * i, kk, lane);
#pragma unroll
        for (int j = 0; j < S::kFragsN / 2; ++j) {
          mma::mma_bf16(acc[i][2 * j], af, bfr[j][0], bfr[j][1]);
          mma::mma_bf16(acc[i][2 * j + 1], af, bfr[j][2], bfr[j][3]);
        }
      }
    }
  }
  mma::cp_async_wait<0>();  // only empty groups can be pending here

  // ---- epilogue: out = alpha·acc + beta·old, inside the segment (or dW_g) and inside n ----
  const int gq = lane / 4, tq = lane % 4;
  const int row_limit = kWeightGrad ? p.k : seg_rows;  // rows of the output block
  const float alpha = p.alpha, beta = p.beta;
#pragma unroll
  for (int i = 0; i < S::kFragsM; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = m0 + warp_m0 + 16 * i + gq + 8 * half;
      if (r >= row_limit) continue;
#pragma unroll
      for (int j = 0; j < S::kFragsN; ++j) {
        const int col = n0 + warp_n0 + 8 * j + 2 * tq;
        if (col >= p.n) continue;
        float v0 = alpha * acc[i][j][2 * half], v1 = alpha * acc[i][j][2 * half + 1];
        if constexpr (kWeightGrad) {
          float* const out = static_cast<float*>(p.c) + int64_t(g) * p.c_group_stride + int64_t(r) * p.ldc + col;
          if (beta != 0.f) {
            const float2 old = *reinterpret_cast<const float2*>(out);
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
          }
          *reinterpret_cast<float2*>(out) = make_float2(v0, v1);
        } else {
          bf16* const out = static_cast<bf16*>(p.c) + int64_t(seg0 + r) * p.ldc + col;
          if (beta != 0.f) {
            const float2 old = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(out));
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
          }
          *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(v0, v1);
        }
      }
    }
  }
}

// ---- host side ----

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

static_assert(Tile128x256::kTileM == 128 && Tile128x256::kTileN == 256 && Tile128x128::kTileN == 128 &&
                  Tile16x64::kTileM == 16 && Tile16x64::kTileN == 64,
              "the tiles the names say");

// The call's operands and scalars into the launch argument `p`; everything but its list.
template <class ListAt>
void set_operands(const GroupedKernelCall& call, GroupedKernelParams<ListAt>& p) {
  p.a = static_cast<const bf16*>(call.a);
  p.lda = call.lda;
  p.b = static_cast<const bf16*>(call.b);
  p.ldb = call.ldb;
  p.b_group_stride = call.b_group_stride;
  p.c = call.c;
  p.ldc = call.ldc;
  p.c_group_stride = call.c_group_stride;
  p.n = static_cast<int>(call.n);
  p.k = static_cast<int>(call.k);
  p.alpha = call.alpha;
  p.beta = call.beta;
}

template <GroupedKernelForm F, class S, class ListAt>
void launch(const GroupedKernelParams<ListAt>& p, int grid, cudaStream_t stream) {
  grouped_gemm_kernel<F, S, ListAt><<<grid, S::kThreads, StageLayout<F, S>::kSmemBytes, stream>>>(p);
  MOK_CUDA_CHECK_LAUNCH();
}

template <class S, class ListAt>
void launch_form(GroupedKernelForm form, const GroupedKernelParams<ListAt>& p, int grid, cudaStream_t stream) {
  switch (form) {
    case GroupedKernelForm::rows: launch<GroupedKernelForm::rows, S>(p, grid, stream); return;
    case GroupedKernelForm::rows_bt: launch<GroupedKernelForm::rows_bt, S>(p, grid, stream); return;
    case GroupedKernelForm::weight_grad: launch<GroupedKernelForm::weight_grad, S>(p, grid, stream); return;
  }
}

template <class ListAt>
void launch_tile(GroupedKernelTile tile, GroupedKernelForm form, const GroupedKernelParams<ListAt>& p, int grid,
                 cudaStream_t stream) {
  if (tile == GroupedKernelTile::m128n256) launch_form<Tile128x256>(form, p, grid, stream);
  else if (tile == GroupedKernelTile::m16n64) launch_form<Tile16x64>(form, p, grid, stream);
  else launch_form<Tile128x128>(form, p, grid, stream);
}

template <GroupedKernelForm F, class S, class ListAt>
void raise_shared_memory_limit() {
  const auto kernel = grouped_gemm_kernel<F, S, ListAt>;
  MOK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(StageLayout<F, S>::kSmemBytes)));
  MOK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared));
}

template <class S, class ListAt>
void raise_shared_memory_limits() {
  raise_shared_memory_limit<GroupedKernelForm::rows, S, ListAt>();
  raise_shared_memory_limit<GroupedKernelForm::rows_bt, S, ListAt>();
  raise_shared_memory_limit<GroupedKernelForm::weight_grad, S, ListAt>();
}

}  // namespace

const char* grouped_kernel_tile_name(GroupedKernelTile tile) {
  switch (tile) {
    case GroupedKernelTile::m128n256: return "128x256";
    case GroupedKernelTile::m128n128: return "128x128";
    case GroupedKernelTile::m128n256_wgmma: return "128x256 wgmma";
    case GroupedKernelTile::m16n64: return "16x64";
  }
  return "?";
}

int grouped_kernel_tile_rows(GroupedKernelTile tile) {
  switch (tile) {
    case GroupedKernelTile::m128n128: return Tile128x128::kTileM;
    case GroupedKernelTile::m16n64: return Tile16x64::kTileM;
    default: return Tile128x256::kTileM;  // wgmma: 128×256 too
  }
}

int grouped_kernel_tile_cols(GroupedKernelTile tile) {
  switch (tile) {
    case GroupedKernelTile::m128n128: return Tile128x128::kTileN;
    case GroupedKernelTile::m16n64: return Tile16x64::kTileN;
    default: return Tile128x256::kTileN;
  }
}

std::string grouped_kernel_refusal(const GroupedKernelCall& c, GroupedKernelTile tile) {
  const bool wg = c.form == GroupedKernelForm::weight_grad;
  if (c.groups < 0 || c.groups > kGroupedKernelMaxGroups)
    return std::to_string(c.groups) + " groups (at most " + std::to_string(kGroupedKernelMaxGroups) + ")";
  if (c.groups > 0 && !c.host_offsets && !c.device_offsets) return "no offsets";
  if (c.host_offsets && c.device_offsets) return "both host and device offsets";
  if (c.n < 0 || c.k < 0 || c.n > INT_MAX || c.k > INT_MAX) return "n or k out of range";
  if (c.n % 8 != 0 || c.k % 8 != 0)
    return "n " + std::to_string(c.n) + ", k " + std::to_string(c.k) + ": both must be multiples of 8";
  // row lengths: A (M, k); B (k, n), (n, k) or dY (M, n); C (M, n) or dW_g (k, n)
  const int64_t b_row = c.form == GroupedKernelForm::rows_bt ? c.k : c.n;
  if (c.lda % 8 != 0 || c.ldb % 8 != 0 || c.ldc % 8 != 0 || c.lda < c.k || c.ldb < b_row || c.ldc < c.n)
    return "leading dimensions (" + std::to_string(c.lda) + ", " + std::to_string(c.ldb) + ", " +
           std::to_string(c.ldc) + ") must be multiples of 8 and at least the row lengths";
  const int64_t stride = wg ? c.c_group_stride : c.b_group_stride;
  if (stride % 8 != 0 || stride < 0) return "group stride " + std::to_string(stride) + " is not a multiple of 8";
  if (!aligned16(c.a) || !aligned16(c.b) || !aligned16(c.c)) return "a pointer is not 16-byte aligned";
  if (tile == GroupedKernelTile::m128n256_wgmma) {
    const std::string wgmma = grouped_wgmma_refusal(c);
    if (!wgmma.empty()) return wgmma;
  }
  if (c.device_offsets) {  // only M is known here: the list kernel checks the offsets
    if (!c.device_list) return "device offsets without a device tile list";
    if (c.rows < 0 || c.rows > INT_MAX) return "M = " + std::to_string(c.rows) + " out of [0, 2^31)";
    if (c.groups == 0 && c.rows > 0) return "rows without groups";
    if (grouped_tile_bound(c, grouped_kernel_tile_rows(tile), grouped_kernel_tile_cols(tile)) > INT_MAX)
      return "2^31 tiles or more (bound)";
    return "";
  }
  if (c.groups == 0) return "";
  if (c.host_offsets[0] < 0) return "negative first offset";
  int64_t tiles = 0;
  for (int g = 0; g < c.groups; ++g) {
    const int64_t m_g = c.host_offsets[g + 1] - c.host_offsets[g];
    if (m_g < 0) return "offsets decrease at group " + std::to_string(g);
    tiles += grouped_group_tiles(c, m_g, grouped_kernel_tile_rows(tile), grouped_kernel_tile_cols(tile));
  }
  if (c.host_offsets[c.groups] > INT_MAX || tiles > INT_MAX) return "2^31 rows or tiles or more";
  return "";
}

void grouped_gemm_kernel(const GroupedKernelCall& call, GroupedKernelTile tile, cudaStream_t stream) {
  const std::string refusal = grouped_kernel_refusal(call, tile);
  if (!refusal.empty()) throw std::invalid_argument("grouped_gemm_kernel: " + refusal);
  if (call.groups == 0) return;  // no rows (and maybe no offsets to read)
  if (tile == GroupedKernelTile::m128n256_wgmma) return grouped_gemm_wgmma(call, stream);
  if (call.device_offsets) {
    const int64_t bound = grouped_tile_bound(call, grouped_kernel_tile_rows(tile), grouped_kernel_tile_cols(tile));
    if (bound == 0) return;  // M = 0, n = 0, or weight_grad with k = 0
    build_tile_list_on_device(call, grouped_kernel_tile_rows(tile), grouped_kernel_tile_cols(tile), stream);
    GroupedKernelParams<TileListInDeviceMemory> p;
    set_operands(call, p);
    p.tile_list.pointer = call.device_list;
    launch_tile(tile, call.form, p, static_cast<int>(bound), stream);
    return;
  }
  GroupedKernelParams<TileListInLaunchArgument> p;
  set_operands(call, p);
  fill_tile_list(call, grouped_kernel_tile_rows(tile), grouped_kernel_tile_cols(tile), p.tile_list.value);
  const int tiles = p.tile_list.value.tiles;
  if (tiles == 0) return;  // no rows, or n = 0 (k = 0 still writes beta·C)
  launch_tile(tile, call.form, p, tiles, stream);
}

void grouped_gemm_kernel_prepare() {
  raise_shared_memory_limits<Tile128x256, TileListInLaunchArgument>();
  raise_shared_memory_limits<Tile128x128, TileListInLaunchArgument>();
  raise_shared_memory_limits<Tile128x256, TileListInDeviceMemory>();
  raise_shared_memory_limits<Tile128x128, TileListInDeviceMemory>();
  raise_shared_memory_limits<Tile16x64, TileListInLaunchArgument>();
  raise_shared_memory_limits<Tile16x64, TileListInDeviceMemory>();
  grouped_gemm_wgmma_prepare();
}

}  // namespace mok::cuda
