#include "core/interop/hf_export.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/config/config_io.h"
#include "core/data/tokenizer.h"
#include "core/interop/hf_export_readme.h"
#include "core/interop/hf_reference.h"
#include "core/interop/hf_tokenizer_json.h"
#include "core/interop/interop_model.h"
#include "core/interop/mixtral_compat.h"
#include "core/interop/mixtral_config.h"
#include "core/interop/mixtral_layout.h"
#include "core/train/checkpoint.h"
#include "core/train/safetensors.h"
#include "core/train/text_generator.h"
#include "core/util/half_float.h"
#include "core/util/json_writer.h"
#include "core/util/replace_file.h"

namespace mok {

namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error(path.string() + ": cannot write");
  }
  // On the disk before the rename makes it the target (write_safetensors syncs its own).
  if (!sync_file(path.string())) throw std::runtime_error(path.string() + ": cannot write: " + std::strerror(errno));
}

// The export's files, each written first to a hidden temporary beside its target
// (replace_file_temporary's name), then renamed over the targets one after another once every
// one is written: a failure or a kill while writing (the weights take the time) leaves an
// earlier export in the folder whole. Temporaries not committed are removed.
class StagedFiles {
 public:
  explicit StagedFiles(fs::path dir) : dir_(std::move(dir)) {}
  ~StagedFiles() {
    std::error_code ec;
    for (const auto& f : files_) fs::remove(f.first, ec);
  }
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;

  // The temporary to write `name` (a file of the folder) to.
  std::string temporary(const std::string& name) {
    const fs::path target = dir_ / name;
    files_.emplace_back(replace_file_temporary(target.string()), target);
    return files_.back().first.string();
  }
  void commit() {
    for (const auto& [tmp, target] : files_) fs::rename(tmp, target);
    files_.clear();
  }

 private:
  fs::path dir_;
  std::vector<std::pair<fs::path, fs::path>> files_;  // temporary, target
};

// The tensors as safetensors views: F32 borrowed, BF16 converted into owned buffers.
std::vector<SafeTensorView> safe_views(const HfTensorMap& tensors, bool bf16) {
  std::vector<SafeTensorView> views;
  for (const auto& [name, t] : tensors) {
    if (!bf16) {
      views.push_back({name, SafeDType::f32, t.shape, t.values.data(), nullptr});
      continue;
    }
    auto bytes = std::make_shared<std::vector<uint8_t>>(t.values.size() * 2);
    for (size_t i = 0; i < t.values.size(); ++i) {
      const uint16_t h = float_to_bf16(t.values[i]);
      std::memcpy(bytes->data() + 2 * i, &h, 2);
    }
    views.push_back({name, SafeDType::bf16, t.shape, bytes->data(), bytes});
  }
  return views;
}

std::string tokenizer_config_json(int model_max_length) {
  JsonWriter j;
  j.begin_object();
  j.key("tokenizer_class").value("PreTrainedTokenizerFast");
  j.key("model_max_length").value(model_max_length);
  j.key("clean_up_tokenization_spaces").value(false);
  j.key("add_bos_token").value(false);
  j.key("add_eos_token").value(false);
  j.end_object();
  return j.str() + "\n";
}

}  // namespace

