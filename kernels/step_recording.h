#pragma once
// StepRecording: the host side of a step being recorded as a CUDA graph (core/backend/
// step_graph.h) — the pinned memory its copies read and write.
//
// A graph's copies run at each replay, not when they are recorded, so a copy from the host
// cannot read its source then: each gets pinned memory of its own, which refresh_inputs()
// fills from the source before every replay where the source lies in a declared input (the
// batch's tokens and targets), and which is filled once, when recorded, otherwise. Values
// copied back to the host likewise land in pinned memory of their own, read after a replay.
//
// The allocator (uploads) and the ops (read-backs) call it while the recording is theirs.

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace mok::cuda {

class StepRecording {
 public:
  StepRecording() = default;
  ~StepRecording();
  StepRecording(const StepRecording&) = delete;
  StepRecording& operator=(const StepRecording&) = delete;

  void add_input(const void* host, size_t bytes);
  // Records dst ← host_src (bytes) on `stream`, which is being captured.
  void copy_from_host(void* dst, const void* host_src, size_t bytes, cudaStream_t stream);
  // Records a copy of device `src` into pinned memory; returns the read-back's index.
  size_t copy_to_host(const void* src, size_t bytes, cudaStream_t stream);
  // What read-back `index` holds after a replay has finished.
  const void* read_back(size_t index) const;

  void refresh_inputs();  // before each replay; the previous replay must have finished

  // Read-backs of the cross-entropy's sums (double loss sum, int64 count), in call order.
  std::vector<size_t> cross_entropy;

 private:
  struct Pinned {
    void* pinned;
    const void* source;  // the input memory it is refilled from; null: filled once
    size_t bytes;
  };
  void* pinned(size_t bytes);
  bool is_input(const void* host, size_t bytes) const;

  std::vector<std::pair<const char*, size_t>> inputs_;
  std::vector<Pinned> uploads_, downloads_;
};

}  // namespace mok::cuda
