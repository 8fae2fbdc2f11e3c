#include "core/parallel/mok_cost_calibration.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

MokCalibration calibrate_mok_cost(DataPlane& plane, int64_t d, int64_t f, int64_t probe_bytes) {
  if (d <= 0 || f <= 0 || probe_bytes <= 0)
    throw std::invalid_argument("calibrate_mok_cost: d_model, expert_hidden and probe_bytes must be positive");
  Communicator& comm = plane.control();
  const int R = plane.size(), me = plane.rank();
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  MokCalibration cal;

  // Link: probe_bytes (in f32 words, rounded up) to every other rank, nothing to itself.
  {
    const int64_t words = (probe_bytes + 3) / 4;
    std::vector<int64_t> rows(static_cast<size_t>(R), words);
    rows[static_cast<size_t>(me)] = 0;
    Tensor send = cx.zeros({words * (R - 1)}, DType::f32);
    Tensor recv = cx.zeros({words * (R - 1)}, DType::f32);
    double best = 1e30;
    for (int rep = 0; rep < 4; ++rep) {
      ops.synchronize();
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      plane.all_to_all_rows(send, rows, recv, rows, CommPurpose::control);
      ops.synchronize();
      if (rep > 0) best = std::min(best, seconds_since(t0));
    }
    double t = best;
    comm.all_reduce_max(&t, 1, CommPurpose::control);
    cal.link_seconds = t;
    cal.link_gbps = R > 1 ? static_cast<double>(R - 1) * static_cast<double>(words * 4) / t / 1e9 : 0.0;
  }

  // Compute: the owner's add of one shadow copy's weight gradient, P = 3·d·f values.
  {
    const int64_t P = 3 * d * f;
    Tensor acc = cx.zeros({P}, kRealDType), g = cx.zeros({P}, kRealDType);
    double best = 1e30;
    for (int rep = 0; rep < 6; ++rep) {
      ops.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      ops.add_(acc, g);
      ops.synchronize();
      if (rep > 0) best = std::min(best, seconds_since(t0));
    }
    double t = std::max(best, 1e-9);
    comm.all_reduce_max(&t, 1, CommPurpose::control);
    cal.add_seconds = t;
    cal.compute_gflops = static_cast<double>(P) / t / 1e9;
  }
  plane.settle();  // the probes' device time lands before the run's first step
  return cal;
}

MokCalibration calibrate_mok_cost(Communicator& comm, int64_t d, int64_t f, int64_t probe_bytes) {
  HostDataPlane plane(comm);
  ScopedExecContext cpu(cpu_context());
  return calibrate_mok_cost(plane, d, f, probe_bytes);
}

MOK_NN_END
