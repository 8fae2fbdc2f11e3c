#pragma once
// Global gradient norm and clipping over many fp32 tensors (CUDA), the semantics of
// core/train/grad_clip.h, with nothing crossing to the host:
//   sum_squares:  *sum_sq = Σ_tensors Σ_k g[k]² in double, in a fixed order (per-chunk
//                 partials, then the partials in chunk order by a fixed tree): bitwise repeatable
//   clip:         norm = sqrt(*sum_sq); when max_norm > 0, norm > max_norm and norm is finite,
//                 every g *= float(max_norm / norm)  (the CPU's clip_grad_norm)
//   scale:        every g *= s
// GradNormPlan maps launch blocks to (tensor, chunk) once for a fixed list of tensors, like
// AdamWPlan: construct, allocate device_bytes(), upload() once, then use each step.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/tensor_chunk_table.h"

namespace mok::cuda {

struct GradNormTensor {
  float* grad;  // fp32 (numel)
  int64_t numel;
};

class GradNormPlan {
 public:
  // Throws std::invalid_argument for a null grad or a negative numel.
  explicit GradNormPlan(const std::vector<GradNormTensor>& tensors);

  // Device memory the plan keeps: the tensor list, the block map and one double per block.
  size_t device_bytes() const;
  // Copies the plan into device_mem (device_bytes(), 256-byte aligned); once. A copy from
  // pageable host memory: the host waits for it.
  void upload(void* device_mem, cudaStream_t stream);

  // *sum_sq (device) written: the sum of squares of every gradient.
  void sum_squares(double* sum_sq, cudaStream_t stream) const;
  // Clips by the norm in *sum_sq (device), read on the device: no host round trip.
  void clip(const double* sum_sq, double max_norm, cudaStream_t stream) const;
  void scale(float s, cudaStream_t stream) const;

  int64_t blocks() const { return static_cast<int64_t>(chunks_.size()); }

 private:
  void launch_scale(const double* sum_sq, double max_norm, float s, cudaStream_t stream) const;

  std::vector<GradNormTensor> tensors_;
  std::vector<TensorChunk> chunks_;
  void* device_ = nullptr;
};

}  // namespace mok::cuda
