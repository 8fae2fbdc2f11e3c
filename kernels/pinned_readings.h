#pragma once
// PinnedReadings: core/backend/host_reading.h on one CUDA stream. read() queues a copy of a
// small device tensor into pinned host memory and an event after it, and returns at once;
// the reading's data() waits for that event (a step's readings are read once the step has
// ended, when it has long completed). Pinned blocks are reused by size once their reading is
// dropped and their copy has landed (cudaHostAlloc is slow, and a step makes a few dozen
// readings).

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "core/backend/host_reading.h"

namespace mok::cuda {

struct PinnedBlockPool;  // free pinned blocks, shared with the readings that hold blocks

class PinnedReadings {
 public:
  explicit PinnedReadings(cudaStream_t stream);
  ~PinnedReadings();
  PinnedReadings(const PinnedReadings&) = delete;
  PinnedReadings& operator=(const PinnedReadings&) = delete;

  std::shared_ptr<mok::HostReading> read(const void* device_src, size_t bytes);

 private:
  std::shared_ptr<PinnedBlockPool> pool_;
  cudaStream_t stream_;
};

}  // namespace mok::cuda
