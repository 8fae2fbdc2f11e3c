// MokDispatcher's step with the plan made by the rank's ops (MokPlanPlace::device; see
// core/parallel/mok_dispatcher.h): the same rows in the same order as the host plan with one
// chunk, so the same results bit for bit, with only counts crossing to the host.
#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/parallel/row_moves.h"
#include "core/routing/routing_decision.h"

MOK_NN_BEGIN

Tensor MokDispatcher::forward_device(const Tensor& x, const RoutingDecision& r, ExpertBank& bank, bool keep,
                                     int64_t f) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int R = comm_.size(), me = comm_.rank();
  const int E = placement_.experts();
  const int64_t n = x.dim(0), d = x.dim(1);
  const int k = r.k;
  const std::vector<int>& mine = placement_.experts_on(me);
  const int L = static_cast<int>(mine.size());

  // 0. the decisions, from the slot shares, made on the device; 1. the rows to ship, one per
  // (destination, token), entries in slot order. ship_rows waits for its row counts, and that
  // one wait brings the decisions and the pair offsets too.
  std::vector<int> owner(static_cast<size_t>(E));
  std::vector<int32_t> local(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) {
    owner[e] = placement_.owner(e);
    local[e] = placement_.local_index(e);
  }
  const PendingDecisions decisions = start_decisions(r, owner, x.dtype(), d, f, keep);
  ship_ = ops.ship_rows(r.expert, r.gate, decisions.dest, upload_i32(local), k, R);
  const std::vector<uint8_t> my_decision = finish_decisions(decisions, owner);
  const std::vector<int64_t>& off = r.pairs.segments.host();  // (E + 1) expert-major rows of this rank's pairs
  for (int e = 0; e < E; ++e) {
    const int64_t pairs = off[e + 1] - off[e];
    log_.pairs += pairs;
    if (owner[e] == me) {
      log_.own_pairs += pairs;
    } else if (my_decision[e]) {
      log_.shadow_pairs += pairs;
    } else {
      log_.shipped_pairs += pairs;
    }
  }
  send_rows_ = ship_.rows;
  int64_t sent_total = 0;
  for (int q = 0; q < R; ++q) {
    sent_total += send_rows_[q];
    if (q != me) log_.shipped_rows += send_rows_[q];
  }

  // 2. heads; 3. weights of shadowed experts.
  exchange_heads(off, my_decision);
  chunks_ = 1;
  log_.chunks = 1;
  grouped_ = true;
  fetch_shadow_weights(bank, d, f);
  int64_t recv_total = 0;
  for (int q = 0; q < R; ++q) recv_total += recv_rows_[q];

  // 4. entries and gates of the rows; 5. the rows: one group, started beside the shadow
  // copies' products (7.), which need none of it.
  Tensor recv_entry = cx.empty({recv_total, k}, DType::i32);
  recv_gate_dev_ = cx.empty({recv_total, k}, kRealDType);
  Tensor send_x = cx.activation({sent_total, d});
  if (sent_total) ops.gather_rows(x, ship_.token, 1, send_x);
  Tensor recv_x = cx.activation({recv_total, d});
  const DataPlane::RowMove moves[] = {
      {&ship_.entry, send_rows_, &recv_entry, recv_rows_, CommPurpose::control},
      {&ship_.gate, send_rows_, &recv_gate_dev_, recv_rows_, CommPurpose::control},
      {&send_x, send_rows_, &recv_x, recv_rows_, CommPurpose::dispatch}};
  DataPlane::Transfer rows_in_flight = plane_.start_group(moves);
  send_x.reset();  // (held by the transfer until it is finished)

  // 7. the shadow copies on their pairs (expert-major: the router's order, shadowed experts'
  // segments), gated; each shadowed pair is its own group.
  shadow_rows_ = 0;
  std::vector<int64_t> shadow_counts;
  for (int e : my_shadowed_) {
    shadow_counts.push_back(off[e + 1] - off[e]);
    shadow_rows_ += shadow_counts.back();
  }
  shadow_order_ = cx.empty({shadow_rows_}, DType::i32);
  {
    std::vector<Allocator::CopyRange> segments;  // one launch on a GPU
    int64_t at = 0;
    for (size_t i = 0; i < my_shadowed_.size(); ++i) {
      const int64_t m = shadow_counts[i];
      segments.push_back({shadow_order_.view(at, {m}).raw(), r.pairs.order.view(off[my_shadowed_[i]], {m}).raw(),
                          m * static_cast<int64_t>(sizeof(int32_t))});
      at += m;
    }
    cx.allocator().copy_ranges(segments);
  }
  Tensor results = cx.activation({shadow_rows_ + sent_total, d});
  if (shadow_rows_) {
    GroupedSwiGlu& stack = *shadow_bank_->grouped;
    Tensor xs = cx.activation({shadow_rows_, d});
    ops.gather_rows(x, shadow_order_, k, xs);
    Tensor ys = stack.forward(std::move(xs), stacked_row_offsets(*shadow_bank_, my_shadowed_, shadow_counts), keep);
    Tensor g = cx.empty({shadow_rows_}, kRealDType);
    ops.pairs_to_rows(r.gate, shadow_order_, g);
    Tensor dst = row_block(results, 0, shadow_rows_);
    ops.scale_rows(ys, g, dst);
  }
  plane_.finish(rows_in_flight);

  // 6. the local experts on the received rows: entries sorted by expert (receive order within
  // an expert; the counts per expert came with the heads), one grouped product, then each
  // row's gated sum over its entries, back.
  recv_order_ = ops.sort_pairs_counted(recv_entry, L, recv_entries_);  // counts from the heads: no wait
  std::vector<int64_t> local_rows(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) {
    local_rows[l] = recv_order_.segments.size(l);
    if (local_rows[l] && !bank.experts[mine[l]])
      throw std::logic_error("MokDispatcher: expert " + std::to_string(mine[l]) + " is placed on rank " +
                             std::to_string(me) + " but not held here");
  }
  group_offsets_ = stacked_row_offsets(bank, mine, local_rows);
  Tensor xe = cx.activation({recv_order_.rows(), d});
  if (recv_order_.rows()) ops.gather_rows(recv_x, recv_order_.order, k, xe);
  recv_x.reset();
  Tensor ye = bank.grouped->forward(std::move(xe), group_offsets_, keep);
  Tensor back_y = cx.activation({recv_total, d});
  if (recv_total) ops.combine_pairs(ye, recv_order_.row_of_pair, &recv_gate_dev_, recv_total, k, back_y);
  ye.reset();
  Tensor got_y = row_block(results, shadow_rows_, sent_total);
  plane_.all_to_all_rows(back_y, recv_rows_, got_y, send_rows_, CommPurpose::combine);
  back_y.reset();

  // 9. sum the groups in slot order.
  row_of_group_ = cx.empty({n * k}, DType::i32);
  cx.allocator().memset(row_of_group_.raw(), 0xff, row_of_group_.bytes());  // −1
  ops.scatter_positions(shadow_order_, 0, row_of_group_);
  ops.scatter_positions(ship_.head_pair, static_cast<int32_t>(shadow_rows_), row_of_group_);
  Tensor y = cx.activation({n, d});
  ops.combine_pairs(results, row_of_group_, nullptr, n, k, y);

  row_bytes_ = mok::row_bytes(x);
  kept_ = keep;
  if (keep) {
    gate_ = r.gate.clone(MemTag{});
    finish_log(fwd_before_, false);
  } else {
    ship_ = ShipRows{};
    recv_gate_dev_.reset();
    recv_order_ = PairOrder{};
    shadow_order_.reset();
    row_of_group_.reset();
    finish_log(fwd_before_, true);
  }
  return y;
}

