// Every view names a run with its id, shows this session's runs with progress and time
// left, one row per run, and keeps the same order from one session to the next.
#include <cmath>

#include <QHeaderView>
#include <QProgressBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "core/store/run_store.h"
#include "widgets/dashboard/live_dashboard.h"
#include "widgets/models/run_label.h"
#include "widgets/models/run_table_model.h"
#include "widgets/workbench/eta_estimate.h"
#include "widgets/workbench/live_page.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/run_queue_view.h"
#include "widgets/workbench/runs_page.h"

using namespace mok;
using namespace mok::gui;

namespace {

int64_t add_run(RunStore& store, const std::string& name, double bpb) {
  const int64_t id = store.create_run({.name = name, .environment = RunEnvironment{}});
  MetricRow r;
  r.step = 40;
  r.tokens = 40 * 256;
  r.values = {{"train/loss", 3.0}, {"val/bpb", bpb}, {"val/ppl", 22.5}, {"mem/peak_bytes", 3.0e6}};
  store.append_metrics(id, r);
  store.set_status(id, RunStatus::finished);
  return id;
}

QList<qint64> shown_ids(RunsPage& page) {
  QList<qint64> ids;
  for (int row = 0; row < page.proxy()->rowCount(); ++row)
    ids << page.proxy()->index(row, 0).data(RunTableModel::kRunIdRole).toLongLong();
  return ids;
}

RunManager::JobInfo job_info(int job, int64_t run_id, RunStatus status, int64_t step, double eta_s) {
  RunManager::JobInfo j;
  j.job = job;
  j.run_id = run_id;
  j.name = "quickstart";
  j.status = status;
  j.last_step = step;
  j.total_steps = 60;
  j.eta_s = eta_s;
  return j;
}

}  // namespace

class TestRunViews : public QObject {
  Q_OBJECT

 private slots:
  void runs_table_has_an_id_column_fully_visible_and_a_stable_order() {
    QTemporaryDir dir;
    const QString db = dir.filePath("runs.db");
    {
      RunStore store = RunStore::open(db.toStdString());
      add_run(store, "quickstart", 4.4671);
      add_run(store, "quickstart", 4.4709);
    }
    RunManager runs;
    runs.set_db_path(db);
    RunsPage page(&runs);
    page.resize(1260, 860);  // the Runs page in a 1600-wide window, beside sidebar and queue
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    page.refresh();
    QCOMPARE(page.model()->headerData(RunTableModel::Id, Qt::Horizontal).toString(), QStringLiteral("ID"));
    QCOMPARE(shown_ids(page), (QList<qint64>{2, 1}));  // newest first
    // Two runs of one name differ by their id, shown in the table.
    QCOMPARE(page.proxy()->index(0, RunTableModel::Id).data().toString(), QStringLiteral("2"));
    QCOMPARE(page.proxy()->index(1, RunTableModel::Id).data().toString(), QStringLiteral("1"));

    // Every column up to the peak memory is whole on screen, header text included.
    QTableView* table = page.table();
    const int viewport = table->viewport()->width();
    for (int c = RunTableModel::Id; c <= RunTableModel::PeakMemory; ++c) {
      const int right = table->columnViewportPosition(c) + table->columnWidth(c);
      QVERIFY2(right <= viewport, qPrintable(QStringLiteral("column %1 ends at %2 of %3").arg(c).arg(right).arg(viewport)));
      QVERIFY(table->columnWidth(c) >= table->horizontalHeader()->sectionSizeHint(c));
    }

    // A run added during the session lands where the next session shows it: first.
    {
      RunStore store = RunStore::open(db.toStdString());
      add_run(store, "quickstart", 4.40);
    }
    page.refresh();
    QCOMPARE(shown_ids(page), (QList<qint64>{3, 2, 1}));
    RunsPage next_session(&runs);
    next_session.refresh();
    QCOMPARE(shown_ids(next_session), shown_ids(page));
    // Equal keys keep one order too: by status (all "finished"), the ids decide.
    page.table()->sortByColumn(RunTableModel::Status, Qt::AscendingOrder);
    next_session.table()->sortByColumn(RunTableModel::Status, Qt::AscendingOrder);
    QCOMPARE(shown_ids(page), shown_ids(next_session));
  }

