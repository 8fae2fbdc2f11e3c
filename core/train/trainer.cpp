#include "core/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <new>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "core/config/config_io.h"
#include "core/config/model_footprint.h"
#include "core/kittens/kitten_policy.h"
#include "core/parallel/mpi_communicator.h"
#include "core/plan/memory_fit.h"
#include "core/plan/memory_plan.h"
#include "core/model/language_model.h"
#include "core/store/run_environment.h"
#include "core/store/run_store.h"
#include "core/store/run_store_sink.h"
#include "core/tensor/allocator.h"
#include "core/tensor/memory_tracker.h"
#include "core/train/checkpoint.h"
#include "core/train/evaluation.h"
#include "core/train/memory_peaks.h"
#include "core/train/rank_memory.h"
#include "core/train/metric_rows.h"
#include "core/train/rank_context.h"
#include "core/train/rank_launch.h"
#include "core/train/rank_model.h"
#include "core/train/resume_plan.h"
#include "core/train/run_checkpointer.h"
#include "core/train/run_folder.h"
#include "core/train/slow_step_notice.h"
#include "core/train/step_cancellation.h"
#include "core/train/train_step.h"
#include "core/train/training_data.h"
#include "core/util/thread_pool.h"

// The run, in parts with one job each (core/train/):
//   rank_launch      ranks: one, local threads or MPI processes; each rank's device
//   resume_plan      a resume: the same run continued, or a branch (config_changes)
//   training_data    corpus → tokenizer → token streams
//   rank_model       model, expert-parallel dispatchers, optimizer; resume of weights
//   train_step       one optimizer step → its figures (gradient_sync: all-reduce + norm)
//   evaluation       validation loss, bits per byte, perplexity
//   run_checkpointer checkpoints of the run (gathered over ranks)
//   metric_rows      the name of every metric
// This file: the run's session (store, resume state, clocks, pause and stop) and the loop
// that joins the parts on every rank.

namespace mok {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Why a CPU run's model cannot fit this machine's memory ("" when its parameters' state does).
std::string model_too_large_reason(const ExperimentConfig& cfg) {
  if (cfg.parallel.device != "cpu") return {};
  const ModelFootprint fp = model_footprint(cfg);
  const double memory = host_memory_bytes();
  if (memory <= 0 || fp.training_bytes <= memory) return {};
  char params[32];
  std::snprintf(params, sizeof params, "%.3g", fp.parameters);
  return "the model is too large for this machine: " + std::string(params) + " parameters (" + model_size_text(cfg) +
         ") need " + format_footprint_bytes(fp.training_bytes) +
         " for weights, gradients and AdamW moments alone, and this machine has " + format_footprint_bytes(memory);
}

// std::bad_alloc says nothing of what was being allocated: say what the model needs.
std::string out_of_memory_message(const ExperimentConfig& cfg) {
  return "out of memory: the model (" + model_size_text(cfg) + ") needs about " +
         format_footprint_bytes(model_footprint(cfg).training_bytes) +
         " for its parameters' state, plus activations for train.batch " + std::to_string(cfg.train.batch) +
         " × data.seq_len " + std::to_string(cfg.data.seq_len) + "; make it smaller";
}

// What a run that threw `e` failed of. A plain std::bad_alloc says nothing of what was being
// allocated, so the message says what the model needs; a device's allocator throws a
// std::bad_alloc that names the device, the size and the limit, and that is kept.
std::string failure_message(const std::exception& e, const ExperimentConfig& cfg) {
  if (is_named_memory_refusal(e))
    return std::string(e.what()) + "; raise the limit, or lower train.batch, data.seq_len or the model's size";
  if (dynamic_cast<const std::bad_alloc*>(&e)) return out_of_memory_message(cfg);
  return e.what();
}

}  // namespace

struct Trainer::Session {
  // Declaration order = construction order; the tracker outlives every tensor.
  MemoryTracker tracker;
  std::vector<MetricSink*> sinks;
  std::optional<RunStore> store;
  std::unique_ptr<RunStoreSink> store_sink;
  std::unique_ptr<ThreadPool> pool;
  TrainingData data;
  std::unique_ptr<Communicator> mpi_comm;  // parallel.comm: mpi — this process's rank

