#include "core/parallel/mok_dispatcher.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

namespace {

// out[i] = src[index[i] / div] for i < index.size(), rows of d values.
Tensor gather(const Tensor& src, const std::vector<int64_t>& index, int64_t div, int64_t d) {
  Tensor out({static_cast<int64_t>(index.size()), d});
  parallel_for(static_cast<int64_t>(index.size()), 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(out.data() + i * d, src.data() + (index[i] / div) * d, d * sizeof(real));
  });
  return out;
}

// dst[t] = Σ_s parts[t·k + s] over the slots where head[t·k + s] ≥ 0, in slot order, from 0.
void sum_heads(const Tensor& parts, const std::vector<int32_t>& head, int64_t n, int k, int64_t d,
               Tensor& dst) {
  parallel_for(n, 32, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      real* y = dst.data() + t * d;
      for (int64_t j = 0; j < d; ++j) y[j] = 0;
      for (int s = 0; s < k; ++s) {
        const int64_t p = t * k + s;
        if (head[p] < 0) continue;
        const real* src = parts.data() + p * d;
        for (int64_t j = 0; j < d; ++j) y[j] += src[j];
      }
    }
  });
}

// Chunk keys of rows listed peer by peer (rows_per_peer[q] rows whose experts live on the
// rank computing peer q's rows, which holds experts_at[q] experts): the chunk of the row's
// lowest and highest entry (k local expert indices each, −1 padded).
void entry_chunks(const std::vector<int32_t>& entry, int k, const std::vector<int64_t>& rows_per_peer,
                  const std::vector<int>& experts_at, int C, std::vector<int>& lowest,
                  std::vector<int>& highest) {
  lowest.clear();
  highest.clear();
  int64_t i = 0;
  for (size_t q = 0; q < rows_per_peer.size(); ++q)
    for (int64_t m = 0; m < rows_per_peer[q]; ++m, ++i) {
      int lo = -1, hi = -1;
      for (int j = 0; j < k; ++j) {
        const int l = entry[static_cast<size_t>(i * k + j)];
        if (l < 0) continue;
        if (lo < 0 || l < lo) lo = l;
        if (l > hi) hi = l;
      }
      if (lo < 0) throw std::logic_error("MokDispatcher: a row without entries");
      lowest.push_back(expert_chunk(lo, experts_at[q], C));
      highest.push_back(expert_chunk(hi, experts_at[q], C));
    }
}

// token[i] placed at layout.pos[i]: the source rows of a chunk-major send buffer.
std::vector<int64_t> layout_order(const ChunkLayout& layout, const std::vector<int64_t>& token) {
  std::vector<int64_t> order(token.size());
  for (size_t i = 0; i < token.size(); ++i) order[static_cast<size_t>(layout.pos[i])] = token[i];
  return order;
}

// Rows (in `layout`) of entries i·k + j, in the entries' order.
std::vector<int64_t> entry_rows(const std::vector<int64_t>& entries, int k, const ChunkLayout& layout) {
  std::vector<int64_t> rows(entries.size());
  for (size_t m = 0; m < entries.size(); ++m) rows[m] = layout.pos[static_cast<size_t>(entries[m] / k)];
  return rows;
}

// Waits for a CommWorker's jobs when a scope is left by an exception: they use buffers of
// that scope.
struct DrainOnExit {
  CommWorker& worker;
  ~DrainOnExit() {
    try {
      worker.drain();
    } catch (...) {
    }
  }
};

// A shadow copy keeps its saved inputs the way the owner's experts do (kitten policy of this
// layer's experts, hidden recompute): every rank holds experts of the layer, all configured
// alike, so any of them tells.
void match_saved_inputs(SwiGluMlp& shadow, const ExpertBank& bank) {
  for (const auto& e : bank.experts) {
    if (!e) continue;
    if (shadow.up().policy() != e->up().policy()) shadow.up().set_policy(e->up().policy());
    if (shadow.down().policy() != e->down().policy()) shadow.down().set_policy(e->down().policy());
    if (shadow.saved_policy() != e->saved_policy()) shadow.set_saved_policy(e->saved_policy());
    shadow.set_recompute_hidden(e->recompute_hidden());
    return;
  }
}

void copy_param(real* dst, const Parameter& p) {
  std::memcpy(dst, p.value.data(), p.value.bytes());
}

}  // namespace

