#include "kernels/grouped_gemm_wgmma.h"

// The Hopper grouped GEMM (interface: grouped_gemm_wgmma.h; PTX and shared-memory layouts:
// hopper_ptx.cuh).
//
// Work: the output tiles of the call's tile list (grouped_tile_list.cuh, as the mma.sync
// kernel), but a persistent grid: a CTA takes one tile of each round of `grid` tiles
// (round_tile: every other round backwards, which evens out weight-gradient tiles listed by
// decreasing reduction), so that loads of its next tile overlap the epilogue of the current one.
// Rounds run until list.tiles, read once by every thread. The grid is min(tiles, SMs) with host
// offsets, min(grouped_tile_bound, SMs) with device offsets (the list then in global memory,
// built just before): a CTA without a tile in a round skips it, so a larger grid only moves
// tiles between CTAs, and every tile is still computed the same way. The TMA maps need only
// M (call.rows with device offsets), not the split.
//
// A CTA is three warpgroups:
//   producer   one thread issues the TMA loads of every reduction step of every tile into a
//              ring of kStages shared-memory stages: wait until the stage is empty, announce
//              its bytes on the stage's `full` barrier, load. (The other 127 threads leave.)
//   consumers  two warpgroups, 64 output rows each, all 256 columns: per step wait for
//              `full` and issue four wgmma k16 steps (m64n256k16); once the previous step's
//              MMAs have finished (one batch stays in flight), each warp arrives on that
//              stage's `empty` barrier (8 arrivals free it). The epilogue stores
//              alpha·acc + beta·old: with beta = 0 in the rows forms through a small staging
//              block in shared memory as 16-byte row pieces, otherwise straight from the
//              accumulators.
// Stage contents (bf16, 128-byte swizzle, boxes of 64 rows × 128 bytes unless said):
//   rows         A (128 rows × 64 k, one box of 128 rows, K-major)   B_g (64 k × 256 n: four boxes, MN-major)
//   rows_bt      A as rows                                           B_g (256 n × 64 k: one box of 256 rows, K-major)
//   weight_grad  A (64 r × 128 k-of-dW: two boxes, MN-major)         dY (64 r × 256 n: four boxes, MN-major)
// Bounds: the copy engine fills what lies beyond a tensor with zeros (past k, n or the last
// row). A tile's rows past its segment hold the next group's rows: in the rows forms they only
// reach output rows that are not stored; in weight_grad they are the reduction, so the
// consumers zero them in the last, partial step before the MMA reads it.

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/grouped_tile_list.cuh"
#include "kernels/hopper_ptx.cuh"

