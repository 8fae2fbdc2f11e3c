#pragma once
// The memory plan of `mok generate` (core/train/parallel_generation.h): what one rank holds
// while it decodes B sequences over R = parallel.ranks expert-parallel ranks.
//
// What a generating rank really holds (read from the model it builds):
//   parameters   the dense weights and its experts/R experts: on a bf16 GPU the bf16
//                compute copies alone (2 bytes per weight: nothing updates them, so no fp32
//                master, core/model/init.h), else the fp32 values (4);
//   kv_cache     per sequence of the rank, per layer, keys and values of data.seq_len
//                positions × d_model in the compute type, allocated in full at the start
//                (so the number of new tokens does not change it);
//   workspace    the temporaries of the largest forward: the prefill of ceil(B/R) sequences
//                × their prompt (or seq_len/2 tokens when a cache fills and restarts);
//   resident_experts  with resident MoE layers (core/train/resident_experts.h), every expert
//                of those layers the rank does not own, at the parameters' bytes per weight
//                (the rank owning the fewest experts: floor(E/R));
//   communication  dispatch and combine buffers of that prefill (R > 1), for balanced
//                routing: dropless, a rank whose experts draw more than their share of the
//                rows holds more (on the quickstart shape over 4 ranks the busiest rank's
//                peak was 15 % above the plan; one rank is within 5 %, tests/cli/test_cli_plan).
// No gradients (the model is built without them, ForwardOnlyParameters in core/model/init.h),
// no optimizer state and no saved activations: generation keeps nothing for backward.

#include <string>

#include "core/config/experiment_config.h"
#include "core/plan/memory_plan.h"

namespace mok {

// What is generated: the mok generate options that change memory.
struct GenerationShape {
  int batch = 1;           // sequences B over all ranks (--batch); rounded up to a multiple of R
  int prompt_tokens = 32;  // tokens of each prompt (--prompts-from-data N, or the prompt's)
  int new_tokens = 200;    // per sequence (--tokens): decides whether a cache refills
  int resident_layers = 0;  // MoE layers every rank holds whole (R > 1; --resident-experts)
};

struct GenerationEstimate {
  // parts: parameters, kv_cache, workspace, communication (per rank); the first two as the
  // memory tracker's categories of these names count them (`mok generate --json`'s
  // parameter_bytes and kv_cache_bytes).
  MemoryEstimate memory;
  int batch = 1;               // B used: the shape's, rounded up to a multiple of ranks
  int sequences_per_rank = 1;  // B / R
  int context = 0;             // positions one KV cache holds (data.seq_len)
  int prefill_tokens = 0;      // the longest prefill per sequence
  double kv_cache_bytes_per_sequence = 0.0;
};

GenerationEstimate estimate_generation_memory(const ExperimentConfig& config, const GenerationShape& shape);

// The largest B (a multiple of parallel.ranks, at most `upto`) whose plan fits; 0 when none.
int largest_generation_batch_that_fits(const ExperimentConfig& config, const GenerationShape& shape,
                                       double capacity_bytes, int upto = 1 << 16);

}  // namespace mok
