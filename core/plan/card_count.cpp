#include "core/plan/card_count.h"

#include <algorithm>

#include "core/config/model_footprint.h"  // format_footprint_bytes
#include "core/plan/memory_plan.h"

namespace mok {
namespace {

// One rank's plan on R ranks: its total, its weights with their gradients (and optimizer
// state) — all of them and the replicated ones — and the batch at that R.
struct RankFigures {
  double total, weights, replicated;
  int batch;
};

// The smallest R of rank_choices whose plan(R) fits `capacity`, or why none does.
template <class Plan>
CardCount count_cards(const ExperimentConfig& config, double capacity, const std::string& activity, Plan plan) {
  CardCount cc;
  const std::vector<int> choices = rank_choices(config);
  cc.largest_ranks = choices.back();
  for (int r : choices) {
    const auto [total, weights, replicated_weights, batch] = plan(r);
    cc.rank_bytes = total;
    cc.replicated_bytes = replicated_weights;
    if (total <= capacity) {
      cc.ranks = r;
      cc.batch = batch;
      return cc;
    }
    if (r == choices.back()) {
      cc.batch = batch;
      const double rest = total - weights;
      const bool training = activity == "training";
      cc.reason = activity + " needs " + format_footprint_bytes(total) + " per rank even on " + std::to_string(r) +
                  (r == 1 ? " rank" : " ranks") +
                  (config.model.experts > 0 ? " (" + std::to_string(config.model.experts / r) + " expert(s) each)"
                                            : std::string(" (a model without experts does not shard)")) +
                  ", over the " + format_footprint_bytes(capacity) + " of a card: the weights every rank holds take " +
                  format_footprint_bytes(replicated_weights) +
                  (training ? " with their gradients and Adam state" : "") + ", its experts " +
                  format_footprint_bytes(weights - replicated_weights) + ", " +
                  (training ? "activations and workspace" : "KV cache and workspace") + " " +
                  format_footprint_bytes(rest) + " (mok shards only the experts)";
    }
  }
  return cc;
}

// Bytes per weight a plan holds (weights, gradients and optimizer state over the weight count).
double bytes_per_weight(const MemoryEstimate& e) {
  const double n = std::max(1.0, e.device_parameter_count);
  return (e.bytes_of("parameters") + e.bytes_of("gradients") + e.bytes_of("optimizer_state")) / n;
}

}  // namespace

std::vector<int> rank_choices(const ExperimentConfig& config) {
  std::vector<int> out;
  const int experts = config.model.experts;
  if (experts <= 0) return {1};
  for (int r = 1; r <= std::min(experts, 4096); ++r)
    if (experts % r == 0) out.push_back(r);
  return out;
}

ExperimentConfig config_on_ranks(const ExperimentConfig& config, int ranks) {
  ExperimentConfig c = config;
  c.parallel.ranks = ranks;
  c.parallel.gpus.clear();  // one card per rank: rank r on cuda:r
  const int step = ranks * std::max(1, c.train.grad_accum);
  c.train.batch = (std::max(1, c.train.batch) + step - 1) / step * step;
  return c;
}

CardCount training_cards(const ExperimentConfig& config, double capacity_bytes) {
  return count_cards(config, capacity_bytes, "training", [&](int r) {
    const ExperimentConfig c = config_on_ranks(config, r);
    const MemoryEstimate e = estimate_memory(c);
    const double per_weight = bytes_per_weight(e);
    return RankFigures{e.total_bytes(), per_weight * e.device_parameter_count, per_weight * e.replicated_parameter_count,
                   c.train.batch};
  });
}

CardCount generation_cards(const ExperimentConfig& config, const GenerationShape& shape, double capacity_bytes) {
  return count_cards(config, capacity_bytes, "generation", [&](int r) {
    ExperimentConfig c = config;
    c.parallel.ranks = r;
    const GenerationEstimate g = estimate_generation_memory(c, shape);
    const double per_weight = bytes_per_weight(g.memory);
    return RankFigures{g.memory.total_bytes(), per_weight * g.memory.device_parameter_count,
                   per_weight * g.memory.replicated_parameter_count, g.batch};
  });
}

}  // namespace mok
