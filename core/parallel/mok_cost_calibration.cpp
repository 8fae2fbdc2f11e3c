#include "core/parallel/mok_cost_calibration.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

MOK_NN_BEGIN

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

MokCalibration calibrate_mok_cost(Communicator& comm, int64_t d, int64_t f, int64_t probe_bytes) {
  if (d <= 0 || f <= 0 || probe_bytes <= 0)
    throw std::invalid_argument("calibrate_mok_cost: d_model, expert_hidden and probe_bytes must be positive");
  const int R = comm.size(), me = comm.rank();
  MokCalibration cal;

  // Link: probe_bytes to every other rank (nothing to itself), best of 3 after a warm-up.
  {
    std::vector<int64_t> bytes(static_cast<size_t>(R), probe_bytes);
    bytes[static_cast<size_t>(me)] = 0;
    std::vector<uint8_t> send(static_cast<size_t>(probe_bytes) * static_cast<size_t>(R - 1), 1);
    std::vector<uint8_t> recv(send.size());
    double best = 1e30;
    for (int rep = 0; rep < 4; ++rep) {
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      comm.all_to_all_bytes(send.data(), bytes, recv.data(), bytes, CommPurpose::control);
      if (rep > 0) best = std::min(best, seconds_since(t0));
    }
    double t = best;
    comm.all_reduce_max(&t, 1, CommPurpose::control);
    cal.link_seconds = t;
    cal.link_gbps = R > 1 ? static_cast<double>(R - 1) * static_cast<double>(probe_bytes) / t / 1e9 : 0.0;
  }

  // Compute: the owner's add of one shadow copy's weight gradient, P = 3·d·f values.
  {
    const int64_t P = 3 * d * f;
    std::vector<real> acc(static_cast<size_t>(P), real(0)), g(static_cast<size_t>(P), real(1e-3));
    double best = 1e30;
    for (int rep = 0; rep < 6; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < P; ++i) acc[i] += g[i];
      if (rep > 0) best = std::min(best, seconds_since(t0));
    }
    // Keep the adds observable so they are not optimised away.
    volatile real sink = acc[static_cast<size_t>(P - 1)];
    (void)sink;
    double t = std::max(best, 1e-9);
    comm.all_reduce_max(&t, 1, CommPurpose::control);
    cal.add_seconds = t;
    cal.compute_gflops = static_cast<double>(P) / t / 1e9;
  }
  return cal;
}

MOK_NN_END
