#pragma once
// MemoryTracker: live and peak bytes by category and device, and saved-activation bytes per
// (layer, tensor kind). Every Tensor and ByteBuffer registers its bytes here, so the figures
// are what is really held, not an estimate. One tracker per rank (thread or process).
// Figures without a device are over all devices (a GPU run's are almost all on the GPU).

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "core/real.h"
#include "core/tensor/dtype.h"

MOK_NN_BEGIN

enum class MemCategory : int {
  parameters = 0,
  gradients,
  optimizer_state,
  saved_activations,  // tensors kept from forward for backward
  workspace,          // temporaries of one op
  communication,      // send/receive buffers between ranks
  kv_cache,           // decoding's keys and values per layer and sequence (generation)
  count
};
const char* mem_category_name(MemCategory c);

// Where an allocation belongs. For saved activations, `layer` and `kind` say which layer and
// which tensor kind (e.g. layer 3, "attn.qkv.input"); they key the per-layer figures.
struct MemTag {
  MemCategory category = MemCategory::workspace;
  int layer = -1;
  std::string kind;
};

class MemoryTracker {
 public:
  struct KindBytes {
    int64_t live = 0;
    int64_t peak = 0;
  };

  void add(const MemTag& tag, int64_t bytes, DeviceType device = DeviceType::cpu);
  void remove(const MemTag& tag, int64_t bytes, DeviceType device = DeviceType::cpu);

  int64_t live_bytes(MemCategory c) const;
  int64_t peak_bytes(MemCategory c) const;
  int64_t live_total() const;
  int64_t peak_total() const;  // peak of the sum, not the sum of peaks
  // The same, on one kind of device only.
  int64_t live_bytes(MemCategory c, DeviceType device) const;
  int64_t peak_bytes(MemCategory c, DeviceType device) const;
  int64_t live_total(DeviceType device) const;
  int64_t peak_total(DeviceType device) const;
  // Saved-activation bytes by (layer, kind); layer -1 is model-level (embeddings, head).
  std::map<std::pair<int, std::string>, KindBytes> saved_by_layer_kind() const;

  // Restart the peaks at the current live values (e.g. after warm-up or per step).
  void reset_peaks();

  // A limit on the live bytes held on one kind of device (parallel.device_memory_limit; 0 =
  // none). Allocations check it first (check_room), so the one that would go past it throws
  // MemoryLimitExceeded naming what it was for and what is held, before anything is taken.
  void set_limit(DeviceType device, int64_t bytes);
  int64_t limit(DeviceType device) const;
  void check_room(const MemTag& tag, int64_t bytes, DeviceType device) const;

  // The tracker that new allocations on this thread register with (one per rank thread).
  static MemoryTracker& current();
  static void set_current(MemoryTracker* tracker);  // nullptr restores the process default

 private:
  struct Counts {
    std::array<int64_t, static_cast<int>(MemCategory::count)> live{};
    std::array<int64_t, static_cast<int>(MemCategory::count)> peak{};
    int64_t live_total = 0;
    int64_t peak_total = 0;
    void add(int c, int64_t bytes);
    void reset_peaks();
  };
  static constexpr int kDeviceTypes = 2;  // cpu, cuda

  mutable std::mutex mutex_;
  Counts all_;
  std::array<Counts, kDeviceTypes> by_device_;
  std::map<std::pair<int, std::string>, KindBytes> saved_;
  std::array<int64_t, kDeviceTypes> limit_{};
};

// An allocation that would pass parallel.device_memory_limit. The message says what the bytes
// were for and what is held; what to change is the caller's to add (training and generation
// have different knobs).
class MemoryLimitExceeded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether `e` is a refusal for memory whose message names what ran out: a MemoryLimitExceeded,
// or a device allocator's std::bad_alloc (it names the device, the size and the limit) — not
// the host's bare std::bad_alloc, which says nothing. The caller adds what to change.
bool is_named_memory_refusal(const std::exception& e);

// Makes `tracker` current on this thread for the scope.
class ScopedMemoryTracker {
 public:
  explicit ScopedMemoryTracker(MemoryTracker& tracker);
  ~ScopedMemoryTracker();
  ScopedMemoryTracker(const ScopedMemoryTracker&) = delete;
  ScopedMemoryTracker& operator=(const ScopedMemoryTracker&) = delete;

 private:
  MemoryTracker* previous_;
};

MOK_NN_END
