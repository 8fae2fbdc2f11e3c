#include "core/dist/classic_dispatcher.h"

#include <cstring>
#include <stdexcept>

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

ClassicDispatcher::ClassicDispatcher(Communicator& comm, ExpertPlacement placement)
    : comm_(comm), placement_(std::move(placement)) {
  if (placement_.ranks() != comm_.size())
    throw std::invalid_argument("ClassicDispatcher: placement for " +
                                std::to_string(placement_.ranks()) + " ranks, communicator has " +
                                std::to_string(comm_.size()));
}

int64_t ClassicDispatcher::recv_offset(int s, int l) const {
  const int L = static_cast<int>(placement_.experts_on(comm_.rank()).size());
  int64_t off = recv_start_[s];
  for (int q = 0; q < l; ++q) off += recv_counts_[static_cast<size_t>(s) * L + q];
  return off;
}

Tensor ClassicDispatcher::forward(const Tensor& x, const RoutingDecision& r, ExpertBank& bank,
                                  bool keep) {
  const int R = comm_.size(), me = comm_.rank();
  const int E = placement_.experts();
  if (r.experts != E || bank.size() != E)
    throw std::invalid_argument("ClassicDispatcher: placement has " + std::to_string(E) +
                                " experts, routing " + std::to_string(r.experts) + ", bank " +
                                std::to_string(bank.size()));
  const int64_t n = x.dim(0), d = x.dim(1);
  const int k = r.k;
  const int32_t* expert = r.expert.data_as<int32_t>();  // (n·k) host
  const real* gate = r.gate.data();                      // (n·k) host
  const std::vector<int>& mine = placement_.experts_on(me);
  const int L = static_cast<int>(mine.size());

  // Send plan: per destination rank, per expert it owns (ascending), pairs in token order.
  std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(E));
  for (int64_t p = 0; p < n * k; ++p)
    if (expert[p] >= 0) by_expert[expert[p]].push_back(p);
  send_pairs_.clear();
  send_rows_.assign(R, 0);
  std::vector<int64_t> count_msg;      // per destination: rows per expert it owns
  std::vector<int64_t> count_lens(R);  // int64 values to each destination
  for (int q = 0; q < R; ++q) {
    const auto& theirs = placement_.experts_on(q);
    count_lens[q] = static_cast<int64_t>(theirs.size());
    for (int e : theirs) {
      count_msg.push_back(static_cast<int64_t>(by_expert[e].size()));
      send_rows_[q] += static_cast<int64_t>(by_expert[e].size());
      send_pairs_.insert(send_pairs_.end(), by_expert[e].begin(), by_expert[e].end());
    }
  }

  // 1. counts: rank s tells me how many rows it sends for each of my experts.
  std::vector<int64_t> recv_count_lens(R, L);
  recv_counts_.assign(static_cast<size_t>(R) * L, 0);
  comm_.all_to_all_v(count_msg.data(), count_lens, recv_counts_.data(), recv_count_lens,
                     CommPurpose::control);
  recv_rows_.assign(R, 0);
  recv_start_.assign(R, 0);
  int64_t recv_total = 0;
  for (int s = 0; s < R; ++s) {
    recv_start_[s] = recv_total;
    for (int l = 0; l < L; ++l) recv_rows_[s] += recv_counts_[static_cast<size_t>(s) * L + l];
    recv_total += recv_rows_[s];
  }

  // 2. ship the token rows, one per pair.
  const int64_t sent_total = static_cast<int64_t>(send_pairs_.size());
  Tensor send_x({sent_total, d});
  parallel_for(sent_total, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(send_x.data() + i * d, x.data() + (send_pairs_[i] / k) * d, d * sizeof(real));
  });
  std::vector<int64_t> send_vals(R), recv_vals(R);
  for (int q = 0; q < R; ++q) {
    send_vals[q] = send_rows_[q] * d;
    recv_vals[q] = recv_rows_[q] * d;
  }
  Tensor recv_x({recv_total, d});
  comm_.all_to_all_v(send_x.data(), send_vals, recv_x.data(), recv_vals, CommPurpose::dispatch);
  send_x.reset();

  // 3. gates for the owner's backward.
  if (keep) {
    std::vector<real> send_gate(static_cast<size_t>(sent_total));
    for (int64_t i = 0; i < sent_total; ++i) send_gate[i] = gate[send_pairs_[i]];
    recv_gate_.assign(static_cast<size_t>(recv_total), real(0));
    comm_.all_to_all_v(send_gate.data(), send_rows_, recv_gate_.data(), recv_rows_,
                       CommPurpose::control);
  }

  // 4. run each local expert on its rows (source order, token order within a source); the
  // outputs go back in the receive layout.
  counts_ = DispatchCounts{};
  counts_.expert_rows.assign(E, 0);
  Tensor back_y({recv_total, d});
  for (int l = 0; l < L; ++l) {
    const int e = mine[l];
    int64_t m = 0;
    for (int s = 0; s < R; ++s) m += recv_counts_[static_cast<size_t>(s) * L + l];
    counts_.expert_rows[e] = m;
    if (m == 0) continue;
    if (!bank.experts[e])
      throw std::logic_error("ClassicDispatcher: expert " + std::to_string(e) +
                             " is placed on rank " + std::to_string(me) + " but not held here");
    Tensor xe({m, d});
    int64_t row = 0;
    for (int s = 0; s < R; ++s) {
      const int64_t c = recv_counts_[static_cast<size_t>(s) * L + l];
      if (c) std::memcpy(xe.data() + row * d, recv_x.data() + recv_offset(s, l) * d,
                         c * d * sizeof(real));
      row += c;
    }
    Tensor ye = bank.experts[e]->forward(xe, keep);
    row = 0;
    for (int s = 0; s < R; ++s) {
      const int64_t c = recv_counts_[static_cast<size_t>(s) * L + l];
      if (c) std::memcpy(back_y.data() + recv_offset(s, l) * d, ye.data() + row * d,
                         c * d * sizeof(real));
      row += c;
    }
  }
  recv_x.reset();

  // 5. outputs back to the sources, in their send order.
  Tensor got_y({sent_total, d});
  comm_.all_to_all_v(back_y.data(), recv_vals, got_y.data(), send_vals, CommPurpose::combine);
  back_y.reset();

  // 6. gated combine, slots in order.
  Tensor per_pair({n * k, d});
  parallel_for(sent_total, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(per_pair.data() + send_pairs_[i] * d, got_y.data() + i * d, d * sizeof(real));
  });
  Tensor y({n, d});
  combine_pairs(per_pair, expert, gate, n, k, d, y);

  counts_.pairs = sent_total;
  counts_.pairs_to_rank = send_rows_;
  counts_.local_pairs = send_rows_[me];
  counts_.remote_pairs = sent_total - send_rows_[me];
  n_ = n;
  k_ = k;
  kept_ = keep;
  if (keep) {
    pair_expert_.assign(expert, expert + n * k);
  } else {
    recv_gate_.clear();
  }
  return y;
}

