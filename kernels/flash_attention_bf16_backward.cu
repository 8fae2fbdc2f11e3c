// Causal flash attention backward in bf16 on tensor cores (mma.sync m16n8k16, float
// accumulators), deterministic: every output element is written by one thread block, and
// its sums run in a fixed order. No atomics.
//
//   P = exp(scale·Q·Kᵀ − lse)   dP = dO·Vᵀ   dS = P ∘ (dP − D)   (D = rowsum(dO ∘ O), pre-pass)
//   dV = Pᵀ·dO   dK = scale·dSᵀ·Q   dQ = scale·dS·K
//
// dK/dV kernel: a thread block owns kBlockN = 16·kWarps keys (each warp 16, K and V kept in
// shared memory) and walks the query tiles that see them, from the diagonal to the end,
// with Q, dO, lse and D tiles double-buffered by cp.async. The warp computes the transposed
// products Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, so Pᵀ and dSᵀ land in registers in the A layout of
// dV += Pᵀ·dO and dK += dSᵀ·Q.
// dQ kernel: a thread block owns kBlockM = 16·kWarps queries (each warp 16, Q and dO in
// registers) and walks the key tiles they see, from the diagonal down to 0; dS feeds
// dQ += dS·K from registers. It recomputes S and dP (two products more than a kernel that
// adds dQ with atomics would need): the price of a fixed summation order.
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
      *reinterpret_cast<uint4*>(dst + (row0 + r) * ld + part * 8) = *reinterpret_cast<const uint4*>(stage + r * kLd + part * 8);
  }
}

template <int kHd, int kWarps, int kBlockM>
struct DkdvShape {
  static constexpr int kBlockN = 16 * kWarps;  // keys per thread block
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = kHd + 8;
  // K, V (kBlockN rows each); Q, dO (2 buffers of kBlockM rows each); lse, D (2 × kBlockM floats each).
  static constexpr int kTileBytes = (2 * kBlockN + 4 * kBlockM) * kLd * 2;
  static constexpr int kSmemBytes = kTileBytes + 4 * kBlockM * 4;
};

// Grid (B·H, key blocks), the first key blocks (most query tiles) first.
template <int kHd, int kWarps, int kBlockM>
__global__ void __launch_bounds__(32 * kWarps, 1)
    flash_backward_dkdv_bf16_kernel(const bf16* qkv, const bf16* d_o, const float* lse, const float* dvec,
                                    int S, int H, bf16* dqkv, float scale, float scale_log2) {
  using Shape = DkdvShape<kHd, kWarps, kBlockM>;
  constexpr int kBlockN = Shape::kBlockN, kThreads = Shape::kThreads, kLd = Shape::kLd;
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
  const int kw0 = key0 + warp * 16;  // the warp's keys: kw0 + g and kw0 + g + 8

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

  const int first = key0 / kBlockM;                  // query tiles before it see none of these keys
  const int n_qtiles = (S + kBlockM - 1) / kBlockM;
  load_tile_async<kBlockN, kHd, kThreads>(sK, qkv + x.k, x.ld, key0, S);
  load_tile_async<kBlockN, kHd, kThreads>(sV, qkv + x.v, x.ld, key0, S);
  load_query_tile(first, 0);
  cp_async_commit();

  float dk[kDimTiles][4] = {}, dv[kDimTiles][4] = {};
  for (int qt = first, it = 0; qt < n_qtiles; ++qt, ++it) {
    const int buf = it % 2;
    if (qt + 1 < n_qtiles) {  // prefetch into the buffer freed at the end of it − 1
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
      // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, (16 keys × kBlockM queries) each.
      float st[kQueryTiles][4] = {}, dpt[kQueryTiles][4] = {};
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        uint32_t ka[4], va[4];
        load_a(ka, sK, kLd, warp * 16, ks * 16, lane);
        load_a(va, sV, kLd, warp * 16, ks * 16, lane);
#pragma unroll
        for (int np = 0; np < kQueryTiles / 2; ++np) {
          uint32_t qb[4], gb[4];
          load_b_nk(qb, sQt, kLd, np * 16, ks * 16, lane);
          load_b_nk(gb, sGt, kLd, np * 16, ks * 16, lane);
          mma_bf16(st[2 * np], ka, qb[0], qb[1]);
          mma_bf16(st[2 * np + 1], ka, qb[2], qb[3]);
          mma_bf16(dpt[2 * np], va, gb[0], gb[1]);
          mma_bf16(dpt[2 * np + 1], va, gb[2], gb[3]);
        }
      }
      // Pᵀ into st, dSᵀ into dpt. Masked: a key after the query, or a query row ≥ S
      // (the select drops whatever exp gave there).
      const bool masked = i0 < kw0 + 15 || i0 + kBlockM > S;
#pragma unroll
      for (int nt = 0; nt < kQueryTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int qc = nt * 8 + 2 * t + (e & 1);  // query within the tile
          const int key = kw0 + g + 8 * (e >> 1);
          float p = fast_exp2(st[nt][e] * scale_log2 - lse_t[qc] * kLog2e);
          if (masked && (key > i0 + qc || i0 + qc >= S)) p = 0.f;
          st[nt][e] = p;
          dpt[nt][e] = p * (dpt[nt][e] - d_t[qc]);
        }
      }
      // dV += Pᵀ·dO, dK += dSᵀ·Q; k runs over the tile's queries.
#pragma unroll
      for (int kk = 0; kk < kBlockM / 16; ++kk) {
        const uint32_t pa[4] = {pack_bf16(st[2 * kk][0], st[2 * kk][1]), pack_bf16(st[2 * kk][2], st[2 * kk][3]),
                                pack_bf16(st[2 * kk + 1][0], st[2 * kk + 1][1]),
                                pack_bf16(st[2 * kk + 1][2], st[2 * kk + 1][3])};
        const uint32_t sa[4] = {pack_bf16(dpt[2 * kk][0], dpt[2 * kk][1]), pack_bf16(dpt[2 * kk][2], dpt[2 * kk][3]),
                                pack_bf16(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]),
                                pack_bf16(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3])};
