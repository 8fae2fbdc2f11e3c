// mok runs: browse and edit a run store from the shell.
//   mok runs list [--db PATH] [--status S] [--filter TEXT] [--all] [--json]
//   mok runs show ID [--db PATH] [--json]
//   mok runs export-csv ID [--db PATH] [--out FILE]
//   mok runs tag ID TAG... [--remove] [--db PATH] [--json]
//   mok runs note ID TEXT... [--db PATH] [--json]
//   mok runs archive ID [--undo] [--db PATH] [--json]
//   mok runs delete ID --yes [--db PATH] [--json]
//   mok runs compare ID ID... [--metrics A,B,...] [--skip N] [--db PATH] [--json|--markdown]
//   mok runs paired BASE OTHER [--metric M] [--skip N] [--db PATH] [--json]
//   mok runs record ID NAME=VALUE... [--step S] [--db PATH] [--json]
//   mok runs import OTHER.db [--run ID]... [--db PATH] [--json]
// Browsing opens the store read-only (never writes, never creates); editing opens it
// read-write; importing reads the other store only and writes this one. Exit codes: 0 ok, 1 store error (message on stderr), 2 bad usage.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "core/store/paired_comparison.h"
#include "core/store/run_comparison.h"
#include "core/store/run_import.h"
#include "core/store/run_store.h"
#include "core/util/json_writer.h"
#include "core/util/replace_file.h"

