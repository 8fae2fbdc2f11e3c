#pragma once
// RangeList: many device ranges handled by one launch (zero_ranges, copy_ranges, add_ranges).
// A launch's ranges are prefix sums of 16-byte words: word i of the launch lies in range r
// with start[r] ≤ i < start[r + 1]. Threads of a block take neighbouring words, so they find
// the same range (one broadcast read of the table).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda_check.h"

namespace mok::cuda {

// Ranges per launch: the kernel argument stays a few KiB (kernel arguments may reach 32 KiB on
// CUDA 12.1 and later).
constexpr int kRangesPerLaunch = 256;
constexpr int kRangeThreads = 256;

// `Pointers` holds the per-range addresses of one kind of range (one base, or dst and src).
template <typename Pointers>
struct RangeList {
  int count = 0;
  int64_t start[kRangesPerLaunch + 1];
  Pointers at[kRangesPerLaunch];
};

// The range of word i (0 ≤ i < list.start[list.count]).
template <typename Pointers>
__device__ inline int range_of_word(const RangeList<Pointers>& list, int64_t i) {
  int lo = 0, hi = list.count;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (list.start[mid] <= i) lo = mid;
    else hi = mid;
  }
  return lo;
}

// Blocks for `words` 16-byte words: at most 16 per multiprocessor of an H200 (132); each
// thread loops over the rest, so any GPU gets every word.
inline unsigned range_blocks(int64_t words) {
  return static_cast<unsigned>(std::min<int64_t>((words + kRangeThreads - 1) / kRangeThreads, 132 * 16));
}

// Whether a range starting at p of `bytes` bytes can be handled in 16-byte words.
inline bool on_word_grid(const void* p, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && bytes % 16 == 0 && bytes >= 0;
}

// Adds ranges one by one to a list, launching `launch(list)` whenever it is full and once at
// the end (finish()).
template <typename Pointers, typename Launch>
class RangeBatcher {
 public:
  explicit RangeBatcher(Launch launch) : launch_(launch) { list_.start[0] = 0; }
  void add(const Pointers& at, int64_t words) {
    if (words == 0) return;
    list_.at[list_.count] = at;
    list_.start[list_.count + 1] = list_.start[list_.count] + words;
    if (++list_.count == kRangesPerLaunch) flush();
  }
  void finish() { flush(); }

 private:
  void flush() {
    if (list_.count > 0 && list_.start[list_.count] > 0) launch_(list_);
    list_.count = 0;
  }
  Launch launch_;
  RangeList<Pointers> list_;
};

}  // namespace mok::cuda
