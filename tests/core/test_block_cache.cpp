// The host's block cache: reserved bytes are live blocks plus cached ones and never fewer than
// what tensors hold; a freed large block serves a request of another size, so the peak of
// reserved bytes is the peak of live ones; trim gives the cache back.
#include <QtTest>

#include <cstring>
#include <vector>

#include "core/tensor/allocator.h"
#include "core/tensor/block_cache.h"
#include "core/tensor/memory_tracker.h"
#include "core/tensor/tensor.h"

using namespace mok;

namespace {
constexpr int64_t kMiB = int64_t(1) << 20;

// A block written through, so its pages are really taken.
void* take(int64_t bytes) {
  void* p = BlockCache::allocate(bytes);
  std::memset(p, 0x5a, static_cast<size_t>(bytes));
  return p;
}
}  // namespace

class TestBlockCache : public QObject {
  Q_OBJECT
 private slots:
  void init() { BlockCache::trim(); }

  void reservedIsLivePlusCachedAndCoversTheTracker() {
    MemoryTracker tracker;
    ScopedMemoryTracker track(tracker);
    const int64_t before = BlockCache::live_bytes();
    {
      Tensor a({1000, 300});  // 1.2 MB: a large block
      Tensor b({17});         // a small one
      Tensor c({3, 5000});
      QVERIFY(BlockCache::live_bytes() - before >= tracker.live_total());
      QCOMPARE(BlockCache::reserved_bytes(), BlockCache::live_bytes() + BlockCache::cached_bytes());
      QCOMPARE(cpu_allocator().reserved_bytes(), BlockCache::reserved_bytes());
      QCOMPARE(cpu_allocator().cached_bytes(), BlockCache::cached_bytes());
    }
    QCOMPARE(tracker.live_total(), int64_t(0));
    QCOMPARE(BlockCache::live_bytes(), before);
    QVERIFY(BlockCache::cached_bytes() >= BlockCache::block_bytes(1000 * 300 * int64_t(sizeof(real))));
    QVERIFY(cpu_allocator().peak_reserved_bytes() >= BlockCache::reserved_bytes());
  }

  void freedLargeBlockServesAnotherSize() {
    if (!BlockCache::reuses_across_sizes()) QSKIP("freed blocks serve their own size class only here");
    const int64_t base = BlockCache::reserved_bytes();
    void* a = take(8 * kMiB);
    BlockCache::release(a, 8 * kMiB);
    QCOMPARE(BlockCache::reserved_bytes() - base, 8 * kMiB);
    BlockCache::reset_peak_reserved();

    // Smaller, of another class: made of the freed block's pages, the rest stays cached.
    void* b = take(5 * kMiB + 4096);
    QCOMPARE(BlockCache::reserved_bytes() - base, 8 * kMiB);
    // Larger: the cache's pages first, then only what is missing.
    void* c = take(12 * kMiB);
    QCOMPARE(BlockCache::reserved_bytes() - base,
             BlockCache::block_bytes(5 * kMiB + 4096) + BlockCache::block_bytes(12 * kMiB));
    QCOMPARE(BlockCache::cached_bytes(), int64_t(0));
    QCOMPARE(BlockCache::peak_reserved_bytes(), BlockCache::reserved_bytes());
    BlockCache::release(b, 5 * kMiB + 4096);
    BlockCache::release(c, 12 * kMiB);
  }

  void peakReservedIsPeakLiveWhenSizesChange() {
    if (!BlockCache::reuses_across_sizes()) QSKIP("freed blocks serve their own size class only here");
    QCOMPARE(BlockCache::cached_bytes(), int64_t(0));  // init() trimmed
    BlockCache::reset_peak_reserved();
    int64_t peak_live = BlockCache::live_bytes();
    // Two "steps" of a forward with one set of sizes and a backward with another (what kitten
    // activations do: full-size temporaries, then quantized copies and other gradients).
    for (int step = 0; step < 2; ++step) {
      std::vector<std::pair<void*, int64_t>> held;
      for (int64_t mib : {3, 7, 2, 9}) held.push_back({take(mib * kMiB + 12288), mib * kMiB + 12288});
      peak_live = std::max(peak_live, BlockCache::live_bytes());
      for (auto& [p, n] : held) BlockCache::release(p, n);
      held.clear();
      for (int64_t kib : {5000, 640, 11000, 2300, 900}) {
        held.push_back({take(kib * 1024), kib * 1024});
        peak_live = std::max(peak_live, BlockCache::live_bytes());
      }
      for (auto& [p, n] : held) BlockCache::release(p, n);
    }
    // Reserved bytes grew only while the cache was empty, so never past the live peak.
    QCOMPARE(BlockCache::peak_reserved_bytes(), peak_live);
  }

  // The live blocks' peak: what a memory limit binds (the cache is given back first).
  void peakLiveFollowsTheLiveBlocks() {
    BlockCache::reset_peak_reserved();
    QCOMPARE(BlockCache::peak_live_bytes(), BlockCache::live_bytes());
    const int64_t base = BlockCache::live_bytes();
    void* a = take(3 * kMiB);
    void* b = take(5000);
    const int64_t top = BlockCache::live_bytes();
    QCOMPARE(top - base, BlockCache::block_bytes(3 * kMiB) + BlockCache::block_bytes(5000));
    BlockCache::release(a, 3 * kMiB);
    void* c = take(1000);  // less than what was freed: the peak stays
    QCOMPARE(BlockCache::peak_live_bytes(), top);
    QCOMPARE(cpu_allocator().peak_live_block_bytes(), top);
    QVERIFY(BlockCache::peak_reserved_bytes() >= BlockCache::peak_live_bytes());
    BlockCache::reset_peak_reserved();  // a new step: the peak starts again from what is live
    QCOMPARE(BlockCache::peak_live_bytes(), base + BlockCache::block_bytes(5000) + BlockCache::block_bytes(1000));
    BlockCache::release(b, 5000);
    BlockCache::release(c, 1000);
    QCOMPARE(BlockCache::live_bytes(), base);
  }

  void trimGivesTheCacheBack() {
    void* a = take(2 * kMiB);
    void* b = take(1000);
    const int64_t live = BlockCache::live_bytes();
    BlockCache::release(a, 2 * kMiB);
    BlockCache::release(b, 1000);
    QVERIFY(BlockCache::cached_bytes() >= 2 * kMiB);
    BlockCache::trim();
    QCOMPARE(BlockCache::cached_bytes(), int64_t(0));
    QCOMPARE(BlockCache::reserved_bytes(), BlockCache::live_bytes());
    QCOMPARE(BlockCache::live_bytes(), live - BlockCache::block_bytes(2 * kMiB) - BlockCache::block_bytes(1000));
  }
};

QTEST_GUILESS_MAIN(TestBlockCache)
#include "test_block_cache.moc"
