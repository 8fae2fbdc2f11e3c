// The warning for a long training step (core/train/slow_step_notice.h), fed step times
// directly (no clock): it names the step and its time and says that a stop is clean, once per
// step, and a run whose every step is slow hears it once, not at every step.
#include <QtTest>

#include <string>

#include "core/train/slow_step_notice.h"

using namespace mok;

class TestSlowStepNotice : public QObject {
  Q_OBJECT
 private slots:
  void quickStepsSayNothing() {
    SlowStepNotice notice;
    for (int step = 1; step <= 100; ++step) QVERIFY(notice.check(step, 59.9, true).empty());
  }

  void aLongStepIsNamedWithItsTimeAndHowToStop() {
    SlowStepNotice notice(60.0, /*stops_mid_step=*/true);
    QVERIFY(notice.check(1, 30.0).empty());
    const std::string w = notice.check(1, 61.0);
    QVERIFY2(w.rfind("warning: step 1 has been running for 61 s", 0) == 0, w.c_str());
    QVERIFY2(w.find("Ctrl-C") != std::string::npos && w.find("abandoned") != std::string::npos, w.c_str());
    // Once per step: not again at its next check points, nor when it ends.
    QVERIFY(notice.check(1, 90.0).empty());
    QVERIFY(notice.check(1, 95.0, true).empty());
  }

  void aStepOverOnlyAtItsEndIsReportedThen() {
    SlowStepNotice notice;
    const std::string w = notice.check(7, 75.0, /*finished=*/true);
    QVERIFY2(w.rfind("warning: step 7 took 75 s", 0) == 0, w.c_str());
  }

  void everyStepSlowIsSaidOnceUntilAStepTakesTwiceAsLong() {
    SlowStepNotice notice;
    QVERIFY(!notice.check(1, 70.0, true).empty());
    for (int step = 2; step <= 50; ++step) QVERIFY(notice.check(step, 70.0 + step, true).empty());
    QVERIFY(notice.check(51, 140.0, true).empty());
    const std::string w = notice.check(52, 141.0, true);
    QVERIFY2(w.rfind("warning: step 52 took 141 s", 0) == 0, w.c_str());
  }

  void severalRanksStopAfterTheStep() {
    SlowStepNotice notice(60.0, /*stops_mid_step=*/false);
    const std::string w = notice.check(3, 61.0);
    QVERIFY2(w.find("stops cleanly after this step") != std::string::npos, w.c_str());
  }
};

QTEST_APPLESS_MAIN(TestSlowStepNotice)
#include "test_slow_step_notice.moc"
