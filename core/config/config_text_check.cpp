#include "core/config/config_text_check.h"

#include <cstdio>
#include <vector>

#include "core/config/config_error.h"
#include "core/util/utf8_text.h"

namespace mok {
namespace {

std::string hex_byte(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", c);
  return buf;
}

// Names of the control characters people meet by accident.
std::string control_name(uint32_t cp) {
  switch (cp) {
    case 0x00: return "a NUL byte (U+0000)";
    case 0x0C: return "a form feed (U+000C)";
    case 0x1B: return "an escape character (U+001B)";
    case 0x7F: return "a delete character (U+007F)";
    default: {
      char buf[40];
      std::snprintf(buf, sizeof buf, "the control character U+%04X", cp);
      return buf;
    }
  }
}

// YAML 1.2 printable characters: tab, LF, CR, U+0020..U+007E, U+0085, U+00A0 and above
// (surrogates and other invalid code points are already refused as invalid UTF-8).
bool yaml_allows(uint32_t cp) {
  if (cp == 0x09 || cp == 0x0A || cp == 0x0D || cp == 0x85) return true;
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp >= 0x80 && cp < 0xA0) return false;
  return cp != 0xFFFE && cp != 0xFFFF;
}

// The code point of the valid UTF-8 sequence at text[i] and its length.
uint32_t decode_at(std::string_view text, size_t i, size_t& len) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) {
    len = 1;
    return c;
  }
  len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  uint32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  return cp;
}

// "key" when `line` reads `  key: ...` (a block mapping key before `limit`, the bad byte's
// offset in the line), else "".
std::string block_key_of(std::string_view line, size_t limit) {
  size_t b = line.find_first_not_of(' ');
  if (b == std::string_view::npos || b >= limit || line[b] == '#' || line[b] == '-') return {};
  const size_t colon = line.find(':', b);
  if (colon == std::string_view::npos || colon >= limit) return {};
  if (colon + 1 < line.size() && line[colon + 1] != ' ' && line[colon + 1] != '\r') return {};
  std::string_view key = line.substr(b, colon - b);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  if (key.size() >= 2 && (key.front() == '"' || key.front() == '\'') && key.back() == key.front())
    key = key.substr(1, key.size() - 2);
  return std::string(key);
}

// The dotted path of block keys enclosing offset `at`: the key on its own line (when the
// byte comes after it), then each less indented key above.
std::string enclosing_key_path(std::string_view text, size_t at) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= at) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    lines.push_back(text.substr(start, end - start));
    if (nl == std::string_view::npos || nl >= at) break;
    start = nl + 1;
  }
  const size_t line_start = static_cast<size_t>(lines.back().data() - text.data());
  std::vector<std::string> keys;
  size_t indent = std::string_view::npos;  // of the innermost key found so far
  for (size_t i = lines.size(); i-- > 0;) {
    const std::string_view line = lines[i];
    const size_t b = line.find_first_not_of(' ');
    if (b == std::string_view::npos) continue;
    if (i + 1 != lines.size() && (indent == std::string_view::npos ? false : b >= indent)) continue;
    const std::string key = block_key_of(line, i + 1 == lines.size() ? at - line_start : line.size());
    if (key.empty()) {
      if (i + 1 == lines.size()) indent = b + 1;  // the bad line's own keys are its children
      continue;
    }
    keys.push_back(replace_invalid_utf8(key));
    indent = b;
    if (b == 0) break;
  }
  std::string path;
  for (size_t i = keys.size(); i-- > 0;) path += (path.empty() ? "" : ".") + keys[i];
  return path;
}

}  // namespace

void check_config_text(std::string_view text, const std::string& source, int line_base, int column_base) {
  const int64_t first_invalid = find_invalid_utf8(text);  // every byte before it is valid UTF-8
  int line = 0;    // 0-based within text
  int column = 0;  // 0-based, in characters
  for (size_t i = 0; i < text.size();) {
    std::string problem;
    size_t len = 1;
    uint32_t cp = 0;
    if (static_cast<int64_t>(i) == first_invalid) {
      problem = "not UTF-8 text: byte " + hex_byte(static_cast<unsigned char>(text[i])) +
                " does not begin a valid UTF-8 character; save the file as UTF-8";
    } else {
      cp = decode_at(text, i, len);
      if (!yaml_allows(cp)) problem = control_name(cp) + " is not allowed in YAML text";
    }
    if (!problem.empty()) {
      const int l = line_base + line;
      const int c = (line == 0 ? column_base : 1) + column;
      throw ConfigError(source, l, c, enclosing_key_path(text, i), problem);
    }
    if (cp == '\n') {
      ++line;
      column = 0;
    } else {
      ++column;
    }
    i += len;
  }
}

}  // namespace mok
