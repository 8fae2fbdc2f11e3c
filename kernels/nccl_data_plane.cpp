#include "kernels/nccl_data_plane.h"

#include <cstdlib>
#include <exception>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/exec_context.h"
#include "kernels/collective_timing.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_ops.h"
#include "kernels/rank_order_all_reduce.h"
#include "kernels/transfer_stream.h"

#if MOK_HAVE_NCCL
#include <nccl.h>
#endif

namespace mok::cuda {

#if MOK_HAVE_NCCL

namespace {

void check_nccl(ncclResult_t status, const char* what, const char* file, int line) {
  if (status != ncclSuccess && status != ncclInProgress)
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                             ncclGetErrorString(status));
}
#define MOK_NCCL_CHECK(call) check_nccl((call), #call, __FILE__, __LINE__)

class NcclDataPlane final : public mok::DataPlane {
 public:
  NcclDataPlane(mok::Communicator& control, const mok::ExecContext& context)
      : DataPlane(control), context_(context), ops_(&cuda_ops_of(context, "NcclDataPlane")), timer_(ops_->stream()) {
    ops_->bind_thread();
    ncclUniqueId id{};
    if (control.rank() == 0) MOK_NCCL_CHECK(ncclGetUniqueId(&id));
    control.broadcast(&id, sizeof id, 0, mok::CommPurpose::control);
    MOK_NCCL_CHECK(ncclCommInitRank(&comm_, control.size(), id, control.rank()));
    // When the group gives up (a rank failed), pending NCCL operations are aborted so that no
    // rank waits on the GPU for a peer that will never send.
    control.add_abort_hook(this, [this] { abort_nccl(); });
    transfer_ = std::make_unique<TransferStream>(/*high_priority=*/true);  // NCCL's kernels need SMs
  }
  ~NcclDataPlane() override {
    control().remove_abort_hook(this);
    if (std::uncaught_exceptions() > 0) {
      // This rank is failing: peers may be waiting on it, and its own stream may wait on them.
      control().abort_group();  // runs every rank's hook, this one's included
      abort_nccl();
      transfer_.reset();
      return;
    }
    {
      std::lock_guard lock(mutex_);
      if (comm_) {
        transfer_->synchronize();
        cudaStreamSynchronize(ops_->stream());
        ncclCommDestroy(comm_);
        comm_ = nullptr;
      }
    }
    transfer_.reset();
  }

  const char* kind() const override { return "nccl"; }

  // Exposed: the compute stream's collectives and its waits for started groups; overlapped:
  // the started groups' time on the transfer stream.
  void settle() override {
    control().add_wall_seconds(timer_.seconds());
    control().add_overlapped_seconds(transfer_->seconds());
  }

  void all_reduce_sum(mok::Tensor& data, mok::CommPurpose purpose) override {
    const cudaStream_t stream = ops_->stream();
    // Each move one NCCL group of send/recv pairs.
    auto scatter = [&](const uint8_t* base, uint8_t* parts, const RankChunks& c) {
      const ncclComm_t comm = live_comm();
      MOK_NCCL_CHECK(ncclGroupStart());
      for (int p = 0; p < c.ranks; ++p) {
        if (p == c.me) continue;
        if (c.bytes(p)) MOK_NCCL_CHECK(ncclSend(base + c.offset(p), c.bytes(p), ncclUint8, p, comm, stream));
        if (c.bytes(c.me))
          MOK_NCCL_CHECK(ncclRecv(parts + p * c.bytes(c.me), c.bytes(c.me), ncclUint8, p, comm, stream));
      }
      MOK_NCCL_CHECK(ncclGroupEnd());
    };
    auto gather = [&](uint8_t* base, const RankChunks& c) {
      const ncclComm_t comm = live_comm();
      MOK_NCCL_CHECK(ncclGroupStart());
      for (int p = 0; p < c.ranks; ++p) {
        if (p == c.me) continue;
        if (c.bytes(c.me))
          MOK_NCCL_CHECK(ncclSend(base + c.offset(c.me), c.bytes(c.me), ncclUint8, p, comm, stream));
        if (c.bytes(p)) MOK_NCCL_CHECK(ncclRecv(base + c.offset(p), c.bytes(p), ncclUint8, p, comm, stream));
      }
      MOK_NCCL_CHECK(ncclGroupEnd());
    };
    rank_order_all_reduce({context_, stream, control(), timer_, ops_->profiler(), "NcclDataPlane", "nccl_all_reduce"},
                          data, purpose, scatter, gather);
  }

  void broadcast(mok::Tensor& data, int root, mok::CommPurpose purpose) override {
    const int R = size(), me = rank();
    if (root < 0 || root >= R) throw std::invalid_argument("broadcast: root out of range");
    const int64_t bytes = data.bytes();
    const auto profiled = profile("nccl_broadcast", purpose);
    const auto timed = timer_.scope();
    if (bytes) MOK_NCCL_CHECK(ncclBroadcast(data.raw(), data.raw(), bytes, ncclUint8, root, live_comm(), ops_->stream()));
    std::vector<int64_t> sb(R, 0), rb(R, 0);
    if (me == root) {
      for (int p = 0; p < R; ++p) sb[p] = p == me ? 0 : bytes;
    } else {
      rb[root] = bytes;
    }
    control().count_transfer(sb, rb, purpose, 0.0);
  }

