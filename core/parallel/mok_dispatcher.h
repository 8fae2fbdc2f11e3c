#pragma once
// MokDispatcher: expert-parallel MoE dispatch that ships a token once per destination rank
// and, per step and per (source rank, expert), may fetch the expert instead ("shadow").
//
// Same placement, same contract and same construction as ClassicDispatcher
// (core/parallel/classic_dispatcher.h); the math is the same up to float reduction order.
//
//   forward   0. decide: for each remote expert e, this rank counts the rows it would ship
//                because of e and asks the MokCostModel: ship or shadow.
//             1. plan: one row per (token, destination rank) holding ≥ 1 shipped expert of
//                that token, with k entries (expert on that rank, gate) in slot order,
//                padded with −1. The own rank is a destination too (a self-copy, never
//                remote).
//             2. one small all-to-all (control): every rank's decisions and pair counts
//                (E int64) and the rows it sends to each peer, so owners know who shadows
//                what.
//             3. weights: each owner sends the weights of its shadowed experts to the
//                ranks that shadow them (purpose weights); they land in shadow copies.
//             4. entries and gates in one message per peer (control); 5. rows (dispatch).
//             6. the destination expands: each of its experts runs on the rows naming it,
//                in source-rank order and token order (the global token order when ranks
//                hold consecutive shards, as with one rank), then reduces each row's
//                partial output Σ_j gate_j · E_j(x) over its entries in slot order and
//                sends one row back (combine).
//             7. the source runs its shadow copies on their tokens (token order) and
//                combines: y[t] = Σ over the token's groups (one per destination rank and
//                one per shadowed pair), in the order of each group's first slot.
//   overlap   5–7 run in C chunks (MokOptions::overlap_chunks, fewer when the step has few
//             rows: min_chunk_rows). Each rank's local experts
//             are cut into C consecutive groups; a row travels in the chunk of its lowest
//             expert's group and comes back in the chunk of its highest. A CommWorker
//             thread sends the chunks one after another while this thread runs the shadow
//             copies, then each group as soon as its chunk is in, then hands the finished
//             rows back to the worker. Backward runs the groups last to first. Every expert
//             still runs once on all its rows in the same order and every sum keeps its
//             order, so the results are bitwise the same for any C (tested).
//   backward  dy rows go out once per group row (combine), the destination runs each
//             expert's gated backward and reduces the row's dx over its entries in slot
//             order, returning one row (dispatch) and the k gate gradients (control).
//             Shadow copies run backward here; their weight gradients go to the owner
//             (purpose gradients), which adds them after its own in source-rank order.
// No atomics; every sum has a fixed order; ties go to ship. Repeated runs are bitwise
// identical. With one rank the results equal LocalDispatcher's bit for bit.
//
// Every rank must call forward/backward together (they are collectives), with the same
// `keep`. Shadow copies are SwiGLU experts that keep their saved inputs the way the layer's
// own experts do (the same kitten policy and hidden recompute).
//
// Where the plan is made (MokOptions::plan). On the host (every chunk count; CPU ranks by
// default): from a host copy of the routing, travelling over the control Communicator. On the
// device (one chunk, a stacked bank; GPU ranks by default): by the rank's ops
// (Ops::slot_share_counts, shadow_decisions, ship_rows, sort_pairs_counted of the received
// entries, scatter_positions), entries and gates travelling through the DataPlane, so that
// only counts cross to the host: rows per destination (and per chunk), in one wait that brings
// the choices too (rows per local expert come with the heads). Both places give every expert
// the same rows in the same order, so the results are bitwise the same (tested).
// Rows, weights and their gradients always move through the DataPlane of the rank's device,
// and every row operation is one of the rank's ops. With one chunk, the local experts run as
// one grouped product over all their rows (the stacked bank); with several, expert by expert
// as each chunk arrives. The device plan chunks its own way: the rows' layouts are made by the
// rank's ops, and the transfers of one chunk run on the plane's transfer stream beside the
// previous chunk's products (core/parallel/mok_device_plan.cpp).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/ops.h"
#include "core/parallel/chunk_layout.h"
#include "core/parallel/comm_worker.h"
#include "core/parallel/communicator.h"
#include "core/parallel/data_plane.h"
#include "core/parallel/expert_placement.h"
#include "core/parallel/fixed_row_exchange.h"
#include "core/parallel/mok_cost_model.h"
#include "core/parallel/mok_step_log.h"
#include "core/model/expert_dispatcher.h"
#include "core/real.h"

