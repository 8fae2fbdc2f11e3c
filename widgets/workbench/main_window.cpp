#include "widgets/workbench/main_window.h"

#include <QAction>
#include <QApplication>
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
#include <QTreeWidget>

#include "core/config/config_io.h"
#include "widgets/config/experiment_editor.h"
#include "widgets/dashboard/live_dashboard.h"
#include "widgets/plot/coalesced_plot.h"
#include "widgets/workbench/compare_page.h"
#include "widgets/workbench/job_script.h"
#include "widgets/workbench/live_page.h"
#include "widgets/workbench/run_manager.h"
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
  queue_ = new QTreeWidget;
  queue_->setHeaderLabels({tr("Run"), tr("Status"), tr("Step")});
  queue_->setRootIsDecorated(false);
  queue_->header()->setStretchLastSection(false);
  queue_->header()->setSectionResizeMode(0, QHeaderView::Stretch);
  auto selected_job = [this] { return queue_->currentItem() ? queue_->currentItem()->data(0, Qt::UserRole).toInt() : 0; };
  tools->addAction(tr("Pause"), this, [this, selected_job] { runs_->pause(selected_job()); });
  tools->addAction(tr("Resume"), this, [this, selected_job] { runs_->resume(selected_job()); });
  tools->addAction(tr("Stop"), this, [this, selected_job] { runs_->stop(selected_job()); });
  tools->addAction(tr("Show"), this, [this, selected_job] {
    if (selected_job()) {
      live_->show_job(selected_job());
      show_page(LivePageIndex);
    }
  });
  dl->addWidget(tools);
  dl->addWidget(queue_);
  dock->setWidget(dock_body);
  addDockWidget(Qt::RightDockWidgetArea, dock);
  dock->setMinimumWidth(230);
  connect(queue_, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem* item) {
    live_->show_job(item->data(0, Qt::UserRole).toInt());
    show_page(LivePageIndex);
  });

  connect(runs_, &RunManager::job_added, this, &MainWindow::update_queue);
  connect(runs_, &RunManager::job_changed, this, &MainWindow::update_queue);
  connect(runs_, &RunManager::metrics_arrived, this, [this](int job, const std::vector<MetricRow>& rows) {
    for (int i = 0; i < queue_->topLevelItemCount(); ++i) {
      QTreeWidgetItem* item = queue_->topLevelItem(i);
      if (item->data(0, Qt::UserRole).toInt() == job)
        item->setText(2, QStringLiteral("%1/%2").arg(rows.back().step).arg(runs_->job(job).total_steps));
    }
  });
  connect(runs_, &RunManager::job_finished, this, [this](int job, int, const QString& message) {
    const auto info = runs_->job(job);
    statusBar()->showMessage(tr("%1: %2 %3").arg(info.name, QString::fromUtf8(run_status_name(info.status)), message), 8000);
    runs_page_->refresh();
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

void MainWindow::update_queue() {
  const int current = queue_->currentItem() ? queue_->currentItem()->data(0, Qt::UserRole).toInt() : 0;
  queue_->clear();
  for (const RunManager::JobInfo& j : runs_->jobs()) {
    auto* item = new QTreeWidgetItem({j.name, QString::fromUtf8(run_status_name(j.status)),
                                      j.last_step >= 0 ? QStringLiteral("%1/%2").arg(j.last_step).arg(j.total_steps) : QString()});
    item->setData(0, Qt::UserRole, j.job);
    item->setToolTip(1, j.message);
    queue_->addTopLevelItem(item);
    if (j.job == current) queue_->setCurrentItem(item);
  }
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
  file->addAction(tr("Open run database…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Open or create a run database"), runs_->db_path(),
                                                      tr("Run store (*.db)"), nullptr, QFileDialog::DontConfirmOverwrite);
    if (path.isEmpty()) return;
    runs_->set_db_path(path);
    setWindowTitle(tr("MoK Workbench — %1").arg(path));
    runs_page_->refresh();
    compare_->refresh_run_list();
  });
  file->addSeparator();
  file->addAction(tr("Export config as YAML…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export config"),
                                                      QString::fromStdString(setup_->editor()->config().name) + ".yaml", tr("YAML (*.yaml)"));
    QString error;
    if (!path.isEmpty() && !export_config_yaml(path, &error)) QMessageBox::warning(this, tr("Export failed"), error);
  });
  file->addAction(tr("Export Slurm job script…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export job script"),
                                                      QString::fromStdString(setup_->editor()->config().name) + ".sbatch", tr("Shell script (*.sbatch *.sh)"));
    QString error;
    if (path.isEmpty()) return;
    if (!write_job_script(setup_->editor()->config(), path, &error)) QMessageBox::warning(this, tr("Export failed"), error);
    else statusBar()->showMessage(tr("Wrote %1 and its config beside it").arg(path), 8000);
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
  run->addAction(tr("Launch"), QKeySequence(Qt::CTRL | Qt::Key_Return), this, [this] { setup_->launch(); });
  run->addAction(tr("Stop all"), this, [this] { runs_->stop_all(); });
  QMenu* view = menuBar()->addMenu(tr("&View"));
  const QStringList pages = {tr("Setup"), tr("Runs"), tr("Live"), tr("Compare")};
  for (int i = 0; i < pages.size(); ++i)
    view->addAction(pages[i], QKeySequence(Qt::CTRL | (Qt::Key_1 + i)), this, [this, i] { show_page(Page(i)); });
}

}  // namespace mok::gui
