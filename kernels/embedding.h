#pragma once
// Token embedding (CUDA), the semantics of core/model/embedding.h: x[t] = W[token[t]].
//   W: (vocab, d) T;  tokens: (n) int32 in [0, vocab) (the caller checks, as the CPU does);
//   x, dx: (n, d) T;  dW: (vocab, d) float.
// Backward without atomics: the (token, position) pairs are sorted stably (CUB radix sort),
// so each token's rows are summed in position order, in fixed chunks of sorted positions
// whose pieces are then joined in chunk order: bitwise repeatable.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mok::cuda {

template <typename T>
void embedding_forward(const T* w, const int32_t* tokens, int64_t n, int64_t d, T* x, cudaStream_t stream);

// Bytes of workspace embedding_backward needs. Asks CUB for its sort's scratch size, so
// call it with the device current that will run the backward.
size_t embedding_backward_workspace_bytes(int64_t n, int64_t vocab, int64_t d);

// dw[v] += Σ dx[t] over t with tokens[t] == v, the rows added in token order (accumulated).
// Throws std::invalid_argument when ws_bytes is below embedding_backward_workspace_bytes.
template <typename T>
void embedding_backward(const T* dx, const int32_t* tokens, int64_t n, int64_t vocab, int64_t d, float* dw,
                        void* ws, size_t ws_bytes, cudaStream_t stream);

}  // namespace mok::cuda
