#pragma once
// Runs side by side: one figure per (run, metric) and its ratio to a baseline run — the
// numbers behind `mok runs compare` and the benchmark suites.
//
// The figure of a metric in a run:
//   - per-step metrics (train/*, perf/*, comm/*, mem/*, moe/*, …): the mean over the logged
//     steps after the first `skip` steps (the first steps pay for warm-up and allocation);
//   - evaluations and after-the-fact measurements (val/*, infer/*): the last value.
// Missing metrics (or no step after `skip`) give NaN, and so do their ratios.
// Runs from other hardware than the baseline (CPU, BLAS kernel family, GPU) are flagged:
// their figures agree with the baseline's to float precision, never bitwise.

#include <cstdint>
#include <string>
#include <vector>

#include "core/store/run_records.h"

namespace mok {

class RunStore;

// True for metrics whose figure is their last value (val/*, infer/*).
bool metric_uses_last_value(const std::string& name);

// The figure of one series (ordered by step, as RunStore::metric_series returns it).
double metric_figure(const std::string& name, const std::vector<MetricPoint>& series, int64_t skip);

struct RunComparison {
  std::vector<int64_t> runs;                 // as given; runs[0] is the baseline
  std::vector<std::string> names;            // run names
  std::vector<std::string> metrics;          // as given
  std::vector<std::vector<double>> figure;   // [run][metric]
  std::vector<std::vector<double>> ratio;    // [run][metric] figure / baseline's figure
  std::vector<RunEnvironment> environment;   // [run]
  // [run] what differs from the baseline's environment (environment_differences); empty
  // for the baseline and for runs on the same hardware.
  std::vector<std::vector<EnvironmentDifference>> environment_differences;
  bool same_environment() const;  // no run differs from the baseline
};

// Reads every (run, metric) from the store. Throws StoreError for an unknown run.
RunComparison compare_runs(RunStore& store, const std::vector<int64_t>& runs,
                           const std::vector<std::string>& metrics, int64_t skip);

}  // namespace mok
