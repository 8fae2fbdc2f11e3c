#pragma once
// Token embedding: x[t] = W[token[t]].
//   tokens (n, host) → x (n, d); W (vocab, d). Keeps the token ids (n int32 on the layer's
//   device, "embed.tokens").

#include <cstdint>

#include "core/model/parameter.h"

MOK_NN_BEGIN

class Embedding {
 public:
  Embedding(const std::string& name, int64_t vocab, int64_t d, double init_std, uint64_t seed);
  Tensor forward(const int32_t* tokens, int64_t n, bool keep);
  // W.grad[token[t]] += dx[t], rows added in token order (deterministic).
  void backward(const Tensor& dx);
  Parameter& weight() { return w_; }

 private:
  Parameter w_;       // (vocab, d)
  Tensor tokens_;     // (n) i32, saved_activations layer −1 "embed.tokens"
};

MOK_NN_END
