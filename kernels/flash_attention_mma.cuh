#pragma once
// Warp-level tensor-core pieces of the bf16 flash attention kernels (sm_80+ PTX; built for
// sm_90): asynchronous global → shared copies, ldmatrix, mma.sync m16n8k16 (bf16 in, float
// accumulate), and the shared-memory tile loader.
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16×16, row-major)  a0: (g, 2t..2t+1)  a1: (g+8, 2t..)  a2: (g, 2t+8..)  a3: (g+8, 2t+8..)
//   B (16×8,  k × n)      b0: (k 2t..2t+1, n g)               b1: (k 2t+8..2t+9, n g)
//   C (16×8, float)       c0, c1: (g, 2t..2t+1)               c2, c3: (g+8, 2t..2t+1)
// Two bf16 per 32-bit register, the lower column (or k) in the low half. The C layout of two
// neighbouring n-tiles is the A layout of one k-step: scores feed the next product in
// registers.
//
// Shared tiles are row-major with rows of hd + 8 bf16: the 16-byte pad shifts consecutive
// rows by one 16-byte bank group, so the 8 row addresses of an ldmatrix hit distinct banks.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda::mma {

__device__ inline uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global → shared, asynchronous; zero-filled when !valid (src must still be mapped).
__device__ inline void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
// 4 bytes global → shared, asynchronous; zero when !valid.
__device__ inline void cp_async_4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups of this thread are still in flight.
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8×8 bf16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and register i
// receives (row g, cols 2t..2t+1) of matrix i (of its transpose with .trans).
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(smem)));
}
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(smem)));
}

// d (16×8) += a (16×16) · b (16×8).
__device__ inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// (lo, hi) rounded to bf16, lo in the low half.
__device__ inline uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 2^x on the special-function unit (relative error ≤ 2^-22; 2^-inf = 0).
__device__ inline float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

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
