#include "core/parallel/classic_dispatcher.h"

#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/parallel/fixed_row_exchange.h"
#include "core/parallel/row_moves.h"

MOK_NN_BEGIN

ClassicDispatcher::ClassicDispatcher(DataPlane& plane, ExpertPlacement placement)
    : plane_(plane), placement_(std::move(placement)) {
  check_setup();
}

ClassicDispatcher::ClassicDispatcher(Communicator& comm, ExpertPlacement placement)
    : own_plane_(std::make_unique<HostDataPlane>(comm)), plane_(*own_plane_), placement_(std::move(placement)) {
  check_setup();
}

void ClassicDispatcher::check_setup() const {
  if (placement_.ranks() != plane_.size())
    throw std::invalid_argument("ClassicDispatcher: placement for " + std::to_string(placement_.ranks()) +
                                " ranks, communicator has " + std::to_string(plane_.size()));
}

Tensor ClassicDispatcher::forward(const Tensor& x, const RoutingDecision& r, ExpertBank& bank, bool keep) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  Communicator& control = plane_.control();
  const int R = plane_.size(), me = plane_.rank();
  const int E = placement_.experts();
  if (r.experts != E || bank.size() != E)
    throw std::invalid_argument("ClassicDispatcher: placement has " + std::to_string(E) + " experts, routing " +
                                std::to_string(r.experts) + ", bank " + std::to_string(bank.size()));
  if (!bank.grouped) throw std::logic_error("ClassicDispatcher: needs this rank's experts stacked");
  const int64_t n = x.dim(0), d = x.dim(1);
  const int k = r.k;
  if (!keep && fixed_layout_max_rows_ > 0 && n <= fixed_layout_max_rows_) return forward_fixed(x, r, bank);
  chunks_ = 1;
  if (const int C = chunks_for_step(); C > 1) return forward_chunked(x, r, bank, keep, C);
  const std::vector<int64_t>& off = r.pairs.segments.host();  // (E + 1) expert-major rows of this rank's pairs
  const int64_t m = r.pairs.rows();
  const std::vector<int>& mine = placement_.experts_on(me);
  const int L = static_cast<int>(mine.size());
  for (int e : mine)
    if (!bank.experts[e])
      throw std::logic_error("ClassicDispatcher: expert " + std::to_string(e) + " is placed on rank " +
                             std::to_string(me) + " but not held here");

  // Send plan: per destination rank, its experts ascending, each expert's rows in token order.
  send_rows_.assign(R, 0);
  std::vector<int64_t> count_msg;      // per destination: rows per expert it owns
  std::vector<int64_t> count_lens(R);  // int64 values to each destination
  std::vector<int32_t> send_perm;      // send row → expert-major row
  send_perm.reserve(static_cast<size_t>(m));
  for (int q = 0; q < R; ++q) {
    const auto& theirs = placement_.experts_on(q);
    count_lens[q] = static_cast<int64_t>(theirs.size());
    for (int e : theirs) {
      count_msg.push_back(off[e + 1] - off[e]);
      send_rows_[q] += off[e + 1] - off[e];
      for (int64_t i = off[e]; i < off[e + 1]; ++i) send_perm.push_back(static_cast<int32_t>(i));
    }
  }
  send_order_ = make_row_permutation(send_perm);

  // 1. counts: rank s tells me how many rows it sends for each of my experts.
  std::vector<int64_t> recv_counts(static_cast<size_t>(R) * L, 0);  // [s·L + l]
  const std::vector<int64_t> recv_count_lens(R, L);
  control.all_to_all_v(count_msg.data(), count_lens, recv_counts.data(), recv_count_lens, CommPurpose::control);
  recv_rows_.assign(R, 0);
  std::vector<int64_t> recv_start(R, 0);
  int64_t recv_total = 0;
  for (int s = 0; s < R; ++s) {
    recv_start[s] = recv_total;
    for (int l = 0; l < L; ++l) recv_rows_[s] += recv_counts[static_cast<size_t>(s) * L + l];
    recv_total += recv_rows_[s];
  }
  // Expert-major layout of the received rows: local expert l's rows from every source in
  // source order. recv_perm[i] = the received (source-major) row of expert-major row i.
  std::vector<int32_t> recv_perm;
  recv_perm.reserve(static_cast<size_t>(recv_total));
  std::vector<int64_t> local_rows(L, 0);
  for (int l = 0; l < L; ++l) {
    for (int s = 0; s < R; ++s) {
      int64_t at = recv_start[s];
      for (int q = 0; q < l; ++q) at += recv_counts[static_cast<size_t>(s) * L + q];
      const int64_t c = recv_counts[static_cast<size_t>(s) * L + l];
      for (int64_t i = 0; i < c; ++i) recv_perm.push_back(static_cast<int32_t>(at + i));
      local_rows[l] += c;
    }
  }
  expert_major_ = make_row_permutation(recv_perm);
  // Row offsets of the bank's stacked experts (those held here but placed elsewhere get none).
  counts_ = DispatchCounts{};
  counts_.expert_rows.assign(E, 0);
  for (int l = 0; l < L; ++l) counts_.expert_rows[mine[l]] = local_rows[l];
  group_offsets_ = stacked_row_offsets(bank, mine, local_rows);

  // 2. ship the token rows, one per pair, with (3.) their gates for the owner's backward: one group.
  Tensor xs = cx.activation({m, d});
  if (m) ops.gather_rows(x, r.pairs.order, k, xs);
  Tensor send_x = send_order_.apply(std::move(xs));
  Tensor recv_x = cx.activation({recv_total, d});
  std::vector<DataPlane::RowMove> moves{{&send_x, send_rows_, &recv_x, recv_rows_, CommPurpose::dispatch}};
  Tensor send_gate, got_gate;
  if (keep) {
    Tensor gate_rows = cx.empty({m}, kRealDType);
    if (m) ops.pairs_to_rows(r.gate, r.pairs.order, gate_rows);
    send_gate = send_order_.apply(std::move(gate_rows));
    got_gate = cx.empty({recv_total}, kRealDType);
    moves.push_back({&send_gate, send_rows_, &got_gate, recv_rows_, CommPurpose::control});
  }
  plane_.all_to_all_rows_group(moves);
  send_x.reset();
  send_gate.reset();
  if (keep) recv_gate_ = expert_major_.apply(std::move(got_gate));

  // 4. every local expert on its rows (source order, token order within a source).
  Tensor xe = expert_major_.apply(std::move(recv_x));
  Tensor ye = bank.grouped->forward(std::move(xe), group_offsets_, keep);
  Tensor back_y = expert_major_.undo(std::move(ye));

  // 5. outputs back to the sources, in their send order.
  Tensor got_y = cx.activation({m, d});
  plane_.all_to_all_rows(back_y, recv_rows_, got_y, send_rows_, CommPurpose::combine);
  back_y.reset();
  // 6. gated combine, slots in order.
  return combine_returned(std::move(got_y), x, r, keep);
}

