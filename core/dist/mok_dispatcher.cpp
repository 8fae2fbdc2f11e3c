#include "core/dist/mok_dispatcher.h"

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

void copy_param(real* dst, const Parameter& p) {
  std::memcpy(dst, p.value.data(), p.value.bytes());
}

}  // namespace

MokDispatcher::MokDispatcher(Communicator& comm, ExpertPlacement placement, MokOptions options)
    : comm_(comm), placement_(std::move(placement)), options_(options) {
  if (placement_.ranks() != comm_.size())
    throw std::invalid_argument("MokDispatcher: placement for " + std::to_string(placement_.ranks()) +
                                " ranks, communicator has " + std::to_string(comm_.size()));
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
      const int e = r.expert[t * k + s];
      if (e < 0 || owner[e] == me) continue;
      int m = 0;
      for (int q = 0; q < k; ++q) {
        const int eq = r.expert[t * k + q];
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
    const int e = r.expert[p];
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
        const int e = r.expert[p];
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
        send_gate[base + j] = r.gate[p];
        ++j;
      }
    }
  for (int q = 0; q < R; ++q)
    if (q != me) log_.shipped_rows += send_rows_[q];

  // 2. one small all-to-all tells every peer (a) per expert, 2 · (pairs routed to it from
  // here) + shadow flag — owners learn who shadows their experts, the pair counts price
  // the classic baseline in the log — and (b) how many rows come its way.
  std::vector<int64_t> head_send(static_cast<size_t>(R) * (E + 1)), head_recv(static_cast<size_t>(R) * (E + 1));
  {
    std::vector<int64_t> packed(static_cast<size_t>(E), 0);
    for (int64_t p = 0; p < n * k; ++p)
      if (r.expert[p] >= 0) packed[r.expert[p]] += 2;
    for (int e = 0; e < E; ++e) packed[e] += my_decision[e];
    for (int q = 0; q < R; ++q) {
      std::copy(packed.begin(), packed.end(), head_send.begin() + static_cast<ptrdiff_t>(q) * (E + 1));
      head_send[static_cast<size_t>(q) * (E + 1) + E] = send_rows_[q];
    }
  }
  const std::vector<int64_t> head_len(R, E + 1);
  comm_.all_to_all_v(head_send.data(), head_len, head_recv.data(), head_len, CommPurpose::control);
  shadow_all_.assign(static_cast<size_t>(R) * E, 0);
  recv_rows_.assign(R, 0);
  classic_in_pairs_ = 0;
  for (int s = 0; s < R; ++s) {
    for (int e = 0; e < E; ++e) {
      const int64_t v = head_recv[static_cast<size_t>(s) * (E + 1) + e];
      shadow_all_[static_cast<size_t>(s) * E + e] = static_cast<uint8_t>(v & 1);
      if (s != me && owner[e] == me) classic_in_pairs_ += v >> 1;
    }
    recv_rows_[s] = head_recv[static_cast<size_t>(s) * (E + 1) + E];
  }
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
          std::memcpy(sc.up().weight().value.data(), recv_w.data() + off, 2 * d * f * sizeof(real));
          std::memcpy(sc.down().weight().value.data(), recv_w.data() + off + 2 * d * f,
                      f * d * sizeof(real));
          off += P;
        }
  }

  int64_t sent_total = 0, recv_total = 0;
  std::vector<int64_t> send_vals(R), recv_vals(R), send_meta(R), recv_meta(R);
  const int64_t meta_row = k * static_cast<int64_t>(sizeof(int32_t) + sizeof(real));
  for (int q = 0; q < R; ++q) {
    sent_total += send_rows_[q];
    recv_total += recv_rows_[q];
    send_vals[q] = send_rows_[q] * d;
    recv_vals[q] = recv_rows_[q] * d;
    send_meta[q] = send_rows_[q] * meta_row;
    recv_meta[q] = recv_rows_[q] * meta_row;
  }
  // 4. the rows' entries and gates, one message per peer: (rows·k) int32 then (rows·k) real.
  {
    std::vector<uint8_t> out(static_cast<size_t>(sent_total * meta_row)), in(static_cast<size_t>(recv_total * meta_row));
    int64_t row = 0, off = 0;
    for (int q = 0; q < R; ++q) {
      const int64_t m = send_rows_[q] * k;
      std::memcpy(out.data() + off, send_entry.data() + row * k, m * sizeof(int32_t));
      std::memcpy(out.data() + off + m * sizeof(int32_t), send_gate.data() + row * k, m * sizeof(real));
      off += m * static_cast<int64_t>(sizeof(int32_t) + sizeof(real));
      row += send_rows_[q];
    }
    comm_.all_to_all_bytes(out.data(), send_meta, in.data(), recv_meta, CommPurpose::control);
    recv_entry_.assign(static_cast<size_t>(recv_total * k), -1);
    recv_gate_.assign(static_cast<size_t>(recv_total * k), real(0));
    row = 0;
    off = 0;
    for (int s = 0; s < R; ++s) {
      const int64_t m = recv_rows_[s] * k;
      std::memcpy(recv_entry_.data() + row * k, in.data() + off, m * sizeof(int32_t));
      std::memcpy(recv_gate_.data() + row * k, in.data() + off + m * sizeof(int32_t), m * sizeof(real));
      off += m * static_cast<int64_t>(sizeof(int32_t) + sizeof(real));
      row += recv_rows_[s];
    }
  }

  // 5. the token rows.
  Tensor send_x = gather(x, send_token_, 1, d);
  Tensor recv_x({recv_total, d});
  comm_.all_to_all_v(send_x.data(), send_vals, recv_x.data(), recv_vals, CommPurpose::dispatch);
  send_x.reset();

  // 6. expand: each local expert on the rows naming it (receive order), then one reduced
  // row per received row.
  expert_entries_.assign(static_cast<size_t>(L), {});
  recv_pos_.assign(static_cast<size_t>(recv_total * k), -1);
  for (int64_t i = 0; i < recv_total * k; ++i) {
    const int l = recv_entry_[i];
    if (l < 0) continue;
    if (l >= L) throw std::logic_error("MokDispatcher: received an entry for a foreign expert");
    recv_pos_[i] = static_cast<int64_t>(expert_entries_[l].size());
    expert_entries_[l].push_back(i);
  }
  std::vector<Tensor> ye(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) {
    if (expert_entries_[l].empty()) continue;
    const int e = mine[l];
    if (!bank.experts[e])
      throw std::logic_error("MokDispatcher: expert " + std::to_string(e) + " is placed on rank " +
                             std::to_string(me) + " but not held here");
    Tensor xe = gather(recv_x, expert_entries_[l], k, d);
    ye[l] = bank.experts[e]->forward(xe, keep);
  }
  recv_x.reset();
  Tensor back_y({recv_total, d});
  parallel_for(recv_total, 32, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      real* y = back_y.data() + i * d;
      for (int64_t c = 0; c < d; ++c) y[c] = 0;
      for (int j = 0; j < k; ++j) {
        const int l = recv_entry_[i * k + j];
        if (l < 0) continue;
        const real g = recv_gate_[i * k + j];
        const real* src = ye[l].data() + recv_pos_[i * k + j] * d;
        for (int64_t c = 0; c < d; ++c) y[c] += g * src[c];
      }
    }
  });
  ye.clear();

  // 7. shadow copies run here; each shadowed pair is its own group.
  Tensor parts({n * k, d});  // group sums at their first slot
  for (size_t i = 0; i < my_shadowed_.size(); ++i) {
    const auto& pairs = shadow_pairs_[i];
    Tensor xe = gather(x, pairs, k, d);
    Tensor yse = shadows_.at(my_shadowed_[i])->forward(xe, keep);
    parallel_for(static_cast<int64_t>(pairs.size()), 64, [&](int64_t i0, int64_t i1) {
      for (int64_t m = i0; m < i1; ++m) {
        const real g = r.gate[pairs[m]];
        real* dst = parts.data() + pairs[m] * d;
        const real* src = yse.data() + m * d;
        for (int64_t c = 0; c < d; ++c) dst[c] = g * src[c];
      }
    });
  }

  // 8. reduced rows back to the sources; 9. sum the groups in slot order.
  Tensor got_y({sent_total, d});
  comm_.all_to_all_v(back_y.data(), recv_vals, got_y.data(), send_vals, CommPurpose::combine);
  back_y.reset();
  parallel_for(sent_total, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(parts.data() + head_pair_[i] * d, got_y.data() + i * d, d * sizeof(real));
  });
  Tensor y({n, d});
  sum_heads(parts, head_of_, n, k, d, y);

  n_ = n;
  k_ = k;
  row_bytes_ = d * static_cast<int64_t>(sizeof(real));
  kept_ = keep;
  if (keep) {
    gate_ = r.gate;
    finish_log(fwd_before_, false);
  } else {
    recv_gate_.clear();
    recv_entry_.clear();
    finish_log(fwd_before_, true);
  }
  return y;
}

