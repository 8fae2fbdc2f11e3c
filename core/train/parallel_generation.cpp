#include "core/train/parallel_generation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include "core/config/config_io.h"
#include "core/data/batch_sampler.h"
#include "core/data/corpus.h"
#include "core/data/corpus_split.h"
#include "core/data/token_dataset.h"
#include "core/data/tokenizer.h"
#include "core/data/tokenizer_factory.h"
#include "core/backend/exec_context.h"
#include "core/model/init.h"
#include "core/parallel/data_plane.h"
#include "core/parallel/dispatcher_factory.h"
#include "core/parallel/expert_placement.h"
#include "core/parallel/link_model.h"
#include "core/parallel/local_communicator.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/parallel/mok_step_log.h"
#include "core/model/batched_inference_session.h"
#include "core/model/language_model.h"
#include "core/model/moe_layer.h"
#include "core/tensor/memory_tracker.h"
#include "core/train/checkpoint.h"
#include "core/train/op_profile_window.h"
#include "core/train/rank_device.h"
#include "core/train/rank_launch.h"
#include "core/train/resident_experts.h"
#include "core/util/counter_rng.h"
#include "core/util/thread_pool.h"

namespace mok {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The checkpoint's config with the options' overrides applied.
ExperimentConfig effective_config(ExperimentConfig cfg, const ParallelGenerateOptions& o) {
  if (!o.dispatcher.empty()) cfg.routing.dispatcher = o.dispatcher;
  if (o.link_gbps >= 0) cfg.parallel.link_gbps = o.link_gbps;
  if (o.link_latency_us >= 0) cfg.parallel.link_latency_us = o.link_latency_us;
  if (o.threads > 0) cfg.parallel.threads = o.threads;
  return cfg;
}

// What every rank shares: the config, the tokenizer and the prompts (B, prompt_len).
struct Shared {
  std::string dir;  // the checkpoint folder; "" when untrained (the model keeps its drawn weights)
  std::string untrained_config;
  ExperimentConfig cfg;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> prompts;
  int prompt_len = 0;
};

// What one rank produced: its sequences' tokens and logits, and its figures.
struct RankOutput {
  std::vector<int32_t> tokens;  // (local sequences, prompt_len + new)
  std::vector<float> logits;    // keep_logits: (local sequences, new, vocab)
  double prefill_s = 0.0, decode_s = 0.0;
  std::string device, precision;  // the rank's (RankDevice::name, precision)
  int64_t peak_bytes = 0, peak_device_bytes = 0;  // the rank's tracker, from the start of run_rank
  int64_t peak_block_bytes = 0;  // its allocator's live blocks (on the CPU the process's), likewise
  int64_t peak_reserved_bytes = 0;  // what its allocator held, cache included, likewise
  int64_t parameter_bytes = 0;       // its parameter tensors' peak (the tracker's category)
  int64_t kv_cache_bytes = 0;        // its KV caches' peak (likewise)
  // remote, dispatch, combine, weights, control bytes, modeled seconds, shadowed, saved
  std::vector<double> figures;
  std::string decode_layout;  // fixed | counted | none; "" on one rank or without experts
  int resident_layers = 0;
  int64_t resident_bytes = 0;  // the copies of experts it does not own
  int64_t replayed_steps = 0;
};

// The routed-expert parameters of `resident` layers that this rank holds beyond the experts it
// owns: read from the checkpoint like its own, never sent between ranks.
std::vector<const Parameter*> resident_copies(LanguageModel& model, const std::vector<bool>& resident,
                                              const std::vector<bool>& owned) {
  std::vector<const Parameter*> out;
  const std::vector<MoeLayer*> layers = model.moe_layers();
  for (size_t l = 0; l < layers.size() && l < resident.size(); ++l) {
    if (!layers[l] || !resident[l]) continue;
    ExpertBank& bank = layers[l]->experts();
    for (int e = 0; e < bank.size(); ++e) {
      if (owned[static_cast<size_t>(e)] || !bank.experts[e]) continue;
      out.push_back(&bank.experts[e]->up().weight());
      out.push_back(&bank.experts[e]->down().weight());
    }
  }
  return out;
}

// local_rank: the rank's index on its host (it picks the GPU of parallel.device cuda).
RankOutput run_rank(const Shared& sh, const ParallelGenerateOptions& o, Communicator* comm, int local_rank) {
  const ExperimentConfig& cfg = sh.cfg;
  const int rank = comm ? comm->rank() : 0;
  const int ranks = comm ? comm->size() : 1;
  const int local = o.batch / ranks;
  const int first = rank * local;
  const int context = cfg.data.seq_len;
  const bool parallel = comm && ranks > 1 && cfg.model.experts > 0;
  // The rank's device (parallel.device, parallel.gpus, train.precision), as in training; rows
  // between GPU ranks move through the device's data plane (NCCL), between CPU ranks as host
  // messages.
  const RankDevice device = bind_rank_device(cfg, rank, ranks, local_rank);
  ScopedExecContext on_device(device.exec());
  // parallel.device_memory_limit on this rank's tracker (and a GPU's allocator), as in
  // training; the peaks restart here so that they measure generation alone.
  MemoryTracker& tracker = MemoryTracker::current();
  const DeviceType device_type = device.exec().device().type;
  const int64_t limit = cfg.parallel.device_memory_limit_bytes();
  struct LimitScope {
    MemoryTracker& tracker;
    DeviceType type;
    int64_t previous;
    ~LimitScope() { tracker.set_limit(type, previous); }
  } limit_scope{tracker, device_type, tracker.limit(device_type)};
  tracker.set_limit(device_type, limit);
  if (!device.exec().is_cpu()) device.exec().allocator().set_limit(limit);
  tracker.reset_peaks();
  device.exec().allocator().reset_peak_reserved();
  std::unique_ptr<DataPlane> plane;
  if (parallel && !device.exec().is_cpu()) plane = make_data_plane(*comm, device.exec(), data_plane_transport(cfg));

  ModelOptions mo;
  mo.model = cfg.model;
  mo.kittens = cfg.kittens;
  mo.routing = cfg.routing;
  mo.vocab_size = sh.tokenizer->vocab_size();
  mo.max_seq_len = context;
  mo.seed = cfg.seed;
  ExpertPlacement placement;
  if (parallel) {
    placement = ExpertPlacement::parse(cfg.parallel.expert_placement, cfg.model.experts, ranks);
    mo.local_experts = expert_ownership(placement, rank);
    // Resident layers: the smallest count any rank can hold, so that every rank dispatches the
    // same layers.
    ExperimentConfig run = cfg;
    run.parallel.ranks = ranks;
    const GenerationShape shape{o.batch, sh.prompt_len, o.max_new_tokens, 0};
    double fewest = -resident_layer_count(o.resident_experts, run, shape,
                                          static_cast<double>(device.exec().allocator().device_capacity_bytes()));
    comm->all_reduce_max(&fewest, 1, CommPurpose::control);
    mo.resident_layers = resident_layer_mask(cfg.model, static_cast<int>(-fewest));
  }
  const int resident = static_cast<int>(std::count(mo.resident_layers.begin(), mo.resident_layers.end(), true));
  const bool every_layer_resident = parallel && resident == moe_layer_count(cfg.model);
  const ForwardOnlyParameters forward_only;  // decoding needs no gradients: 4 bytes per weight fewer
  LanguageModel model(mo);
  std::vector<ExpertDispatcher*> dispatchers;
  if (parallel)
    dispatchers = install_expert_parallel(model, cfg, *comm, placement, nullptr, plane.get(), mo.resident_layers);
  RankOutput out;
  out.resident_layers = resident;
  const std::vector<const Parameter*> copies =
      parallel ? resident_copies(model, mo.resident_layers, mo.local_experts) : std::vector<const Parameter*>{};
  if (every_layer_resident) {
    out.decode_layout = "none";  // no MoE layer exchanges rows
  } else if (parallel) {
    // A decode step has `local` rows on every rank (the prefill `local` × prompt length).
    // The fixed layout never shadows: auto keeps counting where shadows are asked for.
    const bool automatic = o.decode_layout.empty() || o.decode_layout == "auto";
    const bool fixed = o.decode_layout == "fixed" || (automatic && plane && cfg.routing.shadow != "always");
    out.decode_layout = fixed ? "fixed" : "counted";
    if (fixed) set_fixed_layout_max_rows(dispatchers, local);
  }
  const std::vector<Parameter*> params = model.parameters();  // null experts skipped
  if (sh.dir.empty()) {
    // Untrained: the weights the model drew from the config's seed stay (by parameter name,
    // so every rank holds the same values of a dense or resident tensor).
  } else if (comm && ranks > 1) {
    // A rank holds the dense parameters, its own experts of the full checkpoint and the
    // resident layers' other experts (counted once: every rank holds those).
    int64_t owned_expert_tensors = 0, dense_tensors = 0;
    for (const Parameter* p : params) (p->expert ? owned_expert_tensors : dense_tensors) += 1;
    owned_expert_tensors -= static_cast<int64_t>(copies.size());
    comm->all_reduce_sum(&owned_expert_tensors, 1, CommPurpose::control);
    load_model_weights(sh.dir, params, static_cast<size_t>(dense_tensors + owned_expert_tensors));
  } else {
    load_model_weights(sh.dir, params);
  }
  ExecContext::current().ops().refresh_compute_copies(params);  // bf16 copies of the loaded values (GPU)
  for (const Parameter* p : copies) out.resident_bytes += p->value.bytes() + p->compute_copy.bytes();
  MokDecisionLog mok_log;
  for (ExpertDispatcher* d : dispatchers)
    if (auto* m = dynamic_cast<MokDispatcher*>(d)) m->set_decision_log(&mok_log);

  // This rank's sequences.
  const int L = sh.prompt_len;
  std::vector<std::vector<int32_t>> seqs(local);
  std::vector<CounterRng> rngs;
  for (int b = 0; b < local; ++b) {
    seqs[b].assign(sh.prompts.begin() + static_cast<int64_t>(first + b) * L,
                   sh.prompts.begin() + static_cast<int64_t>(first + b + 1) * L);
    seqs[b].reserve(L + o.max_new_tokens);
    rngs.emplace_back(o.seed, 0x67656eULL + (static_cast<uint64_t>(first + b) << 32));
  }
  const int vocab = mo.vocab_size;
  out.device = device.name;
  out.precision = device.precision;
  if (o.keep_logits) out.logits.reserve(static_cast<size_t>(local) * o.max_new_tokens * vocab);
  std::vector<std::vector<float>> logit_rows(o.keep_logits ? local : 0);

  // MOK_OP_PROFILE=FIRST:COUNT times decode steps FIRST.. op by op (1-based, as training's
  // steps), so a profiled run replays nothing.
  OpProfileWindow profile;
  if (rank == 0 && !profile.warning().empty()) std::fprintf(stderr, "%s\n", profile.warning().c_str());
  Ops& ops = ExecContext::current().ops();
  const std::string rank_label =
      "decode, rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " (" + ops.name() + ")";
  BatchedInferenceSession session(model, local, context);
  // Decode steps from a recorded one where it can: on one rank, and over ranks where no MoE
  // layer exchanges rows (every one resident).
  session.set_replay((!parallel || every_layer_resident) && !profile.active());
  // Restarts every cache from the last `keep` tokens of each sequence (all the same length).
  auto refill = [&](int keep) {
    std::vector<int32_t> p;
    p.reserve(static_cast<size_t>(local) * keep);
    for (const auto& s : seqs) p.insert(p.end(), s.end() - keep, s.end());
    return session.prefill(p, keep);
  };
  const CommStats before = comm ? comm->stats() : CommStats{};
  if (comm) comm->barrier();  // start together: rank 0's clock measures the whole job
  const auto t0 = Clock::now();
  std::vector<real> logits = refill(std::min(L, context));
  out.prefill_s = seconds_since(t0);
  const auto t1 = Clock::now();
  std::vector<int32_t> next;  // this step's token of each sequence
  for (int i = 0; i < o.max_new_tokens; ++i) {
    next = sample_tokens(logits, vocab, o.sampling, rngs);
    for (int b = 0; b < local; ++b) {
      if (o.keep_logits) {
        const float* row = logits.data() + static_cast<int64_t>(b) * vocab;
        logit_rows[b].insert(logit_rows[b].end(), row, row + vocab);
      }
      seqs[b].push_back(next[b]);
    }
    if (i + 1 == o.max_new_tokens) break;
    if (session.position() >= session.max_len()) {
      logits = refill(std::max(1, context / 2));
      continue;
    }
    const auto step_start = Clock::now();
    profile.before_step(ops, i + 1);
    logits = session.decode(next);  // read on the host: the step has ended
    profile.after_step(ops, i + 1, seconds_since(step_start), rank_label);
  }
  out.decode_s = seconds_since(t1);
  out.replayed_steps = session.replayed_steps();
  out.peak_bytes = tracker.peak_total();
  out.peak_device_bytes = tracker.peak_total(DeviceType::cuda);
  out.peak_block_bytes = device.exec().allocator().peak_live_block_bytes();
  out.peak_reserved_bytes = device.exec().allocator().peak_reserved_bytes();
  out.parameter_bytes = tracker.peak_bytes(MemCategory::parameters);
  out.kv_cache_bytes = tracker.peak_bytes(MemCategory::kv_cache);

  CommStats d = comm ? comm->stats().since(before) : CommStats{};
  int64_t shadowed = 0, saved = 0;
  for (const MokStepLog& s : mok_log.records()) {
    shadowed += static_cast<int64_t>(s.shadowed.size());
    saved += s.bytes_saved;
  }
  out.figures = {static_cast<double>(d.remote_sent_total()),
                 static_cast<double>(d.remote_sent(CommPurpose::dispatch)),
                 static_cast<double>(d.remote_sent(CommPurpose::combine)),
                 static_cast<double>(d.remote_sent(CommPurpose::weights)),
                 static_cast<double>(d.remote_sent(CommPurpose::control)),
                 d.modeled_seconds,
                 static_cast<double>(shadowed),
                 static_cast<double>(saved)};
  for (const auto& s : seqs) out.tokens.insert(out.tokens.end(), s.begin(), s.end());
  for (const auto& r : logit_rows) out.logits.insert(out.logits.end(), r.begin(), r.end());
  return out;
}

// Collective: every rank's part of the result, gathered onto every rank (rank order =
// sequence order). Exact copies; the figures are summed in a fixed order.
ParallelGenerateResult assemble(const Shared& sh, const ParallelGenerateOptions& o, RankOutput& mine,
                                Communicator* comm) {
  const int ranks = comm ? comm->size() : 1;
  ParallelGenerateResult r;
  std::vector<int32_t> tokens = mine.tokens;
  std::vector<float> logits = mine.logits;
  std::vector<double> figures = mine.figures;
  double times[2] = {mine.prefill_s, mine.decode_s};
  if (comm && ranks > 1) {
    tokens.resize(mine.tokens.size() * ranks);
    comm->all_gather(mine.tokens.data(), static_cast<int64_t>(mine.tokens.size() * sizeof(int32_t)), tokens.data(),
                     CommPurpose::control);
    if (o.keep_logits) {
      logits.resize(mine.logits.size() * ranks);
      comm->all_gather(mine.logits.data(), static_cast<int64_t>(mine.logits.size() * sizeof(float)), logits.data(),
                       CommPurpose::control);
    }
    comm->all_reduce_sum(figures.data(), static_cast<int64_t>(figures.size()), CommPurpose::control);
    comm->broadcast(times, sizeof times, 0, CommPurpose::control);  // rank 0's clock
  }
  // Peaks and resident copies: the largest rank's.
  constexpr int kPeaks = 7;
  int64_t peaks[kPeaks] = {mine.peak_bytes,          mine.peak_device_bytes, mine.peak_block_bytes,
                           mine.peak_reserved_bytes, mine.resident_bytes,    mine.parameter_bytes,
                           mine.kv_cache_bytes};
  if (comm && ranks > 1) {
    std::vector<int64_t> all(kPeaks * static_cast<size_t>(ranks));
    comm->all_gather(peaks, sizeof peaks, all.data(), CommPurpose::control);
    for (int q = 0; q < ranks; ++q)
      for (int i = 0; i < kPeaks; ++i) peaks[i] = std::max(peaks[i], all[kPeaks * q + i]);
  }
  r.peak_bytes = peaks[0];
  r.peak_device_bytes = peaks[1];
  r.peak_block_bytes = peaks[2];
  r.peak_reserved_bytes = peaks[3];
  r.resident_bytes = peaks[4];
  r.parameter_bytes = peaks[5];
  r.kv_cache_bytes = peaks[6];
  r.resident_layers = mine.resident_layers;  // the same on every rank (agreed)
  r.replayed_steps = mine.replayed_steps;
  const int total = sh.prompt_len + o.max_new_tokens;
  const int vocab = sh.tokenizer->vocab_size();
  r.batch = o.batch;
  r.ranks = ranks;
  r.prompt_tokens = sh.prompt_len;
  for (int b = 0; b < o.batch; ++b) {
    r.tokens.emplace_back(tokens.begin() + static_cast<int64_t>(b) * total,
                          tokens.begin() + static_cast<int64_t>(b + 1) * total);
    r.texts.push_back(sh.tokenizer->decode(r.tokens.back()));
    if (o.keep_logits) {
      const int64_t n = static_cast<int64_t>(o.max_new_tokens) * vocab;
      r.logits.emplace_back(logits.begin() + b * n, logits.begin() + (b + 1) * n);
    }
  }
  r.new_tokens = static_cast<int64_t>(o.batch) * o.max_new_tokens;
  r.prefill_s = times[0];
  r.decode_s = times[1];
  r.tokens_per_s = r.decode_s > 0 ? static_cast<double>(r.new_tokens) / r.decode_s : 0.0;
  r.remote_bytes = static_cast<int64_t>(figures[0]);
  r.dispatch_bytes = static_cast<int64_t>(figures[1]);
  r.combine_bytes = static_cast<int64_t>(figures[2]);
  r.weight_bytes = static_cast<int64_t>(figures[3]);
  r.control_bytes = static_cast<int64_t>(figures[4]);
  r.modeled_ms = figures[5] / ranks * 1e3;
  r.shadowed_experts = static_cast<int64_t>(figures[6]);
  r.bytes_saved = static_cast<int64_t>(figures[7]);
  r.dispatcher = sh.cfg.model.experts == 0 ? "none" : ranks > 1 ? sh.cfg.routing.dispatcher : "local";
  r.checkpoint = sh.dir;
  r.untrained_config = sh.untrained_config;
  r.decode_layout = mine.decode_layout;  // the same on every rank (from the options and the device)
  r.device = mine.device;  // the result every rank assembles is read on rank 0
  r.precision = mine.precision;
  return r;
}

// Runs `generate`; a named refusal for memory (is_named_memory_refusal) gets what a generation
// can change, keeping its type where it is a MemoryLimitExceeded.
template <class Generate>
ParallelGenerateResult with_memory_remedy(Generate&& generate) {
  try {
    return generate();
  } catch (const std::exception& e) {
    if (!is_named_memory_refusal(e)) throw;
    const std::string what = std::string(e.what()) +
                             "; raise the limit, or generate fewer sequences (--batch), over more ranks (--ranks), "
                             "with a shorter context (data.seq_len) or from a smaller model";
    if (dynamic_cast<const MemoryLimitExceeded*>(&e)) throw MemoryLimitExceeded(what);
    throw std::runtime_error(what);
  }
}

}  // namespace

