#pragma once
// config.json of a Transformers MixtralForCausalLM folder: written from a mok experiment
// config, and read back (from mok's folders or any Mixtral-format model).
//
// Written keys (docs/interop.md has the mapping): architectures, model_type "mixtral",
// vocab_size, hidden_size = d_model, intermediate_size = expert_hidden, num_hidden_layers,
// num_attention_heads = num_key_value_heads = heads, head_dim = d_model/heads, hidden_act
// "silu", max_position_embeddings = data.seq_len, rms_norm_eps = norm_eps, rope_theta (and
// rope_parameters, the Transformers 5 form), tie_word_embeddings, num_local_experts,
// num_experts_per_tok = top_k, router_aux_loss_coef = aux_loss_coef, router_jitter_noise 0,
// sliding_window null, attention_dropout 0, initializer_range = init_std, no BOS/EOS/PAD ids
// (mok's tokenizers have none), torch_dtype / dtype.

#include <cstdint>
#include <string>

#include "core/config/experiment_config.h"

namespace mok {

// The fields of a Mixtral config.json that decide what the model computes.
struct MixtralConfig {
  std::string model_type;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads
  int num_local_experts = 0;
  int num_experts_per_tok = 0;
  std::string hidden_act = "silu";
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 1e6;
  std::string rope_type = "default";  // anything else scales positions: not mok's RoPE
  int64_t sliding_window = 0;         // 0: none
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  double initializer_range = 0.02;
  double router_aux_loss_coef = 0.001;
};

// config.json text for `config` with a vocabulary of `vocab_size` ids; torch_dtype is
// "float32" or "bfloat16".
std::string mixtral_config_json(const ExperimentConfig& config, int vocab_size, const std::string& torch_dtype);

// Reads a config.json. Throws std::runtime_error naming the file and the key on a missing
// or mistyped field; model_type must be "mixtral".
MixtralConfig read_mixtral_config(const std::string& path);

// Why mok cannot compute this model exactly ("" when it can): head_dim other than
// hidden/heads, attention biases, position scaling, an activation other than silu, a
// sliding window shorter than `seq_len`.
std::string mixtral_import_problem(const MixtralConfig& config, int seq_len);

// `base` with the model keys set from `config` (every layer MoE, no shared expert, dropless
// routing). Key/value heads are expanded to one per query head (docs/interop.md).
ExperimentConfig experiment_from_mixtral(const MixtralConfig& config, ExperimentConfig base);

}  // namespace mok
