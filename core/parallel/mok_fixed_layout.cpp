// MokDispatcher's forward in the fixed layout (MokOptions::fixed_layout_max_rows;
// core/parallel/fixed_row_exchange.h): one row per (token, rank) to every rank, its k entries
// the token's experts there in slot order, nothing counted. The same rows per expert in the
// same order as the counted plans and the same sums, so the same results bit for bit when
// they would shadow nothing.
#include "core/backend/exec_context.h"
#include "core/parallel/fixed_row_exchange.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/parallel/row_moves.h"

MOK_NN_BEGIN

Tensor MokDispatcher::forward_fixed(const Tensor& x, const RoutingDecision& r, ExpertBank& bank) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int R = comm_.size(), me = comm_.rank();
  const int64_t n = x.dim(0);
  const int k = r.k;
  check_fixed_layout_bank(placement_, me, bank);
  if (fixed_tables_.owner.empty()) fixed_tables_ = upload_expert_destinations(placement_);

  // Every token to every rank, its entries there gated by the destination, one row back each.
  const ShipRows ship =
      ops.ship_rows(r.expert, r.gate, fixed_tables_.owner, fixed_tables_.local_index, k, R, /*every_row=*/true);
  Tensor results = exchange_fixed_rows(plane_, placement_, x, 1, ship, k, /*gated=*/true, bank);

  // y[t]: the token's rows summed in the order of each rank's first slot (ranks without
  // entries for it skipped), as the counted plan sums its groups.
  Tensor row_of_group = cx.empty({n * k}, DType::i32);
  cx.allocator().memset(row_of_group.raw(), 0xff, row_of_group.bytes());  // −1
  ops.scatter_positions(ship.head_pair, 0, row_of_group);
  Tensor y = cx.activation({n, x.dim(1)});
  ops.combine_pairs(results, row_of_group, nullptr, n, k, y);

  my_shadowed_.clear();
  log_.fixed_layout = true;
  log_.pairs = n * k - r.dropped;
  log_.shipped_rows = (R - 1) * n;
  log_.chunks = 1;
  row_bytes_ = mok::row_bytes(x);
  kept_ = false;
  finish_log(fwd_before_, true);
  return y;
}

MOK_NN_END
