// Causal flash attention in float on SIMT cores: the parity path with the CPU core
// (core/backend/causal_attention.cpp), same arithmetic in float: scores scale·(q·k), an
// online softmax over key tiles with expf, D = rowsum(dO ∘ O) from the pre-pass.
//
// Every thread block owns 64 rows (queries for forward and dQ, keys for dK/dV); 4 threads
// share a row, thread r holding dims r, r+4, r+8, … of it in registers, and a dot product is
// their partial sums added in a fixed butterfly. Tiles of 32 keys (or queries) are staged in
// shared memory, where all 4·8 threads of a warp read the same row: broadcast, no conflicts.
#include "kernels/cuda_check.h"
#include "kernels/flash_attention_launch.h"

#include <cmath>

namespace mok::cuda {
namespace {

constexpr int kRowsPerBlock = 64;
constexpr int kLanesPerRow = 4;
constexpr int kThreads = kRowsPerBlock * kLanesPerRow;  // 256
constexpr int kTile = 32;                               // rows per shared-memory tile

// Sum over the 4 lanes of a row; every lane gets the same bits (commutative pairs).
__device__ inline float row_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// Rows [r0, r0 + kTile) of one head (src: row 0 of the head's columns, row stride ld) into
// a (kTile, kHd) shared tile; rows ≥ S read as zeros.
template <int kHd>
__device__ inline void load_tile(float* dst, const float* src, long long ld, int r0, int S) {
  constexpr int kVecs = kHd / 4;  // float4 per row
  for (int c = threadIdx.x; c < kTile * kVecs; c += kThreads) {
    const int r = c / kVecs, v = c % kVecs;
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r0 + r < S) x = *reinterpret_cast<const float4*>(src + static_cast<long long>(r0 + r) * ld + 4 * v);
    *reinterpret_cast<float4*>(dst + r * kHd + 4 * v) = x;
  }
}

// Where one (batch, head) lives: row 0 of its q, k, v columns in qkv and of its columns in
// (B·S, H·hd) tensors (o, dO).
struct HeadColumns {
  long long ld_qkv, ld_o;
  long long q, k, v, o;  // element offsets
};
template <int kHd>
__device__ inline HeadColumns head_columns(int b, int h, int S, int H) {
  HeadColumns c;
  const long long d = static_cast<long long>(H) * kHd;
  c.ld_qkv = 3 * d;
  c.ld_o = d;
  c.q = static_cast<long long>(b) * S * c.ld_qkv + static_cast<long long>(h) * kHd;
  c.k = c.q + d;
  c.v = c.q + 2 * d;
  c.o = static_cast<long long>(b) * S * d + static_cast<long long>(h) * kHd;
  return c;
}

// Grid (B·H, query blocks), the longest query blocks (most keys) first.
template <int kHd>
__global__ void __launch_bounds__(kThreads)
    flash_forward_fp32_kernel(const float* qkv, int S, int H, float* o, float* lse, float scale) {
  constexpr int kPer = kHd / kLanesPerRow;
  __shared__ float sK[kTile * kHd], sV[kTile * kHd];
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRowsPerBlock;
  const int i = q0 + threadIdx.x / kLanesPerRow, r = threadIdx.x % kLanesPerRow;
  const HeadColumns col = head_columns<kHd>(b, h, S, H);

  float q[kPer], acc[kPer];
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    q[e] = i < S ? qkv[col.q + i * col.ld_qkv + 4 * e + r] : 0.f;
    acc[e] = 0.f;
  }
  float m = -INFINITY, l = 0.f;  // running max and (lane-identical) sum of exp
  const int n_keys = min(S, q0 + kRowsPerBlock);
  for (int k0 = 0; k0 < n_keys; k0 += kTile) {
    load_tile<kHd>(sK, qkv + col.k, col.ld_qkv, k0, S);
    load_tile<kHd>(sV, qkv + col.v, col.ld_qkv, k0, S);
    __syncthreads();
    float s[kTile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      float part = 0.f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) part += q[e] * sK[j * kHd + 4 * e + r];
      const float dot = row_sum(part);  // every lane, masked or not (shuffles)
      s[j] = k0 + j <= i ? scale * dot : -INFINITY;
      tile_max = fmaxf(tile_max, s[j]);
    }
    const float m_new = fmaxf(m, tile_max);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet stays 0
    const float rescale = expf(m - m_use);
    l *= rescale;
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[e] *= rescale;
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      const float p = expf(s[j] - m_use);
      l += p;
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[e] += p * sV[j * kHd + 4 * e + r];
    }
    m = m_new;
    __syncthreads();  // before the next tile overwrites sK, sV
  }
  if (i < S) {
#pragma unroll
    for (int e = 0; e < kPer; ++e) o[col.o + i * col.ld_o + 4 * e + r] = acc[e] / l;
    if (lse && r == 0) lse[static_cast<long long>(bh) * S + i] = m + logf(l);
  }
}

