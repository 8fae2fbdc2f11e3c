#include "core/config/config_io.h"

#include <yaml-cpp/depthguard.h>  // YAML::DeepRecursion
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <algorithm>
#include <set>
#include <sstream>
#include <string_view>

#include "core/config/config_text_check.h"
#include "core/config/quoted_scalar_span.h"
#include "core/config/yaml_documents.h"
#include "core/util/replace_file.h"
#include "core/util/special_file.h"

namespace mok {
namespace {

struct Loc {
  std::string source;
  int line = 0;    // 1-based; 0 unknown
  int column = 0;  // 1-based; 0 unknown
};

// Where each key path was last set (file key or --set argument); semantic errors point there.
using LocMap = std::map<std::string, Loc>;

const char* expected_text(ConfigType t) {
  switch (t) {
    case ConfigType::Int: return "an integer";
    case ConfigType::UInt: return "a non-negative integer";
    case ConfigType::Real: return "a number";
    case ConfigType::Bool: return "true or false";
    case ConfigType::String: return "a string";
  }
  return "a value";
}

// "!!str" for the core schema's tags, the tag itself for others.
std::string short_tag(const std::string& tag) {
  const std::string core = "tag:yaml.org,2002:";
  return tag.compare(0, core.size(), core) == 0 ? "!!" + tag.substr(core.size()) : tag;
}

bool has_explicit_tag(const YAML::Node& n) { return n.Tag() != "?" && n.Tag() != "!"; }

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar:
      if (has_explicit_tag(n)) {
        const std::string tag = short_tag(n.Tag());
        return "'" + n.Scalar() + "' tagged " + tag + (tag == "!!str" ? " (a string)" : "");
      }
      return n.Tag() == "!" ? "the quoted string \"" + n.Scalar() + "\"" : "'" + n.Scalar() + "'";
    default: return "an undefined value";
  }
}

// Whether a scalar's tag lets it be read as `type`: untagged plain scalars always (the
// value decides), an explicit core tag when it names that type (!!int for an integer).
bool tag_fits(const YAML::Node& n, ConfigType type) {
  if (n.Tag() == "?") return true;
  const std::string tag = short_tag(n.Tag());
  switch (type) {
    case ConfigType::Int:
    case ConfigType::UInt: return tag == "!!int";
    case ConfigType::Real: return tag == "!!float" || tag == "!!int";
    case ConfigType::Bool: return tag == "!!bool";
    case ConfigType::String: return true;
  }
  return false;
}

bool is_section(const std::string& path) {
  const std::string prefix = path + ".";
  for (const ConfigKeySpec& s : experiment_config_schema())
    if (!s.in_map() && s.path.compare(0, prefix.size(), prefix) == 0) return true;
  for (const ConfigMapSpec& m : experiment_config_maps())
    if (m.path.compare(0, prefix.size(), prefix) == 0) return true;
  return false;
}

std::string join(const std::string& parent, const std::string& name) {
  return parent.empty() ? name : parent + "." + name;
}

std::string unknown_key_message(const std::string& suggestion) {
  return suggestion.empty() ? "unknown key" : "unknown key; did you mean '" + suggestion + "'?";
}

// An unknown field `name` in entry `entry` of map `m`: a did-you-mean among the entry's own
// fields, else the list of them (a key of another section is no help inside an entry).
std::string unknown_map_field_message(const ConfigMapSpec& m, const std::string& entry, const std::string& name) {
  const std::string row_prefix = m.path + "." + m.placeholder() + ".";
  const std::string hint = suggest_config_key(m.path + "." + m.placeholder(), name);
  if (hint.compare(0, row_prefix.size(), row_prefix) == 0)
    return unknown_key_message(m.entry_path(entry) + hint.substr(row_prefix.size() - 1));
  std::string fields;
  for (const ConfigKeySpec& s : experiment_config_schema())
    if (s.map == m.path) fields += (fields.empty() ? "" : ", ") + s.field_name();
  return "unknown key; " + m.path + " entries take " + fields;
}

