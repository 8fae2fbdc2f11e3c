#include "core/model/embedding.h"

#include <stdexcept>
#include <string>

#include "core/backend/exec_context.h"
#include "core/model/init.h"

MOK_NN_BEGIN

Embedding::Embedding(const std::string& name, int64_t vocab, int64_t d, double init_std, uint64_t seed)
    : w_(make_parameter(name, {vocab, d}, init_std, seed, 0, false)) {}

Tensor Embedding::forward(const int32_t* tokens, int64_t n, bool keep) {
  const ExecContext& cx = ExecContext::current();
  const int64_t vocab = w_.dim(0), d = w_.dim(1);
  for (int64_t t = 0; t < n; ++t)
    if (tokens[t] < 0 || tokens[t] >= vocab)
      throw std::invalid_argument("Embedding: token id " + std::to_string(tokens[t]) +
                                  " outside the vocabulary of " + std::to_string(vocab));
  Tensor ids = cx.upload(tokens, {n}, DType::i32,
                         keep ? MemTag{MemCategory::saved_activations, -1, "embed.tokens"} : MemTag{});
  Tensor x = cx.activation({n, d});
  cx.ops().embedding_forward(w_.compute(), ids, x);
  if (keep) tokens_ = std::move(ids);
  return x;
}

void Embedding::backward(const Tensor& dx) {
  ExecContext::current().ops().embedding_backward(dx, tokens_, w_.grad);
  tokens_.reset();
}

MOK_NN_END