Tensor MokDispatcher::backward(const Tensor& dy, ExpertBank& bank, std::vector<real>& dgate) {
  if (!kept_) throw std::logic_error("MokDispatcher::backward without a kept forward");
  const int R = comm_.size(), me = comm_.rank();
  const int E = placement_.experts();
  const int64_t n = n_, d = dy.dim(1);
  const int k = k_;
  const std::vector<int>& mine = placement_.experts_on(me);
  const int L = static_cast<int>(mine.size());
  auto shadows = [&](int s, int e) { return shadow_all_[static_cast<size_t>(s) * E + e] != 0; };
  int64_t sent_total = 0, recv_total = 0;
  std::vector<int64_t> send_k(R), recv_k(R), send_vals(R), recv_vals(R);
  for (int q = 0; q < R; ++q) {
    sent_total += send_rows_[q];
    recv_total += recv_rows_[q];
    send_k[q] = send_rows_[q] * k;
    recv_k[q] = recv_rows_[q] * k;
    send_vals[q] = send_rows_[q] * d;
    recv_vals[q] = recv_rows_[q] * d;
  }

  // dy once per group row to the destination (the reverse of the combine).
  Tensor send_dy = gather(dy, send_token_, 1, d);
  Tensor recv_dy({recv_total, d});
  comm_.all_to_all_v(send_dy.data(), send_vals, recv_dy.data(), recv_vals, CommPurpose::combine);
  send_dy.reset();

  // Gated backward of each local expert over its batch (forward's order), then one reduced
  // dx row per received row and the gate gradient of every entry.
  std::vector<Tensor> dxe(static_cast<size_t>(L));
  std::vector<real> back_dgate(static_cast<size_t>(recv_total * k), real(0));
  for (int l = 0; l < L; ++l) {
    const auto& entries = expert_entries_[l];
    if (entries.empty()) continue;
    const int64_t m = static_cast<int64_t>(entries.size());
    Tensor dye = gather(recv_dy, entries, k, d);
    std::vector<real> ge(static_cast<size_t>(m)), dge(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) ge[i] = recv_gate_[entries[i]];
    dxe[l] = bank.experts[mine[l]]->backward_gated(dye, ge.data(), dge.data());
    for (int64_t i = 0; i < m; ++i) back_dgate[entries[i]] = dge[i];
  }
  recv_dy.reset();
  Tensor back_dx({recv_total, d});
  parallel_for(recv_total, 32, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      real* out = back_dx.data() + i * d;
      for (int64_t c = 0; c < d; ++c) out[c] = 0;
      for (int j = 0; j < k; ++j) {
        const int l = recv_entry_[i * k + j];
        if (l < 0) continue;
        const real* src = dxe[l].data() + recv_pos_[i * k + j] * d;
        for (int64_t c = 0; c < d; ++c) out[c] += src[c];
      }
    }
  });
  dxe.clear();

  Tensor got_dx({sent_total, d});
  comm_.all_to_all_v(back_dx.data(), recv_vals, got_dx.data(), send_vals, CommPurpose::dispatch);
  back_dx.reset();
  std::vector<real> got_dgate(static_cast<size_t>(sent_total * k));
  comm_.all_to_all_v(back_dgate.data(), recv_k, got_dgate.data(), send_k, CommPurpose::control);

  // Shadow copies: backward here, weight gradients to the owners.
  dgate.assign(static_cast<size_t>(n * k), real(0));
  Tensor parts({n * k, d});
  bool any_shadow = false;
  for (uint8_t v : shadow_all_) any_shadow |= v != 0;
  for (size_t i = 0; i < my_shadowed_.size(); ++i) {
    const auto& pairs = shadow_pairs_[i];
    const int64_t m = static_cast<int64_t>(pairs.size());
    SwiGluMlp& sc = *shadows_.at(my_shadowed_[i]);
    sc.up().weight().grad.zero();
    sc.down().weight().grad.zero();
    Tensor dye = gather(dy, pairs, k, d);
    std::vector<real> ge(static_cast<size_t>(m)), dge(static_cast<size_t>(m));
    for (int64_t j = 0; j < m; ++j) ge[j] = gate_[pairs[j]];
    Tensor dxs = sc.backward_gated(dye, ge.data(), dge.data());
    for (int64_t j = 0; j < m; ++j) {
      dgate[pairs[j]] = dge[j];
      std::memcpy(parts.data() + pairs[j] * d, dxs.data() + j * d, d * sizeof(real));
    }
  }
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
      std::memcpy(parts.data() + head_pair_[i] * d, got_dx.data() + i * d, d * sizeof(real));
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
