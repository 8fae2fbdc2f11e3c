#pragma once
// The events a training run emits, and the sink interface that receives them.
// Trainer → sinks (run store, CLI progress bar, GUI adapter). Sinks are called on the
// training thread; a GUI sink must only queue the data and return.

#include <cstdint>
#include <string>
#include <vector>

namespace mok {

// One scalar metric at one step, e.g. {"train/loss", 2.31}.
struct MetricValue {
  std::string name;
  double value = 0.0;
};

// All metrics of one step, with the axes a plot may use.
struct MetricRow {
  int64_t step = 0;
  int64_t tokens = 0;  // training tokens consumed so far (global)
  double wall_s = 0.0; // seconds since the run started
  std::vector<MetricValue> values;
};

enum class RunStatus { queued, running, paused, finished, stopped, failed, interrupted };
const char* run_status_name(RunStatus s);
bool parse_run_status(const std::string& text, RunStatus* out);

struct RunStarted {
  int64_t run_id = 0;     // in the store; 0 when no store is attached
  std::string name;
  std::string config_yaml;
  int64_t total_steps = 0;
  int64_t start_step = 0; // > 0 when resumed from a checkpoint
};

class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void on_run_started(const RunStarted&) {}
  virtual void on_metrics(const MetricRow&) {}
  virtual void on_event(const std::string& /*text*/) {}
  virtual void on_checkpoint(int64_t /*step*/, const std::string& /*path*/) {}
  virtual void on_run_finished(RunStatus, const std::string& /*message*/) {}
};

}  // namespace mok
