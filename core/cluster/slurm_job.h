#pragma once
// The sbatch script that trains one experiment on a Slurm cluster. Both the `mok export`
// command and the workbench's Export menu write this text, so there is one generator. The
// script's fixed part is resources/templates/slurm_job.sh, compiled in (core/CMakeLists.txt);
// this fills in the #SBATCH lines, the launch and the names.
//
// Two layouts, chosen by the task count:
//   one task       (nodes·tasks_per_node = 1): `mok train` runs in the batch shell itself;
//                  its parallel.ranks are threads of that process (the workbench's runs);
//                  GPUs are asked for in total (--gpus=R).
//   a task per rank (more): `srun --mpi=pmix` starts nodes·tasks_per_node processes, one
//                  per GPU on device cuda (--gpus-per-node), each one rank of an MPI job;
//                  parallel.ranks must equal the task count.
// Every script runs from the folder it was submitted from, keeps NVLink multicast off, asks
// Slurm for USR1 two minutes before the time limit, answers it by stopping the run with a
// checkpoint and requeueing the job, and resumes from the newest checkpoint of the
// experiment when one exists (docs/parallel.md, "Clusters: export to Slurm"). The stop is a
// SIGTERM to every rank: to the process itself (one task), or to the job's steps through
// `scancel --signal=TERM` (a task per rank: srun would turn its own SIGTERM into SIGKILL).
//
//   SlurmJobOptions o;  o.nodes = 2;  o.tasks_per_node = 4;
//   if (std::string why = slurm_job_problem(config, o); !why.empty()) ... refuse ...
//   std::string text = slurm_job_script(config, o);

#include <string>

#include "core/config/experiment_config.h"

namespace mok {

struct SlurmJobOptions {
  int nodes = 1;
  int tasks_per_node = 1;  // one rank per task; on GPUs one task per GPU
  std::string time = "04:00:00";  // --time: minutes, [D-]HH:MM[:SS], …
  std::string partition;          // --partition; "" → the cluster's default
  std::string account;            // --account;   "" → the user's default
  std::string script_name = "job.sbatch";  // how the README and the script's comment name it
  std::string config_name = "job.yaml";    // the config, beside the script
  std::string db = "runs/mok.db";          // run store, relative to the job's folder
  int signal_lead_s = 120;  // USR1 this long before the time limit: time to save a checkpoint
};

// Why these options cannot make a job for `config` ("" when they can): counts below 1, a
// task count that differs from parallel.ranks, a --time, partition or account Slurm would
// not read, names with characters that do not belong in a script.
std::string slurm_job_problem(const ExperimentConfig& config, const SlurmJobOptions& options);

// The script text (bash, #SBATCH lines first). Call slurm_job_problem first; the text for
// options it refuses is unspecified.
std::string slurm_job_script(const ExperimentConfig& config, const SlurmJobOptions& options);

// The config's name as a Slurm job name: letters, digits, '_', '.', '-' kept, others '_'.
std::string slurm_job_name(const std::string& experiment_name);

}  // namespace mok
