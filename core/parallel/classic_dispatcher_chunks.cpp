// ClassicDispatcher in chunks (set_overlap_chunks): each rank's local experts split into C
// ranges, chunk c holding range c of every rank. Rows travel chunk-major (chunk, then peer,
// then expert, then token), so each chunk's rows are one block of the send and receive
// buffers, and one chunk's transfers run beside the previous chunk's expert products:
//   exchange   dispatch 0                                   (waited: nothing to overlap yet)
//   chunk c    start {dispatch c + 1, combine c − 1}, experts of range c, finish
//   exchange   combine C − 1                                (waited)
// Backward goes the same way with dy out and dx, dgate back. Per expert the rows, their order
// and the ops over them are those of one chunk (GroupedSwiGlu's passes by ranges), so the
// results are the unchunked dispatcher's bit for bit.
#include <algorithm>
#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/parallel/classic_dispatcher.h"
#include "core/parallel/row_moves.h"

MOK_NN_BEGIN

std::span<const int64_t> ClassicDispatcher::chunk_sends(int c) const {
  const size_t R = static_cast<size_t>(plane_.size());
  return std::span<const int64_t>(chunk_send_rows_).subspan(static_cast<size_t>(c) * R, R);
}

std::span<const int64_t> ClassicDispatcher::chunk_recvs(int c) const {
  const size_t R = static_cast<size_t>(plane_.size());
  return std::span<const int64_t>(chunk_recv_rows_).subspan(static_cast<size_t>(c) * R, R);
}

Tensor ClassicDispatcher::chunk_part(const Tensor& t, const std::vector<int64_t>& begin, int c) {
  const int64_t r0 = begin[static_cast<size_t>(c)], rows = begin[static_cast<size_t>(c) + 1] - r0;
  return t.rank() == 1 ? t.view(r0, {rows}) : row_block(t, r0, rows);
}

int ClassicDispatcher::chunks_for_step() const {
  int most = 0;
  for (int q = 0; q < placement_.ranks(); ++q)
    most = std::max(most, static_cast<int>(placement_.experts_on(q).size()));
  return std::max(1, std::min(overlap_chunks_, most));
}