#pragma unroll
        for (int dp = 0; dp < kDimTiles / 2; ++dp) {
          uint32_t gb[4], qb[4];
          load_b_kn(gb, sGt, kLd, kk * 16, dp * 16, lane);
          load_b_kn(qb, sQt, kLd, kk * 16, dp * 16, lane);
          mma_bf16(dv[2 * dp], pa, gb[0], gb[1]);
          mma_bf16(dv[2 * dp + 1], pa, gb[2], gb[3]);
          mma_bf16(dk[2 * dp], sa, qb[0], qb[1]);
          mma_bf16(dk[2 * dp + 1], sa, qb[2], qb[3]);
        }
      }
    }
    __syncthreads();  // buffer `buf` is refilled by the prefetch of the next iteration but one
  }

  if (kw0 >= S) return;
  // Stage in the warp's own rows of sK and sV (read by no other warp).
  store_rows<kHd>(dk, scale, sK + warp * 16 * kLd, dqkv + x.k, x.ld, kw0, S, lane);
  store_rows<kHd>(dv, 1.f, sV + warp * 16 * kLd, dqkv + x.v, x.ld, kw0, S, lane);
}

template <int kHd, int kWarps, int kBlockN>
struct DqShape {
  static constexpr int kBlockM = 16 * kWarps;  // queries per thread block
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = kHd + 8;
  // Q, dO (kBlockM rows each); K, V (2 buffers of kBlockN rows each).
  static constexpr int kSmemBytes = (2 * kBlockM + 4 * kBlockN) * kLd * 2;
};

