#pragma once
// Launching the ranks of a training run and binding each to its device.
//
//   one rank        (parallel.ranks 1, comm local): the calling thread, no communicator;
//   R local ranks   (comm local): R threads of this process, each with its own memory
//                   tracker and thread pool of parallel.threads, over LocalCommunicators;
//   an MPI rank     (comm mpi, or nccl under mpirun/srun): this process is one rank of the
//                   job (the caller made the MpiCommunicator); the calling thread, the
//                   process's tracker and pool.
// GPU ranks (comm nccl, threads or processes) move rows and gradients over NCCL, with the
// host communicator as their control plane (RankContext::data).
// Each rank's RankContext carries its communicator, expert placement and device
// (bind_rank_device, rank_device.h) before the rank body runs.

#include <functional>
#include <string>

#include "core/config/experiment_config.h"
#include "core/train/rank_context.h"
#include "core/train/train_event.h"
#include "core/train/trainer.h"

MOK_NN_BEGIN
class MemoryTracker;
MOK_NN_END

namespace mok {

// Whether this process is one rank of a job that mpirun or srun started: parallel.comm mpi,
// or nccl under such a launcher (NCCL's id then travels over MPI).
bool runs_as_mpi_processes(const ExperimentConfig& config);

// The rank's index among the ranks of its host, as MPI launchers tell it (Open MPI, Slurm,
// MPICH); `world_rank` when none does (one host). It picks the rank's GPU.
int host_local_rank(int world_rank);

// The rank count of a run: the job size under MPI (mpi_comm set), else parallel.ranks.
int run_rank_count(const ExperimentConfig& config, const Communicator* mpi_comm);

// What one rank does: its whole part of the run. `tracker` counts its memory.
using RankBody = std::function<TrainResult(RankContext& rc, MemoryTracker& tracker)>;

// Runs `body` on every rank of the run that lives in this process and returns the
// leader's result (under MPI: this process's). `process_tracker` (already installed on
// this thread, with the process's thread pool) serves the single-rank and MPI cases.
// Collective failures: a local rank that throws aborts the group; the first exception is
// rethrown here.
TrainResult launch_ranks(const ExperimentConfig& config, Communicator* mpi_comm, MemoryTracker& process_tracker,
                         const TrainEvent& event, const RankBody& body);

}  // namespace mok
