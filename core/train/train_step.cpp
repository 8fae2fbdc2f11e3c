#include "core/train/train_step.h"

#include "core/backend/exec_context.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/data/batch_sampler.h"
#include "core/parallel/dispatcher_factory.h"
#include "core/model/language_model.h"
#include "core/train/adamw.h"
#include "core/train/grad_clip.h"
#include "core/train/gradient_sync.h"
#include "core/train/rank_model.h"
#include "core/util/environment_choice.h"

namespace mok {

namespace {

using Clock = std::chrono::steady_clock;

// Whether the step's device work can be recorded once and replayed (train_step.h).
bool graph_wanted(const ExperimentConfig& cfg, const RankContext& rc, const Ops& ops, const OpProfileWindow& profile) {
  if (ops.device().is_cpu() || rc.parallel() || profile.active()) return false;
  // Under a memory limit every byte counts: a recorded graph keeps its blocks for itself, so
  // an evaluation between steps could not reuse them.
  if (!cfg.parallel.device_memory_limit.empty()) return false;
  if (environment_choice("MOK_CUDA_GRAPH", {"on", "off"}) == "off") return false;
  // MoE layers: only where their grouped products take the expert offsets on the device
  // (bf16) and nothing is dropped (the row count is the same every step).
  const std::vector<bool> moe = moe_layer_mask(cfg.model);
  const bool any_moe = std::find(moe.begin(), moe.end(), true) != moe.end();
  if (any_moe && (!ops.grouped_segments_on_device() || ExecContext::current().compute_dtype() != DType::bf16 ||
                  cfg.routing.capacity_factor > 0))
    return false;
  return true;  // and the kitten settings allow it at the step (LanguageModel::replayable_from)
}

int64_t scored_rows(const int32_t* targets, size_t n) {
  int64_t scored = 0;
  for (size_t i = 0; i < n; ++i) scored += targets[i] >= 0;
  return scored;
}

}  // namespace

TrainStep::TrainStep(const ExperimentConfig& config, const TokenDataset& data, RankModel& model, RankContext& rc)
    : cfg_(config),
      data_(data),
      m_(model),
      rc_(rc),
      schedule_(LrSchedule::from_config(config.train)),
      micro_(config.train.batch / config.train.grad_accum),
      rows_(rc.shard_rows(micro_)),
      row0_(rc.shard_begin(micro_)),
      tokens_(static_cast<size_t>(config.train.grad_accum) * micro_ * config.data.seq_len),
      targets_(tokens_.size()) {
  if (rc.leader() && !profile_.warning().empty()) std::fprintf(stderr, "%s\n", profile_.warning().c_str());
  graph_wanted_ = graph_wanted(config, rc, ExecContext::current().ops(), profile_);
}

TrainStep::~TrainStep() = default;

size_t TrainStep::graph_nodes() const { return graph_ ? graph_->nodes() : 0; }

void TrainStep::sample(int64_t step, int m) {
  const int seq = cfg_.data.seq_len;
  const size_t at = static_cast<size_t>(m) * rows_ * seq;
  int32_t* tokens = tokens_.data() + at;
  int32_t* targets = targets_.data() + at;
  if (rc_.parallel()) {
    // Rows are sampled independently, so this rank's rows are those rows of R = 1's batch.
    for (int i = 0; i < rows_; ++i)
      sample_train_row(data_, cfg_.seed, step, m, row0_ + i, seq, tokens + static_cast<size_t>(i) * seq,
                       targets + static_cast<size_t>(i) * seq);
  } else {
    sample_train_batch(data_, cfg_.seed, step, m, micro_, seq, tokens, targets);
  }
}

std::vector<PendingForwardStats> TrainStep::forward_backward(StepFigures& fig, const StepCancellation& cancel) {
  const TrainConfig& tc = cfg_.train;
  const int seq = cfg_.data.seq_len;
  LanguageModel& model = *m_.model;
  std::vector<PendingForwardStats> pending;
  for (int m = 0; m < tc.grad_accum; ++m) {
    if (m > 0) cancel.check();
    const size_t at = static_cast<size_t>(m) * rows_ * seq;
    pending.push_back(model.forward_pending(tokens_.data() + at, targets_.data() + at, rows_, seq));
    // 1/R: each rank's mean loss is 1/R of the global-batch mean, so the gradients summed
    // over ranks below are those of R = 1.
    model.backward(1.0 / (static_cast<double>(tc.grad_accum) * rc_.ranks));
    for (const ExpertDispatcher* d : rc_.dispatchers) fig.local_pairs += static_cast<double>(last_dispatch_counts(*d).local_pairs);
  }
  return pending;
}

void TrainStep::add_forward_figures(const std::vector<PendingForwardStats>& pending, TrainStepResult& r,
                                    StepFigures& fig) const {
  for (const PendingForwardStats& p : pending) {
    const ForwardStats st = p.resolve();
    r.loss += st.loss;
    r.aux += st.aux_loss;
    r.z += st.z_loss;
    r.locality += st.locality_loss;
    r.dropped += st.dropped_tokens;
    fig.loss_sum += st.loss * static_cast<double>(st.tokens);
    fig.tokens += static_cast<double>(st.tokens);
    r.moe_layer_ids = st.moe_layer_ids;
    if (r.expert_load.size() < st.expert_load.size()) r.expert_load.resize(st.expert_load.size());
    for (size_t l = 0; l < st.expert_load.size(); ++l) {
      auto& dst = r.expert_load[l];
      if (dst.size() < st.expert_load[l].size()) dst.resize(st.expert_load[l].size(), 0);
      for (size_t e = 0; e < st.expert_load[l].size(); ++e) dst[e] += st.expert_load[l][e];
    }
  }
}

bool TrainStep::record(const StepCancellation& cancel) {
  Ops& ops = ExecContext::current().ops();
  std::unique_ptr<StepGraph> graph = ops.make_step_graph();
  if (!graph) {
    graph_wanted_ = false;
    return false;
  }
  graph->add_input(tokens_.data(), tokens_.size() * sizeof(int32_t));
  graph->add_input(targets_.data(), targets_.size() * sizeof(int32_t));
  StepFigures recorded_fig;  // (one rank: nothing in it)
  std::vector<PendingForwardStats> recorded;  // read again after every replay
  try {
    graph->record([&] { recorded = forward_backward(recorded_fig, cancel); });
  } catch (const StepCancelled&) {
    throw;
  } catch (const std::exception& e) {
    graph_wanted_ = false;
    if (rc_.leader())
      std::fprintf(stderr, "mok: the training step runs op by op (%s; MOK_CUDA_GRAPH=off skips the attempt)\n",
                   e.what());
    return false;
  }
  m_.model->step_recorded();
  recorded_peaks_.clear();
  recorded_peaks_.take(MemoryTracker::current(), ops.allocator());
  recorded_scored_.clear();
  const size_t per_micro = static_cast<size_t>(rows_) * cfg_.data.seq_len;
  for (int m = 0; m < cfg_.train.grad_accum; ++m)
    recorded_scored_.push_back(scored_rows(targets_.data() + m * per_micro, per_micro));
  graph_ = std::move(graph);
  recorded_stats_ = std::move(recorded);
  return true;
}

bool TrainStep::graph_fits_batch() const {
  const size_t per_micro = static_cast<size_t>(rows_) * cfg_.data.seq_len;
  for (int m = 0; m < cfg_.train.grad_accum; ++m)
    if (scored_rows(targets_.data() + m * per_micro, per_micro) != recorded_scored_[m]) return false;
  return true;
}

TrainStepResult TrainStep::run(int64_t step, const StepCancellation& cancel) {
  const TrainConfig& tc = cfg_.train;
  LanguageModel& model = *m_.model;
  TrainStepResult r;
  if (rc_.data) rc_.data->settle();  // transfers since the last step (an evaluation's) count there
  const CommStats comm_before = rc_.parallel() ? rc_.comm->stats() : CommStats{};
  Ops& ops = ExecContext::current().ops();
  profile_.before_step(ops, step + 1);
  const auto t0 = Clock::now();
  model.set_step(step);
  model.zero_grad();
  // Between blocks too: a step of one huge micro-batch is abandoned within a block's time.
  model.set_block_boundary([cancel] { cancel.check(); });
  StepFigures fig;  // R > 1: this rank's part, summed over ranks below
  if (sampled_step_ != step)
    for (int m = 0; m < tc.grad_accum; ++m) sample(step, m);
  // Two steps op by op first: the products are tuned and every plan and cache is built then.
  if (graph_wanted_ && !graph_ && eager_steps_ >= 2 && model.replayable_from(step)) record(cancel);
  const bool replay = graph_ && graph_fits_batch();
  std::vector<PendingForwardStats> pending;
  if (replay) {
    graph_->replay();
    model.step_replayed();
    ++replayed_steps_;
    // The replay has taken its copy of the batch: the next one is sampled while the GPU works.
    for (int m = 0; m < tc.grad_accum; ++m) sample(step + 1, m);
    sampled_step_ = step + 1;
  } else {
    pending = forward_backward(fig, cancel);
    ++eager_steps_;
  }
  cancel.check();  // the last point before the step changes weights or optimizer state
  r.grad_norm = sync_gradients(rc_, m_.params);
  r.lr = schedule_.lr_at(step);
  m_.adam->step(r.lr, clip_factor(r.grad_norm, tc.grad_clip));  // the clipping inside the update
  ops.synchronize();  // a GPU step has ended when its last kernel has
  // The forwards' device figures (router losses, expert loads) are on the host by now; a
  // replay's are in the recorded step's readings, its loss in its cross-entropy sums.
  add_forward_figures(replay ? recorded_stats_ : pending, r, fig);
  if (replay) {
    r.loss = 0.0;
    for (const CrossEntropySum& s : graph_->cross_entropy_sums())
      r.loss += s.count ? s.loss_sum / static_cast<double>(s.count) : 0.0;
  }
  r.loss /= tc.grad_accum;
  r.aux /= tc.grad_accum;
  r.z /= tc.grad_accum;
  r.locality /= tc.grad_accum;
  r.step_s = std::chrono::duration<double>(Clock::now() - t0).count();
  profile_.after_step(ops, step + 1, r.step_s,
                      "rank " + std::to_string(rc_.rank) + " of " + std::to_string(rc_.ranks) + " (" + ops.name() + ")");
  if (rc_.data) rc_.data->settle();  // a GPU plane's transfer time, now that it is known
  if (rc_.parallel()) {
    // Sum the step's figures over ranks (this reduction is not part of the step's traffic).
    fig.take_comm(rc_.comm->stats(), comm_before);
    fig.step_s = r.step_s;
    fig.dropped = static_cast<double>(r.dropped);
    fig.aux = r.aux * tc.grad_accum;
    fig.z = r.z * tc.grad_accum;
    fig.locality = r.locality * tc.grad_accum;
    fig.load.resize(r.expert_load.size());
    for (size_t l = 0; l < r.expert_load.size(); ++l) fig.load[l].assign(r.expert_load[l].begin(), r.expert_load[l].end());
    reduce_step_figures(rc_, fig);
    const double R = rc_.ranks;
    r.loss = fig.tokens > 0 ? fig.loss_sum / fig.tokens : 0.0;
    r.aux = fig.aux / (R * tc.grad_accum);  // every rank holds the same number of tokens
    r.z = fig.z / (R * tc.grad_accum);
    r.locality = fig.locality / (R * tc.grad_accum);
    r.dropped = static_cast<int64_t>(fig.dropped);
    for (size_t l = 0; l < r.expert_load.size(); ++l)
      for (size_t e = 0; e < r.expert_load[l].size(); ++e) r.expert_load[l][e] = static_cast<int64_t>(fig.load[l][e]);
    r.step_s = fig.step_s / R;  // mean over ranks
    r.ranks = std::move(fig);
  }
  return r;
}

}  // namespace mok
