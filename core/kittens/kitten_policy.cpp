#include "core/kittens/kitten_policy.h"

#include <algorithm>
#include <cmath>

#include "core/kittens/compact_options.h"
#include "core/kittens/lowbit_saved_linear_input.h"
#include "core/kittens/rsvd_saved_linear_input.h"
#include "core/kittens/sketch_saved_linear_input.h"
#include "core/kittens/subspace_saved_linear_input.h"

MOK_NN_BEGIN

const char* saved_tensor_method_name(SavedTensorMethod m) {
  switch (m) {
    case SavedTensorMethod::exact: return "exact";
    case SavedTensorMethod::sketch: return "sketch";
    case SavedTensorMethod::rsvd: return "rsvd";
    case SavedTensorMethod::subspace: return "subspace";
    case SavedTensorMethod::lowbit: return "lowbit";
    case SavedTensorMethod::recompute: return "recompute";
  }
  return "exact";
}

bool is_elementwise_kind(std::string_view kind) {
  // Linear inputs end in ".input"; norm inputs ("attn_norm.input") and activation inputs
  // ("moe.expert.act.input") do too but are elementwise.
  auto ends_with = [&](std::string_view s) { return kind.size() >= s.size() && kind.substr(kind.size() - s.size()) == s; };
  return !ends_with(".input") || ends_with("norm.input") || ends_with(".act.input");
}

std::map<std::string, KittenKindOverride> kitten_preset() {
  // Sized on the quickstart shape (docs/kittens.md, "The kitten defaults"): with recompute
  // of the norm outputs and 8-bit elementwise tensors (`elementwise: auto`), 4-bit linear
  // inputs bring saved bytes to ~21% of exact.
  std::map<std::string, KittenKindOverride> p;
  p[""] = {"lowbit", -1, 4};  // every linear input
  return p;
}

namespace {

bool method_known(const std::string& m, bool elementwise) {
  static const char* kLinear[] = {"exact", "sketch", "rsvd", "subspace", "lowbit", "lowrank", "recompute"};
  static const char* kElementwise[] = {"exact", "recompute", "lowbit", "auto"};
  if (elementwise) return std::any_of(std::begin(kElementwise), std::end(kElementwise), [&](auto* n) { return m == n; });
  return std::any_of(std::begin(kLinear), std::end(kLinear), [&](auto* n) { return m == n; });
}

SavedTensorMethod parse_method(const std::string& m) {
  if (m == "sketch") return SavedTensorMethod::sketch;
  if (m == "rsvd") return SavedTensorMethod::rsvd;
  if (m == "subspace") return SavedTensorMethod::subspace;
  if (m == "lowbit") return SavedTensorMethod::lowbit;
  if (m == "recompute") return SavedTensorMethod::recompute;
  return SavedTensorMethod::exact;
}

constexpr double kFixedOne = 4294967296.0;  // errors summed in fixed point (2^-32 resolution)

}  // namespace

