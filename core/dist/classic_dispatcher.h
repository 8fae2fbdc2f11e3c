#pragma once
// ClassicDispatcher: the classic expert-parallel MoE dispatch over a Communicator.
//
// Experts are placed on ranks by an ExpertPlacement (E/R per rank by default). Each rank
// routes its own tokens (token-choice top-k, done before this), then
//   forward   1. counts: rows per (destination rank, expert)             all-to-all, control
//             2. every (token, expert) pair ships the token's row to the
//                expert's owner: k copies of a token with k remote experts all-to-all, dispatch
//             3. gates of the shipped pairs (kept by the owner for backward)  control
//             4. the owner runs each expert on the rows it received, in source-rank order
//                and token order within a source — the global token order when ranks hold
//                consecutive shards — so an expert sees its batch as with one rank
//             5. outputs return to the sources                           all-to-all, combine
//             6. y[t] = Σ_s gate(t,s) · out(t,s), slots in order, no atomics
//   backward  dy rows of the kept pairs go to the owners (combine), which run the gated
//             expert backward (weight gradients stay on the owner) and return dx rows
//             (dispatch) and dgate (control); dx[t] = Σ_s dx(t,s), slots in order.
// Pairs whose expert is on the own rank take the same path as a self-message: a memory copy,
// counted as local bytes, never as remote traffic.
//
// The contract is ExpertDispatcher's (core/model/expert_dispatcher.h); with one rank the
// results equal LocalDispatcher's. Every rank must call forward/backward together (they are
// collectives), with the same `keep`.

#include <cstdint>
#include <string>
#include <vector>

#include "core/dist/communicator.h"
#include "core/dist/expert_placement.h"
#include "core/model/expert_dispatcher.h"
#include "core/real.h"

MOK_NN_BEGIN

// What the last forward moved, on this rank.
struct DispatchCounts {
  int64_t pairs = 0;         // routed (not dropped) pairs of this rank's tokens
  int64_t local_pairs = 0;   // … whose expert lives on this rank
  int64_t remote_pairs = 0;  // … shipped to another rank
  std::vector<int64_t> pairs_to_rank;  // (R) pairs sent to each rank (own rank included)
  std::vector<int64_t> expert_rows;    // (E) rows each expert of this rank computed, 0 elsewhere
};

class ClassicDispatcher final : public ExpertDispatcher {
 public:
  ClassicDispatcher(Communicator& comm, ExpertPlacement placement);

  Tensor forward(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank,
                 bool keep) override;
  Tensor backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate) override;
  std::string name() const override { return "classic"; }

  const DispatchCounts& last_counts() const { return counts_; }
  const ExpertPlacement& placement() const { return placement_; }

 private:
  // Where the received rows of (source s, local expert l) start in the receive layout.
  int64_t recv_offset(int s, int l) const;

  Communicator& comm_;
  ExpertPlacement placement_;
  DispatchCounts counts_;

  // The exchange plan of the last forward (kept for backward when keep = true).
  int64_t n_ = 0;
  int k_ = 0;
  std::vector<int64_t> send_pairs_;  // pair indices t·k + s in send order (rank, expert, token)
  std::vector<int64_t> send_rows_;   // (R) rows to each rank
  std::vector<int64_t> recv_rows_;   // (R) rows from each rank
  std::vector<int64_t> recv_counts_; // (R × L) rows from rank s for local expert l
  std::vector<int64_t> recv_start_;  // (R) first row of rank s's block
  std::vector<real> recv_gate_;      // gates of the received rows, receive layout
  std::vector<int32_t> pair_expert_; // (n·k) expert per pair, −1 when dropped
  bool kept_ = false;
};

MOK_NN_END
