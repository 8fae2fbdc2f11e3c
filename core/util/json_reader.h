#pragma once
// JsonValue / parse_json: a strict JSON reader (RFC 8259) for the JSON files that guard a
// process: safetensors headers, trainer_state.json, Hugging Face config.json,
// tokenizer.json and index files. The grammar is nlohmann-json's (its SAX parser, which
// also checks that strings are UTF-8); on top of it this reader refuses duplicate keys,
// bounds nesting, keeps members in document order and keeps integers exact to 64 bits.
// Every syntax error throws JsonParseError naming the byte offset (and line and column).

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mok {

class JsonParseError : public std::runtime_error {
 public:
  // `what` is the whole message, with its place ("JSON at byte 3 (line 1, column 4): …").
  JsonParseError(const std::string& what, size_t offset) : std::runtime_error(what), offset_(offset) {}
  size_t offset() const { return offset_; }

 private:
  size_t offset_;
};

class JsonValue {
 public:
  enum class Type { null, boolean, number, string, array, object };

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::null; }
  bool is_bool() const { return type_ == Type::boolean; }
  bool is_number() const { return type_ == Type::number; }
  bool is_string() const { return type_ == Type::string; }
  bool is_array() const { return type_ == Type::array; }
  bool is_object() const { return type_ == Type::object; }

  // Accessors throw std::runtime_error on a type mismatch.
  bool as_bool() const;
  double as_double() const;
  // Exact for integers written without fraction or exponent; throws otherwise or on overflow.
  int64_t as_int64() const;
  uint64_t as_uint64() const;
  const std::string& as_string() const;
  const std::vector<JsonValue>& as_array() const;
  // Members in document order (duplicate keys are rejected by the parser).
  const std::vector<std::pair<std::string, JsonValue>>& as_object() const;

  // Object member or nullptr.
  const JsonValue* find(std::string_view key) const;
  // Object member; throws std::runtime_error naming the key when missing.
  const JsonValue& at(std::string_view key) const;

 private:
  friend class JsonTreeBuilder;  // parse_json's SAX handler builds the tree
  // How the number was written: an integer that fits int64 (negative ones) or uint64, or
  // anything else (a fraction, an exponent, an integer beyond 64 bits).
  enum class NumberKind { int64, uint64, other };

  Type type_ = Type::null;
  bool bool_ = false;
  NumberKind number_kind_ = NumberKind::other;
  int64_t int_ = 0;    // NumberKind::int64
  uint64_t uint_ = 0;  // NumberKind::uint64
  double double_ = 0;  // every number
  std::string text_;   // string value, or a number's text (for messages)
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> object_;
};

// Parses one JSON value; trailing whitespace is allowed, anything else is an error.
// max_depth bounds nesting: at most that many arrays and objects inside one another
// (malicious headers).
JsonValue parse_json(std::string_view text, int max_depth = 64);

}  // namespace mok
