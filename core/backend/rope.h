#pragma once
// Rotary position embedding. Within each head of width hd, element i pairs with i + hd/2 and
// the pair turns by angle pos · theta^(−2i/hd). Backward is the inverse turn.

#include <cstdint>
#include <vector>

#include "core/real.h"

MOK_NN_BEGIN

class RopeTable {
 public:
  RopeTable() = default;
  RopeTable(int max_positions, int head_dim, double theta);
  int max_positions() const { return max_positions_; }
  int head_dim() const { return head_dim_; }
  // Unique per table built (copies share it): what a device keeps its copy of the table under.
  uint64_t id() const { return id_; }
  const real* cos_row(int pos) const { return cos_.data() + static_cast<int64_t>(pos) * (head_dim_ / 2); }
  const real* sin_row(int pos) const { return sin_.data() + static_cast<int64_t>(pos) * (head_dim_ / 2); }

 private:
  int max_positions_ = 0, head_dim_ = 0;
  uint64_t id_ = 0;
  std::vector<real> cos_, sin_;  // (max_positions, head_dim/2)
};

// Turns `heads` consecutive heads of width hd at the start of each of `rows` rows (row stride
// ld). Row r sits at position pos0 + r % seq. inverse = the transposed turn (backward).
void rope_apply(real* x, int64_t rows, int64_t ld, int heads, int seq, int pos0,
                const RopeTable& table, bool inverse);

MOK_NN_END
