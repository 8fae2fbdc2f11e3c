#pragma once
// RankMemory: the memory figures of one metric row — live bytes by category, what the
// allocator holds now, the peaks since the previous row — and, for a run over R ranks, the
// figures the row reports: every peak the largest over ranks (what each device must hold),
// the live bytes and the saved bytes per layer those of the rank whose tracker peaked highest
// (the rank that binds), and that rank's number. Ties go to the lower rank, so every rank
// picks the same one.

#include <array>
#include <cstdint>
#include <span>

#include "core/real.h"
#include "core/tensor/memory_tracker.h"
#include "core/train/memory_peaks.h"

MOK_NN_BEGIN
class Communicator;
MOK_NN_END

namespace mok {

struct RankMemory {
  int rank = 0;                 // whose live bytes and saved bytes per layer these are
  std::array<int64_t, static_cast<int>(MemCategory::count)> live{};  // bytes by category now
  int64_t reserved = 0;         // bytes the rank's allocator holds now (live + cached blocks)
  MemoryPeaks peaks;            // since the previous row

  static RankMemory take(int rank, const MemoryTracker& tracker, int64_t reserved_bytes, const MemoryPeaks& peaks);
};

// R > 1: the row's figures as the header says, the same on every rank. A collective over the
// control plane: one all-gather, then one broadcast of the binding rank's saved bytes per
// layer (none when it has none).
RankMemory binding_rank_memory(Communicator& comm, const RankMemory& mine);

// Each value replaced by its largest over ranks (a collective; `values` as long on every rank).
void max_over_ranks(Communicator& comm, std::span<int64_t> values);

}  // namespace mok
