#pragma once
// What to change so that a plan fits one capacity: a short list of concrete options, each
// computed by planning the config again with the change applied (never estimated apart).
//
//   training:   kittens.mode=kitten, train.precision=bf16 (fp32 on a GPU), train.grad_accum
//               (the same optimizer step in smaller micro-batches), train.batch, more
//               parallel.ranks (card_count.h), kittens with fewer ranks, and a smaller model
//               (model.experts, model.layers) on the ranks as they are, with headroom on a GPU;
//   generation: more ranks (--ranks), fewer sequences (--batch), bf16, a shorter context
//               (data.seq_len: the KV cache), and a smaller model.
// A config that fits gets no options. Options are in the order above; each says whether it
// fits alone. Optimizer-state placement is not an option: mok keeps each rank's Adam state on
// its device beside the weights it holds (no sharding, no offload).

#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/plan/generation_plan.h"

namespace mok {

// A smaller model advised for a GPU is planned to fit this fraction below the capacity: the
// plan counts tensors and the parameter state's block rounding, not the caching allocator's
// other blocks (up to 6.1 % more on the H200, docs/memory_planning.md).
inline constexpr double kDeviceAdviceHeadroom = 0.08;

struct FitOption {
  std::vector<std::string> sets;   // config overrides, as for --set: "kittens.mode=kitten"
  std::vector<std::string> flags;  // generation: mok generate / mok plan --generate options: "--ranks", "16"
  std::string what;                // what the change is, in a few words
  double total_bytes = 0.0;        // the plan per rank with the change
  bool fits = false;
};

std::vector<FitOption> training_fit_options(const ExperimentConfig& config, double capacity_bytes);
// `config`'s parallel.ranks is the generation's R (mok generate --ranks).
std::vector<FitOption> generation_fit_options(const ExperimentConfig& config, const GenerationShape& shape,
                                              double capacity_bytes);

}  // namespace mok
