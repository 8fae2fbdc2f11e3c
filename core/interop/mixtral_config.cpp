#include "core/interop/mixtral_config.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/util/json_reader.h"
#include "core/util/json_writer.h"

namespace mok {

std::string mixtral_config_json(const ExperimentConfig& c, int vocab_size, const std::string& torch_dtype) {
  const ModelConfig& m = c.model;
  JsonWriter j;
  j.begin_object();
  j.key("architectures").begin_array().value("MixtralForCausalLM").end_array();
  j.key("model_type").value("mixtral");
  j.key("vocab_size").value(vocab_size);
  j.key("hidden_size").value(m.d_model);
  j.key("intermediate_size").value(m.expert_hidden);
  j.key("num_hidden_layers").value(m.layers);
  j.key("num_attention_heads").value(m.heads);
  j.key("num_key_value_heads").value(m.heads);
  j.key("head_dim").value(m.d_model / m.heads);
  j.key("hidden_act").value("silu");
  j.key("max_position_embeddings").value(c.data.seq_len);
  j.key("rms_norm_eps").float_value(m.norm_eps);
  j.key("rope_theta").float_value(m.rope_theta);
  j.key("rope_parameters").begin_object();
  j.key("rope_type").value("default");
  j.key("rope_theta").float_value(m.rope_theta);
  j.end_object();
  j.key("tie_word_embeddings").value(m.tie_embeddings);
  j.key("num_local_experts").value(m.experts);
  j.key("num_experts_per_tok").value(m.top_k);
  j.key("router_aux_loss_coef").float_value(m.aux_loss_coef);
  j.key("router_jitter_noise").float_value(0.0);
  j.key("output_router_logits").value(false);
  j.key("sliding_window").null();
  j.key("attention_dropout").float_value(0.0);
  j.key("initializer_range").float_value(m.init_std);
  j.key("use_cache").value(true);
  j.key("bos_token_id").null();
  j.key("eos_token_id").null();
  j.key("pad_token_id").null();
  j.key("torch_dtype").value(torch_dtype);
  j.key("dtype").value(torch_dtype);
  j.end_object();
  return j.str() + "\n";
}

namespace {

const JsonValue* member(const JsonValue& root, const char* key) {
  const JsonValue* v = root.find(key);
  return v && !v->is_null() ? v : nullptr;
}

}  // namespace

MixtralConfig read_mixtral_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  JsonValue root;
  try {
    root = parse_json(ss.str());
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not JSON: " + e.what());
  }
  if (!root.is_object()) throw std::runtime_error(path + ": not a JSON object");
  MixtralConfig c;
  const char* key = "";
  try {
    auto integer = [&](const char* k, int64_t fallback, bool required) -> int64_t {
      key = k;
      if (const JsonValue* v = member(root, k)) return v->as_int64();
      if (required) throw std::runtime_error("missing");
      return fallback;
    };
    auto number = [&](const char* k, double fallback) -> double {
      key = k;
      const JsonValue* v = member(root, k);
      return v ? v->as_double() : fallback;
    };
    auto flag = [&](const char* k, bool fallback) -> bool {
      key = k;
      const JsonValue* v = member(root, k);
      return v ? v->as_bool() : fallback;
    };
    key = "model_type";
    c.model_type = root.at("model_type").as_string();
    if (c.model_type != "mixtral")
      throw std::runtime_error("is '" + c.model_type + "'; mok reads Mixtral models (model_type \"mixtral\")");
    c.vocab_size = integer("vocab_size", 0, true);
    c.hidden_size = integer("hidden_size", 0, true);
    c.intermediate_size = integer("intermediate_size", 0, true);
    c.num_hidden_layers = static_cast<int>(integer("num_hidden_layers", 0, true));
    c.num_attention_heads = static_cast<int>(integer("num_attention_heads", 0, true));
    c.num_key_value_heads = static_cast<int>(integer("num_key_value_heads", c.num_attention_heads, false));
    c.head_dim = integer("head_dim", 0, false);
    c.num_local_experts = static_cast<int>(integer("num_local_experts", 0, true));
    c.num_experts_per_tok = static_cast<int>(integer("num_experts_per_tok", 0, true));
    c.max_position_embeddings = integer("max_position_embeddings", 4096, false);
    c.sliding_window = integer("sliding_window", 0, false);
    key = "hidden_act";
    if (const JsonValue* v = member(root, "hidden_act")) c.hidden_act = v->as_string();
    c.rms_norm_eps = number("rms_norm_eps", c.rms_norm_eps);
    c.rope_theta = number("rope_theta", c.rope_theta);
    key = "rope_parameters";
    if (const JsonValue* rp = member(root, "rope_parameters")) {
      if (const JsonValue* t = member(*rp, "rope_theta")) c.rope_theta = t->as_double();
      if (const JsonValue* t = member(*rp, "rope_type")) c.rope_type = t->as_string();
    }
    key = "rope_scaling";
    if (const JsonValue* rs = member(root, "rope_scaling")) {
      const JsonValue* t = member(*rs, "rope_type");
      if (!t) t = member(*rs, "type");
      c.rope_type = t ? t->as_string() : "unknown";
    }
    c.tie_word_embeddings = flag("tie_word_embeddings", false);
    c.attention_bias = flag("attention_bias", false);
    c.initializer_range = number("initializer_range", c.initializer_range);
    c.router_aux_loss_coef = number("router_aux_loss_coef", c.router_aux_loss_coef);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + key + ": " + e.what());
  }
  return c;
}

