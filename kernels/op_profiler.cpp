#include "kernels/op_profiler.h"

#include <algorithm>
#include <map>

#include "kernels/cuda_check.h"

namespace mok::cuda {

OpProfiler::~OpProfiler() {
  for (Pending& p : pending_) {
    if (p.start) cudaEventDestroy(p.start);
    if (p.stop) cudaEventDestroy(p.stop);
  }
  for (cudaEvent_t e : spare_) cudaEventDestroy(e);
}

cudaEvent_t OpProfiler::take_event() {
  if (!spare_.empty()) {
    cudaEvent_t e = spare_.back();
    spare_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  MOK_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

size_t OpProfiler::enter(std::string label) {
  Pending p;
  p.label = std::move(label);
  p.start = take_event();
  p.stop = take_event();
  MOK_CUDA_CHECK(cudaEventRecord(p.start, stream_));
  p.host_start = std::chrono::steady_clock::now();
  if (last_leave_.time_since_epoch().count() != 0)
    p.host_before_ms = std::chrono::duration<double, std::milli>(p.host_start - last_leave_).count();
  pending_.push_back(std::move(p));
  return pending_.size() - 1;
}

void OpProfiler::leave(size_t slot) {
  --depth_;
  if (slot == kNotRecorded) return;
  Pending& p = pending_[slot];
  cudaEventRecord(p.stop, stream_);  // no throw from a destructor
  last_leave_ = std::chrono::steady_clock::now();
  p.host_ms = std::chrono::duration<double, std::milli>(last_leave_ - p.host_start).count();
}

std::vector<OpProfiler::Row> OpProfiler::collect() {
  MOK_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::map<std::string, Row> by_label;
  for (Pending& p : pending_) {
    float ms = 0.0f;
    MOK_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
    Row& r = by_label[p.label];
    r.label = p.label;
    ++r.calls;
    r.ms += ms;
    r.host_ms += p.host_ms;
    r.host_before_ms += p.host_before_ms;
    spare_.push_back(p.start);
    spare_.push_back(p.stop);
  }
  pending_.clear();
  last_leave_ = {};
  std::vector<Row> rows;
  for (auto& [label, row] : by_label) rows.push_back(std::move(row));
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  return rows;
}

}  // namespace mok::cuda
