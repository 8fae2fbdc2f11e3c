#pragma once
// The grouped GEMM on Hopper's own instructions: the products of grouped_gemm_kernel.h
// (rows, rows_bt, weight_grad over expert segments, bf16 operands, fp32 accumulation), with
// operands brought into shared memory by the bulk tensor copy engine (TMA) and multiplied by
// warpgroup MMA (wgmma), which the mma.sync kernel cannot reach on an H100/H200. Output tiles
// are 128 × 256; every output element is one fixed chain of k16 steps over the reduction in
// order (no split, no atomics), so results repeat bit for bit.
//
// Built for sm_90a only (its own CMake target); grouped_wgmma_available() says whether this
// build and the current device (compute capability 9.0) can run it. GroupedKernelTile::
// m128n256_wgmma routes a call here (grouped_gemm_kernel), and GroupedGemm sends what this kernel
// refuses to the mma.sync kernel instead. Design: kernels/grouped_gemm_wgmma.cu.

#include <cuda_runtime.h>

#include <string>

#include "kernels/grouped_gemm_kernel.h"

namespace mok::cuda {

// This build holds the kernel and the current device is of compute capability 9.0.
bool grouped_wgmma_available();

// What this kernel refuses beyond what grouped_kernel_refusal says (empty when it takes the
// call): no such GPU or build, k = 0, several groups sharing one B (a zero group stride).
std::string grouped_wgmma_refusal(const GroupedKernelCall& call);

// Launches `call` (accepted by grouped_kernel_refusal and grouped_wgmma_refusal) on `stream`;
// nothing when it has no output tiles. Throws std::invalid_argument with the refusal otherwise.
void grouped_gemm_wgmma(const GroupedKernelCall& call, cudaStream_t stream);

// Raises the kernel's shared-memory limit on the current device; once per device.
void grouped_gemm_wgmma_prepare();

}  // namespace mok::cuda
