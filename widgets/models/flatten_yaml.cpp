#include "widgets/models/flatten_yaml.h"

#include <stdexcept>

#include <yaml-cpp/yaml.h>

namespace mok::gui {

namespace {

std::string inline_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsNull()) return "";
  YAML::Emitter out;
  out << YAML::Flow << n;
  return out.c_str();
}

void walk(const YAML::Node& n, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) {
      const std::string key = kv.first.as<std::string>();
      walk(kv.second, prefix.empty() ? key : prefix + "." + key, out);
    }
    return;
  }
  out[prefix] = inline_text(n);
}

}  // namespace

std::map<std::string, std::string> flatten_yaml(const std::string& yaml_text) {
  std::map<std::string, std::string> out;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(std::string("not YAML: ") + e.what());
  }
  walk(root, "", out);
  return out;
}

}  // namespace mok::gui
