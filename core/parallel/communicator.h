#pragma once
// Communicator: the collectives the expert-parallel layout needs, over R ranks.
//
//   all_to_all_bytes / all_to_all_v   per-peer sizes; counts given or exchanged first
//   all_reduce_sum                    float, double, int64; bitwise identical on every rank
//   all_gather, broadcast, barrier
//
// Every call names a CommPurpose, and the bytes of every message are counted per peer and
// per purpose in stats() (the own rank's cell counts self-copies, which are local, not
// remote). An optional LinkModel adds the time a slower link would take.
//
// Reduction order. all_reduce_sum splits the array into R contiguous chunks; rank c owns
// chunk c, receives every rank's copy of it and adds them in rank order 0, 1, …, R−1, then
// sends the result to everyone (a reduce-scatter and an all-gather, each an all-to-all, so
// every rank moves 2·(R−1)/R of the array). Each element is summed by exactly one rank in
// one fixed order, so the result is bitwise identical on all ranks and across repeated
// runs. Float inputs are accumulated in double and rounded once: the sum of a few floats
// is then (except with extreme exponent spreads) the exactly rounded sum, which does not
// depend on R or on which rank holds which contribution. Double inputs use compensated
// (Neumaier) summation, exact to within one rounding for any realistic R.
//
// Subclasses implement one data primitive (exchange: a message to and from each peer, at
// any addresses) and a barrier; everything else is built here, once, for all transports.
// A Communicator is used by one thread at a time (its rank's, or that rank's CommWorker).

#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/parallel/comm_stats.h"
#include "core/parallel/link_model.h"
#include "core/real.h"

MOK_NN_BEGIN

