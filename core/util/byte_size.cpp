#include "core/util/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mok {

std::optional<int64_t> parse_byte_size(const std::string& text) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  size_t num_end = b;
  while (num_end < e && (std::isdigit(static_cast<unsigned char>(text[num_end])) || text[num_end] == '.')) ++num_end;
  if (num_end == b) return std::nullopt;
  const std::string number = text.substr(b, num_end - b);
  if (number.find('.') != number.rfind('.') || number == ".") return std::nullopt;
  size_t unit_begin = num_end;
  while (unit_begin < e && text[unit_begin] == ' ') ++unit_begin;
  std::string unit;
  for (size_t i = unit_begin; i < e; ++i) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kib") scale = 1024.0;
  else if (unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "tb") scale = 1e12;
  else return std::nullopt;
  const double value = std::strtod(number.c_str(), nullptr) * scale;
  if (!std::isfinite(value) || value < 0 || value >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(std::llround(value));
}

std::string format_byte_size(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char text[48];
  if (u == 0 || std::fabs(v - std::round(v)) < 0.05)
    std::snprintf(text, sizeof text, "%.0f %s", v, units[u]);
  else
    std::snprintf(text, sizeof text, "%.1f %s", v, units[u]);
  return text;
}

}  // namespace mok
