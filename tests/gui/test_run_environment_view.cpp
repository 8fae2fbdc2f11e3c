// Where a run computed, as the workbench shows it: the runs browser's details name the
// selected run's machine, and the Compare page shows a note (and environment.* rows in the
// config diff) exactly when a compared run came from other hardware than the baseline;
// runs that differ only in thread count are the same hardware.
#include <QLabel>
#include <QTemporaryDir>
#include <QtTest>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include "core/store/run_environment.h"
#include "core/store/run_store.h"
#include "widgets/models/config_diff_model.h"
#include "widgets/workbench/compare_page.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/runs_page.h"

using namespace mok;
using namespace mok::gui;

namespace {

RunEnvironment machine(const char* cpu, const char* kernel, int threads) {
  RunEnvironment e;
  e.recorded = true;
  e.cpu_model = cpu;
  e.cpu_count = 32;
  e.threads = threads;
  e.blas_library = "OpenBLAS 0.3.21";
  e.blas_kernel = kernel;
  return e;
}

}  // namespace

class TestRunEnvironmentView : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString db_;
  int64_t zen_ = 0, zen_threads_ = 0, xeon_ = 0, unknown_ = 0;

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db");
    RunStore store = RunStore::open(db_.toStdString());
    zen_ = store.create_run({.name = "zen", .environment = machine("AMD EPYC 9654", "Cooperlake", 2)});
    zen_threads_ = store.create_run({.name = "zen 8 threads", .environment = machine("AMD EPYC 9654", "Cooperlake", 8)});
    xeon_ = store.create_run({.name = "xeon", .environment = machine("Intel(R) Xeon(R) Gold 6148", "SkylakeX", 2)});
    unknown_ = store.create_run({.name = "old", .environment = RunEnvironment{}});
    for (int64_t id : {zen_, zen_threads_, xeon_, unknown_}) {
      MetricRow row;
      row.step = 1;
      row.values = {{"train/loss", 2.0}};
      store.append_metrics(id, row);
      store.set_status(id, RunStatus::finished);
    }
  }

  void runDetailsNameTheMachine() {
    RunManager runs;
    runs.set_db_path(db_);
    RunsPage page(&runs);
    page.show();
    page.refresh();
    page.select_run(xeon_);
    QLabel* env = page.environment_label();
    QTRY_VERIFY(env->isVisible());
    QCOMPARE(env->text(), QString("Machine: Intel(R) Xeon(R) Gold 6148 · 32 CPUs · 2 threads · OpenBLAS 0.3.21, kernel SkylakeX"));
    page.select_run(unknown_);
    QCOMPARE(env->text(), QString("Machine: not recorded"));
  }

  void compareNoteShownOnlyForOtherHardware() {
    RunManager runs;
    runs.set_db_path(db_);
    ComparePage page(&runs);
    page.show();
    QLabel* note = page.hardware_note();

    // Same machine and kernel; only the thread count differs: bitwise comparable, no note.
    page.set_runs({zen_, zen_threads_});
    QCOMPARE(page.checked_runs().size(), 2);
    QVERIFY(note->isHidden());
    QVERIFY(!page.diff()->row_differs("environment.blas_kernel"));

    // Another CPU and kernel family: the note names the run and what differs.
    page.set_runs({zen_, zen_threads_, xeon_});
    QVERIFY(note->isVisible());
    QVERIFY2(note->text().contains(QString("xeon #%1: CPU Intel(R) Xeon(R) Gold 6148 vs AMD EPYC 9654; "
                                           "BLAS kernel SkylakeX vs Cooperlake").arg(xeon_)),
             qPrintable(note->text()));
    QVERIFY2(!note->text().contains(QString("#%1:").arg(zen_threads_)), qPrintable(note->text()));
    QVERIFY(page.diff()->row_differs("environment.blas_kernel"));
    QVERIFY(page.diff()->keys().contains("environment.cpu_model"));

    // With the Xeon run as baseline, both EPYC runs differ from it.
    page.set_baseline(xeon_);
    QVERIFY(note->isVisible());
    QVERIFY2(note->text().contains(QString("zen #%1: CPU AMD EPYC 9654 vs Intel(R) Xeon(R) Gold 6148").arg(zen_)),
             qPrintable(note->text()));
    QVERIFY2(note->text().contains(QString("#%1:").arg(zen_threads_)), qPrintable(note->text()));

    // A run whose environment was not recorded cannot be called the same hardware.
    page.set_runs({zen_, unknown_});
    QVERIFY(note->isVisible());
    QVERIFY2(note->text().contains(QString("old #%1: environment not recorded").arg(unknown_)), qPrintable(note->text()));

    // Back to one machine: the note goes away.
    page.set_runs({zen_threads_, zen_});
    QVERIFY(note->isHidden());
    QVERIFY(note->text().isEmpty());
  }
};

QTEST_MAIN(TestRunEnvironmentView)
#include "test_run_environment_view.moc"
