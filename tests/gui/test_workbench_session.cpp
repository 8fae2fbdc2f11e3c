// A session as a user has it: a run trains, stops, resumes; the queue and the Runs table
// agree on it all along and list it once; quitting with it in flight asks first; the
// dialogs open and export as their names say; Help → About gives versions and the docs.
#include <functional>

#include <QAbstractButton>
#include <QAction>
#include <QFile>
#include <QFileDialog>
#include <QLabel>
#include <QMessageBox>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include "widgets/config/experiment_editor.h"
#include "widgets/dashboard/live_dashboard.h"
#include "widgets/models/run_label.h"
#include "widgets/models/run_table_model.h"
#include "widgets/workbench/job_script.h"
#include "widgets/workbench/live_page.h"
#include "widgets/workbench/main_window.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/run_queue_view.h"
#include "widgets/workbench/runs_page.h"
#include "widgets/workbench/setup_page.h"

using namespace mok;
using namespace mok::gui;

namespace {

// Calls `act` on the next modal dialog once it is open (the test waits for it meanwhile).
void on_next_modal(std::function<void(QWidget*)> act) {
  auto* timer = new QTimer;
  timer->setInterval(20);
  QObject::connect(timer, &QTimer::timeout, [timer, act] {
    QWidget* modal = QApplication::activeModalWidget();
    if (!modal) return;
    timer->stop();
    timer->deleteLater();
    act(modal);
  });
  timer->start();
}

// Answers the next message box with `button` and keeps its text in `*text`.
void answer_next_question(QMessageBox::StandardButton button, QString* text) {
  on_next_modal([button, text](QWidget* modal) {
    auto* box = qobject_cast<QMessageBox*>(modal);
    if (!box) {
      modal->close();
      return;
    }
    *text = box->text();
    box->button(button)->click();
  });
}

void configure_tiny(ExperimentEditor* editor, const QString& name, const QString& checkpoints) {
  const QList<QPair<QString, QString>> tiny = {
      {"name", name},              {"data.seq_len", "32"},        {"model.layers", "2"},
      {"model.d_model", "32"},     {"model.heads", "2"},          {"model.experts", "4"},
      {"model.top_k", "2"},        {"model.expert_hidden", "32"}, {"model.dense_hidden", "64"},
      {"train.steps", "3000"},     {"train.batch", "4"},          {"train.eval_every", "10"},
      {"train.eval_batches", "1"}, {"train.warmup_steps", "5"},   {"parallel.threads", "1"},
      {"logging.checkpoint_dir", checkpoints}};
  for (const auto& [k, v] : tiny) editor->edit_field(k, v);
}

}  // namespace

class TestWorkbenchSession : public QObject {
  Q_OBJECT

 private slots:
  void stop_resume_and_quit_keep_every_view_in_agreement() {
    QVERIFY2(RunManager::training_available(), "the workbench was built without the training core");
    QTemporaryDir dir;
    auto* window = new MainWindow(dir.filePath("runs.db"));
    window->show();
    RunManager* runs = window->run_manager();
    configure_tiny(window->setup_page()->editor(), "twin", dir.filePath("checkpoints"));
    QVERIFY2(window->setup_page()->editor()->is_valid(), qPrintable(window->setup_page()->editor()->issues().join("; ")));
    const int job = window->setup_page()->launch();
    QVERIFY(job > 0);
    QTRY_VERIFY_WITH_TIMEOUT(runs->job(job).last_step >= 3, 30000);
    const int64_t run_id = runs->job(job).run_id;
    QVERIFY(run_id > 0);
    QCOMPARE(window->live_page()->dashboard()->title(), run_label("twin", run_id));

    runs->stop(job);
    QTRY_COMPARE_WITH_TIMEOUT(runs->job(job).status, RunStatus::stopped, 30000);
    const QString live_status = window->live_page()->status_label()->text();
    QVERIFY2(!live_status.contains("stopped stopped"), qPrintable(live_status));
    QVERIFY2(live_status.startsWith("stopped"), qPrintable(live_status));
    const int64_t stopped_at = runs->job(job).last_step;

    // Resume: one row for the run in the queue, the newest job's.
    window->show_page(MainWindow::RunsPageIndex);
    QString error;
    const int resumed = runs->resume_from_checkpoint(run_id, &error);
    QVERIFY2(resumed > 0, qPrintable(error));
    RunQueueView* queue = window->queue();
    QCOMPARE(queue->topLevelItemCount(), 1);
    QCOMPARE(queue->text(0, RunQueueView::RunColumn), run_label("twin", run_id));
    QCOMPARE(queue->row_of_job(resumed), 0);
    QCOMPARE(runs->job_of_run(run_id), resumed);

    // The table follows the session's state as it changes, with no refresh by hand.
    RunTableModel* model = window->runs_page()->model();
    QTRY_VERIFY_WITH_TIMEOUT(runs->job(resumed).last_step > stopped_at, 30000);
    QTRY_COMPARE_WITH_TIMEOUT(model->run_at(model->row_of(run_id)).status, QStringLiteral("running"), 5000);
    QCOMPARE(queue->text(0, RunQueueView::StatusColumn), QStringLiteral("running"));
    QTRY_VERIFY_WITH_TIMEOUT(model->run_at(model->row_of(run_id)).steps > stopped_at, 5000);

    // Quitting with the run in flight asks; "No" keeps the window and the run.
    QString question;
    answer_next_question(QMessageBox::No, &question);
    QVERIFY(!window->close());
    QVERIFY2(question.contains("1 run"), qPrintable(question));
    QVERIFY(window->isVisible());
    QCOMPARE(runs->job(resumed).status, RunStatus::running);
    answer_next_question(QMessageBox::Yes, &question);
    QVERIFY(window->close());
    delete window;  // stops the run and joins its thread
  }

