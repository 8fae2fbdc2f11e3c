// Causal flash attention forward in bf16 on tensor cores (mma.sync m16n8k16, float
// accumulators), FlashAttention-2 style: a thread block owns kBlockM queries of one
// (batch, head), each warp 16·kMTiles of them with Q in registers; key and value tiles of
// kBlockN rows are double-buffered in shared memory by cp.async. Every K and V fragment read
// from shared memory serves the warp's kMTiles m-tiles: two halve the shared-memory traffic
// per FLOP, the binding limit at one. Per tile a warp forms S = Q·Kᵀ (16·kMTiles × kBlockN,
// float), masks keys after the query, updates the running max and sum of exp in log2 units
// (scores times scale·log2 e, exp2 on the special-function unit), rescales O and adds P·V
// with P rounded to bf16 straight from the score registers.
// Key tiles run from the diagonal down to tile 0, so the masked ones come first; a warp
// skips a tile whose keys all follow its queries.
#include "kernels/cuda_check.h"
#include "kernels/flash_attention_launch.h"
#include "kernels/flash_attention_tiles.cuh"

#include <cmath>

namespace mok::cuda {
namespace {

using namespace mma;

constexpr float kLn2 = 0.6931471805599453f;
constexpr float kLog2e = 1.4426950408889634f;

template <int kHd, int kWarps, int kMTiles, int kBlockN>
struct ForwardShape {
  static constexpr int kWarpRows = 16 * kMTiles;       // queries per warp
  static constexpr int kBlockM = kWarpRows * kWarps;  // queries per thread block
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = kHd + 8;  // shared row, bf16 (padded)
  // Q (kBlockM rows), K and V (2 buffers of kBlockN rows each).
  static constexpr int kSmemBytes = (kBlockM + 4 * kBlockN) * kLd * 2;
};

// Grid (B·H, query blocks), the longest query blocks (most key tiles) first.
template <int kHd, int kWarps, int kMTiles, int kBlockN>
__global__ void __launch_bounds__(32 * kWarps, 1)
    flash_forward_bf16_kernel(const bf16* qkv, int S, int H, bf16* o, float* lse, float scale_log2) {
  using Shape = ForwardShape<kHd, kWarps, kMTiles, kBlockN>;
  constexpr int kBlockM = Shape::kBlockM, kWarpRows = Shape::kWarpRows, kThreads = Shape::kThreads;
  constexpr int kLd = Shape::kLd;
  constexpr int kKSteps = kHd / 16;       // k-steps of Q·Kᵀ
  constexpr int kDimTiles = kHd / 8;      // n-tiles of O
  constexpr int kKeyTiles = kBlockN / 8;  // n-tiles of S
  constexpr int kChunks = kHd / 8;        // 16-byte chunks per row
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);  // (kBlockM, kLd)
  bf16* sK = sQ + kBlockM * kLd;             // (2, kBlockN, kLd)
  bf16* sV = sK + 2 * kBlockN * kLd;         // (2, kBlockN, kLd)

  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kBlockM;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The warp's queries: m-tile mt holds rows row0 + 16·mt + g and row0 + 16·mt + g + 8.
  const int row0 = q0 + warp * kWarpRows;
  const long long d = static_cast<long long>(H) * kHd, ld = 3 * d;
  const bf16* q_src = qkv + static_cast<long long>(b) * S * ld + static_cast<long long>(h) * kHd;
  const bf16* k_src = q_src + d;
  const bf16* v_src = q_src + 2 * d;

  const int n_tiles = (min(S, q0 + kBlockM) - 1) / kBlockN + 1;  // key tiles seen by the block
  load_tile_async<kBlockM, kHd, kThreads>(sQ, q_src, ld, q0, S);
  load_tile_async<kBlockN, kHd, kThreads>(sK, k_src, ld, (n_tiles - 1) * kBlockN, S);
  load_tile_async<kBlockN, kHd, kThreads>(sV, v_src, ld, (n_tiles - 1) * kBlockN, S);
  cp_async_commit();

  const bool warp_has_rows = row0 < S;
  uint32_t qa[kMTiles][kKSteps][4];
  float acc[kMTiles][kDimTiles][4] = {};
  // Per row (g, g + 8 of each m-tile): running max in log2 units, this lane's part of the sum of exp.
  float m_run[kMTiles][2], l_run[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    m_run[mt][0] = m_run[mt][1] = -INFINITY;
    l_run[mt][0] = l_run[mt][1] = 0.f;
  }