std::string parallel_generate_problem(const ExperimentConfig& config, const ParallelGenerateOptions& o, int ranks) {
  const ExperimentConfig cfg = effective_config(config, o);
  if (o.batch < 1) return "--batch must be at least 1";
  if (ranks < 1) return "--ranks must be at least 1";
  if (o.batch % ranks != 0)
    return "--batch " + std::to_string(o.batch) + " does not divide by " + std::to_string(ranks) +
           " ranks: every rank decodes an equal share of the sequences";
  if (o.max_new_tokens < 0) return "--tokens must be >= 0";
  if (o.prompts_from_data < 0) return "--prompts-from-data must be >= 1";
  if (o.prompts_from_data > cfg.data.seq_len)
    return "--prompts-from-data " + std::to_string(o.prompts_from_data) + " is longer than the model's context (" +
           std::to_string(cfg.data.seq_len) + " tokens)";
  if (!o.decode_layout.empty() && o.decode_layout != "auto" && o.decode_layout != "fixed" &&
      o.decode_layout != "counted")
    return "unknown decode layout '" + o.decode_layout + "'; use auto, fixed or counted";
  if (const std::string why = resident_experts_problem(o.resident_experts, cfg); !why.empty()) return why;
  if (o.decode_layout == "fixed" && cfg.routing.dispatcher == "mok" && cfg.routing.shadow == "always")
    return "--decode-layout fixed never shadows an expert, and routing.shadow is always; use counted (or auto)";
  if (cfg.routing.dispatcher != "classic" && cfg.routing.dispatcher != "mok")
    return "unknown dispatcher '" + cfg.routing.dispatcher + "'; use classic or mok";
  if (ranks > 1 && cfg.model.experts > 0) {
    try {
      (void)ExpertPlacement::parse(cfg.parallel.expert_placement, cfg.model.experts, ranks);
    } catch (const std::exception& e) {
      return std::string("cannot place the experts on ") + std::to_string(ranks) + " ranks: " + e.what();
    }
  }
  return {};
}

