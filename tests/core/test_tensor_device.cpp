// Tensors with an element type and a device, views, retagging, the memory tracker by
// device, and execution contexts: what the one-model-two-backends design rests on. (The CUDA
// side is checked on a GPU machine by mok-gpu-check; here, what holds without one.)
#include <QtTest>

#include <cstring>
#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/tensor/memory_tracker.h"
#include "core/tensor/tensor.h"

using namespace mok;

class TestTensorDevice : public QObject {
  Q_OBJECT
 private slots:
  void elementTypesSizeTheirBytes() {
    MemoryTracker tracker;
    ScopedMemoryTracker track(tracker);
    Tensor a = Tensor::zeros({3, 5}, DType::i32, cpu_allocator(), MemTag{MemCategory::workspace, -1, ""});
    Tensor b = Tensor::empty({7}, DType::bf16, cpu_allocator(), MemTag{MemCategory::parameters, -1, ""});
    Tensor c({2, 2});  // `real`
    QCOMPARE(a.bytes(), int64_t(60));
    QCOMPARE(b.bytes(), int64_t(14));
    QCOMPARE(c.dtype(), kRealDType);
    QCOMPARE(tracker.live_bytes(MemCategory::parameters), int64_t(14));
    QCOMPARE(tracker.live_bytes(MemCategory::workspace), int64_t(60) + c.bytes());
    for (int i = 0; i < 15; ++i) QCOMPARE(a.data_as<int32_t>()[i], 0);
    QVERIFY(a.is_cpu());
    QCOMPARE(QString::fromStdString(b.describe()), QString("(7) bf16 on cpu"));
  }