MokDispatcher::MokDispatcher(Communicator& comm, ExpertPlacement placement, MokOptions options)
    : comm_(comm), placement_(std::move(placement)), options_(options),
      worker_(std::make_unique<CommWorker>(options.overlap_chunks > 0 && comm.allows_helper_thread())) {
  if (options.overlap_chunks < 0)
    throw std::invalid_argument("MokDispatcher: overlap_chunks must be ≥ 0");
  if (placement_.ranks() != comm_.size())
    throw std::invalid_argument("MokDispatcher: placement for " + std::to_string(placement_.ranks()) +
                                " ranks, communicator has " + std::to_string(comm_.size()));
}

const SwiGluMlp* MokDispatcher::shadow(int expert) const {
  auto it = shadows_.find(expert);
  return it == shadows_.end() ? nullptr : it->second.get();
}

SwiGluMlp& MokDispatcher::shadow_copy(int expert, int64_t d, int64_t f) {
  auto& slot = shadows_[expert];
  if (!slot)
    slot = std::make_unique<SwiGluMlp>("mok.shadow." + std::to_string(expert), d, f, 0.0, 0.0, 0,
                                       options_.layer, "moe.expert", true);
  return *slot;
}

Tensor MokDispatcher::forward(const Tensor& x, const RoutingDecision& r, ExpertBank& bank,
                              bool keep) {
  const int R = comm_.size(), me = comm_.rank();
  const int E = placement_.experts();
  if (r.experts != E || bank.size() != E)
    throw std::invalid_argument("MokDispatcher: placement has " + std::to_string(E) +
                                " experts, routing " + std::to_string(r.experts) + ", bank " +
                                std::to_string(bank.size()));
  const int64_t n = x.dim(0), d = x.dim(1);
  const int k = r.k;
  const int32_t* expert = r.expert.data_as<int32_t>();  // (n·k) host
  const real* gate = r.gate.data();                      // (n·k) host
  const std::vector<int>& mine = placement_.experts_on(me);
  const int L = static_cast<int>(mine.size());
  fwd_before_ = comm_.stats();
  log_ = MokStepLog{};
  log_.step = steps_++;
  log_.training = keep;

  int64_t f = options_.expert_hidden;
  for (int e = 0; f <= 0 && e < E; ++e)
    if (bank.experts[e]) f = bank.experts[e]->hidden();
  if (f <= 0)
    throw std::invalid_argument("MokDispatcher: no expert here and options.expert_hidden unset");
  const int64_t P = 3 * d * f;  // values per expert: W_up (d, 2f), W_down (f, d)

  std::vector<int> owner(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) owner[e] = placement_.owner(e);

  // 0. rows this rank would ship per remote expert (a row shared by m experts of one rank
  // counts 1/m to each), the decisions, and everyone's decisions.
  std::vector<double> rows(static_cast<size_t>(E), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int s = 0; s < k; ++s) {
      const int e = expert[t * k + s];
      if (e < 0 || owner[e] == me) continue;
      int m = 0;
      for (int q = 0; q < k; ++q) {
        const int eq = expert[t * k + q];
        m += eq >= 0 && owner[eq] == owner[e];
      }
      rows[e] += 1.0 / m;
    }
  const MokCostModel model(options_.cost, d, f);
  std::vector<uint8_t> my_decision = model.decide(rows, owner, me, keep);
  // 1. plan: one row per (destination, token) with its entries in slot order (the
  // experts this rank shadows are computed here instead).
  my_shadowed_.clear();
  for (int e = 0; e < E; ++e)
    if (my_decision[e]) {
      my_shadowed_.push_back(e);
      log_.shadowed.push_back(e);
      log_.shadowed_rows.push_back(rows[e]);
    }
  std::vector<int> shadow_index(static_cast<size_t>(E), -1);
  for (size_t i = 0; i < my_shadowed_.size(); ++i) shadow_index[my_shadowed_[i]] = static_cast<int>(i);
  shadow_pairs_.assign(my_shadowed_.size(), {});
  head_of_.assign(static_cast<size_t>(n * k), -1);
  send_rows_.assign(R, 0);
  send_token_.clear();
  send_slot_.clear();
  head_pair_.clear();
  std::vector<int32_t> send_entry;
  std::vector<real> send_gate;
  for (int64_t p = 0; p < n * k; ++p) {
    const int e = expert[p];
    if (e < 0) continue;
    log_.pairs++;
    if (owner[e] == me) {
      log_.own_pairs++;
    } else if (shadow_index[e] >= 0) {
      log_.shadow_pairs++;
      shadow_pairs_[shadow_index[e]].push_back(p);
      head_of_[p] = 1;
    } else {
      log_.shipped_pairs++;
    }
  }
  for (int q = 0; q < R; ++q)
    for (int64_t t = 0; t < n; ++t) {
      int j = 0;
      size_t base = 0;
      for (int s = 0; s < k; ++s) {
        const int64_t p = t * k + s;
        const int e = expert[p];
        if (e < 0 || owner[e] != q || shadow_index[e] >= 0) continue;
        if (j == 0) {
          base = send_slot_.size();
          send_token_.push_back(t);
          head_pair_.push_back(p);
          head_of_[p] = 1;
          send_slot_.resize(base + k, -1);
          send_entry.resize(base + k, -1);
          send_gate.resize(base + k, real(0));
          send_rows_[q]++;
        }
        send_slot_[base + j] = s;
        send_entry[base + j] = placement_.local_index(e);
        send_gate[base + j] = gate[p];
        ++j;
      }
    }
  for (int q = 0; q < R; ++q)
    if (q != me) log_.shipped_rows += send_rows_[q];

  // 2. one small all-to-all tells every peer (a) per expert, 2 · (pairs routed to it from
  // here) + shadow flag — owners learn who shadows their experts, the pair counts price
  // the classic baseline in the log — (b) how many rows come its way and (c) how many rows
  // this rank sends in all, so that every rank picks the same chunk count.
  const int64_t W = E + 2;
  std::vector<int64_t> head_send(static_cast<size_t>(R * W)), head_recv(static_cast<size_t>(R * W));
  {
    std::vector<int64_t> packed(static_cast<size_t>(E), 0);
    for (int64_t p = 0; p < n * k; ++p)
      if (expert[p] >= 0) packed[expert[p]] += 2;
    for (int e = 0; e < E; ++e) packed[e] += my_decision[e];
    int64_t my_rows = 0;
    for (int q = 0; q < R; ++q) my_rows += send_rows_[q];
    for (int q = 0; q < R; ++q) {
      std::copy(packed.begin(), packed.end(), head_send.begin() + static_cast<ptrdiff_t>(q * W));
      head_send[static_cast<size_t>(q * W + E)] = send_rows_[q];
      head_send[static_cast<size_t>(q * W + E + 1)] = my_rows;
    }
  }
  const std::vector<int64_t> head_len(R, W);
  comm_.all_to_all_v(head_send.data(), head_len, head_recv.data(), head_len, CommPurpose::control);
  shadow_all_.assign(static_cast<size_t>(R) * E, 0);
  recv_rows_.assign(R, 0);
  classic_in_pairs_ = 0;
  int64_t global_rows = 0;
  for (int s = 0; s < R; ++s) {
    for (int e = 0; e < E; ++e) {
      const int64_t v = head_recv[static_cast<size_t>(s * W + e)];
      shadow_all_[static_cast<size_t>(s) * E + e] = static_cast<uint8_t>(v & 1);
      if (s != me && owner[e] == me) classic_in_pairs_ += v >> 1;
    }
    recv_rows_[s] = head_recv[static_cast<size_t>(s * W + E)];
    global_rows += head_recv[static_cast<size_t>(s * W + E + 1)];
  }
  // Chunks pay off only when each carries enough rows (MokOptions::min_chunk_rows).
  chunks_ = std::max(1, options_.overlap_chunks);
  const int64_t fill = global_rows / (R * std::max<int64_t>(1, options_.min_chunk_rows));
  chunks_ = static_cast<int>(std::min<int64_t>(chunks_, std::max<int64_t>(1, fill)));
  log_.chunks = chunks_;
  worker_->set_inline(chunks_ == 1);  // one chunk: nothing to overlap worth two thread hand-offs
  auto shadows = [&](int s, int e) { return shadow_all_[static_cast<size_t>(s) * E + e] != 0; };
  bool any_shadow = false;
  for (uint8_t v : shadow_all_) any_shadow |= v != 0;

  // 3. owners send the weights of shadowed experts: per destination, experts ascending,
  // W_up then W_down.
  if (any_shadow) {
    std::vector<int64_t> send_cnt(R, 0), recv_cnt(R, 0);
    for (int q = 0; q < R; ++q) {
      for (int e : mine)
        if (shadows(q, e)) send_cnt[q] += P;
      for (int e : placement_.experts_on(q))
        if (shadows(me, e)) recv_cnt[q] += P;
    }
    int64_t send_total = 0, recv_total = 0;
    for (int q = 0; q < R; ++q) {
      send_total += send_cnt[q];
      recv_total += recv_cnt[q];
    }
    std::vector<real> send_w(static_cast<size_t>(send_total)), recv_w(static_cast<size_t>(recv_total));
    int64_t off = 0;
    for (int q = 0; q < R; ++q)
      for (int e : mine)
        if (shadows(q, e)) {
          SwiGluMlp& ex = *bank.experts[e];
          if (ex.up().weight().value.numel() + ex.down().weight().value.numel() != P)
            throw std::logic_error("MokDispatcher: expert " + std::to_string(e) + " is not (d, f)");
          copy_param(send_w.data() + off, ex.up().weight());
          copy_param(send_w.data() + off + 2 * d * f, ex.down().weight());
          off += P;
        }
    comm_.all_to_all_v(send_w.data(), send_cnt, recv_w.data(), recv_cnt, CommPurpose::weights);
    off = 0;
    for (int q = 0; q < R; ++q)
      for (int e : placement_.experts_on(q))
        if (shadows(me, e)) {
          SwiGluMlp& sc = shadow_copy(e, d, f);
          match_saved_inputs(sc, bank);
          std::memcpy(sc.up().weight().value.data(), recv_w.data() + off, 2 * d * f * sizeof(real));
          std::memcpy(sc.down().weight().value.data(), recv_w.data() + off + 2 * d * f,
                      f * d * sizeof(real));
          off += P;
        }
  }

  int64_t sent_total = 0, recv_total = 0;
  std::vector<int64_t> send_meta(R), recv_meta(R);
  const int64_t meta_row = k * static_cast<int64_t>(sizeof(int32_t) + sizeof(real));
  for (int q = 0; q < R; ++q) {
    sent_total += send_rows_[q];
    recv_total += recv_rows_[q];
    send_meta[q] = send_rows_[q] * meta_row;
    recv_meta[q] = recv_rows_[q] * meta_row;
  }
  // 4. the rows' entries and gates, one message per peer: (rows·k) int32 then (rows·k) real.
  // With one chunk the token rows (5) ride in the same message, after them: one exchange
  // fewer, which is what a latency-bound decode step pays for.
  const bool rows_with_meta = chunks_ == 1;
  Tensor recv_x({recv_total, d});  // recv_fwd_ layout (source order when C = 1)
  {
    const int64_t row_bytes = d * static_cast<int64_t>(sizeof(real));
    std::vector<int64_t> send_bytes(send_meta), recv_bytes(recv_meta);
    if (rows_with_meta)
      for (int q = 0; q < R; ++q) {
        send_bytes[q] += send_rows_[q] * row_bytes;
        recv_bytes[q] += recv_rows_[q] * row_bytes;
      }
    int64_t out_total = 0, in_total = 0;
    for (int q = 0; q < R; ++q) {
      out_total += send_bytes[q];
      in_total += recv_bytes[q];
    }
    std::vector<uint8_t> out(static_cast<size_t>(out_total)), in(static_cast<size_t>(in_total));
    int64_t row = 0, off = 0;
    for (int q = 0; q < R; ++q) {
      const int64_t m = send_rows_[q] * k;
      std::memcpy(out.data() + off, send_entry.data() + row * k, m * sizeof(int32_t));
      std::memcpy(out.data() + off + m * sizeof(int32_t), send_gate.data() + row * k, m * sizeof(real));
      off += m * static_cast<int64_t>(sizeof(int32_t) + sizeof(real));
      if (rows_with_meta) {
        for (int64_t i = row; i < row + send_rows_[q]; ++i, off += row_bytes)
          std::memcpy(out.data() + off, x.data() + send_token_[i] * d, static_cast<size_t>(row_bytes));
      }
      row += send_rows_[q];
    }
    if (rows_with_meta)
      comm_.all_to_all_bytes(out.data(), send_bytes, in.data(), recv_bytes, CommPurpose::dispatch, send_meta,
                             recv_meta, CommPurpose::control);
    else
      comm_.all_to_all_bytes(out.data(), send_bytes, in.data(), recv_bytes, CommPurpose::control);
    recv_entry_.assign(static_cast<size_t>(recv_total * k), -1);
    recv_gate_.assign(static_cast<size_t>(recv_total * k), real(0));
    row = 0;
    off = 0;
    for (int s = 0; s < R; ++s) {
      const int64_t m = recv_rows_[s] * k;
      std::memcpy(recv_entry_.data() + row * k, in.data() + off, m * sizeof(int32_t));
      std::memcpy(recv_gate_.data() + row * k, in.data() + off + m * sizeof(int32_t), m * sizeof(real));
      off += m * static_cast<int64_t>(sizeof(int32_t) + sizeof(real));
      if (rows_with_meta) {
        std::memcpy(recv_x.data() + row * d, in.data() + off, static_cast<size_t>(recv_rows_[s] * row_bytes));
        off += recv_rows_[s] * row_bytes;
      }
      row += recv_rows_[s];
    }
  }

  // 5–8, in C chunks so that transfers overlap compute (see the header): the rows travel
  // chunk by chunk on the CommWorker's thread while this thread runs the shadow copies and
  // then each group of local experts as soon as its rows are in.
  const int C = chunks_;
  {
    std::vector<int> peer_experts(static_cast<size_t>(R));
    for (int q = 0; q < R; ++q) peer_experts[q] = static_cast<int>(placement_.experts_on(q).size());
    std::vector<int> s_lo, s_hi, r_lo, r_hi;
    entry_chunks(send_entry, k, send_rows_, peer_experts, C, s_lo, s_hi);
    entry_chunks(recv_entry_, k, recv_rows_, std::vector<int>(static_cast<size_t>(R), L), C, r_lo, r_hi);
    send_fwd_ = ChunkLayout(send_rows_, s_lo, C);
    send_cmb_ = ChunkLayout(send_rows_, s_hi, C);
    recv_fwd_ = ChunkLayout(recv_rows_, r_lo, C);
    recv_cmb_ = ChunkLayout(recv_rows_, r_hi, C);
    recv_done_fwd_.assign(static_cast<size_t>(C), {});
    recv_done_bwd_.assign(static_cast<size_t>(C), {});
    for (int64_t i = 0; i < recv_total; ++i) {
      recv_done_fwd_[r_hi[i]].push_back(i);
      recv_done_bwd_[r_lo[i]].push_back(i);
    }
  }
  expert_entries_.assign(static_cast<size_t>(L), {});
  recv_pos_.assign(static_cast<size_t>(recv_total * k), -1);
  for (int64_t i = 0; i < recv_total * k; ++i) {
    const int l = recv_entry_[i];
    if (l < 0) continue;
    if (l >= L) throw std::logic_error("MokDispatcher: received an entry for a foreign expert");
    recv_pos_[i] = static_cast<int64_t>(expert_entries_[l].size());
    expert_entries_[l].push_back(i);
  }
  for (int l = 0; l < L; ++l)
    if (!expert_entries_[l].empty() && !bank.experts[mine[l]])
      throw std::logic_error("MokDispatcher: expert " + std::to_string(mine[l]) + " is placed on rank " +
                             std::to_string(me) + " but not held here");

  // send_fwd_ layout; with one chunk the rows have already gone.
  Tensor send_x = rows_with_meta ? Tensor() : gather(x, layout_order(send_fwd_, send_token_), 1, d);
  Tensor back_y({recv_total, d});   // recv_cmb_ layout: one reduced row per received row
  Tensor got_y({sent_total, d});    // send_cmb_ layout
  Tensor parts({n * k, d});         // group sums at their first slot
  std::vector<Tensor> ye(static_cast<size_t>(L));
  DrainOnExit drain_on_exit{*worker_};
  std::vector<CommWorker::Ticket> arrived(static_cast<size_t>(C), 0);
  for (int c = 0; c < C && !rows_with_meta; ++c)  // 5. the token rows, chunk by chunk
    arrived[c] = worker_->submit([this, c, d, &send_x, &recv_x] {
      comm_.all_to_all_v(send_x.data() + send_fwd_.offset(c) * d, send_fwd_.counts(c, d),
                         recv_x.data() + recv_fwd_.offset(c) * d, recv_fwd_.counts(c, d),
                         CommPurpose::dispatch);
    });

  // 7. meanwhile the shadow copies run here; each shadowed pair is its own group.
  for (size_t i = 0; i < my_shadowed_.size(); ++i) {
    const auto& pairs = shadow_pairs_[i];
    Tensor xe = gather(x, pairs, k, d);
    Tensor yse = shadows_.at(my_shadowed_[i])->forward(xe, keep);
    parallel_for(static_cast<int64_t>(pairs.size()), 64, [&](int64_t i0, int64_t i1) {
      for (int64_t m = i0; m < i1; ++m) {
        const real g = gate[pairs[m]];
        real* dst = parts.data() + pairs[m] * d;
        const real* src = yse.data() + m * d;
        for (int64_t c = 0; c < d; ++c) dst[c] = g * src[c];
      }
    });
  }

  // 6. per chunk: its experts, each on all the rows naming it (receive order); then the rows
  // whose last expert this was are reduced and go back (8, combine).
  for (int c = 0; c < C; ++c) {
    worker_->wait(arrived[c]);
    for (int l = 0; l < L; ++l) {
      if (expert_chunk(l, L, C) != c || expert_entries_[l].empty()) continue;
      Tensor xe = gather(recv_x, entry_rows(expert_entries_[l], k, recv_fwd_), 1, d);
      ye[l] = bank.experts[mine[l]]->forward(xe, keep);
    }
    const std::vector<int64_t>& done = recv_done_fwd_[c];
    parallel_for(static_cast<int64_t>(done.size()), 32, [&](int64_t i0, int64_t i1) {
      for (int64_t m = i0; m < i1; ++m) {
        const int64_t i = done[m];
        real* y = back_y.data() + recv_cmb_.pos[i] * d;
        for (int64_t c2 = 0; c2 < d; ++c2) y[c2] = 0;
        for (int j = 0; j < k; ++j) {
          const int l = recv_entry_[i * k + j];
          if (l < 0) continue;
          const real g = recv_gate_[i * k + j];
          const real* src = ye[l].data() + recv_pos_[i * k + j] * d;
          for (int64_t c2 = 0; c2 < d; ++c2) y[c2] += g * src[c2];
        }
      }
    });
    worker_->submit([this, c, d, &back_y, &got_y] {
      comm_.all_to_all_v(back_y.data() + recv_cmb_.offset(c) * d, recv_cmb_.counts(c, d),
                         got_y.data() + send_cmb_.offset(c) * d, send_cmb_.counts(c, d),
                         CommPurpose::combine);
    });
  }
  worker_->drain();
  ye.clear();
  send_x.reset();
  recv_x.reset();
  back_y.reset();

  // 9. sum the groups in slot order.
  parallel_for(sent_total, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(parts.data() + head_pair_[i] * d, got_y.data() + send_cmb_.pos[i] * d, d * sizeof(real));
  });
  Tensor y({n, d});
  sum_heads(parts, head_of_, n, k, d, y);

  n_ = n;
  k_ = k;
  row_bytes_ = d * static_cast<int64_t>(sizeof(real));
  kept_ = keep;
  if (keep) {
    gate_.assign(gate, gate + n * k);
    finish_log(fwd_before_, false);
  } else {
    recv_gate_.clear();
    recv_entry_.clear();
    finish_log(fwd_before_, true);
  }
  return y;
}