  std::string resume_dir;
  TrainerState resumed;
  ResumePlan plan;             // rank 0's decision (other MPI ranks: the checkpoint only)
  std::string run_dir;
  std::string config_yaml;
  int64_t run_id = 0;
  int64_t start_step = 0;

  Clock::time_point started{};
  double wall_offset_s = 0.0;  // wall time of earlier sessions (resume)
  double paused_s = 0.0;
  double train_s = 0.0;        // time inside training steps, this session
  int64_t session_tokens = 0;

  double wall_s() const { return wall_offset_s + seconds_between(started, Clock::now()) - paused_s; }

  // Why the store cannot record the run ("" while it can); rank 0's thread only.
  std::string store_failure() const { return store_sink ? store_sink->failure() : std::string(); }

  void event(const std::string& text) {
    for (MetricSink* s : sinks) s->on_event(text);
  }
};

namespace {

// This process's CPU and BLAS, and for a GPU run rank 0's GPU with the driver, CUDA and
// cuBLAS versions: what the run's bits depend on.
RunEnvironment run_environment_of(const ExperimentConfig& cfg) {
  RunEnvironment env = probe_run_environment();
  env.threads = cfg.parallel.threads;
  if (cfg.parallel.device != "cuda") return env;
  const RankDevice plan = plan_rank_device(cfg, 0, std::max(1, cfg.parallel.ranks), 0);
  for (const DeviceDescription& d : list_devices()) {
    if (d.device != Device::cuda(plan.index)) continue;
    env.gpu_model = d.name;
    env.gpu_driver = d.driver_version;
    env.cuda_version = d.runtime_version;
    env.cublas_version = d.blas_version;
  }
  return env;
}

}  // namespace

std::string Trainer::unsupported_reason(const ExperimentConfig& cfg) {
  return unsupported_reason(cfg, cfg.parallel.device == "cuda" ? device_unavailable_reason(DeviceType::cuda) : "");
}

std::string Trainer::unsupported_reason(const ExperimentConfig& cfg, const std::string& gpu_unavailable_reason) {
  const std::string& comm = cfg.parallel.comm;
  if (comm != "local" && comm != "mpi" && comm != "nccl" && comm != "peer")
    return "parallel.comm: '" + comm + "' is not a transport; use local or mpi (CPU ranks), nccl or peer (GPU ranks)";
  const bool gpu = cfg.parallel.device == "cuda";
  if ((comm == "nccl" || comm == "peer") && !gpu)
    return "parallel.comm: " + comm +
           " moves data between GPUs; set parallel.device: cuda, or use local or mpi on the CPU";
  if (comm == "peer" && launched_task_count() > 1)
    return "parallel.comm: peer copies between the GPUs of one process, but this process is one of " +
           std::to_string(launched_task_count()) + " started by mpirun or srun: use parallel.comm: nccl there";
  if (gpu && cfg.parallel.ranks > 1 && comm == "local")
    return "parallel.comm: local moves host memory between CPU ranks; GPU ranks exchange over NCCL: set "
           "parallel.comm: nccl";
  if (gpu && comm == "mpi")
    return "parallel.comm: mpi moves host memory between CPU ranks; GPU ranks started by mpirun exchange over "
           "NCCL: set parallel.comm: nccl";
  if (runs_as_mpi_processes(cfg)) {
    if (!mpi_available()) return "parallel.comm: " + comm + ", but this build has no MPI support (install libopenmpi-dev and rebuild)";
    if (comm == "mpi" && !mpi_launch_detected()) {
      return "parallel.comm: mpi needs one process per rank: launch with 'mpirun -np R mok train ...' "
             "(or srun -n R on a cluster), or use parallel.comm: local";
    }
  }
  if (const std::string why = parallel_config_problem(cfg, cfg.parallel.ranks); !why.empty()) return why;
  if (cfg.parallel.device == "cuda") {
    // What the GPU path does not do yet, said before anything runs (valid configs all).
    const ModelConfig& m = cfg.model;
    const int head = m.heads > 0 ? m.d_model / m.heads : 0;
    if (head != 32 && head != 64 && head != 128)
      return "model.heads: on a GPU the head width d_model/heads must be 32, 64 or 128 (it is " +
             std::to_string(head) + ")";
    if (m.experts > 256 || (m.experts > 0 && m.top_k > 8))
      return "model.experts: on a GPU the router takes up to 256 experts and top_k up to 8";
    if (!gpu_unavailable_reason.empty()) return "parallel.device: cuda: " + gpu_unavailable_reason;
  } else if (cfg.parallel.device != "cpu") {
    return "parallel.device: '" + cfg.parallel.device + "' is not a device; use cpu or cuda";
  }
  if (cfg.train.grad_accum < 1 || cfg.train.batch % cfg.train.grad_accum != 0) {
    return "train.batch (" + std::to_string(cfg.train.batch) + ") must be a multiple of train.grad_accum (" +
           std::to_string(cfg.train.grad_accum) + ")";
  }
  return {};
}

Trainer::Trainer(const ExperimentConfig& config, TrainerOptions options)
    : config_(config), options_(std::move(options)) {}

Trainer::~Trainer() = default;

void Trainer::set_paused(bool paused) {
  {
    std::lock_guard lock(pause_mutex_);
    paused_.store(paused);
  }
  pause_cv_.notify_all();
}

void Trainer::wait_while_paused(Session& s) {
  if (!paused_.load()) return;
  const auto t0 = Clock::now();
  s.event("paused");
  {
    std::unique_lock lock(pause_mutex_);
    // Wake periodically too: request_stop() may come from a signal handler (no notify).
    while (paused_.load() && !stop_requested()) pause_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  s.paused_s += seconds_between(t0, Clock::now());
  if (!stop_requested()) s.event("resumed");
}

TrainResult Trainer::run(const std::vector<MetricSink*>& sinks) {
  Session s;
  s.sinks = sinks;
  s.started = Clock::now();
  TrainResult result;
  auto fail_early = [&](const std::string& message) {
    result.status = RunStatus::failed;
    result.message = message;
    for (MetricSink* sink : sinks) {
      sink->on_event("error: " + message);
      sink->on_run_finished(RunStatus::failed, message);
    }
    return result;
  };

  // Store and resume state first: what the run is, before any heavy work.
  if (const std::string why = unsupported_reason(config_); !why.empty()) return fail_early(why);
  if (const std::string why = model_too_large_reason(config_); !why.empty()) return fail_early(why);
  // The whole memory plan against this machine: far beyond it is refused now, a little
  // beyond it warned about once the run is recorded (memory_fit.h).
  const MemoryFit memory_fit = host_memory_fit(config_, host_memory_bytes());
  if (memory_fit.verdict == MemoryVerdict::refuse) return fail_early(memory_fit.message);
  if (runs_as_mpi_processes(config_)) {
    // One Trainer per process; the job's size is the rank count. Only rank 0 records.
    try {
      s.mpi_comm = std::make_unique<MpiCommunicator>();
    } catch (const std::exception& e) {
      return fail_early(e.what());
    }
    const int size = s.mpi_comm->size();
    if (config_.parallel.ranks != 1 && config_.parallel.ranks != size) {
      return fail_early("parallel.ranks is " + std::to_string(config_.parallel.ranks) + " but the MPI job has " +
                        std::to_string(size) + " processes; launch with mpirun -np " +
                        std::to_string(config_.parallel.ranks) + " (or leave parallel.ranks at 1)");
    }
    if (const std::string why = parallel_config_problem(config_, size); !why.empty()) return fail_early(why);
    result.ranks = size;
    result.rank = s.mpi_comm->rank();
  }
  const bool leader = !s.mpi_comm || s.mpi_comm->rank() == 0;
  try {
    s.config_yaml = options_.config_yaml.empty() ? experiment_config_to_yaml(config_) : options_.config_yaml;
    if (!options_.resume_path.empty()) {
      // The checkpoint first: a bad one is refused before the store is opened.
      s.resume_dir = resolve_checkpoint_dir(options_.resume_path);
      s.resumed = read_trainer_state(s.resume_dir);
      check_resumable(s.resume_dir, s.resumed);
      // Every file against its checksum before the run is recorded anywhere (rank 0 reads
      // them; the other ranks check what they load).
      if (leader) verify_checkpoint(s.resume_dir);
    }
    if (!options_.db_path.empty() && leader) s.store.emplace(RunStore::open(options_.db_path));
    if (!options_.resume_path.empty()) {
      if (leader) {
        s.plan = plan_resume(config_, options_, s.store ? &*s.store : nullptr);
        s.resume_dir = s.plan.checkpoint_dir;
      }
      s.start_step = s.resumed.step;
      s.wall_offset_s = s.resumed.wall_s;
    }
    if (s.store) {
      RunStoreSinkOptions so;
      so.device = config_.parallel.device == "cuda"
                      ? "cuda (" + std::string(compute_dtype_for(config_) == DType::bf16 ? "bf16" : "fp32") + ")"
                      : options_.device_label;
      so.environment = run_environment_of(config_);
      s.store_sink = std::make_unique<RunStoreSink>(*s.store, so);
      s.sinks.insert(s.sinks.begin(), s.store_sink.get());
    }
  } catch (const std::exception& e) {
    return fail_early(e.what());
  }

  if (!leader) {
    // A computing MPI rank: no store, no events; failures come back in the result.
    s.sinks.clear();
    try {
      result = run_session(s);
    } catch (const std::exception& e) {
      result.status = RunStatus::failed;
      result.message = e.what();
    }
    result.wall_s = s.wall_s();
    result.ranks = s.mpi_comm->size();
    result.rank = s.mpi_comm->rank();
    return result;
  }

  RunStarted started;
  started.name = config_.name;
  started.config_yaml = s.config_yaml;
  started.total_steps = config_.train.steps;
  started.start_step = s.start_step;
  const bool resuming = !s.resume_dir.empty();
  // A continued run goes on under its id; a branch (or a new run) gets a new one.
  if (resuming && !s.plan.branch) started.run_id = s.plan.continue_run_id;
  for (MetricSink* sink : s.sinks) sink->on_run_started(started);
  s.run_id = s.store_sink ? s.store_sink->run_id() : started.run_id;
  result.run_id = s.run_id;
  if (const std::string why = s.store_failure(); !why.empty()) {
    // Nothing trains that cannot be recorded.
    result.status = RunStatus::failed;
    result.message = "the run store cannot record this run, so it was not started: " + why;
    for (MetricSink* sink : s.sinks) sink->on_run_finished(result.status, result.message);
    return result;
  }
  if (resuming) record_resume(s);
  if (memory_fit.verdict == MemoryVerdict::warn) s.event("warning: " + memory_fit.message);

  try {
    result = run_session(s);
  } catch (const std::exception& e) {
    result.status = RunStatus::failed;
    result.message = failure_message(e, config_);
    s.event("error: " + result.message);
    // How far memory got before the failure (one rank per process: its tracker), e.g. when
    // parallel.device_memory_limit stopped the run.
    result.peak_bytes = std::max(result.peak_bytes, s.tracker.peak_total());
    result.peak_device_bytes = std::max(result.peak_device_bytes, s.tracker.peak_total(DeviceType::cuda));
  }
  result.run_id = s.run_id;
  result.wall_s = s.wall_s();
  result.ranks = run_rank_count(config_, s.mpi_comm.get());
  result.rank = s.mpi_comm ? s.mpi_comm->rank() : 0;
  if (s.store_sink) s.store_sink->flush();
  if (const std::string why = s.store_failure(); !why.empty() && result.status != RunStatus::failed) {
    result.status = RunStatus::failed;  // ended, but its last results are not in the store
    result.message = "the run store cannot record this run's last results: " + why;
  }
  for (MetricSink* sink : s.sinks) sink->on_run_finished(result.status, result.message);
  return result;
}

void Trainer::record_resume(Session& s) {
  const ResumePlan& p = s.plan;
  const std::string from = "step " + std::to_string(p.state.step) + " of run " + std::to_string(p.state.run_id) +
                           " (" + p.checkpoint_dir + ")";
  if (p.branch) {
    s.event("branch: a new run from " + from + ": " + p.why_branch);
    if (s.store && p.state.run_id > 0 && p.state.run_id != s.run_id) {
      try {
        if (s.store->find_run(p.state.run_id)) {
          s.store->append_event(p.state.run_id, "info",
                                "branch: run " + std::to_string(s.run_id) + " starts from " + from + ": " + p.why_branch);
        }
      } catch (const std::exception&) {
        // The branch note on the original is a courtesy; the new run records its origin.
      }
    }
    return;
  }
  if (const std::string plan = describe_changes(p.changes, ChangeEffect::plan); !plan.empty()) {
    s.event("plan changed: " + plan + " (the learning-rate decay and kitten rank schedules follow the new length)");
  }
  if (const std::string none = describe_changes(p.changes, ChangeEffect::none); !none.empty()) {
    s.event("settings changed (no effect on the results): " + none);
  }
  if (!p.superseded.empty()) {
    s.event("warning: --overwrite-later: " + std::to_string(p.superseded.size()) + " checkpoints after step " +
            std::to_string(p.state.step) + " are removed before the first new one is written");
  }
}

TrainResult Trainer::run_session(Session& s) {
  const ExperimentConfig& cfg = config_;
  ScopedMemoryTracker track(s.tracker);
  s.pool = std::make_unique<ThreadPool>(std::max(1, cfg.parallel.threads));
  ScopedThreadPool pool_scope(*s.pool);
  const TrainEvent event = [&s](const std::string& text) { s.event(text); };

  s.data = load_training_data(cfg, s.resume_dir, event);

  // Checkpoint folder of this run (written by rank 0 only): a continued run's own folder, or
  // a new one (new runs under the configured root; branches where the resume plan says).
  if (!s.plan.run_dir.empty()) {
    s.run_dir = s.plan.run_dir;
  } else {
    const std::string root = !s.plan.checkpoint_root.empty() ? s.plan.checkpoint_root
                             : !options_.checkpoint_root.empty() ? options_.checkpoint_root
                                                                 : cfg.logging.checkpoint_dir;
    s.run_dir = new_run_folder(root, cfg.name, s.run_id);
  }
  if (options_.write_checkpoints && (!s.mpi_comm || s.mpi_comm->rank() == 0)) {
    // Temporary folders of saves that died with their process.
    for (const std::string& line : clean_stale_checkpoint_temps(s.run_dir)) event("checkpoints: " + line);
  }

  return launch_ranks(cfg, s.mpi_comm.get(), s.tracker, event,
                      [&](RankContext& rc, MemoryTracker& tracker) { return run_rank(s, rc, tracker); });
}

TrainResult Trainer::run_rank(Session& s, RankContext& rc, MemoryTracker& tracker) {
  const ExperimentConfig& cfg = config_;
  const TrainConfig& tc = cfg.train;
  TrainResult result;
  // Sinks, events, checkpoints and the store belong to rank 0 (the leader).
  const TrainEvent event = [&](const std::string& text) {
    if (rc.leader()) s.event(text);
  };

  RankModel m = build_rank_model(cfg, s.data.tokenizer->vocab_size(), rc, event);
  result.parameter_count = m.parameter_count;
  result.device = rc.device.name;
  result.precision = rc.device.precision;
  if (rc.device.kind != "cpu") event("device: " + rc.device.name + ", " + rc.device.precision);
  // Which transport moves rows and gradients between GPU ranks (NCCL or peer copies).
  if (rc.device.kind != "cpu" && rc.data)
    event(std::string("data plane: ") + rc.data->kind() + " between " + std::to_string(rc.ranks) + " GPU ranks");
  RunCheckpointer::Identity identity;
  identity.run_id = s.run_id;
  if (!s.resume_dir.empty()) {
    load_rank_model(m, s.resume_dir, s.resumed.step);
    event("resumed from " + s.resume_dir + " at step " + std::to_string(s.start_step));
    if (s.plan.branch) {
      identity.branched_from = {s.resumed.run_id, s.resumed.step, s.resume_dir};
    } else {
      identity.branched_from = s.resumed.branched_from;
      if (identity.run_id == 0) identity.run_id = s.resumed.run_id;  // no store now: keep the run's id
    }
  }

  TrainStep train_step(cfg, s.data.tokens, m, rc);
  RunCheckpointer checkpointer(cfg, s.run_dir, s.config_yaml, identity, *s.data.tokenizer, s.plan.superseded);
  // A step that runs long is reported by rank 0, at the step's check points and when it ends
  // (slow_step_notice.h).
  SlowStepNotice slow_steps(SlowStepNotice::kDefaultThresholdS, !rc.parallel());
  Clock::time_point step_started{};
  int64_t step_running = 0;  // 1-based number of the step in progress; 0 between steps
  const std::function<void()> watch_step = [&] {
    if (step_running == 0) return;
    const std::string w = slow_steps.check(step_running, seconds_between(step_started, Clock::now()));
    if (!w.empty()) event(w);
  };
  // R = 1: a stop request abandons the step in progress (step_cancellation.h); R > 1: the
  // ranks agree on stopping between steps.
  const StepCancellation cancel = rc.parallel() ? StepCancellation(nullptr, rc.leader() ? &watch_step : nullptr)
                                                : StepCancellation(&stop_, &watch_step);
  const int64_t tokens_per_step = train_step.tokens_per_step();
  int64_t step = s.start_step;  // optimizer steps completed
  int64_t tokens_seen = s.resume_dir.empty() ? 0 : s.resumed.tokens_seen;
  int64_t last_checkpoint_step = s.resume_dir.empty() ? -1 : s.start_step;  // the same on every rank

  auto validate = [&] {  // collective when R > 1; throws StepCancelled
    const ValidationResult v = evaluate_validation(cfg, s.data.tokens, *m.model, rc, cancel);
    result.val_loss = v.loss;
    result.val_bpb = v.bpb;
    result.val_ppl = v.ppl;
    return v;
  };
  auto checkpoint = [&] {  // collective when R > 1
    if (!options_.write_checkpoints) return;
    // The store records the metrics so far and the checkpoint before the folder appears.
    auto record_in_store = [&](int64_t at, const std::string& d) {
      if (s.store_sink) s.store_sink->commit_checkpoint(at, d);
    };
    const std::string dir = checkpointer.write(rc, m, step, tokens_seen, s.wall_s(), record_in_store);
    last_checkpoint_step = step;
    if (!rc.leader()) return;
    result.checkpoint_dir = dir;
    for (MetricSink* sink : s.sinks) sink->on_checkpoint(step, dir);
  };

  MemoryPeaks peaks;
  Allocator& allocator = rc.device.exec().allocator();  // reserved bytes: what the device holds
  RunStatus status = RunStatus::finished;
  // Set when the store stopped recording: the run ends failed, and writes nothing more.
  std::string store_failure;
  while (step < tc.steps) {
    if (rc.leader()) wait_while_paused(s);
    bool stop = stop_requested();
    bool store_failed = false;
    if (rc.leader()) {
      store_failure = s.store_failure();
      store_failed = !store_failure.empty();
    }
    if (rc.parallel()) {
      // Rank 0 decides, so every rank leaves the loop at the same step (and agrees whether
      // the stop saves a checkpoint, a collective).
      int64_t flag = rc.leader() ? (store_failed ? 2 : stop ? 1 : 0) : 0;
      rc.comm->broadcast(&flag, sizeof flag, 0, CommPurpose::control);
      stop = flag != 0;
      store_failed = flag == 2;
    }
    if (store_failed) {
      status = RunStatus::failed;
      break;
    }
    if (stop) {
      status = RunStatus::stopped;
      break;
    }
    tracker.reset_peaks();
    allocator.reset_peak_reserved();
    TrainStepResult r;
    step_started = Clock::now();
    step_running = step + 1;
    const bool none_replayed_yet = train_step.replayed_steps() == 0;
    try {
      r = train_step.run(step, cancel);
    } catch (const StepCancelled&) {
      event("stop: step " + std::to_string(step + 1) + " abandoned unfinished (nothing of it is kept)");
      status = RunStatus::stopped;
      break;
    }
    step_running = 0;
    if (rc.leader()) {
      const std::string w = slow_steps.check(step + 1, seconds_between(step_started, Clock::now()), true);
      if (!w.empty()) event(w);
    }
    ++step;
    tokens_seen += tokens_per_step;
    if (rc.leader()) {
      s.train_s += r.step_s;
      s.session_tokens += tokens_per_step;
    }
    peaks.take(tracker, allocator);
    if (const MemoryPeaks* recorded = train_step.recorded_peaks()) peaks.merge(*recorded);  // replays allocate nothing
    if (none_replayed_yet && train_step.replayed_steps() > 0 && rc.leader())  // once, at the first replay
      event("cuda graph: step " + std::to_string(step) + " replayed the recorded forward and backward (" +
            std::to_string(train_step.graph_nodes()) + " kernels and copies in one launch)");
    result.peak_bytes = std::max(result.peak_bytes, tracker.peak_total());
    result.peak_reserved_bytes = std::max(result.peak_reserved_bytes, allocator.peak_reserved_bytes());
    result.peak_block_bytes = std::max(result.peak_block_bytes, allocator.peak_live_block_bytes());
    result.peak_device_bytes = std::max(result.peak_device_bytes, tracker.peak_total(DeviceType::cuda));
    result.peak_saved_activation_bytes =
        std::max(result.peak_saved_activation_bytes, tracker.peak_bytes(MemCategory::saved_activations));
    result.comm_bytes_remote += static_cast<int64_t>(r.ranks.remote_bytes);
    result.train_loss = r.loss;
    if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
      throw std::runtime_error("training diverged at step " + std::to_string(step) + " (loss " +
                               std::to_string(r.loss) + ", grad norm " + std::to_string(r.grad_norm) +
                               "); try a lower train.lr or a train.grad_clip");
    }

    const bool last = step == tc.steps;
    const bool eval = last || (tc.eval_every > 0 && step % tc.eval_every == 0);
    const bool log = eval || tc.log_every <= 1 || step % tc.log_every == 0;
    if (log) {
      RankMemory mem = RankMemory::take(rc.rank, tracker, allocator.reserved_bytes(), peaks);
      if (rc.parallel()) mem = binding_rank_memory(*rc.comm, mem);  // every rank logs together
      MetricRow row = train_metric_row(step, tokens_seen, tokens_per_step, r, rc, mem, m.model->kitten_metrics());
      if (eval) {
        try {
          add_validation_metrics(row, validate());
        } catch (const StepCancelled&) {
          event("warning: validation at step " + std::to_string(step) + " interrupted by the stop: no val/ figures");
          status = RunStatus::stopped;  // also after the last step: the final validation is missing
        }
      }
      row.wall_s = s.wall_s();
      peaks.clear();
      if (rc.leader())
        for (MetricSink* sink : s.sinks) sink->on_metrics(row);
    }
    if (last || (tc.checkpoint_every > 0 && step % tc.checkpoint_every == 0)) checkpoint();
    if (status == RunStatus::stopped) break;
  }

  if (status == RunStatus::failed) {
    result.message = "the run store cannot record this run (" +
                     (store_failure.empty() ? std::string("see rank 0") : store_failure) + "); stopped after step " +
                     std::to_string(step) + " of " + std::to_string(tc.steps) +
                     " with nothing more written (checkpoints already on disk are kept)";
  } else if (status == RunStatus::stopped) {
    if (last_checkpoint_step != step && step > s.start_step) checkpoint();
    result.message = "stopped at step " + std::to_string(step) + " of " + std::to_string(tc.steps);
  } else if (s.start_step >= tc.steps) {
    // Nothing left to train: report the checkpoint's validation figures.
    try {
      validate();
      result.message = "already at step " + std::to_string(step);
    } catch (const StepCancelled&) {
      status = RunStatus::stopped;
      result.message = "stopped at step " + std::to_string(step) + " of " + std::to_string(tc.steps);
    }
  }
  if (rc.parallel()) {  // every rank ends here together: the run's peaks, the largest over ranks
    int64_t peaks[] = {result.peak_bytes, result.peak_reserved_bytes, result.peak_block_bytes,
                       result.peak_device_bytes, result.peak_saved_activation_bytes};
    max_over_ranks(*rc.comm, peaks);
    result.peak_bytes = peaks[0];
    result.peak_reserved_bytes = peaks[1];
    result.peak_block_bytes = peaks[2];
    result.peak_device_bytes = peaks[3];
    result.peak_saved_activation_bytes = peaks[4];
  }
  result.status = status;
  result.steps = step;
  result.tokens = tokens_seen;
  result.tokens_per_s = s.train_s > 0 ? static_cast<double>(s.session_tokens) / s.train_s : 0.0;
  result.ranks = rc.ranks;
  result.replayed_steps = train_step.replayed_steps();
  result.rank = rc.rank;
  return result;
}

}  // namespace mok
