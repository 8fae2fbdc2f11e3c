#pragma once
// Causal flash attention on the GPU: the CUDA version of core/backend/causal_attention.h.
// No (seq × seq) tensor is ever stored: forward runs an online softmax over key tiles and
// keeps the log-sum-exp per query; backward recomputes the probabilities tile by tile.
//
// Layout (the training layout of the core):
//   qkv  (B·S, 3·H·hd)  column blocks q | k | v, RoPE already applied to q and k;
//                       head h of a block is columns [h·hd, (h+1)·hd)
//   o    (B·S, H·hd)
//   lse  (B, H, S)      float, natural log of Σ_j exp(scale·q_i·k_j), scale = 1/sqrt(hd)
// Query i sees keys [0, i].
//
// T = float: SIMT kernels, float throughout (parity with the CPU core).
// T = bf16:  tensor cores (mma.sync m16n8k16, bf16 inputs, float accumulators), softmax in
//            float; probabilities and dS are rounded to bf16 as inputs of their products.
//
// Backward is deterministic, with no floating-point atomics: one thread block per key block
// writes dK and dV (looping over the query blocks that see it), one thread block per query
// block writes dQ (looping over its keys), each in a fixed order; a pre-pass forms
// D = rowsum(dO ∘ O) per query.
//
// hd ∈ {32, 64, 128}; S ≥ 1 of any size; every pointer 16-byte aligned (lse 4-byte). All
// calls are asynchronous on `stream` and allocate nothing. Invalid arguments throw
// std::invalid_argument.

#include <cstddef>

#include <cuda_runtime.h>

#include "kernels/cuda_types.h"

namespace mok::cuda {

// o written; lse written when not null.
template <typename T>
void flash_attention_forward(const T* qkv, int B, int S, int H, int hd, T* o, float* lse,
                             cudaStream_t stream);

// d_o (B·S, H·hd), lse from the forward → dqkv (B·S, 3·H·hd) fully written.
// o: the forward output, or null: then O is recomputed into the workspace (the same kernel,
// so the same bits) to form D.
// ws: at least flash_attention_backward_workspace_bytes(B, S, H, hd) bytes, contents ignored.
template <typename T>
void flash_attention_backward(const T* qkv, const T* d_o, const float* lse, const T* o, int B, int S,
                              int H, int hd, T* dqkv, void* ws, size_t ws_bytes, cudaStream_t stream);

// D (B·H·S floats) and room for a recomputed O (B·S·H·hd elements of the widest T, float),
// each 256-byte aligned.
size_t flash_attention_backward_workspace_bytes(int B, int S, int H, int hd);

}  // namespace mok::cuda