Tensor MokDispatcher::backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate_out) {
  std::vector<real> dgate;  // (n·k), handed out as a host tensor at the end
  if (!kept_) throw std::logic_error("MokDispatcher::backward without a kept forward");
  const int R = comm_.size(), me = comm_.rank();
  const int E = placement_.experts();
  const int64_t n = n_, d = dy.dim(1);
  const int k = k_;
  const std::vector<int>& mine = placement_.experts_on(me);
  const int L = static_cast<int>(mine.size());
  auto shadows = [&](int s, int e) { return shadow_all_[static_cast<size_t>(s) * E + e] != 0; };
  int64_t sent_total = 0, recv_total = 0;
  std::vector<int64_t> send_k(R), recv_k(R);
  for (int q = 0; q < R; ++q) {
    sent_total += send_rows_[q];
    recv_total += recv_rows_[q];
    send_k[q] = send_rows_[q] * k;
    recv_k[q] = recv_rows_[q] * k;
  }

  // dy once per group row to the destination (the reverse of the combine), in the
  // forward's combine chunks, last chunk first: group c (run last to first) needs the rows
  // whose highest expert is in group c or later. A row's dx goes back (the reverse of the
  // dispatch) in the chunk of its lowest expert, once that group is done.
  const int C = chunks_;
  Tensor send_dy = gather(dy, layout_order(send_cmb_, send_token_), 1, d);  // send_cmb_ layout
  Tensor recv_dy({recv_total, d});   // recv_cmb_ layout
  Tensor back_dx({recv_total, d});   // recv_fwd_ layout
  Tensor got_dx({sent_total, d});    // send_fwd_ layout
  std::vector<Tensor> dxe(static_cast<size_t>(L));
  std::vector<real> back_dgate(static_cast<size_t>(recv_total * k), real(0));
  dgate.assign(static_cast<size_t>(n * k), real(0));
  Tensor parts({n * k, d});
  DrainOnExit drain_on_exit{*worker_};
  std::vector<CommWorker::Ticket> arrived(static_cast<size_t>(C));
  for (int c = C - 1; c >= 0; --c)
    arrived[c] = worker_->submit([this, c, d, &send_dy, &recv_dy] {
      comm_.all_to_all_v(send_dy.data() + send_cmb_.offset(c) * d, send_cmb_.counts(c, d),
                         recv_dy.data() + recv_cmb_.offset(c) * d, recv_cmb_.counts(c, d),
                         CommPurpose::combine);
    });

  // Meanwhile the shadow copies run backward here (their weight gradients go to the owners
  // below).
  for (size_t i = 0; i < my_shadowed_.size(); ++i) {
    const auto& pairs = shadow_pairs_[i];
    const int64_t m = static_cast<int64_t>(pairs.size());
    SwiGluMlp& sc = *shadows_.at(my_shadowed_[i]);
    sc.up().weight().grad.zero();
    sc.down().weight().grad.zero();
    Tensor dye = gather(dy, pairs, k, d);
    Tensor ge({m}), dge({m});
    for (int64_t j = 0; j < m; ++j) ge[j] = gate_[pairs[j]];
    Tensor dxs = sc.backward_gated(dye, &ge, &dge);
    for (int64_t j = 0; j < m; ++j) {
      dgate[pairs[j]] = dge[j];
      std::memcpy(parts.data() + pairs[j] * d, dxs.data() + j * d, d * sizeof(real));
    }
  }

  // Per chunk, last to first: the gated backward of each of its experts over the forward's
  // batch, then one reduced dx row for every row whose lowest expert this was.
  for (int c = C - 1; c >= 0; --c) {
    worker_->wait(arrived[c]);
    for (int l = 0; l < L; ++l) {
      const auto& entries = expert_entries_[l];
      if (expert_chunk(l, L, C) != c || entries.empty()) continue;
      const int64_t m = static_cast<int64_t>(entries.size());
      Tensor dye = gather(recv_dy, entry_rows(entries, k, recv_cmb_), 1, d);
      Tensor ge({m}), dge({m});
      for (int64_t i = 0; i < m; ++i) ge[i] = recv_gate_[entries[i]];
      dxe[l] = bank.experts[mine[l]]->backward_gated(dye, &ge, &dge);
      for (int64_t i = 0; i < m; ++i) back_dgate[entries[i]] = dge[i];
    }
    const std::vector<int64_t>& done = recv_done_bwd_[c];
    parallel_for(static_cast<int64_t>(done.size()), 32, [&](int64_t i0, int64_t i1) {
      for (int64_t m = i0; m < i1; ++m) {
        const int64_t i = done[m];
        real* out = back_dx.data() + recv_fwd_.pos[i] * d;
        for (int64_t c2 = 0; c2 < d; ++c2) out[c2] = 0;
        for (int j = 0; j < k; ++j) {
          const int l = recv_entry_[i * k + j];
          if (l < 0) continue;
          const real* src = dxe[l].data() + recv_pos_[i * k + j] * d;
          for (int64_t c2 = 0; c2 < d; ++c2) out[c2] += src[c2];
        }
      }
    });
    worker_->submit([this, c, d, &back_dx, &got_dx] {
      comm_.all_to_all_v(back_dx.data() + recv_fwd_.offset(c) * d, recv_fwd_.counts(c, d),
                         got_dx.data() + send_fwd_.offset(c) * d, send_fwd_.counts(c, d),
                         CommPurpose::dispatch);
    });
  }
  worker_->drain();
  dxe.clear();
  send_dy.reset();
  recv_dy.reset();
  back_dx.reset();

  std::vector<real> got_dgate(static_cast<size_t>(sent_total * k));
  comm_.all_to_all_v(back_dgate.data(), recv_k, got_dgate.data(), send_k, CommPurpose::control);

  bool any_shadow = false;
  for (uint8_t v : shadow_all_) any_shadow |= v != 0;
  if (any_shadow) {
    const int64_t f = [&] {
      for (int e : my_shadowed_) return shadows_.at(e)->hidden();
      for (int e : mine)
        if (bank.experts[e]) return bank.experts[e]->hidden();
      return int64_t{0};
    }();
    const int64_t P = 3 * d * f;
    std::vector<int64_t> send_cnt(R, 0), recv_cnt(R, 0);
    for (int q = 0; q < R; ++q) {
      for (int e : placement_.experts_on(q))
        if (shadows(me, e)) send_cnt[q] += P;
      for (int e : mine)
        if (shadows(q, e)) recv_cnt[q] += P;
    }
    int64_t st = 0, rt = 0;
    for (int q = 0; q < R; ++q) {
      st += send_cnt[q];
      rt += recv_cnt[q];
    }
    std::vector<real> send_g(static_cast<size_t>(st)), recv_g(static_cast<size_t>(rt));
    int64_t off = 0;
    for (int q = 0; q < R; ++q)
      for (int e : placement_.experts_on(q))
        if (shadows(me, e)) {
          SwiGluMlp& sc = *shadows_.at(e);
          std::memcpy(send_g.data() + off, sc.up().weight().grad.data(), 2 * d * f * sizeof(real));
          std::memcpy(send_g.data() + off + 2 * d * f, sc.down().weight().grad.data(),
                      f * d * sizeof(real));
          off += P;
        }
    comm_.all_to_all_v(send_g.data(), send_cnt, recv_g.data(), recv_cnt, CommPurpose::gradients);
    // The owner's own gradient is already in; add the shadows' in source-rank order.
    off = 0;
    for (int s = 0; s < R; ++s)
      for (int e : mine)
        if (shadows(s, e)) {
          real* gu = bank.experts[e]->up().weight().grad.data();
          real* gd = bank.experts[e]->down().weight().grad.data();
          const real* src = recv_g.data() + off;
          for (int64_t c = 0; c < 2 * d * f; ++c) gu[c] += src[c];
          for (int64_t c = 0; c < f * d; ++c) gd[c] += src[2 * d * f + c];
          off += P;
        }
  }

  // Shipped groups: the reduced dx at the group's first slot, gate gradients per slot.
  parallel_for(sent_total, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      std::memcpy(parts.data() + head_pair_[i] * d, got_dx.data() + send_fwd_.pos[i] * d, d * sizeof(real));
      const int64_t t = send_token_[i];
      for (int j = 0; j < k; ++j) {
        const int s = send_slot_[i * k + j];
        if (s < 0) break;
        dgate[t * k + s] = got_dgate[i * k + j];
      }
    }
  });
  Tensor dx({n, d});
  sum_heads(parts, head_of_, n, k, d, dx);

  dgate_out = Tensor({static_cast<int64_t>(dgate.size())});
  std::copy(dgate.begin(), dgate.end(), dgate_out.data());
  finish_log(fwd_before_, true);
  kept_ = false;
  recv_gate_.clear();
  recv_entry_.clear();
  recv_pos_.clear();
  expert_entries_.clear();
  gate_.clear();
  return dx;
}

void MokDispatcher::finish_log(const CommStats& before, bool complete) {
  // complete: the step is over (backward done, or a forward without keep).
  const CommStats delta = comm_.stats().since(before);
  log_.dispatch_bytes = delta.remote_sent(CommPurpose::dispatch);
  log_.combine_bytes = delta.remote_sent(CommPurpose::combine);
  log_.weight_bytes = delta.remote_sent(CommPurpose::weights);
  log_.gradient_bytes = delta.remote_sent(CommPurpose::gradients);
  log_.control_bytes = delta.remote_sent(CommPurpose::control);
  // Classic sends a row for every remote pair of this rank's tokens (token out; dy in
  // backward) and for every pair other ranks route to its experts (result back; dx in
  // backward).
  const int64_t passes = complete && log_.training ? 2 : 1;
  log_.classic_bytes =
      passes * (log_.shipped_pairs + log_.shadow_pairs + classic_in_pairs_) * row_bytes_;
  log_.bytes_saved = log_.classic_bytes - log_.payload_bytes();
  if (complete && decision_log_) decision_log_->append(log_);
}

MOK_NN_END
