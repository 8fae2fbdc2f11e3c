#include "kernels/adamw.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/vector_pack.cuh"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;                             // elements per float4
constexpr int kIterations = 4;
constexpr int64_t kChunk = int64_t{kThreads} * kPerThread * kIterations;  // elements per block

// A tensor as the kernel sees it; packed: every pointer is aligned for 4-element packs.
struct AdamWTensorOnDevice {
  AdamWTensor t;
  int packed;
};

// Step constants, computed on the host exactly as core/train/adamw.cpp does.
struct AdamWConstants {
  double lr, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, bias1, bias2, decay;
  float grad_scale;  // the clipping's factor (1: none), applied as its scale kernel does
};

// One element, in the CPU's order of operations, each rounded (no fused multiply-add).
__device__ inline void adamw_element(float& w, float g, float& m, float& v, const AdamWConstants& k,
                                     double decay) {
  const double gk = __fmul_rn(g, k.grad_scale);
  const double mk = __dadd_rn(__dmul_rn(k.beta1, m), __dmul_rn(k.one_minus_beta1, gk));
  const double vk = __dadd_rn(__dmul_rn(k.beta2, v), __dmul_rn(__dmul_rn(k.one_minus_beta2, gk), gk));
  m = static_cast<float>(mk);
  v = static_cast<float>(vk);
  const double update = __ddiv_rn(__ddiv_rn(mk, k.bias1), __dadd_rn(__dsqrt_rn(__ddiv_rn(vk, k.bias2)), k.eps));
  w = static_cast<float>(__dsub_rn(__dmul_rn(decay, w), __dmul_rn(k.lr, update)));
}

// Block b updates chunk b of the map: kIterations rounds of 4 consecutive elements per thread.
template <typename C>
__global__ void adamw_kernel(const AdamWTensorOnDevice* tensors, const TensorChunk* chunks, AdamWConstants k) {
  const TensorChunk chunk = chunks[blockIdx.x];
  const AdamWTensorOnDevice td = tensors[chunk.tensor];
  const AdamWTensor& t = td.t;
  const double decay = t.weight_decay ? k.decay : 1.0;
  C* compute = static_cast<C*>(t.compute);
  const int64_t end = chunk.begin + kChunk < t.numel ? chunk.begin + kChunk : t.numel;
  for (int it = 0; it < kIterations; ++it) {
    const int64_t i = chunk.begin + (static_cast<int64_t>(it) * kThreads + threadIdx.x) * kPerThread;
    if (i >= end) break;
    if (td.packed && i + kPerThread <= end) {
      float4 w = *reinterpret_cast<const float4*>(t.param + i);
      const float4 g = *reinterpret_cast<const float4*>(t.grad + i);
      float4 m = *reinterpret_cast<const float4*>(t.m + i);
      float4 v = *reinterpret_cast<const float4*>(t.v + i);
      adamw_element(w.x, g.x, m.x, v.x, k, decay);
      adamw_element(w.y, g.y, m.y, v.y, k, decay);
      adamw_element(w.z, g.z, m.z, v.z, k, decay);
      adamw_element(w.w, g.w, m.w, v.w, k, decay);
      *reinterpret_cast<float4*>(t.param + i) = w;
      *reinterpret_cast<float4*>(t.m + i) = m;
      *reinterpret_cast<float4*>(t.v + i) = v;
      if (compute) {
        const float out[kPerThread] = {w.x, w.y, w.z, w.w};
        store_pack<kPerThread>(compute + i, out);
      }
    } else {
      for (int64_t e = i; e < i + kPerThread && e < end; ++e) {
        float w = t.param[e], m = t.m[e], v = t.v[e];
        adamw_element(w, t.grad[e], m, v, k, decay);
        t.param[e] = w;
        t.m[e] = m;
        t.v[e] = v;
        if (compute) compute[e] = from_float<C>(w);
      }
    }
  }
}

size_t tensors_bytes(size_t count) { return align_256(count * sizeof(AdamWTensorOnDevice)); }

}  // namespace

