#pragma once
// AdamW over every parameter tensor in one launch (CUDA), the update of core/train/adamw.h:
//   p ← p − lr·wd·p                       (only where weight_decay)
//   m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²
//   p ← p − lr · (m / (1−β1^t)) / (sqrt(v / (1−β2^t)) + ε)
// computed in double per element with the CPU's operations in the CPU's order and no fused
// multiply-add, so it gives the CPU's bits. param, grad, m, v: fp32 (numel); after the update
// the compute copy (bf16 or fp32) of the parameter is written from the new fp32 value.
//
// AdamWPlan maps launch blocks to (tensor, chunk) once for a fixed list of tensors (pointers
// fixed for a run): construct, allocate device_bytes(), upload() once, then step() each step.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/tensor_chunk_table.h"

namespace mok::cuda {

struct AdamWTensor {
  float* param;        // fp32 master weights (numel)
  const float* grad;   // fp32 (numel)
  float* m;            // first moment (numel)
  float* v;            // second moment (numel)
  void* compute;       // copy of the updated param in the compute dtype, written after the
                       // update; null when the compute copy is param itself
  int64_t numel;
  int weight_decay;    // 0/1
};

class AdamWPlan {
 public:
  // compute_is_bf16: the non-null compute copies are bf16 (else fp32). Throws
  // std::invalid_argument for a null pointer, a negative numel or compute == param.
  AdamWPlan(const std::vector<AdamWTensor>& tensors, bool compute_is_bf16);

  // Device memory the plan keeps: the tensor list and the block map.
  size_t device_bytes() const;
  // Copies the plan into device_mem (device_bytes(), 256-byte aligned); once. A copy from
  // pageable host memory: the host waits for it.
  void upload(void* device_mem, cudaStream_t stream);
  // One update of every tensor; t is the 1-based step of the bias correction. Each gradient is
  // used as float(g · grad_scale), the bits the clipping's scale kernel leaves (1: as it is);
  // the gradients themselves are not written. Asynchronous.
  void step(double lr, double beta1, double beta2, double eps, double weight_decay, int64_t t,
            cudaStream_t stream, float grad_scale = 1.f) const;

  int64_t blocks() const { return static_cast<int64_t>(chunks_.size()); }

 private:
  std::vector<AdamWTensor> tensors_;
  std::vector<TensorChunk> chunks_;
  bool compute_is_bf16_ = false;
  void* device_ = nullptr;
};

}  // namespace mok::cuda
