#include "widgets/workbench/run_queue_view.h"

#include <QHeaderView>
#include <QProgressBar>

#include "widgets/models/run_label.h"
#include "widgets/workbench/eta_estimate.h"

namespace mok::gui {

QString run_status_text(RunStatus status, const QString& message) {
  const QString word = QString::fromUtf8(run_status_name(status));
  if (message.isEmpty()) return word;
  if (message.startsWith(word)) return message;
  return word + QStringLiteral(": ") + message;
}

RunQueueView::RunQueueView(QWidget* parent) : QTreeWidget(parent) {
  setHeaderLabels({tr("Run"), tr("Status"), tr("Progress"), tr("Left")});
  headerItem()->setToolTip(EtaColumn, tr("Time left at the pace of the recent steps"));
  setRootIsDecorated(false);
  setUniformRowHeights(true);
  header()->setStretchLastSection(false);
  header()->setSectionResizeMode(RunColumn, QHeaderView::Stretch);
  header()->setSectionResizeMode(StatusColumn, QHeaderView::ResizeToContents);
  header()->setSectionResizeMode(ProgressColumn, QHeaderView::Fixed);
  header()->setSectionResizeMode(EtaColumn, QHeaderView::ResizeToContents);
  header()->resizeSection(ProgressColumn, 90);
}

void RunQueueView::show_jobs(const std::vector<RunManager::JobInfo>& jobs) {
  // Drop rows of jobs no longer listed, then add or update in order.
  for (int i = topLevelItemCount() - 1; i >= 0; --i) {
    const int job = topLevelItem(i)->data(0, Qt::UserRole).toInt();
    const bool listed = std::any_of(jobs.begin(), jobs.end(), [job](const auto& j) { return j.job == job; });
    if (!listed) delete takeTopLevelItem(i);
  }
  for (size_t n = 0; n < jobs.size(); ++n) {
    const RunManager::JobInfo& j = jobs[n];
    int row = row_of_job(j.job);
    QTreeWidgetItem* item = row >= 0 ? topLevelItem(row) : nullptr;
    if (!item) {
      item = new QTreeWidgetItem;
      item->setData(0, Qt::UserRole, j.job);
      insertTopLevelItem(int(n), item);
      auto* bar = new QProgressBar;
      bar->setTextVisible(true);
      bar->setMaximumHeight(16);
      setItemWidget(item, ProgressColumn, bar);
    } else if (row != int(n)) {
      const bool selected = item->isSelected();
      QWidget* old = itemWidget(item, ProgressColumn);
      const int value = old ? static_cast<QProgressBar*>(old)->value() : 0;
      takeTopLevelItem(row);
      insertTopLevelItem(int(n), item);
      auto* bar = new QProgressBar;  // a moved item loses its widget
      bar->setValue(value);
      bar->setMaximumHeight(16);
      setItemWidget(item, ProgressColumn, bar);
      item->setSelected(selected);
    }
    const QString label = run_label(j.name, j.run_id);
    item->setText(RunColumn, label);
    item->setToolTip(RunColumn, label);
    item->setText(StatusColumn, QString::fromUtf8(run_status_name(j.status)));
    item->setToolTip(StatusColumn, run_status_text(j.status, j.message));
    auto* bar = static_cast<QProgressBar*>(itemWidget(item, ProgressColumn));
    const int64_t done = std::max<int64_t>(0, j.last_step);
    bar->setRange(0, int(std::max<int64_t>(1, j.total_steps)));
    bar->setValue(int(std::min(done, std::max<int64_t>(1, j.total_steps))));
    bar->setFormat(QStringLiteral("%1/%2").arg(done).arg(j.total_steps));
    const bool active = j.status == RunStatus::running;
    item->setText(EtaColumn, active ? format_duration(j.eta_s) : j.status == RunStatus::paused ? tr("paused") : QString());
  }
}

int RunQueueView::selected_job() const { return currentItem() ? currentItem()->data(0, Qt::UserRole).toInt() : 0; }

int RunQueueView::row_of_job(int job) const {
  for (int i = 0; i < topLevelItemCount(); ++i)
    if (topLevelItem(i)->data(0, Qt::UserRole).toInt() == job) return i;
  return -1;
}

QString RunQueueView::text(int row, Column column) const {
  return row >= 0 && row < topLevelItemCount() ? topLevelItem(row)->text(column) : QString();
}

QProgressBar* RunQueueView::progress_bar(int row) const {
  return row >= 0 && row < topLevelItemCount() ? static_cast<QProgressBar*>(itemWidget(topLevelItem(row), ProgressColumn))
                                               : nullptr;
}

}  // namespace mok::gui
