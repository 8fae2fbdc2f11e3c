#include "core/tensor/memory_tracker.h"

#include <algorithm>
#include <new>
#include <string_view>

#include "core/util/byte_size.h"

MOK_NN_BEGIN

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::parameters: return "parameters";
    case MemCategory::gradients: return "gradients";
    case MemCategory::optimizer_state: return "optimizer_state";
    case MemCategory::saved_activations: return "saved_activations";
    case MemCategory::workspace: return "workspace";
    case MemCategory::communication: return "communication";
    case MemCategory::kv_cache: return "kv_cache";
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

void MemoryTracker::set_limit(DeviceType device, int64_t bytes) {
  std::lock_guard lock(mutex_);
  limit_[static_cast<int>(device)] = bytes > 0 ? bytes : 0;
}

int64_t MemoryTracker::limit(DeviceType device) const {
  std::lock_guard lock(mutex_);
  return limit_[static_cast<int>(device)];
}

void MemoryTracker::check_room(const MemTag& tag, int64_t bytes, DeviceType device) const {
  std::lock_guard lock(mutex_);
  const int d = static_cast<int>(device);
  const int64_t limit = limit_[d];
  const Counts& held = by_device_[d];
  if (limit <= 0 || held.live_total + bytes <= limit) return;
  std::string what = mem_category_name(tag.category);
  std::replace(what.begin(), what.end(), '_', ' ');
  if (tag.layer >= 0 || !tag.kind.empty()) {
    what += " (";
    if (tag.layer >= 0) what += "layer " + std::to_string(tag.layer) + (tag.kind.empty() ? "" : ", ");
    what += tag.kind + ")";
  }
  std::string parts;
  for (int c = 0; c < static_cast<int>(MemCategory::count); ++c) {
    if (held.live[c] <= 0) continue;
    std::string name = mem_category_name(static_cast<MemCategory>(c));
    std::replace(name.begin(), name.end(), '_', ' ');
    parts += (parts.empty() ? "" : ", ") + name + " " + format_byte_size(held.live[c]);
  }
  throw MemoryLimitExceeded("parallel.device_memory_limit (" + format_byte_size(limit) + " on " +
                            (device == DeviceType::cpu ? std::string("the CPU") : std::string("the GPU")) +
                            ") reached: " + format_byte_size(bytes) + " more for " + what + " on top of " +
                            format_byte_size(held.live_total) + " held" + (parts.empty() ? "" : " (" + parts + ")"));
}

bool is_named_memory_refusal(const std::exception& e) {
  if (dynamic_cast<const MemoryLimitExceeded*>(&e)) return true;
  return dynamic_cast<const std::bad_alloc*>(&e) && std::string_view(e.what()) != std::bad_alloc().what();
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
