#pragma once
// The experiment config schema: one row per key, the single source of truth for parsing,
// printing, `--set` overrides, type and range validation and the key reference
// (`mok config schema`, docs/config.md). Adding a key to ExperimentConfig = adding one row
// to the table in config_schema.cpp.
//
// Per-layer keys (e.g. kittens.layers) are a map keyed by layer index; their rows carry the
// path "kittens.layers.<L>.rank" and an "unset" value that means "inherit".

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/config/experiment_config.h"

namespace mok {

enum class ConfigType { Int, UInt, Real, Bool, String };

// A typed key value. Int keys hold int64_t (range-limited to int), UInt keys uint64_t.
using ConfigValue = std::variant<int64_t, uint64_t, double, bool, std::string>;

struct ConfigKeySpec {
  std::string path;  // dotted key path; per-layer rows use "<L>" for the layer index
  ConfigType type = ConfigType::String;
  std::string meaning;  // one line, for the docs and tooltips
  std::optional<double> min, max;  // numeric bounds (inclusive unless *_exclusive)
  bool min_exclusive = false;
  bool max_exclusive = false;
  std::vector<std::string> choices;  // allowed values (Int keys: decimal text); empty = any
  bool non_empty = false;            // String keys: the empty string is not allowed
  std::string layer_map;             // per-layer rows: the map's path ("kittens.layers"); else ""
  std::string default_text;          // YAML text of the default ("inherit" for per-layer rows)

  // Accessors. `layer` is ignored for plain rows. get() returns nullopt only for a per-layer
  // value that is unset (inherits the section's value).
  std::function<std::optional<ConfigValue>(const ExperimentConfig&, int layer)> get;
  std::function<void(ExperimentConfig&, int layer, const ConfigValue&)> set;

  bool per_layer() const { return !layer_map.empty(); }
  std::string field_name() const;               // last path segment ("rank")
  std::string path_for_layer(int layer) const;  // "<L>" replaced by the index
};

// A map of per-layer overrides keyed by layer index, e.g. kittens.layers.
struct ConfigLayerMapSpec {
  std::string path;  // "kittens.layers"
  std::string meaning;
  std::function<std::vector<int>(const ExperimentConfig&)> layers;  // indices present, ascending
  std::function<void(ExperimentConfig&, int layer)> add;            // entry inheriting everything
  std::function<void(ExperimentConfig&)> clear;
};

const std::vector<ConfigKeySpec>& experiment_config_schema();
const std::vector<ConfigLayerMapSpec>& experiment_config_layer_maps();

// Row lookup by exact path ("model.d_model" or "kittens.layers.<L>.rank"); nullptr if none.
const ConfigKeySpec* find_config_key(std::string_view path);
const ConfigLayerMapSpec* find_config_layer_map(std::string_view path);

// The closest known key to an unknown one (full dotted path), or "" when nothing is close.
// `parent` is the path of the section the key was found in ("" for the top level).
std::string suggest_config_key(std::string_view parent, std::string_view key);

const char* config_type_name(ConfigType t);  // "int", "uint", "float", "bool", "string"
std::string format_config_value(const ConfigValue& v);  // YAML scalar text, round-trips
std::string config_allowed_text(const ConfigKeySpec& spec);  // "≥ 1", "`a`, `b`", ...

// The key reference: a Markdown table (docs/config.md embeds it) or aligned plain text.
std::string config_schema_markdown();
std::string config_schema_text();

}  // namespace mok
