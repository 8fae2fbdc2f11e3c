#pragma once
// JsonValue / parse_json: a small strict JSON reader (RFC 8259) for headers and state files
// the project writes itself (safetensors headers, trainer_state.json). Numbers keep their
// text so 64-bit integers round-trip exactly. Errors throw JsonParseError with the byte
// offset of the problem.

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mok {

class JsonParseError : public std::runtime_error {
 public:
  JsonParseError(const std::string& what, size_t offset)
      : std::runtime_error(what + " at byte " + std::to_string(offset)), offset_(offset) {}
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

  static JsonValue make_null() { return JsonValue(); }
  static JsonValue make_bool(bool b);
  static JsonValue make_number(std::string text);
  static JsonValue make_string(std::string s);
  static JsonValue make_array(std::vector<JsonValue> items);
  static JsonValue make_object(std::vector<std::pair<std::string, JsonValue>> members);

 private:
  Type type_ = Type::null;
  bool bool_ = false;
  std::string text_;  // string value, or a number's text
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> object_;
};

// Parses one JSON value; trailing whitespace is allowed, anything else is an error.
// max_depth bounds nesting (malicious headers).
JsonValue parse_json(std::string_view text, int max_depth = 64);

}  // namespace mok
