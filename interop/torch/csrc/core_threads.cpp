#include "interop/torch/csrc/core_threads.h"

#include <memory>
#include <stdexcept>

#include "interop/torch/csrc/core_bridge.h"

namespace mok::torchext {

namespace {
std::unique_ptr<ThreadPool> pool;  // one thread until set_core_threads
}  // namespace

std::mutex& core_call_mutex() {
  static std::mutex m;
  return m;
}

ThreadPool& core_thread_pool() {
  if (!pool) pool = std::make_unique<ThreadPool>(1);
  return *pool;
}

void set_core_threads(int threads) {
  if (threads < 1) throw std::invalid_argument("mok_torch: threads must be at least 1");
  std::lock_guard lock(core_call_mutex());
  if (!pool || pool->threads() != threads) pool = std::make_unique<ThreadPool>(threads);
}

int core_threads() {
  std::lock_guard lock(core_call_mutex());
  return core_thread_pool().threads();
}

}  // namespace mok::torchext
