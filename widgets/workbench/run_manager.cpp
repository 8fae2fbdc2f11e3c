#include "widgets/workbench/run_manager.h"

#include <atomic>
#include <filesystem>

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>

#include "core/config/config_io.h"
#include "core/plan/memory_plan.h"
#include "core/store/run_store.h"
#include "widgets/config/device_catalog.h"
#include "widgets/workbench/eta_estimate.h"

#if __has_include("core/train/trainer.h")
#include "core/train/trainer.h"
#define MOK_GUI_HAVE_TRAINER 1
#endif

namespace mok::gui {

// Runs on the training thread: queue, post once, return.
class RunManager::Sink : public MetricSink {
 public:
  Sink(RunManager* manager, int job) : manager_(manager), job_(job) {}

  void on_run_started(const RunStarted& s) override {
    const int64_t id = s.run_id;
    const int64_t total = s.total_steps;
    QMetaObject::invokeMethod(manager_, [m = manager_, job = job_, id, total] { m->handle_started(job, id, total); },
                              Qt::QueuedConnection);
  }
  void on_metrics(const MetricRow& row) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      rows_.push_back(row);
    }
    if (!posted_.exchange(true))
      QMetaObject::invokeMethod(manager_, [m = manager_, job = job_] { m->drain(job); }, Qt::QueuedConnection);
  }
  void on_run_finished(RunStatus status, const std::string& message) override {
    std::lock_guard<std::mutex> lock(mutex_);
    final_status_ = status;
    final_message_ = message;
  }
  std::vector<MetricRow> take() {
    posted_.store(false);
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<MetricRow> out;
    out.swap(rows_);
    return out;
  }

  RunManager* manager_;
  int job_;
  std::mutex mutex_;
  std::vector<MetricRow> rows_;
  std::atomic<bool> posted_{false};
  RunStatus final_status_ = RunStatus::failed;
  std::string final_message_;
};

struct RunManager::Job {
  JobInfo info;
  EtaEstimate eta;
  ExperimentConfig config;
  QString resume_path;
  std::unique_ptr<Sink> sink;
#ifdef MOK_GUI_HAVE_TRAINER
  std::unique_ptr<Trainer> trainer;
  TrainResult result;
#endif
  std::thread thread;
};

void RunManager::handle_started(int job, int64_t run_id, int64_t total_steps) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second->info.total_steps = total_steps;
  if (it->second->info.status != RunStatus::paused) it->second->info.status = RunStatus::running;
  if (run_id > 0) {
    it->second->info.run_id = run_id;
    emit job_started(job, run_id);
  } else {
    resolve_run_id(job);
  }
  emit job_changed(job);
}

// A new run is created in the store by the trainer's own store sink, after RunStarted went
// out with run_id 0; find it: the newest running run of this process with the job's name
// that no other job has claimed. (The trainer's result confirms the id at the end.)
void RunManager::resolve_run_id(int job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second->info.run_id > 0 || db_path_.isEmpty()) return;
  try {
    RunStore store = RunStore::open_readonly(db_path_.toStdString());
    RunFilter filter;
    filter.status = RunStatus::running;
    for (const mok::RunSummary& s : store.list_runs(filter)) {
      if (QString::fromStdString(s.name) != it->second->info.name || job_of_run(s.id)) continue;
      const auto rec = store.find_run(s.id);
      if (!rec || rec->pid != QCoreApplication::applicationPid()) continue;
      it->second->info.run_id = s.id;
      emit job_started(job, s.id);
      return;
    }
  } catch (...) {
  }
}

RunManager::RunManager(QObject* parent) : QObject(parent) {
  qRegisterMetaType<std::vector<mok::MetricRow>>();
}

RunManager::~RunManager() {
  stop_all();
  for (auto& [id, j] : jobs_)
    if (j->thread.joinable()) j->thread.join();
}

