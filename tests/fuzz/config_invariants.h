#pragma once
// What every config parse must end in, for the config fuzz targets: a ConfigError that
// says where (file, a line inside the text, a message), or a config that prints and loads
// back to itself.

#include <algorithm>
#include <string>

#include "core/config/config_io.h"
#include "tests/fuzz/fuzz_require.h"

namespace mok::fuzz {

// `last_line`: the source's last line (a file's line count, the number of --set arguments).
inline void require_located_error(const ConfigError& e, const std::string& source, int last_line) {
  const std::string what = e.what();
  fuzz_require(!e.message.empty(), "a ConfigError has a message: " + what);
  fuzz_require(e.file == source, "the error names the source '" + source + "': " + what);
  fuzz_require(what.rfind(source + ":", 0) == 0, "what() starts with the source: " + what);
  fuzz_require(e.line >= 1 && e.line <= last_line,
               "the error's line lies in the text (1.." + std::to_string(last_line) + "): " + what);
  fuzz_require(e.column >= 0, "the column is not negative: " + what);
}

// Lines of a text as YAML counts them (a final line break starts an empty last line).
inline int line_count(const std::string& text) {
  return 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// print → load gives the same config, and printing that gives the same text.
inline void require_round_trip(const ExperimentConfig& config) {
  const std::string printed = experiment_config_to_yaml(config);
  ExperimentConfig again;
  try {
    again = parse_experiment_config(printed, "printed.yaml");
  } catch (const ConfigError& e) {
    fuzz_failure(std::string("a printed config loads again, but: ") + e.what() + "\n--- printed:\n" + printed);
  }
  fuzz_require(again == config, "the printed config loads to the same config\n--- printed:\n" + printed +
                                    "--- printed again:\n" + experiment_config_to_yaml(again));
  fuzz_require(experiment_config_to_yaml(again) == printed, "printing is stable\n--- printed:\n" + printed);
}

}  // namespace mok::fuzz