Tensor ClassicDispatcher::forward_chunked(const Tensor& x, const RoutingDecision& r, ExpertBank& bank, bool keep,
                                          int C) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  Communicator& control = plane_.control();
  const int R = plane_.size(), me = plane_.rank();
  const int E = placement_.experts();
  const int64_t d = x.dim(1);
  const int k = r.k;
  const std::vector<int64_t>& off = r.pairs.segments.host();  // (E + 1) expert-major rows of this rank's pairs
  const int64_t m = r.pairs.rows();
  const std::vector<int>& mine = placement_.experts_on(me);
  const int L = static_cast<int>(mine.size());
  auto chunk_begin = [C](int experts, int c) { return experts * c / C; };  // rank's local experts of chunk c

  // Send plan, chunk-major; the counts per (destination, expert) as the unchunked plan sends them.
  chunk_send_rows_.assign(static_cast<size_t>(C) * R, 0);
  std::vector<int64_t> count_msg, count_lens(R);
  for (int q = 0; q < R; ++q) {
    count_lens[q] = static_cast<int64_t>(placement_.experts_on(q).size());
    for (int e : placement_.experts_on(q)) count_msg.push_back(off[e + 1] - off[e]);
  }
  std::vector<int32_t> send_perm;
  send_perm.reserve(static_cast<size_t>(m));
  send_rows_.assign(R, 0);
  chunk_send_begin_.assign(C + 1, 0);
  for (int c = 0; c < C; ++c) {
    chunk_send_begin_[c + 1] = chunk_send_begin_[c];
    for (int q = 0; q < R; ++q) {
      const auto& theirs = placement_.experts_on(q);
      const int Lq = static_cast<int>(theirs.size());
      for (int l = chunk_begin(Lq, c); l < chunk_begin(Lq, c + 1); ++l) {
        const int e = theirs[l];
        chunk_send_rows_[static_cast<size_t>(c) * R + q] += off[e + 1] - off[e];
        for (int64_t i = off[e]; i < off[e + 1]; ++i) send_perm.push_back(static_cast<int32_t>(i));
      }
      send_rows_[q] += chunk_send_rows_[static_cast<size_t>(c) * R + q];
      chunk_send_begin_[c + 1] += chunk_send_rows_[static_cast<size_t>(c) * R + q];
    }
  }
  send_order_ = make_row_permutation(send_perm);

  std::vector<int64_t> recv_counts(static_cast<size_t>(R) * L, 0);  // [s·L + l]
  const std::vector<int64_t> recv_count_lens(R, L);
  control.all_to_all_v(count_msg.data(), count_lens, recv_counts.data(), recv_count_lens, CommPurpose::control);
  auto count = [&](int s, int l) { return recv_counts[static_cast<size_t>(s) * L + l]; };

  // Receive layout chunk-major (chunk, source, expert, token); the expert-major batch of chunk
  // c is the same rows as its received block, permuted within it.
  chunk_recv_rows_.assign(static_cast<size_t>(C) * R, 0);
  chunk_row_begin_.assign(C + 1, 0);
  std::vector<int64_t> local_rows(L, 0);
  chunk_gather_.clear();
  chunk_scatter_.clear();
  chunk_gather_.resize(C);
  chunk_scatter_.resize(C);
  recv_rows_.assign(R, 0);
  for (int c = 0; c < C; ++c) {
    const int l0 = chunk_begin(L, c), l1 = chunk_begin(L, c + 1);
    std::vector<int64_t> source_at(R, 0);  // within the chunk's block
    int64_t rows = 0;
    for (int s = 0; s < R; ++s) {
      source_at[s] = rows;
      for (int l = l0; l < l1; ++l) chunk_recv_rows_[static_cast<size_t>(c) * R + s] += count(s, l);
      rows += chunk_recv_rows_[static_cast<size_t>(c) * R + s];
      recv_rows_[s] += chunk_recv_rows_[static_cast<size_t>(c) * R + s];
    }
    chunk_row_begin_[c + 1] = chunk_row_begin_[c] + rows;
    std::vector<int32_t> gather(static_cast<size_t>(rows)), scatter(static_cast<size_t>(rows));
    int64_t i = 0;
    for (int l = l0; l < l1; ++l) {
      for (int s = 0; s < R; ++s) {
        int64_t at = source_at[s];
        for (int q = l0; q < l; ++q) at += count(s, q);
        for (int64_t j = 0; j < count(s, l); ++j, ++i) {
          gather[static_cast<size_t>(i)] = static_cast<int32_t>(at + j);
          scatter[static_cast<size_t>(at + j)] = static_cast<int32_t>(i);
        }
        local_rows[l] += count(s, l);
      }
    }
    if (rows) {
      chunk_gather_[c] = upload_i32(gather);
      chunk_scatter_[c] = upload_i32(scatter);
    }
  }
  counts_ = DispatchCounts{};
  counts_.expert_rows.assign(E, 0);
  for (int l = 0; l < L; ++l) counts_.expert_rows[mine[l]] = local_rows[l];
  group_offsets_ = stacked_row_offsets(bank, mine, local_rows);
  // Chunk c's experts as stacked groups: [group of its first expert, next chunk's), 0 and G at the ends.
  chunk_groups_.assign(C + 1, 0);
  chunk_groups_[C] = bank.grouped->groups();
  for (int c = 1; c < C; ++c) {
    const int l = chunk_begin(L, c);
    const int e = l < L ? mine[l] : E;
    int g = 0;
    for (int h = 0; h < std::min(e, bank.size()); ++h) g += bank.experts[h] ? 1 : 0;
    chunk_groups_[c] = g;
  }
  int64_t recv_total = chunk_row_begin_[C];

  // Rows in send order, and their gates when kept (each chunk's with its rows).
  Tensor xs = cx.activation({m, d});
  if (m) ops.gather_rows(x, r.pairs.order, k, xs);
  Tensor send_x = send_order_.apply(std::move(xs));
  Tensor recv_x = cx.activation({recv_total, d});
  Tensor xe = cx.activation({recv_total, d});
  Tensor back_y = cx.activation({recv_total, d});
  Tensor got_y = cx.activation({m, d});
  // Chunk c's blocks and their per-peer counts.
  auto sent_part = [&](const Tensor& t, int c) { return chunk_part(t, chunk_send_begin_, c); };
  auto recv_part = [&](const Tensor& t, int c) { return chunk_part(t, chunk_row_begin_, c); };
  std::vector<Tensor> send_x_c(C), recv_x_c(C), back_c(C), got_c(C);
  for (int c = 0; c < C; ++c) {
    send_x_c[c] = sent_part(send_x, c);
    recv_x_c[c] = recv_part(recv_x, c);
    back_c[c] = recv_part(back_y, c);
    got_c[c] = sent_part(got_y, c);
  }

  Tensor send_gate, got_gate;
  std::vector<Tensor> send_gate_c(C), got_gate_c(C);
  if (keep) {
    Tensor gate_rows = cx.empty({m}, kRealDType);
    if (m) ops.pairs_to_rows(r.gate, r.pairs.order, gate_rows);
    send_gate = send_order_.apply(std::move(gate_rows));
    got_gate = cx.empty({recv_total}, kRealDType);
    for (int c = 0; c < C; ++c) {
      send_gate_c[c] = sent_part(send_gate, c);
      got_gate_c[c] = recv_part(got_gate, c);
    }
  }
  // Chunk c's rows out (with their gates when kept); its outputs back.
  auto combine = [&](int c, std::vector<DataPlane::RowMove>& moves) {
    moves.push_back({&back_c[c], chunk_recvs(c), &got_c[c], chunk_sends(c), CommPurpose::combine});
  };
  auto dispatch = [&](int c, std::vector<DataPlane::RowMove>& moves) {
    moves.push_back({&send_x_c[c], chunk_sends(c), &recv_x_c[c], chunk_recvs(c), CommPurpose::dispatch});
    if (keep) moves.push_back({&send_gate_c[c], chunk_sends(c), &got_gate_c[c], chunk_recvs(c), CommPurpose::control});
  };
  {
    std::vector<DataPlane::RowMove> first;
    dispatch(0, first);
    plane_.all_to_all_rows_group(first);
  }

  GroupedSwiGlu& experts = *bank.grouped;
  Tensor xe_view = xe.view(0, xe.shape());  // the pass's input, filled chunk by chunk
  experts.begin_forward(std::move(xe), group_offsets_, keep);
  if (keep) recv_gate_ = cx.empty({recv_total}, kRealDType);
  for (int c = 0; c < C; ++c) {
    std::vector<DataPlane::RowMove> moves;
    if (c + 1 < C) dispatch(c + 1, moves);
    if (c > 0) combine(c - 1, moves);
    DataPlane::Transfer in_flight = plane_.start_group(moves);
    if (!chunk_gather_[c].empty()) {
      Tensor xe_c = recv_part(xe_view, c);
      ops.gather_rows(recv_x_c[c], chunk_gather_[c], 1, xe_c);
      if (keep) {
        Tensor to = recv_part(recv_gate_, c);
        ops.pairs_to_rows(got_gate_c[c], chunk_gather_[c], to);  // expert-major
      }
    }
    if (c + 1 == C) xe_view.reset();  // the pass may keep its input without a copy
    experts.forward_experts(chunk_groups_[c], chunk_groups_[c + 1]);
    if (!chunk_gather_[c].empty())
      ops.gather_rows(recv_part(experts.pass_output(), c), chunk_scatter_[c], 1, back_c[c]);  // receive order
    plane_.finish(in_flight);
  }
  {
    std::vector<DataPlane::RowMove> last;
    combine(C - 1, last);
    plane_.all_to_all_rows_group(last);
  }
  Tensor ye = experts.end_forward();
  ye.reset();
  send_gate_c.clear();
  got_gate_c.clear();
  send_gate.reset();
  got_gate.reset();
  send_x_c.clear();
  recv_x_c.clear();
  back_c.clear();
  got_c.clear();
  send_x.reset();
  recv_x.reset();
  back_y.reset();
  chunks_ = C;
  return combine_returned(std::move(got_y), x, r, keep);
}

