#include "kernels/step_recording.h"

#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"

namespace mok::cuda {

StepRecording::~StepRecording() {
  for (const Pinned& p : uploads_) cudaFreeHost(p.pinned);
  for (const Pinned& p : downloads_) cudaFreeHost(p.pinned);
}

void StepRecording::add_input(const void* host, size_t bytes) {
  if (host && bytes) inputs_.emplace_back(static_cast<const char*>(host), bytes);
}

bool StepRecording::is_input(const void* host, size_t bytes) const {
  const auto* p = static_cast<const char*>(host);
  for (const auto& [begin, size] : inputs_)
    if (!std::less<const char*>()(p, begin) && p + bytes <= begin + size) return true;
  return false;
}

void* StepRecording::pinned(size_t bytes) {
  void* p = nullptr;
  MOK_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
  return p;
}

void StepRecording::copy_from_host(void* dst, const void* host_src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  Pinned p{pinned(bytes), is_input(host_src, bytes) ? host_src : nullptr, bytes};
  uploads_.push_back(p);
  std::memcpy(p.pinned, host_src, bytes);
  MOK_CUDA_CHECK(cudaMemcpyAsync(dst, p.pinned, bytes, cudaMemcpyHostToDevice, stream));
}

size_t StepRecording::copy_to_host(const void* src, size_t bytes, cudaStream_t stream) {
  Pinned p{pinned(bytes), nullptr, bytes};
  downloads_.push_back(p);
  MOK_CUDA_CHECK(cudaMemcpyAsync(p.pinned, src, bytes, cudaMemcpyDeviceToHost, stream));
  return downloads_.size() - 1;
}

const void* StepRecording::read_back(size_t index) const {
  if (index >= downloads_.size())
    throw std::out_of_range("StepRecording: read-back " + std::to_string(index) + " of " +
                            std::to_string(downloads_.size()));
  return downloads_[index].pinned;
}

void StepRecording::refresh_inputs() {
  for (const Pinned& p : uploads_)
    if (p.source) std::memcpy(p.pinned, p.source, p.bytes);
}

}  // namespace mok::cuda