template <class T>
bool parse_number(std::string_view text, T& out) {
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  auto r = std::from_chars(text.data(), text.data() + text.size(), out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}

// Reads YAML nodes into an ExperimentConfig, recording where each key came from.
class Reader {
 public:
  // line_base/col_base: the position of the text's first character (1-based), so that
  // marks inside an override value map back onto the whole --set argument.
  // text: what the nodes were parsed from (the file, or an override's value), for checks
  // that need the source itself (where a quoted value ends).
  Reader(ExperimentConfig& config, LocMap& locs, std::string source, std::string_view text, int line_base,
         int col_base)
      : config_(config),
        locs_(locs),
        source_(std::move(source)),
        text_(text),
        line_base_(line_base),
        col_base_(col_base) {}

  Loc at(const YAML::Node& n) const {
    const YAML::Mark m = n.Mark();
    if (m.line < 0 || m.column < 0) return {source_, 0, 0};
    return {source_, line_base_ + m.line, (m.line == 0 ? col_base_ : 1) + m.column};
  }

  [[noreturn]] void fail(const Loc& loc, const std::string& key, const std::string& message) const {
    throw ConfigError(loc.source, loc.line, loc.column, key, message);
  }

  // A node's own position, or the position of its key when the node has none (a null).
  Loc at_or(const YAML::Node& n, const std::string& key) const {
    Loc l = at(n);
    if (l.line == 0) {
      auto it = locs_.find(key);
      if (it != locs_.end()) return it->second;
    }
    return l;
  }

  void read_section(const YAML::Node& n, const std::string& path) {
    if (n.IsNull()) return;  // "model:" with nothing under it: all defaults
    if (!n.IsMap()) fail(at_or(n, path), path, "expected a map of keys, got " + describe(n));
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const YAML::Node k = it->first;
      const YAML::Node v = it->second;
      if (!k.IsScalar()) fail(at(k), path, "expected a key name, got " + describe(k));
      const std::string name = k.Scalar();
      const std::string full = join(path, name);
      if (!seen.insert(name).second) fail(at(k), full, "duplicate key");
      if (name.find('.') != std::string::npos) {
        fail(at(k), full,
             find_config_key(full) || find_config_map(full) || is_section(full)
                 ? "dotted keys are for --set only; in a file, nest the key under its section"
                 : unknown_key_message(""));
      }
      locs_[full] = at(k);
      const ConfigKeySpec* spec = find_config_key(full);
      if (spec && !spec->in_map()) {
        read_leaf(v, *spec, "", full);
      } else if (const ConfigMapSpec* m = find_config_map(full)) {
        read_map(v, *m, full);
      } else if (is_section(full)) {
        read_section(v, full);
      } else {
        fail(at(k), full, unknown_key_message(suggest_config_key(path, name)));
      }
    }
  }

  void read_leaf(const YAML::Node& n, const ConfigKeySpec& s, const std::string& entry, const std::string& path) {
    const std::string expected = expected_text(s.type);
    if (n.IsNull()) fail(locs_.count(path) ? locs_[path] : at(n), path, "missing value (expected " + expected + ")");
    if (!n.IsScalar()) {
      fail(at_or(n, path), path,
           n.IsNull() ? "missing value (expected " + expected + ")" : "expected " + expected + ", got " + describe(n));
    }
    require_quote_closed_on_its_line(n, path);
    const std::string& text = n.Scalar();
    if (s.type == ConfigType::String) {
      s.set(config_, entry, ConfigValue(text));
      return;
    }
    // Numbers and booleans must be plain scalars (or carry their own tag): a quoted "16" or
    // a !!str 16 is a string.
    if (!tag_fits(n, s.type)) fail(at(n), path, "expected " + expected + ", got " + describe(n));
    switch (s.type) {
      case ConfigType::Int: {
        int64_t v = 0;
        if (!parse_number(text, v)) fail(at(n), path, "expected " + expected + ", got " + describe(n));
        if (v < INT_MIN || v > INT_MAX) fail(at(n), path, "integer " + text + " is too large");
        s.set(config_, entry, ConfigValue(v));
        return;
      }
      case ConfigType::UInt: {
        uint64_t v = 0;
        if (!parse_number(text, v)) fail(at(n), path, "expected " + expected + ", got " + describe(n));
        s.set(config_, entry, ConfigValue(v));
        return;
      }
      case ConfigType::Real: {
        double v = 0;
        if (!parse_number(text, v) || !std::isfinite(v))
          fail(at(n), path, "expected " + std::string(expected) + ", got " + describe(n));
        s.set(config_, entry, ConfigValue(v));
        return;
      }
      case ConfigType::Bool: {
        static const std::set<std::string> yes = {"true", "True", "TRUE"}, no = {"false", "False", "FALSE"};
        if (yes.count(text)) s.set(config_, entry, ConfigValue(true));
        else if (no.count(text)) s.set(config_, entry, ConfigValue(false));
        else fail(at(n), path, "expected " + expected + ", got " + describe(n));
        return;
      }
      case ConfigType::String: return;
    }
  }

  // A map replaces what was there: {2: {rank: 32}, 3: {mode: exact}} or
  // {moe.expert: {method: lowbit, bits: 4}}.
  void read_map(const YAML::Node& n, const ConfigMapSpec& m, const std::string& path) {
    m.clear(config_);
    if (n.IsNull()) return;
    if (!n.IsMap())
      fail(at_or(n, path), path,
           std::string("expected a map from ") + m.entry_noun() + " to overrides, e.g. " + m.example + ", got " +
               describe(n));
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const YAML::Node k = it->first;
      const std::string name = k.IsScalar() ? k.Scalar() : std::string("?");
      std::string entry;
      if (m.key == ConfigMapKey::LayerIndex) {
        int layer = -1;
        if (!k.IsScalar() || k.Tag() != "?" || !parse_number(std::string_view(name), layer) || layer < 0)
          fail(at(k), join(path, name), "layer index must be a non-negative integer, got " + describe(k));
        entry = std::to_string(layer);
      } else {
        if (!k.IsScalar()) fail(at(k), path, std::string("expected a ") + m.entry_noun() + " name, got " + describe(k));
        entry = name;
      }
      const std::string full = m.entry_path(entry);
      if (!seen.insert(entry).second) fail(at(k), full, std::string("duplicate ") + m.entry_noun());
      locs_[full] = at(k);
      read_entry(YAML::Node(it->second), m, entry, full);
    }
  }

  // One entry's overrides: {rank: 32, method: rsvd}; keys not given keep inheriting.
  void read_entry(const YAML::Node& n, const ConfigMapSpec& m, const std::string& entry, const std::string& path) {
    m.add(config_, entry);
    if (n.IsNull()) return;
    if (!n.IsMap()) {
      fail(at_or(n, path), path,
           std::string("expected a map of ") + (m.key == ConfigMapKey::LayerIndex ? "per-layer" : "per-kind") +
               " keys, got " + describe(n));
    }
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const YAML::Node k = it->first;
      if (!k.IsScalar()) fail(at(k), path, "expected a key name, got " + describe(k));
      const std::string name = k.Scalar();
      const std::string full = join(path, name);
      if (!seen.insert(name).second) fail(at(k), full, "duplicate key");
      const ConfigKeySpec* spec = find_config_map_field(m, name);
      if (!spec) fail(at(k), full, unknown_map_field_message(m, entry, name));
      locs_[full] = at(k);
      read_leaf(YAML::Node(it->second), *spec, entry, full);
    }
  }

  ExperimentConfig& config() { return config_; }

 private:
  // A quoted value that runs over a line break has swallowed the lines below it: in a
  // config every value fits on its key's line, so this is an unclosed quote.
  void require_quote_closed_on_its_line(const YAML::Node& n, const std::string& path) const {
    const YAML::Mark m = n.Mark();
    if (n.Tag() != "!" || m.pos < 0 || static_cast<size_t>(m.pos) >= text_.size()) return;
    const size_t open = static_cast<size_t>(m.pos);
    if (text_[open] != '\'' && text_[open] != '"') return;  // a block scalar (| or >)
    const size_t close = closing_quote_offset(text_, open);
    const size_t line_end = text_.find('\n', open);
    if (close != std::string_view::npos && (line_end == std::string_view::npos || close < line_end)) return;
    const std::string quote(1, text_[open]);
    if (close == std::string_view::npos) {
      fail(at(n), path,
           "the quote " + quote + " opened here is never closed, so every line after it became part of the value; "
           "close the quote on this line");
    }
    const int close_line = line_base_ + m.line + static_cast<int>(std::count(
                                                     text_.begin() + open, text_.begin() + close, '\n'));
    fail(at(n), path,
         "the quote " + quote + " opened here closes only on line " + std::to_string(close_line) +
             ", so the lines between became part of the value (an unclosed quote?); close it on this line, "
             "or write a long text as a block scalar (| or >)");
  }

  ExperimentConfig& config_;
  LocMap& locs_;
  std::string source_;
  std::string_view text_;
  int line_base_;
  int col_base_;
};