bool RunManager::training_available() {
#ifdef MOK_GUI_HAVE_TRAINER
  return true;
#else
  return false;
#endif
}

void RunManager::set_db_path(const QString& path) { db_path_ = path; }

void RunManager::set_max_concurrent(int n) {
  max_concurrent_ = std::max(1, n);
  start_waiting();
}

int RunManager::launch(const ExperimentConfig& config, const QString& resume_path, int64_t resumed_run_id) {
  auto j = std::make_unique<Job>();
  const int id = next_job_++;
  j->info.job = id;
  j->info.run_id = resumed_run_id;  // a resumed run keeps its id from the start
  j->info.name = QString::fromStdString(config.name);
  j->info.total_steps = config.train.steps;
  const RankDevice device = rank0_device(config);
  j->info.device = QString::fromStdString(device.label());
  j->info.planned_bytes = estimate_memory(config).total_bytes();
  j->info.precision = QString::fromStdString(device.precision);
  j->config = config;
  j->resume_path = resume_path;
  jobs_[id] = std::move(j);
  waiting_.push_back(id);
  emit job_added(id);
  start_waiting();
  return id;
}

int RunManager::resume_from_checkpoint(int64_t run_id, QString* error) {
  try {
    RunStore store = RunStore::open_readonly(db_path_.toStdString());
    const mok::RunRecord rec = store.get_run(run_id);
    const std::vector<CheckpointRecord> cps = store.checkpoints(run_id);
    if (cps.empty()) {
      if (error) *error = tr("Run %1 has no checkpoint to resume from.").arg(run_id);
      return 0;
    }
    const std::string path = cps.back().path;
    if (!std::filesystem::exists(path)) {
      if (error) *error = tr("The checkpoint %1 is missing.").arg(QString::fromStdString(path));
      return 0;
    }
    const ExperimentConfig config = parse_experiment_config(rec.config_yaml, "run " + std::to_string(run_id));
    return launch(config, QString::fromStdString(path), run_id);
  } catch (const std::exception& e) {
    if (error) *error = QString::fromUtf8(e.what());
    return 0;
  }
}

int RunManager::active_count() const {
  int n = 0;
  for (const auto& [id, j] : jobs_)
    if (j->thread.joinable() && (j->info.status == RunStatus::running || j->info.status == RunStatus::paused ||
                                 j->info.status == RunStatus::queued))
      ++n;
  return n;
}

int RunManager::in_flight_count() const { return active_count() + int(waiting_.size()); }

void RunManager::start_waiting() {
  while (!waiting_.empty() && active_count() < max_concurrent_) {
    const int id = waiting_.front();
    waiting_.pop_front();
    auto it = jobs_.find(id);
    if (it != jobs_.end()) start(*it->second);
  }
}

void RunManager::start(Job& j) {
  j.sink = std::make_unique<Sink>(this, j.info.job);
#ifdef MOK_GUI_HAVE_TRAINER
  TrainerOptions options;
  options.db_path = db_path_.toStdString();
  options.resume_path = j.resume_path.toStdString();
  options.device_label = j.config.parallel.device;
  j.trainer = std::make_unique<Trainer>(j.config, options);
  j.info.status = RunStatus::running;
  Trainer* trainer = j.trainer.get();
  Sink* sink = j.sink.get();
  TrainResult* result = &j.result;
  const int id = j.info.job;
  j.thread = std::thread([this, trainer, sink, result, id] {
    *result = trainer->run({sink});
    QMetaObject::invokeMethod(this, [this, id] { on_thread_done(id); }, Qt::QueuedConnection);
  });
#else
  j.info.status = RunStatus::failed;
  j.info.message = tr("This build has no training core (core/train).");
  const int id = j.info.job;
  QMetaObject::invokeMethod(this, [this, id] { on_thread_done(id); }, Qt::QueuedConnection);
#endif
  emit job_changed(j.info.job);
}

