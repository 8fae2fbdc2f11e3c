#pragma once
// Measuring the two rates the MoK cost model prices (core/parallel/mok_cost_model.h), once,
// before a run (routing.cost_calibrate), where the run moves and adds its data:
//
//   link_gbps       an all-to-all of `probe_bytes` to every other rank through the rank's
//                   DataPlane (GPU ranks: NVLink or whatever their plane uses; CPU ranks: the
//                   communicator's messages, so an emulated link — parallel.link_gbps with
//                   link_sleep — is measured as that link), best of 3 after a warm-up, on the
//                   slowest rank: (R − 1)·probe_bytes / seconds.
//   compute_gflops  the shadow gradient add the model prices: 3·d·f values added into an
//                   accumulator by the rank's ops (Ops::add_, on its device), best of 5 after a
//                   warm-up, on the slowest rank.
// Each timing waits for the rank's device before and after (Ops::synchronize).
//
// Collective: every rank must call it together, and every rank gets the same values (the
// times are maximised over ranks), so the cost model's decisions stay identical across
// ranks. They are timings, so two runs get different values: pin the logged values with
// routing.cost_link_gbps / routing.cost_compute_gflops to replay a run bit for bit.

#include <cstdint>

#include "core/parallel/communicator.h"
#include "core/parallel/data_plane.h"
#include "core/real.h"

MOK_NN_BEGIN

struct MokCalibration {
  double link_gbps = 0.0;       // GB/s (1e9 bytes/s)
  double compute_gflops = 0.0;  // GFLOP/s of the gradient add
  double link_seconds = 0.0;    // the timed all-to-all (slowest rank, best repeat)
  double add_seconds = 0.0;     // the timed add (slowest rank, best repeat)
};

// Through the rank's data plane, on the current ExecContext's device.
MokCalibration calibrate_mok_cost(DataPlane& plane, int64_t d_model, int64_t expert_hidden,
                                  int64_t probe_bytes = int64_t{4} << 20);
// CPU ranks: through `comm` itself (a HostDataPlane), on the CPU.
MokCalibration calibrate_mok_cost(Communicator& comm, int64_t d_model, int64_t expert_hidden,
                                  int64_t probe_bytes = int64_t{4} << 20);

MOK_NN_END
