#include "core/config/config_schema.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

namespace mok {
namespace {

// --- C++ field type ↔ ConfigType / ConfigValue -------------------------------------------

template <class T>
constexpr ConfigType type_of() {
  if constexpr (std::is_same_v<T, bool>) return ConfigType::Bool;
  else if constexpr (std::is_same_v<T, int>) return ConfigType::Int;
  else if constexpr (std::is_same_v<T, uint64_t>) return ConfigType::UInt;
  else if constexpr (std::is_same_v<T, double>) return ConfigType::Real;
  else {
    static_assert(std::is_same_v<T, std::string>, "unsupported config field type");
    return ConfigType::String;
  }
}

template <class T>
ConfigValue to_value(const T& v) {
  if constexpr (std::is_same_v<T, int>) return ConfigValue(static_cast<int64_t>(v));
  else return ConfigValue(v);
}

template <class T>
T from_value(const ConfigValue& v) {
  if constexpr (std::is_same_v<T, int>) return static_cast<int>(std::get<int64_t>(v));
  else return std::get<T>(v);
}

// --- Row builder: key(...) then chained constraints ------------------------------------------

struct Row {
  ConfigKeySpec spec;
  Row&& at_least(double v) && { spec.min = v; return std::move(*this); }
  Row&& at_most(double v) && { spec.max = v; return std::move(*this); }
  Row&& range(double lo, double hi) && { spec.min = lo; spec.max = hi; return std::move(*this); }
  Row&& above(double v) && { spec.min = v; spec.min_exclusive = true; return std::move(*this); }
  Row&& below(double v) && { spec.max = v; spec.max_exclusive = true; return std::move(*this); }
  Row&& one_of(std::vector<std::string> c) && { spec.choices = std::move(c); return std::move(*this); }
  Row&& not_empty() && { spec.non_empty = true; return std::move(*this); }
};

// A top-level field: key("seed", &ExperimentConfig::seed, "...").
template <class T>
Row key(std::string path, T ExperimentConfig::*field, std::string meaning) {
  Row r;
  r.spec.path = std::move(path);
  r.spec.type = type_of<T>();
  r.spec.meaning = std::move(meaning);
  r.spec.get = [field](const ExperimentConfig& c, const std::string&) -> std::optional<ConfigValue> {
    return to_value(c.*field);
  };
  r.spec.set = [field](ExperimentConfig& c, const std::string&, const ConfigValue& v) { c.*field = from_value<T>(v); };
  return r;
}

// A field of a section: key("model.d_model", &ExperimentConfig::model, &ModelConfig::d_model, "...").
template <class S, class T>
Row key(std::string path, S ExperimentConfig::*section, T S::*field, std::string meaning) {
  Row r;
  r.spec.path = std::move(path);
  r.spec.type = type_of<T>();
  r.spec.meaning = std::move(meaning);
  r.spec.get = [section, field](const ExperimentConfig& c, const std::string&) -> std::optional<ConfigValue> {
    return to_value(c.*section.*field);
  };
  r.spec.set = [section, field](ExperimentConfig& c, const std::string&, const ConfigValue& v) {
    c.*section.*field = from_value<T>(v);
  };
  return r;
}

// The map key type K ↔ the entry text rows and specs are addressed with.
bool entry_key(const std::string& text, int& out) {
  if (text.empty()) return false;
  auto r = std::from_chars(text.data(), text.data() + text.size(), out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}
bool entry_key(const std::string& text, std::string& out) {
  out = text;
  return true;
}
std::string entry_text(int key) { return std::to_string(key); }
std::string entry_text(const std::string& key) { return key; }

template <class K>
constexpr ConfigMapKey map_key_of() {
  if constexpr (std::is_same_v<K, int>) return ConfigMapKey::LayerIndex;
  else return ConfigMapKey::Name;
}

// A field of a map of overrides; `unset` is the value that means "inherit".
template <class S, class K, class E, class T>
Row map_key(std::string path, S ExperimentConfig::*section, std::map<K, E> S::*map, T E::*field, T unset,
            std::string meaning) {
  Row r;
  r.spec.path = std::move(path);
  const char* ph = map_key_of<K>() == ConfigMapKey::LayerIndex ? ".<L>." : ".<K>.";
  r.spec.map = r.spec.path.substr(0, r.spec.path.find(ph));
  r.spec.type = type_of<T>();
  r.spec.meaning = std::move(meaning);
  r.spec.get = [=](const ExperimentConfig& c, const std::string& entry) -> std::optional<ConfigValue> {
    K key{};
    if (!entry_key(entry, key)) return std::nullopt;
    const auto& m = c.*section.*map;
    auto it = m.find(key);
    if (it == m.end() || it->second.*field == unset) return std::nullopt;
    return to_value(it->second.*field);
  };
  r.spec.set = [=](ExperimentConfig& c, const std::string& entry, const ConfigValue& v) {
    K key{};
    if (entry_key(entry, key)) (c.*section.*map)[key].*field = from_value<T>(v);
  };
  return r;
}

template <class S, class K, class E>
ConfigMapSpec map_spec(std::string path, S ExperimentConfig::*section, std::map<K, E> S::*map,
                       std::string key_text, std::string example, std::string meaning) {
  ConfigMapSpec m;
  m.path = std::move(path);
  m.key = map_key_of<K>();
  m.meaning = std::move(meaning);
  m.key_text = std::move(key_text);
  m.example = std::move(example);
  m.entries = [=](const ExperimentConfig& c) {
    std::vector<std::string> out;
    for (const auto& [key, entry] : c.*section.*map) out.push_back(entry_text(key));
    return out;
  };
  m.add = [=](ExperimentConfig& c, const std::string& entry) {
    K key{};
    if (entry_key(entry, key)) (c.*section.*map)[key];
  };
  m.clear = [=](ExperimentConfig& c) { (c.*section.*map).clear(); };
  return m;
}

const std::vector<std::string> kKittenModes = {"exact", "kitten", "custom"};
const std::vector<std::string> kKittenMethods = {"sketch", "rsvd", "subspace", "lowbit"};
const std::vector<std::string> kKindMethods = {"exact", "sketch", "rsvd", "subspace", "lowbit", "recompute", "lowrank"};

// ============================================================================================
// THE SCHEMA. One row per key, in the order `mok config print` writes them.
//
// To add a key: add the field (with its default) to the struct in experiment_config.h, then
// one row here:
//   add(key("routing.jitter", &E::routing, &RoutingConfig::jitter, "one-line meaning").range(0, 1));
// Constraints: .at_least(x) .at_most(x) .range(lo, hi) .above(x) .below(x) (exclusive)
// .one_of({...}) .not_empty(). Cross-key rules go in check_experiment_config
// (config_check.cpp). A field of kittens.layers / kittens.kinds: a map_key(...) row with its
// "inherit" value.
// Then regenerate docs/config.md (see there); test_config fails until every field has a
// row and the docs match.
// ============================================================================================
std::vector<ConfigKeySpec> build_schema() {
  using E = ExperimentConfig;
  std::vector<Row> rows;
  auto add = [&](Row&& r) { rows.push_back(std::move(r)); };

  add(key("name", &E::name, "experiment name, shown in the run store and the GUI").not_empty());
  add(key("seed", &E::seed, "seed of every random stream (init, data order, sketches)"));

  add(key("data.corpus", &E::data, &DataConfig::corpus,
          "`brown` (bundled Brown corpus) or a path to a UTF-8 file or folder").not_empty());
  add(key("data.tokenizer", &E::data, &DataConfig::tokenizer, "tokenizer: bytes or byte-level BPE")
          .one_of({"byte", "bpe"}));
  add(key("data.vocab_size", &E::data, &DataConfig::vocab_size,
          "BPE vocabulary size (merges = vocab_size - 256); ignored for byte")
          .range(257, 1 << 20));
  add(key("data.seq_len", &E::data, &DataConfig::seq_len, "tokens per training sequence")
          .range(2, 1 << 20));
  add(key("data.val_fraction", &E::data, &DataConfig::val_fraction,
          "share of documents held out for validation")
          .above(0).at_most(0.5));

  add(key("model.layers", &E::model, &ModelConfig::layers, "transformer blocks").range(1, 1024));
  add(key("model.d_model", &E::model, &ModelConfig::d_model, "width of the residual stream")
          .range(2, 1 << 16));
  add(key("model.heads", &E::model, &ModelConfig::heads,
          "attention heads; must divide d_model into an even head width (rotary)")
          .range(1, 1024));
  add(key("model.experts", &E::model, &ModelConfig::experts,
          "routed experts per MoE layer; 0 makes every layer dense")
          .range(0, 1 << 16));
  add(key("model.top_k", &E::model, &ModelConfig::top_k, "experts each token is routed to (≤ experts)")
          .range(1, 1024));
  add(key("model.expert_hidden", &E::model, &ModelConfig::expert_hidden,
          "SwiGLU hidden width of one expert")
          .range(1, 1 << 20));
  add(key("model.dense_hidden", &E::model, &ModelConfig::dense_hidden,
          "SwiGLU hidden width of a dense MLP layer")
          .range(1, 1 << 20));
  add(key("model.moe_layers", &E::model, &ModelConfig::moe_layers,
          "which layers are MoE: `all`, `none`, `every_N`, or a comma list of indices like `1,3`"));
  add(key("model.shared_expert", &E::model, &ModelConfig::shared_expert,
          "one always-on expert of width expert_hidden beside the routed ones"));
  add(key("model.tie_embeddings", &E::model, &ModelConfig::tie_embeddings,
          "share the input embedding with the output projection"));
  add(key("model.rope_theta", &E::model, &ModelConfig::rope_theta, "rotary embedding base").above(0));
  add(key("model.norm_eps", &E::model, &ModelConfig::norm_eps, "RMSNorm epsilon").above(0).at_most(1));
  add(key("model.init_std", &E::model, &ModelConfig::init_std, "std of the normal weight init")
          .above(0).at_most(10));
  add(key("model.aux_loss_coef", &E::model, &ModelConfig::aux_loss_coef, "load-balancing loss weight")
          .range(0, 100));
  add(key("model.z_loss_coef", &E::model, &ModelConfig::z_loss_coef, "router z-loss weight")
          .range(0, 100));

  add(key("train.steps", &E::train, &TrainConfig::steps, "optimizer steps").range(1, 1 << 30));
  add(key("train.batch", &E::train, &TrainConfig::batch,
          "sequences per optimizer step (global, over all ranks)")
          .range(1, 1 << 20));
  add(key("train.grad_accum", &E::train, &TrainConfig::grad_accum,
          "micro-batches per step; batch must be a multiple")
          .range(1, 1 << 20));
  add(key("train.lr", &E::train, &TrainConfig::lr, "peak learning rate (AdamW)").above(0).at_most(10));
  add(key("train.min_lr_ratio", &E::train, &TrainConfig::min_lr_ratio, "final lr = lr × min_lr_ratio")
          .range(0, 1));
  add(key("train.warmup_steps", &E::train, &TrainConfig::warmup_steps, "linear lr warm-up steps")
          .range(0, 1 << 30));
  add(key("train.schedule", &E::train, &TrainConfig::schedule, "lr decay after warm-up")
          .one_of({"cosine", "linear", "constant"}));
  add(key("train.weight_decay", &E::train, &TrainConfig::weight_decay, "AdamW decoupled weight decay")
          .range(0, 10));
  add(key("train.beta1", &E::train, &TrainConfig::beta1, "AdamW first-moment decay").range(0, 1).below(1));
  add(key("train.beta2", &E::train, &TrainConfig::beta2, "AdamW second-moment decay").range(0, 1).below(1));
  add(key("train.eps", &E::train, &TrainConfig::eps, "AdamW epsilon").above(0).at_most(1));
  add(key("train.grad_clip", &E::train, &TrainConfig::grad_clip, "global gradient-norm clip; 0 disables")
          .at_least(0));
  add(key("train.eval_every", &E::train, &TrainConfig::eval_every, "steps between validation passes")
          .range(1, 1 << 30));
  add(key("train.eval_batches", &E::train, &TrainConfig::eval_batches, "validation batches per pass")
          .range(1, 1 << 20));
  add(key("train.checkpoint_every", &E::train, &TrainConfig::checkpoint_every,
          "steps between checkpoints; 0 keeps only the final one")
          .range(0, 1 << 30));
  add(key("train.log_every", &E::train, &TrainConfig::log_every, "steps between metric rows")
          .range(1, 1 << 30));
  add(key("train.precision", &E::train, &TrainConfig::precision,
          "element type of activations and of the weights' compute copies: `fp32`, or `bf16` on a GPU "
          "(master weights, optimizer state, losses and router probabilities stay fp32); `auto` = bf16 on "
          "a GPU, fp32 on the CPU")
          .one_of({"auto", "fp32", "bf16"}));
  add(key("train.activation_checkpointing", &E::train, &TrainConfig::activation_checkpointing,
          "keep only each block's input and recompute the block in backward (plain activation "
          "checkpointing: the baseline kittens are measured against); needs kittens.mode: exact"));

  add(key("kittens.mode", &E::kittens, &KittensConfig::mode,
          "`exact` saves activations as they are; `kitten` saves compact copies")
          .one_of(kKittenModes));
  add(key("kittens.method", &E::kittens, &KittensConfig::method,
          "compact copy: Gaussian sketch, randomized SVD, refreshed subspace, or low-bit")
          .one_of(kKittenMethods));
  add(key("kittens.rank", &E::kittens, &KittensConfig::rank,
          "rank r of the low-rank copy (start rank for schedules); within [min_rank, max_rank], ≤ d_model")
          .range(1, 1 << 16));
  add(key("kittens.schedule", &E::kittens, &KittensConfig::schedule, "rank schedule over training")
          .one_of({"constant", "linear", "cosine", "step", "warmup", "adaptive"}));
  add(key("kittens.min_rank", &E::kittens, &KittensConfig::min_rank, "lowest rank a schedule may use")
          .range(1, 1 << 16));
  add(key("kittens.max_rank", &E::kittens, &KittensConfig::max_rank, "highest rank a schedule may use")
          .range(1, 1 << 16));
  add(key("kittens.warmup_steps", &E::kittens, &KittensConfig::warmup_steps,
          "save exact activations for the first N steps")
          .range(0, 1 << 30));
  add(key("kittens.target_error", &E::kittens, &KittensConfig::target_error,
          "adaptive schedule: keep relative reconstruction error under this")
          .above(0).at_most(1));
  add(key("kittens.refresh_every", &E::kittens, &KittensConfig::refresh_every,
          "subspace method: steps between basis refreshes")
          .range(1, 1 << 30));
  add(key("kittens.bits", &E::kittens, &KittensConfig::bits, "lowbit method: bits per value")
          .one_of({"4", "8"}));
  add(key("kittens.final_rank", &E::kittens, &KittensConfig::final_rank,
          "linear/cosine/step schedules: rank at the end; -1 means min_rank")
          .range(-1, 1 << 16));
  add(key("kittens.schedule_steps", &E::kittens, &KittensConfig::schedule_steps,
          "linear/cosine schedules: steps from the end of warm-up to final_rank; 0 means the run's steps")
          .range(0, 1 << 30));
  add(key("kittens.step_every", &E::kittens, &KittensConfig::step_every, "step schedule: steps between rank drops")
          .range(1, 1 << 30));
  add(key("kittens.step_factor", &E::kittens, &KittensConfig::step_factor,
          "step schedule: rank multiplier at each drop")
          .above(0));
  add(key("kittens.power_iters", &E::kittens, &KittensConfig::power_iters,
          "rsvd/subspace: power iterations of the randomized range finder")
          .range(0, 16));
  add(key("kittens.factor_bits", &E::kittens, &KittensConfig::factor_bits,
          "sketch/subspace: bits of the P factor; 0 keeps it in full precision")
          .one_of({"0", "4", "8"}));
  add(key("kittens.rounding", &E::kittens, &KittensConfig::rounding, "low-bit rounding")
          .one_of({"nearest", "stochastic"}));
  add(key("kittens.elementwise", &E::kittens, &KittensConfig::elementwise,
          "norm inputs, q/k/v, activations: auto (8-bit in kitten mode, exact otherwise), exact, recompute, lowbit")
          .one_of({"auto", "exact", "recompute", "lowbit"}));
  add(map_key("kittens.kinds.<K>.method", &E::kittens, &KittensConfig::kinds, &KittenKindOverride::method,
               std::string(), "how tensors of this kind are kept; `lowrank` = kittens.method at the scheduled rank")
          .one_of(kKindMethods));
  add(map_key("kittens.kinds.<K>.rank", &E::kittens, &KittensConfig::kinds, &KittenKindOverride::rank, -1,
              "fixed rank for this kind (low-rank methods) instead of the scheduled one")
          .range(1, 1 << 16));
  add(map_key("kittens.kinds.<K>.bits", &E::kittens, &KittensConfig::kinds, &KittenKindOverride::bits, -1,
              "lowbit: bits per value; sketch/subspace: bits of the P factor (0 = full precision)")
          .one_of({"0", "4", "8"}));
  add(map_key("kittens.layers.<L>.mode", &E::kittens, &KittensConfig::layers, &KittenLayerOverride::mode,
              std::string(), "per-layer override of kittens.mode")
          .one_of(kKittenModes));
  add(map_key("kittens.layers.<L>.method", &E::kittens, &KittensConfig::layers, &KittenLayerOverride::method,
              std::string(), "per-layer override of kittens.method")
          .one_of(kKittenMethods));
  add(map_key("kittens.layers.<L>.rank", &E::kittens, &KittensConfig::layers, &KittenLayerOverride::rank, -1,
              "per-layer override of kittens.rank")
          .range(1, 1 << 16));
  add(map_key("kittens.layers.<L>.bits", &E::kittens, &KittensConfig::layers, &KittenLayerOverride::bits, -1,
              "per-layer override of kittens.bits")
          .one_of({"4", "8"}));

  add(key("routing.dispatcher", &E::routing, &RoutingConfig::dispatcher,
          "`classic` ships every (token, expert) pair; `mok` ships a token once per rank and may shadow experts")
          .one_of({"classic", "mok"}));
  add(key("routing.policy", &E::routing, &RoutingConfig::policy,
          "`topk` router, or `locality` (prefer a local expert within locality_margin)")
          .one_of({"topk", "locality"}));
  add(key("routing.capacity_factor", &E::routing, &RoutingConfig::capacity_factor,
          "expert capacity as a multiple of the even share; 0 is dropless")
          .range(0, 1024));
  add(key("routing.locality_margin", &E::routing, &RoutingConfig::locality_margin,
          "locality policy: largest router-score gap at which a local expert is preferred")
          .range(0, 1e6));
  add(key("routing.locality_aux_coef", &E::routing, &RoutingConfig::locality_aux_coef,
          "locality loss weight: coef · mean router probability on other ranks' experts "
          "(parallel.ranks > 1; any policy); 0 is off")
          .range(0, 100));
  add(key("routing.shadow", &E::routing, &RoutingConfig::shadow,
          "mok: fetch remote experts' weights (shadow copies) when the cost model says it is "
          "cheaper (`auto`), `never`, or `always`")
          .one_of({"auto", "never", "always"}));
  add(key("routing.cost_link_gbps", &E::routing, &RoutingConfig::cost_link_gbps,
          "mok cost model: link bandwidth in GB/s; 0 takes parallel.link_gbps, or 25 without one")
          .range(0, 1e6));
  add(key("routing.cost_compute_gflops", &E::routing, &RoutingConfig::cost_compute_gflops,
          "mok cost model: a rank's rate for the shadow gradient add, GFLOP/s")
          .above(0));
  add(key("routing.overlap_chunks", &E::routing, &RoutingConfig::overlap_chunks,
          "chunks in which token transfers overlap expert compute: mok on CPU ranks (a helper "
          "thread) and on GPU ranks when training (chunks of each rank's experts, on the data "
          "plane's transfer stream, not on the peer plane), classic on NCCL GPU ranks; 0 or 1 "
          "turns the overlap off. The results are bitwise the same for any value")
          .range(0, 256));
  add(key("routing.cost_calibrate", &E::routing, &RoutingConfig::cost_calibrate,
          "mok: measure the link bandwidth and the gradient-add rate once before the run and use "
          "them instead of cost_link_gbps / cost_compute_gflops (logged as an event; pin them to "
          "replay a run bit for bit)"));

  add(key("parallel.device", &E::parallel, &ParallelConfig::device, "where the model runs")
          .one_of({"cpu", "cuda"}));
  add(key("parallel.gpus", &E::parallel, &ParallelConfig::gpus,
          "device cuda: the GPU of each rank as a comma list of indices (`2,3`); empty: rank r on cuda:r"));
  add(key("parallel.device_memory_limit", &E::parallel, &ParallelConfig::device_memory_limit,
          "memory each rank's tensors may hold on its device, e.g. `16GiB` (a GPU's allocator also "
          "counts its cache): a run that would go past it stops, naming what overflowed; empty: "
          "no limit"));
  add(key("parallel.ranks", &E::parallel, &ParallelConfig::ranks,
          "expert-parallel ranks; experts must be a multiple")
          .range(1, 4096));
  add(key("parallel.comm", &E::parallel, &ParallelConfig::comm,
          "communicator between ranks: in-process, MPI, NCCL (device cuda), or peer (device cuda: "
          "copies between the GPUs of one process; ranks may share a GPU)")
          .one_of({"local", "mpi", "nccl", "peer"}));
  add(key("parallel.threads", &E::parallel, &ParallelConfig::threads, "CPU threads per rank")
          .range(1, 1024));
  add(key("parallel.link_gbps", &E::parallel, &ParallelConfig::link_gbps,
          "emulated link bandwidth in GB/s for local ranks; 0 disables emulation")
          .range(0, 1e6));
  add(key("parallel.link_latency_us", &E::parallel, &ParallelConfig::link_latency_us,
          "emulated per-message latency in microseconds")
          .range(0, 1e9));
  add(key("parallel.link_sleep", &E::parallel, &ParallelConfig::link_sleep,
          "sleep for the emulated link time, so wall-clock figures include it"));
  add(key("parallel.expert_placement", &E::parallel, &ParallelConfig::expert_placement,
          "rank of each routed expert: `contiguous` blocks, `round_robin`, or a comma list of "
          "owners")
          .not_empty());

  add(key("logging.db", &E::logging, &LoggingConfig::db, "SQLite run store (`--db` overrides)").not_empty());
  add(key("logging.progress", &E::logging, &LoggingConfig::progress, "progress bar on a terminal"));
  add(key("logging.checkpoint_dir", &E::logging, &LoggingConfig::checkpoint_dir,
          "folder for checkpoints").not_empty());

  // Defaults come from the struct initializers, never restated here.
  const ExperimentConfig defaults;
  std::vector<ConfigKeySpec> out;
  for (Row& r : rows) {
    r.spec.default_text = r.spec.in_map() ? "inherit" : format_config_value(*r.spec.get(defaults, ""));
    out.push_back(std::move(r.spec));
  }
  return out;
}

std::vector<ConfigMapSpec> build_maps() {
  using E = ExperimentConfig;
  // In the order their rows appear in the schema.
  return {
      map_spec("kittens.kinds", &E::kittens, &KittensConfig::kinds,
               "tensor-kind prefix, e.g. `moe.expert`, `attn.qkv.input`; `\"\"` = every linear input",
               "{moe.expert: {method: lowbit, bits: 4}}",
               "per tensor kind overrides, matched by prefix (longest wins), e.g. "
               "`{moe.expert: {method: lowbit, bits: 4}}`"),
      map_spec("kittens.layers", &E::kittens, &KittensConfig::layers, "layer index < model.layers",
               "{2: {rank: 32}}", "per-layer overrides keyed by layer index, e.g. `{2: {rank: 32, method: rsvd}}`"),
  };
}

// Optimal-string-alignment distance (a transposition counts as one edit).
int edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::string last_segment(std::string_view path) {
  const size_t dot = path.rfind('.');
  return std::string(dot == std::string_view::npos ? path : path.substr(dot + 1));
}

bool is_plain_safe(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '/' || c == '-';
    if (!ok) return false;
  }
  const char c0 = s[0];
  if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || c0 == '_' || c0 == '/')) return false;
  std::string lower = s;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::set<std::string> reserved = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"};
  return !reserved.count(lower);
}

