#pragma once
// JsonWriter: builds one JSON object as text, for `--json` output and exports.
//   JsonWriter j; j.begin_object(); j.key("steps").value(200); j.end_object(); j.str();

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
