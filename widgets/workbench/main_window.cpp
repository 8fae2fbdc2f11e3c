#include "widgets/workbench/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QRegularExpression>
#include <QStackedWidget>
#include <QStatusBar>
#include <QToolBar>
#include <qcustomplot.h>

#include "core/config/config_io.h"
#include "core/util/code_version.h"
#include "core/store/checked_store_reader.h"
#include "core/store/run_import.h"
#include "core/store/run_store.h"
#include "widgets/config/experiment_editor.h"
#include "widgets/dashboard/live_dashboard.h"
#include "widgets/plot/coalesced_plot.h"
#include "widgets/workbench/compare_page.h"
#include "widgets/workbench/job_script.h"
#include "widgets/models/run_label.h"
#include "widgets/workbench/live_page.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/run_queue_view.h"
#include "widgets/workbench/runs_page.h"
#include "widgets/workbench/setup_page.h"

namespace mok::gui {

MainWindow::MainWindow(const QString& db_path, QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("MoK Workbench — %1").arg(db_path));
  runs_ = new RunManager(this);
  runs_->set_db_path(db_path);

  auto* central = new QWidget;
  auto* row = new QHBoxLayout(central);
  row->setContentsMargins(0, 0, 0, 0);
  row->setSpacing(0);
  sidebar_ = new QListWidget;
  sidebar_->setFixedWidth(110);
  sidebar_->setStyleSheet(
      "QListWidget { background: #263238; color: #eceff1; border: none; font-size: 11pt; }"
      "QListWidget::item { padding: 12px 10px; }"
      "QListWidget::item:selected { background: #37474f; color: white; border-left: 3px solid #4fc3f7; }");
  for (const QString& name : {tr("Setup"), tr("Runs"), tr("Live"), tr("Compare")}) sidebar_->addItem(name);
  row->addWidget(sidebar_);
  stack_ = new QStackedWidget;
  setup_ = new SetupPage(runs_);
  runs_page_ = new RunsPage(runs_);
  live_ = new LivePage(runs_);
  compare_ = new ComparePage(runs_);
  stack_->addWidget(setup_);
  stack_->addWidget(runs_page_);
  stack_->addWidget(live_);
  stack_->addWidget(compare_);
  row->addWidget(stack_, 1);
  setCentralWidget(central);
  connect(sidebar_, &QListWidget::currentRowChanged, this, [this](int r) {
    stack_->setCurrentIndex(r);
    if (r == RunsPageIndex) runs_page_->refresh();
    if (r == ComparePageIndex && compare_->checked_runs().isEmpty()) compare_->refresh_run_list();
  });
  sidebar_->setCurrentRow(0);

  // This session's runs.
  auto* dock = new QDockWidget(tr("Run queue"), this);
  dock->setObjectName("run_queue");
  auto* dock_body = new QWidget;
  auto* dl = new QVBoxLayout(dock_body);
  dl->setContentsMargins(2, 2, 2, 2);
  auto* tools = new QToolBar;
  queue_ = new RunQueueView;
  tools->addAction(tr("Pause"), this, [this] { runs_->pause(queue_->selected_job()); });
  tools->addAction(tr("Resume"), this, [this] { runs_->resume(queue_->selected_job()); });
  tools->addAction(tr("Stop"), this, [this] { runs_->stop(queue_->selected_job()); });
  tools->addAction(tr("Show"), this, [this] {
    if (queue_->selected_job()) {
      live_->show_job(queue_->selected_job());
      show_page(LivePageIndex);
    }
  });
  dl->addWidget(tools);
  dl->addWidget(queue_);
  dock->setWidget(dock_body);
  addDockWidget(Qt::RightDockWidgetArea, dock);
  dock->setMinimumWidth(300);
  connect(queue_, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem* item) {
    live_->show_job(item->data(0, Qt::UserRole).toInt());
    show_page(LivePageIndex);
  });

  connect(runs_, &RunManager::job_added, this, &MainWindow::update_queue);
  connect(runs_, &RunManager::job_changed, this, &MainWindow::update_queue);
  connect(runs_, &RunManager::metrics_arrived, this, &MainWindow::update_queue);
  connect(runs_, &RunManager::job_finished, this, [this](int job, int, const QString&) {
    const auto info = runs_->job(job);
    statusBar()->showMessage(tr("%1: %2").arg(run_label(info.name, info.run_id), run_status_text(info.status, info.message)), 8000);
  });
  connect(setup_, &SetupPage::launched, this, [this](int job) {
    live_->show_job(job);
    show_page(LivePageIndex);
  });
  connect(runs_page_, &RunsPage::open_live, this, [this](qint64 id) {
    live_->show_run(id);
    show_page(LivePageIndex);
  });
  connect(runs_page_, &RunsPage::compare, this, [this](const QList<qint64>& ids) {
    compare_->set_runs(ids);
    show_page(ComparePageIndex);
  });
  connect(runs_page_, &RunsPage::message, this, [this](const QString& m) { statusBar()->showMessage(m, 8000); });

  build_menus();
  statusBar()->showMessage(tr("Run store: %1").arg(db_path));
  resize(1500, 950);
}

