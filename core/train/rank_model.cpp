#include "core/train/rank_model.h"

#include <cstdio>

#include "core/backend/exec_context.h"
#include "core/parallel/dispatcher_factory.h"
#include "core/model/language_model.h"
#include "core/train/adamw.h"
#include "core/train/checkpoint.h"

namespace mok {

RankModel::RankModel() = default;
RankModel::RankModel(RankModel&&) noexcept = default;
RankModel& RankModel::operator=(RankModel&&) noexcept = default;
RankModel::~RankModel() = default;

RankModel build_rank_model(const ExperimentConfig& cfg, int vocab_size, RankContext& rc, const TrainEvent& event) {
  const TrainConfig& tc = cfg.train;
  ModelOptions mo;
  mo.model = cfg.model;
  mo.kittens = cfg.kittens;
  mo.routing = cfg.routing;
  mo.vocab_size = vocab_size;
  mo.max_seq_len = cfg.data.seq_len;
  mo.seed = cfg.seed;
  // Kitten rank schedules (linear, cosine) run over the whole planned run.
  mo.train_steps = tc.steps;
  mo.checkpoint_blocks = tc.activation_checkpointing;
  // Expert parallelism: this rank builds only its own experts (same seed → every replica
  // starts from the same dense weights, and each expert from its R = 1 values).
  if (rc.parallel() && cfg.model.experts > 0) mo.local_experts = expert_ownership(rc.placement, rc.rank);
  RankModel m;
  m.model = std::make_unique<LanguageModel>(mo);
  if (rc.parallel() && cfg.model.experts > 0) {
    MokCalibration cal;
    rc.dispatchers = install_expert_parallel(*m.model, cfg, *rc.comm, rc.placement, &cal, rc.data.get());
    if (cal.link_gbps > 0.0) {
      char text[256];
      std::snprintf(text, sizeof text,
                    "mok cost model calibrated: link %.4g GB/s, gradient add %.4g GFLOP/s (pin with "
                    "routing.cost_link_gbps=%.6g routing.cost_compute_gflops=%.6g to replay)",
                    cal.link_gbps, cal.compute_gflops, cal.link_gbps, cal.compute_gflops);
      event(text);
    }
  }
  m.params = m.model->parameters();  // null experts are skipped
  m.adam = std::make_unique<AdamW>(m.params, AdamWOptions{tc.beta1, tc.beta2, tc.eps, tc.weight_decay});
  m.parameter_count = m.model->parameter_count();
  m.model_tensors = m.params.size();
  if (rc.parallel()) {
    // The whole model: dense parameters once, every rank's experts.
    int64_t counts[2] = {0, 0};  // expert values, expert tensors
    int64_t dense = 0, dense_tensors = 0;
    for (const Parameter* p : m.params) {
      if (p->expert) {
        counts[0] += p->value.numel();
        counts[1] += 1;
      } else {
        dense += p->value.numel();
        dense_tensors += 1;
      }
    }
    rc.comm->all_reduce_sum(counts, 2, CommPurpose::control);
    m.parameter_count = dense + counts[0];
    m.model_tensors = static_cast<size_t>(dense_tensors + counts[1]);
  }
  event("model: " + std::to_string(m.parameter_count) + " parameters" +
        (rc.parallel() ? ", " + std::to_string(rc.ranks) + " ranks (" + rc.placement.describe() + ", " +
                             cfg.routing.dispatcher + " dispatch)"
                       : std::string()));
  return m;
}

void load_rank_model(RankModel& m, const std::string& checkpoint_dir, int64_t step) {
  // By name: a rank loads the dense parameters and its own experts of a full checkpoint.
  load_model_weights(checkpoint_dir, m.params, m.model_tensors);
  load_optimizer_state(checkpoint_dir, *m.adam);
  if (m.adam->step_count() != step) {
    throw CheckpointError(checkpoint_dir + ": " + CheckpointFiles::optimizer + " holds " +
                          std::to_string(m.adam->step_count()) + " updates but " + CheckpointFiles::state +
                          " says step " + std::to_string(step) + " (an edited or mixed-up checkpoint)");
  }
  ExecContext::current().ops().refresh_compute_copies(m.params);  // bf16 copies of the loaded values (GPU)
}

}  // namespace mok
