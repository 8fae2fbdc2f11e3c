// Causal flash attention backward in bf16 on tensor cores (mma.sync m16n8k16, float
// accumulators), deterministic: every output element is written by one thread block, and
// its sums run in a fixed order. No atomics.
//
//   P = exp(scale·Q·Kᵀ − lse)   dP = dO·Vᵀ   dS = P ∘ (dP − D)   (D = rowsum(dO ∘ O), pre-pass)
//   dV = Pᵀ·dO   dK = scale·dSᵀ·Q   dQ = scale·dS·K
//
// dK/dV kernel: a thread block owns kBlockN keys (each warp 16·kMTiles, K and V kept in
// shared memory) and walks the query tiles that see them, from the diagonal to the end,
// with Q, dO, lse and D tiles double-buffered by cp.async. The warp computes the transposed
// products Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, so Pᵀ and dSᵀ land in registers in the A layout of
// dV += Pᵀ·dO and dK += dSᵀ·Q.
// dQ kernel: a thread block owns kBlockM queries (each warp 16·kMTiles, Q and dO in
// registers) and walks the key tiles they see, from the diagonal down to 0; dS feeds
// dQ += dS·K from registers. It recomputes S and dP (two products more than a kernel that
// adds dQ with atomics would need): the price of a fixed summation order.
// In both, every fragment read from shared memory serves the warp's kMTiles m-tiles: two
// halve the shared-memory traffic per FLOP, the binding limit at one, where registers allow.
#include "kernels/cuda_check.h"
#include "kernels/flash_attention_launch.h"
#include "kernels/flash_attention_tiles.cuh"

#include <cmath>

