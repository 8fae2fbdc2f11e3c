#include "core/train/rank_launch.h"

#include <algorithm>
#include <cstdlib>

#include "core/parallel/data_plane.h"
#include "core/parallel/link_model.h"
#include "core/parallel/local_communicator.h"
#include "core/parallel/mpi_communicator.h"
#include "core/tensor/memory_tracker.h"
#include "core/util/thread_pool.h"

namespace mok {

namespace {

RankContext rank_context(const ExperimentConfig& cfg, Communicator* comm, int local_rank) {
  RankContext rc;
  if (comm) {
    rc.comm = comm;
    rc.rank = comm->rank();
    rc.ranks = comm->size();
    if (cfg.model.experts > 0) {
      rc.placement = ExpertPlacement::parse(cfg.parallel.expert_placement, cfg.model.experts, rc.ranks);
    }
  }
  rc.device = bind_rank_device(cfg, rc.rank, rc.ranks, local_rank);
  // Rows and gradients move on the rank's device over parallel.comm's transport; a collective
  // where the device's transport bootstraps (NCCL), so every rank of the run gets here.
  if (comm) rc.data = make_data_plane(*comm, rc.device.exec(), data_plane_transport(cfg));
  return rc;
}

// parallel.device_memory_limit on the rank's tracker (its tensors) and, on a GPU, its allocator
// (the cache too).
void apply_memory_limit(const ExperimentConfig& cfg, RankContext& rc, MemoryTracker& tracker) {
  const int64_t limit = cfg.parallel.device_memory_limit_bytes();
  const ExecContext& cx = rc.device.exec();
  tracker.set_limit(cx.device().type, limit);
  if (!cx.is_cpu()) cx.allocator().set_limit(limit);
}

}  // namespace

int host_local_rank(int world_rank) {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  }
  return world_rank;
}

bool runs_as_mpi_processes(const ExperimentConfig& config) {
  return config.parallel.comm == "mpi" || (config.parallel.comm == "nccl" && mpi_launch_detected());
}

int run_rank_count(const ExperimentConfig& config, const Communicator* mpi_comm) {
  return mpi_comm ? mpi_comm->size() : config.parallel.ranks;
}

TrainResult launch_ranks(const ExperimentConfig& cfg, Communicator* mpi_comm, MemoryTracker& process_tracker,
                         const TrainEvent& event, const RankBody& body) {
  const int ranks = run_rank_count(cfg, mpi_comm);
  const LinkModel link = LinkModel::from_config(cfg.parallel, cfg.parallel.link_sleep);
  if (mpi_comm) {
    // One rank per process: this thread, this process's tracker and pool.
    mpi_comm->set_link(link);
    RankContext rc = rank_context(cfg, mpi_comm, host_local_rank(mpi_comm->rank()));
    apply_memory_limit(cfg, rc, process_tracker);
    ScopedExecContext on_device(rc.device.exec());
    return body(rc, process_tracker);
  }
  if (ranks == 1) {
    RankContext rc = rank_context(cfg, nullptr, 0);  // no communicator: the single-rank path
    apply_memory_limit(cfg, rc, process_tracker);
    ScopedExecContext on_device(rc.device.exec());
    return body(rc, process_tracker);
  }
  // R threads of this process, each with its own memory tracker and thread pool.
  const int threads = std::max(1, cfg.parallel.threads);
  event("parallel: " + std::to_string(ranks) + " local ranks, " + std::to_string(threads) + " threads each");
  TrainResult result;
  run_local_ranks(
      ranks,
      [&](Communicator& comm) {
        MemoryTracker tracker;
        ScopedMemoryTracker track_rank(tracker);
        ThreadPool pool(threads);
        ScopedThreadPool pool_rank(pool);
        RankContext rc = rank_context(cfg, &comm, comm.rank());
        apply_memory_limit(cfg, rc, tracker);
        ScopedExecContext on_device(rc.device.exec());
        TrainResult r = body(rc, tracker);
        if (rc.leader()) result = std::move(r);
      },
      link);
  return result;
}

}  // namespace mok
