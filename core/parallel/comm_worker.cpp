#include "core/parallel/comm_worker.h"

#include <stdexcept>

MOK_NN_BEGIN

CommWorker::CommWorker(bool threaded) : threaded_(threaded) {}

CommWorker::~CommWorker() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return finished_ == submitted_; });
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CommWorker::set_inline(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_ != submitted_) throw std::logic_error("CommWorker::set_inline with jobs pending");
  inline_ = on;
}

CommWorker::Ticket CommWorker::submit(std::function<void()> job) {
  if (!threaded_ || inline_) {
    const Ticket t = ++submitted_;
    if (!error_) {
      try {
        job();
      } catch (...) {
        error_ = std::current_exception();
      }
    }
    finished_ = t;
    return t;
  }
  Ticket t;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    queue_.push_back(std::move(job));
    t = ++submitted_;
  }
  wake_.notify_one();
  return t;
}

void CommWorker::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    // After a failure the remaining jobs are skipped: their inputs may depend on it, and
    // the failure is reported to the caller at the next wait.
    const bool skip = error_ != nullptr;
    lock.unlock();
    std::exception_ptr failure;
    if (!skip) {
      try {
        job();
      } catch (...) {
        failure = std::current_exception();
      }
    }
    lock.lock();
    if (failure && !error_) error_ = failure;
    ++finished_;
    done_.notify_all();
  }
}

void CommWorker::wait(Ticket ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return finished_ >= ticket; });
  if (error_) {
    // Report once; the worker keeps skipping until drained, then accepts new jobs.
    done_.wait(lock, [&] { return finished_ == submitted_; });
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void CommWorker::drain() {
  Ticket t;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    t = submitted_;
  }
  wait(t);
}

MOK_NN_END
