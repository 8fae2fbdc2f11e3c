// A CPU run's memory plan against the machine (core/plan/memory_fit.h): within its memory it
// runs, up to twice over it warns, beyond that it is refused, naming the plan's largest part
// and the keys that shrink it. Capacities are given here, so no result depends on this machine.
#include <QtTest>

#include <string>

#include "core/plan/memory_fit.h"
#include "core/plan/memory_plan.h"
#include "tests/support/tiny_experiment.h"

using namespace mok;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

}  // namespace

class TestMemoryFit : public QObject {
  Q_OBJECT
 private slots:
  void thresholdsSplitFitsWarnAndRefuse() {
    QCOMPARE(judge_memory_fit(8 * kGiB, 16 * kGiB), MemoryVerdict::fits);
    QCOMPARE(judge_memory_fit(16 * kGiB, 16 * kGiB), MemoryVerdict::fits);
    QCOMPARE(judge_memory_fit(16 * kGiB + 1, 16 * kGiB), MemoryVerdict::warn);
    QCOMPARE(judge_memory_fit(kMemoryRefuseFactor * 16 * kGiB, 16 * kGiB), MemoryVerdict::warn);
    QCOMPARE(judge_memory_fit(kMemoryRefuseFactor * 16 * kGiB + 1, 16 * kGiB), MemoryVerdict::refuse);
    // No capacity known: nothing to judge against.
    QCOMPARE(judge_memory_fit(1e18, 0.0), MemoryVerdict::fits);
  }

  void theTestsTinyRunFitsInOneGibibyte() {
    const ExperimentConfig c = test::tiny_experiment("corpus");
    const MemoryFit fit = host_memory_fit(c, 1 * kGiB);
    QCOMPARE(fit.verdict, MemoryVerdict::fits);
    QVERIFY(fit.message.empty());
    QVERIFY(fit.need_bytes > 0 && fit.need_bytes < 1 * kGiB);
  }

  void activationsBeyondTheMachineAreRefusedWithTheBatchThatFits() {
    ExperimentConfig c = test::tiny_experiment("corpus");
    c.data.seq_len = 1024;
    c.train.batch = 4096;
    const double need = estimate_memory(c).total_bytes();
    const MemoryFit fit = host_memory_fit(c, need / 4);
    QCOMPARE(fit.verdict, MemoryVerdict::refuse);
    QCOMPARE(QString::fromStdString(fit.largest_category), QString("saved_activations"));
    const int fits = largest_batch_that_fits(c, need / 4);
    QVERIFY(fits > 0 && fits < c.train.batch);
    QVERIFY2(contains(fit.message, "the largest part is saved_activations"), fit.message.c_str());
    QVERIFY2(contains(fit.message, ("the largest that fits is " + std::to_string(fits)).c_str()), fit.message.c_str());
    QVERIFY2(contains(fit.message, "kittens.mode: kitten"), fit.message.c_str());
    QVERIFY2(contains(fit.message, "4.00×"), fit.message.c_str());
  }

  void aLittleOverWarnsThatTheRunMaySwap() {
    ExperimentConfig c = test::tiny_experiment("corpus");
    const double need = estimate_memory(c).total_bytes();
    const MemoryFit fit = host_memory_fit(c, need / 1.5);
    QCOMPARE(fit.verdict, MemoryVerdict::warn);
    QVERIFY2(contains(fit.message, "may swap or be killed"), fit.message.c_str());
  }

  void aLargeModelIsToldToShrinkTheModel() {
    ExperimentConfig c = test::tiny_experiment("corpus");
    c.model.layers = 64;
    c.model.d_model = 2048;
    c.model.heads = 16;
    c.model.experts = 64;
    c.model.expert_hidden = 2048;
    c.train.batch = 1;
    const MemoryFit fit = host_memory_fit(c, 1 * kGiB);
    QCOMPARE(fit.verdict, MemoryVerdict::refuse);
    QVERIFY2(fit.largest_category == "optimizer_state", fit.largest_category.c_str());
    QVERIFY2(contains(fit.message, "make the model smaller (model.layers"), fit.message.c_str());
  }

  void ranksThatAreThreadsShareTheMachine() {
    ExperimentConfig c = test::tiny_experiment("corpus");
    const double one = host_memory_fit(c, 1 * kGiB).need_bytes;
    c.parallel.ranks = 2;
    c.parallel.comm = "local";
    const double per_rank = estimate_memory(c).total_bytes();
    QCOMPARE(host_memory_fit(c, 1 * kGiB).need_bytes, 2 * per_rank);
    c.parallel.comm = "mpi";  // a process per rank, each with its own plan
    QCOMPARE(host_memory_fit(c, 1 * kGiB).need_bytes, per_rank);
    QVERIFY(one > 0);
  }

  void aGpuRunIsNotJudgedByHostMemory() {
    ExperimentConfig c = test::tiny_experiment("corpus");
    c.parallel.device = "cuda";
    c.train.batch = 1 << 20;
    QCOMPARE(host_memory_fit(c, 1 * kGiB).verdict, MemoryVerdict::fits);
  }
};

QTEST_APPLESS_MAIN(TestMemoryFit)
#include "test_memory_fit.moc"
