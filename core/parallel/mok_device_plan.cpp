// MokDispatcher's step with the plan made by the rank's ops (MokPlanPlace::device; see
// core/parallel/mok_dispatcher.h): the same rows, and every expert the same batch in the same
// order, as the host plan, so the same results bit for bit, with only counts crossing to the
// host.
//
// In C chunks (a kept forward with MokOptions::overlap_chunks ≥ 2) each rank's local experts
// are cut into C consecutive groups (expert_chunk). A row travels in the chunk of its lowest
// entry's group and comes back in its highest's; buffers are chunk-major (chunk, then peer,
// then token), each chunk one all-to-all. The layouts are permutations of the one-chunk rows,
// made on the device: every row's chunk keys (Ops::row_chunk_keys), sorted stably with counts
// the host already has (ship_rows' one read brings the sender's; the heads bring the
// receiver's). Entries and gates still go out whole and first, so the expert-major batch is
// the one-chunk batch; group c runs once chunks 0…c are in, while chunk c + 1 travels and
// chunk c − 1's results go back (classic's pattern, core/parallel/classic_dispatcher_chunks.cpp).
// Backward goes the same way: dy like the rows, dx and the gate gradients like the results.
#include <algorithm>
#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/parallel/row_moves.h"
#include "core/routing/routing_decision.h"

MOK_NN_BEGIN

namespace {

// Chunk c's rows of a chunk-major (rows, …) tensor laid out as `l`.
Tensor chunk_rows(const Tensor& t, const ChunkLayout& l, int c) {
  return row_block(t, l.offset(c), l.offset(c + 1) - l.offset(c));
}

// Another handle to t's elements.
Tensor alias(const Tensor& t) { return t.view(0, t.shape()); }

// A (rows) i32 table as (rows, 1), for gather_rows.
Tensor as_column(const Tensor& t) { return t.view(0, {t.numel(), 1}); }

// Rows of `rows` (rows, w) permuted: out[i] = rows[order[i]].
Tensor permuted(const Tensor& rows, const Tensor& order) {
  const ExecContext& cx = ExecContext::current();
  Tensor out = cx.empty({order.numel(), rows.dim(1)}, rows.dtype());
  if (order.numel()) cx.ops().gather_rows(rows, order, 1, out);
  return out;
}

}  // namespace

