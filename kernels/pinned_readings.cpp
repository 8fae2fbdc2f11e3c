#include "kernels/pinned_readings.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/cuda_check.h"

namespace mok::cuda {

namespace {

constexpr size_t kGranule = 256;  // blocks are handed out in multiples of this

size_t block_size(size_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }

}  // namespace

// Pinned blocks and their events. A block whose reading was dropped before its copy arrived
// waits in `landing` until its event has completed (a reading is never waited for just to be
// dropped: an evaluation's unread losses must not stall the step).
struct PinnedBlockPool {
  struct Block {
    size_t size;
    void* memory;
    cudaEvent_t copied;
  };
  std::mutex mutex;
  std::multimap<size_t, Block> free;
  std::vector<Block> landing;

  ~PinnedBlockPool() {
    for (Block& b : landing) {
      cudaEventSynchronize(b.copied);
      release(b);
    }
    for (auto& [size, b] : free) release(b);
  }
  static void release(Block& b) {
    cudaEventDestroy(b.copied);
    cudaFreeHost(b.memory);
  }
  Block take(size_t size) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (size_t i = 0; i < landing.size();) {  // copies that have landed since
        if (cudaEventQuery(landing[i].copied) == cudaSuccess) {
          free.emplace(landing[i].size, landing[i]);
          landing[i] = landing.back();
          landing.pop_back();
        } else {
          (void)cudaGetLastError();  // cudaErrorNotReady is no error of the device
          ++i;
        }
      }
      auto it = free.find(size);
      if (it != free.end()) {
        const Block b = it->second;
        free.erase(it);
        return b;
      }
    }
    Block b{size, nullptr, nullptr};
    MOK_CUDA_CHECK(cudaHostAlloc(&b.memory, size, cudaHostAllocDefault));
    const cudaError_t made = cudaEventCreateWithFlags(&b.copied, cudaEventDisableTiming);
    if (made != cudaSuccess) cudaFreeHost(b.memory);
    MOK_CUDA_CHECK(made);
    return b;
  }
  void give_back(const Block& b, bool arrived) {
    std::lock_guard<std::mutex> lock(mutex);
    if (arrived) free.emplace(b.size, b);
    else landing.push_back(b);
  }
};

namespace {

class PinnedReading final : public mok::HostReading {
 public:
  PinnedReading(std::shared_ptr<PinnedBlockPool> pool, PinnedBlockPool::Block block, size_t bytes)
      : pool_(std::move(pool)), block_(block), bytes_(bytes) {}
  ~PinnedReading() override { pool_->give_back(block_, arrived_); }
  size_t bytes() const override { return bytes_; }
  const void* data() override {
    if (!arrived_) {
      MOK_CUDA_CHECK(cudaEventSynchronize(block_.copied));
      arrived_ = true;
    }
    return block_.memory;
  }

 private:
  std::shared_ptr<PinnedBlockPool> pool_;
  PinnedBlockPool::Block block_;
  size_t bytes_;
  bool arrived_ = false;
};

}  // namespace

PinnedReadings::PinnedReadings(cudaStream_t stream) : pool_(std::make_shared<PinnedBlockPool>()), stream_(stream) {}

PinnedReadings::~PinnedReadings() = default;

std::shared_ptr<mok::HostReading> PinnedReadings::read(const void* device_src, size_t bytes) {
  const PinnedBlockPool::Block block = pool_->take(block_size(bytes > 0 ? bytes : 1));
  cudaError_t queued = cudaSuccess;
  if (bytes > 0) queued = cudaMemcpyAsync(block.memory, device_src, bytes, cudaMemcpyDeviceToHost, stream_);
  if (queued == cudaSuccess) queued = cudaEventRecord(block.copied, stream_);
  if (queued != cudaSuccess) {
    pool_->give_back(block, true);
    MOK_CUDA_CHECK(queued);
  }
  return std::make_shared<PinnedReading>(pool_, block, bytes);
}

}  // namespace mok::cuda
