#include "core/model/transformer_block.h"

#include <stdexcept>

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

namespace {
void add_into(Tensor& y, const Tensor& x) { ExecContext::current().ops().add_(y, x); }  // y += x
}  // namespace

TransformerBlock::TransformerBlock(int layer, const BlockConfig& c, const RopeTable* rope, uint64_t seed)
    : layer_(layer), config_(c),
      attn_norm_("layers." + std::to_string(layer) + ".attn_norm", c.d, c.norm_eps, layer, "attn_norm"),
      attn_("layers." + std::to_string(layer) + ".attn", c.d, c.heads, c.init_std, c.out_std, seed, layer, rope),
      ffn_norm_("layers." + std::to_string(layer) + ".ffn_norm", c.d, c.norm_eps, layer, "ffn_norm"),
      input_(layer, "block.input") {
  const std::string prefix = "layers." + std::to_string(layer);
  if (c.moe) {
    MoeConfig mc = c.moe_config;
    mc.d = c.d;
    moe_ = std::make_unique<MoeLayer>(prefix + ".moe", mc, c.init_std, c.out_std, seed, layer);
  } else {
    mlp_ = std::make_unique<SwiGluMlp>(prefix + ".mlp", c.d, c.dense_hidden, c.init_std, c.out_std, seed,
                                       layer, "mlp");
  }
}

Tensor TransformerBlock::forward(const Tensor& x, int batch, int seq, bool keep, MoeStats* stats) {
  if (!keep || !config_.checkpoint) return forward_keeping(x, batch, seq, keep, stats);
  input_.keep_shared(x);
  batch_ = batch;
  seq_ = seq;
  return forward_keeping(x, batch, seq, false, stats);
}

Tensor TransformerBlock::forward_keeping(const Tensor& x, int batch, int seq, bool keep, MoeStats* stats) {
  const bool rc = config_.recompute;
  Tensor h = attn_.forward(attn_norm_.forward(x, keep), batch, seq, keep, !rc, &x);  // x + attn(norm(x))
  Tensor hn = ffn_norm_.forward(h, keep);
  if (!moe_) return mlp_->forward(std::move(hn), keep, !rc, !rc, &h);  // h + mlp(norm(h))
  return moe_->forward(hn, keep, stats, &h);                          // h + moe(norm(h))
}

Tensor TransformerBlock::backward(const Tensor& dy, real loss_scale) {
  if (config_.checkpoint) {
    if (input_.empty()) throw std::logic_error("TransformerBlock::backward: no checkpointed forward");
    forward_keeping(input_.get(), batch_, seq_, true, nullptr);  // its output is not needed, what it keeps is
    input_.reset();  // the attention norm keeps the same bytes now
  }
  const bool rc = config_.recompute;
  // dh = dy + ffn_normᵀ(ffnᵀ(dy))
  Tensor dffn;
  if (moe_ && rc) {
    Tensor hn = ffn_norm_.recompute_output();
    dffn = moe_->backward(dy, loss_scale, &hn);
  } else if (moe_) {
    dffn = moe_->backward(dy, loss_scale);
  } else if (rc) {
    Tensor hn = ffn_norm_.recompute_output();
    dffn = mlp_->backward(dy, &hn);
  } else {
    dffn = mlp_->backward(dy);
  }
  Tensor dh = ffn_norm_.backward(dffn, &dy);
  dffn.reset();
  // dx = dh + attn_normᵀ(attnᵀ(dh))
  Tensor dattn;
  if (rc) {
    Tensor xn = attn_norm_.recompute_output();
    dattn = attn_.backward(dh, &xn);
  } else {
    dattn = attn_.backward(dh);
  }
  return attn_norm_.backward(dattn, &dh);
}

Tensor TransformerBlock::forward_cached(const Tensor& x, LayerKvCache& cache, int pos0) {
  Tensor h = attn_.forward_cached(attn_norm_.forward(x, false), cache, pos0);
  add_into(h, x);
  Tensor hn = ffn_norm_.forward(h, false);
  Tensor out = moe_ ? moe_->forward(hn, false, nullptr) : mlp_->forward(hn, false);
  add_into(out, h);
  return out;
}

Tensor TransformerBlock::forward_cached_batch(const Tensor& x, int n, const std::vector<LayerKvCache*>& cache,
                                              const std::vector<int>& pos0) {
  Tensor h = attn_.forward_cached_batch(attn_norm_.forward(x, false), n, cache, pos0);
  add_into(h, x);
  Tensor hn = ffn_norm_.forward(h, false);
  // The MoE (router, dispatcher, experts) sees every row of the batch in one call.
  Tensor out = moe_ ? moe_->forward(hn, false, nullptr) : mlp_->forward(hn, false);
  add_into(out, h);
  return out;
}

void TransformerBlock::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&attn_norm_.weight());
  out.push_back(&attn_.qkv().weight());
  out.push_back(&attn_.out().weight());
  out.push_back(&ffn_norm_.weight());
  if (moe_) {
    out.push_back(&moe_->router().proj().weight());
    for (auto& e : moe_->experts().experts) {
      if (!e) continue;
      out.push_back(&e->up().weight());
      out.push_back(&e->down().weight());
    }
    if (auto* s = moe_->shared_expert()) {
      out.push_back(&s->up().weight());
      out.push_back(&s->down().weight());
    }
  } else {
    out.push_back(&mlp_->up().weight());
    out.push_back(&mlp_->down().weight());
  }
}

void TransformerBlock::set_policy(SavedInputPolicy* policy) {
  // Elementwise saved tensors (norm inputs, q/k/v, SwiGLU pre-activations) follow it too.
  attn_norm_.set_saved_policy(policy);
  ffn_norm_.set_saved_policy(policy);
  attn_.set_saved_policy(policy);
  attn_.qkv().set_policy(policy);
  attn_.out().set_policy(policy);
  if (moe_) {
    moe_->router().proj().set_policy(policy);
    for (auto& e : moe_->experts().experts) {
      if (!e) continue;
      e->up().set_policy(policy);
      e->down().set_policy(policy);
      e->set_saved_policy(policy);
    }
    if (auto* g = moe_->experts().grouped.get()) g->set_policy(policy);
    if (auto* s = moe_->shared_expert()) {
      s->up().set_policy(policy);
      s->down().set_policy(policy);
      s->set_saved_policy(policy);
    }
  } else {
    mlp_->up().set_policy(policy);
    mlp_->down().set_policy(policy);
    mlp_->set_saved_policy(policy);
  }
}

MOK_NN_END