  for (int it = 0; it < n_tiles; ++it) {
    const int k0 = (n_tiles - 1 - it) * kBlockN, buf = it % 2;
    if (it + 1 < n_tiles) {  // prefetch the next tile into the buffer read in iteration it − 1
      const int next = (it + 1) % 2;
      load_tile_async<kBlockN, kHd, kThreads>(sK + next * kBlockN * kLd, k_src, ld, k0 - kBlockN, S);
      load_tile_async<kBlockN, kHd, kThreads>(sV + next * kBlockN * kLd, v_src, ld, k0 - kBlockN, S);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) load_a(qa[mt][ks], sQ, kLd, warp * kWarpRows + 16 * mt, ks * 16, lane);
    }
    if (warp_has_rows && k0 <= row0 + kWarpRows - 1) {
      const bf16* sKt = sK + buf * kBlockN * kLd;
      const bf16* sVt = sV + buf * kBlockN * kLd;
      // S = Q·Kᵀ: each K fragment serves every m-tile of the warp.
      float s[kMTiles][kKeyTiles][4] = {};
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
        for (int np = 0; np < kKeyTiles / 2; ++np) {
          uint32_t kb[4];
          load_b_nk(kb, sKt, kLd, np * 16, ks * 16, lane);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_bf16(s[mt][2 * np], qa[mt][ks], kb[0], kb[1]);
            mma_bf16(s[mt][2 * np + 1], qa[mt][ks], kb[2], kb[3]);
          }
        }
      }
      // Log2 units; keys after the query (and so every key ≥ S for a valid query) → −inf.
      const bool diagonal = k0 + kBlockN - 1 > row0;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float x = s[mt][nt][e] * scale_log2;
            if (diagonal && k0 + nt * 8 + 2 * t + (e & 1) > row0 + 16 * mt + g + 8 * (e >> 1)) x = -INFINITY;
            s[mt][nt][e] = x;
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // row g (elements 0, 1), row g + 8 (elements 2, 3)
          float mx = -INFINITY;
#pragma unroll
          for (int nt = 0; nt < kKeyTiles; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * half], s[mt][nt][2 * half + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the 4 lanes of a row
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float m_new = fmaxf(m_run[mt][half], mx);
          const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet stays 0
          const float rescale = fast_exp2(m_run[mt][half] - m_use);
          m_run[mt][half] = m_new;
          float sum = 0.f;
#pragma unroll
          for (int nt = 0; nt < kKeyTiles; ++nt) {
            const float p0 = fast_exp2(s[mt][nt][2 * half] - m_use);
            const float p1 = fast_exp2(s[mt][nt][2 * half + 1] - m_use);
            s[mt][nt][2 * half] = p0;
            s[mt][nt][2 * half + 1] = p1;
            sum += p0 + p1;
          }
          l_run[mt][half] = l_run[mt][half] * rescale + sum;
#pragma unroll
          for (int dt = 0; dt < kDimTiles; ++dt) {
            acc[mt][dt][2 * half] *= rescale;
            acc[mt][dt][2 * half + 1] *= rescale;
          }
        }
      }
      // O += P·V: the score registers of n-tiles 2kk, 2kk+1 are the A fragment of k-step kk;
      // each V fragment serves every m-tile.
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        uint32_t pa[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          pa[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          pa[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          pa[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          pa[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < kDimTiles / 2; ++dp) {
          uint32_t vb[4];
          load_b_kn(vb, sVt, kLd, kk * 16, dp * 16, lane);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_bf16(acc[mt][2 * dp], pa[mt], vb[0], vb[1]);
            mma_bf16(acc[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
          }
        }
      }
    }
    __syncthreads();  // buffer `buf` is refilled by the prefetch of the next iteration but one
  }

  if (!warp_has_rows) return;
  // Normalise, stage the warp's rows of O in its own rows of sQ (no other warp reads them),
  // then store whole 16-byte chunks.
  bf16* stage = sQ + warp * kWarpRows * kLd;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    float inv[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float l = l_run[mt][half];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv[half] = 1.f / l;  // l ≥ 1 (the row's largest term is exp2(0)); rows ≥ S are not stored
      const int row = row0 + 16 * mt + g + 8 * half;
      if (lse && t == 0 && row < S)
        lse[static_cast<long long>(bh) * S + row] = (m_run[mt][half] + log2f(l)) * kLn2;
    }
#pragma unroll
    for (int dt = 0; dt < kDimTiles; ++dt) {
      *reinterpret_cast<uint32_t*>(stage + (16 * mt + g) * kLd + dt * 8 + 2 * t) =
          pack_bf16(acc[mt][dt][0] * inv[0], acc[mt][dt][1] * inv[0]);
      *reinterpret_cast<uint32_t*>(stage + (16 * mt + g + 8) * kLd + dt * 8 + 2 * t) =
          pack_bf16(acc[mt][dt][2] * inv[1], acc[mt][dt][3] * inv[1]);
    }
  }
  __syncwarp();
  bf16* o_dst = o + static_cast<long long>(b) * S * d + static_cast<long long>(h) * kHd;
  for (int c = lane; c < kWarpRows * kChunks; c += 32) {
    const int r = c / kChunks, part = c % kChunks;
    if (row0 + r < S)
      *reinterpret_cast<uint4*>(o_dst + (row0 + r) * d + part * 8) =
          *reinterpret_cast<const uint4*>(stage + r * kLd + part * 8);
  }
}

template <int kHd, int kWarps, int kMTiles, int kBlockN>
void launch_forward(const bf16* qkv, int B, int S, int H, bf16* o, float* lse, cudaStream_t stream) {
  using Shape = ForwardShape<kHd, kWarps, kMTiles, kBlockN>;
  auto* kernel = flash_forward_bf16_kernel<kHd, kWarps, kMTiles, kBlockN>;
  // Set on every call: the attribute is per device, and a process may drive several.
  MOK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes));
  const dim3 grid(B * H, blocks_for(S, Shape::kBlockM));
  const float scale_log2 = static_cast<float>(kLog2e / std::sqrt(static_cast<double>(kHd)));
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(qkv, S, H, o, lse, scale_log2);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_flash_forward(const bf16* qkv, int B, int S, int H, int hd, bf16* o, float* lse,
                          cudaStream_t stream) {
  switch (hd) {
    // <hd, warps, m-tiles per warp, key tile>: 32 queries per warp where the registers
    // allow (hd 32, 64: ≤ 255, no spills), 16 at hd 128 (O alone takes 64 registers per m-tile).
    case 32: launch_forward<32, 4, 2, 64>(qkv, B, S, H, o, lse, stream); break;
    case 64: launch_forward<64, 4, 2, 64>(qkv, B, S, H, o, lse, stream); break;
    default: launch_forward<128, 4, 1, 64>(qkv, B, S, H, o, lse, stream); break;
  }
}

}  // namespace mok::cuda
