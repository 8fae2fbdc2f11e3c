#pragma once
// TextGenerator: a model and tokenizer loaded from a checkpoint folder, sampling text with
// the model's InferenceSession (KV cache). When the sequence outgrows the model's
// context (data.seq_len), the cache is rebuilt from the last half-context of tokens.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/real.h"
#include "core/train/sampling.h"

MOK_NN_BEGIN
class LanguageModel;
MOK_NN_END

namespace mok {

class Tokenizer;

struct GenerateOptions {
  int max_new_tokens = 200;
  SamplingOptions sampling;
  uint64_t seed = 0;
};

struct GenerateResult {
  std::string text;               // prompt + continuation (decoded)
  std::vector<int32_t> tokens;    // prompt tokens + new tokens
  int prompt_tokens = 0;
  int new_tokens = 0;
  double tokens_per_s = 0.0;      // new tokens per second of sampling
};

class TextGenerator {
 public:
  // Loads config.yaml, the tokenizer and model.safetensors of `checkpoint_dir` (a checkpoint
  // or run folder). Throws (CheckpointError, SafeTensorsError, ...) with a clear message.
  explicit TextGenerator(const std::string& checkpoint_dir);
  ~TextGenerator();

  // on_token(text piece) is called as tokens are produced (may be empty).
  GenerateResult generate(const std::string& prompt, const GenerateOptions& options,
                          const std::function<void(const std::string&)>& on_token = {});

  const ExperimentConfig& config() const { return config_; }
  const std::string& checkpoint_dir() const { return dir_; }

 private:
  std::string dir_;
  ExperimentConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<LanguageModel> model_;
};

}  // namespace mok
