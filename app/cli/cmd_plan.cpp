// mok plan: what a config needs on each rank's device before it runs (core/plan/memory_plan.h).
//   mok plan CONFIG [--set key=value]... [--device-memory SIZE] [--json]
// Prints the bytes per rank by category, the total against a capacity (--device-memory, else
// parallel.device_memory_limit, else this machine's memory for a CPU run), whether it fits,
// and the largest batch that fits. Exit codes: 0 fits (or no capacity known), 1 does not
// fit, 2 bad usage or bad config. Nothing is written to disk.

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "core/config/config_io.h"
#include "core/plan/memory_plan.h"
#include "core/util/byte_size.h"
#include "core/util/json_writer.h"

namespace mok::cli {
namespace {

const char* kUsage =
    "usage: mok plan CONFIG [--set key=value]... [--device-memory SIZE] [--json]\n"
    "  the memory each rank needs, by category (an estimate before anything runs), against a\n"
    "  capacity: --device-memory (e.g. 16GiB), else parallel.device_memory_limit, else this\n"
    "  machine's memory for a CPU run; says whether it fits and the largest batch that does.\n"
    "  Exit 0 when it fits (or no capacity is known), 1 when it does not, 2 on bad input.\n";

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / (1024.0 * 1024.0));
  return text;
}

}  // namespace

int cmd_plan(int argc, char** argv) {
  std::string file, capacity_text;
  std::vector<std::string> overrides;
  bool json = false;
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
  ExperimentConfig config;
  try {
    config = load_experiment_config(file, overrides);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  double capacity = 0.0;
  std::string capacity_from = "none";
  if (!capacity_text.empty()) {
    const std::optional<int64_t> c = parse_byte_size(capacity_text);
    if (!c || *c <= 0) {
      std::fprintf(stderr, "mok plan: --device-memory '%s' is not a size above zero (e.g. 16GiB, 24GB)\n",
                   capacity_text.c_str());
      return 2;
    }
    capacity = static_cast<double>(*c);
    capacity_from = "--device-memory";
  } else if (!config.parallel.device_memory_limit.empty()) {
    capacity = static_cast<double>(parse_byte_size(config.parallel.device_memory_limit).value_or(0));
    capacity_from = "parallel.device_memory_limit";
  } else if (config.parallel.device == "cpu") {
    capacity = host_memory_bytes();
    capacity_from = "this machine's memory";
  }

  const MemoryEstimate est = estimate_memory(config);
  const double total = est.total_bytes();
  const bool known = capacity > 0.0;
  const bool fits = !known || total <= capacity;
  const int largest = known ? largest_batch_that_fits(config, capacity) : 0;

  if (json) {
    JsonWriter j;
    j.begin_object().key("config").value(file).key("device").value(config.parallel.device);
    j.key("ranks").value(static_cast<int64_t>(config.parallel.ranks)).key("batch").value(static_cast<int64_t>(config.train.batch));
    j.key("parameters").value(est.parameter_count).key("rank_parameters").value(est.device_parameter_count);
    j.key("bytes").begin_object();
    for (const MemoryEstimate::Part& p : est.parts) j.key(p.category).value(p.bytes);
    j.end_object();
    j.key("total_bytes").value(total);
    // Kitten warm-up: the bytes above are the steady state; the first steps keep everything exact.
    j.key("kitten_warmup_steps").value(static_cast<int64_t>(est.kitten_warmup_steps));
    if (est.kitten_warmup_steps > 0) {
      j.key("warmup_saved_activation_bytes").value(est.warmup_saved_activation_bytes);
      j.key("warmup_total_bytes").value(est.warmup_total_bytes);
    }
    if (known) j.key("capacity_bytes").value(capacity); else j.key("capacity_bytes").null();
    j.key("capacity_from").value(capacity_from);
    if (known) j.key("fits").value(fits); else j.key("fits").null();
    if (known) j.key("largest_batch").value(static_cast<int64_t>(largest)); else j.key("largest_batch").null();
    j.end_object();
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%s: %s, %d rank(s), batch %d; %.4g parameters (%.4g per rank)\n", file.c_str(),
                config.parallel.device.c_str(), config.parallel.ranks, config.train.batch, est.parameter_count,
                est.device_parameter_count);
    std::printf("  %-20s %12s\n", "per rank", "MiB");
    for (const MemoryEstimate::Part& p : est.parts) std::printf("  %-20s %12s\n", p.category.c_str(), mib(p.bytes).c_str());
    std::printf("  %-20s %12s\n", "total", mib(total).c_str());
    if (est.kitten_warmup_steps > 0)
      std::printf("saved_activations: the kitten steady state; the first %d step(s) are an exact warm-up that keeps "
                  "%s MiB (total %s MiB)\n",
                  est.kitten_warmup_steps, mib(est.warmup_saved_activation_bytes).c_str(),
                  mib(est.warmup_total_bytes).c_str());
    if (known) {
      std::printf("capacity %s (%s): %s", format_byte_size(static_cast<int64_t>(capacity)).c_str(),
                  capacity_from.c_str(), fits ? "fits" : "does not fit");
      if (largest > 0)
        std::printf("; the largest batch that fits is %d\n", largest);
      else
        std::printf("; not even a batch of %d fits: fewer or smaller layers, kittens, bf16 or more ranks\n",
                    std::max(1, config.parallel.ranks) * std::max(1, config.train.grad_accum));
    } else {
      std::printf("no capacity known: pass --device-memory (e.g. 16GiB)\n");
    }
    std::printf("(an estimate before anything runs; the tracker's figures of a run are the measured ones)\n");
  }
  return fits ? 0 : 1;
}

}  // namespace mok::cli
