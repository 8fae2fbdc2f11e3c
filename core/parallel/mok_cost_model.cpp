#include "core/parallel/mok_cost_model.h"

#include <cmath>
#include <stdexcept>

MOK_NN_BEGIN

ShadowMode parse_shadow_mode(const std::string& text) {
  if (text == "auto") return ShadowMode::automatic;
  if (text == "never") return ShadowMode::never;
  if (text == "always") return ShadowMode::always;
  throw std::invalid_argument("shadow mode '" + text + "': expected auto, never or always");
}

const char* shadow_mode_name(ShadowMode mode) {
  switch (mode) {
    case ShadowMode::automatic: return "auto";
    case ShadowMode::never: return "never";
    case ShadowMode::always: return "always";
  }
  return "?";
}

MokCostModel::MokCostModel(MokCostParams params, int64_t d_model, int64_t expert_hidden)
    : params_(params), d_(d_model), f_(expert_hidden) {
  if (d_model <= 0 || expert_hidden <= 0)
    throw std::invalid_argument("MokCostModel: d_model and expert_hidden must be positive");
  if (!(params.link_gbps > 0.0)) throw std::invalid_argument("MokCostModel: link_gbps must be > 0");
  if (params.latency_us < 0.0 || !(params.compute_gflops > 0.0))
    throw std::invalid_argument("MokCostModel: latency_us must be >= 0 and compute_gflops > 0");
}

MokCostEstimate MokCostModel::estimate(double rows, bool training) const {
  const double B = static_cast<double>(sizeof(real));
  const double Br = params_.row_value_bytes > 0.0 ? params_.row_value_bytes : B;
  const double bw = params_.link_gbps * 1e9;
  const int passes = training ? 2 : 1;
  const double P = static_cast<double>(expert_values());
  MokCostEstimate c;
  c.ship_bytes = static_cast<int64_t>(std::llround(passes * 2.0 * rows * d_ * Br));
  const double Bw = params_.weight_value_bytes > 0.0 ? params_.weight_value_bytes : B;
  const double shadow_bytes = P * Bw + (training ? P * B : 0.0);  // weights in, gradient back
  c.shadow_bytes = static_cast<int64_t>(shadow_bytes);
  c.ship_seconds = passes * 2.0 * rows * d_ * Br / bw;
  c.shadow_seconds = shadow_bytes / bw + (training ? P / (params_.compute_gflops * 1e9) : 0.0);
  c.shadow = c.shadow_seconds < c.ship_seconds;  // ties → ship
  return c;
}

double MokCostModel::crossover_rows(bool training) const {
  // ship(u) = shadow  ⇔  u = shadow_seconds / (passes·2·d·Br / bw)
  const ShadowRule r = rule(training);
  return r.shadow_seconds / (r.ship_passes * r.d * r.row_bytes / r.bytes_per_second);
}

static_assert(static_cast<int>(ShadowMode::automatic) == 0 && static_cast<int>(ShadowMode::never) == 1 &&
                  static_cast<int>(ShadowMode::always) == 2,
              "ShadowRule::mode numbers the modes so");

ShadowRule MokCostModel::rule(bool training) const {
  ShadowRule r;
  r.mode = static_cast<int>(params_.mode);
  r.shadow_seconds = estimate(0.0, training).shadow_seconds;
  r.ship_passes = (training ? 2 : 1) * 2.0;  // as estimate's passes · 2.0
  r.d = static_cast<double>(d_);
  r.row_bytes = params_.row_value_bytes > 0.0 ? params_.row_value_bytes : static_cast<double>(sizeof(real));
  r.bytes_per_second = params_.link_gbps * 1e9;
  return r;
}

std::vector<uint8_t> MokCostModel::decide(const std::vector<double>& rows,
                                          const std::vector<int>& owner, int self,
                                          bool training) const {
  if (rows.size() != owner.size()) throw std::invalid_argument("MokCostModel::decide: size mismatch");
  const ShadowRule r = rule(training);
  std::vector<uint8_t> shadow(rows.size(), 0);
  for (size_t e = 0; e < rows.size(); ++e)
    if (owner[e] != self && shadow_wins(r, rows[e])) shadow[e] = 1;
  return shadow;
}

MOK_NN_END
