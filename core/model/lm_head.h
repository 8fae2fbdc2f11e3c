#pragma once
// LM head: logits = x·Wᵀ_embed (tied to the token embedding, W (vocab, d)) or x·W_head
// (untied, W (d, vocab)).
//   x (n, d) → logits (n, vocab)
// Keeps x through a SavedLinearInput ("head.input", layer −1) in both cases.

#include <memory>
#include <string>

#include "core/model/linear.h"

MOK_NN_BEGIN

class LmHead {
 public:
  // tied_embedding: the embedding weight (vocab, d) to share, or null for an own W_head.
  LmHead(const std::string& name, int64_t d, int64_t vocab, Parameter* tied_embedding,
         double init_std, uint64_t seed);

  // logits tagged with `out_tag` (cross-entropy may keep them as its gradient buffer).
  Tensor forward(const Tensor& x, bool keep, MemTag out_tag = {});
  Tensor backward(const Tensor& dlogits);  // dx (n, d); weight gradient accumulated
  void set_policy(SavedInputPolicy* policy);
  // Own weight (untied) or null when tied.
  Parameter* own_weight() { return untied_ ? &untied_->weight() : nullptr; }

 private:
  int64_t d_, vocab_;
  Parameter* tied_ = nullptr;       // (vocab, d)
  std::unique_ptr<Linear> untied_;  // W (d, vocab)
  SavedInputPolicy* policy_ = nullptr;
  std::unique_ptr<SavedLinearInput> saved_;  // tied case
};

MOK_NN_END