namespace mok::cuda {
namespace {

using bf16 = __nv_bfloat16;
using namespace hopper;

constexpr int kTileM = 128, kTileN = 256, kTileK = 64;  // output tile; reduction per stage
constexpr int kStages = 4;
constexpr int kConsumers = 2;                          // warpgroups of 64 output rows
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kBoxRowBytes = 128;                      // 64 bf16
constexpr int kBoxBytes = 64 * kBoxRowBytes;           // a box of 64 rows (8 KiB)
constexpr int kABytes = kTileM * kTileK * 2;           // 16 KiB
constexpr int kBBytes = kTileN * kTileK * 2;           // 32 KiB
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kEmptyArrivals = kConsumers * 4;         // one per consumer warp
// bf16 results leave through a staging block per consumer: 64 rows × 64 columns, rows padded
// to 144 bytes (the 4-byte writes of a warp then fall in 32 different banks)
constexpr int kStagePitch = 64 * 2 + 16;
constexpr int kStagingBytes = 64 * kStagePitch;
constexpr size_t kBarrierBytes = 2 * kStages * sizeof(uint64_t);
constexpr size_t kSmemBytes = size_t(kStages) * kStageBytes + kBarrierBytes + kConsumers * kStagingBytes + 1024;
static_assert(kABytes == 2 * kBoxBytes && kBBytes == 4 * kBoxBytes, "the boxes the layout comment lists");

// ListAt: TileListInLaunchArgument or TileListInDeviceMemory (grouped_tile_list.cuh).
template <class ListAt>
struct WgmmaParams {
  CUtensorMap a_map;  // A (M, k): boxes 64 k × 128 rows (rows forms) or 64 k × 64 rows (weight_grad)
  CUtensorMap b_map;  // rows: B (G, k, n) boxes 64 n × 64 k; rows_bt: B (G, n, k) boxes 64 k × 256 n;
                      // weight_grad: dY (M, n) boxes 64 n × 64 rows
  void* c;            // bf16 C (M, n), or fp32 dW (groups, k, n)
  int64_t ldc;
  int64_t c_group_stride;
  int n, k;
  float alpha, beta;
  ListAt tile_list;
};

struct TileCoords : GroupedTile {
  int steps;  // reduction steps of kTileK
};

template <GroupedKernelForm F, class ListAt>
__device__ inline TileCoords tile_coords(const WgmmaParams<ListAt>& p, int tile) {
  TileCoords t{locate_tile(p.tile_list.list(), tile, kTileM, kTileN), 0};
  const int reduction = F == GroupedKernelForm::weight_grad ? t.seg_rows : p.k;
  t.steps = (reduction + kTileK - 1) / kTileK;
  return t;
}

template <GroupedKernelForm F, class ListAt>
__device__ inline void load_stage(const WgmmaParams<ListAt>& p, const TileCoords& t, int step, unsigned char* a_s,
                                  unsigned char* b_s, uint64_t* full) {
  const int r = step * kTileK;
  if constexpr (F == GroupedKernelForm::weight_grad) {
    for (int w = 0; w < 2; ++w) tma_load_2d(a_s + w * kBoxBytes, &p.a_map, t.m0 + 64 * w, t.seg0 + r, full);
    for (int j = 0; j < 4; ++j) tma_load_2d(b_s + j * kBoxBytes, &p.b_map, t.n0 + 64 * j, t.seg0 + r, full);
  } else {
    tma_load_2d(a_s, &p.a_map, r, t.seg0 + t.m0, full);
    if constexpr (F == GroupedKernelForm::rows) {
      for (int j = 0; j < 4; ++j) tma_load_3d(b_s + j * kBoxBytes, &p.b_map, t.n0 + 64 * j, r, t.g, full);
    } else {
      tma_load_3d(b_s, &p.b_map, r, t.n0, t.g, full);
    }
  }
}

// weight_grad: zeroes reduction rows [valid, 64) of the stage's six boxes (a row is 128 bytes
// whatever the swizzle), by the 256 consumer threads (tid 0..255).
__device__ inline void zero_reduction_tail(unsigned char* a_s, unsigned char* b_s, int valid, int tid) {
  const int per_box = (64 - valid) * (kBoxRowBytes / 16);
  for (int i = tid; i < 6 * per_box; i += 128 * kConsumers) {
    const int box = i / per_box, rem = i % per_box;
    unsigned char* const base = box < 2 ? a_s + box * kBoxBytes : b_s + (box - 2) * kBoxBytes;
    *reinterpret_cast<uint4*>(base + (valid + rem / 8) * kBoxRowBytes + (rem % 8) * 16) = make_uint4(0, 0, 0, 0);
  }
}

// Stores alpha·acc + beta·old straight from the accumulators: each lane two values of a row
// (the four lanes of a row: 32 contiguous bytes of fp32 dW, 16 of bf16 C).
template <GroupedKernelForm F, class ListAt>
__device__ inline void store_direct(const WgmmaParams<ListAt>& p, const TileCoords& t, const float (&acc)[128], int consumer) {
  constexpr bool kWeightGrad = F == GroupedKernelForm::weight_grad;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = (static_cast<int>(threadIdx.x) / 32) % 4;
  const int row0 = t.m0 + 64 * consumer + 16 * warp + lane / 4;
  const int row_limit = kWeightGrad ? p.k : t.seg_rows;
  const float alpha = p.alpha, beta = p.beta;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = row0 + 8 * half;
    if (r >= row_limit) continue;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int col = t.n0 + 8 * j + 2 * (lane % 4);
      if (col >= p.n) continue;  // n % 8 == 0: col + 1 < n too
      float v0 = alpha * acc[4 * j + 2 * half], v1 = alpha * acc[4 * j + 2 * half + 1];
      if constexpr (kWeightGrad) {
        float* const out = static_cast<float*>(p.c) + int64_t(t.g) * p.c_group_stride + int64_t(r) * p.ldc + col;
        if (beta != 0.f) {
          const float2 old = *reinterpret_cast<const float2*>(out);
          v0 = fmaf(beta, old.x, v0);
          v1 = fmaf(beta, old.y, v1);
        }
        *reinterpret_cast<float2*>(out) = make_float2(v0, v1);
      } else {
        bf16* const out = static_cast<bf16*>(p.c) + int64_t(t.seg0 + r) * p.ldc + col;
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

// Rows forms with beta = 0: C = bf16(alpha·acc) through the consumer's staging block, 64
// columns at a time: each lane writes its bf16 pairs there, then the warpgroup stores whole
// 16-byte pieces of rows (eight lanes a 128-byte row segment) rather than 4-byte pieces from
// registers. The same rounding as store_direct, so the same bits.
template <class ListAt>
__device__ inline void store_staged(const WgmmaParams<ListAt>& p, const TileCoords& t, const float (&acc)[128], int consumer,
                                    unsigned char* staging) {
  const int tid = static_cast<int>(threadIdx.x) % 128;
  const int lane = tid % 32, warp = tid / 32;
  const float alpha = p.alpha;
  const int row_base = t.m0 + 64 * consumer;  // in the segment
#pragma unroll
  for (int chunk = 0; chunk < 4; ++chunk) {  // columns 64·chunk .. of the tile
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      const int j = 8 * chunk + jj;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = 16 * warp + lane / 4 + 8 * half;
        *reinterpret_cast<__nv_bfloat162*>(staging + r * kStagePitch + (8 * jj + 2 * (lane % 4)) * 2) =
            __floats2bfloat162_rn(alpha * acc[4 * j + 2 * half], alpha * acc[4 * j + 2 * half + 1]);
      }
    }
    named_barrier(2 + consumer, 128);
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // 64 rows × 8 pieces of 16 bytes over 128 threads
      const int r = 16 * i + tid / 8, piece = tid % 8;
      const int row = row_base + r, col = t.n0 + 64 * chunk + 8 * piece;
      if (row >= t.seg_rows || col >= p.n) continue;  // n % 8 == 0: a piece is wholly in or out
      *reinterpret_cast<uint4*>(static_cast<bf16*>(p.c) + int64_t(t.seg0 + row) * p.ldc + col) =
          *reinterpret_cast<const uint4*>(staging + r * kStagePitch + piece * 16);
    }
    named_barrier(2 + consumer, 128);  // the block is written again for the next columns
  }
}

template <GroupedKernelForm F, class ListAt>
__global__ void __launch_bounds__(kThreads, 1) grouped_wgmma_kernel(const __grid_constant__ WgmmaParams<ListAt> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  // the swizzled boxes need 1024-byte alignment
  unsigned char* const smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* const empty = full + kStages;
  unsigned char* const staging = smem + kStages * kStageBytes + kBarrierBytes;  // kConsumers blocks
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kEmptyArrivals);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  const int tiles = p.tile_list.list().tiles;
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  if (warpgroup == 0) {  // producer
    warpgroup_registers_decrease<40>();
    if (threadIdx.x != 0) return;
    int stage = 0;
    uint32_t phase = 0;
    for (int round = 0; round * static_cast<int>(gridDim.x) < tiles; ++round) {
      const int tile = round_tile(round, blockIdx.x, gridDim.x);
      if (tile >= tiles) continue;
      const TileCoords t = tile_coords<F>(p, tile);
      for (int step = 0; step < t.steps; ++step) {
        mbarrier_wait(&empty[stage], phase ^ 1);
        mbarrier_arrive_expect_bytes(&full[stage], kStageBytes);
        unsigned char* const a_s = smem + stage * kStageBytes;
        load_stage<F>(p, t, step, a_s, a_s + kABytes, &full[stage]);
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
    }
    return;
  }

  // consumers
  warpgroup_registers_increase<232>();
  const int consumer = warpgroup - 1;
  const int tid = static_cast<int>(threadIdx.x) - 128;
  constexpr int kTransA = F == GroupedKernelForm::weight_grad ? 1 : 0;
  constexpr int kTransB = F == GroupedKernelForm::rows_bt ? 0 : 1;
  int stage = 0, previous = 0;  // the ring slot of this step and of the one before
  uint32_t phase = 0;
  float acc[128];
  for (int round = 0; round * static_cast<int>(gridDim.x) < tiles; ++round) {
    const int tile = round_tile(round, blockIdx.x, gridDim.x);
    if (tile >= tiles) continue;
    const TileCoords t = tile_coords<F>(p, tile);
    for (int step = 0; step < t.steps; ++step) {
      mbarrier_wait(&full[stage], phase);
      unsigned char* const a_s = smem + stage * kStageBytes;
      unsigned char* const b_s = a_s + kABytes;
      if constexpr (F == GroupedKernelForm::weight_grad) {
        const int valid = t.seg_rows - step * kTileK;
        if (valid < kTileK) {  // the same step for both consumers: the barrier pairs up
          zero_reduction_tail(a_s, b_s, valid, tid);
          fence_async_shared();
          named_barrier(1, 128 * kConsumers);
        }
      }
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kTileK / 16; ++ks) {
        // K-major: the next 32 bytes of each row; MN-major: the next 16 rows (2048 bytes)
        const uint64_t da = kTransA ? smem_descriptor(a_s + consumer * kBoxBytes + ks * 2048, kBoxBytes, 1024)
                                    : smem_descriptor(a_s + consumer * kBoxBytes + ks * 32, 16, 1024);
        const uint64_t db = kTransB ? smem_descriptor(b_s + ks * 2048, kBoxBytes, 1024)
                                    : smem_descriptor(b_s + ks * 32, 16, 1024);
        wgmma_m64n256k16<kTransA, kTransB>(acc, da, db, (step | ks) != 0);
      }
      wgmma_commit();
      // one batch stays in flight: once the previous step's MMAs are done, free their stage
      wgmma_wait<1>();
      if (step > 0 && threadIdx.x % 32 == 0) mbarrier_arrive(&empty[previous]);
      previous = stage;
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
    wgmma_wait<0>();
    if (threadIdx.x % 32 == 0) mbarrier_arrive(&empty[previous]);
    if (F != GroupedKernelForm::weight_grad && p.beta == 0.f)
      store_staged(p, t, acc, consumer, staging + consumer * kStagingBytes);
    else
      store_direct<F>(p, t, acc, consumer);
  }
#endif
}

// ---- host side ----

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    MOK_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !fn)
      throw std::runtime_error("grouped_gemm_wgmma: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A bf16 tensor map of `rank` dimensions (innermost first), strides in elements of dimensions
// 1.., a box of `box` elements, 128-byte swizzle, zeros outside.
CUtensorMap bf16_map(const void* base, int rank, const uint64_t* dims, const int64_t* strides, const uint32_t* box) {
  CUtensorMap map;
  cuuint64_t global_dims[3], global_strides[2];
  cuuint32_t box_dims[3], element_strides[3] = {1, 1, 1};
  for (int i = 0; i < rank; ++i) {
    global_dims[i] = dims[i];
    box_dims[i] = box[i];
    if (i > 0) global_strides[i - 1] = cuuint64_t(strides[i - 1]) * sizeof(bf16);
  }
  const CUresult r = tensor_map_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base),
                                          global_dims, global_strides, box_dims, element_strides,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("grouped_gemm_wgmma: cuTensorMapEncodeTiled failed (" + std::to_string(int(r)) + ")");
  return map;
}

