#include "core/train/run_checkpointer.h"

#include <filesystem>

#include "core/train/adamw.h"
#include "core/train/checkpoint.h"
#include "core/train/gathered_model.h"
#include "core/train/rank_model.h"

namespace mok {

namespace fs = std::filesystem;

RunCheckpointer::RunCheckpointer(const ExperimentConfig& config, std::string run_dir, std::string config_yaml,
                                 int64_t run_id, const Tokenizer& tokenizer)
    : cfg_(config), run_dir_(std::move(run_dir)), config_yaml_(std::move(config_yaml)), run_id_(run_id), tokenizer_(tokenizer) {}

std::string RunCheckpointer::write(RankContext& rc, RankModel& m, int64_t step, int64_t tokens_seen, double wall_s) {
  GatheredModel gathered;
  if (rc.parallel()) gathered = gather_model(rc, *m.model, m.params, *m.adam);
  if (!rc.leader()) return {};
  TrainerState st;
  st.step = step;
  st.tokens_seen = tokens_seen;
  st.total_steps = cfg_.train.steps;
  st.run_id = run_id_;
  st.run_name = cfg_.name;
  st.seed = cfg_.seed;
  st.wall_s = wall_s;
  st.mok_version = MOK_GIT_VERSION;
  st.counters["data.next_step"] = step;
  const std::string dir = (fs::path(run_dir_) / checkpoint_folder_name(step)).string();
  save_checkpoint(dir, rc.parallel() ? gathered.params : m.params, rc.parallel() ? gathered.adam.get() : m.adam.get(),
                  st, config_yaml_, [&](const std::string& tmp) {
                    tokenizer_.save((fs::path(tmp) / CheckpointFiles::tokenizer).string());
                  });
  return dir;
}

}  // namespace mok
