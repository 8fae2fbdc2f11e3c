// Fuzz target: `--set dotted.key=value` overrides. The input's lines are the --set
// arguments (at most 8), applied to a small valid config. Each input ends in a ConfigError
// located at one of the arguments (or at the base file's key a bad value conflicts with)
// or a config that round-trips through print and load.

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/config/config_io.h"
#include "tests/fuzz/config_invariants.h"

namespace {

const char* const kBase =
    "name: fuzz\n"
    "seed: 7\n"
    "data: {corpus: brown, tokenizer: byte, seq_len: 32}\n"
    "model: {layers: 2, d_model: 32, heads: 2, experts: 4, top_k: 2, expert_hidden: 32}\n"
    "train: {steps: 4, batch: 4, lr: 3.0e-3, eval_every: 2}\n"
    "kittens: {mode: kitten, method: sketch, rank: 4, schedule: constant}\n"
    "routing: {dispatcher: classic, policy: topk, capacity_factor: 0}\n"
    "parallel: {device: cpu, ranks: 1, comm: local, threads: 1}\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> overrides;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; overrides.size() < 8 && std::getline(in, line);) overrides.push_back(line);

  mok::ExperimentConfig config;
  try {
    config = mok::parse_experiment_config(kBase, "base.yaml", overrides);
  } catch (const mok::ConfigError& e) {
    if (e.file == "base.yaml") {
      mok::fuzz::require_located_error(e, "base.yaml", mok::fuzz::line_count(kBase));
    } else {
      mok::fuzz::require_located_error(e, "--set", static_cast<int>(overrides.size()));
      mok::fuzz::fuzz_require(e.column >= 1 && e.column <= static_cast<int>(overrides[e.line - 1].size()) + 1,
                              "the column lies in the --set argument: " + std::string(e.what()));
    }
    return 0;
  }
  mok::fuzz::require_round_trip(config);
  return 0;
}