std::string kitten_config_problem(const KittensConfig& c) {
  if (c.mode != "exact" && c.mode != "kitten" && c.mode != "custom")
    return "kittens.mode: unknown mode '" + c.mode + "' (exact, kitten, custom)";
  if (c.method != "sketch" && c.method != "rsvd" && c.method != "subspace" && c.method != "lowbit")
    return "kittens.method: unknown method '" + c.method + "' (sketch, rsvd, subspace, lowbit)";
  if (c.bits != 8 && c.bits != 4) return "kittens.bits: must be 8 or 4";
  if (c.factor_bits != 0 && c.factor_bits != 8 && c.factor_bits != 4) return "kittens.factor_bits: must be 0, 8 or 4";
  if (c.rounding != "nearest" && c.rounding != "stochastic")
    return "kittens.rounding: unknown rounding '" + c.rounding + "' (nearest, stochastic)";
  if (!method_known(c.elementwise, true))
    return "kittens.elementwise: unknown choice '" + c.elementwise + "' (auto, exact, recompute, lowbit)";
  if (c.power_iters < 0) return "kittens.power_iters: must not be negative";
  for (const auto& [kind, o] : c.kinds) {
    if (!o.method.empty() && !method_known(o.method, false))
      return "kittens.kinds." + kind + ".method: unknown method '" + o.method + "'";
    if (o.bits != -1 && o.bits != 0 && o.bits != 8 && o.bits != 4)
      return "kittens.kinds." + kind + ".bits: must be 0, 8 or 4";
  }
  for (const auto& [layer, o] : c.layers) {
    const std::string key = "kittens.layers." + std::to_string(layer);
    if (!o.mode.empty() && o.mode != "exact" && o.mode != "kitten" && o.mode != "custom")
      return key + ".mode: unknown mode '" + o.mode + "'";
    if (!o.method.empty() && !method_known(o.method, false)) return key + ".method: unknown method '" + o.method + "'";
    if (o.bits != -1 && o.bits != 8 && o.bits != 4) return key + ".bits: must be 8 or 4";
  }
  return rank_schedule_problem(c);
}

// Per-layer sums of the relative errors measured by saves of the current step. A save on a
// GPU leaves its error terms on the device (pending); they are read in one copy when a sum
// is next asked for, so that no save waits for the device.
struct KittenPolicy::Stats {
  std::mutex mutex;
  struct Sum {
    int64_t fixed = 0;
    int64_t count = 0;
    double mean() const { return count ? static_cast<double>(fixed) / kFixedOne / count : -1.0; }
  };
  struct Pending {
    int layer;
    bool low_rank;
    Tensor terms;  // (2) f64 [Σ (x − x̃)², Σ x²]
  };
  std::vector<Sum> low_rank, other;
  std::vector<Pending> pending;
  // What a recorded step left (KittenPolicy::remember_step_stats).
  std::vector<Sum> recorded_low_rank, recorded_other;
  std::vector<Pending> recorded_pending;

  void remember() {
    std::lock_guard lock(mutex);
    recorded_low_rank = low_rank;
    recorded_other = other;
    recorded_pending = views_of(pending);
  }
  void restore() {
    std::lock_guard lock(mutex);
    low_rank = recorded_low_rank;
    other = recorded_other;
    pending = views_of(recorded_pending);
  }
  // The same measurements, their terms as views of the same device memory.
  static std::vector<Pending> views_of(const std::vector<Pending>& from) {
    std::vector<Pending> to;
    for (const Pending& p : from) to.push_back({p.layer, p.low_rank, p.terms.view(0, {2})});
    return to;
  }

  void record(int layer, bool low_rank_save, double error) {
    std::lock_guard lock(mutex);
    record_locked(layer, low_rank_save, error);
  }
  void record_pending(int layer, bool low_rank_save, Tensor terms) {
    std::lock_guard lock(mutex);
    pending.push_back({layer, low_rank_save, std::move(terms)});
  }
  double error(int layer) {
    std::lock_guard lock(mutex);
    settle_locked();
    if (layer < 0 || layer >= static_cast<int>(low_rank.size())) return -1.0;
    return low_rank[layer].count ? low_rank[layer].mean() : other[layer].mean();
  }
  double low_rank_error(int layer) {
    std::lock_guard lock(mutex);
    settle_locked();
    return low_rank[layer].mean();
  }
  void clear() {
    std::lock_guard lock(mutex);
    pending.clear();
    std::fill(low_rank.begin(), low_rank.end(), Sum{});
    std::fill(other.begin(), other.end(), Sum{});
  }

