// MemoryPeaks: the running maxima a metric row reports — taken from the tracker after each
// step, and merged with the recorded step's figures for steps replayed from a CUDA graph
// (which allocate nothing, so the tracker alone would report only what stays live).
#include <QtTest>

#include "core/backend/exec_context.h"
#include "core/tensor/memory_tracker.h"
#include "core/train/memory_peaks.h"

using namespace mok;

class TestMemoryPeaks : public QObject {
  Q_OBJECT
 private slots:
  void takeKeepsTheLargestOfEachFigure() {
    MemoryTracker t;
    const MemTag saved{MemCategory::saved_activations, 2, "attn.qkv"};
    const MemTag work{MemCategory::workspace, -1, ""};
    MemoryPeaks p;
    t.add(saved, 1000);
    t.add(work, 500);
    p.take(t, cpu_context().allocator());
    QCOMPARE(p.total, int64_t(1500));
    QCOMPARE(p.saved, int64_t(1000));
    QCOMPARE(p.saved_by_kind[std::make_pair(2, std::string("attn.qkv"))], int64_t(1000));
    t.remove(saved, 1000);
    t.remove(work, 500);
    t.reset_peaks();
    t.add(work, 200);
    p.take(t, cpu_context().allocator());  // a smaller step: the row keeps the larger
    QCOMPARE(p.total, int64_t(1500));
    QCOMPARE(p.saved, int64_t(1000));
  }

  void mergeKeepsTheLargerOfEitherSide() {
    MemoryPeaks replay;  // what the tracker saw in a replayed step: only what stays live
    replay.total = 300;
    replay.reserved = 4096;
    replay.saved_by_kind[{-1, "ce.grad"}] = 50;
    MemoryPeaks recorded;  // the recorded step's figures
    recorded.total = 1500;
    recorded.saved = 1000;
    recorded.reserved = 2048;
    recorded.saved_by_kind[{2, "attn.qkv"}] = 1000;
    replay.merge(recorded);
    QCOMPARE(replay.total, int64_t(1500));
    QCOMPARE(replay.saved, int64_t(1000));
    QCOMPARE(replay.reserved, int64_t(4096));
    QCOMPARE(replay.saved_by_kind.size(), size_t(2));
    QCOMPARE(replay.saved_by_kind[std::make_pair(2, std::string("attn.qkv"))], int64_t(1000));
    QCOMPARE(replay.saved_by_kind[std::make_pair(-1, std::string("ce.grad"))], int64_t(50));
    replay.clear();
    QCOMPARE(replay.total, int64_t(0));
    QCOMPARE(replay.saved_by_kind[std::make_pair(2, std::string("attn.qkv"))], int64_t(0));
  }
};

QTEST_APPLESS_MAIN(TestMemoryPeaks)
#include "test_memory_peaks.moc"