HfExportResult export_hugging_face(const std::string& checkpoint, const std::string& folder,
                                   const HfExportOptions& o) {
  if (o.dtype != "float32" && o.dtype != "bfloat16")
    throw std::invalid_argument("dtype '" + o.dtype + "': use float32 or bfloat16");
  HfExportResult r;
  r.folder = folder;
  r.checkpoint = resolve_checkpoint_dir(checkpoint);
  const std::string config_path = (fs::path(r.checkpoint) / CheckpointFiles::config).string();
  const ExperimentConfig cfg = parse_experiment_config(read_checkpoint_config(r.checkpoint), config_path);

  // Everything that can refuse runs before anything is written.
  if (const std::vector<std::string> problems = mixtral_export_problems(cfg); !problems.empty()) {
    std::string why = r.checkpoint + ": this model has no exact Mixtral form:";
    for (const std::string& p : problems) why += "\n  - " + p;
    throw HfExportRefused(why);
  }
  r.notes = mixtral_export_notes(cfg);
  const fs::path tok_path = fs::path(r.checkpoint) / CheckpointFiles::tokenizer;
  if (!fs::exists(tok_path)) throw CheckpointError(r.checkpoint + ": no tokenizer.txt in the checkpoint");
  verify_checkpoint_file(r.checkpoint, CheckpointFiles::tokenizer);
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(tok_path.string());
  const int vocab = tokenizer->vocab_size();

  std::unique_ptr<LanguageModel> model = make_interop_model(cfg, vocab);
  const std::vector<Parameter*> params = model->parameters();
  load_model_weights(r.checkpoint, params);
  r.parameters = model->parameter_count();
  const ModelConfig& m = cfg.model;
  MixtralShape shape{vocab, m.d_model, m.heads, m.heads, m.layers, m.experts, m.expert_hidden, m.tie_embeddings};
  const HfTensorMap tensors = mixtral_tensors_from_parameters(params, shape);
  const std::string tokenizer_json = mok_tokenizer_json(*tokenizer, &r.tokenizer_note);
  r.tokenizer_json = !tokenizer_json.empty();

  // The reference: logits of a text and of random ids, and mok generate's greedy path.
  const int context = cfg.data.seq_len;
  const std::string sample =
      "The Fulton County Grand Jury said Friday an investigation of recent primary elections produced no "
      "evidence that any irregularities took place. 1961: 42 votes, \"well\" done!\n";
  std::vector<ReferenceSequence> sequences;
  std::vector<int32_t> text_ids = tokenizer->encode(sample);
  text_ids.resize(std::min<size_t>(text_ids.size(), static_cast<size_t>(context)));
  sequences.push_back(reference_sequence(*model, "text", text_ids));
  sequences.push_back(
      reference_sequence(*model, "random", random_tokens(std::min(o.random_tokens, context), vocab, cfg.seed)));
  model.reset();
  ReferenceGreedy greedy;
  greedy.prompt = o.prompt;
  {
    TextGenerator gen(r.checkpoint);
    GenerateOptions go;
    go.sampling.temperature = 0.0;
    const int prompt_len = static_cast<int>(tokenizer->encode(o.prompt).size());
    go.max_new_tokens = std::max(0, std::min(o.greedy_tokens, context - std::max(1, prompt_len)));  // no refill
    const GenerateResult g = gen.generate(o.prompt, go);
    greedy.prompt_tokens.assign(g.tokens.begin(), g.tokens.begin() + g.prompt_tokens);
    greedy.new_tokens.assign(g.tokens.begin() + g.prompt_tokens, g.tokens.end());
  }

  const fs::path dir(folder);
  try {
    fs::create_directories(dir);
    StagedFiles staged(dir);
    write_safetensors(staged.temporary("model.safetensors"), safe_views(tensors, o.dtype == "bfloat16"),
                      {{"format", "pt"}});
    r.files.push_back("model.safetensors");
    write_text(staged.temporary("config.json"), mixtral_config_json(cfg, vocab, o.dtype));
    r.files.push_back("config.json");
    if (r.tokenizer_json) {
      write_text(staged.temporary("tokenizer.json"), tokenizer_json);
      write_text(staged.temporary("tokenizer_config.json"), tokenizer_config_json(context));
      r.files.push_back("tokenizer.json");
      r.files.push_back("tokenizer_config.json");
    }
    write_text(staged.temporary("mok_tokenizer.txt"), tokenizer->to_text());
    r.files.push_back("mok_tokenizer.txt");
    write_text(staged.temporary("mok_config.yaml"), experiment_config_to_yaml(cfg));
    r.files.push_back("mok_config.yaml");
    write_reference_file(staged.temporary("mok_reference.json"), sequences, greedy, sample, tokenizer->encode(sample));
    r.files.push_back("mok_reference.json");
    write_text(staged.temporary("README.md"), hf_export_readme(cfg, r, vocab, tokenizer->name(), o.dtype));
    r.files.push_back("README.md");
    staged.commit();
  } catch (const std::exception& e) {
    throw HfExportWriteError(e.what());
  }
  if (!r.tokenizer_json) {
    std::error_code ec;  // a stale one from an earlier export would describe another tokenizer
    fs::remove(dir / "tokenizer.json", ec);
    fs::remove(dir / "tokenizer_config.json", ec);
  }
  return r;
}

}  // namespace mok
