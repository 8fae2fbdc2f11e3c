#pragma once
// The fixed layout of an expert-parallel forward that is not kept for backward (a decode step):
// every rank sends every peer the same number of rows whatever the routing, so no count
// crosses to the host and nothing in the MoE layer waits for the device.
//
//   source   ShipRows with every_row (Ops::ship_rows): row (q, u) for every destination rank q
//            and unit u, in that order — a unit is a token with up to k entries (MoK: one row
//            per token and destination) or a (token, slot) pair with one entry (classic: one
//            row per pair and destination). A unit without entries on q is a row of pads.
//   exchange the entries, their gates where the destination applies them, and the rows, in one
//            group (DataPlane::all_to_all_rows_group): `units` rows to and from every rank,
//            known on every rank without a message
//   dest     the entries sorted by local expert with the pads as one group after the experts
//            (sort_pairs_pads_last: the offsets stay on the device); one grouped product over
//            the experts' rows (the pads' rows are gathered but no expert computes them); each
//            received row's sum over its entries in slot order (gated or not; a row of pads
//            sums to 0); back to the source
//   source   (R·units, d): row (q, u) is what rank q computed for unit u — the dispatcher
//            combines these (core/parallel/classic_dispatcher.h, mok_dispatcher.h).
//
// Every row moves, pads included — the price of not counting — and the data plane counts what
// moved. Each expert sees its rows in source-rank order and unit order, as in the counted
// exchange, and every sum keeps its order, so the results are bitwise those of the counted
// plan (tests/core/test_fixed_row_exchange.cpp).
//
// Preconditions, which the caller keeps: every rank calls with the same `units` (generation:
// B/R rows per rank on every rank), the placement lists each rank's experts ascending, and
// this rank holds exactly the experts placed on it, stacked (check_fixed_layout_bank).

#include <cstdint>

#include "core/backend/ops.h"
#include "core/model/expert_bank.h"
#include "core/parallel/data_plane.h"
#include "core/parallel/expert_placement.h"
#include "core/routing/routing_decision.h"

MOK_NN_BEGIN

// Sorts `entry` (m) i32 by expert as Ops::sort_pairs does with every pair routed, entries
// given as −1 (pads) going into one group after the `experts` groups: `entry` is rewritten
// (pads become `experts`), row_of_pair is −1 for the pads, order holds every entry (the pads
// last) and segments are the experts' only (RowSegments::leading) over all m rows.
PairOrder sort_pairs_pads_last(Ops& ops, Tensor& entry, int experts);

// Every expert's owner and its index there (E i32 each), on the current device: the
// destination tables of Ops::ship_rows in the fixed layout (a dispatcher makes them once).
struct ExpertDestinations {
  Tensor owner, local_index;
};
ExpertDestinations upload_expert_destinations(const ExpertPlacement& placement);

// Throws std::logic_error unless the fixed layout can run here: every rank's experts listed
// ascending and this rank holding exactly its own, stacked.
void check_fixed_layout_bank(const ExpertPlacement& placement, int rank, const ExpertBank& bank);

// A dispatcher's whole forward in the fixed layout: y (n, d) for the routing `r` of x (n, d).
//   per_token (MokDispatcher): a unit per token with its k entries on the destination, which
//     gates them; y[t] sums the token's rows in the order of each rank's first slot, as the
//     counted MoK plan sums its groups.
//   otherwise (ClassicDispatcher): a unit per (token, slot) pair with one entry; the owner
//     returns the plain expert output and y[t] = Σ_s gate(t,s) · out(t,s), slots in order, as
//     the counted classic forward combines.
// Checks the bank (check_fixed_layout_bank) and makes `tables` on first use.
Tensor fixed_layout_forward(DataPlane& plane, const ExpertPlacement& placement, ExpertDestinations& tables,
                            const Tensor& x, const RoutingDecision& r, ExpertBank& bank, bool per_token);

// The exchange above. x (n, d): the layer's rows; ship: Ops::ship_rows(…, every_row = true)
// with `entries` entries per row, rows[q] = units for every q; ship.token[i] / x_div is the
// row of x that unit i carries (MoK: tokens, x_div 1; classic: pairs, x_div k). gated: the
// destination scales each entry by its gate (ship.gate moves too). Returns (R·units, d).
Tensor exchange_fixed_rows(DataPlane& plane, const ExpertPlacement& placement, const Tensor& x, int x_div,
                           const ShipRows& ship, int entries, bool gated, ExpertBank& bank);

MOK_NN_END
