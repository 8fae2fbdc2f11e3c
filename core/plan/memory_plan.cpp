#include "core/plan/memory_plan.h"

#include <algorithm>

#include <unistd.h>

#include "core/backend/fused_attention_workspace.h"
#include "core/plan/parameter_block_rounding.h"
#include "core/plan/planned_shape.h"
#include "core/plan/saved_activation_plan.h"
#include "core/tensor/size_class.h"
#include "core/train/rank_device.h"

namespace mok {

double MemoryEstimate::total_bytes() const {
  double t = 0.0;
  for (const Part& p : parts) t += p.bytes;
  return t;
}

double MemoryEstimate::bytes_of(const std::string& category) const {
  for (const Part& p : parts)
    if (p.category == category) return p.bytes;
  return 0.0;
}

double host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0.0;
}

MemoryEstimate estimate_memory(const ExperimentConfig& c) {
  constexpr double kFloat = 4.0;
  const double d = std::max(1, c.model.d_model);
  const double vocab = planned_vocab(c);
  const int layers = std::max(0, c.model.layers);
  const int ranks = std::max(1, c.parallel.ranks);
  const double f = std::max(1, c.model.expert_hidden);
  const double E = std::max(0, c.model.experts);
  const double k = std::max(1, std::min(c.model.top_k, std::max(1, c.model.experts)));

  const std::vector<bool> moe = planned_moe_layers(c);

  // Parameters: shared ones on every rank, routed experts split over the ranks.
  double shared = vocab * d * (c.model.tie_embeddings ? 1.0 : 2.0) + d;
  double experts_all = 0.0;
  for (int l = 0; l < layers; ++l) {
    shared += 4.0 * d * d + 2.0 * d;  // attention q, k, v, o and two norms
    if (moe[size_t(l)]) {
      shared += d * E + (c.model.shared_expert ? 3.0 * d * f : 0.0);
      experts_all += E * 3.0 * d * f;  // SwiGLU: gate, up, down
    } else {
      shared += 3.0 * d * std::max(1, c.model.dense_hidden);
    }
  }
  MemoryEstimate est;
  est.parameter_count = shared + experts_all;
  est.device_parameter_count = shared + experts_all / ranks;
  est.replicated_parameter_count = shared;
  const double param_bytes = est.device_parameter_count * kFloat;
  // bf16 (train.precision on a GPU): activations and a compute copy of every weight in 2 bytes.
  const bool bf16 = compute_dtype_for(c) == DType::bf16;
  const double act = bf16 ? 2.0 : kFloat;
  const double compute_copy_bytes = bf16 ? est.device_parameter_count * 2.0 : 0.0;

  // Saved activations: every tensor the model keeps, as the kitten policy keeps it once past
  // its exact warm-up (core/plan/saved_activation_plan.h); the warm-up figures come after.
  const double tokens = double(std::max(1, c.train.batch)) / std::max(1, c.train.grad_accum) / ranks *
                        std::max(1, c.data.seq_len);
  const bool kitten = c.kittens.mode != "exact";
  const int64_t steady_step = kitten ? c.kittens.warmup_steps : 0;  // the policy past its warm-up
  const std::vector<PlannedSavedTensor> saved = plan_saved_activations(c, steady_step);
  const double saved_bytes = saved_activation_bytes(saved);
  est.saved_by_kind = saved_bytes_by_kind(saved);
  // Workspace: the scaled loss gradient beside the kept logits (ce.grad, a saved activation),
  // the widest hidden of a layer or, where larger, the fused attention backward's stage (bf16
  // on a GPU: its scores for a chunk of sequences, core/backend/fused_attention_workspace.h,
  // and q/k/v's and the output's gradients, less what the last layer's backward has released
  // by then: the FFN's saved tensors and Wo's input), and with compact saves the full-size
  // tensors backward rebuilds from them for one layer's attention or MLP/MoE.
  double layer_workspace = tokens * std::max(f * k, 4.0 * d) * act;
  if (bf16 && c.parallel.device == "cuda") {
    const int seq = std::max(1, c.data.seq_len), heads = std::max(1, c.model.heads);
    const int sequences = std::max(1, static_cast<int>(tokens) / seq);
    const double scores = static_cast<double>(
        fused_attention_backward_bytes(fused_attention_backward_chunk(sequences, seq, heads), seq));
    const double attention_stage = scores + tokens * 4.0 * d * act -
                                   released_before_attention_bytes(c, steady_step);
    layer_workspace = std::max(layer_workspace, attention_stage);
  }
  const double workspace = tokens * vocab * act + layer_workspace + restore_workspace_bytes(saved);
  const double comm = ranks > 1 ? 2.0 * tokens * k * d * act : 0.0;

  est.parts = {{"parameters", param_bytes + compute_copy_bytes},
               {"gradients", param_bytes},
               {"optimizer_state", 2.0 * param_bytes},
               {"saved_activations", saved_bytes},
               {"workspace", workspace},
               {"communication", comm}};
  // A GPU's caching allocator rounds each block up to its size class, and a device memory
  // limit holds the blocks: the parameter state's rounding, where there is any.
  if (c.parallel.device == "cuda")
    if (const double r = parameter_block_rounding(c, kDeviceBlockAlign, bf16); r > 0.0)
      est.parts.push_back({"allocator_rounding", r});
  if (kitten && c.kittens.warmup_steps > 0) {
    const std::vector<PlannedSavedTensor> warmup = plan_saved_activations(c, 0);
    est.kitten_warmup_steps = c.kittens.warmup_steps;
    est.warmup_saved_activation_bytes = saved_activation_bytes(warmup);
    est.warmup_total_bytes = est.total_bytes() - saved_bytes - restore_workspace_bytes(saved) +
                             est.warmup_saved_activation_bytes + restore_workspace_bytes(warmup);
  }
  return est;
}

int largest_multiple_that_fits(int step, int upto, const std::function<bool(int)>& fits) {
  step = std::max(1, step);
  if (!fits(step)) return 0;
  // Double, then bisect between the last fit and the first miss.
  int lo = step, hi = step;
  while (hi <= upto && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  if (hi > upto) hi = upto / step * step + step;
  while (hi - lo > step) {
    const int mid = (lo + hi) / 2 / step * step;
    if (mid <= lo) break;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

int largest_batch_that_fits(const ExperimentConfig& config, double capacity_bytes, int upto) {
  const int step = std::max(1, config.parallel.ranks) * std::max(1, config.train.grad_accum);
  ExperimentConfig c = config;
  return largest_multiple_that_fits(step, upto, [&](int batch) {
    c.train.batch = batch;
    return estimate_memory(c).total_bytes() <= capacity_bytes;
  });
}

}  // namespace mok