using KeySegments = std::vector<std::pair<std::string, int>>;  // (segment, 1-based column)

// `--set MAP.ENTRY=VALUE` or `--set MAP.ENTRY.FIELD=VALUE`, the segments after the map path
// starting at `first`. A layer index is one segment; a kind name is every segment up to the
// field, so `kittens.kinds.moe.expert.bits=4` sets field bits of entry "moe.expert". A map
// (or empty) value with no field name sets the entry: `kittens.kinds.moe.expert={bits: 4}`.
void apply_map_override(Reader& reader, const ConfigMapSpec& m, const KeySegments& segs, size_t first,
                        const YAML::Node& value, const Loc& value_loc, const std::string& src, int index,
                        const std::string& key, LocMap& locs) {
  const size_t n = segs.size() - first;  // ≥ 1
  auto joined = [&](size_t from, size_t to) {
    std::string t;
    for (size_t j = from; j < to; ++j) t += (j > from ? "." : "") + segs[j].first;
    return t;
  };
  std::string entry;
  size_t field_at = segs.size();  // index of the field segment; segs.size() = no field
  if (m.key == ConfigMapKey::LayerIndex) {
    int layer = -1;
    const auto& [idx_text, idx_col] = segs[first];
    if (!parse_number(std::string_view(idx_text), layer) || layer < 0)
      throw ConfigError(src, index, idx_col, join(m.path, idx_text),
                        "layer index must be a non-negative integer, got '" + idx_text + "'");
    entry = std::to_string(layer);
    if (n >= 2) field_at = first + 1;
    if (n >= 3)
      throw ConfigError(src, index, segs[first + 2].second, key,
                        "'" + join(m.entry_path(entry), segs[first + 1].first) + "' is a single value, not a section");
  } else {
    const bool entry_value = value.IsMap() || value.IsNull();
    if (n >= 2 && (find_config_map_field(m, segs.back().first) || !entry_value)) field_at = segs.size() - 1;
    entry = joined(first, field_at);
  }
  const std::string entry_path = m.entry_path(entry);
  locs[entry_path] = value_loc;
  if (field_at == segs.size()) return reader.read_entry(value, m, entry, entry_path);
  const auto& [field, field_col] = segs[field_at];
  const std::string field_path = join(entry_path, field);
  const ConfigKeySpec* fs = find_config_map_field(m, field);
  if (!fs) throw ConfigError(src, index, field_col, field_path, unknown_map_field_message(m, entry, field));
  m.add(reader.config(), entry);
  locs[field_path] = value_loc;
  reader.read_leaf(value, *fs, entry, field_path);
}

