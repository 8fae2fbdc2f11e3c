#include "core/model/zero_gradients.h"

#include <algorithm>
#include <cstdint>

MOK_NN_BEGIN

void zero_gradients(const std::vector<Parameter*>& params) {
  struct Range {
    const void* block;
    Allocator* allocator;
    uint8_t* begin;
    int64_t bytes;
  };
  std::vector<Range> ranges;
  for (Parameter* p : params)
    if (p->grad.bytes() > 0)
      ranges.push_back(
          {p->grad.storage_id(), &p->grad.allocator(), static_cast<uint8_t*>(p->grad.raw()), p->grad.bytes()});
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.block != b.block ? std::less<const void*>()(a.block, b.block) : std::less<uint8_t*>()(a.begin, b.begin);
  });
  // the runs of each allocator, zeroed in one call (one launch on a GPU)
  std::vector<std::pair<Allocator*, std::vector<Allocator::ByteRange>>> runs;
  for (size_t i = 0; i < ranges.size();) {
    Range run = ranges[i++];
    // Extend over gradients that start where the run ends (or inside it: a shared gradient).
    while (i < ranges.size() && ranges[i].block == run.block && ranges[i].begin <= run.begin + run.bytes) {
      run.bytes = std::max(run.bytes, static_cast<int64_t>(ranges[i].begin + ranges[i].bytes - run.begin));
      ++i;
    }
    auto at = std::find_if(runs.begin(), runs.end(), [&](const auto& r) { return r.first == run.allocator; });
    if (at == runs.end()) at = runs.insert(runs.end(), {run.allocator, {}});
    at->second.push_back({run.begin, run.bytes});
  }
  for (auto& [allocator, list] : runs) allocator->zero_ranges(list);
}

MOK_NN_END
