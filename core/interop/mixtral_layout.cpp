#include "core/interop/mixtral_layout.h"

#include <cstring>
#include <set>
#include <stdexcept>

namespace mok {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

// Columns [c0, c1) of the row-major (rows, cols) matrix m, transposed: (c1 − c0, rows).
HfTensor columns_transposed(const float* m, int64_t rows, int64_t cols, int64_t c0, int64_t c1) {
  HfTensor t;
  t.shape = {c1 - c0, rows};
  t.values.resize(static_cast<size_t>((c1 - c0) * rows));
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t r = 0; r < rows; ++r) t.values[static_cast<size_t>((c - c0) * rows + r)] = m[r * cols + c];
  return t;
}

// The inverse: writes the (c1 − c0, rows) matrix t into columns [c0, c1) of m (rows, cols).
void write_columns_transposed(const HfTensor& t, float* m, int64_t rows, int64_t cols, int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t r = 0; r < rows; ++r) m[r * cols + c] = t.values[static_cast<size_t>((c - c0) * rows + r)];
}

// A dotted mok name split at the dots.
std::vector<std::string> split_name(const std::string& name) {
  std::vector<std::string> parts;
  size_t b = 0;
  while (true) {
    const size_t e = name.find('.', b);
    parts.push_back(name.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return parts;
}

// One mok parameter's place in the Mixtral layout: which tensors, and which column block of
// the mok matrix each is (transposed) — or the tensor as is (vectors and the embedding).
struct Placement {
  struct Piece {
    std::string hf_name;
    int64_t c0 = 0, c1 = 0;  // column block of the mok (rows, cols) matrix
  };
  bool as_is = false;        // same shape and order in both models
  std::vector<Piece> pieces;  // when not as_is
};

Placement place(const Parameter& p, const MixtralShape& s) {
  const std::vector<std::string> n = split_name(p.name);
  const int64_t d = s.d_model;
  auto linear = [&](std::string hf, int64_t cols) {
    Placement pl;
    pl.pieces.push_back({std::move(hf), 0, cols});
    return pl;
  };
  auto vector = [](std::string hf) {
    Placement pl;
    pl.as_is = true;
    pl.pieces.push_back({std::move(hf), 0, 0});
    return pl;
  };
  if (n.size() == 1 && n[0] == "embed") return vector("model.embed_tokens.weight");
  if (n.size() == 1 && n[0] == "final_norm") return vector("model.norm.weight");
  if (n.size() == 1 && n[0] == "head") return linear("lm_head.weight", s.vocab);
  if (n.size() >= 3 && n[0] == "layers") {
    const std::string layer = "model.layers." + n[1] + ".";
    const std::string moe = layer + "block_sparse_moe.";
    if (n.size() == 3 && n[2] == "attn_norm") return vector(layer + "input_layernorm.weight");
    if (n.size() == 3 && n[2] == "ffn_norm") return vector(layer + "post_attention_layernorm.weight");
    if (n.size() == 4 && n[2] == "attn" && n[3] == "wqkv") {
      Placement pl;
      pl.pieces = {{layer + "self_attn.q_proj.weight", 0, d},
                   {layer + "self_attn.k_proj.weight", d, 2 * d},
                   {layer + "self_attn.v_proj.weight", 2 * d, 3 * d}};
      return pl;
    }
    if (n.size() == 4 && n[2] == "attn" && n[3] == "wo") return linear(layer + "self_attn.o_proj.weight", d);
    if (n.size() == 4 && n[2] == "moe" && n[3] == "w_router") return linear(moe + "gate.weight", s.experts);
    if (n.size() == 6 && n[2] == "moe" && n[3] == "experts") {
      const std::string expert = moe + "experts." + n[4] + ".";
      const int64_t f = s.expert_hidden;
      if (n[5] == "w_up") {
        Placement pl;
        pl.pieces = {{expert + "w1.weight", 0, f}, {expert + "w3.weight", f, 2 * f}};  // [gate | up]
        return pl;
      }
      if (n[5] == "w_down") return linear(expert + "w2.weight", d);
    }
    if (n.size() >= 4 && n[2] == "mlp")
      throw std::invalid_argument("'" + p.name + "': layer " + n[1] + " is a dense MLP; Mixtral has experts in every layer");
    if (n.size() >= 4 && n[2] == "moe" && n[3] == "shared")
      throw std::invalid_argument("'" + p.name + "': a shared expert has no place in Mixtral");
  }
  throw std::invalid_argument("'" + p.name + "': no Mixtral tensor corresponds to this parameter");
}

void check_shape(const Parameter& p) {
  if (p.value.empty() || !p.value.is_cpu())
    throw std::invalid_argument("'" + p.name + "': parameter values must be on the host");
}

}  // namespace

HfTensorMap mixtral_tensors_from_parameters(const std::vector<Parameter*>& params, const MixtralShape& s) {
  if (s.kv_heads != s.heads)
    throw std::invalid_argument("Mixtral export writes one key/value head per query head (kv_heads = heads)");
  HfTensorMap out;
  for (const Parameter* p : params) {
    check_shape(*p);
    const Placement pl = place(*p, s);
    const float* v = p->value.data();
    if (pl.as_is) {
      HfTensor t;
      t.shape = p->value.shape();
      t.values.assign(v, v + p->value.numel());
      out[pl.pieces[0].hf_name] = std::move(t);
      continue;
    }
    const int64_t rows = p->value.dim(0), cols = p->value.dim(1);
    for (const Placement::Piece& piece : pl.pieces) {
      if (piece.c1 > cols)
        throw std::invalid_argument("'" + p->name + "' has shape " + shape_text(p->value.shape()) +
                                    ", too narrow for " + piece.hf_name);
      out[piece.hf_name] = columns_transposed(v, rows, cols, piece.c0, piece.c1);
    }
  }
  return out;
}

HfTensorMap unfuse_mixtral_experts(HfTensorMap tensors, const MixtralShape& s) {
  const int64_t f = s.expert_hidden, d = s.d_model;
  for (int l = 0; l < s.layers; ++l) {
    const std::string layer = "model.layers." + std::to_string(l) + ".";
    const std::string fused_gate = layer + "mlp.gate.weight";
    if (auto it = tensors.find(fused_gate); it != tensors.end()) {
      tensors[layer + "block_sparse_moe.gate.weight"] = std::move(it->second);
      tensors.erase(fused_gate);
    }
    const std::string gate_up = layer + "mlp.experts.gate_up_proj", down = layer + "mlp.experts.down_proj";
    if (auto it = tensors.find(gate_up); it != tensors.end()) {
      const HfTensor& t = it->second;
      if (t.shape != std::vector<int64_t>{s.experts, 2 * f, d})
        throw std::invalid_argument(gate_up + " has shape " + shape_text(t.shape) + ", expected " +
                                    shape_text({s.experts, 2 * f, d}));
      for (int e = 0; e < s.experts; ++e) {
        const float* block = t.values.data() + static_cast<size_t>(e) * 2 * f * d;
        const std::string expert = layer + "block_sparse_moe.experts." + std::to_string(e) + ".";
        tensors[expert + "w1.weight"] = HfTensor{{f, d}, std::vector<float>(block, block + f * d)};
        tensors[expert + "w3.weight"] = HfTensor{{f, d}, std::vector<float>(block + f * d, block + 2 * f * d)};
      }
      tensors.erase(gate_up);
    }
    if (auto it = tensors.find(down); it != tensors.end()) {
      const HfTensor& t = it->second;
      if (t.shape != std::vector<int64_t>{s.experts, d, f})
        throw std::invalid_argument(down + " has shape " + shape_text(t.shape) + ", expected " +
                                    shape_text({s.experts, d, f}));
      for (int e = 0; e < s.experts; ++e) {
        const float* block = t.values.data() + static_cast<size_t>(e) * d * f;
        tensors[layer + "block_sparse_moe.experts." + std::to_string(e) + ".w2.weight"] =
            HfTensor{{d, f}, std::vector<float>(block, block + d * f)};
      }
      tensors.erase(down);
    }
  }
  return tensors;
}

void parameters_from_mixtral_tensors(HfTensorMap tensors, const MixtralShape& s,
                                     const std::vector<Parameter*>& params) {
  if (s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads)
    throw std::invalid_argument("num_attention_heads " + std::to_string(s.heads) +
                                " is not a multiple of num_key_value_heads " + std::to_string(s.kv_heads));
  tensors = unfuse_mixtral_experts(std::move(tensors), s);
  const int64_t d = s.d_model, hd = d / s.heads;
  const int group = s.heads / s.kv_heads;  // query heads per key/value head
  std::set<std::string> used;
  auto take = [&](const std::string& name, const std::vector<int64_t>& want) -> const HfTensor& {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw std::invalid_argument("missing tensor " + name);
    if (it->second.shape != want)
      throw std::invalid_argument(name + " has shape " + shape_text(it->second.shape) + ", expected " +
                                  shape_text(want));
    used.insert(name);
    return it->second;
  };
  for (Parameter* p : params) {
    check_shape(*p);
    const Placement pl = place(*p, s);
    float* v = p->value.data();
    if (pl.as_is) {
      const HfTensor& t = take(pl.pieces[0].hf_name, p->value.shape());
      std::memcpy(v, t.values.data(), t.values.size() * sizeof(float));
      continue;
    }
    const int64_t rows = p->value.dim(0), cols = p->value.dim(1);
    for (const Placement::Piece& piece : pl.pieces) {
      const bool kv = piece.hf_name.ends_with("k_proj.weight") || piece.hf_name.ends_with("v_proj.weight");
      if (kv && group > 1) {
        // (kv_heads·hd, d) → (heads·hd, d): query head h reads key/value head h / group.
        const HfTensor& t = take(piece.hf_name, {s.kv_heads * hd, rows});
        HfTensor full;
        full.shape = {s.heads * hd, rows};
        full.values.resize(static_cast<size_t>(s.heads * hd * rows));
        for (int h = 0; h < s.heads; ++h)
          std::memcpy(full.values.data() + static_cast<size_t>(h * hd * rows),
                      t.values.data() + static_cast<size_t>((h / group) * hd * rows), hd * rows * sizeof(float));
        write_columns_transposed(full, v, rows, cols, piece.c0, piece.c1);
      } else {
        write_columns_transposed(take(piece.hf_name, {piece.c1 - piece.c0, rows}), v, rows, cols, piece.c0, piece.c1);
      }
    }
  }
  for (const auto& [name, t] : tensors) {
    if (used.count(name) || name.ends_with("rotary_emb.inv_freq")) continue;  // a buffer older files carry
    if (name == "lm_head.weight" && s.tied_embeddings) {
      // A tied model may store its head too; it must then be the embedding.
      const HfTensor& e = tensors.at("model.embed_tokens.weight");
      if (t.shape == e.shape && t.values == e.values) continue;
      throw std::invalid_argument("lm_head.weight differs from model.embed_tokens.weight but tie_word_embeddings is true");
    }
    throw std::invalid_argument("tensor " + name + " has no place in the model (" +
                                (s.tied_embeddings ? "tied" : "untied") + " embeddings, " + std::to_string(s.layers) +
                                " layers, " + std::to_string(s.experts) + " experts)");
  }
}

}  // namespace mok