int MokDispatcher::device_chunks(bool keep) const {
  if (!keep || options_.overlap_chunks < 2) return 1;  // decoding and validation: one chunk
  int most = 1;
  for (int q = 0; q < placement_.ranks(); ++q)
    most = std::max(most, static_cast<int>(placement_.experts_on(q).size()));
  return std::min(options_.overlap_chunks, most);
}

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
  const int C = device_chunks(keep);

  // 0. the decisions, from the slot shares, made on the device; 1. the rows to ship, one per
  // (destination, token), entries in slot order. ship_rows waits for its row counts (by chunk
  // too), and that one wait brings the decisions and the pair offsets too.
  std::vector<int> owner(static_cast<size_t>(E));
  std::vector<int32_t> local(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) {
    owner[e] = placement_.owner(e);
    local[e] = placement_.local_index(e);
  }
  ShipChunks cut;
  cut.chunks = C;
  for (int q = 0; q < R; ++q) cut.locals.push_back(std::max(1, static_cast<int>(placement_.experts_on(q).size())));
  const PendingDecisions decisions = start_decisions(r, owner, x.dtype(), d, f, keep);
  ship_ = ops.ship_rows(r.expert, r.gate, decisions.dest, upload_i32(local), k, R, false, C > 1 ? &cut : nullptr);
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

  // 2. heads (with C chunks, the rows of every (chunk, peer) block); 3. weights of shadowed
  // experts.
  exchange_heads(off, my_decision, C);
  chunks_ = C;
  log_.chunks = C;
  grouped_ = true;
  fetch_shadow_weights(bank, d, f);
  int64_t recv_total = 0;
  for (int q = 0; q < R; ++q) recv_total += recv_rows_[q];
  // The chunk-major layouts: rows out by their lowest chunk (send_fwd_, recv_fwd_), back by
  // their highest (send_cmb_, recv_cmb_). One chunk: the rows as ship_rows made them.
  send_fwd_ = ChunkLayout::from_counts(C > 1 ? ship_.chunk_lo : send_rows_, C, R);
  send_cmb_ = ChunkLayout::from_counts(C > 1 ? ship_.chunk_hi : send_rows_, C, R);
  recv_fwd_ = ChunkLayout::from_counts(C > 1 ? recv_chunk_lo_ : recv_rows_, C, R);
  recv_cmb_ = ChunkLayout::from_counts(C > 1 ? recv_chunk_hi_ : recv_rows_, C, R);

  // The sender's rows in their chunks: tokens by lowest chunk; head pairs and entry pairs by
  // highest (the results come back that way).
  token_fwd_ = alias(ship_.token);
  head_pair_cmb_ = alias(ship_.head_pair);
  pair_cmb_ = alias(ship_.pair);
  if (C > 1 && sent_total) {
    Tensor key_lo = cx.empty({sent_total}, DType::i32), key_hi = cx.empty({sent_total}, DType::i32);
    ops.row_chunk_keys(ship_.entry, send_rows_, cut, key_lo, key_hi);
    const PairOrder by_lo = ops.sort_pairs_counted(key_lo, C * R, ship_.chunk_lo);
    const PairOrder by_hi = ops.sort_pairs_counted(key_hi, C * R, ship_.chunk_hi);
    token_fwd_ = permuted(as_column(ship_.token), by_lo.order).view(0, {sent_total});
    head_pair_cmb_ = permuted(as_column(ship_.head_pair), by_hi.order).view(0, {sent_total});
    pair_cmb_ = permuted(ship_.pair, by_hi.order);
  }

  // 4. entries and gates of the rows, whole (the receiver sorts them before any row is in);
  // 5. the rows' first chunk: one group, started beside the shadow copies' products (7.),
  // which need none of it.
  Tensor recv_entry = cx.empty({recv_total, k}, DType::i32);
  recv_gate_dev_ = cx.empty({recv_total, k}, kRealDType);
  Tensor send_x = cx.activation({sent_total, d});
  if (sent_total) ops.gather_rows(x, token_fwd_, 1, send_x);
  Tensor recv_x = cx.activation({recv_total, d});
  std::vector<Tensor> send_x_c(C), recv_x_c(C);
  std::vector<std::vector<int64_t>> sends_fwd(C), recvs_fwd(C), sends_cmb(C), recvs_cmb(C);
  for (int c = 0; c < C; ++c) {
    send_x_c[c] = chunk_rows(send_x, send_fwd_, c);
    recv_x_c[c] = chunk_rows(recv_x, recv_fwd_, c);
    sends_fwd[c] = send_fwd_.counts(c, 1);
    recvs_fwd[c] = recv_fwd_.counts(c, 1);
    sends_cmb[c] = send_cmb_.counts(c, 1);
    recvs_cmb[c] = recv_cmb_.counts(c, 1);
  }
  send_x.reset();
  auto dispatch = [&](int c, std::vector<DataPlane::RowMove>& moves) {
    moves.push_back({&send_x_c[c], sends_fwd[c], &recv_x_c[c], recvs_fwd[c], CommPurpose::dispatch});
  };
  DataPlane::Transfer rows_in_flight;
  {
    std::vector<DataPlane::RowMove> first = {
        {&ship_.entry, send_rows_, &recv_entry, recv_rows_, CommPurpose::control},
        {&ship_.gate, send_rows_, &recv_gate_dev_, recv_rows_, CommPurpose::control}};
    dispatch(0, first);
    rows_in_flight = plane_.start_group(first);
  }

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
  // an expert; the counts per expert came with the heads), one grouped pass over the groups
  // chunk by chunk, each row's gated sum over its entries back in its highest chunk.
  recv_order_ = ops.sort_pairs_counted(recv_entry, L, recv_entries_);  // counts from the heads: no wait
  std::vector<int64_t> local_rows(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) {
    local_rows[l] = recv_order_.segments.size(l);
    if (local_rows[l] && !bank.experts[mine[l]])
      throw std::logic_error("MokDispatcher: expert " + std::to_string(mine[l]) + " is placed on rank " +
                             std::to_string(me) + " but not held here");
  }
  group_offsets_ = stacked_row_offsets(bank, mine, local_rows);
  // Where each row of the expert-major batch lies in recv_x (as sorted pair / k with one chunk),
  // and the received rows' entries and gates in their results' chunks.
  batch_source_ = alias(recv_order_.order);
  batch_div_ = k;
  rows_of_cmb_ = recv_order_.row_of_pair.view(0, {recv_total, k});
  gates_cmb_ = alias(recv_gate_dev_);
  recv_cmb_order_.reset();
  if (C > 1 && recv_total) {
    ShipChunks here;
    here.chunks = C;
    here.locals.assign(static_cast<size_t>(R), std::max(1, L));
    Tensor key_lo = cx.empty({recv_total}, DType::i32), key_hi = cx.empty({recv_total}, DType::i32);
    ops.row_chunk_keys(recv_entry, recv_rows_, here, key_lo, key_hi);
    const PairOrder by_lo = ops.sort_pairs_counted(key_lo, C * R, recv_chunk_lo_);
    const PairOrder by_hi = ops.sort_pairs_counted(key_hi, C * R, recv_chunk_hi_);
    batch_source_ = cx.empty({recv_order_.rows(), 1}, DType::i32);
    if (recv_order_.rows()) ops.gather_rows(as_column(by_lo.row_of_pair), recv_order_.order, k, batch_source_);
    batch_source_ = batch_source_.view(0, {recv_order_.rows()});
    batch_div_ = 1;
    rows_of_cmb_ = permuted(rows_of_cmb_, by_hi.order);
    gates_cmb_ = permuted(recv_gate_dev_, by_hi.order);
    recv_cmb_order_ = alias(by_hi.order);
  }
  recv_entry.reset();
  chunk_groups_ = device_chunk_groups(bank, C);

  Tensor back_y = cx.activation({recv_total, d});
  Tensor got_y = row_block(results, shadow_rows_, sent_total);
  std::vector<Tensor> back_c(C), got_c(C);
  for (int c = 0; c < C; ++c) {
    back_c[c] = chunk_rows(back_y, recv_cmb_, c);
    got_c[c] = chunk_rows(got_y, send_cmb_, c);
  }
  auto combine = [&](int c, std::vector<DataPlane::RowMove>& moves) {
    moves.push_back({&back_c[c], recvs_cmb[c], &got_c[c], sends_cmb[c], CommPurpose::combine});
  };
  GroupedSwiGlu& experts = *bank.grouped;
  Tensor xe = cx.activation({recv_order_.rows(), d});
  Tensor xe_view = xe.view(0, xe.shape());  // the pass's input, filled group by group
  experts.begin_forward(std::move(xe), group_offsets_, keep);
  for (int c = 0; c < C; ++c) {
    std::vector<DataPlane::RowMove> moves;
    if (c + 1 < C) dispatch(c + 1, moves);
    if (c > 0) combine(c - 1, moves);
    DataPlane::Transfer in_flight;
    if (!moves.empty()) in_flight = plane_.start_group(moves);  // (none with one chunk)
    const int64_t b0 = group_offsets_[static_cast<size_t>(chunk_groups_[c])];
    const int64_t b1 = group_offsets_[static_cast<size_t>(chunk_groups_[c + 1])];
    if (b1 > b0) {
      Tensor xe_c = row_block(xe_view, b0, b1 - b0);
      ops.gather_rows(recv_x, batch_source_.view(b0, {b1 - b0}), batch_div_, xe_c);
    }
    if (c + 1 == C) {  // every row is in and gathered: what is left of the received rows goes
      xe_view.reset();  // (the pass may keep its input without a copy)
      recv_x.reset();
      recv_x_c.clear();
    }
    if (chunk_groups_[c] < chunk_groups_[c + 1])  // (a chunk past a rank's last expert is empty)
      experts.forward_experts(chunk_groups_[c], chunk_groups_[c + 1]);
    const int64_t rows_c = recv_cmb_.offset(c + 1) - recv_cmb_.offset(c);
    if (rows_c) {
      const Tensor rop = chunk_rows(rows_of_cmb_, recv_cmb_, c), gates = chunk_rows(gates_cmb_, recv_cmb_, c);
      ops.combine_pairs(experts.pass_output(), rop, &gates, rows_c, k, back_c[c]);
    }
    if (in_flight.pending()) plane_.finish(in_flight);
  }
  Tensor ye = experts.end_forward();  // (the results are in back_y: ye goes before the last exchange)
  ye.reset();
  {
    std::vector<DataPlane::RowMove> last;
    combine(C - 1, last);
    plane_.all_to_all_rows_group(last);
  }
  send_x_c.clear();
  back_c.clear();
  got_c.clear();
  back_y.reset();

  // 9. sum the groups in slot order.
  row_of_group_ = cx.empty({n * k}, DType::i32);
  cx.allocator().memset(row_of_group_.raw(), 0xff, row_of_group_.bytes());  // −1
  ops.scatter_positions(shadow_order_, 0, row_of_group_);
  ops.scatter_positions(head_pair_cmb_, static_cast<int32_t>(shadow_rows_), row_of_group_);
  Tensor y = cx.activation({n, d});
  ops.combine_pairs(results, row_of_group_, nullptr, n, k, y);

  row_bytes_ = mok::row_bytes(x);
  kept_ = keep;
  if (keep) {
    gate_ = r.gate.clone(MemTag{});
    finish_log(fwd_before_, false);
  } else {
    release_device_plan();
    finish_log(fwd_before_, true);
  }
  return y;
}