Tensor ClassicDispatcher::backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate_out) {
  std::vector<real> dgate;  // (n·k), handed out as a host tensor at the end
  if (!kept_) throw std::logic_error("ClassicDispatcher::backward without a kept forward");
  const int R = comm_.size(), me = comm_.rank();
  const int64_t n = n_, d = dy.dim(1);
  const int k = k_;
  const std::vector<int>& mine = placement_.experts_on(me);
  const int L = static_cast<int>(mine.size());
  const int64_t sent_total = static_cast<int64_t>(send_pairs_.size());
  int64_t recv_total = 0;
  for (int s = 0; s < R; ++s) recv_total += recv_rows_[s];
  std::vector<int64_t> send_vals(R), recv_vals(R);
  for (int q = 0; q < R; ++q) {
    send_vals[q] = send_rows_[q] * d;
    recv_vals[q] = recv_rows_[q] * d;
  }

  // dy of every shipped pair to the expert's owner (the reverse of the combine).
  Tensor send_dy({sent_total, d});
  parallel_for(sent_total, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(send_dy.data() + i * d, dy.data() + (send_pairs_[i] / k) * d, d * sizeof(real));
  });
  Tensor recv_dy({recv_total, d});
  comm_.all_to_all_v(send_dy.data(), send_vals, recv_dy.data(), recv_vals, CommPurpose::combine);
  send_dy.reset();

  // Gated expert backward on the owner, rows in the forward's order.
  Tensor back_dx({recv_total, d});
  std::vector<real> back_dgate(static_cast<size_t>(recv_total), real(0));
  for (int l = 0; l < L; ++l) {
    const int e = mine[l];
    int64_t m = 0;
    for (int s = 0; s < R; ++s) m += recv_counts_[static_cast<size_t>(s) * L + l];
    if (m == 0) continue;
    Tensor dye({m, d});
    Tensor ge({m}), dge({m});
    int64_t row = 0;
    for (int s = 0; s < R; ++s) {
      const int64_t c = recv_counts_[static_cast<size_t>(s) * L + l], off = recv_offset(s, l);
      if (c) {
        std::memcpy(dye.data() + row * d, recv_dy.data() + off * d, c * d * sizeof(real));
        std::memcpy(ge.data() + row, recv_gate_.data() + off, c * sizeof(real));
      }
      row += c;
    }
    Tensor dxe = bank.experts[e]->backward_gated(dye, &ge, &dge);
    row = 0;
    for (int s = 0; s < R; ++s) {
      const int64_t c = recv_counts_[static_cast<size_t>(s) * L + l], off = recv_offset(s, l);
      if (c) {
        std::memcpy(back_dx.data() + off * d, dxe.data() + row * d, c * d * sizeof(real));
        std::memcpy(back_dgate.data() + off, dge.data() + row, c * sizeof(real));
      }
      row += c;
    }
  }
  recv_dy.reset();

  // dx rows (the reverse of the dispatch) and dgate back to the sources.
  Tensor got_dx({sent_total, d});
  comm_.all_to_all_v(back_dx.data(), recv_vals, got_dx.data(), send_vals, CommPurpose::dispatch);
  std::vector<real> got_dgate(static_cast<size_t>(sent_total));
  comm_.all_to_all_v(back_dgate.data(), recv_rows_, got_dgate.data(), send_rows_,
                     CommPurpose::control);

  dgate.assign(static_cast<size_t>(n * k), real(0));
  Tensor per_pair_dx({n * k, d});
  parallel_for(sent_total, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      std::memcpy(per_pair_dx.data() + send_pairs_[i] * d, got_dx.data() + i * d,
                  d * sizeof(real));
      dgate[send_pairs_[i]] = got_dgate[i];
    }
  });
  Tensor dx({n, d});
  combine_pairs(per_pair_dx, pair_expert_.data(), nullptr, n, k, d, dx);  // gates already applied

  dgate_out = Tensor({static_cast<int64_t>(dgate.size())});
  std::copy(dgate.begin(), dgate.end(), dgate_out.data());
  kept_ = false;
  recv_gate_.clear();
  pair_expert_.clear();
  return dx;
}

MOK_NN_END