template <GroupedKernelForm F, class ListAt>
void launch(const WgmmaParams<ListAt>& p, int grid, cudaStream_t stream) {
  grouped_wgmma_kernel<F, ListAt><<<grid, kThreads, kSmemBytes, stream>>>(p);
  MOK_CUDA_CHECK_LAUNCH();
}

template <class ListAt>
void launch_form(GroupedKernelForm form, const WgmmaParams<ListAt>& p, int grid, cudaStream_t stream) {
  switch (form) {
    case GroupedKernelForm::rows: launch<GroupedKernelForm::rows>(p, grid, stream); return;
    case GroupedKernelForm::rows_bt: launch<GroupedKernelForm::rows_bt>(p, grid, stream); return;
    case GroupedKernelForm::weight_grad: launch<GroupedKernelForm::weight_grad>(p, grid, stream); return;
  }
}

template <GroupedKernelForm F, class ListAt>
void raise_shared_memory_limit() {
  MOK_CUDA_CHECK(cudaFuncSetAttribute(grouped_wgmma_kernel<F, ListAt>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kSmemBytes)));
}

template <class ListAt>
void raise_shared_memory_limits() {
  raise_shared_memory_limit<GroupedKernelForm::rows, ListAt>();
  raise_shared_memory_limit<GroupedKernelForm::rows_bt, ListAt>();
  raise_shared_memory_limit<GroupedKernelForm::weight_grad, ListAt>();
}