void apply_override_at(ExperimentConfig& config, const std::string& a, int index, LocMap& locs) {
  const std::string src = "--set";
  const size_t eq = a.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(src, index, 1, "", "expected dotted.key=value, got '" + a + "'");
  const std::string key = a.substr(0, eq);
  const int value_col = static_cast<int>(eq) + 2;
  check_config_text(a, src, index, 1);
  const std::string value_text = a.substr(eq + 1);

  // Key segments with their 1-based columns.
  KeySegments segs;
  for (size_t start = 0;;) {
    const size_t dot = key.find('.', start);
    const std::string seg = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (seg.empty())
      throw ConfigError(src, index, static_cast<int>(start) + 1, key, "empty key segment in '" + key + "'");
    segs.push_back({seg, static_cast<int>(start) + 1});
    if (dot == std::string::npos) break;
    start = dot + 1;
  }

  // yaml-cpp may mark an error past the end of the value (an escape cut short): point at
  // the argument's end then.
  auto column_of = [&](const YAML::Mark& m) {
    return std::min(value_col + std::max(0, m.column), static_cast<int>(a.size()) + 1);
  };
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::DeepRecursion& e) {
    throw ConfigError(src, index, column_of(e.mark), key,
                      "invalid value: nested more than " + std::to_string(e.depth()) + " levels deep");
  } catch (const YAML::Exception& e) {
    throw ConfigError(src, index, column_of(e.mark), key, "invalid value: " + e.msg);
  }

  Reader reader(config, locs, src, value_text, index, value_col);
  const Loc value_loc{src, index, value_col};
  std::string path;
  for (size_t i = 0; i < segs.size(); ++i) {
    const auto& [seg, col] = segs[i];
    const std::string parent = path;
    path = join(path, seg);
    const bool last = i + 1 == segs.size();
    const ConfigKeySpec* spec = find_config_key(path);
    if (spec && !spec->in_map()) {
      if (!last)
        throw ConfigError(src, index, segs[i + 1].second, join(path, segs[i + 1].first),
                          "'" + path + "' is a single value, not a section");
      locs[path] = value_loc;
      reader.read_leaf(value, *spec, "", path);
      return;
    }
    if (const ConfigMapSpec* m = find_config_map(path)) {
      locs[path] = value_loc;
      if (last) return reader.read_map(value, *m, path);
      return apply_map_override(reader, *m, segs, i + 1, value, value_loc, src, index, key, locs);
    }
    if (is_section(path)) {
      if (last) {
        locs[path] = value_loc;
        if (!value.IsMap()) throw ConfigError(src, index, value_col, path, "expected a map of keys, got " + describe(value));
        return reader.read_section(value, path);
      }
      continue;
    }
    throw ConfigError(src, index, col, path, unknown_key_message(suggest_config_key(parent, seg)));
  }
}

