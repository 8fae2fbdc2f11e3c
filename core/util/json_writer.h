#pragma once
// JsonWriter: builds one JSON object as text, for `--json` output and exports.
//   JsonWriter j; j.begin_object(); j.key("steps").value(200); j.end_object(); j.str();
//
// The reader is nlohmann-json (json_reader.cpp); the writer stays the project's own because
// its bytes are a contract (DESIGN.md, `--json`; safetensors headers; trainer_state.json):
// nlohmann's dump() writes the shortest round-trip double (0.1, not %.17g's
// 0.10000000000000001) and 3.0 for an integral double (here 3), escapes U+0008 as \b
// (here \u0008), throws on invalid UTF-8 unless told to replace it, and nlohmann::json
// sorts keys. Any of these would change the output that scripts and tests compare.

#include <cstdint>
#include <string>
#include <string_view>

namespace mok {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view v);
  JsonWriter& value(const char* v) { return value(std::string_view(v)); }
  JsonWriter& value(const std::string& v) { return value(std::string_view(v)); }
  JsonWriter& value(double v);  // NaN/inf become null
  // The same, always written as a floating-point literal ("0.0", "10000.0"): for readers
  // that type-check floats and refuse an integer literal (Transformers' config classes).
  JsonWriter& float_value(double v);
  JsonWriter& value(int64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(bool v);
  JsonWriter& null();
  const std::string& str() const { return out_; }

  // With the quotes; bytes that are not valid UTF-8 become U+FFFD (JSON must be UTF-8).
  static std::string escape(std::string_view s);

 private:
  void separate();
  std::string out_;
  bool need_comma_ = false;
};

}  // namespace mok
