#include "core/plan/fit_advice.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>

#include "core/config/config_check.h"
#include "core/config/config_io.h"
#include "core/plan/card_count.h"
#include "core/plan/memory_plan.h"
#include "core/train/rank_device.h"

namespace mok {
namespace {

// `config` with the overrides applied, or nothing when they do not make a valid config.
std::optional<ExperimentConfig> with_sets(const ExperimentConfig& config, const std::vector<std::string>& sets) {
  ExperimentConfig c = config;
  try {
    for (size_t i = 0; i < sets.size(); ++i) apply_override(c, sets[i], static_cast<int>(i) + 1);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!check_experiment_config(c).empty()) return std::nullopt;
  return c;
}

std::string count_text(double n) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", n);
  return text;
}

// Collects options: each planned with `total(config)`, kept when it lowers the plan.
class OptionList {
 public:
  OptionList(const ExperimentConfig& config, double capacity,
             std::function<double(const ExperimentConfig&, const std::vector<std::string>& flags)> total)
      : config_(config), capacity_(capacity), total_(std::move(total)), base_(total_(config, {})) {}

  bool fits_as_is() const { return capacity_ <= 0.0 || base_ <= capacity_; }

  // Plans the change; adds it when valid and smaller. Returns whether it fits.
  bool add(std::vector<std::string> sets, std::vector<std::string> flags, std::string what) {
    const std::optional<ExperimentConfig> c = with_sets(config_, sets);
    if (!c) return false;
    const double t = total_(*c, flags);
    if (!(t < base_)) return false;
    out_.push_back({std::move(sets), std::move(flags), std::move(what), t, t <= capacity_});
    return out_.back().fits;
  }
  bool fits_with(const std::vector<std::string>& sets, const std::vector<std::string>& flags = {}) const {
    const std::optional<ExperimentConfig> c = with_sets(config_, sets);
    return c && total_(*c, flags) <= capacity_;
  }

  // A smaller model on the same ranks: the most experts (a multiple of the ranks, at least
  // top_k), then the most layers, that fit with headroom; where neither alone does, one layer
  // with the most experts that fit so. The headroom: a GPU's caching allocator held up to 6.1 %
  // more than the plan (docs/memory_planning.md), and a model cut until it fitted by 1 MiB
  // stopped at the cap.
  void add_smaller_model(const std::function<double(const ExperimentConfig&)>& parameters) {
    const ExperimentConfig& c = config_;
    const int ranks = std::max(1, c.parallel.ranks);
    const double room = c.parallel.device == "cuda" ? 1.0 - kDeviceAdviceHeadroom : 1.0;
    auto fits_with_room = [&](const std::vector<std::string>& sets) {
      const std::optional<ExperimentConfig> cut = with_sets(config_, sets);
      return capacity_ <= 0.0 || (cut && total_(*cut, {}) <= room * capacity_);
    };
    auto fewer_experts = [&](std::vector<std::string> base) {
      for (int e = c.model.experts - ranks; e >= std::max(c.model.top_k, ranks) && e > 0; e -= ranks) {
        std::vector<std::string> sets = base;
        sets.push_back("model.experts=" + std::to_string(e));
        if (!fits_with_room(sets)) continue;
        add(sets, {}, "a smaller model: " + std::string(base.empty() ? "" : "1 layer of ") + std::to_string(e) +
                          " experts per MoE layer (" + count_text(parameters(*with_sets(c, sets))) + " parameters)");
        return true;
      }
      return false;
    };
    bool found = fewer_experts({});
    for (int l = c.model.layers - 1; l >= 1; --l) {
      const std::vector<std::string> sets = {"model.layers=" + std::to_string(l)};
      if (!fits_with_room(sets)) continue;
      add(sets, {}, "a smaller model: " + std::to_string(l) + " layers (" +
                        count_text(parameters(*with_sets(c, sets))) + " parameters)");
      found = true;
      break;
    }
    if (!found && c.model.layers > 1) fewer_experts({"model.layers=1"});
  }

  std::vector<FitOption> take() { return std::move(out_); }

 private:
  const ExperimentConfig& config_;
  double capacity_;
  std::function<double(const ExperimentConfig&, const std::vector<std::string>&)> total_;
  double base_;
  std::vector<FitOption> out_;
};

bool runs_fp32_on_gpu(const ExperimentConfig& c) {
  return c.parallel.device == "cuda" && compute_dtype_for(c) == DType::f32;
}

std::string kitten_text() {
  return "compact copies of the saved activations (the kitten defaults: 4-bit linear inputs, 8-bit elementwise)";
}

// The overrides that put `config` on `ranks` ranks (config_on_ranks).
std::vector<std::string> rank_sets(const ExperimentConfig& config, int ranks) {
  const ExperimentConfig on = config_on_ranks(config, ranks);
  std::vector<std::string> sets = {"parallel.ranks=" + std::to_string(ranks)};
  if (on.train.batch != config.train.batch) sets.push_back("train.batch=" + std::to_string(on.train.batch));
  if (!config.parallel.gpus.empty()) sets.push_back("parallel.gpus=\"\"");
  // GPU ranks exchange over NCCL or peer copies (the trainer refuses local or mpi between GPUs).
  if (config.parallel.device == "cuda" && config.parallel.comm != "nccl" && config.parallel.comm != "peer")
    sets.push_back("parallel.comm=nccl");
  return sets;
}

std::string cards_text(int ranks, int experts) {
  return std::to_string(ranks) + " cards: " + std::to_string(ranks) + " ranks of " + std::to_string(experts / ranks) +
         " expert(s) each";
}

}  // namespace

