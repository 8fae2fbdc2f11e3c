#pragma once
// flatten_yaml: a YAML document as dotted key → scalar text ("model.d_model" → "128"),
// what the config diff compares. Sequences become "[a, b]". Throws std::runtime_error on
// text that is not YAML.

#include <map>
#include <string>

namespace mok::gui {

std::map<std::string, std::string> flatten_yaml(const std::string& yaml_text);

}  // namespace mok::gui
