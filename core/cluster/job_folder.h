#pragma once
// A cluster job's folder, as `mok export --slurm` writes it:
//
//   FOLDER/job.sbatch   the sbatch script (slurm_job.h), executable
//   FOLDER/job.yaml     the config the job trains (cluster_job_config.h), every key written
//   FOLDER/README.md    how to submit it, what the folder holds, how results come home
//
// and, once the job ran, FOLDER/runs/ (the run store and the checkpoints) and the job's log.

#include <string>
#include <vector>

#include "core/cluster/slurm_job.h"
#include "core/config/experiment_config.h"

namespace mok {

// The README text for a job of `job` (the config as the job trains it) with `options`.
std::string job_folder_readme(const ExperimentConfig& job, const SlurmJobOptions& options);

// The files write_job_folder() writes, relative to the folder, in the order above.
std::vector<std::string> job_folder_files(const SlurmJobOptions& options);

// Writes the folder. An existing folder is refused unless `replace`; then the three files
// are replaced and everything else in it (runs/, logs) is kept. A new folder is written
// under a temporary name and renamed into place, so a failure leaves nothing behind.
// Throws std::runtime_error naming the path on refusal or I/O failure.
void write_job_folder(const std::string& folder, const ExperimentConfig& job, const SlurmJobOptions& options,
                      bool replace);

}  // namespace mok
