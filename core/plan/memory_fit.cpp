#include "core/plan/memory_fit.h"

#include <algorithm>
#include <cstdio>

#include "core/config/model_footprint.h"  // format_footprint_bytes
#include "core/plan/memory_plan.h"

namespace mok {
namespace {

// What shrinks a category of the plan, in config keys.
std::string advice_for(const std::string& category, int largest_batch) {
  const std::string batch = largest_batch > 0 ? "lower train.batch (the largest that fits is " +
                                                    std::to_string(largest_batch) + ")"
                                              : "lower train.batch";
  if (category == "saved_activations")
    return batch + " or data.seq_len, raise train.grad_accum, or save compact activations (kittens.mode: kitten)";
  if (category == "workspace")
    return batch + " or data.seq_len (the workspace holds logits: tokens × vocabulary), or a smaller data.vocab_size";
  if (category == "communication") return batch + " or use fewer parallel.ranks";
  // parameters, gradients, optimizer_state: the model itself.
  return "make the model smaller (model.layers, model.d_model, model.experts, model.expert_hidden)";
}

}  // namespace

MemoryVerdict judge_memory_fit(double need_bytes, double capacity_bytes) {
  if (capacity_bytes <= 0.0 || need_bytes <= capacity_bytes) return MemoryVerdict::fits;
  return need_bytes <= kMemoryRefuseFactor * capacity_bytes ? MemoryVerdict::warn : MemoryVerdict::refuse;
}

MemoryFit host_memory_fit(const ExperimentConfig& config, double capacity_bytes) {
  MemoryFit fit;
  fit.capacity_bytes = capacity_bytes;
  if (config.parallel.device != "cpu") return fit;
  const MemoryEstimate plan = estimate_memory(config);
  const int threads_as_ranks = config.parallel.comm == "local" ? std::max(1, config.parallel.ranks) : 1;
  fit.need_bytes = plan.total_bytes() * threads_as_ranks;
  const MemoryEstimate::Part* largest = nullptr;
  for (const MemoryEstimate::Part& p : plan.parts)
    if (!largest || p.bytes > largest->bytes) largest = &p;
  if (largest) fit.largest_category = largest->category;
  fit.verdict = judge_memory_fit(fit.need_bytes, capacity_bytes);
  if (fit.verdict == MemoryVerdict::fits) return fit;

  // The batch the capacity allows, with the process's ranks sharing it.
  const int largest_batch = largest_batch_that_fits(config, capacity_bytes / threads_as_ranks);
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2f", fit.need_bytes / capacity_bytes);
  fit.message = "the memory plan of this run needs " + format_footprint_bytes(fit.need_bytes) +
                (threads_as_ranks > 1 ? " for its " + std::to_string(threads_as_ranks) + " ranks" : std::string()) +
                ", " + ratio + "× this machine's " + format_footprint_bytes(capacity_bytes) + "; the largest part is " +
                fit.largest_category + " (" + format_footprint_bytes(largest ? largest->bytes : 0.0) +
                (threads_as_ranks > 1 ? " per rank" : "") + "): " + advice_for(fit.largest_category, largest_batch) +
                ". `mok plan CONFIG` shows the whole plan";
  if (fit.verdict == MemoryVerdict::warn) fit.message += "; the run may swap or be killed";
  return fit;
}

}  // namespace mok
