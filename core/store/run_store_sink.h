#pragma once
// RunStoreSink: the MetricSink that records a training run in a RunStore.
//
// Who creates the run: the caller, normally. `mok train` calls store.create_run() first
// (it needs the id for its output) and passes it in RunStarted::run_id; the sink then
// takes the run over (status running, this process as owner — also right for a resume).
// When RunStarted::run_id is 0 the sink creates the run itself from RunStarted's name and
// config plus the options below; run_id() tells the id either way. A run taken over on
// other hardware than it was created on (another CPU, BLAS kernel family or GPU) gets a
// warning event: from there on its metrics are not bitwise an uninterrupted run's.
//
// Metrics go through a MetricWriter (batched, flushed at least every max_delay_ms, and
// before every event, checkpoint and the end of the run). A trainer that calls
// commit_checkpoint before making a checkpoint visible gets the metrics and the checkpoint
// row in the store first, in one transaction. A store failure is kept (failure(),
// last_error()) and printed once to stderr; the rows stay buffered for a later try. The
// trainer asks failure() after every step and stops a run whose results cannot be
// recorded; commit_checkpoint throws, so that no checkpoint appears that the store lacks. The RunStore must outlive the sink and stay where it is
// (the sink and its writer keep a reference to it).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/events/metric_event.h"
#include "core/store/metric_writer.h"
#include "core/store/run_environment.h"

namespace mok {

class RunStore;

struct RunStoreSinkOptions {
  std::string device;        // recorded when the sink creates the run
  std::string host;          // "" → this host
  std::string code_version;  // "" → this build's version
  std::optional<RunEnvironment> environment;  // nullopt → this process's (probe_run_environment())
  MetricWriterOptions writer;
};

class RunStoreSink : public MetricSink {
 public:
  explicit RunStoreSink(RunStore& store, RunStoreSinkOptions options = {});
  ~RunStoreSink() override;  // flushes what is buffered

  void on_run_started(const RunStarted& started) override;
  void on_metrics(const MetricRow& row) override;
  void on_event(const std::string& text) override;  // "warning: …"/"error: …" set the level
  void on_checkpoint(int64_t step, const std::string& path) override;
  void on_run_finished(RunStatus status, const std::string& message) override;

  // Before a checkpoint becomes visible: the buffered metric rows and the checkpoint row in
  // one transaction, so the store never lags a checkpoint on disk. The on_checkpoint that
  // follows for the same step and path is then not recorded twice. Throws StoreError when
  // the store cannot record them (the checkpoint must then not be published).
  void commit_checkpoint(int64_t step, const std::string& path);

  // "" while every write has succeeded (or the background writer's retry has); else why the
  // run's results cannot be recorded.
  std::string failure() const;

  int64_t run_id() const { return run_id_; }
  void flush();
  const std::string& last_error() const { return last_error_; }
  int error_count() const { return error_count_; }

 private:
  template <class F>
  void guarded(F&& f);
  void warn_if_other_hardware(int64_t start_step);

  RunStore& store_;
  RunStoreSinkOptions options_;
  int64_t run_id_ = 0;
  std::unique_ptr<MetricWriter> writer_;
  std::string last_error_;
  int error_count_ = 0;
  int64_t committed_step_ = -1;  // the last commit_checkpoint, until its on_checkpoint
  std::string committed_path_;
};

}  // namespace mok
