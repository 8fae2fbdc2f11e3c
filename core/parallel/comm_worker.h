#pragma once
// CommWorker: runs a rank's collectives on one background thread, in submission order, so
// that transfers overlap the compute the rank does meanwhile (MokDispatcher's chunks).
//
//   CommWorker w(threaded);
//   auto t0 = w.submit([&] { comm.all_to_all_v(...); });   // returns at once
//   ... compute ...
//   w.wait(t0);      // the job is done (its exception, if any, is rethrown here)
//   w.drain();       // every job submitted so far is done
//
// Determinism: jobs run one at a time in the order submitted, so every rank issues its
// collectives in the same order as long as every rank submits the same sequence (the
// caller's duty, as with blocking calls). The Communicator is used by one thread at a
// time: the caller must not call it itself between submit and drain.
//
// threaded = false runs each job inside submit (same order, same bits, no overlap): for
// transports that allow collectives only from the main thread (MPI without
// MPI_THREAD_SERIALIZED).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "core/real.h"

MOK_NN_BEGIN

class CommWorker {
 public:
  explicit CommWorker(bool threaded = true);
  ~CommWorker();  // drains, then stops the thread
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  using Ticket = int64_t;
  Ticket submit(std::function<void()> job);
  void wait(Ticket ticket);  // rethrows the first failure of any job up to `ticket`
  void drain();              // waits for everything submitted; rethrows a failure
  bool threaded() const { return threaded_ && !inline_; }
  // While on, jobs run inside submit even on a threaded worker (a step too small to gain
  // from overlap saves the two thread hand-offs per exchange). Only while nothing is pending.
  void set_inline(bool on);

 private:
  void loop();

  const bool threaded_;
  bool inline_ = false;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::function<void()>> queue_;
  Ticket submitted_ = 0, finished_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
};

MOK_NN_END
