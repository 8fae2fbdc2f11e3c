#include "core/parallel/mok_dispatcher.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/model/init.h"
#include "core/model/zero_gradients.h"
#include "core/parallel/row_moves.h"
#include "core/routing/routing_decision.h"

MOK_NN_BEGIN

namespace {

// Chunk keys of rows listed peer by peer (rows_per_peer[q] rows whose experts live on the
// rank computing peer q's rows, which holds experts_at[q] experts): the chunk of the row's
// lowest and highest entry (k local expert indices each, −1 padded).
void entry_chunks(const std::vector<int32_t>& entry, int k, const std::vector<int64_t>& rows_per_peer,
                  const std::vector<int>& experts_at, int C, std::vector<int>& lowest,
                  std::vector<int>& highest) {
  lowest.clear();
  highest.clear();
  if (C == 1) {  // one chunk: every key is 0
    int64_t rows = 0;
    for (int64_t r : rows_per_peer) rows += r;
    lowest.assign(static_cast<size_t>(rows), 0);
    highest.assign(static_cast<size_t>(rows), 0);
    return;
  }
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

}  // namespace

MokDispatcher::MokDispatcher(Communicator& comm, ExpertPlacement placement, MokOptions options)
    : own_plane_(std::make_unique<HostDataPlane>(comm)), plane_(*own_plane_), comm_(comm),
      placement_(std::move(placement)), options_(options),
      worker_(std::make_unique<CommWorker>(options.overlap_chunks > 0 && comm.allows_helper_thread())) {
  check_setup();
}

MokDispatcher::MokDispatcher(DataPlane& plane, ExpertPlacement placement, MokOptions options)
    : plane_(plane), comm_(plane.control()), placement_(std::move(placement)), options_(options),
      worker_(std::make_unique<CommWorker>(options.overlap_chunks > 0 && plane.control().allows_helper_thread())) {
  check_setup();
}

void MokDispatcher::check_setup() const {
  if (options_.overlap_chunks < 0)
    throw std::invalid_argument("MokDispatcher: overlap_chunks must be ≥ 0");
  if (placement_.ranks() != comm_.size())
    throw std::invalid_argument("MokDispatcher: placement for " + std::to_string(placement_.ranks()) +
                                " ranks, communicator has " + std::to_string(comm_.size()));
}

const SwiGluMlp* MokDispatcher::shadow(int expert) const {
  if (grouped_ && shadow_bank_ && expert >= 0 && expert < static_cast<int>(ever_shadowed_.size()) &&
      ever_shadowed_[expert])
    return shadow_bank_->experts[expert].get();
  auto it = shadows_.find(expert);
  return it == shadows_.end() ? nullptr : it->second.get();
}

SwiGluMlp& MokDispatcher::shadow_of(int expert) {
  if (grouped_) return *shadow_bank_->experts.at(expert);
  return *shadows_.at(expert);
}

ExpertBank& MokDispatcher::stacked_shadows(int64_t d, int64_t f, const ExpertBank& bank) {
  if (!shadow_bank_) {
    const int E = placement_.experts();
    std::vector<GroupedSwiGlu::ExpertSpec> specs;
    for (int e = 0; e < E; ++e) specs.push_back({"mok.shadow." + std::to_string(e), 0});
    std::vector<bool> remote(static_cast<size_t>(E), true);
    for (int e : placement_.experts_on(comm_.rank())) remote[e] = false;
    const BorrowedParameters borrowed;  // weights owned elsewhere: no masters beside the compute copies
    shadow_bank_ = std::make_unique<ExpertBank>(
        make_stacked_expert_bank(specs, remote, d, f, 0.0, 0.0, options_.layer, "moe.expert"));
    ever_shadowed_.assign(static_cast<size_t>(E), 0);
  }
  // Kept for backward the way the layer's own experts keep theirs (kittens, hidden recompute):
  // the stack computes, the per-expert views say the same (as the layer's own views do).
  GroupedSwiGlu& g = *shadow_bank_->grouped;
  if (g.policy() != bank.grouped->policy()) g.set_policy(bank.grouped->policy());
  g.set_recompute_hidden(bank.grouped->recompute_hidden());
  for (auto& view : shadow_bank_->experts)
    if (view) match_saved_inputs(*view, bank);
  return *shadow_bank_;
}

SwiGluMlp& MokDispatcher::shadow_copy(int expert, int64_t d, int64_t f) {
  auto& slot = shadows_[expert];
  if (!slot) {
    const BorrowedParameters borrowed;  // weights owned elsewhere: no master beside the compute copy
    slot = std::make_unique<SwiGluMlp>("mok.shadow." + std::to_string(expert), d, f, 0.0, 0.0, 0,
                                       options_.layer, "moe.expert", true);
  }
  return *slot;
}

MokCostModel MokDispatcher::cost_model(DType row_dtype, int64_t d, int64_t f) const {
  MokCostParams cost = options_.cost;
  cost.row_value_bytes = static_cast<double>(dtype_size(row_dtype));  // bf16 rows cost half
  cost.weight_value_bytes = static_cast<double>(dtype_size(ExecContext::current().compute_dtype()));  // and bf16 weights
  return MokCostModel(cost, d, f);
}

namespace {

// Whether any expert could be shadowed at all: the batch's tokens bound every expert's pairs
// (one slot per expert and token), and a choice to shadow never turns into one to ship as
// rows grow — so when none is shadowed at that bound, none is (decoding takes this way).
bool any_shadow_possible(const MokCostModel& model, const RoutingDecision& r, const std::vector<int>& owner, int me,
                         bool keep) {
  const double tokens = static_cast<double>(r.expert.numel() / std::max(r.k, 1));
  std::vector<double> bound(owner.size(), 0.0);
  for (size_t e = 0; e < owner.size(); ++e)
    if (owner[e] != me) bound[e] = tokens;
  const std::vector<uint8_t> d = model.decide(bound, owner, me, keep);
  return std::any_of(d.begin(), d.end(), [](uint8_t s) { return s != 0; });
}

}  // namespace

void MokDispatcher::record_decisions(const std::vector<uint8_t>& decision, const std::vector<double>& rows) {
  for (size_t e = 0; e < decision.size(); ++e)
    if (decision[e]) {
      my_shadowed_.push_back(static_cast<int>(e));
      log_.shadowed.push_back(static_cast<int>(e));
      log_.shadowed_rows.push_back(rows[e]);
    }
}

std::vector<uint8_t> MokDispatcher::decide(const RoutingDecision& r, const std::vector<int>& owner, DType row_dtype,
                                           int64_t d, int64_t f, bool keep) {
  return finish_decisions(start_decisions(r, owner, row_dtype, d, f, keep), owner);
}

MokDispatcher::PendingDecisions MokDispatcher::start_decisions(const RoutingDecision& r, const std::vector<int>& owner,
                                                               DType row_dtype, int64_t d, int64_t f, bool keep) {
  const ExecContext& cx = ExecContext::current();
  const int E = static_cast<int>(owner.size()), me = comm_.rank();
  const MokCostModel model = cost_model(row_dtype, d, f);
  my_shadowed_.clear();
  PendingDecisions p;
  Tensor owner_dev = upload_i32(std::vector<int32_t>(owner.begin(), owner.end()));
  if (!any_shadow_possible(model, r, owner, me, keep)) {
    p.dest = std::move(owner_dev);  // every expert to its owner
    return p;
  }
  Tensor counts = cx.empty({static_cast<int64_t>(E) * r.k}, DType::i32);
  cx.ops().slot_share_counts(r.expert, owner_dev, r.k, counts);
  p.launched = true;
  p.rows = cx.empty({E}, DType::f64);
  p.dest = cx.empty({E}, DType::i32);
  cx.ops().shadow_decisions(counts, owner_dev, me, r.k, model.rule(keep), p.rows, p.dest);
  return p;
}

std::vector<uint8_t> MokDispatcher::finish_decisions(const PendingDecisions& p, const std::vector<int>& owner) {
  const int E = static_cast<int>(owner.size()), me = comm_.rank();
  std::vector<uint8_t> decision(static_cast<size_t>(E), 0);
  if (!p.launched) return decision;
  std::vector<double> rows(static_cast<size_t>(E));
  std::vector<int32_t> dest(static_cast<size_t>(E));
  p.rows.copy_to_host(rows.data(), p.rows.bytes());
  p.dest.copy_to_host(dest.data(), p.dest.bytes());
  for (int e = 0; e < E; ++e) decision[e] = owner[e] != me && dest[e] < 0 ? 1 : 0;
  record_decisions(decision, rows);
  return decision;
}

int64_t MokDispatcher::exchange_heads(const std::vector<int64_t>& pairs_offsets, const std::vector<uint8_t>& my_decision,
                                      int chunks) {
  // One small all-to-all tells every peer (a) per expert, 2 · (pairs routed to it from here)
  // + shadow flag — owners learn who shadows their experts, the pair counts price the
  // classic baseline in the log — (b) how many rows come its way and (c) how many rows this
  // rank sends in all, so that every rank picks the same chunk count; with device chunks,
  // (d) its rows by the chunk of their lowest entry, then by their highest's.
  const int R = comm_.size(), me = comm_.rank(), E = placement_.experts();
  const int C = chunks;
  const int64_t W = E + 2 + (C > 1 ? 2 * C : 0);
  if (C > 1 && (ship_.chunk_lo.size() != static_cast<size_t>(C) * R || ship_.chunk_hi.size() != ship_.chunk_lo.size()))
    throw std::logic_error("MokDispatcher: heads in " + std::to_string(C) + " chunks without the rows' chunk counts");
  std::vector<int64_t> head_send(static_cast<size_t>(R * W)), head_recv(static_cast<size_t>(R * W));
  std::vector<int64_t> packed(static_cast<size_t>(E), 0);
  for (int e = 0; e < E; ++e) packed[e] = 2 * (pairs_offsets[e + 1] - pairs_offsets[e]) + my_decision[e];
  int64_t my_rows = 0;
  for (int q = 0; q < R; ++q) my_rows += send_rows_[q];
  for (int q = 0; q < R; ++q) {
    std::copy(packed.begin(), packed.end(), head_send.begin() + static_cast<ptrdiff_t>(q * W));
    head_send[static_cast<size_t>(q * W + E)] = send_rows_[q];
    head_send[static_cast<size_t>(q * W + E + 1)] = my_rows;
    for (int c = 0; c < (C > 1 ? C : 0); ++c) {
      head_send[static_cast<size_t>(q * W + E + 2 + c)] = ship_.chunk_lo[static_cast<size_t>(c) * R + q];
      head_send[static_cast<size_t>(q * W + E + 2 + C + c)] = ship_.chunk_hi[static_cast<size_t>(c) * R + q];
    }
  }
  const std::vector<int64_t> head_len(R, W);
  comm_.all_to_all_v(head_send.data(), head_len, head_recv.data(), head_len, CommPurpose::control);
  shadow_all_.assign(static_cast<size_t>(R) * E, 0);
  recv_rows_.assign(R, 0);
  recv_entries_.assign(placement_.experts_on(me).size(), 0);
  classic_in_pairs_ = 0;
  int64_t global_rows = 0;
  for (int s = 0; s < R; ++s) {
    for (int e = 0; e < E; ++e) {
      const int64_t v = head_recv[static_cast<size_t>(s * W + e)];
      shadow_all_[static_cast<size_t>(s) * E + e] = static_cast<uint8_t>(v & 1);
      if (placement_.owner(e) != me) continue;
      if (s != me) classic_in_pairs_ += v >> 1;
      if (!(v & 1)) recv_entries_[static_cast<size_t>(placement_.local_index(e))] += v >> 1;
    }
    recv_rows_[s] = head_recv[static_cast<size_t>(s * W + E)];
    global_rows += head_recv[static_cast<size_t>(s * W + E + 1)];
  }
  recv_chunk_lo_.assign(C > 1 ? static_cast<size_t>(C) * R : 0, 0);
  recv_chunk_hi_.assign(recv_chunk_lo_.size(), 0);
  for (int s = 0; s < R; ++s)
    for (int c = 0; c < (C > 1 ? C : 0); ++c) {
      recv_chunk_lo_[static_cast<size_t>(c) * R + s] = head_recv[static_cast<size_t>(s * W + E + 2 + c)];
      recv_chunk_hi_[static_cast<size_t>(c) * R + s] = head_recv[static_cast<size_t>(s * W + E + 2 + C + c)];
    }
  return global_rows;
}

MokDispatcher::ShadowTransfer MokDispatcher::shadow_transfer(int64_t values_per_expert, bool to_shadows) const {
  const int R = comm_.size(), me = comm_.rank();
  ShadowTransfer t;
  t.send.assign(R, 0);
  t.recv.assign(R, 0);
  // What an owner sends to a peer for its shadow copies is what the peer receives from it.
  std::vector<int64_t>& owner_side = to_shadows ? t.send : t.recv;
  std::vector<int64_t>& shadow_side = to_shadows ? t.recv : t.send;
  for (int q = 0; q < R; ++q) {
    for (int e : placement_.experts_on(me))
      if (shadows(q, e)) owner_side[q] += values_per_expert;
    for (int e : placement_.experts_on(q))
      if (shadows(me, e)) shadow_side[q] += values_per_expert;
    t.send_total += t.send[q];
    t.recv_total += t.recv[q];
  }
  return t;
}

bool MokDispatcher::shadows(int rank, int expert) const {
  return shadow_all_[static_cast<size_t>(rank) * placement_.experts() + expert] != 0;
}

bool MokDispatcher::any_shadow() const {
  return std::any_of(shadow_all_.begin(), shadow_all_.end(), [](uint8_t v) { return v != 0; });
}

void MokDispatcher::fetch_shadow_weights(ExpertBank& bank, int64_t d, int64_t f) {
  // Per destination, experts ascending, W_up then W_down, in the dtype the experts compute
  // with (bf16 on a bf16 GPU run: half the bytes of the masters). A shadow computes with what
  // arrives and keeps no master (BorrowedParameters): the bits are those its owner computes with.
  if (!any_shadow()) return;
  const int R = comm_.size(), me = comm_.rank();
  const ExecContext& cx = ExecContext::current();
  const std::vector<int>& mine = placement_.experts_on(me);
  const int64_t P = 3 * d * f;  // values per expert: W_up (d, 2f), W_down (f, d)
  const DType dtype = cx.compute_dtype();
  const ShadowTransfer t = shadow_transfer(P, true);
  Allocator& mem = cx.allocator();
  Tensor send_w = cx.empty({t.send_total}, dtype), recv_w = cx.empty({t.recv_total}, dtype);
  const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
  const int64_t up_bytes = 2 * d * f * esize, down_bytes = f * d * esize;
  // Packed and unpacked by one copy_ranges each (one launch on a GPU, not two an expert).
  std::vector<Allocator::CopyRange> copies;
  int64_t off = 0;
  for (int q = 0; q < R; ++q)
    for (int e : mine)
      if (shadows(q, e)) {
        SwiGluMlp& ex = *bank.experts[e];
        const Tensor& up = ex.up().weight().compute();
        const Tensor& down = ex.down().weight().compute();
        if (up.numel() + down.numel() != P || up.dtype() != dtype || down.dtype() != dtype)
          throw std::logic_error("MokDispatcher: expert " + std::to_string(e) + " is not (d, f) of " + dtype_name(dtype));
        auto* w = static_cast<uint8_t*>(send_w.raw()) + off * esize;
        copies.push_back({w, up.raw(), up_bytes});
        copies.push_back({w + up_bytes, down.raw(), down_bytes});
        off += P;
      }
  mem.copy_ranges(copies);
  plane_.all_to_all_rows(send_w, t.send, recv_w, t.recv, CommPurpose::weights);
  copies.clear();
  ExpertBank* stack = nullptr;  // the stacked shadows, made (or matched to the bank) once
  off = 0;
  for (int q = 0; q < R; ++q)
    for (int e : placement_.experts_on(q))
      if (shadows(me, e)) {
        if (grouped_ && !stack) stack = &stacked_shadows(d, f, bank);
        SwiGluMlp& sc = grouped_ ? *stack->experts.at(e) : shadow_copy(e, d, f);
        if (grouped_)
          ever_shadowed_[e] = 1;
        else
          match_saved_inputs(sc, bank);
        const auto* w = static_cast<const uint8_t*>(recv_w.raw()) + off * esize;
        copies.push_back({sc.up().weight().compute().raw(), w, up_bytes});
        copies.push_back({sc.down().weight().compute().raw(), w + up_bytes, down_bytes});
        off += P;
      }
  mem.copy_ranges(copies);
}

void MokDispatcher::return_shadow_gradients(ExpertBank& bank, int64_t d) {
  if (!any_shadow()) return;
  const int R = comm_.size(), me = comm_.rank();
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  Allocator& mem = cx.allocator();
  const std::vector<int>& mine = placement_.experts_on(me);
  const int64_t f = [&] {
    for (int e : my_shadowed_) return shadow_of(e).hidden();
    for (int e : mine)
      if (bank.experts[e]) return bank.experts[e]->hidden();
    return int64_t{0};
  }();
  const int64_t P = 3 * d * f;
  const int64_t esize = static_cast<int64_t>(sizeof(real));
  const ShadowTransfer t = shadow_transfer(P, false);
  Tensor send_g = cx.empty({t.send_total}, kRealDType), recv_g = cx.empty({t.recv_total}, kRealDType);
  std::vector<Allocator::CopyRange> copies;  // packed by one copy_ranges (one launch on a GPU)
  int64_t off = 0;
  for (int q = 0; q < R; ++q)
    for (int e : placement_.experts_on(q))
      if (shadows(me, e)) {
        SwiGluMlp& sc = shadow_of(e);
        auto* g = static_cast<uint8_t*>(send_g.raw()) + off * esize;
        copies.push_back({g, sc.up().weight().grad.raw(), 2 * d * f * esize});
        copies.push_back({g + 2 * d * f * esize, sc.down().weight().grad.raw(), f * d * esize});
        off += P;
      }
  mem.copy_ranges(copies);
  plane_.all_to_all_rows(send_g, t.send, recv_g, t.recv, CommPurpose::gradients);
  // The owner's own gradient is already in; add the shadows' in source-rank order: one add_each
  // per source rank (an expert appears once in each), so a sum's order is the ranks' order.
  off = 0;
  std::vector<Tensor> parts;  // the received blocks, as views for add_each
  std::vector<Ops::AddPair> adds;
  for (int s = 0; s < R; ++s) {
    parts.clear();
    adds.clear();
    for (int e : mine)
      if (shadows(s, e)) {
        Tensor& gu = bank.experts[e]->up().weight().grad;
        Tensor& gd = bank.experts[e]->down().weight().grad;
        parts.push_back(recv_g.view(off, gu.shape()));
        parts.push_back(recv_g.view(off + 2 * d * f, gd.shape()));
        adds.push_back({&gu, nullptr});
        adds.push_back({&gd, nullptr});
        off += P;
      }
    for (size_t i = 0; i < adds.size(); ++i) adds[i].x = &parts[i];
    ops.add_each(adds);
  }
}

void MokDispatcher::zero_shadow_gradients() {
  std::vector<Parameter*> grads;
  for (int e : my_shadowed_) {
    SwiGluMlp& sc = shadow_of(e);
    grads.push_back(&sc.up().weight());
    grads.push_back(&sc.down().weight());
  }
  zero_gradients(grads);
}

Tensor MokDispatcher::forward(const Tensor& x, const RoutingDecision& r, ExpertBank& bank,
                              bool keep) {
  const int R = comm_.size(), me = comm_.rank();
  const int E = placement_.experts();
  if (r.experts != E || bank.size() != E)
    throw std::invalid_argument("MokDispatcher: placement has " + std::to_string(E) +
                                " experts, routing " + std::to_string(r.experts) + ", bank " +
                                std::to_string(bank.size()));
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const bool host_rows = std::string(plane_.kind()) == "host";
  const int64_t n = x.dim(0), d = x.dim(1);
  const int k = r.k;
  n_ = n;
  k_ = k;
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

  if (!keep && options_.fixed_layout_max_rows > 0 && n <= options_.fixed_layout_max_rows) {
    device_plan_ = false;
    return forward_fixed(x, r, bank);
  }
  device_plan_ = bank.grouped != nullptr && (options_.plan == MokPlanPlace::device ||
                                             (options_.plan == MokPlanPlace::automatic && !host_rows));
  if (options_.plan == MokPlanPlace::device && !bank.grouped)
    throw std::logic_error("MokDispatcher: the device plan needs this rank's experts stacked");
  if (device_plan_) return forward_device(x, r, bank, keep, f);

  // The plan is made on the host: a copy of the routing (the router's own on the CPU).
  const std::vector<int32_t> expert_host = expert_ids(r);
  std::vector<real> gate_host(static_cast<size_t>(n * k));
  r.gate.copy_to_host(gate_host.data(), r.gate.bytes());
  const int32_t* expert = expert_host.data();  // (n·k)
  const real* gate = gate_host.data();         // (n·k)

  std::vector<int> owner(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) owner[e] = placement_.owner(e);

  // 0. rows this rank would ship per remote expert (a row shared by m experts of one rank
  // counts 1/m to each), the decisions, and everyone's decisions.
  const std::vector<uint8_t> my_decision = decide(r, owner, x.dtype(), d, f, keep);
  // 1. plan: one row per (destination, token) with its entries in slot order (the
  // experts this rank shadows are computed here instead).
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
  // Rows by destination rank, tokens in order within a rank, entries in slot order: count
  // each rank's rows, then fill them in one pass over the tokens.
  auto shipped = [&](int e) { return e >= 0 && shadow_index[e] < 0; };
  std::vector<int64_t> last_token(static_cast<size_t>(R), -1);
  for (int64_t t = 0; t < n; ++t)
    for (int s = 0; s < k; ++s) {
      const int e = expert[t * k + s];
      if (!shipped(e) || last_token[owner[e]] == t) continue;
      last_token[owner[e]] = t;
      send_rows_[owner[e]]++;
    }
  std::vector<int64_t> cursor(static_cast<size_t>(R), 0);  // next row of each destination
  int64_t sent_rows = 0;
  for (int q = 0; q < R; ++q) {
    cursor[q] = sent_rows;
    sent_rows += send_rows_[q];
  }
  send_token_.assign(static_cast<size_t>(sent_rows), 0);
  head_pair_.assign(static_cast<size_t>(sent_rows), 0);
  send_slot_.assign(static_cast<size_t>(sent_rows * k), -1);
  send_entry.assign(static_cast<size_t>(sent_rows * k), -1);
  send_gate.assign(static_cast<size_t>(sent_rows * k), real(0));
  std::vector<int64_t> row_of(static_cast<size_t>(R), -1);  // the token's row for each destination
  std::vector<int> filled(static_cast<size_t>(R), 0);       // entries in it so far
  for (int64_t t = 0; t < n; ++t) {
    for (int s = 0; s < k; ++s) {
      const int64_t p = t * k + s;
      const int e = expert[p];
      if (!shipped(e)) continue;
      const int q = owner[e];
      if (row_of[q] < 0) {
        row_of[q] = cursor[q]++;
        send_token_[static_cast<size_t>(row_of[q])] = t;
        head_pair_[static_cast<size_t>(row_of[q])] = p;
        head_of_[static_cast<size_t>(p)] = 1;
      }
      const size_t at = static_cast<size_t>(row_of[q] * k + filled[q]++);
      send_slot_[at] = s;
      send_entry[at] = placement_.local_index(e);
      send_gate[at] = gate[p];
    }
    for (int s = 0; s < k; ++s) {
      const int e = expert[t * k + s];
      if (e >= 0) {
        row_of[owner[e]] = -1;
        filled[owner[e]] = 0;
      }
    }
  }
  for (int q = 0; q < R; ++q)
    if (q != me) log_.shipped_rows += send_rows_[q];

  // 2. pair counts, decisions and row counts to every peer.
  const int64_t global_rows = exchange_heads(r.pairs.segments.host(), my_decision);
  // Chunks pay off only when each carries enough rows (MokOptions::min_chunk_rows).
  chunks_ = host_rows ? std::max(1, options_.overlap_chunks) : 1;  // see the header: one stream
  const int64_t fill = global_rows / (R * std::max<int64_t>(1, options_.min_chunk_rows));
  chunks_ = static_cast<int>(std::min<int64_t>(chunks_, std::max<int64_t>(1, fill)));
  log_.chunks = chunks_;
  // One chunk and a stacked bank: the local experts in one grouped product, and so are the
  // shadow copies.
  grouped_ = chunks_ == 1 && bank.grouped != nullptr;
  worker_->set_inline(chunks_ == 1);  // one chunk: nothing to overlap worth two thread hand-offs

  // 3. owners send the weights of shadowed experts.
  fetch_shadow_weights(bank, d, f);

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
  // On the CPU the rows ride with the entries when there is one chunk; a device's rows go
  // through its data plane.
  const bool rows_with_meta = chunks_ == 1 && host_rows;
  Tensor recv_x = cx.activation({recv_total, d});  // recv_fwd_ layout (source order when C = 1)
  {
    const int64_t row_bytes = rows_with_meta ? mok::row_bytes(x) : 0;
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
        const auto* xp = static_cast<const uint8_t*>(x.raw());
        for (int64_t i = row; i < row + send_rows_[q]; ++i, off += row_bytes)
          std::memcpy(out.data() + off, xp + send_token_[i] * row_bytes, static_cast<size_t>(row_bytes));
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
        std::memcpy(static_cast<uint8_t*>(recv_x.raw()) + row * row_bytes, in.data() + off,
                    static_cast<size_t>(recv_rows_[s] * row_bytes));
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
  expert_start_.assign(1, 0);
  for (int l = 0; l < L; ++l) expert_start_.push_back(expert_start_.back() + static_cast<int64_t>(expert_entries_[l].size()));
  const int64_t batch_rows = expert_start_.back();
  if (grouped_) {
    std::vector<int64_t> rows(static_cast<size_t>(L));
    for (int l = 0; l < L; ++l) rows[l] = static_cast<int64_t>(expert_entries_[l].size());
    group_offsets_ = stacked_row_offsets(bank, mine, rows);
  }

  // send_fwd_ layout; with one chunk the rows have already gone.
  Tensor send_x = rows_with_meta ? Tensor() : gather_by(x, layout_order(send_fwd_, send_token_), 1);
  Tensor back_y = cx.activation({recv_total, d});  // recv_cmb_ layout: one reduced row per received row
  // The groups' results, combined at the end: the shadowed pairs' gated rows first (in
  // my_shadowed_ order, pairs in order), then the returned rows (send_cmb_ layout).
  int64_t shadow_rows = 0;
  for (const auto& pairs : shadow_pairs_) shadow_rows += static_cast<int64_t>(pairs.size());
  Tensor results = cx.activation({shadow_rows + sent_total, d});
  Tensor got_y = row_block(results, shadow_rows, sent_total);
  // Every local expert's outputs, expert-major (the grouped product makes its own).
  Tensor ye = grouped_ ? Tensor() : cx.activation({batch_rows, d});
  DrainOnExit drain_on_exit{*worker_};
  std::vector<CommWorker::Ticket> arrived(static_cast<size_t>(C), 0);
  for (int c = 0; c < C && !rows_with_meta; ++c)  // 5. the token rows, chunk by chunk
    arrived[c] = worker_->submit([this, c, &send_x, &recv_x] {
      exchange_chunk(send_x, send_fwd_, recv_x, recv_fwd_, c, CommPurpose::dispatch);
    });

  // 7. meanwhile the shadow copies run here; each shadowed pair is its own group.
  std::vector<int32_t> row_of_pair(static_cast<size_t>(n * k), -1);  // for the final combine
  {
    std::vector<int64_t> all_pairs;  // every shadowed pair, my_shadowed_ order
    std::vector<real> g;
    for (const auto& pairs : shadow_pairs_)
      for (int64_t p : pairs) {
        row_of_pair[static_cast<size_t>(p)] = static_cast<int32_t>(all_pairs.size());
        all_pairs.push_back(p);
        g.push_back(gate[p]);
      }
    if (grouped_ && shadow_rows > 0) {  // all shadow copies in one grouped product
      GroupedSwiGlu& stack = *shadow_bank_->grouped;
      std::vector<int64_t> rows;
      for (const auto& pairs : shadow_pairs_) rows.push_back(static_cast<int64_t>(pairs.size()));
      const std::vector<int64_t> offsets = stacked_row_offsets(*shadow_bank_, my_shadowed_, rows);
      Tensor ys = stack.forward(gather_by(x, all_pairs, k), offsets, keep);
      Tensor dst = row_block(results, 0, shadow_rows);
      ops.scale_rows(ys, upload_real(g), dst);
    } else {
      int64_t at = 0;
      for (size_t i = 0; i < my_shadowed_.size(); ++i) {
        const auto& pairs = shadow_pairs_[i];
        const int64_t m = static_cast<int64_t>(pairs.size());
        Tensor yse = shadows_.at(my_shadowed_[i])->forward(gather_by(x, pairs, k), keep);
        Tensor dst = row_block(results, at, m);
        std::vector<real> g_i(g.begin() + at, g.begin() + at + m);
        if (m) ops.scale_rows(yse, upload_real(g_i), dst);
        at += m;
      }
    }
  }

  // 6. per chunk: its experts, each on all the rows naming it (receive order); then the rows
  // whose last expert this was are reduced and go back (8, combine).
  for (int c = 0; c < C; ++c) {
    worker_->wait(arrived[c]);
    if (grouped_) {  // C = 1: all experts at once
      std::vector<int64_t> rows;
      for (int l = 0; l < L; ++l) {
        const std::vector<int64_t> r_l = entry_rows(expert_entries_[l], k, recv_fwd_);
        rows.insert(rows.end(), r_l.begin(), r_l.end());
      }
      ye = bank.grouped->forward(gather_by(recv_x, rows, 1), group_offsets_, keep);
    } else {
      for (int l = 0; l < L; ++l) {
        if (expert_chunk(l, L, C) != c || expert_entries_[l].empty()) continue;
        Tensor xe = gather_by(recv_x, entry_rows(expert_entries_[l], k, recv_fwd_), 1);
        Tensor out = bank.experts[mine[l]]->forward(xe, keep);
        cx.allocator().copy_within(row_block(ye, expert_start_[l], out.dim(0)).raw(), out.raw(), out.bytes());
      }
    }
    Tensor row_of_entry, gates;
    chunk_entries(recv_done_fwd_[c], recv_cmb_, c, row_of_entry, &gates);
    const int64_t rows_c = recv_cmb_.offset(c + 1) - recv_cmb_.offset(c);
    Tensor dst = row_block(back_y, recv_cmb_.offset(c), rows_c);
    if (rows_c) ops.combine_pairs(ye, row_of_entry, &gates, rows_c, k, dst);
    worker_->submit([this, c, &back_y, &got_y] {
      exchange_chunk(back_y, recv_cmb_, got_y, send_cmb_, c, CommPurpose::combine);
    });
  }
  worker_->drain();
  ye.reset();
  send_x.reset();
  recv_x.reset();
  back_y.reset();

  // 9. sum the groups in slot order.
  for (int64_t i = 0; i < sent_total; ++i)
    row_of_pair[static_cast<size_t>(head_pair_[i])] = static_cast<int32_t>(shadow_rows + send_cmb_.pos[i]);
  Tensor y = cx.activation({n, d});
  ops.combine_pairs(results, upload_i32(row_of_pair), nullptr, n, k, y);
  got_y.reset();
  results.reset();

  row_bytes_ = mok::row_bytes(x);
  kept_ = keep;
  if (keep) {
    gate_ = r.gate.clone(MemTag{});
    finish_log(fwd_before_, false);
  } else {
    recv_gate_.clear();
    recv_entry_.clear();
    finish_log(fwd_before_, true);
  }
  return y;
}

Tensor MokDispatcher::backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate_out) {
  if (!kept_) throw std::logic_error("MokDispatcher::backward without a kept forward");
  if (device_plan_) return backward_device(dy, bank, dgate_out);
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  Allocator& mem = cx.allocator();
  const int R = comm_.size(), me = comm_.rank();
  const int64_t n = n_, d = dy.dim(1);
  const int k = k_;
  const std::vector<int>& mine = placement_.experts_on(me);
  const int L = static_cast<int>(mine.size());
  int64_t sent_total = 0, recv_total = 0;
  std::vector<int64_t> send_k(R), recv_k(R);
  for (int q = 0; q < R; ++q) {
    sent_total += send_rows_[q];
    recv_total += recv_rows_[q];
    send_k[q] = send_rows_[q] * k;
    recv_k[q] = recv_rows_[q] * k;
  }
  const int64_t batch_rows = expert_start_.back();

  // dy once per group row to the destination (the reverse of the combine), in the
  // forward's combine chunks, last chunk first: group c (run last to first) needs the rows
  // whose highest expert is in group c or later. A row's dx goes back (the reverse of the
  // dispatch) in the chunk of its lowest expert, once that group is done.
  const int C = chunks_;
  Tensor send_dy = gather_by(dy, layout_order(send_cmb_, send_token_), 1);  // send_cmb_ layout
  Tensor recv_dy = cx.activation({recv_total, d});  // recv_cmb_ layout
  Tensor back_dx = cx.activation({recv_total, d});  // recv_fwd_ layout
  // The groups' input gradients, combined at the end: the shadowed pairs' rows first, then
  // the returned rows (send_fwd_ layout).
  int64_t shadow_rows = 0;
  for (const auto& pairs : shadow_pairs_) shadow_rows += static_cast<int64_t>(pairs.size());
  Tensor results = cx.activation({shadow_rows + sent_total, d});
  Tensor got_dx = row_block(results, shadow_rows, sent_total);
  Tensor dxe = grouped_ ? Tensor() : cx.activation({batch_rows, d});  // every local expert's dx, expert-major
  Tensor dge = cx.empty({batch_rows}, kRealDType);  // … and its gate gradients
  DrainOnExit drain_on_exit{*worker_};
  std::vector<CommWorker::Ticket> arrived(static_cast<size_t>(C));
  for (int c = C - 1; c >= 0; --c)
    arrived[c] = worker_->submit([this, c, &send_dy, &recv_dy] {
      exchange_chunk(send_dy, send_cmb_, recv_dy, recv_cmb_, c, CommPurpose::combine);
    });

  // Meanwhile the shadow copies run backward here (their weight gradients go to the owners
  // below); the shadowed pairs' gate gradients are kept per pair.
  std::vector<int32_t> row_of_pair(static_cast<size_t>(n * k), -1);  // for the final combine
  std::vector<int32_t> dgate_pair;  // pair of each gate gradient in dgate_rows, in order
  Tensor shadow_dgate = cx.empty({shadow_rows}, kRealDType);
  {
    std::vector<int32_t> all_pairs;  // every shadowed pair, my_shadowed_ order
    for (const auto& pairs : shadow_pairs_)
      for (int64_t p : pairs) {
        row_of_pair[static_cast<size_t>(p)] = static_cast<int32_t>(all_pairs.size());
        all_pairs.push_back(static_cast<int32_t>(p));
        dgate_pair.push_back(static_cast<int32_t>(p));
      }
    zero_shadow_gradients();
    if (grouped_ && shadow_rows > 0) {  // all shadow copies in one grouped product
      const std::vector<int64_t> pairs(all_pairs.begin(), all_pairs.end());
      Tensor ge = cx.empty({shadow_rows}, kRealDType);
      ops.pairs_to_rows(gate_, upload_i32(all_pairs), ge);
      Tensor dxs = shadow_bank_->grouped->backward_gated(gather_by(dy, pairs, k), ge, shadow_dgate);
      mem.copy_within(row_block(results, 0, shadow_rows).raw(), dxs.raw(), dxs.bytes());
    } else {
      int64_t at = 0;
      for (size_t i = 0; i < my_shadowed_.size(); ++i) {
        const auto& pairs = shadow_pairs_[i];
        const int64_t m = static_cast<int64_t>(pairs.size());
        SwiGluMlp& sc = *shadows_.at(my_shadowed_[i]);
        std::vector<int32_t> pair_idx(pairs.begin(), pairs.end());
        Tensor ge = cx.empty({m}, kRealDType);
        Tensor dg = shadow_dgate.view(at, {m});
        if (m) ops.pairs_to_rows(gate_, upload_i32(pair_idx), ge);
        Tensor dxs = sc.backward_gated(gather_by(dy, pairs, k), &ge, &dg);
        mem.copy_within(row_block(results, at, m).raw(), dxs.raw(), dxs.bytes());
        at += m;
      }
    }
  }

  // Per chunk, last to first: the gated backward of each of its experts over the forward's
  // batch, then one reduced dx row for every row whose lowest expert this was.
  for (int c = C - 1; c >= 0; --c) {
    worker_->wait(arrived[c]);
    auto entry_gates = [&](int l) {
      std::vector<real> g;
      for (int64_t i : expert_entries_[l]) g.push_back(recv_gate_[static_cast<size_t>(i)]);
      return g;
    };
    if (grouped_) {  // C = 1: all experts at once
      std::vector<int64_t> rows;
      std::vector<real> g;
      for (int l = 0; l < L; ++l) {
        const std::vector<int64_t> r_l = entry_rows(expert_entries_[l], k, recv_cmb_);
        rows.insert(rows.end(), r_l.begin(), r_l.end());
        const std::vector<real> g_l = entry_gates(l);
        g.insert(g.end(), g_l.begin(), g_l.end());
      }
      dxe = bank.grouped->backward_gated(gather_by(recv_dy, rows, 1), upload_real(g), dge);
    } else {
      for (int l = 0; l < L; ++l) {
        const auto& entries = expert_entries_[l];
        if (expert_chunk(l, L, C) != c || entries.empty()) continue;
        const int64_t m = static_cast<int64_t>(entries.size());
        Tensor dye = gather_by(recv_dy, entry_rows(entries, k, recv_cmb_), 1);
        Tensor ge = upload_real(entry_gates(l));
        Tensor dg = dge.view(expert_start_[l], {m});
        Tensor dx_l = bank.experts[mine[l]]->backward_gated(dye, &ge, &dg);
        mem.copy_within(row_block(dxe, expert_start_[l], m).raw(), dx_l.raw(), dx_l.bytes());
      }
    }
    Tensor row_of_entry;
    chunk_entries(recv_done_bwd_[c], recv_fwd_, c, row_of_entry, nullptr);
    const int64_t rows_c = recv_fwd_.offset(c + 1) - recv_fwd_.offset(c);
    Tensor dst = row_block(back_dx, recv_fwd_.offset(c), rows_c);
    if (rows_c) ops.combine_pairs(dxe, row_of_entry, nullptr, rows_c, k, dst);
    worker_->submit([this, c, &back_dx, &got_dx] {
      exchange_chunk(back_dx, recv_fwd_, got_dx, send_fwd_, c, CommPurpose::dispatch);
    });
  }
  worker_->drain();
  send_dy.reset();
  recv_dy.reset();
  back_dx.reset();
  dxe.reset();

  // The gate gradients of the received entries, in receive order (0 for pads), back to the
  // sources.
  Tensor back_dgate = cx.empty({recv_total * k}, kRealDType);
  {
    std::vector<int32_t> entry_of_row;  // expert-major row → entry i·k + j
    for (int l = 0; l < L; ++l)
      for (int64_t i : expert_entries_[l]) entry_of_row.push_back(static_cast<int32_t>(i));
    if (entry_of_row.empty())
      back_dgate.zero();
    else
      ops.rows_to_pairs(dge, upload_i32(entry_of_row), back_dgate);
  }
  dge.reset();
  Tensor got_dgate = cx.empty({sent_total * k}, kRealDType);
  plane_.all_to_all_rows(back_dgate, recv_k, got_dgate, send_k, CommPurpose::control);

  return_shadow_gradients(bank, d);

  // Shipped groups: the reduced dx at the group's first slot, gate gradients per slot.
  std::vector<int32_t> got_entry;  // entry of got_dgate for each gate gradient after the shadows'
  for (int64_t i = 0; i < sent_total; ++i) {
    row_of_pair[static_cast<size_t>(head_pair_[i])] = static_cast<int32_t>(shadow_rows + send_fwd_.pos[i]);
    const int64_t t = send_token_[i];
    for (int j = 0; j < k; ++j) {
      const int s = send_slot_[i * k + j];
      if (s < 0) break;
      got_entry.push_back(static_cast<int32_t>(i * k + j));
      dgate_pair.push_back(static_cast<int32_t>(t * k + s));
    }
  }
  Tensor dgate_rows = cx.empty({static_cast<int64_t>(dgate_pair.size())}, kRealDType);
  if (shadow_rows) mem.copy_within(dgate_rows.raw(), shadow_dgate.raw(), shadow_dgate.bytes());
  if (!got_entry.empty()) {
    Tensor tail = dgate_rows.view(shadow_rows, {static_cast<int64_t>(got_entry.size())});
    ops.pairs_to_rows(got_dgate, upload_i32(got_entry), tail);
  }
  dgate_out = cx.empty({n * k}, kRealDType);
  if (dgate_pair.empty())
    dgate_out.zero();
  else
    ops.rows_to_pairs(dgate_rows, upload_i32(dgate_pair), dgate_out);  // 0 for dropped pairs
  Tensor dx = cx.activation({n, d});
  ops.combine_pairs(results, upload_i32(row_of_pair), nullptr, n, k, dx);

  finish_log(fwd_before_, true);
  kept_ = false;
  recv_gate_.clear();
  recv_entry_.clear();
  recv_pos_.clear();
  expert_entries_.clear();
  gate_.reset();
  return dx;
}

void MokDispatcher::exchange_chunk(const Tensor& send, const ChunkLayout& ls, Tensor& recv, const ChunkLayout& lr,
                                   int c, CommPurpose purpose) {
  Tensor s = row_block(send, ls.offset(c), ls.offset(c + 1) - ls.offset(c));
  Tensor r = row_block(recv, lr.offset(c), lr.offset(c + 1) - lr.offset(c));
  plane_.all_to_all_rows(s, ls.counts(c, 1), r, lr.counts(c, 1), purpose);
}

void MokDispatcher::chunk_entries(const std::vector<int64_t>& done, const ChunkLayout& layout, int c,
                                  Tensor& row_of_entry, Tensor* gates) const {
  const int k = k_;
  const int64_t first = layout.offset(c), rows = layout.offset(c + 1) - first;
  std::vector<int32_t> row_of(static_cast<size_t>(rows * k), -1);
  std::vector<real> g(gates ? static_cast<size_t>(rows * k) : 0, real(0));
  for (int64_t i : done) {
    const int64_t at = layout.pos[static_cast<size_t>(i)] - first;
    if (at < 0 || at >= rows) throw std::logic_error("MokDispatcher: a finished row outside its chunk");
    for (int j = 0; j < k; ++j) {
      const int64_t e = i * k + j;
      const int l = recv_entry_[static_cast<size_t>(e)];
      if (l < 0) continue;
      row_of[static_cast<size_t>(at * k + j)] = static_cast<int32_t>(expert_start_[l] + recv_pos_[static_cast<size_t>(e)]);
      if (gates) g[static_cast<size_t>(at * k + j)] = recv_gate_[static_cast<size_t>(e)];
    }
  }
  row_of_entry = upload_i32(row_of);
  if (gates) *gates = upload_real(g);
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
  // The fixed layout (never kept): classic's fixed layout sends every pair to every other
  // rank, and the same rows back.
  const int64_t classic_rows = log_.fixed_layout ? 2 * (comm_.size() - 1) * n_ * k_
                                                 : passes * (log_.shipped_pairs + log_.shadow_pairs + classic_in_pairs_);
  log_.classic_bytes = classic_rows * row_bytes_;
  log_.bytes_saved = log_.classic_bytes - log_.payload_bytes();
  if (complete && decision_log_) decision_log_->append(log_);
}

MOK_NN_END
