#pragma once
// Parameter: a named trainable tensor with its gradient (same shape).
//   value: the master copy (`real`; fp32 on a GPU), updated by the optimizer
//   grad:  `real`, accumulated by backward
//   compute_copy: the weights layers compute with when the compute dtype differs from the
//          master's (bf16 on a GPU), rewritten by every optimizer step; empty otherwise, and
//          then compute() is the master itself (the CPU, fp32 on a GPU).
// A forward-only model (generation, ForwardOnlyParameters in init.h) holds no master where a
// compute copy exists: nothing updates it, and it would take 4 of a bf16 weight's 6 bytes.
// Then `value` is empty and compute() (the compute copy) is the only copy; shape() and numel()
// read whichever copy exists.

#include <cstdint>
#include <string>
#include <vector>

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
  Tensor& compute() { return compute_copy.empty() ? value : compute_copy; }
  bool has_master() const { return !value.empty(); }
  const std::vector<int64_t>& shape() const { return compute().shape(); }
  int64_t numel() const { return compute().numel(); }
  int64_t dim(int i) const { return compute().dim(i); }
};

MOK_NN_END