// The position a semantic issue should point at: the key itself, else its nearest
// enclosing key that appears in the source, else the source with no position.
Loc locate(const LocMap& locs, std::string key, const std::string& source) {
  while (!key.empty()) {
    auto it = locs.find(key);
    if (it != locs.end()) return it->second;
    const size_t dot = key.rfind('.');
    key = dot == std::string::npos ? "" : key.substr(0, dot);
  }
  return {source, 0, 0};
}

ExperimentConfig parse_impl(const std::string& text, const std::string& source,
                            const std::vector<std::string>& overrides) {
  check_config_text(text, source);
  YamlDocuments docs;
  try {
    docs = load_yaml_documents(text);
  } catch (const YAML::DeepRecursion& e) {
    throw ConfigError(source, e.mark.line + 1, e.mark.column + 1, "",
                      "nested more than " + std::to_string(e.depth()) +
                          " levels deep (an experiment config needs at most 4: section, map, entry, key)");
  } catch (const YAML::Exception& e) {
    throw ConfigError(source, e.mark.line + 1, e.mark.column + 1, "", "YAML syntax error: " + e.msg);
  }
  if (docs.count == 0 || (docs.count == 1 && docs.first.IsNull()))
    throw ConfigError(source, 0, 0, "", "empty config: expected a YAML map with keys such as name, model, train");
  ExperimentConfig config;
  LocMap locs;
  Reader reader(config, locs, source, text, 1, 1);
  if (docs.count > 1) {
    throw ConfigError(source, docs.second_start.line + 1, docs.second_start.column + 1, "",
                      "expected one YAML document, found " + std::to_string(docs.count));
  }
  if (!docs.first.IsMap()) {
    const Loc l = reader.at(docs.first);
    throw ConfigError(source, l.line, l.column, "", "expected a map of keys at the top level, got " + describe(docs.first));
  }
  reader.read_section(docs.first, "");
  for (size_t i = 0; i < overrides.size(); ++i) apply_override_at(config, overrides[i], static_cast<int>(i) + 1, locs);

  const std::vector<ConfigIssue> issues = check_experiment_config(config);
  if (!issues.empty()) {
    const Loc l = locate(locs, issues.front().key_path, source);
    throw ConfigError(l.source, l.line, l.column, issues.front().key_path, issues.front().message);
  }
  return config;
}

