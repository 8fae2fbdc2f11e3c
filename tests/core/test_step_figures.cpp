// StepFigures over R local ranks: what each rank's communicator counted during a step
// (take_comm) is summed over ranks (reduce_step_figures, the same on every rank), and the
// metric row reports the times as per-rank means in ms:
//   - transfers overlapped with compute (Communicator::add_overlapped_seconds) become
//     perf/comm_overlapped_ms, beside perf/comm_ms (add_wall_seconds); what was counted
//     before the step's snapshot is not the step's;
//   - a single-rank row has neither.
#include <QtTest>

#include <cmath>
#include <string>
#include <vector>

#include "core/parallel/local_communicator.h"
#include "core/train/metric_rows.h"
#include "core/train/step_figures.h"

using namespace mok;

namespace {

// The value of metric `name` in `row`, or NaN when the row lacks it.
double value(const MetricRow& row, const std::string& name) {
  for (const auto& v : row.values)
    if (v.name == name) return v.value;
  return std::nan("");
}

}  // namespace

class TestStepFigures : public QObject {
  Q_OBJECT
 private slots:
  void overlappedSecondsBecomeTheirMetric() {
    const int R = 4;
    std::vector<StepFigures> figures(R);
    std::vector<MetricRow> rows(R);
    std::vector<double> since(R);
    run_local_ranks(R, [&](Communicator& c) {
      const int r = c.rank();
      c.add_overlapped_seconds(8.0);  // an earlier step's: before the snapshot
      const CommStats before = c.stats();
      // This step: rank r overlapped 0.25·(r + 1) s in two transfers and waited 1 s.
      c.add_overlapped_seconds(0.125 * (r + 1));
      c.add_overlapped_seconds(0.125 * (r + 1));
      c.add_wall_seconds(1.0);
      since[size_t(r)] = c.stats().since(before).overlapped_seconds;
      StepFigures f;
      f.take_comm(c.stats(), before);
      f.step_s = 4.0;
      RankContext rc;
      rc.comm = &c;
      rc.rank = r;
      rc.ranks = R;
      reduce_step_figures(rc, f);
      figures[size_t(r)] = f;
      TrainStepResult result;
      result.step_s = 4.0;
      result.ranks = f;
      rows[size_t(r)] = train_metric_row(1, 512, 512, result, rc, RankMemory{}, {});
    });
    for (int r = 0; r < R; ++r) {
      QCOMPARE(since[size_t(r)], 0.25 * (r + 1));
      // Σ over ranks of 0.25·(r + 1) s = 2.5 s; 1 s each waited.
      QCOMPARE(figures[size_t(r)].overlapped_s, 2.5);
      QCOMPARE(figures[size_t(r)].comm_s, 4.0);
      // Per-rank means in ms: 2.5 s / 4 = 625 ms overlapped, 1000 ms exposed.
      QCOMPARE(value(rows[size_t(r)], "perf/comm_overlapped_ms"), 625.0);
      QCOMPARE(value(rows[size_t(r)], "perf/comm_ms"), 1000.0);
    }
  }

  void singleRankRowHasNoCommunicationTimes() {
    RankContext rc;  // no communicator: one rank
    TrainStepResult result;
    result.step_s = 1.0;
    result.ranks.overlapped_s = 1.0;
    const MetricRow row = train_metric_row(1, 512, 512, result, rc, RankMemory{}, {});
    QVERIFY(std::isnan(value(row, "perf/comm_overlapped_ms")));
    QVERIFY(std::isnan(value(row, "perf/comm_ms")));
    QCOMPARE(value(row, "perf/step_ms"), 1000.0);
  }
};

QTEST_GUILESS_MAIN(TestStepFigures)
#include "test_step_figures.moc"