namespace mok::cuda {
namespace {

using namespace mma;

constexpr float kLog2e = 1.4426950408889634f;

// Where one (batch, head) lives: row 0 of its q, k, v columns in qkv (and dqkv), of its
// columns in dO, and of its lse and D rows.
struct HeadOffsets {
  long long d, ld;  // H·hd, row stride of qkv
  long long q, k, v, o, stat;
};
template <int kHd>
__device__ inline HeadOffsets head_offsets(int bh, int S, int H) {
  const int b = bh / H, h = bh % H;
  HeadOffsets x;
  x.d = static_cast<long long>(H) * kHd;
  x.ld = 3 * x.d;
  x.q = static_cast<long long>(b) * S * x.ld + static_cast<long long>(h) * kHd;
  x.k = x.q + x.d;
  x.v = x.q + 2 * x.d;
  x.o = static_cast<long long>(b) * S * x.d + static_cast<long long>(h) * kHd;
  x.stat = static_cast<long long>(bh) * S;
  return x;
}

// Writes a warp's 16×kHd float accumulator (C layout, times `scale`) as bf16 rows
// [row0, row0 + 16) ∩ [0, S) of dst (row stride ld), staged in the warp's own 16 rows of a
// shared tile so that global stores are whole 16-byte chunks.
template <int kHd>
__device__ inline void store_rows(const float (&acc)[kHd / 8][4], float scale, bf16* stage, bf16* dst,
                                  long long ld, int row0, int S, int lane) {
  constexpr int kLd = kHd + 8, kChunks = kHd / 8;
  const int g = lane / 4, t = lane % 4;
  __syncwarp();
#pragma unroll
  for (int dt = 0; dt < kHd / 8; ++dt) {
    *reinterpret_cast<uint32_t*>(stage + g * kLd + dt * 8 + 2 * t) =
        pack_bf16(acc[dt][0] * scale, acc[dt][1] * scale);
    *reinterpret_cast<uint32_t*>(stage + (g + 8) * kLd + dt * 8 + 2 * t) =
        pack_bf16(acc[dt][2] * scale, acc[dt][3] * scale);
  }
  __syncwarp();
  for (int c = lane; c < 16 * kChunks; c += 32) {
    const int r = c / kChunks, part = c % kChunks;
    if (row0 + r < S)
      *reinterpret_cast<uint4*>(dst + (row0 + r) * ld + part * 8) =
          *reinterpret_cast<const uint4*>(stage + r * kLd + part * 8);
  }
}

template <int kHd, int kWarps, int kMTiles, int kBlockM>
struct DkdvShape {
  static constexpr int kWarpKeys = 16 * kMTiles;       // keys per warp
  static constexpr int kBlockN = kWarpKeys * kWarps;  // keys per thread block
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = kHd + 8;
  // K, V (kBlockN rows each); Q, dO (2 buffers of kBlockM rows each); lse, D (2 × kBlockM floats each).
  static constexpr int kTileBytes = (2 * kBlockN + 4 * kBlockM) * kLd * 2;
  static constexpr int kSmemBytes = kTileBytes + 4 * kBlockM * 4;
};

// Grid (B·H, key blocks), the first key blocks (most query tiles) first.
template <int kHd, int kWarps, int kMTiles, int kBlockM>
__global__ void __launch_bounds__(32 * kWarps, 1)
    flash_backward_dkdv_bf16_kernel(const bf16* qkv, const bf16* d_o, const float* lse, const float* dvec,
                                    int S, int H, bf16* dqkv, float scale, float scale_log2) {
  using Shape = DkdvShape<kHd, kWarps, kMTiles, kBlockM>;
  constexpr int kBlockN = Shape::kBlockN, kWarpKeys = Shape::kWarpKeys, kThreads = Shape::kThreads;
  constexpr int kLd = Shape::kLd;
  constexpr int kKSteps = kHd / 16;         // k-steps of K·Qᵀ, V·dOᵀ
  constexpr int kQueryTiles = kBlockM / 8;  // n-tiles of Sᵀ, dPᵀ
  constexpr int kDimTiles = kHd / 8;        // n-tiles of dK, dV
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sK = reinterpret_cast<bf16*>(smem);  // (kBlockN, kLd)
  bf16* sV = sK + kBlockN * kLd;             // (kBlockN, kLd)
  bf16* sQ = sV + kBlockN * kLd;             // (2, kBlockM, kLd)
  bf16* sG = sQ + 2 * kBlockM * kLd;         // (2, kBlockM, kLd) dO
  float* sLse = reinterpret_cast<float*>(smem + Shape::kTileBytes);  // (2, kBlockM)
  float* sD = sLse + 2 * kBlockM;                                    // (2, kBlockM)

  const int bh = blockIdx.x;
  const HeadOffsets x = head_offsets<kHd>(bh, S, H);
  const int key0 = blockIdx.y * kBlockN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The warp's keys: m-tile mt holds kw0 + 16·mt + g and kw0 + 16·mt + g + 8.
  const int kw0 = key0 + warp * kWarpKeys;

  // Query tile qt into buffer buf: Q and dO rows, lse and D (rows ≥ S as zeros).
  auto load_query_tile = [&](int qt, int buf) {
    const int i0 = qt * kBlockM;
    load_tile_async<kBlockM, kHd, kThreads>(sQ + buf * kBlockM * kLd, qkv + x.q, x.ld, i0, S);
    load_tile_async<kBlockM, kHd, kThreads>(sG + buf * kBlockM * kLd, d_o + x.o, x.d, i0, S);
    if (threadIdx.x < kBlockM) {
      const int i = i0 + threadIdx.x;
      const bool valid = i < S;
      cp_async_4(sLse + buf * kBlockM + threadIdx.x, lse + x.stat + (valid ? i : 0), valid);
      cp_async_4(sD + buf * kBlockM + threadIdx.x, dvec + x.stat + (valid ? i : 0), valid);
    }
  };

  const int first = key0 / kBlockM;  // query tiles before it see none of these keys
  const int n_qtiles = (S + kBlockM - 1) / kBlockM;
  load_tile_async<kBlockN, kHd, kThreads>(sK, qkv + x.k, x.ld, key0, S);
  load_tile_async<kBlockN, kHd, kThreads>(sV, qkv + x.v, x.ld, key0, S);
  load_query_tile(first, 0);
  cp_async_commit();

  float dk[kMTiles][kDimTiles][4] = {}, dv[kMTiles][kDimTiles][4] = {};
  for (int qt = first, it = 0; qt < n_qtiles; ++qt, ++it) {
    const int buf = it % 2;
    if (qt + 1 < n_qtiles) {  // prefetch into the buffer read in iteration it − 1
      load_query_tile(qt + 1, (it + 1) % 2);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int i0 = qt * kBlockM;
    if (kw0 < S && i0 + kBlockM - 1 >= kw0) {  // some query of the tile sees some key of the warp
      const bf16* sQt = sQ + buf * kBlockM * kLd;
      const bf16* sGt = sG + buf * kBlockM * kLd;
      const float* lse_t = sLse + buf * kBlockM;
      const float* d_t = sD + buf * kBlockM;
      // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, (16 keys × kBlockM queries) per m-tile.
      float st[kMTiles][kQueryTiles][4] = {}, dpt[kMTiles][kQueryTiles][4] = {};
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        uint32_t ka[kMTiles][4], va[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          load_a(ka[mt], sK, kLd, warp * kWarpKeys + 16 * mt, ks * 16, lane);
          load_a(va[mt], sV, kLd, warp * kWarpKeys + 16 * mt, ks * 16, lane);
        }
#pragma unroll
        for (int np = 0; np < kQueryTiles / 2; ++np) {
          uint32_t qb[4], gb[4];
          load_b_nk(qb, sQt, kLd, np * 16, ks * 16, lane);
          load_b_nk(gb, sGt, kLd, np * 16, ks * 16, lane);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_bf16(st[mt][2 * np], ka[mt], qb[0], qb[1]);
            mma_bf16(st[mt][2 * np + 1], ka[mt], qb[2], qb[3]);
            mma_bf16(dpt[mt][2 * np], va[mt], gb[0], gb[1]);
            mma_bf16(dpt[mt][2 * np + 1], va[mt], gb[2], gb[3]);
          }
        }
      }
      // Pᵀ into st, dSᵀ into dpt. Masked: a key after the query, or a query row ≥ S
      // (the select drops whatever exp gave there).
      const bool masked = i0 < kw0 + kWarpKeys - 1 || i0 + kBlockM > S;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kQueryTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int qc = nt * 8 + 2 * t + (e & 1);  // query within the tile
            const int key = kw0 + 16 * mt + g + 8 * (e >> 1);
            float p = fast_exp2(st[mt][nt][e] * scale_log2 - lse_t[qc] * kLog2e);
            if (masked && (key > i0 + qc || i0 + qc >= S)) p = 0.f;
            st[mt][nt][e] = p;
            dpt[mt][nt][e] = p * (dpt[mt][nt][e] - d_t[qc]);
          }
        }
      }
      // dV += Pᵀ·dO, dK += dSᵀ·Q; k runs over the tile's queries.
#pragma unroll
      for (int kk = 0; kk < kBlockM / 16; ++kk) {
        uint32_t pa[kMTiles][4], sa[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          pa[mt][0] = pack_bf16(st[mt][2 * kk][0], st[mt][2 * kk][1]);
          pa[mt][1] = pack_bf16(st[mt][2 * kk][2], st[mt][2 * kk][3]);
          pa[mt][2] = pack_bf16(st[mt][2 * kk + 1][0], st[mt][2 * kk + 1][1]);
          pa[mt][3] = pack_bf16(st[mt][2 * kk + 1][2], st[mt][2 * kk + 1][3]);
          sa[mt][0] = pack_bf16(dpt[mt][2 * kk][0], dpt[mt][2 * kk][1]);
          sa[mt][1] = pack_bf16(dpt[mt][2 * kk][2], dpt[mt][2 * kk][3]);
          sa[mt][2] = pack_bf16(dpt[mt][2 * kk + 1][0], dpt[mt][2 * kk + 1][1]);
          sa[mt][3] = pack_bf16(dpt[mt][2 * kk + 1][2], dpt[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < kDimTiles / 2; ++dp) {
          uint32_t gb[4], qb[4];
          load_b_kn(gb, sGt, kLd, kk * 16, dp * 16, lane);
          load_b_kn(qb, sQt, kLd, kk * 16, dp * 16, lane);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_bf16(dv[mt][2 * dp], pa[mt], gb[0], gb[1]);
            mma_bf16(dv[mt][2 * dp + 1], pa[mt], gb[2], gb[3]);
            mma_bf16(dk[mt][2 * dp], sa[mt], qb[0], qb[1]);
            mma_bf16(dk[mt][2 * dp + 1], sa[mt], qb[2], qb[3]);
          }
        }
      }
    }
    __syncthreads();  // buffer `buf` is refilled by the prefetch of the next iteration but one
  }

  if (kw0 >= S) return;
  // Stage in the warp's own rows of sK and sV (read by no other warp).
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    const int r = warp * kWarpKeys + 16 * mt;
    store_rows<kHd>(dk[mt], scale, sK + r * kLd, dqkv + x.k, x.ld, kw0 + 16 * mt, S, lane);
    store_rows<kHd>(dv[mt], 1.f, sV + r * kLd, dqkv + x.v, x.ld, kw0 + 16 * mt, S, lane);
  }
}

