#pragma once
// What a resume does, decided before anything is written (docs/training.md, "Resume"):
//
//   continue  the same run goes on: same run in the store, same run folder (a changed
//             logging.checkpoint_dir gives it a new folder there; the old one is left as it
//             is). Only settings without effect on the results, or train.steps, may change.
//             Refused when the run already has checkpoints after the resumed step, unless
//             `overwrite_later`: those are then removed just before the first new
//             checkpoint is published.
//   branch    a new run that starts from the checkpoint: a new run in the store (its events
//             and every checkpoint's trainer state name the original run and step) and its
//             own folder, beside the original's (or under a changed logging.checkpoint_dir).
//             Taken when a setting that changes the results differs (train.lr, seed, ranks,
//             …), when the name differs, when the store does not hold the original run, or
//             when asked (`branch`). The original's folder is never written.
//
// Refusals throw ResumeRefused with a message that says what to do instead.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/train/checkpoint.h"
#include "core/train/config_changes.h"

namespace mok {

class RunStore;
struct TrainerOptions;

class ResumeRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ResumePlan {
  std::string checkpoint_dir;   // the checkpoint resumed from (absolute)
  TrainerState state;           // its trainer state
  std::vector<SettingChange> changes;  // config now vs the checkpoint's

  bool branch = false;
  std::string why_branch;       // one line: what made it a branch ("" when continuing)
  int64_t continue_run_id = 0;  // continue: the run in the store (0: none)
  // Where the checkpoints go: continue into the original folder → that folder; otherwise
  // "" and `checkpoint_root` holds the root under which the trainer makes a new run folder.
  std::string run_dir;
  std::string checkpoint_root;
  std::vector<std::string> superseded;  // overwrite_later: later checkpoints to remove

  // The original's folder (the resumed checkpoint's parent).
  std::string original_run_dir() const;
};

// What every rank checks of a checkpoint before resuming from it: a step within the run's
// plan and equal to the one its weights were saved at, and a tokenizer (verified). Throws
// CheckpointError (or SafeTensorsError for an unreadable weights header).
void check_resumable(const std::string& checkpoint_dir, const TrainerState& state);

// Plans resuming options.resume_path with `config`. `store`: options.db_path opened (null
// when there is no db_path, or its file does not exist yet and so holds no run). A run
// that writes no checkpoints (options.write_checkpoints false) cannot overwrite later ones
// and is never refused for them. Reads only. Throws CheckpointError (no checkpoint there,
// or a damaged one) or ResumeRefused.
ResumePlan plan_resume(const ExperimentConfig& config, const TrainerOptions& options, RunStore* store);

}  // namespace mok
