#include "core/cluster/job_folder.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/config/config_io.h"
#include "core/train/run_folder.h"
#include "core/util/replace_file.h"

namespace fs = std::filesystem;

namespace mok {

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(path.string() + ": cannot write");
}

void make_executable(const fs::path& path) {
  std::error_code ec;
  fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add, ec);
}

}  // namespace

std::vector<std::string> job_folder_files(const SlurmJobOptions& o) { return {o.script_name, o.config_name, "README.md"}; }

std::string job_folder_readme(const ExperimentConfig& job, const SlurmJobOptions& o) {
  const bool gpu = job.parallel.device == "cuda";
  const int tasks = o.nodes * o.tasks_per_node;
  const std::string per_task = gpu ? "one per GPU" : "one per rank";
  std::ostringstream s;
  s << "# Slurm job: " << job.name << "\n\n"
    << "Submit it from this folder:\n\n"
    << "    sbatch " << o.script_name << "\n\n"
    << "It trains `" << o.config_name << "` on " << o.nodes << " node(s) with " << o.tasks_per_node
    << " task(s) each (" << tasks << " rank(s), " << per_task << ", over "
    << (gpu ? "NCCL" : "MPI") << "), for at most " << o.time << " per start.\n\n"
    << "| file | what it is |\n"
    << "|---|---|\n"
    << "| `" << o.script_name << "` | the sbatch script: the resources, "
    << (tasks > 1 ? "`srun --mpi=pmix mok train` (an `mpirun` line in a comment for clusters without PMIx)"
                  : "`mok train` in the batch shell")
    << ", the requeue on the time limit |\n"
    << "| `" << o.config_name << "` | the experiment config with every key; `parallel` holds the layout above |\n"
    << "| `README.md` | this file |\n"
    << "| `" << job.logging.db << "` | the run store the job writes (rank 0): metrics, events, checkpoints |\n"
    << "| `" << job.logging.checkpoint_dir << "/" << safe_run_name(job.name)
    << "-run<ID>/step_<N>/` | checkpoints (`train.checkpoint_every` = " << job.train.checkpoint_every
    << ", and one when the run stops) |\n"
    << "| `" << slurm_job_name(job.name) << "-<JOBID>.out` | the job's log; a requeued job appends to it |\n\n"
    << "**Before submitting.** Every node needs `mok` on its PATH (or submit with "
    << "`MOK=/path/to/mok sbatch " << o.script_name << "`; sbatch passes the environment on), "
    << "and must read the corpus (`data.corpus: " << job.data.corpus << "`; a relative path is read "
    << "from this folder; `brown` is looked up in `$MOK_CORPUS_DIR`). This folder must be on storage every "
    << "node shares.\n\n"
    << "**Time limit.** Slurm sends USR1 " << o.signal_lead_s << " s before the limit; the script stops "
    << "the run (every rank saves a checkpoint of its last whole step), requeues the job with "
    << "`scontrol requeue`, and the next start resumes the same run from the newest checkpoint "
    << "(`mok train --resume`).\n\n"
    << "**Results.** Copy `runs/` home. `mok runs list --db " << job.logging.db << "` lists the run; the "
    << "workbench opens the store with File → Open run database.\n";
  return s.str();
}

void write_job_folder(const std::string& folder_arg, const ExperimentConfig& job, const SlurmJobOptions& o,
                      bool replace) {
  std::string folder = folder_arg;
  while (folder.size() > 1 && folder.back() == '/') folder.pop_back();  // "out/" is the folder "out"
  const fs::path dir(folder);
  std::error_code ec;
  const bool exists = fs::exists(dir, ec);
  if (exists && !replace) throw std::runtime_error(folder + " exists; nothing was written (--force replaces its job files)");
  if (exists && !fs::is_directory(dir, ec)) throw std::runtime_error(folder + " exists and is not a folder");
  const std::string yaml = experiment_config_to_yaml(job);
  const std::string script = slurm_job_script(job, o);
  const std::string readme = job_folder_readme(job, o);

  if (exists) {
    replace_file((dir / o.config_name).string(), yaml);
    replace_file((dir / o.script_name).string(), script);
    make_executable(dir / o.script_name);
    replace_file((dir / "README.md").string(), readme);
    return;
  }
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec) throw std::runtime_error(parent.string() + ": cannot create: " + ec.message());
  const fs::path tmp = replace_file_temporary(dir.string());  // filled, then renamed whole
  fs::remove_all(tmp, ec);
  try {
    if (!fs::create_directory(tmp, ec) || ec) throw std::runtime_error(tmp.string() + ": cannot create: " + ec.message());
    write_text(tmp / o.config_name, yaml);
    write_text(tmp / o.script_name, script);
    make_executable(tmp / o.script_name);
    write_text(tmp / "README.md", readme);
    fs::rename(tmp, dir, ec);
    if (ec) throw std::runtime_error(folder + ": cannot create: " + ec.message());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace mok
