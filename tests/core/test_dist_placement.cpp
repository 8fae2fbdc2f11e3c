// ExpertPlacement: named layouts give every expert exactly one owner and every rank at
// least one expert; explicit lists are validated with messages that name the problem.
#include <QtTest>

#include "core/parallel/expert_placement.h"

using namespace mok;

class TestDistPlacement : public QObject {
  Q_OBJECT
 private slots:
  void contiguousBlocks() {
    const ExpertPlacement p = ExpertPlacement::contiguous(8, 4);
    const std::vector<int> want = {0, 0, 1, 1, 2, 2, 3, 3};
    for (int e = 0; e < 8; ++e) QCOMPARE(p.owner(e), want[e]);
    QCOMPARE(p.experts_on(2), (std::vector<int>{4, 5}));
    QCOMPARE(p.local_index(5), 1);
    QCOMPARE(QString::fromStdString(p.describe()), QString("contiguous: 0,0,1,1,2,2,3,3"));
  }

  void unevenSplitsStillCoverEveryRank() {
    for (int E : {3, 5, 7, 8, 9}) {
      for (int R = 1; R <= std::min(E, 4); ++R) {
        for (const auto& p : {ExpertPlacement::contiguous(E, R), ExpertPlacement::round_robin(E, R)}) {
          int total = 0;
          for (int r = 0; r < R; ++r) {
            QVERIFY(!p.experts_on(r).empty());
            QVERIFY(static_cast<int>(p.experts_on(r).size()) <= (E + R - 1) / R);
            for (int e : p.experts_on(r)) QCOMPARE(p.owner(e), r);
            total += static_cast<int>(p.experts_on(r).size());
          }
          QCOMPARE(total, E);
        }
      }
    }
  }

  void roundRobin() {
    const ExpertPlacement p = ExpertPlacement::parse("round_robin", 6, 4);
    QCOMPARE(p.experts_on(1), (std::vector<int>{1, 5}));
    QCOMPARE(p.experts_on(3), (std::vector<int>{3}));
  }

  void explicitList() {
    const ExpertPlacement p = ExpertPlacement::parse("1, 0,1,1", 4, 2);
    QCOMPARE(p.experts_on(0), (std::vector<int>{1}));
    QCOMPARE(p.experts_on(1), (std::vector<int>{0, 2, 3}));
    QCOMPARE(p.local_index(3), 2);
  }

  void badSpecsExplainThemselves() {
    auto message = [](const std::string& spec, int E, int R) {
      try {
        ExpertPlacement::parse(spec, E, R);
      } catch (const std::invalid_argument& e) {
        return QString(e.what());
      }
      return QString();
    };
    QVERIFY(message("0,1,2", 4, 3).contains("lists 3 owners for 4 experts"));
    QVERIFY(message("0,1,5,1", 4, 3).contains("expert 2 placed on rank 5"));
    QVERIFY(message("0,x,1,1", 4, 3).contains("got 'x'"));
    QVERIFY(message("blocks", 4, 2).contains("expected contiguous, round_robin"));
    QVERIFY(message("contiguous", 2, 4).contains("need experts >= ranks"));
  }
};

QTEST_GUILESS_MAIN(TestDistPlacement)
#include "test_dist_placement.moc"
