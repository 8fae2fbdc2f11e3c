#include "kernels/grad_norm.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/fixed_order_reduce.cuh"
#include "kernels/vector_pack.cuh"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;  // elements per float4
constexpr int kIterations = 4;
constexpr int64_t kChunk = int64_t{kThreads} * kPerThread * kIterations;  // elements per block

struct GradTensorOnDevice {
  float* grad;
  int64_t numel;
  int packed;  // grad is 16-byte aligned
};

// Block b: Σ g² over chunk b in double (each thread its elements in order, then the block's
// fixed tree) into partial[b].
__global__ void sum_squares_chunks_kernel(const GradTensorOnDevice* tensors, const TensorChunk* chunks,
                                          double* partial) {
  __shared__ double warps[kThreads / 32];
  const TensorChunk chunk = chunks[blockIdx.x];
  const GradTensorOnDevice t = tensors[chunk.tensor];
  const int64_t end = chunk.begin + kChunk < t.numel ? chunk.begin + kChunk : t.numel;
  double s = 0.0;
  for (int it = 0; it < kIterations; ++it) {
    const int64_t i = chunk.begin + (static_cast<int64_t>(it) * kThreads + threadIdx.x) * kPerThread;
    if (i >= end) break;
    if (t.packed && i + kPerThread <= end) {
      const float4 g = *reinterpret_cast<const float4*>(t.grad + i);
      s += static_cast<double>(g.x) * g.x;
      s += static_cast<double>(g.y) * g.y;
      s += static_cast<double>(g.z) * g.z;
      s += static_cast<double>(g.w) * g.w;
    } else {
      for (int64_t e = i; e < i + kPerThread && e < end; ++e) s += static_cast<double>(t.grad[e]) * t.grad[e];
    }
  }
  s = block_sum<kThreads>(s, warps);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// One block: thread i adds partials i, i + 256, … in order, then the fixed tree.
__global__ void sum_partials_kernel(const double* partial, int64_t count, double* sum_sq) {
  __shared__ double warps[kThreads / 32];
  double s = 0.0;
  for (int64_t b = threadIdx.x; b < count; b += kThreads) s += partial[b];
  s = block_sum<kThreads>(s, warps);
  if (threadIdx.x == 0) *sum_sq = s;
}

// g *= s; with sum_sq, s = float(max_norm / sqrt(*sum_sq)) when that clips, else nothing.
__global__ void scale_kernel(const GradTensorOnDevice* tensors, const TensorChunk* chunks, const double* sum_sq,
                             double max_norm, float s) {
  if (sum_sq) {
    const double norm = sqrt(*sum_sq);
    if (!(max_norm > 0.0 && norm > max_norm && isfinite(norm))) return;
    s = static_cast<float>(max_norm / norm);
  }
  const TensorChunk chunk = chunks[blockIdx.x];
  const GradTensorOnDevice t = tensors[chunk.tensor];
  const int64_t end = chunk.begin + kChunk < t.numel ? chunk.begin + kChunk : t.numel;
  for (int it = 0; it < kIterations; ++it) {
    const int64_t i = chunk.begin + (static_cast<int64_t>(it) * kThreads + threadIdx.x) * kPerThread;
    if (i >= end) break;
    if (t.packed && i + kPerThread <= end) {
      float4 g = *reinterpret_cast<const float4*>(t.grad + i);
      g.x *= s;
      g.y *= s;
      g.z *= s;
      g.w *= s;
      *reinterpret_cast<float4*>(t.grad + i) = g;
    } else {
      for (int64_t e = i; e < i + kPerThread && e < end; ++e) t.grad[e] *= s;
    }
  }
}

size_t tensors_bytes(size_t count) { return align_256(count * sizeof(GradTensorOnDevice)); }
size_t chunks_bytes(size_t count) { return align_256(count * sizeof(TensorChunk)); }

}  // namespace

