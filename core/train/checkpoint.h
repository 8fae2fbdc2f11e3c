#pragma once
// Checkpoints: one folder per checkpoint, e.g. runs/checkpoints/quickstart-r12/step_000400/
//   model.safetensors      weights, keyed by Parameter::name (F32)
//   optimizer.safetensors  AdamW moments "m.<name>", "v.<name>" (F32) and "step" (I64)
//   trainer_state.json     step, tokens seen, run id and name, seed, wall time, counters
//   config.yaml            the experiment config the run used
//   + whatever `write_extra` adds (the tokenizer)
// A checkpoint is written into a hidden temporary sibling folder, every file fsynced, and
// then renamed into place, so a process killed mid-write leaves earlier checkpoints (and an
// earlier version of the same folder) intact; readers ignore the temporary folders.
// The run folder also holds `latest` (the newest checkpoint's folder name), replaced
// atomically after each save.

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/parameter.h"

namespace mok {

class AdamW;

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainerState {
  int64_t step = 0;          // optimizer steps completed
  int64_t tokens_seen = 0;   // training tokens consumed (global)
  int64_t total_steps = 0;   // the run's planned steps
  int64_t run_id = 0;        // in the run store; 0 when none
  std::string run_name;
  uint64_t seed = 0;
  double wall_s = 0.0;       // training wall time before this checkpoint
  std::string mok_version;
  // Named integer counters (data order, RNG streams, ...) that resuming must restore.
  std::map<std::string, int64_t> counters;
};

struct CheckpointFiles {
  static constexpr const char* model = "model.safetensors";
  static constexpr const char* optimizer = "optimizer.safetensors";
  static constexpr const char* state = "trainer_state.json";
  static constexpr const char* config = "config.yaml";
  static constexpr const char* tokenizer = "tokenizer.txt";  // written by the trainer (write_extra)
  static constexpr const char* latest = "latest";
};

// Folder name of the checkpoint at `step`: "step_000400".
std::string checkpoint_folder_name(int64_t step);

// Writes the checkpoint folder `dir` atomically (creating parent folders). `optimizer` may
// be null (weights only). `write_extra(tmp_dir)` may add files before the rename. When `dir`
// is inside a run folder, `<run folder>/latest` is updated. Throws CheckpointError.
void save_checkpoint(const std::string& dir, const std::vector<Parameter*>& params,
                     const AdamW* optimizer, const TrainerState& state,
                     const std::string& config_yaml,
                     const std::function<void(const std::string& tmp_dir)>& write_extra = {});

// A checkpoint folder from a user path: either a checkpoint folder itself or a run folder
// with a `latest` file. Throws CheckpointError with a clear message otherwise.
std::string resolve_checkpoint_dir(const std::string& path);

TrainerState read_trainer_state(const std::string& dir);
std::string read_checkpoint_config(const std::string& dir);
// Loads every parameter by name (all must be present with their shapes).
void load_model_weights(const std::string& dir, const std::vector<Parameter*>& params);
// One rank of an expert-parallel run: `params` is this rank's share (dense parameters and
// its own experts) of a model with `model_tensors` parameter tensors in all; the file must
// hold exactly those.
void load_model_weights(const std::string& dir, const std::vector<Parameter*>& params, size_t model_tensors);
// Loads AdamW moments and step (parameters must match those the optimizer was built with).
void load_optimizer_state(const std::string& dir, AdamW& optimizer);

}  // namespace mok
