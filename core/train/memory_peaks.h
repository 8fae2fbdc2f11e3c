#pragma once
// MemoryPeaks: running maxima of the memory figures between two metric rows (a row may
// stand for several steps when train.log_every > 1), taken from the rank's tracker after
// every step and cleared when a row is written.

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "core/real.h"

MOK_NN_BEGIN
class Allocator;
class MemoryTracker;
MOK_NN_END

namespace mok {

struct MemoryPeaks {
  int64_t total = 0;  // bytes, all categories together
  int64_t saved = 0;  // bytes of tensors kept for backward
  // bytes the rank's allocator held from its device (live blocks + cached ones; on the CPU the
  // block cache, which the ranks of one process share)
  int64_t reserved = 0;
  // bytes of its live blocks (the tensors at their size class, no cache): what a
  // parallel.device_memory_limit binds
  int64_t blocks = 0;
  std::map<std::pair<int, std::string>, int64_t> saved_by_kind;  // (layer or −1, kind) → bytes

  void take(const MemoryTracker& t, const Allocator& a);
  void merge(const MemoryPeaks& other);  // the larger of each figure
  void clear();
};

}  // namespace mok
