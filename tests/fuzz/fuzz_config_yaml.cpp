// Fuzz target: an experiment config file (YAML) through the loader and the validator.
// Each input ends in a located ConfigError or a config that round-trips through print and
// load (config_invariants.h); any other exception is a failure.

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config/config_io.h"
#include "tests/fuzz/config_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mok::ExperimentConfig config;
  try {
    config = mok::parse_experiment_config(text, "fuzz.yaml");
  } catch (const mok::ConfigError& e) {
    // An empty config has no place to point at.
    if (e.line == 0 && e.message.rfind("empty config", 0) == 0) return 0;
    mok::fuzz::require_located_error(e, "fuzz.yaml", mok::fuzz::line_count(text));
    return 0;
  }
  mok::fuzz::require_round_trip(config);
  return 0;
}
