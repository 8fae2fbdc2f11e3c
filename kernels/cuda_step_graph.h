#pragma once
// CudaStepGraph: core/backend/step_graph.h over CUDA stream capture, on one CudaOps's stream.
//
// begin() starts capturing the stream (relaxed mode: the allocator may still take memory
// from the driver) and puts the ops in recording mode (kernels/step_recording.h: uploads
// from pinned memory of their own, the cross-entropy's sums read back the same way; blocks
// handed out become the graph's, kernels/cuda_caching_allocator.h). end() instantiates the
// graph; replay() refills the inputs' pinned copies and launches it. One recorded graph per
// device at a time; destroying it waits for its last replay and gives its blocks back.

#include <cuda_runtime.h>

#include <vector>

#include "core/backend/step_graph.h"
#include "kernels/step_recording.h"

namespace mok::cuda {

class CudaOps;

class CudaStepGraph final : public mok::StepGraph {
 public:
  explicit CudaStepGraph(CudaOps& ops);
  ~CudaStepGraph() override;
  CudaStepGraph(const CudaStepGraph&) = delete;
  CudaStepGraph& operator=(const CudaStepGraph&) = delete;

  void add_input(const void* host, size_t bytes) override;
  void begin() override;
  void end() override;
  void abandon() noexcept override;
  bool ready() const override { return exec_ != nullptr; }
  void replay() override;
  std::vector<mok::CrossEntropySum> cross_entropy_sums() override;
  size_t nodes() const override { return nodes_; }

 private:
  void stop_capture() noexcept;  // ends capturing (if it is), dropping what was captured

  CudaOps& ops_;
  StepRecording recording_;
  bool capturing_ = false;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t replayed_ = nullptr;  // recorded after each replay's launch
  bool launched_ = false;
  size_t nodes_ = 0;
};

}  // namespace mok::cuda
