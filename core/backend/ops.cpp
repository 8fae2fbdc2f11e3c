// Ops' default methods that need more than a line (core/backend/ops.h).
#include "core/backend/ops.h"

#include <stdexcept>
#include <string>

MOK_NN_BEGIN

std::vector<int64_t> Ops::counted_offsets(const std::vector<int64_t>& counts, int experts, int64_t pairs) {
  if (static_cast<int>(counts.size()) != experts)
    throw std::invalid_argument("sort_pairs_counted: " + std::to_string(counts.size()) + " counts for " +
                                std::to_string(experts) + " experts");
  std::vector<int64_t> off(static_cast<size_t>(experts) + 1, 0);
  for (size_t e = 0; e < counts.size(); ++e) off[e + 1] = off[e] + counts[e];
  if (off.back() > pairs)
    throw std::logic_error("sort_pairs_counted: " + std::to_string(off.back()) + " rows counted for " +
                           std::to_string(pairs) + " pairs");
  return off;
}

void Ops::check_ship_chunks(const ShipChunks* chunks, int ranks, bool every_row, const char* op) {
  if (!chunks) return;
  if (every_row) throw std::invalid_argument(std::string(op) + ": chunks of the fixed layout (every_row)");
  if (chunks->chunks < 1) throw std::invalid_argument(std::string(op) + ": " + std::to_string(chunks->chunks) + " chunks");
  if (static_cast<int>(chunks->locals.size()) != ranks)
    throw std::invalid_argument(std::string(op) + ": local expert counts of " + std::to_string(chunks->locals.size()) +
                                " ranks for " + std::to_string(ranks));
  for (int32_t L : chunks->locals)
    if (L < 1) throw std::invalid_argument(std::string(op) + ": a rank with " + std::to_string(L) + " local experts");
}

PairOrder Ops::sort_pairs_counted(Tensor& expert, int experts, const std::vector<int64_t>& counts) {
  counted_offsets(counts, experts, expert.numel());  // for its checks of the counts
  PairOrder out = sort_pairs(expert, experts, 0);
  for (int e = 0; e < experts; ++e)
    if (out.segments.size(e) != counts[static_cast<size_t>(e)])
      throw std::logic_error("sort_pairs_counted: expert " + std::to_string(e) + " has " +
                             std::to_string(out.segments.size(e)) + " pairs, the caller counted " +
                             std::to_string(counts[static_cast<size_t>(e)]));
  return out;
}

MOK_NN_END
