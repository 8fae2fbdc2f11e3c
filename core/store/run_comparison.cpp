#include "core/store/run_comparison.h"

#include <cmath>

#include "core/store/run_store.h"

namespace mok {

bool metric_uses_last_value(const std::string& name) {
  return name.rfind("val/", 0) == 0 || name.rfind("infer/", 0) == 0;
}

double metric_figure(const std::string& name, const std::vector<MetricPoint>& series, int64_t skip) {
  if (series.empty()) return kNoValue;
  if (metric_uses_last_value(name)) return series.back().value;
  // Steps are logged from 1 (or from any first step): skip the first `skip` logged points.
  double sum = 0.0;
  int64_t n = 0;
  for (size_t i = static_cast<size_t>(skip < 0 ? 0 : skip); i < series.size(); ++i) {
    if (std::isnan(series[i].value)) continue;
    sum += series[i].value;
    ++n;
  }
  return n > 0 ? sum / static_cast<double>(n) : kNoValue;
}

RunComparison compare_runs(RunStore& store, const std::vector<int64_t>& runs,
                           const std::vector<std::string>& metrics, int64_t skip) {
  RunComparison c;
  c.runs = runs;
  c.metrics = metrics;
  for (int64_t id : runs) {
    const RunRecord rec = store.get_run(id);
    c.names.push_back(rec.summary.name);
    c.environment.push_back(rec.environment);
    c.environment_differences.push_back(c.environment.size() == 1 ? std::vector<EnvironmentDifference>{}
                                        : environment_differences(c.environment.front(), rec.environment));
    std::vector<double> row;
    for (const std::string& m : metrics) row.push_back(metric_figure(m, store.metric_series(id, m), skip));
    c.figure.push_back(std::move(row));
  }
  for (const auto& row : c.figure) {
    std::vector<double> r;
    for (size_t m = 0; m < row.size(); ++m) {
      const double base = c.figure.front()[m];
      r.push_back(base != 0.0 && !std::isnan(base) ? row[m] / base : kNoValue);
    }
    c.ratio.push_back(std::move(r));
  }
  return c;
}

bool RunComparison::same_environment() const {
  for (const auto& d : environment_differences)
    if (!d.empty()) return false;
  return true;
}

}  // namespace mok
