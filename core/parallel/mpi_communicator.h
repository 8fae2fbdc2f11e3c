#pragma once
// MpiCommunicator: one process per rank through MPI (Open MPI), launched with
//   mpirun -np R mok train CONFIG      or, on a Slurm cluster,   srun -n R mok train CONFIG
//
// The exchange primitive posts one non-blocking receive per source and one send per peer
// (MPI_Irecv / MPI_Isend with MPI_BYTE; messages over 1 GiB go in 1 GiB pieces, so sizes
// are not limited to int), copies the self block in memory, and waits for all. Received
// sizes are checked against the expected ones. MPI errors become exceptions (the
// communicator's error handler is MPI_ERRORS_RETURN), so a caller can report them and
// call mpi_abort().
//
// Built when MOK_HAVE_MPI is defined (CMake found MPI); otherwise the functions below that
// need MPI throw a clear error, and mpi_launch_detected() still works.

#include <memory>

#include "core/parallel/communicator.h"
#include "core/real.h"

MOK_NN_BEGIN

// True when this build has MPI support.
bool mpi_available();

// True when the process was started by an MPI launcher: mpirun/mpiexec (Open MPI sets
// OMPI_COMM_WORLD_SIZE), srun (PMIX_RANK or PMI_SIZE) or Hydra (PMI_SIZE).
bool mpi_launch_detected();

// How many processes a launcher started together with this one, as its environment says
// (mpirun: OMPI_COMM_WORLD_SIZE; srun: SLURM_STEP_NUM_TASKS inside a step; Hydra/PMI-2:
// PMI_SIZE), with this one's index among them; 1 and 0 when none did. Also seen when srun
// has no MPI plugin, where mpi_launch_detected() is false: a config that is not one rank of
// such a job must then be refused, or every task would train alone into the same store.
int launched_task_count();
int launched_task_index();

// MPI_Init_thread on construction (unless MPI is already initialized), asking for
// MPI_THREAD_SERIALIZED so that a rank's CommWorker may run its collectives; MPI_Finalize on
// destruction (only if this object initialized it). One per process, in main().
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int world_rank() const { return rank_; }
  int world_size() const { return size_; }

 private:
  bool owns_ = false;
  int rank_ = 0, size_ = 1;
};

// Ends every process of the job (after a rank failed); does not return.
[[noreturn]] void mpi_abort(int code);

class MpiCommunicator : public Communicator {
 public:
  // A communicator over a duplicate of MPI_COMM_WORLD (MPI must be initialized).
  MpiCommunicator();
  ~MpiCommunicator() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* kind() const override { return "mpi"; }
  // True when MPI was initialised with MPI_THREAD_SERIALIZED or more (MpiSession asks for it).
  bool allows_helper_thread() const override;

 protected:
  void exchange(const uint8_t* const* send, const int64_t* send_bytes, uint8_t* const* recv,
                const int64_t* recv_bytes) override;
  void barrier_impl() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1;
};

MOK_NN_END