// dQ_i = scale · Σ_{j ≤ i} p_ij·(dO_i·v_j − D_i)·k_j, p_ij = exp(scale·q_i·k_j − lse_i).
template <int kHd>
__global__ void __launch_bounds__(kThreads)
    flash_backward_dq_fp32_kernel(const float* qkv, const float* d_o, const float* lse, const float* dvec,
                                  int S, int H, float* dqkv, float scale) {
  constexpr int kPer = kHd / kLanesPerRow;
  __shared__ float sK[kTile * kHd], sV[kTile * kHd];
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRowsPerBlock;
  const int i = q0 + threadIdx.x / kLanesPerRow, r = threadIdx.x % kLanesPerRow;
  const HeadColumns col = head_columns<kHd>(b, h, S, H);

  float q[kPer], g[kPer], dq[kPer];  // g: dO row
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    q[e] = i < S ? qkv[col.q + i * col.ld_qkv + 4 * e + r] : 0.f;
    g[e] = i < S ? d_o[col.o + i * col.ld_o + 4 * e + r] : 0.f;
    dq[e] = 0.f;
  }
  const float lse_i = i < S ? lse[static_cast<long long>(bh) * S + i] : 0.f;
  const float d_i = i < S ? dvec[static_cast<long long>(bh) * S + i] : 0.f;
  const int n_keys = min(S, q0 + kRowsPerBlock);
  for (int k0 = 0; k0 < n_keys; k0 += kTile) {
    load_tile<kHd>(sK, qkv + col.k, col.ld_qkv, k0, S);
    load_tile<kHd>(sV, qkv + col.v, col.ld_qkv, k0, S);
    __syncthreads();
#pragma unroll 4
    for (int j = 0; j < kTile; ++j) {
      float qk = 0.f, gv = 0.f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        qk += q[e] * sK[j * kHd + 4 * e + r];
        gv += g[e] * sV[j * kHd + 4 * e + r];
      }
      qk = row_sum(qk);
      gv = row_sum(gv);
      const float p = expf(scale * qk - lse_i);
      const float ds = k0 + j <= i ? p * (gv - d_i) : 0.f;  // a select: masked p may be inf
#pragma unroll
      for (int e = 0; e < kPer; ++e) dq[e] += ds * sK[j * kHd + 4 * e + r];
    }
    __syncthreads();
  }
  if (i < S) {
#pragma unroll
    for (int e = 0; e < kPer; ++e) dqkv[col.q + i * col.ld_qkv + 4 * e + r] = scale * dq[e];
  }
}

