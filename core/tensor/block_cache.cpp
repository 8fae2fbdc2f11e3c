#include "core/tensor/block_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/tensor/allocator.h"
#include "core/tensor/size_class.h"

MOK_NN_BEGIN

namespace {

constexpr int64_t kAlignBytes = 64;  // cache line; also what AVX-512 loads like

// AddressSanitizer watches malloc'd blocks only: there large blocks come from malloc too, so
// a tensor overrun is still caught (the accounting is the same; freed blocks serve their own
// size class only).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMapLargeBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kMapLargeBlocks = false;
#else
constexpr bool kMapLargeBlocks = true;
#endif
#else
constexpr bool kMapLargeBlocks = true;
#endif

bool is_large(int64_t block_bytes) { return block_bytes >= BlockCache::kLargeBlockBytes; }

// Pages can move between blocks (mremap) where the page size divides every large size class.
bool pages_can_move() {
#if defined(__linux__) && defined(MREMAP_FIXED)
  static const bool ok = kMapLargeBlocks && ::sysconf(_SC_PAGESIZE) == 4096;
  return ok;
#else
  return false;
#endif
}

void* take_from_system(int64_t block_bytes) {
  if (kMapLargeBlocks && is_large(block_bytes)) {
    void* p = ::mmap(nullptr, static_cast<size_t>(block_bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  return std::aligned_alloc(kAlignBytes, static_cast<size_t>(block_bytes));
}

void give_to_system(void* block, int64_t block_bytes) {
  if (kMapLargeBlocks && is_large(block_bytes))
    ::munmap(block, static_cast<size_t>(block_bytes));
  else
    std::free(block);
}

// A mapped block: its address and bytes (a size class, or what is left of a block whose first
// pages went to another).
struct Mapped {
  void* block;
  int64_t bytes;
};

// A new block of `block_bytes` made of the pages of `donors` (cached large blocks, taken out of
// the cache), moved in place in order: their resident pages serve it with no page fault or
// zero-fill; past them it has fresh pages. Returns null if the system has no room. `rest`:
// what is left of the last donor when it was larger than needed (bytes 0 if none, or if too
// small to keep: then it went back to the system).
void* take_from_donors(int64_t block_bytes, std::vector<Mapped> donors, Mapped& rest) {
  rest = {nullptr, 0};
  void* block = take_from_system(block_bytes);
#if defined(__linux__) && defined(MREMAP_FIXED)
  int64_t filled = 0;
  for (Mapped& d : donors) {
    if (!block) break;
    const int64_t moved = std::min(d.bytes, block_bytes - filled);
    if (moved <= 0) break;
    auto* dst = static_cast<uint8_t*>(block) + filled;
    if (::mremap(d.block, static_cast<size_t>(moved), static_cast<size_t>(moved), MREMAP_MAYMOVE | MREMAP_FIXED, dst) ==
        MAP_FAILED)
      break;  // the donors left go back to the system below; the block keeps fresh pages
    if (moved < d.bytes) {
      rest = {static_cast<uint8_t*>(d.block) + moved, d.bytes - moved};
      if (!is_large(rest.bytes)) {
        ::munmap(rest.block, static_cast<size_t>(rest.bytes));
        rest = {nullptr, 0};
      }
    }
    d.bytes = 0;
    filled += moved;
  }
#endif
  for (const Mapped& d : donors)
    if (d.bytes > 0) give_to_system(d.block, d.bytes);
  return block;
}

struct CacheState {
  std::mutex mutex;
  std::unordered_map<int64_t, std::vector<void*>> small_free;  // size class → free blocks
  std::multimap<int64_t, void*> large_free;                     // bytes → free mapped block
  int64_t live = 0, cached = 0;  // block bytes
  int64_t peak_reserved = 0, peak_live = 0;
  int64_t limit = int64_t(1) << 30;

  // A free block of class `cls`, or null.
  void* pop_free(int64_t cls) {
    if (is_large(cls)) {
      auto it = large_free.find(cls);
      if (it == large_free.end()) return nullptr;
      void* block = it->second;
      large_free.erase(it);
      return block;
    }
    auto it = small_free.find(cls);
    if (it == small_free.end() || it->second.empty()) return nullptr;
    void* block = it->second.back();
    it->second.pop_back();
    return block;
  }

  // Cached large blocks whose pages make up `bytes`, taken out of the cache: each time the
  // largest that fits in what is still missing, else the smallest larger one.
  std::vector<Mapped> take_donors(int64_t bytes) {
    std::vector<Mapped> out;
    int64_t missing = bytes;
    while (missing > 0 && !large_free.empty()) {
      auto it = large_free.upper_bound(missing);
      if (it != large_free.begin()) --it;  // the largest ≤ missing
      out.push_back({it->second, it->first});
      cached -= it->first;
      missing -= std::min(missing, it->first);
      large_free.erase(it);
    }
    return out;
  }
};

// Never destroyed: tensors with static storage may be freed after any static destructor.
CacheState& state() {
  static CacheState* s = new CacheState;
  return *s;
}

}  // namespace

int64_t BlockCache::block_bytes(int64_t bytes) { return size_class_bytes(bytes, kAlignBytes); }

bool BlockCache::reuses_across_sizes() { return pages_can_move(); }

void* BlockCache::allocate(int64_t bytes) {
  const int64_t cls = block_bytes(bytes);
  CacheState& s = state();
  std::vector<Mapped> donors;
  {
    std::lock_guard lock(s.mutex);
    if (void* block = s.pop_free(cls)) {
      s.cached -= cls;
      s.live += cls;
      s.peak_live = std::max(s.peak_live, s.live);
      return block;
    }
    s.live += cls;
    if (is_large(cls) && pages_can_move()) donors = s.take_donors(cls);
    if (donors.empty()) s.peak_reserved = std::max(s.peak_reserved, s.live + s.cached);
  }
  Mapped rest{nullptr, 0};
  void* block = donors.empty() ? take_from_system(cls) : take_from_donors(cls, std::move(donors), rest);
  std::lock_guard lock(s.mutex);
  if (rest.bytes > 0) {
    s.large_free.emplace(rest.bytes, rest.block);
    s.cached += rest.bytes;
  }
  if (!block) {
    s.live -= cls;
    throw std::bad_alloc();
  }
  s.peak_reserved = std::max(s.peak_reserved, s.live + s.cached);
  s.peak_live = std::max(s.peak_live, s.live);
  return block;
}

void BlockCache::release(void* block, int64_t bytes) {
  if (!block) return;
  const int64_t cls = block_bytes(bytes);
  CacheState& s = state();
  {
    std::lock_guard lock(s.mutex);
    s.live -= cls;
    if (s.cached + cls <= s.limit) {
      if (is_large(cls))
        s.large_free.emplace(cls, block);
      else
        s.small_free[cls].push_back(block);
      s.cached += cls;
      return;
    }
  }
  give_to_system(block, cls);
}

int64_t BlockCache::live_bytes() {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  return s.live;
}

int64_t BlockCache::cached_bytes() {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  return s.cached;
}

int64_t BlockCache::reserved_bytes() {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  return s.live + s.cached;
}

int64_t BlockCache::peak_reserved_bytes() {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  return s.peak_reserved;
}

int64_t BlockCache::peak_live_bytes() {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  return s.peak_live;
}

void BlockCache::reset_peak_reserved() {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  s.peak_reserved = s.live + s.cached;
  s.peak_live = s.live;
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
  std::vector<Mapped> blocks;
  {
    std::lock_guard lock(s.mutex);
    for (auto& [cls, list] : s.small_free)
      for (void* b : list) blocks.push_back({b, cls});
    for (const auto& [n, b] : s.large_free) blocks.push_back({b, n});
    s.small_free.clear();
    s.large_free.clear();
    s.cached = 0;
  }
  for (const Mapped& m : blocks) give_to_system(m.block, m.bytes);
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
  int64_t reserved_bytes() const override { return BlockCache::reserved_bytes(); }
  int64_t peak_reserved_bytes() const override { return BlockCache::peak_reserved_bytes(); }
  int64_t peak_live_block_bytes() const override { return BlockCache::peak_live_bytes(); }
  void reset_peak_reserved() override { BlockCache::reset_peak_reserved(); }
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator* allocator = new CpuAllocator;  // never destroyed, like the cache
  return *allocator;
}

MOK_NN_END