// Grid (B·H, query blocks), the longest query blocks first.
template <int kHd, int kWarps, int kBlockN>
__global__ void __launch_bounds__(32 * kWarps, 1)
    flash_backward_dq_bf16_kernel(const bf16* qkv, const bf16* d_o, const float* lse, const float* dvec,
                                  int S, int H, bf16* dqkv, float scale, float scale_log2) {
  using Shape = DqShape<kHd, kWarps, kBlockN>;
  constexpr int kBlockM = Shape::kBlockM, kThreads = Shape::kThreads, kLd = Shape::kLd;
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
  const int row0 = q0 + warp * 16;  // the warp's queries: row0 + g and row0 + g + 8

  const int n_tiles = (min(S, q0 + kBlockM) - 1) / kBlockN + 1;  // key tiles seen by the block
  load_tile_async<kBlockM, kHd, kThreads>(sQ, qkv + x.q, x.ld, q0, S);
  load_tile_async<kBlockM, kHd, kThreads>(sG, d_o + x.o, x.d, q0, S);
  load_tile_async<kBlockN, kHd, kThreads>(sK, qkv + x.k, x.ld, (n_tiles - 1) * kBlockN, S);
  load_tile_async<kBlockN, kHd, kThreads>(sV, qkv + x.v, x.ld, (n_tiles - 1) * kBlockN, S);
  cp_async_commit();

  const bool warp_has_rows = row0 < S;
  float lse2[2], d_row[2];  // rows g, g + 8: lse in log2 units, D
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + g + 8 * half;
    lse2[half] = row < S ? lse[x.stat + row] * kLog2e : 0.f;
    d_row[half] = row < S ? dvec[x.stat + row] : 0.f;
  }
  uint32_t qa[kKSteps][4], ga[kKSteps][4];
  float dq[kDimTiles][4] = {};

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
      for (int ks = 0; ks < kKSteps; ++ks) {
        load_a(qa[ks], sQ, kLd, warp * 16, ks * 16, lane);
        load_a(ga[ks], sG, kLd, warp * 16, ks * 16, lane);
      }
    }
    if (warp_has_rows && k0 <= row0 + 15) {
      const bf16* sKt = sK + buf * kBlockN * kLd;
      const bf16* sVt = sV + buf * kBlockN * kLd;
      // S = Q·Kᵀ and dP = dO·Vᵀ, (16 queries × kBlockN keys) each.
      float s[kKeyTiles][4] = {}, dp[kKeyTiles][4] = {};
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
        for (int np = 0; np < kKeyTiles / 2; ++np) {
          uint32_t kb[4], vb[4];
          load_b_nk(kb, sKt, kLd, np * 16, ks * 16, lane);
          load_b_nk(vb, sVt, kLd, np * 16, ks * 16, lane);
          mma_bf16(s[2 * np], qa[ks], kb[0], kb[1]);
          mma_bf16(s[2 * np + 1], qa[ks], kb[2], kb[3]);
          mma_bf16(dp[2 * np], ga[ks], vb[0], vb[1]);
          mma_bf16(dp[2 * np + 1], ga[ks], vb[2], vb[3]);
        }
      }
      // dS into s; keys after the query (every key ≥ S for a valid query) get P = 0.
      const bool diagonal = k0 + kBlockN - 1 > row0;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int half = e >> 1;
          float p = fast_exp2(s[nt][e] * scale_log2 - lse2[half]);
          if (diagonal && k0 + nt * 8 + 2 * t + (e & 1) > row0 + g + 8 * half) p = 0.f;
          s[nt][e] = p * (dp[nt][e] - d_row[half]);
        }
      }
      // dQ += dS·K; k runs over the tile's keys.
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        const uint32_t sa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dt = 0; dt < kDimTiles / 2; ++dt) {
          uint32_t kb[4];
          load_b_kn(kb, sKt, kLd, kk * 16, dt * 16, lane);
          mma_bf16(dq[2 * dt], sa, kb[0], kb[1]);
          mma_bf16(dq[2 * dt + 1], sa, kb[2], kb[3]);
        }
      }
    }
    __syncthreads();  // buffer `buf` is refilled by the prefetch of the next iteration but one
  }

  if (!warp_has_rows) return;
  // Stage in the warp's own rows of sQ (read by no other warp).
  store_rows<kHd>(dq, scale, sQ + warp * 16 * kLd, dqkv + x.q, x.ld, row0, S, lane);
}

template <typename Kernel>
void allow_shared_bytes(Kernel* kernel, int bytes) {
  // Set on every call: the attribute is per device, and a process may drive several.
  MOK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

float softmax_scale(int hd) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))); }

template <int kHd, int kWarps, int kBlockM>
void launch_dkdv(const bf16* qkv, const bf16* d_o, const float* lse, const float* d, int B, int S, int H,
                 bf16* dqkv, cudaStream_t stream) {
  using Shape = DkdvShape<kHd, kWarps, kBlockM>;
  auto* kernel = flash_backward_dkdv_bf16_kernel<kHd, kWarps, kBlockM>;
  allow_shared_bytes(kernel, Shape::kSmemBytes);
  const dim3 grid(B * H, blocks_for(S, Shape::kBlockN));
  const float scale = softmax_scale(kHd);
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(qkv, d_o, lse, d, S, H, dqkv, scale,
                                                               scale * kLog2e);
  MOK_CUDA_CHECK_LAUNCH();
}

template <int kHd, int kWarps, int kBlockN>
void launch_dq(const bf16* qkv, const bf16* d_o, const float* lse, const float* d, int B, int S, int H,
               bf16* dqkv, cudaStream_t stream) {
  using Shape = DqShape<kHd, kWarps, kBlockN>;
  auto* kernel = flash_backward_dq_bf16_kernel<kHd, kWarps, kBlockN>;
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
  switch (hd) {
    case 32: launch_dkdv<32, 4, 64>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
    case 64: launch_dkdv<64, 4, 64>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
    default: launch_dkdv<128, 4, 32>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
  }
}

void launch_flash_backward_dq(const bf16* qkv, const bf16* d_o, const float* lse, const float* d,
                              int B, int S, int H, int hd, bf16* dqkv, cudaStream_t stream) {
  switch (hd) {
    case 32: launch_dq<32, 4, 64>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
    case 64: launch_dq<64, 4, 64>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
    default: launch_dq<128, 4, 32>(qkv, d_o, lse, d, B, S, H, dqkv, stream); break;
  }
}

}  // namespace mok::cuda
