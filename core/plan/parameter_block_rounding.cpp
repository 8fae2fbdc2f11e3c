#include "core/plan/parameter_block_rounding.h"

#include <algorithm>
#include <cmath>

#include "core/plan/planned_shape.h"
#include "core/tensor/size_class.h"

namespace mok {

double parameter_block_rounding(const ExperimentConfig& c, int64_t small_align, bool compute_copies,
                                ParameterState state) {
  const bool training = state == ParameterState::training;
  const int64_t d = std::max(1, c.model.d_model);
  const int64_t vocab = planned_vocab(c);
  const int layers = std::max(0, c.model.layers);
  const int64_t f = std::max(1, c.model.expert_hidden);
  const int64_t h = std::max(1, c.model.dense_hidden);
  const int64_t E = std::max(0, c.model.experts);
  const int ranks = std::max(1, c.parallel.ranks);
  const int64_t local_experts = (E + ranks - 1) / ranks;
  const std::vector<bool> moe = planned_moe_layers(c);

  // What one block of `elements` values of `element_bytes` adds.
  auto extra = [&](int64_t elements, int64_t element_bytes) {
    const int64_t bytes = elements * element_bytes;
    return bytes > 0 ? double(size_class_bytes(bytes, small_align) - bytes) : 0.0;
  };
  // A dense parameter: value (training: a gradient and two Adam moments too), and the compute
  // copy. Generation keeps no master beside a compute copy (core/model/init.h).
  const double fp32_blocks = training ? 4.0 : (compute_copies ? 0.0 : 1.0);
  auto dense = [&](int64_t elements) {
    return fp32_blocks * extra(elements, 4) + (compute_copies ? extra(elements, 2) : 0.0);
  };
  // One projection of the routed experts: stacked value (training: and gradient) and compute
  // copy, and in training each expert's two Adam moments.
  const double fp32_stacks = training ? 2.0 : (compute_copies ? 0.0 : 1.0);
  auto stacked = [&](int64_t per_expert) {
    if (local_experts == 0) return 0.0;
    return fp32_stacks * extra(local_experts * per_expert, 4) +
           (compute_copies ? extra(local_experts * per_expert, 2) : 0.0) +
           (training ? 2.0 * double(local_experts) * extra(per_expert, 4) : 0.0);
  };

  double sum = dense(vocab * d) + (c.model.tie_embeddings ? 0.0 : dense(vocab * d)) + dense(d);  // embedding, head, final norm
  for (int l = 0; l < layers; ++l) {
    sum += 2.0 * dense(d) + dense(3 * d * d) + dense(d * d);  // two norms, Wqkv, Wo
    if (moe[size_t(l)]) {
      sum += dense(E * d) + stacked(d * 2 * f) + stacked(f * d);  // router, experts' up and down
      if (c.model.shared_expert) sum += dense(2 * f * d) + dense(f * d);
    } else {
      sum += dense(2 * h * d) + dense(h * d);
    }
  }
  return sum;
}

}  // namespace mok
