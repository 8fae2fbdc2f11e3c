// mok plan: what a config needs on each rank's device before it runs (core/plan/).
//   mok plan CONFIG [--set key=value]... [--device-memory SIZE] [--by-kind] [--json]
//   mok plan CONFIG --generate [--batch B] [--ranks R] [--prompt-tokens N] [--tokens T] [...]
// Prints the bytes per rank by category — of training (memory_plan.h), or with --generate of
// `mok generate` from a checkpoint of this config (generation_plan.h) — the total against a
// capacity (--device-memory, else parallel.device_memory_limit, else this machine's memory
// for a CPU run), whether it fits, the largest batch that fits, how many cards of that
// capacity it needs (card_count.h), and when it does not fit what to change (fit_advice.h);
// with --by-kind (always in --json) the saved activations by kind (saved_activation_plan.h).
// Exit codes: 0 fits (or no capacity known), 1 does not fit, 2 bad usage or bad config.
// Nothing is written to disk.

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "core/config/config_check.h"
#include "core/config/config_io.h"
#include "core/plan/card_count.h"
#include "core/plan/fit_advice.h"
#include "core/plan/generation_plan.h"
#include "core/plan/memory_plan.h"
#include "core/util/byte_size.h"
#include "core/train/resident_experts.h"
#include "core/util/json_writer.h"

namespace mok::cli {
namespace {

const char* kUsage =
    "usage: mok plan CONFIG [--set key=value]... [--device-memory SIZE] [--by-kind] [--json]\n"
    "       mok plan CONFIG --generate [--batch B] [--ranks R] [--prompt-tokens N] [--tokens T]\n"
    "                       [--resident-experts auto|off|all|N] [--set key=value]...\n"
    "                       [--device-memory SIZE] [--json]\n"
    "  the memory each rank needs, by category (an estimate before anything runs), against a\n"
    "  capacity: --device-memory (e.g. 16GiB), else parallel.device_memory_limit, else this\n"
    "  machine's memory for a CPU run; says whether it fits, the largest batch that does, how\n"
    "  many cards of that capacity it needs (expert-parallel ranks), and what to change to fit.\n"
    "  --by-kind         also the saved activations by kind, summed over layers: how each is\n"
    "                    kept (exact, a low-bit copy, a low-rank factor, recomputed) and its bytes\n"
    "                    (--json always has them, as saved_by_kind)\n"
    "  --generate        plan `mok generate` instead of training: B sequences (default 1) over\n"
    "                    R ranks (default parallel.ranks), prompts of N tokens (default 32),\n"
    "                    T new tokens each (default 200); the same flags as mok generate\n"
    "                    (--resident-experts: none unless given; auto fills the capacity as\n"
    "                    mok generate does on a GPU of that size)\n"
    "  Exit 0 when it fits (or no capacity is known), 1 when it does not, 2 on bad input.\n";

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / (1024.0 * 1024.0));
  return text;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string joined(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : sep) + p;
  return s;
}

// An option as the user types it: "--set k=v ... --ranks 16".
std::string option_command(const FitOption& o) {
  std::vector<std::string> words;
  for (const std::string& s : o.sets) words.push_back("--set " + s);
  words.insert(words.end(), o.flags.begin(), o.flags.end());
  return joined(words, " ");
}

void json_cards(JsonWriter& j, const std::optional<CardCount>& cards) {
  j.key("cards");
  if (!cards) {
    j.null();
    return;
  }
  j.begin_object();
  if (cards->ranks > 0) j.key("ranks").value(cards->ranks); else j.key("ranks").null();
  j.key("batch").value(cards->batch).key("rank_bytes").value(cards->rank_bytes);
  j.key("largest_ranks").value(cards->largest_ranks).key("replicated_bytes").value(cards->replicated_bytes);
  j.key("reason").value(cards->reason);
  j.end_object();
}

void json_advice(JsonWriter& j, const std::vector<FitOption>& options) {
  j.key("advice").begin_array();
  for (const FitOption& o : options) {
    j.begin_object().key("sets").begin_array();
    for (const std::string& s : o.sets) j.value(s);
    j.end_array().key("flags").begin_array();
    for (const std::string& f : o.flags) j.value(f);
    j.end_array();
    j.key("what").value(o.what).key("total_bytes").value(o.total_bytes).key("fits").value(o.fits);
    j.end_object();
  }
  j.end_array();
}

