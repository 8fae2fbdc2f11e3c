// End to end: build a tiny run in the Setup form, launch it with the button, see live
// points arrive on the Live page while it trains on a worker thread, stop it, and find it
// in the runs browser as stopped (or finished, had it already ended).
#include <QComboBox>
#include <QLineEdit>
#include <QPushButton>
#include <QTemporaryDir>
#include <QtTest>

#include "widgets/config/config_field.h"
#include "widgets/config/experiment_editor.h"
#include "widgets/dashboard/live_dashboard.h"
#include "widgets/models/run_table_model.h"
#include "widgets/plot/streaming_plot.h"
#include "widgets/workbench/live_page.h"
#include "widgets/workbench/main_window.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/runs_page.h"
#include "widgets/workbench/setup_page.h"

using namespace mok;
using namespace mok::gui;

// Sets a form field through its editor widget, as typing would.
static void type_into(ExperimentEditor* editor, const QString& path, const QString& text) {
  ConfigField* f = editor->field(path);
  QVERIFY2(f, qPrintable(path));
  if (auto* combo = qobject_cast<QComboBox*>(f->editor())) {
    combo->setCurrentText(text);
  } else if (auto* line = qobject_cast<QLineEdit*>(f->editor())) {
    line->setText(text);
    line->setModified(true);
    emit line->editingFinished();
  }
  QCOMPARE(f->value_text(), text);
}

class TestWorkbenchEndToEnd : public QObject {
  Q_OBJECT

 private slots:
  void launch_watch_stop_browse() {
    QVERIFY2(RunManager::training_available(), "the workbench was built without the training core");
    QTemporaryDir dir;
    MainWindow window(dir.filePath("runs.db"));
    window.show();
    ExperimentEditor* editor = window.setup_page()->editor();
    const QList<QPair<QString, QString>> tiny = {
        {"name", "e2e-tiny"},        {"data.seq_len", "32"},       {"model.layers", "2"},
        {"model.d_model", "32"},     {"model.heads", "2"},         {"model.experts", "4"},
        {"model.top_k", "2"},        {"model.expert_hidden", "32"}, {"model.dense_hidden", "64"},
        {"train.steps", "400"},      {"train.batch", "4"},         {"train.eval_every", "10"},
        {"train.eval_batches", "1"}, {"train.warmup_steps", "5"},  {"parallel.threads", "1"},
        {"logging.checkpoint_dir", dir.filePath("checkpoints")}};
    for (const auto& [k, v] : tiny) type_into(editor, k, v);
    QVERIFY2(editor->is_valid(), qPrintable(editor->issues().join("; ")));
    QCOMPARE(editor->config().model.d_model, 32);
    QVERIFY(window.setup_page()->launch_button()->isEnabled());

    QSignalSpy started(window.run_manager(), &RunManager::job_started);
    QTest::mouseClick(window.setup_page()->launch_button(), Qt::LeftButton);
    QCOMPARE(window.current_page(), MainWindow::LivePageIndex);
    const int job = window.live_page()->shown_job();
    QVERIFY(job > 0);

    // Live points arrive while the run trains on its worker thread.
    LiveDashboard* dash = window.live_page()->dashboard();
    QTRY_VERIFY_WITH_TIMEOUT(dash->rows_seen() >= 5, 25000);
    QTRY_VERIFY_WITH_TIMEOUT(dash->loss_plot()->point_count(0) >= 5, 5000);
    QVERIFY(started.count() == 1);
    const qint64 run_id = window.run_manager()->job(job).run_id;
    QVERIFY(run_id > 0);

    window.run_manager()->stop(job);
    QTRY_VERIFY_WITH_TIMEOUT(window.run_manager()->job(job).status == RunStatus::stopped ||
                                 window.run_manager()->job(job).status == RunStatus::finished,
                             25000);
    QVERIFY(window.run_manager()->job(job).last_step < 399);  // it stopped early

    window.show_page(MainWindow::RunsPageIndex);
    window.runs_page()->refresh();
    RunTableModel* model = window.runs_page()->model();
    const int row = model->row_of(run_id);
    QVERIFY(row >= 0);
    QCOMPARE(model->run_at(row).name, QStringLiteral("e2e-tiny"));
    const QString status = model->run_at(row).status;
    QVERIFY2(status == "stopped" || status == "finished", qPrintable(status));
    QVERIFY(model->run_at(row).steps > 0);
  }
};

QTEST_MAIN(TestWorkbenchEndToEnd)
#include "test_workbench_e2e.moc"
