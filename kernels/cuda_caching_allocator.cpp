#include "kernels/cuda_caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <new>
#include <stdexcept>
#include <string>

#include "core/tensor/size_class.h"
#include "kernels/copy_ranges.h"
#include "kernels/cuda_check.h"
#include "kernels/op_profiler.h"
#include "kernels/step_recording.h"
#include "kernels/zero_ranges.h"

namespace mok::cuda {

namespace {

std::string mib(int64_t bytes) { return std::to_string(bytes / (1 << 20)) + " MiB"; }

// cudaMalloc failed: a std::bad_alloc that says where and how much.
class DeviceOutOfMemory final : public std::bad_alloc {
 public:
  explicit DeviceOutOfMemory(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

}  // namespace

CudaCachingAllocator::CudaCachingAllocator(int device, cudaStream_t stream)
    : device_(device), stream_(stream), staging_(std::make_unique<PinnedStaging>(stream)) {}

CudaCachingAllocator::~CudaCachingAllocator() {
  // Tensors still alive (static storage, a leaked model) keep their blocks; only the cache goes.
  cudaStreamSynchronize(stream_);
  staging_.reset();
  for (auto& [cls, blocks] : free_)
    for (void* b : blocks) cudaFree(b);
}

int64_t CudaCachingAllocator::size_class(int64_t bytes) { return size_class_bytes(bytes, kDeviceBlockAlign); }

void* CudaCachingAllocator::allocate(int64_t bytes) {
  const int64_t cls = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    if (recording_) {  // the graph's own cached blocks first
      auto it = recorded_free_.find(cls);
      if (it != recorded_free_.end() && !it->second.empty()) {
        void* block = it->second.back();
        it->second.pop_back();
        recorded_cached_ -= cls;
        note_live_locked();
        return block;
      }
    }
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      cached_ -= cls;
      if (recording_) {
        recorded_.insert(block);
        recorded_bytes_ += cls;
      }
      note_live_locked();
      return block;
    }
  }
  int64_t limit = 0, reserved = 0;
  {
    std::lock_guard lock(mutex_);
    limit = limit_;
    reserved = reserved_;
  }
  if (limit > 0 && reserved + cls > limit) {
    trim();  // the cache first: what it holds is not in use
    std::lock_guard lock(mutex_);
    if (reserved_ + cls > limit)
      throw DeviceOutOfMemory("parallel.device_memory_limit (" + mib(limit) + " on cuda:" + std::to_string(device_) +
                              ") reached: asked " + mib(cls) + " with " + mib(reserved_) +
                              " held by tensors (the cache is already given back)");
  }
  void* block = nullptr;
  cudaError_t status = cudaMalloc(&block, static_cast<size_t>(cls));
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear, then give the cache back and try once more
    trim();
    status = cudaMalloc(&block, static_cast<size_t>(cls));
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    std::lock_guard lock(mutex_);
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw DeviceOutOfMemory("CUDA out of memory on cuda:" + std::to_string(device_) + ": asked " + mib(cls) +
                            ", this process holds " + mib(reserved_) + ", the device has " +
                            mib(static_cast<int64_t>(free_b)) + " free of " + mib(static_cast<int64_t>(total_b)) +
                            " (" + cudaGetErrorString(status) + ")");
  }
  std::lock_guard lock(mutex_);
  reserved_ += cls;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  note_live_locked();
  if (recording_) {
    recorded_.insert(block);
    recorded_bytes_ += cls;
  }
  return block;
}

void CudaCachingAllocator::release(void* block, int64_t bytes) {
  if (!block) return;
  const int64_t cls = size_class(bytes);
  std::lock_guard lock(mutex_);
  // A block freed while recording was read or written by the recorded work, even one
  // allocated before: it is the graph's from now on.
  if (recording_ && recorded_.insert(block).second) recorded_bytes_ += cls;
  if (recorded_.count(block)) {
    recorded_free_[cls].push_back(block);
    recorded_cached_ += cls;
    return;
  }
  free_[cls].push_back(block);
  cached_ += cls;
}

void CudaCachingAllocator::set_recording(StepRecording* recording) {
  std::lock_guard lock(mutex_);
  recording_ = recording;
}

void CudaCachingAllocator::release_recorded_blocks() {
  std::lock_guard lock(mutex_);
  for (auto& [cls, blocks] : recorded_free_) {
    auto& to = free_[cls];
    to.insert(to.end(), blocks.begin(), blocks.end());
  }
  cached_ += recorded_cached_;
  recorded_free_.clear();
  recorded_.clear();
  recorded_cached_ = recorded_bytes_ = 0;
}

