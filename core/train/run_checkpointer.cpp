#include "core/train/run_checkpointer.h"
#include "core/util/code_version.h"

#include <filesystem>

#include "core/train/adamw.h"
#include "core/train/gathered_model.h"
#include "core/train/rank_model.h"

namespace mok {

namespace fs = std::filesystem;

RunCheckpointer::RunCheckpointer(const ExperimentConfig& config, std::string run_dir, std::string config_yaml,
                                 Identity identity, const Tokenizer& tokenizer, std::vector<std::string> superseded)
    : cfg_(config),
      run_dir_(fs::absolute(fs::path(run_dir)).lexically_normal().string()),
      config_yaml_(std::move(config_yaml)),
      identity_(std::move(identity)),
      tokenizer_(tokenizer),
      superseded_(std::move(superseded)) {}

std::string RunCheckpointer::write(RankContext& rc, RankModel& m, int64_t step, int64_t tokens_seen, double wall_s,
                                   const BeforePublish& before_publish) {
  GatheredModel gathered;
  if (rc.parallel()) gathered = gather_model(rc, *m.model, m.params, *m.adam);
  if (!rc.leader()) return {};
  TrainerState st;
  st.step = step;
  st.tokens_seen = tokens_seen;
  st.total_steps = cfg_.train.steps;
  st.run_id = identity_.run_id;
  st.run_name = cfg_.name;
  st.seed = cfg_.seed;
  st.wall_s = wall_s;
  st.mok_version = mok::code_version();
  st.counters["data.next_step"] = step;
  st.branched_from = identity_.branched_from;
  const std::string dir = (fs::path(run_dir_) / checkpoint_folder_name(step)).string();
  const std::vector<Parameter*>& params = rc.parallel() ? gathered.params : m.params;
  const AdamW* adam = rc.parallel() ? gathered.adam.get() : m.adam.get();
  const StagedCheckpoint staged = stage_checkpoint(dir, params, adam, st, config_yaml_, [&](const std::string& tmp) {
    tokenizer_.save((fs::path(tmp) / CheckpointFiles::tokenizer).string());
  });
  try {
    for (const std::string& old : superseded_) remove_checkpoint(old);
    superseded_.clear();
    if (fs::exists(dir)) {
      throw CheckpointError(dir + ": a checkpoint of this step exists already; a run never replaces one (a resume "
                                  "with --overwrite-later replaces the run's later checkpoints)");
    }
    if (before_publish) before_publish(step, dir);
  } catch (...) {
    discard_checkpoint(staged);
    throw;
  }
  publish_checkpoint(staged);
  return dir;
}

}  // namespace mok
