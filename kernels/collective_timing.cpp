#include "kernels/collective_timing.h"

#include <string>

#include "kernels/cuda_check.h"

namespace mok::cuda {

CollectiveTimer::~CollectiveTimer() {
  for (auto& [start, end] : timed_) spare_.insert(spare_.end(), {start, end});
  for (cudaEvent_t e : spare_) cudaEventDestroy(e);
}

cudaEvent_t CollectiveTimer::take() {
  cudaEvent_t e = nullptr;
  if (!spare_.empty()) {
    e = spare_.back();
    spare_.pop_back();
  } else {
    MOK_CUDA_CHECK(cudaEventCreate(&e));
  }
  return e;
}

CollectiveTimer::Scope::Scope(CollectiveTimer& timer) : timer_(timer), start_(timer.take()) {
  cudaEventRecord(start_, timer_.stream_);
}

CollectiveTimer::Scope::~Scope() {
  cudaEvent_t end = timer_.take();
  cudaEventRecord(end, timer_.stream_);
  timer_.timed_.emplace_back(start_, end);
}

double CollectiveTimer::seconds() {
  double total = 0.0;
  for (auto& [start, end] : timed_) {
    float ms = 0.f;
    if (cudaEventElapsedTime(&ms, start, end) == cudaSuccess) total += ms * 1e-3;
    spare_.push_back(start);
    spare_.push_back(end);
  }
  cudaGetLastError();  // an event not yet complete is not an error worth keeping
  timed_.clear();
  return total;
}

OpProfiler::Scope profile_collective(OpProfiler& profiler, const char* kind, mok::CommPurpose purpose) {
  return profiler.scope([&] { return std::string(kind) + " " + mok::comm_purpose_name(purpose); });
}

}  // namespace mok::cuda
