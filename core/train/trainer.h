#pragma once
// Trainer: runs one experiment on this process: data → model → steps → metrics, validation
// and checkpoints, to a list of MetricSinks (and the run store when a db path is given).
//
//   Trainer trainer(config, {.db_path = "runs/mok.db"});
//   TrainResult r = trainer.run({&progress_bar});      // blocks; call on a worker thread
//   trainer.request_stop();                             // from any thread: stop after the step
//
// With parallel.ranks R > 1 the same steps run over R ranks — R threads of this process
// (parallel.comm: local) or R processes under mpirun/srun (parallel.comm: mpi, one Trainer
// per process; MPI must be initialised, see MpiSession). Each rank holds E/R experts and
// reads its shard of every batch; the loss curve equals R = 1's within float reduction noise
// (details: core/train/rank_context.h, docs/parallel.md). Rank 0 alone writes the store,
// checkpoints and sink events; the other MPI processes return the same TrainResult figures.
//
// One step = grad_accum micro-batches (forward, backward scaled by 1/grad_accum), global
// gradient clipping, the scheduled learning rate, one AdamW update, one metric row.
// Validation (val/loss, val/bpb, val/ppl over eval_batches fixed batches) runs every
// eval_every steps and after the last step; checkpoints every checkpoint_every steps, at the
// end, and when stopped. Everything is a pure function of (config, seed): the same config
// gives bitwise identical metrics for any thread count, and a run resumed from a checkpoint
// continues with bitwise the metrics of an uninterrupted one (except wall-time figures).
// A resume either continues the same run or starts a branch of it (core/train/resume_plan.h,
// docs/training.md); the store holds every metric row and the checkpoint row before a
// checkpoint folder appears. The parts of a run: core/train/trainer.cpp lists them.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/events/metric_event.h"
#include "core/real.h"

MOK_NN_BEGIN
class MemoryTracker;
MOK_NN_END

namespace mok {

struct RankContext;

struct TrainerOptions {
  std::string db_path;           // run store to record the run in; "" → none
  std::string resume_path;       // checkpoint folder, or run folder (its latest checkpoint)
  std::string checkpoint_root;   // "" → config.logging.checkpoint_dir
  bool write_checkpoints = true;
  std::string config_yaml;       // the config text recorded; "" → experiment_config_to_yaml
  std::string device_label = "cpu";
  bool branch = false;           // resume as a new run (a branch), even with unchanged settings
  bool overwrite_later = false;  // resume may replace the run's checkpoints after the resumed step
};

struct TrainResult {
  RunStatus status = RunStatus::failed;
  std::string message;           // why it failed or stopped
  int64_t run_id = 0;            // in the store; 0 without one
  int64_t steps = 0;             // optimizer steps completed (including resumed ones)
  int64_t tokens = 0;            // training tokens consumed in total
  double train_loss = 0.0;       // of the last step
  double val_loss = 0.0, val_bpb = 0.0, val_ppl = 0.0;  // of the last validation pass
  double tokens_per_s = 0.0;     // training tokens / training-step time, this session
  int64_t peak_saved_activation_bytes = 0;  // max over steps
  int64_t peak_bytes = 0;                   // max over steps (all categories together)
  int64_t peak_device_bytes = 0;            // of it, on the GPU (0 on the CPU)
  // max over steps of what the rank's allocator held from its device: live blocks + cached
  // ones (on the CPU the process's block cache)
  int64_t peak_reserved_bytes = 0;
  // max over steps of its live blocks alone (the tensors at their size class): what a
  // parallel.device_memory_limit binds, since the cache is given back before a request fails
  int64_t peak_block_bytes = 0;
  std::string device = "cpu";               // where rank 0 computed, e.g. "cuda:0 NVIDIA H200"
  std::string precision = "fp32";           // compute dtype of activations: fp32 | bf16
  int64_t comm_bytes_remote = 0;            // bytes sent to other ranks, in total
  double wall_s = 0.0;           // run wall time (resumed runs include earlier sessions)
  std::string checkpoint_dir;    // the last checkpoint written ("" when none)
  int64_t parameter_count = 0;   // of the whole model (all ranks' experts)
  int ranks = 1;                 // ranks the run used
  int64_t replayed_steps = 0;    // steps of this session replayed from a CUDA graph (docs/gpu.md)
  int rank = 0;                  // this process's rank (MPI); 0 otherwise
};

class Trainer {
 public:
  Trainer(const ExperimentConfig& config, TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs to the end, or until stopped. Errors (data, model, store, checkpoint I/O) end the
  // run with status failed and the message; they are not thrown.
  TrainResult run(const std::vector<MetricSink*>& sinks);

  // Thread-safe, async-signal-safe (a lock-free store): stop, save a checkpoint of the last
  // completed step, finish with status stopped. With one rank the step in progress is
  // abandoned at its next check point (between micro-batches, before the update, between
  // validation batches; core/train/step_cancellation.h); with R > 1 the ranks stop after it.
  void request_stop() { stop_.store(true, std::memory_order_relaxed); }
  bool stop_requested() const { return stop_.load(std::memory_order_relaxed); }
  // Thread-safe: while paused, the run waits between steps (wall time does not advance).
  void set_paused(bool paused);
  bool paused() const { return paused_.load(); }

  const ExperimentConfig& config() const { return config_; }

  // Why this trainer cannot run `config` (e.g. more ranks than it supports), or "" when it
  // can. run() checks it first, before anything is written.
  static std::string unsupported_reason(const ExperimentConfig& config);
  // The same, with why no GPU is usable given ("" when one is) instead of asked of this
  // process's device backends: a front end that listed the devices once at start passes
  // what it found (DeviceCatalog in the workbench).
  static std::string unsupported_reason(const ExperimentConfig& config, const std::string& gpu_unavailable_reason);

 private:
  struct Session;
  TrainResult run_session(Session& s);
  // One rank's model, optimizer and step loop (the whole run when R = 1).
  TrainResult run_rank(Session& s, RankContext& rc, MemoryTracker& tracker);
  void wait_while_paused(Session& s);
  void record_resume(Session& s);  // the resume's events (changes, branch origin)

  ExperimentConfig config_;
  TrainerOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> paused_{false};
  std::mutex pause_mutex_;
  std::condition_variable pause_cv_;
};

static_assert(std::atomic<bool>::is_always_lock_free, "request_stop must be signal-safe");

}  // namespace mok
