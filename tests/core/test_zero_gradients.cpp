// zero_gradients: one fill per run of gradients in one storage block (the stacked experts'
// views), nothing written outside the gradients, and no fill that spans two blocks.
#include <QtTest>

#include <vector>

#include "core/model/parameter.h"
#include "core/model/zero_gradients.h"
#include "core/tensor/tensor.h"

using namespace mok;

namespace {

// The host allocator, counting fills (CUDA refuses a fill across two allocations; this one
// records each fill's range so the test can see none crosses a block).
class CountingAllocator final : public Allocator {
 public:
  struct Fill {
    const uint8_t* p;
    int64_t bytes;
  };
  std::vector<Fill> fills;
  Device device() const override { return Device::cpu(); }
  void* allocate(int64_t bytes) override { return cpu_allocator().allocate(bytes); }
  void release(void* block, int64_t bytes) override { cpu_allocator().release(block, bytes); }
  void memset(void* p, int value, int64_t bytes) override {
    fills.push_back({static_cast<const uint8_t*>(p), bytes});
    cpu_allocator().memset(p, value, bytes);
  }
  void copy_to_host(void* d, const void* s, int64_t b) override { cpu_allocator().copy_to_host(d, s, b); }
  void copy_from_host(void* d, const void* s, int64_t b) override { cpu_allocator().copy_from_host(d, s, b); }
  void copy_within(void* d, const void* s, int64_t b) override { cpu_allocator().copy_within(d, s, b); }
  int64_t cached_bytes() const override { return cpu_allocator().cached_bytes(); }
  int64_t reserved_bytes() const override { return cpu_allocator().reserved_bytes(); }
  int64_t peak_reserved_bytes() const override { return cpu_allocator().peak_reserved_bytes(); }
  int64_t peak_live_block_bytes() const override { return cpu_allocator().peak_live_block_bytes(); }
  void reset_peak_reserved() override { cpu_allocator().reset_peak_reserved(); }
};

void fill_ones(Tensor& t) {
  std::vector<real> ones(static_cast<size_t>(t.numel()), real(1));
  t.copy_from_host(ones.data(), t.bytes());
}

bool all_equal(const Tensor& t, real v) {
  std::vector<real> host(static_cast<size_t>(t.numel()));
  t.copy_to_host(host.data(), t.bytes());
  for (real x : host)
    if (x != v) return false;
  return true;
}

}  // namespace

class TestZeroGradients : public QObject {
  Q_OBJECT
 private slots:
  void oneFillPerRunOfViews() {
    CountingAllocator alloc;
    // Four experts stacked (4, 3, 5); experts 0, 1 and 3 are parameters here (2 is another
    // rank's), plus a norm's gradient of its own and an empty one.
    Tensor stack = Tensor::empty({4, 3, 5}, kRealDType, alloc);
    Tensor norm = Tensor::empty({7}, kRealDType, alloc);
    fill_ones(stack);
    fill_ones(norm);
    std::vector<Parameter> p(5);
    for (int e : {0, 1, 3}) p[static_cast<size_t>(e == 3 ? 2 : e)].grad = stack.view(e * 15, {3, 5});
    p[3].grad = std::move(norm);
    // p[4] has no gradient
    std::vector<Parameter*> params{&p[3], &p[2], &p[0], &p[4], &p[1]};  // any order
    alloc.fills.clear();
    zero_gradients(params);

    for (int i : {0, 1, 2, 3}) QVERIFY2(all_equal(p[static_cast<size_t>(i)].grad, real(0)), "a gradient left unzeroed");
    QVERIFY2(all_equal(stack.view(2 * 15, {3, 5}), real(1)), "expert 2 is not a parameter here and was written");
    // Experts 0–1 in one fill, expert 3 in another, the norm in a third.
    QCOMPARE(alloc.fills.size(), size_t(3));
    const auto* base = static_cast<const uint8_t*>(stack.raw());
    const int64_t stack_bytes = stack.bytes();
    for (const auto& f : alloc.fills) {
      const bool in_stack = f.p >= base && f.p < base + stack_bytes;
      if (in_stack) QVERIFY2(f.p + f.bytes <= base + stack_bytes, "a fill crosses the stacked block's end");
    }
  }
};

QTEST_MAIN(TestZeroGradients)
#include "test_zero_gradients.moc"