MainWindow::~MainWindow() {
  runs_->stop_all();  // the RunManager joins its threads when it is destroyed
}

void MainWindow::show_page(Page page) { sidebar_->setCurrentRow(int(page)); }

MainWindow::Page MainWindow::current_page() const { return Page(stack_->currentIndex()); }

void MainWindow::update_queue() { queue_->show_jobs(runs_->latest_jobs()); }

void MainWindow::closeEvent(QCloseEvent* event) {
  const int in_flight = runs_->in_flight_count();
  if (in_flight > 0 &&
      QMessageBox::question(this, tr("Quit with runs in flight?"),
                            tr("%n run(s) still training or waiting. Quitting stops them: a running one finishes "
                               "no further step, writes a checkpoint of its last whole step and is marked stopped. "
                               "Resume it later from the Runs page.\n\nQuit now?",
                               nullptr, in_flight),
                            QMessageBox::Yes | QMessageBox::No, QMessageBox::No) != QMessageBox::Yes) {
    event->ignore();
    return;
  }
  event->accept();
}

QString MainWindow::docs_dir() {
  const QString beside = QCoreApplication::applicationDirPath() + "/../docs";
  if (QFileInfo::exists(beside + "/workbench.md")) return QDir::cleanPath(beside);
  return QStringLiteral(MOK_SOURCE_DIR "/docs");
}

QString MainWindow::about_text() {
  return tr("MoK Workbench %1 (%2)\nQt %3 (built with %4), QCustomPlot %5\n\n"
            "Documentation: %6/workbench.md (and training.md beside it)")
      .arg(QStringLiteral(MOK_VERSION), QString::fromLatin1(mok::code_version()), QString::fromLatin1(qVersion()),
           QStringLiteral(QT_VERSION_STR), QStringLiteral(QCUSTOMPLOT_VERSION_STR), docs_dir());
}

bool MainWindow::open_database(const QString& path) {
  const QString current = runs_->db_path();
  // Runs in flight record into the store they started in, and the queue's run ids are its.
  if (const int in_flight = runs_->in_flight_count(); in_flight > 0 && path != current) {
    QMessageBox::warning(this, tr("Run database not switched"),
                         tr("%n run(s) still train or wait to train into %1. Switch stores once they end.",
                            nullptr, in_flight)
                             .arg(current));
    return false;
  }
  const QFileInfo file(path);
  if (file.exists() && (file.isDir() || file.size() > 0)) {
    try {
      check_run_store_readable(path.toStdString());
    } catch (const std::exception& e) {
      QMessageBox::warning(this, tr("Cannot open the run database"),
                           tr("%1\n\nThe workbench keeps using %2.").arg(QString::fromUtf8(e.what()), current));
      return false;
    }
  }
  runs_->set_db_path(path);
  setWindowTitle(tr("MoK Workbench — %1").arg(path));
  runs_page_->refresh();
  compare_->refresh_run_list();
  statusBar()->showMessage(tr("Run store: %1").arg(path));
  return true;
}

bool MainWindow::import_runs_from(const QString& path) {
  const QString here = runs_->db_path();
  RunImportResult result;
  QApplication::setOverrideCursor(Qt::WaitCursor);
  try {
    // The source first, so that a refused one leaves no new, empty store behind either.
    CheckedStoreReader source = open_import_source(path.toStdString(), here.toStdString());
    RunStore store = RunStore::open(here.toStdString());
    result = import_runs(store, source);
  } catch (const std::exception& e) {
    QApplication::restoreOverrideCursor();
    QMessageBox::warning(this, tr("Runs not imported"),
                         tr("%1\n\nNothing was imported into %2.").arg(QString::fromUtf8(e.what()), here));
    return false;
  }
  QApplication::restoreOverrideCursor();
  runs_page_->refresh();
  compare_->refresh_run_list();
  const qsizetype imported = qsizetype(result.imported.size()), skipped = qsizetype(result.skipped.size());
  QString text = tr("Imported %1 %2 from %3")
                     .arg(imported)
                     .arg(imported == 1 ? tr("run") : tr("runs"), QFileInfo(path).fileName());
  if (skipped > 0) text += tr(" (%1 already here, skipped)").arg(skipped);
  statusBar()->showMessage(text, 15000);
  return true;
}

bool MainWindow::export_job_script(const QString& path) {
  JobScriptOptions options;
  const QStringList existing = existing_job_script_outputs(path);
  if (!existing.isEmpty()) {
    if (QMessageBox::question(this, tr("Replace files?"),
                              tr("Writing the job script replaces:\n%1\n\nReplace them?").arg(existing.join('\n')),
                              QMessageBox::Yes | QMessageBox::No, QMessageBox::No) != QMessageBox::Yes) {
      statusBar()->showMessage(tr("Job script not written: %1 kept").arg(existing.join(", ")), 8000);
      return false;
    }
    options.replace_existing = true;
  }
  QString error;
  if (!write_job_script(setup_->editor()->config(), path, &error, options)) {
    QMessageBox::warning(this, tr("Export failed"), error);
    return false;
  }
  statusBar()->showMessage(tr("Wrote %1").arg(job_script_outputs(path).join(tr(" and "))), 8000);
  return true;
}

