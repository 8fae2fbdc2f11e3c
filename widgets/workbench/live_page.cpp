#include "widgets/workbench/live_page.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QTimer>
#include <QVBoxLayout>

#include "core/config/config_io.h"
#include "core/plan/memory_plan.h"
#include "core/store/run_store.h"
#include "widgets/config/device_catalog.h"
#include "widgets/dashboard/live_dashboard.h"
#include "widgets/models/run_label.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/run_queue_view.h"
#include "widgets/workbench/store_access.h"

namespace mok::gui {

LivePage::LivePage(RunManager* runs, QWidget* parent) : QWidget(parent), runs_(runs) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Run")));
  choice_ = new QComboBox;
  choice_->setMinimumWidth(260);
  bar->addWidget(choice_);
  pause_ = new QPushButton(tr("Pause"));
  stop_ = new QPushButton(tr("Stop"));
  stop_->setToolTip(tr("Stop after the current step and save a checkpoint"));
  bar->addWidget(pause_);
  bar->addWidget(stop_);
  status_ = new QLabel;
  bar->addWidget(status_, 1);
  layout->addLayout(bar);
  dashboard_ = new LiveDashboard;
  layout->addWidget(dashboard_, 1);

  connect(runs_, &RunManager::metrics_arrived, this, &LivePage::on_metrics);
  connect(runs_, &RunManager::job_changed, this, [this](int job) {
    rebuild_choices();
    if (job == job_) {
      if (!run_id_ && runs_->job(job).run_id) run_id_ = runs_->job(job).run_id;
      dashboard_->set_title(run_label(runs_->job(job).name, runs_->job(job).run_id));
      update_controls();
    }
  });
  connect(runs_, &RunManager::job_added, this, &LivePage::rebuild_choices);
  connect(choice_, &QComboBox::activated, this, [this](int i) {
    const QVariant d = choice_->itemData(i);
    if (d.toString().startsWith("job:")) show_job(d.toString().mid(4).toInt());
    else if (d.toString().startsWith("run:")) show_run(d.toString().mid(4).toLongLong());
  });
  connect(pause_, &QPushButton::clicked, this, [this] {
    if (!job_) return;
    if (runs_->job(job_).status == RunStatus::paused) runs_->resume(job_);
    else runs_->pause(job_);
  });
  connect(stop_, &QPushButton::clicked, this, [this] { if (job_) runs_->stop(job_); });
  poll_ = new QTimer(this);
  poll_->setInterval(1000);
  connect(poll_, &QTimer::timeout, this, &LivePage::poll_store);
  poll_->start();
  update_controls();
}

void LivePage::rebuild_choices() {
  const QString current = choice_->currentData().toString();
  choice_->blockSignals(true);
  choice_->clear();
  for (const RunManager::JobInfo& j : runs_->latest_jobs())
    choice_->addItem(QStringLiteral("%1 — %2 (this session)").arg(run_label(j.name, j.run_id), QString::fromUtf8(run_status_name(j.status))),
                     QStringLiteral("job:%1").arg(j.job));
  try {
    if (QFileInfo::exists(runs_->db_path())) {
      RunStore store = RunStore::open_readonly(runs_->db_path().toStdString());
      int n = 0;
      for (const mok::RunSummary& s : store.list_runs()) {
        if (runs_->job_of_run(s.id)) continue;
        choice_->addItem(QStringLiteral("%1 — %2").arg(run_label(QString::fromStdString(s.name), s.id), QString::fromUtf8(run_status_name(s.status))),
                         QStringLiteral("run:%1").arg(s.id));
        if (++n == 50) break;
      }
    }
  } catch (...) {
  }
  QString want = job_ ? QStringLiteral("job:%1").arg(job_) : run_id_ ? QStringLiteral("run:%1").arg(run_id_) : current;
  const int i = choice_->findData(want);
  if (i >= 0) choice_->setCurrentIndex(i);
  choice_->blockSignals(false);
}

