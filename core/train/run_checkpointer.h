#pragma once
// RunCheckpointer: writes the checkpoints of one run into its run folder,
// <run folder>/step_000400/ (format: checkpoint.h): the weights and AdamW moments of the
// whole model, the trainer state at that step, the run's config text and its tokenizer.
// Collective when R > 1: every rank sends its experts to rank 0 (gathered_model.h), which
// writes the same full checkpoint R = 1 would; the other ranks only send.

#include <cstdint>
#include <string>

#include "core/config/experiment_config.h"
#include "core/data/tokenizer.h"
#include "core/train/rank_context.h"

namespace mok {

struct RankModel;

class RunCheckpointer {
 public:
  // `tokenizer` must outlive the checkpointer. `run_id`: the run in the store (0: none).
  RunCheckpointer(const ExperimentConfig& config, std::string run_dir, std::string config_yaml, int64_t run_id,
                  const Tokenizer& tokenizer);

  // The checkpoint after `step` completed steps and `tokens_seen` tokens, `wall_s` seconds
  // of run wall time. Returns its folder on rank 0, "" on the other ranks. Throws
  // CheckpointError when it cannot be written (earlier checkpoints stay intact).
  std::string write(RankContext& rc, RankModel& m, int64_t step, int64_t tokens_seen, double wall_s);

  const std::string& run_dir() const { return run_dir_; }

 private:
  const ExperimentConfig& cfg_;
  std::string run_dir_;
  std::string config_yaml_;
  int64_t run_id_;
  const Tokenizer& tokenizer_;
};

}  // namespace mok
