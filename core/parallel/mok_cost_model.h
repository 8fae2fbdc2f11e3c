#pragma once
// MokCostModel: per (source rank, expert), ship the rank's tokens to the expert's owner or
// fetch the expert's weights and compute here (a "shadow" copy).
//
// For one source rank s and one expert e owned by another rank, with
//   rows   u = the rows s would ship because of e (a row shared by several experts of the
//              owner counts 1/m for each of its m experts there: MoK sends it once),
//   P      = 3·d·f values in a SwiGLU expert (W_up (d, 2f) and W_down (f, d)),
//   passes = 2 when training (forward + backward), 1 for inference (forward only),
// the two sides cost, in seconds,
//   ship   = passes · 2·u·d·B / bandwidth                 (token out and result back, and
//                                                          their gradients in backward)
//   shadow = P·Bw / bandwidth + [training] P·B / bandwidth (weights in; weight gradient back)
//          + [training] P / compute_rate                   (the owner adds the gradient)
// with B = sizeof(real) and Bw the bytes of a weight as experts compute with it (2 on a bf16
// GPU run: shadows receive the compute copies). With rows and weights of B bytes, shadowing
// wins once u > P/(2d) = 1.5·f: fine-grained experts (small f) and large batches. Expert compute is the same on either side (the same rows pass the
// same expert), so it cancels; the compute rate prices only the extra work a shadow brings.
// Latency does not enter a per-expert decision: the weights of all experts one owner sends
// to one rank travel in one message of one all-to-all, as the token rows do; it is kept in
// the parameters for reports. Ties go to ship. The decision is a pure function of its
// inputs, so every run with the same routing makes the same choices.

#include <cstdint>
#include <string>
#include <vector>

#include "core/parallel/shadow_rule.h"
#include "core/real.h"

MOK_NN_BEGIN

enum class ShadowMode { automatic, never, always };

// "auto", "never", "always"; throws std::invalid_argument otherwise.
ShadowMode parse_shadow_mode(const std::string& text);
const char* shadow_mode_name(ShadowMode mode);

struct MokCostParams {
  double link_gbps = 25.0;        // link bandwidth, GB/s (1e9 bytes/s)
  double latency_us = 2.0;        // per-message latency (reported; batched messages: not per expert)
  double compute_gflops = 50.0;   // sustained rate of simple vector work on a rank, GFLOP/s
  ShadowMode mode = ShadowMode::automatic;
  // Bytes of one shipped row value (the activations' element type: 2 for bf16 rows on a
  // GPU); 0 = sizeof(real).
  double row_value_bytes = 0.0;
  // Bytes of one weight value sent to a shadow (the compute dtype's: 2 on a bf16 GPU run);
  // 0 = sizeof(real). Weight gradients return as `real`.
  double weight_value_bytes = 0.0;
};

// Estimated cost of the two sides for one (source, expert).
struct MokCostEstimate {
  double ship_seconds = 0.0;
  double shadow_seconds = 0.0;
  int64_t ship_bytes = 0;    // remote bytes if shipped (all passes)
  int64_t shadow_bytes = 0;  // remote bytes if shadowed (all passes)
  bool shadow = false;
};

class MokCostModel {
 public:
  MokCostModel() = default;
  MokCostModel(MokCostParams params, int64_t d_model, int64_t expert_hidden);

  // rows: the (fractional, see above) rows shipped because of this expert; training:
  // forward + backward (else forward only).
  MokCostEstimate estimate(double rows, bool training) const;
  // One decision per expert for the source rank `self`: owner[e] is e's rank; rows[e] as
  // above. Experts owned by `self` and experts with no rows are never shadowed.
  std::vector<uint8_t> decide(const std::vector<double>& rows, const std::vector<int>& owner,
                              int self, bool training) const;
  // The decision as data (ShadowRule), for a device to make it as decide() does.
  ShadowRule rule(bool training) const;
  // Rows above which shadowing wins (training or not), for reports and tests.
  double crossover_rows(bool training) const;

  const MokCostParams& params() const { return params_; }
  int64_t expert_values() const { return 3 * d_ * f_; }

 private:
  MokCostParams params_;
  int64_t d_ = 0, f_ = 0;
};

MOK_NN_END
