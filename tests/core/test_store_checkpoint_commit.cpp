// The run store never lags a checkpoint: RunStore::record_checkpoint writes the unwritten
// metric rows and the checkpoint row in one transaction (and replaces the run's checkpoint
// rows at that step or later), and RunStoreSink::commit_checkpoint sends everything its
// writer still buffers through it, so the on_checkpoint that follows is not recorded twice.
#include <QtTest>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include "core/store/metric_writer.h"
#include "core/store/run_store.h"
#include "core/store/run_store_sink.h"

using mok::MetricRow;
using mok::RunStore;

namespace {

MetricRow row(int64_t step, double loss) {
  MetricRow r;
  r.step = step;
  r.tokens = step * 100;
  r.values = {{"train/loss", loss}};
  return r;
}

}  // namespace

class TestStoreCheckpointCommit : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string db(const char* name) { return (dir_.path() + "/" + name).toStdString(); }

 private slots:
  void recordCheckpointWritesRowsAndCheckpointTogether() {
    RunStore store = RunStore::open(db("record.db"));
    const int64_t id = store.create_run({.name = "r", .config_yaml = "name: r\n"});
    store.record_checkpoint(id, {row(1, 3.0), row(2, 2.5)}, 2, "/runs/r/step_000002");
    QCOMPARE(store.metric_series(id, "train/loss").size(), size_t(2));
    QCOMPARE(store.get_run(id).summary.last_step, int64_t(2));
    QCOMPARE(store.checkpoints(id).size(), size_t(1));
    // No rows to add: only the checkpoint row.
    store.record_checkpoint(id, {}, 4, "/runs/r/step_000004");
    QCOMPARE(store.checkpoints(id).size(), size_t(2));
    // A later history is replaced when the run records an earlier step again (a rewound
    // run, or a save whose folder never appeared): rows at steps 3 and up go.
    store.add_checkpoint(id, 6, "/runs/r/step_000006");
    store.record_checkpoint(id, {row(3, 2.0)}, 3, "/runs/r/step_000003");
    const auto cps = store.checkpoints(id);
    QCOMPARE(cps.size(), size_t(2));
    QCOMPARE(cps[0].step, int64_t(2));
    QCOMPARE(cps[1].step, int64_t(3));
    QCOMPARE(cps[1].path, std::string("/runs/r/step_000003"));
    // A run that does not exist: nothing is written.
    QVERIFY_THROWS_EXCEPTION(mok::StoreError, store.record_checkpoint(id + 100, {row(1, 1.0)}, 1, "/x"));
    QCOMPARE(store.metric_row_count(id + 100), int64_t(0));
  }

  void sinkCommitFlushesBufferedRowsFirst() {
    RunStore store = RunStore::open(db("sink.db"));
    mok::RunStoreSinkOptions o;
    o.writer.max_rows = 1000;        // nothing due by count …
    o.writer.max_delay_ms = 600000;  // … nor by time: every row stays buffered
    mok::RunStoreSink sink(store, o);
    mok::RunStarted started;
    started.name = "s";
    started.config_yaml = "name: s\n";
    sink.on_run_started(started);
    const int64_t id = sink.run_id();
    for (int64_t s = 1; s <= 5; ++s) sink.on_metrics(row(s, 5.0 - s));
    QCOMPARE(store.metric_row_count(id), int64_t(0));  // the test is meaningful: still buffered
    sink.commit_checkpoint(5, "/runs/s/step_000005");
    QCOMPARE(store.metric_series(id, "train/loss").size(), size_t(5));
    QCOMPARE(store.checkpoints(id).size(), size_t(1));
    // The checkpoint's on_checkpoint does not add a second row; another step's does.
    sink.on_checkpoint(5, "/runs/s/step_000005");
    QCOMPARE(store.checkpoints(id).size(), size_t(1));
    sink.on_checkpoint(7, "/runs/s/step_000007");
    QCOMPARE(store.checkpoints(id).size(), size_t(2));
    QCOMPARE(sink.error_count(), 0);
  }
};

QTEST_GUILESS_MAIN(TestStoreCheckpointCommit)
#include "test_store_checkpoint_commit.moc"