AdamWPlan::AdamWPlan(const std::vector<AdamWTensor>& tensors, bool compute_is_bf16)
    : tensors_(tensors), compute_is_bf16_(compute_is_bf16) {
  std::vector<int64_t> numels;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const AdamWTensor& t = tensors_[i];
    const std::string which = "AdamWPlan: tensor " + std::to_string(i);
    if (t.numel < 0) throw std::invalid_argument(which + " has " + std::to_string(t.numel) + " elements");
    if (t.numel > 0 && (!t.param || !t.grad || !t.m || !t.v))
      throw std::invalid_argument(which + " has a null param, grad, m or v");
    if (t.compute && t.compute == t.param)
      throw std::invalid_argument(which + ": a compute copy that is the param itself is passed as null");
    if (t.weight_decay != 0 && t.weight_decay != 1)
      throw std::invalid_argument(which + ": weight_decay is " + std::to_string(t.weight_decay) + ", not 0 or 1");
    numels.push_back(t.numel);
  }
  chunks_ = tensor_chunk_table(numels, kChunk);
}

size_t AdamWPlan::device_bytes() const {
  return tensors_bytes(tensors_.size()) + align_256(chunks_.size() * sizeof(TensorChunk));
}

void AdamWPlan::upload(void* device_mem, cudaStream_t stream) {
  if (!device_mem && device_bytes() > 0) throw std::invalid_argument("AdamWPlan::upload: no device memory");
  if (!is_aligned(device_mem, 256)) throw std::invalid_argument("AdamWPlan::upload: device memory not 256-byte aligned");
  std::vector<AdamWTensorOnDevice> on_device;
  const int64_t compute_pack = kPerThread * (compute_is_bf16_ ? 2 : 4);
  for (const AdamWTensor& t : tensors_) {
    const bool packed = is_aligned(t.param, 16) && is_aligned(t.grad, 16) && is_aligned(t.m, 16) &&
                        is_aligned(t.v, 16) && is_aligned(t.compute, compute_pack);
    on_device.push_back({t, packed ? 1 : 0});
  }
  auto* base = static_cast<char*>(device_mem);
  if (!on_device.empty())
    MOK_CUDA_CHECK(cudaMemcpyAsync(base, on_device.data(), on_device.size() * sizeof(AdamWTensorOnDevice),
                                   cudaMemcpyHostToDevice, stream));
  if (!chunks_.empty())
    MOK_CUDA_CHECK(cudaMemcpyAsync(base + tensors_bytes(tensors_.size()), chunks_.data(),
                                   chunks_.size() * sizeof(TensorChunk), cudaMemcpyHostToDevice, stream));
  device_ = device_mem;
}

void AdamWPlan::step(double lr, double beta1, double beta2, double eps, double weight_decay, int64_t t,
                     cudaStream_t stream, float grad_scale) const {
  if (t < 1) throw std::invalid_argument("AdamWPlan::step: step " + std::to_string(t) + " (1-based)");
  if (chunks_.empty()) return;
  if (!device_) throw std::logic_error("AdamWPlan::step before upload");
  AdamWConstants k;
  k.lr = lr;
  k.beta1 = beta1;
  k.one_minus_beta1 = 1.0 - beta1;
  k.beta2 = beta2;
  k.one_minus_beta2 = 1.0 - beta2;
  k.eps = eps;
  k.bias1 = 1.0 - std::pow(beta1, static_cast<double>(t));
  k.bias2 = 1.0 - std::pow(beta2, static_cast<double>(t));
  k.decay = 1.0 - lr * weight_decay;
  k.grad_scale = grad_scale;
  const auto* tensors = static_cast<const AdamWTensorOnDevice*>(device_);
  const auto* chunks = reinterpret_cast<const TensorChunk*>(static_cast<const char*>(device_) +
                                                            tensors_bytes(tensors_.size()));
  const auto blocks = static_cast<unsigned>(chunks_.size());
  if (compute_is_bf16_)
    adamw_kernel<bf16><<<blocks, kThreads, 0, stream>>>(tensors, chunks, k);
  else
    adamw_kernel<float><<<blocks, kThreads, 0, stream>>>(tensors, chunks, k);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace mok::cuda
