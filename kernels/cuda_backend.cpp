#include "kernels/cuda_backend.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "core/backend/exec_context.h"
#include "kernels/cuda_ops.h"
#include "kernels/device_info.h"
#include "kernels/nccl_data_plane.h"
#include "kernels/peer_data_plane.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace mok::cuda {

void register_cuda_backend() {
  mok::DeviceBackend backend;
  backend.type = mok::DeviceType::cuda;
  backend.list = [](std::string* why_none) {
    const DeviceQuery q = query_devices();
    std::vector<mok::DeviceDescription> out;
    auto cuda_version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    const size_t lt = cublasLtGetVersion();  // major·10000 + minor·100 + patch
    const std::string blas = std::to_string(lt / 10000) + "." + std::to_string(lt / 100 % 100) + "." +
                             std::to_string(lt % 100);
    for (const DeviceInfo& d : q.devices) {
      mok::DeviceDescription desc;
      desc.device = mok::Device::cuda(d.index);
      desc.name = d.name;
      desc.memory_bytes = d.memory_bytes;
      desc.detail = "sm_" + std::to_string(d.sm_major) + std::to_string(d.sm_minor) + ", " +
                    std::to_string(d.multiprocessors) + " SMs";
      desc.driver_version = driver ? cuda_version(driver) : "";
      desc.runtime_version = cuda_version(runtime);
      desc.blas_version = blas;
      out.push_back(std::move(desc));
    }
    if (out.empty() && why_none) *why_none = q.unavailable_reason.empty() ? "no CUDA device" : q.unavailable_reason;
    return out;
  };
  backend.make = [](mok::Device device, mok::DType compute) {
    const DeviceQuery q = query_devices();
    if (q.devices.empty())
      throw std::runtime_error("parallel.device: " + device.str() + ": no GPU can be used here (" +
                               (q.unavailable_reason.empty() ? std::string("no CUDA device") : q.unavailable_reason) +
                               ")");
    if (device.index < 0 || device.index >= static_cast<int>(q.devices.size()))
      throw std::runtime_error("parallel.device: " + device.str() + " does not exist; this machine has " +
                               std::to_string(q.devices.size()) + " GPU(s): cuda:0 … cuda:" +
                               std::to_string(q.devices.size() - 1));
    if (compute != mok::DType::f32 && compute != mok::DType::bf16)
      throw std::runtime_error(std::string("CUDA computes in f32 or bf16, not ") + mok::dtype_name(compute));
    return std::make_unique<mok::ExecContext>(std::make_shared<CudaOps>(device.index), compute);
  };
  mok::register_device_backend(std::move(backend));
  register_nccl_data_plane();
  register_peer_data_plane();
}

}  // namespace mok::cuda
