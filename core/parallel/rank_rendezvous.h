#pragma once
// RankRendezvous: where the R rank threads of one process meet to swap small records (a data
// plane's buffer addresses, offers and events; kernels/peer_data_plane.h), without copying data.
//
//   const std::vector<Post>& all = rendezvous.post(rank, mine);   // every rank's post, this round
//
// post() returns once every rank has posted in this round. Rounds alternate between two sets of
// posts, so a rank may read what post() returned until it posts again: the set is next written
// in the round after next, which no rank can enter before this rank has posted in the next.
// abort() (a rank failed) makes every waiting and later post() throw CommAborted.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "core/parallel/communicator.h"

MOK_NN_BEGIN

template <class Post>
class RankRendezvous {
 public:
  explicit RankRendezvous(int ranks) : ranks_(ranks) {
    for (auto& set : posts_) set.resize(static_cast<size_t>(ranks));
  }
  RankRendezvous(const RankRendezvous&) = delete;
  RankRendezvous& operator=(const RankRendezvous&) = delete;

  int ranks() const { return ranks_; }

  const std::vector<Post>& post(int rank, Post mine) {
    std::unique_lock lock(mutex_);
    if (aborted_) throw CommAborted("the run was aborted because another rank failed");
    const int64_t round = round_;
    std::vector<Post>& set = posts_[round & 1];
    set[static_cast<size_t>(rank)] = std::move(mine);
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      ++round_;
      wake_.notify_all();
    } else {
      wake_.wait(lock, [&] { return round_ != round || aborted_; });
      if (round_ == round) throw CommAborted("the run was aborted because another rank failed");
    }
    return set;
  }

  void abort() {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    wake_.notify_all();
  }

 private:
  const int ranks_;
  std::mutex mutex_;
  std::condition_variable wake_;
  int arrived_ = 0;
  int64_t round_ = 0;
  bool aborted_ = false;
  std::vector<Post> posts_[2];
};

MOK_NN_END
