#include "core/config/model_footprint.h"

#include <algorithm>
#include <vector>

#include "core/config/config_check.h"
#include "core/util/byte_size.h"

namespace mok {

ModelFootprint model_footprint(const ExperimentConfig& c) {
  const ModelConfig& m = c.model;
  const double d = std::max(1, m.d_model);
  const double vocab = c.data.tokenizer == "bpe" ? std::max(256, c.data.vocab_size) : 256.0;
  const int layers = std::max(0, m.layers);
  const double f = std::max(1, m.expert_hidden);
  const double experts = std::max(0, m.experts);
  std::vector<bool> moe(static_cast<size_t>(layers), experts > 0);
  try {
    if (experts > 0) moe = parse_moe_layers(m.moe_layers, layers);
  } catch (const std::exception&) {
    // An invalid list is the config check's to report; count every layer as MoE.
  }
  double params = vocab * d * (m.tie_embeddings ? 1.0 : 2.0) + d;  // embeddings, final norm
  for (int l = 0; l < layers; ++l) {
    params += 4.0 * d * d + 2.0 * d;  // attention q, k, v, o and two norms
    if (moe[static_cast<size_t>(l)]) {
      params += d * experts + experts * 3.0 * d * f + (m.shared_expert ? 3.0 * d * f : 0.0);  // router, SwiGLU experts
    } else {
      params += 3.0 * d * std::max(1, m.dense_hidden);
    }
  }
  return {params, params * 16.0};
}

std::string format_footprint_bytes(double bytes) {
  if (!(bytes < 9.2e18)) return "more than 8 EiB";
  return format_byte_size(static_cast<int64_t>(bytes));
}

std::string model_size_text(const ExperimentConfig& c) {
  const ModelConfig& m = c.model;
  std::string s = "model.layers " + std::to_string(m.layers) + ", model.d_model " + std::to_string(m.d_model);
  if (m.experts > 0) {
    s += ", model.experts " + std::to_string(m.experts) + " of model.expert_hidden " + std::to_string(m.expert_hidden);
  }
  s += ", model.dense_hidden " + std::to_string(m.dense_hidden);
  if (c.data.tokenizer == "bpe") s += ", data.vocab_size " + std::to_string(c.data.vocab_size);
  return s;
}

}  // namespace mok
