#pragma once
// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter), bias-corrected.
//   p ← p − lr·wd·p                       (only where Parameter::weight_decay)
//   m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²
//   p ← p − lr · (m / (1−β1^t)) / (sqrt(v / (1−β2^t)) + ε)
// The update of each element is computed in double and depends on that element only, so
// it is bitwise identical for any thread count. State tensors (m, v: same shapes as the
// parameters, on their device) are counted under MemCategory::optimizer_state. The update
// runs as one op of the rank's ExecContext (on a GPU: one launch over every parameter, which
// also rewrites the bf16 compute copies).

#include <cstdint>
#include <vector>

#include "core/model/parameter.h"

namespace mok {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  // Allocates m and v (zeros) on the parameters' device and the MemoryTracker current now.
  AdamW(std::vector<Parameter*> params, AdamWOptions options);

  // One update of every parameter from its grad, with learning rate `lr`; grad_scale: the
  // gradient clipping's factor (clip_factor), folded into the update where the backend can
  // (the gradients may then be left unscaled).
  void step(double lr, double grad_scale = 1.0);

  // Updates done so far (t in the bias correction of the next step is step_count()+1).
  int64_t step_count() const { return step_; }
  void set_step_count(int64_t step) { step_ = step; }

  const std::vector<Parameter*>& parameters() const { return params_; }
  // First and second moments, index-aligned with parameters().
  std::vector<Tensor>& first_moments() { return m_; }
  std::vector<Tensor>& second_moments() { return v_; }
  const std::vector<Tensor>& first_moments() const { return m_; }
  const std::vector<Tensor>& second_moments() const { return v_; }
  const AdamWOptions& options() const { return options_; }

 private:
  std::vector<Parameter*> params_;
  AdamWOptions options_;
  std::vector<Tensor> m_, v_;
  int64_t step_ = 0;
};

}  // namespace mok
