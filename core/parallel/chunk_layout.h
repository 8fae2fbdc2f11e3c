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

#include "core/real.h"

MOK_NN_BEGIN

struct ChunkLayout {
  int chunks = 1, peers = 1;
  std::vector<int64_t> pos;    // (rows) position of row i in the chunk-major buffer
  std::vector<int64_t> count;  // (chunks · peers) rows of chunk c for peer q at c·peers + q
  std::vector<int64_t> start;  // (chunks + 1) first row of each chunk; start[chunks] = rows

  ChunkLayout() = default;
  ChunkLayout(const std::vector<int64_t>& rows_per_peer, const std::vector<int>& key, int chunks);

  int64_t offset(int c) const { return start[static_cast<size_t>(c)]; }
  // Counts of chunk c per peer, times `scale` (values per row), for all_to_all_v.
  std::vector<int64_t> counts(int c, int64_t scale) const;
};

// Chunk of local expert l (of L on its rank) when the experts are cut into C consecutive
// groups: ⌊l·C/L⌋, so every chunk gets ⌊L/C⌋ or ⌈L/C⌉ experts (none when L < C).
inline int expert_chunk(int l, int L, int C) {
  return static_cast<int>(static_cast<int64_t>(l) * C / L);
}

MOK_NN_END
