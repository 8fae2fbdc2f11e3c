#pragma once
// TrainStep: one optimizer step on one rank, returning its figures.
//
// Step s (0-based) = model.set_step(s), zero_grad, then for each of train.grad_accum
// micro-batches m: this rank's rows of sample_train_batch(seed, s, m) (all rows when R = 1),
// forward, backward scaled by 1/(grad_accum·R); gradient sync and clipping
// (gradient_sync.h); the learning rate of step s; one AdamW update. Collective when R > 1:
// the figures are then summed over ranks (step_figures.h), the same on every rank.
// A stop request abandons the step at a check point (step_cancellation.h) before the update.
//
// Replayed steps: where the step's device work is the same every step (one rank on a GPU;
// MoE layers only in bf16, dropless, with their expert offsets left on the device:
// Ops::grouped_segments_on_device; kitten settings that choose nothing per step:
// LanguageModel::replayable_from) and no parallel.device_memory_limit is set, the third step
// records its forward and backward as a CUDA graph (core/backend/step_graph.h) and every
// later step replays it: the same kernels on the same memory, so the same bits, launched at
// once. The gradient norm and the update run after it as before. MOK_CUDA_GRAPH=off runs
// every step op by op; a step that cannot be recorded says so once on stderr and the run
// goes on op by op. A replayed step cannot be stopped between blocks (it stops before the
// update, as any step).

#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend/step_graph.h"
#include "core/config/experiment_config.h"
#include "core/data/token_dataset.h"
#include "core/model/language_model.h"
#include "core/train/lr_schedule.h"
#include "core/train/memory_peaks.h"
#include "core/train/op_profile_window.h"
#include "core/train/rank_context.h"
#include "core/train/step_cancellation.h"
#include "core/train/step_figures.h"

namespace mok {

struct RankModel;

struct TrainStepResult {
  double loss = 0.0;       // mean cross-entropy (nats/token), over micro-batches (and ranks)
  double aux = 0.0;        // load-balancing loss, weighted, mean over micro-batches (and ranks)
  double z = 0.0;          // router z-loss, likewise
  double locality = 0.0;   // MoK locality loss, likewise
  double grad_norm = 0.0;  // global, before clipping
  double lr = 0.0;         // learning rate the update used
  int64_t dropped = 0;     // (token, expert) pairs dropped by the capacity factor (all ranks)
  std::vector<std::vector<int64_t>> expert_load;  // [MoE layer][expert] pairs routed (all ranks)
  std::vector<int> moe_layer_ids;                 // block index of each expert_load entry
  double step_s = 0.0;     // wall time of the step (mean over ranks)
  StepFigures ranks;       // R > 1: traffic, comm time and local pairs summed over ranks
};

class TrainStep {
 public:
  // `data` and `model` must outlive the TrainStep.
  TrainStep(const ExperimentConfig& config, const TokenDataset& data, RankModel& model, RankContext& rc);

  // Runs step `step` (the number of steps completed before it). Throws StepCancelled from
  // `cancel` before the next micro-batch or before the update; no update was then applied.
  TrainStepResult run(int64_t step, const StepCancellation& cancel = {});

  int64_t tokens_per_step() const { return static_cast<int64_t>(cfg_.train.batch) * cfg_.data.seq_len; }

  // Steps whose forward and backward came from the recorded graph; the recorded step's peak
  // memory figures (its allocations happen only when recorded).
  int64_t replayed_steps() const { return replayed_steps_; }
  size_t graph_nodes() const;
  const MemoryPeaks* recorded_peaks() const { return graph_ ? &recorded_peaks_ : nullptr; }
  ~TrainStep();

 private:
  // This rank's rows of micro-batch m of step `step` into its slice of tokens_ / targets_.
  void sample(int64_t step, int m);
  // Forward and backward of every micro-batch (dispatch counts added to fig); their
  // figures, still to be read (after the step: a MoE forward then never waits).
  std::vector<PendingForwardStats> forward_backward(StepFigures& fig, const StepCancellation& cancel);
  // The micro-batches' figures read and added to r and fig.
  void add_forward_figures(const std::vector<PendingForwardStats>& pending, TrainStepResult& r,
                           StepFigures& fig) const;
  // Records the step as a graph (true) or leaves it op by op (false, after a notice).
  bool record(const StepCancellation& cancel);
  bool graph_fits_batch() const;  // the batch scores the rows the recorded step scored

  const ExperimentConfig& cfg_;
  const TokenDataset& data_;
  RankModel& m_;
  RankContext& rc_;
  const LrSchedule schedule_;
  const int micro_;  // rows of one micro-batch, all ranks
  const int rows_;   // this rank's rows of a micro-batch
  const int row0_;   // its first row
  // (grad_accum, rows, seq_len): every micro-batch of a step, where a replay reads them
  std::vector<int32_t> tokens_, targets_;
  OpProfileWindow profile_;                // MOK_OP_PROFILE=FIRST:COUNT
  bool graph_wanted_ = false;              // the step may be recorded (see above)
  int64_t eager_steps_ = 0;                // steps run op by op so far
  std::unique_ptr<StepGraph> graph_;       // the recorded step, once recorded
  // Its figures, read after each replay (they refer to the graph's memory: dropped first)
  std::vector<PendingForwardStats> recorded_stats_;
  std::vector<int64_t> recorded_scored_;   // scored rows per micro-batch when recorded
  MemoryPeaks recorded_peaks_;
  int64_t replayed_steps_ = 0;
  int64_t sampled_step_ = -1;              // the step whose batch tokens_ holds already
};

}  // namespace mok