std::string number_text(double v) {
  std::string s;
  if (v != 0.0 && (std::fabs(v) < 1e-4 || std::fabs(v) >= 1e15)) {
    // The shortest exact form in scientific notation for very small/large values.
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    s.assign(buf, r.ptr);
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    s.assign(buf, r.ptr);
  }
  // Always with a dot in the mantissa, so YAML 1.1 readers see a float too.
  const size_t e = s.find('e');
  const std::string mantissa = s.substr(0, e);
  if (mantissa.find_first_of(".n") == std::string::npos)
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  return s;
}

}  // namespace

std::string ConfigKeySpec::field_name() const { return last_segment(path); }

std::string config_entry_text(const std::string& entry) { return entry.empty() ? "\"\"" : entry; }

std::string ConfigKeySpec::path_for(const std::string& entry) const {
  std::string p = path;
  for (const char* ph : {"<L>", "<K>"}) {
    const size_t at = p.find(ph);
    if (at != std::string::npos) p.replace(at, 3, config_entry_text(entry));
  }
  return p;
}

std::string ConfigMapSpec::entry_path(const std::string& entry) const {
  return path + "." + config_entry_text(entry);
}

const std::vector<ConfigKeySpec>& experiment_config_schema() {
  static const std::vector<ConfigKeySpec> schema = build_schema();
  return schema;
}

