#include "core/tensor/memory_tracker.h"

#include <algorithm>

MOK_NN_BEGIN

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::parameters: return "parameters";
    case MemCategory::gradients: return "gradients";
    case MemCategory::optimizer_state: return "optimizer_state";
    case MemCategory::saved_activations: return "saved_activations";
    case MemCategory::workspace: return "workspace";
    case MemCategory::communication: return "communication";
    case MemCategory::count: break;
  }
  return "unknown";
}

void MemoryTracker::add(const MemTag& tag, int64_t bytes) {
  std::lock_guard lock(mutex_);
  const int c = static_cast<int>(tag.category);
  live_[c] += bytes;
  peak_[c] = std::max(peak_[c], live_[c]);
  live_total_ += bytes;
  peak_total_ = std::max(peak_total_, live_total_);
  if (tag.category == MemCategory::saved_activations) {
    KindBytes& k = saved_[{tag.layer, tag.kind}];
    k.live += bytes;
    k.peak = std::max(k.peak, k.live);
  }
}

void MemoryTracker::remove(const MemTag& tag, int64_t bytes) {
  std::lock_guard lock(mutex_);
  const int c = static_cast<int>(tag.category);
  live_[c] -= bytes;
  live_total_ -= bytes;
  if (tag.category == MemCategory::saved_activations) saved_[{tag.layer, tag.kind}].live -= bytes;
}

int64_t MemoryTracker::live_bytes(MemCategory c) const {
  std::lock_guard lock(mutex_);
  return live_[static_cast<int>(c)];
}
int64_t MemoryTracker::peak_bytes(MemCategory c) const {
  std::lock_guard lock(mutex_);
  return peak_[static_cast<int>(c)];
}
int64_t MemoryTracker::live_total() const {
  std::lock_guard lock(mutex_);
  return live_total_;
}
int64_t MemoryTracker::peak_total() const {
  std::lock_guard lock(mutex_);
  return peak_total_;
}
std::map<std::pair<int, std::string>, MemoryTracker::KindBytes> MemoryTracker::saved_by_layer_kind()
    const {
  std::lock_guard lock(mutex_);
  return saved_;
}

void MemoryTracker::reset_peaks() {
  std::lock_guard lock(mutex_);
  peak_ = live_;
  peak_total_ = live_total_;
  for (auto& [key, k] : saved_) k.peak = k.live;
}

namespace {
MemoryTracker& process_default_tracker() {
  static MemoryTracker tracker;
  return tracker;
}
thread_local MemoryTracker* t_current = nullptr;
}  // namespace

MemoryTracker& MemoryTracker::current() {
  return t_current ? *t_current : process_default_tracker();
}
void MemoryTracker::set_current(MemoryTracker* tracker) { t_current = tracker; }

ScopedMemoryTracker::ScopedMemoryTracker(MemoryTracker& tracker) : previous_(t_current) {
  t_current = &tracker;
}
ScopedMemoryTracker::~ScopedMemoryTracker() { t_current = previous_; }

MOK_NN_END