// Thrown in a rank whose collective cannot complete because another rank failed.
class CommAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* kind() const = 0;  // "local" or "mpi"
  // Whether this rank's collectives may be issued from a thread other than the one that
  // created the communicator (one thread at a time; see CommWorker).
  virtual bool allows_helper_thread() const { return true; }

  // send: size() blocks back to back in peer order, send_bytes[p] bytes for peer p.
  // recv: size() blocks back to back in source order, recv_bytes[s] bytes from rank s.
  // recv_bytes[s] must equal what rank s sends here (checked: a mismatch throws).
  void all_to_all_bytes(const void* send, std::span<const int64_t> send_bytes, void* recv,
                        std::span<const int64_t> recv_bytes, CommPurpose purpose);
  // Same, with the first head_send_bytes[p] (head_recv_bytes[p]) bytes of each message sent to
  // (received from) rank p counted under head_purpose: one message per peer that carries a
  // small header and its payload, so that it costs one exchange, not two.
  void all_to_all_bytes(const void* send, std::span<const int64_t> send_bytes, void* recv,
                        std::span<const int64_t> recv_bytes, CommPurpose purpose,
                        std::span<const int64_t> head_send_bytes,
                        std::span<const int64_t> head_recv_bytes, CommPurpose head_purpose);
  // Same, when the receiver does not know the counts: they are exchanged first (8 bytes per
  // peer, counted as control). Resizes recv; returns the bytes received from each rank.
  std::vector<int64_t> all_to_all_bytes(const void* send, std::span<const int64_t> send_bytes,
                                        std::vector<uint8_t>& recv, CommPurpose purpose);

  // Typed forms, counts in elements of a trivially copyable T.
  template <class T>
  void all_to_all_v(const T* send, std::span<const int64_t> send_counts, T* recv,
                    std::span<const int64_t> recv_counts, CommPurpose purpose);
  template <class T>
  std::vector<int64_t> all_to_all_v(const T* send, std::span<const int64_t> send_counts,
                                    std::vector<T>& recv, CommPurpose purpose);

  // counts[p] goes to peer p; returns what each rank sent here.
  std::vector<int64_t> exchange_counts(std::span<const int64_t> counts,
                                       CommPurpose purpose = CommPurpose::control);

  // In-place sums over ranks (reduction order: see the top of this file).
  void all_reduce_sum(float* data, int64_t n, CommPurpose purpose);
  void all_reduce_sum(double* data, int64_t n, CommPurpose purpose);
  void all_reduce_sum(int64_t* data, int64_t n, CommPurpose purpose);
  // In-place element-wise maximum over ranks.
  void all_reduce_max(double* data, int64_t n, CommPurpose purpose);

  // recv: size() blocks of `bytes`, block s from rank s (the own block is copied locally).
  void all_gather(const void* send, int64_t bytes, void* recv, CommPurpose purpose);
  // data on `root` is copied to every other rank (root sends R−1 messages).
  void broadcast(void* data, int64_t bytes, int root, CommPurpose purpose);
  void barrier();

  // Hooks that run when the group gives up because a rank failed: another transport of the
  // same ranks (NCCL) aborts its own pending operations there, so that no rank waits forever
  // on a peer that is gone. `owner` names the hook for removal (before the owner dies).
  // Transports whose failures end the whole job (MPI_Abort) keep none.
  virtual void add_abort_hook(const void* owner, std::function<void()> hook) { (void)owner, (void)hook; }
  virtual void remove_abort_hook(const void* owner) { (void)owner; }
  // Gives up on the group now (every rank's collectives throw CommAborted, the hooks run): for
  // a rank that is failing while its peers may wait on it. No-op where a failure ends the job.
  virtual void abort_group() {}

  // Counts one collective that another transport ran for this rank (a DataPlane on the
  // rank's GPU): bytes per peer under `purpose`, host seconds spent in the call, and the
  // emulated link's time (slept, as for host messages, when the link sleeps).
  void count_transfer(std::span<const int64_t> send_bytes, std::span<const int64_t> recv_bytes,
                      CommPurpose purpose, double wall_seconds);

  // Time another transport spent on this rank's collectives, measured after the fact.
  void add_wall_seconds(double seconds) { stats_.wall_seconds += seconds; }
  // Device time of transfers another transport ran on a transfer stream beside compute
  // (CommStats::overlapped_seconds); the part the rank waited for goes to add_wall_seconds.
  void add_overlapped_seconds(double seconds) { stats_.overlapped_seconds += seconds; }

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_.reset(); }
  void set_link(const LinkModel& link) { link_ = link; }
  const LinkModel& link() const { return link_; }
  // Time the emulated link would have taken over all calls so far (0 without a link).
  double modeled_comm_seconds() const { return stats_.modeled_seconds; }

 protected:
  Communicator() = default;
  // Derived constructors call this once rank and size are known.
  void init_stats(int size, int rank) { stats_ = CommStats(size, rank); }

  // The data primitive: to every peer p, send_bytes[p] bytes from send[p]; from every
  // rank s, recv_bytes[s] bytes into recv[s] (self included: a local copy). All ranks call
  // it together. Must throw if a source sends a different count than recv_bytes[s].
  virtual void exchange(const uint8_t* const* send, const int64_t* send_bytes,
                        uint8_t* const* recv, const int64_t* recv_bytes) = 0;
  virtual void barrier_impl() = 0;

 private:
  class CallScope;
  // Counts, models and runs one exchange.
  // head_send/head_recv (may be null): leading bytes per peer counted under head_purpose.
  void counted_exchange(const uint8_t* const* send, const int64_t* send_bytes,
                        uint8_t* const* recv, const int64_t* recv_bytes, CommPurpose purpose,
                        const int64_t* head_send = nullptr, const int64_t* head_recv = nullptr,
                        CommPurpose head_purpose = CommPurpose::control);
  template <class T, class Reduce>
  void reduce_scatter_gather(T* data, int64_t n, CommPurpose purpose, Reduce reduce);

  CommStats stats_;
  LinkModel link_;
  int depth_ = 0;  // nesting of public calls, so wall time is taken once
};

template <class T>
void Communicator::all_to_all_v(const T* send, std::span<const int64_t> send_counts, T* recv,
                                std::span<const int64_t> recv_counts, CommPurpose purpose) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<int64_t> sb(send_counts.begin(), send_counts.end());
  std::vector<int64_t> rb(recv_counts.begin(), recv_counts.end());
  for (auto& b : sb) b *= static_cast<int64_t>(sizeof(T));
  for (auto& b : rb) b *= static_cast<int64_t>(sizeof(T));
  all_to_all_bytes(send, sb, recv, rb, purpose);
}

template <class T>
std::vector<int64_t> Communicator::all_to_all_v(const T* send,
                                                std::span<const int64_t> send_counts,
                                                std::vector<T>& recv, CommPurpose purpose) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<int64_t> recv_counts = exchange_counts(send_counts);
  int64_t total = 0;
  for (int64_t c : recv_counts) total += c;
  recv.resize(static_cast<size_t>(total));
  all_to_all_v(send, send_counts, recv.data(), recv_counts, purpose);
  return recv_counts;
}

MOK_NN_END
