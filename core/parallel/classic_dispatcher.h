#pragma once
// ClassicDispatcher: the classic expert-parallel MoE dispatch, on any device.
//
// Experts are placed on ranks by an ExpertPlacement (E/R per rank by default). Each rank
// routes its own tokens (token-choice top-k, done before this; the router's PairOrder sorts
// the kept pairs by expert, token order within), then
//   forward   1. counts: rows per (destination rank, expert)        control plane (host)
//             2. every (token, expert) pair ships the token's row to the expert's owner:
//                k copies of a token with k remote experts          data plane, dispatch
//             3. gates of the shipped pairs (kept by the owner for backward)   data, control
//             4. the owner runs its experts with grouped products on the rows it received,
//                each expert's rows in source-rank order and token order within a source —
//                the global token order when ranks hold consecutive shards — so an expert
//                sees its batch as with one rank
//             5. outputs return to the sources                      data plane, combine
//             6. y[t] = Σ_s gate(t,s) · out(t,s), slots in order, no atomics
//   backward  dy rows of the kept pairs go to the owners (combine), which run the gated
//             grouped backward (weight gradients stay on the owner) and return dx rows
//             (dispatch) and dgate (control); dx[t] = Σ_s dx(t,s), slots in order.
// Rows move between layouts with the rank's gather ops (core/backend/ops.h); only the
// per-expert counts are on the host. Pairs whose expert is on the own rank take the same path
// as a self-message: a memory copy, counted as local bytes, never as remote traffic.
//
// The contract is ExpertDispatcher's (core/model/expert_dispatcher.h); with one rank the
// results equal LocalDispatcher's. Every rank must call forward/backward together (they are
// collectives), with the same `keep`. The bank must hold this rank's experts stacked
// (make_stacked_expert_bank).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/parallel/communicator.h"
#include "core/parallel/data_plane.h"
#include "core/parallel/expert_placement.h"
#include "core/parallel/fixed_row_exchange.h"
#include "core/parallel/row_moves.h"
#include "core/model/expert_dispatcher.h"
#include "core/real.h"

MOK_NN_BEGIN

// What the last forward moved, on this rank.
struct DispatchCounts {
  bool fixed_layout = false; // every pair went to every rank (nothing counted: only `pairs` is set)
  int64_t pairs = 0;         // routed (not dropped) pairs of this rank's tokens
  int64_t local_pairs = 0;   // … whose expert lives on this rank
  int64_t remote_pairs = 0;  // … shipped to another rank
  std::vector<int64_t> pairs_to_rank;  // (R) pairs sent to each rank (own rank included)
  std::vector<int64_t> expert_rows;    // (E) rows each expert of this rank computed, 0 elsewhere
};

class ClassicDispatcher final : public ExpertDispatcher {
 public:
  // Rows move through `plane` (the rank's device); counts through its control Communicator.
  ClassicDispatcher(DataPlane& plane, ExpertPlacement placement);
  // CPU ranks: rows as host messages over `comm` (a HostDataPlane held here).
  ClassicDispatcher(Communicator& comm, ExpertPlacement placement);

  Tensor forward(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank,
                 bool keep) override;
  Tensor backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate) override;
  std::string name() const override { return "classic"; }

  // N > 0: a forward not kept for backward with at most N rows uses the fixed layout
  // (core/parallel/fixed_row_exchange.h): a row per (token, slot) pair to every rank, nothing
  // counted and no wait for the device. Every rank must have the same rows at such a step
  // (generation: B/R). 0 (the default): never.
  void set_fixed_layout_max_rows(int64_t rows) { fixed_layout_max_rows_ = rows; }

  // C > 1: a step with keep or more rows than the fixed layout's limit runs in chunks of each
  // rank's local experts, one chunk's transfers beside the previous chunk's expert products
  // (core/parallel/classic_dispatcher_chunks.cpp); min(C, most experts on a rank) chunks, the
  // same on every rank. The results are those of 1 (the default) bit for bit.
  void set_overlap_chunks(int chunks) { overlap_chunks_ = std::max(1, chunks); }
  int overlap_chunks() const { return overlap_chunks_; }

  const DispatchCounts& last_counts() const { return counts_; }
  const ExpertPlacement& placement() const { return placement_; }

 private:
  void check_setup() const;
  Tensor forward_fixed(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank);
  int chunks_for_step() const;
  // Chunk c's per-peer rows sent and received; its part (rows, or values of a 1-D t) of a
  // tensor laid out chunk-major, begin (C + 1) giving where each chunk starts.
  std::span<const int64_t> chunk_sends(int c) const;
  std::span<const int64_t> chunk_recvs(int c) const;
  static Tensor chunk_part(const Tensor& t, const std::vector<int64_t>& begin, int c);
  Tensor forward_chunked(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank, bool keep, int chunks);
  Tensor backward_chunked(const Tensor& dy, ExpertBank& bank, Tensor& dgate);
  // Both layouts' ends: the outputs returned in send order (m, d) combined into y (n, d) with
  // the gates, and what backward keeps; the dx rows and gate gradients returned in send order
  // into dx (n, d) and dgate (n·k).
  Tensor combine_returned(Tensor got_y, const Tensor& x, const RoutingDecision& routing, bool keep);
  Tensor combine_returned_gradients(Tensor got_dx, Tensor got_dgate, Tensor& dgate);

  std::unique_ptr<DataPlane> own_plane_;  // the CPU constructor's
  DataPlane& plane_;
  ExpertPlacement placement_;
  DispatchCounts counts_;

  // The exchange plan of the last forward (kept for backward when keep = true).
  int64_t n_ = 0;
  int k_ = 0;
  std::vector<int64_t> send_rows_;    // (R) rows to each rank
  std::vector<int64_t> recv_rows_;    // (R) rows from each rank
  std::vector<int64_t> group_offsets_;  // (G + 1) rows of each stacked expert, expert-major
  // The router's expert-major rows → send order (identity for a placement whose ranks own
  // ascending blocks of experts), and the received (source-major) rows → the local experts'
  // expert-major batch.
  RowPermutation send_order_, expert_major_;
  Tensor order_, row_of_pair_;        // the router's pair order (kept for backward)
  Tensor recv_gate_;                  // gates of the received rows, expert-major
  bool kept_ = false;

  // The chunked plan (chunks_ > 1): per chunk and peer the rows sent and received, where each
  // chunk's received block starts, the stacked groups of its experts, and the permutations
  // between its received block and its expert-major rows (i32 on the device).
  int overlap_chunks_ = 1;
  int chunks_ = 1;
  std::vector<int64_t> chunk_send_rows_, chunk_recv_rows_;  // [c·R + peer]
  std::vector<int64_t> chunk_send_begin_;                   // (C + 1) where each chunk's sent rows start
  std::vector<int64_t> chunk_row_begin_;                    // (C + 1) … and its received rows
  std::vector<int> chunk_groups_;                           // (C + 1)
  std::vector<Tensor> chunk_gather_, chunk_scatter_;        // expert-major ← received, received ← expert-major

  int64_t fixed_layout_max_rows_ = 0;
  ExpertDestinations fixed_tables_;  // the fixed layout's ship_rows tables (made once)
};

MOK_NN_END
