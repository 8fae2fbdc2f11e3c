#include "core/train/trainer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
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
#include "core/model/language_model.h"
#include "core/store/run_store.h"
#include "core/store/run_store_sink.h"
#include "core/tensor/memory_tracker.h"
#include "core/train/adamw.h"
#include "core/train/checkpoint.h"
#include "core/train/grad_clip.h"
#include "core/train/lr_schedule.h"
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
  std::unique_ptr<LanguageModel> model;
  std::vector<Parameter*> params;
  std::unique_ptr<AdamW> adam;

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

std::string Trainer::unsupported_reason(const ExperimentConfig& cfg) {
  if (cfg.parallel.ranks != 1) {
    return "parallel.ranks: " + std::to_string(cfg.parallel.ranks) +
           " ranks are not wired into the trainer yet; use parallel.ranks: 1";
  }
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
  try {
    s.config_yaml = options_.config_yaml.empty() ? experiment_config_to_yaml(config_) : options_.config_yaml;
    if (!options_.resume_path.empty()) {
      s.resume_dir = resolve_checkpoint_dir(options_.resume_path);
      s.resumed = read_trainer_state(s.resume_dir);
      s.start_step = s.resumed.step;
      s.wall_offset_s = s.resumed.wall_s;
    }
    if (!options_.db_path.empty()) {
      s.store.emplace(RunStore::open(options_.db_path));
      RunStoreSinkOptions so;
      so.device = options_.device_label;
      s.store_sink = std::make_unique<RunStoreSink>(*s.store, so);
      s.sinks.insert(s.sinks.begin(), s.store_sink.get());
    }
  } catch (const std::exception& e) {
    return fail_early(e.what());
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
  for (MetricSink* sink : s.sinks) sink->on_run_finished(result.status, result.message);
  return result;
}

TrainResult Trainer::run_session(Session& s) {
  const ExperimentConfig& cfg = config_;
  const TrainConfig& tc = cfg.train;
  TrainResult result;
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
  s.model = std::make_unique<LanguageModel>(mo);
  s.params = s.model->parameters();
  s.adam = std::make_unique<AdamW>(
      s.params, AdamWOptions{tc.beta1, tc.beta2, tc.eps, tc.weight_decay});
  result.parameter_count = s.model->parameter_count();
  s.event("model: " + std::to_string(result.parameter_count) + " parameters");

  if (!s.resume_dir.empty()) {
    load_model_weights(s.resume_dir, s.params);
    load_optimizer_state(s.resume_dir, *s.adam);
    if (s.resumed.seed != cfg.seed) {
      s.event("warning: resuming a run of seed " + std::to_string(s.resumed.seed) + " with seed " +
              std::to_string(cfg.seed) + ": the data order changes");
    }
    s.event("resumed from " + s.resume_dir + " at step " + std::to_string(s.start_step));
  }

  // Checkpoint folder of this run.
  if (!s.resume_dir.empty()) {
    s.run_dir = fs::path(s.resume_dir).parent_path().string();
  } else {
    const fs::path root = options_.checkpoint_root.empty() ? cfg.logging.checkpoint_dir : options_.checkpoint_root;
    const std::string base = safe_name(cfg.name) + (s.run_id > 0 ? "-run" + std::to_string(s.run_id) : "-" + timestamp_now());
    fs::path dir = root / base;
    for (int k = 2; fs::exists(dir); ++k) dir = root / (base + "-" + std::to_string(k));
    s.run_dir = dir.string();
  }

  const LrSchedule schedule = LrSchedule::from_config(tc);
  const int seq = cfg.data.seq_len;
  const int micro = tc.batch / tc.grad_accum;
  const int64_t tokens_per_step = static_cast<int64_t>(tc.batch) * seq;
  std::vector<int32_t> tokens(static_cast<size_t>(micro) * seq), targets(tokens.size());

  int64_t step = s.start_step;  // optimizer steps completed
  int64_t tokens_seen = s.resume_dir.empty() ? 0 : s.resumed.tokens_seen;
  int64_t last_checkpoint_step = s.resume_dir.empty() ? -1 : s.start_step;

  auto validate = [&](MetricRow& row) {
    double loss_sum = 0.0;
    int64_t n = 0;
    for (int b = 0; b < tc.eval_batches; ++b) {
      val_batch(s.data, b, micro, seq, tokens.data(), targets.data());
      const ForwardStats st = s.model->evaluate(tokens.data(), targets.data(), micro, seq);
      loss_sum += st.loss * static_cast<double>(st.tokens);
      n += st.tokens;
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
    save_checkpoint(dir, s.params, s.adam.get(), st, s.config_yaml, [&](const std::string& tmp) {
      s.tokenizer->save((fs::path(tmp) / kTokenizerFile).string());
    });
    last_checkpoint_step = step;
    result.checkpoint_dir = dir;
    for (MetricSink* sink : s.sinks) sink->on_checkpoint(step, dir);
  };

  MemoryPeaks peaks;
  RunStatus status = RunStatus::finished;
  while (step < tc.steps) {
    wait_while_paused(s);
    if (stop_requested()) {
      status = RunStatus::stopped;
      break;
    }
    s.tracker.reset_peaks();
    const auto t0 = Clock::now();
    s.model->set_step(step);
    s.model->zero_grad();
    double loss = 0.0, aux = 0.0, z = 0.0;
    int64_t dropped = 0;
    std::vector<std::vector<int64_t>> expert_load;
    std::vector<int> moe_layer_ids;  // block index of each expert_load entry
    for (int m = 0; m < tc.grad_accum; ++m) {
      sample_train_batch(s.data, cfg.seed, step, m, micro, seq, tokens.data(), targets.data());
      const ForwardStats st = s.model->forward(tokens.data(), targets.data(), micro, seq);
      s.model->backward(1.0 / tc.grad_accum);
      loss += st.loss;
      aux += st.aux_loss;
      z += st.z_loss;
      dropped += st.dropped_tokens;
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
    const double grad_norm = clip_grad_norm(s.params, tc.grad_clip);
    const double lr = schedule.lr_at(step);
    s.adam->step(lr);
    const double step_s = seconds_between(t0, Clock::now());
    ++step;
    tokens_seen += tokens_per_step;
    s.train_s += step_s;
    s.session_tokens += tokens_per_step;
    peaks.take(s.tracker);
    result.peak_bytes = std::max(result.peak_bytes, s.tracker.peak_total());
    result.peak_saved_activation_bytes =
        std::max(result.peak_saved_activation_bytes, s.tracker.peak_bytes(MemCategory::saved_activations));
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
      v.push_back({"train/lr", lr});
      v.push_back({"train/grad_norm", grad_norm});
      v.push_back({"perf/tokens_per_s", step_s > 0 ? tokens_per_step / step_s : 0.0});
      v.push_back({"perf/step_ms", step_s * 1e3});
      for (int c = 0; c < static_cast<int>(MemCategory::count); ++c) {
        const auto cat = static_cast<MemCategory>(c);
        v.push_back({std::string("mem/") + mem_category_name(cat) + "_bytes",
                     static_cast<double>(s.tracker.live_bytes(cat))});
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
      // (empty with kittens.mode: exact).
      for (const auto& [name, value] : s.model->kitten_metrics()) v.push_back({name, value});
      if (eval) validate(row);
      row.wall_s = s.wall_s();
      peaks.clear();
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
  return result;
}

}  // namespace mok