// --- Printing --------------------------------------------------------------------------------

// An ordered tree of the output, so a section stays together whatever the row order.
struct OutNode {
  std::string name;
  std::string value;                // scalar text, for leaves
  bool leaf = false;
  std::vector<std::string> block;   // per-layer map entries ("2: {rank: 32}"), for map leaves
  bool is_map_leaf = false;
  std::vector<OutNode> children;

  OutNode& child(const std::string& n) {
    for (OutNode& c : children)
      if (c.name == n) return c;
    children.emplace_back();
    children.back().name = n;
    return children.back();
  }
};

OutNode& node_at(OutNode& root, const std::string& path) {
  OutNode* n = &root;
  for (size_t start = 0;;) {
    const size_t dot = path.find('.', start);
    n = &n->child(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return *n;
    start = dot + 1;
  }
}

void render(const OutNode& n, int depth, std::string& out) {
  const std::string indent(2 * depth, ' ');
  if (n.leaf) {
    out += indent + n.name + ": " + n.value + "\n";
  } else if (n.is_map_leaf) {
    if (n.block.empty()) {
      out += indent + n.name + ": {}\n";
    } else {
      out += indent + n.name + ":\n";
      for (const std::string& line : n.block) out += indent + "  " + line + "\n";
    }
  } else {
    out += indent + n.name + ":\n";
    for (const OutNode& c : n.children) render(c, depth + 1, out);
  }
}

}  // namespace

void apply_override(ExperimentConfig& config, const std::string& assignment, int index) {
  LocMap locs;
  apply_override_at(config, assignment, index, locs);
}

ExperimentConfig parse_experiment_config(const std::string& yaml_text, const std::string& source_name,
                                         const std::vector<std::string>& overrides) {
  return parse_impl(yaml_text, source_name, overrides);
}

ExperimentConfig load_experiment_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path, 0, 0, "", "is a folder, not a config file");
  if (const std::string what = special_file_description(path); !what.empty())
    throw ConfigError(path, 0, 0, "", "is " + what + ", not a regular file; a config is read from a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, 0, 0, "", std::string("cannot read file: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path, 0, 0, "", "cannot read file");
  return parse_impl(text.str(), path, overrides);
}

std::string experiment_config_to_yaml(const ExperimentConfig& config) {
  OutNode root;
  std::set<std::string> maps_done;
  for (const ConfigKeySpec& s : experiment_config_schema()) {
    if (!s.in_map()) {
      OutNode& n = node_at(root, s.path);
      n.leaf = true;
      n.value = format_config_value(*s.get(config, ""));
      continue;
    }
    if (!maps_done.insert(s.map).second) continue;
    const ConfigMapSpec* m = find_config_map(s.map);
    OutNode& n = node_at(root, m->path);
    n.is_map_leaf = true;
    for (const std::string& entry : m->entries(config)) {
      std::string fields;
      for (const ConfigKeySpec& f : experiment_config_schema()) {
        if (f.map != m->path) continue;
        if (auto v = f.get(config, entry))
          fields += (fields.empty() ? "" : ", ") + f.field_name() + ": " + format_config_value(*v);
      }
      // A kind name prints as a YAML string (quoted when it could read as something else).
      const std::string key = m->key == ConfigMapKey::LayerIndex ? entry : format_config_value(ConfigValue(entry));
      n.block.push_back(key + ": {" + fields + "}");
    }
  }
  std::string out;
  for (const OutNode& c : root.children) render(c, 0, out);
  return out;
}

void save_experiment_config(const ExperimentConfig& config, const std::string& path) {
  try {
    replace_file(path, experiment_config_to_yaml(config));
  } catch (const ReplaceFileError& e) {
    throw ConfigError(path, 0, 0, "", "cannot write: " + e.reason);
  }
}

}  // namespace mok