namespace mok::cli {
namespace {

constexpr const char* kDefaultDb = "runs/mok.db";

const char* kUsage =
    "usage: mok runs <subcommand> [options]\n"
    "\n"
    "  list [--status S] [--filter TEXT] [--all] [--json]   runs, newest first (--all: with archived)\n"
    "  show ID [--json]                                     machine, config, summary, last metrics, events,\n"
    "                                                       checkpoints\n"
    "  export-csv ID [--out FILE]                           metrics in long form: step,tokens,wall_s,name,value\n"
    "  tag ID TAG... [--remove]                             add (or remove) tags\n"
    "  note ID TEXT...                                      replace the run's notes\n"
    "  archive ID [--undo]                                  hide from (or return to) the default list\n"
    "  delete ID --yes                                      delete the run and all its rows\n"
    "  compare ID ID... [--metrics A,B] [--skip N] [--markdown]\n"
    "                                                       figures side by side, ratios to the first run:\n"
    "                                                       mean over steps after the first N (default 1);\n"
    "                                                       val/* and infer/* metrics: their last value;\n"
    "                                                       a note names runs from other hardware\n"
    "  paired BASE OTHER [--metric M] [--skip N]            two settings over seeds, each run paired with the\n"
    "                                                       other setting's run of the same seed: each pair's\n"
    "                                                       difference in % of BASE, their mean, standard\n"
    "                                                       error and 95 % interval (M: val/bpb by default);\n"
    "                                                       a group is run IDs (1,3,5) or tag:NAME\n"
    "  record ID NAME=VALUE... [--step S]                   add measured figures to a run (e.g. infer/*),\n"
    "                                                       at step S (default: the run's last step)\n"
    "  import OTHER.db [--run ID]...                        copy runs of another store (a cluster's) with their\n"
    "                                                       metrics, events, config and checkpoint paths; runs\n"
    "                                                       already here are skipped (--run: only these)\n"
    "\n"
    "every subcommand takes --db PATH (default runs/mok.db).\n";

struct UsageError {
  std::string message;
};

// Parsed command line: positional words and --options (flags map to ""). An option given
// twice keeps its last value in `opts` and every value in `repeated`.
struct Args {
  std::vector<std::string> words;
  std::map<std::string, std::string> opts;
  std::map<std::string, std::vector<std::string>> repeated;
  bool has(const std::string& k) const { return opts.count(k) > 0; }
  std::string get(const std::string& k, const std::string& fallback = {}) const {
    auto it = opts.find(k);
    return it == opts.end() ? fallback : it->second;
  }
  std::vector<std::string> all(const std::string& k) const {
    auto it = repeated.find(k);
    return it == repeated.end() ? std::vector<std::string>{} : it->second;
  }
};

Args parse_args(int argc, char** argv, const std::set<std::string>& with_value, const std::set<std::string>& flags) {
  Args a;
  for (int i = 0; i < argc; ++i) {
    std::string s = argv[i];
    if (s.size() > 2 && s.rfind("--", 0) == 0) {
      std::string key = s.substr(2), value;
      const size_t eq = key.find('=');
      if (eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
        if (!with_value.count(key)) throw UsageError{"option --" + key + " takes no value"};
      } else if (with_value.count(key)) {
        if (i + 1 >= argc) throw UsageError{"option --" + key + " needs a value"};
        value = argv[++i];
      } else if (!flags.count(key)) {
        throw UsageError{"unknown option --" + key};
      }
      a.opts[key] = value;
      a.repeated[key].push_back(value);
    } else {
      a.words.push_back(s);
    }
  }
  return a;
}

int64_t parse_id_text(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v <= 0) throw UsageError{"'" + s + "' is not a run ID (a positive number)"};
  return v;
}

int64_t parse_id(const Args& a, size_t index) {
  if (a.words.size() <= index) throw UsageError{"missing run ID"};
  return parse_id_text(a.words[index]);
}

void no_extra_words(const Args& a, size_t expected) {
  if (a.words.size() > expected) throw UsageError{"unexpected argument '" + a.words[expected] + "'"};
}

// ---- text formatting ----

std::string format_time(double t) {
  if (t <= 0 || std::isnan(t)) return "-";
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string format_num(double v, int precision = 4) {
  if (std::isnan(v)) return "-";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

std::string format_count(double v) {  // 1234567 → 1.23M
  if (std::isnan(v)) return "-";
  const char* units[] = {"", "k", "M", "G", "T"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.3g%s", v, units[u]);
  return buf;
}

std::string format_bytes(double v) {
  if (std::isnan(v)) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string format_model(const RunShape& s) {
  if (s.layers == 0) return "-";
  std::string out = std::to_string(s.layers) + "x" + std::to_string(s.d_model);
  out += s.experts > 0 ? " e" + std::to_string(s.experts) + "k" + std::to_string(s.top_k) : " dense";
  return out;
}

std::string format_routing(const RunShape& s) {
  if (s.dispatcher.empty()) return "-";
  std::string out = s.dispatcher + "/" + s.policy;
  if (s.kittens == "kitten") out += "+kit";
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::string shorten(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 1) + "~"; }

void print_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      const std::string pad(width[c] - r[c].size(), ' ');
      line += right[c] ? pad + r[c] : r[c] + (c + 1 < r.size() ? pad : "");
      if (c + 1 < r.size()) line += "  ";
    }
    line.erase(line.find_last_not_of(' ') + 1);
    std::printf("%s\n", line.c_str());
  }
}

// ---- JSON ----

void json_summary_fields(JsonWriter& j, const RunSummary& s) {
  j.key("id").value(s.id);
  j.key("name").value(s.name);
  j.key("status").value(run_status_name(s.status));
  j.key("created_at").value(s.created_at);
  j.key("finished_at");
  if (s.finished_at > 0) j.value(s.finished_at); else j.null();
  j.key("layers").value(s.shape.layers);
  j.key("d_model").value(s.shape.d_model);
  j.key("experts").value(s.shape.experts);
  j.key("top_k").value(s.shape.top_k);
  j.key("dispatcher").value(s.shape.dispatcher);
  j.key("policy").value(s.shape.policy);
  j.key("kittens").value(s.shape.kittens);
  j.key("last_step").value(s.last_step);
  j.key("tokens").value(s.tokens);
  j.key("wall_s").value(s.wall_s);
  j.key("best_val_bpb").value(s.best_val_bpb);
  j.key("best_val_ppl").value(s.best_val_ppl);
  j.key("tokens_per_s").value(s.tokens_per_s);
  j.key("peak_bytes").value(s.peak_bytes);
  j.key("archived").value(s.archived);
  j.key("tags").begin_array();
  for (const auto& t : s.tags) j.value(t);
  j.end_array();
}

// ---- subcommands ----

int runs_list(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db", "status", "filter"}, {"all", "json"});
  no_extra_words(a, 0);
  RunFilter filter;
  filter.text = a.get("filter");
  filter.include_archived = a.has("all");
  if (a.has("status")) {
    RunStatus s;
    if (!parse_run_status(a.get("status"), &s)) {
      throw UsageError{"unknown status '" + a.get("status") +
                       "' (queued, running, paused, finished, stopped, failed, interrupted)"};
    }
    filter.status = s;
  }
  const std::string db = a.get("db", kDefaultDb);
  RunStore store = RunStore::open_snapshot(db);
  const std::vector<RunSummary> runs = store.list_runs(filter);
  if (a.has("json")) {
    JsonWriter j;
    j.begin_object().key("db").value(db).key("runs").begin_array();
    for (const auto& r : runs) {
      j.begin_object();
      json_summary_fields(j, r);
      j.end_object();
    }
    j.end_array().end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  if (runs.empty()) {
    std::printf("no runs in %s%s\n", db.c_str(), filter.text.empty() && !filter.status ? "" : " match");
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "STATUS", "CREATED", "MODEL", "ROUTING", "STEP", "TOKENS", "VAL_BPB", "VAL_PPL", "TOK/S",
       "PEAK_MEM", "TAGS"}};
  for (const auto& r : runs) {
    rows.push_back({std::to_string(r.id), shorten(r.name, 32) + (r.archived ? " (archived)" : ""),
                    run_status_name(r.status), format_time(r.created_at), format_model(r.shape),
                    format_routing(r.shape), r.last_step >= 0 ? std::to_string(r.last_step) : "-",
                    format_count(static_cast<double>(r.tokens)), format_num(r.best_val_bpb),
                    format_num(r.best_val_ppl), format_count(r.tokens_per_s), format_bytes(r.peak_bytes),
                    join(r.tags, ",")});
  }
  print_table(rows, {true, false, false, false, false, false, true, true, true, true, true, true, false});
  return 0;
}

// "environment": {...} with every field, or null for a run from before environments were kept.
void json_environment(JsonWriter& j, const RunEnvironment& env) {
  j.key("environment");
  if (!env.recorded) {
    j.null();
    return;
  }
  j.begin_object();
  j.key("cpu_count").value(env.cpu_count).key("threads").value(env.threads);
  for (const EnvironmentTextField& f : environment_text_fields()) j.key(f.key).value(env.*f.member);
  j.end_object();
}

// The note under a comparison whose runs came from other hardware than the baseline.
void print_environment_note(const RunComparison& c, const char* prefix) {
  if (c.same_environment()) return;
  std::printf("\n%snote: runs from other (or unknown) hardware than the baseline; their figures agree with the\n"
              "%s      baseline's to float precision, not bitwise (docs/training.md, Reproducibility):\n",
              prefix, prefix);
  for (size_t r = 1; r < c.runs.size(); ++r) {
    if (c.environment_differences[r].empty()) continue;
    std::printf("%s  #%lld: %s\n", prefix, static_cast<long long>(c.runs[r]),
                describe_differences(c.environment_differences[r]).c_str());
  }
}

int runs_show(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db"}, {"json"});
  const int64_t id = parse_id(a, 0);
  no_extra_words(a, 1);
  RunStore store = RunStore::open_snapshot(a.get("db", kDefaultDb));
  const RunRecord rec = store.get_run(id);
  const RunSummary& s = rec.summary;
  // Last value of every metric.
  struct Last {
    std::string name;
    MetricPoint point;
  };
  std::vector<Last> last;
  // What the allocator held (live blocks + cached ones) and its live blocks alone, each at its
  // highest; NaN without the metric.
  double peak_reserved = NAN, peak_blocks = NAN;
  for (const std::string& name : store.metric_names(id)) {
    const auto series = store.metric_series(id, name);
    if (!series.empty()) last.push_back({name, series.back()});
    double* peak = name == "mem/peak_reserved_bytes" ? &peak_reserved
                   : name == "mem/peak_block_bytes"  ? &peak_blocks
                                                     : nullptr;
    if (peak)
      for (const MetricPoint& p : series)
        if (!(p.value <= *peak)) *peak = p.value;
  }
  const auto events = store.events(id);
  const auto checkpoints = store.checkpoints(id);

  if (a.has("json")) {
    JsonWriter j;
    j.begin_object();
    json_summary_fields(j, s);
    j.key("peak_reserved_bytes");
    if (std::isfinite(peak_reserved)) j.value(peak_reserved); else j.null();
    j.key("peak_block_bytes");
    if (std::isfinite(peak_blocks)) j.value(peak_blocks); else j.null();
    j.key("status_message").value(rec.status_message);
    j.key("started_at").value(rec.started_at);
    j.key("host").value(rec.host);
    j.key("pid").value(rec.pid);
    j.key("device").value(rec.device);
    j.key("code_version").value(rec.code_version);
    json_environment(j, rec.environment);
    j.key("uid").value(rec.uid);
    j.key("imported_from");
    if (rec.imported_from.empty()) j.null(); else j.value(rec.imported_from);
    j.key("imported_run_id");
    if (rec.imported_from.empty()) j.null(); else j.value(rec.imported_run_id);
    j.key("notes").value(rec.notes);
    j.key("config_yaml").value(rec.config_yaml);
    j.key("last_metrics").begin_object();
    for (const auto& l : last) {
      j.key(l.name).begin_object().key("step").value(l.point.step).key("value").value(l.point.value).end_object();
    }
    j.end_object();
    j.key("events").begin_array();
    for (const auto& e : events) {
      j.begin_object().key("time").value(e.time).key("level").value(e.level).key("text").value(e.text).end_object();
    }
    j.end_array();
    j.key("checkpoints").begin_array();
    for (const auto& c : checkpoints) {
      j.begin_object().key("step").value(c.step).key("path").value(c.path).key("created_at").value(c.created_at);
      j.end_object();
    }
    j.end_array();
    j.end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }

  std::printf("run %lld  %s  [%s]%s\n", static_cast<long long>(s.id), s.name.c_str(), run_status_name(s.status),
              s.archived ? " (archived)" : "");
  if (!rec.status_message.empty()) std::printf("  message   %s\n", rec.status_message.c_str());
  std::printf("  created   %s   finished %s   wall %s s\n", format_time(s.created_at).c_str(),
              format_time(s.finished_at).c_str(), format_num(s.wall_s, 6).c_str());
  std::printf("  host      %s (pid %lld)   device %s   code %s\n", rec.host.c_str(), static_cast<long long>(rec.pid),
              rec.device.empty() ? "-" : rec.device.c_str(), rec.code_version.c_str());
  std::printf("  machine   %s\n", environment_summary(rec.environment).c_str());
  if (rec.environment.recorded && !rec.environment.blas_config.empty())
    std::printf("  blas      %s\n", rec.environment.blas_config.c_str());
  if (!rec.imported_from.empty()) {
    std::printf("  imported  from %s (run %lld there) on %s\n", rec.imported_from.c_str(),
                static_cast<long long>(rec.imported_run_id), format_time(rec.imported_at).c_str());
  }
  std::printf("  model     %s   routing %s   kittens %s\n", format_model(s.shape).c_str(),
              format_routing(s.shape).c_str(), s.shape.kittens.empty() ? "-" : s.shape.kittens.c_str());
  if (!s.tags.empty()) std::printf("  tags      %s\n", join(s.tags, ", ").c_str());
  if (!rec.notes.empty()) std::printf("  notes     %s\n", rec.notes.c_str());
  std::printf("\nsummary\n");
  // " (blocks …, reserved …)" after the tracked peak, for the allocator's figures the run has.
  std::string held;
  if (std::isfinite(peak_blocks)) held = "blocks " + format_bytes(peak_blocks);
  if (std::isfinite(peak_reserved)) held += (held.empty() ? "" : ", ") + ("reserved " + format_bytes(peak_reserved));
  if (!held.empty()) held = " (" + held + ")";
  std::printf("  step %s   tokens %s   best val/bpb %s   best val/ppl %s   tokens/s %s (median)   peak mem %s%s\n",
              s.last_step >= 0 ? std::to_string(s.last_step).c_str() : "-",
              format_count(static_cast<double>(s.tokens)).c_str(), format_num(s.best_val_bpb).c_str(),
              format_num(s.best_val_ppl).c_str(), format_count(s.tokens_per_s).c_str(),
              format_bytes(s.peak_bytes).c_str(), held.c_str());
  if (!last.empty()) {
    std::printf("\nlast metrics\n");
    std::vector<std::vector<std::string>> rows;
    for (const auto& l : last) {
      rows.push_back({"  " + l.name, format_num(l.point.value, 6), "step " + std::to_string(l.point.step)});
    }
    print_table(rows, {false, true, false});
  }
  if (!events.empty()) {
    std::printf("\nevents\n");
    for (const auto& e : events) {
      std::printf("  %s  %-7s  %s\n", format_time(e.time).c_str(), e.level.c_str(), e.text.c_str());
    }
  }
  if (!checkpoints.empty()) {
    std::printf("\ncheckpoints\n");
    for (const auto& c : checkpoints) {
      std::printf("  step %-8lld %s\n", static_cast<long long>(c.step), c.path.c_str());
    }
  }
  if (!rec.config_yaml.empty()) {
    std::printf("\nconfig\n");
    std::istringstream in(rec.config_yaml);
    for (std::string line; std::getline(in, line);) std::printf("  %s\n", line.c_str());
  }
  return 0;
}

int runs_export_csv(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db", "out"}, {});
  const int64_t id = parse_id(a, 0);
  no_extra_words(a, 1);
  RunStore store = RunStore::open_snapshot(a.get("db", kDefaultDb));
  if (!a.has("out") || a.get("out") == "-") {
    store.export_csv(id, std::cout);
    std::cout.flush();
    return 0;
  }
  // Written whole or not at all: a failed export leaves no half file behind.
  const std::string out_path = a.get("out");
  try {
    replace_file(out_path, [&](std::ostream& out) { store.export_csv(id, out); });
  } catch (const ReplaceFileError& e) {
    throw StoreError(e.what());
  }
  std::fprintf(stderr, "wrote %s\n", out_path.c_str());
  return 0;
}

void print_ok(const Args& a, int64_t id, const char* what) {
  if (a.has("json")) {
    JsonWriter j;
    j.begin_object().key("ok").value(true).key("run_id").value(id).key("action").value(what).end_object();
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("run %lld: %s\n", static_cast<long long>(id), what);
  }
}

int runs_tag(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db"}, {"remove", "json"});
  const int64_t id = parse_id(a, 0);
  if (a.words.size() < 2) throw UsageError{"give at least one tag"};
  RunStore store = RunStore::open(a.get("db", kDefaultDb));
  store.get_run(id);
  for (size_t i = 1; i < a.words.size(); ++i) {
    if (a.has("remove")) store.remove_tag(id, a.words[i]); else store.add_tag(id, a.words[i]);
  }
  print_ok(a, id, a.has("remove") ? "tags removed" : "tagged");
  return 0;
}

int runs_note(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db"}, {"json"});
  const int64_t id = parse_id(a, 0);
  std::vector<std::string> text(a.words.begin() + 1, a.words.end());
  RunStore store = RunStore::open(a.get("db", kDefaultDb));
  store.set_notes(id, join(text, " "));
  print_ok(a, id, text.empty() ? "notes cleared" : "notes set");
  return 0;
}

int runs_archive(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db"}, {"undo", "json"});
  const int64_t id = parse_id(a, 0);
  no_extra_words(a, 1);
  RunStore store = RunStore::open(a.get("db", kDefaultDb));
  store.archive(id, !a.has("undo"));
  print_ok(a, id, a.has("undo") ? "unarchived" : "archived");
  return 0;
}

int runs_delete(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db"}, {"yes", "json"});
  const int64_t id = parse_id(a, 0);
  no_extra_words(a, 1);
  if (!a.has("yes")) {
    throw UsageError{"deleting run " + std::to_string(id) + " removes all its metrics, events and checkpoints "
                     "records; add --yes to confirm"};
  }
  RunStore store = RunStore::open(a.get("db", kDefaultDb));
  store.delete_run(id);
  print_ok(a, id, "deleted");
  return 0;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

int64_t parse_count(const std::string& option, const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < 0) throw UsageError{"--" + option + " needs a whole number ≥ 0, not '" + s + "'"};
  return v;
}

int runs_compare(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db", "metrics", "skip"}, {"json", "markdown"});
  if (a.words.size() < 2) throw UsageError{"give at least two run IDs (the first is the baseline)"};
  std::vector<int64_t> ids;
  for (size_t i = 0; i < a.words.size(); ++i) ids.push_back(parse_id(a, i));
  const std::vector<std::string> metrics =
      split_list(a.get("metrics", "train/loss,val/bpb,perf/tokens_per_s,perf/step_ms,comm/remote_bytes"));
  if (metrics.empty()) throw UsageError{"--metrics needs at least one metric name"};
  const int64_t skip = parse_count("skip", a.get("skip", "1"));
  RunStore store = RunStore::open_snapshot(a.get("db", kDefaultDb));
  const RunComparison c = compare_runs(store, ids, metrics, skip);

  if (a.has("json")) {
    JsonWriter j;
    j.begin_object();
    j.key("baseline").value(ids.front());
    j.key("skip").value(skip);
    j.key("same_environment").value(c.same_environment());
    j.key("runs").begin_array();
    for (size_t r = 0; r < ids.size(); ++r) {
      j.begin_object().key("id").value(ids[r]).key("name").value(c.names[r]);
      json_environment(j, c.environment[r]);
      j.key("environment_differences").begin_array();
      for (const EnvironmentDifference& d : c.environment_differences[r]) {
        j.begin_object().key("field").value(d.key).key("label").value(d.label);
        j.key("baseline").value(d.base).key("value").value(d.other).end_object();
      }
      j.end_array();
      j.key("figures").begin_object();
      for (size_t m = 0; m < metrics.size(); ++m) {
        j.key(metrics[m]);
        if (std::isnan(c.figure[r][m])) j.null(); else j.value(c.figure[r][m]);
      }
      j.end_object().key("ratios").begin_object();
      for (size_t m = 0; m < metrics.size(); ++m) {
        j.key(metrics[m]);
        if (std::isnan(c.ratio[r][m])) j.null(); else j.value(c.ratio[r][m]);
      }
      j.end_object().end_object();
    }
    j.end_array().end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  if (a.has("markdown")) {  // one row per run, for reports: | run | metric (ratio) | …
    std::string line = "| run |";
    for (const auto& m : metrics) line += " " + m + " |";
    std::printf("%s\n|---|", line.c_str());
    for (size_t m = 0; m < metrics.size(); ++m) std::printf("---|");
    std::printf("\n");
    for (size_t r = 0; r < ids.size(); ++r) {
      line = "| #" + std::to_string(ids[r]) + " " + c.names[r] + " |";
      for (size_t m = 0; m < metrics.size(); ++m) {
        line += " " + format_num(c.figure[r][m], 5);
        if (r > 0 && !std::isnan(c.ratio[r][m])) line += " (" + format_num(c.ratio[r][m], 3) + "×)";
        line += " |";
      }
      std::printf("%s\n", line.c_str());
    }
    print_environment_note(c, "> ");
    return 0;
  }
  // One row per metric, one column per run: "value (ratio)".
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"metric"};
  for (size_t r = 0; r < ids.size(); ++r)
    head.push_back("#" + std::to_string(ids[r]) + " " + shorten(c.names[r], 24) + (r == 0 ? " (base)" : ""));
  rows.push_back(head);
  for (size_t m = 0; m < metrics.size(); ++m) {
    std::vector<std::string> row = {metrics[m] + (metric_uses_last_value(metrics[m]) ? " (last)" : " (mean)")};
    for (size_t r = 0; r < ids.size(); ++r) {
      std::string cell = format_num(c.figure[r][m], 5);
      if (r > 0 && !std::isnan(c.ratio[r][m])) cell += " (" + format_num(c.ratio[r][m], 3) + "x)";
      row.push_back(cell);
    }
    rows.push_back(row);
  }
  print_table(rows, std::vector<bool>(head.size(), true));
  print_environment_note(c, "");
  return 0;
}

// A group of `mok runs paired`: "1,3,5" or "tag:NAME" (every run with that tag, archived too).
std::vector<int64_t> run_group(RunStore& store, const std::string& text) {
  std::vector<int64_t> ids;
  if (text.rfind("tag:", 0) == 0) {
    const std::string tag = text.substr(4);
    if (tag.empty()) throw UsageError{"'tag:' needs a tag name, e.g. tag:kitten"};
    RunFilter all;
    all.include_archived = true;
    for (const RunSummary& s : store.list_runs(all))
      if (std::find(s.tags.begin(), s.tags.end(), tag) != s.tags.end()) ids.push_back(s.id);
    if (ids.empty()) throw UsageError{"no run has the tag '" + tag + "' (add one with 'mok runs tag ID " + tag + "')"};
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  for (const std::string& word : split_list(text)) ids.push_back(parse_id_text(word));
  if (ids.empty()) throw UsageError{"a group is run IDs separated by commas (1,3,5) or tag:NAME, not '" + text + "'"};
  return ids;
}

std::string percent(double v, bool sign = true) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.2f %%" : "%.2f %%", v);
  return buf;
}

int runs_paired(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db", "metric", "skip"}, {"json"});
  if (a.words.size() != 2)
    throw UsageError{"give two groups of runs, BASE and OTHER: run IDs (1,3,5) or tag:NAME each"};
  const std::string metric = a.get("metric", "val/bpb");
  const int64_t skip = parse_count("skip", a.get("skip", "1"));
  RunStore store = RunStore::open_snapshot(a.get("db", kDefaultDb));
  const std::vector<int64_t> base = run_group(store, a.words[0]), other = run_group(store, a.words[1]);
  PairedComparison c;
  try {
    c = compare_paired(store, base, other, metric, skip);
  } catch (const std::invalid_argument& e) {
    throw UsageError{e.what()};
  }
  if (c.pairs.empty())
    throw UsageError{"no seed has a run with " + metric + " in both groups: pairs are runs of the same config seed"};

  if (a.has("json")) {
    JsonWriter j;
    auto num = [&](const char* key, double v) {
      j.key(key);
      if (std::isnan(v)) j.null(); else j.value(v);
    };
    j.begin_object().key("metric").value(metric).key("skip").value(skip).key("pairs").begin_array();
    for (const RunPair& p : c.pairs) {
      j.begin_object().key("seed").value(p.seed).key("base_run").value(p.base_run).key("other_run").value(p.other_run);
      num("base", p.base);
      num("other", p.other);
      num("diff_percent", p.diff_percent);
      j.end_object();
    }
    j.end_array();
    j.key("unpaired_base").begin_array();
    for (int64_t id : c.unpaired_base) j.value(id);
    j.end_array().key("unpaired_other").begin_array();
    for (int64_t id : c.unpaired_other) j.value(id);
    j.end_array();
    num("mean_percent", c.mean_percent);
    num("standard_error_percent", c.standard_error_percent);
    num("low95_percent", c.low95_percent);
    num("high95_percent", c.high95_percent);
    num("median_percent", c.median_percent);
    j.key("other_above").value(static_cast<int64_t>(c.other_above));
    j.end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  std::printf("%s paired by seed: %zu pair(s), base %s, other %s\n", metric.c_str(), c.pairs.size(),
              a.words[0].c_str(), a.words[1].c_str());
  std::vector<std::vector<std::string>> rows = {{"seed", "base run", metric, "other run", metric, "other vs base"}};
  for (const RunPair& p : c.pairs)
    rows.push_back({std::to_string(p.seed), "#" + std::to_string(p.base_run), format_num(p.base, 5),
                    "#" + std::to_string(p.other_run), format_num(p.other, 5), percent(p.diff_percent)});
  print_table(rows, {true, true, true, true, true, true});
  const size_t n = c.pairs.size();
  if (n >= 2) {
    std::printf("other vs base: mean %s ± %s (standard error), 95 %% interval %s to %s (t, %zu degree%s of freedom); "
                "median %s; other higher in %d of %zu\n",
                percent(c.mean_percent).c_str(), percent(c.standard_error_percent, false).c_str(),
                percent(c.low95_percent).c_str(), percent(c.high95_percent).c_str(), n - 1, n == 2 ? "" : "s",
                percent(c.median_percent).c_str(), c.other_above, n);
  } else {
    std::printf("other vs base: %s from one pair: no spread to judge it by (pair more seeds)\n",
                percent(c.mean_percent).c_str());
  }
  auto list = [](const std::vector<int64_t>& ids) {
    std::string s;
    for (int64_t id : ids) s += (s.empty() ? "#" : ", #") + std::to_string(id);
    return s;
  };
  if (!c.unpaired_base.empty()) std::printf("left out of base (no pair, or no %s): %s\n", metric.c_str(), list(c.unpaired_base).c_str());
  if (!c.unpaired_other.empty())
    std::printf("left out of other (no pair, or no %s): %s\n", metric.c_str(), list(c.unpaired_other).c_str());
  return 0;
}

int runs_record(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db", "step"}, {"json"});
  const int64_t id = parse_id(a, 0);
  if (a.words.size() < 2) throw UsageError{"give at least one NAME=VALUE"};
  MetricRow row;
  for (size_t i = 1; i < a.words.size(); ++i) {
    const std::string& w = a.words[i];
    const size_t eq = w.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError{"'" + w + "' is not NAME=VALUE"};
    const std::string value = w.substr(eq + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !std::isfinite(v)) throw UsageError{"'" + value + "' in '" + w + "' is not a finite number"};
    row.values.push_back({w.substr(0, eq), v});
  }
  RunStore store = RunStore::open(a.get("db", kDefaultDb));
  const RunRecord rec = store.get_run(id);
  row.step = a.has("step") ? parse_count("step", a.get("step")) : rec.summary.last_step;
  row.tokens = rec.summary.tokens;
  row.wall_s = rec.summary.wall_s;
  store.append_metrics(id, row);
  print_ok(a, id, ("recorded " + std::to_string(row.values.size()) + " value(s) at step " + std::to_string(row.step)).c_str());
  return 0;
}

void json_imported_runs(JsonWriter& j, const char* key, const std::vector<ImportedRun>& runs, bool with_rows) {
  j.key(key).begin_array();
  for (const ImportedRun& r : runs) {
    j.begin_object().key("source_id").value(r.source_id).key("id").value(r.id).key("name").value(r.name);
    if (with_rows) {
      j.key("metric_values").value(r.metric_values).key("events").value(r.events);
      j.key("checkpoints").value(r.checkpoints);
    } else {
      j.key("changed_at_source").value(r.changed_at_source);
    }
    j.end_object();
  }
  j.end_array();
}

int runs_import(int argc, char** argv) {
  const Args a = parse_args(argc, argv, {"db", "run"}, {"json"});
  if (a.words.empty()) throw UsageError{"give the run store to import from (e.g. cluster.db)"};
  no_extra_words(a, 1);
  const std::string source_path = a.words[0];
  std::vector<int64_t> ids;
  for (const std::string& id : a.all("run")) ids.push_back(parse_id_text(id));
  const std::string db = a.get("db", kDefaultDb);
  // The source first: a refused one must not leave a new, empty local store behind.
  CheckedStoreReader source = open_import_source(source_path, db);
  RunStore store = RunStore::open(db);
  const RunImportResult r = import_runs(store, source, ids);

  if (a.has("json")) {
    JsonWriter j;
    j.begin_object().key("source").value(source_path).key("db").value(db);
    j.key("imported_count").value(static_cast<int64_t>(r.imported.size()));
    j.key("skipped_count").value(static_cast<int64_t>(r.skipped.size()));
    json_imported_runs(j, "imported", r.imported, true);
    json_imported_runs(j, "skipped", r.skipped, false);
    j.end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  // "1 run", "2 runs"
  auto count = [](int64_t n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); };
  const int64_t n = static_cast<int64_t>(r.imported.size()), skipped = static_cast<int64_t>(r.skipped.size());
  std::printf("imported %s from %s into %s\n", count(n, "run").c_str(), source_path.c_str(), db.c_str());
  for (const ImportedRun& i : r.imported) {
    std::printf("  #%lld %s -> #%lld  (%s, %s, %s)\n", static_cast<long long>(i.source_id), i.name.c_str(),
                static_cast<long long>(i.id), count(i.metric_values, "metric value").c_str(),
                count(i.events, "event").c_str(), count(i.checkpoints, "checkpoint").c_str());
  }
  if (skipped > 0) {
    std::printf("skipped %s already here\n", count(skipped, "run").c_str());
    for (const ImportedRun& i : r.skipped) {
      std::printf("  #%lld %s = #%lld here%s\n", static_cast<long long>(i.source_id), i.name.c_str(),
                  static_cast<long long>(i.id),
                  i.changed_at_source ? " (changed there since; delete it here and import again to refresh)" : "");
    }
  }
  return 0;
}

}  // namespace

int cmd_runs(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string sub = argv[1];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  using Fn = int (*)(int, char**);
  const std::map<std::string, Fn> subs = {{"list", runs_list},     {"show", runs_show},  {"export-csv", runs_export_csv},
                                          {"tag", runs_tag},       {"note", runs_note},  {"archive", runs_archive},
                                          {"delete", runs_delete}, {"compare", runs_compare},
                                          {"paired", runs_paired},
                                          {"record", runs_record},   {"import", runs_import}};
  auto it = subs.find(sub);
  if (it == subs.end()) {
    std::fprintf(stderr, "mok runs: unknown subcommand '%s'\n\n%s", sub.c_str(), kUsage);
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  try {
    return it->second(argc - 2, argv + 2);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "mok runs %s: %s\n(see 'mok runs --help')\n", sub.c_str(), e.message.c_str());
    return 2;
  } catch (const StoreError& e) {
    std::fprintf(stderr, "mok runs %s: %s\n", sub.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok runs %s: %s\n", sub.c_str(), e.what());
    return 1;
  }
}

}  // namespace mok::cli
