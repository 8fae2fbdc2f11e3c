#pragma once
// Registers the CUDA backend with the core (core/backend/exec_context.h): after this,
// list_devices() names every GPU of the machine and make_exec_context(Device::cuda(i), dtype)
// gives a CudaOps context on it. Programs linked with mok_kernels call it once at start;
// where there is no driver or no GPU it registers all the same, and the core then says why no
// GPU can be used.

namespace mok::cuda {

void register_cuda_backend();

}  // namespace mok::cuda
