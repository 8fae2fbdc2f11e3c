#pragma once
// NcclDataPlane: the DataPlane (core/parallel/data_plane.h) of CUDA ranks, over NCCL.
//
// One NCCL communicator per rank, bootstrapped over the run's host Communicator (rank 0 makes
// the unique id and broadcasts it: a LocalCommunicator when the ranks are threads of one
// process, MPI when mpirun or srun started one process per GPU). Everything but a started group
// is enqueued on the rank's compute stream, so transfers are ordered with the kernels around
// them and the host never waits for them:
//   all_to_all_rows   one NCCL group of send/recv pairs, one per peer with a non-empty
//                     message; the own block is a device-to-device copy
//   all_to_all_rows_group  every move's pairs in one NCCL group (own blocks copied first)
//   all_reduce_sum    reduce-scatter by send/recv into an (R, chunk) buffer, the owner adds
//                     the copies in rank order (kernels/rank_order_all_reduce.h), all-gather by
//                     send/recv: NCCL's own all-reduce chooses its summation order by
//                     topology and protocol, this one is fixed, so every rank and every run
//                     get the same bits, and the host's rule gives the same bits too
//   broadcast         ncclBroadcast (a copy: no arithmetic to reorder)
//   start_group       the same NCCL group on the plane's transfer stream (highest priority),
//                     after an event of the compute stream; finish makes the compute stream
//                     wait for the group's end event
// Each call is bracketed by CUDA events (kernels/collective_timing.h); settle() (at a step's
// end) adds the compute stream's share — its collectives and its waits for started groups,
// the exposed time — to the host communicator's wall seconds (perf/comm_ms), and the started
// groups' time on the transfer stream to its overlapped seconds (perf/comm_overlapped_ms):
// device time, not the time to queue the calls.
// NVLink multicast (NVLS) stays off: registering sets NCCL_NVLS_ENABLE=0 (at start-up, before
// NCCL starts) unless the environment already says otherwise.

#include <memory>

#include "core/parallel/data_plane.h"

namespace mok::cuda {

class CudaOps;

// Whether this build has NCCL; register_nccl_data_plane() does nothing without it.
bool nccl_built();
// Registers the NCCL data plane for CUDA contexts (called by register_cuda_backend).
void register_nccl_data_plane();

}  // namespace mok::cuda
