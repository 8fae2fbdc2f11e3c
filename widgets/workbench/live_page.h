#pragma once
// LivePage: the dashboard of one run, chosen from the runs of this session and the store.
// A run of this session streams rows from the RunManager; any other run is replayed from
// the store and then followed by polling the store (runs started from the CLI too). The
// header and the memory plot name the run's device and precision (cpu · fp32, cuda:0 · bf16).

#include <vector>

#include <QWidget>

#include "core/events/metric_event.h"

namespace mok {
struct RunRecord;
}

class QComboBox;
class QLabel;
class QPushButton;
class QTimer;

namespace mok::gui {

class LiveDashboard;
class RunManager;

class LivePage : public QWidget {
  Q_OBJECT

 public:
  LivePage(RunManager* runs, QWidget* parent = nullptr);
  LiveDashboard* dashboard() const { return dashboard_; }

  void show_job(int job);          // a run of this session
  void show_run(qint64 run_id);    // any run of the store
  int shown_job() const { return job_; }
  QLabel* status_label() const { return status_; }
  qint64 shown_run() const { return run_id_; }

 private:
  void on_metrics(int job, const std::vector<mok::MetricRow>& rows);
  void show_device_of(const mok::RunRecord& rec);  // of a run of the store
  void update_controls();
  void rebuild_choices();
  void poll_store();

  RunManager* runs_;
  LiveDashboard* dashboard_ = nullptr;
  QComboBox* choice_ = nullptr;
  QLabel* status_ = nullptr;
  QPushButton* pause_ = nullptr;
  QPushButton* stop_ = nullptr;
  QTimer* poll_ = nullptr;
  int job_ = 0;
  qint64 run_id_ = 0;
  int64_t loaded_step_ = -1;  // rows up to here came from the store
};

}  // namespace mok::gui
