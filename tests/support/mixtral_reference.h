#pragma once
// An independent forward pass of Transformers' Mixtral (modeling_mixtral.py's equations,
// written out in plain loops in double), computed from tensors by their Transformers names
// and the hyperparameters of config.json. The interop tests compare mok's logits with it:
// it shares no code with mok's model or with the export mapping.
//
//   x = embed_tokens[ids]
//   per layer: h = x + o_proj(attn(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))), n1 = rmsnorm(x)
//              x = h + Σ_top-k w_e · w2(silu(w1 n2) ∘ w3 n2), n2 = rmsnorm(h),
//              w = softmax(gate n2) over all experts, top-k, divided by their sum
//   logits = lm_head(rmsnorm(x))   (lm_head = embed_tokens when tied)
// RoPE: inv_freq_i = θ^(−2i/hd), cos/sin of pos·inv_freq repeated over both halves,
// q·cos + rotate_half(q)·sin with rotate_half(q) = (−q2, q1). Key/value head of query head
// h: h / (heads / kv_heads) (repeat_kv).

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/interop/hf_tensor.h"

namespace mok::test {

struct MixtralHyper {
  int vocab = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, experts = 0, top_k = 0, ffn = 0;
  double eps = 1e-5, theta = 10000.0;
  bool tied = false;
};

class MixtralReference {
 public:
  MixtralReference(const HfTensorMap& t, MixtralHyper h) : t_(t), h_(h) {}

  // (T, vocab) logits, row-major.
  std::vector<double> logits(const std::vector<int>& ids) const {
    const int T = static_cast<int>(ids.size()), d = h_.hidden, hd = d / h_.heads;
    std::vector<double> x(static_cast<size_t>(T) * d);
    const HfTensor& emb = get("model.embed_tokens.weight");
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < d; ++j) x[t * d + j] = emb.values[static_cast<size_t>(ids[t]) * d + j];
    for (int l = 0; l < h_.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const std::vector<double> n1 = rmsnorm(x, T, get(p + "input_layernorm.weight"));
      std::vector<double> q = linear(n1, T, get(p + "self_attn.q_proj.weight"));
      std::vector<double> k = linear(n1, T, get(p + "self_attn.k_proj.weight"));
      const std::vector<double> v = linear(n1, T, get(p + "self_attn.v_proj.weight"));
      rope(q, T, h_.heads, hd);
      rope(k, T, h_.kv_heads, hd);
      std::vector<double> o(static_cast<size_t>(T) * d, 0.0);
      const int group = h_.heads / h_.kv_heads;
      for (int hh = 0; hh < h_.heads; ++hh) {
        const int kvh = hh / group;
        for (int i = 0; i < T; ++i) {
          std::vector<double> s(i + 1);
          double mx = -1e300;
          for (int j = 0; j <= i; ++j) {
            double dot = 0;
            for (int c = 0; c < hd; ++c) dot += q[i * h_.heads * hd + hh * hd + c] * k[j * h_.kv_heads * hd + kvh * hd + c];
            s[j] = dot / std::sqrt(static_cast<double>(hd));
            mx = std::max(mx, s[j]);
          }
          double z = 0;
          for (double& e : s) z += (e = std::exp(e - mx));
          for (int j = 0; j <= i; ++j)
            for (int c = 0; c < hd; ++c)
              o[i * d + hh * hd + c] += s[j] / z * v[j * h_.kv_heads * hd + kvh * hd + c];
        }
      }
      const std::vector<double> a = linear(o, T, get(p + "self_attn.o_proj.weight"));
      for (size_t i = 0; i < x.size(); ++i) x[i] += a[i];
      const std::vector<double> n2 = rmsnorm(x, T, get(p + "post_attention_layernorm.weight"));
      const std::vector<double> r = linear(n2, T, get(p + "block_sparse_moe.gate.weight"));  // (T, E)
      for (int t = 0; t < T; ++t) {
        std::vector<double> prob(h_.experts);
        double mx = -1e300, z = 0;
        for (int e = 0; e < h_.experts; ++e) mx = std::max(mx, r[t * h_.experts + e]);
        for (int e = 0; e < h_.experts; ++e) z += (prob[e] = std::exp(r[t * h_.experts + e] - mx));
        for (double& pe : prob) pe /= z;
        std::vector<int> order(h_.experts);
        for (int e = 0; e < h_.experts; ++e) order[e] = e;
        std::stable_sort(order.begin(), order.end(), [&](int a1, int b1) { return prob[a1] > prob[b1]; });
        double chosen = 0;
        for (int s = 0; s < h_.top_k; ++s) chosen += prob[order[s]];
        const std::vector<double> row(n2.begin() + static_cast<long>(t) * d, n2.begin() + static_cast<long>(t + 1) * d);
        for (int s = 0; s < h_.top_k; ++s) {
          const int e = order[s];
          const std::string ex = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
          const std::vector<double> g = linear(row, 1, get(ex + "w1.weight"));
          const std::vector<double> u = linear(row, 1, get(ex + "w3.weight"));
          std::vector<double> act(h_.ffn);
          for (int c = 0; c < h_.ffn; ++c) act[c] = g[c] / (1.0 + std::exp(-g[c])) * u[c];
          const std::vector<double> y = linear(act, 1, get(ex + "w2.weight"));
          for (int j = 0; j < d; ++j) x[t * d + j] += prob[e] / chosen * y[j];
        }
      }
    }
    const std::vector<double> n = rmsnorm(x, T, get("model.norm.weight"));
    return linear(n, T, get(h_.tied ? "model.embed_tokens.weight" : "lm_head.weight"));
  }

 private:
  const HfTensor& get(const std::string& name) const {
    auto it = t_.find(name);
    if (it == t_.end()) throw std::runtime_error("reference: no tensor " + name);
    return it->second;
  }
  // y = x·Wᵀ with W (out, in) as nn.Linear keeps it.
  static std::vector<double> linear(const std::vector<double>& x, int rows, const HfTensor& w) {
    const int64_t out = w.shape[0], in = w.shape[1];
    std::vector<double> y(static_cast<size_t>(rows * out), 0.0);
    for (int r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double s = 0;
        for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w.values[o * in + i];
        y[r * out + o] = s;
      }
    return y;
  }
  std::vector<double> rmsnorm(const std::vector<double>& x, int rows, const HfTensor& g) const {
    const int d = h_.hidden;
    std::vector<double> y(x.size());
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int j = 0; j < d; ++j) ss += x[r * d + j] * x[r * d + j];
      const double rs = 1.0 / std::sqrt(ss / d + h_.eps);
      for (int j = 0; j < d; ++j) y[r * d + j] = g.values[j] * (x[r * d + j] * rs);
    }
    return y;
  }
  void rope(std::vector<double>& x, int T, int heads, int hd) const {
    const int half = hd / 2;
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < heads; ++h) {
        double* v = x.data() + static_cast<size_t>(t) * heads * hd + h * hd;
        std::vector<double> rotated(hd);  // rotate_half
        for (int i = 0; i < half; ++i) {
          rotated[i] = -v[i + half];
          rotated[i + half] = v[i];
        }
        for (int c = 0; c < hd; ++c) {
          const double inv_freq = 1.0 / std::pow(h_.theta, static_cast<double>(2 * (c % half)) / hd);
          const double angle = t * inv_freq;
          v[c] = v[c] * std::cos(angle) + rotated[c] * std::sin(angle);
        }
      }
  }

  const HfTensorMap& t_;
  MixtralHyper h_;
};

}  // namespace mok::test