  void hostAccessChecksTheElementType() {
    Tensor ids = Tensor::zeros({4}, DType::i32, cpu_allocator());
    try {
      (void)ids.data();  // `real` access to i32 data
      QFAIL("data() on an i32 tensor did not throw");
    } catch (const std::logic_error& e) {
      QVERIFY2(QString(e.what()).contains("i32"), e.what());
    }
    QVERIFY(ids.data_as<int32_t>() != nullptr);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, ids.ptr<float>());
  }

  void viewsShareStorageWithinBounds() {
    MemoryTracker tracker;
    ScopedMemoryTracker track(tracker);
    Tensor stack({3, 2, 4}, MemTag{MemCategory::parameters, -1, ""});  // three (2, 4) blocks
    const int64_t held = tracker.live_bytes(MemCategory::parameters);
    Tensor second = stack.view(8, {2, 4});
    QVERIFY(second.is_view());
    QCOMPARE(tracker.live_bytes(MemCategory::parameters), held);  // a view allocates nothing
    second[5] = real(7.5);
    QCOMPARE(stack[13], real(7.5));
    QVERIFY_THROWS_EXCEPTION(std::out_of_range, stack.view(20, {2, 4}));
    Tensor copy = second.clone(MemTag{});
    copy[5] = real(1);
    QCOMPARE(stack[13], real(7.5));  // a clone is a copy
    // The storage lives while a view of it does.
    stack.reset();
    QCOMPARE(tracker.live_bytes(MemCategory::parameters), held);
    QCOMPARE(second[5], real(7.5));
    second.reset();
    QCOMPARE(tracker.live_bytes(MemCategory::parameters), int64_t(0));
  }

  void retagMovesBytesBetweenCategoriesOnlyForSoleOwners() {
    MemoryTracker tracker;
    ScopedMemoryTracker track(tracker);
    Tensor x({16, 8});
    QCOMPARE(tracker.live_bytes(MemCategory::workspace), x.bytes());
    QVERIFY(x.retag(MemTag{MemCategory::saved_activations, 2, "mlp.down.input"}));
    QCOMPARE(tracker.live_bytes(MemCategory::workspace), int64_t(0));
    QCOMPARE(tracker.live_bytes(MemCategory::saved_activations), x.bytes());
    QCOMPARE(tracker.saved_by_layer_kind().at({2, "mlp.down.input"}).live, x.bytes());
    Tensor v = x.view(0, {8, 8});
    QVERIFY(!v.retag(MemTag{}));  // a view cannot
    QVERIFY(!x.retag(MemTag{}));  // nor the owner while a view shares the storage
    QCOMPARE(tracker.live_bytes(MemCategory::saved_activations), x.bytes());
    v.reset();
    x.reset();
    QCOMPARE(tracker.live_total(), int64_t(0));
  }

  void shareAsKeepsTheBytesOnceUnderTheNewTag() {
    MemoryTracker tracker;
    ScopedMemoryTracker track(tracker);
    Tensor x({16, 8});  // held by its producer (workspace) ...
    x[5] = real(2.5);
    Tensor kept = x.share_as(MemTag{MemCategory::saved_activations, 1, "attn_norm.input"});  // ... and kept
    QCOMPARE(kept.raw(), x.raw());  // no copy
    QCOMPARE(kept[5], real(2.5));
    QCOMPARE(tracker.live_bytes(MemCategory::workspace), int64_t(0));
    QCOMPARE(tracker.live_bytes(MemCategory::saved_activations), x.bytes());  // counted once
    x.reset();  // the producer lets go: the kept handle still holds the bytes
    QCOMPARE(tracker.live_bytes(MemCategory::saved_activations), kept.bytes());
    QCOMPARE(kept[5], real(2.5));
    kept.reset();
    QCOMPARE(tracker.live_total(), int64_t(0));
    // A view shares part of someone else's block: not handed out (the caller copies).
    Tensor base({4, 4});
    QVERIFY(base.view(4, {2, 4}).share_as(MemTag{}).empty());
  }

  void shareOrCloneSharesWhatItCanAndCopiesTheRest() {
    MemoryTracker tracker;
    ScopedMemoryTracker track(tracker);
    const MemTag kept_tag{MemCategory::saved_activations, 3, "moe.router.choice"};
    Tensor x({4, 4});
    x[7] = real(1.5);
    Tensor shared = x.share_or_clone(kept_tag);  // a whole block: the same bytes, counted once
    QCOMPARE(shared.raw(), x.raw());
    QCOMPARE(tracker.live_bytes(MemCategory::saved_activations), x.bytes());
    // a view: its own copy, under the tag, equal to the viewed elements
    Tensor view = x.view(4, {1, 4});
    Tensor copy = view.share_or_clone(kept_tag);
    QVERIFY(copy.raw() != view.raw());
    QCOMPARE(copy.shape(), view.shape());
    QCOMPARE(copy[3], real(1.5));
    QCOMPARE(tracker.live_bytes(MemCategory::saved_activations), x.bytes() + copy.bytes());
    // borrowed memory: copied, never shared
    float owned[2] = {4, 5};
    Tensor borrowed = Tensor::borrow(owned, {2}, DType::f32, cpu_allocator());
    Tensor from_borrowed = borrowed.share_or_clone(kept_tag);
    QVERIFY(from_borrowed.raw() != static_cast<void*>(owned));
    QCOMPARE(from_borrowed.data_as<float>()[1], 5.0f);
    // an empty tensor stays empty
    QVERIFY(Tensor().share_or_clone(kept_tag).empty());
  }

  void borrowedMemoryIsReadNotCountedKeptOrFreed() {
    MemoryTracker tracker;
    ScopedMemoryTracker track(tracker);
    float owned[6] = {1, 2, 3, 4, 5, 6};  // the caller's (e.g. a torch tensor's)
    {
      Tensor b = Tensor::borrow(owned, {2, 3}, DType::f32, cpu_allocator());
      QCOMPARE(b.raw(), static_cast<void*>(owned));
      QCOMPARE(b.data_as<float>()[4], 5.0f);
      QCOMPARE(tracker.live_total(), int64_t(0));
      // A layer that keeps it must copy: no retag, no shared handle; a clone is its own.
      QVERIFY(!b.retag(MemTag{MemCategory::saved_activations, 0, "x"}));
      QVERIFY(b.share_as(MemTag{}).empty());
      Tensor c = b.clone(MemTag{MemCategory::saved_activations, 0, "x"});
      QVERIFY(c.raw() != b.raw());
      QCOMPARE(tracker.live_bytes(MemCategory::saved_activations), int64_t(24));
      b.zero();  // writes go to the caller's memory
    }
    QCOMPARE(owned[2], 0.0f);  // still the caller's, not freed
    QCOMPARE(tracker.live_total(), int64_t(0));
  }

  void trackerKeepsDevicesApartAndTogether() {
    MemoryTracker t;
    const MemTag p{MemCategory::parameters, -1, ""};
    t.add(p, 100, DeviceType::cpu);
    t.add(p, 1000, DeviceType::cuda);
    QCOMPARE(t.live_bytes(MemCategory::parameters), int64_t(1100));
    QCOMPARE(t.live_bytes(MemCategory::parameters, DeviceType::cuda), int64_t(1000));
    QCOMPARE(t.live_total(DeviceType::cpu), int64_t(100));
    t.remove(p, 1000, DeviceType::cuda);
    QCOMPARE(t.peak_total(DeviceType::cuda), int64_t(1000));
    QCOMPARE(t.live_total(DeviceType::cuda), int64_t(0));
    t.reset_peaks();
    QCOMPARE(t.peak_total(DeviceType::cuda), int64_t(0));
    QCOMPARE(t.peak_total(), int64_t(100));
  }

  void hostCopiesRoundTrip() {
    Tensor t = Tensor::empty({5}, DType::i32, cpu_allocator());
    const int32_t in[5] = {3, -1, 4, 1, -5};
    t.copy_from_host(in, sizeof in);
    int32_t out[5] = {};
    t.copy_to_host(out, sizeof out);
    QVERIFY(std::memcmp(in, out, sizeof in) == 0);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, t.copy_from_host(in, 4));
  }

  void contextsNestPerThreadAndDefaultToTheCpu() {
    QVERIFY(ExecContext::current().is_cpu());
    QCOMPARE(ExecContext::current().compute_dtype(), kRealDType);
    auto mine = make_exec_context(Device::cpu(), kRealDType);
    {
      ScopedExecContext scope(*mine);
      QCOMPARE(&ExecContext::current(), mine.get());
      Tensor a = ExecContext::current().activation({2, 3});
      QCOMPARE(a.dtype(), kRealDType);
      QVERIFY(a.is_cpu());
    }
    QCOMPARE(&ExecContext::current(), &cpu_context());
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, make_exec_context(Device::cpu(), DType::bf16));
  }

  void devicesListTheCpuAndSayWhyNoGpu() {
    const auto devices = list_devices();
    QVERIFY(!devices.empty());
    QVERIFY(devices.front().device.is_cpu());
    // No CUDA backend is registered in this test program: the reason says so, and asking for
    // a GPU fails with it instead of crashing.
    const std::string why = device_unavailable_reason(DeviceType::cuda);
    QVERIFY(!why.empty());
    try {
      make_exec_context(Device::cuda(0), DType::bf16);
      QFAIL("a CUDA context without a backend");
    } catch (const std::runtime_error& e) {
      QVERIFY2(QString(e.what()).contains(QString::fromStdString(why)), e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestTensorDevice)
#include "test_tensor_device.moc"
