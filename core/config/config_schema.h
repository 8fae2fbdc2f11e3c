#pragma once
// The experiment config schema: one row per key, the single source of truth for parsing,
// printing, `--set` overrides, type and range validation and the key reference
// (`mok config schema`, docs/config.md). Adding a key to ExperimentConfig = adding one row
// to the table in config_schema.cpp.
//
// Keyed maps of overrides: kittens.layers (keyed by layer index) and kittens.kinds (keyed by a
// tensor-kind prefix). Their rows carry the path "kittens.layers.<L>.rank" /
// "kittens.kinds.<K>.bits" and an "unset" value that means "inherit".

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
  std::string path;  // dotted key path; map rows use "<L>" (layer index) or "<K>" (kind) for the entry
  ConfigType type = ConfigType::String;
  std::string meaning;  // one line, for the docs and tooltips
  std::optional<double> min, max;  // numeric bounds (inclusive unless *_exclusive)
  bool min_exclusive = false;
  bool max_exclusive = false;
  std::vector<std::string> choices;  // allowed values (Int keys: decimal text); empty = any
  bool non_empty = false;            // String keys: the empty string is not allowed
  std::string map;                   // map rows: the map's path ("kittens.layers"); else ""
  std::string default_text;          // YAML text of the default ("inherit" for map rows)

  // Accessors. `entry` is the map entry's key ("2" for a layer, "moe.expert" for a kind) and
  // is ignored for plain rows. get() returns nullopt only for a map value that is unset
  // (inherits the section's value) or an entry that is not there.
  std::function<std::optional<ConfigValue>(const ExperimentConfig&, const std::string& entry)> get;
  std::function<void(ExperimentConfig&, const std::string& entry, const ConfigValue&)> set;

  bool in_map() const { return !map.empty(); }
  std::string field_name() const;                         // last path segment ("rank")
  std::string path_for(const std::string& entry) const;   // placeholder replaced by the entry
};

enum class ConfigMapKey {
  LayerIndex,  // non-negative integer, written as a plain YAML integer: {2: {rank: 32}}
  Name,        // any string, matched by the map's user: {moe.expert: {bits: 4}}
};

// A map of overrides, e.g. kittens.layers or kittens.kinds. Entries are addressed by their
// key text: the decimal index for LayerIndex maps, the name itself for Name maps.
struct ConfigMapSpec {
  std::string path;  // "kittens.layers"
  ConfigMapKey key = ConfigMapKey::LayerIndex;
  std::string meaning;
  std::string key_text;  // what a key may be, for the docs: "layer index < model.layers"
  std::string example;   // a flow-YAML value, for messages: "{2: {rank: 32}}"
  std::function<std::vector<std::string>(const ExperimentConfig&)> entries;  // keys present, map order
  std::function<void(ExperimentConfig&, const std::string& entry)> add;      // entry inheriting everything
  std::function<void(ExperimentConfig&)> clear;

  const char* placeholder() const { return key == ConfigMapKey::LayerIndex ? "<L>" : "<K>"; }
  const char* entry_noun() const { return key == ConfigMapKey::LayerIndex ? "layer index" : "tensor kind"; }
  // Dotted path of one entry: "kittens.layers.2", "kittens.kinds.moe.expert"; the empty name
  // is written `""` (kittens.kinds."").
  std::string entry_path(const std::string& entry) const;
};

// The entry path text of a key in a map: the key itself, or `""` for the empty name.
std::string config_entry_text(const std::string& entry);

const std::vector<ConfigKeySpec>& experiment_config_schema();
const std::vector<ConfigMapSpec>& experiment_config_maps();

// Row lookup by exact path ("model.d_model" or "kittens.layers.<L>.rank"); nullptr if none.
const ConfigKeySpec* find_config_key(std::string_view path);
const ConfigMapSpec* find_config_map(std::string_view path);
// The row of field `field` of map `m` ("bits" → kittens.kinds.<K>.bits); nullptr if none.
const ConfigKeySpec* find_config_map_field(const ConfigMapSpec& m, std::string_view field);

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
