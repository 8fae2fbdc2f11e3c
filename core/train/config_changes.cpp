#include "core/train/config_changes.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

#include "core/config/config_io.h"

namespace mok {

namespace {

// Dotted key → scalar text of every leaf of a normalized config (sequences as flow text).
void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      flatten(kv.second, prefix.empty() ? key : prefix + "." + key, out);
    }
  } else if (node.IsScalar()) {
    out[prefix] = node.Scalar();
  } else if (node.IsNull()) {
    out[prefix] = "";
  } else {
    YAML::Emitter e;
    e << YAML::Flow << node;
    out[prefix] = e.c_str();
  }
}

std::map<std::string, std::string> flat_config(const ExperimentConfig& c) {
  std::map<std::string, std::string> out;
  flatten(YAML::Load(experiment_config_to_yaml(c)), "", out);
  return out;
}

}  // namespace

ChangeEffect change_effect(const std::string& key) {
  static const char* const kNone[] = {"parallel.threads",       "parallel.link_sleep", "routing.overlap_chunks",
                                      "train.checkpoint_every", "train.log_every",     "train.eval_every"};
  if (key.rfind("logging.", 0) == 0) return ChangeEffect::none;
  for (const char* k : kNone)
    if (key == k) return ChangeEffect::none;
  if (key == "train.steps") return ChangeEffect::plan;
  if (key == "name") return ChangeEffect::identity;
  return ChangeEffect::trajectory;
}

std::string SettingChange::describe() const {
  return key + " " + (before.empty() ? "(unset)" : before) + " → " + (after.empty() ? "(unset)" : after);
}

std::vector<SettingChange> config_changes(const ExperimentConfig& before, const ExperimentConfig& after) {
  const auto a = flat_config(before), b = flat_config(after);
  std::vector<SettingChange> out;
  auto add = [&](const std::string& key, const std::string& x, const std::string& y) {
    out.push_back({key, x, y, change_effect(key)});
  };
  for (const auto& [key, value] : a) {
    const auto it = b.find(key);
    if (it == b.end()) add(key, value, "");
    else if (it->second != value) add(key, value, it->second);
  }
  for (const auto& [key, value] : b)
    if (!a.count(key)) add(key, "", value);
  std::sort(out.begin(), out.end(), [](const SettingChange& x, const SettingChange& y) { return x.key < y.key; });
  return out;
}

std::string describe_changes(const std::vector<SettingChange>& changes, ChangeEffect effect) {
  std::string text;
  for (const SettingChange& c : changes) {
    if (c.effect != effect) continue;
    if (!text.empty()) text += ", ";
    text += c.describe();
  }
  return text;
}

}  // namespace mok
