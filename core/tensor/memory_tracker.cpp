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

void MemoryTracker::Counts::add(int c, int64_t bytes) {
  live[c] += bytes;
  peak[c] = std::max(peak[c], live[c]);
  live_total += bytes;
  peak_total = std::max(peak_total, live_total);
}

void MemoryTracker::Counts::reset_peaks() {
  peak = live;
  peak_total = live_total;
}

void MemoryTracker::add(const MemTag& tag, int64_t bytes, DeviceType device) {
  std::lock_guard lock(mutex_);
  const int c = static_cast<int>(tag.category);
  all_.add(c, bytes);
  by_device_[static_cast<int>(device)].add(c, bytes);
  if (tag.category == MemCategory::saved_activations) {
    KindBytes& k = saved_[{tag.layer, tag.kind}];
    k.live += bytes;
    k.peak = std::max(k.peak, k.live);
  }
}

void MemoryTracker::remove(const MemTag& tag, int64_t bytes, DeviceType device) {
  std::lock_guard lock(mutex_);
  const int c = static_cast<int>(tag.category);
  all_.add(c, -bytes);
  by_device_[static_cast<int>(device)].add(c, -bytes);
  if (tag.category == MemCategory::saved_activations) saved_[{tag.layer, tag.kind}].live -= bytes;
}

int64_t MemoryTracker::live_bytes(MemCategory c) const {
  std::lock_guard lock(mutex_);
  return all_.live[static_cast<int>(c)];
}
int64_t MemoryTracker::peak_bytes(MemCategory c) const {
  std::lock_guard lock(mutex_);
  return all_.peak[static_cast<int>(c)];
}
int64_t MemoryTracker::live_total() const {
  std::lock_guard lock(mutex_);
  return all_.live_total;
}
int64_t MemoryTracker::peak_total() const {
  std::lock_guard lock(mutex_);
  return all_.peak_total;
}
int64_t MemoryTracker::live_bytes(MemCategory c, DeviceType device) const {
  std::lock_guard lock(mutex_);
  return by_device_[static_cast<int>(device)].live[static_cast<int>(c)];
}
int64_t MemoryTracker::peak_bytes(MemCategory c, DeviceType device) const {
  std::lock_guard lock(mutex_);
  return by_device_[static_cast<int>(device)].peak[static_cast<int>(c)];
}
int64_t MemoryTracker::live_total(DeviceType device) const {
  std::lock_guard lock(mutex_);
  return by_device_[static_cast<int>(device)].live_total;
}
int64_t MemoryTracker::peak_total(DeviceType device) const {
  std::lock_guard lock(mutex_);
  return by_device_[static_cast<int>(device)].peak_total;
}
std::map<std::pair<int, std::string>, MemoryTracker::KindBytes> MemoryTracker::saved_by_layer_kind()
    const {
  std::lock_guard lock(mutex_);
  return saved_;
}

void MemoryTracker::reset_peaks() {
  std::lock_guard lock(mutex_);
  all_.reset_peaks();
  for (Counts& d : by_device_) d.reset_peaks();
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
