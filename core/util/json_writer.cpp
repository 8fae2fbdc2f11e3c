#include "core/util/json_writer.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/util/utf8_text.h"

namespace mok {

void JsonWriter::separate() {
  if (need_comma_) out_ += ',';
  need_comma_ = false;
}

JsonWriter& JsonWriter::begin_object() {
  separate();
  out_ += '{';
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  out_ += '}';
  need_comma_ = true;
  return *this;
}
JsonWriter& JsonWriter::begin_array() {
  separate();
  out_ += '[';
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  out_ += ']';
  need_comma_ = true;
  return *this;
}
JsonWriter& JsonWriter::key(std::string_view k) {
  separate();
  out_ += escape(k);
  out_ += ':';
  return *this;
}
JsonWriter& JsonWriter::value(std::string_view v) {
  separate();
  out_ += escape(v);
  need_comma_ = true;
  return *this;
}
namespace {

// A finite double with 17 significant digits ("%.17g": it reads back exactly), or "null"; with
// `float_literal`, integral values get ".0" ("0" → "0.0").
std::string number_text(double v, bool float_literal) {
  if (!std::isfinite(v)) return "null";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string text = buf;
  if (float_literal && !std::strpbrk(buf, ".eE")) text += ".0";
  return text;
}

}  // namespace

JsonWriter& JsonWriter::value(double v) {
  separate();
  out_ += number_text(v, false);
  need_comma_ = true;
  return *this;
}
JsonWriter& JsonWriter::float_value(double v) {
  separate();
  out_ += number_text(v, true);
  need_comma_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(int64_t v) {
  separate();
  out_ += std::to_string(v);
  need_comma_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(bool v) {
  separate();
  out_ += v ? "true" : "false";
  need_comma_ = true;
  return *this;
}
JsonWriter& JsonWriter::null() {
  separate();
  out_ += "null";
  need_comma_ = true;
  return *this;
}

std::string JsonWriter::escape(std::string_view raw) {
  // JSON text is UTF-8: bytes that break it (a file name, a quoted config value) become U+FFFD.
  const std::string s = replace_invalid_utf8(raw);
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace mok
