#pragma once
// Import of a Hugging Face Mixtral folder as a mok checkpoint that `mok train --resume`
// fine-tunes and `mok generate` samples from:
//
//   RUN_DIR/step_000000/   model.safetensors, optimizer.safetensors (zero moments, step 0),
//                          config.yaml, tokenizer.txt, trainer_state.json (step 0)
//   RUN_DIR/latest
//
// The experiment config is the folder's mok_config.yaml when it has one (a mok export),
// else mok's defaults; the model keys always come from config.json. The tokenizer is
// mok_tokenizer.txt, else a tokenizer.json in mok's byte-level layout
// (core/interop/hf_tokenizer_json.h). Weights: model.safetensors or the shards of
// model.safetensors.index.json, in F32, BF16 or F16 (widened to float), with per-expert
// (Transformers 4) or fused (Transformers 5) expert tensors; grouped key/value heads are
// repeated to one per query head (core/interop/mixtral_layout.h).

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"

namespace mok {

class HfImportRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HfImportOptions {
  std::string run_dir;  // "" → runs/imported/<name>
  std::string name;     // "" → mok_config.yaml's name, else the folder's name
  int seq_len = 0;      // context; 0 → mok_config.yaml's, else max_position_embeddings (at most 1024)
};

struct HfImportResult {
  std::string run_dir;
  std::string checkpoint;        // RUN_DIR/step_000000
  ExperimentConfig config;       // as written into the checkpoint
  int64_t parameters = 0;
  std::string tokenizer_source;  // the file the tokenizer came from
  int kv_heads = 0;              // num_key_value_heads of the source (repeated when < heads)
  std::vector<std::string> notes;
};

// The model in `folder` as the config it would import as, without writing anything (for
// checks and --dry-run). Throws HfImportRefused (a model mok cannot compute exactly, or no
// usable tokenizer) or std::runtime_error (unreadable files).
HfImportResult plan_hf_import(const std::string& folder, const HfImportOptions& options);

// Reads `folder` and writes the checkpoint (replacing a step_000000 of the same run folder).
HfImportResult import_hugging_face(const std::string& folder, const HfImportOptions& options);

}  // namespace mok
