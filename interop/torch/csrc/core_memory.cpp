// The core's MemoryTracker figures (core/tensor/memory_tracker.h) behind the bridge: what the
// core's tensors of one element type hold, by category, live and peak.
#include "core/tensor/memory_tracker.h"
#include "interop/torch/csrc/core_bridge.h"

template <>
std::vector<std::pair<std::string, int64_t>> mok::torchext::core_memory<mok::real>() {
  const MemoryTracker& t = MemoryTracker::current();
  std::vector<std::pair<std::string, int64_t>> out;
  for (int c = 0; c < static_cast<int>(MemCategory::count); ++c) {
    const auto category = static_cast<MemCategory>(c);
    const std::string name = mem_category_name(category);
    out.emplace_back(name + ".live", t.live_bytes(category));
    out.emplace_back(name + ".peak", t.peak_bytes(category));
  }
  out.emplace_back("cuda.live", t.live_total(DeviceType::cuda));  // every category, on CUDA devices
  out.emplace_back("cuda.peak", t.peak_total(DeviceType::cuda));
  return out;
}

template <>
void mok::torchext::reset_core_memory_peaks<mok::real>() {
  MemoryTracker::current().reset_peaks();
}