void print_cards(const std::optional<CardCount>& cards, double capacity, int ranks, const char* batch_key) {
  if (!cards) return;
  std::printf("cards of %s: ", format_byte_size(static_cast<int64_t>(capacity)).c_str());
  if (cards->ranks == 0)
    std::printf("none: %s\n", cards->reason.c_str());
  else if (cards->ranks == 1)
    std::printf("fits on one (%s per rank)\n", gib(cards->rank_bytes).c_str());
  else
    std::printf("%d (%d ranks, %s %d): %s per rank%s\n", cards->ranks, cards->ranks, batch_key, cards->batch,
                gib(cards->rank_bytes).c_str(), cards->ranks == ranks ? ", as configured" : "");
}

void print_advice(const std::vector<FitOption>& options, double capacity, bool training) {
  if (options.empty()) return;
  std::printf("to fit %s (each option planned again):\n", format_byte_size(static_cast<int64_t>(capacity)).c_str());
  size_t width = 0;
  for (const FitOption& o : options) width = std::max(width, option_command(o).size());
  for (const FitOption& o : options)
    std::printf("  %-*s %11s  %-13s %s\n", static_cast<int>(width), option_command(o).c_str(),
                gib(o.total_bytes).c_str(), o.fits ? "fits" : "does not fit", o.what.c_str());
  if (training)
    std::printf("  (Adam state stays on each rank's device beside the weights it holds: mok has no optimizer-state "
                "sharding or offload; more ranks shrink only the experts' share)\n");
}

struct Capacity {
  double bytes = 0.0;
  std::string from = "none";
};

}  // namespace

