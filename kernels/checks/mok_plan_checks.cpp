// The MoK plan's ops on the GPU (kernels/mok_plan.h through CudaOps) against host loops that
// say what they compute (CpuOps does the same), on fresh random routings with dropped slots:
// slot-share counts, the choices made from them (shadow_decisions, one expert exactly at the
// threshold), the rows to ship (counts, tokens, head pairs, entries, gates, pairs), the fixed
// layout's rows (every_row) and its receiver's pad ops (replace_negative, unroute_group),
// scatter_positions, rows_to_pairs with skipped (−1) positions, the received entries' sort
// with counts from the host (sort_pairs_counted), and the chunked layouts' keys and counts
// (row_chunk_keys, ship_rows with ShipChunks) with an i32 gather_rows. All integer or copied values, or the host's
// double arithmetic in the host's order: the GPU must match exactly.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/checks/check_util.h"
#include "kernels/checks/tensor_download.h"
#include "kernels/cuda_ops.h"

namespace mok::cuda {

namespace {

template <typename T>
mok::Tensor upload(CudaOps& ops, const std::vector<T>& v, mok::DType dtype, std::vector<int64_t> shape) {
  mok::Tensor t = mok::Tensor::empty(std::move(shape), dtype, ops.allocator());
  if (!v.empty()) t.copy_from_host(v.data(), static_cast<int64_t>(v.size() * sizeof(T)));
  return t;
}

void check_one(CheckInputs& in, std::vector<OpCheck>& out, int64_t n, int k, int E, int R) {
  const std::string tag = "_" + std::to_string(n) + "x" + std::to_string(k) + "_E" + std::to_string(E) + "_R" +
                          std::to_string(R);
  // Distinct experts per token (as the router gives), one slot in seven dropped (−1).
  std::vector<int32_t> ex = in.uniform_int(static_cast<size_t>(n * k), E);
  const std::vector<int32_t> drop = in.uniform_int(static_cast<size_t>(n * k), 7);
  for (int64_t t = 0; t < n; ++t)
    for (int s = 0; s < k; ++s) {
      int32_t& e = ex[t * k + s];
      for (int j = 0; j < s; ++j)
        if (ex[t * k + j] == e) e = (e + 1) % E, j = -1;  // again from the first slot
      if (drop[t * k + s] == 0) e = -1;
    }
  const std::vector<float> gate = in.normal(static_cast<size_t>(n * k));
  std::vector<int32_t> owner(E), dest(E), local(E);
  std::vector<int> held(R, 0);
  const std::vector<int32_t> shadow = in.uniform_int(static_cast<size_t>(E), 4);
  for (int e = 0; e < E; ++e) {
    owner[e] = static_cast<int32_t>(int64_t(e) * R / E);
    local[e] = held[owner[e]]++;
    dest[e] = shadow[e] == 0 ? -1 : owner[e];  // a quarter shadowed (not shipped)
  }

  // References.
  std::vector<int32_t> counts_ref(static_cast<size_t>(E) * k, 0);
  for (int64_t t = 0; t < n; ++t)
    for (int s = 0; s < k; ++s) {
      const int32_t e = ex[t * k + s];
      if (e < 0) continue;
      int m = 0;
      for (int j = 0; j < k; ++j) m += ex[t * k + j] >= 0 && owner[ex[t * k + j]] == owner[e];
      counts_ref[static_cast<size_t>(e) * k + m - 1]++;
    }
  std::vector<int64_t> rows_ref(R, 0);
  std::vector<int32_t> token_ref, head_ref, entry_ref, pair_ref;
  std::vector<float> gate_ref;
  for (int q = 0; q < R; ++q)
    for (int64_t t = 0; t < n; ++t) {
      int j = 0;
      for (int s = 0; s < k; ++s) {
        const int32_t e = ex[t * k + s];
        if (e < 0 || dest[e] != q) continue;
        if (j++ == 0) {
          token_ref.push_back(static_cast<int32_t>(t));
          head_ref.push_back(static_cast<int32_t>(t * k + s));
        }
        entry_ref.push_back(local[e]);
        gate_ref.push_back(gate[t * k + s]);
        pair_ref.push_back(static_cast<int32_t>(t * k + s));
      }
      if (j == 0) continue;
      rows_ref[q]++;
      for (; j < k; ++j) {
        entry_ref.push_back(-1);
        gate_ref.push_back(0.0f);
        pair_ref.push_back(-1);
      }
    }

  CudaOps ops(0);
  const mok::Tensor d_ex = upload(ops, ex, mok::DType::i32, {n * k});
  const mok::Tensor d_gate = upload(ops, gate, mok::DType::f32, {n * k});
  const mok::Tensor d_owner = upload(ops, owner, mok::DType::i32, {E});
  mok::Tensor d_counts = upload(ops, std::vector<int32_t>(counts_ref.size(), -7), mok::DType::i32,
                                {static_cast<int64_t>(counts_ref.size())});  // poisoned
  ops.slot_share_counts(d_ex, d_owner, k, d_counts);
  out.push_back({"mok_plan.slot_share_counts" + tag, differing_fraction(download<int32_t>(d_counts), counts_ref), 0.0});

  // shadow_decisions from those counts for rank 0, with the threshold at the median remote
  // expert's row share (both choices occur, and that expert ties: ship), against the host's
  // sums and mok::shadow_wins.
  {
    const int self = 0;
    std::vector<double> rows_ref(static_cast<size_t>(E), 0.0);
    for (int e = 0; e < E; ++e)
      if (owner[e] != self)
        for (int m = 1; m <= k; ++m) rows_ref[e] += static_cast<double>(counts_ref[size_t(e) * k + m - 1]) / m;
    std::vector<double> sorted;  // the remote experts' row shares
    for (int e = 0; e < E; ++e)
      if (owner[e] != self) sorted.push_back(rows_ref[e]);
    std::sort(sorted.begin(), sorted.end());
    mok::ShadowRule rule;
    rule.ship_passes = 4.0;
    rule.d = 768.0;
    rule.row_bytes = 2.0;
    rule.bytes_per_second = 450e9;
    rule.shadow_seconds = rule.ship_passes * sorted[sorted.size() / 2] * rule.d * rule.row_bytes / rule.bytes_per_second;
    std::vector<int32_t> dest_ref(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) dest_ref[e] = owner[e] != self && mok::shadow_wins(rule, rows_ref[e]) ? -1 : owner[e];
    mok::Tensor d_rows = upload(ops, std::vector<double>(E, -1.0), mok::DType::f64, {E});
    mok::Tensor d_dest = upload(ops, std::vector<int32_t>(E, -9), mok::DType::i32, {E});
    ops.shadow_decisions(d_counts, d_owner, self, k, rule, d_rows, d_dest);
    out.push_back({"mok_plan.shadow_decisions.rows" + tag, differing_fraction(download<double>(d_rows), rows_ref), 0.0});
    out.push_back({"mok_plan.shadow_decisions.dest" + tag, differing_fraction(download<int32_t>(d_dest), dest_ref), 0.0});
  }

  const mok::ShipRows ship = ops.ship_rows(d_ex, d_gate, upload(ops, dest, mok::DType::i32, {E}),
                                           upload(ops, local, mok::DType::i32, {E}), k, R, /*every_row=*/false,
                                           nullptr);
  out.push_back({"mok_plan.ship_rows.rows" + tag, differing_fraction(ship.rows, rows_ref), 0.0});
  out.push_back({"mok_plan.ship_rows.token" + tag, differing_fraction(download<int32_t>(ship.token), token_ref), 0.0});
  out.push_back({"mok_plan.ship_rows.head_pair" + tag, differing_fraction(download<int32_t>(ship.head_pair), head_ref), 0.0});
  out.push_back({"mok_plan.ship_rows.entry" + tag, differing_fraction(download<int32_t>(ship.entry), entry_ref), 0.0});
  out.push_back({"mok_plan.ship_rows.gate" + tag, differing_fraction(download<float>(ship.gate), gate_ref), 0.0});
  out.push_back({"mok_plan.ship_rows.pair" + tag, differing_fraction(download<int32_t>(ship.pair), pair_ref), 0.0});

  // Chunks (the overlap's layouts): each rank's experts cut into C = 3 groups; every row's
  // keys (c·R + q of its lowest and highest entry's chunk) from the entries, and the rows per
  // key counted by ship_rows in its one read. Then the keys' rows permuted by gather_rows on
  // i32 tables (the chunked layouts' index tables), against a host gather.
  {
    mok::ShipChunks chunks;
    chunks.chunks = 3;
    chunks.locals.assign(static_cast<size_t>(R), 0);
    for (int e = 0; e < E; ++e) chunks.locals[owner[e]]++;
    const int C = chunks.chunks;
    std::vector<int32_t> lo_ref, hi_ref;
    std::vector<int64_t> count_lo(static_cast<size_t>(C) * R, 0), count_hi(count_lo.size(), 0);
    int64_t row = 0;
    for (int q = 0; q < R; ++q)
      for (int64_t i = 0; i < rows_ref[q]; ++i, ++row) {
        int a = E, b = -1;
        for (int j = 0; j < k; ++j) {
          const int32_t l = entry_ref[row * k + j];
          if (l >= 0) a = std::min(a, int(l)), b = std::max(b, int(l));
        }
        const int L = chunks.locals[q];
        lo_ref.push_back(int32_t(int64_t(a) * C / L) * R + q);
        hi_ref.push_back(int32_t(int64_t(b) * C / L) * R + q);
        count_lo[lo_ref.back()]++;
        count_hi[hi_ref.back()]++;
      }
    const mok::ShipRows chunked = ops.ship_rows(d_ex, d_gate, upload(ops, dest, mok::DType::i32, {E}),
                                                upload(ops, local, mok::DType::i32, {E}), k, R, false, &chunks);
    out.push_back({"mok_plan.ship_rows_chunked.rows" + tag, differing_fraction(chunked.rows, rows_ref), 0.0});
    out.push_back({"mok_plan.ship_rows_chunked.chunk_lo" + tag, differing_fraction(chunked.chunk_lo, count_lo), 0.0});
    out.push_back({"mok_plan.ship_rows_chunked.chunk_hi" + tag, differing_fraction(chunked.chunk_hi, count_hi), 0.0});
    out.push_back({"mok_plan.ship_rows_chunked.entry" + tag, differing_fraction(download<int32_t>(chunked.entry), entry_ref),
                   0.0});
    const int64_t total = static_cast<int64_t>(lo_ref.size());
    mok::Tensor key_lo = upload(ops, std::vector<int32_t>(lo_ref.size(), -5), mok::DType::i32, {total});
    mok::Tensor key_hi = upload(ops, std::vector<int32_t>(hi_ref.size(), -5), mok::DType::i32, {total});
    ops.row_chunk_keys(chunked.entry, chunked.rows, chunks, key_lo, key_hi);
    out.push_back({"mok_plan.row_chunk_keys.lo" + tag, differing_fraction(download<int32_t>(key_lo), lo_ref), 0.0});
    out.push_back({"mok_plan.row_chunk_keys.hi" + tag, differing_fraction(download<int32_t>(key_hi), hi_ref), 0.0});
    if (total > 0) {
      const std::vector<int32_t> order = in.uniform_int(static_cast<size_t>(2 * total), static_cast<int32_t>(total));
      std::vector<int32_t> gathered;
      for (int32_t o : order)
        for (int j = 0; j < k; ++j) gathered.push_back(pair_ref[size_t(o) * k + j]);
      mok::Tensor d_out = upload(ops, std::vector<int32_t>(gathered.size(), -6), mok::DType::i32, {2 * total, k});
      ops.gather_rows(chunked.pair, upload(ops, order, mok::DType::i32, {2 * total}), 1, d_out);
      out.push_back({"mok_plan.gather_rows_i32" + tag, differing_fraction(download<int32_t>(d_out), gathered), 0.0});
    }
  }

  // every_row (the fixed layout): every (q, token) at q·n + t, a row of pads (head_pair −1)
  // where the token has nothing on q; nothing read back to size them.
  {
    std::vector<int32_t> etoken, ehead, eentry, epair;
    std::vector<float> egate;
    for (int q = 0; q < R; ++q)
      for (int64_t t = 0; t < n; ++t) {
        etoken.push_back(static_cast<int32_t>(t));
        int32_t head = -1;
        int j = 0;
        for (int s = 0; s < k; ++s) {
          const int32_t e = ex[t * k + s];
          if (e < 0 || dest[e] != q) continue;
          if (j++ == 0) head = static_cast<int32_t>(t * k + s);
          eentry.push_back(local[e]);
          egate.push_back(gate[t * k + s]);
          epair.push_back(static_cast<int32_t>(t * k + s));
        }
        ehead.push_back(head);
        for (; j < k; ++j) {
          eentry.push_back(-1);
          egate.push_back(0.0f);
          epair.push_back(-1);
        }
      }
    const mok::ShipRows every = ops.ship_rows(d_ex, d_gate, upload(ops, dest, mok::DType::i32, {E}),
                                              upload(ops, local, mok::DType::i32, {E}), k, R, /*every_row=*/true,
                                              nullptr);
    out.push_back({"mok_plan.ship_rows_every.rows" + tag,
                   differing_fraction(every.rows, std::vector<int64_t>(static_cast<size_t>(R), n)), 0.0});
    out.push_back({"mok_plan.ship_rows_every.token" + tag, differing_fraction(download<int32_t>(every.token), etoken), 0.0});
    out.push_back({"mok_plan.ship_rows_every.head_pair" + tag, differing_fraction(download<int32_t>(every.head_pair), ehead),
                   0.0});
    out.push_back({"mok_plan.ship_rows_every.entry" + tag, differing_fraction(download<int32_t>(every.entry), eentry), 0.0});
    out.push_back({"mok_plan.ship_rows_every.gate" + tag, differing_fraction(download<float>(every.gate), egate), 0.0});
    out.push_back({"mok_plan.ship_rows_every.pair" + tag, differing_fraction(download<int32_t>(every.pair), epair), 0.0});

    // The receiver's pads: −1 → group L (replace_negative), then the rows of group L unrouted.
    const int32_t pad = E;
    std::vector<int32_t> replaced = eentry;
    for (int32_t& v : replaced)
      if (v < 0) v = pad;
    mok::Tensor d_entry = upload(ops, eentry, mok::DType::i32, {static_cast<int64_t>(eentry.size())});
    ops.replace_negative(d_entry, pad);
    out.push_back({"mok_plan.replace_negative" + tag, differing_fraction(download<int32_t>(d_entry), replaced), 0.0});
    const std::vector<int32_t> rows_of = in.uniform_int(replaced.size(), 1000);
    std::vector<int32_t> unrouted = rows_of;
    for (size_t i = 0; i < replaced.size(); ++i)
      if (replaced[i] == pad) unrouted[i] = -1;
    mok::Tensor d_rows = upload(ops, rows_of, mok::DType::i32, {static_cast<int64_t>(rows_of.size())});
    ops.unroute_group(d_entry, pad, d_rows);
    out.push_back({"mok_plan.unroute_group" + tag, differing_fraction(download<int32_t>(d_rows), unrouted), 0.0});
  }

  // scatter_positions of the head pairs into a poisoned (n·k) table; rows_to_pairs of the
  // entries' gates by their pairs (pads skipped) gives back each shipped slot's gate.
  std::vector<int32_t> positions_ref(static_cast<size_t>(n * k), -3);
  for (size_t i = 0; i < head_ref.size(); ++i) positions_ref[head_ref[i]] = 11 + static_cast<int32_t>(i);
  mok::Tensor d_pos = upload(ops, std::vector<int32_t>(positions_ref.size(), -3), mok::DType::i32, {n * k});
  ops.scatter_positions(ship.head_pair, 11, d_pos);
  out.push_back({"mok_plan.scatter_positions" + tag, differing_fraction(download<int32_t>(d_pos), positions_ref), 0.0});
  std::vector<float> per_pair_ref(static_cast<size_t>(n * k), 0.0f);
  for (size_t i = 0; i < pair_ref.size(); ++i)
    if (pair_ref[i] >= 0) per_pair_ref[pair_ref[i]] = gate_ref[i];
  mok::Tensor d_per_pair = upload(ops, std::vector<float>(per_pair_ref.size(), 5.0f), mok::DType::f32, {n * k});
  ops.rows_to_pairs(ship.gate, ship.pair, d_per_pair);
  out.push_back({"mok_plan.rows_to_pairs_skipping_pads" + tag, differing_fraction(download<float>(d_per_pair), per_pair_ref),
                 0.0});

  // sort_pairs_counted on the slots (−1: not routed), the counts given by the host: a stable
  // sort by expert, the offsets from the counts.
  std::vector<int64_t> per_expert(static_cast<size_t>(E), 0);
  for (int32_t e : ex)
    if (e >= 0) per_expert[e]++;
  std::vector<int32_t> order_ref, row_of_ref(ex.size(), -1);
  for (int e = 0; e < E; ++e)
    for (size_t p = 0; p < ex.size(); ++p)
      if (ex[p] == e) {
        row_of_ref[p] = static_cast<int32_t>(order_ref.size());
        order_ref.push_back(static_cast<int32_t>(p));
      }
  mok::Tensor d_slots = upload(ops, ex, mok::DType::i32, {n * k});
  const mok::PairOrder counted = ops.sort_pairs_counted(d_slots, E, per_expert);
  std::vector<int64_t> off_ref(1, 0);
  for (int64_t c : per_expert) off_ref.push_back(off_ref.back() + c);
  out.push_back({"mok_plan.sort_pairs_counted.order" + tag, differing_fraction(download<int32_t>(counted.order), order_ref),
                 0.0});
  out.push_back({"mok_plan.sort_pairs_counted.row_of_pair" + tag,
                 differing_fraction(download<int32_t>(counted.row_of_pair), row_of_ref), 0.0});
  out.push_back({"mok_plan.sort_pairs_counted.offsets" + tag, differing_fraction(counted.segments.host(), off_ref), 0.0});
}

}  // namespace

void check_mok_plan(CheckInputs& in, std::vector<OpCheck>& out) {
  run_guarded(out, "mok_plan", [&] {
    check_one(in, out, 16384, 8, 64, 2);
    check_one(in, out, 3001, 2, 8, 3);
    check_one(in, out, 7, 4, 12, 4);
  });
}

}  // namespace mok::cuda