GradNormPlan::GradNormPlan(const std::vector<GradNormTensor>& tensors) : tensors_(tensors) {
  std::vector<int64_t> numels;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].numel < 0)
      throw std::invalid_argument("GradNormPlan: tensor " + std::to_string(i) + " has " +
                                  std::to_string(tensors_[i].numel) + " elements");
    if (tensors_[i].numel > 0 && !tensors_[i].grad)
      throw std::invalid_argument("GradNormPlan: tensor " + std::to_string(i) + " has a null grad");
    numels.push_back(tensors_[i].numel);
  }
  chunks_ = tensor_chunk_table(numels, kChunk);
}

// (tensors) descriptors, (blocks) chunk map, (blocks) doubles of partial sums.
size_t GradNormPlan::device_bytes() const {
  return tensors_bytes(tensors_.size()) + chunks_bytes(chunks_.size()) + align_256(chunks_.size() * sizeof(double));
}

void GradNormPlan::upload(void* device_mem, cudaStream_t stream) {
  if (!device_mem && device_bytes() > 0) throw std::invalid_argument("GradNormPlan::upload: no device memory");
  if (!is_aligned(device_mem, 256))
    throw std::invalid_argument("GradNormPlan::upload: device memory not 256-byte aligned");
  std::vector<GradTensorOnDevice> on_device;
  for (const GradNormTensor& t : tensors_) on_device.push_back({t.grad, t.numel, is_aligned(t.grad, 16) ? 1 : 0});
  auto* base = static_cast<char*>(device_mem);
  if (!on_device.empty())
    MOK_CUDA_CHECK(cudaMemcpyAsync(base, on_device.data(), on_device.size() * sizeof(GradTensorOnDevice),
                                   cudaMemcpyHostToDevice, stream));
  if (!chunks_.empty())
    MOK_CUDA_CHECK(cudaMemcpyAsync(base + tensors_bytes(tensors_.size()), chunks_.data(),
                                   chunks_.size() * sizeof(TensorChunk), cudaMemcpyHostToDevice, stream));
  device_ = device_mem;
}

void GradNormPlan::sum_squares(double* sum_sq, cudaStream_t stream) const {
  if (!chunks_.empty() && !device_) throw std::logic_error("GradNormPlan::sum_squares before upload");
  auto* base = static_cast<char*>(device_);
  const auto* tensors = reinterpret_cast<const GradTensorOnDevice*>(base);
  const auto* chunks = reinterpret_cast<const TensorChunk*>(base + tensors_bytes(tensors_.size()));
  auto* partial = reinterpret_cast<double*>(base + tensors_bytes(tensors_.size()) + chunks_bytes(chunks_.size()));
  if (!chunks_.empty()) {
    sum_squares_chunks_kernel<<<static_cast<unsigned>(chunks_.size()), kThreads, 0, stream>>>(tensors, chunks,
                                                                                             partial);
    MOK_CUDA_CHECK_LAUNCH();
  }
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(partial, static_cast<int64_t>(chunks_.size()), sum_sq);
  MOK_CUDA_CHECK_LAUNCH();
}

void GradNormPlan::launch_scale(const double* sum_sq, double max_norm, float s, cudaStream_t stream) const {
  if (chunks_.empty()) return;
  if (!device_) throw std::logic_error("GradNormPlan: scaling before upload");
  auto* base = static_cast<char*>(device_);
  const auto* tensors = reinterpret_cast<const GradTensorOnDevice*>(base);
  const auto* chunks = reinterpret_cast<const TensorChunk*>(base + tensors_bytes(tensors_.size()));
  scale_kernel<<<static_cast<unsigned>(chunks_.size()), kThreads, 0, stream>>>(tensors, chunks, sum_sq, max_norm, s);
  MOK_CUDA_CHECK_LAUNCH();
}

void GradNormPlan::clip(const double* sum_sq, double max_norm, cudaStream_t stream) const {
  if (!sum_sq) throw std::invalid_argument("GradNormPlan::clip: sum_sq is null");
  launch_scale(sum_sq, max_norm, 1.f, stream);
}

void GradNormPlan::scale(float s, cudaStream_t stream) const { launch_scale(nullptr, 0.0, s, stream); }

}  // namespace mok::cuda
