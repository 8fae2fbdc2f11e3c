#pragma once
// Interrupting a step in progress: a stop request (SIGINT, SIGTERM, the workbench's Stop)
// abandons the step at its next check point instead of waiting for the step to end. An
// abandoned step applies no update — the weights and optimizer state stay those of the
// last completed step — so what is saved afterwards is whole.
//
//   StepCancellation cancel(&stop_flag);   // a view of the trainer's lock-free stop flag
//   cancel.check();                        // throws StepCancelled once the flag is set
//
// A check point may also run a watcher first (the trainer's slow-step warning), on the
// thread that runs the step.
//
// Check points: before each transformer block and the head in forward and backward
// (LanguageModel::set_block_boundary), before each micro-batch after the first, before the
// gradient sync and optimizer update, and between validation batches. Single-rank runs
// only: with R > 1 every rank must abandon at the same point, so ranks stop between steps (a
// broadcast).

#include <atomic>
#include <functional>
#include <stdexcept>

namespace mok {

class StepCancelled : public std::runtime_error {
 public:
  StepCancelled() : std::runtime_error("step abandoned: a stop was requested") {}
};

class StepCancellation {
 public:
  StepCancellation() = default;  // never cancels
  explicit StepCancellation(const std::atomic<bool>* flag, const std::function<void()>* watcher = nullptr)
      : flag_(flag), watcher_(watcher) {}

  bool requested() const { return flag_ && flag_->load(std::memory_order_relaxed); }
  void check() const {
    if (watcher_ && *watcher_) (*watcher_)();
    if (requested()) throw StepCancelled();
  }

 private:
  const std::atomic<bool>* flag_ = nullptr;     // null: never cancels
  const std::function<void()>* watcher_ = nullptr;  // outlives every copy; may be null
};

}  // namespace mok
