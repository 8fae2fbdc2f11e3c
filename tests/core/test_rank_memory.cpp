// binding_rank_memory over R local ranks, each with figures of its own:
//   - every peak is the largest over ranks, each from whichever rank had it;
//   - the live bytes, the reserved bytes now and the saved bytes per layer are those of the
//     rank whose tracker peaked highest, named in `rank`; a tie goes to the lower rank;
//   - every rank gets the same figures, saved bytes per layer included (kinds of any length,
//     the model's own layer −1, none at all);
//   - max_over_ranks takes each value's largest.
#include <QtTest>

#include <string>
#include <vector>

#include "core/parallel/local_communicator.h"
#include "core/train/rank_memory.h"

using namespace mok;

namespace {

// Rank r's figures: its tracker's peak as given, the other peaks largest on different ranks,
// and saved bytes per layer whose kinds' lengths say whose they are (none on rank 2).
RankMemory figures(int r, int64_t total) {
  RankMemory m;
  m.rank = r;
  for (size_t c = 0; c < m.live.size(); ++c) m.live[c] = 1000 * (r + 1) + static_cast<int64_t>(c);
  m.reserved = 7000 + r;
  m.peaks.total = total;
  m.peaks.saved = 300 - r;       // largest on rank 0
  m.peaks.reserved = 9000 + r;   // largest on the last rank
  m.peaks.blocks = r == 1 ? 5000 : 100;
  if (r != 2) {  // rank 2 saved nothing
    m.peaks.saved_by_kind[{-1, "embed.output"}] = 10 + r;
    m.peaks.saved_by_kind[{r, std::string(static_cast<size_t>(r) * 37, 'k')}] = 20 + r;
  }
  return m;
}

std::vector<RankMemory> gathered(const std::vector<int64_t>& totals) {
  const int R = static_cast<int>(totals.size());
  std::vector<RankMemory> out(static_cast<size_t>(R));
  run_local_ranks(R, [&](Communicator& c) {
    out[static_cast<size_t>(c.rank())] = binding_rank_memory(c, figures(c.rank(), totals[static_cast<size_t>(c.rank())]));
  });
  return out;
}

}  // namespace

class TestRankMemory : public QObject {
  Q_OBJECT
 private slots:
  void theHighestPeakBinds() {
    const std::vector<RankMemory> got = gathered({400, 900, 300, 800});
    for (const RankMemory& m : got) {
      QCOMPARE(m.rank, 1);
      const RankMemory one = figures(1, 900);
      QVERIFY(m.live == one.live);
      QCOMPARE(m.reserved, one.reserved);
      QCOMPARE(m.peaks.saved_by_kind, one.peaks.saved_by_kind);
      QCOMPARE(m.peaks.total, int64_t(900));
      QCOMPARE(m.peaks.saved, int64_t(300));      // rank 0's
      QCOMPARE(m.peaks.reserved, int64_t(9003));  // rank 3's
      QCOMPARE(m.peaks.blocks, int64_t(5000));    // rank 1's
    }
  }

  void aTieGoesToTheLowerRank() {
    for (const RankMemory& m : gathered({100, 500, 500})) {
      QCOMPARE(m.rank, 1);
      QCOMPARE(m.peaks.saved_by_kind, figures(1, 500).peaks.saved_by_kind);
    }
    for (const RankMemory& m : gathered({500, 500})) {
      QCOMPARE(m.rank, 0);
      QCOMPARE(m.peaks.saved_by_kind, figures(0, 500).peaks.saved_by_kind);
    }
  }

  void aRankThatSavedNothingGivesNothing() {
    for (const RankMemory& m : gathered({1, 2, 3})) {
      QCOMPARE(m.rank, 2);
      QVERIFY(m.peaks.saved_by_kind.empty());
      QCOMPARE(m.live, figures(2, 3).live);
    }
  }

  void maxOverRanks() {
    std::vector<std::vector<int64_t>> got(3);
    run_local_ranks(3, [&](Communicator& c) {
      const int64_t r = c.rank();
      std::vector<int64_t> v{r, -r, r == 1 ? 50 : 7};
      max_over_ranks(c, v);
      got[static_cast<size_t>(r)] = v;
    });
    for (const auto& v : got) QCOMPARE(v, (std::vector<int64_t>{2, 0, 50}));
  }
};

QTEST_GUILESS_MAIN(TestRankMemory)
#include "test_rank_memory.moc"
