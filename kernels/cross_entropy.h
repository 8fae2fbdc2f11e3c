#pragma once
// Cross-entropy with a fused log-softmax (CUDA), the semantics of
// core/backend/cross_entropy_kernel.h:
//   logits: (n, vocab) T;  targets: (n) int32, a negative target marks a row not scored;
//   row_loss: (n) float, lse − x[target] (0 for unscored rows).
// Targets ≥ vocab are the caller's to reject on the host (the CPU kernel throws for them).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mok::cuda {

// row_loss written. When write_grad, logits are overwritten with softmax − onehot(target)
// (zero rows for unscored targets): the gradient of Σ row_loss. One block per row.
template <typename T>
void cross_entropy_forward(T* logits, const int32_t* targets, int64_t n, int64_t vocab, bool write_grad,
                           float* row_loss, cudaStream_t stream);

size_t cross_entropy_reduce_workspace_bytes(int64_t n);

// *loss_sum = Σ row_loss in double (nats), *count = scored rows (targets ≥ 0); both written,
// on the device, in a fixed order (bitwise repeatable). Throws std::invalid_argument when
// ws_bytes < cross_entropy_reduce_workspace_bytes(n).
void cross_entropy_reduce(const float* row_loss, const int32_t* targets, int64_t n, double* loss_sum,
                          int64_t* count, void* ws, size_t ws_bytes, cudaStream_t stream);

}  // namespace mok::cuda