 protected:
  void exchange(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                std::span<const int64_t> recv_bytes, mok::CommPurpose purpose) override {
    const ByteMove move{send, {send_bytes.begin(), send_bytes.end()}, recv, {recv_bytes.begin(), recv_bytes.end()},
                        purpose};
    exchange_group({&move, 1});
  }

  void exchange_group(std::span<const ByteMove> moves) override {
    const auto profiled = profile(moves.size() > 1 ? "nccl_all_to_all_group" : "nccl_all_to_all", main_purpose(moves));
    const auto timed = timer_.scope();
    enqueue_group(moves, ops_->stream());
  }

  // On the transfer stream, after the compute stream's work so far; finish waits for it.
  void start_exchange_group(std::span<const ByteMove> moves) override {
    started_purpose_ = main_purpose(moves);
    const auto profiled = profile("nccl_start", started_purpose_);
    transfer_->start(ops_->stream(), [&](cudaStream_t stream) { enqueue_group(moves, stream); });
  }

  void finish_exchange_group() override {
    const auto profiled = profile("nccl_wait", started_purpose_);
    transfer_->finish(ops_->stream(), timer_);  // what the compute stream waits: the exposed part
  }

 private:
  // Every move's own block by a device copy, then one NCCL group of every move's sends and
  // receives: a launch and a latency for the lot.
  void enqueue_group(std::span<const ByteMove> moves, cudaStream_t stream) {
    const int R = size(), me = rank();
    const ncclComm_t comm = live_comm();
    std::vector<std::vector<int64_t>> soff(moves.size()), roff(moves.size());
    for (size_t i = 0; i < moves.size(); ++i) {
      const ByteMove& m = moves[i];
      soff[i].assign(R + 1, 0);
      roff[i].assign(R + 1, 0);
      for (int p = 0; p < R; ++p) {
        soff[i][p + 1] = soff[i][p] + m.send_bytes[p];
        roff[i][p + 1] = roff[i][p] + m.recv_bytes[p];
      }
      if (m.send_bytes[me])
        MOK_CUDA_CHECK(cudaMemcpyAsync(m.recv + roff[i][me], m.send + soff[i][me], m.send_bytes[me],
                                       cudaMemcpyDeviceToDevice, stream));
    }
    MOK_NCCL_CHECK(ncclGroupStart());
    for (size_t i = 0; i < moves.size(); ++i) {
      const ByteMove& m = moves[i];
      for (int p = 0; p < R; ++p) {
        if (p == me) continue;
        if (m.send_bytes[p]) MOK_NCCL_CHECK(ncclSend(m.send + soff[i][p], m.send_bytes[p], ncclUint8, p, comm, stream));
        if (m.recv_bytes[p]) MOK_NCCL_CHECK(ncclRecv(m.recv + roff[i][p], m.recv_bytes[p], ncclUint8, p, comm, stream));
      }
    }
    MOK_NCCL_CHECK(ncclGroupEnd());
    for (const ByteMove& m : moves) control().count_transfer(m.send_bytes, m.recv_bytes, m.purpose, 0.0);
  }

  OpProfiler::Scope profile(const char* kind, mok::CommPurpose purpose) {
    return profile_collective(ops_->profiler(), kind, purpose);
  }

  // The communicator for the next call; after an abort, a clear error instead. (An abort from
  // another rank's thread may still land while a call is being queued: only when a rank has
  // failed, and NCCL then reports an error that ends this rank too.)
  ncclComm_t live_comm() {
    std::lock_guard lock(mutex_);
    if (!comm_) throw mok::CommAborted("NCCL: the run was aborted because another rank failed");
    return comm_;
  }
  void abort_nccl() {
    std::lock_guard lock(mutex_);
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  const mok::ExecContext& context_;
  CudaOps* ops_;
  std::mutex mutex_;  // guards comm_ against an abort from another rank's thread
  ncclComm_t comm_ = nullptr;
  CollectiveTimer timer_;  // on the compute stream since the last settle(): exposed
  std::unique_ptr<TransferStream> transfer_;  // started groups (and their time since the last settle())
  mok::CommPurpose started_purpose_ = mok::CommPurpose::dispatch;
};

}  // namespace

bool nccl_built() { return true; }

void register_nccl_data_plane() {
  // At start-up, before any thread reads the environment.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  mok::register_data_plane(mok::DeviceType::cuda, "nccl", [](mok::Communicator& control, const mok::ExecContext& context) {
    return std::unique_ptr<mok::DataPlane>(new NcclDataPlane(control, context));
  });
}

#else

bool nccl_built() { return false; }
void register_nccl_data_plane() {}

#endif

}  // namespace mok::cuda