template <int kHd, int kWarps, int kMTiles, int kBlockN>
struct DqShape {
  static constexpr int kWarpRows = 16 * kMTiles;       // queries per warp
  static constexpr int kBlockM = kWarpRows * kWarps;  // queries per thread block
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = kHd + 8;
  // Q, dO (kBlockM rows each); K, V (2 buffers of kBlockN rows each).
  static constexpr int kSmemBytes = (2 * kBlockM + 4 * kBlockN) * kLd * 2;
};

// Grid (B·H, query blocks), the longest query blocks first.
template <int kHd, int kWarps, int kMTiles, int kBlockN>
__global__ void __launch_bounds__(32 * kWarps, 1)
    flash_backward_dq_bf16_kernel(const bf16* qkv, const bf16* d_o, const float* lse, const float* dvec,
                                  int S, int H, bf16* dqkv, float scale, float scale_log2) {
  using Shape = DqShape<kHd, kWarps, kMTiles, kBlockN>;
  constexpr int kBlockM = Shape::kBlockM, kWarpRows = Shape::kWarpRows, kThreads = Shape::kThreads;
  constexpr int kLd = Shape::kLd;
  constexpr int kKSteps = kHd / 16;       // k-steps of Q·Kᵀ, dO·Vᵀ
  constexpr int kKeyTiles = kBlockN / 8;  // n-tiles of S, dP
  constexpr int kDimTiles = kHd / 8;      // n-tiles of dQ
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);  // (kBlockM, kLd)
  bf16* sG = sQ + kBlockM * kLd;             // (kBlockM, kLd) dO
  bf16* sK = sG + kBlockM * kLd;             // (2, kBlockN, kLd)
  bf16* sV = sK + 2 * kBlockN * kLd;         // (2, kBlockN, kLd)

  const int bh = blockIdx.x;
  const HeadOffsets x = head_offsets<kHd>(bh, S, H);
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kBlockM;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The warp's queries: m-tile mt holds rows row0 + 16·mt + g and row0 + 16·mt + g + 8.
  const int row0 = q0 + warp * kWarpRows;

  const int n_tiles = (min(S, q0 + kBlockM) - 1) / kBlockN + 1;  // key tiles seen by the block
  load_tile_async<kBlockM, kHd, kThreads>(sQ, qkv + x.q, x.ld, q0, S);
  load_tile_async<kBlockM, kHd, kThreads>(sG, d_o + x.o, x.d, q0, S);
  load_tile_async<kBlockN, kHd, kThreads>(sK, qkv + x.k, x.ld, (n_tiles - 1) * kBlockN, S);
  load_tile_async<kBlockN, kHd, kThreads>(sV, qkv + x.v, x.ld, (n_tiles - 1) * kBlockN, S);
  cp_async_commit();

  const bool warp_has_rows = row0 < S;
  float lse2[kMTiles][2], d_row[kMTiles][2];  // per row: lse in log2 units, D
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + 16 * mt + g + 8 * half;
      lse2[mt][half] = row < S ? lse[x.stat + row] * kLog2e : 0.f;
      d_row[mt][half] = row < S ? dvec[x.stat + row] : 0.f;
    }
  }
  uint32_t qa[kMTiles][kKSteps][4], ga[kMTiles][kKSteps][4];
  float dq[kMTiles][kDimTiles][4] = {};

  for (int it = 0; it < n_tiles; ++it) {
    const int k0 = (n_tiles - 1 - it) * kBlockN, buf = it % 2;
    if (it + 1 < n_tiles) {
      const int next = (it + 1) % 2;
      load_tile_async<kBlockN, kHd, kThreads>(sK + next * kBlockN * kLd, qkv + x.k, x.ld, k0 - kBlockN, S);
      load_tile_async<kBlockN, kHd, kThreads>(sV + next * kBlockN * kLd, qkv + x.v, x.ld, k0 - kBlockN, S);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          load_a(qa[mt][ks], sQ, kLd, warp * kWarpRows + 16 * mt, ks * 16, lane);
          load_a(ga[mt][ks], sG, kLd, warp * kWarpRows + 16 * mt, ks * 16, lane);
        }
      }
    }
    if (warp_has_rows && k0 <= row0 + kWarpRows - 1) {
      const bf16* sKt = sK + buf * kBlockN * kLd;
      const bf16* sVt = sV + buf * kBlockN * kLd;
      // S = Q·Kᵀ and dP = dO·Vᵀ, (16 queries × kBlockN keys) per m-tile.
      float s[kMTiles][kKeyTiles][4] = {}, dp[kMTiles][kKeyTiles][4] = {};
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
        for (int np = 0; np < kKeyTiles / 2; ++np) {
          uint32_t kb[4], vb[4];
          load_b_nk(kb, sKt, kLd, np * 16, ks * 16, lane);
          load_b_nk(vb, sVt, kLd, np * 16, ks * 16, lane);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_bf16(s[mt][2 * np], qa[mt][ks], kb[0], kb[1]);
            mma_bf16(s[mt][2 * np + 1], qa[mt][ks], kb[2], kb[3]);
            mma_bf16(dp[mt][2 * np], ga[mt][ks], vb[0], vb[1]);
            mma_bf16(dp[mt][2 * np + 1], ga[mt][ks], vb[2], vb[3]);
          }
        }
      }
      // dS into s; keys after the query (every key ≥ S for a valid query) get P = 0.
      const bool diagonal = k0 + kBlockN - 1 > row0;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int half = e >> 1;
            float p = fast_exp2(s[mt][nt][e] * scale_log2 - lse2[mt][half]);
            if (diagonal && k0 + nt * 8 + 2 * t + (e & 1) > row0 + 16 * mt + g + 8 * half) p = 0.f;
            s[mt][nt][e] = p * (dp[mt][nt][e] - d_row[mt][half]);
          }
        }
      }
      // dQ += dS·K; k runs over the tile's keys.
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        uint32_t sa[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          sa[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          sa[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          sa[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          sa[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dt = 0; dt < kDimTiles / 2; ++dt) {
          uint32_t kb[4];
          load_b_kn(kb, sKt, kLd, kk * 16, dt * 16, lane);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_bf16(dq[mt][2 * dt], sa[mt], kb[0], kb[1]);
            mma_bf16(dq[mt][2 * dt + 1], sa[mt], kb[2], kb[3]);
          }
        }
      }
    }
    __syncthreads();  // buffer `buf` is refilled by the prefetch of the next iteration but one
  }

  if (!warp_has_rows) return;
  // Stage in the warp's own rows of sQ (read by no other warp).
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
    store_rows<kHd>(dq[mt], scale, sQ + (warp * kWarpRows + 16 * mt) * kLd, dqkv + x.q, x.ld, row0 + 16 * mt, S,
                    lane);
}

