#include "core/parallel/mpi_communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(MOK_HAVE_MPI)
#include <mpi.h>
#endif

MOK_NN_BEGIN

bool mpi_available() {
#if defined(MOK_HAVE_MPI)
  return true;
#else
  return false;
#endif
}

bool mpi_launch_detected() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (const char* v = std::getenv(var); v && *v) return true;
  return false;
}

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

int launched_task_count() {
  int n = std::max(env_int("OMPI_COMM_WORLD_SIZE", 1), env_int("PMI_SIZE", 1));
  if (std::getenv("SLURM_PROCID")) n = std::max(n, env_int("SLURM_STEP_NUM_TASKS", 1));
  return std::max(n, 1);
}

int launched_task_index() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  return 0;
}

#if defined(MOK_HAVE_MPI)

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string("MPI: ") + what + " failed: " + std::string(text, len));
}

// Largest piece of one message (bytes), so counts fit MPI's int.
constexpr int64_t kPieceBytes = int64_t{1} << 30;

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    owns_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;
  struct Expected {
    int source;
    int64_t bytes;
  };
  std::vector<Expected> expected;  // one per receive request, in request order
};

MpiCommunicator::MpiCommunicator() : impl_(std::make_unique<Impl>()) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    throw std::runtime_error("MpiCommunicator: MPI is not initialized (create an MpiSession)");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(impl_->comm, &rank_);
  MPI_Comm_size(impl_->comm, &size_);
  init_stats(size_, rank_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
}

bool MpiCommunicator::allows_helper_thread() const {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level >= MPI_THREAD_SERIALIZED;
}

void MpiCommunicator::exchange(const uint8_t* const* send, const int64_t* send_bytes,
                               uint8_t* const* recv, const int64_t* recv_bytes) {
  auto& reqs = impl_->requests;
  auto& expected = impl_->expected;
  reqs.clear();
  expected.clear();
  // Receives first (one request per piece), then sends; the self block is a copy. Pieces
  // of one message travel in order (MPI does not overtake messages of a pair with the
  // same tag and communicator), so piece i lands at offset i·kPieceBytes.
  for (int s = 0; s < size_; ++s) {
    if (s == rank_ || recv_bytes[s] == 0) continue;
    for (int64_t off = 0; off < recv_bytes[s]; off += kPieceBytes) {
      const int64_t n = std::min(kPieceBytes, recv_bytes[s] - off);
      reqs.emplace_back();
      check(MPI_Irecv(recv[s] + off, static_cast<int>(n), MPI_BYTE, s, 0, impl_->comm,
                      &reqs.back()),
            "MPI_Irecv");
      expected.push_back({s, n});
    }
  }
  const size_t receives = reqs.size();
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || send_bytes[p] == 0) continue;
    for (int64_t off = 0; off < send_bytes[p]; off += kPieceBytes) {
      const int64_t n = std::min(kPieceBytes, send_bytes[p] - off);
      reqs.emplace_back();
      check(MPI_Isend(send[p] + off, static_cast<int>(n), MPI_BYTE, p, 0, impl_->comm,
                      &reqs.back()),
            "MPI_Isend");
    }
  }
  if (send_bytes[rank_] != recv_bytes[rank_])
    throw std::runtime_error("MpiCommunicator: self block of " + std::to_string(send_bytes[rank_]) +
                             " bytes sent but " + std::to_string(recv_bytes[rank_]) + " expected");
  if (send_bytes[rank_] > 0)
    std::memmove(recv[rank_], send[rank_], static_cast<size_t>(send_bytes[rank_]));
  impl_->statuses.resize(reqs.size());
  if (!reqs.empty())
    check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), impl_->statuses.data()),
          "MPI_Waitall (a peer sent more bytes than expected?)");
  for (size_t i = 0; i < receives; ++i) {
    int got = 0;
    MPI_Get_count(&impl_->statuses[i], MPI_BYTE, &got);
    if (got != expected[i].bytes)
      throw std::runtime_error("MpiCommunicator: rank " + std::to_string(rank_) + " expected " +
                               std::to_string(expected[i].bytes) + " bytes from rank " +
                               std::to_string(expected[i].source) + ", got " +
                               std::to_string(got));
  }
}

void MpiCommunicator::barrier_impl() { check(MPI_Barrier(impl_->comm), "MPI_Barrier"); }

#else  // no MPI in this build

static const char* kNoMpi =
    "this build has no MPI support (install libopenmpi-dev and reconfigure with CMake)";

MpiSession::MpiSession(int*, char***) { throw std::runtime_error(kNoMpi); }
MpiSession::~MpiSession() = default;
void mpi_abort(int code) { std::exit(code); }

struct MpiCommunicator::Impl {};
MpiCommunicator::MpiCommunicator() { throw std::runtime_error(kNoMpi); }
MpiCommunicator::~MpiCommunicator() = default;
bool MpiCommunicator::allows_helper_thread() const { return false; }
void MpiCommunicator::exchange(const uint8_t* const*, const int64_t*, uint8_t* const*,
                               const int64_t*) {
  throw std::runtime_error(kNoMpi);
}
void MpiCommunicator::barrier_impl() { throw std::runtime_error(kNoMpi); }

#endif

MOK_NN_END
