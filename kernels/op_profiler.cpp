#include "kernels/op_profiler.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

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

std::string format_op_profile(const std::vector<OpProfiler::Row>& rows, const std::string& title, int steps,
                              double wall_s, int top) {
  steps = std::max(steps, 1);
  const double wall_ms = 1e3 * wall_s / steps;
  double ops_ms = 0.0, host_ms = 0.0;
  struct Family {
    double ms = 0, host = 0, before = 0;
  };
  std::map<std::string, Family> families;  // by op name, shapes merged
  for (const auto& r : rows) {
    ops_ms += r.ms / steps;
    host_ms += r.host_ms / steps;
    Family& f = families[r.label.substr(0, r.label.find(' '))];
    f.ms += r.ms / steps;
    f.host += r.host_ms / steps;
    f.before += r.host_before_ms / steps;
  }
  std::vector<std::tuple<double, double, double, std::string>> by_family;
  for (const auto& [name, f] : families) by_family.emplace_back(f.ms, f.host, f.before, name);
  std::sort(by_family.rbegin(), by_family.rend());

  std::string out;
  char line[256];
  auto add = [&](int n) { out.append(line, static_cast<size_t>(std::clamp(n, 0, static_cast<int>(sizeof line) - 1))); };
  add(std::snprintf(line, sizeof line,
                    "profile %s: %.2f ms per step, %.2f ms in ops, %.2f ms host gaps; host %.2f ms inside ops "
                    "(%d profiled steps; events add a little)\n",
                    title.c_str(), wall_ms, ops_ms, wall_ms - ops_ms, host_ms, steps));
  // host ms: host time inside the op; host before: host time between the previous op's end
  // and this op's start (the model's own work), where the GPU idles if it has caught up.
  add(std::snprintf(line, sizeof line, "  %-24s %9s %7s %9s %11s\n", "op", "ms/step", "%", "host ms", "host before"));
  for (const auto& [ms, host, before, name] : by_family)
    add(std::snprintf(line, sizeof line, "  %-24s %9.3f %7.1f %9.3f %11.3f\n", name.c_str(), ms,
                      100.0 * ms / wall_ms, host, before));
  add(std::snprintf(line, sizeof line, "  %-56s %7s %9s %7s %9s\n", "op and shape (largest first)", "calls",
                    "ms/step", "%", "host ms"));
  for (int i = 0; i < static_cast<int>(rows.size()) && i < top; ++i)
    add(std::snprintf(line, sizeof line, "  %-56s %7.1f %9.3f %7.1f %9.3f\n", rows[i].label.c_str(),
                      static_cast<double>(rows[i].calls) / steps, rows[i].ms / steps,
                      100.0 * rows[i].ms / steps / wall_ms, rows[i].host_ms / steps));
  return out;
}

}  // namespace mok::cuda
