#pragma once
// RunCheckpointer: writes the checkpoints of one run into its run folder,
// <run folder>/step_000400/ (format: checkpoint.h): the weights and AdamW moments of the
// whole model, the trainer state at that step, the run's config text and its tokenizer.
// Collective when R > 1: every rank sends its experts to rank 0 (gathered_model.h), which
// writes the same full checkpoint R = 1 would; the other ranks only send.
//
// Order on rank 0, so that a process killed at any moment leaves a consistent pair of
// store and folder (the newest checkpoint folder is always one the store has recorded):
//   1. stage: every file written and fsynced in a hidden temporary folder;
//   2. (first checkpoint of a rewound run only) remove the superseded later checkpoints;
//   3. before_publish(step, dir): the trainer records the metrics so far and the checkpoint
//      row in the run store, in one transaction;
//   4. publish: rename into place, then `latest`.
// A run never replaces an existing checkpoint folder (CheckpointError instead).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/data/tokenizer.h"
#include "core/train/checkpoint.h"
#include "core/train/rank_context.h"

namespace mok {

struct RankModel;

class RunCheckpointer {
 public:
  struct Identity {
    int64_t run_id = 0;          // in the store (0: none)
    BranchOrigin branched_from;  // where the run branched off (run_id 0: not a branch)
  };
  // `tokenizer` must outlive the checkpointer. `superseded`: checkpoint folders of a history
  // the run was rewound past, removed just before its first checkpoint is published.
  RunCheckpointer(const ExperimentConfig& config, std::string run_dir, std::string config_yaml, Identity identity,
                  const Tokenizer& tokenizer, std::vector<std::string> superseded = {});

  using BeforePublish = std::function<void(int64_t step, const std::string& dir)>;

  // The checkpoint after `step` completed steps and `tokens_seen` tokens, `wall_s` seconds
  // of run wall time. Returns its folder (absolute) on rank 0, "" on the other ranks.
  // Throws CheckpointError when it cannot be written (earlier checkpoints stay intact).
  std::string write(RankContext& rc, RankModel& m, int64_t step, int64_t tokens_seen, double wall_s,
                    const BeforePublish& before_publish = {});

  const std::string& run_dir() const { return run_dir_; }

 private:
  const ExperimentConfig& cfg_;
  std::string run_dir_;
  std::string config_yaml_;
  Identity identity_;
  const Tokenizer& tokenizer_;
  std::vector<std::string> superseded_;
};

}  // namespace mok