Tensor ClassicDispatcher::backward_chunked(const Tensor& dy, ExpertBank& bank, Tensor& dgate) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int C = chunks_;
  const int64_t d = dy.dim(1), m = order_.numel();
  const int k = k_;
  const int64_t recv_total = chunk_row_begin_[C];
  auto sent_part = [&](const Tensor& t, int c) { return chunk_part(t, chunk_send_begin_, c); };
  auto recv_part = [&](const Tensor& t, int c) { return chunk_part(t, chunk_row_begin_, c); };

  // dy of every shipped pair, in send order (the reverse of the combine), out chunk by chunk.
  Tensor dys = cx.activation({m, d});
  if (m) ops.gather_rows(dy, order_, k, dys);
  Tensor send_dy = send_order_.apply(std::move(dys));
  Tensor recv_dy = cx.activation({recv_total, d});
  Tensor dye = cx.activation({recv_total, d});
  Tensor dge = cx.empty({recv_total}, kRealDType);
  Tensor back_dx = cx.activation({recv_total, d});
  Tensor back_dgate = cx.empty({recv_total}, kRealDType);
  Tensor got_dx = cx.activation({m, d});
  Tensor got_dgate = cx.empty({m}, kRealDType);
  std::vector<Tensor> send_dy_c(C), recv_dy_c(C), back_dx_c(C), back_dgate_c(C), got_dx_c(C), got_dgate_c(C);
  for (int c = 0; c < C; ++c) {
    send_dy_c[c] = sent_part(send_dy, c);
    recv_dy_c[c] = recv_part(recv_dy, c);
    back_dx_c[c] = recv_part(back_dx, c);
    back_dgate_c[c] = recv_part(back_dgate, c);
    got_dx_c[c] = sent_part(got_dx, c);
    got_dgate_c[c] = sent_part(got_dgate, c);
  }
  auto dy_out = [&](int c, std::vector<DataPlane::RowMove>& moves) {
    moves.push_back({&send_dy_c[c], chunk_sends(c), &recv_dy_c[c], chunk_recvs(c), CommPurpose::combine});
  };
  auto dx_back = [&](int c, std::vector<DataPlane::RowMove>& moves) {
    moves.push_back({&back_dx_c[c], chunk_recvs(c), &got_dx_c[c], chunk_sends(c), CommPurpose::dispatch});
    moves.push_back({&back_dgate_c[c], chunk_recvs(c), &got_dgate_c[c], chunk_sends(c), CommPurpose::control});
  };
  {
    std::vector<DataPlane::RowMove> first;
    dy_out(0, first);
    plane_.all_to_all_rows_group(first);
  }
  GroupedSwiGlu& experts = *bank.grouped;
  experts.begin_backward(recv_gate_, dge);
  for (int c = 0; c < C; ++c) {
    std::vector<DataPlane::RowMove> moves;
    if (c + 1 < C) dy_out(c + 1, moves);
    if (c > 0) dx_back(c - 1, moves);
    DataPlane::Transfer in_flight = plane_.start_group(moves);
    if (!chunk_gather_[c].empty()) {
      Tensor dye_c = recv_part(dye, c);
      ops.gather_rows(recv_dy_c[c], chunk_gather_[c], 1, dye_c);  // expert-major
    }
    experts.backward_experts(dye, chunk_groups_[c], chunk_groups_[c + 1]);
    if (!chunk_gather_[c].empty()) {
      ops.gather_rows(recv_part(experts.pass_output(), c), chunk_scatter_[c], 1, back_dx_c[c]);  // receive order
      ops.pairs_to_rows(recv_part(dge, c), chunk_scatter_[c], back_dgate_c[c]);
    }
    plane_.finish(in_flight);
  }
  {
    std::vector<DataPlane::RowMove> last;
    dx_back(C - 1, last);
    plane_.all_to_all_rows_group(last);
  }
  Tensor dxe = experts.end_backward();
  dxe.reset();
  send_dy_c.clear();
  recv_dy_c.clear();
  back_dx_c.clear();
  back_dgate_c.clear();
  got_dx_c.clear();
  got_dgate_c.clear();
  send_dy.reset();
  recv_dy.reset();
  dye.reset();
  dge.reset();
  back_dx.reset();
  back_dgate.reset();
  return combine_returned_gradients(std::move(got_dx), std::move(got_dgate), dgate);
}

MOK_NN_END
