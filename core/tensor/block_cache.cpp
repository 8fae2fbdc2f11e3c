#include "core/tensor/block_cache.h"

#include "core/tensor/allocator.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

MOK_NN_BEGIN

namespace {

constexpr int64_t kAlignBytes = 64;  // cache line; also what AVX-512 loads like

// Request rounded up to its size class: multiples of 64 up to 4 KiB, then eight classes per
// power of two (waste ≤ 1/8), so expert batches whose row count changes a little each step
// still find a block.
int64_t size_class(int64_t bytes) {
  if (bytes <= 4096) return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  int64_t p = 4096;
  while (p * 2 <= bytes) p *= 2;
  const int64_t step = p / 8;
  return (bytes + step - 1) / step * step;
}

struct CacheState {
  std::mutex mutex;
  std::unordered_map<int64_t, std::vector<void*>> free_by_class;
  int64_t cached = 0;
  int64_t limit = int64_t(1) << 30;
};

// Never destroyed: tensors with static storage may be freed after any static destructor.
CacheState& state() {
  static CacheState* s = new CacheState;
  return *s;
}

}  // namespace

void* BlockCache::allocate(int64_t bytes) {
  const int64_t cls = size_class(bytes);
  CacheState& s = state();
  {
    std::lock_guard lock(s.mutex);
    auto it = s.free_by_class.find(cls);
    if (it != s.free_by_class.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      s.cached -= cls;
      return block;
    }
  }
  void* block = std::aligned_alloc(kAlignBytes, static_cast<size_t>(cls));
  if (!block) throw std::bad_alloc();
  return block;
}

void BlockCache::release(void* block, int64_t bytes) {
  if (!block) return;
  const int64_t cls = size_class(bytes);
  CacheState& s = state();
  {
    std::lock_guard lock(s.mutex);
    if (s.cached + cls <= s.limit) {
      s.free_by_class[cls].push_back(block);
      s.cached += cls;
      return;
    }
  }
  std::free(block);
}

int64_t BlockCache::cached_bytes() {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  return s.cached;
}

void BlockCache::set_limit(int64_t bytes) {
  bool over = false;
  {
    CacheState& s = state();
    std::lock_guard lock(s.mutex);
    s.limit = bytes < 0 ? 0 : bytes;
    over = s.cached > s.limit;
  }
  if (over) trim();
}

void BlockCache::trim() {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  for (auto& [cls, blocks] : s.free_by_class)
    for (void* b : blocks) std::free(b);
  s.free_by_class.clear();
  s.cached = 0;
}

MOK_NN_END

MOK_NN_BEGIN

namespace {

// The host's Allocator: blocks from the cache; fills and copies are plain memory operations.
class CpuAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu(); }
  void* allocate(int64_t bytes) override { return BlockCache::allocate(bytes); }
  void release(void* block, int64_t bytes) override { BlockCache::release(block, bytes); }
  void memset(void* p, int value, int64_t bytes) override { std::memset(p, value, static_cast<size_t>(bytes)); }
  void copy_to_host(void* dst, const void* src, int64_t bytes) override { std::memcpy(dst, src, static_cast<size_t>(bytes)); }
  void copy_from_host(void* dst, const void* src, int64_t bytes) override { std::memcpy(dst, src, static_cast<size_t>(bytes)); }
  void copy_within(void* dst, const void* src, int64_t bytes) override { std::memcpy(dst, src, static_cast<size_t>(bytes)); }
  int64_t cached_bytes() const override { return BlockCache::cached_bytes(); }
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator* allocator = new CpuAllocator;  // never destroyed, like the cache
  return *allocator;
}

MOK_NN_END
