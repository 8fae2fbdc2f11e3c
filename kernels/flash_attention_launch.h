#pragma once
// The launchers behind kernels/flash_attention.h, one overload per element type:
//   float → kernels/flash_attention_fp32.cu (SIMT)
//   bf16  → kernels/flash_attention_bf16_forward.cu, flash_attention_bf16_backward.cu (mma.sync)
// Arguments are checked by the caller (kernels/flash_attention.cu); shapes as there.

#include <cuda_runtime.h>

#include "kernels/cuda_types.h"

namespace mok::cuda {

// o (B·S, H·hd); lse (B, H, S) or null.
void launch_flash_forward(const float* qkv, int B, int S, int H, int hd, float* o, float* lse,
                          cudaStream_t stream);
void launch_flash_forward(const bf16* qkv, int B, int S, int H, int hd, bf16* o, float* lse,
                          cudaStream_t stream);

// dK, dV column blocks of dqkv from qkv, d_o (B·S, H·hd), lse and D (both (B, H, S)).
void launch_flash_backward_dkdv(const float* qkv, const float* d_o, const float* lse, const float* d,
                                int B, int S, int H, int hd, float* dqkv, cudaStream_t stream);
void launch_flash_backward_dkdv(const bf16* qkv, const bf16* d_o, const float* lse, const float* d,
                                int B, int S, int H, int hd, bf16* dqkv, cudaStream_t stream);

// dQ column block of dqkv.
void launch_flash_backward_dq(const float* qkv, const float* d_o, const float* lse, const float* d,
                              int B, int S, int H, int hd, float* dqkv, cudaStream_t stream);
void launch_flash_backward_dq(const bf16* qkv, const bf16* d_o, const float* lse, const float* d,
                              int B, int S, int H, int hd, bf16* dqkv, cudaStream_t stream);

}  // namespace mok::cuda
