#pragma once
// The grouped GEMM kernel: every expert segment's product in ONE launch (bf16 operands, fp32
// accumulation on the tensor cores through mma.sync), for the three products of a stacked
// expert bank. Row-major; host offsets off[0..G]; the rows of group g are [off[g], off[g+1]).
//
//   rows         C[rows g] (m_g, n) = alpha·A[rows g] (m_g, k)·B_g (k, n)   + beta·C[rows g]
//   rows_bt      C[rows g] (m_g, n) = alpha·A[rows g] (m_g, k)·B_gᵀ, B_g stored (n, k)  + beta·C
//   weight_grad  dW_g (k, n) = alpha·A[rows g]ᵀ (k, m_g)·dY[rows g] (m_g, n) + beta·dW_g
// A, B and dY are bf16; C is bf16 (rows forms), dW fp32 (weight_grad). beta = 0 does not read
// the output. Empty groups compute nothing (their dW_g is left as it is).
//
// The offsets become a list of output tiles (group, tile row, tile column;
// kernels/grouped_tile_list.cuh). Host offsets: the host builds it and passes it as a launch
// argument, so nothing host-side outlives the call. Device offsets (the per-expert counts never
// cross to the host, so an MoE step can be one CUDA graph): a one-block kernel builds the same
// list in caller-owned device memory, on the stream right before the GEMM, which reads it from
// there; the grid is sized for the most tiles any split of the M rows can have, and CTAs past
// the list's end return at once. Either way the call can be captured in a graph, and a replay
// computes with the offsets the device holds then. One CTA computes one output tile over the
// whole reduction in a fixed order (no split of the reduction, no atomics): results repeat bit
// for bit, are the same for host and device offsets, and do not depend on the other groups.
// Design and fragment layouts: kernels/grouped_gemm_kernel.cu and kernels/grouped_gemm_tiles.cuh.
//
// What it takes (grouped_kernel_refusal says why not otherwise; GroupedGemm then runs its
// loop): n and k multiples of 8; every leading dimension and group stride a multiple of 8
// elements (rows of 16-byte chunks) and at least its row length; A, B, C 16-byte aligned;
// at most kGroupedKernelMaxGroups groups; fewer than 2^31 rows, tiles and columns (device
// offsets: fewer than 2^31 tiles in the bound, since only M is known on the host).

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace mok::cuda {

constexpr int kGroupedKernelMaxGroups = 1024;

enum class GroupedKernelForm { rows, rows_bt, weight_grad };

struct GroupedTileList;  // kernels/grouped_tile_list.cuh

// The CTA's output tile (rows × columns), warps of 64×64 outputs: 128×256 is 8 warps, one CTA
// per SM; 128×128 is 4 warps, two CTAs per SM. m16n64 is one warp of 16×64 outputs with a
// deeper ring of stages, for decode-sized segments (a row or a few per expert): where the
// wide tiles would give fewer CTAs than the GPU has SMs, a CTA per 64 columns instead of 256
// streams the experts' weights with 4 times as many CTAs. m128n256_wgmma is the Hopper kernel
// (kernels/grouped_gemm_wgmma.h: TMA and wgmma, 128×256 tiles, a persistent grid), which also
// refuses what grouped_wgmma_refusal says. The three wide ones are timed (gemm_timings.cpp);
// all four give the same bits (gemm_checks.cpp).
enum class GroupedKernelTile { m128n256, m128n128, m128n256_wgmma, m16n64 };
const char* grouped_kernel_tile_name(GroupedKernelTile tile);
int grouped_kernel_tile_rows(GroupedKernelTile tile);
int grouped_kernel_tile_cols(GroupedKernelTile tile);

// One call. Leading dimensions and strides in elements. The offsets (groups + 1,
// non-decreasing, offsets[0] ≥ 0) are on the host or on the device: exactly one pointer is set.
struct GroupedKernelCall {
  GroupedKernelForm form = GroupedKernelForm::rows;
  int groups = 0;
  const int64_t* host_offsets = nullptr;    // host memory
  const int64_t* device_offsets = nullptr;  // device memory, read by the stream's kernels
  int64_t rows = 0;  // device offsets: M = offsets[groups], which must hold when the kernels run
                     // (it sizes the grid and the TMA maps; a list kernel that sees another value traps)
  GroupedTileList* device_list = nullptr;  // device offsets: device memory the list is built in,
                                           // caller-owned, not rewritten until the GEMM has run
  int64_t n = 0, k = 0;                     // see the products above
  float alpha = 1.f, beta = 0.f;
  const void* a = nullptr;  // bf16 (M, k), M = offsets[groups]
  int64_t lda = 0;
  const void* b = nullptr;  // bf16: rows B (groups, k, n); rows_bt B (groups, n, k); weight_grad dY (M, n)
  int64_t ldb = 0;
  int64_t b_group_stride = 0;  // rows forms: elements from B_g to B_{g+1}; weight_grad: unused
  void* c = nullptr;           // rows forms: bf16 C (M, n); weight_grad: fp32 dW (groups, k, n)
  int64_t ldc = 0;
  int64_t c_group_stride = 0;  // weight_grad: elements from dW_g to dW_{g+1}; rows forms: unused
};

// Why the kernel cannot take `call` with `tile`; empty when it can.
std::string grouped_kernel_refusal(const GroupedKernelCall& call, GroupedKernelTile tile);

// Launches the call on `stream` (nothing when it has no output tiles; with device offsets the
// list kernel, then the GEMM, nothing when M = 0). Throws std::invalid_argument with the
// refusal when the kernel cannot take it.
void grouped_gemm_kernel(const GroupedKernelCall& call, GroupedKernelTile tile, cudaStream_t stream);

// Raises the kernels' shared-memory limits on the current device (they use more than the
// default 48 KiB); once per device before the first launch there.
void grouped_gemm_kernel_prepare();

}  // namespace mok::cuda