const std::vector<ConfigMapSpec>& experiment_config_maps() {
  static const std::vector<ConfigMapSpec> maps = build_maps();
  return maps;
}

const ConfigKeySpec* find_config_key(std::string_view path) {
  for (const ConfigKeySpec& s : experiment_config_schema())
    if (s.path == path) return &s;
  return nullptr;
}

const ConfigMapSpec* find_config_map(std::string_view path) {
  for (const ConfigMapSpec& m : experiment_config_maps())
    if (m.path == path) return &m;
  return nullptr;
}

const ConfigKeySpec* find_config_map_field(const ConfigMapSpec& m, std::string_view field) {
  return find_config_key(m.path + "." + m.placeholder() + "." + std::string(field));
}

std::string suggest_config_key(std::string_view parent, std::string_view key) {
  // Candidate children of `parent`: the next segment of every schema path below it.
  const std::string prefix = parent.empty() ? "" : std::string(parent) + ".";
  std::set<std::string> siblings;
  for (const ConfigKeySpec& s : experiment_config_schema()) {
    if (s.path.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = s.path.substr(prefix.size());
    siblings.insert(rest.substr(0, rest.find('.')));
  }
  const int limit = std::max<int>(2, static_cast<int>(key.size()) / 3);
  std::string best;
  int best_d = limit + 1;
  for (const std::string& s : siblings) {
    const int d = edit_distance(key, s);
    if (d < best_d) best_d = d, best = prefix + s;
  }
  if (!best.empty()) return best;
  // Not a typo of a sibling: perhaps a key put in the wrong section (model.lr → train.lr).
  for (const ConfigKeySpec& s : experiment_config_schema()) {
    if (s.in_map()) continue;
    const int d = edit_distance(key, s.field_name());
    if (d < best_d) best_d = d, best = s.path;
  }
  return best;
}

const char* config_type_name(ConfigType t) {
  switch (t) {
    case ConfigType::Int: return "int";
    case ConfigType::UInt: return "uint";
    case ConfigType::Real: return "float";
    case ConfigType::Bool: return "bool";
    case ConfigType::String: return "string";
  }
  return "?";
}

std::string format_config_value(const ConfigValue& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* u = std::get_if<uint64_t>(&v)) return std::to_string(*u);
  if (auto* d = std::get_if<double>(&v)) return number_text(*d);
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  const std::string& s = std::get<std::string>(v);
  if (is_plain_safe(s)) return s;
  std::string q = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': q += "\\\""; break;
      case '\\': q += "\\\\"; break;
      case '\n': q += "\\n"; break;
      case '\t': q += "\\t"; break;
      case '\r': q += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          q += buf;
        } else {
          q += static_cast<char>(c);
        }
    }
  }
  return q + "\"";
}

