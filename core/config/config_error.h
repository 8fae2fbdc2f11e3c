#pragma once
// ConfigError: a config that cannot be used, with where and which key.
//   what() = "file:line:column: key.path: message"   (line/column 1-based)
// The location part shrinks to "file:" when the line is unknown (0), and the key part is
// left out when the error concerns no key (a syntax error, an unreadable file). For
// `--set` overrides the file is "--set", the line is the override's position among the
// --set arguments (1-based) and the column points into "dotted.key=value".

#include <stdexcept>
#include <string>

namespace mok {

struct ConfigError : std::runtime_error {
  ConfigError(std::string file, int line, int column, std::string key_path, std::string message);

  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based; 0 when unknown
  std::string key_path;
  std::string message;  // without the location prefix

  static std::string format(const std::string& file, int line, int column, const std::string& key_path,
                            const std::string& message);
};

}  // namespace mok
