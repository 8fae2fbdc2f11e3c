#pragma once
// StepFigures: what one rank measured during one optimizer step, and their sum over ranks
// (reduce_step_figures: one all_reduce_sum of doubles in fixed rank order, so every rank
// gets the same bits, and counts below 2⁵³ stay exact).

#include <vector>

#include "core/parallel/comm_stats.h"
#include "core/train/rank_context.h"

namespace mok {

struct StepFigures {
  double loss_sum = 0.0;     // Σ over micro-batches of mean loss · target tokens
  double tokens = 0.0;       // target tokens
  double aux = 0.0, z = 0.0; // Σ over micro-batches of this rank's aux and z losses
  double locality = 0.0;     // … and of its locality loss
  double dropped = 0.0;      // (token, expert) pairs dropped by the capacity factor
  double local_pairs = 0.0;  // routed pairs whose expert lives on the token's own rank
  std::vector<std::vector<double>> load;  // [MoE layer][expert] pairs routed (this rank's tokens)
  // Traffic and time, this rank. Bytes sent to other ranks: all purposes, then one field per
  // CommPurpose (weights: shadow copies' weights and parameter broadcasts; control: counts,
  // gates, scalars); the five add up to remote_bytes.
  double remote_bytes = 0.0, dispatch_bytes = 0.0, combine_bytes = 0.0, grad_bytes = 0.0;
  double weight_bytes = 0.0, control_bytes = 0.0;
  double comm_s = 0.0;       // wall time inside collectives (waiting for peers included)
  double modeled_s = 0.0;    // emulated link time (LinkModel)
  double step_s = 0.0;       // wall time of the step
  double overlapped_s = 0.0; // device time of transfers on a transfer stream beside compute

  // Fills the traffic and time fields from the communicator's counters since `before`.
  void take_comm(const CommStats& now, const CommStats& before);
};

// Sums every field over ranks in place (CommPurpose::control); the same values on every
// rank afterwards. Times become sums too: divide by ranks for per-rank means.
void reduce_step_figures(RankContext& rc, StepFigures& f);

}  // namespace mok
