#include "core/interop/hf_import.h"
#include "core/util/code_version.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "core/config/config_io.h"
#include "core/data/tokenizer.h"
#include "core/interop/hf_tokenizer_json.h"
#include "core/interop/interop_model.h"
#include "core/interop/mixtral_config.h"
#include "core/interop/mixtral_layout.h"
#include "core/train/adamw.h"
#include "core/train/checkpoint.h"
#include "core/train/safetensors.h"
#include "core/util/json_reader.h"

namespace mok {

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The weight files: model.safetensors, or every shard model.safetensors.index.json names.
std::vector<fs::path> weight_files(const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors")) return {dir / "model.safetensors"};
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index))
    throw std::runtime_error(dir.string() + ": no model.safetensors or model.safetensors.index.json");
  std::set<std::string> shards;
  try {
    for (const auto& [name, file] : parse_json(slurp(index)).at("weight_map").as_object()) shards.insert(file.as_string());
  } catch (const std::exception& e) {
    throw std::runtime_error(index.string() + ": " + e.what());
  }
  std::vector<fs::path> out;
  for (const std::string& s : shards) {
    if (s.find('/') != std::string::npos || s.find("..") != std::string::npos)
      throw std::runtime_error(index.string() + ": shard '" + s + "' is not a file name in the folder");
    out.push_back(dir / s);
  }
  return out;
}

HfTensorMap read_tensors(const fs::path& dir) {
  HfTensorMap out;
  for (const fs::path& file : weight_files(dir)) {
    const SafeTensorsFile f = SafeTensorsFile::read(file.string());
    for (const auto& [name, t] : f.tensors()) {
      if (out.count(name)) throw std::runtime_error(file.string() + ": tensor " + name + " appears in two files");
      out[name] = HfTensor{t.shape, f.read_f32(name)};
    }
  }
  return out;
}

struct Planned {
  HfImportResult result;
  std::unique_ptr<Tokenizer> tokenizer;
  MixtralConfig mixtral;
};

Planned plan(const std::string& folder, const HfImportOptions& o) {
  const fs::path dir(folder);
  if (!fs::is_directory(dir)) throw std::runtime_error(folder + ": not a folder");
  Planned p;
  HfImportResult& r = p.result;
  p.mixtral = read_mixtral_config((dir / "config.json").string());
  const MixtralConfig& mc = p.mixtral;
  r.kv_heads = mc.num_key_value_heads;

  // The experiment around the model: a mok export's own config, else the defaults.
  ExperimentConfig cfg;
  const fs::path own = dir / "mok_config.yaml";
  if (fs::exists(own)) {
    cfg = parse_experiment_config(slurp(own), own.string());
  } else {
    cfg.name = fs::absolute(dir).lexically_normal().filename().string();
    if (cfg.name.empty()) cfg.name = "imported";
    cfg.data.seq_len = static_cast<int>(std::min<int64_t>(mc.max_position_embeddings, 1024));
    r.notes.push_back("no mok_config.yaml: data, train and routing settings are mok's defaults; the context is " +
                      std::to_string(cfg.data.seq_len) + " tokens");
  }
  if (!o.name.empty()) cfg.name = o.name;
  if (o.seq_len > 0) cfg.data.seq_len = o.seq_len;
  if (const std::string why = mixtral_import_problem(mc, cfg.data.seq_len); !why.empty())
    throw HfImportRefused(folder + ": mok cannot compute this model exactly: " + why);
  if (mc.num_key_value_heads < mc.num_attention_heads)
    r.notes.push_back(std::to_string(mc.num_key_value_heads) + " key/value heads repeated to one per query head (" +
                      std::to_string(mc.num_attention_heads) + "): the same attention, and fine-tuning then trains "
                      "each copy on its own");

  // The tokenizer mok will encode the fine-tuning text with.
  if (fs::exists(dir / "mok_tokenizer.txt")) {
    r.tokenizer_source = (dir / "mok_tokenizer.txt").string();
    p.tokenizer = Tokenizer::load(r.tokenizer_source);
  } else if (fs::exists(dir / "tokenizer.json")) {
    r.tokenizer_source = (dir / "tokenizer.json").string();
    try {
      p.tokenizer = tokenizer_from_hf_json(r.tokenizer_source);
    } catch (const TokenizerError& e) {
      throw HfImportRefused(e.what());
    }
    if (p.tokenizer->name() == "bpe")
      r.notes.push_back("tokenizer.json read as mok's BPE: mok cuts text into its own pieces (ws-class-1), which "
                        "matches the Split pre-tokenizer `mok export --hf` writes, not necessarily another one");
  } else {
    throw HfImportRefused(folder + ": no mok_tokenizer.txt or tokenizer.json; mok needs the model's tokenizer to train it");
  }
  if (p.tokenizer->vocab_size() != mc.vocab_size)
    throw HfImportRefused(folder + ": the tokenizer has " + std::to_string(p.tokenizer->vocab_size()) +
                          " ids but the model's vocab_size is " + std::to_string(mc.vocab_size));
  cfg.data.tokenizer = p.tokenizer->name();
  if (cfg.data.tokenizer == "bpe") cfg.data.vocab_size = p.tokenizer->vocab_size();
  cfg = experiment_from_mixtral(mc, std::move(cfg));
  // Through the YAML parser: the config a checkpoint stores must load (and be checked) as any other.
  r.config = parse_experiment_config(experiment_config_to_yaml(cfg), (dir / "config.json").string());
  r.run_dir = o.run_dir.empty() ? (fs::path("runs") / "imported" / r.config.name).string() : o.run_dir;
  r.checkpoint = (fs::path(r.run_dir) / checkpoint_folder_name(0)).string();
  return p;
}

}  // namespace

HfImportResult plan_hf_import(const std::string& folder, const HfImportOptions& o) { return plan(folder, o).result; }

HfImportResult import_hugging_face(const std::string& folder, const HfImportOptions& o) {
  Planned p = plan(folder, o);
  HfImportResult& r = p.result;
  const ExperimentConfig& cfg = r.config;
  const MixtralConfig& mc = p.mixtral;
  std::unique_ptr<LanguageModel> model = make_interop_model(cfg, p.tokenizer->vocab_size());
  const std::vector<Parameter*> params = model->parameters();
  const MixtralShape shape{mc.vocab_size,      mc.hidden_size,        mc.num_attention_heads,
                           mc.num_key_value_heads, mc.num_hidden_layers, mc.num_local_experts,
                           mc.intermediate_size, mc.tie_word_embeddings};
  try {
    parameters_from_mixtral_tensors(read_tensors(folder), shape, params);
  } catch (const std::invalid_argument& e) {
    throw HfImportRefused(folder + ": " + e.what());
  }
  r.parameters = model->parameter_count();

  // A fresh optimizer (zero moments, step 0): fine-tuning starts its own schedule.
  AdamW adam(params, AdamWOptions{cfg.train.beta1, cfg.train.beta2, cfg.train.eps, cfg.train.weight_decay});
  TrainerState st;
  st.step = 0;
  st.total_steps = cfg.train.steps;
  st.run_name = cfg.name;
  st.seed = cfg.seed;
  st.mok_version = mok::code_version();
  st.counters["data.next_step"] = 0;
  const Tokenizer& tok = *p.tokenizer;
  save_checkpoint(r.checkpoint, params, &adam, st, experiment_config_to_yaml(cfg), [&](const std::string& tmp) {
    tok.save((fs::path(tmp) / CheckpointFiles::tokenizer).string());
  });
  return r;
}

}  // namespace mok
