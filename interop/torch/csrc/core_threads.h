#pragma once
// The thread pool every bridge call runs the core's parallel_for on: one for the process (the
// core's results do not depend on its size). Calls into the core are serialised: torch may
// call from any thread, and one pool runs one call's tasks at a time. Compiled once: it has
// no `real` in it.

#include <mutex>

#include "core/util/thread_pool.h"

namespace mok::torchext {

std::mutex& core_call_mutex();
ThreadPool& core_thread_pool();  // call with core_call_mutex held

// For the scope of one bridge call: the call lock, and the pool current on this thread.
class CoreCall {
 public:
  CoreCall() : lock_(core_call_mutex()), scope_(core_thread_pool()) {}

 private:
  std::lock_guard<std::mutex> lock_;
  ScopedThreadPool scope_;
};

}  // namespace mok::torchext
