#include "core/train/memory_peaks.h"

#include <algorithm>

#include "core/tensor/allocator.h"
#include "core/tensor/memory_tracker.h"

namespace mok {

void MemoryPeaks::take(const MemoryTracker& t, const Allocator& a) {
  total = std::max(total, t.peak_total());
  reserved = std::max(reserved, a.peak_reserved_bytes());
  blocks = std::max(blocks, a.peak_live_block_bytes());
  saved = std::max(saved, t.peak_bytes(MemCategory::saved_activations));
  for (const auto& [key, kb] : t.saved_by_layer_kind()) {
    int64_t& v = saved_by_kind[key];
    v = std::max(v, kb.peak);
  }
}

void MemoryPeaks::merge(const MemoryPeaks& other) {
  total = std::max(total, other.total);
  reserved = std::max(reserved, other.reserved);
  blocks = std::max(blocks, other.blocks);
  saved = std::max(saved, other.saved);
  for (const auto& [key, bytes] : other.saved_by_kind) {
    int64_t& v = saved_by_kind[key];
    v = std::max(v, bytes);
  }
}

void MemoryPeaks::clear() {
  total = saved = reserved = blocks = 0;
  for (auto& [k, v] : saved_by_kind) v = 0;
}

}  // namespace mok
