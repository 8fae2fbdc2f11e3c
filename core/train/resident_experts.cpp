#include "core/train/resident_experts.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/model/language_model.h"

namespace mok {

namespace {

// A count written as digits only, or -1.
int parse_count(const std::string& value) {
  if (value.empty() || value.size() > 6) return -1;
  for (char ch : value)
    if (!std::isdigit(static_cast<unsigned char>(ch))) return -1;
  return std::stoi(value);
}

// What the GPU leaves the plan: 10 % of it is kept for what the plan does not count.
constexpr double kPlannedShareOfGpu = 0.9;

}  // namespace

std::string resident_experts_problem(const std::string& value, const ExperimentConfig& config) {
  const bool known = value.empty() || value == "auto" || value == "off" || value == "all" || parse_count(value) >= 0;
  if (!known) return "--resident-experts: unknown '" + value + "'; use auto, off, all or a number of MoE layers";
  const bool asks = value == "all" || parse_count(value) > 0;
  if (asks && config.routing.dispatcher != "mok")
    return "--resident-experts " + value + ": resident expert copies are MoK's; classic dispatch ships every token "
           "to its expert's owner (use --dispatcher mok, or --resident-experts off)";
  return {};
}

int resident_layer_count(const std::string& value, const ExperimentConfig& config, const GenerationShape& shape,
                         double capacity_bytes) {
  const int layers = moe_layer_count(config.model);
  if (config.parallel.ranks < 2 || layers == 0) return 0;
  if (value == "off") return 0;
  if (value == "all") return layers;
  if (const int n = parse_count(value); n >= 0) return std::min(n, layers);
  // auto: MoK on GPU ranks only.
  if (config.routing.dispatcher != "mok" || config.parallel.device != "cuda") return 0;
  const int64_t limit = config.parallel.device_memory_limit_bytes();
  const double capacity = limit > 0 ? static_cast<double>(limit) : kPlannedShareOfGpu * capacity_bytes;
  if (capacity <= 0.0) return 0;
  GenerationShape s = shape;
  s.resident_layers = 0;
  const double base = estimate_generation_memory(config, s).memory.total_bytes();
  s.resident_layers = 1;
  double per_layer = 0.0;
  for (const MemoryEstimate::Part& p : estimate_generation_memory(config, s).memory.parts)
    if (p.category == "resident_experts") per_layer = p.bytes;
  if (base >= capacity || per_layer <= 0.0) return 0;
  return std::min(layers, static_cast<int>(std::floor((capacity - base) / per_layer)));
}

std::vector<bool> resident_layer_mask(const ModelConfig& model, int count) {
  std::vector<bool> mask = moe_layer_mask(model);
  for (auto&& m : mask) {
    if (m && count > 0) {
      --count;
    } else {
      m = false;
    }
  }
  return mask;
}

}  // namespace mok
