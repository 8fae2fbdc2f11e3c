#pragma once
// Two settings over several seeds, each run paired with the run of the other setting that has
// the same seed (the config's `seed`: the same initial weights and batches), so that the
// seed-to-seed spread, often larger than the difference sought, cancels pair by pair:
//
//   PairedComparison c = compare_paired(store, {1, 3, 5}, {2, 4, 6}, "val/bpb");
//   c.mean_percent ± c.standard_error_percent, 95 % interval [c.low95_percent, c.high95_percent]
//
// Each pair's difference is other/base − 1 in percent of the base run's figure (the metric's
// last value for val/* and infer/*, else its mean after the first `skip` points, as
// `mok runs compare` has it). The interval is Student's t with n − 1 degrees of freedom.
// `mok runs paired` prints it; docs/benchmarks.md has its use (kitten against exact).
#include <cstdint>
#include <string>
#include <vector>

#include "core/store/run_records.h"

namespace mok {

class RunStore;

struct RunPair {
  int64_t seed = 0;
  int64_t base_run = 0, other_run = 0;
  double base = kNoValue, other = kNoValue;  // the metric's figure of each run
  double diff_percent = kNoValue;            // (other / base − 1) · 100
};

struct PairedComparison {
  std::string metric;
  std::vector<RunPair> pairs;  // by seed, ascending
  // Runs left out: no run of the other group has their seed, or they have no figure.
  std::vector<int64_t> unpaired_base, unpaired_other;
  double mean_percent = kNoValue;
  double standard_error_percent = kNoValue;  // of the mean; needs two pairs
  double low95_percent = kNoValue, high95_percent = kNoValue;
  double median_percent = kNoValue;
  int other_above = 0;  // pairs where the other run's figure is the higher
};

// Throws std::invalid_argument when a group names a run twice, two runs of one group share a
// seed, or a run is in both groups; StoreError for a run that does not exist.
PairedComparison compare_paired(RunStore& store, const std::vector<int64_t>& base, const std::vector<int64_t>& other,
                                const std::string& metric, int64_t skip = 1);

// The seed of a run's config YAML (the config's default when it names none).
int64_t seed_from_yaml(const std::string& config_yaml);

// What makes two runs the same setting: their config YAML without `seed`, `name` and
// `logging` (where it is stored), as text. Runs whose keys are equal differ only by seed.
std::string setting_key(const std::string& config_yaml);

// The runs of `runs` grouped by setting_key, and each group other than the baseline's paired
// with it by seed (compare_paired): what the workbench's Compare page shows for the checked
// runs. `first_run` names each group: its oldest run (the lowest id).
struct SettingComparison {
  int64_t first_run = 0;
  std::vector<int64_t> runs;
  PairedComparison paired;
};
std::vector<SettingComparison> compare_settings_by_seed(RunStore& store, const std::vector<int64_t>& runs,
                                                        int64_t baseline, const std::string& metric,
                                                        int64_t skip = 1);

// Student's t quantile at 0.975 for `dof` degrees of freedom (≥ 1): 12.706 for 1, 1.960 in
// the limit.
double t_quantile_975(int dof);

}  // namespace mok
