#pragma once
// The experiment config as a cluster job runs it: the user's config with the layout of the
// job written into `parallel` and every file it writes kept inside the job's folder.
//
//   ExperimentConfig job = cluster_job_config(config, {.nodes = 2, .tasks_per_node = 4});
//   // job.parallel: ranks 8, device cuda, comm nccl, gpus "" (each rank binds its node's GPU)

#include <string>

#include "core/config/experiment_config.h"

namespace mok {

struct ClusterLayout {
  int nodes = 1;
  int tasks_per_node = 1;  // one rank per task: per GPU on GPUs, per CPU rank with cpu
  bool cpu = false;        // CPU ranks over MPI instead of GPU ranks over NCCL
};

// Folders of a job, relative to its folder (where the job runs).
inline constexpr const char* kClusterJobDb = "runs/mok.db";
inline constexpr const char* kClusterJobCheckpoints = "runs/checkpoints";

// `config` with parallel.ranks = nodes·tasks_per_node, parallel.device cuda and comm nccl
// (cpu: device cpu, comm mpi; one rank: comm local), parallel.gpus cleared (a rank binds the GPU of its local
// rank on its node; Slurm hands each node's GPUs out as 0…G−1), and logging.db and
// logging.checkpoint_dir inside the job's folder. Values are not checked here.
ExperimentConfig cluster_job_config(const ExperimentConfig& config, const ClusterLayout& layout);

// Why the trainer could not run `job` (a cluster_job_config result) on the cluster, or "".
// Checks what `mok train` checks before it starts, except what needs the cluster itself (a
// GPU here, an MPI launcher).
std::string cluster_job_problem(const ExperimentConfig& job);

}  // namespace mok
