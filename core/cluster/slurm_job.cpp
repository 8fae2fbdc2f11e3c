#include "core/cluster/slurm_job.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>
#include <utility>

#include "core/cluster/slurm_job_template.h"
#include "core/train/run_folder.h"

namespace mok {

namespace {

// A bash word in double quotes: "$", "`", "\" and '"' escaped, so a path stays one word.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\' || c == '$' || c == '`') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool has_control_character(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

bool one_task(const SlurmJobOptions& o) { return o.nodes * o.tasks_per_node == 1; }

}  // namespace

std::string slurm_job_name(const std::string& experiment_name) {
  std::string s;
  for (char c : experiment_name) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
    s += keep ? c : '_';
  }
  return s.empty() ? std::string("mok") : s;
}

std::string slurm_job_problem(const ExperimentConfig& c, const SlurmJobOptions& o) {
  if (o.nodes < 1) return "the node count must be at least 1 (it is " + std::to_string(o.nodes) + ")";
  if (o.tasks_per_node < 1)
    return "the tasks per node must be at least 1 (it is " + std::to_string(o.tasks_per_node) + ")";
  if (o.nodes > 100000 || o.tasks_per_node > 100000) return "the node or task count is beyond any cluster";
  const int tasks = o.nodes * o.tasks_per_node;
  if (tasks > 1 && c.parallel.ranks != tasks) {
    return "parallel.ranks is " + std::to_string(c.parallel.ranks) + " but the job starts " + std::to_string(tasks) +
           " tasks (" + std::to_string(o.nodes) + " node(s) x " + std::to_string(o.tasks_per_node) +
           "), one per rank";
  }
  if (tasks > 1 && c.parallel.comm == "local")
    return "parallel.comm: local keeps every rank in one process; a job of one task per rank needs mpi (CPU) or "
           "nccl (GPUs)";
  // Slurm's --time forms: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
  // days-hours:minutes, days-hours:minutes:seconds.
  static const std::regex time_form(R"(^(\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2}|UNLIMITED|INFINITE)$)");
  if (!std::regex_match(o.time, time_form))
    return "time '" + o.time + "' is not a Slurm time limit (minutes, HH:MM:SS or D-HH:MM:SS)";
  static const std::regex name_form(R"(^[A-Za-z0-9_.,-]+$)");
  if (!o.partition.empty() && !std::regex_match(o.partition, name_form))
    return "partition '" + o.partition + "' has characters Slurm names do not have";
  if (!o.account.empty() && !std::regex_match(o.account, name_form))
    return "account '" + o.account + "' has characters Slurm names do not have";
  if (has_control_character(c.name)) return "name: a control character (a line break?) cannot be part of a job's name";
  for (const std::string* path : {&o.script_name, &o.config_name, &o.db, &c.logging.checkpoint_dir}) {
    if (path->empty() || has_control_character(*path))
      return "'" + *path + "' cannot be a file name in a job script (empty, or a control character)";
  }
  if (o.signal_lead_s < 1) return "the signal lead time must be at least one second";
  return {};
}

std::string slurm_job_script(const ExperimentConfig& c, const SlurmJobOptions& o) {
  const bool gpu = c.parallel.device == "cuda";
  const int ranks = std::max(1, c.parallel.ranks);
  const int threads = std::max(1, c.parallel.threads);
  std::ostringstream sbatch;
  sbatch << "#SBATCH --job-name=" << slurm_job_name(c.name) << "\n";
  if (one_task(o)) {
    sbatch << "#SBATCH --nodes=1\n"
           << "#SBATCH --ntasks=1\n"
           << "#SBATCH --cpus-per-task=" << threads * ranks << "\n"
           << "#SBATCH --gpus=" << (gpu ? ranks : 0) << "\n";
  } else {
    sbatch << "#SBATCH --nodes=" << o.nodes << "\n"
           << "#SBATCH --ntasks-per-node=" << o.tasks_per_node << "\n";
    if (gpu) sbatch << "#SBATCH --gpus-per-node=" << o.tasks_per_node << "\n";
    sbatch << "#SBATCH --cpus-per-task=" << threads << "\n";
  }
  sbatch << "#SBATCH --time=" << o.time;
  if (!o.partition.empty()) sbatch << "\n#SBATCH --partition=" << o.partition;
  if (!o.account.empty()) sbatch << "\n#SBATCH --account=" << o.account;

  const std::string command =
      "\"$MOK\" train " + quoted(o.config_name) + " --db \"$DB\" --json ${RESUME[@]+\"${RESUME[@]}\"}";
  std::ostringstream launch;
  if (one_task(o)) {
    launch << "# One process; its parallel.ranks run as threads.\n"
           << "stop_training() { kill -TERM \"$TRAIN_PID\" 2> /dev/null || true; }\n"
           << command << " &";
  } else {
    // srun answers a SIGTERM of its own by killing its tasks (SIGKILL: no checkpoint); Slurm
    // signals a job's steps, without its batch shell, with scancel --signal.
    launch << "# One task per " << (gpu ? "GPU" : "rank")
           << ", each one rank of an MPI job, started through Slurm's PMIx plugin.\n"
           << "# The tasks are stopped through Slurm (every step of this job, not this shell): srun itself\n"
           << "# would pass a SIGTERM on as SIGKILL, leaving no time for a checkpoint.\n"
           << "# Without that plugin (see srun --mpi=list), start them with Open MPI instead, which passes\n"
           << "# SIGTERM on to its ranks (then stop_training is: kill -TERM \"$TRAIN_PID\"):\n"
           << "#   mpirun -np \"$SLURM_NTASKS\" --map-by ppr:" << o.tasks_per_node << ":node --bind-to none "
           << command << "\n"
           << "stop_training() { scancel --signal=TERM \"$SLURM_JOB_ID\" || true; }\n"
           << "srun --mpi=pmix --kill-on-bad-exit=1 " << command << " &";
  }

  std::string text = kSlurmJobTemplate;
  const std::pair<const char*, std::string> fills[] = {
      {"{{NAME}}", c.name},
      {"{{SCRIPT_NAME}}", o.script_name},
      {"{{CONFIG_NAME}}", o.config_name},
      {"{{CONFIG_WORD}}", quoted(o.config_name)},
      {"{{DB}}", o.db},
      {"{{DB_WORD}}", quoted(o.db)},
      {"{{CHECKPOINTS}}", c.logging.checkpoint_dir},
      {"{{CHECKPOINTS_WORD}}", quoted(c.logging.checkpoint_dir)},
      {"{{RUN_PREFIX}}", safe_run_name(c.name)},  // letters, digits, '-', '_': safe in a glob
      {"{{SIGNAL_LEAD}}", std::to_string(o.signal_lead_s)},
      {"{{SBATCH}}", sbatch.str()},
      {"{{LAUNCH}}", launch.str()},
  };
  for (const auto& [key, value] : fills) {
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, std::string(key).size(), value);
  }
  return text;
}

}  // namespace mok
