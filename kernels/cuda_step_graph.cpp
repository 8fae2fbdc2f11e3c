#include "kernels/cuda_step_graph.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_ops.h"

namespace mok::cuda {

CudaStepGraph::CudaStepGraph(CudaOps& ops) : ops_(ops) {
  MOK_CUDA_CHECK(cudaEventCreateWithFlags(&replayed_, cudaEventDisableTiming));
}

CudaStepGraph::~CudaStepGraph() {
  stop_capture();
  if (launched_) cudaEventSynchronize(replayed_);  // the blocks are free once the last replay is done
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  if (exec_ || graph_) ops_.caching_allocator().release_recorded_blocks();
  cudaEventDestroy(replayed_);
}

void CudaStepGraph::add_input(const void* host, size_t bytes) { recording_.add_input(host, bytes); }

void CudaStepGraph::begin() {
  if (capturing_ || graph_) throw std::logic_error("CudaStepGraph::begin: already recorded");
  if (ops_.caching_allocator().recorded_block_bytes() > 0)
    throw std::logic_error("CudaStepGraph::begin: another recorded step holds this device's blocks");
  MOK_CUDA_CHECK(cudaStreamBeginCapture(ops_.stream(), cudaStreamCaptureModeRelaxed));
  capturing_ = true;
  ops_.set_recording(&recording_);
}

void CudaStepGraph::stop_capture() noexcept {
  if (!capturing_) return;
  ops_.set_recording(nullptr);
  capturing_ = false;
  cudaGraph_t dropped = nullptr;
  cudaStreamEndCapture(ops_.stream(), &dropped);
  if (dropped) cudaGraphDestroy(dropped);
  cudaGetLastError();  // a capture invalidated by a call inside it is not an error of the device
}

void CudaStepGraph::end() {
  if (!capturing_) throw std::logic_error("CudaStepGraph::end without begin");
  ops_.set_recording(nullptr);
  capturing_ = false;
  const cudaError_t ended = cudaStreamEndCapture(ops_.stream(), &graph_);
  if (ended != cudaSuccess) {
    cudaGetLastError();
    graph_ = nullptr;
    throw std::runtime_error(std::string("the step could not be recorded as a CUDA graph: ") +
                             cudaGetErrorString(ended));
  }
  MOK_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &nodes_));
  MOK_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
}

void CudaStepGraph::abandon() noexcept {
  stop_capture();
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  // Nothing recorded ever ran: its blocks are free for any work (those still held, once released).
  ops_.caching_allocator().release_recorded_blocks();
}

void CudaStepGraph::replay() {
  if (!exec_) throw std::logic_error("CudaStepGraph::replay before end");
  if (launched_) MOK_CUDA_CHECK(cudaEventSynchronize(replayed_));  // its copies have read the inputs' pinned memory
  recording_.refresh_inputs();
  MOK_CUDA_CHECK(cudaGraphLaunch(exec_, ops_.stream()));
  MOK_CUDA_CHECK(cudaEventRecord(replayed_, ops_.stream()));
  launched_ = true;
}

std::vector<mok::CrossEntropySum> CudaStepGraph::cross_entropy_sums() {
  if (!launched_) throw std::logic_error("CudaStepGraph::cross_entropy_sums before a replay");
  MOK_CUDA_CHECK(cudaEventSynchronize(replayed_));
  std::vector<mok::CrossEntropySum> out;
  for (size_t index : recording_.cross_entropy) {
    const auto* bytes = static_cast<const unsigned char*>(recording_.read_back(index));
    mok::CrossEntropySum s;
    std::memcpy(&s.loss_sum, bytes, 8);
    std::memcpy(&s.count, bytes + 8, 8);
    out.push_back(s);
  }
  return out;
}

}  // namespace mok::cuda
