#pragma once
// PTX wrappers for Hopper (sm_90a) matrix kernels: mbarriers, the bulk tensor copy engine
// (TMA), warpgroup MMA (wgmma) and its shared-memory matrix descriptors. Used by
// kernels/grouped_gemm_wgmma.cu; every function here compiles only for sm_90a (the caller
// guards its kernels with __CUDA_ARCH_FEAT_SM90_ALL).
//
// Shared-memory operand layout (one swizzle mode throughout: 128-byte):
//   a "box" is what one TMA load writes: rows of 128 bytes (64 bf16), row r at r·128, its
//   eight 16-byte chunks permuted by r % 8 (the hardware's 128-byte swizzle), 1024-byte aligned.
//   K-major operand  (rows are m or n, 64 k per row): one box of R rows; a k16 step is the
//                    next 32 bytes of every row; 8-row groups 1024 bytes apart (SBO).
//   MN-major operand (rows are k, 64 m or n per row): boxes of 64 k rows side by side along
//                    m/n, 8192 bytes apart (LBO); a k16 step is the next 16 rows (2048 bytes);
//                    8-row groups 1024 bytes apart (SBO).

#include <cuda.h>

#include <cstdint>

namespace mok::cuda::hopper {

__device__ inline uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers (64-bit, in shared memory) ----
__device__ inline void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}
// Makes the initialised barriers visible to the copy engine (the async proxy).
__device__ inline void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ inline void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}
// One arrival that also announces `bytes` the copy engine will deliver to this phase.
__device__ inline void mbarrier_arrive_expect_bytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}
// Waits until the phase of parity `parity` has completed (a fresh barrier counts the phase
// before its first, parity 1, as completed).
__device__ inline void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t address = smem_address(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(address), "r"(parity)
        : "memory");
  } while (!done);
}

// ---- the bulk tensor copy engine: a box of a tensor map into shared memory ----
// Coordinates are elements, innermost first; parts of the box outside the tensor are zeros.
// Completion is counted in bytes on `bar`.
__device__ inline void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_address(bar))
      : "memory");
}
__device__ inline void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_address(bar))
      : "memory");
}
// Ordinary shared-memory stores that the tensor cores or the copy engine read next.
__device__ inline void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// A barrier over `threads` threads (a multiple of 32) with id `id` (1..15; 0 is __syncthreads).
__device__ inline void named_barrier(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---- register budgets of warpgroups (the kernel needs __launch_bounds__(threads, 1)) ----
template <uint32_t kRegisters>
__device__ inline void warpgroup_registers_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <uint32_t kRegisters>
__device__ inline void warpgroup_registers_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}

// ---- wgmma ----
// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte
// offsets (see the layouts above), all in 16-byte units.
__device__ inline uint64_t smem_descriptor(const void* start, uint32_t leading_bytes, uint32_t stride_bytes) {
  uint64_t d = 0;
  d |= uint64_t((smem_address(start) & 0x3FFFF) >> 4);
  d |= uint64_t((leading_bytes >> 4) & 0x3FFF) << 16;
  d |= uint64_t((stride_bytes >> 4) & 0x3FFF) << 32;
  d |= uint64_t(1) << 62;  // 128-byte swizzle
  return d;
}
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// D (64 × 256, fp32) = A (64 × 16) · B (16 × 256) + (accumulate ? D : 0), bf16 from shared
// memory. kTransA / kTransB: 0 for a K-major operand, 1 for an MN-major one. The warpgroup's thread
// t = 32·w + l holds, for each n8 block j, d[4j], d[4j+1] at (row 16w + l/4, columns 8j + 2(l%4)
// and + 1) and d[4j+2], d[4j+3] at row + 8.
template <int kTransA, int kTransB>
__device__ inline void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %132, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, %130, %131;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
      "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
      "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
      "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
      "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
      "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
      "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
      "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "n"(kTransA), "n"(kTransB), "r"(accumulate));
}

}  // namespace mok::cuda::hopper