MOK_NN_BEGIN

// Where a MoK step's plan is made (see the header comment).
enum class MokPlanPlace { automatic, host, device };

struct MokOptions {
  MokCostParams cost;        // link, compute rate, shadow mode
  int layer = 0;             // block index, for the memory tags of shadow copies
  int64_t expert_hidden = 0; // f; 0 → taken from any expert held here
  // C ≥ 2: transfers run on a CommWorker thread in up to C chunks, overlapping compute
  // (in order on this thread where the communicator forbids helper threads). 0 or 1, or a
  // step with too few rows for two chunks: every exchange runs on this thread in the plain
  // order. Same results either way.
  int overlap_chunks = 4;
  // Fewest rows per rank (on average over ranks) a chunk must carry: a step that sends
  // fewer than C · this many rows per rank uses fewer chunks (decided from the global row
  // count, so every rank agrees). A decode step of a few rows would otherwise pay one
  // exchange's latency per chunk for nothing.
  int64_t min_chunk_rows = 64;
  // automatic: on the device for a device DataPlane, else on the host. device: on the device
  // on any rank (CPU ranks too: the tests compare both places). The device plan takes
  // overlap_chunks for kept forwards, without the min_chunk_rows rule (the row counts come
  // after the counts by chunk).
  MokPlanPlace plan = MokPlanPlace::automatic;
  // N > 0: a forward not kept for backward with at most N rows uses the fixed layout
  // (core/parallel/fixed_row_exchange.h): one row per token to every rank, nothing counted
  // and no wait for the device; no expert is shadowed (a decode step's rows are far below the
  // crossover, so the counted plan would shadow none either). Every rank must have the same
  // rows at such a step (generation: B/R). 0: never.
  int64_t fixed_layout_max_rows = 0;
};

class MokDispatcher final : public ExpertDispatcher {
 public:
  // Rows move through `plane` (the rank's device); the plan through its control Communicator.
  MokDispatcher(DataPlane& plane, ExpertPlacement placement, MokOptions options = {});
  // CPU ranks: rows as host messages over `comm` (a HostDataPlane held here).
  MokDispatcher(Communicator& comm, ExpertPlacement placement, MokOptions options = {});

