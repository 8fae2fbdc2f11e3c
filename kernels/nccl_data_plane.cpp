#include "kernels/nccl_data_plane.h"

#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/exec_context.h"
#include "kernels/collective_timing.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_ops.h"
#include "kernels/rank_order_sum.h"

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
  }
  ~NcclDataPlane() override {
    control().remove_abort_hook(this);
    if (std::uncaught_exceptions() > 0) {
      // This rank is failing: peers may be waiting on it, and its own stream may wait on them.
      control().abort_group();  // runs every rank's hook, this one's included
      abort_nccl();
      return;
    }
    std::lock_guard lock(mutex_);
    if (comm_) {
      cudaStreamSynchronize(ops_->stream());
      ncclCommDestroy(comm_);
      comm_ = nullptr;
    }
  }

  const char* kind() const override { return "nccl"; }

  void settle() override { control().add_wall_seconds(timer_.seconds()); }

  void all_reduce_sum(mok::Tensor& data, mok::CommPurpose purpose) override {
    if (data.device() != context_.device())
      throw std::logic_error("NcclDataPlane: " + data.describe() + " is not on " + context_.device().str());
    const int R = size(), me = rank();
    const int64_t n = data.numel();
    if (R == 1 || n == 0) return;
    const int64_t esize = mok::dtype_size(data.dtype());
    if (data.dtype() != mok::DType::f32 && data.dtype() != mok::DType::f64)
      throw std::invalid_argument("DataPlane::all_reduce_sum: f32 or f64, not " + data.describe());
    auto begin = [&](int c) { return n * c / R; };
    const int64_t my_begin = begin(me), my_len = begin(me + 1) - my_begin;
    auto* base = static_cast<uint8_t*>(data.raw());
    mok::Tensor parts = context_.empty({static_cast<int64_t>(R) * my_len}, data.dtype());
    auto* pbase = static_cast<uint8_t*>(parts.raw());
    const cudaStream_t stream = ops_->stream();
    const ncclComm_t comm = live_comm();
    const auto profiled = profile("nccl_all_reduce", purpose);
    const auto timed = timer_.scope();

    // 1. reduce-scatter: chunk c of every rank to rank c; the own chunk is a local copy.
    std::vector<int64_t> sb(R), rb(R);
    for (int p = 0; p < R; ++p) {
      sb[p] = (begin(p + 1) - begin(p)) * esize;
      rb[p] = my_len * esize;
    }
    if (my_len)
      MOK_CUDA_CHECK(cudaMemcpyAsync(pbase + me * my_len * esize, base + my_begin * esize, my_len * esize,
                                     cudaMemcpyDeviceToDevice, stream));
    MOK_NCCL_CHECK(ncclGroupStart());
    for (int p = 0; p < R; ++p) {
      if (p == me) continue;
      if (sb[p]) MOK_NCCL_CHECK(ncclSend(base + begin(p) * esize, sb[p], ncclUint8, p, comm, stream));
      if (rb[p]) MOK_NCCL_CHECK(ncclRecv(pbase + p * my_len * esize, rb[p], ncclUint8, p, comm, stream));
    }
    MOK_NCCL_CHECK(ncclGroupEnd());
    control().count_transfer(sb, rb, purpose, 0.0);  // time: settle()

    // 2. the owner adds the copies in rank order.
    if (data.dtype() == mok::DType::f32)
      sum_rank_parts(static_cast<const float*>(parts.raw()), R, my_len,
                     reinterpret_cast<float*>(base + my_begin * esize), stream);
    else
      sum_rank_parts(static_cast<const double*>(parts.raw()), R, my_len,
                     reinterpret_cast<double*>(base + my_begin * esize), stream);

    // 3. all-gather: the owner's reduced chunk to everyone.
    for (int p = 0; p < R; ++p) {
      sb[p] = p == me ? 0 : my_len * esize;
      rb[p] = p == me ? 0 : (begin(p + 1) - begin(p)) * esize;
    }
    MOK_NCCL_CHECK(ncclGroupStart());
    for (int p = 0; p < R; ++p) {
      if (p == me) continue;
      if (sb[p]) MOK_NCCL_CHECK(ncclSend(base + my_begin * esize, sb[p], ncclUint8, p, comm, stream));
      if (rb[p]) MOK_NCCL_CHECK(ncclRecv(base + begin(p) * esize, rb[p], ncclUint8, p, comm, stream));
    }
    MOK_NCCL_CHECK(ncclGroupEnd());
    control().count_transfer(sb, rb, purpose, 0.0);
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
    const int R = size(), me = rank();
    const cudaStream_t stream = ops_->stream();
    const ncclComm_t comm = live_comm();
    const auto profiled = profile("nccl_all_to_all", purpose);
    const auto timed = timer_.scope();
    std::vector<int64_t> soff(R + 1, 0), roff(R + 1, 0);
    for (int p = 0; p < R; ++p) {
      soff[p + 1] = soff[p] + send_bytes[p];
      roff[p + 1] = roff[p] + recv_bytes[p];
    }
    if (send_bytes[me] != recv_bytes[me])
      throw std::logic_error("DataPlane: the own block is " + std::to_string(send_bytes[me]) + " bytes to send but " +
                             std::to_string(recv_bytes[me]) + " to receive");
    if (send_bytes[me])
      MOK_CUDA_CHECK(cudaMemcpyAsync(recv + roff[me], send + soff[me], send_bytes[me], cudaMemcpyDeviceToDevice,
                                     stream));
    MOK_NCCL_CHECK(ncclGroupStart());
    for (int p = 0; p < R; ++p) {
      if (p == me) continue;
      if (send_bytes[p]) MOK_NCCL_CHECK(ncclSend(send + soff[p], send_bytes[p], ncclUint8, p, comm, stream));
      if (recv_bytes[p]) MOK_NCCL_CHECK(ncclRecv(recv + roff[p], recv_bytes[p], ncclUint8, p, comm, stream));
    }
    MOK_NCCL_CHECK(ncclGroupEnd());
    control().count_transfer(send_bytes, recv_bytes, purpose, 0.0);
  }

 private:
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
  CollectiveTimer timer_;  // the collectives since the last settle()
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