 private:
  void record_locked(int layer, bool low_rank_save, double error) {
    if (error < 0.0 || layer < 0) return;
    auto& v = low_rank_save ? low_rank : other;
    if (layer >= static_cast<int>(v.size())) return;
    v[layer].fixed += std::llround(error * kFixedOne);
    ++v[layer].count;
  }
  // Reads every pending pair of sums: gathered on their device, then one copy to the host.
  void settle_locked() {
    if (pending.empty()) return;
    const int64_t count = static_cast<int64_t>(pending.size());
    std::vector<double> host(static_cast<size_t>(2 * count));
    Allocator& allocator = pending.front().terms.allocator();
    Tensor all = Tensor::empty({2 * count}, DType::f64, allocator);
    for (int64_t i = 0; i < count; ++i)
      allocator.copy_within(static_cast<double*>(all.raw()) + 2 * i, pending[i].terms.raw(), 2 * sizeof(double));
    all.copy_to_host(host.data(), all.bytes());
    for (int64_t i = 0; i < count; ++i) {
      record_locked(pending[i].layer, pending[i].low_rank, relative_error_of(host[2 * i], host[2 * i + 1]));
    }
    pending.clear();
  }
};

namespace {

// Forwards to the chosen policy and reports the error it measured to the policy's stats.
class RecordingSavedLinearInput final : public SavedLinearInput {
 public:
  RecordingSavedLinearInput(std::unique_ptr<SavedLinearInput> inner, std::shared_ptr<KittenPolicy::Stats> stats,
                            int layer, bool low_rank)
      : inner_(std::move(inner)), stats_(std::move(stats)), layer_(layer), low_rank_(low_rank) {}
  void save(const Tensor& x, const MemTag& tag) override {
    inner_->save(x, tag);
    if (Tensor terms = inner_->error_terms(); !terms.empty())
      stats_->record_pending(layer_, low_rank_, std::move(terms));
    else
      stats_->record(layer_, low_rank_, inner_->last_relative_error());
  }
  void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) override {
    inner_->accumulate_weight_grad(dy, dw, scale);
  }
  int64_t held_bytes() const override { return inner_->held_bytes(); }
  void release() override { inner_->release(); }
  Tensor restore() const override { return inner_->restore(); }
  double last_relative_error() const override { return inner_->last_relative_error(); }
  Tensor error_terms() const override { return inner_->error_terms(); }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<SavedLinearInput> inner_;
  std::shared_ptr<KittenPolicy::Stats> stats_;
  int layer_;
  bool low_rank_;
};

}  // namespace

KittenPolicy::KittenPolicy(const KittensConfig& config, int layers, uint64_t seed, int64_t total_steps)
    : config_(config), layers_(layers), seed_(seed), total_steps_(total_steps), stats_(std::make_shared<Stats>()) {
  if (config_.mode == "kitten") kinds_ = kitten_preset();
  for (const auto& [kind, o] : config_.kinds) kinds_[kind] = o;
  const int start = scheduled_rank(config_, 0, total_steps_);
  adaptive_.assign(layers, AdaptiveRankController(start, config_.min_rank, config_.max_rank, config_.target_error));
  last_error_.assign(layers, -1.0);
  stats_->low_rank.assign(layers, {});
  stats_->other.assign(layers, {});
}

KittenPolicy::~KittenPolicy() = default;

void KittenPolicy::set_step(int64_t step) {
  if (step == step_) return;
  for (int l = 0; l < layers_; ++l) {
    const double e = stats_->error(l);
    if (e >= 0.0) last_error_[l] = e;
    // Only errors measured at a low rank say anything about the rank.
    if (config_.schedule == "adaptive") adaptive_[l].observe(stats_->low_rank_error(l));
  }
  stats_->clear();
  step_ = step;
}

bool KittenPolicy::all_exact() const { return config_.mode == "exact"; }

