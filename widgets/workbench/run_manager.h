#pragma once
// RunManager: launches training runs on worker threads and brings their events onto the
// GUI thread. Each job owns a Trainer running on its own std::thread; a sink on that thread
// only queues rows under a mutex and posts one queued call, so the interface never waits on
// training and no widget is touched from a worker. Runs beyond max_concurrent wait in a
// queue. Pause, resume and stop go to the trainer's thread-safe flags; a stopped or finished
// run can be resumed from its latest checkpoint as a new session of the same run.

#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <QObject>
#include <QString>

#include "core/config/experiment_config.h"
#include "core/events/metric_event.h"

namespace mok {
class Trainer;
}

namespace mok::gui {

class RunManager : public QObject {
  Q_OBJECT

 public:
  struct JobInfo {
    int job = 0;
    int64_t run_id = 0;  // in the store once the run started
    QString name;
    RunStatus status = RunStatus::queued;
    QString message;
    int64_t last_step = -1;
    int64_t total_steps = 0;
    QString device;     // where rank 0 computes, as planned from the config: "cpu", "cuda:0"
    QString precision;  // its compute precision: "fp32", "bf16"
    double eta_s = NAN; // seconds left at the recent pace; NaN when not known
    double planned_bytes = NAN;  // the memory plan's total per rank (core/plan)
  };

  explicit RunManager(QObject* parent = nullptr);
  ~RunManager() override;  // stops every run and joins the threads

  void set_db_path(const QString& path);
  QString db_path() const { return db_path_; }
  void set_max_concurrent(int n);  // 1 = one at a time, the rest queued
  int max_concurrent() const { return max_concurrent_; }

  // Returns the job id. `resume_path`: a checkpoint folder to continue from, of the store's
  // run `resumed_run_id`.
  int launch(const ExperimentConfig& config, const QString& resume_path = QString(), int64_t resumed_run_id = 0);
  // Continue run `run_id` of the store from its latest checkpoint; 0 and `error` on failure.
  int resume_from_checkpoint(int64_t run_id, QString* error = nullptr);
  void pause(int job);
  void resume(int job);
  void stop(int job);
  void stop_all();
  void cancel_queued(int job);

  std::vector<JobInfo> jobs() const;
  // One job per run: a run resumed in this session is its newest job (the queue's rows).
  std::vector<JobInfo> latest_jobs() const;
  bool has_job(int job) const { return jobs_.count(job) > 0; }
  JobInfo job(int job) const;
  int job_of_run(int64_t run_id) const;  // the run's newest job; 0 when no job runs it
  int active_count() const;               // running or paused
  int in_flight_count() const;            // running, paused or waiting to start
  static bool training_available();       // false when the core was built without a trainer

 signals:
  void job_added(int job);
  void job_started(int job, qint64 run_id);
  void job_changed(int job);  // status, message
  void metrics_arrived(int job, const std::vector<mok::MetricRow>& rows);
  void job_finished(int job, int status, const QString& message);

 private:
  struct Job;
  class Sink;
  void start_waiting();
  void start(Job& j);
  void drain(int job);
  void handle_started(int job, int64_t run_id, int64_t total_steps);
  void resolve_run_id(int job);
  void on_thread_done(int job);

  QString db_path_;
  int max_concurrent_ = 1;
  int next_job_ = 1;
  std::map<int, std::unique_ptr<Job>> jobs_;
  std::deque<int> waiting_;
};

}  // namespace mok::gui

Q_DECLARE_METATYPE(std::vector<mok::MetricRow>)
