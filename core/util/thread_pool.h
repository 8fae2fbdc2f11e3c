#pragma once
// ThreadPool and parallel_for with results independent of the thread count.
//
// parallel_for(n, grain, fn) splits [0, n) into fixed chunks of `grain` items (the split
// depends only on n and grain, never on the number of threads) and runs fn(begin, end) on
// each chunk. As long as fn writes disjoint outputs per chunk, or reductions combine the
// per-chunk partials in chunk order (see parallel_reduce), results are bitwise identical
// for any thread count.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mok {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1; the calling thread is one of them
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs task(i) for i in [0, tasks), spread over the pool; returns when all are done.
  void run(int64_t tasks, const std::function<void(int64_t)>& task);

  // The pool used by parallel_for on this thread (set per rank thread; default 1 thread).
  static ThreadPool& current();
  static void set_current(ThreadPool* pool);

 private:
  void worker_loop();
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t tasks_ = 0, next_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

class ScopedThreadPool {
 public:
  explicit ScopedThreadPool(ThreadPool& pool);
  ~ScopedThreadPool();

 private:
  ThreadPool* previous_;
};

// fn(begin, end) over fixed chunks of `grain` items of [0, n).
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Sum of fn(begin, end) over fixed chunks, added in chunk order: thread-count independent.
double parallel_sum(int64_t n, int64_t grain, const std::function<double(int64_t, int64_t)>& fn);

}  // namespace mok
