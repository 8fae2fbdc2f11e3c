#include "core/parallel/local_communicator.h"

#include <cstring>
#include <exception>
#include <string>
#include <thread>

MOK_NN_BEGIN

LocalCommGroup::LocalCommGroup(int ranks) : ranks_(ranks) {
  if (ranks < 1) throw std::invalid_argument("LocalCommGroup: ranks must be >= 1");
  mailboxes_.resize(static_cast<size_t>(ranks));
}

void LocalCommGroup::arrive_and_wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) throw CommAborted("local communicator: another rank failed");
  const uint64_t gen = generation_;
  if (++arrived_ == ranks_) {
    arrived_ = 0;
    generation_++;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) throw CommAborted("local communicator: another rank failed");
}

void LocalCommGroup::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  if (hooks_ran_) return;
  hooks_ran_ = true;
  for (auto& [owner, hook] : hooks_) {
    try {
      hook();
    } catch (...) {
      // A hook that fails has nothing left to save; the others still run.
    }
  }
}

void LocalCommGroup::add_abort_hook(const void* owner, std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  hooks_.emplace_back(owner, std::move(hook));
}

void LocalCommGroup::remove_abort_hook(const void* owner) {
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  std::erase_if(hooks_, [owner](const auto& h) { return h.first == owner; });
}

bool LocalCommGroup::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

LocalCommunicator::LocalCommunicator(std::shared_ptr<LocalCommGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {
  if (!group_) throw std::invalid_argument("LocalCommunicator: no group");
  if (rank < 0 || rank >= group_->size())
    throw std::invalid_argument("LocalCommunicator: rank out of range");
  init_stats(group_->size(), rank);
}

void LocalCommunicator::exchange(const uint8_t* const* send, const int64_t* send_bytes,
                                 uint8_t* const* recv, const int64_t* recv_bytes) {
  const int R = group_->size();
  group_->mailbox(rank_) = {send, send_bytes};
  group_->arrive_and_wait();  // every mailbox is posted
  std::string mismatch;
  for (int s = 0; s < R; ++s) {
    const LocalCommGroup::Mailbox& box = group_->mailbox(s);
    const int64_t n = box.send_bytes[rank_];
    if (n != recv_bytes[s]) {
      mismatch = "local communicator: rank " + std::to_string(rank_) + " expected " +
                 std::to_string(recv_bytes[s]) + " bytes from rank " + std::to_string(s) +
                 ", which sent " + std::to_string(n);
      break;
    }
    if (n > 0) std::memcpy(recv[s], box.send[rank_], static_cast<size_t>(n));
  }
  // Every copy is done; buffers may change again. A rank that found a mismatch waits here
  // too before it throws: until every rank has passed, another may still be reading this
  // rank's mailbox, whose buffers unwinding would free.
  try {
    group_->arrive_and_wait();
  } catch (const CommAborted&) {
    if (mismatch.empty()) throw;
  }
  if (!mismatch.empty()) throw std::runtime_error(mismatch);
}

void run_local_ranks(int ranks, const std::function<void(Communicator&)>& fn,
                     const LinkModel& link) {
  auto group = std::make_shared<LocalCommGroup>(ranks);
  std::mutex error_mutex;
  std::exception_ptr first_error, abort_error;
  auto body = [&](int r) {
    try {
      LocalCommunicator comm(group, r);
      comm.set_link(link);
      fn(comm);
    } catch (const CommAborted&) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!abort_error) abort_error = std::current_exception();
      group->abort();
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
      group->abort();
    }
  };
  if (ranks == 1) {
    body(0);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) threads.emplace_back(body, r);
    for (auto& t : threads) t.join();
  }
  if (first_error) std::rethrow_exception(first_error);
  if (abort_error) std::rethrow_exception(abort_error);
}

MOK_NN_END
