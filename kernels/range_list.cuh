#pragma once
// RangeList: many device ranges handled by one launch (zero_ranges, copy_ranges, add_ranges).
// A launch's ranges are prefix sums of words (16 bytes; 4 for copy_ranges' i32 segments):
// word i of the launch lies in range r with start[r] ≤ i < start[r + 1]. Threads of a block
// take neighbouring words, so they find the same range (one broadcast read of the table).

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

// Calls word(at, w) for every word of the launch, `at` the Pointers of its range and w its
// index within the range; the grid's threads stride over all the launch's words.
template <typename Pointers, typename Word>
__device__ inline void for_each_word(const RangeList<Pointers>& list, Word word) {
  const int64_t total = list.start[list.count];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    int lo = 0, hi = list.count;  // the range of word i
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (list.start[mid] <= i) lo = mid;
      else hi = mid;
    }
    word(list.at[lo], i - list.start[lo]);
  }
}

// Blocks for `words` words: at most 16 per multiprocessor of an H200 (132); each
// thread loops over the rest, so any GPU gets every word.
inline unsigned range_blocks(int64_t words) {
  return static_cast<unsigned>(std::min<int64_t>((words + kRangeThreads - 1) / kRangeThreads, 132 * 16));
}

// Whether a range starting at p of `bytes` bytes can be handled in words of `word` bytes.
inline bool on_word_grid(const void* p, int64_t bytes, int64_t word = 16) {
  return reinterpret_cast<uintptr_t>(p) % word == 0 && bytes % word == 0 && bytes >= 0;
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
