#pragma once
// HfTensor: one tensor of a Hugging Face model folder, by its Transformers name, in float.
// Shapes follow PyTorch's nn.Linear convention: a weight is (out_features, in_features),
// the transpose of mok's Linear W (d_in, d_out).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mok {

struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major, numel(shape) of them
};

// By Transformers name, e.g. "model.layers.0.self_attn.q_proj.weight".
using HfTensorMap = std::map<std::string, HfTensor>;

}  // namespace mok
