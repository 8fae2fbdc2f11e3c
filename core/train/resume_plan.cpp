#include "core/train/resume_plan.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/config/config_io.h"
#include "core/store/run_store.h"
#include "core/train/safetensors.h"
#include "core/train/trainer.h"

namespace mok {

namespace fs = std::filesystem;

namespace {

std::string canonical_text(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  return (ec ? fs::absolute(path).lexically_normal() : p).string();
}

bool has_change(const std::vector<SettingChange>& changes, ChangeEffect effect) {
  return std::any_of(changes.begin(), changes.end(), [&](const SettingChange& c) { return c.effect == effect; });
}

bool changes_key(const std::vector<SettingChange>& changes, const std::string& key) {
  return std::any_of(changes.begin(), changes.end(), [&](const SettingChange& c) { return c.key == key; });
}

// "step_000018 … step_000030" (or one name) of the later checkpoints.
std::string name_range(const std::vector<std::pair<int64_t, std::string>>& later) {
  const std::string first = fs::path(later.front().second).filename().string();
  if (later.size() == 1) return first;
  return first + " … " + fs::path(later.back().second).filename().string() + ", " + std::to_string(later.size()) +
         " in all";
}

}  // namespace

void check_resumable(const std::string& dir, const TrainerState& state) {
  if (state.step > state.total_steps) {
    throw CheckpointError(dir + ": bad trainer state: step " + std::to_string(state.step) +
                          " is beyond the run's planned " + std::to_string(state.total_steps) + " steps");
  }
  // The weights record the step they were saved at (a header read, not the data).
  const auto meta = read_safetensors_metadata((fs::path(dir) / CheckpointFiles::model).string());
  if (const auto it = meta.find("step"); it != meta.end() && it->second != std::to_string(state.step)) {
    throw CheckpointError(dir + ": " + CheckpointFiles::model + " was saved at step " + it->second + " but " +
                          CheckpointFiles::state + " says step " + std::to_string(state.step) +
                          " (an edited or mixed-up checkpoint)");
  }
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / CheckpointFiles::tokenizer, ec)) {
    throw CheckpointError(dir + ": no " + CheckpointFiles::tokenizer +
                          " in the checkpoint; a resume needs the tokenizer the run was trained with");
  }
  verify_checkpoint_file(dir, CheckpointFiles::tokenizer);
}

std::string ResumePlan::original_run_dir() const { return fs::path(checkpoint_dir).parent_path().string(); }

ResumePlan plan_resume(const ExperimentConfig& cfg, const TrainerOptions& o, RunStore* store) {
  ResumePlan p;
  p.checkpoint_dir = canonical_text(resolve_checkpoint_dir(o.resume_path));
  p.state = read_trainer_state(p.checkpoint_dir);
  check_resumable(p.checkpoint_dir, p.state);
  const int64_t k = p.state.step;
  const std::string original = p.original_run_dir();

  std::string config_problem;
  try {
    const std::string source = (fs::path(p.checkpoint_dir) / CheckpointFiles::config).string();
    p.changes = config_changes(parse_experiment_config(read_checkpoint_config(p.checkpoint_dir), source), cfg);
  } catch (const CheckpointError&) {
    throw;  // a damaged config.yaml: the checkpoint is not to be trusted
  } catch (const std::exception& e) {
    config_problem = e.what();
  }

  // A new folder goes under a root the user named, else beside the original run folder.
  const bool root_named = !o.checkpoint_root.empty() || changes_key(p.changes, "logging.checkpoint_dir");
  const std::string root = !o.checkpoint_root.empty() ? o.checkpoint_root
                           : root_named              ? cfg.logging.checkpoint_dir
                                                     : fs::path(original).parent_path().string();

  std::string why;
  if (!config_problem.empty()) {
    why = "its config cannot be compared with this one (" + config_problem + ")";
  } else if (has_change(p.changes, ChangeEffect::trajectory)) {
    why = "settings that change the results differ: " + describe_changes(p.changes, ChangeEffect::trajectory);
  } else if (has_change(p.changes, ChangeEffect::identity)) {
    why = "the name differs: " + describe_changes(p.changes, ChangeEffect::identity);
  } else if (o.branch) {
    why = "a branch was asked for";
  } else if (!o.db_path.empty()) {
    // The store holds the run when it has the run, by that name, with a checkpoint in the
    // resumed checkpoint's folder (run ids of different stores collide).
    std::optional<RunRecord> rec;
    if (store && p.state.run_id > 0) rec = store->find_run(p.state.run_id);
    bool same_folder = false;
    if (rec && rec->summary.name == p.state.run_name) {
      for (const CheckpointRecord& c : store->checkpoints(p.state.run_id))
        same_folder |= canonical_text(fs::path(c.path).parent_path().string()) == original;
    }
    if (!same_folder) {
      why = p.state.run_id > 0 ? o.db_path + " does not hold run " + std::to_string(p.state.run_id) + " of " + original
                               : "the run was not recorded in a run store";
    } else if (rec->summary.status == RunStatus::running || rec->summary.status == RunStatus::paused) {
      throw ResumeRefused("run " + std::to_string(p.state.run_id) + " is being trained by process " +
                          std::to_string(rec->pid) + " on " + rec->host +
                          "; stop it first (or branch from the checkpoint with --branch)");
    }
  }
  if (!why.empty()) {
    p.branch = true;
    p.why_branch = why;
    p.checkpoint_root = root;
    return p;
  }

  // The same run continues.
  p.continue_run_id = o.db_path.empty() ? 0 : p.state.run_id;
  if (root_named) p.checkpoint_root = root;
  else p.run_dir = original;
  if (!o.write_checkpoints) return p;
  std::vector<std::pair<int64_t, std::string>> later;
  for (const auto& [step, dir] : list_checkpoints(original))
    if (step > k) later.emplace_back(step, canonical_text(dir));
  if (store && p.continue_run_id > 0) {
    // Later checkpoints of the run in other folders (an earlier move of checkpoint_dir).
    for (const CheckpointRecord& c : store->checkpoints(p.continue_run_id)) {
      if (c.step <= k) continue;
      std::error_code ec;
      const std::string dir = canonical_text(c.path);
      const bool listed = std::any_of(later.begin(), later.end(), [&](const auto& l) { return l.second == dir; });
      if (!listed && fs::exists(fs::path(dir) / CheckpointFiles::state, ec)) later.emplace_back(c.step, dir);
    }
  }
  std::sort(later.begin(), later.end());
  if (later.empty()) return p;
  if (!o.overwrite_later) {
    throw ResumeRefused(p.checkpoint_dir + ": the run already has checkpoints after step " + std::to_string(k) + " (" +
                        name_range(later) + "); resuming would overwrite them. Continue as a new run in its own "
                        "folder with --branch, resume the newest checkpoint (the run folder " + original +
                        "), or replace them with --overwrite-later");
  }
  for (const auto& [step, dir] : later) p.superseded.push_back(dir);
  return p;
}

}  // namespace mok
