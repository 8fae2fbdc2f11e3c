#pragma once
// Error checking for CUDA runtime and cuBLAS calls: every call's status is checked and a
// failure throws with the call site, so no error passes silently.

#include <cublas_api.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace mok::cuda {

inline void check(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                             cudaGetErrorString(status));
  }
}

// cuBLAS and cuBLASLt calls return cublasStatus_t.
inline void check_cublas(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                             cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
  }
}

}  // namespace mok::cuda

#define MOK_CUBLAS_CHECK(call) ::mok::cuda::check_cublas((call), #call, __FILE__, __LINE__)
#define MOK_CUDA_CHECK(call) ::mok::cuda::check((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch-configuration errors, then (in checks) execution errors.
#define MOK_CUDA_CHECK_LAUNCH() ::mok::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