std::vector<int> MokDispatcher::device_chunk_groups(const ExpertBank& bank, int C) const {
  // Chunk c's local experts as stacked groups: [group of its first expert, the next chunk's).
  const std::vector<int>& mine = placement_.experts_on(comm_.rank());
  const int L = static_cast<int>(mine.size());
  std::vector<int> groups(static_cast<size_t>(C) + 1, 0);
  groups[C] = bank.grouped->groups();
  for (int c = 1; c < C; ++c) {
    int l = 0;
    while (l < L && expert_chunk(l, L, C) < c) ++l;
    const int e = l < L ? mine[l] : placement_.experts();
    int g = 0;
    for (int h = 0; h < std::min(e, bank.size()); ++h) g += bank.experts[h] ? 1 : 0;
    groups[c] = g;
  }
  return groups;
}

void MokDispatcher::release_device_plan() {
  ship_ = ShipRows{};
  recv_gate_dev_.reset();
  recv_order_ = PairOrder{};
  shadow_order_.reset();
  row_of_group_.reset();
  token_fwd_.reset();
  head_pair_cmb_.reset();
  pair_cmb_.reset();
  batch_source_.reset();
  rows_of_cmb_.reset();
  gates_cmb_.reset();
  recv_cmb_order_.reset();
}

Tensor MokDispatcher::backward_device(const Tensor& dy, ExpertBank& bank, Tensor& dgate_out) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int R = comm_.size();
  const int C = chunks_;
  const int64_t n = n_, d = dy.dim(1);
  const int k = k_;
  int64_t sent_total = 0, recv_total = 0;
  for (int q = 0; q < R; ++q) {
    sent_total += send_rows_[q];
    recv_total += recv_rows_[q];
  }

  // dy once per sent row to its destination (the reverse of the combine), laid out as the
  // forward's rows; its first chunk beside the shadow copies' backward, which needs none of it.
  Tensor send_dy = cx.activation({sent_total, d});
  if (sent_total) ops.gather_rows(dy, token_fwd_, 1, send_dy);
  Tensor recv_dy = cx.activation({recv_total, d});
  std::vector<Tensor> send_dy_c(C), recv_dy_c(C);
  std::vector<std::vector<int64_t>> sends_fwd(C), recvs_fwd(C), sends_cmb(C), recvs_cmb(C);
  for (int c = 0; c < C; ++c) {
    send_dy_c[c] = chunk_rows(send_dy, send_fwd_, c);
    recv_dy_c[c] = chunk_rows(recv_dy, recv_fwd_, c);
    sends_fwd[c] = send_fwd_.counts(c, 1);
    recvs_fwd[c] = recv_fwd_.counts(c, 1);
    sends_cmb[c] = send_cmb_.counts(c, 1);
    recvs_cmb[c] = recv_cmb_.counts(c, 1);
  }
  send_dy.reset();
  auto dy_out = [&](int c, std::vector<DataPlane::RowMove>& moves) {
    moves.push_back({&send_dy_c[c], sends_fwd[c], &recv_dy_c[c], recvs_fwd[c], CommPurpose::combine});
  };
  DataPlane::Transfer dy_in_flight;
  {
    std::vector<DataPlane::RowMove> first;
    dy_out(0, first);
    dy_in_flight = plane_.start_group(first);
  }

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

  // The local experts' gated backward over the forward's batch, group by group as dy's chunks
  // come in; each row's dx (reduced over its entries) and its k gate gradients back in the
  // row's highest chunk.
  const int64_t batch_rows = recv_order_.rows();
  Tensor dye = cx.activation({batch_rows, d});
  Tensor ge = cx.empty({batch_rows}, kRealDType);
  if (batch_rows) ops.pairs_to_rows(recv_gate_dev_, recv_order_.order, ge);
  Tensor dge = cx.empty({batch_rows}, kRealDType);
  if (C > 1) cx.allocator().memset(dge.raw(), 0, dge.bytes());  // later groups' are read before they run
  Tensor back_dx = cx.activation({recv_total, d});
  Tensor back_dgate = cx.empty({recv_total, k}, kRealDType);  // in the results' chunks
  Tensor dgate_entries = C > 1 ? cx.empty({recv_total, k}, kRealDType) : alias(back_dgate);  // receive order
  Tensor got_dgate = cx.empty({sent_total, k}, kRealDType);
  Tensor got_dx = row_block(results, shadow_rows_, sent_total);
  std::vector<Tensor> back_dx_c(C), back_dgate_c(C), got_dx_c(C), got_dgate_c(C);
  for (int c = 0; c < C; ++c) {
    back_dx_c[c] = chunk_rows(back_dx, recv_cmb_, c);
    back_dgate_c[c] = chunk_rows(back_dgate, recv_cmb_, c);
    got_dx_c[c] = chunk_rows(got_dx, send_cmb_, c);
    got_dgate_c[c] = chunk_rows(got_dgate, send_cmb_, c);
  }
  auto dx_back = [&](int c, std::vector<DataPlane::RowMove>& moves) {
    moves.push_back({&back_dx_c[c], recvs_cmb[c], &got_dx_c[c], sends_cmb[c], CommPurpose::dispatch});
    moves.push_back({&back_dgate_c[c], recvs_cmb[c], &got_dgate_c[c], sends_cmb[c], CommPurpose::control});
  };
  GroupedSwiGlu& experts = *bank.grouped;
  experts.begin_backward(ge, dge);
  for (int c = 0; c < C; ++c) {
    std::vector<DataPlane::RowMove> moves;
    if (c + 1 < C) dy_out(c + 1, moves);
    if (c > 0) dx_back(c - 1, moves);
    DataPlane::Transfer in_flight;
    if (!moves.empty()) in_flight = plane_.start_group(moves);  // (none with one chunk)
    const int64_t b0 = group_offsets_[static_cast<size_t>(chunk_groups_[c])];
    const int64_t b1 = group_offsets_[static_cast<size_t>(chunk_groups_[c + 1])];
    if (b1 > b0) {
      Tensor dye_c = row_block(dye, b0, b1 - b0);
      ops.gather_rows(recv_dy, batch_source_.view(b0, {b1 - b0}), batch_div_, dye_c);
    }
    if (c + 1 == C) {  // every dy row is in and gathered
      recv_dy.reset();
      recv_dy_c.clear();
    }
    if (chunk_groups_[c] < chunk_groups_[c + 1]) experts.backward_experts(dye, chunk_groups_[c], chunk_groups_[c + 1]);
    const int64_t rows_c = recv_cmb_.offset(c + 1) - recv_cmb_.offset(c);
    if (rows_c) {
      ops.combine_pairs(experts.pass_output(), chunk_rows(rows_of_cmb_, recv_cmb_, c), nullptr, rows_c, k,
                        back_dx_c[c]);
      // The entries' gate gradients (0 for pads), in receive order, then this chunk's rows.
      Tensor entries = dgate_entries.view(0, {recv_total * k});
      ops.rows_to_pairs(dge, recv_order_.order, entries);
      if (C > 1)
        ops.gather_rows(dgate_entries, recv_cmb_order_.view(recv_cmb_.offset(c), {rows_c}), 1, back_dgate_c[c]);
    }
    if (in_flight.pending()) plane_.finish(in_flight);
  }
  Tensor dxe = experts.end_backward();  // (the rows' dx are in back_dx)
  dxe.reset();
  dye.reset();
  {
    std::vector<DataPlane::RowMove> last;
    dx_back(C - 1, last);
    plane_.all_to_all_rows_group(last);
  }
  back_dx_c.clear();
  back_dgate_c.clear();
  got_dx_c.clear();
  send_dy_c.clear();
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
       {pair_of_row.view(shadow_rows_, {sent_total * k}).raw(), pair_cmb_.raw(), pair_cmb_.bytes()}});
  dgate_out = cx.empty({n * k}, kRealDType);
  ops.rows_to_pairs(dgate_rows, pair_of_row, dgate_out);  // 0 for dropped pairs
  Tensor dx = cx.activation({n, d});
  ops.combine_pairs(results, row_of_group_, nullptr, n, k, dx);

  finish_log(fwd_before_, true);
  kept_ = false;
  release_device_plan();
  gate_.reset();
  return dx;
}

MOK_NN_END