bool KittenPolicy::replayable_from(int64_t step) const {
  if (step < config_.warmup_steps || config_.rounding != "nearest") return false;
  // A linear input's method: its kinds entry's, "lowrank" (or none) meaning config.method,
  // which a layer entry may replace.
  auto fixed = [](const std::string& m) { return m == "exact" || m == "lowbit" || m == "recompute"; };
  bool lowrank_reachable = kinds_.find("") == kinds_.end();  // a kind no entry covers
  for (const auto& [kind, o] : kinds_) {
    if (o.method.empty() || o.method == "lowrank")
      lowrank_reachable = true;
    else if (!fixed(o.method))
      return false;
  }
  if (!lowrank_reachable) return true;
  if (!fixed(config_.method)) return false;
  for (const auto& [layer, o] : config_.layers)
    if (!o.method.empty() && !fixed(o.method)) return false;
  return true;
}

void KittenPolicy::remember_step_stats() { stats_->remember(); }
void KittenPolicy::restore_step_stats() { stats_->restore(); }

bool KittenPolicy::layer_exact(int layer) const {
  if (config_.mode == "exact" || rank_schedule_exact(config_, step_)) return true;
  const auto it = config_.layers.find(layer);
  return it != config_.layers.end() && it->second.mode == "exact";
}

int KittenPolicy::layer_rank(int layer) const {
  const auto it = config_.layers.find(layer);
  if (it != config_.layers.end() && it->second.rank > 0) return it->second.rank;
  if (config_.schedule == "adaptive" && layer >= 0 && layer < layers_) return adaptive_[layer].rank();
  return scheduled_rank(config_, step_, total_steps_);
}

const KittenKindOverride* KittenPolicy::kind_entry(std::string_view kind, bool allow_catch_all) const {
  const KittenKindOverride* best = nullptr;
  size_t best_len = 0;
  for (const auto& [prefix, o] : kinds_) {
    if (kind.substr(0, prefix.size()) != prefix || (prefix.empty() && !allow_catch_all)) continue;
    if (!best || prefix.size() >= best_len) {
      best = &o;
      best_len = prefix.size();
    }
  }
  return best;
}

SavedTensorChoice KittenPolicy::choose_linear(int layer, std::string_view kind) const {
  SavedTensorChoice c;
  if (layer_exact(layer)) return c;
  const auto lo = config_.layers.find(layer);
  std::string method = "lowrank";
  int rank = -1, bits = -1;
  if (const KittenKindOverride* o = kind_entry(kind, true)) {
    if (!o->method.empty()) method = o->method;
    rank = o->rank;
    bits = o->bits;
  }
  if (method == "lowrank") {
    method = config_.method;
    if (lo != config_.layers.end() && !lo->second.method.empty()) method = lo->second.method;
  }
  c.method = parse_method(method);
  if (c.method == SavedTensorMethod::recompute) c.method = SavedTensorMethod::exact;  // a linear input is not recomputed here
  if (c.is_low_rank()) {
    c.rank = rank > 0 ? rank : layer_rank(layer);
    c.factor_bits = bits >= 0 ? bits : config_.factor_bits;
  }
  if (c.method == SavedTensorMethod::lowbit) {
    c.bits = bits > 0 ? bits : config_.bits;
    if (lo != config_.layers.end() && lo->second.bits > 0) c.bits = lo->second.bits;
  }
  return c;
}

SavedTensorChoice KittenPolicy::choose_elementwise(int layer, std::string_view kind) const {
  SavedTensorChoice c;
  if (layer_exact(layer)) return c;
  std::string method = config_.elementwise;
  int bits = -1;
  // Only named kinds entries apply here; the catch-all "" entry is for linear inputs.
  if (const KittenKindOverride* o = kind_entry(kind, false);
      o && (o->method == "exact" || o->method == "recompute" || o->method == "lowbit")) {
    method = o->method;
    bits = o->bits;
  }
  // auto: 8-bit copies in kitten mode (the norm outputs are recomputed by the model, see
  // kitten_wants_recompute; what is left — norm inputs, q/k/v, SwiGLU pre-activations —
  // is kept low-bit), exact otherwise.
  if (method == "auto") method = config_.mode == "kitten" ? "lowbit" : "exact";
  c.method = parse_method(method);
  if (c.method != SavedTensorMethod::exact && c.method != SavedTensorMethod::recompute &&
      c.method != SavedTensorMethod::lowbit)
    c.method = SavedTensorMethod::exact;
  if (c.method == SavedTensorMethod::lowbit) c.bits = bits > 0 ? bits : config_.bits;
  return c;
}