  Tensor forward(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank,
                 bool keep) override;
  Tensor backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate) override;
  std::string name() const override { return "mok"; }

  // The last dispatch on this rank (complete after backward when training).
  const MokStepLog& last_log() const { return log_; }
  // Optional: every completed step is appended here (not owned; null = none).
  void set_decision_log(MokDecisionLog* log) { decision_log_ = log; }
  const ExpertPlacement& placement() const { return placement_; }
  const MokOptions& options() const { return options_; }
  // The shadow copy of `expert` held here (null when it was never shadowed on this rank).
  const SwiGluMlp* shadow(int expert) const;
  void set_shadow_mode(ShadowMode mode) { options_.cost.mode = mode; }
  void set_fixed_layout_max_rows(int64_t rows) { options_.fixed_layout_max_rows = rows; }

 private:
  void check_setup() const;
  // Steps shared by both plan places. decide: this rank's ship/shadow choice per expert from
  // the rows it would ship to each remote expert (Ops::slot_share_counts, then
  // Ops::shadow_decisions; neither when no expert could be shadowed even at one pair per
  // token); fills my_shadowed_ and the log's decisions. exchange_heads: step 2 (shadow_all_,
  // recv_rows_, classic_in_pairs_, recv_entries_; returns the rows all ranks send).
  // fetch_shadow_weights: step 3. return_shadow_gradients: backward's weight gradients of
  // the shadow copies to their owners, added there in source-rank order.
  std::vector<uint8_t> decide(const RoutingDecision& routing, const std::vector<int>& owner, DType row_dtype,
                              int64_t d, int64_t f, bool keep);
  // decide in two halves, which the device plan runs around ship_rows, so that its wait for
  // the row counts brings the choices too: start launches the slot shares and the choices
  // (dest: −1 shadowed, else the owner; the owners alone when no expert could be shadowed);
  // finish reads them and fills my_shadowed_ and the log.
  struct PendingDecisions {
    bool launched = false;
    Tensor rows;  // (E) f64 rows this rank would ship to each expert
    Tensor dest;  // (E) i32, what ship_rows takes
  };
  PendingDecisions start_decisions(const RoutingDecision& routing, const std::vector<int>& owner, DType row_dtype,
                                   int64_t d, int64_t f, bool keep);
  std::vector<uint8_t> finish_decisions(const PendingDecisions& pending, const std::vector<int>& owner);
  MokCostModel cost_model(DType row_dtype, int64_t d, int64_t f) const;
  void record_decisions(const std::vector<uint8_t>& decision, const std::vector<double>& rows);
  // pairs_offsets: (E + 1) the router's expert-major offsets of this rank's kept pairs.
  // chunks > 1 (the device plan in chunks): each peer also learns the rows of every (chunk,
  // peer) block it receives (recv_chunk_lo_, recv_chunk_hi_), from ship_'s counts.
  int64_t exchange_heads(const std::vector<int64_t>& pairs_offsets, const std::vector<uint8_t>& my_decision,
                         int chunks = 1);
  void fetch_shadow_weights(ExpertBank& bank, int64_t d, int64_t f);
  // Values to and from each peer when shadow copies move: weights from owners to the ranks
  // that shadow their experts (to_shadows), their gradients back (the mirror image).
  struct ShadowTransfer {
    std::vector<int64_t> send, recv;  // (R)
    int64_t send_total = 0, recv_total = 0;
  };
  ShadowTransfer shadow_transfer(int64_t values_per_expert, bool to_shadows) const;
  bool shadows(int rank, int expert) const;  // this step, from shadow_all_
  bool any_shadow() const;                    // some rank shadows some expert this step
  void return_shadow_gradients(ExpertBank& bank, int64_t d);
  // The weight gradients of this step's shadow copies set to zero before their backward
  // (one launch on a GPU: zero_gradients).
  void zero_shadow_gradients();
  // The fixed layout's forward (MokOptions::fixed_layout_max_rows).
  Tensor forward_fixed(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank);
  // The plan made by the rank's ops (MokPlanPlace::device).
  Tensor forward_device(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank, bool keep, int64_t f);
  Tensor backward_device(const Tensor& dy, ExpertBank& bank, Tensor& dgate);
  // The device plan's chunk count: MokOptions::overlap_chunks (at most the most experts a rank
  // holds) for a kept forward, else 1. From the options and the placement alone, so every rank
  // agrees before anything is counted.
  int device_chunks(bool keep) const;
  // (C + 1) first stacked group of each chunk's local experts, the stack's groups at the end.
  std::vector<int> device_chunk_groups(const ExpertBank& bank, int chunks) const;
  void release_device_plan();  // what the device plan kept for backward
  SwiGluMlp& shadow_copy(int expert, int64_t d, int64_t f);
  void finish_log(const CommStats& before, bool complete);
  // Chunk c's slice of an all-to-all whose rows lie in `send` (layout ls) and `recv` (lr).
  void exchange_chunk(const Tensor& send, const ChunkLayout& ls, Tensor& recv, const ChunkLayout& lr, int c,
                      CommPurpose purpose);
  // Index tensors of chunk c's finished rows: for each row at its position in `layout`'s
  // chunk c, the k entries' rows in the expert-major batch (−1 pad) and their gates.
  void chunk_entries(const std::vector<int64_t>& done, const ChunkLayout& layout, int c, Tensor& row_of_entry,
                     Tensor* gates) const;

  std::unique_ptr<DataPlane> own_plane_;  // the CPU constructor's
  DataPlane& plane_;
  Communicator& comm_;  // plane_.control()
  ExpertPlacement placement_;
  MokOptions options_;
  MokStepLog log_;
  MokDecisionLog* decision_log_ = nullptr;
  int64_t steps_ = 0;
  CommStats fwd_before_;  // stats at the start of the last forward
  int chunks_ = 1;        // C of the current step (see kMinRowsPerChunk)
  std::unique_ptr<CommWorker> worker_;

  // Shadow copies of remote experts, refreshed every step: with one chunk, stacked in one
  // bank of this rank's remote experts (one grouped product for all of them, created on first
  // use); with several, one SwiGluMlp each, created on first use.
  std::map<int, std::unique_ptr<SwiGluMlp>> shadows_;
  std::unique_ptr<ExpertBank> shadow_bank_;
  std::vector<uint8_t> ever_shadowed_;  // (E) fetched into shadow_bank_ at least once
  ExpertBank& stacked_shadows(int64_t d, int64_t f, const ExpertBank& bank);
  // This step's shadow copy of `expert` (the stacked view or the separate copy).
  SwiGluMlp& shadow_of(int expert);

  // Kept from forward for backward (keep = true).
  int64_t n_ = 0;
  int k_ = 0;
  int64_t row_bytes_ = 0;             // bytes of one row of x (d values of the compute type)
  int64_t classic_in_pairs_ = 0;      // pairs other ranks route to experts here
  // (L) entries coming here for each local expert: every rank's pairs on it (this rank's
  // own too) but those of ranks that shadow it — the received entries' sort needs no count read.
  std::vector<int64_t> recv_entries_;
  std::vector<uint8_t> shadow_all_;     // (R × E) rank s shadows expert e this step
  std::vector<int> my_shadowed_;        // experts shadowed here, ascending
  std::vector<std::vector<int64_t>> shadow_pairs_;  // [i] → pairs t·k+s of my_shadowed_[i]
  std::vector<int64_t> send_rows_, recv_rows_;      // (R) group rows to / from each rank
  std::vector<int64_t> send_token_;     // token of each sent row (send order)
  // Chunked buffers (see overlap): rows by their lowest expert's chunk (dispatch) and by
  // their highest (combine), on the sending and the receiving side.
  ChunkLayout send_fwd_, send_cmb_, recv_fwd_, recv_cmb_;
  std::vector<std::vector<int64_t>> recv_done_fwd_;  // [c] received rows whose highest expert is in chunk c
  std::vector<std::vector<int64_t>> recv_done_bwd_;  // [c] received rows whose lowest expert is in chunk c
  std::vector<int32_t> send_slot_;      // (rows·k) slot of entry j of a sent row, −1 pad
  std::vector<int32_t> recv_entry_;     // (recv rows·k) local expert index of entry j, −1 pad
  std::vector<real> recv_gate_;         // (recv rows·k) gate of entry j
  std::vector<int64_t> recv_pos_;       // (recv rows·k) row of entry j in its expert's batch
  std::vector<int64_t> expert_batch_;   // (L) rows in each local expert's batch
  std::vector<std::vector<int64_t>> expert_entries_;  // [l] → entry indices i·k+j, in order
  std::vector<int64_t> expert_start_;   // (L + 1) first row of local expert l in the expert-major batch
  bool grouped_ = false;                // this step's local experts ran as one grouped product
  std::vector<int64_t> group_offsets_;  // (G + 1) with grouped_: rows per stacked expert
  std::vector<int64_t> head_pair_;      // (sent rows) pair index t·k+s of each row's first slot
  std::vector<int32_t> head_of_;        // (n·k) ≥ 0 where a group starts, −1 elsewhere
  Tensor gate_;                         // (n·k) the routing gates, on the device
  bool kept_ = false;

  // The device plan's step (MokPlanPlace::device), kept for backward.
  bool device_plan_ = false;
  ShipRows ship_;               // the rows this rank sent, their entries, gates and pairs
  Tensor recv_gate_dev_;        // (received rows, k) gates of the received entries
  PairOrder recv_order_;        // the received entries sorted by local expert (expert-major batch)
  Tensor shadow_order_;         // (shadowed pairs) i32: the pairs of my_shadowed_, expert-major
  Tensor row_of_group_;         // (n·k) i32: results row of each group's first slot, −1 elsewhere
  int64_t shadow_rows_ = 0;
  // Its chunks (core/parallel/mok_device_plan.cpp), in the layouts send_fwd_ … recv_cmb_
  // above (one chunk: the rows as ship_rows made them, and these the plan's own tensors):
  std::vector<int64_t> recv_chunk_lo_, recv_chunk_hi_;  // (C·R) rows received per (chunk, source)
  Tensor token_fwd_;       // (sent rows) i32: the token of each row as the rows go out
  Tensor head_pair_cmb_;   // (sent rows) i32: head pairs as the results come back
  Tensor pair_cmb_;        // (sent rows, k) i32: entry pairs as the results come back
  Tensor batch_source_;    // (batch rows) i32: where each expert-major row lies in the received rows, ÷ batch_div_
  int batch_div_ = 1;
  Tensor rows_of_cmb_;     // (received rows, k) i32: batch row of each entry, as the results go back
  Tensor gates_cmb_;       // (received rows, k): the entries' gates, likewise
  Tensor recv_cmb_order_;  // (received rows) i32: received row at each place of the results' layout (C > 1)
  std::vector<int> chunk_groups_;  // (C + 1) device_chunk_groups

  ExpertDestinations fixed_tables_;  // the fixed layout's ship_rows tables (made once)
};

MOK_NN_END
