// mok_mpi_comm_check: run under `mpirun -np R`; every rank runs the collective checks of
// comm_checks.h over an MpiCommunicator, prints one line, and the job exits non-zero if any
// rank found a failure. Run by tests/core/test_comm_mpi.cpp.
#include <cstdio>
#include <exception>
#include <string>

#include "core/parallel/mpi_communicator.h"
#include "mpi/comm_checks.h"

int main(int argc, char** argv) {
  using namespace mok;
  try {
    MpiSession session(&argc, &argv);
    MpiCommunicator comm;
    std::vector<std::string> failures = comm_checks::run_all(comm, 4242 + comm.size(), 4);
    // Every rank learns how many failures the job had, so all exit with the same code.
    int64_t count = static_cast<int64_t>(failures.size());
    comm.all_reduce_sum(&count, 1, CommPurpose::control);
    for (const auto& f : failures) std::fprintf(stderr, "FAIL %s\n", f.c_str());
    std::printf("mpi comm check: rank %d of %d: %s (%lld failures in the job)\n", comm.rank(),
                comm.size(), failures.empty() ? "ok" : "FAILED", static_cast<long long>(count));
    std::fflush(stdout);
    return count == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi comm check: %s\n", e.what());
    std::fflush(stderr);
    if (mpi_launch_detected() && mpi_available()) mpi_abort(2);
    return 2;
  }
}
