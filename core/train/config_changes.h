#pragma once
// The settings a resume changes, and what each change does to the bitwise-resume promise
// (a run resumed from its checkpoint continues with bitwise the metrics of an
// uninterrupted one). Every key of the two configs is compared as normalized YAML text.
//
//   none        where and how often things are written or shown, thread counts, overlap
//               chunks: the computed values stay bitwise the same
//               (logging.*, parallel.threads, parallel.link_sleep, routing.overlap_chunks,
//                train.checkpoint_every, train.log_every, train.eval_every)
//   plan        the run's length, train.steps: the same run continues with a new plan (the
//               learning-rate decay and the kitten rank schedules follow the new length)
//   trajectory  everything else (model, data, seed, optimizer, batch, routing, ranks, …):
//               the continuation is no longer the original run, so it becomes a branch
//   identity    the run's name: a new run under the new name (a branch)

#include <string>
#include <vector>

#include "core/config/experiment_config.h"

namespace mok {

enum class ChangeEffect { none, plan, trajectory, identity };

struct SettingChange {
  std::string key;     // dotted path, e.g. "train.lr"
  std::string before;  // the checkpoint's value ("" when the key is new)
  std::string after;   // the value now ("" when gone)
  ChangeEffect effect = ChangeEffect::trajectory;

  std::string describe() const;  // "train.lr 0.003 → 0.001"
};

// Every setting of `after` that differs from `before`, in key order.
std::vector<SettingChange> config_changes(const ExperimentConfig& before, const ExperimentConfig& after);

ChangeEffect change_effect(const std::string& key);

// "a 1 → 2, b x → y" of the changes with `effect`; "" when none.
std::string describe_changes(const std::vector<SettingChange>& changes, ChangeEffect effect);

}  // namespace mok