void RunManager::drain(int job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second->sink) return;
  std::vector<MetricRow> rows = it->second->sink->take();
  if (rows.empty()) return;
  if (it->second->info.run_id == 0) {
    resolve_run_id(job);
    if (it->second->info.run_id) emit job_changed(job);
  }
  Job& j = *it->second;
  j.info.last_step = rows.back().step;
  for (const MetricRow& r : rows) j.eta.add(r.step, r.wall_s);
  j.info.eta_s = j.eta.seconds_left(j.info.total_steps);
  emit metrics_arrived(job, rows);
}

void RunManager::on_thread_done(int job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  Job& j = *it->second;
  if (j.thread.joinable()) j.thread.join();
  drain(job);
#ifdef MOK_GUI_HAVE_TRAINER
  j.info.status = j.result.status;
  j.info.message = QString::fromStdString(j.result.message);
  if (j.result.run_id && j.result.run_id != j.info.run_id) {
    j.info.run_id = j.result.run_id;
    emit job_started(job, j.info.run_id);
  }
  j.trainer.reset();
#endif
  j.info.eta_s = NAN;
  emit job_changed(job);
  emit job_finished(job, int(j.info.status), j.info.message);
  start_waiting();
}

void RunManager::pause(int job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second->info.status != RunStatus::running) return;
#ifdef MOK_GUI_HAVE_TRAINER
  if (it->second->trainer) it->second->trainer->set_paused(true);
#endif
  it->second->info.status = RunStatus::paused;
  emit job_changed(job);
}

void RunManager::resume(int job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second->info.status != RunStatus::paused) return;
#ifdef MOK_GUI_HAVE_TRAINER
  if (it->second->trainer) it->second->trainer->set_paused(false);
#endif
  it->second->info.status = RunStatus::running;
  emit job_changed(job);
}

void RunManager::stop(int job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  if (it->second->info.status == RunStatus::queued) {
    cancel_queued(job);
    return;
  }
#ifdef MOK_GUI_HAVE_TRAINER
  if (it->second->trainer) {
    it->second->trainer->request_stop();
    it->second->trainer->set_paused(false);  // a paused run must wake up to stop
  }
#endif
  it->second->info.message = tr("stopping…");
  emit job_changed(job);
}

void RunManager::cancel_queued(int job) {
  auto w = std::find(waiting_.begin(), waiting_.end(), job);
  if (w == waiting_.end()) return;
  waiting_.erase(w);
  jobs_[job]->info.status = RunStatus::stopped;
  jobs_[job]->info.message = tr("cancelled before it started");
  emit job_changed(job);
  emit job_finished(job, int(RunStatus::stopped), jobs_[job]->info.message);
}

void RunManager::stop_all() {
  for (int id : std::vector<int>(waiting_.begin(), waiting_.end())) cancel_queued(id);
  for (auto& [id, j] : jobs_) {
#ifdef MOK_GUI_HAVE_TRAINER
    if (j->trainer) {
      j->trainer->request_stop();
      j->trainer->set_paused(false);
    }
#endif
  }
}

std::vector<RunManager::JobInfo> RunManager::jobs() const {
  std::vector<JobInfo> out;
  for (const auto& [id, j] : jobs_) out.push_back(j->info);
  return out;
}

RunManager::JobInfo RunManager::job(int job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? JobInfo{} : it->second->info;
}

int RunManager::job_of_run(int64_t run_id) const {
  int newest = 0;
  for (const auto& [id, j] : jobs_)
    if (j->info.run_id == run_id && run_id != 0) newest = id;  // jobs_ is ordered by job id
  return newest;
}

std::vector<RunManager::JobInfo> RunManager::latest_jobs() const {
  std::vector<JobInfo> out;
  for (const auto& [id, j] : jobs_)
    if (j->info.run_id == 0 || job_of_run(j->info.run_id) == id) out.push_back(j->info);
  return out;
}

}  // namespace mok::gui
