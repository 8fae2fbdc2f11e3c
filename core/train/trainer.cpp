#include "core/train/trainer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "core/config/config_io.h"
#include "core/data/batch_sampler.h"
#include "core/data/corpus.h"
#include "core/data/corpus_split.h"
#include "core/data/token_dataset.h"
#include "core/data/tokenizer.h"
#include "core/data/tokenizer_factory.h"
#include "core/dist/data_parallel.h"
#include "core/dist/dispatcher_factory.h"
#include "core/dist/link_model.h"
#include "core/dist/local_communicator.h"
#include "core/dist/mpi_communicator.h"
#include "core/model/language_model.h"
#include "core/model/moe_layer.h"
#include "core/store/run_store.h"
#include "core/store/run_store_sink.h"
#include "core/tensor/memory_tracker.h"
#include "core/train/adamw.h"
#include "core/train/checkpoint.h"
#include "core/train/grad_clip.h"
#include "core/train/lr_schedule.h"
#include "core/train/rank_context.h"
#include "core/util/thread_pool.h"

namespace mok {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kTokenizerFile = "tokenizer.txt";

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A folder-name-safe version of the run name.
std::string safe_name(const std::string& name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return s.empty() ? std::string("run") : s;
}

std::string timestamp_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

// Running maxima of the memory figures between two metric rows.
struct MemoryPeaks {
  int64_t total = 0;
  int64_t saved = 0;
  std::map<std::pair<int, std::string>, int64_t> saved_by_kind;

  void take(const MemoryTracker& t) {
    total = std::max(total, t.peak_total());
    saved = std::max(saved, t.peak_bytes(MemCategory::saved_activations));
    for (const auto& [key, kb] : t.saved_by_layer_kind()) {
      int64_t& v = saved_by_kind[key];
      v = std::max(v, kb.peak);
    }
  }
  void clear() {
    total = saved = 0;
    for (auto& [k, v] : saved_by_kind) v = 0;
  }
};

}  // namespace

struct Trainer::Session {
  // Declaration order = construction order; the tracker outlives every tensor.
  MemoryTracker tracker;
  std::vector<MetricSink*> sinks;
  std::optional<RunStore> store;
  std::unique_ptr<RunStoreSink> store_sink;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Tokenizer> tokenizer;
  TokenDataset data;
  std::unique_ptr<Communicator> mpi_comm;  // parallel.comm: mpi — this process's rank

  std::string resume_dir;
  TrainerState resumed;
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

  void event(const std::string& text) {
    for (MetricSink* s : sinks) s->on_event(text);
  }
};

namespace {

// The rank count of a run: the job size under MPI, else parallel.ranks.
int run_ranks(const ExperimentConfig& cfg, const Communicator* mpi_comm) {
  return mpi_comm ? mpi_comm->size() : cfg.parallel.ranks;
}

}  // namespace

