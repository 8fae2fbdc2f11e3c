#include "core/train/text_generator.h"

#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "core/config/config_io.h"
#include "core/data/tokenizer.h"
#include "core/model/inference_session.h"
#include "core/model/init.h"
#include "core/model/language_model.h"
#include "core/train/checkpoint.h"
#include "core/util/counter_rng.h"

namespace mok {

namespace fs = std::filesystem;

TextGenerator::TextGenerator(const std::string& checkpoint_dir) {
  dir_ = resolve_checkpoint_dir(checkpoint_dir);
  config_ = parse_experiment_config(read_checkpoint_config(dir_), (fs::path(dir_) / CheckpointFiles::config).string());
  const fs::path tok = fs::path(dir_) / CheckpointFiles::tokenizer;
  if (!fs::exists(tok)) throw CheckpointError(dir_ + ": no tokenizer.txt in the checkpoint");
  verify_checkpoint_file(dir_, CheckpointFiles::tokenizer);
  tokenizer_ = Tokenizer::load(tok.string());
  ModelOptions mo;
  mo.model = config_.model;
  mo.kittens = config_.kittens;
  mo.routing = config_.routing;
  mo.vocab_size = tokenizer_->vocab_size();
  mo.max_seq_len = config_.data.seq_len;
  mo.seed = config_.seed;
  {
    const ForwardOnlyParameters forward_only;  // generation needs no gradients
    model_ = std::make_unique<LanguageModel>(mo);
  }
  load_model_weights(dir_, model_->parameters());
}

TextGenerator::~TextGenerator() = default;

GenerateResult TextGenerator::generate(const std::string& prompt, const GenerateOptions& o,
                                       const std::function<void(const std::string&)>& on_token) {
  if (o.max_new_tokens < 0) throw std::invalid_argument("generate: max_new_tokens must be >= 0");
  const int context = config_.data.seq_len;
  GenerateResult r;
  r.tokens = tokenizer_->encode(prompt);
  if (r.tokens.empty()) r.tokens.push_back(tokenizer_->encode("\n").front());  // something to start from
  r.prompt_tokens = static_cast<int>(r.tokens.size());
  CounterRng rng(o.seed, /*stream=*/0x67656e);

  InferenceSession session(*model_, context);
  // Restarts the cache from the last `keep` tokens; returns the next-token logits.
  auto refill = [&](int keep) {
    session.reset();
    return session.prefill(std::vector<int32_t>(r.tokens.end() - keep, r.tokens.end()));
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<real> logits = refill(std::min<int>(static_cast<int>(r.tokens.size()), context));
  for (int i = 0; i < o.max_new_tokens; ++i) {
    const int32_t next = sample_token(logits, o.sampling, rng);
    r.tokens.push_back(next);
    ++r.new_tokens;
    if (on_token) on_token(tokenizer_->token_bytes(next));
    if (i + 1 == o.max_new_tokens) break;
    logits = session.position() >= session.max_len() ? refill(std::max(1, context / 2))
                                                       : session.decode(next);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.tokens_per_s = s > 0 ? r.new_tokens / s : 0.0;
  r.text = tokenizer_->decode(r.tokens);
  return r;
}

}  // namespace mok