  void open_run_database_uses_an_open_dialog() {
    QTemporaryDir dir;
    MainWindow window(dir.filePath("runs.db"));
    QFileDialog::AcceptMode mode = QFileDialog::AcceptSave;
    QFileDialog::FileMode file_mode = QFileDialog::AnyFile;
    bool seen = false;
    on_next_modal([&](QWidget* modal) {
      if (auto* dialog = qobject_cast<QFileDialog*>(modal)) {
        seen = true;
        mode = dialog->acceptMode();
        file_mode = dialog->fileMode();
      }
      modal->close();
    });
    window.open_database_action()->trigger();
    QVERIFY(seen);
    QCOMPARE(mode, QFileDialog::AcceptOpen);
    QCOMPARE(file_mode, QFileDialog::ExistingFile);
    QCOMPARE(window.run_manager()->db_path(), dir.filePath("runs.db"));  // cancelled: unchanged
  }

  void slurm_export_asks_before_replacing_a_file() {
    QTemporaryDir dir;
    MainWindow window(dir.filePath("runs.db"));
    const QString script = dir.filePath("quickstart.sbatch");
    const QString yaml = dir.filePath("quickstart.yaml");
    {
      QFile f(yaml);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("my own notes\n");
    }
    QCOMPARE(existing_job_script_outputs(script), QStringList{yaml});
    QString question;
    answer_next_question(QMessageBox::No, &question);
    QVERIFY(!window.export_job_script(script));
    QVERIFY2(question.contains(yaml), qPrintable(question));
    QFile kept(yaml);
    QVERIFY(kept.open(QIODevice::ReadOnly));
    QCOMPARE(kept.readAll(), QByteArray("my own notes\n"));
    QVERIFY(!QFileInfo::exists(script));
    // Without asking, nothing is replaced either.
    QString error;
    QVERIFY(!write_job_script(window.setup_page()->editor()->config(), script, &error));
    QVERIFY2(error.contains("already exists"), qPrintable(error));
    answer_next_question(QMessageBox::Yes, &question);
    QVERIFY(window.export_job_script(script));
    QVERIFY(QFileInfo(script).isExecutable());
    kept.close();
    QVERIFY(kept.open(QIODevice::ReadOnly));
    QVERIFY(kept.readAll().startsWith("name:"));
  }

  void about_gives_versions_and_the_docs() {
    QTemporaryDir dir;
    MainWindow window(dir.filePath("runs.db"));
    QVERIFY(window.about_action());
    const QString text = MainWindow::about_text();
    QVERIFY2(text.contains(QStringLiteral(MOK_VERSION)), qPrintable(text));
    QVERIFY2(text.contains(QString::fromLatin1(qVersion())), qPrintable(text));
    QVERIFY2(text.contains(MainWindow::docs_dir()), qPrintable(text));
    QVERIFY(QFileInfo::exists(MainWindow::docs_dir() + "/workbench.md"));
    QString shown;
    on_next_modal([&shown](QWidget* modal) {
      if (auto* box = qobject_cast<QMessageBox*>(modal)) shown = box->text();
      modal->close();
    });
    window.about_action()->trigger();
    QCOMPARE(shown, text);
  }
};

QTEST_MAIN(TestWorkbenchSession)
#include "test_workbench_session.moc"
