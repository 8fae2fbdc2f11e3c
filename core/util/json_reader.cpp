#include "core/util/json_reader.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/util/utf8_text.h"

namespace mok {

namespace {

const char* type_name(JsonValue::Type t) {
  switch (t) {
    case JsonValue::Type::null: return "null";
    case JsonValue::Type::boolean: return "boolean";
    case JsonValue::Type::number: return "number";
    case JsonValue::Type::string: return "string";
    case JsonValue::Type::array: return "array";
    case JsonValue::Type::object: return "object";
  }
  return "?";
}

[[noreturn]] void type_error(JsonValue::Type want, JsonValue::Type got) {
  throw std::runtime_error(std::string("JSON: expected ") + type_name(want) + ", found " +
                           type_name(got));
}

// A piece of the input quoted in a message: at most `max_bytes` (its end, where a lexer
// error is), UTF-8, control characters as \xNN.
std::string quoted_piece(std::string_view raw, size_t max_bytes = 40) {
  const bool cut = raw.size() > max_bytes;
  if (cut) raw = raw.substr(raw.size() - max_bytes);
  std::string out = cut ? "…" : "";
  for (unsigned char c : replace_invalid_utf8(raw)) {
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// nlohmann-json's message without its "[json.exception.…] parse error at line …: " prefix
// (parse_json gives the place itself), the bytes it quotes shortened by quoted_piece.
std::string library_message(const std::string& what) {
  std::string m = what;
  if (m.rfind("[json.exception.", 0) == 0) {
    const size_t close = m.find("] ");
    if (close != std::string::npos) m.erase(0, close + 2);
  }
  if (m.rfind("parse error", 0) == 0) {
    const size_t colon = m.find(": ");
    if (colon != std::string::npos) m.erase(0, colon + 2);
  }
  // "…; last read: '<token>'[; expected …]" and "number overflow parsing '<token>'"
  for (const char* marker : {"; last read: '", "parsing '"}) {
    const size_t at = m.find(marker);
    if (at == std::string::npos) continue;
    const size_t begin = at + std::char_traits<char>::length(marker);
    size_t end = m.rfind("'; expected ");
    if (end == std::string::npos || end < begin) end = m.rfind('\'');
    if (end == std::string::npos || end < begin) continue;
    m = m.substr(0, begin) + quoted_piece(std::string_view(m).substr(begin, end - begin)) + m.substr(end);
    break;
  }
  return m;
}

[[noreturn]] void fail_at(std::string_view text, size_t offset, const std::string& what) {
  offset = std::min(offset, text.size());
  const std::string_view before = text.substr(0, offset);
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t line_start = before.rfind('\n');
  const size_t column = offset - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
  throw JsonParseError("JSON at byte " + std::to_string(offset) + " (line " + std::to_string(line) + ", column " +
                           std::to_string(column) + "): " + what,
                       offset);
}

// The text as nlohmann-json's lexer reads it, one byte at a time; each step leaves in
// *consumed how many bytes have been read, so that the errors the SAX handler finds itself
// (a duplicate key, nesting too deep) have a byte offset too.
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* begin, const char* at, size_t* consumed) : begin_(begin), at_(at), consumed_(consumed) {}
  reference operator*() const { return *at_; }
  CountingIterator& operator++() {
    ++at_;
    *consumed_ = static_cast<size_t>(at_ - begin_);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const CountingIterator& o) const { return at_ == o.at_; }
  bool operator!=(const CountingIterator& o) const { return at_ != o.at_; }

 private:
  const char* begin_;
  const char* at_;
  size_t* consumed_;
};

}  // namespace

// nlohmann-json's SAX events → a JsonValue tree. Containers being filled wait on a stack;
// each object keeps the set of its keys (duplicates are refused: two readers of one file
// could otherwise take different values).
class JsonTreeBuilder {
 public:
  using json = nlohmann::json;

  JsonTreeBuilder(std::string_view text, const size_t* consumed, int max_depth)
      : text_(text), consumed_(consumed), max_depth_(max_depth) {}

  JsonValue take_root() { return std::move(root_); }

  bool null() { return add(JsonValue()); }
  bool boolean(bool b) {
    JsonValue v;
    v.type_ = JsonValue::Type::boolean;
    v.bool_ = b;
    return add(std::move(v));
  }
  bool number_integer(json::number_integer_t n) {
    JsonValue v = number(static_cast<double>(n), std::to_string(n));
    v.number_kind_ = JsonValue::NumberKind::int64;
    v.int_ = n;
    return add(std::move(v));
  }
  bool number_unsigned(json::number_unsigned_t n) {
    JsonValue v = number(static_cast<double>(n), std::to_string(n));
    v.number_kind_ = JsonValue::NumberKind::uint64;
    v.uint_ = n;
    return add(std::move(v));
  }
  // A fraction or exponent, or an integer beyond 64 bits; `text` is the number as written.
  bool number_float(json::number_float_t d, const json::string_t& text) { return add(number(d, text)); }
  bool string(json::string_t& s) {
    JsonValue v;
    v.type_ = JsonValue::Type::string;
    v.text_ = std::move(s);
    return add(std::move(v));
  }
  bool binary(json::binary_t&) { return false; }  // not produced by JSON text
  bool start_object(std::size_t) { return open(JsonValue::Type::object); }
  bool key(json::string_t& k) {
    if (!keys_seen_.back().insert(k).second) {
      // The lexer has just read the key's closing quote; its opening one is the nearest
      // quote before that is not escaped (preceded by an even run of backslashes).
      size_t at = *consumed_ >= 2 ? *consumed_ - 2 : 0;
      for (; at > 0; --at) {
        if (text_[at] != '"') continue;
        size_t backslashes = 0;
        while (backslashes < at && text_[at - 1 - backslashes] == '\\') ++backslashes;
        if (backslashes % 2 == 0) break;
      }
      fail_at(text_, at, "duplicate key \"" + quoted_piece(k, 80) + "\"");
    }
    keys_.back() = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(JsonValue::Type::array); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t position, const std::string&, const json::exception& e) {
    // `position` counts the bytes read, the offending one included: its offset is one less.
    fail_at(text_, position > 0 ? position - 1 : 0, library_message(e.what()));
  }