// dV_j = Σ_{i ≥ j} p_ij·dO_i;  dK_j = scale · Σ_{i ≥ j} p_ij·(dO_i·v_j − D_i)·q_i.
// Grid (B·H, key blocks), the first key blocks (most queries) first.
template <int kHd>
__global__ void __launch_bounds__(kThreads)
    flash_backward_dkdv_fp32_kernel(const float* qkv, const float* d_o, const float* lse,
                                    const float* dvec, int S, int H, float* dqkv, float scale) {
  constexpr int kPer = kHd / kLanesPerRow;
  __shared__ float sQ[kTile * kHd], sG[kTile * kHd], sLse[kTile], sD[kTile];
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int key0 = blockIdx.y * kRowsPerBlock;
  const int j = key0 + threadIdx.x / kLanesPerRow, r = threadIdx.x % kLanesPerRow;
  const HeadColumns col = head_columns<kHd>(b, h, S, H);

  float k[kPer], v[kPer], dk[kPer], dv[kPer];
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    k[e] = j < S ? qkv[col.k + j * col.ld_qkv + 4 * e + r] : 0.f;
    v[e] = j < S ? qkv[col.v + j * col.ld_qkv + 4 * e + r] : 0.f;
    dk[e] = dv[e] = 0.f;
  }
  const long long stat0 = static_cast<long long>(bh) * S;  // lse, D of this head
  for (int i0 = key0 / kTile * kTile; i0 < S; i0 += kTile) {  // queries before key0 see none
    load_tile<kHd>(sQ, qkv + col.q, col.ld_qkv, i0, S);
    load_tile<kHd>(sG, d_o + col.o, col.ld_o, i0, S);
    if (threadIdx.x < kTile) {
      const int i = i0 + threadIdx.x;
      sLse[threadIdx.x] = i < S ? lse[stat0 + i] : 0.f;
      sD[threadIdx.x] = i < S ? dvec[stat0 + i] : 0.f;
    }
    __syncthreads();
#pragma unroll 4
    for (int t = 0; t < kTile; ++t) {
      const int i = i0 + t;
      float qk = 0.f, gv = 0.f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        qk += k[e] * sQ[t * kHd + 4 * e + r];
        gv += v[e] * sG[t * kHd + 4 * e + r];
      }
      qk = row_sum(qk);
      gv = row_sum(gv);
      const float p = j <= i && i < S ? expf(scale * qk - sLse[t]) : 0.f;
      const float ds = p * (gv - sD[t]);
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        dv[e] += p * sG[t * kHd + 4 * e + r];
        dk[e] += ds * sQ[t * kHd + 4 * e + r];
      }
    }
    __syncthreads();
  }
  if (j < S) {
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      dqkv[col.k + j * col.ld_qkv + 4 * e + r] = scale * dk[e];
      dqkv[col.v + j * col.ld_qkv + 4 * e + r] = dv[e];
    }
  }
}

float softmax_scale(int hd) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))); }

}  // namespace

void launch_flash_forward(const float* qkv, int B, int S, int H, int hd, float* o, float* lse,
                          cudaStream_t stream) {
  const dim3 grid(B * H, blocks_for(S, kRowsPerBlock));
  const float scale = softmax_scale(hd);
  if (hd == 32) flash_forward_fp32_kernel<32><<<grid, kThreads, 0, stream>>>(qkv, S, H, o, lse, scale);
  else if (hd == 64) flash_forward_fp32_kernel<64><<<grid, kThreads, 0, stream>>>(qkv, S, H, o, lse, scale);
  else flash_forward_fp32_kernel<128><<<grid, kThreads, 0, stream>>>(qkv, S, H, o, lse, scale);
  MOK_CUDA_CHECK_LAUNCH();
}

void launch_flash_backward_dkdv(const float* qkv, const float* d_o, const float* lse, const float* d,
                                int B, int S, int H, int hd, float* dqkv, cudaStream_t stream) {
  const dim3 grid(B * H, blocks_for(S, kRowsPerBlock));
  const float scale = softmax_scale(hd);
  auto launch = [&](auto kernel) { kernel<<<grid, kThreads, 0, stream>>>(qkv, d_o, lse, d, S, H, dqkv, scale); };
  if (hd == 32) launch(flash_backward_dkdv_fp32_kernel<32>);
  else if (hd == 64) launch(flash_backward_dkdv_fp32_kernel<64>);
  else launch(flash_backward_dkdv_fp32_kernel<128>);
  MOK_CUDA_CHECK_LAUNCH();
}

void launch_flash_backward_dq(const float* qkv, const float* d_o, const float* lse, const float* d,
                              int B, int S, int H, int hd, float* dqkv, cudaStream_t stream) {
  const dim3 grid(B * H, blocks_for(S, kRowsPerBlock));
  const float scale = softmax_scale(hd);
  auto launch = [&](auto kernel) { kernel<<<grid, kThreads, 0, stream>>>(qkv, d_o, lse, d, S, H, dqkv, scale); };
  if (hd == 32) launch(flash_backward_dq_fp32_kernel<32>);
  else if (hd == 64) launch(flash_backward_dq_fp32_kernel<64>);
  else launch(flash_backward_dq_fp32_kernel<128>);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
