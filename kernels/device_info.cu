#include "kernels/device_info.h"

#include <cuda_runtime.h>

#include <string>

namespace mok::cuda {

DeviceQuery query_devices() {
  DeviceQuery q;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    q.unavailable_reason = status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice
                               ? std::string("no NVIDIA GPU and driver on this machine (CUDA: ") +
                                     cudaGetErrorString(status) + ")"
                               : cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return q;
  }
  if (count == 0) q.unavailable_reason = "no CUDA device";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    q.devices.push_back({i, prop.name, prop.major, prop.minor,
                         static_cast<long long>(prop.totalGlobalMem), prop.multiProcessorCount});
  }
  return q;
}

}  // namespace mok::cuda
