#pragma once
// Shared-memory operand tiles of the grouped GEMM kernel (kernels/grouped_gemm_kernel.cu) and
// the mma.m16n8k16 fragments read from them. PTX wrappers and the fragment layouts of the mma:
// kernels/flash_attention_mma.cuh.
//
// A tile holds one operand's block of one reduction step (kTileK = 32 deep) as it lies in
// global memory, so each cp.async copies 16 contiguous bytes (8 bf16) and nothing is
// transposed on the way in. Two storages, by which index is contiguous in memory:
//
//   k-inner  [outer][kTileK + 8]   rows are m (operand A) or n (operand B), k contiguous
//   k-outer  [kTileK][outer + 8]   rows are k; m (A) or n (B) contiguous
//
// ldmatrix reads 8×8 blocks of 8 rows × 16 bytes; plain, lane l receives (row l/4, columns
// 2(l%4), 2(l%4)+1) of a block; with .trans it receives (rows 2(l%4), 2(l%4)+1, column l/4),
// i.e. the same positions of the transposed block. The mma wants A as (m, two consecutive k)
// and B as (two consecutive k, n) per register, so a k-inner tile is read plain for A and B
// alike, a k-outer tile with .trans.
//
// The 8-element pad shifts consecutive rows by 16 bytes modulo 128 (k-inner rows are 80 bytes,
// k-outer rows (outer + 8)·2 with outer a multiple of 64), so the 8 row addresses of one
// ldmatrix block fall in 8 distinct 16-byte bank groups: no bank conflicts.

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/flash_attention_mma.cuh"

namespace mok::cuda::grouped_tiles {

using bf16 = __nv_bfloat16;

constexpr int kTileK = 32;              // reduction depth of one pipeline stage
constexpr int kLdKInner = kTileK + 8;   // row length (elements) of a k-inner tile

// kRows × kCols bf16 of global memory (origin `src`, row stride ld elements) into a shared
// tile with rows of kCols + 8, by all kThreads threads, 16 bytes per cp.async. Rows
// ≥ rows_valid and 8-column chunks at ≥ cols_valid are zero-filled: their copy reads 0 bytes,
// from `src` (the tile's origin, which the caller keeps inside the tensor). cols_valid is a
// multiple of 8 (the kernel requires n, k % 8 == 0), so a chunk is wholly in or out.
template <int kRows, int kCols, int kThreads>
__device__ inline void load_tile_async(bf16* dst, const bf16* src, int64_t ld, int rows_valid, int cols_valid) {
  constexpr int kChunksPerRow = kCols / 8;
  constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kCols % 8 == 0 && kChunks % kThreads == 0, "whole 16-byte chunks, the same count per thread");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int chunk = static_cast<int>(threadIdx.x) + i * kThreads;
    const int row = chunk / kChunksPerRow, col = (chunk % kChunksPerRow) * 8;
    const bool valid = row < rows_valid && col < cols_valid;
    mma::cp_async_16(dst + row * (kCols + 8) + col, valid ? src + row * ld + col : src, valid);
  }
}

// Each fragment read below is one ldmatrix.x4: lane l gives the address of row l % 8 of block
// b = l / 8, and register b receives block b. The *_row functions give that address as an
// element offset into the tile; they are plain arithmetic, callable on the host too, so a CPU
// replay of ldmatrix and mma can check them.

// A fragment (16 m × 16 k) at (m0, k0) of a k-inner tile [m][kLdKInner]. Block b is
// (m0 + 8·(b % 2), k0 + 8·(b / 2)): the order a0 (g, 2t) a1 (g+8, 2t) a2 (g, 2t+8) a3 (g+8, 2t+8).
__host__ __device__ constexpr int a_k_inner_row(int m0, int k0, int lane) {
  return (m0 + lane % 16) * kLdKInner + k0 + (lane / 16) * 8;
}
// A fragment (16 m × 16 k) at (m0, k0) of a k-outer tile [k][ld]: each stored 8×8 block is
// (8 k × 8 m); .trans gives lane (m g, k 2t..2t+1). Block b: k rows k0 + 8·(b / 2), m columns
// m0 + 8·(b % 2) — the same a0..a3 order as above.
__host__ __device__ constexpr int a_k_outer_row(int ld, int m0, int k0, int lane) {
  return (k0 + lane % 8 + (lane / 16) * 8) * ld + m0 + ((lane / 8) % 2) * 8;
}
// B fragments (16 k × 16 n) at (k0, n0) of a k-outer tile [k][ld], two n8 blocks: registers
// (0, 1) for columns n0..n0+7, (2, 3) for n0+8..n0+15. Stored blocks are (8 k × 8 n); .trans
// gives lane (k 2t..2t+1, n g) = b0; block b: k rows k0 + 8·(b % 2), n columns n0 + 8·(b / 2).
__host__ __device__ constexpr int b_k_outer_row(int ld, int k0, int n0, int lane) {
  return (k0 + lane % 8 + ((lane / 8) % 2) * 8) * ld + n0 + (lane / 16) * 8;
}
// B fragments (16 k × 16 n) at (k0, n0) of a k-inner tile [n][kLdKInner] (B stored n × k): the
// stored blocks are (8 n × 8 k), read plain: lane (n g, k 2t..2t+1) = b0. Block b: n rows
// n0 + 8·(b / 2), k columns k0 + 8·(b % 2); registers as in b_k_outer_row.
__host__ __device__ constexpr int b_k_inner_row(int k0, int n0, int lane) {
  return (n0 + lane % 8 + (lane / 16) * 8) * kLdKInner + k0 + ((lane / 8) % 2) * 8;
}

__device__ inline void load_a_k_inner(uint32_t (&a)[4], const bf16* tile, int m0, int k0, int lane) {
  mma::ldmatrix_x4(a, tile + a_k_inner_row(m0, k0, lane));
}
template <int kLd>
__device__ inline void load_a_k_outer(uint32_t (&a)[4], const bf16* tile, int m0, int k0, int lane) {
  mma::ldmatrix_x4_trans(a, tile + a_k_outer_row(kLd, m0, k0, lane));
}
template <int kLd>
__device__ inline void load_b_k_outer(uint32_t (&b)[4], const bf16* tile, int k0, int n0, int lane) {
  mma::ldmatrix_x4_trans(b, tile + b_k_outer_row(kLd, k0, n0, lane));
}
__device__ inline void load_b_k_inner(uint32_t (&b)[4], const bf16* tile, int k0, int n0, int lane) {
  mma::ldmatrix_x4(b, tile + b_k_inner_row(k0, n0, lane));
}

}  // namespace mok::cuda::grouped_tiles
