#include "kernels/peer_data_plane.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/parallel/data_plane.h"
#include "core/parallel/rank_rendezvous.h"
#include "kernels/collective_timing.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_ops.h"
#include "kernels/rank_order_all_reduce.h"
#include "kernels/transfer_stream.h"

namespace mok::cuda {

namespace {

// What one rank offers a peer: `bytes` at `from` (in its own memory), and where the peer
// puts what it takes.
struct Piece {
  const uint8_t* from = nullptr;
  int64_t bytes = 0;
};
struct Take {
  uint8_t* into = nullptr;
  int64_t bytes = 0;
};
// What one rank posts at a rendezvous (core/parallel/rank_rendezvous.h): its device, an event
// on its stream, and per peer the pieces that peer takes (one per move of a group).
struct Post {
  int device = 0;
  cudaEvent_t event = nullptr;
  std::vector<std::vector<Piece>> offer;
};
using Rendezvous = mok::RankRendezvous<Post>;

class PeerDataPlane final : public mok::DataPlane {
 public:
  PeerDataPlane(mok::Communicator& control, const mok::ExecContext& context)
      : DataPlane(control),
        context_(context),
        ops_(&cuda_ops_of(context, "PeerDataPlane")),
        device_(context.device().index),
        timer_(ops_->stream()) {
    if (std::strcmp(control.kind(), "local") != 0)
      throw std::runtime_error(std::string("parallel.comm: peer copies between the GPUs of one process, but the ranks "
                                           "exchange over ") +
                               control.kind() + ": use parallel.comm: nccl for ranks in processes of their own");
    ops_->bind_thread();
    // Rank 0 makes the group's rendezvous and hands its address to the others (one process).
    std::unique_ptr<std::shared_ptr<Rendezvous>> made;
    if (control.rank() == 0) made = std::make_unique<std::shared_ptr<Rendezvous>>(std::make_shared<Rendezvous>(size()));
    uintptr_t address = reinterpret_cast<uintptr_t>(made.get());
    control.broadcast(&address, sizeof address, 0, mok::CommPurpose::control);
    rendezvous_ = *reinterpret_cast<std::shared_ptr<Rendezvous>*>(address);
    control.barrier();  // every rank holds its own reference before rank 0 lets its holder go
    // Direct copies between distinct GPUs where the hardware allows (else CUDA stages them
    // through the host: correct, slower).
    std::vector<int64_t> devices(static_cast<size_t>(size()));
    const int64_t mine = device_;
    control.all_gather(&mine, sizeof mine, devices.data(), mok::CommPurpose::control);
    for (int64_t d : devices) {
      if (d == device_) continue;
      int can = 0;
      MOK_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device_, static_cast<int>(d)));
      if (!can) continue;
      const cudaError_t status = cudaDeviceEnablePeerAccess(static_cast<int>(d), 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled)
        cudaGetLastError();
      else
        MOK_CUDA_CHECK(status);
    }
    MOK_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    MOK_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    // Started groups copy on a stream of their own (the copy engines run beside the kernels).
    transfer_ = std::make_unique<TransferStream>(/*high_priority=*/false);
    control.add_abort_hook(this, [r = rendezvous_] { r->abort(); });
  }

  ~PeerDataPlane() override {
    control().remove_abort_hook(this);
    if (std::uncaught_exceptions() > 0) {
      rendezvous_->abort();     // peers may be waiting for this rank at a rendezvous
      control().abort_group();  // or in a host collective
    } else {
      transfer_->synchronize();
      cudaStreamSynchronize(ops_->stream());  // peers' copies out of this rank's memory included
    }
    transfer_.reset();
    cudaEventDestroy(ready_);
    cudaEventDestroy(done_);
  }

  const char* kind() const override { return "peer"; }

  // Exposed (the compute stream's collectives and waits) and overlapped (started groups).
  void settle() override {
    control().add_wall_seconds(timer_.seconds());
    control().add_overlapped_seconds(transfer_->seconds());
  }