std::string config_allowed_text(const ConfigKeySpec& spec) {
  if (!spec.choices.empty()) {
    std::string s;
    for (const std::string& c : spec.choices) s += (s.empty() ? "`" : ", `") + c + "`";
    return s;
  }
  auto num = [&](double v) {
    if (spec.type == ConfigType::Real) return number_text(v);
    return std::to_string(static_cast<int64_t>(v));
  };
  if (spec.min && spec.max) {
    return std::string(spec.min_exclusive ? "(" : "[") + num(*spec.min) + ", " + num(*spec.max) +
           (spec.max_exclusive ? ")" : "]");
  }
  if (spec.min) return std::string(spec.min_exclusive ? "> " : "≥ ") + num(*spec.min);
  if (spec.max) return std::string(spec.max_exclusive ? "< " : "≤ ") + num(*spec.max);
  if (spec.type == ConfigType::String && spec.non_empty) return "non-empty";
  return "any";
}

std::string config_schema_markdown() {
  std::string out = "| Key | Type | Default | Allowed | Meaning |\n|---|---|---|---|---|\n";
  auto row = [&](const std::string& key, const std::string& type, const std::string& def,
                 const std::string& allowed, const std::string& meaning) {
    out += "| `" + key + "` | " + type + " | " + def + " | " + allowed + " | " + meaning + " |\n";
  };
  std::set<std::string> maps_done;
  for (const ConfigKeySpec& s : experiment_config_schema()) {
    if (s.in_map() && maps_done.insert(s.map).second) {
      const ConfigMapSpec* m = find_config_map(s.map);
      row(m->path, "map", "`{}`", "keys: " + m->key_text, m->meaning);
    }
    const std::string def = s.in_map() ? s.default_text : "`" + s.default_text + "`";
    row(s.path, config_type_name(s.type), def, config_allowed_text(s), s.meaning);
  }
  return out;
}

std::string config_schema_text() {
  size_t w = 0;
  for (const ConfigKeySpec& s : experiment_config_schema()) w = std::max(w, s.path.size());
  std::string out;
  auto pad = [](std::string s, size_t n) {
    if (s.size() < n) s.append(n - s.size(), ' ');
    return s;
  };
  std::set<std::string> maps_done;
  for (const ConfigKeySpec& s : experiment_config_schema()) {
    if (s.in_map() && maps_done.insert(s.map).second) {
      const ConfigMapSpec* m = find_config_map(s.map);
      out += pad(m->path, w) + "  " + pad("map", 6) + "  default {}  keys " + m->key_text + "\n";
      out += pad("", w) + "  " + m->meaning + "\n";
    }
    out += pad(s.path, w) + "  " + pad(config_type_name(s.type), 6) + "  default " + s.default_text +
           "  allowed " + config_allowed_text(s) + "\n";
    out += pad("", w) + "  " + s.meaning + "\n";
  }
  return out;
}

}  // namespace mok
