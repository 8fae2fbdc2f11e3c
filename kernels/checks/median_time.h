#pragma once
// median_ms: how long a launch takes on the GPU — CUDA events around each of `repeats` runs
// after three warm-up runs (which also load modules and pick and pin cuBLASLt algorithms);
// the median, in milliseconds. The timings of mok-gpu-check all use it.

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "kernels/cuda_check.h"

namespace mok::cuda {

inline float median_ms(const std::function<void()>& launch, int repeats = 20) {
  cudaEvent_t start, stop;
  MOK_CUDA_CHECK(cudaEventCreate(&start));
  MOK_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) launch();
  MOK_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < repeats; ++i) {
    MOK_CUDA_CHECK(cudaEventRecord(start));
    launch();
    MOK_CUDA_CHECK(cudaEventRecord(stop));
    MOK_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0.f;
    MOK_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  MOK_CUDA_CHECK(cudaEventDestroy(start));
  MOK_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace mok::cuda
