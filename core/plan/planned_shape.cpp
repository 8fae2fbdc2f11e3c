#include "core/plan/planned_shape.h"

#include <algorithm>

#include "core/config/config_check.h"

namespace mok {

int planned_vocab(const ExperimentConfig& c) { return c.data.tokenizer == "bpe" ? std::max(256, c.data.vocab_size) : 256; }

std::vector<bool> planned_moe_layers(const ExperimentConfig& c) {
  const int layers = std::max(0, c.model.layers);
  const bool experts = c.model.experts > 0;
  std::vector<bool> moe(size_t(layers), experts);
  if (!experts) return moe;
  try {
    moe = parse_moe_layers(c.model.moe_layers, layers);
  } catch (...) {
  }
  return moe;
}

}  // namespace mok
