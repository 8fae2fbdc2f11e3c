#pragma once
// RankModel: one rank's model, its expert-parallel dispatchers and its optimizer — what the
// steps, the evaluation and the checkpoints of a run work on.
//
// With R > 1 ranks every rank builds the same replica from the same seed with only its own
// routed experts (ModelOptions::local_experts), so the dense weights start identical and
// each expert starts from its R = 1 values; every MoE layer gets a dispatcher over rc.comm.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/model/parameter.h"
#include "core/train/rank_context.h"
#include "core/train/train_event.h"

MOK_NN_BEGIN
class LanguageModel;
MOK_NN_END

namespace mok {

class AdamW;

struct RankModel {
  std::unique_ptr<LanguageModel> model;
  std::vector<Parameter*> params;  // this rank's parameters: the dense ones and its own experts
  std::unique_ptr<AdamW> adam;     // over `params`
  int64_t parameter_count = 0;     // values of the whole model (every rank's experts)
  size_t model_tensors = 0;        // parameter tensors of the whole model

  RankModel();
  RankModel(RankModel&&) noexcept;
  RankModel& operator=(RankModel&&) noexcept;
  ~RankModel();
};

// Builds this rank's model for a vocabulary of `vocab_size` ids, installs the dispatchers
// (rc.dispatchers) and the AdamW optimizer. Collective when R > 1 (cost calibration,
// parameter counts). Reports the model (and a calibration) through `event`.
RankModel build_rank_model(const ExperimentConfig& config, int vocab_size, RankContext& rc, const TrainEvent& event);

// Loads this rank's share of a checkpoint: weights by name and the AdamW moments and step.
// `step`: the checkpoint's trainer state step, which the optimizer's update count must equal
// (CheckpointError otherwise: an edited or mixed-up checkpoint).
void load_rank_model(RankModel& m, const std::string& checkpoint_dir, int64_t step);

}  // namespace mok
