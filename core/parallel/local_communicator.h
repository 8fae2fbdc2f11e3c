#pragma once
// LocalCommunicator: R ranks as threads of one process (workbench runs and tests).
//
// The ranks share a LocalCommGroup: one mailbox per rank (where its current outgoing
// messages lie) and a barrier. An exchange is: post the mailbox, barrier, every rank copies
// the messages addressed to it out of the senders' buffers, barrier (so no sender frees or
// overwrites a buffer that is still being read). Copies are plain memcpy: the delivered bytes
// are exactly the sent ones.
//
// run_local_ranks(R, fn) starts R threads, each with its own LocalCommunicator, and returns
// when all are done. If a rank throws, the group is aborted (ranks waiting in a collective
// get CommAborted), every thread is joined and the first real exception is rethrown.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/parallel/communicator.h"
#include "core/real.h"

MOK_NN_BEGIN

class LocalCommGroup {
 public:
  explicit LocalCommGroup(int ranks);
  int size() const { return ranks_; }

  // Waits until every rank has arrived; throws CommAborted if the group is aborted.
  void arrive_and_wait();
  // Wakes every waiting rank with CommAborted, now and in every later collective, and runs
  // the abort hooks (once).
  void abort();
  bool aborted() const;
  void add_abort_hook(const void* owner, std::function<void()> hook);
  void remove_abort_hook(const void* owner);  // waits while the hooks run

  // Mailbox of rank r during an exchange: per-peer message pointers and sizes.
  struct Mailbox {
    const uint8_t* const* send = nullptr;
    const int64_t* send_bytes = nullptr;
  };
  Mailbox& mailbox(int rank) { return mailboxes_[rank]; }

 private:
  const int ranks_;
  std::vector<Mailbox> mailboxes_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::mutex hooks_mutex_;  // held while hooks run, so that removing one waits for them
  std::vector<std::pair<const void*, std::function<void()>>> hooks_;
  bool hooks_ran_ = false;
};

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalCommGroup> group, int rank);
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  const char* kind() const override { return "local"; }
  void add_abort_hook(const void* owner, std::function<void()> hook) override {
    group_->add_abort_hook(owner, std::move(hook));
  }
  void remove_abort_hook(const void* owner) override { group_->remove_abort_hook(owner); }
  void abort_group() override { group_->abort(); }

 protected:
  void exchange(const uint8_t* const* send, const int64_t* send_bytes, uint8_t* const* recv,
                const int64_t* recv_bytes) override;
  void barrier_impl() override { group_->arrive_and_wait(); }

 private:
  std::shared_ptr<LocalCommGroup> group_;
  int rank_;
};

// Runs fn(comm) on R threads, one per rank (rank = comm.rank()), every communicator with
// the given link model. Rethrows the first exception a rank raised.
void run_local_ranks(int ranks, const std::function<void(Communicator&)>& fn,
                     const LinkModel& link = {});

MOK_NN_END
