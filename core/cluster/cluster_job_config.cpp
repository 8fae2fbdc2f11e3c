#include "core/cluster/cluster_job_config.h"

#include "core/config/config_check.h"
#include "core/train/trainer.h"

namespace mok {

ExperimentConfig cluster_job_config(const ExperimentConfig& config, const ClusterLayout& layout) {
  ExperimentConfig job = config;
  job.parallel.ranks = layout.nodes * layout.tasks_per_node;
  job.parallel.device = layout.cpu ? "cpu" : "cuda";
  // One rank needs no communicator (and comm: mpi would ask for a launcher).
  job.parallel.comm = job.parallel.ranks == 1 ? "local" : layout.cpu ? "mpi" : "nccl";
  job.parallel.gpus.clear();
  job.logging.db = kClusterJobDb;
  job.logging.checkpoint_dir = kClusterJobCheckpoints;
  return job;
}

std::string cluster_job_problem(const ExperimentConfig& job) {
  for (const ConfigIssue& issue : check_experiment_config(job)) return issue.key_path + ": " + issue.message;
  // Here, comm: mpi would ask for a launcher and device: cuda for a GPU; neither is needed to
  // judge the rest. Local ranks stand for the MPI ones: the same rank rules apply.
  ExperimentConfig probe = job;
  if (probe.parallel.comm == "mpi") probe.parallel.comm = "local";
  return Trainer::unsupported_reason(probe, "");
}

}  // namespace mok
