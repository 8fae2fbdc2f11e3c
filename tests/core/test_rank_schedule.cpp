// Rank schedules at key steps, and the adaptive controller moving the rank the right way.
#include <QtTest>

#include "core/kittens/rank_schedule.h"

using namespace mok;

namespace {
KittensConfig schedule(const char* name, int rank, int final_rank) {
  KittensConfig c;
  c.mode = "custom";
  c.schedule = name;
  c.rank = rank;
  c.final_rank = final_rank;
  return c;
}
}  // namespace

class TestRankSchedule : public QObject {
  Q_OBJECT
 private slots:
  void constantAndWarmup() {
    KittensConfig c = schedule("constant", 16, -1);
    QCOMPARE(scheduled_rank(c, 0, 1000), 16);
    QCOMPARE(scheduled_rank(c, 999, 1000), 16);
    QVERIFY(!rank_schedule_exact(c, 0));
    c.schedule = "warmup";
    c.warmup_steps = 100;
    QVERIFY(rank_schedule_exact(c, 0));
    QVERIFY(rank_schedule_exact(c, 99));
    QVERIFY(!rank_schedule_exact(c, 100));
    QCOMPARE(scheduled_rank(c, 100, 1000), 16);
  }

  void linearAndCosineDecay() {
    KittensConfig c = schedule("linear", 32, 8);
    c.warmup_steps = 100;
    QCOMPARE(scheduled_rank(c, 100, 1100), 32);   // start of the window
    QCOMPARE(scheduled_rank(c, 600, 1100), 20);   // halfway: (32 + 8) / 2
    QCOMPARE(scheduled_rank(c, 1100, 1100), 8);
    QCOMPARE(scheduled_rank(c, 5000, 1100), 8);   // stays at the end
    c.schedule = "cosine";
    QCOMPARE(scheduled_rank(c, 100, 1100), 32);
    QCOMPARE(scheduled_rank(c, 600, 1100), 20);   // cosine is symmetric about the middle
    QCOMPARE(scheduled_rank(c, 350, 1100), 28);   // 8 + 24·(1 + cos(π/4))/2 = 28.49 → 28
    QCOMPARE(scheduled_rank(c, 1100, 1100), 8);
    c.schedule_steps = 200;                      // explicit horizon
    QCOMPARE(scheduled_rank(c, 300, 1100), 8);
    // final_rank = -1 → min_rank
    KittensConfig d = schedule("linear", 20, -1);
    d.min_rank = 4;
    QCOMPARE(scheduled_rank(d, 1000, 1000), 4);
  }

  void stepDecay() {
    KittensConfig c = schedule("step", 32, 4);
    c.step_every = 100;
    c.step_factor = 0.5;
    QCOMPARE(scheduled_rank(c, 0, 1000), 32);
    QCOMPARE(scheduled_rank(c, 99, 1000), 32);
    QCOMPARE(scheduled_rank(c, 100, 1000), 16);
    QCOMPARE(scheduled_rank(c, 250, 1000), 8);
    QCOMPARE(scheduled_rank(c, 900, 1000), 4);  // bounded by final_rank
  }

  void adaptiveControllerMovesTheRankTheRightWay() {
    AdaptiveRankController a(16, 4, 32, 0.3);
    QCOMPARE(a.rank(), 16);
    QCOMPARE(a.observe(0.5), 20);   // too much error: up by rank/4
    QCOMPARE(a.observe(0.5), 25);
    QCOMPARE(a.observe(0.2), 25);   // within the dead band [0.15, 0.3]: stays
    QCOMPARE(a.observe(0.1), 22);   // well below: down by rank/8
    QCOMPARE(a.observe(-1.0), 22);  // no measurement: no change
    for (int i = 0; i < 50; ++i) a.observe(0.9);
    QCOMPARE(a.rank(), 32);         // capped at max_rank
    for (int i = 0; i < 100; ++i) a.observe(0.0);
    QCOMPARE(a.rank(), 4);          // floored at min_rank
  }

  void badSettingsAreNamed() {
    KittensConfig c = schedule("wiggly", 16, -1);
    QVERIFY(rank_schedule_problem(c).find("kittens.schedule") != std::string::npos);
    c = schedule("constant", 16, -1);
    QVERIFY(rank_schedule_problem(c).empty());
    c.max_rank = 2;
    QVERIFY(rank_schedule_problem(c).find("kittens.max_rank") != std::string::npos);
    c = schedule("step", 16, -1);
    c.step_every = 0;
    QVERIFY(rank_schedule_problem(c).find("kittens.step_every") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestRankSchedule)
#include "test_rank_schedule.moc"