Tensor MokDispatcher::backward_device(const Tensor& dy, ExpertBank& bank, Tensor& dgate_out) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int R = comm_.size();
  const int64_t n = n_, d = dy.dim(1);
  const int k = k_;
  int64_t sent_total = 0, recv_total = 0;
  std::vector<int64_t> send_k(R), recv_k(R);
  for (int q = 0; q < R; ++q) {
    sent_total += send_rows_[q];
    recv_total += recv_rows_[q];
    send_k[q] = send_rows_[q] * k;
    recv_k[q] = recv_rows_[q] * k;
  }

  // dy once per sent row to its destination (the reverse of the combine), beside the shadow
  // copies' backward, which needs none of it.
  Tensor send_dy = cx.activation({sent_total, d});
  if (sent_total) ops.gather_rows(dy, ship_.token, 1, send_dy);
  Tensor recv_dy = cx.activation({recv_total, d});
  const DataPlane::RowMove dy_move[] = {{&send_dy, send_rows_, &recv_dy, recv_rows_, CommPurpose::combine}};
  DataPlane::Transfer dy_in_flight = plane_.start_group(dy_move);
  send_dy.reset();

  // The groups' input gradients: the shadowed pairs' rows first, then the returned rows.
  Tensor results = cx.activation({shadow_rows_ + sent_total, d});
  Tensor shadow_dgate = cx.empty({shadow_rows_}, kRealDType);
  zero_shadow_gradients();
  if (shadow_rows_) {
    Tensor ge = cx.empty({shadow_rows_}, kRealDType);
    ops.pairs_to_rows(gate_, shadow_order_, ge);
    Tensor dys = cx.activation({shadow_rows_, d});
    ops.gather_rows(dy, shadow_order_, k, dys);
    Tensor dxs = shadow_bank_->grouped->backward_gated(dys, ge, shadow_dgate);
    cx.allocator().copy_within(row_block(results, 0, shadow_rows_).raw(), dxs.raw(), dxs.bytes());
  }
  plane_.finish(dy_in_flight);

  // The local experts' gated backward over the forward's batch, one reduced dx per row back.
  const int64_t batch_rows = recv_order_.rows();
  Tensor dye = cx.activation({batch_rows, d});
  if (batch_rows) ops.gather_rows(recv_dy, recv_order_.order, k, dye);
  recv_dy.reset();
  Tensor ge = cx.empty({batch_rows}, kRealDType);
  if (batch_rows) ops.pairs_to_rows(recv_gate_dev_, recv_order_.order, ge);
  Tensor dge = cx.empty({batch_rows}, kRealDType);
  Tensor dxe = bank.grouped->backward_gated(dye, ge, dge);
  dye.reset();
  Tensor back_dx = cx.activation({recv_total, d});
  if (recv_total) ops.combine_pairs(dxe, recv_order_.row_of_pair, nullptr, recv_total, k, back_dx);
  dxe.reset();
  Tensor got_dx = row_block(results, shadow_rows_, sent_total);
  // The received entries' gate gradients (0 for pads), back to the sources with the dx rows.
  Tensor back_dgate = cx.empty({recv_total * k}, kRealDType);
  ops.rows_to_pairs(dge, recv_order_.order, back_dgate);
  dge.reset();
  Tensor got_dgate = cx.empty({sent_total * k}, kRealDType);
  const DataPlane::RowMove moves[] = {{&back_dx, recv_rows_, &got_dx, send_rows_, CommPurpose::dispatch},
                                      {&back_dgate, recv_k, &got_dgate, send_k, CommPurpose::control}};
  plane_.all_to_all_rows_group(moves);
  back_dx.reset();

  return_shadow_gradients(bank, d);

  // Gate gradients per pair: the shadowed pairs', then the returned entries' (pads skipped).
  const int64_t gate_rows = shadow_rows_ + sent_total * k;
  Tensor dgate_rows = cx.empty({gate_rows}, kRealDType);
  Tensor pair_of_row = cx.empty({gate_rows}, DType::i32);
  cx.allocator().copy_ranges(
      {{dgate_rows.raw(), shadow_dgate.raw(), shadow_dgate.bytes()},
       {pair_of_row.raw(), shadow_order_.raw(), shadow_order_.bytes()},
       {dgate_rows.view(shadow_rows_, {sent_total * k}).raw(), got_dgate.raw(), got_dgate.bytes()},
       {pair_of_row.view(shadow_rows_, {sent_total * k}).raw(), ship_.pair.raw(), ship_.pair.bytes()}});
  dgate_out = cx.empty({n * k}, kRealDType);
  ops.rows_to_pairs(dgate_rows, pair_of_row, dgate_out);  // 0 for dropped pairs
  Tensor dx = cx.activation({n, d});
  ops.combine_pairs(results, row_of_group_, nullptr, n, k, dx);

  finish_log(fwd_before_, true);
  kept_ = false;
  ship_ = ShipRows{};
  recv_gate_dev_.reset();
  recv_order_ = PairOrder{};
  shadow_order_.reset();
  row_of_group_.reset();
  gate_.reset();
  return dx;
}

MOK_NN_END
