#pragma once
// Validation of a run: the mean loss over the first train.eval_batches fixed validation
// batches of batch/grad_accum windows each (the same windows every time, val_batch), with
// LanguageModel::evaluate (nothing kept for backward). A rank evaluates its rows of each
// batch; with R > 1 the loss sums and token counts are added over ranks (collective).

#include <cstdint>

#include "core/config/experiment_config.h"
#include "core/data/token_dataset.h"
#include "core/train/rank_context.h"
#include "core/train/step_cancellation.h"

MOK_NN_BEGIN
class LanguageModel;
MOK_NN_END

namespace mok {

struct ValidationResult {
  double loss = 0.0;  // mean cross-entropy (nats/token)
  double bpb = 0.0;   // bits per byte of the validation text
  double ppl = 0.0;   // perplexity, exp(loss)
};

// Throws StepCancelled from `cancel` between batches.
ValidationResult evaluate_validation(const ExperimentConfig& config, const TokenDataset& data, LanguageModel& model,
                                     RankContext& rc, const StepCancellation& cancel = {});

}  // namespace mok