template <typename Kernel>
void allow_shared_bytes(Kernel* kernel, int bytes) {
  // Set on every call: the attribute is per device, and a process may drive several.
  MOK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

float softmax_scale(int hd) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))); }

template <int kHd, int kWarps, int kMTiles, int kBlockM>
void launch_dkdv(const bf16* qkv, const bf16* d_o, const float* lse, const float* d, int B, int S, int H,
                 bf16* dqkv, cudaStream_t stream) {
  using Shape = DkdvShape<kHd, kWarps, kMTiles, kBlockM>;
  auto* kernel = flash_backward_dkdv_bf16_kernel<kHd, kWarps, kMTiles, kBlockM>;
  allow_shared_bytes(kernel, Shape::kSmemBytes);
  const dim3 grid(B * H, blocks_for(S, Shape::kBlockN));
  const float scale = softmax_scale(kHd);
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(qkv, d_o, lse, d, S, H, dqkv, scale,
                                                               scale * kLog2e);
  MOK_CUDA_CHECK_LAUNCH();
}

template <int kHd, int kWarps, int kMTiles, int kBlockN>
void launch_dq(const bf16* qkv, const bf16* d_o, const float* lse, const float* d, int B, int S, int H,
               bf16* dqkv, cudaStream_t stream) {
  using Shape = DqShape<kHd, kWarps, kMTiles, kBlockN>;
  auto* kernel = flash_backward_dq_bf16_kernel<kHd, kWarps, kMTiles, kBlockN>;
  allow_shared_bytes(kernel, Shape::kSmemBytes);
  const dim3 grid(B * H, blocks_for(S, Shape::kBlockM));
  const float scale = softmax_scale(kHd);
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(qkv, d_o, lse, d, S, H, dqkv, scale,
                                                               scale * kLog2e);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_flash_backward_dkdv(const bf16* qkv, const bf16* d_o, const float* lse, const float* d,
                                int B, int S, int H, int hd, bf16* dqkv, cudaStream_t stream) {
  // <hd, warps, m-tiles (16 keys) per warp, query tile>: registers hold dK and dV (hd each
  // per m-tile) and Sᵀ, dPᵀ (the query tile each per m-tile): ≤ 255, no spills but 16
  // bytes at hd 64 (a query tile of 16 would avoid them at twice the barriers).
  switch (hd) {
    case 32: launch_dkdv<32, 4, 2, 32>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
    case 64: launch_dkdv<64, 4, 2, 32>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
    default: launch_dkdv<128, 4, 1, 32>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
  }
}

void launch_flash_backward_dq(const bf16* qkv, const bf16* d_o, const float* lse, const float* d,
                              int B, int S, int H, int hd, bf16* dqkv, cudaStream_t stream) {
  // <hd, warps, m-tiles (16 queries) per warp, key tile>: registers hold Q, dO fragments
  // and dQ (hd each per m-tile) and S, dP (the key tile each per m-tile), ≤ 255 without spills.
  switch (hd) {
    case 32: launch_dq<32, 4, 2, 64>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
    case 64: launch_dq<64, 4, 2, 32>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
    default: launch_dq<128, 4, 1, 32>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
  }
}

}  // namespace mok::cuda
