#pragma once
// RunQueueView: this session's runs, one row per run (a run resumed here is its newest
// job): the run's name with its id, its status, a progress bar of steps done and the time
// left at the recent pace. Rows are updated in place, so the selection survives updates.

#include <vector>

#include <QTreeWidget>

#include "widgets/workbench/run_manager.h"

class QProgressBar;

namespace mok::gui {

class RunQueueView : public QTreeWidget {
  Q_OBJECT

 public:
  enum Column { RunColumn, StatusColumn, ProgressColumn, EtaColumn };

  explicit RunQueueView(QWidget* parent = nullptr);

  // Shows these jobs (RunManager::latest_jobs()), in this order.
  void show_jobs(const std::vector<RunManager::JobInfo>& jobs);
  int selected_job() const;  // 0 when none
  int row_of_job(int job) const;  // -1 when not listed
  QString text(int row, Column column) const;
  QProgressBar* progress_bar(int row) const;
};

// "running", "stopped at step 18", "failed: <why>": the status, then what the message adds
// (a message that starts with the status word does not repeat it).
QString run_status_text(RunStatus status, const QString& message);

}  // namespace mok::gui
