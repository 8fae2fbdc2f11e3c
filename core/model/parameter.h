#pragma once
// Parameter: a named trainable tensor with its gradient (same shape).
//   value: the master copy (`real`; fp32 on a GPU), updated by the optimizer
//   grad:  `real`, accumulated by backward
//   compute_copy: the weights layers compute with when the compute dtype differs from the
//          master's (bf16 on a GPU), rewritten by every optimizer step; empty otherwise, and
//          then compute() is the master itself (the CPU, fp32 on a GPU).

#include <string>

#include "core/tensor/tensor.h"

MOK_NN_BEGIN

struct Parameter {
  std::string name;   // dotted, e.g. "layers.2.attn.wq"; the safetensors key
  Tensor value;       // MemCategory::parameters
  Tensor grad;        // MemCategory::gradients; accumulated by backward
  Tensor compute_copy;  // MemCategory::parameters; see above
  bool weight_decay = true;  // false for norms and biases
  bool expert = false;       // true for routed-expert weights (sharded, not data-parallel)

  const Tensor& compute() const { return compute_copy.empty() ? value : compute_copy; }
};

MOK_NN_END
