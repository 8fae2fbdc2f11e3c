#pragma once
// ChunkLayout: where the rows of an all-to-all lie when it is split into C chunks that
// travel one after another (MokDispatcher's overlap of transfer and compute).
//
// The rows are given peer by peer (rows_per_peer[q] consecutive rows for peer q, in the
// order the unchunked exchange would send or receive them), each with a chunk key in
// [0, C). The layout is chunk-major: chunk 0's rows for peer 0, peer 1, …, then chunk 1's,
// …; inside a (chunk, peer) block the rows keep their order. So chunk c is one contiguous
// range [offset(c), offset(c + 1)) holding, back to back in peer order, count(c, q) rows per
// peer — exactly one all-to-all's buffer. Sender and receiver build their layouts from the
// same keys, so the counts of every (chunk, peer) agree.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/parallel/expert_chunk.h"
#include "core/real.h"

MOK_NN_BEGIN

struct ChunkLayout {
  int chunks = 1, peers = 1;
  std::vector<int64_t> pos;    // (rows) position of row i in the chunk-major buffer
  std::vector<int64_t> count;  // (chunks · peers) rows of chunk c for peer q at c·peers + q
  std::vector<int64_t> start;  // (chunks + 1) first row of each chunk; start[chunks] = rows

  ChunkLayout() = default;
  ChunkLayout(const std::vector<int64_t>& rows_per_peer, const std::vector<int>& key, int chunks);
  // The blocks alone, from their counts (chunks · peers, at c·peers + q): where the rows were
  // placed on the device (the GPU plan), so `pos` stays empty.
  static ChunkLayout from_counts(std::vector<int64_t> counts, int chunks, int peers);

  int64_t offset(int c) const { return start[static_cast<size_t>(c)]; }
  // Counts of chunk c per peer, times `scale` (values per row), for all_to_all_v.
  std::vector<int64_t> counts(int c, int64_t scale) const;
};

MOK_NN_END