bool MainWindow::export_config_yaml(const QString& path, QString* error) {
  try {
    save_experiment_config(setup_->editor()->config(), path.toStdString());
    return true;
  } catch (const std::exception& e) {
    if (error) *error = QString::fromUtf8(e.what());
    return false;
  }
}

bool MainWindow::export_plots(const QString& folder, const QString& format) {
  QDir().mkpath(folder);
  bool ok = true;
  int i = 0;
  for (CoalescedPlot* p : live_->dashboard()->plots()) {
    QString name = p->title().isEmpty() ? QStringLiteral("plot%1").arg(i) : p->title();
    name = name.toLower().replace(QRegularExpression("[^a-z0-9]+"), "_");
    const QString path = QStringLiteral("%1/%2_%3.%4").arg(folder).arg(i++, 2, 10, QChar('0')).arg(name, format);
    ok &= format == "pdf" ? p->export_pdf(path, 900, 500) : p->export_png(path, 900, 500);
  }
  return ok;
}

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  if (!choose_open_file_) {
    choose_open_file_ = [this](const QString& caption, const QString& start, const QString& filter) {
      return QFileDialog::getOpenFileName(this, caption, start, filter);
    };
  }
  open_db_action_ = file->addAction(tr("Open run database…"), this, [this] {
    const QString path =
        choose_open_file_(tr("Open a run database"), runs_->db_path(), tr("Run store (*.db);;All files (*)"));
    if (!path.isEmpty()) open_database(path);
  });
  import_action_ = file->addAction(tr("Import runs from…"), this, [this] {
    const QString path = choose_open_file_(tr("Import runs from a run database"),
                                           QFileInfo(runs_->db_path()).absolutePath(),
                                           tr("Run store (*.db);;All files (*)"));
    if (!path.isEmpty()) import_runs_from(path);
  });
  file->addAction(tr("New run database…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("New run database"), QFileInfo(runs_->db_path()).absolutePath(),
                                                      tr("Run store (*.db)"), nullptr, QFileDialog::DontConfirmOverwrite);
    if (path.isEmpty()) return;
    if (QFileInfo::exists(path)) {  // the save dialog asked already; the store is opened, not emptied
      statusBar()->showMessage(tr("%1 exists: opened it as it is").arg(path), 8000);
    }
    open_database(path);
  });
  file->addSeparator();
  file->addAction(tr("Export config as YAML…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export config"),
                                                      QString::fromStdString(setup_->editor()->config().name) + ".yaml", tr("YAML (*.yaml)"));
    QString error;
    if (!path.isEmpty() && !export_config_yaml(path, &error)) QMessageBox::warning(this, tr("Export failed"), error);
  });
  file->addAction(tr("Export Slurm job script…"), this, [this] {
    // The dialog's own question covers the script; export_job_script asks for its config too.
    const QString path = QFileDialog::getSaveFileName(this, tr("Export job script"),
                                                      QString::fromStdString(setup_->editor()->config().name) + ".sbatch",
                                                      tr("Shell script (*.sbatch *.sh)"), nullptr, QFileDialog::DontConfirmOverwrite);
    if (!path.isEmpty()) export_job_script(path);
  });
  file->addAction(tr("Export live plots as PNG…"), this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Folder for the PNG files"));
    if (!dir.isEmpty()) export_plots(dir, "png");
  });
  file->addAction(tr("Export live plots as PDF…"), this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Folder for the PDF files"));
    if (!dir.isEmpty()) export_plots(dir, "pdf");
  });
  file->addSeparator();
  file->addAction(tr("Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* run = menuBar()->addMenu(tr("&Run"));
  launch_action_ = run->addAction(tr("Launch"), QKeySequence(Qt::CTRL | Qt::Key_Return), this, [this] { setup_->launch(); });
  launch_action_->setEnabled(setup_->can_launch());
  connect(setup_, &SetupPage::can_launch_changed, launch_action_, &QAction::setEnabled);
  run->addAction(tr("Stop all"), this, [this] { runs_->stop_all(); });
  QMenu* view = menuBar()->addMenu(tr("&View"));
  const QStringList pages = {tr("Setup"), tr("Runs"), tr("Live"), tr("Compare")};
  for (int i = 0; i < pages.size(); ++i)
    view->addAction(pages[i], QKeySequence(Qt::CTRL | (Qt::Key_1 + i)), this, [this, i] { show_page(Page(i)); });
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  about_action_ = help->addAction(tr("About MoK Workbench"), this,
                                  [this] { QMessageBox::about(this, tr("About MoK Workbench"), about_text()); });
}

}  // namespace mok::gui
