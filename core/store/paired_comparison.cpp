#include "core/store/paired_comparison.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "core/config/experiment_config.h"
#include "core/store/run_comparison.h"
#include "core/store/run_store.h"

namespace mok {

int64_t seed_from_yaml(const std::string& config_yaml) {
  const auto fallback = static_cast<int64_t>(ExperimentConfig{}.seed);
  try {
    const YAML::Node root = YAML::Load(config_yaml);
    if (!root.IsMap()) return fallback;
    const YAML::Node seed = root["seed"];
    return seed.IsDefined() && seed.IsScalar() ? seed.as<int64_t>() : fallback;
  } catch (const std::exception&) {
    return fallback;
  }
}

std::string setting_key(const std::string& config_yaml) {
  try {
    YAML::Node root = YAML::Load(config_yaml);
    if (!root.IsMap()) return config_yaml;
    for (const char* key : {"seed", "name", "logging"}) root.remove(key);
    YAML::Emitter out;
    out << root;
    return out.c_str();
  } catch (const std::exception&) {
    return config_yaml;
  }
}

std::vector<SettingComparison> compare_settings_by_seed(RunStore& store, const std::vector<int64_t>& runs,
                                                        int64_t baseline, const std::string& metric, int64_t skip) {
  std::vector<std::string> keys;
  std::vector<SettingComparison> groups;
  std::string base_key;
  for (int64_t id : runs) {
    const std::string key = setting_key(store.get_run(id).config_yaml);
    if (id == baseline) base_key = key;
    const auto at = std::find(keys.begin(), keys.end(), key);
    if (at == keys.end()) {
      keys.push_back(key);
      groups.push_back({id, {id}, {}});
    } else {
      SettingComparison& g = groups[size_t(at - keys.begin())];
      g.runs.push_back(id);
      g.first_run = std::min(g.first_run, id);
    }
  }
  const auto base_at = std::find(keys.begin(), keys.end(), base_key);
  if (base_key.empty() || base_at == keys.end()) return {};
  const std::vector<int64_t> base_runs = groups[size_t(base_at - keys.begin())].runs;
  std::vector<SettingComparison> out;
  for (SettingComparison& g : groups) {
    if (g.runs == base_runs) continue;
    try {
      g.paired = compare_paired(store, base_runs, g.runs, metric, skip);
    } catch (const std::invalid_argument&) {
      continue;  // a seed twice in a setting: no pairing to show
    }
    if (!g.paired.pairs.empty()) out.push_back(std::move(g));
  }
  return out;
}

double t_quantile_975(int dof) {
  // Two-sided 95 % points of Student's t; between the rows the next lower row's (a slightly
  // wider interval).
  static const std::map<int, double> table = {
      {1, 12.706}, {2, 4.303},  {3, 3.182},  {4, 2.776},  {5, 2.571},  {6, 2.447},  {7, 2.365},
      {8, 2.306},  {9, 2.262},  {10, 2.228}, {11, 2.201}, {12, 2.179}, {13, 2.160}, {14, 2.145},
      {15, 2.131}, {16, 2.120}, {17, 2.110}, {18, 2.101}, {19, 2.093}, {20, 2.086}, {21, 2.080},
      {22, 2.074}, {23, 2.069}, {24, 2.064}, {25, 2.060}, {26, 2.056}, {27, 2.052}, {28, 2.048},
      {29, 2.045}, {30, 2.042}, {40, 2.021}, {60, 2.000}, {120, 1.980}, {1000000, 1.960}};
  if (dof < 1) throw std::invalid_argument("t_quantile_975: degrees of freedom must be at least 1");
  auto it = table.upper_bound(dof);
  return std::prev(it)->second;
}

namespace {

// seed → run of one group, with the runs that have no figure set aside.
std::map<int64_t, std::pair<int64_t, double>> by_seed(RunStore& store, const std::vector<int64_t>& runs,
                                                      const std::string& metric, int64_t skip, const char* group,
                                                      std::vector<int64_t>& without_figure) {
  std::map<int64_t, std::pair<int64_t, double>> out;
  std::set<int64_t> seen;
  for (int64_t id : runs) {
    if (!seen.insert(id).second)
      throw std::invalid_argument(std::string("run ") + std::to_string(id) + " is named twice in the " + group +
                                  " group");
    const RunRecord rec = store.get_run(id);
    const int64_t seed = seed_from_yaml(rec.config_yaml);
    const double figure = metric_figure(metric, store.metric_series(id, metric), skip);
    if (std::isnan(figure)) {
      without_figure.push_back(id);
      continue;
    }
    const auto [it, fresh] = out.emplace(seed, std::make_pair(id, figure));
    if (!fresh)
      throw std::invalid_argument(std::string("runs ") + std::to_string(it->second.first) + " and " +
                                  std::to_string(id) + " of the " + group + " group both have seed " +
                                  std::to_string(seed) + ": each seed once per group");
  }
  return out;
}

}  // namespace

PairedComparison compare_paired(RunStore& store, const std::vector<int64_t>& base, const std::vector<int64_t>& other,
                                const std::string& metric, int64_t skip) {
  for (int64_t id : base)
    if (std::find(other.begin(), other.end(), id) != other.end())
      throw std::invalid_argument("run " + std::to_string(id) + " is in both groups");
  PairedComparison c;
  c.metric = metric;
  const auto b = by_seed(store, base, metric, skip, "base", c.unpaired_base);
  const auto o = by_seed(store, other, metric, skip, "other", c.unpaired_other);
  for (const auto& [seed, run] : b) {
    const auto it = o.find(seed);
    if (it == o.end()) {
      c.unpaired_base.push_back(run.first);
      continue;
    }
    RunPair p{seed, run.first, it->second.first, run.second, it->second.second, kNoValue};
    p.diff_percent = p.base != 0.0 ? (p.other / p.base - 1.0) * 100.0 : kNoValue;
    c.pairs.push_back(p);
    c.other_above += p.other > p.base;
  }
  for (const auto& [seed, run] : o)
    if (!b.count(seed)) c.unpaired_other.push_back(run.first);
  std::sort(c.unpaired_base.begin(), c.unpaired_base.end());
  std::sort(c.unpaired_other.begin(), c.unpaired_other.end());

  std::vector<double> d;
  for (const RunPair& p : c.pairs)
    if (!std::isnan(p.diff_percent)) d.push_back(p.diff_percent);
  const size_t n = d.size();
  if (n == 0) return c;
  double sum = 0.0;
  for (double x : d) sum += x;
  c.mean_percent = sum / double(n);
  std::vector<double> sorted = d;
  std::sort(sorted.begin(), sorted.end());
  c.median_percent = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  if (n < 2) return c;
  double ss = 0.0;
  for (double x : d) ss += (x - c.mean_percent) * (x - c.mean_percent);
  c.standard_error_percent = std::sqrt(ss / double(n - 1) / double(n));
  const double half = t_quantile_975(static_cast<int>(n - 1)) * c.standard_error_percent;
  c.low95_percent = c.mean_percent - half;
  c.high95_percent = c.mean_percent + half;
  return c;
}

}  // namespace mok
