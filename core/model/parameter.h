#pragma once
// Parameter: a named trainable tensor with its gradient (same shape).

#include <string>

#include "core/tensor/tensor.h"

MOK_NN_BEGIN

struct Parameter {
  std::string name;   // dotted, e.g. "layers.2.attn.wq"; the safetensors key
  Tensor value;       // MemCategory::parameters
  Tensor grad;        // MemCategory::gradients; accumulated by backward
  bool weight_decay = true;  // false for norms and biases
  bool expert = false;       // true for routed-expert weights (sharded, not data-parallel)
};

MOK_NN_END
