#pragma once
// DeviceBuffer<T>: an owning cudaMalloc'd array with host copies, for glue code and tests.

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "kernels/cuda_check.h"

namespace mok::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_) MOK_CUDA_CHECK(cudaMalloc(&data_, count_ * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(o.data_), count_(o.count_) {
    o.data_ = nullptr;
    o.count_ = 0;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return count_; }

  void upload(const std::vector<T>& host) {
    MOK_CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    MOK_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // Fills with a byte pattern (0xFF → NaN for floats) so unwritten outputs show up.
  void poison() { MOK_CUDA_CHECK(cudaMemset(data_, 0xFF, count_ * sizeof(T))); }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace mok::cuda
