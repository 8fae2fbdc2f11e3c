#include "kernels/transfer_stream.h"

#include "kernels/cuda_check.h"

namespace mok::cuda {

namespace {
cudaStream_t make_stream(bool high_priority) {
  cudaStream_t s = nullptr;
  int least = 0, greatest = 0;
  if (high_priority) MOK_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  MOK_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, high_priority ? greatest : 0));
  return s;
}
}  // namespace

TransferStream::TransferStream(bool high_priority) : stream_(make_stream(high_priority)), timer_(stream_) {
  MOK_CUDA_CHECK(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming));
  MOK_CUDA_CHECK(cudaEventCreateWithFlags(&moved_, cudaEventDisableTiming));
}

TransferStream::~TransferStream() {
  if (moved_) cudaEventDestroy(moved_);
  if (queued_) cudaEventDestroy(queued_);
  cudaStreamDestroy(stream_);  // (the timer, destroyed after this body, holds only events)
}

void TransferStream::wait_for(cudaStream_t compute) {
  MOK_CUDA_CHECK(cudaEventRecord(queued_, compute));
  MOK_CUDA_CHECK(cudaStreamWaitEvent(stream_, queued_, 0));
}

void TransferStream::mark_moved() { MOK_CUDA_CHECK(cudaEventRecord(moved_, stream_)); }

void TransferStream::finish(cudaStream_t compute, CollectiveTimer& exposed) {
  const auto timed = exposed.scope();
  MOK_CUDA_CHECK(cudaStreamWaitEvent(compute, moved_, 0));
}

}  // namespace mok::cuda