std::string mixtral_import_problem(const MixtralConfig& c, int seq_len) {
  if (c.hidden_size < 1 || c.num_attention_heads < 1 || c.hidden_size % c.num_attention_heads)
    return "hidden_size " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads " +
           std::to_string(c.num_attention_heads);
  if (c.head_dim != 0 && c.head_dim != c.hidden_size / c.num_attention_heads)
    return "head_dim " + std::to_string(c.head_dim) + " differs from hidden_size / num_attention_heads = " +
           std::to_string(c.hidden_size / c.num_attention_heads) + "; mok's heads split d_model";
  if (c.num_key_value_heads < 1 || c.num_attention_heads % c.num_key_value_heads)
    return "num_attention_heads is not a multiple of num_key_value_heads";
  if (c.hidden_act != "silu") return "hidden_act '" + c.hidden_act + "'; mok's experts are SwiGLU (silu)";
  if (c.rope_type != "default") return "RoPE type '" + c.rope_type + "' scales positions; mok's RoPE is the plain one";
  if (c.attention_bias) return "attention_bias: mok's projections have no bias";
  if (c.sliding_window > 0 && c.sliding_window < seq_len)
    return "sliding_window " + std::to_string(c.sliding_window) + " is shorter than the context of " +
           std::to_string(seq_len) + " tokens; mok attends over the whole context (choose --seq-len ≤ the window)";
  if (c.num_local_experts < 1 || c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_local_experts)
    return "num_experts_per_tok must be in [1, num_local_experts]";
  if (c.vocab_size < 2 || c.intermediate_size < 1 || c.num_hidden_layers < 1) return "empty model dimensions";
  return "";
}

ExperimentConfig experiment_from_mixtral(const MixtralConfig& c, ExperimentConfig base) {
  ModelConfig& m = base.model;
  m.layers = c.num_hidden_layers;
  m.d_model = static_cast<int>(c.hidden_size);
  m.heads = c.num_attention_heads;
  m.experts = c.num_local_experts;
  m.top_k = c.num_experts_per_tok;
  m.expert_hidden = static_cast<int>(c.intermediate_size);
  m.moe_layers = "all";
  m.shared_expert = false;
  m.tie_embeddings = c.tie_word_embeddings;
  m.rope_theta = c.rope_theta;
  m.norm_eps = c.rms_norm_eps;
  m.init_std = c.initializer_range;
  m.aux_loss_coef = c.router_aux_loss_coef;
  base.routing.capacity_factor = 0.0;
  return base;
}

}  // namespace mok
