#include "kernels/cuda_backend.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "core/backend/exec_context.h"
#include "kernels/cuda_ops.h"
#include "kernels/device_info.h"

namespace mok::cuda {

void register_cuda_backend() {
  mok::DeviceBackend backend;
  backend.type = mok::DeviceType::cuda;
  backend.list = [](std::string* why_none) {
    const DeviceQuery q = query_devices();
    std::vector<mok::DeviceDescription> out;
    for (const DeviceInfo& d : q.devices) {
      out.push_back({mok::Device::cuda(d.index), d.name, d.memory_bytes,
                     "sm_" + std::to_string(d.sm_major) + std::to_string(d.sm_minor) + ", " +
                         std::to_string(d.multiprocessors) + " SMs"});
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
}

}  // namespace mok::cuda