  void all_reduce_sum(mok::Tensor& data, mok::CommPurpose purpose) override {
    // Each move one pull: what every rank offers each peer, and where this rank puts its share.
    auto scatter = [&](const uint8_t* base, uint8_t* parts, const RankChunks& c) {
      std::vector<std::pair<int64_t, int64_t>> offer(c.ranks);
      std::vector<uint8_t*> into(c.ranks);
      std::vector<int64_t> want(c.ranks);
      for (int p = 0; p < c.ranks; ++p) {
        offer[p] = {c.offset(p), p == c.me ? 0 : c.bytes(p)};
        into[p] = parts + p * c.bytes(c.me);
        want[p] = p == c.me ? 0 : c.bytes(c.me);
      }
      pull(base, offer, into, want);
    };
    auto gather = [&](uint8_t* base, const RankChunks& c) {
      std::vector<std::pair<int64_t, int64_t>> offer(c.ranks);
      std::vector<uint8_t*> into(c.ranks);
      std::vector<int64_t> want(c.ranks);
      for (int p = 0; p < c.ranks; ++p) {
        offer[p] = {c.offset(c.me), p == c.me ? 0 : c.bytes(c.me)};
        into[p] = base + c.offset(p);
        want[p] = p == c.me ? 0 : c.bytes(p);
      }
      pull(base, offer, into, want);
    };
    rank_order_all_reduce({context_, ops_->stream(), control(), timer_, ops_->profiler(), "PeerDataPlane",
                           "peer_all_reduce"},
                          data, purpose, scatter, gather);
  }

  void broadcast(mok::Tensor& data, int root, mok::CommPurpose purpose) override {
    const int R = size(), me = rank();
    if (root < 0 || root >= R) throw std::invalid_argument("broadcast: root out of range");
    const int64_t bytes = data.bytes();
    const auto profiled = profile_collective(ops_->profiler(), "peer_broadcast", purpose);
    const auto timed = timer_.scope();
    std::vector<std::pair<int64_t, int64_t>> offer(R, {0, 0});
    std::vector<uint8_t*> into(R, nullptr);
    std::vector<int64_t> sb(R, 0), rb(R, 0);
    auto* base = static_cast<uint8_t*>(data.raw());
    if (me == root) {
      for (int p = 0; p < R; ++p) {
        if (p == me) continue;
        offer[p] = {0, bytes};
        sb[p] = bytes;
      }
    } else {
      into[root] = base;
      rb[root] = bytes;
    }
    pull(base, offer, into, rb);
    control().count_transfer(sb, rb, purpose, 0.0);
  }

 protected:
  void exchange(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                std::span<const int64_t> recv_bytes, mok::CommPurpose purpose) override {
    const ByteMove move{send, {send_bytes.begin(), send_bytes.end()}, recv, {recv_bytes.begin(), recv_bytes.end()},
                        purpose};
    exchange_group({&move, 1});
  }

  // Every move's own block by a device copy; the peers' blocks, all moves at once, in one
  // pull (one pair of rendezvous for the group).
  void exchange_group(std::span<const ByteMove> moves) override {
    const auto profiled = profile_collective(ops_->profiler(), moves.size() > 1 ? "peer_all_to_all_group" : "peer_all_to_all",
                                             main_purpose(moves));
    const auto timed = timer_.scope();
    pull_group(moves, ops_->stream());
  }

  // The same pull on the transfer stream, after the compute stream's work so far.
  void start_exchange_group(std::span<const ByteMove> moves) override {
    started_purpose_ = main_purpose(moves);
    const auto profiled = profile_collective(ops_->profiler(), "peer_start", started_purpose_);
    transfer_->start(ops_->stream(), [&](cudaStream_t stream) { pull_group(moves, stream); });
  }

  void finish_exchange_group() override {
    const auto profiled = profile_collective(ops_->profiler(), "peer_wait", started_purpose_);
    transfer_->finish(ops_->stream(), timer_);  // what the compute stream waits: the exposed part
  }

 private:
  void pull_group(std::span<const ByteMove> moves, cudaStream_t stream) {
    const int R = size(), me = rank();
    std::vector<std::vector<Piece>> offer(R);
    std::vector<std::vector<Take>> take(R);
    for (const ByteMove& m : moves) {
      int64_t soff = 0, roff = 0;
      for (int p = 0; p < R; ++p) {
        if (p == me) {
          if (m.send_bytes[me])
            MOK_CUDA_CHECK(cudaMemcpyAsync(m.recv + roff, m.send + soff, m.send_bytes[me], cudaMemcpyDeviceToDevice,
                                           stream));
        } else {
          offer[p].push_back({m.send + soff, m.send_bytes[p]});
          take[p].push_back({m.recv + roff, m.recv_bytes[p]});
        }
        soff += m.send_bytes[p];
        roff += m.recv_bytes[p];
      }
    }
    pull(offer, take, stream);
    for (const ByteMove& m : moves) control().count_transfer(m.send_bytes, m.recv_bytes, m.purpose, 0.0);
  }

