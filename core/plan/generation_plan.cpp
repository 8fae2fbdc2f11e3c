#include "core/plan/generation_plan.h"

#include <algorithm>
#include <cmath>

#include "core/model/language_model.h"
#include "core/plan/parameter_block_rounding.h"
#include "core/plan/planned_shape.h"
#include "core/tensor/size_class.h"
#include "core/train/rank_device.h"

namespace mok {

GenerationEstimate estimate_generation_memory(const ExperimentConfig& c, const GenerationShape& shape) {
  constexpr double kFloat = 4.0;
  GenerationEstimate g;
  const int ranks = std::max(1, c.parallel.ranks);
  g.batch = (std::max(1, shape.batch) + ranks - 1) / ranks * ranks;
  g.sequences_per_rank = g.batch / ranks;
  g.context = std::max(1, c.data.seq_len);
  // A cache that would overflow restarts from the last seq_len/2 tokens (a second prefill).
  const int prompt = std::clamp(shape.prompt_tokens, 1, g.context);
  g.prefill_tokens = prompt + std::max(0, shape.new_tokens) > g.context ? std::max(prompt, std::max(1, g.context / 2))
                                                                         : prompt;

  // Parameter counts as training's plan has them (the same model, the same expert split).
  const MemoryEstimate train = estimate_memory(c);
  MemoryEstimate& est = g.memory;
  est.parameter_count = train.parameter_count;
  est.device_parameter_count = train.device_parameter_count;
  est.replicated_parameter_count = train.replicated_parameter_count;

  const bool bf16 = compute_dtype_for(c) == DType::bf16;
  const double act = bf16 ? 2.0 : kFloat;
  // A weight's bytes: its master (fp32), or on a bf16 GPU its bf16 copy alone, since decoding
  // never updates the weights (ForwardOnlyParameters, core/model/init.h).
  const double per_weight = bf16 ? 2.0 : kFloat;
  const double d = std::max(1, c.model.d_model);
  const double vocab = planned_vocab(c);
  const double f = std::max(1, c.model.expert_hidden);
  const double E = std::max(0, c.model.experts);
  const double k = E > 0 ? std::max(1, std::min(c.model.top_k, c.model.experts)) : 0.0;
  const double hidden = E > 0 ? f : std::max(1, c.model.dense_hidden);

  // KV cache: keys and values, (context, d) each, per layer and sequence.
  g.kv_cache_bytes_per_sequence = 2.0 * std::max(0, c.model.layers) * g.context * d * act;
  const double kv = g.kv_cache_bytes_per_sequence * g.sequences_per_rank;

  // Workspace of the largest forward (rows = the rank's prefill tokens): the residual stream,
  // its norm and the block's output (3d), then the widest of the head (logits, widened to fp32 on a GPU for
  // sampling), attention (qkv 3d, output d, projection d) and the MLP/MoE (routed copies:
  // gate|up 2f, activation f, down d, the gathered input d being released once the up
  // projection has read it; router scores E in fp32).
  const double rows = double(g.sequences_per_rank) * g.prefill_tokens;
  const double head = vocab * (act + (bf16 ? kFloat : 0.0));
  const double attention = 5.0 * d * act;
  const double mlp = std::max(1.0, k) * (d + 3.0 * hidden) * act + E * kFloat;
  const double workspace = rows * (3.0 * d * act + std::max({head, attention, mlp}));
  // Resident layers: the experts this rank does not own, whole, as its own are held.
  const int moe_layers = moe_layer_count(c.model);
  const int resident = ranks > 1 ? std::clamp(shape.resident_layers, 0, moe_layers) : 0;
  const double not_owned = E - std::floor(E / ranks);
  const double resident_bytes = resident * not_owned * 3.0 * d * f * per_weight;
  // Routed copies between ranks: dispatch out and in, combine out and in (rows · k each,
  // balanced routing; a rank whose experts draw more rows holds more). None where every MoE
  // layer is resident.
  const double comm = ranks > 1 && E > 0 && resident < moe_layers ? 4.0 * rows * k * d * act : 0.0;

  // No gradients: generation builds its model without them (ForwardOnlyParameters).
  est.parts = {{"parameters", est.device_parameter_count * per_weight},
               {"kv_cache", kv},
               {"workspace", workspace},
               {"communication", comm}};
  if (resident_bytes > 0.0) est.parts.push_back({"resident_experts", resident_bytes});
  // A GPU's caching allocator rounds each block up to its size class and a device memory limit
  // holds the blocks: the parameter values' rounding, as in training's plan.
  if (c.parallel.device == "cuda")
    if (const double r = parameter_block_rounding(c, kDeviceBlockAlign, bf16, ParameterState::forward_only); r > 0.0)
      est.parts.push_back({"allocator_rounding", r});
  return g;
}

int largest_generation_batch_that_fits(const ExperimentConfig& config, const GenerationShape& shape,
                                       double capacity_bytes, int upto) {
  GenerationShape s = shape;
  return largest_multiple_that_fits(std::max(1, config.parallel.ranks), upto, [&](int batch) {
    s.batch = batch;
    return estimate_generation_memory(config, s).memory.total_bytes() <= capacity_bytes;
  });
}

}  // namespace mok
