#pragma once
// Shared-memory tiles of the bf16 flash attention kernels and the mma fragments read from
// them (layouts in flash_attention_mma.cuh).
//
// A tile holds rows of one head (queries, keys or values), row-major with rows of hd + 8
// bf16: the 16-byte pad shifts consecutive rows by one 16-byte bank group, so the 8 row
// addresses of an ldmatrix hit distinct banks.

#include "kernels/flash_attention_mma.cuh"

namespace mok::cuda::mma {

// A fragment of the 16×16 block at (row0, col0) of a row-major shared tile (ld in elements).
__device__ inline void load_a(uint32_t (&a)[4], const __nv_bfloat16* tile, int ld, int row0, int col0, int lane) {
  ldmatrix_x4(a, tile + (row0 + lane % 16) * ld + col0 + (lane / 16) * 8);
}
// B fragments of two n-tiles from a tile stored n-major ([n][k], e.g. keys × dims for Q·Kᵀ):
// n rows n0..n0+15, k columns k0..k0+15. (r[0], r[1]) is n-tile n0, (r[2], r[3]) n-tile n0+8.
__device__ inline void load_b_nk(uint32_t (&r)[4], const __nv_bfloat16* tile, int ld, int n0, int k0, int lane) {
  ldmatrix_x4(r, tile + (n0 + (lane / 16) * 8 + lane % 8) * ld + k0 + ((lane / 8) % 2) * 8);
}
// B fragments of two n-tiles from a tile stored k-major ([k][n], e.g. keys × dims for P·V):
// k rows k0..k0+15, n columns n0..n0+15. (r[0], r[1]) is n-tile n0, (r[2], r[3]) n-tile n0+8.
__device__ inline void load_b_kn(uint32_t (&r)[4], const __nv_bfloat16* tile, int ld, int k0, int n0, int lane) {
  ldmatrix_x4_trans(r, tile + (k0 + ((lane / 8) % 2) * 8 + lane % 8) * ld + n0 + (lane / 16) * 8);
}

// Rows [r0, r0 + kRows) of one head (src: row 0 of its columns, row stride ld elements) into
// a (kRows, kHd + 8) shared tile, 16 bytes per cp.async by all kThreads threads; rows ≥ S
// zero-filled (their source clamped to row 0, never read).
template <int kRows, int kHd, int kThreads>
__device__ inline void load_tile_async(__nv_bfloat16* dst, const __nv_bfloat16* src, long long ld, int r0, int S) {
  constexpr int kChunks = kHd / 8, kLd = kHd + 8;
  for (int c = threadIdx.x; c < kRows * kChunks; c += kThreads) {
    const int r = c / kChunks, part = c % kChunks;
    const bool valid = r0 + r < S;
    cp_async_16(dst + r * kLd + part * 8, src + (valid ? r0 + r : 0) * ld + part * 8, valid);
  }
}

}  // namespace mok::cuda::mma