int multiprocessors() {
  int device = 0, count = 0;
  MOK_CUDA_CHECK(cudaGetDevice(&device));
  MOK_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

// The call's tensor maps (over M rows) and scalars into the launch argument `p`; everything but
// its list.
template <class ListAt>
void set_operands(const GroupedKernelCall& call, int64_t rows_m, WgmmaParams<ListAt>& p) {
  const bool wg = call.form == GroupedKernelForm::weight_grad;
  p.c = call.c;
  p.ldc = call.ldc;
  p.c_group_stride = call.c_group_stride;
  p.n = static_cast<int>(call.n);
  p.k = static_cast<int>(call.k);
  p.alpha = call.alpha;
  p.beta = call.beta;
  const uint64_t rows = static_cast<uint64_t>(rows_m);
  const uint64_t n = call.n, k = call.k, groups = call.groups;
  if (wg) {
    const uint64_t a_dims[] = {k, rows}, b_dims[] = {n, rows};
    const uint32_t box[] = {64, 64};
    p.a_map = bf16_map(call.a, 2, a_dims, &call.lda, box);
    p.b_map = bf16_map(call.b, 2, b_dims, &call.ldb, box);
  } else {
    const uint64_t a_dims[] = {k, rows};
    const uint32_t a_box[] = {64, kTileM};
    p.a_map = bf16_map(call.a, 2, a_dims, &call.lda, a_box);
    // one group's rows times the row stride when the groups' stride does not matter (1 group)
    const int64_t group_stride =
        call.b_group_stride > 0 ? call.b_group_stride : call.ldb * (call.form == GroupedKernelForm::rows ? k : n);
    const int64_t b_strides[] = {call.ldb, group_stride};
    if (call.form == GroupedKernelForm::rows) {
      const uint64_t b_dims[] = {n, k, groups};
      const uint32_t b_box[] = {64, 64, 1};
      p.b_map = bf16_map(call.b, 3, b_dims, b_strides, b_box);
    } else {
      const uint64_t b_dims[] = {k, n, groups};
      const uint32_t b_box[] = {64, kTileN, 1};
      p.b_map = bf16_map(call.b, 3, b_dims, b_strides, b_box);
    }
  }
}

}  // namespace