ExperimentConfig generation_config(const std::string& source, const ParallelGenerateOptions& options) {
  if (options.untrained) return load_experiment_config(source, options.overrides);
  const std::string dir = resolve_checkpoint_dir(source);
  return parse_experiment_config(read_checkpoint_config(dir), (fs::path(dir) / CheckpointFiles::config).string(),
                                 options.overrides);
}

ParallelGenerateResult generate_parallel(const std::string& source, const ParallelGenerateOptions& options,
                                         Communicator* comm) {
  Shared sh;
  if (options.untrained)
    sh.untrained_config = source;
  else
    sh.dir = resolve_checkpoint_dir(source);
  const ExperimentConfig source_cfg = generation_config(source, options);
  sh.cfg = effective_config(source_cfg, options);
  const int ranks = comm ? comm->size() : options.ranks;
  if (const std::string why = parallel_generate_problem(source_cfg, options, ranks); !why.empty())
    throw std::invalid_argument(why);
  // The corpus split: the untrained model's tokenizer is built from it (BPE is trained on its
  // train part, as a run does), and prompts from data are its validation windows.
  std::optional<CorpusSplit> split;
  auto corpus_split = [&]() -> const CorpusSplit& {
    if (!split) split = split_corpus(load_corpus(sh.cfg.data.corpus), sh.cfg.data.val_fraction);
    return *split;
  };
  if (options.untrained) {
    sh.tokenizer = make_tokenizer(sh.cfg.data.tokenizer, sh.cfg.data.vocab_size, corpus_split());
  } else {
    const fs::path tok = fs::path(sh.dir) / CheckpointFiles::tokenizer;
    if (!fs::exists(tok)) throw CheckpointError(sh.dir + ": no tokenizer.txt in the checkpoint");
    verify_checkpoint_file(sh.dir, CheckpointFiles::tokenizer);
    sh.tokenizer = Tokenizer::load(tok.string());
  }

  // Prompts (B, L): all the same length, so every rank's caches fill at the same step.
  const int B = options.batch;
  if (options.prompts_from_data > 0) {
    const int n = options.prompts_from_data;
    const TokenDataset ds = build_token_dataset(corpus_split(), *sh.tokenizer);
    const int64_t windows = val_window_count(ds, n);
    for (int b = 0; b < B; ++b) {
      const int64_t start = val_window_start(ds, b % windows, n);
      sh.prompts.insert(sh.prompts.end(), ds.val.begin() + start, ds.val.begin() + start + n);
    }
    sh.prompt_len = n;
  } else {
    std::vector<int32_t> p = sh.tokenizer->encode(options.prompt);
    if (p.empty()) p.push_back(sh.tokenizer->encode("\n").front());  // something to start from
    sh.prompt_len = static_cast<int>(p.size());
    for (int b = 0; b < B; ++b) sh.prompts.insert(sh.prompts.end(), p.begin(), p.end());
  }

  const int threads = std::max(1, sh.cfg.parallel.threads);
  const LinkModel link = LinkModel::from_config(sh.cfg.parallel, options.link_sleep);
  if (comm || ranks == 1) {
    // This process is one rank (MPI), or the only one.
    if (comm) comm->set_link(link);
    ThreadPool pool(threads);
    ScopedThreadPool scope(pool);
    return with_memory_remedy([&] {
      RankOutput mine = run_rank(sh, options, comm, comm ? host_local_rank(comm->rank()) : 0);
      return assemble(sh, options, mine, comm);
    });
  }
  return with_memory_remedy([&] {
    ParallelGenerateResult result;
    run_local_ranks(
        ranks,
        [&](Communicator& c) {
          MemoryTracker tracker;
          ScopedMemoryTracker track_rank(tracker);
          ThreadPool pool(threads);
          ScopedThreadPool pool_rank(pool);
          RankOutput mine = run_rank(sh, options, &c, c.rank());
          ParallelGenerateResult r = assemble(sh, options, mine, &c);
          if (c.rank() == 0) result = std::move(r);
        },
        link);
    return result;
  });
}

}  // namespace mok
