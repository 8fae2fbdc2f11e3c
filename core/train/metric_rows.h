#pragma once
// Metric rows: the name of every metric the trainer logs, in one place (docs/training.md
// lists them; the store, the CLI and the GUI read them by these names).
//
//   train/…   losses, learning rate, gradient norm of the step
//   perf/…    wall-time figures (not deterministic)
//   comm/…    traffic between ranks (R > 1)
//   mem/…     live bytes by category, peaks since the previous row, the allocator's reserved
//             bytes (live blocks + cached ones) now and at their peak, saved bytes per layer;
//             R > 1: each peak the largest over ranks; live and saved bytes those of the
//             rank with the highest peak (mem/rank)
//   moe/…     dropped pairs, routed pairs per layer and expert
//   kittens/… the kitten policy's own figures (named by the model)
//   val/…     validation, on evaluation steps
// The order within a row is fixed: the values above in this order.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/events/metric_event.h"
#include "core/train/evaluation.h"
#include "core/train/rank_context.h"
#include "core/train/rank_memory.h"
#include "core/train/train_step.h"

namespace mok {

// The row of the step that brought the run to `step` completed steps and `tokens` tokens:
// the step's figures, the memory figures (`mem`: one rank's, or binding_rank_memory's over
// R ranks), and the kitten policy's metrics.
// `tokens_per_step`: global batch · seq_len.
MetricRow train_metric_row(int64_t step, int64_t tokens, int64_t tokens_per_step, const TrainStepResult& r,
                           const RankContext& rc, const RankMemory& mem,
                           const std::vector<std::pair<std::string, double>>& kitten_metrics);

// Appends val/loss, val/bpb and val/ppl.
void add_validation_metrics(MetricRow& row, const ValidationResult& v);

}  // namespace mok
