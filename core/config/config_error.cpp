#include "core/config/config_error.h"

#include <utility>

namespace mok {

ConfigError::ConfigError(std::string file_, int line_, int column_, std::string key_path_, std::string message_)
    : std::runtime_error(format(file_, line_, column_, key_path_, message_)),
      file(std::move(file_)),
      line(line_),
      column(column_),
      key_path(std::move(key_path_)),
      message(std::move(message_)) {}

std::string ConfigError::format(const std::string& file, int line, int column, const std::string& key_path,
                                const std::string& message) {
  std::string s;
  s.reserve(file.size() + key_path.size() + message.size() + 32);
  s.append(file);
  if (line > 0) {
    s.append(":").append(std::to_string(line));
    if (column > 0) s.append(":").append(std::to_string(column));
  }
  s.append(": ");
  if (!key_path.empty()) s.append(key_path).append(": ");
  s.append(message);
  return s;
}

}  // namespace mok
