#include "core/model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/backend/causal_attention.h"
#include "core/backend/exec_context.h"
#include "core/util/thread_pool.h"

MOK_NN_BEGIN

Attention::Attention(const std::string& prefix, int64_t d, int heads, double init_std,
                     double out_std, uint64_t seed, int layer, const RopeTable* rope)
    : d_(d), heads_(heads), hd_(static_cast<int>(d / heads)), layer_(layer), rope_(rope),
      qkv_(prefix + ".wqkv", d, 3 * d, init_std, seed, layer, "attn.qkv.input"),
      out_(prefix + ".wo", d, d, out_std, seed, layer, "attn.out.input"),
      qkv_saved_(layer, "attn.qkv") {
  if (heads <= 0 || d % heads)
    throw std::invalid_argument("Attention: d_model " + std::to_string(d) +
                                " is not a multiple of heads " + std::to_string(heads));
  if (hd_ % 2) throw std::invalid_argument("Attention: head width d_model/heads must be even for RoPE");
}

Tensor Attention::forward(const Tensor& x, int batch, int seq, bool keep, bool keep_input, const Tensor* residual) {
  return forward_from_qkv(qkv_.forward(x, keep && keep_input, qkv_saved_.output_tag(keep)), batch, seq, keep,
                          residual);
}

Tensor Attention::forward(Tensor&& x, int batch, int seq, bool keep, bool keep_input, const Tensor* residual) {
  return forward_from_qkv(qkv_.forward(std::move(x), keep && keep_input, qkv_saved_.output_tag(keep)), batch, seq,
                          keep, residual);
}

Tensor Attention::forward_from_qkv(Tensor qkv, int batch, int seq, bool keep, const Tensor* residual) {
  const ExecContext& cx = ExecContext::current();
  const int64_t n = static_cast<int64_t>(batch) * seq;
  cx.ops().rope_(qkv, n, 3 * d_, 2 * heads_, seq, 0, *rope_, false);  // q and k heads
  // Kept exactly (no saved-input policy on Wo), o is kept here once: the input of Wo's weight
  // gradient and what the attention backward needs, instead of a copy inside Wo.
  const bool keep_o = keep && !out_.policy();
  Tensor o = cx.activation({n, d_}, keep_o ? MemTag{MemCategory::saved_activations, layer_, "attn.out.input"} : MemTag{});
  Tensor lse;
  if (keep) lse = cx.empty({batch, heads_, seq}, kRealDType, MemTag{MemCategory::saved_activations, layer_, "attn.lse"});
  cx.ops().attention_forward(qkv, batch, seq, heads_, hd_, o, keep ? &lse : nullptr);
  Tensor y = out_.forward(o, keep && !keep_o, {}, false, residual);
  if (keep) {
    if (keep_o) o_ = std::move(o);
    qkv_saved_.keep(std::move(qkv));
    lse_ = std::move(lse);
    batch_ = batch;
    seq_ = seq;
  }
  return y;
}

Tensor Attention::backward(const Tensor& dy, const Tensor* recomputed_x) {
  const ExecContext& cx = ExecContext::current();
  const int64_t n = static_cast<int64_t>(batch_) * seq_;
  Tensor d_o;
  if (!o_.empty()) {
    d_o = out_.input_grad(dy);
    out_.weight_grad(dy, &o_);
  } else {
    d_o = out_.backward(dy);
  }
  Tensor dqkv = cx.activation({n, 3 * d_});  // every column block written by its head
  cx.ops().attention_backward(qkv_saved_.get(), d_o, lse_, o_.empty() ? nullptr : &o_, batch_, seq_, heads_, hd_,
                              dqkv);
  qkv_saved_.reset();
  lse_.reset();
  o_.reset();
  cx.ops().rope_(dqkv, n, 3 * d_, 2 * heads_, seq_, 0, *rope_, true);
  Tensor dx = qkv_.input_grad(dqkv);
  qkv_.weight_grad(dqkv, recomputed_x);
  return dx;
}

Tensor Attention::forward_cached(const Tensor& x, LayerKvCache& cache, int pos0) {
  const int64_t n = x.dim(0);
  if (pos0 + n > cache.k.dim(0))
    throw std::invalid_argument("Attention: KV cache holds " + std::to_string(cache.k.dim(0)) +
                                " positions; asked for " + std::to_string(pos0 + n));
  Tensor qkv = qkv_.forward(x, false);
  rope_apply(qkv.data(), n, 3 * d_, 2 * heads_, static_cast<int>(n), pos0, *rope_, false);
  for (int64_t r = 0; r < n; ++r) {
    std::memcpy(cache.k.data() + (pos0 + r) * d_, qkv.data() + r * 3 * d_ + d_, d_ * sizeof(real));
    std::memcpy(cache.v.data() + (pos0 + r) * d_, qkv.data() + r * 3 * d_ + 2 * d_, d_ * sizeof(real));
  }
  Tensor o = Tensor::uninitialized({n, d_});
  parallel_for(heads_, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      AttentionHeadView a;
      a.q = qkv.data() + h * hd_; a.ldq = 3 * d_;
      a.k = cache.k.data() + h * hd_; a.ldk = d_;
      a.v = cache.v.data() + h * hd_; a.ldv = d_;
      a.nq = static_cast<int>(n);
      a.q_pos0 = pos0;
      a.hd = hd_;
      a.scale = real(1) / std::sqrt(static_cast<real>(hd_));
      attention_head_forward(a, o.data() + h * hd_, d_, nullptr);
    }
  });
  return out_.forward(o, false);
}

Tensor Attention::forward_cached_batch(const Tensor& x, int n, const std::vector<LayerKvCache*>& cache,
                                       const std::vector<int>& pos0) {
  const int64_t batch = static_cast<int64_t>(cache.size());
  if (n < 1 || x.dim(0) != batch * n || static_cast<int64_t>(pos0.size()) != batch)
    throw std::invalid_argument("Attention: batched cached forward needs (batch·n, d) rows, one cache and one position per sequence");
  for (int64_t b = 0; b < batch; ++b) {
    if (pos0[b] < 0 || pos0[b] + n > cache[b]->k.dim(0))
      throw std::invalid_argument("Attention: KV cache of sequence " + std::to_string(b) + " holds " +
                                  std::to_string(cache[b]->k.dim(0)) + " positions; asked for " +
                                  std::to_string(pos0[b] + n));
  }
  const ExecContext& cx = ExecContext::current();
  Tensor qkv = qkv_.forward(x, false);  // (B·n, 3d)
  cx.ops().rope_at_(qkv, batch * n, 3 * d_, 2 * heads_, n, pos0, *rope_, false);  // q and k heads
  std::vector<Tensor*> k(static_cast<size_t>(batch)), v(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    k[b] = &cache[b]->k;
    v[b] = &cache[b]->v;
  }
  Tensor o = cx.activation({batch * n, d_});
  cx.ops().attention_cached(qkv, n, k, v, pos0, heads_, hd_, o);
  return out_.forward(o, false);
}

MOK_NN_END