std::string Trainer::unsupported_reason(const ExperimentConfig& cfg) {
  if (cfg.parallel.comm != "local" && cfg.parallel.comm != "mpi") {
    return "parallel.comm: '" + cfg.parallel.comm + "' is not available to the CPU trainer; use local or mpi";
  }
  if (cfg.parallel.comm == "mpi") {
    if (!mpi_available()) return "parallel.comm: mpi, but this build has no MPI support (install libopenmpi-dev and rebuild)";
    if (!mpi_launch_detected()) {
      return "parallel.comm: mpi needs one process per rank: launch with 'mpirun -np R mok train ...' "
             "(or srun -n R on a cluster), or use parallel.comm: local";
    }
  }
  if (const std::string why = parallel_config_problem(cfg, cfg.parallel.ranks); !why.empty()) return why;
  if (cfg.parallel.device != "cpu") {
    return "parallel.device: '" + cfg.parallel.device + "' is not available to the trainer yet; use cpu";
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
  if (config_.parallel.comm == "mpi") {
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
      s.resume_dir = resolve_checkpoint_dir(options_.resume_path);
      s.resumed = read_trainer_state(s.resume_dir);
      s.start_step = s.resumed.step;
      s.wall_offset_s = s.resumed.wall_s;
    }
    if (!options_.db_path.empty() && leader) {
      s.store.emplace(RunStore::open(options_.db_path));
      RunStoreSinkOptions so;
      so.device = options_.device_label;
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
  if (s.store && s.resumed.run_id > 0) {
    // Continue the same run in the store when it is there (same name); else a new run.
    try {
      auto rec = s.store->find_run(s.resumed.run_id);
      if (rec && rec->summary.name == config_.name) started.run_id = s.resumed.run_id;
    } catch (const std::exception&) {
    }
  }
  for (MetricSink* sink : s.sinks) sink->on_run_started(started);
  s.run_id = s.store_sink ? s.store_sink->run_id() : started.run_id;
  result.run_id = s.run_id;

  try {
    result = run_session(s);
  } catch (const std::exception& e) {
    result.status = RunStatus::failed;
    result.message = e.what();
    s.event(std::string("error: ") + e.what());
  }
  result.run_id = s.run_id;
  result.wall_s = s.wall_s();
  result.ranks = run_ranks(config_, s.mpi_comm.get());
  result.rank = s.mpi_comm ? s.mpi_comm->rank() : 0;
  for (MetricSink* sink : s.sinks) sink->on_run_finished(result.status, result.message);
  return result;
}

TrainResult Trainer::run_session(Session& s) {
  const ExperimentConfig& cfg = config_;
  ScopedMemoryTracker track(s.tracker);
  s.pool = std::make_unique<ThreadPool>(std::max(1, cfg.parallel.threads));
  ScopedThreadPool pool_scope(*s.pool);

  // --- data ---
  s.event("loading corpus " + cfg.data.corpus);
  const Corpus corpus = load_corpus(cfg.data.corpus);
  const CorpusSplit split = split_corpus(corpus, cfg.data.val_fraction);
  if (!s.resume_dir.empty() && fs::exists(fs::path(s.resume_dir) / kTokenizerFile)) {
    s.tokenizer = Tokenizer::load((fs::path(s.resume_dir) / kTokenizerFile).string());
  } else {
    s.tokenizer = make_tokenizer(cfg.data.tokenizer, cfg.data.vocab_size, split);
  }
  s.data = build_token_dataset(split, *s.tokenizer);
  s.event("data: " + std::to_string(corpus.documents.size()) + " documents, " +
          std::to_string(s.data.train.size()) + " train / " + std::to_string(s.data.val.size()) +
          " val tokens, tokenizer " + s.tokenizer->name() + " (" +
          std::to_string(s.tokenizer->vocab_size()) + " ids)");

  // Checkpoint folder of this run (written by rank 0 only).
  if (!s.resume_dir.empty()) {
    s.run_dir = fs::path(s.resume_dir).parent_path().string();
  } else {
    const fs::path root = options_.checkpoint_root.empty() ? cfg.logging.checkpoint_dir : options_.checkpoint_root;
    const std::string base = safe_name(cfg.name) + (s.run_id > 0 ? "-run" + std::to_string(s.run_id) : "-" + timestamp_now());
    fs::path dir = root / base;
    for (int k = 2; fs::exists(dir); ++k) dir = root / (base + "-" + std::to_string(k));
    s.run_dir = dir.string();
  }

  // --- ranks ---
  const int ranks = run_ranks(cfg, s.mpi_comm.get());
  const LinkModel link = LinkModel::from_config(cfg.parallel, cfg.parallel.link_sleep);
  auto context = [&](Communicator& comm) {
    RankContext rc;
    rc.comm = &comm;
    rc.rank = comm.rank();
    rc.ranks = comm.size();
    if (cfg.model.experts > 0) rc.placement = ExpertPlacement::parse(cfg.parallel.expert_placement, cfg.model.experts, rc.ranks);
    return rc;
  };
  if (s.mpi_comm) {
    // One rank per process: this thread, this process's tracker and pool.
    s.mpi_comm->set_link(link);
    RankContext rc = context(*s.mpi_comm);
    return run_rank(s, rc, s.tracker);
  }
  if (ranks == 1) {
    RankContext rc;  // no communicator: the single-rank path, unchanged
    return run_rank(s, rc, s.tracker);
  }
  // R threads of this process, each with its own memory tracker and thread pool.
  s.event("parallel: " + std::to_string(ranks) + " local ranks, " + std::to_string(std::max(1, cfg.parallel.threads)) +
          " threads each");
  TrainResult result;
  run_local_ranks(
      ranks,
      [&](Communicator& comm) {
        MemoryTracker tracker;
        ScopedMemoryTracker track_rank(tracker);
        ThreadPool pool(std::max(1, cfg.parallel.threads));
        ScopedThreadPool pool_rank(pool);
        RankContext rc = context(comm);
        TrainResult r = run_rank(s, rc, tracker);
        if (rc.leader()) result = std::move(r);
      },
      link);
  return result;
}

TrainResult Trainer::run_rank(Session& s, RankContext& rc, MemoryTracker& tracker) {
  const ExperimentConfig& cfg = config_;
  const TrainConfig& tc = cfg.train;
  TrainResult result;
  // Sinks, events, checkpoints and the store belong to rank 0 (the leader).
  auto event = [&](const std::string& text) {
    if (rc.leader()) s.event(text);
  };

  // --- model and optimizer ---
  ModelOptions mo;
  mo.model = cfg.model;
  mo.kittens = cfg.kittens;
  mo.routing = cfg.routing;
  mo.vocab_size = s.tokenizer->vocab_size();
  mo.max_seq_len = cfg.data.seq_len;
  mo.seed = cfg.seed;
  // Kitten rank schedules (linear, cosine) run over the whole planned run.
  mo.train_steps = tc.steps;
  // Expert parallelism: this rank builds only its own experts (same seed → every replica
  // starts from the same dense weights, and each expert from its R = 1 values).
  if (rc.parallel() && cfg.model.experts > 0) mo.local_experts = expert_ownership(rc.placement, rc.rank);
  auto model = std::make_unique<LanguageModel>(mo);
  if (rc.parallel() && cfg.model.experts > 0) {
    MokCalibration cal;
    rc.dispatchers = install_expert_parallel(*model, cfg, *rc.comm, rc.placement, &cal);
    if (cal.link_gbps > 0.0) {
      char text[256];
      std::snprintf(text, sizeof text,
                    "mok cost model calibrated: link %.4g GB/s, gradient add %.4g GFLOP/s (pin with "
                    "routing.cost_link_gbps=%.6g routing.cost_compute_gflops=%.6g to replay)",
                    cal.link_gbps, cal.compute_gflops, cal.link_gbps, cal.compute_gflops);
      event(text);
    }
  }
  const std::vector<Parameter*> params = model->parameters();  // null experts are skipped
  auto adam = std::make_unique<AdamW>(params, AdamWOptions{tc.beta1, tc.beta2, tc.eps, tc.weight_decay});
  result.parameter_count = model->parameter_count();
  size_t model_tensors = params.size();  // parameter tensors of the whole model
  if (rc.parallel()) {
    // The whole model: dense parameters once, every rank's experts.
    int64_t counts[2] = {0, 0};  // expert values, expert tensors
    int64_t dense = 0, dense_tensors = 0;
    for (const Parameter* p : params) {
      if (p->expert) {
        counts[0] += p->value.numel();
        counts[1] += 1;
      } else {
        dense += p->value.numel();
        dense_tensors += 1;
      }
    }
    rc.comm->all_reduce_sum(counts, 2, CommPurpose::control);
    result.parameter_count = dense + counts[0];
    model_tensors = static_cast<size_t>(dense_tensors + counts[1]);
  }
  event("model: " + std::to_string(result.parameter_count) + " parameters" +
        (rc.parallel() ? ", " + std::to_string(rc.ranks) + " ranks (" + rc.placement.describe() + ", " +
                             cfg.routing.dispatcher + " dispatch)"
                       : std::string()));

  if (!s.resume_dir.empty()) {
    // By name: a rank loads the dense parameters and its own experts of a full checkpoint.
    load_model_weights(s.resume_dir, params, model_tensors);
    load_optimizer_state(s.resume_dir, *adam);
    if (s.resumed.seed != cfg.seed) {
      event("warning: resuming a run of seed " + std::to_string(s.resumed.seed) + " with seed " +
            std::to_string(cfg.seed) + ": the data order changes");
    }
    event("resumed from " + s.resume_dir + " at step " + std::to_string(s.start_step));
  }

  const LrSchedule schedule = LrSchedule::from_config(tc);
  const int seq = cfg.data.seq_len;
  const int micro = tc.batch / tc.grad_accum;
  const int64_t tokens_per_step = static_cast<int64_t>(tc.batch) * seq;
  // This rank's rows of every micro-batch: all of them when R = 1.
  const int rows = rc.shard_rows(micro);
  const int row0 = rc.shard_begin(micro);
  std::vector<int32_t> tokens(static_cast<size_t>(micro) * seq), targets(tokens.size());

  int64_t step = s.start_step;  // optimizer steps completed
  int64_t tokens_seen = s.resume_dir.empty() ? 0 : s.resumed.tokens_seen;
  int64_t last_checkpoint_step = s.resume_dir.empty() ? -1 : s.start_step;

  auto validate = [&](MetricRow& row) {
    double loss_sum = 0.0;
    int64_t n = 0;
    for (int b = 0; b < tc.eval_batches; ++b) {
      val_batch(s.data, b, micro, seq, tokens.data(), targets.data());
      // A rank evaluates its rows of the batch (all of them when R = 1).
      const size_t at = static_cast<size_t>(row0) * seq;
      const ForwardStats st = model->evaluate(tokens.data() + at, targets.data() + at, rows, seq);
      loss_sum += st.loss * static_cast<double>(st.tokens);
      n += st.tokens;
    }
    if (rc.parallel()) {
      double sums[2] = {loss_sum, static_cast<double>(n)};
      rc.comm->all_reduce_sum(sums, 2, CommPurpose::control);
      loss_sum = sums[0];
      n = static_cast<int64_t>(sums[1]);
    }
    const double loss = n > 0 ? loss_sum / static_cast<double>(n) : 0.0;
    result.val_loss = loss;
    result.val_bpb = bits_per_byte(loss, n, s.data.val_bytes_per_token());
    result.val_ppl = std::exp(loss);
    row.values.push_back({"val/loss", result.val_loss});
    row.values.push_back({"val/bpb", result.val_bpb});
    row.values.push_back({"val/ppl", result.val_ppl});
  };

  auto checkpoint = [&] {
    if (!options_.write_checkpoints) return;
    // R > 1: collective — rank 0 gathers every rank's experts (and their moments) and writes
    // the same full checkpoint R = 1 would; the other ranks only send.
    GatheredModel gathered;
    if (rc.parallel()) gathered = gather_model(rc, *model, params, *adam);
    if (!rc.leader()) return;
    TrainerState st;
    st.step = step;
    st.tokens_seen = tokens_seen;
    st.total_steps = tc.steps;
    st.run_id = s.run_id;
    st.run_name = cfg.name;
    st.seed = cfg.seed;
    st.wall_s = s.wall_s();
    st.mok_version = MOK_GIT_VERSION;
    st.counters["data.next_step"] = step;
    const std::string dir = (fs::path(s.run_dir) / checkpoint_folder_name(step)).string();
    save_checkpoint(dir, rc.parallel() ? gathered.params : params, rc.parallel() ? gathered.adam.get() : adam.get(), st,
                    s.config_yaml, [&](const std::string& tmp) {
                      s.tokenizer->save((fs::path(tmp) / kTokenizerFile).string());
                    });
    last_checkpoint_step = step;
    result.checkpoint_dir = dir;
    for (MetricSink* sink : s.sinks) sink->on_checkpoint(step, dir);
  };

  MemoryPeaks peaks;
  RunStatus status = RunStatus::finished;
  while (step < tc.steps) {
    if (rc.leader()) wait_while_paused(s);
    bool stop = stop_requested();
    if (rc.parallel()) {
      // Rank 0 decides, so every rank leaves the loop at the same step.
      int64_t flag = rc.leader() && stop ? 1 : 0;
      rc.comm->broadcast(&flag, sizeof flag, 0, CommPurpose::control);
      stop = flag != 0;
    }
    if (stop) {
      status = RunStatus::stopped;
      break;
    }
    const CommStats comm_before = rc.parallel() ? rc.comm->stats() : CommStats{};
    tracker.reset_peaks();
    const auto t0 = Clock::now();
    model->set_step(step);
    model->zero_grad();
    double loss = 0.0, aux = 0.0, z = 0.0, locality = 0.0;
    int64_t dropped = 0;
    std::vector<std::vector<int64_t>> expert_load;
    std::vector<int> moe_layer_ids;  // block index of each expert_load entry
    StepFigures fig;                 // R > 1: this rank's part, summed over ranks below
    for (int m = 0; m < tc.grad_accum; ++m) {
      if (rc.parallel()) {
        // Rows are sampled independently, so this rank's rows are those rows of R = 1's batch.
        for (int i = 0; i < rows; ++i)
          sample_train_row(s.data, cfg.seed, step, m, row0 + i, seq, tokens.data() + static_cast<size_t>(i) * seq,
                           targets.data() + static_cast<size_t>(i) * seq);
      } else {
        sample_train_batch(s.data, cfg.seed, step, m, micro, seq, tokens.data(), targets.data());
      }
      const ForwardStats st = model->forward(tokens.data(), targets.data(), rows, seq);
      // 1/R: each rank's mean loss is 1/R of the global-batch mean, so the gradients summed
      // over ranks below are those of R = 1.
      model->backward(1.0 / (static_cast<double>(tc.grad_accum) * rc.ranks));
      loss += st.loss;
      aux += st.aux_loss;
      z += st.z_loss;
      locality += st.locality_loss;
      dropped += st.dropped_tokens;
      fig.loss_sum += st.loss * static_cast<double>(st.tokens);
      fig.tokens += static_cast<double>(st.tokens);
      for (const ExpertDispatcher* d : rc.dispatchers) fig.local_pairs += static_cast<double>(last_dispatch_counts(*d).local_pairs);
      moe_layer_ids = st.moe_layer_ids;
      if (expert_load.size() < st.expert_load.size()) expert_load.resize(st.expert_load.size());
      for (size_t l = 0; l < st.expert_load.size(); ++l) {
        auto& dst = expert_load[l];
        if (dst.size() < st.expert_load[l].size()) dst.resize(st.expert_load[l].size(), 0);
        for (size_t e = 0; e < st.expert_load[l].size(); ++e) dst[e] += st.expert_load[l][e];
      }
    }
    loss /= tc.grad_accum;
    aux /= tc.grad_accum;
    z /= tc.grad_accum;
    locality /= tc.grad_accum;
    double grad_norm = 0.0;
    if (rc.parallel()) {
      // Dense gradients summed over ranks (fixed order: identical bits on every rank), then
      // the norm over all parameters of all ranks, so clipping is the same as with R = 1.
      all_reduce_dense_gradients(*rc.comm, params);
      grad_norm = clip_grad_norm_to(params, std::sqrt(global_grad_norm_sq(*rc.comm, params)), tc.grad_clip);
    } else {
      grad_norm = clip_grad_norm(params, tc.grad_clip);
    }
    const double lr = schedule.lr_at(step);
    adam->step(lr);
    double step_s = seconds_between(t0, Clock::now());
    if (rc.parallel()) {
      // Sum the step's figures over ranks (this reduction is not part of the step's traffic).
      fig.take_comm(rc.comm->stats(), comm_before);
      fig.step_s = step_s;
      fig.dropped = static_cast<double>(dropped);
      fig.aux = aux * tc.grad_accum;
      fig.z = z * tc.grad_accum;
      fig.locality = locality * tc.grad_accum;
      fig.load.resize(expert_load.size());
      for (size_t l = 0; l < expert_load.size(); ++l) fig.load[l].assign(expert_load[l].begin(), expert_load[l].end());
      reduce_step_figures(rc, fig);
      const double R = rc.ranks;
      loss = fig.tokens > 0 ? fig.loss_sum / fig.tokens : 0.0;
      aux = fig.aux / (R * tc.grad_accum);  // every rank holds the same number of tokens
      z = fig.z / (R * tc.grad_accum);
      locality = fig.locality / (R * tc.grad_accum);
      dropped = static_cast<int64_t>(fig.dropped);
      for (size_t l = 0; l < expert_load.size(); ++l)
        for (size_t e = 0; e < expert_load[l].size(); ++e) expert_load[l][e] = static_cast<int64_t>(fig.load[l][e]);
      step_s = fig.step_s / R;  // mean over ranks
      result.comm_bytes_remote += static_cast<int64_t>(fig.remote_bytes);
    }
    ++step;
    tokens_seen += tokens_per_step;
    if (rc.leader()) {
      s.train_s += step_s;
      s.session_tokens += tokens_per_step;
    }
    peaks.take(tracker);
    result.peak_bytes = std::max(result.peak_bytes, tracker.peak_total());
    result.peak_saved_activation_bytes =
        std::max(result.peak_saved_activation_bytes, tracker.peak_bytes(MemCategory::saved_activations));
    result.train_loss = loss;
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      throw std::runtime_error("training diverged at step " + std::to_string(step) + " (loss " +
                               std::to_string(loss) + ", grad norm " + std::to_string(grad_norm) +
                               "); try a lower train.lr or a train.grad_clip");
    }

    const bool last = step == tc.steps;
    const bool eval = last || (tc.eval_every > 0 && step % tc.eval_every == 0);
    const bool log = eval || tc.log_every <= 1 || step % tc.log_every == 0;
    if (log) {
      MetricRow row;
      row.step = step;
      row.tokens = tokens_seen;
      auto& v = row.values;
      v.push_back({"train/loss", loss});
      v.push_back({"train/aux_loss", aux});
      v.push_back({"train/z_loss", z});
      v.push_back({"train/locality_loss", locality});
      v.push_back({"train/lr", lr});
      v.push_back({"train/grad_norm", grad_norm});
      v.push_back({"perf/tokens_per_s", step_s > 0 ? tokens_per_step / step_s : 0.0});
      v.push_back({"perf/step_ms", step_s * 1e3});
      if (rc.parallel()) {
        // Traffic: bytes sent to other ranks during the step, summed over ranks. Times: per
        // rank, averaged over ranks (comm = inside collectives, waiting for peers included).
        const double R = rc.ranks;
        v.push_back({"comm/remote_bytes", fig.remote_bytes});
        v.push_back({"comm/dispatch_bytes", fig.dispatch_bytes});
        v.push_back({"comm/combine_bytes", fig.combine_bytes});
        v.push_back({"comm/grad_bytes", fig.grad_bytes});
        v.push_back({"comm/local_tokens", fig.local_pairs});
        v.push_back({"perf/comm_ms", fig.comm_s / R * 1e3});
        v.push_back({"perf/compute_ms", (fig.step_s - fig.comm_s) / R * 1e3});
        if (rc.comm->link().enabled()) v.push_back({"comm/modeled_ms", fig.modeled_s / R * 1e3});
      }
      for (int c = 0; c < static_cast<int>(MemCategory::count); ++c) {
        const auto cat = static_cast<MemCategory>(c);
        v.push_back({std::string("mem/") + mem_category_name(cat) + "_bytes",
                     static_cast<double>(tracker.live_bytes(cat))});
      }
      v.push_back({"mem/peak_bytes", static_cast<double>(peaks.total)});
      v.push_back({"mem/peak_saved_activation_bytes", static_cast<double>(peaks.saved)});
      for (const auto& [key, bytes] : peaks.saved_by_kind) {
        const std::string layer = key.first >= 0 ? "layer" + std::to_string(key.first) : std::string("model");
        v.push_back({"mem/saved/" + layer + "/" + key.second, static_cast<double>(bytes)});
      }
      if (!expert_load.empty()) {
        v.push_back({"moe/dropped_tokens", static_cast<double>(dropped)});
        for (size_t l = 0; l < expert_load.size(); ++l) {
          const int layer = l < moe_layer_ids.size() ? moe_layer_ids[l] : static_cast<int>(l);
          for (size_t e = 0; e < expert_load[l].size(); ++e) {
            v.push_back({"moe/load/layer" + std::to_string(layer) + "/expert" + std::to_string(e),
                         static_cast<double>(expert_load[l][e])});
          }
        }
      }
      // Kitten policy of the step just taken: kittens/rank/layer<L>, kittens/error/layer<L>
      // (empty with kittens.mode: exact; rank 0's figures when R > 1).
      for (const auto& [name, value] : model->kitten_metrics()) v.push_back({name, value});
      if (eval) validate(row);  // collective when R > 1
      row.wall_s = s.wall_s();
      peaks.clear();
      if (rc.leader())
        for (MetricSink* sink : s.sinks) sink->on_metrics(row);
    }
    if (last || (tc.checkpoint_every > 0 && step % tc.checkpoint_every == 0)) checkpoint();
  }

  if (status == RunStatus::stopped) {
    if (last_checkpoint_step != step && step > s.start_step) checkpoint();
    result.message = "stopped at step " + std::to_string(step) + " of " + std::to_string(tc.steps);
  } else if (s.start_step >= tc.steps) {
    // Nothing left to train: report the checkpoint's validation figures.
    MetricRow row;
    validate(row);
    result.message = "already at step " + std::to_string(step);
  }
  result.status = status;
  result.steps = step;
  result.tokens = tokens_seen;
  result.tokens_per_s = s.train_s > 0 ? static_cast<double>(s.session_tokens) / s.train_s : 0.0;
  result.ranks = rc.ranks;
  result.rank = rc.rank;
  return result;
}

}  // namespace mok
