#include "core/store/run_store_sink.h"

#include <cstdio>

#include "core/store/run_store.h"

namespace mok {

RunStoreSink::RunStoreSink(RunStore& store, RunStoreSinkOptions options)
    : store_(store), options_(std::move(options)) {}

RunStoreSink::~RunStoreSink() {
  guarded([&] {
    if (writer_) writer_->flush();
  });
}

template <class F>
void RunStoreSink::guarded(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    last_error_ = e.what();
    if (error_count_++ == 0) std::fprintf(stderr, "mok: run store: %s\n", e.what());
  }
}

void RunStoreSink::on_run_started(const RunStarted& started) {
  guarded([&] {
    if (writer_) writer_->flush();
    writer_.reset();
    if (started.run_id != 0) {
      run_id_ = started.run_id;
      store_.set_status(run_id_, RunStatus::running,
                        started.start_step > 0 ? "resumed at step " + std::to_string(started.start_step) : "");
      warn_if_other_hardware(started.start_step);
    } else {
      NewRun run;
      run.name = started.name;
      run.config_yaml = started.config_yaml;
      run.host = options_.host;
      run.device = options_.device;
      run.code_version = options_.code_version;
      run.environment = options_.environment;
      run_id_ = store_.create_run(run);
    }
    writer_ = std::make_unique<MetricWriter>(store_, run_id_, options_.writer);
  });
}

void RunStoreSink::warn_if_other_hardware(int64_t start_step) {
  const RunEnvironment stored = store_.get_run(run_id_).environment;
  if (!stored.recorded) return;  // a run from before environments were kept: nothing to compare
  const RunEnvironment here = options_.environment ? *options_.environment : probe_run_environment();
  const auto differences = environment_differences(stored, here);
  if (differences.empty()) return;
  store_.append_event(run_id_, "warning",
                      "resumed at step " + std::to_string(start_step) + " on other hardware (" +
                          describe_differences(differences) +
                          "): from here on the metrics match an uninterrupted run to float precision, not bitwise");
}

void RunStoreSink::on_metrics(const MetricRow& row) {
  if (!writer_) return;  // no run (on_run_started failed or was not called)
  guarded([&] { writer_->append(row); });
}

void RunStoreSink::on_event(const std::string& text) {
  if (run_id_ == 0) return;
  flush();
  const char* level = text.rfind("warning", 0) == 0 ? "warning" : text.rfind("error", 0) == 0 ? "error" : "info";
  guarded([&] { store_.append_event(run_id_, level, text); });
}

void RunStoreSink::commit_checkpoint(int64_t step, const std::string& path) {
  if (run_id_ == 0 || !writer_) return;
  bool failed = false;
  guarded([&] {
    try {
      writer_->flush_with_checkpoint(step, path);
    } catch (...) {
      failed = true;
      throw;
    }
    committed_step_ = step;
    committed_path_ = path;
  });
  // A checkpoint the store cannot list must not appear.
  if (failed) throw StoreError("the run store cannot record the checkpoint of step " + std::to_string(step) + ": " +
                               last_error_);
}

std::string RunStoreSink::failure() const {
  if (error_count_ > 0) return last_error_;
  return writer_ ? writer_->last_error() : std::string();
}

void RunStoreSink::on_checkpoint(int64_t step, const std::string& path) {
  if (run_id_ == 0) return;
  if (step == committed_step_ && path == committed_path_) {
    committed_step_ = -1;  // recorded by commit_checkpoint
    return;
  }
  flush();
  guarded([&] { store_.add_checkpoint(run_id_, step, path); });
}

void RunStoreSink::on_run_finished(RunStatus status, const std::string& message) {
  if (run_id_ == 0) return;
  flush();
  guarded([&] { store_.set_status(run_id_, status, message); });
}

void RunStoreSink::flush() {
  guarded([&] {
    if (writer_) writer_->flush();
  });
}

}  // namespace mok
