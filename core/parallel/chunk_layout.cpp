#include "core/parallel/chunk_layout.h"

#include <stdexcept>
#include <string>
#include <utility>

MOK_NN_BEGIN

ChunkLayout::ChunkLayout(const std::vector<int64_t>& rows_per_peer, const std::vector<int>& key,
                         int chunks_)
    : chunks(chunks_), peers(static_cast<int>(rows_per_peer.size())) {
  int64_t rows = 0;
  for (int64_t r : rows_per_peer) rows += r;
  if (static_cast<int64_t>(key.size()) != rows)
    throw std::invalid_argument("ChunkLayout: one key per row needed");
  count.assign(static_cast<size_t>(chunks) * peers, 0);
  {
    int64_t i = 0;
    for (int q = 0; q < peers; ++q)
      for (int64_t m = 0; m < rows_per_peer[q]; ++m, ++i) {
        const int c = key[static_cast<size_t>(i)];
        if (c < 0 || c >= chunks) throw std::invalid_argument("ChunkLayout: key out of range");
        count[static_cast<size_t>(c) * peers + q]++;
      }
  }
  // First position of each (chunk, peer) block, chunk-major.
  std::vector<int64_t> next(count.size());
  start.assign(static_cast<size_t>(chunks) + 1, 0);
  int64_t at = 0;
  for (int c = 0; c < chunks; ++c) {
    start[c] = at;
    for (int q = 0; q < peers; ++q) {
      next[static_cast<size_t>(c) * peers + q] = at;
      at += count[static_cast<size_t>(c) * peers + q];
    }
  }
  start[chunks] = at;
  pos.resize(static_cast<size_t>(rows));
  int64_t i = 0;
  for (int q = 0; q < peers; ++q)
    for (int64_t m = 0; m < rows_per_peer[q]; ++m, ++i)
      pos[i] = next[static_cast<size_t>(key[i]) * peers + q]++;
}

ChunkLayout ChunkLayout::from_counts(std::vector<int64_t> counts, int chunks, int peers) {
  if (chunks < 1 || peers < 1 || counts.size() != static_cast<size_t>(chunks) * peers)
    throw std::invalid_argument("ChunkLayout: " + std::to_string(counts.size()) + " counts for " +
                                std::to_string(chunks) + " chunks of " + std::to_string(peers) + " peers");
  ChunkLayout l;
  l.chunks = chunks;
  l.peers = peers;
  l.count = std::move(counts);
  l.start.assign(static_cast<size_t>(chunks) + 1, 0);
  for (int c = 0; c < chunks; ++c) {
    l.start[c + 1] = l.start[c];
    for (int q = 0; q < peers; ++q) l.start[c + 1] += l.count[static_cast<size_t>(c) * peers + q];
  }
  return l;
}

std::vector<int64_t> ChunkLayout::counts(int c, int64_t scale) const {
  std::vector<int64_t> out(static_cast<size_t>(peers));
  for (int q = 0; q < peers; ++q) out[q] = count[static_cast<size_t>(c) * peers + q] * scale;
  return out;
}

MOK_NN_END