int cmd_plan(int argc, char** argv) {
  std::string file, capacity_text;
  std::vector<std::string> overrides;
  bool json = false, generate = false, by_kind = false;
  GenerationShape shape;
  int gen_ranks = 0;  // --ranks; 0 → parallel.ranks
  // --resident-experts: planned without resident layers unless asked (the advice and card
  // counts replan other rank counts, where auto would choose again).
  std::string resident_text = "off";
  std::vector<std::string> generate_only;  // generation flags given, for the error without --generate
  auto positive = [&](const std::string& flag, const char* text, int* out) {
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (!end || *end != '\0' || end == text || v < 1 || v > (1 << 24)) {
      std::fprintf(stderr, "mok plan: %s '%s' is not a whole number of at least 1\n", flag.c_str(), text);
      return false;
    }
    *out = static_cast<int>(v);
    generate_only.push_back(flag);
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--set" && i + 1 < argc) {
      overrides.push_back(argv[++i]);
    } else if (arg.rfind("--set=", 0) == 0) {
      overrides.push_back(arg.substr(6));
    } else if (arg == "--device-memory" && i + 1 < argc) {
      capacity_text = argv[++i];
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--by-kind") {
      by_kind = true;
    } else if (arg == "--generate") {
      generate = true;
    } else if (arg == "--batch" && i + 1 < argc) {
      if (!positive(arg, argv[++i], &shape.batch)) return 2;
    } else if (arg == "--ranks" && i + 1 < argc) {
      if (!positive(arg, argv[++i], &gen_ranks)) return 2;
    } else if (arg == "--prompt-tokens" && i + 1 < argc) {
      if (!positive(arg, argv[++i], &shape.prompt_tokens)) return 2;
    } else if (arg == "--tokens" && i + 1 < argc) {
      if (!positive(arg, argv[++i], &shape.new_tokens)) return 2;
    } else if (arg == "--resident-experts" && i + 1 < argc) {
      resident_text = argv[++i];
      generate_only.push_back(arg);
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "mok plan: unknown option or missing value '%s'\n\n%s", arg.c_str(), kUsage);
      return 2;
    } else if (file.empty()) {
      file = arg;
    } else {
      std::fprintf(stderr, "mok plan: unexpected argument '%s'\n\n%s", arg.c_str(), kUsage);
      return 2;
    }
  }
  if (file.empty()) {
    std::fprintf(stderr, "mok plan: missing CONFIG\n\n%s", kUsage);
    return 2;
  }
  if (generate && by_kind) {
    std::fprintf(stderr, "mok plan: --by-kind lists the saved activations of training; generation keeps none\n");
    return 2;
  }
  if (!generate && !generate_only.empty()) {
    std::fprintf(stderr,
                 "mok plan: %s plans generation: add --generate (training takes train.batch and parallel.ranks "
                 "through --set)\n",
                 generate_only.front().c_str());
    return 2;
  }
  ExperimentConfig config;
  try {
    config = load_experiment_config(file, overrides);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (generate && gen_ranks > 0) {
    const std::vector<int> choices = rank_choices(config);
    if (std::find(choices.begin(), choices.end(), gen_ranks) == choices.end()) {
      if (config.model.experts > 0)
        std::fprintf(stderr, "mok plan: --ranks %d does not divide model.experts (%d): every rank holds an equal share\n",
                     gen_ranks, config.model.experts);
      else
        std::fprintf(stderr, "mok plan: --ranks %d: a model without experts generates on one rank\n", gen_ranks);
      return 2;
    }
    config.parallel.ranks = gen_ranks;
  }
  Capacity capacity;
  if (!capacity_text.empty()) {
    const std::optional<int64_t> c = parse_byte_size(capacity_text);
    if (!c || *c <= 0) {
      std::fprintf(stderr, "mok plan: --device-memory '%s' is not a size above zero (e.g. 16GiB, 24GB)\n",
                   capacity_text.c_str());
      return 2;
    }
    capacity = {static_cast<double>(*c), "--device-memory"};
  } else if (!config.parallel.device_memory_limit.empty()) {
    capacity = {static_cast<double>(config.parallel.device_memory_limit_bytes()), "parallel.device_memory_limit"};
  } else if (config.parallel.device == "cpu") {
    capacity = {host_memory_bytes(), "this machine's memory"};
  }
  const bool known = capacity.bytes > 0.0;

  // The plan of one activity: its parts, total, largest batch, cards and advice.
  MemoryEstimate est;
  GenerationEstimate gen;
  int largest = 0;
  std::optional<CardCount> cards;
  std::vector<FitOption> advice;
  if (generate) {
    if (const std::string why = resident_experts_problem(resident_text, config); !why.empty()) {
      std::fprintf(stderr, "mok plan: %s\n", why.c_str());
      return 2;
    }
    shape.resident_layers = resident_layer_count(resident_text, config, shape, capacity.bytes);
    gen = estimate_generation_memory(config, shape);
    est = gen.memory;
    if (known) {
      largest = largest_generation_batch_that_fits(config, shape, capacity.bytes);
      cards = generation_cards(config, shape, capacity.bytes);
      advice = generation_fit_options(config, shape, capacity.bytes);
    }
  } else {
    est = estimate_memory(config);
    if (known) {
      largest = largest_batch_that_fits(config, capacity.bytes);
      cards = training_cards(config, capacity.bytes);
      advice = training_fit_options(config, capacity.bytes);
    }
  }
  const double total = est.total_bytes();
  const bool fits = !known || total <= capacity.bytes;
  const int batch = generate ? gen.batch : config.train.batch;
  // Ranks that share a GPU (peer copies, parallel.gpus "0,0"): every figure here is one rank's,
  // and that GPU holds the bytes of all the ranks placed on it.
  int ranks_per_gpu = 1;
  if (config.parallel.device == "cuda" && !config.parallel.gpus.empty()) {
    std::map<int, int> on;
    for (int g : parse_gpu_list(config.parallel.gpus)) ranks_per_gpu = std::max(ranks_per_gpu, ++on[g]);
  }

  if (json) {
    JsonWriter j;
    j.begin_object().key("config").value(file).key("device").value(config.parallel.device);
    j.key("ranks").value(static_cast<int64_t>(config.parallel.ranks)).key("batch").value(static_cast<int64_t>(batch));
    j.key("parameters").value(est.parameter_count).key("rank_parameters").value(est.device_parameter_count);
    j.key("bytes").begin_object();
    for (const MemoryEstimate::Part& p : est.parts) j.key(p.category).value(p.bytes);
    j.end_object();
    j.key("total_bytes").value(total);
    j.key("ranks_per_gpu").value(static_cast<int64_t>(ranks_per_gpu));
    j.key("bytes_per_gpu").value(total * ranks_per_gpu);
    // Kitten warm-up: the bytes above are the steady state; the first steps keep everything exact.
    j.key("kitten_warmup_steps").value(static_cast<int64_t>(est.kitten_warmup_steps));
    if (est.kitten_warmup_steps > 0) {
      j.key("warmup_saved_activation_bytes").value(est.warmup_saved_activation_bytes);
      j.key("warmup_total_bytes").value(est.warmup_total_bytes);
    }
    if (known) j.key("capacity_bytes").value(capacity.bytes); else j.key("capacity_bytes").null();
    j.key("capacity_from").value(capacity.from);
    if (known) j.key("fits").value(fits); else j.key("fits").null();
    if (known) j.key("largest_batch").value(static_cast<int64_t>(largest)); else j.key("largest_batch").null();
    j.key("mode").value(generate ? "generate" : "train");
    j.key("replicated_parameters").value(est.replicated_parameter_count);
    if (generate) {
      j.key("sequences_per_rank").value(gen.sequences_per_rank).key("context").value(gen.context);
      j.key("prefill_tokens").value(gen.prefill_tokens);
      j.key("kv_cache_bytes_per_sequence").value(gen.kv_cache_bytes_per_sequence);
      j.key("resident_layers").value(static_cast<int64_t>(shape.resident_layers));
    }
    if (!generate) {
      j.key("saved_by_kind").begin_array();
      for (const SavedKindBytes& r : est.saved_by_kind)
        j.begin_object().key("kind").value(r.kind).key("kept").value(r.kept).key("layers").value(
            static_cast<int64_t>(r.layers)).key("bytes").value(r.bytes).end_object();
      j.end_array();
    }
    json_cards(j, cards);
    json_advice(j, advice);
    j.end_object();
    std::printf("%s\n", j.str().c_str());
    return fits ? 0 : 1;
  }

  if (generate)
    std::printf("%s: generation on %s, %d rank(s), %d sequence(s) (%d per rank), prompts of %d tokens, %d new; "
                "%.4g parameters (%.4g per rank)\n",
                file.c_str(), config.parallel.device.c_str(), config.parallel.ranks, gen.batch, gen.sequences_per_rank,
                shape.prompt_tokens, shape.new_tokens, est.parameter_count, est.device_parameter_count);
  else
    std::printf("%s: %s, %d rank(s), batch %d; %.4g parameters (%.4g per rank)\n", file.c_str(),
                config.parallel.device.c_str(), config.parallel.ranks, config.train.batch, est.parameter_count,
                est.device_parameter_count);
  std::printf("  %-20s %12s\n", "per rank", "MiB");
  for (const MemoryEstimate::Part& p : est.parts) std::printf("  %-20s %12s\n", p.category.c_str(), mib(p.bytes).c_str());
  std::printf("  %-20s %12s\n", "total", mib(total).c_str());
  if (ranks_per_gpu > 1)
    std::printf("parallel.gpus '%s' puts %d ranks on one GPU: the figures are per rank, and that GPU holds %d × %s "
                "= %s MiB\n",
                config.parallel.gpus.c_str(), ranks_per_gpu, ranks_per_gpu, mib(total).c_str(),
                mib(total * ranks_per_gpu).c_str());
  if (generate)
    std::printf("kv_cache: %s MiB per sequence (%d positions); no gradients or optimizer state\n",
                mib(gen.kv_cache_bytes_per_sequence).c_str(), gen.context);
  if (generate && shape.resident_layers > 0)
    std::printf("resident_experts: %d MoE layer(s) held whole on every rank (--resident-experts %s)\n",
                shape.resident_layers, resident_text.c_str());
  if (by_kind) {
    const double saved = est.bytes_of("saved_activations");
    std::printf("saved_activations by kind (summed over layers)\n  %-24s %-16s %6s %12s %7s\n", "kind", "kept",
                "layers", "MiB", "share");
    for (const SavedKindBytes& r : est.saved_by_kind)
      std::printf("  %-24s %-16s %6d %12s %6.1f%%\n", r.kind.c_str(), r.kept.c_str(), r.layers, mib(r.bytes).c_str(),
                  saved > 0 ? 100.0 * r.bytes / saved : 0.0);
  }
  if (est.kitten_warmup_steps > 0)
    std::printf("saved_activations: the kitten steady state; the first %d step(s) are an exact warm-up that keeps "
                "%s MiB (total %s MiB)\n",
                est.kitten_warmup_steps, mib(est.warmup_saved_activation_bytes).c_str(),
                mib(est.warmup_total_bytes).c_str());
  if (known) {
    std::printf("capacity %s (%s): %s", format_byte_size(static_cast<int64_t>(capacity.bytes)).c_str(),
                capacity.from.c_str(), fits ? "fits" : "does not fit");
    const int smallest = generate ? std::max(1, config.parallel.ranks)
                                  : std::max(1, config.parallel.ranks) * std::max(1, config.train.grad_accum);
    if (largest > 0)
      std::printf("; the largest %s that fits is %d\n", generate ? "number of sequences" : "batch", largest);
    else if (generate)
      std::printf("; not even %d sequence(s) fit: more ranks, a shorter context or a smaller model\n", smallest);
    else
      std::printf("; not even a batch of %d fits: fewer or smaller layers, kittens, bf16 or more ranks\n", smallest);
    print_cards(cards, capacity.bytes, config.parallel.ranks, generate ? "sequences" : "train.batch");
    print_advice(advice, capacity.bytes, !generate);
  } else {
    std::printf("no capacity known: pass --device-memory (e.g. 16GiB)\n");
  }
  if (generate)
    std::printf("(an estimate before anything runs; 'mok generate --untrained %s' with the same flags measures it, "
                "no checkpoint needed)\n",
                file.c_str());
  else
    std::printf("(an estimate before anything runs; the tracker's figures of a run are the measured ones)\n");
  return fits ? 0 : 1;
}

}  // namespace mok::cli
