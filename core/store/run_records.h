#pragma once
// The plain data the run store reads and writes. Times are Unix seconds (UTC) as double;
// 0 means "not yet". Metric values that are missing read back as NaN.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/events/metric_event.h"
#include "core/store/run_environment.h"

namespace mok {

inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// What create_run needs. The store adds status=running, created/started times, and this
// process's host, pid and start time (so a dead process can be detected later).
struct NewRun {
  std::string name;
  std::string config_yaml;   // the full experiment config as YAML
  std::string host;          // "" → this machine's host name
  std::string device;        // e.g. "cpu", "cuda:0 (NVIDIA H200)"
  std::string code_version;  // "" → the version this build was made from
  // Where the run computes. nullopt → this process's (probe_run_environment()); one with
  // recorded = false stores nothing (the run reads back as "not recorded"). A thread count
  // of 0 is taken from the config's parallel.threads.
  std::optional<RunEnvironment> environment;
};

// The model/routing shape read from config_yaml at create time (0/"" when absent).
struct RunShape {
  int layers = 0;
  int d_model = 0;
  int experts = 0;
  int top_k = 0;
  std::string dispatcher;  // classic | mok
  std::string policy;      // topk | locality
  std::string kittens;     // exact | kitten
};

// One row of `mok runs list` and the GUI run table.
struct RunSummary {
  int64_t id = 0;
  std::string name;
  RunStatus status = RunStatus::running;
  double created_at = 0;
  double finished_at = 0;
  RunShape shape;
  int64_t last_step = -1;        // highest step with metrics; -1 → none yet
  int64_t tokens = 0;            // tokens at last_step
  double wall_s = 0;             // wall time at last_step
  double best_val_bpb = kNoValue;
  double best_val_ppl = kNoValue;
  double tokens_per_s = kNoValue;   // median of perf/tokens_per_s
  double peak_bytes = kNoValue;     // max of mem/peak_bytes
  bool archived = false;
  std::vector<std::string> tags;
};

// Everything about one run except its metric rows.
struct RunRecord {
  RunSummary summary;
  std::string status_message;
  double started_at = 0;
  double updated_at = 0;
  std::string config_yaml;
  std::string host;
  std::string device;
  std::string code_version;
  int64_t pid = 0;
  std::string notes;
  RunEnvironment environment;  // recorded = false for runs from before schema 2
  // Identity across stores (run_uid.h); empty when read from a store before schema 3.
  std::string uid;
  // For a run copied from another store (run_import.h): that file, the run's id there and
  // when it was copied; "", 0, 0 for a run recorded here.
  std::string imported_from;
  int64_t imported_run_id = 0;
  double imported_at = 0;
};

struct RunFilter {
  std::string text;                 // case-insensitive substring of name, notes, tags, host, device, dispatcher, policy
  std::optional<RunStatus> status;  // only runs with this status
  bool include_archived = false;
};

// One point of a metric series.
struct MetricPoint {
  int64_t step = 0;
  int64_t tokens = 0;
  double wall_s = 0;
  double value = kNoValue;
};

struct RunEvent {
  int64_t id = 0;
  double time = 0;
  std::string level;  // info | warning | error
  std::string text;
};

struct CheckpointRecord {
  int64_t step = 0;
  std::string path;
  double created_at = 0;
};

}  // namespace mok