 private:
  static JsonValue number(double d, std::string text) {
    JsonValue v;
    v.type_ = JsonValue::Type::number;
    v.double_ = d;
    v.text_ = std::move(text);
    return v;
  }

  bool open(JsonValue::Type type) {
    if (static_cast<int>(open_.size()) >= max_depth_) {
      // The lexer has just read the '[' or '{'.
      fail_at(text_, *consumed_ > 0 ? *consumed_ - 1 : 0,
              "nesting too deep (more than " + std::to_string(max_depth_) + " arrays and objects inside one another)");
    }
    JsonValue v;
    v.type_ = type;
    open_.push_back(std::move(v));
    keys_.emplace_back();
    keys_seen_.emplace_back();
    return true;
  }

  bool close() {
    JsonValue v = std::move(open_.back());
    open_.pop_back();
    keys_.pop_back();
    keys_seen_.pop_back();
    return add(std::move(v));
  }

  bool add(JsonValue v) {
    if (open_.empty()) {
      root_ = std::move(v);
    } else if (open_.back().type_ == JsonValue::Type::array) {
      open_.back().array_.push_back(std::move(v));
    } else {
      open_.back().object_.emplace_back(std::move(keys_.back()), std::move(v));
    }
    return true;
  }

  std::string_view text_;
  const size_t* consumed_;
  int max_depth_;
  JsonValue root_;
  std::vector<JsonValue> open_;                              // containers being filled
  std::vector<std::string> keys_;                            // per open container: the key of the next member
  std::vector<std::unordered_set<std::string>> keys_seen_;  // per open container: its keys so far
};

bool JsonValue::as_bool() const {
  if (type_ != Type::boolean) type_error(Type::boolean, type_);
  return bool_;
}

double JsonValue::as_double() const {
  if (type_ != Type::number) type_error(Type::number, type_);
  return double_;
}

namespace {

// A number written as an integer (digits, an optional '-') that fits no 64-bit type.
bool is_integer_text(const std::string& text) {
  const size_t digits = text.rfind('-', 0) == 0 ? 1 : 0;
  return text.size() > digits && text.find_first_not_of("0123456789", digits) == std::string::npos;
}

}  // namespace

int64_t JsonValue::as_int64() const {
  if (type_ != Type::number) type_error(Type::number, type_);
  switch (number_kind_) {
    case NumberKind::int64: return int_;
    case NumberKind::uint64:
      if (uint_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw std::runtime_error("JSON: integer out of range: " + text_);
      return static_cast<int64_t>(uint_);
    case NumberKind::other: break;
  }
  if (is_integer_text(text_)) throw std::runtime_error("JSON: integer out of range: " + text_);
  throw std::runtime_error("JSON: expected an integer, found " + text_);
}

uint64_t JsonValue::as_uint64() const {
  if (type_ != Type::number) type_error(Type::number, type_);
  switch (number_kind_) {
    case NumberKind::uint64: return uint_;
    case NumberKind::int64:
      if (int_ < 0) throw std::runtime_error("JSON: expected a non-negative integer, found " + text_);
      return static_cast<uint64_t>(int_);  // "-0"
    case NumberKind::other: break;
  }
  if (is_integer_text(text_) && text_[0] != '-') throw std::runtime_error("JSON: integer out of range: " + text_);
  throw std::runtime_error("JSON: expected a non-negative integer, found " + text_);
}

const std::string& JsonValue::as_string() const {
  if (type_ != Type::string) type_error(Type::string, type_);
  return text_;
}

const std::vector<JsonValue>& JsonValue::as_array() const {
  if (type_ != Type::array) type_error(Type::array, type_);
  return array_;
}

const std::vector<std::pair<std::string, JsonValue>>& JsonValue::as_object() const {
  if (type_ != Type::object) type_error(Type::object, type_);
  return object_;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  if (type_ != Type::object) return nullptr;
  for (const auto& [k, v] : object_)
    if (k == key) return &v;
  return nullptr;
}

const JsonValue& JsonValue::at(std::string_view key) const {
  if (type_ != Type::object) type_error(Type::object, type_);
  const JsonValue* v = find(key);
  if (!v) throw std::runtime_error("JSON: missing key \"" + std::string(key) + "\"");
  return *v;
}

JsonValue parse_json(std::string_view text, int max_depth) {
  size_t consumed = 0;
  JsonTreeBuilder builder(text, &consumed, max_depth);
  const CountingIterator first(text.data(), text.data(), &consumed);
  const CountingIterator last(text.data(), text.data() + text.size(), &consumed);
  bool complete = false;
  try {
    // Strict: one value, then only whitespace; no comments. Errors arrive at
    // builder.parse_error, which throws JsonParseError.
    complete = nlohmann::json::sax_parse(first, last, &builder, nlohmann::json::input_format_t::json,
                                         /*strict=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {  // none expected: the handler reports them
    fail_at(text, consumed, library_message(e.what()));
  }
  if (!complete) fail_at(text, consumed, "not a complete JSON value");
  return builder.take_root();
}

}  // namespace mok