  // One buffer's collective: offers offer[p] (offset, bytes) of `base` to each peer p and
  // copies want[s] bytes of what each peer s offers this rank into into[s]. The own entries
  // are the caller's (offer[me] and want[me] are 0).
  void pull(const uint8_t* base, std::span<const std::pair<int64_t, int64_t>> offer, std::span<uint8_t* const> into,
            std::span<const int64_t> want) {
    const int R = size(), me = rank();
    std::vector<std::vector<Piece>> pieces(R);
    std::vector<std::vector<Take>> takes(R);
    for (int p = 0; p < R; ++p) {
      if (p == me) continue;
      pieces[p].push_back({base + offer[p].first, offer[p].second});
      takes[p].push_back({into[p], want[p]});
    }
    pull(pieces, takes, ops_->stream());
  }

  // Offers offer[p] to each peer p and copies what each peer s offers this rank into
  // take[s], piece by piece (steps 1–3 at the top of the header), on `stream`. The own lists
  // are empty.
  void pull(const std::vector<std::vector<Piece>>& offer, const std::vector<std::vector<Take>>& take,
            cudaStream_t stream) {
    const int R = size(), me = rank();
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    MOK_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone)
      throw std::runtime_error("peer data plane: a collective cannot be recorded into a CUDA graph");
    MOK_CUDA_CHECK(cudaEventRecord(ready_, stream));
    const std::vector<Post>& offers = rendezvous_->post(me, Post{device_, ready_, offer});
    for (int s = 0; s < R; ++s) {
      if (s == me) continue;
      const Post& from = offers[static_cast<size_t>(s)];
      const std::vector<Piece>& pieces = from.offer[static_cast<size_t>(me)];
      const std::vector<Take>& wanted = take[static_cast<size_t>(s)];
      bool waited = false;
      for (size_t i = 0; i < std::max(pieces.size(), wanted.size()); ++i) {
        const int64_t bytes = i < pieces.size() ? pieces[i].bytes : -1, want = i < wanted.size() ? wanted[i].bytes : -1;
        if (bytes != want) {
          rendezvous_->abort();  // the peers would wait for this rank's done event forever
          throw std::logic_error("PeerDataPlane: rank " + std::to_string(s) + " offers " +
                                 (bytes < 0 ? std::string("nothing") : std::to_string(bytes) + " bytes") +
                                 " to rank " + std::to_string(me) + " in piece " + std::to_string(i) +
                                 ", which expects " + (want < 0 ? std::string("nothing") : std::to_string(want)));
        }
        if (bytes == 0) continue;
        if (!waited) MOK_CUDA_CHECK(cudaStreamWaitEvent(stream, from.event, 0));
        waited = true;
        if (from.device == device_)
          MOK_CUDA_CHECK(cudaMemcpyAsync(wanted[i].into, pieces[i].from, bytes, cudaMemcpyDeviceToDevice, stream));
        else
          MOK_CUDA_CHECK(cudaMemcpyPeerAsync(wanted[i].into, device_, pieces[i].from, from.device, bytes, stream));
      }
    }
    MOK_CUDA_CHECK(cudaEventRecord(done_, stream));
    const std::vector<Post>& dones = rendezvous_->post(me, Post{device_, done_, {}});
    for (int p = 0; p < R; ++p) {
      if (p == me) continue;
      bool taken = false;
      for (const Piece& piece : offer[static_cast<size_t>(p)]) taken = taken || piece.bytes > 0;
      if (taken) MOK_CUDA_CHECK(cudaStreamWaitEvent(stream, dones[static_cast<size_t>(p)].event, 0));
    }
  }

  const mok::ExecContext& context_;
  CudaOps* ops_;
  int device_;
  CollectiveTimer timer_;  // the collectives since the last settle()
  std::shared_ptr<Rendezvous> rendezvous_;
  cudaEvent_t ready_ = nullptr;  // after the work that produced this rank's offer
  cudaEvent_t done_ = nullptr;   // after this rank's copies out of its peers' memory
  std::unique_ptr<TransferStream> transfer_;  // started groups (and their time since the last settle())
  mok::CommPurpose started_purpose_ = mok::CommPurpose::dispatch;
};

}  // namespace

void register_peer_data_plane() {
  mok::register_data_plane(mok::DeviceType::cuda, "peer", [](mok::Communicator& control, const mok::ExecContext& context) {
    return std::unique_ptr<mok::DataPlane>(new PeerDataPlane(control, context));
  });
}

}  // namespace mok::cuda