std::unique_ptr<SavedLinearInput> KittenPolicy::make_linear_input(int layer, std::string_view kind,
                                                                 std::shared_ptr<SubspaceBasis> basis) {
  const SavedTensorChoice c = choose_linear(layer, kind);
  if (c.method == SavedTensorMethod::exact) return nullptr;
  CompactOptions o;
  o.rank = c.rank;
  o.seed = seed_;
  o.step = step_;
  o.power_iters = config_.power_iters;
  o.factor_bits = c.factor_bits;
  o.bits = c.bits;
  o.stochastic_rounding = config_.rounding == "stochastic";
  std::unique_ptr<SavedLinearInput> inner;
  switch (c.method) {
    case SavedTensorMethod::sketch: inner = make_sketch_saved_linear_input(o); break;
    case SavedTensorMethod::rsvd: inner = make_rsvd_saved_linear_input(o); break;
    case SavedTensorMethod::subspace: {
      if (!basis) {
        std::lock_guard lock(bases_mutex_);
        auto& slot = bases_[{layer, std::string(kind)}];
        if (!slot) slot = std::make_shared<SubspaceBasis>();
        basis = slot;
      }
      inner = make_subspace_saved_linear_input(std::move(basis), o, config_.refresh_every);
      break;
    }
    case SavedTensorMethod::lowbit: inner = make_lowbit_saved_linear_input(o); break;
    default: return nullptr;
  }
  return std::make_unique<RecordingSavedLinearInput>(std::move(inner), stats_, layer, c.is_low_rank());
}

std::unique_ptr<SavedLinearInput> KittenPolicy::make_elementwise_copy(int layer, std::string_view kind) {
  const SavedTensorChoice c = choose_elementwise(layer, kind);
  if (c.method != SavedTensorMethod::lowbit) return nullptr;
  CompactOptions o;
  o.seed = seed_;
  o.step = step_;
  o.bits = c.bits;
  o.stochastic_rounding = config_.rounding == "stochastic";
  return std::make_unique<RecordingSavedLinearInput>(make_lowbit_saved_linear_input(o), stats_, layer, false);
}

int KittenPolicy::rank_in_force(int layer) const {
  if (layer_exact(layer)) return 0;
  // A layer whose linear inputs are all exact or low-bit (the kitten preset) has no rank:
  // report 0 rather than the configured rank, so kittens/rank reads "no low-rank input".
  static const char* const kLinearKinds[] = {
      "attn.qkv.input",      "attn.out.input",      "mlp.up.input",        "mlp.down.input",
      "moe.router.input",    "moe.expert.up.input", "moe.expert.down.input", "moe.shared.up.input",
      "moe.shared.down.input", "head.input"};
  for (const char* kind : kLinearKinds)
    if (choose_linear(layer, kind).is_low_rank()) return layer_rank(layer);
  return 0;
}

double KittenPolicy::measured_error(int layer) const {
  return layer >= 0 && layer < layers_ ? last_error_[layer] : -1.0;
}

double KittenPolicy::current_error(int layer) const { return stats_->error(layer); }

std::vector<std::pair<std::string, double>> KittenPolicy::metrics() const {
  std::vector<std::pair<std::string, double>> m;
  for (int l = 0; l < layers_; ++l) {
    m.emplace_back("kittens/rank/layer" + std::to_string(l), rank_in_force(l));
    double e = current_error(l);
    if (e < 0.0) e = measured_error(l);
    if (e >= 0.0) m.emplace_back("kittens/error/layer" + std::to_string(l), e);
  }
  return m;
}

MOK_NN_END