int64_t CudaCachingAllocator::recorded_block_bytes() const {
  std::lock_guard lock(mutex_);
  return recorded_bytes_;
}

void CudaCachingAllocator::set_limit(int64_t bytes) {
  std::lock_guard lock(mutex_);
  limit_ = bytes > 0 ? bytes : 0;
}

int64_t CudaCachingAllocator::device_capacity_bytes() const {
  size_t free_b = 0, total_b = 0;
  MOK_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));  // of the current device: the rank's
  return static_cast<int64_t>(total_b);
}

void CudaCachingAllocator::trim() {
  {
    std::lock_guard lock(mutex_);
    if (recording_) return;  // waiting for the stream would end the recording
  }
  MOK_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::lock_guard lock(mutex_);
  for (auto& [cls, blocks] : free_) {
    for (void* b : blocks) cudaFree(b);
    reserved_ -= cls * static_cast<int64_t>(blocks.size());
  }
  free_.clear();
  cached_ = 0;
}

namespace {
// "what N MiB": bytes name the tensor well enough in a profile.
std::string sized(const char* what, int64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%s %.1f MiB", what, static_cast<double>(bytes) / 1048576.0);
  return text;
}
}  // namespace

void CudaCachingAllocator::memset(void* p, int value, int64_t bytes) {
  const auto timed = OpProfiler::scope_of(profiler_, [&] { return sized("memset", bytes); });
  MOK_CUDA_CHECK(cudaMemsetAsync(p, value, static_cast<size_t>(bytes), stream_));
}

void CudaCachingAllocator::zero_ranges(const std::vector<ByteRange>& ranges) {
  std::vector<DeviceByteRange> words;
  int64_t bytes = 0;
  for (const ByteRange& r : ranges) {
    const DeviceByteRange d{r.p, r.bytes};
    if (zero_ranges_fits(d)) {
      words.push_back(d);
      bytes += r.bytes;
    } else {
      memset(r.p, 0, r.bytes);
    }
  }
  if (words.empty()) return;
  const auto timed = OpProfiler::scope_of(profiler_, [&] {
    return sized("zero_ranges", bytes) + " in " + std::to_string(words.size()) + " ranges";
  });
  cuda::zero_ranges(words, stream_);
}

void CudaCachingAllocator::copy_to_host(void* host_dst, const void* src, int64_t bytes) {
  if (recording_)
    throw std::runtime_error("a step recorded as a CUDA graph reads " + std::to_string(bytes) +
                             " bytes on the host before it ends");
  MOK_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_));
  MOK_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaCachingAllocator::copy_from_host(void* dst, const void* host_src, int64_t bytes) {
  // The source has been read when the call returns; the stream is not waited for.
  if (recording_) return recording_->copy_from_host(dst, host_src, static_cast<size_t>(bytes), stream_);
  staging_->copy_to_device(dst, host_src, static_cast<size_t>(bytes));
}

void CudaCachingAllocator::copy_within(void* dst, const void* src, int64_t bytes) {
  const auto timed = OpProfiler::scope_of(profiler_, [&] { return sized("copy_within", bytes); });
  MOK_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream_));
}

void CudaCachingAllocator::copy_ranges(const std::vector<CopyRange>& ranges) {
  std::vector<DeviceCopyRange> copies;
  int64_t bytes = 0;
  for (const CopyRange& r : ranges)
    if (r.bytes > 0) {
      copies.push_back({r.dst, r.src, r.bytes});
      bytes += r.bytes;
    }
  if (copies.empty()) return;
  const auto timed = OpProfiler::scope_of(profiler_, [&] {
    return sized("copy_ranges", bytes) + " in " + std::to_string(copies.size()) + " ranges";
  });
  cuda::copy_ranges(copies, stream_);
}

int64_t CudaCachingAllocator::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return cached_ + recorded_cached_;
}

int64_t CudaCachingAllocator::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  return reserved_;
}

int64_t CudaCachingAllocator::peak_reserved_bytes() const {
  std::lock_guard lock(mutex_);
  return peak_reserved_;
}

int64_t CudaCachingAllocator::peak_live_block_bytes() const {
  std::lock_guard lock(mutex_);
  return peak_live_;
}

void CudaCachingAllocator::reset_peak_reserved() {
  std::lock_guard lock(mutex_);
  peak_reserved_ = reserved_;
  peak_live_ = reserved_ - cached_ - recorded_cached_;
}

}  // namespace mok::cuda
