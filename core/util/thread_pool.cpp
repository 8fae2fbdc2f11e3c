#include "core/util/thread_pool.h"

#include <stdexcept>

namespace mok {

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) throw std::invalid_argument("ThreadPool: threads must be >= 1");
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    while (next_ < tasks_) {
      const int64_t i = next_++;
      const auto* task = task_;
      lock.unlock();
      (*task)(i);
      lock.lock();
      if (++finished_ == tasks_) done_.notify_all();
    }
  }
}

void ThreadPool::run(int64_t tasks, const std::function<void(int64_t)>& task) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (int64_t i = 0; i < tasks; ++i) task(i);
    return;
  }
  std::unique_lock lock(mutex_);
  task_ = &task;
  tasks_ = tasks;
  next_ = 0;
  finished_ = 0;
  ++generation_;
  wake_.notify_all();
  while (next_ < tasks_) {  // the caller works too
    const int64_t i = next_++;
    lock.unlock();
    task(i);
    lock.lock();
    ++finished_;
  }
  done_.wait(lock, [&] { return finished_ == tasks_; });
  task_ = nullptr;
  tasks_ = 0;
}

namespace {
thread_local ThreadPool* t_pool = nullptr;
ThreadPool& single_thread_pool() {
  thread_local ThreadPool pool(1);
  return pool;
}
}  // namespace

ThreadPool& ThreadPool::current() { return t_pool ? *t_pool : single_thread_pool(); }
void ThreadPool::set_current(ThreadPool* pool) { t_pool = pool; }

ScopedThreadPool::ScopedThreadPool(ThreadPool& pool) : previous_(t_pool) { t_pool = &pool; }
ScopedThreadPool::~ScopedThreadPool() { t_pool = previous_; }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t chunks = (n + grain - 1) / grain;
  ThreadPool& pool = ThreadPool::current();
  if (chunks == 1 || pool.threads() == 1) {
    for (int64_t c = 0; c < chunks; ++c) fn(c * grain, std::min(n, (c + 1) * grain));
    return;
  }
  pool.run(chunks, [&](int64_t c) { fn(c * grain, std::min(n, (c + 1) * grain)); });
}

double parallel_sum(int64_t n, int64_t grain, const std::function<double(int64_t, int64_t)>& fn) {
  if (n <= 0) return 0.0;
  if (grain < 1) grain = 1;
  const int64_t chunks = (n + grain - 1) / grain;
  std::vector<double> partial(chunks, 0.0);
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) partial[c] = fn(c * grain, std::min(n, (c + 1) * grain));
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace mok