bool grouped_wgmma_available() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0 unknown, 1 yes, 2 no
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (device < 0 || device >= kDevices) return false;
  const int k = known[device].load();
  if (k != 0) return k == 1;
  int major = 0, minor = 0;
  bool yes = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
             cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
             major == 9 && minor == 0;
  if (yes) {  // an sm_90a image of the kernel loads on this device
    cudaFuncAttributes attributes{};
    yes = cudaFuncGetAttributes(&attributes, grouped_wgmma_kernel<GroupedKernelForm::rows, TileListInLaunchArgument>) ==
          cudaSuccess;
    if (!yes) (void)cudaGetLastError();
  }
  known[device].store(yes ? 1 : 2);
  return yes;
}

std::string grouped_wgmma_refusal(const GroupedKernelCall& call) {
  if (!grouped_wgmma_available()) return "needs a GPU of compute capability 9.0 (H100/H200) and an sm_90a build";
  if (call.k == 0) return "k = 0";
  if (call.form != GroupedKernelForm::weight_grad && call.groups > 1 && call.b_group_stride == 0)
    return "groups share one B (group stride 0)";
  return "";
}

void grouped_gemm_wgmma(const GroupedKernelCall& call, cudaStream_t stream) {
  const std::string refusal = grouped_wgmma_refusal(call);
  if (!refusal.empty()) throw std::invalid_argument("grouped_gemm_wgmma: " + refusal);
  if (call.groups == 0) return;  // no rows (and maybe no offsets to read)
  if (call.device_offsets) {
    const int64_t bound = grouped_tile_bound(call, kTileM, kTileN);
    if (bound == 0) return;  // M = 0, n = 0, or weight_grad with k = 0
    build_tile_list_on_device(call, kTileM, kTileN, stream);
    WgmmaParams<TileListInDeviceMemory> p;
    set_operands(call, call.rows, p);
    p.tile_list.pointer = call.device_list;
    launch_form(call.form, p, static_cast<int>(std::min<int64_t>(bound, multiprocessors())), stream);
    return;
  }
  WgmmaParams<TileListInLaunchArgument> p;
  fill_tile_list(call, kTileM, kTileN, p.tile_list.value);
  const int tiles = p.tile_list.value.tiles;
  if (tiles == 0) return;
  set_operands(call, call.host_offsets[call.groups], p);
  launch_form(call.form, p, std::min(tiles, multiprocessors()), stream);
}

void grouped_gemm_wgmma_prepare() {
  if (!grouped_wgmma_available()) return;
  raise_shared_memory_limits<TileListInLaunchArgument>();
  raise_shared_memory_limits<TileListInDeviceMemory>();
}

}  // namespace mok::cuda
