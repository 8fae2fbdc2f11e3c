#pragma once
// Checkpoints: one folder per checkpoint, e.g. runs/checkpoints/quickstart-r12/step_000400/
//   model.safetensors      weights, keyed by Parameter::name (F32)
//   optimizer.safetensors  AdamW moments "m.<name>", "v.<name>" (F32) and "step" (I64)
//   config.yaml            the experiment config the run used
//   + whatever `write_extra` adds (the trainer: tokenizer.txt)
//   trainer_state.json     step, tokens seen, run id and name, seed, wall time, counters,
//                          the branch origin, and the size and CRC-32C of every file above
// A checkpoint is written into a hidden temporary sibling folder (.step_000400.tmp-PID),
// every file fsynced, and then renamed into place, so a process killed mid-write leaves
// earlier checkpoints (and an earlier version of the same folder) intact; readers ignore
// the temporary folders, and the next save into the run folder removes those of processes
// that are gone. The rename is the moment a checkpoint exists: the newest `step_N` folder
// of a run folder is its newest checkpoint. `latest` (that folder's name) is rewritten
// after each save for people and scripts.
//
// Loading verifies each file against the size and checksum in trainer_state.json (format
// mok-checkpoint-2; format 1 folders have none and load unverified).

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model/parameter.h"
#include "core/train/file_checksum.h"

namespace mok {

class AdamW;

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where a branched run came from (run_id 0: not a branch).
struct BranchOrigin {
  int64_t run_id = 0;      // the original run in its store
  int64_t step = 0;        // the original's step the branch started from
  std::string checkpoint;  // the checkpoint folder it resumed
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
  BranchOrigin branched_from;
  // Size and checksum of every other file of the checkpoint, by file name. Filled by
  // save_checkpoint; empty when read from a format 1 checkpoint.
  std::map<std::string, FileDigest> files;
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

// A checkpoint written to its temporary folder and not yet visible (stage_checkpoint).
struct StagedCheckpoint {
  std::string dir;      // where publish_checkpoint puts it
  std::string tmp_dir;  // where it is now
};

// Writes the checkpoint folder `dir` atomically (creating parent folders). `optimizer` may
// be null (weights only). `write_extra(tmp_dir)` may add files before the rename. When `dir`
// is inside a run folder, `<run folder>/latest` is updated. Throws CheckpointError.
// = stage_checkpoint + publish_checkpoint.
void save_checkpoint(const std::string& dir, const std::vector<Parameter*>& params,
                     const AdamW* optimizer, const TrainerState& state,
                     const std::string& config_yaml,
                     const std::function<void(const std::string& tmp_dir)>& write_extra = {});

// The two halves of save_checkpoint, for callers that record the checkpoint elsewhere (the
// run store) after its files are safe on disk and before it becomes visible. Staging
// removes the stale temporary folders of the run folder first (clean_stale_checkpoint_temps).
StagedCheckpoint stage_checkpoint(const std::string& dir, const std::vector<Parameter*>& params,
                                  const AdamW* optimizer, const TrainerState& state, const std::string& config_yaml,
                                  const std::function<void(const std::string& tmp_dir)>& write_extra = {});
// Renames the staged folder into place (an existing folder of that name is replaced) and
// updates `latest`. Throws CheckpointError; the staged folder is then removed.
void publish_checkpoint(const StagedCheckpoint& staged);
// Removes a staged checkpoint that will not be published (never throws).
void discard_checkpoint(const StagedCheckpoint& staged) noexcept;

// Removes a checkpoint folder so that no partial folder is ever visible: it is renamed to a
// hidden ".…del-PID" name first (which the cleaner removes should this process die).
void remove_checkpoint(const std::string& dir);

// In `run_dir`: removes temporary checkpoint folders and files of processes that are gone
// (".X.tmp-PID", ".X.del-PID") and restores a checkpoint moved aside (".X.old-PID") by a
// replacing save that died before the new folder took its place. Returns what it did, one
// line per entry; never throws.
std::vector<std::string> clean_stale_checkpoint_temps(const std::string& run_dir);

// The complete checkpoints of a run folder (folders step_N holding a trainer state), by step.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& run_dir);

// A checkpoint folder from a user path: either a checkpoint folder itself or a run folder
// (its newest checkpoint). Throws CheckpointError with a clear message otherwise.
std::string resolve_checkpoint_dir(const std::string& path);

// Reads and checks trainer_state.json (fields present, step and tokens not negative, the
// data counter equal to the step). Throws CheckpointError naming the file.
TrainerState read_trainer_state(const std::string& dir);
// The same checks on the file's text; `file` names it in errors.
TrainerState parse_trainer_state(std::string_view text, const std::string& file);
std::string read_checkpoint_config(const std::string& dir);
// Checks `file` of the checkpoint against the size and checksum its trainer state records;
// throws CheckpointError when it is missing, not listed (format 2) or different.
void verify_checkpoint_file(const std::string& dir, const std::string& file);
// Every file the trainer state lists, checked as verify_checkpoint_file does (reads them
// all once). Format 1 checkpoints: only that the weights are there.
void verify_checkpoint(const std::string& dir);
// Loads every parameter by name (all must be present with their shapes). Verifies the file.
void load_model_weights(const std::string& dir, const std::vector<Parameter*>& params);
// One rank of an expert-parallel run: `params` is this rank's share (dense parameters and
// its own experts) of a model with `model_tensors` parameter tensors in all; the file must
// hold exactly those.
void load_model_weights(const std::string& dir, const std::vector<Parameter*>& params, size_t model_tensors);
// Loads AdamW moments and step (parameters must match those the optimizer was built with).
// Verifies the file.
void load_optimizer_state(const std::string& dir, AdamW& optimizer);

}  // namespace mok
