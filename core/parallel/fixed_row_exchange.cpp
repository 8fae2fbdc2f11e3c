#include "core/parallel/fixed_row_exchange.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/parallel/row_moves.h"

MOK_NN_BEGIN

PairOrder sort_pairs_pads_last(Ops& ops, Tensor& entry, int experts) {
  ops.replace_negative(entry, experts);
  PairOrder all = ops.sort_pairs(entry, experts + 1, 0, /*all_routed=*/true);
  ops.unroute_group(entry, experts, all.row_of_pair);
  PairOrder out;
  out.order = std::move(all.order);
  out.row_of_pair = std::move(all.row_of_pair);
  out.segments = all.segments.leading(experts);
  out.load = all.load.view(0, {static_cast<int64_t>(experts)});
  return out;
}

ExpertDestinations upload_expert_destinations(const ExpertPlacement& placement) {
  const int E = placement.experts();
  std::vector<int32_t> owner(static_cast<size_t>(E)), local(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) {
    owner[e] = placement.owner(e);
    local[e] = placement.local_index(e);
  }
  return {upload_i32(owner), upload_i32(local)};
}

void check_fixed_layout_bank(const ExpertPlacement& placement, int rank, const ExpertBank& bank) {
  for (int q = 0; q < placement.ranks(); ++q) {
    const std::vector<int>& on = placement.experts_on(q);
    if (!std::is_sorted(on.begin(), on.end()))
      throw std::logic_error("fixed row exchange: rank " + std::to_string(q) + "'s experts are not listed ascending (" +
                             placement.describe() + ")");
  }
  if (!bank.grouped || bank.size() != placement.experts())
    throw std::logic_error("fixed row exchange: needs this rank's experts stacked");
  for (int e = 0; e < placement.experts(); ++e)
    if ((bank.experts[e] != nullptr) != (placement.owner(e) == rank))
      throw std::logic_error("fixed row exchange: rank " + std::to_string(rank) + (bank.experts[e] ? " holds" : " lacks") +
                             " expert " + std::to_string(e) + ", placed on rank " +
                             std::to_string(placement.owner(e)));
}

Tensor exchange_fixed_rows(DataPlane& plane, const ExpertPlacement& placement, const Tensor& x, int x_div,
                           const ShipRows& ship, int entries, bool gated, ExpertBank& bank) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int R = plane.size(), me = plane.rank();
  const int64_t d = x.dim(1);
  if (static_cast<int>(ship.rows.size()) != R)
    throw std::invalid_argument("exchange_fixed_rows: rows for " + std::to_string(ship.rows.size()) + " ranks, not " +
                                std::to_string(R));
  const int64_t units = ship.rows[0];
  for (int64_t r : ship.rows)
    if (r != units) throw std::invalid_argument("exchange_fixed_rows: ship rows differ between ranks (not every_row)");
  const int L = static_cast<int>(placement.experts_on(me).size());
  if (!bank.grouped || bank.grouped->groups() != L)
    throw std::logic_error("exchange_fixed_rows: the stack holds " +
                           std::to_string(bank.grouped ? bank.grouped->groups() : 0) + " experts, rank " +
                           std::to_string(me) + " owns " + std::to_string(L));
  const std::vector<int64_t> rows(static_cast<size_t>(R), units);  // to and from every rank
  const int64_t total = units * R;

  // The entries (what the destination sorts by), their gates and the rows: one group.
  Tensor recv_entry = cx.empty({total, entries}, DType::i32);
  Tensor recv_gate = gated ? cx.empty({total, entries}, kRealDType) : Tensor();
  Tensor send_x = cx.activation({total, d});
  if (total) ops.gather_rows(x, ship.token, x_div, send_x);
  Tensor recv_x = cx.activation({total, d});
  std::vector<DataPlane::RowMove> moves{{&ship.entry, rows, &recv_entry, rows, CommPurpose::control}};
  if (gated) moves.push_back({&ship.gate, rows, &recv_gate, rows, CommPurpose::control});
  moves.push_back({&send_x, rows, &recv_x, rows, CommPurpose::dispatch});
  plane.all_to_all_rows_group(moves);
  send_x.reset();

  // The local experts on the entries naming them; the pads' rows ride along, uncomputed.
  PairOrder sorted = sort_pairs_pads_last(ops, recv_entry, L);
  const int64_t pairs = total * entries;
  Tensor xe = cx.activation({pairs, d});
  if (pairs) ops.gather_rows(recv_x, sorted.order, entries, xe);
  recv_x.reset();
  Tensor ye = bank.grouped->forward(std::move(xe), sorted.segments, /*keep=*/false);
  Tensor back = cx.activation({total, d});
  if (total) ops.combine_pairs(ye, sorted.row_of_pair, gated ? &recv_gate : nullptr, total, entries, back);
  ye.reset();

  Tensor results = cx.activation({total, d});
  plane.all_to_all_rows(back, rows, results, rows, CommPurpose::combine);
  return results;
}

Tensor fixed_layout_forward(DataPlane& plane, const ExpertPlacement& placement, ExpertDestinations& tables,
                            const Tensor& x, const RoutingDecision& r, ExpertBank& bank, bool per_token) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int64_t n = x.dim(0);
  const int k = r.k;
  check_fixed_layout_bank(placement, plane.rank(), bank);
  if (tables.owner.empty()) tables = upload_expert_destinations(placement);
  // Units: tokens with k slots each, or the n·k pairs as units of one slot (row p / k of x).
  const int unit_slots = per_token ? k : 1;
  const ShipRows ship =
      ops.ship_rows(r.expert, r.gate, tables.owner, tables.local_index, unit_slots, plane.size(), /*every_row=*/true);
  const Tensor results =
      exchange_fixed_rows(plane, placement, x, per_token ? 1 : k, ship, unit_slots, /*gated=*/per_token, bank);
  // Where each unit's first slot on a rank finds that rank's row: a token's group (MoK), a
  // pair's output (classic); −1 for slots of no row (dropped, or not a group's first).
  Tensor row_of_slot = cx.empty({n * k}, DType::i32);
  cx.allocator().memset(row_of_slot.raw(), 0xff, row_of_slot.bytes());  // −1
  ops.scatter_positions(ship.head_pair, 0, row_of_slot);
  Tensor y = cx.activation({n, x.dim(1)});
  ops.combine_pairs(results, row_of_slot, per_token ? nullptr : &r.gate, n, k, y);
  return y;
}

MOK_NN_END
