// Sizes as people write them (core/util/byte_size.h), and the memory limit that uses them:
// the allocation that would pass the limit is refused before anything is taken, with a
// message naming what it was for and what is held.
#include <QtTest>

#include <string>

#include "core/tensor/memory_tracker.h"
#include "core/tensor/tensor.h"
#include "core/util/byte_size.h"

using namespace mok;

class TestByteSize : public QObject {
  Q_OBJECT
 private slots:
  void parsesUnitsAndRefusesTheRest() {
    QCOMPARE(parse_byte_size("16GiB").value_or(-1), int64_t(16) << 30);
    QCOMPARE(parse_byte_size(" 512 MiB ").value_or(-1), int64_t(512) << 20);
    QCOMPARE(parse_byte_size("24GB").value_or(-1), int64_t(24'000'000'000));
    QCOMPARE(parse_byte_size("1.5gib").value_or(-1), int64_t(3) << 29);
    QCOMPARE(parse_byte_size("4096").value_or(-1), int64_t(4096));
    QCOMPARE(parse_byte_size("7 B").value_or(-1), int64_t(7));
    for (const char* bad : {"", "GiB", "16 gigs", "-1GiB", "1.2.3MiB", "1e30TiB", ".", "16 G iB"})
      QVERIFY2(!parse_byte_size(bad).has_value(), bad);
    QCOMPARE(QString::fromStdString(format_byte_size(int64_t(16) << 30)), QString("16 GiB"));
    QCOMPARE(QString::fromStdString(format_byte_size(int64_t(3) << 29)), QString("1.5 GiB"));
    QCOMPARE(QString::fromStdString(format_byte_size(300)), QString("300 B"));
  }

  void theAllocationPastTheLimitIsRefusedAndNamed() {
    MemoryTracker tracker;
    ScopedMemoryTracker track(tracker);
    tracker.set_limit(DeviceType::cpu, int64_t(1) << 20);  // 1 MiB
    Tensor params({100'000}, MemTag{MemCategory::parameters, -1, ""});  // 400 kB (float)
    Tensor more({100'000}, MemTag{MemCategory::parameters, -1, ""});
    const int64_t held = tracker.live_total(DeviceType::cpu);
    try {
      Tensor saved({100'000}, MemTag{MemCategory::saved_activations, 3, "mlp.down.input"});
      QFAIL("an allocation past the limit was made");
    } catch (const MemoryLimitExceeded& e) {
      const QString what = e.what();
      QVERIFY2(what.contains("1 MiB on the CPU"), e.what());
      QVERIFY2(what.contains("saved activations (layer 3, mlp.down.input)"), e.what());
      QVERIFY2(what.contains("parameters "), e.what());
    }
    QCOMPARE(tracker.live_total(DeviceType::cpu), held);  // nothing was taken
    tracker.set_limit(DeviceType::cpu, 0);                // no limit
    Tensor saved({100'000}, MemTag{MemCategory::saved_activations, 3, "mlp.down.input"});
    QVERIFY(tracker.live_total(DeviceType::cpu) > held);
  }
};

QTEST_GUILESS_MAIN(TestByteSize)
#include "test_byte_size.moc"