  void the_store_poll_sees_runs_written_elsewhere() {
    QTemporaryDir dir;
    const QString db = dir.filePath("runs.db");
    {
      RunStore store = RunStore::open(db.toStdString());
      add_run(store, "first", 4.5);
    }
    RunManager runs;
    runs.set_db_path(db);
    RunsPage page(&runs);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    QTRY_COMPARE(page.model()->rowCount(), 1);
    {
      RunStore store = RunStore::open(db.toStdString());  // as `mok train` in a terminal would
      add_run(store, "second", 4.4);
    }
    QTRY_COMPARE_WITH_TIMEOUT(page.model()->rowCount(), 2, 5000);  // no refresh by hand
  }

  void queue_names_runs_with_ids_and_shows_progress_and_time_left() {
    RunQueueView queue;
    queue.show_jobs({job_info(1, 7, RunStatus::running, 15, 95.0), job_info(2, 8, RunStatus::paused, 30, NAN),
                     job_info(3, 0, RunStatus::queued, -1, NAN)});
    QCOMPARE(queue.topLevelItemCount(), 3);
    QCOMPARE(queue.text(0, RunQueueView::RunColumn), QStringLiteral("quickstart #7"));
    QCOMPARE(queue.text(1, RunQueueView::RunColumn), QStringLiteral("quickstart #8"));
    QCOMPARE(queue.text(2, RunQueueView::RunColumn), QStringLiteral("quickstart (not started)"));
    QCOMPARE(queue.progress_bar(0)->value(), 15);
    QCOMPARE(queue.progress_bar(0)->maximum(), 60);
    QCOMPARE(queue.progress_bar(1)->value(), 30);
    QCOMPARE(queue.progress_bar(2)->value(), 0);
    QCOMPARE(queue.text(0, RunQueueView::EtaColumn), QStringLiteral("1 min 35 s"));
    QCOMPARE(queue.text(1, RunQueueView::EtaColumn), QStringLiteral("paused"));
    // Updates land in place: the selection stays on its run.
    queue.setCurrentItem(queue.topLevelItem(1));
    queue.show_jobs({job_info(1, 7, RunStatus::running, 20, 80.0), job_info(2, 8, RunStatus::running, 31, 58.0),
                     job_info(3, 0, RunStatus::queued, -1, NAN)});
    QCOMPARE(queue.selected_job(), 2);
    QCOMPARE(queue.progress_bar(1)->value(), 31);
    QCOMPARE(queue.text(1, RunQueueView::EtaColumn), QStringLiteral("58 s"));
  }

  void status_text_says_each_word_once() {
    QCOMPARE(run_status_text(RunStatus::stopped, "stopped at step 18"), QStringLiteral("stopped at step 18"));
    QCOMPARE(run_status_text(RunStatus::failed, "parallel.device: cuda"), QStringLiteral("failed: parallel.device: cuda"));
    QCOMPARE(run_status_text(RunStatus::running, QString()), QStringLiteral("running"));
  }

  void eta_follows_the_recent_pace() {
    EtaEstimate eta;
    QVERIFY(std::isnan(eta.seconds_left(100)));
    eta.add(1, 10.0);
    QVERIFY(std::isnan(eta.seconds_left(100)));
    for (int s = 2; s <= 40; ++s) eta.add(s, 10.0 + 0.5 * (s - 1));  // 0.5 s per step
    QCOMPARE(eta.seconds_left(100), 30.0);
    eta.add(1, 0.0);  // a new session starts over
    QVERIFY(std::isnan(eta.seconds_left(100)));
    QCOMPARE(format_duration(3725), QStringLiteral("1 h 02 min"));
    QCOMPARE(format_duration(NAN), QStringLiteral("–"));
  }

  void live_header_names_the_run_with_its_id() {
    QTemporaryDir dir;
    const QString db = dir.filePath("runs.db");
    int64_t id = 0;
    {
      RunStore store = RunStore::open(db.toStdString());
      add_run(store, "quickstart", 4.5);
      id = add_run(store, "quickstart", 4.4);
    }
    RunManager runs;
    runs.set_db_path(db);
    LivePage page(&runs);
    page.show_run(id);
    QCOMPARE(page.dashboard()->title(), QStringLiteral("quickstart #2"));
    QCOMPARE(run_label("quickstart", 0), QStringLiteral("quickstart (not started)"));
  }
};

QTEST_MAIN(TestRunViews)
#include "test_run_views.moc"