Tensor ClassicDispatcher::combine_returned(Tensor got_y, const Tensor& x, const RoutingDecision& r, bool keep) {
  const ExecContext& cx = ExecContext::current();
  const int64_t n = x.dim(0), d = x.dim(1), m = r.pairs.rows();
  const int k = r.k, me = plane_.rank();
  got_y = send_order_.undo(std::move(got_y));
  Tensor y = cx.activation({n, d});
  cx.ops().combine_pairs(got_y, r.pairs.row_of_pair, &r.gate, n, k, y);

  counts_.pairs = m;
  counts_.pairs_to_rank = send_rows_;
  counts_.local_pairs = send_rows_[me];
  counts_.remote_pairs = m - send_rows_[me];
  n_ = n;
  k_ = k;
  kept_ = keep;
  if (keep) {
    order_ = r.pairs.order.clone(MemTag{});
    row_of_pair_ = r.pairs.row_of_pair.clone(MemTag{});
  } else {
    recv_gate_.reset();
  }
  return y;
}

// The fixed layout (fixed_layout_forward): a row per pair to every rank, plain outputs back,
// combined here with the gates as the counted forward does (so the same bits).
Tensor ClassicDispatcher::forward_fixed(const Tensor& x, const RoutingDecision& r, ExpertBank& bank) {
  Tensor y = fixed_layout_forward(plane_, placement_, fixed_tables_, x, r, bank, /*per_token=*/false);
  const int64_t n = x.dim(0);
  const int k = r.k;
  counts_ = DispatchCounts{};
  counts_.fixed_layout = true;
  counts_.pairs = n * k - r.dropped;
  n_ = n;
  k_ = k;
  kept_ = false;
  recv_gate_.reset();
  return y;
}

Tensor ClassicDispatcher::backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate) {
  if (!kept_) throw std::logic_error("ClassicDispatcher::backward without a kept forward");
  if (chunks_ > 1) return backward_chunked(dy, bank, dgate);
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int64_t d = dy.dim(1), m = order_.numel();
  const int k = k_;
  int64_t recv_total = 0;
  for (int64_t c : recv_rows_) recv_total += c;

  // dy of every shipped pair to the expert's owner (the reverse of the combine).
  Tensor dys = cx.activation({m, d});
  if (m) ops.gather_rows(dy, order_, k, dys);
  Tensor send_dy = send_order_.apply(std::move(dys));
  Tensor recv_dy = cx.activation({recv_total, d});
  plane_.all_to_all_rows(send_dy, send_rows_, recv_dy, recv_rows_, CommPurpose::combine);
  send_dy.reset();

  // Gated expert backward on the owner, rows in the forward's order.
  Tensor dye = expert_major_.apply(std::move(recv_dy));
  Tensor dge = cx.empty({recv_total}, kRealDType);
  Tensor dxe = bank.grouped->backward_gated(dye, recv_gate_, dge);
  dye.reset();
  Tensor back_dx = expert_major_.undo(std::move(dxe));
  Tensor back_dgate = expert_major_.undo(std::move(dge));

  // dx rows (the reverse of the dispatch) and dgate back to the sources.
  Tensor got_dx = cx.activation({m, d});
  Tensor got_dgate = cx.empty({m}, kRealDType);
  const DataPlane::RowMove moves[] = {{&back_dx, recv_rows_, &got_dx, send_rows_, CommPurpose::dispatch},
                                      {&back_dgate, recv_rows_, &got_dgate, send_rows_, CommPurpose::control}};
  plane_.all_to_all_rows_group(moves);
  back_dx.reset();
  return combine_returned_gradients(std::move(got_dx), std::move(got_dgate), dgate);
}

Tensor ClassicDispatcher::combine_returned_gradients(Tensor got_dx, Tensor got_dgate, Tensor& dgate) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int64_t n = n_, d = got_dx.dim(1);
  const int k = k_;
  got_dx = send_order_.undo(std::move(got_dx));
  got_dgate = send_order_.undo(std::move(got_dgate));

  dgate = cx.empty({n * k}, kRealDType);
  ops.rows_to_pairs(got_dgate, order_, dgate);  // 0 for dropped pairs
  Tensor dx = cx.activation({n, d});
  ops.combine_pairs(got_dx, row_of_pair_, nullptr, n, k, dx);  // gates already applied
  kept_ = false;
  recv_gate_.reset();
  order_.reset();
  row_of_pair_.reset();
  return dx;
}

MOK_NN_END
