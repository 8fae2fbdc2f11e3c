#pragma once
// MokStepLog: what one MoK dispatch (forward, and backward when training) decided and moved
// on one rank; MokDecisionLog keeps one record per step and writes them as JSON lines.
//
// Bytes are those this rank sent to other ranks (self-copies excluded), per purpose.
// classic_bytes is what the classic dispatcher would have sent for the same routing
// (every remote (token, expert) pair: token out, result back, and both gradients in
// backward); bytes_saved = classic_bytes − (dispatch + combine + weights + gradients).
// Control bytes (counts, gates, decisions) are reported apart; classic sends them too.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/real.h"

MOK_NN_BEGIN

struct MokStepLog {
  int64_t step = 0;                // dispatches (forward calls) so far on this dispatcher, from 0
  bool training = false;           // forward kept for backward
  // The step moved one row per token to every rank (core/parallel/fixed_row_exchange.h):
  // nothing was counted, so own_pairs, shadow_pairs and shipped_pairs stay 0, and
  // classic_bytes is what classic's fixed layout moves (a row per pair to every rank).
  bool fixed_layout = false;
  int64_t pairs = 0;               // routed (not dropped) pairs of this rank's tokens
  int64_t own_pairs = 0;           // … whose expert lives on this rank
  int64_t shadow_pairs = 0;        // … computed here by a shadow copy of a remote expert
  int64_t shipped_pairs = 0;       // … computed on a remote rank
  int64_t shipped_rows = 0;        // unique (token, remote rank) rows sent for them
  int chunks = 1;                  // chunks the rows travelled in (overlap)
  std::vector<int> shadowed;       // experts this rank shadowed (ascending)
  std::vector<double> shadowed_rows;  // the rows each would have shipped (cost-model input)
  int64_t dispatch_bytes = 0, combine_bytes = 0, weight_bytes = 0, gradient_bytes = 0;
  int64_t control_bytes = 0;
  int64_t classic_bytes = 0;
  int64_t bytes_saved = 0;

  // Pairs computed on the token's own rank (own experts and shadows) over all pairs.
  double local_fraction() const {
    return pairs ? static_cast<double>(own_pairs + shadow_pairs) / static_cast<double>(pairs) : 1.0;
  }
  int64_t payload_bytes() const { return dispatch_bytes + combine_bytes + weight_bytes + gradient_bytes; }
  // (name, value) with the project's metric names: comm/shadowed_experts, comm/bytes_saved,
  // comm/local_tokens, comm/dispatch_bytes, comm/combine_bytes, comm/grad_bytes,
  // comm/remote_bytes.
  std::vector<std::pair<std::string, double>> metrics() const;
  std::string to_json() const;
};

class MokDecisionLog {
 public:
  void append(MokStepLog record) { records_.push_back(std::move(record)); }
  const std::vector<MokStepLog>& records() const { return records_; }
  void clear() { records_.clear(); }
  // One JSON object per line, in append order.
  std::string to_json_lines() const;

 private:
  std::vector<MokStepLog> records_;
};

MOK_NN_END