void LivePage::show_job(int job) {
  job_ = job;
  run_id_ = runs_->job(job).run_id;
  loaded_step_ = -1;
  dashboard_->clear();
  dashboard_->set_title(run_label(runs_->job(job).name, run_id_));
  dashboard_->set_device(runs_->job(job).device, runs_->job(job).precision);
  dashboard_->set_planned_bytes(runs_->job(job).planned_bytes);
  if (run_id_ && QFileInfo::exists(runs_->db_path())) {
    try {
      std::vector<MetricRow> rows = load_metric_rows(runs_->db_path(), run_id_);
      if (!rows.empty()) loaded_step_ = rows.back().step;
      dashboard_->add_rows(rows);
    } catch (...) {
    }
  }
  rebuild_choices();
  update_controls();
}

void LivePage::show_run(qint64 run_id) {
  if (int job = runs_->job_of_run(run_id)) {
    show_job(job);
    return;
  }
  job_ = 0;
  run_id_ = run_id;
  loaded_step_ = -1;
  dashboard_->clear();
  try {
    RunStore store = RunStore::open_readonly(runs_->db_path().toStdString());
    const mok::RunRecord rec = store.get_run(run_id);
    dashboard_->set_title(run_label(QString::fromStdString(rec.summary.name), run_id));
    show_device_of(rec);
    std::vector<MetricRow> rows = load_metric_rows(runs_->db_path(), run_id);
    if (!rows.empty()) loaded_step_ = rows.back().step;
    dashboard_->add_rows(rows);
  } catch (const std::exception& e) {
    dashboard_->set_title(QString::fromUtf8(e.what()));
    dashboard_->set_device(QString(), QString());
  }
  rebuild_choices();
  update_controls();
}

void LivePage::show_device_of(const mok::RunRecord& rec) {
  // As the run's config placed it; the store's device text where the config no longer parses.
  try {
    const ExperimentConfig config = parse_experiment_config(rec.config_yaml, "run " + std::to_string(rec.summary.id));
    const RankDevice device = rank0_device(config);
    dashboard_->set_device(QString::fromStdString(device.label()), QString::fromStdString(device.precision));
    dashboard_->set_planned_bytes(estimate_memory(config).total_bytes());
  } catch (const std::exception&) {
    dashboard_->set_device(QString::fromStdString(rec.device), QString());
  }
}

void LivePage::on_metrics(int job, const std::vector<MetricRow>& rows) {
  if (job != job_) return;
  if (loaded_step_ < 0) {
    dashboard_->add_rows(rows);
  } else {
    std::vector<MetricRow> fresh;
    for (const MetricRow& r : rows)
      if (r.step > loaded_step_) fresh.push_back(r);
    dashboard_->add_rows(fresh);
  }
  status_->setText(tr("step %1 of %2").arg(rows.back().step).arg(runs_->job(job).total_steps));
}

void LivePage::poll_store() {
  // Runs not of this session (e.g. `mok train` in a terminal): follow the store.
  if (job_ || !run_id_ || !isVisible()) return;
  try {
    RunStore store = RunStore::open_readonly(runs_->db_path().toStdString());
    const auto rec = store.find_run(run_id_);
    if (!rec || (rec->summary.status != RunStatus::running && rec->summary.status != RunStatus::paused)) return;
    std::vector<MetricRow> rows = load_metric_rows(runs_->db_path(), run_id_, loaded_step_);
    if (rows.empty()) return;
    loaded_step_ = rows.back().step;
    dashboard_->add_rows(rows);
  } catch (...) {
  }
}

void LivePage::update_controls() {
  const bool live = job_ && runs_->has_job(job_);
  const RunStatus s = live ? runs_->job(job_).status : RunStatus::finished;
  const bool active = live && (s == RunStatus::running || s == RunStatus::paused);
  pause_->setEnabled(active);
  stop_->setEnabled(active || (live && s == RunStatus::queued));
  pause_->setText(s == RunStatus::paused ? tr("Resume") : tr("Pause"));
  if (live) {
    const auto info = runs_->job(job_);
    status_->setText(run_status_text(info.status, info.message));
  } else if (!run_id_) {
    status_->setText(tr("Launch a run on the Setup page, or pick one from the store."));
  } else {
    status_->clear();
  }
}

}  // namespace mok::gui
