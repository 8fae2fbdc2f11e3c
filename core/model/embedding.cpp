#include "core/model/embedding.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "core/model/init.h"
#include "core/util/thread_pool.h"

MOK_NN_BEGIN

Embedding::Embedding(const std::string& name, int64_t vocab, int64_t d, double init_std, uint64_t seed)
    : w_(make_parameter(name, {vocab, d}, init_std, seed, 0, false)) {}

Tensor Embedding::forward(const int32_t* tokens, int64_t n, bool keep) {
  const int64_t vocab = w_.value.dim(0), d = w_.value.dim(1);
  for (int64_t t = 0; t < n; ++t)
    if (tokens[t] < 0 || tokens[t] >= vocab)
      throw std::invalid_argument("Embedding: token id " + std::to_string(tokens[t]) +
                                  " outside the vocabulary of " + std::to_string(vocab));
  Tensor x = Tensor::uninitialized({n, d});
  parallel_for(n, 64, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      std::memcpy(x.data() + t * d, w_.value.data() + tokens[t] * d, d * sizeof(real));
  });
  if (keep) {
    tokens_ = ByteBuffer(n * static_cast<int64_t>(sizeof(int32_t)),
                         MemTag{MemCategory::saved_activations, -1, "embed.tokens"});
    std::memcpy(tokens_.data(), tokens, n * sizeof(int32_t));
    n_ = n;
  }
  return x;
}

void Embedding::backward(const Tensor& dx) {
  const int64_t d = w_.value.dim(1);
  const auto* tok = reinterpret_cast<const int32_t*>(tokens_.data());
  real* g = w_.grad.data();
  // Column chunks: each task owns columns [c0, c1) of every row, tokens in order.
  parallel_for(d, 16, [&](int64_t c0, int64_t c1) {
    for (int64_t t = 0; t < n_; ++t) {
      const real* src = dx.data() + t * d;
      real* dst = g + tok[t] * d;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  });
  tokens_.reset();
  n_ = 0;
}

MOK_NN_END