std::vector<FitOption> training_fit_options(const ExperimentConfig& config, double capacity_bytes) {
  OptionList list(config, capacity_bytes,
                  [](const ExperimentConfig& c, const std::vector<std::string>&) { return estimate_memory(c).total_bytes(); });
  if (list.fits_as_is()) return {};
  const bool exact = config.kittens.mode == "exact";
  if (exact) list.add({"kittens.mode=kitten"}, {}, kitten_text());
  if (exact && !config.train.activation_checkpointing)
    list.add({"train.activation_checkpointing=true"}, {}, "keep only each block's input, run the block again in backward");
  if (runs_fp32_on_gpu(config)) list.add({"train.precision=bf16"}, {}, "bf16 activations and weight copies");

  // The same optimizer step in more, smaller micro-batches: the smallest grad_accum that fits,
  // else the one with the smallest micro-batch.
  const int ranks = std::max(1, config.parallel.ranks), batch = std::max(1, config.train.batch);
  int accum = 0;
  for (int g = std::max(1, config.train.grad_accum) + 1; g * ranks <= batch; ++g) {
    if (batch % (g * ranks) != 0) continue;
    accum = g;
    if (list.fits_with({"train.grad_accum=" + std::to_string(g)})) break;
  }
  if (accum > 0)
    list.add({"train.grad_accum=" + std::to_string(accum)}, {},
             "the same step in micro-batches of " + std::to_string(batch / accum) + " sequence(s)");

  const int largest = largest_batch_that_fits(config, capacity_bytes);
  if (largest > 0 && largest < batch)
    list.add({"train.batch=" + std::to_string(largest)}, {}, "a smaller batch of " + std::to_string(largest) + " sequences");

  const CardCount cards = training_cards(config, capacity_bytes);
  if (cards.ranks > ranks) list.add(rank_sets(config, cards.ranks), {}, cards_text(cards.ranks, config.model.experts));
  if (exact) {
    ExperimentConfig kitten = config;
    kitten.kittens.mode = "kitten";
    const CardCount with_kittens = training_cards(kitten, capacity_bytes);
    if (with_kittens.ranks > ranks && (cards.ranks == 0 || with_kittens.ranks < cards.ranks)) {
      std::vector<std::string> sets = rank_sets(config, with_kittens.ranks);
      sets.insert(sets.begin(), "kittens.mode=kitten");
      list.add(sets, {}, "kittens and " + cards_text(with_kittens.ranks, config.model.experts));
    }
  }
  list.add_smaller_model([](const ExperimentConfig& c) { return estimate_memory(c).parameter_count; });
  return list.take();
}

std::vector<FitOption> generation_fit_options(const ExperimentConfig& config, const GenerationShape& shape,
                                              double capacity_bytes) {
  // Flags --ranks and --batch change the generation, not the config: read them back here.
  auto total = [shape](const ExperimentConfig& c, const std::vector<std::string>& flags) {
    ExperimentConfig on = c;
    GenerationShape s = shape;
    for (size_t i = 0; i + 1 < flags.size(); i += 2) {
      if (flags[i] == "--ranks") on.parallel.ranks = std::stoi(flags[i + 1]);
      if (flags[i] == "--batch") s.batch = std::stoi(flags[i + 1]);
    }
    return estimate_generation_memory(on, s).memory.total_bytes();
  };
  OptionList list(config, capacity_bytes, total);
  if (list.fits_as_is()) return {};
  const int ranks = std::max(1, config.parallel.ranks);

  const CardCount cards = generation_cards(config, shape, capacity_bytes);
  if (cards.ranks > ranks) {
    std::vector<std::string> flags = {"--ranks", std::to_string(cards.ranks)};
    if (cards.batch != shape.batch) flags.insert(flags.end(), {"--batch", std::to_string(cards.batch)});
    list.add({}, flags, cards_text(cards.ranks, config.model.experts));
  }
  const GenerationEstimate now = estimate_generation_memory(config, shape);
  const int largest = largest_generation_batch_that_fits(config, shape, capacity_bytes);
  if (largest > 0 && largest < now.batch)
    list.add({}, {"--batch", std::to_string(largest)}, "fewer sequences: " + std::to_string(largest));
  if (runs_fp32_on_gpu(config)) list.add({"train.precision=bf16"}, {}, "bf16 activations, weight copies and KV cache");

  // A shorter context: the KV cache holds data.seq_len positions per sequence and layer.
  const int context = std::max(1, config.data.seq_len);
  const int step = std::min(64, context);
  ExperimentConfig shorter = config;
  const int seq = largest_multiple_that_fits(step, context - 1, [&](int s) {
    shorter.data.seq_len = s;
    return estimate_generation_memory(shorter, shape).memory.total_bytes() <= capacity_bytes;
  });
  if (seq > 0 && seq < context)
    list.add({"data.seq_len=" + std::to_string(seq)}, {},
             "a shorter context: KV caches of " + std::to_string(seq) + " positions");
  list.add_smaller_model([](const ExperimentConfig& c) { return estimate_memory(c).parameter_count; });
  return list.take();
}

}  // namespace mok
